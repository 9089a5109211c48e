"""`gpulint server` end to end: a real LSP client (pytest-lsp) drives the server over stdio.

Diagnostics of the unsaved buffer (positions in UTF-16 code units, as LSP counts them), a fix
applied through a code action, the "fix all safe fixes" source action, hover docs, and
configuration changes: a pyproject.toml edited on disk, and the editor's own settings.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import AsyncIterator, Callable

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

TRAIN = '''\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
ds = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
tag = "🚀"; loader = DataLoader(ds, batch_size=8)
model = torch.nn.Linear(8, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for x, y in loader:
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
'''
# GPU101 on the DataLoader call (a safe fix: a TensorDataset of CPU tensors); the emoji before it
# is two UTF-16 code units, so the call starts at character 21, not 20. GPU201 on SGD (unsafe fix).
CALL = types.Range(types.Position(5, 21), types.Position(5, 49))


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "gpulint", "server"]))
async def client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    registered: list[str] = []

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:  # as editors do: remember what to watch
        registered.extend(str(r.register_options) for r in params.registrations)

    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True),
            configuration=False),
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(code_action_literal_support=types.ClientCodeActionLiteralOptions(
                code_action_kind=types.ClientCodeActionKindOptions(value_set=[types.CodeActionKind.QuickFix])),
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]))),
    )
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=tmp_path.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="project")]))
    assert result.capabilities.code_action_provider.resolve_provider  # clients resolve "fix all" when chosen
    yield
    await lsp_client.shutdown_session()


async def _until(client: LanguageClient, uri: str, done: Callable[[list[types.Diagnostic]], bool]) -> list:
    """Wait for the server to publish diagnostics for `uri` that satisfy `done`."""
    async def wait() -> list:
        while not (uri in client.diagnostics and done(client.diagnostics[uri])):
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return client.diagnostics[uri]
    try:
        return await asyncio.wait_for(wait(), timeout=30)
    except asyncio.TimeoutError:
        raise AssertionError(f"no such diagnostics for {uri}; last published: {client.diagnostics.get(uri)}") from None


def _codes(diagnostics: list[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


async def _open(client: LanguageClient, path: Path, text: str = TRAIN) -> str:
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    await _until(client, uri, lambda d: _codes(d) == ["GPU101", "GPU201"])
    return uri


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        line = lines[position.line] if position.line < len(lines) else ""
        prefix = line.encode("utf-16-le")[:2 * position.character].decode("utf-16-le")
        return sum(len(x) for x in lines[:position.line]) + len(prefix)

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
        lines = text.splitlines(keepends=True)
    return text


@pytest.mark.asyncio
async def test_diagnostics_follow_the_unsaved_buffer(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "train.py")
    by_code = {d.code: d for d in client.diagnostics[uri]}
    assert by_code["GPU101"].range == CALL and by_code["GPU101"].severity == types.DiagnosticSeverity.Warning
    assert by_code["GPU101"].source == "gpulint" and by_code["GPU101"].code_description is None  # no site: no link
    edited = TRAIN + "adam = torch.optim.Adam(model.parameters())\n"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangeWholeDocument(text=edited)]))
    diagnostics = await _until(client, uri, lambda d: len(d) == 3)
    assert _codes(diagnostics) == ["GPU101", "GPU201", "GPU201"]
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == TRAIN  # the buffer, not the file


@pytest.mark.asyncio
async def test_code_actions_fix_and_label_unsafe_fixes(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "train.py")
    whole = types.Range(types.Position(5, 0), types.Position(7, 49))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), whole, types.CodeActionContext(diagnostics=client.diagnostics[uri])))
    by_title = {a.title: a for a in actions}
    safe = by_title["gpulint: Add `pin_memory=True` (GPU101)"]
    assert safe.kind == types.CodeActionKind.QuickFix and safe.is_preferred
    unsafe = by_title["gpulint: Add `fused=True` (GPU201, unsafe fix: may change numerics or behaviour)"]
    assert unsafe.kind == types.CodeActionKind.QuickFix and not unsafe.is_preferred
    assert "gpulint: suppress GPU101 on this line (# noqa)" in by_title
    [fix_all] = [a for a in actions if a.kind == "source.fixAll.gpulint"]
    assert fix_all.edit is None  # the client resolves it when chosen
    fix_all = await client.code_action_resolve_async(fix_all)
    [change] = safe.edit.document_changes
    fixed = _apply(TRAIN, change.edits)
    assert 'tag = "🚀"; loader = DataLoader(ds, batch_size=8, pin_memory=True)\n' in fixed
    [all_change] = fix_all.edit.document_changes
    assert _apply(TRAIN, all_change.edits) == fixed  # the only safe fix here
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangeWholeDocument(text=fixed)]))
    assert _codes(await _until(client, uri, lambda d: _codes(d) == ["GPU201"])) == ["GPU201"]


@pytest.mark.asyncio
async def test_hover_shows_the_rule_docs(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "train.py")
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(5, 30)))
    assert hover is not None and hover.contents.value.startswith("# dataloader-without-pin-memory (GPU101)")
    on_noqa = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(0, 3)))
    assert on_noqa is None  # `import`: nothing to say
    assert "http" not in hover.contents.value and "Docs:" not in hover.contents.value  # no site: no link


@pytest.mark.asyncio
async def test_a_docs_url_links_diagnostics_and_hover_to_the_rule_pages(client: LanguageClient,
                                                                        tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\ndocs-url = "https://docs.example.org/gpulint/"\n')
    uri = await _open(client, tmp_path / "train.py")
    by_code = {d.code: d for d in client.diagnostics[uri]}
    assert by_code["GPU101"].code_description.href == "https://docs.example.org/gpulint/rules/GPU101/"
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(5, 30)))
    assert hover.contents.value.rstrip().endswith("Docs: https://docs.example.org/gpulint/rules/GPU101/")


@pytest.mark.asyncio
async def test_a_configuration_file_change_takes_effect(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "train.py")
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.gpulint]\nignore = ["GPU101"]\n')
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        [types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Created)]))
    assert _codes(await _until(client, uri, lambda d: _codes(d) == ["GPU201"])) == ["GPU201"]
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\n[tool.gpulint.per-file-ignores]\n"train.py" = ["GPU"]\n')
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        [types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Changed)]))
    assert not await _until(client, uri, lambda d: not d)


@pytest.mark.asyncio
async def test_the_editors_settings_take_effect(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "train.py")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"gpulint": {"ignore": ["GPU201"]}}))
    assert _codes(await _until(client, uri, lambda d: _codes(d) == ["GPU101"])) == ["GPU101"]
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"gpulint": {"select": ["GPU2"]}}))
    assert _codes(await _until(client, uri, lambda d: _codes(d) == ["GPU201"])) == ["GPU201"]
