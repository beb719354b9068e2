"""FRY007 module-never-moved.

## What it does
Finds a module built in the code (a ``torch.nn`` layer or container, a ``torchvision.models`` builder,
``timm.create_model``, an ``nn.Module`` subclass of the file) that is never moved, while the input it is called with
was moved to the device (``x.to(device)``, ``.cuda()``, a factory with ``device=``). It reports the line that builds
the module.

The module and its input may meet in another function of the file: a model built at module level and called in
``train()``, or built in ``main()`` and passed to ``train(model, device, loader)`` (each function's parameters take
what its callers pass, when no caller passes ``*args``).

Two more ways a module ends up on the host while its inputs are on the device:

- its class moves its inputs to a device it is given (``self.dev = args.device``, then
  ``torch.LongTensor(seqs).to(self.dev)`` in its methods) but never its weights, and it is built without a move
  (``SASRec(usernum, itemnum, args)`` with no ``.to(args.device)``);
- it was moved to the host in place and then gets device inputs: ``torch.save(model.cpu().state_dict(), path)``
  inside the training loop (a module's ``.cpu()`` is not a copy; the next step fails), or before predicting.

It also finds modules with parameters built straight into a plain ``list`` or ``dict`` attribute of a module class
(``self.heads = [nn.Linear(4, 2), nn.Linear(4, 2)]``): ``Module.to``, ``.parameters()`` and ``state_dict()`` never
see them, so they stay on the CPU, are not trained and are not saved (``nn.ModuleList``/``nn.ModuleDict`` register
them). A list wrapping an existing module (``self._teacher = [teacher]``, a known way to hide one) is left alone.

It stays silent when the module may be moved elsewhere: it is moved anywhere in the file, handed to a function that
may move it, aliased or stored, built inside a ``with`` block of an unknown context manager, or its class deals with
devices itself; and for modules without parameters (``nn.ReLU()``, ``nn.Flatten()``), which run on any device.

## Why is this bad
The input is on the GPU and the weights are still on the CPU: the first call fails with "Input type
(torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same". Moving the data without the model
is the other half of input-on-other-device.

## Example
```python
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))  # FRY007
x = torch.randn(16, 4).to(device)
y = model(x)
```

## Use instead
```python
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
x = torch.randn(16, 4).to(device)
y = model(x)
```
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._attributes import left_behind, unregistered
from ferry.lint.rules._placement import reports


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each module that is never moved while its input is on the device."""
    for found in reports(ctx, "FRY007"):
        yield Finding(found.node, message=found.message)
    for plain in unregistered(ctx)[1]:
        wrapper = "nn.ModuleList" if plain.container == "list" else "nn.ModuleDict"
        yield Finding(
            plain.assign,
            message=f"`self.{plain.attr}` keeps modules in a plain {plain.container} in `{plain.cls}`: `Module.to`, "
            f"`.parameters()` and `state_dict()` never see them, so they stay on the CPU, are not trained and are "
            f"not saved; fix: `self.{plain.attr} = {wrapper}(...)` around the same {plain.container}",
        )
    for behind in left_behind(ctx):
        yield Finding(
            behind.assign,
            message=f"`self.{behind.attr}` is built in `{behind.cls}.__init__` and never moved, but `{behind.cls}` "
            f"moves its other layers itself (`self.{behind.other}`, line {behind.moved.lineno}) and nothing moves the "
            f"whole model: `self.{behind.attr}` stays on the CPU while its inputs are on the device; fix: move it the "
            f"same way (`self.{behind.attr} = self.{behind.attr}.{_how(behind.moved)}`), or move the whole model once",
        )


def _how(move: ast.Call) -> str:
    """The move as written, to repeat on another layer: ``cuda()``, ``to(device)``."""
    func = move.func
    if isinstance(func, ast.Attribute) and func.attr == "to" and move.args:
        return f"to({ast.unparse(move.args[0])})"
    return f"{func.attr}()" if isinstance(func, ast.Attribute) else "to(device)"


RULE = Rule(
    code="FRY007",
    name="module-never-moved",
    message="the module is never moved to the device its input is on",
    fix_title="move the module after building it: `model.to(device)`",
    doc=__doc__ or "",
    check=check,
)
