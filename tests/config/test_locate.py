"""Where a setting was written, for what a command refuses after its config was checked:
remember() keeps the sources of the command's config, written_at() finds a dotted path in them."""

from __future__ import annotations

import pytest

from trainspec.config.locate import remember, written_at
from trainspec.config.sources import FileSource, FlagSource, read_file


@pytest.fixture(autouse=True)
def forget():
    yield
    remember([])


def test_a_path_written_in_a_file_an_array_of_tables_and_a_flag(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'max_steps = 3\n\n[[orchestrator.train.source]]\nname = "a"\n\n'
        '[[orchestrator.train.source]]\nname = "b"\nenv.taskset = { id = "x", turns = 2 }\n'
    )
    flags = FlagSource({"seq_len": 64}, {("seq_len",): "--seq-len"})
    remember([read_file(path), flags])
    assert written_at("max_steps") == f"{path}:1:13"
    assert written_at("orchestrator.train.source[1].name") == f"{path}:7:8"
    assert written_at("orchestrator.train.source[1].env.taskset.turns") == f"{path}:8:35"
    assert written_at("seq_len") == "--seq-len"
    assert written_at("orchestrator.batch_size") is None  # a default: written nowhere
    remember([])
    assert written_at("max_steps") is None  # nothing remembered


def test_a_prefix_the_command_names_and_a_launchers_json_left_out(tmp_path):
    path = tmp_path / "orchestrator.toml"
    path.write_text("tasks_per_minute = 5\n")
    remember([read_file(path)], "orchestrator")
    assert written_at("orchestrator.tasks_per_minute") == f"{path}:1:20"
    written = tmp_path / "rl-orchestrator.json"  # what rl writes for its orchestrator
    remember([FileSource(str(written), {"tasks_per_minute": 5}, b"")], "orchestrator")
    assert written_at("orchestrator.tasks_per_minute") is None
