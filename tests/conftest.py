"""Fixtures shared by every test directory (helpers live in support.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["rl", "sft"])
def kind(request) -> str:
    return request.param
