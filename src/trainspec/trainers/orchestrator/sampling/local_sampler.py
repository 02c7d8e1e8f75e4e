"""The policy sampled in this process: `LocalSampler` runs transformers' `generate` on the model
the caller holds, with the log-probability each generated token was drawn with.

    sampler = LocalSampler(model, tokenizer, stop_id=template_stop_id(tokenizer), device=device)
    groups = sampler.sample(prompts, n=8, temperature=1.0, max_tokens=64, seed=step)
    groups[i][j].token_ids, groups[i][j].logprobs   # the j-th completion of prompt i
    sampler.load_weights(Path("broadcasts/step_3"))  # the trainer's newest weights, in place

It is the embedded default of the `Sampler` protocol (sampler.py), fine for small models and
CPU runs; the n completions of a prompt share one prefill (sampler.py's prefill_shared_prompts).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ...errors import SetupError
from .sampler import (
    CausalLM,
    Completion,
    prefill_shared_prompts,
    shares_prompt_prefill,
    truncate_at_stop,
)


class _LogprobRecorder:
    """A logits processor that records log softmax(raw logits / temperature) of each chosen
    token while `generate` runs, keeping one step's distribution at a time.

    `generate` puts user processors after its own non-sampling ones (none here: the model's
    generation defaults are cleared) and before the sampling warpers, so `scores` are the raw
    logits. The token drawn from step t's distribution is only known at step t + 1, as the last
    column of `input_ids`; the last step's token is gathered by `finish`.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self.pending: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.pending is not None:
            self.steps.append(self.pending.gather(1, input_ids[:, -1:]).squeeze(1))
        self.pending = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """[rows, new tokens] log-probabilities of `new_tokens`, the generated columns."""
        width = new_tokens.size(1)
        if len(self.steps) < width and self.pending is not None:
            last = new_tokens[:, len(self.steps) : len(self.steps) + 1]
            self.steps.append(self.pending.gather(1, last).squeeze(1))
        self.pending = None
        if width == 0:
            return new_tokens.new_zeros(new_tokens.shape, dtype=torch.float32)
        return torch.stack(self.steps[:width], dim=1)


@contextlib.contextmanager
def _plain_generation(model: CausalLM) -> Iterator[None]:
    """Eval mode, and no generation defaults from the checkpoint (a Hub generation_config.json
    often sets top_k/top_p/repetition penalty, which would change what is sampled)."""
    from transformers import GenerationConfig

    was_training = model.training
    saved = getattr(model, "generation_config", None)
    model.eval()
    model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        model.generation_config = saved
        model.train(was_training)


@contextlib.contextmanager
def _seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Sampling from `seed` without disturbing the caller's random state."""
    cuda = []
    if device.type == "cuda":
        cuda = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        yield


