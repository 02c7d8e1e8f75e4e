"""Where the training metrics go, built from `[monitors]`: a JSON-lines file and Weights & Biases.

    monitor = Monitor(config.monitors, run_dir, run_name, config=dump_json_dict, enabled=is_main)
    monitor.log(step, {"loss": 2.31, "lr": 1e-5})
    save_plot(monitor.history, run_dir / "loss.png")
    monitor.close()

The file (`monitors.file.path`, relative to the run directory) gets one JSON object per `log`
call: `step`, `timestamp` (Unix seconds) and the metrics. A resumed run appends to it, and the
lines already there are read back into `history`, so plots cover the whole run; when a resumed
run starts again from a step it had logged before the restart, the entries from that step on
leave `history` (the file keeps every line). Values JSON cannot hold (NaN, infinities) are
written as null.

Weights & Biases is used when `[monitors.wandb]` is set; wandb is imported only then. The run id
is kept in `<run_dir>/wandb-run-id`, so a resumed run continues the same W&B run.

Only the process with `enabled=True` (rank 0) writes anything. A sink that fails while training
(full disk, network) is reported once and then skipped: monitoring never stops training.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any, TextIO

from ..errors import SetupError
from .atomic_files import write_atomic
from .redaction import redacted

logger = logging.getLogger(__name__)

WANDB_ID_FILE = "wandb-run-id"


def _plain(value: Any) -> Any:
    """A value JSON (and W&B) can hold: tensors and numpy scalars become numbers."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (TypeError, ValueError, RuntimeError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


