"""What :mod:`ferry.integrations.accelerate` saves of an ``accelerate.Accelerator``, file by file, and puts back.

The files of one checkpoint folder, named as Accelerate names its own (``model.safetensors``, ``model_1.safetensors``,
``optimizer.bin`` ...) but every one a ferry file::

    model.safetensors, model_1.safetensors ...        each prepared model's state_dict (``get_state_dict``)
    optimizer.safetensors, optimizer_1 ...            each prepared optimizer's state_dict
    scheduler.safetensors, scheduler_1 ...            each prepared LR scheduler's state_dict
    dataloader.safetensors, dataloader_1 ...          each prepared DataLoader: its epoch counter (``iteration``), its
                                                      generator, a SeedableRandomSampler's epoch and seed, and the
                                                      state_dict of a torchdata StatefulDataLoader
    scaler.safetensors                                the GradScaler's state_dict, when there is one
    random_states_0.safetensors, random_states_1 ...  each process's RNG states (Python, NumPy, torch, CUDA/XPU if
                                                      initialised) and ``accelerator.step``, written by that process
    custom_checkpoint_0.safetensors, _1 ...           each ``register_for_checkpointing`` object's state_dict

Everything is gathered and checked (:func:`encode_all`) before anything is written, so a state that a ferry file cannot
hold without pickle stops the save with an :class:`~ferry.errors.UnsafeCheckpointError` and no folder.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ferry.checkpoint.file import tree
from ferry.checkpoint.run.rng import capture_rng_state, restore_rng_state
from ferry.checkpoint.state_dict import load_state_dict
from ferry.errors import CheckpointError, CheckpointWarning, UnsafeCheckpointError
from ferry.integrations import require

_data_loader = require("accelerate.data_loader", "accelerate", "ferry.integrations.accelerate")

__all__ = ["Part", "apply_all", "collect", "encode_all", "mid_pass_warnings", "rng_file"]

_PLAIN_TYPES = (type(None), bool, int, float, str)
_LEAF_TYPES = (torch.Size, torch.dtype, torch.device)
_CONTAINERS = (list, tuple, dict, OrderedDict)


def _suffixed(stem: str, index: int) -> str:
    """``model.safetensors`` for index 0, ``model_1.safetensors`` for 1: Accelerate's numbering of its files."""
    return f"{stem}.safetensors" if index == 0 else f"{stem}_{index}.safetensors"


def rng_file(process_index: int) -> str:
    """The RNG file of one process: ``random_states_<process index>.safetensors``."""
    return f"random_states_{process_index}.safetensors"


def _custom_file(index: int) -> str:
    """The file of a registered object: ``custom_checkpoint_<index>.safetensors`` (numbered from 0, as Accelerate's)."""
    return f"custom_checkpoint_{index}.safetensors"


def _type_name(obj: object) -> str:
    kind = type(obj)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


@dataclass
class Part:
    """One file of the checkpoint: its name, what it holds (for messages), the state, and Accelerate's own file.

    Attributes:
        name: The file name in the folder (``optimizer.safetensors``).
        what: The object, for people (``optimizer 0 (torch.optim.adamw.AdamW)``).
        state: The tree to save (tensors and plain values).
        stock: The file stock ``Accelerator.save_state`` writes for it (``optimizer.bin``), for messages.
        fix: What to change when the state cannot be stored.
        expr: How the state was obtained, for messages (``state_dict()``).
    """

    name: str
    what: str
    state: Any
    stock: str
    fix: str
    expr: str = "state_dict()"


_OBJECT_FIX = (
    "Make its state_dict() return tensors and plain values (int, float, bool, str, None, in dict/list/tuple): e.g. "
    "list(value) for a set, value.item() or torch.from_numpy(value) for NumPy values, a dict of plain values for an "
    "object, and turn them back in load_state_dict()"
)


