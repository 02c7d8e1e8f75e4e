"""Benchmark the `sft` trainer against a minimal hand-written PyTorch loop and TRL's SFTTrainer,
side by side in one run.

    .venv/bin/python scripts/bench_sft.py [--size tiny|5m|30m|all] [--steps N] [--warmup N]
                                          [--repeats 1] [--skip-trl] [--rows N] [--seq-len N]
                                          [--threads N] [--keep]

All three train the same model on the built-in reverse-text chat task packed into rows of
seq-len tokens, `rows` rows per optimizer step, with AdamW (same lr, weight decay, warm-up +
cosine schedule, no decay on norms and embeddings) and gradient clipping at max_norm 1.0, each in
its own process with the same environment (OMP_WAIT_POLICY=PASSIVE, OMP_NUM_THREADS=threads,
default: the CPUs this process may use). --size picks the model, each with weights from
torch.manual_seed(0) and from_config, the built-in's vocabulary (260), tokenizer and other
settings (head_dim 32, two query heads per key/value head, intermediate = 3 x hidden, tied
embeddings). Rows and seq-len stay those of tiny, so only the model changes between sizes;
the default --steps and --warmup shrink with the model, so that `--size all` takes about ten
minutes on two cores:

    size   hidden x layers  heads (kv)  parameters  steps  warmup  rows x seq-len
    tiny      128 x 2         4 (2)        427,264     60      10       8 x 256
    5m        256 x 6         8 (4)      4,788,864     30       5       8 x 256
    30m       512 x 9        16 (8)     28,454,976     20       5       8 x 256

tiny is builtin:tiny-qwen3 itself; for 5m and 30m the built-in config.json with the size's fields
changed is written once into the work directory with the built-in tokenizer files, and all three
load it from there (sft with --model.name <dir> --model.debug.random-init true). `--size all`
runs the three sizes one after another, each reported as below, and ends with one table: per
size the parameters, tok/s of sft, the loop and TRL, sft / loop (tok/s), sft / TRL (real tok/s)
and sft / loop peak RSS. Explicit --steps / --warmup / --rows / --seq-len apply to every size.

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
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
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
BUILTIN_MODEL = "builtin:tiny-qwen3"
BUILTIN_DIR = ROOT / "src" / "trainspec" / "trainers" / "builtin" / "tiny-qwen3"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


@dataclass(frozen=True)
class Size:
    """A model to benchmark: the built-in config's fields it changes (none: the built-in itself)
    and the run's defaults."""

    shape: dict
    steps: int
    warmup: int
    rows: int
    seq_len: int


def qwen3_shape(hidden: int, layers: int) -> dict:
    """The built-in's proportions at another width and depth."""
    return {
        "hidden_size": hidden, "intermediate_size": 3 * hidden, "num_hidden_layers": layers,
        "num_attention_heads": hidden // 32, "num_key_value_heads": hidden // 64,
    }  # fmt: skip


RUN_DEFAULTS = ("steps", "warmup", "rows", "seq_len")  # Size fields the command line may set
SIZES = {
    "tiny": Size({}, steps=60, warmup=10, rows=8, seq_len=256),
    "5m": Size(qwen3_shape(256, 6), steps=30, warmup=5, rows=8, seq_len=256),
    "30m": Size(qwen3_shape(512, 9), steps=20, warmup=5, rows=8, seq_len=256),
}
SIZE_COLUMNS = (
    ("size", "<5"), ("parameters", ">11"), ("steps x rows x len", ">18"), ("sft tok/s", ">9"),
    ("loop tok/s", ">10"), ("trl tok/s", ">9"), ("sft/loop", ">8"), ("sft/trl real", ">12"),
    ("RSS sft/loop", ">12"),
)  # fmt: skip
SFT_COLUMNS = (
    ("approach", "<8"), ("tok/s", ">8"), ("x loop", ">7"), ("real tok/s", ">10"),
    ("x loop", ">7"), ("inner tok/s", ">11"), ("peak RSS MiB", ">12"), ("x loop", ">7"),
    ("loss first -> last", ">20"),
)  # fmt: skip


