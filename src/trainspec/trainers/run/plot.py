"""A picture of the run at its end: by default loss (and validation loss) against step, learning
rate below; `panels` chooses other metrics (the RL run draws reward above loss).

    save_plot(monitor.history, run_dir / "loss.png")   # the path, or None
    save_plot(history, run_dir / "rl.png", (("reward", ("reward",)), ("loss", ("loss",))))

`history` is the Monitor's list of records (`step` plus metrics). Records without a number for a
metric are skipped for that metric, so train and validation records can be mixed freely. The
figure is drawn with matplotlib's Agg canvas directly (no pyplot, no display, no global state).
A plot is a convenience: without matplotlib, or when the file cannot be written, this warns and
returns None instead of failing the run.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from pathlib import Path

logger = logging.getLogger(__name__)


def _series(history: list[dict], key: str) -> tuple[list[float], list[float]]:
    steps, values = [], []
    for record in history:
        value, step = record.get(key), record.get("step")
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not isinstance(step, int | float) or not math.isfinite(value):
            continue
        steps.append(step)
        values.append(value)
    return steps, values


# (y-axis label, metrics drawn on it) per panel, top to bottom
Panels = tuple[tuple[str, tuple[str, ...]], ...]
TRAINING_PANELS: Panels = (("loss", ("loss", "val_loss")), ("learning rate", ("lr",)))


def save_plot(history: list[dict], path: Path, panels: Panels = TRAINING_PANELS) -> Path | None:
    """Write a PNG of the `panels` metrics against step; None when there is nothing to plot."""
    drawn = [(label, [(key, _series(history, key)) for key in keys]) for label, keys in panels]
    drawn = [
        (label, [(key, series) for key, series in lines if series[0]]) for label, lines in drawn
    ]
    drawn = [(label, lines) for label, lines in drawn if lines]
    if not drawn:
        return None
    try:
        import matplotlib  # noqa: F401 (only the Agg canvas is used, see _draw)
    except ImportError:
        logger.warning("matplotlib is not installed, so no plot is drawn (pip install matplotlib)")
        return None

    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    try:
        figure = _draw(drawn)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(partial, format="png", dpi=120)
        os.replace(partial, path)
    except Exception as exc:
        logger.warning("cannot write the plot %s: %s", path, exc)
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        return None
    return path


def _draw(panels):
    """The figure, on an Agg canvas of its own (pyplot's global state is never touched).
    A series with one point per few steps (validation, evaluation) gets markers."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 3.2 * len(panels) + 0.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, lines) in zip(axes, panels, strict=True):
        for key, (steps, values) in lines:
            sparse = len(steps) < 0.5 * max(len(s) for _, (s, _) in lines)
            style = {"marker": "o", "markersize": 3} if sparse else {}
            ax.plot(steps, values, label=key, linewidth=1.2, **style)
        ax.set_ylabel(label)
        if label == "learning rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        ax.grid(alpha=0.3)
        if len(lines) > 1:
            ax.legend(loc="best")
    axes[-1].set_xlabel("step")
    return figure
