"""Reward functions named in a config, weighted together: each called on a completion with its
row's columns, its value checked, the weighted sum taken.

    rewards = Rewards.resolve(["math_answer", "my_rewards:format_ok"], [1.0, 0.5],
                              where="orchestrator.train.source[0].reward")
    total, each = await rewards.score(completion, row)   # 1.0 * math_answer + 0.5 * format_ok
    total, each = rewards.score_sync(completion, row)    # the same, outside an event loop

The names resolve through named_rewards.py: a built-in ("math_answer"), an import path
("package.module:function") or a local file ("path/to/file.py:function").

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
import inspect
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .named_rewards import RewardError, RewardFn, resolve_reward, reward_name


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
