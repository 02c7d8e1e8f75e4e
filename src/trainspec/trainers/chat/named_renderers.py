"""The reference's named renderers (`[renderer] name = "prime-qwen3"`, "qwen3", "llama-3", ...)
through the `renderers` package: one render of the whole conversation gives its token ids and
which of them the model writes at inference, so a template's history rewriting, thinking
blocks and stop tokens are the renderer's, exactly as the reference trains.

    rendering = NamedRendering.from_config(config.renderer)
    rendering = NamedRendering("qwen3", settings={"enable_thinking": False})   # the same, by hand
    ids, mask = rendering(tokenizer, messages, tools, trained)   # mask: per token, trained

The variant's own settings of `[renderer]` (`enable_thinking`, `reasoning_effort`, ...,
`thinking_retention`) go to the package's config class of that renderer: the ones the table
sets, so the package's defaults and its checks between settings (`preserve_thinking = false`
with `thinking_retention = "all"`) are its own, as in the reference.

"auto" and "default" stay with the tokenizer's own chat template (render.py). The loss mask
is the renderer's: tokens the model samples, of messages whose role `loss_mask` trains, and
the bodies (never the role headers) of trained system, user and tool messages.
"""

from __future__ import annotations

from typing import Any

from ..errors import SetupError
from .layouts import ROLE_ALIASES

TEMPLATE_RENDERERS = ("auto", "default")  # rendered with the tokenizer's chat template


def uses_named_renderer(renderer_cfg) -> bool:
    return renderer_cfg is not None and renderer_cfg.name not in TEMPLATE_RENDERERS


def variant_settings(renderer_cfg) -> dict[str, Any]:
    """The settings a `[renderer]` table gives its variant (beside `name`): the keys it sets,
    and the extra keys of the variants that take any."""
    chosen = {
        key: getattr(renderer_cfg, key) for key in renderer_cfg.model_fields_set if key != "name"
    }
    return {**chosen, **(renderer_cfg.model_extra or {})}


class NamedRendering:
    """Picklable (for datasets' worker processes, settings included): the renderer is built on
    first use."""

    def __init__(
        self,
        name: str,
        thinking_retention: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.settings = dict(sorted((settings or {}).items()))
        if thinking_retention is not None:
            self.settings["thinking_retention"] = thinking_retention
        self._renderer: Any = None

    @classmethod
    def from_config(cls, renderer_cfg) -> NamedRendering:
        """The named renderer a `[renderer]` table selects, with its variant's settings."""
        return cls(renderer_cfg.name, settings=variant_settings(renderer_cfg))

    @property
    def thinking_retention(self) -> str | None:
        return self.settings.get("thinking_retention")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_renderer": None}

    def renderer(self, tokenizer):
        if self._renderer is None:
            self._renderer = build_renderer(self.name, self.settings, tokenizer)
        return self._renderer

    def __call__(
        self, tokenizer, messages: list[dict], tools, trained: dict[str, bool]
    ) -> tuple[list[int], list[bool]]:
        from renderers import build_training_sample

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


def build_renderer(name: str, settings: dict[str, Any] | str | None, tokenizer):
    """The `renderers` package's renderer `name` for `tokenizer`, configured with `settings`
    (the variant's fields; a string is the thinking_retention alone). A missing package, settings
    its config refuses, or a tokenizer without the renderer's special tokens is a SetupError."""
    try:
        from renderers import create_renderer
    except ImportError:
        raise SetupError(
            "renderer.name",
            f'"{name}" comes from the renderers package, which is not installed',
            "pip install 'trainspec[train]' (it includes renderers), or use "
            'renderer.name = "auto"',
        ) from None
    if not isinstance(settings, dict):
        settings = {} if settings is None else {"thinking_retention": settings}
    config = renderer_config(name, settings)
    try:
        return create_renderer(tokenizer, config)
    except AssertionError as exc:  # how renderers says a special token is missing
        raise SetupError(
            "renderer.name",
            f'renderer "{name}" does not fit tokenizer {tokenizer.name_or_path!r}: {exc}',
            "use the tokenizer of the model family the renderer is for (tokenizer.name), or "
            'renderer.name = "auto" (the tokenizer\'s own chat template)',
        ) from None


def renderer_config(name: str, settings: dict[str, Any]):
    """The package's typed config of renderer `name` with `settings`: only the keys given are
    set, so its own defaults and its checks between settings apply."""
    from pydantic import TypeAdapter, ValidationError
    from renderers import RendererConfig

    try:
        return TypeAdapter(RendererConfig).validate_python({**settings, "name": name})
    except ValidationError as exc:
        first = exc.errors()[0]
        fields = [part for part in first["loc"][1:] if isinstance(part, str)]
        path = ".".join(["renderer", *fields]) if fields else "renderer"
        message = first["msg"].removeprefix("Value error, ")
        raise SetupError(
            path,
            f"the renderers package refuses these settings of renderer {name!r}: {message}",
            "change or drop the conflicting [renderer] settings",
        ) from None
