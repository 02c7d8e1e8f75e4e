"""Settings the RL trainer and the orchestrator refuse at start, as rows of (the path the error
must name, the settings that ask for it, whether only a CPU refuses it), like field_refusals.py.
Used by test_rl_field_coverage.py.

A row whose path ends in `.type` refuses one variant of a union table: the keys that only the
refused variants have (`weight_broadcast.host`, ...) cannot be set without asking for it, so they
count as refused with it.
"""

from __future__ import annotations

from field_refusals import REFUSALS as SFT_REFUSALS
from field_refusals import _refusal_id

# The SFT rows that the shared components refuse (model_support.check_model_support, the
# Profiler): the RL loop calls the same components, so it must refuse the same settings. The
# other SFT rows (renderer, weight_broadcast) are the SFT preflight's own.
SHARED_REFUSALS = [
    row for row in SFT_REFUSALS if row[0].startswith("model.") or row[0] == "memory_profiler_path"
]

# The in-memory broadcasts push weights into a running inference server, which this build's
# samplers do not have; the RL trainer refuses them everywhere (trainers/rl/broadcast.py).
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
ORCHESTRATOR_REFUSALS = list(IN_MEMORY_BROADCASTS)
ORCHESTRATOR_PREFIX = "orchestrator."


def refusal_ids(rows) -> list[str]:
    ids = [_refusal_id(row) for row in rows]
    assert len(set(ids)) == len(ids), ids
    return ids


RL_REFUSAL_IDS = refusal_ids(RL_REFUSALS)
ORCHESTRATOR_REFUSAL_IDS = refusal_ids(ORCHESTRATOR_REFUSALS)
