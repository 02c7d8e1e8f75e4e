"""Packing rollouts for the trainer: per-token tensors aligned to the prediction position,
samples that never see each other, round-robin shares per rank, a pickle-free wire format."""

from __future__ import annotations

import torch

from trainspec.trainers.core.lm import IGNORE_INDEX as IGNORE
from trainspec.trainers.rl.token_export import describe_first_sample
from trainspec.trainers.wire.batch import RolloutBatch, Sample, decode, encode, pack_samples


def samples() -> list[Sample]:
    return [
        Sample([1, 2, 3], [4, 5], [-0.5, -0.25], advantage=1.0),
        Sample([1, 2], [7, 8, 9], [-1.0, -2.0, -3.0], advantage=-0.5),
        Sample([6, 6, 6, 6], [3], [-0.1], advantage=0.25),
    ]


def test_tensors_are_aligned_to_the_position_that_predicts_each_completion_token():
    (share,) = pack_samples(samples(), seq_len=12, micro_batch_size=4, ranks=1, pad_id=0)
    (mb,) = share
    assert mb.input_ids[0].tolist() == [1, 2, 3, 4, 5, 1, 2, 7, 8, 9, 0, 0]
    assert mb.position_ids[0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 0]
    # the last token of a sample predicts nothing: the next sample is not its continuation
    assert mb.targets[0].tolist() == [2, 3, 4, 5, IGNORE, 2, 7, 8, 9, IGNORE, IGNORE, IGNORE]
    assert mb.loss_mask[0].nonzero().flatten().tolist() == [2, 3, 6, 7, 8]
    assert mb.inference_logprobs[0, [2, 3, 6, 7, 8]].tolist() == [-0.5, -0.25, -1.0, -2.0, -3.0]
    assert mb.advantages[0, [2, 3, 6, 7, 8]].tolist() == [1.0, 1.0, -0.5, -0.5, -0.5]
    assert mb.input_ids[1].tolist()[:5] == [6, 6, 6, 6, 3]  # the third did not fit: next row


def test_per_token_advantages_and_cross_entropy_weights_land_on_their_tokens():
    distilled = Sample([1, 2], [4, 5, 6], [-1.0, -1.0, -1.0], 0.0, token_advantages=[0.5, -1, 2])
    imitated = Sample([3], [7, 8], [-0.5, -0.5], 0.0, ce_weights=[1.0, 1.0])
    (share,) = pack_samples([distilled, imitated], seq_len=8, micro_batch_size=1, ranks=1, pad_id=0)
    (mb,) = share
    assert mb.loss_mask[0].nonzero().flatten().tolist() == [1, 2, 3, 5, 6]
    assert mb.advantages[0, [1, 2, 3]].tolist() == [0.5, -1.0, 2.0]
    assert mb.ce_weights[0].tolist() == [0, 0, 0, 0, 0, 1, 1, 0]
    # the policy loss leaves the imitated tokens to the cross-entropy term
    assert mb.policy_mask[0].nonzero().flatten().tolist() == [1, 2, 3]
    back = decode(encode(RolloutBatch(0, 0, 1.0, [mb])))
    assert torch.equal(back.micro_batches[0].ce_weights, mb.ce_weights)


def test_the_environments_tokens_between_turns_are_context_unless_echo_weighs_them():
    # reply [4, 5], the environment's user turn [6, 7], reply [8]; echo weighs token 7 only
    episode = Sample([1, 2], [4, 5, 6, 7, 8], [-1.0, -1.0, 0.0, 0.0, -1.0], 1.5,
                     ce_weights=[0, 0, 0, 0.5, 0],
                     completion_mask=[True, True, False, False, True])  # fmt: skip
    (share,) = pack_samples([episode], seq_len=8, micro_batch_size=1, ranks=1, pad_id=0)
    (mb,) = share
    # completion token k is predicted at position prompt + k - 1 = k + 1
    assert mb.loss_mask[0].nonzero().flatten().tolist() == [1, 2, 4, 5]
    assert mb.policy_mask[0].nonzero().flatten().tolist() == [1, 2, 5]
    assert mb.ce_weights[0, 4].item() == 0.5


def test_a_per_token_list_must_match_the_completion():
    import pytest

    with pytest.raises(ValueError, match="ce_weights has 1 entries for 2 tokens"):
        Sample([1], [2, 3], [-1.0, -1.0], 0.0, ce_weights=[1.0])


def test_rows_are_dealt_round_robin_and_every_rank_gets_a_pass():
    shares = pack_samples(samples(), seq_len=6, micro_batch_size=1, ranks=4, pad_id=0)
    rows = [sum(mb.input_ids.size(0) for mb in share) for share in shares]
    assert rows == [1, 1, 1, 1]
    assert shares[3][0].num_loss_tokens == 0  # padding only: nothing trained, nothing skipped
    assert [shares[r][0].input_ids[0, 0].item() for r in range(3)] == [1, 1, 6]


def test_a_batch_survives_the_wire_unchanged():
    (share,) = pack_samples(samples(), seq_len=12, micro_batch_size=1, ranks=1, pad_id=0)
    batch = RolloutBatch(step=7, policy_step=6, temperature=0.7, micro_batches=share, reward=0.4)
    back = decode(encode(batch))
    assert (back.step, back.policy_step, back.temperature, back.reward) == (7, 6, 0.7, 0.4)
    assert len(back.micro_batches) == 2
    for mine, theirs in zip(share, back.micro_batches, strict=True):
        for name in mine.FIELDS:
            assert torch.equal(getattr(mine, name), getattr(theirs, name))


class Letters:
    """A tokenizer stand-in: token id n is the letter chr(96 + n)."""

    @staticmethod
    def decode(ids):
        return "".join(chr(96 + i) for i in ids)


def test_log_data_describes_the_first_sample_and_only_it():
    (share,) = pack_samples(samples(), seq_len=12, micro_batch_size=4, ranks=1, pad_id=0)
    text = describe_first_sample(RolloutBatch(0, 0, 1.0, share), Letters())
    assert text.startswith("prompt: 'abc'\ntrained completion: 'de'")
    assert "+1.000" in text
