"""FRY002 hardcoded-cuda-device.

## What it does
Finds code that puts data or models on CUDA without asking whether CUDA is there:

- ``.cuda()`` with no argument or a constant one (``.cuda(0)``, ``.cuda(non_blocking=True)``);
- ``torch.device("cuda")``, ``torch.device("cuda:1")``, ``torch.device("cuda", 0)``;
- ``device="cuda"`` (and ``map_location="cuda"``) as an argument, ``.to("cuda")``;
- a parameter whose default is ``"cuda"`` or ``torch.device("cuda")``, when the function places something with
  it (passes it as ``device=``, to ``.to()``, to another function, or keeps it as ``self.device`` for that) and
  does not check availability itself;
- a device variable set once to a constant ``"cuda"`` (``device = "cuda"``, ``DEVICE = torch.device("cuda:0")``),
  with no fallback assigned to it in the same scope.

Only code that runs under no decision on devices is reported. A decision is an ``if``/``elif``/``while``/
ternary/``and``/``or``/``assert`` on ``torch.cuda.is_available()`` (directly or through a name bound to it, such
as ``use_cuda`` or ``args.cuda``), on a device comparison (``device.type == "cuda"``, ``n_gpu > 0``), on
``x.is_cuda``, or on a device flag that the caller sets (``if use_gpu:``, ``if not args.cpu:``); an earlier
``if not torch.cuda.is_available(): raise/return/continue/sys.exit()/pytest.skip()``; a loop over
``range(torch.cuda.device_count())``; a ``try`` around the move. A flag that is ``True`` by default
(``def __init__(self, use_gpu=True)``) decides nothing: code under it is reported.

Deliberately not reported, because the code is meant for CUDA or does not place anything:

- CUDA-only code: functions and classes whose name says so (``def cuda(self)``, ``_build_cuda_graph``,
  ``GPUTimer``; not a function that takes the device it works on, such as ``evaluate_accuracy_gpu(net, it,
  device)``) or whose decorator requires CUDA (``@skipIf(not torch.cuda.is_available())``, ``@require_torch_gpu``);
  functions that call ``torch.cuda.synchronize()``, ``Event``, ``Stream``... unguarded (they fail without CUDA
  anyway); ``with torch.cuda.device(...)`` blocks; calls into ``torch.cuda`` itself; files named for CUDA
  (``utils/cuda.py``, ``torch/cuda/...``, ``cuda_kernels.py``) or importing a CUDA-only library (CuPy, PyCUDA,
  cuda-python, Triton, Apex, TensorRT, CUTLASS, nvmath, FlashAttention).
- Test files (``test_*.py``, ``*_test.py``, ``conftest.py``, ``testing_utils.py``): which tests need a GPU is
  decided by markers and CI configuration the linter does not see.
- Per-rank devices (``torch.device("cuda", local_rank)``, ``.cuda(args.gpu)``, ``f"cuda:{rank}"``): multi-GPU
  code choosing its GPU.
- Device *types*: ``device_type = "cuda"``, ``torch.autocast("cuda")``, a ``device="cuda"`` argument of a function
  of the file that only compares it or looks it up (``getattr(torch, device)``); names that say CUDA
  (``cuda_device = torch.device("cuda")``); comparisons (``x.device == torch.device("cuda")``).
- ``argparse`` defaults (``default="cuda"``): the user chooses at each run.
- Top-level script code and ``if __name__ == "__main__":`` blocks of a script that never asks which devices exist
  (no ``is_available()``, ``device_count()``, ``current_accelerator()`` or ``pick_device()`` anywhere in the file):
  it was written for a GPU machine and fails at its first CUDA line elsewhere with PyTorch's own clear error; only
  its device *choice* is reported, a device variable set to a constant ``"cuda"`` (where the fallback belongs and
  costs one line). In a script that does ask, every literal CUDA use outside a decision is reported: it breaks the
  script's own choice (``device = "cuda" if torch.cuda.is_available() else "cpu"``, then ``x.cuda()``).

## Why is this bad
The code fails on every machine without an NVIDIA GPU (a laptop, a Mac, a CPU CI runner) with "Torch not
compiled with CUDA enabled" or "Found no NVIDIA driver", although nothing in it needs CUDA. Inside a module's
``forward`` it also breaks multi-GPU use: the tensor goes to the current GPU, not to where the input is.

## Example
```python
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def forward(self, feats):
        idx = torch.arange(4).cuda()  # FRY002
        return feats[idx]


def make_mask(n, device="cuda"):  # FRY002
    return torch.ones(n, device=device)
```

## Use instead
```python
import torch
import torch.nn as nn

import ferry


class Encoder(nn.Module):
    def forward(self, feats):
        idx = torch.arange(4, device=feats.device)
        return feats[idx]


def make_mask(n, device=None):
    return torch.ones(n, device=ferry.pick_device(device))
```
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from functools import partial

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._io import (
    cuda_constant,
    cuda_device_call,
    cuda_spec,
    decides_devices,
    device_guarded,
    is_test_file,
    parameters,
    says_cuda,
    script_level,
)
from ferry.lint.torch_api import AVAILABILITY_CHECKS

#: Calls that only keep their keywords as settings.
_RECORDS = frozenset({"argparse.Namespace", "types.SimpleNamespace", "dict"})


def _checks_availability(ctx: FileContext) -> bool:
    """Whether the file asks anywhere if CUDA is available (a requested device may then be replaced)."""
    return any(ctx.call_name(call) in AVAILABILITY_CHECKS for call in ctx.nodes(ast.Call))


#: Keywords whose value is a device.
DEVICE_KEYWORDS = frozenset({"device", "map_location"})

PICK = "choose the device once (`device = ferry.pick_device()`) and pass it"


def _device_name(name: str) -> bool:
    """``device``, ``DEVICE``, ``torch_device``, ``dev``: not ``device_type``, nor ``cuda_device`` (a CUDA constant)."""
    last = name.rsplit(".", 1)[-1].lower()
    return (last.endswith("device") or last == "dev") and not says_cuda(last)


def _input_hint(ctx: FileContext, node: ast.AST) -> str | None:
    """``x`` when ``node`` is in a method of an ``nn.Module`` (or a function) with an input tensor ``x`` at hand."""
    func = ctx.enclosing_function(node)
    if func is None:
        return None
    cls = ctx.enclosing_class(func)
    module_method = cls is not None and func in cls.body and ctx.kinds.class_is_module(cls.name)
    for arg, default in parameters(func):
        if arg.arg in ("self", "cls") or default is not None:
            continue
        kind = ctx.kinds.lookup(arg.arg, func.body[0]) if func.body else None
        if (kind is not None and kind.is_tensor) or (
            module_method and func.name == "forward" and arg.annotation is None
        ):
            return arg.arg
        break
    return None


def _fix(ctx: FileContext, node: ast.AST, move: str) -> str:
    hint = _input_hint(ctx, node)
    if hint is not None:
        return f"follow the input: `{move.replace('DEVICE', f'{hint}.device')}`"
    return f"{PICK}: `{move.replace('DEVICE', 'device')}`"


def _shown(ctx: FileContext, node: ast.expr) -> str:
    """The source of a receiver, when short enough for a message."""
    text = ctx.segment(node)
    if not text or len(text) > 40 or "\n" in text:
        return "x"
    return text if isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript) else f"({text})"


def _under_compare(ctx: FileContext, node: ast.AST) -> bool:
    """``x.device == torch.device("cuda")``, ``device in (torch.device("cuda"), ...)``: a test, not a choice."""
    for above in ctx.ancestors(node):
        if isinstance(above, ast.Compare):
            return True
        if not isinstance(above, ast.Tuple | ast.List | ast.Set):
            return False
    return False


#: Calls that take a device string without placing anything on it.
NOT_PLACING = frozenset({"getattr", "hasattr", "str", "repr", "print", "format", "isinstance", "len", "logger.info"})


def _placements(ctx: FileContext, scope: ast.AST, names: set[str]) -> tuple[set[str], set[str]]:
    """Which of the dotted ``names`` ``scope`` uses to place something, and the ``self.x`` it stores them in.

    Placing: the value of a ``device=``/``map_location=`` keyword, the argument of ``.to(...)``, ``.cuda(...)`` or
    ``torch.device(...)``, or an argument passed on to another function (not ``getattr``, ``str``, ...). Only
    compared (``device.type == device``) or looked up (``getattr(torch, device)``) is not placing.
    """
    used: set[str] = set()
    stored: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                value = dotted(keyword.value) if keyword.arg in DEVICE_KEYWORDS else None
                if value in names:
                    used.add(value)
            if (ctx.call_name(node) or "") in NOT_PLACING:
                continue
            used.update(value for arg in node.args if (value := dotted(arg)) in names)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            value, target = dotted(node.value), dotted(node.targets[0])
            if value in names and target is not None and target.startswith("self.") and target.count(".") == 1:
                stored.add(target)
    return used, stored


def _places(ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether the parameter ``name`` of ``func`` places something, directly or as ``self.x`` in its class."""
    used, stored = _placements(ctx, func, {name})
    if used:
        return True
    cls = ctx.enclosing_class(func)
    return bool(stored) and cls is not None and bool(_placements(ctx, cls, stored)[0])


