"""Rules the schema states (so editors flag them) agree with their handwritten twins, case by
case; every other rule is listed as code-only with the reason (scripts/parity_rules.py)."""

from __future__ import annotations

import sys

import pytest
from support import ROOT

from trainspec.config.bundle import bundled_schema
from trainspec.validators.pipeline import rules_for

sys.path.insert(0, str(ROOT / "scripts"))
import parity_rules  # noqa: E402

STATED = parity_rules.stated_rules(bundled_schema("rl")) | parity_rules.stated_rules(
    bundled_schema("sft")
)


@pytest.mark.parametrize(
    "kind, rule, document, rejects", parity_rules.CASES, ids=lambda v: str(v)[:60]
)
def test_schema_rule_and_handwritten_twin_agree(kind, rule, document, rejects):
    assert (rule in parity_rules.schema_verdict(kind, document)) is rejects
    assert (rule in parity_rules.code_verdict(kind, document)) is rejects


def test_every_rule_is_stated_or_listed_as_code_only():
    names = {rule.__name__ for kind in ("rl", "sft") for rule in rules_for(kind)}
    assert names - STATED - set(parity_rules.CODE_ONLY) == set()
    assert STATED & set(parity_rules.CODE_ONLY) == set()
    assert set(parity_rules.PARTLY_CODE) <= STATED
    assert all(reason for reason in parity_rules.CODE_ONLY.values())


def test_every_stated_rule_has_cases_both_ways():
    for name in STATED:
        outcomes = {rejects for _, rule, _, rejects in parity_rules.CASES if rule == name}
        assert outcomes == {True, False}, name


def test_stage_one_leaves_stated_rules_to_their_twins():
    from trainspec.config import ConfigError, validate

    with pytest.raises(ConfigError) as err:
        validate("rl", {"trace_path": "t.json"})
    [issue] = err.value.errors
    assert issue.rule == "dont_do_massive_traces"  # the twin's message, values and fix
    assert "must be below 10 when trace_path is set" in issue.message
