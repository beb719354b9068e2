"""The walker behind ``to_device`` and ``check_devices``: how nested containers are taken apart and rebuilt.

Plain dicts, lists and tuples in the first 64 levels are walked by recursion, the fastest way in CPython; everything
else (other containers, deeper levels) by an explicit stack, so nesting depth is bounded by memory, not by Python's
recursion limit. How an object is taken apart and rebuilt depends only on its type, so that decision is cached per
type. Sets and frozensets go through the explicit stack too: they are rare in batches, and keeping them out of the
recursive path keeps that path as short as it is.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from ferry.errors import ArgumentError

_CPU = torch.device("cpu")

# How to take an object apart, by type.
(
    _LEAF,
    _TENSOR,
    _MODULE,
    _HAS_TO,
    _DICT,
    _LIST,
    _TUPLE,
    _MAPPING,
    _NAMEDTUPLE,
    _TUPLE_SUB,
    _LIST_SUB,
    _DATACLASS,
    _SET,
) = range(13)
_KINDS: dict[type, int] = {torch.Tensor: _TENSOR, dict: _DICT, list: _LIST, tuple: _TUPLE}
_KINDS.update(dict.fromkeys((int, float, bool, complex, str, bytes, type(None), torch.device, torch.dtype), _LEAF))
#: Leaf types that hold no tensors: nothing to look for in them.
_PLAIN = frozenset((int, float, bool, complex, str, bytes, type(None), torch.device, torch.dtype))
_MAX_CACHED = 4096  # classes made on the fly (namedtuple factories) must not grow the cache without bound


def _kind_of(tp: type) -> int:
    kind = _KINDS.get(tp)
    if kind is not None:
        return kind
    if issubclass(tp, torch.Tensor):
        kind = _TENSOR
    elif issubclass(tp, nn.Module):
        kind = _MODULE
    elif callable(getattr(tp, "to", None)) and not issubclass(tp, type):
        kind = _HAS_TO
    elif issubclass(tp, Mapping):
        kind = _MAPPING
    elif issubclass(tp, tuple):
        kind = _NAMEDTUPLE if hasattr(tp, "_fields") else _TUPLE_SUB
    elif issubclass(tp, list):
        kind = _LIST_SUB
    elif issubclass(tp, (set, frozenset)):
        kind = _SET  # tensors hash by id, so a set of tensors is a set of distinct tensors, moved or not
    elif dataclasses.is_dataclass(tp):
        kind = _DATACLASS
    else:
        kind = _LEAF
    if len(_KINDS) < _MAX_CACHED:
        _KINDS[tp] = kind
    return kind


def _fields(obj: Any) -> list[str]:
    """Names of the dataclass fields set on ``obj`` (``init=False`` fields included)."""
    return [f.name for f in dataclasses.fields(obj) if hasattr(obj, f.name)]


def _parts(obj: Any, kind: int) -> tuple[list[Any], list[Any] | None]:
    """Children of a container, and the keys or field names needed to rebuild it."""
    if kind == _DICT:
        return list(obj.values()), None  # rebuilt from obj's own key order
    if kind == _MAPPING:
        keys = list(obj.keys())
        return [obj[k] for k in keys], keys
    if kind == _DATACLASS:
        names = _fields(obj)
        return [getattr(obj, n) for n in names], names
    return list(obj), None


def _rebuild(obj: Any, kind: int, keys: list[Any] | None, old: list[Any], values: list[Any]) -> Any:
    """A new container like ``obj`` holding ``values`` instead of ``old`` (immutable ones: as-is if unchanged)."""
    if kind == _DICT:
        return dict(zip(obj, values, strict=True))
    if kind == _LIST:
        return values
    if kind == _TUPLE:
        return tuple(values)
    immutable = (
        kind in (_NAMEDTUPLE, _TUPLE_SUB)
        or (kind == _DATACLASS and type(obj).__dataclass_params__.frozen)
        or (kind == _SET and isinstance(obj, frozenset))
    )
    if immutable and all(new is was for new, was in zip(values, old, strict=True)):
        return obj
    if kind == _NAMEDTUPLE:
        return type(obj)(*values)
    if kind == _TUPLE_SUB:
        return type(obj)(values)
    if kind == _SET:  # type(obj)(values): copy.copy would call the class with the old elements anyway
        return type(obj)(values) if type(obj) in (set, frozenset) else _construct(obj, values, "a set")
    if kind == _MAPPING and not isinstance(obj, dict):
        return _construct(obj, dict(zip(keys or (), values, strict=True)), "a dict")
    new = copy.copy(obj)  # keeps the class, default_factory, extra attributes and init=False fields
    if kind == _LIST_SUB:
        new[:] = values
    elif kind == _DATACLASS:
        for name, value in zip(keys or (), values, strict=True):
            object.__setattr__(new, name, value)  # frozen dataclasses too
    else:
        for key, value in zip(keys or (), values, strict=True):
            new[key] = value
    return new


def _construct(obj: Any, contents: Any, plain: str) -> Any:
    """``type(obj)(contents)``, for container classes that ferry cannot copy and refill."""
    try:
        return type(obj)(contents)
    except TypeError as err:
        raise ArgumentError(
            f"to_device cannot rebuild a {type(obj).__qualname__}: {type(obj).__qualname__}(contents) raised "
            f"TypeError: {err}. ferry rebuilds such containers by passing their moved contents to the class. Give "
            f"the class a .to(device) method, or pass {plain} instead."
        ) from err


class _Frame:
    __slots__ = ("keys", "kind", "obj", "pending", "results", "values")

    def __init__(self, obj: Any, kind: int) -> None:
        self.obj = obj
        self.kind = kind
        self.values, self.keys = _parts(obj, kind)
        self.pending = iter(self.values)  # resumes where it stopped when a child container is walked first
        self.results: list[Any] = []


_BUSY = object()  # memo entry of a container whose children are being moved
_RECURSIVE = 64  # nesting levels moved by plain recursion before the explicit stack takes over


class _Mover:
    """One ``to_device`` call: target, options, and the memo that keeps shared tensors shared."""

    __slots__ = ("device", "dtype", "keep", "left", "memo", "non_blocking", "pageable", "plain", "sources", "to_cpu")

    def __init__(self, device: torch.device, dtype: torch.dtype | None, non_blocking: bool) -> None:
        self.device = device
        self.dtype = dtype
        self.non_blocking = non_blocking
        self.to_cpu = non_blocking and device.type == "cpu"
        # From pageable CPU memory to CUDA, the copy has read its source when it returns even if non_blocking
        # (CUDA stages it), and the GPU stream orders every later use: safe, and it saves a synchronize per tensor.
        self.pageable = not non_blocking and device.type == "cuda"
        self.plain = dtype is None and not self.to_cpu  # no cast, no source devices to record
        self.sources: set[torch.device] = set()
        self.memo: dict[int, Any] = {}  # id(input) -> output; a tensor already in place is not recorded
        self.keep: list[Any] = []  # children taken out of containers, alive so that their ids stay unique
        self.left: list[str] = []  # tensors the walk does not reach: "a Foo's .x", to warn about

    def tensor(self, t: torch.Tensor) -> torch.Tensor:
        moved: torch.Tensor | None = self.memo.get(id(t))
        if moved is not None:
            return moved
        if self.to_cpu and t.device.type != "cpu":
            self.sources.add(t.device)
        non_blocking = self.non_blocking or (self.pageable and t.is_cpu and not t.is_pinned())
        if self.dtype is not None and (t.is_floating_point() or t.is_complex()):
            moved = t.to(self.device, self.dtype, non_blocking=non_blocking)
        else:
            moved = t.to(self.device, non_blocking=non_blocking)
        if moved is not t:  # one already in place is shared anyway
            self.memo[id(t)] = moved
        return moved

    def run(self, root: Any) -> Any:
        """Move ``root``: plain dicts, lists and tuples near the top by recursion, the rest by :meth:`walk`."""
        return _move(root, 0, self)

    def visit(self, obj: Any) -> Any:
        """Move a leaf and return it, or return a ``_Frame`` for a container still to be walked."""
        tp = type(obj)
        kind = _KINDS.get(tp)
        if kind is None:
            kind = _kind_of(tp)
        if kind == _LEAF:
            if tp not in _PLAIN:
                self._note_hidden(obj, ())
            return obj
        if kind == _TENSOR:
            return self.tensor(obj)
        moved = self.memo.get(id(obj))
        if moved is _BUSY:
            raise ArgumentError(
                f"to_device cannot move a structure that contains itself: a {tp.__qualname__} holds a reference back "
                "to itself (directly or through other containers), so rebuilding it would never end. Pass a "
                "structure without the back-reference, e.g. only the parts that hold tensors."
            )
        if moved is not None:
            return moved
        if kind == _MODULE:
            if self.to_cpu:
                self.sources.update(t.device for t in itertools.chain(obj.parameters(), obj.buffers()))
            moved = obj.to(device=self.device, dtype=self.dtype, non_blocking=self.non_blocking)
        elif kind == _HAS_TO:
            # blocking when copying to the CPU: ferry cannot tell which devices such an object reads from
            if self.non_blocking and not self.to_cpu:
                try:
                    moved = obj.to(self.device, non_blocking=True)
                except TypeError:  # its .to() takes no non_blocking
                    moved = obj.to(self.device)
            else:
                moved = obj.to(self.device)
            if moved is None:  # moved in place
                moved = obj
        else:
            if kind == _DATACLASS:
                self._note_hidden(obj, {f.name for f in dataclasses.fields(obj)})
            self.memo[id(obj)] = _BUSY
            frame = _Frame(obj, kind)
            self.keep.append(frame.values)
            return frame
        self.memo[id(obj)] = moved
        return moved

    def _note_hidden(self, obj: Any, walked: Any) -> None:
        """Record tensors in ``obj``'s attributes that the walk leaves where they are (not fields it rebuilds)."""
        attributes = getattr(obj, "__dict__", None)
        if not attributes:
            return
        hidden = [name for name, value in attributes.items() if name not in walked and isinstance(value, torch.Tensor)]
        if hidden and len(self.left) < 8:
            what = "dataclass" if walked else "object"
            names = ", ".join(f".{name}" for name in hidden[:3])
            self.left.append(f"{names} of a {type(obj).__qualname__} ({what})")

    def walk(self, root: Any) -> Any:
        """Move ``root`` with an explicit stack: any container type, any depth."""
        frame = self.visit(root)
        if type(frame) is not _Frame:
            return frame
        stack = [frame]
        tensor, visit, tensor_type = self.tensor, self.visit, torch.Tensor
        while True:
            append = frame.results.append
            for child in frame.pending:
                if type(child) is tensor_type:
                    append(tensor(child))
                    continue
                moved = visit(child)
                if type(moved) is _Frame:
                    stack.append(moved)
                    frame = moved
                    break
                append(moved)
            else:
                stack.pop()
                out = self.memo[id(frame.obj)] = _rebuild(
                    frame.obj, frame.kind, frame.keys, frame.values, frame.results
                )
                if not stack:
                    return out
                frame = stack[-1]
                frame.results.append(out)

    def finish(self) -> None:
        """Wait for asynchronous copies to land, once per source device (pytorch#139550)."""
        if not self.non_blocking:
            return
        if self.device.type == "mps":
            torch.mps.synchronize()
        for source in self.sources:
            if source.type == "cuda":
                torch.cuda.synchronize(source)
            elif source.type == "mps":
                torch.mps.synchronize()
            elif hasattr(torch, "accelerator"):  # torch >= 2.6
                torch.accelerator.synchronize(source)
            else:
                getattr(torch, source.type).synchronize(source)


