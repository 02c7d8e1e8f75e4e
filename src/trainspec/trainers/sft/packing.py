"""Packed rows: documents laid end to end in rows of exactly seq_len tokens.

A row is three 1-D LongTensors: input_ids, position_ids (0 at the start of every document, so
packed documents do not attend to each other) and labels (the next token of the same document
where that token is trained on, else IGNORE_INDEX). Rows are numbered globally: row g of the
stream is the same on every rank and for every world size.

`PackedStream` packs a rendered dataset, one epoch after another (reshuffled with seed + epoch);
`FakeStream` makes synthetic rows for benchmarks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.lm import IGNORE_INDEX

Row = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Piece = tuple[int, int]  # (document index, tokens of it used)


def document_order(n: int, shuffle: bool, seed: int, epoch: int) -> list[int]:
    if not shuffle:
        return list(range(n))
    generator = torch.Generator().manual_seed(seed + epoch)
    return torch.randperm(n, generator=generator).tolist()


def pack(lengths: Sequence[int], order: Sequence[int], seq_len: int) -> list[list[Piece]]:
    """Greedy packing in `order`: a document that does not fit in the open row starts a new
    one; one longer than seq_len is cut to seq_len; one with under 2 tokens (no target) is
    skipped."""
    rows: list[list[Piece]] = []
    current: list[Piece] = []
    used = 0
    for doc in order:
        take = min(lengths[doc], seq_len)
        if take < 2:
            continue
        if used + take > seq_len:
            rows.append(current)
            current, used = [], 0
        current.append((doc, take))
        used += take
    if current:
        rows.append(current)
    return rows


def build_row(documents: Sequence[tuple[Sequence[int], Sequence[bool]]], seq_len, pad_id) -> Row:
    """Lay out (ids, trained mask) documents in one row, then pad it to seq_len."""
    input_ids = torch.full((seq_len,), pad_id, dtype=torch.long)
    position_ids = torch.zeros(seq_len, dtype=torch.long)
    labels = torch.full((seq_len,), IGNORE_INDEX, dtype=torch.long)
    start = 0
    for ids, mask in documents:
        n = len(ids)
        doc = torch.tensor(list(ids), dtype=torch.long)
        input_ids[start : start + n] = doc
        position_ids[start : start + n] = torch.arange(n)
        trained = torch.tensor([bool(m) for m in mask[1:n]], dtype=torch.bool)
        labels[start : start + n - 1] = torch.where(trained, doc[1:], IGNORE_INDEX)
        start += n
    # Padding forms a document of its own, so it attends to nothing real.
    position_ids[start:] = torch.arange(seq_len - start)
    return input_ids, position_ids, labels


def empty_row(seq_len: int, pad_id: int) -> Row:
    return build_row([], seq_len, pad_id)


class PackedStream:
    """Rows of a rendered dataset (columns input_ids, loss_mask), epoch after epoch."""

    def __init__(self, dataset, lengths, seq_len: int, pad_id: int, shuffle: bool, seed: int):
        self.dataset, self.lengths = dataset, list(lengths)
        self.seq_len, self.pad_id = seq_len, pad_id
        self.shuffle, self.seed = shuffle, seed
        self.report: dict[str, int] = {}  # what the data's preparation counted, for metrics
        self._set_epoch(0, 0)

    def _set_epoch(self, epoch: int, first_row: int) -> None:
        order = document_order(len(self.lengths), self.shuffle, self.seed, epoch)
        self.epoch, self.first_row = epoch, first_row
        self.plan = pack(self.lengths, order, self.seq_len)

    def _seek(self, row: int) -> list[Piece]:
        if row < self.first_row:
            self._set_epoch(0, 0)
        while row >= self.first_row + len(self.plan):
            self._set_epoch(self.epoch + 1, self.first_row + len(self.plan))
        return self.plan[row - self.first_row]

    def epoch_of(self, row: int) -> int:
        self._seek(row)
        return self.epoch

    def rows_in_epoch(self) -> int:
        return len(self.plan)

    def rows(self, first: int, count: int) -> list[Row]:
        plans = [self._seek(g) for g in range(first, first + count)]
        wanted = sorted({doc for plan in plans for doc, _ in plan})
        fetched = self.dataset[wanted] if wanted else {"input_ids": [], "loss_mask": []}
        where = {doc: i for i, doc in enumerate(wanted)}
        out = []
        for plan in plans:
            documents = []
            for doc, take in plan:
                i = where[doc]
                documents.append((fetched["input_ids"][i][:take], fetched["loss_mask"][i][:take]))
            out.append(build_row(documents, self.seq_len, self.pad_id))
        return out

    def position(self) -> dict:
        """Where packing stands (the epoch planned and its first row), so a resumed run does
        not replan every earlier epoch."""
        return {"plan_epoch": self.epoch, "plan_first_row": self.first_row}

    def restore(self, position: dict) -> None:
        if "plan_epoch" in position:
            self._set_epoch(int(position["plan_epoch"]), int(position["plan_first_row"]))


class FakeStream:
    """Synthetic rows for benchmarks; row g depends only on (seed, g).

    length "fixed": one document of seq_len tokens per row; "variable": documents of random
    length packed until the row is full. input_ids "increasing": each document counts up from a
    random token; "random": uniform tokens.
    """

    epoch = 0

    def __init__(self, seq_len: int, vocab_size: int, length: str, input_ids: str, seed: int):
        self.seq_len, self.vocab_size = seq_len, vocab_size
        self.length, self.input_ids, self.seed = length, input_ids, seed

    def _document(self, n: int, generator: torch.Generator) -> list[int]:
        if self.input_ids == "random":
            return torch.randint(0, self.vocab_size, (n,), generator=generator).tolist()
        start = int(torch.randint(0, self.vocab_size, (1,), generator=generator))
        return ((start + torch.arange(n)) % self.vocab_size).tolist()

    def _row(self, g: int) -> Row:
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + g) % 2**63)
        if self.length == "fixed":
            sizes = [self.seq_len]
        else:
            sizes, left = [], self.seq_len
            while left > 0:
                n = min(left, int(torch.randint(1, self.seq_len + 1, (1,), generator=generator)))
                sizes.append(n)
                left -= n
        documents = [(self._document(n, generator), [True] * n) for n in sizes]
        return build_row(documents, self.seq_len, pad_id=0)

    def epoch_of(self, row: int) -> int:
        return 0

    def rows(self, first: int, count: int) -> list[Row]:
        return [self._row(g) for g in range(first, first + count)]

    def position(self) -> dict:
        return {}

    def restore(self, position: dict) -> None:
        pass
