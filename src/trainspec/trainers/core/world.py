"""Who this process is in the job (rank, world size, device) and the process group.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; a plain `python` process is rank 0 of 1. The
process group is always initialised (gloo on CPU, NCCL on GPU, an in-memory store for one
process), so checkpointing and reductions take one code path whatever the world size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True, slots=True)
class World:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def backend(self) -> str:
        return "nccl" if self.device.type == "cuda" else "gloo"


def detect_device(local_rank: int) -> torch.device:
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def init_world(dist_timeout_seconds: int) -> World:
    """Join (or create) the process group; `dist_timeout_seconds` bounds every collective."""
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world = World(rank, world_size, local_rank, detect_device(local_rank))
    if not dist.is_initialized():
        timeout = timedelta(seconds=dist_timeout_seconds)
        if world_size == 1 and "MASTER_ADDR" not in os.environ:
            # a group of one talks to no one: its gloo device listens on loopback rather than
            # on the address the host name resolves to (the node's, on a cluster)
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
            store = dist.HashStore()
            dist.init_process_group(
                world.backend, store=store, rank=0, world_size=1, timeout=timeout
            )
        else:
            dist.init_process_group(world.backend, timeout=timeout)
    return world


def close_world() -> None:
    """Leave the process group together: a rank that tears down gloo while a peer is still in
    its last collective can abort the process ("terminate called without an active exception")."""
    if dist.is_initialized():
        if dist.get_world_size() > 1:
            dist.barrier()
        dist.destroy_process_group()


def all_reduce_sum(value: float, world: World) -> float:
    if world.world_size == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=world.device)
    dist.all_reduce(tensor)
    return float(tensor.item())


def all_reduce_max(value: int, world: World) -> int:
    if world.world_size == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.int64, device=world.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def any_rank(flag: bool, world: World) -> bool:
    """True on every rank when any rank says True (one decision for the whole job)."""
    return all_reduce_sum(1.0 if flag else 0.0, world) > 0
