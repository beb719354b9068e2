"""The pretend tensor: real CPU data that reports, and is checked against, the CUDA device it would be on.

See :mod:`ferry.sanitizer.pretend` for the design; this module holds the tensor subclass, PyTorch's device rules
for op outputs, the same-device check, and the differentiable moves between ``cpu`` and pretend ``cuda:i``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import handle_torch_function
from torch.utils._pytree import tree_flatten, tree_unflatten

_CPU = torch.device("cpu")
_DATA: Any = torch.Tensor.data  # the ``Tensor.data`` descriptor

# Ops that PyTorch allows across devices on a GPU: copies between devices, and indexing a cuda tensor with cpu
# indices (the indices are moved for you).
_CONVOLUTIONS = frozenset({torch.ops.aten.convolution.default, torch.ops.aten._convolution.default})
_INDEX_OPS = frozenset(
    {
        torch.ops.aten.index.Tensor,
        torch.ops.aten.index_put_.default,
        torch.ops.aten.index_put.default,
        torch.ops.aten._index_put_impl_.default,
    }
)
#: ``resize_as_`` reads only the template's sizes: CUDA PyTorch runs ``gpu.resize_as_(cpu)`` (WassersteinGAN's
#: ``input.resize_as_(real_cpu).copy_(real_cpu)``).
_CROSS_DEVICE_OPS = _INDEX_OPS | {
    torch.ops.aten.copy_.default,
    torch.ops.aten._to_copy.default,
    torch.ops.aten.resize_as_.default,
}
#: Ops whose CUDA kernel wants every input on one device, a 0-dim CPU tensor included: ``cat`` (pytorch#35053), and
#: ``stack``, which dispatches to it.
_SAME_DEVICE_OPS = frozenset({torch.ops.aten.cat, torch.ops.aten.stack})

#: Ops that take some integer tensors on the host whatever the device of the others, as PyTorch requires or allows
#: on a GPU: the ``lengths`` of ``pack_padded_sequence``, the ``batch_sizes`` of a packed sequence (unpacking, the
#: packed overloads of the recurrent ops, and the backward of packing), the targets and lengths of ``ctc_loss``.
#: Op name (``aten::`` and overload dropped) -> the positions of those arguments.
_HOST_ARGUMENTS: dict[str, tuple[int, ...]] = {
    "_pack_padded_sequence": (1,),
    "_pad_packed_sequence": (1,),
    "_pack_padded_sequence_backward": (2,),
    "gru": (1,),
    "lstm": (1,),
    "rnn_tanh": (1,),
    "rnn_relu": (1,),
    "ctc_loss": (1, 2, 3),
    "_ctc_loss": (1, 2, 3),
}
#: Of those, the ops whose outputs include such a tensor, made on the host: the packed ``batch_sizes`` and the
#: unpacked ``lengths``. Op name -> the positions in the output tuple.
_HOST_OUTPUTS: dict[str, tuple[int, ...]] = {"_pack_padded_sequence": (1,), "_pad_packed_sequence": (1,)}


def op_name(func: Any) -> str:
    """``aten::gru.data`` and ``torch.gru`` are both ``"gru"``."""
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return str(schema.name).rpartition("::")[2]
    return str(getattr(func, "__name__", ""))


#: Of those, the ops that convert what they are given (``ctc_loss`` calls ``targets.to(log_probs.device(),
#: kLong)`` on its native path, so float targets on the host work on a GPU too).
_CONVERTED_HOST_ARGUMENTS = frozenset({"ctc_loss"})


def host_arguments(func: Any, args: tuple[Any, ...]) -> frozenset[int]:
    """The positions of ``args`` that ``func`` takes on the host on any device: CPU integer tensors only.

    ``ctc_loss`` also takes floating-point targets and lengths on the host, as PyTorch converts them itself.
    """
    name = op_name(func)
    positions = _HOST_ARGUMENTS.get(name, ())
    converted = name in _CONVERTED_HOST_ARGUMENTS
    return frozenset(
        i
        for i in positions
        if i < len(args)
        and isinstance(args[i], torch.Tensor)
        and not isinstance(args[i], PretendTensor)
        and args[i].device.type == "cpu"
        and (converted or not (args[i].is_floating_point() or args[i].is_complex() or args[i].dtype == torch.bool))
    )


#: How deep this thread is inside a composite op that makes its own temporaries (see :func:`own_temporaries`).
_COMPOSITE = threading.local()


@contextlib.contextmanager
def own_temporaries() -> Iterator[None]:
    """Inside the block, a CPU tensor that meets a pretend one takes the pretend device instead of raising.

    For composite ops whose C++ code makes temporaries with its input's options (the causal mask and dropout mask of
    ``scaled_dot_product_attention``'s math path): on a GPU those are on the input's device, here the input's
    options say ``cpu``. The caller checks the devices of the op's own arguments first, so a user's CPU tensor still
    raises.
    """
    _COMPOSITE.depth = getattr(_COMPOSITE, "depth", 0) + 1
    try:
        yield
    finally:
        _COMPOSITE.depth -= 1


#: ``data_ptr`` of a host copy being written by ``torch.save`` -> the pretend device it stands for (``"cuda:0"``);
#: the storage tagger of :mod:`ferry.sanitizer.pretend` reads and removes each entry.
SAVED_LOCATIONS: dict[int, str] = {}
#: non-empty while a ``torch.save`` under pretend GPUs runs (on any thread: one marker per call)
SAVING: list[object] = []


class PretendTensor(torch.Tensor):
    """A tensor whose data lies on the CPU but whose ``.device`` is a pretend ``cuda:i``.

    The wrapper itself is a CPU tensor as far as PyTorch's C++ core is concerned (so autograd and the optimizers
    run unchanged on a CPU-only build); ``device``, ``is_cuda``, ``is_cpu``, ``get_device()`` and ``repr``
    report the pretend device, and ``__torch_dispatch__`` applies PyTorch's device rules to every ATen op.
    """

    _elem: torch.Tensor
    _pretend_device: torch.device

    @staticmethod
    def __new__(cls, elem: torch.Tensor, device: torch.device, *, requires_grad: bool = False) -> PretendTensor:
        """Wrap the CPU tensor ``elem`` (not copied, must not require grad) as a tensor on ``device``."""
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=_CPU,
            requires_grad=requires_grad,
        )
        r._elem = elem
        r._pretend_device = device
        return r

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        """The pretend device, e.g. ``device(type='cuda', index=0)``."""
        return self._pretend_device

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        """True: a pretend tensor is always on a pretend CUDA device."""
        return True

    @property
    def is_cpu(self) -> bool:  # type: ignore[override]
        """False, as for a tensor on a GPU."""
        return False

    def get_device(self) -> int:
        """The pretend CUDA device index, as ``Tensor.get_device()`` returns on a GPU."""
        return self._pretend_device.index or 0

    def type(self, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        """``'torch.cuda.FloatTensor'`` and so on, as on a GPU; with a ``dtype``, converts as ``Tensor.type``."""
        if dtype is None and not kwargs:
            return type_name(self)
        if torch._C._is_torch_function_mode_enabled():  # the pretend mode converts legacy CUDA types
            return handle_torch_function(torch.Tensor.type, (self,), self, dtype, non_blocking, **kwargs)  # type: ignore[arg-type]
        return super().type(dtype, non_blocking, **kwargs)

    def __ferry_host_tensor__(self) -> torch.Tensor:
        """The CPU tensor holding the data, for ``ferry.save`` (as a GPU tensor is copied to the host to be written)."""
        return self._elem.detach()

    def share_memory_(self) -> PretendTensor:
        """A no-op, as ``share_memory_`` is for a tensor on a GPU (the wrapper has no storage of its own to share)."""
        return self

    def record_stream(self, stream: Any) -> None:
        """A no-op: work on a pretend GPU is synchronous."""

    def numpy(self, *, force: bool = False) -> Any:
        """Raise ``TypeError`` as PyTorch does for a CUDA tensor (``force=True`` copies, as PyTorch does).

        Under a function mode (the sanitizer) the call goes through the mode as :func:`pretend_numpy`, as
        ``Tensor.numpy`` does on a real GPU, so the sanitizer can report it before the ``TypeError``.
        """
        if torch._C._is_torch_function_mode_enabled():
            return handle_torch_function(pretend_numpy, (self,), self, force=force)
        return pretend_numpy(self, force=force)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self.numpy()

    def __format__(self, format_spec: str) -> str:
        """As ``Tensor.__format__`` on a GPU: a 0-dim tensor formats its value (``f"{acc:.2f}"``)."""
        if self.dim() == 0:
            value: str = self.detach().item().__format__(format_spec)
            return value
        return object.__format__(self, format_spec)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        body = repr(self._elem)[: -len(")")]
        suffix = f", device='{self._pretend_device}'"
        if self.grad_fn is not None:
            suffix += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            suffix += ", requires_grad=True"
        return body + suffix + ")"

    def __reduce_ex__(self, proto: Any) -> Any:
        # torch.save writes the CPU data, tagged with the pretend device as the storage's location (see
        # SAVED_LOCATIONS): the file says cuda:i, as a GPU's does, so it loads back onto the pretend GPU, and a
        # CPU-only machine needs map_location, as for a GPU's checkpoint.
        # A Parameter is saved as one, and requires_grad with it, as PyTorch saves them.
        # Outside torch.save (`pickle.dump`, `copy.copy`), PyTorch pickles a CUDA tensor with its device too, and
        # unpickling it gives a CUDA tensor again (Rainbow's replay memory, pickled to a bz2 file and read back).
        host = self._elem.detach().clone().requires_grad_(self.requires_grad)
        param = bool(getattr(self, "_is_param", False))
        if not SAVING:
            from ferry.sanitizer.pretend import unpickle_onto_pretend_device

            return (unpickle_onto_pretend_device, (host, str(self._pretend_device), param))
        # only inside torch.save, which clears the table when it returns (never a stale address)
        SAVED_LOCATIONS[host.untyped_storage().data_ptr()] = str(self._pretend_device)
        if param:
            return torch.nn.Parameter(host, self.requires_grad).__reduce_ex__(proto)  # type: ignore[no-untyped-call]
        return host.__reduce_ex__(proto)  # type: ignore[no-untyped-call]

    def __deepcopy__(self, memo: dict[int, Any]) -> PretendTensor:
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        copy = PretendTensor(self._elem.detach().clone(), self._pretend_device, requires_grad=self.requires_grad)
        if getattr(self, "_is_param", False):
            copy._is_param = True
        memo[id(self)] = copy
        return copy

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if func in _INDEX_OPS:
            _check_index(args)
        host = host_arguments(func, args)
        tensors: list[torch.Tensor] = []  # every tensor argument, in order, as the caller passed it
        by_id: dict[int, torch.Tensor] = {}  # the real tensor's id -> the wrapper the caller holds
        uargs = tuple(_unwrap(a, tensors, by_id) for a in args)
        ukwargs = {k: _unwrap(v, tensors, by_id) for k, v in kwargs.items()} if kwargs else {}
        if host:  # lengths and batch_sizes of packed sequences stay on the host
            skipped = {id(args[i]) for i in host}
            tensors = [t for t in tensors if id(t) not in skipped]
        device = result_device(func, tensors)
        with torch.no_grad():  # autograd already recorded this op on the wrappers, one level up
            out = func(*uargs, **ukwargs)
        # in-place and out= ops return their (unwrapped) argument: hand back the wrapper the caller holds
        kept = _HOST_OUTPUTS.get(op_name(func), ())
        if kept and isinstance(out, tuple):
            by_id.update((id(out[i]), out[i]) for i in kept if i < len(out))  # made on the host, as on a GPU
        return _wrap(out, device, by_id)


def _sync_metadata(wrapper: PretendTensor) -> None:
    # An in-place op that changes the shape (unsqueeze_, t_, resize_) changed the CPU data's sizes and strides;
    # ``Tensor.data``'s setter copies them onto the wrapper.
    elem = wrapper._elem
    if (wrapper.shape, wrapper.stride(), wrapper.storage_offset()) != (
        elem.shape,
        elem.stride(),
        elem.storage_offset(),
    ):
        with torch._C.DisableTorchFunction():
            _DATA.__set__(wrapper, PretendTensor(elem, wrapper._pretend_device))


def _unwrap(x: Any, tensors: list[torch.Tensor], by_id: dict[int, torch.Tensor]) -> Any:
    """``x`` (an op's argument) with the CPU data in place of each wrapper and the CPU in place of a CUDA device.

    Walks tuples, lists and dicts (what ATen ops take, as ``tree_flatten`` would, at a fraction of its cost);
    each tensor met goes to ``tensors``, and ``by_id`` maps the real tensor's id to what the caller passed.
    """
    if isinstance(x, torch.Tensor):
        tensors.append(x)
        real = x._elem if isinstance(x, PretendTensor) else x
        by_id[id(real)] = x
        return real
    kind = type(x)
    if kind is list or kind is tuple:
        return kind(_unwrap(i, tensors, by_id) for i in x)
    if kind is dict:
        return {k: _unwrap(v, tensors, by_id) for k, v in x.items()}
    if kind is torch.device:
        return _CPU if x.type == "cuda" else x
    if isinstance(x, tuple | list | dict):  # a namedtuple or another subclass: the general route
        flat, spec = tree_flatten(x)
        return tree_unflatten([_unwrap(i, tensors, by_id) for i in flat], spec)
    return x


def _wrap(x: Any, device: torch.device, by_id: dict[int, torch.Tensor]) -> Any:
    """An op's output with each CPU result wrapped on ``device`` (see :func:`_wrap_output`), tuples and lists too."""
    if isinstance(x, torch.Tensor):
        return _wrap_output(x, device, by_id)
    kind = type(x)
    if kind is tuple or kind is list:
        return kind(_wrap(i, device, by_id) for i in x)
    if isinstance(x, tuple | list | dict):
        flat, spec = tree_flatten(x)
        return tree_unflatten([_wrap(i, device, by_id) for i in flat], spec)
    return x


def _wrap_output(x: Any, device: torch.device, by_id: dict[int, torch.Tensor]) -> Any:
    if not isinstance(x, torch.Tensor):
        return x
    if id(x) in by_id:
        held = by_id[id(x)]
        if isinstance(held, PretendTensor):
            _sync_metadata(held)
        return held
    if device.type == "cpu":
        return x
    if torch.is_inference_mode_enabled() and not x.is_inference():
        # a view of a normal tensor under `torch.inference_mode()` is a normal tensor that shares its base's version
        # counter; a wrapper made in inference mode would be an inference tensor, which cannot share it
        with torch.inference_mode(False):
            return PretendTensor(x, device)
    return PretendTensor(x, device)


def _in_native_backward() -> bool:
    """Whether this thread runs the backward of one of PyTorch's own ops (not a user's ``autograd.Function``).

    Backward formulas such as ``affine_grid_generator_backward`` make temporaries with ``grad.options()``: on a GPU
    those are on the gradient's device, here the wrapper's C++ device says ``cpu``. Every tensor a native backward
    gets was checked when its forward ran, so inside one a CPU temporary takes the pretend device (as inside
    :func:`own_temporaries`). A user's ``autograd.Function.backward`` is checked as any other code.
    """
    node = torch._C._current_autograd_node()
    return node is not None and not isinstance(node, torch.autograd.function.BackwardCFunction)


def device_of(t: torch.Tensor) -> torch.device:
    """The device ``t`` reports: its pretend device, or its real one for an ordinary tensor."""
    return t._pretend_device if isinstance(t, PretendTensor) else t.device


def type_name(t: torch.Tensor) -> str:
    """The legacy type name PyTorch prints for ``t``, e.g. ``torch.cuda.FloatTensor`` for a pretend tensor."""
    name: str = torch.Tensor.type(real_tensor_of(t))
    return name.replace("torch.", "torch.cuda.", 1) if isinstance(t, PretendTensor) else name


def real_tensor_of(t: torch.Tensor) -> torch.Tensor:
    """The CPU tensor holding ``t``'s data; ``t`` itself if it is an ordinary tensor."""
    return t._elem if isinstance(t, PretendTensor) else t


def mismatch_error(first: torch.device, other: torch.device) -> RuntimeError:
    """PyTorch's own message for two tensors on different devices (``TensorIterator``'s wording)."""
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {first} and {other}!"
    )


