"""Fixtures shared by every test directory (helpers live in support.py)."""

from __future__ import annotations

import os
import tempfile

import pytest

# The validator cache (trainspec/config/validator_cache.py) of this test run, and of every
# command the tests start, goes to a directory of its own, not the user's ~/.cache.
os.environ["TRAINSPEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="trainspec-test-cache-")


@pytest.fixture(params=["rl", "sft"])
def kind(request) -> str:
    return request.param
