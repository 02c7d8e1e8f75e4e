"""Rollout transports: every step's batch reaches its rank once, in order, with equal tensors;
receive blocks until the orchestrator sends and gives up when told to; a trainer that resumes
from an earlier checkpoint gets the same batches again; committed batches are released.
Real files in tmp_path and real sockets on a free port."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import torch
from helpers.ports import free_port

from trainspec.generated.rollout_transport import FileSystemTransportConfig, ZMQTransportConfig
from trainspec.trainers.errors import SetupError
from trainspec.trainers.wire import transport_fs
from trainspec.trainers.wire.batch import RLMicroBatch, RolloutBatch, encode
from trainspec.trainers.wire.transport import build_receiver, build_sender

torch.set_num_threads(1)
WAIT_S = 15.0  # generous: a busy 2-core machine


@pytest.fixture(params=["filesystem", "zmq"])
def cfg(request):
    if request.param == "filesystem":
        return FileSystemTransportConfig(type="filesystem")
    return ZMQTransportConfig(port=free_port(), hwm=1)  # the smallest queue: replies must wait


@pytest.fixture
def zmq_cfg():
    return ZMQTransportConfig(port=free_port())


def make_batch(step: int, rank: int) -> RolloutBatch:
    generator = torch.Generator().manual_seed(1000 * step + rank)
    micro_batches = []
    for rows in (2, 1):
        shape = (rows, 8)
        micro_batches.append(
            RLMicroBatch(
                input_ids=torch.randint(0, 100, shape, generator=generator),
                position_ids=torch.arange(8).repeat(rows, 1),
                targets=torch.randint(-100, 100, shape, generator=generator),
                loss_mask=torch.rand(shape, generator=generator) > 0.5,
                advantages=torch.randn(shape, generator=generator),
                inference_logprobs=-torch.rand(shape, generator=generator),
            )
        )
    return RolloutBatch(
        step=step, policy_step=max(0, step - 1), temperature=0.7, micro_batches=micro_batches
    )


def assert_same(got: RolloutBatch | None, want: RolloutBatch) -> None:
    assert got is not None
    assert (got.step, got.policy_step, got.temperature) == (
        want.step,
        want.policy_step,
        want.temperature,
    )
    assert len(got.micro_batches) == len(want.micro_batches)
    for mine, theirs in zip(got.micro_batches, want.micro_batches, strict=True):
        for name in RLMicroBatch.FIELDS:
            a, b = getattr(mine, name), getattr(theirs, name)
            assert a.dtype == b.dtype and torch.equal(a, b), name


def never() -> bool:
    return False


def stop_after(seconds: float):
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() > deadline


def wait_for(condition, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def receive(receiver, step: int) -> RolloutBatch | None:
    """Receive with a deadline, so a broken transport fails the test instead of hanging it."""
    return receiver.receive(step, stop_after(WAIT_S), poll_s=0.02)


def step_dirs(run_dir: Path) -> list[str]:
    rollouts = run_dir / "rollouts"
    return sorted(p.name for p in rollouts.iterdir()) if rollouts.exists() else []


def test_every_step_reaches_each_rank_once_in_order(cfg, tmp_path):
    steps, ranks = 5, 2
    with build_sender(cfg, tmp_path, ranks) as sender:
        receivers = [build_receiver(cfg, tmp_path, rank) for rank in range(ranks)]
        for step in range(steps):
            for rank in range(ranks):
                sender.send(step, rank, make_batch(step, rank))
        assert sender.ready_steps() == steps
        for step in range(steps):
            for rank, receiver in enumerate(receivers):
                assert_same(receive(receiver, step), make_batch(step, rank))
                receiver.commit(step + 1)  # no checkpoints: commit every consumed step
        # nothing more arrives, and everything consumed is released
        for receiver in receivers:
            assert receiver.receive(steps, stop_after(0.2), poll_s=0.02) is None
        wait_for(lambda: sender.ready_steps() == 0)
        if cfg.type == "filesystem":
            assert step_dirs(tmp_path) == []
        for receiver in receivers:
            receiver.close()


def test_receive_blocks_until_the_batch_is_sent(cfg, tmp_path):
    with build_sender(cfg, tmp_path, 1) as sender, build_receiver(cfg, tmp_path, 0) as receiver:
        delay_s = 0.5
        thread = threading.Thread(
            target=lambda: (time.sleep(delay_s), sender.send(0, 0, make_batch(0, 0)))
        )
        start = time.monotonic()
        thread.start()
        got = receive(receiver, 0)
        elapsed = time.monotonic() - start
        thread.join()
        assert_same(got, make_batch(0, 0))
        assert elapsed >= delay_s * 0.9


def test_should_stop_ends_the_wait_and_the_wait_can_resume(cfg, tmp_path):
    with build_sender(cfg, tmp_path, 1) as sender, build_receiver(cfg, tmp_path, 0) as receiver:
        start = time.monotonic()
        assert receiver.receive(0, stop_after(0.3), poll_s=0.02) is None
        assert time.monotonic() - start < WAIT_S
        sender.send(0, 0, make_batch(0, 0))
        assert_same(receive(receiver, 0), make_batch(0, 0))


def test_a_resumed_trainer_gets_the_steps_after_its_checkpoint_again(cfg, tmp_path):
    with build_sender(cfg, tmp_path, 1) as sender:
        for step in range(5):
            sender.send(step, 0, make_batch(step, 0))
        first = build_receiver(cfg, tmp_path, 0)
        for step in range(4):
            assert_same(receive(first, step), make_batch(step, 0))
            if step < 2:  # a checkpoint at step 2 is written after steps 0 and 1
                first.commit(step + 1)
        first.close()  # crash after step 3, before any later checkpoint
        wait_for(lambda: sender.ready_steps() == 3)  # steps 0 and 1 are released
        if cfg.type == "filesystem":
            assert step_dirs(tmp_path) == ["step_2", "step_3", "step_4"]

        resumed = build_receiver(cfg, tmp_path, 0)
        for step in (2, 3, 4):
            assert_same(receive(resumed, step), make_batch(step, 0))
            resumed.commit(step + 1)
        wait_for(lambda: sender.ready_steps() == 0)
        resumed.close()


def test_filesystem_commit_deletes_only_the_ranks_own_files(tmp_path):
    cfg = FileSystemTransportConfig(type="filesystem")
    sender = build_sender(cfg, tmp_path, 2)
    receivers = [build_receiver(cfg, tmp_path, rank) for rank in range(2)]
    for step in range(2):
        for rank in range(2):
            sender.send(step, rank, make_batch(step, rank))
    step0 = tmp_path / "rollouts" / "step_0"
    assert sorted(p.name for p in step0.iterdir()) == ["rank_0.bin", "rank_1.bin"]

    receivers[0].commit(1)
    assert sorted(p.name for p in step0.iterdir()) == ["rank_1.bin"]
    receivers[1].commit(1)
    assert step_dirs(tmp_path) == ["step_1"]
    receivers[0].commit(1)  # committing again is harmless
    assert sorted(p.name for p in (tmp_path / "rollouts" / "step_1").iterdir()) == [
        "rank_0.bin",
        "rank_1.bin",
    ]


def test_filesystem_writes_are_atomic(tmp_path, monkeypatch):
    """The bytes are complete and fsynced under a temporary name in the same directory before
    the final name appears; a failed write leaves neither name behind."""
    cfg = FileSystemTransportConfig(type="filesystem")
    sender = build_sender(cfg, tmp_path, 1)
    blob = encode(make_batch(0, 0))
    final = transport_fs.rank_file(tmp_path, 0, 0)
    seen, synced = [], []
    real_replace, real_fsync = os.replace, os.fsync

    def fsync(fd):
        synced.append(fd)
        real_fsync(fd)

    def replace(src, dst):
        src, dst = Path(src), Path(dst)
        seen.append((src, dst, dst.exists(), src.read_bytes() == blob, len(synced)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    sender.send(0, 0, make_batch(0, 0))
    [(src, dst, existed, complete, syncs_before)] = seen
    assert dst == final and src.parent == final.parent and src.name.startswith(".")
    assert not existed and complete and syncs_before >= 1
    assert final.read_bytes() == blob and not src.exists()

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        sender.send(1, 0, make_batch(1, 0))
    assert list(transport_fs.step_dir(tmp_path, 1).iterdir()) == []


def test_zmq_request_lost_with_an_orchestrator_restart_is_asked_again(zmq_cfg, tmp_path):
    receiver = build_receiver(zmq_cfg, tmp_path, 0)
    first = build_sender(zmq_cfg, tmp_path, 1)
    assert receiver.receive(0, stop_after(0.3), poll_s=0.02) is None  # request now at `first`
    first.close()
    with build_sender(zmq_cfg, tmp_path, 1) as second:
        second.send(0, 0, make_batch(0, 0))
        assert_same(receive(receiver, 0), make_batch(0, 0))
    receiver.close()


def test_zmq_step_committed_away_is_refused(zmq_cfg, tmp_path):
    with build_sender(zmq_cfg, tmp_path, 1) as sender, build_receiver(zmq_cfg, tmp_path, 0) as rx:
        sender.send(0, 0, make_batch(0, 0))
        sender.commit(1)
        assert sender.ready_steps() == 0
        with pytest.raises(RuntimeError, match="committed"):
            receive(rx, 0)


def test_zmq_port_in_use_is_a_setup_error(zmq_cfg, tmp_path):
    with build_sender(zmq_cfg, tmp_path, 1), pytest.raises(SetupError, match="cannot listen"):
        build_sender(zmq_cfg, tmp_path, 1)


def test_a_step_directory_removed_inside_mkdir_is_recreated(tmp_path, monkeypatch):
    """A trainer rank's commit can remove the empty step directory while the sender's mkdir
    runs: mkdir sees it exist, then finds no directory and raises FileExistsError. The write
    is retried, not lost."""
    from pathlib import Path

    from trainspec.trainers.wire import transport_fs

    real_mkdir = Path.mkdir
    raced = []

    def mkdir(self, *args, **kwargs):
        if not raced:
            raced.append(self)
            raise FileExistsError(17, "File exists", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    target = tmp_path / "rollouts" / "step_0" / "rank_1.bin"
    transport_fs.write_atomic(target, b"batch")
    assert raced and target.read_bytes() == b"batch"
