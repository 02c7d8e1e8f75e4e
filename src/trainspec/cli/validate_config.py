"""validate-config: check trainer config files before a job is queued.

    validate-config configs/rl/qwen3-30b-a3b-math.toml
    validate-config configs/sft/tiny.toml --optim.lr 1e-5 --max-steps 50 --explain --changed
    validate-config --kind sft run.toml --format json
    cat run.toml | validate-config - --kind sft          # `-` is the config on stdin
    validate-config @ run.toml --model @ model.toml      # model.toml's table is [model]
    validate-config run.toml --print --format toml       # the resolved config, as TOML
    validate-config diff a.toml b.toml                   # the settings that differ
    validate-config --help optim                         # the settings of one section

Files merge left to right, then section files (`--model @ model.toml`), then the
`--path.to.key VALUE` overrides. The kind comes from --kind, else from the `#:schema` line at
the top of the first file (else its name: `x.rl.toml`), else from the keys the files set: the
one kind that has them all, named on stderr with the key that decided (kind_choice.py). Each
file is read once, so a pipe works as a file. Errors come in reading order (file, line,
column; flag errors last) in every format; report.py documents the JSON shape.
Exit codes: 0 valid, 1 invalid config, 2 usage, I/O or internal error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

from trainspec.config.kinds import ALL_KINDS
from trainspec.config.loader import Outcome

from . import report
from .args import CommandLine, Parser, UsageError, guarded, split
from .check import CannotCheck, Request, check
from .inputs import STDIN, Inputs
from .kind_choice import cannot_tell, chosen_note, guessed_kind, skipped_reason
from .version import asks_version

PROG = "validate-config"
USAGE = f"{PROG} FILE [FILE ...] [options] [--config.key VALUE ...]  |  {PROG} diff A B"
FORMATS = ("text", "json", "github", "toml")


def build_parser(out: TextIO) -> Parser:
    parser = Parser(
        prog=PROG,
        usage=USAGE,
        description="Check trainspec trainer configs: schema, types and rules, with positions. "
        "FILE may be - (stdin); `--section @ FILE` reads FILE's table as [section].",
        epilog="Any config key is also an override: --optim.lr 1e-5, --max-steps 50, "
        "--model.compile / --no-model.compile. With --kind (or a file), --help lists them all; "
        "--help SECTION lists one section (--help optim). `validate-config diff A B` lists the "
        "settings two configs resolve differently (exit 0 same, 1 different).",
        add_help=False,
        out=out,
    )
    parser.add_help_section("show this help (with SECTION: only that section's settings) and exit")
    parser.add_argument(
        "--kind",
        choices=ALL_KINDS,
        help="config kind (default: the #:schema line, else the one kind its keys fit)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="report format; toml prints the resolved config as TOML (implies --print)",
    )
    parser.add_argument(
        "--print", action="store_true", help="write the resolved config (JSON, or --format toml)"
    )
    parser.add_argument("--strict", action="store_true", help="fail on warnings too")
    parser.add_argument(
        "--explain",
        nargs="?",
        const=True,
        default=False,
        metavar="KEY",
        help="show where every resolved value came from (with KEY: that key or table, with its "
        "default and description)",
    )
    parser.add_argument(
        "--changed",
        action="store_true",
        help="with --explain: only the settings whose value differs from the default",
    )
    parser.add_argument(
        "--each", action="store_true", help="check each file on its own (pre-commit hook mode)"
    )
    return parser


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """The whole command; returns the exit code and never raises."""
    argv = list(argv)
    if asks_version(argv):
        from .version import version_line

        stdout.write(version_line(PROG))
        return 0
    if argv[:1] == ["diff"]:
        from .diff import PROG as DIFF_PROG
        from .diff import USAGE as DIFF_USAGE
        from .diff import run_diff

        return guarded(
            DIFF_PROG, DIFF_USAGE, run_diff, argv[1:], stdout, stderr, _json_errors(argv, stdout)
        )
    return guarded(PROG, USAGE, _run, argv, stdout, stderr, _json_errors(argv, stdout))


def _json_errors(argv: list[str], stdout: TextIO):
    """With --format json, a usage or internal error is a JSON report on stdout too."""
    wants_json = any(
        token == "--format=json" or (token == "--format" and following == "json")
        for token, following in zip(argv, [*argv[1:], None], strict=False)
    )
    if not wants_json:
        return None

    def write(category: str, message: str) -> None:
        error = report.failure_dict(category, message)
        report.write_json(report.failure_report(None, [error]), stdout)

    return write


def _peek_kind(parser: Parser, argv: list[str], inputs: Inputs) -> str | None:
    """--kind, else the kind of the first file, found by a first split without the schema;
    the file is read once, here, and kept for the check."""
    try:
        first = split(parser, argv, None)
    except UsageError:
        return None  # the real split says what is wrong
    if first.options.kind:
        if first.options.kind == "rl" and first.files:
            _refuse_trainer_kind_for_combined(first.files[0], inputs)
        return first.options.kind
    return inputs.kind_of_files(first.files)


def _refuse_trainer_kind_for_combined(path: str, inputs: Inputs) -> None:
    """`--kind rl` is the RL trainer's config; a file with `[trainer]` / `[orchestrator]` tables
    is the `rl` command's combined one, which the reference also calls "rl"."""
    if inputs.combined_kind(path) is None:
        return
    raise UsageError(
        f"{path} holds [trainer] / [orchestrator] tables: it is the combined config of the `rl` "
        "command, kind rl_run; check it with --kind rl_run, or with no --kind "
        "(--kind rl is the RL trainer's own config, what `rl-trainer` reads)"
    )