def collect(accelerator: Any) -> list[Part]:
    """Every file to write for this process, in Accelerate's order.

    Models, optimizers, schedulers, dataloaders, scaler, RNG states, registered objects. Only the main process writes
    all but the RNG file.
    """
    parts: list[Part] = []
    main = bool(accelerator.is_main_process)
    if main:
        for i, model in enumerate(accelerator._models):
            state = accelerator.get_state_dict(model, unwrap=False)
            stock = "model.safetensors" if i == 0 else f"model_{i}.safetensors"
            parts.append(Part(_suffixed("model", i), f"model {i} ({_type_name(model)})", state, stock, _OBJECT_FIX))
        for i, optimizer in enumerate(accelerator._optimizers):
            inner = getattr(optimizer, "optimizer", optimizer)
            stock = "optimizer.bin" if i == 0 else f"optimizer_{i}.bin"
            what = f"optimizer {i} ({_type_name(inner)})"
            parts.append(Part(_suffixed("optimizer", i), what, optimizer.state_dict(), stock, _OBJECT_FIX))
        for i, scheduler in enumerate(accelerator._schedulers):
            inner = getattr(scheduler, "scheduler", scheduler)
            stock = "scheduler.bin" if i == 0 else f"scheduler_{i}.bin"
            what = f"scheduler {i} ({_type_name(inner)})"
            parts.append(Part(_suffixed("scheduler", i), what, scheduler.state_dict(), stock, _OBJECT_FIX))
        for i, loader in enumerate(accelerator._dataloaders):
            stock = "sampler.bin / dl_state_dict.bin" if i == 0 else f"sampler_{i}.bin / dl_state_dict_{i}.bin"
            fix = "Its StatefulDataLoader state_dict() must hold tensors and plain values"
            state = loader_state(loader)
            parts.append(Part(_suffixed("dataloader", i), f"dataloader {i}", state, stock, fix, "saved state"))
        if accelerator.scaler is not None:
            what = f"the gradient scaler ({_type_name(accelerator.scaler)})"
            parts.append(Part("scaler.safetensors", what, accelerator.scaler.state_dict(), "scaler.pt", _OBJECT_FIX))
    process = int(accelerator.process_index)
    rng = {"step": int(accelerator.step), "rng": capture_rng_state()}
    stock = f"random_states_{process}.pkl"
    parts.append(Part(rng_file(process), f"the RNG states of process {process}", rng, stock, "", "state"))
    if main:
        for i, obj in enumerate(accelerator._custom_objects):
            what = f"registered object {i} ({_type_name(obj)})"
            stock = f"custom_checkpoint_{i}.pkl"
            parts.append(Part(_custom_file(i), what, obj.state_dict(), stock, _OBJECT_FIX))
    return parts


def _subscripts(trail: tuple[object, ...]) -> str:
    return "".join(f"[{key!r}]" for key in trail)


def _unstorable(value: object, trail: tuple[object, ...]) -> tuple[tuple[object, ...], str] | None:
    """The first value (its path and what it is) that a ferry file cannot hold, or None: the rules of tree.py."""
    kind = type(value)
    if kind in _PLAIN_TYPES or kind in _LEAF_TYPES or isinstance(value, torch.Tensor):
        return None
    if kind not in _CONTAINERS:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return trail, f"a {_type_name(value)} ({shown})"
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _unstorable(item, (*trail, index))
            if found is not None:
                return found
        return None
    assert isinstance(value, dict)
    for key, item in value.items():
        if type(key) not in _PLAIN_TYPES:
            keys = "keys must be str, int, bool, float or None"
            return trail, f"a dict with a key of type {_type_name(key)} ({key!r}); {keys}"
        found = _unstorable(item, (*trail, key))
        if found is not None:
            return found
    return None


def encode_all(parts: list[Part], folder: Path) -> list[tuple[Part, tree.Encoded]]:
    """Check and encode every part before anything is written.

    Raises:
        UnsafeCheckpointError: a value that only pickle could store (a set, a NumPy array, an arbitrary object); the
            message names the object, the key and the fix.
        CheckpointError: a tensor a ferry file cannot hold (on ``meta``, a subclass, an unsupported dtype).
    """
    encoded = []
    for part in parts:
        found = _unstorable(part.state, ())
        if found is not None:
            trail, kind = found
            raise UnsafeCheckpointError(
                f"cannot save {part.what} without pickle: its {part.expr}{_subscripts(trail)} is {kind}, and a ferry "
                "file holds only tensors and plain values (stock Accelerate pickles it into "
                f"{part.stock} and loads it back with torch.load(weights_only=False), which can run any code the "
                f"file holds). Nothing was written. {part.fix}.",
                path=folder,
            )
        encoded.append((part, tree.encode(part.state, folder / part.name)))
    return encoded


# -- dataloaders ------------------------------------------------------------------------------------------------------


