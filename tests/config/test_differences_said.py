"""Every default that differs from the reference (prime-rl) is said in the differences section of
the docs, so a new difference cannot slip in unsaid.

The reference side is tests/config/reference/defaults.json (each setting path per kind with its
default, written by scripts/reference_defaults.py from the reference's field inventories);
trainspec's side is a walk of each kind's bundled schema (schema_info), with "auto" defaults
resolved per mode (x-trainspec-auto) and union keys compared variant by variant. A path differs
when its default differs, when trainspec lacks it, or when trainspec adds it to a table the
reference inventories fully. It is said when a code span of the section names it: its dotted
path (`[[train.source]]` names train.source; in the rl config, the [trainer] / [orchestrator]
prefix may be left out, as the trainer's and orchestrator's own paths are the same keys), or a
dotted suffix of it of two keys or more (`model.lora` names orchestrator.model.lora).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from trainspec.config.schema_info import NO_DEFAULT, SchemaInfo, schema_info

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = json.loads((Path(__file__).parent / "reference" / "defaults.json").read_text())
# Where the differences are said: (file, the headings of its sections that count). The first
# file that exists and has the first heading is read.
DIFFERENCES = (
    ("docs/prime-rl.md", ("Differences from prime-rl", "Renamed keys")),
    ("README.md", ("Differences from the reference", "Renamed keys")),
)
# Differences that are deliberately not user-visible: "kind: path" (and the keys under it) -> why.
INHERITED = "null takes the group table's value; the reference writes a default, then copies the "
INHERITED += "group table's over any key the source does not set: each resolves to the same value"
NOT_USER_VISIBLE: dict[str, str] = {
    "orchestrator: train.source[].group_size": INHERITED,
    "orchestrator: train.source[].sampling": INHERITED,
    "rl_run: orchestrator.train.source[].group_size": INHERITED,
    "rl_run: orchestrator.train.source[].sampling": INHERITED,
    # a shared key is copied into [trainer] / [orchestrator] only when the file writes it (on
    # both sides), so the shared table's own default never reaches a process
    "rl_run: monitors.file.path": "a shared default is never copied down",
}
SUB_CONFIGS = ("trainer", "orchestrator")  # the rl config's sections that are kinds too
TABLE, REQUIRED = {"$table": True}, {"$required": True}


def trainspec_keys(info: SchemaInfo, prefix: str = "", tags: dict | None = None) -> dict:
    """Dotted path -> KeyInfo of every key of a kind, into arrays of tables (`source[].name`);
    the variant tags of each union table go into `tags` (dotted path -> tags)."""
    keys, tags = {}, {} if tags is None else tags
    for path, variants in info.variants.items():
        tags[prefix + ".".join(path)] = set(variants)
    for path, key in info.keys.items():
        if key.renamed_to:
            continue
        dotted = prefix + ".".join(path)
        keys[dotted] = key
        if key.items is not None and key.items.is_table:
            inner, _ = info.scope((*path, 0))
            keys.update(trainspec_keys(inner, dotted + "[].", tags))
    return keys


def trainspec_side(kind: str) -> tuple[dict, dict]:
    tags: dict[str, set[str]] = {}
    return trainspec_keys(schema_info(kind), "", tags), tags


def mode_of(kind: str, path: str) -> str:
    """Which trainer's auto table applies to a path of a kind."""
    return "rl" if kind == "rl_run" and path.startswith("trainer.") else kind


def resolved(key, kind: str, path: str, tag: str | None = None) -> Any:
    value = key.variant_defaults.get(tag, key.default) if tag else key.default
    if value == "auto" and key.auto and mode_of(kind, path) in key.auto:
        return key.auto[mode_of(kind, path)]
    return value


def same(reference: Any, here: Any) -> bool:
    if reference == TABLE:
        return isinstance(here, dict)
    if reference == REQUIRED:
        return here is NO_DEFAULT
    if number(reference) and number(here):
        return reference == here  # 30 and 30.0 are one default
    return here is not NO_DEFAULT and json.dumps(reference) == json.dumps(here)


def number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def shown(value: Any) -> str:
    if value is NO_DEFAULT or value == REQUIRED:
        return "<required>"
    return "<table>" if value == TABLE or isinstance(value, dict) and value else json.dumps(value)


def union_of(path: str, variants: dict[str, list[str]]) -> str | None:
    parent = path.rsplit(".", 1)[0] if "." in path else ""
    return parent if parent in variants else None


def differences(reference: dict, kinds: dict[str, tuple[dict, dict]]) -> dict:
    """(kind, path) -> "reference default | trainspec default" for every difference."""
    found = {}
    for kind, defaults in reference["kinds"].items():
        (here, here_tags), variants = kinds[kind], reference["variants"][kind]
        tables = set(reference["tables"][kind])
        for union, tags in variants.items():  # a variant one side lacks
            for tag in set(tags) ^ here_tags.get(union, set()):
                sides = "variant | absent" if tag in tags else "absent | variant"
                found[kind, f"{union}.{tag}"] = f"{sides} ({tag})"
        for path, ref in defaults.items():
            key = here.get(path)
            if key is None:
                found[kind, path] = f"{shown(ref)} | absent"
                continue
            union = union_of(path, variants)
            if isinstance(ref, dict) and "$variants" in ref:
                pairs = [
                    (t, v)
                    for t, v in ref["$variants"].items()
                    if t in key.variant_defaults or not key.variant_defaults
                ]
            elif union and key.variant_defaults:
                pairs = [(t, ref) for t in variants[union] if t in key.variant_defaults]
            else:
                pairs = [(None, ref)]
            diff = [(t, v, resolved(key, kind, path, t)) for t, v in pairs]
            diff = [(t, shown(v), shown(m)) for t, v, m in diff if not same(v, m)]
            if diff and len(diff) == len(pairs) and len({d[1:] for d in diff}) == 1:
                found[kind, path] = " | ".join(diff[0][1:])
            elif diff:
                found[kind, path] = "; ".join(f"{r} | {m} ({t})" for t, r, m in diff)
        for path in here:
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            if path not in defaults and parent in tables:
                found[kind, path] = f"absent | {shown(resolved(here[path], kind, path))}"
    # a table that one side lacks is one difference, not one per key
    lacking = {k for k, text in found.items() if "absent" in text}
    return {
        (kind, path): text
        for (kind, path), text in found.items()
        if not any((kind, path[: m.start()]) in lacking for m in re.finditer(r"\.", path))
    }


