"""How the model runs: activation checkpointing, torch.compile, FSDP2 sharding, offloading.

    apply_parallelism(module, config.model, world)

Order follows torchtitan: checkpoint, then compile each block, then shard each block and the
root. The model is sharded on a GPU (one process too: bf16 mixed precision then takes the same
policy as on several) and across several CPU processes; one CPU process runs it as it is.
Sharding moves one block at a time to the GPU, so the whole model is never there at once, and
ranks other than 0 arrive with a meta-device model (model.py) whose shards rank 0 fills in.
"""

from __future__ import annotations

import itertools
import logging

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

from ..errors import SetupError
from .lm import ChunkedLM
from .model import DTYPES
from .world import World, any_rank

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


def shards(world: World) -> bool:
    """Whether FSDP wraps the model: on a GPU always, on CPU with several processes."""
    return world.world_size > 1 or world.device.type == "cuda"


def _params_device(model_cfg, world: World) -> torch.device:
    """Where FSDP keeps the parameter shards: host memory under model.fsdp_cpu_offload."""
    offload = model_cfg.fsdp_cpu_offload and world.device.type == "cuda"
    return torch.device("cpu") if offload else world.device


@torch.no_grad()
def fill_from_rank0(
    module: nn.Module, weights: dict[str, torch.Tensor], world: World, params_device: torch.device
) -> None:
    """Every rank's shards of rank 0's `weights` (its parameters and buffers by name, taken
    before sharding). The other ranks' tensors are on the meta device until here; each tensor
    is sent whole, one at a time, and every rank keeps its own shard of it."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if not world.is_main:
        module.to_empty(device=params_device)
        for sub in module.modules():  # buffers (rotary tables, ...) live with the compute
            for name, buffer in sub._buffers.items():
                if buffer is not None:
                    sub._buffers[name] = buffer.to(world.device)
    for name, tensor in itertools.chain(module.named_parameters(), module.named_buffers()):
        if world.is_main:
            whole = weights[name].to(world.device)
        else:
            whole = torch.empty(tensor.shape, dtype=tensor.dtype, device=world.device)
        dist.broadcast(whole, src=0)
        if isinstance(tensor, DTensor):
            shard = distribute_tensor(
                whole, tensor.device_mesh, tensor.placements, src_data_rank=None
            ).to_local()
            tensor.to_local().copy_(shard)
        else:
            tensor.copy_(whole)


def apply_parallelism(module: ChunkedLM, model_cfg, world: World) -> ChunkedLM:
    apply_activation_checkpointing(module, model_cfg.ac)
    apply_compile(module, model_cfg.compile)
    if shards(world):
        # Rank 0's checks of the head (lm.verify_logits) decide for the meta ranks too.
        module.own_forward = any_rank(module.own_forward, world)
        weights: dict[str, torch.Tensor] = {}
        if world.is_main:  # views of the weights as loaded: FSDP swaps in new tensors
            named = itertools.chain(module.named_parameters(), module.named_buffers())
            weights = {name: tensor.detach() for name, tensor in named}
        apply_fsdp(module, model_cfg, world)
        if world.world_size > 1:
            fill_from_rank0(module, weights, world, _params_device(model_cfg, world))
    else:
        module.to(world.device)
        log.debug(  # a no-op said: for --log.level debug, never in the way of a first run
            "one process on CPU: nothing to shard, so model.reshard_after_forward=%s and "
            "model.reduce_dtype=%s have no effect",
            model_cfg.reshard_after_forward,
            model_cfg.reduce_dtype,
        )
    if world.device.type == "cpu":
        offload = model_cfg.ac_offloading
        log.debug(
            "CPU: parameters, gradients, optimizer state and saved activations already live in "
            "host memory, so model.fsdp_cpu_offload=%s, model.optim_cpu_offload=%s and "
            "model.ac_offloading (pin_memory=%s) copy nothing",
            model_cfg.fsdp_cpu_offload,
            model_cfg.optim_cpu_offload,
            offload.pin_memory if offload is not None else None,
        )
    return module
