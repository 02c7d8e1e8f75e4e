"""The short `--help` of the commands (sft, rl, rl-trainer, orchestrator, inference, eval): the
usage line, three examples, the config's sections and where every setting is listed; it fits on
one screen. `--help-all` prints every setting, `--help SECTION` one section's.

    $ sft --help
    usage: sft FILE ... [--key VALUE ...] [--print-config [--format json|toml]]
    ...
"""

from __future__ import annotations

import textwrap

from trainspec.config.reference_links import page
from trainspec.config.schema_info import schema_info
from trainspec.kinds import KIND_INFO, Kind

WIDTH = 78  # the short help is wrapped the same on every terminal: it is short

# What each command does, and three command lines that show it (run from a clone of trainspec).
ABOUT: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "sft": (
        "Supervised fine-tuning of a model on chat or text data.",
        [
            ("configs/sft/tiny.toml", "train (two layers, synthetic tokens, on the CPU)"),
            ("configs/sft/tiny.toml --max-steps 20 --optim.lr 3e-4", "override two settings"),
            ("configs/sft/tiny.toml --print-config --format toml", "the resolved config"),
        ],
    ),
    "rl": (
        "RL training: starts the orchestrator and the RL trainer (and vLLM, with [inference]) "
        "from one config, watches both and stops both.",
        [
            ("configs/rl/demo.toml", "train"),
            (
                "configs/rl/demo.toml --max-steps 50 --trainer.optim.lr 1e-4",
                "override two settings",
            ),
            ("configs/rl/demo.toml --dry-run", "write both processes' configs, start nothing"),
        ],
    ),
    "rl-trainer": (
        "The RL trainer on its own (`rl` starts it beside the orchestrator).",
        [
            ("configs/rl/tiny.toml", "train on synthetic rollouts"),
            ("configs/rl/tiny.toml --max-steps 5 --optim.lr 1e-5", "override two settings"),
            ("configs/rl/demo-trainer.toml --print-config", "the resolved config"),
        ],
    ),
    "orchestrator": (
        "The RL orchestrator on its own (`rl` starts it beside the trainer).",
        [
            (
                "configs/orchestrator/demo.toml",
                "run beside rl-trainer configs/rl/demo-trainer.toml",
            ),
            ("configs/orchestrator/demo.toml --max-steps 5", "override a setting"),
            ("configs/orchestrator/demo.toml --print-config --format toml", "the resolved config"),
        ],
    ),
    "inference": (
        "Starts an inference server alone (vLLM; the in-process model server for a built-in "
        "model or without vLLM) and supervises it until Ctrl-C or SIGTERM.",
        [
            ("configs/inference/tiny.toml", "serve the built-in tiny model on 127.0.0.1"),
            ("configs/inference/tiny.toml --server.port 8001", "override a setting"),
            ("configs/inference/tiny.toml --dry-run", "write what it would start, start nothing"),
        ],
    ),
    "evaluate": (
        "Evaluates a model on eval sources through an inference server (one it starts, or "
        "eval.client.base_url), and writes the scores to the run directory.",
        [
            ("configs/eval/tiny.toml", "evaluate the built-in tiny model on a built-in task"),
            (
                "configs/eval/tiny.toml --eval.client.base-url http://127.0.0.1:8000/v1",
                "through a server you started (`inference`)",
            ),
            ("configs/eval/tiny.toml --print-config --format toml", "the resolved config"),
        ],
    ),
}


def has_dry_run(kind: Kind) -> bool:
    """Whether `kind`'s config has its own dry_run setting (sft, rl); the commands of the
    others take `--dry-run` as another name of --print-config."""
    return ("dry_run",) in schema_info(kind).keys


def usage_line(prog: str) -> str:
    return f"{prog} FILE ... [--key VALUE ...] [--print-config [--format json|toml]]"


def dry_run_text(kind: Kind) -> str:
    if kind == "rl_run":
        return "dry_run = true: write both processes' configs and rl-launch.json, start nothing"
    if kind == "inference":
        return (
            "dry_run = true: write inference-launch.json (what it would start), start nothing "
            "(with [slurm]: write the job script)"
        )
    if has_dry_run(kind):
        return (
            "dry_run = true: print the resolved config and exit (with [slurm]: write the job "
            "script)"
        )
    return "the same as --print-config"


def description(kind: Kind, prog: str) -> str:
    """What the command does and how it reads its config (the help's first paragraph)."""
    about = ABOUT.get(prog, ABOUT[KIND_INFO[kind].command])[0]
    return (
        f"{about} Reads TOML files merged left to right, then --key VALUE overrides of any "
        "setting, in kebab-case or snake_case (--max-steps 20 is --max_steps 20)."
    )


def short_help(kind: Kind, prog: str) -> str:
    """Usage, three examples, the options, the sections and where every setting is listed."""
    examples = ABOUT.get(prog, ABOUT[KIND_INFO[kind].command])[1]
    lines = [f"usage: {usage_line(prog)}", ""]
    lines += textwrap.wrap(description(kind, prog), WIDTH)
    lines += ["", "examples:"]
    for command, what in examples:
        lines += [f"  {prog} {command}", f"      {what}"]
    options = [
        ("-h, --help [SECTION]", "this help; with SECTION, that section's settings"),
        ("--help-all", "every setting, with its description and default"),
        ("--print-config", "print the resolved config and exit"),
        ("--format toml", "--print-config prints TOML (default: json)"),
        ("--dry-run", dry_run_text(kind)),
        ("--version", "trainspec's version and what it runs on"),
    ]
    lines += ["", "options:"]
    for flag, text in options:
        lines += textwrap.wrap(f"  {flag:<22}{text}", WIDTH, subsequent_indent=" " * 24)
    info = schema_info(kind)
    tops = [path[0] for path in info.keys if len(path) == 1 and not info.keys[path].renamed_to]
    tables = [name for name in tops if info.keys[(name,)].is_table]
    settings = [name.replace("_", "-") for name in tops if not info.keys[(name,)].is_table]
    lines += ["", f"sections ({prog} --help SECTION lists one):"]
    lines += textwrap.wrap(", ".join(tables), WIDTH, initial_indent="  ", subsequent_indent="  ")
    lines += textwrap.wrap(
        "top-level settings: " + ", ".join(f"--{name}" for name in settings),
        WIDTH,
        break_on_hyphens=False,
        initial_indent="  ",
        subsequent_indent="    ",
    )
    lines += ["", f"every setting: {prog} --help-all", f"the config reference: {page(kind)}"]
    return "\n".join(lines) + "\n"
