"""The front every training entrypoint (`sft`, `rl`, `rl-trainer`, `orchestrator`) shares: it
parses the command line with the same grammar as validate-config, validates, and hands the
resolved config to `train`.

    sft configs/sft/tiny.toml --max-steps 20 --optim.lr 3e-4
    sft configs/sft/tiny.toml --print-config            # the resolved config as JSON, then exit
    sft configs/sft/tiny.toml --print-config --format toml   # ... as TOML that validates back
    sft configs/sft/tiny.toml --dry-run     # dry_run = true (--dry_run too): sft prints the
                                            # config ([slurm]: writes the job); rl writes its
                                            # processes' configs and starts nothing
    sft @ configs/sft/tiny.toml --model @ model.toml    # model.toml's table is [model]
    sft --help                               # usage, examples, the sections (one screen)
    sft --help model                         # only the [model] settings
    sft --help-all                           # every setting, with its description and default
    sft --version                            # trainspec's version and what it runs on

`--dry-run` and `--dry_run` are one setting, the config's dry_run, as every other flag's two
spellings are; the commands whose config has no dry_run (rl-trainer, orchestrator) take it as
--print-config. A command without a config file answers with its usage (exit 2): it never
trains the defaults' model (--print-config without a file prints the defaults).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from trainspec import closed_pipe
from trainspec.closed_pipe import silence_stdout
from trainspec.config.kinds import Kind
from trainspec.config.loader import dump_json
from trainspec.config.locate import remember
from trainspec.kinds import KIND_INFO

from . import report
from .args import Parser, UsageError, split
from .check import CannotCheck, Request, check
from .inputs import Inputs
from .usage import description, has_dry_run, short_help, usage_line
from .version import asks_version, version_line

if TYPE_CHECKING:
    from trainspec.config.kinds import TrainerConfig

Train = Callable[["TrainerConfig"], "int | None"]


def build_parser(prog: str, out: TextIO, kind: Kind | None = None) -> Parser:
    parser = Parser(
        prog=prog,
        usage=usage_line(prog),
        description=description(kind, prog) if kind is not None else None,
        add_help=False,
        out=out,
    )
    parser.add_help_section("usage and the sections (with SECTION: that section's settings)")
    parser.add_argument(
        "--help-all", action="store_true", help="every setting, with its description and default"
    )
    names = ["--print-config"]
    if kind is not None and not has_dry_run(kind):  # no dry_run setting: its dry run prints
        names += ["--dry-run", "--dry_run"]
    parser.add_argument(
        *names, dest="print_config", action="store_true", help="print the resolved config and exit"
    )
    parser.add_argument(
        "--format",
        choices=("json", "toml"),
        default="json",
        help="how --print-config prints the resolved config (toml validates back to it)",
    )
    parser.add_argument(
        "--version", action="store_true", help="trainspec's version and what it runs on"
    )
    return parser


def run_entrypoint(
    kind: Kind, prog: str, argv: Sequence[str], stdout: TextIO, stderr: TextIO, train: Train
) -> int:
    """Parse, validate and train; returns the exit code (1 invalid config, 2 bad usage/input)."""
    if asks_version(argv):
        stdout.write(version_line(prog))
        return 0
    parser = build_parser(prog, stdout, kind)
    try:
        line = split(parser, list(argv), kind)
        options = line.options
        if options.help is not False or options.help_all:
            return _to_pipe(lambda: _help(parser, kind, prog, options, stdout), stdout)
        if not argv:  # a bare command: its usage, not a run of the defaults (a hub download)
            stderr.write(short_help(kind, prog))
            stderr.write(
                f"\n{prog}: error: no config: give a file ({prog} FILE.toml), - to read one from "
                f"stdin, or settings (`{prog} --print-config` prints the defaults)\n"
            )
            return 2
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
        report.write_text(outcome, label, stderr, name=prog)
        return 1
    for issue in outcome.warnings:
        stderr.write(f"{issue.where + ': ' if issue.where else ''}warning: {issue}\n")
    config = outcome.config
    assert config is not None  # valid
    remember(outcome.sources, "orchestrator" if kind == "orchestrator" else "")
    try:  # what the command refuses at start says where it was written (config/locate.py)
        return _start(config, kind, prog, options, parser, stdout, stderr, train)
    finally:
        remember([])  # a caller that goes on (a test, a notebook) starts from nothing


def _start(config, kind, prog, options, parser, stdout, stderr, train: Train) -> int:
    """Print the config (--print-config, or the dry run of sft), hand a dry run to the
    command (rl; a [slurm] job), or train."""
    dry_run = getattr(config, "dry_run", False)
    slurm = getattr(config, "slurm", None) is not None
    # the dry run of rl, inference and a [slurm] job is their launch's; sft's prints the config
    launches = KIND_INFO[kind].launch_dry_run or slurm
    prints = options.print_config or (dry_run and not launches)
    if options.format == "toml" and not prints:
        why = "--format toml is how --print-config prints the config: add --print-config"
        if dry_run and slurm:
            why = (
                "with [slurm], the dry run writes the job script and the resolved config it "
                "runs, in JSON: drop --format toml, or print the config with --print-config "
                "(or add --no-slurm)"
            )
        elif dry_run:
            why = (
                "the dry run writes both processes' configs in JSON: drop --format toml, or "
                "print the config with --print-config"
            )
        stderr.write(f"usage: {parser.usage}\n{prog}: error: {why}\n")
        return 2
    if prints:
        form = options.format
        return _to_pipe(lambda: _print(config, kind, form, prog, stdout, stderr), stdout)
    return train(config) or 0


def _to_pipe(write: Callable[[], int], stdout: TextIO) -> int:
    """Run an output-only step (--help, --print-config); a reader that went away (`| head`)
    ends it quietly with 141, as SIGPIPE would, instead of a traceback."""
    try:
        code = write()
        stdout.flush()
        return code
    except BrokenPipeError:
        silence_stdout()
        return closed_pipe.EXIT_CODE


def _help(parser: Parser, kind: Kind, prog: str, options, stdout: TextIO) -> int:
    from trainspec.config.reference_links import link

    from .help import UnknownSection, config_flags_help, section_path

    section = options.help
    if section == "all":  # no setting or table is called that
        raise UsageError(f"every setting is listed by --help-all: {prog} --help-all")
    if isinstance(section, str):
        try:
            text = config_flags_help(kind, section=section, label=prog)
        except UnknownSection as err:
            raise UsageError(str(err)) from None
        stdout.write(f"settings under {section} (--key VALUE; defaults in parentheses):\n{text}")
        stdout.write(f"the config reference: {link(kind, section_path(section))}\n")
        return 0
    if not options.help_all:
        stdout.write(short_help(kind, prog))
        return 0
    parser.print_help()
    stdout.write("\nsettings (--key VALUE; defaults in parentheses):\n")
    stdout.write(config_flags_help(kind))
    return 0


def _print(config, kind: Kind, form: str, prog: str, stdout: TextIO, stderr: TextIO) -> int:
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
