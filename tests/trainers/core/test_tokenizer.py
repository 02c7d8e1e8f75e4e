"""build_tokenizer: built-in names, local directories, the chat template override, the pad
token, and offline failures reported as SetupErrors on the field the name came from."""

from __future__ import annotations

import pytest

from trainspec.config import load
from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError

CONVERSATION = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ih"}]


def configs(**overrides):
    config = load("sft", [], {"model.name": "builtin:tiny-qwen3", **overrides}).config
    return config.tokenizer, config.model


@pytest.fixture
def offline(monkeypatch):
    """Make hub look-ups fail at once, as they do without a network (no retries)."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)


def test_builtin_from_model_name():
    tokenizer = build_tokenizer(*configs())
    assert tokenizer.pad_token == "<|pad|>"
    text = tokenizer.apply_chat_template(CONVERSATION, tokenize=False)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nih<|im_end|>\n"
    assert tokenizer.encode("ab", add_special_tokens=False) == [97, 98]  # one token per byte


def test_local_directory_and_name_override():
    directory = str(builtin_model_dir("builtin:tiny-qwen3"))
    tokenizer = build_tokenizer(*configs(**{"tokenizer.name": directory, "model.name": "x/y"}))
    assert len(tokenizer) == 260


def test_inline_and_file_chat_template(tmp_path):
    inline = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    tokenizer = build_tokenizer(*configs(**{"tokenizer.chat_template": inline}))
    assert (
        tokenizer.apply_chat_template(CONVERSATION, tokenize=False) == "[user] hi\n[assistant] ih\n"
    )
    path = tmp_path / "t.jinja"
    path.write_text("{% for m in messages %}<{{ m['content'] }}>{% endfor %}")
    tokenizer = build_tokenizer(*configs(**{"tokenizer.chat_template": str(path)}))
    assert tokenizer.apply_chat_template(CONVERSATION, tokenize=False) == "<hi><ih>"


@pytest.mark.parametrize("template", ["missing/template.jinja", "{% for m in messages %}"])
def test_bad_chat_template(template):
    with pytest.raises(SetupError) as caught:
        build_tokenizer(*configs(**{"tokenizer.chat_template": template}))
    assert caught.value.path == "tokenizer.chat_template"


def test_pad_token_falls_back_to_eos(tmp_path):
    source = build_tokenizer(*configs())
    source.pad_token = None
    source.save_pretrained(tmp_path)
    tokenizer = build_tokenizer(*configs(**{"tokenizer.name": str(tmp_path)}))
    assert tokenizer.pad_token == "<|im_end|>"


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"model.name": "Qwen/Qwen3-0.6B"}, "model.name"),
        ({"tokenizer.name": "no-such-org/no-such-tokenizer"}, "tokenizer.name"),
        ({"tokenizer.name": "builtin:huge-model"}, "tokenizer.name"),
        ({"tokenizer.name": "./not/a/dir"}, "tokenizer.name"),
    ],
)
def test_unloadable_names_are_setup_errors(offline, overrides, field):
    with pytest.raises(SetupError) as caught:
        build_tokenizer(*configs(**overrides))
    assert caught.value.path == field
    assert "builtin:tiny-qwen3" in caught.value.fix


def test_trust_remote_code_comes_from_model_when_unset(monkeypatch):
    import transformers

    seen = []
    real = transformers.AutoTokenizer.from_pretrained

    def spy(name, **kwargs):
        seen.append(kwargs["trust_remote_code"])
        return real(name, **kwargs)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", spy)
    build_tokenizer(*configs(**{"model.trust_remote_code": True}))
    build_tokenizer(
        *configs(**{"model.trust_remote_code": True, "tokenizer.trust_remote_code": False})
    )
    assert seen == [True, False]