class LocalSampler:
    """transformers `generate` in this process: all prompts × n completions in one batch (or in
    chunks of at most `max_batch` rows), left-padded, with the KV cache on."""

    def __init__(
        self,
        model: CausalLM,
        tokenizer,
        stop_id: int,
        device: torch.device,
        *,
        max_batch: int | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.stop_id = stop_id
        self.device = torch.device(device)
        self.max_batch = max_batch
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = pad if pad is not None else stop_id

    def sample(
        self, prompts: list[list[int]], n: int, *, temperature: float, max_tokens: int, seed: int
    ) -> list[list[Completion]]:
        if temperature <= 0:
            raise ValueError("temperature must be > 0 to sample; use greedy() for argmax")
        if n < 1:
            raise ValueError("n must be at least 1")
        groups: list[list[Completion]] = []
        per_call = max(1, (self.max_batch or len(prompts) * n) // n)
        with _seeded(seed, self.device):
            for start in range(0, len(prompts), per_call):
                chunk = prompts[start : start + per_call]
                rows = self._generate(chunk, n, temperature, max_tokens)
                groups += [rows[i * n : (i + 1) * n] for i in range(len(chunk))]
        return groups

    def greedy(self, prompts: list[list[int]], *, max_tokens: int) -> list[Completion]:
        per_call = self.max_batch or max(1, len(prompts))
        out: list[Completion] = []
        for start in range(0, len(prompts), per_call):
            out += self._generate(prompts[start : start + per_call], 1, None, max_tokens)
        return out

    def score(
        self, prompts: list[list[int]], completions: list[list[int]], *, temperature: float
    ) -> list[list[float]]:
        """One forward pass per chunk of right-padded prompt + completion rows."""
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        if temperature <= 0:
            raise ValueError("temperature must be > 0 to score")
        per_call = self.max_batch or max(1, len(prompts))
        out: list[list[float]] = []
        for start in range(0, len(prompts), per_call):
            chunk = list(zip(prompts, completions, strict=True))[start : start + per_call]
            out += self._score(chunk, temperature)
        return out

    def _score(self, rows: list[tuple[list[int], list[int]]], temperature: float):
        if any(not prompt for prompt, _ in rows):
            raise ValueError("every prompt needs at least one token")
        width = max(len(p) + len(c) for p, c in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for row, (prompt, completion) in enumerate(rows):
            ids = prompt + completion
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                logits = self.model(  # type: ignore[operator]  # a torch module is callable
                    input_ids=input_ids.to(self.device),
                    attention_mask=attention_mask.to(self.device),
                ).logits
        finally:
            self.model.train(was_training)
        out = []
        for row, (prompt, completion) in enumerate(rows):
            # completion token k sits at len(prompt) + k and is predicted one position earlier
            start = len(prompt) - 1
            scaled = logits[row, start : start + len(completion)].float() / temperature
            targets = torch.tensor(completion, dtype=torch.long, device=scaled.device)
            picked = scaled.gather(-1, targets[:, None])[:, 0] - scaled.logsumexp(-1)
            out.append(picked.cpu().tolist())
        return out

    def _batch(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            attention_mask[row, width - len(prompt) :] = 1
        return input_ids.to(self.device), attention_mask.to(self.device)

    def _generate(
        self, prompts: list[list[int]], n: int, temperature: float | None, max_tokens: int
    ) -> list[Completion]:
        """Prompt-major rows: prompt 0's n completions, then prompt 1's, ...
        `temperature` None is greedy (log-probabilities at temperature 1)."""
        if not prompts:
            return []
        if any(not p for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        input_ids, attention_mask = self._batch(prompts)
        recorder = _LogprobRecorder(temperature or 1.0)
        sampling = temperature is not None
        options: dict[str, Any] = (
            {"temperature": temperature, "top_k": 0, "top_p": 1.0} if sampling else {}
        )
        with _plain_generation(self.model), torch.inference_mode():
            if n > 1 and shares_prompt_prefill(self.model, input_ids):
                options |= prefill_shared_prompts(self.model, input_ids, attention_mask, n)
                input_ids, attention_mask = options.pop("input_ids"), options.pop("attention_mask")
                n = 1
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                do_sample=sampling,
                **options,
                max_new_tokens=max_tokens,
                num_return_sequences=n,
                eos_token_id=self.stop_id,
                pad_token_id=self.pad_id,
                use_cache=True,
                logits_processor=[recorder],
            )
            new_tokens = output[:, input_ids.size(1) :]
            logprobs = recorder.finish(new_tokens)
        completions = []
        for ids, lps in zip(new_tokens.tolist(), logprobs.tolist(), strict=True):
            ids, finished = truncate_at_stop(ids, self.stop_id)
            completions.append(
                Completion(
                    token_ids=ids,
                    logprobs=lps[: len(ids)],
                    text=self.tokenizer.decode(ids, skip_special_tokens=True),
                    finished=finished,
                )
            )
        return completions

    def load_weights(self, weights_dir: Path) -> None:
        """Copy the weights in `weights_dir` into the model in place (same tensors, new values).

        Reads `model.safetensors`, or the shards named by `model.safetensors.index.json`. A tied
        weight written once (lm_head sharing the embedding) may be absent; any other missing or
        unknown name, or a shape mismatch, is a SetupError.
        """
        state = read_safetensors_dir(Path(weights_dir))
        params = self.model.state_dict(keep_vars=True)
        unknown = sorted(set(state) - set(params))
        loaded = {params[name].data_ptr() for name in state if name in params}
        missing = sorted(
            name for name in set(params) - set(state) if params[name].data_ptr() not in loaded
        )
        wrong = sorted(
            name for name in state if name in params and state[name].shape != params[name].shape
        )
        if unknown or missing or wrong:
            problems = [
                f"{label}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}"
                for label, names in (("unknown", unknown), ("missing", missing), ("shape", wrong))
                if names
            ]
            raise SetupError(
                "weights_dir",
                f"the weights in {weights_dir} do not fit the model ({'; '.join(problems)})",
                "write the weights of this model architecture in Hugging Face names",
            )
        with torch.no_grad():
            for name, tensor in state.items():
                params[name].copy_(tensor)

    def close(self) -> None:
        """Nothing to release: the model belongs to the caller."""


def read_safetensors_dir(weights_dir: Path) -> dict[str, torch.Tensor]:
    """All tensors of a Hugging Face weights directory, on the CPU."""
    from safetensors.torch import load_file

    index = weights_dir / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (weights_dir / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise SetupError(
            "weights_dir",
            f"{weights_dir} has neither model.safetensors nor model.safetensors.index.json",
            "point at a directory the trainer wrote its weights to",
        )
    state: dict[str, torch.Tensor] = {}
    for name in files:
        state.update(load_file(str(weights_dir / name)))
    return state
