"""What the Checkpointer can save and restore in place, besides plain values.

- anything with ``state_dict()``/``load_state_dict()``: modules (restored through :func:`ferry.load_state_dict`, so
  tensors land on the module's devices), optimizers, LR schedulers, ``torch.amp.GradScaler``, samplers and loaders
  that have them (torchdata's ``StatefulDataLoader``, :class:`ferry.ResumableSampler`), user objects;
- ``torch.Generator`` (``get_state``/``set_state``) and NumPy ``np.random.Generator`` (its bit generator's state);
- a plain ``torch.utils.data.DataLoader``: its ``generator`` state and its sampler's state when the sampler has a
  ``state_dict``. A DataLoader iterator draws its shuffling and worker seeds from the global torch RNG unless the
  loader has its own ``generator``, so exact resume needs ``DataLoader(..., generator=torch.Generator())``; a loader
  without one gets a :class:`ferry.CheckpointWarning` at restore.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from ferry.errors import CheckpointError, CheckpointWarning

__all__ = ["is_stateful", "load_into", "state_of"]


def _is_numpy_generator(obj: object) -> bool:
    module = type(obj).__module__
    return module.startswith("numpy.random") and hasattr(obj, "bit_generator")


def _is_plain_loader(obj: object) -> bool:
    return isinstance(obj, torch.utils.data.DataLoader) and not callable(getattr(obj, "state_dict", None))


def is_stateful(obj: object) -> bool:
    """Whether the Checkpointer saves ``obj`` through its state (and restores it in place) rather than as a value."""
    if callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None)):
        return True
    return isinstance(obj, torch.Generator) or _is_numpy_generator(obj) or _is_plain_loader(obj)


def state_of(obj: Any) -> Any:
    """The state of a stateful object, as a tree of tensors and plain values."""
    if isinstance(obj, torch.Generator):
        return {"torch_generator": obj.get_state()}
    if _is_numpy_generator(obj):
        return {"numpy_generator": dict(obj.bit_generator.state)}
    if _is_plain_loader(obj):
        sampler = obj.sampler
        return {
            "generator": None if obj.generator is None else obj.generator.get_state(),
            "sampler": sampler.state_dict() if callable(getattr(sampler, "state_dict", None)) else None,
        }
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
    elif _is_plain_loader(obj):
        _load_loader(obj, saved, name=name, where=where)
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


def _load_loader(loader: torch.utils.data.DataLoader[Any], saved: Any, *, name: str, where: str) -> None:
    if not isinstance(saved, dict) or "generator" not in saved:
        raise CheckpointError(
            f"checkpoint {where!r} did not save a DataLoader under {name!r}. Restore into what was saved.",
            path=where,
        )
    if loader.generator is None:
        warnings.warn(
            f"{where}: DataLoader {name!r} has no generator, so each new iterator draws its shuffling and worker "
            "seeds from the global torch RNG and a resumed run will not see the same batches. Create it with "
            "DataLoader(..., generator=torch.Generator().manual_seed(seed)).",
            CheckpointWarning,
            stacklevel=4,
        )
    elif saved["generator"] is not None:
        loader.generator.set_state(saved["generator"].cpu())
    load_sampler = getattr(loader.sampler, "load_state_dict", None)
    if saved.get("sampler") is not None and callable(load_sampler):
        load_sampler(saved["sampler"])
