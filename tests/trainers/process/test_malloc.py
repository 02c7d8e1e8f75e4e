"""The glibc malloc limits sft sets for itself, and when it leaves them to the user."""

from __future__ import annotations

import os
import sys

import pytest

from trainspec.trainers.process.malloc import tune_malloc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_limits_are_set_on_glibc(monkeypatch):
    for key in [k for k in os.environ if k.startswith("MALLOC_")]:
        monkeypatch.delenv(key)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert tune_malloc() is True


@pytest.mark.parametrize("variable", ["MALLOC_ARENA_MAX", "GLIBC_TUNABLES"])
def test_a_users_own_malloc_settings_win(monkeypatch, variable):
    monkeypatch.setenv(variable, "2")
    assert tune_malloc() is False
