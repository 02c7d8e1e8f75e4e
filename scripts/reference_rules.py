"""The rules between settings, for the config reference: per kind, each rule its pipeline runs
(src/trainspec/validators/, in order), the first line of its docstring, and the keys it
mentions.

A rule's docstring states what it requires in terms of the keys (`model.cp > 1 needs model.impl
"custom" or "auto"`), so the keys it mentions are read from there: a dotted path or a [table]
that is a key of the kind's config, a top-level key that has an underscore (`max_steps`), and a
bare sibling of the dotted key named just before it ("eval.concurrency.initial_inflight and
min_inflight"). Only names that are keys of that config count, so prose never matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainspec.config.schema_info import KeyPath, SchemaInfo
from trainspec.kinds import Kind

NAME = re.compile(r"(\[?)([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)")


@dataclass(frozen=True)
class Rule:
    name: str
    summary: str  # the docstring's first sentence
    keys: tuple[KeyPath, ...]  # the keys its docstring names, in order


def mentioned(doc: str, keys: set[KeyPath]) -> list[KeyPath]:
    """The keys of `keys` that `doc` names, in order of first mention."""
    found: list[KeyPath] = []
    last: KeyPath | None = None
    for match in NAME.finditer(doc):
        bracket, word = match.groups()
        parts = tuple(word.rstrip(".").split("."))
        if parts in keys and (len(parts) > 1 or bracket or "_" in word):
            hit = parts
        elif last is not None and len(parts) == 1 and "_" in word and (*last[:-1], word) in keys:
            hit = (*last[:-1], word)
        else:
            continue
        last = hit
        if hit not in found:
            found.append(hit)
    return found


def summary(doc: str) -> str:
    """The docstring's first paragraph, on one line."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def rules_of(kind: Kind, info: SchemaInfo) -> list[Rule]:
    from trainspec.validators.pipeline import rules_for

    keys = set(info.keys)
    return [
        Rule(rule.__name__, summary(rule.__doc__ or ""), tuple(mentioned(rule.__doc__ or "", keys)))
        for rule in rules_for(kind)
    ]


def rules_by_key(rules: list[Rule]) -> dict[KeyPath, list[str]]:
    """Key path -> the names of the rules that mention it, in pipeline order."""
    found: dict[KeyPath, list[str]] = {}
    for rule in rules:
        for key in rule.keys:
            found.setdefault(key, []).append(rule.name)
    return found
