"""GarbageCollector: real collections on the schedule `[gc]` sets, and the automatic collector
given back."""

from __future__ import annotations

import gc

import pytest

from trainspec.config import load
from trainspec.trainers.run.collector import GarbageCollector


def gc_cfg(interval):
    return load("sft", [], {"gc.interval": interval}).config.gc


@pytest.fixture
def collections():
    """Count the full collections that start while the test runs."""
    seen = []

    def callback(phase, info):
        if phase == "start" and info["generation"] == 2:
            seen.append(info)

    was_enabled = gc.isenabled()
    gc.callbacks.append(callback)
    yield seen
    gc.callbacks.remove(callback)
    if was_enabled:
        gc.enable()


def test_collects_every_interval_and_restores(collections):
    cfg = gc_cfg(3)  # loading a config may start one of Python's own collections: not counted
    collections.clear()
    gc.enable()
    collector = GarbageCollector(cfg)
    assert not gc.isenabled()
    for step in range(1, 8):
        collector.step(step)
    assert len(collections) == 2  # steps 3 and 6
    collector.close()
    assert gc.isenabled()


def test_null_keeps_pythons_collector(collections):
    gc.enable()
    collector = GarbageCollector(None)
    assert gc.isenabled()
    for step in range(1, 100):
        collector.step(step)
    assert collections == []
    collector.close()
    assert gc.isenabled()


def test_close_leaves_a_disabled_collector_disabled(collections):
    gc.disable()
    collector = GarbageCollector(gc_cfg(1))
    collector.close()
    assert not gc.isenabled()


def test_freeze_setup_moves_setup_objects_out_of_collections():
    import gc

    collector = GarbageCollector(load("sft", [], {"gc.interval": 5}).config.gc)
    collector.freeze_setup()
    assert gc.get_freeze_count() > 0
    collector.close()
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
