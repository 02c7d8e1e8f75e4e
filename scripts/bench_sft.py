"""Benchmark the `sft` trainer against a minimal hand-written PyTorch loop and TRL's SFTTrainer,
side by side in one run.

    .venv/bin/python scripts/bench_sft.py [--steps 60] [--warmup 10] [--repeats 1] [--skip-trl]
                                          [--rows 8] [--seq-len 256] [--threads N] [--keep]

All three train the built-in model (builtin:tiny-qwen3, weights from seed 0) on the built-in
reverse-text chat task packed into rows of seq-len tokens, `rows` rows per optimizer step, with
AdamW (same lr, weight decay, warm-up + cosine schedule, no decay on norms and embeddings) and
gradient clipping at max_norm 1.0, each in its own process with the same environment
(OMP_WAIT_POLICY=PASSIVE, OMP_NUM_THREADS=threads, default: the CPUs this process may use):

- sft:  the real console script, `sft configs/sft/demo.toml --max-steps N --no-ckpt --no-val ...`
        in a temporary output directory; times from its metrics.jsonl.
- loop: scripts/bench_sft_peers.py: the same packed batches (trainspec's data module), an
        AutoModelForCausalLM forward with position_ids, masked cross-entropy, backward,
        clip_grad_norm_, AdamW step, zero_grad.
- trl:  scripts/bench_sft_peers.py: SFTTrainer with packing; its loss mask is printed (the
        built-in chat template has no {% generation %} markers, so assistant_only_loss is tried
        and, failing, the same conversations go in as prompt/completion with completion-only
        loss: the assistant turn, as in sft). If TRL cannot run, one line says why.

tok/s counts every position of a step (padding included) over the wall time from the end of
step `warmup` to the end of the last step; real tok/s counts the non-pad tokens (TRL packs
best-fit without padding, sft and the loop pack in order and pad each row, so the fair
comparison with TRL is real tok/s). Peak RSS is each child's own ru_maxrss (os.wait4). With
--repeats R the three run interleaved R times (order rotated) and medians are reported.
Targets: sft >= 0.97x the loop's tok/s, sft ahead of TRL (real tok/s), sft peak RSS <= 1.1x the
loop's. Always exits 0: it is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench_common import child_env, last_line, print_table, ratio, run_child, verdict

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "scripts" / "bench_sft_peers.py"
DEMO = ROOT / "configs" / "sft" / "demo.toml"
APPROACHES = ("sft", "loop", "trl")
# The demo's optimizer and schedule, given to all three explicitly.
LR, WEIGHT_DECAY, MAX_NORM, WARMUP_STEPS, MIN_LR, SEED = 3e-3, 0.01, 1.0, 20, 3e-4, 0
TARGET_SPEED, TARGET_RSS = 0.97, 1.10
CHILD_TIMEOUT_S = 1800
SFT_COLUMNS = (
    ("approach", "<8"), ("tok/s", ">8"), ("x loop", ">7"), ("real tok/s", ">10"),
    ("x loop", ">7"), ("inner tok/s", ">11"), ("peak RSS MiB", ">12"), ("x loop", ">7"),
    ("loss first -> last", ">20"),
)  # fmt: skip


def sft_child_env(threads: int) -> dict:
    return child_env(OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads))


def spec_of(args, workdir: Path, which: str) -> dict:
    return {
        "steps": args.steps, "rows": args.rows, "seq_len": args.seq_len, "seed": SEED,
        "lr": LR, "weight_decay": WEIGHT_DECAY, "max_norm": MAX_NORM,
        "warmup_steps": warmup_steps(args.steps), "min_lr": MIN_LR, "threads": args.threads,
        "result": str(workdir / f"{which}.json"), "workdir": str(workdir / f"{which}-out"),
    }  # fmt: skip


def warmup_steps(steps: int) -> int:
    return min(WARMUP_STEPS, steps - 1)


def sft_command(args, output_dir: Path) -> list[str]:
    script = Path(sys.executable).with_name("sft")
    L, R = str(args.seq_len), str(args.rows)  # noqa: N806
    return [
        str(script), str(DEMO), "--max-steps", str(args.steps), "--no-ckpt", "--no-val",
        "--output-dir", str(output_dir), "--clean",
        "--data.batch-size", R, "--data.micro-batch-size", R,
        "--data.seq-len", L, "--model.seq-len", L, "--data.seed", str(SEED),
        "--optim.type", "adamw", "--optim.lr", str(LR), "--optim.weight-decay", str(WEIGHT_DECAY),
        "--optim.max-norm", str(MAX_NORM), "--scheduler.type", "cosine",
        "--scheduler.warmup-steps", str(warmup_steps(args.steps)),
        "--scheduler.min-lr", str(MIN_LR),
    ]  # fmt: skip


def sft_steps(output_dir: Path, tokens_per_step: int) -> list[dict]:
    """The per-step records of the run's metrics.jsonl, shaped like the peers' results."""
    files = sorted(output_dir.glob("*/metrics.jsonl"))
    if not files:
        raise RuntimeError(f"no metrics.jsonl under {output_dir}")
    steps = []
    for line in files[0].read_text().splitlines():
        record = json.loads(line)
        if "loss" in record and "step_time_s" in record:
            steps.append({
                "end": record["timestamp"], "inner": record["step_time_s"],
                "tokens": tokens_per_step, "loss": record["loss"],
            })  # fmt: skip
    return steps


def summarise(steps: list[dict], warmup: int) -> dict:
    """tok/s (wall, end of step `warmup` to end of the last step), inner tok/s (the trainer's
    own step time), real tok/s when known, losses."""
    if len(steps) <= warmup or warmup < 1:
        raise RuntimeError(f"{len(steps)} steps logged, need more than --warmup {warmup}")
    timed = steps[warmup:]
    wall = steps[-1]["end"] - steps[warmup - 1]["end"]
    tokens = sum(s["tokens"] for s in timed)
    out = {
        "tok_s": tokens / wall,
        "inner_tok_s": tokens / sum(s["inner"] for s in timed),
        "tokens_per_step": tokens / len(timed),
        "first_loss": steps[0]["loss"],
        "last_loss": steps[-1]["loss"],
        "real_per_step": None,
        "real_tok_s": None,
        "losses": [s["loss"] for s in steps],
        "outside_ms": 1e3 * (wall - sum(s["inner"] for s in timed)),
        "worst_gap": max(
            (1e3 * (steps[i]["end"] - steps[i - 1]["end"] - steps[i]["inner"]), i + 1)
            for i in range(warmup, len(steps))
        ),
    }
    if all("real" in s for s in timed):
        out["real_per_step"] = sum(s["real"] for s in timed) / len(timed)
        out["real_tok_s"] = sum(s["real"] for s in timed) / wall
    return out


def run_one(which: str, args, workdir: Path, env: dict) -> tuple[dict | None, str | None]:
    """(summary with rss_mib, None) or (None, one-line reason)."""
    log = workdir / f"{which}.log"
    if which == "sft":
        output_dir = workdir / "sft-out"
        command = sft_command(args, output_dir)
    else:
        spec = spec_of(args, workdir, which)
        command = [sys.executable, str(PEERS), which, json.dumps(spec)]
    run = run_child(command, env, log, timeout_s=CHILD_TIMEOUT_S)
    code, rss, seconds = run["code"], run["rss_mib"], run["wall_s"]
    try:
        if which == "sft":
            if code != 0:
                raise RuntimeError(f"exit {code}: {last_line(log)}")
            steps, notes = sft_steps(output_dir, args.rows * args.seq_len), []
        else:
            result_file = Path(spec["result"])
            result = json.loads(result_file.read_text()) if result_file.exists() else {}
            if "error" in result or code != 0:
                raise RuntimeError(result.get("error") or f"exit {code}: {last_line(log)}")
            steps, notes = result["steps"], result.get("notes", [])
        summary = summarise(steps, args.warmup)
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        return None, f"{which} failed: {exc}"
    summary.update(rss_mib=rss, process_s=seconds, notes=notes)
    return summary, None


def median_summary(runs: list[dict]) -> dict:
    out = dict(runs[-1])
    for key in ("tok_s", "inner_tok_s", "real_tok_s", "rss_mib", "process_s"):
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    out["spread"] = {
        key: (min(r[key] for r in runs), max(r[key] for r in runs)) for key in ("tok_s", "rss_mib")
    }
    return out


def report(results: dict[str, list[dict]], failures: dict[str, str], args) -> None:
    summaries = {k: median_summary(v) for k, v in results.items() if v}
    loop = summaries.get("loop")
    sft = summaries.get("sft")
    # sft packs exactly the loop's batches (same data module, seed, rows): same real tokens.
    if sft and loop and loop["real_per_step"] is not None:
        same = abs(sft["first_loss"] - loop["first_loss"]) < 1e-4
        if same:
            sft["real_per_step"] = loop["real_per_step"]
            sft["real_tok_s"] = sft["tok_s"] * loop["real_per_step"] / loop["tokens_per_step"]
    base_tok = loop["tok_s"] if loop else None
    base_real = loop["real_tok_s"] if loop else None
    base_rss = loop["rss_mib"] if loop else None
    print()
    print(
        f"{args.steps} steps x {args.rows} rows x {args.seq_len} tokens, timed after step "
        f"{args.warmup}, {args.threads} torch threads, "
        + (f"median of {args.repeats} interleaved runs" if args.repeats > 1 else "one run each")
    )
    rows: list[list[str] | str] = []
    for which in APPROACHES:
        s = summaries.get(which)
        if s is None:
            rows.append(f"{which:<6} {failures.get(which, 'skipped')}")
            continue
        rows.append(
            [
                which,
                f"{s['tok_s']:,.0f}",
                ratio(s["tok_s"], base_tok),
                f"{s['real_tok_s']:,.0f}" if s["real_tok_s"] else "-",
                ratio(s["real_tok_s"], base_real),
                f"{s['inner_tok_s']:,.0f}",
                f"{s['rss_mib']:.0f}",
                ratio(s["rss_mib"], base_rss),
                f"{s['first_loss']:.4f} -> {s['last_loss']:.4f}",
            ]
        )
    print_table(SFT_COLUMNS, rows)
    print()
    for which in APPROACHES:
        s = summaries.get(which)
        if s is None:
            continue
        real = f"{s['real_per_step']:.0f}" if s["real_per_step"] else "?"
        lo, hi = s["spread"]["tok_s"]
        spread = f"; tok/s range {lo:,.0f}..{hi:,.0f}" if args.repeats > 1 else ""
        borrowed = " (the loop's batches)" if which == "sft" and s["real_per_step"] else ""
        gap, at = s["worst_gap"]
        print(
            f"{which}: {s['tokens_per_step']:.0f} positions/step, {real} real tokens/step"
            f"{borrowed}, process {s['process_s']:.1f} s{spread}\n"
            f"  outside the timed steps: {s['outside_ms']:.0f} ms over {args.steps - args.warmup} "
            f"steps, the most {gap:.0f} ms before step {at}"
        )
        for note in s["notes"]:
            print(f"  {note}")
    if sft and loop:
        print(
            "sft and loop first loss "
            + (
                "identical (same weights, same batches)"
                if abs(sft["first_loss"] - loop["first_loss"]) < 1e-4
                else f"DIFFER ({sft['first_loss']:.6f} vs {loop['first_loss']:.6f})"
            )
        )

    trl = summaries.get("trl")
    speed = sft["tok_s"] / loop["tok_s"] if sft and loop else None
    rss = sft["rss_mib"] / loop["rss_mib"] if sft and loop else None
    ahead = None
    if sft and trl and sft["real_tok_s"] and trl["real_tok_s"]:
        ahead = sft["real_tok_s"] / trl["real_tok_s"]
    print("\ntargets")
    print(
        f"  {verdict(None if speed is None else speed >= TARGET_SPEED)}  sft tok/s >= "
        f"{TARGET_SPEED}x loop: " + (f"{speed:.3f}x" if speed else "-")
    )
    print(
        f"  {verdict(None if ahead is None else ahead > 1.0)}  sft ahead of TRL (real tok/s): "
        + (f"{ahead:.2f}x" if ahead else "-")
    )
    print(
        f"  {verdict(None if rss is None else rss <= TARGET_RSS)}  sft peak RSS <= "
        f"{TARGET_RSS}x loop: " + (f"{rss:.3f}x" if rss else "-")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps per run")
    parser.add_argument("--warmup", type=int, default=10, help="steps left out of the timing")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved runs (median)")
    parser.add_argument("--skip-trl", action="store_true", help="leave TRL's SFTTrainer out")
    parser.add_argument("--rows", type=int, default=8, help="rows per optimizer step")
    parser.add_argument("--seq-len", type=int, default=256, help="tokens per packed row")
    default_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2
    parser.add_argument("--threads", type=int, default=default_threads, help="torch threads")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    args = parser.parse_args()
    if not 1 <= args.warmup < args.steps:
        parser.error("need 1 <= --warmup < --steps")

    approaches = [a for a in APPROACHES if not (a == "trl" and args.skip_trl)]
    env = sft_child_env(args.threads)
    results: dict[str, list[dict]] = {a: [] for a in approaches}
    failures: dict[str, str] = {}
    top = Path(tempfile.mkdtemp(prefix="bench_sft-"))
    for repeat in range(args.repeats):
        order = approaches[repeat % len(approaches) :] + approaches[: repeat % len(approaches)]
        for which in order:
            workdir = top / f"run{repeat}"
            workdir.mkdir(exist_ok=True)
            print(f"[{repeat + 1}/{args.repeats}] {which} ...", end=" ", flush=True)
            summary, reason = run_one(which, args, workdir, env)
            if summary is None:
                print(reason)
                failures[which] = reason
                continue
            results[which].append(summary)
            print(f"{summary['tok_s']:,.0f} tok/s, {summary['rss_mib']:.0f} MiB", flush=True)
    report(results, failures, args)
    if args.keep:
        print(f"\nlogs and run directories: {top}")
    else:
        import shutil

        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
