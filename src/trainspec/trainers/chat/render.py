"""Turn one dataset row into token ids and a per-token loss mask, with the chat template.

A row holds `messages` (a list of {role, content}), ShareGPT `conversations`, or `prompt` and
`completion` (each a string, read as a user and an assistant message, or a list of messages),
and maybe `tools`; layouts.py turns each into messages with text content. The template renders
growing prefixes of the conversation; the tokens each new message adds are trained on when
`loss_mask.<role>` says so. The header that opens an assistant turn ("<|im_start|>assistant\\n")
is rendered with the message before it, so it is never a target: the model learns what to answer,
not when a turn starts. `describe_sample` shows a packed row back as text with its mask.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..core.lm import IGNORE_INDEX
from ..errors import SetupError
from .layouts import ROLE_ALIASES, BadRow, conversation
from .named_renderers import NamedRendering


def trained_roles(loss_mask_cfg) -> dict[str, bool]:
    return {
        "system": loss_mask_cfg.system,
        "user": loss_mask_cfg.user,
        "assistant": loss_mask_cfg.assistant,
        "tool": loss_mask_cfg.tool,
    }


def row_conversation(row: dict, field: str) -> tuple[list[dict], list | None]:
    """(messages, tools) of a row in any layout (layouts.py); a row that holds no chat is a
    SetupError on `field`."""
    try:
        return conversation(row)
    except BadRow as bad:
        raise SetupError(field, bad.problem, bad.fix) from None


def row_messages(row: dict, field: str) -> list[dict]:
    """The conversation of a row; a row that holds none is a SetupError on `field`."""
    return row_conversation(row, field)[0]


def prefix_texts(tokenizer, messages: list[dict], tools=None) -> list[str]:
    """The template's text for messages[:1], messages[:2], ...; a prefix followed by an
    assistant message ends with the generation prompt (the assistant header)."""
    texts = []
    for i, message in enumerate(messages):
        opens_answer = i + 1 < len(messages) and messages[i + 1]["role"] == "assistant"
        try:
            texts.append(
                tokenizer.apply_chat_template(
                    messages[: i + 1],
                    tools=tools,
                    tokenize=False,
                    add_generation_prompt=opens_answer and message["role"] != "assistant",
                )
            )
        except Exception as exc:
            raise SetupError(
                "tokenizer.chat_template",
                f"the chat template cannot render a conversation: {exc}",
                "use a tokenizer with a chat template, or set tokenizer.chat_template",
            ) from None
    return texts


class RewritesHistory(SetupError):
    """The template renders earlier messages differently once a message is added."""


def assign_tokens(
    messages: list[dict], prefix_ids: list[list[int]], trained: dict[str, bool]
) -> tuple[list[int], list[bool]]:
    """Ids of the whole conversation and, per token, whether the message that added it is
    trained on. Each prefix's tokens must start with the previous prefix's tokens, else
    RewritesHistory."""
    ids: list[int] = []
    mask: list[bool] = []
    for message, current in zip(messages, prefix_ids, strict=True):
        if current[: len(ids)] != ids:
            raise RewritesHistory(
                "tokenizer.chat_template",
                "the chat template renders a conversation differently once a message is "
                f"added (at a {message['role']!r} message)",
                "set tokenizer.chat_template to a template whose output only grows "
                "(for example ChatML without history rewriting)",
            )
        mask.extend([_trains(message, trained)] * (len(current) - len(ids)))
        ids = list(current)
    return ids, mask


def turn_by_turn(
    messages: list[dict], prefix_ids: list[list[int]], trained: dict[str, bool]
) -> list[tuple[list[int], list[bool]]]:
    """For a template that rewrites history (Qwen3 drops the <think> block of answers before
    the latest question): one sample per trained message, the conversation up to it as the
    template renders it then, only its own tokens trained, exactly what the model sees when it
    writes that message."""
    samples = []
    for k, message in enumerate(messages):
        if not _trains(message, trained):
            continue
        before = prefix_ids[k - 1] if k else []
        current = prefix_ids[k]
        if current[: len(before)] != before:
            raise SetupError(
                "tokenizer.chat_template",
                f"the chat template renders a {message['role']!r} message's own conversation "
                "differently from the prompt that precedes it (its generation prompt is not "
                "how it renders the message), so its tokens cannot be told from the prompt",
                "set tokenizer.chat_template to a template whose generation prompt opens the "
                "turn it renders",
            )
        samples.append(
            (list(current), [False] * len(before) + [True] * (len(current) - len(before)))
        )
    return samples


def _trains(message: dict, trained: dict[str, bool]) -> bool:
    return bool(trained.get(ROLE_ALIASES.get(message["role"], message["role"]), False))


def _tokenize(tokenizer, texts: list[str]) -> list[list[int]]:
    # What apply_chat_template(tokenize=True) does, for many texts in one call.
    return tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []


def render_messages(
    tokenizer, messages: list[dict], trained: dict[str, bool], tools=None
) -> list[tuple[list[int], list[bool]]]:
    """The samples of a conversation, each token ids and per token whether it is trained on:
    the whole conversation, or one per trained message where the template rewrites history."""
    prefix_ids = _tokenize(tokenizer, prefix_texts(tokenizer, messages, tools))
    return samples_of(messages, prefix_ids, trained)[0]


def samples_of(
    messages: list[dict], prefix_ids: list[list[int]], trained: dict[str, bool]
) -> tuple[list[tuple[list[int], list[bool]]], bool]:
    """(samples, whether the template rewrote history so they are one per trained message)."""
    try:
        return [assign_tokens(messages, prefix_ids, trained)], False
    except RewritesHistory:
        return turn_by_turn(messages, prefix_ids, trained), True


# The columns Renderer writes (beside "error").
RENDERED = (
    "input_ids",
    "loss_mask",
    "length",
    "targets",
    "trained",
    "unknown_roles",
    "source",  # the index of the row the sample comes from
    "turn_by_turn",  # whether its conversation was rendered one trained message at a time
)


class Renderer:
    """A picklable batched function for `datasets.map(..., with_indices=True)`: rows → samples
    of input_ids, loss_mask, length, targets (the tokens it trains on within `seq_len`), the
    source row's index, error; a row gives one sample, or one per trained message where the
    template rewrites history. Errors are returned as a column (JSON of path, problem, fix)
    rather than raised, so they cross worker processes intact; `raise_first_error` turns the
    first into a SetupError.
    """

    def __init__(
        self,
        tokenizer,
        loss_mask_cfg,
        field: str,
        seq_len: int,
        named: NamedRendering | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.trained = trained_roles(loss_mask_cfg)
        self.field = field
        self.seq_len = seq_len
        self.named = named  # a named renderer of the reference's, else the chat template

    def _named_samples(self, row: dict) -> tuple[list[dict], list, str]:
        """(messages, [sample], error) of a row rendered by the named renderer."""
        assert self.named is not None
        try:
            messages, tools = row_conversation(row, self.field)
            return messages, [self.named(self.tokenizer, messages, tools, self.trained)], ""
        except SetupError as exc:
            return [], [([], [])], _said(exc)

    def __call__(self, batch: dict, indices: list[int]) -> dict:
        size = len(next(iter(batch.values())))
        rows = [{key: values[i] for key, values in batch.items()} for i in range(size)]
        conversations: list[tuple[list[dict], int, int]] = []
        texts: list[str] = []
        errors = [""] * size
        for i, row in enumerate(rows):
            if self.named is not None:  # it renders each conversation in one go, below
                conversations.append(([], 0, 0))
                continue
            try:
                messages, tools = row_conversation(row, self.field)
                rendered = prefix_texts(self.tokenizer, messages, tools)
            except SetupError as exc:
                errors[i] = _said(exc)
                messages, rendered = [], []
            conversations.append((messages, len(texts), len(rendered)))
            texts.extend(rendered)
        tokens = _tokenize(self.tokenizer, texts)
        out: dict[str, list] = {key: [] for key in (*RENDERED, "error")}
        for i, (messages, start, count) in enumerate(conversations):
            samples: list[tuple[list[int], list[bool]]] = [([], [])]
            rewritten = False
            if self.named is not None:
                messages, samples, errors[i] = self._named_samples(rows[i])
            elif not errors[i]:
                try:
                    found, rewritten = samples_of(
                        messages, tokens[start : start + count], self.trained
                    )
                    samples = found or samples  # none trained: one empty sample, reported
                except SetupError as exc:
                    errors[i] = _said(exc)
            roles = {ROLE_ALIASES.get(m["role"], m["role"]) for m in messages}
            unknown = sorted(r for r in roles if r not in self.trained)
            for ids, mask in samples:
                out["input_ids"].append(ids)
                out["loss_mask"].append(mask)
                out["length"].append(len(ids))
                # Position t trains on token t + 1; packing cuts a row at seq_len tokens.
                out["targets"].append(sum(mask[1 : self.seq_len]))
                out["trained"].append(sum(mask))
                out["unknown_roles"].append(unknown)
                out["source"].append(indices[i])
                out["turn_by_turn"].append(rewritten)
                out["error"].append(errors[i])
        return out


def _said(error: SetupError) -> str:
    return json.dumps([error.path, error.problem, error.fix])


def raise_first_error(errors: list[str], where: Callable[[int], str]) -> None:
    """The first row error as a SetupError, the row named by `where(index)`."""
    for index, error in enumerate(errors):
        if error:
            path, problem, fix = json.loads(error)
            raise SetupError(path, f"{where(index)}: {problem}", fix)


def describe_sample(micro_batch, tokenizer) -> str:
    """The first row of a MicroBatch as text, for `log.log_data`: ⟦trained tokens⟧ marked (a
    token is trained when the position before it has it as label), │ between documents, and
    the trailing padding counted."""
    ids = micro_batch.input_ids[0].tolist()
    positions = micro_batch.position_ids[0].tolist()
    labels = micro_batch.labels[0].tolist()
    trained = [False] + [label != IGNORE_INDEX for label in labels[:-1]]
    pad_id = tokenizer.pad_token_id
    end = len(ids)
    while end > 0 and ids[end - 1] == pad_id:
        end -= 1
    parts: list[str] = []
    run: list[int] = []
    run_trained = False

    def flush() -> None:
        if run:
            text = tokenizer.decode(run)
            parts.append(f"⟦{text}⟧" if run_trained else text)
            run.clear()

    for t in range(end):
        if positions[t] == 0 and t > 0:
            flush()
            parts.append("│")
        if trained[t] != run_trained:
            flush()
            run_trained = trained[t]
        run.append(ids[t])
    flush()
    documents = sum(1 for t in range(end) if positions[t] == 0)
    header = (
        f"row 0 of {len(micro_batch.input_ids)}: {documents} document(s), {end}/{len(ids)} "
        f"tokens, {sum(1 for label in labels if label != IGNORE_INDEX)} targets (⟦trained⟧)"
    )
    if end < len(ids):
        parts.append(f"[{len(ids) - end} × pad]")
    return header + "\n" + "".join(parts)
