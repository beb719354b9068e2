"""What a name or expression holds: a tensor, a module, a data loader, ... inferred from the source alone.

The linter must tell ``x.to(device)`` on a tensor (a bug when the result is dropped) from ``model.to(device)`` on a
module (correct: modules move in place) without running anything. It decides by what the name was bound to, within
its function and the module:

- torch factories and operations (``torch.randn``, ``torch.from_numpy``, ``F.relu``, ``torch.cat``), methods and
  arithmetic on tensors, and the output of calling a module give **tensors**;
- ``torch.nn`` classes, classes of this file that subclass ``nn.Module``, ``torchvision.models`` builders,
  ``timm.create_model`` and transformers' ``*Model*.from_pretrained`` give **modules** (``DataParallel`` and
  ``DistributedDataParallel`` give wrapped ones); ``.to``/``.cuda``/``.eval``... of a module give the module back;
- ``DataLoader(...)`` gives a **loader**; iterating over one gives a **batch**, whose items and unpacked parts are
  tensors;
- literals of tensors (``[torch.randn(3), ...]``, ``{"x": t}``, ``(a, b)``) give containers whose items keep their
  kinds; iterating, indexing and unpacking follow them, through ``enumerate``, ``zip`` and ``tqdm``;
- functions and methods of this file give what every one of their ``return`` statements gives, when they agree;
- parameters annotated ``torch.Tensor``, ``nn.Module``, ``torch.device``, ... take that kind; ``self`` in a method of
  an ``nn.Module`` subclass is a module; ``self.x`` takes the kind of what the class's methods assign to it.

A name's kind is the one of its latest binding before the use, in the innermost function that binds it (then the
enclosing ones, then the module). Anything else is unknown (``None``), and rules stay silent on unknowns: a missed
bug costs less than a false alarm.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ferry.lint.memo import Memo
from ferry.lint.torch_api import (
    COMPILERS,
    DATA_FACTORIES,
    DATA_LOADERS,
    DTYPE_CASTS,
    LOADS,
    MODULE_SELF_METHODS,
    MOVES,
    NOT_TENSOR_FUNCTIONS,
    NOT_TENSOR_METHODS,
    NOT_TENSOR_SUBMODULES,
    NUMPY_FACTORIES,
    PARALLEL_WRAPPERS,
    TENSOR_ATTRIBUTES,
    TENSOR_CLASSES,
    TENSOR_SUBMODULES,
)

if TYPE_CHECKING:
    from ferry.lint.context import FileContext

#: Methods that give back their receiver converted, of the same kind (a tensor stays a tensor, a module a module).
_SELF_CONVERSIONS = DTYPE_CASTS | MOVES | {"long", "int", "bool", "byte", "char", "short", "contiguous", "detach"}


def _converts_itself(source: Source, name: str) -> bool:
    """Whether ``source`` binds ``name`` to a conversion of itself (``self.x = self.x.long()``)."""
    value = source[1] if source[0] == "expr" else None
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _SELF_CONVERSIONS
        and _dotted(value.func.value) == name
    )


__all__ = [
    "BATCH",
    "DATASET",
    "DEVICE",
    "LOADED",
    "LOADER",
    "MODULE",
    "NDARRAY",
    "OPTIMIZER",
    "PARALLEL_MODULE",
    "SCHEDULER",
    "STATE_DICT",
    "TENSOR",
    "Kind",
    "KindInference",
    "own_returns",
]


@dataclass(frozen=True)
class Kind:
    """What a value is.

    Attributes:
        name: ``"tensor"``, ``"module"``, ``"optimizer"``, ``"scheduler"``, ``"loader"``, ``"batch"``, ``"dataset"``,
            ``"device"``, ``"ndarray"``, ``"state_dict"``, ``"loaded"`` (what ``torch.load`` returned),
            ``"tuple"``, ``"seq"`` (a list or other sequence), ``"dict"``, ``"instance"`` (of a class of this file).
        items: For ``"tuple"``: the kinds of its items.
        element: For ``"seq"``/``"dict"``/``"loader"``: the kind of an item (of a value, for dicts).
        parallel: For ``"module"``/``"state_dict"``: a ``DataParallel``/``DistributedDataParallel`` wrapper, or
            the state dict taken from one (its keys start with ``module.``).
        cls: For ``"instance"``: the class name.
    """

    name: str
    items: tuple[Kind | None, ...] = ()
    element: Kind | None = None
    parallel: bool = False
    cls: str | None = None

    @property
    def is_tensor(self) -> bool:
        """A tensor (``torch.Tensor`` or ``nn.Parameter``)."""
        return self.name == "tensor"

    @property
    def is_module(self) -> bool:
        """An ``nn.Module``, wrapped or not."""
        return self.name == "module"


TENSOR = Kind("tensor")
MODULE = Kind("module")
PARALLEL_MODULE = Kind("module", parallel=True)
OPTIMIZER = Kind("optimizer")
SCHEDULER = Kind("scheduler")
BATCH = Kind("batch")
LOADER = Kind("loader", element=BATCH)
DATASET = Kind("dataset")
DEVICE = Kind("device")
NDARRAY = Kind("ndarray")

#: NumPy array methods that give an array.
_ARRAY_METHODS = frozenset("astype reshape transpose copy squeeze flatten ravel clip round cumsum".split())

#: ``numpy.random.<name>`` functions that give no data (they seed, shuffle in place, or make a generator)
_NOT_RANDOM_DATA = frozenset({"seed", "shuffle", "default_rng", "get_state", "set_state", "get_bit_generator"})
STATE_DICT = Kind("state_dict")
LOADED = Kind("loaded")

MODULE_BASES = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "torch.nn.Sequential",
        "torch.nn.ModuleList",
        "torch.nn.ModuleDict",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "pytorch_lightning.LightningModule",
        "transformers.PreTrainedModel",
    }
)

#: Calls that make a tensor from data (``torch.asarray`` is a tensor function anyway).
_DATA_CALLS = frozenset(f"torch.{name}" for name in DATA_FACTORIES | NUMPY_FACTORIES)

PRETRAINED_NOT_MODULES = ("Tokenizer", "Processor", "Config", "FeatureExtractor", "Scheduler", "Pipeline")

PASS_THROUGH_ITERATORS = frozenset(
    {"iter", "list", "tuple", "sorted", "reversed", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm"}
)

Position = tuple[int, int]
Source = tuple[Any, ...]


def _pos(node: ast.AST, end: bool = False) -> Position:
    if end:
        return (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _dotted(node: ast.AST) -> str | None:
    from ferry.lint.context import dotted

    return dotted(node)


#: How many inferences may nest (``x + x + ...``, ``t.to(d).to(d)...``) before the answer is "unknown": the
#: recursion stays far from Python's limit.
MAX_DEPTH = 100


def registry(ctx: FileContext, table: ast.expr) -> list[ast.expr] | None:
    """The values of a dict of the file that ``table`` names, bound once at the top of the file.

    ``MODELS = {"vgg": VGG, ...}``, or one of a tuple assignment (BERT4Rec-VAE's ``MODELS, TRAINERS = {"vae":
    VAEModel}, {"vae": VAETrainer}``). ``None`` for anything else, or a name bound anywhere else.
    """
    if not isinstance(table, ast.Name):
        return None
    found: list[ast.expr] = []
    for stmt in ctx.nodes(ast.Assign):
        for target in stmt.targets:
            if isinstance(target, ast.Name) and target.id == table.id:
                found.append(stmt.value)
            elif isinstance(target, ast.Tuple | ast.List) and any(
                isinstance(t, ast.Name) and t.id == table.id for t in target.elts
            ):
                elts = stmt.value.elts if isinstance(stmt.value, ast.Tuple | ast.List) else []
                if len(elts) != len(target.elts) or any(isinstance(t, ast.Starred) for t in target.elts):
                    return None
                found.extend(
                    v for t, v in zip(target.elts, elts, strict=True) if isinstance(t, ast.Name) and t.id == table.id
                )
    stores = [n for n in ctx.nodes(ast.Name) if n.id == table.id and isinstance(n.ctx, ast.Store | ast.Del)]
    if len(found) != 1 or len(stores) != 1 or not isinstance(found[0], ast.Dict) or not found[0].values:
        return None
    if ctx.enclosing_function(found[0]) is not None:
        return None
    return list(found[0].values)


def own_returns(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return] | None:
    """The ``return`` statements of ``func`` itself (not of nested functions); ``None`` for generators."""
    found: list[ast.Return] = []
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return None
        if isinstance(node, ast.Return):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


#: Attributes and methods only a tensor has (not a module, a batch object that moves itself, or a dict).
_TENSOR_EVIDENCE = frozenset(
    """
    shape T mT view reshape permute transpose unsqueeze squeeze flatten contiguous long int bool argmax argmin
    softmax log_softmax masked_fill masked_fill_ numel dim ndim detach item tolist numpy expand expand_as repeat
    narrow index_select gather flip clamp exp log sigmoid tanh t type_as new_zeros new_ones new_full new_empty
    masked_select topk matmul bmm mm norm view_as reshape_as unbind chunk split
    """.split()
)
#: Attributes that tell nothing either way (any object moved with ``.to()`` may have them).
_TENSOR_NEUTRAL = frozenset(
    "to cuda cpu xpu mps device dtype float half double bfloat16 type size sum mean max min abs eq ne".split()
)
_ORDERINGS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _names(*nodes: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in nodes)


class KindInference:
    """Infers :class:`Kind` s for one file; build it through :attr:`FileContext.kinds`."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        # scope node -> dotted name -> [(position, source)]
        self.bindings: dict[ast.AST, dict[str, list[tuple[Position, Source]]]] = defaultdict(lambda: defaultdict(list))
        # class name -> attribute (``self.x``) -> sources
        self.self_attributes: dict[str, dict[str, list[Source]]] = defaultdict(lambda: defaultdict(list))
        self.values: dict[str, list[ast.AST]] = defaultdict(list)
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = defaultdict(list)
        self.classes: dict[str, ast.ClassDef] = {}
        self._kinds: Memo[ast.AST, Kind | None] = Memo(self._infer, None, max_depth=MAX_DEPTH)
        self._returns: dict[ast.AST, Kind | None] = {}
        self._passed: dict[tuple[ast.AST, str], Kind | None] = {}
        self._call_sites: dict[ast.AST, list[tuple[ast.Call, int]]] = {}
        self._scope_cache: dict[ast.AST, ast.AST] = {}
        #: an empty list literal bound to a name (``graphs = []``) -> that name, for what its appends add
        self._filled: dict[ast.AST, str] = {}
        self._collect()

    # -- collecting bindings ----------------------------------------------------------------------------------

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The innermost function, lambda, class body or module that ``node`` belongs to.

        A function's parameters, decorators and defaults belong to the enclosing scope except the parameters,
        which :meth:`_collect` binds in the function itself.
        """
        cached = self._scope_cache.get(node)
        if cached is not None:
            return cached
        scope: ast.AST = self.ctx.tree
        for above in self.ctx.ancestors(node):
            if isinstance(above, SCOPES):
                scope = above
                break
        self._scope_cache[node] = scope
        return scope

    def _bind(self, target: ast.AST, source: Source, at: Position) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for i, item in enumerate(target.elts):
                if isinstance(item, ast.Starred):
                    self._bind(item.value, ("none",), at)
                else:
                    self._bind(item, ("project", source, i), at)
            return
        name = _dotted(target)
        if name is None:
            return
        scope = self.scope_of(target)
        self.bindings[scope][name].append((at, source))
        if source[0] == "expr":
            self.values[name].append(source[1])
        if name.startswith("self.") and name.count(".") == 1:
            cls = self.ctx.enclosing_class(target)
            if cls is not None:
                self.self_attributes[cls.name][name].append(source)

    def _collect(self) -> None:
        ctx = self.ctx
        for node in ctx.nodes(ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value, ast.List) and not node.value.elts:
                    self._filled[node.value] = target.id  # `graphs = []`, then `graphs.append(g)`
                self._bind(target, ("expr", node.value), _pos(node, end=True))
        for annotated in ctx.nodes(ast.AnnAssign):
            if annotated.value is not None:
                self._bind(annotated.target, ("expr", annotated.value), _pos(annotated, end=True))
            else:
                self._bind(annotated.target, ("annotation", annotated.annotation), _pos(annotated, end=True))
        for augmented in ctx.nodes(ast.AugAssign):
            self._bind(augmented.target, ("aug", augmented), _pos(augmented, end=True))
        for walrus in ctx.nodes(ast.NamedExpr):
            self._bind(walrus.target, ("expr", walrus.value), _pos(walrus, end=True))
        loops: list[ast.For | ast.AsyncFor] = [*ctx.nodes(ast.For), *ctx.nodes(ast.AsyncFor)]
        for loop in loops:
            self._bind(loop.target, ("iter", loop.iter), _pos(loop.target))
        comps: list[ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp] = [
            *ctx.nodes(ast.ListComp),
            *ctx.nodes(ast.SetComp),
            *ctx.nodes(ast.GeneratorExp),
            *ctx.nodes(ast.DictComp),
        ]
        for comp in comps:
            for gen in comp.generators:
                self._bind(gen.target, ("iter", gen.iter), _pos(comp))
        withs: list[ast.With | ast.AsyncWith] = [*ctx.nodes(ast.With), *ctx.nodes(ast.AsyncWith)]
        for stmt in withs:
            for item in stmt.items:
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, ("none",), _pos(item.optional_vars, end=True))
        for handler in ctx.nodes(ast.ExceptHandler):
            if handler.name:
                scope = self.scope_of(handler)
                self.bindings[scope][handler.name].append((_pos(handler), ("none",)))
        funcs: list[ast.FunctionDef | ast.AsyncFunctionDef] = [
            *ctx.nodes(ast.FunctionDef),
            *ctx.nodes(ast.AsyncFunctionDef),
        ]
        for cls in ctx.nodes(ast.ClassDef):  # before the parameters: `self` of an nn.Module method is a module
            self.classes.setdefault(cls.name, cls)
            self.bindings[self.scope_of(cls)][cls.name].append((_pos(cls), ("none",)))
        for func in funcs:
            self.functions[func.name].append(func)
            self.bindings[self.scope_of(func)][func.name].append((_pos(func), ("none",)))
            self._bind_parameters(func)
        for call in ctx.nodes(ast.Call):  # self.register_buffer("name", tensor) makes self.name a tensor
            callee = call.func
            if (
                isinstance(callee, ast.Attribute)
                and callee.attr in ("register_buffer", "register_parameter")
                and isinstance(callee.value, ast.Name)
                and callee.value.id == "self"
                and call.args
                and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)
            ):
                owner = ctx.enclosing_class(call)
                if owner is not None:
                    self.self_attributes[owner.name][f"self.{call.args[0].value}"].append(("kind", TENSOR))
        for scope_names in self.bindings.values():
            for entries in scope_names.values():
                entries.sort(key=lambda entry: entry[0])

    def _bind_parameters(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = func.args
        positional = [*args.posonlyargs, *args.args]
        defaults: dict[str, ast.expr] = {}
        for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
            defaults[arg.arg] = default
        for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
            if kw_default is not None:
                defaults[arg.arg] = kw_default
        bindings = self.bindings[func]
        at = _pos(func)
        cls = self.ctx.enclosing_class(func)
        for i, arg in enumerate([*positional, *args.kwonlyargs]):
            if i == 0 and cls is not None and arg.arg == "self" and self.class_is_module(cls.name):
                source: Source = ("kind", MODULE)
            elif arg.annotation is not None:
                source = ("annotation", arg.annotation)
            elif arg.arg in defaults:
                source = ("expr", defaults[arg.arg])
            else:
                source = ("passed", func, arg.arg, i if i < len(positional) else None)
            bindings[arg.arg].append((at, source))
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                bindings[extra.arg].append((at, ("none",)))

    # -- questions --------------------------------------------------------------------------------------------

    def assigned_values(self, name: str) -> list[ast.AST]:
        """Every expression assigned to the dotted name ``name`` anywhere in the file (``x = ...``, ``a.b = ...``)."""
        return self.values.get(name, [])

    def _names_module_classes(self, name: str) -> bool:
        """Whether the file binds ``name`` only to module classes of the file, at least once.

        ``base = MLPBase``, ``net_cls = ResNet if deep else Plain``: calling the name builds a module.
        """
        choices = self.class_choices(name)
        return bool(choices) and all(self.class_is_module(c) for c in choices)

    def class_choices(self, name: str) -> frozenset[str]:
        """The classes of the file that ``name`` is bound to, when every binding names one or several of them.

        ``Exp = Exp_Informer``; ``net_cls = ResNet if deep else Plain``; ``Model = MODELS[args.model]`` with
        ``MODELS`` a dict of the file's classes (see :func:`registry`). Empty when some binding is anything else,
        or for a class itself.
        """
        if name in self.classes:
            return frozenset()
        found: set[str] = set()
        values = self.assigned_values(name)
        for value in values:
            options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            if isinstance(value, ast.Subscript) and (entries := registry(self.ctx, value.value)):
                options = list(entries)  # `Model = MODELS[args.model]`: any class the table holds
            for option in options:
                full = self.ctx.qualname(option) if isinstance(option, ast.Name | ast.Attribute) else None
                if full is None or full not in self.classes:
                    return frozenset()
                found.add(full)
        return frozenset(found)

    def built_classes(self, func: ast.expr) -> frozenset[str]:
        """The classes of the file that calling ``func`` builds: its name, or a name bound only to classes.

        ``Exp = Exp_Informer``, ``Model = MODELS[args.model]`` (see :meth:`class_choices`); or a look-up in a dict
        of the file's classes (``TRAINERS[args.trainer_code](...)``), which may build any class the dict holds.
        """
        if isinstance(func, ast.Subscript):
            return frozenset(e.id for e in registry(self.ctx, func.value) or [] if isinstance(e, ast.Name))
        if not isinstance(func, ast.Name):
            return frozenset()
        return frozenset({func.id, *self.class_choices(func.id)})

    def instance_classes(self, name: str) -> frozenset[str] | None:
        """The classes of the file whose instances ``name`` holds, when each binding of it builds one of them.

        ``model = Net(...).to(device)``, ``model = Model(...)`` with ``Model = MODELS[args.model]``. ``None`` when
        some binding is anything else (a parameter, a call of other code, a loop variable).
        """
        values = self.assigned_values(name)
        if not values or any(n.id == name for n in self._stores_not_assigned(name)):
            return None
        found: set[str] = set()
        for value in values:
            while (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr in ("to", "cuda", "cpu", "train", "eval", "float", "half", "double")
            ):
                value = value.func.value
            built = self.built_classes(value.func) & self.classes.keys() if isinstance(value, ast.Call) else set()
            if not built:
                return None
            found |= built
        return frozenset(found)

    def _stores_not_assigned(self, name: str) -> list[ast.Name]:
        """Bindings of ``name`` other than plain ``=`` assignments (loop targets, parameters' names, ``with``)."""
        assigned = {id(t) for n in self.ctx.nodes(ast.Assign) for t in n.targets}
        found = [
            n
            for n in self.ctx.nodes(ast.Name)
            if n.id == name and isinstance(n.ctx, ast.Store) and id(n) not in assigned
        ]
        if any(a.arg == name for a in self.ctx.nodes(ast.arg)):
            found.append(ast.Name(id=name))
        return found

    def class_alias(self, name: str) -> str | None:
        """The class of the file that every binding of ``name`` names (``Exp = Exp_Informer``), or ``None``.

        Bound at least once, and never to anything else; the class itself is not an alias of itself.
        """
        choices = self.class_choices(name)
        return next(iter(choices)) if len(choices) == 1 else None

    def class_is_module(self, name: str, _seen: frozenset[str] = frozenset()) -> bool:
        """Whether the class ``name`` of this file subclasses ``nn.Module``.

        Directly, through classes of the file, or through a known subclass such as ``LightningModule``.
        """
        cls = self.classes.get(name)
        if cls is None or name in _seen:
            return False
        for base in cls.bases:
            full = self.ctx.qualname(base)
            if full is None:
                continue
            if full in MODULE_BASES or (full.startswith("torch.nn.") and full.rsplit(".", 1)[-1][:1].isupper()):
                return True
            if full in self.classes and self.class_is_module(full, _seen | {name}):
                return True
            held = self._class_attribute_class(full)  # `class pl: LightningModule = LightningModule`
            if held is not None and self.class_is_module(held, _seen | {name}):
                return True
        return False

    def _class_attribute_class(self, full: str) -> str | None:
        """``A.B`` where ``A`` is a class of this file whose body binds ``B = C``, ``C`` a class of it: ``C``."""
        owner, _, attr = full.rpartition(".")
        cls = self.classes.get(owner)
        if cls is None:
            return None
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets)
                and isinstance(stmt.value, ast.Name)
                and stmt.value.id in self.classes
            ):
                return stmt.value.id
        return None

    def infer(self, node: ast.AST) -> Kind | None:
        """The kind of expression ``node`` where it stands, or ``None`` when unknown (or too deep to follow)."""
        return self._kinds(node)

    def used_as_tensor(self, name: ast.Name) -> bool:
        """Whether the name ``name``, of no known kind, is a tensor by how its scope uses it.

        Evidence: ``x.shape``, ``x.view(...)`` and other tensor-only attributes and methods, slicing
        (``x[:-1, :]``), arithmetic and orderings with it, ``torch`` functions taking it first, or a function of the
        file whose parameter it fills uses it so; a name unpacked beside such a name (``for src, tgt in loader:``)
        counts too. Against: module and container methods (``x.parameters()``, ``x.keys()``), other attributes
        (``data.edge_index``: an object, which may move itself in place), string keys (``batch["input_ids"]``).
        """
        scope = self.scope_of(name)
        siblings = self._unpacked_with(scope, name.id)
        verdicts = [self._tensor_use(scope, n, 0) for n in (name.id, *siblings)]
        if verdicts[0] is False or any(v is False for v in verdicts[1:]):
            return False
        return any(v is True for v in verdicts)

    def _unpacked_with(self, scope: ast.AST, name: str) -> list[str]:
        """The other names of a tuple target that also binds ``name`` in ``scope`` (``for x, y in loader``)."""
        found: list[str] = []
        for node in ast.walk(scope):
            targets: list[ast.expr] = []
            if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                targets = [node.target]
            elif isinstance(node, ast.Assign):
                targets = node.targets
            for target in targets:
                if isinstance(target, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in target.elts):
                    names = [e.id for e in target.elts if isinstance(e, ast.Name)]
                    if name in names and len(names) == len(target.elts):
                        found.extend(n for n in names if n != name and n != "_")
        return found

    def _tensor_use(self, scope: ast.AST, name: str, depth: int) -> bool | None:
        """``True``: ``scope`` uses ``name`` as only a tensor is used; ``False``: as something else; ``None``."""
        evidence = False
        for node in ast.walk(scope):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
                if node.attr in _TENSOR_EVIDENCE:
                    evidence = True
                elif node.attr not in _TENSOR_NEUTRAL:
                    return False  # `batch.premise`, `model.parameters`, `data.edge_index`
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
                index = node.slice
                if isinstance(index, ast.Constant) and isinstance(index.value, str):
                    return False  # `batch["input_ids"]`: a dict or a BatchEncoding
                parts = index.elts if isinstance(index, ast.Tuple) else [index]
                if any(isinstance(p, ast.Slice) or (isinstance(p, ast.Constant) and p.value is None) for p in parts):
                    evidence = True  # `tgt[:-1, :]`, `x[:, None]`: slicing of something `.to()` is called on
            elif isinstance(node, ast.BinOp) and _names(node.left, node.right, name=name):
                evidence = True
            elif isinstance(node, ast.Compare) and any(isinstance(o, _ORDERINGS) for o in node.ops):
                evidence = evidence or _names(node.left, *node.comparators, name=name)
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
                if node.args[0].id != name:
                    continue
                full = self.ctx.qualname(node.func) or ""
                head, _, last = full.rpartition(".")
                if head in ("torch", "torch.nn.functional") and last[:1].islower() and last not in NOT_TENSOR_FUNCTIONS:
                    evidence = True
                elif isinstance(node.func, ast.Name) and depth == 0 and not isinstance(scope, ast.Lambda):
                    defined = [f for f in self.functions.get(node.func.id, []) if self.ctx.enclosing_class(f) is None]
                    if len(defined) == 1 and defined[0].args.args:
                        verdict = self._tensor_use(defined[0], defined[0].args.args[0].arg, depth + 1)
                        if verdict is False:
                            return False
                        evidence = evidence or bool(verdict)
        return True if evidence else None

    def class_chain(self, cls: ast.ClassDef | None) -> list[ast.ClassDef]:
        """``cls`` and its base classes defined in this file, nearest first (single inheritance, a few levels)."""
        chain: list[ast.ClassDef] = []
        while cls is not None and cls not in chain and len(chain) < 5:
            chain.append(cls)
            bases = [_dotted(b) for b in cls.bases if _dotted(b) != "object"]
            cls = self.classes.get(bases[0] or "") if len(bases) == 1 else None
        return chain

    def lookup(self, name: str, at: ast.AST) -> Kind | None:
        """The kind of the dotted ``name`` as used at node ``at``."""
        if name.startswith("self.") and name.count(".") == 1:
            # the class's own attribute, or one a base class of the file sets (`Exp_Basic.__init__` for `Exp_Main`)
            chain = self.class_chain(self.ctx.enclosing_class(at))
            cls = next((c for c in chain if name in self.self_attributes.get(c.name, {})), None)
            if cls is not None:
                sources = self.self_attributes[cls.name][name]
                # `self.actions = self.actions.long()`: a conversion of the attribute keeps what it is
                made = [s for s in sources if not _converts_itself(s, name)]
                kinds = [self._source_kind(s) for s in made or sources]
                if len(kinds) > 1 and all(k is not None and k.is_module for k in kinds):
                    # DrQA's `self.network = RnnDocReader(...)`, later `torch.nn.DataParallel(self.network)`: a
                    # module either way (wrapped or not: not known)
                    return self._agree(kinds) or MODULE
                return self._agree(kinds)
        found = self.find_binding(name, at)
        return self._source_kind(found[2]) if found is not None else None

    def find_binding(self, name: str, at: ast.AST) -> tuple[ast.AST, Position, Source] | None:
        """``(scope, position, source)`` of the binding of the dotted ``name`` that a use at ``at`` sees.

        The latest binding before ``at`` in the innermost scope that binds ``name``; in an enclosing scope, its
        latest binding. ``None`` when nothing binds it, or when the innermost scope binds it only after ``at`` (a
        loop-carried value, or a use before assignment).
        """
        use = _pos(at)
        scope: ast.AST | None = self.scope_of(at)
        first = True
        while scope is not None:
            entries = self.bindings.get(scope, {}).get(name)
            if entries:
                before = [entry for entry in entries if entry[0] <= use]
                if before:
                    return (scope, *before[-1])
                if first:
                    return None
                return (scope, *entries[-1])
            first = False
            scope = self._outer_scope(scope)
        return None

    def _outer_scope(self, scope: ast.AST) -> ast.AST | None:
        if isinstance(scope, ast.Module):
            return None
        outer = self.scope_of(scope)
        while isinstance(outer, ast.ClassDef):  # methods do not see names of the class body
            outer = self.scope_of(outer)
        return outer

    # -- inference --------------------------------------------------------------------------------------------

    def _source_kind(self, source: Source) -> Kind | None:
        tag = source[0]
        if tag == "expr":
            return self.infer(source[1])
        if tag == "kind":
            return source[1]  # type: ignore[no-any-return]
        if tag == "annotation":
            return self._annotation_kind(source[1])
        if tag == "project":
            return self._project(self._source_kind(source[1]), source[2])
        if tag == "iter":
            return self.element(source[1])
        if tag == "passed":
            return self._passed_kind(source[1], source[2], source[3])
        if tag == "aug":
            node: ast.AugAssign = source[1]
            before = self.infer(node.target) if isinstance(node.target, ast.Name) else None
            value = self.infer(node.value)
            if TENSOR in (before, value):
                return TENSOR
            return before
        return None

    def _annotation_kind(self, annotation: ast.AST) -> Kind | None:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):  # Tensor | None
            left, right = self._annotation_kind(annotation.left), self._annotation_kind(annotation.right)
            return left or right
        if isinstance(annotation, ast.Subscript) and self.ctx.qualname(annotation.value) in (
            "typing.Optional",
            "Optional",
        ):
            return self._annotation_kind(annotation.slice)
        full = self.ctx.qualname(annotation)
        if full is None:
            return None
        if full in TENSOR_CLASSES or full == "Tensor":
            return TENSOR
        if full in MODULE_BASES or (full in self.classes and self.class_is_module(full)):
            return MODULE
        if full == "torch.device":
            return DEVICE
        if full == "torch.utils.data.DataLoader":
            return LOADER
        if full in ("torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"):
            return OPTIMIZER
        return None

    def _filled_kind(self, literal: ast.List, name: str) -> Kind:
        """``graphs = []`` filled by ``graphs.append(g)``/``graphs.extend(...)`` in the same scope: their agreed kind.

        A list of instances of a class of the file, of tensors or of modules, as the scope's appends make it; no
        element kind when they disagree or nothing is appended.
        """
        scope = self.scope_of(literal)
        kinds: list[Kind | None] = []
        for call in self.ctx.nodes(ast.Call):
            func = call.func
            if not (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == name
                and func.attr in ("append", "extend", "insert")
                and self.scope_of(call) is scope
            ):
                continue
            if func.attr == "append" and len(call.args) == 1:
                kinds.append(self.infer(call.args[0]))
            elif func.attr == "extend" and len(call.args) == 1:
                kinds.append(self.element(call.args[0]))
            elif func.attr == "insert" and len(call.args) == 2:
                kinds.append(self.infer(call.args[1]))
            else:
                kinds.append(None)
        return Kind("seq", element=self._agree(kinds)) if kinds else Kind("seq")

    def _passed_kind(self, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, index: int | None) -> Kind | None:
        """An instance of a class of the file, or a module, that every call of ``func`` passes as parameter ``name``.

        ``dqn.learn(mem)`` with ``mem = ReplayMemory(...)``: inside ``learn``, ``mem.sample(...)`` is that class's
        method. Only where ``func``'s name is its own in the file (one function or method of that name, no
        decorator), every call is seen, and every call passes the argument plainly; other kinds stay unknown.
        """
        key = (func, name)
        if key in self._passed:
            return self._passed[key]
        self._passed[key] = None  # a call inside `func` itself, or a cycle of calls: not known
        found: Kind | None = None
        calls = self._calls_of(func)
        if calls:
            kinds: list[Kind | None] = []
            for call, offset in calls:
                arg = next((k.value for k in call.keywords if k.arg == name), None)
                if arg is None and index is not None and index - offset >= 0:
                    position = index - offset
                    before = call.args[: position + 1]
                    if position < len(call.args) and not any(isinstance(a, ast.Starred) for a in before):
                        arg = call.args[position]
                if arg is None or any(k.arg is None for k in call.keywords):
                    kinds = [None]
                    break
                kinds.append(self.infer(arg))
            kind = self._agree(kinds)
            found = kind if kind is not None and (kind.name == "instance" or kind.is_module) else None
        self._passed[key] = found
        return found

    def _calls_of(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.Call, int]]:
        """The calls of ``func`` in the file, each with how many parameters come before its arguments (``self``)."""
        known = self._call_sites.get(func)
        if known is None:
            known = self._call_sites[func] = self._find_calls(func)
        return known

    def _find_calls(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.Call, int]]:
        cls = self.ctx.enclosing_class(func)
        method = cls is not None and func in cls.body
        if method and cls is not None and func.name == "__call__" and not func.decorator_list:
            # `early_stopping(val_loss, model, path)`: calls of an instance of the class
            return [
                (call, 1)
                for call in self.ctx.nodes(ast.Call)
                if isinstance(call.func, ast.Name)
                and (held := self.infer(call.func)) is not None
                and held.name == "instance"
                and held.cls == cls.name
            ]
        if func.decorator_list or len(self.functions.get(func.name, [])) != 1 or func.name.startswith("__"):
            return []
        if method and func.name in self.classes:
            return []
        found: list[tuple[ast.Call, int]] = []
        for call in self.ctx.nodes(ast.Call):
            callee = call.func
            if method and isinstance(callee, ast.Attribute) and callee.attr == func.name:
                found.append((call, 1))
            elif not method and isinstance(callee, ast.Name) and callee.id == func.name:
                found.append((call, 0))
        called = {id(c.func) for c, _ in found}
        if not method and any(  # handed on as a value (`map(fn, ...)`, `apply(fn)`): called where it is not seen
            n.id == func.name and isinstance(n.ctx, ast.Load) and id(n) not in called for n in self.ctx.nodes(ast.Name)
        ):
            return []
        return found

    @staticmethod
    def _agree(kinds: list[Kind | None]) -> Kind | None:
        if kinds and all(k == kinds[0] for k in kinds):
            return kinds[0]
        return None

    @staticmethod
    def _project(kind: Kind | None, index: int) -> Kind | None:
        """The kind of item ``index`` of a value of kind ``kind`` (unpacking or indexing by a constant)."""
        if kind is None:
            return None
        if kind.name == "tuple":
            return kind.items[index] if 0 <= index < len(kind.items) else None
        if kind.name == "batch" or kind.is_tensor:
            return TENSOR
        if kind.name in ("seq", "dict"):
            return kind.element
        return None

    def element(self, iterable: ast.AST) -> Kind | None:
        """The kind of what iterating over ``iterable`` gives."""
        if isinstance(iterable, ast.Call):
            name = self.ctx.call_name(iterable)
            if name == "enumerate" and iterable.args:
                return Kind("tuple", items=(None, self.element(iterable.args[0])))
            if name == "zip":
                return Kind("tuple", items=tuple(self.element(arg) for arg in iterable.args))
            if name in PASS_THROUGH_ITERATORS and iterable.args:
                return self.element(iterable.args[0])
            if isinstance(iterable.func, ast.Attribute) and iterable.func.attr in ("values",) and not iterable.args:
                owner = self.infer(iterable.func.value)
                return owner.element if owner is not None and owner.name == "dict" else None
            if isinstance(iterable.func, ast.Attribute) and iterable.func.attr == "items" and not iterable.args:
                owner = self.infer(iterable.func.value)
                if owner is not None and owner.name == "dict":
                    return Kind("tuple", items=(None, owner.element))
                return None
        kind = self.infer(iterable)
        if kind is None:
            name = _dotted(iterable)
            if name and "loader" in name.rsplit(".", 1)[-1].lower():
                return BATCH  # `for x, y in train_loader:` with the loader passed in
            return None
        if kind.name in ("loader", "seq"):
            return kind.element
        if kind.name == "dataset":
            return BATCH
        if kind.is_tensor:
            return TENSOR
        if kind.name == "tuple":
            return self._agree(list(kind.items))
        return None

    def _infer(self, node: ast.AST) -> Kind | None:
        if isinstance(node, ast.Name | ast.Attribute):
            return self._infer_name(node)
        if isinstance(node, ast.Call):
            return self._infer_call(node)
        if isinstance(node, ast.BinOp):
            left, right = self.infer(node.left), self.infer(node.right)
            if TENSOR in (left, right):
                return TENSOR
            if NDARRAY in (left, right) and not isinstance(node.op, ast.MatMult):
                others = [k for k, n in ((left, node.left), (right, node.right)) if k != NDARRAY and not _number(n)]
                return NDARRAY if not others else None  # `pos / np.power(10000, i / dim)`: an array
            return None
        if isinstance(node, ast.UnaryOp):
            return self.infer(node.operand) if not isinstance(node.op, ast.Not) else None
        if isinstance(node, ast.Compare):
            kinds = [self.infer(node.left), *(self.infer(c) for c in node.comparators)]
            if TENSOR in kinds and all(
                isinstance(op, ast.Eq | ast.NotEq | ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops
            ):
                return TENSOR
            return None
        if isinstance(node, ast.Subscript):
            owner = self.infer(node.value)
            if owner is None:
                return None
            if owner.is_tensor or owner.name == "batch":
                return TENSOR
            if owner.name == "tuple" and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                return self._project(owner, node.slice.value)
            if owner.name in ("seq", "dict"):
                return owner.element if not isinstance(node.slice, ast.Slice) else owner
            if owner.name == "dataset" and not isinstance(node.slice, ast.Slice):
                return BATCH  # `dataset[i]`: one item, as iterating over the dataset gives
            if owner.name == "ndarray" and isinstance(node.slice, ast.Slice | ast.Tuple):
                return NDARRAY  # `np.arange(n)[:, None]`, `table[:t]`: still an array
            return None
        if isinstance(node, ast.IfExp):
            return self._agree([self.infer(node.body), self.infer(node.orelse)])
        if isinstance(node, ast.Tuple):
            return Kind(
                "tuple", items=tuple(self.infer(e) if not isinstance(e, ast.Starred) else None for e in node.elts)
            )
        if isinstance(node, ast.List) and not node.elts and node in self._filled:
            return self._filled_kind(node, self._filled[node])
        if isinstance(node, ast.List | ast.Set):
            kinds = [self.infer(e) for e in node.elts]
            return Kind("seq", element=self._agree(kinds)) if kinds else Kind("seq")
        if isinstance(node, ast.Dict):
            kinds = [self.infer(v) for v in node.values]
            return Kind("dict", element=self._agree(kinds)) if kinds else Kind("dict")
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            return Kind("seq", element=self.infer(node.elt))
        if isinstance(node, ast.DictComp):
            return Kind("dict", element=self.infer(node.value))
        if isinstance(node, ast.NamedExpr):
            return self.infer(node.value)
        if isinstance(node, ast.Await | ast.Starred):
            return None
        return None

    def _infer_name(self, node: ast.Name | ast.Attribute) -> Kind | None:
        name = _dotted(node)
        if name is not None:
            head = name.split(".")[0]
            bound = self.lookup(name, node)
            if bound is not None:
                return bound
            if "." not in name or head in self.ctx.imports:
                return None
        if isinstance(node, ast.Attribute):
            owner = self.infer(node.value)
            if owner is None:
                return None
            if owner.is_tensor:
                if node.attr in TENSOR_ATTRIBUTES:
                    return TENSOR
                if node.attr == "device":
                    return DEVICE
                return None
            if owner.is_module and owner.parallel and node.attr == "module":
                return MODULE
        return None

    def _infer_call(self, node: ast.Call) -> Kind | None:
        func = node.func
        full = self.ctx.qualname(func)
        if full is not None:
            kind = self._known_call(full, node)
            if kind is not False:
                return kind  # type: ignore[return-value]
        if isinstance(func, ast.Attribute):
            owner = self.infer(func.value)
            if owner is not None:
                return self._method_result(owner, func.attr, node)
            defined = self.functions.get(func.attr, [])
            if len(defined) == 1 and self.ctx.enclosing_class(defined[0]) is not None and func.attr != "__init__":
                return self.returns(defined[0])
            return None
        if isinstance(func, ast.Subscript) and (entries := registry(self.ctx, func.value)):
            # `TRAINERS[args.trainer_code](...)`, `MODELS[name](args)`: a table of the file's classes
            names = {e.id if isinstance(e, ast.Name) else "" for e in entries}
            if all(name in self.classes for name in names):
                if all(self.class_is_module(name) for name in names):
                    return MODULE
                if len(names) == 1 and not any(self.class_is_module(name) for name in names):
                    return Kind("instance", cls=names.pop())
        callee = self.infer(func)
        if callee is not None and callee.is_module:
            return TENSOR  # calling a module: its output
        return None

    def _known_call(self, full: str, node: ast.Call) -> Kind | bool | None:
        """The kind a call to ``full`` gives; ``False``: not a function this table knows."""
        if full in TENSOR_CLASSES or full in _DATA_CALLS:
            return TENSOR
        if full in PARALLEL_WRAPPERS:
            return PARALLEL_MODULE
        if full in DATA_LOADERS:
            return LOADER
        if full == "next" and node.args:  # `next(iter(loader))`, `next(batches)`: one item of what is iterated
            iterated = node.args[0]
            if isinstance(iterated, ast.Call) and self.ctx.qualname(iterated.func) == "iter" and iterated.args:
                iterated = iterated.args[0]
            return self.element(iterated)
        if full == "torch.device":
            return DEVICE
        if full in ("copy.deepcopy", "copy.copy") and node.args:
            return self.infer(node.args[0])  # an EMA model: `copy.deepcopy(model)` is a module as `model` is
        if full in LOADS:
            return LOADED
        if full in COMPILERS and node.args:
            inner = self.infer(node.args[0])
            return inner if inner is not None and inner.is_module else None
        if full.startswith("torch.optim.lr_scheduler."):
            return SCHEDULER
        if full.startswith("torch.optim.") and full.rsplit(".", 1)[-1][:1].isupper():
            return OPTIMIZER
        if full.startswith("torch.utils.data.") and full.endswith("Dataset"):
            return DATASET
        if full.startswith(TENSOR_SUBMODULES):
            return TENSOR
        if full.startswith("torch.nn."):
            last = full.rsplit(".", 1)[-1]
            if last[:1].isupper() and not full.startswith("torch.nn.utils."):
                return MODULE
            return None
        if full.startswith("torch."):
            parts = full.split(".")
            if len(parts) == 2 and parts[1] not in NOT_TENSOR_FUNCTIONS and parts[1] not in NOT_TENSOR_SUBMODULES:
                return TENSOR if not parts[1][:1].isupper() else None
            return None
        if full.startswith(("numpy.", "np.")) and full.rsplit(".", 1)[-1][:1].islower():
            if full.startswith("numpy.random."):  # `np.random.randn(4)`: host data (an array, or a number)
                return NDARRAY if full.count(".") == 2 and full.rsplit(".", 1)[-1] not in _NOT_RANDOM_DATA else None
            return NDARRAY if full.count(".") == 1 else None
        if full.startswith("torchvision.models.") and full.rsplit(".", 1)[-1][:1].islower():
            return MODULE
        if full == "timm.create_model":
            return MODULE
        if full.endswith(".from_pretrained") and full.startswith(("transformers.", "diffusers.")):
            owner = full.split(".")[-2]
            if "Model" in owner and not any(word in owner for word in PRETRAINED_NOT_MODULES):
                return MODULE
            return None
        if full in self.classes:
            if self.class_is_module(full):
                return MODULE
            cls = self.classes[full]
            bases = {self.ctx.qualname(b) or "" for b in cls.bases}
            if any(b.startswith("torch.utils.data.") and b.endswith("Dataset") for b in bases):
                return DATASET
            if any(b in DATA_LOADERS for b in bases):
                return LOADER
            return Kind("instance", cls=full)
        if "." not in full and full not in self.functions and self._names_module_classes(full):
            return MODULE  # `base = MLPBase` (or `CNNBase`), then `self.base = base(obs_shape[0])`
        aliased = self.class_alias(full) if "." not in full and full not in self.functions else None
        if aliased is not None:  # `Exp = Exp_Informer`, then `exp = Exp(args)`
            return self._known_call(aliased, node)
        if "." not in full:
            defined = [f for f in self.functions.get(full, []) if self.ctx.enclosing_class(f) is None]
            if len(defined) == 1:
                return self.returns(defined[0])
        return False

    def _method_result(self, owner: Kind, method: str, node: ast.Call) -> Kind | None:
        if owner.is_tensor:
            if method in NOT_TENSOR_METHODS:
                return NDARRAY if method == "numpy" else None
            if method == "type" and not node.args and not node.keywords:
                return None
            if method in ("unbind", "split", "chunk", "tensor_split"):
                return Kind("seq", element=TENSOR)
            return TENSOR
        if owner.is_module:
            if method in MODULE_SELF_METHODS:
                return owner
            if method == "state_dict":
                return Kind("state_dict", parallel=owner.parallel)
            if method in ("forward", "__call__"):
                return TENSOR
            return self._defined_method(owner, method)
        if owner.name == "instance":
            return self._defined_method(owner, method)
        if owner.name in ("seq", "dict") and method in ("pop", "get"):
            return owner.element
        if owner.name == "ndarray" and method in _ARRAY_METHODS:
            return NDARRAY  # `angle.astype(np.float32)`
        return None

    def _defined_method(self, owner: Kind, method: str) -> Kind | None:
        candidates = self.functions.get(method, [])
        if owner.cls is not None:
            candidates = [
                f for f in candidates if (c := self.ctx.enclosing_class(f)) is not None and c.name == owner.cls
            ]
        if len(candidates) == 1 and method != "__init__":
            return self.returns(candidates[0])
        return None

    def returns(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> Kind | None:
        """What ``func`` returns, when all of its ``return`` statements agree (``None`` otherwise or for generators)."""
        if func in self._returns:
            return self._returns[func]
        self._returns[func] = None  # recursion guard
        statements = own_returns(func)
        if statements is None:
            return None
        # a bare `return` (or `return None`) is the failure path of a builder (`print("ERROR: ..."); return`): what
        # the caller uses is what the other returns give, as a name that holds `None` on some paths
        values = [r.value for r in statements if not (r.value is None or _none(r.value))]
        kind = self._agree([self.infer(v) for v in values]) if values else None
        self._returns[func] = kind
        return kind


def _number(node: ast.AST) -> bool:
    """A number literal (``2``, ``-1.5``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)
