"""Publishing the trainer's weights to the sampler, built from `[weight_broadcast]`.

Filesystem: after step k the trainer writes the full weights in Hugging Face format to
`<output_dir>/broadcasts/step_<k>/` (model.safetensors, config.json, tokenizer files) and then
the empty marker file `READY`; a reader takes only directories that have the marker, so it never
sees half-written weights. Older broadcasts are deleted, keeping the newest `KEEP`.

NCCL sends them GPU to GPU into a vLLM server, through vLLM's weight-transfer engine
(broadcast_nccl.py): the trainer on CUDA, the orchestrator sampling from that server. NIXL
(ModelExpress) is refused at start with the reason, as NCCL is where those do not hold.
trainer_broadcast.py builds the trainer's from its config.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from trainspec.config.steps import step_dir_name, step_of_dir

from ..errors import SetupError, raise_all

if TYPE_CHECKING:  # torch: the directory layout above is read where no run starts (dry runs)
    from ..ckpt.hf_export import Export
    from ..core.world import World

BROADCAST_DIR = "broadcasts"
READY = "READY"
KEEP = 3


def ready_steps(run_dir: Path) -> list[int]:
    """Steps whose broadcast is complete, oldest first."""
    root = run_dir / BROADCAST_DIR
    if not root.is_dir():
        return []
    steps = []
    for child in root.iterdir():
        step = step_of_dir(child.name)
        if step is not None and (child / READY).exists():
            steps.append(step)
    return sorted(steps)


def broadcast_dir(run_dir: Path, step: int) -> Path:
    return run_dir / BROADCAST_DIR / step_dir_name(step)


class FileSystemBroadcast:
    def __init__(
        self, run_dir: Path, model, export: Export, world: World, keep: int = KEEP
    ) -> None:
        self.run_dir = run_dir
        self.model = model
        self.export = export
        self.world = world
        self.keep = keep  # the newest broadcasts kept

    def publish(self, step: int) -> None:
        """Write the weights after `step` (a collective: every rank calls it)."""
        from ..ckpt.hf_export import export_weights

        target = broadcast_dir(self.run_dir, step)
        if self.world.is_main and target.exists():
            shutil.rmtree(target)  # a stale, unmarked copy from before a restart
        # a tied weight under every name: vLLM's reload needs the output layer named
        export_weights(self.model, target, self.export, is_main=self.world.is_main, untie=True)
        if self.world.is_main:
            (target / READY).touch()
            for old in ready_steps(self.run_dir)[: -self.keep]:
                shutil.rmtree(broadcast_dir(self.run_dir, old), ignore_errors=True)


def check_broadcast(
    broadcast_cfg, device_type: str, path: str = "weight_broadcast", *, sampler: str | None = None
) -> None:
    raise_all(broadcast_refusals(broadcast_cfg, device_type, path, sampler=sampler))


def broadcast_refusals(
    broadcast_cfg, device_type: str, path: str = "weight_broadcast", *, sampler: str | None = None
) -> list[SetupError]:
    """What this side cannot honour of the broadcast at `path`: the trainer's (`sampler`
    None) or the orchestrator's, whose sampler is of type `sampler`."""
    kind = broadcast_cfg.type
    if kind == "filesystem":
        return []
    if kind == "nixl":
        problem = "pulls weights through ModelExpress, which this build does not start"
    elif sampler == "local":
        problem = (
            "sends weights into a vLLM server's GPUs, and the orchestrator samples in process "
            "(the in-process sampler loads weight files)"
        )
    elif sampler is None and device_type != "cuda":
        problem = "sends weights from the trainer's CUDA GPU, and this machine has none"
    elif broadcast_cfg.quantize_in_weight_transfer:
        return [
            SetupError(
                f"{path}.quantize_in_weight_transfer",
                "= true: this build sends the weights in the model's dtype (vLLM's engine "
                "receives them as they are)",
                "set quantize_in_weight_transfer = false",
            )
        ]
    else:
        return []
    return [SetupError(f"{path}.type", f"= {kind!r} {problem}", f'set {path}.type = "filesystem"')]


def stale_dirs(run_dir: Path) -> list[Path]:
    """What clean = true deletes before a start: the batches and weight broadcasts of an
    earlier run (checkpoints stay)."""
    return [run_dir / "rollouts", run_dir / BROADCAST_DIR]
