"""Checkpoints on real files with real torch: round trips, retention, skip flags, resume
resolution, a process killed mid-save, the Hugging Face export, and FSDP2 over two processes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from safetensors import safe_open
from torch import nn

from trainspec.config import load
from trainspec.trainers.ckpt import hf_export
from trainspec.trainers.ckpt.checkpointer import Checkpointer
from trainspec.trainers.ckpt.resume import resolve_resume
from trainspec.trainers.core.world import World, init_world
from trainspec.trainers.errors import SetupError

WORKER = Path(__file__).parent.parent / "ckpt_worker.py"
torch.set_num_threads(1)


def worker_helpers():
    """The worker script as a module, for its tiny Qwen3 (imported late: it loads transformers)."""
    if str(WORKER.parent) not in sys.path:
        sys.path.insert(0, str(WORKER.parent))
    import ckpt_worker

    return ckpt_worker


@pytest.fixture(scope="module")
def world() -> World:
    """One process in its own group, as the trainers run it; left as found."""
    created = not dist.is_initialized()
    yield init_world(60)
    if created:
        dist.destroy_process_group()


def sft_config(**overrides):
    return load("sft", [], overrides).config


def ckpt_cfg(**fields):
    return sft_config(ckpt={}, **{f"ckpt.{k}": v for k, v in fields.items()}).ckpt


class Net(nn.Module):
    """Small enough to train in milliseconds; dropout makes the torch generator matter."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x)


def build(seed: int):
    torch.manual_seed(seed)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 4))
    return model, optimizer, scheduler


def step(model, optimizer, scheduler) -> float:
    """One update on data drawn from all three generators (python, numpy, torch)."""
    x = torch.randn(4, 8) + float(np.random.rand()) + random.random()
    loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def save(checkpointer, at: int, model, optimizer, scheduler, **kwargs) -> Path:
    extra = {"data": {"position": at}, "progress": {"step": at, "tokens": 10 * at}}
    return checkpointer.save(
        at, model=model, optimizer=optimizer, scheduler=scheduler, extra=extra, **kwargs
    )


def test_round_trip_reproduces_the_next_steps(tmp_path, world):
    seed_all(0)
    model, optimizer, scheduler = build(0)
    for _ in range(2):
        step(model, optimizer, scheduler)
    checkpointer = Checkpointer(ckpt_cfg(interval=2), tmp_path, world)
    path = save(checkpointer, 2, model, optimizer, scheduler)
    expected = [step(model, optimizer, scheduler) for _ in range(3)]

    seed_all(123)
    fresh, fresh_optimizer, fresh_scheduler = build(1)
    extra = checkpointer.load(
        path,
        model=fresh,
        optimizer=fresh_optimizer,
        scheduler=fresh_scheduler,
        ckpt_cfg=ckpt_cfg(interval=2),
    )
    assert extra == {"data": {"position": 2}, "progress": {"step": 2, "tokens": 20}}
    assert [step(fresh, fresh_optimizer, fresh_scheduler) for _ in range(3)] == expected
    for mine, theirs in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(mine, theirs)


def test_layout(tmp_path, world):
    checkpointer = Checkpointer(ckpt_cfg(interval=2), tmp_path, world)
    assert checkpointer.directory == tmp_path / "checkpoints"
    assert Checkpointer(None, tmp_path, world).latest() is None

    path = save(checkpointer, 2, *build(0))
    assert path == tmp_path / "checkpoints" / "step_2"
    names = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}
    assert {"meta.json", "rank_0.pt", "trainer/.metadata", "weights/model.safetensors"} <= names
    assert sorted(p.name for p in checkpointer.directory.iterdir()) == ["latest", "step_2"]
    assert (checkpointer.directory / "latest").readlink() == Path("step_2")  # relative

    checkpointer.save(2, model=Net(), optimizer=None, scheduler=None, extra={"again": True})
    assert sorted(p.name for p in checkpointer.directory.iterdir()) == ["latest", "step_2"]
    extra = checkpointer.load(path, model=Net(), optimizer=None, scheduler=None, ckpt_cfg=None)
    assert extra == {"again": True}

    elsewhere = tmp_path / "elsewhere"
    assert Checkpointer(ckpt_cfg(output_dir=str(elsewhere)), tmp_path, world).directory == elsewhere


