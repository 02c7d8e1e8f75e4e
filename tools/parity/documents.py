"""Documents drawn from the schema, and mutations of them, judged by stage 1 (the JSON Schema)
and by the generated classes: the two verdicts must be the same for every document.

A mutation changes one key of a valid document in one way; `MUTATIONS` names the kinds. Each
kind aims at a place where a JSON Schema validator and pydantic could disagree: a numeric string
("5"), an integer-valued float (5.0, which JSON Schema counts as an integer), a bool where a
number goes, one past each bound, a value outside an enum, a pattern's near misses.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

from .strategies import strategy
from .subject import Subject, classes_accept, stage1_accepts

MUTATIONS = (
    "unknown-key",
    "unknown-tag",
    "null",
    "none-string",
    "wrong-type",
    "numeric-string",
    "integer-valued-float",
    "bool-for-number",
    "number-for-bool",
    "below-bound",
    "above-bound",
    "at-exclusive-bound",
    "unknown-value",
    "pattern",
)
PATTERN_PROBES = ("", "x", "step_", "step_1", "a/step_12", "a/step_\u00b2", "a/step_1x", "step_1/")


def generated_documents(schema: dict, count: int) -> list[dict]:
    from hypothesis import HealthCheck, given, settings

    found: list[dict] = []

    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy(schema))
    def collect(document):
        found.append(document)

    collect()
    return found


def union_tag(path: str, table: Any, declared: dict) -> tuple[str, str] | None:
    """(key, value) of the tag that picks the union variant of `table` (`type`, or the union's
    own discriminator such as `name`), when the schema declares one."""
    if not isinstance(table, dict) or not path:
        return None
    for key, value in table.items():
        if isinstance(value, str) and f"{path[:-1]}[{value}].{key}" in declared:
            return key, value
    return None


def variant_path(path: str, table: Any, declared: dict) -> str:
    """`path` with the union variant of `table` in it, when the schema declares one."""
    tag = union_tag(path, table, declared)
    return f"{path[:-1]}[{tag[1]}]." if tag else path


def _bound_values(fact: dict, value: Any) -> Iterator[tuple[str, Any]]:
    integer = "number" not in fact["types"]
    step = 1 if integer else 1e-6
    if "minimum" in fact:
        low = fact["minimum"]
        yield "below-bound", int(low) - 1 if integer else low - step * max(1.0, abs(low))
    if "maximum" in fact:
        high = fact["maximum"]
        yield "above-bound", int(high) + 1 if integer else high + step * max(1.0, abs(high))
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        if bound in fact:
            yield "at-exclusive-bound", int(fact[bound]) if integer else fact[bound]


def _value_mutations(fact: dict, value: Any) -> Iterator[tuple[str, Any]]:
    types = set(fact["types"])
    nullable = "null" in types
    if not nullable:
        yield "null", None
        yield "none-string", "None"
    if not types & {"array", "object"}:
        yield "wrong-type", [1]
    numeric = types & {"integer", "number"}
    if numeric and isinstance(value, (int, float)) and not isinstance(value, bool):
        yield "numeric-string", str(value)
        yield "bool-for-number", True
        yield from _bound_values(fact, value)
        if "number" not in types and isinstance(value, int):
            yield "integer-valued-float", float(value)
    if "boolean" in types and isinstance(value, bool) and not numeric:
        yield "number-for-bool", int(value)
    if fact["consts"] and isinstance(value, str) and types <= {"string", "null"}:
        yield "unknown-value", "__bogus__"
    if fact.get("pattern") and isinstance(value, str):
        for probe in PATTERN_PROBES:
            yield "pattern", probe


def mutations(document: dict, declared: dict) -> list[tuple[str, str, dict]]:
    """(kind, dotted key, mutated copy) for each applicable mutation of each key."""
    out: list[tuple[str, str, dict]] = []

    def copy_with(path: list[Any], value: Any) -> dict:
        clone = copy.deepcopy(document)
        node = clone
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
        return clone

    def walk(node: Any, path: list[Any], dotted: str) -> None:
        if isinstance(node, dict):
            out.append(("unknown-key", dotted or "(top)", copy_with([*path, "__bogus__"], 1)))
            tag = union_tag(f"{dotted}.", node, declared)
            if tag is not None:
                out.append(("unknown-tag", dotted, copy_with([*path, tag[0]], "__bogus__")))
            here = variant_path(f"{dotted}." if dotted else "", node, declared)
            for key, value in node.items():
                walk(value, [*path, key], f"{here}{key}")
            return
        fact = declared.get(dotted)
        if fact is None or not path:
            return
        for kind, value in _value_mutations(fact, node):
            out.append((kind, dotted, copy_with(path, value)))

    walk(document, [], "")
    return out


def _same(written: Any, dumped: Any, nullable: bool = True) -> bool:
    if written == "None" and nullable:
        return dumped is None
    if isinstance(written, bool) and isinstance(dumped, dict):
        return written  # a sub-config switched on: `true` became its defaults
    if isinstance(written, bool) and dumped is None:
        return not written
    if isinstance(written, (int, float)) and not isinstance(written, bool):
        return isinstance(dumped, (int, float)) and float(written) == float(dumped)
    return written == dumped


def compare_dump(written: Any, dumped: Any, declared: dict, path: str = "") -> list[str]:
    """Where the dump differs from the written document with the defaults filled in."""
    if isinstance(written, dict) and isinstance(dumped, dict):
        problems = []
        path = variant_path(path, dumped, declared)
        free = declared.get(path.rstrip("."), {}).get("types") == ["object"] and not any(
            key.startswith(path) and key != path.rstrip(".") for key in declared
        )
        for key in written.keys() | dumped.keys():
            where = f"{path}{key}"
            if key in written:
                if key not in dumped:
                    problems.append(f"{where}: written but missing from the dump")
                else:
                    problems += compare_dump(written[key], dumped[key], declared, f"{where}.")
            elif not free and key != "type":
                default = declared.get(where, {}).get("default")
                if default and default != "<no default>":
                    value = json.loads(default)
                    if not isinstance(value, dict) and not _same(value, dumped[key]):
                        problems.append(f"{where}: default {value!r} dumped as {dumped[key]!r}")
        return problems
    if isinstance(written, list) and isinstance(dumped, list):
        if len(written) != len(dumped):
            return [f"{path}: {written!r} dumped as {dumped!r}"]
        return [
            p
            for n, (a, b) in enumerate(zip(written, dumped, strict=True))
            for p in compare_dump(a, b, declared, f"{path}{n}.")
        ]
    nullable = "null" in declared.get(path.rstrip("."), {}).get("types", [])
    if _same(written, dumped, nullable):
        return []
    return [f"{path.rstrip('.')}: {written!r} dumped as {dumped!r}"]


def _rules_run(kind: str, config: Any) -> str | None:
    """A rule that raises on a config the classes accepted is a difference too."""
    from trainspec.validators.pipeline import run_rules

    try:
        run_rules(config, kind)
    except Exception as exc:  # noqa: BLE001 - any crash is what this looks for
        return f"{type(exc).__name__}: {exc}"
    return None


def check_documents(
    subject: Subject, facts_of, examples: int, mutated: int, tally, kinds_seen: Counter
) -> None:
    picker = random.Random(0)
    for kind, cls in subject.classes.items():
        declared = facts_of(subject.schemas[kind])
        valid: list[dict] = []
        for document in generated_documents(subject.schemas[kind], examples):
            stage1 = stage1_accepts(kind, document)
            ok, config = classes_accept(cls, document)
            tally.case(stage1 and ok)
            kinds_seen["drawn"] += 1
            if stage1 != ok:
                side = "stage 1" if stage1 else "the classes"
                tally.problems.append(f"[{kind}] only {side} accepts {json.dumps(document)[:240]}")
                continue
            if not ok:
                continue
            valid.append(document)
            for problem in compare_dump(document, config.model_dump(mode="json"), declared)[:3]:
                tally.problems.append(f"[{kind}] {problem}")
            crash = _rules_run(kind, config)
            if crash:
                tally.problems.append(f"[{kind}] a rule raised {crash} on {json.dumps(document)}")
        pool = [m for document in valid for m in mutations(document, declared)]
        by_kind: dict[str, list] = {}
        for item in pool:
            by_kind.setdefault(item[0], []).append(item)
        chosen = []
        for items in by_kind.values():  # every kind gets its share before any kind gets more
            picker.shuffle(items)
            chosen += items[: max(1, mutated // len(by_kind))]
        for kind_name, dotted, document in chosen:
            stage1 = stage1_accepts(kind, document)
            ok, _ = classes_accept(cls, document)
            tally.case(stage1 and ok)
            kinds_seen[kind_name] += 1
            if stage1 != ok:
                side = "stage 1" if stage1 else "the classes"
                tally.problems.append(f"[{kind}] {kind_name} of {dotted}: only {side} accepts it")
