"""The job scripts `sft` and `rl` write with [slurm], without a cluster: every bundled template
renders for one node and several, on partitions with and without GPUs, to a script `bash -n`
accepts; a dry run writes it beside the configs it runs and prints the sbatch command; optional
#SBATCH lines appear only when set; template_path replaces the bundled template; settings the
job could not honour are refused before anything is written or submitted (a dry run too); the
reference's configs that use [slurm] are refused so, and render a script bash accepts.
test_job_script_quoting.py: nothing from a config runs as a command of the script.
test_sft_jobs.py and test_rl_jobs.py submit real jobs.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from slurm_runs import BIN, RL, RL_TWO_NODES, ROOT, SFT, write_config

from trainspec.config import load, validate
from trainspec.trainers.rl_run.main import main as rl_main
from trainspec.trainers.rl_run.slurm_job import rl_job
from trainspec.trainers.sft.main import main as sft_main
from trainspec.trainers.slurm.submit import job_script

MAINS = {"sft": sft_main, "rl": rl_main}
BASES = {"sft": SFT, "rl": RL}
DEPLOYMENTS = {
    ("sft", "one"): {},
    ("sft", "two"): {
        "deployment": {"type": "multi_node", "num_train_nodes": 2, "gpus_per_node": 4}
    },
    ("rl", "one"): {"deployment": {"gpus_per_node": 2, "num_train_gpus": 1, "num_infer_gpus": 1}},
    ("rl", "two"): {"deployment": {**RL_TWO_NODES, "gpus_per_node": 4}, "inference": {}},
}
REFERENCE_RL = ROOT / "tests" / "config" / "reference" / "rl"
WITH_SLURM = sorted(path for path in REFERENCE_RL.glob("*.toml") if "[slurm]" in path.read_text())
SLIM_SFT = Path(__file__).with_name("slim_sft.toml")


def bash_accepts(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def dry_run(command, config: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = MAINS[command]([str(config), "--dry-run", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def gpus(monkeypatch):
    """What sinfo would say of the partition's nodes: they have GPUs (True), none (False), or
    SLURM cannot be asked (None)."""

    def answer(value):
        monkeypatch.setattr("trainspec.trainers.slurm.submit.partition_gpus", lambda _: value)

    return answer


@pytest.mark.parametrize("has_gpus", [True, False], ids=["gpu", "cpu"])
@pytest.mark.parametrize(("command", "nodes"), sorted(DEPLOYMENTS))
def test_every_bundled_template_renders_a_script_bash_accepts(
    command, nodes, has_gpus, gpus, tmp_path, capsys
):
    gpus(has_gpus)
    changes = DEPLOYMENTS[command, nodes]
    config = write_config(tmp_path, BASES[command], changes, {"project_dir": str(tmp_path)})
    code, out, err = dry_run(command, config, capsys)
    assert code == 0, err
    script = Path(out.strip().removeprefix("sbatch "))
    assert out == f"sbatch {script}\n" and script.name == f"{command}.sbatch"
    bash_accepts(script)
    assert stat.S_IMODE(script.stat().st_mode) == 0o700  # it exports the run's env_vars
    configs = sorted([*script.parent.rglob("*.json"), *script.parent.rglob("*.env")])
    assert configs and all(stat.S_IMODE(c.stat().st_mode) == 0o600 for c in configs), configs
    text = script.read_text()
    multi = nodes == "two"
    per_node = 4 if multi else 1 if command == "sft" else 2
    assert f"#SBATCH --nodes={2 if multi else 1}\n" in text
    assert (f"#SBATCH --gres=gpu:{per_node}\n" in text) == has_gpus
    assert ("srun --kill-on-bad-exit=1" in text) == multi
    assert f"single_node_{command}" in text or f"multi_node_{command}" in text  # the template
    assert "nothing submitted" in err
    # the configs the job runs: the same config without [slurm], so the job trains
    if command == "rl" and multi:
        configs = {"rl": script.parent / "rl-trainer.json"}
        configs["orchestrator"] = script.parent / "rl-orchestrator.json"
    else:
        configs = {
            "rl_run" if command == "rl" else "sft": script.parent / "configs" / f"{command}.json"
        }
    for kind, path in configs.items():
        assert str(path) in text
        job_config = validate(kind, json.loads(path.read_text())).config
        assert getattr(job_config, "slurm", None) is None
    if command == "rl" and multi:  # vLLM on the inference node only where there are GPUs
        assert (" --model builtin:tiny-qwen3 " in text) == has_gpus
        assert ("--wait-for-server" in text) == has_gpus
        # vLLM binds the inference node's own address (the orchestrator may be elsewhere),
        # never every interface, and not loopback
        assert ('--host "$INFER_ADDR"' in text) == has_gpus and "127.0.0.1" not in text
        assert ("no vLLM here (no GPU)" in text) == (not has_gpus)
        orchestrator = json.loads(configs["orchestrator"].read_text())
        assert orchestrator["sampler"]["type"] == ("openai" if has_gpus else "local")
        # vLLM's environment comes from a file of the run's (0600), not the script's text
        env_file = script.parent / "configs" / "inference.env"
        assert env_file.exists() == has_gpus and "VLLM_SERVER_DEV_MODE" not in text
        if has_gpus:
            assert f"inference-env {env_file} " in text
            started = subprocess.run(  # the script's way of starting vLLM, with `env` for vLLM
                ["bash", "-c", '. "$1" && shift && exec "$@"', "inference-env", env_file, "env"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert "VLLM_SERVER_DEV_MODE=1" in started.stdout.splitlines(), started.stderr


def test_an_unknown_partition_keeps_the_gpu_line_and_says_so(gpus, tmp_path, capsys):
    gpus(None)  # no cluster to ask (as on this machine without SLURM_CONF)
    config = write_config(tmp_path, SFT, {}, {})
    code, out, err = dry_run("sft", config, capsys)
    assert code == 0
    assert "#SBATCH --gres=gpu:1\n" in Path(out.split()[1]).read_text()
    assert "could not be asked" in err


def test_optional_sbatch_lines_appear_only_when_set(gpus, tmp_path, capsys):
    gpus(False)
    (tmp_path / "bare").mkdir()
    code, out, _ = dry_run("sft", write_config(tmp_path / "bare", SFT, {}, {}), capsys)
    text = Path(out.split()[1]).read_text()
    for option in ("nodelist", "exclude", "account", "time"):
        assert f"--{option}" not in text
    every = {
        "job_name": "my-job",
        "partition": "debug",
        "nodelist": "n[1-2]",
        "exclude": "n3",
        "account": "lab",
        "time": "2:00:00",
        "pre_run_command": "module load cuda\necho ready",
        "project_dir": str(tmp_path / "proj"),
    }
    (tmp_path / "set").mkdir()
    code, out, _ = dry_run("sft", write_config(tmp_path / "set", SFT, {}, every), capsys)
    assert code == 0
    text = Path(out.split()[1]).read_text()
    for line in (
        "#SBATCH --job-name=my-job\n",
        "#SBATCH --partition=debug\n",
        "#SBATCH --nodelist=n[1-2]\n",
        "#SBATCH --exclude=n3\n",
        "#SBATCH --account=lab\n",
        "#SBATCH --time=2:00:00\n",
        "\nmodule load cuda\necho ready\n",
        f"\ncd {tmp_path / 'proj'}\n",
    ):
        assert line in text
    # the header ends before the first command: sbatch reads no #SBATCH line after it
    header = text.split("\nset -eo pipefail")[0]
    assert header.count("#SBATCH") == 10


def test_relative_paths_are_taken_from_project_dir_where_the_job_starts(gpus, tmp_path, capsys):
    gpus(False)
    project = tmp_path / "project"
    project.mkdir()
    config = write_config(tmp_path, SFT, {"output_dir": "runs"}, {"project_dir": str(project)})
    code, out, _ = dry_run("sft", config, capsys)
    script = Path(out.split()[1])
    assert code == 0 and script.parent.parent == project / "runs"
    assert f"\ncd {project}\n" in script.read_text()


def test_cleanup_grace_period_reaches_the_multi_node_script(gpus, tmp_path, capsys):
    gpus(False)
    changes = {"deployment": RL_TWO_NODES, "inference": {}}
    config = write_config(tmp_path, RL, changes, {"cleanup_grace_period": 42})
    code, out, _ = dry_run("rl", config, capsys)
    assert code == 0 and "export CLEANUP_GRACE_PERIOD=42\n" in Path(out.split()[1]).read_text()


def test_template_path_replaces_the_bundled_template(gpus, tmp_path, capsys, monkeypatch):
    gpus(False)
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "mine.sbatch.j2").write_text(
        '{% set title = "my own" %}{% include "_header.sbatch.j2" %}\n'
        '#SBATCH --qos=high\n{% include "_setup.sh.j2" %}\n'
        'echo "custom {{ kind }} on {{ job.nodes }} node(s)"\n'
        '"$PYTHON" -m trainspec.trainers.slurm.job sft {{ config | sh }}\n'
    )
    monkeypatch.chdir(tmp_path)  # a relative template_path is taken from here
    config = write_config(tmp_path, SFT, {}, {"template_path": "templates/mine.sbatch.j2"})
    code, out, err = dry_run("sft", config, capsys)
    assert code == 0, err
    script = Path(out.split()[1])
    text = script.read_text()
    assert "#SBATCH --qos=high" in text and 'echo "custom sft on 1 node(s)"' in text
    assert "#SBATCH --job-name=" in text and "wait_for()" in text  # the bundled parts it included
    assert f"from {templates / 'mine.sbatch.j2'}" in text
    bash_accepts(script)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("{% if %}\n", "mine.sbatch.j2:1:"),  # Jinja syntax
        ("{{ no_such_name }}\n", "no_such_name"),  # a name the launcher does not give
        ("#!/bin/bash\nif then fi\n", "not valid bash"),
    ],
    ids=["syntax", "undefined", "bash"],
)
def test_a_template_that_does_not_make_a_script_is_refused(body, said, gpus, tmp_path, capsys):
    gpus(False)
    (tmp_path / "mine.sbatch.j2").write_text(body)
    config = write_config(tmp_path, SFT, {}, {"template_path": str(tmp_path / "mine.sbatch.j2")})
    code, out, err = dry_run("sft", config, capsys)
    assert code == 1 and out == ""
    assert "slurm.template_path: error:" in err and said in err and "Traceback" not in err
    assert not list(tmp_path.rglob("sft.sbatch"))


def test_what_the_job_could_not_honour_is_refused_before_anything_is_written(
    gpus, tmp_path, capsys
):
    """Nothing is written or submitted; a dry run refuses the same, writing nothing either."""
    gpus(False)
    settings = {"shared_fs": False, "template_path": "missing.j2"}
    changes = {"inference": {"vllm": {"max_model_len": 512}}}  # tunes vLLM: no GPU there
    config = write_config(tmp_path, RL, changes, settings)
    for args in ([], ["--dry-run"]):
        code = rl_main([str(config), *args])
        out, err = capsys.readouterr()
        assert code == 1 and out == ""
        assert f"rl: cannot {'write' if args else 'submit'} the job\n" in err
        for path in ("slurm.shared_fs", "slurm.template_path", "inference"):
            assert f": {path}: error:" in err, err  # after file:line:col
        assert "the nodes of partition 'debug' has none" in err
        assert sorted(path.name for path in tmp_path.rglob("*")) == ["run.toml"]


def test_format_toml_with_slurm_is_a_usage_error_naming_no_slurm(tmp_path, capsys):
    config = write_config(tmp_path, SFT, {}, {})
    assert sft_main([str(config), "--dry-run", "--format", "toml"]) == 2
    assert "--no-slurm" in capsys.readouterr().err
    assert sft_main([str(config), "--dry-run", "--format", "toml", "--no-slurm"]) == 0
    assert "[slurm]" not in capsys.readouterr().out


def by_the_command(command: str, config: Path, out_dir: Path) -> subprocess.CompletedProcess:
    """`command CONFIG --output-dir OUT --dry-run`, as a user runs it."""
    return subprocess.run(
        [str(BIN / command), str(config), "--output-dir", str(out_dir), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SLURM_CONF": str(out_dir / "no-cluster.conf")},  # sinfo: no answer
    )


def rendered_by_the_command(command: str, config: Path, out_dir: Path) -> Path:
    """The script `command CONFIG --output-dir OUT --dry-run` wrote."""
    result = by_the_command(command, config, out_dir)
    assert result.returncode == 0, result.stderr
    found = re.fullmatch(r"sbatch (\S+)\n", result.stdout)
    assert found, result.stdout + result.stderr
    return Path(found.group(1))


@pytest.mark.parametrize("config", WITH_SLURM, ids=lambda path: path.stem)
def test_the_reference_rl_configs_with_slurm_are_refused_and_render_a_script(config, tmp_path):
    """Each asks for what this build refuses (several inference engines behind a router,
    disaggregation, KV offload, monitors.prime, shared_fs = false): a dry run says so and
    writes nothing; the script they would get renders, and bash accepts it."""
    result = by_the_command("rl", config, tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    assert "rl: cannot write the job\n" in result.stderr and ": error: " in result.stderr
    assert "Traceback" not in result.stderr and not list(tmp_path.rglob("*.sbatch"))
    resolved = load("rl_run", [config], {"output_dir": str(tmp_path)}).config
    script, text = job_script(resolved, rl_job(resolved, None), None)
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(text)
    bash_accepts(script)
    assert "#SBATCH --partition=all" in text


def test_an_sft_config_with_slurm_dry_runs_to_a_script(tmp_path):
    script = rendered_by_the_command("sft", SLIM_SFT, tmp_path)
    bash_accepts(script)
    text = script.read_text()
    assert "#SBATCH --nodes=2" in text and "#SBATCH --gres=gpu:8" in text


def test_the_reference_configs_with_slurm_are_found():
    assert {path.stem for path in WITH_SLURM} >= {
        "debug-concurrency",
        "advanced-intellect-3.1",
        *(f"advanced-glm-4.5-air-{name}" for name in ("swe", "search", "terminal")),
        "advanced-nemotron-3-super-swe",
        "advanced-minimax-m2.5-swe",
        *(f"advanced-qwen3-30b-a3b-{name}" for name in ("math", "swe", "tool")),
        "advanced-glm-5.2-swe",
        "advanced-glm-5.2-swe-llmd",
    }
