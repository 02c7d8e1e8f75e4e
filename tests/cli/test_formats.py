"""--format json answers every outcome with one JSON object (a file that cannot be read or
parsed, a bad command line, an internal error), --each --format json writes JSON Lines, and
errors come in reading order in every format. Exit codes do not depend on the format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import ROOT, run_cli
from test_corpus import CASES, _prepare

VALIDATE = Path(sys.executable).with_name("validate-config")
REPORT_KEYS = {"valid", "kind", "errors", "warnings", "config"}
ERROR_KEYS = {"file", "line", "column", "path", "message", "category"}
TINY_RL = str(ROOT / "configs" / "rl" / "tiny.toml")


def one_report(stdout: str) -> dict[str, Any]:
    report = json.loads(stdout)  # one object, nothing else on stdout
    assert set(report) == REPORT_KEYS, report.keys()
    for error in report["errors"]:
        assert set(error) >= ERROR_KEYS, error
    return report


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


EXIT_2 = [case for case in CASES if case["exit"] == 2]


@pytest.mark.parametrize("case", EXIT_2, ids=[case["name"] for case in EXIT_2])
def test_every_bad_input_of_the_corpus_gets_a_json_report(case, tmp_path, monkeypatch) -> None:
    """The corpus's usage and I/O errors (exit 2): the same exit code, a JSON report on
    stdout naming the file and position that stderr names."""
    _prepare(case, tmp_path)
    monkeypatch.chdir(tmp_path)
    result = run_cli(*case["files"], *case["args"], "--format", "json")
    assert result.code == 2, result.stdout + result.stderr
    report = one_report(result.stdout)
    assert report["valid"] is False and report["config"] is None and report["warnings"] == []
    [error] = report["errors"]
    assert error["category"] in {"file", "usage"}
    spec = case.get("stderr", {})
    if "line" in spec:
        file = spec.get("file", case["files"][0] if case["files"] else "")
        assert (error["line"], error["column"]) == (spec["line"], spec["column"]), error
        assert error["file"] is not None and error["file"].endswith(file), error
    for text in spec.get("contains", []):
        if "\n" not in text:
            assert text in result.stderr  # the text report is unchanged


def test_toml_syntax_error_in_json(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.toml", "#:schema ../sft_trainer.json\n[model\n")
    result = run_cli(bad, "--format", "json")
    assert result.code == 2
    [error] = one_report(result.stdout)["errors"]
    assert (error["file"], error["line"], error["column"], error["category"]) == (bad, 2, 7, "file")
    assert "is not valid TOML" in error["message"]


def test_usage_errors_in_json() -> None:
    result = run_cli(TINY_RL, "--fromat", "json", "--format", "json")
    assert result.code == 2
    [error] = one_report(result.stdout)["errors"]
    assert error["category"] == "usage"
    assert "unknown option --fromat; did you mean --format?" in error["message"]
    result = run_cli("--format", "json")  # no file, no kind
    assert result.code == 2 and one_report(result.stdout)["errors"][0]["category"] == "usage"
    result = run_cli(TINY_RL, "--kind", "xx", "--format=json")
    assert result.code == 2
    assert "invalid choice" in one_report(result.stdout)["errors"][0]["message"]


def test_internal_errors_in_json(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("trainspec.cli.check.check_sources", broken)
    result = run_cli(TINY_RL, "--format", "json")
    assert result.code == 2
    [error] = one_report(result.stdout)["errors"]
    assert error["category"] == "internal" and "RuntimeError: boom" in error["message"]
    assert "Traceback" not in result.stderr


def test_each_json_is_json_lines_with_every_file(tmp_path: Path) -> None:
    good = TINY_RL
    bad = write(tmp_path, "bad.toml", "#:schema ../rl_trainer.json\nmax_steps = 0\n")
    broken = write(tmp_path, "broken.toml", "#:schema ../rl_trainer.json\n[model\n")
    foreign = write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n')
    missing = str(tmp_path / "missing.toml")
    result = run_cli("--each", good, bad, broken, foreign, missing, "--format", "json")
    assert result.code == 2  # the worst of the files: one could not be read
    lines = result.stdout.splitlines()
    reports = [json.loads(line) for line in lines]
    assert [report["file"] for report in reports] == [good, bad, broken, foreign, missing]
    assert [report["valid"] for report in reports] == [True, False, False, True, False]
    assert reports[1]["errors"][0]["path"] == "max_steps"
    assert reports[2]["errors"][0]["category"] == "file"
    assert reports[3]["skipped"] and reports[3]["kind"] is None
    assert "no such file" in reports[4]["errors"][0]["message"]
    for report in reports:
        assert set(report) >= REPORT_KEYS


def test_each_json_lines_through_the_console_script(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.toml", "#:schema ../rl_trainer.json\nmax_steps = 0\n")
    result = subprocess.run(
        [str(VALIDATE), "--each", TINY_RL, bad, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert [json.loads(line)["valid"] for line in result.stdout.splitlines()] == [True, False]


# ------------------------------------------------------------------ reading order

# The checker finds these out of reading order (it goes table by table through the merged
# document: a.toml:2, a.toml:4, b.toml:2, a.toml:6, b.toml:4), plus two flag errors.
FIRST = '#:schema ../rl_trainer.json\noutput_dir = 3\n[log]\nlevel = 3\n[optim]\nlr = "fast"\n'
SECOND = "[log]\nfile = 1\n[model]\nseq_len = 0\n"


FLAGS = ["--max-steps", "0", "--dist-timeout-seconds", "0"]


def ordered_case(tmp_path: Path) -> tuple[list[str], list[tuple[str, int | None]]]:
    """The argv, and where its errors are in reading order."""
    a, b = write(tmp_path, "a.toml", FIRST), write(tmp_path, "b.toml", SECOND)
    order = [(a, 2), (a, 4), (a, 6), (b, 2), (b, 4)]
    return [a, b, *FLAGS], [*order, ("--max-steps", None), ("--dist-timeout-seconds", None)]


def test_errors_in_reading_order_in_json(tmp_path: Path) -> None:
    argv, expected = ordered_case(tmp_path)
    result = run_cli(*argv, "--format", "json")
    assert result.code == 1
    errors = one_report(result.stdout)["errors"]
    assert [(e.get("flag") or e["file"], e["line"]) for e in errors] == expected


def test_errors_in_reading_order_in_text(tmp_path: Path) -> None:
    argv, expected = ordered_case(tmp_path)
    result = run_cli(*argv)
    assert result.code == 1
    lines = result.stdout.splitlines()
    heads = [line.split(": error: ")[0] for line in lines if ": error: " in line]
    assert [head.rsplit(":", 2)[0] if head[0] != "-" else head for head in heads] == [
        where for where, _ in expected
    ]
    assert [int(head.rsplit(":", 2)[1]) for head in heads if head[0] != "-"] == [
        line for _, line in expected if line
    ]


def test_errors_in_reading_order_in_github(tmp_path: Path) -> None:
    argv, expected = ordered_case(tmp_path)
    result = run_cli(*argv, "--format", "github")
    assert result.code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == len(expected)
    for line, (where, number) in zip(lines, expected, strict=True):
        if number is None:
            assert f"::{where}: " in line, line
        else:
            assert f"file={where.replace(':', '%3A')},line={number}," in line, line
