"""The checks, run before (and after) every torch operation by a :class:`~torch.overrides.TorchFunctionMode`.

While the handler runs, torch disables the mode, so the operations a checked call makes inside (``F.linear`` inside
``nn.Linear``, the ops a ``Tensor.__repr__`` uses) are not checked again: one check per operation the user's code
(or a module's forward) asks for. The common path is a few set look-ups and one pass over the tensor arguments;
frames, names and messages are only worked out once something is wrong.
"""

from __future__ import annotations

import io
import os
import sys
import tokenize
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from functools import lru_cache
from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode, resolve_name

from ferry.errors import DeviceError, DeviceMismatchError
from ferry.sanitizer._frames import SourceLine, installed, is_library, source_line, user_frame
from ferry.sanitizer._init_watch import InitWatch
from ferry.sanitizer._modules import ModuleStack
from ferry.sanitizer._moves import MOVE_METHODS, is_discarded
from ferry.sanitizer._syncs import SHAPE_SYNCS, SYNC_METHODS, AcceleratorTest, bool_mask
from ferry.sanitizer._train_mode import TrainModeWatch
from ferry.sanitizer.pretend._tensor import host_arguments, pretend_numpy, writes_into

Tensor = torch.Tensor

#: Operations that legitimately take tensors on several devices: moves and copies, indexing with CPU indices, and
#: the ``*_as`` methods that only read the other tensor's size.
MIXING_ALLOWED = frozenset(
    getattr(Tensor, name)
    for name in """
    to copy_ type_as __getitem__ __setitem__ set_ new_tensor expand_as view_as reshape_as resize_as_
    """.split()
) | {
    torch._has_compatible_shallow_copy_type,  # Module.to asks it before swapping a parameter's data
    Tensor.module_load,  # load_state_dict's copy into a parameter when parameters are swapped, not copied into
}
#: Indexing, which lets CPU index tensors index a tensor on any device, but not accelerator indices a CPU tensor.
_INDEXING = frozenset({Tensor.__getitem__, Tensor.__setitem__})


def _device_index_into_host(tensor: Any, index: Any) -> bool:
    """Whether ``tensor[index]`` indexes a CPU tensor with an index tensor on an accelerator."""
    if not isinstance(tensor, Tensor) or tensor.device.type != "cpu":
        return False
    parts = index if isinstance(index, tuple | list) else (index,)
    return any(isinstance(p, Tensor) and p.device.type not in ("cpu", "meta") for p in parts)


#: Factory functions that build a tensor on the CPU unless given ``device=``.
FACTORIES = frozenset(
    getattr(torch, name)
    for name in "zeros ones empty full arange rand randn randint randperm tensor as_tensor eye linspace".split()
) | {torch.from_numpy}
#: ``Tensor.numpy`` and its pretend-GPU stand-in: a copy to numpy, which PyTorch refuses for a device tensor.
NUMPY_METHODS = frozenset({Tensor.numpy, pretend_numpy})
#: What counts as a host sync: :data:`SYNC_METHODS` and the pretend ``numpy``.
_SYNCS = SYNC_METHODS | NUMPY_METHODS
#: How many recent CPU factory calls are remembered, to explain a mismatch they cause on the line that called them.
_RECENT = 8

#: Reports a finding: (kind, where, message, error or None for a warning, frame).
Emit = Callable[[str, SourceLine, str, "Exception | None", "FrameType | None"], None]


_AVAILABLE = ("cpu", "meta")


