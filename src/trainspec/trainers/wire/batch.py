"""What travels from the orchestrator to the trainer: one rank's share of one step.

A `Sample` is one sampled completion: its prompt and completion token ids, the sampler's
log-probability of every completion token, and the sample's advantage: one number for the
whole completion (grpo and the other reward-based algorithms) or one per token (distillation:
opd, opsd). A completion token with a cross-entropy weight (`ce_weights`, sft distillation) is
learned by imitation instead: the trainer adds weight x -log p for it and leaves it out of the
policy loss. A multi-turn episode's completion holds the environment's messages between the
model's turns: `completion_mask` leaves them out of the loss (unless a cross-entropy weight
teaches them, as echo does). The orchestrator packs a step's samples into rows of `seq_len`
tokens and the rows into micro-batches (`pack_samples`); the trainer runs one forward/backward
per micro-batch.

Every per-token tensor of a micro-batch is aligned to the *prediction* position: at position i
the model predicts `targets[i]`, the token at i + 1 of the same sample; `loss_mask[i]` says
whether that token is a completion token to train on, and `inference_logprobs[i]` /
`advantages[i]` belong to it. Positions restart at 0 for every packed sample.

On the wire a `RolloutBatch` is one safetensors blob (`encode` / `decode`): no pickle, the same
bytes for the filesystem and the ZeroMQ transport.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from ..core.lm import IGNORE_INDEX


@dataclass
class Sample:
    prompt_ids: list[int]
    completion_ids: list[int]
    completion_logprobs: list[float]
    advantage: float
    reward: float = 0.0
    token_advantages: list[float] | None = None  # per completion token; replaces `advantage`
    ce_weights: list[float] | None = None  # per completion token; > 0: learned by imitation
    # per completion token, sampled by the model (None: every one); the others (an
    # environment's messages between turns) are context, learned only where ce_weights says
    completion_mask: list[bool] | None = None

    def __post_init__(self) -> None:
        for name in ("token_advantages", "ce_weights", "completion_mask"):
            values = getattr(self, name)
            if values is not None and len(values) != len(self.completion_ids):
                raise ValueError(
                    f"{name} has {len(values)} entries for {len(self.completion_ids)} tokens"
                )

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


@dataclass
class RLMicroBatch:
    """[rows, seq_len] tensors of one forward/backward pass."""

    input_ids: torch.Tensor  # long
    position_ids: torch.Tensor  # long
    targets: torch.Tensor  # long, IGNORE_INDEX where nothing is predicted
    loss_mask: torch.Tensor  # bool
    advantages: torch.Tensor  # float32
    inference_logprobs: torch.Tensor  # float32
    ce_weights: torch.Tensor | None = None  # float32; > 0: a cross-entropy token (None: zeros)

    FIELDS = (
        "input_ids",
        "position_ids",
        "targets",
        "loss_mask",
        "advantages",
        "inference_logprobs",
        "ce_weights",
    )

    def __post_init__(self) -> None:
        if self.ce_weights is None:
            self.ce_weights = torch.zeros_like(self.advantages)

    @property
    def policy_mask(self) -> torch.Tensor:
        """The loss tokens of the policy loss: those without a cross-entropy weight."""
        assert self.ce_weights is not None
        return self.loss_mask & (self.ce_weights == 0)

    @property
    def num_loss_tokens(self) -> int:
        return int(self.loss_mask.sum())

    def to(self, device) -> RLMicroBatch:
        return RLMicroBatch(*(getattr(self, name).to(device) for name in self.FIELDS))

    def padding(self) -> RLMicroBatch:
        """A micro-batch of one row shaped like this one's that trains on nothing: a pass a
        rank with fewer micro-batches runs so that every rank's passes pair up (FSDP)."""
        row = _row_tensors([], self.input_ids.size(1), pad_id=0)
        return RLMicroBatch(*(tensor.unsqueeze(0) for tensor in row))


@dataclass
class RolloutBatch:
    """One trainer rank's share of trainer step `step`, sampled with the weights of
    `policy_step` (0 = the initial weights) at `temperature`."""

    step: int
    policy_step: int
    temperature: float
    micro_batches: list[RLMicroBatch] = field(default_factory=list)
    reward: float = 0.0  # mean reward of the step's samples (all ranks), for the trainer's log

    @property
    def num_loss_tokens(self) -> int:
        return sum(mb.num_loss_tokens for mb in self.micro_batches)


def encode(batch: RolloutBatch) -> bytes:
    tensors = {
        "step": torch.tensor([batch.step], dtype=torch.long),
        "policy_step": torch.tensor([batch.policy_step], dtype=torch.long),
        "temperature": torch.tensor([batch.temperature], dtype=torch.float64),
        "reward": torch.tensor([batch.reward], dtype=torch.float64),
    }
    for index, mb in enumerate(batch.micro_batches):
        for name in RLMicroBatch.FIELDS:
            tensors[f"mb{index}.{name}"] = getattr(mb, name).contiguous()
    return save_tensors(tensors)


