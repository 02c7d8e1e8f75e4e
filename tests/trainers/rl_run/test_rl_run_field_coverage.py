"""Every field counts, for the combined config's own top level (kind "rl_run"): each leaf
outside [trainer] and [orchestrator] (those are proven by test_rl_field_coverage.py) is

* copied into the sub-configs by the config layer (validators/rl_run.py: SHARED, PRESENCE and
  the run directory), proven per shared key here by setting it at the top and finding it in
  every target of the resolved config;
* read by the `rl` launcher: dry runs of `launch` read the config through a recording proxy
  (tests/helpers/field_recorder.py), and what they read must show in what they wrote;
* refused at start naming the field (SetupError from `launch`), a refused table covering the
  keys under it and a refused `type` the keys only its variants have;
* or consumed by a rule that acts differently for two of its values (gpus_fit_the_node,
  resolve_multi_node_deployment).

    .venv/bin/python -m pytest tests/trainers/rl_run/test_rl_run_field_coverage.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest  # noqa: E402
from helpers.field_recorder import FieldRecorder

from trainspec.config import load  # noqa: E402
from trainspec.config.schema_info import schema_info  # noqa: E402
from trainspec.trainers.errors import SetupError, SetupErrors, raise_all  # noqa: E402
from trainspec.validators import rl_run  # noqa: E402
from trainspec.validators.pipeline import rules_for  # noqa: E402

SCHEMA = schema_info("rl_run")
LEAVES = sorted(
    ".".join(path)
    for path in SCHEMA.keys
    if not SCHEMA.children.get(path) and path[0] not in ("trainer", "orchestrator")
)
TINY = {"model.name": "builtin:tiny-qwen3", "orchestrator.train.source": []}

# One value per shared key, set at the top; every target must resolve to it.
SHARED_EXAMPLES = {
    "model.name": "builtin:tiny-qwen3",
    "model.vlm": {"vision_encoder_attr": "model.visual", "language_model_attr": "model.lm"},
    "max_steps": 7,
    "seq_len": 96,
    "deployment.num_train_gpus": 2,
    "log.level": "debug",
    "log.json_logging": True,
    "ckpt.output_dir": "ckpts",
    "ckpt.interval": 5,
    "ckpt.keep_last": 2,
    "ckpt.keep_interval": 50,
    "monitors.wandb.project": "p",
    "monitors.wandb.entity": "e",
    "monitors.wandb.name": "n",
    "monitors.wandb.group": "g",
    "monitors.wandb.tags": ["a", "b"],
    "monitors.wandb.offline": True,
    "monitors.file.path": "m.jsonl",
    "monitors.prime.name": "prime-run",
    "tokenizer.name": "org/tok",
    "tokenizer.trust_remote_code": True,
    "tokenizer.chat_template": "{{ messages }}",
    "resume": {"step": 3},
    "weight_broadcast": {"type": "filesystem"},
    "rollout_transport": {"type": "zmq", "host": "10.0.0.1", "port": 5599, "hwm": 3},
}
SLURM = {"job_name": "j", "partition": "gpu", "nodelist": "n1", "exclude": "n2", "account": "a",
         "time": "1:00:00", "pre_run_command": "echo pre-run", "project_dir": "/p",
         "cleanup_grace_period": 17, "shared_fs": True}  # fmt: skip
MULTI_NODE = {"type": "multi_node", "num_train_nodes": 2, "num_infer_nodes": 1,
              "num_infer_replicas": 1, "nodes_per_fsdp_group": 1,
              "orchestrator_on_inference": True, "gpus_per_node": 4}  # fmt: skip
# Set at the top: read by the launcher (dry runs), what each must change in its output. The
# slurm runs write rl.sbatch, for a partition without GPUs (tests/trainers/slurm render the GPU
# side).
LAUNCHER_RUNS = {
    "bare": {},
    "inference": {"inference": {}, "deployment.num_infer_gpus": 2},
    "env": {"env_vars": {"TRAINSPEC_X": "1"}, "clean": False, "deployment.num_train_gpus": 2},
    "slurm": {"slurm": SLURM, "deployment.gpus_per_node": 2},
    "slurm_multi": {"slurm": SLURM, "deployment": MULTI_NODE, "inference": {}},
}
# path the error names -> settings that ask for it
REFUSALS = {
    "slurm.shared_fs": {"slurm": {"shared_fs": False}},
    "deployment.type": {"deployment": MULTI_NODE, "inference": {}},  # without [slurm]
    "monitors.prime": {"monitors.prime": {"name": "x"}},
    "inference": {"inference": {"vllm": {"gpu_memory_utilization": 0.5}}},
}  # fmt: skip
# path -> (rule, two values it must treat differently, settings around them)
CONSUMED_BY_RULES = {
    "deployment.nodes_per_fsdp_group": (
        "resolve_multi_node_deployment",
        (1, 3),
        {"deployment": {"type": "multi_node", "num_train_nodes": 2}, "inference": {}},
    ),
    "deployment.gpus_per_node": ("gpus_fit_the_node", (1, 8), {"deployment.num_train_gpus": 2}),
}


def config_of(out: Path, name: str, settings: dict):
    return load("rl_run", [], {**TINY, "output_dir": str(out / name), **settings}).config


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    """What the dry runs read, and what each wrote."""
    from trainspec.trainers.rl_run.main import launch

    out = tmp_path_factory.mktemp("rl-run")
    recorder = FieldRecorder()
    plans = {}
    with pytest.MonkeyPatch.context() as mp:  # the job's nodes have no GPU, as sinfo would say
        mp.setattr("trainspec.trainers.slurm.submit.partition_gpus", lambda partition: False)
        for name, settings in LAUNCHER_RUNS.items():
            config = config_of(out, name, {**settings, "dry_run": True})
            assert launch(recorder.wrap(config)) == 0
            script = out / name / "rl.sbatch"
            if "slurm" in settings:
                plans[name] = script.read_text()
            else:
                plans[name] = json.loads((out / name / "rl-launch.json").read_text())
    return recorder, plans


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    from trainspec.trainers.rl_run import refusals as support
    from trainspec.trainers.slurm.submit import slurm_refusals

    out = tmp_path_factory.mktemp("rl-run-refused")
    outcomes = {}
    for path, settings in REFUSALS.items():
        config = config_of(out, path.replace(".", "-"), settings)
        try:
            if config.slurm is not None:
                raise_all(slurm_refusals(config.slurm))
            support.check_launch(config)
            outcomes[path] = None
        except (SetupError, SetupErrors) as err:
            outcomes[path] = err
    return outcomes


def named(err, path: str) -> bool:
    errors = err.errors if isinstance(err, SetupErrors) else [err] if err else []
    return any(e.path == path and e.problem and e.fix for e in errors)


def shared_source(leaf: str) -> str | None:
    sources = [*rl_run.SHARED, *rl_run.PRESENCE, "output_dir", "run"]
    for source in sources:
        if leaf == source or leaf.startswith(source + "."):
            return source
    return None


def refused_by(leaf: str, outcomes) -> str | None:
    for path, err in outcomes.items():
        if named(err, path) and (leaf == path or leaf.startswith(path + ".")):
            return path
    table, _, key = leaf.rpartition(".")
    variants = SCHEMA.variants.get(tuple(table.split(".")))
    if variants and named(outcomes.get(f"{table}.type"), f"{table}.type"):
        owners = [tag for tag, keys in variants.items() if key in keys]
        refused_tag = REFUSALS[f"{table}.type"][table]["type"]
        if owners == [refused_tag]:
            return f"{table}.type"
    return None


def how_consumed(leaf, launcher, refused) -> str | None:
    recorder, _ = launcher
    if recorder.readers(leaf):
        return "read by " + ", ".join(sorted(recorder.readers(leaf)))
    if source := shared_source(leaf):
        return f"copied down from {source}"
    if path := refused_by(leaf, refused):
        return f"refused with {path}"
    if leaf in CONSUMED_BY_RULES:
        return f"consumed by the rule {CONSUMED_BY_RULES[leaf][0]}"
    return None


def test_the_top_level_has_leaves():
    assert len(LEAVES) > 80
    assert {"inference.vllm.max_model_len", "slurm.partition", "ckpt.interval"} <= set(LEAVES)


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_is_consumed_or_refused(leaf, launcher, refused):
    assert how_consumed(leaf, launcher, refused), f"{leaf} is silently ignored"


def test_every_shared_key_has_an_example():
    assert set(SHARED_EXAMPLES) == set(rl_run.SHARED)


@pytest.mark.parametrize("source", sorted(rl_run.SHARED))
def test_a_shared_key_reaches_every_target(source):
    value = SHARED_EXAMPLES[source]
    settings = {source: value}
    if source == "model.vlm":  # what the trainer's rules ask of a VLM
        settings["trainer.model"] = {
            "impl": "custom",
            "optimization_dtype": "bfloat16",
            "reduce_dtype": "bfloat16",
        }
    document = load("rl_run", [], {**TINY, **settings}).config.model_dump(mode="json")
    for target in rl_run.SHARED[source]:
        got = document
        for part in target.split("."):
            got = got[part]
        if isinstance(value, dict):
            assert {k: got[k] for k in value} == value, target
        else:
            assert got == value, target


def test_a_present_table_turns_both_on_and_run_names_the_directory():
    document = load(
        "rl_run",
        [],
        {**TINY, "ckpt": {}, "monitors.wandb": {}, "output_dir": "o", "run": {"name": "n"}},
    ).config
    assert document.trainer.ckpt is not None and document.orchestrator.ckpt is not None
    assert document.trainer.monitors.wandb is not None
    assert document.orchestrator.monitors.wandb is not None
    assert document.trainer.output_dir == document.orchestrator.output_dir == "o/n"
    dir_wins = load("rl_run", [], {**TINY, "run": {"name": "n", "dir": "d"}}).config
    assert dir_wins.trainer.output_dir == "outputs/d"


def test_the_prime_monitor_goes_to_the_orchestrator_only():
    named = load("rl_run", [], {**TINY, "monitors.prime": {"name": "p"}}).config
    assert named.orchestrator.monitors.prime is not None
    assert named.orchestrator.monitors.prime.name == "p"
    assert "prime" not in type(named.trainer.monitors).model_fields
    bare = load("rl_run", [], {**TINY, "monitors.prime": {}}).config
    assert bare.orchestrator.monitors.prime is not None
    assert load("rl_run", [], TINY).config.orchestrator.monitors.prime is None


def test_the_dry_runs_show_what_they_read(launcher):
    _, plans = launcher
    assert plans["env"]["env"] == {"TRAINSPEC_X": "1"} and plans["bare"]["env"] == {}
    assert plans["env"]["clean"] == [] and plans["bare"]["clean"]  # clean defaults to true
    assert plans["env"]["trainer"][-3:] == ["trainer", plans["env"]["trainer"][-2], "2"]
    assert plans["bare"]["trainer"][-2] == "trainer"  # one process: no count
    for name in ("slurm", "slurm_multi"):  # every [slurm] setting shows in the script
        for line in ("--job-name=j", "--partition=gpu", "--nodelist=n1", "--exclude=n2",
                     "--account=a", "--time=1:00:00", "\necho pre-run\n", "\ncd /p\n"):  # fmt: skip
            assert line in plans[name], (name, line)
    multi = plans["slurm_multi"]
    assert "CLEANUP_GRACE_PERIOD=17" in multi and "--nodes=3" in multi
    assert "NUM_INFER_NODES=1" in multi and "ORCH_PROCID=0" in multi  # on the inference node
    assert "--procs-per-node=4" in multi and "no vLLM here (no GPU)" in multi


@pytest.mark.parametrize("path", sorted(REFUSALS))
def test_refused_at_start(path, refused):
    assert named(refused[path], path), f"{REFUSALS[path]} was not refused naming {path}"


def test_a_bare_inference_runs_here_saying_so(tmp_path, capsys):
    from trainspec.trainers.rl_run import refusals as support

    config = config_of(tmp_path, "bare", {"inference": {}})
    support.check_launch(config)
    support.say_inference(config)
    assert "samples in process instead" in capsys.readouterr().err


@pytest.mark.parametrize("leaf", sorted(CONSUMED_BY_RULES))
def test_a_rule_consumes_the_field(leaf):
    from trainspec.config import ConfigError

    rule_name, values, settings = CONSUMED_BY_RULES[leaf]
    assert rule_name in [rule.__name__ for rule in rules_for("rl_run")]
    outcomes = []
    for value in values:
        try:
            load("rl_run", [], {**TINY, **settings, leaf: value})
            outcomes.append([])
        except ConfigError as err:
            outcomes.append([issue.rule for issue in err.errors])
    assert outcomes[0] != outcomes[1] and rule_name in outcomes[0] + outcomes[1]
