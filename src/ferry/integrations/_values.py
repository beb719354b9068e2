"""A trainer's checkpoint dict as :func:`ferry.save` stores it, or the key that no pickle-free file can hold.

Trainers put more than tensors and plain values in their checkpoints: dict subclasses (Lightning's
``AttributeDict``), numpy floats, and, by mistake, whatever a user hands them (a module or a function in the
hyperparameters). :func:`plain` copies the containers (never the tensors) into the types a ferry file holds, and
stops at the first value it cannot hold with a :class:`~ferry.errors.UnsafeCheckpointError` whose message names the
value's key path (``hyper_parameters["encoder"]``) and the fix, which the caller words for its trainer. Nothing is
written by this module: the caller saves what it returns.
"""

from __future__ import annotations

import argparse
import enum
import functools
import inspect
import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path, PurePath
from typing import TypeAlias

import torch

from ferry.errors import CheckpointError, UnsafeCheckpointError

__all__ = ["Key", "Trail", "conversion", "key_path", "plain", "type_name"]

Key: TypeAlias = "str | int | bool | float | None"
Trail: TypeAlias = "tuple[Key, ...]"

#: (trail, value, why it cannot be stored) -> the message's fix, in the words of the trainer
FixFor: TypeAlias = "Callable[[Trail, object], str]"

_LEAVES = (type(None), bool, int, float, str, torch.Size, torch.dtype, torch.device)


def type_name(value: object) -> str:
    """``value``'s type as a reader finds it: ``int``, ``torch.nn.modules.linear.Linear``."""
    kind = value if isinstance(value, type) else type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def key_path(root: str, trail: Sequence[Key]) -> str:
    """``trail`` as subscripts after ``root``: ``state["optimizer"]["state"][0]``.

    With ``root=""`` a first str key names itself: ``hyper_parameters["encoder"]``.
    """
    if not root and trail and isinstance(trail[0], str):
        root, trail = trail[0], trail[1:]
    return root + "".join(f"[{json.dumps(key) if isinstance(key, str) else repr(key)}]" for key in trail)


def conversion(value: object) -> str:
    """The plain value to store instead of ``value``, as code: ``str(value)``, ``value.item()``; "" if none fits."""
    if isinstance(value, PurePath):
        return "store str(value) and rebuild the path with pathlib.Path(...) where it is used"
    if isinstance(value, enum.Enum):
        return "store value.value (or value.name) and look the member up where it is used"
    if isinstance(value, argparse.Namespace):
        return "store vars(value), a dict"
    if isinstance(value, (set, frozenset)):
        return "store sorted(value), a list"
    if isinstance(value, torch.nn.Module):
        return "store its state_dict(); the checkpoint holds a trained submodule's weights already"
    if inspect.isroutine(value) or isinstance(value, (type, functools.partial)):
        return "store its name (a str) and look the function or class up where it is used"
    module = type(value).__module__
    if module == "numpy" or module.startswith("numpy."):
        if getattr(value, "ndim", None) == 0 or not hasattr(value, "shape"):
            return "store value.item(), a plain number"
        return "store torch.from_numpy(value), a tensor"
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return "store value._asdict() (a dict) or tuple(value)"
    return ""


def plain(obj: object, root: str, path: Path, fix_for: FixFor) -> object:
    """Return ``obj`` with its containers as dict/OrderedDict/list/tuple; the tensors are the same objects.

    Dict subclasses (``AttributeDict``, ``defaultdict``) become dicts (``OrderedDict`` subclasses ``OrderedDict``
    s), numpy floats and other ``float`` subclasses floats. Tensors, ``None``, bools, ints, floats, strs and
    ``torch.Size``/``dtype``/``device`` pass as they are: :func:`ferry.save` checks the tensors themselves.

    Args:
        obj: The checkpoint dict.
        root: How messages name ``obj`` (``""`` for a trainer checkpoint, whose top-level keys name themselves:
            ``hyper_parameters["encoder"]``; ``"state"`` for ``Fabric.save``'s argument).
        path: The file that was to be written, for messages.
        fix_for: Words the fix for a value at a trail, in the trainer's terms.

    Raises:
        UnsafeCheckpointError: a value (or dict key) that is not a tensor, plain value or container: only pickle
            could store it. The message names its key path, its type, and the fix from ``fix_for``.
        CheckpointError: a container that contains itself.
    """
    return _Walk(root, path, fix_for).value(obj, ())


class _Walk:
    def __init__(self, root: str, path: Path, fix_for: FixFor) -> None:
        self.root = root
        self.path = path
        self.fix_for = fix_for
        self.open: set[int] = set()

    def unsafe(self, trail: Trail, value: object, what: str) -> UnsafeCheckpointError:
        where = key_path(self.root, trail) if trail or self.root else "the checkpoint"
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return UnsafeCheckpointError(
            f"cannot save {str(self.path)!r}: {where} {what} ({shown}), which a ferry file cannot hold: only pickle "
            f"could store it, and loading a pickle can run any code. {self.fix_for(trail, value)} Nothing was "
            f"written: {str(self.path)!r} is as it was.",
            path=self.path,
        )

    def value(self, value: object, trail: Trail) -> object:
        kind = type(value)
        if kind in _LEAVES or isinstance(value, torch.Tensor):
            return value
        if isinstance(value, float) and not isinstance(value, enum.Enum):
            return float(value)  # numpy.float64 is a float subclass: the same number
        containers = (list, tuple) if kind in (list, tuple) else (dict,)
        if not isinstance(value, containers) or (isinstance(value, tuple) and kind is not tuple):
            raise self.unsafe(trail, value, f"is a {type_name(value)}")
        if id(value) in self.open:
            where = key_path(self.root, trail) if trail or self.root else "the checkpoint"
            raise CheckpointError(
                f"cannot save {str(self.path)!r}: {where} contains itself (a cycle). Break the cycle before saving.",
                path=self.path,
            )
        self.open.add(id(value))
        try:
            if isinstance(value, list):
                return [self.value(item, (*trail, index)) for index, item in enumerate(value)]
            if isinstance(value, tuple):
                return tuple(self.value(item, (*trail, index)) for index, item in enumerate(value))
            assert isinstance(value, dict)
            out: dict[Key, object] = OrderedDict() if isinstance(value, OrderedDict) else {}
            for key, item in value.items():
                if type(key) not in (str, int, bool, float, type(None)):
                    raise self.unsafe(trail, key, f"has a key of type {type_name(key)}")
                out[key] = self.value(item, (*trail, key))
            return out
        finally:
            self.open.discard(id(value))
