"""`gpulint server`: the Language Server Protocol over stdio (pygls).

- Diagnostics are published for the buffer as it is edited (a short pause after the last
  change), when a file is opened or saved, and for every open file again when the editor's
  settings or a configuration file (pyproject.toml, gpulint.toml) change. Notebooks open in
  the editor (LSP notebook-document sync) are linted as `gpulint check` lints the .ipynb file:
  their Python code cells as one program, findings published on the cells they fall in.
- Code actions: each fix of the findings in the range (safe fixes preferred; unsafe ones say
  so in their title), `# noqa` for a finding, and the source action "fix all safe fixes"
  (`source.fixAll.gpulint`, and `notebook.source.fixAll.gpulint` for a notebook: what
  `gpulint fix` would do to the buffer).
- Hover over a finding, or over a code such as GPU101 in a comment, shows the rule's docs.

The server never waits on its own work (issue 22): linting runs in worker processes
(worker.py) that a newer version of the document stops, so requests are answered meanwhile.
What is linted, and when a diagnostic may be published, is documents.py; the code actions are
actions.py; the answers the LSP specification requires where pygls gave none, protocol.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any, Optional

from lsprotocol import types

from gpulint.server.actions import fix_all, quick_fixes, resolves_edits
from gpulint.server.analysis import Positions, code_written_at, codes_at, docs_site, rule_docs
from gpulint.server.documents import GpulintServer
from gpulint.server.worker import Worker

FIX_ALL_KIND = "source.fixAll.gpulint"
NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.gpulint"
CONFIG_GLOBS = ("**/pyproject.toml", "**/gpulint.toml")
log = logging.getLogger("gpulint.server")


def create_server(cache: bool = True, cache_dir: Optional[Path] = None,
                  worker: Optional[Worker] = None) -> GpulintServer:
    server = GpulintServer(cache, cache_dir, worker)

    @server.feature(types.INITIALIZE)
    def initialize(ls: GpulintServer, params: types.InitializeParams) -> None:
        if params.initialization_options is not None:
            ls.configure(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: GpulintServer, params: types.InitializedParams) -> None:
        asyncio.get_running_loop().run_in_executor(None, ls.worker.warm)  # ready before the first file opens
        watched = ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files
        if watched and watched.dynamic_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=glob) for glob in CONFIG_GLOBS])
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[
                    types.Registration(id="gpulint-config-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                       register_options=options)]))
            except Exception as exc:  # noqa: BLE001 - the editor can still send changes by itself
                log.warning("could not register the configuration file watcher: %s", exc)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: GpulintServer, *args: Any) -> None:
        ls.worker.stop()

    @server.feature(types.EXIT)
    def exit_(ls: GpulintServer, *args: Any) -> None:
        """Exit at once, 0 after `shutdown` and 1 without (the specification's codes); nothing the
        server still runs (a project pass, a lint) may hold the process."""
        ls.worker.stop()
        sys.stdout.flush()
        os._exit(0 if ls.protocol._shutdown else 1)

    # --- text documents -------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: GpulintServer, params: types.DidOpenTextDocumentParams) -> None:
        if ls.target(params.text_document.uri) is not None:
            await ls.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: GpulintServer, params: types.DidChangeTextDocumentParams) -> None:
        await ls.changed(params.text_document.uri, params.text_document.version)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: GpulintServer, params: types.DidSaveTextDocumentParams) -> None:
        await ls.saved(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GpulintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.closed(params.text_document.uri, (params.text_document.uri,))

    # --- notebooks ------------------------------------------------------------------------------
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def notebook_did_open(ls: GpulintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        await ls.opened(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    async def notebook_did_change(ls: GpulintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        await ls.changed(params.notebook_document.uri, params.notebook_document.version)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def notebook_did_save(ls: GpulintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        await ls.saved(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: GpulintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        uris = tuple(cell.uri for cell in params.cell_text_documents)
        ls.closed(params.notebook_document.uri, uris + ls.cells_published.get(params.notebook_document.uri, ()))

    # --- settings and configuration files ------------------------------------------------------
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: GpulintServer, params: types.DidChangeConfigurationParams) -> None:
        ls.configure(params.settings)
        ls.epoch += 1
        await ls.publish_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_watched_files(ls: GpulintServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.epoch += 1
        for key, token in list(ls.sessions.items()):
            if key in ls.projects:
                await ls.refresh_project(key, token)
        await ls.publish_all()

    # --- requests -------------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND,
                           NOTEBOOK_FIX_ALL_KIND],
        resolve_provider=True))
    async def code_action(ls: GpulintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        located = ls.locate(uri)
        if located is None:
            return []
        key, cell = located
        only = [str(kind) for kind in params.context.only or []]
        actions: list[types.CodeAction] = []
        if not only or any(kind.startswith("quickfix") for kind in only):
            target, findings = await ls.request_findings(key)
            actions += quick_fixes(ls, target, findings, cell, params.range)
        fix_all_kinds = [FIX_ALL_KIND] + ([NOTEBOOK_FIX_ALL_KIND] if cell is not None else [])
        for kind in fix_all_kinds:
            if not only and kind != FIX_ALL_KIND or only and not any(kind.startswith(k) for k in only):
                continue
            action = types.CodeAction(title="gpulint: fix all safe fixes", kind=kind, data={"uri": uri})
            if resolves_edits(ls):  # the edits are computed when the action is chosen, not on every request
                actions.append(action)
            else:
                resolved = await fix_all(ls, action)
                if resolved.edit is not None:
                    actions.append(resolved)
        return actions

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls: GpulintServer, action: types.CodeAction) -> types.CodeAction:
        return await fix_all(ls, action) if action.kind in (FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND) else action

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: GpulintServer, params: types.HoverParams) -> Optional[types.Hover]:
        uri = params.text_document.uri
        located = ls.locate(uri)
        document = ls.open_text(uri)
        if located is None or document is None:
            return None
        key, cell = located
        text = document.source
        positions = Positions(text, ls.encoding())
        offset = positions.offset(params.position.line, params.position.character)
        target = ls.target(key)
        site = docs_site(target.path if target is not None else ls.path_of(key), ls.editor)
        written = code_written_at(text, offset)  # a code in a comment: its docs need no lint
        if written is not None:
            codes = [written]
        else:
            _, findings = await ls.request_findings(key)
            mine = [f for f in findings if cell is None or (f.cell.number - 1 if f.cell else 0) == cell]
            codes = codes_at(positions, offset, mine)
        docs = [d for d in (rule_docs(code, site) for code in codes) if d]
        if not docs:
            return None
        return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, "\n\n---\n\n".join(docs)))

    return server


def serve(cache: bool = True, cache_dir: Optional[Path] = None, worker: Optional[Worker] = None) -> None:
    """Run the server on stdin/stdout until the client exits; the exit status is 0 only after `shutdown`."""
    server = create_server(cache, cache_dir, worker)
    try:
        server.start_io()
    finally:
        server.worker.stop()
    sys.exit(0 if server.protocol._shutdown else 1)
