"""Bad rows are refused naming file, line and field; rows with nothing to train on are counted,
reported with examples and left out, and none left is an error."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from trainspec.config import load
from trainspec.trainers.chat.row_checks import check_json_files, row_problem
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError
from trainspec.trainers.sft.data import build_sft_data

torch.set_num_threads(1)
GOOD = {"messages": [{"role": "user", "content": "abc"}, {"role": "assistant", "content": "cba"}]}


def config(path: Path, **settings):
    base = {"model.name": "builtin:tiny-qwen3", "data.name": str(path), "data.seq_len": 64}
    return load("sft", [], {**base, "model.seq_len": 64, **settings}).config


@pytest.fixture(scope="module")
def tokenizer():
    cfg = load("sft", [], {"model.name": "builtin:tiny-qwen3"}).config
    return build_tokenizer(cfg.tokenizer, cfg.model)


def write(path: Path, *lines: str | bytes) -> Path:
    data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({"text": "x"}, "the row has neither messages nor both prompt and completion"),
        ({"messages": "hello"}, "messages is text, not a list of {role, content} messages"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content is the number 42"),
        ({"messages": [{"content": "hi"}]}, "messages[0].role is null, not a role name"),
        ({"messages": ["hi"]}, "messages[0] is text, not a {role, content} object"),
        ({"prompt": "a", "completion": 5}, "completion is the number 5, not a list"),
        ([1, 2], "the row is a list, not an object with messages or prompt/completion"),
        ({"conversations": "hi"}, "conversations is text, not a list of {from, value} turns"),
        ({"conversations": [{"value": "hi"}]}, "conversations[0].from is null, not a speaker"),
        ({"conversations": [{"from": "human"}]}, "conversations[0].value is null, not text"),
        (
            {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "messages[0].content[0] is a part of type 'input_audio': text-only models take text",
        ),
        ({"messages": [{"role": "user", "content": ["hi"]}]}, "messages[0].content[0] is text"),
        ({**GOOD, "tools": "{"}, "tools is text that is not JSON"),
        ({**GOOD, "tools": "5"}, "tools is the JSON text of the number 5, not of a list"),
        ({**GOOD, "tools": {"type": "function"}}, "tools is an object, not a list of tools"),
    ],
)
def test_row_problems(row, problem):
    assert row_problem(row).startswith(problem)


@pytest.mark.parametrize(
    "row",
    [
        {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]},
        {**GOOD, "tools": '[{"type": "function", "function": {"name": "f"}}]'},
        {**GOOD, "tools": ""},
    ],
    ids=["sharegpt", "text-parts", "tools-as-json-text", "no-tools"],
)
def test_the_other_layouts_are_chat_rows(row):
    assert row_problem(row) is None


def test_good_rows_pass_with_their_locations(tmp_path):
    path = write(tmp_path / "rows.jsonl", json.dumps(GOOD), "", json.dumps(GOOD))
    assert check_json_files([str(path)], "data") == [f"{path}:1", f"{path}:3"]
    array = tmp_path / "rows.json"
    array.write_text(json.dumps([GOOD, {"prompt": "a", "completion": "b"}]))
    assert check_json_files([str(array)], "data") == [f"{array}: row 1", f"{array}: row 2"]


@pytest.mark.parametrize(
    ("lines", "where", "problem"),
    [
        ([json.dumps(GOOD), b'{"messages": "caf\xe9"}'], ":2:18", "is not UTF-8 text (byte 0xe9"),
        ([json.dumps(GOOD), "{broken"], ":2", "is not a JSON object (Expecting property name"),
        ([json.dumps({"text": "x"})], ":1", "the row has neither messages"),
        ([json.dumps({"messages": [{"role": "user", "content": 42}]})], ":1", "messages[0]"),
    ],
    ids=["not-utf8", "not-json", "no-chat", "content-42"],
)
def test_a_bad_row_is_named_by_file_and_line(tmp_path, tokenizer, lines, where, problem):
    path = write(tmp_path / "rows.jsonl", *lines)
    with pytest.raises(SetupError) as caught:
        build_sft_data(config(path).data, tokenizer, rank=0, world_size=1)
    assert caught.value.path == "data.name"
    assert caught.value.problem.startswith(f"{path}{where}: {problem}")


def untrained_role(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}, {"role": "bot", "content": text}]}


def test_rows_with_nothing_to_train_on_are_left_out_and_reported(tmp_path, tokenizer, caplog):
    too_long = {"messages": [{"role": "user", "content": "x" * 200}, GOOD["messages"][1]]}
    rows = [GOOD, untrained_role("a"), GOOD, too_long]
    path = write(tmp_path / "rows.jsonl", *map(json.dumps, rows))
    cfg = config(path, **{"data.batch_size": 1, "data.micro_batch_size": 1, "data.shuffle": False})
    with caplog.at_level(logging.WARNING):
        data = build_sft_data(cfg.data, tokenizer, rank=0, world_size=1)
    assert "2 of 4 rows have no token to train on" in caplog.text
    assert f"{path}:4" in caplog.text and "past data.seq_len = 64" in caplog.text
    assert f"{path}:2" in caplog.text and "'bot'" in caplog.text
    # Both good rows pack into the first row, and every step has targets.
    batches = [data.next_step()[0] for _ in range(3)]
    assert all(mb.num_targets > 0 for mb in batches)
    positions = batches[0].position_ids[0].tolist()
    assert positions.count(0) >= 2  # the two good documents share the row


def test_no_row_left_to_train_on_is_an_error(tmp_path, tokenizer):
    path = write(tmp_path / "rows.jsonl", *[json.dumps(untrained_role(str(i))) for i in range(3)])
    with pytest.raises(SetupError) as caught:
        build_sft_data(config(path).data, tokenizer, rank=0, world_size=1)
    assert caught.value.problem.startswith("3 of 3 rows have no token to train on")
    assert "loss_mask.<role>" in caught.value.fix
