"""What the linter knows of PyTorch's API: one table per fact, shared by every rule (checked against PyTorch 2.13).

Pure data, no torch import: ``ferry lint`` runs where torch is not installed. Names under ``torch`` are bare
(``zeros`` for ``torch.zeros``, ``Linear`` for ``torch.nn.Linear``) where the rules match the last part of a call,
and dotted where they match the whole path. A rule that needs a narrower (or wider) set derives it from these in its
own file and says why.
"""

from __future__ import annotations

# -- devices ----------------------------------------------------------------------------------------------------

#: Device types as code writes them (``"cuda:0"``, ``torch.device("mps")``); ``npu`` comes from an out-of-tree
#: backend (torch_npu).
DEVICE_TYPES = frozenset({"cuda", "cpu", "mps", "xpu", "npu", "hpu", "meta", "mtia", "ipu"})

#: Device types that are accelerators: tensors there cannot be read by NumPy, and the host waits for them.
ACCELERATORS = DEVICE_TYPES - {"cpu", "meta"}

#: Words that make a name speak of devices (``use_gpu``, ``args.cuda``, ``no_cpu``, ``device``), found as parts of
#: lowercased names.
DEVICE_WORDS = frozenset({"cuda", "gpu", "device", "cpu", "mps", "accelerator", "xpu", "npu"})

#: Flags whose name says the run uses the GPU (``use_cuda``, ``args.cuda``, ``self.use_gpu``): ``if`` them, the branch
#: runs on a GPU; their ``else`` runs only without one.
GPU_FLAGS = frozenset({"cuda", "use_cuda", "use_gpu", "with_cuda", "enable_cuda", "on_gpu"})

#: Calls that give the device to use (``torch.cuda.current_device()`` gives a CUDA index).
DEVICE_CALLS = frozenset({"torch.device", "torch.cuda.current_device", "torch.accelerator.current_accelerator"})

#: Calls whose truth means "CUDA (or some accelerator) is here".
AVAILABILITY_CHECKS = frozenset(
    {
        "torch.cuda.is_available",
        "torch.cuda.device_count",
        "torch.cuda.is_initialized",
        "torch.backends.cuda.is_built",
        "torch.accelerator.is_available",
        "torch.accelerator.device_count",
        "torch.backends.mps.is_available",
        "torch.xpu.is_available",
    }
)

#: ``torch.cuda.<name>`` that fail without CUDA: a function calling them unguarded is CUDA-only code.
CUDA_ONLY_CALLS = frozenset(
    """
    synchronize Event Stream stream current_stream default_stream set_stream max_memory_allocated memory_allocated
    max_memory_reserved memory_reserved reset_peak_memory_stats reset_max_memory_allocated get_device_properties
    get_device_name get_device_capability set_device current_device device graph CUDAGraph make_graphed_callables
    nvtx mem_get_info memory_stats caching_allocator_alloc
    """.split()
)

# -- making tensors ---------------------------------------------------------------------------------------------

#: ``torch.<name>`` that make a tensor from sizes or ranges, on the CPU unless given ``device=`` (or a default
#: device is set).
FACTORIES = frozenset(
    """
    zeros ones empty full rand randn randint randperm arange range linspace logspace eye empty_strided tril_indices
    triu_indices hann_window hamming_window bartlett_window blackman_window kaiser_window
    """.split()
)

#: NumPy functions that convert a tensor through ``Tensor.__array__``, that is ``Tensor.numpy()``: they raise on a
#: tensor on an accelerator.
NUMPY_CONVERSIONS = frozenset({"numpy.asarray", "numpy.array", "numpy.asanyarray", "numpy.ascontiguousarray"})
#: Prefixes of functions that turn every array-like argument into a NumPy array (``Tensor.__array__``, ``.numpy()``).
ARRAY_CONVERTING = ("sklearn.metrics.",)

#: ``torch.<name>`` that make a tensor from data, on the CPU unless given ``device=`` (``as_tensor`` and ``asarray``
#: leave a tensor they are given where it is).
DATA_FACTORIES = frozenset({"tensor", "as_tensor", "asarray"})

#: ``torch.<name>`` that wrap a NumPy array: always on the CPU, no ``device=``.
NUMPY_FACTORIES = frozenset({"from_numpy"})

