"""The structure of a saved object: a JSON tree of containers and plain values, with tensors stored by name.

The tree (``ferry.tree`` in the file's metadata) is JSON in which every value is one of::

    null, true, false, 3, 2.5, "text"              None, bool, int, finite float, str (JSON keeps int vs float)
    [v, ...]                                        list
    {"tuple": [v, ...]}                             tuple
    {"dict": [[k, v], ...]}                         dict (keys as values: str, int, bool, None or float)
    {"odict": [[k, v], ...]}                        collections.OrderedDict
    {"float": "inf" | "-inf" | "nan"}              the floats JSON has no literal for
    {"size": [int, ...]}                            torch.Size
    {"dtype": "float32"}                            torch.dtype (``torch.float32``)
    {"device": "cuda:0"}                            torch.device, as saved (not moved by ``load(device=...)``)
    {"tensor": NAME}                                the stored tensor NAME
    {"tensor": NAME, "view": [OFFSET, SHAPE, STRIDE]}   ``NAME.as_strided(SHAPE, STRIDE, OFFSET)``: a view sharing
                                                        the stored tensor's memory (tied weights, slices)
    a tensor node may add "parameter": REQUIRES_GRAD when the value was an ``nn.Parameter``

A tensor is stored under its tree path: the keys and indices from the root joined by ``/``
(``optimizer/state/0/exp_avg``; a bare tensor is ``~root``). Each key is escaped so that paths never collide:
``~`` becomes ``~0`` and ``/`` becomes ``~1`` (as in JSON Pointer); an int renders as its digits and a str that
looks like one gets a ``~s`` prefix (``{"0": t}`` -> ``~s0``, ``{0: t}`` -> ``0``); other keys render as
``~true``, ``~false``, ``~none``, ``~f<repr>``; a top-level ``__metadata__`` key (the header's own) becomes
``~s__metadata__``. Names starting with ``~shared/`` hold memory shared by several
views when none of them covers it.

Tensors that share memory are stored once. Identical aliases (same storage, offset, shape and strides; tied
weights) come back as one tensor object at every path. Different views of one storage are stored as the region
they cover, once, and come back as views of one tensor, unless the region is larger than the views together (two
small slices far apart in a big buffer), in which case each is stored on its own and the sharing is not kept.
Views in different dtypes of one storage are stored separately. Containers appearing twice come back as copies.
"""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import torch

from ferry.checkpoint.file.layout import Blob, dtype_code
from ferry.errors import CheckpointError, CorruptCheckpointError

__all__ = ["Encoded", "decode", "describe", "encode", "tensor_name"]

Key: TypeAlias = "str | int | bool | float | None"
Json: TypeAlias = "bool | int | float | str | list[Json] | dict[str, Json] | None"

ROOT_NAME = "~root"
SHARED_PREFIX = "~shared/"
_INTLIKE = re.compile(r"-?[0-9]+")
_NONFINITE = ("inf", "-inf", "nan")


def _component(key: Key) -> str:
    if isinstance(key, str):
        escaped = key.replace("~", "~0").replace("/", "~1")
        return "~s" + escaped if _INTLIKE.fullmatch(key) else escaped
    if key is True or key is False:
        return "~true" if key else "~false"
    if isinstance(key, int):
        return str(key)
    if key is None:
        return "~none"
    return "~f" + repr(key)


def tensor_name(trail: Sequence[Key]) -> str:
    """The name a tensor at ``trail`` (keys and indices from the root) is stored under, e.g. ``model/layer.weight``."""
    if not trail:
        return ROOT_NAME
    name = "/".join(_component(key) for key in trail)
    return "~s__metadata__" if name == "__metadata__" else name  # the header's own key


def describe(trail: Sequence[Key]) -> str:
    """``trail`` as Python subscripts, for messages: ``obj['optimizer']['state'][0]``."""
    return "obj" + "".join(f"[{key!r}]" for key in trail)


@dataclass
class Encoded:
    """An object split into its tree (JSON text) and the tensors to store."""

    tree_json: str
    blobs: list[Blob] = field(default_factory=list)


@dataclass
class _Leaf:
    trail: tuple[Key, ...]
    tensor: torch.Tensor
    node: dict[str, Json]


def _fix_for_dtype(dtype: torch.dtype) -> str:
    if dtype == torch.complex128:
        return "Convert it: torch.view_as_real(value) (float64, exact) or value.to(torch.complex64)"
    if dtype == torch.complex32:
        return "Convert it: value.to(torch.complex64)"
    return "Convert it to a dtype safetensors stores, e.g. value.to(torch.float32) or value.to(torch.int64)"


