"""What ``Module.to`` never reaches: plain tensor attributes and plain containers of modules in a module class.

Also the layers that a module class leaves behind when it moves its other layers itself (see
:func:`left_behind`).

Not a rule. ``Module.to``, ``.cuda()``, ``.parameters()`` and ``state_dict()`` see parameters, buffers and submodules
registered on the module (assigned as ``nn.Module``/``nn.Parameter`` attributes, ``register_buffer``,
``nn.ModuleList``/``nn.ModuleDict``). A tensor kept as a plain attribute (``self.scale = torch.ones(4)``) and modules
kept in a plain ``list``/``dict`` (``self.heads = [nn.Linear(4, 2), ...]``) are not registered: after
``model.to(device)`` they are still on the CPU. FRY005 reports the tensors (where they meet the input in a method),
FRY007 the containers.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ferry.lint.context import FileContext, dotted
from ferry.lint.torch_api import (
    DATA_FACTORIES,
    DTYPES,
    FACTORIES,
    LAYERS_WITH_PARAMETERS,
    LEGACY_HOST,
    MOVES,
    MOVING_METHODS,
)

#: Arithmetic that fails when a CPU tensor meets a device tensor with more than zero dimensions.
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult, ast.FloorDiv, ast.Pow, ast.Mod)


@dataclass(frozen=True)
class PlainTensor:
    """``self.<attr> = <host factory>`` in ``__init__`` of a module class, used in arithmetic in a method."""

    assign: ast.Assign
    cls: str
    attr: str
    use: ast.AST
    method: str


@dataclass(frozen=True)
class PlainContainer:
    """``self.<attr> = [nn.Linear(...), ...]``: modules built into a plain list or dict of a module class."""

    assign: ast.Assign
    cls: str
    attr: str
    container: str  # "list" or "dict"


def unregistered(ctx: FileContext) -> tuple[list[PlainTensor], list[PlainContainer]]:
    """The plain tensor attributes used in arithmetic, and the plain containers of modules, of the file's classes."""
    return ctx.shared(_unregistered)


def _unregistered(ctx: FileContext) -> tuple[list[PlainTensor], list[PlainContainer]]:
    tensors: list[PlainTensor] = []
    containers: list[PlainContainer] = []
    if "torch" in ctx.source:
        for cls in ctx.nodes(ast.ClassDef):
            if ctx.kinds.class_is_module(cls.name) and ctx.kinds.classes.get(cls.name) is cls:
                _scan(ctx, cls, tensors, containers)
    return tensors, containers


#: Methods that run on the model's inputs, never set it up.
_FORWARDS = frozenset({"forward", "__call__"})


def _called_on_self(func: ast.AST) -> list[str]:
    """The names of the methods ``func`` calls on ``self`` (``self._initialize_alphas()``), in order."""
    return [
        node.func.attr
        for node in ast.walk(func)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    ]


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {s.name: s for s in cls.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}


