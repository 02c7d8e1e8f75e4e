"""The GPU path, on one CUDA GPU (scripts/gpu_check.sh runs these; skipped without a GPU):
bf16 mixed precision through FSDP's policy with one process, the optimizer state offloaded to
pinned host memory, and flash-attention 2 where flash-attn is installed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.sft_support import TINY

from trainspec.config import load
from trainspec.trainers.core.lm import summed_loss
from trainspec.trainers.core.world import init_world
from trainspec.trainers.parts import Parts

pytestmark = pytest.mark.gpu


def parts(tmp_path: Path, **settings) -> Parts:
    merged = {**TINY, "model.debug.num_layers": None, "output_dir": str(tmp_path), **settings}
    config = load("sft", [], merged).config
    return Parts.build(config, "sft", init_world(600), tmp_path, seed=0)


def batch(vocab: int, tokens: int = 64):
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, tokens), generator=generator).cuda()
    positions = torch.arange(tokens, device="cuda").unsqueeze(0)
    return ids, positions, ids.roll(-1, dims=1)


def test_one_gpu_computes_in_bf16_under_fsdp_and_keeps_fp32_weights(tmp_path):
    from torch.distributed.fsdp import FSDPModule

    p = parts(tmp_path)
    assert isinstance(p.model, FSDPModule)
    seen = []
    proj = p.model.layers[0].self_attn.q_proj
    proj.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    ids, positions, labels = batch(p.model.lm.config.vocab_size)
    loss = summed_loss(p.model, ids, positions, labels)
    loss.backward()
    assert seen == [torch.bfloat16]  # the layer ran in bf16 ...
    assert {param.dtype for param in p.model.parameters()} == {torch.float32}  # ... on fp32
    assert all(param.grad is not None for param in p.model.parameters() if param.requires_grad)


def test_optimizer_state_waits_in_pinned_host_memory_and_trains_the_same(tmp_path):
    runs = {}
    for offload in (False, True):
        p = parts(tmp_path / str(offload), **{"model.optim_cpu_offload": offload})
        ids, positions, labels = batch(p.model.lm.config.vocab_size)
        for _ in range(3):
            summed_loss(p.model, ids, positions, labels).backward()
            p.update()
        p.offload.wait()
        states = [v for s in p.optimizer.state.values() for k, v in s.items() if k != "step"]
        local = [getattr(v, "to_local", lambda v=v: v)() for v in states]
        if offload:
            assert local and all(t.device.type == "cpu" and t.is_pinned() for t in local)
        else:
            assert all(t.device.type == "cuda" for t in local)
        runs[offload] = [param.detach().full_tensor().cpu() for param in p.model.parameters()]
    for plain, offloaded in zip(runs[False], runs[True], strict=True):
        torch.testing.assert_close(offloaded, plain)


def test_flash_attention_2_gives_sdpas_loss(tmp_path):
    pytest.importorskip("flash_attn", reason="flash-attn is not installed here")
    losses = {}
    for attn in ("sdpa", "flash_attention_2"):
        p = parts(tmp_path / attn, **{"model.attn": attn})
        assert p.model.lm.config._attn_implementation == attn
        ids, positions, labels = batch(p.model.lm.config.vocab_size, tokens=256)
        with torch.no_grad():
            losses[attn] = summed_loss(p.model, ids, positions, labels).item()
    assert losses["flash_attention_2"] == pytest.approx(losses["sdpa"], rel=2e-2)
