"""The session's decisions, one process: when a step is saved (periodically, on a command, on a
stop, at the end), when the loop is told to stop, and that no step is saved twice."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainspec.config import load
from trainspec.trainers.core.world import World
from trainspec.trainers.session import Session

WORLD = World(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))


def session(tmp_path: Path, step: int = 0, **settings) -> tuple[Session, list[int]]:
    """A Session over a real config whose `save` records the steps it is asked to save; a
    resumed one (step > 0) stands on the checkpoint of that step."""
    base = {"log.interval": 3600.0, "max_steps": 100}
    config = load("sft", [], {**base, **settings}).config
    saved: list[int] = []

    def save(at: int) -> Path:
        saved.append(at)
        return tmp_path / f"step_{at}"

    resumed = tmp_path / f"step_{step}" if step else None
    s = Session(
        config, tmp_path, "test", {}, world=WORLD, save=save, start=step, resumed_from=resumed
    )
    return s, saved


def run(session: Session, steps: range, commands: dict[int, str] | None = None) -> int:
    """Steps as a loop runs them; `commands` drops a control file before the step's end."""
    for step in steps:
        if commands and step in commands:
            (session.control.dir / commands[step]).touch()
        if session.after_step(step, {"loss": 1.0}):
            return step
    return steps[-1]


def test_saves_every_interval_and_at_the_end(tmp_path):
    s, saved = session(tmp_path, **{"ckpt.interval": 3})
    last = run(s, range(1, 9))
    s.end(last)
    assert saved == [3, 6, 8]
    assert s.last_saved == tmp_path / "step_8"


def test_the_end_does_not_save_a_step_twice(tmp_path):
    s, saved = session(tmp_path, **{"ckpt.interval": 4})
    s.end(run(s, range(1, 9)))
    assert saved == [4, 8]


def test_without_ckpt_nothing_is_saved_unless_asked(tmp_path):
    s, saved = session(tmp_path)
    s.end(run(s, range(1, 7), commands={2: "checkpoint"}))
    assert saved == [2]


def test_a_stop_saves_then_stops_and_the_end_saves_nothing_more(tmp_path):
    s, saved = session(tmp_path, **{"ckpt.interval": 50})
    stopped_at = run(s, range(1, 10), commands={4: "stop"})
    s.end(stopped_at)
    assert (stopped_at, saved, s.stopped) == (4, [4], True)


def test_a_stop_without_checkpoint_on_stop_saves_nothing(tmp_path):
    s, saved = session(tmp_path, **{"ckpt.interval": 50, "control.checkpoint_on_stop": False})
    s.end(run(s, range(1, 10), commands={4: "stop"}))
    assert saved == []


@pytest.mark.parametrize("ckpt", [{"ckpt.interval": 50}, {}])
def test_a_stop_while_waiting_saves_the_boundary_once(tmp_path, ckpt):
    """Whether [ckpt] is on or not, as a stop after a step does."""
    s, saved = session(tmp_path, **ckpt)
    run(s, range(1, 4))
    s.stop_while_waiting(3)
    s.end(3)
    assert saved == [3] and s.stopped


def test_a_resumed_session_counts_from_its_step(tmp_path):
    s, saved = session(tmp_path, step=6, **{"ckpt.interval": 4})
    s.end(run(s, range(7, 11)))
    assert saved == [8, 10]


def test_a_resumed_run_with_nothing_left_to_train_saves_nothing(tmp_path, capsys):
    s, saved = session(tmp_path, step=100, **{"ckpt.interval": 10})
    s.end(100)
    assert saved == [] and s.last_saved == tmp_path / "step_100"
    assert "already complete: nothing to train past max_steps = 100" in capsys.readouterr().out


def test_the_closing_line_gives_the_total_time(tmp_path, capsys, monkeypatch):
    from trainspec.trainers import session as session_module

    s, _ = session(tmp_path, **{"ckpt.interval": 10})
    run(s, range(1, 4))
    monkeypatch.setattr(session_module, "STARTED", session_module.time.monotonic() - 3725.0)
    s.end(3)
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("done")]
    assert line.startswith(f"done after step 3 in 1:02:05: run {tmp_path}; checkpoint "), line
