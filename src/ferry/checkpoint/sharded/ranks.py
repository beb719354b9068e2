"""The Checkpointer under ``torch.distributed``: every rank saves and restores together, through DCP.

A checkpoint saved while a process group is up (``torchrun``, after :func:`ferry.distributed.init`) has the
*sharded* layout::

    step-000000100/
        shards.json                 modules and optimizers, through DCP with ferry's storage (storage.py): their
        shard-00000.safetensors     state_dicts from ``get_model_state_dict``/``get_optimizer_state_dict``, keyed
        shard-00001.safetensors     by parameter name, so they reshard (N ranks -> M) and load into a plain model
        state.safetensors           rank 0: the step, the other objects' states (samplers, schedulers...), values
        rng-00000.safetensors       each rank: its own RNG states (Python, NumPy, torch CPU and accelerator)
        rng-00001.safetensors
        manifest.json               rank 0, last: "layout": "sharded", the world size, every file's size

Replicated state (a DDP model, the objects in ``state.safetensors``) is written once, by rank 0; the shards of
FSDP2/DTensor state by their ranks, in parallel. The folder is written under a temporary name and committed by rank
0's atomic rename only after every rank has written and fsynced its files (DCP gathers every rank's result first).
Every step that one rank may fail (a full disk, a bad value) ends in an exchange of outcomes, so all ranks raise
together instead of hanging in a collective; a rank that dies leaves its peers' collectives to fail (gloo) or
torchrun to stop them, and the temporary folder is never committed.

The functions here take what they need from the Checkpointer; ``checkpointer.py`` calls them. They import
``torch.distributed.checkpoint`` (through ``storage.py``) when called, never at import time, so ``import ferry`` stays
light.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from ferry import _dist
from ferry._remote_path import Folder
from ferry.checkpoint.file.api import save, verify
from ferry.checkpoint.folder import SHARDS_FILE, STATE_FILE, rng_file
from ferry.errors import CheckpointError, CorruptCheckpointError, FerryError

__all__ = [
    "LAYOUT",
    "Group",
    "Sharded",
    "agree",
    "broadcast",
    "buffer_digest",
    "call_dcp",
    "caller_stacklevel",
    "check_digest",
    "check_same_call",
    "current_group",
    "exchange_due",
    "gather",
    "has_dtensors",
    "local_tensors",
    "metadata_digest",
    "quiet_dcp",
    "save_sharded",
    "sharded_part",
    "verify_folder",
    "write_rank_files",
]

#: The manifest's "layout" for checkpoints saved under a process group.
LAYOUT = "sharded"
_T = TypeVar("_T")


@dataclass(frozen=True)
class Group:
    """This process's place in the job: its rank and the number of ranks (``(0, 1)`` without a process group)."""

    rank: int
    world_size: int

    @property
    def distributed(self) -> bool:
        """Whether a process group is up (collectives are needed)."""
        return self.world_size > 1 or _dist.process_group() is not None


def current_group() -> Group | None:
    """The default process group's rank and world size, or None when no process group is up."""
    group = _dist.process_group()
    return None if group is None else Group(*group)


@contextlib.contextmanager
def quiet_dcp() -> Iterator[None]:
    """Hide DCP's notice that it runs in a single process: ferry chose that on purpose."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
        yield


def gather(group: Group | None, value: _T) -> list[_T]:
    """Every rank's ``value``, by rank (``[value]`` without a process group)."""
    if group is None:
        return [value]
    import torch.distributed as dist

    values: list[Any] = [None] * group.world_size
    dist.all_gather_object(values, value)
    return values


def agree(group: Group | None, work: Callable[[], _T], *, what: str, where: Folder) -> _T:
    """Run ``work`` on every rank, then make every rank fail, the same way, if any rank failed.

    Every rank decides from the same gathered outcomes, so all ranks raise together: a
    :class:`ferry.CorruptCheckpointError` when the only failures are damaged files (a restore then tries an older
    checkpoint on every rank), else a :class:`ferry.CheckpointError`. A failing rank raises its own error when it is
    of the kind chosen; the others name the rank and its message. Without a process group this is just ``work()``.

    Raises:
        CheckpointError: ``work`` failed on some rank.
        CorruptCheckpointError: ``work`` found a damaged file on some rank, and no rank failed otherwise.
    """
    if group is None:
        return work()
    result: _T | None = None
    error: Exception | None = None
    try:
        result = work()
    except Exception as err:  # every rank must reach the exchange below, or the others hang in it
        error = err
    mine = None if error is None else (isinstance(error, CorruptCheckpointError), f"{type(error).__name__}: {error}")
    outcomes = gather(group, mine)
    failed = [(rank, outcome) for rank, outcome in enumerate(outcomes) if outcome is not None]
    if not failed:
        return result  # type: ignore[return-value]
    corrupt_only = all(corrupt for _, (corrupt, _text) in failed)
    if (
        error is not None
        and isinstance(error, FerryError)
        and isinstance(error, CorruptCheckpointError) == corrupt_only
    ):
        raise error
    rank, (_corrupt, text) = next((r, o) for r, o in failed if o[0] == corrupt_only)
    kind = CorruptCheckpointError if corrupt_only else CheckpointError
    raise kind(
        f"{what} failed on rank {rank} (of {group.world_size}): {text} Every rank stops here.", path=where
    ) from error


