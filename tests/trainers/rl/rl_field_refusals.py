"""Settings the RL trainer and the orchestrator refuse at start, as rows of (the path the error
must name, the settings that ask for it, whether only a CPU refuses it), like field_refusals.py.
Used by test_rl_field_coverage.py.

A row whose path ends in `.type` refuses one variant of a union table: the keys that only the
refused variants have (`weight_broadcast.host`, ...) cannot be set without asking for it, so they
count as refused with it.
"""

from __future__ import annotations

from helpers.field_refusals import REFUSALS as SFT_REFUSALS
from helpers.field_refusals import _refusal_id

# The SFT rows that the shared components refuse (model_support.check_model_support, the
# Profiler): the RL loop calls the same components, so it must refuse the same settings. The
# other SFT rows (renderer, weight_broadcast) are the SFT preflight's own.
SHARED_REFUSALS = [
    row for row in SFT_REFUSALS if row[0].startswith("model.") or row[0] == "memory_profiler_path"
]

# The in-memory broadcasts push weights into a running inference server, which this build's
# samplers do not have; the RL trainer refuses them everywhere (trainers/wire/broadcast.py).
IN_MEMORY_BROADCASTS = [
    (
        "weight_broadcast.type",
        {
            "weight_broadcast.type": "nccl",
            "weight_broadcast.host": "127.0.0.1",
            "weight_broadcast.port": 29999,
            "weight_broadcast.timeout": 5,
            "weight_broadcast.inference_world_size": 2,
            "weight_broadcast.quantize_in_weight_transfer": True,
        },
        False,
    ),
    (
        "weight_broadcast.type",
        {
            "weight_broadcast.type": "nixl",
            "weight_broadcast.host": "127.0.0.1",
            "weight_broadcast.port": 8002,
            "weight_broadcast.timeout": 5,
            "weight_broadcast.inference_world_size": 2,
            "weight_broadcast.session_id": "s",
        },
        False,
    ),
]

RL_REFUSALS = [
    *SHARED_REFUSALS,
    *IN_MEMORY_BROADCASTS,
    ("metrics_server", {"metrics_server": {"host": "127.0.0.1", "port": 9400}}, False),
    # Replaying the sampler's MoE routing needs routing decisions, which a RolloutBatch does not
    # carry, and the custom MoE implementation, which this build lacks: with model.impl "auto"
    # (which the config rule lets through) true must be refused rather than ignored.
    ("enable_router_replay", {"enable_router_replay": True}, False),
]

