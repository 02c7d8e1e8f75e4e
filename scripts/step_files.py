"""Which of trainspec's files run during one step of each training loop, and what in them.

    python scripts/step_files.py            # the SFT and the RL loop, a middle step each

Each loop trains a few steps of its tiny config (configs/sft/tiny.toml, configs/rl/tiny.toml: the
built-in model, synthetic batches) in this process; a profile hook records every trainspec
function called from the end of step 2 to the end of step 3 (its bookkeeping included). The
files are listed by the part of the tree they sit in: the loop's own, the skeleton both loops
share (parts.py, session.py), the components, and the run pieces the session feeds (run/, each
one call per step: what a reader needs to open to follow the step is the rest).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def traced_step(kind: str, output_dir: Path) -> dict[str, set[str]]:
    import trainspec
    from trainspec.config import load
    from trainspec.trainers.session import Session

    source = str(Path(trainspec.__file__).parent)
    seen: dict[str, set[str]] = defaultdict(set)

    def hook(frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(source):
            seen[os.path.relpath(frame.f_code.co_filename, source)].add(frame.f_code.co_name)

    real = Session.after_step

    def after_step(self, step: int, metrics: dict) -> bool:
        stop = real(self, step, metrics)
        sys.setprofile(hook if step == 2 else None)  # from the end of step 2 to that of step 3
        return stop

    Session.after_step = after_step  # type: ignore[method-assign]
    try:
        if kind == "sft":
            from trainspec.trainers.sft.train import train
        else:
            from trainspec.trainers.rl.train import train
        overrides = {"max_steps": 4, "output_dir": str(output_dir), "ckpt": None}
        train(load(kind, [ROOT / "configs" / kind / "tiny.toml"], overrides).config)
    finally:
        sys.setprofile(None)
        Session.after_step = real  # type: ignore[method-assign]
    return seen


def group(path: str, kind: str) -> str:
    if path.startswith(f"trainers/{kind}/"):
        return "the loop's own"
    if path in ("trainers/parts.py", "trainers/session.py"):
        return "the shared skeleton"
    if path.startswith("trainers/run/"):
        return "run pieces the session feeds"
    return "components"


def main() -> int:
    with tempfile.TemporaryDirectory() as out:
        for kind in ("sft", "rl"):
            seen = traced_step(kind, Path(out) / kind)
            groups: dict[str, list[str]] = defaultdict(list)
            for path in sorted(seen):
                groups[group(path, kind)].append(path)
            followed = len(seen) - len(groups["run pieces the session feeds"])
            print(f"\n{kind}: {len(seen)} files run in one step; {followed} to follow it")
            for name in ("the loop's own", "the shared skeleton", "components"):
                for path in groups[name]:
                    print(f"  {name:<20} {path:<32} {', '.join(sorted(seen[path]))[:60]}")
            pieces = [Path(p).stem for p in groups["run pieces the session feeds"]]
            print(f"  {'+ run pieces':<20} {', '.join(pieces)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
