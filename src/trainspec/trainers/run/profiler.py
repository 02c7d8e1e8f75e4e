"""Profiling a run, built from `trace_path` and `memory_profiler_path`.

    profiler = Profiler(config.trace_path, config.memory_profiler_path, world.device.type)
    for each step:
        profiler.step()
    profiler.close()                                 # writes the trace / snapshot

Profiler starts recording when it is built: `trace_path` records a torch profiler trace of
every step (CPU, and CUDA on a GPU) and writes it as a Chrome trace (chrome://tracing,
ui.perfetto.dev) at `close()`; `memory_profiler_path` records CUDA allocations and writes a
snapshot for pytorch.org/memory_viz. torch is imported only when one of them is set.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import SetupError

logger = logging.getLogger(__name__)

MEMORY_HISTORY_ENTRIES = 100_000


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
