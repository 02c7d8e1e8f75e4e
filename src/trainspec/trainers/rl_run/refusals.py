"""What `rl` refuses at start, and what it says it does instead, for the top-level tables of
the combined config that this build does not run: a multi-node deployment without [slurm] (its
nodes are a SLURM allocation's), the Prime monitor, and `[inference]` settings where the run has
no GPU.

    check_launch(config)                 # SetupErrors naming each field, or nothing
    check_launch(config, gpus=False, where="the nodes of partition cpu")   # a job's nodes
    say_inference(config)                # a bare [inference] without a GPU: sampled in process

With a GPU, `[inference]` starts a vLLM server (serving/). Without one, a bare
`[inference]` (as the reference's configs write it) runs with the orchestrator's in-process
sampler, and `rl` says so; any setting inside it tunes a vLLM server that cannot start there,
so it is refused naming the setting. With [slurm], `rl` submits the run (trainers/slurm/) and
asks these questions of the job's nodes instead of this machine.
"""

from __future__ import annotations

import sys

from ..errors import SetupError, raise_all
from ..refusals import set_by_user


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def check_launch(config, gpus: bool | None = None, where: str = "this machine") -> None:
    """`gpus`: whether the machine the run starts on has a GPU (None: ask torch about this
    one); `where` names that machine in the message."""
    errors: list[SetupError] = []
    if config.deployment.type == "multi_node" and config.slurm is None:
        errors.append(
            SetupError(
                "deployment.type",
                '= "multi_node" runs on the nodes of a SLURM allocation, and there is no '
                "[slurm] to submit it with",
                "add [slurm] (rl then submits the run with sbatch), or use deployment.type = "
                '"single_node"',
            )
        )
    if config.monitors.prime is not None:
        errors.append(
            SetupError(
                "monitors.prime",
                "is set: this build does not upload to the Prime Intellect platform",
                "drop [monitors.prime]; [monitors.wandb] and the metrics files work",
            )
        )
    written = []
    if config.inference is not None:
        from trainspec.generated.inference import InferenceConfig

        written = set_by_user(config.inference, InferenceConfig(), "inference")
    if written and not (_has_gpu() if gpus is None else gpus):
        errors.append(
            SetupError(
                "inference",
                f"sets {', '.join(written)}, which tune the vLLM server [inference] starts; "
                f"it needs a GPU and {where} has none, so the orchestrator samples in "
                "process",
                "drop those settings (a bare [inference] runs on CPU), or run on a GPU machine",
            )
        )
    raise_all(errors)


def serves_inference(config) -> bool:
    """Whether `rl` starts the vLLM server of [inference] (on a GPU machine)."""
    return config.inference is not None and _has_gpu()


def say_inference(config) -> None:
    if config.inference is None or _has_gpu():
        return
    gpus = config.deployment.num_infer_gpus
    sys.stderr.write(
        f"rl: [inference] asks for a vLLM server on {gpus} GPU(s); this machine has no GPU, so "
        "the orchestrator samples in process instead\n"
    )
