"""The language model as the training loops call it: the decoder, then the LM head over chunks of
tokens, giving each target token's negative log-likelihood.

    nll = model(input_ids, position_ids, labels)                # [tokens], 0 where IGNORE_INDEX
    loss_sum = summed_loss(model, input_ids, position_ids, labels)           # SFT
    logprobs = token_logprobs(model, input_ids, position_ids, targets, 0.7)  # RL

The head runs over `chunk` tokens at a time (model.fused_lm_head_token_chunk_size), so the full
[tokens, vocab] logits never exist at once; None computes them in one go. The loops call the
module itself (never `lm` or the head directly), so FSDP's hooks gather and free its weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# The label of a position that predicts nothing (torch's and transformers' default).
IGNORE_INDEX = -100


class ChunkedLM(nn.Module):
    """A Hugging Face causal LM whose forward returns per-token negative log-likelihoods."""

    def __init__(self, lm: PreTrainedModel, chunk: int | None) -> None:
        super().__init__()
        self.lm = lm
        self.chunk = chunk

    @property
    def layers(self) -> nn.ModuleList:
        return self.lm.get_decoder().layers

    def forward(self, input_ids, position_ids, labels, temperature: float = 1.0) -> torch.Tensor:
        """-log softmax(logits / temperature)[label] for every position, flattened; 0 where the
        label is IGNORE_INDEX."""
        decoder = self.lm.get_decoder()
        hidden = decoder(
            input_ids=input_ids, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        head = self.lm.get_output_embeddings()
        hidden = hidden.reshape(-1, hidden.size(-1))
        labels = labels.reshape(-1)
        step = self.chunk or hidden.size(0)
        pieces = []
        for start in range(0, hidden.size(0), step):
            logits = head(hidden[start : start + step]).float()
            if temperature != 1.0:
                logits = logits / temperature
            pieces.append(
                nn.functional.cross_entropy(
                    logits,
                    labels[start : start + step],
                    ignore_index=IGNORE_INDEX,
                    reduction="none",
                )
            )
        return torch.cat(pieces)


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
