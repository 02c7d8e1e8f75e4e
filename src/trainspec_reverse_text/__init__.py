"""trainspec's reverse-text task as a verifiers taskset, `id = "trainspec-reverse-text"`.

The rows are the built-in task's (trainspec.trainers.chat.tasks.reverse_text: seeded, shipped with
trainspec, nothing downloaded). Each episode shows `turns` strings, one per user turn; the
assistant answers each with the string backwards. The reward is the mean over the turns of the
LCS ratio of the reply and the reversed string, as the built-in task scores one turn; a turn the
model never finished (cut by the token cap) scores 0.

    [[orchestrator.train.source]]
    env.taskset = { id = "trainspec-reverse-text", split = "train", turns = 2 }
    env.agent = { harness.id = "null", runtime.type = "subprocess" }

A scripted user (`ReverseTextEnv.run`) speaks the turns, so one turn and several run the same
way; verifiers' `null` harness plays the assistant as a plain chat loop.
"""

from __future__ import annotations

from typing import Literal

import verifiers.v1 as vf
from pydantic import Field

from trainspec.trainers.chat.tasks import reverse_text


class ReverseTextConfig(vf.TasksetConfig):
    split: Literal["train", "test"] = "train"
    """Which of the built-in splits the strings come from (20,000 train, 500 test)."""
    turns: int = Field(1, ge=1)
    """Strings per episode, one per user turn."""


class ReverseTextData(vf.TaskData):
    texts: list[str]
    """The strings the user shows, in order; the answers are their reverses."""


class ReverseTextTask(vf.Task[ReverseTextData]):
    @vf.reward(weight=1.0)
    async def lcs_ratio(self, trace: vf.Trace) -> float:
        replies = [message.content or "" for message in trace.assistant_messages]
        scores = [
            reverse_text.lcs_ratio(reply, text[::-1])
            for reply, text in zip(replies, self.data.texts, strict=False)
        ]
        if trace.is_truncated and scores:
            scores[-1] = 0.0  # the last reply was cut off: rambling past the answer never pays
        return sum(scores) / len(self.data.texts)


class ReverseTextEnv(vf.SingleAgentEnv):
    """The user shows the episode's strings one turn at a time."""

    async def run(self, task, agents) -> None:
        async with agents.agent.interaction(task) as interaction:
            for text in task.data.texts:
                if (await interaction.turn(text)).terminated:
                    break


class ReverseTextTaskset(vf.Taskset[ReverseTextTask, ReverseTextConfig]):
    def load(self) -> list[ReverseTextTask]:
        rows = [row["messages"][1]["content"] for row in reverse_text.examples(self.config.split)]
        turns = self.config.turns
        return [
            ReverseTextTask(
                ReverseTextData(
                    system_prompt=reverse_text.SYSTEM_PROMPT, texts=rows[start : start + turns]
                ),
                self.config.task,
            )
            for start in range(0, len(rows) - turns + 1, turns)
        ]


__all__ = ["ReverseTextEnv", "ReverseTextTaskset"]
