"""The kind of a config that names none is told by its keys, and the keys are the schemas' own:
a key one kind's schema has and no other's decides, whatever schema/ says today."""

from __future__ import annotations

import json
import tomllib

import pytest
from helpers.support import BUNDLE_DIR, ROOT, SCHEMA_NAMES

from trainspec.config.kind_inference import dotted_key, infer_kind, unknown_keys
from trainspec.config.sources import schema_directive
from trainspec.kinds import ALL_KINDS, kind_of_schema

CONFIGS = sorted((ROOT / "configs").rglob("*.toml"))


def top_level_keys() -> dict[str, set[str]]:
    """Every top-level key of the bundled schemas -> the kinds that have it."""
    owners: dict[str, set[str]] = {}
    for kind in ALL_KINDS:
        schema = json.loads((BUNDLE_DIR / f"{SCHEMA_NAMES[kind]}.json").read_text())
        for key in schema["properties"]:
            owners.setdefault(key, set()).add(kind)
    return owners


@pytest.mark.parametrize("key", sorted(top_level_keys()))
def test_a_top_level_key_points_at_the_kinds_whose_schema_has_it(key):
    """No hand-kept list: the kinds a lone key fits are the kinds whose schema lists it (with a
    table, {}, where the kind has a table there, else a plain value: `model` is a table in the
    trainers' configs and a name in eval's)."""
    owners = top_level_keys()[key]
    fitting: set[str] = set()
    for value in ({}, 1):
        guess = infer_kind([{key: value}])
        if guess.unknown == ():
            fitting |= set(guess.candidates)
        if guess.unknown == () and len(owners) == 1:
            [kind] = owners
            others = tuple(k for k in ALL_KINDS if k != kind)
            assert (guess.kind, guess.deciding) == (kind, (((key,), others),))
    assert fitting == owners


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_the_keys_agree_with_the_schema_line_of_every_example(path):
    """configs/ names each file's schema on line 1; its keys alone tell the same kind."""
    text = path.read_bytes()
    line, target = schema_directive(text)
    assert line == 1
    guess = infer_kind([tomllib.loads(text.decode())])
    assert guess.kind == kind_of_schema(target) and guess.fits


def test_a_nested_key_decides_when_the_top_level_does_not():
    """[data] is in rl and sft configs; data.fake only in rl's, data.type only in sft's."""
    rl = infer_kind([{"max_steps": 3, "data": {"fake": {"batch_size": 2}}}])
    assert rl.kind == "rl"
    assert rl.deciding == ((("data", "fake"), tuple(k for k in ALL_KINDS if k != "rl")),)
    sft = infer_kind([{"data": {"type": "fake", "seq_len": 64}}])
    assert (sft.kind, sft.deciding[0][0]) == ("sft", ("data", "type"))


def test_the_files_of_a_composed_run_are_told_together():
    """`sft @ base.toml @ fake.toml`: base holds keys every trainer has, fake the SFT ones."""
    base = {"max_steps": 10, "model": {"name": "Qwen/Qwen3-0.6B"}, "optim": {"lr": 1e-5}}
    assert infer_kind([base]).candidates == ("rl", "sft")
    both = infer_kind([base, {"data": {"type": "fake"}}])
    assert (both.kind, both.deciding) == (
        "sft",
        ((("data", "type"), tuple(k for k in ALL_KINDS if k != "sft")),),
    )


def test_arrays_of_tables_and_open_tables():
    """Keys inside [[eval.source]] are walked; an open table (env) takes any key below it."""
    source = {"name": "x", "env": {"taskset": {"id": "t", "anything": {"deep": 1}}}}
    assert unknown_keys("sft", {"eval": {"source": [source]}}) == []
    typo = {"eval": {"source": [{"name": "x", "intervall": 3}]}}
    assert unknown_keys("sft", typo) == [("eval", "source", "[]", "intervall")]
    assert dotted_key(("eval", "source", "[]", "intervall")) == "eval.source[].intervall"


def test_a_typo_is_charged_to_the_kind_that_owns_the_other_keys():
    guess = infer_kind([{"max_stepz": 3, "data": {"type": "fake", "seq_len": 64}}])
    assert (guess.kind, guess.unknown, guess.fits) == ("sft", (("max_stepz",),), False)


def test_a_real_ambiguity_lists_the_kinds_that_fit():
    guess = infer_kind([{"max_steps": 4, "model": {"name": "m"}}])
    trainers_and_rl = ("rl", "sft", "orchestrator", "rl_run")
    assert (guess.kind, guess.candidates, guess.unknown) == (None, trainers_and_rl, ())
    typo = infer_kind([{"model": {"nmae": "m"}}])  # no kind has it, these kinds have [model]
    assert (typo.kind, typo.candidates, typo.unknown) == (
        None,
        trainers_and_rl,
        (("model", "nmae"),),
    )


def test_a_plain_value_where_a_kind_has_only_a_table_rules_that_kind_out():
    """`model = "Qwen/Qwen3-0.6B"` is the eval command's (its model is a name); the trainers'
    and the orchestrator's [model] is a table. The reference's evals files name no kind."""
    guess = infer_kind([{"model": "Qwen/Qwen3-0.6B", "eval": {"source": [{"name": "x"}]}}])
    assert (guess.kind, guess.fits) == ("eval", True)
    assert guess.deciding[0][0] == ("model",)
    table = infer_kind([{"model": {"name": "m"}, "eval": {"source": [{"name": "x"}]}}])
    assert table.kind != "eval"


def test_a_file_of_another_tool_fits_no_kind():
    guess = infer_kind([{"project": {"name": "x"}, "tool": {"ruff": {}}}])
    assert (guess.kind, guess.candidates) == (None, ())
    # one key of a kind among foreign ones is not enough to call it that kind's config
    seed = infer_kind([{"seed": 1, "project": {"name": "x"}}])
    assert (seed.kind, seed.candidates) == (None, ("orchestrator",))
