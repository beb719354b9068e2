"""The check on ``Module.to_empty``: a tensor read before anything wrote into the memory it was given.

``to_empty(device=...)`` gives a module built on ``meta`` memory on a device and writes nothing into it. While a
sanitizer is on, ``Module.to_empty`` is wrapped (by :class:`ferry.sanitizer._patches.Patches`) and the storages of
every parameter and buffer it made are remembered, with their names. The mode then asks, for each torch operation:

- writes: an in-place operation (``name_``, ``t[...] = v``, ``t.data = v``, ``out=``) on such a storage fills it:
  it is forgotten (``reset_parameters()``, ``nn.init.*``, ``load_state_dict``'s ``copy_``, an ``init`` function);
- copies: ``.to()``, ``.clone()``, ``.contiguous()``... of such a storage carry the garbage to the copy;
- reads: any other operation taking such a storage (``F.linear`` in a forward, ``x * model.scale``) reads garbage:
  a finding naming the tensor, the ``to_empty`` call that made it and the fix, reported once per tensor.

Views, ``.data``, shape and metadata queries neither read nor write. Nothing is watched until a ``to_empty`` runs,
so the cost elsewhere is one truth test per operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ferry.errors import InitializationError
from ferry.placement.deferred import PURE_WRITES, Coverage, data_key, tensors_in, writes_values, written_by
from ferry.sanitizer._frames import SourceLine, source_line, user_frame

Tensor = torch.Tensor

#: operations that only look at a tensor's metadata or make a view of it: not a read of its values
_NEUTRAL = frozenset(
    (
        "size dim ndimension numel nelement element_size stride storage_offset data_ptr untyped_storage "
        "is_contiguous is_floating_point is_complex __get__ __len__ __hash__ detach view view_as reshape "
        "reshape_as __getitem__ t transpose permute expand expand_as flatten unflatten unsqueeze squeeze narrow "
        "select as_strided chunk split unbind movedim requires_grad_ retain_grad register_hook get_device "
        "_has_compatible_shallow_copy_type __repr__ __format__ __str__ __reduce_ex__ __deepcopy__ share_memory_ "
        "pin_memory is_pinned empty_like zeros_like ones_like full_like rand_like randn_like randint_like new_zeros "
        "new_ones new_empty new_full new_empty_strided"
    ).split()
)

#: operations whose result is a copy of their first argument's values: garbage in, garbage out
_COPIES = frozenset(
    "to cuda cpu clone contiguous type float half double bfloat16 module_load new_tensor __deepcopy__".split()
)


def _key(tensor: Tensor) -> int | None:
    """The address of ``tensor``'s storage, or None for a meta or empty one (nothing to watch)."""
    if tensor.is_meta or not tensor.numel():
        return None
    return data_key(tensor)


@dataclass(frozen=True)
class _Origin:
    """Where an unwritten storage came from: its tensor's name, its kind, its module, the ``to_empty`` call."""

    name: str
    kind: str
    module: str
    where: SourceLine


#: torch.nn.init's initialisers: they write their tensor without reading it
_INITIALISERS = frozenset(name for name in dir(nn.init) if name.endswith("_") and not name.endswith("__"))


class InitWatch:
    """Remembers the storages ``to_empty`` made and reports the first read of each one nothing wrote."""

    def __init__(self, emit: Any) -> None:
        self.emit = emit
        self.coverage = Coverage()
        self.origins: dict[int, _Origin] = {}

    @property
    def unwritten(self) -> bool:
        """Whether any watched storage still has an element nothing wrote."""
        return bool(self.origins)

    def emptied(self, module: nn.Module) -> None:
        """``module.to_empty(...)`` returned: its parameters and buffers hold garbage until written."""
        frame = user_frame()
        where = source_line(frame) if frame is not None else SourceLine("<unknown>", 0, "")
        for prefix, owner in module.named_modules():
            dotted = f"{prefix}." if prefix else ""
            for name, tensor in owner._parameters.items():
                self._remember(tensor, dotted + name, "parameter", type(module).__name__, where)
            for name, tensor in owner._buffers.items():
                kind = "non-persistent buffer" if name in owner._non_persistent_buffers_set else "buffer"
                self._remember(tensor, dotted + name, kind, type(module).__name__, where)

    def _remember(self, tensor: Tensor | None, name: str, kind: str, module: str, where: SourceLine) -> None:
        if tensor is None or _key(tensor) is None:
            return
        key = self.coverage.watch(tensor)
        if key is not None:
            self.origins[key] = _Origin(name, kind, module, where)

    def _garbage(self, tensor: Tensor) -> _Origin | None:
        key = _key(tensor)
        if key is None or key not in self.origins or self.coverage.covered(tensor):
            return None
        return self.origins[key]

    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Tensor]:
        """Check ``func``'s reads; return the tensors it writes (noted by :meth:`after`)."""
        name = getattr(func, "__name__", "")
        targets = written_by(func, args, kwargs)
        if not writes_values(func):
            return []  # `p.grad = g`, `p.requires_grad = False`: values neither read nor written
        if name in _NEUTRAL or name in _COPIES:
            return targets
        pure = name in PURE_WRITES or name in _INITIALISERS or "out" in kwargs
        skip = {id(t) for t in targets} if pure else set()  # written, not read; `w.mul_(2)` reads w first
        for tensor in tensors_in((args, kwargs)):
            if id(tensor) in skip:
                continue
            origin = self._garbage(tensor)
            if origin is not None:
                key = _key(tensor)
                self._report(func, origin, partly=key is not None and key in self.coverage.masks)
                key = _key(tensor)
                if key is not None:  # reported once per tensor
                    self.origins.pop(key, None)
                    self.coverage.forget(key)
        return targets

    def after(self, func: Any, args: tuple[Any, ...], written: list[Tensor], result: Any) -> None:
        for tensor in written:
            self.coverage.note(tensor)
            key = _key(tensor)
            if key is not None and key in self.origins and key in self.coverage.full:
                del self.origins[key]
                self.coverage.forget(key)
        if getattr(func, "__name__", "") in _COPIES and args and isinstance(args[0], Tensor):
            origin = self._garbage(args[0])
            if origin is not None:
                for tensor in tensors_in(result):
                    if _key(tensor) not in (None, _key(args[0])):
                        self._remember(tensor, origin.name, origin.kind, origin.module, origin.where)

    def _report(self, func: Any, origin: _Origin, *, partly: bool = False) -> None:
        frame = user_frame()
        if frame is None:
            return
        where = source_line(frame)
        op = getattr(func, "__name__", str(func))
        message = (
            f"to-empty-without-init: {op} at {where.described()} reads {origin.name} ({origin.kind}) of "
            f"{origin.module}, which holds whatever its memory held: {origin.where.described()} called to_empty(), "
            f"which allocates without initialising, and "
            + (
                f"only part of {origin.name} has been written since (the part read was not"
                if partly
                else f"nothing has written {origin.name} since (no reset_parameters(), init function or "
                "load_state_dict filled it"
            )
            + (
                ", and a checkpoint never holds a non-persistent buffer"
                if origin.kind == "non-persistent buffer"
                else ""
            )
            + "). Build the model under `with ferry.deferred_init():` and call `ferry.materialize(model, device)` "
            "(or `ferry.load_state_dict(model, path, device=device)`), which replay how every tensor was made; or "
            f"initialise {origin.name} after to_empty."
        )
        error = InitializationError(message, names=[origin.name], kinds=[origin.kind])
        self.emit("to-empty-without-init", where, message, error, frame)
