"""Reward functions by name, as a config names them: the built-ins, or your own by import path
or by file.

    fn = resolve_reward("my_rewards:format_ok", "orchestrator.train.source[0].reward[1]")
    fn = resolve_reward("math_answer", where)         # BUILTIN_REWARDS["math_answer"]
    reward_name("my_rewards:format_ok")               # "format_ok", the reward's metric name

A reward is named by one string:
    "exact_match", "lcs_ratio", "math_answer"      built-in (see BUILTIN_REWARDS)
    "package.module:function"                      importable (installed, or on sys.path)
    "package.module.function"                      the same, last dot before the function
    "path/to/file.py:function"                     a local file, relative to `root` (default: cwd)

A name that resolves to nothing is a RewardError naming the config path, what is wrong and the
fix. Weighting the functions together and calling them on completions is rewards.py's.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SetupError
from .tasks import reverse_text

RewardFn = Callable[..., Any]  # fn(completion, **row) -> float, or an awaitable of one
MATH_EXTRA = "pip install 'trainspec[train]'"  # the extra that brings math-verify


class RewardError(SetupError, ValueError):
    """A reward that cannot be resolved or that failed on a completion: where, what, the fix."""

    def __init__(self, where: str, problem: str, fix: str) -> None:
        super().__init__(where, problem, fix)
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.problem} (fix: {self.fix})"


# ---- built-in rewards -------------------------------------------------------------------------


def exact_match(completion: str, answer: str) -> float:
    """1.0 when the completion equals the answer once surrounding whitespace is removed."""
    return float(reverse_text.exact_match(completion, str(answer)))


def lcs_ratio(completion: str, answer: str) -> float:
    """Longest common subsequence of completion and answer over the longer length, in [0, 1]."""
    return reverse_text.lcs_ratio(completion, str(answer))


def math_answer(completion: str, answer: str) -> float:
    """1.0 when math-verify finds the completion's final answer (\\boxed{1/2}, $0.5$, ...) equal
    to the row's `answer`, else 0.0. Needs the math-verify package, imported on first use."""
    try:
        from math_verify import parse, verify
    except ImportError as exc:
        raise ImportError(
            f"the math_answer reward needs math-verify: pip install math-verify (or {MATH_EXTRA})"
        ) from exc
    # math-verify's timeouts use signal.alarm, which only the main thread may set.
    seconds: Any = 5 if threading.current_thread() is threading.main_thread() else None
    gold = parse(str(answer), parsing_timeout=seconds)
    found = parse(completion, parsing_timeout=seconds)
    return float(verify(gold, found, timeout_seconds=seconds))


BUILTIN_REWARDS: dict[str, RewardFn] = {
    "exact_match": exact_match,
    "lcs_ratio": lcs_ratio,
    "math_answer": math_answer,
}


# ---- resolving a name to a function ------------------------------------------------------------


def resolve_reward(spec: str, where: str, *, root: Path | None = None) -> RewardFn:
    """The function `spec` names (see the module docstring); RewardError says why not.

    `where` is the config path reported in errors; `root` is where relative file paths start.
    """
    spec = spec.strip()
    if spec == "math_answer" and importlib.util.find_spec("math_verify") is None:
        raise RewardError(
            where,
            "the math_answer reward needs the math-verify package, which is not installed",
            f"pip install math-verify (or {MATH_EXTRA})",
        )
    if spec in BUILTIN_REWARDS:
        return BUILTIN_REWARDS[spec]
    how = "a built-in name, 'package.module:function' or 'path/to/file.py:function'"
    if not spec:
        raise RewardError(where, "the reward is empty", f"name one: {how}")
    if spec.endswith(".py"):
        raise RewardError(where, f"{spec!r} names a file but no function", f"write {spec}:function")
    module_part, sep, attr = spec.rpartition(":") if ":" in spec else spec.rpartition(".")
    if not sep:
        raise RewardError(
            where,
            f"{spec!r} is not a built-in reward",
            f"use one of {', '.join(BUILTIN_REWARDS)}, or {how}",
        )
    if not module_part or not attr:
        raise RewardError(where, f"{spec!r} names no function", f"write it as {how}")
    if module_part.endswith(".py"):
        module = _load_file(Path(module_part), root or Path.cwd(), where)
    else:
        module = _import(module_part, where)
    fn: Any = module
    for name in attr.split("."):
        if not hasattr(fn, name):
            defined = sorted(n for n, v in vars(module).items() if _is_own_function(v, module))
            raise RewardError(
                where,
                f"{module_part} has no attribute {attr!r}",
                f"check the name; it defines: {', '.join(defined) or 'no functions'}",
            )
        fn = getattr(fn, name)
    if not callable(fn):
        raise RewardError(
            where,
            f"{spec} is of type {type(fn).__name__}, not a function",
            "name a function that takes (completion, **row) and returns a float",
        )
    return fn


def reward_name(spec: str) -> str:
    """The metric name of a spec: the built-in name, or the function's own name."""
    spec = spec.strip()
    return spec.rpartition(":")[2].rpartition(".")[2] if ":" in spec else spec.rpartition(".")[2]


def _is_own_function(value: Any, module: Any) -> bool:
    return inspect.isfunction(value) and value.__module__ == module.__name__


def _import(name: str, where: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name != exc.name and not name.startswith(f"{exc.name}."):
            raise RewardError(  # the module exists, but something it imports does not
                where,
                f"importing {name} failed: no module named {exc.name!r}",
                f"install {exc.name} in this environment",
            ) from exc
        raise RewardError(
            where,
            f"no module named {name!r}",
            "install the package, put its folder on PYTHONPATH, "
            "or name a local file as 'path/to/file.py:function'",
        ) from exc
    except Exception as exc:
        raise RewardError(
            where, f"importing {name} raised {type(exc).__name__}: {exc}", f"fix {name}"
        ) from exc


def _load_file(path: Path, root: Path, where: str) -> Any:
    path = path if path.is_absolute() else root / path
    if not path.is_file():
        raise RewardError(
            where, f"no file {path}", f"check the path (a relative one starts at {root})"
        )
    name = f"trainspec_reward_{path.stem}_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise RewardError(where, f"{path} cannot be loaded as Python", "name a .py file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look a module up by name
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise RewardError(
            where, f"loading {path} raised {type(exc).__name__}: {exc}", f"fix {path}"
        ) from exc
    return module
