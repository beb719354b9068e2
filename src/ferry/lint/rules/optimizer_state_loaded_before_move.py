"""FRY008 optimizer-state-loaded-before-move.

## What it does
Finds ``optimizer.load_state_dict(...)`` (also inside a function of the file that is given the optimizer, such as
``load_checkpoint(path, model, optimizer)``), or an optimizer that creates its state when it is built (``Adagrad``),
followed, in the same function (or at module level), by a move of the model
that the optimizer was built for to an accelerator (``model.to(device)``, ``model.cuda()``). Both lines are
reported: the load, and the move that comes too late.

The model is the one whose parameters the optimizer was built from (``torch.optim.Adam(model.parameters())``,
``build_optimizer(model)``), bound in the same function by an expression that does not move it already. Nothing is
reported when the model was moved before the load, when the two lines lie in branches that never both run, or when
the optimizer is handed to some other call after the load (``ferry.place(model, device, optimizer=opt)``,
``accelerator.prepare(model, opt)`` move the state) or its ``state`` is touched after it, on every path: a call
under an ``if`` that the load is not under (``if LOAD_MODEL: load_checkpoint(..., optimizer)``) leaves the other
path with the state behind.

## Why is this bad
``Optimizer.load_state_dict`` casts every state tensor (Adam's ``exp_avg``, SGD's ``momentum_buffer``) to the
device of its parameter *at the time of the call*. ``Module.to`` moves parameters and buffers but never the
optimizer state, so after a later move the state stays on the CPU (``Adagrad`` makes its ``sum`` state in its
constructor, on the parameters' device at that time: the same problem) and the first ``optimizer.step()`` fails with
"Expected all tensors to be on the same device" (pytorch#8741, pytorch#2830).

## Example
```python
import torch
import torch.nn as nn

net = nn.Linear(8, 2)
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
ckpt = torch.load("resume.pt", map_location="cpu")
net.load_state_dict(ckpt["net"])
opt.load_state_dict(ckpt["opt"])  # FRY008
net.to(torch.device("cuda"))  # FRY008
```

## Use instead
```python
import torch
import torch.nn as nn

net = nn.Linear(8, 2)
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
ckpt = torch.load("resume.pt", map_location="cpu")
net.load_state_dict(ckpt["net"])
net.to(torch.device("cuda"))
opt.load_state_dict(ckpt["opt"])
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._placement import counts_devices, local_functions
from ferry.lint.rules._placement_values import is_static
from ferry.lint.rules._training import (
    before,
    calls_in,
    exclusive,
    is_device_move,
    is_optimizer,
    move_chain_root,
    scope_node,
    walk_scope,
)
from ferry.lint.torch_api import EAGER_STATE_OPTIMIZERS

PLACE = frozenset({"ferry.place", "ferry.placement.place"})


def _binding_value(ctx: FileContext, name: str, at: ast.AST) -> ast.expr | None:
    """The expression last assigned to ``name`` before ``at``, in ``at``'s own scope (``None``: not bound there)."""
    kinds = ctx.kinds
    entries = kinds.bindings.get(kinds.scope_of(at), {}).get(name, [])
    use = (getattr(at, "lineno", 0), getattr(at, "col_offset", 0))
    earlier = [source for position, source in entries if position <= use]
    around = set(ctx.ancestors(at))
    while len(earlier) > 1 and earlier[-1][0] == "expr" and _multi_gpu_only(ctx, earlier[-1][1], around):
        earlier.pop()  # `if h.num_gpus > 1: generator = DDP(generator).to(device)`: on one GPU, the one before
    if not earlier or earlier[-1][0] != "expr":
        return None
    value: ast.expr = earlier[-1][1]
    return value


def _multi_gpu_only(ctx: FileContext, value: ast.AST, around: set[ast.AST]) -> bool:
    """Whether ``value`` is bound under ``if <several GPUs>:`` (with no ``else``) that ``around`` is not in."""
    return any(
        isinstance(above, ast.If) and above not in around and not above.orelse and counts_devices(above.test)
        for above in ctx.ancestors(value)
    )


def _models_of(value: ast.expr) -> set[str]:
    """Names of the modules an optimizer was built from: receivers of ``.parameters()`` and plain arguments."""
    found: set[str] = set()
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            callee = node.func
            if isinstance(callee, ast.Attribute) and callee.attr in ("parameters", "named_parameters"):
                name = dotted(callee.value)
                if name:
                    found.add(name)
    if isinstance(value, ast.Call):
        for arg in [*value.args, *(k.value for k in value.keywords)]:
            name = dotted(arg)
            if name:
                found.add(name)
    return found


def _moved(ctx: FileContext, call: ast.Call) -> str | None:
    """The name of what ``call`` moves to an accelerator, if it is such a move."""
    if is_device_move(ctx, call):
        assert isinstance(call.func, ast.Attribute)
        return dotted(move_chain_root(call.func.value))
    placed = ctx.call_name(call) in PLACE and 0 < len(call.args) < 3
    if placed and not any(k.arg == "optimizer" for k in call.keywords):
        return dotted(move_chain_root(call.args[0]))
    return None


