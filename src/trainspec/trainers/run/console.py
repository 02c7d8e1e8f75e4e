"""The console log of a trainer process, built from `[log]` (step progress is progress.py's).

    setup_logging(config.log, world.rank)

`setup_logging` puts one console handler on the root logger: the trainer's loggers ("trainspec"
and below) at `log.level`, the environment library's ("verifiers") at `log.vf_level`, every
other library at WARNING. With `json_logging` each record is one JSON object on its own line.
Ranks outside `ranks_filter` still print warnings and errors (a failing rank should be heard),
nothing below that. Unless the console is a terminal, the libraries' own progress bars
(datasets' maps, the hub's downloads, transformers' "Loading weights") are turned off: in a log
file each one is a line of noise.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
import time
from typing import Any, TextIO

from ..errors import SetupError

PROGRESS_LOGGER = "trainspec.progress"
_HANDLER_MARK = "_trainspec_console"


def _level(name: str, path: str) -> int:
    levels = logging.getLevelNamesMapping()
    level = levels.get(str(name).upper())
    if level is None:
        raise SetupError(
            path,
            f"unknown log level {name!r}",
            "use one of debug, info, warning, error, critical",
        )
    return level


def json_record(
    level: str, logger: str, message: str, created: float | None = None, **fields: Any
) -> str:
    stamp = dt.datetime.fromtimestamp(time.time() if created is None else created, dt.UTC)
    record = {
        "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "level": level,
        "logger": logger,
        "message": message,
    }
    record.update(fields)
    return json.dumps(record, default=str)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC), level, logger, rank, message, exception."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {"rank": self.rank}
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            fields["stack"] = record.stack_info
        return json_record(
            record.levelname, record.name, record.getMessage(), record.created, **fields
        )


class _ConsoleHandler(logging.StreamHandler):
    """A stream handler that writes around a live tqdm bar instead of through it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        self._tqdm = tqdm

    def emit(self, record: logging.LogRecord) -> None:
        if self._tqdm is None:
            super().emit(record)
            return
        try:
            self._tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def setup_logging(log_cfg, rank: int, stream: TextIO | None = None) -> logging.Handler:
    """Configure console logging for this process (see the module docstring).

    Calling it again replaces the handler it installed before. Returns that handler.
    """
    level = _level(log_cfg.level, "log.level")
    vf_level = _level(log_cfg.vf_level, "log.vf_level")
    json_logging = log_cfg.json_logging
    ranks = log_cfg.ranks_filter

    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()
    handler = _ConsoleHandler(stream if stream is not None else sys.stderr)
    setattr(handler, _HANDLER_MARK, True)
    if json_logging:
        handler.setFormatter(JsonFormatter(rank))
    else:
        prefix = "" if rank == 0 else f"[rank {rank}] "
        handler.setFormatter(
            logging.Formatter(
                f"%(asctime)s %(levelname)s {prefix}%(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"
            )
        )
    handler.setLevel(logging.NOTSET if rank in ranks else logging.WARNING)
    root.addHandler(handler)
    quiet_library_bars(handler.stream)
    root.setLevel(logging.WARNING)
    logging.getLogger("trainspec").setLevel(level)
    logging.getLogger("verifiers").setLevel(vf_level)
    return handler


def quiet_library_bars(stream: TextIO) -> None:
    """No progress bars from datasets, huggingface_hub or transformers unless `stream` is a
    terminal: their environment switches (read when each is first imported, and inherited by
    the processes this one starts), and their own switches for any already imported."""
    try:
        if stream.isatty():
            return
    except (AttributeError, ValueError, OSError):
        pass
    for switch in ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"):
        os.environ.setdefault(switch, "1")
    if (datasets := sys.modules.get("datasets")) is not None:
        datasets.disable_progress_bars()
    if (hub := sys.modules.get("huggingface_hub.utils")) is not None:
        hub.disable_progress_bars()
    if (transformers_logging := sys.modules.get("transformers.utils.logging")) is not None:
        transformers_logging.disable_progress_bar()
