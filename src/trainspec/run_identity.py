"""What defines a run: the settings that change what is trained, and nothing else.

    identity = run_identity(config, "sft")      # {"model": {"name": ...}, "optim": {...}, ...}
    digest = identity_digest(identity)          # 8 hex digits: the default SFT run name ends so
    differences(recorded, identity)             # [("optim.lr", 0.001, 0.002), ...]

A run's identity is its resolved config without the settings that say how it runs or how it is
watched (NOT_TRAINING): where it writes, how often it saves or logs, how many processes, which
kernels, how long it goes on (`max_steps`, so a run can be extended). Only values that differ
from their defaults count, so writing a default out, or a new setting with a default, changes no
identity. The trainer records it in the run directory at the first start and refuses a later
start whose identity differs (trainers/run/run_dir.py); the SFT run name's digest is taken from
it, so relaunching the same command finds the same directory.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from trainspec.kinds import Kind

# How a run executes, where it writes, how it is watched: never part of what it trains.
_EVERY_TRAINER: dict[str, Any] = {
    "run": True,
    "resume": True,
    "ckpt": True,
    "log": True,
    "monitors": True,
    "control": True,
    "heartbeat": True,
    "gc": True,
    "max_steps": True,
    "memory_profiler_path": True,
    "trace_path": True,
    "dist_timeout_seconds": True,
    "env_vars": True,
    "matmul_precision": True,
    "output_dir": True,
    "model": {
        "attn",
        "impl",
        "compile",
        "ac",
        "ac_offloading",
        "fsdp_cpu_offload",
        "optim_cpu_offload",
        "full_offload",
        "reshard_after_forward",
        "dp_replicate",
        "cp",
        "cp_style",
        "ep",
        "ep_comm_backend",
        "deepep_num_sms",
        "deepep_token_chunk_size",
        "moe_use_grouped_mm",
        "moe_fused_kernel",
        "fused_lm_head_token_chunk_size",
        "reduce_dtype",
        "trust_remote_code",
    },
}
NOT_TRAINING: dict[Kind, dict[str, Any]] = {
    "sft": {
        **_EVERY_TRAINER,
        "val": True,
        "eval": True,
        "inference": True,
        "deployment": True,
        "weight_broadcast": True,
        "dry_run": True,
        "clean": True,
        "slurm": True,
        "data": {"micro_batch_size", "num_workers"},
    },
    "rl": {
        **_EVERY_TRAINER,
        "weight_broadcast": True,
        "rollout_transport": True,
        "metrics_server": True,
        "enable_token_export": True,
    },
}


def run_identity(config, kind: Kind) -> dict[str, Any]:
    """The settings of `config` (an `kind` trainer config) that change what is trained and
    differ from their defaults, as a JSON document."""
    dumped = config.model_dump_json(exclude_defaults=True, exclude=NOT_TRAINING[kind])
    return {"kind": kind, **json.loads(dumped)}


def identity_digest(identity: dict[str, Any]) -> str:
    """8 hex digits of an identity (the same for equal identities, whatever their key order)."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


class _Default:
    """A setting an identity leaves out because it holds its default."""

    def __repr__(self) -> str:
        return "its default"


DEFAULT = _Default()


def differences(recorded: Any, current: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted path, recorded value, current value) of every setting that differs; a setting at
    its default (absent from an identity) is given as DEFAULT."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        found = []
        for key in sorted(set(recorded) | set(current), key=str):
            child = f"{path}.{key}" if path else str(key)
            found += differences(recorded.get(key, DEFAULT), current.get(key, DEFAULT), child)
        return found
    return [] if recorded == current else [(path, recorded, current)]
