"""The reference's named renderers (`[renderer] name = "prime-qwen3"`, "qwen3", "llama-3", ...)
through the `renderers` package: one render of the whole conversation gives its token ids and
which of them the model writes at inference, so a template's history rewriting, thinking
blocks and stop tokens are the renderer's, exactly as the reference trains.

    rendering = NamedRendering("prime-qwen3", thinking_retention=None)
    ids, mask = rendering(tokenizer, messages, tools, trained)   # mask: per token, trained

"auto" and "default" stay with the tokenizer's own chat template (render.py). The loss mask
is the renderer's: tokens the model samples, of messages whose role `loss_mask` trains, and
the bodies (never the role headers) of trained system, user and tool messages.
"""

from __future__ import annotations

from typing import Any

from ..errors import SetupError

TEMPLATE_RENDERERS = ("auto", "default")  # rendered with the tokenizer's chat template


def uses_named_renderer(renderer_cfg) -> bool:
    return renderer_cfg is not None and renderer_cfg.name not in TEMPLATE_RENDERERS


class NamedRendering:
    """Picklable (for datasets' worker processes): the renderer is built on first use."""

    def __init__(self, name: str, thinking_retention: str | None) -> None:
        self.name = name
        self.thinking_retention = thinking_retention
        self._renderer: Any = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_renderer": None}

    def renderer(self, tokenizer):
        if self._renderer is None:
            self._renderer = build_renderer(self.name, self.thinking_retention, tokenizer)
        return self._renderer

    def __call__(
        self, tokenizer, messages: list[dict], tools, trained: dict[str, bool]
    ) -> tuple[list[int], list[bool]]:
        from renderers import build_training_sample

        from .render import ROLE_ALIASES

        def trains(message) -> bool:
            role = message.get("role", "")
            return bool(trained.get(ROLE_ALIASES.get(role, role), False))

        bodies = {role for role, on in trained.items() if on and role != "assistant"}
        try:
            sample = build_training_sample(
                self.renderer(tokenizer),
                messages,
                role_to_mask=trains,
                tools=tools,
                content_sft_roles=bodies or None,
            )
        except SetupError:
            raise
        except Exception as exc:  # the renderer's own refusal of this conversation
            raise SetupError(
                "renderer.name",
                f"renderer {self.name!r} cannot render a conversation: {exc}",
                'fix the row, or use renderer.name = "auto" (the tokenizer\'s chat template)',
            ) from None
        return list(sample.token_ids), [bool(m) for m in sample.loss_mask]


def build_renderer(name: str, thinking_retention: str | None, tokenizer):
    """The `renderers` package's renderer `name` for `tokenizer`; a missing package or a
    tokenizer without the renderer's special tokens is a SetupError on renderer.name."""
    try:
        from renderers import config_from_name, create_renderer
    except ImportError:
        raise SetupError(
            "renderer.name",
            f'"{name}" comes from the renderers package, which is not installed',
            "pip install 'trainspec[train]' (it includes renderers), or use "
            'renderer.name = "auto"',
        ) from None
    config = config_from_name(name)
    if thinking_retention is not None and config is not None:
        config = config.model_copy(update={"thinking_retention": thinking_retention})
    try:
        return create_renderer(tokenizer, config)
    except AssertionError as exc:  # how renderers says a special token is missing
        raise SetupError(
            "renderer.name",
            f'renderer "{name}" does not fit tokenizer {tokenizer.name_or_path!r}: {exc}',
            "use the tokenizer of the model family the renderer is for (tokenizer.name), or "
            'renderer.name = "auto" (the tokenizer\'s own chat template)',
        ) from None
