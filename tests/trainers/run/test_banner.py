"""The start banner: parameter counts as a reader says them, LoRA's trainable share, the lines."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from torch import nn

from trainspec.trainers.run.banner import count, count_parameters, start_banner
from trainspec.trainers.run.console import quiet_library_bars


def test_counts_read_as_people_say_them():
    assert [count(n) for n in (7, 1234, 999_999, 1_234_567, 494_032_768, 7.6e9)] == [
        "7", "1,234", "999,999", "1.23M", "494M", "7.6B",
    ]  # fmt: skip


def test_parameters_and_the_trainable_share():
    model = nn.Sequential(nn.Linear(1000, 1000), nn.Linear(1000, 10))  # 1,001,000 + 10,010
    assert count_parameters(model) == "1.01M parameters"
    model[0].requires_grad_(False)  # as a LoRA model freezes its base
    assert count_parameters(model) == "1.01M parameters, 10,010 trainable"


def test_the_banner_lines():
    banner = start_banner(
        "sft", model="org/model", parameters="494M parameters", data="d.jsonl: 3 examples",
        steps="100, from step 40", device="cuda", processes=8, run_dir=Path("outputs/run"),
    )  # fmt: skip
    assert banner.splitlines() == [
        "sft: org/model, 494M parameters, on cuda (8 processes)",
        "  data   d.jsonl: 3 examples",
        "  steps  100, from step 40",
        "  run    outputs/run",
    ]


def test_library_bars_are_off_unless_the_console_is_a_terminal(monkeypatch):
    import transformers.utils.logging as transformers_logging

    for switch in ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.setenv(switch, "")  # recorded, so the test leaves the environment as it was
        monkeypatch.delenv(switch)
    transformers_logging.enable_progress_bar()
    try:
        quiet_library_bars(io.StringIO())
        assert not transformers_logging.is_progress_bar_enabled()
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
        assert os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1"
    finally:
        transformers_logging.enable_progress_bar()
    assert "transformers.utils.logging" in sys.modules


def test_a_terminal_keeps_the_bars(monkeypatch):
    import transformers.utils.logging as transformers_logging

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "")
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS")
    transformers_logging.enable_progress_bar()
    quiet_library_bars(Terminal())
    assert transformers_logging.is_progress_bar_enabled()
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ
