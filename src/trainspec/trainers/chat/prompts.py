"""How the orchestrator renders a prompt to token ids, from `[orchestrator.renderer]`.

    render, stop_id = prompt_renderer(config.renderer, tokenizer)
    ids = render([{"role": "system", ...}, {"role": "user", ...}])   # ends with the reply header

"auto" and "default" use the tokenizer's chat template with the generation prompt, as the SFT
trainer renders its conversations; a named renderer ("qwen3", "prime-qwen3", ...) is the
renderers package's, built with the table's settings, and its first stop token ends a
completion. The RL trainer learns from exactly these ids: the completion is appended to them.
"""

from __future__ import annotations

from collections.abc import Callable

from .named_renderers import NamedRendering, uses_named_renderer
from .tasks import template_prompt_ids, template_stop_id

Render = Callable[[list[dict]], list[int]]


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
