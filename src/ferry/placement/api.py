"""Moving tensors, batches, modules and optimizer state between devices.

The walk through nested containers lives in :mod:`ferry.placement.walk`; this module holds the public API and the
module and optimizer logic.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from collections import Counter
from collections.abc import Iterator
from typing import Any, TypeVar

import torch
from torch import nn

from ferry.devices import DeviceLike, resolve_device
from ferry.errors import ArgumentError, DeviceMismatchError, MixedDeviceError, PlacementWarning
from ferry.placement.walk import _check_dtype, _input_tensors, _key, _Mover

__all__ = ["DeviceReport", "check_devices", "module_device", "offload", "place", "to_device"]

T = TypeVar("T")
M = TypeVar("M", bound=nn.Module)

_CPU = torch.device("cpu")
_SHOWN = 3  # tensor names listed per device in MixedDeviceError
_LISTED = 10  # mismatches listed in DeviceMismatchError


def to_device(obj: T, device: DeviceLike, *, dtype: torch.dtype | None = None, non_blocking: bool = False) -> T:
    """Return ``obj`` with every tensor in it on ``device``.

    Walks tensors, ``dict`` (``OrderedDict``, ``defaultdict`` with its ``default_factory``, other mappings),
    ``list``, ``tuple``, namedtuples, ``set``/``frozenset`` (tensors hash by identity, so a set of tensors is rebuilt
    as a set of the moved tensors, of the same type) and dataclass instances (frozen ones too; fields are set on a
    shallow copy, so ``__init__``/``__post_init__`` do not run again), to any depth. Containers are rebuilt: ``obj``
    itself is not modified; a namedtuple, tuple subclass (``torch.Size``), frozenset or frozen dataclass in which
    nothing moved comes back as the same object. Objects with their own ``.to(device)`` (HF ``BatchEncoding``, PyG
    ``Data``) are handed to it; if it moves in place and returns ``None``, the object itself is returned. An
    ``nn.Module`` inside ``obj`` is moved in place and returned, as ``Module.to`` does: the one exception to ``obj``
    being left unmodified (copying a model to move it would double its memory). Anything else passes through untouched,
    generators and other iterators included: they are not consumed, so tensors they would yield are not moved. A
    tensor or container that occurs twice comes back as one object in both places.

    Each tensor is moved with ``Tensor.to``, so one already on ``device`` (with the right dtype) is returned as-is,
    not copied, and an ``nn.Parameter`` that has to move comes back as a plain tensor.

    Args:
        obj: A tensor, or a nested structure holding tensors.
        device: Target device, e.g. ``"cuda:1"`` or ``"meta"``.
        dtype: If given, floating point and complex tensors are cast to it; integer and bool tensors keep their
            dtype (as with ``Module.to``). Objects with their own ``.to`` are only moved, not cast.
        non_blocking: Copy asynchronously where possible. Copies to the CPU are waited for (one synchronize per
            source device) before returning, so the result never holds stale data. Copies from pageable (not
            pinned) CPU memory to CUDA are issued non-blocking either way, as Lightning does: CUDA has read the
            source when the call returns and orders later GPU work after the copy, so this only saves a wait.

    Returns:
        The same structure and container types as ``obj``, every tensor on ``device``.

    Warns:
        PlacementWarning: tensors that stay behind because the walk does not reach them: in attributes of plain
            objects without ``.to``, or in attributes of a dataclass that are not fields (the message names them).

    Raises:
        DeviceError: ``device`` does not exist on this machine.
        ArgumentError: ``dtype`` is not a floating point or complex ``torch.dtype``, ``obj`` contains itself, or a
            mapping or set subclass cannot be rebuilt from its moved contents. ``ArgumentError`` is also a
            ``TypeError`` and a ``ValueError``, the built-in errors these cases raised before.

    Example:
        >>> batch = {"x": torch.ones(2, 3), "ids": [torch.arange(3)], "name": "a"}
        >>> out = to_device(batch, "meta", dtype=torch.float16)
        >>> out["x"].device, out["x"].dtype, out["ids"][0].dtype, out["name"]
        (device(type='meta'), torch.float16, torch.int64, 'a')
    """
    _check_dtype(dtype)
    mover = _Mover(resolve_device(device), dtype, non_blocking)
    out: T = mover.run(obj)
    mover.finish()
    if mover.left:
        warnings.warn(
            f"to_device left tensors where they are: {'; '.join(mover.left)}. to_device rebuilds dicts, lists, "
            "tuples, sets and dataclass fields, and hands objects with a .to(device) method to it; tensors in other "
            "attributes are not reached. Make them dataclass fields, give the class a .to(device) method, or move "
            "them yourself.",
            PlacementWarning,
            stacklevel=2,
        )
    return out


def _type_name(obj: object) -> str:
    tp = type(obj)
    return tp.__qualname__ if tp.__module__ == "builtins" else f"{tp.__module__}.{tp.__qualname__}"


def _require_module(module: object, call: str, fix: str) -> None:
    """Raise ``ArgumentError`` unless ``module`` is an ``nn.Module``; ``call`` and ``fix`` complete the message."""
    if isinstance(module, nn.Module):
        return
    if isinstance(module, torch.Tensor):
        fix = f"{fix} For tensors, use ferry.to_device(t, device); a tensor's own device is t.device."
    raise ArgumentError(f"{call} needs an nn.Module as its first argument, got a {_type_name(module)}. {fix}")


def _require_optimizer(optimizer: object, module: nn.Module) -> None:
    """Raise ``ArgumentError`` unless ``optimizer`` is an optimizer over (a subset of) ``module``'s parameters."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ArgumentError(
            f"optimizer must be a torch.optim.Optimizer, got a {_type_name(optimizer)}. place moves the state of one "
            "optimizer. Pass the optimizer itself (optimizer=opt, not a list), call place once per optimizer, or, for "
            "a wrapper, pass the torch optimizer it wraps."
        )
    owned = {id(p) for _, p in module.named_parameters(remove_duplicate=False)}
    params = {id(p): p for group in optimizer.param_groups for p in group["params"]}
    foreign = [p for key, p in params.items() if key not in owned]
    if foreign:
        shapes = ", ".join(str(tuple(p.shape)) for p in foreign[:_SHOWN])
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        raise ArgumentError(
            f"{len(foreign)} of the optimizer's {len(params)} parameters are not parameters of this "
            f"{type(module).__name__} (shapes {shapes}{more}). place would move the module but leave them, and "
            "their optimizer state, where they are: was the optimizer built from another model, or before the model "
            "was re-created or copied? Pass the optimizer built from this module's parameters "
            f"(e.g. torch.optim.{type(optimizer).__name__}(model.parameters())), or place the model that holds all "
            "of them."
        )


