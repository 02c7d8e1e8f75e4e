"""Reward functions named in a config: built-ins, or your own by import path, weighted together.

    fn = resolve_reward("my_rewards:format_ok", "orchestrator.train.source[0].reward[1]")
    rewards = Rewards.resolve(["math_answer", "my_rewards:format_ok"], [1.0, 0.5],
                              where="orchestrator.train.source[0].reward")
    total, each = await rewards.score(completion, row)   # 1.0 * math_answer + 0.5 * format_ok
    total, each = rewards.score_sync(completion, row)    # the same, outside an event loop

A reward is named by one string:
    "exact_match", "lcs_ratio", "math_answer"      built-in (see BUILTIN_REWARDS)
    "package.module:function"                      importable (installed, or on sys.path)
    "package.module.function"                      the same, last dot before the function
    "path/to/file.py:function"                     a local file, relative to `root` (default: cwd)

A reward is called as `fn(completion, **row) -> float`, where `row` is the dataset row's other
columns (`answer=...`). It may be `async def` or return an awaitable; sync ones run in the
caller's thread, so a slow one (a judge over the network) should be async. The row may carry
columns a function does not take: a function with `**kwargs` gets every column, any other gets
only the columns its signature names. A column it needs (a parameter with no default) that the
row lacks is an error, and so is a function that raises or returns anything but a finite number:
each names the reward and its config path. bool counts as a number (True is 1.0).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import math
import numbers
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SetupError
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


# ---- one reward, and several weighted --------------------------------------------------------


@dataclass
class Reward:
    """One function with its weight; `where` is its config path, named by every error."""

    name: str
    fn: RewardFn
    weight: float = 1.0
    where: str = "reward"
    _takes_all: bool = field(init=False, repr=False)
    _takes: frozenset[str] = field(init=False, repr=False)
    _needs: frozenset[str] = field(init=False, repr=False)
    _completion: str | None = field(init=False, repr=False)  # the completion's parameter name

    def __post_init__(self) -> None:
        if not math.isfinite(self.weight):
            raise RewardError(self.where, f"the weight {self.weight} is not finite", "use a number")
        try:
            params = list(inspect.signature(self.fn).parameters.values())
        except (TypeError, ValueError) as exc:
            raise RewardError(
                self.where,
                f"the signature of {self.name} cannot be read",
                "wrap it in a def f(completion, **row)",
            ) from exc
        P = inspect.Parameter
        if params and params[0].kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
            self._completion = params[0].name
        elif params and params[0].kind == P.VAR_POSITIONAL:
            self._completion = None
        else:
            raise RewardError(
                self.where,
                f"{self.name} takes no positional argument for the completion",
                "define it as def f(completion, **row)",
            )
        rest = params[1:]
        if any(p.kind == P.POSITIONAL_ONLY and p.default is P.empty for p in rest):
            raise RewardError(
                self.where,
                f"{self.name} needs a second positional-only argument, which a row cannot give",
                "take row columns as keyword arguments: def f(completion, answer)",
            )
        named = [p for p in rest if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)]
        self._takes_all = any(p.kind == P.VAR_KEYWORD for p in rest)
        self._takes = frozenset(p.name for p in named)
        self._needs = frozenset(p.name for p in named if p.default is P.empty)

    def _arguments(self, row: Mapping[str, Any]) -> dict[str, Any]:
        missing = sorted(self._needs.difference(row))
        if missing:
            raise RewardError(
                self.where,
                f"reward {self.name!r} needs the column {', '.join(map(repr, missing))}, "
                f"which the row lacks (it has: {', '.join(map(repr, row)) or 'nothing'})",
                "add the column to the data, or give the parameter a default",
            )
        keys = row.keys() if self._takes_all else self._takes.intersection(row)
        return {k: row[k] for k in keys if k != self._completion}

    async def __call__(self, completion: str, row: Mapping[str, Any]) -> float:
        """The function's value on one completion, checked to be a finite number."""
        kwargs = self._arguments(row)
        try:
            value = self.fn(completion, **kwargs)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            raise RewardError(
                self.where,
                f"reward {self.name!r} raised {type(exc).__name__}: {exc}",
                f"fix {self.name}, or catch the case and return a float",
            ) from exc
        if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            raise RewardError(
                self.where,
                f"reward {self.name!r} returned {value!r}, not a finite number",
                "return a float (an int or bool also counts)",
            )
        return float(value)


class Rewards:
    """Several rewards summed with their weights (TRL's `reward_funcs` and `reward_weights`)."""

    def __init__(self, rewards: Sequence[Reward]) -> None:
        if not rewards:
            raise RewardError("reward", "no reward function is given", "name at least one")
        seen: dict[str, Reward] = {}
        for reward in rewards:
            if reward.name in seen:
                raise RewardError(
                    reward.where,
                    f"two rewards are named {reward.name!r} (also {seen[reward.name].where}); "
                    "their metrics would collide",
                    "rename one function, or list a function once and set its weight",
                )
            seen[reward.name] = reward
        self.rewards = list(rewards)

    @classmethod
    def resolve(
        cls,
        specs: Sequence[str],
        weights: Sequence[float] | None = None,
        *,
        where: str,
        root: Path | None = None,
    ) -> Rewards:
        """Resolve every spec (errors at `where[i]`); weights default to 1.0 each."""
        if weights is not None and len(weights) != len(specs):
            raise RewardError(
                where,
                f"{len(specs)} reward functions but {len(weights)} weights",
                "give one weight per function, or none for 1.0 each",
            )
        if not specs:
            raise RewardError(where, "no reward function is given", "name at least one")
        weights = [1.0] * len(specs) if weights is None else weights
        return cls(
            [
                Reward(
                    reward_name(spec),
                    resolve_reward(spec, f"{where}[{i}]", root=root),
                    w,
                    f"{where}[{i}]",
                )
                for i, (spec, w) in enumerate(zip(specs, weights, strict=True))
            ]
        )

    async def score(
        self, completion: str, row: Mapping[str, Any]
    ) -> tuple[float, dict[str, float]]:
        """The weighted sum over the rewards, and each reward's own value by name (metrics).

        Rewards run one after another; score many completions at once with asyncio.gather.
        """
        values = {reward.name: await reward(completion, row) for reward in self.rewards}
        total = sum(reward.weight * values[reward.name] for reward in self.rewards)
        return total, values

    def score_sync(self, completion: str, row: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
        """`score` for code outside an event loop (inside one, await `score`)."""
        return asyncio.run(self.score(completion, row))


def reward_name(spec: str) -> str:
    """The metric name of a spec: the built-in name, or the function's own name."""
    spec = spec.strip()
    return spec.rpartition(":")[2].rpartition(".")[2] if ":" in spec else spec.rpartition(".")[2]
