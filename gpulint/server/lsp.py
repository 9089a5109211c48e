"""`gpulint server`: the Language Server Protocol over stdio (pygls).

- Diagnostics are published for the buffer as it is edited (a short pause after the last
  change), when a file is opened or saved, and for every open file again when the editor's
  settings or a configuration file (pyproject.toml, gpulint.toml) change.
- Code actions: each fix of the findings in the range (safe fixes preferred; unsafe ones say
  so in their title), `# noqa` for a finding, and the source action "fix all safe fixes"
  (`source.fixAll.gpulint`, what `gpulint fix` would do to the buffer).
- Hover over a finding, or over a code such as GPU101 in a comment, shows the rule's docs.

The project pass (facts from the other files of the project, as the command line uses them)
runs when a file is opened or saved, in a worker thread; edits in between reuse it with the
buffer's own facts.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from gpulint import __version__
from gpulint.core.docs_url import rule_url
from gpulint.core.edits import Applicability, Edit
from gpulint.core.findings import Finding
from gpulint.core.settings import ConfigError
from gpulint.engine.linter import InternalError
from gpulint.project.view import ProjectView
from gpulint.rules.gpu000_invalid_file import InvalidFile
from gpulint.rules.gpu900_unused_suppression import UnusedSuppression
from gpulint.server.analysis import (
    EditorSettings,
    Positions,
    codes_at,
    docs_site,
    fix_all_edits,
    fix_title,
    lint_buffer,
    noqa_edits,
    rule_docs,
)

DEBOUNCE_S = 0.2  # lint this long after the last keystroke
FIX_ALL_KIND = "source.fixAll.gpulint"
CONFIG_GLOBS = ("**/pyproject.toml", "**/gpulint.toml")
log = logging.getLogger("gpulint.server")


def _path(uri: str) -> Optional[Path]:
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


class GpulintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("gpulint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.editor = EditorSettings()
        self.projects: dict[str, Optional[ProjectView]] = {}
        self.findings: dict[str, list[Finding]] = {}  # by URI, for the text they were computed on
        self.linted_text: dict[str, str] = {}

    # --- what a document is ---------------------------------------------------------------------
    def lintable(self, uri: str, language_id: Optional[str] = None) -> bool:
        path = _path(uri)
        if path is None:
            return language_id == "python"
        return path.suffix in (".py", ".pyi") or (language_id == "python" and path.suffix != ".ipynb")

    def path_of(self, uri: str) -> Path:
        """The path whose configuration applies: the file's, or an untitled buffer's in the workspace."""
        path = _path(uri)
        if path is not None:
            return path
        root = self.workspace.root_path
        return Path(root or ".") / "untitled.py"

    def encoding(self) -> str:
        value = str(self.workspace.position_encoding or "utf-16")
        return value if value in ("utf-8", "utf-16", "utf-32") else "utf-16"

    # --- diagnostics ----------------------------------------------------------------------------
    async def refresh_project(self, uri: str) -> None:
        """The project view of a document (facts of the files around it), computed off the loop."""
        path = _path(uri)
        if path is None or not path.is_file():
            self.projects[uri] = None
            return
        self.projects[uri] = await asyncio.to_thread(_project_view, path)

    def publish(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        if not self.lintable(uri, document.language_id):
            return
        text = document.source
        try:
            report = lint_buffer(self.path_of(uri), text, self.editor, self.projects.get(uri))
        except InternalError as exc:
            self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"gpulint: internal error: {exc}"))
            return
        if report.error is not None:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"gpulint: {report.error}"))
        self.findings[uri], self.linted_text[uri] = report.findings, text
        positions = Positions(text, self.encoding())
        site = docs_site(self.path_of(uri), self.editor)
        diagnostics = [_diagnostic(f, positions, site) for f in report.findings]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, diagnostics, document.version))

    def publish_all(self) -> None:
        for uri in list(self.workspace.text_documents):
            self.publish(uri)

    def current_findings(self, uri: str) -> list[Finding]:
        """Findings for the buffer as it is now (linted again when it changed since the last publish)."""
        text = self.workspace.get_text_document(uri).source
        if self.linted_text.get(uri) != text:
            self.findings[uri] = lint_buffer(self.path_of(uri), text, self.editor, self.projects.get(uri)).findings
            self.linted_text[uri] = text
        return self.findings.get(uri, [])


def _project_view(path: Path) -> Optional[ProjectView]:
    from gpulint.engine.cache import CacheError, ResultCache
    from gpulint.engine.project_scan import scan_projects

    try:
        cache = ResultCache.open(None)
    except (CacheError, OSError):
        cache = None
    try:
        return scan_projects([path], [path], cache).get(str(path))
    except Exception:  # the project pass sharpens precision; it never stops the server
        log.exception("project pass failed")
        return None


def _range(positions: Positions, start: int, end: int) -> types.Range:
    return types.Range(types.Position(*positions.position(start)), types.Position(*positions.position(end)))


def _diagnostic(finding: Finding, positions: Positions, site: Optional[str]) -> types.Diagnostic:
    """The finding as a diagnostic; it links to the rule's page only when a docs site is named."""
    start = positions.location_offset(finding.location.row, finding.location.column)
    end = positions.location_offset(finding.end_location.row, finding.end_location.column)
    severity = types.DiagnosticSeverity.Error if finding.code == InvalidFile.code else types.DiagnosticSeverity.Warning
    url = rule_url(finding.code, site)
    return types.Diagnostic(
        range=_range(positions, start, end), message=finding.message, severity=severity, code=finding.code,
        source="gpulint",
        code_description=types.CodeDescription(href=url) if url else None,
        tags=[types.DiagnosticTag.Unnecessary] if finding.code == UnusedSuppression.code else None,
    )


