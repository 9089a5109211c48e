"""Code actions as workspace edits: each fix and `# noqa` of the findings in a range, and "fix all
safe fixes" (what `gpulint fix` would write), for a text document or across a notebook's cells.
Actions, edits and ranges are LSP's JSON objects as plain dicts."""

from __future__ import annotations

from typing import Any, Optional

from gpulint.core.edits import Applicability, Edit
from gpulint.core.findings import Finding
from gpulint.core.settings import Settings
from gpulint.server.analysis import Positions, docs_site, fix_title, noqa_edits, notebook_noqa_edits
from gpulint.server.convert import UNUSED_SUPPRESSION, diagnostic, finding_range, lsp_range
from gpulint.server.documents import GpulintServer, Target
from gpulint.server.protocol import ContentModified
from gpulint.server.worker import Superseded

QUICK_FIX = "quickfix"  # CodeActionKind
Action = dict[str, Any]


def document_edit(ls: GpulintServer, uri: str, text: str, edits: list[Edit]) -> dict[str, Any]:
    """A TextDocumentEdit: the edits of one document, for the version the editor holds."""
    document = ls.open_text(uri)
    positions = Positions(text, ls.encoding())
    return {"textDocument": {"uri": uri, "version": document.version if document else None},
            "edits": [{"range": lsp_range(positions, e.start, e.end), "newText": e.content} for e in edits]}


def workspace_edit(ls: GpulintServer, target: Target, edits: dict[int, list[Edit]]) -> Optional[dict[str, Any]]:
    """Edits by cell index (a text document's are under index 0) as a workspace edit; None: no edit."""
    changes = []
    for index, cell_edits in sorted(edits.items()):
        if not cell_edits:
            continue
        if target.is_notebook:
            changes.append(document_edit(ls, target.cell_uris[index], target.cells[index][1], cell_edits))
        else:
            changes.append(document_edit(ls, target.key, target.text, cell_edits))
    return {"documentChanges": changes} if changes else None


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def resolves_edits(ls: GpulintServer) -> bool:
    """Whether the client resolves a code action's edit when it is chosen (codeAction/resolve)."""
    properties = _get(ls.client_capabilities, "textDocument", "codeAction", "resolveSupport", "properties")
    return isinstance(properties, list) and "edit" in properties


async def fix_all(ls: GpulintServer, action: Action) -> Action:
    """The "fix all safe fixes" action with its edits, for the buffer (or notebook) as it is now."""
    data = action.get("data")
    uri = data.get("uri") if isinstance(data, dict) else None
    located = ls.locate(uri) if isinstance(uri, str) else None
    target = ls.target(located[0]) if located is not None else None
    if target is None:
        return action
    settings = ls.settings(target)
    if not isinstance(settings, Settings):
        return action
    project = ls.projects.get(target.key)
    try:
        if target.is_notebook:
            edits = await ls.worker.run(f"fix:{target.key}", "fix_cells", target.path, target.cells, settings, project)
        else:
            edits = {0: await ls.worker.run(f"fix:{target.key}", "fix_all", target.path, target.text, settings,
                                            project)}
    except Superseded:
        raise ContentModified(f"{target.key} changed while gpulint was fixing it") from None
    now = ls.target(target.key)
    if now is None or now.content != target.content:
        raise ContentModified(f"{target.key} changed while gpulint was fixing it")
    edit = workspace_edit(ls, target, edits)
    resolved = {key: value for key, value in action.items() if key != "edit"}
    return {**resolved, "edit": edit} if edit is not None else resolved


def quick_fixes(ls: GpulintServer, target: Target, findings: list[Finding], cell: Optional[int],
                wanted: dict[str, Any]) -> list[Action]:
    """Each fix, and a `# noqa`, of the findings of one document (or cell) in the range asked for."""
    text = target.cells[cell][1] if cell is not None else target.text
    positions = Positions(text, ls.encoding())
    low = positions.offset(wanted["start"]["line"], wanted["start"]["character"])
    high = positions.offset(wanted["end"]["line"], wanted["end"]["character"])
    actions: list[Action] = []
    site = docs_site(target.path, ls.editor)
    for finding in findings:
        if cell is not None and (finding.cell.number - 1 if finding.cell else 0) != cell:
            continue
        start, end = finding_range(positions, finding)
        if end < low or start > high:
            continue
        shown = diagnostic(finding, positions, site)
        if finding.fix is not None:
            by_cell: dict[int, list[Edit]] = {}
            for edit in finding.fix.edits:
                by_cell.setdefault(edit.cell - 1 if edit.cell is not None else 0, []).append(edit)
            safe = finding.fix.applicability is Applicability.SAFE
            action: Action = {"title": fix_title(finding), "kind": QUICK_FIX, "diagnostics": [shown],
                              "isPreferred": safe}
            fix_edit = workspace_edit(ls, target, by_cell)
            if fix_edit is not None:
                action["edit"] = fix_edit
            actions.append(action)
        if finding.code == UNUSED_SUPPRESSION:
            continue
        noqa = notebook_noqa_edits(target.cells, finding) if target.is_notebook else {0: noqa_edits(text, finding)}
        suppress = workspace_edit(ls, target, noqa)
        if suppress is not None:
            actions.append({"title": f"gpulint: suppress {finding.code} on this line (# noqa)", "kind": QUICK_FIX,
                            "diagnostics": [shown], "edit": suppress})
    return actions
