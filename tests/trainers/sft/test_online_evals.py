"""SFT online evals ([eval], trainers/sft/online_evals.py) on a tiny model, in process: the scores
come at the start, at each source's interval and at the end, and are the scores of the weights
the run saved at that step (evaluated again here with the orchestrator's eval code); a resumed
run neither repeats nor skips an evaluation; a stop while the vLLM server of [inference] comes up
stops it too (a stand-in server that never comes up, the GPU check answered yes; evaluating on a
real vLLM server is the real-engine tests'); the reference's reverse-text SFT config runs here
with the built-in model, data and taskset."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path

import pytest
import torch
from helpers.ports import free_port
from helpers.processes import ended, signal_while_the_server_starts, use_stand_in
from helpers.sft_support import losses, metrics, run_dir

from trainspec.config import load
from trainspec.trainers.builtin import builtin_model_dir
from trainspec.trainers.chat.prompts import prompt_renderer
from trainspec.trainers.errors import SetupError, SetupErrors
from trainspec.trainers.orchestrator.evals import evaluate
from trainspec.trainers.orchestrator.sampling.local_sampler import LocalSampler
from trainspec.trainers.orchestrator.sources import build_eval_sources
from trainspec.trainers.run.plot import TRAINING_PANELS, _panels
from trainspec.trainers.sft.train import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "tests" / "config" / "reference" / "sft"
RT = {"taskset": {"id": "builtin:reverse-text"}}
# The built-in task, learnt a little: a one-layer model, eight rows a step, a high rate.
REVERSE = {
    "model.name": "builtin:tiny-qwen3",
    "data.name": "<the rows>",  # rows.jsonl: the built-in task's first 64 train rows
    "model.seq_len": 128,
    "model.compile": None,
    "model.ac": None,
    "model.ac_offloading": None,
    "model.debug.num_layers": 1,
    "data.seq_len": 128,
    "data.batch_size": 8,
    "data.micro_batch_size": 8,
    "optim.lr": 3e-3,
    "deployment.num_infer_gpus": 0,
}
# Two sources: greedy answers every 8 steps, two samples per prompt every 4 (the group's).
EVAL = {
    "interval": 4,
    "num_examples": 4,
    "sampling": {"max_completion_tokens": 48},
    "source": [
        {"name": "greedy", "env": RT, "interval": 8},
        {"name": "sampled", "env": RT, "group_size": 2, "sampling": {"temperature": 1.0}},
    ],
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> str:
    """The built-in task's first 64 train rows as a JSONL file (rendered in no time; the whole
    split takes seconds per run)."""
    from trainspec.trainers.chat.tasks import reverse_text

    path = tmp_path_factory.mktemp("rows") / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in reverse_text.examples("train")[:64]))
    return str(path)


@pytest.fixture(autouse=True)
def _rows(rows, monkeypatch):
    monkeypatch.setitem(REVERSE, "data.name", rows)


def config_of(tmp_path: Path, **settings):
    base = {**REVERSE, "output_dir": str(tmp_path / "outputs"), "run.name": "evals"}
    return load("sft", [], {**base, **settings}).config


def evaluated(config) -> dict[int, list[dict]]:
    """The eval records of the run's metrics.jsonl by step."""
    out: dict[int, list[dict]] = {}
    for record in metrics(config):
        if "eval_reward" in record:
            out.setdefault(record["step"], []).append(record)
    return out


def scores(record: dict) -> dict[str, float]:
    return {k: v for k, v in record.items() if k.startswith("eval/")}


