"""Where a script-wide setting goes: right after the imports that bring `torch` in.

`torch.set_float32_matmul_precision("high")` or `torch.backends.cudnn.benchmark = True` must run before
the model is built and after `torch` is bound; the end of the run of top-level imports that holds
`import torch` is both, and is where readers look for such settings.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from gpulint.core.context import FileContext
from gpulint.core.pending import InsertStatements


def _imports_only(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)


def _binds_module(statement: cst.BaseStatement, alias: str, module: str) -> bool:
    """`import torch` / `import torch as th` (alias `th`) on this top-level line."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Import):
            for name in small.names:
                bound = name.asname.name if name.asname is not None else name.name
                spelled = cst.Module([]).code_for_node(name.name)
                if isinstance(bound, cst.Name) and bound.value == alias and spelled == module:
                    return True
    return False


def after_torch_imports(ctx: FileContext, statement: str) -> Optional[tuple[str, InsertStatements]]:
    """`torch`'s name in the file and the edit that puts `statement` (code with `{torch}` for that name)
    after the top-level imports holding `import torch`; None when the file binds `torch` no other way
    than a top-level `import torch [as x]` could be found for (inside a try, a function, or not at all)."""
    torch = ctx.imports.module_alias("torch")
    if torch.edit is not None:
        return None  # no `import torch`: adding one as well as a setting is more than this fix should do
    body = ctx.module.body
    for index, line in enumerate(body):
        if _binds_module(line, torch.expr, "torch"):
            end = index
            while end + 1 < len(body) and _imports_only(body[end + 1]):
                end += 1
            code = "\n" + statement.format(torch=torch.expr)
            return torch.expr, InsertStatements(anchor=body[end], code=code, after=True)
    return None
