"""FRY003 load-without-map-location.

## What it does
Finds ``torch.load(...)`` calls without ``map_location``. When a device variable is in scope (a parameter named
``device`` or ``map_location``, or a name bound to ``torch.device(...)``, ``ferry.pick_device()``, a function of the
file that returns a device, or ``"cuda" if torch.cuda.is_available() else "cpu"``), the safe fix adds
``map_location=<that name>``; otherwise the message suggests ``map_location="cpu"`` or ``ferry.load``.

Not reported:

- calls that pass ``*args`` or ``**kwargs`` (``map_location`` may be among them);
- a dataset class reading its own cache (``class MNIST(VisionDataset)``): the data pipeline writes CPU tensors;
- a load of what the same function just wrote with ``torch.save``, a round trip on one machine (top-level code
  is not exempt: notebook cells that save and load often run at different times, on different machines);
- loads under an availability check or in CUDA-only code, where the saved device exists;
- a gradient scaler's state (``scaler.load_state_dict(torch.load(f))``): it holds Python numbers, no tensors.

## Why is this bad
``torch.load`` puts every tensor back on the device it was saved from. A checkpoint written on a GPU then fails
on a machine without one ("Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is
False"), and on a multi-GPU machine every process loads onto ``cuda:0`` before the model is moved.

## Example
```python
import torch


def restore(path, net, device):
    state = torch.load(path)  # FRY003
    net.load_state_dict(state["model"])
    return net.to(device)
```

## Use instead
```python
import torch


def restore(path, net, device):
    state = torch.load(path, map_location=device)
    net.load_state_dict(state["model"])
    return net.to(device)
```
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Edit, Finding, Fix, Rule
from ferry.lint.rules._io import device_guarded, device_variable
from ferry.lint.torch_api import LOADS, SAVES


def _round_trip(ctx: FileContext, call: ast.Call) -> bool:
    """Whether the function around ``call`` saved to the file or buffer it loads, before it (not top-level code)."""
    source = dotted(call.args[0]) if call.args and isinstance(call.args[0], ast.Name | ast.Attribute) else None
    if source is None and call.args and isinstance(call.args[0], ast.Constant):
        source = repr(call.args[0].value)
    if source is None:
        return False
    scope = ctx.enclosing_function(call)
    if scope is None:
        return False  # top-level code, notebook cells: the save may have run on another machine
    for save in ctx.nodes(ast.Call):
        if ctx.call_name(save) not in SAVES or len(save.args) < 2 or save.lineno > call.lineno:
            continue
        if ctx.enclosing_function(save) is not scope:
            continue
        target = save.args[1]
        name = dotted(target) if isinstance(target, ast.Name | ast.Attribute) else None
        if name is None and isinstance(target, ast.Constant):
            name = repr(target.value)
        if name == source:
            return True
    return False


def _dataset_cache(ctx: FileContext, call: ast.Call) -> bool:
    """Whether ``call`` is in a method of a dataset class (``class MNIST(VisionDataset)``): it reads its own cache."""
    cls = ctx.enclosing_class(call)
    if cls is None:
        return False
    names = [(dotted(base) or "").rsplit(".", 1)[-1] for base in cls.bases]
    return any(name.endswith("Dataset") for name in names)


_CLOSING = re.compile(r"\s*,?\s*(#[^\n]*\s*)*\)")


def _after_last_argument(ctx: FileContext, call: ast.Call) -> tuple[int, int] | None:
    """Where ``, map_location=...`` goes: right after the last argument, if only a comma, comments and ``)`` follow.

    ``None`` when anything else does (``torch.load((path))``: the argument's own parentheses).
    """
    last: ast.expr = call.keywords[-1].value if call.keywords else call.args[-1]
    if last.end_lineno is None or last.end_col_offset is None or call.end_lineno is None:
        return None
    lines = ctx.source.split("\n")
    if call.end_lineno > len(lines):
        return None
    between = [lines[n - 1] for n in range(last.end_lineno, call.end_lineno + 1)]
    between[-1] = between[-1].encode()[: call.end_col_offset].decode(errors="replace")  # the line of `)`
    between[0] = between[0].encode()[last.end_col_offset :].decode(errors="replace")  # then of the argument
    return (last.end_lineno, last.end_col_offset) if _CLOSING.fullmatch("\n".join(between)) else None


def _scaler_state(ctx: FileContext, call: ast.Call) -> bool:
    """Whether the load is a gradient scaler's state: ``scaler.load_state_dict(torch.load(f))``, ``scaler_state = ...``.

    ``GradScaler.state_dict()`` holds Python numbers only (the scale is read back with ``.item()``): nothing in the
    file is tagged with a device.
    """
    above = ctx.parent(call)
    if isinstance(above, ast.Call) and above.args and above.args[0] is call and isinstance(above.func, ast.Attribute):
        receiver = dotted(above.func.value) or ""
        return above.func.attr == "load_state_dict" and "scaler" in receiver.rsplit(".", 1)[-1].lower()
    if isinstance(above, ast.Assign) and len(above.targets) == 1:
        target = dotted(above.targets[0]) or ""
        return "scaler" in target.rsplit(".", 1)[-1].lower()
    return False


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each ``torch.load`` without ``map_location``, with a safe fix when a device variable is in scope."""
    if "load(" not in ctx.source:
        return
    for call in ctx.nodes(ast.Call):
        if ctx.call_name(call) not in LOADS:
            continue
        if len(call.args) >= 2 or any(k.arg in ("map_location", None) for k in call.keywords):
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or not call.args:
            continue
        if _round_trip(ctx, call) or _dataset_cache(ctx, call) or _scaler_state(ctx, call):
            continue
        if device_guarded(ctx, call, try_guards=False):
            continue
        shown = ctx.segment(call.args[0]) if call.args[0].end_lineno == call.args[0].lineno else "f"
        if len(shown) > 40:
            shown = "f"
        device = device_variable(ctx, call)
        fix = None
        at = _after_last_argument(ctx, call)
        if device is not None:
            if at is not None:
                fix = Fix(f"Add `map_location={device}`", (Edit(at, at, f", map_location={device}"),))
            advice = f"`torch.load({shown}, map_location={device})`"
        else:
            advice = f'`torch.load({shown}, map_location="cpu")` (or the target device), or `ferry.load({shown})`'
        yield Finding(
            call,
            message=f"`torch.load({shown})` has no `map_location`: tensors come back on the device they were saved "
            f"from, and a GPU-saved file fails where CUDA is not available; fix: {advice}",
            fix=fix,
        )


RULE = Rule(
    code="FRY003",
    name="load-without-map-location",
    message="`torch.load` without `map_location`: tensors come back on the device they were saved from",
    fix_title="pass `map_location=` the target device (`map_location=device`), or use `ferry.load(path, device=...)`",
    doc=__doc__ or "",
    check=check,
)
