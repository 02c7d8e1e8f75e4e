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
  trainer rank asks for its steps on a DEALER socket. Both ends authenticate with CURVE keys
  derived from the run's secret, `run_dir/rollouts/zmq.key` (zmq_security.py).
"""

from __future__ import annotations

from pathlib import Path

from .endpoints import Receiver, Sender


def build_sender(transport_cfg, run_dir: Path, ranks: int) -> Sender:
    """The orchestrator's sender for `ranks` trainer ranks, chosen by `transport_cfg.type`."""
    if transport_cfg.type == "filesystem":
        from .transport_fs import FileSystemSender

        return FileSystemSender(Path(run_dir), ranks)
    if transport_cfg.type == "zmq":
        from .transport_zmq import ZMQSender
        from .zmq_security import run_secret

        secret = run_secret(Path(run_dir))
        return ZMQSender(transport_cfg.host, transport_cfg.port, transport_cfg.hwm, ranks, secret)
    raise ValueError(f"unknown rollout transport type {transport_cfg.type!r}")


def build_receiver(transport_cfg, run_dir: Path, rank: int) -> Receiver:
    """Trainer rank `rank`'s receiver, chosen by `transport_cfg.type`."""
    if transport_cfg.type == "filesystem":
        from .transport_fs import FileSystemReceiver

        return FileSystemReceiver(Path(run_dir), rank)
    if transport_cfg.type == "zmq":
        from .transport_zmq_receiver import ZMQReceiver
        from .zmq_security import run_secret

        secret = run_secret(Path(run_dir))
        return ZMQReceiver(transport_cfg.host, transport_cfg.port, transport_cfg.hwm, rank, secret)
    raise ValueError(f"unknown rollout transport type {transport_cfg.type!r}")
