"""The consumption runs of test_rl_field_coverage.py: tiny real runs of the RL trainer and of the
orchestrator that together set every variant and optional table, read through a FieldRecorder.

Trainer runs use synthetic rollouts (`[data.fake]`) or, to read the transport settings, real
batches sent beforehand through the configured transport (`rollouts_sent`): the filesystem
sender leaves files the trainer consumes and deletes, the ZeroMQ sender serves them from its
thread while the trainer runs. Orchestrator runs sample from the weights a trainer run broadcast
(`broadcast_policy`), with the in-process sampler or against a fake OpenAI-compatible server,
while a stand-in trainer in a thread receives their batches through the transport and publishes
the next step's weights (`trainer_stand_in`). Each run checks that what its settings ask for
happened (files, metrics, requests, batches), so a run that skipped its subject fails rather
than merely recording reads.

Reused: field_recorder.py and field_runs.py (tests/trainers/, the SFT proof), rl_support.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from helpers.field_recorder import FieldRecorder
from helpers.field_runs import COMPILED, TINY_MODEL, TINY_TRAINER, moe_settings, shared_tables_on
from helpers.ports import free_port
from rl_support import metrics, rollout

from trainspec.config import load
from trainspec.trainers.core.world import close_world
from trainspec.trainers.orchestrator.sampling.http_server import HttpServer
from trainspec.trainers.wire.batch import RolloutBatch
from trainspec.trainers.wire.broadcast import ready_steps
from trainspec.trainers.wire.transport import build_receiver, build_sender

TINY_RL = {
    **TINY_TRAINER,
    "model.seq_len": 64,  # the rows of rl_support.rollout
    "data.fake": {"batch_size": 2},
}
REVERSE_TEXT = {"env": {"taskset": {"id": "builtin:reverse-text"}}}
TINY_ORCHESTRATOR = {
    "model.name": "builtin:tiny-qwen3",
    "sampler": {"type": "local", "device": "cpu"},
    "train.sampling.max_completion_tokens": 4,
    "train.source": [REVERSE_TEXT],
    "batch_size": 4,
    "group_size": 2,
    "seq_len": 64,
    "micro_batch_size": 2,
    "max_steps": 2,
    "rollout_transport": {"type": "filesystem"},
    "log.interval": 0.001,
}

# -- helpers ----------------------------------------------------------------------------------


def rl_config(out: Path, name: str, settings: dict):
    return load("rl", [], {**TINY_RL, "output_dir": str(out / name), **settings}).config


def train_recorded(recorder: FieldRecorder, config) -> int:
    from trainspec.trainers.rl.train import train

    try:
        return train(recorder.wrap(config))
    finally:
        close_world()  # train() closes it itself, but not when it raises


def orchestrator_config(out: Path, name: str, settings: dict):
    merged = {**TINY_ORCHESTRATOR, "output_dir": str(out / name), **settings}
    return load("orchestrator", [], merged).config


def run_orchestrator_recorded(recorder: FieldRecorder, config, policy: Path) -> int:
    """`run` with a stand-in trainer feeding it `policy`'s weights (see `trainer_stand_in`)."""
    from trainspec.trainers.orchestrator.loop import run

    with signals_kept(), trainer_stand_in(config, policy):
        return run(recorder.wrap(config))


