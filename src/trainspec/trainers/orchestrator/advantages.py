"""Group-relative advantages: each completion against the others sampled for the same prompt.

    advantages([[1.0, 0.0, 0.5, 0.5]]) == [[0.5, -0.5, 0.0, 0.0]]

The advantage is the reward minus the mean reward of its group (no division by the group's
standard deviation, which would inflate tiny differences in groups that nearly agree). A group
whose completions all score the same gets advantage 0 everywhere: it teaches nothing.
"""

from __future__ import annotations


def group_advantages(rewards: list[list[float]]) -> list[list[float]]:
    out = []
    for group in rewards:
        mean = sum(group) / len(group)
        out.append([reward - mean for reward in group])
    return out
