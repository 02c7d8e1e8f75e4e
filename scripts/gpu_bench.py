"""Throughput of `sft` on one CUDA GPU: a random-initialised Qwen3 of ~0.6B parameters (Qwen3-0.6B's
shape) trained in bf16 on synthetic rows, each variant in its own process, side by side.

    python scripts/gpu_bench.py [--steps 30] [--warmup 5] [--seq-len 4096] [--rows 16]
                                [--micro-rows 4] [--variants default,optim_offload,flash]

Variants (each the SFT defaults, so activation checkpointing and compile on, plus):
    default        nothing else: FSDP2 on one process, bf16 compute, fp32 weights, and the AdamW
                   state in pinned host memory between steps (model.optim_cpu_offload's default)
    state_on_gpu   model.optim_cpu_offload = false: the state stays on the GPU
    fsdp_offload   model.fsdp_cpu_offload: the parameters themselves in host memory
    flash          model.attn = "flash_attention_2" (skipped, saying so, without flash-attn)
    eager          model.compile off, to see what compile is worth

Per variant it prints tok/s (the trainer's own step times after `warmup` steps), seconds per
step and MFU: model FLOPs per token (6 x the parameters the matmuls use, the LM head included,
plus the causal attention's 6 x layers x heads x head_dim x seq-len) times tok/s, over the chip's
dense bf16 peak (by device name; "n/a" where unknown). The model directory (config and the
built-in tokenizer, no weights) is written into a temporary work directory.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "src" / "trainspec" / "trainers" / "builtin" / "tiny-qwen3"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")

# Qwen3-0.6B's shape (tied embeddings), with the built-in tokenizer's ids inside its vocabulary.
SHAPE = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000.0,
}
# Dense bf16 peak FLOP/s from the vendors' data sheets (no sparsity).
PEAKS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10G": 125e12}
VARIANTS = {
    "default": [],
    "state_on_gpu": ["--model.optim-cpu-offload", "false"],
    "fsdp_offload": ["--model.fsdp-cpu-offload", "true", "--model.optim-cpu-offload", "false"],
    "flash": ["--model.attn", "flash_attention_2"],
    "eager": ["--model.compile", "None"],
}


def write_model(directory: Path) -> Path:
    config = json.loads((BUILTIN / "config.json").read_text()) | SHAPE | {"dtype": "bfloat16"}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    for name in TOKENIZER_FILES:
        shutil.copy(BUILTIN / name, directory / name)
    return directory


def flops_per_token(seq_len: int) -> float:
    s = SHAPE
    hidden, head = s["hidden_size"], s["head_dim"]
    heads, kv = s["num_attention_heads"], s["num_key_value_heads"]
    attention = hidden * head * (2 * heads + 2 * kv)  # q, o and k, v projections
    mlp = 3 * hidden * s["intermediate_size"]
    matmul_params = s["num_hidden_layers"] * (attention + mlp) + s["vocab_size"] * hidden
    causal_attention = 6 * s["num_hidden_layers"] * heads * head * seq_len
    return 6 * matmul_params + causal_attention


def peak_flops() -> tuple[str, float | None]:
    import torch

    name = torch.cuda.get_device_name()
    return name, next((peak for key, peak in PEAKS.items() if key in name), None)


def run_variant(name: str, args, model: Path, work: Path) -> dict | None:
    if name == "flash" and importlib.util.find_spec("flash_attn") is None:
        print(f"{name:14s} skipped: flash-attn is not installed here", flush=True)
        return None
    out = work / name
    command = [
        sys.executable, "-m", "trainspec.trainers.sft.main",
        "--model.name", str(model), "--model.debug.random-init", "true",
        "--model.seq-len", str(args.seq_len),
        "--data.type", "fake", "--data.input-ids", "random", "--data.seq-len", str(args.seq_len),
        "--data.batch-size", str(args.rows), "--data.micro-batch-size", str(args.micro_rows),
        "--max-steps", str(args.steps), "--no-ckpt", "--output-dir", str(out), "--clean",
        *VARIANTS[name],
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"{name:14s} failed ({done.returncode}):\n{done.stderr[-4000:]}", flush=True)
        return None
    records = [json.loads(line) for path in out.glob("*/metrics.jsonl") for line in path.open()]
    timed = [r for r in records if "step_time_s" in r][args.warmup :]
    step_s = statistics.median(r["step_time_s"] for r in timed)
    tok_s = statistics.median(r["tokens_per_s"] for r in timed)
    return {"tok_s": tok_s, "step_s": step_s, "loss": timed[-1]["loss"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--micro-rows", type=int, default=4)
    parser.add_argument("--variants", default="default,state_on_gpu,flash")
    args = parser.parse_args()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    device, peak = peak_flops()
    per_token = flops_per_token(args.seq_len)
    print(f"{device}; Qwen3 ~0.6B, {args.rows} x {args.seq_len} tokens a step", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        model = write_model(Path(tmp) / "qwen3-0.6b")
        for name in names:
            result = run_variant(name, args, model, Path(tmp))
            if result is None:
                continue
            mfu = per_token * result["tok_s"] / peak if peak else None
            results[name] = result | {"mfu": mfu}
            shown = f"{mfu:.1%}" if mfu is not None else "n/a"
            print(
                f"{name:14s} {result['tok_s']:>10,.0f} tok/s  {result['step_s']:.3f} s/step  "
                f"MFU {shown}  loss {result['loss']:.3f}",
                flush=True,
            )
    if "default" in results:
        for name, result in results.items():
            print(f"{name} / default (tok/s): {result['tok_s'] / results['default']['tok_s']:.3f}")
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
