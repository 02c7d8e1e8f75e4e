"""The `evaluate` command (also installed as `eval`, the reference's name, for `uv run eval`:
in a shell `eval` is the shell's builtin): a model evaluated once on eval sources (built-in
tasksets, your data and reward, verifiers environments) through an inference server, as the
reference's standalone evals; the scores go to the console and <output_dir>/eval/scores.jsonl.

    evaluate configs/eval/tiny.toml
    evaluate evals.toml --eval.client.base-url http://127.0.0.1:8000/v1   # a server you started
    evaluate evals.toml --model outputs/sft-demo/weights --eval.num-examples 100

The server is the one eval.client.base_url names, else one eval starts (server.py: vLLM with
[inference], else the in-process model server) and stops after the evals. The sources are
built and scored by the orchestrator's eval code (orchestrator/sources.py, evals.py): each
source's first num_examples prompts, greedy unless a temperature is set (then group_size
samples each), scored by its reward, exact match where the task has a reference answer.
scores.jsonl holds one line per source (`reward`, `exact_match`, `num_examples`) and a last
line of the means (source "all": `eval_reward`, `eval_exact_match`), each with the model.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from trainspec.cli.entrypoint import run_entrypoint

from ..errors import SetupError, raise_all
from ..process.guard import Interrupted, run_guarded
from ..run.atomic_files import write_atomic

log = logging.getLogger("trainspec.eval")
SCORES = Path("eval") / "scores.jsonl"


def say(message: str) -> None:
    sys.stderr.write(f"evaluate: {message}\n")
    sys.stderr.flush()


def score_lines(model: str, sources, metrics: dict[str, float]) -> list[dict]:
    """scores.jsonl's records: one per evaluated source, then the means."""
    lines = []
    for source in sources:
        prefix = f"eval/{source.name}/"
        record = {"model": model, "source": source.name,
                  "num_examples": source.task.count(source.num_examples)}  # fmt: skip
        record |= {k.removeprefix(prefix): v for k, v in metrics.items() if k.startswith(prefix)}
        lines.append(record)
    means = {k: v for k, v in metrics.items() if "/" not in k}
    lines.append({"model": model, "source": "all", **means})
    return lines


def load_tokenizer(auto, source: str):
    """The model's tokenizer (it renders the prompts); SetupError naming `model` when there is
    none to load."""
    try:
        return auto.from_pretrained(source)
    except (OSError, ValueError) as exc:  # not there, not a model, or an invalid hub id
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SetupError(
            "model",
            f"{source!r}: its tokenizer cannot be loaded ({reason})",
            "name a weights directory with its tokenizer (Hugging Face layout), a hub id this "
            "machine can download or has cached, or builtin:tiny-qwen3",
        ) from None


def log_level(name: str, field: str) -> int:
    level = logging.getLevelName(name.upper())
    if not isinstance(level, int):
        raise SetupError(
            field, f"= {name!r} is not a log level", "use debug, info, warning or error"
        )
    return level


def evaluate(config) -> int:
    from transformers import AutoTokenizer

    from ..chat.prompts import prompt_renderer
    from ..core.model_source import model_source
    from ..orchestrator.environments.players import Players
    from ..orchestrator.evals import run_evals
    from ..orchestrator.sources import build_eval_sources
    from .refusals import eval_refusals
    from .server import EvalServer

    level, vf_level = (
        log_level(config.log.level, "log.level"),
        log_level(config.log.vf_level, "log.vf_level"),
    )
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    logging.getLogger("verifiers").setLevel(vf_level)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    # run_evals' own lines speak of training steps: said here as scores instead
    log.setLevel(logging.DEBUG if config.log.level.lower() == "debug" else logging.WARNING)
    raise_all(eval_refusals(config))
    run_dir = Path(config.output_dir)
    tokenizer = load_tokenizer(AutoTokenizer, model_source(config.model, "model"))
    render, stop_id = prompt_renderer(config.renderer, tokenizer)
    table = config.eval
    players = Players(
        tokenizer,
        config.renderer,
        run_dir=run_dir / "eval" / "envs",
        base_port=table.env_server_base_port,
        max_inflight=table.concurrency.max_inflight,
    )
    server = sampler = None
    try:
        sources = build_eval_sources(table, tokenizer, render, players=players, seed=0)
        server = EvalServer.start(config, run_dir / "eval", say)
        sampler = server.client(config, tokenizer, stop_id)
        names = ", ".join(source.name for source in sources)
        say(f"evaluating {config.model!r} on {len(sources)} source(s) ({names}) through "
            f"{server.where}")  # fmt: skip
        metrics = run_evals(sampler, sources, 0, config.seq_len, weights_step=0, every=True,
                            log=log)  # fmt: skip
    finally:
        if sampler is not None:
            sampler.close()
        if server is not None:
            server.close()
        players.close()
    lines = score_lines(config.model, sources, metrics)
    path = run_dir / SCORES
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(json.dumps(line) + "\n" for line in lines))
    for line in lines:
        scores = ", ".join(
            f"{key} {value:.4f}" for key, value in line.items() if isinstance(value, float)
        )
        print(f"evaluate: {line['source']}: {scores}", flush=True)
    print(f"evaluate: scores in {path}", flush=True)
    return 0


def evaluate_until_stopped(config) -> int:
    """`evaluate`, or, on SIGTERM or Ctrl-C, what it started stopped and no scores written."""
    try:
        return evaluate(config)
    except (Interrupted, KeyboardInterrupt) as err:
        signum = err.signum if isinstance(err, Interrupted) else signal.SIGINT
        say(f"stopped by {signal.Signals(signum).name}: what it started is stopped, no scores "
            "written")  # fmt: skip
        return 128 + signum


def launch(config) -> int:
    return run_guarded("evaluate", evaluate_until_stopped, config)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    return run_entrypoint("eval", "evaluate", args, sys.stdout, sys.stderr, launch)


if __name__ == "__main__":
    sys.exit(main())
