"""The orchestrator's sources, built from `[[orchestrator.train.source]]` and
`[[orchestrator.eval.source]]`: each one's task, name, pick ratio, group size, algorithm and
sampling, with the group tables' settings filled in where the source sets none.

    train = train_sources(config, tokenizer, render)     # list[TrainSource], at least one
    evals = eval_sources(config, tokenizer, render)      # [] without [orchestrator.eval]
    evals = build_eval_sources(sft_config.eval, tokenizer, render, players=..., seed=...)

A source's task is its own data and reward (environments/data_task.py), a built-in taskset
(task.py) or a verifiers environment, played by the run's Players, on an environment server
they start where it has a serve table (environments/players.py). Which source each
step's prompts come from is step_batch.py's (the pickers).

A source's `sampling` table is merged over the group's key by key (the keys it sets, not null,
win), its `group_size` and `algo` default to the orchestrator's. Null means unset, so a config
written out and read back (as `rl` hands it to the orchestrator) merges the same. Names
default to the taskset id (validators/orchestrator.py: source_name, and the rule that keeps
them unique). Settings this build cannot honour are refused here, all at once, each with the
source's dotted path ("orchestrator.train.source[1].curriculum").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainspec.validators.orchestrator import source_name

from ..chat.prompts import prompt_renderer
from ..errors import SetupError, SetupErrors, raise_all
from .environments.data_task import DataTask
from .environments.players import Players, is_environment, serve_refusals, starts_server
from .environments.task import PromptStream, Task
from .environments.verifiers_env import EnvTask
from .learners import Hinted, Learner, build_learner, scores_on_server
from .sampling.sampler import unscaled_scores

PREFIX = "orchestrator."


@dataclass
class Sampling:
    temperature: float | None
    max_tokens: int | None
    extra_body: dict[str, Any]


@dataclass
class TrainSampling(Sampling):
    temperature: float  # train sampling always has one


@dataclass
class TrainSource:
    name: str
    task: PromptStream
    ratio: float
    group_size: int
    learner: Learner
    sampling: TrainSampling


@dataclass
class EvalSource:
    name: str
    task: PromptStream
    num_examples: int
    group_size: int
    interval: int
    sampling: Sampling


def _merged(group, own, extra_body: bool = True) -> Sampling:
    """A source's sampling table over its group's: each key the source sets (not null) wins."""

    def pick(key: str) -> Any:
        value = getattr(own, key) if own is not None else None
        return value if value is not None else getattr(group, key)

    return Sampling(
        pick("temperature"), pick("max_completion_tokens"), pick("extra_body") if extra_body else {}
    )


def _task(
    source, path: str, tokenizer, *, seed: int, role: str, render, players: Players, index: int
):
    """A source's task: its own data and reward, its built-in taskset, or its environment
    (played here, on the server its serve.address names, or on one started for it)."""
    if source.data is not None:
        return DataTask.from_source(source, path, tokenizer, seed=seed, render=render)
    if is_environment(source):
        address = source.serve.address if source.serve is not None else None
        if starts_server(source):
            address = players.serve(source, path, split=role, index=index)
        return EnvTask.from_env(
            source.env, f"{path}.env", players.get(), seed=seed, address=address
        )
    return Task.from_env(source.env, f"{path}.env", tokenizer, seed=seed, role=role, render=render)


def _collect(errors: list[SetupError], build: Callable, *args, **kwargs) -> Any:
    """build(*args, **kwargs), or None with its refusals added to `errors`."""
    try:
        return build(*args, **kwargs)
    except SetupError as err:
        errors.append(err)
    except SetupErrors as err:
        errors.extend(err.errors)
    return None


@dataclass
class LearnerContext:
    """What building a source's learner needs besides its algo table."""

    tokenizer: Any
    stop_id: int | None
    render: Callable
    max_batch: int | None

    def renderer_for(self, renderer_cfg) -> Callable:
        """opsd's renderer: the orchestrator's prompt renderer when "auto", else its own."""
        if renderer_cfg.name == "auto":
            return self.render
        return prompt_renderer(renderer_cfg, self.tokenizer)[0]


