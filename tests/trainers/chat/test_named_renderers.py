"""The reference's named renderers (`[renderer] name = "prime-qwen3"`, ...) through the
`renderers` package: the samples are the package's own `build_training_sample`, end to end
through `sft`, with the settings the table writes (`enable_thinking`, ...); a renderer that does
not fit the tokenizer, or settings the package refuses, are refused by name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.families import save_tiny_model
from helpers.sft_support import THINKING_CHAT as CONVERSATION
from renderers import build_training_sample, config_from_name, create_renderer
from transformers import AutoTokenizer

from trainspec.config import load
from trainspec.trainers.builtin import MODELS
from trainspec.trainers.chat.named_renderers import NamedRendering, renderer_config
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError
from trainspec.trainers.sft.data import build_sft_data
from trainspec.trainers.sft.refusals import sft_refusals
from trainspec.trainers.sft.train import train

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


# Assistant turns without reasoning: Qwen3's enable_thinking decides whether an earlier one keeps
# the empty <think></think> block the generation prompt opened.
NO_REASONING = [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "3+3?"},
    {"role": "assistant", "content": "6"},
]
EMPTY_THINK = "<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>"


def test_a_renderers_own_settings_change_what_it_renders(qwen3_tokenizer_dir):
    tokenizer = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)
    trained = {"assistant": True}
    plain = NamedRendering("qwen3")(tokenizer, NO_REASONING, None, trained)
    off = NamedRendering("qwen3", settings={"enable_thinking": False})
    ids, mask = off(tokenizer, NO_REASONING, None, trained)
    reference = config_from_name("qwen3").model_copy(update={"enable_thinking": False})
    want = build_training_sample(
        create_renderer(tokenizer, reference),
        NO_REASONING,
        role_to_mask=lambda m: m["role"] == "assistant",
    )
    assert ids == list(want.token_ids) and mask == [bool(m) for m in want.loss_mask]
    assert EMPTY_THINK in tokenizer.decode(ids) and EMPTY_THINK not in tokenizer.decode(plain[0])


def test_settings_the_renderers_package_refuses_are_a_setup_error():
    settings = {"preserve_thinking": False, "thinking_retention": "all"}
    with pytest.raises(SetupError) as raised:
        NamedRendering("qwen3.6", settings=settings).renderer(None)  # before the tokenizer
    assert raised.value.path == "renderer"
    assert "preserve_thinking=False implies thinking_retention='tool_cycle'" in raised.value.problem
    with pytest.raises(SetupError) as raised:
        renderer_config("qwen3", {"add_vision_id": True})  # a setting of another variant
    assert raised.value.path == "renderer.add_vision_id"


def test_a_table_passes_on_only_the_settings_it_writes():
    written = {"renderer.name": "qwen3", "renderer.thinking_retention": "all"}
    rendering = NamedRendering.from_config(load("sft", [], written).config.renderer)
    assert (rendering.name, rendering.settings) == ("qwen3", {"thinking_retention": "all"})
    bare = NamedRendering.from_config(load("sft", [], {"renderer.name": "qwen3"}).config.renderer)
    assert bare.settings == {}  # the package's own defaults apply
    built = renderer_config("qwen3", {"thinking_retention": "all"})
    assert built.model_fields_set == {"name", "thinking_retention"}


def test_sft_renders_with_the_settings_of_the_renderer_table(tmp_path, qwen3_tokenizer_dir):
    path = tmp_path / "plain.jsonl"
    path.write_text("".join(json.dumps({"messages": NO_REASONING}) + "\n" for _ in range(4)))
    rendered = {}
    for thinking in (True, False):
        run = settings(tmp_path, qwen3_tokenizer_dir, "qwen3", **{"data.name": str(path)})
        if not thinking:
            run["renderer.enable_thinking"] = False  # a setting of the qwen3 variant
        config = load("sft", [], run).config
        tokenizer = build_tokenizer(config.tokenizer, config.model)
        data = build_sft_data(
            config.data, tokenizer, rank=0, world_size=1, renderer=config.renderer
        )
        rendered[thinking] = tokenizer.decode(data.stream.dataset[0]["input_ids"])
    assert EMPTY_THINK in rendered[False] and EMPTY_THINK not in rendered[True]


def test_a_variant_passes_on_its_own_settings_only():
    written = {"renderer.name": "qwen3.6", "renderer.add_vision_id": True}
    rendering = NamedRendering.from_config(load("sft", [], written).config.renderer)
    assert rendering.settings == {"add_vision_id": True}
    built = renderer_config(rendering.name, rendering.settings)
    assert built.add_vision_id is True and built.preserve_thinking is False  # its own default


def test_settings_the_chat_template_cannot_use_are_refused_at_start():
    """`default` renders with the tokenizer's chat template: its parsers and the extra keys it
    accepts (as the reference's does) would do nothing, so each is refused by name."""
    settings = {
        "renderer.name": "default",
        "renderer.tool_parser": "hermes",
        "renderer.enable_thinking": False,  # a named renderer's setting, an extra key here
    }
    errors = sft_refusals(load("sft", [], settings).config, processes=1)
    paths = [e.path for e in errors if e.path.startswith("renderer.")]
    assert paths == ["renderer.tool_parser", "renderer.enable_thinking"]
    plain = load("sft", [], {"renderer.name": "default"}).config
    assert not [e for e in sft_refusals(plain, processes=1) if e.path.startswith("renderer")]
