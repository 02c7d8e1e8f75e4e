"""The orchestrator's task, built from `[task]`: prompts in a seeded order and the reward.

    task = Task(config.task, tokenizer, seed=config.seed)      # split: config.task.split
    prompts = task.prompts(step, count)      # the same prompts for the same (seed, step)
    reward = task.reward(completion.text, prompt.answer, completion.finished)
    held_out = Task(config.task, tokenizer, seed=config.seed, split=config.eval.split).first(n)

The reward is verifiable: it compares the completion with the known answer. `lcs_ratio` is the
longest common subsequence over the longer of the two strings, so a short fragment of the
answer scores low; `exact_match` is 1 or 0. A completion cut off by max_tokens scores 0, so
rambling past the answer never pays.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..errors import SetupError
from ..tasks import BUILTIN_DATASETS, _prompt_ids
from ..tasks import reverse_text as reverse_text_task

REWARDS = {
    "lcs_ratio": reverse_text_task.lcs_ratio,
    "exact_match": lambda text, answer: float(reverse_text_task.exact_match(text, answer)),
}


@dataclass
class Prompt:
    ids: list[int]
    answer: str


class Task:
    def __init__(self, task_cfg, tokenizer, *, seed: int, split: str | None = None) -> None:
        module = BUILTIN_DATASETS.get(task_cfg.name)
        if module is None:  # the schema allows only built-in names; a config built in code may not
            raise SetupError(
                "task.name",
                f"{task_cfg.name!r} is not a built-in task",
                f"use one of: {', '.join(BUILTIN_DATASETS)}",
            )
        split = split or task_cfg.split
        if split not in module.SPLIT_SIZES:
            raise SetupError(
                "task.split",
                f"{task_cfg.name!r} has no split {split!r}",
                f"use one of: {', '.join(module.SPLIT_SIZES)}",
            )
        self.rows = module.examples(split)
        self.tokenizer = tokenizer
        self.seed = seed
        self.score = REWARDS[task_cfg.reward]
        self._order: list[int] = []
        self._epoch = -1

    def _prompt(self, index: int) -> Prompt:
        messages = self.rows[index]["messages"]
        return Prompt(_prompt_ids(self.tokenizer, messages[:-1]), messages[-1]["content"])

    def prompts(self, step: int, count: int) -> list[Prompt]:
        """Prompts [step * count, (step + 1) * count) of the seeded stream of epochs."""
        out = []
        for position in range(step * count, (step + 1) * count):
            epoch, index = divmod(position, len(self.rows))
            if epoch != self._epoch:
                self._order = list(range(len(self.rows)))
                random.Random(f"{self.seed}:{epoch}").shuffle(self._order)
                self._epoch = epoch
            out.append(self._prompt(self._order[index]))
        return out

    def first(self, count: int) -> list[Prompt]:
        """The first `count` rows in file order (held-out evaluation)."""
        return [self._prompt(i) for i in range(min(count, len(self.rows)))]

    @staticmethod
    def exact(text: str, answer: str) -> bool:
        return reverse_text_task.exact_match(text, answer)

    def reward(self, text: str, answer: str, finished: bool) -> float:
        return self.score(text, answer) if finished else 0.0
