"""Snapshots of a state tree for asynchronous saves, and its size for the free-space check.

An async save must write the values as they were when ``save`` was called, although training changes the tensors
in place right after it returns. So every tensor is copied first: CUDA tensors into pinned host buffers that are
reused from one save to the next (one save is in flight at a time, so a buffer is free again when the next save
starts), other accelerators' tensors with ``.to("cpu")``, CPU tensors with ``clone()``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

__all__ = ["Snapshotter", "tensor_bytes"]


def _tensors(tree: Any) -> list[torch.Tensor]:
    """Every tensor in a tree of dicts, lists and tuples, each once (by identity)."""
    seen: dict[int, torch.Tensor] = {}
    stack = [tree]
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            seen.setdefault(id(obj), obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
    return list(seen.values())


def tensor_bytes(tree: Any) -> int:
    """Bytes of tensor data in ``tree`` (each tensor once; views of one storage counted per view, an upper bound)."""
    return sum(t.numel() * t.element_size() for t in _tensors(tree))


class Snapshotter:
    """Copies the tensors of state trees into memory that training will not touch; reuses pinned CUDA buffers."""

    def __init__(self) -> None:
        self._pinned: dict[tuple[str, tuple[int, ...], torch.dtype], torch.Tensor] = {}

    def copy(self, tree: Any) -> Any:
        """Return ``tree`` with every tensor replaced by a CPU copy; waits until every copy has landed.

        Containers are rebuilt (dict, OrderedDict, list, tuple); other values are shared. A tensor that occurs
        twice is copied once and stays shared. Values are detached.
        """
        memo: dict[int, torch.Tensor] = {}
        sources: set[torch.device] = set()
        keep: dict[tuple[str, tuple[int, ...], torch.dtype], torch.Tensor] = {}

        def walk(obj: Any, path: str) -> Any:
            if isinstance(obj, torch.Tensor):
                found = memo.get(id(obj))
                if found is None:
                    found = memo[id(obj)] = self._copy_tensor(obj.detach(), path, sources, keep)
                return found
            if isinstance(obj, dict):
                items = [(k, walk(v, f"{path}/{k}")) for k, v in obj.items()]
                return OrderedDict(items) if isinstance(obj, OrderedDict) else dict(items)
            if isinstance(obj, list):
                return [walk(v, f"{path}/{i}") for i, v in enumerate(obj)]
            if isinstance(obj, tuple):
                return tuple(walk(v, f"{path}/{i}") for i, v in enumerate(obj))
            return obj

        out = walk(tree, "")
        for device in sources:
            getattr(torch, device.type).synchronize(device)
        self._pinned = keep  # buffers not used by this snapshot are freed
        return out

    def _copy_tensor(
        self,
        tensor: torch.Tensor,
        path: str,
        sources: set[torch.device],
        keep: dict[tuple[str, tuple[int, ...], torch.dtype], torch.Tensor],
    ) -> torch.Tensor:
        if tensor.device.type in ("cpu", "meta"):
            return tensor.clone()  # meta stays meta: save() then refuses it with a clear message
        if tensor.device.type != "cuda":
            return tensor.to("cpu")
        key = (path, tuple(tensor.shape), tensor.dtype)
        buffer = self._pinned.get(key)
        if buffer is None:
            buffer = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        keep[key] = buffer
        buffer.copy_(tensor, non_blocking=True)
        sources.add(tensor.device)
        return buffer
