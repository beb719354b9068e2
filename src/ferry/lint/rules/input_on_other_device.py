"""FRY006 input-on-other-device.

## What it does
Finds a tensor left on the host that meets a module or a tensor on the device: a module moved with
``model.to(device)`` or ``.cuda()`` and then called with a tensor made without ``device=`` (``torch.randn(...)``,
``torch.tensor(data)``, ``torch.from_numpy(...)``) and never moved, or a device tensor (a model's output, a moved
tensor) and a host tensor in one arithmetic expression or comparison. It follows straight-line code, branches and
loop bodies within a function; it reports the line that binds the host tensor, where ``.to(device)`` belongs, or the
use when the tensor comes from a loop variable.

Values of unknown origin (function parameters, results of other functions, data loader batches) are not reported,
nor host tensors that may have zero dimensions (``torch.tensor(2.0)``, a sum), which PyTorch lets meet device
tensors. Only a module's first argument is checked (later ones, such as the lengths of a packed sequence, may stay on
the host by design), and modules that take inputs from anywhere are left alone: ``DataParallel`` and DDP wrappers,
modules without parameters, classes of the file that move their own inputs.

## Why is this bad
Modules move in place, tensors do not: after ``model.to(device)`` every input must be moved too. On a GPU the call
fails with "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same" or "Expected
all tensors to be on the same device"; on a CPU-only machine the code runs, so the bug ships.

## Example
```python
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
x = torch.randn(8, 4)  # FRY006
y = model(x)
labels = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1])  # FRY006
accuracy = (y.argmax(1) == labels).float().mean()
```

## Use instead
```python
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
x = torch.randn(8, 4, device=device)
y = model(x)
labels = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1]).to(device)
accuracy = (y.argmax(1) == labels).float().mean()
```
"""

from __future__ import annotations

from collections.abc import Iterator

from ferry.lint.context import FileContext
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._placement import reports


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each host tensor that a module or tensor on the device gets."""
    for found in reports(ctx, "FRY006"):
        yield Finding(found.node, message=found.message)


RULE = Rule(
    code="FRY006",
    name="input-on-other-device",
    message="a tensor on the host meets a module or tensor on the device",
    fix_title="move the tensor too: `x = x.to(device)`, or make it with `device=device`",
    doc=__doc__ or "",
    check=check,
)
