"""Helpers of the tensor rules (FRY005, FRY012, FRY013): bindings, device expressions, places and dtypes.

Everything here answers from the source alone and says "don't know" (an empty set, ``False``, ``None``) whenever a
value could come from outside the file: the rules stay silent on what they cannot see.

- :func:`binding` finds what a name was last bound to before a use (the same scoping as :mod:`ferry.lint.kinds`).
- :func:`device_types` tells which device types a device expression may name (``"cuda"``, ``"mps"``, ``"cpu"``).
- :class:`Places` tells where a tensor or a module may live: the device types of its ``device=``, ``.to(...)`` and
  ``.cuda()``, followed through names, tensor operations, module calls and the functions of the file.
- :class:`Float64` tells whether a tensor, a NumPy array or a module is certainly float64.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from ferry.lint.context import FileContext, dotted
from ferry.lint.kinds import Source, own_returns
from ferry.lint.memo import Memo
from ferry.lint.torch_api import (
    DATA_FACTORIES,
    DEVICE_TYPES,
    DTYPE_CASTS,
    DTYPES,
    FACTORIES,
    NOT_TENSOR_METHODS,
    NUMPY_FACTORIES,
    PARALLEL_WRAPPERS,
    SAME_PLACE_METHODS,
)

__all__ = [
    "FLOAT64_DTYPES",
    "Binding",
    "Float64",
    "Places",
    "binding",
    "describe",
    "device_types",
    "float64",
    "keyword",
    "places",
]

#: The spellings of float64 as a dtype.
FLOAT64_DTYPES = frozenset({"torch.float64", "torch.double", "numpy.float64", "numpy.double", "float"})
_FLOAT64_STRINGS = frozenset({"float64", "double", "f8", "torch.float64", "torch.double", "torch.DoubleTensor"})

#: Methods that give back the value they are called on, on the same device (modules and tensors alike; ``zero_grad``
#: gives ``None`` but leaves the module where it is).
_MODULE_KEEPS = SAME_PLACE_METHODS | {"zero_grad"}
#: ``DataParallel`` runs only on CUDA (``DistributedDataParallel`` may run on the CPU).
_CUDA_WRAPPERS = frozenset(name for name in PARALLEL_WRAPPERS if name.endswith(".DataParallel"))
#: Calls that make a tensor from data, by their full names.
_DATA_CALLS = frozenset(f"torch.{name}" for name in DATA_FACTORIES | NUMPY_FACTORIES)

Position = tuple[int, int]


def _pos(node: ast.AST, end: bool = False) -> Position:
    if end:
        return (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def describe(ctx: FileContext, node: ast.AST, default: str = "the tensor") -> str:
    """How to name ``node`` in a message: its source when short (``out.detach()``), else ``default``."""
    text = dotted(node) or ctx.segment(node)
    return text if text and len(text) <= 40 and "\n" not in text else default


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    """The value of keyword argument ``name`` of ``call``, if given by name."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_double_star(call: ast.Call) -> bool:
    """Whether ``call`` passes ``**kwargs`` (which may hold anything, a device included)."""
    return any(kw.arg is None for kw in call.keywords)


@dataclass(frozen=True)
class Binding:
    """What a name holds at a use: the binding's source (see :mod:`ferry.lint.kinds`), where, and in which scope.

    ``parameter`` is set when the binding is a parameter of the function ``scope``.
    """

    source: Source
    scope: ast.AST
    at: Position
    parameter: ast.arg | None = None

    @property
    def value(self) -> ast.expr | None:
        """The expression assigned, for ``x = ...`` bindings."""
        value: ast.expr | None = self.source[1] if self.source[0] == "expr" else None
        return value


def parameters(func: ast.AST) -> dict[str, ast.arg]:
    """The parameters of a function by name (``{}`` for anything else)."""
    if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        return {}
    args = func.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every.extend(extra for extra in (args.vararg, args.kwarg) if extra is not None)
    return {arg.arg: arg for arg in every}


def binding(ctx: FileContext, name: str, at: ast.AST) -> Binding | None:
    """The latest binding of the dotted ``name`` before ``at``, in the innermost scope that binds it.

    ``None`` when nothing binds it, or when the innermost scope binds it only after ``at`` (a loop-carried value).
    """
    found = ctx.kinds.find_binding(name, at)
    if found is None:
        return None
    scope, position, source = found
    param = None
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) and position == _pos(scope):
        param = parameters(scope).get(name)
    return Binding(source, scope, position, param)


