"""The optimizer, built from `[optim]`: AdamW, SGD, Muon or sign-SGD, with gradient clipping;
and its learning-rate schedule, built from `[scheduler]`: constant, linear or cosine.

    optimizer = build_optimizer(config.optim, model)
    scheduler = build_scheduler(config.scheduler, optimizer, max_steps=config.max_steps)
    grad_norm = clip_gradients(config.optim, model)

`weight_decay` arrives resolved ("auto" is 0.01 for SFT, 0.0 for RL). Norms, biases and
embeddings never decay. Muon and sign-SGD are written here as single optimizers (torch's own Muon
takes matrices only), so checkpoints and schedules treat every optimizer alike.

Linear and cosine schedules warm up from 0 to optim.lr over `warmup_steps`; linear then holds and
decays to `min_lr` over the last `decay_steps` steps, cosine decays to `min_lr` from the end of
warmup to max_steps. The schedule is a LambdaLR, so its state checkpoints like any torch
scheduler.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from ..errors import SetupError


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """The weight matrices (which decay, and which Muon orthogonalises), then everything else:
    norms, biases and embeddings."""
    matrices, others = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim < 2 or "embed" in name or "norm" in name:
            others.append(param)
        else:
            matrices.append(param)
    return [
        {"params": matrices, "weight_decay": weight_decay, "matrices": True},
        {"params": others, "weight_decay": 0.0, "matrices": False},
    ]


def build_optimizer(optim_cfg, model: nn.Module, *, sharded: bool = False) -> Optimizer:
    groups = _param_groups(model, optim_cfg.weight_decay)
    lr = optim_cfg.lr
    if optim_cfg.type == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=(optim_cfg.betas1, optim_cfg.betas2))
    if optim_cfg.type == "sgd":
        return torch.optim.SGD(
            groups, lr=lr, momentum=optim_cfg.momentum, nesterov=optim_cfg.nesterov
        )
    if optim_cfg.type == "muon":
        if sharded:
            raise SetupError(
                "optim.type",
                '"muon" orthogonalises whole weight matrices, and this build shards them '
                "across processes (FSDP)",
                'train with one process, or use optim.type = "adamw"',
            )
        return Muon(groups, lr=lr, mu=optim_cfg.mu, betas=(optim_cfg.betas1, optim_cfg.betas2))
    if optim_cfg.type == "sign_sgd":
        return SignSGD(groups, lr=lr)
    raise SetupError("optim.type", f"unknown optimizer {optim_cfg.type!r}", "use adamw")


def clip_gradients(optim_cfg, model: nn.Module) -> float:
    """Clip to `max_norm` (null: no clipping) and return the total gradient norm before it."""
    params = [p for p in model.parameters() if p.grad is not None]
    max_norm = optim_cfg.max_norm
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else math.inf)
    if hasattr(norm, "full_tensor"):  # a DTensor under FSDP
        norm = norm.full_tensor()
    return float(norm)


# -- the learning-rate schedule ---------------------------------------------------------------


def lr_factor(scheduler_cfg, step: int, max_steps: int | None, peak_lr: float) -> float:
    """Multiplier of optim.lr for the update at `step` (0-based)."""
    if scheduler_cfg.type == "constant":
        return 1.0
    warmup = scheduler_cfg.warmup_steps
    if warmup and step < warmup:
        return (step + 1) / warmup
    floor = scheduler_cfg.min_lr / peak_lr if peak_lr > 0 else 0.0
    if max_steps is None:
        return 1.0
    if scheduler_cfg.type == "linear":
        decay = scheduler_cfg.decay_steps
        start = max_steps - decay
        if decay <= 0 or step < start:
            return 1.0
        progress = min(1.0, (step - start + 1) / decay)
        return 1.0 - (1.0 - floor) * progress
    span = max(1, max_steps - warmup)
    progress = min(1.0, (step - warmup + 1) / span)
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(scheduler_cfg, optimizer: Optimizer, *, max_steps: int | None) -> LambdaLR:
    peak = optimizer.param_groups[0]["lr"]
    return LambdaLR(optimizer, lambda step: lr_factor(scheduler_cfg, step, max_steps, peak))


# -- the optimizers this file writes ------------------------------------------------------------


class SignSGD(Optimizer):
    """p ← p·(1 − lr·wd) − lr·sign(g)."""

    def __init__(self, params, lr: float) -> None:
        super().__init__(params, {"lr": lr, "weight_decay": 0.0})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(p.grad.sign(), alpha=-group["lr"])


def _orthogonalise(g: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """Newton–Schulz iteration towards the nearest semi-orthogonal matrix (Muon's update)."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.float()
    transposed = x.size(0) > x.size(1)
    if transposed:
        x = x.T
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        s = x @ x.T
        x = a * x + (b * s + c * s @ s) @ x
    if transposed:
        x = x.T
    return x.to(g.dtype)


class Muon(Optimizer):
    """Muon on weight matrices (momentum, then orthogonalised), AdamW on everything else."""

    def __init__(self, params, lr: float, mu: float, betas: tuple[float, float]) -> None:
        super().__init__(params, {"lr": lr, "mu": mu, "betas": betas, "eps": 1e-8})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if group["matrices"] and p.ndim == 2:
                    buf = state.setdefault("momentum", torch.zeros_like(p))
                    buf.mul_(group["mu"]).add_(p.grad)
                    update = _orthogonalise(p.grad.add(buf, alpha=group["mu"]))
                    scale = max(1.0, p.size(0) / p.size(1)) ** 0.5
                    p.mul_(1 - lr * wd).add_(update, alpha=-lr * scale)
                    continue
                beta1, beta2 = group["betas"]
                if "step" not in state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"].item()
                state["exp_avg"].lerp_(p.grad, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (state["exp_avg_sq"] / (1 - beta2**t)).sqrt_().add_(group["eps"])
                p.mul_(1 - lr * wd).addcdiv_(state["exp_avg"], denom, value=-lr / (1 - beta1**t))


class StateOffload:
    """`model.optim_cpu_offload` on a GPU: the optimizer state waits in pinned host memory
    between steps and visits the GPU only for `step()`. The copies run on a stream of their
    own: the upload starts before the gradients are clipped (`prefetch`) and the download
    overlaps the next step's forward; nothing waits on the host. On a CPU device there is
    nothing to move.

        offload.prefetch()   # state uploads while the gradients are clipped
        offload.step()       # the optimizer's step, then the state downloads again
        offload.wait()       # before anything reads the state on the host (a checkpoint)
    """

    def __init__(self, optimizer: Optimizer, enabled: bool, device: torch.device) -> None:
        self.optimizer = optimizer
        self.device = device
        self.enabled = enabled and device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if self.enabled else None
        self.host: dict[tuple[int, str], torch.Tensor] = {}  # pinned, allocated once per tensor
        self.on_device = True  # the state is created on the device by the first step

    def _tensors(self):
        for param, state in self.optimizer.state.items():
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and key != "step":
                    yield (id(param), key), state, key, value

    def _move(self, to_host: bool, stream: torch.cuda.Stream) -> None:
        from torch.distributed.tensor import DTensor

        for slot, state, key, value in self._tensors():
            local = value.to_local() if isinstance(value, DTensor) else value
            if to_host:
                moved = self.host.get(slot)
                if moved is None:
                    moved = torch.empty_like(local, device="cpu", pin_memory=True)
                    self.host[slot] = moved
                moved.copy_(local, non_blocking=True)
                local.record_stream(stream)  # not reused until the copy has read it
            else:
                moved = local.to(self.device, non_blocking=True)
            if isinstance(value, DTensor):  # the same sharded tensor, its shard elsewhere
                moved = DTensor.from_local(
                    moved,
                    value.device_mesh,
                    value.placements,
                    run_check=False,
                    shape=value.shape,
                    stride=value.stride(),
                )
            state[key] = moved

    def prefetch(self) -> None:
        if not self.enabled or self.on_device:
            return
        assert self.stream is not None
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            self._move(to_host=False, stream=self.stream)
        self.on_device = True

    def step(self) -> None:
        self.prefetch()  # a no-op where update() already started it
        if self.stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
        self.optimizer.step()
        if not self.enabled:
            return
        assert self.stream is not None
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            self._move(to_host=True, stream=self.stream)
        self.on_device = False

    def wait(self) -> None:
        """Block until the state's copies are done, so the host copy is whole."""
        if self.stream is not None:
            self.stream.synchronize()
