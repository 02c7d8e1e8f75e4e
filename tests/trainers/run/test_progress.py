"""Progress lines and bar on the console, from [log]."""

from __future__ import annotations

import io
import json

import pytest

from trainspec.config import load
from trainspec.trainers.run.progress import Progress


def log_cfg(**overrides):
    return load("sft", [], {f"log.{k}": v for k, v in overrides.items()}).config.log


METRICS = {"loss": 2.3456, "lr": 1e-5, "tokens_per_s": 5400.0, "grad_norm": 1.0}


def test_plain_lines_at_most_every_interval_and_the_last_step_at_close():
    stream = io.StringIO()
    progress = Progress(10, 0, log_cfg(interval=1e9), enabled=True, stream=stream)
    for step in range(1, 6):
        progress.update(step, METRICS)
    assert stream.getvalue().count("\n") == 1  # the first update only: the interval is long
    progress.close()
    first, last = stream.getvalue().splitlines()
    assert first.startswith("step 1/10 | loss 2.3456 | lr 1.00e-05 | 5,400 tok/s | elapsed ")
    assert "eta " in first
    assert last.startswith("step 5/10 | loss 2.3456")


def test_every_update_prints_with_a_tiny_interval_and_no_total():
    stream = io.StringIO()
    progress = Progress(None, 3, log_cfg(interval=1e-9), enabled=True, stream=stream)
    progress.update(4, {"loss": 1.0})
    progress.update(5, {})
    progress.write("stop requested")
    progress.close()  # the last step was printed already
    assert stream.getvalue().splitlines() == [
        "step 4 | loss 1.0000 | elapsed 0:00:00",
        "step 5 | elapsed 0:00:00",
        "stop requested",
    ]


def test_json_lines_parse():
    stream = io.StringIO()
    progress = Progress(10, 0, log_cfg(json_logging=True), enabled=True, stream=stream)
    progress.update(1, METRICS)
    progress.write("hello")
    progress.close()
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert records[0]["step"] == 1 and records[0]["total"] == 10
    assert records[0]["loss"] == 2.3456 and records[0]["tokens_per_s"] == 5400.0
    assert records[0]["logger"] == "trainspec.progress" and records[0]["level"] == "INFO"
    assert records[1]["message"] == "hello"


def test_disabled_rank_prints_nothing():
    stream = io.StringIO()
    progress = Progress(10, 0, log_cfg(), enabled=False, stream=stream)
    progress.update(1, METRICS)
    progress.write("x")
    progress.close()
    assert stream.getvalue() == ""


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_terminal_gets_a_tqdm_bar():
    pytest.importorskip("tqdm")
    stream = Terminal()
    progress = Progress(10, 2, log_cfg(), enabled=True, stream=stream)
    progress.update(3, METRICS)
    progress.write("a message")
    progress.close()
    text = stream.getvalue()
    assert "3/10" in text and "loss=2.3456" in text and "tok/s=5,400" in text
    assert "a message" in text


class Broken(io.StringIO):
    def write(self, text):
        raise BrokenPipeError("reader went away")


def test_a_broken_stream_never_raises():
    progress = Progress(10, 0, log_cfg(), enabled=True, stream=Broken())
    progress.update(1, METRICS)
    progress.write("x")
    progress.close()


def test_lines_show_the_latest_val_loss_lr_and_a_new_epoch():
    stream = io.StringIO()
    progress = Progress(10, 0, log_cfg(interval=1e-9), stream=stream)
    progress.update(1, {**METRICS, "epoch": 0})
    progress.update(2, {**METRICS, "val_loss": 1.25, "epoch": 0})
    progress.update(3, {**METRICS, "epoch": 1})
    progress.close()
    lines = stream.getvalue().splitlines()
    assert "val loss" not in lines[0] and "lr 1.00e-05" in lines[0]
    assert "val loss 1.2500 @ 2" in lines[1] and "epoch" not in lines[1]
    assert lines[2] == "epoch 2 begins: the data has been seen 1x"
    assert "val loss 1.2500 @ 2" in lines[3] and "epoch 2" in lines[3]  # measured at step 2


def test_a_resumed_run_past_its_first_epoch_says_nothing_of_it():
    stream = io.StringIO()
    progress = Progress(10, 5, log_cfg(interval=1e-9), stream=stream)
    progress.update(6, {**METRICS, "epoch": 3})
    progress.close()
    assert "begins" not in stream.getvalue() and "epoch 4" in stream.getvalue()
