"""The server's state: the editor's open documents and notebooks, their lints and project views.

Only what the editor has opened is linted, for the very text it holds: a lint runs in the worker
(worker.py), a newer version of the document supersedes it, and its findings are published only if
the document is still open with that text. While a configuration file is invalid, the last valid
configuration stays in use and the problem is shown once. The project pass runs in a thread; its
results cache goes where the command line's would when run in the project.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Hashable, Optional, Union
from urllib.parse import unquote

from gpulint.core.settings import ConfigError, Settings
from gpulint.records import dataclass
from gpulint.server.analysis import EditorSettings, Positions, docs_site
from gpulint.server.cells import NotebookCells
from gpulint.server.convert import diagnostic
from gpulint.server.protocol import ContentModified, LanguageServer
from gpulint.server.worker import JobFailed, Superseded, Worker
from gpulint.server.workspace import MARKUP_CELL, NotebookDocument, TextDocument, Workspace
from gpulint.server.workspace import file_path as _path

if TYPE_CHECKING:
    from gpulint.core.findings import Finding
    from gpulint.project.view import ProjectView

DEBOUNCE_S = 0.2  # lint this long after the last keystroke
PYTHON_CELLS = frozenset({"python", "python3", "ipython", "ipython3"})
ERROR, INFO = 1, 3  # MessageType
log = logging.getLogger("gpulint.server")


def _is_regular_file(path: Optional[Path]) -> bool:
    """Whether `path` is a regular file; False for FIFOs and devices, and for names the system
    refuses (a component over 255 bytes), where Path.is_file() raises."""
    return path is not None and os.path.isfile(path)


@dataclass(frozen=True)
class Target:
    """What one lint covers: an open text document, or an open notebook with its cells."""

    key: str  # the document's URI, or the notebook's
    path: Path  # the file whose configuration applies
    text: str = ""  # a text document's text
    cells: NotebookCells = ()  # a notebook's cells, as linted
    cell_uris: tuple[str, ...] = ()  # the URI of each of those cells
    is_notebook: bool = False

    @property
    def content(self) -> Hashable:
        return (self.text, self.cells, self.cell_uris)


@dataclass(frozen=True)
class Lint:
    """The lint of one content under one generation (settings epoch, project view epoch); its task
    holds the findings once done."""

    content: Hashable
    generation: tuple[int, int]
    task: "asyncio.Future[Optional[list[Finding]]]"

    def usable(self, content: Hashable, generation: tuple[int, int]) -> bool:
        if self.content != content or self.generation != generation:
            return False
        return not self.task.done() or not self.task.cancelled() and self.task.exception() is None


class Excluded:
    """The file is excluded by the configuration: no findings."""


EXCLUDED = Excluded()


class GpulintServer(LanguageServer):
    """The open documents, their lints and project views, and what was shown to the user."""

    def __init__(self, cache: bool = True, cache_dir: Optional[Path] = None, worker: Optional[Worker] = None) -> None:
        super().__init__()
        self.workspace = Workspace(None, [])  # replaced by `initialize`'s
        self.client_capabilities: dict[str, Any] = {}
        self.editor = EditorSettings()
        self.worker = worker or Worker()
        self.cache, self.cache_dir = cache, cache_dir
        self.epoch = 0  # the editor's settings and the configuration files: bumped when they change
        self.project_epochs: dict[str, int] = {}  # per document: bumped when its project view changes
        self.projects: dict[str, Optional[ProjectView]] = {}
        # the latest lint of each document, done or running: for its diagnostics (False: no fix edits,
        # no LibCST) and for its code actions (True: the fixes' edits built)
        self.lints: dict[tuple[str, bool], Lint] = {}
        self.sessions: dict[str, object] = {}  # a token per open document (a reopened one gets another)
        self.last_good: dict[str, Settings] = {}  # per document: its settings when the configuration last read
        self.config_errors: dict[str, str] = {}  # per document: the configuration error shown for it
        self.cells_published: dict[str, tuple[str, ...]] = {}  # per notebook: the cells given diagnostics
        self.errors_shown: set[str] = set()

    # --- what a document is ---------------------------------------------------------------------
    def open_text(self, uri: str) -> Optional[TextDocument]:
        """The open document of `uri`; None for one the editor has not opened (never read from disk)."""
        return self.workspace.get_text(uri)

    def notebook_of_cell(self, uri: str) -> Optional[NotebookDocument]:
        return self.workspace.notebook_of_cell(uri)

    def lintable(self, uri: str, language_id: Optional[str] = None) -> bool:
        path = _path(uri)
        if path is None:
            return language_id == "python"
        return path.suffix in (".py", ".pyi") or (language_id == "python" and path.suffix != ".ipynb")

    def path_of(self, uri: str, suffix: str = ".py") -> Path:
        """The path whose configuration applies: the file's, or an untitled buffer's in the workspace."""
        path = _path(uri)
        if path is not None:
            return path
        root = self.workspace.root_path
        return Path(root or ".") / f"untitled{suffix}"

    def encoding(self) -> str:
        return self.workspace.position_encoding

    def target(self, key: str) -> Optional[Target]:
        """The open document (or notebook) `key` as it is now; None when it is not open or not Python."""
        notebook = self.workspace.get_notebook(key)
        if notebook is not None:
            cells: list[tuple[str, str]] = []
            uris: list[str] = []
            for cell in notebook.cells:
                document = self.open_text(cell.document)
                if document is None:
                    continue
                python = (document.language_id or "python") in PYTHON_CELLS
                kind = "markdown" if cell.kind == MARKUP_CELL else "code" if python else "raw"
                cells.append((kind, document.source))
                uris.append(cell.document)
            return Target(key, self.path_of(key, ".ipynb"), "", tuple(cells), tuple(uris), is_notebook=True)
        document = self.open_text(key)
        if document is None or self.notebook_of_cell(key) is not None \
                or not self.lintable(key, document.language_id):
            return None
        return Target(key, self.path_of(key), document.source)

    def locate(self, uri: str) -> Optional[tuple[str, Optional[int]]]:
        """The lint that covers a request's document: (its key, the cell's index in the notebook or None)."""
        notebook = self.notebook_of_cell(uri)
        if notebook is not None:
            target = self.target(notebook.uri)
            if target is not None and unquote(uri) in [unquote(u) for u in target.cell_uris]:
                return target.key, [unquote(u) for u in target.cell_uris].index(unquote(uri))
            return None
        return (uri, None) if self.target(uri) is not None else None

    # --- configuration --------------------------------------------------------------------------
    def configure(self, data: Any) -> None:
        """The editor's settings; what is wrong in them is said once, and left at its default."""
        self.editor, problems = EditorSettings.read(data)
        if problems:
            self.show(ERROR, "gpulint: editor settings: " + "; ".join(problems))

    def settings(self, target: Target) -> Union[Settings, Excluded, None]:
        """The settings for a target. While its configuration is invalid: the last valid one (the
        error is shown once, not on every keystroke); None when there never was one."""
        try:
            resolver = self.editor.resolver()
            result: Union[Settings, Excluded] = (EXCLUDED if resolver.is_excluded(target.path)
                                                 else resolver.for_path(target.path))
        except ConfigError as exc:
            message = str(exc)
            if message not in self.config_errors.values():
                kept = "the last valid configuration stays in use" if target.key in self.last_good \
                    else "this file is not linted"
                self.show(ERROR, f"gpulint: {message} ({kept} until this is fixed)")
            self.config_errors[target.key] = message
            return self.last_good.get(target.key)
        if isinstance(result, Settings):
            self.last_good[target.key] = result
        if self.config_errors.pop(target.key, None) is not None:
            self.log_message(INFO, "gpulint: the configuration is valid again")
        return result

    def show(self, kind: int, message: str) -> None:
        """window/showMessage: a popup in the editor (`kind` is LSP's MessageType)."""
        self.notify("window/showMessage", {"type": kind, "message": message})

    def log_message(self, kind: int, message: str) -> None:
        """window/logMessage: a line in the editor's output panel for gpulint."""
        self.notify("window/logMessage", {"type": kind, "message": message})

    def stop_work(self) -> None:
        self.worker.stop()

    def report_server_error(self, error: BaseException, in_request: bool) -> None:
        """A bug in a handler: logged every time, shown once per distinct message (pygls showed it on
        every occurrence, a popup per keystroke); a request's failure is in its answer, not shown."""
        if isinstance(error, ContentModified):
            return  # the answer to a request whose document changed: not an error of the server
        message = f"gpulint: internal error: {type(error).__name__}: {error}"
        self.log_message(ERROR, message)
        if not in_request and message not in self.errors_shown:
            self.errors_shown.add(message)
            self.show(ERROR, message)

    # --- the project pass -----------------------------------------------------------------------
    def project_folder(self, path: Path) -> Path:
        """Where the command line would be run for `path`: the workspace folder that holds it (the
        deepest), else its project root (the nearest folder with pyproject.toml, setup.py or .git)."""
        from gpulint.project.view import find_root

        absolute = os.path.abspath(path)
        folders = [_path(uri) for uri in self.workspace.folders.values()]
        if not folders and self.workspace.root_path:
            folders = [Path(self.workspace.root_path)]
        holding = [f for f in folders if f is not None and absolute.startswith(os.path.join(os.path.abspath(f), ""))]
        if holding:
            return max(holding, key=lambda f: len(str(f)))
        return find_root(Path(absolute))

    def cache_for(self, path: Path) -> Optional[Path]:
        """The results cache directory for `path` (resolved as the command line resolves --cache-dir)."""
        from gpulint.engine.cache import CACHE_DIR_NAME

        if not self.cache:
            return None
        return self.cache_dir if self.cache_dir is not None else self.project_folder(path) / CACHE_DIR_NAME

    async def refresh_project(self, key: str, token: object) -> None:
        """The project view of a document (facts of the files around it), computed off the loop."""
        path = _path(key)
        if not _is_regular_file(path):
            return
        assert path is not None
        view = await asyncio.to_thread(_project_view, path, self.cache, self.cache_for(path))
        if self.sessions.get(key) is token:  # still the same open document
            self.projects[key] = view
            self.project_epochs[key] = self.project_epochs.get(key, 0) + 1

    # --- linting --------------------------------------------------------------------------------
    def generation(self, key: str) -> tuple[int, int]:
        return self.epoch, self.project_epochs.get(key, 0)

    async def findings(self, key: str, edits: bool = False) -> Optional[tuple[Target, list[Finding]]]:
        """The findings of document `key` as it is now, and what they were computed on; None when it
        is not open or nothing is to be linted. Raises Superseded when it changes meanwhile, JobFailed
        on a bug. Callers share one lint of one text. With `edits`, the findings' fixes have their
        edits (a code action's); without, a fix is its prediction only, as `gpulint check` reports it:
        the same findings at a third of the cost (no LibCST), what diagnostics and hovers need."""
        target = self.target(key)
        if target is None:
            return None
        edits = edits or target.is_notebook  # a notebook's lint always builds its fixes
        generation = self.generation(key)
        kinds = (True,) if edits else (False, True)  # a lint with edits serves one without too
        lint = next((lint for lint in (self.lints.get((key, kind)) for kind in kinds)
                     if lint is not None and lint.usable(target.content, generation)), None)
        if lint is None:
            lint = self.lints[(key, edits)] = Lint(target.content, generation,
                                                   asyncio.ensure_future(self._lint(target, generation[0], edits)))
        findings = await asyncio.shield(lint.task)
        return (target, findings) if findings is not None else None

    async def _lint(self, target: Target, epoch: int, edits: bool) -> Optional[list[Finding]]:
        settings = self.settings(target)
        if settings is None:
            return None
        findings: list[Finding] = []
        if isinstance(settings, Settings):
            project = self.projects.get(target.key)
            if target.is_notebook:
                findings = await self.worker.run(f"lint:{target.key}", "lint_cells", target.path, target.cells,
                                                 settings, project)
            else:
                job = f"{'edits' if edits else 'lint'}:{target.key}"
                findings = await self.worker.run(job, "lint", target.path, target.text, settings, project, edits)
        now = self.target(target.key)
        # a newer project view does not make these findings wrong for this text (a lint with it follows)
        if now is None or now.content != target.content or self.epoch != epoch:
            raise Superseded(target.key)
        return findings

    async def publish(self, key: str) -> None:
        """Lint document `key` and publish its diagnostics, unless it changed or closed meanwhile."""
        try:
            answer = await self.findings(key)
        except Superseded:
            return
        except JobFailed as exc:
            self.job_failed(key, exc)
            return
        if answer is not None:
            self.send_diagnostics(*answer)

    def job_failed(self, key: str, error: JobFailed) -> None:
        self.log_message(ERROR, f"gpulint: internal error while linting {key}: {error}")

    def publish_diagnostics(self, uri: str, diagnostics: list[dict[str, Any]],
                            version: Optional[int] = None) -> None:
        """textDocument/publishDiagnostics: what the editor shows for `uri` (an empty list clears it)."""
        self.notify("textDocument/publishDiagnostics", {"uri": uri, "diagnostics": diagnostics,
                                                        **({"version": version} if version is not None else {})})

    def send_diagnostics(self, target: Target, findings: list[Finding]) -> None:
        site = docs_site(target.path, self.editor)
        if not target.is_notebook:
            document = self.open_text(target.key)
            positions = Positions(target.text, self.encoding())
            diagnostics = [diagnostic(f, positions, site) for f in findings]
            self.publish_diagnostics(target.key, diagnostics, document.version if document else None)
            return
        by_cell: dict[int, list[Finding]] = {}
        for finding in findings:  # a finding about the whole notebook goes on its first cell
            by_cell.setdefault(finding.cell.number - 1 if finding.cell is not None else 0, []).append(finding)
        for index, uri in enumerate(target.cell_uris):
            document = self.open_text(uri)
            positions = Positions(target.cells[index][1], self.encoding())
            diagnostics = [diagnostic(f, positions, site) for f in by_cell.get(index, [])]
            self.publish_diagnostics(uri, diagnostics, document.version if document else None)
        for uri in set(self.cells_published.get(target.key, ())) - set(target.cell_uris):  # cells deleted
            self.publish_diagnostics(uri, [])
        self.cells_published[target.key] = target.cell_uris

    async def publish_all(self) -> None:
        """Every open document again (their URIs as the editor spelled them when it opened them)."""
        await asyncio.gather(*(self.publish(key) for key in list(self.sessions)))

    async def opened(self, key: str) -> None:
        """A document was opened: diagnostics at once, then again with the project's facts."""
        token = self.sessions[key] = object()
        await self.publish(key)  # first: the project pass would compete with it for the CPU
        await self.refresh_project(key, token)
        if self.sessions.get(key) is token and self.projects.get(key) is not None:
            await self.publish(key)

    def closed(self, key: str, uris: tuple[str, ...]) -> None:
        """A document was closed: its jobs stop, nothing more is published for it, its diagnostics go."""
        self.sessions.pop(key, None)
        for kind in ("lint", "edits", "fix"):
            self.worker.forget(f"{kind}:{key}")
        for table in (self.projects, self.project_epochs, self.last_good, self.config_errors, self.cells_published):
            table.pop(key, None)
        for edits in (False, True):
            self.lints.pop((key, edits), None)
        for uri in uris:
            self.publish_diagnostics(uri, [])

    def version_of(self, key: str) -> Optional[int]:
        notebook = self.workspace.get_notebook(key)
        document: Optional[Union[NotebookDocument, TextDocument]] = notebook
        if notebook is None:
            document = self.open_text(key)
        return document.version if document is not None else None

    async def changed(self, key: str, version: Optional[int]) -> None:
        """An edit: the lint of the older text stops now; the new one starts after a pause in typing."""
        if key not in self.sessions:
            return
        self.worker.supersede(f"lint:{key}")
        self.worker.supersede(f"edits:{key}")
        await asyncio.sleep(DEBOUNCE_S)
        if self.version_of(key) == version:  # no newer change arrived meanwhile
            await self.publish(key)

    async def saved(self, key: str) -> None:
        """A save: the project pass again (the file's facts on disk changed), then a lint with it."""
        token = self.sessions.get(key)
        if token is not None:
            await self.refresh_project(key, token)
            await self.publish(key)

    async def request_findings(self, key: str, edits: bool = False) -> tuple[Target, list[Finding]]:
        """Findings for a request (`edits`: with their fixes' edits); a document that changes meanwhile
        answers ContentModified (the editor asks again for the new text), one that is not linted
        answers with nothing."""
        try:
            answer = await self.findings(key, edits)
        except Superseded:
            raise ContentModified(f"{key} changed while gpulint was linting it") from None
        except JobFailed as exc:  # a bug in a rule: said in the log, and the request gets what is certain
            self.job_failed(key, exc)
            answer = None
        if answer is None:
            target = self.target(key)
            return (target or Target(key, self.path_of(key), "")), []
        return answer


def _project_view(path: Path, cache: bool, directory: Optional[Path]) -> Optional[ProjectView]:
    from gpulint.dispatch.project_scan import scan_projects
    from gpulint.engine.cache import CacheError, ResultCache

    results = None
    if cache:
        try:
            results = ResultCache.open(directory)
        except (CacheError, OSError):
            results = None
    try:
        return scan_projects([path], [path], results).get(str(path))
    except Exception:  # the project pass sharpens precision; it never stops the server
        log.exception("project pass failed")
        return None
