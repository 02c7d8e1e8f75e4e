"""The kind of a command line that names none, told by its keys, and what validate-config says
about it.

A training command gives its own kind (`sft @ x.toml` checks x.toml as an sft config, the
reference's habit). `validate-config x.toml` without --kind goes by the first file's `#:schema`
line, else its name (`x.sft.toml`), else the keys of all its files together (a composed run,
`sft @ base.toml @ fake.toml`, is told by both): it says which kind it chose and which key
decided, or lists the kinds it cannot choose between with the --kind that picks each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainspec.config.sources import schema_directive
from trainspec.kinds import KIND_INFO, Kind

from .inputs import STDIN, Inputs, kind_of_name, misplaced_directive

if TYPE_CHECKING:
    from trainspec.config.kind_inference import KindGuess

SHOWN_KEYS = 4  # keys named in a message before "..."


def guessed_kind(kind: Kind | None, files: Sequence[str], inputs: Inputs) -> KindGuess | None:
    """How the kind of `files` is told from their keys; None when `kind` (--kind, the
    command's) is given, the first file's `#:schema` line or its name gives it, or a misplaced
    `#:schema` line must be moved first (check reports that)."""
    if kind or not files:
        return None
    first = files[0]
    if inputs.named_kind(first) or kind_of_name(first):
        return None
    source = inputs.peek(first)
    if source is not None and misplaced_directive(source.text):
        return None
    return inputs.guess(files)


def chosen_note(guess: KindGuess, files: Sequence[str], inputs: Inputs) -> str:
    """One line: the kind chosen for files that name none, and the keys that decided."""
    from trainspec.config.kind_inference import dotted_key

    assert guess.kind is not None  # a note is written only for a chosen kind
    kind = guess.kind
    keys = [(dotted_key(key), ruled) for key, ruled in guess.deciding]
    if len(keys) == 1:
        why = f"the only kind that has {keys[0][0]}"
    elif keys:
        why = "the only kind that has all of " + ", ".join(
            f"{key} (not in {_joined(ruled, 'or')})" for key, ruled in keys
        )
    else:
        why = "the kind closest to its keys"
    if guess.unknown:
        why += f", though it has no {_keys(guess.unknown)} (an error below)"
    first = _files(files[:1])
    source = inputs.peek(files[0])
    if source is not None and schema_directive(source.text):  # a schema of no kind: model.json
        unnamed = f"the #:schema line of {first} names no kind of config"
    else:
        unnamed = f"no #:schema line in {first}"
    checked = _files(files) if len(files) > 1 else "it"
    return (
        f"{unnamed}: checking {checked} as an {kind} config (what "
        f"`{KIND_INFO[kind].command}` reads), {why}; pass --kind to choose another kind"
    )


def cannot_tell(guess: KindGuess | None, files: Sequence[str]) -> str:
    """Why no kind was chosen, with the --kind to pass for each candidate."""
    named = _files(files)
    candidates = guess.candidates if guess is not None and guess.candidates else tuple(KIND_INFO)
    if guess is None or not guess.candidates:
        keys = guess.keys if guess is not None else ()
        why = (
            f"no kind of trainspec config has any of its keys ({_keys(keys)})"
            if keys
            else "it sets no key"
        )
    elif not guess.unknown:
        why = f"every key it sets ({_keys(guess.keys)}) is in {_joined(candidates, 'and')} configs"
    elif len(candidates) == 1:
        why = f"no kind has {_keys(guess.unknown)}, and only {candidates[0]} configs have the rest"
    else:
        why = (
            f"no kind has {_keys(guess.unknown)}, and the rest fits "
            f"{_joined(candidates, 'and')} configs alike"
        )
    passes = _joined([f"--kind {kind}" for kind in candidates], "or")
    commands = _joined([f"`{KIND_INFO[kind].command}`" for kind in candidates], "and")
    schemas = _joined([f"{KIND_INFO[kind].schema}.json" for kind in candidates], "or")
    return (
        f"cannot tell which kind of config {named} is: {why}. Pass {passes} (the configs of "
        f"{commands}), or start the file with a '#:schema' line naming its schema "
        f"(generated/schemas/{schemas})"
    )


def skipped_reason(guess: KindGuess) -> str:
    """Why `--each` leaves a file unchecked (the JSON report's `skipped`)."""
    if not guess.candidates:
        return "names no trainspec schema (no #:schema line, no .rl.toml/.sft.toml name)"
    return (
        f"names no schema, and its keys fit {_joined(guess.candidates, 'and')} configs alike: "
        "check it with --kind"
    )


def _files(files: Sequence[str]) -> str:
    return ", ".join("<stdin>" if path == STDIN else path for path in files)


def _it(files: Sequence[str]) -> str:
    return "them" if len(files) > 1 else "it"


def _keys(keys) -> str:
    from trainspec.config.kind_inference import dotted_key

    shown = [dotted_key(key) for key in keys[:SHOWN_KEYS]]
    return ", ".join(shown) + (", ..." if len(keys) > SHOWN_KEYS else "")


def _joined(words: Sequence[str], last: str) -> str:
    words = list(words)
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} {last} {words[-1]}"
