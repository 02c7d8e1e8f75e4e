"""Which config fields the trainer reads, and which module reads each one.

    recorder = FieldRecorder()
    proxy = recorder.wrap(load("sft", [], overrides).config)
    train(proxy)
    recorder.paths()          # {"optim.lr", "data.seq_len", ...}
    recorder.readers("optim.lr")   # {"trainspec.trainers.core.optim"}

`wrap` returns a proxy of the resolved config: reading a field of a config model records its
dotted path (union variants add no part: `optim.betas1` whatever `optim.type` is) and the module
that read it, taken from the calling frame; a sub-model comes back wrapped in turn, and so does
each table of an array of tables, under `path[]` (`train.source[].ratio`). Everything
that is not a field (`model_dump_json`, `model_fields`, ...) passes through to the real object
unrecorded, so a component can still dump the config it was given. Only reads from the modules
`counts` accepts are recorded as consumption (the trainers, and the entrypoint for `dry_run`);
reads from anywhere else (the tests themselves) land in `other_reads`, writes in `writes`.

The proxy is no config class: a component that checks isinstance against the generated classes
(components dispatch on `.type` instead) would see the difference and should be reported.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

from pydantic import BaseModel

COUNTED_PACKAGES = ("trainspec.trainers",)
# the entrypoint (dry_run), and the config layer's helpers the orchestrator calls to read its
# sources (source_name, algo_tables): the proxy reaches them only from a trainer
COUNTED_MODULES = ("trainspec.cli.entrypoint", "trainspec.validators.orchestrator")


def counts(module: str) -> bool:
    """Whether a read from `module` is consumption by a trainer component."""
    return module in COUNTED_MODULES or any(
        module == package or module.startswith(package + ".") for package in COUNTED_PACKAGES
    )


class FieldRecorder:
    def __init__(self) -> None:
        self.reads: dict[str, set[str]] = defaultdict(set)  # path -> reading modules
        self.other_reads: dict[str, set[str]] = defaultdict(set)
        self.writes: dict[str, set[str]] = defaultdict(set)

    def wrap(self, config: BaseModel, path: str = "") -> RecordingProxy:
        return RecordingProxy(config, path, self)

    def record(self, path: str, module: str) -> None:
        (self.reads if counts(module) else self.other_reads)[path].add(module)

    def paths(self) -> set[str]:
        return set(self.reads)

    def readers(self, path: str) -> set[str]:
        return set(self.reads.get(path, ()))

    def merge(self, other: FieldRecorder) -> None:
        for mine, theirs in (
            (self.reads, other.reads),
            (self.other_reads, other.other_reads),
            (self.writes, other.writes),
        ):
            for path, modules in theirs.items():
                mine[path] |= modules


def _caller_module(depth: int) -> str:
    return sys._getframe(depth + 1).f_globals.get("__name__", "?")


class RecordingProxy:
    """A config model that records every field read through it (see the module docstring)."""

    __slots__ = ("_fr_target", "_fr_path", "_fr_recorder")

    def __init__(self, target: BaseModel, path: str, recorder: FieldRecorder) -> None:
        object.__setattr__(self, "_fr_target", target)
        object.__setattr__(self, "_fr_path", path)
        object.__setattr__(self, "_fr_recorder", recorder)

    def _fr_child(self, name: str) -> str:
        path = object.__getattribute__(self, "_fr_path")
        return f"{path}.{name}" if path else name

    def __getattr__(self, name: str) -> Any:
        target = object.__getattribute__(self, "_fr_target")
        value = getattr(target, name)  # AttributeError passes through (getattr(x, "n", None))
        if name not in type(target).model_fields:
            return value  # a method or pydantic's own attribute: not a setting
        path = self._fr_child(name)
        recorder = object.__getattribute__(self, "_fr_recorder")
        recorder.record(path, _caller_module(1))
        if isinstance(value, BaseModel):
            return RecordingProxy(value, path, recorder)
        if isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
            # the tables of an array ([[train.source]]): every item's fields under path[]
            return [RecordingProxy(item, f"{path}[]", recorder) for item in value]
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        target = object.__getattribute__(self, "_fr_target")
        recorder = object.__getattribute__(self, "_fr_recorder")
        recorder.writes[self._fr_child(name)].add(_caller_module(1))
        setattr(target, name, value)

    def __repr__(self) -> str:
        path = object.__getattribute__(self, "_fr_path") or "<config>"
        return f"RecordingProxy({path}: {object.__getattribute__(self, '_fr_target')!r})"
