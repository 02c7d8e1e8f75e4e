"""The trained loss is the model's own loss, for every text-only decoder family transformers
builds offline: `model(input_ids, labels=...).loss` on the same tokens and mask, through the
chunked head (logit scaling, soft-capping, tied embeddings included)."""

from __future__ import annotations

import pytest
import torch
from helpers.families import FAMILIES, VOCAB, tiny_model

from trainspec.trainers.core.lm import (
    IGNORE_INDEX,
    ChunkedLM,
    decoder_layers,
    summed_loss,
    token_logprobs,
    verify_logits,
)

LENGTH = 24


def batch(seed: int = 1):
    """Ids, transformers' labels (unshifted) and trainspec's (the next token's, shifted)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (2, LENGTH), generator=generator)
    labels = ids.clone()
    labels[:, :5] = IGNORE_INDEX  # a prompt: nothing trained there
    shifted = torch.cat([labels[:, 1:], torch.full((2, 1), IGNORE_INDEX)], dim=1)
    positions = torch.arange(LENGTH).expand(2, LENGTH)
    return ids, labels, shifted, positions


def mean_loss(model: ChunkedLM) -> float:
    ids, _, shifted, positions = batch()
    return (summed_loss(model, ids, positions, shifted) / (shifted != IGNORE_INDEX).sum()).item()


def relative(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("chunk", [None, 7])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_loss_is_the_models_loss(family, chunk):
    lm = tiny_model(family)
    ids, labels, _, _ = batch()
    expected = lm(input_ids=ids, labels=labels).loss.item()
    model = ChunkedLM(lm, chunk)
    verify_logits(model)
    assert not model.own_forward, "the chunked head knows this family's processing"
    assert relative(mean_loss(model), expected) < 1e-4


@pytest.mark.parametrize("family", ["granite", "cohere", "gemma2", "gemma3_text"])
def test_without_the_familys_logit_processing_the_loss_is_off(family):
    """The planted drift: the head's output as is, as trainspec trained these families before."""
    lm = tiny_model(family)
    ids, labels, _, _ = batch()
    expected = lm(input_ids=ids, labels=labels).loss.item()
    model = ChunkedLM(lm, 7)
    assert model.processing, "the config names a processing step"
    model.processing = []
    assert relative(mean_loss(model), expected) > 0.05


def test_a_family_whose_processing_is_unknown_takes_its_own_forward(caplog):
    """A forward that changes the logits in a way lm.py does not replicate is detected on the
    probe, and the loss then comes from the model's own logits."""
    lm = tiny_model("llama")
    forward = lm.forward

    def scaled(*args, **kwargs):
        out = forward(*args, **kwargs)
        out.logits = out.logits * 0.3
        if out.loss is not None:  # the loss of the scaled logits, as a real family computes it
            out.loss = lm.loss_function(out.logits, kwargs["labels"], lm.config.vocab_size)
        return out

    lm.forward = scaled
    ids, labels, _, _ = batch()
    expected = lm(input_ids=ids, labels=labels).loss.item()
    model = ChunkedLM(lm, 7)
    assert relative(mean_loss(model), expected) > 0.05  # the chunked head alone is wrong
    verify_logits(model)
    assert model.own_forward
    assert "logits come from its own forward" in caplog.text
    assert relative(mean_loss(model), expected) < 1e-4


@pytest.mark.parametrize("family", ["granite", "gemma2"])
def test_rl_logprobs_at_a_temperature_are_the_models(family):
    lm = tiny_model(family)
    ids, _, shifted, positions = batch()
    logits = lm(input_ids=ids).logits.float() / 0.7
    expected = torch.log_softmax(logits, dim=-1)
    keep = shifted != IGNORE_INDEX
    want = expected.gather(-1, shifted.clamp_min(0).unsqueeze(-1)).squeeze(-1)[keep]
    model = ChunkedLM(lm, 5)
    got = token_logprobs(model, ids, positions, shifted, 0.7).reshape(shifted.shape)[keep]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen3_moe"])
def test_the_decoder_layers_are_the_transformer_blocks(family):
    lm = tiny_model(family)
    layers = decoder_layers(lm)
    assert len(layers) == 2
    assert type(layers[0]).__name__ in lm._no_split_modules
    assert ChunkedLM(lm, None).layers is layers
