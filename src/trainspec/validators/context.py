"""The context a rule reports into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from trainspec.issues import ConfigIssue

Kind = Literal["rl", "sft"]


@dataclass(slots=True)
class RuleContext:
    kind: Kind
    rule: str = ""
    errors: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)

    def error(self, path: str, message: str, fix: str) -> None:
        self.errors.append(ConfigIssue("error", path, message, fix, self.rule))

    def warn(self, path: str, message: str, fix: str | None = None) -> None:
        self.warnings.append(ConfigIssue("warning", path, message, fix, self.rule))


def show(value: object) -> str:
    """A value as it would be written in TOML (null for None)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(show(item) for item in value) + "]"
    return str(value)
