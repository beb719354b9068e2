"""Which device an expression names: the host, the chosen device, or not known.

Part of :mod:`ferry.lint.rules._placement` (not a rule). "The chosen device" is an accelerator, or a device picked at
run time: ``torch.device("cuda" if torch.cuda.is_available() else "cpu")``, a name such as ``device`` (a parameter
named so included), ``args.device``, ``torch.device(args.device)``. ``"cpu"`` and names only ever assigned the CPU
are the host. A tensor's ``.device`` is wherever that tensor is, and unknown when the tensor is.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ferry.lint.context import FileContext, dotted
from ferry.lint.rules._placement_values import (
    ACCELERATOR_NAMES,
    CHOSEN_DEVICE_CALLS,
    CONFIG_OWNERS,
    DEVICE,
    DEVICE_NAMES,
    GPU_ORDINAL_LISTS,
    GPU_ORDINAL_NAMES,
    HOST,
    TENSORISH,
    UNKNOWN,
    Val,
)


class DevicesMixin:
    """Device expressions, for :class:`ferry.lint.rules._placement._Flow`."""

    ctx: FileContext
    env: dict[str, Val]
    _busy: set[str]
    scope: ast.AST

    if TYPE_CHECKING:

        def _peek(self, node: ast.expr) -> Val: ...
        def _instance_device(self, node: ast.Attribute) -> Val | None: ...
        def _accelerator_branch(self, test: ast.expr, depth: int = 0) -> bool | None: ...

    def device_where(self, node: ast.expr, pure: bool = False) -> str | None:
        """Whether the device expression ``node`` is the host, the chosen device, or not known (``None``).

        ``pure``: ignore the flow environment (for expressions read from elsewhere in the file).
        """
        if isinstance(node, ast.Constant):
            return _constant_where(node.value)
        if isinstance(node, ast.JoinedStr):  # f"cuda:{rank}"
            first = node.values[0] if node.values else None
            return _constant_where(first.value) if isinstance(first, ast.Constant) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):  # "cuda:" + str(rank)
            return _constant_where(node.left.value) if isinstance(node.left, ast.Constant) else None
        if isinstance(node, ast.IfExp):  # "cuda" if torch.cuda.is_available() else "cpu": the chosen device
            body, orelse = self.device_where(node.body, pure), self.device_where(node.orelse, pure)
            if body == orelse:
                return body
            return DEVICE if {body, orelse} == {HOST, DEVICE} else None
        if isinstance(node, ast.Call):
            full = self.ctx.call_name(node)
            if full == "torch.device":
                arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "type"), None)
                return None if arg is None else self.device_where(arg, pure) or DEVICE
            if full in CHOSEN_DEVICE_CALLS:
                return DEVICE
            return self._device_helper(node)
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "type"
            and isinstance(node.value, ast.Call)
            and self.ctx.call_name(node.value) in CHOSEN_DEVICE_CALLS
        ):
            return self.device_where(node.value, pure)  # `torch.accelerator.current_accelerator().type`
        if isinstance(node, ast.Name | ast.Attribute):
            return self._device_name(node, pure)
        return None

    def _device_helper(self, node: ast.Call) -> str | None:
        """``get_device()``: a function of the file named for a device, whose returns choose one.

        MusicTransformer's ``get_device()`` returns ``TORCH_CUDA_DEVICE`` (``torch.device("cuda")`` when CUDA is
        there) or ``TORCH_CPU_DEVICE``: the chosen device, as ``"cuda" if ... else "cpu"`` is. ``None`` unless every
        return is the host or a device and one is a device.
        """
        if not isinstance(node.func, ast.Name) or node.func.id in self._busy:
            return None
        defined = self.ctx.kinds.functions.get(node.func.id, [])
        if len(defined) != 1 or "device" not in node.func.id.lower():
            return None
        returns = [r.value for r in ast.walk(defined[0]) if isinstance(r, ast.Return) and r.value is not None]
        self._busy.add(node.func.id)
        try:
            found = {self.device_where(value, pure=True) for value in returns}
        finally:
            self._busy.discard(node.func.id)
        return DEVICE if DEVICE in found and found <= {HOST, DEVICE} else None

    def target_where(self, node: ast.expr) -> str | None:
        """:meth:`device_where` for the target of a move or a factory's ``device=``, where an integer is a GPU.

        ``x.to(args.gpu)``, ``.to(device=self.gpu_ids[0])``, ``.to(local_rank)``: a name of a GPU ordinal (or an
        element of a list of them) that nothing here says is the host puts the tensor on ``cuda:<n>``, as
        ``Tensor.to`` reads an integer.
        """
        where = self.device_where(node)
        if where is not None:
            return where
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            listed = dotted(node.value)
            return DEVICE if listed is not None and listed.rsplit(".", 1)[-1].lower() in GPU_ORDINAL_LISTS else None
        name = dotted(node) if isinstance(node, ast.Name | ast.Attribute) else None
        return DEVICE if name is not None and name.rsplit(".", 1)[-1].lower() in GPU_ORDINAL_NAMES else None

    def _cpu_fallback(self, value: ast.AST) -> bool:
        """Whether ``value`` is assigned in a branch that runs only without an accelerator.

        ``if device_type == "cuda" and not torch.cuda.is_available(): args.device = "cpu"``: on a GPU that
        assignment never runs, so it says nothing of where ``args.device`` is there.
        """
        child: ast.AST = value
        for above in self.ctx.ancestors(value):
            if isinstance(above, ast.If):
                in_body = any(child is s for s in above.body)
                in_else = any(child is s for s in above.orelse)
                if in_body or in_else:
                    side = self._accelerator_branch(above.test)
                    if (in_body and side is False) or (in_else and side is True):
                        return True
            if isinstance(above, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                return False
            child = above
        return False

    def may_be_device(self, value: ast.expr) -> bool:
        """Whether ``value`` is worth asking :meth:`device_where` about when it is bound to a name."""
        if isinstance(value, ast.Constant | ast.JoinedStr | ast.IfExp | ast.Name | ast.Attribute):
            return True
        return isinstance(value, ast.Call) and self.ctx.call_name(value) in CHOSEN_DEVICE_CALLS

    def _device_name(self, node: ast.Name | ast.Attribute, pure: bool) -> str | None:
        name = dotted(node)
        if name is None:
            return None
        if not pure and name in self.env:
            val = self.env[name]
            if val.what == "device":
                return val.where
            if val.what not in ("unknown", "str"):
                return None
        if not pure and isinstance(node, ast.Attribute) and (kept := self._instance_device(node)) is not None:
            return kept.where  # `runner.root_device`, kept by the `__init__` of a plain class of the file
        if isinstance(node, ast.Attribute) and node.attr == "device":
            owner = UNKNOWN if pure else self._peek(node.value)
            if owner.what != "unknown":
                return owner.where if owner.what in (*TENSORISH, "module", "any") else None
            owner_name = dotted(node.value)
            if owner_name is None or self.ctx.kind(node.value) is not None:
                return None  # a tensor's or a module's device: where that is, is not known here
            last_owner = owner_name.rsplit(".", 1)[-1]
            cls = self.ctx.enclosing_class(node)
            plain_self = last_owner == "self" and cls is not None and not self.ctx.kinds.class_is_module(cls.name)
            named = last_owner.lower() in CONFIG_OWNERS or plain_self
        else:
            kind = self.ctx.kind(node)
            named = name.rsplit(".", 1)[-1].lower() in DEVICE_NAMES or (kind is not None and kind.name == "device")
        if name in self._busy:
            return None
        parameter = None if pure or not isinstance(node, ast.Name) else _parameter_default(self.scope, name)
        if parameter is not None:
            # `def __init__(self, device="cuda")` whose calls pass what is not known here: not what other functions
            # bind to a name `device` (`device = "cpu"` under `if not torch.cuda.is_available()` in `main`), but
            # the default's device, and a default of the host or none is what the name says
            default = parameter[0]
            usable = default is not None and (named or not _integer(default))  # `patch_size=16` is no ordinal
            where = self.device_where(default, pure=True) if usable and default is not None else None
            return DEVICE if where == DEVICE or named else None
        self._busy.add(name)
        try:
            values = [v for v in self.ctx.kinds.assigned_values(name)[:8] if not self._cpu_fallback(v)]
            # an integer is a CUDA ordinal where it is used as a device (`.to(0)`), but a name bound to one is a
            # device only when its name says so (`gpu_id = 0`, not `K_epochs = 10`)
            found = [
                self.device_where(v, pure=True)
                for v in values
                if isinstance(v, ast.expr) and (named or not _integer(v))
            ]
        finally:
            self._busy.discard(name)
        if DEVICE in found:
            return DEVICE
        if found and all(f == HOST for f in found):
            return HOST
        return DEVICE if named else None


def _parameter_default(scope: ast.AST, name: str) -> tuple[ast.expr | None] | None:
    """``(default,)`` for ``name`` a parameter of the function ``scope`` that its body never binds, else ``None``."""
    if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        return None
    args = scope.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [*zip(positional, defaults, strict=True), *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if name not in {arg.arg for arg, _ in pairs}:
        return None
    found = next(default for arg, default in pairs if arg.arg == name)
    body = scope.body if isinstance(scope.body, list) else [scope.body]
    stored = any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store | ast.Del)
        for stmt in body
        for n in ast.walk(stmt)
    )
    return None if stored else (found,)


def _integer(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)


def _constant_where(value: object) -> str | None:
    if isinstance(value, str):
        kind = value.split(":")[0].strip().lower()
        return HOST if kind == "cpu" else DEVICE if kind in ACCELERATOR_NAMES else None
    if isinstance(value, int) and not isinstance(value, bool):
        return DEVICE  # a CUDA ordinal: `.to(0)`, `.cuda(0)`
    return None
