"""How `rl` watches its two sides (and the vLLM server it started) until the run ends, and stops
them when one fails, ends too early or the operator asks.

    trainer, orchestrator = Tree(trainer_process), Tree(orchestrator_process)
    code = supervise(trainer, orchestrator, stop, server, max_steps=..., run_dir=...)

* A side that fails stops the other; the trainer is asked first (SIGTERM: it finishes its step
  and saves) and killed after STOP_GRACE_S.
* An orchestrator that exits 0 before the trainer has finished is a failure too, unless its
  sign of life (process/liveness.py) says it ran to its end, having evaluated the trainer's
  final weights: then the trainer has STOP_GRACE_S to save and exit.
* Killing the trainer kills its whole tree (process/tree.py): torchrun's workers run in
  sessions of their own and would outlive their agent.
* Every wait is bounded; a second Ctrl-C breaks any of them (KeyboardInterrupt, which `rl`
  answers by killing everything at once).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from ..process.liveness import orchestrator_sign, read_sign
from ..process.signals import SignalFlag
from ..process.tree import Tree
from ..serving.inference_server import InferenceServer

POLL_S = 0.2
NOTE_S = 2.0  # how often the processes under each side are noted (process/tree.py)
FINAL_EVAL_S = 600.0  # how long the orchestrator may take after the trainer's last step
STOP_GRACE_S = 600.0  # how long the trainer may take to finish its step and save


def say(message: str) -> None:
    sys.stderr.write(f"rl: {message}\n")
    sys.stderr.flush()


def _stop(process: subprocess.Popen, signum=signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(signum)


def _wait(process: subprocess.Popen, seconds: float) -> int | None:
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def stop_or_kill(side: Tree, name: str, grace_s: float) -> None:
    """SIGTERM to `side`, and its whole tree killed when it has not ended after `grace_s`
    (what is left under it is killed anyway)."""
    _stop(side.process)
    if _wait(side.process, grace_s) is None:
        say(f"the {name} has not ended {grace_s:.0f} s after SIGTERM: killing it, and every "
            "process under it")  # fmt: skip
    side.kill()


def exit_text(code: int) -> str:
    """How a process ended, and where to look for why."""
    if code == -signal.SIGKILL or code == 128 + signal.SIGKILL:
        return (
            "was killed by SIGKILL from outside (it could print nothing: the kernel's "
            "out-of-memory killer, a scheduler or `kill -9`; `dmesg` tells an OOM kill)"
        )
    if code < 0:
        return f"was killed by {signal.Signals(-code).name} (its last output is above)"
    return f"failed with exit code {code} (its message is above)"


def _finished(orchestrator: subprocess.Popen, run_dir: Path) -> tuple[bool, str]:
    """Whether the orchestrator that exited 0 ran to its end, by its sign of life, and where
    it was."""
    record = read_sign(orchestrator_sign(run_dir))
    if record is None or record.get("pid") != orchestrator.pid:
        return False, "before it said where it was"
    how = record.get("how")
    step = record.get("step")
    where = f"at its step {step}" if step is not None else "before its first step"
    return how == "finished", f"{where} ({how})"


def supervise(
    trainer: Tree,
    orchestrator: Tree,
    stop: SignalFlag,
    server: InferenceServer | None = None,
    *,
    max_steps: int | None = None,
    run_dir: Path = Path("."),
) -> int:
    forwarded = False
    trainer_deadline: float | None = None  # asked to stop, or the orchestrator finished
    noted = 0.0
    while True:
        if time.monotonic() - noted > NOTE_S:
            noted = time.monotonic()
            trainer.note()
            orchestrator.note()
        server_code = server.poll() if server is not None else None
        if server is not None and server_code is not None and not forwarded:
            say(
                f"the vLLM server exited with code {server_code} (its log: "
                f"{server.plan.log_path}); stopping the trainer, which saves a checkpoint first"
            )
            _stop(orchestrator.process)
            stop_or_kill(trainer, "trainer", STOP_GRACE_S)
            return 1
        if stop() and not forwarded:
            say("stopping: the trainer finishes its step and saves, the orchestrator stops")
            _stop(trainer.process)
            _stop(orchestrator.process)
            forwarded = True
            trainer_deadline = time.monotonic() + STOP_GRACE_S
        trainer_code, orchestrator_code = trainer.process.poll(), orchestrator.process.poll()
        if trainer_code is not None:
            if trainer_code != 0:
                say(f"the trainer {exit_text(trainer_code)}; stopping the orchestrator")
                stop_or_kill(orchestrator, "orchestrator", 30)
                return 1
            if _wait(orchestrator.process, 30 if forwarded else FINAL_EVAL_S) is None:
                _stop(orchestrator.process)
                _wait(orchestrator.process, 30)
            return 0
        if orchestrator_code not in (None, 0) and not forwarded:
            say(
                f"the orchestrator {exit_text(orchestrator_code)}; stopping the trainer, "
                "which saves a checkpoint first"
            )
            stop_or_kill(trainer, "trainer", STOP_GRACE_S)
            return 1
        if orchestrator_code == 0 and not forwarded and trainer_deadline is None:
            finished, where = _finished(orchestrator.process, run_dir)
            if not finished:
                say(
                    f"the orchestrator exited with code 0 {where}, before the trainer "
                    f"finished (max_steps = {max_steps}): no more batches will come; stopping "
                    "the trainer, which saves a checkpoint first (its log says why it ended)"
                )
                stop_or_kill(trainer, "trainer", STOP_GRACE_S)
                return 1
            trainer_deadline = time.monotonic() + STOP_GRACE_S
        if trainer_deadline is not None and time.monotonic() > trainer_deadline:
            if forwarded:
                say(f"the trainer has not ended {STOP_GRACE_S:.0f} s after it was asked to "
                    "stop: killing it, and every process under it")  # fmt: skip
                trainer.kill()
            else:
                say(f"the trainer has not ended {STOP_GRACE_S:.0f} s after the orchestrator "
                    "evaluated its final weights; stopping it")  # fmt: skip
                stop_or_kill(trainer, "trainer", 30)
            return 1
        time.sleep(POLL_S)