@pytest.mark.parametrize(
    ("fields", "kept"),
    [
        ({"keep_last": 2}, [6, 7]),
        ({"keep_last": 2, "keep_interval": 3}, [3, 6, 7]),
        ({"keep_last": 1, "keep_interval": 2}, [2, 4, 6, 7]),
        ({}, [1, 2, 3, 4, 5, 6, 7]),
    ],
)
def test_retention(tmp_path, world, fields, kept):
    checkpointer = Checkpointer(ckpt_cfg(interval=1, **fields), tmp_path, world)
    state = build(0)
    for at in range(1, 8):
        save(checkpointer, at, *state)
    assert checkpointer.steps() == kept
    assert sorted(p.name for p in checkpointer.directory.iterdir()) == sorted(
        ["latest", *(f"step_{s}" for s in kept)]
    )
    assert (checkpointer.directory / "latest").resolve() == checkpointer.find(7)


def test_the_step_just_saved_survives_retention(tmp_path, world):
    """A run restarted with skip_progress saves low steps beside higher ones."""
    checkpointer = Checkpointer(ckpt_cfg(keep_last=1), tmp_path, world)
    state = build(0)
    save(checkpointer, 5, *state)
    save(checkpointer, 2, *state)
    assert checkpointer.steps() == [2, 5]


@pytest.mark.parametrize(
    "flag", [None, "skip_optimizer", "skip_scheduler", "skip_dataloader", "skip_progress"]
)
def test_skip_flags(tmp_path, world, flag):
    seed_all(0)
    model, optimizer, scheduler = build(0)
    for _ in range(2):
        step(model, optimizer, scheduler)
    checkpointer = Checkpointer(None, tmp_path, world)
    path = save(checkpointer, 2, model, optimizer, scheduler)

    fresh, fresh_optimizer, fresh_scheduler = build(1)
    cfg = ckpt_cfg(**({flag: True} if flag else {}))
    extra = checkpointer.load(
        path, model=fresh, optimizer=fresh_optimizer, scheduler=fresh_scheduler, ckpt_cfg=cfg
    )

    for mine, theirs in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(mine, theirs)  # the model, always
    first = next(fresh.parameters())
    if flag == "skip_optimizer":
        assert not fresh_optimizer.state
    else:
        saved_moment = optimizer.state[next(model.parameters())]["exp_avg"]
        assert torch.equal(fresh_optimizer.state[first]["exp_avg"], saved_moment)
    lr = fresh_optimizer.param_groups[0]["lr"]
    if flag == "skip_scheduler":
        assert fresh_scheduler.last_epoch == 0
        assert lr == pytest.approx(1e-2 / 4)  # the fresh schedule's first rate
    else:
        assert fresh_scheduler.last_epoch == scheduler.last_epoch == 2
        assert lr == scheduler.get_last_lr()[0] == pytest.approx(1e-2 * 3 / 4)
    assert ("data" in extra) == (flag != "skip_dataloader")
    assert ("progress" in extra) == (flag != "skip_progress")


def test_optimizer_settings_come_from_this_run(tmp_path, world):
    """Moments and step counts are restored; weight decay (a setting) is this run's config."""
    model, optimizer, scheduler = build(0)
    step(model, optimizer, scheduler)
    checkpointer = Checkpointer(None, tmp_path, world)
    path = save(checkpointer, 1, model, optimizer, scheduler)
    fresh, _, _ = build(1)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=1e-2, weight_decay=0.5)
    checkpointer.load(path, model=fresh, optimizer=fresh_optimizer, scheduler=None, ckpt_cfg=None)
    assert fresh_optimizer.param_groups[0]["weight_decay"] == 0.5
    assert fresh_optimizer.param_groups[0]["lr"] == 1e-2
    first = next(fresh.parameters())
    assert fresh_optimizer.state[first]["step"].item() == 1


def test_extra_must_be_plain(tmp_path, world):
    checkpointer = Checkpointer(None, tmp_path, world)
    model, optimizer, scheduler = build(0)
    with pytest.raises(TypeError, match=r"extra\['data'\]\['position'\] is a int64"):
        checkpointer.save(
            1,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            extra={"data": {"position": np.int64(3)}},
        )
    assert not checkpointer.directory.exists() or not any(checkpointer.directory.iterdir())


