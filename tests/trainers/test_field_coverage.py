"""Every field counts: each leaf of the SFT schema is consumed by a named trainer component, or,
set to a value this device and build cannot honour, refused at start naming the field and why.

How it is proven, with no list that could lie:

* consumption: tiny in-process runs of the real trainer (`train`, `launch`, the `sft`
  entrypoint, the launcher's `processes` / `launch_config`) read the config through a
  recording proxy (field_recorder.py), which notes each field read and the module reading it;
  together the runs set every variant (each optimizer, scheduler, data type, ...) and every
  optional table;
* refusals: `train` must raise SetupError(s) whose path is the field, with a problem and a fix;
  a refused table covers the keys under it (none of them can be set without it);
* config rules: a field the config layer consumes on the trainer's behalf is listed with the
  rule, and the rule must run for SFT and mention the field;
* renamed keys (`x-trainspec-renamed` in the schema) must be rejected by `load` naming the key.

    .venv/bin/python -m pytest tests/trainers/test_field_coverage.py -q

The consumption runs happen once per module (fixtures `consumed` and `refused`); the tests only
look at what they recorded. One run compiles a block (about 20 s on two cold CPU cores).
"""

from __future__ import annotations

import contextlib
import http.server
import importlib.machinery
import inspect
import io
import json
import logging
import os
import sys
import threading
import types
from pathlib import Path

import pytest
import torch
from field_recorder import FieldRecorder

from trainspec.config import ConfigError, load
from trainspec.config.schema_info import schema_info
from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.errors import SetupError, SetupErrors
from trainspec.trainers.world import close_world

torch.set_num_threads(1)

SCHEMA = schema_info("sft")
LEAVES = sorted(".".join(path) for path in SCHEMA.keys if not SCHEMA.children.get(path))
# Old names the config layer rejects with their new name; they never reach a trainer.
RENAMED = {".".join(path): info.renamed_to for path, info in SCHEMA.keys.items() if info.renamed_to}

# Fields the config layer's rules consume for the trainer: path -> rule (in the SFT pipeline).
CONSUMED_BY_RULES = {
    "deployment.nodes_per_fsdp_group": "auto_setup_deployment",  # sets model.dp_replicate
}

TINY_MODEL = builtin_model_dir("builtin:tiny-qwen3")
TINY = {
    "model.name": "builtin:tiny-qwen3",
    "model.seq_len": 32,
    "model.compile": None,
    "model.ac": None,
    "model.ac_offloading": None,
    "model.debug.num_layers": 1,
    "data.type": "fake",
    "data.seq_len": 32,
    "data.batch_size": 2,
    "data.micro_batch_size": 1,
    "optim.lr": 1e-3,
    "max_steps": 2,
    "log.interval": 0.001,
}

# -- refusals: (path the error must name, settings that ask for it, CPU-only refusal) ----------

