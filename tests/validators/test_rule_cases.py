"""The rule table (rule_cases.toml): every case holds, every rule of every kind has a case that
fires and one that passes, and the table fails when a rule goes missing or a boundary moves."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from rule_cases import (
    KINDS,
    TABLE,
    RuleCase,
    load_cases,
    other_reports,
    rule_names,
    run_case,
)

from trainspec.validators import pipeline

CASES = load_cases()
RUNS = [(case, kind) for case in CASES for kind in case.kinds]


def cases_of(rule: str, kind: str) -> list[RuleCase]:
    return [case for case in CASES if case.rule == rule and kind in case.kinds]


@pytest.mark.parametrize(("case", "kind"), RUNS, ids=[case.label(kind) for case, kind in RUNS])
def test_case_holds(case: RuleCase, kind: str):
    problems = run_case(case, [kind])
    assert not problems, "\n".join(problems)


def test_ids_are_unique():
    labels = [case.label(kind) for case, kind in RUNS]
    assert len(labels) == len(set(labels))


# --- coverage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_every_rule_has_a_firing_case(kind: str):
    missing = [name for name in rule_names(kind) if not any(c.fires for c in cases_of(name, kind))]
    assert not missing, f"rules of {kind} without a case that fires under {kind}: {missing}"


@pytest.mark.parametrize("kind", KINDS)
def test_every_rule_has_a_passing_case(kind: str):
    missing = [name for name in rule_names(kind) if not any(c.passes for c in cases_of(name, kind))]
    assert not missing, f"rules of {kind} without a case that passes under {kind}: {missing}"


def test_every_case_names_a_rule_of_its_kinds():
    names = {kind: set(rule_names(kind)) for kind in KINDS}
    strays = sorted(
        {f"{case.rule} [{kind}]" for case, kind in RUNS if case.rule not in names[kind]}
    )
    assert not strays, f"cases naming a rule that their kind does not run: {strays}"


def test_each_document_is_about_its_rule():
    """No other rule reports on a case's document, unless the case's note says why."""
    crowded = [
        f"{case.label(kind)}: {others}"
        for case, kind in RUNS
        if case.note is None and (others := other_reports(case, kind))
    ]
    assert not crowded, "other rules report on these documents:\n" + "\n".join(crowded)


# --- the table can fail -----------------------------------------------------------------------

DROPPED = [
    ("sft", "validate_batch_size"),
    ("rl", "reject_protected_env_vars"),
    ("sft", "resolve_auto_defaults"),
    ("rl", "resolve_tokenizer_from_model"),
    ("orchestrator", "single_rollouts_learn_nothing"),
    ("rl_run", "trainer_rules"),
    ("rl_run", "transports_agree"),
]


@pytest.mark.parametrize(("kind", "dropped"), DROPPED, ids=[f"{k}-{r}" for k, r in DROPPED])
def test_a_dropped_rule_is_caught(monkeypatch, kind: str, dropped: str):
    """As if the rule were commented out of pipeline.py: each of its firing cases fails."""
    original = pipeline.rules_for

    def rules_for(asked):
        rules = original(asked)
        if asked == kind:
            rules = tuple(rule for rule in rules if rule.__name__ != dropped)
        return rules

    firing = [case for case in cases_of(dropped, kind) if case.fires]
    assert firing
    for case in firing:
        assert not run_case(case, [kind])
    monkeypatch.setattr(pipeline, "rules_for", rules_for)
    assert dropped not in rule_names(kind)
    for case in firing:
        problems = run_case(case, [kind])
        assert problems, f"{case.label(kind)} still holds without {dropped}"
        assert all(problem.startswith(f"{dropped} [{kind}]: ") for problem in problems)


FULL_OFFLOAD_SIGN_SGD = {
    "model": {"full_offload": True, "optim_cpu_offload": False},
    "optim": {"type": "sign_sgd", "max_norm": "None"},
}
MOVED = {
    # constant of validators/shared.py: (new value, its rule, a passing case's document or None)
    "MAX_TRACE_STEPS": (9, "dont_do_massive_traces", {"trace_path": "trace.json", "max_steps": 9}),
    "FULL_OFFLOAD_OPTIMIZERS": (
        ("adamw",),
        "full_optimizer_offload_requires_supported_optimizer",
        FULL_OFFLOAD_SIGN_SGD,
    ),
    "PROTECTED_ENV_VARS": (
        ("CUDA_VISIBLE_DEVICES", "cuda_visible_devices"),
        "reject_protected_env_vars",
        None,
    ),
}


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_boundary_is_caught(monkeypatch, name: str):
    """The passing cases sit at the boundaries: moving one makes a passing case fail."""
    value, rule, document = MOVED[name]
    passing = [case for case in CASES if case.rule == rule and case.passes]
    if document is not None:
        passing = [case for case in passing if case.document == document]
    assert passing and not any(run_case(case) for case in passing)
    monkeypatch.setattr(importlib.import_module("trainspec.validators.shared"), name, value)
    assert any(run_case(case) for case in passing)


# --- the loader -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('rule = "r"\nkinds = ["rl"]\ndocument = {}\nerror = ["x"]', "unknown keys"),
        ('rule = "r"\nkinds = ["rl"]\ndocument = {}\nerrors = ["x"]', "needs a message"),
        ('rule = "r"\nkinds = ["trainer"]\ndocument = {}', "kinds must be"),
        ('rule = "r"\nkinds = ["rl"]', "needs document"),
        ('rule = "r"\nkinds = ["rl"]\ndocument = {}\nmessage = "m"', "expects no errors"),
        ('rule = "r"\nkinds = ["rl"]\ndocument = {}\ninner_rule = "x"', "only applies"),
    ],
)
def test_the_loader_refuses_a_malformed_case(tmp_path: Path, text: str, why: str):
    table = tmp_path / "cases.toml"
    table.write_text(f"[[case]]\n{text}\n")
    with pytest.raises(ValueError, match=why):
        load_cases(table)


def test_the_loader_runs_without_pytest():
    """The parity proof (tools/parity) loads the module by path, in a process without pytest."""
    module = TABLE.with_suffix(".py")
    script = (
        "import importlib.util, sys\n"
        "sys.modules['pytest'] = None\n"
        f"spec = importlib.util.spec_from_file_location('rule_cases', {str(module)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "cases = module.load_cases()\n"
        "print(len(cases), sum(1 for case in cases[:5] for p in module.run_case(case)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(len(CASES)), "0"]
