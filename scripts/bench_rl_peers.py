"""The measured sides of `scripts/bench_rl.py`, each run as its own process:

    python scripts/bench_rl_peers.py step '<spec JSON>'  # (a) RL trainer step vs a hand loop
    python scripts/bench_rl_peers.py trl '<spec JSON>'   # (b) TRL's GRPOTrainer, for a budget

Both read the demo config (configs/rl/demo.toml, resolved by trainspec's loader), so model,
sampling, batch shape, optimizer and loss settings come from one place.

step: samples `batches` fixed RolloutBatches from the SFT weights exactly as the orchestrator
does (its task, sampler, rewards, group advantages and pack_samples; every sample kept, so each
batch has batch_size samples), then trains two copies of the same weights on them, interleaved
step by step with the order alternating (ours, hand / hand, ours / ...):

- ours: rl/train.py's pieces: Parts.build (model, optimizer, schedule as the trainer builds
        them), build_loss; run_step, then Parts.update (clip, optimizer and scheduler step,
        zero_grad).
- hand: AutoModelForCausalLM.from_pretrained, logits -> log_softmax(logits / T) gathered at the
        targets, the DPPO loss written inline, backward, clip_grad_norm_, torch AdamW, zero_grad.

The process first does what rl-trainer's launch does before torch loads (the config's env_vars;
tune_malloc). It writes each side's per-step wall and CPU time, loss and
gradient norm, each batch's positions (padding included) and real tokens, and the time of
rl/train.py's weight broadcast (publish), which train.py runs inside its logged step_time_s but
which this comparison leaves out.

trl: GRPOTrainer on the same SFT weights and tokenizer, the same prompts in the same order (the
orchestrator's Task stream), the same reward (the task's LCS ratio, 0 for an unfinished
completion), stopped by a callback at the wall-clock `deadline`; writes per optimizer step its
end time (time.time()) and the mean reward of the completions it trained on, plus notes: versions,
the settings TRL resolved, and whether its prompt ids equal the orchestrator's.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

TRL_MICRO_BATCH = 32  # completions per forward/backward (x gradient accumulation = batch_size)


def demo_task(orch, tokenizer):
    """The demo's one train source, as the orchestrator builds it."""
    from trainspec.trainers.orchestrator.environments.task import Task

    source = orch.train.source[0]
    return Task.from_env(source.env, "train.source[0].env", tokenizer, seed=orch.seed, role="train")


def demo_config(path: str):
    from trainspec.config import load

    return load("rl_run", [path]).config


# -- (a) the trainer step ----------------------------------------------------------------------


def fixed_batches(config, count: int) -> list:
    """`count` RolloutBatches made the orchestrator's way from the initial policy (steps 0..)."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainspec.trainers.chat.prompts import template_stop_id
    from trainspec.trainers.core.tokenizer import build_tokenizer
    from trainspec.trainers.orchestrator.algorithms import grpo_advantages
    from trainspec.trainers.orchestrator.sampling.local_sampler import LocalSampler
    from trainspec.trainers.wire.batch import RolloutBatch, Sample, pack_samples

    orch = config.orchestrator
    tokenizer = build_tokenizer(orch.tokenizer, orch.model)
    stop_id = template_stop_id(tokenizer)
    task = demo_task(orch, tokenizer)
    model = AutoModelForCausalLM.from_pretrained(orch.model.name, dtype="auto")
    sampler = LocalSampler(model, tokenizer, stop_id, torch.device("cpu"))
    n = orch.group_size
    batches = []
    for step in range(count):
        prompts = task.prompts(step, orch.batch_size // n)
        groups = sampler.sample(
            [p.ids for p in prompts], n, temperature=orch.train.sampling.temperature,
            max_tokens=orch.train.sampling.max_completion_tokens,
            seed=orch.seed * 1_000_003 + step,
        )  # fmt: skip
        rewards = [
            [task.reward(c.text, p.answer, c.finished) for c in group]
            for p, group in zip(prompts, groups, strict=True)
        ]
        samples = [
            Sample(prompt.ids, c.token_ids, c.logprobs, advantage, reward)
            for prompt, group, group_rewards, group_advs in zip(
                prompts, groups, rewards, map(grpo_advantages, rewards), strict=True
            )
            for c, reward, advantage in zip(group, group_rewards, group_advs, strict=True)
        ]
        (share,) = pack_samples(
            samples, seq_len=orch.seq_len, micro_batch_size=orch.micro_batch_size, ranks=1,
            pad_id=tokenizer.pad_token_id,
        )  # fmt: skip
        mean_reward = sum(map(sum, rewards)) / len(samples)
        temperature = orch.train.sampling.temperature
        batches.append(RolloutBatch(step, step, temperature, share, mean_reward))
    return batches


class Ours:
    """The RL trainer's step, built and run the way rl/train.py does."""

    def __init__(self, trainer_cfg, world, run_dir: Path) -> None:
        from trainspec.trainers.parts import Parts
        from trainspec.trainers.rl.loss import build_loss

        self.parts = Parts.build(trainer_cfg, "rl", world, run_dir, seed=0)
        self.model = self.parts.model
        self.loss_fn = build_loss(trainer_cfg.loss)
        self.model.train()

    def step(self, batch) -> tuple[float, float]:
        from trainspec.trainers.rl.train import run_step

        metrics = run_step(self.parts, batch, self.loss_fn)
        return metrics["loss"], self.parts.update()["grad_norm"]

    def publish_ms(self, run_dir: Path, times: int) -> float:
        """Median ms of rl/train.py's weight broadcast (inside its logged step_time_s)."""
        from trainspec.trainers.wire.broadcast import build_broadcast

        parts = self.parts
        broadcast = build_broadcast(
            parts.config.weight_broadcast, run_dir, parts.model, parts.export, parts.world
        )
        spent = []
        for step in range(times):
            started = time.perf_counter()
            broadcast.publish(step)
            spent.append(time.perf_counter() - started)
        return 1e3 * statistics.median(spent)


