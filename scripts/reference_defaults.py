"""Write tests/config/reference/defaults.json: the reference's (prime-rl's) setting paths per
kind with their defaults, extracted from the field inventories in ../shared/reference/
(trainer-fields.md, "TF"; rl-fields.md, "RF"). Those files are not in the repository, so the
facts are committed and tests/config/test_differences_said.py reads them.

    python scripts/reference_defaults.py [REFERENCE_DIR]

How the tables become paths: a class table (`#### Name` in TF; a table after a known heading
or line in RF, see RF_TABLES) lists its fields; a field whose type names another inventoried
class (or a union of §2, whose variants are expanded and merged) is a sub-table and its fields
are walked under its dotted path; `list[XConfig]` is an array of tables (`train.source[].name`).
A few RF classes are described in prose only; they are transcribed in PROSE below, each naming
its section. A table whose class is not inventoried (AlgoConfig, the verifiers env tables, the
router, KV offload) keeps its own default but is not walked into.

Values: JSON defaults; {"$table": true} a sub-table on by default; {"$required": true} no
default; {"$variants": {tag: default}} a key of a union whose variants disagree. "tables"
lists, per kind, the tables whose keys are all inventoried (there a key only one side has is a
difference); "variants" the variant tags of each union table.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "config" / "reference" / "defaults.json"
SOURCE = ROOT.parent / "shared" / "reference"
TABLE, REQUIRED = {"$table": True}, {"$required": True}

# RF tables without a `#### Class` heading: the line (a prefix) that introduces each one.
RF_TABLES = {
    "### 1.1 Top-level fields": "RLConfig",
    "### 2.1 Fields": "OrchestratorConfig",
    "LogConfig, shared by the orchestrator": "LogConfig",
    "`ConcurrencyConfig` has one validator": "ConcurrencyConfig",
    "`TrainConfig`:": "TrainConfig",
    "`EnvConfig`, the base": "EnvConfig",
    "`TrainSourceConfig` adds:": "TrainSourceConfig",
    "`EvalConfig`:": "EvalConfig",
    "`ClientConfig` (also the base": "ClientConfig",
    "### 5.1 Fields": "InferenceConfig",
    "VllmConfig typed keys": "VllmConfig",
    "### 6.2 SlurmConfig": "SlurmConfig",
}  # and the table whose first column is "EvalsEvalConfig field"
QUALIFIED = {"Train": "TrainSamplingConfig", "Eval": "EvalSamplingConfig"}  # RF §2.5 rows
BASES = {"RF:TrainSourceConfig": "RF:EnvConfig", "RF:EvalsEvalConfig": "RF:EvalConfig"}
# RF classes given in prose: (field, type, default) transcribed from the section named.
PROSE = {
    "SharedLogConfig": [("level", "str", "None"), ("json_logging", "bool", "false")],  # §1.2
    "SharedWandbConfig": [  # §1.2
        ("project", "str", '"prime-rl"'),
        *((n, "str", "None") for n in ("entity", "name", "group", "tags")),
        ("offline", "bool", "false"),
    ],
    "SharedMonitorsConfig": [  # §1.2
        ("wandb", "SharedWandbConfig | None", "None"),
        ("file", "FileMonitorConfig (TF) | None", "None"),
        ("prime", "PrimeMonitorConfig | None", "None"),
    ],
    "PrimeMonitorConfig": [("name", "str", "None")],  # §2.1 monitors
    "SharedCheckpointConfig": [  # §1.2
        (n, "int", "None") for n in ("output_dir", "interval", "keep_last", "keep_interval")
    ],
    "SharedModelConfig": [("name", "str", '"Qwen/Qwen3-0.6B"'), ("vlm", "VLMConfig (TF)", "None")],
    "OrchestratorMonitorsConfig": [  # §2.1 monitors
        ("wandb", "WandbMonitorConfig (TF) | None", "None"),
        ("file", "FileMonitorConfig (TF) | None", "FileMonitorConfig()"),
        ("prime", "PrimeMonitorConfig | None", "None"),
    ],
    "ModelConfig": [  # §2.8
        ("name", "str", '"Qwen/Qwen3-0.6B"'),
        ("trust_remote_code", "bool", "false"),
        ("vlm", "VLMConfig (TF) | None", "None"),
        ("lora", "LoRAConfig | None", "None"),
        ("client", "ClientConfig", "default"),
    ],
    "LoRAConfig": [(n, "", "None") for n in ("name", "rank", "alpha")],  # §2.8
    "CheckpointConfig": [  # §2.9
        *((n, "int", "None") for n in ("interval", "keep_last", "keep_interval")),
        ("wait_for_weights_timeout", "int", "None"),
        ("skip_progress", "bool", "false"),
    ],
}
SHARED_BROADCAST = {  # §1.2 SharedWeightBroadcastConfig (nixl's host: TF's InMemory default)
    "nccl": [
        ("host", "", '"localhost"'),
        ("port", "", "29501"),
        ("timeout", "", "1200"),
        ("quantize_in_weight_transfer", "", "false"),
    ],
    "nixl": [
        ("host", "", '"localhost"'),
        ("port", "", "8001"),
        ("timeout", "", "1200"),
        ("session_id", "", '"default"'),
    ],
}
ALIASES = {"RF:WeightBroadcastConfig": "TF:WeightBroadcastConfig"}  # §2.9: TF's variants
KINDS = {
    "rl": "TF:TrainerConfig",
    "sft": "TF:SFTConfig",
    "orchestrator": "RF:OrchestratorConfig",
    "rl_run": "RF:RLConfig",
    "inference": "RF:InferenceConfig",
}
CLASS = re.compile(r"\b([A-Z]\w*Config)\b")
PAIR = re.compile(r"`(\w+)`[^=,;`]*=\s*([^,;})]+)")


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def split_names(cell: str) -> list[str]:
    return re.findall(r"`(\w+)", cell) if "`" in cell else [cell.split()[0]]


def parse_tables(text: str, ns: str, classes: dict, unions: dict) -> None:
    """Every field table of one inventory into `classes` ("NS:Name" -> {field: (type, default)})."""
    current, header = None, None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            found = [n for p, n in RF_TABLES.items() if ns == "RF" and line.startswith(p)]
            if line.startswith("#### "):
                current = f"{ns}:{line[5:].strip()}"
            elif found or line.startswith("#"):
                current = f"RF:{found[0]}" if found else None
            if line.startswith("### 6.1 DeploymentConfig"):  # "every variant has ..."
                common = {n: ("int", d) for n, d in PAIR.findall(line)}
                for tag in ("single_node", "multi_node"):
                    classes[f"RF:Deployment.{tag}"] = {**common, "type": ("", f'"{tag}"')}
            continue
        row = cells(line)
        if header is None:
            header = row
            if row[0].endswith(" field") and "." not in row[0]:
                current = f"RF:{row[0].split()[0]}"
            continue
        if set(row[0]) <= {"-", " "}:
            continue
        if header[0] == "union (alias)":
            variants = {t: f"TF:{c}" for c, t in re.findall(r"(\w+Config)→`([^`]+)`", row[3])}
            name = re.search(r"\w+", row[0])[0]
            unions.setdefault(f"TF:{name}", (row[2].strip("`"), {}))[1].update(variants)
        elif header[:2] == ["name", "class"]:  # the renderer appendix: its cells hold pipes
            tag, cls, rest = (c.strip() for c in line.strip("|\n ").split("|", 2))
            tag = tag.strip("`")
            fields = {"name": ("", f'"{tag}"')}
            for name, default in re.findall(r"`(\w+)`: [^=]*?= (.+?)(?=, `|\s*\|?\s*$)", rest):
                fields[name] = ("", default)
            classes[f"TF:{cls}"] = fields
            unions.setdefault("TF:RendererConfig", ("name", {}))[1][tag] = f"TF:{cls}"
        elif header[1:3] == ["type", "default"] and (current or re.match(r"\w+\.`", row[0])):
            add_row(row, current, classes)


def add_row(row: list[str], current: str, classes: dict) -> None:
    first, kind, default = row[0], row[1], row[2]
    owner = current
    qualifier = re.match(r"(\w+)\.`", first)
    if qualifier:  # "Train.`temperature`", "single_node.`num_train_gpus` / `num_infer_gpus`"
        name = qualifier.group(1)
        owner = f"RF:{QUALIFIED[name]}" if name in QUALIFIED else f"RF:Deployment.{name}"
        first = first[qualifier.end() - 1 :]
    names = split_names(re.sub(r"\s*\([^)]*\)\s*$", "", first))
    kinds = [k.strip() for k in kind.split(" / ")] if len(names) > 1 else [kind]
    defaults = [d.strip() for d in default.split(" / ")]
    for index, name in enumerate(names):
        value = defaults[index] if len(defaults) == len(names) else default
        kind = kinds[min(index, len(kinds) - 1)]
        if kind.startswith("{"):  # an inline table: "{`host` str|None=None, `port`=8000}"
            classes[f"{owner}.{name}"] = {n: ("", d) for n, d in PAIR.findall(kind)}
            kind = f"@{owner}.{name}"
        classes.setdefault(owner, {})[name] = (kind, value)


def value_of(text: str):
    """A default cell as a JSON value, TABLE, REQUIRED, ("class", Name()) or ("tag", word)."""
    text = text.replace("\\|", "|").replace("`", "").strip()
    if text.startswith("**req") or text == "(required)":
        return REQUIRED
    text = re.sub(r"\*\(f\)\*|\(factory\)", "", text).strip()
    text = re.split(r"\s+→|,? else ", text)[-1 if " else " in text else 0].strip()
    text = re.sub(r"\s+\(.*\)$", "", text).strip()
    if text in ("", "default"):
        return TABLE
    if re.fullmatch(r"\w+\(\)", text):
        return ("class", text[:-2])
    if text.startswith("Path("):
        return ast.literal_eval(text[5:-1])
    words = {"None": None, "null": None, "true": True, "True": True, "false": False}
    if text in words or text == "False":
        return words.get(text, False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "mlp\.gate\." in TF's lists
            return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return ("tag", text)


def resolve(kind: str, ns: str, classes: dict, unions: dict) -> str | None:
    """The inventoried class or union a field's type names (None: a leaf or not inventoried)."""
    if kind.startswith("@"):
        return kind[1:]
    found = CLASS.search(kind.replace("renderers.", ""))
    if not found or "verifiers" in kind:
        return None
    order = ["TF"] if "(TF" in kind else [ns, "RF" if ns == "TF" else "TF"]
    for space in order:
        name = ALIASES.get(f"{space}:{found[1]}", f"{space}:{found[1]}")
        if name in classes or name in unions:
            return name
    return None


