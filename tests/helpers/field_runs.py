"""The consumption runs of test_field_coverage.py: tiny real runs of the trainer, the launcher and
the entrypoint that together set every variant and optional table, read through a recorder."""

from __future__ import annotations

import contextlib
import http.server
import importlib.machinery
import io
import json
import sys
import threading
import types
from pathlib import Path

import pytest

from helpers.field_recorder import FieldRecorder
from helpers.in_process import restored
from trainspec.config import load
from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.core.world import close_world
from trainspec.trainers.orchestrator.sampling.http_server import HttpServer

TINY_MODEL = builtin_model_dir("builtin:tiny-qwen3")
# What every coverage run of either trainer starts from: the built-in model cut to one layer,
# nothing compiled or checkpointed, two steps, a progress line at each.
TINY_TRAINER = {
    "model.name": "builtin:tiny-qwen3",
    "model.compile": None,
    "model.ac": None,
    "model.ac_offloading": None,
    "model.debug.num_layers": 1,
    "optim.lr": 1e-3,
    "max_steps": 2,
    "log.interval": 0.001,
}
TINY = {
    **TINY_TRAINER,
    "model.seq_len": 32,
    "data.type": "fake",
    "data.seq_len": 32,
    "data.batch_size": 2,
    "data.micro_batch_size": 1,
}

# -- helpers ----------------------------------------------------------------------------------


def tiny_config(out: Path, name: str, settings: dict):
    merged = {**TINY, "output_dir": str(out / "outputs"), "run.name": name, **settings}
    return load("sft", [], merged).config


def train_recorded(recorder: FieldRecorder, config) -> int:
    from trainspec.trainers.sft.train import train

    try:
        return train(recorder.wrap(config))
    finally:
        close_world()  # train() closes it itself, but not when it raises


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _chat(tag: str, n: int, system: bool = True) -> list[dict]:
    rows = []
    for i in range(n):
        text = f"{tag}{i}"
        messages = [{"role": "system", "content": "rev"}] if system else []
        messages += [
            {"role": "user", "content": text},
            {"role": "assistant", "content": text[::-1]},
        ]
        rows.append({"messages": messages})
    return rows


def _chat_dir(root: Path) -> Path:
    """Two subsets, each with a train split; subset a also has a test split."""
    _write_jsonl(root / "a" / "train.jsonl", _chat("a", 8))
    _write_jsonl(root / "b" / "train.jsonl", _chat("b", 8, system=False))
    _write_jsonl(root / "a" / "test.jsonl", _chat("t", 4))
    return root


def _moe_dir(root: Path) -> Path:
    """A one-layer Qwen3-MoE config beside no weights (debug.random_init), vocab of tiny-qwen3."""
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config.update(
        architectures=["Qwen3MoeForCausalLM"],
        model_type="qwen3_moe",
        num_hidden_layers=1,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=64,
        decoder_sparse_step=1,
        mlp_only_layers=[],
    )
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    return root


class _FakeWandbRun:
    id = "field-coverage"

    def __init__(self, init: dict) -> None:
        self.init = init
        self.logged: list = []

    def log(self, values, step=None) -> None:
        self.logged.append((step, values))

    def finish(self) -> None:
        pass


def _fake_wandb() -> types.ModuleType:
    module = types.ModuleType("wandb")
    # A spec, for the libraries that probe sys.modules before importing (accelerate).
    module.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
    module.runs = []

    def init(**kwargs):
        run = _FakeWandbRun(kwargs)
        module.runs.append(run)
        return run

    module.init = init
    return module


@contextlib.contextmanager
def heartbeat_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = HttpServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ping"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def isolated():
    """Undo what a trainer run changes in this process (in_process.restored), and stand a fake
    in for the wandb module; yields a MonkeyPatch for more."""
    with restored(), pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "wandb", _fake_wandb())
        yield mp


# -- the consumption runs ---------------------------------------------------------------------