def _belongs(model: str, candidates: set[str]) -> bool:
    return any(c == model or c.startswith(model + ".") for c in candidates)


def _state_events(ctx: FileContext) -> Iterator[tuple[ast.Call, str, set[str], bool]]:
    """``(call, optimizer, models, eager)`` for each event that puts optimizer state on the parameters' device.

    Each ``opt.load_state_dict(...)`` of an optimizer built in the same scope, a call of a function of the file that
    loads the state of the optimizer it is given (``load_checkpoint(path, model, optimizer)``), and each eager-state
    optimizer built (``eager``), with the names of the models it serves.
    """
    local = local_functions(ctx)
    for call in ctx.nodes(ast.Call):
        callee = call.func
        helper = local.get(callee.id) if isinstance(callee, ast.Name) else None
        if helper is not None:
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                opt = dotted(arg)
                if (
                    opt is None
                    or not is_optimizer(ctx, arg)
                    or not _loads_state(helper, _parameter_of(helper, call, opt))
                ):
                    continue
                built = _binding_value(ctx, opt, call)
                candidates = _models_of(built) if built is not None else set()
                if candidates:
                    yield call, opt, candidates, False
            continue
        if isinstance(callee, ast.Attribute) and callee.attr == "load_state_dict" and call.args:
            opt = dotted(callee.value)
            if opt is None or not is_optimizer(ctx, callee.value):
                continue
            built = _binding_value(ctx, opt, call)
            if built is None:
                continue  # an optimizer passed in: which model it serves, and where that is, is not known here
            candidates = _models_of(built)
            if candidates:
                yield call, opt, candidates, False
        elif ctx.call_name(call) in EAGER_STATE_OPTIMIZERS and call.args:
            parent = ctx.parent(call)
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is call:
                opt = dotted(parent.targets[0])
                candidates = {m for m in _models_of(call) if m != opt}
                if opt is not None and candidates:
                    yield call, opt, candidates, True


def _handled_later(
    ctx: FileContext,
    scope_calls: list[ast.Call],
    scope: ast.AST,
    opt: str,
    load: ast.Call,
    move: ast.Call,
) -> bool:
    """Whether the optimizer is handed to a call, or its ``.state`` touched, after the load.

    A function of this file that gets the optimizer after the move (``train(model, opt)``) handles it only if it
    touches the state or hands the optimizer on.
    """
    for node in walk_scope(scope):
        if not before(load, node) or _on_some_paths(ctx, node, load):
            continue
        if isinstance(node, ast.Attribute) and node.attr == "state" and dotted(node.value) == opt:
            return True
    for call in scope_calls:
        if call is load or not before(load, call) or _on_some_paths(ctx, call, load):
            continue
        callee = ctx.call_name(call) or ""
        if "sched" in callee.lower() or callee.startswith("torch.optim.lr_scheduler."):
            continue  # an LR scheduler does not move state
        if any(dotted(arg) == opt for arg in [*call.args, *(k.value for k in call.keywords)]):
            callee_def = _file_function(ctx, call)
            if callee_def is not None and before(move, call):
                func, offset = callee_def
                if not _touches_state(ctx, func, _parameter_of(func, call, opt, offset)):
                    continue
            return True
    return False


def _on_some_paths(ctx: FileContext, node: ast.AST, load: ast.Call) -> bool:
    """Whether ``node`` runs only on some of the paths that run ``load``: under an ``if`` that ``load`` is not in.

    ``if LOAD_MODEL: load_checkpoint(..., optimizer)`` repairs the state when it loads a checkpoint; a run that
    does not load one keeps the state where the optimizer made it.
    """
    around = set(ctx.ancestors(load))
    return any(isinstance(above, ast.If) and above not in around for above in ctx.ancestors(node))


def _parameter_of(
    func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, opt: str, offset: int = 0
) -> str | None:
    """The parameter of ``func`` that ``call`` passes ``opt`` to (``None``: through ``*args``/``**kwargs``).

    ``offset``: leading parameters the call does not pass (a method's ``self``).
    """
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]][offset:]
    for i, arg in enumerate(call.args):
        if dotted(arg) == opt:
            return params[i] if i < len(params) and not isinstance(arg, ast.Starred) else None
    for keyword in call.keywords:
        if keyword.arg is not None and dotted(keyword.value) == opt:
            return keyword.arg
    return None


def _loads_state(func: ast.FunctionDef | ast.AsyncFunctionDef, param: str | None) -> bool:
    """Whether ``func`` calls ``<param>.load_state_dict(...)`` (its parameter ``param`` holds the optimizer)."""
    return param is not None and any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "load_state_dict"
        and dotted(node.func.value) == param
        for node in ast.walk(func)
    )