def _text_edits(positions: Positions, edits: list[Edit]) -> list[types.TextEdit]:
    return [types.TextEdit(_range(positions, e.start, e.end), e.content) for e in edits]


def _workspace_edit(uri: str, version: Optional[int], positions: Positions, edits: list[Edit]) -> types.WorkspaceEdit:
    document = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(document, _text_edits(positions, edits))])


def create_server() -> GpulintServer:
    server = GpulintServer()

    def configure(data: Any) -> None:
        try:
            server.editor = EditorSettings.from_client(data)
        except ConfigError as exc:
            server.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"gpulint: {exc}"))

    @server.feature(types.INITIALIZE)
    def initialize(ls: GpulintServer, params: types.InitializeParams) -> None:
        if params.initialization_options is not None:
            configure(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: GpulintServer, params: types.InitializedParams) -> None:
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

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: GpulintServer, params: types.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.lintable(uri, params.text_document.language_id):
            ls.publish(uri)  # at once, then again with the project's facts
            await ls.refresh_project(uri)
            ls.publish(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: GpulintServer, params: types.DidChangeTextDocumentParams) -> None:
        uri, version = params.text_document.uri, params.text_document.version
        await asyncio.sleep(DEBOUNCE_S)
        if ls.workspace.get_text_document(uri).version == version:  # no newer change arrived meanwhile
            ls.publish(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: GpulintServer, params: types.DidSaveTextDocumentParams) -> None:
        await ls.refresh_project(params.text_document.uri)
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GpulintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        for table in (ls.projects, ls.findings, ls.linted_text):
            table.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: GpulintServer, params: types.DidChangeConfigurationParams) -> None:
        configure(params.settings)
        ls.findings.clear()
        ls.linted_text.clear()
        ls.publish_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_watched_files(ls: GpulintServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.findings.clear()
        ls.linted_text.clear()
        for uri in list(ls.workspace.text_documents):
            if uri in ls.projects:
                await ls.refresh_project(uri)
        ls.publish_all()

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND],
        resolve_provider=True))
    def code_action(ls: GpulintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        if not ls.lintable(uri, document.language_id):
            return []
        only = params.context.only
        actions: list[types.CodeAction] = []
        positions = Positions(document.source, ls.encoding())
        if not only or any(str(kind).startswith("quickfix") for kind in only):
            actions += _quick_fixes(ls, uri, document.version, positions, params.range)
        if not only or any(FIX_ALL_KIND.startswith(str(kind)) for kind in only):
            action = types.CodeAction(title="gpulint: fix all safe fixes", kind=FIX_ALL_KIND,
                                      data={"uri": uri, "version": document.version})
            if _resolves_edits(ls):  # the edits are computed when the action is chosen, not on every request
                actions.append(action)
            else:
                resolved = _fix_all(ls, action)
                if resolved.edit is not None:
                    actions.append(resolved)
        return actions

    @server.feature(types.CODE_ACTION_RESOLVE)
    def resolve_code_action(ls: GpulintServer, action: types.CodeAction) -> types.CodeAction:
        return _fix_all(ls, action) if action.kind == FIX_ALL_KIND else action

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: GpulintServer, params: types.HoverParams) -> Optional[types.Hover]:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        if not ls.lintable(uri, document.language_id):
            return None
        positions = Positions(document.source, ls.encoding())
        offset = positions.offset(params.position.line, params.position.character)
        site = docs_site(ls.path_of(uri), ls.editor)
        docs = [d for d in (rule_docs(c, site) for c in codes_at(document.source, positions, offset,
                                                              ls.current_findings(uri))) if d]
        if not docs:
            return None
        return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, "\n\n---\n\n".join(docs)))

    return server