@contextlib.contextmanager
def trainer_stand_in(config, policy: Path) -> Iterator[list[RolloutBatch]]:
    """The trainer's side of an orchestrator run, in a thread, without training: step 0's
    weights are there from the start; for every step it receives each rank's batch through the
    transport, commits it and publishes the next step's weights (a link to `policy`'s broadcast
    of that step). Yields the batches received, in order."""
    run_dir = Path(config.output_dir)
    broadcasts = run_dir / "broadcasts"
    broadcasts.mkdir(parents=True)

    def publish(step: int) -> None:
        source = policy / "broadcasts" / f"step_{step}"
        (broadcasts / source.name).symlink_to(source, target_is_directory=True)

    publish(0)
    finished = threading.Event()
    received: list[RolloutBatch] = []
    failed: list[BaseException] = []

    def serve() -> None:
        ranks = range(config.num_train_workers)
        receivers = [build_receiver(config.rollout_transport, run_dir, rank) for rank in ranks]
        try:
            for step in range(config.max_steps):
                for receiver in receivers:
                    batch = receiver.receive(step, finished.is_set)
                    if batch is None:
                        return
                    received.append(batch)
                    receiver.commit(step + 1)
                publish(step + 1)
        except BaseException as error:  # reported in the test's thread
            failed.append(error)
        finally:
            for receiver in receivers:
                receiver.close()

    thread = threading.Thread(target=serve, name="trainer-stand-in", daemon=True)
    thread.start()
    try:
        yield received
    finally:
        finished.set()
        thread.join(timeout=30)
    if failed:
        raise failed[0]


@contextlib.contextmanager
def signals_kept() -> Iterator[None]:
    """The orchestrator's stop flag takes SIGINT and SIGTERM for good; give them back."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def rollouts_sent(config) -> Iterator[object]:
    """A sender of `config.rollout_transport` holding every step's batch for one trainer rank
    (rl_support.rollout), open while the trainer runs; built from the plain config, so the
    test's reads are not the trainer's."""
    sender = build_sender(config.rollout_transport, Path(config.output_dir), 1)
    try:
        for step in range(config.max_steps):
            sender.send(step, 0, rollout(step)[0])
        yield sender
    finally:
        sender.close()


def sent_rewards(steps: int) -> list[float]:
    return [rollout(step)[0].reward for step in range(steps)]


def broadcast_policy(out: Path) -> Path:
    """A trainer run (not recorded) that broadcasts the weights of steps 0..2, for the
    orchestrator runs to sample from."""
    config = rl_config(out, "policy", {})
    from trainspec.trainers.rl.train import train

    try:
        assert train(config) == 0
    finally:
        close_world()
    policy = Path(config.output_dir)
    assert ready_steps(policy) == [0, 1, 2]
    return policy


class FakeCompletionsServer:
    """A vLLM-like OpenAI completions server in a thread: completion j of prompt i is the
    prompt's last max_tokens - 1 tokens reversed, ended by the stop token for even j (odd j run
    into max_tokens); any other POST (a weight reload) answers {}. `requests` keeps (path, body,
    headers)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict, dict]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, body, dict(self.headers)))
                answer = (
                    {"choices": fake.choices(body)} if self.path.endswith("/completions") else {}
                )
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                """vLLM's /metrics (a KV cache 10% used), what the adaptive cap reads."""
                if self.path != "/metrics":
                    self.send_response(404)
                    self.end_headers()
                    return
                data = b'vllm:kv_cache_usage_perc{engine="0"} 0.1\n'
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.httpd = HttpServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @staticmethod
    def choices(body: dict) -> list[dict]:
        (stop,) = body["stop_token_ids"]
        keep = body["max_tokens"] - 1
        choices = []
        for prompt in body["prompt"]:
            for j in range(body["n"]):
                ids = prompt[-keep:][::-1] + ([stop] if j % 2 == 0 else [prompt[0]])
                logprobs = [-0.5 - k / 10 for k in range(len(ids))]
                choices.append(
                    {
                        "index": len(choices),
                        "logprobs": {
                            "token_logprobs": logprobs,
                            "tokens": [f"token_id:{t}" for t in ids],
                        },
                        "finish_reason": "stop" if j % 2 == 0 else "length",
                    }
                )
        return choices

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- the RL trainer's consumption runs --------------------------------------------------------