def _touches_state(
    ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef, param: str | None, depth: int = 0
) -> bool:
    """Whether a function may put the optimizer's state where its parameters are.

    It loads the state again, changes ``state`` while moving tensors (``state[k] = v.to(device)``), or hands the
    optimizer to a call that may: ``ferry.place(model, device, optimizer=opt)``, ``accelerator.prepare(opt)``, any
    call this rule cannot read, or a function or method of the file that does so in turn (three calls deep). Only
    reading the state (DARTS's ``network_optimizer.state[v]["momentum_buffer"]``) moves nothing.

    ``param``: the parameter that holds the optimizer (``None``: not known, so any such use counts).
    """
    moves = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cuda")
        for n in ast.walk(func)
    )
    parents = {child: node for node in ast.walk(func) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(func):
        if param is None:
            if isinstance(node, ast.Attribute) and node.attr in ("place", "prepare", "load_state_dict"):
                return True
            if isinstance(node, ast.Attribute) and node.attr == "state" and moves:
                return True
            continue
        if not (isinstance(node, ast.Name) and node.id == param):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.attr in ("load_state_dict", "__setstate__"):
            return True
        if isinstance(parent, ast.Attribute) and parent.attr == "state" and moves:
            return True
        call = parents.get(parent) if isinstance(parent, ast.keyword) else parent
        if isinstance(call, ast.Call) and node is not call.func:
            callee = _file_function(ctx, call)
            if callee is None or depth >= 3:
                return True  # handed on to a call not read here
            inner, offset = callee
            given = _parameter_of(inner, call, param, offset)
            if given is None or _touches_state(ctx, inner, given, depth + 1):
                return True
    return False


def _file_function(ctx: FileContext, call: ast.Call) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None:
    """The function of the file ``call`` runs, and how many leading parameters it does not pass (``self``).

    A function defined once at the top of the file, or a method whose name only one class of the file defines.
    """
    func = call.func
    if isinstance(func, ast.Name):
        found = local_functions(ctx).get(func.id)
        return (found, 0) if found is not None else None
    if isinstance(func, ast.Attribute):
        methods = [
            m
            for cls in ctx.kinds.classes.values()
            for m in cls.body
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == func.attr
        ]
        if len(methods) == 1:
            return methods[0], 0 if is_static(methods[0]) else 1
    return None


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each optimizer state load that runs before its model moves to the device, and that move."""
    reported: set[ast.AST] = set()
    scope_calls: dict[ast.AST, list[ast.Call]] = {}
    for load, opt, candidates, eager in _state_events(ctx):
        if not candidates:
            continue
        scope = scope_node(ctx, load)
        if scope not in scope_calls:
            scope_calls[scope] = list(calls_in(scope))
        calls = scope_calls[scope]
        moves_before: set[str] = set()
        for call in calls:
            if before(call, load):
                moved = _moved(ctx, call)
                if moved:
                    moves_before.add(moved)
        for move in sorted((c for c in calls if before(load, c)), key=lambda c: (c.lineno, c.col_offset)):
            model = _moved(ctx, move)
            if model is None or not _belongs(model, candidates) or model in moves_before:
                continue
            if exclusive(ctx, load, move):
                continue
            value = _binding_value(ctx, model, load)
            if value is None or any(isinstance(c, ast.Call) and is_device_move(ctx, c) for c in ast.walk(value)):
                continue  # not built here, or built on the device already
            if _handled_later(ctx, calls, scope, opt, load, move):
                break
            if eager:
                built_name = ctx.call_name(load) or "the optimizer"
                fix = f"build `{opt}` after moving `{model}`, or use `ferry.place({model}, device, optimizer={opt})`"
                what = f"`{opt} = {built_name.rsplit('.', 1)[-1]}(...)` creates its state when it is built"
                first = (
                    f"{what}, before `{model}` is moved to the device (line {move.lineno}): the state is made on the "
                    f"parameters' current device and stays there when `{model}` moves, so `{opt}.step()` fails with "
                    f"a device mismatch; fix: {fix}"
                )
                event = f"`{opt}` is built (it creates its state then)"
            else:
                fix = f"move `{model}` first, or use `ferry.place({model}, device, optimizer={opt})`"
                first = (
                    f"`{opt}.load_state_dict(...)` runs before `{model}` is moved to the device (line "
                    f"{move.lineno}): the state is cast to the parameters' current device and stays there when "
                    f"`{model}` moves, so `{opt}.step()` fails with a device mismatch; fix: {fix}"
                )
                event = f"`{opt}.load_state_dict(...)`"
                if isinstance(load.func, ast.Name):  # `load_checkpoint(path, model, optimizer)`
                    event = f"`{load.func.id}(...)` loads `{opt}`'s state"
                    first = first.replace(f"`{opt}.load_state_dict(...)` runs", f"{event} (it calls `load_state_dict`)")
            if load not in reported:
                reported.add(load)
                yield Finding(load, message=first)
            if move not in reported:
                reported.add(move)
                yield Finding(
                    move,
                    message=f"`{model}` is moved to the device after {event}: the same problem as reported at line "
                    f"{load.lineno}, seen from the move (`Module.to` does not move optimizer state, which stays "
                    f"behind); one fix repairs both: {fix}",
                )
            break


RULE = Rule(
    code="FRY008",
    name="optimizer-state-loaded-before-move",
    message="optimizer state is loaded before the model is moved to the device: the state stays behind",
    fix_title="move the model to the device before `optimizer.load_state_dict(...)`",
    doc=__doc__ or "",
    check=check,
)
