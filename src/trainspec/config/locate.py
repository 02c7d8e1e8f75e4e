"""Where an issue was written: the `file:line:col` of the value (or of the table that should hold
it) in the last source that set its path, or the command-line flag that set it.

    issue = locate(issue, outcome.sources)
    remember(outcome.sources)                  # a command, once its config is valid
    written_at("orchestrator.train.source[0].env.taskset.turns")   # "run.toml:12:3", or None

What a command refuses at start (trainers/errors.py: SetupError) is found after the config
was checked, far from its sources: `remember` keeps the sources of this process's config (the
user's TOML files and flags; a config a launcher wrote as JSON has no place worth showing), and
`written_at` says where a dotted path was written, when it was.
"""

from __future__ import annotations

import dataclasses
import re

from trainspec.issues import ConfigIssue

from .sources import FileSource, FlagSource, Source, last_source

_REMEMBERED: list[Source] = []
_PREFIX: list[str] = []  # a table the command's own paths are written under (see remember)


def locate(issue: ConfigIssue, sources: list[Source]) -> ConfigIssue:
    """Fill in where `issue` was written: the value's position, else a related setting's, else
    the table that should hold it; or the command-line flag that set it."""
    parts = tuple(str(p) for p in issue.key) or (tuple(issue.path.split(".")) if issue.path else ())
    candidates = [parts, *(tuple(r.split(".")) for r in issue.related)]
    candidates += [parts[:depth] for depth in range(len(parts) - 1, 0, -1)]
    for candidate in candidates:
        source = last_source(sources, candidate)
        if source is not None:
            return _at(issue, source, candidate, issue.about_key and candidate == parts)
    files = [s for s in sources if isinstance(s, FileSource)]
    if files:
        return _at(issue, files[-1], ())
    flags = [s for s in sources if isinstance(s, FlagSource) and s.flags]
    if flags:
        return dataclasses.replace(issue, flag=flags[-1].flag(parts))
    return issue


def _at(
    issue: ConfigIssue, source: Source, parts: tuple[str, ...], of_key: bool = False
) -> ConfigIssue:
    if isinstance(source, FileSource):
        position = source.position(parts, of_key)
        return dataclasses.replace(
            issue, file=source.path, line=position.line, column=position.column
        )
    return dataclasses.replace(issue, flag=source.flag(parts))


def remember(sources: list[Source], prefix: str = "") -> None:
    """Keep this process's config sources for `written_at`: its TOML files and flags. `prefix`
    is a table the command's messages name that its own config does not have (the orchestrator
    names its keys as `rl` holds them: orchestrator.train...)."""
    keep = [s for s in sources if not isinstance(s, FileSource) or s.path.endswith(".toml")]
    _REMEMBERED[:] = keep
    _PREFIX[:] = [prefix] if prefix else []


def written_at(path: str) -> str | None:
    """`file:line:col` (or the flag) where the setting at a dotted path (`a.b[0].c`) was
    written; None when no remembered source wrote it (a default, or nothing remembered)."""
    parts = tuple(part for part in re.split(r"[.\[\]]+", path) if part)
    if _PREFIX and parts[:1] == (_PREFIX[0],):
        parts = parts[1:]
    source = last_source(_REMEMBERED, parts) if parts else None
    if isinstance(source, FileSource):
        position = source.position(parts, False)
        return f"{source.path}:{position.line}:{position.column}"
    return source.flag(parts) if isinstance(source, FlagSource) else None
