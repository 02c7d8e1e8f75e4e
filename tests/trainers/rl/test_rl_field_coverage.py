"""Every field counts, for the RL trainer (kind "rl") and the orchestrator (kind "orchestrator"):
each leaf of their schemas is consumed by a named trainspec.trainers component, or, set to a
value this device and build cannot honour, refused at start naming the field and why, or
consumed by a named config rule. The same proof as test_field_coverage.py gives the SFT trainer,
made on the RL loop (`trainspec.trainers.rl.train`) and the orchestrator loop
(`trainspec.trainers.orchestrator.loop`) themselves, with the SFT test's machinery.

How it is proven, with no list that could lie:

* consumption: tiny in-process runs of the real trainer (`train`, `launch`) and orchestrator
  (`run`, `launch`) read their config through a recording proxy (field_recorder.py), which notes
  each field read and the module reading it; together the runs set every variant (optimizer,
  scheduler, loss, rollout transport, sampler) and every optional table (rl_field_runs.py);
* refusals: the loop must raise SetupError(s) whose path is the field (the orchestrator's
  refusals name it under "orchestrator.", as the `rl` command's config does), with a problem
  and a fix (rl_field_refusals.py). A leaf counts as refused only when its refusal really
  happened: a refused table covers the keys under it, a refused `type` the keys that only
  refused variants have;
* config rules: a field the config layer consumes on the loop's behalf is listed with the rule,
  and the rule must run for the kind and mention the field;
* renamed keys (`x-trainspec-renamed` in the schema) must be rejected by `load` naming the key;
* a source's `env` and `serve` tables go to verifiers as written: their leaves count when a
  component read the table, each proven to reach verifiers by tests/config/test_env_schema.py.

    .venv/bin/python -m pytest tests/trainers/rl/test_rl_field_coverage.py -q

The runs happen once per module and kind (fixtures `<kind>_consumed`, `<kind>_refused`); the
tests only look at what they recorded. The module takes about 45 s on two cold CPU cores, most of
it the compiled trainer run (about 20 s once torch's compile cache is warm).
"""

from __future__ import annotations

import re
from pathlib import Path

# The SFT field-coverage helpers live in tests/trainers/, which pytest puts on sys.path only
# when it collects a test there first.
import pytest  # noqa: E402
import torch  # noqa: E402
from helpers.env_tables import handed_to_verifiers
from helpers.field_leaves import leaves_of
from helpers.field_recorder import FieldRecorder
from helpers.field_refusals import applies_here, renderer_settings
from helpers.field_runs import heartbeat_server, isolated

pytest.register_assert_rewrite("rl_field_runs")  # its checks of each run show their values
from rl_field_refusals import (  # noqa: E402
    ORCHESTRATOR_PREFIX,
    ORCHESTRATOR_REFUSAL_IDS,
    ORCHESTRATOR_REFUSALS,
    RL_REFUSAL_IDS,
    RL_REFUSALS,
)
from rl_field_runs import (  # noqa: E402
    broadcast_policy,
    orchestrator_config,
    rl_config,
    run_checkpoint_and_resume,
    run_compiled,
    run_everything_on,
    run_filesystem_transport,
    run_moe,
    run_orchestrator_data,
    run_orchestrator_distill,
    run_orchestrator_environment,
    run_orchestrator_local,
    run_orchestrator_openai,
    run_orchestrator_recorded,
    run_orchestrator_token_batch,
    run_zmq_transport,
    train_recorded,
)

from trainspec.config.schema_info import schema_info  # noqa: E402
from trainspec.trainers.errors import SetupError, SetupErrors  # noqa: E402

torch.set_num_threads(1)

KINDS = ("rl", "orchestrator")
SCHEMAS = {kind: schema_info(kind) for kind in KINDS}


