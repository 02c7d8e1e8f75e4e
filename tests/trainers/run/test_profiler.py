"""Profiler: a real torch trace, the CUDA-only memory snapshot, and nothing when nothing is set."""

from __future__ import annotations

import json

import pytest

from trainspec.trainers.errors import SetupError
from trainspec.trainers.run.profiler import MEMORY_HISTORY_ENTRIES, Profiler


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
    assert calls == [
        ("record", {"max_entries": MEMORY_HISTORY_ENTRIES}),
        ("dump", str(path)),
        ("record", {"enabled": None}),
    ]
    assert path.parent.is_dir()  # made when the profiler was built, before anything ran


@pytest.mark.gpu
def test_real_cuda_snapshot(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "snapshot.pickle"
    profiler = Profiler(None, str(path), "cuda")
    x = torch.randn(256, 256, device="cuda")
    (x @ x).sum().item()
    profiler.step()
    profiler.close()
    assert path.stat().st_size > 0


def test_nothing_set_records_and_writes_nothing(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    profiler = Profiler(None, None, "cpu")
    assert not torch.autograd.profiler._is_profiler_enabled
    profiler.step()
    profiler.close()
    assert list(tmp_path.iterdir()) == []


def test_unwritable_trace_path(tmp_path):
    (tmp_path / "a-file").touch()
    with pytest.raises(SetupError) as info:
        Profiler(str(tmp_path / "a-file" / "trace.json"), None, "cpu")
    assert info.value.path == "trace_path"
