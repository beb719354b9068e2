"""FRY009 data-parallel-state-dict.

## What it does
Finds the ``state_dict()`` of a ``DataParallel`` or ``DistributedDataParallel`` wrapper that is saved
(``torch.save``, ``safetensors``' ``save_file``, or a function whose name says it saves, such as
``save_checkpoint``), directly, inside a dict or list literal, or through a name, or that is loaded into a bare
module with ``load_state_dict``. The wrapper is known by what its name was bound to (``nn.DataParallel(model)``,
``DistributedDataParallel(model, ...)``).

A wrapper's state dict that is only taken (to be loaded back into the wrapper, or with its keys rewritten, as in
``{k.removeprefix("module."): v for k, v in sd.items()}``) is not reported, nor is ``wrapper.module.state_dict()``.

## Why is this bad
The wrapper holds the model as its submodule ``module``, so every key of its state dict starts with ``module.``.
Loading that checkpoint into the bare model (for inference, on one device, or in another script) fails with
"Unexpected key(s) in state_dict: module.fc.weight ..." (pytorch#3805), or, with ``strict=False``, silently loads
nothing.

## Example
```python
import torch
import torch.nn as nn

net = nn.DataParallel(nn.Sequential(nn.Linear(3, 4), nn.ReLU()))
torch.save(net.state_dict(), "model.pth")  # FRY009
checkpoint = {"epoch": 3, "model": net.state_dict()}  # FRY009
torch.save(checkpoint, "last.pth")
```

## Use instead
```python
import torch
import torch.nn as nn

net = nn.DataParallel(nn.Sequential(nn.Linear(3, 4), nn.ReLU()))
torch.save(net.module.state_dict(), "model.pth")
checkpoint = {"epoch": 3, "model": net.module.state_dict()}
torch.save(checkpoint, "last.pth")
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._training import before, scope_node, walk_scope
from ferry.lint.torch_api import SAVES

#: Functions that write a state dict to a file: torch's, ferry's and safetensors'.
SAVERS = SAVES | {"ferry.save", "safetensors.torch.save_file", "safetensors.torch.save_model", "ferry.checkpoint.save"}

#: How deep a state dict is followed through names and the parameters of this file's functions.
DEPTH = 3


def _container_top(ctx: FileContext, node: ast.AST) -> ast.AST:
    """Climb out of dict/list/tuple literals, ``dict(...)`` calls and subscripts that hold ``node``."""
    while True:
        parent = ctx.parent(node)
        if (isinstance(parent, ast.Dict) and node in parent.values) or isinstance(
            parent, ast.List | ast.Tuple | ast.Set
        ):
            node = parent
        elif isinstance(parent, ast.keyword):
            call = ctx.parent(parent)
            if call is None or ctx.call_name(call) != "dict":
                return node
            node = call
        elif (isinstance(parent, ast.Call) and ctx.call_name(parent) == "dict" and node in parent.args) or (
            isinstance(parent, ast.Subscript) and parent.value is node
        ):
            node = parent
        else:
            return node


def _arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(k.value for k in call.keywords)]


def _is_saver(ctx: FileContext, call: ast.Call) -> bool:
    name = ctx.call_name(call) or ""
    return name in SAVERS or "save" in name.rsplit(".", 1)[-1].lower()


def _local_function(ctx: FileContext, call: ast.Call) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    if not isinstance(call.func, ast.Name):
        return None
    defined = [f for f in ctx.kinds.functions.get(call.func.id, []) if ctx.enclosing_class(f) is None]
    return defined[0] if len(defined) == 1 else None


def _parameter_for(func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, arg: ast.AST) -> str | None:
    positional = [*func.args.posonlyargs, *func.args.args]
    if arg in call.args:
        index = call.args.index(arg)
        return positional[index].arg if index < len(positional) else None
    for keyword in call.keywords:
        if keyword.value is arg and keyword.arg is not None:
            names = {a.arg for a in [*positional, *func.args.kwonlyargs]}
            return keyword.arg if keyword.arg in names else None
    return None


def _sink(ctx: FileContext, node: ast.AST, depth: int) -> str | None:
    """Where the state dict held by ``node`` ends up: ``"saved"``, ``"loaded into <name>"``, or ``None``."""
    top = _container_top(ctx, node)
    parent = ctx.parent(top)
    if isinstance(parent, ast.Call) and top in parent.args[:1]:
        if _is_saver(ctx, parent):
            return "saved"
        callee = parent.func
        if isinstance(callee, ast.Attribute) and callee.attr == "load_state_dict":
            kind = ctx.kind(callee.value)
            if kind is not None and kind.is_module and not kind.parallel:
                return f"loaded into the bare module `{dotted(callee.value) or 'module'}`"
            return None
    if isinstance(parent, ast.Call) and depth > 0 and any(top is arg for arg in _arguments(parent)):
        func = _local_function(ctx, parent)
        if func is not None:
            param = _parameter_for(func, parent, top)
            if param is not None:
                return _name_sink(ctx, param, func, None, depth - 1)
        return None
    if isinstance(parent, ast.Assign) and parent.value is top and len(parent.targets) == 1 and depth > 0:
        target = parent.targets[0]
        if isinstance(target, ast.Subscript):
            target = target.value  # checkpoint["model"] = wrapper.state_dict()
        name = dotted(target)
        if name is not None:
            return _name_sink(ctx, name, scope_node(ctx, parent), parent, depth - 1)
    return None


def _name_sink(ctx: FileContext, name: str, scope: ast.AST, after: ast.AST | None, depth: int) -> str | None:
    """Where the value of ``name`` (bound by ``after``, or a parameter of ``scope``) ends up, within ``scope``."""
    for node in walk_scope(scope):
        if not isinstance(node, ast.Name | ast.Attribute) or dotted(node) != name:
            continue
        if not isinstance(node.ctx, ast.Load) or (after is not None and not before(after, node)):
            continue
        parent = ctx.parent(node)
        if isinstance(parent, ast.Attribute):
            continue  # `sd.items()`, `sd.keys()`: something is done to it
        found = _sink(ctx, node, depth)
        if found:
            return found
    return None


def _wrapper_tested(ctx: FileContext, call: ast.Call, name: str | None) -> bool:
    """Whether ``call`` runs where the code has found ``name`` is no wrapper.

    The ``else`` of ``if hasattr(model, "module"):`` or of ``if isinstance(model, nn.DataParallel):`` (3D-ResNets'
    ``save_checkpoint``), or the body of their negation.
    """
    if name is None:
        return False
    child: ast.AST = call
    for above in ctx.ancestors(call):
        if isinstance(above, ast.If | ast.IfExp) and child is not above.test:
            test, negated = above.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negated = test.operand, True
            in_else = child in (above.orelse if isinstance(above.orelse, list) else [above.orelse])
            if _tests_wrapper(ctx, test, name) and in_else != negated:
                return True
        if isinstance(above, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return False
        child = above
    return False


def _tests_wrapper(ctx: FileContext, test: ast.expr, name: str) -> bool:
    """``hasattr(name, "module")`` or ``isinstance(name, <a DataParallel/DDP class>)``."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and len(test.args) == 2):
        return False
    if dotted(test.args[0]) != name:
        return False
    if test.func.id == "hasattr":
        return isinstance(test.args[1], ast.Constant) and test.args[1].value == "module"
    if test.func.id == "isinstance":
        classes = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        return any("Parallel" in (ctx.qualname(c) or dotted(c) or "") for c in classes)
    return False


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each ``state_dict()`` of a parallel wrapper that is saved or loaded into a bare module."""
    for call in ctx.nodes(ast.Call):
        callee = call.func
        if not (isinstance(callee, ast.Attribute) and callee.attr == "state_dict") or call.args:
            continue
        kind = ctx.kind(callee.value)
        if kind is None or not kind.is_module or not kind.parallel:
            continue
        where = _sink(ctx, call, DEPTH)
        if where is None or _wrapper_tested(ctx, call, dotted(callee.value)):
            continue
        verb = "save" if where == "saved" else "use"
        wrapper = callee.value
        inner = dotted(wrapper.args[0]) if isinstance(wrapper, ast.Call) and wrapper.args else None
        if inner is not None:  # `nn.DataParallel(model).state_dict()`: `model` is the bare model
            text = ctx.segment(wrapper)
            shown = text if len(text) <= 60 and "\n" not in text else "DataParallel(...)"
            message = (
                f"`{shown}.state_dict()` is the state dict of a DataParallel/DistributedDataParallel wrapper and is "
                f"{where}: every key starts with `module.`, so the bare model rejects it (unexpected keys); fix: "
                f"{verb} `{inner}.state_dict()`, the state dict of the model it wraps"
            )
        else:
            name = dotted(wrapper) or "model"
            message = (
                f"`{name}.state_dict()` of a DataParallel/DistributedDataParallel wrapper is {where}: every key "
                f"starts with `module.`, so the bare model rejects it (unexpected keys); fix: {verb} "
                f"`{name}.module.state_dict()`"
            )
        yield Finding(call, message=message)


RULE = Rule(
    code="FRY009",
    name="data-parallel-state-dict",
    message="the state dict of a DataParallel/DDP wrapper is saved: its keys start with `module.`",
    fix_title="save `model.module.state_dict()`, the state dict of the wrapped model",
    doc=__doc__ or "",
    check=check,
)
