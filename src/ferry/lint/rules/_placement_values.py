"""What the placement analysis knows of a value (:class:`Val`), how branches merge, and the names it looks for.

Part of :mod:`ferry.lint.rules._placement` (not a rule). Facts about PyTorch's API come from
:mod:`ferry.lint.torch_api`; the tables here are the analysis's own: where it narrows or widens those, and the names
people give devices, configs and harmless helpers.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from ferry.lint.context import FileContext, dotted
from ferry.lint.torch_api import (
    ACCELERATORS,
    DEVICE_CALLS,
    HOST_TARGET_LOSSES,
    LOSS_FUNCTIONS,
    LOSS_INPUTS,
    MOVES,
    SAME_PLACE_METHODS,
    TENSOR_ATTRIBUTES,
)

HOST = "host"
DEVICE = "device"
KEEP = "keep"  # `.to(dtype)`: the device does not change

#: Tensor-like values: real tensors and module outputs (a tensor, or a tuple/dict/ModelOutput of tensors).
TENSORISH = ("tensor", "output")

#: Functional losses checked (``ctc_loss``'s targets and lengths may stay on the CPU).
CHECKED_LOSSES = LOSS_FUNCTIONS - HOST_TARGET_LOSSES
#: Module methods that return the module itself without moving it (the function ``apply`` runs may move it).
SAME_MODULE = SAME_PLACE_METHODS - {"apply"}

#: Tensor methods whose result may be zero-dimensional.
REDUCTIONS = frozenset(
    """
    sum mean max min prod norm std var median mode all any argmax argmin logsumexp count_nonzero amax amin nansum
    nanmean trace dot vdot squeeze kthvalue quantile nanquantile nanmedian
    """.split()
)
#: Tensor methods whose result has at least one dimension.
SHAPERS = frozenset(
    """
    unsqueeze view reshape permute flatten expand repeat transpose unfold view_as expand_as reshape_as broadcast_to
    tile movedim moveaxis swapaxes swapdims unflatten
    """.split()
)
#: Methods of a moved value of unknown kind that only a tensor has (the result stays where it is).
TENSOR_ONLY_METHODS = frozenset(
    "detach clone contiguous long int bool squeeze view_as flip softmax log_softmax sigmoid argmax".split()
)
#: What may be done with a module without it being moved elsewhere (for "never moved": anything else counts).
SAFE_MODULE_USES = SAME_MODULE | frozenset(
    """
    parameters named_parameters buffers named_buffers modules named_modules children named_children state_dict
    load_state_dict zero_grad forward training weight bias num_parameters apply update_parameters
    """.split()
)
#: Context managers that do not change where new tensors and modules go.
HARMLESS_CONTEXTS = frozenset(
    """
    torch.no_grad torch.enable_grad torch.inference_mode torch.set_grad_enabled torch.autocast torch.amp.autocast
    torch.cuda.amp.autocast torch.cpu.amp.autocast torch.autograd.no_grad torch.autograd.set_detect_anomaly
    torch.autograd.detect_anomaly torch.autograd.profiler.profile torch.autograd.profiler.record_function
    torch.profiler.profile torch.profiler.record_function open warnings.catch_warnings contextlib.suppress
    contextlib.nullcontext torch.random.fork_rng tqdm tqdm.tqdm tqdm.auto.tqdm tempfile.TemporaryDirectory
    tempfile.NamedTemporaryFile tempfile.TemporaryFile
    """.split()
)
#: Builtins that neither move nor keep what they are given.
HARMLESS_BUILTINS = frozenset(
    """
    print len isinstance issubclass type id str repr hasattr getattr sum int float bool format max min abs round
    sorted list tuple range enumerate zip iter next any all callable hash
    """.split()
)
#: Builtins that only read what they are given (a module or tensor passed to them is not moved or kept).
HARMLESS_READS = frozenset("print len isinstance type id str repr hasattr getattr format sorted".split())
#: Calls that copy their argument and leave it where it is (``self.ema = deepcopy(model)``).
COPIES = frozenset({"deepcopy", "copy.deepcopy", "copy.copy"})
#: Attributes of a tensor that are tensors on the same device (``grad`` may be ``None``).
SAME_DEVICE_ATTRIBUTES = TENSOR_ATTRIBUTES - {"grad"}
#: Names that hold the chosen device.
DEVICE_NAMES = frozenset(
    "device dev torch_device cuda_device gpu_device target_device compute_device train_device training_device".split()
)
#: Names of a GPU ordinal: an integer that ``.to()`` and ``device=`` read as ``cuda:<n>`` (``x.to(args.gpu)``,
#: ``.to(local_rank)``). Only where the name is the target of a move or a factory's ``device=``.
GPU_ORDINAL_NAMES = frozenset(
    "gpu gpu_id gpu_idx gpu_index gpu_rank gpu_no local_gpu local_rank rank cuda_id device_id device_idx".split()
)
#: Lists of GPU ordinals, indexed to get one (``gpu_ids[0]``, ``args.device_ids[0]``).
GPU_ORDINAL_LISTS = frozenset("gpu_ids gpus device_ids gpu_list gpu_devices cuda_ids".split())
#: Owners of a ``.device`` attribute that is a configured device (``args.device``), not a tensor's.
CONFIG_OWNERS = frozenset(
    """
    args opt opts option options cfg config conf hparams hp params settings flags accelerator fabric trainer
    training_args train_args runner
    """.split()
)
#: Calls that give the chosen device: torch's, and ferry's own pick.
CHOSEN_DEVICE_CALLS = DEVICE_CALLS | {"ferry.pick_device", "ferry.devices.pick_device"}
#: Device strings that name an accelerator: configs also say ``"gpu"`` (``if args.device == "gpu":``).
ACCELERATOR_NAMES = ACCELERATORS | {"gpu"}


@dataclass(frozen=True)
class Val:
    """What the analysis knows of a value.

    Attributes:
        what: ``"tensor"``, ``"output"`` (what a module returned), ``"module"``, ``"any"`` (moved, kind unknown),
            ``"device"``, ``"seq"``, ``"dict"``, ``"tuple"``, ``"number"``, ``"str"``, ``"none"``, ``"other"``,
            ``"dataset"`` (a ``TensorDataset``), ``"loader"`` (a ``DataLoader``), ``"batch"`` (what iterating a
            loader gives: a tensor or a tuple, list or dict of tensors) or ``"unknown"``.
        where: :data:`HOST`, :data:`DEVICE` or ``None`` (unknown).
        origin: The statement that bound it (reported instead of the use, so the fix goes where the value is made).
        name: The name it was bound to, for messages.
        scalar: A host tensor that may have zero dimensions (it then mixes with device tensors without error).
        dims: How many dimensions a tensor has at least, where the code shows it (``torch.zeros(n, p, 1)``: 3);
            0 when not known. Indexing one with fewer integers than that leaves a tensor with dimensions
            (``rewards[step]``), which is not a possible zero-dimensional scalar.
        items: For ``"tuple"``; for a ``"seq"`` a comprehension made over a known tuple, each item's value.
        element: For ``"seq"``/``"dict"``: any item.
        dev: The device as written where it was chosen (``device``, ``"cuda"``), for messages.
        moved_at: The line where a module was moved.
        fresh: A module built here, with its parameters on the host.
        params: Whether a module holds parameters or buffers (``None``: unknown); ``False`` also for wrappers that
            move their inputs themselves (``DataParallel``).
        loss: A loss module.
        weight: A loss module's host ``weight=`` tensor.
        inplace: The device is known only from ``x.to(device)`` as a statement on a value of unknown kind.
        wrapper: ``nn.DataParallel``/``DistributedDataParallel`` around a module: it moves its inputs itself, and
            its outputs are where the wrapped module is.
        part: A module moved to the device whose layer ``part`` (``model.fc``, ``model[2]``) was then replaced by
            one built on the host: its other layers are on the device, that one is not.
        item: A ``"batch"`` that is one item of a collated tuple (``images`` of ``images, targets, lengths``): a
            tensor once its place is known, where a whole batch may still be a structure to unpack. For a
            ``"dataset"``/``"loader"``: each item (each batch) is one tensor (``__getitem__`` returns a tensor).
        feeds: For a module whose class moves its inputs to a device it keeps (``self.dev = args.device``, then
            ``torch.LongTensor(seqs).to(self.dev)``) but not its weights: that device as the construction gives it
            (``args.device``).
        keys: For a ``"dict"`` whose keys are all strings known here (``{"image": x, "mask": y}``, the ``**kwargs``
            a call passes): each key's value, read by ``d["image"]``.
        cache: A tensor stored into a dict made empty and filled only by stores (``cache[str(x.device)] = t``).
        bound_self: The module a method of its class is read with, as ``self`` (``rvae.sample(...)``).
    """

    what: str = "unknown"
    where: str | None = None
    origin: ast.stmt | None = None
    name: str | None = None
    scalar: bool = False
    dims: int = 0
    items: tuple[Val, ...] = ()
    element: Val | None = None
    dev: str | None = None
    moved_at: int | None = None
    fresh: bool = False
    params: bool | None = None
    loss: bool = False
    weight: ast.expr | None = None
    inplace: bool = False
    wrapper: bool = False
    part: str | None = None
    item: bool = False
    keys: tuple[tuple[str, Val], ...] = ()
    feeds: str | None = None
    cache: bool = False
    bound_self: bool = False

    def key(self, name: str) -> Val | None:
        """The value of ``self[name]`` where this is a dict of known keys, else ``None``."""
        return next((val for key, val in self.keys if key == name), None)


UNKNOWN = Val()
NUMBER = Val("number")
STRING = Val("str")
OTHER = Val("other")
#: ``None``: a name that holds ``None`` on some paths and a tensor on others is that tensor where it is used
#: (``state = None if done else torch.tensor(obs, device=device)``; code that uses it when ``None`` fails anyway).
NONE = Val("none")


def agree(vals: Iterable[Val]) -> Val:
    """One value for all of ``vals`` (the items of a list literal): the common one, or unknown."""
    vals = list(vals)
    if not vals:
        return UNKNOWN
    first = vals[0]
    if all(v == first for v in vals):
        return first
    bare = [replace(v, origin=None, name=None) for v in vals]
    if all(v == bare[0] for v in bare):  # `{"train": train_loader, "val": val_loader}` of one dataset class
        return bare[0]
    if all(v.what == first.what and v.where == first.where for v in vals):
        if first.what == "module":  # layers of a list: the list holds parameters if one of them does
            known = [v.params for v in vals]
            params = True if any(known) else False if all(k is False for k in known) else None
            return Val("module", first.where, dev=first.dev, params=params, fresh=all(v.fresh for v in vals))
        return Val(first.what, first.where, scalar=any(v.scalar for v in vals), dev=first.dev)
    return UNKNOWN


def keyed(keys: Iterable[ast.expr | str | None], values: Iterable[Val]) -> Val:
    """A dict of ``keys`` (expressions or names) to ``values``: keyed when every key is a string known here."""
    pairs = list(zip(keys, values, strict=True))
    names = [k if isinstance(k, str) else k.value if isinstance(k, ast.Constant) else None for k, _ in pairs]
    element = agree(v for _, v in pairs)
    if pairs and all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
        return Val("dict", element=element, keys=tuple((str(n), v) for n, (_, v) in zip(names, pairs, strict=True)))
    return Val("dict", element=element)


def _unmapped(val: Val) -> Val:
    """``val`` without the items a comprehension over a known tuple keeps (see ``_Flow._mapped``)."""
    return replace(val, items=()) if val.what == "seq" else val


def join(a: Val, b: Val, available: Callable[[], bool] | None) -> Val:
    """The value after two branches; ``available()``: whether the branches decide on CUDA availability.

    Host (or a place not known) in one branch and device in the other is the device when the branches decide on
    availability or a device flag (``if torch.cuda.is_available(): x = x.cuda()``, ``if self.cuda: X = X.cuda()``
    move to the chosen device on a GPU run), unknown otherwise.
    """
    if a is b or a == b:
        return a
    if (a.what == "seq" and a.items) or (b.what == "seq" and b.items):  # a mapped tuple's items: only as a list
        return join(_unmapped(a), _unmapped(b), available)
    if a.what == "none":
        return b
    if b.what == "none":
        return a
    for one, other in ((a, b), (b, a)):
        if (
            one.what == other.what == "dict"
            and not one.keys
            and not other.keys
            and one.element is not None
            and one.element.cache
            and other.element is not None
            and other.element.what == "none"
        ):  # `if key not in cache: cache[key] = t`: the cache holds what the stores put there
            return one
    if a.what == "str" and b.what == "module":  # `if model == "vqvae": model = VQVAE()`: a name, then the module
        return b  # built from it; where a module is used, it is that module (a string fails there anyway)
    if b.what == "str" and a.what == "module":
        return a
    for one, other in ((a, b), (b, a)):
        if (
            one.what == "tuple"
            and len(one.items) == 1
            and other.what in ("seq", "tuple")
            and replace(one.items[0], origin=None, name=None) == replace(other, origin=None, name=None)
        ):  # `if not type(data) in (tuple, list): data = (data,)` of items already in a tuple: they stay as they are
            return other
    for one, other in ((a, b), (b, a)):
        if one.what == "tuple" and one.items and other.what == "seq" and other.element is not None:
            alike = agree(replace(item, origin=None, name=None) for item in one.items)
            if alike.what != "unknown":  # `data = (data,)`, then `if cuda: data = tuple(d.cuda() for d in data)`
                return join(Val("seq", element=alike), other, available)
    for one, other in ((a, b), (b, a)):
        if (
            one.what == "seq"
            and other.what in TENSORISH
            and one.element is not None
            and one.element.where == DEVICE
            and other.where != DEVICE
            and available is not None
            and available()
        ):  # `if cuda: data = tuple(d.cuda() for d in data)`: the GPU run takes the moved items
            return one
    if a.what == "seq" and b.what in TENSORISH:  # `X = [x.to(d) for x in X] if isinstance(X, list) else X.to(d)`:
        return b  # where a tensor is needed, it is the tensor of the other branch (a list there fails anyway)
    if b.what == "seq" and a.what in TENSORISH:
        return a
    for one, other in ((a, b), (b, a)):
        if (
            one.what == "tuple"
            and one.items
            and other.what in TENSORISH
            and all(item.what in TENSORISH and item.where == other.where for item in one.items)
        ):
            # `if not isinstance(data, tuple): data = (data,)`: the items of a tuple or the rows of a tensor, each
            # where that tensor is (what `model(*data)` gets); a tensor is always wrapped, so a 1-tuple of a known
            # tensor stays that 1-tuple (`loss_inputs += (target,)` then adds its items)
            if len(one.items) == 1 and one.items[0].what in TENSORISH:
                return Val("tuple", items=(replace(one.items[0], origin=None),))
            return Val("seq", element=Val("tensor", other.where, dev=other.dev))
    for one, other in ((a, b), (b, a)):
        if (
            one.what == "any"
            and one.where == DEVICE
            and other.what == "unknown"
            and available is not None
            and available()
        ):  # `if use_cuda: net.cuda()` of a model loaded or looked up: moved in place on the GPU run; `mel.cuda()
            return one  # if torch.cuda.is_available() else mel` of a loaded tensor: the moved one on the GPU run
    if a.what != b.what and not {a.what, b.what} <= {"tensor", "output", "any"} | ({"module"} & {a.what, b.what}):
        return UNKNOWN
    if {a.what, b.what} == {"any", "module"}:  # `if args.gpu is not None: model = model.cuda(args.gpu)` of a model
        what = "module"  # built by a name lookup, `else: model = nn.DataParallel(model).cuda()`: a module either way
    else:
        what = a.what if a.what == b.what else "tensor" if {a.what, b.what} <= set(TENSORISH) else "any"
    pick = a
    if a.where == b.where:
        where = a.where
    elif {a.where, b.where} in ({HOST, DEVICE}, {None, DEVICE}) and available is not None and available():
        where = DEVICE  # host (or not known) in one branch, the device in the other: the GPU run takes the move
        pick = a if a.where == DEVICE else b
    else:
        where = None
    if what == "seq" and a.items == b.items and a.element != b.element and NONE in (a.element, b.element):
        return Val("seq", element=b.element if a.element == NONE else a.element)  # empty on one path
    if what == "seq" and not a.items and not b.items and a.element is not None and b.element is not None:
        element = join(a.element, b.element, available)  # `if cuda: data = tuple(d.cuda() for d in data)`
        return Val("seq", element=replace(element, origin=None, name=None) if element.what != "unknown" else None)
    if what in ("seq", "dict", "tuple") and (a.items != b.items or a.element != b.element or a.keys != b.keys):
        return Val(what)
    # `if args.sparse: model = SpGAT(...)` / `else: model = GAT(...)`: a model built on the host either way; the
    # first build stands for both (reported there, and checked for moves after it)
    both_built = what == "module" and where == HOST and a.fresh and b.fresh and a.origin and b.origin
    return Val(
        what,
        where,
        origin=a.origin if a.origin is b.origin or both_built else None,
        name=a.name if a.name == b.name else None,
        scalar=a.scalar or b.scalar,
        dims=min(a.dims, b.dims),
        dev=pick.dev,
        moved_at=pick.moved_at,
        fresh=a.fresh and b.fresh and where == HOST,
        params=a.params if a.params == b.params else None,
        loss=a.loss and b.loss,
        # `if cfg.loss == "bce": return nn.BCEWithLogitsLoss(pos_weight=torch.tensor(...))` / `return nn.MSELoss()`:
        # on the path that builds the weighted loss its weight is on the host
        weight=a.weight if a.weight is b.weight or b.weight is None else b.weight if a.weight is None else None,
        inplace=a.inplace or b.inplace,
        wrapper=a.wrapper and b.wrapper,  # wrapped on one path only: the bare module checks its inputs
        part=a.part if a.part == b.part else None,
        item=a.item and b.item,  # an item of a collated tuple on both paths is still a tensor
        items=a.items if a.items == b.items else (),
        element=a.element if a.element == b.element else None,
    )


def merge(a: dict[str, Val], b: dict[str, Val], available: Callable[[], bool] | None = None) -> dict[str, Val]:
    """The environment after two branches (a name bound in one branch only keeps that binding)."""
    merged = dict(a)
    for key, val in b.items():
        old = a.get(key)
        if old is not val:
            merged[key] = val if old is None else join(old, val, available)
    return merged


#: Finds the function of the file a call runs, for :func:`moves_names`: ``(function, number of leading parameters the
#: call does not pass)``, 1 for a method called on an instance (``self._step(x)``), or ``None``.
Callee = Callable[[ast.Call], "tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None"]


def moves_items(
    loop: ast.For | ast.AsyncFor | ast.comprehension, body: list[ast.stmt] | None, callee: Callee | None = None
) -> bool:
    """Whether the loop's body moves some of the names its target binds.

    ``x.to(device)``, ``batch[0].cuda()``, ``y = Y.T.reshape(-1)`` then ``y.to(device)``, ``[{k: v.to(device) for
    k, v in t.items()} for t in targets]``: its author knows the loader's items arrive on the host. With ``callee``,
    also a function of the file the body hands them to, when it moves the parameters they are bound to (see
    :func:`moves_names`).
    """
    return moves_names({n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}, body, callee)


def moves_names(names: set[str], body: list[ast.stmt] | None, callee: Callee | None = None, depth: int = 0) -> bool:
    """Whether the statements ``body`` move some of ``names`` (or names made from them); see :func:`moves_items`.

    Reading one of ``names`` itself with ``.numpy()`` (``y.numpy()``, ``labels.data.numpy()``) counts too: only a
    host tensor has one. With ``callee`` (which finds the function of the file a call runs), a call that passes
    some of the names to a function that moves the parameters they are bound to counts as well
    (``pred, true = self._process_one_batch(batch_x, batch_y)`` whose body does ``batch_x.float().to(self.device)``),
    two calls deep at most.
    """
    given = set(names)
    for stmt in body or ():
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy":
                receiver: ast.AST = node.func.value
                while isinstance(receiver, ast.Attribute):
                    receiver = receiver.value
                if isinstance(receiver, ast.Name) and receiver.id in given and not node.args:
                    return True
    names = set(names)
    assigns = [n for stmt in body or () for n in ast.walk(stmt) if isinstance(n, ast.Assign | ast.comprehension)]
    for _ in range(3):  # names made from the items (`y = Y.T.reshape(-1)`, `for k, v in t.items()`) hold them too
        for assign in assigns:
            value = assign.iter if isinstance(assign, ast.comprehension) else assign.value
            if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(value)):
                bound = [assign.target] if isinstance(assign, ast.comprehension) else assign.targets
                names |= {t.id for target in bound for t in ast.walk(target) if isinstance(t, ast.Name)}
    for stmt in body or ():
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MOVES:
                receiver = node.func.value
                while isinstance(receiver, ast.Subscript | ast.Attribute | ast.Call):
                    receiver = receiver.func if isinstance(receiver, ast.Call) else receiver.value
                if isinstance(receiver, ast.Name) and receiver.id in names:
                    return True
    if callee is None or depth >= 2:
        return False
    for stmt in body or ():
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and _passes_names_moved(node, names, callee, depth):
                return True
    return False


def _passes_names_moved(call: ast.Call, names: set[str], callee: Callee, depth: int) -> bool:
    """Whether ``call`` hands some of ``names`` to a function of the file that moves what it receives there."""
    passed = [isinstance(a, ast.Name) and a.id in names for a in call.args]
    passed_keywords = {k.arg for k in call.keywords if isinstance(k.value, ast.Name) and k.value.id in names}
    if not any(passed) and not passed_keywords:
        return False
    found = callee(call)
    if found is None:
        return False
    func, skipped = found
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]][skipped:]
    if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(params):
        return False
    received = {param for param, hit in zip(params, passed, strict=False) if hit}
    received |= {name for name in passed_keywords if name is not None}
    received &= {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    return bool(received) and moves_names(received, func.body, callee, depth + 1)


def short(text: str) -> str:
    """``text`` on one line, at most 40 characters, for messages."""
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."


def line(node: ast.AST) -> int:
    """The node's first line (0 without a position)."""
    return getattr(node, "lineno", 0)


