"""Monitor: the JSON-lines metrics file (with resume) and W&B through a stand-in module."""

from __future__ import annotations

import json
import math
import sys
import types

import pytest

from trainspec.config import load
from trainspec.trainers.errors import SetupError
from trainspec.trainers.run.monitor import WANDB_ID_FILE, Monitor


def monitors_cfg(overrides=None):
    return load("sft", [], overrides or {}).config.monitors


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_line_per_log_call_under_the_run_dir(tmp_path):
    monitor = Monitor(monitors_cfg(), tmp_path / "run", "demo", {}, enabled=True)
    monitor.log(1, {"loss": 2.5, "lr": 1e-5})
    monitor.log(2, {"loss": 2.0, "lr": 2e-5})
    monitor.close()
    records = lines(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2]
    assert records[1]["loss"] == 2.0 and records[1]["lr"] == 2e-5
    assert all(isinstance(r["timestamp"], float) for r in records)
    assert monitor.history == records


def test_absolute_path_and_odd_values(tmp_path):
    target = tmp_path / "elsewhere" / "m.jsonl"

    class Scalar:  # what a tensor or numpy scalar looks like to the monitor
        def item(self):
            return 0.5

    monitor = Monitor(
        monitors_cfg({"monitors.file.path": str(target)}), tmp_path / "run", "demo", {}, True
    )
    monitor.log(1, {"loss": math.nan, "grad_norm": math.inf, "x": Scalar(), "tag": "a"})
    monitor.close()
    (record,) = lines(target)  # strict JSON: NaN and inf are null
    assert record["loss"] is None and record["grad_norm"] is None
    assert record["x"] == 0.5 and record["tag"] == "a"
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_resume_appends_and_reads_history_back(tmp_path):
    first = Monitor(monitors_cfg(), tmp_path, "demo", {}, True)
    for step in range(1, 6):
        first.log(step, {"loss": 10.0 - step})
    first.close()
    second = Monitor(monitors_cfg(), tmp_path, "demo", {}, True)
    assert [r["step"] for r in second.history] == [1, 2, 3, 4, 5]
    # The last checkpoint was at step 3: the run logs step 4 again.
    second.log(4, {"loss": 1.0})
    second.log(4, {"val_loss": 1.5})  # a second record for the same step keeps the first
    second.log(5, {"loss": 0.5})
    second.close()
    assert [r["step"] for r in second.history] == [1, 2, 3, 4, 4, 5]
    assert second.history[3]["loss"] == 1.0
    assert [r["step"] for r in lines(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4, 5, 4, 4, 5]


def test_a_line_cut_short_by_a_crash_is_skipped(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 3.0}\n{"step": 2, "lo')
    monitor = Monitor(monitors_cfg(), tmp_path, "demo", {}, True)
    assert [r["step"] for r in monitor.history] == [1]
    assert "unreadable" in caplog.text
    monitor.log(2, {"loss": 2.0})
    monitor.close()
    text = path.read_text().splitlines()
    assert json.loads(text[-1])["loss"] == 2.0


def test_file_off_and_disabled_rank_write_nothing(tmp_path):
    off = Monitor(monitors_cfg({"monitors.file": None}), tmp_path, "demo", {}, True)
    off.log(1, {"loss": 1.0})
    off.close()
    assert off.history == [{"step": 1, "timestamp": off.history[0]["timestamp"], "loss": 1.0}]
    quiet = Monitor(monitors_cfg(), tmp_path, "demo", {}, enabled=False)
    quiet.log(1, {"loss": 1.0})
    quiet.close()
    assert list(tmp_path.iterdir()) == [] and quiet.history == []


def test_unwritable_file_is_a_setup_error(tmp_path):
    (tmp_path / "a-file").touch()
    cfg = monitors_cfg({"monitors.file.path": str(tmp_path / "a-file" / "m.jsonl")})
    with pytest.raises(SetupError) as info:
        Monitor(cfg, tmp_path, "demo", {}, True)
    assert info.value.path == "monitors.file.path"


def test_a_failing_write_never_stops_training(tmp_path, caplog):
    monitor = Monitor(monitors_cfg(), tmp_path, "demo", {}, True)
    monitor._file.close()  # as if the disk went away
    monitor.log(1, {"loss": 1.0})
    monitor.log(2, {"loss": 1.0})
    assert caplog.text.count("metrics sink file failed") == 1
    assert [r["step"] for r in monitor.history] == [1, 2]


# -- Weights & Biases ----------------------------------------------------------------------


class FakeRun:
    def __init__(self, init):
        self.init = init
        self.id = init.get("id", "run-abc")
        self.logged = []
        self.finished = False

    def log(self, values, step):
        self.logged.append((step, values))

    def finish(self):
        self.finished = True


@pytest.fixture
def fake_wandb(monkeypatch):
    module = types.ModuleType("wandb")
    module.runs = []

    def init(**kwargs):
        run = FakeRun(kwargs)
        module.runs.append(run)
        return run

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


WANDB = {
    "monitors.wandb": {
        "project": "proj",
        "entity": "team",
        "name": "my-run",
        "group": "ablation",
        "tags": ["a", "b"],
        "offline": True,
    }
}


def test_wandb_init_and_log(tmp_path, fake_wandb):
    monitor = Monitor(monitors_cfg(WANDB), tmp_path, "demo", {"max_steps": 3}, True)
    monitor.log(1, {"loss": 2.0, "lr": 1e-5})
    monitor.close()
    (run,) = fake_wandb.runs
    assert run.init == {
        "project": "proj",
        "entity": "team",
        "name": "my-run",
        "group": "ablation",
        "tags": ["a", "b"],
        "dir": str(tmp_path),
        "config": {"max_steps": 3},
        "mode": "offline",
    }
    assert run.logged == [(1, {"loss": 2.0, "lr": 1e-5})]
    assert run.finished
    assert (tmp_path / WANDB_ID_FILE).read_text().strip() == "run-abc"


def test_wandb_online_defaults_and_resume(tmp_path, fake_wandb):
    cfg = monitors_cfg({"monitors.wandb": {}})
    Monitor(cfg, tmp_path, "demo", {}, True).close()
    Monitor(cfg, tmp_path, "demo", {}, True).close()
    first, second = fake_wandb.runs
    assert "mode" not in first.init  # WANDB_MODE from the environment still applies
    assert first.init["project"] == "prime-rl" and first.init["tags"] is None
    assert "id" not in first.init
    assert second.init["id"] == "run-abc" and second.init["resume"] == "allow"


def test_wandb_name_falls_back_to_the_run_name(tmp_path, fake_wandb):
    cfg = monitors_cfg({"monitors.wandb": {}})
    cfg.wandb.name = None  # the config layer normally fills it in already
    Monitor(cfg, tmp_path, "demo-run", {}, True).close()
    assert fake_wandb.runs[0].init["name"] == "demo-run"


def test_wandb_failures_while_logging_are_warnings(tmp_path, fake_wandb, caplog):
    monitor = Monitor(monitors_cfg(WANDB), tmp_path, "demo", {}, True)

    def broken(values, step):
        raise ConnectionError("network down")

    fake_wandb.runs[0].log = broken
    monitor.log(1, {"loss": 1.0})
    monitor.log(2, {"loss": 1.0})
    monitor.close()
    assert caplog.text.count("metrics sink wandb failed") == 1
    assert len(lines(tmp_path / "metrics.jsonl")) == 2


def test_wandb_not_installed(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # makes `import wandb` fail
    with pytest.raises(SetupError) as info:
        Monitor(monitors_cfg(WANDB), tmp_path, "demo", {}, True)
    assert info.value.path == "monitors.wandb"
    assert "pip install wandb" in info.value.fix and "[monitors.wandb]" in info.value.fix
    assert "monitors.wandb: error:" in info.value.render()


def test_wandb_not_installed_is_fine_on_other_ranks(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    Monitor(monitors_cfg(WANDB), tmp_path, "demo", {}, enabled=False).close()
