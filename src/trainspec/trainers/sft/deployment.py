"""What `[deployment]` asks of an SFT run: its nodes and processes, and what it leaves for an
inference server.

    nodes, per_node = processes(config.deployment)
    note = reserved_for_inference(config)     # "" or what sft says at start
"""

from __future__ import annotations


def processes(deployment) -> tuple[int, int]:
    """(nodes, processes per node) the deployment asks for."""
    if deployment.type == "multi_node":
        return deployment.num_train_nodes, deployment.gpus_per_node
    return 1, deployment.num_train_gpus


def reserved_for_inference(config) -> str:
    """What a deployment that sets num_infer_gpus (nodes) leaves free for an inference server
    when sft starts none (no [inference]); nothing is said of the default value."""
    from trainspec.generated.deployment import (
        MultiNodeDeploymentConfig,
        SingleNodeDeploymentConfig,
    )

    deployment = config.deployment
    if config.inference is not None:
        return ""
    if deployment.type == "multi_node":
        count, unit, field = deployment.num_infer_nodes, "node", "num_infer_nodes"
        default = MultiNodeDeploymentConfig.model_fields[field].default
    else:
        count, unit, field = deployment.num_infer_gpus, "GPU", "num_infer_gpus"
        default = SingleNodeDeploymentConfig.model_fields[field].default
    if not count or count == default:
        return ""  # a config read back from JSON (a SLURM job's) has every field written
    return (
        f"deployment reserves {count} {unit}(s) for an inference server "
        f"(num_infer_{unit.lower()}s); sft trains on the others and starts no server (it "
        "starts one for the online evals with [eval] and [inference])"
    )
