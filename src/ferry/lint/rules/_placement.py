"""Where values live: a small device-flow analysis shared by FRY006, FRY007 and FRY011.

Not a rule. Per function (and for the module's top level), statement by statement, it tracks for each name whether
it holds a value on the **host** (CPU) or on the **chosen device**, and reports three mistakes:

- ``FRY006`` input-on-other-device: a module moved to the device is called with a tensor that stayed on the host,
  or a device tensor and a host tensor meet in arithmetic or a comparison;
- ``FRY007`` module-never-moved: a module built here and never moved is called with an input moved to the device;
- ``FRY011`` loss-on-other-device: a loss gets a device tensor and a host target, or a loss built with a host
  ``weight=`` and never moved gets device tensors.

Host values: tensors made by torch factories without ``device=`` (``torch.randn``, ``torch.tensor(data)``,
``torch.from_numpy``, ...), what ``.cpu()`` gives, modules built from ``torch.nn`` classes, ``torchvision.models``
builders, ``timm.create_model`` and ``nn.Module`` subclasses of the file. Device values: ``.to(device)``,
``.cuda()``, factories with ``device=``, outputs of modules on the device. "The device" is any accelerator or a
device chosen at run time (``torch.device("cuda" if torch.cuda.is_available() else "cpu")``, a name such as
``device`` or ``args.device``): code that only works when that choice is the CPU is the bug. Operations follow their
inputs; ``if``/``else`` branches merge (a move under ``if torch.cuda.is_available():`` counts as a move to the
device), loop bodies are read twice so values carried from one iteration to the next are merged.

Across the functions of a file: a function defined once at the top of the file and only ever called (never passed
on, decorated or rebound) is read once per way it is called (up to six; beyond that with the calls' values merged):
its parameters take what that call passes (callers are read first), and its globals the module-level models,
tensors and loaders as they are at that call when the module's own code makes it (merged over the module's calls
for calls made in other functions). A call of it returns what its ``return`` statements give for the values passed
(read two calls deep at most). A module passed to such a function keeps its value in the caller when the function
only reads it (calls it, ``.train()``, ``.parameters()``, a method of the file's module classes that changes nothing
of it, or hands it on to another such function) or returns it. A method of the file's module classes that hands its
input to one of the module's layers (``def decode(self, z): return self.fc(z)``) is a call of the module.

Branches that decide on the accelerator (``if torch.cuda.is_available():``, ``if device_type == "cuda":``, ``not``
of those): on a GPU the branch that runs there decides where a value is. ``nn.DataParallel``/``DistributedDataParallel``
and ``torch.compile`` share the module they wrap (a wrapper of a module never moved is never moved); ``alias = model``
makes what is done to either count for both.

A ``DataLoader`` over a ``TensorDataset`` gives batches where the dataset's tensors are; over a dataset class of the
file, where its ``__getitem__`` makes them; over a dataset the file does not show (``DataLoader(self.train_set)``),
on the host, where datasets make their samples and the default collate stacks them. A ``collate_fn`` of the file
gives them what it returns; with any other one, and for a loader the file does not show (``for x, y in loader`` of
a parameter), batches are on the host only where the loop that reads them moves some of them (``x, y = x,
y.to(device)``: its author knows they arrive on the host).

Everything else is unknown, and unknown values are never reported: parameters of functions called from elsewhere,
results of calls the analysis does not know, batches of loaders that nothing shows to be on the host, values passed
through ``with`` blocks of unknown context managers, files that call ``torch.set_default_device``. Modules passed to
an unknown function, stored elsewhere, or given an attribute become unknown too, since the function may move them.
A host tensor that may be zero-dimensional (``torch.tensor(2.0)``, a reduction, an element) combines with device
tensors without error and is not reported in arithmetic.

The analysis is split in four modules: this one (scopes, statements, expressions, reports),
:mod:`~ferry.lint.rules._placement_calls` (calls, and the three rules' checks),
:mod:`~ferry.lint.rules._placement_devices` (device expressions) and :mod:`~ferry.lint.rules._placement_values`
(what is known of a value, branch merges, the analysis's own tables of names). What it knows of PyTorch's API
(factories, moves, layers, losses, loaders) comes from :mod:`ferry.lint.torch_api`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace

from ferry.lint.context import FileContext, dotted
from ferry.lint.rules._placement_calls import CallsMixin, init_helpers, module_methods
from ferry.lint.rules._placement_values import (
    ACCELERATOR_NAMES,
    CHECKED_LOSSES,
    CONFIG_OWNERS,
    DEVICE,
    GPU_ORDINAL_LISTS,
    GPU_ORDINAL_NAMES,
    HARMLESS_CONTEXTS,
    HARMLESS_READS,
    HOST,
    NONE,
    NUMBER,
    OTHER,
    SAFE_MODULE_USES,
    SAME_DEVICE_ATTRIBUTES,
    SAME_MODULE,
    STRING,
    TENSORISH,
    UNKNOWN,
    Val,
    agree,
    bound_names,
    int_literal,
    is_static,
    join,
    keeping_parameters,
    keyed,
    line,
    loader_name,
    merge,
    moves_items,
    moves_names,
    property_setter,
    short,
    tensor_use,
)
from ferry.lint.torch_api import (
    ACCELERATORS,
    AVAILABILITY_CHECKS,
    COMPILERS,
    GPU_FLAGS,
    HOST_TARGET_LOSSES,
    MOVES,
    MOVING_METHODS,
    NOT_TENSOR_ATTRIBUTES,
    PARALLEL_WRAPPERS,
    TENSOR_CLASSES,
)

__all__ = ["Report", "converted_argument", "device_numpy", "reports", "tensor_moves"]

_ORDERINGS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


@dataclass(frozen=True)
class Report:
    """One finding of the analysis: the rule's code, where to report it, and the message."""

    code: str
    node: ast.AST
    message: str


@dataclass(frozen=True)
class _Analysis:
    reports: list[Report]
    tensor_moves: frozenset[ast.Call]
    device_numpy: dict[ast.Call, Val]
    host_fed: frozenset[ast.AST] = frozenset()
    converted: dict[ast.Call, int] | None = None


def _has_unknown_batch(val: Val, depth: int = 0) -> bool:
    """Whether ``val`` is, or holds in its tuples, a loader's batch whose place is not known."""
    if val.what == "tuple" and depth < 3:
        return any(_has_unknown_batch(item, depth + 1) for item in val.items)
    return val.what == "batch" and val.where is None


def _batch_on_host(
    val: Val, target: ast.expr | None = None, tensor: Callable[[str], bool] | None = None, depth: int = 0
) -> Val:
    """``val`` with each batch of unknown place in it on the host.

    With the ``target`` that binds ``val`` and ``tensor`` (whether the code that follows uses a name as only a
    tensor is used), an item bound to a name that is never used so is left alone: a collated tuple may hold a
    string or a list besides its tensors (KnowledgeGraphEmbedding's ``positive, negative, bias, mode``).
    """
    unpacked = isinstance(target, ast.Tuple | ast.List) and not any(isinstance(e, ast.Starred) for e in target.elts)
    if val.what == "batch" and val.where is None and not val.item and unpacked and tensor is not None:
        assert isinstance(target, ast.Tuple | ast.List)
        val = Val("tuple", items=tuple(Val("batch", item=True) for _ in target.elts))  # `x, y, mode = batch`
    if val.what == "tuple" and depth < 3:
        elts = target.elts if isinstance(target, ast.Tuple | ast.List) else None
        if elts is not None and (len(elts) != len(val.items) or any(isinstance(e, ast.Starred) for e in elts)):
            elts = None
        return replace(
            val,
            items=tuple(
                _batch_on_host(item, elts[i] if elts else None, tensor if elts else None, depth + 1)
                for i, item in enumerate(val.items)
            ),
        )
    if val.what != "batch" or val.where is not None:
        return val
    if tensor is not None and isinstance(target, ast.Name) and val.item and not tensor(target.id):
        return val
    # an item of a collated tuple (`images` of `images, captions, lengths`) is a tensor; a whole batch may be a
    # structure still to unpack
    return Val("tensor", HOST) if val.item else replace(val, where=HOST)


def _on_host_or_data(val: Val) -> bool:
    """Whether ``val`` is known to hold no accelerator tensor: on the host, or a number, string or ``None``."""
    if val.what in (*TENSORISH, "module", "batch", "loader", "dataset", "any"):
        return val.where == HOST
    if val.what == "tuple":
        return all(_on_host_or_data(item) for item in val.items)
    return val.what in ("number", "str", "none") or _numbers(val)


def _handed(val: Val) -> Val:
    """``val`` as a parameter of the callee sees it: a module keeps where it was built, nothing keeps its name."""
    return replace(val, origin=val.origin if val.what == "module" else None, name=None)


def _analyse(ctx: FileContext) -> _Analysis:
    if not _may_report(ctx.source):
        return _Analysis([], frozenset(), {})
    flow = _Flow(ctx)
    found = flow.run()
    return _Analysis(
        found, frozenset(flow.tensor_moves), dict(flow.device_numpy), flow.host_fed(), dict(flow.converted)
    )


def _analysed(ctx: FileContext) -> _Analysis:
    return ctx.shared(_analyse)


def reports(ctx: FileContext, code: str) -> list[Report]:
    """The findings of rule ``code`` in the file; the analysis runs once per file for all the rules that ask."""
    return [r for r in _analysed(ctx).reports if r.code == code]


def host_fed(ctx: FileContext) -> frozenset[ast.AST]:
    """Functions of the file that every call gives only host values or values that are not tensors.

    For FRY005: ``def fliplr(img): inv_idx = torch.arange(...); return img.index_select(3, inv_idx)`` is right
    where every caller flips a host image (person re-ID's ``extract_feature`` flips before ``img.cuda()``). Every
    call in the file must have been read, each argument known: a tensor, batch or module on the host, or a number,
    string, ``None`` or a list of numbers.
    """
    return _analysed(ctx).host_fed


def device_numpy(ctx: FileContext) -> dict[ast.Call, str]:
    """Calls ``x.numpy()`` whose ``x`` the analysis knows is a tensor on the chosen device, with that device as written.

    The device is ``""`` where the flow knows the tensor is there but not how the code names that device.

    For FRY012: ``Tensor.numpy()`` raises on an accelerator. Every form the flow follows (tuple unpacking, loaders,
    dataset items, the file's functions called with device values, module outputs) reaches the rule this way.
    """
    return {call: val.dev or "" for call, val in _analysed(ctx).device_numpy.items()}


def converted_argument(ctx: FileContext, call: ast.Call) -> int:
    """The position of the device tensor among the arguments of a converting call of :func:`device_numpy`.

    ``np.asarray(t)``: 0; ``sklearn.metrics.accuracy_score(labels, preds)``: whichever is on the device.
    """
    return (_analysed(ctx).converted or {}).get(call, 0)


def tensor_moves(ctx: FileContext) -> frozenset[ast.Call]:
    """Calls ``x.to(...)``, ``x.cuda()``, ... written as statements, whose ``x`` the analysis knows is a tensor.

    For FRY001: such a statement throws the moved tensor away (``Tensor.to`` is not in place), whatever kind
    inference says of ``x`` (a parameter that callers give a tensor, an item of a dataset).
    """
    return _analysed(ctx).tensor_moves


def local_functions(ctx: FileContext, *, aliases: bool = False) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """See :func:`_local_functions`; read once per file (a copy: callers may change it)."""
    return dict(ctx.shared(_local_functions_aliases if aliases else _local_functions_plain))


def _local_functions_plain(ctx: FileContext) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return _local_functions(ctx, aliases=False)


def _local_functions_aliases(ctx: FileContext) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return _local_functions(ctx, aliases=True)


def _local_functions(ctx: FileContext, *, aliases: bool) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions of the file whose every call is in the file, so their parameters take what the calls pass.

    Defined once at the top of the file, and the name is only ever called (never passed on, decorated or rebound),
    or handed to a ``DataLoader`` as its ``collate_fn`` (which calls it with samples, of unknown values). A local
    variable of the same name in another function is another variable. With ``aliases``, also the names that the
    file binds once to such a function and only ever calls (``loss_fn = prototypical_loss`` at module level,
    ``criterion = cal_loss`` in a function, where no function has a parameter of that name), mapped to it.
    """
    defined: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for stmt in ctx.tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            defined.setdefault(stmt.name, []).append(stmt)
    plain = {
        name: funcs[0]
        for name, funcs in defined.items()
        if len(funcs) == 1 and all(_harmless_decorator(ctx, d) for d in funcs[0].decorator_list)
    }
    if not plain:
        return {}
    # `loss_fn = prototypical_loss` in module-level code, `criterion = cal_loss` in a function (DGCNN's `train`)
    alias_values: dict[str, ast.Name] = {}
    alias_stores: dict[str, list[ast.Name]] = {}
    parameters = {a.arg for a in ctx.nodes(ast.arg)}
    for stmt in ctx.nodes(ast.Assign):
        if (
            len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Name)
            and stmt.value.id in plain
            and (ctx.parent(stmt) is ctx.tree or stmt.targets[0].id not in parameters)
        ):
            alias_stores.setdefault(stmt.targets[0].id, []).append(stmt.value)
    for alias, stores in alias_stores.items():
        # `criterion = cal_loss` in `train` and in `test`: one function, under a name that is only ever called
        if aliases and len({value.id for value in stores}) == 1 and _only_called(ctx, alias, len(stores)):
            alias_values[alias] = stores[0]
    aliased = {id(value) for alias in alias_values for value in alias_stores[alias]}
    local: dict[ast.AST, frozenset[str]] = {}
    for node in ctx.nodes(ast.Name):
        if node.id in plain:
            inner = ctx.enclosing_function(node)
            if inner is not None and inner is not plain[node.id]:
                if inner not in local:
                    local[inner] = bound_names(inner)
                if node.id in local[inner]:
                    continue  # `train = types == "train"` in another function: its own variable, not this function
            parent = ctx.parent(node)
            if isinstance(parent, ast.keyword) and parent.arg == "collate_fn" and isinstance(node.ctx, ast.Load):
                continue  # `DataLoader(..., collate_fn=collate_batch)` calls it with a list of samples
            if id(node) in aliased:
                continue
            if not (isinstance(node.ctx, ast.Load) and isinstance(parent, ast.Call) and parent.func is node):
                del plain[node.id]
    for stmt in ctx.nodes(ast.Global):
        for name in stmt.names:
            plain.pop(name, None)
    if aliases:
        for alias, value in alias_values.items():
            if value.id in plain:
                plain[alias] = plain[value.id]
    return plain


def _only_called(ctx: FileContext, name: str, bindings: int = 1) -> bool:
    """Whether every use of ``name`` in the file calls it, and only the ``bindings`` alias assignments bind it."""
    stores = 0
    for node in ctx.nodes(ast.Name):
        if node.id != name:
            continue
        if isinstance(node.ctx, ast.Store):
            stores += 1
            continue
        parent = ctx.parent(node)
        if not (isinstance(node.ctx, ast.Load) and isinstance(parent, ast.Call) and parent.func is node):
            return False
    return stores == bindings


def loss_wrapper(ctx: FileContext, name: str) -> bool:
    """Whether ``name`` is a function of the file that only returns a loss of its parameters.

    ``def loss_fn(outputs, labels): return nn.CrossEntropyLoss()(outputs, labels)`` (or ``F.cross_entropy(...)``):
    passed on as ``train(model, optimizer, loss_fn, ...)`` and called there, it checks its inputs as the loss does.
    """
    funcs = [s for s in ctx.tree.body if isinstance(s, ast.FunctionDef) and s.name == name]
    if len(funcs) != 1:
        return False
    body = [s for s in funcs[0].body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return False
    call = body[0].value
    params = [a.arg for a in funcs[0].args.args]
    if len(call.args) < 2 or [dotted(a) for a in call.args[:2]] != params[:2]:
        return False
    target = call.func.func if isinstance(call.func, ast.Call) else call.func  # `nn.CrossEntropyLoss()(...)`
    full = ctx.qualname(target) or ""
    last = full.rsplit(".", 1)[-1]
    if isinstance(call.func, ast.Call):
        return full.startswith("torch.nn.") and last.endswith("Loss") and last not in HOST_TARGET_LOSSES
    return full.startswith("torch.nn.functional.") and last in CHECKED_LOSSES


def _module_level_nodes(tree: ast.Module) -> list[ast.AST]:
    """The nodes of the module's own code (not inside functions, classes or lambdas)."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return found


#: Flags (command-line options, never assigned in the file) whose name says the run uses the CPU.
_CPU_FLAGS = frozenset({"no_cuda", "use_cpu", "force_cpu", "no_gpu", "cpu", "disable_cuda"})


def _store_true_gpu_option(ctx: FileContext, name: str) -> bool:
    """Whether the file's command line defines ``name`` as an on/off switch for the GPU.

    pytorch-cifar100's ``parser.add_argument('-gpu', action='store_true', default=False, help='use gpu or not')``:
    ``args.gpu`` is then true exactly on GPU runs (unlike ``--gpu 0``, a GPU index, where ``0`` is false). Its
    name must speak of the GPU (``gpu``, ``cuda``), and no option may set it otherwise.
    """
    words = set(name.split("_"))
    if not words & {"gpu", "cuda"} or words & {"no", "not", "disable", "without", "cpu", "off"}:
        return False  # not `--disable-cuda` (a switch for the CPU)
    if "add_argument" not in ctx.source:
        return False
    found = False
    for call in ctx.nodes(ast.Call):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        options = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        dest = next((k.value for k in call.keywords if k.arg == "dest"), None)
        names = {o.lstrip("-").replace("-", "_") for o in options if o.startswith("-")}
        if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
            names = {dest.value}
        if name not in names:
            continue
        action = next((k.value for k in call.keywords if k.arg == "action"), None)
        if not (isinstance(action, ast.Constant) and action.value == "store_true"):
            return False
        found = True
    return found


def counts_devices(test: ast.expr) -> bool:
    """``torch.cuda.device_count() > 1``, ``args.n_gpu > 1``, ``len(device_ids) > 1``: a test of how many GPUs."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Gt | ast.GtE):
        return False
    bound = test.comparators[0]
    if not (isinstance(bound, ast.Constant) and type(bound.value) is int and bound.value >= 1):
        return False
    text = " ".join(dotted(n) or "" for n in ast.walk(test.left) if isinstance(n, ast.Name | ast.Attribute)).lower()
    return any(word in text for word in ("device_count", "gpu", "device_ids", "world_size"))


def _defines(stmt: ast.stmt, name: str) -> bool:
    return isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name


def _harmless_decorator(ctx: FileContext, node: ast.expr) -> bool:
    full = ctx.qualname(node.func if isinstance(node, ast.Call) else node)
    return full in ("torch.no_grad", "torch.inference_mode", "torch.enable_grad", "functools.cache")


#: Findings also reported from the first reading of a loop body: the first iteration sees each value as it was
#: before the loop (a model moved further down the loop, a host tensor replaced by a device one at the end of it).
_FIRST_PASS_CODES = frozenset({"FRY006", "FRY007", "FRY011"})

#: How many calls deep a local function's returned value is read (``batch2TrainData`` -> ``inputVar`` -> ...).
_MAX_DEPTH = 3

#: How many different ways of calling a local function are each read on their own.
_MAX_CONTEXTS = 6
#: NumPy functions whose result indexes a tensor element-wise (an array of indices, or a tuple of them).
_NUMPY_INDEX_CALLS = frozenset(
    f"numpy.{name}" for name in "where nonzero argwhere flatnonzero array asarray arange argsort".split()
)


#: Suffix of the pseudo-parameter that tells whether a call passes a string literal for a parameter that the
#: function dispatches on (``target == "y-channel"``): ``STRING`` for a literal, ``OTHER`` for anything else.
_LITERAL = "#literal"


def _dispatched(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Parameters of ``func`` that it compares with string literals (``if target == "y-channel":``)."""
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args]}
    return {
        node.left.id
        for node in ast.walk(func)
        if isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Name)
        and node.left.id in params
        and any(isinstance(c, ast.Constant) and isinstance(c.value, str) for c in node.comparators)
    }


def _passable(name: str, val: Val) -> Val | None:
    """What a parameter named ``name`` takes when a call passes ``val`` (``None``: a kind not tracked)."""
    if name.endswith(_LITERAL):  # whether the call passes a string literal (see `record_call`)
        return val
    if val.what == "module":  # a module built by a caller and never moved is reported where it was built
        return replace(val, name=name)
    if val.what in ("any", *TENSORISH, "loader", "batch", "device"):
        return replace(val, origin=None, name=name)
    if _numbers(val):
        return Val("seq", element=NUMBER, name=name)  # numbers (`normalize(x, MEAN, STD)`): data for a factory
    if val.what == "tuple" and val.items:  # `train(model, (features, adj), labels)`: each item as it is
        items = tuple(_passable(f"{name}[{i}]", item) or UNKNOWN for i, item in enumerate(val.items))
        if any(item.what != "unknown" for item in items):
            return Val("tuple", items=items, name=name)
    if val.what == "seq" and val.element is not None:  # `run_epoch(batches, model)`: a list of `(x, y)` pairs
        element = _passable(f"{name}[]", val.element)
        if element is not None and element.what != "unknown":
            return Val("seq", element=element, name=name)
    return None


def _literal_defaults(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Val]:
    """Parameters whose default is a literal list or tuple: what a call that does not pass them gives.

    ``def denorm(batch, mean=[0.1307])`` then ``if isinstance(mean, list): mean = torch.tensor(mean)``: a call
    without ``mean`` makes the tensor on the host.
    """
    positional = [*func.args.posonlyargs, *func.args.args]
    pairs = list(zip(positional[len(positional) - len(func.args.defaults) :], func.args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults, strict=True) if d is not None]
    return {arg.arg: Val("seq") for arg, default in pairs if isinstance(default, ast.List | ast.Tuple)}


def _context_key(values: dict[str, Val]) -> tuple[object, ...]:
    """What tells two ways of calling a function apart: each value's kind, place and where it was built.

    Also the places of a list's items and of a tuple's (``calculate_metrics(batch)`` with a list of host tensors
    from one caller and of moved ones from another).
    """

    def shape(v: Val | None, depth: int = 0) -> object:
        if v is None or depth > 3:
            return None
        inner = (shape(v.element, depth + 1), tuple(shape(i, depth + 1) for i in v.items))
        return (v.what, v.where, v.dev, v.fresh, id(v.origin), inner)

    return tuple(sorted(((k, shape(v)) for k, v in values.items()), key=repr))


def _host_or_device(a: dict[str, Val], b: dict[str, Val], key: str) -> bool:
    """Whether ``key`` is on the device after one branch, and on the host or somewhere not known after the other."""
    first, second = a.get(key), b.get(key)
    return first is not None and second is not None and {first.where, second.where} in ({HOST, DEVICE}, {None, DEVICE})


def _compare_side(test: ast.Compare) -> bool | None:
    """``x == "cuda"``, ``"cuda" in x`` (``True``), ``x == "cpu"``, ``x != "cuda"`` (``False``); else ``None``.

    Also a GPU ordinal against ``-1``, the command-line way of saying "no GPU" (federated-learning's ``--gpu -1``):
    ``args.gpu != -1``, ``args.gpu >= 0``, ``gpu_id > -1`` (``True``), ``args.gpu == -1``, ``gpu < 0`` (``False``).
    """
    op = test.ops[0]
    ordinal = _gpu_ordinal_test(test)
    if ordinal is not None:
        return ordinal
    switch = _gpu_switch_test(test)
    if switch is not None:
        return switch
    for side in (test.left, test.comparators[0]):
        if isinstance(side, ast.Constant) and isinstance(side.value, str):
            kind = side.value.split(":")[0].strip().lower()
            on_accelerator = kind in ACCELERATOR_NAMES
            if kind != "cpu" and not on_accelerator:
                return None
            if isinstance(op, ast.Eq | ast.In | ast.Is):
                return on_accelerator
            if isinstance(op, ast.NotEq | ast.NotIn | ast.IsNot):
                return not on_accelerator
    return None


#: How a command line spells a switch turned on or off (`--cuda yes`).
_SWITCH_ON = frozenset({"yes", "y", "true", "on", "1"})
_SWITCH_OFF = frozenset({"no", "n", "false", "off", "0"})


