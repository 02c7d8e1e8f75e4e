"""How rollouts travel from the orchestrator to the trainer, built from `[rollout_transport]`.

    sender = build_sender(cfg, run_dir, ranks)         # orchestrator
    sender.send(step, rank, batch)                     # one RolloutBatch per step and rank
    receiver = build_receiver(cfg, run_dir, rank)      # trainer, one per rank
    batch = receiver.receive(step, should_stop)        # None: should_stop() turned true
    receiver.commit(step)                              # checkpoint at `step`: steps < step done

The trainer consumes step n's batch for its rank in order, exactly once, also across a crash and
a resume from a checkpoint at an earlier step: a batch therefore stays available until the
trainer *commits* past it (after its checkpoint, or after every step when it does not
checkpoint), never merely because it was delivered. Both transports move the same bytes
(`batch.encode` / `batch.decode`, a safetensors blob):

- `filesystem` (transport_fs.py): one file per step and rank under `run_dir/rollouts`, written
  atomically; the receiver polls for it and deletes it on commit.
- `zmq` (transport_zmq.py): the orchestrator serves batches from memory on a ROUTER socket; each
  trainer rank asks for its steps on a DEALER socket.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from .batch import RolloutBatch


class Sender(ABC):
    """Orchestrator side: hands each step's per-rank batches to the trainer."""

    @abstractmethod
    def send(self, step: int, rank: int, batch: RolloutBatch) -> None:
        """Make `batch` available as step `step` of rank `rank`; returns without waiting for the
        trainer (batches are held until committed, see the module docstring)."""

    @abstractmethod
    def ready_steps(self) -> int:
        """How many sent steps are still held, i.e. not yet released by the trainer's commits;
        an orchestrator can throttle on it to bound how far it runs ahead."""

    @abstractmethod
    def commit(self, step: int) -> None:
        """The trainer checkpointed through `step`: batches of steps < step may be forgotten."""

    @abstractmethod
    def close(self) -> None:
        """Release sockets and threads; idempotent."""

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Receiver(ABC):
    """Trainer side, one per rank: receives the rank's batch of each step, in order."""

    @abstractmethod
    def receive(
        self, step: int, should_stop: Callable[[], bool], poll_s: float = 0.1
    ) -> RolloutBatch | None:
        """Block until step `step`'s batch for this rank is there and return it; return None
        as soon as `should_stop()` turns true while waiting (checked every `poll_s`)."""

    @abstractmethod
    def commit(self, step: int) -> None:
        """The trainer checkpointed at `step`: this rank's batches of steps < step are no longer
        needed, now or after a resume."""

    @abstractmethod
    def close(self) -> None:
        """Release files or sockets; idempotent."""

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_sender(transport_cfg, run_dir: Path, ranks: int) -> Sender:
    """The orchestrator's sender for `ranks` trainer ranks, chosen by `transport_cfg.type`."""
    if transport_cfg.type == "filesystem":
        from .transport_fs import FileSystemSender

        return FileSystemSender(Path(run_dir), ranks)
    if transport_cfg.type == "zmq":
        from .transport_zmq import ZMQSender

        return ZMQSender(transport_cfg.host, transport_cfg.port, transport_cfg.hwm, ranks)
    raise ValueError(f"unknown rollout transport type {transport_cfg.type!r}")


def build_receiver(transport_cfg, run_dir: Path, rank: int) -> Receiver:
    """Trainer rank `rank`'s receiver, chosen by `transport_cfg.type`."""
    if transport_cfg.type == "filesystem":
        from .transport_fs import FileSystemReceiver

        return FileSystemReceiver(Path(run_dir), rank)
    if transport_cfg.type == "zmq":
        from .transport_zmq_receiver import ZMQReceiver

        return ZMQReceiver(transport_cfg.host, transport_cfg.port, transport_cfg.hwm, rank)
    raise ValueError(f"unknown rollout transport type {transport_cfg.type!r}")
