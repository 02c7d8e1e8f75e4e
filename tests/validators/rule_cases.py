"""The rule table (rule_cases.toml) as data, and the runner that checks one case against the code.

    from rule_cases import load_cases, run_case
    for case in load_cases():
        problems = run_case(case)   # [] when the code does what the case says

This module needs neither pytest nor, until a case runs, trainspec: the parity proof loads it
by path and re-runs the same cases on planted copies of the code. Every import of trainspec
happens inside `run_case`, so whichever trainspec is importable at that moment is the one
checked. Run it as a script to check the whole table: ``python tests/validators/rule_cases.py``.

What a case means is described at the top of rule_cases.toml.
"""

import copy
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().with_name("rule_cases.toml")
KINDS = ("rl", "sft", "orchestrator", "rl_run", "inference", "eval")
NULL = "None"  # how the table writes null (TOML has none), as the config files do
NESTING_SUFFIX = "_rules"  # rl_run's rules that run a whole pipeline on one sub-table
FIELDS = frozenset(
    {"rule", "kinds", "document", "errors", "warnings", "message", "resolved", "inner_rule", "note"}
)
_MISSING = object()


@dataclass(frozen=True)
class RuleCase:
    """One statement about one rule: under each of `kinds`, validating `document` makes the rule
    report exactly `errors` and `warnings` (dotted paths, in order), the first of them with
    `message` in its text, and leaves the `resolved` values in the config."""

    rule: str
    kinds: tuple[str, ...]
    document: dict[str, Any]
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    message: str | None = None
    resolved: dict[str, Any] = field(default_factory=dict)
    inner_rule: str | None = None
    note: str | None = None
    number: int = 1  # 1-based among the cases of the same rule, in table order

    @property
    def passes(self) -> bool:
        """The rule reports nothing on this document."""
        return not self.errors and not self.warnings

    @property
    def fires(self) -> bool:
        """The rule reports something, or sets a value the document does not hold."""
        if self.errors or self.warnings:
            return True
        return any(
            not _same(_document_value(self.document, path), _expected(value))
            for path, value in self.resolved.items()
        )

    def label(self, kind: str) -> str:
        """A readable test id: ``rule-kind-N``."""
        return f"{self.rule}-{kind}-{self.number}"


# --- loading -------------------------------------------------------------------------------------


def load_cases(path: str | Path = TABLE) -> list[RuleCase]:
    """Every case of the table, in table order; a malformed case is a ValueError naming it."""
    with open(path, "rb") as file:
        table = tomllib.load(file)
    unknown = set(table) - {"case"}
    if unknown:
        raise ValueError(f"{path}: unknown top-level keys {sorted(unknown)}; only [[case]]")
    cases: list[RuleCase] = []
    numbers: dict[str, int] = {}
    for position, raw in enumerate(table.get("case", []), start=1):
        where = f"{path}: case {position} (rule {raw.get('rule', '?')!r})"
        _check_raw(raw, where)
        numbers[raw["rule"]] = numbers.get(raw["rule"], 0) + 1
        cases.append(
            RuleCase(
                rule=raw["rule"],
                kinds=tuple(raw["kinds"]),
                document=raw["document"],
                errors=tuple(raw.get("errors", ())),
                warnings=tuple(raw.get("warnings", ())),
                message=raw.get("message"),
                resolved=dict(raw.get("resolved", {})),
                inner_rule=raw.get("inner_rule"),
                note=raw.get("note"),
                number=numbers[raw["rule"]],
            )
        )
    return cases


