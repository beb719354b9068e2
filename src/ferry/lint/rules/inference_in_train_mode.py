"""FRY010 inference-in-train-mode.

## What it does
Finds models used for prediction in the wrong autograd or module mode, in these shapes:

- weights loaded (``model.load_state_dict(...)``, or a whole model from ``torch.load``/``torch.jit.load``) and the
  model then called (``model(x)``, ``model.forward/inference/predict(x)``, a method of the model's class that runs
  its layers such as ``model.encode(src)``, or handed to a function of the file that only predicts with it: calls
  it, never switches its mode, does not train) with no ``model.eval()`` in between,
  in code that does not train (no ``backward()``/``optimizer.step()`` in the function) and never calls
  ``model.train()``;
- a model switched to ``eval()`` and then called in a loop whose outputs are kept (``outs.append(model(x))``)
  outside ``torch.no_grad()``/``torch.inference_mode()``, in a function that does not train;
- a function of the file that predicts under ``no_grad`` (or anywhere, when its name says it evaluates:
  ``validate``, ``eval_fn``, ``test``) with a model it never switches to ``eval()``, after a caller trained that model
  (``model.train()``, or a call of a function that does); also a method of a plain class of the file, such as a
  trainer's ``eval_fn`` predicting with ``self.model`` after ``self.train_fn()`` switched it to training;
- validation inside the training loop: the model trained in this pass of the loop (switched with ``train()`` at its
  top) and then predicts under ``no_grad`` with no ``eval()`` in between; or, in a loop or a training function
  (``def train(epoch): model.train(); ...; optimizer.step()``), predicts after the step with gradients on and
  nothing trained on its output (no backward or step after it), as pyGAT's validation forward would without its
  ``model.eval()``;
- a training loop over phases that calls ``model.train()`` in one branch (``if phase == "train":``) and never
  ``model.eval()``: in the other phase the model predicts with gradients off (``torch.no_grad()``,
  ``torch.set_grad_enabled(phase == "train")``) still in training mode.
- a model that a training function only runs under ``no_grad`` while it trains another one (a distillation
  teacher), which nothing in the file switches to ``eval()`` or trains (under any of the names the calls pass it
  by), built by something not proven mode-free.

Not reported: models whose layers behave the same in both modes (``nn.Linear``, a ``nn.Sequential`` of such layers,
a module class of this file built only from them), models handed to another call before the prediction (it may
switch the mode), models that come from ``from_pretrained`` (transformers and diffusers return them in eval mode),
loops under a grad-mode context or decorator (also ``torch.enable_grad()``: computing gradients is then meant),
functions called under ``torch.no_grad()`` in this file, and frozen models (``requires_grad_(False)``).

## Why is this bad
A freshly built module is in training mode: dropout drops activations at random and batch norm normalises with the
statistics of the current batch (and updates its running statistics), so predictions are noisy and depend on the
batch (3D-BoundingBox#29). And without ``no_grad``, every call records an autograd graph; keeping the outputs keeps
every graph, with all its activations, alive until the list goes: memory grows with each input until the process
runs out (SeqNet#13, IFRNet#30).

## Example
```python
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(32, 32), nn.Dropout(), nn.Linear(32, 4))
model.load_state_dict(torch.load("head.pt", map_location="cpu"))
pred = model(torch.randn(1, 32))  # FRY010


def embed(encoder, images):
    encoder.eval()
    feats = []
    for img in images:
        feats.append(encoder(img))  # FRY010
    return feats
```

## Use instead
```python
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(32, 32), nn.Dropout(), nn.Linear(32, 4))
model.load_state_dict(torch.load("head.pt", map_location="cpu"))
model.eval()
with torch.no_grad():
    pred = model(torch.randn(1, 32))


@torch.no_grad()
def embed(encoder, images):
    encoder.eval()
    feats = []
    for img in images:
        feats.append(encoder(img))
    return feats
```
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator

from ferry.lint.context import FileContext, dotted
from ferry.lint.model import Finding, Rule
from ferry.lint.rules._placement import local_functions
from ferry.lint.rules._placement_calls import feeds_submodule, file_method
from ferry.lint.rules._placement_values import bound_names
from ferry.lint.rules._training import (
    before,
    calls_in,
    exclusive,
    grad_mode_context,
    innermost_loop,
    move_chain_root,
    scope_node,
    walk_scope,
)
from ferry.lint.torch_api import (
    LEGACY_CONSTRUCTORS,
    LOADS,
    MODE_DEPENDENT_LAYERS,
    MODE_FREE_LAYERS,
    MOVES,
    NO_GRAD,
    PARALLEL_WRAPPERS,
)

#: Methods through which a model is used for prediction.
PREDICT_METHODS = frozenset({"forward", "inference", "predict"})

#: What ``torch.nn`` may build in a mode-free module: its mode-free layers, and parameters and buffers.
MODE_FREE = MODE_FREE_LAYERS | {"Parameter", "Buffer"}
CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})

#: Calls that show a function trains (computes gradients, steps an optimizer) or, for loaded weights, computes a loss.
GRADIENT_METHODS = frozenset({"backward", "manual_backward", "zero_grad"})
GRADIENT_FUNCTIONS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})
LOSS_WORDS = ("loss", "criterion")

#: Operations on an output that keep its autograd graph (what a kept value may be made of).
GRAPH_KEEPING = frozenset(
    """
    softmax log_softmax sigmoid tanh relu exp log squeeze unsqueeze view reshape flatten permute transpose
    contiguous float half double to cpu cuda clone mean sum norm
    """.split()
)
ACCUMULATORS = frozenset({"append", "extend", "insert"})


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    """Whether ``node`` lies within the source span of ``outer``."""
    start = (getattr(outer, "lineno", 0), getattr(outer, "col_offset", 0))
    end = (getattr(outer, "end_lineno", 0) or 0, getattr(outer, "end_col_offset", 0) or 0)
    here = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
    there = (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
    return start <= here and there <= end


def _switches(expr: ast.AST) -> bool:
    """Whether a chain of moves and mode switches (``model.to(device).train()``) switches the mode."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr in ("train", "eval"):
            return True
        expr = expr.func.value
    return False


def _chain_has_eval(expr: ast.AST) -> bool:
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "eval":
            return True
        expr = expr.func.value
    return False


#: ``torch.nn`` layers whose only mode-dependent part is a ``dropout`` argument that defaults to 0, with the number of
#: positional arguments before it (``nn.LSTM(input_size, hidden_size, num_layers)`` takes the rest by keyword).
DROPOUT_DEFAULT_ZERO = {"RNN": 3, "LSTM": 3, "GRU": 3, "MultiheadAttention": 2}


def _without_dropout(call: ast.Call, last: str) -> bool:
    """``nn.LSTM(8, 16, batch_first=True)``: a layer built without (or with a zero) ``dropout``."""
    if last not in DROPOUT_DEFAULT_ZERO or len(call.args) > DROPOUT_DEFAULT_ZERO[last]:
        return False
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return False
    dropout = next((k.value for k in call.keywords if k.arg == "dropout"), None)
    return dropout is None or (isinstance(dropout, ast.Constant) and dropout.value in (0, 0.0))


def _switches_mode(call: ast.Call, model: str) -> bool:
    callee = call.func
    return (
        isinstance(callee, ast.Attribute)
        and callee.attr in ("eval", "train")
        and dotted(move_chain_root(callee.value)) == model
    )


def _is_model_call(call: ast.Call, name: str, ctx: FileContext) -> bool:
    """Whether ``call`` runs the model ``name``.

    ``model(x)``, ``model.forward/inference/predict(x)``, or a method of the file's module classes that runs the
    model's layers on its input (``model.encode(src)`` where ``encode`` calls ``self.encoder(src)``).
    """
    callee = call.func
    if dotted(callee) == name:
        return True
    if not (isinstance(callee, ast.Attribute) and dotted(callee.value) == name):
        return False
    if callee.attr in PREDICT_METHODS:
        return True
    method = file_method(ctx, callee.attr)
    return method is not None and feeds_submodule(ctx, method)


def _frozen(scope: ast.AST) -> bool:
    """Whether the function freezes parameters (``requires_grad_(False)``, ``p.requires_grad = False``)."""
    for node in walk_scope(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets
        ):
            return True
    return False


def _graph_source(expr: ast.AST) -> ast.AST:
    """The call or name under graph-keeping indexing, attributes and methods (``out[0].softmax(1)`` -> ``out``)."""
    while True:
        if isinstance(expr, ast.Subscript | ast.Attribute):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in GRAPH_KEEPING:
            expr = expr.func.value
        else:
            return expr


