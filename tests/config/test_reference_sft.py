"""The SFT configs with online evals rebuilt from the reference (tests/config/reference/sft/,
see its README) validate as written, with no schema line: [eval] with its sampling, concurrency
and [[eval.source]] tables of open env tables, a bare or sized [inference], weight_broadcast and
the deployment's inference GPUs, resolved as the reference's rules resolve them."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from trainspec.config import load, validate
from trainspec.config_model import written

HERE = Path(__file__).parent / "reference" / "sft"
# the files with online evals (the others: test_reference_kinds.py)
FILES = [p for p in sorted(HERE.glob("*.toml")) if "eval" in tomllib.loads(p.read_text())]
BIN = Path(sys.executable).parent


def test_the_corpus_is_there():
    assert [p.name for p in FILES] == [
        "ci-reverse-text-sft-evals.toml",
        "configs-reverse-text.toml",
        "examples-reverse-text.toml",
    ]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_reference_sft_toml_with_evals_validates_as_written(path):
    document = tomllib.loads(path.read_text())
    config = load("sft", [path]).config
    sources = document["eval"]["source"]
    # the env tables reach verifiers as written
    assert [written(s.env) for s in config.eval.source] == [s["env"] for s in sources]
    assert config.inference.vllm.model == config.model.name  # the server loads the trained model
    assert config.weight_broadcast.type == "filesystem"
    assert config.eval.client.base_url == "http://localhost:8000/v1"  # [inference]'s server
    assert config.eval.interval == document["eval"]["interval"]


def test_validate_config_takes_them_as_sft_configs():
    result = subprocess.run(
        [str(BIN / "validate-config"), "--kind", "sft", "--each", *map(str, FILES)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("valid sft config (0 errors, 0 warnings)") == len(FILES)


def test_their_evals_do_not_rename_the_run():
    """What is evaluated is not what is trained: the run name is that of the config without
    [eval] and [inference] (validators/sft.py: resolve_run_name)."""
    path = HERE / "examples-reverse-text.toml"
    document = tomllib.loads(path.read_text())
    plain = {k: v for k, v in document.items() if k not in ("eval", "inference")}
    assert load("sft", [path]).config.run.name == validate("sft", plain).config.run.name