def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _scan(ctx: FileContext, cls: ast.ClassDef, tensors: list[PlainTensor], containers: list[PlainContainer]) -> None:
    methods = _methods(cls)
    init = methods.get("__init__")
    if init is None or MOVING_METHODS & methods.keys():
        return
    assigned: dict[str, list[ast.Assign]] = {}
    mentioned: set[str] = set()  # attributes named in a string (register_buffer("x", ...), setattr, __dict__)
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                attr = _self_attribute(target)
                if attr is not None:
                    assigned.setdefault(attr, []).append(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            mentioned.add(node.value)
    # `__init__` and the methods it runs on `self` (DARTS's `self._initialize_alphas()`)
    setup = [init, *(methods[n] for n in _called_on_self(init) if n in methods and n not in _FORWARDS)]
    for stmt in (node for part in setup for node in ast.walk(part)):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        attr = _self_attribute(stmt.targets[0])
        if attr is None or attr in mentioned or len(assigned.get(attr, [])) != 1:
            continue
        value = stmt.value
        if _host_factory(ctx, value) or _host_local(ctx, init, stmt, value):
            use = _arithmetic_use(ctx, methods, attr)
            if use is not None:
                tensors.append(PlainTensor(stmt, cls.name, attr, use[0], use[1]))
        else:
            kind = _module_container(ctx, value) or _filled_container(ctx, init, attr, value)
            if kind is not None and not _registered_items(ctx, cls, attr):
                containers.append(PlainContainer(stmt, cls.name, attr, kind))


#: Tensor methods that give a tensor on the same device (shapes and dtypes), so a host factory stays one.
_SAME_PLACE = frozenset(
    """
    view reshape unsqueeze squeeze permute transpose t flatten expand repeat contiguous float double half bfloat16
    long int bool clone detach exp log sqrt sin cos neg abs requires_grad_
    """.split()
)


def _registered_items(ctx: FileContext, cls: ast.ClassDef, attr: str) -> bool:
    """Whether the class registers the items of ``self.<attr>`` itself (pyGAT's attention heads).

    Also when it wraps the list in a container module kept beside it (``nn.ModuleList(self.decoders)``).

    ``for i, attention in enumerate(self.attentions): self.add_module('attention_{}'.format(i), attention)`` (or
    ``register_module``, ``setattr(self, ...)``): each layer is then a submodule that ``.to()`` moves, trains and
    saves, and the list only keeps the order.
    """
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        wrapped = (ctx.qualname(func) or "").rsplit(".", 1)[-1] in ("ModuleList", "ModuleDict", "Sequential")
        if wrapped and any(_self_attribute(a) == attr for a in node.args):
            return True  # ENAS's `self._decoders = nn.ModuleList(self.decoders)`: the same layers, registered
        registers = (
            isinstance(func, ast.Attribute)
            and func.attr in ("add_module", "register_module")
            and _self_attribute(func) is not None
        ) or (isinstance(func, ast.Name) and func.id == "setattr" and node.args and dotted(node.args[0]) == "self")
        if not registers:
            continue
        mentions = {_self_attribute(n) for n in ast.walk(node)}
        loop = next((a for a in ctx.ancestors(node) if isinstance(a, ast.For)), None)
        if loop is not None:
            mentions |= {_self_attribute(n) for n in ast.walk(loop.iter)}
        if attr in mentions:
            return True
    return False


def _host_factory(ctx: FileContext, value: ast.expr) -> bool:
    """A torch factory without ``device=`` (not a zero-dimensional ``torch.tensor(2.0)``), or a legacy constructor.

    Also through shape and dtype methods: ``torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1)``.
    """
    if isinstance(value, ast.BinOp) and isinstance(value.left, ast.Constant):  # `1e-3 * torch.randn(k, n)`
        return _host_factory(ctx, value.right)
    if isinstance(value, ast.BinOp) and isinstance(value.right, ast.Constant):
        return _host_factory(ctx, value.left)
    if not isinstance(value, ast.Call):
        return False
    if isinstance(value.func, ast.Attribute) and value.func.attr in _SAME_PLACE:
        return _host_factory(ctx, value.func.value)
    full = ctx.call_name(value) or ""
    head, _, last = full.rpartition(".")
    if any(k.arg in ("device", None) for k in value.keywords):
        return False
    if full in LEGACY_HOST:
        return bool(value.args)
    if head != "torch":
        return False
    if last in DATA_FACTORIES:
        return bool(value.args) and isinstance(value.args[0], ast.List | ast.Tuple | ast.ListComp)
    return last in FACTORIES


def _host_local(ctx: FileContext, init: ast.AST, stmt: ast.Assign, value: ast.expr) -> bool:
    """``pe = torch.zeros(n, d)`` ... ``self.pe = pe.unsqueeze(0)``: a local of ``__init__`` made by a host factory."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _SAME_PLACE:
        value = value.func.value
    if not isinstance(value, ast.Name):
        return False
    bound = [
        node.value
        for node in ast.walk(init)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == value.id for t in node.targets)
        and node.lineno < stmt.lineno
    ]
    rebound = any(  # `pe = pe.to(device)` and the like, or a loop or `with` binding it
        isinstance(node, ast.For | ast.With | ast.AugAssign | ast.AnnAssign | ast.NamedExpr)
        and any(isinstance(n, ast.Name) and n.id == value.id and isinstance(n.ctx, ast.Store) for n in ast.walk(node))
        for node in ast.walk(init)
        if not isinstance(node, ast.Assign)
    )
    return bool(bound) and not rebound and all(_host_factory(ctx, v) for v in bound)


def _arithmetic_use(
    ctx: FileContext, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], attr: str
) -> tuple[ast.AST, str] | None:
    """The first place a method other than ``__init__`` combines ``self.<attr>`` in arithmetic or a torch call."""
    for name, method in methods.items():
        if name == "__init__":
            continue
        for node in ast.walk(method):
            if _self_attribute(node) != attr or not isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
                continue
            parent = ctx.parent(node)
            while (
                (isinstance(parent, ast.Subscript) and parent.value is node)
                or (isinstance(parent, ast.Attribute) and parent.attr in _SAME_PLACE)
                or (isinstance(parent, ast.Call) and parent.args[:1] == [node] and _wraps(ctx, parent))
            ):  # `self.pe[:, : x.size(1)]`, `self.mean.view(1, 3, 1, 1)`, `nn.Parameter(self.pe)`: the same tensor
                above = ctx.parent(parent) if isinstance(parent, ast.Attribute) else parent
                if above is None:
                    break
                node, parent = above, ctx.parent(above)
            if isinstance(parent, ast.Attribute) and parent.attr in ("to", "cuda"):
                continue  # `nn.Parameter(self.pe, requires_grad=False).to(self.device)`: moved where it is used
            if isinstance(parent, ast.BinOp) and isinstance(parent.op, _ARITHMETIC):
                return parent, name
            if isinstance(parent, ast.Call) and node in parent.args:
                full = ctx.call_name(parent) or ""
                if full.startswith(("torch.", "torch.nn.functional.")) and full.rpartition(".")[2] not in (
                    "is_tensor",
                    "numel",
                    "typename",
                ):
                    return parent, name
    return None


def _wraps(ctx: FileContext, call: ast.Call) -> bool:
    """``nn.Parameter(t)``, ``Variable(t)``: the tensor ``t`` itself, where it is."""
    return ctx.call_name(call) in (
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
        "torch.autograd.Variable",
        "torch.autograd.variable.Variable",
    )


def _module_container(ctx: FileContext, value: ast.expr) -> str | None:
    """``"list"``/``"dict"`` when ``value`` builds parameterized modules straight into a plain list or dict."""
    if isinstance(value, ast.List | ast.Tuple):
        items: list[ast.expr] = list(value.elts)
        kind = "list"
    elif isinstance(value, ast.ListComp):
        items, kind = [value.elt], "list"
    elif isinstance(value, ast.Dict):
        items, kind = [v for v in value.values if v is not None], "dict"
    elif isinstance(value, ast.DictComp):
        items, kind = [value.value], "dict"
    else:
        return None
    if items and all(_builds_parameterized(ctx, item) for item in items):
        return kind
    return None


def _filled_container(ctx: FileContext, init: ast.AST, attr: str, value: ast.expr) -> str | None:
    """``self.experts = {}`` then ``self.experts[k] = nn.Linear(...)`` (or ``.append(...)``) in ``__init__``.

    ``"list"``/``"dict"`` when every item ``__init__`` puts in the empty container builds a parameterized module.
    """
    if isinstance(value, ast.List) and not value.elts:
        kind = "list"
    elif isinstance(value, ast.Dict) and not value.keys:
        kind = "dict"
    else:
        return None
    items: list[ast.expr] = []
    for node in ast.walk(init):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _self_attribute(target.value) == attr:
                    items.append(node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _self_attribute(node.func.value) == attr
            and node.func.attr in ("append", "extend", "insert", "update", "setdefault")
        ):
            if node.func.attr != "append" or len(node.args) != 1:
                return None  # filled some other way: not followed
            items.append(node.args[0])
    if items and all(_builds_parameterized(ctx, item) for item in items):
        return kind
    return None


def _builds_parameterized(ctx: FileContext, node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    full = ctx.call_name(node) or ""
    if full.startswith("torch.nn.") and full.rpartition(".")[2] in LAYERS_WITH_PARAMETERS | {"Sequential"}:
        return True
    name = dotted(node.func)
    return name is not None and name in ctx.kinds.classes and ctx.kinds.class_is_module(name)


@dataclass(frozen=True)
class LeftBehind:
    """``self.<attr> = nn.LSTM(...)`` in an ``__init__`` that moves the class's other layers itself, never moved."""

    assign: ast.Assign
    cls: str
    attr: str
    moved: ast.Call  # one of the moves of the other layers
    other: str  # the layer it moves


def left_behind(ctx: FileContext) -> list[LeftBehind]:
    """Layers with weights that a self-moving module class builds and never moves.

    A module class whose ``__init__`` moves some of its own layers (``self.lstm = self.lstm.cuda()`` under
    ``if self.gpu:``, ``self.linear = nn.Linear(...).to(device)``), as NCRF++ and Real-Time-Voice-Cloning do, puts
    its weights where it chooses; a layer with weights that it builds and never moves stays on the CPU. Only in
    files that never move a module from outside its class's ``__init__`` (a ``model.to(device)`` there would move
    every layer) and for classes that do not move themselves as a whole (``self.to(device)``).
    """
    return ctx.shared(_left_behind)


def _left_behind(ctx: FileContext) -> list[LeftBehind]:
    if "torch" not in ctx.source:
        return []
    found: list[LeftBehind] = []
    for cls in ctx.nodes(ast.ClassDef):
        if not ctx.kinds.class_is_module(cls.name) or ctx.kinds.classes.get(cls.name) is not cls:
            continue
        init = _methods(cls).get("__init__")
        if init is None or not init.args.args:
            continue
        me = init.args.args[0].arg
        moved: dict[str, ast.Call] = {}  # anywhere in the class
        layers: dict[str, ast.Call] = {}  # the layers `__init__` moves: the class places its weights itself
        whole = False
        for method in _methods(cls).values():
            for node in ast.walk(method):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _device_move(node)):
                    continue
                target = _moved_attribute(ctx, node, me if method is init else _first_arg(method))
                if target == "":
                    whole = True
                elif target is not None:
                    moved.setdefault(target, node)
                    if method is init and _layer_attribute(ctx, init, me, target):
                        layers.setdefault(target, node)
        if whole or not layers or _instances_may_move(ctx, cls.name):
            continue
        other, first_move = min(layers.items(), key=lambda item: (item[1].lineno, item[1].col_offset))
        for node in ast.walk(init):
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            kept = node.targets[0]
            if not (isinstance(kept, ast.Attribute) and dotted(kept.value) == me):
                continue
            if kept.attr in moved or not _builds_parameterized(ctx, node.value):
                continue
            name = dotted(node.value.func) if isinstance(node.value, ast.Call) else None
            if name in ctx.kinds.classes and moves_own_layers(ctx, name or ""):
                continue  # a part that moves its own layers
            found.append(LeftBehind(node, cls.name, kept.attr, first_move, other))
    return found


