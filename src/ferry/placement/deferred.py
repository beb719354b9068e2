"""Build a module without allocating its tensors, then allocate every tensor once, on its device, initialised.

How it works. :func:`deferred_init` builds under ``torch.device("meta")`` (no memory, no computation) and records,
with a ``TorchFunctionMode``, every torch call that creates or changes a ``meta`` tensor: factories
(``torch.empty``, ``torch.arange``...), initialisers (``nn.init.kaiming_uniform_``, ``Tensor.normal_``), the
arithmetic that computes buffers (RoPE's ``inv_freq``), views and ``.data``, and the creation of each
``nn.Parameter``. Only the outermost call is seen (``nn.init.kaiming_uniform_``, not the ``uniform_`` it runs), so
replaying the log runs the same calls in the same order as the original build and draws the same random numbers.

:func:`materialize` replays, for the module's tensors only, the recorded calls they depend on (found backwards
through the log: a call is needed when it creates or writes the storage of a needed tensor, and then so are the
tensors it read), under ``torch.device(device)`` and with every ``meta`` device in the arguments replaced by
``device``. Intermediate results are freed after their last use. Tensors nothing recorded (a model built under a
plain ``torch.device("meta")``) get memory with ``torch.empty_like`` (what ``Module.to_empty`` does) and are then
initialised by each owning module's ``reset_parameters()`` and by ``init(module)``; a second mode watches which
storages those calls write, and whatever is left unwritten raises :class:`ferry.InitializationError` instead of
handing back garbage.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import is_lazy
from torch.overrides import TorchFunctionMode

from ferry.devices import DeviceLike, resolve_device
from ferry.errors import ArgumentError, InitializationError, PlacementWarning

__all__ = [
    "PURE_WRITES",
    "Coverage",
    "data_key",
    "deferred_init",
    "fill",
    "materialize",
    "tensors_in",
    "writes_values",
    "written_by",
]

#: attribute set on each meta tensor a recording made: the recording that can replay it
_TAG = "_ferry_recording"

#: in-place dunder methods (``t[i] = v``, ``t += 1``, ``t.data = v``, ``t.requires_grad = True``) and their target
_INPLACE_DUNDERS = frozenset(
    {
        "__setitem__",
        "__set__",
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ifloordiv__",
        "__imod__",
        "__ipow__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "__imatmul__",
    }
)


class _State(threading.local):
    def __init__(self) -> None:
        self.recordings: list[_Recording] = []  # innermost last
        self.inside = 0  # > 0 while a recorded call runs: what it does inside is part of that call


_STATE = _State()
_PATCH_LOCK = threading.Lock()
_PATCH_USERS = 0
_ORIGINAL_PARAMETER_NEW = nn.Parameter.__new__


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in ``value``, through tuples, lists and dicts, in order (shared with the sanitizer)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def written_by(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors a torch call changes in place: its first argument for ``name_`` and in-place dunders, ``out=``."""
    name = getattr(func, "__name__", "")
    targets: list[torch.Tensor] = []
    if (name.endswith("_") and not name.endswith("__")) or name in _INPLACE_DUNDERS:
        first = args[0] if args else kwargs.get("tensor", kwargs.get("input", kwargs.get("self")))
        targets.extend(tensors_in(first))
    if "out" in kwargs:
        targets.extend(tensors_in(kwargs["out"]))
    return targets


#: torch calls that draw from a random number generator (besides every ``nn.init`` initialiser)
_RANDOM = frozenset(
    {
        "uniform_",
        "normal_",
        "random_",
        "bernoulli_",
        "cauchy_",
        "exponential_",
        "geometric_",
        "log_normal_",
        "rand",
        "randn",
        "randint",
        "randperm",
        "rand_like",
        "randn_like",
        "randint_like",
        "bernoulli",
        "multinomial",
        "normal",
        "poisson",
        "dropout",
        "dropout_",
        "alpha_dropout",
        "feature_alpha_dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "rrelu",
        "rrelu_",
        "manual_seed",  # not a draw: it sets where the next ones come from, so it is replayed in its place
    }
)


#: factories whose result holds whatever the memory held
_EMPTY = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"})


def _generator_states() -> dict[str, torch.Tensor]:
    """The default generators' states by device (``"cpu"``, and ``"cuda:i"`` once CUDA is initialised)."""
    states = {"cpu": torch.default_generator.get_state()}
    if torch.cuda.is_available() and _cuda_initialised():
        for index, generator in enumerate(torch.cuda.default_generators):
            states[f"cuda:{index}"] = generator.get_state()
    return states


def _cuda_initialised() -> bool:
    return bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]


def _default_generator(device: torch.device) -> torch.Generator | None:
    """The generator torch's random functions use on ``device`` (None where ferry does not reach it)."""
    if device.type == "cpu":
        return torch.default_generator
    if device.type == "cuda" and torch.cuda.is_available() and _cuda_initialised():
        generators = torch.cuda.default_generators
        index = device.index if device.index is not None else torch.cuda.current_device()
        return generators[index] if index < len(generators) else None
    return None


def _draws_random(func: Callable[..., Any], kwargs: dict[str, Any]) -> bool:
    name = getattr(func, "__name__", "")
    return name in _RANDOM or "generator" in kwargs or func in _INIT_FUNCTION_SET


def _quiet() -> contextlib.AbstractContextManager[None]:
    """No torch-function handling (modes, subclasses) for ferry's own bookkeeping: it looks, it does not compute."""
    return torch._C.DisableTorchFunction()