def sft_child_env(threads: int) -> dict:
    return child_env(OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads))


def spec_of(args, workdir: Path, which: str) -> dict:
    return {
        "model": args.model, "steps": args.steps, "rows": args.rows, "seq_len": args.seq_len,
        "seed": SEED, "lr": LR, "weight_decay": WEIGHT_DECAY, "max_norm": MAX_NORM,
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
    ] + model_flags(args.model)  # fmt: skip


def model_flags(model: str) -> list[str]:
    """The demo's model is the built-in; another is a directory with random init from the seed."""
    if model == BUILTIN_MODEL:
        return []
    return ["--model.name", model, "--model.debug.random-init", "true"]


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


def summaries_of(results: dict[str, list[dict]]) -> dict[str, dict]:
    """The median of each approach's runs; sft borrows the loop's real tokens when their first
    losses show the same batches."""
    summaries = {k: median_summary(v) for k, v in results.items() if v}
    loop = summaries.get("loop")
    sft = summaries.get("sft")
    # sft packs exactly the loop's batches (same data module, seed, rows): same real tokens.
    if sft and loop and loop["real_per_step"] is not None:
        same = abs(sft["first_loss"] - loop["first_loss"]) < 1e-4
        if same:
            sft["real_per_step"] = loop["real_per_step"]
            sft["real_tok_s"] = sft["tok_s"] * loop["real_per_step"] / loop["tokens_per_step"]
    return summaries


def report(summaries: dict[str, dict], failures: dict[str, str], args) -> dict:
    """One size's table, per-approach detail and targets; returns the targets' ratios."""
    loop = summaries.get("loop")
    sft = summaries.get("sft")
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
    print(first_losses(summaries))

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
    return {"speed": speed, "ahead": ahead, "rss": rss}


def first_losses(summaries: dict[str, dict]) -> str:
    """The first step's loss of each approach, and how far the others are from sft's."""
    sft = summaries.get("sft")
    parts = []
    for which in APPROACHES:
        s = summaries.get(which)
        if s is None:
            continue
        gap = f" ({s['first_loss'] - sft['first_loss']:+.2e})" if sft and which != "sft" else ""
        parts.append(f"{which} {s['first_loss']:.6f}{gap}")
    return "first loss: " + ", ".join(parts)


def run_size(args, approaches: list[str], env: dict, top: Path) -> dict:
    """All runs of one size (interleaved repeats), then its report."""
    results: dict[str, list[dict]] = {a: [] for a in approaches}
    failures: dict[str, str] = {}
    for repeat in range(args.repeats):
        order = approaches[repeat % len(approaches) :] + approaches[: repeat % len(approaches)]
        for which in order:
            workdir = top / f"run{repeat}"
            workdir.mkdir(parents=True, exist_ok=True)
            print(f"[{repeat + 1}/{args.repeats}] {which} ...", end=" ", flush=True)
            summary, reason = run_one(which, args, workdir, env)
            if summary is None:
                print(reason)
                failures[which] = reason
                continue
            results[which].append(summary)
            print(f"{summary['tok_s']:,.0f} tok/s, {summary['rss_mib']:.0f} MiB", flush=True)
    summaries = summaries_of(results)
    return {"summaries": summaries, **report(summaries, failures, args)}


def model_for(size: str, top: Path) -> str:
    """The name all three load: the built-in for tiny, else a directory written under `top` with
    the built-in config (the size's fields changed) and the built-in tokenizer files."""
    shape = SIZES[size].shape
    if not shape:
        return BUILTIN_MODEL
    directory = top / "model"
    directory.mkdir(parents=True, exist_ok=True)
    config = json.loads((BUILTIN_DIR / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **shape}, indent=2) + "\n")
    for name in TOKENIZER_FILES:
        shutil.copyfile(BUILTIN_DIR / name, directory / name)
    return str(directory)


