"""The built-in reverse-text task: deterministic disjoint splits, its scores, the dataset
registry and the greedy exact-match evaluation."""

from __future__ import annotations

import pytest
import torch

from trainspec.trainers.chat.tasks import (
    BUILTIN_DATASETS,
    evaluate_exact_match,
    load_builtin_dataset,
    reverse_text,
)
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError

torch.set_num_threads(1)


def texts(split: str) -> list[str]:
    return [example["messages"][1]["content"] for example in reverse_text.examples(split)]


def test_split_sizes_and_shape():
    train, test = reverse_text.examples("train"), reverse_text.examples("test")
    assert (len(train), len(test)) == (20_000, 500)
    for example in train[:200] + test:
        system, user, assistant = example["messages"]
        assert [system["role"], user["role"], assistant["role"]] == ["system", "user", "assistant"]
        assert assistant["content"] == user["content"][::-1]
        assert reverse_text.MIN_CHARS <= len(user["content"]) <= reverse_text.MAX_CHARS
        assert set(user["content"]) <= set("abcdefghijklmnopqrstuvwxyz ")
        assert user["content"] == user["content"].strip() and "  " not in user["content"]


def test_splits_disjoint_unique_and_deterministic():
    train, test = texts("train"), texts("test")
    assert not set(train) & set(test)
    assert len(set(train)) == len(train) and len(set(test)) == len(test)
    reverse_text._all_texts.cache_clear()  # drawn again from scratch: the same strings
    assert texts("train") == train and texts("test") == test
    assert reverse_text.examples("test", n=3) == reverse_text.examples("test")[:3]


def test_unknown_split():
    with pytest.raises(KeyError):
        reverse_text.examples("validation")


@pytest.mark.parametrize(
    "completion, target, expected",
    [
        ("abc", "abc", 1.0),
        ("", "", 1.0),
        ("", "abc", 0.0),
        ("xyz", "abc", 0.0),
        ("abcd", "abd", 0.75),  # LCS "abd" over the longer length 4
        ("ab", "abcd", 0.5),
    ],
)
def test_lcs_ratio(completion, target, expected):
    assert reverse_text.lcs_ratio(completion, target) == pytest.approx(expected)


def test_exact_match_strips_whitespace():
    assert reverse_text.exact_match("  olleh\n", "olleh")
    assert not reverse_text.exact_match("olle h", "olleh")


def test_registry_and_dataset():
    assert BUILTIN_DATASETS["builtin:reverse-text"] is reverse_text
    dataset = load_builtin_dataset("builtin:reverse-text", "test")
    assert len(dataset) == 500
    assert dataset[0] == reverse_text.examples("test", 1)[0]


@pytest.mark.parametrize(
    "name, split, mentioned",
    [("builtin:nope", "train", "builtin:reverse-text"), ("builtin:reverse-text", "dev", "test")],
)
def test_unknown_name_or_split_is_a_setup_error(name, split, mentioned):
    with pytest.raises(SetupError) as caught:
        load_builtin_dataset(name, split)
    assert caught.value.path == "data.name"
    assert mentioned in caught.value.fix


def builtin_tokenizer():
    from trainspec.config import load

    config = load("sft", [], {"model.name": "builtin:tiny-qwen3"}).config
    return build_tokenizer(config.tokenizer, config.model)


class Oracle(torch.nn.Module):
    """Stands in for a model: 'generates' the reversed user text, then end of turn and junk."""

    def __init__(self, tokenizer, answers: list[str]) -> None:
        super().__init__()
        self.tokenizer, self.answers, self.calls = tokenizer, answers, []

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        self.calls.append(kwargs)
        assert not self.training
        # Left padding: every prompt ends in the last column.
        assert bool(attention_mask[:, -1].all())
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        rows = []
        for answer in self.answers[: len(input_ids)]:
            new = self.tokenizer.encode(answer, add_special_tokens=False) + [end, 97, 98]
            rows.append(new[:max_new_tokens])
        self.answers = self.answers[len(input_ids) :]
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        tail = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        return torch.cat([input_ids, tail], dim=1)


def test_evaluate_exact_match_counts_right_answers():
    tokenizer = builtin_tokenizer()
    examples = reverse_text.examples("test", 5)
    answers = [ex["messages"][2]["content"] for ex in examples]
    answers[1] = "wrong"
    answers[3] = " " + answers[3] + " "  # whitespace around is forgiven
    oracle = Oracle(tokenizer, answers)
    oracle.train()
    score = evaluate_exact_match(oracle, tokenizer, examples, "cpu", batch_size=2)
    assert score == pytest.approx(4 / 5)
    assert oracle.training  # mode restored
    assert len(oracle.calls) == 3 and oracle.calls[0]["do_sample"] is False
    assert oracle.calls[0]["use_cache"] is True


def test_evaluate_exact_match_with_a_real_tiny_model():
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainspec.trainers.builtin import builtin_model_dir

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(builtin_model_dir("builtin:tiny-qwen3"))
    model = AutoModelForCausalLM.from_config(config)
    examples = reverse_text.examples("test", 3)
    score = evaluate_exact_match(model, builtin_tokenizer(), examples, "cpu", max_new_tokens=8)
    assert score == 0.0  # an untrained model; the point is that generation runs end to end


def test_examples_fit_the_default_sequence_length():
    tokenizer = builtin_tokenizer()
    lengths = [
        len(tokenizer.apply_chat_template(ex["messages"], tokenize=True, return_dict=False))
        for ex in reverse_text.examples("test")
    ]
    # 57 characters of content at most, plus 31 tokens of ChatML around three messages.
    assert max(lengths) <= 88 < 128
