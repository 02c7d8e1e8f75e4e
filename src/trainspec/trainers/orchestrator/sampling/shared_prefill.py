"""One prefill per prompt for `n` completions of it: every prompt but its last token runs
through the model once, and its KV cache (transformers' DynamicCache) is repeated `n` times,
row by row, for `generate` to continue from.

    if n > 1 and shares_prompt_prefill(model, input_ids):
        options = prefill_shared_prompts(model, input_ids, attention_mask, n)
        model.generate(**options, num_return_sequences=1, ...)   # prompt-major rows

LocalSampler (local_sampler.py) samples this way; the samples equal those of `generate`'s own
num_return_sequences=n with the same seed, at an n-th of the prefill's cost.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from .sampler import CausalLM


def shares_prompt_prefill(model: CausalLM, input_ids: torch.Tensor) -> bool:
    """Whether `prefill_shared_prompts` applies: a prompt of two tokens or more and a model whose
    `generate` keeps its keys and values in transformers' DynamicCache (not recurrent state)."""
    supports = getattr(type(model), "_supports_default_dynamic_cache", None)
    return input_ids.size(1) > 1 and supports is not None and bool(supports())


def _cache_name(model: CausalLM) -> str:
    """What this transformers calls the cache argument (`cache`; `past_key_values` before)."""
    forward = getattr(model, "forward", None)
    parameters = inspect.signature(forward).parameters if forward is not None else {}
    return "cache" if "cache" in parameters else "past_key_values"


def prefill_shared_prompts(
    model: CausalLM, input_ids: torch.Tensor, attention_mask: torch.Tensor, n: int
) -> dict[str, Any]:
    """`generate`'s arguments for `n` completions of every prompt with each prompt's prefill run
    once, not `n` times: every prompt but its last token goes through the model in one batch of
    len(prompts) rows, the cache is repeated `n` times row by row, and `generate` starts from
    the last prompt token of prompt-major rows (what num_return_sequences=n would give).

    Positions are those `generate` derives from a left-padded attention mask, so the logits,
    and with the same seed the samples, are the ones of the plain call (tests hold the two
    equal on every model family); the prefill's cost drops n-fold, which is most of a step's
    sampling when completions are short."""
    from transformers import DynamicCache

    config = model.config.get_text_config(decoder=True)  # type: ignore[attr-defined]
    cache = DynamicCache(config=config)
    positions = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    name = _cache_name(model)
    model(  # type: ignore[operator]  # a torch module is callable
        input_ids=input_ids[:, :-1],
        attention_mask=attention_mask[:, :-1],
        position_ids=positions[:, :-1],
        use_cache=True,
        **{name: cache},
    )
    cache.batch_repeat_interleave(n)
    return {
        "input_ids": input_ids.repeat_interleave(n, dim=0),
        "attention_mask": attention_mask.repeat_interleave(n, dim=0),
        name: cache,
    }