class _Facts:
    """What both shapes ask about one file, indexed once."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.by_method: dict[str, list[ast.Call]] = defaultdict(list)
        for call in ctx.nodes(ast.Call):
            if isinstance(call.func, ast.Attribute):
                self.by_method[call.func.attr].append(call)
        self.assigns: dict[str, list[ast.Assign]] = defaultdict(list)
        for assign in ctx.nodes(ast.Assign):
            for target in assign.targets:
                name = dotted(target)
                if name:
                    self.assigns[name].append(assign)
        self._trains: dict[tuple[ast.AST, bool], bool] = {}
        self._calls: dict[ast.AST, list[ast.Call]] = {}

    def calls(self, scope: ast.AST) -> list[ast.Call]:
        """The calls of ``scope``'s own code, in source order."""
        if scope not in self._calls:
            self._calls[scope] = sorted(calls_in(scope), key=lambda c: (c.lineno, c.col_offset))
        return self._calls[scope]

    def trains(self, scope: ast.AST, *, with_losses: bool) -> bool:
        """Whether ``scope`` computes gradients or steps an optimizer (or, ``with_losses``, computes a loss)."""
        key = (scope, with_losses)
        if key not in self._trains:
            self._trains[key] = any(self._training_call(call, with_losses) for call in self.calls(scope))
        return self._trains[key]

    def _training_call(self, call: ast.Call, with_losses: bool) -> bool:
        callee = call.func
        if isinstance(callee, ast.Attribute):
            if callee.attr in GRADIENT_METHODS:
                return True
            if callee.attr == "step" and "optim" in (dotted(callee.value) or "").lower():
                return True
            if callee.attr == "grad" and self.ctx.call_name(call) in GRADIENT_FUNCTIONS:
                return True
        if with_losses:
            name = (dotted(callee) or "").rsplit(".", 1)[-1].lower()
            return any(word in name for word in LOSS_WORDS)
        return False

    def binding(self, name: str, at: ast.AST) -> tuple[bool, ast.expr | None]:
        """``(bound in at's own scope before at, the assigned expression if it is one)``.

        Through moves of the module onto its own name (``encoder = encoder.to(device)`` after ``encoder =
        EncoderCNN(...).eval()``: the expression is the one that built it, since ``Module.to`` returns the module).
        """
        kinds = self.ctx.kinds
        entries = kinds.bindings.get(kinds.scope_of(at), {}).get(name, [])
        use = (getattr(at, "lineno", 0), getattr(at, "col_offset", 0))
        earlier = [(position, source) for position, source in entries if position <= use]
        if not earlier:
            return False, None
        for _ in range(5):
            position, source = earlier[-1]
            value = source[1] if source[0] == "expr" else None
            same = isinstance(value, ast.Name) and value.id == name  # `decoder = decoder`: what it held before
            moved = isinstance(value, ast.Call) and dotted(move_chain_root(value)) == name
            if not (same or moved) or (isinstance(value, ast.Call) and _switches(value)):
                return True, value
            earlier = [(p, s) for p, s in earlier if p < position]  # what the moved name held before
            if not earlier:
                return True, value
        return True, value

    def rebound_within(self, name: str, outer: ast.AST, scope: ast.AST) -> list[ast.Assign]:
        """Assignments to ``name`` inside ``outer``'s span, in ``scope``'s own code."""
        return [a for a in self.assigns.get(name, []) if _inside(a, outer) and scope_node(self.ctx, a) is scope]

    # -- the model --------------------------------------------------------------------------------------------

    def known_eval(self, built: ast.AST) -> bool:
        """Whether the expression that built the model leaves it in eval mode.

        ``Net().eval()``, ``AutoModel.from_pretrained(...)`` (transformers and diffusers switch to eval), or a
        function of this file that calls ``eval()``.
        """
        if _chain_has_eval(built):
            return True
        root = move_chain_root(built)
        if not isinstance(root, ast.Call):
            return False
        if isinstance(root.func, ast.Attribute) and root.func.attr == "from_pretrained":
            return True
        if isinstance(root.func, ast.Name):
            defined = self.ctx.kinds.functions.get(root.func.id, [])
            if len(defined) == 1:
                return any(isinstance(c.func, ast.Attribute) and c.func.attr == "eval" for c in calls_in(defined[0]))
        return False

    def mode_free(self, expr: ast.AST, seen: frozenset[str] = frozenset()) -> bool:
        """Whether the module ``expr`` builds is proven to behave the same in training and eval mode."""
        expr = move_chain_root(expr)
        if not isinstance(expr, ast.Call):
            return False
        full = self.ctx.call_name(expr) or ""
        if full.startswith("torch.nn."):
            last = full.rsplit(".", 1)[-1]
            if last in MODE_FREE or _without_dropout(expr, last):
                return True
            if last in CONTAINERS:
                items: list[ast.AST] = []
                for arg in expr.args:
                    items.extend(arg.elts if isinstance(arg, ast.List | ast.Tuple) else [arg])
                return all(self.mode_free(item, seen) for item in items)
            return False
        kinds = self.ctx.kinds
        if full in kinds.classes and kinds.class_is_module(full) and full not in seen:
            return self._class_mode_free(kinds.classes[full], seen | {full})
        builder = self._builder(full)
        if builder is not None and full not in seen:
            return self._builder_mode_free(builder, expr, seen | {full})
        return False

    def _builder(self, name: str) -> ast.FunctionDef | None:
        """The top-level function of the file called ``name``, defined once."""
        found = [f for f in self.ctx.tree.body if isinstance(f, ast.FunctionDef) and f.name == name]
        return found[0] if len(found) == 1 and not found[0].decorator_list else None

    def _builder_mode_free(self, func: ast.FunctionDef, call: ast.Call, seen: frozenset[str]) -> bool:
        """Whether a layer-building function of the file builds only mode-free layers at this call.

        CSRNet's ``make_layers(cfg, batch_norm=False)``: the ``nn.BatchNorm2d`` is built only under ``if
        batch_norm:``, which is false unless the call passes something else. Every layer it builds must be
        mode-free, or sit under a test of a parameter the call leaves false (its default ``False``/``None``, or a
        literal false); containers (``nn.Sequential(*layers)``) hold only what it built.
        """
        args = func.args
        if args.vararg is not None or args.kwarg is not None or args.posonlyargs or args.kwonlyargs:
            return False
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return False
        names = [a.arg for a in args.args]
        defaults = dict(zip(names[len(names) - len(args.defaults) :], args.defaults, strict=True))
        given: dict[str, ast.expr] = {**defaults, **dict(zip(names, call.args, strict=False))}
        given.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
        falsy = {
            name for name, value in given.items() if isinstance(value, ast.Constant) and value.value in (False, None, 0)
        }
        ctx = self.ctx
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            full = ctx.call_name(node) or ""
            last = full.rsplit(".", 1)[-1]
            if full.startswith("torch.nn.") and last in CONTAINERS:
                continue
            if not (last[:1].isupper() or ((kind := ctx.kind(node)) is not None and kind.is_module)):
                continue
            if self.mode_free(node, seen):
                continue
            guarded = any(
                isinstance(outer, ast.If)
                and isinstance(outer.test, ast.Name)
                and outer.test.id in falsy
                and any(node in ast.walk(s) for s in outer.body)
                for outer in ctx.ancestors(node)
            )
            if not guarded:
                return False
        return True

    def _class_mode_free(self, cls: ast.ClassDef, seen: frozenset[str]) -> bool:
        """Whether a module class of this file builds only mode-free layers and never reads ``self.training``."""
        ctx = self.ctx
        for base in cls.bases:
            full = ctx.qualname(base) or ""
            if full in ctx.kinds.classes and (
                full in seen or not self._class_mode_free(ctx.kinds.classes[full], seen | {full})
            ):
                return False
        for node in ast.walk(cls):
            if isinstance(node, ast.Attribute) and node.attr == "training":
                return False
            if isinstance(node, ast.Call):
                last = (ctx.call_name(node) or "").rsplit(".", 1)[-1]
                if "dropout" in last.lower() or "batch_norm" in last.lower():
                    return False
                if last[:1].isupper() and not self.mode_free(node, seen):
                    return False  # a class this rule cannot vouch for (a BatchNorm, a timm layer, ...)
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and any((dotted(t) or "").startswith("self.") for t in node.targets)
            ):
                kind = ctx.kind(node.value)
                if not (self.mode_free(node.value, seen) or (kind is not None and not kind.is_module)):
                    return False  # `self.encoder = build_encoder()`: unknown
        return True

    def method_without_grad(self, call: ast.Call, model: str) -> bool:
        """Whether the method a call runs (``forward`` for a plain call), if defined in this file, turns grad off."""
        ctx = self.ctx
        kind = ctx.kind(call.func.value if isinstance(call.func, ast.Attribute) else call.func)
        method = call.func.attr if isinstance(call.func, ast.Attribute) and dotted(call.func) != model else "forward"
        for func in ctx.kinds.functions.get(method, []):
            cls = ctx.enclosing_class(func)
            if cls is None or (kind is not None and kind.cls is not None and kind.cls != cls.name):
                continue
            if func.body and grad_mode_context(ctx, func.body[0]):
                return True
            for node in walk_scope(func):
                if isinstance(node, ast.With | ast.AsyncWith) and node.body and grad_mode_context(ctx, node.body[0]):
                    return True
        return False

    def called_without_grad(self, scope: ast.AST) -> bool:
        """Whether the function ``scope`` is called under a grad-mode context somewhere in this file."""
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        for call in self.ctx.nodes(ast.Call):
            callee = call.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            if name == scope.name and grad_mode_context(self.ctx, call):
                return True
        return False


# -- shape 1: loaded weights, no eval() ------------------------------------------------------------------------------