def evaluate_checkpoint(config, step: int) -> dict[str, float]:
    """The checkpoint of `step` evaluated on its own: its Hugging Face weights loaded fresh, the
    eval sources built and played by the orchestrator's code."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    weights = run_dir(config) / "checkpoints" / f"step_{step}" / "weights"
    tokenizer = AutoTokenizer.from_pretrained(weights)
    model = AutoModelForCausalLM.from_pretrained(weights, dtype="auto").eval()
    render, stop = prompt_renderer(config.renderer, tokenizer)
    sources = build_eval_sources(config.eval, tokenizer, render, players=None, seed=0)
    sampler = LocalSampler(model, tokenizer, stop, torch.device("cpu"),
                           max_batch=config.eval.concurrency.max_inflight)  # fmt: skip
    out = {}
    for source in sources:
        result = evaluate(sampler, source, config.model.seq_len, seed=step)
        out |= {f"eval/{source.name}/{key}": value for key, value in result.items()}
    return out


def test_evals_come_at_their_steps_score_the_saved_weights_and_resume_neither_repeats_nor_skips(
    tmp_path, capsys
):
    first = config_of(tmp_path, max_steps=8, eval=EVAL, ckpt={"interval": 4})
    assert train(first) == 0
    assert sorted(evaluated(first)) == [0, 4, 8]
    # The same run again from its step-4 checkpoint, on to step 12: steps 5.. are trained again
    # and evaluated again (their first records are dropped); step 4 is not evaluated twice.
    again = config_of(tmp_path, max_steps=12, eval=EVAL, ckpt={"interval": 4}, resume={"step": 4})
    assert train(again) == 0
    closing = capsys.readouterr().out
    by_step = evaluated(again)
    assert {step: [sorted(scores(r)) for r in records] for step, records in by_step.items()} == {
        0: [["eval/greedy/exact_match", "eval/greedy/reward",
             "eval/sampled/exact_match", "eval/sampled/reward"]],
        4: [["eval/sampled/exact_match", "eval/sampled/reward"]],
        8: [["eval/greedy/exact_match", "eval/greedy/reward",
             "eval/sampled/exact_match", "eval/sampled/reward"]],
        12: [["eval/greedy/exact_match", "eval/greedy/reward",
              "eval/sampled/exact_match", "eval/sampled/reward"]],
    }  # fmt: skip
    for step in (8, 12):  # the saved weights of that step score the same, evaluated alone
        (record,) = by_step[step]
        assert scores(record) == evaluate_checkpoint(again, step)
    assert by_step[8][0]["eval/sampled/reward"] > 0  # the comparison compares something
    assert by_step[8][0]["eval_reward"] == pytest.approx(
        (by_step[8][0]["eval/greedy/reward"] + by_step[8][0]["eval/sampled/reward"]) / 2
    )
    assert "eval reward" in closing and "(step 8) ->" in closing and "(step 12)" in closing
    drawn = [panel.label for panel, _ in _panels(metrics(again), TRAINING_PANELS)]
    assert "online evals" in drawn and (run_dir(again) / "loss.png").is_file()
    assert list((run_dir(again) / "broadcasts").glob("*")) == []  # one CPU process: no copy

    # The evals leave training as it was: the same steps without [eval] have the same losses.
    plain = config_of(tmp_path / "plain", max_steps=8)
    assert train(plain) == 0
    assert losses(plain) == {step: loss for step, loss in losses(again).items() if step <= 8}


def test_skip_first_step_leaves_out_the_start(tmp_path):
    settings = {"skip_first_step": True, "interval": 2, "num_examples": 1,
                "sampling": {"max_completion_tokens": 2}, "source": [{"env": RT}]}  # fmt: skip
    config = config_of(tmp_path, max_steps=3, eval=settings)
    assert train(config) == 0
    assert sorted(evaluated(config)) == [2, 3]  # no step 0; 2 (the interval), 3 (the end)


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    """vLLM's command replaced by the stand-in server (helpers.processes); a GPU machine as far
    as sft's launcher asks (one GPU, which the trainer shares); yields the stand-in's record
    file."""
    from trainspec.trainers.sft import eval_server

    record = tmp_path / "stand-in.json"
    use_stand_in(monkeypatch, record)
    monkeypatch.setattr(eval_server, "has_gpu", lambda: True)
    monkeypatch.setattr(eval_server, "visible_gpus", lambda: 1)
    for launcher_says in ("TRAINSPEC_EVAL_SERVER", "TRAINSPEC_LOCKED_RUN_DIR"):
        monkeypatch.setenv(launcher_says, "")  # set by the launcher: gone after the test
    return record


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "ctrl-c"])
def test_a_stop_while_the_server_starts_stops_the_server_too(tmp_path, stand_in, sent):
    """SIGTERM or Ctrl-C to `sft` while it waits for the evals' vLLM server: sft ends saying so,
    and the server (its own session) is not left running."""
    from trainspec.config import dump_json

    settings = {
        "max_steps": 2,
        # a model directory: the built-in name's weights are the trainer's, served by nothing
        "model.name": str(builtin_model_dir("builtin:tiny-qwen3")),
        "deployment.num_infer_gpus": 1,
        "inference": {"server": {"port": free_port()}},
        "eval": {"interval": 2, "num_examples": 2, "source": [{"name": "rt", "env": RT}]},
    }
    resolved = tmp_path / "sft.json"
    resolved.write_text(dump_json(config_of(tmp_path, **settings)))
    run = (  # a GPU machine as far as the launcher asks, as the stand_in fixture says here;
        # the helper replaces vLLM's command there too (processes.PATCH_STAND_IN, before this)
        "import json, sys; from trainspec.config import validate; "
        "from trainspec.trainers.sft import eval_server, main; "
        "eval_server.has_gpu = lambda: True; eval_server.visible_gpus = lambda: 1; "
        "sys.exit(main.launch(validate('sft', json.load(open(sys.argv[1]))).config))"
    )
    code, err, server = signal_while_the_server_starts(run, resolved, stand_in, sent)
    assert code == 1 and b"stop signal came while the vLLM server was starting" in err, err
    assert ended(server), "the vLLM server was left running"


def reference_here(tmp_path: Path, name: str):
    """The reference's reverse-text SFT config with what this machine has put in: the built-in
    model (one layer), task rows and taskset, two steps, two prompts, short answers."""
    source = tomllib_source(REFERENCE / name)
    source["env"]["taskset"]["id"] = "builtin:reverse-text"  # its harness and runtime stay
    settings = {
        **REVERSE,
        "max_steps": 2,
        "eval.num_examples": 2,
        "eval.sampling.max_completion_tokens": 8,
        "eval.source": [source],
        "deployment.num_infer_gpus": 1,
        "output_dir": str(tmp_path / "outputs"),
    }
    return load("sft", [REFERENCE / name], settings).config


def tomllib_source(path: Path) -> dict:
    import tomllib

    (source,) = tomllib.loads(path.read_text())["eval"]["source"]
    return source


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine starts vLLM for it")
def test_the_reference_reverse_text_config_runs_here_evaluating_in_process(tmp_path, caplog):
    config = reference_here(tmp_path, "examples-reverse-text.toml")
    assert config.eval.interval == 25 and config.ckpt is not None  # the file's own settings
    with caplog.at_level(logging.INFO, logger="trainspec"):
        assert train(config) == 0
    said = caplog.text
    assert "[inference] asks for a vLLM server on 1 GPU(s); none was started" in said
    assert "run in this process, on the training model's own weights" in said
    assert sorted(evaluated(config)) == [0, 2]  # the start and the end (interval 25)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine starts vLLM for it")
def test_the_ci_sibling_is_refused_here_naming_the_server_settings(tmp_path):
    config = reference_here(tmp_path, "ci-reverse-text-sft-evals.toml")
    with pytest.raises((SetupError, SetupErrors)) as caught:
        train(config)
    errors = caught.value.errors if isinstance(caught.value, SetupErrors) else [caught.value]
    (refusal,) = [e for e in errors if e.path == "inference"]
    assert "inference.vllm.gpu_memory_utilization, inference.vllm.max_model_len" in refusal.problem
    assert "this machine has no GPU" in refusal.problem
    assert not (Path(config.output_dir) / config.run.dir / "metrics.jsonl").exists()


def test_an_eval_of_no_prompt_is_refused_at_start(tmp_path):
    settings = {"num_examples": 0, "source": [{"env": RT}]}
    with pytest.raises(SetupError) as caught:
        train(config_of(tmp_path, max_steps=1, eval=settings))
    assert caught.value.path == "eval.num_examples"
    assert "= 0 leaves no prompt to evaluate" in caught.value.problem
