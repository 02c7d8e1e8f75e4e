"""The vLLM server `rl` starts for `[inference]`: its plan, built from the combined config
(serving/vllm_plan.py builds any server's), and the config pointed at it.

    plan = vllm_plan(config, run_dir, on_gpu=True)  # SetupErrors for what it cannot start
    config = served(config, plan)                   # the orchestrator samples from it
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SetupError
from ..serving.gpus import engine_gpus
from ..serving.vllm_plan import RELOAD_PATH, InferencePlan, server_plan


def vllm_plan(config, run_dir: Path, *, on_gpu: bool) -> InferencePlan:
    """The command, environment and address of the server `rl`'s `[inference]` asks for; it
    receives the weights the way the trainer sends them (weight_broadcast.type)."""
    inference, sent = config.inference, config.trainer.weight_broadcast.type
    if inference.weight_broadcast.type != sent:
        if "type" in inference.weight_broadcast.model_fields_set:
            raise SetupError(
                "inference.weight_broadcast.type",
                f"= {inference.weight_broadcast.type!r}, but the trainer sends {sent!r}",
                "drop inference.weight_broadcast (it follows weight_broadcast.type)",
            )
        received = inference.weight_broadcast.model_copy(update={"type": sent})
        inference = inference.model_copy(update={"weight_broadcast": received})
    return server_plan(
        inference,
        model=config.trainer.model.name,
        served_name=config.orchestrator.model.name,
        infer_gpus=engine_gpus(config.deployment),
        run_dir=run_dir,
        command="rl",
        seq_len=config.orchestrator.seq_len,
        on_gpu=on_gpu,
    )


def served(config, plan: InferencePlan):
    """The config with the orchestrator sampling from the server `rl` starts (and, over NCCL,
    both sides sized for the engine's tensor x data parallel workers)."""
    sampler = config.orchestrator.sampler
    if sampler.type != "local":
        raise SetupError(
            "orchestrator.sampler.type",
            f"= {sampler.type!r}: with [inference] rl starts the server the orchestrator "
            "samples from",
            "drop [orchestrator.sampler], or drop [inference] to use your own server",
        )
    from trainspec.generated.orchestrator import OpenAISamplerConfig

    openai = OpenAISamplerConfig(
        type="openai", base_url=plan.base_url, model=plan.served_name, reload_path=RELOAD_PATH
    )
    update: dict = {"sampler": openai}
    trainer = config.trainer
    if trainer.weight_broadcast.type == "nccl":  # each worker of the engine receives the weights
        vllm = config.inference.vllm
        size = {"inference_world_size": vllm.tensor_parallel_size * vllm.data_parallel_size}
        update["weight_broadcast"] = config.orchestrator.weight_broadcast.model_copy(update=size)
        trainer = trainer.model_copy(
            update={"weight_broadcast": trainer.weight_broadcast.model_copy(update=size)}
        )
    orchestrator = config.orchestrator.model_copy(update=update)
    return config.model_copy(update={"orchestrator": orchestrator, "trainer": trainer})
