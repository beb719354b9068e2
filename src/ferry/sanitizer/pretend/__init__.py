"""Pretend GPU: run a CUDA script on a CPU-only machine, with every device check made against the pretend GPUs.

``with pretend_cuda(device_count=2):`` makes ``torch.cuda.is_available()`` answer True and
``torch.cuda.device_count()`` answer 2; ``.cuda()``, ``.to("cuda:1")``, ``device="cuda"``, ``Module.to("cuda")`` and
``torch.set_default_device("cuda")`` succeed. The data stays on the CPU, but each tensor carries the device it would
be on, through forward, backward and optimizer steps, and every op checks its arguments against those devices, so
``cpu_tensor * cuda_tensor`` raises the RuntimeError a GPU raises::

    Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!

A device bug in a training script then shows up on a laptop or in CI, before a GPU job is queued.

How it works:
    * A tensor on a pretend GPU is a :class:`PretendTensor`: a wrapper subclass (``_make_wrapper_subclass``) that
      holds the real CPU tensor and reports the pretend device through ``.device``, ``.is_cuda``,
      ``.get_device()`` and ``repr``. To PyTorch's C++ core the wrapper is a CPU tensor, so autograd and the
      optimizers run unchanged on a CPU-only build (a wrapper that claims CUDA in C++ aborts the process in the
      autograd engine, which asks for the device's CUDA stream).
    * Its ``__torch_dispatch__`` sees every ATen op, forward and backward: it computes the output device by
      PyTorch's rule (the first non-CPU device; a 0-dim CPU tensor mixes with anything), raises PyTorch's
      RuntimeError when two devices meet, runs the op on the CPU data and wraps the outputs. In-place ops hand
      back the caller's wrapper. Gradients, optimizer state and ``state_dict()`` entries are pretend tensors on
      their parameter's device.
    * A :class:`~torch.overrides.TorchFunctionMode` rewrites device arguments before they reach C++: factories
      (``torch.zeros(3, device="cuda")``, ``*_like``, ``torch.tensor``, the default device set by
      ``torch.set_default_device`` or ``with torch.device("cuda"):``), ``Tensor.to``, ``Tensor.cuda``,
      ``Tensor.cpu`` and ``Tensor.data = ...``. Moves are differentiable copies. ``Module.to``, ``Module.cuda``
      and ``Module.cpu`` go through ``Tensor.to`` and keep each ``nn.Parameter`` object, as a GPU does: the
      parameter's contents are swapped with its moved copy
      (``torch.utils.swap_tensors``, PyTorch's ``swap_module_params_on_conversion``, for ``Module._apply`` only), so
      optimizers built before the move, tied weights and hooks keep seeing the module's parameters (optimizer
      state stays where it was made; frozen parameters are swapped too, and stay frozen). A parameter that an autograd
      graph still holds may not be swappable: it then becomes a new Parameter on the pretend GPU (tied weights stay
      tied), where a GPU would keep the object. ``torch.save`` keeps a Parameter a Parameter, and ``requires_grad``.
    * Host arguments are checked as PyTorch checks them: the ``lengths`` of ``pack_padded_sequence`` and the
      ``batch_sizes`` of a packed sequence stay on the host (see ``_HOST_ARGUMENTS`` in ``_tensor.py``);
      ``torch.tensor(t)`` copies a tensor where it is; the legacy CPU types (``torch.LongTensor([...])``) read
      pretend scalars in their data.
    * ``torch.cuda`` and ``torch.accelerator`` functions are replaced for the duration (see
      :data:`PATCHED_CUDA_FUNCTIONS` and :data:`PATCHED_ACCELERATOR_FUNCTIONS`), as are the legacy types
      (``torch.cuda.FloatTensor``...), ``torch.device`` (so ``torch.device(0)`` and ``Module.to(0)`` mean
      ``cuda:0``), ``torch.Generator`` (``device="cuda"`` gives a CPU generator), ``torch.Stream``/``Event`` and
      ``nn.DataParallel``'s copies between GPUs (``torch.nn.parallel.comm``; its replicas run one after the other on
      the calling thread). All are restored exactly on exit, with the default device.

What it cannot model:
    * Kernels: every op runs the CPU kernel, so numerics are the CPU's (bitwise equal to the same script on the
      CPU, not to a GPU run: no TF32, different reduction order, cuDNN algorithms and atomics), and random numbers
      come from the CPU generator (``torch.cuda.manual_seed`` is a no-op; seed with ``torch.manual_seed``).
    * Memory: nothing is allocated on a GPU; ``memory_allocated()`` and friends answer 0, so out-of-memory errors,
      ``empty_cache`` and memory-dependent batch sizes are not exercised.
    * Speed: no asynchrony, no host-device transfer cost; ``synchronize``, streams and events are no-ops.
    * CUDA-only ops: custom CUDA kernels and extensions, Triton, ``torch.compile`` for cuda, flash/memory-efficient
      attention backends (SDPA falls back to the CPU math path), NCCL, CUDA graphs, ``pin_memory`` (a no-op here),
      cuDNN-specific errors (RNNs, attention and the transformer fast path run their CPU math kernels, their
      internal masks and workspaces on the input's pretend device).
    * Mixed precision: ``torch.autocast("cuda")`` is accepted but changes no dtype (the CPU kernels run outside
      CUDA autocast), so float16 overflow and dtype-mismatch bugs under autocast do not show; ``GradScaler("cuda")``
      runs.
    * Ops written in C++ that read the real device (``torch.Generator(device="cuda")``, ``torch.Tensor.device``
      read through the C descriptor) see ``cpu``. Some ops word their mismatch error differently on a real GPU
      (``mm`` names the argument); here every mismatch uses ``TensorIterator``'s wording above.
    * ``torch.save`` of a pretend tensor writes its CPU data with the location ``cuda:i``, as a GPU's checkpoint
      has: ``torch.load`` under pretend puts it back on the pretend GPU (whole pickled modules included); on a
      CPU-only machine without pretend it needs ``map_location``, as any GPU checkpoint does.
    * ``torch.cuda`` functions not in :data:`PATCHED_CUDA_FUNCTIONS` (``nccl``, ``graphs``, ``utilization``...)
      behave as on a CPU-only build; ``get_rng_state`` hands back what ``set_rng_state`` stored (the numbers come
      from the CPU generator). Function modes are per thread: ``device="cuda"`` works only on the thread that
      entered the block (pretend tensors keep their device and checks on every thread).

Meant for a machine without CUDA. On a CUDA machine the pretend devices never touch the GPU, but
``torch.cuda`` answers for the pretend GPUs until the context exits.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._device
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils._pytree import tree_flatten, tree_map

from ferry.errors import ArgumentError
from ferry.sanitizer._frames import _FERRY_DIR, user_frame, user_frame_above
from ferry.sanitizer.pretend._tensor import (
    SAVED_LOCATIONS,
    SAVING,
    PretendTensor,
    device_of,
    host_arguments,
    move,
    own_temporaries,
    result_device,
    type_name,
)
from ferry.sanitizer.pretend._tensor import (
    place as place_data,
)

__all__ = [
    "PATCHED_ACCELERATOR_FUNCTIONS",
    "PATCHED_CUDA_FUNCTIONS",
    "PretendTensor",
    "is_pretend",
    "pretend_cuda",
    "real_tensor",
]


#: How a user pretends more GPUs, in the words of the interface they are in (``ferry run`` sets its option here).
MORE_GPUS = "pretend_cuda(device_count=...)"


def is_pretend(t: object) -> bool:
    """Return True if ``t`` is a tensor on a pretend CUDA device (its data really on the CPU)."""
    return isinstance(t, PretendTensor)


def real_tensor(t: torch.Tensor) -> torch.Tensor:
    """Return the CPU tensor holding ``t``'s data (shared, not copied, no autograd history); ``t`` if ordinary."""
    return t._elem if isinstance(t, PretendTensor) else t


