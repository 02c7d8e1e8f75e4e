"""Property tests of validate-config: whatever the input, it answers with an exit code it
documents, never a traceback, and every error it reports says where (file:line:column or the
flag). Inputs: mutated example configs, mutated bytes of them, and random overrides."""

from __future__ import annotations

import datetime
import json
import math
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from cli_support import CONFIGS, Result, assert_located, assert_no_crash, dump_toml, run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

# CLI_PROPERTY_EXAMPLES=20000 for a long hunt; the default keeps each test to a few seconds.
SETTINGS = settings(
    max_examples=int(os.environ.get("CLI_PROPERTY_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HEADER = {
    "rl": "#:schema ../../schema/rl_trainer.json",
    "sft": "#:schema ../../schema/sft_trainer.json",
}
UNIONS = {
    "rl": [
        ("optim",),
        ("scheduler",),
        ("loss",),
        ("weight_broadcast",),
        ("rollout_transport",),
        ("model", "quantization"),
    ],
    "sft": [
        ("optim",),
        ("scheduler",),
        ("data",),
        ("deployment",),
        ("weight_broadcast",),
        ("val", "data"),
        ("model", "quantization"),
    ],
}
TYPE_NAMES = [
    "adamw", "sgd", "muon", "sign_sgd", "constant", "linear", "cosine", "default", "ipo",
    "custom", "filesystem", "nccl", "nixl", "zmq", "sft", "fake", "single_node", "multi_node",
    "fp8", "mxfp8",
]  # fmt: skip
KEY_NAMES = [
    "model", "optim", "lr", "betas1", "seq_len", "type", "name", "rank", "targets", "port",
    "batch_size", "max_steps", "interval", "fake", "data", "val", "deployment", "loss",
    "env_vars", "CUDA_VISIBLE_DEVICES", "modle", "seq_lenn", "a.b", "", "x y", "ü",
]  # fmt: skip


def _kind(path: Path) -> str | None:
    from trainspec.cli.inputs import kind_of_text

    return kind_of_text(path.read_bytes())


# The trainer configs: the mutations below know their unions (rl.json / orchestrator.json
# configs have their own tests in tests/trainers/rl_run).
EXAMPLES = [
    (path, _kind(path), tomllib.loads(path.read_text(encoding="utf-8")))
    for path in CONFIGS
    if _kind(path) in ("rl", "sft")
]


def test_the_examples_are_valid() -> None:
    assert {kind for _, kind, _ in EXAMPLES} == {"rl", "sft"}
    for path, _, _ in EXAMPLES:
        result = run_cli(str(path), "--format", "json")
        assert result.code == 0, result.stdout + result.stderr


# ------------------------------------------------------------------ values and mutations

texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["None", "auto", "", "sgd", "flash_attention_4", "true", "1", "CUDA_VISIBLE_DEVICES"]
    ),
)
# TOML integers are 64-bit; a bigger literal is not TOML (exit 2, covered by the corpus).
numbers = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([-(2**63), 2**63 - 1, 0, 1, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
)
keys = st.one_of(st.sampled_from(KEY_NAMES), st.text(max_size=6))
scalars = st.one_of(st.booleans(), numbers, texts, st.dates(), st.times(), st.datetimes())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=8,
)
BY_TYPE = {
    "bool": st.booleans(),
    "number": numbers,
    "str": texts,
    "datetime": st.one_of(st.dates(), st.times(), st.datetimes()),
    "list": st.lists(values, max_size=4),
    "dict": st.dictionaries(keys, values, max_size=4),
}


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, datetime.date | datetime.time):
        return "datetime"
    return type(value).__name__


def _children(node: Any) -> list[tuple[Any, Any]]:
    if isinstance(node, dict):
        return list(node.items())
    return list(enumerate(node)) if isinstance(node, list) else []


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside `node` (keys and list indices)."""
    found = []
    for key, child in _children(node):
        found += [(*prefix, key), *_paths(child, (*prefix, key))]
    return found


def _tables(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a table inside `node`, the document itself included."""
    found = [prefix] if isinstance(node, dict) else []
    for key, child in _children(node):
        found += _tables(child, (*prefix, key))
    return found


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _ensure_table(document: dict, path: tuple[str, ...]) -> dict:
    node = document
    for part in path:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    return node


MUTATIONS = ("replace", "delete", "add_key", "set_type", "none", "wrap")


def mutate(document: dict, kind: str, data: st.DataObject) -> list[str]:
    """Apply 1-3 random mutations to `document` in place; return what was done."""
    done = []
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        op = data.draw(st.sampled_from(MUTATIONS), label="op")
        paths = _paths(document)
        if op in ("replace", "delete", "none", "wrap") and paths:
            path = data.draw(st.sampled_from(paths), label="path")
            parent, key = _get(document, path[:-1]), path[-1]
            old = parent[key]
            if op == "replace":
                other = sorted(set(BY_TYPE) - {_type_name(old)})
                parent[key] = data.draw(BY_TYPE[data.draw(st.sampled_from(other))], label="value")
            elif op == "delete":
                del parent[key]
            elif op == "none":
                parent[key] = "None"
            else:
                parent[key] = [old]
            done.append(f"{op} {path}")
        elif op == "add_key":
            table = data.draw(st.sampled_from(_tables(document)), label="table")
            name = data.draw(keys, label="key")
            _get(document, table)[name] = data.draw(values, label="value")
            done.append(f"add {table}.{name!r}")
        elif op == "set_type":
            union = data.draw(st.sampled_from(UNIONS[kind]), label="union")
            tag = data.draw(st.one_of(st.sampled_from(TYPE_NAMES), st.text(max_size=8)))
            _ensure_table(document, union)["type"] = tag
            done.append(f"type {union} = {tag!r}")
    return done


