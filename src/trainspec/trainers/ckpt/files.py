"""The checkpoint directory on disk: names, completeness, atomic publishing, retention, and the
small per-rank state file (scheduler, loop state, random number generators).

A checkpoint is built in a hidden sibling (`.step_<N>.tmp`) and renamed to `step_<N>` only once
every file is written and synced; `meta.json` is the last file written, so a `step_<N>`
directory without it (a copy cut short, say) is never treated as a checkpoint. Deleting goes
the other way round: rename to a hidden name first, then remove, so no half-deleted directory
ever carries a checkpoint's name.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainspec.config.steps import step_of_dir

META = "meta.json"
TRAINER_DIR = "trainer"  # model + optimizer, torch.distributed.checkpoint format
WEIGHTS_DIR = "weights"  # Hugging Face format, for inference tools
ADAPTER_DIR = "adapter"  # a LoRA run's peft adapter
LATEST = "latest"  # a link to the newest checkpoint written
FORMAT_VERSION = 1


def temp_dir_for(directory: Path, step: int) -> Path:
    return directory / f".step_{step}.tmp"


def rank_file(step_dir: Path, rank: int) -> Path:
    return step_dir / f"rank_{rank}.pt"


def step_of(path: Path) -> int | None:
    """The step a `step_<N>` directory name stands for, else None."""
    return step_of_dir(path.name)


def is_complete(step_dir: Path) -> bool:
    return (step_dir / META).is_file()


def complete_steps(directory: Path) -> dict[int, Path]:
    """Every finished checkpoint under `directory`, by step."""
    if not directory.is_dir():
        return {}
    found = {}
    for child in directory.iterdir():
        step = step_of(child)
        if step is not None and child.is_dir() and is_complete(child):
            found[step] = child
    return dict(sorted(found.items()))


def remove_stale(directory: Path) -> None:
    """Delete what crashed saves and deletions left behind (hidden `.step_*` directories)."""
    if not directory.is_dir():
        return
    for child in directory.iterdir():
        if child.name.startswith(".step_") and child.is_dir():
            shutil.rmtree(child, ignore_errors=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """Flush every file and directory entry under `root` to stable storage."""
    for parent, _, files in os.walk(root):
        for name in files:
            _fsync(Path(parent) / name)
        _fsync(Path(parent))


def tree_bytes(root: Path) -> int:
    """Bytes of the files under `root`."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def write_meta(temp: Path, step: int, world_size: int, run: str | None = None) -> None:
    """The completeness marker, written last (after every rank's files are synced); `run` is the
    digest of the run's identity (trainspec.run_identity), so another run's checkpoint is
    never taken for this run's."""
    meta = {"format": FORMAT_VERSION, "step": step, "world_size": world_size, "run": run}
    path = temp / META
    with open(path, "w") as handle:
        json.dump(meta, handle)
        handle.flush()
        os.fsync(handle.fileno())


def read_meta(step_dir: Path) -> dict[str, Any]:
    return json.loads((step_dir / META).read_text())


def publish(temp: Path, final: Path) -> None:
    """Rename the finished temporary directory to its final name, atomically.

    An older checkpoint of the same step is moved aside first (a save repeated at one step);
    a crash between the two renames leaves no `step_<N>` at all, never a partial one.
    """
    if final.exists():
        aside = final.parent / f".{final.name}.old"
        shutil.rmtree(aside, ignore_errors=True)
        os.rename(final, aside)
        os.rename(temp, final)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.rename(temp, final)
    _fsync(final.parent)


def point_latest(directory: Path, step_dir: Path) -> None:
    """`<directory>/latest` names the checkpoint just written (a relative symlink, replaced
    atomically), so a path such as `<run>/checkpoints/latest/weights` always loads."""
    link, temp = directory / LATEST, directory / f".{LATEST}.tmp"
    temp.unlink(missing_ok=True)
    os.symlink(step_dir.name, temp)
    os.replace(temp, link)


def delete(step_dir: Path) -> None:
    """Remove a checkpoint: hide it under a temporary name first, then delete the files."""
    hidden = step_dir.parent / f".{step_dir.name}.deleting"
    os.rename(step_dir, hidden)
    _fsync(step_dir.parent)
    shutil.rmtree(hidden, ignore_errors=True)


def steps_to_delete(
    steps: list[int], *, keep_last: int | None, keep_interval: int | None, current: int
) -> list[int]:
    """Which checkpoints retention removes: all but the newest `keep_last`, sparing multiples of
    `keep_interval` and the checkpoint just written. `keep_last` None keeps everything."""
    if keep_last is None:
        return []
    newest = set(sorted(steps)[-keep_last:])
    return [
        step
        for step in sorted(steps)
        if step not in newest
        and step != current
        and not (keep_interval is not None and step % keep_interval == 0)
    ]


# -- per-rank state: random number generators and plain Python state ---------------------------


def capture_rng() -> dict[str, Any]:
    """Every generator a training step may draw from, in a form `torch.load` reads safely."""
    legacy = np.random.get_state(legacy=True)
    # The global generator is MT19937 (trainspec never swaps it), whose legacy state is a tuple.
    assert isinstance(legacy, tuple), "np.random's generator is not MT19937"
    name, keys, pos, has_gauss, cached = legacy
    state = {
        "python": random.getstate(),
        "numpy": {
            "name": name,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["name"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = state["cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


_PLAIN = (str, int, float, bool, type(None), torch.Tensor)


def check_plain(value: Any, where: str) -> None:
    """Refuse, at save time, what `torch.load(weights_only=True)` could not read back at resume:
    state must be tensors, numbers, strings, None, and lists, tuples and dicts of them."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_plain(key, f"{where} (a key)")
            check_plain(item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_plain(item, f"{where}[{index}]")
    elif not isinstance(value, _PLAIN):
        raise TypeError(
            f"checkpoint state {where} is a {type(value).__name__}; use tensors, numbers, "
            "strings, None, lists, tuples and dicts (e.g. int(x) for a numpy integer)"
        )


def save_rank_state(path: Path, state: dict[str, Any]) -> None:
    with open(path, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())


def load_rank_state(step_dir: Path, rank: int) -> dict[str, Any]:
    """This rank's state; rank 0's when the checkpoint was written by fewer processes."""
    path = rank_file(step_dir, rank)
    if not path.is_file():
        path = rank_file(step_dir, 0)
    return torch.load(path, map_location="cpu", weights_only=True)
