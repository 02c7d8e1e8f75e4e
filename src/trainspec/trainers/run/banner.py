"""The few lines a run prints before its first step: what trains, on what, for how long, where.

print(start_banner("sft", model="builtin:tiny-qwen3", parameters=count_parameters(model),
                   data="builtin:reverse-text: 9,000 examples ...", steps="1000",
                   device="cpu", processes=1, run_dir=run_dir))

sft: builtin:tiny-qwen3, 1.23M parameters, on cpu (1 process)
  data   builtin:reverse-text: 9,000 examples in 1,125 rows of 512 tokens (71 steps a pass)
  steps  1000
  run    outputs/reverse-text--tiny-qwen3--0b45cafa
"""

from __future__ import annotations

from pathlib import Path

from torch import nn


def count(number: float) -> str:
    """1234 -> "1,234"; 1.23e6 -> "1.23M"; 7.6e9 -> "7.6B" (three significant figures)."""
    for size, unit in ((1e9, "B"), (1e6, "M")):
        if number >= size:
            return f"{number / size:.3g}{unit}"
    return f"{number:,.0f}"


def count_parameters(model: nn.Module) -> str:
    """The model's parameters ("494M parameters"), and the trainable ones when fewer (LoRA).
    A sharded parameter (FSDP's DTensor) counts its whole shape, so every rank says the same."""
    total = trainable = 0
    for param in model.parameters():
        total += param.numel()
        trainable += param.numel() if param.requires_grad else 0
    text = f"{count(total)} parameters"
    return text if trainable == total else f"{text}, {count(trainable)} trainable"


def start_banner(
    command: str,
    *,
    model: str,
    parameters: str,
    data: str | None,
    steps: str,
    device: str,
    processes: int,
    run_dir: Path,
) -> str:
    plural = "es" if processes != 1 else ""
    lines = [f"{command}: {model}, {parameters}, on {device} ({processes} process{plural})"]
    if data:
        lines.append(f"  data   {data}")
    lines.append(f"  steps  {steps}")
    lines.append(f"  run    {run_dir}")
    return "\n".join(lines)