def _inner_sampler(loader: Any) -> Any:
    """The sampler that draws the dataset indices, under Accelerate's batch sampler wrappers (shard, skip)."""
    candidate = loader.sampler if isinstance(loader.sampler, torch.utils.data.BatchSampler) else loader.batch_sampler
    for _ in range(8):  # BatchSamplerShard and SkipBatchSampler wrap a batch sampler; unwrap a few levels at most
        if candidate is None:
            return None
        if hasattr(candidate, "sampler"):
            return candidate.sampler
        candidate = getattr(candidate, "batch_sampler", None)
    return None


def _generator_state(generator: object) -> torch.Tensor | None:
    return generator.get_state() if isinstance(generator, torch.Generator) else None


def _is_seedable(sampler: object) -> bool:
    return isinstance(sampler, _data_loader.SeedableRandomSampler)


def loader_state(loader: Any) -> dict[str, Any]:
    """What is saved of one prepared DataLoader (more than stock Accelerate, which saves only the last two)."""
    generator = getattr(loader, "generator", None)
    sampler = _inner_sampler(loader)
    sampler_generator = getattr(sampler, "generator", None)
    state: dict[str, Any] = {
        "iteration": getattr(loader, "iteration", None),
        "generator": _generator_state(generator),
        "sampler_generator": None if sampler_generator is generator else _generator_state(sampler_generator),
        "seedable_sampler": None,
        "stateful": None,
    }
    if _is_seedable(sampler):
        state["seedable_sampler"] = {"epoch": int(sampler.epoch), "initial_seed": int(sampler.initial_seed)}
    if getattr(loader, "use_stateful_dataloader", False):
        state["stateful"] = loader.state_dict()
    return state


def _load_loader(loader: Any, saved: dict[str, Any]) -> None:
    if saved.get("iteration") is not None and hasattr(loader, "iteration"):
        loader.iteration = int(saved["iteration"])
    generator = getattr(loader, "generator", None)
    if isinstance(generator, torch.Generator) and saved.get("generator") is not None:
        generator.set_state(saved["generator"])
    sampler = _inner_sampler(loader)
    sampler_generator = getattr(sampler, "generator", None)
    if isinstance(sampler_generator, torch.Generator) and saved.get("sampler_generator") is not None:
        sampler_generator.set_state(saved["sampler_generator"])
    seedable = saved.get("seedable_sampler")
    if seedable is not None and _is_seedable(sampler):
        sampler.epoch = int(seedable["epoch"])
        sampler.initial_seed = int(seedable["initial_seed"])
    if saved.get("stateful") is not None and getattr(loader, "use_stateful_dataloader", False):
        loader.load_state_dict(saved["stateful"])


def mid_pass_warnings(accelerator: Any) -> list[str]:
    """Why resuming from a save made now would not be exact, for each DataLoader pass under way (empty if exact).

    A pass under way (``skip_first_batches`` then resumes it) is exact when its order does not depend on RNG states
    drawn at its start (a SeedableRandomSampler, a StatefulDataLoader or no shuffling) and its start draws nothing
    from the global torch RNG that dropout and the like use (the DataLoader has a ``generator`` of its own).
    """
    problems = []
    for loader in accelerator.gradient_state.dataloader_references:
        if loader is None or getattr(loader, "end_of_dataloader", True):
            continue
        if getattr(loader, "use_stateful_dataloader", False):
            continue
        sampler = _inner_sampler(loader)
        if isinstance(sampler, torch.utils.data.RandomSampler) and not _is_seedable(sampler):
            problems.append(
                "a DataLoader is in the middle of a pass whose shuffled order was drawn from an RNG state at the "
                "start of the pass, which no checkpoint holds: accelerator.skip_first_batches(dataloader, n) after "
                "load_state would skip n batches of a new order. Use Accelerate's seedable sampler, "
                "Accelerator(dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True)), and call "
                "dataloader.set_epoch(epoch) at the start of each epoch"
            )
        if getattr(loader, "generator", None) is None:
            problems.append(
                "a DataLoader without a generator of its own is in the middle of a pass: after load_state, "
                "the pass that accelerator.skip_first_batches(dataloader, n) starts draws its base seed from the "
                "global torch RNG, so every later random draw (dropout, augmentation) is shifted against the "
                "uninterrupted run. Give it one: DataLoader(..., generator=torch.Generator().manual_seed(seed))"
            )
    return problems


# -- loading ----------------------------------------------------------------------------------------------------------


