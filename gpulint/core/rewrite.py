"""Small CST rewrites that keep the user's formatting: adding or changing call arguments."""

from __future__ import annotations

import libcst as cst


def _without_comments(ws: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """Whitespace to copy between arguments: same layout, but never copy a user's comment."""
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(
            first_line=ws.first_line.with_changes(comment=None, whitespace=cst.SimpleWhitespace("")),
            empty_lines=(),
        )
    return ws


def _separator(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace the call puts after an argument's comma."""
    args = call.args
    for arg in reversed(args[:-1]):
        if isinstance(arg.comma, cst.Comma):
            return _without_comments(arg.comma.whitespace_after)
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return _without_comments(call.whitespace_before_args)
    return cst.SimpleWhitespace(" ")


def add_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """`f(a, b)` -> `f(a, b, name=value)`, one argument per line if the call is laid out so."""
    new_value = cst.parse_expression(value)
    # `=` spaced as the call's own keywords are (`batch_size = 32` in some code bases)
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    equal = next((a.equal for a in reversed(call.args)
                  if a.keyword is not None and isinstance(a.equal, cst.AssignEqual)), tight)
    arg = cst.Arg(keyword=cst.Name(name), value=new_value, equal=equal)
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    separator = _separator(call)
    if isinstance(last.comma, cst.Comma):
        # magic trailing comma: the new argument takes over the comma's layout before `)`
        arg = arg.with_changes(comma=cst.Comma(whitespace_after=last.comma.whitespace_after))
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=separator))
    else:
        arg = arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=separator), whitespace_after_arg=cst.SimpleWhitespace("")
        )
    args.append(arg)
    return call.with_changes(args=args)


def set_keyword(call: cst.Call, name: str, value: str, rename_from: str | None = None) -> cst.Call:
    """Give the keyword `name` (or the one now called `rename_from`) the value `value`."""
    old = rename_from or name
    args = []
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == old:
            arg = arg.with_changes(keyword=cst.Name(name), value=cst.parse_expression(value))
        args.append(arg)
    return call.with_changes(args=args)


def is_literal(expr: cst.BaseExpression | None, *values: str) -> bool:
    """`expr` is one of the literal values given as code (`"True"`, `"0"`, `"None"`)."""
    if isinstance(expr, cst.Name):
        return expr.value in values
    if isinstance(expr, cst.Integer):
        return expr.value in values
    return False


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    """`f(a, name=v, b=1)` -> `f(a, b=1)`; a removed last argument hands its comma (or its absence) to the
    one before it, so `f(a, name=v)` -> `f(a)` and a trailing-comma layout keeps its trailing comma."""
    args = list(call.args)
    index = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == name), None)
    if index is None:
        return call
    removed = args.pop(index)
    if index == len(args) and index > 0:
        previous = args[index - 1]
        args[index - 1] = previous.with_changes(comma=removed.comma,
                                                whitespace_after_arg=removed.whitespace_after_arg)
    return call.with_changes(args=args)
