"""A source of your own data and reward, built from a source's `data` and `reward` tables (TRL's
dataset + `reward_funcs`, no package to write):

    [[orchestrator.train.source]]
    name = "arith"
    data = { name = "data/arith.jsonl" }      # .jsonl/.json/.parquet, save_to_disk dir, hub id
    reward = ["math_answer", "my_rewards.py:short"]
    reward_weights = [1.0, 0.2]

    task = DataTask.from_source(source, "orchestrator.train.source[0]", tokenizer, seed=0)
    rewards = task.score_group(prompt, completions)   # one float per completion

A row's prompt is its `data.prompt` column ("prompt"): a string (the user's message) or a list
of chat messages, after the optional `data.system_prompt`; a row with a `messages` column and
no prompt column is a conversation whose last assistant message, if any, is the `answer`. Every
other column goes to each reward as a keyword (`fn(completion, **row)`, see chat/rewards.py), sync
or async. A completion cut off by max_completion_tokens scores 0, as the built-in tasks do.
Rows come from the same loader as SFT data (chat/row_sources.py), so file and split errors read the
same.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ...chat.prompts import template_prompt_ids
from ...chat.rewards import Rewards
from ...chat.row_sources import load_source
from ...errors import SetupError
from .task import Prompt, PromptStream


class DataTask(PromptStream):
    def __init__(self, rows: list[dict], rewards: Rewards, render, prompt_column: str, path: str):
        self.rows = rows
        self.rewards = rewards
        self.render = render
        self.prompt_column = prompt_column
        self.path = path
        super().__init__()

    @classmethod
    def from_source(cls, source, path: str, tokenizer, *, seed: int, render=None) -> DataTask:
        data = source.data
        rows, _ = load_source(data.name, data.subset, data.split, f"{path}.data", chats=False)
        columns = set(rows.column_names)
        if data.prompt not in columns and "messages" not in columns:
            raise SetupError(
                f"{path}.data.prompt",
                f"= {data.prompt!r} is not a column of {data.name!r} (its columns: "
                f"{', '.join(sorted(columns))}), and it has no messages column",
                "name the column that holds the prompt (a string or chat messages)",
            )
        rewards = Rewards.resolve(  # a RewardError is a SetupError naming reward[i]
            list(source.reward),
            list(source.reward_weights) if source.reward_weights is not None else None,
            where=f"{path}.reward",
            root=Path.cwd(),
        )
        system = data.system_prompt
        base = render or (lambda messages: template_prompt_ids(tokenizer, messages))
        column = data.prompt if data.prompt in columns else "messages"

        def render_row(row: dict) -> tuple[list[int], dict[str, Any], list[dict]]:
            prompt = row[column]
            rest = {k: v for k, v in row.items() if k != column}
            messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
            if column == "messages" and messages and messages[-1].get("role") == "assistant":
                rest.setdefault("answer", messages[-1].get("content", ""))
                messages = messages[:-1]
            if system is not None:
                messages = [{"role": "system", "content": system}, *messages]
            return base(list(messages)), rest, list(messages)

        task = cls(rows.to_list(), rewards, render_row, column, path)
        task.seed = seed
        return task

    def _prompt(self, index: int) -> Prompt:
        ids, row, messages = self.render(self.rows[index])
        return Prompt(ids, str(row.get("answer", "")), row, messages)

    def score_group(self, prompt: Prompt, completions) -> list[float]:
        """The weighted reward of each completion (0 for one cut off), all scored together."""

        async def scores() -> list[float]:
            done = [c for c in completions if c.finished]
            totals = await asyncio.gather(*(self.rewards.score(c.text, prompt.row) for c in done))
            by_id = {id(c): total for c, (total, _) in zip(done, totals, strict=True)}
            return [by_id.get(id(c), 0.0) for c in completions]

        return asyncio.run(scores())  # a failing reward: RewardError, naming it

    def exact(self, text: str, prompt: Prompt) -> bool | None:
        return None  # your reward is the measure; there is no reference answer to match
