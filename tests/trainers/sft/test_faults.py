"""`sft` on an operator's worst day: a run directory reused by another run, two runs at once,
relaunches after stops and kills, a full and a read-only disk, a signal during start-up, data
with nothing to train on. Nothing of a run is lost, every answer says what to do.

What is stopped, killed or signalled is a real process (`start`); the relaunches and refusals
that follow run the command's entry point in this process (`run`): what they check is the run
directory and the answer, not the process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers.sft_support import SFT, TINY, flags, sft_in_process

WAIT = 300  # seconds; generous for a busy 2-core machine


def start(output_dir: Path, *extra: str, **settings) -> subprocess.Popen:
    merged = {**TINY, "output_dir": str(output_dir), **settings}
    return subprocess.Popen(
        [SFT, *flags(merged), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def run(output_dir: Path | str, *extra: str, **settings) -> subprocess.CompletedProcess:
    """`sft` to its end, in this process."""
    return sft_in_process(*flags({**TINY, "output_dir": str(output_dir), **settings}), *extra)


def steps(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line)["step"] for line in lines if line.strip() and "loss" in line]


def checkpoints(run_dir: Path) -> list[int]:
    return sorted(int(p.name.split("_")[1]) for p in (run_dir / "checkpoints").glob("step_*"))


def wait_until(predicate, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if process.poll() is not None:
            raise AssertionError(f"sft ended ({process.returncode}) before {what}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_relaunching_a_finished_run(tmp_path):
    """The same command says it is complete; --no-resume and another model are refused, and
    nothing of the run changes."""
    first = run(tmp_path, **{"model.debug.num_layers": 2, "ckpt.interval": 2})
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / "tiny"
    saved = (run_dir / "checkpoints" / "step_4" / "meta.json").stat().st_mtime_ns

    again = run(tmp_path, **{"model.debug.num_layers": 2, "ckpt.interval": 2})
    assert again.returncode == 0, again.stderr
    assert "already complete: nothing to train past max_steps = 4" in again.stdout

    fresh = run(tmp_path, "--no-resume", **{"model.debug.num_layers": 2, "ckpt.interval": 2})
    assert fresh.returncode == 1
    assert "resume: error: is off" in fresh.stderr and "steps 2, 4" in fresh.stderr
    assert "clean = true" in fresh.stderr

    other = run(tmp_path, **{"model.debug.num_layers": 1, "ckpt.interval": 2})
    assert other.returncode == 1
    assert f"run.name: error: {run_dir} belongs to another run" in other.stderr
    assert "model.debug.num_layers = 1 here, 2 there" in other.stderr

    for result in (again, fresh, other):
        assert "Traceback" not in result.stderr
    assert checkpoints(run_dir) == [2, 4] and steps(run_dir) == [1, 2, 3, 4]
    assert (run_dir / "checkpoints" / "step_4" / "meta.json").stat().st_mtime_ns == saved
    assert json.loads((run_dir / "config.json").read_text())["model"]["debug"]["num_layers"] == 2


def test_a_second_run_on_a_directory_in_use_fails_at_once(tmp_path):
    """...and the first, stopped by SIGTERM (a scheduler's stop), finishes its step, saves it
    and exits 0."""
    first = start(tmp_path, "--max-steps", "100000", "--ckpt.interval", "5")
    run_dir = tmp_path / "tiny"
    try:
        wait_until(lambda: len(steps(run_dir)) >= 2, first, "two steps")
        second = run(tmp_path, "--max-steps", "100000")
        assert second.returncode == 1
        assert f"{run_dir.resolve()} is in use by pid {first.pid}" in second.stderr
        assert "Traceback" not in second.stderr
        wait_until(lambda: checkpoints(run_dir), first, "the first run's checkpoint")
    finally:
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=WAIT)
    assert first.returncode == 0, err
    trained = steps(run_dir)
    assert trained == list(range(1, len(trained) + 1))  # one record per step, none lost
    assert checkpoints(run_dir)[-1] == trained[-1]
    assert f"stop requested: stopping after step {trained[-1]}" in err
    assert f"checkpoints/step_{trained[-1]}" in out  # the closing line names the checkpoint
    assert "Traceback" not in err


def test_a_relaunch_resumes_whatever_the_spelling_of_output_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = {"ckpt.interval": 2, "run.name": None}  # the default, hashed run name
    first = run("outputs", **settings, **{"max_steps": 4})
    assert first.returncode == 0, first.stderr
    (run_dir,) = (tmp_path / "outputs").iterdir()
    again = run("./outputs/", **settings, **{"max_steps": 6, "val": None, "gc.interval": 3})
    assert again.returncode == 0, again.stderr
    assert f"resumed from outputs/{run_dir.name}/checkpoints/step_4 at step 4" in again.stderr
    assert [p.name for p in (tmp_path / "outputs").iterdir()] == [run_dir.name]
    assert steps(run_dir) == [1, 2, 3, 4, 5, 6]


def test_after_kill_9_the_relaunch_finishes_with_every_step_once(tmp_path):
    process = start(tmp_path, "--max-steps", "100000", "--ckpt.interval", "40")
    run_dir = tmp_path / "tiny"
    wait_until(lambda: len(steps(run_dir)) >= 44, process, "44 steps")  # 40 to go to step 80
    process.kill()
    process.communicate(timeout=WAIT)
    logged = steps(run_dir)
    assert checkpoints(run_dir) == [40] and logged[-1] > 40  # records past it, trained again
    finish = logged[-1] + 2
    result = run(tmp_path, "--max-steps", str(finish), "--ckpt.interval", "40")
    assert result.returncode == 0, result.stderr
    assert f"resumed from {run_dir / 'checkpoints' / 'step_40'}" in result.stderr
    assert steps(run_dir) == list(range(1, finish + 1))


def test_sigterm_during_start_up_says_so(tmp_path):
    rows = tmp_path / "rows.jsonl"
    row = {"messages": [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "ba"}]}
    rows.write_text((json.dumps(row) + "\n") * 40_000)  # rendering them takes a few seconds
    process = start(tmp_path, **{"data.type": "sft", "data.name": str(rows)})
    wait_until(lambda: (tmp_path / "tiny" / "config.json").exists(), process, "the run dir")
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=WAIT)
    assert process.returncode == 128 + signal.SIGTERM
    assert "sft: stopped by SIGTERM; the checkpoints written stand" in err
    assert "Traceback" not in err and steps(tmp_path / "tiny") == []


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of its own, for disks that fill up or turn read-only; skipped where this
    process may not mount one (it needs root, or CAP_SYS_ADMIN)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip() or made.returncode}")

    def remount(options: str) -> bool:
        done = subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=False)
        return done.returncode == 0

    try:
        yield mount, remount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def used_bytes(path: Path) -> int:
    return shutil.disk_usage(path).used


def test_a_full_then_read_only_disk(small_disk):
    """A full disk stops the run with the reason, the relaunch resumes; a read-only one is
    refused at start."""
    disk, remount = small_disk
    process = start(disk, "--max-steps", "100000", "--ckpt.interval", "40")
    run_dir = disk / "tiny"
    wait_until(lambda: checkpoints(run_dir) == [40], process, "the first checkpoint")
    # What is there and a little more (tmpfs refuses a size below what it holds: measure again).
    assert any(remount(f"size={used_bytes(disk) + 256 * 1024}") for _ in range(20))
    _, err = process.communicate(timeout=WAIT)
    assert process.returncode == 1, err
    assert "sft: stopped" in err and "no space left on the device" in err
    assert f"{run_dir / 'checkpoints' / 'step_40'} is intact" in err
    assert "Traceback" not in err
    assert checkpoints(run_dir) == [40] and not list((run_dir / "checkpoints").glob(".step_*"))
    assert remount("size=256m")
    result = run(disk, "--max-steps", "90", "--ckpt.interval", "40")
    assert result.returncode == 0, result.stderr
    assert "resumed from" in result.stderr and "step_40 at step 40" in result.stderr
    assert steps(run_dir) == list(range(1, 91))

    assert remount("ro")  # the disk turns read-only: the next start is refused, nothing lost
    refused = run(disk, "--max-steps", "100", "--ckpt.interval", "40")
    assert refused.returncode == 1
    assert "Read-only file system" in refused.stderr and "Traceback" not in refused.stderr
    assert checkpoints(run_dir) == [40, 80, 90]


def test_an_unreachable_hub_fails_at_once_with_one_message(tmp_path):
    """A hub id with no way to the hub (HF_ENDPOINT at a closed local port, as no network
    is): one probe, then one answer; no retries, no noise about the deployment."""
    config = tmp_path / "hub.toml"
    config.write_text('[model]\nname = "Qwen/Qwen3-0.6B"\n')  # a hub id
    process = subprocess.run(
        [SFT, str(config), "--output-dir", str(tmp_path / "run"), "--max-steps", "1"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": ""},
    )
    assert process.returncode == 1
    lines = process.stderr.strip().splitlines()
    assert lines[0] == "sft: cannot start"
    assert "the hub cannot be reached from here" in lines[1] and "`hf download" in lines[2]
    assert len(lines) == 3, process.stderr  # no retries, warnings or deployment notes