def walk(cls: str, prefix: str, classes: dict, unions: dict, out: dict, tables: set) -> None:
    """Every key of class `cls` into `out` (dotted path -> default), under `prefix`."""
    fields = {**classes.get(BASES.get(cls, ""), {}), **classes[cls]}
    tables.add(prefix.rstrip("."))
    for name, (kind, default) in fields.items():
        path, value = prefix + name, value_of(default)
        target = resolve(kind, cls.split(":")[0], classes, unions)
        expandable = target is not None and (
            target in classes or all(c in classes for c in unions[target][1].values())
        )
        if not expandable:
            tag = value[1] if isinstance(value, tuple) and value[0] == "tag" else None
            if tag and CLASS.search(kind):  # a table not inventoried, with its default variant
                key = unions[target][0] if target in unions else "type"
                out[path], out[f"{path}.{key}"] = TABLE, tag
            else:  # a leaf ("outputs", "auto" are words), or a table's default instance
                out[path] = tag or (TABLE if isinstance(value, tuple) else value)
            continue
        out[path] = TABLE if isinstance(value, tuple) else value
        if kind.startswith("list["):
            path += "[]"
        if target in unions:
            walk_union(target, path, value, classes, unions, out, tables)
        else:
            walk(target, path + ".", classes, unions, out, tables)


