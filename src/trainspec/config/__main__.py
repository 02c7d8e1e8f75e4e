"""Resolve a trainer config and print it as JSON.

    python -m trainspec.config sft                       # the built-in defaults
    python -m trainspec.config rl configs/rl/tiny.toml   # files merged left to right

Exit codes: 0 valid, 1 invalid config, 2 unreadable file or bad usage.
"""

from __future__ import annotations

import sys

from . import ConfigError, ConfigFileError, dump_json, load
from .kinds import ALL_KINDS as KINDS


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in KINDS:
        print(
            f"usage: python -m trainspec.config {{{','.join(KINDS)}}} [FILE ...]", file=sys.stderr
        )
        return 2
    kind, files = args[0], args[1:]
    try:
        resolved = load(kind, files)
    except ConfigFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ConfigError as err:
        for issue in [*err.errors, *err.warnings]:
            print(f"{issue.severity}: {issue}", file=sys.stderr)
        return 1
    for issue in resolved.warnings:
        print(f"warning: {issue}", file=sys.stderr)
    print(dump_json(resolved.config))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
