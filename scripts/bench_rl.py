"""Benchmark the RL trainer against a hand-written PyTorch loop (the trainer step) and `rl`
against TRL's GRPOTrainer (end to end, same wall-clock budget), side by side in one run.

    .venv/bin/python scripts/bench_rl.py [--repeats 20] [--warmup 3] [--budget-s 150]
                                         [--only a|b] [--keep]

Everything is set by configs/rl/demo.toml (resolved by trainspec's loader): the SFT weights
outputs/rl-demo-sft/checkpoints/latest/weights (made by `sft configs/rl/demo-sft.toml` when
missing), the byte-level tokenizer and ChatML template, 16 reverse-text prompts x 8 completions
a step, temperature 1.0, at most 16 new tokens, rows of 256 tokens, micro-batches of 8 rows,
AdamW lr 3e-4, gradient clipping at 1.0, the DPPO loss.

(a) trainer step, in one process (scripts/bench_rl_peers.py step): four fixed RolloutBatches,
    sampled from the SFT weights the orchestrator's way (every one of the 128 samples kept,
    packed by pack_samples into ~35 rows of 256 = 5 micro-batches), train two copies of the same
    weights: `ours` = rl/train.py's Parts.build / build_loss / run_step / Parts.update (clip,
    optimizer and scheduler step), `hand` = HF model forward, log_softmax at the
    temperature gathered at the targets, the DPPO loss inline, backward, clip_grad_norm_, AdamW.
    Steps are interleaved with the order alternating (ours hand, hand ours, ...), the first
    `--warmup` of each left out; tok/s is positions (padding included; "real" counts non-pad
    tokens) over each step's wall time, median over the repeats. "cpu ms" is the process CPU
    time of the step: when wall is far above cpu/threads the step was pre-empted (a shared
    machine). Both must compute the same loss on the first step (same weights, same batch).
    The process first does what rl-trainer's launch does before torch loads (the config's
    env_vars, glibc malloc limits); both sides share it.
    Target: ours >= 0.95x the hand loop's tok/s.

(b) end to end, each in its own process with the same environment, one after the other, each
    given --budget-s seconds of wall time counted from its own process start (startup, model
    load and dataset preparation included):
    - rl:  `rl configs/rl/demo.toml --max-steps 100000 --output-dir TMP --no-orchestrator.eval
           --no-trainer.ckpt`, SIGTERM at the budget (it stops cleanly); its trainer's
           metrics.jsonl gives per step the end time and the mean reward of the step's samples.
           Held-out evaluation and checkpoints are off because TRL does neither here.
    - rl-vllm: the same with configs/rl/demo-vllm.toml, where `rl` samples on the vLLM server
           it starts (vLLM's CPU build without a GPU; its start is inside the budget). Run
           when vLLM is installed; said as skipped otherwise. No target: the samplers'
           figures side by side.
    - trl: scripts/bench_rl_peers.py trl: GRPOTrainer on the same weights and tokenizer, the same
           prompts in the same order (the orchestrator's seeded Task stream, conversational, so
           TRL applies the same chat template: the script checks the prompt ids are identical),
           the same reward function (LCS ratio vs the reversed string, 0 when the completion did
           not end on <|im_end|>), num_generations 8, 32 completions per forward x 4 gradient
           accumulation = 128 completions per optimizer step (one generate call of 128, as ours),
           temperature 1.0, top_k 0, top_p 1.0, max_completion_length 16, KV cache on, lr 3e-4
           constant, AdamW (adamw_torch, betas and weight decay as ours: 0.0), max_grad_norm 1.0,
           float32 (bf16 off), no gradient checkpointing (ours: ac None), use_cpu, no vLLM,
           report_to none, a callback that stops at the budget.
    Only steps that ended within the budget count. Reported: steps, startup (process start to
    the end of the first step), mean reward over the first and the last 10 steps, the reward
    at the step count both reached, samples/s = 128 x steps / budget (the end-to-end figure the
    target uses) and steady samples/s (between the first and the last step's end), the process
    wall and CPU seconds (children included). Targets: rl's end reward >= TRL's, and rl's
    samples/s >= TRL's.
    The environment reaches both runs unchanged (OpenMP's default wait policy: spin briefly,
    then sleep). The demo config runs on-policy (max_async_level 0): on 2 shared cores, sampling
    and training taking turns with every core beat overlapping them with half each (trainer step
    0.22 s vs 0.38 s); OMP_WAIT_POLICY=PASSIVE slowed rl's steps 1.6x here.

What differs between rl and TRL, on purpose or because it cannot be matched:
- rl runs two processes, the orchestrator and the trainer, that hand batches and weights to
  each other through files; the demo config is on-policy (max_async_level 0), so they take
  turns, as TRL's generate-then-train does in one process.
- The loss: rl's DPPO (policy gradient times the trainer/sampler ratio, tokens masked when the
  probability moved more than 0.2 in the advantage's direction, plus 0.001 x log_ratio**2 to
  the sampler) vs TRL's default loss_type "dapo" (PPO-clipped at epsilon 0.2; on-policy with
  num_iterations 1 its ratio is exactly 1, so it is the plain policy gradient). Both sum over
  tokens and divide by the step's completion tokens. TRL's beta is 0 (its default): there is no
  reference model; rl's small KL term is to the sampler, not to a reference, so no TRL setting
  matches it.
- Advantages: both are reward minus the group mean; TRL's default divides by the group's std,
  so scale_rewards="none" here, as rl. rl drops zero-advantage samples before training (they
  teach nothing); TRL keeps them with advantage 0, which only adds their tokens to the divisor.
- Packing: rl packs samples into rows of 256 tokens (position ids restart per sample); TRL pads
  every prompt + completion to the longest in its micro-batch.
- Sampling: both call transformers' generate on the CPU; rl prefills each of the 16 prompts once
  and repeats its KV cache 8 times (sampler.prefill_shared_prompts: the samples of
  num_return_sequences=8, a step's prefill cost / 8), TRL generates from the 16 prompts
  repeated 8 times. rl's orchestrator also reloads the weights
  the trainer writes (broadcasts/step_N) every step; TRL samples from the weights it trains.
- rl pays for the hand-over each step: the trainer writes the weights, the orchestrator polls
  for them (every 5 ms) and loads them, and the batch goes through a file the same way.
- TRL's process tokenizes its prompt rows (budget x 4 steps' worth, ~1 s) before training, in
  its budget; rl's orchestrator tokenizes each step's prompts as it goes.

Always exits 0: it is a benchmark, not a test. The machine may be shared; --keep leaves the logs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_common import child_env, last_line, print_table, ratio, run_child, verdict

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "scripts" / "bench_rl_peers.py"
DEMO = ROOT / "configs" / "rl" / "demo.toml"
DEMO_VLLM = ROOT / "configs" / "rl" / "demo-vllm.toml"  # the same run, sampled on vLLM
SFT_CONFIG = ROOT / "configs" / "rl" / "demo-sft.toml"
SFT_WEIGHTS = ROOT / "outputs" / "rl-demo-sft" / "checkpoints" / "latest" / "weights"
SIDES = ("ours", "hand")
APPROACHES = ("rl", "rl-vllm", "trl")  # rl-vllm: when vLLM is installed
SAMPLES_PER_STEP = 128  # configs/rl/demo.toml: orchestrator.batch_size
TARGET_STEP = 0.95
LOSS_TOLERANCE = 1e-4
WINDOW = 10  # steps averaged at the start and at the end of a reward curve
CHILD_TIMEOUT_S = 900
STEP_COLUMNS = (
    ("side", "<5"), ("step ms", ">8"), ("range ms", ">13"), ("cpu ms", ">7"), ("tok/s", ">8"),
    ("real tok/s", ">10"), ("x hand", ">7"), ("loss step 1", ">12"), ("grad norm 1", ">11"),
)  # fmt: skip
E2E_COLUMNS = (
    ("run", "<7"), ("steps", ">5"), ("startup s", ">9"), ("samples/s", ">9"), ("steady", ">7"),
    ("reward first10 -> last10", ">24"), ("wall s", ">7"), ("CPU s", ">6"), ("load", ">9"),
)  # fmt: skip


def ensure_sft_weights(env: dict, workdir: Path) -> str | None:
    """The demo's starting weights; trained (~1 min) when missing. A reason when that fails."""
    if (SFT_WEIGHTS / "model.safetensors").is_file():
        return None
    print(f"{SFT_WEIGHTS.relative_to(ROOT)} missing: running sft {SFT_CONFIG.name} ...", flush=True)
    log = workdir / "sft.log"
    sft = [str(Path(sys.executable).with_name("sft")), str(SFT_CONFIG)]
    run = run_child(sft, env, log, timeout_s=CHILD_TIMEOUT_S)
    if run["code"] != 0 or not (SFT_WEIGHTS / "model.safetensors").is_file():
        return f"sft failed (exit {run['code']}): {last_line(log)}"
    return None