def check_same_call(group: Group | None, *, what: str, where: Folder, **fields: Any) -> None:
    """Every rank passed the same ``fields`` (the step, the names in ``state``) to a collective call.

    Raises:
        CheckpointError: on every rank, when some rank passed other values (the message lists each rank's).
    """
    if group is None:
        return
    seen = gather(group, fields)
    for key, value in fields.items():
        values = [rank_fields[key] for rank_fields in seen]
        if any(other != value for other in values):
            shown = "; ".join(f"rank {rank}: {other!r}" for rank, other in enumerate(values))
            raise CheckpointError(
                f"{what}: the ranks passed different {key} ({shown}). Under torch.distributed every rank calls "
                f"save and restore together, with the same {key}; nothing was written or changed.",
                path=where,
            )


def buffer_digest(state: Mapping[str, Any]) -> dict[str, str]:
    """A sum per floating-point buffer of the FSDP2 (DTensor) modules in ``state``, to compare across ranks.

    FSDP2 shards parameters but leaves buffers (BatchNorm running statistics) to each rank, so they drift apart;
    DDP broadcasts rank 0's before each forward, so they need no check there.
    """
    digest: dict[str, str] = {}
    for name, module in state.items():
        if isinstance(module, nn.Module) and has_dtensors(module):
            for key, buffer in module.named_buffers():
                if buffer.is_floating_point() and not callable(getattr(buffer, "to_local", None)):
                    digest[f"{name}.{key}"] = repr(float(buffer.detach().double().sum()))  # nan == nan as text
    return digest