class _Stream:
    """A no-op stand-in for ``torch.cuda.Stream``: work is synchronous on the CPU."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = device

    def wait_stream(self, stream: Any) -> None:
        """No-op."""

    def wait_event(self, event: Any) -> None:
        """No-op."""

    def record_event(self, event: Any = None) -> _Event:
        """Return a recorded no-op event."""
        return event if isinstance(event, _Event) else _Event()

    def synchronize(self) -> None:
        """No-op."""

    def query(self) -> bool:
        """True: all work is done."""
        return True

    def is_capturing(self) -> bool:
        """False: no CUDA graph is captured on a pretend GPU."""
        return False

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _Event:
    """A no-op stand-in for ``torch.cuda.Event``; ``elapsed_time`` is 0.0 ms (speed is not modelled)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing

    def record(self, stream: Any = None) -> None:
        """No-op."""

    def wait(self, stream: Any = None) -> None:
        """No-op."""

    def synchronize(self) -> None:
        """No-op."""

    def query(self) -> bool:
        """True: all work is done."""
        return True

    def elapsed_time(self, end_event: Any) -> float:
        """0.0: time on a pretend GPU means nothing."""
        return 0.0


class _State:
    """The pretend GPUs: how many, and the current one (``torch.cuda.set_device``)."""

    def __init__(self, device_count: int) -> None:
        self.device_count = device_count
        self.current = 0
        self.seed = 0
        #: a CUDA type is the default tensor type (``torch.set_default_tensor_type("torch.cuda.FloatTensor")``)
        self.default_cuda = False
        # ``torch.cuda.get_rng_state`` answers: random numbers come from the CPU generator, so a GPU's generator
        # state is only kept to be handed back (a Philox seed and offset, 16 bytes, as on a GPU)
        self.rng_states: dict[int, torch.Tensor] = {}

    def get_rng_state(self, device: Any = "cuda") -> torch.Tensor:
        index = self.resolve(device).index or 0
        return self.rng_states.get(index, torch.zeros(16, dtype=torch.uint8)).clone()

    def set_rng_state(self, new_state: torch.Tensor, device: Any = "cuda") -> None:
        index = self.resolve(device).index or 0
        self.rng_states[index] = real_tensor(new_state).detach().to(torch.uint8).clone()

    def set_rng_state_all(self, new_states: Any) -> None:
        for index, new_state in enumerate(new_states):
            self.set_rng_state(new_state, index)

    def resolve(self, device: Any) -> torch.device:
        """The concrete device for a device argument (``"cuda"`` means the current pretend GPU)."""
        if isinstance(device, int) and not isinstance(device, bool):
            device = torch.device("cuda", device)
        d = torch.device(device)
        if d.type != "cuda":
            return d
        index = self.current if d.index is None else d.index
        self.check(index)
        return torch.device("cuda", index)

    def check(self, index: int) -> None:
        if not 0 <= index < self.device_count:
            raise RuntimeError(
                f"CUDA error: invalid device ordinal: cuda:{index} does not exist; this pretend machine has "
                f"{self.device_count} GPU(s) (cuda:0..cuda:{self.device_count - 1}). Use a device index below "
                f"{self.device_count}, or pretend more GPUs with {MORE_GPUS}."
            )


def _cuda_functions(state: _State) -> dict[str, Any]:
    def index_of(device: Any = None) -> int:
        return state.current if device is None else state.resolve(device).index or 0

    def negative(device: Any) -> bool:
        """``set_device(-1)``, ``torch.cuda.device(-1)``: a no-op in CUDA PyTorch (a ``-device -1`` CPU default)."""
        return isinstance(device, int) and not isinstance(device, bool) and device < 0

    def set_device(device: Any) -> None:
        if not negative(device):
            state.current = index_of(device)

    class _device_ctx:  # stands in for the class torch.cuda.device
        def __init__(self, device: Any) -> None:
            self.index = -1 if device is None or negative(device) else index_of(device)
            self.previous = -1

        def __enter__(self) -> None:
            self.previous = state.current
            if self.index >= 0:
                state.current = self.index

        def __exit__(self, *exc: object) -> None:
            state.current = self.previous

    def properties(device: Any = None) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            name="ferry pretend CUDA GPU", major=8, minor=0, total_memory=80 * 2**30, multi_processor_count=108
        )

    # each replacement is its own function object: torch._dynamo maps torch.cuda functions one to one
    def nothing() -> Callable[..., None]:
        return lambda *args, **kwargs: None

    def zero() -> Callable[..., int]:
        return lambda *args, **kwargs: 0

    return {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "init": nothing(),
        "device_count": lambda: state.device_count,
        "current_device": lambda: state.current,
        "set_device": set_device,
        "device": _device_ctx,
        "get_device_name": lambda device=None: "ferry pretend CUDA GPU",
        "get_device_capability": lambda device=None: (8, 0),
        "get_device_properties": properties,
        "is_bf16_supported": lambda including_emulation=True: True,
        "synchronize": nothing(),
        "manual_seed": nothing(),
        "manual_seed_all": nothing(),
        "seed": nothing(),
        "seed_all": nothing(),
        "empty_cache": nothing(),
        "reset_peak_memory_stats": nothing(),
        "memory_allocated": zero(),
        "max_memory_allocated": zero(),
        "memory_reserved": zero(),
        "max_memory_reserved": zero(),
        "mem_get_info": lambda device=None: (80 * 2**30, 80 * 2**30),
        "memory_stats": lambda device=None: {},
        "memory_summary": lambda device=None, abbreviated=False: "ferry pretend CUDA GPU: no memory is allocated.",
        "ipc_collect": nothing(),
        "get_rng_state": state.get_rng_state,
        "set_rng_state": state.set_rng_state,
        "get_rng_state_all": lambda: [state.get_rng_state(i) for i in range(state.device_count)],
        "set_rng_state_all": state.set_rng_state_all,
        "initial_seed": lambda: state.seed,
        "Stream": _Stream,
        "Event": _Event,
        "current_stream": lambda device=None: _Stream(device),
        "default_stream": lambda device=None: _Stream(device),
        "stream": lambda stream=None: contextlib.nullcontext(stream),
        **{name: _legacy_type(name, dtype, state) for name, dtype in _LEGACY_TYPES.items()},
    }


