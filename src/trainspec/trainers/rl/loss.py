"""The RL policy loss, chosen by the `[loss]` table.

Per completion token, with lp the trainer's log-probability of the sampled token, lq the
sampler's, A the sample's advantage and m the loss mask:

    log_ratio = lp - lq        ratio = exp(log_ratio)        prob_diff = exp(lp) - exp(lq)

Both built-in losses drop the policy-gradient term of some tokens ("masked" tokens) and sum

    -(keep * adv_tau * A * ratio) + kl_tau * m * log_ratio**2

over the tokens; `keep` is m without the masked tokens. The loss is a *sum*: the trainer divides
by the step's total number of loss tokens.

- default (DPPO): a token is masked when the trainer's probability has moved too far in the
  direction the advantage pushes it: A > 0 and prob_diff > dppo_mask_high, or A <= 0 and
  prob_diff < -dppo_mask_low.
- ipo: a token is masked when |prob_diff| > ipo_threshold, whatever the sign of A.
- custom: `import_path` ("package.module:function" or "package.module.function") names a
  function imported when the trainer builds the loss (never when the config is validated) and
  called as `fn(inputs, **kwargs)`; it returns a `LossOutputs`.

Metrics, over loss tokens (0 when there are none): `masked_fraction` (masked / loss tokens),
`mismatch_kl` (mean of ratio - log_ratio - 1, the k3 estimate of KL(sampler || trainer)) and
`ratio_mean`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from trainspec.trainers.errors import SetupError

IMPORT_PATH = "loss.import_path"
IMPORTABLE = (
    "make the module importable by the trainer (install its package, or add its directory to "
    "PYTHONPATH) and write import_path as 'package.module:function'"
)


@dataclass
class LossInputs:
    """One micro-batch, flattened to its N token positions."""

    trainer_logprobs: torch.Tensor  # float32 [N], requires grad
    inference_logprobs: torch.Tensor  # float32 [N]
    advantages: torch.Tensor  # float32 [N]
    loss_mask: torch.Tensor  # bool [N]


@dataclass
class LossOutputs:
    loss: torch.Tensor  # 0-dim, a sum over tokens
    metrics: dict[str, float | torch.Tensor]  # token means: floats or 0-dim tensors


LossFn = Callable[[LossInputs], LossOutputs]


def policy_loss(
    inputs: LossInputs, masked: torch.Tensor, adv_tau: float, kl_tau: float
) -> LossOutputs:
    """The shared loss: a policy-gradient term on loss tokens not `masked`, plus a KL term on
    every loss token."""
    mask = inputs.loss_mask
    keep = mask & ~masked
    log_ratio = inputs.trainer_logprobs - inputs.inference_logprobs
    # exp of 0 where the term is dropped, so a huge ratio there cannot turn into inf * 0 = nan.
    kept_ratio = torch.exp(log_ratio.masked_fill(~keep, 0.0))
    pg = keep * adv_tau * inputs.advantages * kept_ratio
    kl = kl_tau * mask * log_ratio.square()
    loss = (kl - pg).sum()
    with torch.no_grad():
        log_ratio = log_ratio.masked_fill(~mask, 0.0)  # whatever sits outside the loss mask
        ratio = torch.exp(log_ratio)
        tokens = mask.sum().clamp(min=1)
        metrics: dict[str, float | torch.Tensor] = {  # left on the device: read once a step
            "masked_fraction": (masked & mask).sum() / tokens,
            "mismatch_kl": ((ratio - log_ratio - 1) * mask).sum() / tokens,
            "ratio_mean": (ratio * mask).sum() / tokens,
        }
    return LossOutputs(loss=loss, metrics=metrics)


def prob_diff(inputs: LossInputs) -> torch.Tensor:
    lp, lq = inputs.trainer_logprobs.detach(), inputs.inference_logprobs
    return torch.exp(lp) - torch.exp(lq)


def dppo_loss(
    inputs: LossInputs, *, mask_low: float, mask_high: float, adv_tau: float, kl_tau: float
) -> LossOutputs:
    diff = prob_diff(inputs)
    masked = torch.where(inputs.advantages > 0, diff > mask_high, diff < -mask_low)
    return policy_loss(inputs, masked, adv_tau, kl_tau)


def ipo_loss(inputs: LossInputs, *, threshold: float, adv_tau: float, kl_tau: float) -> LossOutputs:
    masked = prob_diff(inputs).abs() > threshold
    return policy_loss(inputs, masked, adv_tau, kl_tau)


def build_loss(loss_cfg: Any) -> LossFn:
    """The loss function of the `[loss]` sub-config; a custom one is imported here."""
    if loss_cfg.type == "default":
        return functools.partial(
            dppo_loss,
            mask_low=loss_cfg.dppo_mask_low,
            mask_high=loss_cfg.dppo_mask_high,
            adv_tau=loss_cfg.adv_tau,
            kl_tau=loss_cfg.kl_tau,
        )
    if loss_cfg.type == "ipo":
        return functools.partial(
            ipo_loss,
            threshold=loss_cfg.ipo_threshold,
            adv_tau=loss_cfg.adv_tau,
            kl_tau=loss_cfg.kl_tau,
        )
    if loss_cfg.type == "custom":
        return custom_loss(loss_cfg.import_path, dict(loss_cfg.kwargs))
    raise ValueError(f"unknown loss type {loss_cfg.type!r}")


def custom_loss(import_path: str, kwargs: dict[str, Any]) -> LossFn:
    fn = import_function(import_path)
    try:
        inspect.signature(fn).bind(None, **kwargs)
    except TypeError as exc:
        raise SetupError(
            "loss.kwargs",
            f"{import_path} cannot be called as fn(inputs, **kwargs): {exc}",
            "pass only keyword arguments the function accepts, and give it one positional "
            "parameter for the LossInputs",
        ) from None
    except ValueError:  # no signature to check (some builtins): let the call decide
        pass

    def loss(inputs: LossInputs) -> LossOutputs:
        out = fn(inputs, **kwargs)
        if not isinstance(out, LossOutputs):
            raise SetupError(
                IMPORT_PATH,
                f"{import_path} returned {type(out).__name__}, not LossOutputs",
                "return trainspec.trainers.rl.loss.LossOutputs(loss=<0-dim tensor>, metrics={})",
            )
        return out

    return loss


def import_function(import_path: str) -> Callable[..., Any]:
    """Import "package.module:function" or "package.module.function", as a SetupError if it
    cannot be."""
    module_name, colon, attr = import_path.partition(":")
    if not colon:
        module_name, _, attr = import_path.rpartition(".")
    if not module_name or not attr:
        raise SetupError(
            IMPORT_PATH, f"{import_path!r} does not name a module and function", IMPORTABLE
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise SetupError(IMPORT_PATH, f"no module named {module_name!r}", IMPORTABLE) from None
        raise SetupError(
            IMPORT_PATH,
            f"importing {module_name!r} failed: {exc}",
            "install what that module imports, in the trainer's environment",
        ) from exc
    except Exception as exc:
        raise SetupError(
            IMPORT_PATH,
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}",
            f"fix the error in {module_name!r} (try `python -c 'import {module_name}'`)",
        ) from exc
    fn: Any = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise SetupError(
                IMPORT_PATH,
                f"module {module_name!r} has no attribute {attr!r}",
                f"check the spelling of the function's name in {module_name!r}",
            )
        fn = getattr(fn, part)
    if not callable(fn):
        raise SetupError(
            IMPORT_PATH,
            f"{import_path!r} is a {type(fn).__name__}, not a function",
            "point import_path at a function taking (inputs, **kwargs) and returning LossOutputs",
        )
    return fn
