"""What the SFT run adds to its closing line: held-out accuracy on a built-in task."""

from __future__ import annotations

from ..chat.tasks import BUILTIN_DATASETS, evaluate_exact_match
from ..core.world import World

HELD_OUT = 200


def held_out_report(config, model, tokenizer, world: World) -> str | None:
    """Greedy exact match on the held-out split of a built-in task, on one process."""
    name = getattr(config.data, "name", None)
    task = BUILTIN_DATASETS.get(name) if name else None
    if task is None or world.world_size > 1:
        return None
    examples = task.examples("test")[:HELD_OUT]
    score = evaluate_exact_match(model.lm, tokenizer, examples, world.device)
    return f"held-out exact match {score:.1%} ({len(examples)} {name} test examples)"