class Monitor:
    """The metrics sinks of one run; see the module docstring."""

    def __init__(
        self,
        monitors_cfg,
        run_dir: Path,
        run_name: str,
        config: dict | None = None,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self.history: list[dict] = []
        self.path: Path | None = None
        self._file: TextIO | None = None
        self._wandb_run: Any = None  # a wandb Run once [monitors.wandb] starts one
        self._failed: set[str] = set()
        self._session_step: int | None = None
        run_dir = self.run_dir = Path(run_dir)
        file_cfg = monitors_cfg.file if monitors_cfg is not None else None
        wandb_cfg = monitors_cfg.wandb if monitors_cfg is not None else None
        if file_cfg is not None:
            path = Path(file_cfg.path).expanduser()
            self.path = path if path.is_absolute() else run_dir / path
        wandb_init = None
        if wandb_cfg is not None:
            wandb_init = {
                "project": wandb_cfg.project,
                "entity": wandb_cfg.entity,
                "name": wandb_cfg.name or run_name,
                "group": wandb_cfg.group,
                "tags": list(wandb_cfg.tags) if wandb_cfg.tags is not None else None,
                "dir": str(run_dir),
                "config": redacted(config),  # W&B keeps no header or secret env value
            }
            if wandb_cfg.offline:
                wandb_init["mode"] = "offline"
        if not enabled:
            return
        try:
            if self.path is not None:
                self._open_file(self.path)
            if wandb_init is not None:
                self._start_wandb(wandb_init, run_dir)
        except BaseException:
            self.close()  # what opened before the failure
            raise

    # -- the JSON-lines file ---------------------------------------------------------------

    def _open_file(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            ends_cleanly = True
            if path.exists():
                text = path.read_text(encoding="utf-8", errors="replace")
                self.history = self._read_back(text)
                ends_cleanly = text == "" or text.endswith("\n")
            self._file = path.open("a", encoding="utf-8")
            if not ends_cleanly:  # a line cut short by a crash: start a fresh one
                self._file.write("\n")
        except OSError as exc:
            raise SetupError(
                "monitors.file.path",
                f"cannot write the metrics file {path}: {exc.strerror or exc}",
                'use a writable path, or turn the file off with [monitors] file = "None"',
            ) from None

    def continue_from(self, step: int | None) -> None:
        """The run goes on from `step` (the checkpoint it resumed; None: from nothing). Records
        past it were logged by an attempt that ended before its next checkpoint, and the steps
        are about to be trained again: they leave `history` and the file, so the file holds
        each step once. The file is rewritten whole (a new file renamed over it); one outside
        the run directory, which another run may share, keeps its lines, with a warning."""
        if not self.enabled:
            return
        keep = [r for r in self.history if step is not None and r["step"] <= step]
        dropped = len(self.history) - len(keep)
        if not dropped:
            return
        self.history = keep
        if self._file is None or self.path is None:
            return
        path = self.path
        if not path.resolve().is_relative_to(self.run_dir.resolve()):
            logger.warning(
                "%s: %d records past step %s stay (the file is outside the run directory)",
                path, dropped, step,
            )  # fmt: skip
            return
        self._file.close()
        self._file = None
        try:
            write_atomic(path, "".join(json.dumps(r, allow_nan=False) + "\n" for r in keep))
        finally:
            self._file = path.open("a", encoding="utf-8")
        logger.info(
            "%s: dropped %d records past step %s, logged before the last restart",
            path, dropped, step,
        )  # fmt: skip

    def has(self, step: int, metric: str) -> bool:
        """Whether `metric` was logged for `step` (by this session or one before it)."""
        return any(r["step"] == step and metric in r for r in self.history)

    def _read_back(self, text: str) -> list[dict]:
        history, skipped = [], 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                history.append(record)
            else:
                skipped += 1
        if skipped:
            logger.warning("%s: skipped %d unreadable line(s) of earlier runs", self.path, skipped)
        if history:
            logger.info("%s: resuming after %d earlier record(s)", self.path, len(history))
        return history

    # -- Weights & Biases ------------------------------------------------------------------

    def _start_wandb(self, init: dict, run_dir: Path) -> None:
        try:
            import wandb
        except ImportError:
            raise SetupError(
                "monitors.wandb",
                "Weights & Biases logging is set, but wandb is not installed",
                "pip install wandb, or drop [monitors.wandb] from the config",
            ) from None
        id_file = run_dir / WANDB_ID_FILE
        try:
            run_id = id_file.read_text(encoding="utf-8").strip() or None
        except OSError:
            run_id = None
        if run_id is not None:
            init.update(id=run_id, resume="allow")
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._wandb_run = wandb.init(**init)
        except Exception as exc:
            raise SetupError(
                "monitors.wandb",
                f"wandb.init failed: {exc}",
                "run `wandb login` (or set WANDB_API_KEY), or set offline = true in "
                "[monitors.wandb]",
            ) from None
        new_id = getattr(self._wandb_run, "id", None)
        if new_id and new_id != run_id:
            try:
                write_atomic(id_file, f"{new_id}\n")
            except OSError as exc:
                logger.warning("cannot keep the W&B run id in %s: %s", id_file, exc)

    # -- logging ---------------------------------------------------------------------------

    def log(self, step: int, metrics: dict) -> None:
        """Send one step's metrics to every sink (and to `history`)."""
        if not self.enabled:
            return
        values = {str(k): _plain(v) for k, v in metrics.items()}
        record = {"step": int(step), "timestamp": round(time.time(), 3), **values}
        # The first step a session logs, or a step below the last one it logged, means the
        # run went back to a checkpoint: what came after that point leaves `history`. Several
        # calls for one step (train metrics, then val metrics) keep each other.
        if self._session_step is None or step < self._session_step:
            self.history = [r for r in self.history if r["step"] < step]
        self._session_step = step
        self.history.append(record)
        if self._file is not None:
            self._guard("file", self._write_line, self._file, record)
        if self._wandb_run is not None:
            self._guard("wandb", self._wandb_run.log, values, step=int(step))

    def _write_line(self, file: TextIO, record: dict) -> None:
        file.write(json.dumps(record, allow_nan=False) + "\n")
        file.flush()

    def _guard(self, sink: str, call, *args, **kwargs) -> None:
        try:
            call(*args, **kwargs)
        except Exception as exc:
            if sink not in self._failed:
                self._failed.add(sink)
                logger.warning(
                    "metrics sink %s failed (%s); training goes on without it", sink, exc
                )

    def close(self) -> None:
        """Flush and close the file, finish the W&B run."""
        if self._file is not None:
            self._guard("file", self._file.close)
            self._file = None
        if self._wandb_run is not None:
            self._guard("wandb", self._wandb_run.finish)
            self._wandb_run = None

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
