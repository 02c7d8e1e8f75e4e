"""Settings this CPU build refuses at start: (the path the error must name, the settings that
ask for it, whether only a CPU refuses it). Used by test_field_coverage.py."""

from __future__ import annotations

import torch

# -- refusals: (path the error must name, settings that ask for it, CPU-only refusal) ----------

# Online evals of one built-in source, one prompt, two tokens: what the [eval] rows change.
EVAL_SOURCE = {"env": {"taskset": {"id": "builtin:reverse-text"}}}
EVAL_ON = {"num_examples": 1, "sampling": {"max_completion_tokens": 2}, "source": [EVAL_SOURCE]}

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
    ("renderer.name", {"renderer.name": "custom", "renderer.import_path": "my.Renderer"}, False),
    ("renderer.thinking_retention", {"renderer.thinking_retention": "all"}, False),
    ("renderer.tool_parser", {"renderer.name": "default", "renderer.tool_parser": "hermes"}, False),
    (
        "renderer.reasoning_parser",
        {"renderer.name": "default", "renderer.reasoning_parser": "think"},
        False,
    ),
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
    # [inference] settings tune the vLLM server only the sft launcher starts (on a GPU)
    ("inference", {"eval": EVAL_ON, "inference": {"vllm": {"gpu_memory_utilization": 0.5}}}, False),
    (
        "eval.client",
        {"eval": {**EVAL_ON, "client": {"base_url": "http://h:1/v1", "headers": {"X": "y"}}}},
        False,
    ),
    (
        "eval.concurrency.initial_inflight",
        {"eval": {**EVAL_ON, "concurrency": {"initial_inflight": 2}}},
        False,
    ),
    (
        "eval.concurrency.min_inflight",
        {"eval": {**EVAL_ON, "concurrency": {"min_inflight": 2}}},
        False,
    ),
    ("eval.env_server_base_port", {"eval": {**EVAL_ON, "env_server_base_port": 5100}}, False),
    ("eval.sampling.top_p", {"eval": {**EVAL_ON, "sampling": {"top_p": 0.9}}}, False),
    (
        "deployment.type",
        {
            "eval": EVAL_ON,
            "inference": {},
            "deployment": {
                "type": "multi_node",
                "num_train_nodes": 1,
                "gpus_per_node": 1,
                "num_infer_nodes": 1,
            },
        },
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


def applies_here(cpu_only: bool) -> bool:
    return not (cpu_only and torch.cuda.is_available())


REFUSED_PATHS = {path for path, _, cpu_only in REFUSALS if applies_here(cpu_only)}


def renderer_settings(table: str = "renderer") -> tuple[dict[str, str], dict[str, str]]:
    """The leaves of the `[renderer]` table at `table` beside `name` and `thinking_retention`:
    those of a named renderer, each with one variant that has it (handed to the renderers
    package, proven by test_a_renderer_setting_reaches_the_renderers_package), and those only
    `custom` has (set only with renderer.name = "custom", which is refused)."""
    from trainspec.config_model import union_members
    from trainspec.generated.renderer import RendererConfig
    from trainspec.trainers.chat.named_renderers import TEMPLATE_RENDERERS

    named: dict[str, str] = {}
    custom: dict[str, str] = {}
    for variant in union_members(RendererConfig):
        (tag,) = variant.model_fields["name"].annotation.__args__
        for field in variant.model_fields:
            leaf = f"{table}.{field}"
            if field in ("name", "thinking_retention") or leaf in named:
                continue
            if tag == "custom":
                custom[leaf] = tag
            elif tag not in TEMPLATE_RENDERERS:
                named[leaf] = tag
    return named, {leaf: tag for leaf, tag in custom.items() if leaf not in named}