def _canonical(device: torch.device) -> torch.device:
    if device.index is None and device.type not in ("cpu", "meta"):
        return torch.device(device.type, 0)
    return device


def _named_tensors(module: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    return itertools.chain(module.named_parameters(), module.named_buffers())


def module_device(module: nn.Module) -> torch.device:
    """Return the one device that holds all of ``module``'s parameters and buffers.

    Unlike ``next(module.parameters()).device``, never raises ``StopIteration`` and never lies about a module
    split over several devices.

    Args:
        module: Any module.

    Returns:
        The canonical device (``cuda:0``, never bare ``cuda``) of the parameters and buffers; ``cpu`` for a module
        that has neither (``nn.ReLU``), since that is where its outputs would be made from CPU inputs.

    Raises:
        ArgumentError: ``module`` is not an ``nn.Module``.
        MixedDeviceError: The parameters and buffers are on more than one device; the message names each device with
            the first tensors on it. For model parallelism on purpose, ask each part for its device instead.

    Example:
        >>> module_device(nn.Linear(2, 2).to("meta")), module_device(nn.ReLU())
        (device(type='meta'), device(type='cpu'))
    """
    _require_module(module, "ferry.module_device(module)", "Pass the model: ferry.module_device(model).")
    devices = {_canonical(t.device) for t in itertools.chain(module.parameters(), module.buffers())}
    if len(devices) <= 1:
        return devices.pop() if devices else _CPU
    names: dict[str, list[str]] = {}
    for name, t in _named_tensors(module):
        names.setdefault(str(_canonical(t.device)), []).append(name)
    listed = "; ".join(
        f"{device}: {', '.join(found[:_SHOWN])}" + (f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else "")
        for device, found in names.items()
    )
    raise MixedDeviceError(
        f"{type(module).__name__} has parameters and buffers on {len(names)} devices ({listed}). A module runs on "
        "one device: move all of it with ferry.place(model, device), or ask each part of a model that is split on "
        "purpose for its own device.",
        devices=names,
    )


def _left_behind(module: nn.Module, device: torch.device) -> list[str]:
    """``path (device)`` of each plain tensor attribute (not a parameter or buffer) that is not on ``device``."""
    return [
        f"{prefix + '.' if prefix else ''}{name} ({value.device})"
        for prefix, sub in module.named_modules()
        for name, value in vars(sub).items()
        if isinstance(value, torch.Tensor) and _canonical(value.device) != device
    ]


def _move_state(value: Any, param: torch.Tensor, key: Any, special_step: bool, cast: bool) -> Any:
    """Move one optimizer state entry next to its parameter, as ``Optimizer.load_state_dict`` would."""
    if key == "step" and isinstance(value, torch.Tensor):
        # torch keeps the scalar step on the CPU unless the optimizer is fused or capturable (pytorch#74424)
        return value.to(param.device, torch.float32) if special_step else value
    dtype = param.dtype if cast and param.is_floating_point() else None
    return _Mover(param.device, dtype, False).run(value)


def _repoint(optimizer: torch.optim.Optimizer, new: dict[int, nn.Parameter], cast: bool) -> None:
    """Point ``optimizer`` at the moved parameters and move its state next to them."""
    special: dict[int, bool] = {}
    for group in optimizer.param_groups:
        group["params"][:] = [new.get(id(p), p) for p in group["params"]]
        flag = bool(group.get("fused") or group.get("capturable"))
        special.update((id(p), flag) for p in group["params"])
    entries = list(optimizer.state.items())
    optimizer.state.clear()  # keep the object: a scheduler or wrapper may hold it
    for param, state in entries:
        param = new.get(id(param), param)
        optimizer.state[param] = (
            {k: _move_state(v, param, k, special.get(id(param), False), cast) for k, v in state.items()}
            if isinstance(state, dict)
            else state
        )


def _place(module: M, device: torch.device, optimizer: torch.optim.Optimizer | None, dtype: torch.dtype | None) -> M:
    before = list(module.named_parameters(remove_duplicate=False))  # also keeps the old Parameters alive
    module.to(device=device, dtype=dtype)
    if optimizer is not None:
        after = dict(module.named_parameters(remove_duplicate=False))
        new: dict[int, nn.Parameter] = {}
        for name, old in before:
            new.setdefault(id(old), after[name])
        _repoint(optimizer, new, cast=dtype is not None)
    left = _left_behind(module, device)
    if left:
        warnings.warn(
            f"{type(module).__name__} is now on {device}, but Module.to does not move plain tensor attributes: "
            f"{', '.join(left)} stayed behind. Register each as a buffer so it moves with the module: "
            'self.register_buffer("name", tensor, persistent=False).',
            PlacementWarning,
            stacklevel=3,
        )
    return module


def place(
    module: M,
    device: DeviceLike,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    dtype: torch.dtype | None = None,
) -> M:
    """Move ``module`` to ``device`` in place, with its optimizer state, and return it.

    The module moves as with ``Module.to(device, dtype)``: parameters, buffers and gradients; ``dtype`` casts
    floating point and complex ones only. ``Module.to`` never touches optimizer state (pytorch#2830); ``place`` moves
    each state tensor next to its parameter (cast to the parameter's dtype when ``dtype`` is given), except that
    the scalar ``step`` stays on the CPU unless the optimizer is fused or capturable, as ``Optimizer.load_state_dict``
    does, so the next ``optimizer.step()`` works. Moves to some devices (``meta`` among them) make new Parameter
    objects; the optimizer's ``param_groups`` and ``state`` are repointed to them, matched by parameter name.
    Every argument is checked before anything moves.

    Args:
        module: The module to move; it is changed in place.
        device: Target device, e.g. ``"cuda:0"``.
        optimizer: The module's optimizer, if any. Its parameters must all be parameters of ``module`` (an optimizer
            over a submodule's parameters is fine); one that also holds other parameters is refused, as ``place``
            would leave those, and their state, on the old device.
        dtype: Floating point or complex dtype to cast to.

    Returns:
        ``module`` itself.

    Raises:
        DeviceError: ``device`` does not exist on this machine.
        ArgumentError: ``module`` is not an ``nn.Module``; ``optimizer`` is not a ``torch.optim.Optimizer`` or holds
            parameters that are not ``module``'s (the message says how many); ``dtype`` is not a floating point or
            complex ``torch.dtype``. Also a ``TypeError`` and ``ValueError``.

    Warns:
        PlacementWarning: Plain tensor attributes of the module or its submodules (neither parameters nor buffers)
            were left on another device; the message names their paths, e.g. ``encoder.cache``.

    Example:
        >>> model = nn.Linear(2, 2)
        >>> place(model, "meta", dtype=torch.float16) is model, model.weight.device, model.weight.dtype
        (True, device(type='meta'), torch.float16)
    """
    _require_module(
        module, "ferry.place(module, device)", "Pass the model to move: ferry.place(model, device, optimizer=opt)."
    )
    _check_dtype(dtype)
    if optimizer is not None:
        _require_optimizer(optimizer, module)
    return _place(module, resolve_device(device), optimizer, dtype)


def offload(module: M) -> M:
    """Move ``module`` to the CPU in place, like ``place(module, "cpu")``, and free the accelerator's cached memory.

    The caching allocator's free blocks go back to the driver (``torch.cuda.empty_cache()``; the MPS or other
    accelerator equivalent when the module was on one). CUDA is never initialised by this call. Memory still
    referenced elsewhere, e.g. by optimizer state, stays allocated: move that first with
    ``place(module, "cpu", optimizer=optimizer)``.

    Args:
        module: The module to move; it is changed in place.

    Returns:
        ``module`` itself, on the CPU.

    Raises:
        ArgumentError: ``module`` is not an ``nn.Module``.

    Warns:
        PlacementWarning: Plain tensor attributes were left on another device (see :func:`place`).

    Example:
        >>> offload(nn.Linear(2, 2)).weight.device
        device(type='cpu')
    """
    _require_module(module, "ferry.offload(module)", "Pass the model to move: ferry.offload(model).")
    sources = {t.device.type for t in itertools.chain(module.parameters(), module.buffers())}
    _place(module, _CPU, None, None)
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]  # does not initialise CUDA
        torch.cuda.empty_cache()
    for kind in sources - {"cpu", "meta", "cuda"}:
        backend = getattr(torch, kind, None)
        if backend is not None and hasattr(backend, "empty_cache"):
            backend.empty_cache()
    return module


