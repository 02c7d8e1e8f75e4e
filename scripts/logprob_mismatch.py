"""How far the sampler's log-probabilities are from the trainer's on the same tokens, for the
in-process sampler and for vLLM (its CPU build without a GPU), side by side in one run.

    .venv/bin/python scripts/logprob_mismatch.py [--weights DIR] [--prompts 16] [--n 8]

Both samplers draw `--n` completions of `--prompts` reverse-text prompts at temperature 1 from
the same weights (the RL demo's SFT checkpoint, outputs/rl-demo-sft/checkpoints/latest/weights,
made by `sft configs/rl/demo-sft.toml` when missing; or `--weights`), each reporting the
log-probability of every token it sampled. The trainer's log-probability of the same tokens
comes from the module the RL trainer trains (core/model.build_model, core/lm.token_logprobs, in
float32 on CPU, as `rl` runs here). Per sampler: the tokens compared, mean and max
|trainer - sampler| log-prob, and the importance ratio exp(trainer - sampler) the RL loss
weighs each token by: its mean, standard deviation and largest distance from 1.
"""

from __future__ import annotations

import argparse
import math
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_WEIGHTS = ROOT / "outputs" / "rl-demo-sft" / "checkpoints" / "latest" / "weights"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prompts_of(tokenizer, count: int) -> tuple[list[list[int]], int]:
    from trainspec.trainers.chat.prompts import prompt_renderer
    from trainspec.trainers.chat.tasks import reverse_text

    render, stop_id = prompt_renderer(None, tokenizer)
    rows = reverse_text.examples("test", count)  # system prompt, user turn (and the answer)
    return [render(row["messages"][:-1]) for row in rows], stop_id


def trainer_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    import torch

    from trainspec.trainers.core.lm import IGNORE_INDEX, token_logprobs

    ids = prompt + completion
    input_ids = torch.tensor([ids[:-1]])
    targets = torch.full_like(input_ids, IGNORE_INDEX)
    targets[0, len(prompt) - 1 :] = torch.tensor(completion)
    positions = torch.arange(len(ids) - 1)[None]
    with torch.no_grad():
        values = token_logprobs(model, input_ids, positions, targets, 1.0)
    return values[len(prompt) - 1 :].tolist()


def compare(model, prompts, groups) -> dict[str, float]:
    diffs, ratios = [], []
    for prompt, group in zip(prompts, groups, strict=True):
        for completion in group:
            if not completion.token_ids:
                continue
            ours = trainer_logprobs(model, prompt, completion.token_ids)
            for trainer, sampler in zip(ours, completion.logprobs, strict=True):
                diffs.append(abs(trainer - sampler))
                ratios.append(math.exp(trainer - sampler))
    mean_ratio = sum(ratios) / len(ratios)
    spread = math.sqrt(sum((r - mean_ratio) ** 2 for r in ratios) / len(ratios))
    return {
        "tokens": len(diffs),
        "mean |d|": sum(diffs) / len(diffs),
        "max |d|": max(diffs),
        "ratio mean": mean_ratio,
        "ratio std": spread,
        "max |ratio-1|": max(abs(r - 1) for r in ratios),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, default=DEMO_WEIGHTS)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    if args.weights == DEMO_WEIGHTS and not DEMO_WEIGHTS.exists():
        subprocess.run([str(Path(sys.executable).parent / "sft"), "configs/rl/demo-sft.toml"],
                       cwd=ROOT, check=True)  # fmt: skip
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainspec.config import load
    from trainspec.generated.inference import InferenceConfig
    from trainspec.trainers.core.model import build_model
    from trainspec.trainers.orchestrator.sampling.local_sampler import LocalSampler
    from trainspec.trainers.orchestrator.sampling.openai_client import OpenAISampler
    from trainspec.trainers.serving.inference_server import InferenceServer
    from trainspec.trainers.serving.vllm_plan import server_plan

    torch.set_num_threads(max(1, torch.get_num_threads()))
    weights = str(args.weights.resolve())
    tokenizer = AutoTokenizer.from_pretrained(weights)
    prompts, stop_id = prompts_of(tokenizer, args.prompts)
    settings = {"model.name": weights, "model.compile": None, "model.ac": None,
                "model.ac_offloading": None}  # fmt: skip
    trainer = build_model(load("sft", [], settings).config.model, seed=0).eval()
    draw = {"temperature": 1.0, "max_tokens": args.max_tokens, "seed": 0}
    results = {}

    hf = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32).eval()
    local = LocalSampler(hf, tokenizer, stop_id, torch.device("cpu"))
    results["in-process"] = compare(trainer, prompts, local.sample(prompts, args.n, **draw))

    run_dir = Path(tempfile.mkdtemp(prefix="logprob-mismatch-"))
    inference = InferenceConfig.model_validate({"server": {"port": free_port()}})
    plan = server_plan(
        inference, model=weights, served_name="policy", infer_gpus=1, run_dir=run_dir,
        command="rl", seq_len=256, on_gpu=torch.cuda.is_available(),
    )  # fmt: skip
    server = InferenceServer(plan).start()
    try:
        server.wait_ready(900, lambda: False)
        vllm = OpenAISampler(plan.base_url, "policy", tokenizer, stop_id)
        results["vLLM"] = compare(trainer, prompts, vllm.sample(prompts, args.n, **draw))
        vllm.close()
    finally:
        server.stop()
        shutil.rmtree(run_dir, ignore_errors=True)

    columns = ["tokens", "mean |d|", "max |d|", "ratio mean", "ratio std", "max |ratio-1|"]
    print(f"{'sampler':<12}" + "".join(f"{c:>15}" for c in columns))
    for name, row in results.items():
        cells = [f"{row[c]:>15d}" if c == "tokens" else f"{row[c]:>15.2e}" for c in columns]
        print(f"{name:<12}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
