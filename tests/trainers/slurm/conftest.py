"""Fixtures for tests against a real SLURM cluster on this machine (cluster.py).

Without SLURM installed these tests are skipped, saying how to install it; CI sets
TRAINSPEC_REQUIRE_SLURM=1 (.ci/run), where a missing install fails them instead, so it can
never pass as a skip.
"""

from __future__ import annotations

import pytest
from cluster import LocalSlurm, require_slurm


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """Two nodes (n1, n2) of one CPU each, shared by a test file's tests and stopped after
    them, whatever they did."""
    require_slurm()
    cluster = LocalSlurm.start(tmp_path_factory.mktemp("slurm"), nodes=2, cpus_per_node=1)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def _no_job_left(request):
    """After each test on the shared cluster, cancel its jobs still running: a failed test's
    job must not hold the nodes, and keep the next test's jobs pending."""
    if "slurm_cluster" not in request.fixturenames:
        yield
        return
    cluster = request.getfixturevalue("slurm_cluster")
    yield
    cluster.cancel_all()


@pytest.fixture
def start_slurm(tmp_path_factory):
    """LocalSlurm.start for a test that needs a cluster of its own (to stop it, say); every
    cluster it started is stopped after the test (stop() is safe to call twice)."""
    require_slurm()
    clusters: list[LocalSlurm] = []

    def start(nodes: int = 2, cpus_per_node: int = 1) -> LocalSlurm:
        # A short root (not the test's tmp_path, which holds its name): munge's socket path
        # must fit in 108 bytes.
        root = tmp_path_factory.mktemp("slurm")
        clusters.append(LocalSlurm.start(root, nodes=nodes, cpus_per_node=cpus_per_node))
        return clusters[-1]

    yield start
    for cluster in clusters:
        cluster.stop()
