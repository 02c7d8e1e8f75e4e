"""The tokenizer, built from `[tokenizer]` with the gaps filled from `[model]`.

    tokenizer = build_tokenizer(config.tokenizer, config.model)

The name is `tokenizer.name`, else `model.name`: a built-in name ("builtin:tiny-qwen3"), a local
directory or a hub id. `tokenizer.chat_template` (inline Jinja or a file) replaces the
tokenizer's own template, and a tokenizer without a pad token gets one, because packed rows are
padded. A name that cannot be loaded (offline, unknown id, missing directory) is a SetupError on
the field the name came from.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SetupError
from .hub import hub_fix, unreachable_reason
from .model_source import OFFLINE_FIX, model_source

_PROBE = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _resolve_name(tokenizer_cfg, model_cfg) -> tuple[str, str, str]:
    """(name as configured, what to load, config field it came from).

    The config layer copies model.name into an unset tokenizer.name, so a tokenizer name equal
    to the model's is reported as model.name: that is the setting to change.
    """
    name = tokenizer_cfg.name if tokenizer_cfg.name is not None else model_cfg.name
    field = "model.name" if name == model_cfg.name else "tokenizer.name"
    return name, model_source(name, field), field


def _load(name: str, source: str, field: str, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except Exception as exc:  # offline, unknown id, gated repo, broken files
        offline = unreachable_reason(name) if source == name else None
        if offline:
            raise SetupError(field, f"cannot load {name!r}: {offline}", hub_fix(name)) from None
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SetupError(
            field,
            f"cannot load a tokenizer from {name!r} ({reason})",
            f"check the name and the network, or use {OFFLINE_FIX}",
        ) from None


def _read_template(chat_template: str) -> str:
    """Inline Jinja, or the text of the file it names."""
    if "{" in chat_template:
        return chat_template
    path = Path(chat_template).expanduser()
    if not path.is_file():
        raise SetupError(
            "tokenizer.chat_template",
            f"{chat_template!r} is neither a Jinja template nor an existing file",
            "give the template inline, or the path of a .jinja file",
        )
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SetupError(
            "tokenizer.chat_template", f"cannot read {chat_template!r}: {exc}", "fix the file"
        ) from None


def _check_template(tokenizer) -> None:
    try:
        tokenizer.apply_chat_template(_PROBE, tokenize=False)
    except Exception as exc:
        raise SetupError(
            "tokenizer.chat_template",
            f"the chat template cannot render a conversation: {exc}",
            "fix the Jinja template",
        ) from None


def _ensure_pad_token(tokenizer, field: str) -> None:
    if tokenizer.pad_token is not None:
        return
    for candidate in (tokenizer.eos_token, tokenizer.unk_token, tokenizer.bos_token):
        if candidate is not None:
            tokenizer.pad_token = candidate
            return
    raise SetupError(
        field,
        "the tokenizer has no pad, end, unknown or start token to pad rows with",
        "use a tokenizer that defines one of them",
    )


def build_tokenizer(tokenizer_cfg, model_cfg):
    """Load the tokenizer named by the config, with its chat template and a pad token."""
    name, source, field = _resolve_name(tokenizer_cfg, model_cfg)
    trust = tokenizer_cfg.trust_remote_code
    if trust is None:
        trust = model_cfg.trust_remote_code
    tokenizer = _load(name, source, field, bool(trust))
    if tokenizer_cfg.chat_template is not None:
        tokenizer.chat_template = _read_template(tokenizer_cfg.chat_template)
        _check_template(tokenizer)
    _ensure_pad_token(tokenizer, field)
    return tokenizer