REFUSALS = [
    ("model.impl", {"model.impl": "custom"}, False),
    ("model.conversion_dir", {"model.conversion_dir": "/nonexistent/converted"}, False),
    ("model.attn", {"model.attn": "flash_attention_2"}, True),
    ("model.attn", {"model.attn": "flash_attention_3"}, True),
    ("model.attn", {"model.attn": "flash_attention_4"}, True),
    (
        "model.vlm",
        {
            "model.impl": "custom",
            "model.optimization_dtype": "bfloat16",
            "model.reduce_dtype": "bfloat16",
            "model.vlm": {
                "vision_encoder_attr": "model.visual",
                "language_model_attr": "model.language_model",
                "freeze_vision_encoder": False,
            },
        },
        False,
    ),
    ("model.full_offload", {"model.full_offload": True, "model.optim_cpu_offload": False}, False),
    (
        "model.full_offload",
        {
            "model.full_offload": {"cpu_optimizer_backend": "torch", "numa_bind": False},
            "model.optim_cpu_offload": False,
        },
        False,
    ),
    ("model.quantization", {"model.quantization": {"type": "fp8"}}, False),
    (
        "model.quantization",
        {
            "model.quantization": {
                "type": "mxfp8",
                "enable_grouped_gemm": False,
                "ignore_patterns": ["lm_head"],
                "recipe": "mxfp8_rceil_wgrad_with_hp",
                "enable_a2a": False,
            }
        },
        False,
    ),
    ("model.index_cache", {"model.index_cache": {"topk_freq": 2, "topk_pattern": "x"}}, False),
    ("model.cp", {"model.cp": 2, "model.cp_style": "ulysses"}, False),
    ("model.ep", {"model.ep": 2}, False),
    (
        "model.ep_comm_backend",
        {
            "model.ep_comm_backend": "deepep",
            "model.deepep_num_sms": 24,
            "model.deepep_token_chunk_size": 128,
            "optim.max_norm": None,
        },
        False,
    ),
    ("model.moe_fused_kernel", {"model.moe_fused_kernel": True}, False),
    (
        "model.ac_offloading.max_inflight_activations",
        {"model.ac_offloading": {"max_inflight_activations": 2}},
        False,
    ),
    ("model.dp_replicate", {"model.dp_replicate": 2}, False),
    ("model.debug.force_balanced_routing", {"model.debug.force_balanced_routing": True}, False),
    ("memory_profiler_path", {"memory_profiler_path": "PROFILE"}, True),
    ("renderer.name", {"renderer.name": "qwen3"}, False),
    ("renderer.thinking_retention", {"renderer.thinking_retention": "all"}, False),
    ("weight_broadcast", {"weight_broadcast": {"type": "filesystem"}}, False),
    (
        "weight_broadcast",
        {
            "weight_broadcast": {
                "type": "nccl",
                "host": "127.0.0.1",
                "port": 29999,
                "timeout": 5,
                "inference_world_size": 2,
                "quantize_in_weight_transfer": True,
            }
        },
        False,
    ),
    (
        "weight_broadcast",
        {"weight_broadcast": {"type": "nixl", "session_id": "s", "inference_world_size": 2}},
        False,
    ),
]


def _refusal_id(row) -> str:
    path, settings, _ = row
    value = settings.get(path)
    if isinstance(value, dict):
        value = value.get("type", "on")
    return f"{path}={value}"


REFUSAL_IDS = [_refusal_id(row) for row in REFUSALS]
assert len(set(REFUSAL_IDS)) == len(REFUSAL_IDS), REFUSAL_IDS


def _applies_here(cpu_only: bool) -> bool:
    return not (cpu_only and torch.cuda.is_available())


REFUSED_PATHS = {path for path, _, cpu_only in REFUSALS if _applies_here(cpu_only)}


# -- helpers ----------------------------------------------------------------------------------


def _config(out: Path, name: str, settings: dict):
    merged = {**TINY, "output_dir": str(out / "outputs"), "run.name": name, **settings}
    return load("sft", [], merged).config


def _train(recorder: FieldRecorder, config) -> int:
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
def _heartbeat_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ping"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def _isolated():
    """Undo what a trainer run changes in this process: environment, logging, matmul precision,
    and the wandb module; yields a MonkeyPatch for more."""
    env = dict(os.environ)
    precision = torch.get_float32_matmul_precision()
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in ("trainspec", "verifiers")}
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(sys.modules, "wandb", _fake_wandb())
            yield mp
    finally:
        close_world()
        os.environ.clear()
        os.environ.update(env)
        torch.set_float32_matmul_precision(precision)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(root_level)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


# -- the consumption runs ---------------------------------------------------------------------


def _everything_on(out: Path, recorder: FieldRecorder, heartbeat_url: str) -> None:
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
                "name": "everything",
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
        "clean": True,
        "run.dir": "everything-dir",
        "model.ac": {"mode": "full", "freq": 1},
        "model.fused_lm_head_token_chunk_size": 16,
        "model.trust_remote_code": False,
        "env_vars": {"TRAINSPEC_FIELD_COVERAGE": "1"},
        "deployment": {"type": "single_node", "num_train_gpus": 1, "gpus_per_node": 1},
    }
    config = _config(out, "everything", settings)
    stale = Path(config.output_dir) / config.run.dir / "stale"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier run")
    assert launch(recorder.wrap(config)) == 0
    assert not stale.exists()  # clean = true emptied the run directory first
    close_world()