class _Encoder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.leaves: list[_Leaf] = []
        self.open_containers: set[int] = set()

    def fail(self, trail: Sequence[Key], what: str, fix: str) -> CheckpointError:
        return CheckpointError(f"cannot save {describe(trail)} to {str(self.path)!r}: {what}. {fix}.", path=self.path)

    def string(self, text: str, trail: Sequence[Key]) -> str:
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise self.fail(
                    trail,
                    f"the string {text!r} holds a lone surrogate, which UTF-8 (and so the file header) cannot hold",
                    "Remove it, e.g. text.encode('utf-8', 'replace').decode('utf-8')",
                ) from None
        return text

    def scalar(self, value: object, trail: Sequence[Key]) -> Json:
        kind = type(value)
        if value is None or kind is bool or kind is int:
            return value  # type: ignore[return-value]
        if kind is float:
            number: float = value  # type: ignore[assignment]
            if math.isfinite(number):
                return number
            return {"float": "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")}
        if kind is str:
            return self.string(value, trail)  # type: ignore[arg-type]
        raise _Unsupported

    def value(self, value: object, trail: tuple[Key, ...]) -> Json:
        try:
            return self.scalar(value, trail)
        except _Unsupported:
            pass
        kind = type(value)
        if isinstance(value, torch.Tensor):
            return self.tensor(value, trail)
        if kind is torch.Size:
            return {"size": list(value)}  # type: ignore[call-overload]
        if kind is torch.dtype:
            return {"dtype": str(value).removeprefix("torch.")}
        if kind is torch.device:
            return {"device": str(value)}
        if kind not in (list, tuple, dict, OrderedDict):
            raise self.fail(trail, f"{_type_name(value)} is not a tensor or a plain value", _fix_for_value(value))
        if id(value) in self.open_containers:
            raise self.fail(trail, "the structure contains itself (a cycle)", "Break the cycle before saving")
        self.open_containers.add(id(value))
        try:
            if isinstance(value, list):
                return [self.value(item, (*trail, index)) for index, item in enumerate(value)]
            if isinstance(value, tuple):
                return {"tuple": [self.value(item, (*trail, index)) for index, item in enumerate(value)]}
            assert isinstance(value, dict)
            pairs: list[Json] = []
            for key, item in value.items():
                try:
                    encoded_key = self.scalar(key, trail)
                except _Unsupported:
                    raise self.fail(
                        trail,
                        f"it has a key of type {_type_name(key)} ({key!r}); keys must be str, int, bool, float or None",
                        "Convert the keys, e.g. {str(k): v for k, v in d.items()}",
                    ) from None
                pairs.append([encoded_key, self.value(item, (*trail, key))])
            return {"odict" if kind is OrderedDict else "dict": pairs}
        finally:
            self.open_containers.discard(id(value))

    def tensor(self, tensor: torch.Tensor, trail: tuple[Key, ...]) -> Json:
        # A tensor type whose data is a plain host tensor (the sanitizer's pretend GPU) hands it over, as a tensor on
        # a real GPU is copied to the host for writing.
        host = getattr(type(tensor), "__ferry_host_tensor__", None)
        if host is not None:
            tensor = host(tensor)
        if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
            raise self.fail(
                trail,
                f"{_type_name(tensor)} is a tensor subclass, whose extra state a file cannot hold",
                "Save a plain tensor: value.as_subclass(torch.Tensor) (or value.full_tensor() for a DTensor)",
            )
        if tensor.is_nested:
            raise self.fail(trail, "nested tensors are not supported", "Save value.unbind() (a list of tensors)")
        if tensor.layout != torch.strided:
            raise self.fail(trail, f"a {tensor.layout} tensor is not dense", "Save value.to_dense()")
        if tensor.is_quantized:
            raise self.fail(trail, "quantized tensors are not supported", "Save value.dequantize() or value.int_repr()")
        if tensor.device.type == "meta":
            raise self.fail(
                trail,
                f"the tensor (shape {list(tensor.shape)}) is on the meta device and has no data",
                "Materialise it first (module.to_empty(device='cpu') then initialise or load the weights)",
            )
        if dtype_code(tensor.dtype) is None:
            raise self.fail(trail, f"dtype {tensor.dtype} has no safetensors equivalent", _fix_for_dtype(tensor.dtype))
        if tensor.dtype == getattr(torch, "float4_e2m1fn_x2", None) and tensor.dim() == 0:
            raise self.fail(trail, "a 0-dim float4_e2m1fn_x2 tensor has no safetensors shape", "Save value.reshape(1)")
        node: dict[str, Json] = {}
        if isinstance(tensor, torch.nn.Parameter):
            node["parameter"] = tensor.requires_grad
        self.leaves.append(_Leaf(trail, tensor, node))
        return node


class _Unsupported(Exception):
    """Internal: the value is not a plain scalar."""