def result_device(func: Any, flat_args: list[Any]) -> torch.device:
    """The device an op's outputs would be on, raising PyTorch's ``RuntimeError`` if the devices do not match.

    Mirrors ``TensorIterator``: the common device is the first non-CPU one; a 0-dim CPU tensor is allowed with
    tensors on any device (not by ``cat`` and ``stack``); any other tensor on a different device is an error (except
    for cross-device copies).
    """
    tensors = [x for x in flat_args if isinstance(x, torch.Tensor)]
    devices = [device_of(t) for t in tensors]
    if func in _CONVOLUTIONS:
        _check_convolution(tensors)
    common = next((d for d in devices if d.type != "cpu"), _CPU)
    if func not in _CROSS_DEVICE_OPS and not getattr(_COMPOSITE, "depth", 0) and not _in_native_backward():
        scalars = getattr(func, "overloadpacket", None) not in _SAME_DEVICE_OPS
        # an in-place op writes into its first tensor: a 0-dim CPU tensor mixes in as an input only, so
        # `loss = torch.tensor(0.)` then `loss += cuda_value` raises on a GPU (TensorIterator's outputs)
        written = _writes_first(func)
        for i, (t, d) in enumerate(zip(tensors, devices, strict=True)):
            mixes = scalars and d.type == "cpu" and t.dim() == 0 and not (written and i == 0)
            if d != common and not mixes:
                raise mismatch_error(common, d)
    return common


