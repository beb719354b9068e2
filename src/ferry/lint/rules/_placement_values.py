"""What the placement analysis knows of a value (:class:`Val`), how branches merge, and its tables of PyTorch names.

Part of :mod:`ferry.lint.rules._placement` (not a rule).
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

HOST = "host"
DEVICE = "device"
KEEP = "keep"  # `.to(dtype)`: the device does not change

#: Tensor-like values: real tensors and module outputs (a tensor, or a tuple/dict/ModelOutput of tensors).
TENSORISH = ("tensor", "output")

FACTORIES = frozenset(
    """
    zeros ones empty full rand randn randint randperm arange range linspace logspace eye empty_strided tril_indices
    triu_indices hann_window hamming_window bartlett_window blackman_window kaiser_window
    """.split()
)
LIKE_FACTORIES = frozenset(
    "zeros_like ones_like empty_like full_like rand_like randn_like randint_like empty_strided_like".split()
)
LEGACY_HOST = frozenset(
    f"torch.{name}"
    for name in """
    Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor ShortTensor CharTensor ByteTensor
    BoolTensor
    """.split()
)
DTYPES = frozenset(
    """
    float float32 float64 float16 half bfloat16 double int int8 int16 int32 int64 long short uint8 uint16 uint32
    uint64 bool complex64 complex128 cfloat cdouble chalf complex32 float8_e4m3fn float8_e5m2 qint8 quint8 qint32
    """.split()
)
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
#: torch.nn classes that hold parameters or buffers (an ``InstanceNorm`` does only with ``affine=True``).
PARAMETERIZED = frozenset(
    """
    Linear Bilinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d BatchNorm1d BatchNorm2d
    BatchNorm3d SyncBatchNorm LayerNorm GroupNorm RMSNorm Embedding EmbeddingBag RNN LSTM GRU RNNCell LSTMCell GRUCell
    MultiheadAttention Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer
    TransformerDecoderLayer PReLU
    """.split()
)
#: torch.nn classes without parameters or buffers: they run on whatever device their input is on.
PARAMETERLESS = frozenset(
    """
    Identity ReLU ReLU6 GELU SiLU Mish Sigmoid Tanh Softmax Softmax2d LogSoftmax Softmin LeakyReLU ELU CELU SELU
    Hardtanh Hardswish Hardsigmoid Hardshrink Softshrink Tanhshrink Softsign Softplus LogSigmoid GLU RReLU Threshold
    Flatten Unflatten Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout MaxPool1d MaxPool2d
    MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d
    AdaptiveMaxPool2d AdaptiveMaxPool3d LPPool1d LPPool2d MaxUnpool1d MaxUnpool2d MaxUnpool3d Upsample
    UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle ChannelShuffle ZeroPad1d ZeroPad2d ZeroPad3d
    ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d
    ReplicationPad2d ReplicationPad3d CircularPad1d CircularPad2d CircularPad3d CosineSimilarity PairwiseDistance
    Fold Unfold LocalResponseNorm CrossMapLRN2d
    """.split()
)
#: Loss classes whose first positional parameter is ``weight``.
WEIGHT_FIRST = frozenset(
    "CrossEntropyLoss NLLLoss NLLLoss2d BCELoss BCEWithLogitsLoss MultiLabelSoftMarginLoss".split()
)
#: Functional losses (``ctc_loss`` is left out: its targets and lengths may stay on the CPU).
LOSS_FUNCTIONS = frozenset(
    """
    cross_entropy nll_loss binary_cross_entropy binary_cross_entropy_with_logits mse_loss l1_loss smooth_l1_loss
    huber_loss kl_div poisson_nll_loss gaussian_nll_loss cosine_embedding_loss margin_ranking_loss
    hinge_embedding_loss multilabel_margin_loss multilabel_soft_margin_loss multi_margin_loss soft_margin_loss
    triplet_margin_loss
    """.split()
)
#: Methods that move a module in place (and return it) or a tensor (returning the moved copy).
MOVES = frozenset({"to", "cuda", "cpu", "xpu", "mps", "npu", "hpu", "ipu", "to_empty", "type"})
#: Module methods that return the module itself without moving it.
SAME_MODULE = frozenset({"eval", "train", "half", "float", "double", "bfloat16", "requires_grad_", "share_memory"})
#: What may be done with a module without it being moved elsewhere (for "never moved": anything else counts).
SAFE_MODULE_USES = SAME_MODULE | frozenset(
    """
    parameters named_parameters buffers named_buffers modules named_modules children named_children state_dict
    load_state_dict zero_grad forward training weight bias num_parameters apply
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
#: DataLoader classes: iterating one gives batches of tensors made by its dataset, on the host.
LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
#: Datasets whose items are slices of the tensors they are given (on those tensors' device).
TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
#: Attributes of a tensor that are not tensors.
NOT_TENSOR_ATTRIBUTES = frozenset(
    """
    shape dtype ndim is_cuda is_cpu is_mps is_meta requires_grad grad_fn layout names is_leaf is_sparse is_quantized
    itemsize nbytes
    """.split()
)
#: Attributes of a tensor that are tensors on the same device.
SAME_DEVICE_ATTRIBUTES = frozenset({"data", "T", "mT", "H", "mH", "real", "imag"})
#: Names that hold the chosen device.
DEVICE_NAMES = frozenset(
    "device dev torch_device cuda_device gpu_device target_device compute_device train_device training_device".split()
)
#: Owners of a ``.device`` attribute that is a configured device (``args.device``), not a tensor's.
CONFIG_OWNERS = frozenset(
    """
    args opt opts option options cfg config conf hparams hp params settings flags accelerator fabric trainer
    training_args train_args runner
    """.split()
)
DEVICE_CALLS = frozenset(
    {
        "torch.device",
        "torch.cuda.current_device",
        "torch.accelerator.current_accelerator",
        "ferry.pick_device",
        "ferry.devices.pick_device",
    }
)
ACCELERATORS = frozenset({"cuda", "mps", "xpu", "npu", "hpu", "mtia", "gpu"})