def normalized(kind: str, path: str) -> str:
    path = path.replace("[]", "")
    head, _, rest = path.partition(".")
    return rest if kind == "rl_run" and head in SUB_CONFIGS and rest else path


def differences_text() -> str:
    """The sections of the first DIFFERENCES file that exists and has them."""
    for name, headings in DIFFERENCES:
        path = ROOT / name
        if not path.exists():
            continue
        text, parts = path.read_text(), []
        for heading in headings:
            found = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
            if found:
                end = re.compile(rf"^#{{1,{len(found[1])}}} ", re.M).search(text, found.end())
                parts.append(text[found.end() : end.start() if end else len(text)])
        if parts and re.search(rf"^#+ {re.escape(headings[0])}", text, re.M):
            return "\n".join(parts)
    raise AssertionError(f"no differences section in {[n for n, _ in DIFFERENCES]}")


def named(text: str) -> set[str]:
    """The keys the code spans of a text name: `[trainer]`, `resume = "None"`, `--no-resume`."""
    names = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        word = span.split()[0].strip("[]\"',").removeprefix("--").removeprefix("no-")
        names.add(word.replace("-", "_"))
    return names


def said(path: str, names: set[str]) -> bool:
    parts = path.split(".")
    return any(".".join(parts[i:]) in names for i in range(len(parts) - 1)) or path in names


def allowed(kind: str, path: str) -> bool:
    parts = path.split(".")
    return any(
        f"{kind}: {'.'.join(parts[:i])}" in NOT_USER_VISIBLE for i in range(1, len(parts) + 1)
    )


def unsaid(reference: dict, text: str) -> dict[str, list[str]]:
    """Normalized path -> the differences at it (per kind) that the text does not name."""
    kinds = {kind: trainspec_side(kind) for kind in reference["kinds"]}
    names = named(text)
    out: dict[str, list[str]] = {}
    for (kind, path), text_ in sorted(differences(reference, kinds).items()):
        short = normalized(kind, path)
        if not allowed(kind, path) and not said(short, names):
            out.setdefault(short, []).append(f"{kind}: {path}: {text_}")
    return out


def test_every_difference_from_the_reference_is_said():
    missing = unsaid(REFERENCE, differences_text())
    report = "\n".join(line for lines in missing.values() for line in lines)
    assert not missing, f"{len(missing)} differences not said (reference | trainspec):\n{report}"


def test_a_planted_default_change_is_reported_as_unsaid():
    planted = copy.deepcopy(REFERENCE)
    planted["kinds"]["rl"]["optim.lr"] = 3e-4
    before, after = unsaid(REFERENCE, differences_text()), unsaid(planted, differences_text())
    assert "optim.lr" not in before
    assert after["optim.lr"] == ["rl: optim.lr: 0.0003 | 1e-06"]


def test_a_planted_variant_and_key_are_reported_as_unsaid():
    planted = copy.deepcopy(REFERENCE)
    planted["variants"]["sft"]["optim"].append("lion")
    planted["kinds"]["sft"]["scheduler.warmup_ratio"] = 0.1
    after = unsaid(planted, differences_text())
    assert after["optim.lion"] == ["sft: optim.lion: variant | absent (lion)"]
    assert after["scheduler.warmup_ratio"] == ["sft: scheduler.warmup_ratio: 0.1 | absent"]


def test_a_difference_whose_sentence_is_removed_is_reported():
    text = differences_text()
    assert "dist_timeout_seconds" not in unsaid(REFERENCE, text)
    removed = unsaid(REFERENCE, text.replace("`dist_timeout_seconds`", "the timeout"))
    assert removed["dist_timeout_seconds"] == [
        "rl: dist_timeout_seconds: 3600 | 900",
        "rl_run: trainer.dist_timeout_seconds: 3600 | 900",
        "sft: dist_timeout_seconds: 3600 | 900",
    ]


@pytest.mark.parametrize("kind", sorted(REFERENCE["kinds"]))
def test_the_reference_data_is_walked_on_both_sides(kind):
    """Most of the reference's paths are trainspec's too: the two walks name keys alike."""
    here, _ = trainspec_side(kind)
    paths = REFERENCE["kinds"][kind]
    assert len(paths) > 50
    assert sum(path in here for path in paths) > 0.8 * len(paths)


def test_the_committed_data_is_what_the_script_writes():
    """When the reference inventories are at hand (a developer's checkout), the committed
    data is regenerated from them and must be unchanged."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import reference_defaults

    if not (reference_defaults.SOURCE / "trainer-fields.md").exists():
        pytest.skip("the reference inventories are not here")
    assert reference_defaults.build(reference_defaults.SOURCE) == REFERENCE
