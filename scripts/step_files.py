"""Which of trainspec's files run during one step of each training loop, and what in them.

    python scripts/step_files.py    # the SFT and the RL loop, a middle step each; then one RL
                                    # step end to end (orchestrator and trainer)

Each loop trains a few steps of its tiny config (configs/sft/tiny.toml, configs/rl/tiny.toml: the
built-in model, synthetic batches) in this process; a profile hook records every trainspec
function called from the end of step 2 to the end of step 3 (its bookkeeping included). The
files are listed by the part of the tree they sit in: the loop's own, the skeleton both loops
share (parts.py, session.py), the components, and the run pieces the session feeds (run/, and
the stop-signal flag the session reads in `stop_pending`, process/signals.py: the session's
bookkeeping, each one call per step, as run/control.py's operator stop is; what a reader needs
to open to follow the step is the rest).

The third section follows one RL step end to end, as `rl` runs it: the orchestrator samples
completions from the policy, scores them, packs and ships them, and the trainer learns from them
and publishes the new weights. It runs the real `rl` command on configs/rl/demo.toml, made short
and made to start from nothing: the built-in model instead of the demo's SFT checkpoint, 4 steps
of 16 samples, evaluations of 4 prompts, no checkpoint, and groups whose rewards are all equal
shipped too (an untrained model scores 0 on every sample, and the trainer would get empty
batches). `rl` starts the trainer and the orchestrator as two processes; a sitecustomize.py put
first on their PYTHONPATH loads this script into each (`install_tracing`, only where
TRAINSPEC_STEP_FILES_DIR is set) and wraps the `log` method of trainspec's `Monitor` class, found
by name when its module is imported: both sides log each step's metrics through it, the
orchestrator when it has shipped the batch the trainer's next step trains on. The profile hook
turns on when step 2 is logged and off when step 3 is, so the window is the orchestrator's batch
2 (its weights loaded, sampled, scored, shipped) and the trainer's step 3 (that batch received,
trained on, the weights published). When step 3 is logged each process writes the files and
functions it ran to <pid>.json in that directory; the union is listed, with the orchestrator's
files counted as the loop's own and each file marked with the side(s) that ran it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST, LAST = 2, 3  # the window: from the end of step FIRST to the end of step LAST
TRACE_DIR = "TRAINSPEC_STEP_FILES_DIR"  # where each traced `rl` process writes <pid>.json
RL_WAIT_S = 900
SESSION_PIECES = ("trainers/process/signals.py",)  # the session's own, beside run/ (docstring)
SITECUSTOMIZE = """\
import os

