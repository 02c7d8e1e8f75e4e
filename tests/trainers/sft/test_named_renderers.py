"""The reference's named renderers (`[renderer] name = "prime-qwen3"`, ...) through the
`renderers` package: the samples are the package's own `build_training_sample`, end to end
through `sft`; a renderer that does not fit the tokenizer is refused by name."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from renderers import build_training_sample, config_from_name, create_renderer
from sft_support import THINKING_CHAT as CONVERSATION

from trainspec.config import load
from trainspec.trainers.builtin import MODELS
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError
from trainspec.trainers.preflight import sft_refusals
from trainspec.trainers.sft.data import build_sft_data
from trainspec.trainers.sft.train import train

sys.path.insert(0, str(Path(__file__).parents[1]))
from families import save_tiny_model  # noqa: E402

# What Qwen3's renderers need beyond ChatML's markers (the built-in tokenizer has those).
QWEN3_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>"]
QWEN3_TOKENS += ["</tool_response>"]


@pytest.fixture(scope="module")
def qwen3_tokenizer_dir(tmp_path_factory) -> Path:
    """The built-in byte-level tokenizer with Qwen3's special tokens, saved offline."""
    config = load("sft", [], {"model.name": "builtin:tiny-qwen3"}).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    tokenizer.add_special_tokens(
        {"additional_special_tokens": QWEN3_TOKENS}, replace_extra_special_tokens=False
    )
    path = tmp_path_factory.mktemp("qwen3-tokenizer")
    tokenizer.save_pretrained(path)
    return path


def chats(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"messages": CONVERSATION}) + "\n" for _ in range(n)))
    return path


def settings(tmp_path, tokenizer_dir, renderer: str, **more) -> dict:
    return {
        "model.name": "builtin:tiny-qwen3",
        "tokenizer.name": str(tokenizer_dir),
        "renderer.name": renderer,
        "data.type": "sft",
        "data.name": str(chats(tmp_path / "chats.jsonl", 4)),
        "data.seq_len": 128,
        "data.batch_size": 2,
        "data.micro_batch_size": 2,
        **more,
    }


@pytest.mark.parametrize("name", ["prime-qwen3", "qwen3"])
def test_samples_are_the_renderers_own(tmp_path, qwen3_tokenizer_dir, name):
    config = load("sft", [], settings(tmp_path, qwen3_tokenizer_dir, name)).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    data = build_sft_data(config.data, tokenizer, rank=0, world_size=1, renderer=config.renderer)
    (ids, mask) = data.stream.dataset[0]["input_ids"], data.stream.dataset[0]["loss_mask"]
    renderer = create_renderer(tokenizer, config_from_name(name))
    want = build_training_sample(
        renderer, CONVERSATION, role_to_mask=lambda m: m["role"] == "assistant"
    )
    assert ids == list(want.token_ids) and mask == [bool(m) for m in want.loss_mask]
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert "6<|im_end|>" in trained and "3+3?" not in trained


def test_a_renderer_that_does_not_fit_the_tokenizer_is_refused(tmp_path):
    config = load("sft", [], settings(tmp_path, MODELS["tiny-qwen3"], "llama-3")).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    with pytest.raises(SetupError) as raised:
        build_sft_data(config.data, tokenizer, rank=0, world_size=1, renderer=config.renderer)
    error = raised.value
    assert error.path == "renderer.name" and 'renderer "llama-3" does not fit' in error.problem
    assert "<|begin_of_text|>" in error.problem and "tokenizer.name" in error.fix


def test_thinking_retention_needs_a_named_renderer(tmp_path, qwen3_tokenizer_dir):
    with_template = settings(tmp_path, qwen3_tokenizer_dir, "auto")
    with_template["renderer.thinking_retention"] = "all"
    refused = sft_refusals(load("sft", [], with_template).config, 1)
    assert [e.path for e in refused] == ["renderer.thinking_retention"]
    named = {**with_template, "renderer.name": "prime-qwen3"}
    assert sft_refusals(load("sft", [], named).config, 1) == []


def test_sft_trains_a_qwen3_model_through_a_named_renderer(
    tmp_path, qwen3_tokenizer_dir, one_torch_thread
):
    model = save_tiny_model("qwen3", tmp_path / "model")  # vocab 320: room for the 266 tokens
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(qwen3_tokenizer_dir / name, model / name)
    run = settings(tmp_path, model, "prime-qwen3", **{"model.name": str(model)})
    run |= {
        "model.seq_len": 128,
        "model.compile": None,
        "max_steps": 2,
        "output_dir": str(tmp_path / "out"),
        "run.name": "named",
    }
    assert train(load("sft", [], run).config) == 0
    records = (tmp_path / "out" / "named" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["step"] for r in records if "loss" in json.loads(r)] == [1, 2]