def test_resolve_resume(tmp_path, world):
    run = Checkpointer(None, tmp_path / "run", world)
    assert resolve_resume(None, run) is None
    assert resolve_resume(sft_config(resume={}).resume, run) is None  # fresh start
    state = build(0)
    for at in (2, 4):
        save(run, at, *state)
    assert resolve_resume(sft_config(resume={}).resume, run) == run.directory / "step_4"
    assert resolve_resume(sft_config(**{"resume.step": 2}).resume, run) == run.find(2)

    with pytest.raises(SetupError) as caught:
        resolve_resume(sft_config(**{"resume.step": 3}).resume, run)
    assert caught.value.path == "resume.step"
    assert "available steps: 2, 4" in caught.value.problem
    empty = Checkpointer(None, tmp_path / "empty", world)
    with pytest.raises(SetupError, match="no complete checkpoint"):
        resolve_resume(sft_config(**{"resume.step": 3}).resume, empty)

    other = Checkpointer(None, tmp_path / "other", world)
    forked = resolve_resume(sft_config(**{"resume.dir": str(run.find(4))}).resume, other)
    assert forked == run.find(4)
    missing = str(run.directory / "step_9")
    with pytest.raises(SetupError, match="does not exist") as caught:
        resolve_resume(sft_config(**{"resume.dir": missing}).resume, other)
    assert caught.value.path == "resume.dir"
    (run.directory / "step_6" / "trainer").mkdir(parents=True)  # a copy cut short
    assert run.latest() == run.find(4)
    with pytest.raises(SetupError, match="not a complete checkpoint") as caught:
        resolve_resume(sft_config(**{"resume.dir": str(run.directory / "step_6")}).resume, other)
    assert caught.value.path == "resume.dir"
    assert "complete steps beside it: 2, 4" in caught.value.problem


def run_worker(*args: str, launcher: tuple[str, ...] = ()) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, *launcher, str(WORKER), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.parametrize("phase", ["rank_state", "weights", "publish"])
def test_sigkill_mid_save_keeps_the_last_checkpoint(tmp_path, world, phase):
    worker = run_worker("crash", str(tmp_path), phase)
    deadline = time.monotonic() + 600  # generous: only guards against a hung test run
    while not (tmp_path / "ready").exists():
        assert worker.poll() is None, worker.communicate()[0]
        assert time.monotonic() < deadline, "the worker never reached the save"
        time.sleep(0.1)
    worker.send_signal(signal.SIGKILL)
    worker.wait()

    checkpointer = Checkpointer(None, tmp_path, world)
    assert (checkpointer.directory / ".step_2.tmp").is_dir()  # the half-written save
    assert checkpointer.latest() == checkpointer.directory / "step_1"
    assert checkpointer.steps() == [1]
    assert not (checkpointer.directory / "step_2").exists()

    import transformers

    helpers = worker_helpers()
    model = helpers.tiny_qwen3(7)
    optimizer, scheduler = helpers.training_state(model)
    extra = checkpointer.load(
        checkpointer.latest(),
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        ckpt_cfg=None,
    )
    assert extra == {"progress": {"step": 1}}
    expected = torch.load(tmp_path / "expected.pt")
    assert all(torch.equal(expected[k], v) for k, v in model.state_dict().items())
    exported = transformers.AutoModelForCausalLM.from_pretrained(checkpointer.latest() / "weights")
    assert all(torch.equal(expected[k], v) for k, v in exported.state_dict().items())

    save(checkpointer, 2, model, optimizer, scheduler)  # the next save clears the leftovers
    names = sorted(p.name for p in checkpointer.directory.iterdir())
    assert names == ["latest", "step_1", "step_2"]


