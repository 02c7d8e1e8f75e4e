"""One torchrun worker of a multi-process SFT run: reads the resolved config `sft` wrote."""

from __future__ import annotations

import json
import sys

from trainspec.config import validate

from ..process.exit import exit_process
from ..process.malloc import tune_malloc
from .main import train_guarded


def main() -> int:
    tune_malloc()
    with open(sys.argv[1]) as handle:
        config = validate("sft", json.load(handle)).config
    return train_guarded(config)


if __name__ == "__main__":
    exit_process(main())