@dataclasses.dataclass(frozen=True)
class DeviceReport:
    """Where a module's tensors and its inputs are, from :func:`check_devices`.

    Truthy when every tensor is on the module's device (``bool(report) == report.ok``), so
    ``if ferry.check_devices(model, x):`` reads as "if all is well".

    Attributes:
        device: The module's device: where most of its parameters and buffers are; for a module with neither, where
            most of the input tensors are (``cpu`` if there are none either).
        mismatches: ``(name, device)`` for each parameter, buffer or input tensor not on ``device``: dotted names
            for the module's tensors (``encoder.weight``), argument paths for inputs (``args[0]["input_ids"]``).
    """

    device: torch.device
    mismatches: tuple[tuple[str, torch.device], ...] = ()

    @property
    def ok(self) -> bool:
        """True when every tensor is on :attr:`device`."""
        return not self.mismatches

    def __bool__(self) -> bool:
        """Truthy when every tensor is on the module's device: the same as :attr:`ok`."""
        return self.ok

    def raise_if_bad(self) -> None:
        """Raise if any tensor is not on :attr:`device`.

        Raises:
            DeviceMismatchError: Listing each misplaced tensor with its device, and the fix.
        """
        if self.ok:
            return
        listed = ", ".join(f"{name} ({device})" for name, device in self.mismatches[:_LISTED])
        if len(self.mismatches) > _LISTED:
            listed += f" and {len(self.mismatches) - _LISTED} more"
        fixes = []
        if any(name.startswith(("args[", "kwargs[")) for name, _ in self.mismatches):
            fixes.append(f'batch = ferry.to_device(batch, "{self.device}")')
        if any(not name.startswith(("args[", "kwargs[")) for name, _ in self.mismatches):
            fixes.append(f'ferry.place(model, "{self.device}")')
        raise DeviceMismatchError(
            f"{len(self.mismatches)} tensor(s) not on the module's device {self.device}: {listed}. The forward pass "
            f"would fail with a device mismatch. Move them: {' and '.join(fixes)}.",
            mismatches=[(name, str(device)) for name, device in self.mismatches],
            expected=str(self.device),
        )

    def __str__(self) -> str:
        if self.ok:
            return f"all tensors on {self.device}"
        lines = [f"{len(self.mismatches)} tensor(s) not on {self.device}:"]
        lines += [f"  {name}: {device}" for name, device in self.mismatches]
        return "\n".join(lines)


