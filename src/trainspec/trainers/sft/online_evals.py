"""Online evals of an SFT run (`[eval]`): at step 0, at every eval source's interval and after the
last step, the run's current weights play the eval sources, and the scores join that step's
metrics (`eval/<name>/reward`, `eval/<name>/exact_match`, `eval_reward`, `eval_exact_match`,
the orchestrator's names), the console and loss.png.

    evals = OnlineEvals.build(config, parts, run_dir, world)    # None without [eval]
    session.log(step, evals.at_start(step))                      # step 0 (or the resume step)
    metrics |= evals.after_step(step, final=step == max_steps)   # the due sources
    session.log(step, evals.at_end(step, stopped=...))           # a run that ended early

Where the evals run, and why. The reference starts a separate `evals` process that polls the
`broadcasts/step_N` directories the trainer writes, and evaluates them on a vLLM server while
the trainer goes on. This build evaluates in the trainer's rank-0 process, between two steps,
through the orchestrator's own eval code (orchestrator/sources.py builds the sources: built-in
tasksets, your data and reward, verifiers environments; orchestrator/evals.py plays and scores
them), because:

* on a CPU machine there are no spare cores for a second process: evals beside training would
  slow both, while evals between steps take the cores each in turn;
* the scores at step N are those of exactly the weights after step N, with nothing to copy
  when the model is whole in this process (one CPU process evaluates the training model
  itself, in eval mode, through LocalSampler);
* resume needs no second process to agree with: the step a run resumes from says which evals
  were done (their scores are in metrics.jsonl, kept up to that step), so none is repeated or
  skipped.

The price is that training waits while the evals run (the reference overlaps them on a GPU).
A model the process holds only in shards (several processes, or FSDP on a GPU) is gathered into
`broadcasts/step_N/` (Hugging Face files, the RL trainer's FileSystemBroadcast; a collective)
and rank 0 samples from a copy loaded from there (in place after the first). With
`[inference]` (a GPU, or vLLM's CPU build installed), `sft` starts vLLM before training
(eval_server.py) and rank 0 asks it to load each eval step's broadcast, then evaluates
through it.

Schedule, as the reference's: every source at the start unless `skip_first_step` or the run
resumed (then only with `retrigger_on_resume`, at the resume step); a source at each step that
is a multiple of its `interval`; every source after the last step (max_steps, or when the run
ends on `val.stop_at_loss` or at the end of its data), never after an operator's stop.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ..chat.prompts import prompt_renderer
from ..core.world import World, any_rank
from ..errors import RunError, SetupError, SetupErrors
from ..orchestrator.environments.players import Players
from ..orchestrator.evals import run_evals
from ..orchestrator.sources import EvalSource, build_eval_sources
from ..wire.broadcast import FileSystemBroadcast, broadcast_dir

log = logging.getLogger("trainspec.sft")
# Set by the sft launcher when it started [inference]'s server (eval_server.py): its base URL.
SERVER_ENV = "TRAINSPEC_EVAL_SERVER"
EVALS_DIR = "evals"  # <run dir>/evals: the environment servers' settings and logs


def served_url() -> str | None:
    """The base URL of the server the sft launcher started for the evals, if it did."""
    return os.environ.get(SERVER_ENV) or None


class EvalPolicy:
    """What the evals sample from: `ready(step)` (a collective) makes `sampler` hold the weights
    after `step` on rank 0."""

    sampler: Any = None
    where: str = ""

    def ready(self, step: int) -> None:
        pass

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None


class InPlace(EvalPolicy):
    """The training model itself (one CPU process holds it whole): no copy, nothing to load."""

    def __init__(self, lm, tokenizer, stop_id: int, device, max_batch: int | None) -> None:
        from ..orchestrator.sampling.local_sampler import LocalSampler

        self.sampler = LocalSampler(lm, tokenizer, stop_id, device, max_batch=max_batch)
        self.where = "in this process, on the training model's own weights"


class FromBroadcast(EvalPolicy):
    """A copy on rank 0 of the weights gathered into broadcasts/step_N at each eval."""

    def __init__(self, broadcast: FileSystemBroadcast, world: World, tokenizer, stop_id: int,
                 max_batch: int | None) -> None:  # fmt: skip
        self.broadcast, self.world = broadcast, world
        self.tokenizer, self.stop_id, self.max_batch = tokenizer, stop_id, max_batch
        self.where = "in this process, on a copy of the weights written to broadcasts/step_N"

    def ready(self, step: int) -> None:
        self.broadcast.publish(step)
        if not self.world.is_main:
            return
        weights = broadcast_dir(self.broadcast.run_dir, step)
        if self.sampler is None:
            from transformers import AutoModelForCausalLM

            from ..orchestrator.sampling.local_sampler import LocalSampler

            model = AutoModelForCausalLM.from_pretrained(str(weights), dtype="auto")
            model.to(self.world.device).eval()  # type: ignore[arg-type]  # as policy.py does
            self.sampler = LocalSampler(
                model, self.tokenizer, self.stop_id, self.world.device, max_batch=self.max_batch
            )
        else:
            self.sampler.load_weights(weights)

    def close(self) -> None:
        self.sampler = None  # the copy is this object's own; nothing to release


class Served(EvalPolicy):
    """[inference]'s vLLM server, started by the sft launcher: each eval step's broadcast is
    loaded into it (/collective_rpc), then the evals sample there."""

    def __init__(self, broadcast: FileSystemBroadcast, world: World, sampler) -> None:
        self.broadcast, self.world, self.sampler = broadcast, world, sampler
        self.where = f"on the inference server at {sampler.base_url}"

    def ready(self, step: int) -> None:
        self.broadcast.publish(step)
        if self.world.is_main:
            self.sampler.load_weights(broadcast_dir(self.broadcast.run_dir, step))


def _server_sampler(config, tokenizer, stop_id: int):
    """The OpenAI-compatible client of the evals' server, from [eval.client]."""
    from ..orchestrator.sampling.openai_client import OpenAISampler
    from ..orchestrator.sampling.vllm_reload import RPC_PATH

    client = config.eval.client
    headers = dict(client.headers)
    for header, variable in client.headers_from_env.items():
        if os.environ.get(variable):
            headers[header] = os.environ[variable]
    key = os.environ.get(client.api_key_var)
    return OpenAISampler(
        client.base_url,
        config.model.name,  # the server serves model.name (eval_server.py)
        tokenizer,
        stop_id,
        api_key=key if key and key != "EMPTY" else None,
        reload_path=RPC_PATH,
        max_batch=config.eval.concurrency.max_inflight,
        headers=headers,
        field="eval.client.base_url",
    )


