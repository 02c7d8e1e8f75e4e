"""The combined RL configs rebuilt from the reference's example files (tests/config/reference/rl/,
see its README) validate as written, with no schema line: sources with open env tables,
per-source group sizes and algorithms, every algo variant, concurrency, renderers, eval sources,
curricula, and the top level around them ([inference], [ckpt], [monitors], [deployment],
[slurm], weight_broadcast, env_vars, log)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from trainspec.config import ConfigError, load
from trainspec.config_model import written

HERE = Path(__file__).parent / "reference" / "rl"
FILES = sorted(HERE.glob("*.toml"))
BIN = Path(sys.executable).parent


def test_the_corpus_is_there():
    assert len(FILES) >= 15


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_reference_rl_toml_validates_as_written(path):
    document = tomllib.loads(path.read_text())
    config = load("rl_run", [path]).config
    sources = document["orchestrator"].get("train", {}).get("source", [])
    assert len(config.orchestrator.train.source) == len(sources)
    for source, table in zip(config.orchestrator.train.source, sources, strict=True):
        # the env table reaches verifiers as written (a union's table left untagged names
        # its default variant)
        assert same_but_tags(written(source.env), table.get("env", {}))


def same_but_tags(handed: dict, table: dict) -> bool:
    """Whether `handed` holds what `table` does, and beside it only tags (`type`)."""
    for key in handed.keys() | table.keys():
        mine, theirs = handed.get(key), table.get(key)
        if key not in table:
            if key != "type":
                return False
        elif isinstance(theirs, dict):
            if not isinstance(mine, dict) or not same_but_tags(mine, theirs):
                return False
        elif mine != theirs:
            return False
    return True


def test_validate_config_takes_them_without_a_kind():
    result = subprocess.run(
        [str(BIN / "validate-config"), "--each", *map(str, FILES)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("valid rl_run config") == len(FILES)


def test_an_unknown_orchestrator_key_is_still_an_error(tmp_path):
    path = tmp_path / "rl.toml"
    text = (HERE / "basic-reverse-text.toml").read_text()
    path.write_text(text.replace("[orchestrator]\n", "[orchestrator]\ngroup_sizes = 4\n", 1))
    with pytest.raises(ConfigError, match="group_sizes"):
        load("rl_run", [path])
