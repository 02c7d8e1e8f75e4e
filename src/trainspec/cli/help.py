"""--help text for config settings, generated from the schema: descriptions, what each setting
takes and its bounds, its default as it would be written in TOML, and for a setting of one
variant of a union, which one (`--optim.momentum  (optim.type sgd)`).

    validate-config --kind rl --help        # every rl setting
    validate-config --help optim            # only [optim] (of each kind that has it)
    sft --help model                        # only [model] of sft configs
"""

from __future__ import annotations

import textwrap
from typing import Any

from trainspec.config.schema_info import NO_DEFAULT, KeyInfo, SchemaInfo, schema_info
from trainspec.issues import toml_value

KeyPath = tuple[str, ...]
NULL_TEXT = '"None"'  # how TOML writes null in a trainspec config (see config_model.py)


class UnknownSection(Exception):
    """`--help SECTION` names no table or setting; the message says what does."""


def config_flags_help(
    kind: str, width: int = 100, section: str | None = None, label: str | None = None
) -> str:
    """The settings of `kind` (only those at or under `section`), one entry each; an unknown
    section's error names the configs by `label` (the command, `rl`), else by kind."""
    info = schema_info(kind)
    parts = section_path(section) if section else ()
    lines = []
    for path, key in info.keys.items():
        if path[: len(parts)] != parts or key.renamed_to:
            continue  # another section, or an old name: validate-config says where it went
        tag = info.tag_of(path)
        if key.is_table and not key.is_switch and tag not in info.children.get(path, []):
            continue  # a plain table: its keys are listed one by one
        flag = "--" + ".".join(path)
        if key.is_switch:
            flag += f", --no-{'.'.join(path)}"
        variant = variant_of(info, path)
        lines.append(f"  {flag}" + (f"  ({variant})" if variant else ""))
        lines += _wrapped(describe(kind, path, key, info, with_default=False), key, width)
    if parts and not lines:
        raise UnknownSection(_unknown(section or "", [kind], label))
    return "\n".join(lines) + "\n"


def _wrapped(text: str, key: KeyInfo, width: int) -> list[str]:
    """The text wrapped at `width`, with "(default: ...)" kept whole on the last line."""
    lines = textwrap.wrap(text, width, initial_indent=" " * 6, subsequent_indent=" " * 6)
    default = default_text(key)
    if default:
        tail = f"(default: {default})"
        if lines and len(lines[-1]) + 1 + len(tail) <= width:
            lines[-1] += " " + tail
        else:
            lines.append(" " * 6 + tail)
    return lines


def section_help(section: str, kinds: tuple[str, ...], width: int = 100) -> str:
    """`--help SECTION` without a kind: the section of every kind that has it; kinds whose
    settings there read the same are listed once."""
    texts: dict[str, list[str]] = {}
    for kind in kinds:
        try:
            texts.setdefault(config_flags_help(kind, width, section), []).append(kind)
        except UnknownSection:
            continue
    if not texts:
        raise UnknownSection(_unknown(section, list(kinds)))
    out = []
    for text, same in texts.items():
        out.append(f"{' and '.join(same)} config settings under {section} (--key VALUE):\n{text}")
    return "\n".join(out)


def section_path(section: str) -> KeyPath:
    """`model.lora`, `max-steps`: a dotted key as a key path (kebab-case works too)."""
    return tuple(section.removeprefix("--").replace("-", "_").split("."))


def _unknown(section: str, kinds: list[str], label: str | None = None) -> str:
    import difflib

    names = sorted({".".join(path) for kind in kinds for path in schema_info(kind).keys})
    wanted = ".".join(section_path(section))
    close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.6)
    if close:
        hint = f"did you mean {close[0]}?"
    else:
        tops = sorted({path[0] for kind in kinds for path in schema_info(kind).keys})
        hint = "sections: " + ", ".join(tops)
    return f"{section} is not a setting or table of {label or ' or '.join(kinds)} configs; {hint}"


def describe(
    kind: str,
    path: KeyPath,
    key: KeyInfo,
    info: SchemaInfo | None = None,
    with_default: bool = True,
) -> str:
    """One setting in a sentence or three: description, what it takes (bounds too), default."""
    text = key.description
    union = path[:-1]
    if info is not None and union in info.variants and path[-1] == info.tag_of(union):
        # each variant describes its own tag ("Selects AdamW."): say what the key chooses
        text = f"Which {'.'.join(union)} variant this is; a setting of only some variants is "
        text += "marked with them."
    if not key.is_table:  # a table's keys are listed on their own
        takes = key.expected()
        limits = key.limits
        item_limits = key.items.limits if key.items is not None else ""
        if limits:
            takes += f" ({limits})"
        if item_limits:
            takes += f" (each {item_limits})"
        text += f" Takes {takes}."
    default = default_text(key) if with_default else None
    if default:
        text += f" (default: {default})"
    return text.strip()


def default_text(key: KeyInfo) -> str | None:
    """The default as written in TOML; a sub-table's is "on" / "off" or left out, never {}.
    A key whose union variants default it differently gets each variant's."""
    groups = key.defaults_by_value()
    if groups:
        return "; ".join(
            f"{'required' if value is NO_DEFAULT else toml_default(value)} for {', '.join(tags)}"
            for value, tags in groups
        )
    default = key.default
    if default is NO_DEFAULT:
        return None
    if key.is_table and (default is None or isinstance(default, dict | bool)):
        if key.is_switch:
            return "on" if default not in (None, False) else "off"
        if not default or not isinstance(default, dict):
            return None
    return toml_default(default)


def toml_default(value: Any) -> str:
    """A value as TOML writes it; null is the string "None" (TOML has no null)."""
    if value is None:
        return NULL_TEXT
    if isinstance(value, list):
        return "[" + ", ".join(toml_default(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_default(v)}" for k, v in value.items()) + "}"
    return toml_value(value)


def variant_of(info: SchemaInfo, path: KeyPath) -> str | None:
    """`optim.type sgd` (`renderer.name qwen3`) for a key that only some variants of a union
    have (the nearest union above it that does not give every variant this key)."""
    for depth in range(len(path) - 1, -1, -1):
        union = path[:depth]
        tags = info.variants.get(union)
        if not tags:
            continue
        owners = [tag for tag, names in tags.items() if path[depth] in names]
        if owners and len(owners) < len(tags):
            return f"{'.'.join((*union, info.tag_of(union)))} {', '.join(owners)}"
    return None
