"""The `trainer/` part of a checkpoint: the model (and optimizer) state in the form
torch.distributed.checkpoint saves and loads, and the check that a checkpoint holds this model.

    dcp.save(trainer_state(model, optimizer), checkpoint_id=step_dir / "trainer")
    check_same_model(step_dir / "trainer", get_model_state_dict(model), step_dir)  # or SetupError

The state is plain tensors for one process and DTensor shards under FSDP, so a checkpoint
written at one world size loads at any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict
from torch.optim import Optimizer

from ..errors import SetupError
from .safe_read import SafeReader


def trainer_state(model: nn.Module, optimizer: Optimizer | None) -> dict[str, Any]:
    """Model (and optimizer) state in the form torch.distributed.checkpoint saves and loads:
    plain tensors for one process, DTensor shards under FSDP."""
    if optimizer is None:
        return {"model": get_model_state_dict(model)}
    model_state, optim_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optim": optim_state}


def check_same_model(trainer_dir: Path, model_state: dict[str, Any], path: Path) -> None:
    """Refuse a checkpoint written by another model: torch.distributed.checkpoint loads only the
    tensors the model asks for and would take a deeper model's first layers without a word.
    The metadata is read restricted (safe_read.py): a crafted file is refused, never run."""
    saved = {
        key.removeprefix("model."): tuple(meta.size)
        for key, meta in SafeReader(trainer_dir).read_metadata().state_dict_metadata.items()
        if key.startswith("model.") and hasattr(meta, "size")
    }
    wanted = {key: tuple(tensor.shape) for key, tensor in model_state.items()}
    extra = sorted(set(saved) - set(wanted))
    missing = sorted(set(wanted) - set(saved))
    resized = sorted(k for k in set(saved) & set(wanted) if saved[k] != wanted[k])
    if not (extra or missing or resized):
        return
    found = []
    if extra:
        found.append(f"{len(extra)} tensors this model lacks ({extra[0]}, ...)")
    if missing:
        found.append(f"none of {len(missing)} tensors this model has ({missing[0]}, ...)")
    if resized:
        key = resized[0]
        found.append(f"{len(resized)} of another shape ({key}: {saved[key]}, here {wanted[key]})")
    raise SetupError(
        "resume",
        f"{path} was written by another model: it holds {'; '.join(found)}",
        "resume from a checkpoint of this model (model.name, model.debug, model.lora as that "
        "run had them), or start fresh in a run directory of its own",
    )
