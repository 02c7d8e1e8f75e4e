"""SFT training and validation batches, built from `[data]` (and `[val.data]`).

    data = build_sft_data(config.data, tokenizer, rank=world.rank, world_size=world.world_size)
    micro_batches = data.next_step()          # this rank's share of one optimizer step
    val = build_val_batches(config.val.data, tokenizer, rank=..., world_size=...)

Chat rows come from a built-in task ("builtin:reverse-text"), a local .jsonl/.json/.parquet
file or directory, or a hub dataset (sources.py). They are rendered with the chat template
(render.py); rows with no token to train on are counted, reported with examples and left out
(none left is an error); the rest are packed into rows of seq_len tokens (packing.py). Step s
is global rows s*B .. s*B+B-1 (B = batch_size) whatever the world size; rank r takes the r-th
contiguous share and splits it into micro-batches.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch

from ..chat.named_renderers import NamedRendering, uses_named_renderer
from ..chat.render import Renderer, describe_sample, raise_first_error
from ..chat.row_sources import OFFLINE_FIX, load_rows
from ..core.lm import IGNORE_INDEX
from ..errors import SetupError
from ..refusals import batch_split
from ..run.banner import count
from .packing import FakeStream, PackedStream, Row, empty_row

__all__ = ["MicroBatch", "build_sft_data", "build_val_batches", "describe_sample", "load_rows"]

log = logging.getLogger(__name__)


@dataclass
class MicroBatch:
    """One forward/backward pass: [micro_batch_size, seq_len] LongTensors."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    labels: torch.Tensor

    @property
    def num_targets(self) -> int:
        return int((self.labels != IGNORE_INDEX).sum())

    def to(self, device) -> MicroBatch:
        return MicroBatch(*(t.to(device) for t in (self.input_ids, self.position_ids, self.labels)))


def _stack(rows: list[Row]) -> MicroBatch:
    return MicroBatch(*(torch.stack(column) for column in zip(*rows, strict=True)))


def _shares(data_cfg, prefix: str, world_size: int) -> tuple[int, int, int]:
    """(batch_size, rows per rank, rows per forward), checking that they divide."""
    split = batch_split(data_cfg, prefix, world_size)
    if isinstance(split, SetupError):
        raise split
    return data_cfg.batch_size, *split


