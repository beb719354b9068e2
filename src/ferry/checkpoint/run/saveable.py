"""What the Checkpointer can save and restore in place, besides plain values.

- anything with ``state_dict()``/``load_state_dict()``: modules (restored through :func:`ferry.load_state_dict`, so
  tensors land on the module's devices), optimizers, LR schedulers, ``torch.amp.GradScaler``, samplers and loaders
  that have them (torchdata's ``StatefulDataLoader``, :class:`ferry.ResumableSampler`), user objects;
- ``torch.Generator`` (``get_state``/``set_state``) and NumPy ``np.random.Generator`` (its bit generator's state);
- a plain ``torch.utils.data.DataLoader``: where the training loop is in the current pass, with what the pass's
  random draws depend on, so that the resumed run sees exactly the batches the uninterrupted one would have seen
  next, for any ``num_workers`` (:mod:`ferry.checkpoint.run.loader`).
"""

from __future__ import annotations

from typing import Any

import torch

from ferry.checkpoint.run.loader import instrument, load_loader_state, loader_state
from ferry.errors import CheckpointError

__all__ = ["is_plain_loader", "is_stateful", "load_into", "prepare_loaders", "state_of"]


def _is_numpy_generator(obj: object) -> bool:
    module = type(obj).__module__
    return module.startswith("numpy.random") and hasattr(obj, "bit_generator")


def is_plain_loader(obj: object) -> bool:
    """A ``torch.utils.data.DataLoader`` without a ``state_dict`` (torchdata's ``StatefulDataLoader`` has one)."""
    return isinstance(obj, torch.utils.data.DataLoader) and not callable(getattr(obj, "state_dict", None))


def prepare_loaders(state: Any) -> None:
    """Instrument every plain DataLoader among the values of ``state`` (:func:`ferry.checkpoint.run.loader.instrument`).

    The Checkpointer calls this at ``restore`` and ``save``, so that a loop started after ``restore`` is counted.
    """
    for obj in state.values():
        if is_plain_loader(obj):
            instrument(obj)


def is_stateful(obj: object) -> bool:
    """Whether the Checkpointer saves ``obj`` through its state (and restores it in place) rather than as a value."""
    if callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None)):
        return True
    return isinstance(obj, torch.Generator) or _is_numpy_generator(obj) or is_plain_loader(obj)


def state_of(obj: Any, *, name: str = "") -> Any:
    """The state of a stateful object, as a tree of tensors and plain values (``name``: for messages)."""
    if isinstance(obj, torch.Generator):
        return {"torch_generator": obj.get_state()}
    if _is_numpy_generator(obj):
        return {"numpy_generator": dict(obj.bit_generator.state)}
    if is_plain_loader(obj):
        return loader_state(obj, name=name)
    return obj.state_dict()


def load_into(obj: Any, saved: Any, *, name: str, where: str) -> None:
    """Restore ``saved`` (from :func:`state_of`) into the live ``obj`` in place.

    Raises:
        CheckpointError: ``saved`` was taken from another kind of object.
        StateDictMismatchError: a module's keys or shapes do not fit (nothing of it is changed).
    """
    if isinstance(obj, torch.nn.Module):
        from ferry.checkpoint.state_dict import load_state_dict

        load_state_dict(obj, saved, strict=True)
    elif isinstance(obj, torch.Generator):
        obj.set_state(_field(saved, "torch_generator", name, where).cpu())
    elif _is_numpy_generator(obj):
        obj.bit_generator.state = _field(saved, "numpy_generator", name, where)
    elif is_plain_loader(obj):
        load_loader_state(obj, saved, name=name, where=where)
    else:
        obj.load_state_dict(saved)


def _field(saved: Any, key: str, name: str, where: str) -> Any:
    if not isinstance(saved, dict) or key not in saved:
        raise CheckpointError(
            f"checkpoint {where!r} holds a different kind of object under {name!r} than the live one "
            f"(expected a saved {key.replace('_', ' ')}). Restore into the kind of object that was saved.",
            path=where,
        )
    return saved[key]
