"""Control: command files in the control directory and real signals sent to this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from trainspec.config import load
from trainspec.trainers.errors import SetupError
from trainspec.trainers.run.control import Commands, Control

SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT)


def control_cfg(**overrides):
    return load("sft", [], {f"control.{k}": v for k, v in overrides.items()}).config.control


@pytest.fixture(autouse=True)
def keep_handlers():
    """Whatever a test does, the process leaves with the handlers it came with."""
    saved = {signum: signal.getsignal(signum) for signum in SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_off_answers_nothing(tmp_path):
    control = Control(None, tmp_path / "control")
    before = signal.getsignal(signal.SIGUSR1)
    control.install()
    assert signal.getsignal(signal.SIGUSR1) is before
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / "stop").touch()
    assert control.poll(1) == Commands()
    assert not control.poll(1)
    assert control.dir is None
    control.close()


def test_default_dir_is_created_and_control_dir_wins(tmp_path):
    control = Control(control_cfg(), tmp_path / "run" / "control")
    assert control.dir == tmp_path / "run" / "control" and control.dir.is_dir()
    chosen = tmp_path / "elsewhere"
    control = Control(control_cfg(dir=str(chosen)), tmp_path / "unused")
    assert control.dir == chosen and chosen.is_dir()
    assert not (tmp_path / "unused").exists()


def test_command_files_act_once_at_the_poll_interval(tmp_path):
    control = Control(control_cfg(poll_interval_steps=2), tmp_path)
    (tmp_path / "checkpoint").touch()
    assert control.poll(1) == Commands()  # not a polling step: the file waits
    assert (tmp_path / "checkpoint").exists()
    assert control.poll(2) == Commands(checkpoint=True)
    assert not (tmp_path / "checkpoint").exists()
    assert control.poll(4) == Commands()  # taken once
    (tmp_path / "stop").touch()
    (tmp_path / "checkpoint").touch()
    assert control.poll(5) == Commands()
    assert control.poll(6) == Commands(checkpoint=True, stop=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_checkpoint_on_stop_is_exposed(tmp_path):
    assert Control(control_cfg(), tmp_path).checkpoint_on_stop is True
    assert Control(control_cfg(checkpoint_on_stop=False), tmp_path).checkpoint_on_stop is False


def test_read_files_false_leaves_files_to_another_process(tmp_path):
    control = Control(control_cfg(), tmp_path, read_files=False)
    (tmp_path / "stop").touch()
    assert control.poll(1) == Commands()
    assert (tmp_path / "stop").exists()


def test_checkpoint_signal_every_call_regardless_of_interval(tmp_path):
    control = Control(control_cfg(poll_interval_steps=100), tmp_path)
    control.install()
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        assert control.poll(1) == Commands(checkpoint=True)
        assert control.poll(2) == Commands()
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert control.poll(3) == Commands(checkpoint=True)  # two asks, one checkpoint
    finally:
        control.close()


def test_stop_signal_finishes_the_step_instead_of_dying(tmp_path):
    control = Control(control_cfg(), tmp_path)
    with control:
        os.kill(os.getpid(), signal.SIGTERM)  # would end pytest without the handler
        assert control.poll(7) == Commands(stop=True)
        assert control.poll(8) == Commands()


def test_close_restores_previous_handlers(tmp_path):
    def mine(signum, frame):
        pass

    signal.signal(signal.SIGUSR1, mine)
    signal.signal(signal.SIGTERM, mine)
    control = Control(control_cfg(), tmp_path)
    control.install()
    assert signal.getsignal(signal.SIGUSR1) is not mine
    assert signal.getsignal(signal.SIGTERM) is not mine
    control.close()
    assert signal.getsignal(signal.SIGUSR1) is mine
    assert signal.getsignal(signal.SIGTERM) is mine
    control.close()  # twice is harmless
    assert signal.getsignal(signal.SIGTERM) is mine


def test_null_signal_is_left_alone(tmp_path):
    def mine(signum, frame):
        pass

    signal.signal(signal.SIGUSR1, mine)
    control = Control(control_cfg(checkpoint_signal=None, stop_signal="SIGUSR2"), tmp_path)
    control.install()
    try:
        assert signal.getsignal(signal.SIGUSR1) is mine
        assert signal.getsignal(signal.SIGUSR2) is not signal.SIG_DFL
        os.kill(os.getpid(), signal.SIGUSR2)
        assert control.poll(1) == Commands(stop=True)
    finally:
        control.close()
    assert signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL


def test_a_second_stop_signal_is_the_same_request_and_a_second_ctrl_c_passes_on(tmp_path):
    """A worker gets a job's SIGTERM from the scheduler and again from its launcher: the same
    stop. A second Ctrl-C goes to the handler before (by default: KeyboardInterrupt)."""
    calls = []
    before = {
        signum: signal.signal(signum, lambda signum, frame: calls.append(signum))
        for signum in (signal.SIGUSR2, signal.SIGINT)
    }
    control = Control(control_cfg(stop_signal="SIGUSR2"), tmp_path)
    try:
        with control:
            os.kill(os.getpid(), signal.SIGUSR2)
            os.kill(os.getpid(), signal.SIGUSR2)
            assert control.poll(1).stop and calls == []
            os.kill(os.getpid(), signal.SIGINT)
            assert control.poll(2).stop and calls == []
            os.kill(os.getpid(), signal.SIGINT)  # still stopping: the user insists
            assert calls == [signal.SIGINT]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_install_off_the_main_thread_warns(tmp_path, caplog):
    control = Control(control_cfg(), tmp_path)
    before = signal.getsignal(signal.SIGUSR1)
    errors = []

    def install():
        try:
            control.install()
        except Exception as exc:  # pragma: no cover - the failure this test guards against
            errors.append(exc)

    thread = threading.Thread(target=install)
    thread.start()
    thread.join()
    assert errors == []
    assert signal.getsignal(signal.SIGUSR1) is before
    assert "main thread" in caplog.text
    (tmp_path / "checkpoint").touch()
    assert control.poll(1).checkpoint  # files still work


def test_unusable_control_dir_is_a_setup_error(tmp_path):
    (tmp_path / "a-file").touch()
    with pytest.raises(SetupError) as info:
        Control(control_cfg(dir=str(tmp_path / "a-file" / "control")), tmp_path)
    assert info.value.path == "control.dir"
    assert "control.dir" in info.value.fix


CHILD = """
import os, signal, sys
from types import SimpleNamespace
from trainspec.trainers.run.control import Control
cfg = SimpleNamespace(dir=sys.argv[1], poll_interval_steps=1, checkpoint_signal="SIGUSR1",
                      stop_signal="SIGTERM", checkpoint_on_stop=True)
control = Control(cfg, sys.argv[1])
control.install()
os.kill(os.getpid(), signal.SIGTERM)
os.kill(os.getpid(), signal.SIGTERM)
print("stop after two SIGTERMs:", control.poll(1).stop, flush=True)
os.kill(os.getpid(), signal.SIGINT)
os.kill(os.getpid(), signal.SIGINT)
print("still alive after two Ctrl-C", flush=True)
"""


def test_a_second_ctrl_c_ends_the_process(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert "stop after two SIGTERMs: True" in result.stdout
    assert "still alive" not in result.stdout
    assert "KeyboardInterrupt" in result.stderr and result.returncode == -signal.SIGINT
