"""Restoring a checkpoint folder into live objects: read and verify everything first, then change the objects.

:func:`prepare` reads what ``state`` needs from a folder (either layout: one ``state.safetensors``, or the sharded
one of :mod:`ferry.checkpoint.sharded.ranks`) and verifies it, changing nothing live; on every rank, with the
exchanges that make all ranks fail together. :func:`apply` then loads it into the objects. The
:class:`ferry.Checkpointer` chooses the folder (the newest that verifies) and calls both.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, MutableMapping
from typing import Any

import torch

from ferry._remote_path import Folder
from ferry.checkpoint.file.api import load
from ferry.checkpoint.folder import STATE_FILE, read_manifest, rng_file, step_of
from ferry.checkpoint.run.rng import restore_rng_state
from ferry.checkpoint.run.saveable import is_plain_loader, is_stateful, load_into
from ferry.checkpoint.sharded import ranks as collective
from ferry.errors import CheckpointError, CheckpointWarning, CorruptCheckpointError, FerryError

__all__ = ["Prepared", "apply", "check_names", "follow_device", "load_payload", "prepare"]


@dataclasses.dataclass
class Prepared:
    """What a restore read and verified, before anything live changes."""

    objects: dict[str, Any]
    values: dict[str, Any]
    rng: Any
    sharded: collective.Sharded | None
    loaded: dict[str, Any] | None


def prepare(folder: Folder, state: Mapping[str, Any], group: collective.Group | None) -> Prepared:
    """Read and verify everything of ``folder`` that ``state`` needs, changing nothing live (every rank).

    Raises:
        CorruptCheckpointError: some file fails verification (on any rank; then on every rank).
        CheckpointError: the names or modules of ``state`` do not fit the checkpoint.
    """
    what = f"restoring {str(folder)!r}"

    def manifest_of() -> dict[str, Any]:
        manifest, problem = read_manifest(folder)
        if manifest is None:
            raise CorruptCheckpointError(f"checkpoint {str(folder)!r} is incomplete: {problem}.", path=folder)
        return manifest

    manifest = collective.agree(group, manifest_of, what=what, where=folder)
    if manifest.get("layout") != collective.LAYOUT:
        payload = collective.agree(group, lambda: load_payload(folder), what=what, where=folder)
        check_names(folder, state, payload["objects"], payload["values"])
        rng = payload.get("rng")
        if group is not None and group.world_size != 1:  # one process's RNG states: rank 0 takes them
            _warn_world(folder, 1, group)
            rng = rng if group.rank == 0 else None
        return Prepared(payload["objects"], payload["values"], rng, None, None)
    from ferry.checkpoint.sharded.reading import plan_sharded, read_sharded  # imports DCP (1.5 s): sharded only

    objects = dict.fromkeys(manifest.get("objects", []))
    values = dict.fromkeys(manifest.get("values", []))

    def plan() -> tuple[collective.Sharded, dict[str, Any]]:
        check_names(folder, state, objects, values)
        live = {name: obj for name, obj in state.items() if name in objects}
        sharded = collective.sharded_part(live, folder)
        kept = set(manifest.get("sharded", []))
        lost = [name for name in sharded.names if name not in kept]
        if lost:
            raise CheckpointError(
                f"checkpoint {str(folder)!r} saved {lost} as plain state, not through DCP, so it cannot restore "
                "them as modules or optimizers. Restore into the kinds of objects it was saved from.",
                path=folder,
            )
        return sharded, plan_sharded(folder, manifest, sharded)

    sharded, targets = collective.agree(group, plan, what=what, where=folder)
    read_sharded(folder, group, targets)
    saved_world = int(manifest.get("world_size", 1))

    def read_rest() -> tuple[dict[str, Any], Any]:
        payload = load_payload(folder)
        return payload, read_rank_rng(folder, group, saved_world)

    payload, rng = collective.agree(group, read_rest, what=what, where=folder)
    _warn_world(folder, saved_world, group)
    return Prepared(payload["objects"], payload["values"], rng, sharded, targets)


def _warn_world(folder: Folder, saved_world: int, group: collective.Group | None) -> None:
    """Warn (rank 0) when ``folder`` was saved by another number of ranks than this job has: not an exact resume."""
    world = 1 if group is None else group.world_size
    if saved_world != world and (group is None or group.rank == 0):
        warnings.warn(
            f"checkpoint {str(folder)!r} was saved by {_ranks(saved_world)} and is restored by {_ranks(world)}: "
            "modules and optimizers are resharded, and the per-rank RNG states are restored for ranks below "
            f"{saved_world} only, so the run continues but does not repeat the uninterrupted one bit for bit. "
            f"Resume with {_ranks(saved_world)} for an exact resume.",
            CheckpointWarning,
            stacklevel=collective.caller_stacklevel(),
        )


def apply(folder: Folder, state: MutableMapping[str, Any], prepared: Prepared) -> int:
    """Load what :func:`prepare` read into the live objects of ``state``; return the step."""
    objects, values = prepared.objects, prepared.values
    done_before: list[str] = []
    if prepared.sharded is not None and prepared.loaded is not None:
        from ferry.checkpoint.sharded.reading import apply_sharded  # DCP: imported by prepare already

        apply_sharded(prepared.sharded, prepared.loaded)
        done_before = prepared.sharded.names
    elif collective.current_group() is not None:  # a plain process's checkpoint into FSDP2 modules
        from ferry.checkpoint.sharded.reading import apply_full  # imports DCP (1.5 s): under a process group only

        live = {name: state[name] for name in objects.keys() & state.keys()}
        try:
            done_before = apply_full(collective.sharded_part(live, folder), objects)
        except FerryError:
            raise
        except Exception as err:
            raise CheckpointError(
                f"restoring the sharded modules of {sorted(state)} from {str(folder)!r} (saved by one process) "
                f"failed: {type(err).__name__}: {err}. Pass objects built like the ones it was saved from.",
                path=folder,
            ) from err
    # Modules first: ferry.load_state_dict checks every key before it changes anything, so a mismatch there
    # leaves every object untouched. Then the other objects, DataLoaders last (a loader puts its sampler back to the
    # start of the interrupted pass, over what the sampler's own entry restored), then plain values, then the RNG.
    names = sorted(
        objects.keys() & state.keys() - set(done_before),
        key=lambda name: (not isinstance(state[name], torch.nn.Module), is_plain_loader(state[name])),
    )
    for done, name in enumerate(names):
        try:
            load_into(state[name], objects[name], name=name, where=str(folder))
        except FerryError:
            raise
        except Exception as err:
            raise CheckpointError(
                f"restoring {name!r} from {str(folder)!r} failed: {type(err).__name__}: {err}. "
                f"Restored before it: {[*done_before, *names[:done]] or 'nothing'}. Pass the {name!r} object the "
                "checkpoint was saved from (same class and parameter groups).",
                path=folder,
            ) from err
    for name in values.keys() & state.keys():
        state[name] = follow_device(values[name], state[name])
    if prepared.rng is not None:
        restore_rng_state(prepared.rng, where=str(folder))
    manifest = read_manifest(folder)[0] or {}
    step = manifest.get("step", step_of(folder.name))
    if not isinstance(step, int):
        raise CheckpointError(
            f"checkpoint {str(folder)!r} names no step (manifest step {step!r}, folder name {folder.name!r}). "
            "Rename the folder step-<n> for the step it holds, or restore another checkpoint.",
            path=folder,
        )
    return step


def load_payload(folder: Folder) -> dict[str, Any]:
    """The ferry file of a checkpoint folder, checked to be a Checkpointer payload (step, objects, values)."""
    payload = load(folder / STATE_FILE)
    if not isinstance(payload, dict) or not {"step", "objects", "values"} <= payload.keys():
        raise CorruptCheckpointError(
            f"{str(folder / STATE_FILE)!r} is a ferry file but not a Checkpointer checkpoint (no step/objects/"
            "values). Load it with ferry.load() instead.",
            path=folder / STATE_FILE,
        )
    return payload


def _ranks(count: int) -> str:
    return f"{count} rank" if count == 1 else f"{count} ranks"


def check_names(
    folder: Folder, state: Mapping[str, Any], objects: Mapping[str, Any], values: Mapping[str, Any]
) -> None:
    """Every name asked for is in the checkpoint, saved the same way (object vs plain value) as it is now."""
    absent = [name for name in state if name not in objects and name not in values]
    if absent:
        raise CheckpointError(
            f"checkpoint {str(folder)!r} has no {', '.join(map(repr, absent))}; it holds "
            f"{', '.join(map(repr, sorted([*objects, *values])))}. Remove those names from the state you "
            "restore, or restore a checkpoint that saved them.",
            path=folder,
        )
    for name, live in state.items():
        if name in objects and not is_stateful(live):
            raise CheckpointError(
                f"checkpoint {str(folder)!r} saved {name!r} as a state_dict but the live {name!r} is a "
                f"{type(live).__name__} without load_state_dict(). Pass the object it was saved from.",
                path=folder,
            )
        if name in values and is_stateful(live):
            raise CheckpointError(
                f"checkpoint {str(folder)!r} saved {name!r} as a plain value ({type(values[name]).__name__}) "
                f"but the live {name!r} is a {type(live).__name__} with load_state_dict(); restoring would "
                "replace the object. Restore into a placeholder under that name, or a checkpoint that saved "
                "the object.",
                path=folder,
            )


def follow_device(value: Any, live: Any) -> Any:
    """A restored tensor value goes to the device of the live tensor it replaces; everything else as loaded."""
    if isinstance(value, torch.Tensor) and isinstance(live, torch.Tensor):
        return value.to(live.device)
    return value


def read_rank_rng(folder: Folder, group: collective.Group | None, saved_world: int) -> Any | None:
    """This rank's saved RNG states, or None when the checkpoint has no file for this rank."""
    rank = 0 if group is None else group.rank
    if rank >= saved_world:
        return None
    return load(folder / rng_file(rank))