def _move(obj: Any, depth: int, mover: _Mover) -> Any:
    """The fast path of :meth:`_Mover.run`: a module-level function, as a recursive closure would be a ref cycle."""
    tp = type(obj)
    if tp is torch.Tensor and mover.plain:  # _Mover.tensor, inlined
        key = id(obj)
        moved = mover.memo.get(key)
        if moved is None:
            if mover.non_blocking or (mover.pageable and obj.is_cpu and not obj.is_pinned()):
                moved = obj.to(mover.device, non_blocking=True)
            else:
                moved = obj.to(mover.device)
            if moved is not obj:
                mover.memo[key] = moved
        return moved
    if depth > _RECURSIVE or not (tp is dict or tp is list or tp is tuple):
        return mover.walk(obj)  # any type, any depth; also catches a structure that contains itself
    key = id(obj)
    moved = mover.memo.get(key)
    if moved is None:
        depth += 1
        if tp is dict:
            moved = {k: _move(v, depth, mover) for k, v in obj.items()}
        elif tp is list:
            moved = [_move(v, depth, mover) for v in obj]
        else:
            moved = tuple([_move(v, depth, mover) for v in obj])
        mover.memo[key] = moved
    return moved


def _check_dtype(dtype: object) -> None:
    if dtype is None:
        return
    if not isinstance(dtype, torch.dtype):
        raise ArgumentError(
            f"dtype must be a torch.dtype, got {type(dtype).__qualname__} {dtype!r}. Pass the dtype object, e.g. "
            "dtype=torch.bfloat16, not its name."
        )
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ArgumentError(
            f"dtype must be a floating point or complex dtype, got {dtype}: like Module.to, ferry casts only "
            "floating point and complex tensors. Pass e.g. dtype=torch.bfloat16, or cast that tensor yourself."
        )


