"""A built-in taskset, built from a source's `env.taskset` table: prompts in a seeded order and
the verifiable reward that scores their completions.

    task = Task.from_env(source.env, "orchestrator.train.source[0].env", tokenizer, seed=0)
    prompts = task.prompts(step, count)      # the same prompts for the same (seed, step)
    reward = task.reward(completion.text, prompt.answer, completion.finished)
    held_out = task.first(n)                 # eval: the first n rows in file order

`[orchestrator.train.source.env.taskset]` takes `id = "builtin:reverse-text"` and the keys
`split` (train sources "train", eval sources "test") and `reward`. The reward compares the
completion with the known answer: "lcs_ratio" (the default) is the longest common subsequence
over the longer of the two strings, so a short fragment of the answer scores low; "exact_match"
is 1 or 0. A completion cut off by max_completion_tokens scores 0, so rambling past the answer
never pays. A taskset of any other id is a verifiers environment (verifiers_env.py).

A built-in taskset answers in one turn with no tools, as verifiers' `null` harness does: an
`env.agent` table may pick that harness (`harness.id = "null"`, `runtime.type = "subprocess"`,
as the reference's reverse-text config does); any other key is refused, never ignored.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from trainspec.config_model import written

from ...chat.prompts import template_prompt_ids
from ...chat.tasks import BUILTIN_DATASETS
from ...chat.tasks import reverse_text as reverse_text_task
from ...errors import SetupError, SetupErrors

REWARDS = {
    "lcs_ratio": reverse_text_task.lcs_ratio,
    "exact_match": lambda text, answer: float(reverse_text_task.exact_match(text, answer)),
}
DEFAULT_SPLITS = {"train": "train", "eval": "test"}
# What a one-turn, tool-free built-in taskset is played with: verifiers' plain chat harness.
PLAIN_AGENT = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}


@dataclass
class Prompt:
    ids: list[int]
    answer: str
    row: dict[str, Any] = field(default_factory=dict)  # the row's other columns (rewards)
    messages: list[dict] = field(default_factory=list)  # what `ids` renders (opsd re-renders)
    task: Any = None  # an environment's task (verifiers_env.py), which renders its own prompt


class PromptStream:
    """The order of a task's prompts: a fresh seeded shuffle per epoch, and the file order for
    evaluation. A task sets `rows` and `seed` and renders `_prompt(index)`."""

    rows: list
    seed: int

    def __init__(self) -> None:
        self._order: list[int] = []
        self._epoch = -1

    def _prompt(self, index: int) -> Prompt:
        raise NotImplementedError

    def score_group(self, prompt: Prompt, completions) -> list[float]:
        """The reward of each completion of one prompt."""
        raise NotImplementedError

    def exact(self, text: str, prompt: Prompt) -> bool | None:
        """Whether `text` is the prompt's reference answer; None when there is none."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.rows)

    def rollouts(self, prompts, n, sampler, *, temperature, max_tokens, seed):
        """Per prompt, (its `n` completions, their rewards); temperature 0: one greedy answer."""
        ids = [p.ids for p in prompts]
        if temperature == 0:
            groups = [[c] for c in sampler.greedy(ids, max_tokens=max_tokens)]
        else:
            groups = sampler.sample(
                ids, n, temperature=temperature, max_tokens=max_tokens, seed=seed
            )
        return [
            (group, self.score_group(p, group)) for p, group in zip(prompts, groups, strict=True)
        ]

    def prompts(self, step: int, count: int) -> list[Prompt]:
        """Prompts [step * count, (step + 1) * count) of the seeded stream of epochs."""
        return [self.at(position) for position in range(step * count, (step + 1) * count)]

    def at(self, position: int) -> Prompt:
        """Prompt `position` of the seeded stream of epochs (each epoch a fresh shuffle)."""
        epoch, index = divmod(position, len(self.rows))
        if epoch != self._epoch:
            self._order = list(range(len(self.rows)))
            random.Random(f"{self.seed}:{epoch}").shuffle(self._order)
            self._epoch = epoch
        return self._prompt(self._order[index])

    def count(self, count: int) -> int:
        """How many prompts `first(count)` gives."""
        return len(self.rows) if count < 0 else min(count, len(self.rows))

    def first(self, count: int) -> list[Prompt]:
        """The first `count` rows in file order (held-out evaluation); a negative count: all."""
        return [self._prompt(i) for i in range(self.count(count))]


