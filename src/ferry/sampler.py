"""A sampler whose place in an epoch survives a checkpoint: :class:`ResumableSampler`.

The state is two numbers, the epoch and the position in it (how many of this rank's indices of that epoch have been
handed out), plus the settings that must match for them to mean the same thing on resume.

**Counting what was trained.** The sampler counts the indices its iterator hands out. A ``DataLoader`` with
``num_workers=0`` takes exactly one batch of indices per batch it yields, so the count is exact whenever the loop
holds a batch. With workers, the loader takes indices ``prefetch_factor * num_workers`` batches ahead, and the count
runs ahead of the training loop by that much. Put the ``DataLoader`` itself in the Checkpointer's ``state``
(``{"loader": loader, ...}``): the Checkpointer counts the batches the loop received and resumes exactly for any
``num_workers`` (:mod:`ferry.checkpoint.run.loader`); the sampler then needs no entry of its own. Without a
Checkpointer, the loop can tell the sampler instead: call :meth:`ResumableSampler.mark_consumed` with each batch's
size, and :meth:`~ResumableSampler.state_dict` reports what the loop has consumed.
"""

from __future__ import annotations

import hashlib
import math
import operator
import warnings
import zlib
from collections.abc import Iterator, Mapping, Sized
from typing import SupportsIndex

import torch
from torch.utils.data import Sampler

from ferry import _dist
from ferry.errors import ArgumentError, CheckpointError, CheckpointWarning

__all__ = ["ResumableSampler"]

_VERSION = 1
# Settings saved in a state_dict that must equal the live sampler's.
_SETTINGS = ("seed", "shuffle", "dataset_len", "num_replicas")