class LossWrapper(nn.Module):
    """Holds the language model under `lm`, as the trainer's loss module does."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm


@pytest.mark.parametrize("shard_bytes", [None, 20_000])
def test_hf_export_loads_with_transformers(tmp_path, world, monkeypatch, shard_bytes):
    import transformers
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    if shard_bytes:
        monkeypatch.setattr(hf_export, "SHARD_BYTES", shard_bytes)
    lm = worker_helpers().tiny_qwen3(0)
    reference = {k: v.clone() for k, v in lm.state_dict().items()}
    layers = lm.model.layers
    layers[0] = torch.compile(checkpoint_wrapper(layers[0]), backend="eager")
    model = LossWrapper(lm)
    assert any("_orig_mod._checkpoint_wrapped_module" in n for n, _ in model.named_parameters())

    calls = []

    def export(weights_dir: Path, state: dict, adapter_dir: Path | None) -> None:
        calls.append(sorted(state))
        lm.config.save_pretrained(weights_dir)

    optimizer = torch.optim.AdamW(model.parameters())
    path = Checkpointer(None, tmp_path, world).save(
        1, model=model, optimizer=optimizer, scheduler=None, extra={}, export=export
    )
    weights_dir = path / "weights"
    files = sorted(p.name for p in weights_dir.glob("*.safetensors"))
    names = set()
    for file in files:
        with safe_open(weights_dir / file, "pt") as handle:
            names |= set(handle.keys())
    assert names == set(reference) - {"lm_head.weight"}  # clean names, the tie written once
    assert calls == [sorted(names)]
    if shard_bytes:
        assert len(files) > 1 and (weights_dir / "model.safetensors.index.json").is_file()
    else:
        assert files == ["model.safetensors"]

    loaded = transformers.AutoModelForCausalLM.from_pretrained(weights_dir)
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    state = loaded.state_dict()
    assert state.keys() == reference.keys()
    assert all(torch.equal(state[k], reference[k]) for k in reference)


def test_shared_storage_that_is_not_a_tie_is_cloned():
    base = torch.arange(6.0)
    state = {"a.weight": base, "b.weight": base, "c.weight": base[:3]}
    out = hf_export.hf_state_dict(state, prefix="", aliases=set())
    pointers = {t.untyped_storage().data_ptr() for t in out.values()}
    assert len(pointers) == 3
    assert all(torch.equal(out[k], state[k]) for k in state)


def test_fsdp_two_processes(tmp_path, world):
    import transformers

    launcher = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2")
    worker = run_worker("fsdp", str(tmp_path), launcher=launcher)
    output = worker.communicate()[0]
    assert worker.returncode == 0, output
    assert "fsdp ok" in output

    expected = torch.load(tmp_path / "expected.pt")
    checkpointer = Checkpointer(None, tmp_path, world)
    path = checkpointer.latest()
    assert path == tmp_path / "checkpoints" / "step_1"
    exported = transformers.AutoModelForCausalLM.from_pretrained(path / "weights")
    assert all(torch.equal(expected[k], v) for k, v in exported.state_dict().items())

    # the two-process checkpoint reloads into one process (resharded)
    helpers = worker_helpers()
    model = helpers.tiny_qwen3(5)
    optimizer, scheduler = helpers.training_state(model)
    extra = checkpointer.load(
        path, model=model, optimizer=optimizer, scheduler=scheduler, ckpt_cfg=None
    )
    assert extra == {"data": {"rank": 0}}
    assert all(torch.equal(expected[k], v) for k, v in model.state_dict().items())
    assert scheduler.last_epoch == 1


class WiderNet(Net):
    """Net with one more layer and another width: another model's checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
        self.extra = nn.Linear(1, 1)


def test_a_checkpoint_of_another_model_is_refused_at_load(tmp_path, world):
    checkpointer = Checkpointer(ckpt_cfg(interval=1), tmp_path, world)
    wide = WiderNet()
    path = save(checkpointer, 1, wide, torch.optim.AdamW(wide.parameters()), None)
    model, optimizer, scheduler = build(0)
    with pytest.raises(SetupError) as caught:
        checkpointer.load(
            path, model=model, optimizer=optimizer, scheduler=scheduler, ckpt_cfg=ckpt_cfg()
        )
    assert caught.value.path == "resume"
    problem = caught.value.problem
    assert problem.startswith(f"{path} was written by another model")
    assert "2 tensors this model lacks (extra.bias, ...)" in problem
    assert "of another shape (body.0.bias: (32,), here (16,))" in problem


def test_a_checkpoint_directory_of_another_run_is_refused(tmp_path, world):
    cfg = ckpt_cfg(interval=1, output_dir=str(tmp_path / "shared"))
    save(Checkpointer(cfg, tmp_path / "a", world, run="aaaa1111"), 1, *build(0))
    assert Checkpointer(cfg, tmp_path / "a", world, run="aaaa1111").steps() == [1]
    with pytest.raises(SetupError) as caught:
        Checkpointer(cfg, tmp_path / "b", world, run="bbbb2222")
    assert caught.value.path == "ckpt.output_dir"
    assert "holds checkpoints of another run (step_1, run aaaa1111" in caught.value.problem


def test_resume_off_refuses_a_run_that_has_checkpoints(tmp_path, world):
    checkpointer = Checkpointer(ckpt_cfg(interval=1), tmp_path, world)
    assert resolve_resume(None, checkpointer) is None  # nothing to overwrite yet
    save(checkpointer, 3, *build(0))
    with pytest.raises(SetupError) as caught:
        resolve_resume(None, checkpointer)
    assert caught.value.path == "resume"
    assert "holds this run's checkpoints (steps 3)" in caught.value.problem
    resume = sft_config().resume  # the default: the latest of this run's own
    assert resolve_resume(resume, checkpointer) == tmp_path / "checkpoints" / "step_3"
