"""FRY001 discarded-tensor-move.

## What it does
Finds a tensor moved or converted (``.to(...)``, ``.cuda()``, ``.xpu()`` and the other accelerators' moves,
``.cpu()``, ``.half()``, ``.float()``, ``.double()``, ``.bfloat16()``, ``.type(...)``, ``.contiguous()``,
``.pin_memory()``) as a statement of its own, its result thrown away. The receiver is a tensor by what its name was
bound to (torch factories and operations, ``torch.from_numpy``, batches from a ``DataLoader``, arithmetic on
tensors), or, for a name of no known kind, by how its function uses it: tensor-only attributes and methods
(``x.shape``, ``x.view(...)``), slicing, arithmetic, ``torch`` functions, or a name unpacked beside one used so
(``for src, tgt in loader:``); not when it is also used as an object (``batch.premise``, ``batch["input_ids"]``,
``model.parameters()``), which may move itself in place. Modules are not reported: ``model.to(device)`` alone is
correct. Also ``ferry.to_device(batch, device)``
as a statement: it returns a moved copy of any batch and leaves its input where it was.

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
from ferry.lint.rules._io import device_variable
from ferry.lint.rules._placement import tensor_moves
from ferry.lint.torch_api import DTYPE_CASTS, MOVES

#: Tensor methods that return a moved or converted copy (``to_empty`` is a module's, which moves in place).
COPIES = (MOVES - {"to_empty"}) | DTYPE_CASTS | {"contiguous", "pin_memory"}


#: Longest call text a message quotes; a longer one is shown as ``x.to(...)``.
SHOWN_CALL = 60


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each statement that moves or converts a tensor and drops the result."""
    for stmt in ctx.nodes(ast.Expr):
        value = stmt.value
        if isinstance(value, ast.Tuple):  # `data.to(device), target.to(device)`: every move of the tuple is lost
            moves = [call for call in value.elts if _is_tensor_move(ctx, call)]
            fix = _tuple_fix(ctx, stmt, value) if moves and len(moves) == len(value.elts) else None
            for call in moves:
                assert isinstance(call, ast.Call)
                yield _finding(ctx, stmt, call, fix, in_tuple=True)
        elif _is_tensor_move(ctx, value):
            assert isinstance(value, ast.Call)
            yield _finding(ctx, stmt, value, None, in_tuple=False)
        elif isinstance(value, ast.Call) and ctx.call_name(value) in COPYING_FUNCTIONS and value.args:
            yield _function_finding(ctx, stmt, value)
        elif isinstance(value, ast.ListComp | ast.GeneratorExp | ast.SetComp) and (move := _moved_items(ctx, value)):
            yield _comprehension_finding(ctx, stmt, value, move)


def _moved_items(ctx: FileContext, comp: ast.ListComp | ast.GeneratorExp | ast.SetComp) -> ast.Call | None:
    """``[t.to(device) for t in (x, y)]`` as a statement: the move of each item, when the items are tensors."""
    if len(comp.generators) != 1:
        return None
    loop = comp.generators[0]
    call = comp.elt
    if not (
        isinstance(loop.target, ast.Name)
        and isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in COPIES
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == loop.target.id
    ):
        return None
    if call.func.attr == "type" and not (call.args or call.keywords):
        return None
    items = loop.iter
    if isinstance(items, ast.Tuple | ast.List) and items.elts:
        kinds = [ctx.kind(e) for e in items.elts]
        return call if all(k is not None and k.is_tensor for k in kinds) else None
    kind = ctx.kind(items)
    element = kind.element if kind is not None and kind.name == "seq" else None
    return call if element is not None and element.is_tensor else None


