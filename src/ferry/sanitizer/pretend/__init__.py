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
      and ``Module.cpu`` go through ``Tensor.to`` and, as on a GPU, replace each parameter by a new
      ``nn.Parameter`` when it moves between cpu and cuda, and keep it (``param.data = moved``) between GPUs.
    * ``torch.cuda`` functions are replaced for the duration (see :data:`PATCHED_CUDA_FUNCTIONS`) and restored
      exactly on exit, with the default device.

What it cannot model:
    * Kernels: every op runs the CPU kernel, so numerics are the CPU's (bitwise equal to the same script on the
      CPU, not to a GPU run: no TF32, different reduction order, cuDNN algorithms and atomics), and random numbers
      come from the CPU generator (``torch.cuda.manual_seed`` is a no-op; seed with ``torch.manual_seed``).
    * Memory: nothing is allocated on a GPU; ``memory_allocated()`` and friends answer 0, so out-of-memory errors,
      ``empty_cache`` and memory-dependent batch sizes are not exercised.
    * Speed: no asynchrony, no host-device transfer cost; ``synchronize``, streams and events are no-ops.
    * CUDA-only ops: custom CUDA kernels and extensions, Triton, ``torch.compile`` for cuda, flash/memory-efficient
      attention backends (SDPA falls back to the CPU math path), NCCL, CUDA graphs, ``pin_memory`` (a no-op here),
      cuDNN-specific errors, and ``torch.accelerator`` (it still reports no accelerator).
    * Mixed precision: ``torch.autocast("cuda")`` is accepted but changes no dtype (the CPU kernels run outside
      CUDA autocast), so float16 overflow and dtype-mismatch bugs under autocast do not show; ``GradScaler("cuda")``
      runs.
    * Ops written in C++ that read the real device (``torch.Generator(device="cuda")``, ``torch.Tensor.device``
      read through the C descriptor) see ``cpu``. Some ops word their mismatch error differently on a real GPU
      (``mm`` names the argument); here every mismatch uses ``TensorIterator``'s wording above.
    * ``torch.save`` of a pretend tensor writes CPU data: a checkpoint saved under pretend loads as CPU tensors.
    * ``torch.cuda`` functions not in :data:`PATCHED_CUDA_FUNCTIONS` (``get_rng_state``, ``nccl``, ``graphs``...)
      behave as on a CPU-only build. Function modes are per thread: ``device="cuda"`` works only on the thread that
      entered the block (pretend tensors keep their device and checks on every thread).

Meant for a machine without CUDA. On a CUDA machine the pretend devices never touch the GPU, but
``torch.cuda`` answers for the pretend GPUs until the context exits.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._device
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

from ferry.errors import ArgumentError
from ferry.sanitizer.pretend._tensor import PretendTensor, device_of, move

__all__ = ["PATCHED_CUDA_FUNCTIONS", "PretendTensor", "is_pretend", "pretend_cuda", "real_tensor"]


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

    def set_device(device: Any) -> None:
        state.current = index_of(device)

    class _device_ctx:  # stands in for the class torch.cuda.device
        def __init__(self, device: Any) -> None:
            self.index = -1 if device is None else index_of(device)
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
        "Stream": _Stream,
        "Event": _Event,
        "current_stream": lambda device=None: _Stream(device),
        "default_stream": lambda device=None: _Stream(device),
        "stream": lambda stream=None: contextlib.nullcontext(stream),
    }


# the ``Tensor.data`` and ``Tensor.grad`` descriptors, whose setters the mode intercepts
_DATA: Any = torch.Tensor.data
_GRAD: Any = torch.Tensor.grad

PATCHED_CUDA_FUNCTIONS: tuple[str, ...] = tuple(_cuda_functions(_State(1)))
"""The ``torch.cuda`` attributes replaced inside :func:`pretend_cuda` (restored on exit)."""


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
        }

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        handler = self.handlers.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
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


def _load_onto_pretend_devices(load: Callable[..., Any], state: _State) -> Callable[..., Any]:
    """``torch.load`` whose ``map_location="cuda[:i]"`` (a string or ``torch.device``) lands on pretend GPUs.

    PyTorch would build CUDA storages, which a CPU-only build cannot: the file is read onto the CPU and every tensor
    is then moved to the pretend device. Other ``map_location`` values (dicts, callables) pass through unchanged.
    """

    def pretend_load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        target = None
        if isinstance(map_location, str | torch.device) and torch.device(map_location).type == "cuda":
            target = state.resolve(map_location)
            map_location = "cpu"
        loaded = load(f, map_location, *args, **kwargs)
        if target is None:
            return loaded
        return tree_map(lambda x: move(x, target) if isinstance(x, torch.Tensor) else x, loaded)

    return pretend_load


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

    saved = {name: getattr(torch.cuda, name) for name in PATCHED_CUDA_FUNCTIONS}
    compatible = torch._has_compatible_shallow_copy_type
    load = torch.load
    default_device = torch.utils._device.CURRENT_DEVICE
    try:
        for name, replacement in _cuda_functions(state).items():
            setattr(torch.cuda, name, replacement)
        torch._has_compatible_shallow_copy_type = _compatible_shallow_copy_type(compatible)
        torch.load = _load_onto_pretend_devices(load, state)
        with _PretendMode(state):
            try:
                yield
            finally:
                if torch.utils._device.CURRENT_DEVICE != default_device:
                    torch.set_default_device(default_device)
    finally:
        for name, original in saved.items():
            setattr(torch.cuda, name, original)
        torch._has_compatible_shallow_copy_type = compatible
        torch.load = load
