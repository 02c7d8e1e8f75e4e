"""Helpers for the migrate-config tests: run the command in-process (and fail on a traceback),
write and read config files byte for byte, and the configs they start from."""

from __future__ import annotations

import io
from pathlib import Path

from trainspec.cli.migrate_config import run

ROOT = Path(__file__).resolve().parents[2]
DIRECTIVE = "#:schema ../generated/schemas/sft_trainer.json\n"
# What every test file needs besides [deployment] to be a valid SFT config.
BODY = """
[model]
name = "Qwen/Qwen3-0.6B"
seq_len = 64

[data]
type = "fake"
batch_size = 4
micro_batch_size = 2
seq_len = 64
"""


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    for stream in (out.getvalue(), err.getvalue()):
        assert "Traceback" not in stream and "internal error" not in stream, stream
    return code, out.getvalue(), err.getvalue()


def validate(path: Path) -> tuple[int, str]:
    """validate-config's verdict on a file (imported here: only some tests need it)."""
    from trainspec.cli import validate_config

    out, err = io.StringIO(), io.StringIO()
    code = validate_config.run([str(path)], out, err)
    return code, out.getvalue() + err.getvalue()


def write(tmp_path: Path, text: str, name: str = "run.toml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def listing(directory: Path) -> list[str]:
    """Every name in the directory, hidden ones too (a temporary is `.NAME.migrate-PID.tmp`)."""
    return sorted(entry.name for entry in directory.iterdir())


# A config with one renamed key, before and after migrate-config.
OLD = DIRECTIVE + BODY + "\n[deployment]\ngpus_per_node = 2\nnum_eval_gpus = 1\n"
NEW = OLD.replace("num_eval_gpus", "num_infer_gpus")
