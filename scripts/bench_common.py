"""What the training benchmarks (bench_sft.py, bench_rl.py) share: the children's offline
environment, running one child with its wall time, CPU time and peak memory, the last line of
its log, and the cells and tables of the report."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE_S = 120.0  # after a child's stop_at: how long it may take to stop before it is killed
OFFLINE = {
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "PYTHONUNBUFFERED": "1",
}


def child_env(**extra: str) -> dict[str, str]:
    """This environment, offline (nothing is downloaded), with `extra` on top."""
    return {**os.environ, **OFFLINE, **extra}


def run_child(
    command: list[str], env: dict, log: Path, *, timeout_s: float, stop_at: float | None = None
) -> dict:
    """Run one child in the repository root, its output to `log`. At wall time `stop_at`
    (time.time()) it gets SIGTERM and STOP_GRACE_S to end; without `stop_at` it is killed after
    `timeout_s`. Returns its exit code, wall and CPU seconds (its children included), peak RSS
    in MiB and when it was started (time.time())."""
    launched, started = time.time(), time.perf_counter()
    kill_at = stop_at + STOP_GRACE_S if stop_at is not None else launched + timeout_s
    signalled = False
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.time()
            if stop_at is not None and now >= stop_at and not signalled:
                proc.send_signal(signal.SIGTERM)
                signalled = True
            if now >= kill_at:
                proc.kill()
            time.sleep(0.05)
    return {
        "code": os.waitstatus_to_exitcode(status),
        "wall_s": time.perf_counter() - started,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mib": usage.ru_maxrss / 1024,
        "launched": launched,
    }


def last_line(log: Path) -> str:
    """The last non-empty line a child printed (progress bars' carriage returns split lines)."""
    lines = [
        line.strip()
        for line in log.read_text(errors="replace").replace("\r", "\n").splitlines()
        if line.strip()
    ]
    return lines[-1][:200] if lines else "(no output)"


def ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.3f}x" if value and base else "-"


def verdict(ok: bool | None) -> str:
    """A target's mark: PASS, FAIL, or n/a when it could not be measured."""
    return "n/a " if ok is None else ("PASS" if ok else "FAIL")


def print_table(columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[str] | str]) -> None:
    """A header of (title, format spec such as "<6" or ">8") columns, a rule, then the rows:
    formatted cells, one per column, or a single string (a side that has no figures)."""
    header = " ".join(f"{title:{spec}}" for title, spec in columns)
    print(header)
    print("-" * len(header))
    for row in rows:
        if isinstance(row, str):
            print(row)
            continue
        print(" ".join(f"{cell:{spec}}" for cell, (_, spec) in zip(row, columns, strict=True)))
