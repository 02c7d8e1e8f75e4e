"""Things a run does besides learning: manual garbage collection (`[gc]`) and profiling
(`trace_path`, `memory_profiler_path`).

    collector = GarbageCollector(config.gc)          # null: Python's own collector
    profiler = Profiler(config.trace_path, config.memory_profiler_path, world.device.type)
    for each step:
        ...
        collector.step(step)
        profiler.step()
    profiler.close()                                 # writes the trace / snapshot
    collector.close()

GarbageCollector pauses Python's automatic collector, which otherwise runs whenever allocations
pile up (in the middle of a step, at a different moment on every rank), and collects every
`interval` steps instead; `close()` gives the automatic collector back.

Profiler starts recording when it is built: `trace_path` records a torch profiler trace of
every step (CPU, and CUDA on a GPU) and writes it as a Chrome trace (chrome://tracing,
ui.perfetto.dev) at `close()`; `memory_profiler_path` records CUDA allocations and writes a
snapshot for pytorch.org/memory_viz. torch is imported only when one of them is set.
"""

from __future__ import annotations

import gc
import logging
from pathlib import Path

from .errors import SetupError

logger = logging.getLogger(__name__)

MEMORY_HISTORY_ENTRIES = 100_000


class GarbageCollector:
    """Collect every `gc.interval` steps instead of whenever Python decides."""

    def __init__(self, gc_cfg) -> None:
        self.interval: int | None = gc_cfg.interval if gc_cfg is not None else None
        self._was_enabled = gc.isenabled()
        if self.interval is not None:
            gc.disable()

    def freeze_setup(self) -> None:
        """Move what setup built (imports, model, data: ~400k objects) out of every later
        collection; otherwise each periodic collect walks it all (~150 ms on 2 cores)."""
        if self.interval is not None:
            gc.collect()
            gc.freeze()

    def step(self, step: int) -> None:
        if self.interval is not None and step % self.interval == 0:
            gc.collect()

    def close(self) -> None:
        if self.interval is not None:
            gc.unfreeze()
            if self._was_enabled:
                gc.enable()
        self.interval = None

    def __enter__(self) -> GarbageCollector:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _writable(path: str, setting: str) -> Path:
    target = Path(path).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SetupError(
            setting,
            f"cannot create the directory of {target}: {exc.strerror or exc}",
            f"point {setting} at a writable location",
        ) from None
    if target.is_dir():
        raise SetupError(setting, f"{target} is a directory", f"give {setting} a file name")
    return target


class Profiler:
    """A torch profiler trace and/or a CUDA memory snapshot of the run's steps."""

    def __init__(
        self, trace_path: str | None, memory_profiler_path: str | None, device_type: str
    ) -> None:
        self.trace_path = _writable(trace_path, "trace_path") if trace_path else None
        self.memory_path = None
        if memory_profiler_path:
            if device_type != "cuda":
                raise SetupError(
                    "memory_profiler_path",
                    f"a CUDA memory snapshot needs a CUDA device, and this run is on {device_type}",
                    "remove memory_profiler_path (or set it to null), or train on a GPU",
                )
            self.memory_path = _writable(memory_profiler_path, "memory_profiler_path")
        self._profile = None
        if self.trace_path is not None:
            import torch.profiler as tp

            activities = [tp.ProfilerActivity.CPU]
            if device_type == "cuda":
                activities.append(tp.ProfilerActivity.CUDA)
            # A schedule that always records: every step is traced, and with a schedule the
            # profiler marks the steps (ProfilerStep#N).
            self._profile = tp.profile(
                activities=activities,
                schedule=lambda step: tp.ProfilerAction.RECORD,
                record_shapes=True,
            )
            self._profile.start()
        if self.memory_path is not None:
            import torch

            torch.cuda.memory._record_memory_history(max_entries=MEMORY_HISTORY_ENTRIES)

    def step(self) -> None:
        """Mark the end of a training step (steps show up as ProfilerStep#N in the trace)."""
        if self._profile is not None:
            self._profile.step()

    def close(self) -> None:
        """Stop recording and write the files; a failure to write is a warning, not an error."""
        if self._profile is not None:
            profile, self._profile = self._profile, None
            try:
                profile.stop()
                profile.export_chrome_trace(str(self.trace_path))
                logger.info("profiler trace written to %s", self.trace_path)
            except Exception as exc:
                logger.warning("cannot write the profiler trace %s: %s", self.trace_path, exc)
        if self.memory_path is not None:
            import torch

            path, self.memory_path = self.memory_path, None
            try:
                torch.cuda.memory._dump_snapshot(str(path))
                logger.info("CUDA memory snapshot written to %s", path)
            except Exception as exc:
                logger.warning("cannot write the CUDA memory snapshot %s: %s", path, exc)
            finally:
                torch.cuda.memory._record_memory_history(enabled=None)

    def __enter__(self) -> Profiler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
