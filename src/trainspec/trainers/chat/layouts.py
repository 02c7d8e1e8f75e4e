"""The row layouts SFT reads as one chat, each turned into chat-template messages and tools,
and what is wrong with a row that is none of them.

    messages, tools = conversation(row)     # BadRow(problem, fix) when the row is not a chat

A row holds one of:

- `messages`: a list of {role, content} objects (the OpenAI and chat-template layout);
- `conversations` (ShareGPT): a list of {from, value} objects ({role, content} are read too),
  the speaker mapped to a role: human -> user, gpt -> assistant, system -> system, and tool,
  function_response or observation -> tool (user and assistant are kept; any other name is
  kept as the role, and its turns follow no loss_mask switch);
- `prompt` and `completion`: each text (read as a user and an assistant message) or a list of
  {role, content} messages.

A message's content is text, null, or a list of OpenAI content parts: {"type": "text", "text"}
parts are joined in order with no separator; any other part (image_url, input_audio, ...) is
refused, since text-only models take text parts only. `tools`, when present, is a list of tool
objects or the JSON text of one (as hub datasets often store it); null, empty text and [] are
no tools; anything else is refused, never dropped.
"""

from __future__ import annotations

import json
from typing import Any

ROW_FIX = (
    "give every row a messages list of {role, content} objects, a ShareGPT conversations list "
    "of {from, value} objects, or prompt and completion (each text or a list of messages)"
)
PART_FIX = "keep only {type: text, text} parts in content (drop images, audio and other media)"
TOOLS_FIX = (
    'give tools as a list of tool objects, or as the JSON text of one ([{"type": "function", '
    '"function": {...}}])'
)
# Roles some datasets use, read as the role whose loss_mask switch they follow.
ROLE_ALIASES = {"developer": "system", "human": "user", "gpt": "assistant", "function": "tool"}
# ShareGPT speakers, as the roles of chat-template messages.
SPEAKERS = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "function_response": "tool",
    "observation": "tool",
}


class BadRow(Exception):
    """What keeps a row from being a chat, and what to do about it."""

    def __init__(self, problem: str, fix: str = ROW_FIX) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix


def kind_of(value: Any) -> str:
    names = {str: "text", list: "a list", dict: "an object", bool: "a boolean", type(None): "null"}
    return names.get(type(value), f"the number {value!r}")


def _part_text(part: Any, where: str) -> str:
    if not isinstance(part, dict):
        raise BadRow(f"{where} is {kind_of(part)}, not a {{type, text}} content part")
    kind = part.get("type")
    if kind != "text":
        what = f"a part of type {kind!r}" if isinstance(kind, str) else "a part with no type"
        raise BadRow(f"{where} is {what}: text-only models take text parts only", PART_FIX)
    if not isinstance(part.get("text"), str):
        raise BadRow(f"{where}.text is {kind_of(part.get('text'))}, not text")
    return part["text"]


def content_text(content: Any, where: str) -> str | None:
    """Text or null content as it is; a list of text parts joined in order."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRow(f"{where} is {kind_of(content)}, not text")
    return "".join(_part_text(part, f"{where}[{index}]") for index, part in enumerate(content))


def _message(message: Any, where: str) -> dict:
    if not isinstance(message, dict):
        raise BadRow(f"{where} is {kind_of(message)}, not a {{role, content}} object")
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise BadRow(f"{where}.role is {kind_of(role)}, not a role name such as user or assistant")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return message
    return {**message, "content": content_text(content, f"{where}.content")}


def _turn(turn: Any, where: str) -> dict:
    """One ShareGPT turn as a message; {role, content} keys are read when from/value are not."""
    if not isinstance(turn, dict):
        raise BadRow(f"{where} is {kind_of(turn)}, not a {{from, value}} object")
    speaker_key = "from" if turn.get("from") is not None else "role"
    speaker = turn.get(speaker_key)
    if not isinstance(speaker, str) or not speaker:
        raise BadRow(f"{where}.from is {kind_of(speaker)}, not a speaker such as human or gpt")
    text_key = "value" if turn.get("value") is not None else "content"
    text = content_text(turn.get(text_key), f"{where}.{text_key}")
    if text is None:
        raise BadRow(f"{where}.value is null, not text")
    others = {
        key: value
        for key, value in turn.items()
        if key not in ("from", "value", "role", "content") and value is not None
    }
    return {**others, "role": SPEAKERS.get(speaker, speaker), "content": text}


def _listed(value: Any, field: str, what: str, read) -> list[dict]:
    if not isinstance(value, list):
        raise BadRow(f"{field} is {kind_of(value)}, not a list of {what}")
    return [read(item, f"{field}[{index}]") for index, item in enumerate(value)]


def _side(value: Any, field: str, role: str) -> list[dict]:
    """A prompt or completion: text as one message of `role`, or a list of messages."""
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    return _listed(value, field, "{role, content} messages", _message)


def messages_of(row: dict) -> list[dict]:
    """The conversation of a row in any layout, as {role, content} messages with text content."""
    if row.get("messages") is not None:
        return _listed(row["messages"], "messages", "{role, content} messages", _message)
    if row.get("conversations") is not None:
        return _listed(row["conversations"], "conversations", "{from, value} turns", _turn)
    if row.get("prompt") is not None and row.get("completion") is not None:
        return _side(row["prompt"], "prompt", "user") + _side(
            row["completion"], "completion", "assistant"
        )
    raise BadRow(
        "the row has neither messages nor both prompt and completion (nor ShareGPT conversations)"
    )


def tools_of(value: Any) -> list | None:
    """The tools of a row: a list of tool objects, parsed from JSON text when given as text."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise BadRow(
                f"tools is text that is not JSON ({exc.msg} at column {exc.colno})", TOOLS_FIX
            ) from None
        if parsed is not None and not isinstance(parsed, list):
            raise BadRow(f"tools is the JSON text of {kind_of(parsed)}, not of a list", TOOLS_FIX)
        value = parsed or []
    elif not isinstance(value, list):
        raise BadRow(f"tools is {kind_of(value)}, not a list of tools or its JSON text", TOOLS_FIX)
    for index, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise BadRow(f"tools[{index}] is {kind_of(tool)}, not a tool object", TOOLS_FIX)
    return value or None


def conversation(row: Any) -> tuple[list[dict], list | None]:
    """(messages, tools) of a row; BadRow says what keeps it from being a chat."""
    if not isinstance(row, dict):
        raise BadRow(f"the row is {kind_of(row)}, not an object with messages or prompt/completion")
    return messages_of(row), tools_of(row.get("tools"))
