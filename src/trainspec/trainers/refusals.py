"""Refusals more than one command makes at start: `[model]` settings this build or device
cannot honour, a batch the processes cannot split, `[renderer]` settings nothing renders with.
Each command's own are in its package's refusals.py (sft/, rl/, orchestrator/, rl_run/).

    errors = model_refusals(config.model, device_type, processes)
    split = batch_split(config.data, "data", processes)    # (per rank, per pass) or SetupError
    paths = set_by_user(config.inference, InferenceConfig(), "inference")   # what it sets

Each refusal names the field, why, and what to do instead, and all of them come in one report,
so nothing in a config is silently ignored: a setting is either applied by the component built
from it or refused here.
"""

from __future__ import annotations

import importlib.util

from .chat.named_renderers import TEMPLATE_RENDERERS
from .errors import SetupError

INFLIGHT_DEFAULT = 5


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a submodule of a package that is not installed
        return False


# The package each FlashAttention kernel comes from (flash-attn, its Hopper build, flash-attn-4).
FLASH_PACKAGES = {
    "flash_attention_2": "flash_attn",
    "flash_attention_3": "flash_attn_interface",
    "flash_attention_4": "flash_attn.cute",
}


def model_refusals(model_cfg, device_type: str, processes: int = 1) -> list[SetupError]:
    """`[model]` settings this build or device cannot honour."""
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
    attn = model_cfg.attn
    package = FLASH_PACKAGES.get(attn)
    if package is not None and not (on_gpu and _has(package)):
        refuse(
            "attn",
            f'"{attn}" needs a CUDA GPU with the {package} package'
            f"{'' if on_gpu else f' (this device: {device_type})'}",
            'use attn = "auto" (the best implementation the family and device support) or "sdpa"',
        )
    if attn == "flex_attention" and not on_gpu:
        refuse(
            "attn",
            f'"flex_attention" has no backward pass on {device_type} (PyTorch runs it on GPUs)',
            'use attn = "auto" or "sdpa"',
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
    return errors


def _has_compiler() -> bool:
    import shutil

    return any(shutil.which(cc) for cc in ("g++", "c++", "clang++"))


def batch_split(data_cfg, path: str, processes: int) -> tuple[int, int] | SetupError:
    """(rows per process, rows per forward) of one step of `data_cfg` (at `path`): a process
    takes batch_size / processes rows, in forwards of micro_batch_size rows, or of its whole
    share when that is smaller (micro_batch_size is what fits in memory, not a count to fill).
    A batch that does not split so is the SetupError returned."""
    batch, micro = data_cfg.batch_size, data_cfg.micro_batch_size
    per_rank, left = divmod(batch, processes)
    per_pass = min(micro, per_rank)
    if not left and per_rank and not per_rank % per_pass:
        return per_rank, per_pass
    return SetupError(
        f"{path}.batch_size",
        f"= {batch} rows per step do not split into {processes} equal shares of whole "
        f"micro-batches of {micro} rows (or fewer, one per share)",
        f"make {path}.batch_size a multiple of the processes ({processes}) whose share is a "
        f"multiple of {path}.micro_batch_size, or smaller than it",
    )


def renderer_refusals(renderer, prefix: str = "", samples: str = "SFT") -> list[SetupError]:
    """What a `[renderer]` table asks that this build does not do: a "custom" class of the
    user's own, reasoning retention on the tokenizer's template, and "default"'s parsers and
    extra keys. `prefix` is the table's place ("orchestrator."), `samples` who renders."""
    errors: list[SetupError] = []
    if renderer.name == "custom":
        errors.append(
            SetupError(
                f"{prefix}renderer.name",
                '"custom" imports a renderer class of your own (renderer.import_path), which '
                "this build does not load",
                'use one of the named renderers, or renderer.name = "auto"',
            )
        )
    if renderer.thinking_retention is not None and renderer.name in TEMPLATE_RENDERERS:
        errors.append(
            SetupError(
                f"{prefix}renderer.thinking_retention",
                "the tokenizer's chat template renders messages as written; reasoning "
                "retention is a feature of the named renderers",
                'name a renderer (renderer.name = "prime-qwen3", ...) or drop '
                "renderer.thinking_retention",
            )
        )
    if renderer.name == "default":
        errors.extend(_template_renderer_settings(renderer, prefix, samples))
    return errors


def _template_renderer_settings(renderer, prefix: str, samples: str) -> list[SetupError]:
    """`renderer.name = "default"` renders with the tokenizer's chat template: its parsers (of
    sampled output) and extra keys (settings of a named renderer) have nothing to act on."""
    parses = {
        "SFT": "SFT renders the data with the tokenizer's chat template and samples nothing",
        "orchestrator": "the orchestrator scores the whole completion of a one-turn built-in "
        "taskset and parses nothing out of it",
    }[samples]
    errors = []
    for key in ("tool_parser", "reasoning_parser"):
        if getattr(renderer, key) is not None:
            errors.append(
                SetupError(
                    f"{prefix}renderer.{key}",
                    f"parses what a model samples; {parses}",
                    f"drop renderer.{key}",
                )
            )
    for key in renderer.model_extra or {}:
        errors.append(
            SetupError(
                f"{prefix}renderer.{key}",
                'is a setting of a named renderer; renderer.name = "default" renders with the '
                "tokenizer's chat template, which takes no settings",
                f"drop renderer.{key}, or name the renderer it belongs to "
                '(renderer.name = "qwen3", ...)',
            )
        )
    return errors


def set_by_user(table, baseline, prefix: str = "") -> list[str]:
    """The dotted paths (under `prefix`, sorted) of the settings in `table` that differ from
    `baseline`, the same table without the user's settings: its class's defaults, or, where
    config rules fill a table in, what they make of a config without it. A setting counts as set
    by what it holds, not by whether it was written, so a resolved config read back from JSON (a
    torchrun worker's, a SLURM job's: every key written) is judged like the file it came from.
    Every command's refusals ask this; each field is read by name (what the field-coverage proof
    records)."""
    fields = getattr(type(baseline), "model_fields", None)
    if fields is not None and table is not None:
        try:
            pairs = [(key, getattr(table, key), getattr(baseline, key)) for key in sorted(fields)]
        except AttributeError:  # another kind of table than the baseline's (a union's variant)
            return [prefix]
    elif isinstance(table, dict) and isinstance(baseline, dict):
        keys = sorted(table.keys() | baseline.keys())
        pairs = [(key, table.get(key), baseline.get(key)) for key in keys]
    else:
        return [] if table == baseline else [prefix]
    return [
        path
        for key, mine, theirs in pairs
        for path in set_by_user(mine, theirs, f"{prefix}.{key}" if prefix else key)
    ]
