"""FRY004 whole-module-pickled.

## What it does
Finds ``torch.save`` called on an ``nn.Module`` itself, or on a checkpoint dict, list or tuple that holds one
(``{"epoch": epoch, "model": model}``, also when built first and filled with ``state["model"] = model``); the same
for an optimizer or a learning-rate scheduler known as one by what it was bound to (``torch.optim.Adam(...)``),
whose pickle ``torch.load(weights_only=True)`` refuses as well. A value
is a module by what it was bound to (``nn`` classes, classes of the file that subclass ``nn.Module``, model
builders, ``self`` in a module's method), or, for a parameter whose callers are not in the file, by its name
(``model``, ``net``, ``network``, ``*_model``, ``*_net``, ``netG``) when it is stored as it is; callers in the file
that pass something else (``save(model.state_dict(), path)``) silence that. The same names count for an attribute of
``self`` or a local bound only to parameters, ``getattr(...)`` or modules (``self.model``, ``net =
getattr(self, "net" + name)``), through ``.cpu()``/``.eval()`` and a ``DataParallel``'s ``.module``.

## Why is this bad
Pickling a module stores a reference to its class (``models.textcnn.TextCNN``), not its code: loading needs the
same source tree at the same import path, fails after any refactor with "No module named ..." or "Can't get
attribute ...", cannot load a class defined in a notebook from another script, and is refused by
``torch.load(weights_only=True)``, the default since PyTorch 2.6.

## Example
```python
import torch
import torch.nn as nn

net = nn.Linear(8, 2)
torch.save(net, "net.pt")  # FRY004


def save_checkpoint(epoch, model, optimizer, path):
    torch.save({"epoch": epoch, "model": model}, path)  # FRY004
```

## Use instead
```python
import torch
import torch.nn as nn

net = nn.Linear(8, 2)
torch.save(net.state_dict(), "net.pt")


def save_checkpoint(epoch, model, optimizer, path):
    torch.save({"epoch": epoch, "model": model.state_dict()}, path)
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._io import parameters
from ferry.lint.torch_api import SAVES

MODEL_NAMES = frozenset({"model", "net", "network"})
MODEL_SUFFIXES = ("_model", "_net", "_network")


def _model_parameter(ctx: FileContext, name: ast.Name) -> bool:
    """Whether ``name`` is an unannotated, never rebound parameter named like a model that no caller fills otherwise."""
    if name.id not in MODEL_NAMES and not name.id.endswith(MODEL_SUFFIXES):
        return False
    func = ctx.enclosing_function(name)
    if func is None:
        return False
    params = [arg for arg, _ in parameters(func)]
    index = next((i for i, arg in enumerate(params) if arg.arg == name.id), None)
    if index is None or params[index].annotation is not None:
        return False
    if len(ctx.kinds.bindings.get(func, {}).get(name.id, [])) != 1:
        return False  # rebound in the function: `model = model.state_dict()`
    method = ctx.enclosing_class(func) is not None and bool(params) and params[0].arg in ("self", "cls")
    for call in ctx.nodes(ast.Call):
        callee = call.func.attr if isinstance(call.func, ast.Attribute) else dotted(call.func)
        if callee != func.name:
            continue
        position = index - 1 if method else index
        passed = next((k.value for k in call.keywords if k.arg == name.id), None)
        if passed is None and 0 <= position < len(call.args):
            passed = call.args[position]
        if passed is not None:
            kind = ctx.kind(passed)
            if kind is not None and kind.is_module:
                continue
            if isinstance(passed, ast.Attribute) and passed.attr == "module":  # `self.net.module` of DataParallel
                passed = passed.value
            last = passed.attr if isinstance(passed, ast.Attribute) else getattr(passed, "id", None)
            if kind is None and isinstance(last, str) and _model_name(last):
                continue  # `self.save_network(self.net, ...)`, `save(self.rankLoss.net)`: named as a model
            return False
    return True


def _module(ctx: FileContext, node: ast.expr, depth: int = 0) -> bool:
    kind = ctx.kind(node)
    if kind is not None:
        return kind.is_module
    if depth > 3:
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MODULE_CHAIN:
        return not node.args and _module(ctx, node.func.value, depth + 1)  # `net.module.cpu()`
    if isinstance(node, ast.Attribute) and node.attr == "module":  # the module a DataParallel wraps
        return _module(ctx, node.value, depth + 1) or (isinstance(node.value, ast.Name) and _model_name(node.value.id))
    if isinstance(node, ast.Attribute) and dotted(node.value) == "self" and _model_name(node.attr):
        return _kept_as_it_is(ctx, node)  # `self.model`, set in `__init__` from a parameter
    if isinstance(node, ast.Name):
        return _model_parameter(ctx, node) or (_model_name(node.id) and _kept_as_it_is(ctx, node))
    return False


#: Module methods that return the module itself (``net.cpu()`` saved is ``net`` saved).
MODULE_CHAIN = frozenset({"cpu", "cuda", "eval", "train", "float", "half", "double", "bfloat16"})


def _model_name(name: str) -> bool:
    """``model``, ``net``, ``*_model``, ``netG``: a name people give modules."""
    return name in MODEL_NAMES or name.endswith(MODEL_SUFFIXES) or (name.startswith("net") and name[3:4].isupper())


def _builder_name(func: ast.expr) -> bool:
    """``network_fn``, ``build_model``, ``get_net``: a callable named for building a model."""
    last = (dotted(func) or "").rpartition(".")[2].lower()
    return any(word in last.split("_") for word in ("net", "network", "model")) and "state" not in last


def _kept_as_it_is(ctx: FileContext, node: ast.Name | ast.Attribute) -> bool:
    """Whether every binding of the name (of the attribute, in its class) is a parameter, ``getattr``, or a module.

    Not when one is a ``state_dict()``, a dict or a ``torch.load`` result: then it may hold weights, not a module.
    """
    name = dotted(node)
    if name is None:
        return False
    cls = ctx.enclosing_class(node)
    scope = cls if isinstance(node, ast.Attribute) else (ctx.enclosing_function(node) or ctx.tree)
    if scope is None:
        return False
    scopes: list[ast.AST] = [scope]
    if isinstance(node, ast.Attribute) and cls is not None:  # DeepRL's `BaseAgent.save`: subclasses set `self.network`
        scopes += [c for c in ctx.kinds.classes.values() if any(dotted(b) == cls.name for b in c.bases)]
    values = [
        n.value
        for part in scopes
        for n in ast.walk(part)
        if isinstance(n, ast.Assign) and any(dotted(t) == name for t in n.targets)
    ]
    if not values:
        return False
    for value in values:
        if isinstance(value, ast.Name):
            continue
        if isinstance(value, ast.Call) and ctx.call_name(value) == "getattr":
            continue
        if isinstance(value, ast.Call) and _builder_name(value.func):
            continue  # `self.network = config.network_fn()`, `self.model = build_model(cfg)`
        kind = ctx.kind(value)
        if kind is None or not kind.is_module:
            return False
    return True


def _literal(ctx: FileContext, node: ast.expr, at: ast.AST) -> ast.expr | None:
    """The dict/list/tuple literal ``node`` is, or that the name ``node`` was last bound to before ``at``."""
    if isinstance(node, ast.Dict | ast.List | ast.Tuple):
        return node
    if not isinstance(node, ast.Name):
        return None
    scope = ctx.kinds.scope_of(node)
    entries = ctx.kinds.bindings.get(scope, {}).get(node.id, [])
    where = (getattr(at, "lineno", 0), getattr(at, "col_offset", 0))
    before = [source for position, source in entries if position <= where]
    if before and before[-1][0] == "expr" and isinstance(before[-1][1], ast.Dict | ast.List | ast.Tuple):
        return before[-1][1]
    return None


def _held_modules(ctx: FileContext, obj: ast.expr, at: ast.Call) -> Iterator[tuple[str, ast.expr]]:
    """``(where, value)`` for each module held by the container ``obj`` (``'key "model"'``, ``"item 0"``)."""
    literal = _literal(ctx, obj, at)
    if isinstance(literal, ast.Dict):
        for key, value in zip(literal.keys, literal.values, strict=True):
            if key is not None and _module(ctx, value):
                yield (f"key {ctx.segment(key)}", value)
    elif isinstance(literal, ast.List | ast.Tuple):
        for i, item in enumerate(literal.elts):
            if not isinstance(item, ast.Starred) and _module(ctx, item):
                yield (f"item {i}", item)
    if isinstance(obj, ast.Name):  # state["model"] = model, between the literal and the save
        func = ctx.enclosing_function(at)
        for assign, target in _item_stores(ctx).get(obj.id, []):
            if assign.lineno < at.lineno and ctx.enclosing_function(assign) is func and _module(ctx, assign.value):
                yield (f"key {ctx.segment(target.slice)}", assign.value)


Stores = dict[str, list[tuple[ast.Assign, ast.Subscript]]]


def _item_stores(ctx: FileContext) -> Stores:
    """Name -> the ``name[key] = value`` statements of the file (built once per file)."""
    return ctx.shared(_find_item_stores)


def _find_item_stores(ctx: FileContext) -> Stores:
    stores: Stores = {}
    for assign in ctx.nodes(ast.Assign):
        for target in assign.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                stores.setdefault(target.value.id, []).append((assign, target))
    return stores


def _stateful(ctx: FileContext, node: ast.expr) -> str | None:
    """``"optimizer"`` or ``"scheduler"`` when ``node`` is one by what it was bound to (``torch.optim.Adam(...)``)."""
    kind = ctx.kind(node)
    return kind.name if kind is not None and kind.name in ("optimizer", "scheduler") else None


def _pickled(ctx: FileContext, node: ast.expr) -> str | None:
    """What whole object ``node`` is, if saving it pickles one: ``"module"``, ``"optimizer"``, ``"scheduler"``."""
    return "module" if _module(ctx, node) else _stateful(ctx, node)


def _held(ctx: FileContext, obj: ast.expr, at: ast.Call) -> Iterator[tuple[str, ast.expr, str]]:
    """``(where, value, what)`` for each module, optimizer or scheduler held by the container ``obj``."""
    literal = _literal(ctx, obj, at)
    if isinstance(literal, ast.Dict):
        for key, value in zip(literal.keys, literal.values, strict=True):
            what = _stateful(ctx, value) if key is not None else None
            if what is not None:
                yield (f"key {ctx.segment(key)}", value, what)  # type: ignore[arg-type]
    elif isinstance(literal, ast.List | ast.Tuple):
        for i, item in enumerate(literal.elts):
            what = None if isinstance(item, ast.Starred) else _stateful(ctx, item)
            if what is not None:
                yield (f"item {i}", item, what)
    for where, value in _held_modules(ctx, obj, at):
        yield (where, value, "module")


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each ``torch.save`` of a module, optimizer or scheduler, or of a container holding one."""
    if "save(" not in ctx.source:
        return
    for call in ctx.nodes(ast.Call):
        if ctx.call_name(call) not in SAVES or not call.args or isinstance(call.args[0], ast.Starred):
            continue
        obj = call.args[0]
        shown = ctx.segment(obj) if len(ctx.segment(obj)) <= 40 else "obj"
        what = _pickled(ctx, obj)
        if what is not None:
            fresh = "model" if what == "module" else what
            yield Finding(
                call,
                message=f"`torch.save({shown}, ...)` pickles the whole {what}: loading needs its class at the same "
                f"import path and fails with weights_only=True; fix: `torch.save({shown}.state_dict(), ...)` and "
                f"load it into a freshly built {fresh}",
            )
            continue
        if isinstance(obj, ast.Dict | ast.List | ast.Tuple) and shown == "obj":
            shown = {ast.Dict: "dict", ast.List: "list", ast.Tuple: "tuple"}[type(obj)]
        for where, value, what in _held(ctx, obj, call):
            name = ctx.segment(value)
            yield Finding(
                call,
                message=f"the `{shown}` saved by `torch.save` holds the whole {what} `{name}` ({where}): loading "
                f"needs its class at the same import path and fails with weights_only=True; fix: store "
                f"`{name}.state_dict()` instead",
            )
            break


RULE = Rule(
    code="FRY004",
    name="whole-module-pickled",
    message="`torch.save` pickles a whole `nn.Module`: loading needs its class at the same import path",
    fix_title="save the module's `state_dict()` and load it into a freshly built model",
    doc=__doc__ or "",
    check=check,
)