def _accelerator_functions(state: _State) -> dict[str, Any]:
    """Replacements for ``torch.accelerator``: the pretend GPUs are this machine's accelerator."""

    class device_index:  # stands in for the class torch.accelerator.device_index
        def __init__(self, device: int | None, /) -> None:
            self.index = device
            self.previous = -1

        def __enter__(self) -> None:
            if self.index is not None:
                self.previous, state.current = state.current, state.resolve(self.index).index or 0

        def __exit__(self, *exc: object) -> None:
            if self.index is not None:
                state.current = self.previous

    def set_device_index(device: Any, /) -> None:
        state.current = state.resolve(device).index or 0

    def current_accelerator(check_available: bool = False) -> torch.device:
        return torch.device("cuda")

    return {
        "is_available": lambda: True,
        "current_accelerator": current_accelerator,
        "device_count": lambda: state.device_count,
        "current_device_index": lambda: state.current,
        "current_device_idx": lambda: state.current,
        "set_device_index": set_device_index,
        "set_device_idx": set_device_index,
        "device_index": device_index,
        "synchronize": lambda device=None, /: None,
        "current_stream": lambda device=None, /: _Stream(device),
        "set_stream": lambda stream: None,
        "empty_cache": lambda: None,
        "memory_allocated": lambda device_index=None, /: 0,
        "max_memory_allocated": lambda device_index=None, /: 0,
        "memory_reserved": lambda device_index=None, /: 0,
        "max_memory_reserved": lambda device_index=None, /: 0,
        "reset_peak_memory_stats": lambda device_index=None, /: None,
        "memory_stats": lambda device_index=None, /: {},
    }


#: the legacy CUDA tensor types (``torch.cuda.FloatTensor``) and their dtypes
_LEGACY_TYPES: dict[str, torch.dtype] = {
    "DoubleTensor": torch.float64,
    "FloatTensor": torch.float32,
    "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16,
    "LongTensor": torch.int64,
    "IntTensor": torch.int32,
    "ShortTensor": torch.int16,
    "CharTensor": torch.int8,
    "ByteTensor": torch.uint8,
    "BoolTensor": torch.bool,
}


#: PyTorch's legacy CPU types (``torch.LongTensor``), as they are outside :func:`pretend_cuda`
_LEGACY_CPU_TYPES: dict[str, Any] = {name: getattr(torch, name) for name in _LEGACY_TYPES}


class _CpuLegacyTypeMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _LEGACY_CPU_TYPES[cls.__name__]) and not is_pretend(obj)  # CPU tensors only


def _cpu_legacy_type(name: str) -> type:
    """A stand-in for the legacy type ``torch.<name>`` that reads pretend tensors in its data.

    ``torch.LongTensor([[t[i][0] for i in range(n)]])`` of 0-dim tensors on a GPU reads each value (as
    ``torch.tensor`` does); here their CPU data is read. Its instances are PyTorch's own.
    """

    def construct(cls: type, *args: Any, **kwargs: Any) -> torch.Tensor:
        made: torch.Tensor = _LEGACY_CPU_TYPES[name](*(_cpu_data(a) for a in args), **kwargs)
        return made

    original = _LEGACY_CPU_TYPES[name]
    return _CpuLegacyTypeMeta(
        name,
        (),
        {
            "dtype": _LEGACY_TYPES[name],
            "__new__": construct,
            "__module__": "torch",
            "is_cuda": False,
            "__doc__": original.__doc__,
        },
    )


#: ``torch.Tensor``'s own ``__new__`` (the legacy constructor ``torch.Tensor(data)``), which pretend GPUs replace
#: while a CUDA type is the default tensor type.
_TENSOR_NEW = torch._C.TensorBase.__new__


def _default_tensor_type(set_type: Callable[[Any], None], state: _State) -> Callable[[Any], None]:
    """``torch.set_default_tensor_type`` for pretend GPUs.

    The stand-ins of the legacy CPU types count as PyTorch's own. A CUDA type (``"torch.cuda.FloatTensor"``, or its
    stand-in) does what it does with CUDA PyTorch: its dtype becomes the default and new tensors go to the GPU, the
    factories' (through ``torch.set_default_device("cuda")``) and the legacy constructor's (``torch.Tensor(data)``,
    which the default device does not reach); a CPU type after it sends them back to the CPU.
    """

    def legacy_new(cls: type, *args: Any, **kwargs: Any) -> torch.Tensor:
        made: torch.Tensor = _TENSOR_NEW(cls, *args, **kwargs)
        if cls is torch.Tensor:  # `torch.Tensor(mean)` (ssd.pytorch's priors): the default type's, a CUDA one
            return move(made, torch.device("cuda", state.current))
        return made  # a subclass (`nn.Parameter`) builds what it builds

    def set_default_tensor_type(t: Any) -> None:
        if isinstance(t, str):
            name = t
        elif isinstance(t, _LegacyTypeMeta):
            name = f"torch.cuda.{t.__name__}"
        elif isinstance(t, _CpuLegacyTypeMeta):
            name = f"torch.{t.__name__}"
        else:
            name = ""
        short = name.removeprefix("torch.cuda.").removeprefix("torch.")
        if short in _LEGACY_CPU_TYPES:
            t = _LEGACY_CPU_TYPES[short]
        set_type(t)  # the dtype, PyTorch's checks (floating-point types only) and its deprecation warning
        if name.startswith("torch.cuda."):
            torch.set_default_device("cuda")
            torch.Tensor.__new__ = legacy_new  # type: ignore[method-assign, assignment]
            state.default_cuda = True
        elif state.default_cuda:
            torch.set_default_device(None)
            torch.Tensor.__new__ = _TENSOR_NEW  # type: ignore[method-assign]
            state.default_cuda = False

    return set_default_tensor_type


class _LegacyTypeMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, PretendTensor) and obj.dtype == cls.dtype  # type: ignore[attr-defined]


def _legacy_type(name: str, dtype: torch.dtype, state: _State) -> type:
    """A stand-in for the legacy type ``torch.cuda.<name>``.

    Calling it builds CPU data of ``dtype`` (as ``torch.FloatTensor(...)`` does) on the current pretend GPU; a
    pretend tensor of ``dtype`` is an instance of it.
    """

    def construct(cls: type, *args: Any, **kwargs: Any) -> torch.Tensor:
        cpu = _LEGACY_CPU_TYPES[name](*(_cpu_data(a) for a in args), **kwargs)
        return move(cpu, torch.device("cuda", state.current))

    return _LegacyTypeMeta(
        name,
        (),
        {
            "dtype": dtype,
            "__new__": construct,
            "__module__": "torch.cuda",
            "is_cuda": True,
            "__doc__": f"torch.cuda.{name} on a pretend GPU.",
        },
    )