def _layer_attribute(ctx: FileContext, init: ast.AST, me: str, attr: str) -> bool:
    """Whether ``__init__`` keeps a layer or a parameter as ``self.<attr>`` (not a plain tensor)."""
    for node in ast.walk(init):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        while isinstance(target, ast.Subscript):
            target = target.value
        if not (isinstance(target, ast.Attribute) and target.attr == attr and dotted(target.value) == me):
            continue
        value: ast.expr = node.value
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
            value = value.func.value  # `nn.Linear(...).to(device)`
        full = ctx.call_name(value) if isinstance(value, ast.Call) else None
        if _builds_parameterized(ctx, value) or full in ("torch.nn.Parameter", "torch.nn.ModuleList"):
            return True
    return False


def _first_arg(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    return func.args.args[0].arg if func.args.args else "self"


def _device_move(call: ast.Call) -> bool:
    """``.cuda()``, ``.to(device)``: a move (``.to(torch.float32)``, ``.to(dtype=...)`` only convert)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in MOVES or func.attr == "type":
        return False
    if func.attr != "to":
        return True
    if not call.args:
        return any(k.arg == "device" for k in call.keywords)
    first = dotted(call.args[0]) or ""
    return not (first.startswith("torch.") and first.rpartition(".")[2] in DTYPES)


def _moved_attribute(ctx: FileContext, call: ast.Call, me: str) -> str | None:
    """The ``self.<attr>`` a move moves (``""``: ``self`` itself), or ``None``.

    ``self.x.cuda()``, ``self.x[i] = self.x[i].cuda()``, ``self.x = nn.Linear(...).to(device)``.
    """
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    while isinstance(receiver, ast.Subscript):
        receiver = receiver.value
    if isinstance(receiver, ast.Name) and receiver.id == me:
        return ""
    if isinstance(receiver, ast.Attribute) and dotted(receiver.value) == me:
        return receiver.attr
    parent = ctx.parent(call)
    if isinstance(parent, ast.Assign) and parent.value is call and len(parent.targets) == 1:
        target = parent.targets[0]
        while isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Attribute) and dotted(target.value) == me:
            return target.attr
        if isinstance(target, ast.Name) and receiver is not None and dotted(receiver) == target.id:
            return _wrapped_as_parameter(ctx, call, target.id, me)
    return None


def _wrapped_as_parameter(ctx: FileContext, call: ast.Call, name: str, me: str) -> str | None:
    """``init = init.cuda()``, then ``self.transitions = nn.Parameter(init)``: the ``self.<attr>`` the move fills."""
    func = ctx.enclosing_function(call)
    for stmt in ast.walk(func) if func is not None else ():
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
            continue
        target, value = stmt.targets[0], stmt.value
        if (
            ctx.call_name(value) in ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
            and value.args
            and isinstance(value.args[0], ast.Name)
            and value.args[0].id == name
            and isinstance(target, ast.Attribute)
            and dotted(target.value) == me
        ):
            return target.attr
    return None


def moves_own_layers(ctx: FileContext, name: str, depth: int = 0) -> bool:
    """Whether building the module class ``name`` of the file moves some of its own layers (three levels deep).

    Its ``__init__`` moves ``self``, a part of it (``self.word_embedding = self.word_embedding.cuda()``, ``self.x[i]
    = self.x[i].cuda()``) or a layer it keeps (``self.fc = nn.Linear(...).to(device)``), or builds a module class of
    the file that does. A dtype conversion is no move.
    """
    cls = ctx.kinds.classes.get(name)
    init = _methods(cls).get("__init__") if cls is not None else None
    if init is None or depth > 3:
        return False
    me = _first_arg(init)
    for node in ast.walk(init):
        if isinstance(node, ast.Call) and _device_move(node):
            attr = _moved_attribute(ctx, node, me)
            if attr is not None and not _made_by_factory(ctx, init, me, attr):
                return True
        inner = dotted(node.func) if isinstance(node, ast.Call) else None
        part = inner is not None and inner != name and inner in ctx.kinds.classes
        if part and moves_own_layers(ctx, inner or "", depth + 1):
            return True
    return False


def _made_by_factory(ctx: FileContext, init: ast.AST, me: str, attr: str) -> bool:
    """Whether ``__init__`` first makes ``self.<attr>`` with a host factory: a plain tensor, not a layer or weight.

    GEM's ``self.grads = torch.Tensor(...)``, then ``if args.cuda: self.grads = self.grads.cuda()``: moving it
    moves no layer of the module.
    """
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Attribute) and target.attr == attr and dotted(target.value) == me:
                return _host_factory(ctx, node.value)
    return False


def moves_itself_last(ctx: FileContext, name: str) -> bool:
    """Whether the ``__init__`` of module class ``name`` ends its moves with ``self.to(...)`` of the whole module.

    DeepCTR's ``DeepFM``: ``self.dnn_linear = nn.Linear(...).to(device)``, then ``self.to(device)`` as the last
    statement that moves anything, unconditionally: every layer ends up on that one device.
    """
    cls = ctx.kinds.classes.get(name)
    init = _methods(cls).get("__init__") if cls is not None else None
    if init is None:
        return False
    me = _first_arg(init)
    last: ast.stmt | None = None
    for stmt in init.body:
        if any(isinstance(n, ast.Call) and _device_move(n) for n in ast.walk(stmt)):
            last = stmt
    if not isinstance(last, ast.Expr) or not isinstance(last.value, ast.Call):
        return False
    call = last.value
    return _device_move(call) and isinstance(call.func, ast.Attribute) and dotted(call.func.value) == me


def _instances_may_move(ctx: FileContext, name: str) -> bool:
    """Whether something may move a model that holds an instance of the module class ``name`` as a whole.

    The classes that hold it (``name``, and the module classes of the file whose ``__init__`` builds one of those)
    are built only into names (``model = SeqLabel(data)``) that are never moved and are handed only to functions of
    the file that do not move the parameter they take them as, or to ``print``/``len``-like builtins; otherwise
    (a construction passed on directly, returned, or handed to other code) it may be moved.
    """
    holders = {name}
    for _ in range(4):
        for other, cls in ctx.kinds.classes.items():
            init = _methods(cls).get("__init__")
            if other in holders or init is None or not ctx.kinds.class_is_module(other):
                continue
            if any(isinstance(n, ast.Call) and dotted(n.func) in holders for n in ast.walk(init)):
                holders.add(other)
    functions = {f.name: f for f in ctx.tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    for call in ctx.nodes(ast.Call):
        if dotted(call.func) not in holders:
            continue
        func = ctx.enclosing_function(call)
        owner = ctx.enclosing_class(func) if func is not None else None
        if func is not None and func.name == "__init__" and owner is not None and owner.name in holders:
            continue  # a part built by a holder: the holder is followed instead
        parent = ctx.parent(call)
        target = parent.targets[0] if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None
        if not isinstance(target, ast.Name) or _name_may_move(ctx, target.id, func or ctx.tree, functions, 0):
            return True
    return False


def _name_may_move(
    ctx: FileContext,
    name: str,
    scope: ast.AST,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    depth: int,
) -> bool:
    """Whether the model held by ``name`` in ``scope`` may be moved there or by what it is handed to."""
    if depth > 3:
        return True
    for node in ast.walk(scope):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == name:
            if func.attr in MOVES or func.attr in ("_apply", "apply"):
                return True
            continue
        for i, arg in enumerate([*node.args, *(k.value for k in node.keywords)]):
            if not (isinstance(arg, ast.Name) and arg.id == name):
                continue
            callee = functions.get(dotted(func) or "")
            if isinstance(func, ast.Name) and func.id in _READING_BUILTINS:
                continue
            if callee is None or i >= len(node.args):
                return True
            params = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
            if i >= len(params) or _name_may_move(ctx, params[i], callee, functions, depth + 1):
                return True
    return False


#: Builtins that only read the model they are given.
_READING_BUILTINS = frozenset({"print", "len", "repr", "str", "isinstance", "type", "id", "hasattr", "getattr"})