def train_sources(
    config,
    tokenizer,
    render: Callable | None = None,
    *,
    local: bool = True,
    stop_id=None,
    players: Players | None = None,
) -> list[TrainSource]:
    """The train sources; `local`: the in-process sampler, which sends no request extras.
    Frozen models (opd's teacher, sft's sampling source) must be up: this waits for them."""
    errors: list[SetupError] = []
    players = players or Players.of(config, tokenizer)
    if render is None or stop_id is None:
        default_render, default_stop = prompt_renderer(config.renderer, tokenizer)
        render, stop_id = render or default_render, default_stop if stop_id is None else stop_id
    context = LearnerContext(tokenizer, stop_id, render, config.concurrency.max_inflight)
    built: list[TrainSource] = []
    group_sampling = config.train.sampling
    if not config.train.source:
        raise SetupError(
            f"{PREFIX}train.source",
            "is empty: there is nothing to train on",
            "add a source: [[orchestrator.train.source]] with env.taskset.id = "
            '"builtin:reverse-text"',
        )
    for index, source in enumerate(config.train.source):
        path = f"{PREFIX}train.source[{index}]"
        name = source_name(source)
        errors += serve_refusals(source, path)
        if source.curriculum is not None:
            errors.append(
                SetupError(
                    f"{path}.curriculum",
                    "is set: this build picks prompts in order and keeps every group",
                    "drop it",
                )
            )
        merged = _merged(group_sampling, source.sampling)
        sampling = TrainSampling(
            float(merged.temperature or 0), merged.max_tokens, merged.extra_body
        )
        if sampling.extra_body != group_sampling.extra_body:
            errors.append(
                SetupError(
                    f"{path}.sampling.extra_body",
                    "is set: request extras go to a server, one set for every source"
                    + (" (the in-process sampler sends none)" if local else ""),
                    "drop it" if local else "set [orchestrator.train.sampling] extra_body once",
                )
            )
        own = source.algo is not None
        algo = source.algo if own else config.algo
        task = _collect(errors, _task, source, path, tokenizer, seed=config.seed, role="train",
                        render=render, players=players, index=index)  # fmt: skip
        if task is None:
            continue
        algo_path = f"{path}.algo" if own else PREFIX + "algo"
        learner = _collect(errors, build_learner, algo, algo_path, name, context)
        if isinstance(learner, Hinted) and isinstance(task, EnvTask):
            errors.append(
                SetupError(
                    f"{algo_path}.type",
                    "= 'opsd' re-renders each prompt's messages after a hint, and an environment "
                    "renders its own prompts (its episodes may run several turns)",
                    'use type = "opd" with a teacher endpoint for an environment source',
                )
            )
            continue
        if isinstance(learner, Hinted):  # every row needs its demonstration: check the first
            _collect(errors, learner.demonstration, task.at(0))
        if scores_on_server(learner, not local) and sampling.temperature != 1.0:
            own = getattr(source.sampling, "temperature", None) is not None
            where = f"{path}.sampling" if own else f"{PREFIX}train.sampling"
            problem, fix = unscaled_scores(sampling.temperature)
            errors.append(
                SetupError(
                    f"{where}.temperature",
                    f"= {sampling.temperature:g}: {algo_path} {problem}",
                    fix,
                )
            )
        if learner is None:
            continue
        built.append(
            TrainSource(
                name,
                task,
                source.ratio,
                source.group_size or config.group_size,
                learner,
                sampling,
            )
        )
    temperatures = {s.sampling.temperature for s in built}
    if len(temperatures) > 1:  # a RolloutBatch carries one temperature for the trainer
        errors.append(
            SetupError(
                f"{PREFIX}train.source",
                f"sample at different temperatures ({sorted(temperatures)}); the trainer "
                "computes every batch's log-probabilities at one",
                "give every train source the same sampling.temperature",
            )
        )
    raise_all(errors)
    return built


def eval_sources(
    config, tokenizer, render: Callable | None = None, *, players: Players | None = None
) -> list[EvalSource]:
    """The orchestrator's eval sources ([] without [orchestrator.eval])."""
    if config.eval is None:
        return []
    players = players or Players.of(config, tokenizer)
    return build_eval_sources(
        config.eval, tokenizer, render, players=players, seed=config.seed,
        first_index=len(config.train.source), prefix=PREFIX,
    )  # fmt: skip


def build_eval_sources(
    eval_cfg,
    tokenizer,
    render: Callable | None = None,
    *,
    players: Players,
    seed: int,
    first_index: int = 0,
    prefix: str = "",
) -> list[EvalSource]:
    """The sources of an eval table (the orchestrator's [orchestrator.eval], an SFT run's
    [eval]): each one's task, name, sample count, group size, interval and sampling, its unset
    settings taken from the table. `prefix` places the table in the config ("orchestrator."),
    `first_index` is the index of its first source among the run's environment servers."""
    errors: list[SetupError] = []
    built: list[EvalSource] = []
    group = eval_cfg
    for index, source in enumerate(group.source):
        path = f"{prefix}eval.source[{index}]"
        name = source_name(source)
        errors += serve_refusals(source, path)
        sampling = _merged(group.sampling, source.sampling, extra_body=False)  # refusals.py
        task = _collect(errors, _task, source, path, tokenizer, seed=seed, role="eval",
                        render=render, players=players, index=first_index + index)  # fmt: skip
        if task is None:
            continue
        num_examples = (
            source.num_examples if source.num_examples is not None else group.num_examples
        )
        count = _collect(errors, task.count, num_examples)
        if count is None:  # an infinite taskset: all of it
            continue
        if count == 0:
            own = source.num_examples is not None
            errors.append(
                SetupError(
                    f"{path}.num_examples" if own else f"{prefix}eval.num_examples",
                    f"= {num_examples} leaves no prompt to evaluate",
                    "evaluate at least one prompt (-1 takes them all), or drop the source",
                )
            )
            continue
        built.append(
            EvalSource(
                name,
                task,
                num_examples,
                source.group_size if source.group_size is not None else group.group_size,
                source.interval if source.interval is not None else group.interval,
                sampling,
            )
        )
    raise_all(errors)
    return built
