"""FRY011 loss-on-other-device.

## What it does
Finds a loss that gets tensors on two devices: a loss module built with a host ``weight=`` (or ``pos_weight=``)
tensor, e.g. ``nn.CrossEntropyLoss(weight=torch.tensor([...]))``, never moved and called with the model's outputs on
the device; or a loss module or function (``F.cross_entropy``, ``nn.MSELoss()``, ...) called with an output on the
device and a target left on the host (made by ``torch.from_numpy``, ``torch.tensor``, a factory without
``device=``, and never moved). It reports the line that builds the loss module or the host target.

Targets of unknown origin (function parameters, loader batches) are not reported, nor ``CTCLoss``, whose targets
may stay on the CPU.

## Why is this bad
``Module.to(device)`` on the model does not move the loss: its weight stays on the CPU. The loss then fails with
"Expected all tensors to be on the same device" (or "Expected object of device type cuda but got device type cpu
for argument #2 'target'"); on a CPU-only machine it runs, so the bug ships.

## Example
```python
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 3).to(device)
loss_fn = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.5, 0.7]))  # FRY011
logits = model(torch.randn(6, 4, device=device))
labels = torch.tensor([0, 1, 2, 1, 0, 2])  # FRY011
loss = loss_fn(logits, labels)
```

## Use instead
```python
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 3).to(device)
loss_fn = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.5, 0.7])).to(device)
logits = model(torch.randn(6, 4, device=device))
labels = torch.tensor([0, 1, 2, 1, 0, 2], device=device)
loss = loss_fn(logits, labels)
```
"""

from __future__ import annotations

from collections.abc import Iterator

from ferry.lint.context import FileContext
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._placement import reports


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each loss weight or target left on the host while the loss gets device tensors."""
    for found in reports(ctx, "FRY011"):
        yield Finding(found.node, message=found.message)


RULE = Rule(
    code="FRY011",
    name="loss-on-other-device",
    message="a loss gets tensors on the device and its weight or target on the host",
    fix_title="move the loss module and the targets: `loss_fn.to(device)`, `y = y.to(device)`",
    doc=__doc__ or "",
    check=check,
)
