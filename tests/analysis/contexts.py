"""One way to build an AstContext from a small source for the analysis tests, with the file's own facts as its
project view (alone), or as a file other project files import."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

from gpulint.analysis.ast_context import AstContext
from gpulint.core.settings import Settings
from gpulint.project.facts import scan
from gpulint.project.view import ProjectView


def ast_context(text: str, path: str = "train.py", imported: bool = False) -> AstContext:
    tree = ast.parse(text)
    project = ProjectView.alone(scan(tree))
    if imported:
        project = replace(project, imported=True)
    return AstContext(Path(path), text, tree, Settings(), project)
