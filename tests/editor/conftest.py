"""A real tombi language server over LSP stdio, started per test by pytest-lsp."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from support import ROOT

TOMBI = str(Path(sys.executable).with_name("tombi"))
SERVER_ENV = {**os.environ, "TOMBI_OFFLINE": "true", "NO_COLOR": "1"}


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

    async def completion(self, uri: str, line: int, character: int) -> set[str]:
        """Completion labels; asked again while the server is still loading the schema, as an
        editor does on the next keystroke."""
        async with asyncio.timeout(10):
            while True:
                result = await self.client.text_document_completion_async(
                    lsp.CompletionParams(
                        text_document=lsp.TextDocumentIdentifier(uri=uri),
                        position=lsp.Position(line=line, character=character),
                    )
                )
                items = result.items if isinstance(result, lsp.CompletionList) else result
                if items:
                    return {item.label for item in items}
                await asyncio.sleep(0.1)

    async def hover(self, uri: str, line: int, character: int) -> str:
        """Hover text; asked again while the server is still loading the schema."""
        async with asyncio.timeout(10):
            while True:
                result = await self.client.text_document_hover_async(
                    lsp.HoverParams(
                        text_document=lsp.TextDocumentIdentifier(uri=uri),
                        position=lsp.Position(line=line, character=character),
                    )
                )
                if result and result.contents.value:
                    return result.contents.value
                await asyncio.sleep(0.1)

    async def diagnostics(self, uri: str, timeout: float = 10.0) -> list[tuple[int, str]]:
        """(0-based line, message) of the diagnostics the server publishes for `uri`."""
        async with asyncio.timeout(timeout):
            while uri not in self.client.diagnostics:
                await self.client.wait_for_notification("textDocument/publishDiagnostics")
        return sorted((d.range.start.line, d.message) for d in self.client.diagnostics[uri])


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

    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=root,
            workspace_folders=folders,
        )
    )
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def editor(tombi: LanguageClient) -> Editor:
    return Editor(tombi)
