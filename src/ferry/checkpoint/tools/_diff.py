"""Added, removed and changed entries of two checkpoints, with tensor differences (``ferry ckpt diff``)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import torch

from ferry._remote import is_url
from ferry.checkpoint.file.api import load
from ferry.checkpoint.file.structure import flatten
from ferry.checkpoint.folder import has_shards
from ferry.checkpoint.sharded.consolidate import load_sharded_folder
from ferry.checkpoint.tools._paths import Target, jsonable, resolve

__all__ = ["diff", "diff_objects", "max_abs_diff"]

#: Elements compared per chunk, so that a huge tensor is not copied to float64 whole.
_CHUNK = 1 << 22


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max |a - b|`` over two tensors of one shape (any dtypes), computed in float64 (complex128 for complex).

    Equal values count 0, also ``inf`` against ``inf`` and ``nan`` against ``nan`` at the same place; a ``nan``
    in only one of them makes the result ``nan``. Empty tensors differ by 0.
    """
    wide = torch.complex128 if a.is_complex() or b.is_complex() else torch.float64
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    worst = 0.0
    for start in range(0, flat_a.numel(), _CHUNK):
        x = flat_a[start : start + _CHUNK].to(wide)
        y = flat_b[start : start + _CHUNK].to(wide)
        nan_x, nan_y = x.isnan(), y.isnan()
        if bool((nan_x ^ nan_y).any()):
            return math.nan
        gap = torch.where((x == y) | (nan_x & nan_y), 0.0, (x - y).abs())
        if gap.numel():
            worst = max(worst, float(gap.max()))
    return worst


def _describe(value: object) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    return {"value": jsonable(value)}


def _same_value(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except Exception:  # objects from a trusted pickle may compare in any way, or not at all
        return a is b


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def diff_objects(a: object, b: object, *, atol: float = 0.0) -> dict[str, Any]:
    """Compare two saved objects leaf by leaf (paths as :func:`~ferry.checkpoint.file.structure.flatten` makes them).

    Args:
        a: The first object (tensors on the CPU).
        b: The second.
        atol: Tensors of one shape whose values differ by at most this much count as unchanged.

    Returns:
        ``{"added": [{"path", "b"}], "removed": [{"path", "a"}], "changed": [{"path", "a", "b", "what",
        "max_abs_diff"}], "unchanged": count}``; ``a``/``b`` describe a leaf as ``{"shape", "dtype"}`` or
        ``{"value"}``; ``what`` lists ``shape``, ``dtype``, ``values``, ``type`` or ``value``; ``max_abs_diff``
        is a float, ``"nan"``/``"inf"``, or ``None`` where not comparable (other shapes, not numbers).
    """
    left, right = dict(flatten(a)), dict(flatten(b))
    added = [{"path": path, "b": _describe(right[path])} for path in right if path not in left]
    removed = [{"path": path, "a": _describe(left[path])} for path in left if path not in right]
    changed, unchanged = [], 0
    for path, old in left.items():
        if path not in right:
            continue
        new = right[path]
        what: list[str] = []
        gap: float | None = None
        if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor):
            if old.shape != new.shape:
                what.append("shape")
            if old.dtype != new.dtype:
                what.append("dtype")
            if old.shape == new.shape and not (old.dtype == new.dtype and torch.equal(old, new)):
                gap = max_abs_diff(old, new)
                if not gap <= atol:  # nan is never within tolerance
                    what.append("values")
        elif isinstance(old, torch.Tensor) or isinstance(new, torch.Tensor):
            what.append("type")
        elif not _same_value(old, new):
            what.append("value")
            x, y = _number(old), _number(new)
            gap = abs(x - y) if x is not None and y is not None else None
        if not what:
            unchanged += 1
            continue
        changed.append(
            {"path": path, "a": _describe(old), "b": _describe(new), "what": what, "max_abs_diff": jsonable(gap)}
        )
    return {"added": added, "removed": removed, "changed": changed, "unchanged": unchanged}


def _load(target: Target, *, trusted: bool) -> Any:
    """What ``target`` holds: a sharded folder loaded whole (as ``ferry ckpt convert`` writes it), else its file."""
    if target.folder is not None and has_shards(target.folder):
        return load_sharded_folder(target.folder)
    return load(target.file, trusted=trusted)


def diff(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    atol: float = 0.0,
    trusted: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Compare two checkpoints of any kind leaf by leaf: files, step folders (plain or sharded), run directories.

    A sharded folder is loaded whole, as ``ferry ckpt convert`` writes it; a run directory stands for its newest
    complete checkpoint. Tensors are compared on the CPU.

    Args:
        a: The first checkpoint path.
        b: The second.
        atol: Tensors whose elements all differ by at most this much count as unchanged.
        trusted: Unpickle ``torch.save`` files in full (runs their code) instead of through the restricted
            unpickler.
        storage_options: For URLs of object storage (``s3://bucket/run/step-000000100``): their fsspec file
            system's options (both URLs share them; a local path beside a URL takes none).

    Returns:
        ``{"a", "b"}`` (the files or folders compared) and :func:`diff_objects`'s fields.

    Raises:
        CheckpointError: a path names no checkpoint, or cannot be loaded (as :func:`ferry.load`).
        UnsafeCheckpointError: a pickle that would run code without ``trusted``.
    """
    targets = [resolve(path, storage_options=storage_options if is_url(path) else None) for path in (a, b)]
    first, second = (_load(target, trusted=trusted) for target in targets)
    names = [str(t.folder if t.folder is not None and has_shards(t.folder) else t.file) for t in targets]
    return {"a": names[0], "b": names[1], **diff_objects(first, second, atol=atol)}
