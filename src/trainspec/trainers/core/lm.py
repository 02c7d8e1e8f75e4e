"""The language model as the training loops call it: the decoder, then the LM head over chunks of
tokens with the family's own logit processing, giving each target token's negative
log-likelihood.

    nll = model(input_ids, position_ids, labels)                # [tokens], 0 where IGNORE_INDEX
    loss_sum = summed_loss(model, input_ids, position_ids, labels)           # SFT
    logprobs = token_logprobs(model, input_ids, position_ids, targets, 0.7)  # RL

The head runs over `chunk` tokens at a time (model.fused_lm_head_token_chunk_size), so the full
[tokens, vocab] logits never exist at once; None computes them in one go. What a family's
*ForCausalLM does to the head's output (Granite divides by `logits_scaling`, Cohere multiplies
by `logit_scale`, Gemma 2/3 soft-cap) is applied to every chunk, and `verify_logits` checks on a
probe that the result is the model's own logits: a family whose processing this module does
not know takes its logits from its own forward instead (whole, not chunked). The loops call the
module itself (never `lm` or the head directly), so FSDP's hooks gather and free its weights.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

# The label of a position that predicts nothing (torch's and transformers' default).
IGNORE_INDEX = -100

Processing = Callable[[torch.Tensor], torch.Tensor]


def logit_processing(config) -> list[tuple[str, Processing]]:
    """What the family's forward does to the head's output, named by its config field, in order."""
    steps: list[tuple[str, Processing]] = []
    scaling = getattr(config, "logits_scaling", None)  # Granite, GraniteMoe
    if scaling not in (None, 1, 1.0):
        steps.append((f"logits_scaling={scaling}", lambda x: x / scaling))
    scale = getattr(config, "logit_scale", None)  # Cohere, Cohere2
    if isinstance(scale, int | float) and scale != 1:
        steps.append((f"logit_scale={scale}", lambda x: x * scale))
    multiplier = getattr(config, "lm_head_multiplier", None)  # Falcon-H1
    if isinstance(multiplier, int | float) and multiplier != 1:
        steps.append((f"lm_head_multiplier={multiplier}", lambda x: x * multiplier))
    cap = getattr(config, "final_logit_softcapping", None)  # Gemma 2, Gemma 3
    if cap:
        steps.append((f"final_logit_softcapping={cap}", lambda x: torch.tanh(x / cap) * cap))
    return steps


def decoder_layers(lm: nn.Module) -> nn.ModuleList:
    """The model's list of transformer blocks: the ModuleList of the classes transformers names
    in `_no_split_modules` (LlamaDecoderLayer, GPT2Block, ...), else the decoder's longest one."""
    block_names = set(getattr(lm, "_no_split_modules", None) or ())
    lists = [m for m in lm.modules() if isinstance(m, nn.ModuleList) and len(m)]
    for modules in lists:
        if all(type(block).__name__ in block_names for block in modules):
            return modules
    if not lists:
        raise TypeError(f"{type(lm).__name__} has no list of transformer blocks")
    return max(lists, key=len)


class ChunkedLM(nn.Module):
    """A Hugging Face causal LM whose forward returns per-token negative log-likelihoods."""

    def __init__(self, lm: PreTrainedModel, chunk: int | None) -> None:
        super().__init__()
        self.lm = lm
        self.chunk = chunk
        self.processing = logit_processing(lm.config)
        self.own_forward = False  # True: the family's own forward makes the logits (unchunked)

    @property
    def layers(self) -> nn.ModuleList:
        return decoder_layers(self.lm)

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The family's logits of `hidden` [tokens, hidden], in float32."""
        logits = self.lm.get_output_embeddings()(hidden).float()
        for _, step in self.processing:
            logits = step(logits)
        return logits

    def _hidden(self, input_ids, position_ids) -> torch.Tensor:
        decoder = self.lm.get_decoder()
        out = decoder(input_ids=input_ids, position_ids=position_ids, use_cache=False)
        return out.last_hidden_state

    def forward(self, input_ids, position_ids, labels, temperature: float = 1.0) -> torch.Tensor:
        """-log softmax(logits / temperature)[label] for every position, flattened; 0 where the
        label is IGNORE_INDEX."""
        labels = labels.reshape(-1)
        if self.own_forward:
            out = self.lm(input_ids=input_ids, position_ids=position_ids, use_cache=False)
            logits = out.logits.reshape(labels.numel(), -1).float()
            return _nll(logits / temperature if temperature != 1.0 else logits, labels)
        hidden = self._hidden(input_ids, position_ids)
        hidden = hidden.reshape(-1, hidden.size(-1))
        step = self.chunk or hidden.size(0)
        pieces = []
        for start in range(0, hidden.size(0), step):
            logits = self.head_logits(hidden[start : start + step])
            if temperature != 1.0:
                logits = logits / temperature
            pieces.append(_nll(logits, labels[start : start + step]))
        return torch.cat(pieces)


def _nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="none")


@torch.no_grad()
def verify_logits(model: ChunkedLM, tokens: int = 16, tolerance: float | None = None) -> None:
    """Compare the chunked head's logits with the model's own forward on `tokens` probe tokens;
    where they differ (a family's processing this module does not know), use its own forward."""
    lm = model.lm
    param = next(lm.parameters())
    vocab = lm.get_output_embeddings().weight.shape[0]
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, tokens), generator=generator).to(param.device)
    positions = torch.arange(tokens, device=param.device).unsqueeze(0)
    was_training = lm.training
    lm.eval()  # dropout off: the two sides must see the same network
    try:
        own = lm(input_ids=ids, position_ids=positions, use_cache=False).logits[0].float()
        ours = model.head_logits(model._hidden(ids, positions)[0])
    finally:
        lm.train(was_training)
    if tolerance is None:
        tolerance = 1e-4 if param.dtype == torch.float32 else 3e-2
    scale = own.abs().max().clamp_min(1e-6)
    difference = ((ours - own).abs().max() / scale).item()
    if difference <= tolerance:
        return
    model.own_forward = True
    log.warning(
        "%s: the chunked LM head's logits differ from the model's own forward (%.1e relative), "
        "so this family's logits come from its own forward, whole: "
        "model.fused_lm_head_token_chunk_size has no effect",
        type(lm).__name__,
        difference,
    )


def summed_loss(model: nn.Module, input_ids, position_ids, labels) -> torch.Tensor:
    """The micro-batch's next-token cross-entropy, summed over its target tokens (SFT divides
    by the step's target count)."""
    return model(input_ids, position_ids, labels).sum()


def token_logprobs(
    model: nn.Module, input_ids, position_ids, targets, temperature: float
) -> torch.Tensor:
    """log p(target) under softmax(logits / temperature) at every position, flattened; 0 where
    the target is IGNORE_INDEX (the RL losses' per-token view)."""
    return -model(input_ids, position_ids, targets, temperature)
