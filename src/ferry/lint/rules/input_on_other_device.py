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

import ast
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._placement import reports
from ferry.lint.rules._placement_calls import shape_dims
from ferry.lint.torch_api import FACTORIES


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each host tensor that a module or tensor on the device gets."""
    for found in reports(ctx, "FRY006"):
        yield Finding(found.node, message=found.message)
    yield from _partial_moves(ctx)


#: Words of an attribute's name that say it is meant to stay on the host (lengths, counters, indices).
_HOST_WORDS = ("len", "size", "count", "num", "cpu", "step", "idx", "index", "host")


def _same_again(ctx: FileContext, target: ast.Attribute) -> bool:
    """``self.rewards = self.rewards``: the attribute bound to itself, which moves nothing."""
    parent = ctx.parent(target)
    return (
        isinstance(target.ctx, ast.Store)
        and isinstance(parent, ast.Assign)
        and isinstance(parent.value, ast.Attribute)
        and dotted(parent.value) == dotted(target)
    )


def _dims(ctx: FileContext, call: ast.expr) -> int:
    """How many dimensions a factory call of ``__init__`` shows (see :func:`shape_dims`)."""
    if not isinstance(call, ast.Call):
        return 0
    return shape_dims(call, (ctx.call_name(call) or "").rsplit(".", 1)[-1])


def _partial_moves(ctx: FileContext) -> Iterator[Finding]:
    """A plain class's ``to(device)`` that moves all but some of the tensors its ``__init__`` makes.

    a2c-ppo-acktr's ``RolloutStorage.to``: ``self.obs = self.obs.to(device)`` and so on for each buffer; one line
    left out leaves that buffer on the host, and the training step then mixes devices. Reported when the method
    moves at least two of the tensors that ``__init__`` makes with torch factories, and one made the same way, with
    two dimensions or more, is not moved (names that say they stay on the host, such as lengths and indices,
    excepted; a vector's elements are 0-dim scalars, which mix with device tensors).
    """
    for cls in ctx.nodes(ast.ClassDef):
        if ctx.kinds.class_is_module(cls.name):
            continue  # `nn.Module.to` moves registered tensors itself
        methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
        init, move = methods.get("__init__"), methods.get("to") or methods.get("cuda")
        if init is None or move is None or len(move.args.args) > 2:
            continue
        made: dict[str, ast.Assign] = {}
        for stmt in ast.walk(init):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call):
                target = stmt.targets[0]
                full = ctx.call_name(stmt.value) or ""
                if (
                    isinstance(target, ast.Attribute)
                    and dotted(target.value) == "self"
                    and full.startswith("torch.")
                    and full.rsplit(".", 1)[-1] in FACTORIES
                    and not any(k.arg == "device" for k in stmt.value.keywords)
                ):
                    made[target.attr] = stmt
        moved = {
            target.attr
            for stmt in ast.walk(move)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            for target in stmt.targets
            if isinstance(target, ast.Attribute)
            and dotted(target.value) == "self"
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr in ("to", "cuda")
            and dotted(stmt.value.func.value) == f"self.{target.attr}"
        }
        touched = {  # rebound some other way (`self.x = [t.to(d) for t in self.x]`) or handed to a call
            n.attr
            for n in ast.walk(move)
            if isinstance(n, ast.Attribute)
            and dotted(n.value) == "self"
            and (isinstance(n.ctx, ast.Store) or isinstance(ctx.parent(n), ast.Call | ast.keyword | ast.Starred))
            and not _same_again(ctx, n)
        }
        if len(moved & made.keys()) < 2 or not moved <= made.keys():
            continue
        left = [
            name
            for name in made
            if name not in touched
            and not any(word in name.lower() for word in _HOST_WORDS)
            and _dims(ctx, made[name].value) >= 2  # a 1-D vector's elements are 0-dim: they mix with device tensors
        ]
        for name in left:
            shown = ", ".join(f"`{m}`" for m in sorted(moved)[:4]) + (" ..." if len(moved) > 4 else "")
            param = move.args.args[1].arg if len(move.args.args) == 2 and move.name == "to" else ""
            yield Finding(
                made[name],
                message=f"`{cls.name}.{move.name}()` moves {shown} but not `self.{name}`, made the same way here: "
                f"it stays on the host while the others go to the device, and the first step that uses them "
                f"together fails; fix: add `self.{name} = self.{name}.{move.name}({param})` "
                f"to `{move.name}()`",
            )


RULE = Rule(
    code="FRY006",
    name="input-on-other-device",
    message="a tensor on the host meets a module or tensor on the device",
    fix_title="move the tensor too: `x = x.to(device)`, or make it with `device=device`",
    doc=__doc__ or "",
    check=check,
)
