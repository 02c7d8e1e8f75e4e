"""Report formats, --print, --strict, --each and the kind choice."""

from __future__ import annotations

import io
import json

from helpers.support import ROOT

from trainspec.cli.validate_config import run
from trainspec.config import dump_json, load

TINY_RL = str(ROOT / "configs" / "rl" / "tiny.toml")
TINY_SFT = str(ROOT / "configs" / "sft" / "tiny.toml")


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_valid_text_report():
    code, out, _ = call(TINY_RL)
    assert code == 0
    assert out.strip() == f"{TINY_RL}: valid rl config (0 errors, 0 warnings)"


def test_kind_comes_from_the_schema_line_or_the_flag(tmp_path):
    assert call(TINY_SFT)[0] == 0
    code, _, err = call(TINY_SFT, "--kind", "rl")  # an SFT file checked as RL: the mismatch
    assert code == 2 and "#:schema line is for sft configs, but --kind is rl" in err
    plain = write(tmp_path, "plain.toml", "max_steps = 3\n")  # a key every kind has
    code, _, err = call(plain)
    assert code == 2 and err.splitlines()[-1] == (
        f"validate-config: error: cannot tell which kind of config {plain} is: every key it "
        "sets (max_steps) is in rl, sft, orchestrator and rl_run configs. Pass --kind rl, "
        "--kind sft, --kind orchestrator or --kind rl_run (the configs of `rl-trainer`, `sft`, "
        "`orchestrator` and `rl`), or start the file with a '#:schema' line naming its schema "
        "(generated/schemas/rl_trainer.json, sft_trainer.json, orchestrator.json or rl.json)"
    )
    assert call(plain, "--kind", "sft")[0] == 0


def test_json_report_shape(tmp_path):
    bad = write(tmp_path, "bad.toml", "[optim]\nlr = -1\n")
    code, out, _ = call(bad, "--kind", "rl", "--format", "json")
    report = json.loads(out)
    assert code == 1
    assert set(report) == {"valid", "kind", "errors", "warnings", "config"}
    assert report["valid"] is False and report["config"] is None and report["kind"] == "rl"
    [error] = report["errors"]
    assert {k: error[k] for k in ("file", "line", "column", "path")} == {
        "file": bad,
        "line": 2,
        "column": 6,
        "path": "optim.lr",
    }
    assert error["message"] == "optim.lr should be at least 0, got -1"
    assert error["suggestion"].startswith("use 0 or more")


def test_print_writes_the_resolved_config():
    code, out, err = call(TINY_RL, "--print")
    assert code == 0
    assert json.loads(out) == json.loads(dump_json(load("rl", [TINY_RL]).config))
    assert "valid rl config" in err  # the report moves to stderr


def test_warnings_pass_unless_strict(tmp_path):
    cfg = write(tmp_path, "w.toml", '[model]\nep_comm_backend = "deepep"\nimpl = "custom"\n')
    code, out, _ = call(cfg, "--kind", "rl")
    assert code == 0 and "warning: optim.max_norm set to null" in out
    assert f"{cfg}:2:" in out  # located at the setting that caused it
    code, out, _ = call(cfg, "--kind", "rl", "--strict")
    assert code == 1 and "invalid rl config" in out
    code, out, _ = call(cfg, "--kind", "rl", "--strict", "--format", "json")
    assert code == 1 and json.loads(out)["valid"] is False


def test_github_annotations(tmp_path):
    bad = write(tmp_path, "bad.toml", "[optim]\nlrr = 1\n")
    code, out, _ = call(bad, "--kind", "rl", "--format", "github")
    assert code == 1
    assert out.startswith(f"::error file={bad},line=2,col=1,title=trainspec optim.lrr::")
    assert "did you mean optim.lr?" in out


def test_each_checks_files_on_their_own_and_skips_foreign_toml(tmp_path):
    foreign = write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n')
    code, out, _ = call("--each", TINY_RL, TINY_SFT, foreign)
    assert code == 0
    assert "valid rl config" in out and "valid sft config" in out
    bad = write(tmp_path, "bad.toml", "#:schema ../schema/rl_trainer.json\nmax_steps = 0\n")
    assert call("--each", TINY_RL, bad)[0] == 1


def test_a_renamed_key_names_its_new_name(tmp_path):
    cfg = write(tmp_path, "r.toml", "[deployment]\nnum_eval_gpus = 2\n")
    code, out, _ = call(cfg, "--kind", "sft")
    assert code == 1
    assert (
        f"{cfg}:2:1: error: deployment.num_eval_gpus was renamed to deployment.num_infer_gpus"
        in out
    )
    assert "write num_infer_gpus = 2 instead, or run migrate-config" in out


def test_help_lists_settings_with_descriptions_and_defaults():
    code, out, _ = call("--kind", "rl", "--help")
    assert code == 0
    assert "--optim.lr" in out and "Peak learning rate." in out and "(default: 1e-06)" in out
    assert "--model.compile, --no-model.compile" in out
    code, out, _ = call("--help")
    assert code == 0 and "--kind" in out and "Peak learning rate." not in out


def test_usage_errors_exit_2():
    code, _, err = call()
    assert code == 2 and err.startswith("usage: validate-config")
    code, _, err = call(TINY_RL, "--format", "yaml")
    assert code == 2 and "invalid choice" in err


def test_each_never_passes_a_file_it_did_not_check(tmp_path):
    """The pre-commit mode: only a readable TOML file that names no schema is skipped."""
    bad = "[optim]\nlr = -1\n"
    named = write(tmp_path, "bad.rl.toml", bad)  # the name editors associate with RL
    code, out, _ = call("--each", named)
    assert code == 1 and "optim.lr" in out
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf#:schema ../generated/schemas/rl_trainer.json\n" + bad.encode())
    code, out, _ = call("--each", str(bom))
    assert code == 1 and f"{bom}:3:" in out  # positions count from after the byte-order mark
    late = write(tmp_path, "late.toml", "# a comment\n#:schema ../rl_trainer.json\n" + bad)
    code, _, err = call("--each", late)
    assert code == 2 and f"{late}:2:1:" in err and "must be the first line" in err
    code, _, err = call("--each", str(tmp_path / "missing.toml"))
    assert code == 2 and "missing.toml" in err
    (tmp_path / "folder.toml").mkdir()
    code, _, err = call("--each", str(tmp_path / "folder.toml"))
    assert code == 2 and "is a directory" in err
    foreign = write(tmp_path, "pyproject-like.toml", "[tool.x]\ny = 1\n")
    assert call("--each", foreign)[0] == 0  # not a trainspec config: skipped
