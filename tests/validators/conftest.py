"""Shared helper of the rule tests: run a document through `trainspec.config.validate` and
return what the rules reported, whether the document was accepted or rejected.

Tests get it through the `outcome` fixture::

    def test_something(kind, outcome):
        out = outcome(kind, {"model": {"cp": 2}})
        assert out.error_keys == [("validate_cp", "model.cp")]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from trainspec.config import ConfigError, ConfigIssue, validate


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of validating one document: the resolved config (None when it was rejected),
    the errors and the warnings, each a list of ConfigIssue in reporting order."""

    config: Any
    errors: list[ConfigIssue]
    warnings: list[ConfigIssue]

    @property
    def error_keys(self) -> list[tuple[str | None, str]]:
        return [(issue.rule, issue.path) for issue in self.errors]

    @property
    def warning_keys(self) -> list[tuple[str | None, str]]:
        return [(issue.rule, issue.path) for issue in self.warnings]

    def only_error(self, rule: str, path: str) -> ConfigIssue:
        """Assert the document was rejected by exactly one error, from `rule` at `path`, with no
        warnings on the way; return that error."""
        assert self.config is None
        assert self.error_keys == [(rule, path)]
        assert self.warning_keys == []
        issue = self.errors[0]
        assert issue.severity == "error"
        assert issue.message
        assert issue.fix, f"{rule} reported {path} without a fix"
        return issue

    def only_warning(self, rule: str, path: str) -> ConfigIssue:
        """Assert the document was accepted with exactly one warning, from `rule` at `path`;
        return that warning."""
        assert self.error_keys == []
        assert self.config is not None
        assert self.warning_keys == [(rule, path)]
        issue = self.warnings[0]
        assert issue.severity == "warning"
        assert issue.message
        assert issue.fix, f"{rule} warned about {path} without a fix"
        return issue

    def clean(self) -> Any:
        """Assert the document was accepted without errors or warnings; return the config."""
        assert self.error_keys == []
        assert self.warning_keys == []
        assert self.config is not None
        return self.config


def run(kind: str, doc: Mapping[str, Any]) -> Outcome:
    try:
        resolved = validate(kind, doc)  # type: ignore[arg-type]
    except ConfigError as exc:
        return Outcome(None, list(exc.errors), list(exc.warnings))
    return Outcome(resolved.config, [], list(resolved.warnings))


@pytest.fixture
def outcome() -> Callable[[str, Mapping[str, Any]], Outcome]:
    """`outcome(kind, doc)`: validate `doc` as a `kind` config and return its Outcome."""
    return run
