"""run_guarded: a SIGTERM before the session's handlers ends the run with its exit code, even when
Python drops the exception the handler raised (it does inside a finalizer)."""

from __future__ import annotations

import gc
import os
import signal
import sys

from trainspec.trainers.process.guard import raise_if_interrupted, run_guarded


class _Finalized:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, where raising is lost
        for _ in range(1000):  # bytecode for the pending handler to run on
            pass


def test_a_sigterm_lost_in_a_finalizer_still_stops_the_run(capfd, monkeypatch):
    """Python drops the exception, and says nothing of it: no "Exception ignored" traceback."""
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # Python's, not pytest's
    trained = []

    def train(_config) -> int:
        _Finalized()
        gc.collect()  # the object is gone; its SIGTERM was taken, the exception dropped
        raise_if_interrupted()  # what Session.start does before it installs its handlers
        trained.append(True)
        return 0

    assert run_guarded("sft", train, object()) == 128 + signal.SIGTERM
    assert trained == []
    err = capfd.readouterr().err
    assert "sft: stopped by SIGTERM" in err
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_a_new_run_starts_with_no_signal_pending():
    def interrupted(_config) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
        return 0

    assert run_guarded("sft", interrupted, object()) == 128 + signal.SIGTERM

    def clean(_config) -> int:
        raise_if_interrupted()
        return 0

    assert run_guarded("sft", clean, object()) == 0
