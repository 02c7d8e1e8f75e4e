"""The front every training entrypoint (`sft`, `rl`) shares: it parses the command line with the
same grammar as validate-config, validates, and hands the resolved config to `train`.

    sft configs/sft/tiny.toml --max-steps 20 --optim.lr 3e-4
    sft configs/sft/tiny.toml --dry-run      # print the resolved config as JSON and exit
    sft --help                               # every setting, with its description and default
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from trainspec.config.kinds import Kind
from trainspec.config.loader import check_sources, dump_json
from trainspec.config.schema_info import schema_info
from trainspec.config.sources import ConfigFileError, Source, read_file

from . import report
from .args import Parser, UsageError, split
from .help import config_flags_help
from .overrides import parse

if TYPE_CHECKING:
    from trainspec.config.kinds import TrainerConfig

Train = Callable[["TrainerConfig"], "int | None"]


def build_parser(prog: str, out: TextIO) -> Parser:
    parser = Parser(
        prog=prog,
        usage=f"{prog} [FILE ...] [--dry-run] [--config.key VALUE ...]",
        description=f"Train with a {prog} config: TOML files merged left to right, then overrides.",
        add_help=False,
        out=out,
    )
    parser.add_argument("-h", "--help", action="store_true", help="show every setting and exit")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resolved config as JSON and exit"
    )
    return parser


def run_entrypoint(
    kind: Kind, prog: str, argv: Sequence[str], stdout: TextIO, stderr: TextIO, train: Train
) -> int:
    """Parse, validate and train; returns the exit code (1 invalid config, 2 bad usage/input)."""
    parser = build_parser(prog, stdout)
    try:
        line = split(parser, list(argv), kind)
    except UsageError as err:
        stderr.write(f"usage: {parser.usage}\n{prog}: error: {err}\n")
        return 2
    if line.options.help:
        parser.print_help()
        stdout.write("\nsettings (--key VALUE; defaults in parentheses):\n")
        stdout.write(config_flags_help(kind))
        return 0
    try:
        sources: list[Source] = [read_file(path) for path in line.files]
    except ConfigFileError as err:
        stderr.write(f"{prog}: {err}\n")
        return 2
    parsed = parse(line.overrides, schema_info(kind))
    if parsed.source.flags:
        sources.append(parsed.source)
    outcome = check_sources(kind, sources)
    if parsed.errors:
        outcome.errors[:0] = parsed.errors
        outcome.config = None
    label = ", ".join(line.files) or "command line"
    if not outcome.valid:
        report.write_text(outcome, label, stderr)
        return 1
    for issue in outcome.warnings:
        stderr.write(f"{issue.where + ': ' if issue.where else ''}warning: {issue}\n")
    config = outcome.config
    if line.options.dry_run or getattr(config, "dry_run", False):
        stdout.write(dump_json(config) + "\n")
        return 0
    return train(config) or 0