def _saved(files: dict[str, Any], stem: str, live: list[Any]) -> list[tuple[Any, Any]]:
    """Each live object with its saved state (``stem``: ``model``, ..., or ``custom_checkpoint``)."""
    name: Callable[[int], str] = _custom_file if stem == "custom_checkpoint" else lambda i: _suffixed(stem, i)
    return [(obj, files[name(i)]) for i, obj in enumerate(live)]


def apply_all(accelerator: Any, files: dict[str, Any], folder: Path) -> None:
    """Put what :func:`collect` saved (read back as ``files``: name -> object) into the live accelerator.

    In Accelerate's order: models, optimizers, schedulers, dataloaders, scaler, RNG states and ``step``, registered
    objects. The caller has checked that every file is there and every count matches.

    Raises:
        StateDictMismatchError: a model's keys or shapes do not fit (that model is unchanged).
    """
    for model, state in _saved(files, "model", accelerator._models):
        load_state_dict(model, state, strict=True)
    steps: list[tuple[list[Any], str, Callable[[Any, Any], None]]] = [
        (accelerator._optimizers, "optimizer", lambda obj, state: obj.load_state_dict(state)),
        (accelerator._schedulers, "scheduler", lambda obj, state: obj.load_state_dict(state)),
        (accelerator._dataloaders, "dataloader", _load_loader),
    ]
    for live, stem, load in steps:
        for obj, state in _saved(files, stem, live):
            load(obj, state)
    if accelerator.scaler is not None:
        accelerator.scaler.load_state_dict(files["scaler.safetensors"])
    rng = files[rng_file(int(accelerator.process_index))]
    restore_rng_state(rng["rng"], where=str(folder))
    accelerator.step = int(rng["step"])
    for obj, state in _saved(files, "custom_checkpoint", accelerator._custom_objects):
        obj.load_state_dict(state)


def expected_files(accelerator: Any) -> dict[str, int]:
    """How many objects of each kind this accelerator has, as the manifest records them."""
    return {
        "models": len(accelerator._models),
        "optimizers": len(accelerator._optimizers),
        "schedulers": len(accelerator._schedulers),
        "dataloaders": len(accelerator._dataloaders),
        "custom_objects": len(accelerator._custom_objects),
        "scaler": int(accelerator.scaler is not None),
    }


def check_counts(accelerator: Any, saved: object, folder: Path) -> None:
    """Raise unless the checkpoint holds one entry per live object of each kind.

    Raises:
        CheckpointError: the counts differ (the message lists both and the fix).
    """
    live = expected_files(accelerator)
    if not isinstance(saved, dict):
        saved = {}
    differ = [f"{kind}: {saved.get(kind)} saved, {n} now" for kind, n in live.items() if saved.get(kind) != n]
    if differ:
        raise CheckpointError(
            f"checkpoint {str(folder)!r} does not fit this Accelerator: {'; '.join(differ)}. load_state restores "
            "into the objects in the order they were prepared and registered, so prepare the same models, "
            "optimizers, schedulers and dataloaders, and register_for_checkpointing the same objects, as the run "
            "that saved it, before calling load_state.",
            path=folder,
        )


def warn_uncovered(accelerator: Any, action: str) -> None:
    """Warn about what ferry does not do that stock ``save_state``/``load_state`` would (hooks, other RNGs)."""
    hooks = accelerator._save_model_state_pre_hook if action == "save" else accelerator._load_model_state_pre_hook
    if hooks:
        register = f"register_{action}_state_pre_hook"
        warnings.warn(
            f"ferry.integrations.accelerate.{action}_state does not call the {len(hooks)} hook(s) registered with "
            f"accelerator.{register}: ferry saves and restores every prepared model itself, so the resume is "
            "complete, but whatever the hooks write or read (e.g. a save_pretrained copy of the model) is not. "
            f"Call that code yourself after {action}_state, or use accelerator.{action}_state for those runs.",
            CheckpointWarning,
            stacklevel=3,
        )
    device = getattr(accelerator.device, "type", "cpu")
    if action == "save" and device not in ("cpu", "cuda", "xpu", "mps", "meta"):
        warnings.warn(
            f"the accelerator runs on {device!r}, whose RNG state ferry does not save (it saves Python's, NumPy's, "
            "torch's CPU and the CUDA/XPU/MPS generators), so random draws on that device after a resume will "
            "differ from the uninterrupted run. Use accelerator.save_state if bit-exact resumes matter there.",
            CheckpointWarning,
            stacklevel=3,
        )