LEAVES = {kind: leaves_of(schema) for kind, schema in SCHEMAS.items()}
# Old names the config layer rejects with their new name; they never reach a loop.
RENAMED = {
    kind: {".".join(path): info.renamed_to for path, info in schema.keys.items() if info.renamed_to}
    for kind, schema in SCHEMAS.items()
}
# Fields the config layer's rules consume for the loop: path -> rule (in the kind's pipeline).
# Rules that only check a field (validators/rl.py, validators/orchestrator.py) consume nothing.
CONSUMED_BY_RULES: dict[str, dict[str, str]] = {"rl": {}, "orchestrator": {}}
REFUSALS = {"rl": RL_REFUSALS, "orchestrator": ORCHESTRATOR_REFUSALS}
REFUSAL_IDS = {"rl": RL_REFUSAL_IDS, "orchestrator": ORCHESTRATOR_REFUSAL_IDS}
LOOPS = {"rl": "train()", "orchestrator": "run()"}

LEAF_CASES = [(kind, leaf) for kind in KINDS for leaf in LEAVES[kind]]
REFUSAL_CASES = [
    pytest.param(kind, *row, id=f"{kind}-{row_id}")
    for kind in KINDS
    for row, row_id in zip(REFUSALS[kind], REFUSAL_IDS[kind], strict=True)
]

Outcomes = dict[str, BaseException | None]
# The orchestrator's [renderer] settings of named renderers (prompts.py hands them over).
RENDERER_SETTINGS, CUSTOM_ONLY = renderer_settings("renderer")
# opsd's own [algo.renderer], built the same way (learners.LearnerContext.renderer_for).
OPSD_RENDERER_SETTINGS, OPSD_CUSTOM_ONLY = renderer_settings("algo.renderer")
RENDERER_SETTINGS = {**RENDERER_SETTINGS, **OPSD_RENDERER_SETTINGS}
CUSTOM_ONLY = {**CUSTOM_ONLY, **OPSD_CUSTOM_ONLY}
# The leaves of each source's env and serve tables: verifiers' own settings, which the source
# hands verifiers as written (verifiers_config.env_config, env_servers.serve_config);
# tests/config/test_env_schema.py proves each reaches verifiers' config.
VERIFIERS_SETTINGS = {
    **handed_to_verifiers("train.source[]"),
    **handed_to_verifiers("eval.source[]"),
}

# -- the runs ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rl_consumed(tmp_path_factory) -> FieldRecorder:
    """Every field the RL trainer's consumption runs read, and who read it."""
    out = tmp_path_factory.mktemp("rl-consumed")
    recorder = FieldRecorder()
    with isolated(), heartbeat_server() as url:
        run_everything_on(out, recorder, url)
        run_filesystem_transport(out, recorder)
        run_zmq_transport(out, recorder)
        run_checkpoint_and_resume(out, recorder)
        run_moe(out, recorder)
        run_compiled(out, recorder)
    return recorder


@pytest.fixture(scope="module")
def rl_refused(tmp_path_factory) -> tuple[Outcomes, FieldRecorder]:
    """What `train` raised for each refusal row, and the fields it read on the way."""
    out = tmp_path_factory.mktemp("rl-refused")
    recorder = FieldRecorder()
    outcomes: Outcomes = {}
    with isolated():
        for row_id, (_, settings, cpu_only) in zip(RL_REFUSAL_IDS, RL_REFUSALS, strict=True):
            if not applies_here(cpu_only):
                continue
            if settings.get("memory_profiler_path") == "PROFILE":
                settings = {**settings, "memory_profiler_path": str(out / "memory.pickle")}
            config = rl_config(out, row_id.replace("=", "-").replace(".", "-"), settings)
            try:
                train_recorded(recorder, config)
                outcomes[row_id] = None
            except (SetupError, SetupErrors) as err:
                outcomes[row_id] = err
    return outcomes, recorder


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    """A trainer run's broadcasts (steps 0..2) for the orchestrator to sample from."""
    with isolated():
        return broadcast_policy(tmp_path_factory.mktemp("policy"))


@pytest.fixture(scope="module")
def orchestrator_consumed(tmp_path_factory, policy) -> FieldRecorder:
    """Every field the orchestrator's consumption runs read, and who read it."""
    out = tmp_path_factory.mktemp("orchestrator-consumed")
    recorder = FieldRecorder()
    with isolated() as mp, heartbeat_server() as url:
        run_orchestrator_local(out, recorder, policy, url)
        run_orchestrator_openai(out, recorder, policy, mp)
        run_orchestrator_distill(out, recorder, policy, mp)
        run_orchestrator_environment(out, recorder, policy)
        run_orchestrator_data(out, recorder, policy)
        run_orchestrator_token_batch(out, recorder, policy)
    return recorder