#: ``torch.<name>`` that make a tensor shaped like another one, on its device unless given ``device=``.
LIKE_FACTORIES = frozenset("zeros_like ones_like empty_like full_like rand_like randn_like randint_like".split())

#: Legacy constructors ``torch.<name>(...)``: a tensor of that type on the CPU, no ``device=`` (the CUDA ones are
#: ``torch.cuda.<name>``).
LEGACY_CONSTRUCTORS = frozenset(
    """
    Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor ShortTensor CharTensor ByteTensor
    BoolTensor
    """.split()
)
#: Legacy constructors by their full name (``torch.FloatTensor``): tensors on the host, sparse ones too
#: (``torch.sparse.FloatTensor(indices, values, size)``, pygcn's and GIN's adjacency).
LEGACY_HOST = frozenset(f"torch.{name}" for name in LEGACY_CONSTRUCTORS) | frozenset(
    f"torch.sparse.{name}" for name in LEGACY_CONSTRUCTORS - {"Tensor"}
)

#: Static methods of ``torch.nn`` classes that make a tensor on ``device=`` (default: the CPU).
MASK_FACTORIES = frozenset(
    {
        "torch.nn.Transformer.generate_square_subsequent_mask",
        "torch.nn.modules.transformer.Transformer.generate_square_subsequent_mask",
    }
)

# -- moves and conversions --------------------------------------------------------------------------------------

#: Methods that move a tensor or a module to an accelerator (``npu()``/``hpu()`` are added by out-of-tree backends;
#: there is no ``mps()``).
ACCELERATOR_MOVES = frozenset({"cuda", "xpu", "ipu", "mtia", "npu", "hpu"})

#: Methods that may move a tensor (returning a moved copy) or a module (in place, returning it): ``to`` may only
#: convert the dtype, ``type`` moves a tensor given a ``torch.cuda.*Tensor`` type (a module's only converts),
#: ``to_empty`` is for modules.
MOVES = ACCELERATOR_MOVES | {"to", "cpu", "to_empty", "type"}
#: Methods a module class overrides when it moves its own attributes (a module's ``type`` only converts the dtype).
MOVING_METHODS = (MOVES - {"type"}) | {"_apply", "_load_from_state_dict"}

#: Methods of tensors and modules that convert floating-point values to another dtype, on the same device.
DTYPE_CASTS = frozenset({"half", "float", "double", "bfloat16"})

#: Module methods that return the module itself, left on its device (``apply`` runs a function on every
#: submodule).
SAME_PLACE_METHODS = DTYPE_CASTS | {"eval", "train", "requires_grad_", "share_memory", "apply"}

#: Module methods that return the module itself (``model.to(device).eval()`` is still ``model``).
MODULE_SELF_METHODS = MOVES | SAME_PLACE_METHODS

#: ``torch.<name>`` dtypes.
DTYPES = frozenset(
    """
    float float32 float64 float16 half bfloat16 double int int8 int16 int32 int64 long short uint8 uint16 uint32
    uint64 bool complex32 complex64 complex128 chalf cfloat cdouble float8_e4m3fn float8_e4m3fnuz float8_e5m2
    float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn_x2 qint8 quint8 qint32 quint4x2 quint2x4 bits1x8 bits2x4 bits4x2
    bits8 bits16
    """.split()
)

# -- what gives tensors -----------------------------------------------------------------------------------------

#: ``torch.<name>`` that do not return tensors (everything else directly under torch, torch.linalg, torch.fft,
#: torch.special and torch.nn.functional does).
NOT_TENSOR_FUNCTIONS = frozenset(
    """
    device dtype load save no_grad enable_grad inference_mode set_grad_enabled is_grad_enabled manual_seed seed
    initial_seed set_default_dtype get_default_dtype set_default_device get_default_device set_default_tensor_type
    set_printoptions set_num_threads get_num_threads set_num_interop_threads get_num_interop_threads is_tensor
    is_storage is_floating_point is_complex is_nonzero numel use_deterministic_algorithms
    are_deterministic_algorithms_enabled set_float32_matmul_precision get_float32_matmul_precision compile Generator
    Size finfo iinfo typename broadcast_shapes autocast layout memory_format set_anomaly_enabled
    set_deterministic_debug_mode get_device_module vmap cond export
    """.split()
)

