"""Every reference-shaped example file (tests/config/reference/: rl/, sft/, rl-trainer/,
inference/, eval/, see their READMEs) validates as written with `validate-config FILE` and no
--kind, as its command takes it: none has a `#:schema` line, so the keys tell the kind, and
validate-config says which kind and which key decided. The reference's standalone `inference`
and evals files are among them (the `inference` and `eval` commands)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

from trainspec.cli.validate_config import run

HERE = Path(__file__).parent / "reference"
KINDS = {  # directory -> kind
    "rl": "rl_run",
    "sft": "sft",
    "rl-trainer": "rl",
    "inference": "inference",
    "eval": "eval",
}
COMMANDS = {"rl_run": "rl", "sft": "sft", "rl": "rl-trainer", "inference": "inference",
            "eval": "evaluate"}  # fmt: skip
FILES = sorted(path for folder in KINDS for path in (HERE / folder).glob("*.toml"))
H200 = HERE / "sft" / "advanced-qwen3-30b-a3b-h200"  # a base file and two layered on it
BIN = Path(sys.executable).parent


def call(*argv: str) -> tuple[int, str, str]:
    import io

    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_corpus_is_there():
    names = {folder: sorted(p.name for p in (HERE / folder).glob("*.toml")) for folder in KINDS}
    assert len(names["rl"]) == 25
    assert names["sft"] == [
        "advanced-qwen3-30b-a3b-h200-base.toml",
        "advanced-qwen3-30b-a3b-h200-fake.toml",
        "advanced-qwen3-30b-a3b-h200-math-10k.toml",
        "ci-reverse-text-sft-evals.toml",
        "ci-reverse-text-sft-full-offload-resume.toml",
        "ci-reverse-text-sft-lora-resume.toml",
        "ci-reverse-text-sft-lora-start.toml",
        "ci-reverse-text-sft-resume.toml",
        "ci-reverse-text-sft-start.toml",
        "configs-reverse-text.toml",
        "configs-wordle.toml",
        "debug-fake.toml",
        "examples-reverse-text.toml",
        "examples-wordle.toml",
    ]
    assert names["rl-trainer"] == ["debug-fake.toml"]
    assert names["inference"] == [
        "advanced-glm-5.2-infer-llmd.toml",
        "advanced-glm-5.2-infer.toml",
    ]
    assert names["eval"] == ["examples-evals-swe.toml"]
    assert len(FILES) == 43
    for path in FILES:
        assert not path.read_text().startswith("#:schema"), path  # as the reference writes them


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_a_reference_file_validates_as_written_without_a_kind(path):
    kind = KINDS[path.parent.name]
    code, out, err = call(str(path))
    assert code == 0, out + err
    assert re.fullmatch(
        rf"{re.escape(str(path))}: valid {kind} config \(0 errors, \d+ warnings?\)",
        out.splitlines()[-1],
    )
    note = err.splitlines()[0]
    assert note.startswith(
        f"validate-config: no #:schema line in {path}: checking it as an {kind} config (what "
        f"`{COMMANDS[kind]}` reads), the only kind that has "
    )
    assert note.endswith("; pass --kind to choose another kind")


def test_the_key_that_decided_is_named():
    _, _, err = call(str(HERE / "rl-trainer" / "debug-fake.toml"))
    assert err.endswith("the only kind that has data.fake; pass --kind to choose another kind\n")
    _, _, err = call(str(HERE / "sft" / "debug-fake.toml"))
    assert err.endswith("the only kind that has data.type; pass --kind to choose another kind\n")
    _, _, err = call(str(HERE / "rl" / "basic-reverse-text.toml"))
    assert "as an rl_run config (what `rl` reads), the only kind that has trainer;" in err
    _, _, err = call(str(HERE / "eval" / "examples-evals-swe.toml"))
    assert "as an eval config (what `evaluate` reads), the only kind that has model;" in err
    _, _, err = call(str(HERE / "inference" / "advanced-glm-5.2-infer.toml"))
    assert "as an inference config (what `inference` reads), the only kind that has vllm;" in err


@pytest.mark.parametrize("layer", ["fake", "math-10k"])
def test_a_composed_run_validates_as_its_command_takes_it(layer):
    """`sft @ base.toml @ fake.toml`: the files merge left to right, and are told together."""
    base, top = f"{H200}-base.toml", f"{H200}-{layer}.toml"
    code, out, err = call(base, top)
    assert (code, out) == (0, f"{base}, {top}: valid sft config (0 errors, 0 warnings)\n"), err
    assert err == (
        f"validate-config: no #:schema line in {base}: checking {base}, {top} as an sft config "
        "(what `sft` reads), the only kind that has data.seq_len; pass --kind to choose another "
        "kind\n"
    )


def test_each_file_on_its_own_through_the_console_script():
    """The pre-commit mode over the whole corpus, in one process: every file checked."""
    result = subprocess.run(
        [str(BIN / "validate-config"), "--each", *map(str, FILES)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for folder, kind in KINDS.items():
        count = len(list((HERE / folder).glob("*.toml")))
        assert (
            len(re.findall(rf"valid {kind} config \(0 errors, \d+ warnings?\)", result.stdout))
            == count
        )
    assert result.stderr.count("validate-config: no #:schema line in ") == len(FILES)