def _comprehension_finding(
    ctx: FileContext, stmt: ast.Expr, comp: ast.ListComp | ast.GeneratorExp | ast.SetComp, call: ast.Call
) -> Finding:
    """A comprehension of moves as a statement: each moved copy is dropped, and the items stay where they were."""
    items = comp.generators[0].iter
    text = ctx.segment(comp)
    shown = text if "\n" not in text and len(text) <= SHOWN_CALL else f"[... {ctx.segment(call)} ...]"
    message = f"result of `{shown}` is discarded: each moved copy is thrown away, the tensors stay where they were; "
    elts = items.elts if isinstance(items, ast.Tuple | ast.List) else []
    names = [dotted(e) for e in elts]
    if (
        names
        and all(n is not None for n in names)
        and all(not isinstance(e, ast.Name) or _bound_here(ctx, stmt, e.id) for e in elts)
    ):
        targets = ", ".join(n for n in names if n is not None)
        item = ctx.segment(comp.generators[0].target)
        if len(names) > 1:
            replacement = f"{targets} = [{ctx.segment(call)} for {item} in ({targets})]"
        else:  # `[t.to(device) for t in (x,)]`
            replacement = f"{targets} = {targets}{ctx.segment(call)[len(item) :]}"
        fix = _statement_fix(stmt, replacement, "Assign the results") if stmt.lineno == stmt.end_lineno else None
        return Finding(call, message=message + f"assign them: `{replacement}`", fix=fix)
    return Finding(call, message=message + "assign the moved tensors back where they are used", fix=None)


#: Functions that return a moved copy of their first argument and leave it as it was.
COPYING_FUNCTIONS = frozenset({"ferry.to_device", "ferry.placement.to_device"})


def _function_finding(ctx: FileContext, stmt: ast.Expr, call: ast.Call) -> Finding:
    """``ferry.to_device(batch, device)`` as a statement: the moved copy is dropped, ``batch`` stays where it was."""
    first = call.args[0]
    target = _target(ctx, first)
    text = ctx.segment(call)
    shown_call = text if "\n" not in text and len(text) <= SHOWN_CALL else f"{ctx.segment(call.func)}(...)"
    message = f"result of `{shown_call}` is discarded: it returns a moved copy and leaves its input where it was; "
    if target is None:
        return Finding(call, message=message + "assign it and use the result")
    fix = None
    if stmt.lineno == stmt.end_lineno and (not isinstance(first, ast.Name) or _bound_here(ctx, stmt, first.id)):
        fix = _statement_fix(stmt, f"{target} = {text}", "Assign the result")
    return Finding(call, message=message + f"assign it: `{target} = {shown_call}`", fix=fix)