def peer(which: str, spec: dict, workdir: Path, env: dict, timeout_s: float = CHILD_TIMEOUT_S):
    """(result JSON, run facts) of one bench_rl_peers.py child; raises RuntimeError on failure."""
    spec = dict(spec, result=str(workdir / f"{which}.json"), workdir=str(workdir / f"{which}-out"))
    log = workdir / f"{which}.log"
    command = [sys.executable, str(PEERS), which, json.dumps(spec)]
    run = run_child(command, env, log, timeout_s=timeout_s)
    result_file = Path(spec["result"])
    result = json.loads(result_file.read_text()) if result_file.exists() else {}
    if "error" in result or run["code"] != 0 or not result:
        raise RuntimeError(result.get("error") or f"exit {run['code']}: {last_line(log)}")
    return result, run


# -- (a) the trainer step ------------------------------------------------------------------------


def step_side(result: dict, name: str, warmup: int) -> dict:
    """Medians of one side's timed steps (batches cycle, so positions vary a little)."""
    count = len(result["positions"])
    steps = result["steps"][name]
    timed = list(enumerate(steps))[warmup:]
    seconds = [s["seconds"] for _, s in timed]
    tok_s = [result["positions"][i % count] / s["seconds"] for i, s in timed]
    real_s = [result["real"][i % count] / s["seconds"] for i, s in timed]
    return {
        "ms": 1e3 * statistics.median(seconds),
        "ms_range": (1e3 * min(seconds), 1e3 * max(seconds)),
        "cpu_ms": 1e3 * statistics.median(s["cpu"] for _, s in timed),
        "tok_s": statistics.median(tok_s),
        "real_tok_s": statistics.median(real_s),
        "losses": [s["loss"] for s in steps],
        "grad_norms": [s["grad_norm"] for s in steps],
        "seconds": seconds,
    }


