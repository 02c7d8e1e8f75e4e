"""Files and overrides in, a validated and resolved config out.

The sources merge left to right. Stage 0 (limits.py) refuses what no config holds (non-finite
numbers, integers outside 64 bits, dates, absurd nesting). Then the generated classes decide and
the handwritten rules run; only a document the classes reject is checked against the JSON
Schema (stage 1), whose errors say more, and the rules still judge the rest of it, so one report
holds every issue. A kind with a document hook (the combined `rl` config copies its shared
settings down) has the schema judge its structure first. Every issue is then located in the
source that set its path (locate.py).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trainspec.issues import ConfigError, ConfigIssue, dotted
from trainspec.validators.pipeline import run_rules

from . import limits, schema_check
from .kinds import Kind, config_class, document_hook
from .locate import locate
from .merge import merge_all, unflatten
from .pydantic_issues import has_key, issues_from_pydantic
from .sources import FlagSource, Source, read_file

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


def check_document(kind: Kind, data: dict[str, Any]) -> tuple[Any, list, list]:
    """(config or None, errors, warnings) of one merged document; issues are not located.

    The classes decide first: what they accept the schema accepts too (the parity proof checks
    that on generated and mutated documents), so a valid config never pays for stage 1. A
    rejected one is checked by the schema, whose errors say more; the classes' errors are
    reported only when the schema finds nothing. A kind's document hook runs on a document whose
    structure the schema has accepted."""
    hook = document_hook(kind)
    if hook is not None:
        errors = schema_check.check(kind, data)
        if errors:
            return None, errors, []
        data = hook(data)
    try:
        config = config_class(kind).model_validate(data)
    except (ValidationError, ValueError, TypeError, RecursionError) as exc:
        errors = schema_check.check(kind, data)
        if errors or not isinstance(exc, ValidationError):
            errors = errors or limits.check(data)
            return None, errors + _rule_errors_beside(kind, data, errors), []
        return None, issues_from_pydantic(exc, data), []
    ctx = run_rules(config, kind)
    return (None if ctx.errors else config), ctx.errors, ctx.warnings


def _rule_errors_beside(kind: Kind, data: dict[str, Any], errors: list[ConfigIssue]) -> list:
    """The rules' errors about the rest of the document, so one round of fixes fixes all: the
    document without the values the structural errors name, if the classes then accept it;
    rule errors that involve a removed setting are left out (they would judge a default)."""
    pruned = copy.deepcopy(data)
    removed = []
    for issue in errors:
        key = issue.key or tuple(issue.path.split("."))
        if not key or not _remove(pruned, key):
            return []
        removed.append(dotted(key))
    try:
        config = config_class(kind).model_validate(pruned)
    except (ValidationError, ValueError, TypeError):
        return []
    found = run_rules(config, kind).errors

    def touches(issue: ConfigIssue) -> bool:
        paths = (issue.path, *issue.related)
        return any(
            p == r or p.startswith(f"{r}.") or r.startswith(f"{p}.") for p in paths for r in removed
        )

    return [issue for issue in found if not touches(issue)]


def _remove(document: Any, key: tuple[Any, ...]) -> bool:
    for part in key[:-1]:
        if not has_key(document, part):
            return False
        document = document[part]
    if isinstance(document, dict) and key[-1] in document:
        del document[key[-1]]
        return True
    return False


def check_sources(kind: Kind, sources: list[Source]) -> Outcome:
    """Merge `sources` left to right and check the result; never raises on a bad config.

    Stage 0 (limits.py) runs first, on the merged document, so one check covers files, flags
    and the Python API alike; what it refuses (absurd nesting, integers outside 64 bits, nan,
    dates) would crash or fool the later stages, so they do not run."""
    document = merge_all(source.data for source in sources)
    errors = limits.check(document)
    warnings: list[ConfigIssue] = []
    config = None
    if not errors:
        config, errors, warnings = check_document(kind, document)
    if errors or warnings:
        errors = [locate(issue, sources) for issue in errors]
        warnings = [locate(issue, sources) for issue in warnings]
    return Outcome(kind, config, errors, warnings, document, sources)


def overrides_source(overrides: Mapping[str, Any]) -> FlagSource:
    """Dotted Python overrides (``{"optim.lr": 1e-5}``) as a source named by their flags.

    A key that is not a string is a programming error (TypeError); a bad value is the config's
    error, reported by the checks (ConfigError)."""
    if not isinstance(overrides, Mapping):
        raise TypeError(
            f"overrides must be a mapping of dotted keys to values, such as "
            f'{{"optim.lr": 1e-5}}; got {type(overrides).__name__}'
        )
    for key in overrides:
        if not isinstance(key, str):
            raise TypeError(f'override keys are dotted strings such as "optim.lr"; got {key!r}')
    flags = {tuple(dotted.split(".")): f"--{dotted}" for dotted in overrides}
    return FlagSource(unflatten(overrides), flags)


def _resolved(outcome: Outcome) -> Resolved:
    if not outcome.valid:
        raise ConfigError(outcome.kind, outcome.errors, outcome.warnings)
    return Resolved(outcome.kind, outcome.config, outcome.warnings)  # type: ignore[arg-type]


def validate(kind: Kind, data: Mapping[str, Any]) -> Resolved:
    """Validate one merged document and run the rules; raise ConfigError if it is invalid
    (whatever the values: nan, 2**70, a 3000-deep list); a `data` that is not a mapping is a
    TypeError."""
    config_class(kind)  # an unknown kind is a ValueError, before anything else
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a mapping of settings (a dict); got {type(data).__name__}")
    return _resolved(check_sources(kind, [FlagSource(dict(data))]))


def load(
    kind: Kind,
    files: Iterable[str | PathLike[str]] = (),
    overrides: Mapping[str, Any] | None = None,
) -> Resolved:
    """Merge TOML `files` left to right, apply dotted `overrides` (``{"optim.lr": 1e-5}``)
    last, and validate the result as a `kind` config.

    A file that cannot be read or parsed raises ConfigFileError (with its position), an
    invalid config ConfigError (every issue located); `-` reads stdin. Passing one path
    instead of a list (`load("rl", "run.toml")`), or a path that is not a str or PathLike,
    is a TypeError: a string is iterable, and reading it character by character is never
    what was meant."""
    config_class(kind)
    paths = _paths(files)  # the arguments are checked before any file is read
    flags = overrides_source(overrides) if overrides is not None else FlagSource()
    sources: list[Source] = [read_file(path) for path in paths]
    if flags.flags:
        sources.append(flags)
    return _resolved(check_sources(kind, sources))


def _paths(files: Iterable[str | PathLike[str]]) -> list[str | PathLike[str]]:
    """`files` as a list of paths; a TypeError, saying what to pass, for anything else."""
    if isinstance(files, (str, bytes, PathLike)):
        raise TypeError(
            f"files must be a list of paths, not one {type(files).__name__}: "
            f"write load(kind, [{files!r}])"
        )
    if not isinstance(files, Iterable):
        raise TypeError(f"files must be a list of paths; got {type(files).__name__}")
    paths = list(files)
    for path in paths:
        if not isinstance(path, (str, PathLike)) or isinstance(os.fspath(path), bytes):
            raise TypeError(f"each file must be a str or os.PathLike[str] path; got {path!r}")
    return paths


def dump_json(config: TrainerConfig, indent: int | None = 2) -> str:
    """The resolved config as JSON; explicit nulls are kept, so it re-validates to an equal one."""
    return config.model_dump_json(indent=indent)
