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


def _torch_alias(statement: cst.BaseStatement) -> Optional[str]:
    """`torch` / `th` when this top-level line is `import torch` / `import torch as th`."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    for small in statement.body:
        if isinstance(small, cst.Import):
            for name in small.names:
                if isinstance(name.name, cst.Name) and name.name.value == "torch":
                    bound = name.asname.name if name.asname is not None else name.name
                    return bound.value if isinstance(bound, cst.Name) else None
    return None


def after_torch_imports(ctx: FileContext, statement: str) -> Optional[tuple[str, InsertStatements]]:
    """`torch`'s name in the file and the edit that puts `statement` (code with `{torch}` for that name)
    after the run of top-level imports holding the first top-level `import torch [as x]`; None without one
    (torch imported inside a try, a function, or not at all). The ast rules predict the same from
    analysis/script_settings.py's `torch_import_alias`."""
    body = ctx.module.body
    for index, line in enumerate(body):
        alias = _torch_alias(line)
        if alias is not None:
            end = index
            while end + 1 < len(body) and _imports_only(body[end + 1]):
                end += 1
            code = "\n" + statement.format(torch=alias)
            return alias, InsertStatements(anchor=body[end], code=code, after=True)
    return None
