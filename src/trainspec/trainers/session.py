"""What every loop does besides its own work (the SFT and RL trainers, the orchestrator): the
run directory at the start; around every step the metrics, console progress, heartbeat,
garbage collection, profiling and the operator's commands; when to save and when to stop; the
end of the run.

    document = start_run(config, "sft", run_dir, world, setting="run.name", clean=config.clean)
    ...build the parts, resume...
    session = Session(config, run_dir, run_name, document, world=world, save=save,
                      start=parts.start_step, resumed_from=parts.resumed_from)
    session.start()
    while ...:
        ...one step...
        if session.after_step(step, metrics):               # saves when due or asked
            break                                           # the operator asked to stop
    session.end(step)                                       # last save, plot, closing line

A stop that arrives while a loop waits for input (the RL trainer waiting for rollouts, the
orchestrator waiting for weights) ends the run at that boundary: `session.stop_pending` is the
loop's `should_stop`, then `session.stop_while_waiting(step)`. Every decision is the same on
every rank: one rank asked is every rank asked.

A piece whose table the command's config does not have is off: the orchestrator has no
[control], [gc] or profiler settings and saves nothing (no `save`); it stops on SIGTERM or
Ctrl-C at its next step boundary (`stop_signals`), and ends with `close()`, drawing its own
picture. `close()` is safe to call again, so a loop can register it on an ExitStack.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import torch

from trainspec.kinds import TrainerKind

from .core.world import World, any_rank
from .errors import SetupError
from .process.guard import raise_if_interrupted
from .process.signals import SignalFlag
from .run.banner import count_parameters, start_banner
from .run.collector import GarbageCollector
from .run.console import setup_logging
from .run.control import Control
from .run.heartbeat import Heartbeat
from .run.lock import release_run_dir
from .run.monitor import Monitor
from .run.plot import save_plot
from .run.profiler import Profiler
from .run.progress import Progress, duration
from .run.run_dir import claim_run_dir

# The command's start, near enough for the closing line's total time: every loop imports this
# module before it loads a model or data.
STARTED = time.monotonic()


def start_run(
    config, kind: TrainerKind, run_dir: Path, world: World, *, setting: str, clean: bool | None
) -> dict:
    """Console logging, matmul precision, and the run directory claimed for this run: locked,
    emptied under `clean`, its recorded identity checked, the resolved config written (rank 0;
    a refusal there is every rank's). `setting` chose the directory (run.name, output_dir).
    Returns the resolved config as a document on rank 0 ({} elsewhere), for the monitors."""
    setup_logging(config.log, world.rank)
    torch.set_float32_matmul_precision(config.matmul_precision)
    refusal: SetupError | None = None
    document: dict = {}
    if world.is_main:
        try:
            document = claim_run_dir(config, kind, run_dir, setting=setting, clean=clean)
        except SetupError as err:
            refusal = err
    if any_rank(refusal is not None, world):
        raise refusal or SetupError(setting, "rank 0 refused the run directory", "see rank 0")
    return document


class Session:
    """One run's step-by-step bookkeeping, each piece built from its own sub-config."""

    def __init__(
        self,
        config,
        run_dir: Path,
        run_name: str,
        document: dict,
        *,
        world: World,
        save: Callable[[int], Path] | None = None,
        start: int | None = 0,
        resumed_from: Path | None = None,
        progress: bool = True,
        stop_signals: tuple[signal.Signals, ...] = (),
    ) -> None:
        """A session of the loop from step `start` (the checkpoint `resumed_from`, if any; None:
        not known yet, see `continue_from`); `save(step)` checkpoints the loop (a collective).
        `progress` off leaves the console to another process's bar (the orchestrator under
        `rl`); `stop_signals` ask for a stop at the next step boundary, for a config without
        [control]."""
        self.world = world
        self.run_dir, self.run_name = run_dir, run_name
        self.max_steps: int | None = config.max_steps
        control = getattr(config, "control", None)
        self.control = Control(control, run_dir / "control", read_files=world.is_main)
        self.signals = SignalFlag(stop_signals) if stop_signals else None
        self.monitor = Monitor(config.monitors, run_dir, run_name, document, enabled=world.is_main)
        self._log_cfg, self._shows_progress = config.log, world.is_main and progress
        self.start_step = 0
        self.progress: Progress | None = None
        if start is not None:
            self.continue_from(start, resumed=resumed_from is not None)
        self.heartbeat = Heartbeat(config.heartbeat)
        self.collector = GarbageCollector(getattr(config, "gc", None))
        self.profiler = Profiler(
            getattr(config, "trace_path", None),
            getattr(config, "memory_profiler_path", None),
            world.device.type,
        )
        # [ckpt] off, or nothing to save: no periodic saves and none at the end; asked-for
        # ones still happen.
        saves = save is not None and config.ckpt is not None
        self.interval: int | None = config.ckpt.interval if saves else None
        self.save_at_end = saves
        self._save = save
        self.last_saved: Path | None = resumed_from
        self.saved_step = start if resumed_from is not None and start is not None else -1
        self.stopped = False
        self.closed = False

    def start(self) -> None:
        """Signal handlers on (a SIGTERM of the start-up that got lost is answered first); the
        setup's objects frozen out of the garbage collector."""
        raise_if_interrupted()
        self.control.install()
        if self.signals is not None:
            self.signals.install()
        self.collector.freeze_setup()

    def announce(
        self, command: str, model_name: str, model, data: str | None = None, steps: str = ""
    ) -> None:
        """Print the start banner on rank 0: the model and its parameters, the data, the steps
        (`steps`, else max_steps from where the run starts), the device and the run directory."""
        if not self.world.is_main:
            return
        if not steps:
            steps = f"{self.max_steps}" if self.max_steps is not None else "no max_steps"
        if self.start_step:
            steps += f", from step {self.start_step}"
        world = self.world
        banner = start_banner(
            command, model=model_name, parameters=count_parameters(model), data=data,
            steps=steps, device=world.device.type, processes=world.world_size,
            run_dir=self.run_dir,
        )  # fmt: skip
        print(banner, flush=True)

    def continue_from(self, step: int, *, resumed: bool) -> None:
        """The loop goes on from `step`: metrics an earlier attempt recorded past it are dropped
        (all of them when the run starts from nothing), and progress counts from it."""
        self.start_step = step
        self.monitor.continue_from(step if resumed else None)
        self.progress = Progress(self.max_steps, step, self._log_cfg, enabled=self._shows_progress)

    def log(self, step: int, metrics: dict) -> None:
        """Metrics outside a step (validation before the first one)."""
        self.monitor.log(step, metrics)

    def stop_pending(self) -> bool:
        """Whether a stop waits to be answered (for a loop blocked on its input)."""
        return self.control.stop_pending() or self._signalled()

    def _signalled(self) -> bool:
        return self.signals is not None and self.signals()

    def after_step(self, step: int, metrics: dict) -> bool:
        """Record the step that just ended, save if a checkpoint is due or asked for; True when
        the operator asked to stop (saved first under control.checkpoint_on_stop)."""
        self.monitor.log(step, metrics)
        assert self.progress is not None, "continue_from(step) before the first step"
        self.progress.update(step, metrics)
        self.heartbeat.beat(step)
        self.collector.step(step)
        self.profiler.step()
        return self._answer(step, due=self.due(step), when=f"after step {step}")

    def due(self, step: int) -> bool:
        """Whether a periodic checkpoint falls on `step` (every ckpt.interval steps)."""
        return self.interval is not None and step > 0 and step % self.interval == 0

    def stop_while_waiting(self, step: int) -> None:
        """A stop came while the loop waited for the input of step + 1: nothing is half done,
        so the run ends at this boundary."""
        self._answer(step, due=False, when=f"before step {step + 1}", stop=True)

    def _answer(self, step: int, *, due: bool, when: str, stop: bool = False) -> bool:
        asked = self.control.poll(step)
        checkpoint = any_rank(asked.checkpoint, self.world)
        stop = any_rank(asked.stop or self._signalled(), self.world) or stop
        on_stop = stop and self.control.checkpoint_on_stop
        if (due or checkpoint or on_stop) and self.saved_step != step and self._save:
            self.last_saved, self.saved_step = self._save(step), step
        if stop:
            self.stopped = True
            if self.progress is not None:
                self.progress.write(f"stop requested: stopping {when}")
        return stop

    def end(self, step: int, report: Callable[[], str | None] | None = None) -> None:
        """Save the last step (when [ckpt] is on and the run was not stopped), close every
        piece, then on rank 0 draw loss.png and print the closing line, with `report()`."""
        if self.save_at_end and self.saved_step != step and not self.stopped:
            assert self._save is not None
            self.last_saved, self.saved_step = self._save(step), step
        self.close()
        if self.world.is_main:
            plot = save_plot(self.monitor.history, self.run_dir / "loss.png", title=self.run_name)
            extra = report() if report is not None else None
            if step == self.start_step and self.max_steps is not None and step >= self.max_steps:
                extra = (
                    f"already complete: nothing to train past max_steps = {self.max_steps} "
                    "(raise max_steps to train on from here)"
                )
            took = time.monotonic() - STARTED
            line = closing_line(self.run_dir, step, self.last_saved, plot, extra, took)
            print(line, flush=True)

    def close(self) -> None:
        """Close every piece and release the run directory; a second call does nothing."""
        if self.closed:
            return
        self.closed = True
        self.control.close()
        if self.signals is not None:
            self.signals.restore()
        if self.progress is not None:
            self.progress.close()
        self.profiler.close()
        self.collector.close()
        self.heartbeat.close()
        self.monitor.close()
        release_run_dir(self.run_dir)


def closing_line(
    run_dir: Path,
    step: int,
    checkpoint: Path | None,
    plot: Path | None,
    report: str | None = None,
    seconds: float | None = None,
) -> str:
    """ "done after step N in H:MM:SS: run DIR; checkpoint ...; plot ...; <report>"."""
    took = f" in {duration(seconds)}" if seconds is not None else ""
    parts = [f"done after step {step}{took}: run {run_dir}"]
    parts.append(f"checkpoint {checkpoint}" if checkpoint else "no checkpoint ([ckpt] is off)")
    if plot:
        parts.append(f"plot {plot}")
    if report:
        parts.append(report)
    return "; ".join(parts)
