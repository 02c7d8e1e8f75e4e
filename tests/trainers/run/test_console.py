"""The console logging set up from [log]: levels, JSON records, the ranks filter."""

from __future__ import annotations

import io
import json
import logging

import pytest

from trainspec.config import load
from trainspec.trainers.errors import SetupError
from trainspec.trainers.run.console import setup_logging


def log_cfg(**overrides):
    return load("sft", [], {f"log.{k}": v for k, v in overrides.items()}).config.log


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
