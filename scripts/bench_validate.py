"""Benchmark validate-config: whole process and in-process, side by side in one run.

    python scripts/bench_validate.py [--runs 21] [--loops 2000]

Whole process: `validate-config FILE` on a typical RL and SFT config, against
`python -c "import pydantic"` measured the same way (the ratio is what to compare across
machines). In process: microseconds per config for each stage of the check.
Targets (2-core machine): whole process <= 110 ms; full two-stage check <= 50 us per config.
"""

from __future__ import annotations

import argparse
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
TARGET_PROCESS_MS = 110
TARGET_CHECK_US = 50


def wall_ms(command: list[str], runs: int) -> float:
    """Median wall time of `command` in milliseconds (after one warm-up run)."""
    subprocess.run(command, check=False, capture_output=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(command, check=False, capture_output=True)
        times.append((time.perf_counter() - start) * 1e3)
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout.decode()}")
    return statistics.median(times)


def per_call_us(function, loops: int) -> float:
    function()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(loops):
            function()
        best = min(best, (time.perf_counter() - start) / loops * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="process launches per command")
    parser.add_argument("--loops", type=int, default=2000, help="in-process calls per sample")
    args = parser.parse_args()

    cli = str(Path(sys.executable).with_name("validate-config"))
    print(f"whole process (median of {args.runs} runs)")
    baseline = wall_ms([sys.executable, "-c", "import pydantic"], args.runs)
    print(f"  python -c 'import pydantic'      {baseline:7.1f} ms   1.00x")
    floor = wall_ms([sys.executable, "-c", "from pydantic import BaseModel"], args.runs)
    print(
        f"  ... 'from pydantic import BaseModel' {floor:7.1f} ms   {floor / baseline:4.2f}x  "
        "(the floor of any pydantic model)"
    )
    for kind, path in CONFIGS.items():
        ms = wall_ms([cli, str(path)], args.runs)
        verdict = "ok" if ms <= TARGET_PROCESS_MS else f"over the {TARGET_PROCESS_MS} ms target"
        print(
            f"  validate-config {kind:<3} ({path.name}) {ms:7.1f} ms   "
            f"{ms / baseline:4.2f}x  {verdict}"
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