def _falls_back(ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``func`` checks availability itself (``if device == "cuda" and not torch.cuda.is_available()``)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and "available" in (ctx.call_name(node) or "").rsplit(".", 1)[-1]:
            return True
    return False


def _callee_places(ctx: FileContext, call: ast.Call, keyword: str) -> bool:
    """Whether ``keyword`` places something in the called function: unknown callees are taken to place."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else dotted(call.func)
    defined = ctx.kinds.functions.get(name or "", [])
    if len(defined) != 1:
        return True
    params = [arg.arg for arg, _ in parameters(defined[0])]
    return keyword not in params or _places(ctx, defined[0], keyword)


Candidate = tuple[ast.AST, Callable[[], str]]  # where, and the message (built only if reported)


def _device_call_message(ctx: FileContext, call: ast.Call) -> str:
    return f"`{ctx.segment(call)}` hard-codes the CUDA device; fix: {_fix(ctx, call, 'device=DEVICE')}"


def _cuda_message(ctx: FileContext, call: ast.Call, receiver: ast.expr) -> str:
    shown = _shown(ctx, receiver)
    args = ", ".join(ctx.segment(a) for a in [*call.args, *call.keywords])
    return f"`{shown}.cuda({args})` hard-codes the CUDA device; fix: {_fix(ctx, call, f'{shown}.to(DEVICE)')}"


def _to_message(ctx: FileContext, call: ast.Call, receiver: ast.expr, spec: str) -> str:
    fix = _fix(ctx, call, f"{_shown(ctx, receiver)}.to(DEVICE)")
    return f'`.to("{spec}")` hard-codes the CUDA device; fix: {fix}'


def _keyword_message(ctx: FileContext, call: ast.Call, keyword: str, spec: str) -> str:
    return f'`{keyword}="{spec}"` hard-codes the CUDA device; fix: {_fix(ctx, call, f"{keyword}=DEVICE")}'


def _calls(ctx: FileContext) -> Iterator[Candidate]:
    """Hard-coded CUDA in calls, before guards are looked at."""
    for call in ctx.nodes(ast.Call):
        func = call.func
        full = ctx.call_name(call) or ""
        if full.startswith("torch.cuda."):
            continue  # CUDA's own API: CUDA-only by definition
        if cuda_device_call(ctx, call):
            above = ctx.parent(call)
            if isinstance(above, ast.Assign | ast.AnnAssign | ast.arguments):
                continue  # a device variable or a parameter default: see _assignments and _defaults
            if not _under_compare(ctx, call):
                yield call, partial(_device_call_message, ctx, call)
            continue
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and dotted(func.value) not in ctx.imports:
            positional = call.args[0] if call.args else None
            chosen = positional or next((k.value for k in call.keywords if k.arg == "device"), None)
            if chosen is None or (isinstance(chosen, ast.Constant) and not isinstance(chosen.value, bool)):
                yield func, partial(_cuda_message, ctx, call, func.value)
            continue
        to_spec = cuda_spec(call.args[0]) if call.args else None
        if isinstance(func, ast.Attribute) and func.attr == "to" and to_spec is not None:
            yield call.args[0], partial(_to_message, ctx, call, func.value, to_spec)
            continue
        if full == "torch.device":
            continue
        if full in _RECORDS and _checks_availability(ctx):
            # `args = argparse.Namespace(device="cuda", ...)` in a file that checks availability: a setting that the
            # code may replace (open_clip falls back to the CPU), not a placement
            continue
        for keyword in call.keywords:
            spec = cuda_spec(keyword.value)
            if keyword.arg in DEVICE_KEYWORDS and spec is not None and _callee_places(ctx, call, keyword.arg):
                yield keyword.value, partial(_keyword_message, ctx, call, keyword.arg, spec)


def _default_message(ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef, arg: str, value: ast.AST) -> str:
    return (
        f"parameter `{arg}` of `{func.name}` defaults to `{ctx.segment(value)}`: every call that leaves it out fails "
        f"where CUDA is not available; fix: default to `None` and choose with `ferry.pick_device({arg})`"
    )


def _defaults(ctx: FileContext) -> Iterator[Candidate]:
    """``def f(x, device="cuda")``: every call that leaves ``device`` out needs CUDA."""
    funcs: list[ast.FunctionDef | ast.AsyncFunctionDef] = [
        *ctx.nodes(ast.FunctionDef),
        *ctx.nodes(ast.AsyncFunctionDef),
    ]
    for func in funcs:
        for arg, default in parameters(func):
            if default is None:
                continue
            hard = (cuda_constant(default) and _device_name(arg.arg)) or cuda_device_call(ctx, default)
            if hard and _places(ctx, func, arg.arg) and not _falls_back(ctx, func):
                yield default, partial(_default_message, ctx, func, arg.arg, default)


def _single_binding(ctx: FileContext, target: ast.expr) -> bool:
    """Whether ``target`` is the only binding of its name in its scope (no fallback assigned elsewhere)."""
    name = dotted(target)
    if name is None:
        return False
    if "." in name:
        values = ctx.kinds.assigned_values(name)
        return all(cuda_constant(v) or cuda_device_call(ctx, v) for v in values)
    scope = ctx.kinds.scope_of(target)
    entries = ctx.kinds.bindings.get(scope, {}).get(name, [])
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):  # a parameter it overwrites is no fallback
        entries = [e for e in entries if e[0] != (scope.lineno, scope.col_offset)]
    return len(entries) == 1


def _assignment_message(ctx: FileContext, name: str, value: ast.AST) -> str:
    return (
        f"`{name}` is set to `{ctx.segment(value)}` without an availability check: everything placed on it fails "
        f"where CUDA is not available; fix: `{name} = ferry.pick_device()` (CUDA when there is one, else the CPU)"
    )


def _assignments(ctx: FileContext) -> Iterator[Candidate]:
    """``device = "cuda"``: the device variable of a script or function, set once, with no fallback."""
    pairs: list[tuple[ast.expr, ast.expr]] = []
    for assign in ctx.nodes(ast.Assign):
        if len(assign.targets) == 1:
            pairs.append((assign.targets[0], assign.value))
    for annotated in ctx.nodes(ast.AnnAssign):
        if annotated.value is not None:
            pairs.append((annotated.target, annotated.value))
    for target, value in pairs:
        name = dotted(target)
        if name is None or says_cuda(name.rsplit(".", 1)[-1]):
            continue  # `cuda_device = torch.device("cuda")`: a CUDA constant, not the device choice
        hard = (cuda_constant(value) and _device_name(name)) or cuda_device_call(ctx, value)
        if hard and _single_binding(ctx, target):
            yield value, partial(_assignment_message, ctx, name, value)


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each hard-coded CUDA placement that no availability check or CUDA-only context covers."""
    if "cuda" not in ctx.source or is_test_file(ctx):
        return
    seen: set[ast.AST] = set()
    gpu_script = not decides_devices(ctx)
    for node, message in _assignments(ctx):
        if node not in seen and not device_guarded(ctx, node):
            seen.add(node)
            yield Finding(node, message=message())
    for source in (_defaults(ctx), _calls(ctx)):
        for node, message in source:
            if node in seen or (gpu_script and script_level(ctx, node)) or device_guarded(ctx, node):
                continue
            seen.add(node)
            if isinstance(node, ast.Attribute):  # `.cuda`: report at the method, not at the start of the chain
                end = node.end_lineno or node.lineno
                yield Finding(node, message=message(), line=end, col=(node.end_col_offset or 0) - len("cuda"))
            else:
                yield Finding(node, message=message())


RULE = Rule(
    code="FRY002",
    name="hardcoded-cuda-device",
    message="CUDA device hard-coded outside an availability check: fails where CUDA is not available",
    fix_title="choose the device once (`device = ferry.pick_device()`) and pass it, or follow the input "
    "(`device=x.device`)",
    doc=__doc__ or "",
    check=check,
)
