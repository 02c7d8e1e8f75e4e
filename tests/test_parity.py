"""The parity proof runs in CI (its fast profile) and fails on drift between schema/ and the
generated classes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from support import ROOT

SUMMARY = re.compile(r"^(\d+) cases, (\d+) parse, (\d+) differences$", re.M)


def parity(*args: str) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "scripts/parity.py", "--profile", "ci", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, result.stdout + result.stderr


def test_the_ci_profile_finds_no_difference():
    code, out = parity()
    assert code == 0, out
    cases, parsed, problems = map(int, SUMMARY.search(out).groups())
    assert cases > 1000 and 0 < parsed < cases and problems == 0
    for check in (
        "declared",
        "schema=>class",
        "class=>schema",
        "differential",
        "structure",
        "rules",
    ):
        assert re.search(rf"^{re.escape(check)}\s+\d+ cases", out, re.M), check


def test_a_default_changed_only_in_generated_code_is_caught(tmp_path):
    generated = tmp_path / "generated"
    shutil.copytree(ROOT / "generated", generated, ignore=shutil.ignore_patterns("__pycache__"))
    source = generated / "gc.py"
    source.write_text(source.read_text().replace("= 50", "= 51"))
    code, out = parity("--generated", str(generated))
    assert code == 1
    assert "gc.interval: default is 50 in schema/ but 51 in generated classes" in out
    assert SUMMARY.search(out).group(3) != "0"


def test_a_bound_changed_only_in_the_schema_is_caught(tmp_path):
    schema = tmp_path / "schema"
    shutil.copytree(ROOT / "schema", schema)
    source = schema / "log.json"
    text = source.read_text()
    assert '"exclusiveMinimum": 0' in text
    source.write_text(text.replace('"exclusiveMinimum": 0', '"exclusiveMinimum": 1'))
    code, out = parity("--schema", str(schema))
    assert code == 1
    assert "log.interval: exclusiveMinimum is 1.0 in schema/ but 0.0 in generated classes" in out