def shared_tables_on(out: Path, heartbeat_url: str, name: str) -> dict:
    """Every shared side table switched on (logging, monitors, heartbeat, gc, trace, control,
    activation checkpointing, env_vars): the "everything on" runs of the SFT and RL tests."""
    return {
        "log": {
            "level": "info",
            "vf_level": "warning",
            "json_logging": True,
            "log_data": True,
            "interval": 0.001,
            "ranks_filter": [0],
        },
        "matmul_precision": "highest",
        "dist_timeout_seconds": 120,
        "gc": {"interval": 1},
        "trace_path": str(out / "trace" / "trace.json"),
        "heartbeat": {"url": heartbeat_url},
        "monitors": {
            "file": {"path": "metrics-file.jsonl"},
            "wandb": {
                "project": "field-coverage",
                "entity": "tests",
                "name": name,
                "group": "g",
                "tags": ["a"],
                "offline": True,
            },
        },
        "control": {
            "dir": str(out / "control"),
            "poll_interval_steps": 1,
            "checkpoint_signal": "SIGUSR2",
            "stop_signal": "SIGUSR1",
            "checkpoint_on_stop": False,
        },
        "model.ac": {"mode": "full", "freq": 1},
        "model.fused_lm_head_token_chunk_size": 16,
        "model.trust_remote_code": False,
        "env_vars": {"TRAINSPEC_FIELD_COVERAGE": "1"},
    }


def run_everything_on(out: Path, recorder: FieldRecorder, heartbeat_url: str) -> None:
    """AdamW, constant schedule, fixed increasing fake data, and every side table set; through
    `launch` so env_vars and the deployment are read where the command reads them."""
    from trainspec.trainers.sft.main import launch

    settings = {
        "optim": {
            "type": "adamw",
            "lr": 1e-3,
            "weight_decay": 0.1,
            "max_norm": 1.0,
            "betas1": 0.8,
            "betas2": 0.95,
        },
        "scheduler": {"type": "constant"},
        "data.length": "fixed",
        "data.input_ids": "increasing",
        "data.seed": 3,
        "data.num_workers": 1,
        **shared_tables_on(out, heartbeat_url, "everything"),
        "clean": True,
        "run.dir": "everything-dir",
        "deployment": {"type": "single_node", "num_train_gpus": 1, "gpus_per_node": 1},
    }
    config = tiny_config(out, "everything", settings)
    stale = Path(config.output_dir) / config.run.dir / "stale"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier run")
    (stale.parent / "identity.json").write_text('{"kind": "sft"}')  # a run's: clean may empty it
    assert launch(recorder.wrap(config)) == 0
    assert not stale.exists()  # clean = true emptied the run directory first
    close_world()


def run_sgd_linear(out: Path, recorder: FieldRecorder) -> None:
    settings = {
        "optim": {
            "type": "sgd",
            "lr": 1e-2,
            "weight_decay": 0.0,
            "max_norm": None,
            "momentum": 0.8,
            "nesterov": False,
        },
        "scheduler": {"type": "linear", "warmup_steps": 1, "decay_steps": 1, "min_lr": 1e-5},
        "data.length": "variable",
        "data.input_ids": "random",
        "model.fused_lm_head_token_chunk_size": "disabled",
        "control": None,
        "gc": None,
        "monitors.file": None,
    }
    assert train_recorded(recorder, tiny_config(out, "sgd", settings)) == 0


def _chat_settings(out: Path, chat: Path) -> dict:
    """Muon, cosine, chat data from a local directory, validation, LoRA, selective AC, ckpt."""
    data = {
        "type": "sft",
        "name": str(chat),
        "batch_size": 2,
        "micro_batch_size": 1,
        "seq_len": 32,
        "num_workers": 1,
        "shuffle": False,
        "seed": 1,
        "loss_mask": {"system": True, "user": False, "assistant": True, "tool": False},
    }
    return {
        "optim": {"type": "muon", "lr": 1e-3, "mu": 0.9, "betas1": 0.9, "betas2": 0.99},
        "scheduler": {"type": "cosine", "warmup_steps": 1, "min_lr": 1e-5},
        "data": {
            **data,
            "subsets": ["a", "b"],
            "splits": ["train", "train"],
            "probabilities": [0.5, 0.5],
            "stopping_strategy": "first_exhausted",
        },
        "val": {
            "interval": 1,
            "eval_on_start": True,
            "data": {
                **data,
                "subsets": ["a"],
                "splits": ["test"],
                "probabilities": [1.0],
                "stopping_strategy": "all_exhausted",
            },
        },
        "tokenizer": {
            "name": "builtin:tiny-qwen3",
            "trust_remote_code": False,
            "chat_template": str(TINY_MODEL / "chat_template.jinja"),
        },
        "model.lora": {
            "rank": 4,
            "alpha": 8.0,
            "dropout": 0.0,
            "target_modules": ["q_proj", "v_proj"],
            "modules_to_save": ["norm"],
        },
        "model.ac": {"mode": "selective", "freq": 1, "targets": ["norm", "mlp"]},
        "ckpt": {
            "output_dir": str(out / "chat-checkpoints"),
            "interval": 1,
            "keep_last": 1,
            "keep_interval": 1,
            "skip_progress": False,
            "skip_scheduler": False,
            "skip_dataloader": False,
            "skip_optimizer": False,
        },
    }


