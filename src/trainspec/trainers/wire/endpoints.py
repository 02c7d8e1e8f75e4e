"""The two ends of a rollout transport (transport.py builds them): the orchestrator's `Sender`
and each trainer rank's `Receiver`. A batch stays held until the trainer commits past it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

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