if os.environ.get({env!r}):
    import importlib.util

    _spec = importlib.util.spec_from_file_location("_step_files_trace", {script!r})
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    _module.install_tracing(os.environ[{env!r}])
"""
SHORT_DEMO = [  # configs/rl/demo.toml, short and from nothing (see the module docstring)
    "--model.name", "builtin:tiny-qwen3",
    "--max_steps", "4",
    "--orchestrator.batch_size", "16",
    "--orchestrator.eval.num_examples", "4",
    "--no-orchestrator.train.filter_zero_advantages",
    "--no-trainer.ckpt",
]  # fmt: skip


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


# -- one RL step end to end: run in each process `rl` starts --------------------------------------


def install_tracing(out_dir: str) -> None:
    """In a process of a traced `rl` run (from the sitecustomize.py written by `traced_rl_run`):
    wrap trainspec's `Monitor.log` when its module is imported, and record every trainspec
    function called from the logging of step FIRST to that of step LAST, written to
    out_dir/<pid>.json when the window closes. Imports of everything else are untouched."""
    import importlib.abc
    import threading

    seen: dict[str, set[str]] = defaultdict(set)
    state = {"phase": "before", "source": ""}  # before -> tracing -> done

    def hook(frame, event, arg) -> None:
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(state["source"]):
                seen[name[len(state["source"]) :]].add(frame.f_code.co_name)

    def logged(step: int) -> None:
        if state["phase"] == "before" and step == FIRST:
            import trainspec

            state["source"] = os.path.dirname(os.path.abspath(trainspec.__file__)) + os.sep
            state["phase"] = "tracing"
            threading.setprofile(hook)
            sys.setprofile(hook)
        elif state["phase"] == "tracing" and step == LAST:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
            state["phase"] = "done"
            files = {path.replace(os.sep, "/"): sorted(names) for path, names in seen.items()}
            record = {"side": sys.argv[1] if len(sys.argv) > 1 else "?", "files": files}
            partial = Path(out_dir) / f".{os.getpid()}.json"
            partial.write_text(json.dumps(record))
            partial.rename(partial.with_name(f"{os.getpid()}.json"))

    def wrap(cls) -> None:
        real = cls.log

        def log(self, step, *args, **kwargs):
            result = real(self, step, *args, **kwargs)
            logged(step)
            return result

        cls.log = log

    def patch(module) -> None:
        for value in list(vars(module).values()):
            if (
                isinstance(value, type)
                and value.__name__ == "Monitor"
                and value.__module__ == module.__name__
                and callable(value.__dict__.get("log"))
            ):
                wrap(value)

    class Finder(importlib.abc.MetaPathFinder):
        """Finds trainspec's modules with the finders after it, and patches each once run."""

        def find_spec(self, name, path, target=None):
            if not name.startswith("trainspec."):
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            loader = spec.loader
            if loader is not None and hasattr(loader, "exec_module"):
                run_module = loader.exec_module

                def exec_module(module) -> None:
                    run_module(module)
                    patch(module)

                loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def traced_rl_run(work: Path) -> dict[str, dict[str, set[str]]]:
    """Run `rl` on the short demo with every process traced; file -> side -> functions."""
    site, traces = work / "site", work / "traces"
    site.mkdir(parents=True)
    traces.mkdir()
    script = str(Path(__file__).resolve())
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(env=TRACE_DIR, script=script))
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, TRACE_DIR: str(traces)}
    command = [
        str(Path(sys.executable).parent / "rl"),
        str(ROOT / "configs" / "rl" / "demo.toml"),
        *SHORT_DEMO,
        "--output_dir",
        str(work / "run"),
    ]
    shown = ["rl", os.path.relpath(command[1], ROOT), *SHORT_DEMO, "--output_dir", "TMP/run"]
    print(f"\nrunning {' '.join(shown)} (both processes traced)", flush=True)
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        output, _ = process.communicate(timeout=RL_WAIT_S)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)  # `rl` stops both of its processes
        try:
            output, _ = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        output += f"\n(stopped after {RL_WAIT_S} s)"
    records = [json.loads(p.read_text()) for p in sorted(traces.glob("*.json"))]
    sides = sorted(record["side"] for record in records)
    if process.returncode != 0 or sides != ["orchestrator", "trainer"]:
        tail = "\n".join(output.splitlines()[-40:])
        raise RuntimeError(
            f"rl exited with {process.returncode}; step {FIRST} to {LAST} traced in "
            f"{sides or 'no process'} (wanted the orchestrator and the trainer):\n{tail}"
        )
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for record in records:
        for file, names in record["files"].items():
            seen[file][record["side"]].update(names)
    return seen


# -- the report ----------------------------------------------------------------------------------


def group(path: str, *kinds: str) -> str:
    if any(path.startswith(f"trainers/{kind}/") for kind in kinds):
        return "the loop's own"
    if path in ("trainers/parts.py", "trainers/session.py"):
        return "the shared skeleton"
    if path.startswith("trainers/run/") or path in SESSION_PIECES:
        return "run pieces the session feeds"
    return "components"


def ran_in(sides: dict[str, set[str]]) -> str:
    return "both" if len(sides) > 1 else "trainer" if "trainer" in sides else "orch"


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

        both = traced_rl_run(Path(out) / "end-to-end")
        groups = defaultdict(list)
        for path in sorted(both):
            groups[group(path, "rl", "orchestrator")].append(path)
        followed = len(both) - len(groups["run pieces the session feeds"])
        count = {
            side: sum(side in sides for sides in both.values())
            for side in ("trainer", "orchestrator")
        }
        print(
            f"\nrl end to end: {len(both)} files (trainer + orchestrator) run in one step; "
            f"{followed} to follow it (the trainer runs {count['trainer']}, the orchestrator "
            f"{count['orchestrator']})"
        )
        width = max([32, *(len(path) for path in both)])
        for name in ("the loop's own", "the shared skeleton", "components"):
            for path in groups[name]:
                names = ", ".join(sorted(set().union(*both[path].values())))[:60]
                print(f"  {name:<20} {path:<{width}} {ran_in(both[path]):<7} {names}")
        pieces = [
            f"{Path(p).stem} ({ran_in(both[p])})" for p in groups["run pieces the session feeds"]
        ]
        print(f"  {'+ run pieces':<20} {', '.join(pieces)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
