"""A verifiers episode's trainable branches as completions: each branch of a trace is a
sample (its token ids, which of them the model sampled, their log-probabilities) after its
prompt (the tokens before the first sampled one), with the role of every span of its tokens.

    completion = completion_of(branch, trace, tokenizer)
    completion.segments   # [("assistant", 12, True), ("", 3, False), ("user", 9, False), ...]

* Tokens the environment wrote between turns are in the completion (its mask is False there),
  not trained on (echo can weigh them).
* A message of the environment is its role's body between template tokens of no role (""); a
  message the model sampled is generated, its template tokens too.
"""

from __future__ import annotations

from ..sampling.sampler import Completion


def _body(ids: list[int], content: str, tokenizer) -> tuple[int, int] | None:
    """Where the tokens of a message's text sit among its node's tokens (the role header and
    end-of-turn tokens around them), or None when the renderer merged them with their
    neighbours."""
    if not content:
        return None
    body = tokenizer.encode(content, add_special_tokens=False)
    for start in range(len(ids) - len(body) + 1):
        if ids[start : start + len(body)] == body:
            return start, start + len(body)
    return None


def segments_of(nodes, first: int, tokenizer) -> list[tuple[str, int, bool]]:
    """(role, tokens, generated) of a branch's tokens from position `first` on. A message the
    model sampled is generated (its template tokens too); a message of the environment is its
    role's body, between template tokens of no role ("")."""
    out: list[tuple[str, int, bool]] = []
    position = 0
    for node in nodes:
        ids = list(node.token_ids)
        skip = max(0, first - position)
        position += len(ids)
        if skip >= len(ids):
            continue
        if node.sampled:
            out.append(("assistant", len(ids) - skip, True))
            continue
        content = node.message.content if isinstance(node.message.content, str) else ""
        span = _body(ids, content, tokenizer) or (0, len(ids))
        if span[0] < skip:  # the prompt's own message: no body after `first`
            span = (skip, skip)
        role = str(node.message.role)
        for name, start, end in (("", skip, span[0]), (role, span[0], span[1]),
                                 ("", span[1], len(ids))):  # fmt: skip
            if end > start:
                out.append((name, end - start, False))
    return out


def completion_of(branch, trace, tokenizer) -> Completion:
    """One branch of a trace as a completion after its prompt (the tokens before the first
    sampled one)."""
    mask = [bool(m) for m in branch.sampled_mask]
    ids = list(branch.token_ids)
    first = mask.index(True)
    return Completion(
        ids[first:],
        list(branch.logprobs)[first:],
        trace.last_reply,
        not trace.is_truncated,
        prompt_ids=ids[:first],
        mask=mask[first:],
        segments=segments_of(branch.nodes, first, tokenizer),
        agent=trace.agent.name,
        turns=max(1, trace.num_turns),
    )
