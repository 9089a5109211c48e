"""`gpulint server`: the Language Server Protocol over stdio (gpulint's own protocol layer, protocol.py).

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
actions.py; what the editor holds open, workspace.py; JSON-RPC and the LSP lifecycle, protocol.py.
Nothing here loads LibCST or a rule before `initialize` is answered (issue 25).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, Optional

from gpulint import __version__
from gpulint.server.analysis import Positions, code_written_at, codes_at, docs_site, rule_docs
from gpulint.server.documents import GpulintServer
from gpulint.server.worker import Worker
from gpulint.server.workspace import Workspace, choose_encoding

FIX_ALL_KIND = "source.fixAll.gpulint"
NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.gpulint"
CODE_ACTION_KINDS = ["quickfix", "source.fixAll", FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND]
CONFIG_GLOBS = ("**/pyproject.toml", "**/gpulint.toml")
INCREMENTAL = 2  # TextDocumentSyncKind
NOTEBOOK_SYNC = {"notebookSelector": [{"notebook": "*", "cells": [{"language": "python"}]}], "save": True}
log = logging.getLogger("gpulint.server")

# --- the params each method needs (protocol.shape_problem); anything else the client sends is kept ------
NULL = type(None)
URI = {"uri": str}
POSITION = {"line": int, "character": int}
RANGE = {"start": POSITION, "end": POSITION}
TEXT_ITEM = {"uri": str, "languageId": str, "version": int, "text": str}
VERSIONED = {"uri": str, "version": int}
CONTENT_CHANGE = {"range?": (RANGE, NULL), "text": str}
CELL = {"kind": int, "document": str}
FOLDER = {"uri": str, "name": str}
INITIALIZE = {"capabilities": dict, "processId?": (int, NULL), "rootUri?": (str, NULL), "rootPath?": (str, NULL),
              "workspaceFolders?": ([FOLDER], NULL)}
DID_OPEN = {"textDocument": TEXT_ITEM}
DID_CHANGE = {"textDocument": VERSIONED, "contentChanges": [CONTENT_CHANGE]}
DOCUMENT = {"textDocument": URI}
NOTEBOOK_DID_OPEN = {"notebookDocument": {"uri": str, "notebookType": str, "version": int, "cells": [CELL]},
                     "cellTextDocuments": [TEXT_ITEM]}
NOTEBOOK_DID_CHANGE = {"notebookDocument": VERSIONED, "change": {"cells?": {
    "structure?": {"array": {"start": int, "deleteCount": int, "cells?": [CELL]}, "didOpen?": [TEXT_ITEM],
                   "didClose?": [URI]},
    "data?": [CELL],
    "textContent?": [{"document": VERSIONED, "changes": [CONTENT_CHANGE]}]}}}
NOTEBOOK_DID_CLOSE = {"notebookDocument": URI, "cellTextDocuments": [URI]}
CODE_ACTION = {"textDocument": URI, "range": RANGE, "context": {"diagnostics": [dict], "only?": [str]}}
CODE_ACTION_RESOLVE = {"title": str, "kind?": str}
HOVER = {"textDocument": URI, "position": POSITION}
WATCHED_FILES = {"changes": [{"uri": str, "type": int}]}
FOLDERS_CHANGE = {"event": {"added": [FOLDER], "removed": [FOLDER]}}


def _get(data: Any, *keys: str) -> Any:
    """data[key][key]...; None where a level is missing or not an object."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def capabilities(client: dict[str, Any], encoding: str) -> dict[str, Any]:
    """What the server offers (the same as under pygls; notebook sync only to clients that have it)."""
    offered: dict[str, Any] = {
        "positionEncoding": encoding,
        "textDocumentSync": {"openClose": True, "change": INCREMENTAL, "save": True},
        "hoverProvider": True,
        "codeActionProvider": {"codeActionKinds": CODE_ACTION_KINDS, "resolveProvider": True},
        "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}},
    }
    if client.get("notebookDocument") is not None:
        offered["notebookDocumentSync"] = NOTEBOOK_SYNC
    return offered


