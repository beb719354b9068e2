"""Snapshots of a state tree for asynchronous saves, and its size for the free-space check.

An async save must write the values as they were when ``save`` was called, although training changes the tensors
in place right after it returns. So every tensor is copied first, into buffers that are kept from one save to the
next (one save is in flight at a time, so a buffer is free again when the next save starts): CUDA tensors into
pinned host buffers (an asynchronous device-to-host copy each, one synchronize at the end), CPU tensors into plain
CPU buffers, copied by a few threads in pieces. Other accelerators' tensors are copied with ``.to("cpu")``.

Reusing the buffers is what makes the copy cheap: fresh memory has to be faulted in page by page (on a 2-core VM
copying 1 GiB into fresh memory took 0.5 s, into the buffers of the previous save 0.09 s). The price is that the
Checkpointer keeps one copy of the saved tensors between saves (pinned, for CUDA tensors).
"""

from __future__ import annotations

import concurrent.futures
import os
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

__all__ = ["Snapshotter", "tensor_bytes"]

#: CPU copies are split into pieces of this many bytes, so that the threads share the work evenly.
_PIECE = 32 << 20
#: Most threads copying CPU tensors (memory bandwidth is the limit beyond a few).
_COPIERS = 4

_Key = tuple[str, str, tuple[int, ...], torch.dtype]


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


def _flat_bytes(tensor: torch.Tensor) -> np.ndarray | None:
    """The bytes of a dense CPU tensor as a flat uint8 array sharing its memory, or None if it has no such view."""
    if not tensor.is_contiguous() or tensor.is_conj() or tensor.is_neg() or tensor.numel() == 0:
        return None
    return tensor.reshape(-1).view(torch.uint8).numpy()


class Snapshotter:
    """Copies the tensors of state trees into memory that training will not touch; reuses the buffers."""

    def __init__(self) -> None:
        self._buffers: dict[_Key, torch.Tensor] = {}

    def copy(self, tree: Any) -> Any:
        """Return ``tree`` with every tensor replaced by a CPU copy; waits until every copy has landed.

        Containers are rebuilt (dict, OrderedDict, list, tuple); other values are shared. A tensor that occurs
        twice is copied once and stays shared. Values are detached; CPU and CUDA tensors come back contiguous. The
        copies returned by the previous call are overwritten by this one: be done with them before calling again.
        """
        memo: dict[int, torch.Tensor] = {}
        sources: set[torch.device] = set()
        keep: dict[_Key, torch.Tensor] = {}
        pieces: list[tuple[np.ndarray, np.ndarray]] = []

        def walk(obj: Any, path: str) -> Any:
            if isinstance(obj, torch.Tensor):
                found = memo.get(id(obj))
                if found is None:
                    found = memo[id(obj)] = self._copy_tensor(obj.detach(), path, sources, keep, pieces)
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
        _copy_pieces(pieces)
        for device in sources:
            getattr(torch, device.type).synchronize(device)
        self._buffers = keep  # buffers not used by this snapshot are freed
        return out

    def _copy_tensor(
        self,
        tensor: torch.Tensor,
        path: str,
        sources: set[torch.device],
        keep: dict[_Key, torch.Tensor],
        pieces: list[tuple[np.ndarray, np.ndarray]],
    ) -> torch.Tensor:
        kind = tensor.device.type
        if kind == "meta":
            return tensor.clone()  # meta stays meta: save() then refuses it with a clear message
        if kind not in ("cpu", "cuda"):
            return tensor.to("cpu")
        key = (path, kind, tuple(tensor.shape), tensor.dtype)
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=kind == "cuda")
        keep[key] = buffer
        if kind == "cuda":
            buffer.copy_(tensor, non_blocking=True)
            sources.add(tensor.device)
            return buffer
        source, target = _flat_bytes(tensor), _flat_bytes(buffer)
        if source is None or target is None:
            buffer.copy_(tensor)  # strided, conjugate or empty: torch copies it
            return buffer
        for start in range(0, source.size, _PIECE):
            pieces.append((target[start : start + _PIECE], source[start : start + _PIECE]))
        return buffer


def _copy_pieces(pieces: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """``np.copyto`` every (target, source) pair, on a few threads when there is enough to copy.

    Threads that each take the next piece keep going at the speed of the machine when another job occupies a core
    (torch's own parallel copy waits for its slowest thread).
    """
    total = sum(target.size for target, _ in pieces)
    threads = min(_COPIERS, os.cpu_count() or 1, len(pieces))
    if total < 4 * _PIECE or threads < 2:
        for target, source in pieces:
            np.copyto(target, source)
        return
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="ferry-snapshot") as pool:
        for future in [pool.submit(np.copyto, target, source) for target, source in pieces]:
            future.result()
