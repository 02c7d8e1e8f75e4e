"""How a check is shown: text for people, JSON for tools, GitHub workflow annotations for CI.

The JSON report (`--format json`) is one object, whatever the outcome, including a file that
cannot be read or parsed, a bad command line and an internal error:

    {
      "valid": false,                 # true only for exit code 0
      "kind": "rl",                   # the config kind; null when it could not be told
      "errors": [                     # in line order: file, line, column; flag errors last
        {
          "file": "exp.toml",         # where it was written: file, line, column (null when
          "line": 12,                 #   set by a flag or when no position is known)
          "column": 1,
          "path": "optim.betas1",     # the dotted config path ("" when about a whole file)
          "message": "optim.betas1 is not a known key",
          "suggestion": "...",        # how to fix it, when known
          "flag": "--optim.lr",       # the command-line flag that set it, if one did
          "rule": "...",              # the rule that reported it, if one did
          "reference": "docs/reference/rl-trainer.md#optim.betas1",  # the key's entry
          "category": "config"        # config (exit 1); file, usage, internal (exit 2)
        }
      ],
      "warnings": [ ... ],            # same shape, category "config"
      "config": { ... }               # the resolved config when valid, else null
    }

`--each --format json` writes JSON Lines: one such object per file on one line, each with a
leading "file" key (the input it is about) and, for a TOML file that names no trainspec
schema and so was not checked, "skipped": the reason. Exit codes do not depend on the format:
0 valid, 1 invalid config, 2 usage, I/O or internal error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TextIO

from trainspec.config.loader import Outcome
from trainspec.config.sources import ConfigFileError, FileSource, FlagSource
from trainspec.issues import ConfigIssue


def ordered(
    issues: Iterable[ConfigIssue], files: list[str], flags: list[str] | None = None
) -> list[ConfigIssue]:
    """`issues` in reading order: by file (in command-line order), line and column; then the
    issues set by a flag, in command-line order (`flags`); then any without a place."""
    flag_rank = {flag: rank for rank, flag in enumerate(flags or [])}

    def place(issue: ConfigIssue) -> tuple[int, int, int, int]:
        if issue.file:
            rank = files.index(issue.file) if issue.file in files else len(files)
            return (0, rank, issue.line or 0, issue.column or 0)
        if issue.flag:
            return (1, flag_rank.get(issue.flag, len(flag_rank)), 0, 0)
        return (2, 0, 0, 0)

    return sorted(issues, key=place)


def in_order(outcome: Outcome) -> Outcome:
    """The outcome with its errors and warnings each in reading order."""
    files = [source.path for source in outcome.sources if isinstance(source, FileSource)]
    flags = [f for s in outcome.sources if isinstance(s, FlagSource) for f in s.flags.values()]
    outcome.errors = ordered(outcome.errors, files, flags)
    outcome.warnings = ordered(outcome.warnings, files, flags)
    return outcome


def issue_dict(issue: ConfigIssue, kind: str | None = None) -> dict[str, Any]:
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
    if (see := reference_link(kind, issue)) is not None:
        entry["reference"] = see
    entry["category"] = "config"
    return entry


def failure_dict(
    category: str,
    message: str,
    file: str | None = None,
    line: int | None = None,
    column: int | None = None,
    suggestion: str | None = None,
) -> dict[str, Any]:
    """An error that stopped the check before any config was judged (exit code 2)."""
    entry: dict[str, Any] = {
        "file": file,
        "line": line,
        "column": column,
        "path": "",
        "message": message,
    }
    if suggestion:
        entry["suggestion"] = suggestion
    entry["category"] = category
    return entry


def file_error_dict(err: ConfigFileError) -> dict[str, Any]:
    return failure_dict("file", f"{err.path} {err.message}", err.path, err.line, err.column)


def failure_report(kind: str | None, errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON report of a check that could not be made: same keys as a verdict's."""
    return {"valid": False, "kind": kind, "errors": errors, "warnings": [], "config": None}


def write_text(
    outcome: Outcome, label: str, out: TextIO, strict: bool = False, name: str | None = None
) -> None:
    """The issues, then the verdict on `label`'s config, called by `name` (a command: `rl`)
    or else by its kind."""
    for issue in [*outcome.errors, *outcome.warnings]:
        where = f"{issue.where}: " if issue.where else ""
        out.write(f"{where}{issue.severity}: {issue.path} {issue.message}\n")
        if issue.fix:
            out.write(f"    fix: {issue.fix}\n")
        if (see := reference_link(outcome.kind, issue)) is not None:
            out.write(f"    see: {see}\n")
    errors, warnings = len(outcome.errors), len(outcome.warnings)
    valid = outcome.valid and not (strict and warnings)
    verdict = f"{'valid' if valid else 'invalid'} {name or outcome.kind} config"
    counts = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    out.write(f"{label}: {verdict} ({counts})\n")


def reference_link(kind: str | None, issue: ConfigIssue) -> str | None:
    """The anchor of the key an issue is about (an unknown key, a value of the wrong type, a
    rule's key), on its command's page of the config reference; None when the reference lists
    no table of its path."""
    from trainspec.config.reference_links import link
    from trainspec.kinds import KIND_INFO

    if kind not in KIND_INFO or not issue.path:
        return None
    where = link(kind, issue.key or tuple(issue.path.split(".")))
    return where if "#" in where else None


def write_github(outcome: Outcome, out: TextIO) -> None:
    for issue in [*outcome.errors, *outcome.warnings]:
        see = reference_link(outcome.kind, issue)
        props = [f"title={_escape_property(f'trainspec {issue.path}')}"]
        if issue.file:
            where = [f"file={_escape_property(issue.file)}", f"line={issue.line}"]
            props = [*where, f"col={issue.column}", *props]
        text = f"{issue.flag + ': ' if issue.flag else ''}{issue.path} {issue.message}"
        if issue.fix:
            text += f" (fix: {issue.fix})"
        if see is not None:
            text += f" (see {see})"
        out.write(f"::{issue.severity} {','.join(props)}::{_escape(text)}\n")


def write_github_failure(err: ConfigFileError, out: TextIO) -> None:
    where = f"file={_escape_property(err.path)},line={err.line or 1},col={err.column or 1}"
    out.write(f"::error {where},title=trainspec::{_escape(err.message)}\n")


def _escape(text: str) -> str:
    """A workflow command's message, escaped as GitHub Actions reads it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """A workflow command's property value: also `:` and `,`, which separate properties."""
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def json_report(outcome: Outcome, strict: bool = False) -> dict[str, Any]:
    config = outcome.config.model_dump(mode="json") if outcome.config and outcome.valid else None
    return {
        "valid": outcome.valid and not (strict and outcome.warnings),
        "kind": outcome.kind,
        "errors": [issue_dict(issue, outcome.kind) for issue in outcome.errors],
        "warnings": [issue_dict(issue, outcome.kind) for issue in outcome.warnings],
        "config": config,
    }


def write_json(report: dict[str, Any], out: TextIO, file: str | None = None) -> None:
    """One report: pretty-printed, or as one JSON Lines line tagged with its `file` (--each)."""
    if file is None:
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        out.write(json.dumps({"file": file, **report}) + "\n")
