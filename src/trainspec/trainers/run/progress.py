"""Step progress on the console, built from `[log]`.

    progress = Progress(config.max_steps, start=step, log_cfg=config.log, enabled=world.is_main)
    progress.update(step, {"loss": 2.31, "lr": 1e-5, "tokens_per_s": 5400.0})
    progress.write("stop requested")
    progress.close()

`Progress` shows a tqdm bar (step, loss, tokens/s, ETA) when its stream is a terminal and tqdm
is installed; otherwise it writes a plain line (step, loss, lr, tokens/s, elapsed, ETA) at most
every `log.interval` seconds, plus one for the last step at `close()`; in JSON mode those lines
are JSON records too. It reads "loss", "reward" (RL), "val_loss" (the latest stays shown), "lr",
"epoch" (shown, and said when a new one begins, from the second on) and "tokens_per_s"; others
are left to the monitors. The validation loss is shown with the step it was measured at ("val
loss 0.0849 @ 250"), so an old one never reads as the current step's. A stream that breaks
(closed pipe) silences the progress, never the training.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from .console import PROGRESS_LOGGER, json_record


def duration(seconds: float) -> str:
    seconds = int(max(0.0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class Progress:
    """Step progress on the console; see the module docstring."""

    def __init__(
        self,
        total: int | None,
        start: int,
        log_cfg,
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.total = total
        self.start = start
        self.interval = log_cfg.interval
        self.json = log_cfg.json_logging
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._t0 = time.monotonic()
        self._last_line = -math.inf  # monotonic time of the last plain line
        self._step = start
        self._printed_step: int | None = None
        self._metrics: dict = {}
        self._rates: list[float] = []  # tokens/s of the steps since the last line
        self._val_loss: float | None = None  # the latest validation loss
        self._val_step: int | None = None  # ... and the step it was measured at
        self._epoch = 0  # passes over the data begun (SFT), counted from 0
        self._updated = False
        self._bar = None
        if enabled and self._is_terminal():
            self._bar = self._make_bar()

    def _is_terminal(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):
            return False

    def _make_bar(self):
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        return tqdm(
            total=self.total,
            initial=self.start,
            file=self.stream,
            unit="step",
            desc="train",
            dynamic_ncols=True,
        )

    def update(self, step: int, metrics: dict) -> None:
        """Record that `step` finished with these metrics; print if it is time to."""
        if not self.enabled:
            return
        done, self._step = step - self._step, step
        self._metrics = metrics
        val_loss = _number(metrics.get("val_loss"))
        if val_loss is not None:
            self._val_loss, self._val_step = val_loss, step
        epoch = _number(metrics.get("epoch"))
        if epoch is not None and epoch > self._epoch:
            begun, self._epoch = self._updated, int(epoch)  # a resumed run's first is no news
            if begun:
                self.write(f"epoch {self._epoch + 1} begins: the data has been seen {self._epoch}x")
        self._updated = True
        rate = _number(metrics.get("tokens_per_s"))
        if rate is not None:
            self._rates.append(rate)
        if self._bar is not None:
            self._guard(self._update_bar, self._bar, done)
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval:
            self._last_line = now
            self._guard(self._line)

    def _update_bar(self, bar, done: int) -> None:
        postfix = []
        loss = _number(self._metrics.get("loss"))
        if loss is not None:
            postfix.append(f"loss={loss:.4f}")
        reward = _number(self._metrics.get("reward"))
        if reward is not None:
            postfix.append(f"reward={reward:.3f}")
        if self._val_loss is not None:
            postfix.append(f"val={self._val_loss:.4f}@{self._val_step}")
        lr = _number(self._metrics.get("lr"))
        if lr is not None:
            postfix.append(f"lr={lr:.1e}")
        if self._epoch:
            postfix.append(f"epoch={self._epoch + 1}")
        if self._rates:
            postfix.append(f"tok/s={self._rates[-1]:,.0f}")
            self._rates.clear()
        bar.set_postfix_str(", ".join(postfix), refresh=False)
        bar.update(done)

    def _eta(self, elapsed: float) -> float | None:
        if self.total is None or self._step <= self.start or elapsed <= 0:
            return None
        per_step = elapsed / (self._step - self.start)
        return per_step * max(0, self.total - self._step)

    def _line(self) -> None:
        elapsed = time.monotonic() - self._t0
        eta = self._eta(elapsed)
        loss = _number(self._metrics.get("loss"))
        lr = _number(self._metrics.get("lr"))
        rate = sum(self._rates) / len(self._rates) if self._rates else None
        self._rates.clear()
        self._printed_step = self._step
        parts = [f"step {self._step}" + (f"/{self.total}" if self.total is not None else "")]
        if loss is not None:
            parts.append(f"loss {loss:.4f}")
        reward = _number(self._metrics.get("reward"))
        if reward is not None:
            parts.append(f"reward {reward:.3f}")
        if self._val_loss is not None:
            parts.append(f"val loss {self._val_loss:.4f} @ {self._val_step}")
        if lr is not None:
            parts.append(f"lr {lr:.2e}")
        if self._epoch:
            parts.append(f"epoch {self._epoch + 1}")
        if rate is not None:
            parts.append(f"{rate:,.0f} tok/s")
        parts.append(f"elapsed {duration(elapsed)}")
        if eta is not None:
            parts.append(f"eta {duration(eta)}")
        text = " | ".join(parts)
        if self.json:
            fields = {"step": self._step, "total": self.total, "loss": loss, "lr": lr}
            fields |= {"val_loss": self._val_loss, "val_step": self._val_step}
            fields["epoch"] = self._epoch + 1
            fields |= {"tokens_per_s": rate, "elapsed_s": round(elapsed, 3)}
            fields["eta_s"] = round(eta, 3) if eta is not None else None
            text = json_record("INFO", PROGRESS_LOGGER, text, **fields)
        self._emit(text)

    def write(self, msg: str) -> None:
        """Print a message without breaking the bar."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._guard(self._bar.write, msg, file=self.stream)
        elif self.json:
            self._guard(self._emit, json_record("INFO", PROGRESS_LOGGER, msg))
        else:
            self._guard(self._emit, msg)

    def _emit(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def _guard(self, call, *args, **kwargs) -> None:
        try:
            call(*args, **kwargs)
        except (OSError, ValueError):  # closed or broken stream: stop printing progress
            self.enabled = False

    def close(self) -> None:
        """Close the bar, or print the last step if its line was skipped."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._guard(self._bar.close)
            self._bar = None
        elif self._printed_step != self._step and self._step > self.start:
            self._guard(self._line)
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
