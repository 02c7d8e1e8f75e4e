"""Where the RL trainer's batches come from, built from `[data]` and `[rollout_transport]`.

    source = build_rollout_source(config, run_dir, world, vocab_size=..., pad_id=...)
    batch = source.next(step, should_stop)      # this rank's RolloutBatch, or None when stopped
    source.commit(step)                         # a checkpoint covers every step before `step`

Rollouts arrive from the orchestrator through the transport. While it waits for one, the
trainer watches the orchestrator's sign of life in the run directory (process/liveness.py): an
orchestrator that ended, or has shown no sign for liveness.STALE_S (killed, or on a node that
was lost), sends no more batches, and the wait ends with a RunError that says so instead of
lasting forever; so does one never seen alive for liveness.FIRST_S (never started).

`[data.fake]` makes synthetic batches instead (for benchmarks, with no orchestrator):
`batch_size` rows of model.seq_len random tokens, or, with `generate_samples`, random
prompt/completion samples of varied length packed the way the orchestrator packs them. Fake
batches depend only on (seed, step, rank), so a resumed run sees the same ones.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ..core.lm import IGNORE_INDEX
from ..core.world import World
from ..errors import RunError
from ..process.liveness import LifeWatch, orchestrator_sign
from ..wire.batch import RLMicroBatch, RolloutBatch, Sample, pack_samples
from ..wire.transport import build_receiver

FAKE_SEED = 1234


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
