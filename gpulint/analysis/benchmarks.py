"""Benchmark code on CPython's `ast`: a function that times a computation on made-up inputs.

A script that compares attention variants (`test_NSA`: build the layer, feed it `torch.ones(...)` a
thousand times between two clock reads, print the average time and memory) runs a forward, a backward
and an optimizer step, but it trains nothing: it measures the code as written, and replacing that code
with a fused kernel defeats the measurement. Training loops time themselves too (per-batch timers for a
progress meter), but they draw their batches from data; a benchmark repeats inputs it made itself.
"""

from __future__ import annotations

import ast
from typing import Union

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.evidence import REFUTED, SHOWN, Evidence, Premise
from gpulint.project.ast_nodes import walk as walk_nodes

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]

NOT_BENCHMARK = Premise(
    "not-benchmark",
    "the step trains a model rather than measuring one: refuted inside a benchmark, a function that times repeated "
    "steps on inputs it makes (a loop over `range(...)` between two clock reads or under a benchmark timer, tensors "
    "from torch factories such as `torch.ones`, and no loop over a loader or dataset): Pyraformer's "
    "`graph_attention.py` times fp32 attention kernels that way, and a rewrite would change what it measures.")

# clock reads and timers
_CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.process_time", "time.time_ns",
                     "time.perf_counter_ns", "time.monotonic_ns", "timeit.default_timer"})
_TIMERS = frozenset({"torch.utils.benchmark.Timer", "timeit.timeit", "timeit.repeat", "timeit.Timer"})
# torch factories that make synthetic inputs
_FACTORIES = frozenset(f"torch.{name}" for name in ("ones", "zeros", "rand", "randn", "randint", "empty", "full",
                                                     "arange", "ones_like", "zeros_like", "randn_like",
                                                     "rand_like"))


def benchmarks(ctx: AstContext, function: FunctionNode) -> bool:
    """The function times repeated calls on inputs it makes: a loop over `range(...)` that lies between two
    clock reads (`time.time()`, `time.perf_counter()`, CUDA events' `elapsed_time`) or a benchmark timer
    (`torch.utils.benchmark.Timer`, `timeit`), tensors made by torch factories (`torch.ones`, `randn`), and
    no loop over anything but `range` (no loader, no dataset)."""
    clocks: list[int] = []
    timer = False
    synthetic = False
    ranges: list[ast.For] = []
    for node in walk_nodes(function):
        if isinstance(node, ast.Call):
            target = ctx.qualname(node.func) or ""
            if target in _CLOCKS or (isinstance(node.func, ast.Attribute) and node.func.attr == "elapsed_time"):
                clocks.append(node.lineno)
            elif target in _TIMERS:
                timer = True
            elif target in _FACTORIES:
                synthetic = True
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            iterated = node.iter
            if not (isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Name)
                    and iterated.func.id == "range"):
                return False  # a loader, a dataset, a list of batches: real data
            ranges.append(node)  # type: ignore[arg-type]
    if not synthetic:
        return False
    if timer:
        return True
    return any(any(c < loop.lineno for c in clocks) and any(c > (loop.end_lineno or loop.lineno) for c in clocks)
               for loop in ranges)


def benchmark_step(ctx: AstContext, node: ast.AST) -> Evidence:
    """NOT_BENCHMARK for a step's node: refuted when a function around it is a benchmark (its warm-up step before
    the timed loop included)."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)) and benchmarks(ctx, ancestor):
            return REFUTED
    return SHOWN
