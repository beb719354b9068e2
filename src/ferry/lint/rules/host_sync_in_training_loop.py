"""FRY101 host-sync-in-training-loop.

## What it does
Finds reads of tensor values on the host inside a training loop, the innermost loop whose body calls
``.backward()`` or ``optimizer.step()``: ``t.item()``, ``t.cpu()``, ``t.numpy()``, ``t.tolist()``, ``float(t)``,
``int(t)``, ``print(t)`` and tensors formatted into f-strings (``f"{loss}"``). The value must be a tensor by what
its name was bound to (the output of a model, a loss, arithmetic on tensors); python numbers are not reported.

Not reported: reads under a periodic or exceptional condition (``if step % 50 == 0:``, ``if i % args.print_freq
== 0:``, ``if not torch.isfinite(loss):``, a branch that logs, prints or saves by name) or in ``raise``/``assert``
messages; tensors that are surely on the host (batches straight from a ``DataLoader``, tensors made without a
device, results of ``.cpu()``); loops that only evaluate; and reads after the loop.

## Why is this bad
Kernels run asynchronously: the Python loop normally queues work for the next step while the accelerator is still
busy with this one. Reading a value on the host waits until every queued kernel has finished, once per step, so the
accelerator idles while Python catches up, the data loader's prefetching stops overlapping, and training slows down
by a few to tens of percent (dgl#5302, style-based-gan-pytorch#50). Keep running values on the device
(``running += loss.detach()``) and read them every N steps.

## Example
```python
import torch
import torch.nn as nn

model = nn.Linear(10, 1).cuda()
opt = torch.optim.Adam(model.parameters())
total = 0.0
for step in range(1000):
    loss = model(torch.randn(8, 10, device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()  # FRY101
```

## Use instead
```python
import torch
import torch.nn as nn

model = nn.Linear(10, 1).cuda()
opt = torch.optim.Adam(model.parameters())
total = torch.zeros((), device="cuda")
for step in range(1000):
    loss = model(torch.randn(8, 10, device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.detach()
    if step % 100 == 0:
        print(f"step {step}: mean loss {total.item() / (step + 1):.4f}")
```
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._training import BOUNDARIES, LOOPS, innermost_loop, is_optimizer
from ferry.lint.torch_api import DATA_FACTORIES, FACTORIES, LEGACY_CONSTRUCTORS, NUMPY_FACTORIES

SYNC_METHODS = frozenset({"item", "cpu", "numpy", "tolist"})
SYNC_BUILTINS = frozenset({"float", "int", "print"})

#: Factories that make a tensor on the host unless given ``device=`` (the default device is the CPU).
HOST_FACTORIES = frozenset(
    f"torch.{name}" for name in FACTORIES | DATA_FACTORIES | NUMPY_FACTORIES | LEGACY_CONSTRUCTORS
)
STEP_ARGUMENT_OWNERS = re.compile(r"scaler", re.IGNORECASE)

#: Words in an ``if`` test that make its body run now and then, not every step.
RARE_WORDS = re.compile(
    r"(freq|interval|every|period|log|print|display|verbose|debug|report|save|eval|valid|val_|checkpoint|ckpt|"
    r"last|final|first|nan|inf|finite|warn)",
    re.IGNORECASE,
)


def _is_training_call(ctx: FileContext, call: ast.Call) -> bool:
    """``x.backward()``, ``accelerator.backward(loss)``, ``torch.autograd.backward``, ``optimizer.step()``."""
    callee = call.func
    if not isinstance(callee, ast.Attribute):
        return False
    if callee.attr in ("backward", "manual_backward"):
        return True
    if callee.attr != "step":
        return False
    owner = dotted(callee.value) or ""
    if "sched" in owner.lower():
        return False
    if call.args and STEP_ARGUMENT_OWNERS.search(owner):
        return True  # scaler.step(optimizer)
    return not call.args and is_optimizer(ctx, callee.value)


def _training_loops(ctx: FileContext) -> set[ast.AST]:
    loops: set[ast.AST] = set()
    for call in ctx.nodes(ast.Call):
        if _is_training_call(ctx, call):
            loop = innermost_loop(ctx, call)
            if loop is not None:
                loops.add(loop)
    return loops


def _rare_test(test: ast.AST) -> bool:
    """Whether an ``if`` test makes its body run now and then: a modulo, a counter compared, a word that says so."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return True
        if isinstance(node, ast.Call) and (dotted(node.func) or "") == "len":
            return True
        name = dotted(node) if isinstance(node, ast.Name | ast.Attribute) else None
        if name and RARE_WORDS.search(name):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and RARE_WORDS.search(node.func.attr):
            return True
    return False