def _check_raw(raw: dict[str, Any], where: str) -> None:
    """Refuse what would make a case silently mean something else (a misspelled `error =`
    would otherwise turn a firing case into a passing one)."""

    def fail(why: str) -> None:
        raise ValueError(f"{where}: {why}")

    unknown = set(raw) - FIELDS
    if unknown:
        fail(f"unknown keys {sorted(unknown)}; known: {sorted(FIELDS)}")
    for key in ("rule", "kinds", "document"):
        if key not in raw:
            fail(f"needs {key}")
    if not isinstance(raw["rule"], str) or not raw["rule"]:
        fail("rule must be a function name")
    kinds = raw["kinds"]
    if not isinstance(kinds, list) or not kinds or any(k not in KINDS for k in kinds):
        fail(f"kinds must be a non-empty list of {KINDS}, got {kinds!r}")
    if len(set(kinds)) != len(kinds):
        fail(f"kinds repeats a kind: {kinds!r}")
    if not isinstance(raw["document"], dict):
        fail("document must be a table")
    for key in ("errors", "warnings"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
            fail(f"{key} must be a list of dotted paths")
    reports = bool(raw.get("errors") or raw.get("warnings"))
    message = raw.get("message")
    if reports and not (isinstance(message, str) and message):
        fail("needs a message (a substring of the rule's first message)")
    if not reports and message is not None:
        fail("has a message but expects no errors or warnings")
    if not isinstance(raw.get("resolved", {}), dict):
        fail("resolved must be a table of dotted path = value")
    for key in ("inner_rule", "note"):
        if key in raw and not (isinstance(raw[key], str) and raw[key]):
            fail(f"{key} must be a non-empty string")
    if "inner_rule" in raw and not raw["rule"].endswith(NESTING_SUFFIX):
        fail(f"inner_rule only applies to the nesting rules (*{NESTING_SUFFIX})")


# --- running -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What validating one document gave: the resolved config (None when rejected), and every
    error and warning (trainspec ConfigIssue objects)."""

    config: Any
    errors: list[Any]
    warnings: list[Any]


def validate_document(kind: str, document: dict[str, Any]) -> Outcome:
    """Run the whole pipeline (schema, classes, rules) on a copy of `document`."""
    from trainspec.config import ConfigError, validate

    try:
        resolved = validate(kind, copy.deepcopy(document))  # type: ignore[arg-type]
    except ConfigError as error:
        return Outcome(None, list(error.errors), list(error.warnings))
    return Outcome(resolved.config, [], list(resolved.warnings))


def rule_names(kind: str) -> list[str]:
    """The names of the rules `kind` runs now (read at call time, so a patched pipeline counts)."""
    from trainspec.validators import pipeline

    return [rule.__name__ for rule in pipeline.rules_for(kind)]  # type: ignore[arg-type]


def reported_by(rule: str, kind: str, issues: list[Any]) -> list[Any]:
    """The issues `rule` reported. A nesting rule of rl_run (``trainer_rules``) runs a whole
    pipeline on its sub-table and passes the inner issues on under the inner rule's name, with
    the sub-table's prefix on the path: those count as the nesting rule's."""
    mine = [issue for issue in issues if issue.rule == rule]
    if rule.endswith(NESTING_SUFFIX):
        prefix = rule.removesuffix(NESTING_SUFFIX) + "."
        own = set(rule_names(kind))
        mine = [
            issue
            for issue in issues
            if issue.rule == rule
            or (issue.rule is not None and issue.rule not in own and issue.path.startswith(prefix))
        ]
    return mine


def run_case(case: RuleCase, kinds: tuple[str, ...] | list[str] | None = None) -> list[str]:
    """The problems of `case` under each of its kinds (or of `kinds`); [] when the case holds."""
    problems: list[str] = []
    for kind in kinds or case.kinds:
        problems.extend(_run(case, kind))
    return problems


def _run(case: RuleCase, kind: str) -> list[str]:
    head = f"{case.rule} [{kind}]"
    tail = f" (case {case.label(kind)})"
    try:
        out = validate_document(kind, case.document)
    except Exception as exc:  # a crashing rule is a finding, not a reason to stop the table
        return [f"{head}: validation raised {type(exc).__name__}: {exc}{tail}"]
    early = [issue for issue in out.errors if issue.rule is None]
    if early:
        found = [f"{issue.path} {issue.message}" for issue in early]
        return [
            f"{head}: the schema or classes rejected the document before any rule ran: "
            f"{found}{tail}"
        ]

    problems: list[str] = []
    errors = reported_by(case.rule, kind, out.errors)
    warnings = reported_by(case.rule, kind, out.warnings)
    for what, expected, got in (
        ("errors", list(case.errors), errors),
        ("warnings", list(case.warnings), warnings),
    ):
        paths = [issue.path for issue in got]
        if paths != expected:
            problems.append(f"{head}: expected {what} {expected}, got {paths}{tail}")
    reported = errors + warnings
    if case.message is not None and reported and case.message not in reported[0].message:
        problems.append(
            f"{head}: expected the first message to contain {case.message!r}, "
            f"got {reported[0].message!r}{tail}"
        )
    for issue in reported:
        if not issue.fix:
            problems.append(f"{head}: reported {issue.path} without a fix{tail}")
        if case.inner_rule is not None and issue.rule != case.inner_rule:
            problems.append(
                f"{head}: expected {issue.path} to be reported by {case.inner_rule}, "
                f"got {issue.rule}{tail}"
            )

    if not case.errors and case.note is None and out.config is None:
        others = [(issue.rule, issue.path) for issue in out.errors]
        problems.append(
            f"{head}: expected the document to be accepted, other rules rejected it: {others}{tail}"
        )
    if case.resolved:
        if out.config is None:
            problems.append(f"{head}: cannot check the resolved values, document rejected{tail}")
        else:
            for path, value in case.resolved.items():
                actual = _config_value(out.config, path)
                if actual is _MISSING:
                    problems.append(f"{head}: the resolved config has no {path}{tail}")
                elif not _same(actual, _expected(value)):
                    problems.append(
                        f"{head}: expected {path} to resolve to {_expected(value)!r}, "
                        f"got {actual!r}{tail}"
                    )
    return problems


def other_reports(case: RuleCase, kind: str) -> list[tuple[str | None, str]]:
    """(rule, path) of every error and warning that a rule other than the case's reported."""
    out = validate_document(kind, case.document)
    mine = {id(issue) for issue in reported_by(case.rule, kind, out.errors + out.warnings)}
    return [(i.rule, i.path) for i in out.errors + out.warnings if id(i) not in mine]


# --- values --------------------------------------------------------------------------------------


def _expected(value: Any) -> Any:
    if value == NULL:
        return None
    if isinstance(value, list):
        return [_expected(item) for item in value]
    return value


def _same(actual: Any, expected: Any) -> bool:
    """Equal, without letting true stand for 1 (or a number for a boolean)."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, list):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return False
        return all(_same(a, e) for a, e in zip(actual, expected, strict=True))
    if actual is _MISSING:
        return False
    return actual == expected


def _step(container: Any, part: str) -> Any:
    if isinstance(container, dict):
        return container.get(part, _MISSING)
    if isinstance(container, (list, tuple)):
        return container[int(part)] if part.isdigit() and int(part) < len(container) else _MISSING
    return getattr(container, part, _MISSING)


def _config_value(config: Any, path: str) -> Any:
    value = config
    for part in path.split("."):
        value = _step(value, part)
        if value is _MISSING:
            break
    return value


def _document_value(document: dict[str, Any], path: str) -> Any:
    value = _config_value(document, path)
    return None if value == NULL else value


def main() -> int:
    cases = load_cases()
    problems = [problem for case in cases for problem in run_case(case)]
    for problem in problems:
        print(problem)
    runs = sum(len(case.kinds) for case in cases)
    print(f"{len(cases)} cases, {runs} runs, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
