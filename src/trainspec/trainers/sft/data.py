"""SFT training and validation batches, built from `[data]` (and `[val.data]`).

    data = build_sft_data(config.data, tokenizer, rank=world.rank, world_size=world.world_size)
    micro_batches = data.next_step()          # this rank's share of one optimizer step
    val = build_val_batches(config.val.data, tokenizer, rank=..., world_size=...)

Chat rows come from a built-in task ("builtin:reverse-text"), a local .jsonl/.json/.parquet
file or directory, or a hub dataset (subsets and splits interleaved with `probabilities`). They
are rendered with the chat template (render.py) and packed into rows of seq_len tokens
(packing.py). Step s is global rows s*B .. s*B+B-1 (B = batch_size) whatever the world size;
rank r takes the r-th contiguous share and splits it into micro-batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ..builtin import is_builtin
from ..core.lm import IGNORE_INDEX
from ..errors import SetupError
from ..tasks import BUILTIN_DATASETS, load_builtin_dataset
from .packing import FakeStream, PackedStream, Row, empty_row
from .render import Renderer, describe_sample, raise_first_error

__all__ = ["MicroBatch", "build_sft_data", "build_val_batches", "describe_sample", "load_rows"]

FILE_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
OFFLINE_FIX = (
    "check the name and the network, or use a local .jsonl/.json/.parquet file or directory, "
    f"or {', '.join(BUILTIN_DATASETS)}"
)
ROW_COLUMNS = ("messages", "prompt", "completion", "tools")
HELD_OUT_SPLITS = ("test", "validation", "valid", "val", "eval", "dev")


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
    """(batch_size, rows per rank, micro_batch_size), checking that they divide."""
    batch, micro = data_cfg.batch_size, data_cfg.micro_batch_size
    if batch % (micro * world_size):
        raise SetupError(
            f"{prefix}.batch_size",
            f"= {batch} rows per step cannot be split into micro-batches of {micro} rows "
            f"on {world_size} process(es)",
            f"make {prefix}.batch_size a multiple of {prefix}.micro_batch_size × processes "
            f"= {micro * world_size}",
        )
    return batch, batch // world_size, micro


class SFTData:
    """Endless optimizer steps of this rank's micro-batches; checkpointable."""

    def __init__(self, stream, data_cfg, prefix: str, rank: int, world_size: int) -> None:
        self.stream, self.rank = stream, rank
        self.batch_size, self.per_rank, self.micro = _shares(data_cfg, prefix, world_size)
        self.next_row = 0
        self.epoch = 0

    def next_step(self) -> list[MicroBatch]:
        first = self.next_row + self.rank * self.per_rank
        rows = self.stream.rows(first, self.per_rank)
        self.epoch = self.stream.epoch_of(self.next_row + self.batch_size - 1)
        self.next_row += self.batch_size
        return [_stack(rows[i : i + self.micro]) for i in range(0, len(rows), self.micro)]

    def state_dict(self) -> dict:
        return {"next_row": self.next_row, "epoch": self.epoch, **self.stream.position()}

    def load_state_dict(self, state: dict) -> None:
        self.next_row, self.epoch = int(state["next_row"]), int(state["epoch"])
        self.stream.restore(state)


def _names_split(path: Path, split: str) -> bool:
    return path.stem == split or path.stem.startswith((f"{split}-", f"{split}_", f"{split}."))


def _local_files(path: Path, subset: str | None, split: str, prefix: str) -> tuple[str, list]:
    if subset is not None:
        path = path / subset
        if not path.is_dir():
            raise SetupError(
                f"{prefix}.subsets", f"{str(path)!r} is not a directory", "name a subdirectory"
            )
    if path.is_file():
        files = [path] if path.suffix in FILE_FORMATS and split == "train" else []
    else:
        found = sorted(p for p in path.rglob("*") if p.suffix in FILE_FORMATS)
        named = [p for p in found if _names_split(p, split)]
        # Files named after no split are training data; held-out ones never are.
        others = [p for p in found if not any(_names_split(p, s) for s in HELD_OUT_SPLITS)]
        files = named or (others if split == "train" else [])
    if not files:
        raise SetupError(
            f"{prefix}.name" if split == "train" else f"{prefix}.splits",
            f"{str(path)!r} holds no .jsonl, .json or .parquet file for split {split!r}",
            f"name the files of a split <split>.jsonl or <split>-*.parquet; {OFFLINE_FIX}",
        )
    formats = {FILE_FORMATS[p.suffix] for p in files}
    if len(formats) > 1:
        raise SetupError(f"{prefix}.name", "mixes JSON and Parquet files", "use one format")
    return formats.pop(), [str(p) for p in files]


def _load_source(name: str, subset: str | None, split: str, prefix: str):
    import datasets

    if is_builtin(name):
        if subset is not None:
            raise SetupError(f"{prefix}.subsets", "built-in datasets have no subsets", "use null")
        return load_builtin_dataset(name, split, field=f"{prefix}.name")
    path = Path(name).expanduser()
    if path.exists():
        fmt, files = _local_files(path, subset, split, prefix)
        what = f"{name!r}"
        load = lambda: datasets.load_dataset(fmt, data_files=files, split="train")  # noqa: E731
    elif path.suffix in FILE_FORMATS or name.startswith((".", "/", "~")):
        raise SetupError(f"{prefix}.name", f"{name!r} does not exist", OFFLINE_FIX)
    else:
        what = f"{name!r} (subset {subset!r}, split {split!r}) from the hub"
        load = lambda: datasets.load_dataset(name, subset, split=split)  # noqa: E731
    try:
        return load()
    except Exception as exc:  # offline, unknown id or split, unreadable file
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SetupError(f"{prefix}.name", f"cannot load {what}: {reason}", OFFLINE_FIX) from None