def check_report(result: Result, files: list[str]) -> None:
    """The invariants of every exit-0/1 answer with --format json."""
    report = result.report()
    assert report["valid"] is (result.code == 0)
    if result.code == 0:
        assert report["errors"] == [] and isinstance(report["config"], dict)
        json.dumps(report["config"])
    else:
        assert report["errors"] and report["config"] is None
    assert_located(report["errors"] + report["warnings"], files)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# ------------------------------------------------------------------ the properties


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("properties")


@SETTINGS
@given(example=st.sampled_from(EXAMPLES), data=st.data(), by_kind=st.booleans())
def test_mutated_configs_get_located_errors(example, data, by_kind: bool, workdir: Path) -> None:
    _, kind, original = example
    document = json.loads(json.dumps(original))  # a deep copy (the examples are plain JSON)
    done = mutate(document, kind, data)
    text = dump_toml(document, header="# a mutated example" if by_kind else HEADER[kind])
    assert _same(tomllib.loads(text), document), f"the test's TOML writer is wrong:\n{text}"
    path = workdir / f"mutated-{kind}.toml"
    path.write_text(text, encoding="utf-8")
    args = [str(path), "--format", "json", *(["--kind", kind] if by_kind else [])]
    result = run_cli(*args)
    note = (
        f"mutations: {done}\n--- {path.name}\n{text}\n--- stdout\n{result.stdout}\n{result.stderr}"
    )
    event(f"exit {result.code}")
    assert_no_crash(result)
    assert result.code in (0, 1), note
    check_report(result, [str(path)])


@SETTINGS
@given(example=st.sampled_from(EXAMPLES), data=st.data())
def test_mutated_bytes_never_crash(example, data, workdir: Path) -> None:
    source, kind, _ = example
    raw = bytearray(source.read_bytes())
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        op = data.draw(st.sampled_from(("flip", "insert", "delete")), label="op")
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)), label="at")
        if op == "flip" and raw:
            raw[at] = data.draw(st.integers(0, 255), label="byte")
        elif op == "insert":
            raw[at:at] = data.draw(
                st.one_of(
                    st.binary(min_size=1, max_size=4),
                    st.sampled_from([b"[", b"]", b"{", b'"', b"=", b"\n", b".", b"'''", b"\xff"]),
                ),
                label="bytes",
            )
        elif raw:
            del raw[at : at + data.draw(st.integers(1, 8), label="length")]
    path = workdir / f"bytes-{kind}.toml"
    path.write_bytes(bytes(raw))
    result = run_cli(str(path), "--kind", kind, "--format", "json")
    note = f"--- {bytes(raw)!r}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    event(f"exit {result.code}")
    assert_no_crash(result)
    assert result.code in (0, 1, 2), note
    if result.code == 2:  # one located line, and its fix when there is one
        lines = result.stderr.splitlines()
        assert lines[0].startswith(f"{path}"), note
        assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("    fix: ")), note
        assert result.report()["errors"], note  # the failure as a JSON report
    else:
        check_report(result, [str(path)])


FLAG_PATHS = [
    "optim.lr", "optim.type", "optim.betas1", "optim", "max-steps", "max_steps", "model.compile",
    "model.lora", "model.lora.rank", "model.lora.target-modules", "model.ac.targets", "model",
    "model.seq_len", "env-vars", "weight-broadcast.type", "scheduler.type", "data.fake",
    "data.type", "deployment", "val.data.batch_size", "trace-path", "ckpt", "optim.lrr", "lr",
    "model..name", "model.name.x", "x", "",
]  # fmt: skip
FLAG_VALUES = [
    "1", "0", "-1", "1e-5", "1e400", "nan", "true", "false", "None", "null", "[1]", '["a"]',
    "{}", '{"a": 1}', '{"type": "sgd"}', "x", "", "auto", "sgd", "cosine", "{", "[", '"q"',
]  # fmt: skip


@st.composite
def override_tokens(draw: st.DrawFn) -> list[str]:
    tokens: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        name = draw(st.sampled_from(FLAG_PATHS))
        if draw(st.integers(0, 4)) == 0:
            name = "no-" + name
        form = draw(st.sampled_from(("pair", "equals", "bare")))
        if form == "pair":
            tokens += [f"--{name}", draw(st.sampled_from(FLAG_VALUES))]
        elif form == "equals":
            tokens.append(f"--{name}={draw(st.sampled_from(FLAG_VALUES))}")
        else:
            tokens.append(f"--{name}")
    return tokens


@SETTINGS
@given(
    example=st.one_of(st.none(), st.sampled_from(EXAMPLES)),
    kind=st.sampled_from(("rl", "sft")),
    tokens=override_tokens(),
)
def test_random_overrides_get_flags(example, kind: str, tokens: list[str]) -> None:
    files = [] if example is None else [str(example[0])]
    head = files if files else ["--kind", kind]
    result = run_cli(*head, *tokens, "--format", "json")
    note = f"argv: {[*head, *tokens]}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    event(f"exit {result.code}")
    assert_no_crash(result)
    assert result.code in (0, 1, 2), note
    if result.code == 2:
        assert result.stderr.strip() and result.report()["errors"], note
        return
    check_report(result, files)
    for error in result.report()["errors"]:
        if error.get("flag"):
            assert error["flag"] in {t.split("=", 1)[0] for t in tokens}, (error, note)
