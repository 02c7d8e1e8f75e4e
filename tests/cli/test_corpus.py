"""validate-config on a committed corpus of bad inputs (corpus/cases.toml).

Each case runs the CLI in-process with --format json in a temporary directory that holds its
input files, and checks the exit code, then either every error (path, position or flag,
suggestion) or, for usage and I/O errors, the message on stderr.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cli_support import CORPUS, Result, assert_located, assert_no_crash, run_cli

MANIFEST = CORPUS / "cases.toml"
CASES: list[dict[str, Any]] = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["case"]
CLASSES = {
    "toml-syntax",
    "non-utf8",
    "empty-file",
    "directory",
    "missing-file",
    "huge-number",
    "non-finite",
    "deep-nesting",
    "wrong-type",
    "unknown-key",
    "unknown-union-type",
    "missing-union-type",
    "other-variant-key",
    "rule",
    "override",
    "kind-unknown",
    "multi-file",
    "cross-kind",
}
CASE_KEYS = {"name", "class", "note", "files", "args", "exit", "errors", "stderr"}
CASE_KEYS |= {"generate", "directories", "missing"}
ERROR_KEYS = {"path", "file", "line", "column", "flag", "suggestion", "message"}


def _generated(case: dict[str, Any]) -> set[str]:
    return {g["name"] for g in case.get("generate", [])}


def _prepare(case: dict[str, Any], where: Path) -> None:
    """Copy the case's committed inputs to `where` and create its generated ones."""
    special = _generated(case) | set(case.get("directories", [])) | set(case.get("missing", []))
    for name in case["files"]:
        if name not in special:
            shutil.copyfile(CORPUS / name, where / name)
    for spec in case.get("generate", []):
        data = bytes.fromhex(spec["hex"]) if "hex" in spec else spec["text"].encode("utf-8")
        (where / spec["name"]).write_bytes(data)
    for name in case.get("directories", []):
        (where / name).mkdir()
    for name in case.get("missing", []):
        assert not (where / name).exists()


def _matches(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    for key in ("path", "file", "line", "column", "flag"):
        if key in expected and actual.get(key) != expected[key]:
            return False
    if "suggestion" in expected and expected["suggestion"] not in (actual.get("suggestion") or ""):
        return False
    return "message" not in expected or expected["message"] in actual["message"]


def _check_errors(case: dict[str, Any], result: Result, where: Path) -> None:
    report = result.report()
    assert report["valid"] is False and report["config"] is None, report
    errors = report["errors"]
    assert errors, "exit 1 without errors"
    expected = [dict(e) for e in case["errors"]]
    files = case["files"]
    for entry in expected:
        if "file" not in entry and "flag" not in entry and len(files) == 1:
            entry["file"] = files[0]
    assert Counter(e["path"] for e in errors) == Counter(e["path"] for e in expected), (
        "error paths differ:\n" + "\n".join(f"  {e}" for e in errors)
    )
    unmatched = list(errors)
    for entry in expected:
        found = next((actual for actual in unmatched if _matches(entry, actual)), None)
        candidates = [actual for actual in errors if actual["path"] == entry["path"]]
        assert found is not None, f"no error matches {entry}; reported: {candidates}"
        unmatched.remove(found)
    assert_located(errors + report["warnings"], files, where)


def _check_stderr(case: dict[str, Any], result: Result) -> None:
    spec = case.get("stderr", {})
    report = result.report()  # --format json: the failure is a JSON report on stdout too
    assert report["valid"] is False and report["config"] is None and report["errors"], report
    assert result.stderr.strip(), "exit 2 with nothing on stderr"
    file = spec.get("file", case["files"][0] if case["files"] else "")
    if file:
        assert file in result.stderr, f"stderr does not name {file}:\n{result.stderr}"
    if "line" in spec:
        where = f"{file}:{spec['line']}:{spec['column']}:"
        assert where in result.stderr, f"stderr does not say {where}:\n{result.stderr}"
    for text in spec.get("contains", []):
        assert text in result.stderr, f"stderr lacks {text!r}:\n{result.stderr}"
    if "regex" in spec:
        assert re.search(spec["regex"], result.stderr), f"{spec['regex']!r}:\n{result.stderr}"


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_case(case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _prepare(case, tmp_path)
    monkeypatch.chdir(tmp_path)
    result = run_cli(*case["files"], *case["args"], "--format", "json")
    assert_no_crash(result)
    assert result.code == case["exit"], (
        f"exit {result.code}, expected {case['exit']}\nstdout:\n{result.stdout}\n"
        f"stderr:\n{result.stderr}"
    )
    if case["exit"] == 1:
        _check_errors(case, result, tmp_path)
    else:
        _check_stderr(case, result)
    text = run_cli(*case["files"], *case["args"])  # the text report agrees with the JSON one
    assert_no_crash(text)
    assert text.code == result.code
    if case["exit"] == 1:
        for error in result.report()["errors"]:
            where = error.get("flag") or f"{error['file']}:{error['line']}:{error['column']}"
            assert f"{where}: error: {error['path']}" in text.stdout, (where, text.stdout)


def test_unreadable_file() -> None:
    # Root (as here and in CI) reads files whatever their mode, but not /proc/self/mem at
    # offset 0: a file that exists and cannot be read.
    result = run_cli("/proc/self/mem", "--kind", "rl")
    assert_no_crash(result)
    assert result.code == 2
    assert result.stderr.startswith("/proc/self/mem: input/output error")


def test_manifest_is_well_formed() -> None:
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    used: set[str] = set()
    for case in CASES:
        assert set(case) <= CASE_KEYS, (case["name"], set(case) - CASE_KEYS)
        assert case["class"] in CLASSES, case["name"]
        assert case["exit"] in (1, 2), case["name"]
        assert ("errors" in case) == (case["exit"] == 1), case["name"]
        assert case["files"] or "--kind" in case["args"], case["name"]
        special = _generated(case) | set(case.get("directories", []))
        special |= set(case.get("missing", []))
        for name in case["files"]:
            assert name in special or (CORPUS / name).is_file(), (case["name"], name)
            if name not in special:
                used.add(name)
        for name in case.get("missing", []):
            assert not (CORPUS / name).exists(), (case["name"], name)
        for error in case.get("errors", []):
            assert set(error) <= ERROR_KEYS, (case["name"], error)
            has_position = "line" in error and "column" in error
            assert has_position != ("flag" in error), (case["name"], error)
    inputs = {path.name for path in CORPUS.glob("*.toml")} - {MANIFEST.name}
    assert inputs - used == set(), "corpus files that no case uses"


def test_corpus_is_large_and_covers_every_class() -> None:
    assert len(CASES) >= 70
    assert {case["class"] for case in CASES} == CLASSES
    counts = Counter(case["class"] for case in CASES)
    assert all(count >= 1 for count in counts.values()), counts


def test_every_expected_error_states_its_message():
    """The corpus pins what users read, not only where: each expected error of an invalid
    config names (a part of) its message."""
    bare = [
        f"{case['name']}: {error['path']}"
        for case in CASES
        for error in case.get("errors", [])
        if not error.get("message")
    ]
    assert bare == []
