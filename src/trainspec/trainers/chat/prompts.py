"""How the orchestrator renders a prompt to token ids, from `[orchestrator.renderer]`.

    render, stop_id = prompt_renderer(config.renderer, tokenizer)
    ids = render([{"role": "system", ...}, {"role": "user", ...}])   # ends with the reply header
    ids, stop_id = template_prompt_ids(tokenizer, messages), template_stop_id(tokenizer)

"auto" and "default" use the tokenizer's chat template with the generation prompt, as the SFT
trainer renders its conversations; a named renderer ("qwen3", "prime-qwen3", ...) is the
renderers package's, built with the table's settings, and its first stop token ends a
completion. The RL trainer learns from exactly these ids: the completion is appended to them.
With the chat template, a completion ends on the end-of-turn token (`template_stop_id`; the
tokenizer's eos token where it has none).
"""

from __future__ import annotations

from collections.abc import Callable

from .named_renderers import NamedRendering, uses_named_renderer

Render = Callable[[list[dict]], list[int]]
END_OF_TURN = "<|im_end|>"


def template_prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    return list(ids["input_ids"] if isinstance(ids, dict) else ids)


def template_stop_id(tokenizer) -> int:
    stop = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    if isinstance(stop, int) and stop != tokenizer.unk_token_id:
        return stop
    return tokenizer.eos_token_id


def prompt_renderer(renderer_cfg, tokenizer) -> tuple[Render, int]:
    if not uses_named_renderer(renderer_cfg):
        return (lambda messages: template_prompt_ids(tokenizer, messages)), template_stop_id(
            tokenizer
        )
    renderer = NamedRendering.from_config(renderer_cfg).renderer(tokenizer)
    stops = list(renderer.get_stop_token_ids())

    def render(messages: list[dict]) -> list[int]:
        return list(renderer.render_ids(messages, add_generation_prompt=True))

    return render, stops[0] if stops else template_stop_id(tokenizer)