def run_chat_and_resume(out: Path, recorder: FieldRecorder) -> None:
    settings = _chat_settings(out, _chat_dir(out / "chat"))
    assert train_recorded(recorder, tiny_config(out, "chat", settings)) == 0
    checkpoints = out / "chat-checkpoints"
    assert (checkpoints / "step_1").is_dir() and (checkpoints / "step_2").is_dir()

    # The same run again from step 1, leaving the schedule and the data position behind.
    resumed = {
        **settings,
        "ckpt": {**settings["ckpt"], "skip_scheduler": True, "skip_dataloader": True},
        "resume": {"step": 1},
    }
    assert train_recorded(recorder, tiny_config(out, "chat", resumed)) == 0

    # Another run forked from this one's step 2, with sign-SGD (so no optimizer state).
    forked = {
        **settings,
        "optim": {"type": "sign_sgd", "lr": 1e-4},
        "scheduler": {"type": "constant"},
        "ckpt": {
            **settings["ckpt"],
            "output_dir": str(out / "fork-checkpoints"),
            "skip_optimizer": True,
            "skip_progress": True,
        },
        "resume": {"dir": str(checkpoints / "step_2")},
        "max_steps": 1,
    }
    assert train_recorded(recorder, tiny_config(out, "fork", forked)) == 0


COMPILED = {"model.compile": {"fullgraph": False}, "max_steps": 1}


def moe_settings(out: Path) -> dict:
    """A local MoE model without weights: router settings, random_init, activation offloading
    (shared with the RL trainer's runs)."""
    return {
        "model.name": str(_moe_dir(out / "tiny-moe")),
        "tokenizer.name": "builtin:tiny-qwen3",
        "model.debug.random_init": True,
        "model.moe_router_dtype": "float32",
        "model.freeze_moe_router": True,
        "model.moe_use_grouped_mm": False,
        "model.optimization_dtype": "float32",
        "model.reduce_dtype": "float32",
        "model.dp_replicate": 1,
        "model.reshard_after_forward": False,
        "model.fsdp_cpu_offload": False,
        "model.optim_cpu_offload": True,
        "model.ac": {"mode": "full"},
        "model.ac_offloading": {"pin_memory": False},
        "max_steps": 1,
    }


def run_compiled(out: Path, recorder: FieldRecorder) -> None:
    assert train_recorded(recorder, tiny_config(out, "compiled", COMPILED)) == 0


def run_moe(out: Path, recorder: FieldRecorder) -> None:
    assert train_recorded(recorder, tiny_config(out, "moe", moe_settings(out))) == 0


def run_command_line(out: Path, recorder: FieldRecorder, mp: pytest.MonkeyPatch) -> None:
    """`sft FILE` with dry_run = true in the file: the entrypoint reads it and stops."""
    import trainspec.cli.check as front  # the entrypoint checks its config here
    from trainspec.trainers.sft.main import main

    real_check = front.check_sources

    def recording_check(kind, sources):
        outcome = real_check(kind, sources)
        if outcome.config is not None:
            outcome.config = recorder.wrap(outcome.config)
        return outcome

    mp.setattr(front, "check_sources", recording_check)
    path = out / "dry.toml"
    path.write_text(f'dry_run = true\noutput_dir = "{out / "dry"}"\n')
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main([str(path)]) == 0
    assert json.loads(stdout.getvalue())["dry_run"] is True
    assert not (out / "dry").exists()