@dataclass(frozen=True)
class Val:
    """What the analysis knows of a value.

    Attributes:
        what: ``"tensor"``, ``"output"`` (what a module returned), ``"module"``, ``"any"`` (moved, kind unknown),
            ``"device"``, ``"seq"``, ``"dict"``, ``"tuple"``, ``"number"``, ``"str"``, ``"other"``, ``"dataset"``
            (a ``TensorDataset``), ``"loader"`` (a ``DataLoader``), ``"batch"`` (what iterating a loader gives: a
            tensor or a tuple, list or dict of tensors) or ``"unknown"``.
        where: :data:`HOST`, :data:`DEVICE` or ``None`` (unknown).
        origin: The statement that bound it (reported instead of the use, so the fix goes where the value is made).
        name: The name it was bound to, for messages.
        scalar: A host tensor that may have zero dimensions (it then mixes with device tensors without error).
        items: For ``"tuple"``.
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
    """

    what: str = "unknown"
    where: str | None = None
    origin: ast.stmt | None = None
    name: str | None = None
    scalar: bool = False
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


UNKNOWN = Val()
NUMBER = Val("number")
STRING = Val("str")
OTHER = Val("other")


def agree(vals: Iterable[Val]) -> Val:
    """One value for all of ``vals`` (the items of a list literal): the common one, or unknown."""
    vals = list(vals)
    if not vals:
        return UNKNOWN
    first = vals[0]
    if all(v == first for v in vals):
        return first
    if all(v.what == first.what and v.where == first.where for v in vals):
        return Val(first.what, first.where, scalar=any(v.scalar for v in vals), dev=first.dev)
    return UNKNOWN


