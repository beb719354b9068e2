"""``ferry ckpt diff A B``: added, removed and changed entries of two checkpoints, with tensor differences."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import torch

from ferry.checkpoint.file.api import load
from ferry.checkpoint.sharded.consolidate import load_sharded_folder
from ferry.cli.ckpt_common import Target, flatten, is_sharded, jsonable, resolve, short_repr

__all__ = ["diff", "diff_main", "max_abs_diff"]

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


def diff(a: object, b: object, *, atol: float = 0.0) -> dict[str, Any]:
    """Compare two saved objects leaf by leaf (paths as :func:`~ferry.cli.ckpt_common.flatten` makes them).

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


def _side(description: dict[str, Any]) -> str:
    if "shape" in description:
        return f"{description['dtype']} [{', '.join(map(str, description['shape']))}]"
    return short_repr(description["value"], 40)


def _print(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    console.print(Text(f"A: {report['a']}\nB: {report['b']}"))
    rows = (
        [("removed", row["path"], _side(row["a"]), "", "") for row in report["removed"]]
        + [("added", row["path"], "", _side(row["b"]), "") for row in report["added"]]
        + [
            (
                ", ".join(row["what"]),
                row["path"],
                _side(row["a"]),
                _side(row["b"]),
                ""
                if row["max_abs_diff"] is None
                else f"{row['max_abs_diff']:.6g}"
                if isinstance(row["max_abs_diff"], float)
                else str(row["max_abs_diff"]),
            )
            for row in report["changed"]
        ]
    )
    if rows:
        table = Table()
        table.add_column("change")
        table.add_column("path", overflow="fold")
        table.add_column("A", overflow="fold")
        table.add_column("B", overflow="fold")
        table.add_column("max |A-B|", justify="right")
        styles = {"removed": "red", "added": "green"}
        for change, path, old, new, gap in rows:
            table.add_row(Text(change, style=styles.get(change, "yellow")), Text(path), old, new, gap)
        console.print(table)
    console.print(
        f"{len(report['added'])} added, {len(report['removed'])} removed, {len(report['changed'])} changed, "
        f"{report['unchanged']} unchanged."
    )


def _load(target: Target, *, trusted: bool) -> Any:
    """What ``target`` holds: a sharded folder loaded whole (as ``ferry ckpt convert`` writes it), else its file."""
    if is_sharded(target.folder):
        assert target.folder is not None
        return load_sharded_folder(target.folder)
    return load(target.file, trusted=trusted)


def diff_main(args: argparse.Namespace) -> int:
    """``ferry ckpt diff``: 0 when A and B hold the same entries and values (within ``--atol``), 1 when they differ."""
    targets = [resolve(Path(path)) for path in (args.a, args.b)]
    a, b = (_load(target, trusted=args.trusted) for target in targets)
    names = [str(target.folder if is_sharded(target.folder) else target.file) for target in targets]
    report = {"a": names[0], "b": names[1], **diff(a, b, atol=args.atol)}
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    return 1 if report["added"] or report["removed"] or report["changed"] else 0