def run_part_a(args, workdir: Path, env: dict) -> tuple[dict | None, str | None]:
    spec = {"demo": str(DEMO), "batches": 4, "warmup": args.warmup, "repeats": args.repeats}
    print(f"(a) trainer step: {args.warmup} + {args.repeats} steps each ...", end=" ", flush=True)
    load = os.getloadavg()[0]
    try:
        result, run = peer("step", spec, workdir, env)
    except (RuntimeError, ValueError, OSError) as exc:
        print("failed")
        return None, f"step benchmark failed: {exc}"
    result["process_s"] = run["wall_s"]
    result["load"] = (load, os.getloadavg()[0])
    print(f"{run['wall_s']:.0f} s", flush=True)
    return result, None


def report_a(result: dict | None, reason: str | None, args) -> dict:
    """Print part (a); returns what the targets need."""
    print()
    if result is None:
        print(f"(a) {reason}")
        return {}
    sides = {name: step_side(result, name, args.warmup) for name in SIDES}
    ours, hand = sides["ours"], sides["hand"]
    rows = [p // 256 for p in result["positions"]]
    per_mb = result["shape"][0][0]
    print(
        f"(a) trainer step on {len(rows)} fixed batches of {SAMPLES_PER_STEP} samples "
        f"({'/'.join(map(str, rows))} rows of 256 tokens, micro-batches of {per_mb} rows), "
        f"{args.repeats} interleaved steps each after {args.warmup} warm-up, medians"
    )
    rows = []
    for name in SIDES:
        s = sides[name]
        lo, hi = s["ms_range"]
        rows.append(
            [
                name,
                f"{s['ms']:.1f}",
                f"{lo:.0f}..{hi:.0f}",
                f"{s['cpu_ms']:.0f}",
                f"{s['tok_s']:,.0f}",
                f"{s['real_tok_s']:,.0f}",
                ratio(s["tok_s"], hand["tok_s"]),
                f"{s['losses'][0]:.7f}",
                f"{s['grad_norms'][0]:.5f}",
            ]
        )
    print_table(STEP_COLUMNS, rows)
    paired = statistics.median(h / o for o, h in zip(ours["seconds"], hand["seconds"], strict=True))
    first_diff = abs(ours["losses"][0] - hand["losses"][0])
    worst = max(abs(a - b) for a, b in zip(ours["losses"], hand["losses"], strict=True))
    same = first_diff < LOSS_TOLERANCE
    print(
        f"paired (same batch, back to back): ours/hand speed median {paired:.3f}x\n"
        f"first-step loss {'identical' if same else 'DIFFERS'}: |ours - hand| = {first_diff:.2e}"
        f" (tolerance {LOSS_TOLERANCE:g}); over all {len(ours['losses'])} steps at most "
        f"{worst:.2e} (the two copies stay in lockstep)\n"
        f"rl/train.py also publishes the weights after every step (filesystem broadcast, inside "
        f"its logged step_time_s, not timed above): {result['publish_ms']:.1f} ms median = "
        f"{100 * result['publish_ms'] / ours['ms']:.1f}% of ours' step\n"
        f"process {result['process_s']:.0f} s, load average {result['load'][0]:.1f} before / "
        f"{result['load'][1]:.1f} after on {os.cpu_count()} CPUs; " + "; ".join(result["notes"])
    )
    return {"speed": ours["tok_s"] / hand["tok_s"], "same_loss": same}


# -- (b) end to end ------------------------------------------------------------------------------


def rl_command(output_dir: Path, config: Path = DEMO) -> list[str]:
    return [
        str(Path(sys.executable).with_name("rl")), str(config), "--max-steps", "100000",
        "--output-dir", str(output_dir), "--no-orchestrator.eval", "--no-trainer.ckpt",
    ]  # fmt: skip


def rl_steps(output_dir: Path) -> list[dict]:
    """Per trained step: end time and the mean reward of its samples (trainer's metrics)."""
    path = output_dir / "metrics.jsonl"
    if not path.is_file():
        raise RuntimeError(f"no metrics.jsonl in {output_dir}")
    steps = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "reward" in record and "step_time_s" in record:
            steps.append({"end": record["timestamp"], "reward": record["reward"]})
    return steps


def curve(steps: list[dict], launched: float, budget: float) -> dict:
    """The reward curve's start and end and the throughput of the steps inside the budget."""
    inside = [s for s in steps if s["end"] <= launched + budget and s["reward"] is not None]
    if len(inside) < 2:
        raise RuntimeError(f"{len(inside)} steps within the budget")
    rewards = [s["reward"] for s in inside]
    window = min(WINDOW, max(1, len(rewards) // 2))
    span = inside[-1]["end"] - inside[0]["end"]
    return {
        "steps": len(inside),
        "rewards": rewards,
        "start": sum(rewards[:window]) / window,
        "end": sum(rewards[-window:]) / window,
        "window": window,
        "startup_s": inside[0]["end"] - launched,
        "samples_s": SAMPLES_PER_STEP * len(inside) / budget,
        "steady_s": SAMPLES_PER_STEP * (len(inside) - 1) / span,
        "after": len(steps) - len(inside),
    }


def run_e2e(
    which: str, args, workdir: Path, env: dict, round_: int = 1
) -> tuple[dict | None, str | None]:
    print(f"(b) {which} #{round_}: {args.budget_s:.0f} s budget ...", end=" ", flush=True)
    load = os.getloadavg()[0]
    try:
        if which.startswith("rl"):  # a run directory of its own each round (one reused resumes)
            output_dir = workdir / f"{which}-out-{round_}"
            log = workdir / f"{which}-{round_}.log"
            stop_at = time.time() + args.budget_s
            config = DEMO_VLLM if which == "rl-vllm" else DEMO
            run = run_child(
                rl_command(output_dir, config), env, log, timeout_s=CHILD_TIMEOUT_S,
                stop_at=stop_at,
            )  # fmt: skip
            if run["code"] != 0:
                raise RuntimeError(f"exit {run['code']}: {last_line(log)}")
            steps, notes = rl_steps(output_dir), []
        else:
            spec = {
                "demo": str(DEMO), "deadline": time.time() + args.budget_s,
                "max_steps": int(args.budget_s * 4) + 10,
            }  # fmt: skip
            trl_dir = workdir / f"trl-{round_}"
            trl_dir.mkdir(parents=True, exist_ok=True)
            result, run = peer("trl", spec, trl_dir, env, args.budget_s + CHILD_TIMEOUT_S)
            run["launched"] = spec["deadline"] - args.budget_s
            steps, notes = result["steps"], result["notes"]
        summary = curve(steps, run["launched"], args.budget_s)
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        print("failed")
        return None, f"{which} failed: {exc}"
    summary.update(
        wall_s=run["wall_s"], cpu_s=run["cpu_s"], notes=notes, load=(load, os.getloadavg()[0])
    )
    print(f"{summary['steps']} steps, reward {summary['start']:.3f} -> {summary['end']:.3f}")
    return summary, None


def median_run(runs: list[dict]) -> dict:
    """The run of median end reward (its figures whole, so each row is one real run); with an
    even count the lower of the two middle ones. Its `rounds` says how many ran."""
    ranked = sorted(runs, key=lambda run: run["end"])
    chosen = dict(ranked[(len(ranked) - 1) // 2])
    chosen["rounds"] = [run["end"] for run in runs]
    chosen["samples_s"] = statistics.median(run["samples_s"] for run in runs)
    return chosen


def report_b(results: dict[str, dict], failures: dict[str, str], args) -> dict:
    policy = os.environ.get("OMP_WAIT_POLICY", "unset (OpenMP's default)")
    print()
    print(
        f"(b) end to end, {args.budget_s:.0f} s of wall time each from process start, "
        f"{SAMPLES_PER_STEP} completions/step (16 prompts x 8), T 1.0, <= 16 new tokens, "
        f"lr 3e-4, OMP_WAIT_POLICY {policy}"
    )
    both = [results[a]["steps"] for a in APPROACHES if a in results]
    common = min(both) if len(both) >= 2 else None
    at = f"@step {common}" if common else "@common"
    columns = (*E2E_COLUMNS[:6], (at, ">11"), *E2E_COLUMNS[6:])
    rows: list[list[str] | str] = []
    for which in APPROACHES:
        s = results.get(which)
        if s is None:
            rows.append(f"{which:<7} {failures.get(which, 'skipped')}")
            continue
        common_reward = "-"
        if common:
            tail = s["rewards"][:common][-min(WINDOW, common) :]
            common_reward = f"{sum(tail) / len(tail):.3f}"
        rows.append(
            [
                which,
                str(s["steps"]),
                f"{s['startup_s']:.1f}",
                f"{s['samples_s']:.1f}",
                f"{s['steady_s']:.1f}",
                f"{s['start']:.3f} -> {s['end']:.3f}",
                common_reward,
                f"{s['wall_s']:.0f}",
                f"{s['cpu_s']:.0f}",
                f"{s['load'][0]:.1f}/{s['load'][1]:.1f}",
            ]
        )
    print_table(columns, rows)
    print(
        "samples/s = 128 x steps within the budget / budget; steady = between the first and the "
        "last step's end; the reward columns average the first and the last 10 steps' mean "
        f"reward (half the steps if fewer than 20), {at} the 10 steps up to the step count both "
        "reached; load = 1-min load "
        "average before/after (above the core count: the figures are noisy)"
    )
    for which in APPROACHES:
        s = results.get(which)
        if s and len(s["rounds"]) > 1:
            ends = ", ".join(f"{end:.3f}" for end in s["rounds"])
            print(f"{which}: {len(s['rounds'])} rounds, end rewards {ends}; the row is the median")
        if s and s["after"]:
            print(f"{which}: {s['after']} step(s) ended after the budget and are not counted")
        for note in (s or {}).get("notes", []):
            print(f"{which}: {note}")
    rl, trl = results.get("rl"), results.get("trl")
    return {
        "reward": (rl["end"], trl["end"]) if rl and trl else None,
        "samples": (rl["samples_s"], trl["samples_s"]) if rl and trl else None,
    }


def report_targets(a: dict, b: dict, parts: str) -> None:
    print("\ntargets")
    if "a" in parts:
        speed = a.get("speed")
        print(
            f"  {verdict(None if speed is None else speed >= TARGET_STEP)}  trainer step tok/s "
            f">= {TARGET_STEP}x the hand loop: " + (f"{speed:.3f}x" if speed else "-")
        )
        same = a.get("same_loss")
        print(
            f"  {verdict(same)}  same first-step loss as the hand loop (within {LOSS_TOLERANCE:g})"
        )
    if "b" in parts:
        reward, samples = b.get("reward"), b.get("samples")
        print(
            f"  {verdict(None if reward is None else reward[0] >= reward[1])}  rl end reward >= "
            "TRL's (last 10 steps): " + (f"{reward[0]:.3f} vs {reward[1]:.3f}" if reward else "-")
        )
        print(
            f"  {verdict(None if samples is None else samples[0] >= samples[1])}  rl samples/s "
            ">= TRL's (within the same budget): "
            + (f"{samples[0]:.1f} vs {samples[1]:.1f}" if samples else "-")
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--repeats", type=int, default=20, help="(a) timed steps per side")
    parser.add_argument("--warmup", type=int, default=3, help="(a) steps left out of the timing")
    parser.add_argument("--budget-s", type=float, default=150.0, help="(b) seconds per run")
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="(b) runs per side, alternating which goes first; the targets use medians",
    )  # fmt: skip
    parser.add_argument("--only", choices=("a", "b"), help="run only part a or part b")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    args = parser.parse_args()
    if args.repeats < 1 or args.warmup < 0 or args.budget_s <= 0 or args.rounds < 1:
        parser.error("need --repeats >= 1, --warmup >= 0, --budget-s > 0, --rounds >= 1")
    parts = args.only or "ab"

    env = child_env()
    top = Path(tempfile.mkdtemp(prefix="bench_rl-"))
    reason = ensure_sft_weights(env, top)
    if reason:
        print(reason)
        return 0
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    a_result = a_reason = None
    results: dict[str, dict] = {}
    failures: dict[str, str] = {}
    if "a" in parts:
        a_result, a_reason = run_part_a(args, top, env)
    if "b" in parts:
        from trainspec.trainers.serving.vllm_plan import vllm_installed

        approaches = APPROACHES if vllm_installed() else tuple(a for a in APPROACHES
                                                             if a != "rl-vllm")  # fmt: skip
        if "rl-vllm" not in approaches:
            failures["rl-vllm"] = "skipped: vLLM is not installed (make install installs it)"
        rounds: dict[str, list[dict]] = {which: [] for which in approaches}
        for round_ in range(1, args.rounds + 1):
            order = approaches if round_ % 2 else approaches[::-1]
            for which in order:
                summary, why = run_e2e(which, args, top, env, round_)
                if summary is None:
                    failures[which] = why
                else:
                    rounds[which].append(summary)
        results = {which: median_run(runs) for which, runs in rounds.items() if runs}
    a = report_a(a_result, a_reason, args) if "a" in parts else {}
    b = report_b(results, failures, args) if "b" in parts else {}
    report_targets(a, b, parts)
    if args.keep:
        print(f"\nlogs and run directories: {top}")
    else:
        import shutil

        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