def _run(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    parser = build_parser(stdout)
    inputs = Inputs()
    line = split(parser, argv, _peek_kind(parser, argv, inputs))
    options = line.options
    if options.help is not False:
        return _help(parser, line, inputs, stdout)
    if options.format == "toml":
        options.print = True
    if options.changed and options.explain is False:
        options.explain = True
    if options.each and options.print:
        raise UsageError("--print writes one resolved config: drop --each, or --print")
    if not line.files and not options.kind:
        raise UsageError(
            "give at least one config FILE (or - for stdin), or --kind rl|sft to check overrides"
        )
    if options.each:
        codes = [_check_one(options, [path], line, inputs, stdout, stderr) for path in line.files]
        return max(codes, default=0)
    return _check_one(options, line.files, line, inputs, stdout, stderr)


def _help(parser: Parser, line: CommandLine, inputs: Inputs, stdout: TextIO) -> int:
    from .help import UnknownSection, config_flags_help, section_help

    options = line.options
    kind = options.kind or inputs.kind_of_files(line.files)
    section = options.help if isinstance(options.help, str) else None
    try:
        if section and kind:
            text = config_flags_help(kind, section=section)  # before any output: it may raise
            stdout.write(f"{kind} config settings under {section} (--key VALUE):\n{text}")
        elif section:
            stdout.write(section_help(section, ALL_KINDS))
        else:
            parser.print_help()
            if kind:
                stdout.write(f"\n{kind} config settings (--key VALUE):\n")
                stdout.write(config_flags_help(kind))
    except UnknownSection as err:
        raise UsageError(str(err)) from None
    return 0


def _check_one(options, files: list[str], line: CommandLine, inputs: Inputs, stdout, stderr) -> int:
    each = files[0] if options.each else None  # --each: the JSON Lines report names its file
    request = Request(files, options.kind, line.sections, line.overrides)
    try:
        outcome = check(request, inputs)
    except CannotCheck as failure:
        stderr.write(failure.text)
        if options.format == "json":
            report.write_json(report.failure_report(options.kind, [failure.error]), stdout, each)
        elif options.format == "github" and failure.file_error is not None:
            report.write_github_failure(failure.file_error, stdout)
        return 2
    guess = guessed_kind(options.kind, files, inputs)
    if outcome is None and options.each:  # a TOML file that is not a trainspec config
        if options.format == "json" and guess is not None:
            skipped = skipped_reason(guess)
            entry = {**report.failure_report(None, []), "valid": True, "skipped": skipped}
            report.write_json(entry, stdout, each)
        return 0
    if outcome is None:
        raise UsageError(cannot_tell(guess, files))
    if guess is not None:  # the keys told the kind: say which, and why
        stderr.write(f"{PROG}: {chosen_note(guess, files, inputs)}\n")
    shown = ["<stdin>" if path == STDIN else path for path in files]
    shown += [f"{flag} @ {path}" for flag, _, path in line.sections]
    label = ", ".join(shown) or "command line"
    return _report(outcome, options, label, each, stdout, stderr)


def _report(
    outcome: Outcome, options, label: str, each: str | None, stdout: TextIO, stderr: TextIO
) -> int:
    failed = not outcome.valid or (options.strict and bool(outcome.warnings))
    if isinstance(options.explain, str):  # a key that names nothing: a usage error, any format
        from .explain import UnknownKey, check_key

        try:
            check_key(options.explain, outcome.kind)
        except UnknownKey as err:
            raise UsageError(f"--explain {options.explain}: {err}") from None
    if options.format == "json":
        report.write_json(report.json_report(outcome, options.strict), stdout, each)
        return 1 if failed else 0
    explained = _explain(outcome, options)  # before any output: a bad KEY is a usage error
    out = stderr if options.print else stdout
    if options.format == "github":
        report.write_github(outcome, out)
    else:
        report.write_text(outcome, label, out, options.strict)
    out.write(explained)
    if options.print and outcome.valid:
        return _print(outcome, options, stdout, stderr) or (1 if failed else 0)
    return 1 if failed else 0


def _explain(outcome: Outcome, options) -> str:
    """The --explain text ("" without --explain or for an invalid config)."""
    if options.explain is False or not outcome.valid:
        return ""
    import io

    from .explain import UnknownKey, write_explain

    key = options.explain if isinstance(options.explain, str) else None
    text = io.StringIO()
    try:
        write_explain(outcome, text, options.changed, key)
    except UnknownKey as err:
        raise UsageError(f"--explain {key}: {err}") from None
    return text.getvalue()


def _print(outcome: Outcome, options, stdout: TextIO, stderr: TextIO) -> int:
    """Write the resolved config; 0, or 2 when it cannot be written in the asked format."""
    if options.format == "toml":
        from .toml_out import NotTOML, resolved_toml

        try:
            stdout.write(resolved_toml(outcome.config, outcome.kind))
        except NotTOML as err:
            stderr.write(f"{PROG}: error: {err}\n    fix: print it with --format json\n")
            return 2
        return 0
    from trainspec.config.loader import dump_json

    assert outcome.config is not None  # printed only when valid
    stdout.write(dump_json(outcome.config) + "\n")
    return 0


def main() -> None:
    # A checker has no use for third-party pydantic plugins; skipping their discovery (an
    # entry-point scan) saves ~5 ms a run. Set PYDANTIC_DISABLE_PLUGINS= to keep them.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))


if __name__ == "__main__":
    main()
