"""The shared front of the training entrypoints: same grammar, --help, --dry-run, then train."""

from __future__ import annotations

import io
import json

from helpers.support import ROOT

from trainspec.cli.entrypoint import run_entrypoint

TINY_SFT = str(ROOT / "configs" / "sft" / "tiny.toml")


def launch(*argv: str):
    calls = []
    out, err = io.StringIO(), io.StringIO()
    code = run_entrypoint("sft", "sft", list(argv), out, err, calls.append)
    return code, calls, out.getvalue(), err.getvalue()


def test_train_receives_the_resolved_config():
    code, calls, _, err = launch(TINY_SFT, "--max-steps", "7", "--optim.lr", "3e-4")
    assert code == 0, err
    [config] = calls
    assert (config.max_steps, config.optim.lr, config.optim.weight_decay) == (7, 3e-4, 0.01)


def test_dry_run_prints_json_and_does_not_train():
    code, calls, out, _ = launch(TINY_SFT, "--dry-run")
    assert code == 0 and calls == []
    assert json.loads(out)["data"]["type"] == "fake"
    code, calls, out, err = launch(TINY_SFT, "--dry-run-typo")  # a mistyped option: usage
    assert code == 2 and calls == []
    assert "unknown option --dry-run-typo; did you mean --dry-run?" in err


def test_help_is_generated_from_the_schema():
    code, calls, out, _ = launch("--help")
    assert code == 0 and calls == []
    assert "--dry-run" in out
    assert "--data.loss_mask.assistant, --no-data.loss_mask.assistant" in out
    assert "Train on assistant messages." in out and "(default: true)" in out


def test_invalid_config_and_bad_files_do_not_train(tmp_path):
    code, calls, _, err = launch(TINY_SFT, "--max-steps", "0")
    assert code == 1 and calls == [] and "--max-steps: error: max_steps should be at least 1" in err
    code, calls, _, err = launch(str(tmp_path / "missing.toml"))
    assert code == 2 and calls == [] and "missing.toml" in err
