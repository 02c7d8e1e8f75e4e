"""`validate-config diff A B`: the settings two configs resolve differently, each with both
values and where each was set (a file line, a flag, the default or a rule).

    $ validate-config diff configs/rl/tiny.toml configs/rl/demo-trainer.toml
    --- configs/rl/tiny.toml (rl)
    +++ configs/rl/demo-trainer.toml (rl)
    max_steps
      - 4    # configs/rl/tiny.toml:5
      + 300  # configs/rl/demo-trainer.toml:7
    ...

Both are resolved first (defaults, "auto" values and rules), so two files that spell the same
config differently are the same. A setting only one side has (another variant, a table that is
off on the other side) is shown as absent there. Exit codes: 0 the same, 1 different, 2 when
either side cannot be read or is not a valid config (its errors are reported as validate-config
reports them).
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from trainspec.config.kinds import ALL_KINDS
from trainspec.config.loader import Outcome
from trainspec.issues import toml_value

from . import report
from .args import Parser, UsageError
from .check import CannotCheck, Request, check
from .explain import ABSENT, origin
from .inputs import Inputs
from .kind_choice import cannot_tell, chosen_note, guessed_kind

PROG = "validate-config diff"
USAGE = f"{PROG} A B [--kind KIND] [--format text|json]"


def build_parser(out: TextIO) -> Parser:
    parser = Parser(
        prog=PROG,
        usage=USAGE,
        description="List the settings whose resolved values differ between two configs.",
        add_help=False,
        out=out,
    )
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    parser.add_argument("a", metavar="A", help="a config file (- for stdin)")
    parser.add_argument("b", metavar="B", help="the config file to compare it with")
    parser.add_argument(
        "--kind", choices=ALL_KINDS, help="kind of both (default: #:schema, else the keys)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def run_diff(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    parser = build_parser(stdout)
    if "-h" in argv or "--help" in argv:
        parser.print_help()
        return 0
    options = parser.parse_args(argv)
    inputs = Inputs()
    outcomes, failures = [], []
    for path in (options.a, options.b):
        outcome, errors = _resolve(path, options, inputs, stderr)
        outcomes.append(outcome)
        failures += errors
    if failures or None in outcomes:
        if options.format == "json":  # one report for both sides
            report.write_json(report.failure_report(options.kind, failures), stdout)
        return 2
    a, b = outcomes
    rows = differences(a, b)  # type: ignore[arg-type]
    if options.format == "json":
        stdout.write(json.dumps(_json(a, b, options, rows), indent=2) + "\n")  # type: ignore[arg-type]
    else:
        _write_text(a, b, options, rows, stdout)  # type: ignore[arg-type]
    return 1 if rows else 0


def _resolve(path: str, options, inputs: Inputs, stderr) -> tuple[Outcome | None, list]:
    """The resolved config of one side, or None and the errors that say why there is none
    (their text is written to stderr here)."""
    try:
        outcome = check(Request([path], options.kind), inputs)
    except CannotCheck as failure:
        stderr.write(failure.text)
        return None, [failure.error]
    guess = guessed_kind(options.kind, [path], inputs)
    if outcome is None:
        raise UsageError(cannot_tell(guess, [path]))
    if guess is not None:  # the keys told the kind: say which, and why
        stderr.write(f"{PROG}: {chosen_note(guess, [path], inputs)}\n")
    if not outcome.valid:
        report.write_text(outcome, path, stderr)
        return None, [report.issue_dict(issue) for issue in outcome.errors]
    return outcome, []


def differences(a: Outcome, b: Outcome) -> list[tuple[tuple[str, ...], Any, Any]]:
    """(path, value in a, value in b) of every setting that differs; ABSENT where a side does
    not have it. Tables are compared key by key; anything else (arrays too) as one value."""
    rows: list[tuple[tuple[str, ...], Any, Any]] = []

    def walk(x: Any, y: Any, path: tuple[str, ...]) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for key in [*x, *(k for k in y if k not in x)]:
                walk(x.get(key, ABSENT), y.get(key, ABSENT), (*path, key))
        elif x != y or type(x) is not type(y):
            rows.append((path, x, y))

    walk(_dump(a), _dump(b), ())
    return rows


def _dump(outcome: Outcome) -> dict[str, Any]:
    return outcome.config.model_dump(mode="json")  # type: ignore[union-attr]


def _origin(outcome: Outcome, path: tuple[str, ...], value: Any) -> str:
    return "not in this config" if value is ABSENT else origin(outcome, path, value)


def _shown(value: Any) -> str:
    return "(absent)" if value is ABSENT else toml_value(value)


def _write_text(a: Outcome, b: Outcome, options, rows, out: TextIO) -> None:
    out.write(f"--- {options.a} ({a.kind})\n+++ {options.b} ({b.kind})\n")
    for path, x, y in rows:
        left, right = _shown(x), _shown(y)
        width = max(len(left), len(right))
        out.write(f"{'.'.join(path)}\n")
        out.write(f"  - {left:<{width}}  # {_origin(a, path, x)}\n")
        out.write(f"  + {right:<{width}}  # {_origin(b, path, y)}\n")
    count = len(rows)
    verdict = f"{count} setting{'s' * (count != 1)} differ" if count else "the same config"
    out.write(f"{options.a}, {options.b}: {verdict}\n")


def _json(a: Outcome, b: Outcome, options, rows) -> dict[str, Any]:
    def side(outcome: Outcome, value: Any, path) -> dict[str, Any] | None:
        if value is ABSENT:
            return None
        return {"value": value, "origin": origin(outcome, path, value)}

    return {
        "same": not rows,
        "a": {"file": options.a, "kind": a.kind},
        "b": {"file": options.b, "kind": b.kind},
        "differences": [
            {"path": ".".join(path), "a": side(a, x, path), "b": side(b, y, path)}
            for path, x, y in rows
        ],
    }
