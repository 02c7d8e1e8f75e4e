"""Documents drawn from the schema, and mutations of them, judged by stage 1 (the JSON Schema)
and by the generated classes: the two verdicts must be the same for every document.

A mutation changes one key of a valid document in one way; `MUTATIONS` names the kinds. Each
kind aims at a place where a JSON Schema validator and pydantic could disagree: a numeric string
("5"), an integer-valued float (5.0, which JSON Schema counts as an integer), a bool where a
number goes, one past each bound, a value outside an enum, a pattern's near misses.

Every table of the schema (each union variant, the tables of lists and of maps: `optim[muon]`,
`eval.source.*`) must be in an accepted document, so that its keys are dumped back and mutated:
a profile draws its documents at random, then aims more at each table they missed.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from .facts import ITEM, tables
from .strategies import aim_at, strategy
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
# documents drawn for a table the random ones missed: a few, then more if no accepted one held it
AIMED = (3, 24)
PATTERN_PROBES = ("", "x", "step_", "step_1", "a/step_12", "a/step_\u00b2", "a/step_1x", "step_1/")


def generated_documents(schema: dict, count: int, aim=None) -> list[dict]:
    """`count` documents `schema` accepts (most of them), the same on every run; with `aim`
    (strategies.aim_at), each holds that table."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable

    found: list[dict] = []

    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy(schema, aim=aim))
    def collect(document):
        found.append(document)

    try:
        collect()
    except Unsatisfiable:  # no value reaches the table aimed at: the check says it is undrawn
        return []
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


def child_key(key: str, name: str, declared: dict) -> str:
    """The declared key of `name` in the table at `key` ("eval." or "stops."): its own, or, in
    a map whose values the schema types, the map's values' (stops.*)."""
    own = f"{key}{name}"
    if own not in declared and key and f"{key}{ITEM}" in declared:
        return f"{key}{ITEM}"
    return own


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


def mutations(document: dict, declared: dict) -> list[tuple[str, str, Callable[[], dict]]]:
    """(kind, dotted key, the mutated copy's maker) for each applicable mutation of each key:
    a copy is made only for the mutations a profile picks."""
    out: list[tuple[str, str, Callable[[], dict]]] = []

    def copy_with(path: list[Any], value: Any) -> Callable[[], dict]:
        def make() -> dict:
            clone = copy.deepcopy(document)
            node = clone
            for part in path[:-1]:
                node = node[part]
            node[path[-1]] = value
            return clone

        return make

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


def compare_dump(
    written: Any, dumped: Any, declared: dict, path: str = "", key: str | None = None
) -> list[str]:
    """Where the dump differs from the written document with the defaults filled in. `path`
    names the place in the document (eval.source.0.), `key` its declared key (eval.source.*.)."""
    key = path if key is None else key
    if isinstance(written, dict) and isinstance(dumped, dict):
        problems = []
        tag = union_tag(key, dumped, declared)
        if tag:  # the variant's keys: optim[muon].betas2
            key, path = f"{key[:-1]}[{tag[1]}].", f"{path[:-1]}[{tag[1]}]."
        free = declared.get(key.rstrip("."), {}).get("types") == ["object"] and not any(
            k.startswith(key) and k != key.rstrip(".") for k in declared
        )
        for name in written.keys() | dumped.keys():
            where, declared_as = f"{path}{name}", child_key(key, name, declared)
            if name in written:
                if name not in dumped:
                    problems.append(f"{where}: written but missing from the dump")
                else:
                    problems += compare_dump(
                        written[name], dumped[name], declared, f"{where}.", f"{declared_as}."
                    )
            elif not free and name != "type":
                default = declared.get(declared_as, {}).get("default")
                if default and default != "<no default>":
                    value = json.loads(default)
                    if not isinstance(value, dict) and not _same(value, dumped[name]):
                        problems.append(f"{where}: default {value!r} dumped as {dumped[name]!r}")
        return problems
    if isinstance(written, list) and isinstance(dumped, list):
        if len(written) != len(dumped):
            return [f"{path}: {written!r} dumped as {dumped!r}"]
        return [
            p
            for n, (a, b) in enumerate(zip(written, dumped, strict=True))
            for p in compare_dump(a, b, declared, f"{path}{n}.", f"{key}{ITEM}.")
        ]
    nullable = "null" in declared.get(key.rstrip("."), {}).get("types", [])
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