@pytest.fixture(scope="module")
def orchestrator_refused(tmp_path_factory, policy) -> tuple[Outcomes, FieldRecorder]:
    """What `run` raised for each refusal row (one step each), and the fields it read."""
    out = tmp_path_factory.mktemp("orchestrator-refused")
    recorder = FieldRecorder()
    outcomes: Outcomes = {}
    with isolated():
        for row_id, (_, settings, cpu_only) in zip(
            ORCHESTRATOR_REFUSAL_IDS, ORCHESTRATOR_REFUSALS, strict=True
        ):
            if not applies_here(cpu_only):
                continue
            name = row_id.replace("=", "-").replace(".", "-")
            config = orchestrator_config(out, name, {**settings, "max_steps": 1})
            try:
                run_orchestrator_recorded(recorder, config, policy)
                outcomes[row_id] = None
            except (SetupError, SetupErrors) as err:
                outcomes[row_id] = err
    return outcomes, recorder


def consumed_of(kind: str, request) -> FieldRecorder:
    return request.getfixturevalue(f"{kind}_consumed")


def refused_of(kind: str, request) -> tuple[Outcomes, FieldRecorder]:
    return request.getfixturevalue(f"{kind}_refused")


# -- what counts ------------------------------------------------------------------------------


def naming(kind: str, err: BaseException | None, path: str) -> list[SetupError]:
    """The refusals in `err` whose path is `path` (for the orchestrator also under its
    [orchestrator] name)."""
    if err is None:
        return []
    errors = err.errors if isinstance(err, SetupErrors) else [err]
    names = {path, ORCHESTRATOR_PREFIX + path} if kind == "orchestrator" else {path}
    return [e for e in errors if re.sub(r"\[\d+\]", "[]", e.path) in names]


def refused_rows(kind: str, outcomes: Outcomes) -> list[tuple[str, str, dict]]:
    """(row id, path, settings) of the rows whose refusal happened, naming the path."""
    return [
        (row_id, path, settings)
        for row_id, (path, settings, _) in zip(REFUSAL_IDS[kind], REFUSALS[kind], strict=True)
        if naming(kind, outcomes.get(row_id), path)
    ]


def refused_by(kind: str, leaf: str, outcomes: Outcomes) -> str | None:
    """The refusal that covers `leaf`: one naming it or a table above it, or refusals of every
    variant of a union above it that has the key leading to it (`algo.teacher.base_url` is
    covered when every algo variant with `teacher` is refused)."""
    rows = refused_rows(kind, outcomes)
    for row_id, path, _ in rows:
        if leaf == path or leaf.startswith(path + "."):
            return row_id
    parts = leaf.split(".")
    for depth in range(len(parts) - 1, -1, -1):
        table, key = ".".join(parts[:depth]), parts[depth]
        variants = SCHEMAS[kind].variants.get(tuple(parts[:depth]))
        if not variants:
            continue
        selector = f"{table}.type" if table else "type"
        refused: dict[str, str] = {}
        for row_id, path, settings in rows:
            if path == selector:
                tag = settings.get(selector) or (settings.get(table) or {}).get("type")
                refused.setdefault(tag, row_id)
        owners = [tag for tag, keys in variants.items() if key in keys]
        if owners and all(tag in refused for tag in owners):
            return " and ".join(refused[tag] for tag in owners)
    return None


# A train source's own algo table is the top-level one's class, handed to the same builder
# (sources.py: build_learner(source.algo or config.algo, ...)); its leaves count as those of
# [orchestrator.algo], and test_a_sources_own_algo_table_reaches_the_same_builder proves the
# hand-off (tests/trainers/orchestrator/test_train_eval_sources.py).
SOURCE_ALGO = "train.source[].algo."