def _resolves_edits(ls: GpulintServer) -> bool:
    code_action = ls.client_capabilities.text_document and ls.client_capabilities.text_document.code_action
    support = code_action and code_action.resolve_support
    return bool(support and "edit" in support.properties)


def _fix_all(ls: GpulintServer, action: types.CodeAction) -> types.CodeAction:
    """The "fix all safe fixes" action with its edits, for the buffer as it is now."""
    uri = action.data.get("uri") if isinstance(action.data, dict) else None
    if not isinstance(uri, str):
        return action
    document = ls.workspace.get_text_document(uri)
    edits = fix_all_edits(ls.path_of(uri), document.source, ls.editor, ls.projects.get(uri))
    if edits:
        positions = Positions(document.source, ls.encoding())
        action.edit = _workspace_edit(uri, document.version, positions, edits)
    return action


def _quick_fixes(ls: GpulintServer, uri: str, version: Optional[int], positions: Positions,
                 wanted: types.Range) -> list[types.CodeAction]:
    low = positions.offset(wanted.start.line, wanted.start.character)
    high = positions.offset(wanted.end.line, wanted.end.character)
    actions = []
    site = docs_site(ls.path_of(uri), ls.editor)
    for finding in ls.current_findings(uri):
        start = positions.location_offset(finding.location.row, finding.location.column)
        end = positions.location_offset(finding.end_location.row, finding.end_location.column)
        if end < low or start > high:
            continue
        diagnostic = _diagnostic(finding, positions, site)
        if finding.fix is not None:
            safe = finding.fix.applicability is Applicability.SAFE
            edits: list[Edit] = list(finding.fix.edits)
            actions.append(types.CodeAction(title=fix_title(finding), kind=types.CodeActionKind.QuickFix,
                                            diagnostics=[diagnostic], is_preferred=safe,
                                            edit=_workspace_edit(uri, version, positions, edits)))
        noqa = noqa_edits(positions.text, finding) if finding.code != UnusedSuppression.code else []
        if noqa:
            actions.append(types.CodeAction(title=f"gpulint: suppress {finding.code} on this line (# noqa)",
                                            kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic],
                                            edit=_workspace_edit(uri, version, positions, noqa)))
    return actions


def serve() -> None:
    """Run the server on stdin/stdout until the client exits."""
    create_server().start_io()