def drawn_tables(written: dict, dumped: dict, declared: dict) -> set[str]:
    """The tables a written document holds, named as `facts.tables` names them; the dump tells
    a variant whose tag was left to its default (a variant counts for its key too: optim[muon]
    and optim). A free-form table's values are not tables of the schema."""
    holders = {path.rpartition(".")[0] for path in declared}
    found: set[str] = set()

    def walk(node: Any, dump: Any, key: str) -> None:
        if isinstance(node, dict):
            tag = union_tag(key, dump, declared)
            here = f"{key[:-1]}[{tag[1]}]." if tag else key
            found.update({here.rstrip("."), key.rstrip(".")})
            if here.rstrip(".") in holders:
                for name, value in node.items():
                    inner = dump.get(name) if isinstance(dump, dict) else None
                    walk(value, inner, f"{child_key(here, name, declared)}.")
        elif isinstance(node, list):
            dumps = (
                dump if isinstance(dump, list) and len(dump) == len(node) else [None] * len(node)
            )
            for item, inner in zip(node, dumps, strict=True):
                walk(item, inner, f"{key}{ITEM}.")

    walk(written, dumped, "")
    return found


def _judge(kind: str, cls: type, declared: dict, document: dict, tally) -> dict | None:
    """Stage 1 and the classes on one drawn document; for an accepted one, its dump and the
    rules. The dump when both accept it."""
    stage1 = stage1_accepts(kind, document)
    ok, config = classes_accept(cls, document)
    tally.case(stage1 and ok)
    if stage1 != ok:
        side = "stage 1" if stage1 else "the classes"
        tally.problems.append(f"[{kind}] only {side} accepts {json.dumps(document)[:240]}")
        return None
    if not ok:
        return None
    dumped = config.model_dump(mode="json")
    for problem in compare_dump(document, dumped, declared)[:3]:
        tally.problems.append(f"[{kind}] {problem}")
    crash = _rules_run(kind, config)
    if crash:
        tally.problems.append(f"[{kind}] a rule raised {crash} on {json.dumps(document)}")
    return dumped


def _draw(subject: Subject, kind: str, declared: dict, examples: int, aim: bool, tally, seen):
    """The accepted documents of `examples` drawn at random and, unless `aim` is off, of more
    aimed at each table none of them holds (AIMED); and the tables the accepted ones hold."""
    schema, cls = subject.schemas[kind], subject.classes[kind]
    valid: list[dict] = []
    drawn: set[str] = set()

    def judge(documents: list[dict], how: str) -> None:
        for document in documents:
            seen[how] += 1
            dumped = _judge(kind, cls, declared, document, tally)
            if dumped is not None:
                valid.append(document)
                drawn.update(drawn_tables(document, dumped, declared))

    judge(generated_documents(schema, examples), "drawn")
    # the deepest first: a document that holds a table holds the tables above it
    for table in sorted(tables(declared) - drawn, reverse=True) if aim else ():
        for count in AIMED:
            if table not in drawn:  # a document aimed at an earlier table may hold this one
                judge(generated_documents(schema, count, aim_at(table)), "aimed")
    return valid, drawn


def check_documents(
    subject: Subject,
    facts_of,
    examples: int,
    mutated: int,
    tally,
    kinds_seen: Counter,
    tables_seen: dict[str, tuple[int, int]],
    aim: bool = True,
) -> None:
    """`examples` documents drawn per kind, then documents aimed at each table they missed
    (`_draw`): each table of the schema is a case, and one that no accepted document holds is a
    difference, as is a drawn table the facts do not know. Then `mutated` mutations of the
    accepted documents, every mutation kind its share."""
    picker = random.Random(0)
    for kind, cls in subject.classes.items():
        declared = facts_of(subject.schemas[kind])
        wanted = tables(declared)
        valid, drawn = _draw(subject, kind, declared, examples, aim, tally, kinds_seen)
        for table in sorted(wanted | drawn):
            tally.case(table in drawn)
            if table not in drawn:
                tally.problems.append(
                    f"[{kind}] table {table or '(top)'}: no accepted document holds it, so "
                    "nothing proves it; draw more (--profile) or see why drawn ones are refused"
                )
            elif table not in wanted:
                tally.problems.append(
                    f"[{kind}] table {table}: in accepted documents, but the facts (facts.py) "
                    "do not name it, so no key of it is checked"
                )
        tables_seen[kind] = (len(wanted & drawn), len(wanted))
        pool = [m for document in valid for m in mutations(document, declared)]
        by_kind: dict[str, list] = {}
        for item in pool:
            by_kind.setdefault(item[0], []).append(item)
        chosen = []
        for items in by_kind.values():  # every kind gets its share before any kind gets more
            picker.shuffle(items)
            chosen += items[: max(1, mutated // len(by_kind))]
        for kind_name, dotted, make in chosen:
            document = make()
            stage1 = stage1_accepts(kind, document)
            ok, _ = classes_accept(cls, document)
            tally.case(stage1 and ok)
            kinds_seen[kind_name] += 1
            if stage1 != ok:
                side = "stage 1" if stage1 else "the classes"
                tally.problems.append(f"[{kind}] {kind_name} of {dotted}: only {side} accepts it")
