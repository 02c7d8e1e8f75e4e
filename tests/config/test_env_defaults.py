"""trainspec's own defaults in a source's `env` table (OWN_DEFAULTS, where the schema departs from
verifiers' classes on purpose): what verifiers is handed, and where the docs say so.

verifiers bounds no episode by default, so an episode whose `setup()` or `run()` never ends
would hang its step: an env table that sets no `timeout.episode` is handed trainspec's hour."""

from __future__ import annotations

import pytest
from helpers.env_tables import OWN_DEFAULTS, TASKSET
from helpers.support import ROOT

from trainspec.generated import environment as ours
from trainspec.trainers.errors import SetupErrors
from trainspec.trainers.orchestrator.environments.verifiers_config import env_config

PATH = "eval.source[0].env"


@pytest.mark.parametrize(
    ("timeout", "episode"),
    [({}, 3600.0), ({"episode": "None"}, None), ({"episode": 20}, 20.0), ({"finalize": 5}, 3600.0)],
)
def test_an_episode_is_bounded_unless_the_table_lifts_the_bound(timeout, episode):
    """Unset, the hook gets trainspec's hour; a written value, "None" included, stands."""
    table = {"taskset": {"id": TASKSET}}
    table |= {"timeout": timeout} if timeout else {}
    config = env_config(ours.EnvConfig.model_validate(table), PATH)
    assert config.timeout.episode == episode
    assert config.timeout.finalize == timeout.get("finalize")


def test_a_timeout_that_is_no_table_is_refused_not_bounded():
    """A plain table (as code hands one) whose `timeout` is no table reaches verifiers as it is,
    and verifiers' class refuses it at its path, rather than the bound replacing it."""
    with pytest.raises(SetupErrors) as caught:
        env_config({"taskset": {"id": TASKSET}, "timeout": 30}, PATH)
    assert [error.path for error in caught.value.errors] == [f"{PATH}.timeout"]


def test_each_own_default_is_the_schemas_and_is_said_in_the_differences_from_prime_rl():
    said = (ROOT / "docs" / "prime-rl.md").read_text().split("## Differences from prime-rl")[1]
    said = said.split("\n## ")[0]
    for path, value in OWN_DEFAULTS.items():
        root, *keys = path.split(".")
        assert root == "EnvConfig", path  # the walk's root for an `env` table
        built = ours.EnvConfig.model_validate({"taskset": {"id": TASKSET}})
        for key in keys:
            built = getattr(built, key)
        assert built == value, path
        dotted = ".".join(["env", *keys])
        assert f"`{dotted}` defaults to {value:g}" in said, dotted