def check_devices(module: nn.Module, /, *args: Any, **kwargs: Any) -> DeviceReport:
    """Report every parameter, buffer and input tensor that is not on ``module``'s device.

    Call it with the arguments you would pass to ``module(...)``; nested inputs are walked as :func:`to_device`
    walks them. Unlike :func:`module_device` this never raises for a misplaced tensor: for a module split over
    several devices, its device is the one holding most of its parameters and buffers (the first seen on a tie), and
    the others are reported. A module with no parameters or buffers (``nn.ReLU``) runs wherever its inputs are, so
    the reference is the device most common among the input tensors (the first seen on a tie), and only inputs that
    disagree with it are reported.

    Args:
        module: The module that would run.
        *args: Positional inputs, reported as ``args[0]``, ``args[0]["input_ids"]``, ``args[1].mask``, ...
        **kwargs: Keyword inputs, reported as ``kwargs["mask"]``.

    Returns:
        A :class:`DeviceReport`, truthy when all is well; call ``.raise_if_bad()`` on it to fail loudly.

    Raises:
        ArgumentError: ``module`` is not an ``nn.Module``.

    Example:
        >>> report = check_devices(nn.Linear(2, 2), torch.ones(1, 2, device="meta"), mask=torch.ones(1))
        >>> report.ok, report.mismatches
        (False, (('args[0]', device(type='meta')),))
    """
    _require_module(
        module,
        "ferry.check_devices(module, *args, **kwargs)",
        "Pass the module first, then its inputs as you would call it: ferry.check_devices(model, x, mask=mask).",
    )
    named = [(name, _canonical(t.device)) for name, t in _named_tensors(module)]
    inputs = itertools.chain(
        ((f"args[{i}]", arg) for i, arg in enumerate(args)), ((f"kwargs[{_key(k)}]", v) for k, v in kwargs.items())
    )
    given = [(name, _canonical(t.device)) for name, t in _input_tensors(inputs)]
    counts = Counter(device for _, device in named or given)
    device = counts.most_common(1)[0][0] if counts else _CPU  # most_common keeps first-seen order on a tie
    return DeviceReport(device, tuple((name, d) for name, d in named + given if d != device))
