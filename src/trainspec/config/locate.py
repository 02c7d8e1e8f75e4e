"""Where an issue was written: the `file:line:col` of the value (or of the table that should hold
it) in the last source that set its path, or the command-line flag that set it."""

from __future__ import annotations

import dataclasses

from trainspec.issues import ConfigIssue

from .sources import FileSource, FlagSource, Source, last_source


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
