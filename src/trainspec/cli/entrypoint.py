"""The front every training entrypoint (`sft`, `rl`) shares: it parses the command line with the
same grammar as validate-config, validates, and hands the resolved config to `train`.

    sft configs/sft/tiny.toml --max-steps 20 --optim.lr 3e-4
    sft configs/sft/tiny.toml --dry-run      # print the resolved config as JSON and exit
    sft configs/sft/tiny.toml --dry-run --format toml   # ... as TOML that validates back
    sft @ configs/sft/tiny.toml --model @ model.toml    # model.toml's table is [model]
    sft --help                               # every setting, with its description and default
    sft --help model                         # only the [model] settings
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from trainspec import closed_pipe
from trainspec.closed_pipe import silence_stdout
from trainspec.config.kinds import Kind
from trainspec.config.loader import dump_json

from . import report
from .args import Parser, UsageError, split
from .check import CannotCheck, Request, check
from .inputs import Inputs

if TYPE_CHECKING:
    from trainspec.config.kinds import TrainerConfig

Train = Callable[["TrainerConfig"], "int | None"]


def build_parser(prog: str, out: TextIO) -> Parser:
    parser = Parser(
        prog=prog,
        usage=f"{prog} [FILE ...] [--dry-run [--format json|toml]] [--config.key VALUE ...]",
        description=f"Train with a {prog} config: TOML files merged left to right, then overrides.",
        add_help=False,
        out=out,
    )
    parser.add_help_section("show every setting (with SECTION: only that section's) and exit")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved config and exit")
    parser.add_argument(
        "--format",
        choices=("json", "toml"),
        default="json",
        help="how --dry-run prints the resolved config (toml validates back to it)",
    )
    return parser


def run_entrypoint(
    kind: Kind, prog: str, argv: Sequence[str], stdout: TextIO, stderr: TextIO, train: Train
) -> int:
    """Parse, validate and train; returns the exit code (1 invalid config, 2 bad usage/input)."""
    parser = build_parser(prog, stdout)
    try:
        line = split(parser, list(argv), kind)
        if line.options.help is not False:
            return _to_pipe(lambda: _help(parser, kind, line.options.help, stdout), stdout)
        outcome = check(Request(line.files, kind, line.sections, line.overrides, prog), Inputs())
    except UsageError as err:
        stderr.write(f"usage: {parser.usage}\n{prog}: error: {err}\n")
        return 2
    except CannotCheck as failure:
        stderr.write(f"{prog}: {failure.text}")
        return 2
    assert outcome is not None  # the kind is given
    label = ", ".join(line.files) or "command line"
    if not outcome.valid:
        report.write_text(outcome, label, stderr)
        return 1
    for issue in outcome.warnings:
        stderr.write(f"{issue.where + ': ' if issue.where else ''}warning: {issue}\n")
    config = outcome.config
    assert config is not None  # valid
    # the rl command's own dry_run writes the configs of its processes (its launch does that)
    own_dry_run = kind != "rl_run" and getattr(config, "dry_run", False)
    dry_run = line.options.dry_run or own_dry_run
    if line.options.format == "toml" and not dry_run:
        stderr.write(
            f"usage: {parser.usage}\n{prog}: error: --format toml is how --dry-run prints the "
            "config: add --dry-run\n"
        )
        return 2
    if dry_run and getattr(config, "slurm", None) is not None:
        # [slurm]: a dry run writes the job script and the configs it runs (the launcher's)
        if line.options.format == "toml":
            stderr.write(
                f"usage: {parser.usage}\n{prog}: error: with [slurm], --dry-run writes the job "
                "script and the resolved config it runs, in JSON: drop --format toml, or add "
                "--no-slurm to print the config\n"
            )
            return 2
        return train(config.model_copy(update={"dry_run": True})) or 0
    if dry_run:
        form = line.options.format
        return _to_pipe(lambda: _dry_run(config, kind, form, prog, stdout, stderr), stdout)
    return train(config) or 0


def _to_pipe(write: Callable[[], int], stdout: TextIO) -> int:
    """Run an output-only step (--help, --dry-run); a reader that went away (`| head`) ends it
    quietly with 141, as SIGPIPE would, instead of a traceback."""
    try:
        code = write()
        stdout.flush()
        return code
    except BrokenPipeError:
        silence_stdout()
        return closed_pipe.EXIT_CODE


def _help(parser: Parser, kind: str, section, stdout: TextIO) -> int:
    from .help import UnknownSection, config_flags_help

    if isinstance(section, str):
        try:
            text = config_flags_help(kind, section=section)
        except UnknownSection as err:
            raise UsageError(str(err)) from None
        stdout.write(f"settings under {section} (--key VALUE; defaults in parentheses):\n{text}")
        return 0
    parser.print_help()
    stdout.write("\nsettings (--key VALUE; defaults in parentheses):\n")
    stdout.write(config_flags_help(kind))
    return 0


def _dry_run(config, kind: Kind, form: str, prog: str, stdout: TextIO, stderr: TextIO) -> int:
    if form == "toml":
        from .toml_out import NotTOML, resolved_toml

        try:
            stdout.write(resolved_toml(config, kind))
        except NotTOML as err:
            stderr.write(f"{prog}: error: {err}\n    fix: print it with --format json\n")
            return 2
        return 0
    stdout.write(dump_json(config) + "\n")
    return 0
