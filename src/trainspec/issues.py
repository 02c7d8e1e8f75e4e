"""What validation reports: errors and warnings that name the dotted path and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]


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