def device_available(device_type: str) -> bool:
    """Whether this machine can serve ``device_type`` (``cpu`` and ``meta`` always; else ``torch.<type>``).

    The answer is cached per ``is_available`` function, so that :func:`ferry.sanitizer.pretend.pretend_cuda`, which
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
        self.train_mode = TrainModeWatch(emit)
        self.init_watch = InitWatch(emit)
        self.modules = ModuleStack(
            self.train_mode.root_forward, self.train_mode.root_output, self.train_mode.root_inputs, self._returned
        )
        #: modules moved from an accelerator to the CPU: id -> (the module, weakly, and the user's line)
        self.host_moves: dict[int, tuple[weakref.ref[nn.Module], SourceLine]] = {}
        #: recent CPU factory calls without ``device=``: (op, creation line, (frame id, line) of the user frames)
        self.created: deque[tuple[Any, SourceLine, frozenset[tuple[int, int]]]] = deque(maxlen=_RECENT)
        #: CPU tensors built in a forward whose report waits to see where they go (see :meth:`_check_factory`)
        self.waiting: dict[int, _Waiting] = {}
        #: the CPU tensors made from them so far: id -> (the tensor, weakly, the waiting reports it comes from)
        self.derived: dict[int, tuple[weakref.ref[Tensor], frozenset[int]]] = {}

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if kwargs is None:
            kwargs = {}
        if func in MOVE_METHODS:
            self._check_move(func, args, kwargs, sys._getframe(1))
        elif "device" in kwargs:
            self._check_available(kwargs["device"], func)
        if func in _SYNCS and args and isinstance(args[0], Tensor):
            if self.is_accelerator(args[0].device):
                self._sync()
            if func in NUMPY_METHODS and args[0].device.type != "cpu" and not kwargs.get("force"):
                self._check_numpy(args[0])
        elif (
            (func in SHAPE_SYNCS or (func in _INDEXING and len(args) > 1 and bool_mask(args[1])))
            and args
            and isinstance(args[0], Tensor)
            and self.is_accelerator(args[0].device)
        ):
            self._sync()  # `sim[~mask]`, `torch.nonzero(x)`: the result's size is read on the host
        host = host_arguments(func, args)  # lengths and batch_sizes of packed sequences stay on the host
        checked = tuple(None if i in host else a for i, a in enumerate(args)) if host else args
        if func not in MIXING_ALLOWED and _mixed(checked, kwargs):
            self._check_devices(func, checked, kwargs)
        elif func in _INDEXING and len(args) > 1 and _device_index_into_host(args[0], args[1]):
            self._check_devices(func, args[:2], {})  # CPU indices may index a GPU tensor, not the other way round
        written = self.init_watch.before(func, args, kwargs) if self.init_watch.unwritten else None
        result = func(*args, **kwargs)
        if self.derived:
            self._follow(func, args, kwargs, result)
        if written is not None:
            self.init_watch.after(func, args, written, result)
        if self.train_mode.suspects:  # outputs of a BatchNorm model evaluated in training mode: are they scored?
            self.train_mode.scored(func, args, kwargs, result)
        if (
            func in FACTORIES
            and kwargs.get("device") is None
            and isinstance(result, Tensor)
            and result.device.type == "cpu"
        ):
            self._created(func, result)
        return result

    # --- load_state_dict with a DataParallel prefix (called by ferry.sanitizer._patches) ---------------------------

    def check_state_dict(self, module: torch.nn.Module, state_dict: Any) -> None:
        from ferry.sanitizer._patches import state_dict_error

        if not hasattr(state_dict, "keys"):
            return
        found = state_dict_error(module, state_dict)
        if found is not None:
            message, error, (frame, where) = found
            self.emit("data-parallel-state-dict", where, message, error, frame)

    # --- numpy() of a device tensor ------------------------------------------------------------------------------

    def _check_numpy(self, tensor: Tensor) -> None:
        frame = user_frame()
        if frame is None:
            return
        where = source_line(frame)
        name = _names_in(frame).get(id(tensor), "tensor")
        message = (
            f"numpy-of-device-tensor: {name}.numpy() at {where.described()} on a tensor on {tensor.device}. numpy "
            f"arrays live in host memory, so PyTorch refuses (TypeError: can't convert {tensor.device} device type "
            f"tensor to numpy). Copy it to the host first: `{name}.cpu().numpy()` (`{name}.detach().cpu().numpy()` "
            f"when it requires grad)."
        )
        error = DeviceError(message, requested=str(tensor.device), available=["cpu"])
        self.emit("numpy-of-device-tensor", where, message, error, frame)

    # --- moves: discarded results and unavailable devices -------------------------------------------------------

    def _check_move(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], caller: FrameType) -> None:
        name = func.__name__
        target: Any = kwargs.get("device")
        if name in ("cuda", "mps", "xpu"):
            given = args[1] if len(args) > 1 else None  # Module.cuda() calls `t.cuda(None)`: the current device
            target = target if target is not None else (given if given is not None else name)
        elif name == "to" and target is None:
            target = next((a for a in args[1:] if isinstance(a, (str, torch.device))), None)
        if target is not None:
            self._check_available(target, func)
        if not is_library(caller.f_code) and is_discarded(caller):
            where = source_line(caller)
            code = _without_comment(where.text)  # `x.to(device)  # bug` -> `x.to(device)`
            receiver = code.split(f".{name}(")[0].strip() if f".{name}(" in code else ""
            fix = f"`{receiver} = {code}`" if receiver.isidentifier() else "assign the result"
            self.emit(
                "discarded-tensor-move",
                where,
                f"result of Tensor.{name}() discarded at {where.described()}. Tensor.{name}() returns a new "
                f"tensor and leaves the original where it was (only Module.to moves in place). Keep the result: "
                f"{fix}.",
                None,
                caller,
            )

    def _check_available(self, target: Any, func: Any, name: str | None = None) -> None:
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
            f"{name or _op(func)} asks for device {str(target)!r} at {where.described()}, but this machine has no "
            f"{device_type} (torch.{device_type}.is_available() is False). Choose the device at run time: "
            + (
                '`torch.load(f, map_location=ferry.pick_device())`, or `map_location="cpu"` to load onto the host.'
                if func is torch.load or (name or "").startswith("torch.load")
                else "`device = ferry.pick_device()`, and inside a forward follow the input: `device=x.device`."
            )
        )
        error = DeviceError(message, requested=str(target), available=[str(d) for d in _AVAILABLE])
        self.emit("hardcoded-cuda-device", where, message, error, frame)

    # --- device mismatch -------------------------------------------------------------------------------------

    def _check_devices(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        labelled = list(_labelled_tensors(args, kwargs))
        devices = {t.device for _, t in labelled}
        written = writes_into(
            getattr(func, "__name__", "")
        )  # `loss += x`: the 0-dim CPU `loss` is the output, not an input
        if any(d.type != "cpu" for d in devices):  # PyTorch lets 0-dim CPU tensors mix with any device, as inputs
            labelled_checked = [
                (k, t)
                for k, t in labelled
                if not (t.device.type == "cpu" and t.dim() == 0 and not (written and k == "args[0]"))
            ]
        else:
            labelled_checked = labelled
        if len({t.device for _, t in labelled_checked}) < 2:
            return
        if self.derived:  # a CPU tensor built in a forward meets the device: its report is due now
            self._report_waiting({key for _, t in labelled_checked for key in self._origins(t)})
        frame = user_frame()
        where = source_line(frame) if frame is not None else SourceLine("<unknown>", 0, "")
        user_names = _names_in(frame)
        names = [
            user_names.get(id(t)) or self.modules.tensor_name(t) or label for label, t in labelled
        ]  # the user's variable, else the module's parameter name, else the argument's position
        expected = self._expected_device({t.device for _, t in labelled_checked})
        chosen = _device_variable(frame, expected)  # the script's own name for the device, for the fix
        passed = self._passed_on_the_wrong_device(labelled, expected)
        if passed is not None:  # an input the caller never moved: the caller's line is the one to fix
            where, frame = passed, None
        mismatches = [
            (name, str(t.device))
            for name, (label, t) in zip(names, labelled, strict=True)
            if t.device != expected
            and not (t.device.type == "cpu" and t.dim() == 0 and not (written and label == "args[0]"))
        ]
        arguments = [
            (name, str(t.device), tuple(t.shape), str(t.dtype).removeprefix("torch."))
            for name, (_, t) in zip(names, labelled, strict=True)
        ]
        fix = self._fix(names, labelled, expected, user_names, chosen, written)
        if passed is not None:
            fix = self._fix_input(labelled, expected, chosen)
        module_path = self.modules.path()
        op = _op(func)
        in_module = (
            f" in module `{module_path or type(self.modules.current).__name__}`" if module_path is not None else ""
        )
        into = labelled[0][1] if written and labelled and labelled[0][0] == "args[0]" else None
        written_note = (
            ", and only as inputs: an in-place operation writes into its first tensor"
            if into is not None and into.device.type == "cpu" and into.dim() == 0 and expected.type != "cpu"
            else ""
        )
        width = max(len(a[0]) for a in arguments)
        table = "\n".join(f"    {n:<{width}}  {d:<8} {s!s:<16} {dt}" for n, d, s, dt in arguments)
        message = (
            f"device mismatch: {op} got tensors on {' and '.join(sorted({d for _, d, _, _ in arguments}))} at "
            f"{where}{in_module}:\n" + (f"    {where.text}\n" if where.text else "") + f"{table}\n"
            f"PyTorch runs one operation on one device and does not copy between devices for you (only 0-dim CPU "
            f"tensors mix with other devices{written_note}). Move the tensor before the call:\n    {fix}"
        )
        built = self._built_here(labelled, names, expected, frame, where, user_names) if frame is not None else None
        if built is not None:
            message += f"\n{built}"
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
        if built is not None:  # reached when on_error lets the operation run: the cause, as its own finding
            self.emit("device-less-tensor-in-forward", where, built, None, frame)

    def _built_here(
        self,
        labelled: list[tuple[str, Tensor]],
        names: list[str],
        expected: torch.device,
        frame: FrameType,
        where: SourceLine,
        user_names: dict[int, str],
    ) -> str | None:
        """The ``device-less-tensor-in-forward`` message for a mismatch whose CPU tensor this line built, or ``None``.

        Built means: a CPU factory call without ``device=`` made by the line ``frame`` is running, directly or in a
        function it called (``x & make_mask(n)``), among the last few such calls.
        """
        if expected.type == "cpu":
            return None
        running = (id(frame), frame.f_lineno or 0)
        for name, (_, t) in zip(names, labelled, strict=True):
            if t.device.type != "cpu" or t.dim() == 0:
                continue
            if id(t) in user_names:  # a variable of an earlier line: an input on the wrong device
                continue
            built = next(((f, w) for f, w, callers in reversed(self.created) if running in callers), None)
            if built is None:
                continue
            func, created = built
            return (
                f"{name} is a CPU tensor built by {_op(func)} without a device at {created.described()}, and "
                f"meets tensors on {expected} at {where.described()}. Build it on the device of the tensors it is "
                f"combined with: pass the device in (`device=x.device`), e.g. `{_op(func)}(...).to(x.device)` for "
                f"torch.from_numpy, or `{_op(func)}(..., device=x.device)`."
            )
        return None

    def _expected_device(self, devices: set[torch.device]) -> torch.device:
        """The device a mismatch should have been on: the running module's, unless it is the CPU beside an accelerator.

        A program that uses an accelerator means its tensors to be there: a loss module's CPU ``weight`` is the one
        left behind, not the logits.
        """
        own = self.modules.parameter_device()
        if own is not None and own in devices and own.type != "cpu":
            return own
        return next(
            (d for d in sorted(devices, key=str) if d.type != "cpu"), own if own in devices else min(devices, key=str)
        )

    def _passed_on_the_wrong_device(
        self, labelled: list[tuple[str, Tensor]], expected: torch.device
    ) -> SourceLine | None:
        """The caller's line when an off-device tensor here is one the caller passed to the outermost module."""
        stack = self.modules
        if stack.root_call is None or not stack.root_inputs:
            return None
        for _, t in labelled:
            if t.device != expected and not (t.device.type == "cpu" and t.dim() == 0) and id(t) in stack.root_inputs:
                return stack.root_call
        return None

    def _fix_input(self, labelled: list[tuple[str, Tensor]], expected: torch.device, chosen: str | None = None) -> str:
        stack = self.modules
        name = next(
            stack.root_inputs[id(t)] for _, t in labelled if id(t) in stack.root_inputs and t.device != expected
        )
        call = f"{stack.root_name or 'model'}(...)"  # `model(inputs, hidden)`: the input may be any argument
        return f"{name} = {name}.to({chosen or repr(str(expected))})  # before {call} at {stack.root_call}"

    def moved(self, module: nn.Module, before: torch.device | None, after: torch.device | None) -> None:
        """``module.cpu()``/``.to(...)`` ran: remember a move from an accelerator to the CPU, with the user's line.

        ``before``/``after``: the device of the module's first parameter or buffer around the call (``None`` for a
        module without any). A later move off the CPU forgets the record.
        """
        key = id(module)
        if before is None or after is None or after.type != "cpu" or before.type == "cpu":
            if after is not None and after.type != "cpu":
                self.host_moves.pop(key, None)  # moved back
            return
        frame = user_frame(2)
        if frame is not None:
            self.host_moves[key] = (weakref.ref(module), source_line(frame))

    def _moved_to_host(self, tensor: Tensor) -> SourceLine | None:
        """The user's line that moved the module holding ``tensor`` from an accelerator to the CPU, if one did."""
        for ref, where in self.host_moves.values():
            module = ref()
            if module is not None and any(p is tensor for p in [*module.parameters(), *module.buffers()]):
                return where
        return None

    def _fix(
        self,
        names: list[str],
        labelled: list[tuple[str, Tensor]],
        expected: torch.device,
        user_names: dict[int, str],
        chosen: str | None = None,
        written: bool = False,
    ) -> str:
        reference = next((user_names[id(t)] for _, t in labelled if t.device == expected and id(t) in user_names), None)
        # the script's own device variable, else a tensor already there; a literal 'cuda:0' only as the last resort
        # (it would hard-code the device the script chose, FRY002)
        to = chosen or (f"{reference}.device" if reference else repr(str(expected)))
        for name, (label, t) in zip(names, labelled, strict=True):
            scalar = t.device.type == "cpu" and t.dim() == 0 and not (written and label == "args[0]")
            if t.device == expected or scalar:
                continue
            own = self.modules.tensor_name(t)
            holder = self.modules.unregistered_holder() if own is not None else None
            if holder is not None:  # a layer kept in a plain list or dict: `.to()` never reaches it
                owner, attr = holder.split(".", 1)
                return (
                    f"self.{attr} = nn.ModuleList([...])  # in {owner}.__init__ (nn.ModuleDict for a dict): layers "
                    f"in a plain list or dict attribute are not registered, so model.to() "
                    "never moves them"
                )
            if own is not None:  # a parameter or buffer (a loss's weight): moving a variable would not move it
                module = self.modules.root_name or "model"
                moved = self._moved_to_host(t)
                if moved is not None:  # `torch.save(model.cpu().state_dict(), path)`: the model itself moved
                    return (
                        f"{module}.to({to})  # {own} is a parameter of it, moved to the CPU at {moved.described()} "
                        f"(Module.cpu()/.to('cpu') move the module itself, not a copy; to save, copy the state: "
                        f"{{k: v.cpu() for k, v in {module}.state_dict().items()}})"
                    )
                return f"{module}.to({to})  # {own} is a parameter or buffer of it: move the whole module"
            plain = self.modules.plain_attribute(t)
            if plain is not None:  # `self.pe = torch.zeros(...)` in __init__: not a buffer, so `.to()` skips it
                owner, attr = plain.split(".", 1)
                return (
                    f'self.register_buffer("{attr}", ...)  # in {owner}.__init__ instead of `self.{attr} = ...`: a '
                    "plain tensor attribute is not moved by model.to()"
                )
            if id(t) in user_names:
                return f"{name} = {name}.to({to})"
            return f"tensor = tensor.to({to})  # {name}"
        return f"tensor = tensor.to({to})"  # pragma: no cover - a mismatch always has one tensor off ``expected``

    def _sync(self) -> None:
        """Count a host sync at the user's line.

        Not counted: a trainer's own syncs (in an installed package), and ``GradScaler.step``'s check for inf
        gradients, which mixed precision needs (nothing in the user's code can avoid it).
        """
        frame = user_frame(2)
        if frame is None or installed(frame.f_code):
            return
        inner: FrameType | None = sys._getframe(2)
        while inner is not None and inner is not frame:
            if inner.f_code.co_filename.endswith(_GRAD_SCALER):
                return
            inner = inner.f_back
        self.count_sync(source_line(frame))

    # --- CPU factories inside a forward ----------------------------------------------------------------------

    def _created(self, func: Any, result: Tensor) -> None:
        """A CPU tensor built without ``device=``: remember where, and check it if a module's forward is running."""
        frame = user_frame(2)
        if frame is None:
            return
        callers: list[tuple[int, int]] = []
        caller: FrameType | None = frame
        while caller is not None and len(callers) < 16:
            if not is_library(caller.f_code):
                callers.append((id(caller), caller.f_lineno or 0))
            caller = caller.f_back
        where = source_line(frame)
        self.created.append((func, where, frozenset(callers)))
        if self.modules.stack and result.dim() != 0:  # 0-dim CPU tensors mix with any device, as in PyTorch
            self._check_factory(func, frame, where, result)

    def _check_factory(self, func: Any, frame: FrameType, where: SourceLine, result: Tensor) -> None:
        own = self.modules.parameter_device()
        if own is None or own.type == "cpu":
            return
        path = self.modules.path()
        module = f"`{path}`" if path else type(self.modules.current).__name__
        layer = _layer_being_built()
        if layer is not None:
            message = (
                f"{layer} is constructed at {where.described()} inside the forward of {module}, whose parameters "
                f"are on {own}: its parameters are created on the CPU, are not registered in __init__, so "
                f"model.to() never moves them (and they are re-initialised on every call, never trained). Build the "
                f"layer in __init__ (`self.bn = nn.{layer}(...)`) and call `self.bn(x)` in forward."
            )
            self.emit("device-less-tensor-in-forward", where, message, None, frame)
            return
        # from_numpy and frombuffer take no device: their tensor is moved instead
        there = f"{_op(func)}(...).to(x.device)" if _op(func) in _NO_DEVICE else f"{_op(func)}(..., device=x.device)"
        message = (
            f"{_op(func)} built a CPU tensor at {where.described()} inside the forward of {module}, whose "
            f"parameters are on {own}. It costs a host-to-device copy on every call, or fails when combined with "
            f"the module's tensors. Create it on the input's device: `{there}`."
        )
        # reported when it (or a CPU tensor made from it) meets the module's tensors or leaves the outermost forward;
        # not when it is moved on its way (`torch.arange(n).to(x.device)`, PointNet's `iden = iden.cuda()` further
        # down, GIN's `torch.ones` values of a sparse matrix that is then moved), nor when it stays on the host side
        # (DLRM's CPU index tensors into a GPU tensor, `.tolist()`), which a GPU runs as well; a `.to(dtype)` on the
        # way is no move
        key = id(result)
        self.waiting[key] = _Waiting(where, message, frame, len(self.modules.stack))
        self.derived[key] = (weakref.ref(result), frozenset({key}))

    # --- where the CPU tensors built in a forward go -------------------------------------------------------------

    def _origins(self, value: Any) -> frozenset[int]:
        """The waiting reports a tensor comes from (an empty set for any other value)."""
        held = self.derived.get(id(value)) if isinstance(value, Tensor) else None
        return held[1] if held is not None and held[0]() is value else frozenset()

    def _follow(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        """After an operation: a CPU result of waiting tensors waits with them; a move to a device settles them."""
        origins: frozenset[int] = frozenset()
        for value in (*args, *kwargs.values()):
            if isinstance(value, Tensor):
                origins |= self._origins(value)
            elif type(value) in (list, tuple):
                for item in value:
                    origins |= self._origins(item)
        if not origins:
            return
        outputs = (
            [result]
            if isinstance(result, Tensor)
            else [r for r in result if isinstance(r, Tensor)]
            if (type(result) in (list, tuple))
            else []
        )
        if any(out.device.type != "cpu" for out in outputs) or (
            func is Tensor.copy_ and args and isinstance(args[0], Tensor) and args[0].device.type != "cpu"
        ):
            for key in origins:  # `.to(self.device)`, `.cuda()`, `dev.copy_(cpu)`: it reaches the device
                self.waiting.pop(key, None)
            self._forget()
            return
        for out in outputs:
            if id(out) not in self.derived or self.derived[id(out)][0]() is not out:
                self.derived[id(out)] = (weakref.ref(out), origins)
        if len(self.derived) > _MAX_DERIVED:
            self._forget()

    def _forget(self) -> None:
        """Drop what no waiting report needs any more: dead tensors, and tensors of settled reports."""
        self.derived = {
            k: (ref, keys & self.waiting.keys())
            for k, (ref, keys) in self.derived.items()
            if ref() is not None and keys & self.waiting.keys()
        }

    def _report_waiting(self, keys: set[int]) -> None:
        for key in sorted(keys):
            waiting = self.waiting.pop(key, None)
            if waiting is not None:
                self.emit("device-less-tensor-in-forward", waiting.where, waiting.message, None, waiting.frame)
        self._forget()

    def _returned(self, depth: int, output: Any) -> None:
        """A forward ended, ``depth`` forwards still running: what its tensors built on the host became."""
        if not self.waiting:
            return
        ended = {key for key, w in self.waiting.items() if w.depth > depth}
        if not ended:
            return
        returned: set[int] = set()
        stack = [output]
        for _ in range(64):  # the output's tensors, a few levels into tuples, lists and dicts
            if not stack:
                break
            value = stack.pop()
            if isinstance(value, Tensor):
                returned |= self._origins(value) & ended
            elif type(value) in (list, tuple):
                stack.extend(value[:16])
            elif type(value) is dict:
                stack.extend(list(value.values())[:16])
        if depth == 0:  # returned by the outermost forward: the caller gets a CPU tensor beside device outputs
            self._report_waiting(returned)
        for key in ended - returned:
            self.waiting.pop(key, None)  # used on the host inside the forward only: a GPU runs it too
        for key in returned & self.waiting.keys():
            self.waiting[key].depth = depth  # handed to the enclosing forward, which decides
        self._forget()


class _Waiting:
    """A ``device-less-tensor-in-forward`` report that waits to see where its CPU tensor goes."""

    __slots__ = ("depth", "frame", "message", "where")

    def __init__(self, where: SourceLine, message: str, frame: FrameType, depth: int) -> None:
        self.where, self.message, self.frame, self.depth = where, message, frame, depth


#: How many derived CPU tensors are followed before the dead ones are dropped.
_MAX_DERIVED = 256
#: torch's GradScaler (``torch/amp/grad_scaler.py``): its ``step`` reads the inf check on the host, by design.
_GRAD_SCALER = os.path.join("amp", "grad_scaler.py")
#: Factories with no ``device=`` argument: the fix moves their tensor.
_NO_DEVICE = frozenset({"torch.from_numpy", "torch.frombuffer", "from_numpy", "frombuffer"})


def _layer_being_built() -> str | None:
    """The class name of the ``nn.Module`` whose ``__init__`` is running (outermost), for a factory inside it."""
    frame: FrameType | None = sys._getframe(2)
    layer = None
    while frame is not None and is_library(frame.f_code):
        if frame.f_code.co_name == "__init__":
            module = frame.f_locals.get("self")
            if isinstance(module, torch.nn.Module):
                layer = type(module).__name__
        frame = frame.f_back
    return layer


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


def _without_comment(text: str) -> str:
    """``text`` (one line of source) without its trailing ``# comment``; ``text`` as it is if it does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text.strip()
    comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
    return (text[: comment.start[1]] if comment is not None else text).strip()


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


def _device_variable(frame: FrameType | None, expected: torch.device) -> str | None:
    """A variable of the user's code that holds ``expected`` (``device = torch.device("cuda" if ...)``), if any.

    Local names first, then the module's; ``device`` before other names; a ``torch.device`` or a string naming it
    (``"cuda"`` stands for ``cuda:0`` when that is the current device, as PyTorch reads it).
    """
    if frame is None:
        return None

    def holds(value: object) -> bool:
        if isinstance(value, str):
            try:
                value = torch.device(value)
            except (RuntimeError, ValueError):
                return False
        if not isinstance(value, torch.device) or value.type != expected.type:
            return False
        return value.index == expected.index or (value.index is None and expected.index in (None, 0))

    for space in (frame.f_locals, frame.f_globals):
        names = sorted((n for n, v in space.items() if not n.startswith("_") and holds(v)), key=lambda n: n != "device")
        if names:
            return names[0]
    return None


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