def _on_main(world: World, work, *args, **kwargs):
    """`work(...)` on rank 0, the others waiting; a failure there stops every rank."""
    result, failure = None, None
    if world.is_main:
        try:
            result = work(*args, **kwargs)
        except (SetupError, SetupErrors, RunError) as err:
            failure = err
    if any_rank(failure is not None, world):
        raise failure or RunError("eval", "rank 0's online evals failed", "see rank 0's output")
    return result


class OnlineEvals:
    def __init__(self, config, sources: list[EvalSource], policy: EvalPolicy, world: World,
                 players: Players | None, start_step: int) -> None:  # fmt: skip
        self.eval_cfg = config.eval
        self.max_steps = config.max_steps
        self.seq_len = config.model.seq_len
        self.sources, self.policy, self.world, self.players = sources, policy, world, players
        self.start_step = start_step
        group = config.eval  # every rank knows the intervals; rank 0 alone builds the sources
        self.intervals = [s.interval if s.interval is not None else group.interval
                          for s in group.source]  # fmt: skip
        self.done_at: int | None = None  # the step of the last evaluation of every source
        self.rewards: list[tuple[int, float]] = []  # (step, eval_reward) of each evaluation

    @classmethod
    def build(cls, config, parts, run_dir: Path, world: World) -> OnlineEvals | None:
        """The evals of `[eval]` (None without it): the sources built on rank 0 (a refusal there
        stops every rank) and what they sample from."""
        if config.eval is None:
            return None
        tokenizer = parts.tokenizer
        render, stop_id = prompt_renderer(config.renderer, tokenizer)
        max_batch = config.eval.concurrency.max_inflight
        players = Players(
            tokenizer,
            config.renderer,
            run_dir=run_dir / EVALS_DIR,
            base_port=config.eval.env_server_base_port,
            max_inflight=max_batch,
        )

        def sources() -> list[EvalSource]:
            try:
                return build_eval_sources(
                    config.eval, tokenizer, render, players=players, seed=config.data.seed
                )
            except BaseException:  # refused: stop the environment servers already started
                players.close()
                raise

        built = _on_main(world, sources) or []

        def broadcast() -> FileSystemBroadcast:  # the newest only, as the reference keeps
            return FileSystemBroadcast(run_dir, parts.model, parts.export, world, keep=1)

        policy: EvalPolicy
        if served_url() is not None and config.inference is not None:
            policy = Served(broadcast(), world, _server_sampler(config, tokenizer, stop_id))
        elif world.world_size == 1 and world.device.type == "cpu":
            policy = InPlace(parts.model.lm, tokenizer, stop_id, world.device, max_batch)
        else:
            policy = FromBroadcast(broadcast(), world, tokenizer, stop_id, max_batch)
        evals = cls(config, built, policy, world, players, parts.start_step)
        if world.is_main:
            evals.say_where(config)
        return evals

    def say_where(self, config) -> None:
        names = ", ".join(s.name for s in self.sources)
        log.info("online evals of %d source(s) (%s) run %s", len(self.sources), names,
                 self.policy.where)  # fmt: skip
        if config.inference is not None and not isinstance(self.policy, Served):
            gpus = getattr(config.deployment, "num_infer_gpus", 0)
            log.info(
                "[inference] asks for a vLLM server on %s GPU(s); none was started (this "
                "machine has no GPU and vLLM is not installed, or model.name is the built-in "
                "model, which has no weight files), so the evals run in the trainer's process",
                gpus,
            )

    # -- the schedule --------------------------------------------------------------------------

    def at_start(self, step: int) -> dict[str, float]:
        """Every source before the first step: at step 0 unless skip_first_step; at a resumed
        run's step only with retrigger_on_resume; never in a run already complete."""
        if self.max_steps is not None and step >= self.max_steps:
            return {}
        cfg = self.eval_cfg
        wanted = not cfg.skip_first_step if step == 0 else cfg.retrigger_on_resume
        return self._run(step, every=True) if wanted else {}

    def after_step(self, step: int, *, final: bool) -> dict[str, float]:
        """The sources due at `step`; every source after the final step."""
        if final:
            return self._run(step, every=True, final=True)
        if not any(step % interval == 0 for interval in self.intervals):
            return {}
        return self._run(step)

    def at_end(self, step: int, *, stopped: bool) -> dict[str, float]:
        """Every source with the last weights of a run that ended before max_steps (stop_at_loss,
        the end of its data), unless an operator stopped it or they were just evaluated."""
        if stopped or step == self.start_step or self.done_at == step:
            return {}
        return self._run(step, every=True, final=True)

    def _run(self, step: int, *, every: bool = False, final: bool = False) -> dict[str, float]:
        def evaluate() -> dict[str, float]:
            return run_evals(self.policy.sampler, self.sources, step, self.seq_len,
                             weights_step=step, every=every, final=final, log=log)  # fmt: skip

        self.policy.ready(step)
        metrics = _on_main(self.world, evaluate) or {}
        if every:
            self.done_at = step
        if "eval_reward" in metrics:
            self.rewards.append((step, metrics["eval_reward"]))
        return metrics

    def summary(self) -> str | None:
        """For the closing line: the mean eval reward at the first and last evaluation."""
        if not self.rewards:
            return None
        (first, start), (last, end) = self.rewards[0], self.rewards[-1]
        return f"eval reward {start:.3f} (step {first}) -> {end:.3f} (step {last})"

    def close(self) -> None:
        """Release the sampler and stop the environments' processes (once)."""
        self.policy.close()
        if self.players is not None:
            self.players.close()
            self.players = None