def _is_tensor_move(ctx: FileContext, call: ast.expr) -> bool:
    """``<tensor>.to(...)`` and the other moves and conversions, on a receiver known to be a tensor."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in COPIES):
        return False
    if call.func.attr == "type" and not (call.args or call.keywords):
        return False  # `t.type()` returns the type name: nothing to keep
    receiver = call.func.value
    kind = ctx.kind(receiver)
    if (kind is not None and kind.is_tensor) or call in tensor_moves(ctx):
        return True
    # a name of no known kind that its function uses as a tensor (`for src, tgt in loader: ...; tgt[:-1, :]`)
    return kind is None and isinstance(receiver, ast.Name) and ctx.kinds.used_as_tensor(receiver)


def _finding(ctx: FileContext, stmt: ast.Expr, call: ast.Call, tuple_fix: Fix | None, *, in_tuple: bool) -> Finding:
    assert isinstance(call.func, ast.Attribute)
    receiver = call.func.value
    target = _target(ctx, receiver)
    method = call.func.attr
    shown = target or "tensor"
    text = ctx.segment(call)
    shown_call = text if "\n" not in text and "\r" not in text and len(text) <= SHOWN_CALL else f"{shown}.{method}(...)"
    kept = _kept_call(ctx, call, target, method)
    message = f"result of `{shown_call}` is discarded: tensors are not moved or converted in place; "
    if in_tuple:
        targets = ", ".join(_target(ctx, c.func.value) or "tensor" for c in _calls(stmt))  # type: ignore[attr-defined]
        return Finding(call, message=message + f"assign them: `{targets} = {ctx.segment(stmt.value)}`", fix=tuple_fix)
    name = dotted(receiver)
    loop = _loop_over(ctx, stmt, name) if isinstance(receiver, ast.Name) else None
    if loop is not None and not _used_after(stmt, loop, receiver.id):  # type: ignore[attr-defined]
        # the loop only moves each item: the container's items were meant to move
        return Finding(call, message=message + _rebuild_advice(ctx, loop, text, shown_call), fix=None)
    return Finding(
        call,
        message=message + f"assign it: `{shown} = {kept if len(kept) <= SHOWN_CALL else shown_call}`",
        fix=_assign_fix(ctx, stmt, call, receiver, target, kept),
    )


def _calls(stmt: ast.Expr) -> list[ast.Call]:
    assert isinstance(stmt.value, ast.Tuple)
    return [c for c in stmt.value.elts if isinstance(c, ast.Call)]


def _target(ctx: FileContext, receiver: ast.expr) -> str | None:
    """The text to assign to: a name, an attribute (``self.x``) or an item (``batch[k]``), on one line."""
    if not isinstance(receiver, ast.Name | ast.Attribute | ast.Subscript):
        return None
    text = ctx.segment(receiver)
    if "\n" in text or "(" in text.split("[", 1)[0]:
        return None
    return text


def _kept_call(ctx: FileContext, call: ast.Call, target: str | None, method: str) -> str:
    """The call to keep: a bare ``.cuda()`` becomes ``.to(device)`` where a device variable is in scope."""
    text = ctx.segment(call)
    if method == "cuda" and not call.args and not call.keywords and target is not None:
        device = device_variable(ctx, call)
        if device is not None:
            return f"{target}.to({device})"
    return text


def _used_after(stmt: ast.stmt, loop: ast.For | ast.AsyncFor, name: str) -> bool:
    """Whether the loop's body reads ``name`` after ``stmt`` (then assigning the loop variable is the fix)."""
    end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
    for body_stmt in loop.body:
        for node in ast.walk(body_stmt):
            if (
                isinstance(node, ast.Name)
                and node.id == name
                and isinstance(node.ctx, ast.Load)
                and (node.lineno, node.col_offset) > end
            ):
                return True
    return False


def _assign_fix(
    ctx: FileContext, stmt: ast.Expr, call: ast.Call, receiver: ast.expr, target: str | None, kept: str
) -> Fix | None:
    """``x = x.to(...)`` when that is safe: one line, it parses, and assigning does not make ``x`` a new local."""
    if target is None or stmt.lineno != stmt.end_lineno:
        return None
    if isinstance(receiver, ast.Name) and not _bound_here(ctx, stmt, receiver.id):
        return None
    return _statement_fix(stmt, f"{target} = {kept}", "Assign the result")


def _tuple_fix(ctx: FileContext, stmt: ast.Expr, value: ast.Tuple) -> Fix | None:
    """``data, target = data.to(device), target.to(device)`` for a tuple statement of moves."""
    if stmt.lineno != stmt.end_lineno:
        return None
    targets: list[str] = []
    for call in value.elts:
        assert isinstance(call, ast.Call)
        assert isinstance(call.func, ast.Attribute)
        receiver = call.func.value
        target = _target(ctx, receiver)
        if target is None or (isinstance(receiver, ast.Name) and not _bound_here(ctx, stmt, receiver.id)):
            return None
        targets.append(target)
    return _statement_fix(stmt, f"{', '.join(targets)} = {ctx.segment(value)}", "Assign the results")


def _statement_fix(stmt: ast.stmt, replacement: str, title: str) -> Fix | None:
    """Replace ``stmt`` by ``replacement``, if that parses."""
    try:
        ast.parse(replacement)
    except (SyntaxError, ValueError):
        return None
    return Fix(f"{title}: `{replacement}`", (Edit.replace(stmt, replacement),))


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