_KEEPS: weakref.WeakKeyDictionary[ast.AST, dict[tuple[object, ...], frozenset[str]]] = weakref.WeakKeyDictionary()


#: calls that write what they are given to a file and leave it where it is
_SAVES = frozenset({"torch.save", "ferry.save"})


def keeping_parameters(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    local: Mapping[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
    reading: Callable[[str], bool] | None = None,
    _seen: frozenset[ast.AST] = frozenset(),
) -> frozenset[str]:
    """Parameters that ``func`` only reads.

    Read means: called, given to harmless builtins, used through methods and attributes that neither move a
    module nor keep it (``model.train()``, ``model(x)``, ``model.parameters()``, a method ``reading(name)`` says
    only reads), or handed to a function of ``local`` (the file's functions) that only reads it in turn.
    """
    key = (local is not None, reading is not None, tuple(sorted(k for k in local or () if "." in k)))
    known = _KEEPS.setdefault(func, {})
    if key in known and not _seen:
        return known[key]
    args = func.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(func):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    kept = set(names)
    for node in ast.walk(func):
        if not (isinstance(node, ast.Name) and node.id in kept):
            continue
        parent = parents.get(node)
        if isinstance(node.ctx, ast.Store) and isinstance(parent, ast.Assign) and node in parent.targets:
            continue  # `beta = torch.cat([zero, beta])`: the name now holds a new value; the caller's is untouched
        if not isinstance(node.ctx, ast.Load):
            kept.discard(node.id)
        elif isinstance(parent, ast.Call) and parent.func is node:
            continue
        elif isinstance(parent, ast.Attribute):
            grand = parents.get(parent)
            safe = parent.attr in SAFE_MODULE_USES or (reading is not None and reading(parent.attr))
            if isinstance(parent.ctx, ast.Store) or (isinstance(grand, ast.Call) and grand.func is parent and not safe):
                kept.discard(node.id)
        elif (
            not isinstance(parent, ast.Call)
            or not (
                (isinstance(parent.func, ast.Name) and parent.func.id in HARMLESS_READS)
                or (dotted(parent.func) in _SAVES and parent.args[:1] == [node])  # `torch.save(model, path)` reads it
                or (dotted(parent.func) in COPIES and parent.args[:1] == [node])  # `self.ema = deepcopy(model)` too
                or kept_by(parent, node, local, reading, _seen | {func})
            )
        ):
            kept.discard(node.id)
    if not _seen:
        known[key] = frozenset(kept)
    return frozenset(kept)


def kept_by(
    call: ast.Call,
    arg: ast.expr,
    local: Mapping[str, ast.FunctionDef | ast.AsyncFunctionDef] | None,
    reading: Callable[[str], bool] | None,
    seen: frozenset[ast.AST] = frozenset(),
) -> bool:
    """Whether ``call`` hands ``arg`` to a function of ``local`` that only reads that parameter.

    ``local``: the file's functions (see :func:`keeping_parameters`), and a class's methods as ``self.<name>``
    (then the first parameter is ``self``, which no call passes).
    """
    if local is None:
        return False
    func = call.func
    name = (
        f"{func.value.id}.{func.attr}" if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
    )
    if isinstance(func, ast.Name):
        name = func.id
    if name not in local:
        return False
    callee = local[name]
    if callee in seen or len(seen) > 4:
        return False
    params = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]][1 if "." in name else 0 :]
    keeps = keeping_parameters(callee, local, reading, seen)
    for i, given in enumerate(call.args):
        if given is arg:
            return i < len(params) and params[i] in keeps
    return any(k.value is arg and k.arg in keeps for k in call.keywords)