def run_everything_on(out: Path, recorder: FieldRecorder, heartbeat_url: str) -> None:
    """AdamW, constant schedule, packed fake samples, the default loss with its thresholds set,
    token export and every side table; through `launch` so env_vars is read where the command
    reads it."""
    from trainspec.trainers.rl.main import launch

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
        "data.fake": {"batch_size": 2, "generate_samples": True},
        "loss": {
            "type": "default",
            "dppo_mask_low": 0.1,
            "dppo_mask_high": 0.3,
            "adv_tau": 0.5,
            "kl_tau": 0.01,
        },
        "enable_token_export": True,
        **shared_tables_on(out, heartbeat_url, "rl-everything"),
        "weight_broadcast": {"type": "filesystem"},
    }
    config = rl_config(out, "everything", settings)
    assert launch(recorder.wrap(config)) == 0
    close_world()
    run_dir = Path(config.output_dir)
    assert os.environ.get("TRAINSPEC_FIELD_COVERAGE") == "1"
    assert sorted(p.name for p in (run_dir / "token_export").iterdir()) == [
        "step_0.rank_0.jsonl",
        "step_1.rank_0.jsonl",
    ]
    assert [m["step"] for m in metrics(run_dir, "metrics-file.jsonl")] == [1, 2]
    assert ready_steps(run_dir) == [0, 1, 2]


def run_filesystem_transport(out: Path, recorder: FieldRecorder) -> None:
    """SGD, linear schedule, the IPO loss, rollouts through files under the run directory."""
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
        "loss": {"type": "ipo", "ipo_threshold": 0.2, "adv_tau": 1.0, "kl_tau": 0.0},
        "data.fake": None,
        "rollout_transport": {"type": "filesystem"},
        "model.fused_lm_head_token_chunk_size": "disabled",
        "control": None,
        "gc": None,
    }
    config = rl_config(out, "filesystem", settings)
    with rollouts_sent(config):
        assert train_recorded(recorder, config) == 0
    run_dir = Path(config.output_dir)
    assert not list((run_dir / "rollouts").rglob("*.bin"))  # consumed and committed
    assert [m["reward"] for m in metrics(run_dir)] == sent_rewards(2)


def run_zmq_transport(out: Path, recorder: FieldRecorder) -> None:
    """Muon, cosine schedule, a custom loss (the IPO loss imported by path, with its keyword
    arguments), LoRA, selective activation checkpointing, an explicit tokenizer, and rollouts
    served over ZeroMQ."""
    settings = {
        "optim": {"type": "muon", "lr": 1e-3, "mu": 0.9, "betas1": 0.9, "betas2": 0.99},
        "scheduler": {"type": "cosine", "warmup_steps": 1, "min_lr": 1e-5},
        "loss": {
            "type": "custom",
            "import_path": "trainspec.trainers.rl.loss:ipo_loss",
            "kwargs": {"threshold": 0.2, "adv_tau": 1.0, "kl_tau": 0.001},
        },
        "data.fake": None,
        "rollout_transport": {"type": "zmq", "host": "127.0.0.1", "port": free_port(), "hwm": 2},
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
    }
    config = rl_config(out, "zmq", settings)
    with rollouts_sent(config) as sender:
        assert train_recorded(recorder, config) == 0
        assert sender.ready_steps() == 0  # every step consumed and committed
    rows = metrics(Path(config.output_dir))
    assert [m["reward"] for m in rows] == sent_rewards(2)
    assert all("masked_fraction" in m for m in rows)  # the imported loss's metrics


def _ckpt_settings(out: Path) -> dict:
    return {
        "ckpt": {
            "output_dir": str(out / "rl-checkpoints"),
            "interval": 1,
            "keep_last": 1,
            "keep_interval": 1,
            "skip_progress": False,
            "skip_scheduler": False,
            "skip_dataloader": False,
            "skip_optimizer": False,
        },
    }


