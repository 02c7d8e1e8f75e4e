"""The orchestrator's sources, built from `[[orchestrator.train.source]]` and
`[[orchestrator.eval.source]]`: each one's task, name, pick ratio, group size, algorithm and
sampling, with the group tables' settings filled in where the source sets none.

    train = train_sources(config, tokenizer, render)     # list[TrainSource], at least one
    picks = SourcePicker(train, batch_size, seed).step(step)   # (source, position) per prompt
    evals = eval_sources(config, tokenizer, render)      # [] without [orchestrator.eval]
    evals = build_eval_sources(sft_config.eval, tokenizer, render, players=..., seed=...)

A source's `sampling` table is merged over the group's key by key (the keys it sets, not null,
win), its `group_size` and `algo` default to the orchestrator's. Null means unset, so a config
written out and read back (as `rl` hands it to the orchestrator) merges the same. Names
default to the taskset id (validators/orchestrator.py: source_name, and the rule that keeps
them unique). Settings this build cannot honour are refused here, all at once, each with the
source's dotted path ("orchestrator.train.source[1].curriculum").
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainspec.validators.orchestrator import source_name

from ..errors import SetupError, SetupErrors, raise_all
from .data_task import DataTask
from .env_servers import EnvServers
from .environment import EnvPlayer, EnvTask
from .learners import Hinted, Learner, build_learner
from .prompts import prompt_renderer
from .task import PromptStream, Task

PREFIX = "orchestrator."
BUILTIN_PREFIX = "builtin:"


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


def is_environment(source) -> bool:
    """Whether a source is a verifiers environment: no data, and a taskset id not built in."""
    taskset = source.env.get("taskset") if source.data is None else None
    ident = taskset.get("id") if isinstance(taskset, dict) else None
    return isinstance(ident, str) and bool(ident) and not ident.startswith(BUILTIN_PREFIX)


def starts_server(source) -> bool:
    """Whether the orchestrator starts an environment server for `source`: an environment
    whose serve table sizes one and names no address of a server started elsewhere."""
    return is_environment(source) and bool(source.serve) and source.serve.get("address") is None


def _task(
    source, path: str, tokenizer, *, seed: int, role: str, render, players: Players, index: int
):
    """A source's task: its own data and reward, its built-in taskset, or its environment
    (played here, on the server its serve.address names, or on one started for it)."""
    if source.data is not None:
        return DataTask.from_source(source, path, tokenizer, seed=seed, render=render)
    if is_environment(source):
        address = source.serve.get("address")
        if starts_server(source):
            address = players.serve(source, path, split=role, index=index)
        return EnvTask.from_env(
            source.env, f"{path}.env", players.get(), seed=seed, address=address
        )
    return Task.from_env(source.env, f"{path}.env", tokenizer, seed=seed, role=role, render=render)


class Players:
    """The one EnvPlayer of a run's environment sources, built when the first needs it (a run of
    built-in tasksets never imports verifiers), and the environment servers started for them
    (their files under `run_dir`, source i at `base_port` + i)."""

    def __init__(
        self,
        tokenizer,
        renderer_cfg,
        *,
        run_dir: Path,
        base_port: int,
        max_inflight: int | None,
        inflight=None,
    ) -> None:
        self.tokenizer = tokenizer
        self.renderer_cfg = renderer_cfg
        self.run_dir = run_dir
        self.base_port = base_port
        self.max_inflight = max_inflight
        self.inflight = inflight  # an InflightLimit (inflight.py): the orchestrator's cap
        self.player: EnvPlayer | None = None
        self.servers: EnvServers | None = None

    @classmethod
    def of(cls, config, tokenizer, inflight=None) -> Players:
        """The orchestrator's: its renderer, concurrency (`inflight`, its cap) and
        env_server_base_port, servers' files in <output_dir>/orchestrator."""
        return cls(
            tokenizer,
            config.renderer,
            run_dir=Path(config.output_dir) / "orchestrator",
            base_port=config.env_server_base_port,
            max_inflight=config.concurrency.max_inflight,
            inflight=inflight,
        )

    def serve(self, source, path: str, *, split: str, index: int) -> str:
        """The address of the environment server started for `source` (index i of the train
        sources, then the eval sources)."""
        if self.servers is None:
            self.servers = EnvServers(self.run_dir, base_port=self.base_port)
        name = source_name(source).replace("/", "_")
        return self.servers.start(
            source.env, dict(source.serve), path, split=split, index=index, name=name
        )

    def get(self) -> EnvPlayer:
        if self.player is None:
            self.player = EnvPlayer(
                self.tokenizer,
                self.renderer_cfg,
                max_inflight=self.max_inflight,
                inflight=self.inflight,
            )
        return self.player

    def close(self) -> None:
        if self.player is not None:
            self.player.close()
        if self.servers is not None:
            self.servers.close()


def _collect(errors: list[SetupError], build: Callable, *args, **kwargs) -> Any:
    """build(*args, **kwargs), or None with its refusals added to `errors`."""
    try:
        return build(*args, **kwargs)
    except SetupError as err:
        errors.append(err)
    except SetupErrors as err:
        errors.extend(err.errors)
    return None