def _gpu_switch_test(test: ast.Compare) -> bool | None:
    """``args.cuda == 'yes'`` (``True``), ``args.cuda == 'no'``/``!= 'yes'`` (``False``): a GPU switch as a string."""
    left, op, right = test.left, test.ops[0], test.comparators[0]
    name = dotted(left) if isinstance(left, ast.Name | ast.Attribute) else None
    if name is None or name.rsplit(".", 1)[-1].lower() not in GPU_FLAGS:
        return None
    if not (isinstance(right, ast.Constant) and isinstance(right.value, str)):
        return None
    word = right.value.strip().lower()
    on = True if word in _SWITCH_ON else False if word in _SWITCH_OFF else None
    if on is None or not isinstance(op, ast.Eq | ast.NotEq):
        return None
    return on if isinstance(op, ast.Eq) else not on


#: GPU ordinals whose ``-1`` means the CPU; not ranks (``local_rank != -1`` says a distributed launch, any device).
_GPU_SWITCH_NAMES = (GPU_ORDINAL_NAMES | GPU_ORDINAL_LISTS) - {"rank", "local_rank", "gpu_rank"}


def _gpu_ordinal_test(test: ast.Compare) -> bool | None:
    """See :func:`_compare_side`: a name of a GPU ordinal compared with ``-1`` or ``0``."""
    left, op, right = test.left, test.ops[0], test.comparators[0]
    name = dotted(left) if isinstance(left, ast.Name | ast.Attribute) else None
    if name is None or name.rsplit(".", 1)[-1].lower() not in _GPU_SWITCH_NAMES:
        return None
    number = right.value if isinstance(right, ast.Constant) else None
    if isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub) and isinstance(right.operand, ast.Constant):
        number = -right.operand.value if isinstance(right.operand.value, int) else None
    if number == -1 and isinstance(op, ast.NotEq | ast.Gt):
        return True
    if number == -1 and isinstance(op, ast.Eq | ast.LtE):
        return False
    if number == 0 and isinstance(op, ast.GtE):
        return True
    if number == 0 and isinstance(op, ast.Lt):
        return False
    return None


def _abstract(method: ast.FunctionDef) -> bool:
    """Whether ``method``'s body only documents it: ``pass``, ``...``, a docstring, ``raise NotImplementedError``."""
    for stmt in method.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            raised = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if dotted(raised) == "NotImplementedError":
                continue
        return False
    return True


def _unbound_parameter(scope: ast.AST, name: str) -> bool:
    """Whether ``name`` is a parameter of the function ``scope`` that its body never binds again."""
    if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    args = scope.args
    if name not in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}:
        return False
    return not any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store | ast.Del)
        for stmt in scope.body
        for n in ast.walk(stmt)
    )


def _built_names(ctx: FileContext, func: ast.expr) -> frozenset[str]:
    """The classes of the file that calling ``func`` builds (see :meth:`KindInference.built_classes`)."""
    return ctx.kinds.built_classes(func)


def _constructions(ctx: FileContext) -> dict[str, list[ast.Call]]:
    """Per class name, the calls of the file that build it (see :func:`_built_names`); one index per file."""
    found: dict[str, list[ast.Call]] = {}
    for call in ctx.nodes(ast.Call):
        for name in _built_names(ctx, call.func):
            found.setdefault(name, []).append(call)
    return found


def _moving_iterators(ctx: FileContext) -> frozenset[str]:
    """Classes of the file with ``__iter__`` or ``__next__`` that move tensors (``.to(...)``, ``.cuda()``) there."""
    found: set[str] = set()
    for cls in ctx.nodes(ast.ClassDef):
        if not any(isinstance(m, ast.FunctionDef) and m.name in ("__iter__", "__next__") for m in cls.body):
            continue
        if any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cuda")
            for n in ast.walk(cls)
        ):
            found.add(cls.name)
    return frozenset(found)


def _calls_by_name(func: ast.AST, callee: ast.AST) -> bool:
    """Whether ``func`` calls the function ``callee`` by its name (``parse(argv)``)."""
    name = getattr(callee, "name", None)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(func))


def _free_reads(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names ``func`` reads and does not bind itself (globals, or names of an enclosing function)."""
    reads = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return reads - bound_names(func)


#: Built-in classes that ``isinstance`` tests name, and what each is for :meth:`_Flow._isinstance_outcome`.
_BUILTIN_KINDS = {
    "dict": "dict",
    "list": "list",
    "tuple": "tuple",
    "str": "str",
    "int": "number",
    "float": "number",
    "bool": "number",
    "collections.OrderedDict": "dict",
    "OrderedDict": "dict",
    "collections.abc.Mapping": "mapping",
    "typing.Mapping": "mapping",
    "collections.abc.Sequence": "sequence",
    "typing.Sequence": "sequence",
    "numpy.ndarray": "ndarray",
}


def _built_on_one_side(
    a: dict[str, Val], b: dict[str, Val], key: str, choice: dict[str, Val] | None = None
) -> Val | None:
    """The module built on the host in one branch when the other branch leaves ``key`` unknown (a loaded model).

    ``choice`` (the values before the ``if``): the branches choose among models (``if args.model == "cnn": ... elif
    args.model == "mlp": ...``), not a device; then also when the other branch builds one and moves it: on the path
    through the branch that does not move it, the model stays on the host (federated-learning's ``net_glob =
    MLP(...)`` left without its ``.to(args.device)`` while the CNN branches have it). Both branches must bind it
    (one that only moves what was built before is not a choice).
    """
    for one, other in ((a, b), (b, a)):
        built, held = one.get(key), other.get(key)
        if (
            built is not None
            and held is not None
            and built.what == "module"
            and built.fresh
            and built.params
            and built.where == HOST
            and (
                held.what == "unknown"
                or (held.what == "any" and held.where != HOST)  # `state["model"]` of a checkpoint loaded to the device
                or (
                    choice is not None
                    and held.what == "module"
                    and held.where == DEVICE
                    and held.params
                    and not held.wrapper
                    and choice.get(key) is not built
                    and choice.get(key) is not held
                )
            )
        ):
            return built
    return None


def _seedable(val: Val) -> bool:
    """Whether a module-level value is worth handing to the file's functions.

    Placed, a loader or dataset, or a list or tuple of numbers (``MEAN = (0.1307,)``: data a factory turns into a
    host tensor).
    """
    placed = val.what in ("module", "any", *TENSORISH, "device") and val.where is not None
    return placed or val.what in ("loader", "dataset") or _numbers(val)


def _numbers(val: Val, depth: int = 0) -> bool:
    """Whether ``val`` is a list or tuple of numbers, or of such lists and tuples (``[([1, 4], [0, 1]), ...]``)."""
    if depth > 3:
        return False
    if val.what == "seq":
        return val.element is not None and (val.element == NUMBER or _numbers(val.element, depth + 1))
    return (
        val.what == "tuple"
        and bool(val.items)
        and all(item == NUMBER or _numbers(item, depth + 1) for item in val.items)
    )


def _names_devices(cls: ast.ClassDef) -> bool:
    """Whether a class's code moves anything or names a device (``.to(...)``, ``.cuda()``, ``device=``, ``device``)."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and node.attr in ("to", "cuda", "device", "pin_memory"):
            return True
        if isinstance(node, ast.keyword) and node.arg == "device":
            return True
        if isinstance(node, ast.Name) and "device" in node.id.lower():
            return True
    return False


def _same_place(owner: Val, val: Val) -> bool:
    """Whether giving ``owner`` an attribute of value ``val`` leaves it where it is.

    A number, a string, or a module or tensor on the same side (``model.fc = nn.Linear(...)`` on a host model).
    """
    if val.what in ("number", "str", "other"):
        return True
    return owner.what == "module" and val.what in ("module", *TENSORISH) and val.where == owner.where == HOST


#: Methods that may move a module or change where its tensors are.
_CHANGING = MOVES | {"load_state_dict", "apply", "_apply"}


def _changing(call: ast.Call) -> bool:
    """Whether ``x.<method>(...)`` may change where ``x``'s parameters are.

    Moves, ``apply``/``_apply``, and ``load_state_dict(..., assign=True)`` (which takes the loaded tensors as they
    are); a plain ``load_state_dict`` copies values into the tensors the module has, wherever they are.
    """
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _CHANGING:
        return False
    return func.attr != "load_state_dict" or any(k.arg == "assign" or k.arg is None for k in call.keywords)


def _only_read_by(
    call: ast.Call,
    arg: ast.expr,
    local: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    reading: Callable[[str], bool],
    ctx: FileContext | None = None,
) -> bool:
    """Whether ``call`` is of a function of the file that only reads the parameter ``arg`` fills.

    ``soft_update(self.critic_target, self.critic, self.tau)``: it copies the critic's parameters, in place.
    """
    func = local.get(call.func.id) if isinstance(call.func, ast.Name) else None
    skip = 0
    if func is None and ctx is not None and isinstance(call.func, ast.Name):
        # `early_stopping(val_loss, self.model, path)`: an instance of a class of the file, whose `__call__` reads
        kind = ctx.kinds.lookup(call.func.id, call)
        cls = ctx.kinds.classes.get(kind.cls or "") if kind is not None and kind.name == "instance" else None
        methods = {m.name: m for m in (cls.body if cls else []) if isinstance(m, ast.FunctionDef)}
        func = methods.get("__call__")
        if func is not None:
            local = {**local, **{f"self.{name}": m for name, m in methods.items()}}
            skip = 1
    if func is None and ctx is not None and isinstance(call.func, ast.Attribute) and dotted(call.func.value) == "self":
        # `self.save_network(self.net, path, "", label)`: a method of the same class, its `self` skipped
        owner = ctx.enclosing_class(call)
        methods = {m.name: m for m in (owner.body if owner else []) if isinstance(m, ast.FunctionDef)}
        func = methods.get(call.func.attr)
        if func is not None:
            local = {**local, **{f"self.{name}": m for name, m in methods.items()}}
            skip = 1
    if func is None and ctx is not None and isinstance(call.func, ast.Attribute):
        # `self.model.serialize(self.model, self.optimizer, epoch)`: a static method of one class of the file
        statics = [
            m
            for cls in ctx.kinds.classes.values()
            for m in cls.body
            if isinstance(m, ast.FunctionDef) and m.name == call.func.attr and is_static(m)
        ]
        func = statics[0] if len(statics) == 1 else None
    if func is None or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]][skip:]
    param = next((k.arg for k in call.keywords if k.value is arg), None)
    if param is None and arg in call.args and call.args.index(arg) < len(names):
        param = names[call.args.index(arg)]
    return param is not None and param in keeping_parameters(func, local, reading)


def _stacked(ctx: FileContext, cls: ast.ClassDef, attr: str) -> bool:
    """Whether ``cls`` passes ``self.<attr>`` (or ``list(self.<attr>)``) to ``torch.stack``/``torch.cat``."""
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call) or ctx.call_name(node) not in ("torch.stack", "torch.cat", "torch.concat"):
            continue
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Call) and ctx.call_name(first) in ("list", "tuple") and first.args:
            first = first.args[0]
        if first is not None and dotted(first) == f"self.{attr}":
            return True
    return False


#: Calls that only read what they are given: copies and saves leave the original where it is.
_READ_ONLY_CALLS = frozenset(
    {"copy.deepcopy", "copy.copy", "torch.save", "pickle.dump", "pickle.dumps", "torch.optim.swa_utils.AveragedModel"}
)
#: Methods that only read the module handed to them: ``swa_model.update_parameters(model)`` averages its weights.
_READING_METHODS = frozenset({"update_parameters"})


def _made_in(init: ast.AST) -> dict[str, set[str]]:
    """``self.<attr> = <value>`` statements of ``init``: attribute -> the values' dumps."""
    made: dict[str, set[str]] = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Attribute) and dotted(target.value) == "self":
                made.setdefault(target.attr, set()).add(ast.dump(node.value))
    return made


def _made_again(ctx: FileContext, store: ast.Attribute, made: dict[str, set[str]]) -> bool:
    """Whether ``self.<attr> = <value>`` makes the attribute again exactly as ``__init__`` does.

    TD3's ``load``: ``self.actor_target = copy.deepcopy(self.actor)``, as in ``__init__``: the same place again.
    """
    assign = ctx.parent(store)
    return (
        isinstance(assign, ast.Assign)
        and assign.targets == [store]
        and ast.dump(assign.value) in made.get(store.attr, set())
    )


def _torch_reads(full: str) -> bool:
    """Whether the torch function ``full`` only reads the tensors and modules it is given.

    ``torch.matmul(rewards, self.n_step_scaling)``, ``F.relu(x)``: no torch function moves its argument. Not the
    classes of ``torch.nn`` (``nn.DataParallel(self.model)`` keeps the module, and a move of the wrapper moves it),
    nor ``torch.compile``.
    """
    if not full.startswith("torch.") or full == "torch.compile":
        return False
    last = full.rsplit(".", 1)[-1]
    return not (full.startswith("torch.nn.") and last[:1].isupper())


def _no_init() -> ast.FunctionDef:
    """An empty ``def __init__(self): pass``: what a plain class without one of its own runs."""
    args = ast.arguments(posonlyargs=[], args=[ast.arg(arg="self")], kwonlyargs=[], kw_defaults=[], defaults=[])
    return ast.FunctionDef(name="__init__", args=args, body=[], decorator_list=[])


def _instance_uses(
    cls: ast.ClassDef,
    init: ast.AST,
    ctx: FileContext,
    local: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
    reading: Callable[[str], bool] | None = None,
    helpers: set[ast.FunctionDef] | None = None,
) -> tuple[set[str], set[str]]:
    """The ``self.<attr>`` that methods other than ``init`` and its ``helpers`` rebind, and those they may move.

    Also those they hand on.

    Handing one to a function of the file (``local``) that only reads it (see :func:`keeping_parameters`, with
    ``reading`` for the module classes' methods) leaves it where it is.

    When a method hands ``self`` to a call (``callback(self)``), the attributes that code outside the class may
    change: those that the file rebinds or moves on another object (``trainer.model = ...``,
    ``trainer.model.cuda()``), or every attribute when the file calls ``setattr``.
    """
    rebound: set[str] = set()
    handled: set[str] = set()
    everything = False
    made = _made_in(init)
    for method in cls.body:
        if (
            method is init
            or not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef)
            or method in (helpers or ())
        ):
            continue
        for node in ast.walk(method):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                if isinstance(node.ctx, ast.Store) and not _made_again(ctx, node, made):
                    rebound.add(node.attr)  # `del self.x` gives it no other value: a read then fails
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and _changing(node):
                    owner = func.value
                    if isinstance(owner, ast.Attribute) and dotted(owner.value) == "self":
                        handled.add(owner.attr)
                if isinstance(func, ast.Name) and func.id in HARMLESS_READS:
                    continue  # `len(self.data)`
                if isinstance(func, ast.Attribute) and func.attr in _READING_METHODS:
                    continue  # `self.net.update_parameters(self._net)`: reads the weights, moves nothing
                if ctx.call_name(node) in _READ_ONLY_CALLS or _torch_reads(ctx.call_name(node) or ""):
                    continue  # `self.actor_target = copy.deepcopy(self.actor)` in TD3's `load`: a copy, read only
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if isinstance(arg, ast.Name) and arg.id == "self":
                        everything = True
                    elif (
                        isinstance(arg, ast.Attribute)
                        and dotted(arg.value) == "self"
                        and (local is None or reading is None or not _only_read_by(node, arg, local, reading, ctx))
                    ):
                        handled.add(arg.attr)
    if everything:
        own = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and dotted(n.value) == "self"}
        inside = set(ast.walk(cls))

        def ours(owner: ast.expr) -> bool:  # may be an instance of `cls`: not a config, not another class's instance
            if not isinstance(owner, ast.Name):
                return True
            if (owner.id in CONFIG_OWNERS and owner.id not in cls.name.lower()) or owner.id in ("self", "cls"):
                return False  # a config (but `trainer` for a `Trainer`), or the instance of another class
            scope = ctx.enclosing_function(owner) or ctx.tree
            made = [
                n.value
                for n in ast.walk(scope)
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == owner.id for t in n.targets)
            ]
            return (
                not made
                or not all(  # `C = CN()`: a class by its name, or an alias of one
                    isinstance(v, ast.Call)
                    and (dotted(v.func) or "").rpartition(".")[2][:1].isupper()
                    and dotted(v.func) != cls.name
                    for v in made
                )
            )

        for node in ast.walk(ctx.tree):
            if node in inside:
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "vars"):
                return rebound, handled | own
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store | ast.Del)
                and node.attr in own
                and ours(node.value)
            ):
                handled.add(node.attr)  # `trainer.model = ...`
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _changing(node):
                owner = node.func.value
                if isinstance(owner, ast.Attribute) and owner.attr in own and ours(owner.value):
                    handled.add(owner.attr)
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in HARMLESS_READS):
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if isinstance(arg, ast.Attribute) and arg.attr in own and ours(arg.value):
                        handled.add(arg.attr)  # `prepare(trainer.model)`
    return rebound, handled


#: Words of a flag that chooses the device at run time (``args.cuda``, ``use_gpu``, ``args.accel``, ``no_mps``).
_FLAG_WORDS = ("cuda", "gpu", "accel", "mps", "xpu", "cpu")


def _find_method(
    ctx: FileContext, cls: ast.ClassDef, name: str, depth: int = 0
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The method ``name`` of ``cls``, defined in it or inherited from classes of the file."""
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
            return stmt
    if depth > 5:
        return None
    for base in cls.bases:
        inner = ctx.kinds.classes.get(dotted(base) or "")
        if inner is not None:
            found = _find_method(ctx, inner, name, depth + 1)
            if found is not None:
                return found
    return None


def _collated(val: Val) -> Val:
    """What the default collate makes of ``__getitem__``'s value ``val`` (its tensors stacked, numbers as tensors)."""
    if val.what in TENSORISH:
        return Val("tensor", val.where)
    if val.what == "number":
        return Val("tensor", HOST)
    if val.what == "tuple" and val.items:
        # an item the analysis cannot place is still an item of the batch: where the loop's evidence puts it
        items = (_collated(item) for item in val.items)
        return Val("tuple", items=tuple(Val("batch", item=True) if i.what == "unknown" else i for i in items))
    if val.what == "dict":  # `return {key: torch.tensor(v) for ...}`: a dict of batches, each where its values are
        values = [v for _, v in val.keys] or ([val.element] if val.element is not None else [])
        places = {_collated(v).where for v in values}
        if len(places) == 1 and None not in places:
            return Val("dict", element=Val("tensor", places.pop()))
    return UNKNOWN


#: Progress bars that iterate over what they wrap (``tqdm(loader)`` gives the loader's batches).
_PROGRESS_BARS = ("tqdm", "tqdm.tqdm", "tqdm.auto.tqdm")

#: Words of an ``if`` test that may choose a device rather than a model.
_DEVICE_TEST_WORDS = ("cuda", "cpu", "gpu", "device", "mps", "accel", "xpu", "distributed", "rank", "parallel")


def _device_flag(test: ast.AST) -> bool:
    """``if args.accel:``, ``if use_cuda and not args.cpu:``: a flag the user sets, naming a device."""
    node = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
    parts = node.values if isinstance(node, ast.BoolOp) else [node]
    for part in parts:
        inner = part.operand if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not) else part
        if isinstance(inner, ast.Compare) and len(inner.ops) == 1:
            # `args.gpu is not None`, `len(gpu_ids) > 0`: the GPUs the user asked for, or none
            inner = inner.left
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "len":
            inner = inner.args[0] if len(inner.args) == 1 else inner  # `if len(gpus):`, a list of GPU ids
        name = dotted(inner) if isinstance(inner, ast.Name | ast.Attribute) else None
        if name is not None and any(word in name.rsplit(".", 1)[-1].lower() for word in _FLAG_WORDS):
            return True
    return False


def _may_report(source: str) -> bool:
    """Whether ``source`` can hold a finding: every one needs torch and a value put on a device."""
    return "torch" in source and any(word in source for word in _DEVICE_WORDS)


#: Text every file with a finding holds: a move, a ``device=`` or a device call, or an accelerator's name.
_DEVICE_WORDS = frozenset({".to(", "device"}) | ACCELERATORS