def join(a: Val, b: Val, available: Callable[[], bool] | None) -> Val:
    """The value after two branches; ``available()``: whether the branches decide on CUDA availability.

    Host in one branch and device in the other is the device when the branches decide on availability (``if
    torch.cuda.is_available(): x = x.cuda()`` moves to the chosen device), unknown otherwise.
    """
    if a is b or a == b:
        return a
    if a.what != b.what and not {a.what, b.what} <= {"tensor", "output", "any"}:
        return UNKNOWN
    what = a.what if a.what == b.what else "any"
    pick = a
    if a.where == b.where:
        where = a.where
    elif {a.where, b.where} == {HOST, DEVICE} and available is not None and available():
        where = DEVICE
        pick = a if a.where == DEVICE else b
    else:
        where = None
    if what in ("seq", "dict", "tuple") and (a.items != b.items or a.element != b.element):
        return Val(what)
    return Val(
        what,
        where,
        origin=a.origin if a.origin is b.origin else None,
        name=a.name if a.name == b.name else None,
        scalar=a.scalar or b.scalar,
        dev=pick.dev,
        moved_at=pick.moved_at,
        fresh=a.fresh and b.fresh and where == HOST,
        params=a.params if a.params == b.params else None,
        loss=a.loss and b.loss,
        weight=a.weight if a.weight is b.weight else None,
        inplace=a.inplace or b.inplace,
        wrapper=a.wrapper or b.wrapper,
    )


def merge(a: dict[str, Val], b: dict[str, Val], available: Callable[[], bool] | None = None) -> dict[str, Val]:
    """The environment after two branches (a name bound in one branch only keeps that binding)."""
    merged = dict(a)
    for key, val in b.items():
        old = a.get(key)
        if old is not val:
            merged[key] = val if old is None else join(old, val, available)
    return merged


def moves_items(loop: ast.For | ast.AsyncFor | ast.comprehension, body: list[ast.stmt] | None) -> bool:
    """Whether the loop's body moves some of the names its target binds.

    ``x.to(device)``, ``batch[0].cuda()``: its author knows the loader's items arrive on the host.
    """
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    for stmt in body or ():
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MOVES:
                receiver: ast.AST = node.func.value
                while isinstance(receiver, ast.Subscript | ast.Attribute | ast.Call):
                    receiver = receiver.func if isinstance(receiver, ast.Call) else receiver.value
                if isinstance(receiver, ast.Name) and receiver.id in names:
                    return True
    return False


def short(text: str) -> str:
    """``text`` on one line, at most 40 characters, for messages."""
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."


def line(node: ast.AST) -> int:
    """The node's first line (0 without a position)."""
    return getattr(node, "lineno", 0)


_KEEPS: weakref.WeakKeyDictionary[ast.AST, dict[tuple[bool, bool], frozenset[str]]] = weakref.WeakKeyDictionary()


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
    key = (local is not None, reading is not None)
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
        if not isinstance(node.ctx, ast.Load):
            kept.discard(node.id)
        elif isinstance(parent, ast.Call) and parent.func is node:
            continue
        elif isinstance(parent, ast.Attribute):
            grand = parents.get(parent)
            safe = parent.attr in SAFE_MODULE_USES or (reading is not None and reading(parent.attr))
            if isinstance(parent.ctx, ast.Store) or (isinstance(grand, ast.Call) and grand.func is parent and not safe):
                kept.discard(node.id)
        elif not isinstance(parent, ast.Call) or not (
            (isinstance(parent.func, ast.Name) and parent.func.id in HARMLESS_READS)
            or kept_by(parent, node, local, reading, _seen | {func})
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

    ``local``: the file's functions (see :func:`keeping_parameters`).
    """
    if local is None or not isinstance(call.func, ast.Name) or call.func.id not in local:
        return False
    callee = local[call.func.id]
    if callee in seen or len(seen) > 4:
        return False
    params = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
    keeps = keeping_parameters(callee, local, reading, seen)
    for i, given in enumerate(call.args):
        if given is arg:
            return i < len(params) and params[i] in keeps
    return any(k.value is arg and k.arg in keeps for k in call.keywords)


def bound_names(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Names the function binds itself, its parameters included (local names, which hide globals)."""
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