# the ``Tensor.data`` and ``Tensor.grad`` descriptors, whose setters the mode intercepts
_DATA: Any = torch.Tensor.data
_GRAD: Any = torch.Tensor.grad


class _PretendMode(TorchFunctionMode):
    """Rewrites device arguments so no CUDA device reaches PyTorch's C++ core, and wraps results as pretend."""

    def __init__(self, state: _State) -> None:
        super().__init__()
        self.state = state
        self.handlers: dict[Any, Callable[..., Any]] = {
            torch.Tensor.to: self._to,
            torch.Tensor.cuda: self._cuda,
            torch.Tensor.cpu: self._cpu,
            _DATA.__set__: self._set_data,
            _GRAD.__set__: self._set_grad,
            torch.Tensor.pin_memory: lambda t, *args, **kwargs: t,
            torch.Tensor.tolist: lambda t: real_tensor(t).tolist(),
            torch.Tensor.type: self._type,
            # `self.type(other.type())`, as PyTorch defines it: a CUDA type name moves to the GPU
            torch.Tensor.type_as: lambda t, other: self._type(t, type_name(other)),
            torch.Tensor.share_memory_: self._share_memory,
            torch.Tensor.record_stream: lambda t, stream: None,
            torch.Tensor.new: self._new,
            # reads a device argument, creates nothing: left as it is (PyTorch hands the mode the patched one)
            _PARSE_TO: _PARSE_TO,
            _PARSE_TO_WITH_ORDINALS: _PARSE_TO_WITH_ORDINALS,
        }
        # composite ops that make temporaries of their own on their input's device (on the CPU here)
        for composite in _COMPOSITES:
            self.handlers[composite] = self._composite(composite)
        # products with a sparse operand: `torch.sparse.mm(adj, x)`, `adj @ x` add into zeros made with the dense
        # operand's options (on the CPU here)
        for product in _SPARSE_PRODUCTS:
            self.handlers[product] = self._sparse_product(product, self.handlers.get(product))
        # unpacking a packed sequence builds the padded output with its input's options, then copies into it
        self.handlers[torch._pad_packed_sequence] = self._unpacking(torch._pad_packed_sequence)
        self.handlers[torch._pack_padded_sequence] = self._packing(torch._pack_padded_sequence)
        # factories that read a tensor's data from Python (``torch.tensor([loss])``): they read the CPU data
        for factory in (torch.tensor, torch.as_tensor, torch.Tensor.new_tensor):
            self.handlers[factory] = self._reading_data(factory)

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        handler = self.handlers.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        return self._call(func, args, kwargs)

    def _call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call ``func`` with its device argument (or the default device) resolved, and its result retargeted."""
        default = torch.utils._device.CURRENT_DEVICE
        if default is not None and kwargs.get("device") is None and func in torch.utils._device._device_constructors():
            kwargs["device"] = default
        if kwargs.get("device") is None:
            return func(*args, **kwargs)
        target = self.state.resolve(kwargs["device"])
        kwargs["device"] = "cpu"
        return tree_map(lambda x: self._retarget(x, target), func(*args, **kwargs))

    @staticmethod
    def _retarget(x: Any, target: torch.device) -> Any:
        # a factory's result: a new leaf, so wrapping it loses no autograd history
        if not isinstance(x, torch.Tensor) or device_of(x) == target:
            return x
        real = real_tensor(x).detach()
        if target.type == "cpu":
            return real.requires_grad_(x.requires_grad)
        return PretendTensor(real, target, requires_grad=x.requires_grad)

    def _to(self, t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        flags: list[bool] = []
        for a in args:
            if a is None:  # an unset device or dtype, as Module.to passes them
                continue
            if isinstance(a, bool):
                flags.append(a)
            elif isinstance(a, torch.Tensor):
                device, dtype = device_of(a), a.dtype
            elif isinstance(a, torch.dtype):
                dtype = a
            else:
                device = a
        copy = kwargs.pop("copy", flags[1] if len(flags) > 1 else False)
        kwargs.pop("non_blocking", None)  # every copy is synchronous on the CPU
        if dtype is not None or copy or kwargs:
            t = torch.Tensor.to(t, dtype=dtype, copy=copy, **kwargs)
        return t if device is None else move(t, self.state.resolve(device))

    def _composite(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            host = host_arguments(func, args)  # a packed sequence's batch_sizes stay on the host
            given = tuple(None if i in host else a for i, a in enumerate(args))
            result_device(None, tree_flatten((given, kwargs))[0])  # the caller's tensors must agree, as on a GPU
            with own_temporaries(), _without_onednn():
                return self._call(func, args, kwargs)

        return call

    def _sparse_product(self, func: Callable[..., Any], handler: Callable[..., Any] | None) -> Callable[..., Any]:
        composite = self._composite(func)

        def call(*args: Any, **kwargs: Any) -> Any:
            if any(isinstance(a, torch.Tensor) and a.layout != torch.strided for a in args[:2]):
                return composite(*args, **kwargs)
            if handler is not None:
                return handler(*args, **kwargs)
            return self._call(func, args, kwargs)

        return call

    def _unpacking(self, func: Callable[..., Any]) -> Callable[..., Any]:
        # ``_pad_packed_sequence(data, batch_sizes, ...)``: the padded output on ``data``'s device (a differentiable
        # move of what the CPU kernel built), the lengths on the host, as on a GPU
        def call(data: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            padded, lengths = self._call(func, (data, *args), kwargs)
            return move(padded, device_of(data)), lengths

        return call

    def _packing(self, func: Callable[..., Any]) -> Callable[..., Any]:
        # ``_pack_padded_sequence(input, lengths, batch_first)``: its backward builds the input's gradient with the
        # gradient's options, on the CPU here. Packed from a CPU copy and moved back (both moves differentiable),
        # the gradient reaches the input on its pretend device, as on a GPU; ``batch_sizes`` stays on the host.
        def call(input: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            device = device_of(input)
            if device.type == "cpu":
                return self._call(func, (input, *args), kwargs)
            data, batch_sizes = self._call(func, (move(input, torch.device("cpu")), *args), kwargs)
            return move(data, device), batch_sizes

        return call

    def _reading_data(self, factory: Callable[..., Any]) -> Callable[..., Any]:
        def read(*args: Any, **kwargs: Any) -> Any:
            if factory is torch.Tensor.new_tensor:  # (self, data, ...): the result follows self unless told
                self_, data, *rest = args
                kwargs.setdefault("device", device_of(self_))
                kwargs.setdefault("dtype", self_.dtype)
                return self._call(torch.tensor, (_cpu_data(data), *rest), kwargs)
            data, *rest = args
            if isinstance(data, torch.Tensor) and kwargs.get("device") is None:
                kwargs["device"] = device_of(data)  # `torch.tensor(t)` copies `t` where it is, as PyTorch does
            return self._call(factory, (_cpu_data(data), *rest), kwargs)

        return read

    def _type(self, t: torch.Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        # Tensor.type: no argument names the legacy type; a legacy type (class or name) or a dtype converts
        dtype = kwargs.pop("dtype", dtype)
        if dtype is None:
            return type_name(t)
        cuda: bool | None
        if isinstance(dtype, type) and issubclass(dtype, torch.Tensor) and dtype.__name__ not in _LEGACY_TYPES:
            # `t.type(torch.Tensor)`, `t.type(type(x.data))` (ssd.pytorch): the default tensor type
            cuda, target = self.state.default_cuda, torch.get_default_dtype()
        else:
            cuda, target = _legacy_target(dtype)
        if cuda is None:
            device = device_of(t)
        elif cuda:
            device = device_of(t) if is_pretend(t) else torch.device("cuda", self.state.current)
        else:
            device = torch.device("cpu")
        if device_of(t) == device and t.dtype == target:
            return t
        return self._to(t, device, target)

    def _new(self, t: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        # the legacy `t.new(...)` (sizes, data, or nothing): a tensor of `t`'s type, on `t`'s device unless told
        device = kwargs.pop("device", None)
        made: torch.Tensor = torch.Tensor.new(real_tensor(t), *_cpu_data(args), **kwargs)
        target = device_of(t) if device is None else torch.device(device)
        if target.type == "cuda":
            return move(made, self.state.resolve(target))
        return made

    @staticmethod
    def _share_memory(t: torch.Tensor) -> torch.Tensor:
        # as on a GPU: a no-op for a tensor on a (pretend) GPU; a CPU tensor moves to shared memory
        if is_pretend(t):
            return t
        shared: torch.Tensor = torch.Tensor.share_memory_(t)  # type: ignore[no-untyped-call]
        return shared

    def _cuda(self, t: torch.Tensor, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> torch.Tensor:
        target = self.state.resolve("cuda" if device is None else device)
        return self._to(t, target, **kwargs)

    def _cpu(self, t: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        return self._to(t, torch.device("cpu"), **kwargs)

    @staticmethod
    def _set_data(t: torch.Tensor, value: torch.Tensor) -> None:
        # The C++ setter copies the wrapper's sizes and strides, not the Python-held CPU data or pretend device.
        if isinstance(t, PretendTensor) and isinstance(value, PretendTensor):
            _DATA.__set__(t, value)
            t._elem = value._elem
            t._pretend_device = value._pretend_device
        elif isinstance(t, PretendTensor) or isinstance(value, PretendTensor):
            raise _incompatible()
        else:
            _DATA.__set__(t, value)

    @staticmethod
    def _set_grad(t: torch.Tensor, grad: torch.Tensor | None) -> None:
        # PyTorch's checks in ``Tensor.grad``'s setter, made against the pretend devices
        if grad is not None and device_of(grad).type != device_of(t).type:
            raise RuntimeError("assigned grad has data of a different type")
        if grad is not None and device_of(grad) != device_of(t):
            raise RuntimeError("assigned grad has data located on a different device")
        _GRAD.__set__(t, grad)


@contextlib.contextmanager
def _without_onednn() -> Iterator[None]:
    # torch.backends.mkldnn.flags() would also set oneDNN's TF32 switch, which warns on a build without Intel GPUs
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)


def _cpu_data(data: Any) -> Any:
    """``data`` for a tensor factory, with every pretend tensor in it replaced by its CPU data.

    A ``torch.Size`` stays one: ``t.new(t.size())`` and ``torch.cuda.FloatTensor(t.size())`` read it as sizes, where a
    plain tuple would be data.
    """
    return tree_map(
        lambda x: real_tensor(x).detach() if is_pretend(x) else x,
        data,
        is_leaf=lambda x: isinstance(x, torch.Size),
    )


def _legacy_target(dtype: Any) -> tuple[bool | None, torch.dtype]:
    """What ``Tensor.type(dtype)`` asks for: (True: a CUDA type, False: a CPU type, None: any device; the dtype)."""
    if isinstance(dtype, torch.dtype):
        return None, dtype
    name = dtype if isinstance(dtype, str) else f"{getattr(dtype, '__module__', '')}.{getattr(dtype, '__name__', '')}"
    cuda = name.startswith("torch.cuda.")
    short = name.rpartition(".")[2]
    if short not in _LEGACY_TYPES:
        raise ValueError(f"invalid type: {name!r}")
    return cuda, _LEGACY_TYPES[short]


def _incompatible() -> RuntimeError:
    # PyTorch's message (two spaces included) for ``cpu_tensor.data = cuda_tensor`` on a GPU
    return RuntimeError(
        "Attempted to call `variable.set_data(tensor)`, but `variable` and  `tensor` have incompatible tensor type."
    )


def _compatible_shallow_copy_type(original: Callable[[torch.Tensor, torch.Tensor], bool]) -> Callable[..., bool]:
    # A CPU tensor and a tensor on a GPU are not interchangeable in place; Module._apply asks this to choose
    # between ``param.data = moved`` (same device type) and a new Parameter (cpu <-> cuda), as on a GPU.
    def compatible(input: torch.Tensor, from_: torch.Tensor) -> bool:  # PyTorch's parameter names
        return is_pretend(input) == is_pretend(from_) and original(input, from_)

    return compatible


#: Products that take a sparse operand: run as composites (see ``_COMPOSITES``) when one of the two is sparse.
_SPARSE_PRODUCTS: tuple[Callable[..., Any], ...] = (
    torch.sparse.mm,
    torch.mm,
    torch.matmul,
    torch.Tensor.mm,
    torch.Tensor.matmul,
    torch.Tensor.__matmul__,
)
#: Composite ops whose C++ code makes temporaries with its input's options (masks, workspaces), or whose CPU kernel
#: (oneDNN's RNN layer) keeps state a wrapper cannot carry through autograd: they run with those temporaries taking
#: the device of their inputs, and without oneDNN.
_COMPOSITES: tuple[Callable[..., Any], ...] = (
    torch.nn.functional.scaled_dot_product_attention,
    torch.nn.functional.multi_head_attention_forward,  # calls the above where the mode does not see it
    torch._native_multi_head_attention,
    torch._transformer_encoder_layer_fwd,
    torch.lstm,
    torch.gru,
    torch.rnn_tanh,
    torch.rnn_relu,
    torch.nn.functional.one_hot,  # zeros with its input's options, then a scatter of the input
    torch.ctc_loss,
    torch.nn.functional.ctc_loss,  # calls the above where the mode does not see it
    torch.combinations,
    torch.quantile,
    torch.nanquantile,
)

_PARSE_TO = torch._C._nn._parse_to
_REAL_DEVICE = torch.device
_REAL_GENERATOR = torch.Generator


class _DeviceMeta(type):
    """``torch.device`` under pretend: ``torch.device(0)`` is ``cuda:0``.

    A CPU-only build has no accelerator to give an integer its type; everything else, ``isinstance`` included, is
    PyTorch's own ``torch.device``.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], int) and not isinstance(args[0], bool):
            return _REAL_DEVICE("cuda", args[0])
        return _REAL_DEVICE(*args, **kwargs)

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _REAL_DEVICE)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _REAL_DEVICE)