def load_rows(data_cfg, prefix: str = "data"):
    """The raw rows of the configured sources, interleaved when there are several."""
    import datasets

    subsets, splits = data_cfg.subsets, data_cfg.splits
    probabilities, strategy = data_cfg.probabilities, data_cfg.stopping_strategy
    if subsets:
        sources = list(zip(subsets, splits or ["train"] * len(subsets), strict=True))
    else:
        sources = [(None, split) for split in (splits or ["train"])]
    parts = [_load_source(data_cfg.name, sub, split, prefix) for sub, split in sources]
    for part in parts:
        columns = set(part.column_names)
        if "messages" not in columns and not {"prompt", "completion"} <= columns:
            raise SetupError(
                f"{prefix}.name",
                f"rows need a messages column, or prompt and completion; found {sorted(columns)}",
                "convert the dataset to chat messages",
            )
    parts = [p.select_columns([c for c in ROW_COLUMNS if c in p.column_names]) for p in parts]
    if probabilities is not None and len(probabilities) != len(parts):
        raise SetupError(
            f"{prefix}.probabilities",
            f"has {len(probabilities)} entries for {len(parts)} source(s)",
            "give one probability per subset or split",
        )
    if len(parts) == 1:
        return parts[0]
    weights = list(probabilities) if probabilities is not None else [len(p) for p in parts]
    if sum(weights) <= 0:
        if probabilities is None:
            return parts[0]  # every source is empty: reported once rendered
        raise SetupError(f"{prefix}.probabilities", "are all zero", "give a positive weight")
    # A source never sampled adds nothing (and could never be exhausted): leave it out.
    sampled = [(p, w) for p, w in zip(parts, weights, strict=True) if w > 0]
    if len(sampled) == 1:
        return sampled[0][0]
    sampled_weights = [w for _, w in sampled]
    try:
        return datasets.interleave_datasets(
            [p for p, _ in sampled],
            probabilities=[w / sum(sampled_weights) for w in sampled_weights],
            seed=data_cfg.seed,
            stopping_strategy=strategy,
        )
    except Exception as exc:  # columns of different types
        raise SetupError(
            f"{prefix}.name",
            f"the sources cannot be interleaved: {exc}",
            "give every subset and split the same columns and types",
        ) from None


def render_dataset(data_cfg, tokenizer, prefix: str = "data"):
    """Rows rendered to input_ids / loss_mask / length, and the list of lengths."""
    rows = load_rows(data_cfg, prefix)
    workers = data_cfg.num_workers
    rendered = rows.map(
        Renderer(tokenizer, data_cfg.loss_mask, f"{prefix}.name"),
        batched=True,
        remove_columns=rows.column_names,
        num_proc=workers if workers > 1 else None,
        keep_in_memory=True,
        desc=f"rendering {prefix}",
    )
    raise_first_error(rendered["error"])
    lengths = list(rendered["length"])
    if not any(n >= 2 for n in lengths):
        raise SetupError(f"{prefix}.name", "has no example with a token to train on", OFFLINE_FIX)
    return rendered.remove_columns(["error", "length"]), lengths


def _chat_stream(data_cfg, tokenizer, prefix: str) -> PackedStream:
    rendered, lengths = render_dataset(data_cfg, tokenizer, prefix)
    return PackedStream(
        rendered,
        lengths,
        data_cfg.seq_len,
        tokenizer.pad_token_id,
        shuffle=data_cfg.shuffle,
        seed=data_cfg.seed,
    )


def build_sft_data(data_cfg, tokenizer, *, rank: int, world_size: int) -> SFTData:
    """The training batches of `[data]` for this rank."""
    stream: FakeStream | PackedStream
    if data_cfg.type == "fake":
        stream = FakeStream(
            data_cfg.seq_len, len(tokenizer), data_cfg.length, data_cfg.input_ids, data_cfg.seed
        )
        _ = data_cfg.num_workers  # nothing to prepare in the background for synthetic rows
    else:
        stream = _chat_stream(data_cfg, tokenizer, "data")
    return SFTData(stream, data_cfg, "data", rank, world_size)


def build_val_batches(
    val_data_cfg, tokenizer, *, rank: int, world_size: int, prefix: str = "val.data"
) -> list[MicroBatch]:
    """One pass over the validation rows, as this rank's micro-batches.

    The pass is cut into steps of batch_size rows like training; the last step is filled with
    rows that have no target, so every rank runs the same number of forwards.
    """
    if val_data_cfg.type != "sft":
        raise SetupError(f"{prefix}.type", "validation needs a chat dataset", 'use type = "sft"')
    batch, per_rank, micro = _shares(val_data_cfg, prefix, world_size)
    stream = _chat_stream(val_data_cfg, tokenizer, prefix)
    total = stream.rows_in_epoch()
    pad = empty_row(val_data_cfg.seq_len, tokenizer.pad_token_id)
    rows: list[Row] = []
    for step in range(math.ceil(total / batch)):
        first = step * batch + rank * per_rank
        real = max(0, min(per_rank, total - first))
        rows += stream.rows(first, real) + [pad] * (per_rank - real)
    return [_stack(rows[i : i + micro]) for i in range(0, len(rows), micro)]
