"""The training-run Checkpointer: numbered, atomic, self-verifying checkpoint folders with retention.

Layout of ``directory``::

    .ferry-lock                 held by the one process that writes here (pid, host)
    step-000000100/             one committed checkpoint
        state.safetensors       a ferry file: the state_dicts, plain values, RNG states and the step
        manifest.json           written last: step, save sequence number, time, metrics, retention, file sizes
    step-000000200/
    step-000000300.ferry-tmp-<pid>-<hex>/   a save in progress (or a crash's leftover): never listed

Under ``torch.distributed`` a step folder has the sharded layout instead (:mod:`ferry.checkpoint.sharded.ranks`).

A checkpoint is written under a temporary folder name, its files fsynced, then committed by one atomic rename of the
folder and an fsync of ``directory``. So a folder named ``step-<n>`` is complete by construction; listing also
checks the manifest and file sizes, and ``restore()`` verifies every checksum while loading. The pieces:
``folders.py`` (listing, retention; the folder layout is :mod:`ferry.checkpoint.folder`), ``commit.py`` (manifest,
commit rename, its fsync), ``restore.py`` (read and verify, then load into the objects), :mod:`ferry.checkpoint.sharded`
(several ranks, through torch.distributed.checkpoint), ``pruning.py`` (deleting pruned checkpoints in the
background), ``saveable.py`` (what can be saved in place), ``snapshot.py`` (copies for async saves), ``lock.py`` (one
writer per directory).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import shutil
import signal
import threading
import time
import warnings
import weakref
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import torch
from torch import nn

from ferry import _dist
from ferry._fs import temporary_name
from ferry._remote import is_url
from ferry._remote_path import Folder, RemotePath
from ferry.checkpoint.file.api import save
from ferry.checkpoint.folder import SHARDS_FILE, STATE_FILE, read_manifest, step_name
from ferry.checkpoint.run import commit, remote
from ferry.checkpoint.run import folders as store
from ferry.checkpoint.run import restore as restoring
from ferry.checkpoint.run.folders import RetentionPolicy
from ferry.checkpoint.run.lock import DirectoryLock
from ferry.checkpoint.run.pruning import Deleter
from ferry.checkpoint.run.rng import capture_rng_state
from ferry.checkpoint.run.saveable import is_stateful, prepare_loaders, state_of
from ferry.checkpoint.run.snapshot import Snapshotter, tensor_bytes
from ferry.checkpoint.sharded import ranks as collective
from ferry.errors import ArgumentError, CheckpointError, CheckpointWarning, CorruptCheckpointError

__all__ = ["Checkpointer"]

#: The open writer of each directory (by real path) in this process: a new one closes the old (see __init__).
_WRITERS: weakref.WeakValueDictionary[str, Checkpointer] = weakref.WeakValueDictionary()

#: Room left beside the tensor bytes for the header, the manifest and file-system overhead, in bytes.
_SLACK = 1 << 20
_SIGNALS = ("SIGTERM", "SIGINT", "SIGUSR1")


class Checkpointer:
    """Save and restore a training run as numbered checkpoint folders ``step-<zero-padded step>/``.

    ``state`` maps names to objects saved through their state and restored in place (modules, optimizers, LR
    schedulers, ``torch.amp.GradScaler``, samplers such as :class:`ferry.ResumableSampler`, ``DataLoader`` objects,
    ``torch.Generator`` and ``np.random.Generator``, your own objects with ``state_dict``/``load_state_dict``) or to
    plain values (int, float, bool, str, None, tensors and nestings of them). Each save also records the RNG states
    of Python, NumPy, torch CPU and every initialised accelerator. For an exactly reproducible resume, put the
    sampler (or the loader) in ``state`` and give the ``DataLoader`` its own ``generator``.

    Under ``torch.distributed`` (a process group is up, e.g. after :func:`ferry.distributed.init` under torchrun)
    every rank creates the Checkpointer on the same directory and calls :meth:`save`, :meth:`restore` and
    :meth:`save_if_due` together (they are collectives). Modules and optimizers then go through
    ``torch.distributed.checkpoint`` with ferry's storage (each rank writes its FSDP2/DTensor shards; a DDP replica
    is written once, by rank 0), rank 0 writes the other objects and values, each rank its RNG states, and rank 0
    commits the folder only after every rank has written. Such a checkpoint restores on any number of ranks, or into
    a plain model in one process (see :mod:`ferry.checkpoint.sharded.ranks` for the layout).

    Example:
        >>> import tempfile, torch, ferry
        >>> model = torch.nn.Linear(2, 2)
        >>> with ferry.Checkpointer(tempfile.mkdtemp(), keep_last=2) as ckpt:
        ...     ckpt.save(10, {"model": model, "epoch": 1}).name
        ...     state = {"model": torch.nn.Linear(2, 2), "epoch": 0}
        ...     ckpt.restore(state), state["epoch"]
        'step-000000010'
        (10, 1)

    On object storage (``directory`` a URL such as ``s3://bucket/run``, any fsspec protocol) every option works the
    same; each save goes to a folder ``step-<step>.<token>/`` of its own, and its ``manifest.json``, uploaded last,
    commits it (no rename on S3; the protocol is in :mod:`ferry.checkpoint.run.remote`).

    Args:
        directory: Folder holding the checkpoints; created (with parents) if missing. Or a URL of object storage.
        keep_last: How many of the most recently saved checkpoints to keep (>= 1).
        keep_every: Also keep every checkpoint whose step is divisible by this.
        keep_best: ``(metric, "min" | "max")``: also keep the best checkpoint by a metric passed to ``save``.
        every_steps: :meth:`save_if_due` saves when the step is a multiple of this.
        every_seconds: :meth:`save_if_due` saves when this many seconds have passed since the last save.
        async_save: ``save`` copies the state off the accelerator (into reused pinned buffers on CUDA; CPU tensors
            are copied too) and returns; a background thread writes it. One save is in flight at most.
        handle_signals: SIGTERM, SIGINT and SIGUSR1 set :attr:`preempted` instead of killing the process; the next
            :meth:`save_if_due` saves at once. The original handlers come back on :meth:`close`. Must be created in
            the main thread.
        read_only: Only read the run (an evaluation script, a run another process is writing, read-only storage):
            :meth:`restore`, :meth:`latest` and :meth:`steps` work, nothing is written, no lock is taken, and
            :meth:`save` raises. A writer (the default) checks at once that it can write ``directory`` and takes its
            lock (rank 0 under torchrun), so a second writer or an unwritable folder is refused before any training
            step, not at the first save; the lock is given back by :meth:`close` (or when the Checkpointer is
            garbage-collected, or its process ends).
        storage_options: For a URL ``directory``: keyword arguments of its fsspec file system (for ``s3fs``:
            ``key``, ``secret``, ``endpoint_url``, ``client_kwargs``...); credentials may also come from the
            environment as for ``s3fs``. Not allowed with a local folder.

    Raises:
        CheckpointError: an invalid setting; for a writer, ``directory`` cannot be created or written, or another
            live process writes it (the message names its pid and host); for a reader, ``directory`` does not exist;
            on object storage also missing or wrong credentials, a missing bucket or an unreachable server.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep_last: int = 3,
        keep_every: int | None = None,
        keep_best: tuple[str, str] | None = None,
        every_steps: int | None = None,
        every_seconds: float | None = None,
        async_save: bool = False,
        handle_signals: bool = False,
        read_only: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(directory, (str, os.PathLike)) or (isinstance(directory, str) and not directory):
            raise ArgumentError(
                f"Checkpointer(directory) takes the run's folder as a str or os.PathLike, got "
                f"{type(directory).__name__} {directory!r}. Pass a folder, e.g. ferry.Checkpointer('runs/a')."
            )
        self.directory: Path | RemotePath
        if is_url(directory):
            self.directory = RemotePath(str(directory), storage_options)
        else:
            if storage_options:
                raise ArgumentError(
                    f"Checkpointer({str(directory)!r}, storage_options=...): storage_options are for a URL of object "
                    "storage (s3://bucket/run), and this is a local folder. Drop storage_options, or pass the URL."
                )
            self.directory = Path(directory)
        self.read_only = read_only
        self.policy = RetentionPolicy(keep_last=keep_last, keep_every=keep_every, keep_best=keep_best)
        for name, value in (("every_steps", every_steps), ("every_seconds", every_seconds)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise CheckpointError(f"{name}={value!r} is not allowed: pass a number > 0, or None.")
        self.every_steps = every_steps
        self.every_seconds = every_seconds
        self.async_save = async_save
        if read_only:
            self._check_reader(every_steps=every_steps, every_seconds=every_seconds, async_save=async_save,
                               handle_signals=handle_signals)  # fmt: skip
        else:
            self._check_writable()
        self._lock: DirectoryLock | remote.RemoteLock
        if isinstance(self.directory, RemotePath):
            self._lock = remote.RemoteLock(self.directory)
        else:
            self._lock = DirectoryLock(self.directory)
        self._last_save_time = time.monotonic()
        self._last_saved_step: int | None = None
        self._bad_folders: set[Folder] = set()  # checkpoints that failed verification here: no longer listed
        self._signal: int | None = None
        self._agreed_signal: int | None = None  # under torch.distributed: a signal every rank knows of
        self._old_handlers: dict[int, Any] = {}
        self._snapshotter = Snapshotter()
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: concurrent.futures.Future[tuple[Folder, CheckpointError | None]] | None = None
        # Local folders are retired by a rename and deleted by a background thread; on object storage a checkpoint
        # is retired by deleting its manifest, and the deletion is done in the saving thread (see remote.py).
        self._deleter = Deleter(self.directory if isinstance(self.directory, Path) else Path())
        self._remote_failures: list[str] = []  # object storage: what pruning could not delete, for a warning
        self._closed = False
        self._warned_async = False
        self._warned_buffers = False
        self._finalizer = weakref.finalize(self, self._lock.release)
        if not read_only and _launch_rank() == 0:  # under torchrun only rank 0 changes the folder's structure
            self._take_over_from_this_process()
            self._lock.acquire()  # before any training step: a second writer is refused now, not at its first save
            _WRITERS[self._key] = self
            self._clean_leftovers()
        if handle_signals:
            self._install_handlers()

    @property
    def _key(self) -> str:
        """This run's key among the open writers of this process: its real path, or its URL."""
        if isinstance(self.directory, RemotePath):
            return self.directory.url
        return os.path.realpath(self.directory)

    @property
    def keep_last(self) -> int:
        """How many of the most recently saved checkpoints are kept."""
        return self.policy.keep_last

    def __repr__(self) -> str:
        mode = ", read_only=True" if self.read_only else ""
        return f"Checkpointer({str(self.directory)!r}, keep_last={self.keep_last}{mode})"

    def _check_reader(self, **writer_settings: object) -> None:
        """A reader: settings that only make sense for a writer are refused; the directory must exist."""
        asked = [name for name, value in writer_settings.items() if value not in (None, False)]
        if asked:
            raise CheckpointError(
                f"read_only=True with {', '.join(f'{name}=...' for name in asked)}: a read-only Checkpointer never "
                "saves. Drop those settings to read the run, or drop read_only=True to train and save.",
                path=self.directory,
            )
        if isinstance(self.directory, RemotePath):  # object storage has no folders: an empty run is a run with no saves
            remote.check_readable(self.directory)
            return
        if not self.directory.is_dir():
            raise CheckpointError(
                f"checkpoint directory {str(self.directory)!r} does not exist (working directory {os.getcwd()!r}); "
                "a read_only=True Checkpointer reads an existing run. Check the path.",
                path=self.directory,
            )

    def _take_over_from_this_process(self) -> None:
        """An older writer of this directory in this process (a re-run notebook cell) is closed, with a warning."""
        older = _WRITERS.get(self._key)
        if older is None or older._closed:
            return
        warnings.warn(
            f"another Checkpointer of this process was still open on {str(self.directory)!r}; it is closed now and "
            "this one writes the run (two writers would delete each other's checkpoints). Close Checkpointers "
            "when done (ckpt.close(), or `with ferry.Checkpointer(...) as ckpt:`) to avoid this.",
            CheckpointWarning,
            stacklevel=collective.caller_stacklevel(),
        )
        older.close()

    def _check_writable(self) -> None:
        """A writer: create the directory, and make sure this process can create files in it, before any step."""
        if isinstance(self.directory, RemotePath):
            remote.check_writable(self.directory)
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            probe = temporary_name(self.directory / ".ferry-write-check")
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as err:
            raise CheckpointError(
                f"checkpoint directory {str(self.directory)!r} is not writable ({err.strerror or err}), so the first "
                "save would fail after training steps had been spent. Choose a writable folder or fix its "
                "permissions; to only read this run (evaluation, read-only storage), pass read_only=True.",
                path=self.directory,
            ) from err

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- listing -------------------------------------------------------------------------------------------------

    def path_for(self, step: int) -> Folder:
        """The folder that holds (or will hold) the checkpoint of ``step``.

        On object storage, a :class:`~ferry._remote_path.RemotePath` (``str()`` gives its URL): there each save has
        a folder of its own, ``step-<n>.<token>`` (see :mod:`ferry.checkpoint.run.remote`), and this returns the
        newest committed one of ``step`` (the plain ``step-<n>`` name when there is none yet).
        """
        if isinstance(self.directory, RemotePath):
            return remote.folder_of_step(self._checkpoints(), self.directory, step)
        return store.step_folder(self.directory, step)

    def _checkpoints(self) -> list[store.CheckpointEntry]:
        """Complete checkpoints in save order.

        The order is the save sequence number, not the step: after a rollback to step 20, a new save of step 21 is
        newer than an abandoned step 30.
        """
        return [entry for entry in store.scan(self.directory) if entry.complete]

    def steps(self) -> list[int]:
        """The steps of all complete checkpoints, in the order they were saved (oldest first).

        Complete means: a manifest and every file at its recorded size; checksums are read by :meth:`restore`,
        :meth:`latest` and :func:`ferry.verify`, and a checkpoint they found damaged is no longer listed here.
        """
        return [entry.step for entry in self._checkpoints() if entry.folder not in self._bad_folders]

    def latest(self) -> Folder | None:
        """The most recently saved checkpoint that verifies, or ``None``.

        Each newer checkpoint that fails verification (checksums, sizes) is skipped with a
        :class:`ferry.CheckpointWarning` naming its folder.
        """
        return self._load_newest()

    # -- saving --------------------------------------------------------------------------------------------------

    @property
    def preempted_by(self) -> int | None:
        """The number of the signal that preempted the run (``signal.SIGTERM``...), or ``None``; see :attr:`preempted`.

        A script that stops on it can exit as the shell convention asks, ``sys.exit(128 + ckpt.preempted_by)``, so a
        scheduler reads "interrupted", not "finished".
        """
        if collective.current_group() is not None:
            return self._agreed_signal
        return self._signal

    @property
    def preempted(self) -> bool:
        """Whether SIGTERM, SIGINT or SIGUSR1 arrived (with ``handle_signals=True``): save, then stop the loop.

        Under ``torch.distributed`` it turns true in :meth:`save_if_due`, on every rank at once: a signal that one
        rank got is exchanged there, every rank saves that step, and from then on ``preempted`` is true everywhere,
        so all ranks leave the loop at the same step (a rank that left alone would leave the others waiting in
        their next collective). Call ``save_if_due`` every step for it to turn true.
        """
        if collective.current_group() is not None:
            return self._agreed_signal is not None
        return self._signal is not None

    def save_if_due(self, step: int, state: Mapping[str, Any], *, metrics: Mapping[str, float] | None = None) -> bool:
        """Save if ``every_steps`` or ``every_seconds`` says so, or a preemption signal is pending; return whether.

        Call it once per step, after the optimizer step. A step already saved is not saved twice. Under
        ``torch.distributed`` every rank calls it, with the same step; it saves on every rank when any rank is due.
        """
        already = step == self._last_saved_step  # the same on every rank: they save together
        due = self._signal is not None
        due = due or (self.every_steps is not None and step % self.every_steps == 0)
        due = due or (self.every_seconds is not None and time.monotonic() - self._last_save_time >= self.every_seconds)
        group = collective.current_group()
        if group is not None:
            # Every rank must take part in a save: save when any rank is due (clocks and signals differ between
            # ranks), check that all count the same step, and let a signal one rank got preempt every rank.
            due, signal = collective.exchange_due(
                group, step=step, due=due and not already, signal=self._signal, where=self.directory
            )
            if signal is not None and self._agreed_signal is None:
                self._agreed_signal = signal
        if already:
            return False
        if due:
            self.save(step, state, metrics=metrics)
        return due

    def save(self, step: int, state: Mapping[str, Any], *, metrics: Mapping[str, float] | None = None) -> Folder:
        """Write a checkpoint of ``state`` at ``step`` and commit it atomically; return its folder.

        Stateful objects are saved through their state, other values as they are; tensors may be on any device.
        Before anything is written, the free disk space is checked against the size of the state. A checkpoint
        that already exists for ``step`` is replaced only after the new one is complete. Checkpoints that the
        retention policy does not keep are pruned only after the new one has committed: renamed away at once (no
        longer listed), then deleted by a background thread, which the next prune, :meth:`wait` and :meth:`close`
        wait for; a folder it fails to delete is reported by a :class:`ferry.CheckpointWarning` from one of these
        calls. The first save takes the directory's write lock. With ``async_save=True`` this returns once the
        state is copied (the folder is committed later; :meth:`wait` waits for it).

        Args:
            step: The training step (an int >= 0); the folder is ``step-<step zero-padded to 9 digits>``.
            state: Names mapped to stateful objects or plain values.
            metrics: Numbers recorded in the manifest (``{"val_loss": 0.31}``), used by ``keep_best``.

        Returns:
            The checkpoint's folder, e.g. ``directory/step-000000420``.

        Raises:
            CheckpointError: ``step`` or ``state`` is invalid, a value cannot be saved (the message names it), the
                disk is too full, another process holds the directory's lock, a previous async save failed, or the
                file system refused a step. The previous checkpoints are untouched. Also raised after the commit
                when the fsync that makes it durable fails twice: the checkpoint is then in place and counts as
                saved (listed, restorable, not saved again by :meth:`save_if_due`), its durability is not
                confirmed, and no older checkpoint was pruned; the message says so.
        """
        group = collective.current_group()

        def check() -> dict[str, float]:
            self._check_open()
            if self.read_only:
                raise CheckpointError(
                    f"this Checkpointer of {str(self.directory)!r} was created with read_only=True, so it does not "
                    f"save step {step!r}. Create it without read_only=True to train and save.",
                    path=self.directory,
                )
            self._check_step(step)
            if not isinstance(state, Mapping):
                raise CheckpointError(
                    f"state must map names to objects, got a {type(state).__name__}. Pass a dict, e.g. "
                    '{"model": model, "optimizer": optimizer}.',
                    path=self.directory,
                )
            return self._check_metrics(metrics)

        # Under torch.distributed a rank whose arguments are bad must not leave the others in a collective.
        clean_metrics = collective.agree(group, check, what=f"saving step {step!r}", where=self.directory)
        self._wait_for_save()
        if group is not None:
            return self._save_collective(step, state, clean_metrics, group)
        self._lock.acquire()
        objects = {name: state_of(obj, name=name) for name, obj in state.items() if is_stateful(obj)}
        values = {name: obj for name, obj in state.items() if not is_stateful(obj)}
        payload = {"step": step, "objects": objects, "values": values, "rng": capture_rng_state()}
        self._check_space(step, payload)
        planned = self._plan_remote(self.directory, step) if isinstance(self.directory, RemotePath) else None
        self._last_save_time = time.monotonic()
        if not self.async_save:
            folder, not_durable = self._write(step, payload, clean_metrics, planned)
            self._last_saved_step = step
            self._warn_failed_deletions()
            if not_durable is not None:
                raise not_durable
            return folder
        payload = self._snapshotter.copy(payload)
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ferry-checkpoint")
        self._pending = self._writer.submit(self._write, step, payload, clean_metrics, planned)
        self._last_saved_step = step
        self._warn_failed_deletions()
        return planned[0] if planned is not None else self.path_for(step)

    def _save_collective(
        self, step: int, state: Mapping[str, Any], metrics: dict[str, float], group: collective.Group
    ) -> Folder:
        """:meth:`save` under a process group: every rank writes its part, rank 0 commits (see sharded/ranks.py)."""
        if self.async_save and not self._warned_async and group.rank == 0:
            self._warned_async = True
            warnings.warn(
                "async_save=True has no effect under torch.distributed: every rank saves synchronously, so that the "
                "checkpoint commits only after all ranks have written. Pass async_save=False to silence this.",
                CheckpointWarning,
                stacklevel=collective.caller_stacklevel(),
            )
        directory = self.directory
        final: Folder = directory / step_name(step)
        what = f"saving step {step} to {str(final)!r}"
        collective.check_same_call(group, what=what, where=final, step=step, names=sorted(state))
        self._check_buffers(group, state)
        replaced: list[RemotePath] = []  # rank 0, object storage: the committed folder this save replaces

        def prepare() -> tuple[str, int] | None:
            if group.rank != 0:
                return None
            self._lock.acquire()
            sequence = max((entry.sequence for entry in self._checkpoints()), default=0) + 1
            if isinstance(directory, RemotePath):  # pieces go straight into their folder; the manifest commits it
                folder, old = remote.plan_folder(directory, store.scan(directory), step)
                remote.clear_folder(folder)
                replaced.extend([old] if old is not None else [])
                return folder.name, sequence
            tmp = temporary_name(store.step_folder(directory, step))
            tmp.mkdir()
            return tmp.name, sequence

        prepared = collective.broadcast(group, collective.agree(group, prepare, what=what, where=final))
        assert prepared is not None
        tmp: Folder = directory / prepared[0]
        sequence = prepared[1]
        try:

            def split() -> tuple[collective.Sharded, dict[str, Any], dict[str, Any], dict[str, Any]]:
                sharded = collective.sharded_part(state, final)
                others = {n: state_of(o, name=n) for n, o in state.items() if is_stateful(o) and n not in sharded.names}
                values = {n: o for n, o in state.items() if not is_stateful(o)}
                return sharded, others, values, sharded.state_dicts()

            sharded, others, values, states = collective.agree(group, split, what=what, where=final)

            def write_local() -> None:
                local = collective.local_tensors(states)
                self._check_space(step, {"others": others, "values": values, "sharded": local})
                collective.write_rank_files(tmp, group, step, others, values, capture_rng_state())

            collective.agree(group, write_local, what=what, where=final)
            collective.save_sharded(tmp, group, states)

            def finish() -> str | None:
                if group.rank != 0:
                    return None
                files: dict[str, dict[str, Any]] = {}
                children: list[Folder] = list(tmp.iterdir())
                for path in sorted(children, key=str):
                    files[path.name] = {"bytes": path.stat().st_size}
                if SHARDS_FILE in files:
                    files[SHARDS_FILE]["sha256"] = collective.metadata_digest(tmp)
                manifest = commit.manifest_fields(
                    self.policy, step, sequence, sorted([*sharded.names, *others]), sorted(values), metrics
                )
                manifest.update(
                    layout=collective.LAYOUT, world_size=group.world_size, sharded=sharded.names, files=files
                )
                if isinstance(tmp, RemotePath):
                    if isinstance(self._lock, remote.RemoteLock):
                        self._lock.check()
                    remote.commit_manifest(tmp, manifest)
                    # Committed: from here on the step is saved, whatever fails.
                    for old in replaced:
                        with contextlib.suppress(CheckpointError):  # left as debris: never a reader's pick
                            remote.delete_checkpoint(old)
                    self._prune(keep=tmp)
                    return None
                assert isinstance(directory, Path)
                assert isinstance(final, Path)
                commit.write_manifest(tmp, manifest)
                parked = commit.commit(tmp, final)
                # Committed: from here on the step is saved, whatever fails.
                not_durable = commit.sync_commit(directory, step, final)
                if parked is not None:
                    shutil.rmtree(parked, ignore_errors=True)
                if not_durable is None:
                    self._prune(keep=final)
                    return None
                return str(not_durable)

            not_durable = collective.broadcast(group, collective.agree(group, finish, what=what, where=final))
        except BaseException as err:
            if group.rank == 0:
                _remove_folder(tmp)
            raise commit.save_failed(err, what, final) from err
        self._last_save_time = time.monotonic()
        self._last_saved_step = step
        self._warn_failed_deletions()
        if not_durable is not None:
            raise CheckpointError(not_durable, path=final)
        return tmp if isinstance(tmp, RemotePath) else final

    def _check_buffers(self, group: collective.Group, state: Mapping[str, Any]) -> None:
        """Warn (once, rank 0) when FSDP2 modules' buffers differ between ranks: only rank 0's copy is saved."""
        if self._warned_buffers:
            return
        digests = collective.gather(group, collective.buffer_digest(state))
        differ = sorted(key for key, value in digests[0].items() if any(d.get(key) != value for d in digests[1:]))
        if differ:
            self._warned_buffers = True
            if group.rank == 0:
                warnings.warn(
                    f"the buffers {differ[:5]}{' ...' if len(differ) > 5 else ''} differ between ranks: FSDP2 does "
                    "not keep buffers (BatchNorm running statistics) in step across ranks, and the checkpoint keeps "
                    "rank 0's copy, which every rank gets back on restore, so those ranks do not resume bit for bit. "
                    "Use nn.SyncBatchNorm.convert_sync_batchnorm(model) before wrapping, or DDP, for buffers that "
                    "agree.",
                    CheckpointWarning,
                    stacklevel=collective.caller_stacklevel(),
                )

    def wait(self) -> None:
        """Wait for the async save in flight, if any, and for the deletion of pruned checkpoints.

        Warns (:class:`ferry.CheckpointWarning`, naming the folder) about each pruned checkpoint that could not be
        deleted.

        Raises:
            CheckpointError: that save failed (the previous checkpoints are untouched), or it committed but its
                durability is not confirmed (as in :meth:`save`).
        """
        try:
            self._wait_for_save()
        finally:
            self._deleter.join()
            self._warn_failed_deletions()

    def _wait_for_save(self) -> None:
        """Wait for the async save in flight, if any; raise its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                _, not_durable = pending.result()
            except BaseException:
                self._last_saved_step = None  # let save_if_due() retry that step
                raise
            if not_durable is not None:
                raise not_durable

    def close(self) -> None:
        """Finish the async save in flight and the deletion of pruned checkpoints; release the lock and the signals.

        Restores the signal handlers that ``handle_signals=True`` replaced.

        Raises:
            CheckpointError: the async save in flight failed.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self.wait()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True)
            if self._lock.release() is False:
                warnings.warn(
                    f"the write lease of {str(self.directory)!r} could not be given back (the server refused or "
                    "cannot be reached): it stays behind. The next writer on this host takes it over; from another "
                    f"host, remove it with `ferry ckpt gc {self.directory} --break-lock` once this process has ended.",
                    CheckpointWarning,
                    stacklevel=2,
                )
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)
            self._old_handlers.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise CheckpointError(
                f"this Checkpointer of {str(self.directory)!r} is closed. Create a new one to save again.",
                path=self.directory,
            )

    def _check_step(self, step: object) -> None:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise CheckpointError(
                f"step={step!r} is not a valid step: it must be an int >= 0. Pass the training step counter.",
                path=self.directory,
            )

    def _check_metrics(self, metrics: Mapping[str, float] | None) -> dict[str, float]:
        clean: dict[str, float] = {}
        for name, value in (metrics or {}).items():
            number = value.item() if isinstance(value, torch.Tensor) and value.numel() == 1 else value
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not isinstance(name, str):
                raise CheckpointError(
                    f"metric {name!r}={value!r} is not a number. Pass numbers, e.g. metrics={{'val_loss': 0.31}} "
                    "(use loss.item() for a tensor).",
                    path=self.directory,
                )
            clean[name] = float(number)
        return clean

    def _check_space(self, step: int, payload: Any) -> None:
        if isinstance(self.directory, RemotePath):
            return  # object storage has no free space to ask for; a full quota fails the upload, which leaves nothing
        needed = tensor_bytes(payload) + _SLACK
        free = shutil.disk_usage(self.directory).free
        if needed > free and self._deleter.busy:  # pruned checkpoints are still being deleted: wait for their space
            self._deleter.join()
            free = shutil.disk_usage(self.directory).free
        if needed > free:
            raise CheckpointError(
                f"not enough disk space to save step {step} in {str(self.directory)!r}: the checkpoint needs about "
                f"{needed:,} bytes and {free:,} are free. Nothing was written and the older checkpoints are kept. "
                "Free space (e.g. a lower keep_last, `ferry ckpt gc`), or save to another disk.",
                path=self.directory,
            )

    def _write(
        self,
        step: int,
        payload: dict[str, Any],
        metrics: dict[str, float],
        planned: tuple[RemotePath, RemotePath | None, int] | None = None,
    ) -> tuple[Folder, CheckpointError | None]:
        """Write the checkpoint of ``step`` under a temporary name, commit it, make the commit durable, prune.

        Returns:
            The folder, and None, or the error to raise once the step counts as saved: the folder is committed but
            the fsync of the directory failed twice (nothing is pruned then).

        Raises:
            CheckpointError: a failure before the commit; the previous checkpoints are untouched.
        """
        if isinstance(self.directory, RemotePath):
            assert planned is not None
            return self._write_remote(self.directory, step, payload, metrics, planned), None
        previous = self._checkpoints()
        sequence = max((entry.sequence for entry in previous), default=0) + 1
        manifest = commit.manifest_fields(
            self.policy, step, sequence, sorted(payload["objects"]), sorted(payload["values"]), metrics
        )
        final = store.step_folder(self.directory, step)
        tmp = temporary_name(final)
        try:
            tmp.mkdir()
            save(payload, tmp / STATE_FILE)
            files = {STATE_FILE: {"bytes": (tmp / STATE_FILE).stat().st_size}}
            commit.write_manifest(tmp, {**manifest, "files": files})
            parked = commit.commit(tmp, final)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)
            raise commit.save_failed(err, f"saving step {step} to {str(final)!r}", final) from err
        # Committed: from here on the step is saved, whatever fails.
        not_durable = commit.sync_commit(self.directory, step, final)
        if parked is not None:
            shutil.rmtree(parked, ignore_errors=True)
        if not_durable is None:
            self._prune(keep=final)
        return final, not_durable

    def _plan_remote(self, directory: RemotePath, step: int) -> tuple[RemotePath, RemotePath | None, int]:
        """Object storage: the folder a save of ``step`` goes to, the one it replaces, and its sequence number.

        Planned in the caller's thread, so that an async ``save`` returns the folder its checkpoint commits to (one
        save is in flight at most, and this writer holds the lease: nothing changes the run in between).

        Raises:
            CheckpointError: the server refused or could not be reached; nothing was written.
        """
        try:
            entries = store.scan(directory)
            sequence = max((entry.sequence for entry in entries if entry.complete), default=0) + 1
            folder, replaced = remote.plan_folder(directory, entries, step)
        except BaseException as err:
            raise commit.save_failed(err, f"saving step {step} to {str(directory)!r}", directory) from err
        return folder, replaced, sequence

    def _write_remote(
        self,
        directory: RemotePath,
        step: int,
        payload: dict[str, Any],
        metrics: dict[str, float],
        planned: tuple[RemotePath, RemotePath | None, int],
    ) -> RemotePath:
        """:meth:`_write` on object storage: upload, commit by creating the manifest, prune (see remote.py)."""
        what = f"saving step {step} to {str(directory)!r}"
        folder, replaced, sequence = planned

        def upload(target: RemotePath) -> dict[str, dict[str, Any]]:
            save(payload, target / STATE_FILE)
            return {STATE_FILE: {"bytes": (target / STATE_FILE).stat().st_size}}

        lease = self._lock if isinstance(self._lock, remote.RemoteLock) else None
        try:
            objects, values = sorted(payload["objects"]), sorted(payload["values"])
            manifest = commit.manifest_fields(self.policy, step, sequence, objects, values, metrics)
            remote.write_checkpoint(
                directory, step, sequence, upload, manifest, lease=lease, planned=(folder, replaced)
            )
        except BaseException as err:
            raise commit.save_failed(err, what, folder) from err
        self._prune(keep=folder)
        return folder

    def _prune(self, *, keep: Folder) -> None:
        """Retire the complete checkpoints the retention policy does not keep; a background thread deletes them.

        Never ``keep`` (just saved); the policy always keeps the newest and the best. See pruning.py. On object
        storage each goes manifest first, then its files, in this thread (see remote.py).
        """
        reasons = self.policy.reasons(self._checkpoints())
        doomed = [folder for folder, why in reasons.items() if not why and folder != keep]
        if not isinstance(self.directory, RemotePath):
            self._deleter.delete([folder for folder in doomed if isinstance(folder, Path)])
            return
        for folder in doomed:
            assert isinstance(folder, RemotePath)
            try:
                remote.delete_checkpoint(folder)
            except CheckpointError as err:
                self._remote_failures.append(
                    f"pruning could not delete the old checkpoint {str(folder)!r}: {err} If its manifest is gone it "
                    "no longer counts as a checkpoint, but its objects take space; run "
                    f"`ferry ckpt gc {self.directory}` once this process ends."
                )

    def _warn_failed_deletions(self) -> None:
        """Warn, in the caller's thread, about each pruned checkpoint the background thread could not delete."""
        failures, self._remote_failures = self._remote_failures, []
        for text in failures:
            warnings.warn(text, CheckpointWarning, stacklevel=collective.caller_stacklevel())
        for failed in self._deleter.failures():
            error = failed.error
            why = error.strerror if isinstance(error, OSError) else None
            why = why or f"{type(error).__name__}: {error}"
            warnings.warn(
                f"pruning could not delete the old checkpoint {str(failed.folder)!r}: {why}. It no longer counts as a "
                f"checkpoint (it was renamed to {failed.renamed.name!r}), but what is left of it takes disk space; "
                f"delete {str(failed.renamed)!r}, or run `ferry ckpt gc {self.directory}` once this process ends.",
                CheckpointWarning,
                stacklevel=collective.caller_stacklevel(),
            )

    def _clean_leftovers(self) -> None:
        """Remove temporary folders of crashed saves (of processes no longer alive); restore parked checkpoints."""
        if isinstance(self.directory, RemotePath):
            for text in remote.remove_debris(self.directory):
                warnings.warn(text, CheckpointWarning, stacklevel=collective.caller_stacklevel())
            return
        for entry in store.stale_temporaries(self.directory):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        for entry in self.directory.glob("*.ferry-old"):
            original = entry.with_name(entry.name.removesuffix(".ferry-old"))
            if original.exists():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.replace(entry, original)

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            raise CheckpointError(
                "handle_signals=True needs the Checkpointer to be created in the main thread (Python delivers "
                "signals there). Create it in the main thread, or pass handle_signals=False.",
                path=self.directory,
            )
        for name in _SIGNALS:
            sig = getattr(signal, name, None)
            if sig is not None:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signal = signum  # only a flag: saving here could run in the middle of a backward pass

    # -- restoring -----------------------------------------------------------------------------------------------

    def restore(self, state: MutableMapping[str, Any], *, step: int | None = None) -> int | None:
        """Load the most recently saved checkpoint (or that of ``step``) into the live objects of ``state``.

        Without ``step``, a newer checkpoint that fails verification (a flipped bit, a truncated file) is skipped
        with a :class:`ferry.CheckpointWarning` naming it, and the next older one is restored.

        Stateful objects are restored in place; modules through :func:`ferry.load_state_dict`, so each tensor lands
        on the device of the parameter it is loaded into (a run saved on a GPU restores on a CPU-only machine).
        Optimizer state follows its parameters' devices (mirrors ``Optimizer.load_state_dict``). Saved plain values
        are written back into ``state``; a tensor value goes to the device of the tensor it replaces. Names saved
        but not in ``state`` are left alone. The RNG states are restored last. Takes no lock.

        Args:
            state: Names mapped to live objects (restored in place) or placeholders for plain values.
            step: Restore this step instead of the newest.

        Returns:
            The restored step, or ``None`` when the directory holds no complete checkpoint (and ``step`` is None).

        Raises:
            CheckpointError: ``step`` has no complete checkpoint, a name in ``state`` is not in the checkpoint (the
                message lists what it holds) or was saved as another kind (object vs plain value), or an object's
                ``load_state_dict`` failed (the message says which objects were restored before it; modules are
                restored first and are checked completely before any is changed).
            StateDictMismatchError: a module's saved keys or shapes do not fit the live module; it and every
                non-module object are left untouched.
            CorruptCheckpointError: the checkpoint of ``step`` fails verification, or every checkpoint does.
        """
        group = collective.current_group()
        collective.check_same_call(group, what="restore", where=self.directory, step=step, names=sorted(state))
        prepare_loaders(state)  # a loop that starts after restore is counted, checkpoint or not
        self._materialize(state, step, group)
        # Reading a sharded optimizer state needs a live state to read into; DCP makes one for an optimizer that has
        # none yet (a zero-lr step). If nothing is restored, that optimizer is handed back as it came.
        fresh = [obj for obj in state.values() if isinstance(obj, torch.optim.Optimizer) and not obj.state]
        try:
            restored = self._restore(state, step, group)
        except BaseException:
            for optimizer in fresh:
                optimizer.state.clear()
            raise
        if restored is None:
            for optimizer in fresh:
                optimizer.state.clear()
        return restored

    def _materialize(self, state: MutableMapping[str, Any], step: int | None, group: collective.Group | None) -> None:
        """Give modules still on ``meta`` memory on this rank's device before the restore reads into them.

        Built under ``ferry.deferred_init`` (FSDP2-sharded ones too: each rank its shards): what the checkpoint holds
        is left to the restore, the rest (non-persistent buffers) is made as :func:`ferry.materialize` makes it;
        with no checkpoint to restore, the whole module is.
        """
        modules = [
            obj
            for obj in state.values()
            if isinstance(obj, nn.Module) and any(t.is_meta for t in (*obj.parameters(), *obj.buffers()))
        ]
        if not modules:
            return
        from ferry.devices import pick_device
        from ferry.placement.deferred import fill

        has_checkpoint = bool(self.steps()) if step is None else step in self.steps()
        for module in modules:
            loaded = frozenset(module.state_dict().keys()) if has_checkpoint else frozenset()
            fill(
                module,
                pick_device(),
                init=None,
                given={},
                redraw=not has_checkpoint,
                call="Checkpointer.restore()",
                loaded=loaded,
            )

    def _restore(self, state: MutableMapping[str, Any], step: int | None, group: collective.Group | None) -> int | None:
        """:meth:`restore` after the arguments are checked: try the candidates newest first."""
        folders = self._restore_candidates(step, group)
        first_error: CorruptCheckpointError | None = None
        for folder in folders:
            try:
                prepared = restoring.prepare(folder, state, group)
            except CorruptCheckpointError as err:
                if step is not None:
                    raise
                first_error = first_error or err
                self._bad_folders.add(folder)
                if group is None or group.rank == 0:
                    warnings.warn(
                        f"checkpoint {str(folder)!r} does not verify and is skipped: {err} Using the newest older "
                        "checkpoint instead; delete the bad folder once you no longer need it.",
                        CheckpointWarning,
                        stacklevel=collective.caller_stacklevel(),
                    )
                continue
            except CheckpointError:
                if step is None and read_manifest(folder)[0] is None:
                    continue  # pruned by the run's writer while this process read it: the next older one
                raise
            # Every rank applies; one that fails makes all raise, instead of leaving the others in a collective.
            apply = functools.partial(restoring.apply, folder, state, prepared)
            restored = collective.agree(group, apply, what=f"restoring {str(folder)!r}", where=folder)
            self._last_saved_step = restored
            return restored
        if first_error is not None:
            raise self._none_verifies(first_error)
        return None

    def _restore_candidates(self, step: int | None, group: collective.Group | None) -> list[Folder]:
        """The folders to try, newest first (rank 0 lists them for every rank); warns about incomplete ones."""

        def listing() -> list[str]:
            if step is not None:
                folder = self.path_for(step)
                if read_manifest(folder)[0] is None:
                    raise CheckpointError(
                        f"no complete checkpoint for step {step} in {str(self.directory)!r}; complete steps: "
                        f"{sorted(self.steps()) or 'none'}. Pass one of those, or step=None for the newest.",
                        path=folder,
                    )
                return [folder.name]
            self._warn_incomplete()
            return [entry.folder.name for entry in reversed(self._checkpoints())]

        if group is None:
            names = listing()
        else:
            names = collective.broadcast(
                group,
                collective.agree(
                    group, lambda: listing() if group.rank == 0 else [], what="restoring", where=self.directory
                ),
            )
        return [self.directory / name for name in names]

    def _warn_incomplete(self) -> None:
        entries = store.scan(self.directory)
        debris = set(remote.debris(self.directory, entries)) if isinstance(self.directory, RemotePath) else set()
        for entry in entries:
            if not entry.complete and entry.folder not in debris:
                warnings.warn(
                    f"checkpoint {str(entry.folder)!r} is incomplete and is skipped: {entry.problem}. Its files were "
                    "changed or removed after it was committed; delete the folder once you no longer need it.",
                    CheckpointWarning,
                    stacklevel=collective.caller_stacklevel(),
                )

    def _load_newest(self) -> Folder | None:
        """The newest checkpoint that verifies, warning about each newer one that does not."""
        self._warn_incomplete()
        first_error: CorruptCheckpointError | None = None
        for entry in reversed(self._checkpoints()):
            try:
                collective.verify_folder(entry.folder, entry.manifest or {})
                return entry.folder
            except CorruptCheckpointError as err:
                first_error = first_error or err
                self._bad_folders.add(entry.folder)
                warnings.warn(
                    f"checkpoint {str(entry.folder)!r} does not verify and is skipped: {err} Using the newest "
                    "older checkpoint instead; delete the bad folder once you no longer need it.",
                    CheckpointWarning,
                    stacklevel=collective.caller_stacklevel(),
                )
        if first_error is not None:
            raise self._none_verifies(first_error)
        return None

    def _none_verifies(self, first: CorruptCheckpointError) -> CorruptCheckpointError:
        """The error when every checkpoint of the directory failed verification: it names them all."""
        bad = sorted(self._bad_folders, key=str)
        return CorruptCheckpointError(
            f"no checkpoint in {str(self.directory)!r} verifies: {len(bad)} tried "
            f"({', '.join(folder.name for folder in bad)}); the newest failed with: {first} Restore the folders from a "
            "copy, or start the run afresh in another directory.",
            path=self.directory,
        )


def _remove_folder(folder: Folder) -> None:
    """Delete what a failed save wrote into ``folder`` (local or remote); errors are ignored (debris goes later)."""
    if isinstance(folder, RemotePath):
        with contextlib.suppress(Exception):
            folder.remove_tree()
    else:
        shutil.rmtree(folder, ignore_errors=True)


def _launch_rank() -> int:
    """This process's rank under torchrun (from the process group, else RANK), 0 in a plain process."""
    return _dist.rank()
