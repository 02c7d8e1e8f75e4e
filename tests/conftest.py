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


@pytest.fixture
def one_torch_thread():
    """torch on one thread for an in-process training test (the machine's cores go to the
    test processes beside it), the setting restored after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` need a CUDA device: skipped, saying so, on a machine without one
    (scripts/gpu_check.sh runs them on a GPU machine). torch is imported only when such a test
    was collected, so the config layer's tests stay free of it."""
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (scripts/gpu_check.sh runs these on one)")
    for item in marked:
        item.add_marker(skip)
