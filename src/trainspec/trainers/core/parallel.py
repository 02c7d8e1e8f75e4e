"""How the model runs: activation checkpointing, torch.compile, FSDP2 sharding, offloading.

    apply_parallelism(module, config.model, world)

Order follows torchtitan: checkpoint, then compile each block, then shard each block and the
root. With one process nothing is sharded (there is nothing to shard across).
"""

from __future__ import annotations

import logging

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

from ..errors import SetupError
from .lm import ChunkedLM
from .model import DTYPES
from .world import World

log = logging.getLogger(__name__)

# Selective checkpointing: which submodules of a decoder block each target names.
SELECTIVE_TARGETS = {
    "norm": ("input_layernorm", "post_attention_layernorm"),
    "attn_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"),
    "mlp": ("mlp",),
    "mla_up_proj": ("self_attn.q_b_proj", "self_attn.kv_b_proj"),
    "routed_experts": ("mlp.experts",),
    "linear_attn": ("linear_attn",),
}


def _replace(block: nn.Module, dotted: str, wrap) -> bool:
    *path, leaf = dotted.split(".")
    parent: nn.Module | None = block
    for part in path:
        parent = getattr(parent, part, None)
        if parent is None:
            return False
    child = getattr(parent, leaf, None)
    if child is None:
        return False
    setattr(parent, leaf, wrap(child))
    return True


def apply_activation_checkpointing(module: ChunkedLM, ac_cfg) -> None:
    if ac_cfg is None:
        return
    layers = module.layers
    for index in range(0, len(layers), ac_cfg.freq):
        if ac_cfg.mode == "full":
            layers[index] = checkpoint_wrapper(layers[index])
            continue
        for target in ac_cfg.targets:
            hits = [
                _replace(layers[index], p, checkpoint_wrapper) for p in SELECTIVE_TARGETS[target]
            ]
            if not any(hits):
                raise SetupError(
                    "model.ac.targets",
                    f'"{target}" names no part of this model\'s blocks',
                    f"drop {target!r} from model.ac.targets",
                )


def apply_compile(module: ChunkedLM, compile_cfg) -> None:
    if compile_cfg is None:
        return
    for index, layer in enumerate(module.layers):
        compiled = torch.compile(layer, fullgraph=compile_cfg.fullgraph)  # an OptimizedModule
        module.layers[index] = compiled  # type: ignore[assignment]  # stub: Callable, not Module


def apply_fsdp(module: ChunkedLM, model_cfg, world: World) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import (
        CPUOffloadPolicy,
        MixedPrecisionPolicy,
        OffloadPolicy,
        fully_shard,
    )

    replicate = model_cfg.dp_replicate
    if world.world_size % replicate:
        raise SetupError(
            "model.dp_replicate",
            f"= {replicate} does not divide the {world.world_size} training processes",
            "pick a dp_replicate that divides the number of processes",
        )
    shape: tuple[int, ...] = (world.world_size,)
    names: tuple[str, ...] = ("dp_shard",)
    if replicate > 1:
        shape, names = (replicate, world.world_size // replicate), ("dp_replicate", "dp_shard")
    mesh = init_device_mesh(world.device.type, shape, mesh_dim_names=names)
    on_gpu = world.device.type == "cuda"
    policy = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16 if on_gpu else None,
        reduce_dtype=DTYPES[model_cfg.reduce_dtype],
    )
    # OffloadPolicy() is fully_shard's default: no offloading.
    offload = CPUOffloadPolicy() if model_cfg.fsdp_cpu_offload and on_gpu else OffloadPolicy()
    for layer in module.layers:
        fully_shard(
            layer,
            mesh=mesh,
            mp_policy=policy,
            offload_policy=offload,
            reshard_after_forward=model_cfg.reshard_after_forward,
        )
    fully_shard(
        module, mesh=mesh, mp_policy=policy, offload_policy=offload, reshard_after_forward=False
    )


def apply_parallelism(module: ChunkedLM, model_cfg, world: World) -> ChunkedLM:
    apply_activation_checkpointing(module, model_cfg.ac)
    apply_compile(module, model_cfg.compile)
    module.to(world.device)
    if world.world_size > 1:
        apply_fsdp(module, model_cfg, world)
    else:
        log.info(
            "one process: nothing to shard, so model.reshard_after_forward=%s and "
            "model.reduce_dtype=%s have no effect",
            model_cfg.reshard_after_forward,
            model_cfg.reduce_dtype,
        )
    if world.device.type == "cpu":
        offload = model_cfg.ac_offloading
        log.info(
            "CPU: parameters, gradients, optimizer state and saved activations already live in "
            "host memory, so model.fsdp_cpu_offload=%s, model.optim_cpu_offload=%s and "
            "model.ac_offloading (pin_memory=%s) copy nothing",
            model_cfg.fsdp_cpu_offload,
            model_cfg.optim_cpu_offload,
            offload.pin_memory if offload is not None else None,
        )
    return module
