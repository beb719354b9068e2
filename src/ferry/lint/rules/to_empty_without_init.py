"""FRY014 to-empty-without-init.

## What it does
Finds ``module.to_empty(device=...)`` after which nothing in the same function (or module-level script)
initialises the module before it is used: no ``reset_parameters()``, ``init_weights()``, ``apply(init_fn)``,
``load_state_dict(...)`` or similar call on it, no initialiser applied to its parameters, and the module is not
handed to other code (a call, a return, an attribute or a container) that could do it. A use is a forward call
(``model(x)``), building an optimizer on its parameters, ``train()``/``eval()``, or saving its ``state_dict()``.
Also finds a ``load_state_dict`` as the only initialisation when the module's class, defined in the file, registers
a non-persistent buffer (``register_buffer(..., persistent=False)``): the checkpoint does not hold it, so it keeps
``to_empty``'s garbage.

## Why is this bad
``to_empty`` gives a module built on ``meta`` memory on a device without writing anything into it: every parameter
and buffer holds whatever that memory held. Nothing raises; the model trains or predicts on garbage (NaN losses, or
plausible-looking wrong outputs). Non-persistent buffers (RoPE's ``inv_freq``, masks, position ids) are computed
in ``__init__`` and are in no ``state_dict``, so even loading a checkpoint leaves them garbage.

## Example
```python
import torch
import torch.nn as nn

with torch.device("meta"):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
model.to_empty(device="cpu")  # FRY014
out = model(torch.randn(4, 8))


class Rope(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)


def load(path):
    with torch.device("meta"):
        rope = Rope(64)
    rope.to_empty(device="cpu")  # FRY014
    rope.load_state_dict(torch.load(path, map_location="cpu"))
    return rope.inv_freq * 2
```

## Use instead
```python
import torch
import torch.nn as nn

import ferry

with ferry.deferred_init():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
ferry.materialize(model, "cpu")
out = model(torch.randn(4, 8))


class Rope(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)


def load(path):
    with ferry.deferred_init():
        rope = Rope(64)
    ferry.load_state_dict(rope, path, device="cpu")
    return rope.inv_freq * 2
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Finding, Rule

#: Methods of a module that (re)initialise its tensors, as PyTorch, transformers and timm name them.
INITIALISERS = frozenset(
    {
        "reset_parameters",
        "_reset_parameters",
        "reset_running_stats",
        "init_weights",
        "_init_weights",
        "initialize_weights",
        "_initialize_weights",
        "init_parameters",
        "_init_parameters",
        "post_init",
        "apply",
        "load_state_dict",
        "set_extra_state",
    }
)

#: Methods whose call on the module reads its values: a forward.
USES = frozenset({"forward", "generate", "predict"})

#: Methods that neither read nor write the values: the scan goes on past them.
NEUTRAL = frozenset(
    {
        "train",
        "eval",
        "requires_grad_",
        "zero_grad",
        "to",
        "cuda",
        "cpu",
        "half",
        "float",
        "bfloat16",
        "double",
        "register_forward_hook",
        "register_forward_pre_hook",
        "register_full_backward_hook",
        "named_modules",
    }
)

#: Callees that write the values they are handed out to a file.
SAVERS = frozenset({"save", "save_file", "save_model"})

#: Methods whose result hands out the module's tensors: initialised if code they are passed to writes them
#: (``dcp.load({"model": model.state_dict()})``, ``for p in model.parameters(): p.uniform_()``).
HANDS_OUT = frozenset(
    {"state_dict", "parameters", "named_parameters", "buffers", "named_buffers", "modules", "children"}
)

#: Callees that only read what they are handed: an optimizer keeps the parameters, a save writes them out.
READERS = frozenset(
    {
        "SGD",
        "Adam",
        "AdamW",
        "Adagrad",
        "Adadelta",
        "Adamax",
        "NAdam",
        "RAdam",
        "RMSprop",
        "Rprop",
        "ASGD",
        "LBFGS",
        "SparseAdam",
        "len",
        "sum",
        "list",
        "print",
    }
)


def _scope(ctx: FileContext, node: ast.AST) -> ast.AST:
    return ctx.enclosing_function(node) or ctx.tree


def _nonpersistent_classes(ctx: FileContext) -> set[str]:
    """Classes of the file that register a non-persistent buffer (``persistent=False``)."""
    found = set()
    for cls in ctx.nodes(ast.ClassDef):
        for call in ast.walk(cls):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_buffer"
                and any(
                    k.arg == "persistent" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in call.keywords
                )
            ):
                found.add(cls.name)
                break
    return found


def _class_built(ctx: FileContext, name: str, scope: ast.AST, before: int) -> str | None:
    """The class called to build ``name`` last in ``scope`` before line ``before`` (``rope = Rope(64)``)."""
    built = None
    for assign in ast.walk(scope):
        if (
            isinstance(assign, ast.Assign)
            and assign.lineno < before
            and any(dotted(t) == name for t in assign.targets)
            and isinstance(assign.value, ast.Call)
        ):
            built = dotted(assign.value.func)
    return built.rsplit(".", 1)[-1] if built else None


def _names_after(scope: ast.AST, name: str, position: tuple[int, int]) -> list[ast.Name | ast.Attribute]:
    """The mentions of ``name`` in ``scope`` after ``position``, in order, not inside nested functions or classes."""
    found: list[ast.Name | ast.Attribute] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if (
            isinstance(node, ast.Name | ast.Attribute)
            and dotted(node) == name
            and (node.lineno, node.col_offset) > position
        ):
            found.append(node)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def _writes_a_part(ctx: FileContext, node: ast.AST) -> bool:
    """``model.fc.weight.data.normal_()``, ``model.fc.weight.copy_(w)``, ``model.fc.bias = ...``: a part written."""
    current = node
    while True:
        parent = ctx.parent(current)
        if isinstance(parent, ast.Attribute | ast.Subscript) and parent.value is current:
            if isinstance(parent.ctx, ast.Store):
                return True
            current = parent
            continue
        if isinstance(parent, ast.Call) and parent.func is current:
            if isinstance(current, ast.Attribute) and current.attr.endswith("_") and not current.attr.endswith("__"):
                return True
            current = parent
            continue
        return isinstance(parent, ast.Call)  # a part handed to a call (nn.init.normal_(model.fc.weight))


def _hand_out(ctx: FileContext, call: ast.Call) -> str:
    """Where the tensors ``call`` hands out (``model.state_dict()``, ``model.parameters()``) go.

    ``"writer"``: a loop over them, a name or container that keeps them, or a call that may write them
    (``dcp.load(...)``); ``"save"``: ``torch.save`` and the like, which write the values out; ``"reader"``: an
    optimizer or a plain reader, which does not look at the values yet; ``"none"``: nowhere (a bare expression).
    """
    current: ast.AST = call
    while True:
        parent = ctx.parent(current)
        if parent is None:
            return "none"
        if isinstance(parent, ast.For | ast.comprehension) and parent.iter is current:
            return "writer"
        if isinstance(parent, ast.Call) and parent.func is not current:
            callee = dotted(parent.func) or (parent.func.attr if isinstance(parent.func, ast.Attribute) else "")
            last = callee.rsplit(".", 1)[-1]
            if last in SAVERS:
                return "save"
            return "reader" if last in READERS else "writer"
        if isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr | ast.Return):
            return "writer"  # kept in a name: what happens to it next is not followed
        if isinstance(parent, ast.stmt):
            return "none"
        current = parent


def _verdict(ctx: FileContext, name: str, call: ast.expr) -> tuple[str, ast.AST | None]:
    """What follows ``name.to_empty(...)`` in its scope: ``init``, ``escape``, ``load``, ``use`` or ``none``."""
    end = (call.end_lineno or call.lineno, call.end_col_offset or 0)
    loaded: ast.AST | None = None
    for node in _names_after(_scope(ctx, call), name, end):
        parent = ctx.parent(node)
        if isinstance(node.ctx, ast.Store | ast.Del):
            return "escape", None  # rebound: another module from here on
        if isinstance(parent, ast.Attribute) and parent.value is node:
            grand = ctx.parent(parent)
            if isinstance(grand, ast.Call) and grand.func is parent:
                if parent.attr == "load_state_dict":
                    loaded = loaded or grand
                    continue
                if parent.attr in INITIALISERS:
                    return "init", None
                if parent.attr in HANDS_OUT:
                    where = _hand_out(ctx, grand)
                    if where == "writer":
                        return "escape", None
                    if where == "save":
                        return ("load", loaded) if loaded is not None else ("use", grand)
                    continue  # an optimizer built on them, a count: the values are not read yet
                if parent.attr in NEUTRAL:
                    continue  # train(), eval(), requires_grad_(), dtype conversions: no value is read
                if parent.attr in USES:
                    return ("load", loaded) if loaded is not None else ("use", grand)
                return "escape", None  # a method of its own: it may initialise
            if _writes_a_part(ctx, parent):
                return "escape", None
            if loaded is not None:
                return "load", loaded  # a part read after a load (rope.inv_freq)
            return "escape", None  # a part read: it may be initialised through an alias
        if isinstance(parent, ast.Call) and parent.func is node:
            return ("load", loaded) if loaded is not None else ("use", parent)
        return "escape", None  # an argument, returned, stored, compared...: other code may initialise it
    return ("load", loaded) if loaded is not None else ("none", None)


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each ``to_empty`` whose module is used (or loaded without its non-persistent buffers) uninitialised."""
    if "to_empty" not in ctx.source:
        return
    nonpersistent: set[str] | None = None
    for call in ctx.nodes(ast.Call):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "to_empty"):
            continue
        name = dotted(call.func.value)
        if name is None:
            continue
        parent = ctx.parent(call)
        anchor: ast.expr = call
        if (  # `model.to_empty(...).eval()`: the chain returns the module
            isinstance(parent, ast.Attribute)
            and parent.attr in ("eval", "train", "requires_grad_", "float", "half", "bfloat16")
            and isinstance(ctx.parent(parent), ast.Call)
        ):
            anchor = ctx.parent(parent)  # type: ignore[assignment]
            parent = ctx.parent(anchor)
        if isinstance(parent, ast.Assign):
            targets = [dotted(t) for t in parent.targets]
            if len(targets) != 1 or targets[0] is None:
                continue
            held = targets[0]  # `model = model.to_empty(...)`, or `other = ...`: the name that holds it next
        elif isinstance(parent, ast.Expr):
            held = name
        else:
            continue
        verdict, where = _verdict(ctx, held, anchor)
        if verdict == "use":
            shown = ctx.segment(where) if where is not None else name
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            yield Finding(
                call,
                message=f"`{name}.to_empty(...)` leaves every parameter and buffer of `{name}` holding whatever "
                f"the memory held, and `{shown}` uses them before anything initialises them; fix: build it under "
                f"`with ferry.deferred_init():` and call `ferry.materialize({name}, device)` (or "
                f"`ferry.load_state_dict({name}, path, device=device)`), or initialise it after `to_empty` "
                f"(`{name}.apply(init_fn)`, `reset_parameters()` of each submodule)",
            )
        elif verdict == "load":
            if nonpersistent is None:
                nonpersistent = _nonpersistent_classes(ctx)
            built = _class_built(ctx, name, _scope(ctx, call), call.lineno)
            if built is not None and built in nonpersistent:
                yield Finding(
                    call,
                    message=f"after `{name}.to_empty(...)`, `load_state_dict` fills only what the checkpoint "
                    f"holds: the non-persistent buffers of `{built}` (`register_buffer(..., persistent=False)`) "
                    f"keep to_empty's garbage; fix: build it under `with ferry.deferred_init():` and load with "
                    f"`ferry.load_state_dict({name}, path, device=device)`, which remakes them, or recompute them "
                    "after loading",
                )


RULE = Rule(
    code="FRY014",
    name="to-empty-without-init",
    message="`to_empty()` leaves the module's tensors uninitialised and nothing initialises them before use",
    fix_title="build under `ferry.deferred_init()` and `ferry.materialize(model, device)`, or initialise after "
    "`to_empty`",
    doc=__doc__ or "",
    check=check,
)
