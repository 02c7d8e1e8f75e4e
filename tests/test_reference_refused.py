"""The reference's table of what each command refuses at start (scripts/reference_refused.py)
names exactly the paths of the field-coverage tables, whose tests prove that each row is refused
at start naming its path: a refusal added to a command (and so to its coverage table) without a
line in the reference, or a line left behind by one taken out, fails here."""

from __future__ import annotations

import ast
import importlib.util
import sys

import pytest
from helpers.support import ROOT

pytest.importorskip("torch")  # the coverage tables build their rows with torch at hand

sys.path.insert(0, str(ROOT / "scripts"))
from reference_refused import REFUSED  # noqa: E402

TESTS = ROOT / "tests"


def load(path: str):
    spec = importlib.util.spec_from_file_location(f"refusal_rows_{len(sys.modules)}", TESTS / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dict_keys(path: str, name: str) -> set[str]:
    """The keys of the dict literal assigned to `name` in a test module (read, not run: a test
    module is collected by pytest, not imported)."""
    tree = ast.parse((TESTS / path).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            assert isinstance(node.value, ast.Dict)
            return {ast.literal_eval(key) for key in node.value.keys if key is not None}
    raise AssertionError(f"no {name} in {path}")


def coverage_paths() -> dict[str, set[str]]:
    from helpers.field_refusals import REFUSALS

    rl = load("trainers/rl/rl_field_refusals.py")
    return {
        "sft": {row[0] for row in REFUSALS},
        "rl-trainer": {row[0] for row in rl.RL_REFUSALS},
        "orchestrator": {row[0] for row in rl.ORCHESTRATOR_REFUSALS},
        "rl": dict_keys("trainers/rl_run/test_rl_run_field_coverage.py", "REFUSALS"),
    }


def test_the_reference_names_what_the_field_coverage_tables_prove_refused():
    proven = coverage_paths()
    assert set(proven) == set(REFUSED)
    for command, paths in proven.items():
        assert set(REFUSED[command]) == paths, command