#: Submodules of torch whose functions do not make tensors (or make things the linter does not track).
NOT_TENSOR_SUBMODULES = frozenset(
    """
    cuda backends distributed utils optim jit autograd amp onnx hub multiprocessing testing profiler fx export
    library overrides quantization ao package random serialization accelerator mps xpu compiler func _dynamo _C
    _inductor distributions nn types version storage cpu
    """.split()
)

#: Prefixes of functions that take and give tensors (a tuple, for ``str.startswith``).
TENSOR_SUBMODULES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.", "torch.nn.init.")

#: Tensor methods that return something other than a tensor.
NOT_TENSOR_METHODS = frozenset(
    """
    item tolist numpy size dim numel nelement ndimension data_ptr element_size get_device is_contiguous is_pinned
    is_floating_point is_complex is_shared is_sparse stride storage untyped_storage backward register_hook equal
    allclose __len__ __repr__ __str__ __format__ __bool__ __int__ __float__ __index__ __array__ dim_order
    storage_offset has_names type_as_str retain_grad
    """.split()
)

#: Tensor attributes that are tensors, on the tensor's device (``grad`` may be ``None``).
TENSOR_ATTRIBUTES = frozenset({"data", "T", "mT", "H", "mH", "grad", "real", "imag"})

#: Tensor attributes that are not tensors.
NOT_TENSOR_ATTRIBUTES = frozenset(
    """
    shape dtype ndim is_cuda is_cpu is_mps is_meta requires_grad grad_fn layout names is_leaf is_sparse is_quantized
    itemsize nbytes
    """.split()
)

#: Calls that give their first argument back as it is, on its device: the deprecated ``Variable`` wrapper.
PASS_THROUGH = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

#: Classes whose instances are tensors (calling one makes a tensor; subclassing one makes a tensor class).
TENSOR_CLASSES = frozenset(
    {"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer", "torch.FloatTensor"}
)

# -- layers -----------------------------------------------------------------------------------------------------

#: ``torch.nn`` classes that hold parameters or buffers (an ``InstanceNorm`` does only with ``affine=True`` or
#: ``track_running_stats=True``; a lazy one makes them at its first call, where its placeholders are).
LAYERS_WITH_PARAMETERS = frozenset(
    """
    Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d
    LazyConv2d LazyConv3d BatchNorm1d BatchNorm2d BatchNorm3d LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d
    SyncBatchNorm LayerNorm GroupNorm RMSNorm Embedding EmbeddingBag RNN LSTM GRU RNNCell LSTMCell GRUCell
    MultiheadAttention Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer
    TransformerDecoderLayer PReLU
    """.split()
)

