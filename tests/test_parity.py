"""The parity proof runs in CI (its fast profile), and each drift the review planted in a copy
of the project makes it fail, in the check that should see it.

A drift is planted in a throwaway copy: schema/, src/trainspec/ and generated/ (placed at
src/trainspec/generated, so PYTHONPATH at the copy's src/ imports all of it), optionally
regenerated with `scripts/gen.py --schema ... --output ...`, then proved with
`python -m tools.parity` (PYTHONPATH at the copy's src/, then the repository root for `tools`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

SUMMARY = re.compile(r"^(\d+) cases, (\d+) accepted, (\d+) differences$", re.M)
TABLES = re.compile(r"^tables drawn: (.*)$", re.M)
CHECKS = (
    "declared",
    "documents",
    "consumers",
    "auto",
    "differential",
    "structure",
    "rules",
)
IGNORE = shutil.ignore_patterns("__pycache__")


def parity(*args: str, src: Path | None = None) -> tuple[int, str]:
    env = dict(os.environ)
    if src is not None:  # the copy's trainspec; the repository root still holds the proof (tools)
        env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT)])
    result = subprocess.run(
        [sys.executable, "-m", "tools.parity", "--profile", "ci", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    return result.returncode, result.stdout + result.stderr


class Copy:
    """A throwaway copy of what the proof reads, to plant one drift in."""

    def __init__(self, root: Path) -> None:
        self.schema = root / "schema"
        self.src = root / "src"
        self.package = self.src / "trainspec"
        self.generated = self.package / "generated"
        shutil.copytree(ROOT / "schema", self.schema)
        shutil.copytree(ROOT / "src" / "trainspec", self.package, ignore=IGNORE)
        shutil.copytree(ROOT / "generated", self.generated, ignore=IGNORE)

    def plant(self, relative: str, old: str, new: str) -> None:
        path = self.schema.parent / relative
        text = path.read_text()
        assert old in text, f"{old!r} is not in {relative}: the drift no longer applies"
        path.write_text(text.replace(old, new))

    def regenerate(self) -> None:
        subprocess.run(
            [
                sys.executable,
                "scripts/gen.py",
                "--schema",
                str(self.schema),
                "--output",
                str(self.generated),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=600,
        )

    def parity(self, *only: str) -> tuple[int, str]:
        flags = [arg for check in only for arg in ("--only", check)]
        return parity("--schema", str(self.schema), *flags, src=self.src)


@pytest.fixture
def copy(tmp_path) -> Copy:
    return Copy(tmp_path)


def differences(out: str) -> int:
    return int(SUMMARY.search(out).group(3))


def tables_drawn(out: str) -> dict[str, tuple[int, int]]:
    """kind -> (tables in an accepted document, tables of the schema), from the proof's line
    `tables drawn: rl 48 of 48, sft 212 of 212`."""
    line = TABLES.search(out)
    assert line, out
    found = re.findall(r"(\w+) (\d+) of (\d+)", line.group(1))
    return {kind: (int(n), int(of)) for kind, n, of in found}


@pytest.fixture
def proof(monkeypatch):
    """The proof's modules, imported here (the repository root, where `tools` is, on the path
    for this test only)."""
    monkeypatch.syspath_prepend(str(ROOT))
    from tools.bundle_schema import bundle
    from tools.parity import documents, facts

    return bundle, facts, documents


def test_the_ci_profile_finds_no_difference():
    code, out = parity()
    assert code == 0, out
    cases, accepted, problems = map(int, SUMMARY.search(out).groups())
    assert cases > 1000 and 0 < accepted < cases and problems == 0
    for check in CHECKS:
        assert re.search(rf"^{re.escape(check)}\s+\d+ cases", out, re.M), check
    kinds = re.search(r"mutated in (\d+) kinds", out)
    assert kinds and int(kinds.group(1)) >= 12, out
    assert all(n == of for n, of in tables_drawn(out).values()), out


def test_the_ci_profile_draws_every_table_the_full_profile_draws(proof):
    """Both profiles must put every table of the schema into an accepted document (every
    union variant, the tables of lists and of maps, a difference where one is missing); the ci
    profile draws 40 documents at random and aims more at each table those missed. So an
    `[[eval.source]]` table, whose "None" round trip only the full profile used to draw,
    is proved in CI too."""
    bundle, facts, _ = proof
    from trainspec.kinds import KIND_INFO, TRAINER_KINDS

    schema_tables = {
        kind: facts.tables(facts.facts(bundle(ROOT / "schema", KIND_INFO[kind].schema)))
        for kind in TRAINER_KINDS
    }
    assert {
        "",
        "eval.source.*",
        "eval.source.*.sampling",
        "eval.source.*.data",
        "optim[muon]",
        "renderer[qwen3]",
    } <= schema_tables["sft"]
    assert {"optim[sign_sgd]", "loss[custom]", "weight_broadcast[nccl]"} <= schema_tables["rl"]
    code, out = parity("--only", "documents")
    assert code == 0, out
    assert tables_drawn(out) == {kind: (len(t), len(t)) for kind, t in schema_tables.items()}
    assert re.search(r"\((\d+) aimed at a table the others missed\)", out), out


def test_drawing_at_random_alone_leaves_tables_unproved_and_the_proof_says_so():
    """Without aiming, the ci profile's 40 random documents miss tables: each one is a
    difference, named, and the proof fails."""
    code, out = parity("--only", "documents", "--no-aim")
    assert code == 1, out
    drawn = tables_drawn(out)
    assert drawn["sft"][0] < drawn["sft"][1], out
    assert re.search(r"^    \[\w+\] table \S+: no accepted document holds it", out, re.M), out
    assert "(0 aimed at a table the others missed)" in out


def test_none_in_a_list_of_tables_dumps_as_null_where_the_key_is_nullable(proof):
    """The dump of an `[[eval.source]]` is compared key by key with what the schema declares
    for `eval.source.*` (the proof once looked up `eval.source.0.interval`, found nothing, and
    called a "None" read back as null a difference); defaults inside the list are checked too."""
    bundle, facts, documents = proof
    from trainspec.generated.sft_trainer import SFTTrainerConfig

    declared = facts.facts(bundle(ROOT / "schema", "sft_trainer"))
    assert "null" in declared["eval.source.*.interval"]["types"]
    written = {
        "eval": {
            "source": [
                {"env": {"taskset": {"id": "builtin:reverse-text"}}},
                {"data": "None", "interval": "None", "reward_weights": "None", "name": "None"},
            ]
        }
    }
    dumped = SFTTrainerConfig.model_validate(written).model_dump(mode="json")
    assert dumped["eval"]["source"][1]["interval"] is None
    assert documents.compare_dump(written, dumped, declared) == []
    dumped["eval"]["source"][1]["interval"] = 7
    dumped["eval"]["source"][0]["ratio"] = 2.0
    assert sorted(documents.compare_dump(written, dumped, declared)) == [
        "eval.source.0.ratio: default 1.0 dumped as 2.0",
        "eval.source.1.interval: 'None' dumped as 7",
    ]


def test_an_untouched_copy_finds_no_difference(copy):
    code, out = copy.parity("declared", "rules")
    assert code == 0, out


def test_a_default_changed_only_in_generated_code_is_caught(tmp_path):
    generated = tmp_path / "generated"
    shutil.copytree(ROOT / "generated", generated, ignore=IGNORE)
    source = generated / "gc.py"
    source.write_text(source.read_text().replace("= 50", "= 51"))
    code, out = parity("--generated", str(generated), "--only", "declared")
    assert code == 1
    assert "gc.interval: default is 50 in schema/ but 51 in generated classes" in out


def test_a_bound_changed_only_in_the_schema_is_caught(copy):
    copy.plant("schema/log.json", '"exclusiveMinimum": 0', '"exclusiveMinimum": 1')
    code, out = copy.parity("declared")
    assert code == 1
    assert "log.interval: exclusiveMinimum is 1.0 in schema/ but 0.0 in generated classes" in out


def test_removing_a_shared_rule_is_caught(copy):
    copy.plant("src/trainspec/validators/pipeline.py", "    reject_protected_env_vars,\n", "")
    code, out = copy.parity("rules")
    assert code == 1
    assert "reject_protected_env_vars" in out


def test_removing_an_sft_rule_is_caught(copy):
    copy.plant("src/trainspec/validators/sft.py", "    validate_batch_size,\n", "")
    code, out = copy.parity("rules")
    assert code == 1
    assert "validate_batch_size" in out


def test_changing_a_rule_limit_in_the_code_is_caught(copy):
    copy.plant("src/trainspec/validators/shared.py", "MAX_TRACE_STEPS = 10", "MAX_TRACE_STEPS = 20")
    code, out = copy.parity("rules")
    assert code == 1
    assert "dont_do_massive_traces" in out


def test_a_rule_stated_in_the_schema_again_is_caught(copy):
    """One place per rule: a protected-variable list back in the schema is a second place."""
    copy.plant(
        "schema/base_trainer.json",
        '"additionalProperties": {\n        "type": "string"\n      },',
        '"additionalProperties": {\n        "type": "string"\n      },\n'
        '      "propertyNames": {"not": {"enum": ["CUDA_VISIBLE_DEVICES", "HOME"]}},',
    )
    copy.regenerate()
    code, out = copy.parity("structure")
    assert code == 1
    assert "base_trainer.json" in out and "cross-field rule in the schema" in out


def test_a_signal_added_to_the_schema_without_regenerating_is_caught(copy):
    copy.plant(  # both lists: checkpoint_signal and stop_signal
        "schema/control.json",
        '"description": "User signal 2 (kill -USR2 <pid>)."\n            }\n          ]',
        '"description": "User signal 2 (kill -USR2 <pid>)."\n            },\n'
        '            {"const": "SIGHUP", "description": "Hang-up."}\n          ]',
    )
    code, out = copy.parity("declared")
    assert code == 1
    assert "SIGHUP" in out


def test_a_step_pattern_that_admits_no_step_is_caught(copy):
    copy.plant("schema/resume.json", "step_[0-9]+", "step_[0-9]*")
    copy.regenerate()
    code, out = copy.parity("consumers")
    assert code == 1
    assert "resume.dir = 'step_' is accepted, but names no checkpoint step" in out


def test_lax_classes_are_caught(copy):
    copy.plant("src/trainspec/config_model.py", "strict=True", "strict=False")
    code, out = copy.parity("documents")
    assert code == 1
    assert "only the classes accept" in out, out


def test_an_auto_value_changed_only_in_generated_code_is_caught(copy):
    copy.plant(
        "src/trainspec/generated/optimizer.py",
        '{"rl": 0.0, "sft": 0.01}',
        '{"rl": 0.0, "sft": 0.02}',
    )
    code, out = copy.parity("declared", "auto")
    assert code == 1
    assert "auto resolves to 0.02, not 0.01" in out
    assert "x-trainspec-auto" in out
