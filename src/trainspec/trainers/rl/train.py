"""The RL training loop, top to bottom: the parts from their sub-configs, the rollout source and
the weight broadcast, resume, then for each step take this rank's rollouts, train on the policy
loss and publish the new weights, until max_steps or an operator's stop; then where the batches
come from, built from `[data]` and `[rollout_transport]`.

    rl-trainer configs/rl/tiny.toml          # through the entrypoint (rl/main.py)

    source = build_rollout_source(config, run_dir, world, vocab_size=..., pad_id=...)
    batch = source.next(step, should_stop)      # this rank's RolloutBatch, or None when stopped
    source.commit(step)                         # a checkpoint covers every step before `step`

Rollouts arrive from the orchestrator through the transport. While it waits for one, the
trainer watches the orchestrator's sign of life in the run directory (process/liveness.py): an
orchestrator that ended, or has shown no sign for liveness.STALE_S (killed, or on a node that
was lost), sends no more batches, and the wait ends with a RunError that says so instead of
lasting forever; so does one never seen alive for liveness.FIRST_S (never started). The
trainer leaves its own sign for the orchestrator, which waits on the trainer's weights.

`[data.fake]` makes synthetic batches instead (for benchmarks, with no orchestrator):
`batch_size` rows of model.seq_len random tokens, or, with `generate_samples`, random
prompt/completion samples of varied length packed the way the orchestrator packs them. Fake
batches depend only on (seed, step, rank), so a resumed run sees the same ones.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..ckpt.checkpointer import PROGRESS_KEY
from ..core.lm import IGNORE_INDEX, token_logprobs
from ..core.world import World, all_reduce_max, all_reduce_sum, any_rank, close_world, init_world
from ..errors import RunError
from ..parts import Parts
from ..process.liveness import LifeSign, LifeWatch, orchestrator_sign, trainer_sign
from ..session import Session, start_run
from ..wire.batch import RLMicroBatch, RolloutBatch, Sample, pack_samples
from ..wire.trainer_broadcast import build_broadcast
from ..wire.transport import build_receiver
from .loss import LossInputs, build_loss
from .refusals import check_rl_trainer
from .token_export import TokenExport, describe_first_sample

log = logging.getLogger("trainspec.rl")
FAKE_SEED = 1234


def imitation_loss(logprobs: torch.Tensor, mb) -> torch.Tensor:
    """Sum of weight x -log p over the tokens with a cross-entropy weight (sft distillation)."""
    weights = mb.ce_weights.reshape(-1) * mb.loss_mask.reshape(-1)
    return -(weights * logprobs.reshape(-1)).sum()


def run_step(parts: Parts, batch: RolloutBatch, loss_fn) -> dict[str, float]:
    """Forward and backward over this rank's micro-batches.

    A token with a cross-entropy weight is learned by imitation (`imitation_loss`), every other
    loss token by the policy loss. Every micro-batch's loss is a sum over its tokens, divided
    by the loss tokens of the whole step on every rank: any split into micro-batches and
    processes gives the same gradient.
    """
    world = parts.world
    loss_tokens = all_reduce_sum(float(batch.num_loss_tokens), world)
    divisor = max(1.0, loss_tokens)  # 0: a step of samples that all earned their group's mean
    passes = list(batch.micro_batches)  # as many on every rank: an uneven share is padded
    passes += [passes[0].padding()] * (all_reduce_max(len(passes), world) - len(passes))
    # Summed on the device in float64, read once a step: a GPU never waits for the host mid-step.
    totals: dict[str, torch.Tensor] = {}

    def add(key: str, value) -> None:
        value = torch.as_tensor(value).detach().to(world.device, torch.float64)
        totals[key] = totals[key] + value if key in totals else value

    for mb in parts.accumulate(passes):
        mb = mb.to(world.device)
        with parts.offloaded_activations():
            logprobs = token_logprobs(
                parts.model, mb.input_ids, mb.position_ids, mb.targets, batch.temperature
            )
        out = loss_fn(
            LossInputs(
                trainer_logprobs=logprobs,
                inference_logprobs=mb.inference_logprobs.reshape(-1),
                advantages=mb.advantages.reshape(-1),
                loss_mask=mb.policy_mask.reshape(-1),
            )
        )
        imitation = imitation_loss(logprobs, mb)
        ((out.loss + imitation) * world.world_size / divisor).backward()
        add("loss", out.loss + imitation)
        add("ce_loss", imitation)
        for key, value in out.metrics.items():  # token-weighted means over the step
            add(key, torch.as_tensor(value).double() * mb.num_loss_tokens)
    keys = sorted(totals)
    values = torch.stack([totals[key] for key in keys]).tolist()
    return {
        key: all_reduce_sum(value, world) / divisor for key, value in zip(keys, values, strict=True)
    } | {"loss_tokens": loss_tokens}


def train(config) -> int:
    world = init_world(config.dist_timeout_seconds)
    run_dir = Path(config.output_dir)
    document = start_run(config, "rl", run_dir, world, setting="output_dir", clean=None)
    # the orchestrator watches this while it waits for weights (rank 0 writes it for all)
    sign = LifeSign(trainer_sign(run_dir)) if world.is_main else None
    with sign or contextlib.nullcontext():
        return train_steps(config, world, run_dir, document, sign)


def train_steps(config, world: World, run_dir: Path, document, sign: LifeSign | None) -> int:
    check_rl_trainer(config, world.world_size, world.device.type)
    parts = Parts.build(config, "rl", world, run_dir, seed=0)
    loss_fn = build_loss(config.loss)
    broadcast = build_broadcast(config.weight_broadcast, run_dir, parts.model, parts.export, world)
    vocab_size, pad_id = parts.model.lm.config.vocab_size, parts.tokenizer.pad_token_id or 0
    source = build_rollout_source(config, run_dir, world, vocab_size=vocab_size, pad_id=pad_id)
    tokens_out = TokenExport(run_dir, rank=world.rank) if config.enable_token_export else None

    step, _ = parts.resume(config.resume)
    broadcast.publish(step)  # the orchestrator starts sampling from exactly these weights

    def save(at_step: int) -> Path:
        path = parts.save(at_step, {PROGRESS_KEY: {"step": at_step}})
        source.commit(at_step)  # rollouts before this step are no longer needed
        return path

    session = Session(
        config, run_dir, run_dir.name, document, world=world, save=save,
        start=parts.start_step, resumed_from=parts.resumed_from,
    )  # fmt: skip
    batches = f"rollouts from the orchestrator ({config.rollout_transport.type} transport)"
    if config.data.fake is not None:
        batches = "synthetic rollouts ([data.fake])"
    session.announce("rl-trainer", config.model.name, parts.model, batches)
    session.start()
    start_step = step
    parts.model.train()
    while config.max_steps is None or step < config.max_steps:
        waited = time.perf_counter()
        batch = source.next(step, session.stop_pending)
        if any_rank(batch is None, world):  # asked to stop while waiting: nothing half done
            session.stop_while_waiting(step)
            break
        started = time.perf_counter()
        if config.log.log_data and world.is_main and step == start_step:
            log.info("first sample:\n%s", describe_first_sample(batch, parts.tokenizer))
        if tokens_out is not None:
            tokens_out.write(step, batch, parts.tokenizer)
        metrics = run_step(parts, batch, loss_fn) | parts.update()
        step += 1
        broadcast.publish(step)
        if config.ckpt is None:
            source.commit(step)
        done = time.perf_counter()
        tokens = sum(mb.input_ids.numel() for mb in batch.micro_batches) * world.world_size
        if config.data.fake is None:
            metrics["reward"] = batch.reward
        metrics |= {
            "off_policy_steps": step - 1 - batch.policy_step,
            "tokens_per_s": tokens / (done - started),
            "step_time_s": done - started,
            "wait_s": started - waited,
        }
        if sign is not None:
            sign.step = step
        if session.after_step(step, metrics):
            break

    if sign is not None:
        sign.finished = config.max_steps is not None and step >= config.max_steps
    session.end(step)
    source.close()
    close_world()
    return 0


# -- where the batches come from ------------------------------------------------------------


class TransportRollouts:
    """The orchestrator's batches through the configured transport."""

    def __init__(self, transport_cfg, run_dir: Path, rank: int) -> None:
        self.receiver = build_receiver(transport_cfg, run_dir, rank)
        self.orchestrator = LifeWatch(orchestrator_sign(run_dir), name="the orchestrator")

    def next(self, step: int, should_stop: Callable[[], bool]) -> RolloutBatch | None:
        """Step `step`'s batch; None when asked to stop; a RunError once the orchestrator is
        gone without it (a batch it wrote before it went is still taken)."""
        gone: list[str] = []

        def stop_or_gone() -> bool:
            if should_stop():
                return True
            reason = self.orchestrator.gone()
            if reason is not None:
                gone.append(reason)
            return reason is not None

        batch = self.receiver.receive(step, stop_or_gone)
        if batch is None and gone and not should_stop():
            raise RunError(
                str(self.orchestrator.path),
                f"{gone[0]}; no batch of step {step} will come",
                "start the orchestrator with the same output_dir (again, if it ended: its log "
                "says why; it goes on at the trainer's step) and restart the trainer: it "
                "resumes from its last checkpoint",
            )
        return batch

    def commit(self, step: int) -> None:
        self.receiver.commit(step)

    def close(self) -> None:
        self.receiver.close()


