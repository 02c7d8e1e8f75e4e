"""The command line every trainspec entrypoint shares: config files, the entrypoint's own
options, and config overrides, in any order."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from trainspec import closed_pipe
from trainspec.closed_pipe import silence_stdout
from trainspec.config.kinds import ALL_KINDS

from .inputs import STDIN


class UsageError(Exception):
    """Bad command line: reported with the usage line, exit code 2."""


# How a command reports a failure that is not a verdict on a config: (category, message);
# validate-config's JSON mode prints it as a JSON report too.
ErrorReporter = Callable[[str, str], None]


def guarded(
    prog: str,
    usage: str,
    body: Callable[[list[str], TextIO, TextIO], int],
    argv: Sequence[str],
    stdout: TextIO,
    stderr: TextIO,
    report_error: ErrorReporter | None = None,
) -> int:
    """Run a command's `body`, turning every failure into a message and an exit code: usage
    errors exit 2 with the usage line, a closed pipe exits 141 quietly (as if killed by SIGPIPE:
    the output was cut short, which says nothing about the config), and a bug prints one line
    and exits 2 (never a traceback). `report_error` also gets usage errors and bugs (the JSON
    report). stdout is flushed here, so a reader that went away is noticed here too, not in
    the interpreter's last flush."""
    try:
        code = body(list(argv), stdout, stderr)
        stdout.flush()
        return code
    except UsageError as err:
        stderr.write(f"usage: {usage}\n{prog}: error: {err}\n")
        if report_error is not None:
            report_error("usage", str(err))
        return 2
    except BrokenPipeError:  # the reader went away (`| head`): not a verdict on the config
        silence_stdout()
        return closed_pipe.EXIT_CODE
    except Exception as err:  # noqa: BLE001 - the one place that turns bugs into a report
        message = f"internal error: {type(err).__name__}: {err} (please report it)"
        stderr.write(f"{prog}: {message}\n")
        if report_error is not None:
            with contextlib.suppress(Exception):  # the report of a bug must not raise again
                report_error("internal", message)
        return 2


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, measuring the terminal only when help is printed: argparse
    builds formatters while options are added, and asking for the width imports shutil
    (~3 ms of a check that prints no help)."""

    def __init__(self, prog: str, width: int | None = None, **kwargs) -> None:
        super().__init__(prog, width=width or _terminal_width(), **kwargs)


def _terminal_width() -> int:
    """What argparse would use (shutil.get_terminal_size: $COLUMNS, else stdout's terminal,
    else 80), less 2."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(1).columns
        except OSError:
            columns = 80
    return max(columns - 2, 11)


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so `run()` owns its streams and exit codes."""

    def __init__(self, *args, out: TextIO, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self.out = out

    def add_help_section(self, help: str) -> None:
        """`-h` / `--help [SECTION]`: the commands print their own help, one section or all."""
        self.add_argument(
            "-h", "--help", nargs="?", const=True, default=False, metavar="SECTION", help=help
        )

    def error(self, message: str):
        raise UsageError(message)

    def print_help(self, file=None) -> None:
        super().print_help(self.out)


@dataclass(slots=True)
class CommandLine:
    options: argparse.Namespace
    files: list[str] = field(default_factory=list)
    overrides: list[tuple[str, str | None]] = field(default_factory=list)
    # section files, `--model @ model.toml`: (flag, its dotted path, file)
    sections: list[tuple[str, str, str]] = field(default_factory=list)


def _refuse_mistyped_option(name: str, option_flags: set[str], info) -> None:
    """`--fromat` is a mistyped option, not a config setting: a usage error naming the option
    (a flag that is a real setting, or closer to one, stays an override)."""
    import difflib

    options = sorted(f for f in option_flags if f.startswith("--"))
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.75)
    if not close:
        return
    setting = name[2:].replace("-", "_")
    if info is not None and any(".".join(path) == setting for path in info.keys):
        return
    raise UsageError(f"unknown option {name}; did you mean {close[0]}?")


# What an option with an optional value (`--help SECTION`, `--explain KEY`) takes as its value:
# a dotted key, never a file (a path, `x.toml`, `-`, `@x`) or another option.
OPTIONAL_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*")


def _is_optional_value(token: str | None) -> bool:
    return (
        token is not None and bool(OPTIONAL_VALUE.fullmatch(token)) and not token.endswith(".toml")
    )


def split(parser: Parser, argv: Sequence[str], kind_hint: str | None) -> CommandLine:
    """Separate the entrypoint's options, the files and the `--config.path value` overrides.

    `-` is the config read from stdin; `@ FILE` and `@FILE` are files (the reference's habit);
    `--section @ FILE` is a section file (FILE's table becomes [section]).
    """
    option_flags = {s for action in parser._actions for s in action.option_strings}
    takes_arg = {
        s for action in parser._actions if action.nargs != 0 for s in action.option_strings
    }
    optional = {
        s for action in parser._actions if action.nargs == "?" for s in action.option_strings
    }
    info = None
    if kind_hint in ALL_KINDS and any(
        t.startswith("--") and t.split("=")[0] not in option_flags for t in argv
    ):
        from trainspec.config.schema_info import schema_info  # only for overrides

        info = schema_info(kind_hint)
    known: list[str] = []
    line = CommandLine(argparse.Namespace())
    tokens = list(argv)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        name = token.split("=", 1)[0]
        if token == "@":  # the reference's `sft @ file.toml`: the next token is a file
            index += 1
            continue
        if token == STDIN:
            line.files.append(token)
        elif token.startswith("@") and len(token) > 1:
            line.files.append(token[1:])
        elif name in optional:  # `--help`, `--help optim`, `--explain`, `--explain optim.lr`
            known.append(token)
            if "=" not in token and _is_optional_value(following):
                known.append(following)  # type: ignore[arg-type]
                index += 1
        elif name in option_flags or (token.startswith("-") and not token.startswith("--")):
            known.append(token)
            if name in takes_arg and "=" not in token and following is not None:
                known.append(following)
                index += 1
        elif token.startswith("--") and len(token) > 2:
            from .overrides import takes_value  # the override grammar: loaded when one is given

            _refuse_mistyped_option(name, option_flags, info)
            # `--model @ FILE` (a lone @ is never a value), `--model @FILE` for a table
            at = following == "@" or ((following or "").startswith("@") and _table(token, info))
            if "=" not in token and at:
                index += _section_file(line, token, tokens, index)
                continue
            if takes_value(token, following, info):
                line.overrides.append((token, following))
                index += 1
            else:
                line.overrides.append((token, None))
        else:
            line.files.append(token)
        index += 1
    line.options = parser.parse_args(known)
    return line


def _table(flag: str, info) -> bool:
    """Whether `flag` may name a table (so `--flag @ FILE` is a section file, not a value)."""
    from .overrides import flag_path

    if info is None:
        return True
    key = info.keys.get(tuple(flag_path(flag)[1].split(".")))
    return key is None or key.is_table


def _section_file(line: CommandLine, flag: str, tokens: list[str], index: int) -> int:
    """Record `--section @ FILE` / `--section @FILE`; returns how many tokens it took."""
    from .overrides import flag_path

    following = tokens[index + 1]
    path = following[1:] if following != "@" else None
    taken = 2
    if path is None and index + 2 < len(tokens) and not tokens[index + 2].startswith("--"):
        path, taken = tokens[index + 2], 3
    negated, dotted = flag_path(flag)
    if not path or negated:
        raise UsageError(
            f"{flag} @ needs a file whose table becomes [{dotted}]: write {flag} @ FILE.toml"
        )
    line.sections.append((flag, dotted, path))
    return taken
