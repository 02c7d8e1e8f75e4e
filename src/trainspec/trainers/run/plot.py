"""A picture of the run at its end, titled with the run: by default loss (log scale, validation
loss as points; most of the height) against step, the online evals' mean reward and exact match
when the run has [eval], and the learning rate below while it changes, with a dashed line where
each pass over the data after the first begins (the "epoch" metric); the RL run draws reward
(smoothed, the raw values as a faint band), held-out exact match and loss, each on an axis of
its own.

    save_plot(monitor.history, run_dir / "loss.png", title=run_name)   # the path, or None
    save_plot(history, run_dir / "rl.png", RL_PANELS, title=...)

Lines are labelled in words ("validation loss", not "val_loss"). `history` is the Monitor's list
of records (`step` plus metrics), in any order; a step logged twice counts once (its last
value). Records without a number for a metric are skipped for that metric, so train and
validation records can be mixed freely. The figure is drawn with matplotlib's Agg canvas
directly (no pyplot, no display, no global state). A plot is a convenience: without matplotlib,
or when the file cannot be written, this warns and returns None instead of failing the run.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

SMOOTH_STEPS = 10  # the window of a smoothed series
SPARSE = 0.5  # a series with under half the points of its panel's densest is drawn as points
FEW = 30  # a line of at most this many points marks them


@dataclass(frozen=True)
class Panel:
    """One axis: its label, the metrics drawn on it and how."""

    label: str
    keys: tuple[str, ...]
    log: bool = False  # a log scale, when every value is positive
    smooth: bool = False  # a rolling mean over SMOOTH_STEPS, the raw values as a faint band
    when_varies: bool = False  # drawn only when its values change (a constant lr says nothing)
    height: float = 1.0  # its share of the figure's height, against the other panels'


LABELS = {  # a metric's name in the legend
    "loss": "training loss",
    "val_loss": "validation loss",
    "eval_reward": "mean reward",
    "eval_exact_match": "exact match",
    "reward": "reward",
    "lr": "learning rate",
}


TRAINING_PANELS = (
    Panel("loss", ("loss", "val_loss"), log=True, height=3.0),
    Panel("online evals", ("eval_reward", "eval_exact_match")),  # an SFT run with [eval]
    Panel("learning rate", ("lr",), when_varies=True),
)
RL_PANELS = (
    Panel("reward", ("reward",), smooth=True, height=2.0),
    Panel("held-out", ("eval_exact_match", "eval_reward")),
    Panel("loss", ("loss",), smooth=True),  # a policy loss per step is mostly noise
)


def _series(history: list[dict], key: str) -> tuple[list[float], list[float]]:
    by_step: dict[float, float] = {}
    for record in history:
        value, step = record.get(key), record.get("step")
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not isinstance(step, int | float) or not math.isfinite(value):
            continue
        by_step[step] = value
    steps = sorted(by_step)
    return steps, [by_step[step] for step in steps]


def epoch_starts(history: list[dict]) -> list[tuple[float, int]]:
    """(step, epoch) where each pass over the data after the first begins: the first step whose
    "epoch" metric (0-based) is above the one before it."""
    steps, epochs = _series(history, "epoch")
    return [
        (step, int(epoch) + 1)
        for step, epoch, before in zip(steps[1:], epochs[1:], epochs, strict=False)
        if epoch > before
    ]


def _panels(history: list[dict], panels) -> list[tuple[Panel, list]]:
    drawn = []
    for panel in panels:
        lines = [(key, _series(history, key)) for key in panel.keys]
        lines = [(key, series) for key, series in lines if series[0]]
        if not lines:
            continue
        values = [v for _, (_, vs) in lines for v in vs]
        if panel.when_varies and max(values) == min(values):
            continue
        drawn.append((panel, lines))
    return drawn


def save_plot(
    history: list[dict], path: Path, panels=TRAINING_PANELS, title: str | None = None
) -> Path | None:
    """Write a PNG of the `panels` metrics against step; None when there is nothing to plot."""
    drawn = _panels(history, panels)
    if not drawn:
        return None
    try:
        import matplotlib  # noqa: F401 (only the Agg canvas is used, see draw)
    except ImportError:
        logger.warning("matplotlib is not installed, so no plot is drawn (pip install matplotlib)")
        return None

    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    try:
        figure = draw(drawn, title, epoch_starts(history))
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(partial, format="png", dpi=120)
        os.replace(partial, path)
    except Exception as exc:
        logger.warning("cannot write the plot %s: %s", path, exc)
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        return None
    return path


def _rolling(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        out.append(total / min(index + 1, window))
    return out


def draw(
    drawn: list[tuple[Panel, list]],
    title: str | None = None,
    epochs: Sequence[tuple[float, int]] = (),
):
    """The figure, on an Agg canvas of its own (pyplot's global state is never touched)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    heights = [panel.height for panel, _ in drawn]
    figure = Figure(figsize=(8, 1.8 * sum(heights) + 1.6), layout="constrained")
    FigureCanvasAgg(figure)
    grid = {"height_ratios": heights}
    axes = figure.subplots(len(drawn), 1, sharex=True, squeeze=False, gridspec_kw=grid)[:, 0]
    first, last = None, None
    for ax, (panel, lines) in zip(axes, drawn, strict=True):
        densest = max(len(steps) for _, (steps, _) in lines)
        for key, (steps, values) in lines:
            first = min(steps[0], first) if first is not None else steps[0]
            last = max(steps[-1], last) if last is not None else steps[-1]
            if panel.smooth and len(values) > SMOOTH_STEPS:
                name = LABELS.get(key, key)
                raw = ax.plot(steps, values, linewidth=0.6, alpha=0.35, label=f"{name}, each step")
                smoothed = _rolling(values, SMOOTH_STEPS)
                mean = f"{name}, mean of {SMOOTH_STEPS} steps"
                ax.plot(steps, smoothed, color=raw[0].get_color(), linewidth=1.6, label=mean)
                ax.fill_between(steps, values, smoothed, color=raw[0].get_color(), alpha=0.12)
            elif len(steps) < SPARSE * densest or len(steps) == 1:
                label = LABELS.get(key, key)
                ax.plot(steps, values, linestyle="none", marker="o", markersize=4, label=label)
            else:  # a few points (evaluations) are marked
                marker = {"marker": "o", "markersize": 3} if len(steps) <= FEW else {}
                ax.plot(steps, values, linewidth=1.2, label=LABELS.get(key, key), **marker)
        values = [v for _, (_, vs) in lines for v in vs]
        if panel.log and min(values) > 0:
            ax.set_yscale("log")
        ax.set_ylabel(panel.label + (" (log)" if ax.get_yscale() == "log" else ""))
        if panel.label == "learning rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        ax.grid(alpha=0.3, which="both" if ax.get_yscale() == "log" else "major")
        if len(lines) > 1 or panel.smooth:
            ax.legend(loc="best")
    for step, epoch in epochs:
        for ax in axes:
            ax.axvline(step, color="0.5", linestyle="--", linewidth=0.8)
        axes[0].annotate(
            f"epoch {epoch}", (step, 1.0), xycoords=("data", "axes fraction"),
            xytext=(3, -3), textcoords="offset points", va="top", fontsize=8, color="0.4",
        )  # fmt: skip
    axes[-1].set_xlabel("step")
    heading = f"{title}: steps {first:g} to {last:g}" if title else f"steps {first:g} to {last:g}"
    figure.suptitle(heading)
    return figure