def _micro_batch(tensors: dict[str, torch.Tensor], prefix: str) -> RLMicroBatch:
    def get(name: str) -> torch.Tensor:
        return tensors[prefix + name]

    return RLMicroBatch(
        get("input_ids"),
        get("position_ids"),
        get("targets"),
        get("loss_mask"),
        get("advantages"),
        get("inference_logprobs"),
        tensors.get(prefix + "ce_weights"),  # None (zeros) from a sender without it
    )


def decode(blob: bytes) -> RolloutBatch:
    tensors = load_tensors(blob)
    count = len({key.split(".", 1)[0] for key in tensors if key.startswith("mb")})
    micro_batches = [_micro_batch(tensors, f"mb{index}.") for index in range(count)]
    return RolloutBatch(
        step=int(tensors["step"][0]),
        policy_step=int(tensors["policy_step"][0]),
        temperature=float(tensors["temperature"][0]),
        micro_batches=micro_batches,
        reward=float(tensors["reward"][0]) if "reward" in tensors else 0.0,
    )


def _rows(samples: Sequence[Sample], seq_len: int) -> list[list[Sample]]:
    """Greedy packing in order; a sample longer than seq_len is cut to seq_len."""
    rows: list[list[Sample]] = []
    used = seq_len + 1
    for sample in samples:
        take = min(len(sample), seq_len)
        if used + take > seq_len:
            rows.append([])
            used = 0
        rows[-1].append(sample)
        used += take
    return rows


def _row_tensors(row: Sequence[Sample], seq_len: int, pad_id: int) -> list[torch.Tensor]:
    input_ids = torch.full((seq_len,), pad_id, dtype=torch.long)
    position_ids = torch.zeros(seq_len, dtype=torch.long)
    targets = torch.full((seq_len,), IGNORE_INDEX, dtype=torch.long)
    loss_mask = torch.zeros(seq_len, dtype=torch.bool)
    advantages = torch.zeros(seq_len, dtype=torch.float32)
    logprobs = torch.zeros(seq_len, dtype=torch.float32)
    ce_weights = torch.zeros(seq_len, dtype=torch.float32)
    start = 0
    for sample in row:
        ids = (sample.prompt_ids + sample.completion_ids)[:seq_len]
        n, prompt = len(ids), len(sample.prompt_ids)
        input_ids[start : start + n] = torch.tensor(ids, dtype=torch.long)
        position_ids[start : start + n] = torch.arange(n)
        targets[start : start + n - 1] = input_ids[start + 1 : start + n]
        # completion token k sits at position prompt + k and is predicted at prompt + k - 1
        first, last = start + prompt - 1, start + n - 1
        if last > first:
            kept = last - first
            if sample.completion_mask is None:
                loss_mask[first:last] = True
            else:
                loss_mask[first:last] = torch.tensor(sample.completion_mask[:kept])
            if sample.token_advantages is not None:
                advantages[first:last] = torch.tensor(sample.token_advantages[:kept])
            else:
                advantages[first:last] = sample.advantage
            logprobs[first:last] = torch.tensor(sample.completion_logprobs[:kept])
            if sample.ce_weights is not None:
                ce_weights[first:last] = torch.tensor(sample.ce_weights[:kept])
                loss_mask[first:last] |= ce_weights[first:last] > 0
        start += n
    return [input_ids, position_ids, targets, loss_mask, advantages, logprobs, ce_weights]


def pack_samples(
    samples: Sequence[Sample],
    *,
    seq_len: int,
    micro_batch_size: int,
    ranks: int,
    pad_id: int,
) -> list[list[RLMicroBatch]]:
    """Every rank's micro-batches for one step: rows of seq_len tokens dealt round-robin to
    the ranks, then grouped `micro_batch_size` rows at a time. Every rank gets as many rows,
    padding rows (nothing trained on) making up the difference, so every rank runs the same
    number of passes (at least one), which FSDP's collectives need."""
    rows = [_row_tensors(row, seq_len, pad_id) for row in _rows(samples, seq_len)]
    per_rank = max(1, -(-len(rows) // ranks))
    shares: list[list[RLMicroBatch]] = []
    for rank in range(ranks):
        mine = rows[rank::ranks]
        mine += [_row_tensors([], seq_len, pad_id) for _ in range(per_rank - len(mine))]
        groups = [mine[i : i + micro_batch_size] for i in range(0, len(mine), micro_batch_size)]
        shares.append(
            [RLMicroBatch(*(torch.stack(c) for c in zip(*g, strict=True))) for g in groups]
        )
    return shares
