"""The two peers `scripts/bench_sft.py` measures `sft` against, each run as its own process:

    python scripts/bench_sft_peers.py loop '<spec JSON>'   # a minimal hand-written PyTorch loop
    python scripts/bench_sft_peers.py trl '<spec JSON>'    # TRL's SFTTrainer

The spec (written by bench_sft.py) gives the model, steps, rows, seq_len, seed, lr, weight_decay,
max_norm, warmup_steps, min_lr, threads and the path of the result file. The model is
builtin:tiny-qwen3 or a directory bench_sft.py wrote (a larger config.json next to the built-in
tokenizer files). Both build the same model as `sft` (that config, weights from
torch.manual_seed(seed) and from_config, SDPA attention) with the same optimizer (AdamW, no decay
on norms, biases and embeddings, the same warm-up + cosine schedule as trainspec's) and write
JSON: per step the end time (perf_counter), the inner step time, positions processed (padding
included), real (non-pad) tokens and the loss; plus notes.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from types import SimpleNamespace

BUILTIN_MODEL = "builtin:tiny-qwen3"
BUILTIN_DATA = "builtin:reverse-text"


def lr_factor(step: int, spec: dict) -> float:
    """trainspec's cosine schedule: linear warm-up, then cosine down to min_lr at max_steps."""
    warmup, steps = spec["warmup_steps"], spec["steps"]
    if warmup and step < warmup:
        return (step + 1) / warmup
    floor = spec["min_lr"] / spec["lr"]
    progress = min(1.0, (step - warmup + 1) / max(1, steps - warmup))
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def model_name(spec: dict) -> str:
    """The spec's model: builtin:tiny-qwen3 or a directory with config.json and tokenizer."""
    return spec.get("model", BUILTIN_MODEL)


def model_dir(spec: dict) -> str:
    from trainspec.trainers.builtin import builtin_model_dir

    return str(builtin_model_dir(model_name(spec)) or model_name(spec))