class _Device(metaclass=_DeviceMeta):
    """Stands in for ``torch.device`` inside :func:`pretend_cuda`."""


class _GeneratorMeta(type):
    """``torch.Generator`` under pretend: ``torch.Generator(device="cuda")`` is a CPU generator.

    Random numbers come from the CPU here; everything else, ``isinstance`` included, is PyTorch's own
    ``torch.Generator``.
    """

    def __call__(cls, device: Any = "cpu") -> Any:
        if (isinstance(device, int) and not isinstance(device, bool)) or _REAL_DEVICE(device).type == "cuda":
            return _REAL_GENERATOR()
        return _REAL_GENERATOR(device)

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _REAL_GENERATOR)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _REAL_GENERATOR)


class _Generator(metaclass=_GeneratorMeta):
    """Stands in for ``torch.Generator`` inside :func:`pretend_cuda`."""


def _parse_to_with_ordinals(parse_to: Callable[..., Any]) -> Callable[..., Any]:
    """``torch._C._nn._parse_to`` (what ``Module.to`` reads its arguments with) that reads an integer as ``cuda:i``."""

    def ordinal(x: Any) -> Any:
        return _REAL_DEVICE("cuda", x) if isinstance(x, int) and not isinstance(x, bool) else x

    def parse(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = (ordinal(args[0]), *args[1:])
        if "device" in kwargs:
            kwargs["device"] = ordinal(kwargs["device"])
        return parse_to(*args, **kwargs)

    return parse


_PARSE_TO_WITH_ORDINALS = _parse_to_with_ordinals(_PARSE_TO)


def _comm_functions(state: _State) -> dict[str, Any]:
    """Replacements for ``torch.nn.parallel.comm`` (``nn.DataParallel``'s copies between GPUs), made of moves."""

    def cuda(device: Any) -> torch.device:
        return state.resolve(device)

    def scatter(
        tensor: Any, devices: Any = None, chunk_sizes: Any = None, dim: int = 0, streams: Any = None, *, out: Any = None
    ) -> tuple[torch.Tensor, ...]:
        if out is not None:
            devices = [device_of(o) for o in out]
        chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes else tensor.chunk(len(devices), dim)
        moved = tuple(move(c.contiguous(), cuda(d)) for c, d in zip(chunks, devices, strict=True))
        if out is not None:
            for target, chunk in zip(out, moved, strict=True):
                target.copy_(chunk)
            return tuple(out)
        return moved

    def gather(tensors: Any, dim: int = 0, destination: Any = None, *, out: Any = None) -> torch.Tensor:
        if out is not None:
            copied: torch.Tensor = out.copy_(torch.cat([move(t, device_of(out)) for t in tensors], dim))
            return copied
        target = (
            torch.device("cpu")
            if destination == -1 or destination == "cpu"
            else cuda(state.current if destination is None else destination)
        )
        return torch.cat([move(t, target) for t in tensors], dim)

    def broadcast(tensor: Any, devices: Any = None, *, out: Any = None) -> tuple[torch.Tensor, ...]:
        if out is not None:
            return tuple(o.copy_(move(tensor, device_of(o))) for o in out)
        return tuple(move(tensor, cuda(d)) for d in devices)

    def broadcast_coalesced(tensors: Any, devices: Any, buffer_size: int = 0) -> tuple[tuple[torch.Tensor, ...], ...]:
        return tuple(tuple(move(t, cuda(d)) for t in tensors) for d in devices)

    def reduce_add(inputs: Any, destination: Any = None) -> torch.Tensor:
        target = cuda(state.current if destination is None else destination)
        total = move(inputs[0], target).clone()
        for t in inputs[1:]:
            total += move(t, target)
        return total

    def reduce_add_coalesced(inputs: Any, destination: Any = None, buffer_size: int = 0) -> tuple[torch.Tensor, ...]:
        return tuple(reduce_add(list(column), destination) for column in zip(*inputs, strict=True))

    return {
        "scatter": scatter,
        "gather": gather,
        "broadcast": broadcast,
        "broadcast_coalesced": broadcast_coalesced,
        "reduce_add": reduce_add,
        "reduce_add_coalesced": reduce_add_coalesced,
    }


def _sequential_parallel_apply(modules: Any, inputs: Any, kwargs_tup: Any = None, devices: Any = None) -> list[Any]:
    """``nn.DataParallel``'s ``parallel_apply``, run replica by replica on this thread.

    The pretend GPUs' function mode is per thread, and on a CPU the replicas run one after the other anyway.
    """
    kwargs_tup = kwargs_tup or ({},) * len(modules)
    devices = devices or [None] * len(modules)
    outputs = []
    for module, args, kwargs, device in zip(modules, inputs, kwargs_tup, devices, strict=True):
        with torch.cuda.device(device):
            args = args if isinstance(args, list | tuple) else (args,)
            outputs.append(module(*args, **kwargs))
    return outputs


PATCHED_CUDA_FUNCTIONS: tuple[str, ...] = tuple(_cuda_functions(_State(1)))
"""The ``torch.cuda`` attributes replaced inside :func:`pretend_cuda` (restored on exit)."""

PATCHED_ACCELERATOR_FUNCTIONS: tuple[str, ...] = tuple(_accelerator_functions(_State(1)))
"""The ``torch.accelerator`` attributes replaced inside :func:`pretend_cuda` (restored on exit)."""


def _swapping(apply: Callable[..., Any]) -> Callable[..., Any]:
    """``nn.Module._apply`` (``Module.to``/``cuda``/``cpu``/``half``...) that keeps each ``nn.Parameter`` object.

    It swaps the parameter's contents with its moved copy (``torch.utils.swap_tensors``, PyTorch's own
    ``swap_module_params_on_conversion``, on for this call only), as a GPU keeps the object with ``param.data =
    moved``: optimizers built before the move, tied weights and hooks keep seeing the module's parameters.
    """

    def _apply(module: torch.nn.Module, fn: Any, recurse: bool = True) -> Any:
        if getattr(_APPLYING, "on", False):  # a submodule, from its parent's _apply: the parent decides
            return apply(module, fn, recurse)
        swapping = torch.__future__.get_swap_module_params_on_conversion()
        tied = _parameter_owners(module) if recurse else {}
        # swap_tensors cannot swap a parameter that does not require grad while a graph holds it (it asks for the
        # gradient edge): frozen parameters (`requires_grad = False` for a GAN's discriminator) require grad for
        # the swap, and are frozen again after it
        named = module.named_parameters() if recurse else module._parameters.items()
        frozen = {name for name, p in named if p is not None and not p.requires_grad and p.is_leaf}
        _require_grad(module, frozen, recurse, True)
        torch.__future__.set_swap_module_params_on_conversion(True)
        _APPLYING.on = True
        try:
            return apply(module, fn, recurse)
        except RuntimeError as error:
            if "Couldn't swap" not in str(error):
                raise
        finally:
            _APPLYING.on = False
            torch.__future__.set_swap_module_params_on_conversion(swapping)
            _require_grad(module, frozen, recurse, False)
        # A parameter an autograd graph still holds (an output computed before the move, kept alive) cannot be
        # swapped; a GPU moves it anyway (``param.data = moved``). Here it becomes a new Parameter on the pretend
        # GPU, as PyTorch's non-swapping path makes one, and tied weights stay tied. What was already swapped
        # moves to the same device again, which changes nothing.
        torch.__future__.set_swap_module_params_on_conversion(False)
        _APPLYING.on = True
        try:
            result = apply(module, fn, recurse)
        finally:
            _APPLYING.on = False
            torch.__future__.set_swap_module_params_on_conversion(swapping)
        for owners in tied.values():
            (first, first_name), *rest = owners
            for owner, name in rest:
                owner._parameters[name] = first._parameters[first_name]
        return result

    return _apply


def _require_grad(module: torch.nn.Module, names: set[str], recurse: bool, value: bool) -> None:
    """Set ``requires_grad`` of the parameters ``names`` of ``module`` (from ``named_parameters()``)."""
    if not names:
        return
    named = module.named_parameters() if recurse else module._parameters.items()
    for name, param in named:
        if name in names and param is not None and (param.is_floating_point() or param.is_complex()):
            param.requires_grad_(value)


#: Whether this thread is inside :func:`_swapping`'s outermost ``_apply`` (submodules' calls go straight through).
_APPLYING = threading.local()


def _parameter_owners(module: torch.nn.Module) -> dict[int, list[tuple[torch.nn.Module, str]]]:
    """Parameters held by more than one module or name (tied weights): id -> every (module, name) holding it."""
    owners: dict[int, list[tuple[torch.nn.Module, str]]] = {}
    for owner in module.modules():
        for name, param in owner._parameters.items():
            if param is not None:
                owners.setdefault(id(param), []).append((owner, name))
    return {key: held for key, held in owners.items() if len(held) > 1}


class _Storages:
    """Storage locations in ``torch.save`` files: a pretend tensor is saved as ``cuda:i``, as on a GPU.

    Registered with ``torch.serialization.register_package`` (before PyTorch's own): the tagger names the location
    of the host copies :class:`PretendTensor` pickles (``SAVED_LOCATIONS``); while pretend GPUs are on, the
    deserializer reads a ``cuda:i`` storage onto the CPU and remembers it, and ``torch.load`` then moves every
    tensor on such a storage to its pretend GPU. Without pretend GPUs a ``cuda:i`` storage is PyTorch's to load
    (a CPU-only machine then needs ``map_location``, as for any GPU checkpoint).
    """

    def __init__(self) -> None:
        self.state: _State | None = None  # the pretend GPUs while a pretend_cuda block is on
        self.loaded: dict[int, str] = {}  # data_ptr of a storage read from cuda:i -> "cuda:i"

    def tag(self, storage: Any) -> str | None:
        if getattr(storage, "device", None) is None or storage.device.type != "cpu":
            return None
        return SAVED_LOCATIONS.pop(storage.data_ptr(), None)

    def restore(self, storage: Any, location: str) -> Any:
        if self.state is None or not location.startswith("cuda"):
            return None
        self.state.resolve(location)  # a GPU the pretend machine does not have fails here, as on a GPU
        self.loaded[storage.data_ptr()] = location
        return storage


_STORAGES = _Storages()
torch.serialization.register_package(5, _STORAGES.tag, _STORAGES.restore)


def unpickle_onto_pretend_device(host: torch.Tensor, device: str, param: bool) -> torch.Tensor:
    """Rebuild a tensor that ``pickle`` wrote from a pretend GPU: on that GPU again, as PyTorch's unpickling does.

    Not public API: pickles written under pretend GPUs name this function.

    Args:
        host: The tensor's data on the CPU (any shape and dtype), with its ``requires_grad``.
        device: The pretend device it was on (``"cuda:1"``).
        param: Whether it was an ``nn.Parameter`` (it comes back as one).

    Returns:
        The same values on ``device`` inside a :func:`pretend_cuda` block; outside one, ``host`` itself (there is no
        pretend GPU to put it on).

    Raises:
        RuntimeError: ``device`` names a GPU the pretend machine does not have, as unpickling onto a missing GPU
            fails in PyTorch.
    """
    state = _STORAGES.state
    placed = host if state is None else place_data(host, state.resolve(device)).requires_grad_(host.requires_grad)
    return torch.nn.Parameter(placed, host.requires_grad) if param else placed


def _saving_locations(save: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.save`` during which pretend tensors record their location (see :class:`_Storages`)."""

    def pretend_save(*args: Any, **kwargs: Any) -> Any:
        marker = object()
        SAVING.append(marker)
        try:
            return save(*args, **kwargs)
        finally:
            SAVING.remove(marker)
            if not SAVING:
                SAVED_LOCATIONS.clear()

    return pretend_save


def _load_onto_pretend_devices(load: Callable[..., Any], state: _State) -> Callable[..., Any]:
    """``torch.load`` that puts what a GPU saved, or what ``map_location="cuda[:i]"`` asks for, on pretend GPUs.

    PyTorch would build CUDA storages, which a CPU-only build cannot: the file is read onto the CPU and the tensors
    are then moved to their pretend device (modules in the file keep their ``nn.Parameter`` objects). Other
    ``map_location`` values (dicts, callables, ``"cpu"``) pass through unchanged.
    """

    def pretend_load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        target = None
        if isinstance(map_location, str | torch.device) and torch.device(map_location).type == "cuda":
            target = state.resolve(map_location)
            map_location = "cpu"
        _STORAGES.loaded.clear()
        try:
            loaded = load(f, map_location, *args, **kwargs)
            where = dict(_STORAGES.loaded)
        finally:
            _STORAGES.loaded.clear()
        if target is None and not where:
            return loaded

        def device_for(t: torch.Tensor) -> torch.device | None:
            if target is not None:
                return target
            if is_pretend(t) or t.device.type != "cpu":
                return None
            location = where.get(t.untyped_storage().data_ptr())
            return None if location is None else state.resolve(location)

        def place(x: Any) -> Any:
            if isinstance(x, torch.nn.Module):
                return x._apply(lambda t: t if (d := device_for(t)) is None else move(t, d))  # type: ignore[no-untyped-call]
            if isinstance(x, torch.optim.Optimizer):  # `torch.save(optimizer)`: its state, keyed by parameters
                for param_state in x.state.values():
                    for key, value in list(param_state.items()):
                        param_state[key] = tree_map(place, value)
                return x
            if isinstance(x, torch.Tensor):
                device = device_for(x)
                if device is None:
                    return x
                # a loaded tensor is a leaf on its device, a Parameter stays one, as a GPU's torch.load gives
                placed = place_data(x, device).requires_grad_(x.requires_grad)
                return torch.nn.Parameter(placed, x.requires_grad) if isinstance(x, torch.nn.Parameter) else placed
            return x

        return tree_map(place, loaded)

    return pretend_load


def _at_the_users_line(show: Callable[..., None]) -> Callable[..., None]:
    """``warnings.showwarning`` that moves a warning raised inside ferry's frames to the user's line."""

    def located(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if filename.startswith(_FERRY_DIR):
            frame = user_frame()
            while frame is not None and frame.f_code.co_filename == warnings.__file__:  # `warn` itself
                frame = user_frame_above(frame)
            if frame is not None:
                filename, lineno, line = frame.f_code.co_filename, frame.f_lineno or 0, None
        show(message, category, filename, lineno, file, line)

    return located


def _with_mode_on(apply: Callable[..., Any], mode: TorchFunctionMode) -> Callable[..., Any]:
    """``BackwardCFunction.apply`` (which runs a user's ``autograd.Function.backward``) with ``mode`` on.

    ``loss.backward()`` reaches the pretend mode's ``__torch_function__``, and a mode is off while its own handler
    runs, so the whole backward pass would run without it: ``torch.zeros(x.size()).type_as(x)`` in a user's backward
    (pytorch-grad-cam's guided backpropagation) would stay on the CPU where a GPU gives a CUDA tensor.
    """

    def run_backward(self: Any, *args: Any) -> Any:
        if mode in _get_current_function_mode_stack():  # type: ignore[no-untyped-call]
            return apply(self, *args)
        with mode:
            return apply(self, *args)

    return run_backward


@contextlib.contextmanager
def pretend_cuda(device_count: int = 1) -> Iterator[None]:
    """Pretend this machine has ``device_count`` CUDA GPUs, for the duration of the ``with`` block.

    Tensors moved or created on ``cuda:i`` keep their data on the CPU but report ``cuda:i`` and are checked as
    PyTorch checks tensors on a GPU (see the module docstring for what this models and what it cannot).

    Args:
        device_count: How many pretend GPUs ``torch.cuda.device_count()`` reports; ``cuda:0`` to
            ``cuda:{device_count - 1}`` exist.

    Yields:
        None. On exit the ``torch.cuda`` functions in :data:`PATCHED_CUDA_FUNCTIONS` and the default device are
        restored exactly. Pretend tensors that outlive the block keep their pretend device.

    Raises:
        ValueError: ``device_count`` is below 1.
        RuntimeError: inside the block, as on a GPU, when an op mixes devices or names a GPU that does not exist.

    Example:
        >>> import torch
        >>> with pretend_cuda(device_count=2):
        ...     x = torch.ones(2).to("cuda:1")
        ...     (torch.cuda.is_available(), x.device, (x * 2).device)
        (True, device(type='cuda', index=1), device(type='cuda', index=1))
    """
    if device_count < 1:
        raise ArgumentError(f"pretend_cuda(device_count={device_count}): pretend at least one GPU, device_count=1.")
    state = _State(device_count)
    # torch._dynamo registers torch.cuda and torch._C functions when first imported (the optimizers import it):
    # import it now, so that it registers PyTorch's functions and not the replacements below.
    import torch._dynamo
    import torch.backends.cudnn
    import torch.nn.parallel._functions
    import torch.nn.parallel.comm
    import torch.nn.parallel.data_parallel
    import torch.utils.data._utils.pin_memory

    patches: list[tuple[Any, str, Any]] = [
        *((torch.cuda, name, value) for name, value in _cuda_functions(state).items()),
        *((torch.accelerator, name, value) for name, value in _accelerator_functions(state).items()),
        *((torch.nn.parallel.comm, name, value) for name, value in _comm_functions(state).items()),
        (sys.modules["torch.nn.parallel.data_parallel"], "parallel_apply", _sequential_parallel_apply),
        (
            torch,
            "_has_compatible_shallow_copy_type",
            _compatible_shallow_copy_type(torch._has_compatible_shallow_copy_type),
        ),
        (torch, "load", _load_onto_pretend_devices(torch.load, state)),
        (torch, "save", _saving_locations(torch.save)),
        (torch, "device", _Device),
        *((torch, name, _cpu_legacy_type(name)) for name in _LEGACY_TYPES),
        (torch, "set_default_tensor_type", _default_tensor_type(torch.set_default_tensor_type, state)),
        (torch.Tensor, "__new__", _TENSOR_NEW),  # given back at the end, whatever the program left as default type
        (torch, "Generator", _Generator),
        (torch, "Stream", _Stream),
        (torch, "Event", _Event),
        # the DataLoader pins batches on a thread of its own, where the pretend mode is not on: nothing to pin
        (sys.modules["torch.utils.data._utils.pin_memory"], "pin_memory", lambda data, device=None: data),
        (torch._C._nn, "_parse_to", _PARSE_TO_WITH_ORDINALS),
        (sys.modules["torch.nn.parallel._functions"], "_streams", None),  # sized by the device count: new GPUs
        (torch.backends.cudnn, "is_acceptable", lambda tensor: False),  # no cuDNN here, and no warning about it
    ]
    patches.append((torch.nn.Module, "_apply", _swapping(torch.nn.Module._apply)))
    mode = _PretendMode(state)
    backward = torch.autograd.function.BackwardCFunction
    patches.append((backward, "apply", _with_mode_on(backward.apply, mode)))
    # PyTorch's own warnings (TORCH_WARN) point at the innermost Python frame: under the pretend mode that is ours
    patches.append((warnings, "showwarning", _at_the_users_line(warnings.showwarning)))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    default_device = torch.utils._device.CURRENT_DEVICE
    try:
        for owner, name, replacement in patches:
            setattr(owner, name, replacement)
        _STORAGES.state = state
        with mode:
            try:
                yield
            finally:
                _STORAGES.state = None
                if torch.utils._device.CURRENT_DEVICE != default_device:
                    torch.set_default_device(default_device)
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)
