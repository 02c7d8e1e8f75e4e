"""Benchmark validate-config: whole process and in-process, side by side in one run.

    python scripts/bench_validate.py [--runs 21] [--loops 2000] [--reference KIND=COMMAND ...]

Whole process: `validate-config FILE` on a typical RL and SFT config, against the floor of
any pydantic program, `python -c "from pydantic import BaseModel"`, measured the same way and
interleaved (the ratio is what to compare across machines); and `validate-config --each` over
every config in configs/ in one process. In process: microseconds per config for each stage.
Targets: whole process <= 1.5x the floor; in process, the full check <= 50 us per config.

--reference rl="COMMAND" (and sft=...) adds a command of your own to the same turns, such as the
reference trainer validating its config where it is installed, and prints `validate-config
KIND`'s time as a ratio of it (target: <= 0.7x). The command is split like a shell line and run
without a shell.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {
    "rl": ROOT / "configs" / "rl" / "qwen3-30b-a3b-math.toml",
    "sft": ROOT / "configs" / "sft" / "qwen3-0.6b-reverse-text.toml",
}
TARGET_RATIO = 1.5
TARGET_CHECK_US = 50
TARGET_VERSUS_REFERENCE = 0.7


def interleaved_ms(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median wall time of each command in milliseconds, run in turns so that the machine's
    load falls on all of them alike (after one warm-up round)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, command in commands.items():
            start = time.perf_counter()
            result = subprocess.run(command, check=False, capture_output=True)
            if round_:
                times[name].append((time.perf_counter() - start) * 1e3)
            if result.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout.decode()}")
    return {name: statistics.median(values) for name, values in times.items()}


def per_call_us(function, loops: int) -> float:
    function()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(loops):
            function()
        best = min(best, (time.perf_counter() - start) / loops * 1e6)
    return best


def reference(text: str) -> tuple[str, list[str]]:
    """`--reference KIND=COMMAND`: the kind and the command, split like a shell line."""
    kind, _, command = text.partition("=")
    if kind not in CONFIGS or not command.strip():
        raise argparse.ArgumentTypeError(
            f"{text!r}: write KIND=COMMAND with KIND one of {', '.join(CONFIGS)}"
        )
    return kind, shlex.split(command)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="process launches per command")
    parser.add_argument("--loops", type=int, default=2000, help="in-process calls per sample")
    parser.add_argument(
        "--reference",
        type=reference,
        action="append",
        default=[],
        metavar="KIND=COMMAND",
        help="time COMMAND in the same turns and compare validate-config KIND with it",
    )
    args = parser.parse_args()
    references = dict(args.reference)

    cli = str(Path(sys.executable).with_name("validate-config"))
    commands = {"floor": [sys.executable, "-c", "from pydantic import BaseModel"]}
    commands |= {kind: [cli, str(path)] for kind, path in CONFIGS.items()}
    configs = sorted(str(p) for p in (ROOT / "configs").rglob("*.toml"))
    commands["each"] = [cli, "--each", *configs]
    commands |= {f"reference {kind}": command for kind, command in references.items()}
    times = interleaved_ms(commands, args.runs)
    floor = times["floor"]
    print(f"whole process (median of {args.runs} interleaved runs)")
    print(f"  python -c 'from pydantic import BaseModel' {floor:7.1f} ms   1.00x  (the floor)")
    for kind, path in CONFIGS.items():
        ratio = times[kind] / floor
        verdict = "ok" if ratio <= TARGET_RATIO else f"over the {TARGET_RATIO}x target"
        print(
            f"  validate-config {kind:<3} ({path.name}) {times[kind]:7.1f} ms   "
            f"{ratio:4.2f}x  {verdict}"
        )
    each = times["each"]
    print(
        f"  validate-config --each over configs/ ({len(configs)} files, one process) "
        f"{each:7.1f} ms   {each / floor:4.2f}x  ({each / len(configs):.1f} ms per file)"
    )
    for kind, command in references.items():
        mine, theirs = times[kind], times[f"reference {kind}"]
        ratio = mine / theirs
        verdict = (
            "ok"
            if ratio <= TARGET_VERSUS_REFERENCE
            else f"over the {TARGET_VERSUS_REFERENCE}x target"
        )
        print(
            f"  reference {kind:<3} ({shlex.join(command)}) {theirs:7.1f} ms   "
            f"{theirs / floor:4.2f}x; validate-config {kind} is {ratio:4.2f}x its time  {verdict}"
        )

    from trainspec.config import schema_check
    from trainspec.config.kinds import config_class
    from trainspec.config.loader import check_document
    from trainspec.config.sources import read_file
    from trainspec.validators.pipeline import run_rules

    print(f"\nin process (best of 5 x {args.loops} calls), microseconds per config")
    print(f"  {'kind':<5}{'stage 1':>9}{'classes':>9}{'rules':>9}{'total':>9}")
    for kind, path in CONFIGS.items():
        data = read_file(path).data
        cls = config_class(kind)
        stage1 = per_call_us(lambda d=data, k=kind: schema_check.check(k, d), args.loops)
        classes = per_call_us(lambda d=data, c=cls: c.model_validate(d), args.loops)
        with_rules = per_call_us(
            lambda d=data, c=cls, k=kind: run_rules(c.model_validate(d), k), args.loops
        )
        rules = with_rules - classes
        total = per_call_us(lambda d=data, k=kind: check_document(k, d), args.loops)
        verdict = "ok" if total <= TARGET_CHECK_US else f"over the {TARGET_CHECK_US} us target"
        print(f"  {kind:<5}{stage1:9.1f}{classes:9.1f}{rules:9.1f}{total:9.1f}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
