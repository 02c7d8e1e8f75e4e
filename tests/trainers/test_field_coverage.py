"""Every field counts: each leaf of the SFT schema is consumed by a named trainer component, or,
set to a value this device and build cannot honour, refused at start naming the field and why.

How it is proven, with no list that could lie:

* consumption: tiny in-process runs of the real trainer (`train`, `launch`, the `sft`
  entrypoint, the launcher's `processes` / `launch_config`) read the config through a
  recording proxy (field_recorder.py), which notes each field read and the module reading it;
  together the runs set every variant (each optimizer, scheduler, data type, ...) and every
  optional table;
* refusals: `train` must raise SetupError(s) whose path is the field, with a problem and a fix;
  a refused table covers the keys under it (none of them can be set without it);
* config rules: a field the config layer consumes on the trainer's behalf is listed with the
  rule, which must run for SFT and act differently for two values of the field;
* renamed keys (`x-trainspec-renamed` in the schema) must be rejected by `load` naming the key;
* an eval source's `env` and `serve` tables go to verifiers as written, which reads them with its
  own config classes: their leaves count when a component read the table, each proven to reach
  verifiers by tests/config/test_env_schema.py (helpers/env_tables.py).

The keys of each `[[eval.source]]` table count as leaves of their own (`eval.source[].interval`),
as the orchestrator's do in rl/test_rl_field_coverage.py.

    .venv/bin/python -m pytest tests/trainers/test_field_coverage.py -q

The consumption runs happen once per module (fixtures `consumed` and `refused`); the tests only
look at what they recorded. One run compiles a block (about 20 s on two cold CPU cores).
"""

from __future__ import annotations

import re
import typing

import pytest
import torch
from helpers.env_tables import handed_to_verifiers
from helpers.field_leaves import leaves_of
from helpers.field_recorder import FieldRecorder
from helpers.field_refusals import (
    REFUSAL_IDS,
    REFUSALS,
    REFUSED_PATHS,
    applies_here,
    renderer_settings,
)
from helpers.field_runs import (
    heartbeat_server,
    isolated,
    run_chat_and_resume,
    run_command_line,
    run_compiled,
    run_everything_on,
    run_launcher,
    run_moe,
    run_online_evals,
    run_sgd_linear,
    tiny_config,
    train_recorded,
)

from trainspec.config import ConfigError, load
from trainspec.config.kinds import config_class
from trainspec.config.merge import merge_all, unflatten
from trainspec.config.schema_info import schema_info
from trainspec.trainers.errors import SetupError, SetupErrors
from trainspec.validators.context import RuleContext
from trainspec.validators.pipeline import rules_for

torch.set_num_threads(1)

SCHEMA = schema_info("sft")
LEAVES = leaves_of(SCHEMA)  # with the keys of each [[eval.source]] table (eval.source[].name)
# Old names the config layer rejects with their new name; they never reach a trainer.
RENAMED = {".".join(path): info.renamed_to for path, info in SCHEMA.keys.items() if info.renamed_to}

# Fields the config layer's rules consume for the trainer: path -> (rule in the SFT pipeline,
# the settings around it, two values the rule must treat differently).
# resolve_dp_replicate_from_deployment sets model.dp_replicate from the node groups.
CONSUMED_BY_RULES = {
    "deployment.nodes_per_fsdp_group": (
        "resolve_dp_replicate_from_deployment",
        {"deployment": {"type": "multi_node", "num_train_nodes": 4, "gpus_per_node": 1}},
        (1, 2),
    ),
}