def run_checkpoint_and_resume(out: Path, recorder: FieldRecorder) -> None:
    """Checkpoints every step, a resume from step 1, and a fork from another run's step 2 with
    sign-SGD (so no optimizer state)."""
    settings = _ckpt_settings(out)
    assert train_recorded(recorder, rl_config(out, "ckpt", settings)) == 0
    checkpoints = out / "rl-checkpoints"
    assert (checkpoints / "step_1").is_dir() and (checkpoints / "step_2").is_dir()

    resumed = {
        **settings,
        "ckpt": {**settings["ckpt"], "skip_scheduler": True, "skip_dataloader": True},
        "resume": {"step": 1},
    }
    assert train_recorded(recorder, rl_config(out, "ckpt", resumed)) == 0
    assert [m["step"] for m in metrics(out / "ckpt")] == [1, 2]  # step 2 again, recorded once

    forked = {
        **settings,
        "optim": {"type": "sign_sgd", "lr": 1e-4},
        "ckpt": {
            **settings["ckpt"],
            "output_dir": str(out / "rl-fork-checkpoints"),
            "skip_optimizer": True,
            "skip_progress": True,
        },
        "resume": {"dir": str(checkpoints / "step_2")},
        "max_steps": 1,
    }
    assert train_recorded(recorder, rl_config(out, "fork", forked)) == 0
    assert (out / "rl-fork-checkpoints" / "step_1").is_dir()  # progress skipped: from step 0


def run_moe(out: Path, recorder: FieldRecorder) -> None:
    """The SFT test's MoE run (router settings, random_init, activation offloading), in RL."""
    assert train_recorded(recorder, rl_config(out, "moe", moe_settings(out))) == 0


def run_compiled(out: Path, recorder: FieldRecorder) -> None:
    assert train_recorded(recorder, rl_config(out, "compiled", COMPILED)) == 0


# -- the orchestrator's consumption runs ------------------------------------------------------


def run_orchestrator_local(
    out: Path, recorder: FieldRecorder, policy: Path, heartbeat_url: str
) -> None:
    """The in-process sampler, held-out evaluation, exact-match reward, two trainer ranks fed
    through files, every side table; through `launch`, the command's entry."""
    from trainspec.trainers.orchestrator.main import launch

    settings = {
        "model": {"name": "builtin:tiny-qwen3", "trust_remote_code": False},
        "sampler": {"type": "local", "device": "cpu"},
        "algo": {"type": "rae", "decay": 0.9, "sampling": {"source": "policy"}},
        "train": {
            "sampling": {"temperature": 0.8, "max_completion_tokens": 4, "extra_body": {}},
            "filter_zero_advantages": False,
            "source": [
                {"env": {"taskset": {"id": "builtin:reverse-text", "reward": "exact_match"}}}
            ],
        },
        "eval": {
            "interval": 1,
            "num_examples": 2,
            "group_size": 1,
            "skip_first_step": False,
            "retrigger_on_resume": True,
            "sampling": {"temperature": "None", "max_completion_tokens": 4},
            "source": [REVERSE_TEXT],
        },
        "ckpt": {"interval": 5, "keep_last": 1, "keep_interval": 10},
        "resume": {},  # the step the trainer resumes from: here its first, 0
        "heartbeat": {"url": heartbeat_url},
        "env_vars": {"TRAINSPEC_FIELD_ENV": "1"},
        "concurrency": {"max_inflight": 2},
        "max_off_policy_steps": 1,
        "pad_to_multiple_of": 2,
        "collect_inference_metrics": True,
        "env_server_base_port": 5000,
        "max_async_level": 1,
        "seed": 3,
        "num_train_workers": 2,
        "rollout_transport": {"type": "filesystem"},
        "weight_broadcast": {"type": "filesystem"},
        "log": {
            "level": "info",
            "vf_level": "warning",
            "json_logging": True,
            "log_data": True,
            "interval": 0.001,
            "ranks_filter": [0],
        },
        "monitors": {
            "file": {"path": "orchestrator-metrics.jsonl"},
            "wandb": {
                "project": "field-coverage",
                "entity": "tests",
                "name": "orchestrator",
                "group": "g",
                "tags": ["o"],
                "offline": True,
            },
        },
    }
    config = orchestrator_config(out, "orchestrator-local", settings)
    try:
        with signals_kept(), trainer_stand_in(config, policy) as received:
            assert launch(recorder.wrap(config)) == 0
        assert os.environ["TRAINSPEC_FIELD_ENV"] == "1"  # env_vars, set by launch
    finally:
        os.environ.pop("TRAINSPEC_FIELD_ENV", None)
    rows = metrics(Path(config.output_dir) / "orchestrator", "orchestrator-metrics.jsonl")
    assert [m["step"] for m in rows if "eval_exact_match" in m] == [0, 1, 2]
    assert [m["step"] for m in rows if "reward" in m] == [1, 2]
    assert [b.step for b in received] == [0, 0, 1, 1]  # one share per trainer rank
    assert {b.temperature for b in received} == {0.8}


