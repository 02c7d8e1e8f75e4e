"""The built-in toy chat task: the assistant repeats the user's short string backwards.

    examples("train")          # 20,000 conversations, the same on every call and machine
    examples("test", n=100)    # the first 100 of the 500 held-out ones
    lcs_ratio("olleh", "olleh"), exact_match(" olleh\n", "olleh")

Strings are random lowercase letters with single spaces between them, 3 to 10 characters, so
a whole conversation stays near 90 byte tokens with the ChatML template. Which split a string
belongs to is decided by a hash of the string itself, so no string is in both splits.
"""

from __future__ import annotations

import hashlib
import random
import string
from functools import lru_cache

NAME = "reverse-text"
SYSTEM_PROMPT = "Reverse the text."
SPLIT_SIZES = {"train": 20_000, "test": 500}
MIN_CHARS, MAX_CHARS = 3, 10
_SEED = 20_240_601
_TEST_BUCKETS = 20  # one string in 20 belongs to the test split


def _split_of(text: str) -> str:
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return "test" if int.from_bytes(digest, "big") % _TEST_BUCKETS == 0 else "train"


def _random_text(rng: random.Random) -> str:
    """Letters with the odd single space inside (never at either end), 3 to 10 characters."""
    chars: list[str] = []
    length = rng.randint(MIN_CHARS, MAX_CHARS)
    for i in range(length):
        inside = 0 < i < length - 1 and chars[-1] != " "
        chars.append(" " if inside and rng.random() < 0.2 else rng.choice(string.ascii_lowercase))
    return "".join(chars)


@lru_cache(maxsize=1)
def _all_texts() -> dict[str, tuple[str, ...]]:
    """Draw strings from one seeded stream until every split has its size (no duplicates)."""
    rng = random.Random(_SEED)
    found: dict[str, list[str]] = {split: [] for split in SPLIT_SIZES}
    seen: set[str] = set()
    while any(len(found[s]) < n for s, n in SPLIT_SIZES.items()):
        text = _random_text(rng)
        if text in seen:
            continue
        seen.add(text)
        split = _split_of(text)
        if len(found[split]) < SPLIT_SIZES[split]:
            found[split].append(text)
    return {split: tuple(texts) for split, texts in found.items()}


def conversation(text: str) -> dict:
    """One example row: system prompt, the string as the user turn, its reverse as the answer."""
    return {
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": text},
            {"role": "assistant", "content": text[::-1]},
        ]
    }


def examples(split: str, n: int | None = None) -> list[dict]:
    """The first `n` (default: all) examples of `split` ("train" or "test"), in a fixed order."""
    if split not in SPLIT_SIZES:
        raise KeyError(f"unknown split {split!r}; known: {', '.join(SPLIT_SIZES)}")
    texts = _all_texts()[split]
    return [conversation(text) for text in texts[: len(texts) if n is None else n]]


def lcs_ratio(completion: str, target: str) -> float:
    """Longest common subsequence of the two strings over the longer length, in [0, 1]."""
    if not completion and not target:
        return 1.0
    if not completion or not target:
        return 0.0
    previous = [0] * (len(target) + 1)
    for a in completion:
        current = [0]
        for j, b in enumerate(target, start=1):
            current.append(previous[j - 1] + 1 if a == b else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1] / max(len(completion), len(target))


def exact_match(completion: str, target: str) -> bool:
    """Whether the two strings are equal once surrounding whitespace is removed."""
    return completion.strip() == target.strip()
