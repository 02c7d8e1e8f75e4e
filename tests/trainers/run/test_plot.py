"""save_plot: a real PNG from a run's history, and None when there is nothing to draw."""

from __future__ import annotations

import math
import sys

import pytest

from trainspec.trainers.run.plot import save_plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytest.importorskip("matplotlib")


def history(steps=30):
    records = []
    for step in range(1, steps + 1):
        records.append({"step": step, "timestamp": 0.0, "loss": 3.0 / step, "lr": 1e-5 * step})
        if step % 10 == 0:
            records.append({"step": step, "val_loss": 3.5 / step})
    return records


def is_png(path):
    data = path.read_bytes()
    return data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_loss_val_loss_and_lr(tmp_path):
    path = save_plot(history(), tmp_path / "plots" / "loss.png")
    assert path == tmp_path / "plots" / "loss.png"
    assert is_png(path)
    assert [p.name for p in path.parent.iterdir()] == ["loss.png"]  # no partial file left


@pytest.mark.parametrize("key", ["loss", "val_loss", "lr"])
def test_a_single_series_is_enough(tmp_path, key):
    records = [{"step": s, key: 1.0 / s} for s in range(1, 20)]
    assert is_png(save_plot(records, tmp_path / "one.png"))


def test_gaps_and_non_numbers_are_skipped(tmp_path):
    records = history(10) + [
        {"step": 11, "loss": None},
        {"step": 12, "loss": math.nan},
        {"step": 13, "loss": "oops"},
        {"step": 14, "loss": True},
    ]
    assert is_png(save_plot(records, tmp_path / "loss.png"))


def test_nothing_to_plot(tmp_path):
    assert save_plot([], tmp_path / "loss.png") is None
    assert save_plot([{"step": 1, "grad_norm": 1.0}], tmp_path / "loss.png") is None
    assert not (tmp_path / "loss.png").exists()


def test_unwritable_path_is_a_warning(tmp_path, caplog):
    (tmp_path / "a-file").touch()
    assert save_plot(history(), tmp_path / "a-file" / "loss.png") is None
    assert "cannot write the plot" in caplog.text


def test_without_matplotlib_it_warns(tmp_path, caplog, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert save_plot(history(), tmp_path / "loss.png") is None
    assert "pip install matplotlib" in caplog.text


def figure_of(records, panels=None, title="run-7"):
    from trainspec.trainers.run.plot import TRAINING_PANELS, _panels, draw

    return draw(_panels(records, panels or TRAINING_PANELS), title)


def test_the_training_figure_reads_well():
    figure = figure_of(history())
    loss, lr = figure.axes
    assert figure._suptitle.get_text() == "run-7: steps 1 to 30"
    assert loss.get_yscale() == "log" and loss.get_ylabel() == "loss (log)"
    styles = {line.get_label(): line.get_linestyle() for line in loss.get_lines()}
    assert styles == {"training loss": "-", "validation loss": "None"}  # points, never joined
    assert lr.get_ylabel() == "learning rate"
    # the loss takes most of the height
    assert loss.get_position().height > 2.5 * lr.get_position().height


def test_epoch_boundaries_are_marked_on_every_panel():
    from trainspec.trainers.run.plot import TRAINING_PANELS, _panels, draw, epoch_starts

    records = history()
    records += [{"step": s, "epoch": (s - 1) // 12} for s in range(1, 31)]  # 2nd at 13, 3rd at 25
    assert epoch_starts(records) == [(13, 2), (25, 3)]
    assert epoch_starts(history()) == []  # no epoch metric: nothing marked
    figure = draw(_panels(records, TRAINING_PANELS), "run-7", epoch_starts(records))
    for ax in figure.axes:
        marks = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert [list(ln.get_xdata()) for ln in marks] == [[13, 13], [25, 25]]
    assert [t.get_text() for t in figure.axes[0].texts] == ["epoch 2", "epoch 3"]


def test_a_constant_learning_rate_gets_no_panel():
    records = [{"step": s, "loss": 1.0 / s, "lr": 1e-4} for s in range(1, 20)]
    assert [ax.get_ylabel() for ax in figure_of(records).axes] == ["loss (log)"]


def test_a_loss_that_goes_negative_stays_linear():
    records = [{"step": s, "loss": 0.5 - 0.1 * s} for s in range(1, 20)]
    assert figure_of(records).axes[0].get_yscale() == "linear"


def test_a_step_logged_twice_is_drawn_once_in_order():
    records = history(10) + [{"step": 5, "loss": 9.0}]  # an earlier run's record of step 5
    (line,) = [
        ln for ln in figure_of(records).axes[0].get_lines() if ln.get_label() == "training loss"
    ]
    steps = list(line.get_xdata())
    assert steps == sorted(steps) == list(range(1, 11)) and line.get_ydata()[4] == 9.0


def test_the_rl_figure_smooths_reward_and_gives_exact_match_its_own_axis():
    from trainspec.trainers.run.plot import RL_PANELS

    records = [{"step": s, "reward": 0.3 + 0.01 * (s % 3), "loss": -0.01 * s} for s in range(1, 41)]
    records += [{"step": s, "eval_exact_match": s / 100} for s in (0, 20, 40)]
    reward, exact, loss = figure_of(records, RL_PANELS, "rl-demo").axes
    labels = [line.get_label() for line in reward.get_lines()]
    assert labels == ["reward, each step", "reward, mean of 10 steps"]
    assert reward.get_position().height > 1.5 * loss.get_position().height
    assert reward.collections, "the band between the raw and the smoothed reward"
    assert exact.get_ylabel() == "held-out"  # exact match, and the reward when logged
    assert [(ln.get_linestyle(), ln.get_marker()) for ln in exact.get_lines()] == [("-", "o")]
    assert loss.get_yscale() == "linear"