def exchange_due(group: Group, *, step: int, due: bool, signal: int | None, where: Folder) -> tuple[bool, int | None]:
    """Whether any rank is due to save at ``step``, and a signal any rank got (one small all-reduce).

    Raises:
        CheckpointError: on every rank, when the ranks passed different steps (the message gives the range).
    """
    import torch.distributed as dist

    backend = str(dist.get_backend())
    device = torch.device("cpu")
    if "nccl" in backend:  # NCCL reduces tensors on the rank's GPU only
        device = torch.device("cuda", torch.cuda.current_device())
    flags = torch.tensor([step, -step, int(due), signal or 0], dtype=torch.int64, device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    highest, lowest, any_due, any_signal = flags.tolist()
    if highest != -lowest:
        raise CheckpointError(
            f"save_if_due: the ranks passed different steps (from {-lowest} to {highest}). Under torch.distributed "
            "every rank calls save_if_due once per step, with the same step (count steps the same way on every "
            "rank); nothing was saved.",
            path=where,
        )
    return bool(any_due), any_signal or None


def broadcast(group: Group | None, value: _T) -> _T:
    """Rank 0's ``value`` on every rank."""
    if group is None:
        return value
    import torch.distributed as dist

    box: list[Any] = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[no-any-return]


# -- what goes where ----------------------------------------------------------------------------------------------


@dataclass
class Sharded:
    """The part of ``state`` saved through DCP: modules, and optimizers with the module owning their parameters."""

    modules: dict[str, nn.Module]
    optimizers: dict[str, tuple[torch.optim.Optimizer, nn.Module]]

    @property
    def names(self) -> list[str]:
        """The names of these objects in ``state``."""
        return sorted([*self.modules, *self.optimizers])

    def state_dicts(self) -> dict[str, Any]:
        """Their state_dicts as DCP saves them: parameter names as keys, DTensor shards as they are."""
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

        states: dict[str, Any] = {name: get_model_state_dict(module) for name, module in self.modules.items()}
        for name, (optimizer, owner) in self.optimizers.items():
            states[name] = get_optimizer_state_dict(owner, optimizer)
        return states


def sharded_part(state: Mapping[str, Any], where: Folder) -> Sharded:
    """The modules and optimizers of ``state``, each optimizer paired with the module holding its parameters.

    Raises:
        CheckpointError: an optimizer's parameters belong to no module of ``state`` (DCP names optimizer state by
            parameter name, so it needs the module).
    """
    modules = {name: obj for name, obj in state.items() if isinstance(obj, nn.Module)}
    optimizers: dict[str, tuple[torch.optim.Optimizer, nn.Module]] = {}
    for name, obj in state.items():
        if not isinstance(obj, torch.optim.Optimizer):
            continue
        wanted = {id(p) for group in obj.param_groups for p in group["params"]}
        owners = [m for m in modules.values() if wanted <= {id(p) for p in m.parameters()}]
        if not owners:
            raise CheckpointError(
                f"the optimizer {name!r} has parameters that belong to no module in state (modules: "
                f"{sorted(modules) or 'none'}). Under torch.distributed ferry saves optimizer state by parameter "
                "name, which it takes from the module: put the model in state too, e.g. "
                f'{{"model": model, {name!r}: {name}}}.',
                path=where,
            )
        optimizers[name] = (obj, owners[0])
    return Sharded(modules, optimizers)


# -- saving -------------------------------------------------------------------------------------------------------


def write_rank_files(
    tmp: Folder, group: Group, step: int, others: Mapping[str, Any], values: Mapping[str, Any], rng: Any
) -> None:
    """Write this rank's RNG file, and on rank 0 the replicated part (``state.safetensors``); both durably."""
    save(rng, tmp / rng_file(group.rank))
    if group.rank == 0:
        payload = {"step": step, "objects": dict(others), "values": dict(values), "world_size": group.world_size}
        save(payload, tmp / STATE_FILE)


def local_tensors(tree: Any) -> Any:
    """``tree`` with each DTensor replaced by this rank's shard of it (what this rank may have to write)."""
    if isinstance(tree, torch.Tensor):
        to_local = getattr(tree, "to_local", None)
        return to_local() if callable(to_local) else tree
    if isinstance(tree, dict):
        return {key: local_tensors(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [local_tensors(value) for value in tree]
    return tree


def save_sharded(tmp: Folder, group: Group | None, states: dict[str, Any]) -> None:
    """Save ``states`` (from :meth:`Sharded.state_dicts`) through DCP into ``tmp`` (a collective: every rank calls it).

    Raises:
        CheckpointError: a rank failed to write (the message names it).
    """
    from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

    from ferry.checkpoint.sharded import storage as dcp

    storage = {"storage_writer": dcp.FerryStorageWriter(tmp), "planner": dcp.FerrySavePlanner()}
    call_dcp(dcp_save, states, storage, group, what="writing the sharded state", where=tmp)


def call_dcp(
    call: Callable[..., Any],
    states: dict[str, Any],
    storage: dict[str, Any],
    group: Group | None,
    *,
    what: str,
    where: Folder,
) -> None:
    """``dcp.save``/``dcp.load`` of ``states`` with ``storage`` (writer or reader, planner); one rank without a group.

    Raises:
        CheckpointError: DCP's CheckpointException, as :func:`_from_dcp` turns it into ferry's error.
    """
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        with quiet_dcp():
            call(states, **storage, no_dist=group is None or not group.distributed)
    except CheckpointException as err:
        raise _from_dcp(err, what, where) from None


def _from_dcp(err: BaseException, what: str, where: Folder) -> CheckpointError:
    """One FerryError for a DCP CheckpointException: a rank's own ferry error as it is, else a CheckpointError."""
    failures = getattr(err, "failures", {}) or {}
    for rank, (failure, _trace) in sorted(failures.items()):
        if isinstance(failure, CheckpointError):
            return type(failure)(f"{what} failed on rank {rank}: {failure}", path=where)
    shown = "; ".join(f"rank {rank}: {type(f).__name__}: {f}" for rank, (f, _t) in sorted(failures.items()))
    return CheckpointError(f"{what} failed: {shown or err}", path=where)


# -- verifying and restoring --------------------------------------------------------------------------------------


def verify_folder(folder: Folder, manifest: Mapping[str, Any]) -> None:
    """Verify every checksummed file of a checkpoint folder (a sharded one has several).

    Raises:
        CorruptCheckpointError: a file fails verification (the message names it).
    """
    from ferry.checkpoint.sharded import storage as dcp

    if manifest.get("layout") != LAYOUT:
        verify(folder / STATE_FILE)
        return
    check_digest(folder, manifest)
    dcp.read_metadata(folder)  # parses and checks shards.json
    for name in sorted(manifest.get("files", {})):
        if name.endswith(".safetensors"):
            verify(folder / name)


#: The metadata file of the DCP part, listed in the manifest with its SHA-256.


def metadata_digest(folder: Folder) -> str:
    """The SHA-256 of ``shards.json`` (hex), recorded in the manifest and checked before the metadata is used."""
    return hashlib.sha256((folder / SHARDS_FILE).read_bytes()).hexdigest()


def check_digest(folder: Folder, manifest: Mapping[str, Any]) -> None:
    """``shards.json`` has the SHA-256 the manifest recorded.

    Raises:
        CorruptCheckpointError: it was changed after the save (the message gives both digests).
    """
    expected = (manifest.get("files", {}).get(SHARDS_FILE) or {}).get("sha256")
    got = metadata_digest(folder)
    if got != expected:
        raise CorruptCheckpointError(
            f"{str(folder / SHARDS_FILE)!r} has SHA-256 {got}, the manifest says {expected}: the metadata of the "
            "sharded checkpoint was changed after it was saved. Restore another checkpoint.",
            path=folder / SHARDS_FILE,
        )


def has_dtensors(module: nn.Module) -> bool:
    """Whether ``module``'s parameters are DTensor shards (FSDP2), as opposed to whole tensors (plain, DDP)."""
    return any(callable(getattr(param, "to_local", None)) for param in module.parameters())


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the caller's code: the first frame outside ferry."""
    package = str(Path(__file__).resolve().parents[1])
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(package):
        frame, level = frame.f_back, level + 1
    return level
