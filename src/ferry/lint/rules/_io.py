"""Helpers shared by the device-choice and serialization rules (FRY002 to FRY004); not a rule.

- :func:`device_guarded`: code that runs only after a decision on devices (an availability check, a device
  comparison, a device flag the caller sets), or inside code that exists only for CUDA.
- :func:`cuda_constant` / :func:`cuda_device_call`: ``"cuda"``, ``"cuda:0"``, ``torch.device("cuda", 0)``.
- :func:`script_level`, :func:`decides_devices`, :func:`is_test_file`: top-level script code of a GPU-only script
  and test files, where FRY002 says less.
- :func:`device_variable`: the name of a device chosen earlier in scope, for ``map_location=`` fixes.
"""

from __future__ import annotations

import ast
import re
from pathlib import PurePath

from ferry.lint.context import FileContext, device_given_test, dotted
from ferry.lint.kinds import DEVICE
from ferry.lint.torch_api import CUDA_ONLY_CALLS, DEVICE_CALLS, DEVICE_TYPES, DEVICE_WORDS

CUDA_SPEC = re.compile(r"cuda(:\d+)?")

#: Words that make a function, class or file name say it exists for CUDA (or another NVIDIA-only stack).
CUDA_ONLY_WORDS = ("cuda", "gpu", "cudnn", "nccl", "triton", "tensorrt")

#: Imports that only work with CUDA: a file using them is CUDA code.
CUDA_ONLY_IMPORTS = (
    "cupy",
    "pycuda",
    "numba.cuda",
    "cuda",  # NVIDIA's cuda-python (`from cuda import cudart`, `cuda.bindings`)
    "triton",
    "apex",
    "tensorrt",
    "cutlass",
    "nvmath",
    "flash_attn",
)

#: Calls that end a test: ``if not torch.cuda.is_available(): pytest.skip(...)``.
EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit", "pytest.skip", "unittest.skip"})

_TEST_FILE = re.compile(r"(test_.*|.*_test|tests?|conftest|testing_utils)\.py")


def is_test_file(ctx: FileContext) -> bool:
    """Whether the file is a test module or test support (``test_*.py``, ``*_test.py``, ``conftest.py``)."""
    return bool(_TEST_FILE.fullmatch(PurePath(ctx.path).name))


def says_cuda(name: str) -> bool:
    """Whether a function, class or path name says the code is for CUDA (``_cuda_graph``, ``GPUBenchmark``)."""
    lowered = name.lower()
    return any(word in lowered for word in CUDA_ONLY_WORDS)


def cuda_path(path: str) -> bool:
    """Whether a file's path says it is CUDA code: ``utils/cuda.py``, ``ops/cuda_kernels.py``, ``torch/cuda/...``."""
    parts = [part.lower() for part in PurePath(path).parts[-2:]]
    if parts:
        parts[-1] = parts[-1].removesuffix(".py")
    return any(part in CUDA_ONLY_WORDS or part.startswith(tuple(f"{w}_" for w in CUDA_ONLY_WORDS)) for part in parts)


def cuda_spec(node: ast.AST | None) -> str | None:
    """The string of a ``"cuda"`` or ``"cuda:N"`` literal, else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and CUDA_SPEC.fullmatch(node.value):
        return node.value
    return None


def cuda_constant(node: ast.AST | None) -> bool:
    """``"cuda"`` or ``"cuda:N"`` as a literal."""
    return cuda_spec(node) is not None


def cuda_device_call(ctx: FileContext, node: ast.AST) -> bool:
    """``torch.device("cuda")``, ``torch.device("cuda:0")``, ``torch.device("cuda", 0)``, ``torch.device(type="cuda")``.

    A variable index (``torch.device("cuda", local_rank)``) is a per-rank choice in multi-GPU code, not this.
    """
    if not isinstance(node, ast.Call) or ctx.call_name(node) != "torch.device":
        return False
    spec = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "type"), None)
    if not cuda_constant(spec):
        return False
    index = node.args[1:] + [k.value for k in node.keywords if k.arg == "index"]
    return all(isinstance(i, ast.Constant) for i in index)


def in_main_block(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` sits in an ``if __name__ == "__main__":`` block of the module."""
    for above in ctx.ancestors(node):
        if isinstance(above, ast.If) and isinstance(above.test, ast.Compare):
            sides = [above.test.left, *above.test.comparators]
            if any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
                isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
            ):
                return True
    return False


