"""Fixtures shared by every test directory (helpers live in helpers/)."""

from __future__ import annotations

import os
import signal
import tempfile

import pytest

# The validator cache (trainspec/validator_cache.py) of this test run, and of every
# command the tests start, goes to a directory of its own, not the user's ~/.cache.
os.environ["TRAINSPEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="trainspec-test-cache-")
# One OpenMP thread for torch in the test workers and every process they start: `make test`
# runs a worker per core and many tests start several training processes at once, whose
# threads would otherwise spin against each other (a quarter of the suite's time on 2 cores).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Ctrl-C as a terminal delivers it, whatever started the tests: a shell without job control
# starts a background command (`make test &`) with SIGINT ignored, which every process
# inherits, and the tests of what a Ctrl-C does would see none. A handler (not SIG_IGN) goes
# back to the default in each process the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


# The files that take longest (they start training processes, or a SLURM cluster), longest
# first. `make test` hands whole files to its workers in collection order
# (--no-loadscope-reorder): these go out first, so the run ends on short files with both
# workers busy, not on one long file with the other worker idle.
LONGEST_FIRST = (
    "tests/trainers/rl_run/test_rl_vllm.py",  # four `rl` runs, each starting its vLLM server
    "tests/trainers/sft/test_sft_command.py",
    "tests/trainers/rl_run/test_rl_command.py",
    "tests/trainers/serving/test_vllm_engine.py",
    "tests/trainers/inference/test_inference_vllm.py",  # a vLLM server
    "tests/trainers/sft/test_online_evals_vllm.py",
    "tests/trainers/rl/test_rl_field_coverage.py",
    "tests/trainers/sft/test_faults.py",
    "tests/trainers/slurm/test_rl_jobs.py",
    "tests/trainers/slurm/test_sft_jobs.py",
    "tests/trainers/orchestrator/environments/test_verifiers_env.py",
    "tests/trainers/orchestrator/environments/test_env_servers.py",
    "tests/trainers/ckpt/test_checkpointer.py",
    "tests/trainers/rl_run/test_rl_inference.py",
    "tests/trainers/sft/test_families_train.py",
    "tests/trainers/sft/test_meta_init_runs.py",
    "tests/trainers/sft/test_train.py",
    "tests/trainers/slurm/test_cluster.py",
    "tests/trainers/rl/test_rl_ranks.py",
    "tests/trainers/test_field_coverage.py",
    "tests/test_parity.py",
    "tests/trainers/sft/test_online_evals.py",
)


def _file_rank(item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    """The longest files first (LONGEST_FIRST; the rest keep their order). Tests marked `gpu`
    need a CUDA device: skipped, saying so, on a machine without one (scripts/gpu_check.sh
    runs them on a GPU machine). torch is imported only when such a test was collected, so the
    config layer's tests stay free of it."""
    items.sort(key=_file_rank)
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (scripts/gpu_check.sh runs these on one)")
    for item in marked:
        item.add_marker(skip)