class FakeRollouts:
    def __init__(self, fake_cfg, *, seq_len: int, vocab_size: int, rank: int, pad_id: int):
        self.cfg = fake_cfg
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.rank = rank
        self.pad_id = pad_id

    def _generator(self, step: int) -> torch.Generator:
        return torch.Generator().manual_seed(FAKE_SEED + 1_000_003 * step + self.rank)

    def next(self, step: int, should_stop: Callable[[], bool]) -> RolloutBatch:
        gen = self._generator(step)
        if self.cfg.generate_samples:
            micro_batches = self._packed_samples(gen)
        else:
            micro_batches = [self._random_rows(gen)]
        return RolloutBatch(
            step=step, policy_step=step, temperature=1.0, micro_batches=micro_batches
        )

    def _random_rows(self, gen: torch.Generator) -> RLMicroBatch:
        rows, n = self.cfg.batch_size, self.seq_len
        input_ids = torch.randint(self.vocab_size, (rows, n), generator=gen)
        targets = torch.roll(input_ids, -1, dims=1)
        targets[:, -1] = IGNORE_INDEX
        loss_mask = targets != IGNORE_INDEX
        return RLMicroBatch(
            input_ids=input_ids,
            position_ids=torch.arange(n).expand(rows, n).clone(),
            targets=targets,
            loss_mask=loss_mask,
            advantages=torch.randn(rows, n, generator=gen) * loss_mask,
            inference_logprobs=-torch.rand(rows, n, generator=gen) * 5 * loss_mask,
        )

    def _packed_samples(self, gen: torch.Generator) -> list[RLMicroBatch]:
        samples = []
        for _ in range(self.cfg.batch_size * 4):  # about 4 samples a row
            prompt = int(torch.randint(4, max(5, self.seq_len // 8), (1,), generator=gen))
            completion = int(torch.randint(1, max(2, self.seq_len // 8), (1,), generator=gen))
            ids = torch.randint(self.vocab_size, (prompt + completion,), generator=gen).tolist()
            samples.append(
                Sample(
                    prompt_ids=ids[:prompt],
                    completion_ids=ids[prompt:],
                    completion_logprobs=(-torch.rand(completion, generator=gen) * 5).tolist(),
                    advantage=float(torch.randn(1, generator=gen)),
                )
            )
        (share,) = pack_samples(
            samples,
            seq_len=self.seq_len,
            micro_batch_size=self.cfg.batch_size,
            ranks=1,
            pad_id=self.pad_id,
        )
        return share[:1]

    def commit(self, step: int) -> None:
        pass

    def close(self) -> None:
        pass


def build_rollout_source(config, run_dir: Path, world: World, *, vocab_size: int, pad_id: int):
    if config.data.fake is not None:
        return FakeRollouts(
            config.data.fake,
            seq_len=config.model.seq_len,
            vocab_size=vocab_size,
            rank=world.rank,
            pad_id=pad_id,
        )
    return TransportRollouts(config.rollout_transport, run_dir, world.rank)
