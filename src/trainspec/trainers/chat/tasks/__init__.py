"""Built-in chat tasks that ship with trainspec, so a run needs no download.

    dataset = load_builtin_dataset("builtin:reverse-text", "train")   # a datasets.Dataset
    accuracy = evaluate_exact_match(model, tokenizer, examples("test", 64), device)

A task is a module with `SPLIT_SIZES` and `examples(split, n)`; rows have a `messages` column
(system, user, assistant). `evaluate_exact_match` greedily generates an answer to every prompt
and counts the answers equal to the reference assistant message.
"""

from __future__ import annotations

from types import ModuleType

import torch

from ...errors import SetupError
from ..prompts import template_prompt_ids, template_stop_id
from . import reverse_text

BUILTIN_DATASETS: dict[str, ModuleType] = {"builtin:reverse-text": reverse_text}


def load_builtin_dataset(name: str, split: str, *, field: str = "data.name"):
    """The rows of one split of a built-in task as a `datasets.Dataset`.

    `field` is the config path named by the error for an unknown task or split.
    """
    import datasets

    task = BUILTIN_DATASETS.get(name)
    if task is None:
        raise SetupError(
            field,
            f"{name!r} is not a built-in dataset",
            f"use one of: {', '.join(BUILTIN_DATASETS)}; or a local file, or a hub id",
        )
    if split not in task.SPLIT_SIZES:
        raise SetupError(
            field,
            f"{name!r} has no split {split!r}",
            f"use one of its splits: {', '.join(task.SPLIT_SIZES)}",
        )
    return datasets.Dataset.from_list(task.examples(split))


@torch.no_grad()
def evaluate_exact_match(
    model, tokenizer, examples: list[dict], device, max_new_tokens: int = 64, batch_size: int = 64
) -> float:
    """Fraction of `examples` whose greedy answer equals the last (assistant) message.

    Prompts are every message but the last, left-padded into batches; an answer is decoded up
    to the end-of-turn token and compared with surrounding whitespace removed.
    """
    if not examples:
        return 0.0
    stop, pad = template_stop_id(tokenizer), tokenizer.pad_token_id
    was_training = model.training
    model.eval()
    correct = 0
    try:
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            prompts = [template_prompt_ids(tokenizer, ex["messages"][:-1]) for ex in chunk]
            width = max(len(p) for p in prompts)
            input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
            attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
            for row, prompt in enumerate(prompts):
                input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
                attention_mask[row, width - len(prompt) :] = 1
            output = model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                use_cache=True,
                eos_token_id=stop,
                pad_token_id=pad,
            )
            for row, example in enumerate(chunk):
                answer = output[row, width:].tolist()
                if stop in answer:
                    answer = answer[: answer.index(stop)]
                text = tokenizer.decode(answer, skip_special_tokens=True)
                correct += reverse_text.exact_match(text, example["messages"][-1]["content"])
    finally:
        model.train(was_training)
    return correct / len(examples)
