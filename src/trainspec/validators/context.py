"""The context a rule reports into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainspec.issues import ConfigIssue, toml_value
from trainspec.kinds import Kind


@dataclass(slots=True)
class RuleContext:
    kind: Kind
    rule: str = ""
    errors: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)

    def error(
        self,
        path: str,
        message: str,
        fix: str,
        related: tuple[str, ...] = (),
        about_key: bool = False,
        key: tuple[str | int, ...] = (),
    ) -> None:
        """Reject the config; `related` names the other settings the message mentions;
        `about_key` points the report at the key itself rather than its value; `key` gives the
        path as parts when a part may hold a dot (a free-form table's key)."""
        issue = ConfigIssue(
            "error", path, message, fix, self.rule, related, about_key=about_key, key=key
        )
        self.errors.append(issue)

    def resolve(self, table: Any, name: str, value: Any) -> None:
        """Set `table.name` on the user's behalf. A setting the user did not write stays out of
        the table's `model_fields_set`, which keeps meaning "written by the user" (the SFT run
        name hashes only those, so a new setting with a default renames no run)."""
        written = name in table.model_fields_set
        setattr(table, name, value)
        if not written:
            table.model_fields_set.discard(name)

    def warn(
        self,
        path: str,
        message: str,
        fix: str | None = None,
        related: tuple[str, ...] = (),
        about_key: bool = False,
    ) -> None:
        """Let the config pass with a note; `about_key` as for error()."""
        issue = ConfigIssue("warning", path, message, fix, self.rule, related, about_key=about_key)
        self.warnings.append(issue)


show = toml_value