def _loads(facts: _Facts) -> Iterator[tuple[ast.AST, str, ast.AST | None]]:
    """``(where the weights are loaded, the model's name, what built it)`` for each load of this file."""
    ctx = facts.ctx
    for call in facts.by_method.get("load_state_dict", []):
        assert isinstance(call.func, ast.Attribute)
        name = dotted(call.func.value)
        if name is None or not call.args:
            continue
        kind = ctx.kind(call.func.value)
        if kind is not None and not kind.is_module:
            continue
        bound, value = facts.binding(name, call)
        if bound and value is not None:
            yield call, name, value
    for assign in ctx.nodes(ast.Assign):
        if len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name):
            loaded = _built_loaded(ctx, assign.value)
            if loaded is not None:  # `model = InceptionV3([block_idx]).to(device)`, its weights loaded as it is built
                yield assign, assign.targets[0].id, loaded
                continue
        if len(assign.targets) == 1 and isinstance(assign.value, ast.Call | ast.Subscript):
            name = dotted(assign.targets[0])
            if name is not None and ctx.call_name(_unpickled(assign.value)) in LOADS:
                yield assign, name, None
                if any(_switches_mode(c, name) for c in facts.calls(scope_node(ctx, assign))):
                    continue  # `srgan_generator.eval()` before `model = srgan_generator`
                for alias in _aliases_after(ctx, assign, name):  # `model = srgan_generator`
                    yield alias, dotted(alias.targets[0]) or name, None


def _built_loaded(ctx: FileContext, value: ast.expr) -> ast.Call | None:
    """The construction under ``InceptionV3([block]).to(device)`` when the class loads its weights as it is built."""
    built = _unpickled(value)
    if not isinstance(built, ast.Call):
        return None
    name = dotted(built.func)
    if name is None or name not in ctx.kinds.classes or not ctx.kinds.class_is_module(name):
        return None
    return built if _constructor_loads(ctx, name) else None


def _constructor_loads(ctx: FileContext, name: str, depth: int = 0) -> bool:
    """Whether building the module class ``name`` of the file loads weights into it.

    Its ``__init__`` (or a function of the file, or another module class of the file, that it calls; three levels
    deep) calls ``load_state_dict(...)`` or ``torch.load``: pytorch-fid's ``InceptionV3`` builds
    ``fid_inception_v3()``, which loads the FID weights. The model is then pretrained, not freshly initialised.
    """
    cls = ctx.kinds.classes.get(name)
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None) if cls else None
    return init is not None and _body_loads(ctx, init, depth, {name})


def _body_loads(ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef, depth: int, seen: set[str]) -> bool:
    functions = local_functions(ctx)
    for call in walk_scope(func):
        if not isinstance(call, ast.Call):
            continue
        if isinstance(call.func, ast.Attribute) and call.func.attr == "load_state_dict" and call.args:
            return True
        if ctx.call_name(call) in LOADS:
            return True
        callee = dotted(call.func)
        if depth >= 3 or callee is None or callee in seen:
            continue
        if callee in functions and _body_loads(ctx, functions[callee], depth + 1, seen | {callee}):
            return True
        if callee in ctx.kinds.classes and ctx.kinds.class_is_module(callee):
            cls = ctx.kinds.classes[callee]
            init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
            if init is not None and _body_loads(ctx, init, depth + 1, seen | {callee}):
                return True
    return False


def _unpickled(value: ast.expr) -> ast.expr:
    """The ``torch.load(...)`` call under ``torch.load(path)["generator"].to(device)``: items and moves peeled off."""
    for _ in range(6):
        if isinstance(value, ast.Subscript):
            value = value.value
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in (*MOVES, "float", "half", "double", "bfloat16")
        ):
            value = value.func.value
        else:
            break
    return value


def _aliases_after(ctx: FileContext, assign: ast.Assign, name: str) -> list[ast.Assign]:
    """``alias = name`` statements of the same scope below ``assign``."""
    scope = scope_node(ctx, assign)
    return [
        other
        for other in ctx.nodes(ast.Assign)
        if len(other.targets) == 1
        and isinstance(other.targets[0], ast.Name)
        and isinstance(other.value, ast.Name)
        and other.value.id == name
        and scope_node(ctx, other) is scope
        and before(assign, other)
    ]


def _loaded_without_eval(facts: _Facts) -> Iterator[Finding]:
    ctx = facts.ctx
    for load, name, built in _loads(facts):
        if built is not None and (facts.known_eval(built) or facts.mode_free(built)):
            continue
        scope = scope_node(ctx, load)
        if facts.trains(scope, with_losses=True):
            continue
        calls = facts.calls(scope)
        if any(_switches_mode(c, name) for c in calls):
            continue  # eval() or train() in the function: the mode is taken care of
        if any(before(c, load) and _switched_by_callee(facts, c, name) for c in calls):
            continue  # `train(model=model, ...)` switched it before the load: it keeps that mode
        for call in calls:
            if not before(load, call) or exclusive(ctx, load, call):
                continue
            if ctx.call_name(call) in PARALLEL_WRAPPERS:
                continue  # `net = torch.nn.DataParallel(net, device_ids=devices)` wraps it, in the mode it is in
            if any(dotted(arg) == name for arg in [*call.args, *(k.value for k in call.keywords)]):
                helper = _predicting_helper(facts, call, name)
                if helper is not None:
                    yield Finding(
                        call,
                        message=f"`{name}` is handed to `{helper}` for prediction after its weights are loaded (line "
                        f"{getattr(load, 'lineno', 0)}), and neither switches it to eval mode: dropout stays active "
                        f"and batch norm uses batch statistics; fix: call `{name}.eval()` first",
                    )
                break  # handed to another function, which may switch the mode
            inner = _closure_prediction(facts, call, name, scope)
            if inner is not None:  # `rst = eval_video((i, data, label))`, which runs `net(input_var)`
                call = inner
            elif not _is_model_call(call, name, ctx):
                continue
            later = [a for a in facts.assigns.get(name, []) if a is not load and before(load, a) and before(a, call)]
            if any(scope_node(ctx, a) is scope and not _same_model(ctx, a, name) for a in later):
                break  # rebound in between
            what = "its weights are loaded" if built is not None else "it is unpickled with `torch.load`"
            yield Finding(
                call,
                message=f"`{name}` is called for prediction after {what} (line {getattr(load, 'lineno', 0)}) but is "
                f"not switched to eval mode: dropout stays active and batch norm uses batch statistics; fix: call "
                f"`{name}.eval()` first",
            )
            break


def _closure_prediction(facts: _Facts, call: ast.Call, name: str, scope: ast.AST) -> ast.Call | None:
    """The model call inside a function of ``scope`` that ``call`` runs and that reads the model ``name`` freely.

    TSN's test script defines ``def eval_video(video_data): ... rst = net(input_var)`` beside the loaded ``net`` and
    calls it for each video. It must not bind ``name``, switch its mode, hand it on or train.
    """
    if not isinstance(call.func, ast.Name):
        return None
    home = scope if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) else None
    func = next(
        (
            f
            for f in facts.ctx.nodes(ast.FunctionDef)
            if f.name == call.func.id
            and facts.ctx.enclosing_function(f) is home
            and (home is None or _inside(f, scope))
        ),
        None,
    )
    if func is None or name in bound_names(func) or facts.trains(func, with_losses=True):
        return None
    found = None
    for inner in (n for n in ast.walk(func) if isinstance(n, ast.Call)):
        if _switches_mode(inner, name) or any(
            dotted(a) == name for a in [*inner.args, *(k.value for k in inner.keywords)]
        ):
            return None
        if found is None and _is_model_call(inner, name, facts.ctx):
            found = inner
    return found


def _same_model(ctx: FileContext, assign: ast.AST, name: str) -> bool:
    """Whether ``assign`` rebinds ``name`` to the same model, moved or wrapped: its mode is the model's.

    TSN's test script: ``net = net.cuda(devices[0])``, then ``net = torch.nn.DataParallel(net, device_ids=devices)``.
    """
    value = getattr(assign, "value", None)
    if not isinstance(value, ast.Call):
        return False
    if dotted(move_chain_root(value)) == name:
        return True
    return ctx.call_name(value) in PARALLEL_WRAPPERS and bool(value.args) and dotted(value.args[0]) == name


def _switched_by_callee(facts: _Facts, call: ast.Call, name: str) -> bool:
    """Whether ``call`` hands ``name`` to a function of the file that leaves that parameter in eval mode.

    Its last switch is ``eval()`` (ProtoNet's ``train``, which validates at the end of each epoch).
    """
    func = local_functions(facts.ctx).get(call.func.id) if isinstance(call.func, ast.Name) else None
    if func is None:
        return False
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]
    return any(
        (given := _argument(call, func, param)) is not None
        and dotted(given) == name
        and any(_switches_mode(c, param) for c in facts.calls(func))
        and not _trains_parameter(facts, func, param)
        for param in params
    )


def _predicting_helper(facts: _Facts, call: ast.Call, name: str, depth: int = 0) -> str | None:
    """The name of the file's function ``call`` runs, when it only predicts with the model passed as ``name``.

    It calls that parameter (``model(x)``, ``model.predict(x)``), never switches its mode, hands it to no other call
    (but to such functions of the file: pytorch-fid's ``compute_statistics_of_path`` ->
    ``calculate_activation_statistics`` -> ``get_activations``, three levels deep) and does not train.
    """
    if not isinstance(call.func, ast.Name) or depth > 3:
        return None
    func = local_functions(facts.ctx).get(call.func.id)
    if func is None:
        return None
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    param = next((params[i] for i, arg in enumerate(call.args[: len(params)]) if dotted(arg) == name), None)
    if param is None:
        param = next((k.arg for k in call.keywords if dotted(k.value) == name and k.arg in params), None)
    if param is None:
        return None
    if facts.trains(func, with_losses=False) and not _gradients_only(facts, func, param, name):
        return None  # a loss alone (`loss, acc = loss_fn(output, y)` in a test function) is no training
    predicts = False
    for inner in facts.calls(func):
        if _switches_mode(inner, param):
            return None
        if any(dotted(a) == param for a in [*inner.args, *(k.value for k in inner.keywords)]):
            if _predicting_helper(facts, inner, param, depth + 1) is None:
                return None
            predicts = True
            continue
        predicts = predicts or _is_model_call(inner, param, facts.ctx)
    return func.name if predicts else None