class _Flow(CallsMixin):
    """Runs the analysis over one file."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.found: dict[tuple[str, int], Report] = {}
        #: `self.<attr>.append(tensor)` in the methods of plain classes: the tensors each such container collects
        self.attribute_appends: dict[tuple[ast.ClassDef, str], list[tuple[ast.Call, Val]]] = {}
        self.env: dict[str, Val] = {}
        self.excluded: frozenset[str] = frozenset()
        self.scope: ast.AST = ctx.tree
        self.silent = 0
        self.first_pass = 0  # how many of the `silent` levels are first readings of a loop body
        self.loop_depth = 0
        self.strange_context = 0
        self.default_device_set = "set_default_device" in ctx.source or "set_default_tensor_type" in ctx.source
        self._moved: dict[ast.AST, dict[str, list[ast.Call]]] = {}
        self._escaped: dict[ast.AST, dict[str, list[ast.AST]]] = {}
        self._aliased: dict[ast.AST, dict[str, set[str]]] = {}
        self._classes: dict[str, tuple[bool | None, bool]] = {}
        self._available: dict[ast.AST, bool] = {}
        self._attribute_index: dict[str, list[ast.AST]] | None = None
        self._flags: dict[ast.AST, bool | None] = {}
        self._attribute_kinds: dict[str, str] | None = None
        self._slots: frozenset[str] | None = None
        self._busy: set[str] = set()
        self._globals: set[str] | None = None
        self._handled: set[str] | None = None
        self._instances: dict[ast.ClassDef, tuple[int, dict[str, Val]]] = {}
        self._host_attributes: dict[tuple[ast.ClassDef, str], Val | None] = {}
        #: globals that several setup functions bind, with those functions (see :meth:`_writer_for`)
        self.shared_setups: dict[str, list[ast.AST]] = {}
        self._module_attributes: dict[ast.ClassDef, dict[str, Val]] = {}
        self._module_bound: set[str] | None = None
        self.later_pass = 0  # reading a loop's body as its second pass sees it (see `_second_pass`)
        self.cpu_only = 0  # how many of the branches being read run only without an accelerator (see `_if`)
        self.host_branch = 0  # of those, the branches of an accelerator test itself (`else:` of `if cuda:`)
        #: the `return` values read inside such branches: on a GPU they are never returned (see `returns_of`)
        self.host_returns: list[Val] = []
        self._loops: list[ast.stmt] = []
        #: what each construction of a plain class of the file passes (``Trainer(model, dataset)`` in ``main``), one
        #: entry per reading of the scope that makes it: for the instance's attributes (see :meth:`_constructed_with`)
        self.constructions: dict[ast.Call, list[tuple[list[Val], dict[str | None, Val]]]] = {}
        self._datasets: dict[ast.ClassDef, Val] = {}
        self._owners: set[str] = set()  # the heads of the dotted names bound in this scope (`self` of `self.x`)
        #: functions of the file whose parameters take the values their callers pass (see :meth:`_local`)
        self.local_functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = local_functions(ctx, aliases=True)
        #: for each of those, the parameters' values at each call site read so far (``None``: a site passes
        #: ``*args``/``**kwargs``, so the parameters stay unknown)
        self.call_sites: dict[str, list[dict[str, Val]] | None] = {}
        #: the call nodes whose arguments :attr:`call_sites` holds, per function name
        self.site_nodes: dict[str, set[ast.Call]] = {}
        #: the module's environment at each call of a function of the file in its code (``main()``,
        #: ``train(epoch)``): the globals those functions see
        self.call_envs: list[dict[str, Val]] = []
        #: a function nested in another one -> the enclosing scope's values at each call of it there (closures)
        self.closure_envs: dict[ast.AST, list[dict[str, Val]]] = {}
        #: for each entry of ``call_sites``: the module's environment at that call, when the call is in the
        #: module's own code (``None`` for a call in a function)
        self.site_globals: dict[str, list[dict[str, Val] | None]] = {}
        #: per call site: the globals the calling function declares ``global`` and has set by then (see `_contexts`)
        self.site_declared: dict[str, list[dict[str, Val]]] = {}
        #: for each method of a plain class of the file: the parameters' values at each call on an instance built in
        #: the file (``trainer = Trainer(...)``; ``trainer.train(loader)``), ``None`` where a call passes ``*args``
        self.method_sites: dict[ast.AST, list[tuple[ast.Call, dict[str, Val]]] | None] = {}
        self.module_method_sites: set[ast.AST] = set()  # methods of module classes among `method_sites`
        #: the globals the file's functions see (set once the module's code has been read)
        self.seeds: dict[str, Val] | None = None
        #: for a function read only for what it returns: the values of its ``return`` statements
        self.returns: list[Val] | None = None
        #: a generator read for what it yields: ``returns`` collects the ``yield`` values instead
        self.yielding = False
        self.depth = 0  # how many calls deep this reading of a function is
        self._returned_memo: dict[tuple[object, ...], Val] = {}
        #: moves written as statements on values known to be tensors (see :func:`tensor_moves`)
        self.tensor_moves: set[ast.Call] = set()
        #: ``x.numpy()`` of tensors on the chosen device (see :func:`device_numpy`)
        self.device_numpy: dict[ast.Call, Val] = {}
        #: for the calls in `device_numpy` that convert their arguments: which argument is the device tensor
        self.converted: dict[ast.Call, int] = {}

    # -- scopes -----------------------------------------------------------------------------------------------

    def host_fed(self) -> frozenset[ast.AST]:
        """See :func:`host_fed`; read after :meth:`run`."""
        found: set[ast.AST] = set()
        for name, func in self.local_functions.items():
            if name != func.name or func in found:
                continue
            sites, nodes = self.call_sites.get(name), self.site_nodes.get(name, set())
            calls = [
                n
                for n in self.ctx.nodes(ast.Call)
                if isinstance(n.func, ast.Name) and self.local_functions.get(n.func.id) is func
            ]
            if not sites or not calls or any(call not in nodes for call in calls):
                continue
            if all(_on_host_or_data(v) for given in sites for k, v in given.items() if not k.endswith(_LITERAL)):
                found.add(func)
        return frozenset(found)

    def run(self) -> list[Report]:
        tree = self.ctx.tree
        self._scope(tree, tree.body, {}, frozenset(self.global_names() - self._settled_globals()))
        declared: dict[ast.AST | None, set[str]] = {}
        statements: list[ast.Global | ast.Nonlocal] = [*self.ctx.nodes(ast.Global), *self.ctx.nodes(ast.Nonlocal)]
        for statement in statements:
            scope = self.ctx.enclosing_function(statement)
            # `global mel_basis` in a function that only stores into it (`mel_basis[key] = ...`): the name still
            # holds the module's value there
            stored = {
                n.id
                for n in ast.walk(scope if scope is not None else self.ctx.tree)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del)
            }
            names = [name for name in statement.names if name in stored or isinstance(statement, ast.Nonlocal)]
            declared.setdefault(scope, set()).update(names)
        functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = [
            *self.ctx.nodes(ast.FunctionDef),
            *self.ctx.nodes(ast.AsyncFunctionDef),
        ]
        seeds = self._globals_seen_by_functions(self.call_envs or [self.env])
        self.seeds = seeds
        setups = self._setup_functions(declared, self.env)
        set_up: dict[str, Val] = {}  # the globals as their setup function leaves them
        written: dict[tuple[ast.AST, str], Val] = {}  # as each of several setup functions of a name leaves it
        done: set[ast.AST] = {tree}
        for func in self._callers_first(functions, setups):
            args = func.args
            for passed, seen in self._contexts(func, done, seeds):
                params: dict[str, Val] = {}
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                    if arg is not None:
                        given = passed.get(arg.arg, UNKNOWN)
                        params[arg.arg] = given if given.what != "unknown" else self._parameter(arg)
                params.update((k, v) for k, v in passed.items() if "." in k)  # a method's `self.<attr>` at its call
                params.update((k, v) for k, v in passed.items() if k.endswith(_LITERAL))
                closure = self._closure(func, declared.get(func, set()))
                chosen = {
                    name: written[(writer, name)]
                    for name in self.shared_setups.keys() & _free_reads(func)
                    if (writer := self._writer_for(func, name)) is not None and (writer, name) in written
                }
                if seen or closure or set_up or chosen:
                    local = bound_names(func) | declared.get(func, set())
                    for name, val in [*seen.items(), *set_up.items(), *chosen.items(), *closure.items()]:
                        if name not in local and name not in params:
                            params[name] = val
                cls = self.ctx.enclosing_class(func)
                if cls is not None and func in cls.body and func.name != "__init__" and "self" in params:
                    held = {k: v for k, v in params.items() if k.startswith("self.")}  # what the instance held
                    # `self.device`, `self.model` from `__init__` (of the one subclass built, for an abstract base)
                    params.update(self.instance_attributes(self._built_subclass(cls) or cls))
                    if func.name not in ("forward", "__call__"):
                        params.update(self.module_attributes(cls))  # `self.Encoder` moved in its `__init__`
                    params.update(held)
                # the names it sets up are followed in it; its other `global` names are not
                self._scope(func, func.body, params, frozenset(declared.get(func, set()) - setups.get(func, set())))
                for name in setups.get(func, ()):
                    val = self.env.get(name, UNKNOWN)  # not bound on this reading: not known
                    if name in self.shared_setups:
                        key = (func, name)
                        written[key] = val if key not in written else join(written[key], val, None)
                        continue
                    set_up[name] = val if name not in set_up else join(set_up[name], val, None)
            done.add(func)
            set_up = {k: v for k, v in set_up.items() if _seedable(v)}
            written = {k: v for k, v in written.items() if _seedable(v)}
        self._mixed_containers()
        return sorted(self.found.values(), key=lambda r: (line(r.node), getattr(r.node, "col_offset", 0)))

    def _mixed_containers(self) -> None:
        """FRY006 for a container attribute that collects host and device tensors and is then stacked.

        Rainbow's environment appends its frames to ``self.state_buffer`` (a ``deque``) in several methods and
        returns ``torch.stack(list(self.state_buffer), 0)``: one frame made without ``device=`` among frames on the
        device, and the stack fails on a GPU (``stack`` and ``cat`` make no exception for 0-dim CPU tensors). Only
        tensors known to be on the host and on the device, appended in the methods of a plain class, and a
        ``torch.stack``/``torch.cat`` of the container in that class.
        """
        for (cls, attr), appends in self.attribute_appends.items():
            host = [(n, v) for n, v in appends if v.where == HOST]  # `stack` takes no 0-dim CPU exception
            device = [(n, v) for n, v in appends if v.where == DEVICE]
            if not host or not device or not _stacked(self.ctx, cls, attr):
                continue
            node, _ = min(host, key=lambda pair: (line(pair[0]), pair[0].col_offset))
            other, val = min(device, key=lambda pair: (line(pair[0]), pair[0].col_offset))
            where = val.dev or "device"
            fix_where = self.visible_device(where, node)
            item = short(self.segment(node.args[0]))
            made = isinstance(node.args[0], ast.Call) and (self.ctx.call_name(node.args[0]) or "").startswith("torch.")
            also = f", or make it with `device={fix_where}`" if made else ""
            self.found.setdefault(
                ("FRY006", line(node)),
                Report(
                    "FRY006",
                    node,
                    f"`self.{attr}` collects `{item}`, on the host, and tensors on `{where}` (line {line(other)}), "
                    f"and the class stacks them into one tensor: on a GPU that fails; fix: "
                    f"`self.{attr}.append({item}.to({fix_where}))`{also}",
                ),
            )

    # -- functions of the file: callers first, parameters from the call sites ----------------------------------

    def note_closure_call(self, name: str) -> None:
        """Note a call of a function defined inside the scope being read (a closure).

        ``train(epoch)`` in ``main``: what ``train`` reads of ``main``'s names (the features, the model) is what they
        hold at the call.
        """
        scope = self.scope
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) or self.returns is not None:
            return
        nested = next(
            (
                n
                for n in ast.walk(scope)
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                and n.name == name
                and self.ctx.enclosing_function(n) is scope
            ),
            None,
        )
        if nested is not None:
            envs = self.closure_envs.setdefault(nested, [])
            if len(envs) < 16:
                envs.append(dict(self.env))

    def _closure(self, func: ast.FunctionDef | ast.AsyncFunctionDef, declared: set[str]) -> dict[str, Val]:
        """The enclosing function's names as a nested function sees them: their values at its calls there, merged.

        Only names it reads and does not bind (or declare ``nonlocal``/``global``), of a kind worth handing on.
        """
        envs = self.closure_envs.get(func)
        if not envs:
            return {}
        local = bound_names(func) | declared
        free = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - local
        found: dict[str, Val] = {}
        for name in free:
            vals = [env[name] for env in envs if name in env]
            if len(vals) != len(envs):
                continue
            val = vals[0]
            for other in vals[1:]:
                val = join(val, other, None)
            # a batch's items too: timm's `def _forward(): output = model(input)` inside the loop over the loader
            if _seedable(val) or (val.what == "batch" and val.where is not None):
                found[name] = val
        return found

    def _declared_globals(self) -> dict[str, Val]:
        """The names the function being read declares ``global``, as it has set them by now (tracked kinds only)."""
        scope = self.scope
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            return {}
        names = {
            name
            for node in ast.walk(scope)
            if isinstance(node, ast.Global) and self.ctx.enclosing_function(node) is scope
            for name in node.names
        }
        found: dict[str, Val] = {}
        for name in names:
            val = self.env.get(name)
            if val is None:
                continue
            if _seedable(val) or (val.what in ("seq", "dict") and val.element is not None and _seedable(val.element)):
                found[name] = val
        return found

    def _globals_seen_by_functions(self, module_envs: list[dict[str, Val]]) -> dict[str, Val]:
        """Module-level names as the file's functions see them.

        Their values at every call of a function of the file in the module's code, merged (or at the end of the
        module's code when it calls none).

        Left out: names bound under other names (``a.b``), names some function declares ``global``, and modules that
        some function moves or hands to another call (they may be anywhere when it runs).
        """
        handled = self._handled_by_functions()
        seeds: dict[str, Val] = {}
        names = {name for env in module_envs for name in env}
        for name in names:
            if "." in name or name in self.global_names():
                continue
            # a call made before the name is bound runs a function that does not read it (or fails)
            vals = [env[name] for env in module_envs if name in env]
            val = vals[0]
            for other in vals[1:]:
                val = join(val, other, None)
            if val.what == "module" and name in handled:
                continue
            if _seedable(val) or (val.what in ("seq", "dict") and val.element is not None and _seedable(val.element)):
                seeds[name] = val  # a dict of loaders (`dataloaders[phase]`) too
            elif val.what == "dict" and not val.keys and val.element is not None and val.element.what == "none":
                seeds[name] = val  # `mel_basis = {}`: a cache that the functions fill
        return seeds

    def _handled_by_functions(self) -> set[str]:
        """Names the file's functions move or hand to a call (``model.to(device)``, ``train(model)``)."""
        if self._handled is None:
            handled: set[str] = set()
            own: dict[ast.AST, frozenset[str]] = {}  # each function's local names: a namesake there is another variable

            def outside(name: str, node: ast.AST) -> bool:
                scope = self.ctx.enclosing_function(node)
                if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                    return True
                if scope not in own:
                    declared = {n for g in ast.walk(scope) if isinstance(g, ast.Global) for n in g.names}
                    own[scope] = bound_names(scope) - declared
                return name.split(".")[0] not in own[scope]

            for func in [*self.ctx.nodes(ast.FunctionDef), *self.ctx.nodes(ast.AsyncFunctionDef)]:
                for node in ast.walk(func):
                    if isinstance(node, ast.Call):
                        if isinstance(node.func, ast.Attribute) and node.func.attr in MOVES:
                            moved = dotted(node.func.value) or ""
                            if outside(moved, node):  # not `net = net.cuda()` of `get_network`'s own `net`
                                handled.add(moved)
                        if self.ctx.call_name(node) in _READ_ONLY_CALLS or (
                            isinstance(node.func, ast.Name) and node.func.id in HARMLESS_READS
                        ):
                            continue  # `torch.save(model, path)`, `print(model)`: read, left where they are
                        for arg in [*node.args, *(k.value for k in node.keywords)]:
                            if isinstance(arg, ast.Name) and outside(arg.id, node):
                                handled.add(arg.id)
            self._handled = handled
        return self._handled

    def _setup_functions(
        self, declared: dict[ast.AST | None, set[str]], module_env: dict[str, Val]
    ) -> dict[ast.AST, set[str]]:
        """Functions that set up module globals, and the names each sets: ``def setup(): global net; net = ...``.

        A name counts when exactly one function of the file declares it ``global`` and binds it, that function is
        called somewhere in the file, and the module's own code leaves the name unbound or holding nothing the
        analysis follows (``net = None``). The file's other functions that read the name then see it as that
        function leaves it (mixup-cifar10's ``setup`` builds and moves ``net`` for ``train`` and ``test``).
        """
        writers: dict[str, list[ast.AST]] = {}
        for func, names in declared.items():
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                for name in names & bound_names(func):
                    writers.setdefault(name, []).append(func)
        setups: dict[ast.AST, set[str]] = {}
        self.shared_setups = {}
        for name, funcs in writers.items():
            held = module_env.get(name)
            called = all(self._calls_of(getattr(f, "name", "")) for f in funcs)
            if called and (held is None or not _seedable(held)):
                for func in funcs:
                    setups.setdefault(func, set()).add(name)
                if len(funcs) > 1:  # PSMNet's `make_model_and_optimizer` and `submission_main`: see `_writer_for`
                    self.shared_setups[name] = funcs
        return setups

    def _writer_for(self, func: ast.AST, name: str) -> ast.AST | None:
        """Which of the functions that set up the global ``name`` (see :meth:`_setup_functions`) ``func`` sees.

        PSMNet's ``main`` calls ``make_model_and_optimizer()`` (``global model``), then ``train(...)`` reads
        ``model``; ``submission_main`` binds its own ``global model`` and calls ``submission_test``. For every call of
        ``func`` by name: the writer that makes the call, or the last writer its caller calls above the call. One
        writer for every call, else ``None``.
        """
        writers = self.shared_setups.get(name, [])
        sites = [n for n in self._calls_of(getattr(func, "name", "")) if isinstance(n.func, ast.Name)]
        chosen: set[ast.AST] = set()
        for site in sites:
            caller = self.ctx.enclosing_function(site)
            if caller in writers:
                chosen.add(caller)
                continue
            above = [
                n
                for n in ast.walk(caller if caller is not None else self.ctx.tree)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and self.local_functions.get(n.func.id) in writers
                and (n.lineno, n.col_offset) < (site.lineno, site.col_offset)
                and self.ctx.enclosing_function(n) is caller
            ]
            if not above:
                return None
            last = max(above, key=lambda n: (n.lineno, n.col_offset))
            chosen.add(self.local_functions[last.func.id])  # type: ignore[attr-defined]
        return next(iter(chosen)) if len(chosen) == 1 else None

    def _callers_first(
        self,
        functions: list[ast.FunctionDef | ast.AsyncFunctionDef],
        setups: dict[ast.AST, set[str]] | None = None,
    ) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """``functions`` ordered so that each local function comes after every function that calls it.

        Local functions: see :func:`local_functions`. A function that reads a global which a setup function
        (``setups``, see :meth:`_setup_functions`) binds comes after that function too. Functions in a cycle keep
        their order (their parameters stay unknown).
        """
        callers: dict[ast.AST, set[ast.AST]] = {}
        for setup, names in (setups or {}).items():
            for func in functions:
                if func is not setup and names & _free_reads(func) and not _calls_by_name(func, setup):
                    # a function that runs the setup itself (`args = parse(argv)` style, PSMNet's `sceneflow_main`
                    # calling `parse(...)`) is its caller, read before it
                    callers.setdefault(func, set()).add(setup)
        for node in self.ctx.nodes(ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in self.local_functions:
                callee = self.local_functions[node.func.id]
                caller = self.ctx.enclosing_function(node)
                if caller is not callee:
                    callers.setdefault(callee, set()).add(caller if caller is not None else self.ctx.tree)
            elif isinstance(node.func, ast.Attribute) and (
                (own := self._own_method(node.func, self.ctx.enclosing_function(node))) is not None
            ):
                callers.setdefault(own, set()).add(self.ctx.enclosing_function(node) or self.ctx.tree)
            elif (
                isinstance(node.func, ast.Attribute)
                and ((on := self.plain_method(node.func)) is not None or (on := self.static_method(node.func)))
            ) or (isinstance(node.func, ast.Name) and (on := self._called_instance(node.func)) is not None):
                # `trainer.fit(loader)`, `compute_loss(x, y)` on an instance: the method sees what the call passes
                caller = self.ctx.enclosing_function(node)
                if caller is not on:
                    callers.setdefault(on, set()).add(caller if caller is not None else self.ctx.tree)
            elif (
                isinstance(node.func, ast.Attribute)
                and dotted(node.func.value) not in ("self", None)
                and node.func.attr not in MOVES | SAME_MODULE | {"forward", "__call__"}
                and (definers := module_methods(self.ctx, node.func.attr))
            ):
                # `model.observe(x, t, y)`: a method of the file's module classes, read with the module it is called on
                caller = self.ctx.enclosing_function(node)
                for definer in definers:
                    if caller is not definer:
                        callers.setdefault(definer, set()).add(caller if caller is not None else self.ctx.tree)
            elif isinstance(node.func, ast.Name) and node.func.id in self.ctx.kinds.classes:
                # `Trainer(model, dataset)`: its methods see what the scope that builds it passes
                cls = self.ctx.kinds.classes[node.func.id]
                caller = self.ctx.enclosing_function(node)
                for current in self.ctx.kinds.class_chain(cls):  # and the methods it inherits (DeepCTR's `fit`)
                    for method in current.body:
                        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method is not caller:
                            callers.setdefault(method, set()).add(caller if caller is not None else self.ctx.tree)
        for func in functions:  # a nested function (a closure) is read after the function it is defined in
            outer = self.ctx.enclosing_function(func)
            if outer is not None and outer is not func and outer in functions:
                callers.setdefault(func, set()).add(outer)
        ordered: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        placed: set[ast.AST] = {self.ctx.tree}
        waiting = list(functions)
        while waiting:
            ready = [f for f in waiting if callers.get(f, set()) <= placed]
            if not ready:  # a cycle: take the rest in file order
                ordered.extend(waiting)
                break
            for func in ready:
                ordered.append(func)
                placed.add(func)
            waiting = [f for f in waiting if f not in placed]
        return ordered

    def _contexts(
        self, func: ast.FunctionDef | ast.AsyncFunctionDef, done: set[ast.AST], seeds: dict[str, Val]
    ) -> list[tuple[dict[str, Val], dict[str, Val]]]:
        """The values a local function's parameters and globals take, one pair of dicts per way it is called.

        Each call site that passes different values is read on its own (up to :data:`_MAX_CONTEXTS` of them), so
        ``train(model_a)`` and ``train(model_b)`` are each checked with their own model; a call in the module's own
        code comes with the globals as they are there (``evaluate(val_data)`` before the model is reloaded, and
        after). Beyond that many, the sites' values merged, with ``seeds`` (the globals merged over every call).
        Only values of a kind the analysis tracks; no parameter values when some site is not known or some caller
        has not been read yet.
        """
        if func in self.method_sites:
            return self._method_contexts(func, done, seeds)
        if self.local_functions.get(func.name) is not func:
            return [({}, seeds)]
        sites = self.call_sites.get(func.name)
        if not sites:
            return [({}, seeds)]
        callers = {self.ctx.enclosing_function(n) or self.ctx.tree for n in self._calls_of(func.name)}
        if not callers <= done:
            return [({}, seeds)]
        snapshots = self.site_globals.get(func.name, [])
        declared = self.site_declared.get(func.name, [])
        defaults = _literal_defaults(func)
        distinct: dict[tuple[object, ...], tuple[dict[str, Val], dict[str, Val]]] = {}
        for i, site in enumerate(sites):
            kept = {name: _passable(name, val) for name, val in site.items()}
            given = {name: val for name, val in kept.items() if val is not None}
            given.update((name, val) for name, val in defaults.items() if name not in site)
            snapshot = snapshots[i] if i < len(snapshots) else None
            seen = self._globals_seen_by_functions([snapshot]) if snapshot is not None else seeds
            if i < len(declared) and declared[i]:
                # `global dataloaders, use_gpu` in person re-ID's `train_main`, which sets them, then calls
                # `train_model(...)`: the callee reads them as the caller has just set them
                seen = {**seen, **declared[i]}
            key = (_context_key(given), _context_key(seen))
            distinct.setdefault(key, (given, seen))
            if len(distinct) > _MAX_CONTEXTS:
                break
        if len(distinct) <= _MAX_CONTEXTS:
            return list(distinct.values())
        merged: dict[str, Val] = {}
        for name in sites[0]:
            vals = [site.get(name, UNKNOWN) for site in sites]
            val = vals[0]
            for other in vals[1:]:
                val = join(val, other, None)
            passable = _passable(name, val)
            if passable is not None:
                merged[name] = passable
        return [(merged, seeds)]

    def _method_contexts(
        self, func: ast.FunctionDef | ast.AsyncFunctionDef, done: set[ast.AST], seeds: dict[str, Val]
    ) -> list[tuple[dict[str, Val], dict[str, Val]]]:
        """:meth:`_contexts` of a plain class's method, from its calls on instances the file builds.

        See :meth:`record_method_call`: one context per distinct call, when every calling scope has been read.
        """
        sites = self.method_sites.get(func)
        if not sites:
            return [({}, seeds)]
        if not {self.ctx.enclosing_function(call) or self.ctx.tree for call, _ in sites} <= done:
            return [({}, seeds)]
        defaults = _literal_defaults(func)
        distinct: dict[tuple[object, ...], tuple[dict[str, Val], dict[str, Val]]] = {}
        if func in self.module_method_sites:  # its class's own calls (`self.helper(x)` in `forward`) are not sites
            distinct[_context_key({})] = ({}, seeds)
        for _, site in sites:
            given = {name: val for name, val in ((n, _passable(n, v)) for n, v in site.items()) if val is not None}
            given.update((name, val) for name, val in defaults.items() if name not in site)
            distinct.setdefault(_context_key(given), (given, seeds))
            if len(distinct) > _MAX_CONTEXTS:
                return [({}, seeds)]
        return list(distinct.values())

    def plain_method(self, func: ast.Attribute) -> ast.FunctionDef | None:
        """The method ``obj.<name>`` calls where ``obj`` is an instance of a plain class of the file.

        ``obj`` is a name bound only to constructions of that class (``simclr = SimCLR(...)``), and the class
        defines the method itself, undecorated.
        """
        if isinstance(func.value, ast.Attribute):
            return self._attribute_method(func)
        if not isinstance(func.value, ast.Name):
            return None
        own = self._own_method(func)
        if own is not None:
            return own
        values = list(self.ctx.kinds.assigned_values(func.value.id))
        kinds = {self.ctx.kind(v) for v in values if isinstance(v, ast.Call)}
        classes = {k.cls for k in kinds if k is not None and k.name == "instance" and k.cls is not None}
        passed = self.ctx.kinds.lookup(func.value.id, func) if _unbound_parameter(self.scope, func.value.id) else None
        if passed is not None and passed.name == "instance" and passed.cls:
            # a parameter of the function being read: the class every call of the function passes (`dqn.learn(mem)`)
            classes = {passed.cls}
        elif not values or len(classes) != 1 or len(kinds) != 1 or not all(isinstance(v, ast.Call) for v in values):
            # every binding of the name, anywhere in the file, builds the same class (`VecPyTorch(...)`, or a
            # function of the file that returns one: `envs = make_vec_envs(...)`); else its annotation
            return self._annotated_method(func)
        return self._plain_method_of(self.ctx.kinds.classes.get(classes.pop()), func.attr)

    def _plain_method_of(self, cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
        """The undecorated method ``name`` of plain class ``cls``: its own, or the nearest base class's of the file."""
        if cls is None or not self._plain_class(cls):
            return None
        for current in self.ctx.kinds.class_chain(cls):
            method = next((m for m in current.body if isinstance(m, ast.FunctionDef) and m.name == name), None)
            if method is not None:
                return method if not method.decorator_list else None
        return None

    def _attribute_method(self, func: ast.Attribute) -> ast.FunctionDef | None:
        """``self.ae_trainer.train(...)``: the method of the plain class of the file that every store builds.

        Every assignment of ``self.<attr>`` in the file builds that one class (``self.ae_trainer = AETrainer(...)``),
        or is a ``None`` placeholder (``self.ae_trainer = None`` in ``__init__``).
        """
        owner = dotted(func.value)
        if owner is None or owner.count(".") != 1 or not owner.startswith("self."):
            return None
        values = list(self.ctx.kinds.assigned_values(owner))
        calls = [v for v in values if isinstance(v, ast.Call)]
        placeholders = [v for v in values if isinstance(v, ast.Constant) and v.value is None]
        if not calls or len(calls) + len(placeholders) != len(values):
            return None
        kinds = {self.ctx.kind(v) for v in calls}
        kind = kinds.pop() if len(kinds) == 1 else None
        if kind is None or kind.name != "instance" or kind.cls is None:
            return None
        return self._plain_method_of(self.ctx.kinds.classes.get(kind.cls), func.attr)

    def _annotated_method(self, func: ast.Attribute) -> ast.FunctionDef | None:
        """``dataset.loaders(...)`` on a parameter annotated with a plain class of the file (``dataset: Base``).

        The one method of that name that the class or its subclasses in the file define with a body (an abstract
        ``pass`` in the base, ``DataLoader(...)`` built in the one subclass); ``None`` where there is not exactly one.
        """
        name = func.value.id if isinstance(func.value, ast.Name) else None
        scope = self.scope
        if name is None or not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            return None
        if not _unbound_parameter(scope, name):
            return None
        params = scope.args
        arg = next((a for a in [*params.posonlyargs, *params.args, *params.kwonlyargs] if a.arg == name), None)
        annotation = arg.annotation if arg is not None else None
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            annotation = ast.Name(id=annotation.value, ctx=ast.Load())  # `dataset: "BaseADDataset"`
        declared = dotted(annotation) if annotation is not None else None
        classes = self.ctx.kinds.classes
        if declared is None or declared not in classes:
            return None
        family = [cls for cls in classes.values() if self._descends(cls, declared)]
        found = [
            m
            for cls in family
            for m in cls.body
            if isinstance(m, ast.FunctionDef) and m.name == func.attr and not m.decorator_list and not _abstract(m)
        ]
        if len(found) != 1:
            return None
        owner = self.ctx.enclosing_class(found[0])
        return found[0] if owner is not None and self._plain_class(owner) else None

    def _descends(self, cls: ast.ClassDef, name: str, depth: int = 0) -> bool:
        """Whether the class ``cls`` of the file is the class ``name`` or a subclass of it in the file."""
        if cls.name == name:
            return True
        if depth > 5:
            return False
        bases = [self.ctx.kinds.classes.get(dotted(b) or "") for b in cls.bases]
        return any(b is not None and b is not cls and self._descends(b, name, depth + 1) for b in bases)

    def static_method(self, func: ast.Attribute) -> ast.FunctionDef | None:
        """The ``@staticmethod`` of a class of the file that ``Cls.step(...)`` or ``obj.step(...)`` calls.

        A static method is a function of the file kept in a class (KnowledgeGraphEmbedding's
        ``KGEModel.train_step(model, optimizer, iterator, args)``, called as ``kge_model.train_step(kge_model, ...)``):
        its parameters take what the calls pass, as a local function's do. ``Cls`` names the class, or no other
        class of the file defines a method of that name.
        """
        classes = self.ctx.kinds.classes
        if isinstance(func.value, ast.Name) and func.value.id in classes and func.value.id not in self.env:
            owners = [classes[func.value.id]]
        else:
            owners = [c for c in classes.values() if any(_defines(m, func.attr) for m in c.body)]
        if len(owners) != 1:
            return None
        method = next((m for m in owners[0].body if _defines(m, func.attr)), None)
        if not isinstance(method, ast.FunctionDef) or not is_static(method):
            return None
        return method

    def _own_method(self, func: ast.Attribute, caller: ast.AST | None = None) -> ast.FunctionDef | None:
        """``self.<name>`` called inside a method of a plain class: the class's own undecorated method of that name.

        ``def train(self, epoch): self.iteration(epoch, self.train_data)``: the method sees what each of its
        class's methods passes, as a call on an instance does (``caller``: the calling function; default: the scope
        being read).
        """
        scope = caller if caller is not None else self.scope
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) or not isinstance(func.value, ast.Name):
            return None
        if not scope.args.args or scope.args.args[0].arg != func.value.id or scope.decorator_list:
            return None
        cls = self.ctx.enclosing_class(scope)
        if cls is None or scope not in cls.body or not self._plain_class(cls):
            return None
        method = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == func.attr), None)
        if method is None and (sub := self._built_subclass(cls)) is not None and self._plain_class(sub):
            # `self.calculate_loss(batch)` in the abstract trainer: the one subclass built defines it
            method = next((m for m in sub.body if isinstance(m, ast.FunctionDef) and m.name == func.attr), None)
        if method is None or method is scope or method.decorator_list or method.name.startswith("__"):
            return None
        return method

    def record_method_call(
        self, node: ast.Call, method: ast.FunctionDef, args: list[Val], kwargs: dict[str | None, Val]
    ) -> set[ast.expr]:
        """Note what a call of a plain class's ``method`` (see :meth:`plain_method`) passes.

        Returns the arguments that the method may move or keep; the others it only reads.
        """
        static = is_static(method)
        params = [a.arg for a in [*method.args.posonlyargs, *method.args.args]][0 if static else 1 :]  # after `self`
        owner = self.ctx.enclosing_class(method)
        me = method.args.args[0].arg if method.args.args else "self"
        siblings = {
            f"{me}.{m.name}": m for m in (owner.body if owner is not None else []) if isinstance(m, ast.FunctionDef)
        }
        keeps = keeping_parameters(method, {**self.local_functions, **siblings}, self.reading_method)
        escaping = {arg for name, arg in zip(params, node.args, strict=False) if name not in keeps}
        escaping.update(k.value for k in node.keywords if k.arg not in keeps)
        escaping.update(node.args[len(params) :])
        if self.returns is not None or (self.silent and self.silent != self.first_pass):
            return escaping
        known = self.method_sites.setdefault(method, [])
        if known is None:
            return escaping
        if (
            any(isinstance(a, ast.Starred) for a in node.args)
            or any(k.arg is None for k in node.keywords)
            or len(node.args) > len(params)
        ):
            self.method_sites[method] = None
            return escaping
        given = dict(zip(params, (_handed(a) for a in args), strict=False))
        given.update((k.arg, _handed(kwargs.get(k.arg, UNKNOWN))) for k in node.keywords if k.arg is not None)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) and not static else None
        if isinstance(receiver, ast.Name) and receiver.id != me:
            # `rollouts.compute_returns(...)` after `rollouts.to(device)`: `self.<attr>` as the instance holds it here
            prefix = f"{receiver.id}."
            for key, val in self.env.items():
                attr = key[len(prefix) :]
                if key.startswith(prefix) and attr.isidentifier() and val.what in TENSORISH:
                    given[f"{me}.{attr}"] = _handed(val)
        known.append((node, given))
        return escaping

    def record_module_method_call(
        self, node: ast.Call, method: ast.FunctionDef, receiver: Val, args: list[Val], kwargs: dict[str | None, Val]
    ) -> None:
        """Note a call of a module class's ``method`` on a module the analysis places (``rvae.sample(loader, seed)``).

        The method is then read with what each call passes, ``self`` being that module: where its weights are, its
        own calls (``self(...)``, ``self.fc(x)``) meet the tensors it makes or is given.
        """
        if self.returns is not None or (self.silent and self.silent != self.first_pass):
            return
        known = self.method_sites.setdefault(method, [])
        if known is None:
            return
        params = [a.arg for a in [*method.args.posonlyargs, *method.args.args]]
        if (
            not params
            or any(isinstance(a, ast.Starred) for a in node.args)
            or any(k.arg is None for k in node.keywords)
            or len(node.args) > len(params) - 1
        ):
            self.method_sites[method] = None
            return
        self.module_method_sites.add(method)

        def passed(val: Val) -> Val:
            # a host tensor handed in is the caller's to report (the call feeds the module): here it is not known
            return UNKNOWN if val.what in TENSORISH and val.where == HOST else _handed(val)

        given = dict(zip(params[1:], (passed(a) for a in args), strict=False))
        given.update((k.arg, passed(kwargs.get(k.arg, UNKNOWN))) for k in node.keywords if k.arg is not None)
        given[params[0]] = replace(receiver, origin=None, fresh=False, bound_self=True)
        known.append((node, given))

    def _calls_of(self, name: str) -> list[ast.Call]:
        """The calls of the file's function ``name``, also through its aliases (``loss_fn = prototypical_loss``)."""
        func = self.local_functions.get(name)
        names = {alias for alias, f in self.local_functions.items() if f is func} if func is not None else {name}
        return [n for n in self.ctx.nodes(ast.Call) if isinstance(n.func, ast.Name) and n.func.id in names | {name}]

    def returned(self, node: ast.Call, args: list[Val], kwargs: dict[str | None, Val]) -> Val:
        """What a call of a local function returns, read from its body with the values the call passes.

        Three calls deep at most; ``*args``/``**kwargs`` at the call, or a function without ``return`` statements
        give an unknown value. A generator gives a sequence of what it yields (``data_gen = inf_generator(loader)``,
        then ``x, y = data_gen.__next__()``).
        """
        assert isinstance(node.func, ast.Name)
        func = self.local_functions[node.func.id]
        if any(isinstance(n, ast.Yield) for n in ast.walk(func)):
            yielded = self._returned_by(func, node, args, kwargs, yields=True)
            return Val("seq", element=yielded) if yielded.what != "unknown" else UNKNOWN
        return self._returned_by(func, node, args, kwargs)

    def method_returned(
        self, method: ast.FunctionDef, node: ast.Call, args: list[Val], kwargs: dict[str | None, Val]
    ) -> Val:
        """What a call of a method of the file's module classes returns (``model.init_hidden(n)``).

        Read like a local function's call, ``self`` unknown: ``torch.zeros(self.n_layers, n, self.hidden)`` is a
        host tensor, ``weight.new_zeros(...)`` or ``torch.zeros(..., device=self.device)`` not known.
        """
        return self._returned_by(method, node, args, kwargs, bound=not is_static(method))

    def _returned_by(
        self,
        func: ast.FunctionDef | ast.AsyncFunctionDef,
        node: ast.Call,
        args: list[Val],
        kwargs: dict[str | None, Val],
        bound: bool = False,
        yields: bool = False,
    ) -> Val:
        """:meth:`returned` of ``func``; ``bound``: a method, whose first parameter (``self``) no call passes.

        ``yields``: what a generator yields (an item of what it gives), instead.
        """
        generator = any(isinstance(n, ast.Yield | ast.YieldFrom | ast.Await) for n in ast.walk(func))
        if yields:
            plain = any(isinstance(n, ast.Yield) for n in ast.walk(func))
            if not plain or any(isinstance(n, ast.YieldFrom | ast.Await) for n in ast.walk(func)):
                return UNKNOWN
        if self.depth >= _MAX_DEPTH or (generator and not yields):
            return UNKNOWN
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return UNKNOWN
        names = [a.arg for a in [*func.args.posonlyargs, *func.args.args]][1 if bound else 0 :]
        vararg = func.args.vararg
        if len(node.args) > len(names) and vararg is None:
            return UNKNOWN
        params: dict[str, Val] = dict(zip(names, args, strict=False))
        if vararg is not None:  # `def pad(self, *inputs)`: the tuple of what the call passes beyond the named ones
            params[vararg.arg] = Val("tuple", items=tuple(args[len(names) :]))
        params.update({k: v for k, v in kwargs.items() if k is not None})
        params = {k: replace(v, origin=None, name=k) for k, v in params.items()}
        seen = self.seeds if self.seeds is not None else (self.env if self.scope is self.ctx.tree else {})
        local = bound_names(func)
        env = {k: v for k, v in seen.items() if "." not in k and k not in local and k not in params}
        env.update(params)
        owner = self.ctx.enclosing_class(func) if bound else None
        if owner is not None and func in owner.body and self._plain_class(owner):
            env.update(self.instance_attributes(owner))  # `self.alpha_hat` as `__init__` leaves it
        shapes = ((k, v.what, v.where, v.dev, tuple((i.what, i.where, i.dev) for i in v.items)) for k, v in env.items())
        key = (func, yields, tuple(sorted(shapes)))
        if key in self._returned_memo:
            return self._returned_memo[key]
        self._returned_memo[key] = UNKNOWN  # recursion guard
        vals = self.returns_of(func, env, yields=yields)
        result = UNKNOWN
        if vals:
            result = vals[0]
            decides = lambda: any(  # noqa: E731  `if torch.cuda.is_available(): return cuda` / `return cpu`
                isinstance(n, ast.If | ast.IfExp) and self.ctx.mentions_availability(n.test) for n in ast.walk(func)
            )
            for other in vals[1:]:
                result = join(result, other, decides)
            # a replaced layer, or a module built in the function and never moved there: reported where it was built
            keep = result.part is not None or (result.what == "module" and result.fresh and result.where == HOST)
            origin = result.origin if keep else None
            result = replace(result, origin=origin, name=None)
        self._returned_memo[key] = result
        return result

    def _reader(self) -> _Flow:
        """A flow one call deeper that reads code for its values and reports nothing (the file's caches shared)."""
        reader = _Flow(self.ctx)
        reader.local_functions = self.local_functions
        reader.seeds = self.seeds
        reader.depth = self.depth + 1
        reader.returns = []
        reader._classes = self._classes
        reader._attribute_kinds = self.weight_attributes()
        reader.constructions = self.constructions
        return reader

    def returns_of(
        self, func: ast.FunctionDef | ast.AsyncFunctionDef, env: dict[str, Val], yields: bool = False
    ) -> list[Val]:
        """The values of ``func``'s ``return`` statements, its body read with ``env`` one call deeper (no reports).

        ``yields``: the values of its ``yield`` statements instead.
        """
        reader = self._reader()
        reader.yielding = yields
        reader._datasets = self._datasets
        found: list[Val] = []
        reader.returns = found
        reader._scope(func, func.body, env, frozenset())
        # SR-GNN's `trans_to_cpu`: `if torch.cuda.is_available(): return variable.cpu()` / `else: return variable`;
        # on a GPU only the first runs (the others count where nothing else returns)
        return found or reader.host_returns

    def dataset(self, cls: ast.ClassDef) -> Val:
        """An instance of the map-style dataset class ``cls``, as a ``DataLoader`` without a ``collate_fn`` sees it.

        The default collate stacks what ``__getitem__`` returns: tensors stay where they are, Python numbers become
        tensors on the host. So the batches are where ``__getitem__``'s tensors are (item by item for a tuple);
        unknown for anything else, or when ``__getitem__`` is not found or returns different shapes.
        """
        if cls in self._datasets:
            return self._datasets[cls]
        self._datasets[cls] = Val("dataset")  # recursion guard
        get = _find_method(self.ctx, cls, "__getitem__")
        if (
            get is None
            or self.depth >= _MAX_DEPTH
            or any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(get))
        ):
            return self._datasets[cls]
        args = get.args
        env: dict[str, Val] = {k: v for k, v in (self.seeds or {}).items() if "." not in k}
        for name in bound_names(get):
            env.pop(name, None)
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                env[arg.arg] = UNKNOWN
        owner = self.ctx.enclosing_class(get)
        if owner is not None:
            env.update(self.instance_attributes(owner))
        shapes = {_collated(val) for val in self.returns_of(get, env)}
        if len(shapes) == 1:
            shape = shapes.pop()
            if shape.what == "tuple" and any(item.where is not None for item in shape.items):
                items = shape.items
                if not _names_devices(cls):  # PSMNet's `dataL` (a NumPy array): made on the host like the others
                    items = tuple(Val("batch", HOST, item=True) if i.where is None else i for i in items)
                self._datasets[cls] = Val("dataset", items=items)
            elif shape.what == "tensor" and shape.where is not None:  # each batch one tensor, stacked
                self._datasets[cls] = Val("dataset", shape.where, item=True)
            elif shape.what == "dict" and shape.element is not None:
                self._datasets[cls] = Val("dataset", shape.element.where)
        if self._datasets[cls].where is None and not self._datasets[cls].items and not _names_devices(cls):
            # `img = self.transforms(img); return img`: a dataset that never names a device makes its samples on the
            # host (NumPy arrays, numbers, host tensors), and the default collate stacks them there
            self._datasets[cls] = Val("dataset", HOST)
        return self._datasets[cls]

    def record_call(
        self, node: ast.Call, args: list[Val], kwargs: dict[str | None, Val], top: bool = False
    ) -> set[ast.expr]:
        """Note what a call of a local function passes for each parameter.

        Returns the arguments that the function may move or keep; the others it only reads, so they keep their
        value here.
        """
        assert isinstance(node.func, ast.Name)
        func = self.local_functions[node.func.id]
        if self.scope is self.ctx.tree and self.returns is None and len(self.call_envs) < 64:
            self.call_envs.append(dict(self.env))  # `main()`, `train(epoch)`: the globals it sees
        params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
        given: dict[str, Val] | None = {}
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            given = None
        else:
            assert given is not None
            if len(node.args) > len(params) and func.args.vararg is None:
                given = None
            else:
                for name, val in zip(params, args, strict=False):
                    given[name] = val
                for keyword in node.keywords:
                    if keyword.arg is not None:
                        given[keyword.arg] = kwargs.get(keyword.arg, UNKNOWN)
                passed = dict(zip(params, node.args, strict=False))
                passed.update((k.arg, k.value) for k in node.keywords if k.arg is not None)
                for name in _dispatched(func):
                    text = passed.get(name)
                    literal = isinstance(text, ast.Constant) and isinstance(text.value, str)
                    if literal and isinstance(text, ast.Constant):
                        given[name + _LITERAL] = Val("str", dev=repr(text.value))  # the literal, for `_literal_test`
                    else:
                        given[name + _LITERAL] = STRING if name not in passed else OTHER
        if not self.silent or self.silent == self.first_pass:  # the first pass of a loop is a real call too
            sites = self.call_sites.setdefault(func.name, [])
            if given is None or sites is None:
                self.call_sites[func.name] = None
            else:
                sites.append(given)
                self.site_nodes.setdefault(func.name, set()).add(node)
                module_level = self.scope is self.ctx.tree and self.returns is None
                self.site_globals.setdefault(func.name, []).append(dict(self.env) if module_level else None)
                self.site_declared.setdefault(func.name, []).append(self._declared_globals())
        keeps = keeping_parameters(func, self.local_functions, self.reading_method)
        escaping: set[ast.expr] = set()
        for name, arg in zip(params, node.args, strict=False):
            if name not in keeps:
                escaping.add(arg)
        for keyword in node.keywords:
            if keyword.arg not in keeps:
                escaping.add(keyword.value)
        escaping.update(node.args[len(params) :])
        return escaping

    def _scope(self, scope: ast.AST, body: list[ast.stmt], params: dict[str, Val], excluded: frozenset[str]) -> None:
        self.scope, self.env, self.excluded = scope, dict(params), excluded
        self.silent = self.first_pass = self.loop_depth = self.strange_context = 0
        self._owners = set()
        with suppress(RecursionError):  # absurdly nested code: stop reading this scope
            self._block(body)

    def module_attributes(self, cls: ast.ClassDef) -> dict[str, Val]:
        """``self.<attr>`` of an ``nn.Module`` class of the file that its ``__init__`` moved to the device itself.

        DA-RNN's wrapper: ``self.Encoder = Encoder(...).to(self.device)`` in ``__init__``, then its ``train`` method
        feeds ``self.Encoder`` tensors of its own. For the class's methods other than ``forward`` (a forward's
        inputs are checked where the module is called); also the devices it keeps. As
        :meth:`instance_attributes`: nothing another method rebinds, moves or hands on.
        """
        if cls in self._module_attributes:
            return self._module_attributes[cls]
        self._module_attributes[cls] = {}
        if self._plain_class(cls) or not self.ctx.kinds.class_is_module(cls.name):
            return {}
        plain = self._plain_tensor_attributes(cls)
        found = {
            k: v
            for k, v in self.instance_attributes(cls, modules=True).items()
            if v.what == "device"
            or (v.what == "module" and v.where == DEVICE and not v.fresh)
            or (v.what in TENSORISH and v.where in (HOST, DEVICE) and k.partition(".")[2] in plain)
        }
        for k, v in self.instance_attributes(cls, modules=True).items():
            if v.what == "module" and v.loss and v.params is not True and k not in found:
                # `self.ce = nn.CrossEntropyLoss()`: a submodule, so wherever the module is; it compares its inputs
                found[k] = replace(v, where=None, dev=None, origin=None, moved_at=None)
        self._module_attributes[cls] = found
        return found

    def _plain_tensor_attributes(self, cls: ast.ClassDef) -> set[str]:
        """Attributes that only ``__init__`` of module class ``cls`` binds, never as a parameter or buffer.

        GEM's episodic memory: ``self.memory_data = torch.FloatTensor(...)``, then ``if args.cuda:
        self.memory_data = self.memory_data.cuda()``. ``Module.to`` does not move such a tensor, so it stays where
        ``__init__`` put it. Not when the class (or a base of the file) overrides a move (``to``, ``cuda``,
        ``_apply``), names the attribute in a string (``register_buffer("mem", ...)``, ``setattr``), wraps it as
        ``nn.Parameter``, or code outside the class stores it.
        """
        chain = self.ctx.kinds.class_chain(cls)
        if any(isinstance(m, ast.FunctionDef) and m.name in MOVING_METHODS for c in chain for m in c.body):
            return set()
        named: set[str] = set()
        stored: dict[str, list[ast.Assign]] = {}
        for owner in chain:
            for node in ast.walk(owner):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    named.add(node.value)
                elif isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Attribute) and dotted(target.value) == "self":
                            stored.setdefault(target.attr, []).append(node)
        outside = {
            n.attr
            for n in self.ctx.nodes(ast.Attribute)
            if isinstance(n.ctx, ast.Store | ast.Del) and dotted(n.value) != "self"
        }
        return {
            attr
            for attr, stmts in stored.items()
            if attr not in named
            and attr not in outside
            and not any(
                isinstance(n, ast.Call) and (self.ctx.call_name(n) or "").endswith("Parameter")
                for stmt in stmts
                for n in ast.walk(stmt.value)
            )
        }

    def instance_attributes(self, cls: ast.ClassDef, *, modules: bool = False) -> dict[str, Val]:
        """``self.<attr>`` of a plain class (not an ``nn.Module``) as ``__init__`` leaves them, for its other methods.

        Only attributes that no other method rebinds; a module or tensor also only when no other method moves it,
        hands it to a call or hands ``self`` on (the order in which methods run is not known). Devices, modules
        and tensors only. ``modules``: read a module class too (see :meth:`module_attributes`).
        """
        seen = sum(len(v) for k, v in self.constructions.items() if self._builds(k.func, cls))
        if not modules and cls in self._instances and self._instances[cls][0] == seen:
            return self._instances[cls][1]
        if not modules:
            self._instances[cls] = (seen, {})
        init = self._inherited_init(cls)
        if init is None and not modules and self._plain_class(cls):
            init = _no_init()  # `object.__init__`: its methods still set attributes up (`setup_train`)
        if init is None or (not modules and not self._plain_class(cls)) or self.depth >= 2:
            return {}
        reader = self._reader()
        params = {a.arg: UNKNOWN for a in [*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs]}
        params.update({k: v for k, v in (self.seeds or {}).items() if k not in bound_names(init)})
        params.update(self._constructed_with(cls, init, reader))
        reader.env = self._read_init(reader, cls, init, params)
        rebound, handled = _instance_uses(
            cls,
            init,
            self.ctx,
            self.local_functions,
            self.reading_method,
            set(init_helpers(self.ctx, cls, init).values()),
        )
        moved_locals = {  # `self.model = model; model.to(device)`: a local moved after it was kept
            n.func.value.id
            for n in ast.walk(init)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and _changing(n)
            and isinstance(n.func.value, ast.Name)
        }
        kept_from = {  # `self.encoder = encoder`: the local each attribute keeps
            t.attr: n.value.id
            for n in ast.walk(init)
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name)
            for t in n.targets
            if isinstance(t, ast.Attribute) and dotted(t.value) == "self"
        }
        found: dict[str, Val] = {}
        for attr, val in self._set_up_by_one_method(cls, init, reader).items():
            found[f"self.{attr}"] = val
        for name, val in reader.env.items():
            head, _, attr = name.partition(".")
            if head != "self" or "." in attr or attr in rebound:
                continue
            if val.what == "module" and val.fresh and moved_locals and kept_from.get(attr) in (None, *moved_locals):
                continue  # kept from a local that is moved, or from something else while some local is moved
            # `self.images.append(torch.from_numpy(img))` in a dataset's `__init__`: a list of host tensors
            listed = val.what == "seq" and val.element is not None and val.element.what in TENSORISH
            # `self.models["encoder"] = ResnetEncoder(...)`: a dict of modules under literal keys
            listed = listed or (val.what == "dict" and bool(val.keys) and all(v.what == "module" for _, v in val.keys))
            # a tensor handed to a call stays where it is (`Tensor.to` makes a copy): only a module or an object of
            # unknown kind may be moved in place by the method that gets it
            if val.what in ("device", "dataset", "loader", *TENSORISH) or (
                (val.what in ("module", "any") or listed) and attr not in handled
            ):
                found[name] = val
        if not modules:
            self._instances[cls] = (seen, found)
        return found

    def _set_up_by_one_method(self, cls: ast.ClassDef, init: ast.FunctionDef, reader: _Flow) -> dict[str, Val]:
        """Attributes that one method other than ``__init__`` sets up, as that method leaves them.

        Every binding of the attribute in the class is in that method (none in ``__init__``), however many. A
        module it builds and keeps (TabNet's ``_set_network``: ``self.network = TabNet(...).to(self.device)``;
        LPIPS's ``initialize``) when no other method moves it or hands it on (a method of the class that only reads
        it, such as ``save_network``, does not count); a module of unknown kind it moves; a tensor or device
         (pix2pix-style ``set_input``: ``self.input_judge = data["judge"]``, then ``if self.use_gpu:
        self.input_judge = self.input_judge.to(device=self.gpu_ids[0])``): every other method reads what it leaves
        (before it runs the attribute does not exist). Methods are read in class order, each with the instance as
        ``__init__`` and the methods before it leave it (LPIPS's ``initialize`` sets ``self.use_gpu`` that
        ``set_input`` reads).
        """
        stores: dict[str, list[ast.AST]] = {}
        chain = list(self.ctx.kinds.class_chain(cls))  # the class and its bases of the file: one instance
        for owner in chain:
            for node in ast.walk(owner):
                if isinstance(node, ast.Attribute) and dotted(node.value) == "self" and isinstance(node.ctx, ast.Store):
                    stores.setdefault(node.attr, []).append(node)
        by_method: dict[ast.FunctionDef | ast.AsyncFunctionDef, list[str]] = {}
        for attr, nodes in stores.items():
            method = self.ctx.enclosing_function(nodes[0])
            if (
                method is None
                or method is init
                or any(self.ctx.enclosing_function(n) is not method for n in nodes)
                or not any(method in owner.body for owner in chain)
                or method.decorator_list
            ):
                continue
            by_method.setdefault(method, []).append(attr)
        order = [m for owner in reversed(chain) for m in owner.body if m in by_method]
        found: dict[str, Val] = {}
        for method in order:
            params = {a.arg: UNKNOWN for a in [*method.args.posonlyargs, *method.args.args, *method.args.kwonlyargs]}
            params.update((k, v) for k, v in reader.env.items() if k.startswith("self."))
            params.update((f"self.{k}", v) for k, v in found.items())
            setup = self._reader()
            setup._scope(method, method.body, params, frozenset())
            # what the other methods (`__init__` included) may move or hand on; its own moves are in its value
            _, elsewhere = _instance_uses(cls, method, self.ctx, self.local_functions, self.reading_method)
            for attr in by_method[method]:
                val = setup.env.get(f"self.{attr}")
                if val is None or val.where is None:
                    continue
                # a value of unknown kind moved to the device (`data["judge"].cuda()`): a tensor moved, or a module
                # moved in place; another method handing it on does not take it back to the host
                moved = val.what == "any" and val.where == DEVICE
                module = val.what == "module" and attr not in elsewhere
                if val.what in ("device", *TENSORISH) or moved or module:
                    found[attr] = val
        return found

    def _read_init(
        self, reader: _Flow, cls: ast.ClassDef, init: ast.FunctionDef, params: dict[str, Val]
    ) -> dict[str, Val]:
        """Read ``init`` (an ``__init__`` of ``cls`` or of a base class) with ``reader``; the values it leaves.

        Its helper methods (see :func:`init_helpers`) run where it calls them, and so does the base class's
        ``__init__`` where it calls ``super().__init__(...)`` (``Base.__init__(self, ...)``), with its parameters
        bound to what that call passes.
        """
        helpers = init_helpers(self.ctx, cls, init)
        segment: list[ast.stmt] = []
        for stmt in [*init.body, None]:
            helper = helpers.get(stmt) if stmt is not None else None
            base = self._super_init(cls, stmt) if stmt is not None and helper is None else None
            if stmt is not None and helper is None and base is None:
                segment.append(stmt)
                continue
            reader._scope(init, segment, params, frozenset())
            params, segment = dict(reader.env), []
            if helper is not None:  # `self.build_model()`: its body runs here, on the same instance
                shared = {k: v for k, v in params.items() if k not in bound_names(init) or k.startswith("self.")}
                reader._scope(helper, helper.body, shared, frozenset())
                params.update((k, v) for k, v in reader.env.items() if k.startswith("self."))
            if base is not None:  # `super().__init__(args)`: the base class's `__init__` runs here
                base_cls, base_init, call = base
                shared = {k: v for k, v in params.items() if k.startswith("self.")}
                shared.update((k, v) for k, v in (self.seeds or {}).items() if k not in bound_names(base_init))
                names = [a.arg for a in [*base_init.args.posonlyargs, *base_init.args.args]][1:]
                shared.update((a.arg, UNKNOWN) for a in base_init.args.kwonlyargs)
                shared.update((n, UNKNOWN) for n in names)
                shared.update(zip(names, (reader.ev(a) for a in call.args), strict=False))
                shared.update((k.arg, reader.ev(k.value)) for k in call.keywords if k.arg is not None)
                left = self._read_init(reader, base_cls, base_init, shared)
                params.update((k, v) for k, v in left.items() if k.startswith("self."))
        return params

    def _super_init(self, cls: ast.ClassDef, stmt: ast.stmt) -> tuple[ast.ClassDef, ast.FunctionDef, ast.Call] | None:
        """The base class's ``__init__`` that ``stmt`` (in ``cls``'s ``__init__``) runs, with its class and call.

        ``super().__init__(...)`` or ``Base.__init__(self, ...)`` as a statement; the call is given without ``self``.

        Only plain positional and keyword arguments (no ``*args``/``**kwargs``), and an ``__init__`` of the file.
        """
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute) or call.func.attr != "__init__":
            return None
        owner = call.func.value
        args = list(call.args)
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            pass
        elif isinstance(owner, ast.Name) and args and isinstance(args[0], ast.Name) and args[0].id == "self":
            args = args[1:]  # `Base.__init__(self, args)`
            if owner.id not in {dotted(b) for b in cls.bases}:
                return None
        else:
            return None
        if any(isinstance(a, ast.Starred) for a in args) or any(k.arg is None for k in call.keywords):
            return None
        for base in self.ctx.kinds.class_chain(cls)[1:]:
            init = next((s for s in base.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            if init is not None:
                if init.args.vararg is not None or init.args.kwarg is not None:
                    return None
                return base, init, ast.Call(func=call.func, args=args, keywords=call.keywords)
        return None

    def _built_subclass(self, cls: ast.ClassDef) -> ast.ClassDef | None:
        """The one subclass of the file that the file builds, where it never builds ``cls`` itself.

        BERT4Rec-VAE's ``AbstractTrainer(metaclass=ABCMeta)``: only ``VAETrainer`` is built, so the base's
        ``train_one_epoch`` runs on a ``VAETrainer``, whose ``__init__`` (through ``super().__init__``) sets its
        attributes. ``None`` when ``cls`` is built, or no or several subclasses are.
        """
        built = self.ctx.shared(_constructions)
        if built.get(cls.name):
            return None
        subs = [
            sub
            for sub in self.ctx.kinds.classes.values()
            if sub is not cls and built.get(sub.name) and cls in self.ctx.kinds.class_chain(sub)
        ]
        return subs[0] if len(subs) == 1 else None

    def _builds(self, func: ast.expr, cls: ast.ClassDef) -> bool:
        """Whether calling ``func`` builds ``cls``: its name, or a name bound only to it (``Exp = Exp_Informer``).

        Or a look-up in a dict of the file's classes that holds it (``TRAINERS[args.trainer_code](args, model,
        ...)``): where the call builds ``cls``, these are its arguments.
        """
        return cls.name in _built_names(self.ctx, func)

    def _inherited_init(self, cls: ast.ClassDef) -> ast.FunctionDef | None:
        """The ``__init__`` an instance of ``cls`` runs: its own, or the nearest base class's of the file.

        LTSF-Linear's ``Exp_Main(Exp_Basic)`` has none of its own; ``Exp_Basic.__init__`` sets ``self.device`` and
        ``self.model`` for the subclass's ``train`` and ``test``. Single inheritance only.
        """
        for current in self.ctx.kinds.class_chain(cls):
            own = next((s for s in current.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            if own is not None:
                return own
            if any(
                (self.ctx.qualname(d.func if isinstance(d, ast.Call) else d) or "").endswith("dataclass")
                for d in current.decorator_list
            ):  # a dataclass's generated `__init__` sets its fields, then runs `__post_init__` (TabNet's TabModel)
                post = next(
                    (s for s in current.body if isinstance(s, ast.FunctionDef) and s.name == "__post_init__"), None
                )
                if post is not None:
                    return post
        return None

    def _plain_class(self, cls: ast.ClassDef, depth: int = 0) -> bool:
        """Whether ``cls`` is known not to be an ``nn.Module``: no base but ``object`` or plain classes of the file.

        A base from elsewhere (``PreTrainedModel``, a mixin) may be a module, whose attributes ``.to()`` moves;
        torch's datasets (``torch.utils.data.Dataset``) are not.
        """
        if depth > 5 or any(k.arg != "metaclass" or self.ctx.qualname(k.value) != "abc.ABCMeta" for k in cls.keywords):
            return False
        for base in cls.bases:
            name = dotted(base)
            full = self.ctx.qualname(base) or ""
            dataset = full.startswith("torch.utils.data.") and full.endswith("Dataset")
            if name == "object" or full == "abc.ABC" or dataset:
                continue
            inner = self.ctx.kinds.classes.get(name or "")
            if inner is None or not self._plain_class(inner, depth + 1):
                return False
        return True

    def _constructed_with(self, cls: ast.ClassDef, init: ast.FunctionDef, reader: _Flow) -> dict[str, Val]:
        """``__init__`` 's parameters as the file's one construction of the class passes them: ``Trainer(Net())``.

        As the scope that builds it had them (``trainer = Trainer(model, dataset)`` in ``main``: ``main``'s
        ``model``), where that scope was read first (and the values agree over its readings), else read with the
        module's globals. Built more than once: what every construction agrees on; nothing with ``*args``.
        """
        sites = self.ctx.shared(_constructions).get(cls.name, [])
        if not sites or len(sites) > _MAX_CONTEXTS:
            return {}
        names = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]  # after `self`
        readings: list[tuple[list[Val], dict[str | None, Val]]] = []
        for site in sites:  # several constructions: the values they agree on (Rainbow's two replay memories)
            if any(isinstance(a, ast.Starred) for a in site.args):
                return {}
            # `TS2Vec(input_dims=..., device=device, **config)`: what is named explicitly is still known (a `**`
            # that names it too fails), the rest is not
            read = self.constructions.get(site)
            if not read:
                reader.env = dict(self.seeds or {})
                read = [([reader.ev(arg) for arg in site.args], {k.arg: reader.ev(k.value) for k in site.keywords})]
            if any(k.arg is None for k in site.keywords):
                read = [(args, {**kwargs, None: UNKNOWN}) for args, kwargs in read]
            readings.extend(read)
        agreed: dict[str, Val] = {}
        named = {*names, *(a.arg for a in init.args.kwonlyargs)}
        for i, (args, kwargs) in enumerate(readings):
            given = dict(zip(names, args, strict=False))
            given.update({k: v for k, v in kwargs.items() if k is not None and k in named})
            extra = {k: v for k, v in kwargs.items() if k is not None and k not in named}
            # a module built by the caller keeps where it was built (FRY007 is reported there)
            given = {k: _handed(v) for k, v in given.items()}
            if init.args.kwarg is not None and None not in kwargs:  # `SimCLR(model=model, args=args)` into `**kwargs`
                given[init.args.kwarg.arg] = keyed(extra, [_handed(v) for v in extra.values()])
            agreed = given if i == 0 else {k: v for k, v in agreed.items() if given.get(k) == v}
        kept = ("module", "device", "dataset", "loader", *TENSORISH)
        return {k: v for k, v in agreed.items() if v.what in kept or (v.what == "dict" and v.keys)}

    def record_construction(self, node: ast.Call, args: list[Val], kwargs: dict[str | None, Val]) -> None:
        """Note what a construction of a plain class of the file passes (see :meth:`_constructed_with`)."""
        if self.returns is not None or (self.silent and self.silent != self.first_pass):
            return
        self.constructions.setdefault(node, []).append((list(args), dict(kwargs)))

    def _parameter(self, arg: ast.arg) -> Val:
        if arg.annotation is not None:
            full = self.ctx.qualname(arg.annotation)
            if full in TENSOR_CLASSES or full == "Tensor":
                return Val("tensor")
        return UNKNOWN

    def _settled_globals(self) -> set[str]:
        """Globals that functions rebind only before the module's code binds them itself, as the module reads them.

        VDSR's training script (`main` declares `global opt, model`) is called at the top of the module's code, and
        the evaluation script after it binds `model = torch.load(...)["model"]` and `opt` again: from there on, no
        function that rebinds them runs, so the module's own values hold. Only where each such function is called
        by name from the module's code alone (never from a function, never passed on), before the first binding.
        """
        settled: set[str] = set()
        body = self.ctx.tree.body
        for name in self.global_names():
            bound = [
                i
                for i, stmt in enumerate(body)
                if any(
                    isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(stmt)
                )
                and not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            ]
            if not bound:
                continue
            writers = {
                func.name
                for node in self.ctx.nodes(ast.Global)
                if name in node.names
                and isinstance(func := self.ctx.enclosing_function(node), ast.FunctionDef | ast.AsyncFunctionDef)
            }
            if not writers or any(self.ctx.enclosing_function(n) is None for n in self.ctx.nodes(ast.Global)):
                continue
            ok = True
            for use in self.ctx.nodes(ast.Name):
                if use.id not in writers or not isinstance(use.ctx, ast.Load):
                    continue
                parent = self.ctx.parent(use)
                top = next((i for i, stmt in enumerate(body) if use in set(ast.walk(stmt))), None)
                called = isinstance(parent, ast.Call) and parent.func is use
                if not called or self.ctx.enclosing_function(use) is not None or top is None or top >= bound[0]:
                    ok = False
                    break
            if ok:
                settled.add(name)
        return settled

    def global_names(self) -> set[str]:
        """Names some function declares ``global`` and rebinds: assignments anywhere may change them.

        ``global mel_basis`` in a function that only stores into it (``mel_basis[key] = ...``) rebinds nothing.
        """
        if self._globals is None:
            found: set[str] = set()
            for node in self.ctx.nodes(ast.Global):
                scope = self.ctx.enclosing_function(node)
                stored = {
                    n.id
                    for n in ast.walk(scope if scope is not None else self.ctx.tree)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del)
                }
                found.update(name for name in node.names if name in stored or scope is None)
            self._globals = found
        return self._globals

    # -- statements -------------------------------------------------------------------------------------------

    def _block(self, body: list[ast.stmt]) -> bool:
        """Run the statements; ``True`` when the block always leaves (return, raise, break, continue)."""
        return any(self._stmt(stmt) for stmt in body)

    def _stmt(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Tuple):
            for item in stmt.value.elts:  # `data.to(device), target.to(device)`: each a statement of its own
                self.ev(item, top=True)
        elif isinstance(stmt, ast.Expr):
            val = self.ev(stmt.value, top=True)
            if isinstance(stmt.value, ast.Yield) and self.yielding and self.returns is not None and not self.silent:
                self.returns.append(self.ev(stmt.value.value) if stmt.value.value is not None else NONE)
        elif isinstance(stmt, ast.Assign):
            val = self._assigned_batch_evidence(stmt, self.ev(stmt.value))
            for target in stmt.targets:
                self.bind(target, val, stmt, stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.bind(stmt.target, self.ev(stmt.value), stmt, stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            self._augmented(stmt)
        elif isinstance(stmt, ast.Return | ast.Raise):
            val = OTHER
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    val = self.ev(child)
            if isinstance(stmt, ast.Return) and self.returns is not None and not self.silent and not self.yielding:
                (self.host_returns if self.host_branch else self.returns).append(val)
            return True
        elif isinstance(stmt, ast.Break | ast.Continue):
            return True
        elif isinstance(stmt, ast.If):
            return self._if(stmt)
        elif isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
            self._loop(stmt)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            return self._with(stmt)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            return self._try(stmt)  # type: ignore[arg-type]
        elif isinstance(stmt, ast.Match):
            self._match(stmt)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.env.pop(stmt.name, None)  # a class or function of the file: calls of it are known by its name
            self.drop_below(stmt.name)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:  # an import is a path to functions, not a value
                imported = (alias.asname or alias.name).split(".")[0]
                self.env.pop(imported, None)
                self.drop_below(imported)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                deleted = dotted(target)
                if deleted is not None:
                    self._forget(deleted)
        elif isinstance(stmt, ast.Assert):
            self.ev(stmt.test)
        return False

    def _forget(self, name: str) -> None:
        self.env[name] = UNKNOWN
        self.drop_below(name)

    def drop_below(self, name: str) -> None:
        """Forget ``name.x``, ``name.x.y``, ... (``name`` was rebound)."""
        if name not in self._owners:  # no dotted name under it was ever bound in this scope
            return
        prefix = name + "."
        for key in [k for k in self.env if k.startswith(prefix)]:
            del self.env[key]

    def own(self, name: str) -> None:
        """Note the heads of a dotted name now bound (``a`` and ``a.b`` for ``a.b.c``), for :meth:`drop_below`."""
        head, dot, rest = name.partition(".")
        while dot:
            self._owners.add(head)
            part, dot, rest = rest.partition(".")
            head = f"{head}.{part}"

    def _available_test(self, test: ast.AST) -> bool:
        """Whether ``test`` chooses the device: asks for availability, or is a device flag (``if args.accel:``)."""
        if test not in self._available:
            self._available[test] = self.ctx.mentions_availability(test) or _device_flag(test)
        return self._available[test]

    def _undecided_dispatch(self, test: ast.expr) -> bool:
        """``if target == 'y-channel':`` on a parameter that this reading does not know, where calls pass literals.

        SRGAN's ``convert_image(img, source, target)``: ``convert_image(sr_imgs, ..., target='y-channel')`` reads
        that branch with its own values; a call passing ``target=self.hr_img_type`` (never that string) must not
        report what the branch would do with its image. Nothing in such a branch is reported for this reading.
        """
        scope = self.scope
        if self._shape_dispatch(test):
            return True
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) or not isinstance(test, ast.Compare):
            return False
        if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq | ast.In) or not isinstance(test.left, ast.Name):
            return False
        literal = test.comparators[0]
        texts = literal.elts if isinstance(literal, ast.Tuple | ast.List | ast.Set) else [literal]
        if not texts or not all(isinstance(t, ast.Constant) and isinstance(t.value, str) for t in texts):
            return False
        name = test.left.id
        params = [a.arg for a in [*scope.args.posonlyargs, *scope.args.args]]
        if name not in params or self.env.get(name + _LITERAL, UNKNOWN).what != "other":
            return False  # this reading's calls pass a literal, or it is not known what they pass
        position = params.index(name)
        for call in self.ctx.nodes(ast.Call):
            called = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
            if called != scope.name:
                continue
            offset = 1 if isinstance(call.func, ast.Attribute) and params[:1] == ["self"] else 0
            passed = [k.value for k in call.keywords if k.arg == name]
            if 0 <= position - offset < len(call.args):
                passed.append(call.args[position - offset])
            if any(isinstance(p, ast.Constant) and isinstance(p.value, str) for p in passed):
                return True
        return False

    def _shape_dispatch(self, test: ast.expr) -> bool:
        """``if img.ndimension() == 4:`` on a tensor whose number of dimensions is not known here.

        SRGAN's ``convert_image`` normalises 3-D host images with host constants and 4-D device batches with device
        ones: which branch a value takes is its author's device logic, and the analysis cannot tell.
        """
        if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq | ast.NotEq):
            return False
        if not (isinstance(test.comparators[0], ast.Constant) and type(test.comparators[0].value) is int):
            return False
        left = test.left
        owner: ast.expr | None = None
        if isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and not left.args:
            owner = left.func.value if left.func.attr in ("dim", "ndimension") else None
        elif isinstance(left, ast.Attribute) and left.attr == "ndim":
            owner = left.value
        elif isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len" and left.args:
            inner = left.args[0]
            owner = inner.value if isinstance(inner, ast.Attribute) and inner.attr == "shape" else None
        if owner is None:
            return False
        held = self._peek(owner)
        return held.what in TENSORISH and held.dims == 0 and self._places_by_shape(test, owner)

    def _places_by_shape(self, test: ast.expr, owner: ast.expr) -> bool:
        """Whether one branch of the chain of ``test`` reads only host tensors, and another only device ones.

        Its author's device logic, by shape: SRGAN's ``img - imagenet_mean`` for 3-D host images and ``img -
        imagenet_mean_cuda`` for 4-D device batches.
        """
        node: ast.AST | None = self.ctx.parent(test)
        while node is not None:  # up to the head of the chain
            above = self.ctx.parent(node)
            if not (isinstance(above, ast.If) and node in above.orelse):
                break
            node = above
        pure: set[str] = set()
        name = dotted(owner)
        while isinstance(node, ast.If):
            places = {
                val.where
                for stmt in node.body
                for read in ast.walk(stmt)
                if isinstance(read, ast.Name) and isinstance(read.ctx, ast.Load) and read.id != name
                for val in [self.env.get(read.id)]
                if val is not None and val.what in TENSORISH and val.where is not None
            }
            if len(places) == 1:
                pure |= places
            node = node.orelse[0] if len(node.orelse) == 1 else None
        return pure == {HOST, DEVICE}

    def _literal_test(self, test: ast.expr) -> bool | None:
        """``target == "y-channel"`` where this reading's calls all pass one literal for ``target``: its outcome."""
        if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.left, ast.Name):
            return None
        held = self.env.get(test.left.id + _LITERAL)
        if held is None or held.what != "str" or held.dev is None:
            return None
        literal = test.comparators[0]
        texts = literal.elts if isinstance(literal, ast.Tuple | ast.List | ast.Set) else [literal]
        if not all(isinstance(t, ast.Constant) and isinstance(t.value, str) for t in texts):
            return None
        values = {repr(t.value) for t in texts if isinstance(t, ast.Constant)}
        op = test.ops[0]
        if isinstance(op, ast.Eq | ast.In):
            return held.dev in values
        if isinstance(op, ast.NotEq | ast.NotIn):
            return held.dev not in values
        return None

    def _constant_flag(self, test: ast.expr) -> bool | None:
        """``sparse`` (or ``not sparse``), a global that the file binds once, at module level, to ``True``/``False``.

        DGI's ``sparse = True`` then ``sp_adj if sparse else adj``: only that branch ever runs. Not where the
        function being read binds the name itself (a parameter ``sparse=False`` is another variable), nor where a
        function declares it ``global``.
        """
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        name = test.operand if isinstance(test, ast.UnaryOp) and negated else test
        if not isinstance(name, ast.Name):
            return None
        scope = self.scope
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            params = scope.args
            every = [*params.posonlyargs, *params.args, *params.kwonlyargs, params.vararg, params.kwarg]
            if any(a is not None and a.arg == name.id for a in every):
                return None
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) and name.id in bound_names(scope):
                return None
        stores = [n for n in self.ctx.nodes(ast.Name) if n.id == name.id and isinstance(n.ctx, ast.Store | ast.Del)]
        if len(stores) != 1 or name.id in self.global_names():
            return None
        assign = self.ctx.parent(stores[0])
        if not (
            isinstance(assign, ast.Assign)
            and self.ctx.parent(assign) is self.ctx.tree
            and assign.targets == [stores[0]]
        ):
            return None
        value = assign.value
        if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
            return None
        return (not value.value) if negated else value.value

    def _if(self, stmt: ast.If) -> bool:
        decided = self._isinstance_outcome(stmt.test)
        if decided is None:
            decided = self._literal_test(stmt.test)
        if decided is None:
            decided = self._constant_flag(stmt.test)
        if decided is not None:  # `if isinstance(obj, torch.Tensor):` with `obj` a tuple here: only one branch runs
            self.ev(stmt.test)
            return self._block(stmt.body if decided else stmt.orelse)
        self.ev(stmt.test)
        before = self.env
        self.env = dict(before)
        side = self._accelerator_branch(stmt.test)
        # the branch that runs only without an accelerator (`else:` of `if torch.cuda.is_available():`) cannot meet
        # a device value there: nothing in it is reported
        undecided = self._undecided_dispatch(stmt.test)
        self.cpu_only += (side is False) + undecided
        self.host_branch += side is False
        body_leaves = self._block(stmt.body)
        self.host_branch -= side is False
        self.cpu_only -= (side is False) + undecided
        after_body = self.env
        self.env = dict(before)
        self.cpu_only += side is True
        self.host_branch += side is True
        else_leaves = self._block(stmt.orelse)
        self.host_branch -= side is True
        self.cpu_only -= side is True
        after_else = self.env
        if body_leaves and else_leaves:
            return True
        taken = self._known_outcome(stmt.test, before)
        if body_leaves:
            self.env = after_else
        elif else_leaves:
            self.env = after_body
        elif taken is not None:  # `if target is not None:` with `target` a tensor here: only that branch runs
            self.env = after_body if taken else after_else
        elif counts_devices(stmt.test) and not stmt.orelse:
            # `if h.num_gpus > 1: generator = DistributedDataParallel(generator, ...)`: on one GPU the values are as
            # they were before the branch, and a value left on the host there fails on that GPU
            self.env = after_else
        else:
            merged = merge(after_body, after_else, lambda: self._available_test(stmt.test))
            for key, val in merged.items():
                # a test that names no device (`args.model == "mlp"`): the branches choose what to build
                choice = (
                    before
                    if side is None
                    and not self._available_test(stmt.test)
                    and not any(word in ast.unparse(stmt.test).lower() for word in _DEVICE_TEST_WORDS)
                    else None
                )
                joined = val.what == "unknown" or (val.what in ("module", "any") and val.where is None)
                built = _built_on_one_side(after_body, after_else, key, choice) if joined else None
                if built is not None:
                    # `if ckpt is None: model = Net()` / `else: model = torch.load(ckpt)["model"]`: on the path
                    # that builds it, the model is on the host until something moves it
                    merged[key] = built
            if side is not None:  # on a GPU, the branch that runs there decides where values are
                gpu = after_body if side else after_else
                other = after_else if side else after_body
                for key in list(merged):
                    picked = gpu.get(key)
                    if picked is not None and _host_or_device(after_body, after_else, key):
                        merged[key] = picked
                    elif picked is None and key not in before and other.get(key, UNKNOWN).where == HOST:
                        # `if not torch.cuda.is_available(): args.device = "cpu"` (open_clip's fallback): on a GPU
                        # the name is as it was before the branch, which did not bind it here
                        del merged[key]
            self.env = merged
        return False

    def _isinstance_outcome(self, test: ast.expr) -> bool | None:
        """The outcome of ``isinstance(name, classes)`` (or its ``not``) for what ``name`` holds; ``None``: not known.

        A recursive move helper (``if isinstance(obj, torch.Tensor): return obj.to(device)``, ``if isinstance(obj,
        dict): ...``) read with a tuple of tensors runs only the branches a tuple takes.
        """
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        call = test.operand if isinstance(test, ast.UnaryOp) and negated else test
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "isinstance"
            and len(call.args) == 2
            and not call.keywords
        ):
            return None
        name = dotted(call.args[0])
        val = self.env.get(name) if name is not None else None
        if val is None:
            return None
        spec = call.args[1]
        classes = {
            self.ctx.qualname(c) or dotted(c) or "" for c in (spec.elts if isinstance(spec, ast.Tuple) else [spec])
        }
        kinds = set()
        for full in classes:
            if full in TENSOR_CLASSES or full in ("torch.Tensor", "Tensor"):
                kinds.add("tensor")
            elif full in _BUILTIN_KINDS:
                kinds.add(_BUILTIN_KINDS[full])
            else:
                return None  # a class the value might be an instance of
        held = {"tensor": "tensor", "output": "tensor", "tuple": "tuple", "dict": "dict", "str": "str"}.get(val.what)
        if held is None or (held == "tuple" and kinds & {"list", "tuple", "sequence"}):
            return None  # a collated batch of tuples is a list: which of the two a "tuple" here is, is not known
        outcome = held in kinds or (held == "tuple" and "sequence" in kinds) or (held == "dict" and "mapping" in kinds)
        return outcome != negated

    @staticmethod
    def _known_outcome(test: ast.expr, env: dict[str, Val]) -> bool | None:
        """The outcome of ``<name> is None`` / ``<name> is not None``; ``None``: not known.

        Known where the name holds a tensor, batch or module here (never ``None``).
        """
        if not (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Is | ast.IsNot)
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            return None
        name = dotted(test.left)
        val = env.get(name) if name is not None else None
        if val is None or val.what not in (*TENSORISH, "batch", "module", "tuple", "loader", "dataset"):
            return None
        return isinstance(test.ops[0], ast.IsNot)

    def _accelerator_branch(self, test: ast.expr, depth: int = 0) -> bool | None:
        """Whether ``test`` is true exactly on an accelerator (``True``) or exactly on the CPU (``False``).

        ``None``: neither is known.

        ``torch.cuda.is_available()``, ``device_type == "cuda"``, ``"cuda" in device``, ``device.type != "cpu"``,
        ``not ...`` of those, ``... and torch.cuda.is_available()``, and names bound once to one of them.
        """
        if depth > 6:
            return None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._accelerator_branch(test.operand, depth + 1)
            return None if inner is None else not inner
        if isinstance(test, ast.Call):
            return True if self.ctx.call_name(test) in AVAILABILITY_CHECKS else None
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            if any(counts_devices(v) for v in test.values):
                return None  # `device.type == "cuda" and torch.cuda.device_count() > 1`: the `else` runs on one GPU
            sides = [self._accelerator_branch(v, depth + 1) for v in test.values]
            if False in sides and depth == 0:
                # `if device_type == "cuda" and not torch.cuda.is_available():` (open_clip's fallback to the CPU):
                # true only without an accelerator, so on one the branch never runs (not under a `not`)
                return False
            return True if True in sides and False not in sides else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return _compare_side(test)
        if (
            isinstance(test, ast.IfExp)
            and isinstance(test.body, ast.Constant)
            and isinstance(test.orelse, ast.Constant)
            and {test.body.value, test.orelse.value} == {True, False}
        ):
            # `args.cuda = True if args.cuda == 'yes' else False` (GEM's `--cuda yes/no`): the test itself
            inner = self._accelerator_branch(test.test, depth + 1)
            return None if inner is None else (inner if test.body.value is True else not inner)
        if isinstance(test, ast.Name | ast.Attribute):
            name = dotted(test)
            values = self.ctx.kinds.assigned_values(name) if name else []
            if len(values) == 1 and isinstance(values[0], ast.expr):
                return self._accelerator_branch(values[0], depth + 1)
            if 1 < len(values) <= 4 and all(isinstance(v, ast.expr) for v in values):
                # `cuda = opt.cuda` in `main` and again in the module's code (VDSR's train and eval scripts in one
                # file): every binding decides the same way
                decided = {self._accelerator_branch(v, depth + 1) for v in values if isinstance(v, ast.expr)}
                if len(decided) == 1 and None not in decided:
                    return decided.pop()
            if not values:  # a flag of the command line (`--cuda`, `--no_cuda`), never assigned in the file
                last = (test.id if isinstance(test, ast.Name) else test.attr).lower()
                if last in GPU_FLAGS or _store_true_gpu_option(self.ctx, last):
                    return True
                if last in _CPU_FLAGS:
                    return False
            return self._flag_of(test, depth)
        return None

    def _flag_of(self, test: ast.Name | ast.Attribute, depth: int) -> bool | None:
        """A flag that the file sets from a device decision, read through parameters and attributes.

        ``data.HP_gpu = torch.cuda.is_available()`` (and ``self.HP_gpu = False`` as its default), then
        ``self.gpu = data.HP_gpu`` and ``batchify(rows, data.HP_gpu)`` with ``if gpu:`` inside: every value the file
        gives the flag, other than ``True``/``False`` written as defaults, decides the same way. An attribute takes
        what the file assigns to that attribute of any object; a parameter of one of the file's functions (or of a
        class's ``__init__``) takes what every call passes, or its default. ``None`` where any value is unknown.
        """
        if test in self._flags:
            return self._flags[test]
        self._flags[test] = None  # a flag passed back to itself (`CRF(..., self.gpu)` in a class with `self.gpu = gpu`)
        self._flags[test] = found = self._read_flag(test, depth)
        return found

    def _read_flag(self, test: ast.Name | ast.Attribute, depth: int) -> bool | None:
        values: list[ast.expr] = []
        if isinstance(test, ast.Attribute):
            values = [v for v in self._attribute_values(test.attr) if isinstance(v, ast.expr)]
        else:
            func = self.ctx.enclosing_function(test)
            if func is None or test.id not in {a.arg for a in func.args.args + func.args.kwonlyargs}:
                return None
            stores = (n for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
            if any(n.id == test.id for n in stores):
                return None  # rebound in the function: the test may read another value
            passed = self._passed_to(func, test.id)
            if passed is None:
                return None
            values = passed
        sides = {
            self._accelerator_branch(v, depth + 1)
            for v in values
            if not (isinstance(v, ast.Constant) and isinstance(v.value, bool))
        }
        if (
            not sides
            and isinstance(test, ast.Attribute)
            and test.attr.lower() in GPU_FLAGS
            and any(isinstance(v, ast.Constant) and v.value is True for v in values)
        ):
            # DrQA's `DocReader`: `self.use_cuda = False` in `__init__`, `self.use_cuda = True` in its `cuda()`
            # method, which the script calls on GPU runs: a flag named for the GPU, switched on for them
            return True
        return sides.pop() if len(sides) == 1 else None

    def _attribute_values(self, attr: str) -> list[ast.AST]:
        """Every expression the file assigns to ``<anything>.attr``."""
        if self._attribute_index is None:
            index: dict[str, list[ast.AST]] = {}
            for name, found in self.ctx.kinds.values.items():
                if "." in name:
                    index.setdefault(name.rsplit(".", 1)[1], []).extend(found)
            self._attribute_index = index
        return self._attribute_index.get(attr, [])

    def _passed_to(self, func: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> list[ast.expr] | None:
        """What every call of the file's ``func`` passes as ``param`` (its default where a call leaves it out).

        Functions at the top of the file called by name, and ``__init__`` of the file's classes called by the class
        name; ``None`` for anything else, for calls with ``*args``/``**kwargs``, or when no call is seen.
        """
        names = [a.arg for a in func.args.posonlyargs + func.args.args]
        cls = self.ctx.enclosing_class(func)
        if cls is not None and func.name == "__init__" and func in cls.body:
            callee, names = cls.name, names[1:]
        elif func in self.ctx.tree.body:
            callee = func.name
        else:
            return None
        defaults = dict(zip(names[len(names) - len(func.args.defaults) :], func.args.defaults, strict=True))
        for arg, default in zip(func.args.kwonlyargs, func.args.kw_defaults, strict=True):
            if default is not None:
                defaults[arg.arg] = default
        calls = [n for n in self.ctx.nodes(ast.Call) if isinstance(n.func, ast.Name) and n.func.id == callee]
        if not calls:
            return None
        found: list[ast.expr] = []
        for call in calls:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return None
            given = [k.value for k in call.keywords if k.arg == param]
            if param in names and names.index(param) < len(call.args):
                given.append(call.args[names.index(param)])
            if not given and param in defaults:
                given.append(defaults[param])
            if len(given) != 1:
                return None
            found.append(given[0])
        return found

    def _loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        element = None
        if isinstance(stmt, ast.For | ast.AsyncFor):
            element = self._element(stmt.iter, self.ev(stmt.iter))
            element = self._batch_evidence(stmt, element)
        before = dict(self.env)
        if self.loop_depth >= 3:  # deep nests: forget what the body rebinds instead of reading it twice
            entry = dict(before)
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Store):
                    name = dotted(node)
                    if name is not None and name in entry:
                        entry[name] = UNKNOWN
        else:
            self.silent += 1
            self.first_pass += 1
            self._loop_body(stmt, element)
            self.first_pass -= 1
            self.silent -= 1
            after_first = self.env
            entry = merge(before, after_first)
        self.env = dict(entry)
        self._loop_body(stmt, element)
        if self.loop_depth < 3:
            self._second_pass(stmt, element, before, after_first, entry)
        self.env = merge(entry, self.env)
        if isinstance(stmt, ast.For | ast.AsyncFor):
            self._items_moved_in_place(stmt)
        self._block(stmt.orelse)

    def _items_moved_in_place(self, stmt: ast.For | ast.AsyncFor) -> None:
        """``for m in models.values(): m.to(device)``: every module of the container is moved in place.

        Also ``for m in models:`` over a list, ``for i, m in enumerate(models):`` and ``for name, m in
        models.items():``. The container's items become
        modules where the move puts them.
        """
        iterable, target = stmt.iter, stmt.target
        container = iterable
        if (
            isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Name)
            and iterable.func.id == "enumerate"
            and len(iterable.args) == 1
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 2
        ):  # `for i, m in enumerate(models):`
            container, target = iterable.args[0], target.elts[1]
        elif isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and not iterable.args:
            if iterable.func.attr == "values" and isinstance(target, ast.Name):
                container = iterable.func.value
            elif iterable.func.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                container, target = iterable.func.value, target.elts[1]
            else:
                return
        name = dotted(container)
        held = self.env.get(name) if name is not None else None
        if name is None or held is None or held.what not in ("seq", "dict") or not isinstance(target, ast.Name):
            return
        element = held.element
        if element is None or element.what != "module":
            return
        move = next(
            (
                s.value
                for s in stmt.body
                if isinstance(s, ast.Expr)
                and isinstance(s.value, ast.Call)
                and isinstance(s.value.func, ast.Attribute)
                and s.value.func.attr in MOVES
                and s.value.func.attr != "type"
                and isinstance(s.value.func.value, ast.Name)
                and s.value.func.value.id == target.id
            ),
            None,
        )
        if move is None:
            return
        moved = self._moved_module(move, element)
        self.env[name] = replace(held, element=moved, keys=tuple((k, moved) for k, _ in held.keys))

    def _second_pass(
        self,
        stmt: ast.For | ast.AsyncFor | ast.While,
        element: Val | None,
        before: dict[str, Val],
        after_first: dict[str, Val],
        entry: dict[str, Val],
    ) -> None:
        """Read the body again as its second pass sees it, where a tensor it uses crosses from one side to the other.

        ``decoder_input = decoder_input.to(device)`` before the loop and ``decoder_input = torch.LongTensor(...)`` at
        the end of its body: the first pass gets the device tensor, every later one the host tensor (merged, the
        two are unknown). Only the names that cross; what the body reports then is reported too.
        """
        carried = {
            name: val
            for name, val in after_first.items()
            if name in before
            and (
                (
                    val.what in TENSORISH
                    and before[name].what in TENSORISH
                    and {before[name].where, val.where} == {HOST, DEVICE}
                )
                or (  # `torch.save(model.cpu().state_dict(), path)` in the loop: the next pass gets a host model
                    val.what == before[name].what == "module"
                    and before[name].where == DEVICE
                    and val.where == HOST
                    and val.moved_at is not None
                    and not val.fresh
                )
            )
        }
        if not carried or any(isinstance(n, ast.Break | ast.Return | ast.Raise) for n in ast.walk(stmt)):
            return
        after = self.env
        self.env = {**entry, **carried}
        self.later_pass += 1
        self._loops.append(stmt)
        self._loop_body(stmt, element)
        self._loops.pop()
        self.later_pass -= 1
        self.env = after

    def _loop_body(self, stmt: ast.For | ast.AsyncFor | ast.While, element: Val | None) -> None:
        self.loop_depth += 1
        if isinstance(stmt, ast.While):
            self.ev(stmt.test)
        else:
            self.bind(stmt.target, element or UNKNOWN, None, None)
        self._block(stmt.body)
        self.loop_depth -= 1

    def _with(self, stmt: ast.With | ast.AsyncWith) -> bool:
        strange = False
        for item in stmt.items:
            self.ev(item.context_expr)
            expr = item.context_expr
            full = self.ctx.qualname(expr.func if isinstance(expr, ast.Call) else expr)
            if full not in HARMLESS_CONTEXTS:
                strange = True
            if item.optional_vars is not None:
                self.bind(item.optional_vars, self._entered(expr, full), None, None)
        self.strange_context += strange
        leaves = self._block(stmt.body)
        self.strange_context -= strange
        return leaves

    def _entered(self, expr: ast.expr, full: str | None) -> Val:
        """What ``with <expr> as t:`` binds to ``t``: unknown, but for a progress bar over an iterable.

        ``with tqdm(enumerate(train_loader)) as t: for _, (x, y) in t:`` (DeepCTR's ``fit``): ``tqdm.__enter__``
        returns the bar, whose items are the iterable's.
        """
        if full in _PROGRESS_BARS and isinstance(expr, ast.Call) and expr.args:
            element = self._element(expr, self._peek(expr))
            if element.what != "unknown":
                return Val("seq", element=element)
        return UNKNOWN

    def _try(self, stmt: ast.Try) -> bool:
        before = dict(self.env)
        leaves = self._block(stmt.body) or self._block(stmt.orelse)
        after_body = self.env
        alive = [] if leaves else [after_body]
        for handler in stmt.handlers:
            self.env = merge(before, after_body)
            if handler.name:
                self._forget(handler.name)
            if not self._block(handler.body):
                alive.append(self.env)
        if alive:
            self.env = alive[0]
            for other in alive[1:]:
                self.env = merge(self.env, other)
        else:
            self.env = after_body
        return self._block(stmt.finalbody) or not alive

    def _match(self, stmt: ast.Match) -> None:
        self.ev(stmt.subject)
        before = self.env
        merged = dict(before)
        for case in stmt.cases:
            self.env = dict(before)
            for node in ast.walk(case.pattern):
                for name in (getattr(node, "name", None), getattr(node, "rest", None)):
                    if isinstance(name, str):
                        self._forget(name)
            self._block(case.body)
            merged = merge(merged, self.env)
        self.env = merged

    def _augmented(self, stmt: ast.AugAssign) -> None:
        left = self.ev(stmt.target)
        right = self.ev(stmt.value)
        if (
            isinstance(stmt.op, ast.Add)
            and left.what == "tuple"
            and right.what == "tuple"
            and left.items
            and right.items
        ):
            if isinstance(stmt.target, ast.Name):  # `loss_inputs += (target,)`: the items of both, in order
                self.bind(stmt.target, Val("tuple", items=left.items + right.items), stmt, None)
            return
        if self._mixes(stmt, left, right, stmt.target, stmt.value):
            return  # the statement fails: the target keeps its value (and stays reported in the next iteration)
        if self._written_scalar(stmt, left, right):
            return
        val = self._arith(stmt, left, right, stmt.target, stmt.value)
        if isinstance(stmt.target, ast.Name):
            self.bind(stmt.target, val, stmt, None)
        elif isinstance(stmt.target, ast.Attribute):
            self.bind(stmt.target, UNKNOWN, None, None)

    def bind(self, target: ast.AST, val: Val, stmt: ast.stmt | None, value: ast.expr | None) -> None:
        """Bind ``target`` to ``val`` (``stmt``: the binding statement, ``value``: the expression assigned)."""
        if isinstance(target, ast.Tuple | ast.List):
            for i, item in enumerate(target.elts):
                if isinstance(item, ast.Starred) or any(isinstance(e, ast.Starred) for e in target.elts):
                    part = UNKNOWN if val.what == "tuple" else self._element(None, val)
                    self.bind(item.value if isinstance(item, ast.Starred) else item, part, stmt, None)
                elif val.what == "tuple" or (val.what == "seq" and len(val.items) == len(target.elts)):
                    self.bind(item, val.items[i] if i < len(val.items) else UNKNOWN, stmt, None)
                else:
                    self.bind(item, self._element(None, val), stmt, None)
            return
        if isinstance(target, ast.Subscript):
            owner = dotted(target.value)
            held = self.env.get(owner) if owner is not None else None
            cached = (
                held is not None
                and held.what == "dict"
                and not held.keys
                and held.element is not None
                and (held.element.what == "none" or (held.element.what in TENSORISH and held.element.cache))
                and val.what in TENSORISH
                and not (isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str))
            )
            if owner is not None and held is not None and cached and held.element is not None:
                # `mel_basis[str(fmax) + "_" + str(y.device)] = torch.from_numpy(mel)` into a dict that only such
                # stores fill (a cache keyed by device or size): reading any key gives what they stored
                stored = replace(val, origin=stmt if isinstance(stmt, ast.Assign) else val.origin, cache=True)
                element = stored if held.element.what == "none" else agree([held.element, stored])
                self.env[owner] = replace(
                    held, element=replace(element, cache=True) if element.what != "unknown" else element
                )
            elif (
                owner is not None
                and held is not None
                and held.what == "dict"
                and (held.keys or (held.element is not None and held.element.what == "none"))
                and isinstance(target.slice, ast.Constant)
                and isinstance(target.slice.value, str)
                and val.what != "unknown"
            ):
                # `self.models["encoder"] = ResnetEncoder(...)`, `inputs["image"] = x.to(device)` into a dict whose
                # keys are all known: the dict holds that value under that key
                pairs = [(k, v) for k, v in held.keys if k != target.slice.value]
                stored = replace(
                    val, origin=stmt if isinstance(stmt, ast.Assign) else val.origin, name=self.segment(target)
                )
                pairs.append((target.slice.value, stored))
                self.env[owner] = keyed([k for k, _ in pairs], [v for _, v in pairs])
            elif owner is not None and held is not None and held.what in ("seq", "dict", "tuple", "batch"):
                # `inputs[key] = ipt.to(device)` in a loop over a batch's items: what it holds is not known now
                self.env[owner] = UNKNOWN
            elif owner is not None and stmt is not None:
                self._replace_layer(owner, target, val, stmt, self.env.get(owner))  # `model[2] = nn.Linear(8, 3)`
            return
        name = dotted(target)
        if name is None or name.split(".")[0] in self.excluded:
            return
        if isinstance(target, ast.Attribute):  # a new attribute: the owner may now hold a tensor or module elsewhere
            owner = dotted(target.value)
            held = self.env.get(owner) if owner is not None else None
            # `model.encoder = nn.DataParallel(model.encoder)`: a wrapper of its own layer moves no weight
            rewrapped = (
                isinstance(value, ast.Call)
                and self.ctx.call_name(value) in PARALLEL_WRAPPERS | COMPILERS
                and bool(value.args)
                and dotted(value.args[0]) == name
            )
            if (
                owner is not None
                and held is not None
                and held.what != "unknown"
                and not _same_place(held, val)
                and not rewrapped
                and not (val.what != "module" and property_setter(self.ctx.kinds.classes.values(), target.attr))
                and not (held.what == "module" and val.what != "module" and target.attr in self._value_slots())
            ):
                self.env[owner] = replace(held, where=None, fresh=False)
                if stmt is not None:
                    self._replace_layer(owner, target, val, stmt, held)
        if (
            val.what == "module"
            and val.name is not None
            and val.name != name
            and not val.name.startswith("self.")
            and not (stmt is not None and self._last_use(stmt, val.name))
        ):
            val = replace(val, fresh=False)  # an alias: moving either name moves both
        # (`model = self.model` in a method: what the other methods do to `self.model` is known, see
        # `instance_attributes`, and what this one does to either name counts for both, see `_never_moved`)
        if val.what in ("unknown", "str") and value is not None and self.may_be_device(value):
            where = self.device_where(value)
            if where is not None:
                val = Val("device", where, dev=self.segment(value))
            elif isinstance(value, ast.Attribute) and value.attr == "device":
                val = Val("device")  # a device, but not one this analysis knows
        origin: ast.stmt | None
        if val.what in ("module", "any") and val.origin is not None:
            origin = val.origin
        else:
            origin = stmt if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign) else None
        self.env[name] = replace(val, origin=origin, name=name)
        self.drop_below(name)
        self.own(name)

    def _last_use(self, stmt: ast.stmt, name: str) -> bool:
        """Whether ``stmt`` (``model = embedding_net``, in the body of its scope) is the last use of ``name``.

        The statements after it in that body read ``name`` only after binding it again (the next section of a script
        builds a new ``embedding_net``), so the new name is the only one the module goes by.
        """
        if not isinstance(self.ctx.parent(stmt), ast.Module | ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        for later in self._following(stmt):
            bound = isinstance(later, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in later.targets
            )
            reads = [n for n in ast.walk(later) if isinstance(n, ast.Name) and n.id == name]
            if bound and all(isinstance(n.ctx, ast.Store) for n in reads):
                return True
            if reads or any(isinstance(n, ast.Global | ast.Nonlocal) for n in ast.walk(later)):
                return False
        return True

    def _replace_layer(self, owner: str, target: ast.expr, val: Val, stmt: ast.stmt, held: Val | None) -> None:
        """``model.fc = nn.Linear(...)`` after ``model.to(device)``: the new layer is on the host, the rest is not."""
        if held is None or held.what != "module" or held.where != DEVICE or held.wrapper:
            return
        if val.what == "module" and val.where == HOST and val.fresh and val.params:
            part = self.segment(target)
            self.env[owner] = replace(held, where=HOST, fresh=True, origin=stmt, part=part, moved_at=held.moved_at)

    # -- expressions ------------------------------------------------------------------------------------------

    def ev(self, node: ast.expr, top: bool = False) -> Val:
        """Evaluate ``node`` in the current environment, reporting what it finds on the way.

        ``top``: the expression is a statement of its own (``m.to(device)`` alone moves ``m`` in place).
        """
        if isinstance(node, ast.Constant):
            value = node.value
            if value is None:
                return NONE
            if isinstance(value, bool):
                return OTHER
            if isinstance(value, int | float | complex):
                return NUMBER
            if isinstance(value, str) and value.split(":")[0].strip().lower() == "cpu":
                return Val("device", HOST, dev=repr(value))  # `helper(x, "cpu")`: the parameter is the host
            return STRING if isinstance(value, str) else OTHER
        if isinstance(node, ast.Name | ast.Attribute):
            return self._host_data(node, self._name(node))
        if isinstance(node, ast.Call):
            return self._host_data(node, self.call(node, top))
        if isinstance(node, ast.BinOp):
            return self._arith(node, self.ev(node.left), self.ev(node.right), node.left, node.right)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.UnaryOp):
            val = self.ev(node.operand)
            return OTHER if isinstance(node.op, ast.Not) else val
        if isinstance(node, ast.BoolOp):
            self.ev(node.values[0])
            before = self.env
            self.env = dict(before)
            for operand in node.values[1:]:
                self.ev(operand)
            self.env = merge(before, self.env, lambda: self._available_test(node.values[0]))
            return UNKNOWN
        if isinstance(node, ast.IfExp):
            return self._if_expression(node, top)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Starred):  # `*layers` in a call: the sequence itself (the call unpacks it)
            return self.ev(node.value)
        if isinstance(node, ast.Tuple):
            items = tuple(self.ev(e) for e in node.elts)
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return Val("seq")
            return Val("tuple", items=items)
        if isinstance(node, ast.List | ast.Set):
            if not node.elts:
                return Val("seq", element=NONE)  # no items yet: what is appended decides
            return Val("seq", element=agree(self.ev(e) for e in node.elts))
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    self.ev(key)
            values = [self.ev(v) for v in node.values]
            if not node.keys:
                return Val("dict", element=NONE)  # no items yet: what is stored decides
            if any(key is None for key in node.keys):
                return Val("dict")
            return keyed(node.keys, values)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            return self._comprehension(node)
        if isinstance(node, ast.NamedExpr):
            val = self.ev(node.value)
            self.bind(node.target, val, None, node.value)
            return val
        if isinstance(node, ast.Lambda):
            return OTHER
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.ev(child)
        return STRING if isinstance(node, ast.JoinedStr) else UNKNOWN

    def _host_data(self, node: ast.expr, val: Val) -> Val:
        """A value of unknown place that is a NumPy array (``obs = env.reset()`` of a NumPy environment): no tensor."""
        if val.what == "unknown" and (kind := self.ctx.kind(node)) is not None and kind.name == "ndarray":
            return OTHER
        return val

    def _name(self, node: ast.Name | ast.Attribute) -> Val:
        name = dotted(node)
        if name is not None:
            if name in self.env:
                return self.env[name]
            if name.split(".")[0] in self.excluded:
                return UNKNOWN
        if isinstance(node, ast.Name) and node.id not in self.local_functions and loss_wrapper(self.ctx, node.id):
            return Val("module", params=False, loss=True)  # a loss function of the file, passed on as a value
        if isinstance(node, ast.Attribute):
            owner = self.ev(node.value)
            if owner.what == "unknown" and (kept := self._instance_value(node)) is not None:
                return kept
            if owner.what in (*TENSORISH, "any", "module") and node.attr == "device":
                return Val("device", owner.where, dev=self.segment(node))
            if owner.what == "module" and owner.wrapper and node.attr == "module":
                # `model.module` of `nn.DataParallel(model)`: the wrapped model, where the wrapper's weights are
                return replace(owner, wrapper=False, params=True if owner.params is False else owner.params)
            if owner.what == "module" and owner.where == DEVICE and not owner.part and owner.params:
                held = self.weight_attributes().get(node.attr)
                if held == "tensor":  # `model.entity_embedding`, an `nn.Parameter`: where the module's weights are
                    return Val("tensor", DEVICE, dev=owner.dev)
                if held == "module":  # `model.fc`, a layer with weights
                    return Val("module", DEVICE, dev=owner.dev, params=True, moved_at=owner.moved_at)
            if owner.what in TENSORISH:
                if node.attr in NOT_TENSOR_ATTRIBUTES:
                    return OTHER
                if owner.what == "output" or node.attr in SAME_DEVICE_ATTRIBUTES:
                    return replace(owner, what=owner.what if owner.what == "output" else "tensor")
        return UNKNOWN

    def _value_slots(self) -> frozenset[str]:
        """Attributes that module classes of the file keep plain values in, never weights or layers.

        GEM's ``self.old_task = -1`` and ``self.mem_cnt = 0`` in ``__init__``, then ``self.old_task = t`` in
        ``observe``: storing into such an attribute leaves the module's weights where they are. Each is set to a
        literal (a number, string, ``None``, an empty container) in an ``__init__`` of a module class, and no
        assignment in the file gives it a module or a weight, nor names it in a string (``register_buffer``).
        """
        if self._slots is not None:
            return self._slots
        literal: set[str] = set()
        other: set[str] = {n.value for n in self.ctx.nodes(ast.Constant) if isinstance(n.value, str)}
        for stmt in self.ctx.nodes(ast.Assign):
            for target in stmt.targets:
                if not isinstance(target, ast.Attribute):
                    continue
                value = stmt.value
                if isinstance(value, ast.UnaryOp):
                    value = value.operand
                func = self.ctx.enclosing_function(stmt)
                cls = self.ctx.enclosing_class(func) if func is not None else None
                plain = isinstance(value, ast.Constant) or (
                    isinstance(value, ast.List | ast.Dict | ast.Tuple | ast.Set) and not ast.unparse(value)[1:-1]
                )
                if (
                    plain
                    and func is not None
                    and func.name == "__init__"
                    and cls is not None
                    and self.ctx.kinds.class_is_module(cls.name)
                    and dotted(target.value) == "self"
                ):
                    literal.add(target.attr)
                    continue
                kind = self.ctx.kind(value)
                if (kind is not None and kind.is_module) or (
                    isinstance(value, ast.Call) and (self.ctx.call_name(value) or "").endswith(("Parameter", "Buffer"))
                ):
                    other.add(target.attr)
        self._slots = frozenset(literal - other - set(self.weight_attributes()))
        return self._slots

    def weight_attributes(self) -> dict[str, str]:
        """Attribute names that the module classes of the file give only weights: ``"tensor"`` or ``"module"``.

        ``self.entity_embedding = nn.Parameter(...)``, ``self.register_buffer("mean", ...)``, ``weight`` and
        ``bias`` are tensors that move with the module; ``self.fc = nn.Linear(...)`` (or a module class of the file
        with weights) is a layer. A name that any class of the file also binds to something else is left out.
        """
        if self._attribute_kinds is not None:
            return self._attribute_kinds
        found: dict[str, set[str]] = {"weight": {"tensor"}, "bias": {"tensor"}}
        for cls in self.ctx.nodes(ast.ClassDef):
            module = self.ctx.kinds.class_is_module(cls.name)
            for node in ast.walk(cls):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if module and node.func.attr in ("register_buffer", "register_parameter") and node.args:
                        first = node.args[0]
                        if isinstance(first, ast.Constant) and isinstance(first.value, str):
                            found.setdefault(first.value, set()).add("tensor")
                    continue
                if not isinstance(node, ast.Assign | ast.AnnAssign):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if not (isinstance(target, ast.Attribute) and dotted(target.value) == "self"):
                        continue
                    value = node.value
                    full = self.ctx.call_name(value) if isinstance(value, ast.Call) else None
                    if not module:
                        kind = "other"
                    elif full in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                        kind = "tensor"
                    elif isinstance(value, ast.Call) and self._weighted_layer(value):
                        kind = "module"
                    else:
                        kind = "other"
                    found.setdefault(target.attr, set()).add(kind)
        self._attribute_kinds = {
            name: kinds.pop() for name, kinds in found.items() if len(kinds) == 1 and "other" not in kinds
        }
        return self._attribute_kinds

    def _weighted_layer(self, call: ast.Call, depth: int = 0) -> bool:
        """A layer with weights; an ``nn.Sequential`` only when one of its layers has them (not ReLU + pooling)."""
        if (self.ctx.call_name(call) or "").rsplit(".", 1)[-1] != "Sequential":
            return self._builds_layer_with_weights(call)
        return depth < 3 and any(
            isinstance(a, ast.Call) and self._weighted_layer(a, depth + 1)
            for a in [*call.args, *(k.value for k in call.keywords)]
        )

    def _instance_value(self, node: ast.Attribute) -> Val | None:
        """``runner.root_device`` or ``graph.node_features`` of an instance of a plain class of the file.

        A device its ``__init__`` keeps and no method rebinds (see :meth:`instance_attributes`), or a tensor on the
        host that every assignment of that attribute in the file makes (see :meth:`_host_attribute`).
        """
        kept = self._instance_device(node)
        if kept is not None or dotted(node.value) == "self":
            return kept
        kind = self.ctx.kind(node.value)
        cls = (
            self.ctx.kinds.classes.get(kind.cls) if kind is not None and kind.name == "instance" and kind.cls else None
        )
        if cls is None:
            return None
        held = self._kept_on_device(cls, node.attr)
        return held if held is not None else self._host_attribute(cls, node.attr)

    def _kept_on_device(self, cls: ast.ClassDef, attr: str) -> Val | None:
        """``ema_model.ema``: a module or tensor that the ``__init__`` of plain class ``cls`` moves to the device.

        FixMatch's ``ModelEMA``: ``self.ema = deepcopy(model); self.ema.to(args.device)``. Only where no method
        rebinds, moves or hands it on (see :meth:`instance_attributes`) and no code outside the class stores it.
        """
        if not self._plain_class(cls):
            return None
        for target in self.ctx.nodes(ast.Attribute):
            if target.attr == attr and isinstance(target.ctx, ast.Store | ast.Del) and dotted(target.value) != "self":
                return None  # `ema_model.ema = other`: what it holds depends on the order things run
        held = self.instance_attributes(cls).get(f"self.{attr}")
        if held is None or held.what not in ("module", *TENSORISH):
            return None
        if held.where == HOST and not (held.what == "module" and self._only_run_outside(cls, attr)):
            return None
        if held.where not in (HOST, DEVICE):
            return None
        return replace(held, origin=held.origin if held.where == HOST else None, name=None)

    def _only_run_outside(self, cls: ast.ClassDef, attr: str) -> bool:
        """Whether code outside ``cls`` only runs or reads its module ``<x>.attr``, never moves or hands it on.

        The pointer summariser's ``Model``: ``self.encoder = encoder`` in ``__init__``, then ``self.model.encoder(
        enc_batch, enc_lens)`` and ``self.model.encoder.parameters()`` in the trainer. A call of its own, or one of
        the methods that leave a module where it is (``parameters``, ``state_dict``, ``eval``), only.
        """
        inside = set(ast.walk(cls))
        for node in self.ctx.nodes(ast.Attribute):
            if node.attr != attr or node in inside:
                continue
            above = self.ctx.parent(node)
            if isinstance(above, ast.Call) and above.func is node:
                continue  # `self.model.encoder(enc_batch, enc_lens)`
            if isinstance(above, ast.Attribute) and above.attr in SAFE_MODULE_USES - MOVES:
                continue  # `self.model.encoder.parameters()`
            return False
        return True

    def _instance_device(self, node: ast.Attribute) -> Val | None:
        """``runner.root_device`` of an instance of a plain class of the file: the device its ``__init__`` keeps.

        Only a device that no method rebinds (see :meth:`instance_attributes`).
        """
        kind = self.ctx.kind(node.value)
        if kind is None or kind.name != "instance" or kind.cls is None:
            return None
        cls = self.ctx.kinds.classes.get(kind.cls)
        if cls is None:
            return None
        val = self.instance_attributes(cls).get(f"self.{node.attr}")
        return replace(val, origin=None, name=None) if val is not None and val.what == "device" else None

    def _host_attribute(self, cls: ast.ClassDef, attr: str) -> Val | None:
        """A tensor on the host that attribute ``attr`` of every instance of plain class ``cls`` holds.

        GIN's graphs: ``self.node_features = 0`` in ``S2VGraph.__init__``, then ``g.node_features =
        torch.zeros(...)`` for each graph in ``load_data``. Every assignment of ``<x>.attr`` in the file (on an
        instance of ``cls``, or on anything whose kind is not known) must make a host tensor (a factory without
        ``device=``, ``torch.from_numpy``, a legacy typed constructor), or be a ``None``/number placeholder in
        ``__init__``; no method of the class may rebind, move or hand it on, and the file calls no ``setattr``.
        """
        key = (cls, attr)
        if key in self._host_attributes:
            return self._host_attributes[key]
        self._host_attributes[key] = None  # a cycle (`g.x = g.x.to(device)`): not known
        found: Val | None = None
        init = self._inherited_init(cls)
        if init is not None and self._plain_class(cls) and self.depth < 2 and "setattr(" not in self.ctx.source:
            rebound, handled = _instance_uses(
                cls,
                init,
                self.ctx,
                self.local_functions,
                self.reading_method,
                set(init_helpers(self.ctx, cls, init).values()),
            )
            if attr not in rebound and attr not in handled:
                found = self._stores_on_host(cls, init, attr)
        self._host_attributes[key] = found
        return found

    def _stores_on_host(self, cls: ast.ClassDef, init: ast.FunctionDef, attr: str) -> Val | None:
        kept = self.instance_attributes(cls).get(f"self.{attr}")
        reader = self._reader()
        reader._host_attributes = self._host_attributes
        tensors: list[Val] = []
        assigned = {id(t): n for n in self.ctx.nodes(ast.Assign) for t in n.targets if isinstance(t, ast.Attribute)}
        for target in self.ctx.nodes(ast.Attribute):
            if target.attr != attr or not isinstance(target.ctx, ast.Store | ast.Del):
                continue
            node = assigned.get(id(target))
            inside = self.ctx.enclosing_function(target) is init and dotted(target.value) == "self"
            if not inside and dotted(target.value) == "self":
                home = self.ctx.enclosing_class(target)
                if home is not None and cls not in self.ctx.kinds.class_chain(home):
                    continue  # `self.features = ...` of another class of the file
                return None  # a method of `cls` or of a subclass sets it: not followed
            owner = None if inside else self.ctx.kind(target.value)
            if owner is not None and (owner.name != "instance" or owner.cls != cls.name):
                continue  # another class's attribute of that name
            if node is None:
                return None  # `g.x, g.y = ...`, `del g.x`, a loop target: not followed
            if inside:
                if kept is not None and kept.what == "tensor" and kept.where == HOST:
                    tensors.append(kept)
                elif not (isinstance(node.value, ast.Constant) and not isinstance(node.value.value, str)):
                    return None  # neither a tensor on the host nor a `None`/number placeholder
                continue
            reader.env = dict(self.seeds or {})
            val = reader.ev(node.value)
            if val.what != "tensor" or val.where != HOST:
                return None
            tensors.append(val)
        if not tensors:
            return None
        dims = min(v.dims for v in tensors)
        return Val("tensor", HOST, scalar=any(v.scalar for v in tensors), dims=dims)

    def _if_expression(self, node: ast.IfExp, top: bool) -> Val:
        self.ev(node.test)
        decided = self._constant_flag(node.test)
        if decided is not None:  # `sp_adj if sparse else adj` with `sparse = True`: that one
            return self.ev(node.body if decided else node.orelse, top=top)
        before = self.env
        self.env = dict(before)
        body = self.ev(node.body, top=top)
        after_body = self.env
        self.env = dict(before)
        orelse = self.ev(node.orelse, top=top)
        test = node.test
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            # `e if e is None else e.cuda()` (DrQA's batches): where the test holds, that branch is `None`
            tested = dotted(test.left)
            if isinstance(test.ops[0], ast.Is) and tested is not None and dotted(node.body) == tested:
                body = NONE
            if isinstance(test.ops[0], ast.IsNot) and tested is not None and dotted(node.orelse) == tested:
                orelse = NONE

        def available() -> bool:
            return self._available_test(node.test)

        self.env = merge(after_body, self.env, available)
        return join(body, orelse, available)

    def _subscript(self, node: ast.Subscript) -> Val:
        owner = self.ev(node.value)
        index = self.ev(node.slice)
        # `x[index, :]`: each tensor among the indices counts
        indices = list(zip(index.items, node.slice.elts, strict=False)) if isinstance(node.slice, ast.Tuple) else []
        on_device = [
            (i, n)
            for i, n in [(index, node.slice), *indices]
            if i.what in (*TENSORISH, "any") and i.where == DEVICE and not i.scalar
        ]
        if owner.what in TENSORISH and owner.where == HOST and on_device:
            # `labels[~mask]` with `mask` on the device: PyTorch takes CPU indices into a GPU tensor, not the reverse
            # (a tensor indexed with a tensor of indices has a dimension at least: a 0-dim one cannot be indexed)
            name = self.label(owner, node.value)
            where = on_device[0][0].dev or "device"
            indexed = short(self.segment(on_device[0][1]))
            self.report(
                "FRY006",
                owner.origin or node.value,
                f"`{name}` is on the host and never moved, but it is indexed with `{indexed}`"
                f" on `{where}` at line {line(node)}; fix: {self.fix(owner, node.value, where)}",
            )
            return UNKNOWN
        if owner.what in TENSORISH:
            keeps_rank = (
                isinstance(node.slice, ast.Slice)
                or (isinstance(node.slice, ast.Constant) and node.slice.value is None)
                or (
                    isinstance(node.slice, ast.Tuple)
                    and any(
                        isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and e.value is None)
                        for e in node.slice.elts
                    )
                )
                or index.what == "seq"
                or (index.what in TENSORISH and not index.scalar)
                or self._numpy_indices(node.slice)
                or any(  # `log_ps[range(batch_size), actions]`: advanced indexing gives a tensor, not a scalar
                    (item.what == "seq" or (item.what in TENSORISH and not item.scalar))
                    or (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("range", "list"))
                    or isinstance(e, ast.List | ast.ListComp)
                    for item, e in indices
                )
            )
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            dropped = sum(
                1
                for e in parts
                if not isinstance(e, ast.Slice) and not (isinstance(e, ast.Constant) and e.value in (None, ...))
            )
            if not keeps_rank and owner.dims > dropped:  # `rewards[step]` of a 3-D tensor: a 2-D row, not a scalar
                return replace(owner, what="tensor", dims=owner.dims - dropped)
            basic = all(
                isinstance(e, ast.Slice | ast.Constant) or (isinstance(e, ast.Name) and self.ev(e).what == "number")
                for e in parts
            )
            dims = max(owner.dims - dropped, 0) if keeps_rank and basic else 0
            return replace(owner, what="tensor", scalar=owner.scalar or not keeps_rank, dims=dims)
        if owner.what == "batch":  # `batch[0]`, `batch["input_ids"]`
            return Val("tensor", owner.where)
        if owner.what == "any" and not owner.inplace and owner.where is not None and isinstance(node.slice, ast.Slice):
            # `primer[:n]` of a dataset item moved with `.to(device)`: a slice of it, where it is
            return Val("any", owner.where, dev=owner.dev)
        if (
            owner.what == "any"
            and owner.scalar
            and owner.where is not None
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):  # `torch.load(path, map_location="cpu")["model"]`: an entry of a loaded checkpoint, where it was mapped
            return Val("any", owner.where, scalar=True, dev=owner.dev)
        if owner.what == "unknown" and index.what in TENSORISH and not index.scalar:
            return Val("tensor")  # `inputs[excerpt]` with a tensor of indices: a tensor (or an array), not a module
        if owner.what == "dataset" and not isinstance(node.slice, ast.Slice) and (owner.items or owner.where):
            # `test_data[0]`: one item of a TensorDataset, where its tensors are
            return Val("tuple", items=owner.items) if owner.items else Val("batch", owner.where)
        if owner.what == "tuple":
            i = int_literal(node.slice)  # `batch[0]`, `batch[-1]`
            if i is not None:
                return owner.items[i] if -len(owner.items) <= i < len(owner.items) else UNKNOWN
            return UNKNOWN
        if owner.what in ("seq", "dict"):
            if isinstance(node.slice, ast.Slice):
                return owner
            if owner.keys and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                return owner.key(node.slice.value) or UNKNOWN  # `kwargs["model"]`, `sample["image"]`
            return owner.element or UNKNOWN
        return UNKNOWN

    def _numpy_indices(self, index: ast.expr, depth: int = 0) -> bool:
        """Whether ``index`` is an array of indices: selecting with it never gives a zero-dimensional tensor.

        ``np.where(mask)``, ``np.arange(n)``, a slice of one (``b_inds[start:end]``), or a name only ever bound to
        such values.
        """
        if depth > 3:
            return False
        if isinstance(index, ast.Call):
            return self.ctx.call_name(index) in _NUMPY_INDEX_CALLS
        if isinstance(index, ast.Subscript) and isinstance(index.slice, ast.Slice):
            return self._numpy_indices(index.value, depth + 1)  # `mb_inds = b_inds[start:end]`: still an array
        if isinstance(index, ast.Name):
            values = self.ctx.kinds.assigned_values(index.id)
            return bool(values) and all(
                isinstance(v, ast.expr) and v is not index and self._numpy_indices(v, depth + 1) for v in values
            )
        return False

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> Val:
        before = self.env
        mapped = self._mapped(node)
        if mapped is not None:
            return mapped
        self.env = dict(before)
        for gen in node.generators:
            element = self._element(gen.iter, self.ev(gen.iter))
            self.bind(gen.target, element, None, None)
            for test in gen.ifs:
                self.ev(test)
        if isinstance(node, ast.DictComp):
            self.ev(node.key)
            val = Val("dict", element=self.ev(node.value))
        else:
            val = Val("seq", element=self.ev(node.elt))
        self.env = before
        return val

    def _mapped(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> Val | None:
        """``[F.pad(x, pad) for x in inputs]`` over a tuple whose items are known: a list of each item's result.

        ``inputs`` the ``*inputs`` of a helper (``padder.pad(image1, image2)``) or a tuple written out; the list keeps
        what each item gives, so ``image1, image2 = padder.pad(image1, image2)`` unpacks each on its own. ``None``
        for any other comprehension.
        """
        if not isinstance(node, ast.ListComp | ast.GeneratorExp) or len(node.generators) != 1:
            return None
        gen = node.generators[0]
        if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
            return None
        plain = (ast.Name, ast.Attribute)
        if not isinstance(gen.iter, plain) and not (
            isinstance(gen.iter, ast.Tuple | ast.List) and all(isinstance(e, plain) for e in gen.iter.elts)
        ):
            return None  # read only names here: the iterable is read again below when this gives up
        over = self.ev(gen.iter)
        if over.what != "tuple" or not over.items or len(over.items) > 8:
            return None
        before = self.env
        results: list[Val] = []
        for item in over.items:
            self.env = dict(before)
            self.bind(gen.target, item, None, None)
            results.append(replace(self.ev(node.elt), origin=None, name=None))
        self.env = before
        return Val("seq", element=agree(results), items=tuple(results))

    def _assigned_batch_evidence(self, stmt: ast.Assign, val: Val) -> Val:
        """A batch taken outside a ``for`` is on the host when the statements after it move some of its names.

        ``x, y = next(it)``, ``images, labels = data_gen.__next__()``: the statements after it in its block are the
        evidence, as the loop body is for :meth:`_batch_evidence`.
        """
        if not _has_unknown_batch(val):
            return val
        following = self._following(stmt)
        names = {n.id for target in stmt.targets for n in ast.walk(target) if isinstance(n, ast.Name)}
        if not following or not moves_names(names, following, self._callee):
            return val
        target = stmt.targets[0] if len(stmt.targets) == 1 else None
        return _batch_on_host(val, target, lambda name: self._used_as_tensor(name, following))

    def _following(self, stmt: ast.stmt, depth: int = 0) -> list[ast.stmt]:
        """The statements after ``stmt`` in the block that holds it.

        Then, for a block of a ``try`` (or one of its handlers), ``if`` or ``with`` (``try: x, y = next(it)`` /
        ``except StopIteration: ...``), the statements after that statement in turn (two levels up at most; not out of
        a loop or function).
        """
        parent = self.ctx.parent(stmt)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and stmt in block:
                rest = block[block.index(stmt) + 1 :]
                if depth < 2 and isinstance(parent, ast.Try | ast.If | ast.With) and field != "finalbody":
                    rest = rest + self._following(parent, depth + 1)
                elif depth < 2 and isinstance(parent, ast.ExceptHandler):  # `except StopIteration: x, y = next(it)`
                    handled = self.ctx.parent(parent)
                    if isinstance(handled, ast.Try):
                        rest = rest + self._following(handled, depth + 1)
                return rest
        return []

    def _batch_evidence(self, stmt: ast.For | ast.AsyncFor, element: Val) -> Val:
        """Batches of a loader whose dataset is not known are on the host when the loop moves some of them.

        Also inside nested tuples: ``for i, (images, captions) in enumerate(loader)``.
        """
        if not _has_unknown_batch(element) or not moves_items(stmt, stmt.body, self._callee):
            return element
        return _batch_on_host(element, stmt.target, lambda name: self._used_as_tensor(name, stmt.body))

    def _used_as_tensor(self, name: str, body: list[ast.stmt], depth: int = 0) -> bool:
        """Whether ``body`` uses ``name`` as only a tensor is used (see :func:`tensor_use`), or moves it.

        Also when it hands ``name`` to a function of the file that so uses the parameter it binds (two calls deep).
        """
        for stmt in body:
            for node in ast.walk(stmt):
                if not isinstance(node, ast.Name) or node.id != name or not isinstance(node.ctx, ast.Load):
                    continue
                if tensor_use(self.ctx, node, self._peek):
                    return True
                call = self.ctx.parent(node)
                if depth >= 2 or not isinstance(call, ast.Call) or node not in call.args:
                    continue
                found = self._callee(call)
                if found is None:
                    continue
                func, offset = found
                params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]][offset:]
                index = call.args.index(node)
                if index < len(params) and self._used_as_tensor(params[index], func.body, depth + 1):
                    return True
        return False

    def _callee(self, call: ast.Call) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None:
        """The function of the file ``call`` runs, and how many of its leading parameters the call does not pass.

        A function of the file (see :func:`local_functions`), or a plain class's method called on ``self`` or on
        an instance the file builds (``self`` not passed).
        """
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.local_functions:
            return self.local_functions[func.id], 0
        if isinstance(func, ast.Attribute):
            method = self._own_method(func, self.ctx.enclosing_function(call)) or self.plain_method(func)
            if method is not None:
                return method, 1
            static = self.static_method(func)
            if static is not None:
                return static, 0
        return None

    def _progress_wrapped(self, iterable: ast.expr | None) -> ast.expr | None:
        """What a name of this scope bound once to ``tqdm(x, ...)`` (or ``iter(x)``) iterates over: ``x``."""
        if not isinstance(iterable, ast.Name):
            return None
        scope = self.scope
        bound = [
            n
            for n in (ast.walk(scope) if not isinstance(scope, ast.Module) else self.ctx.nodes(ast.Assign))
            if isinstance(n, ast.Assign)
            and self.ctx.enclosing_function(n) is self.ctx.enclosing_function(iterable)
            and any(isinstance(t, ast.Name) and t.id == iterable.id for t in n.targets)
        ]
        stores = [
            n
            for n in self.ctx.nodes(ast.Name)
            if n.id == iterable.id
            and isinstance(n.ctx, ast.Store)
            and self.ctx.enclosing_function(n) is self.ctx.enclosing_function(iterable)
        ]
        if len(bound) != 1 or len(stores) != 1 or not isinstance(bound[0].value, ast.Call):
            return None
        call = bound[0].value
        name = self.ctx.call_name(call)
        if name in (*_PROGRESS_BARS, "iter") and call.args:
            return call.args[0]
        return None

    def _element(self, iterable: ast.expr | None, val: Val) -> Val:
        """What iterating over ``iterable`` (of value ``val``) gives."""
        if val.what == "loader":
            if val.item and val.where is not None:  # a dataset whose items are single tensors: each batch one tensor
                return Val("tensor", val.where)
            return Val("tuple", items=val.items) if val.items else Val("batch", val.where)
        if val.what == "batch":  # `x, y = batch`, `for x in batch`: a tensor of the batch
            return Val("tensor", val.where)
        if val.what == "unknown" and isinstance(iterable, ast.Name | ast.Attribute) and loader_name(iterable):
            # unless it may be one of the file's own iterators that move their batches (Chinese-Text-Classification's
            # `DatasetIterater.__next__` returns `torch.LongTensor(...).to(self.device)`)
            return UNKNOWN if self.ctx.shared(_moving_iterators) else Val("batch")
        wrapped = self._progress_wrapped(iterable) if val.what == "unknown" else None
        if wrapped is not None:  # `tk0 = tqdm.tqdm(data_loader)`, then `for i, (x, y) in enumerate(tk0)`
            return self._element(wrapped, self._peek(wrapped))
        if isinstance(iterable, ast.Call):
            name = self.ctx.call_name(iterable)
            args = iterable.args
            if name == "enumerate" and args:
                return Val("tuple", items=(NUMBER, self._element(args[0], self._peek(args[0]))))
            if name == "zip" and args and not any(isinstance(a, ast.Starred) for a in args):
                return Val("tuple", items=tuple(self._element(a, self._peek(a)) for a in args))
            if name in ("range", "len"):
                return NUMBER
            if name in ("iter", "list", "tuple", "sorted", "reversed", *_PROGRESS_BARS) and args:
                return self._element(args[0], self._peek(args[0]))
            func = iterable.func
            weights = self._weights_of(func)
            if weights is not None:  # `for name, p in model.named_parameters():` of a model on the device
                return weights
            if isinstance(func, ast.Attribute) and func.attr in ("values", "items") and not args:
                owner = self._peek(func.value)
                if owner.what == "dict" and owner.element is not None:
                    return owner.element if func.attr == "values" else Val("tuple", items=(UNKNOWN, owner.element))
                if owner.what == "batch" and owner.where is not None:  # a dict batch: each value a tensor there
                    value = Val("tensor", owner.where)
                    return value if func.attr == "values" else Val("tuple", items=(UNKNOWN, value))
            relayed = self._relayed(iterable)
            if relayed is not None:  # `metric_logger.log_every(data_loader, 10)`: the loader's batches
                return self._element(relayed, self._peek(relayed))
            return self._yielded(iterable)
        if val.what == "seq":
            return val.element or UNKNOWN
        if val.what == "tuple":
            return agree(val.items)
        if val.what in TENSORISH:
            return replace(val, what="tensor", scalar=True, origin=None)
        return UNKNOWN

    def _weights_of(self, func: ast.expr) -> Val | None:
        """An item of ``model.parameters()`` (or its named and buffer forms, or ``state_dict().items()``).

        For a model whose weights are all on the device: each weight is there too.
        """
        if not isinstance(func, ast.Attribute):
            return None
        method, owner_node = func.attr, func.value
        if method in ("items", "values") and isinstance(owner_node, ast.Call) and not owner_node.args:
            inner = owner_node.func
            if not (isinstance(inner, ast.Attribute) and inner.attr == "state_dict"):
                return None
            owner_node = inner.value
            named = method == "items"
        elif method in ("parameters", "named_parameters", "buffers", "named_buffers"):
            named = method.startswith("named_")
        else:
            return None
        owner = self._peek(owner_node)
        if owner.what != "module" or owner.where != DEVICE or owner.part or not owner.params or owner.wrapper:
            return None
        weight = Val("tensor", DEVICE, dev=owner.dev)
        return Val("tuple", items=(STRING, weight)) if named else weight

    def _yielded(self, call: ast.Call) -> Val:
        """What a generator of the file (a function, or a plain class's method) yields for this call.

        ``for X, Y in data.get_batches(inputs, targets, batch_size)``: each ``yield Variable(X), Variable(Y)``.
        """
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.local_functions:
            generator: ast.FunctionDef | ast.AsyncFunctionDef | None = self.local_functions[func.id]
            bound = False
        elif isinstance(func, ast.Attribute):
            generator, bound = self._generator_method(func), True
        else:
            return UNKNOWN
        if generator is None:
            return UNKNOWN
        args = [self._peek(a) for a in call.args if not isinstance(a, ast.Starred)]
        kwargs = {k.arg: self._peek(k.value) for k in call.keywords}
        return self._returned_by(generator, call, args, kwargs, bound=bound, yields=True)

    def _generator_method(self, func: ast.Attribute) -> ast.FunctionDef | None:
        """``obj.method`` of a plain class of the file (see :meth:`plain_method`), or the class's own ``self.<m>``."""
        found = self.plain_method(func)
        if found is None and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = self.ctx.enclosing_class(self.scope) if isinstance(self.scope, ast.FunctionDef) else None
            found = next(
                (m for m in (cls.body if cls else []) if isinstance(m, ast.FunctionDef) and m.name == func.attr), None
            )
        if found is None:  # `data.get_batches(...)`: the one generator of that name among the file's classes
            named = [
                m
                for cls in self.ctx.kinds.classes.values()
                for m in cls.body
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == func.attr
            ]
            if len(named) == 1 and isinstance(named[0], ast.FunctionDef) and not named[0].decorator_list:
                found = named[0]
        return found

    def _relayed(self, call: ast.Call) -> ast.expr | None:
        """The argument whose items a generator of the file yields as they come, else ``None``.

        A function or a plain class's method whose only ``yield`` statements are ``yield obj`` inside ``for obj in
        <parameter>:`` or ``for i, obj in enumerate(<parameter>):`` (a logger or progress wrapper around a loader).
        """
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.local_functions:
            generator: ast.FunctionDef | ast.AsyncFunctionDef | None = self.local_functions[func.id]
            offset = 0
        elif isinstance(func, ast.Attribute):
            generator, offset = self.plain_method(func), 1
        else:
            return None
        if generator is None or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        yields = [n for n in ast.walk(generator) if isinstance(n, ast.Yield | ast.YieldFrom)]
        params = [a.arg for a in [*generator.args.posonlyargs, *generator.args.args]][offset:]
        source: str | None = None
        for node in yields:
            loop = next((a for a in self.ctx.ancestors(node) if isinstance(a, ast.For)), None)
            if not isinstance(node, ast.Yield) or not isinstance(node.value, ast.Name) or loop is None:
                return None
            target, over = loop.target, loop.iter
            if (  # `for i, obj in enumerate(iterable): yield obj`
                isinstance(over, ast.Call)
                and self.ctx.call_name(over) == "enumerate"
                and len(over.args) == 1
                and isinstance(target, ast.Tuple)
                and len(target.elts) == 2
            ):
                target, over = target.elts[1], over.args[0]
            if (
                not isinstance(target, ast.Name)
                or target.id != node.value.id
                or not isinstance(over, ast.Name)
                or over.id not in params
                or source not in (None, over.id)
            ):
                return None
            source = over.id
        if source is None:
            return None
        index = params.index(source)
        if index < len(call.args):
            return call.args[index]
        return next((k.value for k in call.keywords if k.arg == source), None)

    def _peek(self, node: ast.expr) -> Val:
        """The value of a name or attribute chain, without reporting anything (for arguments already evaluated)."""
        if isinstance(node, ast.Name | ast.Attribute):
            name = dotted(node)
            if name is not None and name in self.env:
                return self.env[name]
            return UNKNOWN
        self.silent += 1
        try:
            return self.ev(node)
        finally:
            self.silent -= 1

    # -- arithmetic and comparisons ---------------------------------------------------------------------------

    def _arith(self, node: ast.AST, left: Val, right: Val, left_node: ast.expr, right_node: ast.expr) -> Val:
        """``left <op> right``: report a host and a device tensor meeting; the result follows the tensors."""
        if self._mixes(node, left, right, left_node, right_node):
            return UNKNOWN
        tensors = [v for v in (left, right) if v.what in (*TENSORISH, "any")]
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.Add) and left.what == "seq":
            if right.what == "seq" and left.element is not None and right.element is not None:
                # `layers += [nn.Linear(h, h), nn.ReLU()]`: a list of the items of both
                return Val(
                    "seq", element=agree([left.element, right.element] if left.element != NONE else [right.element])
                )
            return UNKNOWN
        if not tensors:
            return NUMBER if left.what == right.what == "number" else UNKNOWN
        if len(tensors) == 1:
            (val,) = tensors
            other = right if val is left else left
            if other.what in ("number", "other") or val.where == DEVICE or (val.where == HOST and not val.scalar):
                return replace(val, what="tensor") if val.what == "output" else val
            return UNKNOWN
        if left.where == right.where:
            return Val("tensor", left.where, scalar=left.scalar and right.scalar, dev=left.dev or right.dev)
        return UNKNOWN

    def _compare(self, node: ast.Compare) -> Val:
        vals = [self.ev(node.left), *(self.ev(c) for c in node.comparators)]
        nodes = [node.left, *node.comparators]
        result: Val = OTHER
        for i, op in enumerate(node.ops):
            if isinstance(op, _ORDERINGS):
                result = self._arith(node, vals[i], vals[i + 1], nodes[i], nodes[i + 1])
        return result if result.what == "tensor" else OTHER

    def _written_scalar(self, stmt: ast.AugAssign, left: Val, right: Val) -> bool:
        """Report ``loss += value`` into a 0-dim host tensor of a device value (TS2Vec's ``torch.tensor(0.)``).

        ``+=`` on a tensor is in place: the host tensor is the output, and a 0-dim CPU tensor mixes with another
        device only as an input (pytorch#40986), so this raises on a GPU.
        """
        if not (
            left.what in TENSORISH
            and left.where == HOST
            and left.scalar
            and right.where == DEVICE
            and right.what in TENSORISH
            and isinstance(stmt.target, ast.Name)
        ):
            return False
        name = self.label(left, stmt.target)
        where = self._device_text(right)
        visible = self.visible_device(where)
        if visible == "device" and "device" not in self.env:  # not a name of this scope: a device tensor's device
            added = stmt.value if isinstance(stmt.value, ast.Name | ast.Attribute) else None
            scope = self.scope
            params = (
                [a.arg for a in [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs]]
                if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef)
                else []
            )
            held = next(
                (p for p in params if self.env.get(p, UNKNOWN).what in TENSORISH and self.env[p].where == DEVICE),
                None,
            )
            if added is not None:
                visible = f"{self.segment(added)}.device"
            elif held is not None:
                visible = f"{held}.device"  # TS2Vec's `hierarchical_contrastive_loss(z1, z2)`: `z1.device`
        made = left.origin.value if isinstance(left.origin, ast.Assign) else None
        made_text = short(self.segment(made)) if made is not None else ""
        fix = (
            f"make it there: `{made_text[:-1]}, device={visible})`"
            if made_text.startswith("torch.") and made_text.endswith(")") and "device=" not in made_text
            else f"`{name} = {name}.to({visible})`"
        )
        self.report(
            "FRY006",
            left.origin or stmt,
            f"`{name}` is a 0-dim tensor on the host, and line {line(stmt)} adds `{self.label(right, stmt.value)}`, "
            f"which is on `{where}`, into it in place: a 0-dim CPU tensor joins an operation on another device only "
            f"as an input, not as the tensor written; fix: {fix}",
        )
        return True

    def _mixes(self, node: ast.AST, left: Val, right: Val, left_node: ast.expr, right_node: ast.expr) -> bool:
        """Report a non-scalar host tensor combined with a device tensor."""
        for host, host_node, dev, dev_node in (
            (left, left_node, right, right_node),
            (right, right_node, left, left_node),
        ):
            if (
                host.what in TENSORISH
                and host.where == HOST
                and not host.scalar
                and dev.where == DEVICE
                and (dev.what in TENSORISH or (dev.what == "any" and not dev.inplace))
            ):
                name = self.label(host, host_node)
                where = self._device_text(dev)
                self.report(
                    "FRY006",
                    host.origin or host_node,
                    f"`{name}` is on the host and never moved, but line {line(node)} combines it with "
                    f"`{self.label(dev, dev_node)}`, which is on `{where}`; fix: {self.fix(host, host_node, where)}",
                )
                return True
        return False

    def segment(self, node: ast.AST) -> str:
        """The source text of ``node``, for messages."""
        return self.ctx.segment(node)

    # -- reporting --------------------------------------------------------------------------------------------

    def label(self, val: Val, node: ast.AST) -> str:
        """How a message names a value: the name it was bound to, or its source text."""
        if val.name is not None and (val.origin is not None or isinstance(node, ast.Starred)):
            return val.name  # an item of `*inputs` is named by where it came from
        return short(self.segment(node)) or val.name or "value"

    @staticmethod
    def _device_text(val: Val) -> str:
        return val.dev or "device"

    def fix(self, val: Val, node: ast.AST, where: str) -> str:
        """How to move a host value: reassign its name, or move the expression where it is used."""
        where = self.visible_device(where)
        if val.cache and isinstance(val.origin, ast.Assign) and isinstance(val.origin.targets[0], ast.Subscript):
            stored = val.origin.value  # `cache[key] = torch.ones(...)`: move what is stored
            written = short(self.segment(stored))
            if not isinstance(stored, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
                written = f"({written})"
            made = isinstance(stored, ast.Call) and (self.ctx.call_name(stored) or "").startswith("torch.")
            text = f"store `{written}.to({where})`"
            return f"{text}, or make it with `device={where}`" if made else text
        if val.name is not None and val.origin is not None:
            return f"`{val.name} = {val.name}.to({where})`"
        if val.name is not None and isinstance(node, ast.Starred):
            return f"move `{val.name}` with `.to({where})` before it is packed into `{short(self.segment(node.value))}`"
        if isinstance(node, ast.Name):  # a loop variable used here: keep the moved tensor (a bare `.to()` is lost)
            return f"`{node.id} = {node.id}.to({where})` before this line"
        written = short(self.segment(node))
        if isinstance(node, ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.Compare | ast.IfExp | ast.Lambda):
            written = f"({written})"  # `(t + 1).to(device)`: the whole expression, not its last operand
        text = f"`{written}.to({where})`"
        made = isinstance(node, ast.Call) and (self.ctx.call_name(node) or "").startswith("torch.")  # a factory
        return f"{text}, or make it with `device={where}`" if made else text

    def visible_device(self, where: str, at: ast.AST | None = None) -> str:
        """``where`` as the scope of ``at`` (default: this scope) can write it.

        A device name bound elsewhere (``device`` in ``__init__``) is the attribute of this scope that holds the same
        device (``self.device``), where one does; ``self.device`` of another class is not this class's. A fix for
        another scope that cannot name the device says ``device``.
        """
        scope = self.scope if at is None else (self.ctx.enclosing_function(at) or self.ctx.tree)
        dotted_name = all(part.isidentifier() for part in where.split("."))
        if not dotted_name or not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            return where
        if self._reachable(where, scope):
            return where
        if scope is not self.scope:
            return "device"
        held = sorted(
            n
            for n, v in self.env.items()
            if v.what == "device" and v.where == DEVICE and "." in n and self._reachable(n, scope)
        )
        return held[0] if len(held) == 1 else "device"

    def _reachable(self, name: str, scope: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Whether code in ``scope`` can write the dotted ``name`` (``self.device`` only in its own class)."""
        root, _, rest = name.partition(".")
        if root == "self" and rest:
            attr = f"self.{rest.split('.')[0]}"  # the class's own attribute, or a base class's of the file
            chain = self.ctx.kinds.class_chain(self.ctx.enclosing_class(scope))
            held = any(attr in self.ctx.kinds.self_attributes.get(c.name, {}) for c in chain)
            return held and bool(scope.args.args) and scope.args.args[0].arg == "self"
        return root in bound_names(scope) or root in self._module_names()

    def _module_names(self) -> set[str]:
        if self._module_bound is None:
            found: set[str] = set()
            stack: list[ast.AST] = list(self.ctx.tree.body)
            while stack:  # names the module's own code binds (not inside functions or classes)
                node = stack.pop()
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    found.add(node.name)
                    continue
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    found.add(node.id)
                elif isinstance(node, ast.Import | ast.ImportFrom):
                    found.update((a.asname or a.name).split(".")[0] for a in node.names)
                if not isinstance(node, ast.Lambda):
                    stack.extend(ast.iter_child_nodes(node))
            self._module_bound = found
        return self._module_bound

    def report(self, code: str, node: ast.AST, message: str) -> None:
        """Record a finding (once per rule and line; not during the first, silent reading of a loop body)."""
        if self.returns is not None or self.cpu_only:  # read for its return value, or a branch for CPU-only machines
            return
        if self.silent and not (code in _FIRST_PASS_CODES and self.silent == self.first_pass):
            return  # a value meeting another on the loop's first pass meets it as it was before the loop
        if self.later_pass and "; fix: " in message and (code, line(node)) not in self.found:
            head, _, tail = message.partition("; fix: ")
            message = f"{head} (from the second pass of the loop at line {line(self._loops[-1])} on); fix: {tail}"
        self.found.setdefault((code, line(node)), Report(code, node, message))
