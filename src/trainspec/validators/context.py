"""The context a rule reports into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from trainspec.issues import ConfigIssue, toml_value

Kind = Literal["rl", "sft", "orchestrator", "rl_run"]


@dataclass(slots=True)
class RuleContext:
    kind: Kind
    rule: str = ""
    errors: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)

    def error(self, path: str, message: str, fix: str, related: tuple[str, ...] = ()) -> None:
        """Reject the config; `related` names the other settings the message mentions."""
        self.errors.append(ConfigIssue("error", path, message, fix, self.rule, related))

    def warn(
        self, path: str, message: str, fix: str | None = None, related: tuple[str, ...] = ()
    ) -> None:
        self.warnings.append(ConfigIssue("warning", path, message, fix, self.rule, related))


show = toml_value