def _writes_first(func: Any) -> bool:
    """Whether the ATen op ``func`` computes into its first argument (``add_``, ``mul_``): see :func:`writes_into`."""
    schema = getattr(func, "_schema", None)
    return schema is not None and writes_into(schema.name.split("::")[-1])


def writes_into(name: str) -> bool:
    """Whether the operation ``name`` computes element-wise into its first tensor, in place.

    ``add_``, ``mul_`` (ATen ops and ``Tensor`` methods), ``__iadd__`` (``loss += x``). PyTorch lets a 0-dim CPU
    tensor join an operation on another device only as an input (pytorch#40986), so for these the first tensor must
    be on the operation's device. Not ``fill_``-style ops, whose tensor argument is a value read once.
    """
    if name.startswith("__i") and name.endswith("__"):
        return True
    return name.endswith("_") and not name.endswith("__") and name not in _VALUE_INPLACE_OPS


#: In-place ops whose tensor argument is a value read once, not an operand of ``TensorIterator``.
_VALUE_INPLACE_OPS = frozenset(
    {"fill_", "zero_", "set_", "copy_", "index_put_", "masked_fill_", "resize_", "requires_grad_"}
)


def _check_index(args: tuple[Any, ...]) -> None:
    # x[indices] and x[indices] = values: indices may be on the CPU or on x's device; values follow x
    self, indices, *rest = args
    for index in indices:
        if isinstance(index, torch.Tensor) and device_of(index) not in (_CPU, device_of(self)):
            raise RuntimeError(
                f"indices should be either on cpu or on the same device as the indexed tensor ({device_of(self)})"
            )
    if rest and isinstance(rest[0], torch.Tensor):
        result_device(None, [self, rest[0]])


