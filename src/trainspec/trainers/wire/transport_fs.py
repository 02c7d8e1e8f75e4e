"""The filesystem rollout transport: one file per step and rank on storage both sides see.

    run_dir/rollouts/step_{n}/rank_{r}.bin      # batch.encode(batch) of step n, rank r

The orchestrator writes each file whole, for its owner alone (run/atomic_files.py: a hidden
temporary created anew, never through a link planted under its name, fsynced, then renamed
onto the final name), so a reader never sees a partial batch under the final name. The trainer
polls for its file. Files are deleted only by the trainer's commit
(`FileSystemReceiver.commit(step)` deletes the rank's files of steps < step and removes a step
directory once it is empty), so a trainer that resumes from an earlier checkpoint finds the
steps after it still there.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from trainspec.config.steps import step_dir_name, step_of_dir

from ..run import atomic_files as files
from .batch import RolloutBatch, decode, encode
from .endpoints import Receiver, Sender

ROLLOUTS = "rollouts"


def step_dir(run_dir: Path, step: int) -> Path:
    return run_dir / ROLLOUTS / step_dir_name(step)


def rank_file(run_dir: Path, step: int, rank: int) -> Path:
    return step_dir(run_dir, step) / f"rank_{rank}.bin"


def held_steps(run_dir: Path) -> Iterator[tuple[int, Path]]:
    """(step, directory) of every step directory under run_dir/rollouts, in no order."""
    try:
        entries = list(os.scandir(run_dir / ROLLOUTS))
    except FileNotFoundError:
        return
    for entry in entries:
        step = step_of_dir(entry.name)
        if step is not None and entry.is_dir():
            yield step, Path(entry.path)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that `path` is either absent or complete, also after a crash,
    for its owner alone (run/atomic_files.py). A trainer's commit may remove the (empty) step
    directory between our mkdir and our open, or inside mkdir itself (it found the directory,
    then no longer does: FileExistsError); both are retried. Once the temporary file exists the
    directory is not empty and stays."""
    for attempt in range(5):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            files.write_atomic(path, data, private=True)
            return
        except (FileExistsError, FileNotFoundError):  # a commit removed the directory
            if attempt == 4:
                raise


class FileSystemSender(Sender):
    """Writes each batch to its file; holds nothing in memory."""

    def __init__(self, run_dir: Path, ranks: int) -> None:
        if ranks < 1:
            raise ValueError(f"ranks must be at least 1, got {ranks}")
        self.run_dir = run_dir
        self.ranks = ranks

    def send(self, step: int, rank: int, batch: RolloutBatch) -> None:
        if step < 0 or not 0 <= rank < self.ranks:
            raise ValueError(f"no step {step} of rank {rank} with {self.ranks} ranks")
        write_atomic(rank_file(self.run_dir, step, rank), encode(batch))

    def ready_steps(self) -> int:
        """Step directories still on disk (each holds at least one uncommitted batch)."""
        return sum(1 for _ in held_steps(self.run_dir))

    def commit(self, step: int) -> None:
        """Nothing to do: the trainer's ranks delete their own files when they commit."""

    def close(self) -> None:
        pass


class FileSystemReceiver(Receiver):
    """Polls for the rank's file of each step; deletes the rank's files on commit."""

    def __init__(self, run_dir: Path, rank: int) -> None:
        if rank < 0:
            raise ValueError(f"rank must not be negative, got {rank}")
        self.run_dir = run_dir
        self.rank = rank

    def receive(
        self, step: int, should_stop: Callable[[], bool], poll_s: float = 0.005
    ) -> RolloutBatch | None:
        path = rank_file(self.run_dir, step, self.rank)
        while True:
            try:
                return decode(path.read_bytes())
            except FileNotFoundError:
                pass
            if should_stop():
                return None
            time.sleep(poll_s)

    def commit(self, step: int) -> None:
        for number, directory in held_steps(self.run_dir):
            if number < step:
                (directory / f"rank_{self.rank}.bin").unlink(missing_ok=True)
                # fails while other ranks' files are still there, or when already removed
                with contextlib.suppress(OSError):
                    directory.rmdir()

    def close(self) -> None:
        pass
