"""Steering a running trainer from outside, built from `[control]`: command files and signals.

    control = Control(config.control, default_dir=output_dir / "control")
    control.install()                    # signal handlers; main thread only
    ...
    commands = control.poll(step)        # at every step boundary
    if commands.checkpoint: save()
    if commands.stop: save() if control.checkpoint_on_stop else None; exit 0
    control.close()                      # the previous signal handlers come back

Two ways to ask, one answer per request:

- a file named `checkpoint` or `stop` in `dir`, looked for every `poll_interval_steps` steps and
  deleted once seen, so that dropping a file acts exactly once;
- `checkpoint_signal` / `stop_signal` (and Ctrl-C, SIGINT, for a stop): the handler only raises
  a flag, and the next `poll` takes it, so the current step always finishes. The same stop signal
  a second time (the trainer is already finishing or saving) goes to the handler that was there
  before: Ctrl-C twice interrupts a hung step.

`[control]` set to null turns all of this off: `poll` answers "nothing" and no handler is set.
In a job of several processes every process takes the signals (schedulers signal them all);
pass `read_files=False` on all but one so that a single process consumes each file, and let the
trainer combine the answers (`world.any_rank`).
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from ..errors import SetupError
from ..process.signals import SignalFlag

logger = logging.getLogger(__name__)

COMMANDS = ("checkpoint", "stop")


@dataclass(frozen=True, slots=True)
class Commands:
    """What the trainer is asked to do at this step boundary."""

    checkpoint: bool = False
    stop: bool = False

    def __bool__(self) -> bool:
        return self.checkpoint or self.stop


class Control:
    """Command files and signal handlers; see the module docstring."""

    def __init__(self, control_cfg, default_dir: Path, *, read_files: bool = True) -> None:
        self.enabled = control_cfg is not None
        self.dir: Path | None = None
        self.poll_interval_steps = 1
        self.checkpoint_on_stop = False
        # Signals raise a flag's count and `poll` compares it with what it last answered:
        # nothing that arrives while `poll` runs is lost.
        self._flags: dict[str, SignalFlag] = {}
        self._answered = {"checkpoint": 0, "stop": 0}
        self._read_files = read_files
        if control_cfg is None:
            return
        chosen = control_cfg.dir
        self.dir = Path(chosen).expanduser() if chosen is not None else Path(default_dir)
        self.poll_interval_steps = control_cfg.poll_interval_steps
        self.checkpoint_on_stop = control_cfg.checkpoint_on_stop
        for command, name in (
            ("checkpoint", control_cfg.checkpoint_signal),
            ("stop", control_cfg.stop_signal),
        ):
            if name is None:
                continue
            signals = {signal.Signals[name]}
            if command == "stop":  # Ctrl-C is a stop too: finish the step, save, say so
                signals.add(signal.SIGINT)
            at_once = (signal.SIGINT,) if command == "stop" else ()  # a second Ctrl-C
            self._flags[command] = SignalFlag(sorted(signals), repeat_passes_on=at_once)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            path = "control.dir" if chosen is not None else "output_dir"
            raise SetupError(
                path,
                f"cannot create the control directory {self.dir}: {exc.strerror or exc}",
                "point control.dir at a writable directory",
            ) from None
        for command in COMMANDS:
            if read_files and (self.dir / command).exists():
                logger.warning(
                    "a %r command file is already waiting in %s; it will act at the first poll",
                    command,
                    self.dir,
                )

    # -- signals ---------------------------------------------------------------------------

    def install(self) -> None:
        """Set the handlers of the configured signals (remembering the ones they replace)."""
        for flag in self._flags.values():
            flag.install()

    def close(self) -> None:
        """Put back the handlers that `install` replaced."""
        for flag in self._flags.values():
            flag.restore()

    def __enter__(self) -> Control:
        self.install()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _received(self, command: str) -> int:
        flag = self._flags.get(command)
        return flag.count if flag is not None else 0

    # -- polling ---------------------------------------------------------------------------

    def poll(self, step: int) -> Commands:
        """Requests that arrived since the last call; each request is answered once."""
        if not self.enabled:
            return Commands()
        wanted = {}
        for command in COMMANDS:
            received = self._received(command)
            wanted[command] = received != self._answered[command]
            self._answered[command] = received
        if self.dir is not None and self._read_files and step % self.poll_interval_steps == 0:
            for command in COMMANDS:
                if self._take_file(self.dir, command):
                    wanted[command] = True
        for command in COMMANDS:
            if wanted[command]:
                logger.info("control: %s requested at step %d", command, step)
        return Commands(checkpoint=wanted["checkpoint"], stop=wanted["stop"])

    def stop_pending(self) -> bool:
        """Whether a stop is waiting for the next `poll` (signal or command file); consumes
        nothing, so a loop blocked on input can give up early and let `poll` answer it."""
        if not self.enabled:
            return False
        if self._received("stop") != self._answered["stop"]:
            return True
        return self.dir is not None and (self.dir / "stop").exists()

    def _take_file(self, directory: Path, command: str) -> bool:
        path = directory / command
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            # Seen but not removable: act on it anyway, but say it will act again.
            if not path.exists():
                return False
            logger.warning("control: cannot remove %s (%s); remove it by hand", path, exc)
        return True