class SFTData:
    """Endless optimizer steps of this rank's micro-batches; checkpointable."""

    def __init__(self, stream, data_cfg, prefix: str, rank: int, world_size: int) -> None:
        self.stream, self.rank = stream, rank
        self.name = getattr(data_cfg, "name", None)  # the dataset, for the banner (none: fake)
        self.report: dict[str, int] = getattr(stream, "report", {})  # for the first metrics
        self.batch_size, self.per_rank, self.micro = _shares(data_cfg, prefix, world_size)
        self.next_row = 0
        self.epoch = 0

    def next_step(self) -> list[MicroBatch]:
        first = self.next_row + self.rank * self.per_rank
        rows = self.stream.rows(first, self.per_rank)
        self.epoch = self.stream.epoch_of(self.next_row + self.batch_size - 1)
        self.next_row += self.batch_size
        return [_stack(rows[i : i + self.micro]) for i in range(0, len(rows), self.micro)]

    def describe(self) -> str:
        """The data in a line for the start banner: its examples, the rows they pack into and
        the steps a pass over them takes."""
        stream = self.stream
        if isinstance(stream, FakeStream):
            return f"synthetic rows of {stream.seq_len} tokens ({stream.length} length)"
        examples = sum(1 for length in stream.lengths if length >= 2)
        rows = stream.rows_in_epoch()
        steps = -(-rows // self.batch_size)
        return (
            f"{self.name}: {count(examples)} examples in {count(rows)} rows of {stream.seq_len} "
            f"tokens ({steps} steps a pass)"
        )

    def state_dict(self) -> dict:
        return {"next_row": self.next_row, "epoch": self.epoch, **self.stream.position()}

    def load_state_dict(self, state: dict) -> None:
        self.next_row, self.epoch = int(state["next_row"]), int(state["epoch"])
        self.stream.restore(state)


def render_dataset(data_cfg, tokenizer, prefix: str = "data", renderer_cfg=None):
    """Rows rendered to input_ids / loss_mask, the list of lengths and the counts of rows
    longer than seq_len; rows with no token to train on get length 0 (packing leaves them out)
    and are reported, long rows are handled as `long_rows` says."""
    rows, where = load_rows(data_cfg, prefix)
    workers = data_cfg.num_workers
    rendered = rows.map(
        Renderer(
            tokenizer, data_cfg.loss_mask, f"{prefix}.name", data_cfg.seq_len, named(renderer_cfg)
        ),
        batched=True,
        with_indices=True,
        remove_columns=rows.column_names,
        num_proc=workers if workers > 1 else None,
        keep_in_memory=True,
        desc=f"rendering {prefix}",
    )

    sources = list(rendered["source"])

    def row_at(index: int) -> str:  # the source row of sample `index`
        row = sources[index]
        return where[row] if where is not None else f"row {row + 1}"

    raise_first_error(rendered["error"], row_at)
    say_turn_by_turn(rendered["turn_by_turn"], sources, prefix)
    lengths = list(rendered["length"])
    if not lengths:
        raise SetupError(f"{prefix}.name", "holds no rows", OFFLINE_FIX)
    targets = list(rendered["targets"])
    empty = [i for i, n in enumerate(targets) if n == 0]
    for i in empty:
        lengths[i] = 0
    if empty:
        report_untrained(rendered.select(empty), empty, len(lengths), data_cfg, prefix, row_at)
    cut = long_rows(lengths, targets, list(rendered["trained"]), data_cfg, prefix, row_at)
    kept = rendered.remove_columns([c for c in rendered.column_names if c not in KEPT])
    return kept, lengths, cut


def say_turn_by_turn(rewritten: list[bool], sources: list[int], prefix: str) -> None:
    """One line when the template rewrote history, so conversations became one sample per
    trained message (render.turn_by_turn)."""
    rows = {row for row, flag in zip(sources, rewritten, strict=True) if flag}
    if not rows:
        return
    samples = sum(rewritten)
    log.info(
        "%s: the chat template renders earlier turns differently once the conversation goes "
        "on (as Qwen3 drops the <think> of earlier answers), so %d conversation(s) train turn "
        "by turn: %d samples, each trained message after the conversation up to it as the "
        "template renders it then",
        f"{prefix}.name",
        len(rows),
        samples,
    )


def long_rows(lengths, targets, trained, data_cfg, prefix: str, row_at) -> dict[str, int]:
    """Rows longer than seq_len, as `long_rows` says: cut at seq_len (their trained tokens past
    it are not trained on), left out (their length set to 0) or refused; said at start, and
    counted for metrics.jsonl ({"rows_long", "targets_cut"})."""
    seq_len, policy = data_cfg.seq_len, data_cfg.long_rows
    long = [i for i, n in enumerate(lengths) if n > seq_len]
    lost = sum(trained[i] - targets[i] for i in long)
    counts = {"rows_long": len(long), "targets_cut": lost if policy == "truncate" else 0}
    if not long:
        return counts
    examples = ", ".join(f"{row_at(i)} ({lengths[i]} tokens)" for i in long[:SHOWN_ROWS])
    held = sum(trained[i] for i in long)
    problem = (
        f"{len(long)} of {len(lengths)} rows are longer than {prefix}.seq_len = {seq_len} "
        f"tokens (e.g. {examples}); {lost} of their {held} trained tokens lie past it"
    )
    switch = f"{prefix}.long_rows"
    if policy == "refuse":
        fix = f'raise {prefix}.seq_len (and model.seq_len), or set {switch} = "truncate" or "skip"'
        raise SetupError(switch, problem, fix)
    if policy == "skip":
        for i in long:
            lengths[i] = 0
        if not any(lengths):
            fix = f'raise {prefix}.seq_len (and model.seq_len), or set {switch} = "truncate"'
            raise SetupError(switch, f"{problem}: skipping them leaves no row", fix)
        log.warning('%s: %s; they are left out (%s = "skip")', switch, problem, switch)
        return counts
    log.warning(
        '%s: %s; they are cut there and those tokens not trained on (%s = "truncate"; '
        '"skip" leaves such rows out, "refuse" stops)',
        switch,
        problem,
        switch,
    )
    return counts


KEPT = ("input_ids", "loss_mask")
SHOWN_ROWS = 3


def report_untrained(untrained, indices, total, data_cfg, prefix, row_at) -> None:
    """Say which rows teach nothing and why (rank by rank alike); none left is a SetupError."""
    past_end = [i for i, n in zip(indices, untrained["trained"], strict=True) if n > 0]
    no_role = [i for i, n in zip(indices, untrained["trained"], strict=True) if n == 0]
    unknown = sorted({role for roles in untrained["unknown_roles"] for role in roles})
    reasons, fixes = [], []
    if past_end:
        examples = ", ".join(row_at(i) for i in past_end[:SHOWN_ROWS])
        reasons.append(
            f"{len(past_end)} whose first trained token lies past {prefix}.seq_len = "
            f"{data_cfg.seq_len} tokens (e.g. {examples})"
        )
        fixes.append(f"raise {prefix}.seq_len (and model.seq_len)")
    if no_role:
        examples = ", ".join(row_at(i) for i in no_role[:SHOWN_ROWS])
        roles = f"; roles no loss_mask switch names: {', '.join(map(repr, unknown))}"
        reasons.append(
            f"{len(no_role)} with no message of a role {prefix}.loss_mask trains "
            f"(e.g. {examples}{roles if unknown else ''})"
        )
        switch = f"{prefix}.loss_mask.<role>"
        fixes.append(f"use the roles system, user, assistant and tool, or switch {switch} on")
    problem = f"{len(indices)} of {total} rows have no token to train on: {'; '.join(reasons)}"
    fix = "; ".join(fixes) + "; or drop those rows"
    if len(indices) == total:
        raise SetupError(f"{prefix}.name", problem, fix)
    log.warning("%s: %s; they are left out (%s)", f"{prefix}.name", problem, fix)


def named(renderer_cfg) -> NamedRendering | None:
    """The reference's named renderer `[renderer]` names, or None: the chat template."""
    if not uses_named_renderer(renderer_cfg):
        return None
    return NamedRendering.from_config(renderer_cfg)


def _chat_stream(data_cfg, tokenizer, prefix: str, renderer_cfg) -> PackedStream:
    rendered, lengths, cut = render_dataset(data_cfg, tokenizer, prefix, renderer_cfg)
    stream = PackedStream(
        rendered,
        lengths,
        data_cfg.seq_len,
        tokenizer.pad_token_id,
        shuffle=data_cfg.shuffle,
        seed=data_cfg.seed,
    )
    stream.report = {f"data_{name}": count for name, count in cut.items()}
    return stream


def build_sft_data(data_cfg, tokenizer, *, rank: int, world_size: int, renderer=None) -> SFTData:
    """The training batches of `[data]` for this rank (rendered as `[renderer]` says)."""
    stream: FakeStream | PackedStream
    if data_cfg.type == "fake":
        stream = FakeStream(
            data_cfg.seq_len, len(tokenizer), data_cfg.length, data_cfg.input_ids, data_cfg.seed
        )
        _ = data_cfg.num_workers  # nothing to prepare in the background for synthetic rows
    else:
        stream = _chat_stream(data_cfg, tokenizer, "data", renderer)
    return SFTData(stream, data_cfg, "data", rank, world_size)


def build_val_batches(
    val_data_cfg,
    tokenizer,
    *,
    rank: int,
    world_size: int,
    prefix: str = "val.data",
    renderer=None,
) -> list[MicroBatch]:
    """One pass over the validation rows, as this rank's micro-batches.

    The pass is cut into steps of batch_size rows like training; the last step is filled with
    rows that have no target, so every rank runs the same number of forwards.
    """
    if val_data_cfg.type != "sft":
        raise SetupError(f"{prefix}.type", "validation needs a chat dataset", 'use type = "sft"')
    batch, per_rank, micro = _shares(val_data_cfg, prefix, world_size)
    stream = _chat_stream(val_data_cfg, tokenizer, prefix, renderer)
    total = stream.rows_in_epoch()
    pad = empty_row(val_data_cfg.seq_len, tokenizer.pad_token_id)
    rows: list[Row] = []
    for step in range(math.ceil(total / batch)):
        first = step * batch + rank * per_rank
        real = max(0, min(per_rank, total - first))
        rows += stream.rows(first, real) + [pad] * (per_rank - real)
    return [_stack(rows[i : i + micro]) for i in range(0, len(rows), micro)]
