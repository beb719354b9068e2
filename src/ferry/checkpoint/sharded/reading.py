"""Reading the sharded part of a step folder into live modules and optimizers, through DCP, resharding as needed.

The Checkpointer's restore (:mod:`ferry.checkpoint.run.restore`) first plans (checks the live objects against
``shards.json`` and makes fresh tensors to read into, locally), then reads (a collective), then applies what was
read only once every rank has read and verified its part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load

from ferry._remote_path import Folder
from ferry.checkpoint.sharded import ranks
from ferry.checkpoint.sharded.metadata import is_tensor_entry, read_metadata
from ferry.checkpoint.sharded.storage import FerryLoadPlanner, FerryStorageReader
from ferry.errors import CheckpointError

__all__ = ["apply_full", "apply_sharded", "plan_sharded", "read_sharded"]


def plan_sharded(folder: Folder, manifest: Mapping[str, Any], sharded: ranks.Sharded) -> dict[str, Any]:
    """Check the DCP part of ``folder`` against the live objects; return fresh tensors shaped like theirs to read into.

    Local: no ranks. The tensors are ``torch.empty_like`` the live ones (DTensors stay DTensors, sharded the
    same way), so reading into them changes nothing live.

    Raises:
        CheckpointError: the live modules have keys or shapes the checkpoint lacks (the message lists them).
        CorruptCheckpointError: ``shards.json`` does not match the manifest's checksum or is malformed.
    """
    ranks.check_digest(folder, manifest)
    metadata = read_metadata(folder)
    live = sharded.state_dicts()
    _check_keys(folder, metadata, live, sharded)
    return {name: _fresh(value) for name, value in live.items()}


def read_sharded(folder: Folder, group: ranks.Group | None, targets: dict[str, Any]) -> None:
    """Read the DCP part of ``folder`` into ``targets`` (a collective: every rank calls it), resharding as needed.

    Raises:
        CorruptCheckpointError: a piece fails its checksum, or a file is missing (on any rank: all raise).
        CheckpointError: another failure on some rank.
    """
    storage = {"storage_reader": FerryStorageReader(folder), "planner": FerryLoadPlanner()}
    ranks.call_dcp(dcp_load, targets, storage, group, what="reading the sharded state", where=folder)


def apply_sharded(sharded: ranks.Sharded, loaded: Mapping[str, Any]) -> None:
    """Load what :func:`load_sharded` read into the live modules, then the optimizers (mirrors ``set_state_dict``)."""
    for name, module in sharded.modules.items():
        set_model_state_dict(module, loaded[name])
    for name, (optimizer, owner) in sharded.optimizers.items():
        set_optimizer_state_dict(owner, optimizer, loaded[name])


def _by_name(owner: nn.Module, optimizer: torch.optim.Optimizer, saved: Mapping[str, Any]) -> dict[str, Any]:
    """A plain ``Optimizer.state_dict()`` (parameters numbered in order) keyed by parameter name instead.

    The numbers follow the order of the parameters in the param groups, so the n-th parameter of the live
    optimizer (built like the saved one) is the n-th saved one.
    """
    names = {id(param): name for name, param in owner.named_parameters()}
    number_to_name: dict[Any, str] = {}
    for live_group, saved_group in zip(optimizer.param_groups, saved["param_groups"], strict=True):
        for param, number in zip(live_group["params"], saved_group["params"], strict=True):
            number_to_name[number] = names[id(param)]
    return {
        "state": {number_to_name[number]: value for number, value in saved["state"].items()},
        "param_groups": [
            {**group, "params": [number_to_name[number] for number in group["params"]]}
            for group in saved["param_groups"]
        ],
    }


def apply_full(sharded: ranks.Sharded, objects: Mapping[str, Any]) -> list[str]:
    """Load whole state_dicts (saved by a plain process) into the FSDP2/DTensor modules and their optimizers.

    Each rank keeps its shard of every tensor (mirrors ``set_model_state_dict`` with ``full_state_dict=True``).
    Modules without DTensor parameters (plain, DDP) are left to the caller. Returns the names loaded.

    Raises:
        CheckpointError: the saved optimizer has other param groups than the live one.
        RuntimeError: from PyTorch: keys or shapes do not fit.
    """
    options = StateDictOptions(full_state_dict=True)
    done = []
    for name, module in sharded.modules.items():
        if name in objects and ranks.has_dtensors(module):
            set_model_state_dict(module, objects[name], options=options)
            done.append(name)
    for name, (optimizer, owner) in sharded.optimizers.items():
        if name in objects and ranks.has_dtensors(owner):
            try:
                by_name = _by_name(owner, optimizer, objects[name])
            except (KeyError, ValueError, TypeError) as err:
                raise CheckpointError(
                    f"the saved optimizer {name!r} does not fit the live one ({type(err).__name__}: {err}): build it "
                    "with the same param groups, in the same order, as the run that saved it.",
                ) from err
            set_optimizer_state_dict(owner, optimizer, by_name, options=options)
            done.append(name)
    return done


def _fresh(tree: Any) -> Any:
    """A copy of ``tree`` with every tensor replaced by an empty one like it (DTensors stay DTensors)."""
    if isinstance(tree, torch.Tensor):
        return torch.empty_like(tree)
    if isinstance(tree, dict):
        return {key: _fresh(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_fresh(value) for value in tree]
    return tree


def _check_keys(folder: Folder, metadata: Any, live: Mapping[str, Any], sharded: ranks.Sharded) -> None:
    """Every tensor of the live modules is in the checkpoint with the same (global) shape."""
    saved = metadata.state_dict_metadata
    for name in sharded.modules:
        prefix = f"{name}."
        stored = {fqn[len(prefix) :]: info for fqn, info in saved.items() if fqn.startswith(prefix)}
        if not stored:
            raise CheckpointError(
                f"checkpoint {str(folder)!r} holds no module {name!r}; its sharded objects are "
                f"{sorted({fqn.split('.', 1)[0] for fqn in saved})}. Restore into the names it was saved with.",
                path=folder,
            )
        missing = sorted(key for key in live[name] if key not in stored)
        unexpected = sorted(key for key in stored if key not in live[name])
        shapes = sorted(
            f"{key}: saved {list(stored[key].size)}, live {list(value.shape)}"
            for key, value in live[name].items()
            if isinstance(value, torch.Tensor)
            and is_tensor_entry(stored.get(key))
            and tuple(stored[key].size) != tuple(value.shape)
        )
        if missing or unexpected or shapes:
            parts = [
                f"missing in the checkpoint: {missing[:8]}" if missing else "",
                f"not in the module: {unexpected[:8]}" if unexpected else "",
                f"different shapes: {shapes[:8]}" if shapes else "",
            ]
            raise CheckpointError(
                f"module {name!r} does not fit checkpoint {str(folder)!r}: {'; '.join(p for p in parts if p)}. "
                "Build the model with the architecture it was saved with; nothing was changed.",
                path=folder,
            )
