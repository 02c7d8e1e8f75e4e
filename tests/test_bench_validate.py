"""scripts/bench_validate.py's comparison with a command of the user's (`--reference`): timed in
the same turns, its line printed with validate-config's ratio to it. No time is asserted."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from helpers.support import ROOT

SCRIPT = ROOT / "scripts" / "bench_validate.py"


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--runs", "1", "--loops", "1", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


def test_a_reference_command_is_timed_beside_its_kind():
    command = shlex.join([sys.executable, "-c", "import json"])
    result = bench("--reference", f"sft={command}")
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if "reference sft" in line]
    ratio = re.search(
        r"validate-config sft is (\d+\.\d\d)x its time  (ok|over the 0.7x target)", line
    )
    assert ratio, line
    assert command in line
    assert "reference rl" not in result.stdout  # only the kinds given


def test_a_failing_reference_command_stops_the_benchmark_with_its_output():
    command = shlex.join([sys.executable, "-c", "print('no such config'); raise SystemExit(3)"])
    result = bench("--reference", f"rl={command}")
    assert result.returncode == 1
    assert "no such config" in result.stderr


def test_a_reference_without_a_kind_is_refused():
    result = bench("--reference", "python -c pass")
    assert result.returncode == 2
    assert "write KIND=COMMAND with KIND one of rl, sft" in result.stderr
