"""Model settings this build or device cannot honour, refused before anything loads.

Every refusal names the field and why, so nothing in `[model]` is silently ignored: a setting
is either applied by `model.py` / `parallel.py` or refused here.
"""

from __future__ import annotations

import importlib.util

from .errors import SetupError, raise_all


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


INFLIGHT_DEFAULT = 5


def check_model_support(model_cfg, device_type: str, processes: int = 1) -> None:
    errors: list[SetupError] = []

    def refuse(path: str, problem: str, fix: str) -> None:
        errors.append(SetupError(f"model.{path}", problem, fix))

    on_gpu = device_type == "cuda"
    if model_cfg.impl == "custom":
        refuse("impl", "this build has no custom model implementation", 'use impl = "hf" or "auto"')
    if model_cfg.conversion_dir is not None:
        refuse(
            "conversion_dir",
            "weights are converted only for the custom implementation, which this build lacks",
            "drop model.conversion_dir",
        )
    if model_cfg.attn != "auto" and not (on_gpu and _has("flash_attn")):
        refuse(
            "attn",
            f'"{model_cfg.attn}" needs a CUDA GPU with the flash-attn package'
            f"{'' if on_gpu else f' (this device: {device_type})'}",
            'use attn = "auto" (PyTorch SDPA)',
        )
    if model_cfg.vlm is not None:
        refuse("vlm", "vision-language training is not in this build", "drop [model.vlm]")
    if model_cfg.full_offload is not None:
        refuse(
            "full_offload",
            "the CPU optimizer overlapped with backward needs CUDA and native kernels "
            "this build does not ship",
            "drop model.full_offload (or set it to false)",
        )
    if model_cfg.quantization is not None:
        refuse(
            "quantization",
            f'"{model_cfg.quantization.type}" training needs Hopper or newer GPUs and '
            "FP8 kernels this build does not ship",
            "drop [model.quantization]",
        )
    if model_cfg.index_cache is not None:
        refuse(
            "index_cache",
            "sparse-attention index caching exists only in the custom implementation",
            "drop [model.index_cache]",
        )
    if model_cfg.cp > 1:
        refuse(
            "cp",
            f"context parallelism ({model_cfg.cp_style}) is not in this build",
            "use cp = 1 and a shorter seq_len, or more data parallelism",
        )
    if model_cfg.ep != "auto" and model_cfg.ep > 1:
        refuse("ep", "expert parallelism is not in this build", 'use ep = "auto" or 1')
    if model_cfg.ep_comm_backend == "deepep":
        chunk = model_cfg.deepep_token_chunk_size
        refuse(
            "ep_comm_backend",
            f"DeepEP ({model_cfg.deepep_num_sms} SMs, chunks of {chunk or 'all'} tokens) "
            "needs expert parallelism on NVIDIA GPUs, which this build lacks",
            'use ep_comm_backend = "torch"',
        )
    if model_cfg.moe_fused_kernel:
        refuse(
            "moe_fused_kernel",
            "the fused MoE kernel needs a Blackwell GPU and the custom implementation",
            "set moe_fused_kernel = false",
        )
    if model_cfg.debug.force_balanced_routing:
        refuse(
            "debug.force_balanced_routing",
            "balanced routing is a hook of the custom MoE implementation",
            "set force_balanced_routing = false",
        )
    offload = model_cfg.ac_offloading
    if offload is not None and offload.max_inflight_activations != INFLIGHT_DEFAULT:
        refuse(
            "ac_offloading.max_inflight_activations",
            "activations are copied to host memory as autograd saves them (torch's "
            "save_on_cpu); this build has no offload pipeline whose depth could be set",
            f"drop it (the default is {INFLIGHT_DEFAULT})",
        )
    if model_cfg.dp_replicate > 1 and processes == 1:
        refuse(
            "dp_replicate",
            f"= {model_cfg.dp_replicate} replicas need at least that many processes; this run "
            "has one",
            "set deployment.num_train_gpus to a multiple of dp_replicate, or dp_replicate = 1",
        )
    if model_cfg.compile is not None and device_type == "cpu" and not _has_compiler():
        refuse(
            "compile",
            "torch.compile on the CPU needs a C++ compiler, and none is on PATH",
            'install gcc, or set compile = "None"',
        )
    raise_all(errors)


def _has_compiler() -> bool:
    import shutil

    return any(shutil.which(cc) for cc in ("g++", "c++", "clang++"))
