"""The config files of one command line, each read once, and the kind each one names.

A file is read and parsed once (`read_file`), and its kind is sniffed from the bytes that were
read (the `#:schema` line), never by opening the file a second time: a pipe (`-`, `/dev/stdin`,
`<(...)`) can be read only once, so a second read would lose what the first one took. A file
that names no kind is told by its keys (config/kind_inference.py), from what was read.

`--model @ model.toml` is a section file: its table becomes `[model]`, and errors inside it are
located at model.toml:line:col.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainspec.config.merge import unflatten
from trainspec.config.sources import ConfigFileError, FileSource, read_file, schema_directive
from trainspec.kinds import Kind, kind_of_schema

if TYPE_CHECKING:
    from trainspec.config.kind_inference import KindGuess
    from trainspec.config.positions import Position

STDIN = "-"  # the config read from stdin (read_file reads it once, whatever asks again)

# File names that editors associate with a schema (.taplo.toml, tombi.toml, .vscode)
NAME_SUFFIXES: dict[str, Kind] = {
    ".rl.toml": "rl",
    ".sft.toml": "sft",
    ".orchestrator.toml": "orchestrator",
    ".rl-run.toml": "rl_run",
    ".inference.toml": "inference",
    ".eval.toml": "eval",
}


def kind_of_target(target: str) -> Kind | None:
    """The kind a `#:schema` target names: `../generated/schemas/rl_trainer.json` is rl."""
    return kind_of_schema(target)


def kind_of_text(text: bytes) -> Kind | None:
    """The kind named by a `#:schema` directive on line 1 of `text`, if any."""
    found = schema_directive(text)
    return kind_of_target(found[1]) if found and found[0] == 1 else None


def kind_of_name(path: str) -> Kind | None:
    """The kind editors give a file by its name (`x.rl.toml`, `x.sft.toml`, ...)."""
    return next((k for suffix, k in NAME_SUFFIXES.items() if path.endswith(suffix)), None)


def misplaced_directive(text: bytes) -> int | None:
    """The line of a `#:schema` directive that is not on line 1 (editors ignore it there)."""
    found = schema_directive(text)
    return found[0] if found and found[0] != 1 else None


@dataclass(slots=True)
class SectionSource(FileSource):
    """A section file (`--model @ model.toml`): its table is `section` of the config, and
    positions are looked up in the file as it was written, without the section prefix."""

    section: tuple[str, ...] = ()
    file: FileSource | None = None

    def position(self, parts: tuple[str, ...], of_key: bool = False) -> Position:
        depth = len(self.section)
        if self.file is None or tuple(parts[:depth]) != self.section:
            from trainspec.config.positions import Position

            return Position(1, 1)
        return self.file.position(tuple(parts[depth:]), of_key)


COMBINED_TABLES = ("trainer", "orchestrator")  # the rl command's sub-configs


def combined_kind(data: dict) -> Kind | None:
    """`rl_run` where a file's top level holds a `[trainer]` or `[orchestrator]` table."""
    return "rl_run" if any(isinstance(data.get(key), dict) for key in COMBINED_TABLES) else None


class Inputs:
    """Reads each path once; later reads of the same path get the same FileSource (or the same
    error), so peeking at a file's kind before the full parse costs no second read."""

    def __init__(self) -> None:
        self._read: dict[str, FileSource | ConfigFileError] = {}
        self._guesses: dict[tuple[str, ...], KindGuess] = {}

    def read(self, path: str) -> FileSource:
        """The parsed file; raises ConfigFileError (with its position) if it cannot be read."""
        if path not in self._read:
            try:
                self._read[path] = read_file(path)
            except ConfigFileError as err:
                self._read[path] = err
        found = self._read[path]
        if isinstance(found, ConfigFileError):
            raise found
        return found

    def peek(self, path: str) -> FileSource | None:
        try:
            return self.read(path)
        except ConfigFileError:
            return None

    def named_kind(self, path: str) -> Kind | None:
        """The kind the file's `#:schema` line names (None if it cannot be read)."""
        source = self.peek(path)
        return kind_of_text(source.text) if source is not None else None

    def kind(self, path: str) -> Kind | None:
        """The kind of a config file: its `#:schema` first line, else its name's association,
        else the one kind that its keys tell apart (`[trainer]`: the `rl` command's)."""
        return self.kind_of_files([path])

    def kind_of_files(self, paths: Sequence[str]) -> Kind | None:
        """The kind of files merged left to right: what the first one names (`#:schema` line,
        file name), else the one kind their keys together tell apart."""
        if not paths:
            return None
        return self.named_kind(paths[0]) or kind_of_name(paths[0]) or self.guess(paths).kind

    def guess(self, paths: Sequence[str]) -> KindGuess:
        """What the keys of the files (those that can be read) say about their kind."""
        key = tuple(paths)
        if key not in self._guesses:
            from trainspec.config.kind_inference import infer_kind

            documents = [source.data for source in map(self.peek, paths) if source is not None]
            self._guesses[key] = infer_kind(documents)
        return self._guesses[key]

    def combined_kind(self, path: str) -> Kind | None:
        """`rl_run` where the file's top level holds a `[trainer]` or `[orchestrator]` table:
        no other kind has one, and the reference's `rl.toml` files name no schema."""
        source = self.peek(path)
        return combined_kind(source.data if source is not None else {})

    def section(self, section: tuple[str, ...], path: str) -> SectionSource:
        """`path`'s table as the `section` table of the config."""
        file = self.read(path)
        data = unflatten({".".join(section): file.data}) if section else file.data
        return SectionSource(file.path, data, file.text, None, section, file)
