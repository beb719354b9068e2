"""The checks, run before (and after) every torch operation by a :class:`~torch.overrides.TorchFunctionMode`.

While the handler runs, torch disables the mode, so the operations a checked call makes inside (``F.linear`` inside
``nn.Linear``, the ops a ``Tensor.__repr__`` uses) are not checked again: one check per operation the user's code
(or a module's forward) asks for. The common path is a few set look-ups and one pass over the tensor arguments;
frames, names and messages are only worked out once something is wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from functools import lru_cache
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, resolve_name

from ferry.errors import DeviceError, DeviceMismatchError
from ferry.sanitize._frames import SourceLine, is_library, source_line, user_frame
from ferry.sanitize._modules import ModuleStack
from ferry.sanitize._moves import MOVE_METHODS, is_discarded
from ferry.sanitize._syncs import SYNC_METHODS, AcceleratorTest

Tensor = torch.Tensor

#: Operations that legitimately take tensors on several devices: moves and copies, indexing with CPU indices, and
#: the ``*_as`` methods that only read the other tensor's size.
MIXING_ALLOWED = frozenset(
    getattr(Tensor, name)
    for name in "to copy_ type_as __getitem__ __setitem__ set_ new_tensor expand_as view_as reshape_as".split()
) | {torch._has_compatible_shallow_copy_type}  # Module.to asks it before swapping a parameter's data
#: Factory functions that build a tensor on the CPU unless given ``device=``.
FACTORIES = frozenset(
    getattr(torch, name)
    for name in "zeros ones empty full arange rand randn randint randperm tensor as_tensor eye linspace".split()
)

#: Reports a finding: (kind, where, message, error or None for a warning, frame).
Emit = Callable[[str, SourceLine, str, "Exception | None", "FrameType | None"], None]


_AVAILABLE = ("cpu", "meta")


def device_available(device_type: str) -> bool:
    """Whether this machine can serve ``device_type`` (``cpu`` and ``meta`` always; else ``torch.<type>``).

    The answer is cached per ``is_available`` function, so that :func:`ferry.sanitize.pretend.pretend_cuda`, which
    replaces ``torch.cuda.is_available`` for the duration of its block, is asked afresh inside and after it.
    """
    if device_type in ("cpu", "meta"):
        return True
    backend = getattr(torch, device_type, None)
    is_available = getattr(backend, "is_available", None)
    return _answer(device_type, is_available) if callable(is_available) else True


@lru_cache(maxsize=32)  # bounded: each pretend_cuda block brings its own is_available
def _answer(device_type: str, is_available: Callable[[], object]) -> bool:
    return bool(is_available())


class SanitizerMode(TorchFunctionMode):
    """Checks each torch operation; what it finds goes to ``emit`` and host syncs to ``count_sync``."""

    def __init__(
        self, *, emit: Emit, count_sync: Callable[[SourceLine], None], is_accelerator: AcceleratorTest
    ) -> None:
        super().__init__()
        self.emit = emit
        self.count_sync = count_sync
        self.is_accelerator = is_accelerator
        self.modules = ModuleStack()

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if kwargs is None:
            kwargs = {}
        if func in MOVE_METHODS:
            self._check_move(func, args, kwargs, sys._getframe(1))
        elif "device" in kwargs:
            self._check_available(kwargs["device"], func)
        if func in SYNC_METHODS and args and isinstance(args[0], Tensor) and self.is_accelerator(args[0].device):
            frame = user_frame()
            if frame is not None:
                self.count_sync(source_line(frame))
        if func not in MIXING_ALLOWED and _mixed(args, kwargs):
            self._check_devices(func, args, kwargs)
        result = func(*args, **kwargs)
        if func in FACTORIES and self.modules.stack and "device" not in kwargs:
            self._check_factory(func, result)
        return result

    # --- moves: discarded results and unavailable devices -------------------------------------------------------

    def _check_move(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], caller: FrameType) -> None:
        name = func.__name__
        target: Any = kwargs.get("device")
        if name in ("cuda", "mps", "xpu"):
            target = target if target is not None else (args[1] if len(args) > 1 else name)
        elif name == "to" and target is None:
            target = next((a for a in args[1:] if isinstance(a, (str, torch.device))), None)
        if target is not None:
            self._check_available(target, func)
        if not is_library(caller.f_code) and is_discarded(caller):
            where = source_line(caller)
            receiver = where.text.split(f".{name}(")[0].strip() if f".{name}(" in where.text else ""
            fix = f"`{receiver} = {where.text}`" if receiver.isidentifier() else "assign the result"
            self.emit(
                "discarded-tensor-move",
                where,
                f"result of Tensor.{name}() discarded at {where.described()}. Tensor.{name}() returns a new "
                f"tensor and leaves the original where it was (only Module.to moves in place). Keep the result: "
                f"{fix}.",
                None,
                caller,
            )

    def _check_available(self, target: Any, func: Any) -> None:
        if isinstance(target, int):
            return  # a bare index means the current accelerator; torch reports a bad one itself
        try:
            device_type = torch.device(target).type
        except (RuntimeError, TypeError):
            return
        if device_available(device_type):
            return
        frame = user_frame()
        if frame is None:
            return
        where = source_line(frame)
        message = (
            f"{_op(func)} asks for device {str(target)!r} at {where.described()}, but this machine has no "
            f"{device_type} (torch.{device_type}.is_available() is False). Choose the device at run time: "
            f"`device = ferry.pick_device()`, and inside a forward follow the input: `device=x.device`."
        )
        error = DeviceError(message, requested=str(target), available=[str(d) for d in _AVAILABLE])
        self.emit("hardcoded-cuda-device", where, message, error, frame)

    # --- device mismatch -------------------------------------------------------------------------------------

    def _check_devices(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        labelled = list(_labelled_tensors(args, kwargs))
        devices = {t.device for _, t in labelled}
        if any(d.type != "cpu" for d in devices):  # PyTorch lets 0-dim CPU tensors mix with any device
            labelled_checked = [(k, t) for k, t in labelled if not (t.device.type == "cpu" and t.dim() == 0)]
        else:
            labelled_checked = labelled
        if len({t.device for _, t in labelled_checked}) < 2:
            return
        frame = user_frame()
        where = source_line(frame) if frame is not None else SourceLine("<unknown>", 0, "")
        user_names = _names_in(frame)
        names = [
            user_names.get(id(t)) or self.modules.tensor_name(t) or label for label, t in labelled
        ]  # the user's variable, else the module's parameter name, else the argument's position
        expected = self._expected_device({t.device for _, t in labelled_checked})
        mismatches = [
            (name, str(t.device))
            for name, (_, t) in zip(names, labelled, strict=True)
            if t.device != expected and not (t.device.type == "cpu" and t.dim() == 0)
        ]
        arguments = [
            (name, str(t.device), tuple(t.shape), str(t.dtype).removeprefix("torch."))
            for name, (_, t) in zip(names, labelled, strict=True)
        ]
        fix = self._fix(names, labelled, expected, user_names)
        module_path = self.modules.path()
        op = _op(func)
        in_module = (
            f" in module `{module_path or type(self.modules.current).__name__}`" if module_path is not None else ""
        )
        width = max(len(a[0]) for a in arguments)
        table = "\n".join(f"    {n:<{width}}  {d:<8} {s!s:<16} {dt}" for n, d, s, dt in arguments)
        message = (
            f"device mismatch: {op} got tensors on {' and '.join(sorted({d for _, d, _, _ in arguments}))} at "
            f"{where}{in_module}:\n" + (f"    {where.text}\n" if where.text else "") + f"{table}\n"
            f"PyTorch runs one operation on one device and does not copy between devices for you (only 0-dim CPU "
            f"tensors mix with other devices). Move the tensor before the call:\n    {fix}"
        )
        error = DeviceMismatchError(
            message,
            mismatches=mismatches,
            expected=str(expected),
            operation=op,
            arguments=arguments,
            location=str(where),
            source=where.text,
            module_path=module_path,
            fix=fix,
        )
        self.emit("input-on-other-device", where, message, error, frame)

    def _expected_device(self, devices: set[torch.device]) -> torch.device:
        own = self.modules.parameter_device()
        if own is not None and own in devices:
            return own
        return next((d for d in sorted(devices, key=str) if d.type != "cpu"), next(iter(devices)))

    def _fix(
        self,
        names: list[str],
        labelled: list[tuple[str, Tensor]],
        expected: torch.device,
        user_names: dict[int, str],
    ) -> str:
        reference = next((user_names[id(t)] for _, t in labelled if t.device == expected and id(t) in user_names), None)
        to = f"{reference}.device" if reference else repr(str(expected))
        for name, (_, t) in zip(names, labelled, strict=True):
            if t.device == expected or (t.device.type == "cpu" and t.dim() == 0):
                continue
            if id(t) in user_names:
                return f"{name} = {name}.to({to})"
            if self.modules.tensor_name(t) == name:
                return f"model.to({to})  # {name} is a parameter or buffer: move the whole module"
            return f"tensor = tensor.to({to})  # {name}"
        return f"tensor = tensor.to({to})"  # pragma: no cover - a mismatch always has one tensor off ``expected``

    # --- CPU factories inside a forward ----------------------------------------------------------------------

    def _check_factory(self, func: Any, result: Any) -> None:
        if not isinstance(result, Tensor) or result.device.type != "cpu":
            return
        own = self.modules.parameter_device()
        if own is None or own.type == "cpu":
            return
        frame = user_frame()
        if frame is None:
            return
        where = source_line(frame)
        path = self.modules.path()
        module = f"`{path}`" if path else type(self.modules.current).__name__
        self.emit(
            "device-less-tensor-in-forward",
            where,
            f"{_op(func)} built a CPU tensor at {where.described()} inside the forward of {module}, whose "
            f"parameters are on {own}. It costs a host-to-device copy on every call, or fails when combined with the "
            f"module's tensors. Create it on the input's device: `{_op(func)}(..., device=x.device)`.",
            None,
            frame,
        )


def _mixed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Fast test: do the tensor arguments (one level of lists/tuples) span more than one device?"""
    first = None
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, Tensor):
            device = value.device
            if first is None:
                first = device
            elif device != first:
                return True
        elif type(value) in (list, tuple):
            for item in value:
                if isinstance(item, Tensor):
                    device = item.device
                    if first is None:
                        first = device
                    elif device != first:
                        return True
    return False


def _labelled_tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[tuple[str, Tensor]]:
    items: list[tuple[str, Any]] = [(f"args[{i}]", a) for i, a in enumerate(args)]
    items += [(key, value) for key, value in kwargs.items()]
    for label, value in items:
        if isinstance(value, Tensor):
            yield label, value
        elif type(value) in (list, tuple):
            for j, item in enumerate(value):
                if isinstance(item, Tensor):
                    yield f"{label}[{j}]", item


def _names_in(frame: FrameType | None) -> dict[int, str]:
    """``id(tensor) -> variable name`` for the tensors that are local variables of ``frame``."""
    if frame is None:
        return {}
    return {id(value): name for name, value in reversed(frame.f_locals.items()) if isinstance(value, Tensor)}


def _op(func: Any) -> str:
    try:
        return str(resolve_name(func) or getattr(func, "__name__", repr(func)))
    except Exception:  # resolve_name walks torch's namespaces; never let a report fail on a name
        return str(getattr(func, "__name__", repr(func)))