def _agent_keys(agent, path: str) -> list[SetupError]:
    """The settings of an `env.agent` table a built-in taskset cannot honour: it plays as
    verifiers' plain chat harness (`harness.id = "null"`) in a subprocess, nothing else."""
    wrong = []
    for key, value in written(agent).items():
        if key == "harness" and agent.harness is not None:
            value = {"id": agent.harness.id, **value}
        if value != PLAIN_AGENT.get(key):
            wrong.append(
                SetupError(
                    f"{path}.{key}",
                    f"= {value!r}: a built-in taskset answers in one turn with no tools",
                    'drop it (the built-in tasksets play as harness.id = "null", runtime.type '
                    '= "subprocess")',
                )
            )
    return wrong


def taskset_table(env, path: str) -> dict[str, Any]:
    """The `taskset` table of a source's env (its config class, or the table as a dict) as
    written, refusing what a built-in taskset cannot honour: any other setting written."""
    from trainspec.generated.environment import EnvConfig

    errors = []
    env = EnvConfig.model_validate(env) if isinstance(env, dict) else env
    settings = written(env)
    taskset = settings.get("taskset", {})
    if not taskset.get("id"):
        raise SetupError(
            f"{path}.taskset.id",
            "no taskset is configured",
            'set env.taskset.id = "builtin:reverse-text" (or the id of a verifiers taskset), or '
            "give the source data and a reward",
        )
    if taskset["id"] not in BUILTIN_DATASETS:
        raise SetupError(
            f"{path}.taskset.id",
            f"= {taskset['id']!r} is not a built-in taskset",
            f"use one of: {', '.join(BUILTIN_DATASETS)}; any id without the builtin: prefix "
            "loads through the verifiers library",
        )
    for key, value in settings.items():
        if key == "taskset":
            continue
        if key == "agent":
            errors.extend(_agent_keys(env.agent, f"{path}.agent"))
            continue
        errors.append(
            SetupError(
                f"{path}.{key}",
                f"= {value!r} is a verifiers environment setting; a built-in taskset has none",
                "drop it",
            )
        )
    for key in taskset.keys() - {"id", "split", "reward"}:
        errors.append(
            SetupError(
                f"{path}.taskset.{key}",
                f"is not a setting of the built-in taskset {taskset['id']!r}",
                "drop it; its settings are split and reward",
            )
        )
    if errors:
        raise SetupErrors(errors)
    return taskset


class Task(PromptStream):
    def __init__(
        self,
        name: str,
        tokenizer,
        *,
        seed: int,
        split: str,
        reward: str = "lcs_ratio",
        path: str = "task",
        render=None,
    ) -> None:
        module = BUILTIN_DATASETS[name]
        if split not in module.SPLIT_SIZES:
            raise SetupError(
                f"{path}.split",
                f"{name!r} has no split {split!r}",
                f"use one of: {', '.join(module.SPLIT_SIZES)}",
            )
        if reward not in REWARDS:
            raise SetupError(
                f"{path}.reward",
                f"{reward!r} is not a reward of {name!r}",
                f"use one of: {', '.join(REWARDS)}",
            )
        super().__init__()
        self.rows = module.examples(split)
        self.tokenizer = tokenizer
        self.render = render or (lambda messages: template_prompt_ids(tokenizer, messages))
        self.seed = seed
        self.reward_fn = REWARDS[reward]

    @classmethod
    def from_env(cls, env, path: str, tokenizer, *, seed: int, role: str, render=None):
        """The built-in taskset a source's `env` table names (role "train" or "eval")."""
        taskset = taskset_table(env, path)
        return cls(
            taskset["id"],
            tokenizer,
            seed=seed,
            split=taskset.get("split", DEFAULT_SPLITS[role]),
            reward=taskset.get("reward", "lcs_ratio"),
            path=f"{path}.taskset",
            render=render,
        )

    def _prompt(self, index: int) -> Prompt:
        messages = self.rows[index]["messages"]
        return Prompt(
            self.render(messages[:-1]), messages[-1]["content"], messages=list(messages[:-1])
        )

    def exact(self, text: str, prompt: Prompt) -> bool | None:
        """Whether `text` is the reference answer (held-out exact match)."""
        return reverse_text_task.exact_match(text, prompt.answer)

    def reward(self, text: str, answer: str, finished: bool) -> float:
        return self.reward_fn(text, answer) if finished else 0.0

    def score_group(self, prompt: Prompt, completions) -> list[float]:
        return [self.reward(c.text, prompt.answer, c.finished) for c in completions]