def _on_meta(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is on ``meta`` (a wrapper tensor reports it through its device, not ``is_meta``)."""
    return bool(tensor.is_meta) or tensor.device.type == "meta"


#: in-place operations that only write their target (its old values do not matter): the others (``mul_``,
#: ``add_``, ``clamp_``) read it first
PURE_WRITES = frozenset(
    "fill_ zero_ copy_ normal_ uniform_ random_ bernoulli_ exponential_ geometric_ cauchy_ log_normal_ set_ "
    "__setitem__ __set__ index_fill_ masked_fill_ index_copy_ masked_scatter_ scatter_ put_ resize_ "
    "requires_grad_".split()
)


def writes_values(func: Callable[..., Any]) -> bool:
    """Whether an in-place call writes its tensor's values: not ``t.grad = g``, ``t.requires_grad = False``."""
    if getattr(func, "__name__", "") != "__set__":
        return True
    return getattr(getattr(func, "__self__", None), "__name__", "data") == "data"


def _storage_key(tensor: torch.Tensor) -> int:
    """One number per storage: views, ``.data`` and a ``Parameter`` share their base's (meta ones too)."""
    try:
        return tensor.untyped_storage()._cdata  # type: ignore[no-any-return]
    except (RuntimeError, ValueError):  # ValueError: a lazy module's UninitializedParameter
        inner = getattr(tensor, "_elem", None)  # a wrapper subclass (the pretend GPU's): the tensor it wraps
        return _storage_key(inner) if isinstance(inner, torch.Tensor) else id(tensor)


def data_key(tensor: torch.Tensor) -> int:
    """The address of a real tensor's storage (a wrapper subclass's: of the tensor it wraps)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError, ValueError):  # wrapper subclasses, sparse, lazy parameters
        inner = getattr(tensor, "_elem", None)
        return data_key(inner) if isinstance(inner, torch.Tensor) else id(tensor)


def _meta_storages(value: Any) -> frozenset[int]:
    return frozenset(_storage_key(t) for t in tensors_in(value) if _on_meta(t))


def _make_parameter(cls: type[nn.Parameter], data: torch.Tensor | None, requires_grad: bool) -> nn.Parameter:
    """Stand-in for ``cls(data, requires_grad)`` in a recording (``Parameter.__new__`` is not a torch function)."""
    return _ORIGINAL_PARAMETER_NEW(cls, data, requires_grad)


@dataclass
class _Call:
    """One recorded torch call: what to run again, what it made and what it changed."""

    func: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grad_enabled: bool
    outputs: list[torch.Tensor]  # the tensors it returned, flattened, in order
    reads: list[torch.Tensor]  # meta tensors among its arguments
    made: frozenset[int]  # storages of the meta tensors it returned or changed, as they were after the call
    read: frozenset[int]  # storages of its meta arguments, as they were before the call (`p.data = q` changes p's)


@dataclass(eq=False)
class _Recording:
    """The torch calls of one ``deferred_init`` block, in the order they ran."""

    calls: list[_Call] = field(default_factory=list)
    versions: dict[int, int] = field(default_factory=dict)  # id(meta tensor) -> its version after the last record
    entry: dict[str, torch.Tensor] = field(default_factory=dict)  # generator states when the block began
    exit: dict[str, torch.Tensor] = field(default_factory=dict)  # ... and when it ended
    replayed: bool = False

    def begin(self) -> None:
        """The block begins: remember the generators' states, from which every replay draws."""
        self.entry = _generator_states()

    def end(self) -> None:
        """The block ends: remember the generators' states (unchanged by meta draws)."""
        self.exit = _generator_states()

    def note_effect(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Record a call made for its effect on the generators (``torch.manual_seed(42)`` inside ``__init__``)."""
        self.calls.append(_Call(func, args, dict(kwargs), torch.is_grad_enabled(), [], [], frozenset(), frozenset()))

    unwritten: set[int] = field(default_factory=set)  # storages made by torch.empty & co. and never written since

    def changed_unseen(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Those of ``tensors`` changed in place since their last recorded call, by code ferry did not see."""
        return [t for t in tensors if id(t) in self.versions and t._version != self.versions[id(t)]]

    def _needed(self, targets: list[torch.Tensor], *, draws_before: int) -> list[int]:
        """Indices of the calls ``targets`` depend on, plus the random calls up to ``draws_before`` not replayed."""
        needed_storages = {_storage_key(t) for t in targets}
        needed: list[int] = []
        for index in range(len(self.calls) - 1, -1, -1):
            call = self.calls[index]
            draws = index <= draws_before and _draws_random(call.func, call.kwargs)
            if draws or call.made & needed_storages:
                needed.append(index)
                needed_storages |= call.read
        needed.reverse()
        return needed

    def note(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        result: Any,
        read: frozenset[int],
    ) -> None:
        outputs = list(tensors_in(result))
        writes = [t for t in written_by(func, args, kwargs) if _on_meta(t)]
        if not writes and not any(_on_meta(t) for t in outputs):
            return  # a query (size, dim, repr) or a call on real tensors: nothing to replay
        reads = [t for t in tensors_in((args, kwargs)) if _on_meta(t)]
        made = frozenset(_storage_key(t) for t in (*outputs, *writes) if _on_meta(t))
        self.calls.append(_Call(func, args, dict(kwargs), torch.is_grad_enabled(), outputs, reads, made, read))
        if writes_values(func):
            self.unwritten -= {_storage_key(t) for t in writes}
        for tensor in (*outputs, *writes):
            if _on_meta(tensor):
                self.versions[id(tensor)] = tensor._version
                if tensor._base is not None:  # a view shares its base's version counter
                    self.versions[id(tensor._base)] = tensor._version
        if getattr(func, "__name__", "") in _EMPTY:
            self.unwritten |= {_storage_key(t) for t in outputs if _on_meta(t) and t.numel()}
        for tensor in outputs:
            if _on_meta(tensor):
                setattr(tensor, _TAG, self)

    def replay(
        self,
        targets: list[torch.Tensor],
        device: torch.device,
        *,
        redraw: bool,
        on_ready: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
    ) -> dict[int, torch.Tensor]:
        """Run again, on ``device``, the calls ``targets`` depend on; return ``id(meta tensor) -> real tensor``.

        With ``on_ready``, each target is handed over as ``on_ready(meta tensor, real tensor)`` right after the
        last call that writes or reads it, and dropped (not returned): only the targets still being made are held.

        Raises:
            _Unreplayable: a needed call reads a meta tensor that no recorded call made.
        """
        needed = self._needed(targets, draws_before=-1)
        if redraw:
            # Random numbers drawn for tensors the module no longer holds (a weight replaced by a tie, a temporary,
            # another model of the block) are drawn again, so every draw gets the numbers it got in the build.
            needed = self._needed(targets, draws_before=max(needed, default=-1))
        generator = _default_generator(device) if redraw else None
        start = self.entry.get(str(device)) if generator is not None else None
        before = None
        if generator is not None and start is not None:
            before = generator.get_state()
            exit_state = self.exit.get(str(device))
            undisturbed = not self.replayed and exit_state is not None and torch.equal(before, exit_state)
            last_draw = max(
                (i for i, call in enumerate(self.calls) if _draws_random(call.func, call.kwargs)), default=-1
            )
            # Left where the build would leave it when nothing drew since the block and this replay drew to the
            # end of it; else the caller's stream is given back as it was.
            keep_state = undisturbed and last_draw in needed
            generator.set_state(start)
        self.replayed = True
        try:
            return self._run(needed, targets, device, on_ready)
        finally:
            if before is not None and generator is not None and not keep_state:
                generator.set_state(before)

    def _run(
        self,
        needed: list[int],
        targets: list[torch.Tensor],
        device: torch.device,
        on_ready: Callable[[torch.Tensor, torch.Tensor], None] | None,
    ) -> dict[int, torch.Tensor]:
        """Run the calls ``needed`` (indices, in order) on ``device``; see :meth:`replay`."""
        keep = {id(t) for t in targets}
        last_use: dict[int, int] = {}
        for index in needed:
            for tensor in (*self.calls[index].reads, *self.calls[index].outputs):
                last_use[id(tensor)] = index
        real: dict[int, torch.Tensor] = {}
        ready_at: dict[int, list[torch.Tensor]] = {}
        if on_ready is not None:
            for tensor in targets:
                key = _storage_key(tensor)
                touching = [index for index in needed if key in self.calls[index].made or key in self.calls[index].read]
                ready_at.setdefault(max(touching, default=-1), []).append(tensor)

        def substitute(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                if not _on_meta(value):
                    return value
                if id(value) not in real:
                    raise _Unreplayable(value)
                return real[id(value)]
            if isinstance(value, torch.device):
                return device if value.type == "meta" else value
            if isinstance(value, str) and value == "meta":
                return device
            if isinstance(value, dict):
                return {key: substitute(item) for key, item in value.items()}
            if isinstance(value, list):
                return [substitute(item) for item in value]
            if isinstance(value, tuple):
                items = [substitute(item) for item in value]
                if type(value) is tuple:
                    return tuple(items)
                try:
                    return type(value)(items)  # torch.Size
                except TypeError:
                    return type(value)(*items)  # a named tuple
            return value

        with torch.device(device):
            for index in needed:
                call = self.calls[index]
                args = substitute(call.args)
                kwargs = substitute(call.kwargs)
                with torch.set_grad_enabled(call.grad_enabled):
                    result = call.func(*args, **kwargs)
                for recorded, made in zip(call.outputs, tensors_in(result), strict=False):
                    if _on_meta(recorded):
                        real[id(recorded)] = made
                for tensor in (*call.reads, *call.outputs):
                    if last_use.get(id(tensor)) == index and id(tensor) not in keep:
                        real.pop(id(tensor), None)
                for tensor in ready_at.get(index, ()):
                    finished = real.pop(id(tensor), None)
                    if finished is not None and on_ready is not None:
                        on_ready(tensor, finished)
        return real


class _Unreplayable(Exception):
    """A needed call reads a meta tensor that nothing recorded made (it came from outside the block)."""


class _RecordingMode(TorchFunctionMode):
    def __init__(self, recording: _Recording, default_device: torch.device) -> None:
        super().__init__()
        self.recording = recording
        self.default_device = default_device

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        with _quiet():
            read = _meta_storages((args, kwargs)) if not _STATE.inside else frozenset()
        _STATE.inside += 1
        try:
            result = func(*args, **kwargs)
            with _quiet():
                empty_factory = (
                    isinstance(result, torch.Tensor)
                    and _on_meta(result)
                    and result.numel() == 0
                    and "device" not in kwargs
                    and not any(True for _ in tensors_in((args, kwargs)))
                )
            if empty_factory:
                # An empty factory result needs no memory: make it where a normal build would, so code probing the
                # default device with torch.tensor([]) (transformers does, to skip initialising on meta) builds
                # and initialises as usual, and the initialisation is recorded.
                with contextlib.suppress(TypeError, RuntimeError):
                    result = func(*args, **kwargs, device=self.default_device)
        finally:
            _STATE.inside -= 1
        if not _STATE.inside:
            with _quiet():
                self.recording.note(func, args, kwargs, result, read)
        return result


def _recording_parameter_new(
    cls: type[nn.Parameter], data: torch.Tensor | None = None, requires_grad: bool = True
) -> nn.Parameter:
    with _quiet():
        read = _meta_storages(data)
    parameter = _ORIGINAL_PARAMETER_NEW(cls, data, requires_grad)
    with _quiet():
        if _STATE.recordings and not _STATE.inside and _on_meta(parameter):
            _STATE.recordings[-1].note(_make_parameter, (cls, data, requires_grad), {}, parameter, read)
    return parameter


def _init_functions() -> dict[str, Callable[..., Any]]:
    """``torch.nn.init``'s in-place initialisers and their ``_no_grad_*`` helpers, by name.

    Several are no-ops on ``meta`` (``trunc_normal_``, ``orthogonal_``, ``dirac_``, ``sparse_`` return at once) or
    loop on values (``trunc_normal_`` resamples until every value is in range), so their inner torch calls cannot
    stand for them: each is recorded as one call and replayed whole.
    """
    functions = {}
    for name in dir(nn.init):
        value = getattr(nn.init, name)
        if name.endswith("_") and not name.endswith("__") and callable(value) and not isinstance(value, type):
            functions[name] = value
    return functions


_INIT_FUNCTIONS = _init_functions()
_INIT_FUNCTION_SET = frozenset(_INIT_FUNCTIONS.values())


def _recorded_whole(original: Callable[..., Any]) -> Callable[..., Any]:
    def initialiser(*args: Any, **kwargs: Any) -> Any:
        if _STATE.inside:
            return original(*args, **kwargs)
        recording = _STATE.recordings[-1] if _STATE.recordings else _recording_in((args, kwargs))
        if recording is None:
            return original(*args, **kwargs)
        with _quiet():
            read = _meta_storages((args, kwargs))
        _STATE.inside += 1
        try:
            result = original(*args, **kwargs)
        finally:
            _STATE.inside -= 1
        with _quiet():
            recording.note(original, args, kwargs, result, read)
        return result

    initialiser.__name__ = original.__name__
    initialiser.__qualname__ = getattr(original, "__qualname__", original.__name__)
    initialiser.__module__ = original.__module__  # it stands for torch.nn.init's function
    initialiser.__doc__ = original.__doc__
    initialiser.__wrapped__ = original  # type: ignore[attr-defined]
    return initialiser


_RECORDING_INIT_FUNCTIONS = {name: _recorded_whole(function) for name, function in _INIT_FUNCTIONS.items()}


_ORIGINAL_MANUAL_SEED = torch.manual_seed


def _recording_manual_seed(seed: int) -> torch.Generator:
    generator = _ORIGINAL_MANUAL_SEED(seed)
    if _STATE.recordings and not _STATE.inside:
        _STATE.recordings[-1].note_effect(_ORIGINAL_MANUAL_SEED, (seed,), {})
    return generator


@contextlib.contextmanager
def _parameters_recorded() -> Iterator[None]:
    """While any ``deferred_init`` block runs: ``Parameter`` creation and ``torch.manual_seed`` are recorded."""
    global _PATCH_USERS
    with _PATCH_LOCK:
        if _PATCH_USERS == 0:
            nn.Parameter.__new__ = _recording_parameter_new  # type: ignore[method-assign,assignment]
            torch.manual_seed = _recording_manual_seed
            torch.random.manual_seed = _recording_manual_seed
        _PATCH_USERS += 1
    try:
        yield
    finally:
        with _PATCH_LOCK:
            _PATCH_USERS -= 1
            if _PATCH_USERS == 0:
                nn.Parameter.__new__ = _ORIGINAL_PARAMETER_NEW  # type: ignore[method-assign]
                torch.manual_seed = _ORIGINAL_MANUAL_SEED
                torch.random.manual_seed = _ORIGINAL_MANUAL_SEED


#: Recordings whose tensors may still be on meta. While there is one, the ``nn.init`` initialisers and
#: ``Module.apply``/``Module._apply`` (``model.apply(init_fn)``, ``model.half()``, ``model.to(dtype)``) record what
#: they do to a recorded meta tensor after its block too; once none is left, torch is as it was.
_LIVE: weakref.WeakSet[_Recording] = weakref.WeakSet()
_ORIGINAL_APPLY = nn.Module.apply
_ORIGINAL_INTERNAL_APPLY = nn.Module._apply


def _recording_in(value: Any) -> _Recording | None:
    """The recording of the first recorded meta tensor in ``value`` (a tensor, or a module's), or None."""
    tensors = (*value.parameters(), *value.buffers()) if isinstance(value, nn.Module) else tensors_in(value)
    for tensor in tensors:
        if _on_meta(tensor):
            recording = getattr(tensor, _TAG, None)
            if isinstance(recording, _Recording):
                return recording
    return None


def _recorded_module_method(original: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        recording = None if _STATE.recordings or _STATE.inside else _recording_in(self)
        if recording is None:
            return original(self, *args, **kwargs)
        with _RecordingMode(recording, torch.device("cpu")):
            return original(self, *args, **kwargs)

    method.__name__ = original.__name__
    method.__qualname__ = original.__qualname__
    method.__module__ = original.__module__  # it stands for torch's method (doctest collects torch's docs there)
    method.__doc__ = original.__doc__
    method.__wrapped__ = original  # type: ignore[attr-defined]
    return method


_RECORDING_APPLY = _recorded_module_method(_ORIGINAL_APPLY)
_RECORDING_INTERNAL_APPLY = _recorded_module_method(_ORIGINAL_INTERNAL_APPLY)


def _live(recording: _Recording) -> None:
    """``recording`` exists: record initialisers and conversions of its tensors until it is gone."""
    with _PATCH_LOCK:
        if not _LIVE:
            for name, function in _RECORDING_INIT_FUNCTIONS.items():
                setattr(nn.init, name, function)
            nn.Module.apply = _RECORDING_APPLY  # type: ignore[method-assign]
            nn.Module._apply = _RECORDING_INTERNAL_APPLY  # type: ignore[method-assign]
        _LIVE.add(recording)
    weakref.finalize(recording, _gone)


def _gone() -> None:
    with _PATCH_LOCK:
        if _LIVE:
            return
        for name, function in _INIT_FUNCTIONS.items():
            setattr(nn.init, name, function)
        nn.Module.apply = _ORIGINAL_APPLY  # type: ignore[method-assign]
        nn.Module._apply = _ORIGINAL_INTERNAL_APPLY  # type: ignore[method-assign]


@contextlib.contextmanager
def deferred_init() -> Iterator[None]:
    """Build modules without allocating or computing any weights; :func:`materialize` makes them real later.

    Inside the block, torch factories without a ``device`` create ``meta`` tensors (as under
    ``torch.device("meta")``: shapes and dtypes, no memory), and ferry records every torch call that creates or
    changes one: parameters, buffers (non-persistent ones such as RoPE's ``inv_freq`` too), the ``nn.init``
    calls of ``reset_parameters`` and of your own ``__init__``, ties. :func:`materialize` replays them on the
    target device, so a model of any size is allocated once, where it will run. Tensors created with an explicit
    real device (``device="cpu"``) are real as usual. Code that reads tensor values while building (``.item()``,
    ``.tolist()``) fails as it does under ``torch.device("meta")``.

    Mirrors ``torch.device("meta")`` plus ``torchdistx.deferred_init`` (unmaintained).

    Example:
        >>> import torch, ferry
        >>> with ferry.deferred_init():
        ...     model = torch.nn.Linear(4, 2)
        >>> model.weight.device
        device(type='meta')
        >>> ferry.materialize(model, "cpu").weight.device
        device(type='cpu')
    """
    if _STATE.recordings:  # nested (a library's block inside the user's): one recording, one random stream
        yield
        return
    recording = _Recording()
    _live(recording)
    default_device = torch.get_default_device()
    if default_device.type == "meta":
        default_device = torch.device("cpu")
    _STATE.recordings.append(recording)
    recording.begin()
    try:
        with _parameters_recorded(), torch.device("meta"), _RecordingMode(recording, default_device):
            yield
    finally:
        recording.end()
        _STATE.recordings[:] = [other for other in _STATE.recordings if other is not recording]


@dataclass
class _Slot:
    """Where a module keeps one tensor: ``owner._parameters[name]``, ``owner._buffers[name]`` or ``owner.name``."""

    owner: nn.Module
    table: str  # "_parameters", "_buffers" or "__dict__"
    name: str
    path: str
    kind: str  # parameter, buffer, non-persistent buffer, tensor attribute
    tensor: torch.Tensor

    def install(self, tensor: torch.Tensor) -> None:
        if self.table == "__dict__":
            object.__setattr__(self.owner, self.name, tensor)
        else:
            getattr(self.owner, self.table)[self.name] = tensor


def _slots(module: nn.Module) -> list[_Slot]:
    slots = []
    for prefix, owner in module.named_modules():
        dotted = f"{prefix}." if prefix else ""
        for name, parameter in owner._parameters.items():
            if parameter is not None and not is_lazy(parameter):  # a lazy module's: shaped by its first forward
                slots.append(_Slot(owner, "_parameters", name, dotted + name, "parameter", parameter))
        for name, buffer in owner._buffers.items():
            if buffer is not None and not is_lazy(buffer):
                kind = "non-persistent buffer" if name in owner._non_persistent_buffers_set else "buffer"
                slots.append(_Slot(owner, "_buffers", name, dotted + name, kind, buffer))
        for name, value in vars(owner).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                slots.append(_Slot(owner, "__dict__", name, dotted + name, "tensor attribute", value))
    return slots


def _like(old: torch.Tensor, data: torch.Tensor) -> torch.Tensor:
    """``data`` with ``old``'s dtype, tensor class and ``requires_grad`` (a Parameter stays a Parameter)."""
    if data.dtype != old.dtype:
        data = data.to(old.dtype)
    if isinstance(old, nn.Parameter):
        if type(data) is not type(old) or data.requires_grad != old.requires_grad:
            # a Parameter subclass keeps its class; a tensor subclass flagged as a parameter (the pretend GPU's)
            # is made as nn.Parameter makes it
            cls = type(old) if issubclass(type(old), nn.Parameter) else nn.Parameter
            data = cls(data.detach(), old.requires_grad)
    elif data.requires_grad != old.requires_grad and data.is_leaf:
        data.requires_grad_(old.requires_grad)
    return data


def _zero_size(tensor: torch.Tensor) -> bool:
    return tensor.numel() == 0


class Coverage:
    """Which elements of some storages have been written: whole storages, or a mask for those written in part.

    Storages are named by address (``untyped_storage().data_ptr()``; a wrapper tensor's, of the tensor it wraps).
    A write through a view counts for the elements of that view only (``w[:2].zero_()`` leaves ``w[2:]``
    unwritten); a storage is written once every element is. Shared by :func:`materialize` and the sanitizer.
    """

    def __init__(self, sizes: dict[int, int] | None = None) -> None:
        self.sizes = dict(sizes or {})  # address -> bytes of each watched storage
        self.full: set[int] = set()
        self.masks: dict[int, torch.Tensor] = {}

    def watch(self, tensor: torch.Tensor) -> int | None:
        """Watch ``tensor``'s storage (nothing written yet); return its address, or None for an empty tensor."""
        if not tensor.numel() or _on_meta(tensor):
            return None
        key = data_key(tensor)
        self.sizes[key] = _nbytes(tensor)
        self.full.discard(key)
        self.masks.pop(key, None)
        return key

    def _region(self, key: int, tensor: torch.Tensor) -> torch.Tensor | None:
        """The mask elements ``tensor`` covers (a view of the mask), or None when it covers the whole storage."""
        item = tensor.element_size()
        if tensor.is_contiguous() and tensor.storage_offset() == 0 and tensor.numel() * item >= self.sizes[key]:
            return None
        mask = self.masks.get(key)
        if mask is None:
            mask = self.masks[key] = torch.zeros(max(self.sizes[key] // item, 1), dtype=torch.bool, device="cpu")
        try:
            return mask.as_strided(tuple(tensor.shape), tensor.stride(), tensor.storage_offset())
        except RuntimeError:  # a view the mask cannot describe (another element size): the whole storage
            return None

    def note(self, tensor: torch.Tensor) -> None:
        """``tensor`` (or the view it is) was written."""
        key = data_key(tensor) if not _on_meta(tensor) else None
        if key is None or key not in self.sizes or key in self.full:
            return
        region = self._region(key, tensor)
        if region is not None:
            region.fill_(True)
            if not bool(self.masks[key].all()):
                return
        self.full.add(key)
        self.masks.pop(key, None)

    def covered(self, tensor: torch.Tensor) -> bool:
        """Whether every element of ``tensor`` was written (true for a storage not watched)."""
        key = data_key(tensor) if not _on_meta(tensor) and tensor.numel() else None
        if key is None or key not in self.sizes or key in self.full:
            return True
        region = self._region(key, tensor)
        return region is not None and bool(region.all())

    def forget(self, key: int) -> None:
        """Stop watching the storage at ``key``."""
        self.sizes.pop(key, None)
        self.full.discard(key)
        self.masks.pop(key, None)

    def unwritten(self) -> set[int]:
        """Watched storages with an element nothing wrote."""
        return {key for key in self.sizes if key not in self.full}


class _WriteWatch(TorchFunctionMode):
    """Notes what torch calls write in place (``nn.init.*_``, ``t.normal_()``, ``t[...] = v``...) into a coverage."""

    def __init__(self, sizes: dict[int, int] | None = None) -> None:
        super().__init__()
        self.coverage = Coverage(sizes)

    def unwritten(self) -> set[int]:
        """Watched storages with an element no torch call wrote."""
        return self.coverage.unwritten()

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        targets = written_by(func, args, kwargs)
        if getattr(func, "__name__", "") == "numpy":  # writes through NumPy are invisible: count the view as one
            targets.extend(tensors_in(args[:1]))
        result = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        pure = name in PURE_WRITES or name in _INIT_FUNCTIONS or "out" in kwargs or name == "numpy"
        if pure and writes_values(func):  # `w.mul_(0)` keeps garbage (NaN * 0 is NaN): not an initialisation
            for tensor in targets:
                self.coverage.note(tensor)
        return result


def _reset(owner: nn.Module) -> bool:
    for name in ("reset_parameters", "_reset_parameters"):
        method = getattr(owner, name, None)
        if callable(method):
            method()
            return True
    return False


def materialize(
    module: nn.Module, device: DeviceLike, *, init: Callable[[nn.Module], object] | None = None
) -> nn.Module:
    """Give every ``meta`` tensor of ``module`` memory on ``device``, initialised, and return ``module``.

    Tensors built under :func:`deferred_init` are made by replaying how they were made, on ``device``: with the
    same seed the result equals the model built normally there (bit for bit on the CPU; on CUDA up to the RNG
    differences PyTorch documents), non-persistent buffers (RoPE's ``inv_freq``), custom modules without
    ``reset_parameters`` and tied weights (still tied afterwards) included. Other ``meta`` tensors (a model built
    under a plain ``torch.device("meta")``) get memory as ``Module.to_empty(device=...)`` gives, then each module
    owning one is reset with its ``reset_parameters()`` (or ``_reset_parameters()``, as ``nn.MultiheadAttention``
    has). Tensors already real are moved to ``device`` as ``Module.to`` would. Then ``init(module)``, if given,
    runs (under ``torch.device(device)`` and with autograd on, as in a normal build); use it for your own
    initialisation scheme or to fill what nothing else does. Parameters, buffers and plain tensor attributes are
    all covered; shared tensors stay shared. Each tensor is allocated once; replay intermediates are freed after
    their last use.
    Parameters keep their Python objects (their memory is swapped in, as ``torch.utils.swap_tensors`` does), so
    an optimizer or a hook made before still holds them.

    Random numbers: every replay draws from the generator state its ``deferred_init`` block began with (the CPU
    generator; a CUDA device's once CUDA is initialised), so draws made between the block and ``materialize``,
    or the order in which the models of one block are materialised, do not change the values. The caller's
    random stream is given back as it was, except after the first ``materialize`` of a block that drew to its
    end with nothing drawn in between: then it is where a normal build would have left it. ``torch.manual_seed``
    inside the block is replayed in its place; ``torch.set_rng_state``/``fork_rng`` inside it are not.
    ``nn.init`` calls, ``module.apply(fn)`` and dtype conversions (``model.half()``) made after the block on its
    meta tensors are recorded too; other in-place changes after the block are not.

    Args:
        module: The module; changed in place.
        device: Where its tensors go: ``"cuda:0"``, ``"cpu"``, an int or a ``torch.device``.
        init: Called as ``init(module)`` after everything else.

    Returns:
        ``module``, with no ``meta`` tensor left.

    Raises:
        InitializationError: Some tensors would hold uninitialised memory: built on ``meta`` without
            ``deferred_init``, not written by ``reset_parameters()`` nor ``init``. Names them all (``names``,
            ``kinds``); the module is left with memory for them, to be filled and checked again.
        DeviceError: ``device`` is not available on this machine.
        ArgumentError: ``module`` is not an ``nn.Module``, or ``device`` is ``meta``.
    """
    if not isinstance(module, nn.Module):
        raise ArgumentError(
            f"materialize() needs an nn.Module first, got {type(module).__name__}. Call it as "
            "ferry.materialize(model, device)."
        )
    target = resolve_device(device)
    if target.type == "meta":
        raise ArgumentError(
            "materialize(module, 'meta') would leave the module without memory. Name the device its tensors "
            "should live on: ferry.materialize(model, 'cuda') or ferry.materialize(model, 'cpu')."
        )
    return fill(module, target, init=init, given={}, redraw=True)


def fill(
    module: nn.Module,
    target: torch.device,
    *,
    init: Callable[[nn.Module], object] | None,
    given: dict[int, torch.Tensor],
    redraw: bool,
    call: str = "materialize()",
    loaded: frozenset[str] = frozenset(),
) -> nn.Module:
    """:func:`materialize` onto a resolved device, with ``given[id(tensor)]`` already made for some tensors.

    ``redraw``: replay the random draws of tensors the module no longer holds, so the numbers equal a normal
    build's; off when the values come from a checkpoint and only the rest (non-persistent buffers) is replayed.
    ``loaded``: dotted names that a checkpoint fills next: given memory on ``target``, neither made nor checked.
    """
    _retarget_lazy(module, target)
    slots = _slots(module)
    dtensor = _dtensor_type()
    if dtensor is not None and any(isinstance(slot.tensor, dtensor) and _on_meta(slot.tensor) for slot in slots):
        return _fill_sharded(module, target, init=init, redraw=redraw, call=call, loaded=loaded)
    unique: dict[int, torch.Tensor] = {}
    for slot in slots:
        unique.setdefault(id(slot.tensor), slot.tensor)
    made: dict[int, torch.Tensor] = {key: _like(unique[key], value) for key, value in given.items() if key in unique}
    for slot in slots:
        if slot.path in loaded and id(slot.tensor) not in made:
            tensor = slot.tensor
            made[id(tensor)] = _like(tensor, torch.empty_like(tensor, device=target)) if _on_meta(tensor) else tensor
    recorded: dict[int, tuple[_Recording, list[torch.Tensor]]] = {}
    for key, tensor in unique.items():
        recording = getattr(tensor, _TAG, None) if _on_meta(tensor) and key not in made else None
        if isinstance(recording, _Recording):
            recorded.setdefault(id(recording), (recording, []))[1].append(tensor)
    for recording, targets in recorded.values():
        _warn_unseen(recording, targets, slots)
        try:
            real = recording.replay(targets, target, redraw=redraw)
        except _Unreplayable:
            real = {}
            for tensor in targets:  # one by one: only those that depend on outside tensors stay unmade
                with contextlib.suppress(_Unreplayable):
                    real.update(recording.replay([tensor], target, redraw=redraw))
        for tensor in targets:
            replayed = real.get(id(tensor))
            if _storage_key(tensor) in recording.unwritten:
                continue  # made by torch.empty and never written: reset_parameters()/init must fill it
            if replayed is not None and replayed.shape == tensor.shape:
                made[id(tensor)] = _like(tensor, replayed)
    fresh: dict[int, int] = {}  # storages allocated uninitialised: address -> bytes
    for key, tensor in unique.items():
        if key in made:
            continue
        if _on_meta(tensor):
            data = torch.empty_like(tensor, device=target)
            if not _zero_size(data):
                fresh[data_key(data)] = _nbytes(data)
        else:
            data = tensor.detach().to(target) if tensor.device != target else tensor
        made[key] = _like(tensor, data) if data is not tensor else tensor
    _install(slots, unique, made)

    watch = _WriteWatch(fresh)
    if fresh:
        owners: dict[int, nn.Module] = {}
        for slot in _slots(module):
            if slot.table != "__dict__" and not _zero_size(slot.tensor) and data_key(slot.tensor) in fresh:
                owners.setdefault(id(slot.owner), slot.owner)
        with torch.device(target), watch:
            for owner in owners.values():
                _reset_keeping(owner, {*given, *(id(made[key]) for key in given if key in made)})
    if init is not None:
        with torch.device(target), watch:
            init(module)
    _check_initialised(module, watch.unwritten(), call)
    return module


def _nbytes(tensor: torch.Tensor) -> int:
    inner = getattr(tensor, "_elem", None)
    return _nbytes(inner) if isinstance(inner, torch.Tensor) else tensor.untyped_storage().nbytes()


def _warn_unseen(recording: _Recording, targets: list[torch.Tensor], slots: list[_Slot]) -> None:
    """Warn about tensors changed in place after their block by code ferry does not see: the change is lost."""
    changed = {id(t) for t in recording.changed_unseen(targets)}
    if not changed:
        return
    names = list(dict.fromkeys(slot.path for slot in slots if id(slot.tensor) in changed))
    warnings.warn(
        f"materialize: {len(names)} tensor(s) were changed in place after the deferred_init block, by code "
        f"ferry does not record ({', '.join(names[:8])}{' ...' if len(names) > 8 else ''}): they are made as "
        "the block made them, without that change. Make the change inside the block, through model.apply(fn) "
        "or torch.nn.init (both recorded), or after ferry.materialize.",
        PlacementWarning,
        stacklevel=4,
    )


def _retarget_lazy(module: nn.Module, target: torch.device) -> None:
    """A lazy module's uninitialised tensors, made on meta, are made on ``target`` by its first forward instead."""
    for owner in module.modules():
        for table in ("_parameters", "_buffers"):
            entries = getattr(owner, table)
            for name, tensor in list(entries.items()):
                if tensor is not None and is_lazy(tensor) and tensor.device != target:
                    entries[name] = type(tensor)(requires_grad=tensor.requires_grad, device=target, dtype=tensor.dtype)  # type: ignore[call-arg]


def _install(slots: list[_Slot], unique: dict[int, torch.Tensor], made: dict[int, torch.Tensor]) -> None:
    """Put each made tensor in place of the meta one, keeping the Python object (``torch.utils.swap_tensors``).

    An optimizer, a hook or a tie that holds a parameter from before keeps holding it, now with memory; where
    the swap is refused (another tensor subclass), the slot gets the new object instead.
    """
    replaced: dict[int, torch.Tensor] = {}
    for key, old in unique.items():
        new = made[key]
        if new is old:
            continue
        try:
            torch.utils.swap_tensors(old, new)  # type: ignore[no-untyped-call]
        except (RuntimeError, TypeError):
            replaced[key] = new
    for slot in slots:
        replacement = replaced.get(id(slot.tensor))
        if replacement is not None:
            slot.install(replacement)


def _reset_keeping(owner: nn.Module, keep: set[int]) -> None:
    """``owner``'s ``reset_parameters()``, then the values of its tensors in ``keep`` (from a checkpoint) put back."""
    saved = [
        (table, name, tensor.detach().clone())
        for table in ("_parameters", "_buffers")
        for name, tensor in getattr(owner, table).items()
        if tensor is not None and id(tensor) in keep
    ]
    _reset(owner)
    with torch.no_grad():
        for table, name, value in saved:
            getattr(owner, table)[name].copy_(value)


def _dtensor_type() -> type | None:
    """``DTensor`` if ``torch.distributed.tensor`` is imported (no DTensor exists otherwise), else None."""
    loaded = sys.modules.get("torch.distributed.tensor")
    return getattr(loaded, "DTensor", None)


def _fill_sharded(
    module: nn.Module,
    target: torch.device,
    *,
    init: Callable[[nn.Module], object] | None,
    redraw: bool,
    call: str,
    loaded: frozenset[str],
) -> nn.Module:
    """:func:`fill` for a model sharded on ``meta`` by FSDP2: each rank gets memory for its own shards only.

    FSDP2's own ``to_empty`` allocates every rank's shards (and the unsharded buffers) in place; then each tensor
    is replayed whole, one at a time, on ``device``, and the rank copies its piece (the placement's chunk) into its
    shard; the whole tensor is freed before the next. Every rank must replay the same numbers: seed them alike
    before the ``deferred_init`` block (``torch.manual_seed(0)`` on every rank). ``loaded``: dotted names a
    checkpoint fills next, neither replayed nor checked.
    """
    from torch.distributed.tensor import DTensor, distribute_tensor

    before = _slots(module)
    origins = {
        (id(slot.owner), slot.table, slot.name): getattr(slot.tensor, "_ferry_origin", slot.tensor) for slot in before
    }
    module.to_empty(device=target)
    slots = _slots(module)
    seen: set[int] = set()
    fresh: dict[int, int] = {}
    by_recording: dict[int, tuple[_Recording, list[torch.Tensor]]] = {}
    slot_of: dict[int, _Slot] = {}  # id(origin) -> the slot its values go to
    for slot in slots:
        if id(slot.tensor) in seen or slot.path in loaded:
            continue
        seen.add(id(slot.tensor))
        origin = origins.get((id(slot.owner), slot.table, slot.name), slot.tensor)
        recording = getattr(origin, _TAG, None) if _on_meta(origin) else None
        if isinstance(recording, _Recording) and _storage_key(origin) not in recording.unwritten:
            by_recording.setdefault(id(recording), (recording, []))[1].append(origin)
            slot_of[id(origin)] = slot
        elif _on_meta(slot.tensor) or slot.table != "__dict__":
            slot_of[id(origin)] = slot
    placed: set[int] = set()

    def place(origin: torch.Tensor, whole: torch.Tensor) -> None:
        slot = slot_of[id(origin)]
        tensor = slot.tensor
        if whole.shape != origin.shape:
            return
        whole = whole.detach().to(origin.dtype)
        if isinstance(tensor, DTensor):
            piece = distribute_tensor(whole, tensor.device_mesh, tensor.placements, src_data_rank=None).to_local()
            with torch.no_grad():
                tensor.to_local().copy_(piece)
        elif _on_meta(tensor):
            slot.install(_like(tensor, whole))
        else:
            with torch.no_grad():
                tensor.copy_(whole)
        placed.add(id(origin))

    for recording, targets in by_recording.values():
        _warn_unseen(recording, targets, before)
        with contextlib.suppress(_Unreplayable):
            recording.replay(targets, target, redraw=redraw, on_ready=place)
    for key, slot in slot_of.items():
        if key in placed:
            continue
        tensor = slot.tensor
        if _on_meta(tensor):  # a plain tensor attribute: to_empty does not reach it
            tensor = _like(tensor, torch.empty_like(tensor, device=target))
            slot.install(tensor)
        local = tensor.to_local() if isinstance(tensor, DTensor) else tensor
        if local.numel():
            fresh[data_key(local)] = _nbytes(local)
    watch = _WriteWatch(fresh)
    if fresh:
        owners: dict[int, nn.Module] = {}
        for slot in _slots(module):
            local = slot.tensor.to_local() if isinstance(slot.tensor, DTensor) else slot.tensor
            if slot.table != "__dict__" and local.numel() and data_key(local) in fresh:
                owners.setdefault(id(slot.owner), slot.owner)
        with torch.device(target), watch:
            for owner in owners.values():
                _reset(owner)
    if init is not None:
        with torch.device(target), watch:
            init(module)
    unwritten = watch.unwritten()
    names, kinds = [], []
    for slot in _slots(module):
        local = slot.tensor.to_local() if isinstance(slot.tensor, DTensor) else slot.tensor
        bad = _on_meta(local) or (local.numel() and data_key(local) in unwritten)
        if bad and slot.path not in loaded and slot.path not in names:
            names.append(slot.path)
            kinds.append(slot.kind)
    if names:
        _raise_uninitialised(module, names, kinds, call)
    return module


def _check_initialised(module: nn.Module, unwritten: set[int], call: str) -> None:
    names: list[str] = []
    kinds: list[str] = []
    seen: set[int] = set()
    for slot in _slots(module):
        tensor = slot.tensor
        if _on_meta(tensor):
            bad = True
        elif _zero_size(tensor) or tensor.device.type == "meta":
            bad = False
        else:
            bad = data_key(tensor) in unwritten
        if bad and id(tensor) not in seen:
            seen.add(id(tensor))
            names.append(slot.path or slot.name)
            kinds.append(slot.kind)
    if names:
        _raise_uninitialised(module, names, kinds, call)


def _raise_uninitialised(module: nn.Module, names: list[str], kinds: list[str], call: str) -> None:
    listed = ", ".join(f"{name} ({kind})" for name, kind in zip(names, kinds, strict=True))
    raise InitializationError(
        f"{call} would leave {len(names)} tensor(s) of {type(module).__name__} uninitialised (whatever the "
        f"memory held): {listed}. ferry has no record of how they were made (built under a plain "
        "torch.device('meta') rather than ferry.deferred_init(), made by torch.empty and never written, or "
        "changed after the block by code ferry does not see), and neither "
        f"{'the checkpoint, nor ' if call.startswith('load') else ''}a reset_parameters() of their module nor "
        "init= wrote every element of them. Build the model under "
        "`with ferry.deferred_init(): model = ...` so ferry replays how each tensor was made (non-persistent "
        "buffers such as inv_freq included), or pass init=, a function that fills them: "
        "ferry.materialize(model, device, init=my_init).",
        names=names,
        kinds=kinds,
    )
