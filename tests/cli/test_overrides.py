"""Composition and overrides on the command line, and --explain's provenance for each source."""

from __future__ import annotations

import io
import json

import pytest
from helpers.support import ROOT

from trainspec.cli.validate_config import run

TINY_RL = str(ROOT / "configs" / "rl" / "tiny.toml")


def check(*argv: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([*argv, "--format", "json"], out, err)
    return code, json.loads(out.getvalue()), err.getvalue()


def resolved(*argv: str) -> dict:
    code, report, err = check(*argv)
    assert code == 0, (report["errors"], err)
    return report["config"]


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_files_merge_left_to_right(tmp_path):
    a = write(tmp_path, "a.toml", "max_steps = 10\n[optim]\nlr = 1e-5\nbetas1 = 0.8\n")
    b = write(tmp_path, "b.toml", "max_steps = 20\n[optim]\nlr = 3e-5\n")
    config = resolved(a, b, "--kind", "rl")
    assert (config["max_steps"], config["optim"]["lr"], config["optim"]["betas1"]) == (
        20,
        3e-5,
        0.8,
    )
    assert resolved(b, a, "--kind", "rl")["max_steps"] == 10


def test_arrays_replace(tmp_path):
    a = write(tmp_path, "a.toml", "[log]\nranks_filter = [0, 1, 2]\n")
    b = write(tmp_path, "b.toml", "[log]\nranks_filter = [3]\n")
    assert resolved(a, b, "--kind", "rl")["log"]["ranks_filter"] == [3]
    assert resolved(a, "--kind", "rl", "--log.ranks-filter", "[5, 6]")["log"]["ranks_filter"] == [
        5,
        6,
    ]


@pytest.mark.parametrize(
    "flags, path, value",
    [
        (["--optim.lr", "1e-5"], ("optim", "lr"), 1e-5),
        (["--max-steps", "50"], ("max_steps",), 50),
        (["--max_steps", "50"], ("max_steps",), 50),
        (["--max-steps=7"], ("max_steps",), 7),
        (["--model.name", "org/model-7b"], ("model", "name"), "org/model-7b"),
        (["--output-dir", "123"], ("output_dir",), "123"),  # a string key keeps digits as text
        (["--model.trust-remote-code"], ("model", "trust_remote_code"), True),
        (["--no-model.reshard-after-forward"], ("model", "reshard_after_forward"), False),
        (["--model.reshard-after-forward", "false"], ("model", "reshard_after_forward"), False),
        (["--no-model.compile"], ("model", "compile"), None),
        (["--model.compile", "None"], ("model", "compile"), None),
        (
            ["--model.lora"],
            ("model", "lora"),
            {
                "rank": 16,
                "alpha": 32.0,
                "dropout": 0.0,
                "target_modules": [
                    "q_proj",
                    "k_proj",
                    "v_proj",
                    "o_proj",
                    "gate_proj",
                    "up_proj",
                    "down_proj",
                    "experts",
                    "fc1_latent_proj",
                    "fc2_latent_proj",
                ],
                "modules_to_save": [],
            },
        ),
        (["--model.lora.rank", "8"], ("model", "lora", "rank"), 8),
        (["--optim.max-norm", "null"], ("optim", "max_norm"), None),
        (["--optim.max-norm", "None"], ("optim", "max_norm"), None),
        (["--env-vars", '{"NCCL_DEBUG": "INFO"}'], ("env_vars",), {"NCCL_DEBUG": "INFO"}),
        (["--optim.type", "sgd", "--optim.momentum", "0.5"], ("optim", "momentum"), 0.5),
        (["--env-vars.NCCL_DEBUG", "WARN"], ("env_vars",), {"NCCL_DEBUG": "WARN"}),
        (["--env-vars.OMP_NUM_THREADS", "4"], ("env_vars", "OMP_NUM_THREADS"), "4"),
        (["--no-max-steps"], ("max_steps",), None),
        (
            ["--model.full-offload", "--model.optim-cpu-offload", "false"],
            ("optim", "max_norm"),
            None,
        ),
    ],
)
def test_overrides(flags, path, value):
    config = resolved(TINY_RL, *flags)
    for part in path:
        config = config[part]
    assert config == value


def test_overrides_win_over_files_whatever_their_place_on_the_line(tmp_path):
    a = write(tmp_path, "a.toml", "max_steps = 10\n")
    assert resolved("--max-steps", "3", a, "--kind", "rl")["max_steps"] == 3


def test_override_errors_name_the_flag():
    code, report, _ = check(TINY_RL, "--optim.lrr", "3", "--model.seq-len", "long")
    assert code == 1
    flags = {e["flag"]: e for e in report["errors"]}
    assert flags["--optim.lrr"]["suggestion"] == "did you mean --optim.lr?"
    code, report, _ = check(TINY_RL, "--model.seq-len", "long")
    assert code == 1
    [error] = report["errors"]
    assert error["flag"] == "--model.seq-len" and error["path"] == "model.seq_len"
    assert error["line"] is None


def test_a_value_flag_without_value_is_an_error():
    code, report, _ = check(TINY_RL, "--optim.lr")
    assert code == 1
    assert report["errors"][0]["flag"] == "--optim.lr"
    assert "needs a value" in report["errors"][0]["message"]


def test_explain_names_every_source(tmp_path):
    base = write(tmp_path, "base.toml", "#:schema x\nmax_steps = 10\n\n[optim]\nlr = 1e-5\n")
    exp = write(tmp_path, "exp.toml", "[optim]\nbetas1 = 0.8\n")
    out, err = io.StringIO(), io.StringIO()
    code = run([base, exp, "--kind", "rl", "--optim.lr", "2e-5", "--explain"], out, err)
    assert code == 0, err.getvalue()
    rows = [line for line in out.getvalue().splitlines() if " = " in line]
    lines = {row.split(" = ")[0]: row.split("  # ", 1)[1] for row in rows}
    assert lines["max_steps"] == f"{base}:2"
    assert lines["optim.betas1"] == f"{exp}:2"
    assert lines["optim.lr"] == "--optim.lr"
    assert lines["optim.betas2"] == "default"
    assert lines["optim.weight_decay"] == 'default "auto", resolved for rl'
    assert lines["tokenizer.name"] == "derived by the rules (default null)"


def test_explain_shows_a_value_a_rule_rewrote(tmp_path):
    cfg = write(
        tmp_path,
        "c.toml",
        '[model]\nep_comm_backend = "deepep"\nimpl = "custom"\n[optim]\nmax_norm = 2.0\n',
    )
    out, err = io.StringIO(), io.StringIO()
    assert run([cfg, "--kind", "rl", "--explain"], out, err) == 0
    line = next(line for line in out.getvalue().splitlines() if line.startswith("optim.max_norm"))
    assert f"{cfg}:5" in line and "written 2.0, resolved by the rules" in line
