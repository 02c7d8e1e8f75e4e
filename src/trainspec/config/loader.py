"""Files and overrides in, a validated and resolved trainer config out.

Stage 0 catches what JSON cannot hold (non-finite numbers, absurd nesting), stage 1 checks the
merged document against the JSON Schema and reports every structural error at once, stage 2
builds the generated classes and runs the handwritten rules. Every issue is then located in the
source that set its path.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trainspec.issues import ConfigError, ConfigIssue, dotted
from trainspec.validators.pipeline import run_rules

from . import schema_check
from .kinds import Kind, config_class
from .merge import merge_all, unflatten
from .sources import FileSource, FlagSource, Source, last_source, read_file

if TYPE_CHECKING:
    from .kinds import TrainerConfig


@dataclass(slots=True)
class Resolved:
    """A valid config with every default and "auto" value resolved, and the warnings on the way."""

    kind: Kind
    config: TrainerConfig
    warnings: list[ConfigIssue] = field(default_factory=list)


@dataclass(slots=True)
class Outcome:
    """Everything a check found, valid or not (what validate-config reports)."""

    kind: Kind
    config: TrainerConfig | None
    errors: list[ConfigIssue]
    warnings: list[ConfigIssue]
    document: dict[str, Any]
    sources: list[Source]

    @property
    def valid(self) -> bool:
        return self.config is not None and not self.errors


def _has(container: Any, key: Any) -> bool:
    if isinstance(container, Mapping):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container)


def _document_path(loc: tuple[Any, ...], data: Any, missing: bool) -> tuple[Any, ...]:
    """The key path of a pydantic error location, without union-member labels."""
    parts: list[Any] = []
    current = data
    for index, element in enumerate(loc):
        if _has(current, element):
            parts.append(element)
            current = current[element]
        elif missing and index == len(loc) - 1:
            parts.append(element)
    return tuple(parts)


def _issues_from_pydantic(exc: ValidationError, data: Mapping[str, Any]) -> list[ConfigIssue]:
    grouped: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for error in exc.errors(include_url=False):
        parts = _document_path(error["loc"], data, error["type"] == "missing")
        grouped.setdefault(parts, []).append(error)
    issues = []
    for parts, errors in grouped.items():
        if any(other[: len(parts)] == parts and other != parts for other in grouped):
            continue  # a union member with deeper errors: those say what is wrong
        kinds = {e["type"] for e in errors}
        path, key = dotted(parts), str(parts[-1]) if parts else ""
        if "extra_forbidden" in kinds:
            message, fix = "is not a known key", f"remove {key} or check its spelling"
        elif "missing" in kinds:
            message, fix = "is required", f"add {key}"
        else:
            wanted = dict.fromkeys(e["msg"].removeprefix("Input should be ") for e in errors)
            got = json.dumps(errors[0]["input"], default=str)
            message = f"should be {', or '.join(wanted)}; got {got}"
            fix = "correct the value (see the schema description of this key)"
        about_key = "extra_forbidden" in kinds
        issues.append(ConfigIssue("error", path, message, fix, about_key=about_key, key=parts))
    return issues


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


def check_document(kind: Kind, data: dict[str, Any]) -> tuple[Any, list, list]:
    """(config or None, errors, warnings) of one merged document; issues are not located."""
    errors = schema_check.check(kind, data)
    if errors:
        return None, errors, []
    if kind == "rl_run":  # shared settings into [trainer] and [orchestrator] first
        from trainspec.validators.rl_run import propagate_shared

        data = propagate_shared(data)
    try:
        config = config_class(kind).model_validate(data)
    except ValidationError as exc:
        return None, _issues_from_pydantic(exc, data), []
    ctx = run_rules(config, kind)
    return (None if ctx.errors else config), ctx.errors, ctx.warnings


def check_sources(kind: Kind, sources: list[Source]) -> Outcome:
    """Merge `sources` left to right and check the result; never raises on a bad config."""
    document = merge_all(source.data for source in sources)
    config, errors, warnings = check_document(kind, document)
    if errors or warnings:
        errors = [locate(issue, sources) for issue in errors]
        warnings = [locate(issue, sources) for issue in warnings]
    return Outcome(kind, config, errors, warnings, document, sources)


def overrides_source(overrides: Mapping[str, Any]) -> FlagSource:
    """Dotted Python overrides (``{"optim.lr": 1e-5}``) as a source named by their flags."""
    flags = {tuple(dotted.split(".")): f"--{dotted}" for dotted in overrides}
    return FlagSource(unflatten(overrides), flags)


def _resolved(outcome: Outcome) -> Resolved:
    if not outcome.valid:
        raise ConfigError(outcome.kind, outcome.errors, outcome.warnings)
    return Resolved(outcome.kind, outcome.config, outcome.warnings)  # type: ignore[arg-type]


def validate(kind: Kind, data: Mapping[str, Any]) -> Resolved:
    """Validate one merged document and run the rules; raise ConfigError if it is invalid."""
    config_class(kind)  # an unknown kind is a ValueError, before anything else
    return _resolved(check_sources(kind, [FlagSource(dict(data))]))


def load(
    kind: Kind,
    files: Iterable[str | PathLike[str]] = (),
    overrides: Mapping[str, Any] | None = None,
) -> Resolved:
    """Merge TOML `files` left to right, apply dotted `overrides` (``{"optim.lr": 1e-5}``)
    last, and validate the result as a `kind` config."""
    config_class(kind)
    sources: list[Source] = [read_file(path) for path in files]
    if overrides:
        sources.append(overrides_source(overrides))
    return _resolved(check_sources(kind, sources))


def dump_json(config: TrainerConfig, indent: int | None = 2) -> str:
    """The resolved config as JSON; explicit nulls are kept, so it re-validates to an equal one."""
    return config.model_dump_json(indent=indent)
