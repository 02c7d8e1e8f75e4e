"""Rows longer than data.seq_len: cut (the default), left out or refused, as `data.long_rows`
says; never silently: the start says how many rows and trained tokens, and the first step's
metrics count them."""

from __future__ import annotations

import json
import logging

import pytest
from helpers.sft_support import metrics, tiny_config

from trainspec.config import load
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError
from trainspec.trainers.sft.data import build_sft_data
from trainspec.trainers.sft.train import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SEQ_LEN = 64


def chat(answer: str) -> str:
    messages = [{"role": "user", "content": "ab"}, {"role": "assistant", "content": answer}]
    return json.dumps({"messages": messages})


@pytest.fixture
def rows(tmp_path):
    """Six short rows and two whose answers run past SEQ_LEN tokens (one token per byte)."""
    path = tmp_path / "rows.jsonl"
    lines = [chat("ba")] * 3 + [chat("x" * 100)] + [chat("ba")] * 3 + [chat("y" * 80)]
    path.write_text("\n".join(lines) + "\n")
    return path


def data_config(rows, **settings):
    base = {
        "model.name": "builtin:tiny-qwen3",
        "data.type": "sft",
        "data.name": str(rows),
        "data.seq_len": SEQ_LEN,
        "data.batch_size": 2,
        "data.micro_batch_size": 2,
    }
    return load("sft", [], {**base, **settings}).config


def build(config):
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    return build_sft_data(config.data, tokenizer, rank=0, world_size=1)


def test_long_rows_are_cut_and_said(rows, caplog):
    with caplog.at_level(logging.WARNING):
        data = build(data_config(rows))
    assert data.report["data_rows_long"] == 2
    lost = data.report["data_targets_cut"]
    assert lost > 2 * (80 - SEQ_LEN)  # both answers' tails, end-of-turn tokens included
    said = caplog.text
    assert "2 of 8 rows are longer than data.seq_len = 64 tokens" in said
    assert "rows.jsonl:4 (" in said and f"{lost} of their" in said
    assert 'data.long_rows = "truncate"' in said
    assert max(data.stream.lengths) > SEQ_LEN  # kept; packing cuts them at seq_len


def test_skip_leaves_the_long_rows_out(rows, caplog):
    with caplog.at_level(logging.WARNING):
        data = build(data_config(rows, **{"data.long_rows": "skip"}))
    lengths = data.stream.lengths
    assert [i for i, n in enumerate(lengths) if n == 0] == [3, 7]
    assert data.report == {"data_rows_long": 2, "data_targets_cut": 0}
    assert "they are left out" in caplog.text


def test_refuse_names_the_rows_and_the_fixes(rows):
    with pytest.raises(SetupError) as raised:
        build(data_config(rows, **{"data.long_rows": "refuse"}))
    error = raised.value
    assert error.path == "data.long_rows"
    assert "rows.jsonl:4 (" in error.problem and "rows.jsonl:8 (" in error.problem
    assert "raise data.seq_len" in error.fix


def test_rows_that_fit_are_not_reported(tmp_path, caplog):
    path = tmp_path / "short.jsonl"
    path.write_text((chat("ba") + "\n") * 4)
    with caplog.at_level(logging.WARNING):
        data = build(data_config(path, **{"data.long_rows": "refuse"}))
    assert data.report == {"data_rows_long": 0, "data_targets_cut": 0}
    assert "longer than" not in caplog.text


def test_the_first_step_of_a_run_counts_them_in_metrics(rows, tmp_path):
    config = tiny_config(
        tmp_path,
        data__type="sft",
        data__name=str(rows),
        data__seq_len=SEQ_LEN,
        model__seq_len=SEQ_LEN,
        data__batch_size=2,
        data__micro_batch_size=2,
        max_steps=2,
    )
    assert train(config) == 0
    records = [r for r in metrics(config) if "loss" in r]
    assert records[0]["data_rows_long"] == 2 and records[0]["data_targets_cut"] > 0
    assert "data_rows_long" not in records[1]
