"""How a check is shown: text for people, JSON for tools, GitHub workflow annotations for CI."""

from __future__ import annotations

import json
from typing import Any, TextIO

from trainspec.config.loader import Outcome
from trainspec.issues import ConfigIssue, toml_value


def issue_dict(issue: ConfigIssue) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "file": issue.file,
        "line": issue.line,
        "column": issue.column,
        "path": issue.path,
        "message": f"{issue.path} {issue.message}".strip(),
    }
    if issue.flag:
        entry["flag"] = issue.flag
    if issue.fix:
        entry["suggestion"] = issue.fix
    if issue.rule:
        entry["rule"] = issue.rule
    return entry


def write_text(outcome: Outcome, label: str, out: TextIO, strict: bool = False) -> None:
    for issue in [*outcome.errors, *outcome.warnings]:
        where = f"{issue.where}: " if issue.where else ""
        out.write(f"{where}{issue.severity}: {issue.path} {issue.message}\n")
        if issue.fix:
            out.write(f"    fix: {issue.fix}\n")
    errors, warnings = len(outcome.errors), len(outcome.warnings)
    if outcome.valid and not (strict and warnings):
        verdict = f"valid {outcome.kind} config"
    else:
        verdict = f"invalid {outcome.kind} config"
    counts = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    out.write(f"{label}: {verdict} ({counts})\n")


def write_github(outcome: Outcome, out: TextIO) -> None:
    for issue in [*outcome.errors, *outcome.warnings]:
        props = [f"title={_escape_property(f'trainspec {issue.path}')}"]
        if issue.file:
            where = [f"file={_escape_property(issue.file)}", f"line={issue.line}"]
            props = [*where, f"col={issue.column}", *props]
        text = f"{issue.flag + ': ' if issue.flag else ''}{issue.path} {issue.message}"
        if issue.fix:
            text += f" (fix: {issue.fix})"
        out.write(f"::{issue.severity} {','.join(props)}::{_escape(text)}\n")


def _escape(text: str) -> str:
    """A workflow command's message, escaped as GitHub Actions reads it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """A workflow command's property value: also `:` and `,`, which separate properties."""
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def json_report(outcome: Outcome, strict: bool = False) -> dict[str, Any]:
    config = outcome.config.model_dump(mode="json") if outcome.valid else None
    return {
        "valid": outcome.valid and not (strict and outcome.warnings),
        "kind": outcome.kind,
        "errors": [issue_dict(issue) for issue in outcome.errors],
        "warnings": [issue_dict(issue) for issue in outcome.warnings],
        "config": config,
    }


def write_json(outcome: Outcome, out: TextIO, strict: bool = False) -> None:
    out.write(json.dumps(json_report(outcome, strict), indent=2) + "\n")


def _leaves(value: Any, path: tuple[str, ...]):
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    else:
        yield path, value


def write_explain(outcome: Outcome, out: TextIO) -> None:
    """Every resolved key with where its value came from: a file line, a flag, or the default
    (and whether a rule derived it)."""
    if outcome.config is None:
        return
    from trainspec.config.schema_info import NO_DEFAULT, schema_info
    from trainspec.config.sources import last_source

    keys = schema_info(outcome.kind).keys
    rows = []
    for path, value in _leaves(outcome.config.model_dump(mode="json"), ()):
        source = last_source(outcome.sources, path)
        if source is not None:
            origin = source.origin(path)
            written = _get(outcome.document, path)
            if written != value and not (written == "None" and value is None):
                origin += f" (written {toml_value(written)}, resolved by the rules)"
        else:
            key = keys.get(tuple(p for p in path if not p.isdigit()))
            default = key.default if key else NO_DEFAULT
            origin = "default"
            if default == "auto" and value != "auto":
                origin = f'default "auto", resolved for {outcome.kind}'
            elif default is not NO_DEFAULT and default != value and not isinstance(default, dict):
                origin = f"derived by the rules (default {toml_value(default)})"
        rows.append((".".join(path), toml_value(value), origin))
    width = max(len(f"{p} = {v}") for p, v, _ in rows)
    for path, value, origin in rows:
        out.write(f"{f'{path} = {value}':<{width}}  # {origin}\n")


def _get(document: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document
