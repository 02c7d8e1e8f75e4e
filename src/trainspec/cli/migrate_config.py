"""migrate-config: rename the keys a schema has renamed, in trainer config files, in place.

    migrate-config configs/sft/qwen3-0.6b-reverse-text.toml
    migrate-config --check configs/rl/*.toml configs/sft/*.toml     # CI: fail if any is stale
    migrate-config --kind sft run.toml

The renames come from the schema (the `x-trainspec-renamed` maps of schema/*.json, which the
bundle turns into deprecated keys with `x-trainspec-renamed-to`); nothing is hard-coded here.
Only the renamed keys change: comments, blank lines, key order, quoting, layout and a UTF-8
byte-order mark are kept, whether a table is written as a [header], with dotted keys or inline
(migrate_rewrite.py). A table that already has the new key is a conflict: that file is left as
it is. The kind comes from --kind, else from the `#:schema` line at the top of each file, else (a
file with `[trainer]` or `[orchestrator]` tables, as the reference's rl.toml) rl_run.

A file is replaced as a careful editor saves (safe_write.py): the new text goes to a temporary
`.NAME.migrate-PID.tmp` beside it, with the file's mode, owner and group, is synced to disk and
renamed over the file, and the directory is synced. If the file changed while it was being
rewritten (another editor saved it), nothing is written and the run says to run it again. A run
killed before its rename leaves its temporary; the next run removes it (not with --check, which
writes nothing) and says so.

Exit codes: 0 done (or nothing to do); 1 a file left unchanged for a reason the next run can
settle (a conflict to resolve by hand, or the file changed while it was being rewritten: run
again), or with --check anything to rename; 2 usage, I/O or TOML error, or a file that cannot be
rewritten without changing more than its renamed keys or its owner.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from trainspec.config.kinds import ALL_KINDS
from trainspec.config.positions import PositionIndex, index_positions
from trainspec.config.sources import ConfigFileError, read_file
from trainspec.issues import dotted

from . import safe_write
from .args import Parser, UsageError, guarded
from .inputs import combined_kind, kind_of_name, kind_of_text
from .migrate_rewrite import (
    CannotRewrite,
    Conflict,
    Rename,
    RenameTable,
    TablePath,
    migrate_text,
    plan,
    renames_for,
    rewrite,
)
from .safe_write import CannotKeepOwner, FileChanged, NotSynced, Version
from .version import asks_version, version_line

# The rewriting names stay importable from here, where they lived before migrate_rewrite.py.
__all__ = [
    "CannotRewrite",
    "Conflict",
    "Rename",
    "RenameTable",
    "main",
    "migrate_text",
    "plan",
    "rewrite",
    "renames_for",
    "run",
]

PROG = "migrate-config"
USAGE = f"{PROG} FILE [FILE ...] [--kind KIND] [--check]"
BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class Totals:
    files: int = 0
    changed_files: int = 0
    renames: int = 0
    conflicts: int = 0
    changed_meanwhile: int = 0  # files another program wrote while they were being rewritten
    errors: int = 0


def build_parser(out: TextIO) -> Parser:
    parser = Parser(
        prog=PROG,
        usage=USAGE,
        description="Rename the config keys the schema has renamed, in place, keeping comments "
        "and layout.",
        epilog="Exit codes: 0 done or nothing to do, 1 a conflict or a file that changed while "
        "it was being rewritten (or, with --check, anything to rename), 2 usage, I/O or TOML "
        "error.",
        add_help=False,
        out=out,
    )
    parser.add_argument("files", nargs="*", metavar="FILE", help="TOML config files to migrate")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    parser.add_argument(
        "--kind", choices=ALL_KINDS, help="config kind (default: the #:schema line)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; print what would change and exit 1 if anything would (for CI)",
    )
    return parser


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """The whole command; returns the exit code and never raises."""
    if asks_version(argv):
        stdout.write(version_line(PROG))
        return 0
    return guarded(PROG, USAGE, _run, argv, stdout, stderr)


def _run(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    parser = build_parser(stdout)
    options = parser.parse_args(argv)
    if options.help:
        parser.print_help()
        return 0
    if not options.files:
        raise UsageError("give at least one config FILE")
    totals = Totals()
    code = 0
    for path in options.files:
        code = max(code, _migrate(path, options.kind, options.check, totals, stdout, stderr))
    stdout.write(_summary(totals, options.check))
    return code


def _migrate(path: str, kind: str | None, check: bool, totals: Totals, stdout, stderr) -> int:
    totals.files += 1
    if not check:
        for name in safe_write.remove_stale(path):
            stdout.write(f"{path}: removed {name}, left by a {PROG} run that was killed\n")
    before = None if check else safe_write.version(path)
    try:
        source = read_file(path)
    except ConfigFileError as err:
        totals.errors += 1
        stderr.write(f"{err}\n")
        return 2
    kind = kind or kind_of_text(source.text) or kind_of_name(path) or combined_kind(source.data)
    if not kind:
        totals.errors += 1
        stderr.write(
            f"{path}: cannot tell which kind of config this is: pass --kind (rl, sft, "
            "orchestrator, rl_run), or start the file with a '#:schema "
            "../schema/rl_trainer.json' (or sft_trainer, ...) line\n"
        )
        return 2
    text = source.text.decode("utf-8")
    try:
        new_text, renames, conflicts = migrate_text(text, source.data, renames_for(kind))
    except CannotRewrite as err:
        totals.errors += 1
        stderr.write(f"{path}: cannot rename its keys safely, so it is left as it is: {err}\n")
        return 2
    if not renames and not conflicts:
        return 0
    index = index_positions(source.text)
    if conflicts:
        totals.conflicts += 1
        for conflict in conflicts:
            stdout.write(_conflict_line(path, conflict, index))
        return 1
    code = 1
    if not check:
        written, code = _save(path, before, source.text, new_text, totals, stderr)
        if not written:
            return code
    totals.renames += len(renames)
    totals.changed_files += 1
    verb = "would rename " if check else ""
    for rename in renames:
        stdout.write(f"{path}:{_line(index, rename.path)}: {verb}{rename.describe()}\n")
    return code


def _line(index: PositionIndex, path: TablePath) -> int:
    found = index.keys.get(path)
    return found.line if found else 1


def _conflict_line(path: str, conflict: Conflict, index: PositionIndex) -> str:
    old, other = (*conflict.table, conflict.old), (*conflict.table, conflict.other)
    old_line, other_line = _line(index, old), _line(index, other)
    new = dotted((*conflict.table, conflict.new))
    if conflict.other == conflict.new:
        clash = f"would be renamed to {new}, which is already set (line {other_line})"
    else:
        clash = f"and {dotted(other)} (line {other_line}) would both become {new}"
    return (
        f"{path}:{old_line}: conflict: {dotted(old)} (line {old_line}) {clash}; keep one of "
        f"{dotted(old)} and {dotted(other)} and delete the other (file left unchanged)\n"
    )


def _save(
    path: str, before: Version | None, read: bytes, text: str, totals: Totals, stderr
) -> tuple[bool, int]:
    """Write the migrated text over the file and report what went wrong: (whether the renames
    are in the file now, the file's exit code)."""
    try:
        _write(path, before, read, text)
    except FileChanged:
        totals.changed_meanwhile += 1
        stderr.write(
            f"{path}: changed while {PROG} was rewriting it; nothing was written: run {PROG} "
            "again\n"
        )
        return False, 1
    except CannotKeepOwner as err:
        totals.errors += 1
        stderr.write(
            f"{path}: cannot keep its owner and group (uid {err.uid}, gid {err.gid}): "
            f"{err.strerror}; nothing was written: run {PROG} as that user or as root\n"
        )
        return False, 2
    except NotSynced as err:
        stderr.write(
            f"{path}: renamed its keys, but could not sync its directory to disk ({err.strerror})"
            ": the change may be lost if the machine crashes now\n"
        )
        return True, 2
    except OSError as err:
        totals.errors += 1
        stderr.write(f"{path}: cannot write it: {(err.strerror or str(err)).lower()}\n")
        return False, 2
    return True, 0


def _write(path: str, before: Version | None, read: bytes, text: str) -> None:
    """Replace the file with `text` if it is still the version `before` (stat'ed before it was
    read) holding the bytes that were read (`read`, less a byte-order mark, which is kept);
    raise FileChanged if it is not."""
    current = safe_write.unchanged(path, before)
    if not current.data.endswith(read):
        raise FileChanged(path)
    mark = current.data[: len(current.data) - len(read)]
    if mark not in (b"", BOM):
        raise FileChanged(path)
    safe_write.replace(current, mark + text.encode("utf-8"))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _summary(totals: Totals, check: bool) -> str:
    files = _plural(totals.files, "file")
    if totals.renames and check:
        head = (
            f"would rename {_plural(totals.renames, 'key')} in {totals.changed_files} of "
            f"{files}; run {PROG} without --check to apply"
        )
    elif totals.renames:
        head = f"renamed {_plural(totals.renames, 'key')} in {totals.changed_files} of {files}"
    elif totals.errors or totals.conflicts or totals.changed_meanwhile:
        head = "nothing renamed"
    else:
        head = f"nothing to rename in {files}"
    if totals.conflicts:
        head += f"; {_plural(totals.conflicts, 'file')} with conflicts left unchanged"
    if totals.changed_meanwhile:
        count = _plural(totals.changed_meanwhile, "file")
        head += f"; {count} changed meanwhile, left unchanged (run {PROG} again)"
    if totals.errors:
        head += f"; {_plural(totals.errors, 'file')} not migrated (see the errors above)"
    return f"{PROG}: {head}\n"


def main() -> None:
    """The console script. SIGTERM (a `kill`, a CI timeout) and Ctrl-C unwind like an error, so
    a temporary being written is removed; only SIGKILL leaves one, for the next run."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        code = run(sys.argv[1:], sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    sys.exit(code)


def _exit_on_signal(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    main()