def script_level(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` is top-level script code: outside every function and class, or in the ``__main__`` block."""
    for above in ctx.ancestors(node):
        if isinstance(above, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            return in_main_block(ctx, above)
    return True


#: Calls that decide devices: a file making one means to run where CUDA is not available.
DECIDING_CALLS = ("is_available", "device_count", "current_accelerator", "pick_device")


def decides_devices(ctx: FileContext) -> bool:
    """Whether the file asks which devices exist anywhere (``torch.cuda.is_available()``, ``ferry.pick_device()``).

    A script that never asks is written for a GPU machine: its literal ``"cuda"`` uses fail at once, with a clear
    error, elsewhere. A script that asks and then hard-codes ``"cuda"`` on another line breaks its own choice.
    """
    return any((ctx.call_name(call) or "").rsplit(".", 1)[-1] in DECIDING_CALLS for call in ctx.nodes(ast.Call))


class _Guards:
    """Per-file memo of the device decisions and CUDA-only scopes (rules run once per file)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.tests: dict[ast.AST, bool] = {}
        self.scopes: dict[ast.AST, bool] = {}
        self.cuda_file = cuda_path(ctx.path) or any(
            full == prefix or full.startswith(prefix + ".")
            for full in ctx.imports.values()
            for prefix in CUDA_ONLY_IMPORTS
        )
        self.parameter_defaults: dict[str, list[ast.expr | None]] = {}
        funcs: list[ast.FunctionDef | ast.AsyncFunctionDef] = [
            *ctx.nodes(ast.FunctionDef),
            *ctx.nodes(ast.AsyncFunctionDef),
        ]
        for func in funcs:
            for arg, default in parameters(func):
                self.parameter_defaults.setdefault(arg.arg, []).append(default)
        self.passed = {k.arg for call in ctx.nodes(ast.Call) for k in call.keywords if k.arg is not None}

    def decision(self, test: ast.AST) -> bool:
        """Whether ``test`` decides on devices: availability, a device comparison, ``x.is_cuda``, a device flag."""
        known = self.tests.get(test)
        if known is None:
            known = self.tests[test] = self._decision(test)
        return known

    def _decision(self, test: ast.AST) -> bool:
        if self.ctx.mentions_availability(test):
            return True
        if device_given_test(test):
            return False  # `if device is None:`: whether a device was given, not whether it is a GPU
        for sub in ast.walk(test):
            if isinstance(sub, ast.Attribute) and sub.attr in ("is_cuda", "device", "is_mps", "is_cpu"):
                return True  # `x.is_cuda`, `if device.type ...`: following where the data already is
            name = dotted(sub) if isinstance(sub, ast.Name | ast.Attribute) else None
            last = name.rsplit(".", 1)[-1].lower() if name else ""
            if name and any(word in last for word in DEVICE_WORDS) and not self._defaults_true(name):
                return True  # `if use_gpu:`, `if args.cuda:`, `if not no_cuda:`: the caller chose
        return False

    def _defaults_true(self, name: str) -> bool:
        """Whether the flag ``name`` stays ``True`` unless a caller changes it: ``use_gpu=True``, never passed.

        A flag passed by keyword anywhere in the file (``Loss(use_gpu=torch.cuda.is_available())``) is a choice.
        """
        values: list[ast.AST | None] = list(self.ctx.kinds.assigned_values(name))
        if "." not in name:
            if name in self.passed:
                return False
            values.extend(self.parameter_defaults.get(name, []))
        if not values:
            return False
        for value in values:
            if isinstance(value, ast.Constant) and value.value is True:
                continue
            inner = value.id if isinstance(value, ast.Name) else None  # `self.use_gpu = use_gpu`
            if inner is not None and inner not in self.passed:
                defaults = self.parameter_defaults.get(inner, [None])
                if all(isinstance(d, ast.Constant) and d.value is True for d in defaults):
                    continue
            return False
        return True

    def cuda_scope(self, scope: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
        """Whether a function or class exists for CUDA: its name says so, a decorator asks, or it uses CUDA APIs."""
        known = self.scopes.get(scope)
        if known is None:
            known = self.scopes[scope] = self._cuda_scope(scope)
        return known

    def _cuda_scope(self, scope: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
        if says_cuda(scope.name) and not _takes_a_device(scope):
            return True  # `evaluate_accuracy_gpu(net, data_iter, device=None)` chooses a device: not CUDA-only
        for decorator in scope.decorator_list:  # @skipIf(not torch.cuda.is_available()), @require_torch_gpu
            name = dotted(decorator.func if isinstance(decorator, ast.Call) else decorator) or ""
            if says_cuda(name) or self.decision(decorator):
                return True
        if isinstance(scope, ast.ClassDef):
            return False
        stack: list[ast.AST] = list(scope.body)
        while stack:  # an unguarded torch.cuda.synchronize() & co.: the whole function needs CUDA anyway
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                continue
            if isinstance(node, ast.If | ast.IfExp) and self.decision(node.test):
                continue  # `if torch.cuda.is_available(): torch.cuda.set_device(...)`: guarded, so not CUDA-only
            if isinstance(node, ast.Call):
                full = self.ctx.call_name(node) or ""
                if full.startswith("torch.cuda.") and full.rsplit(".", 1)[-1] in CUDA_ONLY_CALLS:
                    return True
            stack.extend(ast.iter_child_nodes(node))
        return False

    def ends(self, stmt: ast.stmt) -> bool:
        """``if not <device decision>: raise/return/skip`` or ``assert <device decision>``."""
        if isinstance(stmt, ast.Assert):
            return self.decision(stmt.test)
        if isinstance(stmt, ast.If) and stmt.body and self.decision(stmt.test):
            last = stmt.body[-1]
            if isinstance(last, ast.Raise | ast.Return | ast.Continue | ast.Break):
                return True
            if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
                full = self.ctx.call_name(last.value) or ""
                return full in EXITS or full.endswith((".skipTest", ".skip"))
        return False


def guards(ctx: FileContext) -> _Guards:
    """The guard memo of ``ctx``, shared by the rules that run on the same file."""
    return ctx.shared(_Guards)


def _takes_a_device(scope: ast.AST) -> bool:
    """Whether a function has a parameter for the device it works on (``device``, ``device_id``, ``dev``)."""
    if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    names = [a.arg.lower() for a in [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs]]
    return any("device" in name or name == "dev" for name in names)


def device_guarded(ctx: FileContext, node: ast.AST, *, try_guards: bool = True) -> bool:
    """Whether ``node`` runs only after a decision on devices, or is CUDA-only code.

    Decisions: ``if``/``elif``/``while``/ternary/``and``/``or``/``assert`` on ``torch.cuda.is_available()`` (directly
    or through a name bound to it), on a device comparison (``device.type == "cuda"``), on ``x.is_cuda``, or on a
    device flag (``use_gpu``, ``args.cuda``) that the caller sets, unless the flag is ``True`` by default (then
    nothing was decided); an earlier ``if not ...: raise/return/skip``; a ``for`` over
    ``range(torch.cuda.device_count())``; a ``try`` that catches the failure.
    CUDA-only code: functions and classes named for CUDA or decorated with a CUDA requirement, functions calling
    ``torch.cuda.synchronize()`` & co., ``with torch.cuda.device(...)`` blocks, files named for CUDA or importing
    CUDA-only libraries (CuPy, PyCUDA, cuda-python, Triton, Apex, TensorRT, CUTLASS, nvmath, FlashAttention).
    ``try_guards=False`` does not count a ``try``.
    """
    memo = guards(ctx)
    if memo.cuda_file:
        return True
    child = node
    for above in ctx.ancestors(node):
        if isinstance(above, ast.If | ast.IfExp) and child is not above.test:
            side = _availability_side(ctx, above.test)
            taken = above.body if isinstance(above.body, list) else [above.body]
            if side is not None and (child in taken) != side:
                return False  # the `else:` of `if torch.cuda.is_available():` runs only where there is no GPU
        if (
            isinstance(above, ast.If | ast.While | ast.IfExp)
            and child is not above.test
            and memo.decision(above.test)
            and not (isinstance(above, ast.If | ast.IfExp) and _in_else(above, child) and _several_gpus(above.test))
        ):  # the `else:` of `if args.multi_gpu:` / `if n_gpu > 1:` is the one-device path, CPU-only machines included
            return True
        if isinstance(above, ast.BoolOp):
            before = above.values[: above.values.index(child)] if child in above.values else []
            if any(memo.decision(value) for value in before):
                return True
        if (
            isinstance(above, ast.For | ast.AsyncFor)
            and child in above.body
            and isinstance(above.iter, ast.Call)
            and isinstance(above.iter.func, ast.Name)
            and above.iter.func.id == "range"
            and memo.decision(above.iter)
        ):  # `for i in range(torch.cuda.device_count()):` runs only where there is a GPU; a batch loop whose batch
            return True  # size counts GPUs (`iter_data(..., n_batch=n_batch_train)`) runs everywhere
        if try_guards and isinstance(above, ast.Try) and child in above.body and above.handlers:
            return True
        if isinstance(above, ast.With | ast.AsyncWith) and any(
            (ctx.call_name(item.context_expr) or "").startswith("torch.cuda.") for item in above.items
        ):
            return True
        if isinstance(above, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and memo.cuda_scope(above):
            return True
        body = getattr(above, "body", None)
        if isinstance(body, list) and child in body and any(memo.ends(s) for s in body[: body.index(child)]):
            return True
        child = above
    return False


def _in_else(branch: ast.If | ast.IfExp, child: ast.AST) -> bool:
    """Whether ``child`` is in the ``else`` of ``branch``."""
    orelse = branch.orelse if isinstance(branch.orelse, list) else [branch.orelse]
    return any(child is node for node in orelse)


def _several_gpus(test: ast.AST) -> bool:
    """Whether ``test`` asks for more than one GPU (``args.multi_gpu``, ``n_gpu > 1``, ``device_count() > 1``)."""
    text = ast.unparse(test).lower().replace(" ", "")
    return "multi" in text or (any(text.endswith(end) for end in (">1", ">=2")) and ("gpu" in text or "count" in text))


def _availability_side(ctx: FileContext, test: ast.AST, _seen: dict[str, bool] | None = None) -> bool | None:
    """Which side of ``test`` has CUDA.

    ``True`` if ``test`` is an availability check (``torch.cuda.is_available()``, or a name bound only to one), or
    one joined with ``and`` to anything (``args.use_gpu and torch.cuda.is_available()``: its ``else`` is the CPU
    path), ``False`` if it is its negation, ``None`` for anything else (a flag, a comparison, another combination).
    """
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _availability_side(ctx, test.operand, _seen)
        return None if inner is None else not inner
    if isinstance(test, ast.Call) and not test.args and ctx.call_name(test) in _CUDA_CHECKS:
        return True
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        # `args.use_gpu and torch.cuda.is_available()`: the body has CUDA; the `else:` is the CPU path (no GPU, or
        # none asked for), where the program means to run without one
        return True if any(_availability_side(ctx, v, _seen) is True for v in test.values) else None
    _seen = _seen or {}
    if isinstance(test, ast.Name) and not _seen.get(test.id):
        values = list(ctx.kinds.assigned_values(test.id))  # `use_cuda = torch.cuda.is_available()`
        sides = {_availability_side(ctx, v, {**_seen, test.id: True}) for v in values}
        return sides.pop() if len(sides) == 1 and values else None
    return None


#: Checks whose falsity means "no CUDA here" (no MPS may still mean CUDA).
_CUDA_CHECKS = frozenset(
    {
        "torch.cuda.is_available",
        "torch.cuda.device_count",
        "torch.accelerator.is_available",
        "torch.accelerator.device_count",
    }
)


def parameters(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.arg, ast.expr | None]]:
    """``(parameter, default or None)`` for every named parameter of ``func``."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    padded: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    found: list[tuple[ast.arg, ast.expr | None]] = list(zip(positional, [*padded, *args.defaults], strict=True))
    found.extend(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    return found


def device_variable(ctx: FileContext, at: ast.AST) -> str | None:
    """A name that holds the chosen device where ``at`` stands, for a ``map_location=`` fix.

    A parameter named ``device`` or ``map_location`` (or annotated ``torch.device``) of the enclosing function, or a
    name of the function or module bound before ``at`` to ``torch.device(...)``, ``ferry.pick_device()``, a function
    of the file that returns a device, or ``"cuda" if torch.cuda.is_available() else "cpu"``.
    """
    func = ctx.enclosing_function(at)
    if func is not None:
        for arg, _ in parameters(func):
            if arg.arg in ("map_location", "device"):
                return arg.arg
    scope: ast.AST | None = ctx.kinds.scope_of(at)
    while scope is not None:  # innermost scope first, and `device` before other names there
        for name in sorted(
            (n for n in ctx.kinds.bindings.get(scope, {}) if "." not in n), key=lambda n: (n != "device", n)
        ):
            if isinstance(scope, ast.Module) and func is not None and not _global_for_functions(ctx, name):
                continue  # bound only under `if __name__ == "__main__":`: a NameError when the module is imported
            if ctx.kinds.lookup(name, at) == DEVICE:
                return name
            if _chosen_device(ctx, name, at):
                return name
        scope = None if isinstance(scope, ast.Module) else ctx.kinds.scope_of(scope)
        while isinstance(scope, ast.ClassDef):  # methods do not see the names of their class body
            scope = ctx.kinds.scope_of(scope)
    return None


def _global_for_functions(ctx: FileContext, name: str) -> bool:
    """Whether the module binds ``name`` in code that runs on import, not only under ``if __name__ == "__main__":``."""
    for stmt in ctx.tree.body:
        if isinstance(stmt, ast.If) and "__main__" in ast.dump(stmt.test):
            continue
        stack: list[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                continue
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
                return True
            stack.extend(ast.iter_child_nodes(node))
    return False


def _names_a_device(ctx: FileContext, node: ast.expr) -> bool:
    """``"cuda"``, ``"cpu"``, ``"cuda:0"``, ``torch.device(...)``, or a name or attribute known to hold a device."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.split(":")[0] in DEVICE_TYPES
    if isinstance(node, ast.Call):
        return ctx.call_name(node) in DEVICE_CALLS
    kind = ctx.kind(node)
    return kind is not None and kind.name == "device"


def _chosen_device(ctx: FileContext, name: str, at: ast.AST) -> bool:
    """Whether every value bound to ``name`` is a device choice (``pick_device()``, ``"cuda" if ... else "cpu"``)."""
    values = ctx.kinds.assigned_values(name)
    if not values:
        return False
    for value in values:
        if isinstance(value, ast.Call) and (ctx.call_name(value) or "").rsplit(".", 1)[-1] == "pick_device":
            continue
        if (
            isinstance(value, ast.IfExp)
            and ctx.mentions_availability(value.test)
            and _names_a_device(ctx, value.body)
            and _names_a_device(ctx, value.orelse)
        ):  # not `gpu_flag = ["-gpu"] if torch.cuda.is_available() else []` (pytorch-cifar100's command line)
            continue
        return False
    return all(getattr(v, "lineno", 0) <= getattr(at, "lineno", 0) for v in values)