def run_orchestrator_openai(
    out: Path, recorder: FieldRecorder, policy: Path, mp: pytest.MonkeyPatch
) -> None:
    """An OpenAI-compatible server (fake, in a thread) told about every broadcast, the LCS
    reward, fully on-policy, batches served over ZeroMQ."""
    mp.setenv("TRAINSPEC_FIELD_KEY", "secret")
    server = FakeCompletionsServer()
    try:
        settings = {
            "sampler": {
                "type": "openai",
                "base_url": server.base_url,
                "model": "served-tiny",
                "api_key_var": "TRAINSPEC_FIELD_KEY",
                "timeout": 30,
                "reload_path": "/update_weights",
            },
            "algo": {
                "type": "grpo",
                "length_penalty": {
                    "type": "linear",
                    "num_output_tokens_weight": 0.2,
                    "num_input_tokens_weight": 0.1,
                    "num_turns_weight": 0.0,
                },
            },
            "train.sampling.extra_body": {"top_k": -1},
            # a cap on the episodes in flight that follows the server's KV-cache usage
            "concurrency": {"initial_inflight": 2, "min_inflight": 2, "max_inflight": 4},
            "max_async_level": 0,
            "rollout_transport": {
                "type": "zmq",
                "host": "127.0.0.1",
                "port": free_port(),
                "hwm": 2,
            },
        }
        config = orchestrator_config(out, "orchestrator-openai", settings)
        with signals_kept(), trainer_stand_in(config, policy) as received:
            from trainspec.trainers.orchestrator.loop import run

            assert run(recorder.wrap(config)) == 0
    finally:
        server.close()
    completions = [r for r in server.requests if r[0] == "/v1/completions"]
    reloads = [Path(r[1]["path"]).name for r in server.requests if r[0] == "/update_weights"]
    assert len(completions) == 4  # a request per prompt under the adaptive cap
    assert all(len(body["prompt"]) == 1 and body["n"] == 2 for _, body, _ in completions)
    logged = metrics(Path(config.output_dir) / "orchestrator")
    caps = [row["inflight_cap"] for row in logged if "reward" in row]
    assert caps[0] == 3.0 and caps[1] in (3.0, 4.0)  # grew from 2: all of it in use, KV 10%
    assert all(body["model"] == "served-tiny" for _, body, _ in completions)
    assert all(body["top_k"] == -1 for _, body, _ in completions)  # train.sampling.extra_body
    assert all(headers["Authorization"] == "Bearer secret" for *_, headers in completions)
    assert reloads == ["step_0", "step_1", "step_2"]
    assert [(b.step, b.policy_step) for b in received] == [(0, 0), (1, 1)]  # on-policy