#: ``torch.nn`` classes without parameters or buffers: they run on whatever device their input is on.
LAYERS_WITHOUT_PARAMETERS = frozenset(
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

#: ``torch.nn`` classes that behave differently in training and in eval mode: dropout, batch statistics
#: (``InstanceNorm`` with ``track_running_stats=True``), ``RReLU``'s random slopes, and the layers with a
#: ``dropout`` argument.
MODE_DEPENDENT_LAYERS = frozenset(
    """
    Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout BatchNorm1d BatchNorm2d BatchNorm3d
    LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d SyncBatchNorm InstanceNorm1d InstanceNorm2d InstanceNorm3d
    LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d RReLU RNN LSTM GRU MultiheadAttention Transformer
    TransformerEncoder TransformerDecoder TransformerEncoderLayer TransformerDecoderLayer
    """.split()
)

#: ``torch.nn`` layers that behave the same in training and in eval mode.
MODE_FREE_LAYERS = (LAYERS_WITH_PARAMETERS | LAYERS_WITHOUT_PARAMETERS) - MODE_DEPENDENT_LAYERS

# -- losses -----------------------------------------------------------------------------------------------------

#: ``torch.nn.functional`` losses.
LOSS_FUNCTIONS = frozenset(
    """
    cross_entropy nll_loss binary_cross_entropy binary_cross_entropy_with_logits mse_loss l1_loss smooth_l1_loss
    huber_loss kl_div poisson_nll_loss gaussian_nll_loss cosine_embedding_loss margin_ranking_loss
    hinge_embedding_loss multilabel_margin_loss multilabel_soft_margin_loss multi_margin_loss soft_margin_loss
    triplet_margin_loss triplet_margin_with_distance_loss ctc_loss
    """.split()
)

#: Losses (classes and functions) whose targets and lengths may stay on the CPU.
HOST_TARGET_LOSSES = frozenset({"CTCLoss", "ctc_loss"})

#: Keywords of the tensors a loss is called with (they must share one device).
LOSS_INPUTS = frozenset({"input", "target", "input1", "input2", "var", "anchor", "positive", "negative"})

#: Keywords of the tensors a loss is built with (classes) or also given (functions): on the inputs' device too.
LOSS_WEIGHTS = frozenset({"weight", "pos_weight"})

#: Loss classes whose first positional parameter is ``weight``.
WEIGHT_FIRST_LOSSES = frozenset(
    "CrossEntropyLoss NLLLoss NLLLoss2d BCELoss BCEWithLogitsLoss MultiLabelSoftMarginLoss".split()
)

# -- autograd ---------------------------------------------------------------------------------------------------

#: Context managers and decorators that switch autograd off or set it explicitly.
GRAD_MODES = frozenset(
    f"{where}.{name}"
    for where in ("torch", "torch.autograd", "torch.autograd.grad_mode")
    for name in ("no_grad", "inference_mode", "enable_grad", "set_grad_enabled")
)

#: Those of :data:`GRAD_MODES` that switch autograd off.
NO_GRAD = frozenset(name for name in GRAD_MODES if name.endswith((".no_grad", ".inference_mode")))

# -- optimizers, wrappers and compilers -------------------------------------------------------------------------

#: Optimizers that create their state when they are built (Adagrad's ``sum``), on the parameters' device then;
#: every other ``torch.optim`` optimizer creates it at its first ``step()``.
EAGER_STATE_OPTIMIZERS = frozenset({"torch.optim.Adagrad", "torch.optim.adagrad.Adagrad"})

#: Wrappers that run a module on several devices; their ``state_dict()`` keys start with ``module.``.
PARALLEL_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)

#: Functions that compile or script a module, sharing its parameters.
COMPILERS = frozenset({"torch.compile", "torch.jit.script", "torch.jit.trace"})

# -- data -------------------------------------------------------------------------------------------------------

#: DataLoader classes: iterating one gives batches made by its dataset, on the CPU unless a ``collate_fn`` moves
#: them.
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})

#: Datasets whose items are slices of the tensors they are given (on those tensors' device).
TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})

#: Datasets that give a selection of another dataset's items (where that one's are).
DATASET_VIEWS = frozenset({"torch.utils.data.Subset", "torch.utils.data.dataset.Subset"})

#: Functions that split a dataset into a list of :data:`DATASET_VIEWS`.
RANDOM_SPLITS = frozenset({"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"})

# -- saving and loading -----------------------------------------------------------------------------------------

#: Functions that pickle an object to a file.
SAVES = frozenset({"torch.save", "torch.serialization.save"})

#: Functions that unpickle a file saved by :data:`SAVES` (tensors come back on the device they were saved from).
LOADS = frozenset({"torch.load", "torch.serialization.load"})

#: Tensor methods that combine the receiver with tensor arguments, which must share its device (a 0-dim CPU tensor
#: excepted): arithmetic, comparisons, products, and the index arguments of ``gather``/``index_select``/masks.
COMBINING_METHODS = frozenset(
    """
    add sub mul div true_divide floor_divide matmul mm bmm masked_fill masked_fill_ add_ sub_ mul_ div_ eq ne lt le gt
    ge logical_and logical_or logical_xor bitwise_and bitwise_or where maximum minimum pow atan2 fmod remainder dot
    outer cross gather masked_select index_select take_along_dim scatter scatter_ scatter_add scatter_add_
    scatter_reduce scatter_reduce_
    """.split()
)

#: ``torch`` functions whose tensor arguments must share one device (a 0-dim CPU tensor excepted); for ``cat`` and
#: the like, the items of the sequence they are given.
COMBINING_FUNCTIONS = frozenset(
    """
    cat concat concatenate stack hstack vstack matmul mm bmm gather where add sub mul div maximum minimum
    masked_select index_select dot outer cross cdist take_along_dim spmm addmm addcmul addcdiv baddbmm einsum
    """.split()
)
