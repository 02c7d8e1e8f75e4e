"""SignalFlag: real signals raise it, the handlers before it come back, a repeat can pass on."""

from __future__ import annotations

import logging
import signal
import threading

import pytest

from trainspec.trainers.process.signals import SignalFlag


@pytest.fixture
def sigusr2():
    """SIGUSR2 with a recording handler of its own, put back after the test."""
    seen: list[int] = []
    before = signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))
    yield seen
    signal.signal(signal.SIGUSR2, before)


def test_counts_every_signal_and_restores_the_handler_before(sigusr2):
    flag = SignalFlag((signal.SIGUSR2,)).install()
    assert not flag()
    signal.raise_signal(signal.SIGUSR2)
    signal.raise_signal(signal.SIGUSR2)
    assert flag() and flag.count == 2 and sigusr2 == []
    flag.restore()
    signal.raise_signal(signal.SIGUSR2)
    assert flag.count == 2 and sigusr2 == [signal.SIGUSR2]


def test_a_repeat_of_a_named_signal_goes_to_the_handler_before(sigusr2):
    flag = SignalFlag((signal.SIGUSR2,), repeat_passes_on=(signal.SIGUSR2,)).install()
    signal.raise_signal(signal.SIGUSR2)
    signal.raise_signal(signal.SIGUSR2)
    assert flag.count == 1 and sigusr2 == [signal.SIGUSR2]
    flag.restore()


def test_a_repeat_of_another_signal_is_the_same_request_again(sigusr2):
    """A worker gets a job's SIGTERM from the scheduler and again from its launcher."""
    flag = SignalFlag((signal.SIGUSR2, signal.SIGINT), repeat_passes_on=(signal.SIGINT,))
    flag.install()
    signal.raise_signal(signal.SIGUSR2)
    signal.raise_signal(signal.SIGUSR2)
    assert flag.count == 2 and sigusr2 == []
    flag.restore()


def test_off_the_main_thread_it_warns_and_sets_nothing(sigusr2, caplog):
    flag = SignalFlag((signal.SIGUSR2,))
    with caplog.at_level(logging.WARNING):
        thread = threading.Thread(target=flag.install)
        thread.start()
        thread.join()
    assert "not on the main thread" in caplog.text
    signal.raise_signal(signal.SIGUSR2)
    assert flag.count == 0 and sigusr2 == [signal.SIGUSR2]


def test_a_second_ctrl_c_raises_keyboard_interrupt_by_default():
    """Whatever the first Ctrl-C asked to finish, the second breaks the wait (issue 36)."""
    flag = SignalFlag((signal.SIGTERM, signal.SIGINT)).install()
    try:
        signal.raise_signal(signal.SIGINT)
        assert flag.count == 1
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    finally:
        flag.restore()


def test_a_second_ctrl_c_passes_a_flag_installed_below_too():
    """The orchestrator's session installs its stop flag over [control]'s: the second Ctrl-C
    is not a first one to the flag below, it reaches the handler under both."""
    below = SignalFlag((signal.SIGINT,)).install()
    above = SignalFlag((signal.SIGINT,)).install()
    try:
        signal.raise_signal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert above.count == 1 and below.count == 0
    finally:
        above.restore()
        below.restore()
