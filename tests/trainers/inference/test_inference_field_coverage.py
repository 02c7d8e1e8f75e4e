"""Every leaf of the `inference` command's config counts: each is

* read by the command: dry runs of `launch` (the in-process server for the built-in model, vLLM's
  plan for a model with weights with every engine setting written, and a [slurm] job) read the
  config through a recording proxy (tests/helpers/field_recorder.py);
* or refused at start naming it (SetupError from `launch`; a refused table covers the keys
  under it, a refused `type` the keys only its variants have);
* or consumed by a rule that acts differently for two of its values.

    .venv/bin/python -m pytest tests/trainers/inference/test_inference_field_coverage.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.field_leaves import leaves_of
from helpers.field_recorder import FieldRecorder
from helpers.processes import use_stand_in

from trainspec.config import load
from trainspec.config.schema_info import schema_info

SCHEMA = schema_info("inference")
LEAVES = leaves_of(SCHEMA)
VLLM = {
    "model": "Qwen/Qwen3-0.6B",
    "dtype": "float32",
    "max_model_len": 512,
    "chat_template": "{{ messages }}",
    "tool_call_parser": "hermes",
    "reasoning_parser": "deepseek_r1",
    "tensor_parallel_size": 1,
    "data_parallel_size": 1,
    "data_parallel_size_local": 1,
    "data_parallel_rpc_port": 13346,
    "api_server_count": 1,
    "gpu_memory_utilization": 0.2,
    "all2all_backend": "deepep_low_latency",
    "enforce_eager": True,
    "trust_remote_code": True,
    "rope_scaling": {"rope_type": "yarn", "factor": 2.0},
    "seed": 3,
    "enable_prefix_caching": True,
    "quantization": "fp8",
    "enable_expert_parallel": True,
    "enable_eplb": True,
    "enable_dbo": True,
}
SLURM = {"job_name": "j", "partition": "gpu", "nodelist": "n1", "exclude": "n2", "account": "a",
         "time": "1:00:00", "pre_run_command": "echo pre-run", "project_dir": "/p",
         "cleanup_grace_period": 17, "shared_fs": True}  # fmt: skip
RUNS = {
    "local": {"vllm": {"model": "builtin:tiny-qwen3"}, "server": {"host": "127.0.0.2"}},
    "vllm": {
        "vllm": VLLM,
        "env_vars": {"X": "1"},
        "use_deep_gemm": True,
        "log": {"level": "debug"},
        "router": "None",
        "enable_fp32_lm_head": False,
    },
    "slurm": {
        "vllm": {"model": "builtin:tiny-qwen3"},
        "slurm": SLURM,
        "deployment": {"gpus_per_node": 2},
    },  # fmt: skip
}
MULTI = {"type": "multi_node", "num_nodes": 2, "gpus_per_node": 8}
DISAGGREGATED = {
    "type": "disaggregated", "gpus_per_node": 8, "prefill_nodes_per_replica": 1,
    "decode_nodes_per_replica": 1, "num_prefill_replicas": 1, "num_decode_replicas": 1,
    "prefill_port": 8101, "decode_port": 8201, "prefill_env_vars": {"A": "1"},
    "decode_env_vars": {"B": "1"}, "prefill_vllm_overrides": {"x": 1},
    "decode_vllm_overrides": {"y": 1},
}  # fmt: skip
KV = {"cpu": {"num_bytes": 1000}, "disk": {"path": "/tmp/kv"}}
# path the error names -> settings that ask for it (with a model vLLM would serve)
REFUSALS = {
    "deployment.type": {"deployment": MULTI, "slurm": SLURM},
    "kv_cache_offload": {"kv_cache_offload": {"type": "native", **KV}},
    "use_pd_kv_transfer": {"use_pd_kv_transfer": True},
    "weight_broadcast.type": {"weight_broadcast": {"type": "nixl"}},
    "vllm.enable_lora": {"vllm": {"enable_lora": True}},
    "vllm.max_lora_rank": {"vllm": {"max_lora_rank": 8}},
    "vllm.max_loras": {"vllm": {"max_loras": 2}},
    "vllm.max_cpu_loras": {"vllm": {"max_cpu_loras": 2}},
    "vllm.lora_target_modules": {"vllm": {"lora_target_modules": ["q_proj"]}},
    "vllm.enable_return_routed_experts": {"vllm": {"enable_return_routed_experts": True}},
    "router": {"vllm": {"data_parallel_size": 2}},
}
# Refused with another deployment type or router variant, in the in-process server's terms.
VARIANT_REFUSALS = {
    "deployment.type": [{"deployment": DISAGGREGATED, "slurm": SLURM,
                         "router": {"type": "llm-d"}}],  # fmt: skip
    "router.type": [{"router": {"type": "llm-d", "scorers": {"queue-scorer": 1.0},
                                "prefill_scorer_overrides": {}, "decode_scorer_overrides": {},
                                "non_cached_tokens": 8, "decode_sidecar_port": 8301},
                     "deployment": MULTI, "slurm": SLURM}],
    "kv_cache_offload.type": [{"kv_cache_offload": {"type": "mooncake", "device_name": "d", **KV}}],
}  # fmt: skip
# Read by the in-process server's refusals (set_by_user), so counted as read there; these are
# the ones a rule consumes instead: path -> the rule.
CONSUMED_BY_RULES = {"backend_port": "resolve_backend_port"}


def config_of(tmp_path: Path, settings: dict):
    merged = {"output_dir": str(tmp_path), "vllm": {"model": "Qwen/Qwen3-0.6B"}}
    for key, value in settings.items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    return load("inference", [], merged).config


@pytest.fixture(scope="module")
def consumed(tmp_path_factory):
    from trainspec.trainers.inference.main import launch

    recorder = FieldRecorder()
    with pytest.MonkeyPatch.context() as mp:
        use_stand_in(mp, tmp_path_factory.mktemp("record") / "record.json")
        mp.setattr("trainspec.trainers.slurm.submit.partition_gpus", lambda partition: False)
        for name, settings in RUNS.items():
            config = config_of(tmp_path_factory.mktemp(name), {**settings, "dry_run": True})
            assert launch(recorder.wrap(config)) == 0, name
    return recorder


def refusal(tmp_path: Path, settings: dict):
    from trainspec.trainers.inference.main import launch

    config = config_of(tmp_path, {**settings, "dry_run": True})
    return launch(config)


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    from trainspec.trainers.inference import engines

    out = {}
    with pytest.MonkeyPatch.context() as mp:
        use_stand_in(mp, tmp_path_factory.mktemp("record") / "record.json")
        mp.setattr("trainspec.trainers.slurm.submit.partition_gpus", lambda partition: False)
        for path, settings in REFUSALS.items():
            config = config_of(tmp_path_factory.mktemp("refused"), {**settings, "dry_run": True})
            try:
                if config.slurm is not None:
                    from trainspec.trainers.inference.slurm_job import inference_job

                    errors = inference_job(config).refusals
                else:
                    engines.vllm_plan(config, Path(config.output_dir), on_gpu=False)
                    errors = []
            except Exception as err:  # SetupError or SetupErrors
                errors = getattr(err, "errors", [err])
            out[path] = [e.path for e in errors]
    return out


def how_consumed(leaf: str, consumed, refused) -> str | None:
    if consumed.readers(leaf):
        return "read by " + ", ".join(sorted(consumed.readers(leaf)))
    for path, named in refused.items():
        if path in named and (leaf == path or leaf.startswith(path + ".")):
            return f"refused with {path}"
    table, _, key = leaf.rpartition(".")
    for path in VARIANT_REFUSALS:
        if path.rsplit(".", 1)[0] == table and path in refused.get(path, [path]):
            return f"a variant of {path}, refused"
    if leaf in CONSUMED_BY_RULES:
        return f"consumed by the rule {CONSUMED_BY_RULES[leaf]}"
    return None


def test_the_config_has_leaves():
    assert len(LEAVES) > 60
    assert {"vllm.max_model_len", "slurm.partition", "server.port", "dry_run"} <= set(LEAVES)


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_is_consumed_or_refused(leaf, consumed, refused):
    assert how_consumed(leaf, consumed, refused), f"{leaf} is silently ignored"


@pytest.mark.parametrize("path", sorted(REFUSALS))
def test_refused_at_start_naming_the_setting(path, refused):
    assert path in refused[path], refused[path]


@pytest.mark.parametrize(("path", "runs"), sorted(VARIANT_REFUSALS.items()))
def test_a_variant_only_a_cluster_runs_is_refused_or_invalid(tmp_path, path, runs, capsys):
    """llm-d, disaggregated prefill/decode and Mooncake need several nodes or their own store:
    refused at start (or by the config's rules) naming the setting."""
    for settings in runs:
        code = refusal(tmp_path, settings)
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err, err
