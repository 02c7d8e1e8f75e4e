"""A picture of the run at its end: loss (and validation loss) against step, learning rate below.

    save_plot(monitor.history, run_dir / "loss.png")   # the path, or None

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


def save_plot(history: list[dict], path: Path) -> Path | None:
    """Write a PNG of loss, val_loss and lr against step; None when there is nothing to plot."""
    loss, val_loss, lr = (_series(history, key) for key in ("loss", "val_loss", "lr"))
    if not (loss[0] or val_loss[0] or lr[0]):
        return None
    try:
        import matplotlib  # noqa: F401 (only the Agg canvas is used, see _draw)
    except ImportError:
        logger.warning("matplotlib is not installed, so no plot is drawn (pip install matplotlib)")
        return None

    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    try:
        figure = _draw(loss, val_loss, lr)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(partial, format="png", dpi=120)
        os.replace(partial, path)
    except Exception as exc:
        logger.warning("cannot write the plot %s: %s", path, exc)
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        return None
    return path


def _draw(loss, val_loss, lr):
    """The figure, on an Agg canvas of its own (pyplot's global state is never touched)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    has_loss = bool(loss[0] or val_loss[0])
    panels = int(has_loss) + int(bool(lr[0]))
    figure = Figure(figsize=(8, 3.2 * panels + 0.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(panels, 1, sharex=True, squeeze=False)[:, 0]
    if has_loss:
        ax = axes[0]
        if loss[0]:
            ax.plot(*loss, label="loss", linewidth=1.2)
        if val_loss[0]:
            ax.plot(*val_loss, label="val_loss", marker="o", markersize=3, linewidth=1.2)
        ax.set_ylabel("loss")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right")
    if lr[0]:
        ax = axes[-1]
        ax.plot(*lr, color="tab:green", linewidth=1.2)
        ax.set_ylabel("learning rate")
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    return figure