def _not_served(source, path: str, errors: list[SetupError]) -> None:
    """A serve table configures a verifiers environment server: one started elsewhere
    (`address`, whose sizing is its own) or one the orchestrator starts (every other key). A
    built-in taskset or a dataset plays in the orchestrator and has none."""
    served = dict(source.serve)
    if not is_environment(source):
        for key, value in served.items():
            errors.append(
                SetupError(
                    f"{path}.serve.{key}",
                    f"= {value!r}: only a verifiers environment is served; a built-in "
                    "taskset or a dataset plays in the orchestrator",
                    "drop it (concurrency.max_inflight bounds the episodes in flight)",
                )
            )
    elif served.get("address") is not None:
        for key, value in served.items():
            if key != "address":
                errors.append(
                    SetupError(
                        f"{path}.serve.{key}",
                        f"= {value!r}: serve.address names a server started elsewhere, "
                        "which is sized where it starts",
                        "drop it, or drop serve.address to have the orchestrator start the server",
                    )
                )


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
        _not_served(source, path, errors)
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
        _not_served(source, path, errors)
        sampling = _merged(group.sampling, source.sampling, extra_body=False)  # support.py
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


class SourcePicker:
    """Which source each prompt of a step comes from, and which of that source's prompts it is.

    Sources are picked in proportion to their ratios, one prompt (a group of the source's
    group_size completions) at a time, until the step holds `batch_size` completions. Each
    source walks its own seeded prompt stream, so the picks of step n are the same for the same
    seed however the run got there: a resumed run replays the earlier steps' picks (no model
    calls) to find its place."""

    def __init__(self, sources: list[TrainSource], batch_size: int, seed: int) -> None:
        self.sources = sources
        self.batch_size = batch_size
        self.seed = seed
        self._next_step = 0
        self._used = [0] * len(sources)  # prompts taken from each source before _next_step

    def _draw(self, step: int) -> list[int]:
        rng = random.Random(f"{self.seed}:sources:{step}")
        weights = [s.ratio for s in self.sources]
        picks: list[int] = []
        total = 0
        while total < self.batch_size:
            index = 0 if len(self.sources) == 1 else rng.choices(range(len(weights)), weights)[0]
            picks.append(index)
            total += self.sources[index].group_size
        return picks

    def step(self, step: int) -> list[tuple[int, int]]:
        """(source index, position in its prompt stream) of each of step `step`'s prompts."""
        if step < self._next_step:
            self._next_step, self._used = 0, [0] * len(self.sources)
        while self._next_step < step:
            for index in self._draw(self._next_step):
                self._used[index] += 1
            self._next_step += 1
        out = []
        for index in self._draw(step):
            out.append((index, self._used[index]))
            self._used[index] += 1
        self._next_step += 1
        return out


class TokenPicker:
    """The picks of a step sized by token_batch_size: sources drawn one prompt at a time (as
    SourcePicker does) for as many prompts as the step's tokens need, which depends on the
    completions. A resumed run cannot replay that without sampling, so every step's prompt
    counts are written down (`picks.jsonl` in the orchestrator's directory, a line a step) and
    a resume at step n starts from the counts after step n - 1."""

    def __init__(self, sources: list[TrainSource], seed: int, record: Path, tokens: int) -> None:
        self.sources = sources
        self.tokens = tokens  # token_batch_size
        self.seed = seed
        self.record = record
        self._used = [0] * len(sources)
        self._rng = random.Random()

    def resume(self, step: int) -> None:
        """Continue after step `step` - 1 (step 0: a fresh record)."""
        if step == 0:
            self.record.unlink(missing_ok=True)
            return
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        counts = {entry["step"]: entry["used"] for entry in map(json.loads, lines)}
        if step - 1 not in counts or len(counts[step - 1]) != len(self.sources):
            raise SetupError(
                f"{PREFIX}token_batch_size",
                f"the run resumes at step {step}, and {self.record} does not say which prompts "
                f"steps up to {step - 1} took (a step sized by tokens cannot be replayed)",
                "resume in the run directory that ran those steps, with the same train sources "
                "(or size steps by batch_size)",
            )
        self._used = list(counts[step - 1])
        kept = [line for line in lines if json.loads(line)["step"] < step]
        self.record.write_text("".join(line + "\n" for line in kept))

    def start(self, step: int) -> None:
        self._rng = random.Random(f"{self.seed}:sources:{step}")

    def take(self, count: int) -> list[tuple[int, int]]:
        """(source index, position) of `count` more prompts of the current step."""
        weights = [s.ratio for s in self.sources]
        out = []
        for _ in range(count):
            index = 0 if len(weights) == 1 else self._rng.choices(range(len(weights)), weights)[0]
            out.append((index, self._used[index]))
            self._used[index] += 1
        return out

    def commit(self, step: int) -> None:
        with self.record.open("a") as file:
            file.write(json.dumps({"step": step, "used": self._used}) + "\n")