def _type_name(value: object) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _fix_for_value(value: object) -> str:
    module = type(value).__module__
    if module == "numpy" or module.startswith("numpy."):
        if getattr(value, "ndim", None) == 0 or not hasattr(value, "shape"):
            return "Convert it to a plain value with value.item() (or to a tensor with torch.tensor(value))"
        return "Convert it to a tensor with torch.from_numpy(value)"
    if isinstance(value, (list, tuple, dict)):
        return "Convert it to a plain dict, list or tuple (dict(value), list(value), tuple(value))"
    return (
        "Convert it to tensors and plain values (int, float, bool, str, None in dict/list/tuple), e.g. its state_dict()"
    )


def _extent(tensor: torch.Tensor) -> tuple[int, int]:
    """The element range [lo, hi) of the storage a non-empty tensor touches."""
    lo = int(tensor.storage_offset())
    return lo, lo + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True)) + 1


def _view_key(tensor: torch.Tensor) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    return int(tensor.storage_offset()), tuple(tensor.shape), tuple(tensor.stride())


def _storage_key(tensor: torch.Tensor) -> tuple[object, ...]:
    if tensor.numel() == 0 or tensor.untyped_storage().data_ptr() == 0:
        return ("alone", id(tensor))
    return (tensor.device, tensor.untyped_storage().data_ptr(), tensor.dtype, tensor.is_conj(), tensor.is_neg())


def _assign(leaves: Sequence[_Leaf]) -> list[Blob]:
    """Fill every leaf's node with the name it is stored under; return the tensors to store, each once."""
    groups: dict[tuple[object, ...], dict[tuple[int, tuple[int, ...], tuple[int, ...]], list[_Leaf]]] = {}
    for leaf in leaves:
        groups.setdefault(_storage_key(leaf.tensor), {}).setdefault(_view_key(leaf.tensor), []).append(leaf)
    blobs: list[Blob] = []
    for views in groups.values():
        firsts = [members[0].tensor for members in views.values()]
        extents = [_extent(tensor) for tensor in firsts]
        lo, hi = min(e[0] for e in extents), max(e[1] for e in extents)
        if len(views) == 1 or hi - lo > sum(tensor.numel() for tensor in firsts):
            for members in views.values():
                name = tensor_name(members[0].trail)
                blobs.append(Blob(name, members[0].tensor))
                for leaf in members:
                    leaf.node["tensor"] = name
            continue
        covering = next(
            (t for t in firsts if t.is_contiguous() and t.storage_offset() == lo and t.numel() == hi - lo), None
        )
        if covering is not None:
            name = tensor_name(views[_view_key(covering)][0].trail)
            blobs.append(Blob(name, covering))
        else:
            name = f"{SHARED_PREFIX}{sum(b.name.startswith(SHARED_PREFIX) for b in blobs)}"
            blobs.append(Blob(name, firsts[0].as_strided((hi - lo,), (1,), lo)))
        for (offset, shape, stride), members in views.items():
            for leaf in members:
                leaf.node["tensor"] = name
                if members[0].tensor is not covering:
                    leaf.node["view"] = [offset - lo, list(shape), list(stride)]
    return blobs


def encode(obj: object, path: Path) -> Encoded:
    """Split ``obj`` into its JSON tree and the tensors to store (each storage once).

    Args:
        obj: A tensor, or nested dict/OrderedDict/list/tuple of tensors and None/bool/int/float/str.
        path: The file being written, for messages.

    Raises:
        CheckpointError: a value that is not a tensor or plain value (named by its path, with the fix), a
            non-scalar dict key, a cycle, a tensor on ``meta``, a tensor subclass, sparse, nested or quantized
            tensors, or a dtype safetensors cannot store.
    """
    encoder = _Encoder(path)
    try:
        tree = encoder.value(obj, ())
    except RecursionError:
        raise CheckpointError(
            f"cannot save to {str(path)!r}: the structure is nested deeper than Python's recursion limit. "
            "Flatten it (e.g. a dict of tensors keyed by dotted names).",
            path=path,
        ) from None
    blobs = _assign(encoder.leaves)
    return Encoded(json.dumps(tree, separators=(",", ":"), ensure_ascii=False, allow_nan=False), blobs)


