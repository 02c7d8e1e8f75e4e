"""What the orchestrator samples through: the `Sampler` protocol, the `Completion` it returns
(token ids with the sampler's log-probability of each), and `CausalLM`, what the in-process
sampler needs of its model, with the one prefill per prompt it shares among a prompt's
completions.

    groups = sampler.sample(prompts, n=8, temperature=1.0, max_tokens=64, seed=step)
    groups[i][j].token_ids, groups[i][j].logprobs   # the j-th completion of prompt i
    ids, finished = truncate_at_stop(generated, stop_id)

The RL loss compares the trainer's log-probabilities with the sampler's, so a log-probability
here is the one the token was actually drawn with: log softmax(logits / temperature) of the
model's raw logits, with no top-k, top-p or other processor changing the distribution.

Two samplers share the protocol: `LocalSampler` (local_sampler.py) runs transformers' `generate`
in this process (the embedded default, fine for small models and CPU runs) and `OpenAISampler`
(openai_client.py) asks any OpenAI-compatible server such as vLLM.

`LocalSampler` runs one prefill per prompt for `n` completions of it: every prompt but its last
token runs through the model once, and its KV cache (transformers' DynamicCache) is repeated `n`
times, row by row, for `generate` to continue from:

    if n > 1 and shares_prompt_prefill(model, input_ids):
        options = prefill_shared_prompts(model, input_ids, attention_mask, n)
        model.generate(**options, num_return_sequences=1, ...)   # prompt-major rows

The samples equal those of `generate`'s own num_return_sequences=n with the same seed, at an
n-th of the prefill's cost.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch


@dataclass
class Completion:
    """One sampled continuation of a prompt. An environment's episode
    (environments/verifiers_env.py) fills the rest: its own prompt's ids, which completion tokens
    the model sampled (the others are the environment's messages between turns), and its (role,
    tokens, generated) segments."""

    token_ids: list[int]  # generated ids, including the stop token if one was generated
    logprobs: list[float]  # the sampler's log-probability of each generated id (same length)
    text: str  # decoded without special tokens
    finished: bool  # ended on the stop token (not cut by max_tokens)
    prompt_ids: list[int] | None = None  # None: the prompt's own ids
    mask: list[bool] | None = None  # per token, sampled by the model; None: every one
    segments: list[tuple[str, int, bool]] | None = None  # None: one reply of the assistant
    agent: str = "agent"  # the role that wrote it (a multi-agent environment has several)
    turns: int = 1

    def prompt_of(self, prompt_ids: list[int]) -> list[int]:
        return self.prompt_ids if self.prompt_ids is not None else prompt_ids

    def sampled(self, values: list[float]) -> list[float]:
        """`values` (one per token) with 0 at the tokens the model did not sample."""
        if self.mask is None:
            return values
        return [v if m else 0.0 for v, m in zip(values, self.mask, strict=True)]

    def at_sampled(self, values: list[float]) -> list[float]:
        """`values` (one per token) at the tokens the model sampled only."""
        if self.mask is None:
            return values
        return [v for v, m in zip(values, self.mask, strict=True) if m]


class Sampler(Protocol):
    def sample(
        self, prompts: list[list[int]], n: int, *, temperature: float, max_tokens: int, seed: int
    ) -> list[list[Completion]]:
        """`n` completions of every prompt, grouped per prompt in the prompts' order."""
        ...

    def greedy(self, prompts: list[list[int]], *, max_tokens: int) -> list[Completion]:
        """The argmax continuation of every prompt; log-probabilities at temperature 1."""
        ...

    def score(
        self, prompts: list[list[int]], completions: list[list[int]], *, temperature: float
    ) -> list[list[float]]:
        """Each completion's token log-probabilities after its prompt, log softmax(logits /
        temperature): the model's view of tokens it did not necessarily sample (distillation)."""
        ...

    def load_weights(self, weights_dir: Path) -> None:
        """From now on, sample from the weights in `weights_dir` (HF safetensors)."""
        ...

    def close(self) -> None: ...


def truncate_at_stop(ids: list[int], stop_id: int) -> tuple[list[int], bool]:
    """`ids` up to and including the first stop token, and whether there was one."""
    if stop_id in ids:
        return ids[: ids.index(stop_id) + 1], True
    return ids, False


class CausalLM(Protocol):
    """What `LocalSampler` needs of its model: a torch module with transformers' `generate`,
    such as AutoModelForCausalLM builds."""

    training: bool
    generation_config: Any

    def generate(self, *args: Any, **kwargs: Any) -> Any: ...

    def eval(self) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...

    def state_dict(self, *args: Any, **kwargs: Any) -> Any: ...


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


def unscaled_scores(temperature: float) -> tuple[str, str]:
    """(problem, fix) of scoring at `temperature` != 1 on a server: a token's log-probability
    at another temperature needs the whole distribution, which a server does not answer."""
    return (
        f"scores tokens at temperature {temperature:g}, and a server's prompt_logprobs (vLLM's) "
        "are of the unscaled distribution (temperature 1), which the sampled tokens' "
        "log-probabilities would be compared with",
        "sample at temperature = 1.0 where a server scores (opd's teacher; opsd's policy on "
        "[inference] or [orchestrator.sampler]), or score with a model in process",
    )
