"""Files and overrides in, a validated and resolved trainer config out."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainspec.issues import ConfigError, ConfigIssue
from trainspec.validators.pipeline import run_rules

from .kinds import Kind, TrainerConfig, config_class
from .merge import merge_all, unflatten


@dataclass(slots=True)
class Resolved:
    """A valid config with every default and "auto" value resolved, and the warnings on the way."""

    kind: Kind
    config: TrainerConfig
    warnings: list[ConfigIssue] = field(default_factory=list)


class ConfigFileError(Exception):
    """A config file that cannot be read or is not TOML."""

    def __init__(self, path: str | PathLike[str], message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.message = message


def read_toml(path: str | PathLike[str]) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(path, f"not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(path, f"not UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise ConfigFileError(path, exc.strerror or str(exc)) from None


def _has(container: Any, key: Any) -> bool:
    if isinstance(container, Mapping):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container)


def _document_path(loc: tuple[Any, ...], data: Any, missing: bool) -> str:
    """The dotted path of a pydantic error location, without union-member labels."""
    parts: list[str] = []
    current = data
    for index, element in enumerate(loc):
        if _has(current, element):
            parts.append(str(element))
            current = current[element]
        elif missing and index == len(loc) - 1:
            parts.append(str(element))
    return ".".join(parts)


def _issues_from_pydantic(exc: ValidationError, data: Mapping[str, Any]) -> list[ConfigIssue]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for error in exc.errors(include_url=False):
        path = _document_path(error["loc"], data, error["type"] == "missing")
        grouped.setdefault(path, []).append(error)
    issues = []
    for path, errors in grouped.items():
        if any(other.startswith(f"{path}.") for other in grouped):
            continue  # a union member with deeper errors: those say what is wrong
        kinds = {e["type"] for e in errors}
        key = path.rsplit(".", 1)[-1]
        if "extra_forbidden" in kinds:
            issues.append(
                ConfigIssue(
                    "error", path, "is not a known key", f"remove {key} or check its spelling"
                )
            )
        elif "missing" in kinds:
            issues.append(ConfigIssue("error", path, "is required", f"add {key}"))
        else:
            wanted = dict.fromkeys(e["msg"].removeprefix("Input should be ") for e in errors)
            got = json.dumps(errors[0]["input"], default=str)
            issues.append(
                ConfigIssue(
                    "error",
                    path,
                    f"should be {', or '.join(wanted)}; got {got}",
                    "correct the value (see the schema description of this key)",
                )
            )
    return issues


def validate(kind: Kind, data: Mapping[str, Any]) -> Resolved:
    """Validate one merged document and run the rules; raise ConfigError if it is invalid."""
    cls = config_class(kind)
    try:
        config = cls.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(kind, _issues_from_pydantic(exc, data)) from None
    ctx = run_rules(config, kind)
    if ctx.errors:
        raise ConfigError(kind, ctx.errors, ctx.warnings)
    return Resolved(kind, config, ctx.warnings)  # type: ignore[arg-type]


def load(
    kind: Kind,
    files: Iterable[str | PathLike[str]] = (),
    overrides: Mapping[str, Any] | None = None,
) -> Resolved:
    """Merge TOML `files` left to right, apply dotted `overrides` (``{"optim.lr": 1e-5}``)
    last, and validate the result as a `kind` config."""
    documents = [read_toml(Path(f)) for f in files]
    if overrides:
        documents.append(unflatten(overrides))
    return validate(kind, merge_all(documents))


def dump_json(config: TrainerConfig, indent: int | None = 2) -> str:
    """The resolved config as JSON; explicit nulls are kept, so it re-validates to an equal one."""
    return config.model_dump_json(indent=indent)
