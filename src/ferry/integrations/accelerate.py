"""ferry checkpoints for an ``accelerate.Accelerator``: :func:`save_state` and :func:`load_state`.

The one-line change: ``accelerator.save_state(...)`` becomes ``save_state(accelerator, ...)`` and
``accelerator.load_state(...)`` becomes ``load_state(accelerator, ...)``. Same defaults as Accelerate, including
``ProjectConfiguration(automatic_checkpoint_naming=True, total_limit=N)`` (folders ``checkpoints/checkpoint_<i>``
under ``project_dir``, the oldest deleted beyond ``total_limit``). What changes:

- every file is a ferry file (safetensors with checksums; what each holds is in ``_accelerate_state``), so nothing
  is pickled: stock Accelerate pickles the optimizer, scheduler, RNG states and registered objects, and loads
  ``custom_checkpoint_<i>.pkl`` with ``weights_only=False``, which runs any code the file holds;
- a checkpoint is a folder written under a temporary name and committed by one rename (then fsynced), with a
  ``manifest.json`` listing its files: a crash leaves the previous checkpoints and at most a temporary folder, which
  is never loaded and is removed by the next ``save_state``/``load_state``;
- automatic naming continues after the newest checkpoint on disk: after ``load_state`` of ``checkpoint_2`` the next
  save writes ``checkpoint_3`` (stock Accelerate starts again at ``checkpoint_0`` in a new process, and with
  ``total_limit`` deletes an older checkpoint to reuse its name, after which ``checkpoint_2``, now stale, still
  looks newest);
- ``load_state`` without ``input_dir`` loads the newest checkpoint that reads back intact: a damaged one (checksum,
  truncation) is skipped with a :class:`~ferry.errors.CheckpointWarning` naming the file, and the one before is
  loaded. With an explicit ``input_dir`` a damaged file raises :class:`~ferry.errors.CorruptCheckpointError`;
- prepared DataLoaders keep their epoch counter and generators across a resume (stock Accelerate keeps neither).

Several processes (plain data parallel, ``DistributedType.MULTI_CPU``/``MULTI_GPU``): every process calls the
function, as with Accelerate. The main process writes the files of the objects (the same on every process under DDP)
and each process its own ``random_states_<process_index>``, into one temporary folder named by the main process;
every process's state is checked before anything is written, and a failure on any process at any stage makes every
process raise. The main process commits only after every process has written and fsynced its files, then rotates.
``load_state`` reads the folder the main process picked on every process, each restoring its own RNG states.

Not covered: DeepSpeed, FSDP, Megatron-LM and XLA (their own checkpoint code; use ``accelerator.save_state``), and the
hooks of ``register_save_state_pre_hook``/``register_load_state_pre_hook`` (not called; a warning says so).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from ferry._fs import remove_stale_temporaries
from ferry.checkpoint.sharded import ranks
from ferry.errors import (
    ArgumentError,
    CheckpointError,
    CheckpointWarning,
)
from ferry.integrations import _accelerate_folder as disk
from ferry.integrations import _accelerate_state as state
from ferry.integrations import require

accelerate = require("accelerate", "accelerate", "ferry.integrations.accelerate")

__all__ = ["load_state", "save_state"]

#: Distributed types whose checkpoints their own engines write (``accelerator.save_state`` handles them).
_UNSUPPORTED = ("DEEPSPEED", "FSDP", "MEGATRON_LM", "XLA")


def save_state(accelerator: Any, output_dir: str | os.PathLike[str] | None = None) -> Path:
    """Save what ``accelerator.save_state`` saves, as a ferry checkpoint folder; mirrors ``Accelerator.save_state``.

    Saved: each prepared model (``accelerator.get_state_dict(model, unwrap=False)``), optimizer, LR scheduler and
    DataLoader (its epoch counter ``iteration``, its generator, a ``SeedableRandomSampler``'s epoch and seed, a
    torchdata ``StatefulDataLoader``'s state_dict), the GradScaler if any, the RNG states of Python, NumPy, torch
    and initialised CUDA/XPU devices with ``accelerator.step``, and the state_dict of every object passed to
    ``accelerator.register_for_checkpointing``. Each is one ferry file (safetensors with checksums, no pickle),
    written into a temporary folder that one rename commits; the folder is then fsynced.

    With ``ProjectConfiguration(automatic_checkpoint_naming=True)`` the folder is
    ``<project_dir>/checkpoints/checkpoint_<i>`` (``output_dir`` is ignored, as by Accelerate), where ``i`` is
    ``accelerator.save_iteration`` or, if higher, one more than the newest ``checkpoint_<n>`` there: an existing
    checkpoint is never overwritten and the newest number is always the newest save. After the commit, with
    ``total_limit=N``, the oldest ``checkpoint_<n>`` folders beyond the newest N are deleted (stock Accelerate
    deletes before writing, so a failed save leaves one fewer). ``accelerator.save_iteration`` then is ``i + 1``.

    Without automatic naming the folder is ``output_dir``; an existing one is replaced atomically if it is a
    checkpoint of this function or empty.

    A shuffled DataLoader in the middle of a pass resumes exactly through ``accelerator.skip_first_batches(loader, n)``
    only with Accelerate's seedable sampler and a DataLoader generator of its own: otherwise a
    :class:`~ferry.errors.CheckpointWarning` says what is missing.

    Args:
        accelerator: The ``accelerate.Accelerator`` whose objects to save; with several processes, every process
            calls ``save_state`` with its own.
        output_dir: The folder to write, without automatic naming.

    Returns:
        The checkpoint folder written (like ``Accelerator.save_state``).

    Raises:
        UnsafeCheckpointError: a state holds a value only pickle could store (a set, a NumPy array, an object); the
            message names the object and key. Raised before anything is written.
        CheckpointError: a tensor a ferry file cannot hold, an ``output_dir`` holding other files, an unsupported
            setup (DeepSpeed, FSDP, Megatron-LM, XLA), several processes without their process group, or a
            file-system failure (the previous checkpoints are untouched). With several processes, every process
            raises when one fails; the others name it.
        ArgumentError: neither ``output_dir`` nor automatic naming, or automatic naming without ``project_dir``.
    """
    group = _check_supported(accelerator, "save_state")
    main = group is None or group.rank == 0
    config = accelerator.project_configuration
    automatic = bool(config.automatic_checkpoint_naming)
    if automatic:
        directory = _checkpoints_directory(accelerator, "save_state")
        planned = directory / "checkpoint_<i>"
    else:
        if output_dir is None:
            raise ArgumentError(
                "save_state(accelerator) needs output_dir: this Accelerator's ProjectConfiguration has "
                "automatic_checkpoint_naming=False. Pass save_state(accelerator, 'checkpoints/step_100'), or create "
                "the Accelerator with project_config=ProjectConfiguration(project_dir='run', "
                "automatic_checkpoint_naming=True)."
            )
        planned = Path(os.path.expanduser(os.fspath(output_dir)))
    state.warn_uncovered(accelerator, "save")
    for problem in state.mid_pass_warnings(accelerator):
        warnings.warn(f"this checkpoint will not resume exactly: {problem}.", CheckpointWarning, stacklevel=2)
    what = f"save_state to {str(planned)!r}"
    # raises on every process before anything is written, when any process's state cannot be stored
    encoded = ranks.agree(
        group, lambda: state.encode_all(state.collect(accelerator), planned), what=what, where=planned
    )

    def prepare() -> tuple[Path, int | None] | None:
        """The folder to write, decided by the main process (which alone touches the file system here)."""
        if not main:
            return None
        if automatic:
            directory.mkdir(parents=True, exist_ok=True)
            disk.remove_leftovers(directory)
            index = max(int(config.iteration), max(disk.numbered(directory), default=-1) + 1)
            return directory / f"checkpoint_{index}", index
        disk.recover_parked(planned)
        disk.check_replaceable(planned)
        planned.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(planned)
        return planned, None

    decided = ranks.broadcast(group, ranks.agree(group, prepare, what=what, where=planned))
    assert decided is not None  # the main process's answer
    final, index = decided
    disk.write(final, encoded, accelerator, group)
    if index is not None:
        config.iteration = index + 1
        if main:
            disk.rotate(directory, config.total_limit)
    else:
        config.iteration += 1  # as Accelerate does
    return final


def load_state(accelerator: Any, input_dir: str | os.PathLike[str] | None = None) -> Path:
    """Restore a checkpoint of :func:`save_state` into ``accelerator``; mirrors ``Accelerator.load_state``.

    Every file is read and verified (checksums) before anything is changed; then, in Accelerate's order, the models
    (through :func:`ferry.load_state_dict`, so tensors land on each model's devices), optimizers, schedulers,
    DataLoaders, GradScaler, RNG states and ``accelerator.step``, and registered objects are restored in place.

    ``input_dir=None`` with automatic naming loads the newest ``checkpoint_<n>`` of ``<project_dir>/checkpoints``
    that reads back intact: a damaged one is skipped with a :class:`~ferry.errors.CheckpointWarning` that names the
    file, and the one before it is loaded. Temporary folders left by a save that was killed are never loaded, and are
    deleted. Afterwards ``accelerator.save_iteration`` is one more than the checkpoint's number (if not higher), so
    automatic naming continues after it.

    For a mid-epoch resume, do what Accelerate documents: iterate ``accelerator.skip_first_batches(dataloader, n)``
    for the rest of the interrupted epoch, where ``n`` is the number of batches that epoch had consumed.

    Args:
        accelerator: The ``accelerate.Accelerator``, with the same objects prepared and registered, in the same
            order, as when the checkpoint was saved.
        input_dir: The checkpoint folder; ``None`` for the newest, with automatic naming.

    Returns:
        The checkpoint folder loaded (``Accelerator.load_state`` returns None).

    Raises:
        CheckpointError: no such folder, no checkpoint to resume from, a folder that is not a checkpoint of
            :func:`save_state` or is incomplete, a checkpoint of another set of objects, or an unsupported setup.
            With several processes, every process raises when one fails; the others name it.
        CorruptCheckpointError: with ``input_dir``, a file of it is damaged (the message names it); without, every
            checkpoint is. Nothing was changed.
        UnsafeCheckpointError: the folder was written by stock ``accelerator.save_state`` (pickles).
        StateDictMismatchError: a model's keys or shapes differ from the saved ones.
        ArgumentError: no ``input_dir`` and no automatic naming.
    """
    group = _check_supported(accelerator, "load_state")
    main = group is None or group.rank == 0
    config = accelerator.project_configuration
    state.warn_uncovered(accelerator, "load")
    if input_dir is not None:
        folder = Path(os.path.expanduser(os.fspath(input_dir)))
        what, where = f"load_state of {str(folder)!r}", folder

        def find() -> Path:
            if main:
                disk.recover_parked(folder)
            if not folder.is_dir():
                raise disk.missing(folder, accelerator)
            return folder

    elif config.automatic_checkpoint_naming:
        directory = _checkpoints_directory(accelerator, "load_state")
        what, where = f"load_state of the newest checkpoint in {str(directory)!r}", directory

        def find() -> Path:
            if not main:
                return directory  # the main process picks the checkpoint; this one reads it next
            if directory.is_dir():
                disk.remove_leftovers(directory)
            newest, read = disk.read_newest(directory, accelerator)
            found[newest] = read
            return newest

    else:
        raise ArgumentError(
            "load_state(accelerator) needs input_dir: this Accelerator's ProjectConfiguration has "
            "automatic_checkpoint_naming=False, so there is no newest checkpoint to pick. Pass the folder that "
            "save_state returned, e.g. load_state(accelerator, 'checkpoints/step_100')."
        )
    found: dict[Path, dict[str, Any]] = {}
    # every process reads the folder the main process picked, so they never disagree
    folder = ranks.broadcast(group, ranks.agree(group, find, what=what, where=where))
    files = ranks.agree(group, lambda: found.get(folder) or disk.read(folder, accelerator), what=what, where=folder)
    ranks.agree(group, lambda: state.apply_all(accelerator, files, folder), what=what, where=folder)
    match = disk.NAME.match(folder.name)
    if config.automatic_checkpoint_naming and match is not None:
        config.iteration = max(int(config.iteration), int(match.group(1)) + 1)
    return folder


# -- checks -----------------------------------------------------------------------------------------------------------


def _check_supported(accelerator: Any, function: str) -> ranks.Group | None:
    """Raise for what is not supported; the process group when there is more than one process, else None."""
    if not isinstance(accelerator, accelerate.Accelerator):
        got = f"{type(accelerator).__module__}.{type(accelerator).__qualname__}"
        raise ArgumentError(
            f"{function}(accelerator, ...) takes an accelerate.Accelerator first, got a {got}. Call "
            f"{function}(accelerator, ...) with the Accelerator that prepared the model."
        )
    kind = accelerator.distributed_type.name
    stock = "save_state" if function == "save_state" else "load_state"
    if kind in _UNSUPPORTED:
        raise CheckpointError(
            f"ferry.integrations.accelerate.{function} does not support DistributedType.{kind}: its engine "
            f"checkpoints the model and optimizer itself, in its own files. Use accelerator.{stock}(...) for this run."
        )
    processes = int(accelerator.num_processes)
    if processes == 1:
        return None
    group = ranks.current_group()
    if group is None or group.world_size != processes or group.rank != int(accelerator.process_index):
        seen = (
            "no process group is up"
            if group is None
            else f"the process group has rank {group.rank} of {group.world_size}"
        )
        raise CheckpointError(
            f"ferry.integrations.accelerate.{function} cannot coordinate the {processes} processes of this "
            f"Accelerator (DistributedType.{kind}, process {accelerator.process_index}): {seen}, and every process "
            "must call it together through the default torch.distributed group. Create the Accelerator in each "
            "process started by accelerate launch or torchrun, before calling it."
        )
    return group


def _checkpoints_directory(accelerator: Any, function: str) -> Path:
    project_dir = accelerator.project_dir
    if project_dir is None:
        raise ArgumentError(
            f"{function}(accelerator) with automatic_checkpoint_naming=True needs a project_dir, and this "
            "Accelerator's ProjectConfiguration has none. Pass ProjectConfiguration(project_dir='run', "
            "automatic_checkpoint_naming=True)."
        )
    return Path(os.path.expanduser(os.fspath(project_dir))) / disk.CHECKPOINTS
