"""validate-config without --kind on files that name no kind: the keys tell it, validate-config
says which kind it chose and which key decided, or lists the kinds it cannot choose between
with the --kind that picks each."""

from __future__ import annotations

import json

from cli_support import run_cli

NOTE = (
    "{prog}: no #:schema line in {path}: checking it as an {kind} config (what `{cmd}` reads), "
    "{why}; pass --kind to choose another kind"
)
PASS_FOUR = (
    "Pass --kind rl, --kind sft, --kind orchestrator or --kind rl_run (the configs of "
    "`rl-trainer`, `sft`, `orchestrator` and `rl`), or start the file with a '#:schema' line "
    "naming its schema (generated/schemas/rl_trainer.json, sft_trainer.json, orchestrator.json "
    "or rl.json)"
)
PASS_ALL = (
    "Pass --kind rl, --kind sft, --kind orchestrator, --kind rl_run, --kind inference or --kind "
    "eval (the configs of `rl-trainer`, `sft`, `orchestrator`, `rl`, `inference` and `evaluate`), "
    "or start the file with a '#:schema' line naming its schema (generated/schemas/"
    "rl_trainer.json, sft_trainer.json, orchestrator.json, rl.json, inference_run.json or "
    "eval.json)"
)


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_chosen_kind_and_the_key_that_decided(tmp_path):
    path = write(tmp_path, "fake.toml", "max_steps = 3\n\n[data.fake]\nbatch_size = 2\n")
    result = run_cli(path)
    assert result.code == 0
    assert result.stdout == f"{path}: valid rl config (0 errors, 0 warnings)\n"
    why = "the only kind that has data.fake"
    assert (
        result.stderr
        == NOTE.format(prog="validate-config", path=path, kind="rl", cmd="rl-trainer", why=why)
        + "\n"
    )


def test_several_keys_decide_together(tmp_path):
    """No one key rules out every other kind: each key is named with the kinds it rules out."""
    text = 'matmul_precision = "high"\n\n[rollout_transport]\ntype = "filesystem"\n'
    path = write(tmp_path, "trainer.toml", text)
    result = run_cli(path)
    assert result.code == 0, result.stderr
    why = (
        "the only kind that has all of matmul_precision (not in orchestrator, rl_run, inference "
        "or eval), rollout_transport (not in sft)"
    )
    assert (
        result.stderr
        == NOTE.format(prog="validate-config", path=path, kind="rl", cmd="rl-trainer", why=why)
        + "\n"
    )


def test_a_typo_is_reported_by_the_kind_the_other_keys_tell(tmp_path):
    path = write(tmp_path, "typo.toml", 'max_stepz = 3\n\n[data]\ntype = "fake"\nseq_len = 64\n')
    result = run_cli(path)
    assert result.code == 1
    why = "the only kind that has data.type, though it has no max_stepz (an error below)"
    assert (
        result.stderr
        == NOTE.format(prog="validate-config", path=path, kind="sft", cmd="sft", why=why) + "\n"
    )
    assert result.stdout.splitlines()[:2] == [
        f"{path}:1:1: error: max_stepz is not a known key of the top level",
        "    fix: did you mean max_steps?",
    ]


def test_keys_every_kind_has_are_a_real_ambiguity(tmp_path):
    path = write(tmp_path, "plain.toml", 'max_steps = 3\n\n[model]\nname = "m"\n')
    result = run_cli(path)
    assert result.code == 2
    assert result.stderr.splitlines()[-1] == (
        f"validate-config: error: cannot tell which kind of config {path} is: every key it "
        f"sets (max_steps, model) is in rl, sft, orchestrator and rl_run configs. {PASS_FOUR}"
    )
    assert run_cli(path, "--kind", "orchestrator").code == 0


def test_a_key_no_kind_has_among_keys_every_kind_has(tmp_path):
    path = write(tmp_path, "typo.toml", '[model]\nnmae = "m"\n')
    result = run_cli(path)
    assert result.code == 2
    assert result.stderr.splitlines()[-1] == (
        f"validate-config: error: cannot tell which kind of config {path} is: no kind has "
        f"model.nmae, and the rest fits rl, sft, orchestrator and rl_run configs alike. "
        f"{PASS_FOUR}"
    )


