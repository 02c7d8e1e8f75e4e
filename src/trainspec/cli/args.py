"""The command line every trainspec entrypoint shares: config files, the entrypoint's own
options, and config overrides, in any order."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from trainspec.config.bundle import SCHEMA_NAMES
from trainspec.config.kinds import ALL_KINDS

from .overrides import takes_value


class UsageError(Exception):
    """Bad command line: reported with the usage line, exit code 2."""


def guarded(
    prog: str,
    usage: str,
    body: Callable[[list[str], TextIO, TextIO], int],
    argv: Sequence[str],
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    """Run a command's `body`, turning every failure into a message and an exit code: usage
    errors exit 2 with the usage line, a closed pipe exits 141 quietly (as if killed by SIGPIPE:
    the output was cut short, which says nothing about the config), and a bug prints one line
    and exits 2 (never a traceback)."""
    try:
        return body(list(argv), stdout, stderr)
    except UsageError as err:
        stderr.write(f"usage: {usage}\n{prog}: error: {err}\n")
        return 2
    except BrokenPipeError:  # the reader went away (`| head`): not a verdict on the config
        _silence_stdout()
        return 128 + 13  # what a shell reports for a process ended by SIGPIPE
    except Exception as err:  # noqa: BLE001 - the one place that turns bugs into a report
        stderr.write(f"{prog}: internal error: {type(err).__name__}: {err} (please report it)\n")
        return 2


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail a second time."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so `run()` owns its streams and exit codes."""

    def __init__(self, *args, out: TextIO, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.out = out

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)

    def print_help(self, file=None) -> None:
        super().print_help(self.out)


@dataclass(slots=True)
class CommandLine:
    options: argparse.Namespace
    files: list[str] = field(default_factory=list)
    overrides: list[tuple[str, str | None]] = field(default_factory=list)


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


def split(parser: Parser, argv: Sequence[str], kind_hint: str | None) -> CommandLine:
    """Separate the entrypoint's options, the files and the `--config.path value` overrides."""
    option_flags = {s for action in parser._actions for s in action.option_strings}
    takes_arg = {
        s for action in parser._actions if action.nargs != 0 for s in action.option_strings
    }
    info = None
    if kind_hint in ALL_KINDS and any(
        t.startswith("--") and t.split("=")[0] not in option_flags for t in argv
    ):
        from trainspec.config.schema_info import schema_info  # only for overrides

        info = schema_info(kind_hint)
    known: list[str] = []
    files: list[str] = []
    overrides: list[tuple[str, str | None]] = []
    tokens = list(argv)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        name = token.split("=", 1)[0]
        if token == "@":  # the reference's `sft @ file.toml`: the next token is a file
            index += 1
            continue
        if token.startswith("@") and len(token) > 1:
            files.append(token[1:])
        elif name in option_flags or (token.startswith("-") and not token.startswith("--")):
            known.append(token)
            if name in takes_arg and "=" not in token and following is not None:
                known.append(following)
                index += 1
        elif token.startswith("--") and len(token) > 2:
            _refuse_mistyped_option(name, option_flags, info)
            if takes_value(token, following, info):
                overrides.append((token, following))
                index += 1
            else:
                overrides.append((token, None))
        else:
            files.append(token)
        index += 1
    return CommandLine(parser.parse_args(known), files, overrides)


def kind_from_directive(path: str) -> str | None:
    """The kind named by a `#:schema .../rl_trainer.json` first line, if any."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(4096).decode("utf-8", "replace").lstrip("\ufeff").strip()
    except OSError:
        return None
    if not first.startswith("#:schema"):
        return None
    stem = Path(first.removeprefix("#:schema").strip()).stem
    for kind, name in SCHEMA_NAMES.items():
        if stem == name:
            return kind
    return None


# File names that editors associate with a schema (.taplo.toml, tombi.toml, .vscode)
NAME_SUFFIXES = {
    ".rl.toml": "rl",
    ".sft.toml": "sft",
    ".orchestrator.toml": "orchestrator",
    ".rl-run.toml": "rl_run",
}


def kind_of_file(path: str) -> str | None:
    """The kind of a config file: its `#:schema` first line, else the file-name association
    editors use (`x.rl.toml`, `x.sft.toml`, `x.orchestrator.toml`, `x.rl-run.toml`)."""
    named = kind_from_directive(path)
    if named:
        return named
    return next((k for suffix, k in NAME_SUFFIXES.items() if path.endswith(suffix)), None)


def misplaced_directive(path: str) -> int | None:
    """The line of a `#:schema` directive that is not on line 1 (editors ignore it there)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace").splitlines()[:10]
    except OSError:
        return None
    for number, text in enumerate(head[1:], start=2):
        if text.strip().startswith("#:schema"):
            return number
    return None


def peek_kind(argv: Sequence[str]) -> str | None:
    """--kind from argv, else the first file's #:schema directive (before full parsing)."""
    for index, token in enumerate(argv):
        if token == "--kind" and index + 1 < len(argv):
            return argv[index + 1]
        if token.startswith("--kind="):
            return token.split("=", 1)[1]
    for token in argv:
        token = token.removeprefix("@")
        if not token.startswith("-") and token.endswith(".toml"):
            return kind_of_file(token)
    return None