class Hand:
    """A plain PyTorch loop over the same micro-batches, with the DPPO loss written inline."""

    def __init__(self, weights_dir: str, optim_cfg, loss_cfg) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(
            weights_dir, dtype=torch.float32, attn_implementation="sdpa"
        )
        self.model.config.use_cache = False
        self.model.train()
        self.params = list(self.model.parameters())
        self.optimizer = torch.optim.AdamW(
            self.params, lr=optim_cfg.lr, betas=(optim_cfg.betas1, optim_cfg.betas2),
            weight_decay=optim_cfg.weight_decay,
        )  # fmt: skip
        self.max_norm, self.loss_cfg = optim_cfg.max_norm, loss_cfg

    def dppo(self, lp, mb):
        """sum over tokens of kl_tau * m * log_ratio**2 - keep * adv_tau * A * ratio."""
        import torch

        c = self.loss_cfg
        lq, adv, mask = mb.inference_logprobs, mb.advantages, mb.loss_mask
        log_ratio = lp - lq
        with torch.no_grad():
            diff = lp.exp() - lq.exp()
            masked = torch.where(adv > 0, diff > c.dppo_mask_high, diff < -c.dppo_mask_low)
        keep = mask & ~masked
        ratio = torch.exp(log_ratio.masked_fill(~keep, 0.0))
        return (c.kl_tau * mask * log_ratio.square() - keep * c.adv_tau * adv * ratio).sum()

    def step(self, batch) -> tuple[float, float]:
        import torch

        loss_tokens = max(1, sum(int(mb.loss_mask.sum()) for mb in batch.micro_batches))
        total = 0.0
        for mb in batch.micro_batches:
            logits = self.model(
                input_ids=mb.input_ids, position_ids=mb.position_ids, use_cache=False
            ).logits
            logprobs = torch.log_softmax(logits.float() / batch.temperature, dim=-1)
            lp = logprobs.gather(-1, mb.targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            loss = self.dppo(lp, mb)
            (loss / loss_tokens).backward()
            total += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total / loss_tokens, float(grad_norm)


def run_steps(spec: dict) -> dict:
    from trainspec.trainers.process.malloc import tune_malloc

    config = demo_config(spec["demo"])
    trainer_cfg = config.trainer
    # What rl-trainer's launch does before torch loads (the config's env_vars, glibc malloc
    # limits); process-wide, so both sides get it.
    os.environ.update(trainer_cfg.env_vars)
    malloc_tuned = tune_malloc()
    import torch

    from trainspec.trainers.core.world import close_world, init_world

    torch.set_float32_matmul_precision(trainer_cfg.matmul_precision)
    world = init_world(trainer_cfg.dist_timeout_seconds)
    batches = fixed_batches(config, spec["batches"])
    sides = {"ours": Ours(trainer_cfg, world, Path(spec["workdir"]))}
    sides["hand"] = Hand(trainer_cfg.model.name, trainer_cfg.optim, trainer_cfg.loss)
    steps: dict[str, list[dict]] = {name: [] for name in sides}
    for index in range(spec["warmup"] + spec["repeats"]):
        batch = batches[index % len(batches)]
        order = ("ours", "hand") if index % 2 == 0 else ("hand", "ours")
        for name in order:
            started, cpu = time.perf_counter(), time.process_time()
            loss, grad_norm = sides[name].step(batch)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            steps[name].append(
                {"seconds": seconds, "cpu": cpu, "loss": loss, "grad_norm": grad_norm}
            )
    tokenizer = sides["ours"].parts.tokenizer
    publish = sides["ours"].publish_ms(Path(spec["workdir"]), times=5)
    close_world()
    mbs = [b.micro_batches for b in batches]
    return {
        "steps": steps,
        "positions": [sum(mb.input_ids.numel() for mb in m) for m in mbs],
        "real": [sum(int((mb.input_ids != tokenizer.pad_token_id).sum()) for mb in m) for m in mbs],
        "loss_tokens": [sum(mb.num_loss_tokens for mb in m) for m in mbs],
        "shape": [list(m[0].input_ids.shape) + [len(m)] for m in mbs],
        "publish_ms": publish,
        "notes": [
            f"torch {torch.__version__}, {torch.get_num_threads()} threads, OMP_WAIT_POLICY "
            f"{os.environ.get('OMP_WAIT_POLICY')}, glibc malloc tuned: {malloc_tuned} (as "
            "rl-trainer)"
        ],
    }


# -- (b) TRL's GRPOTrainer ---------------------------------------------------------------------


def trl_rows(task, prompts_per_step: int, steps: int, tokenizer) -> tuple[list[dict], bool]:
    """The orchestrator's prompt stream as TRL rows (conversational prompt + answer), and whether
    the chat template gives TRL's call exactly the orchestrator's prompt ids."""
    from trainspec.trainers.chat.tasks import reverse_text

    rows, same = [], True
    for step in range(steps):
        for prompt in task.prompts(step, prompts_per_step):
            messages = reverse_text.conversation(prompt.answer[::-1])["messages"][:-1]
            rows.append({"prompt": messages, "answer": prompt.answer})
            if step == 0:  # the call GRPOTrainer._tokenize_prompts makes
                ids = tokenizer.apply_chat_template(
                    [messages], add_generation_prompt=True, tokenize=True, return_dict=True
                )["input_ids"][0]
                same = same and list(ids) == prompt.ids
    return rows, same


def run_trl(spec: dict) -> dict:
    import datasets
    import torch
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainspec.trainers.chat.prompts import template_stop_id

    config = demo_config(spec["demo"])
    orch, trainer_cfg = config.orchestrator, config.trainer
    weights = orch.model.name
    torch.set_float32_matmul_precision(trainer_cfg.matmul_precision)
    tokenizer = AutoTokenizer.from_pretrained(weights)
    stop_id = template_stop_id(tokenizer)
    task = demo_task(orch, tokenizer)
    per_step = orch.batch_size // orch.group_size
    rows, same_ids = trl_rows(task, per_step, spec["max_steps"], tokenizer)
    notes = [
        f"trl {trl.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads",
        f"prompt ids through TRL's chat-template call == orchestrator's: {same_ids}",
    ]
    steps: list[dict] = []
    rewards: list[float] = []

    def lcs_reward(prompts, completions, completion_ids, answer, **kwargs):
        """The task's reward; TRL cuts completion_ids after the first eos (kept)."""
        out = []
        for ids, target in zip(completion_ids, answer, strict=True):
            finished = bool(ids) and ids[-1] == stop_id
            text = tokenizer.decode(ids, skip_special_tokens=True)
            out.append(task.reward(text, target, finished))
        rewards.append(sum(out) / len(out))
        return out

    class Budget(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            now = time.time()
            steps.append({"end": now, "reward": rewards[-1] if rewards else None})
            if now >= spec["deadline"]:
                control.should_training_stop = True

    accumulation = orch.batch_size // TRL_MICRO_BATCH
    args = GRPOConfig(
        output_dir=spec["workdir"], use_cpu=True, bf16=False, gradient_checkpointing=False,
        per_device_train_batch_size=TRL_MICRO_BATCH, gradient_accumulation_steps=accumulation,
        num_generations=orch.group_size,
        max_completion_length=orch.train.sampling.max_completion_tokens,
        temperature=orch.train.sampling.temperature, top_p=1.0, top_k=0,
        generation_kwargs={"use_cache": True},
        learning_rate=trainer_cfg.optim.lr, lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=trainer_cfg.optim.weight_decay, max_grad_norm=trainer_cfg.optim.max_norm,
        adam_beta1=trainer_cfg.optim.betas1, adam_beta2=trainer_cfg.optim.betas2,
        optim="adamw_torch", beta=0.0, scale_rewards="none", shuffle_dataset=False,
        max_steps=spec["max_steps"], seed=orch.seed, report_to="none", logging_strategy="no",
        save_strategy="no", eval_strategy="no", dataloader_num_workers=0, disable_tqdm=True,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(
        weights, dtype=torch.float32, attn_implementation="sdpa"
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=lcs_reward, args=args,
        train_dataset=datasets.Dataset.from_list(rows), processing_class=tokenizer,
        callbacks=[Budget()],
    )  # fmt: skip
    optim = getattr(args.optim, "value", args.optim)
    notes.append(
        f"loss_type {args.loss_type}, beta {args.beta}, epsilon {args.epsilon}, scale_rewards "
        f"{args.scale_rewards}, {TRL_MICRO_BATCH} x {accumulation} completions per step, "
        f"generation batch {args.generation_batch_size}, optim {optim}"
    )
    trainer.train()
    return {"steps": steps, "notes": notes}


def main(argv: list[str]) -> int:
    which, spec = argv[0], json.loads(argv[1])
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        result = {"step": run_steps, "trl": run_trl}[which](spec)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        with open(spec["result"], "w") as handle:
            json.dump({"error": f"{type(exc).__name__}: {first}"}, handle)
        raise
    with open(spec["result"], "w") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
