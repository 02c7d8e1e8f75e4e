"""Progress lines and bar, and the console logging set up from [log]."""

from __future__ import annotations

import io
import json
import logging

import pytest

from trainspec.config import load
from trainspec.trainers.errors import SetupError
from trainspec.trainers.progress import Progress, setup_logging


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


# -- setup_logging -------------------------------------------------------------------------


@pytest.fixture
def clean_logging():
    """Put the logging tree back as it was."""
    root = logging.getLogger()
    names = ("trainspec", "verifiers")
    saved = (list(root.handlers), root.level, {n: logging.getLogger(n).level for n in names})
    yield
    for handler in list(root.handlers):
        if handler not in saved[0]:
            root.removeHandler(handler)
    root.setLevel(saved[1])
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


def test_text_logging_levels(clean_logging):
    stream = io.StringIO()
    setup_logging(log_cfg(level="warning", vf_level="debug"), rank=0, stream=stream)
    logging.getLogger("trainspec.sft").info("hidden")
    logging.getLogger("trainspec.sft").warning("shown %d", 1)
    logging.getLogger("verifiers.env").debug("vf debug")
    logging.getLogger("some.library").info("library chatter")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("WARNING trainspec.sft: shown 1")
    assert lines[1].endswith("DEBUG verifiers.env: vf debug")


def test_setup_twice_keeps_one_handler(clean_logging):
    stream = io.StringIO()
    setup_logging(log_cfg(), rank=0, stream=io.StringIO())
    setup_logging(log_cfg(), rank=0, stream=stream)
    logging.getLogger("trainspec").info("once")
    assert stream.getvalue().count("once") == 1


def test_json_logging_parses(clean_logging):
    stream = io.StringIO()
    setup_logging(log_cfg(json_logging=True), rank=0, stream=stream)
    log = logging.getLogger("trainspec.sft")
    log.info("step %d done", 3)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "step 3 done" and first["level"] == "INFO"
    assert first["logger"] == "trainspec.sft" and first["rank"] == 0
    assert first["time"].endswith("Z")
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exception"]


def test_ranks_filter(clean_logging):
    quiet, chosen = io.StringIO(), io.StringIO()
    setup_logging(log_cfg(ranks_filter=[0, 2]), rank=1, stream=quiet)
    logging.getLogger("trainspec").info("rank 1 info")
    logging.getLogger("trainspec").error("rank 1 error")
    assert "rank 1 info" not in quiet.getvalue()
    assert "[rank 1] trainspec: rank 1 error" in quiet.getvalue()
    setup_logging(log_cfg(ranks_filter=[0, 2]), rank=2, stream=chosen)
    logging.getLogger("trainspec").info("rank 2 info")
    assert "rank 2 info" in chosen.getvalue()


@pytest.mark.parametrize("field", ["level", "vf_level"])
def test_unknown_level_is_a_setup_error(field, clean_logging):
    with pytest.raises(SetupError) as info:
        setup_logging(log_cfg(**{field: "loud"}), rank=0, stream=io.StringIO())
    assert info.value.path == f"log.{field}"
    assert "'loud'" in info.value.problem and "debug" in info.value.fix
