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
