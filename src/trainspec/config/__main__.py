"""Resolve a trainer config and print it as JSON.

    python -m trainspec.config sft                       # the built-in defaults
    python -m trainspec.config rl configs/rl/tiny.toml   # files merged left to right
    cat run.toml | python -m trainspec.config rl -      # `-` reads stdin

Exit codes: 0 valid, 1 invalid config, 2 unreadable file, bad usage or an internal error (one
line, never a traceback); a closed stdout (`| head -c1`) ends it quietly with 141, as SIGPIPE
would. It behaves like validate-config, without importing the CLI layer above this package.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from trainspec import closed_pipe
from trainspec.closed_pipe import silence_stdout

from . import ConfigError, ConfigFileError, ConfigIssue, dump_json, load
from .kinds import ALL_KINDS as KINDS

PROG = "python -m trainspec.config"
USAGE = f"{PROG} {{{','.join(KINDS)}}} [FILE ...]   (FILE - reads stdin)"


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """The whole command; returns the exit code and never raises."""
    try:
        return _run(list(argv), stdout, stderr)
    except BrokenPipeError:  # the reader went away: not a verdict on the config
        silence_stdout()
        return closed_pipe.EXIT_CODE
    except Exception as err:  # noqa: BLE001 - the one place that turns bugs into a report
        stderr.write(f"{PROG}: internal error: {type(err).__name__}: {err} (please report it)\n")
        return 2


def _run(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        stdout.write(f"usage: {USAGE}\n{__doc__}")
        return 0
    if not argv or argv[0] not in KINDS:
        got = f"unknown kind {argv[0]!r}" if argv else "no kind given"
        stderr.write(f"usage: {USAGE}\n{PROG}: error: {got}; choose one of {', '.join(KINDS)}\n")
        return 2
    options = [a for a in argv[1:] if a.startswith("-") and a != "-"]
    if options:
        stderr.write(f"usage: {USAGE}\n{PROG}: error: unknown option {options[0]}\n")
        return 2
    try:
        resolved = load(argv[0], argv[1:])
    except ConfigFileError as err:
        stderr.write(f"{err}\n")
        return 2
    except ConfigError as err:
        _write_issues([*err.errors, *err.warnings], stderr)
        return 1
    _write_issues(resolved.warnings, stderr)
    stdout.write(dump_json(resolved.config) + "\n")
    stdout.flush()  # a closed pipe shows here, inside run(), not at interpreter exit
    return 0


def _write_issues(issues: list[ConfigIssue], out: TextIO) -> None:
    """As validate-config writes them: `file:line:col: error: path message`, then the fix."""
    for issue in issues:
        where = f"{issue.where}: " if issue.where else ""
        text = f"{issue.path} {issue.message}" if issue.path else issue.message
        out.write(f"{where}{issue.severity}: {text}\n")
        if issue.fix:
            out.write(f"    fix: {issue.fix}\n")


def main() -> None:
    sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))


if __name__ == "__main__":
    main()
