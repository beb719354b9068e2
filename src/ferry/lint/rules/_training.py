"""Helpers shared by the training rules (FRY008, FRY009, FRY010, FRY101): control flow, grad mode, moves.

Not a rule (leading underscore). Everything here answers a narrow question about one file's tree and errs towards
"cannot tell", which the rules read as "stay silent".
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.torch_api import ACCELERATOR_MOVES, ACCELERATORS, GRAD_MODES, MODULE_SELF_METHODS

__all__ = [
    "BOUNDARIES",
    "LOOPS",
    "OPTIMIZER_NAME",
    "before",
    "calls_in",
    "exclusive",
    "grad_mode_context",
    "innermost_loop",
    "is_device_move",
    "is_optimizer",
    "move_chain_root",
    "scope_node",
    "walk_scope",
]

#: Nodes that start a new body of code: what runs inside them does not run where they stand.
BOUNDARIES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
LOOPS = (ast.For, ast.AsyncFor, ast.While)
TRIES: tuple[type[ast.AST], ...] = (ast.Try, getattr(ast, "TryStar", ast.Try))  # `try/except*` is Python 3.11+

#: Names that say "optimizer": ``optimizer``, ``opt``, ``optim``, ``d_optim``, ``optimizer_g``, ``self.optimizer``.
OPTIMIZER_NAME = re.compile(r"(^|_)(optimizer|optimiser|optim|opt)(s|_[a-z0-9]+|[0-9])?$")

_DEVICE_NAME = re.compile(r"(device|dev|gpu|cuda|rank)", re.IGNORECASE)


def pos(node: ast.AST) -> tuple[int, int]:
    """``(line, column)`` where ``node`` starts."""
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def before(a: ast.AST, b: ast.AST) -> bool:
    """Whether ``a`` ends before ``b`` starts in the source."""
    end = (getattr(a, "end_lineno", 0) or 0, getattr(a, "end_col_offset", 0) or 0)
    return end <= pos(b)


def scope_node(ctx: FileContext, node: ast.AST) -> ast.AST:
    """The function, lambda, class body or module whose code ``node`` is part of."""
    for above in ctx.ancestors(node):
        if isinstance(above, BOUNDARIES):
            return above
    return ctx.tree


def walk_scope(root: ast.AST) -> Iterator[ast.AST]:
    """Every node below ``root`` that runs as part of ``root``'s code: nested functions and classes are skipped."""
    stack = list(ast.iter_child_nodes(root))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, BOUNDARIES):
            stack.extend(ast.iter_child_nodes(node))


def calls_in(root: ast.AST) -> Iterator[ast.Call]:
    """The calls of :func:`walk_scope`."""
    for node in walk_scope(root):
        if isinstance(node, ast.Call):
            yield node


def innermost_loop(ctx: FileContext, node: ast.AST) -> ast.For | ast.AsyncFor | ast.While | None:
    """The innermost loop whose body (or ``else``) runs ``node``, within ``node``'s function."""
    child = node
    for above in ctx.ancestors(node):
        if isinstance(above, BOUNDARIES):
            return None
        if isinstance(above, LOOPS) and not (
            isinstance(above, ast.For | ast.AsyncFor) and child in (above.iter, above.target)
        ):
            return above
        child = above
    return None


def _branch(holder: ast.AST, child: ast.AST) -> tuple[str, int] | None:
    """Which field of ``holder`` holds ``child``: ``("body", 0)``, ``("handlers", 2)``, ..."""
    for field, value in ast.iter_fields(holder):
        if value is child:
            return (field, 0)
        if isinstance(value, list) and child in value:
            index = value.index(child) if field in ("handlers", "cases") else 0
            return (field, index)
    return None