def run_launcher(out: Path, recorder: FieldRecorder, mp: pytest.MonkeyPatch) -> None:
    """The launcher's reading of both deployments, without starting torchrun."""
    from trainspec.trainers.sft.main import launch, launch_config, processes

    multi = tiny_config(
        out,
        "multi",
        {
            "deployment": {
                "type": "multi_node",
                "num_train_nodes": 2,
                "gpus_per_node": 2,
                "nodes_per_fsdp_group": 1,
            },
        },
    )
    assert multi.model.dp_replicate == 2  # what nodes_per_fsdp_group became
    assert processes(recorder.wrap(multi).deployment) == (2, 2)
    mp.delenv("MASTER_ADDR", raising=False)
    mp.delenv("LOCAL_RANK", raising=False)
    assert launch(recorder.wrap(multi)) == 2  # refused: no MASTER_ADDR naming node 0
    mp.setenv("MASTER_ADDR", "10.0.0.1")
    settings = launch_config(recorder.wrap(multi))
    assert (settings.max_nodes, settings.nproc_per_node) == (2, 2)

    single = tiny_config(out, "single", {"deployment": {"num_train_gpus": 2, "gpus_per_node": 2}})
    assert processes(recorder.wrap(single).deployment) == (1, 2)
    assert launch_config(recorder.wrap(single)).max_nodes == 1

    # [slurm]: dry runs write the job script of each deployment (tests/trainers/slurm submit
    # real ones)
    mp.setattr("trainspec.trainers.slurm.submit.partition_gpus", lambda partition: False)
    slurm = {"job_name": "j", "partition": "p", "nodelist": "n1", "exclude": "n2", "account": "a",
             "time": "1:00", "pre_run_command": "true", "project_dir": str(out),
             "template_path": None, "cleanup_grace_period": 5, "shared_fs": True}  # fmt: skip
    for name, deployment in (("slurm-one", single), ("slurm-two", multi)):
        config = tiny_config(out, name, {"slurm": slurm, "dry_run": True})
        config = config.model_copy(update={"deployment": deployment.deployment})
        assert launch(recorder.wrap(config)) == 0
        assert "#SBATCH --job-name=j" in (out / "outputs" / name / "sft.sbatch").read_text()


ARITH = Path(__file__).resolve().parents[2] / "configs" / "rl" / "arith"


def online_eval_settings(out: Path) -> dict:
    """[eval] with a built-in taskset and a source of your own data and reward, every key of
    each source written; a bare [inference] (on CPU: the evals run in process)."""
    data = {"name": str(ARITH / "test.jsonl"), "prompt": "prompt", "split": "train",
            "subset": "None", "system_prompt": "Add."}  # fmt: skip
    return {
        "eval": {
            "interval": 2,
            "num_examples": 2,
            "group_size": 1,
            "skip_first_step": False,
            "retrigger_on_resume": True,
            "sampling": {"temperature": "None", "max_completion_tokens": 3, "extra_body": {}},
            "env_server_base_port": 5000,
            "concurrency": {"max_inflight": 8},
            "source": [
                {
                    "name": "rt",
                    "env": {"taskset": {"id": "builtin:reverse-text", "split": "test"}},
                    "ratio": 1.0,
                    "num_examples": 2,
                    "group_size": 2,
                    "interval": 1,
                    "sampling": {"temperature": 1.0, "max_completion_tokens": 2},
                },
                {
                    "name": "sums",
                    "data": data,
                    "reward": ["math_answer"],
                    "reward_weights": [1.0],
                },
            ],
        },
        "inference": {},
        "ckpt": {},
    }


def run_online_evals(out: Path, recorder: FieldRecorder) -> None:
    """Two steps with online evals, then the same run extended by a step (a resumed start)."""
    settings = online_eval_settings(out)
    config = tiny_config(out, "evals", settings)
    assert train_recorded(recorder, config) == 0
    extended = tiny_config(out, "evals", {**settings, "max_steps": 3})
    assert train_recorded(recorder, extended) == 0
    run = Path(config.output_dir) / config.run.dir
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # rt every step, sums every 2; retrigger_on_resume evaluates step 2 again on the resume
    evaluated = [(r["step"], sorted(k for k in r if k.endswith("/reward"))) for r in records
                 if "eval_reward" in r]  # fmt: skip
    assert evaluated == [
        (0, ["eval/rt/reward", "eval/sums/reward"]),
        (1, ["eval/rt/reward"]),
        (2, ["eval/rt/reward", "eval/sums/reward"]),
        (2, ["eval/rt/reward", "eval/sums/reward"]),
        (3, ["eval/rt/reward", "eval/sums/reward"]),
    ]