def _sgd_linear(out: Path, recorder: FieldRecorder) -> None:
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
    assert _train(recorder, _config(out, "sgd", settings)) == 0


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


def _chat_and_resume(out: Path, recorder: FieldRecorder) -> None:
    settings = _chat_settings(out, _chat_dir(out / "chat"))
    assert _train(recorder, _config(out, "chat", settings)) == 0
    checkpoints = out / "chat-checkpoints"
    assert (checkpoints / "step_1").is_dir() and (checkpoints / "step_2").is_dir()

    # The same run again from step 1, leaving the schedule and the data position behind.
    resumed = {
        **settings,
        "ckpt": {**settings["ckpt"], "skip_scheduler": True, "skip_dataloader": True},
        "resume": {"step": 1},
    }
    assert _train(recorder, _config(out, "chat", resumed)) == 0

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
    assert _train(recorder, _config(out, "fork", forked)) == 0


def _compiled(out: Path, recorder: FieldRecorder) -> None:
    settings = {"model.compile": {"fullgraph": False}, "max_steps": 1}
    assert _train(recorder, _config(out, "compiled", settings)) == 0


def _moe(out: Path, recorder: FieldRecorder) -> None:
    """A local MoE model without weights: router settings, random_init, activation offloading."""
    settings = {
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
    assert _train(recorder, _config(out, "moe", settings)) == 0


def _command_line(out: Path, recorder: FieldRecorder, mp: pytest.MonkeyPatch) -> None:
    """`sft FILE` with dry_run = true in the file: the entrypoint reads it and stops."""
    import trainspec.cli.entrypoint as entrypoint
    from trainspec.trainers.sft.main import main

    real_check = entrypoint.check_sources

    def recording_check(kind, sources):
        outcome = real_check(kind, sources)
        if outcome.config is not None:
            outcome.config = recorder.wrap(outcome.config)
        return outcome

    mp.setattr(entrypoint, "check_sources", recording_check)
    path = out / "dry.toml"
    path.write_text(f'dry_run = true\noutput_dir = "{out / "dry"}"\n')
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main([str(path)]) == 0
    assert json.loads(stdout.getvalue())["dry_run"] is True
    assert not (out / "dry").exists()


def _launcher(out: Path, recorder: FieldRecorder, mp: pytest.MonkeyPatch) -> None:
    """The launcher's reading of both deployments, without starting torchrun."""
    from trainspec.trainers.sft.main import launch, launch_config, processes

    multi = _config(
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

    single = _config(out, "single", {"deployment": {"num_train_gpus": 2, "gpus_per_node": 2}})
    assert processes(recorder.wrap(single).deployment) == (1, 2)
    assert launch_config(recorder.wrap(single)).max_nodes == 1


@pytest.fixture(scope="module")
def consumed(tmp_path_factory) -> FieldRecorder:
    """Every field the consumption runs read, and who read it."""
    out = tmp_path_factory.mktemp("consumed")
    recorder = FieldRecorder()
    with _isolated() as mp, _heartbeat_server() as url:
        _everything_on(out, recorder, url)
        _sgd_linear(out, recorder)
        _chat_and_resume(out, recorder)
        _moe(out, recorder)
        _compiled(out, recorder)
        _command_line(out, recorder, mp)
        _launcher(out, recorder, mp)
    return recorder


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> tuple[dict[str, BaseException | None], FieldRecorder]:
    """What `train` raised for each refusal row, and the fields it read on the way."""
    out = tmp_path_factory.mktemp("refused")
    recorder = FieldRecorder()
    outcomes: dict[str, BaseException | None] = {}
    with _isolated():
        for row_id, (_, settings, cpu_only) in zip(REFUSAL_IDS, REFUSALS, strict=True):
            if not _applies_here(cpu_only):
                continue
            if settings.get("memory_profiler_path") == "PROFILE":
                settings = {**settings, "memory_profiler_path": str(out / "memory.pickle")}
            config = _config(out, row_id.replace("=", "-").replace(".", "-"), settings)
            try:
                _train(recorder, config)
                outcomes[row_id] = None
            except (SetupError, SetupErrors) as err:
                outcomes[row_id] = err
    return outcomes, recorder


def _refused_by(leaf: str) -> str | None:
    for path in REFUSED_PATHS:
        if leaf == path or leaf.startswith(path + "."):
            return path
    return None


def _how_consumed(leaf: str, consumed: FieldRecorder, refused_reads: FieldRecorder) -> str | None:
    if consumed.readers(leaf):
        return "read by " + ", ".join(sorted(consumed.readers(leaf)))
    if _refused_by(leaf):
        return f"refused with {_refused_by(leaf)}"
    if leaf in CONSUMED_BY_RULES:
        return f"consumed by the rule {CONSUMED_BY_RULES[leaf]}"
    if leaf in RENAMED:
        return f"renamed to {RENAMED[leaf]}"
    if refused_reads.readers(leaf):
        return "read only while refusing another field, by " + ", ".join(
            sorted(refused_reads.readers(leaf))
        )
    return None


# -- the tests --------------------------------------------------------------------------------


def test_the_schema_has_leaves():
    assert len(LEAVES) > 100
    assert "optim.betas1" in LEAVES and "env_vars" in LEAVES and "model" not in LEAVES


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_is_consumed_or_refused(leaf, consumed, refused):
    _, refused_reads = refused
    assert _how_consumed(leaf, consumed, refused_reads) is not None, (
        f"{leaf} is neither read by a trainer component nor refused at start"
    )


def test_every_leaf_counts(consumed, refused):
    """One report of all the leaves nothing consumes (the parametrized test names each)."""
    _, refused_reads = refused
    table = {leaf: _how_consumed(leaf, consumed, refused_reads) for leaf in LEAVES}
    print("\n".join(f"{leaf}: {how or 'NOT CONSUMED'}" for leaf, how in table.items()))
    missing = [leaf for leaf, how in table.items() if how is None]
    assert not missing, f"{len(missing)} leaves silently ignored:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize(("path", "settings", "cpu_only"), REFUSALS, ids=REFUSAL_IDS)
def test_refused_at_start(path, settings, cpu_only, refused, request):
    if not _applies_here(cpu_only):
        pytest.skip(f"{path} is honoured on this device")
    outcomes, _ = refused
    err = outcomes[request.node.callspec.id]
    assert err is not None, f"train() accepted {path} = {settings[path]!r}"
    errors = err.errors if isinstance(err, SetupErrors) else [err]
    named = [e for e in errors if e.path == path]
    assert named, f"no refusal names {path}: {[e.path for e in errors]}"
    assert all(e.problem.strip() and e.fix.strip() for e in named)


@pytest.mark.parametrize(("path", "rule_name"), sorted(CONSUMED_BY_RULES.items()))
def test_rule_consumes_the_field(path, rule_name):
    from trainspec.validators.pipeline import rules_for

    rules = {rule.__name__: rule for rule in rules_for("sft")}
    assert rule_name in rules, f"{rule_name} is not an SFT rule"
    assert path.rsplit(".", 1)[-1] in inspect.getsource(rules[rule_name])
    assert tuple(path.split(".")) in SCHEMA.keys


@pytest.mark.parametrize("path", sorted(RENAMED))
def test_renamed_key_is_rejected(path):
    *parent, old = path.split(".")
    settings = {path: 1}
    tags = SCHEMA.variants.get(tuple(parent), {})
    owner = [tag for tag, keys in tags.items() if old in keys]
    if owner:  # a key of one variant: set that variant, so only the rename is wrong
        settings[".".join([*parent, "type"])] = owner[0]
    with pytest.raises(ConfigError) as info:
        load("sft", [], settings)
    messages = [str(issue) for issue in info.value.errors if issue.path == path]
    assert messages and RENAMED[path] in " ".join(messages), messages


def test_recorded_paths_are_schema_keys(consumed, refused):
    _, refused_reads = refused
    recorded = consumed.paths() | refused_reads.paths()
    unknown = sorted(p for p in recorded if tuple(p.split(".")) not in SCHEMA.keys)
    assert not unknown, f"read paths the schema does not have: {unknown}"


def test_components_do_not_write_the_config(consumed, refused):
    _, refused_reads = refused
    writes = {**consumed.writes, **refused_reads.writes}
    assert not writes, f"trainer components changed the config: {dict(writes)}"