def is_dtype(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` names a dtype: ``torch.float32``, ``x.dtype``, ``np.float64``."""
    if isinstance(node, ast.Attribute) and node.attr == "dtype":
        return True
    full = ctx.qualname(node)
    if full is None:
        return False
    head, _, last = full.rpartition(".")
    return (head == "torch" and last in DTYPES) or head == "numpy"


def is_float64_dtype(ctx: FileContext, node: ast.AST | None) -> bool:
    """Whether ``node`` spells float64: ``torch.float64``, ``torch.double``, ``np.float64``, ``"float64"``."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in _FLOAT64_STRINGS
    full = ctx.qualname(node)
    return full in FLOAT64_DTYPES or full == "torch.DoubleTensor"


#: Factories that make their tensor on the default device when not given ``device=``.
_DEFAULT_DEVICE_FACTORIES = frozenset(f"torch.{name}" for name in FACTORIES | {"tensor"})

# -- device expressions -----------------------------------------------------------------------------------------

#: Calls that give a device which may be an accelerator.
_ACCELERATOR_CALLS = {
    "torch.cuda.current_device": frozenset({"cuda"}),
    "ferry.pick_device": frozenset({"cuda", "mps", "cpu"}),
    "ferry.devices.pick_device": frozenset({"cuda", "mps", "cpu"}),
}


def _string_device(text: str) -> frozenset[str]:
    kind = text.split(":")[0].strip().lower()
    return frozenset({kind}) if kind in DEVICE_TYPES else frozenset()


def device_types(ctx: FileContext, node: ast.AST | None, _seen: frozenset[str] = frozenset()) -> frozenset[str]:
    """The device types a device expression may name: ``"cuda"`` for ``"cuda:0"``, both for a conditional.

    Follows names to what they were bound to (a parameter to its default), ``torch.device(...)``, ``x if c else y``
    and ``a or b``; an integer is a CUDA index. Empty when it cannot tell.
    """
    if node is None:
        return frozenset()
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return _string_device(node.value)
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return frozenset({"cuda"})
        return frozenset()
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return _string_device(first.value)
        return frozenset()
    if isinstance(node, ast.IfExp):
        return device_types(ctx, node.body, _seen) | device_types(ctx, node.orelse, _seen)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        found: frozenset[str] = frozenset()
        for value in node.values:
            found |= device_types(ctx, value, _seen)
        return found
    if isinstance(node, ast.Call):
        name = ctx.call_name(node)
        if name == "torch.device" and node.args:
            return device_types(ctx, node.args[0], _seen)
        if name == "torch.device":
            return device_types(ctx, keyword(node, "type"), _seen)
        if name in _ACCELERATOR_CALLS:
            return _ACCELERATOR_CALLS[name]
        if name == "str" and len(node.args) == 1:
            return device_types(ctx, node.args[0], _seen)
        return frozenset()
    name = dotted(node) if isinstance(node, ast.Name | ast.Attribute) else None
    if name is None or name in _seen:
        return frozenset()
    bound = binding(ctx, name, node)
    if bound is None:
        return frozenset()
    if bound.parameter is not None:
        return device_types(ctx, _default(bound.scope, bound.parameter), _seen | {name})
    return device_types(ctx, bound.value, _seen | {name})


def _default(func: ast.AST, param: ast.arg) -> ast.expr | None:
    if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
        if arg is param:
            return default
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if arg is param:
            return kw_default
    return None


def _move_target(ctx: FileContext, call: ast.Call) -> ast.expr | None:
    """The device (or tensor) a ``.to(...)`` call sends its receiver to; ``None`` for a dtype-only conversion."""
    target = keyword(call, "device")
    if target is not None:
        return target
    if call.args and not is_dtype(ctx, call.args[0]):
        return call.args[0]
    return None


def _to_dtype(ctx: FileContext, call: ast.Call) -> ast.expr | None:
    """The dtype a ``.to(...)`` call converts to, if it names one."""
    given = keyword(call, "dtype")
    if given is not None:
        return given
    for arg in call.args[:2]:
        if is_dtype(ctx, arg):
            return arg
    return None


# -- where tensors and modules live -------------------------------------------------------------------------------


class Places:
    """Where tensors and modules of one file may live, by the device types they were sent to.

    A value's places are the device types named where it was created (``device=``) or moved (``.to(d)``,
    ``.cuda()``), carried through names, tensor methods, ``torch`` functions, arithmetic, module calls (a module's
    output lives where the module or its input does) and the functions of the file (a call's result lives where the
    function's returned value does, with its parameters standing for the arguments). ``.cpu()`` ends the trail.
    Empty: on the CPU, or not known.
    """

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._places: Memo[ast.AST, frozenset[str]] = Memo(lambda node: self._of(node, None, 0), frozenset())

    @cached_property
    def _in_place_moves(self) -> dict[tuple[ast.AST, str], list[tuple[Position, ast.Call]]]:
        """(scope, name) -> the bare ``name.to(...)``/``name.cuda()``/``name.double()`` statements, in order."""
        found: dict[tuple[ast.AST, str], list[tuple[Position, ast.Call]]] = defaultdict(list)
        for stmt in self.ctx.nodes(ast.Expr):
            call = stmt.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                name = dotted(call.func.value)
                if name is not None and call.func.attr in ("to", "cuda", "double", "float", "half", "cpu", "type"):
                    scope = self.ctx.kinds.scope_of(stmt)
                    found[(scope, name)].append((_pos(stmt), call))
        return found

    @cached_property
    def _default_devices(self) -> list[tuple[ast.AST, Position, frozenset[str]]]:
        """Each ``torch.set_default_device(d)`` of the file: its scope, where it stands, the device types of ``d``."""
        found = []
        for call in self.ctx.nodes(ast.Call):
            if self.ctx.call_name(call) == "torch.set_default_device" and call.args:
                found.append((self.ctx.kinds.scope_of(call), _pos(call), device_types(self.ctx, call.args[0])))
        return found

    def default_device(self, at: ast.AST) -> frozenset[str]:
        """The device types a factory without ``device=`` at ``at`` makes its tensor on (empty: the CPU, or unknown).

        Inside ``with torch.device(d):`` the device of ``d``; after ``torch.set_default_device(d)`` in the module's
        own code (any later line of the file) or earlier in the same function, the types of ``d``.
        """
        for above in self.ctx.ancestors(at):
            if isinstance(above, ast.With | ast.AsyncWith):
                for item in above.items:
                    expr = item.context_expr
                    if isinstance(expr, ast.Call) and self.ctx.call_name(expr) == "torch.device":
                        return device_types(self.ctx, expr)
        scope = self.ctx.kinds.scope_of(at)
        found: frozenset[str] = frozenset()
        for where, pos, types in self._default_devices:
            if isinstance(where, ast.Module) or (where is scope and pos < _pos(at)):
                found |= types
        return found

    def in_place_moves(self, name: str, at: ast.AST, since: Position) -> list[ast.Call]:
        """The bare ``name.to(...)`` (and the like) statements of ``at`` 's scope between ``since`` and ``at``."""
        scope = self.ctx.kinds.scope_of(at)
        use = _pos(at)
        return [call for pos, call in self._in_place_moves.get((scope, name), []) if since <= pos < use]

    def of(self, node: ast.AST, env: Mapping[str, frozenset[str]] | None = None, depth: int = 0) -> frozenset[str]:
        """The device types the tensor or module ``node`` may live on (empty: CPU or unknown)."""
        if env:
            return self._of(node, env, depth)
        return self._places(node)

    def _of(self, node: ast.AST, env: Mapping[str, frozenset[str]] | None, depth: int) -> frozenset[str]:
        if isinstance(node, ast.Name | ast.Attribute):
            return self._of_name(node, env, depth)
        if isinstance(node, ast.Subscript):
            return self.of(node.value, env, depth)
        if isinstance(node, ast.BinOp):
            return self.of(node.left, env, depth) | self.of(node.right, env, depth)
        if isinstance(node, ast.UnaryOp):
            return self.of(node.operand, env, depth)
        if isinstance(node, ast.Compare):
            found = self.of(node.left, env, depth)
            for other in node.comparators:
                found |= self.of(other, env, depth)
            return found
        if isinstance(node, ast.IfExp):
            return self.of(node.body, env, depth) | self.of(node.orelse, env, depth)
        if isinstance(node, ast.NamedExpr):
            return self.of(node.value, env, depth)
        if isinstance(node, ast.Call):
            return self._of_call(node, env, depth)
        if isinstance(node, ast.List | ast.Tuple):
            found = frozenset()
            for item in node.elts:
                found |= self.of(item, env, depth)
            return found
        return frozenset()

    def _of_name(
        self, node: ast.Name | ast.Attribute, env: Mapping[str, frozenset[str]] | None, depth: int
    ) -> frozenset[str]:
        name = dotted(node)
        if name is not None:
            bound = binding(self.ctx, name, node)
            if bound is not None:
                if bound.parameter is not None:
                    return env.get(name, frozenset()) if env else frozenset()
                found: frozenset[str] = frozenset()
                if bound.source[0] == "expr":
                    found = self.of(bound.source[1], env if bound.scope is self.ctx.kinds.scope_of(node) else None)
                elif bound.source[0] == "project":
                    found = self._project(bound.source, env, depth)
                kind = self.ctx.kind(node)
                if kind is not None and kind.is_module:
                    for call in self.in_place_moves(name, node, bound.at):
                        found = self._moved(call, found, env, depth)
                return found
            if "." not in name:
                return frozenset()
        if isinstance(node, ast.Attribute):
            if node.attr in ("shape", "dtype", "device", "ndim", "is_cuda", "requires_grad"):
                return frozenset()
            return self.of(node.value, env, depth)  # `out.logits`, `x.T`, `net.module`
        return frozenset()

    def _project(self, source: Source, env: Mapping[str, frozenset[str]] | None, depth: int) -> frozenset[str]:
        """``a, b = x, y`` : the places of the item the name was unpacked from, when that is a literal."""
        inner, index = source[1], source[2]
        if inner[0] == "expr" and isinstance(inner[1], ast.Tuple | ast.List):
            items = inner[1].elts
            if 0 <= index < len(items) and not isinstance(items[index], ast.Starred):
                return self.of(items[index], env, depth)
        return frozenset()

    def _moved(
        self, call: ast.Call, before: frozenset[str], env: Mapping[str, frozenset[str]] | None, depth: int
    ) -> frozenset[str]:
        """The places after ``.to(...)``/``.cuda()``/``.cpu()`` (or a dtype conversion) of a value at ``before``."""
        method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        if method == "cuda":
            return frozenset({"cuda"})
        if method == "cpu":
            return frozenset()
        if method in ("to", "type_as"):
            target = _move_target(self.ctx, call) if method == "to" else (call.args[0] if call.args else None)
            if target is None:
                return before  # `.to(torch.float16)`: a dtype only
            named = device_types(self.ctx, target)
            if named:
                return named
            kind = self.ctx.kind(target)
            if kind is not None and (kind.is_tensor or kind.is_module):
                return self.of(target, env, depth)  # `a.to(b)`: where `b` is
            if isinstance(target, ast.Attribute) and target.attr == "device":
                return self.of(target.value, env, depth)
            return frozenset()
        return before

    def _of_call(self, node: ast.Call, env: Mapping[str, frozenset[str]] | None, depth: int) -> frozenset[str]:
        ctx = self.ctx
        func = node.func
        full = ctx.call_name(node)
        device = keyword(node, "device")
        if device is not None and full is not None and full.startswith("torch."):
            return device_types(ctx, device)
        if full in _DEFAULT_DEVICE_FACTORIES:
            return self.default_device(node)
        if isinstance(func, ast.Attribute) and (full is None or not full.startswith(("torch.", "numpy."))):
            method = func.attr
            if method in ("to", "cuda", "cpu", "type_as"):
                return self._moved(node, self.of(func.value, env, depth), env, depth)
            if method in NOT_TENSOR_METHODS or method in ("tolist", "item", "numpy"):
                return frozenset()
            owner = ctx.kind(func.value)
            if owner is not None and owner.is_module and method not in _MODULE_KEEPS and method != "forward":
                return self._defined(node, env, depth)
            if owner is not None and owner.name == "instance":
                return self._defined(node, env, depth)
            if method in ("forward", "__call__") or (owner is not None and owner.is_tensor):
                return self.of(func.value, env, depth) | self._arguments(node, env, depth)
            receiver = self.of(func.value, env, depth)
            if receiver:
                return receiver
            return self._defined(node, env, depth)
        if full is not None and full.startswith("torch."):
            if full in _CUDA_WRAPPERS:
                return frozenset({"cuda"})
            if full.startswith(("torch.cuda.", "torch.backends.")):
                return frozenset()
            return self._arguments(node, env, depth)
        callee = ctx.kind(func)
        if callee is not None and callee.is_module:
            return self.of(func, env, depth) | self._arguments(node, env, depth)  # a module's output
        return self._defined(node, env, depth)

    def _arguments(self, node: ast.Call, env: Mapping[str, frozenset[str]] | None, depth: int) -> frozenset[str]:
        found: frozenset[str] = frozenset()
        for arg in node.args:
            found |= self.of(arg.value if isinstance(arg, ast.Starred) else arg, env, depth)
        return found

    def _defined(self, node: ast.Call, env: Mapping[str, frozenset[str]] | None, depth: int) -> frozenset[str]:
        """The places of a call to a function or method of this file: its returned values', arguments bound."""
        if depth >= 3:
            return frozenset()
        func = self.function_called(self.ctx, node)
        if func is None:
            return frozenset()
        params = [*func.args.posonlyargs, *func.args.args]
        if isinstance(node.func, ast.Attribute) and params and params[0].arg in ("self", "cls"):
            params = params[1:]
        bound: dict[str, frozenset[str]] = {}
        for param, arg in zip(params, node.args, strict=False):
            if isinstance(arg, ast.Starred):
                break
            bound[param.arg] = self.of(arg, env, depth)
        for kw in node.keywords:
            if kw.arg is not None:
                bound[kw.arg] = self.of(kw.value, env, depth)
        found: frozenset[str] = frozenset()
        for value in returned_values(func):
            found |= self.of(value, bound, depth + 1)
        return found

    @staticmethod
    def function_called(ctx: FileContext, node: ast.Call) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The one function of this file that ``node`` calls: ``helper(...)``, or ``self.helper(...)`` in its class."""
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in ctx.imports:
                return None
            found = [f for f in ctx.kinds.functions.get(func.id, []) if ctx.enclosing_class(f) is None]
            return found[0] if len(found) == 1 else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            owner = ctx.enclosing_class(node)
            if owner is None:
                return None
            found = [f for f in ctx.kinds.functions.get(func.attr, []) if ctx.enclosing_class(f) is owner]
            return found[0] if len(found) == 1 else None
        return None


def returned_values(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    """The values of ``func`` 's own ``return`` statements (not those of nested functions); ``[]`` for generators."""
    return [r.value for r in own_returns(func) or () if r.value is not None]


def places(ctx: FileContext) -> Places:
    """The :class:`Places` of a file, built once and shared by the rules that ask."""
    return ctx.shared(Places)


# -- float64 ------------------------------------------------------------------------------------------------------

#: NumPy functions whose result is float64 unless a dtype says otherwise, with the position of their dtype argument.
_NUMPY_FLOAT64 = {
    "numpy.zeros": 1,
    "numpy.ones": 1,
    "numpy.empty": 1,
    "numpy.identity": 1,
    "numpy.eye": 3,
    "numpy.linspace": 5,
    "numpy.loadtxt": 1,
    "numpy.genfromtxt": 1,
    "numpy.random.rand": None,
    "numpy.random.randn": None,
    "numpy.random.random": None,
    "numpy.random.random_sample": None,
    "numpy.random.sample": None,
    "numpy.random.uniform": None,
    "numpy.random.normal": None,
    "numpy.random.standard_normal": None,
}

#: Methods that keep the dtype of tensors and arrays.
_KEEP_DTYPE = frozenset(
    """
    cpu cuda detach clone contiguous reshape unsqueeze squeeze permute transpose t flatten ravel copy expand repeat
    flip roll narrow select index_select gather masked_select abs neg sqrt exp log sin cos tanh sigmoid softmax
    log_softmax relu mean sum std var pin_memory requires_grad_ view_as expand_as
    """.split()
)


class Float64:
    """Whether a tensor, a NumPy array or a module of one file is certainly float64, by how it was made."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._answers: Memo[ast.AST, bool] = Memo(self._float64, False)

    def __call__(self, node: ast.AST) -> bool:
        """Whether ``node`` is a float64 tensor, array or module (``False``: another dtype, or not known)."""
        return self._answers(node)

    def _float64(self, node: ast.AST) -> bool:
        ctx = self.ctx
        if isinstance(node, ast.Name | ast.Attribute):
            name = dotted(node)
            bound = binding(ctx, name, node) if name is not None else None
            if bound is None or bound.parameter is not None:
                return False
            found = False
            if bound.value is not None:
                found = self(bound.value)
            kind = ctx.kind(node)
            if name is not None and kind is not None and kind.is_module:
                for call in places(ctx).in_place_moves(name, node, bound.at):
                    found = self._converted(call, found)
            return found
        if isinstance(node, ast.Subscript):
            return self(node.value)
        if isinstance(node, ast.IfExp):
            return self(node.body) and self(node.orelse)
        if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult | ast.BitAnd | ast.BitOr):
            return self(node.left) or self(node.right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self(node.operand)
        if isinstance(node, ast.Call):
            return self._call(node)
        return False

    def _converted(self, call: ast.Call, before: bool) -> bool:
        """Whether the value is float64 after ``call`` (a ``.to``/``.double()``/``.float()``... on it)."""
        method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        if method == "double":
            return True
        if method in ("float", "half", "bfloat16"):
            return False
        if method == "to":
            dtype = _to_dtype(self.ctx, call)
            return before if dtype is None else is_float64_dtype(self.ctx, dtype)
        if method == "type" and call.args:
            return is_float64_dtype(self.ctx, call.args[0])
        return before

    def _call(self, node: ast.Call) -> bool:
        ctx = self.ctx
        full = ctx.call_name(node)
        if full is not None and not isinstance(node.func, ast.Attribute | ast.Name):
            full = None
        dtype = keyword(node, "dtype")
        if full is not None and full.startswith("numpy."):
            if full in _NUMPY_FLOAT64:
                index = _NUMPY_FLOAT64[full]
                if dtype is None and index is not None and len(node.args) > index:
                    dtype = node.args[index]
                return dtype is None or is_float64_dtype(ctx, dtype)
            if full in ("numpy.array", "numpy.asarray", "numpy.ascontiguousarray", "numpy.copy") and node.args:
                if dtype is not None:
                    return is_float64_dtype(ctx, dtype)
                data = node.args[0]
                if isinstance(data, ast.List | ast.Tuple):
                    return _float_literals(data)
                return self(data)
            return False
        if full is not None and full.startswith("torch."):
            if dtype is not None:
                return is_float64_dtype(ctx, dtype)
            if full in _DATA_CALLS and node.args:
                data = node.args[0]
                return not isinstance(data, ast.List | ast.Tuple | ast.Constant) and self(data)
            if full in ("torch.DoubleTensor",):
                return True
            if full in ("torch.cat", "torch.stack") and node.args and isinstance(node.args[0], ast.List | ast.Tuple):
                return any(self(item) for item in node.args[0].elts)
            return False
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method == "astype" and node.args:
                return is_float64_dtype(ctx, node.args[0])
            if method in DTYPE_CASTS | {"to", "type"}:
                return self._converted(node, self(node.func.value))
            if method in _KEEP_DTYPE or method in _MODULE_KEEPS:
                return self(node.func.value)
        return False


def _float_literals(data: ast.List | ast.Tuple) -> bool:
    """Whether a literal list holds only numbers, at least one of them a float (NumPy makes it float64)."""
    numbers: list[object] = []
    stack: list[ast.AST] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.List | ast.Tuple):
            stack.extend(item.elts)
        elif isinstance(item, ast.UnaryOp) and isinstance(item.operand, ast.Constant):
            stack.append(item.operand)
        elif (
            isinstance(item, ast.Constant) and isinstance(item.value, int | float) and not isinstance(item.value, bool)
        ):
            numbers.append(item.value)
        else:
            return False
    return any(isinstance(n, float) for n in numbers)


def float64(ctx: FileContext) -> Float64:
    """The :class:`Float64` of a file, built once and shared by the rules that ask."""
    return ctx.shared(Float64)


def unique(nodes: Iterable[ast.AST]) -> list[ast.AST]:
    """``nodes`` without repeats, in source order."""
    return sorted(set(nodes), key=_pos)
