"""One check, from a command line's inputs to an Outcome: the files (each read once), the kind,
the section files and the overrides. Shared by validate-config, its `diff` and the training
entrypoints.

What stops a check before any config is judged (an unreadable file, a `#:schema` line in the
wrong place or for another kind) is raised as CannotCheck, with the text and the JSON entry
that report it; a bad command line is a UsageError.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from trainspec.config.loader import Outcome, check_sources
from trainspec.config.sources import ConfigFileError, FileSource, Source
from trainspec.issues import ConfigIssue
from trainspec.kinds import KIND_INFO, SCHEMA_NAMES, Kind

from . import report
from .args import UsageError
from .inputs import Inputs, kind_of_name, kind_of_text, misplaced_directive
from .kind_choice import guessed_kind


class CannotCheck(Exception):
    """Exit code 2: `text` for stderr, `error` for the JSON report."""

    def __init__(
        self, text: str, error: dict[str, Any], file_error: ConfigFileError | None = None
    ) -> None:
        super().__init__(text)
        self.text = text
        self.error = error
        self.file_error = file_error  # for a GitHub annotation at the file


@dataclass(slots=True)
class Request:
    """What one check is asked to read: files merged left to right, then section files, then
    the overrides."""

    files: list[str]
    kind: Kind | None = None  # --kind, else the first file's `#:schema` line, else the keys
    sections: list[tuple[str, str, str]] = field(default_factory=list)  # (flag, dotted, file)
    overrides: list[tuple[str, str | None]] = field(default_factory=list)
    program: str | None = None  # an entrypoint that takes one kind (sft): named in messages


def read(inputs: Inputs, path: str) -> Source:
    try:
        return inputs.read(path)
    except ConfigFileError as err:
        raise CannotCheck(f"{err}\n", report.file_error_dict(err), err) from None


def kind_of(request: Request, inputs: Inputs, sources: list[Source]) -> Kind | None:
    """The kind to check as: --kind (or the command's), else what the first file names, else
    the one kind the files' keys tell apart; None when they do not (kind_choice says why)."""
    first = request.files[0] if request.files else None
    kind = request.kind
    if kind is None and first is not None:
        kind = inputs.named_kind(first) or kind_of_name(first)
    raw = sources[0].text if sources and isinstance(sources[0], FileSource) else b""
    if kind is None and first is not None and (line := misplaced_directive(raw)):
        text = (
            f"{first}:{line}:1: error: the #:schema line must be the first line (editors "
            "and validate-config read it only there)\n    fix: move it to line 1\n"
        )
        raise CannotCheck(
            text,
            report.failure_dict(
                "file",
                f"{first}: the #:schema line must be the first line (editors and "
                "validate-config read it only there)",
                first,
                line,
                1,
                "move it to line 1",
            ),
        )
    if kind is None and (guess := guessed_kind(request.kind, request.files, inputs)) is not None:
        kind = guess.kind
    if kind is not None:
        _refuse_other_kinds(request, kind, sources)
    return kind


def _refuse_other_kinds(request: Request, kind: Kind, sources: list[Source]) -> None:
    """A file whose `#:schema` line names another kind: say so, rather than list its keys as
    unknown ones."""
    for path, source in zip(request.files, sources, strict=True):
        named = kind_of_text(source.text)  # type: ignore[union-attr]
        if not named or named == kind:
            continue
        message = f"its #:schema line is for {named} configs"
        if request.program:  # a command: say which command reads it, by name
            command = KIND_INFO[named].command
            message = f"its #:schema line is for {command} configs ({SCHEMA_NAMES[named]}.json)"
            why = f"{request.program} reads {request.program} configs"
            fix = (
                f"use {command}: {command} {path}; or point the #:schema line at the "
                f"{request.program} schema ({SCHEMA_NAMES[kind]}.json)"
            )
        elif request.kind:
            why = f"--kind is {kind}"
            fix = (
                f"drop --kind {kind} (the #:schema line decides), or point the #:schema line "
                f"at the {kind} schema"
            )
        else:
            why = f"{request.files[0]} is an {kind} config"
            fix = "check one kind of config at a time (files of one kind merge)"
        message = f"{message}, but {why}"
        raise CannotCheck(
            f"{path}:1:1: error: {message}\n    fix: {fix}\n",
            report.failure_dict("usage", f"{path} {message}", path, 1, 1, fix),
        )


def check(request: Request, inputs: Inputs) -> Outcome | None:
    """Read, merge and check; None when no kind can be told (the caller decides whether that
    is a skip or a usage error). Errors and warnings come in reading order."""
    sources: list[Source] = [read(inputs, path) for path in request.files]
    kind = kind_of(request, inputs, sources)
    if kind is None:
        return None
    info = None
    if request.sections or request.overrides:  # the key table loads only for these
        from trainspec.config.schema_info import schema_info

        info = schema_info(kind)
    for flag, dotted, path in request.sections:
        parts = tuple(dotted.split("."))
        key = info.keys.get(parts)  # type: ignore[union-attr]
        if key is None or not key.is_table:
            raise UsageError(
                f"{flag} @ {path}: {dotted} is not a table of {request.program or kind} configs "
                "(a section file sets one table: --model @ model.toml)"
            )
        try:
            sources.append(inputs.section(parts, path))
        except ConfigFileError as err:
            raise CannotCheck(f"{err}\n", report.file_error_dict(err), err) from None
    if request.overrides:
        from .overrides import parse

        parsed = parse(request.overrides, info)  # type: ignore[arg-type]
        if parsed.errors:  # flags that name no setting: reported before any value is checked
            outcome = Outcome(kind, None, parsed.errors, [], {}, [*sources, parsed.source])
            return report.in_order(outcome)
        if parsed.source.flags:
            sources.append(parsed.source)
    outcome = check_sources(kind, sources)
    if request.sections:
        outcome.errors = [_whole_config_hint(issue, request) for issue in outcome.errors]
    return report.in_order(outcome)


def _whole_config_hint(issue: ConfigIssue, request: Request) -> ConfigIssue:
    """`--model @ model.toml` where model.toml starts with `[model]`: say the header goes."""
    for flag, dotted, path in request.sections:
        table = dotted.rsplit(".", 1)[-1]
        if issue.path.startswith(f"{dotted}.{table}") and issue.about_key:
            fix = (
                f"{path} is read as the [{dotted}] table ({flag} @ {path}): write its keys "
                f"without the [{table}] header"
            )
            return dataclasses.replace(issue, fix=fix)
    return issue
