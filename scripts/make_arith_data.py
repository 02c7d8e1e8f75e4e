"""Writes configs/rl/arith/{train,test}.jsonl: every sum a + b of two numbers below 30, as chat
rows (the user asks "a+b=", the assistant answers the sum), 100 of the 900 held out, in a seeded
order. The data of the user-data RL demo (configs/rl/arith-sft.toml, configs/rl/arith.toml);
the files are committed, so nothing runs this at training time.

    .venv/bin/python scripts/make_arith_data.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "configs" / "rl" / "arith"
HELD_OUT = 100


def row(a: int, b: int) -> dict:
    return {
        "messages": [
            {"role": "user", "content": f"{a}+{b}="},
            {"role": "assistant", "content": str(a + b)},
        ]
    }


def main() -> None:
    sums = [(a, b) for a in range(30) for b in range(30)]
    random.Random(0).shuffle(sums)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, part in (("test", sums[:HELD_OUT]), ("train", sums[HELD_OUT:])):
        lines = "".join(json.dumps(row(a, b)) + "\n" for a, b in part)
        (OUT / f"{name}.jsonl").write_text(lines)
        print(f"{OUT / name}.jsonl: {len(part)} rows")


if __name__ == "__main__":
    main()
