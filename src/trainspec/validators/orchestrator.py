"""Rules of the orchestrator config."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainspec.config_model import written

from .context import RuleContext, show
from .shared import reject_protected_env_vars, validate_env_var_names

if TYPE_CHECKING:
    from trainspec.generated.orchestrator import OrchestratorConfig

DEFAULT_BATCH_SIZE = 128
GROUP_RELATIVE = ("grpo", "max_rl", "echo", "hierarchical_grpo")  # advantages within a group


def one_batch_size(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """batch_size and token_batch_size size a step two ways: set one of them."""
    if cfg.batch_size is not None and cfg.token_batch_size is not None:
        ctx.error(
            "token_batch_size",
            f"= {show(cfg.token_batch_size)} and batch_size = {show(cfg.batch_size)} are both "
            "set; a step is sized by one of them",
            "drop one of the two",
            related=("batch_size",),
        )


def batch_holds_whole_groups(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """batch_size (128 when unset) must be a multiple of group_size, so a step holds whole
    groups: advantages compare the completions of one prompt."""
    if cfg.token_batch_size is not None:
        return
    batch = cfg.batch_size if cfg.batch_size is not None else DEFAULT_BATCH_SIZE
    if batch % cfg.group_size:
        below = batch - batch % cfg.group_size
        ctx.error(
            "batch_size",
            f"= {show(batch)} is not a multiple of group_size = {show(cfg.group_size)}",
            f"set batch_size = {max(below, cfg.group_size)} or {below + cfg.group_size}",
            related=("group_size",),
        )


def concurrency_holds_a_group(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """concurrency.max_inflight and initial_inflight must hold one group (group_size), and
    initial_inflight and min_inflight may not exceed max_inflight."""
    c = cfg.concurrency
    for key in ("max_inflight", "initial_inflight"):
        value = getattr(c, key)
        if value is not None and value < cfg.group_size:
            ctx.error(
                f"concurrency.{key}",
                f"= {show(value)} is less than group_size = {show(cfg.group_size)}: a group's "
                "completions are in flight together",
                f"set concurrency.{key} >= {cfg.group_size}",
                related=("group_size",),
            )
    check_concurrency_bounds(ctx, "concurrency", c)


def check_concurrency_bounds(ctx: RuleContext, at: str, c: Any) -> None:
    """initial_inflight and min_inflight of the concurrency table at `at` may not exceed its
    max_inflight (the reference's ConcurrencyConfig.validate_bounds)."""
    if c.max_inflight is None:
        return
    for key in ("initial_inflight", "min_inflight"):
        value = getattr(c, key)
        if value is not None and value > c.max_inflight:
            ctx.error(
                f"{at}.{key}",
                f"= {show(value)} is above {at}.max_inflight = {show(c.max_inflight)}",
                f"set {at}.{key} <= {c.max_inflight}, or raise max_inflight",
                related=(f"{at}.max_inflight",),
            )


def single_rollouts_learn_nothing(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """group_size = 1 gets a warning with a group-relative algorithm (grpo, max_rl): every
    advantage is 0, so nothing is learned. rae compares with a running baseline instead."""
    if cfg.group_size == 1 and cfg.algo.type in GROUP_RELATIVE:
        ctx.warn(
            "group_size",
            f"= 1 with algo {cfg.algo.type} gives every completion an advantage of 0: the "
            "trainer learns nothing",
            'sample at least 2 completions per prompt (8 is common), or use algo.type = "rae"',
        )


RESERVED_NAMES = ("agg",)  # the reference's name of the all-sources aggregate in metrics


def source_name(source: Any) -> str:
    """A source's name: its `name`, else its taskset id, else its data's name."""
    if source.name:
        return source.name
    if source.env.taskset.id:
        return str(source.env.taskset.id)
    return source.data.name if source.data is not None else ""


def _source_lists(cfg: OrchestratorConfig) -> tuple[tuple[str, list[Any]], ...]:
    return (
        ("train", list(cfg.train.source)),
        ("eval", list(cfg.eval.source) if cfg.eval else []),
    )


def source_names_distinct(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """Sources of one list need distinct names (the name defaults to the taskset id, else the
    data's name), and none may be "agg", which the reference's metrics use for all sources."""
    for table, sources in _source_lists(cfg):
        check_source_names(ctx, f"{table}.source", sources)


def check_source_names(ctx: RuleContext, at: str, sources: list[Any]) -> None:
    """The names of the sources of the list at `at` ("train.source", "eval.source"): distinct,
    and not a reserved one."""
    seen: dict[str, int] = {}
    for index, source in enumerate(sources):
        name = source_name(source)
        if name in RESERVED_NAMES:
            ctx.error(
                f"{at}.{index}.name",
                f"= {name!r} is reserved (the metrics of all sources together)",
                "pick another name",
            )
        elif name in seen:
            ctx.error(
                f"{at}.{index}.name",
                f"= {name!r} also names {at}[{seen[name]}]",
                "give each source its own name",
                related=(f"{at}.{seen[name]}",),
            )
        seen.setdefault(name, index)


def source_has_one_task(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """A source is an environment (`env`) or your own data (`data` with at least one `reward`),
    not both; `reward` and `reward_weights` go with `data`, one weight per function."""
    for table, sources in _source_lists(cfg):
        check_source_tasks(ctx, f"{table}.source", sources)


def env_keys_are_no_typos(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """A key of an open env table that looks like a typo of one of verifiers' own keys there."""
    for table, sources in _source_lists(cfg):
        check_env_keys(ctx, f"{table}.source", sources)


def check_env_keys(ctx: RuleContext, at: str, sources: list[Any]) -> None:
    """The tables of a source's `env` that a plugin's own class extends (the env class's, the
    taskset's, its task's, a judge's, the harness's) or that pass keys on to the endpoint (a
    sampling table) take keys the schema cannot know, so validate-config accepts them and the
    plugin checks them when the environment loads; one that is a near miss of verifiers' own
    key in that table (taskset.sytem_prompt) is warned about now."""
    from difflib import get_close_matches

    for index, source in enumerate(sources):
        env, here = source.env, f"{at}.{index}.env"
        task, agent = env.taskset.task, env.agent
        tables = [(here, env), (f"{here}.taskset", env.taskset), (f"{here}.taskset.task", task)]
        for n, judge in enumerate(task.judges):
            judged = f"{here}.taskset.task.judges.{n}"
            tables += [(judged, judge), (f"{judged}.sampling", judge.sampling)]
        for name in ("harness", "sampling"):
            if getattr(agent, name) is not None:
                tables.append((f"{here}.agent.{name}", getattr(agent, name)))
        for path, table in tables:
            for key in table.model_extra or {}:
                close = get_close_matches(key, list(type(table).model_fields), n=1, cutoff=0.8)
                if close:
                    ctx.warn(
                        f"{path}.{key}",
                        f"is not one of verifiers' own keys of this table; {close[0]} is",
                        f"did you mean {path}.{close[0]}? (keep {key} if the plugin's own "
                        "config has it: it is checked when the environment loads)",
                        about_key=True,
                    )


def check_source_tasks(ctx: RuleContext, at: str, sources: list[Any]) -> None:
    """Each source of the list at `at` has one task: an environment, or data and a reward."""
    for index, source in enumerate(sources):
        here = f"{at}.{index}"
        if source.data is not None and written(source.env):
            ctx.error(
                f"{here}.env",
                "is set beside data: a source's prompts come from one of them",
                "drop env (the data and its reward make the task), or drop data",
                related=(f"{here}.data",),
            )
        if source.data is not None and not source.reward:
            ctx.error(
                f"{here}.data",
                "has no reward to score its completions",
                f'add reward = ["math_answer"] (or "rewards.py:my_reward") to {here}',
            )
        if source.data is None and source.reward:
            ctx.error(
                f"{here}.reward",
                "is set without data: an environment scores its own completions",
                "drop reward, or give the source data to score",
            )
        weights = source.reward_weights
        if weights is not None and len(weights) != len(source.reward):
            ctx.error(
                f"{here}.reward_weights",
                f"has {len(weights)} weights for {len(source.reward)} reward functions",
                "give one weight per function, or drop reward_weights for 1.0 each",
                related=(f"{here}.reward",),
            )


def algo_tables(cfg: OrchestratorConfig) -> list[tuple[int | None, Any]]:
    """(train source index, table) of every algo table: the group's (index None), then each
    train source's own."""
    tables: list[tuple[int | None, Any]] = [(None, cfg.algo)]
    for index, source in enumerate(cfg.train.source):
        if source.algo is not None:
            tables.append((index, source.algo))
    return tables


def _algo_paths(cfg: OrchestratorConfig) -> list[tuple[str, Any]]:
    """(dotted config path, table) of every algo table."""
    return [
        ("algo" if index is None else f"train.source.{index}.algo", algo)
        for index, algo in algo_tables(cfg)
    ]


def sampling_source_fits_algo(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """sft imitates a frozen model, so its sampling.source must be one; every other algorithm
    learns from the policy's own completions (the policy loss, or a teacher's view of them), so
    its sampling.source must be "policy"."""
    for at, algo in _algo_paths(cfg):
        frozen = algo.sampling.source != "policy"
        if algo.type == "sft" and not frozen:
            ctx.error(
                f"{at}.sampling.source",
                '= "policy": sft distillation imitates a frozen model\'s completions',
                f'set {at}.sampling.source = {{ name = "<model>", base_url = '
                '"http://localhost:8001/v1" }',
            )
        elif algo.type != "sft" and frozen:
            ctx.error(
                f"{at}.sampling.source",
                f"is a frozen model, but {algo.type} learns from the policy's own completions",
                'drop it (the default is "policy"), or use type = "sft" to imitate that model'
                + (', or type = "opd" with it as the teacher' if algo.type != "opd" else ""),
                related=(f"{at}.type",),
            )


def echo_needs_a_role(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """echo learns the messages of at least one role: a roles table with every role null
    learns nothing beyond grpo."""
    for at, algo in _algo_paths(cfg):
        if algo.type != "echo":
            continue
        roles = algo.roles
        if all(getattr(roles, role) is None for role in ("system", "user", "assistant", "tool")):
            ctx.error(
                f"{at}.roles",
                "sets no role: echo would learn no environment message",
                f'set one, e.g. {at}.roles.tool = {{ alpha = 0.1 }}, or use type = "grpo"',
            )


ORCHESTRATOR_RULES = (
    reject_protected_env_vars,
    validate_env_var_names,
    one_batch_size,
    batch_holds_whole_groups,
    concurrency_holds_a_group,
    single_rollouts_learn_nothing,
    source_names_distinct,
    source_has_one_task,
    env_keys_are_no_typos,
    sampling_source_fits_algo,
    echo_needs_a_role,
)