@contextlib.contextmanager
def served_teacher(policy: Path) -> Iterator[str]:
    """The policy's step-2 weights served for real
    (trainspec.trainers.orchestrator.sampling.model_server) as "teacher", so it disagrees with
    the step-0 policy the runs start from; yields its base URL."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainspec.trainers.chat.prompts import template_stop_id
    from trainspec.trainers.core.tokenizer import build_tokenizer
    from trainspec.trainers.orchestrator.sampling.local_sampler import LocalSampler
    from trainspec.trainers.orchestrator.sampling.model_server import ModelServer

    config = load("orchestrator", [], TINY_ORCHESTRATOR).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    model = AutoModelForCausalLM.from_pretrained(policy / "broadcasts" / "step_2")
    sampler = LocalSampler(
        model.eval(), tokenizer, template_stop_id(tokenizer), torch.device("cpu")
    )
    server = ModelServer(sampler, "teacher").start()
    try:
        yield server.base_url
    finally:
        server.close()


def run_orchestrator_distill(
    out: Path, recorder: FieldRecorder, policy: Path, mp: pytest.MonkeyPatch
) -> None:
    """opd against a served teacher (with every client setting a frozen model honours), sft
    sampling from it, opsd hinting the live policy with the answer, echo on a one-turn source:
    each run's batches carry what its algorithm teaches."""
    from trainspec.trainers.orchestrator.loop import run

    mp.setenv("TRAINSPEC_FIELD_TEACHER_KEY", "k")
    mp.setenv("TRAINSPEC_FIELD_TOKEN", "t")
    with served_teacher(policy) as base_url:
        client = {
            "name": "teacher",
            "base_url": base_url,
            "wait_for_ready_timeout": 30,
            "api_key_var": "TRAINSPEC_FIELD_TEACHER_KEY",
            "headers": {"X-Team": "rl"},
            "headers_from_env": {"X-Token": "TRAINSPEC_FIELD_TOKEN"},
            "extra_headers_from_state": {},
            "skip_model_check": False,
            "admin_base_url": "None",
        }
        runs = {
            "opd": {"type": "opd", "teacher": client, "sampling": {"source": "policy"}},
            "sft": {"type": "sft", "sampling": {"source": client}},
            "opsd": {
                "type": "opsd",
                "demo_key": "answer",
                "template": "Reversed: {demonstration}",
                "renderer": {"name": "auto"},
            },
            "echo": {
                "type": "echo",
                "roles": {
                    "user": {"alpha": 0.2},
                    "system": {"alpha": 0.1},
                    "assistant": {"alpha": 0.3},
                    "tool": {"alpha": 0.4},
                },
                "filter": "None",
                "length_penalty": "None",
            },
        }
        received: dict[str, list[RolloutBatch]] = {}
        for name, algo in runs.items():
            config = orchestrator_config(out, f"orchestrator-{name}", {"algo": algo})
            with signals_kept(), trainer_stand_in(config, policy) as batches:
                assert run(recorder.wrap(config)) == 0
            received[name] = batches
    for name, batches in received.items():
        assert [b.step for b in batches] == [0, 1], name
        mbs = [mb for b in batches for mb in b.micro_batches]
        ce = sum(float((mb.ce_weights * mb.loss_mask).sum()) for mb in mbs)
        tokens = sum(mb.num_loss_tokens for mb in mbs)
        if name == "sft":
            assert ce == tokens > 0  # every sampled token, by imitation
        else:
            assert ce == 0, name
    for name in ("opd", "opsd"):  # per-token advantages: not one value per sample
        mb = received[name][0].micro_batches[0]
        values = {round(float(v), 6) for v in mb.advantages[mb.loss_mask]}
        assert len(values) > 2, (name, values)
    for name in runs:  # the distillations log their KL estimate to the teacher, the others not
        logged = [
            r for r in metrics(out / f"orchestrator-{name}" / "orchestrator") if "reward" in r
        ]
        assert logged and all(("teacher_kl" in r) == (name in ("opd", "opsd")) for r in logged)


