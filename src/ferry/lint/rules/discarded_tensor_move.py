"""FRY001 discarded-tensor-move.

## What it does
Finds a tensor moved or converted (``.to(...)``, ``.cuda()``, ``.cpu()``, ``.half()``, ``.float()``, ``.double()``,
``.bfloat16()``, ``.type(...)``, ``.contiguous()``, ``.pin_memory()``) as a statement of its own, its result thrown
away. The receiver is a tensor by what its name was bound to (torch factories and operations, ``torch.from_numpy``,
batches from a ``DataLoader``, arithmetic on tensors); modules are not reported: ``model.to(device)`` alone is
correct.

## Why is this bad
``Tensor.to`` and its relatives return a new tensor and leave the original where it was, unlike ``Module.to``,
which moves the module in place. The line does nothing, and the next use of the tensor fails with "Expected all
tensors to be on the same device" or silently runs on the CPU.

## Example
```python
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(8, 3)
x.to(device)  # FRY001
```

## Use instead
```python
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(8, 3)
x = x.to(device)
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.kinds import SCOPES
from ferry.lint.model import Edit, Finding, Fix, Rule

MOVES = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "type", "contiguous", "pin_memory"})


#: Longest call text a message quotes; a longer one is shown as ``x.to(...)``.
SHOWN_CALL = 60


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each statement that moves or converts a tensor and drops the result."""
    for stmt in ctx.nodes(ast.Expr):
        call = stmt.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in MOVES):
            continue
        if call.func.attr == "type" and not (call.args or call.keywords):
            continue  # `t.type()` returns the type name: nothing to keep
        receiver = call.func.value
        kind = ctx.kind(receiver)
        if kind is None or not kind.is_tensor:
            continue
        name = dotted(receiver)
        method = call.func.attr
        shown = name or "tensor"
        text = ctx.segment(call)
        shown_call = (
            text if "\n" not in text and "\r" not in text and len(text) <= SHOWN_CALL else f"{shown}.{method}(...)"
        )
        message = f"result of `{shown_call}` is discarded: tensors are not moved or converted in place; "
        loop = _loop_over(ctx, stmt, name) if isinstance(receiver, ast.Name) else None
        if loop is not None:
            yield Finding(call, message=message + _rebuild_advice(ctx, loop, text, shown_call), fix=None)
            continue
        yield Finding(
            call,
            message=message + f"assign it: `{shown} = {shown_call}`",
            fix=_assign_fix(ctx, stmt, call, receiver, name, method),
        )


def _assign_fix(
    ctx: FileContext, stmt: ast.Expr, call: ast.Call, receiver: ast.expr, name: str | None, method: str
) -> Fix | None:
    """``x = x.to(...)`` when that is safe: one line, it parses, and assigning does not make ``x`` a new local."""
    if name is None or "(" in name or stmt.lineno != stmt.end_lineno:
        return None
    if isinstance(receiver, ast.Name) and not _bound_here(ctx, stmt, receiver.id):
        return None
    replacement = f"{name} = {ctx.segment(call)}"
    try:
        ast.parse(replacement)
    except (SyntaxError, ValueError):
        return None
    return Fix(f"Assign the result: `{name} = {name}.{method}(...)`", (Edit.replace(stmt, replacement),))


def _bound_here(ctx: FileContext, stmt: ast.stmt, name: str) -> bool:
    """Whether ``name`` is a local of the scope of ``stmt`` (bound there, not declared ``global``/``nonlocal``)."""
    kinds = ctx.kinds
    scope = kinds.scope_of(stmt)
    if name not in kinds.bindings.get(scope, {}):
        return False
    declared: list[ast.Global | ast.Nonlocal] = [*ctx.nodes(ast.Global), *ctx.nodes(ast.Nonlocal)]
    return not any(name in node.names and kinds.scope_of(node) is scope for node in declared)


def _loop_over(ctx: FileContext, stmt: ast.stmt, name: str | None) -> ast.For | ast.AsyncFor | None:
    """The ``for`` loop of the same scope whose target binds ``name``, if the statement is inside one."""
    for above in ctx.ancestors(stmt):
        if isinstance(above, SCOPES):
            return None
        if isinstance(above, ast.For | ast.AsyncFor) and any(
            isinstance(n, ast.Name) and n.id == name for n in ast.walk(above.target)
        ):
            return above
    return None


def _rebuild_advice(ctx: FileContext, loop: ast.For | ast.AsyncFor, text: str, shown_call: str) -> str:
    """Say how to move the container's items: assigning the loop variable does not change the container."""
    target, iterable = ctx.segment(loop.target), ctx.segment(loop.iter)
    advice = "assigning the loop variable would not change the container: rebuild the container"
    if "\n" in target + iterable + text or len(text) > SHOWN_CALL:
        return advice + ", e.g. with a list or dict comprehension"
    iter_node = loop.iter
    if (
        isinstance(iter_node, ast.Call)
        and isinstance(iter_node.func, ast.Attribute)
        and iter_node.func.attr == "items"
        and not iter_node.args
        and isinstance(loop.target, ast.Tuple)
        and len(loop.target.elts) == 2
        and dotted(iter_node.func.value) is not None
    ):
        owner = ctx.segment(iter_node.func.value)
        key = ctx.segment(loop.target.elts[0])
        return advice + f", e.g. `{owner} = {{{key}: {shown_call} for {target} in {iterable}}}`"
    if dotted(iter_node) is not None:
        return advice + f", e.g. `{iterable} = [{shown_call} for {target} in {iterable}]`"
    return advice + ", e.g. with a list or dict comprehension"


RULE = Rule(
    code="FRY001",
    name="discarded-tensor-move",
    message="result of a tensor move or conversion is discarded: tensors are not moved in place",
    fix_title="assign the result back: `x = x.to(device)`",
    doc=__doc__ or "",
    check=check,
)
