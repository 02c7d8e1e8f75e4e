"""`eval FILE` evaluates a model on eval sources through a server and writes the scores: the
built-in tiny model on the built-in reverse-text task, through the in-process model server it
starts, and through a running `inference` server named by eval.client.base_url (the same
greedy answers, so the same scores); what it cannot honour is refused at start, naming it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.ports import free_port

from trainspec.trainers.eval.main import main

BIN = Path(sys.executable).parent
TASK = """model = "builtin:tiny-qwen3"
seq_len = 128

[eval]
num_examples = 3

[eval.sampling]
max_completion_tokens = 6

[[eval.source]]
name = "reverse-text"
env.taskset.id = "builtin:reverse-text"
"""


def config(tmp_path: Path, extra: str = "", name: str = "evals.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'output_dir = "{tmp_path / "out"}"\n' + TASK + extra)
    return path


def scores(tmp_path: Path) -> list[dict]:
    lines = (tmp_path / "out" / "eval" / "scores.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_it_evaluates_a_builtin_task_through_the_in_process_server(tmp_path, capsys):
    assert main([str(config(tmp_path))]) == 0
    out, err = capsys.readouterr()
    [source, means] = scores(tmp_path)
    assert source["model"] == "builtin:tiny-qwen3" and source["source"] == "reverse-text"
    assert source["num_examples"] == 3 and 0.0 <= source["reward"] <= 1.0
    assert "exact_match" in source  # the built-in task has reference answers
    assert means["source"] == "all" and means["eval_reward"] == source["reward"]
    assert f"evaluate: scores in {tmp_path / 'out' / 'eval' / 'scores.jsonl'}" in out
    assert "evaluate: reverse-text: reward" in out
    assert "through the in-process model server (http://127.0.0.1:" in err


def test_through_a_running_inference_server_the_scores_are_the_same(tmp_path, capsys):
    assert main([str(config(tmp_path))]) == 0
    in_process = scores(tmp_path)
    port = free_port()
    infer = tmp_path / "infer.toml"
    infer.write_text(
        f'output_dir = "{tmp_path / "infer"}"\n[server]\nport = {port}\n'
        '[vllm]\nmodel = "builtin:tiny-qwen3"\n'
    )
    server = subprocess.Popen(
        [str(BIN / "inference"), str(infer)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        url = f"http://127.0.0.1:{port}/v1"
        capsys.readouterr()
        code = main([str(config(tmp_path)), "--eval.client.base-url", url,
                     "--eval.client.wait-for-ready-timeout", "180"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 0, err
        assert f"through the server at {url}" in err
        assert scores(tmp_path) == in_process  # the same seeded weights, greedy
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.communicate(timeout=60)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    assert server.returncode == 0


def test_a_server_serving_another_model_is_refused_naming_model(tmp_path, capsys):
    from trainspec.trainers.orchestrator.sampling.local_model import local_model
    from trainspec.trainers.orchestrator.sampling.model_server import ModelServer

    server = ModelServer(local_model("builtin:tiny-qwen3", "model"), "other").start()
    try:
        code = main([str(config(tmp_path)), "--eval.client.base-url", server.base_url])
    finally:
        server.close()
    err = capsys.readouterr().err
    assert code == 1
    assert ":2:9: model: error: = 'builtin:tiny-qwen3' is not a model" in err  # file:line:col
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        (
            "[eval.concurrency]\nmin_inflight = 2\nmax_inflight = 4\n",
            "eval.concurrency.min_inflight",
        ),
        ("[log]\njson_logging = true\n", "log.json_logging"),
    ],
)
def test_what_one_evaluation_cannot_honour_is_refused(tmp_path, capsys, extra, path):
    assert main([str(config(tmp_path, extra))]) == 1
    err = capsys.readouterr().err
    assert f": {path}: error: is set" in err  # after file:line:col and "Traceback" not in err


def test_the_schedule_of_online_evals_is_refused(tmp_path, capsys):
    assert main([str(config(tmp_path)), "--eval.interval", "5"]) == 1
    err = capsys.readouterr().err
    assert "eval.interval: error: is set: it schedules an SFT run's online evals" in err


def test_a_setting_written_at_its_default_is_not_refused(tmp_path, capsys):
    """Refusals judge a setting by what it holds (set_by_user), not by whether it was written:
    a resolved config written out whole reads like the file it came from."""
    defaults = "[eval.concurrency]\nmin_inflight = 1\n"
    flags = ["--eval.skip_first_step", "false", "--eval.env_server_base_port", "5000"]
    assert main([str(config(tmp_path, defaults)), *flags]) == 0, capsys.readouterr().err
    assert [record["source"] for record in scores(tmp_path)] == ["reverse-text", "all"]


def test_a_typo_is_reported_at_its_line_and_column(tmp_path, capsys):
    path = tmp_path / "typo.toml"
    path.write_text(TASK.replace("num_examples = 3", "num_exampels = 3"))
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:5:1: error: eval.num_exampels is not a known key of [eval]" in err


def test_inference_beside_a_base_url_is_one_server_too_many(tmp_path, capsys):
    extra = '[inference]\n[eval.client]\nbase_url = "http://127.0.0.1:1/v1"\n'
    path = tmp_path / "two.toml"
    path.write_text(TASK + extra)
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:15:12: error: eval.client.base_url is set beside [inference]" in err


def test_sigterm_while_its_vllm_server_starts_stops_it_and_reaps_it(tmp_path):
    """With [inference] and a model with files, eval starts vLLM (a stand-in that never comes
    up): SIGTERM stops the server and eval, with no traceback and no scores."""
    import shutil

    from helpers.processes import ended, signal_while_the_server_starts

    from trainspec.trainers.builtin import builtin_model_dir

    model = shutil.copytree(builtin_model_dir("builtin:tiny-qwen3"), tmp_path / "model")
    path = tmp_path / "evals.toml"
    path.write_text(
        TASK.replace('"builtin:tiny-qwen3"', f'"{model}"', 1)
        + f"\n[inference.server]\nport = {free_port()}\n"
    )
    path.write_text(f'output_dir = "{tmp_path / "out"}"\n' + path.read_text())
    code = "import sys; from trainspec.trainers.eval.main import main; sys.exit(main(sys.argv[1:]))"
    returncode, err, server = signal_while_the_server_starts(code, path, tmp_path / "rec.json")
    assert returncode == 128 + signal.SIGTERM, err
    assert b"evaluate: stopped by SIGTERM" in err and b"Traceback" not in err
    assert ended(server, 30)
    assert not (tmp_path / "out" / "eval" / "scores.jsonl").exists()


def test_it_is_installed_as_evaluate_and_as_the_references_eval():
    """`evaluate` is the name to type (in a shell `eval` is the shell's builtin); `eval`, the
    reference's name, is there for `uv run eval` and runs the same command."""
    import subprocess
    import sys
    from pathlib import Path

    bin_dir = Path(sys.executable).parent
    for name in ("evaluate", "eval"):
        result = subprocess.run(
            [str(bin_dir / name), "--version"], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0 and result.stdout.startswith("evaluate (trainspec "), name