def _loop_of_sync(ctx: FileContext, node: ast.AST, loops: set[ast.AST]) -> ast.AST | None:
    """The training loop that runs ``node`` on every step, or ``None`` (not in one, or only now and then)."""
    child = node
    for above in ctx.ancestors(node):
        if isinstance(above, BOUNDARIES):
            return None
        if isinstance(above, ast.Raise | ast.Assert | ast.ExceptHandler):
            return None
        if isinstance(above, ast.If | ast.IfExp) and child is not above.test and _rare_test(above.test):
            return None
        if isinstance(above, LOOPS) and above in loops:
            once = child in above.orelse or (isinstance(above, ast.For | ast.AsyncFor) and child is above.iter)
            return None if once else above
        child = above
    return None


def _surely_host(ctx: FileContext, expr: ast.expr) -> bool:
    """Whether ``expr`` is surely on the host: a batch item never moved, a tensor made without a device, ``.cpu()``."""
    if isinstance(expr, ast.Call):
        callee = expr.func
        if isinstance(callee, ast.Attribute) and callee.attr in ("cpu", "numpy"):
            return True
        if isinstance(callee, ast.Attribute) and callee.attr in ("detach", "clone", "float", "long"):
            return _surely_host(ctx, callee.value)
        full = ctx.call_name(expr) or ""
        if full in HOST_FACTORIES and "set_default_device" not in ctx.source:
            return not any(k.arg == "device" for k in expr.keywords)
        return False
    if isinstance(expr, ast.Subscript):
        return _surely_host(ctx, expr.value)
    if not isinstance(expr, ast.Name):
        return False
    kinds = ctx.kinds
    scope = kinds.scope_of(expr)
    entries = kinds.bindings.get(scope, {}).get(expr.id, [])
    use = (expr.lineno, expr.col_offset)
    earlier = [source for position, source in entries if position <= use]
    if not earlier:
        return False
    source = earlier[-1]
    while source[0] == "project":
        source = source[1]
    if source[0] == "iter":
        element = kinds.element(source[1])
        return element is not None and element.name == "batch"
    if source[0] == "expr":
        return _surely_host(ctx, source[1])
    return False


def _is_tensor(ctx: FileContext, expr: ast.expr) -> bool:
    kind = ctx.kind(expr)
    return kind is not None and kind.is_tensor and not _surely_host(ctx, expr)


def _syncs(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """``(node, what it does)`` for each host read of a tensor in the file."""
    for call in ctx.nodes(ast.Call):
        callee = call.func
        if isinstance(callee, ast.Attribute) and callee.attr in SYNC_METHODS and not call.args:
            receiver = callee.value
            inner = receiver.func if isinstance(receiver, ast.Call) else None
            if callee.attr != "cpu" and isinstance(inner, ast.Attribute) and inner.attr == "cpu":
                continue  # `t.cpu().numpy()`: the `.cpu()` is the read
            if _is_tensor(ctx, receiver):
                yield call, f"`{_shown(ctx, receiver)}.{callee.attr}()`"
        elif isinstance(callee, ast.Name) and callee.id in SYNC_BUILTINS and ctx.qualname(callee) == callee.id:
            for arg in call.args:
                if not isinstance(arg, ast.JoinedStr) and _is_tensor(ctx, arg):
                    yield call, f"`{callee.id}({_shown(ctx, arg)})`"
                    break
    for value in ctx.nodes(ast.FormattedValue):
        if _is_tensor(ctx, value.value):
            yield value, f"formatting `{_shown(ctx, value.value)}` into a string"


def _shown(ctx: FileContext, expr: ast.AST) -> str:
    text = dotted(expr) or ctx.segment(expr)
    return text if len(text) <= 40 else text[:37] + "..."


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each host read of a device tensor that runs on every step of a training loop."""
    loops = _training_loops(ctx)
    if not loops:
        return
    for node, what in _syncs(ctx):
        loop = _loop_of_sync(ctx, node, loops)
        if loop is None:
            continue
        yield Finding(
            node,
            message=f"{what} in a training loop (line {getattr(loop, 'lineno', 0)}) waits for the accelerator on "
            f"every step; fix: keep the value on the device (`running += loss.detach()`) and read it every N "
            f"steps (`if step % N == 0:`)",
        )


RULE = Rule(
    code="FRY101",
    name="host-sync-in-training-loop",
    message="a tensor is read on the host on every step of a training loop: the accelerator waits",
    fix_title="accumulate on the device (`loss.detach()`) and read the value every N steps",
    doc=__doc__ or "",
    check=check,
)
