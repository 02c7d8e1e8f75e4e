"""The Hugging Face Hub, asked only when it can answer: one quick probe per process.

    offline = go_offline_unless_reachable()   # before the first hub id is loaded

Without a network, `from_pretrained` and `load_dataset` retry each file with back-off (about a
minute of warnings, each printed twice, before the error). So before a hub id is loaded this
opens one connection to the hub (HF_ENDPOINT's host, 3 s at most); when none can be made, the
process goes offline (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE): a model or dataset in the local
cache still loads, anything else fails at once with one message. An offline setting already
in the environment is kept, and nothing is probed.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def _set_offline() -> None:
    for name in OFFLINE_VARIABLES:
        os.environ[name] = "1"
    # The libraries read these once, at import; one already imported is told directly.
    for module, names in (
        ("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
        ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")),
    ):
        loaded = sys.modules.get(module)
        for name in names if loaded is not None else ():
            setattr(loaded, name, True)


def is_offline() -> bool:
    return any(
        os.environ.get(name, "").lower() in ("1", "true", "yes")
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


@functools.cache
def go_offline_unless_reachable() -> bool:
    """True when the process works offline (by the environment's choice, or because the hub
    cannot be reached)."""
    if is_offline():
        return True
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
        return False
    except OSError:
        _set_offline()
        return True


def unreachable_reason(name: str) -> str | None:
    """Why loading the hub id `name` failed, when it is that the hub could not be reached."""
    if not is_offline():
        return None
    return f"the hub cannot be reached from here, and {name!r} is not in the local cache"


def hub_fix(name: str) -> str:
    return (
        f"fetch it where there is a network (`hf download {name}`; the cache then serves it "
        "offline), or name a local directory, or builtin:tiny-qwen3"
    )
