"""One command's page of the config reference (docs/reference/<command>.md): a heading per table
and, for each key, a block with its anchor (the dotted path: `#optim.lr`), what it takes, its
default, its per-mode values when it is "auto", the rules that mention it and, when this build
refuses it at start, what and why. See gen_docs.py for the page set and the index."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reference_rules import Rule, rules_by_key

from trainspec.config.reference_links import anchor, embedded, page_name, reference_keys
from trainspec.config.schema_info import NO_DEFAULT, KeyInfo, KeyPath, SchemaInfo
from trainspec.issues import dotted
from trainspec.kinds import KIND_INFO, Kind

REFUSED_MARK = "**Refused at start**"


@dataclass
class Page:
    kind: Kind
    info: SchemaInfo
    rules: list[Rule]
    refused: dict[str, str]  # anchor -> what is refused and why
    by_rule: dict[KeyPath, list[str]] = field(default_factory=dict)
    arrays: set[KeyPath] = field(default_factory=set)  # the arrays of tables, as rendered

    def __post_init__(self) -> None:
        self.by_rule = rules_by_key(self.rules)
        self.inside = embedded(self.info.schema)


def value_text(value: Any) -> str:
    if value is NO_DEFAULT:
        return "*required*"
    if value == {}:
        return "on (all defaults)"
    if value is None:
        return "off (null)"
    return f"`{json.dumps(value)}`"


def default_text(key: KeyInfo) -> str:
    """The default; per variant when the variants that have the key disagree."""
    groups = key.defaults_by_value()
    if key.free_values is not None and key.default == {}:
        return "empty"
    if not groups:
        return value_text(key.default)
    return "; ".join(f"{value_text(value)} ({', '.join(tags)})" for value, tags in groups)


def takes_text(info: SchemaInfo, key: KeyInfo) -> str:
    takes = "a table" if key.is_table and not key.choices else key.expected()
    if key.limits:
        takes += f" ({key.limits})"
    if key.items is not None and key.items.limits:
        takes += f" (each {key.items.limits})"
    if key.path in info.variants:
        tags = ", ".join(f"`{tag}`" for tag in info.variants[key.path])
        takes = f"a table, by `{info.tag_of(key.path)}`: {tags}"
    elif key.is_table and "null" in key.types:
        takes = 'a table, or `"None"` (off)'
    return takes


def variants_of(info: SchemaInfo, path: KeyPath) -> str:
    """ " (type: a, b)" when a key exists only in some variants of the union it sits in."""
    tags = info.variants.get(path[:-1])
    tag = info.tag_of(path[:-1])
    if not tags or path[-1] == tag:
        return ""
    owners = [t for t, keys in tags.items() if path[-1] in keys]
    return "" if len(owners) == len(tags) else f" ({tag}: {', '.join(owners)})"


def auto_text(kind: Kind, key: KeyInfo) -> str:
    """What `"auto"` becomes for this page's command, then for the others."""
    assert key.auto is not None
    here = key.auto.get(kind)
    others = [
        f"{KIND_INFO[other].command} {value_text(value)}"  # type: ignore[index]
        for other, value in key.auto.items()
        if other != kind and other in KIND_INFO
    ]
    text = '**Auto**: `"auto"` resolves per command'
    if here is not None:
        text += f": {value_text(here)} here ({KIND_INFO[kind].command})"
    return text + (f"; {', '.join(others)}" if others else "")


def key_block(page: Page, info: SchemaInfo, prefix: KeyPath, path: KeyPath) -> list[str]:
    key = info.keys[path]
    full = (*prefix, *path)
    name = ".".join(
        dotted((part,)) + ("[]" if full[: n + 1] in page.arrays and n + 1 < len(full) else "")
        for n, part in enumerate(full)
    )
    lines = [
        f'<a id="{anchor(full)}"></a>**`{name}`**{variants_of(info, path)} · '
        f"{takes_text(info, key)} · default {default_text(key)}"
    ]
    if key.description:
        lines.append(key.description)
    if key.renamed_to:
        new = dotted((*full[:-1], key.renamed_to))
        lines.append(f"**Renamed**: write `{new}` instead (migrate-config rewrites the file)")
    if key.auto is not None:
        lines.append(auto_text(page.kind, key))
    if not prefix and full in page.by_rule:
        names = page.by_rule[full]
        lines.append("Rules: " + ", ".join(f"[`{n}`](#rule-{n})" for n in names))
    if anchor(full) in page.refused:
        lines.append(f"{REFUSED_MARK}: {page.refused[anchor(full)]}")
    if not prefix and len(full) == 1 and full[0] in page.inside:
        other = page.inside[full[0]]
        lines.append(
            f"Takes every key of the [`{KIND_INFO[other].command}` config]({page_name(other)}), "
            f"written under `[{full[0]}]`: `{full[0]}.X` is `X` there."
        )
    return ["<br>\n".join(lines), ""]


