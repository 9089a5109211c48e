"""GPU504 debug-api-in-training: anomaly detection or the autograd profiler left on for a whole training run."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.ast_context import arg
from gpulint.analysis.device import accelerator_evidence
from gpulint.analysis.evidence import SHOWN, Premise
from gpulint.analysis.steps import STEP_AST_NEEDLES, StepFacts, step_facts
from gpulint.core.torch_api import (
    AUTOGRAD_PROFILERS,
    DETECT_ANOMALY,
    PROFILER_ENABLED,
    SET_DETECT_ANOMALY,
    SET_DETECT_ANOMALY_MODE,
)
from gpulint.project.ast_nodes import walk as walk_nodes
from gpulint.rules.base import Rule, RuleDocs, Target

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext

# functions whose name says they exist to debug or measure: a debug API there is their purpose
_DEBUG_WORDS = ("debug", "profil", "bench", "trace", "anomal", "check", "diagnos", "test")

LEFT_ON = Premise(
    "left-on",
    "the debug API is switched on unconditionally: `set_detect_anomaly(True)` with a literal True, "
    "`detect_anomaly()`, or a profiler whose `enabled` is not given or a literal True; not under an `if` (a "
    "debug flag, an argparse option; the `__main__` guard does not count), not in an `except` handler, not in a "
    "function named for debugging or profiling.")
COVERS_TRAINING = Premise(
    "covers-training",
    "it applies to a training loop the file runs (a loop that calls backward() and steps an optimizer): the "
    "global switch anywhere in such a file, a `with` block or decorated function that runs the loop or lies "
    "in it.")
ON_ACCELERATOR = Premise(
    "on-accelerator",
    "the file does not pin the CPU (the slowdown is measured against GPU steps): shown by device evidence, "
    "refuted where the code pins the CPU.")


class DebugApiInTraining(Rule):
    code = "GPU504"
    name = "debug-api-in-training"
    summary = "Autograd anomaly detection or the autograd profiler is left on in a training script"
    impact = "anomaly mode records a traceback per op and checks every backward for NaN (Tuning Guide)"
    needles = ("anomaly", "profiler", "emit_nvtx")
    ast_needles = (("torch.autograd",), *STEP_AST_NEEDLES)
    target = Target.NOT_CPU_ONLY
    in_tests = False
    preview = True
    docs = RuleDocs(
        what="""
        Checks for autograd debugging tools switched on unconditionally in a file that runs a
        training loop: `torch.autograd.set_detect_anomaly(True)`, `with
        torch.autograd.detect_anomaly():`, and `torch.autograd.profiler.profile(...)` or
        `emit_nvtx(...)` around the loop.
        """,
        why="""
        PyTorch's Performance Tuning Guide says under "Disable debugging APIs": anomaly
        detection, the autograd profiler and `emit_nvtx` are for debugging and slow training
        down, so turn them off for regular runs. Anomaly mode stores the Python stack of every
        forward op and checks each backward function's output for NaN; the profiler records
        every op. Left on, the whole run pays that cost.
        """,
        example="""
        import torch

        torch.autograd.set_detect_anomaly(True)
        model = torch.nn.Linear(10, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        use_instead="""
        import torch

        torch.autograd.set_detect_anomaly(args.detect_anomaly)
        model = torch.nn.Linear(10, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        """,
        fix_safety="""
        No fix: whether the run is a debugging session is the user's call. Put the switch
        behind a flag (`set_detect_anomaly(args.debug)`, `profile(enabled=args.profile)`) or
        remove it. Not reported when the switch is a variable, under an `if` (other than
        the `__main__` guard) or in an `except` handler, in
        functions named for debugging, profiling or benchmarking, for profilers that only
        wrap code outside the training loop, in files without a training loop, in CPU-only
        files, or in tests. `torch.profiler.profile` with a schedule is a deliberate
        measurement and is not checked.
        """,
        premises=(LEFT_ON, COVERS_TRAINING, ON_ACCELERATOR),
    )

    def detect(self, ctx: "AstContext") -> None:
        facts: StepFacts = ctx.analysis(step_facts)
        if not facts.steps:
            return
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            target = facts.qualname(node.func)
            if target in SET_DETECT_ANOMALY:
                what = "set_detect_anomaly(True)"
                on = _literal_true(arg(node, *SET_DETECT_ANOMALY_MODE, ctx.kwargs(node)))
                covers = True if not _in_with(facts, node) else self._with_covers(facts, node)
            elif target in DETECT_ANOMALY:
                what = "detect_anomaly()"
                on = True
                covers = self._with_covers(facts, node)
            elif target in AUTOGRAD_PROFILERS:
                what = f"{target.rsplit('.', 1)[-1]}(...)"
                enabled = arg(node, *PROFILER_ENABLED, ctx.kwargs(node))
                on = enabled is None or _literal_true(enabled)
                covers = self._with_covers(facts, node)
            else:
                continue
            if not on or not covers or _conditional(facts, node):
                continue
            decision = self.decide({LEFT_ON: SHOWN, COVERS_TRAINING: SHOWN,
                                    ON_ACCELERATOR: accelerator_evidence(ctx.project)})
            if decision.report:
                ctx.report(self, node, f"autograd {what} left on in a training script slows every step: "
                           "put it behind a debug flag", decision=decision)

    def _with_covers(self, facts: StepFacts, call: ast.Call) -> bool:
        """A `with` item or decorator whose block runs a step loop, or that lies inside a step."""
        if facts.place(call) is not None:
            return True
        parent = facts.parent(call)
        if isinstance(parent, ast.withitem):
            block = facts.parent(parent)
            assert isinstance(block, (ast.With, ast.AsyncWith))
            return any(_runs_step(facts, stmt) for stmt in block.body)
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and call in parent.decorator_list:
            return any(_runs_step(facts, stmt) for stmt in parent.body)
        return False


def _runs_step(facts: StepFacts, root: ast.AST) -> bool:
    """`root` holds a step loop, lexically or through calls to functions of the same file."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        for inner in walk_nodes(node):
            if facts.step_loop(inner) is not None:
                return True
            if isinstance(inner, ast.Call):
                callee = facts.callee(inner)
                if callee is not None and id(callee) not in seen:
                    seen.add(id(callee))
                    stack.append(callee)
    return False


def _in_with(facts: StepFacts, call: ast.Call) -> bool:
    return isinstance(facts.parent(call), ast.withitem)


def _literal_true(value: Optional[ast.expr]) -> bool:
    return isinstance(value, ast.Constant) and value.value is True


def _main_guard(test: ast.expr) -> bool:
    return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"


def _conditional(facts: StepFacts, call: ast.Call) -> bool:
    """Under an `if`/conditional expression (a debug flag; not the `__main__` guard), in an `except` handler
    (turned on to chase a failure), or in a function named for debugging."""
    for ancestor in facts.ancestors(call):
        if isinstance(ancestor, ast.If) and _main_guard(ancestor.test):
            continue  # `if __name__ == "__main__":` runs every time the script does
        if isinstance(ancestor, (ast.If, ast.IfExp, ast.ExceptHandler, ast.BoolOp)):
            return True
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and any(word in ancestor.name.lower() for word in _DEBUG_WORDS):
            return True
        if isinstance(ancestor, ast.ClassDef) and ancestor.name.lower().startswith("test"):
            return True
    return False
