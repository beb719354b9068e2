"""FRY001 discarded-tensor-move.

## What it does
Finds a tensor moved or converted (``.to(...)``, ``.cuda()``, ``.cpu()``, ``.half()``, ``.float()``, ``.double()``,
``.bfloat16()``, ``.type(...)``, ``.contiguous()``, ``.pin_memory()``) as a statement of its own, its result thrown
away. The receiver is a tensor by what its name was bound to (torch factories and operations, ``torch.from_numpy``,
batches from a ``DataLoader``, arithmetic on tensors); modules are not reported: ``model.to(device)`` alone is
correct.

## Why is this bad
``Tensor.to`` and its relatives return a new tensor and leave the original where it was, unlike ``Module.to``,
which moves the module in place. The line does nothing, and the next use of the tensor fails with "Expected all
tensors to be on the same device" or silently runs on the CPU.

## Example
```python
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(8, 3)
x.to(device)  # FRY001
```

## Use instead
```python
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
x = torch.randn(8, 3)
x = x.to(device)
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Edit, Finding, Fix, Rule

MOVES = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "type", "contiguous", "pin_memory"})


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each statement that moves or converts a tensor and drops the result."""
    for stmt in ctx.nodes(ast.Expr):
        call = stmt.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in MOVES):
            continue
        if call.func.attr == "type" and not (call.args or call.keywords):
            continue  # `t.type()` returns the type name: nothing to keep
        receiver = call.func.value
        kind = ctx.kind(receiver)
        if kind is None or not kind.is_tensor:
            continue
        name = dotted(receiver)
        method = call.func.attr
        fix = None
        if name is not None and "(" not in name:
            fix = Fix(
                f"Assign the result: `{name} = {name}.{method}(...)`",
                (Edit.replace(stmt, f"{name} = {ctx.segment(call)}"),),
            )
        shown = name or "tensor"
        yield Finding(
            call,
            message=f"result of `{shown}.{method}(...)` is discarded: tensors are not moved or converted in place; "
            f"assign it: `{shown} = {shown}.{method}(...)`",
            fix=fix,
        )


RULE = Rule(
    code="FRY001",
    name="discarded-tensor-move",
    message="result of a tensor move or conversion is discarded: tensors are not moved in place",
    fix_title="assign the result back: `x = x.to(device)`",
    doc=__doc__ or "",
    check=check,
)
