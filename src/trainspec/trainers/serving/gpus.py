"""The GPU split of a node that runs the vLLM server of `[inference]` beside a trainer: the
engine takes the first GPUs, the trainer the ones after them.

    infer = engine_gpus(config.deployment)                          # the engine's GPU count
    devices = trainer_gpus(config.deployment, visible_gpus(), "rl")  # "2,3", or None: shared

`visible_gpus` imports torch when called, so importing this module (`rl --dry-run`) does not.
"""

from __future__ import annotations

import sys


def has_gpu() -> bool:
    """Whether torch sees a CUDA device here (torch imported only when asked)."""
    import torch

    return torch.cuda.is_available()


def visible_gpus() -> int:
    import torch

    return torch.cuda.device_count()


def trainer_gpus(deployment, visible: int, command: str) -> str | None:
    """CUDA_VISIBLE_DEVICES of the trainer beside the server on a node's first
    `num_infer_gpus` GPUs: the `num_train_gpus` after them, or None when the machine has too
    few (said on stderr): the trainer then shares the server's first GPUs."""
    first, count = deployment.num_infer_gpus, deployment.num_train_gpus
    if first + count > visible:
        sys.stderr.write(
            f"{command}: {visible} GPU(s) for {first} inference + {count} trainer GPU(s): the "
            "trainer shares GPU(s) with the server (keep inference.vllm.gpu_memory_utilization "
            "low)\n"
        )
        sys.stderr.flush()
        return None
    return ",".join(map(str, range(first, first + count)))


def engine_gpus(deployment) -> int:
    """The GPUs of the engine: num_infer_gpus of one node, or every GPU of an inference node."""
    if deployment.type == "multi_node":
        return deployment.gpus_per_node
    return deployment.num_infer_gpus
