"""The trainer's weight broadcast, built from its `[weight_broadcast]`: files in the run
directory (broadcast.py) or NCCL into the vLLM server (broadcast_nccl.py).

    broadcast = build_broadcast(config.weight_broadcast, run_dir, model, export, world)
    broadcast.publish(step)   # every rank; the sampler takes these weights next
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .broadcast import FileSystemBroadcast, check_broadcast

if TYPE_CHECKING:
    from ..ckpt.hf_export import Export
    from ..core.world import World


def build_broadcast(broadcast_cfg, run_dir: Path, model, export: Export, world: World):
    check_broadcast(broadcast_cfg, world.device.type)
    if broadcast_cfg.type == "nccl":
        from .broadcast_nccl import NcclBroadcast

        return NcclBroadcast(broadcast_cfg, run_dir, model, world)
    return FileSystemBroadcast(run_dir, model, export, world)