def how_consumed(kind: str, leaf: str, request) -> str | None:
    if kind == "orchestrator" and leaf.startswith(SOURCE_ALGO):
        inner = "algo." + leaf.removeprefix(SOURCE_ALGO)
        how = how_consumed(kind, inner, request)
        return f"as {inner}, {how} (the same build_learner)" if how else None
    consumed = consumed_of(kind, request)
    outcomes, refused_reads = refused_of(kind, request)
    if consumed.readers(leaf):
        return "read by " + ", ".join(sorted(consumed.readers(leaf)))
    if refusal := refused_by(kind, leaf, outcomes):
        return f"refused with {refusal}"
    if kind == "orchestrator" and leaf in RENDERER_SETTINGS:
        # proven by test_a_prompt_renderer_setting_reaches_the_renderers_package
        return f'handed to the renderers package (renderer.name = "{RENDERER_SETTINGS[leaf]}")'
    table = ".".join(leaf.split(".")[:3])  # a source's env or serve table
    if kind == "orchestrator" and leaf in VERIFIERS_SETTINGS and consumed.readers(table):
        return f"handed to verifiers with its table ({VERIFIERS_SETTINGS[leaf]})"
    if kind == "orchestrator" and leaf in CUSTOM_ONLY:
        table = leaf.rsplit(".", 1)[0]
        custom = refused_by(kind, f"{table}.name", outcomes)
        return f'only under renderer.name = "custom", refused with {custom}' if custom else None
    if leaf in CONSUMED_BY_RULES[kind]:
        return f"consumed by the rule {CONSUMED_BY_RULES[kind][leaf]}"
    if leaf in RENAMED[kind]:
        return f"renamed to {RENAMED[kind][leaf]}"
    if refused_reads.readers(leaf):
        return "read only while refusing another field, by " + ", ".join(
            sorted(refused_reads.readers(leaf))
        )
    return None


# -- the tests --------------------------------------------------------------------------------


def test_the_schemas_have_leaves():
    assert len(LEAVES["rl"]) > 100 and len(LEAVES["orchestrator"]) > 40
    assert {"loss.kl_tau", "rollout_transport.hwm", "optim.betas1"} <= set(LEAVES["rl"])
    assert {"sampler.base_url", "eval.num_examples", "seed", "algo.decay", "train.source"} <= set(
        LEAVES["orchestrator"]
    )
    assert "loss" not in LEAVES["rl"] and "sampler" not in LEAVES["orchestrator"]


@pytest.mark.parametrize(
    ("kind", "leaf"), LEAF_CASES, ids=[f"{k}-{leaf}" for k, leaf in LEAF_CASES]
)
def test_leaf_is_consumed_or_refused(kind, leaf, request):
    assert how_consumed(kind, leaf, request) is not None, (
        f"{kind}: {leaf} is neither read by a component, refused at start, nor consumed by a rule"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_every_leaf_counts(kind, request):
    """One report per kind of all the leaves nothing consumes (the parametrized test names
    each)."""
    table = {leaf: how_consumed(kind, leaf, request) for leaf in LEAVES[kind]}
    print("\n".join(f"{kind} {leaf}: {how or 'NOT CONSUMED'}" for leaf, how in table.items()))
    missing = [leaf for leaf, how in table.items() if how is None]
    assert not missing, f"{kind}: {len(missing)} leaves silently ignored:\n  " + "\n  ".join(
        missing
    )


@pytest.mark.parametrize(("kind", "path", "settings", "cpu_only"), REFUSAL_CASES)
def test_refused_at_start(kind, path, settings, cpu_only, request):
    if not applies_here(cpu_only):
        pytest.skip(f"{path} is honoured on this device")
    outcomes, _ = refused_of(kind, request)
    row_id = request.node.callspec.id.removeprefix(f"{kind}-")
    err = outcomes[row_id]
    shown = {key: value for key, value in settings.items() if key.startswith(path)}
    assert err is not None, f"{kind}: {LOOPS[kind]} accepted {shown}"
    named = naming(kind, err, path)
    errors = err.errors if isinstance(err, SetupErrors) else [err]
    assert named, f"{kind}: no refusal names {path}: {[e.path for e in errors]}"
    assert all(e.problem.strip() and e.fix.strip() for e in named)


def test_no_field_is_consumed_by_a_rule_and_the_renames_are_the_orchestrators():
    """No rule consumes a field for these loops yet; the orchestrator's two old names are
    renamed keys, which `load` rejects naming the new one (and migrate-config rewrites)."""
    assert CONSUMED_BY_RULES == {"rl": {}, "orchestrator": {}}
    assert RENAMED == {
        "rl": {},
        "orchestrator": {
            "rollouts_per_example": "group_size",
            "trainer_ranks": "num_train_workers",
        },
    }


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED["orchestrator"].items()))
def test_a_renamed_orchestrator_key_is_rejected_naming_the_new_one(old, new):
    from trainspec.config import ConfigError, load

    with pytest.raises(ConfigError) as caught:
        load("orchestrator", [], {old: 2})
    assert f"{old} was renamed to {new}" in str(caught.value)


