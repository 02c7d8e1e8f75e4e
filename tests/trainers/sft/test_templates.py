"""Multi-turn loss masks under the chat-template layouts of real families, written here in each
family's format: Qwen3 (which drops the <think> block of answers before the latest question,
so it rewrites history), Llama 3, Gemma, Mistral (which moves the system prompt to the latest
user turn) and Phi-3. Exactly each answer's own tokens are trained, after the conversation as
the template renders it when that answer is written."""

from __future__ import annotations

import json
import logging

import pytest
from helpers.sft_support import THINKING_CHAT as CONVERSATION

from trainspec.config import load
from trainspec.trainers.chat.render import render_messages, trained_roles
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.errors import SetupError
from trainspec.trainers.sft.data import build_sft_data

# Answers before the latest user message keep only their text; later ones open with their
# reasoning in <think> tags (empty when the message has none), as Qwen3's template does.
QWEN3 = (
    "{%- set ns = namespace(last=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last = loop.index0 %}"
    "{%- endif %}{%- endfor %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if loop.index0 > ns.last %}"
    "{{- '<think>\\n' + (m.reasoning_content or '') + '\\n</think>\\n\\n' }}{%- endif %}"
    "{{- m.content + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
LLAMA3 = (
    "{{- '<|begin_of_text|>' }}{%- for m in messages %}"
    "{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
# The system prompt goes into the first user turn; the assistant is "model".
GEMMA = (
    "{{- '<bos>' }}{%- set system = messages[0].content if messages[0].role == 'system' %}"
    "{%- for m in messages if m.role != 'system' %}"
    "{%- set role = 'model' if m.role == 'assistant' else m.role %}"
    "{%- set text = (system + '\\n\\n' + m.content) if (system and loop.first) else m.content %}"
    "{{- '<start_of_turn>' + role + '\\n' + text + '<end_of_turn>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}"
)
# The system prompt goes into the latest user turn, so it moves as the conversation goes on.
MISTRAL = (
    "{%- set system = messages[0].content if messages[0].role == 'system' %}"
    "{%- set ns = namespace(last=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last = loop.index0 %}"
    "{%- endif %}{%- endfor %}"
    "{{- '<s>' }}{%- for m in messages if m.role != 'system' %}"
    "{%- if m.role == 'user' %}{{- '[INST]' }}"
    "{%- if system and messages.index(m) == ns.last %}{{- system + '\\n\\n' }}{%- endif %}"
    "{{- m.content + '[/INST]' }}{%- else %}{{- m.content + '</s>' }}{%- endif %}{%- endfor %}"
)
PHI3 = (
    "{%- for m in messages %}{{- '<|' + m.role + '|>\\n' + m.content + '<|end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"
)


def tokenizer_with(template: str):
    config = load("sft", [], {"model.name": "builtin:tiny-qwen3"}).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    tokenizer.chat_template = template
    return tokenizer


def trained_texts(tokenizer, sample) -> tuple[str, str]:
    """(the sample's whole text, its trained text)."""
    ids, mask = sample
    return tokenizer.decode(ids), tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])


def samples(template: str, messages=CONVERSATION):
    tokenizer = tokenizer_with(template)
    roles = trained_roles(load("sft", [], {}).config.data.loss_mask)
    found = render_messages(tokenizer, messages, roles)
    return [trained_texts(tokenizer, sample) for sample in found]


def test_qwen3_trains_each_answer_with_its_thinking_after_the_history_it_was_written_on():
    (first, first_trained), (second, second_trained) = samples(QWEN3)
    assert first_trained == "<think>\nadd\n</think>\n\n4<|im_end|>\n"
    assert first.endswith("2+2?<|im_end|>\n<|im_start|>assistant\n" + first_trained)
    assert second_trained == "<think>\nadd again\n</think>\n\n6<|im_end|>\n"
    # The earlier answer, as the model sees it when it writes the second: without its thinking.
    assert "<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\n3+3?" in second
    assert "<think>\nadd\n" not in second


def test_mistral_moves_the_system_prompt_and_each_answer_trains_after_its_own_prompt():
    (first, first_trained), (second, second_trained) = samples(MISTRAL)
    assert (first_trained, second_trained) == ("4</s>", "6</s>")
    assert first == "<s>[INST]Be brief.\n\n2+2?[/INST]4</s>"
    assert second == "<s>[INST]2+2?[/INST]4</s>[INST]Be brief.\n\n3+3?[/INST]6</s>"


@pytest.mark.parametrize(
    "template, answers",
    [
        (LLAMA3, "4<|eot_id|>6<|eot_id|>"),
        (GEMMA, "4<end_of_turn>\n6<end_of_turn>\n"),
        (PHI3, "4<|end|>\n6<|end|>\n"),
    ],
)
def test_templates_that_only_grow_train_the_whole_conversation_at_once(template, answers):
    ((_, trained),) = samples(template)
    assert trained == answers


def test_a_template_whose_prompt_is_not_how_it_renders_the_turn_is_refused():
    # It prompts with "<|bot|>" but renders answers under "<|a|>": no answer's tokens follow
    # its own prompt, so none can be told apart from it.
    prompts_otherwise = (
        "{%- for m in messages %}{{- '<|' + m.role[:1] + '|>' + m.content + '<|end|>' }}"
        "{%- endfor %}{%- if add_generation_prompt %}{{- '<|bot|>' }}{%- endif %}"
    )
    tokenizer = tokenizer_with(prompts_otherwise)
    roles = trained_roles(load("sft", [], {}).config.data.loss_mask)
    with pytest.raises(SetupError) as raised:
        render_messages(tokenizer, CONVERSATION, roles)
    assert raised.value.path == "tokenizer.chat_template"
    assert "generation prompt" in raised.value.problem


def test_through_the_data_pipeline_rows_become_samples_and_errors_keep_their_line(tmp_path, caplog):
    path = tmp_path / "chats.jsonl"
    lines = [json.dumps({"messages": CONVERSATION})] * 2
    path.write_text("\n".join(lines) + "\n")
    settings = {
        "model.name": "builtin:tiny-qwen3",
        "tokenizer.chat_template": QWEN3,
        "data.type": "sft",
        "data.name": str(path),
        "data.seq_len": 256,
        "data.batch_size": 2,
        "data.micro_batch_size": 2,
    }
    config = load("sft", [], settings).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    with caplog.at_level(logging.INFO):
        data = build_sft_data(config.data, tokenizer, rank=0, world_size=1)
    assert len(data.stream.lengths) == 4  # two conversations, two answers each
    assert "2 conversation(s) train turn by turn: 4 samples" in caplog.text

    untrained = [{"role": "user", "content": "no answer"}]
    path.write_text("\n".join([lines[0], json.dumps({"messages": untrained}), lines[1]]) + "\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        data = build_sft_data(config.data, tokenizer, rank=0, world_size=1)
    assert [n > 0 for n in data.stream.lengths] == [True, True, False, True, True]
    assert "chats.jsonl:2)" in caplog.text  # the row, not the index of its sample