def is_section(info: SchemaInfo, path: KeyPath, inside: dict[str, Kind]) -> bool:
    """A table whose keys are listed under a heading of its own."""
    if len(path) == 1 and path[0] in inside:
        return False
    key = info.keys[path]
    return bool(info.children.get(path)) or (key.items is not None and key.items.is_table)


def section(page: Page, info: SchemaInfo, prefix: KeyPath, path: KeyPath) -> list[str]:
    """The heading of the table at `path`, its block, its keys, then its tables'."""
    key = info.keys[path]
    level = "##" if len(prefix) + len(path) == 1 else "###"
    array = key.items is not None and key.items.is_table
    title = f"[[{dotted((*prefix, *path))}]]" if array else f"[{dotted((*prefix, *path))}]"
    out = [f"{level} {title}", "", *key_block(page, info, prefix, path)]
    if array:
        page.arrays.add((*prefix, *path))
        items, _ = info.scope((*path, 0))
        return out + keys_of(page, items, (*prefix, *path), ())
    return out + keys_of(page, info, prefix, path)


def keys_of(page: Page, info: SchemaInfo, prefix: KeyPath, table: KeyPath) -> list[str]:
    """The blocks of the keys of `table` (its plain keys first), then a section per table."""
    inside = page.inside if not prefix else {}
    children = [(*table, name) for name in info.children.get(table, [])]
    out: list[str] = []
    for path in children:
        if not is_section(info, path, inside):
            out += key_block(page, info, prefix, path)
    for path in children:
        if is_section(info, path, inside):
            out += section(page, info, prefix, path)
    return out


def contents(page: Page) -> str:
    info = page.info
    tables = [p for p in info.children[()] if is_section(info, (p,), page.inside)]
    tables += [p for p in info.children[()] if p in page.inside]
    links = ["[Top-level settings](#top-level-settings)"]
    links += [f"[`[{name}]`](#{name})" for name in tables]
    links += ["[Rules](#rules-between-settings)"]
    if page.refused:
        links += ["[Refused at start](#refused-at-start)"]
    return " · ".join(links)


def render(page: Page, schema_file: str) -> str:
    info, command = page.info, KIND_INFO[page.kind].command
    out = [f"# `{command}` settings", ""]
    if info.schema.get("description"):
        out += [info.schema["description"], ""]
    out += [
        f"Every key of the `{command}` command's config (schema `{schema_file}`). Generated by "
        "`make gen` from `schema/`; do not edit. How a key is written in a file and on the "
        "command line, and what the marks mean: [the reference's index](index.md). A key's "
        "anchor is its "
        f"dotted path: `{page_name(page.kind)}#max_steps`.",
        "",
        contents(page),
        "",
        "## Top-level settings",
        "",
    ]
    top = [(name,) for name in info.children[()]]
    for path in top:
        if not is_section(info, path, page.inside) and path[0] not in page.inside:
            out += key_block(page, info, (), path)
    for path in top:
        if path[0] in page.inside:
            out += [f"## [{path[0]}]", "", *key_block(page, info, (), path)]
        elif is_section(info, path, page.inside):
            out += section(page, info, (), path)
    out += rules_section(page)
    out += refused_section(page)
    return "\n".join(out).rstrip("\n") + "\n"


def key_link(page: Page, path: KeyPath) -> str:
    from trainspec.config.reference_links import target

    kind, keys = target(page.kind, path, page.info.schema)
    where = "" if kind == page.kind else page_name(kind)
    return f"[`{dotted(path)}`]({where}#{anchor(keys)})"


def rules_section(page: Page) -> list[str]:
    out = [
        "## Rules between settings",
        "",
        "Checked by every command and by validate-config after each key passed the schema, in "
        "this order; editors do not show them. A rule that changes a value (`resolve_*`) warns "
        "when it changes one you wrote. Each is a function of that name in "
        "`src/trainspec/validators/`.",
        "",
    ]
    for rule in page.rules:
        line = f'<a id="rule-{rule.name}"></a>**`{rule.name}`**: {rule.summary}'
        if rule.keys:
            line += "<br>\nKeys: " + ", ".join(key_link(page, key) for key in rule.keys)
        out += [line, ""]
    return out


def refused_section(page: Page) -> list[str]:
    if not page.refused:
        return []
    keys = set(map(anchor, reference_keys(page.info)))
    missing = sorted(set(page.refused) - keys)
    if missing:
        raise ValueError(f"{page.kind}: refused paths that are no keys: {missing}")
    return [
        "## Refused at start",
        "",
        "This build cannot honour these settings: the command stops before it starts anything "
        "and names each one it was given, with the reason and what to write instead.",
        "",
        *(f"- [`{path}`](#{path}): {why}" for path, why in page.refused.items()),
        "",
    ]
