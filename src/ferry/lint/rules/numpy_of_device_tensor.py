"""FRY012 numpy-of-device-tensor.

## What it does
Finds ``.numpy()`` called on a tensor that lives on an accelerator, with no ``.cpu()`` in between: a tensor created with
``device="cuda"`` (or a device that may be an accelerator, such as ``"cuda" if torch.cuda.is_available() else "cpu"``),
moved there with ``.cuda()`` or ``.to(device)``, made by a factory without ``device=`` after
``torch.set_default_device(device)`` or inside ``with torch.device(device):``, computed from such tensors, or the output
of a module moved there, wherever the shared device flow follows it (tuple unpacking, DataLoader batches and dataset
items, the file's functions called with device values). Also conversions that call ``.numpy()`` for you:
``np.asarray(t)`` and its kin, and scikit-learn's metrics (``metrics.accuracy_score(labels, preds)``). Not reported:
tensors whose device the file does not show (function parameters, devices it cannot resolve), ``.numpy(force=True)``,
and code under a test about devices (``if device.type == "cpu":``).

## Why is this bad
``Tensor.numpy()`` only works on CPU tensors. On a GPU it raises ``TypeError: can't convert cuda:0 device type
tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.`` The code works on a laptop and breaks
on the first machine with a GPU.

## Example
```python
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 2).to(device)
scores = model(torch.randn(8, 4, device=device))
probs = scores.softmax(1).detach().numpy()  # FRY012
```

## Use instead
```python
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 2).to(device)
scores = model(torch.randn(8, 4, device=device))
probs = scores.softmax(1).detach().cpu().numpy()
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext
from ferry.lint.model import Edit, Finding, Fix, Rule
from ferry.lint.rules._placement import converted_argument, device_numpy
from ferry.lint.rules._tensors import describe, keyword, places
from ferry.lint.torch_api import ACCELERATORS, ARRAY_CONVERTING, NUMPY_CONVERSIONS


def _decides_on_devices(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` runs under a test about devices (``if device == "cpu":``): the code knows where it is."""
    child = node
    for above in ctx.ancestors(node):
        if isinstance(above, ast.If | ast.IfExp) and child is not above.test and ctx.mentions_availability(above.test):
            return True
        if isinstance(above, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return False
        child = above
    return False


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each ``.numpy()`` of a tensor that the file places on an accelerator."""
    where = places(ctx)
    flowed = device_numpy(ctx)
    for call in ctx.nodes(ast.Call):
        func = call.func
        converting = ctx.qualname(func) in NUMPY_CONVERSIONS or (ctx.qualname(func) or "").startswith(ARRAY_CONVERTING)
        if call in flowed and converting and not _decides_on_devices(ctx, call):
            yield _conversion_finding(ctx, call, flowed[call], converted_argument(ctx, call))
            continue
        if not (isinstance(func, ast.Attribute) and func.attr == "numpy" and not call.args):
            continue
        if keyword(call, "force") is not None:
            continue  # `.numpy(force=True)` copies to the CPU itself
        receiver = func.value
        kind = ctx.kind(receiver)
        if kind is not None and not kind.is_tensor:
            continue
        devices = [f"`{d}`" for d in sorted(where.of(receiver) & ACCELERATORS)]
        if not devices and call in flowed:
            chosen = flowed[call]
            devices = [f"an accelerator (the device `{chosen}`)" if 0 < len(chosen) <= 40 else "an accelerator"]
        if not devices or _decides_on_devices(ctx, call):
            continue
        shown = describe(ctx, receiver)
        if not isinstance(receiver, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
            shown = f"({shown})"
        on = " or ".join(devices)
        at = (func.end_lineno or func.lineno, (func.end_col_offset or 0) - len("numpy"))  # just before `numpy`
        yield Finding(
            call,
            message=f"`{shown}` may live on {on}, where `.numpy()` raises; copy it to the CPU first: "
            f"`{shown}.cpu().numpy()`",
            fix=Fix("Copy to the CPU first: `.cpu().numpy()`", (Edit(at, at, "cpu()."),)),
        )


def _conversion_finding(ctx: FileContext, call: ast.Call, chosen: str, index: int = 0) -> Finding:
    """``np.asarray(t)`` of a device tensor: NumPy converts it with ``Tensor.__array__``, which is ``.numpy()``.

    ``index``: the argument that is on the device (``accuracy_score(labels, preds)``: either).
    """
    arg = call.args[index]
    shown = describe(ctx, arg)
    if not isinstance(arg, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
        shown = f"({shown})"
    on = f"an accelerator (the device `{chosen}`)" if 0 < len(chosen) <= 40 else "an accelerator"
    name = ctx.segment(call.func)
    end = (arg.end_lineno or arg.lineno, arg.end_col_offset or 0)
    edits = (
        (Edit(end, end, ".detach().cpu()"),)
        if isinstance(arg, ast.Name | ast.Attribute | ast.Call | ast.Subscript)
        else ()
    )
    return Finding(
        call,
        message=f"`{shown}` may live on {on}, and `{name}(...)` converts it with `.numpy()`, which raises there; "
        f"copy it to the CPU first: `{shown}.detach().cpu()`",
        fix=Fix("Copy to the CPU first: `.detach().cpu()`", edits) if edits else None,
    )


RULE = Rule(
    code="FRY012",
    name="numpy-of-device-tensor",
    message="`.numpy()` of a tensor on an accelerator raises: copy it to the CPU first",
    fix_title="call `.cpu()` before `.numpy()`: `t.detach().cpu().numpy()`",
    doc=__doc__ or "",
    check=check,
)