def _gradients_only(facts: _Facts, func: ast.FunctionDef | ast.AsyncFunctionDef, param: str, model: str) -> bool:
    """Whether ``func`` computes the gradient of its input rather than training ``model``.

    An adversarial attack (FGSM) or a saliency map sets ``x.requires_grad`` (or reads ``x.grad``) on a tensor that
    is not the model's, and calls ``loss.backward()``; it steps no optimizer (no ``.step()`` in it, and no optimizer
    of the file is built over ``model``'s parameters), so the weights do not change: the model still predicts and
    should be in eval mode. ``param``: the parameter that takes the model; ``model``: its name at the call.
    """
    reads_input_gradient = False
    for node in walk_scope(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "step":
                return False
            if node.func.attr == "requires_grad_" and dotted(node.func.value) not in (param, None):
                reads_input_gradient = True
        if isinstance(node, ast.Attribute) and node.attr in ("grad", "requires_grad"):
            root = (dotted(node.value) or "").split(".")[0]
            reads_input_gradient = reads_input_gradient or (root != "" and root != param)
    if not reads_input_gradient:
        return False
    for call in facts.ctx.nodes(ast.Call):
        full = facts.ctx.call_name(call) or ""
        optimizer = full.startswith("torch.optim.") and full.rsplit(".", 1)[-1][:1].isupper()
        if optimizer and any(dotted(node) == model for arg in call.args[:1] for node in ast.walk(arg)):
            return False
    return True


# -- shape 2: eval() but no no_grad, outputs kept --------------------------------------------------------------------


def _eval_sites(facts: _Facts) -> dict[str, list[ast.AST]]:
    """Model name -> where it was switched to eval: ``model.eval()`` calls and ``model = Net().eval()`` bindings."""
    ctx = facts.ctx
    sites: dict[str, list[ast.AST]] = defaultdict(list)
    for call in facts.by_method.get("eval", []):
        assert isinstance(call.func, ast.Attribute)
        name = dotted(move_chain_root(call.func.value))
        if name:
            sites[name].append(call)
        top: ast.AST = call
        parent = ctx.parent(top)
        while (isinstance(parent, ast.Attribute) and parent.value is top) or (
            isinstance(parent, ast.Call) and parent.func is top
        ):
            top = parent
            parent = ctx.parent(top)
        if isinstance(parent, ast.Assign) and parent.value is top:
            for target in parent.targets:
                bound = dotted(target)
                if bound:
                    sites[bound].append(parent)
    return sites


def _kept_call(facts: _Facts, kept: ast.AST, loop: ast.AST, scope: ast.AST) -> ast.Call | None:
    """The call whose output ``kept`` is: directly, or through a name bound in the loop body before it."""
    source = _graph_source(kept)
    if isinstance(source, ast.Call):
        return source
    if not isinstance(source, ast.Name):
        return None
    bound = [a for a in facts.rebound_within(source.id, loop, scope) if before(a, kept)]
    if not bound or len(bound[-1].targets) != 1:
        return None
    value = _graph_source(bound[-1].value)
    return value if isinstance(value, ast.Call) else None


def _grad_off_globally(ctx: FileContext) -> bool:
    """``torch.set_grad_enabled(False)`` as a statement somewhere: grad mode is not known after it."""
    for stmt in ctx.nodes(ast.Expr):
        if isinstance(stmt.value, ast.Call) and ctx.call_name(stmt.value) in (
            "torch.set_grad_enabled",
            "torch.autograd.set_grad_enabled",
        ):
            return True
    return False


def _kept_outputs(facts: _Facts) -> Iterator[tuple[ast.Call, ast.AST, str]]:
    """``(the call whose output is kept, the loop, where it is kept)``: ``outs.append(...)`` in a loop, ``[...]``."""
    ctx = facts.ctx
    for method in sorted(ACCUMULATORS):
        for call in facts.by_method.get(method, []):
            assert isinstance(call.func, ast.Attribute)
            holder = dotted(call.func.value)
            loop = innermost_loop(ctx, call) if call.args and holder else None
            if loop is None or holder is None:
                continue
            scope = scope_node(ctx, loop)
            produced = _kept_call(facts, call.args[-1], loop, scope)
            if produced is not None and not facts.rebound_within(holder, loop, scope):
                yield produced, loop, f"`{holder}`"  # (a list made anew in each iteration keeps nothing)
    for comp in ctx.nodes(ast.ListComp):
        element = _graph_source(comp.elt)
        if isinstance(element, ast.Call):
            parent = ctx.parent(comp)
            target = dotted(parent.targets[0]) if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None
            yield element, comp, f"`{target}`" if target else "a list"


def _kept_without_grad_off(facts: _Facts) -> Iterator[Finding]:
    ctx = facts.ctx
    sites = _eval_sites(facts)
    if not sites or _grad_off_globally(ctx):
        return
    seen: set[ast.AST] = set()
    for produced, loop, holder in _kept_outputs(facts):
        callee = produced.func
        model = dotted(callee.value if isinstance(callee, ast.Attribute) and callee.attr in PREDICT_METHODS else callee)
        if model is None or model not in sites or produced in seen or not _is_model_call(produced, model, ctx):
            continue
        scope = scope_node(ctx, loop)
        if scope_node(ctx, produced) is not scope or grad_mode_context(ctx, produced):
            continue
        if not any(
            before(site, loop) and scope_node(ctx, site) is scope and not exclusive(ctx, site, loop)
            for site in sites[model]
        ):
            continue  # not switched to eval in this function: not known to be inference
        if facts.trains(scope, with_losses=False) or _frozen(scope):
            continue
        if facts.called_without_grad(scope) or facts.method_without_grad(produced, model):
            continue
        seen.add(produced)
        yield Finding(
            produced,
            message=f"`{model}` runs in a loop without `torch.no_grad()` and its outputs are kept in {holder}: each "
            f"output holds its autograd graph, so memory grows with every input; fix: run the loop under "
            f"`with torch.inference_mode():` (or `torch.no_grad()`), or keep `.detach()` ed outputs",
        )


# -- shape 3: evaluated under no_grad after training, no eval() -------------------------------------------------------


def _without_grad(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` runs under ``with torch.no_grad():``/``inference_mode()`` or in a function decorated so."""
    for above in ctx.ancestors(node):
        if isinstance(above, ast.With | ast.AsyncWith):
            for item in above.items:
                expr = item.context_expr
                if ctx.qualname(expr.func if isinstance(expr, ast.Call) else expr) in NO_GRAD:
                    return True
        if isinstance(above, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in above.decorator_list:
                if ctx.qualname(decorator.func if isinstance(decorator, ast.Call) else decorator) in NO_GRAD:
                    return True
    return False


def _trains_parameter(facts: _Facts, func: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> bool:
    """Whether the local function ``func`` leaves its parameter ``param`` in training mode (``param.train()``).

    The last switch written in ``func`` decides: a ``train`` function whose epochs end with ``model.eval()`` and a
    validation pass returns the model in evaluation mode.
    """
    switches = sorted(
        (c for c in facts.calls(func) if _switches_mode(c, param)),
        key=lambda c: (c.lineno, c.col_offset),
    )
    if not switches:
        return False
    last = switches[-1]
    assert isinstance(last.func, ast.Attribute)
    off = bool(last.args) and isinstance(last.args[0], ast.Constant) and not last.args[0].value
    return last.func.attr == "train" and not off


def _argument(call: ast.Call, func: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> ast.expr | None:
    names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    if param in names and names.index(param) < len(call.args):
        return call.args[names.index(param)]
    return next((k.value for k in call.keywords if k.arg == param), None)


def _mode_before(
    facts: _Facts, site: ast.Call, model: str, local: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
) -> tuple[str, ast.AST] | None:
    """The last thing the caller did to ``model``'s mode before ``site``.

    ``("train", call)`` for ``model.train()`` or a call of a local function that trains it, ``("eval", call)``;
    ``None`` when not known. An ``eval()`` in a branch that ``site`` is not in (``if args.inference_only:
    model.eval()``) may not have run: the switch before it decides, as on the path that skips the branch.
    """
    scope = scope_node(facts.ctx, site)
    for call in reversed([c for c in facts.calls(scope) if before(c, site)]):
        if _switches_mode(call, model):
            assert isinstance(call.func, ast.Attribute)
            if call.func.attr == "eval" and _in_a_branch_without(facts.ctx, call, site):
                continue
            return call.func.attr, call
        if isinstance(call.func, ast.Name) and call.func.id in local:
            callee = local[call.func.id]
            if "." not in model and model not in _own_names(callee):  # a global the callee uses itself
                if _trains_parameter(facts, callee, model):
                    return "train", call
                if any(_switches_mode(c, model) for c in facts.calls(callee)):
                    return None
            for name in [a.arg for a in [*callee.args.posonlyargs, *callee.args.args, *callee.args.kwonlyargs]]:
                given = _argument(call, callee, name)
                if given is not None and dotted(given) == model:
                    if _trains_parameter(facts, callee, name):
                        return "train", call
                    if any(_switches_mode(c, name) for c in facts.calls(callee)):
                        return None  # it chose some mode
        elif any(dotted(a) == model for a in [*call.args, *(k.value for k in call.keywords)]):
            return None  # handed to code that may switch the mode
    return None


def _mode_reaching(
    facts: _Facts,
    site: ast.Call,
    model: str,
    local: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    depth: int = 0,
) -> tuple[str, ast.AST] | None:
    """:func:`_mode_before`, and through callers that only pass the model on.

    RetinaNet's training loop calls ``evaluate(dataset_val, retinanet)``, whose ``retinanet`` parameter goes
    straight to ``_get_detections``: when the function around ``site`` takes ``model`` as a parameter, never
    switches its mode and does not train, the mode is what its callers left (``("train", ...)`` when one of them
    trained it last; three levels deep).
    """
    mode = _mode_before(facts, site, model, local)
    if mode is not None or depth >= 3 or "." in model:
        return mode
    func = facts.ctx.enclosing_function(site)
    if func is None or local.get(func.name) is not func or facts.trains(func, with_losses=False):
        return None
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]
    if model not in params or model in _own_names(func) - set(params):
        return None
    if any(_switches_mode(c, model) for c in facts.calls(func) if before(c, site)):
        return None
    for outer in facts.ctx.nodes(ast.Call):
        if not (isinstance(outer.func, ast.Name) and outer.func.id == func.name):
            continue
        given = _argument(outer, func, model)
        name = dotted(given) if given is not None else None
        found = _mode_reaching(facts, outer, name, local, depth + 1) if name else None
        if found is not None and found[0] == "train":
            return found
    return None


def _in_a_branch_without(ctx: FileContext, node: ast.AST, site: ast.AST) -> bool:
    """Whether ``node`` lies in a branch of an ``if`` that does not hold ``site`` (it may not run before it)."""
    return any(isinstance(a, ast.If) and not _inside(site, a) for a in ctx.ancestors(node))


def _own_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The function's parameters and the names it binds (which hide globals)."""
    args = func.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    for node in walk_scope(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


#: Words of a function's name that say it evaluates or predicts (``validate``, ``eval_fn``, ``test_epoch``; ``vali``
#: in the time-series forecasting repositories).
EVALUATION_WORDS = frozenset(
    """
    eval evaluate evaluation valid vali validate validation val test testing predict prediction infer inference
    """.split()
)


def _evaluates(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the function's name says it evaluates (its model calls are predictions, with or without no_grad)."""
    return bool(set(re.split(r"[^a-z]+", func.name.lower())) & EVALUATION_WORDS)


def _only_called_to_evaluate(facts: _Facts, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether every call of ``func`` is in a function whose name says it evaluates, and that does not train.

    arcface-pytorch's ``get_featurs(model, test_list)``: only ``lfw_test`` calls it, so its model calls are that
    test's predictions. Called by name, at least once, and never handed on as a value. SR-GNN's ``train_test``,
    which trains and then tests, is not such a caller.
    """
    ctx = facts.ctx
    uses = [n for n in ctx.nodes(ast.Name) if n.id == func.name and isinstance(n.ctx, ast.Load)]
    if not uses:
        return False
    for use in uses:
        above = ctx.parent(use)
        if not (isinstance(above, ast.Call) and above.func is use):
            return False
        caller = ctx.enclosing_function(use)
        if not isinstance(caller, ast.FunctionDef | ast.AsyncFunctionDef) or not _evaluates(caller):
            return False
        if facts.trains(caller, with_losses=False):
            return False
    return True


def _predictions(facts: _Facts, func: ast.FunctionDef | ast.AsyncFunctionDef, model: str) -> list[ast.Call]:
    """The calls of ``model`` in ``func`` that predict: under ``no_grad``, or anywhere in a function named so.

    Empty when ``func`` switches ``model``'s mode itself before predicting (or in a loop around a prediction), or
    hands it to another call before predicting. A switch after the predictions (UNet's ``evaluate`` ending with
    ``net.train()`` for the training that follows) leaves them in the mode the caller left.
    """
    ctx = facts.ctx
    calls = facts.calls(func)
    named = _evaluates(func) or _only_called_to_evaluate(facts, func)
    found = [c for c in calls if _is_model_call(c, model, ctx) and (named or _without_grad(ctx, c))]
    switches = [c for c in calls if _switches_mode(c, model)]
    if switches and (not found or any(_may_run_before(ctx, c, found[0]) for c in switches)):
        return []
    if found and any(
        before(c, found[0]) and any(dotted(a) == model for a in [*c.args, *(k.value for k in c.keywords)])
        for c in calls
    ):
        return []  # handed to another function first, which may switch the mode
    return found


def _may_run_before(ctx: FileContext, call: ast.AST, target: ast.AST) -> bool:
    """Whether ``call`` may run before ``target``: above it, or in a loop around both (the next pass)."""
    if before(call, target):
        return True
    loop = innermost_loop(ctx, target)
    while loop is not None:
        if _inside(call, loop):
            return True
        loop = innermost_loop(ctx, loop)
    return False


def _evaluation_message(
    ctx: FileContext, func: ast.AST, model: str, first: ast.Call, site: ast.Call, switch: ast.AST
) -> str:
    name = getattr(func, "name", "the function")
    how = "under `torch.no_grad()` " if _without_grad(ctx, first) else ""
    return (
        f"`{model}` is called {how}for evaluation in training mode: before `{name}(...)` (line {site.lineno}) it "
        f"was last switched to training (line {getattr(switch, 'lineno', 0)}), and `{name}` never calls "
        f"`{model}.eval()`; dropout stays active and batch norm uses batch statistics; fix: call `{model}.eval()` at "
        f"the start of `{name}` (and `{model}.train()` before training again)"
    )


def _evaluated_after_training(facts: _Facts) -> Iterator[Finding]:
    """Evaluation in training mode, after training, in a function of the file.

    The function predicts (under ``no_grad``, or anywhere when its name says it evaluates: ``validate``,
    ``eval_fn``) with a model it is given (or a global one) and never switches its mode, and a caller last switched
    that model to training mode (``model.train()``, or a call of a function that does).
    """
    ctx = facts.ctx
    local = local_functions(ctx)
    for func in local.values():
        if facts.trains(func, with_losses=False):
            continue
        calls = facts.calls(func)
        params = [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]
        own = _own_names(func)
        used = {c.func.id for c in calls if isinstance(c.func, ast.Name) and c.func.id not in own}
        for param in [*params, *sorted(used - set(local) - set(ctx.kinds.classes))]:
            predictions = _predictions(facts, func, param)
            if not predictions:
                continue
            sites = [n for n in ctx.nodes(ast.Call) if isinstance(n.func, ast.Name) and n.func.id == func.name]
            if param not in params and _switched_as_parameter(facts, func, param, sites):
                continue  # `def val(net, ...): net.eval(); preds = crnn(image)` called as `val(crnn, ...)`
            modes = []
            for site in sites:
                given = _argument(site, func, param) if param in params else ast.Name(id=param, ctx=ast.Load())
                name = dotted(given) if given is not None else None
                mode = _mode_reaching(facts, site, name, local) if name else None
                _, built = facts.binding(name, site) if name else (False, None)
                if built is not None and facts.mode_free(built):
                    break
                if mode is not None and mode[0] == "train":  # one caller that trains it first is enough
                    modes.append((site, mode[1]))
            else:
                if modes:
                    site, switch = modes[0]
                    message = _evaluation_message(ctx, func, param, predictions[0], site, switch)
                    yield Finding(predictions[0], message=message)
    yield from _evaluated_after_training_by_methods(facts)


def _switched_as_parameter(
    facts: _Facts, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, sites: list[ast.Call]
) -> bool:
    """Whether ``func`` switches the mode of a parameter that one of its callers fills with the global ``name``."""
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]
    switched = [p for p in params if any(_switches_mode(c, p) for c in facts.calls(func))]
    given = [_argument(site, func, p) for site in sites for p in switched]
    return any(g is not None and dotted(g) == name for g in given)


def _plain_class(ctx: FileContext, cls: ast.ClassDef) -> bool:
    """A class of the file that is no ``nn.Module`` and has no base from elsewhere (a trainer of the script's own).

    Lightning modules and subclasses of other libraries' trainers are left alone: their library switches the mode.
    """
    if ctx.kinds.class_is_module(cls.name):
        return False
    if any(
        k.arg != "metaclass" or (ctx.qualname(k.value) or "") not in ("abc.ABCMeta", "ABCMeta") for k in cls.keywords
    ):
        return False  # `metaclass=ABCMeta` (BERT4Rec-VAE's `AbstractTrainer`) is still a class of the script's own
    for base in cls.bases:
        name = dotted(base)
        if name == "object" or ctx.qualname(base) == "abc.ABC":
            continue
        if name is None or name not in ctx.kinds.classes or not _plain_class(ctx, ctx.kinds.classes[name]):
            return False
    return True


def _evaluated_after_training_by_methods(facts: _Facts) -> Iterator[Finding]:
    """The same in a plain class of the file: ``eval_fn`` predicts with ``self.model`` after ``train_fn`` trained it.

    Its callers are the class's other methods (``self.train_fn(); self.eval_fn()``); a method that calls
    ``self.model.train()`` trains it.
    """
    ctx = facts.ctx
    for cls in list(ctx.kinds.classes.values()):
        if not _plain_class(ctx, cls):
            continue
        methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
        subclasses = [c for c in ctx.kinds.classes.values() if c is not cls and cls in ctx.kinds.class_chain(c)]
        if len(subclasses) == 1:  # an abstract base: `self.calculate_metrics(batch)` is its one subclass's
            for m in subclasses[0].body:
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name not in methods:
                    methods[m.name] = m
        for method in [m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]:
            if facts.trains(method, with_losses=False) or not method.args.args:
                continue
            me = method.args.args[0].arg
            models = sorted(
                {
                    name
                    for c in facts.calls(method)
                    for name in [dotted(c.func), dotted(c.func.value) if isinstance(c.func, ast.Attribute) else None]
                    if name is not None and name.startswith(f"{me}.") and name.count(".") == 1
                }
            )
            models += sorted(_models_of_helpers(facts, method, methods) - set(models))
            for model in models:
                predictions = _predictions(facts, method, model) or _helper_predictions(facts, method, methods, model)
                if not predictions:
                    continue
                found = _trained_before_method_call(
                    facts, cls, methods, method.name, model.split(".", 1)[1], outside=_evaluates(method)
                )
                if found is not None:
                    site, switch = found
                    message = _evaluation_message(ctx, method, model, predictions[0], site, switch)
                    yield Finding(predictions[0], message=message)
                    continue
                built = _built_and_never_switched(facts, cls, method, model.split(".", 1)[1], predictions[0])
                if built is not None:
                    yield Finding(
                        predictions[0],
                        message=f"`{model}` predicts in training mode: it was built at line {built.lineno} (a new "
                        "module is in training mode) with dropout or batch norm, and nothing switches it to eval "
                        f"mode before this call; fix: call `{model}.eval()` first (and `{model}.train()` where "
                        "training resumes)",
                    )


def _built_and_never_switched(
    facts: _Facts,
    cls: ast.ClassDef,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    attr: str,
    prediction: ast.Call,
) -> ast.Assign | None:
    """The ``__init__`` statement that builds ``self.<attr>``, when nothing switches its mode before ``prediction``.

    TS2Vec keeps ``self.net = torch.optim.swa_utils.AveragedModel(self._net)`` and its ``encode`` predicts with it
    under ``no_grad``: a new module is in training mode, so its dropout is active unless something calls
    ``self.net.eval()`` first. Only for one binding, in ``__init__``, of a module that holds dropout or batch norm
    (a layer of ``torch.nn``, a class of the file that builds one, or an ``AveragedModel`` of such a module kept in
    the same ``__init__``), never switched (``eval``/``train``/``requires_grad_``) or handed to a call anywhere in
    the file, except after the prediction in the same method (``self.net.train(org_training)`` at its end).
    """
    ctx = facts.ctx
    stores = [
        n
        for n in ast.walk(cls)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Attribute) and dotted(t.value) == "self" and t.attr == attr for t in n.targets)
    ]
    if len(stores) != 1 or not isinstance(stores[0].value, ast.Call):
        return None
    init = ctx.enclosing_function(stores[0])
    if init is None or init.name != "__init__" or init not in cls.body:
        return None
    value = stores[0].value
    if facts.known_eval(value) or not _holds_mode_layers(facts, value, init):
        return None
    for call in ctx.nodes(ast.Call):
        func = call.func
        switch = isinstance(func, ast.Attribute) and func.attr in ("eval", "train", "requires_grad_")
        if (
            switch
            and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == attr
        ):
            if ctx.enclosing_function(call) is method and before(prediction, call):
                continue  # switched back after predicting
            return None
        if any(
            isinstance(a, ast.Attribute) and a.attr == attr for a in [*call.args, *(k.value for k in call.keywords)]
        ):
            return None  # handed on: the callee may switch its mode
    return stores[0]


def _holds_mode_layers(facts: _Facts, value: ast.expr, init: ast.AST, depth: int = 0) -> bool:
    """Whether the module ``value`` builds holds dropout or batch norm, as far as this file shows (see above)."""
    ctx = facts.ctx
    root = move_chain_root(value)
    if not isinstance(root, ast.Call) or depth > 4:
        return False
    full = ctx.call_name(root) or ""
    last = full.rsplit(".", 1)[-1]
    if full.startswith("torch.nn.") and last in MODE_DEPENDENT_LAYERS:
        return True
    if full.startswith("torch.nn.") and last in CONTAINERS:
        items = [e for a in root.args for e in (a.elts if isinstance(a, ast.List | ast.Tuple) else [a])]
        return any(_holds_mode_layers(facts, item, init, depth + 1) for item in items)
    if full == "torch.optim.swa_utils.AveragedModel" and root.args:
        kept = root.args[0]  # `AveragedModel(self._net)`: the module `__init__` built as `self._net`
        if isinstance(kept, ast.Attribute) and dotted(kept.value) == "self":
            built = [
                n.value
                for n in ast.walk(init)
                if isinstance(n, ast.Assign)
                and any(
                    isinstance(t, ast.Attribute) and dotted(t.value) == "self" and t.attr == kept.attr
                    for t in n.targets
                )
            ]
            return len(built) == 1 and _holds_mode_layers(facts, built[0], init, depth + 1)
        return _holds_mode_layers(facts, kept, init, depth + 1)
    cls = ctx.kinds.classes.get(full)
    if cls is None or not ctx.kinds.class_is_module(full):
        return False
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and node is not root:
            name = ctx.call_name(node) or ""
            if name.startswith("torch.nn.") and name.rsplit(".", 1)[-1] in MODE_DEPENDENT_LAYERS:
                return True
            if name in ctx.kinds.classes and name != full and _holds_mode_layers(facts, node, init, depth + 1):
                return True
    return False


def _own_helpers(
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    calls: list[ast.Call],
) -> Iterator[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The calls in ``method`` of another method of its class through ``self`` (``self._process_one_batch(...)``)."""
    me = method.args.args[0].arg
    for call in calls:
        func = call.func
        if isinstance(func, ast.Attribute) and dotted(func.value) == me:
            helper = methods.get(func.attr)
            if helper is not None and helper is not method and helper.args.args and not helper.decorator_list:
                yield call, helper


def _models_of_helpers(
    facts: _Facts,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
) -> set[str]:
    """The ``self.<attr>`` called by the helper methods that ``method`` calls, as ``method`` names them.

    ``self.model`` for a ``vali`` whose helper ``_process_one_batch`` calls ``self.model(batch_x, ...)``.
    """
    me = method.args.args[0].arg
    found: set[str] = set()
    for _, helper in _own_helpers(method, methods, facts.calls(method)):
        inner = helper.args.args[0].arg
        for call in facts.calls(helper):
            name = dotted(call.func)
            if name is not None and name.startswith(f"{inner}.") and name.count(".") == 1:
                found.add(f"{me}.{name.split('.', 1)[1]}")
    return found


def _helper_predictions(
    facts: _Facts,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    model: str,
) -> list[ast.Call]:
    """Predictions ``method`` makes through a helper method of its class: ``pred = self._process_one_batch(x)``.

    The helper calls ``self.<attr>`` (the model), never switches its mode and does not train; ``method`` calls it
    under ``no_grad``, or anywhere when its name says it evaluates, and does not switch the model's mode before.
    """
    ctx = facts.ctx
    calls = facts.calls(method)
    attr = model.split(".", 1)[1]
    named = _evaluates(method)
    found: list[ast.Call] = []
    for call, helper in _own_helpers(method, methods, calls):
        if not (named or _without_grad(ctx, call)) or facts.trains(helper, with_losses=False):
            continue
        inner = f"{helper.args.args[0].arg}.{attr}"
        inner_calls = facts.calls(helper)
        if any(_switches_mode(c, inner) for c in inner_calls):
            continue
        if any(_is_model_call(c, inner, ctx) for c in inner_calls):
            found.append(call)
    switches = [c for c in calls if _switches_mode(c, model)]
    if found and any(_may_run_before(ctx, c, found[0]) for c in switches):
        return []
    return found


def _trained_before_method_call(
    facts: _Facts,
    cls: ast.ClassDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    name: str,
    attr: str,
    *,
    outside: bool,
) -> tuple[ast.Call, ast.AST] | None:
    """Where another method of ``cls`` calls ``self.<name>(...)`` with ``self.<attr>`` last switched to training.

    ``(the call, the switch)``: ``self.<attr>.train()``, or a call of a method that does, before the call. With
    ``outside`` (for a method whose name says it evaluates), also code outside the class that calls it on an
    instance (``exp.train(setting); exp.test(setting)``) right after a method of the class whose switches of
    ``self.<attr>`` are all ``train()``. An agent's ``act`` called after its ``train()`` may mean to explore with
    the training-mode network (noisy layers), so other names are left to the class's own calls.
    """
    found = _trained_before_own_call(facts, methods, name, attr)
    if found is None and outside:
        found = _trained_before_instance_call(facts, cls, methods, name, attr)
    return found


def _trained_before_instance_call(
    facts: _Facts, cls: ast.ClassDef, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], name: str, attr: str
) -> tuple[ast.Call, ast.AST] | None:
    """See :func:`_trained_before_method_call`: calls on instances of ``cls`` outside its methods."""
    ctx = facts.ctx
    scopes: list[ast.AST] = [ctx.tree, *ctx.nodes(ast.FunctionDef), *ctx.nodes(ast.AsyncFunctionDef)]
    for scope in scopes:
        if ctx.enclosing_class(scope) is cls:
            continue
        calls = facts.calls(scope)
        for site in calls:
            func = site.func
            if not (isinstance(func, ast.Attribute) and func.attr == name and isinstance(func.value, ast.Name)):
                continue
            owner = func.value.id
            kind = ctx.kinds.lookup(owner, site)
            if kind is None or kind.name != "instance" or kind.cls != cls.name:
                continue
            for call in reversed([c for c in calls if before(c, site)]):
                callee = call.func
                if any(dotted(a) == owner for a in [*call.args, *(k.value for k in call.keywords)]):
                    break  # the instance handed to other code
                if not (isinstance(callee, ast.Attribute) and dotted(callee.value) == owner):
                    continue
                other = methods.get(callee.attr)
                if other is None or not other.args.args:
                    break  # a method the class does not define here: it may switch the mode
                inner = f"{other.args.args[0].arg}.{attr}"
                switches = [c for c in facts.calls(other) if _switches_mode(c, inner)]
                if switches:
                    if all(_trains_again(c) for c in switches):
                        return site, call
                    break
    return None


def _trained_before_own_call(
    facts: _Facts, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], name: str, attr: str
) -> tuple[ast.Call, ast.AST] | None:
    """See :func:`_trained_before_method_call`: calls through ``self`` in the class's other methods."""
    for caller in methods.values():
        if not caller.args.args:
            continue
        me = caller.args.args[0].arg
        model = f"{me}.{attr}"
        calls = facts.calls(caller)
        for site in calls:
            if not (isinstance(site.func, ast.Attribute) and dotted(site.func) == f"{me}.{name}"):
                continue
            for call in reversed([c for c in calls if before(c, site)]):
                if _switches_mode(call, model):
                    if _trains_again(call):
                        return site, call
                    break
                callee = call.func
                own = isinstance(callee, ast.Attribute) and dotted(callee.value) == me
                other = methods.get(callee.attr) if isinstance(callee, ast.Attribute) and own else None
                if other is not None and other.args.args:
                    inner = f"{other.args.args[0].arg}.{attr}"
                    switches = [c for c in facts.calls(other) if _switches_mode(c, inner)]
                    if switches:
                        if all(_trains_again(c) for c in switches):
                            return site, call
                        break
                if any(dotted(a) == model for a in [*call.args, *(k.value for k in call.keywords)]):
                    break  # handed to code that may switch the mode
    return None


def _predicted_after_training_here(facts: _Facts) -> Iterator[Finding]:
    """Prediction under ``no_grad`` after a training loop of the same code, with no ``eval()`` in between.

    In a script (module-level code) or one function: a loop calls ``model(...)`` and trains (``backward()``,
    ``optimizer.step()``), and later the same code calls ``model(...)`` under ``torch.no_grad()``/``inference_mode()``
    with the model last switched to training (or never switched: a new module is in training mode). Not reported
    when the model is handed to another call in between (it may switch the mode), or when its layers are mode-free.
    """
    ctx = facts.ctx
    local = local_functions(ctx)
    scopes: list[ast.AST] = [ctx.tree, *ctx.nodes(ast.FunctionDef), *ctx.nodes(ast.AsyncFunctionDef)]
    for scope in scopes:
        calls = facts.calls(scope)
        reported: set[str] = set()
        for prediction in calls:
            model = dotted(prediction.func)
            if model is None or model in reported or not _without_grad(ctx, prediction):
                continue
            if isinstance(prediction.func, ast.Attribute) and not model.startswith("self."):
                continue  # `model(x)` only: a method call `obj.net(x)` is not known to be the model's forward
            loop = _training_loop_before(facts, scope, calls, prediction, model)
            if loop is None:
                continue
            since = [c for c in calls if before(c, prediction) and not _inside(c, loop) and not before(c, loop)]
            last_switch = next((c for c in reversed(since) if _switches_mode(c, model)), None)
            if last_switch is not None and not _trains_again(last_switch):
                continue  # eval(), or train(<something>)
            if any(
                c is not prediction and any(dotted(a) == model for a in [*c.args, *(k.value for k in c.keywords)])
                for c in since
            ):
                continue  # handed to another call, which may switch the mode
            if any(
                isinstance(c.func, ast.Name)
                and c.func.id in local
                and any(_switches_mode(inner, model) for inner in facts.calls(local[c.func.id]))
                for c in since
            ):
                continue  # a function of the file that switches the (global) model's mode
            _, built = facts.binding(model, prediction)
            if built is None or facts.mode_free(built) or facts.known_eval(built) or _tensor_type(ctx, built):
                continue
            reported.add(model)
            yield Finding(
                prediction,
                message=f"`{model}` predicts under `torch.no_grad()` in training mode: it trained in the loop at "
                f"line {loop.lineno} and was not switched to `eval()` since; dropout stays active and batch norm "
                f"uses batch statistics; fix: call `{model}.eval()` before predicting (and `{model}.train()` "
                f"before training again)",
            )


def _tensor_type(ctx: FileContext, value: ast.AST) -> bool:
    """``torch.cuda.LongTensor if cuda else torch.LongTensor``: a legacy tensor type, whose calls make tensors."""
    if isinstance(value, ast.IfExp):
        return _tensor_type(ctx, value.body) and _tensor_type(ctx, value.orelse)
    full = ctx.qualname(value) if isinstance(value, ast.Attribute | ast.Name) else None
    return full is not None and full.removeprefix("torch.").removeprefix("cuda.") in LEGACY_CONSTRUCTORS


#: Calls that take a model without switching its mode (``torch.save(model, path)`` in a loop that validates).
_MODE_KEEPING_CALLS = frozenset(
    {"torch.save", "print", "len", "str", "repr", "isinstance", "id", "type", "copy.deepcopy", "deepcopy"}
)


def _validated_inside_training_loop(facts: _Facts, reported: set[ast.AST]) -> Iterator[Finding]:
    """Periodic validation inside the training loop, in training mode.

    ``for batch in loader: model.train(); ...; loss.backward(); opt.step(); if step % k == 0: with
    torch.no_grad(): model(dev_x)``: the model was switched to training in this pass of the loop and predicts under
    ``no_grad`` after the step with no ``model.eval()`` in between. A model never switched in the loop is left
    alone (sampling a GAN generator in training mode under ``no_grad`` is done on purpose).
    """
    ctx = facts.ctx
    scopes: list[ast.AST] = [ctx.tree, *ctx.nodes(ast.FunctionDef), *ctx.nodes(ast.AsyncFunctionDef)]
    for scope in scopes:
        calls = facts.calls(scope)
        done: set[str] = set()
        for prediction in calls:
            model = dotted(prediction.func)
            if model is None or model in done or prediction in reported:
                continue
            graded = not _without_grad(ctx, prediction)
            if isinstance(prediction.func, ast.Attribute) and not model.startswith("self."):
                continue
            if graded and (_gradients_enabled(ctx, prediction) or not isinstance(scope, ast.FunctionDef)):
                continue
            loop = innermost_loop(ctx, prediction)
            region: ast.AST | None = None
            while loop is not None and scope_node(ctx, loop) is scope:
                if _trained_before(facts, calls, loop, prediction, model):
                    region = loop
                    break
                loop = innermost_loop(ctx, loop)
            if region is None and graded and _trained_before(facts, calls, scope, prediction, model):
                region = scope  # `def train(epoch): model.train(); ...; optimizer.step(); model(x_val)`: one pass
            if region is None:
                continue
            if graded and (
                any(_inside(c, region) and before(prediction, c) and facts._training_call(c, False) for c in calls)
                or not _predicts(ctx, prediction)
            ):
                continue  # its output may be trained on: a second forward of the same step (a GAN's generator)
            body = [c for c in calls if _inside(c, region) and before(c, prediction)]
            switch = next((c for c in reversed(body) if _switches_mode(c, model)), None)
            if switch is None and graded and region is not scope:
                # `def train(net, ...): net.train()` above the loop, then a validation pass with gradients on and a
                # loss computed on its outputs but nothing trained on them (char-rnn's validation without eval())
                body = [c for c in calls if before(c, prediction)]
                switch = next((c for c in reversed(body) if _switches_mode(c, model)), None)
            if switch is None or not _trains_again(switch):
                # no `model.train()` in this pass: a model never switched may be sampled in training mode on purpose
                # (a GAN generator's BatchNorm under no_grad, as in the DCGAN tutorial)
                continue
            since = [c for c in body if before(switch, c)]
            if any(
                any(dotted(a) == model for a in [*c.args, *(k.value for k in c.keywords)])
                and ctx.call_name(c) not in _MODE_KEEPING_CALLS
                for c in since
            ):
                continue  # handed to another call, which may switch the mode
            if any(
                isinstance(c.func, ast.Name)
                and c.func.id in local_functions(ctx)
                and any(_switches_mode(inner, model) for inner in facts.calls(local_functions(ctx)[c.func.id]))
                for c in since
            ):
                continue
            if graded:
                _, built = facts.binding(model, prediction)
                if built is not None and (facts.mode_free(built) or _tensor_type(ctx, built)):
                    continue
            done.add(model)
            where = (
                "under `torch.no_grad()` inside its training loop"
                if not graded
                else f"after its training step in `{scope.name}`"
                if region is scope and isinstance(scope, ast.FunctionDef)
                else "after its training step inside its training loop"
            )
            untrained = ", and nothing is trained on its output," if graded else ""
            yield Finding(
                prediction,
                message=f"`{model}` predicts {where} (line {getattr(region, 'lineno', 0)}){untrained} "
                f"in training mode: it was last switched to training (line {switch.lineno}) and trained in this "
                f"pass; dropout "
                f"stays active and batch norm uses batch statistics; fix: call `{model}.eval()` before this "
                f"validation (and `{model}.train()` before the next training step)",
            )


def _trained_before(facts: _Facts, calls: list[ast.Call], region: ast.AST, prediction: ast.Call, model: str) -> bool:
    """Whether ``region`` (a loop or a function) calls ``model`` with gradients and trains before ``prediction``."""
    body = [c for c in calls if _inside(c, region) and before(c, prediction)]
    return any(_is_model_call(c, model, facts.ctx) and not _without_grad(facts.ctx, c) for c in body) and any(
        facts._training_call(c, False) for c in body
    )


def _gradients_enabled(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` runs under ``torch.enable_grad()`` or ``torch.set_grad_enabled(...)``: gradients are meant."""
    enabling = ("torch.enable_grad", "torch.set_grad_enabled", "torch.autograd.enable_grad")
    return any(full in enabling for full, _ in _grad_contexts(ctx, node))


def _grad_contexts(ctx: FileContext, node: ast.AST) -> Iterator[tuple[str | None, ast.expr]]:
    """The ``with`` contexts around ``node``, innermost first: each one's qualified name and expression."""
    for above in ctx.ancestors(node):
        if isinstance(above, ast.With | ast.AsyncWith):
            for item in above.items:
                expr = item.context_expr
                yield ctx.qualname(expr.func if isinstance(expr, ast.Call) else expr), expr


def _predicts(ctx: FileContext, call: ast.Call) -> bool:
    """Whether the output of the model ``call`` is bound to a name (``output = model(x)``), not handed on."""
    return isinstance(ctx.parent(call), ast.Assign)


def _training_loop_before(
    facts: _Facts, scope: ast.AST, calls: list[ast.Call], prediction: ast.Call, model: str
) -> ast.For | ast.AsyncFor | ast.While | None:
    """The last loop of ``scope`` before ``prediction`` that calls ``model`` and trains (backward, optimizer step)."""
    found: ast.For | ast.AsyncFor | ast.While | None = None
    for call in calls:
        if not before(call, prediction) or not _is_model_call(call, model, facts.ctx) or _without_grad(facts.ctx, call):
            continue
        loop = innermost_loop(facts.ctx, call)
        if loop is None or _inside(prediction, loop) or scope_node(facts.ctx, loop) is not scope:
            continue
        if any(_inside(c, loop) and facts._training_call(c, False) for c in calls):
            found = loop
    return found


def _gradients_off(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` runs under ``no_grad``/``inference_mode`` or ``set_grad_enabled(<a condition>)``."""
    for full, expr in _grad_contexts(ctx, node):
        if full in ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"):
            return True
        if full == "torch.set_grad_enabled" and isinstance(expr, ast.Call) and expr.args:
            return not isinstance(expr.args[0], ast.Constant)  # `set_grad_enabled(phase == "train")`
    return False


def _phases_without_eval(facts: _Facts) -> Iterator[Finding]:
    """A loop over phases that switches the model to ``train()`` in one branch and never to ``eval()``.

    ``if phase == "train": model.train()`` with no ``model.eval()`` for the other phase: once the training phase
    has run, the model predicts for the other one, with gradients off, still in training mode.
    """
    ctx = facts.ctx
    for func in [*ctx.nodes(ast.FunctionDef), *ctx.nodes(ast.AsyncFunctionDef)]:
        calls = facts.calls(func)
        for switch in calls:
            callee = switch.func
            if not (isinstance(callee, ast.Attribute) and callee.attr == "train" and not switch.args):
                continue
            if switch.keywords:
                continue
            model = dotted(callee.value)
            branch = next((a for a in ctx.ancestors(switch) if isinstance(a, ast.If)), None)
            loop = innermost_loop(ctx, switch)
            if model is None or branch is None or loop is None or not _inside(branch, loop):
                continue
            if any(
                _switches_mode(c, model) and c is not switch and not _trains_again(c) for c in calls
            ):  # an eval() somewhere (or a second train() that may be train(False)): not this bug
                continue
            uses = [c for c in calls if _is_model_call(c, model, ctx) and _inside(c, loop) and _gradients_off(ctx, c)]
            if not uses or not facts.trains(func, with_losses=False):
                continue
            yield Finding(
                switch,
                message=f"`{model}.train()` runs only when `{ctx.segment(branch.test)}`, and `{model}.eval()` never: "
                f"in the other pass of the loop the model predicts with gradients off (line {uses[0].lineno}) but "
                f"still in training mode (dropout active, batch norm on batch statistics); fix: add "
                f"`else: {model}.eval()`",
            )


def _trains_again(call: ast.Call) -> bool:
    """``model.train()``: switches to training (not ``train(False)``)."""
    callee = call.func
    return isinstance(callee, ast.Attribute) and callee.attr == "train" and not call.args and not call.keywords


# -- shape 6: a frozen model (a distillation teacher) run under no_grad by a function that trains another -----------


def _origins(
    facts: _Facts, func: ast.FunctionDef | ast.AsyncFunctionDef, param: str, depth: int = 0
) -> list[tuple[str, ast.expr | None]] | None:
    """What ``param`` of ``func`` is at its callers: ``(name, expression that built it)`` per call site, up the calls.

    Through parameters of the file's functions (``run`` -> ``train_and_evaluate(teacher_model=...)`` -> ``train_kd``);
    ``None`` when a caller passes something else than a name, or the chain is deeper than three calls.
    """
    local = local_functions(facts.ctx)
    sites = [n for n in facts.ctx.nodes(ast.Call) if isinstance(n.func, ast.Name) and n.func.id == func.name]
    if not sites or depth > 3:
        return None
    found: list[tuple[str, ast.expr | None]] = []
    for site in sites:
        given = _argument(site, func, param)
        name = dotted(given) if given is not None else None
        if name is None:
            return None
        caller = scope_node(facts.ctx, site)
        if isinstance(caller, ast.FunctionDef | ast.AsyncFunctionDef) and caller.name in local:
            names = [a.arg for a in [*caller.args.posonlyargs, *caller.args.args, *caller.args.kwonlyargs]]
            if name in names and not facts.binding(name, site)[1]:
                further = _origins(facts, caller, name, depth + 1)
                if further is None:
                    return None
                found.extend([(name, None), *further])
                continue
        found.append((name, facts.binding(name, site)[1]))
    return found


def _frozen_in_training_mode(facts: _Facts) -> Iterator[Finding]:
    """A model a training function only runs under ``no_grad``, which nothing switches to eval mode or trains.

    ``train_kd(model, teacher_model, ...)``: the student trains; the teacher predicts under ``no_grad`` for the
    distillation loss. Without ``teacher_model.eval()`` its dropout stays active and its batch norm uses (and updates
    with) the student's batches. Left alone: a model the file switches with ``eval()``/``train()`` under any of its
    names, one an optimizer is built over, one handed to another call, and models proven mode-free (a DQN's target
    network of linear layers).
    """
    ctx = facts.ctx
    local = local_functions(ctx)
    for func in local.values():
        if not facts.trains(func, with_losses=False):
            continue
        calls = facts.calls(func)
        for param in [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]:
            uses = [c for c in calls if _is_model_call(c, param, ctx)]
            if not uses or not all(_without_grad(ctx, c) for c in uses):
                continue
            handed = any(
                c not in uses and any(dotted(a) == param for a in [*c.args, *(k.value for k in c.keywords)])
                for c in calls
            )
            if handed or any(_switches_mode(c, param) for c in calls):
                continue
            origins = _origins(facts, func, param)
            if not origins:
                continue
            names = {name for name, _ in origins} | {param}
            built = [expr for _, expr in origins if expr is not None]
            if not built or any(facts.mode_free(b) or facts.known_eval(b) for b in built):
                continue
            if any(_switches_mode(c, name) for c in ctx.nodes(ast.Call) for name in names):
                continue
            if any(_optimizes(ctx, c, names) for c in ctx.nodes(ast.Call)):
                continue
            yield Finding(
                uses[0],
                message=f"`{param}` is run under `torch.no_grad()` in training mode while `{func.name}` trains another "
                f"model: nothing switches it to eval mode, so its dropout stays active and its batch norm normalises "
                f"with (and updates its statistics from) the training batches; fix: call `{param}.eval()` before "
                f"the loop (a distillation teacher, a frozen feature extractor)",
            )


def _optimizes(ctx: FileContext, call: ast.Call, names: set[str]) -> bool:
    """Whether ``call`` builds an optimizer over the parameters of a model named in ``names``."""
    full = ctx.call_name(call) or ""
    if not (full.startswith("torch.optim.") and full.rsplit(".", 1)[-1][:1].isupper()):
        return False
    return any(dotted(node) in names for arg in call.args[:1] for node in ast.walk(arg))


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield predictions by models left in training mode after loading or training, and loops that keep graphs."""
    facts = _Facts(ctx)
    yield from _loaded_without_eval(facts)
    yield from _kept_without_grad_off(facts)
    yield from _evaluated_after_training(facts)
    here = list(_predicted_after_training_here(facts))
    yield from here
    yield from _validated_inside_training_loop(facts, {f.node for f in here if f.node is not None})
    yield from _phases_without_eval(facts)
    yield from _frozen_in_training_mode(facts)


RULE = Rule(
    code="FRY010",
    name="inference-in-train-mode",
    message="a model is used for prediction in training mode or with autograd recording",
    fix_title="call `model.eval()` before predicting and predict under `torch.inference_mode()`",
    doc=__doc__ or "",
    check=check,
)
