"""The one error a trainer raises for a setting it cannot honour here, caught by the entrypoint
and printed without a traceback: which setting, why, and what to do instead."""

from __future__ import annotations


class SetupError(Exception):
    """A setting this device or build cannot honour, or an input that cannot be read."""

    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.fix = fix

    def render(self) -> str:
        return f"{self.path}: error: {self.problem}\n    fix: {self.fix}"


class SetupErrors(Exception):
    """Several refusals found at once, reported together."""

    def __init__(self, errors: list[SetupError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)


def raise_all(errors: list[SetupError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise SetupErrors(errors)
