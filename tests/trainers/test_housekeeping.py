"""GarbageCollector and Profiler: real collections, a real torch trace, the CUDA-only snapshot."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest

from trainspec.config import load
from trainspec.trainers.errors import SetupError
from trainspec.trainers.housekeeping import GarbageCollector, Profiler


def gc_cfg(interval):
    return load("sft", [], {"gc.interval": interval}).config.gc


@pytest.fixture
def collections():
    """Count the full collections that start while the test runs."""
    seen = []

    def callback(phase, info):
        if phase == "start" and info["generation"] == 2:
            seen.append(info)

    was_enabled = gc.isenabled()
    gc.callbacks.append(callback)
    yield seen
    gc.callbacks.remove(callback)
    if was_enabled:
        gc.enable()


def test_collects_every_interval_and_restores(collections):
    gc.enable()
    collector = GarbageCollector(gc_cfg(3))
    assert not gc.isenabled()
    for step in range(1, 8):
        collector.step(step)
    assert len(collections) == 2  # steps 3 and 6
    collector.close()
    assert gc.isenabled()


def test_null_keeps_pythons_collector(collections):
    gc.enable()
    collector = GarbageCollector(None)
    assert gc.isenabled()
    for step in range(1, 100):
        collector.step(step)
    assert collections == []
    collector.close()
    assert gc.isenabled()


def test_close_leaves_a_disabled_collector_disabled(collections):
    gc.disable()
    collector = GarbageCollector(gc_cfg(1))
    collector.close()
    assert not gc.isenabled()


def test_trace_of_a_matmul_loop(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "traces" / "trace.json"
    profiler = Profiler(str(path), None, "cpu")
    a = torch.randn(64, 64)
    for _ in range(3):
        a = torch.tanh(a @ a)
        profiler.step()
    profiler.close()
    events = json.loads(path.read_text())["traceEvents"]
    names = {event.get("name", "") for event in events}
    assert any("aten::mm" in name or "aten::matmul" in name for name in names)
    assert any(name.startswith("ProfilerStep#") for name in names)


def test_memory_snapshot_needs_cuda(tmp_path):
    with pytest.raises(SetupError) as info:
        Profiler(str(tmp_path / "trace.json"), str(tmp_path / "mem.pickle"), "cpu")
    assert info.value.path == "memory_profiler_path"
    assert "needs a CUDA device" in info.value.problem
    assert not (tmp_path / "trace.json").exists()


def test_memory_snapshot_calls_on_cuda(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    calls = []
    monkeypatch.setattr(
        torch.cuda.memory, "_record_memory_history", lambda **kw: calls.append(("record", kw))
    )
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", lambda p: calls.append(("dump", p)))
    path = tmp_path / "mem" / "snapshot.pickle"
    profiler = Profiler(None, str(path), "cuda")
    profiler.step()
    profiler.close()
    assert calls[0][0] == "record" and calls[0][1].get("enabled", "all") is not None
    assert calls[1:] == [("dump", str(path)), ("record", {"enabled": None})]
    assert path.parent.is_dir()


def test_real_cuda_snapshot(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    path = tmp_path / "snapshot.pickle"
    profiler = Profiler(None, str(path), "cuda")
    x = torch.randn(256, 256, device="cuda")
    (x @ x).sum().item()
    profiler.step()
    profiler.close()
    assert path.stat().st_size > 0


def test_nothing_set_is_nothing(tmp_path):
    profiler = Profiler(None, None, "cpu")
    profiler.step()
    profiler.close()


def test_unwritable_trace_path(tmp_path):
    (tmp_path / "a-file").touch()
    with pytest.raises(SetupError) as info:
        Profiler(str(tmp_path / "a-file" / "trace.json"), None, "cpu")
    assert info.value.path == "trace_path"


PROBE = """
import sys
import trainspec.trainers.control, trainspec.trainers.heartbeat, trainspec.trainers.housekeeping
import trainspec.trainers.monitor, trainspec.trainers.plot, trainspec.trainers.progress
print(",".join(m for m in ("torch", "matplotlib", "tqdm", "wandb") if m in sys.modules) or "none")
"""


def test_these_modules_import_nothing_heavy():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=300
    )
    assert result.stdout.strip() == "none"


def test_freeze_setup_moves_setup_objects_out_of_collections():
    import gc

    from trainspec.config import load
    from trainspec.trainers.housekeeping import GarbageCollector

    collector = GarbageCollector(load("sft", [], {"gc.interval": 5}).config.gc)
    collector.freeze_setup()
    assert gc.get_freeze_count() > 0
    collector.close()
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