def test_a_prompt_renderer_setting_reaches_the_renderers_package(monkeypatch):
    """prompts.py builds a named renderer through NamedRendering with the table's settings, the
    path test_field_coverage.py proves hands every setting to the package."""
    from types import SimpleNamespace

    from trainspec.config import load
    from trainspec.trainers.chat import named_renderers, prompts

    built = []

    class Renderer:
        def get_stop_token_ids(self):
            return [7, 8]

        def render_ids(self, messages, add_generation_prompt=False):
            return [1, 2, 3] if add_generation_prompt else [1, 2]

    def build(name, settings, tokenizer):
        built.append((name, settings))
        return Renderer()

    monkeypatch.setattr(named_renderers, "build_renderer", build)
    settings = {"renderer": {"name": "qwen3", "enable_thinking": False}}
    config = load("orchestrator", [], settings).config
    render, stop_id = prompts.prompt_renderer(config.renderer, SimpleNamespace())
    assert render([{"role": "user", "content": "x"}]) == [1, 2, 3]
    assert stop_id == 7
    assert built == [("qwen3", {"enable_thinking": False})]


def test_an_opsd_renderer_setting_reaches_the_renderers_package(monkeypatch):
    """opsd renders its hint through prompts.prompt_renderer too, with its own table."""
    from trainspec.config import load
    from trainspec.trainers.chat import named_renderers
    from trainspec.trainers.orchestrator.sources import LearnerContext

    built = []

    class Renderer:
        def get_stop_token_ids(self):
            return [7]

        def render_ids(self, messages, add_generation_prompt=False):
            return [len(messages)]

    def build(name, settings, tokenizer):
        built.append((name, settings))
        return Renderer()

    monkeypatch.setattr(named_renderers, "build_renderer", build)
    settings = {"algo": {"type": "opsd", "renderer": {"name": "qwen3", "enable_thinking": False}}}
    config = load("orchestrator", [], settings).config
    context = LearnerContext(object(), 7, lambda messages: [0], None)
    assert context.renderer_for(config.algo.renderer)([{"role": "user", "content": "x"}]) == [1]
    assert built == [("qwen3", {"enable_thinking": False})]
    auto = load("orchestrator", [], {"algo": {"type": "opsd"}}).config.algo.renderer
    assert context.renderer_for(auto) is context.render


@pytest.mark.parametrize("kind", KINDS)
def test_recorded_paths_are_schema_keys(kind, request):
    _, refused_reads = refused_of(kind, request)
    recorded = consumed_of(kind, request).paths() | refused_reads.paths()
    known = {".".join(path) for path in SCHEMAS[kind].keys}
    for leaf in LEAVES[kind]:  # and the tables inside an array's tables (train.source[].data)
        parts = leaf.split(".")
        known |= {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
    unknown = sorted(p for p in recorded if p not in known)
    assert not unknown, f"{kind}: read paths the schema does not have: {unknown}"


@pytest.mark.parametrize("kind", KINDS)
def test_components_do_not_write_the_config(kind, request):
    _, refused_reads = refused_of(kind, request)
    writes = {**consumed_of(kind, request).writes, **refused_reads.writes}
    assert not writes, f"{kind}: components changed the config: {dict(writes)}"