@pytest.fixture(scope="module")
def consumed(tmp_path_factory) -> FieldRecorder:
    """Every field the consumption runs read, and who read it."""
    out = tmp_path_factory.mktemp("consumed")
    recorder = FieldRecorder()
    with isolated() as mp, heartbeat_server() as url:
        run_everything_on(out, recorder, url)
        run_sgd_linear(out, recorder)
        run_chat_and_resume(out, recorder)
        run_moe(out, recorder)
        run_compiled(out, recorder)
        run_online_evals(out, recorder)
        run_command_line(out, recorder, mp)
        run_launcher(out, recorder, mp)
    return recorder


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> tuple[dict[str, BaseException | None], FieldRecorder]:
    """What `train` raised for each refusal row, and the fields it read on the way."""
    out = tmp_path_factory.mktemp("refused")
    recorder = FieldRecorder()
    outcomes: dict[str, BaseException | None] = {}
    with isolated():
        for row_id, (_, settings, cpu_only) in zip(REFUSAL_IDS, REFUSALS, strict=True):
            if not applies_here(cpu_only):
                continue
            if settings.get("memory_profiler_path") == "PROFILE":
                settings = {**settings, "memory_profiler_path": str(out / "memory.pickle")}
            name = re.sub(r"[=./]", "-", row_id)  # run.name: one path component
            config = tiny_config(out, name, settings)
            try:
                train_recorded(recorder, config)
                outcomes[row_id] = None
            except (SetupError, SetupErrors) as err:
                outcomes[row_id] = err
    return outcomes, recorder


RENDERER_SETTINGS, CUSTOM_ONLY = renderer_settings()
# The leaves of each eval source's env and serve tables: verifiers' own settings, which the
# source hands verifiers as written (verifiers_config.env_config, env_servers.serve_config);
# test_env_schema.py proves each reaches verifiers' config.
VERIFIERS_SETTINGS = handed_to_verifiers("eval.source[]")


def _refused_by(leaf: str) -> str | None:
    for path in REFUSED_PATHS:
        if leaf == path or leaf.startswith(path + "."):
            return path
    return None


def _table_of(leaf: str) -> str:
    """The env or serve table of an eval source that `leaf` is in."""
    return ".".join(leaf.split(".")[:3])


def _how_consumed(leaf: str, consumed: FieldRecorder, refused_reads: FieldRecorder) -> str | None:
    if consumed.readers(leaf):
        return "read by " + ", ".join(sorted(consumed.readers(leaf)))
    if _refused_by(leaf):
        return f"refused with {_refused_by(leaf)}"
    if leaf in CONSUMED_BY_RULES:
        return f"consumed by the rule {CONSUMED_BY_RULES[leaf]}"
    if leaf in RENDERER_SETTINGS:
        return f'handed to the renderers package (renderer.name = "{RENDERER_SETTINGS[leaf]}")'
    if leaf in VERIFIERS_SETTINGS and consumed.readers(_table_of(leaf)):
        return f"handed to verifiers with its table ({VERIFIERS_SETTINGS[leaf]})"
    if leaf in CUSTOM_ONLY and "renderer.name" in REFUSED_PATHS:
        return 'only under renderer.name = "custom", which is refused'
    if leaf in RENAMED:
        return f"renamed to {RENAMED[leaf]}"
    if refused_reads.readers(leaf):
        return "read only while refusing another field, by " + ", ".join(
            sorted(refused_reads.readers(leaf))
        )
    return None


# -- the tests --------------------------------------------------------------------------------


def test_the_schema_has_leaves():
    assert len(LEAVES) > 100
    assert "optim.betas1" in LEAVES and "env_vars" in LEAVES and "model" not in LEAVES
    assert {"eval.source[].interval", "eval.client.base_url", "inference.vllm.seed"} <= set(LEAVES)


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_is_consumed_or_refused(leaf, consumed, refused):
    _, refused_reads = refused
    assert _how_consumed(leaf, consumed, refused_reads) is not None, (
        f"{leaf} is neither read by a trainer component nor refused at start"
    )


def test_every_leaf_counts(consumed, refused):
    """One report of all the leaves nothing consumes (the parametrized test names each)."""
    _, refused_reads = refused
    table = {leaf: _how_consumed(leaf, consumed, refused_reads) for leaf in LEAVES}
    print("\n".join(f"{leaf}: {how or 'NOT CONSUMED'}" for leaf, how in table.items()))
    missing = [leaf for leaf, how in table.items() if how is None]
    assert not missing, f"{len(missing)} leaves silently ignored:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize(("path", "settings", "cpu_only"), REFUSALS, ids=REFUSAL_IDS)
