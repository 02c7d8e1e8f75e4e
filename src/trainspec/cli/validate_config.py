"""validate-config: check trainer config files before a job is queued.

    validate-config configs/rl/qwen3-30b-a3b-math.toml
    validate-config base.toml exp.toml --optim.lr 1e-5 --max-steps 50 --explain
    validate-config --kind sft run.toml --format json

Files merge left to right; `--path.to.key VALUE` overrides come last. The kind comes from
--kind, else from the `#:schema` line at the top of the first file.
Exit codes: 0 valid, 1 invalid config, 2 usage or I/O error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

from trainspec.config.kinds import ALL_KINDS
from trainspec.config.loader import Outcome, check_sources
from trainspec.config.sources import ConfigFileError, FlagSource, Source, read_file

from . import report
from .args import (
    CommandLine,
    Parser,
    UsageError,
    guarded,
    kind_from_directive,
    kind_of_file,
    misplaced_directive,
    peek_kind,
    split,
)
from .overrides import ParsedOverrides, parse

PROG = "validate-config"
USAGE = f"{PROG} FILE [FILE ...] [options] [--config.key VALUE ...]"


def build_parser(out: TextIO) -> Parser:
    parser = Parser(
        prog=PROG,
        usage=USAGE,
        description="Check trainspec trainer configs: schema, types and rules, with positions.",
        epilog="Any config key is also an override: --optim.lr 1e-5, --max-steps 50, "
        "--model.compile / --no-model.compile. With --kind (or a file), --help lists them all.",
        add_help=False,
        out=out,
    )
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    parser.add_argument(
        "--kind", choices=ALL_KINDS, help="config kind (default: the #:schema line)"
    )
    parser.add_argument(
        "--format", choices=("text", "json", "github"), default="text", help="report format"
    )
    parser.add_argument("--print", action="store_true", help="write the resolved config as JSON")
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")
    parser.add_argument(
        "--explain", action="store_true", help="show where every resolved value came from"
    )
    parser.add_argument(
        "--each", action="store_true", help="check each file on its own (pre-commit hook mode)"
    )
    return parser


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """The whole command; returns the exit code and never raises."""
    return guarded(PROG, USAGE, _run, argv, stdout, stderr)


def _run(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    parser = build_parser(stdout)
    line = split(parser, argv, peek_kind(argv))
    options = line.options
    if options.help:
        parser.print_help()
        kind = options.kind or (line.files and kind_of_file(line.files[0]))
        if kind:
            from .help import config_flags_help

            stdout.write(f"\n{kind} config settings (--key VALUE):\n")
            stdout.write(config_flags_help(kind))
        return 0
    if not line.files and not options.kind:
        raise UsageError("give at least one config FILE, or --kind rl|sft to check overrides")
    if options.each:
        codes = [_check_one(options, [path], line, stdout, stderr) for path in line.files]
        return max(codes, default=0)
    return _check_one(options, line.files, line, stdout, stderr)


def _check_one(options, files: list[str], line: CommandLine, stdout, stderr) -> int:
    kind = options.kind or (files and kind_of_file(files[0]))
    try:
        sources: list[Source] = [read_file(path) for path in files]
    except ConfigFileError as err:
        stderr.write(f"{err}\n")
        if options.format == "github":
            where = f"file={err.path},line={err.line or 1},col={err.column or 1},"
            stdout.write(f"::error {where}title=trainspec::{err.message}\n")
        return 2
    if not kind and files and (line_no := misplaced_directive(files[0])):
        stderr.write(
            f"{files[0]}:{line_no}:1: error: the #:schema line must be the first line (editors "
            "and validate-config read it only there)\n    fix: move it to line 1\n"
        )
        return 2
    if not kind and options.each:
        return 0  # a TOML file that is not a trainspec config
    if not kind:
        raise UsageError(
            f"cannot tell whether {files[0]} is an rl or sft config: pass --kind rl|sft, or "
            "start the file with a '#:schema ../schema/rl_trainer.json' (or sft_trainer) line"
        )
    for path in files:  # --kind against a file that names another schema: say so, not its keys
        named = kind_from_directive(path)
        if options.kind and named and named != options.kind:
            stderr.write(
                f"{path}:1:1: error: its #:schema line is for {named} configs, but --kind is "
                f"{options.kind}\n    fix: drop --kind {options.kind} (the #:schema line "
                f"decides), or point the #:schema line at the {options.kind} schema\n"
            )
            return 2
    parsed = ParsedOverrides(FlagSource())
    if line.overrides:
        from trainspec.config.schema_info import schema_info

        parsed = parse(line.overrides, schema_info(kind))
    if parsed.errors:
        outcome = Outcome(kind, None, parsed.errors, [], {}, sources)
    else:
        if parsed.source.flags:
            sources.append(parsed.source)
        outcome = check_sources(kind, sources)
    label = ", ".join(files) or "command line"
    return _report(outcome, options, label, stdout, stderr)


def _report(outcome: Outcome, options, label: str, stdout: TextIO, stderr: TextIO) -> int:
    failed = not outcome.valid or (options.strict and bool(outcome.warnings))
    if options.format == "json":
        report.write_json(outcome, stdout, options.strict)
        return 1 if failed else 0
    out = stderr if options.print else stdout
    if options.format == "github":
        report.write_github(outcome, out)
    else:
        report.write_text(outcome, label, out, options.strict)
    if options.explain and outcome.valid:
        report.write_explain(outcome, out)
    if options.print and outcome.valid:
        from trainspec.config.loader import dump_json

        stdout.write(dump_json(outcome.config) + "\n")
    return 1 if failed else 0


def main() -> None:
    # A checker has no use for third-party pydantic plugins; skipping their discovery (an
    # entry-point scan) saves ~5 ms a run. Set PYDANTIC_DISABLE_PLUGINS= to keep them.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))


if __name__ == "__main__":
    main()
