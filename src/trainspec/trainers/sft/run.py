"""The SFT loop behind the setup-error guard."""

from __future__ import annotations

from ..guard import run_guarded as _run_guarded


def run_guarded(config) -> int:
    from .train import train

    return _run_guarded("sft", train, config)
