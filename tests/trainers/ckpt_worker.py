"""Checkpoint scenarios that need a process of their own (driven by test_ckpt.py).

python ckpt_worker.py crash DIR PHASE
    save step 1, then start saving step 2 and stop at PHASE (touching DIR/ready) so the
    test can SIGKILL the process mid-save; DIR/expected.pt holds the step-1 weights
torchrun --standalone --nproc-per-node 2 ckpt_worker.py fsdp DIR
    FSDP2 over two gloo processes: train a step, save, reload into a differently
    initialised model, check weights and the next step agree; DIR/expected.pt as above
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import transformers

from trainspec.trainers.ckpt import files as ckpt_files
from trainspec.trainers.ckpt import hf_export
from trainspec.trainers.ckpt.checkpointer import Checkpointer
from trainspec.trainers.core.world import close_world, init_world
from trainspec.trainers.process.exit import exit_process

torch.set_num_threads(1)


def tiny_qwen3(seed: int) -> transformers.Qwen3ForCausalLM:
    torch.manual_seed(seed)
    config = transformers.Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        tie_word_embeddings=True,
    )
    return transformers.Qwen3ForCausalLM(config)


def train_step(model, optimizer, scheduler, input_ids: torch.Tensor) -> float:
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def training_state(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 3))
    return optimizer, scheduler


def export(weights_dir: Path, state: dict, adapter_dir: Path | None) -> None:
    tiny_qwen3(0).config.save_pretrained(weights_dir)


def full_weights(model) -> dict:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)


def stop_here(directory: Path) -> None:
    (directory / "ready").touch()
    time.sleep(600)  # the test kills us long before this ends


def crash(directory: Path, phase: str) -> None:
    world = init_world(60)
    model = tiny_qwen3(0)
    optimizer, scheduler = training_state(model)
    checkpointer = Checkpointer(None, directory, world)
    train_step(model, optimizer, scheduler, torch.randint(0, 64, (2, 8)))
    args = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "export": export}
    checkpointer.save(1, extra={"progress": {"step": 1}}, **args)
    torch.save(full_weights(model), directory / "expected.pt")
    train_step(model, optimizer, scheduler, torch.randint(0, 64, (2, 8)))

    if phase == "rank_state":  # trainer state written, rank files not yet
        ckpt_files.save_rank_state = lambda *a: stop_here(directory)
    elif phase == "weights":  # everything but config.json and meta.json written
        write = hf_export.write_safetensors
        hf_export.write_safetensors = lambda *a: (write(*a), stop_here(directory))
    elif phase == "publish":  # complete, meta.json included, not yet renamed
        ckpt_files.publish = lambda *a: stop_here(directory)
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    checkpointer.save(2, extra={"progress": {"step": 2}}, **args)
    raise SystemExit("the save should have stopped")


def fsdp(directory: Path) -> None:
    from torch.distributed.fsdp import fully_shard

    world = init_world(120)
    assert world.world_size == 2, world

    def sharded(seed: int):
        model = tiny_qwen3(seed)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        return model

    model = sharded(0)
    optimizer, scheduler = training_state(model)
    torch.manual_seed(100 + world.rank)
    train_step(model, optimizer, scheduler, torch.randint(0, 64, (2, 8)))
    checkpointer = Checkpointer(None, directory, world)
    path = checkpointer.save(
        1,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        extra={"data": {"rank": world.rank}},
        export=export,
    )
    saved = full_weights(model)
    if world.is_main:
        torch.save(saved, directory / "expected.pt")

    fresh = sharded(1)
    fresh_optimizer, fresh_scheduler = training_state(fresh)
    extra = checkpointer.load(
        path, model=fresh, optimizer=fresh_optimizer, scheduler=fresh_scheduler, ckpt_cfg=None
    )
    assert extra == {"data": {"rank": world.rank}}, extra
    loaded = full_weights(fresh)
    if world.is_main:
        assert saved.keys() == loaded.keys()
        assert all(torch.equal(saved[k], loaded[k]) for k in saved), "weights differ"

    batch = torch.arange(16).reshape(2, 8) % 64 + world.rank
    before = train_step(model, optimizer, scheduler, batch)
    after = train_step(fresh, fresh_optimizer, fresh_scheduler, batch)
    assert before == after, (before, after)
    stepped, fresh_stepped = full_weights(model), full_weights(fresh)
    if world.is_main:
        assert all(torch.equal(stepped[k], fresh_stepped[k]) for k in stepped), "step differs"
        print("fsdp ok", flush=True)
    close_world()


if __name__ == "__main__":
    mode, target = sys.argv[1], Path(sys.argv[2])
    if mode == "crash":
        crash(target, sys.argv[3])
    else:
        fsdp(target)
        exit_process(0)  # as the trainers' torchrun workers end