_BOUND: weakref.WeakKeyDictionary[ast.AST, frozenset[str]] = weakref.WeakKeyDictionary()


def bound_names(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> frozenset[str]:
    """Names the function binds itself, its parameters included (local names, which hide globals).

    Read once per function (the trees do not change while they are linted).
    """
    found = _BOUND.get(func)
    if found is None:
        found = _BOUND[func] = frozenset(_bound_names(func))
    return found


def _bound_names(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    args = func.args
    names: set[str] = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    stack: list[ast.AST] = list(func.body) if isinstance(func.body, list) else [func.body]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            continue
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        if not isinstance(node, ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return names


#: Attributes that a string, a list or a number does not have, and a tensor does (``.to`` and ``.cuda`` included).
_TENSOR_USES = frozenset(
    """
    to cuda cpu shape size view reshape permute transpose unsqueeze squeeze flatten contiguous long int bool float
    half double argmax argmin softmax log_softmax masked_fill numel dim ndim detach item tolist numpy expand repeat
    index_select gather clamp t type_as new_zeros new_ones masked_select topk matmul norm sum mean max min eq ne
    device dtype
    """.split()
)


def tensor_use(ctx: FileContext, node: ast.Name, peek: Callable[[ast.expr], Val]) -> bool:
    """Whether the name ``node`` is used here as only a tensor is.

    A tensor attribute or method (``x.size(0)``, ``x.cuda()``), arithmetic or a comparison with something other than
    a literal (``score += bias``, ``preds == labels``), a multi-dimensional index (``x[:, 0]``), an argument of a
    ``torch`` function, the first input of a module (``model(x)``, ``model((x, y), mode)``) or any input of a loss.
    ``peek`` gives what a callee is.
    """
    parent = ctx.parent(node)
    if isinstance(parent, ast.Attribute):
        return parent.attr in _TENSOR_USES
    if isinstance(parent, ast.BinOp | ast.AugAssign):
        other = parent.right if isinstance(parent, ast.BinOp) and parent.left is node else getattr(parent, "left", None)
        if isinstance(parent, ast.AugAssign):
            other = parent.value if parent.target is not node else None
        return other is not None and not isinstance(other, ast.Constant | ast.JoinedStr)
    if isinstance(parent, ast.Compare):
        others = [parent.left, *parent.comparators]
        return all(not isinstance(o, ast.Constant | ast.JoinedStr) for o in others if o is not node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return isinstance(parent.slice, ast.Tuple)
    if isinstance(parent, ast.keyword):
        call = ctx.parent(parent)
        named = (parent.arg or "") in LOSS_INPUTS or loss_name(call.func if isinstance(call, ast.Call) else None)
        return named or (isinstance(call, ast.Call) and (ctx.qualname(call.func) or "").startswith("torch."))
    holder: ast.AST | None = parent
    if isinstance(parent, ast.Tuple | ast.List):
        holder = ctx.parent(parent)
        node_or_seq: ast.AST = parent
    else:
        node_or_seq = node
    if not isinstance(holder, ast.Call) or node_or_seq not in holder.args:
        return False
    if (ctx.qualname(holder.func) or "").startswith("torch."):
        return True
    callee = peek(holder.func)
    if (callee.what == "module" and callee.loss) or loss_name(holder.func):
        return True
    # a module, or a value that is a module or a tensor (`self.model = model.to(device)`): called, it is a module
    return callee.what in ("module", "any") and holder.args[0] is node_or_seq


def loader_name(node: ast.Name | ast.Attribute) -> bool:
    """A name that says it holds batches or samples of a dataset.

    ``train_loader``, ``self.val_dataloader``, ``train_dl``, ``data_iter``, ``train_iterator``, ``train_set``,
    ``test_dataset``.
    """
    last = (node.id if isinstance(node, ast.Name) else node.attr).lower()
    return (
        "loader" in last
        or "dataset" in last
        or last in ("dl", "data_iter")
        or last.endswith(("_dl", "_iter", "_iterator", "_set", "_batches"))
    )


def loss_name(func: ast.expr | None) -> bool:
    """``criterion``, ``loss_fn``, ``self.compute_loss``: a callee named as a loss, whose arguments are tensors."""
    name = (func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "").lower()
    return "loss" in name or "criterion" in name


def is_static(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A method decorated with ``@staticmethod`` alone: a function that no call passes ``self`` to."""
    return len(func.decorator_list) == 1 and dotted(func.decorator_list[0]) == "staticmethod"


def property_setter(classes: Iterable[ast.ClassDef], name: str) -> bool:
    """Whether one of ``classes`` defines ``name`` as a property with a setter (Tacotron's ``model.r = r``).

    Setting it runs the setter, which sets what it sets on the model's own tensors: no layer is replaced.
    """
    return any(
        isinstance(m, ast.FunctionDef)
        and m.name == name
        and any(dotted(d) == f"{name}.setter" for d in m.decorator_list)
        for cls in classes
        for m in cls.body
    )


def int_literal(node: ast.expr) -> int | None:
    """The value of an integer literal, negative ones included (``-1``); ``None`` for anything else."""
    negative = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    inner = node.operand if isinstance(node, ast.UnaryOp) and negative else node
    if isinstance(inner, ast.Constant) and type(inner.value) is int:
        return -inner.value if negative else inner.value
    return None


def new_memory(call: ast.Call) -> bool:
    """A legacy constructor call that makes new memory: sizes (``torch.Tensor(n, k)``) or a literal list.

    Not a conversion of what the caller passed (``torch.LongTensor(seqs)``, ``torch.Tensor(x)``), which this cannot
    tell from sizes with one argument.
    """
    if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    if len(call.args) >= 2:
        return True
    return len(call.args) == 1 and isinstance(call.args[0], ast.List | ast.Tuple)
