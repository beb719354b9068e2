"""FRY006 input-on-other-device.

## What it does
Finds a tensor left on the host that meets a module or a tensor on the device: a module moved with
``model.to(device)`` or ``.cuda()`` and then called with a tensor made without ``device=`` (``torch.randn(...)``,
``torch.tensor(data)``, ``torch.from_numpy(...)``, a legacy ``torch.FloatTensor(...)``) and never moved; a device
tensor (a model's output, a moved tensor) and a host tensor in one arithmetic expression, comparison or combining
``torch`` function (``cat``, ``gather``, ``matmul``, ``where``...); a host tensor indexed with a device tensor
(``labels[~mask]``). It reports the line that binds the host tensor, where ``.to(device)`` belongs, or the use when
the tensor comes from a loop variable.

It follows values the way scripts pass them: through branches and loops (a loop's first pass sees values as they
were before it), tuple unpacking, the functions of the file (each call read with the values it passes, what they
return read back), module-level code, plain classes' attributes, and a model's own methods
(``hidden = model.init_hidden(n)``). A ``DataLoader``'s batches are where a ``TensorDataset``'s tensors are, on the
host for a dataset class of the file or a ``torchvision`` dataset (the default collate), what a ``collate_fn`` of
the file returns, and on the host wherever the loop that reads them moves some of them (``x, y = x, y.to(device)``:
its author knows they arrive there).

Not reported: values of unknown origin (an unknown function's result, a loader of unknown batches that no loop
moves), host tensors that may have zero dimensions (``torch.tensor(2.0)``, a sum), which PyTorch lets meet device
tensors, later inputs named as lengths or sizes (a packed sequence's lengths stay on the host by design), CPU indices
into a device tensor, and modules that take inputs from anywhere: ``DataParallel`` and DDP wrappers, modules
without parameters, classes of the file that move their own inputs.

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