def build_model(spec: dict):
    """The same weights as `sft` builds for the spec's model with random init (model.py,
    without trainspec)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir(spec))
    config.max_position_embeddings = max(config.max_position_embeddings, spec["seq_len"])
    config.use_cache = False
    torch.manual_seed(spec["seed"])
    config._attn_implementation = "sdpa"
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def build_optimizer(model, spec: dict):
    import torch

    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.ndim < 2 or "embed" in name or "norm" in name:
            no_decay.append(param)
        else:
            decay.append(param)
    groups = [
        {"params": decay, "weight_decay": spec["weight_decay"]},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=spec["lr"], betas=(0.9, 0.999))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, spec))
    return optimizer, scheduler


def tokenizer_of(spec: dict):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir(spec))


# -- the hand-written loop ---------------------------------------------------------------------


def run_loop(spec: dict) -> dict:
    """Same packed batches as `sft` (trainspec's data module, fed plain namespaces instead of the
    pydantic config, so the config layer is not loaded), then forward / loss / backward / clip /
    step / zero_grad."""
    import torch
    import torch.nn.functional as F

    from trainspec.trainers.core.tokenizer import build_tokenizer
    from trainspec.trainers.sft.data import build_sft_data

    rows, seq_len = spec["rows"], spec["seq_len"]
    model_cfg = SimpleNamespace(name=model_name(spec))
    tokenizer = build_tokenizer(
        SimpleNamespace(name=None, trust_remote_code=False, chat_template=None), model_cfg
    )
    data_cfg = SimpleNamespace(
        type="sft", name=BUILTIN_DATA, subsets=None, splits=None, probabilities=None,
        stopping_strategy="all_exhausted", num_workers=1, shuffle=True, seed=spec["seed"],
        batch_size=rows, micro_batch_size=rows, seq_len=seq_len,
        loss_mask=SimpleNamespace(system=False, user=False, assistant=True, tool=False),
        long_rows="truncate",
    )  # fmt: skip
    data = build_sft_data(data_cfg, tokenizer, rank=0, world_size=1)
    pad_id = tokenizer.pad_token_id
    model = build_model(spec)
    optimizer, scheduler = build_optimizer(model, spec)
    params = list(model.parameters())
    out = {"steps": [], "notes": [f"torch threads {torch.get_num_threads()}"]}

    model.train()
    for _ in range(spec["steps"]):
        started = time.perf_counter()
        micro_batches = data.next_step()
        targets = max(1, sum(mb.num_targets for mb in micro_batches))
        total = 0.0
        for mb in micro_batches:
            logits = model(
                input_ids=mb.input_ids, position_ids=mb.position_ids, use_cache=False
            ).logits
            loss_sum = F.cross_entropy(
                logits.float().flatten(0, 1), mb.labels.flatten(), ignore_index=-100,
                reduction="sum",
            )  # fmt: skip
            (loss_sum / targets).backward()
            total += loss_sum.item()
        torch.nn.utils.clip_grad_norm_(params, spec["max_norm"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        ended = time.perf_counter()
        out["steps"].append({
            "end": ended,
            "inner": ended - started,
            "tokens": sum(mb.input_ids.numel() for mb in micro_batches),
            "real": sum(int((mb.input_ids != pad_id).sum()) for mb in micro_batches),
            "loss": total / targets,
        })  # fmt: skip
    return out


# -- TRL's SFTTrainer --------------------------------------------------------------------------


def run_trl(spec: dict) -> dict:
    import datasets
    import torch
    import trl
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from trainspec.trainers.chat.tasks import reverse_text

    notes = [f"trl {trl.__version__}"]
    tokenizer = tokenizer_of(spec)
    pad_id = tokenizer.pad_token_id
    model = build_model(spec)
    optimizer, scheduler = build_optimizer(model, spec)
    steps: list[dict] = []
    pending: dict = {}

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            pending["begin"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            ended = time.perf_counter()
            steps.append({"end": ended, "inner": ended - pending.pop("begin", ended), **pending})
            pending.clear()

    class Measured(SFTTrainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            ids = inputs["input_ids"]
            pending["tokens"] = pending.get("tokens", 0) + ids.numel()
            pending["real"] = pending.get("real", 0) + int((ids != pad_id).sum())
            loss = super().training_step(model, inputs, num_items_in_batch)
            pending["loss"] = pending.get("loss", 0.0) + float(loss.detach())
            return loss

    def make(train_rows, assistant_only: bool):
        config = SFTConfig(
            output_dir=spec["workdir"], max_length=spec["seq_len"], packing=True,
            per_device_train_batch_size=spec["rows"], gradient_accumulation_steps=1,
            learning_rate=spec["lr"], weight_decay=spec["weight_decay"],
            max_grad_norm=spec["max_norm"], max_steps=spec["steps"],
            assistant_only_loss=assistant_only, report_to="none", use_cpu=True,
            logging_strategy="no", save_strategy="no", eval_strategy="no",
            dataloader_num_workers=0, disable_tqdm=True, seed=spec["seed"],
        )  # fmt: skip
        return Measured(
            model=model, args=config, train_dataset=train_rows, processing_class=tokenizer,
            optimizers=(optimizer, scheduler), callbacks=[Timer()],
        )  # fmt: skip

    examples = reverse_text.examples("train")
    try:
        trainer = make(datasets.Dataset.from_list(examples), assistant_only=True)
        notes.append("loss mask: assistant_only_loss on `messages` rows")
    except Exception as exc:  # the template has no {% generation %} markers TRL can patch in
        reason = (str(exc).strip().splitlines() or [repr(exc)])[0]
        reason = reason if len(reason) <= 160 else reason[:157] + "..."
        notes.append(f"assistant_only_loss failed ({type(exc).__name__}: {reason})")
        notes.append(
            "loss mask: completion_only_loss on the same conversations as prompt (system + user) "
            "/ completion (assistant) rows = the assistant turn, as in sft"
        )
        split = [{"prompt": e["messages"][:-1], "completion": e["messages"][-1:]} for e in examples]
        trainer = make(datasets.Dataset.from_list(split), assistant_only=False)
    notes.append(
        f"packing {trainer.args.packing_strategy}, padding_free {trainer.padding_free}, "
        f"torch threads {torch.get_num_threads()}"
    )
    trainer.train()
    return {"steps": steps, "notes": notes}


def main(argv: list[str]) -> int:
    which, spec = argv[0], json.loads(argv[1])
    import torch

    torch.set_num_threads(spec["threads"])
    torch.set_float32_matmul_precision("highest")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        result = {"loop": run_loop, "trl": run_trl}[which](spec)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        result = {"error": f"{type(exc).__name__}: {first}"}
        with open(spec["result"], "w") as handle:
            json.dump(result, handle)
        raise
    with open(spec["result"], "w") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
