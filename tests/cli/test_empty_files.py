"""An empty file is a valid TOML document with no settings: every default, like a file of
comments only (and as the reference reads it)."""

from __future__ import annotations

import json

import pytest
from cli_support import assert_no_crash, run_cli

from trainspec.config import dump_json, load, validate

TEXTS = {"empty": "", "whitespace": "  \n\t\n\r\n   \n", "comments": "# nothing set yet\n"}


@pytest.mark.parametrize("kind", ["rl", "sft", "orchestrator"])
@pytest.mark.parametrize("text", TEXTS.values(), ids=TEXTS.keys())
def test_a_file_without_settings_is_valid_and_all_defaults(tmp_path, kind, text):
    path = tmp_path / "nothing.toml"
    path.write_text(text)
    result = run_cli(str(path), "--kind", kind, "--format", "json")
    assert_no_crash(result)
    assert result.code == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["valid"] and report["errors"] == []
    assert load(kind, [path]).config == validate(kind, {}).config
    assert json.loads(dump_json(load(kind, [path]).config)) == report["config"]


def test_an_empty_file_still_needs_a_kind(tmp_path):
    path = tmp_path / "nothing.toml"
    path.write_text("")
    result = run_cli(str(path))
    assert result.code == 2
    assert "nothing.toml" in result.stderr and "--kind" in result.stderr
