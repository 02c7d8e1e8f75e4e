"""`[monitors.wandb]` with the real wandb (the `wandb` extra), offline: every step's metrics
reach the run's W&B record log as they reach metrics.jsonl, and a resumed run continues the same
W&B run; what W&B records of the config holds no secret."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

pytest.importorskip("wandb", reason="the wandb extra: pip install -e '.[wandb]'")

from helpers.sft_support import metrics, run_dir, tiny_config  # noqa: E402
from wandb.proto import wandb_internal_pb2  # noqa: E402

from trainspec.trainers.sft.train import train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")
BLOCK = 32768  # the record log's block size (LevelDB's log format, which wandb writes)
HEADER = 7  # ":W&B", a magic number and a version


def records(path: Path) -> list[bytes]:
    """The records of a .wandb file: LevelDB log chunks (crc, length, type) joined."""
    data, pos, out, pending = path.read_bytes(), HEADER, [], b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a chunk header
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 1:  # full
            out.append(chunk)
        elif kind in (2, 3):  # first, middle
            pending += chunk
        elif kind == 4:  # last
            out.append(pending + chunk)
            pending = b""
    return out


def history(path: Path) -> list[dict]:
    rows = []
    for raw in records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            items = record.history.item
            rows.append(
                {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in items}
            )
    return rows


def offline_runs(run: Path) -> list[Path]:
    return sorted((run / "wandb").glob("offline-run-*"))


def test_metrics_reach_wandb_offline_and_a_resume_continues_the_run(tmp_path):
    wandb_cfg = {"project": "trainspec-test", "offline": True}
    secret = {"TRAINSPEC_TEST_TOKEN": "tok-s3cret-1234"}  # a TOKEN's value: W&B gets <redacted>
    config = tiny_config(
        tmp_path, max_steps=3, monitors__wandb=wandb_cfg, ckpt__interval=3, env_vars=secret
    )
    assert train(config) == 0
    run = run_dir(config)
    uploaded = [path for path in (run / "wandb").rglob("*") if path.is_file()]
    assert any(b"TRAINSPEC_TEST_TOKEN" in path.read_bytes() for path in uploaded)  # the config
    assert not [path for path in uploaded if b"tok-s3cret-1234" in path.read_bytes()]
    (first,) = offline_runs(run)
    (log,) = first.glob("run-*.wandb")
    logged = [(row["_step"], row["loss"]) for row in history(log)]
    assert logged == [(m["step"], pytest.approx(m["loss"])) for m in metrics(config)]

    more = tiny_config(tmp_path, max_steps=5, monitors__wandb=wandb_cfg, ckpt__interval=3)
    assert train(more) == 0
    runs = offline_runs(run)
    assert len(runs) == 2 and runs[1].name.split("-")[-1] == first.name.split("-")[-1]
    (second,) = runs[1].glob("run-*.wandb")
    assert [row["_step"] for row in history(second)] == [4, 5]
