"""The parity proof: schema/, the generated classes and the handwritten rules agree.

    python scripts/parity.py                 # make parity: the full proof (a few minutes)
    python scripts/parity.py --profile ci    # the profile the test suite runs (under a minute)

Checks, each counting its cases:
  declared      every key's types, allowed values, bounds, default and required-ness are the
                same in schema/ and in the generated classes' own JSON Schema
  schema=>class documents generated from the schema are accepted by the classes, and dumping
                them gives the document back with the defaults filled in
  class=>schema mutated documents (wrong type, out of bounds, unknown value, unknown key,
                unknown or missing `type`, null where not nullable) are rejected by both
  differential  every config, alone and composed with each sibling, plus override cases, under
                RL and SFT: the shared fields resolve the same (apart from the "auto" table),
                with the same warnings and errors
  structure     RL and SFT expose the same base fields and shared rules in the same order, and
                the class hierarchy follows the schema's allOf
  rules         each rule the schema states (x-trainspec-rule) agrees with its handwritten twin
                on a table of cases; every other rule is listed as code-only, with the reason
Ends with one line, `N cases, M parse, D differences`, and exits 1 on any difference.
--schema and --generated point at other copies of schema/ and generated/ (the drift tests).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_schema import bundle
from parity_facts import differences, facts
from parity_rules import CASES, CODE_ONLY, PARTLY_CODE, disagreements, stated_rules
from parity_strategies import strategy

ROOT = Path(__file__).resolve().parent.parent
KINDS = {"rl": ("rl_trainer", "RLTrainerConfig"), "sft": ("sft_trainer", "SFTTrainerConfig")}
PROFILES = {"full": {"examples": 1500, "mutated": 15000}, "ci": {"examples": 60, "mutated": 600}}


@dataclass
class Tally:
    name: str
    cases: int = 0
    parsed: int = 0
    problems: list[str] = field(default_factory=list)

    def case(self, parsed: bool) -> None:
        self.cases += 1
        self.parsed += parsed


def load_classes(generated: Path | None) -> dict[str, type]:
    """The generated trainer classes, from the installed package or from another directory."""
    if generated is None:
        package = "trainspec.generated"
    else:
        package = "parity_generated"
        spec = importlib.util.spec_from_file_location(
            package, generated / "__init__.py", submodule_search_locations=[str(generated)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        spec.loader.exec_module(module)
    return {
        kind: getattr(importlib.import_module(f"{package}.{module}"), name)
        for kind, (module, name) in KINDS.items()
    }


def schema_validator(schema: dict[str, Any]):
    import jsonschema_rs

    return jsonschema_rs.validator_for(schema)


def accepts(cls: type, document: Any) -> tuple[bool, Any]:
    from pydantic import ValidationError

    try:
        return True, cls.model_validate(document)
    except ValidationError:
        return False, None


# --- declared --------------------------------------------------------------------------------


def check_declared(schemas: dict, classes: dict, tally: Tally) -> None:
    for kind, cls in classes.items():
        expected, actual = facts(schemas[kind]), facts(cls.model_json_schema())
        tally.cases += len(expected)
        tally.parsed += len(expected)
        tally.problems += [
            f"[{kind}] {d}" for d in differences(expected, actual, "schema/", "generated classes")
        ]


# --- schema => classes -------------------------------------------------------------------------


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


def _variant(path: str, table: Any, declared: dict) -> str:
    """`path` with the union variant of `table` in it, when the schema declares one."""
    if isinstance(table, dict) and path and f"{path[:-1]}[{table.get('type')}].type" in declared:
        return f"{path[:-1]}[{table['type']}]."
    return path


def compare_dump(written: Any, dumped: Any, declared: dict, path: str = "") -> list[str]:
    """Where the dump differs from the written document with the defaults filled in."""
    if isinstance(written, dict) and isinstance(dumped, dict):
        problems = []
        path = _variant(path, dumped, declared)
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
    # a key the schema does not declare (a free-form table's entry, a list item) is no null
    nullable = "null" in declared.get(path.rstrip("."), {}).get("types", [])
    if _same(written, dumped, nullable):
        return []
    return [f"{path.rstrip('.')}: {written!r} dumped as {dumped!r}"]


def check_schema_to_classes(schemas, classes, count: int, tally: Tally, keep: dict) -> None:
    for kind, cls in classes.items():
        validator = schema_validator(schemas[kind])
        declared = facts(schemas[kind])
        for document in generated_documents(schemas[kind], count):
            valid = validator.is_valid(document)
            tally.case(valid)
            if not valid:
                continue
            ok, config = accepts(cls, document)
            if not ok:
                tally.problems.append(
                    f"[{kind}] the schema accepts, the classes reject: {json.dumps(document)[:300]}"
                )
                continue
            dumped = config.model_dump(mode="json")
            keep.setdefault(kind, []).append(dumped)
            for problem in compare_dump(document, dumped, declared)[:3]:
                tally.problems.append(f"[{kind}] {problem}")


# --- classes => schema -------------------------------------------------------------------------


def mutations(document: dict, declared: dict) -> list[tuple[str, dict]]:
    """(description, mutated copy) for each applicable mutation of each key of `document`."""
    out: list[tuple[str, dict]] = []

    def copy_with(path: list[Any], value: Any, delete: bool = False) -> dict:
        clone = json.loads(json.dumps(document))
        node = clone
        for part in path[:-1]:
            node = node[part]
        if delete:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return clone

    def walk(node: Any, path: list[Any], dotted: str = "") -> None:
        fact = declared.get(dotted)
        if isinstance(node, dict):
            out.append(
                (
                    f"unknown key under {dotted or 'the top level'}",
                    copy_with([*path, "__bogus__"], 1),
                )
            )
            if "type" in node:
                out.append((f"unknown {dotted}.type", copy_with([*path, "type"], "__bogus__")))
            here = _variant(f"{dotted}." if dotted else "", node, declared)
            for key, value in node.items():
                walk(value, [*path, key], f"{here}{key}")
            return
        if fact is None or not path:
            return
        types = set(fact["types"])
        if "null" not in types:
            out.append((f"null for {dotted}", copy_with(path, None)))
        if not types & {"array", "object"}:
            wrong = [1.5] if "number" not in types else ["1.5"]
            out.append((f"wrong type for {dotted}", copy_with(path, wrong)))
        if (
            fact["consts"]
            and "string" in types
            and not (types - {"string"} - {"null"})
            and not [t for t in types if t == "string" and '"' not in "".join(fact["consts"])]
        ):
            out.append((f"unknown value for {dotted}", copy_with(path, "__bogus__")))
        if "minimum" in fact and isinstance(node, (int, float)) and not isinstance(node, bool):
            out.append((f"{dotted} below its minimum", copy_with(path, fact["minimum"] - 1)))
        if "maximum" in fact and isinstance(node, (int, float)) and not isinstance(node, bool):
            out.append((f"{dotted} above its maximum", copy_with(path, fact["maximum"] + 1)))

    walk(document, [])
    return out


def check_classes_to_schema(schemas, classes, bases: dict, count: int, tally: Tally) -> None:
    import random

    picker = random.Random(0)
    for kind, cls in classes.items():
        validator = schema_validator(schemas[kind])
        declared = facts(schemas[kind])
        pool = [m for document in bases.get(kind, []) for m in mutations(document, declared)]
        picker.shuffle(pool)
        for description, document in pool[:count]:
            schema_ok = validator.is_valid(document)
            class_ok, _ = accepts(cls, document)
            tally.case(schema_ok and class_ok)
            if schema_ok != class_ok:
                side = "the schema" if schema_ok else "the classes"
                tally.problems.append(f"[{kind}] {description}: only {side} accepts it")


# --- differential ----------------------------------------------------------------------------

OVERRIDES: list[dict[str, Any]] = [
    {},
    {"model.moe_router_dtype": "bfloat16"},
    {"model.freeze_moe_router": True, "optim.weight_decay": 0.1},
    {"trace_path": "trace.json", "max_steps": 5},
    {"trace_path": "trace.json", "max_steps": 50},
    {"trace_path": "trace.json"},
    {"model.full_offload": True, "model.optim_cpu_offload": False},
    {"model.full_offload": True, "model.optim_cpu_offload": False, "optim.type": "muon"},
    {"model.full_offload": True},
    {"optim.type": "sgd"},
    {"optim.type": "muon", "model.fsdp_cpu_offload": True, "model.optim_cpu_offload": False},
    {"optim.type": "sign_sgd", "optim.max_norm": "None"},
    {"scheduler.type": "linear", "scheduler.warmup_steps": 5, "scheduler.decay_steps": 5},
    {"scheduler.type": "linear", "max_steps": 8, "scheduler.warmup_steps": 5},
    {"scheduler.type": "cosine", "max_steps": 100},
    {"scheduler.type": "cosine", "max_steps": "None"},
    {"model.ep_comm_backend": "deepep", "model.ep": 4, "model.impl": "custom"},
    {"model.ep_comm_backend": "deepep", "model.ep": 1},
    {"model.lora.rank": 8},
    {
        "model.lora.rank": 8,
        "model.vlm.vision_encoder_attr": "v",
        "model.impl": "custom",
        "model.vlm.language_model_attr": "l",
        "model.vlm.freeze_vision_encoder": False,
    },
    {"tokenizer.name": "org/tokenizer", "tokenizer.trust_remote_code": True},
    {"model.impl": "hf", "model.attn": "flash_attention_2", "model.trust_remote_code": True},
]
AUTO = {("model", "moe_router_dtype"), ("model", "freeze_moe_router"), ("optim", "weight_decay")}


def _shared_outcome(kind: str, document: dict, base: set[str]):
    from trainspec.config import ConfigError, validate

    shared = {k: v for k, v in document.items() if k in base}
    try:
        resolved = validate(kind, shared)
    except ConfigError as err:
        return False, (
            "invalid",
            [(e.path, e.message, e.rule) for e in err.errors],
            [(w.path, w.message, w.rule) for w in err.warnings],
        )
    dump = resolved.config.model_dump(mode="json", include=base)
    for table, key in AUTO:
        dump[table].pop(key, None)
    return True, ("valid", dump, [(w.path, w.message, w.rule) for w in resolved.warnings])


def check_differential(tally: Tally) -> None:
    import tomllib

    from trainspec.config.merge import merge_all, unflatten
    from trainspec.generated.base_trainer import BaseTrainerConfig

    base = set(BaseTrainerConfig.model_fields)
    from trainspec.cli.args import kind_from_directive

    configs: dict[str, list[dict]] = {"rl": [], "sft": []}
    for path in sorted((ROOT / "configs").rglob("*.toml")):
        kind = kind_from_directive(str(path))
        if kind in configs:  # the trainer configs; orchestrator and rl.json ones share no base
            configs[kind].append(tomllib.loads(path.read_text()))
    documents = []
    for siblings in configs.values():
        documents += siblings
        documents += [merge_all([a, b]) for a in siblings for b in siblings if a is not b]
    for document in documents:
        for override in OVERRIDES:
            case = merge_all([document, unflatten(override)])
            rl_ok, rl = _shared_outcome("rl", case, base)
            sft_ok, sft = _shared_outcome("sft", case, base)
            tally.case(rl_ok and sft_ok)
            if rl != sft:
                tally.problems.append(
                    f"RL and SFT differ on shared fields for {override}: "
                    f"{str(rl)[:200]} vs {str(sft)[:200]}"
                )


# --- rules -----------------------------------------------------------------------------------


def strip_rules(node: Any) -> Any:
    """The schema without its stated rules: the shapes the generated classes must match."""
    if isinstance(node, list):
        return [
            strip_rules(item)
            for item in node
            if not (isinstance(item, dict) and "x-trainspec-rule" in item)
        ]
    if not isinstance(node, dict):
        return node
    out = {key: strip_rules(value) for key, value in node.items()}
    if out.get("allOf") == []:
        del out["allOf"]
    return out


def check_rules(schemas: dict, tally: Tally) -> None:
    from trainspec.validators.pipeline import rules_for

    problems = disagreements()
    tally.cases += len(CASES)
    tally.parsed += sum(1 for case in CASES if not case[3])
    tally.problems += problems
    stated = set().union(*(stated_rules(schema) for schema in schemas.values()))
    for kind in KINDS:
        for rule in rules_for(kind):
            name = rule.__name__
            tally.case(True)
            if name not in stated and name not in CODE_ONLY:
                tally.problems.append(
                    f"{name}: neither stated in the schema nor listed as code-only"
                )
            if name in stated and name in CODE_ONLY:
                tally.problems.append(f"{name}: stated in the schema but listed as code-only")
    for name in stated:
        if not any(case[1] == name for case in CASES):
            tally.problems.append(f"{name}: stated in the schema but has no twin cases")
    for name in PARTLY_CODE:
        if name not in stated:
            tally.problems.append(f"{name}: listed as partly stated, but the schema does not")


# --- structure ---------------------------------------------------------------------------------


def check_structure(schema_dir: Path, classes: dict, tally: Tally) -> None:
    from trainspec.validators.pipeline import SHARED_RULES, rules_for

    rl, sft = classes["rl"], classes["sft"]
    base = rl.__mro__[1]
    for name in base.model_fields:
        a, b = rl.model_fields[name], sft.model_fields[name]
        tally.case(True)
        same = (a.annotation, a.default, a.description) == (b.annotation, b.default, b.description)
        if not same:
            tally.problems.append(f"base field {name} differs between RL and SFT")
    for kind in KINDS:
        tally.case(True)
        if list(rules_for(kind))[: len(SHARED_RULES)] != list(SHARED_RULES):
            tally.problems.append(f"{kind} does not run the shared rules first, in order")
    by_title = {}
    for module in {sys.modules[c.__module__] for c in classes.values()} | {
        sys.modules[m]
        for m in list(sys.modules)
        if m.startswith(rl.__module__.rsplit(".", 1)[0] + ".")
    }:
        for value in vars(module).values():
            if isinstance(value, type):
                by_title[value.__name__] = value
    for path in sorted(schema_dir.glob("*.json")):
        _check_all_of(json.loads(path.read_text()), by_title, path.name, tally)


def _check_all_of(node: Any, by_title: dict, where: str, tally: Tally) -> None:
    if isinstance(node, dict):
        if "allOf" in node and "title" in node:
            child = by_title.get(node["title"])
            for part in node["allOf"]:
                if "$ref" not in part:
                    continue  # a stated rule, not a parent
                ref = part["$ref"]
                parent_title = _title_of(ref, where)
                parent = by_title.get(parent_title)
                tally.case(child is not None and parent is not None)
                if child is None or parent is None or not issubclass(child, parent):
                    tally.problems.append(
                        f"{where}: {node['title']} should subclass {parent_title}"
                    )
        for value in node.values():
            _check_all_of(value, by_title, where, tally)
    elif isinstance(node, list):
        for value in node:
            _check_all_of(value, by_title, where, tally)


def _title_of(ref: str, where: str) -> str | None:
    file, _, pointer = ref.partition("#")
    doc = json.loads((SCHEMA_DIR / (file or where)).read_text())
    for part in pointer.strip("/").split("/") if pointer else []:
        doc = doc[part]
    return doc.get("title")


SCHEMA_DIR = ROOT / "schema"


def main(argv: list[str] | None = None) -> int:
    global SCHEMA_DIR
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, default="full")
    parser.add_argument("--schema", type=Path, default=ROOT / "schema")
    parser.add_argument("--generated", type=Path, default=None)
    args = parser.parse_args(argv)
    SCHEMA_DIR = args.schema
    profile = PROFILES[args.profile]
    start = time.perf_counter()
    stated = {kind: bundle(args.schema, name) for kind, (name, _) in KINDS.items()}
    schemas = {kind: strip_rules(schema) for kind, schema in stated.items()}
    classes = load_classes(args.generated)
    dumps: dict[str, list[dict]] = {}
    checks: list[tuple[Tally, Callable[[Tally], None]]] = [
        (Tally("declared"), lambda t: check_declared(schemas, classes, t)),
        (
            Tally("schema=>class"),
            lambda t: check_schema_to_classes(schemas, classes, profile["examples"], t, dumps),
        ),
        (
            Tally("class=>schema"),
            lambda t: check_classes_to_schema(schemas, classes, dumps, profile["mutated"], t),
        ),
        (Tally("differential"), check_differential),
        (Tally("structure"), lambda t: check_structure(args.schema, classes, t)),
        (Tally("rules"), lambda t: check_rules(stated, t)),
    ]
    for tally, run in checks:
        run(tally)
        print(
            f"{tally.name:<14} {tally.cases:6d} cases {tally.parsed:6d} parse "
            f"{len(tally.problems):4d} differences"
        )
        for problem in tally.problems[:20]:
            print(f"    {problem}")
    cases = sum(t.cases for t, _ in checks)
    parsed = sum(t.parsed for t, _ in checks)
    problems = sum(len(t.problems) for t, _ in checks)
    print(f"({args.profile} profile, {time.perf_counter() - start:.0f} s)")
    print(f"{cases} cases, {parsed} parse, {problems} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
