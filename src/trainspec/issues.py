"""What validation reports: errors and warnings that name the dotted path and the fix."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning"]


def toml_value(value: Any) -> str:
    """A value as it would be written in TOML (null for None)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dotted(parts: tuple[Any, ...]) -> str:
    """A key path as TOML writes it: `model.lora.rank`, `env_vars."a.b"`, `log.ranks_filter.0`."""
    return ".".join(
        str(p) if isinstance(p, int) or BARE_KEY.fullmatch(p) else json.dumps(p) for p in parts
    )


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One finding about a config: where (dotted path), what is wrong, and how to fix it.

    `message` reads as the continuation of the path: ``optim.max_norm`` + ``set to null: ...``.
    """

    severity: Severity
    path: str
    message: str
    fix: str | None = None
    rule: str | None = None  # name of the rule that reported it; None for type/shape errors
    related: tuple[str, ...] = ()  # other paths the message names, to locate it if `path` is unset
    about_key: bool = False  # the key itself is wrong (unknown): point at the key, not its value
    key: tuple[str | int, ...] = ()  # `path` as parts, when a key may hold a dot
    # Where it was written: a file position, or the command-line flag that set it.
    file: str | None = None
    line: int | None = None
    column: int | None = None
    flag: str | None = None

    @property
    def where(self) -> str:
        if self.file:
            return f"{self.file}:{self.line}:{self.column}"
        return self.flag or ""

    def __str__(self) -> str:
        text = f"{self.path} {self.message}" if self.path else self.message
        return f"{text} (fix: {self.fix})" if self.fix else text


@dataclass(slots=True)
class ConfigError(Exception):
    """Raised when a config is invalid; carries every error found, plus the warnings."""

    kind: str
    errors: list[ConfigIssue]
    warnings: list[ConfigIssue] = field(default_factory=list)

    def __str__(self) -> str:
        head = f"invalid {self.kind} config ({len(self.errors)} error(s)):"
        return "\n".join([head, *(f"  {issue}" for issue in self.errors)])