def run_orchestrator_environment(out: Path, recorder: FieldRecorder, policy: Path) -> None:
    """A verifiers environment (the trainspec-reverse-text taskset, two turns an episode, the
    `null` harness in a subprocess) as the train source, played against the in-process policy
    served on localhost, and as an eval source played on an env server the orchestrator
    starts for it (its serve table sizes one) at env_server_base_port + 1."""
    agent = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}
    taskset = {"id": "trainspec-reverse-text"}
    base = free_port()
    config = orchestrator_config(
        out,
        "orchestrator-environment",
        {
            "train.source": [{"env": {"taskset": {**taskset, "turns": 2}, "agent": agent}}],
            "train.filter_zero_advantages": False,  # a random policy's rewards are all alike
            "env_server_base_port": base,
            # each episode's chat program is a process of its own (seconds): one step of one
            # group, and evals of one example
            "max_steps": 1,
            "batch_size": 2,
            "eval": {
                "interval": 1,
                "num_examples": 1,
                "sampling": {"max_completion_tokens": 4},
                "source": [
                    {
                        "env": {"taskset": {**taskset, "split": "test"}, "agent": agent},
                        "serve": {"pool": {"type": "static", "num_workers": 1}},
                    }
                ],
            },
        },
    )
    with signals_kept(), trainer_stand_in(config, policy) as batches:
        assert run_orchestrator_plain(recorder, config) == 0
    assert [b.step for b in batches] == [0]
    assert all(b.num_loss_tokens > 0 for b in batches)
    own = out / "orchestrator-environment" / "orchestrator"
    served = json.loads((own / "envs" / "eval" / "trainspec-reverse-text.json").read_text())
    assert served["serve"]["address"] == f"tcp://127.0.0.1:{base + 1}"
    # the evals at steps 0 and 1 (the final weights), an episode each, played there
    log = (own / "envs" / "eval" / "trainspec-reverse-text.log").read_text()
    assert log.count("rollout done") == 2
    logged = metrics(own)
    assert any("eval/trainspec-reverse-text/reward" in r for r in logged)
    assert all("eval/trainspec-reverse-text/exact_match" not in r for r in logged)


def run_orchestrator_plain(recorder: FieldRecorder, config) -> int:
    from trainspec.trainers.orchestrator.loop import run

    return run(recorder.wrap(config))


def run_orchestrator_token_batch(out: Path, recorder: FieldRecorder, policy: Path) -> None:
    """Steps sized by token_batch_size: rounds of prompts until a step holds that many tokens,
    each step's prompt counts written down for a resume."""
    import json

    config = orchestrator_config(
        out,
        "orchestrator-token-batch",
        {"batch_size": "None", "token_batch_size": 150, "train.filter_zero_advantages": False},
    )
    with signals_kept(), trainer_stand_in(config, policy) as batches:
        assert run_orchestrator_plain(recorder, config) == 0
    assert [b.step for b in batches] == [0, 1]
    record = out / "orchestrator-token-batch" / "orchestrator" / "picks.jsonl"
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1]
    logged = [
        r for r in metrics(out / "orchestrator-token-batch" / "orchestrator") if "tokens" in r
    ]
    assert len(logged) == 2 and all(r["tokens"] >= 150 for r in logged)
    assert 0 < lines[0]["used"][0] < lines[1]["used"][0]  # prompts taken, counted on


ARITH = Path(__file__).resolve().parents[3] / "configs" / "rl" / "arith"


def run_orchestrator_data(out: Path, recorder: FieldRecorder, policy: Path) -> None:
    """Sources of your own data and rewards (the arith demo's files), each table of a source
    written out: its name, data, rewards and weights, and its own sampling."""
    data = {"prompt": "prompt", "split": "train", "subset": "None", "system_prompt": "Add."}
    config = orchestrator_config(
        out,
        "orchestrator-data",
        {
            "train.source": [
                {
                    "name": "sums",
                    "data": {"name": str(ARITH / "train.jsonl"), **data},
                    "reward": ["math_answer", f"{ARITH / 'rewards.py'}:close"],
                    "reward_weights": [1.0, 0.1],
                    "ratio": 1.0,
                    "group_size": 2,
                    "sampling": {"temperature": 1.0, "max_completion_tokens": 4, "extra_body": {}},
                }
            ],
            "eval": {
                "source": [
                    {
                        "name": "sums-test",
                        "data": {"name": str(ARITH / "test.jsonl"), **data},
                        "reward": ["math_answer"],
                        "reward_weights": "None",
                        "num_examples": 2,
                        "group_size": 1,
                        "interval": 1,
                        "sampling": {"temperature": "None", "max_completion_tokens": 3},
                    }
                ],
            },
        },
    )
    with signals_kept(), trainer_stand_in(config, policy) as batches:
        assert run_orchestrator_plain(recorder, config) == 0
    assert [b.step for b in batches] == [0, 1]
    logged = metrics(out / "orchestrator-data" / "orchestrator")
    assert any("eval/sums-test/reward" in r for r in logged)