class _Decoder:
    def __init__(self, path: Path, numels: Mapping[str, int], tensors: Mapping[str, torch.Tensor] | None) -> None:
        self.path = path
        self.numels = numels
        self.tensors = tensors
        self.built: dict[str, object] = {}

    def fail(self, trail: Sequence[Key], what: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(
            f"checkpoint {str(self.path)!r} is corrupt: its tree is malformed at {describe(trail)}: {what}. "
            "Restore the file from a copy, or load an earlier checkpoint.",
            path=self.path,
        )

    def scalar(self, node: object, trail: Sequence[Key]) -> Key:
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, dict) and node.keys() == {"float"} and node["float"] in _NONFINITE:
            return float(node["float"])  # a fresh nan each time: two nan keys stay two keys
        raise self.fail(trail, f"{node!r} is not a plain value")

    def value(self, node: object, trail: tuple[Key, ...]) -> object:
        if isinstance(node, list):
            return [self.value(item, (*trail, index)) for index, item in enumerate(node)]
        if not isinstance(node, dict) or "float" in node:
            return self.scalar(node, trail)
        if "tensor" in node:
            return self.tensor(node, trail)
        if len(node) != 1:
            raise self.fail(trail, f"a node with keys {sorted(node)}")
        ((tag, body),) = node.items()
        if tag == "dtype":
            dtype = getattr(torch, body, None) if isinstance(body, str) else None
            if not isinstance(dtype, torch.dtype):
                raise self.fail(trail, f"{body!r} is not a torch dtype")
            return dtype
        if tag == "device":
            try:
                return torch.device(body)
            except (RuntimeError, TypeError):
                raise self.fail(trail, f"{body!r} is not a device") from None
        if not isinstance(body, list):
            raise self.fail(trail, f"the body of {tag!r} is not a list")
        if tag == "size":
            if not all(type(d) is int and d >= 0 for d in body):
                raise self.fail(trail, f"{body!r} is not a torch.Size")
            return torch.Size(body)
        if tag == "tuple":
            return tuple(self.value(item, (*trail, index)) for index, item in enumerate(body))
        if tag not in ("dict", "odict"):
            raise self.fail(trail, f"unknown node {tag!r}")
        result: dict[Key, object] = {} if tag == "dict" else OrderedDict()
        for pair in body:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise self.fail(trail, f"{pair!r} is not a [key, value] pair")
            key = self.scalar(pair[0], trail)
            if key in result:
                raise self.fail(trail, f"the key {key!r} appears twice")
            result[key] = self.value(pair[1], (*trail, key))
        return result

    def tensor(self, node: dict[str, Any], trail: tuple[Key, ...]) -> object:
        name, view, parameter = node["tensor"], node.get("view"), node.get("parameter")
        if not node.keys() <= {"tensor", "view", "parameter"} or not isinstance(name, str):
            raise self.fail(trail, f"a malformed tensor node {node!r}")
        if name not in self.numels:
            raise self.fail(trail, f"it refers to tensor {name!r}, which the file does not hold")
        if parameter is not None and not isinstance(parameter, bool):
            raise self.fail(trail, f"parameter flag {parameter!r} is not a bool")
        if view is not None:
            self.check_view(view, self.numels[name], trail)
        memo = json.dumps([name, view, parameter])
        if memo in self.built:
            return self.built[memo]
        if self.tensors is None:
            return None
        tensor = self.tensors[name]
        if view is not None:
            offset, shape, stride = view
            tensor = tensor.as_strided(shape, stride, tensor.storage_offset() + offset)
        if parameter is not None:
            tensor = torch.nn.Parameter(tensor, requires_grad=parameter)
        self.built[memo] = tensor
        return tensor

    def check_view(self, view: object, numel: int, trail: Sequence[Key]) -> None:
        if not (
            isinstance(view, list)
            and len(view) == 3
            and type(view[0]) is int
            and all(isinstance(v, list) and all(type(d) is int and d >= 0 for d in v) for v in view[1:])
            and len(view[1]) == len(view[2])
            and view[0] >= 0
        ):
            raise self.fail(trail, f"a malformed view {view!r}")
        offset, shape, stride = view
        end = offset + sum((size - 1) * step for size, step in zip(shape, stride, strict=True)) + 1
        if 0 not in shape and end > numel:
            raise self.fail(trail, f"the view {view!r} reaches element {end} of a {numel}-element tensor")


def decode(tree_json: str, numels: Mapping[str, int], tensors: Mapping[str, torch.Tensor] | None, path: Path) -> object:
    """Rebuild the saved object from its tree and stored tensors.

    Args:
        tree_json: The ``ferry.tree`` metadata entry.
        numels: Element count of every stored tensor, by name (to check views).
        tensors: The stored tensors by name, already on the target device; None only checks the tree (every
            tensor node then decodes to None).
        path: The file, for messages.

    Returns:
        The object, with the container types, key types and tensor sharing it was saved with.

    Raises:
        CorruptCheckpointError: the tree is not valid JSON or not a valid tree.
    """
    decoder = _Decoder(path, numels, tensors)
    try:
        return decoder.value(json.loads(tree_json), ())
    except (ValueError, RecursionError) as err:
        raise decoder.fail((), f"not a valid tree ({type(err).__name__}: {err})") from None