def parameter_count(model: str) -> int:
    """The parameters of the model `model` names, built on the meta device (no memory, no
    weights); tied embeddings count once."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    directory = BUILTIN_DIR if model == BUILTIN_MODEL else Path(model)
    config = AutoConfig.from_pretrained(str(directory))
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config).num_parameters()


def describe(size: str, model: str, parameters: int) -> str:
    config = json.loads((BUILTIN_DIR / "config.json").read_text()) | SIZES[size].shape
    return (
        f"model {size}: {parameters:,} parameters, hidden {config['hidden_size']} x "
        f"{config['num_hidden_layers']} layers, {config['num_attention_heads']} heads "
        f"({config['num_key_value_heads']} kv), intermediate {config['intermediate_size']}, "
        f"vocab {config['vocab_size']}: {model}"
    )


def settings_of(args, size: str) -> argparse.Namespace:
    """`args` with the size's defaults where the command line gave none."""
    defaults = vars(SIZES[size])
    given = vars(args)
    runs = {key: defaults[key] if given[key] is None else given[key] for key in RUN_DEFAULTS}
    return argparse.Namespace(**{**given, **runs, "size": size})


def print_sizes(figures: dict[str, dict]) -> None:
    """The closing table of `--size all`: one line per size."""
    print("\nby model size")
    rows: list[list[str] | str] = []
    for size, f in figures.items():
        s = f["summaries"]
        sft, loop, trl = (s.get(which) for which in APPROACHES)
        rows.append([
            size, f"{f['parameters']:,}", f["shape"],
            f"{sft['tok_s']:,.0f}" if sft else "-", f"{loop['tok_s']:,.0f}" if loop else "-",
            f"{trl['tok_s']:,.0f}" if trl else "-",
            f"{f['speed']:.3f}x" if f["speed"] else "-",
            f"{f['ahead']:.2f}x" if f["ahead"] else "-", f"{f['rss']:.3f}x" if f["rss"] else "-",
        ])  # fmt: skip
    print_table(SIZE_COLUMNS, rows)
    print(
        "sft/loop: tok/s; sft/trl real: real tok/s (TRL packs without padding: its tok/s are "
        "real); RSS: peak RSS"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size", choices=(*SIZES, "all"), default="tiny",
        help="the model: builtin:tiny-qwen3, random-init Qwen3s of ~5M or ~30M parameters, "
        "or all three one after another",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, help="optimizer steps per run (default: per size)")
    parser.add_argument("--warmup", type=int, help="steps left out of the timing (per size)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved runs (median)")
    parser.add_argument("--skip-trl", action="store_true", help="leave TRL's SFTTrainer out")
    parser.add_argument("--rows", type=int, help="rows per optimizer step (default: per size)")
    parser.add_argument("--seq-len", type=int, help="tokens per packed row (default: per size)")
    default_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2
    parser.add_argument("--threads", type=int, default=default_threads, help="torch threads")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    args = parser.parse_args()
    sizes = list(SIZES) if args.size == "all" else [args.size]
    for size in sizes:
        settings = settings_of(args, size)
        if not 1 <= settings.warmup < settings.steps:
            parser.error(f"need 1 <= --warmup < --steps ({size}: {settings.warmup}, "
                         f"{settings.steps})")  # fmt: skip

    approaches = [a for a in APPROACHES if not (a == "trl" and args.skip_trl)]
    env = sft_child_env(args.threads)
    top = Path(tempfile.mkdtemp(prefix="bench_sft-"))
    figures: dict[str, dict] = {}
    for size in sizes:
        settings = settings_of(args, size)
        settings.model = model_for(size, top / size)
        parameters = parameter_count(settings.model)
        if len(sizes) > 1:
            print(f"\n== {size} ==")
        print(describe(size, settings.model, parameters), flush=True)
        figures[size] = run_size(settings, approaches, env, top / size)
        figures[size].update(
            parameters=parameters,
            shape=f"{settings.steps} x {settings.rows} x {settings.seq_len}",
        )
    if len(sizes) > 1:
        print_sizes(figures)
    if args.keep:
        print(f"\nlogs and run directories: {top}")
    else:
        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
