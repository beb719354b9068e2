"""FRY013 float64-on-mps.

## What it does
Finds float64 tensors and modules sent to a device that is, or may be, Apple's ``mps``: ``.to("mps")`` (or a device
bound to ``"mps"`` or to ``"mps" if ... else "cpu"``) of a tensor made float64 (``dtype=torch.float64``,
``.double()``, ``torch.from_numpy`` or ``torch.as_tensor`` of a NumPy float64 array such as ``np.random.rand(...)``),
``torch.as_tensor(array, device="mps")`` of such an array, and ``.double()`` of a tensor already on ``mps``.

## Why is this bad
The MPS backend has no float64. Sending a float64 tensor there raises ``TypeError: Cannot convert a MPS Tensor to
float64 dtype as the MPS framework doesn't support float64. Please use float32 instead.`` NumPy makes float64 by
default, so ``torch.from_numpy`` of its arrays is the usual way in. Cast before the move, not after.

## Example
```python
import numpy as np
import torch

device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
obs = torch.from_numpy(np.random.rand(8, 4))
obs = obs.to(device)  # FRY013
```

## Use instead
```python
import numpy as np
import torch

device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
obs = torch.from_numpy(np.random.rand(8, 4))
obs = obs.float().to(device)
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._tensors import (
    describe,
    device_types,
    float64,
    is_dtype,
    is_float64_dtype,
    keyword,
    places,
)


def _mps_target(ctx: FileContext, call: ast.Call) -> bool:
    """Whether a ``.to(...)`` call sends its receiver to a device that may be ``mps``."""
    target = keyword(call, "device")
    if target is None and call.args:
        target = call.args[0]
    if target is None:
        return False
    if "mps" in device_types(ctx, target):
        return True
    kind = ctx.kind(target)
    return kind is not None and kind.is_tensor and "mps" in places(ctx).of(target)


def _dtype_argument(ctx: FileContext, call: ast.Call) -> ast.expr | None:
    """The dtype a ``.to(...)`` call converts to: ``dtype=`` or a positional ``torch.float64``."""
    given = keyword(call, "dtype")
    if given is not None:
        return given
    return next((arg for arg in call.args[:2] if is_dtype(ctx, arg)), None)


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each float64 tensor or module sent to a device that may be ``mps``."""
    is_float64 = float64(ctx)
    where = places(ctx)
    for call in ctx.nodes(ast.Call):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "to":
            if not _mps_target(ctx, call):
                continue
            dtype = _dtype_argument(ctx, call)
            if dtype is not None and not is_float64_dtype(ctx, dtype):
                continue
            if dtype is None and not is_float64(func.value):
                continue
            shown = describe(ctx, func.value)
            yield Finding(
                call,
                message=f"`{shown}` is float64 and is sent to a device that may be `mps`, which has no float64; "
                f"cast it first: `{shown}.float().to(...)`",
            )
        elif isinstance(func, ast.Attribute) and func.attr == "double" and not call.args:
            if "mps" in where.of(func.value):
                shown = describe(ctx, func.value)
                yield Finding(
                    call,
                    message=f"`{shown}` may live on `mps`, which has no float64: `.double()` raises there; "
                    "keep float32 on mps",
                )
        elif (device := keyword(call, "device")) is not None and "mps" in device_types(ctx, device):
            name = ctx.call_name(call)
            if name is None or not name.startswith("torch.") or not is_float64(call):
                continue
            yield Finding(
                call,
                message=f"`{name}(...)` makes a float64 tensor on a device that may be `mps`, which has no "
                "float64; pass `dtype=torch.float32`",
            )


RULE = Rule(
    code="FRY013",
    name="float64-on-mps",
    message="float64 tensor or module sent to `mps`, which has no float64",
    fix_title="cast to float32 before the move: `t.float().to(device)`, or pass `dtype=torch.float32`",
    doc=__doc__ or "",
    check=check,
)
