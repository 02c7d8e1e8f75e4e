"""The trainer's weights sent GPU to GPU into the vLLM server over NCCL (`weight_broadcast.type =
"nccl"`), with vLLM's own weight-transfer engine on both sides.

    broadcast = NcclBroadcast(config.weight_broadcast, run_dir, model, world)
    broadcast.publish(step)     # every rank: the full weights leave rank 0 for the workers

The sender is vLLM's `NCCLTrainerWeightTransferEngine`: rank 0 opens an NCCL group as its rank
0 at `host:port`, the server's `inference_world_size` workers after it, and broadcasts the
weights in vLLM's packed format; the other ranks take part in gathering FSDP shards. The engine
drives the server through a client with four methods; here that client is a relay through
the run directory (`RunDirRelay`), because the orchestrator owns the server, as in the
reference:

* `<run>/broadcasts/nccl_init.json`: the workers' half of the rendezvous, written at start
  (after the last run's files are removed); the orchestrator posts it to
  `/init_weight_transfer_engine` (orchestrator/sampling/vllm_reload.py), which returns once
  both sides have joined;
* `<run>/broadcasts/step_<k>/NCCL`: the names, dtypes and shapes of step k's weights, written
  just before they are broadcast; the orchestrator pauses the server and posts them to
  `/start_weight_update`, `/update_weights`, `/finish_weight_update` (version `step_<k>`),
  which receive that broadcast, then resumes.

NCCL rendezvous inside each broadcast: the trainer waits in `publish` until the orchestrator
has received the step, so every step reaches the server, in order. Names are the Hugging Face
model's, a tied output layer under both names (as the filesystem broadcast writes them,
ckpt/hf_export.py). LoRA runs broadcast files ([model.lora] with nccl is refused by the rules).
NCCL puts each rank on its own GPU: the server's GPUs and the trainer's must differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from trainspec.config.steps import step_of_dir

from ..ckpt.hf_export import clean_name, hf_prefix
from ..run.atomic_files import write_atomic
from .broadcast import BROADCAST_DIR, broadcast_dir

if TYPE_CHECKING:
    from ..core.world import World

INIT_FILE = "nccl_init.json"
MARKER = "NCCL"


def hf_named_parameters(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The model's parameters under Hugging Face names, a tied one under each of its names."""
    prefix = hf_prefix(model)
    out: list[tuple[str, torch.Tensor]] = []
    for name, param in model.named_parameters(remove_duplicate=False):
        name = clean_name(name)
        if name.startswith(prefix):
            out.append((name[len(prefix) :], param))
    return out


def weight_source(model: nn.Module, device: torch.device):
    """vLLM's WeightSource over `hf_named_parameters`: metadata from the (global) shapes
    without a gather; iteration gathers each FSDP shard (a collective) onto `device`."""
    from vllm.distributed.weight_transfer.base import (
        ParamMeta,
        WeightSource,
        materialize_full_tensor,
    )

    class HFWeights(WeightSource):
        def metadata(self) -> list[ParamMeta]:
            params = hf_named_parameters(model)
            return [ParamMeta(name, p.dtype, tuple(p.shape)) for name, p in params]

        def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
            for name, param in hf_named_parameters(model):
                yield name, materialize_full_tensor(param.detach()).to(device)

    return HFWeights()


def init_file(run_dir: Path) -> Path:
    return run_dir / BROADCAST_DIR / INIT_FILE


def nccl_steps(run_dir: Path) -> list[int]:
    """Steps whose weights the trainer has announced for an NCCL broadcast, oldest first."""
    root = run_dir / BROADCAST_DIR
    found = (step_of_dir(marker.parent.name) for marker in root.glob(f"*/{MARKER}"))
    return sorted(step for step in found if step is not None)


class RunDirRelay:
    """vLLM's weight-sync client protocol, answered by writing what the orchestrator must post
    to the server (the module's docstring); `step` is the step being sent."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.step = 0

    def forget_last_run(self) -> None:
        """Remove an earlier run's rendezvous and markers, which the orchestrator would act on."""
        init_file(self.run_dir).unlink(missing_ok=True)
        for marker in (self.run_dir / BROADCAST_DIR).glob(f"*/{MARKER}"):
            marker.unlink(missing_ok=True)

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        (self.run_dir / BROADCAST_DIR).mkdir(parents=True, exist_ok=True)
        text = json.dumps({"init_info": init_info}) + "\n"
        write_atomic(init_file(self.run_dir), text)

    def start_weight_update(self) -> None:
        pass  # the orchestrator's, once it reads the step's marker

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        target = broadcast_dir(self.run_dir, self.step)
        target.mkdir(parents=True, exist_ok=True)
        write_atomic(target / MARKER, json.dumps({"update_info": update_info}) + "\n")

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        pass  # the orchestrator's, with the version step_<k>


class NcclBroadcast:
    def __init__(self, broadcast_cfg, run_dir: Path, model: nn.Module, world: World) -> None:
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )

        self.run_dir = run_dir
        self.world = world
        self.relay = RunDirRelay(run_dir)
        if world.is_main:
            self.relay.forget_last_run()
        info = NCCLTrainerInitInfo(
            master_address=broadcast_cfg.host,
            master_port=broadcast_cfg.port,
            world_size=broadcast_cfg.inference_world_size + 1,  # the trainer's rank 0 first
            rank=world.rank,
        )
        # rank 0 waits here until the orchestrator has the server's workers join
        self.engine = NCCLTrainerWeightTransferEngine.trainer_init(
            info, client=self.relay, source=weight_source(model, world.device)
        )

    def publish(self, step: int) -> None:
        """Send the weights after `step` (a collective: every rank calls it); returns once the
        server's workers have them."""
        self.relay.step = step
        self.engine.send_weights()
