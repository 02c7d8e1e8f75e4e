"""The schema through the linters editors run: tombi and taplo accept every example config and
reject a broken one on the right lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").rglob("*.toml"))
BAD = "tests/editor/fixtures/bad-rl.toml"
BAD_LINES = {3, 6, 7, 8, 12}
ENV = {**os.environ, "TOMBI_OFFLINE": "true", "NO_COLOR": "1"}


def tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)


def test_tombi_lint_accepts_every_example_config():
    result = run(tool("tombi"), "lint", *CONFIGS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(CONFIGS)} files linted successfully" in result.stdout + result.stderr


def test_tombi_lint_rejects_the_broken_fixture_on_its_lines():
    result = run(tool("tombi"), "lint", BAD)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    lines = {int(m) for m in re.findall(rf"{re.escape(BAD)}:(\d+):\d+", output)}
    assert lines == BAD_LINES, output


def test_taplo_lint_accepts_every_example_config():
    result = run(tool("taplo"), "lint", *CONFIGS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_taplo_lint_rejects_the_broken_fixture_on_its_lines():
    result = run(tool("taplo"), "lint", "--colors", "never", BAD)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    lines = {int(m) for m in re.findall(r"bad-rl\.toml:(\d+):\d+", output)}
    assert {3, 6, 7} <= lines, output
    assert "'bogus' was unexpected" in output
    assert '{"type":"sgd","betas1":0.9}' in output  # the SGD table with the AdamW key


NOT_BUILT = "the LSP is not part of this build"


def test_taplo_language_server():
    """taplo is the engine of VS Code's Even Better TOML. Its PyPI wheel (and the npm CLI) are
    built without the language server, so `taplo lsp stdio` cannot run here; the linter above
    exercises the same schema through taplo."""
    init = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}'
    message = f"Content-Length: {len(init)}\r\n\r\n{init}"
    result = subprocess.run(
        [tool("taplo"), "lsp", "stdio"],
        input=message,
        capture_output=True,
        text=True,
        timeout=30,
    )
    silent_failure = result.returncode != 0 and not result.stdout.strip()
    if silent_failure and NOT_BUILT.encode() in Path(tool("taplo")).read_bytes():
        # The binary exits 1 at once; the reason is the message it carries for this case.
        pytest.skip(f"taplo says {NOT_BUILT!r}: PyPI taplo 0.9.3 ships without the lsp feature")
    assert '"capabilities"' in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("fixture", "lines"),
    [
        ("tests/editor/fixtures/bad.orchestrator.toml", {4, 6}),
        ("tests/editor/fixtures/bad.rl-run.toml", {4, 6}),
    ],
)
@pytest.mark.parametrize("linter", ["tombi", "taplo"])
def test_file_name_associations_reach_the_orchestrator_and_rl_schemas(linter, fixture, lines):
    argv = (
        [tool(linter), "lint", fixture]
        if linter == "tombi"
        else [tool(linter), "lint", "--colors", "never", fixture]
    )
    result = run(*argv)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    found = {int(m) for m in re.findall(rf"{re.escape(Path(fixture).name)}:(\d+):\d+", output)}
    assert lines <= found, output
