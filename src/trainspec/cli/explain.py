"""`--explain`: where each resolved value came from (a file line, a flag, the default, or a rule
that derived it).

    validate-config configs/rl/tiny.toml --explain              # every setting
    validate-config configs/rl/tiny.toml --explain --changed    # only what differs from defaults
    validate-config configs/rl/tiny.toml --explain optim        # one key or table, in detail
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from trainspec.config.loader import Outcome, check_document
from trainspec.config.schema_info import NO_DEFAULT, SchemaInfo, schema_info
from trainspec.config.sources import last_source
from trainspec.issues import toml_value

KeyPath = tuple[str, ...]
ABSENT = object()  # a path that does not exist in a document


class UnknownKey(Exception):
    """`--explain KEY` names no setting of this kind of config; the message says what does."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One resolved value: what it is, where it came from and what it would be by default."""

    path: KeyPath
    value: Any
    origin: str  # "configs/x.toml:12", "--optim.lr", "default", "derived by the rules ..."
    default: Any  # the value with nothing set (ABSENT when this path is not in that config)

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def changed(self) -> bool:
        return self.default is ABSENT or self.default != self.value


def leaves(value: Any, path: KeyPath = ()):
    """(path, value) of every setting: tables are walked, anything else (arrays too) is one."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    else:
        yield path, value


def lookup(document: Any, path: KeyPath) -> Any:
    """The value at `path`, or ABSENT."""
    for part in path:
        if isinstance(document, dict) and part in document:
            document = document[part]
        elif isinstance(document, list) and part.isdigit() and int(part) < len(document):
            document = document[int(part)]
        else:
            return ABSENT
    return document


def defaults_of(kind: str) -> dict[str, Any] | None:
    """The resolved config with nothing set (None if this kind needs some settings)."""
    config, _, _ = check_document(kind, {})  # type: ignore[arg-type]
    return config.model_dump(mode="json") if config is not None else None


def key_info(info: SchemaInfo, path: KeyPath):
    """The schema's KeyInfo of a resolved path (a key of a free-form table: the table's)."""
    return info.keys.get(path) or info.free_table(path)


def settings(outcome: Outcome) -> list[Setting]:
    """Every resolved setting of a valid outcome, with its origin and its default."""
    assert outcome.config is not None
    info = schema_info(outcome.kind)
    defaults = defaults_of(outcome.kind)
    rows = []
    for path, value in leaves(outcome.config.model_dump(mode="json")):
        key = info.keys.get(path)
        default = lookup(defaults, path) if defaults is not None else ABSENT
        if default is ABSENT and key is not None and key.default is not NO_DEFAULT:
            default = key.default  # a key of a variant the defaults do not choose
        rows.append(Setting(path, value, origin(outcome, path, value), default))
    return rows


def origin(outcome: Outcome, path: KeyPath, value: Any) -> str:
    """Where the resolved `value` at `path` came from: the source that set it last (and what
    was written there, if a rule changed it), else the default or the rule that derived it."""
    key = schema_info(outcome.kind).keys.get(path)
    source = last_source(outcome.sources, path)
    if source is not None:
        origin = source.origin(path)
        written = lookup(outcome.document, path)
        if written != value and not (written == "None" and value is None):
            origin += f" (written {toml_value(written)}, resolved by the rules)"
        return origin
    default = key.default if key else NO_DEFAULT
    if default == "auto" and value != "auto":
        return f'default "auto", resolved for {outcome.kind}'
    if default is not NO_DEFAULT and default != value and not isinstance(default, dict):
        return f"derived by the rules (default {toml_value(default)})"
    return "default"


def check_key(key: str, kind: str) -> None:
    """Raise UnknownKey unless `key` names a setting or table of `kind` configs (a key of a
    free-form table too: env_vars.NCCL_DEBUG)."""
    parts = tuple(key.replace("-", "_").split("."))
    info = schema_info(kind)
    if parts in info.keys or info.free_table(parts) is not None:
        return
    import difflib

    names = sorted(".".join(path) for path in info.keys)
    close = difflib.get_close_matches(".".join(parts), names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else f" (--help lists the {kind} settings)"
    raise UnknownKey(f"{key} is not a setting of {kind} configs{hint}")


def select(rows: list[Setting], key: str, kind: str) -> tuple[list[Setting], str]:
    """The settings at or under the dotted `key` (kebab-case works too), or none and why (a
    setting of a variant or a table this config does not have); UnknownKey for a key that is
    no setting of `kind` at all."""
    parts = tuple(key.replace("-", "_").split("."))
    found = [row for row in rows if row.path[: len(parts)] == parts]
    if found:
        return found, ""
    check_key(key, kind)
    info = schema_info(kind)
    if info.free_table(parts) is not None:
        return [], f"{'.'.join(parts)} is not set in this config"
    return [], f"{'.'.join(parts)} is not part of this config{_why_absent(info, parts, rows)}"


def _why_absent(info: SchemaInfo, parts: KeyPath, rows: list[Setting]) -> str:
    for depth in range(len(parts) - 1, -1, -1):
        union = parts[:depth]
        owners = [t for t, names in info.variants.get(union, {}).items() if parts[depth] in names]
        if owners:
            key = info.tag_of(union)
            chosen = next((r.value for r in rows if r.path == (*union, key)), None)
            tag = ".".join((*union, key))
            now = toml_value(chosen) if chosen is not None else "not set"
            return f": it is a setting of {tag} {' or '.join(owners)}, and {tag} is {now}"
    return ": the table that holds it is off (null) in this config"


def write_explain(
    outcome: Outcome, out: TextIO, changed: bool = False, key: str | None = None
) -> None:
    """Every resolved key with where its value came from; with `changed`, only the keys whose
    value differs from the default; with `key`, that key (or table) in detail."""
    if outcome.config is None:
        return
    rows = settings(outcome)
    note = ""
    if key is not None:
        rows, note = select(rows, key, outcome.kind)
    if changed:
        rows = [row for row in rows if row.changed]
    if note:
        out.write(f"# {note}\n")
    elif key is not None:
        _write_detail(rows, outcome.kind, out)
    elif not rows:
        out.write("# every setting has its default value\n")
    else:
        lines = [(f"{row.dotted} = {toml_value(row.value)}", row.origin) for row in rows]
        width = max(len(setting) for setting, _ in lines)
        for setting, origin in lines:
            out.write(f"{setting:<{width}}  # {origin}\n")


def _write_detail(rows: list[Setting], kind: str, out: TextIO) -> None:
    """Each setting as a block: value, where it was set, default, description."""
    import textwrap

    from .help import describe, toml_default

    info = schema_info(kind)
    if not rows:
        out.write("# every setting here has its default value\n")
    for row in rows:
        key = key_info(info, row.path)
        origin = row.origin if row.origin != "default" else "not set: the default"
        default = "none" if row.default is ABSENT else toml_default(row.default)
        out.write(f"{row.dotted} = {toml_default(row.value)}\n")
        out.write(f"    set by:  {origin}\n")
        out.write(f"    default: {default}\n")
        if key is not None:
            text = describe(kind, row.path, key, info, with_default=False)
            out.write(textwrap.fill(text, 100, initial_indent="    ", subsequent_indent="    "))
            out.write("\n")
