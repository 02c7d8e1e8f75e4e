"""The parity proof: schema/, the generated classes and the handwritten rules agree.

    python -m tools.parity                   # make parity: the full proof (a few minutes)
    python -m tools.parity --profile ci      # the profile the test suite runs (under a minute)

Run from the repository root (`tools` is a package of developer tooling there, not shipped).

Checks, each counting its cases (every case is a comparison that can come out different):
  declared      each key's types, allowed values, bounds, pattern, default, required-ness and
                extensions (auto table, switch) are the same in schema/ and in the classes' own
                JSON Schema (one case per key and kind)
  documents     documents drawn from the schema and mutations of them (kinds listed below the
                table): stage 1 and the classes give the same verdict; accepted documents dump
                back with the defaults filled in, and no rule raises on them. Every table of
                the schema (variants and the tables of lists included) is in an accepted
                document: a profile draws at random, then aims at each table still missing
  consumers     values the config accepts are usable by the code that reads them (every
                resume.dir accepted names a step the checkpoint code can read)
  auto          each "auto" setting resolves per kind to the value schema/ states
  differential  RL and SFT resolve shared fields the same, with the same warnings and errors
                (configs/ x override cases, and documents drawn from the schema)
  structure     RL and SFT share their base fields and shared rules (first, in order), and
                schema/ states no cross-field rule (rules live in src/trainspec/validators/)
  rules         tests/validators/rule_cases.toml holds on the pipeline, and every rule of every
                kind fires in at least one case
Ends with one line, `N cases, M accepted, D differences`, and exits 1 on any difference.
--schema and --generated point every check at other copies of schema/ and generated/; run with
PYTHONPATH at a copy of src/ (the repository root stays importable, for `tools`) to prove a drift
in the code (tests/test_parity.py does all three).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {
    "full": {"examples": 5000, "mutated": 80000, "drawn": 2000},
    "ci": {"examples": 40, "mutated": 700, "drawn": 20},
}


@dataclass
class Tally:
    name: str
    cases: int = 0
    accepted: int = 0
    problems: list[str] = field(default_factory=list)

    def case(self, accepted: bool) -> None:
        self.cases += 1
        self.accepted += accepted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.parity", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--profile", choices=PROFILES, default="full")
    parser.add_argument("--schema", type=Path, default=ROOT / "schema")
    parser.add_argument("--generated", type=Path, default=None)
    parser.add_argument(
        "--only", action="append", default=[], metavar="CHECK", help="run only this check"
    )
    parser.add_argument(
        "--no-aim",
        dest="aim",
        action="store_false",
        help="draw documents at random only, not aimed at the tables the random ones missed",
    )
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    start = time.perf_counter()

    from .subject import load_subject, scratch_dir

    with scratch_dir() as scratch:
        subject = load_subject(args.schema, args.generated, Path(scratch))
        return _run(subject, {**profile, "aim": args.aim}, args.profile, start, args.only)


def _run(subject, profile: dict, name: str, start: float, only: list[str]) -> int:
    from .checks import (
        check_auto,
        check_consumers,
        check_declared,
        check_rules,
        check_structure,
    )
    from .differential import check_differential
    from .documents import check_documents
    from .facts import facts

    kinds_seen: Counter = Counter()
    tables_seen: dict[str, tuple[int, int]] = {}
    checks: list[tuple[Tally, Callable[[Tally], None]]] = [
        (Tally("declared"), lambda t: check_declared(subject, t)),
        (
            Tally("documents"),
            lambda t: check_documents(
                subject,
                facts,
                profile["examples"],
                profile["mutated"],
                t,
                kinds_seen,
                tables_seen,
                profile["aim"],
            ),
        ),
        (Tally("consumers"), lambda t: check_consumers(subject, t)),
        (Tally("auto"), lambda t: check_auto(subject, t)),
        (Tally("differential"), lambda t: check_differential(subject, profile["drawn"], t)),
        (Tally("structure"), lambda t: check_structure(subject, t)),
        (Tally("rules"), check_rules),
    ]
    unknown = set(only) - {tally.name for tally, _ in checks}
    if unknown:
        raise SystemExit(f"unknown check(s): {', '.join(sorted(unknown))}")
    checks = [(tally, run) for tally, run in checks if not only or tally.name in only]
    for tally, run in checks:
        run(tally)
        print(
            f"{tally.name:<13} {tally.cases:6d} cases {tally.accepted:6d} accepted "
            f"{len(tally.problems):4d} differences"
        )
        for problem in tally.problems[:20]:
            print(f"    {problem}")
    mutated = {kind: n for kind, n in kinds_seen.items() if kind not in ("drawn", "aimed")}
    drawn = kinds_seen["drawn"] + kinds_seen["aimed"]
    print(
        f"documents: {drawn} drawn from the schema ({kinds_seen['aimed']} aimed at a table the "
        f"others missed), {sum(mutated.values())} mutated in {len(mutated)} kinds: "
        + ", ".join(f"{kind} {n}" for kind, n in sorted(mutated.items()))
    )
    print(
        "tables drawn: "
        + ", ".join(f"{kind} {n} of {of}" for kind, (n, of) in sorted(tables_seen.items()))
    )
    cases = sum(t.cases for t, _ in checks)
    accepted = sum(t.accepted for t, _ in checks)
    problems = sum(len(t.problems) for t, _ in checks)
    print(f"({name} profile, {time.perf_counter() - start:.0f} s)")
    print(f"{cases} cases, {accepted} accepted, {problems} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