def test_the_candidates_are_only_the_kinds_that_fit(tmp_path):
    path = write(tmp_path, "mostly.toml", 'seed = 1\n\n[project]\nname = "x"\n')
    result = run_cli(path)
    assert result.code == 2
    assert result.stderr.splitlines()[-1] == (
        f"validate-config: error: cannot tell which kind of config {path} is: no kind has "
        "project, and only orchestrator configs have the rest. Pass --kind orchestrator (the "
        "configs of `orchestrator`), or start the file with a '#:schema' line naming its "
        "schema (generated/schemas/orchestrator.json)"
    )


def test_a_file_of_another_tool(tmp_path):
    path = write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n')
    result = run_cli(path)
    assert result.code == 2
    assert result.stderr.splitlines()[-1] == (
        f"validate-config: error: cannot tell which kind of config {path} is: no kind of "
        f"trainspec config has any of its keys (project). {PASS_ALL}"
    )


def test_each_checks_what_the_keys_tell_and_skips_the_rest(tmp_path):
    told = write(tmp_path, "told.toml", "[data.fake]\nbatch_size = 2\n")
    either = write(tmp_path, "either.toml", "max_steps = 3\n")
    foreign = write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n')
    result = run_cli("--each", told, either, foreign, "--format", "json")
    assert result.code == 0
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["file"], r["kind"], r["valid"]) for r in reports] == [
        (told, "rl", True),
        (either, None, True),
        (foreign, None, True),
    ]
    assert reports[1]["skipped"] == (
        "names no schema, and its keys fit rl, sft, orchestrator and rl_run configs alike: "
        "check it with --kind"
    )
    assert reports[2]["skipped"] == (
        "names no trainspec schema (no #:schema line, no .rl.toml/.sft.toml name)"
    )
    assert result.stderr.count("no #:schema line in") == 1  # the file it checked


def test_json_reports_keep_their_shape(tmp_path):
    path = write(tmp_path, "fake.toml", "[data.fake]\nbatch_size = 2\n")
    result = run_cli(path, "--format", "json")
    assert result.code == 0
    report = result.report()  # the JSON report's keys, unchanged; the note is on stderr
    assert report["kind"] == "rl" and report["config"]["data"]["fake"]["batch_size"] == 2
    assert result.stderr.startswith(f"validate-config: no #:schema line in {path}: ")


def test_overrides_and_help_go_by_the_kind_the_keys_tell(tmp_path):
    path = write(tmp_path, "fake.toml", "[data.fake]\nbatch_size = 2\n")
    result = run_cli(path, "--data.fake.batch-size", "8", "--print")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["data"]["fake"]["batch_size"] == 8
    result = run_cli(path, "--help", "loss")  # [loss]: a section of rl configs only
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("rl config settings under loss (--key VALUE):\n")


def test_diff_tells_each_side_by_its_keys(tmp_path):
    a = write(tmp_path, "a.toml", "max_steps = 3\n\n[data.fake]\nbatch_size = 2\n")
    b = write(tmp_path, "b.toml", "max_steps = 5\n\n[data.fake]\nbatch_size = 2\n")
    result = run_cli("diff", a, b)
    assert result.code == 1
    assert result.stdout.splitlines()[:2] == [f"--- {a} (rl)", f"+++ {b} (rl)"]
    notes = result.stderr.splitlines()
    why = "the only kind that has data.fake"
    assert notes == [
        NOTE.format(prog="validate-config diff", path=p, kind="rl", cmd="rl-trainer", why=why)
        for p in (a, b)
    ]
    plain = write(tmp_path, "plain.toml", "max_steps = 3\n")
    result = run_cli("diff", a, plain)
    assert result.code == 2
    assert result.stderr.splitlines()[-1].startswith(
        f"validate-config diff: error: cannot tell which kind of config {plain} is: "
    )


def test_a_schema_line_that_names_no_kind(tmp_path):
    """A `#:schema` line for another schema (a section's) names no kind: the keys tell it."""
    text = "#:schema ../schema/model.json\n[data.fake]\nbatch_size = 2\n"
    path = write(tmp_path, "other.toml", text)
    result = run_cli(path)
    assert result.code == 0
    assert result.stderr == (
        f"validate-config: the #:schema line of {path} names no kind of config: checking it as "
        "an rl config (what `rl-trainer` reads), the only kind that has data.fake; pass --kind "
        "to choose another kind\n"
    )