def exclusive(ctx: FileContext, a: ast.AST, b: ast.AST) -> bool:
    """Whether ``a`` and ``b`` lie in branches of one ``if``/``try``/``match`` that never both run."""
    path_a: dict[ast.AST, ast.AST] = {}
    child = a
    for above in ctx.ancestors(a):
        path_a[above] = child
        child = above
    child = b
    for above in ctx.ancestors(b):
        if above in path_a:
            one, two = _branch(above, path_a[above]), _branch(above, child)
            if one is None or two is None or one == two:
                return False
            fields = {one[0], two[0]}
            if isinstance(above, ast.If | ast.IfExp):
                return fields == {"body", "orelse"}
            if isinstance(above, TRIES):
                return fields == {"handlers"} or fields == {"handlers", "orelse"}
            if isinstance(above, ast.Match):
                return fields == {"cases"}
            return False
        child = above
    return False


def grad_mode_context(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` runs under a grad-mode switch: ``with torch.no_grad():``, ``@torch.inference_mode()``, ...

    Any ancestor counts, also beyond the enclosing function (a function defined under ``no_grad`` is usually called
    there too): the rules use this to stay silent.
    """
    for above in ctx.ancestors(node):
        if isinstance(above, ast.With | ast.AsyncWith):
            for item in above.items:
                if _is_grad_mode(ctx, item.context_expr):
                    return True
        if isinstance(above, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            _is_grad_mode(ctx, deco) for deco in above.decorator_list
        ):
            return True
    return False


def _is_grad_mode(ctx: FileContext, expr: ast.AST) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    return ctx.qualname(target) in GRAD_MODES


def move_chain_root(expr: ast.AST) -> ast.AST:
    """``model`` for ``model.to(device).eval()``: the receiver under a chain of moves, casts and mode switches.

    Also through a conditional expression whose branches have the same receiver: ``(waveglow.cuda() if
    torch.cuda.is_available() else waveglow).eval()`` switches ``waveglow`` either way.
    """
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in MODULE_SELF_METHODS:
        expr = expr.func.value
    if isinstance(expr, ast.IfExp):
        body, orelse = move_chain_root(expr.body), move_chain_root(expr.orelse)
        if ast.dump(body) == ast.dump(orelse):
            return body
    return expr


def _device_like(ctx: FileContext, arg: ast.AST) -> bool:
    """Whether ``arg`` of ``.to(arg)`` names an accelerator (or a device variable), not a dtype or the CPU."""
    if isinstance(arg, ast.Constant):
        if isinstance(arg.value, str):
            return arg.value.split(":")[0] in ACCELERATORS
        return isinstance(arg.value, int) and not isinstance(arg.value, bool)
    if isinstance(arg, ast.Call) and ctx.call_name(arg) == "torch.device":
        return not arg.args or _device_like(ctx, arg.args[0])
    kind = ctx.kind(arg) if isinstance(arg, ast.expr) else None
    if kind is not None:
        return kind.name == "device"
    name = dotted(arg)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return bool(_DEVICE_NAME.search(last)) and "dtype" not in last.lower()


def is_device_move(ctx: FileContext, call: ast.Call) -> bool:
    """Whether ``call`` is ``x.cuda(...)``/``x.xpu()``/``x.to(<an accelerator or device variable>)``."""
    if not isinstance(call.func, ast.Attribute):
        return False
    method = call.func.attr
    if method in ACCELERATOR_MOVES:
        return True
    if method != "to":
        return False
    for keyword in call.keywords:
        if keyword.arg == "device":
            return _device_like(ctx, keyword.value)
    return bool(call.args) and _device_like(ctx, call.args[0])


def is_optimizer(ctx: FileContext, expr: ast.expr) -> bool:
    """Whether ``expr`` holds an optimizer: by its kind, or else by its name (``optimizer``, ``self.opt_g``)."""
    kind = ctx.kind(expr)
    if kind is not None:
        return kind.name == "optimizer"
    name = dotted(expr)
    if name is None:
        return False
    return bool(OPTIMIZER_NAME.search(name.rsplit(".", 1)[-1].lower()))
