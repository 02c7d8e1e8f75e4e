"""One step of each hand-written optimizer against the formula computed here, and the parameter
groups they share (matrices decay and are orthogonalised, the rest neither); the learning-rate
schedule at its endpoints: the first and last warmup steps, the first decay step and the last
step, for each schedule type."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainspec.config import load
from trainspec.trainers.core.optim import (
    build_optimizer,
    build_scheduler,
    clip_gradients,
    lr_factor,
)


class Tiny(nn.Module):
    """A weight matrix, a bias, an embedding and a norm: one of each kind of parameter."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(5, 3)
        self.proj = nn.Linear(3, 6)
        self.norm = nn.LayerNorm(6)


def optim_cfg(**settings):
    return load("sft", [], {f"optim.{key}": value for key, value in settings.items()}).config.optim


def with_gradients(model: nn.Module) -> dict[str, torch.Tensor]:
    """Fixed gradients on every parameter; the parameters before the step."""
    generator = torch.Generator().manual_seed(1)
    for param in model.parameters():
        param.grad = torch.randn(param.shape, generator=generator)
    return {name: param.detach().clone() for name, param in model.named_parameters()}


def newton_schulz(g: torch.Tensor) -> torch.Tensor:
    """Muon's quintic Newton-Schulz iteration, five steps, written out from its definition."""
    x = g.T / (g.norm() + 1e-7)  # 6x3: iterate on the wide orientation
    for _ in range(5):
        s = x @ x.T
        x = 3.4445 * x + (-4.7750 * s + 2.0315 * s @ s) @ x
    return x.T


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_muon_orthogonalises_the_matrices_whatever_the_weight_decay(weight_decay):
    model = Tiny()
    before = with_gradients(model)
    cfg = optim_cfg(type="muon", lr=0.02, mu=0.9, weight_decay=weight_decay)
    build_optimizer(cfg, model).step()

    g = model.proj.weight.grad
    update = newton_schulz(g + 0.9 * g)  # Nesterov momentum; the buffer is g after one step
    scale = max(1.0, 6 / 3) ** 0.5
    expected = before["proj.weight"] * (1 - 0.02 * weight_decay) - 0.02 * scale * update
    torch.testing.assert_close(model.proj.weight, expected)
    singular = torch.linalg.svdvals(update)
    assert singular.min() > 0.5 and singular.max() < 1.5  # near-orthogonal, as Muon means


def test_muon_steps_everything_else_with_adamw():
    model, reference = Tiny(), Tiny()
    with_gradients(model)
    with_gradients(reference)
    build_optimizer(optim_cfg(type="muon", lr=0.01, weight_decay=0.1), model).step()
    others = [reference.proj.bias, reference.embed.weight, *reference.norm.parameters()]
    torch.optim.AdamW(others, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0).step()
    for name in ("proj.bias", "embed.weight", "norm.weight", "norm.bias"):
        torch.testing.assert_close(
            model.get_parameter(name), reference.get_parameter(name), msg=name
        )


def test_sign_sgd_step():
    model = Tiny()
    before = with_gradients(model)
    build_optimizer(optim_cfg(type="sign_sgd", lr=0.05, weight_decay=0.2), model).step()
    for name, param in model.named_parameters():
        decay = 0.2 if name == "proj.weight" else 0.0  # only matrices decay
        expected = before[name] * (1 - 0.05 * decay) - 0.05 * param.grad.sign()
        torch.testing.assert_close(param.detach(), expected, msg=name)


def test_clip_gradients_returns_the_norm_before_clipping():
    model = Tiny()
    with_gradients(model)
    norm = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    assert clip_gradients(optim_cfg(max_norm=0.5), model) == pytest.approx(norm)
    clipped = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    assert clipped == pytest.approx(0.5, rel=1e-4)


@pytest.mark.parametrize("kind", ["muon", "adamw", "sign_sgd"])
def test_one_process_under_fsdp_steps_as_unsharded(kind):
    """One GPU shards the model with one process (bf16 through FSDP's policy), so each optimizer
    steps DTensors whose one shard is the whole tensor: the step is the plain one. Run here on
    the CPU through the same one-process FSDP."""
    from torch.distributed.fsdp import fully_shard

    from trainspec.trainers.core.world import init_world

    class Net(Tiny):
        def forward(self, ids):
            return self.norm(self.proj(self.embed(ids)))

    init_world(600)
    plain, sharded = Net(), Net()
    fully_shard(sharded)
    for model in (plain, sharded):
        model(torch.tensor([0, 3, 4])).square().sum().backward()
        build_optimizer(optim_cfg(type=kind, lr=0.1), model, sharded=False).step()
    for (name, a), (_, b) in zip(plain.named_parameters(), sharded.named_parameters(), strict=True):
        torch.testing.assert_close(b.full_tensor(), a, msg=name)


# -- the learning-rate schedule ---------------------------------------------------------------

LR = 1e-3


def scheduler_cfg(**settings):
    overrides = {f"scheduler.{key}": value for key, value in settings.items()}
    return load("sft", [], {"max_steps": 100, "optim.lr": LR, **overrides}).config.scheduler


def test_constant_is_one_everywhere():
    cfg = scheduler_cfg(type="constant")
    assert [lr_factor(cfg, step, 100, LR) for step in (0, 50, 99)] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_warmup_starts_at_one_step_and_ends_at_the_peak(kind):
    extra = {"decay_steps": 10} if kind == "linear" else {}
    cfg = scheduler_cfg(type=kind, warmup_steps=10, min_lr=1e-4, **extra)
    assert lr_factor(cfg, 0, 100, LR) == pytest.approx(0.1)  # (0 + 1) / 10
    assert lr_factor(cfg, 9, 100, LR) == 1.0


def test_linear_holds_then_decays_to_min_lr_on_the_last_step():
    cfg = scheduler_cfg(type="linear", warmup_steps=10, decay_steps=20, min_lr=1e-4)
    assert lr_factor(cfg, 79, 100, LR) == 1.0  # the last step before the decay
    assert lr_factor(cfg, 80, 100, LR) == pytest.approx(1 - 0.9 / 20)
    assert lr_factor(cfg, 99, 100, LR) == pytest.approx(0.1)  # min_lr / lr


def test_cosine_decays_from_the_peak_to_min_lr_on_the_last_step():
    cfg = scheduler_cfg(type="cosine", warmup_steps=10, min_lr=1e-4)
    first = lr_factor(cfg, 10, 100, LR)
    assert 0.99 < first < 1.0
    assert lr_factor(cfg, 54, 100, LR) == pytest.approx(0.1 + 0.9 * 0.5)  # update 45 of 90
    assert lr_factor(cfg, 99, 100, LR) == pytest.approx(0.1)


def test_the_optimizer_sees_the_factor_times_lr():
    cfg = scheduler_cfg(type="linear", warmup_steps=4, decay_steps=0)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=LR)
    scheduler = build_scheduler(cfg, optimizer, max_steps=100)
    seen = []
    for _ in range(5):
        seen.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([LR * f for f in (0.25, 0.5, 0.75, 1.0, 1.0)])
