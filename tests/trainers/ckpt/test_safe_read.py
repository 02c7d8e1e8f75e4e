"""ckpt/safe_read.py: resuming runs no code from a checkpoint's files. A `.metadata` or a
non-tensor value crafted to run code (here: to create a marker file) is refused with the file
it came from, and the marker never appears; torch's own readers would have run it (shown
beside each refusal); a checkpoint trainspec wrote loads as before, in this process and after
FSDP (test_checkpointer.py)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

from trainspec.trainers.ckpt.checkpointer import Checkpointer
from trainspec.trainers.ckpt.safe_read import SafeReader, UnsafeCheckpoint, safe_load
from trainspec.trainers.ckpt.trainer_state import trainer_state
from trainspec.trainers.core.world import World, init_world
from trainspec.trainers.errors import SetupError

torch.set_num_threads(1)


class Payload:
    """Pickles as "call exec on this code": unpickling it creates `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.fixture(scope="module")
def world() -> World:
    created = not dist.is_initialized()
    yield init_world(60)
    if created:
        dist.destroy_process_group()


def build():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    return model, optimizer


def saved(tmp_path: Path, world: World) -> tuple[Checkpointer, Path]:
    checkpointer = Checkpointer(None, tmp_path, world)
    model, optimizer = build()
    path = checkpointer.save(1, model=model, optimizer=optimizer, scheduler=None, extra={})
    return checkpointer, path


def load(checkpointer: Checkpointer, path: Path) -> dict:
    model, optimizer = build()
    return checkpointer.load(path, model=model, optimizer=optimizer, scheduler=None, ckpt_cfg=None)


def test_metadata_that_would_run_code_is_refused_unrun(tmp_path, world):
    checkpointer, path = saved(tmp_path, world)
    metadata = path / "trainer" / ".metadata"
    metadata.write_bytes(pickle.dumps(Payload(tmp_path / "ran")))
    with pytest.raises(SetupError) as caught:
        load(checkpointer, path)
    assert isinstance(caught.value, UnsafeCheckpoint)
    assert caught.value.path == "resume"
    assert str(metadata) in caught.value.problem and "builtins.exec" in caught.value.problem
    assert "could run code" in caught.value.problem and "trainspec wrote" in caught.value.fix
    assert not (tmp_path / "ran").exists()

    with pytest.raises(UnsafeCheckpoint) as caught:  # inside torch's load, as after a swap
        safe_load(trainer_state(*build()), path / "trainer")
    assert str(metadata) in caught.value.problem
    assert not (tmp_path / "ran").exists()

    with pytest.raises(AttributeError):  # torch's own reader runs it, then fails on None
        dcp.FileSystemReader(path / "trainer").read_metadata()
    assert (tmp_path / "ran").exists()


def test_a_value_that_would_run_code_is_refused_unrun(tmp_path, world):
    """The optimizer's hyperparameters are pickles of their own in the `.distcp` files."""
    checkpointer, path = saved(tmp_path, world)
    model, optimizer = build()
    state = trainer_state(model, optimizer)
    state["optim"]["param_groups"][0]["lr"] = Payload(tmp_path / "ran")
    writer = dcp.FileSystemWriter(path / "trainer", overwrite=True)
    dcp.save(state, storage_writer=writer)  # the same layout, one value crafted
    with pytest.raises(SetupError) as caught:
        load(checkpointer, path)
    assert isinstance(caught.value, UnsafeCheckpoint)
    assert "'optim.param_groups.0.lr' is not plain data" in caught.value.problem
    assert not (tmp_path / "ran").exists()

    fresh = trainer_state(*build())
    dcp.load(fresh, checkpoint_id=path / "trainer")  # torch's own planner runs it
    assert (tmp_path / "ran").exists()


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps({"a": 1})])
def test_metadata_that_is_not_metadata_is_refused_with_the_file(tmp_path, world, damage):
    checkpointer, path = saved(tmp_path, world)
    (path / "trainer" / ".metadata").write_bytes(damage)
    with pytest.raises(UnsafeCheckpoint) as caught:
        load(checkpointer, path)
    assert str(path / "trainer" / ".metadata") in caught.value.problem


def test_a_checkpoint_trainspec_wrote_loads_and_its_metadata_reads(tmp_path, world):
    checkpointer, path = saved(tmp_path, world)
    model, optimizer = build()
    assert load(checkpointer, path) == {}
    keys = SafeReader(path / "trainer").read_metadata().state_dict_metadata
    assert "model.0.weight" in keys and "optim.param_groups.0.lr" in keys
    fresh, _ = build()
    for mine, theirs in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(mine, theirs)


def test_the_refusal_crosses_ranks_intact():
    """torch gathers every rank's failure by pickling it: the refusal must survive that."""
    error = UnsafeCheckpoint("resume", "x is crafted")
    again = pickle.loads(pickle.dumps(error))
    assert (again.path, again.problem, again.fix) == (error.path, error.problem, error.fix)