def _check_convolution(tensors: list[torch.Tensor]) -> None:
    # aten::convolution(input, weight, bias, ...) words its mismatch in legacy type names
    input, *params = tensors
    for what, param in zip(("weight", "bias"), params, strict=False):
        if device_of(param) != device_of(input):
            hint = " or input should be a MKLDNN tensor and weight is a dense tensor" if not input.is_cuda else ""
            raise RuntimeError(
                f"Input type ({type_name(input)}) and {what} type ({type_name(param)}) should be the same{hint}"
            )


def place(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Return ``t``'s data on ``device`` (a copy when the device changes), with no autograd history."""
    real = t._elem if isinstance(t, PretendTensor) else t.detach()
    if device_of(t) != device:
        real = real.clone()
    if device.type == "cpu":
        return real
    return PretendTensor(real, device)


class _Move(torch.autograd.Function):
    """A differentiable move between ``cpu`` and pretend ``cuda:i``: the gradient moves back."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, device: torch.device) -> torch.Tensor:
        ctx.source = device_of(t)
        return place(t, device)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        (grad,) = grads
        return (None if grad is None else place(grad, ctx.source)), None


def move(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Return a copy of ``t`` on the (pretend) ``device``; gradients flow back to ``t`` as for ``Tensor.to``.

    Raises:
        NotImplementedError: ``t`` is on ``meta`` (no values to copy), as PyTorch raises on a GPU.
    """
    if device_of(t) == device:
        return t
    if device_of(t).type == "meta" and device.type != "meta":
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    if device.type == "meta":  # a real meta tensor (shape and dtype, no values), as torch gives
        return real_tensor_of(t).to("meta")
    if torch.is_grad_enabled() and t.requires_grad:
        out: torch.Tensor = _Move.apply(t, device)  # type: ignore[no-untyped-call]
        return out
    return place(t, device)


def pretend_numpy(tensor: PretendTensor, *, force: bool = False) -> Any:
    """``PretendTensor.numpy``: raise ``TypeError`` as PyTorch does for a CUDA tensor; ``force=True`` copies."""
    if force:
        return tensor._elem.detach().clone().numpy()
    raise TypeError(
        f"can't convert {tensor._pretend_device} device type tensor to numpy. "
        "Use Tensor.cpu() to copy the tensor to host memory first."
    )