def _key(key: Any) -> str:
    return json.dumps(key, ensure_ascii=False) if isinstance(key, str) else repr(key)


def _input_tensors(roots: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for every tensor in nested inputs, walked like ``to_device`` walks them, depth first."""
    stack = list(roots)[::-1]
    seen: set[int] = set()
    while stack:
        path, obj = stack.pop()
        kind = _kind_of(type(obj))
        if kind == _TENSOR:
            yield path, obj
            continue
        if kind == _HAS_TO and isinstance(obj, Mapping):
            kind = _MAPPING  # e.g. BatchEncoding: look inside rather than skip it
        if kind in (_LEAF, _MODULE, _HAS_TO) or id(obj) in seen:
            continue
        seen.add(id(obj))
        values, keys = _parts(obj, kind)
        if kind in (_DATACLASS, _NAMEDTUPLE):
            names = [f"{path}.{name}" for name in keys or obj._fields]
        elif kind == _SET:
            names = [f"{path}{{{i}}}" for i in range(len(values))]  # no index: the n-th element in iteration order
        elif keys is not None or kind == _DICT:
            names = [f"{path}[{_key(key)}]" for key in (obj if keys is None else keys)]
        else:
            names = [f"{path}[{i}]" for i in range(len(values))]
        stack.extend(reversed(list(zip(names, values, strict=True))))