def _warm_imports() -> None:
    """Import in a thread what the first publish needs in this process, while the editor is still
    sending didOpen and the lint worker starts (the first diagnostics wait for neither import)."""
    try:
        import gpulint.core.docs_url
        import gpulint.server.actions  # noqa: F401
    except Exception:
        log.exception("warming the server's imports failed")


def create_server(cache: bool = True, cache_dir: Optional[Path] = None,
                  worker: Optional[Worker] = None) -> GpulintServer:
    server = ls = GpulintServer(cache, cache_dir, worker)

    # --- the lifecycle --------------------------------------------------------------------------
    @server.request("initialize", INITIALIZE)
    def initialize(params: dict[str, Any]) -> dict[str, Any]:
        client = params["capabilities"]
        encoding = choose_encoding(client)
        root_uri = params.get("rootUri")
        if root_uri is None and params.get("rootPath"):
            root_uri = Path(os.path.abspath(params["rootPath"])).as_uri()
        ls.client_capabilities = client
        ls.workspace = Workspace(root_uri, params.get("workspaceFolders") or [], encoding)
        if params.get("initializationOptions") is not None:
            ls.configure(params["initializationOptions"])
        return {"capabilities": capabilities(client, encoding),
                "serverInfo": {"name": "gpulint", "version": __version__}}

    @server.notification("initialized")
    async def initialized(params: Any) -> None:
        asyncio.get_running_loop().run_in_executor(None, ls.worker.warm)  # ready before the first file opens
        threading.Thread(target=_warm_imports, name="gpulint-warm-imports", daemon=True).start()
        if _get(ls.client_capabilities, "workspace", "didChangeWatchedFiles", "dynamicRegistration") is True:
            options = {"watchers": [{"globPattern": glob} for glob in CONFIG_GLOBS]}
            try:
                await ls.send_request("client/registerCapability", {"registrations": [{
                    "id": "gpulint-config-files", "method": "workspace/didChangeWatchedFiles",
                    "registerOptions": options}]})
            except Exception as exc:  # noqa: BLE001 - the editor can still send changes by itself
                log.warning("could not register the configuration file watcher: %s", exc)

    @server.request("shutdown")
    def shutdown(params: Any) -> None:
        ls.worker.stop()

    # --- text documents -------------------------------------------------------------------------
    @server.notification("textDocument/didOpen", DID_OPEN)
    def did_open(params: dict[str, Any]) -> Any:
        ls.workspace.open_text(params["textDocument"])
        return _open_text(params["textDocument"]["uri"])

    async def _open_text(uri: str) -> None:
        if ls.target(uri) is not None:
            await ls.opened(uri)

    @server.notification("textDocument/didChange", DID_CHANGE)
    def did_change(params: dict[str, Any]) -> Any:
        document = params["textDocument"]
        ls.workspace.change_text(document, params["contentChanges"])
        return ls.changed(document["uri"], document["version"])

    @server.notification("textDocument/didSave", DOCUMENT)
    def did_save(params: dict[str, Any]) -> Any:
        return ls.saved(params["textDocument"]["uri"])

    @server.notification("textDocument/didClose", DOCUMENT)
    def did_close(params: dict[str, Any]) -> None:
        uri = params["textDocument"]["uri"]
        ls.workspace.close_text(uri)
        ls.closed(uri, (uri,))

    # --- notebooks ------------------------------------------------------------------------------
    @server.notification("notebookDocument/didOpen", NOTEBOOK_DID_OPEN)
    def notebook_did_open(params: dict[str, Any]) -> Any:
        ls.workspace.open_notebook(params)
        return ls.opened(params["notebookDocument"]["uri"])

    @server.notification("notebookDocument/didChange", NOTEBOOK_DID_CHANGE)
    def notebook_did_change(params: dict[str, Any]) -> Any:
        ls.workspace.change_notebook(params)
        notebook = params["notebookDocument"]
        return ls.changed(notebook["uri"], notebook["version"])

    @server.notification("notebookDocument/didSave", {"notebookDocument": URI})
    def notebook_did_save(params: dict[str, Any]) -> Any:
        return ls.saved(params["notebookDocument"]["uri"])

    @server.notification("notebookDocument/didClose", NOTEBOOK_DID_CLOSE)
    def notebook_did_close(params: dict[str, Any]) -> None:
        ls.workspace.close_notebook(params)
        key = params["notebookDocument"]["uri"]
        uris = tuple(cell["uri"] for cell in params["cellTextDocuments"])
        ls.closed(key, uris + ls.cells_published.get(key, ()))

    # --- settings, configuration files and folders ----------------------------------------------
    @server.notification("workspace/didChangeConfiguration", {"settings": object})
    async def did_change_configuration(params: dict[str, Any]) -> None:
        ls.configure(params["settings"])
        ls.epoch += 1
        await ls.publish_all()

    @server.notification("workspace/didChangeWatchedFiles", WATCHED_FILES)
    async def did_change_watched_files(params: dict[str, Any]) -> None:
        ls.epoch += 1
        for key, token in list(ls.sessions.items()):
            if key in ls.projects:
                await ls.refresh_project(key, token)
        await ls.publish_all()

    @server.notification("workspace/didChangeWorkspaceFolders", FOLDERS_CHANGE)
    def did_change_workspace_folders(params: dict[str, Any]) -> None:
        for folder in params["event"]["removed"]:
            ls.workspace.remove_folder(folder["uri"])
        for folder in params["event"]["added"]:
            ls.workspace.add_folder(folder["uri"])

    # --- requests -------------------------------------------------------------------------------
    @server.request("textDocument/codeAction", CODE_ACTION)
    async def code_action(params: dict[str, Any]) -> list[dict[str, Any]]:
        from gpulint.server.actions import fix_all, quick_fixes, resolves_edits

        uri = params["textDocument"]["uri"]
        located = ls.locate(uri)
        if located is None:
            return []
        key, cell = located
        only = [str(kind) for kind in params["context"].get("only") or []]
        actions: list[dict[str, Any]] = []
        if not only or any(kind.startswith("quickfix") for kind in only):
            target, findings = await ls.request_findings(key, edits=True)
            actions += quick_fixes(ls, target, findings, cell, params["range"])
        fix_all_kinds = [FIX_ALL_KIND] + ([NOTEBOOK_FIX_ALL_KIND] if cell is not None else [])
        for kind in fix_all_kinds:
            if not only and kind != FIX_ALL_KIND or only and not any(kind.startswith(k) for k in only):
                continue
            action = {"title": "gpulint: fix all safe fixes", "kind": kind, "data": {"uri": uri}}
            if resolves_edits(ls):  # the edits are computed when the action is chosen, not on every request
                actions.append(action)
            else:
                resolved = await fix_all(ls, action)
                if resolved.get("edit") is not None:
                    actions.append(resolved)
        return actions

    @server.request("codeAction/resolve", CODE_ACTION_RESOLVE)
    async def resolve_code_action(action: dict[str, Any]) -> dict[str, Any]:
        from gpulint.server.actions import fix_all

        return await fix_all(ls, action) if action.get("kind") in (FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND) else action

    @server.request("textDocument/hover", HOVER)
    async def hover(params: dict[str, Any]) -> Optional[dict[str, Any]]:
        uri = params["textDocument"]["uri"]
        located = ls.locate(uri)
        document = ls.open_text(uri)
        if located is None or document is None:
            return None
        key, cell = located
        text = document.source
        positions = Positions(text, ls.encoding())
        offset = positions.offset(params["position"]["line"], params["position"]["character"])
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
        return {"contents": {"kind": "markdown", "value": "\n\n---\n\n".join(docs)}}

    return server


def serve(cache: bool = True, cache_dir: Optional[Path] = None, worker: Optional[Worker] = None) -> None:
    """Run the server on stdin/stdout until the client exits; the exit status is 0 only after `shutdown`."""
    server = create_server(cache, cache_dir, worker)
    status = server.serve()
    sys.stdout.flush()
    sys.exit(status)