class ResumableSampler(Sampler[int]):
    """Yield dataset indices epoch by epoch, and resume in the middle of an epoch exactly where a run stopped.

    Epochs work as in ``torch.utils.data.DistributedSampler``: epoch ``e`` is a permutation of ``range(len(dataset))``
    drawn from its own ``torch.Generator`` seeded with a hash of ``(seed, e)`` (the global RNG is neither used nor
    advanced; unlike ``DistributedSampler``'s ``seed + epoch``, ``seed=1`` does not replay ``seed=0`` shifted by an
    epoch), or ``0, 1, 2, ...`` with ``shuffle=False``. Across ranks the order is padded to a multiple of
    ``num_replicas`` by repeating its start, and rank ``r`` takes every ``num_replicas``-th index from ``r``, so every
    rank gets ``len(self)`` indices and together they cover the dataset.

    Iterating continues the current epoch from :attr:`position`; once an iterator runs out, the sampler is at the
    start of the next epoch. So a loop that never calls :meth:`set_epoch` gets a new epoch every pass, and one that
    breaks out and iterates again picks up where it stopped. :meth:`set_epoch` (called before the ``DataLoader``
    iterator is created, as ``DistributedSampler`` asks) starts the given epoch from its beginning, except right
    after :meth:`load_state_dict`, when it keeps the restored position (see there).

    :meth:`state_dict` holds plain ints and bools. The epoch and position mean the same on every rank while ranks
    step together, so the state saved by rank 0 resumes any rank. A training loop that resumes exactly::

        sampler = ferry.ResumableSampler(dataset, seed=0)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler, num_workers=4)
        step = checkpointer.restore(state) or 0  # state = {"model": model, "loader": loader, ...}
        for epoch in range(sampler.epoch, n_epochs):
            sampler.set_epoch(epoch)
            for inputs, targets in loader:
                ...  # train
                checkpointer.save_if_due(step, state)

    A state saved after the last batch of epoch ``e`` says epoch ``e`` at position ``len(self)`` or epoch ``e + 1``
    at position 0 (once the iterator has run out); either resumes exactly, whether the loop restarts at
    ``sampler.epoch`` or at its own epoch counter.

    Example:
        >>> from ferry.sampler import ResumableSampler
        >>> list(ResumableSampler(range(5), shuffle=False))
        [0, 1, 2, 3, 4]
        >>> sampler = ResumableSampler(range(6), seed=0)
        >>> it = iter(sampler)
        >>> seen = [next(it), next(it)]
        >>> state = sampler.state_dict()
        >>> state["epoch"], state["position"]
        (0, 2)
        >>> resumed = ResumableSampler(range(6), seed=0)
        >>> resumed.load_state_dict(state)
        >>> seen + list(resumed) == list(ResumableSampler(range(6), seed=0))
        True

    Args:
        data_source: The dataset, or anything with ``len()``; its length is read once, here.
        shuffle: Shuffle every epoch (``True``) or yield indices in order.
        seed: Seed of the shuffle, an int >= 0; the same on every rank.
        num_replicas: Number of ranks sharing the epoch. Default: the world size of the ``torch.distributed``
            process group when one is initialised, else 1.
        rank: This process's rank, in ``[0, num_replicas)``. Default: the process group's rank, else 0.

    Raises:
        ArgumentError: ``data_source`` has no ``len()`` or is empty, ``seed`` is not an int >= 0, ``shuffle`` is not a
            bool, or ``num_replicas``/``rank`` are out of range (or ``num_replicas > 1`` without ``rank`` and
            without a process group).
    """

    def __init__(
        self,
        data_source: Sized,
        *,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(data_source, Sized):
            raise ArgumentError(
                f"data_source is a {type(data_source).__name__}, which has no len(): the sampler needs the dataset "
                "size to draw permutations. Pass a map-style dataset (with __len__ and __getitem__); an "
                "IterableDataset orders its own samples and takes no sampler."
            )
        size = len(data_source)
        if size == 0:
            raise ArgumentError("data_source is empty (len 0): every epoch would be empty. Pass a non-empty dataset.")
        if not isinstance(shuffle, bool):
            raise ArgumentError(f"shuffle={shuffle!r} is not a bool. Pass shuffle=True or shuffle=False.")
        self.data_source = data_source
        self._size = size
        self._shuffle = shuffle
        self._seed = _count("seed", seed)
        group = _dist.process_group()  # (rank, world size)
        self._num_replicas, self._rank = _replicas(num_replicas, rank, group and (group[1], group[0]))
        self._num_samples = math.ceil(size / self._num_replicas)
        self._epoch = 0
        self._position = 0
        # The live iterator: only the newest one moves the state (older ones keep yielding their own epoch).
        self._token = 0
        self._pass_epoch = 0
        self._pass_start = 0
        self._handed = 0  # indices the live iterator has handed out
        self._consumed: int | None = None  # what the loop reported through mark_consumed
        self._restored: tuple[int, int] | None = None  # (epoch, position) loaded and not yet iterated
        self._cache: tuple[int, list[int], int] | None = None  # (epoch, this rank's indices, crc32 of the order)

    def __repr__(self) -> str:
        return (
            f"ResumableSampler(len={self._num_samples}, epoch={self._epoch}, position={self._position}, "
            f"shuffle={self._shuffle}, seed={self._seed}, rank={self._rank}/{self._num_replicas})"
        )

    def __len__(self) -> int:
        """Indices this rank gets in a whole epoch: ``ceil(len(data_source) / num_replicas)``."""
        return self._num_samples

    @property
    def epoch(self) -> int:
        """The current epoch, which the next iterator serves from :attr:`position` on; setting it calls set_epoch."""
        return self._epoch

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    @property
    def position(self) -> int:
        """How many of this rank's indices of :attr:`epoch` have been handed out, in ``[0, len(self)]``."""
        return self._position

    @property
    def seed(self) -> int:
        """The seed the permutations are drawn from."""
        return self._seed

    @property
    def shuffle(self) -> bool:
        """Whether epochs are shuffled."""
        return self._shuffle

    @property
    def num_replicas(self) -> int:
        """Number of ranks sharing each epoch."""
        return self._num_replicas

    @property
    def rank(self) -> int:
        """This sampler's rank, in ``[0, num_replicas)``."""
        return self._rank

    def __iter__(self) -> Iterator[int]:
        """Yield this rank's remaining indices of the current epoch, from :attr:`position` on.

        When the iterator runs out the sampler moves to the start of the next epoch. A restored state whose epoch was
        complete yields nothing once (that pass finishes the epoch), then moves on.
        """
        self._new_pass()
        self._restored = None
        return self._serve(self._token, self._epoch, self._position)

    def _serve(self, token: int, epoch: int, start: int) -> Iterator[int]:
        indices = self._indices(epoch)
        for i in range(start, len(indices)):
            if token == self._token:
                self._position = i + 1
                self._handed += 1
            yield indices[i]
        if token == self._token:
            self._epoch, self._position = epoch + 1, 0

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning on the next iteration, as ``DistributedSampler.set_epoch`` does.

        Right after :meth:`load_state_dict` (before any iteration) it keeps the restored place instead, so the usual
        ``for epoch in range(start, n): sampler.set_epoch(epoch)`` loop resumes exactly: ``set_epoch(e)`` for the
        restored epoch ``e`` continues from the restored position (yielding nothing if that epoch was complete), and
        when the state was saved at the very start of ``e`` (the previous epoch ran out), ``set_epoch(e - 1)`` means
        "epoch ``e - 1``, which is complete". Any other epoch starts afresh.

        Args:
            epoch: The epoch, an int >= 0.

        Raises:
            ArgumentError: ``epoch`` is not an int >= 0.

        Warns:
            CheckpointWarning: a state restored in the middle of an epoch is abandoned for another epoch: the samples
                left in it are skipped, and ``epoch`` may repeat samples already trained on.
        """
        epoch = _count("epoch", epoch)
        restored = self._restored
        if restored is None or epoch not in (restored[0], restored[0] - 1):
            if restored is not None and 0 < restored[1] < self._num_samples:
                warnings.warn(
                    f"set_epoch({epoch}) right after load_state_dict() of a state in the middle of epoch "
                    f"{restored[0]} (position {restored[1]} of {self._num_samples}) starts epoch {epoch} afresh: the "
                    f"rest of epoch {restored[0]} is skipped, so the resume is not exact. Call "
                    f"set_epoch({restored[0]}) to finish the restored epoch first.",
                    CheckpointWarning,
                    stacklevel=2,
                )
            self._epoch, self._position, self._restored = epoch, 0, None
        elif epoch == restored[0]:
            self._epoch, self._position = restored
        elif restored[1] == 0:  # epoch == restored epoch - 1, saved at the start of the next: it is complete
            self._epoch, self._position = epoch, self._num_samples
        else:
            warnings.warn(
                f"set_epoch({epoch}) right after load_state_dict() of a state in epoch {restored[0]} at position "
                f"{restored[1]} goes back an epoch and repeats it. Call set_epoch({restored[0]}) to resume exactly.",
                CheckpointWarning,
                stacklevel=2,
            )
            self._epoch, self._position, self._restored = epoch, 0, None
        self._new_pass()

    def mark_consumed(self, n: int) -> None:
        """Record that the training loop has consumed ``n`` more indices of the current iterator's epoch.

        Needed only with ``DataLoader(num_workers > 0)``, whose prefetching takes indices before the loop trains on
        them: call it once per batch with the batch's size (per rank). From the first call in an iteration on,
        :meth:`state_dict` reports the iterator's epoch with the position the loop has reached rather than what was
        handed out; once the loop has consumed everything the iterator handed out, it reports the sampler's own state
        again (the next epoch, when the iterator has run out). Counts reset with every new iterator. The sampler's
        own iteration is unaffected.

        Args:
            n: Indices consumed since the last call (the batch size; a count past the end of the epoch is fine).

        Raises:
            ArgumentError: ``n`` is not an int >= 0.
        """
        n = _count("n", n)
        self._consumed = (self._consumed or 0) + n

    def state_dict(self) -> dict[str, int | bool]:
        """Return the epoch and position, with the settings they depend on, as plain ints and bools.

        Returns:
            ``{"version", "epoch", "position", "seed", "shuffle", "dataset_len", "num_replicas", "order_crc32"}``:
            ``position`` indices of ``epoch`` have been handed out (or consumed, see :meth:`mark_consumed`);
            ``order_crc32`` fingerprints the epoch's order, so a resume under a torch whose ``randperm`` differs is
            noticed.
        """
        epoch, position = self._epoch, self._position
        if self._consumed is not None and self._consumed < self._handed:
            epoch, position = self._pass_epoch, self._pass_start + self._consumed
        return {
            "version": _VERSION,
            "epoch": epoch,
            "position": position,
            "seed": self._seed,
            "shuffle": self._shuffle,
            "dataset_len": self._size,
            "num_replicas": self._num_replicas,
            "order_crc32": self._order(epoch)[2],
        }

    def load_state_dict(self, state_dict: Mapping[str, object]) -> None:
        """Restore the epoch and position of :meth:`state_dict`; the next iterator yields the rest of that epoch.

        The state may come from any rank. Iterators created before this call keep yielding but no longer move the
        state. Until the next iteration, :meth:`set_epoch` keeps the restored place (see there).

        Args:
            state_dict: What :meth:`state_dict` returned, e.g. read back from a checkpoint.

        Raises:
            CheckpointError: ``state_dict`` is not a ResumableSampler state, or was saved with another seed,
                shuffle, dataset length or number of ranks than this sampler has (the message says how to resume).

        Warns:
            CheckpointWarning: the saved epoch's order differs from the one this sampler draws (another torch
                version's ``randperm``), so finishing that epoch may repeat or skip samples.
        """
        state = _parse(state_dict)
        epoch, position = state["epoch"], state["position"]
        for key in _SETTINGS:
            live = self._size if key == "dataset_len" else getattr(self, key)
            if state[key] != live:
                saved_length = math.ceil(state["dataset_len"] / max(state["num_replicas"], 1))
                raise CheckpointError(_mismatch(key, state[key], live, epoch, position, saved_length))
        if position > self._num_samples:
            raise CheckpointError(
                f"sampler state is at position {position} of epoch {epoch}, but an epoch has {self._num_samples} "
                "indices per rank: the state is damaged. Restore an earlier checkpoint."
            )
        if 0 < position < self._num_samples and state["order_crc32"] != self._order(epoch)[2]:
            warnings.warn(
                f"the order of epoch {epoch} drawn now differs from the one the checkpoint was saved with (torch "
                f"{torch.__version__}'s randperm differs from the saving torch's), so the remaining "
                f"{self._num_samples - position} indices of epoch {epoch} may repeat or skip samples; later epochs "
                "are fine. Resume with the torch version that saved the checkpoint for an exact resume.",
                CheckpointWarning,
                stacklevel=2,
            )
        self._epoch, self._position, self._restored = epoch, position, (epoch, position)
        self._new_pass()

    def _new_pass(self) -> None:
        """Detach earlier iterators and start the counts of a new one at the current place."""
        self._token += 1
        self._pass_epoch, self._pass_start, self._handed, self._consumed = self._epoch, self._position, 0, None

    def _indices(self, epoch: int) -> list[int]:
        """This rank's indices of ``epoch``, padded by wrapping the order so every rank gets ``len(self)``."""
        return self._order(epoch)[1]

    def _order(self, epoch: int) -> tuple[int, list[int], int]:
        if self._cache is None or self._cache[0] != epoch:
            if self._shuffle:
                generator = torch.Generator()
                generator.manual_seed(_epoch_seed(self._seed, epoch))
                order = torch.randperm(self._size, generator=generator)
            else:
                order = torch.arange(self._size)
            crc = zlib.crc32(order.numpy().tobytes())
            padding = self._num_samples * self._num_replicas - self._size
            if padding:
                order = torch.cat([order, order.repeat(math.ceil(padding / self._size))[:padding]])
            self._cache = (epoch, order[self._rank :: self._num_replicas].tolist(), crc)
        return self._cache


def _epoch_seed(seed: int, epoch: int) -> int:
    """A 64-bit seed for epoch ``epoch`` of a run seeded ``seed``, stable across Python and torch versions."""
    digest = hashlib.blake2b(f"ferry.ResumableSampler:{seed}:{epoch}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _natural(value: object) -> int | None:
    """``value`` as a plain int when it is an int >= 0 (numpy ints too, bools not), else None."""
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        return None
    try:
        number = operator.index(value)
    except TypeError:  # a tensor of several elements has __index__ but refuses it
        return None
    return number if number >= 0 else None


def _count(name: str, value: object) -> int:
    """Return ``value`` as a plain int >= 0, or raise ArgumentError."""
    number = _natural(value)
    if number is None:
        raise ArgumentError(f"{name}={value!r} is not allowed: pass an int >= 0.")
    return number


def _replicas(num_replicas: int | None, rank: int | None, group: tuple[int, int] | None) -> tuple[int, int]:
    """Resolve ``(num_replicas, rank)``: the arguments, else ``group`` (its world size and rank), else ``(1, 0)``."""
    if num_replicas is None:
        num_replicas = group[0] if group else 1
    elif isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ArgumentError(f"num_replicas={num_replicas!r} is not allowed: pass an int >= 1, or None.")
    if rank is None:
        if group is None and num_replicas > 1:
            raise ArgumentError(
                f"num_replicas={num_replicas} without rank, and no torch.distributed process group to take the rank "
                "from: every process would read rank 0's share. Pass rank=<this process's rank>."
            )
        rank = group[1] if group else 0
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_replicas:
        raise ArgumentError(
            f"rank={rank!r} is not allowed with num_replicas={num_replicas}: pass 0 <= rank < {num_replicas}."
        )
    return num_replicas, rank


def _parse(state_dict: object) -> dict[str, int]:
    """Check the keys and types of a saved state; bools stay bools (they are ints)."""
    keys = ("version", "epoch", "position", "seed", "shuffle", "dataset_len", "num_replicas", "order_crc32")
    if not isinstance(state_dict, Mapping) or not set(keys) <= set(state_dict):
        got = sorted(map(str, state_dict)) if isinstance(state_dict, Mapping) else type(state_dict).__name__
        raise CheckpointError(
            f"not a ResumableSampler state_dict: expected the keys {list(keys)}, got {got}. Pass what "
            "ResumableSampler.state_dict() returned (saved under the same name you restore)."
        )
    state: dict[str, int] = {}
    for key in keys:
        value = state_dict[key]
        parsed: int | None = (value if isinstance(value, bool) else None) if key == "shuffle" else _natural(value)
        if parsed is None:
            kind = "a bool" if key == "shuffle" else "an int >= 0"
            raise CheckpointError(
                f"sampler state {key!r} is {value!r}, not {kind}: the state is damaged. Restore an earlier checkpoint."
            )
        state[key] = parsed
    if state["version"] != _VERSION:
        raise CheckpointError(
            f"sampler state version {state['version']} is not one this ferry reads ({_VERSION}). Resume with the "
            "ferry version that saved it."
        )
    return state


def _mismatch(key: str, saved: int, live: int, epoch: int, position: int, length: int) -> str:
    """The message for a saved setting that differs from the live sampler's: what differs, and both ways on."""
    what, exact = {
        "seed": ("seed", f"seed={saved}"),
        "shuffle": ("shuffle", f"shuffle={saved}"),
        "dataset_len": ("dataset length", f"the dataset the run was saved with ({saved} samples)"),
        "num_replicas": ("number of ranks", f"num_replicas={saved} (a world size of {saved})"),
    }[key]
    if position == 0:
        fresh = f"sampler.set_epoch({epoch}) instead of load_state_dict(); nothing is lost, epoch {epoch} had not begun"
    elif position == length:
        fresh = f"sampler.set_epoch({epoch + 1}) instead of load_state_dict(); nothing is lost, epoch {epoch} was done"
    else:
        fresh = (
            f"sampler.set_epoch({epoch}) instead of load_state_dict(), which starts epoch {epoch} over ({position} "
            "of its indices per rank were trained on already)"
        )
    return (
        f"sampler state was saved with {what} {saved!r} but this sampler has {live!r}: position {position} of "
        f"epoch {epoch} names other samples under another {what}. Create the sampler with {exact} to resume "
        f"exactly, or, to go on with {live!r}, call {fresh}."
    )