# The orchestrator loads every policy from the trainer's broadcast files, so it must refuse the
# in-memory broadcasts it cannot receive, as the trainer does. Its refusals name the field as the
# `rl` command's config does, under [orchestrator] ("orchestrator.weight_broadcast.type"), like
# its other SetupErrors (policy.py, task.py, sampler_openai.py).
RT = {"taskset": {"id": "builtin:reverse-text"}}
EVAL = {"eval.source": [{"env": RT}]}
# what evaluation never sends, at the group table and a source's own
EVAL_SAMPLING = (
    ("top_p", 0.9),
    ("top_k", 5),
    ("min_p", 0.1),
    ("reasoning_effort", "low"),
    ("extra_body", {"x": 1}),
)
TEACHER = {"name": "teacher", "base_url": "http://127.0.0.1:9/v1"}
# What the orchestrator cannot do yet (trainers/orchestrator/refusals.py, algorithms.py), and the
# renderer settings it refuses as the SFT trainer does (preflight.renderer_refusals).
NOT_BUILT = [
    ("tasks_per_minute", {"tasks_per_minute": 60}, False),
    ("env_server_base_port", {"env_server_base_port": 6000}, False),
    ("inference_metrics_roles", {"inference_metrics_roles": ["prefill"]}, False),
    ("collect_inference_metrics", {"collect_inference_metrics": False}, False),
    ("monitors.prime", {"monitors.prime": {"name": "p"}}, False),
    (
        "model.vlm",
        {
            "model.vlm": {
                "vision_encoder_attr": "model.visual",
                "language_model_attr": "model.language_model",
                "freeze_vision_encoder": True,
            }
        },
        False,
    ),
    ("model.lora", {"model.lora": {"name": "r8", "rank": 8, "alpha": 16.0}}, False),
    (
        "model.client",
        {
            "model.client": {
                "wait_for_ready_timeout": 10,
                "base_url": "http://127.0.0.1:9/v1",
                "api_key_var": "KEY",
                "headers": {"X-A": "1"},
                "headers_from_env": {"X-B": "B"},
                "extra_headers_from_state": {"X-C": "c"},
                "skip_model_check": True,
                "admin_base_url": ["http://127.0.0.1:9/v1"],
            }
        },
        False,
    ),
    ("concurrency.initial_inflight", {"concurrency.initial_inflight": 4}, False),
    ("concurrency.min_inflight", {"concurrency.min_inflight": 2}, False),
    ("ckpt.skip_progress", {"ckpt.skip_progress": True, "ckpt.wait_for_weights_timeout": 5}, False),
    ("pad_to_multiple_of", {"pad_to_multiple_of": 5}, False),
    ("train.sampling.extra_body", {"train.sampling.extra_body": {"top_k": 5}}, False),
    ("eval.source[].ratio", {"eval.source": [{"env": RT, "ratio": 2.0}]}, False),
    ("train.source[].curriculum", {"train.source": [{"env": RT, "curriculum": {}}]}, False),
    *[
        row
        for key, value in EVAL_SAMPLING
        for row in (
            (f"eval.sampling.{key}", {**EVAL, f"eval.sampling.{key}": value}, False),
            (
                f"eval.source[].sampling.{key}",
                {"eval.source": [{"env": RT, "sampling": {key: value}}]},
                False,
            ),
        )
    ],
    (
        "algo.filter",
        {"algo.type": "echo", "algo.filter": {"import_path": "m.f", "kwargs": {}}},
        False,
    ),
    ("algo.type", {"algo.type": "hierarchical_grpo", "algo.episode_agents": ["solver"]}, False),
    *[
        (f"{table}.{key}", {"algo.type": kind, f"algo.{place}": {**TEACHER, key: value}}, False)
        for kind, place, table in (
            ("opd", "teacher", "algo.teacher"),
            ("sft", "sampling.source", "algo.sampling.source"),
        )
        for key, value in (
            ("extra_headers_from_state", {"X-Task": "task_id"}),
            ("admin_base_url", ["http://127.0.0.1:9/v1"]),
        )
    ],
    (
        "algo.renderer.name",
        {"algo.type": "opsd", "algo.renderer": {"name": "custom", "import_path": "my.Renderer"}},
        False,
    ),
    (
        "algo.renderer.thinking_retention",
        {"algo.type": "opsd", "algo.renderer": {"name": "auto", "thinking_retention": "all"}},
        False,
    ),
    *[
        (
            f"algo.renderer.{key}",
            {"algo.type": "opsd", "algo.renderer": {"name": "default", key: value}},
            False,
        )
        for key, value in (("tool_parser", "hermes"), ("reasoning_parser", "think"))
    ],
    ("renderer.name", {"renderer.name": "custom", "renderer.import_path": "my.Renderer"}, False),
    ("renderer.thinking_retention", {"renderer.thinking_retention": "all"}, False),
    ("renderer.tool_parser", {"renderer.name": "default", "renderer.tool_parser": "hermes"}, False),
    (
        "renderer.reasoning_parser",
        {"renderer.name": "default", "renderer.reasoning_parser": "think"},
        False,
    ),
]
ORCHESTRATOR_REFUSALS = [*IN_MEMORY_BROADCASTS, *NOT_BUILT]
ORCHESTRATOR_PREFIX = "orchestrator."


def refusal_ids(rows) -> list[str]:
    ids = [_refusal_id(row) for row in rows]
    assert len(set(ids)) == len(ids), ids
    return ids


RL_REFUSAL_IDS = refusal_ids(RL_REFUSALS)
ORCHESTRATOR_REFUSAL_IDS = refusal_ids(ORCHESTRATOR_REFUSALS)
