"""A real tombi language server over LSP stdio, started per test by pytest-lsp.

The waits are sized for a busy machine (two cores shared with other test runs): the server may
take many seconds to start and to load the schema, so every answer is polled for until it is
the one the test expects, within generous limits, never taken after a fixed sleep. A limit that
runs out returns the last answer, so the test's assertion shows what the server said.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
import pytest_lsp
from helpers.support import ROOT
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

TOMBI = str(Path(sys.executable).with_name("tombi"))
SERVER_ENV = {**os.environ, "TOMBI_OFFLINE": "true", "NO_COLOR": "1"}

START_S = 120.0  # the server started and initialized
FIRST_ANSWER_S = 120.0  # the schema loaded: the expected answer, polled for
REQUEST_S = 60.0  # any one request answered
POLL_S = 0.1  # between two polls

T = TypeVar("T")


class Editor:
    """What an editor does with the server: open a document, ask for completion and hover,
    collect diagnostics. Documents live under the repository (they need not exist on disk),
    so the `#:schema` line and tombi.toml resolve as they would for a user."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client

    def open(self, relative: str, text: str) -> str:
        uri = (ROOT / relative).as_uri()
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=uri, language_id="toml", version=1, text=text
                )
            )
        )
        return uri

    async def completion(
        self, uri: str, line: int, character: int, expecting: set[str]
    ) -> set[str]:
        """Completion labels, asked again until they include `expecting`: the server may still
        be loading the schema, and an editor asks again on the next keystroke."""

        async def ask() -> set[str]:
            result = await self.client.text_document_completion_async(
                lsp.CompletionParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    position=lsp.Position(line=line, character=character),
                )
            )
            items = result.items if isinstance(result, lsp.CompletionList) else result
            return {item.label for item in items or []}

        return await _poll(ask, lambda labels: expecting <= labels)

    async def hover(self, uri: str, line: int, character: int, expecting: str) -> str:
        """Hover text, asked again until it contains `expecting` (the schema may be loading)."""

        async def ask() -> str:
            result = await self.client.text_document_hover_async(
                lsp.HoverParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    position=lsp.Position(line=line, character=character),
                )
            )
            return result.contents.value if result and result.contents.value else ""

        return await _poll(ask, lambda text: expecting in text)

    async def diagnostics(
        self, uri: str, expecting: Callable[[list[tuple[int, str]]], bool]
    ) -> list[tuple[int, str]]:
        """(0-based line, message) of the diagnostics the server publishes for `uri`, once they
        satisfy `expecting`: the server may publish before it has the schema, then again."""

        async def ask() -> list[tuple[int, str]]:
            published = self.client.diagnostics.get(uri, [])
            return sorted((d.range.start.line, d.message) for d in published)

        return await _poll(ask, expecting)


async def _poll(ask: Callable[[], Awaitable[T]], done: Callable[[T], bool]) -> T:
    """Ask until the answer is `done`; after FIRST_ANSWER_S, the last answer, for the test's
    assertion to show. Each ask gets REQUEST_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FIRST_ANSWER_S
    while True:
        async with asyncio.timeout(REQUEST_S):
            answer = await ask()
        if done(answer) or loop.time() > deadline:
            return answer
        await asyncio.sleep(POLL_S)


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[TOMBI, "lsp", "--offline"], server_env=SERVER_ENV)
)
async def tombi(lsp_client: LanguageClient):
    root = ROOT.as_uri()
    folders = [lsp.WorkspaceFolder(uri=root, name="trainspec")]

    @lsp_client.feature(lsp.WORKSPACE_WORKSPACE_FOLDERS)
    def workspace_folders(params):
        return folders

    @lsp_client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params):
        return None

    async with asyncio.timeout(START_S):
        await lsp_client.initialize_session(
            lsp.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=root,
                workspace_folders=folders,
            )
        )
        await _workspace_checked(lsp_client)
    yield
    async with asyncio.timeout(REQUEST_S):
        await lsp_client.shutdown_session()


async def _workspace_checked(client: LanguageClient) -> None:
    """Wait until tombi has loaded tombi.toml and the schemas and checked the workspace: it then
    publishes diagnostics (often none) for every config under configs/. A document opened before
    that races the loading, and tombi 1.9 may then resolve the schema's $refs against its
    `urn:trainspec:...` $id, fail to fetch that, and answer nothing for the document for good."""
    configs = {path.as_uri() for path in (ROOT / "configs").rglob("*.toml")}
    while not configs <= client.diagnostics.keys():
        await asyncio.sleep(POLL_S)


@pytest.fixture
def editor(tombi: LanguageClient) -> Editor:
    return Editor(tombi)
