"""`enable_token_export`: every trained token as JSON lines, to debug what the loss saw.

One file per step and rank, `<output_dir>/token_export/step_<n>.rank_<r>.jsonl`; one line per
packed sample: its token ids and text, and per token whether it was trained on, the sampler's
log-probability and the advantage.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..run.atomic_files import write_atomic
from ..wire.batch import RolloutBatch


def describe_first_sample(batch: RolloutBatch, tokenizer) -> str:
    """The first packed sample as text: its prompt, then the completion it is trained on
    (`log.log_data`)."""
    for mb in batch.micro_batches:
        for row in range(mb.input_ids.size(0)):
            trained = mb.loss_mask[row].nonzero().flatten()
            if not len(trained):
                continue
            first = int(trained[0])
            positions = mb.position_ids[row]
            start = int((positions[: first + 1] == 0).nonzero().flatten()[-1])
            later = (positions[first + 1 :] == 0).nonzero().flatten()
            end = first + 1 + int(later[0]) if len(later) else positions.size(0)
            mine = mb.loss_mask[row, start:end]
            prompt = tokenizer.decode(mb.input_ids[row, start : first + 1].tolist())
            answer = tokenizer.decode(mb.targets[row, start:end][mine].tolist())
            return (
                f"prompt: {prompt!r}\ntrained completion: {answer!r} "
                f"(advantage {float(mb.advantages[row, first]):+.3f}, sampled with the weights "
                f"of step {batch.policy_step})"
            )
    return "no trained tokens in this batch"


class TokenExport:
    def __init__(self, run_dir: Path, *, rank: int) -> None:
        self.dir = run_dir / "token_export"
        self.rank = rank
        self.dir.mkdir(parents=True, exist_ok=True)

    def write(self, step: int, batch: RolloutBatch, tokenizer) -> None:
        lines = []
        for mb in batch.micro_batches:
            for row in range(mb.input_ids.size(0)):
                starts = (mb.position_ids[row] == 0).nonzero().flatten().tolist()
                ends = [*starts[1:], mb.input_ids.size(1)]
                for start, end in zip(starts, ends, strict=True):
                    ids = mb.input_ids[row, start:end].tolist()
                    trained = mb.loss_mask[row, start:end]
                    if not bool(trained.any()):
                        continue  # padding
                    lines.append(
                        json.dumps(
                            {
                                "step": step,
                                "policy_step": batch.policy_step,
                                "input_ids": ids,
                                "text": tokenizer.decode(ids),
                                "trained_next": trained.tolist(),
                                "inference_logprobs": mb.inference_logprobs[
                                    row, start:end
                                ].tolist(),
                                "advantages": mb.advantages[row, start:end].tolist(),
                            }
                        )
                    )
        path = self.dir / f"step_{step}.rank_{self.rank}.jsonl"
        write_atomic(path, "".join(line + "\n" for line in lines))