def walk_union(name, path, value, classes, unions, out, tables) -> None:
    """The keys of every variant of a union, merged: one default, or one per variant."""
    key, variants = unions[name]
    tag = value[1] if isinstance(value, tuple) and value[0] == "tag" else None
    if isinstance(value, tuple) and value[0] == "class":
        tag = next(t for t, c in variants.items() if c.endswith(f":{value[1]}"))
    merged: dict[str, dict] = {}
    for variant, cls in variants.items():
        sub: dict = {}
        walk(cls, path + ".", classes, unions, sub, tables)
        for sub_path, sub_value in sub.items():
            merged.setdefault(sub_path, {})[variant] = sub_value
    out[f"{path}#variants"] = sorted(variants)
    for sub_path, by_tag in merged.items():
        if "#" in sub_path:
            out[sub_path] = by_tag[next(iter(by_tag))]
        elif sub_path == f"{path}.{key}":
            if tag or value in (None, REQUIRED):
                out[sub_path] = tag or REQUIRED
        elif len({json.dumps(v, sort_keys=True) for v in by_tag.values()}) == 1:
            out[sub_path] = next(iter(by_tag.values()))
        else:
            out[sub_path] = {"$variants": by_tag}


def build(source: Path) -> dict:
    classes: dict = {}
    unions: dict = {}
    tf, rf = (source / "trainer-fields.md").read_text(), (source / "rl-fields.md").read_text()
    parse_tables(tf, "TF", classes, unions)
    parse_tables(rf, "RF", classes, unions)
    for name, fields in PROSE.items():
        classes[f"RF:{name}"] = {f: (k, d) for f, k, d in fields}
    for tag in ("filesystem", "nccl", "nixl"):  # §1.2 SharedWeightBroadcastConfig
        fields = [("type", "", f'"{tag}"'), *SHARED_BROADCAST.get(tag, [])]
        classes[f"RF:SharedWeightBroadcast.{tag}"] = {f: (k, d) for f, k, d in fields}
    unions["RF:SharedWeightBroadcastConfig"] = (
        "type",
        {t: f"RF:SharedWeightBroadcast.{t}" for t in ("filesystem", "nccl", "nixl")},
    )
    unions["RF:DeploymentConfig"] = (
        "type",
        {t: f"RF:Deployment.{t}" for t in ("single_node", "multi_node")},
    )
    others = re.search(r"Other typed keys: (.*?)\n\n", rf, re.S)[1]  # §5.1, VllmConfig
    classes["RF:VllmConfig"].update({n: ("", d) for n, d in PAIR.findall(others)})
    all_false = others.split("`max_cpu_loras`")[1].split("(all false)")[0]
    for name in re.findall(r"`(\w+)`", all_false):
        classes["RF:VllmConfig"][name] = ("", "false")
    kinds, covered, variants = {}, {}, {}
    for kind, root in KINDS.items():
        out: dict = {}
        tables: set = set()
        walk(root, "", classes, unions, out, tables)
        kinds[kind] = {p: v for p, v in out.items() if "#" not in p}
        variants[kind] = {p.split("#")[0]: v for p, v in out.items() if "#" in p}
        # VllmConfig passes unknown keys to vLLM and its prose lists only the typed ones
        covered[kind] = sorted(t for t in tables if t.rsplit(".", 1)[-1] != "vllm")
    return {
        "source": "prime-rl 559b447: trainer-fields.md, rl-fields.md",
        "tables": covered,
        "variants": variants,
        "kinds": kinds,
    }


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE
    OUT.write_text(json.dumps(build(source), indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
