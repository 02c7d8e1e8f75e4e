"""Publishing the trainer's weights to the sampler, built from `[weight_broadcast]`.

Filesystem: after step k the trainer writes the full weights in Hugging Face format to
`<output_dir>/broadcasts/step_<k>/` (model.safetensors, config.json, tokenizer files) and then
the empty marker file `READY`; a reader takes only directories that have the marker, so it never
sees half-written weights. Older broadcasts are deleted, keeping the newest `KEEP`.

NCCL and NIXL push weights GPU to GPU into a running inference server; this build's samplers
load weights from files, so both are refused at start with the reason.
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


def build_broadcast(broadcast_cfg, run_dir: Path, model, export: Export, world: World):
    check_broadcast(broadcast_cfg, world.device.type)
    return FileSystemBroadcast(run_dir, model, export, world)


def check_broadcast(broadcast_cfg, device_type: str, path: str = "weight_broadcast") -> None:
    """The orchestrator's refusal: it loads weights from files only."""
    raise_all(broadcast_refusals(broadcast_cfg, device_type, path))


def broadcast_refusals(
    broadcast_cfg, device_type: str, path: str = "weight_broadcast"
) -> list[SetupError]:
    """The in-memory broadcasts; `path` is where the table sits in the config."""
    if broadcast_cfg.type == "filesystem":
        return []
    reason = (
        "needs CUDA GPUs on both sides" if device_type != "cuda" else "needs a receiving server"
    )
    return [
        SetupError(
            f"{path}.type",
            f"= {broadcast_cfg.type!r} {reason}; this build's samplers (local, or an "
            "OpenAI-compatible server) load weights from files",
            f'set {path}.type = "filesystem"',
        )
    ]


def stale_dirs(run_dir: Path) -> list[Path]:
    """What clean = true deletes before a start: the batches and weight broadcasts of an
    earlier run (checkpoints stay)."""
    return [run_dir / "rollouts", run_dir / BROADCAST_DIR]