def test_refused_at_start(path, settings, cpu_only, refused, request):
    if not applies_here(cpu_only):
        pytest.skip(f"{path} is honoured on this device")
    outcomes, _ = refused
    err = outcomes[request.node.callspec.id]
    assert err is not None, f"train() accepted {path} = {settings[path]!r}"
    errors = err.errors if isinstance(err, SetupErrors) else [err]
    named = [e for e in errors if e.path == path]
    assert named, f"no refusal names {path}: {[e.path for e in errors]}"
    assert all(e.problem.strip() and e.fix.strip() for e in named)


@pytest.mark.parametrize("path", sorted(CONSUMED_BY_RULES))
def test_rule_consumes_the_field(path):
    """The rule alone, on classes built without the pipeline: two values of the field must give
    two outcomes (resolved config, errors, warnings)."""
    rule_name, around, values = CONSUMED_BY_RULES[path]
    rules = {rule.__name__: rule for rule in rules_for("sft")}
    assert rule_name in rules, f"{rule_name} is not an SFT rule"
    assert tuple(path.split(".")) in SCHEMA.keys
    outcomes = []
    for value in values:
        document = merge_all([around, unflatten({path: value})])
        config = config_class("sft").model_validate(document)
        ctx = RuleContext("sft", rule=rule_name)
        rules[rule_name](config, ctx)
        outcomes.append((config.model_dump(), ctx.errors, ctx.warnings))
    assert outcomes[0] != outcomes[1], f"{rule_name} does the same for {path} = {values}"


def _literals(annotation) -> set:
    if typing.get_origin(annotation) is typing.Literal:
        return set(typing.get_args(annotation))
    return {value for arg in typing.get_args(annotation) for value in _literals(arg)}


def _another_value(info):
    """A valid value of a renderer setting other than its default."""
    choices = sorted(_literals(info.annotation) - {info.default}, key=str)
    if choices:
        return choices[0]
    if isinstance(info.default, bool):
        return not info.default
    if info.default is None:
        return False if "bool" in str(info.annotation) else "changed"
    if isinstance(info.default, int):
        return info.default + 1
    return f"{info.default} (changed)"


@pytest.mark.parametrize("leaf", sorted(RENDERER_SETTINGS))
def test_a_renderer_setting_reaches_the_renderers_package(leaf):
    """The SFT data path's NamedRendering (chat/named_renderers.py) hands the setting, at a value
    other than its default, to the package's own config of that renderer."""
    from trainspec.trainers.chat.named_renderers import NamedRendering, renderer_config

    name, field = RENDERER_SETTINGS[leaf], leaf.removeprefix("renderer.")
    config = load("sft", [], {"renderer.name": name}).config
    value = _another_value(type(config.renderer).model_fields[field])
    config = load("sft", [], {"renderer.name": name, leaf: value}).config
    rendering = NamedRendering.from_config(config.renderer)
    package = renderer_config(rendering.name, rendering.settings)
    assert getattr(package, field) == value != type(package).model_fields[field].default


@pytest.mark.parametrize("path", sorted(RENAMED))
def test_renamed_key_is_rejected(path):
    *parent, old = path.split(".")
    settings = {path: 1}
    tags = SCHEMA.variants.get(tuple(parent), {})
    owner = [tag for tag, keys in tags.items() if old in keys]
    if owner:  # a key of one variant: set that variant, so only the rename is wrong
        settings[".".join([*parent, "type"])] = owner[0]
    with pytest.raises(ConfigError) as info:
        load("sft", [], settings)
    messages = [str(issue) for issue in info.value.errors if issue.path == path]
    assert messages and RENAMED[path] in " ".join(messages), messages


def test_recorded_paths_are_schema_keys(consumed, refused):
    _, refused_reads = refused
    recorded = consumed.paths() | refused_reads.paths()
    known = {".".join(path) for path in SCHEMA.keys}
    for leaf in LEAVES:  # and the tables inside an array's tables (eval.source[].data)
        parts = leaf.split(".")
        known |= {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
    unknown = sorted(p for p in recorded if p not in known)
    assert not unknown, f"read paths the schema does not have: {unknown}"


def test_components_do_not_write_the_config(consumed, refused):
    _, refused_reads = refused
    writes = {**consumed.writes, **refused_reads.writes}
    assert not writes, f"trainer components changed the config: {dict(writes)}"
