"""Checks on calls that are not torch operations, so the function mode never sees them.

While a sanitizer is on, :class:`Patches` replaces, and on exit restores:

- ``torch.from_numpy``: its result is remembered as a CPU tensor built without a device (the mode's factory check);
- ``torch.nn.Module.load_state_dict``: a state dict whose keys all carry ``module.`` (saved from
  ``nn.DataParallel``/DDP) loaded into a bare module, or the other way round, is reported before PyTorch's
  "Unexpected key(s)" error; and a module that gets weights is remembered for the train-mode check;
- ``torch.nn.Module.train``: ``.train()``/``.eval()`` after loading says the mode was chosen on purpose;
- ``torch.nn.Module.to_empty``: the memory it gives is watched until written (:mod:`ferry.sanitizer._init_watch`);
- ``torch.nn.Module.cpu``/``to``: a module moved from an accelerator to the CPU is remembered with the user's line
  (``torch.save(model.cpu().state_dict(), path)`` moves the model itself), so a later mismatch on its weights names
  that line.

Module stays unpatched for everything else; the cost is one Python call per ``load_state_dict``/``train``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ferry.errors import StateDictMismatchError
from ferry.sanitizer._frames import source_line, user_frame

if TYPE_CHECKING:
    from ferry.sanitizer._mode import SanitizerMode

PREFIX = "module."


class Patches:
    """Install with :meth:`install`, restore with :meth:`remove`; reports go through the mode's ``emit``."""

    def __init__(self, mode: SanitizerMode) -> None:
        self.mode = mode
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        mode = self.mode
        from_numpy = torch.from_numpy
        load_state_dict = nn.Module.load_state_dict
        train = nn.Module.train

        def checked_from_numpy(array: Any) -> torch.Tensor:
            result = from_numpy(array)
            mode._created(from_numpy, result)
            return result

        def checked_load_state_dict(self: nn.Module, state_dict: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
            mode.check_state_dict(self, state_dict)
            result = load_state_dict(self, state_dict, *args, **kwargs)
            mode.train_mode.loaded(self)
            return result

        watch = mode.train_mode

        def checked_train(self: nn.Module, mode: bool = True) -> nn.Module:  # `mode=` as in nn.Module.train
            watch.chosen(self)
            return train(self, mode)

        to_empty = nn.Module.to_empty

        def checked_to_empty(self: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
            result = to_empty(self, *args, **kwargs)
            mode.init_watch.emptied(self)
            return result

        load = torch.load

        def checked_load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
            if isinstance(map_location, str | torch.device):  # `map_location=device` chosen as "cuda" on a CPU
                mode._check_available(map_location, load, "torch.load(map_location=...)")
            result = load(f, map_location, *args, **kwargs)
            for module in _pickled_modules(result):  # `torch.load(path)["generator"]`: a whole module, with weights
                mode.train_mode.loaded(module, "torch.load")
            return result

        module_cpu, module_to = nn.Module.cpu, nn.Module.to

        def watched_cpu(self: nn.Module) -> nn.Module:
            before = _weight_device(self)
            result = module_cpu(self)
            mode.moved(self, before, _weight_device(self))
            return result

        def watched_to(self: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
            before = _weight_device(self)
            result = module_to(self, *args, **kwargs)
            mode.moved(self, before, _weight_device(self))
            return result

        self._replace(nn.Module, "cpu", watched_cpu)
        self._replace(nn.Module, "to", watched_to)
        self._replace(nn.Module, "to_empty", checked_to_empty)
        self._replace(torch, "from_numpy", checked_from_numpy)
        self._replace(torch, "load", checked_load)
        self._replace(nn.Module, "load_state_dict", checked_load_state_dict)
        self._replace(nn.Module, "train", checked_train)

    def _replace(self, owner: Any, name: str, value: Callable[..., Any]) -> None:
        self._saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def remove(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved = []


def _weight_device(module: nn.Module) -> torch.device | None:
    """The device of ``module``'s first parameter or buffer (``None`` for a module without any)."""
    first = next(itertools.chain(module.parameters(), module.buffers()), None)
    return None if first is None else first.device


def prefix_mismatch(own: list[str], incoming: list[str]) -> str | None:
    """``"added"`` when only ``incoming`` keys all carry ``module.``, ``"missing"`` for the reverse, else ``None``."""
    if not own or not incoming:
        return None
    own_prefixed = all(k.startswith(PREFIX) for k in own)
    incoming_prefixed = all(k.startswith(PREFIX) for k in incoming)
    if incoming_prefixed and not own_prefixed:
        return "added"
    if own_prefixed and not incoming_prefixed:
        return "missing"
    return None


def state_dict_error(module: nn.Module, state_dict: Mapping[str, Any]) -> tuple[str, Any, Any] | None:
    """The message, error and frame for a ``module.`` prefix mismatch, or ``None``."""
    from ferry.checkpoint.state_dict import LoadReport

    own = list(module.state_dict().keys())
    incoming = [k for k in state_dict if isinstance(k, str)]
    kind = prefix_mismatch(own, incoming)
    if kind is None:
        return None
    frame = user_frame(2)
    if frame is None:
        return None
    where = source_line(frame)
    if kind == "added":
        what = (
            f"the state dict's keys all start with 'module.' ({incoming[0]!r}), the module's do not ({own[0]!r}): "
            f"it was saved from nn.DataParallel/DistributedDataParallel"
        )
        fix = '`{k.removeprefix("module."): v for k, v in state_dict.items()}`'
        missing, unexpected = own, incoming
    else:
        what = (
            f"the module's keys all start with 'module.' ({own[0]!r}: it is wrapped in nn.DataParallel/DDP), the "
            f"state dict's do not ({incoming[0]!r})"
        )
        fix = "load into the wrapped model, `model.module.load_state_dict(state_dict)`"
        missing, unexpected = own, incoming
    message = (
        f"data-parallel-state-dict: {type(module).__name__}.load_state_dict at {where.described()}: {what}, so no "
        f"key matches (PyTorch raises Missing/Unexpected key(s), or with strict=False loads nothing). Load it with "
        f"`ferry.load_state_dict(model, state_dict)`, which adds or strips the prefix, or rename the keys: {fix}."
    )
    report = LoadReport(missing=missing, unexpected=unexpected, mismatched=[], suggestions={}, loaded=[], renamed={})
    return message, StateDictMismatchError(message, report=report), (frame, where)


def _pickled_modules(value: Any, depth: int = 0) -> list[nn.Module]:
    """The modules in what ``torch.load`` returned: the object itself, or the values of a dict, list or tuple of it.

    A checkpoint that pickles whole models (``{"epoch": 3, "model": model}``, ``[model, criterion, optimizer]``);
    two levels deep at most.
    """
    if isinstance(value, nn.Module):
        return [value]
    if depth >= 2:
        return []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else ()
    return [m for item in items for m in _pickled_modules(item, depth + 1)]
