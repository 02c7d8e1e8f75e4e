"""Reading a checkpoint's `trainer/` part without running code from its files.

torch.distributed.checkpoint stores two kinds of pickle beside the tensors: `.metadata` (which
tensor is where), which its FileSystemReader unpickles with `pickle.load`, and the non-tensor
values of the state (an optimizer's hyperparameters), which its default planner loads with
`torch.load(weights_only=False)`. Both run whatever code a crafted file names, and a checkpoint
may come from a shared filesystem or from someone else (`resume.dir`). Here both are read
restricted instead:

    metadata = SafeReader(trainer_dir).read_metadata()     # or UnsafeCheckpoint
    safe_load(state, trainer_dir)                           # dcp.load with both readers

* `.metadata` through an unpickler that admits only what checkpoint metadata is made of: the
  classes of torch.distributed.checkpoint.metadata, the file reader's `_StorageInfo`, torch's
  dtypes, sizes and layouts, and paths; any other name is refused before it is looked up;
* the non-tensor values with `torch.load(weights_only=True)`: numbers, strings, tuples, lists,
  dicts, tensors.

No ownership or mode check: a checkpoint written by a colleague, or copied, loads as well as
one's own, and a group-writable run directory (umask 002) is no reason to refuse. A refusal is
an UnsafeCheckpoint (a SetupError on `resume`) naming the file and what it asked for.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

from ..errors import SetupError

FIX = (
    "resume from a checkpoint trainspec wrote (a step_<N> directory of a run's checkpoints); "
    "a file that asks for anything else was not written by torch.distributed.checkpoint"
)
# What a checkpoint's `.metadata` pickle may name, besides the classes of dcp_metadata and
# torch's dtypes: module -> names.
ALLOWED = {
    "torch": {"Size"},
    "torch.serialization": {"_get_layout"},  # a layout by its name (torch.strided)
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "pathlib": {"Path", "PosixPath", "WindowsPath", "PurePath", "PurePosixPath", "PureWindowsPath"},
    "collections": {"OrderedDict"},
    "builtins": {"set", "frozenset"},
}


class UnsafeCheckpoint(SetupError):
    """A checkpoint file that asks for code to run; picklable, as torch gathers the failures
    of every rank."""

    def __init__(self, path: str, problem: str, fix: str = FIX) -> None:
        super().__init__(path, problem, fix)

    def __reduce__(self):
        return (type(self), (self.path, self.problem, self.fix))


class MetadataUnpickler(pickle.Unpickler):
    """pickle's unpickler that looks up only what checkpoint metadata is made of."""

    def __init__(self, file, path: Path) -> None:
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        if "." not in name and allowed(module, name):
            return super().find_class(module, name)
        raise UnsafeCheckpoint(
            "resume",
            f"{self.path} names {module}.{name}, which checkpoint metadata never holds: it is "
            "not loaded, as unpickling it could run code from the file",
        )


def allowed(module: str, name: str) -> bool:
    if module == dcp_metadata.__name__:
        found = getattr(dcp_metadata, name, None)
        return isinstance(found, type) and found.__module__ == module
    if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
        return True
    return name in ALLOWED.get(module, ())


class SafeReader(dcp.FileSystemReader):
    """torch's FileSystemReader with `.metadata` read by MetadataUnpickler; its refusal is kept
    in `refused` (torch turns a failed metadata read into an AssertionError of its own)."""

    refused: UnsafeCheckpoint | None = None

    def read_metadata(self, *args: Any, **kwargs: Any) -> dcp_metadata.Metadata:
        path = Path(self._get_metadata_path(kwargs.get("rank")))
        with self.fs.create_stream(path, "rb") as stream:
            try:
                metadata = MetadataUnpickler(stream, path).load()
            except UnsafeCheckpoint as exc:
                self.refused = self.refused or exc
                raise
            except Exception as exc:  # noqa: BLE001 - torn or foreign: say which file
                raise UnsafeCheckpoint(
                    "resume", f"{path} is not checkpoint metadata ({type(exc).__name__}: {exc})"
                ) from None
        if not isinstance(metadata, dcp_metadata.Metadata):
            self.refused = self.refused or UnsafeCheckpoint(
                "resume", f"{path} holds a {type(metadata).__name__}, not checkpoint metadata"
            )
            raise self.refused
        storage = getattr(metadata, "storage_meta", None)
        if storage is None:
            storage = metadata.storage_meta = dcp_metadata.StorageMeta()
        storage.load_id = self.load_id
        return metadata


class SafePlanner(DefaultLoadPlanner):
    """torch's default load planner with the non-tensor values read weights-only."""

    def load_bytes(self, read_item, value) -> None:
        fqn = read_item.dest_index.fqn
        try:
            loaded = torch.load(value, weights_only=True)
        except pickle.UnpicklingError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else "refused"
            raise UnsafeCheckpoint(
                "resume",
                f"the checkpoint's value {fqn!r} is not plain data (torch.load weights_only: "
                f"{first}): it is not loaded, as unpickling it could run code from the file",
            ) from None
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[fqn], loaded)
        else:
            self.state_dict[fqn] = loaded


def safe_load(state: dict[str, Any], trainer_dir: Path) -> None:
    """dcp.load(state, checkpoint_id=trainer_dir), reading through SafeReader and SafePlanner;
    a refusal on any rank is raised as the UnsafeCheckpoint itself, not torch's wrapper."""
    reader = SafeReader(trainer_dir)
    try:
        dcp.load(state, storage_reader=reader, planner=SafePlanner())
    except CheckpointException as exc:
        if reader.refused is not None:
            raise reader.refused from None
        for failure in exc.failures.values():
            cause = failure[0] if isinstance(failure, tuple) else failure
            if isinstance(cause, UnsafeCheckpoint):
                raise cause from None
        raise
