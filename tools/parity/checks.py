"""The parity checks other than the document differential (documents.py).

Each check adds cases to its tally; every case is a comparison that can come out different.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from .facts import differences, facts
from .subject import KINDS, Subject

ROOT = Path(__file__).resolve().parents[2]
RULE_CASES = ROOT / "tests" / "validators" / "rule_cases.py"


# --- declared --------------------------------------------------------------------------------


def check_declared(subject: Subject, tally) -> None:
    """The classes declare what the schema's view declares, key by key."""
    for kind, cls in subject.classes.items():
        expected, actual = facts(subject.views[kind]), facts(cls.model_json_schema())
        for path in sorted(expected.keys() | actual.keys()):
            found = differences(
                {path: expected.get(path, {})} if path in expected else {},
                {path: actual.get(path, {})} if path in actual else {},
                "schema/",
                "generated classes",
            )
            tally.case(False)
            tally.problems += [f"[{kind}] {d}" for d in found]


# --- consumers -------------------------------------------------------------------------------

RESUME_DIR_PROBES = (
    "step_",
    "step_1",
    "a/step_12",
    "a/step_12/",
    "a/step_\u00b2",
    "a/step_\u0663",
    "a/step_1x",
    "a/latest",
    "",
)


def check_consumers(subject: Subject, tally) -> None:
    """What the config accepts, the code that reads it can use: every resume.dir stage 1
    accepts names a step the checkpoint code can read."""
    from trainspec.config.steps import step_of_dir

    from .subject import stage1_accepts

    for kind in subject.classes:
        for probe in RESUME_DIR_PROBES:
            accepted = stage1_accepts(kind, {"resume": {"dir": probe}})
            tally.case(accepted)
            if accepted and step_of_dir(probe) is None:
                tally.problems.append(
                    f"[{kind}] resume.dir = {probe!r} is accepted, but names no checkpoint step"
                )


# --- the auto table --------------------------------------------------------------------------


def _document_for(path: str) -> tuple[dict[str, Any], list[str]]:
    """A document that selects the union variants in `path` ("optim[sgd].weight_decay"), and
    the plain attribute path to read."""
    document: dict[str, Any] = {}
    node, attributes = document, []
    parts = path.split(".")
    for part in parts[:-1]:
        name, _, tag = part.partition("[")
        node = node.setdefault(name, {})
        if tag:
            node["type"] = tag.rstrip("]")
        attributes.append(name)
    return document, [*attributes, parts[-1]]


def check_auto(subject: Subject, tally) -> None:
    """Each "auto" setting resolves, per kind, to the value schema/ states (x-trainspec-auto)."""
    from trainspec.config import ConfigError, validate

    for kind in subject.classes:
        for path, fact in facts(subject.schemas[kind]).items():
            if "x-trainspec-auto" not in fact:
                continue
            want = json.loads(fact["x-trainspec-auto"])[kind]
            document, attributes = _document_for(path)
            tally.case(True)
            try:
                value: Any = validate(kind, document).config
            except ConfigError as err:
                tally.problems.append(f"[{kind}] {path}: {document} is rejected: {err}")
                continue
            for attribute in attributes:
                value = getattr(value, attribute)
            if value != want:
                tally.problems.append(f"[{kind}] {path}: auto resolves to {value!r}, not {want!r}")


# --- structure -------------------------------------------------------------------------------

RULE_KEYWORDS = ("if", "then", "else", "not", "dependentSchemas", "dependentRequired")


def _stated_rules(node: Any, where: str) -> list[str]:
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "not" and value == {}:
                continue  # a renamed key: accepts nothing (x-trainspec-renamed)
            if key in RULE_KEYWORDS or key == "x-trainspec-rule":
                found.append(f"{where}/{key}")
            elif key not in ("properties", "$defs"):
                found += _stated_rules(value, f"{where}/{key}")
            else:
                for name, item in value.items() if isinstance(value, dict) else ():
                    found += _stated_rules(item, f"{where}/{key}/{name}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found += _stated_rules(item, f"{where}/{index}")
    return found


def check_structure(subject: Subject, tally) -> None:
    from trainspec.validators.pipeline import SHARED_RULES, rules_for

    rl, sft = subject.classes["rl"], subject.classes["sft"]
    base = rl.__mro__[1]
    for name in base.model_fields:
        a, b = rl.model_fields[name], sft.model_fields[name]
        tally.case(True)
        if (a.annotation, a.default, a.description) != (b.annotation, b.default, b.description):
            tally.problems.append(f"base field {name} differs between RL and SFT")
    for kind in KINDS:
        tally.case(True)
        if list(rules_for(kind))[: len(SHARED_RULES)] != list(SHARED_RULES):
            tally.problems.append(f"{kind} does not run the shared rules first, in order")
    for cls in subject.classes.values():
        tally.case(True)
        if cls.__mro__[1] is not base:
            tally.problems.append(f"{cls.__name__} does not extend {base.__name__}")
    for path in sorted(subject.schema_dir.glob("*.json")):
        tally.case(True)
        for where in _stated_rules(json.loads(path.read_text()), path.name):
            tally.problems.append(
                f"{where}: a cross-field rule in the schema; rules live in "
                "src/trainspec/validators/ only (one place per rule)"
            )


# --- rules -----------------------------------------------------------------------------------


def _rule_cases():
    spec = importlib.util.spec_from_file_location("parity_rule_cases", RULE_CASES)
    module = importlib.util.module_from_spec(spec)
    sys.modules["parity_rule_cases"] = module
    spec.loader.exec_module(module)
    return module


def check_rules(tally) -> None:
    """tests/validators/rule_cases.toml, the statement of what each rule does, holds on this
    pipeline; every rule of every kind fires in at least one case."""
    from trainspec.config.kinds import ALL_KINDS
    from trainspec.validators.pipeline import rules_for

    cases = _rule_cases()
    loaded = cases.load_cases()
    fired: set[tuple[str, str]] = set()
    for case in loaded:
        problems = cases.run_case(case)
        for kind in case.kinds:
            tally.case(not case.fires)
            if case.fires:
                fired.add((case.rule, kind))
        tally.problems += problems
    for kind in ALL_KINDS:
        for rule in rules_for(kind):
            tally.case(True)
            if (rule.__name__, kind) not in fired:
                tally.problems.append(f"{rule.__name__} [{kind}]: no case in which it fires")
