"""Exact resume of a plain ``torch.utils.data.DataLoader``, with any ``num_workers``.

A loader with workers takes indices ``prefetch_factor * num_workers`` batches ahead of the training loop, so its
sampler cannot tell what was trained. The Checkpointer therefore counts what the *loop* received: the first time it
sees a ``DataLoader`` in ``state`` (at ``restore`` or ``save``) it gives that loader object a subclass of its own
class (:func:`instrument`) that

- counts the batches each pass (one ``iter(loader)``) has yielded to the loop;
- records what the pass's random draws depend on: the global torch RNG and the loader's own ``generator`` just
  before the iterator is created (PyTorch draws the workers' base seed there) and just before the sampler's first
  index (a ``RandomSampler`` draws its permutation there), and the state at the start of the pass of a sampler that
  has a ``state_dict`` (:class:`ferry.ResumableSampler`);
- gives each batch a seed of its own, ``(loader seed, pass, batch number)``, with which a worker reseeds Python's,
  NumPy's and torch's RNGs before it fetches that batch, so random augmentation in ``Dataset.__getitem__`` does not
  depend on which worker fetched the batch nor on what that worker fetched before (``persistent_workers`` too).

:func:`loader_state` saves that bookkeeping; :func:`load_loader_state` puts the sampler back to the start of the
interrupted pass, and the next pass replays that pass's random draws from the saved RNG states (then puts the RNGs
back, so the rest of the run continues from the restored states), and skips, without loading them, the batches the
loop had received. The resumed run sees exactly the
batches the uninterrupted run would have seen next: same order, same augmentation, for any ``num_workers``,
``prefetch_factor``, ``pin_memory`` and ``persistent_workers``.

Not exact, with a :class:`ferry.CheckpointWarning` at ``save``: an ``IterableDataset`` (it orders its own samples;
use torchdata's ``StatefulDataLoader``, which the Checkpointer saves through its ``state_dict``), and a pass that was
already running when the Checkpointer first saw the loader (call ``restore(state)`` before the loop, as the README
does). A dataset that keeps random state of its own (its own ``np.random.Generator``) is not reseeded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import random
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, Sampler

from ferry.checkpoint.sharded.ranks import caller_stacklevel
from ferry.errors import CheckpointError, CheckpointWarning

__all__ = ["FORMAT", "instrument", "is_instrumented", "load_loader_state", "loader_state"]

FORMAT = "ferry.DataLoader"
_VERSION = 1
#: The RNG states of a pass's draws, as saved (the fields of _Draws).
_DRAW_KEYS = ("rng_iter", "generator_iter", "rng_first", "generator_first")


@dataclasses.dataclass
class _Draws:
    """The RNG states a pass's random draws start from: global torch RNG and the loader's generator, at two moments."""

    rng_iter: torch.Tensor | None = None  # before the iterator is created
    generator_iter: torch.Tensor | None = None
    rng_first: torch.Tensor | None = None  # before the sampler's first index
    generator_first: torch.Tensor | None = None


@dataclasses.dataclass
class _Resume:
    """A saved pass to replay: its number, its draws, and how many batches to skip."""

    number: int
    consumed: int
    draws: _Draws


@dataclasses.dataclass
class _Book:
    """What the Checkpointer knows of one instrumented loader."""

    seed: int
    number: int = -1  # passes started so far - 1
    consumed: int = 0  # batches of the current pass received by the loop (skipped ones included)
    complete: bool = True  # the current pass has run out (or none has started)
    draws: _Draws = dataclasses.field(default_factory=_Draws)  # of the current pass
    replay: bool = False  # the current pass replays saved draws (a resumed pass)
    sampler: Any = None  # the stateful sampler's state at the start of the current pass
    token: int = 0  # the newest iterator: older ones no longer count
    skip: int = 0  # batches the current pass skips (a resumed pass)
    resume: _Resume | None = None  # set by load_loader_state, used by the next pass
    seen_mid_pass: bool = False  # instrumented while a pass of its own was running: that pass is not tracked
    index_sampler: Sampler[Any] | None = None


class _SeededBatch(list):  # type: ignore[type-arg]  # a list of dataset indices, as BatchSampler yields
    """A batch of indices with the seed its worker reseeds its RNGs from before fetching it."""

    ferry_seed: int


class _SeededIndex(int):
    """One dataset index (a loader without automatic batching) with its seed."""

    ferry_seed: int


def _seed(*parts: object) -> int:
    """A 63-bit seed from ``parts``, stable across Python and torch versions."""
    text = ":".join(str(part) for part in ("ferry.DataLoader", *parts))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def _reseed(seed: int) -> None:
    """Seed Python's, torch's and (when imported) NumPy's global RNGs, as PyTorch seeds a worker at its start."""
    random.seed(seed)
    torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


def _install_fetch_hook() -> None:
    """In a worker process: reseed before fetching every batch that carries a seed (idempotent)."""
    from torch.utils.data._utils import fetch

    fetcher = fetch._MapDatasetFetcher
    if getattr(fetcher.fetch, "ferry_seeded", False):
        return
    original: Callable[[Any, Any], Any] = fetcher.fetch

    def fetch_seeded(self: Any, possibly_batched_index: Any) -> Any:
        seed = getattr(possibly_batched_index, "ferry_seed", None)
        if seed is not None:
            _reseed(seed)
        return original(self, possibly_batched_index)

    fetch_seeded.ferry_seeded = True  # type: ignore[attr-defined]
    fetcher.fetch = fetch_seeded  # type: ignore[method-assign]


class _WorkerInit:
    """``worker_init_fn``: install the reseeding fetch hook in the worker, then run the user's own init function."""

    def __init__(self, user: Callable[[int], object] | None) -> None:
        self.user = user

    def __call__(self, worker_id: int) -> None:
        _install_fetch_hook()
        if self.user is not None:
            self.user(worker_id)


def _stateful_sampler(loader: DataLoader[Any]) -> Any:
    """The loader's sampler that has ``state_dict``/``load_state_dict`` (a ResumableSampler), if any."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    for candidate in (loader.sampler, getattr(batch_sampler, "sampler", None)):
        if callable(getattr(candidate, "state_dict", None)) and callable(getattr(candidate, "load_state_dict", None)):
            return candidate
    return None


class _PassSampler(Sampler[Any]):
    """The loader's index sampler, wrapped: replays a resumed pass's first draws, skips, and seeds every batch."""

    def __init__(self, loader: DataLoader[Any], base: Any) -> None:
        self._loader = loader
        self._base = base

    def __len__(self) -> int:
        return len(self._base)

    def __iter__(self) -> Iterator[Any]:
        book: _Book = self._loader.__dict__["_ferry_book"]
        number, skip = book.number, book.skip
        tag = self._loader.num_workers > 0
        it = iter(self._base)
        try:
            first = self._first(book, it)
        except StopIteration:
            return
        index = 0
        item = first
        while True:
            if index >= skip:
                yield _tagged(item, _seed(book.seed, number, index)) if tag else item
            index += 1
            try:
                item = next(it)
            except StopIteration:
                return

    def _first(self, book: _Book, it: Iterator[Any]) -> Any:
        """``next(it)``: the draws a sampler makes at its start, from the saved RNG states on a resumed pass."""
        generator = self._loader.generator
        if not book.replay or book.draws.rng_first is None:
            book.draws.rng_first = torch.get_rng_state()
            book.draws.generator_first = None if generator is None else generator.get_state()
            return next(it)
        with _replaying(generator, book.draws.rng_first, book.draws.generator_first):
            return next(it)


@contextlib.contextmanager
def _replaying(
    generator: torch.Generator | None, rng: torch.Tensor | None, generator_state: torch.Tensor | None
) -> Iterator[None]:
    """Run the block from the given RNG states, then put the global RNG and ``generator`` back where they were."""
    rng_now = torch.get_rng_state()
    generator_now = None if generator is None else generator.get_state()
    if rng is not None:
        torch.set_rng_state(rng)
    if generator is not None and generator_state is not None:
        generator.set_state(generator_state)
    try:
        yield
    finally:
        torch.set_rng_state(rng_now)
        if generator is not None and generator_now is not None:
            generator.set_state(generator_now)


def _tagged(item: Any, seed: int) -> Any:
    if isinstance(item, (list, tuple)):
        batch = _SeededBatch(item)
        batch.ferry_seed = seed
        return batch
    if isinstance(item, int) and not isinstance(item, bool):
        index = _SeededIndex(item)
        index.ferry_seed = seed
        return index
    return item


class _CountingIterator:
    """The loader's iterator, counting the batches the loop receives (only the newest iterator of a loader counts)."""

    def __init__(self, inner: Iterator[Any], book: _Book) -> None:
        self._inner = inner
        self._book = book
        self._token = book.token

    def __iter__(self) -> _CountingIterator:
        return self

    def __next__(self) -> Any:
        try:
            batch = next(self._inner)
        except StopIteration:
            if self._token == self._book.token:
                self._book.complete = True
            raise
        if self._token == self._book.token:
            self._book.consumed += 1
        return batch

    def __len__(self) -> int:
        return len(self._inner)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _subclass(cls: type[DataLoader[Any]]) -> type[DataLoader[Any]]:
    """``cls`` with the counting and replaying of :func:`instrument` (a single base: the object keeps its layout)."""

    class Instrumented(cls):  # type: ignore[valid-type, misc]
        ferry_instrumented = True

        @property
        def _index_sampler(self) -> Any:
            book: _Book = self.__dict__["_ferry_book"]
            if book.index_sampler is None:
                book.index_sampler = _PassSampler(self, super()._index_sampler)
            return book.index_sampler

        def __iter__(self) -> Iterator[Any]:
            book: _Book = self.__dict__["_ferry_book"]
            _begin_pass(self, book)
            generator: torch.Generator | None = self.generator
            if book.replay and book.draws.rng_iter is not None:
                with _replaying(generator, book.draws.rng_iter, book.draws.generator_iter):
                    inner = super().__iter__()
            else:
                book.draws.rng_iter = torch.get_rng_state()
                book.draws.generator_iter = None if generator is None else generator.get_state()
                inner = super().__iter__()
            return _CountingIterator(inner, book)

    Instrumented.__name__ = cls.__name__
    Instrumented.__qualname__ = cls.__qualname__
    Instrumented.__module__ = cls.__module__
    return Instrumented


def _begin_pass(loader: DataLoader[Any], book: _Book) -> None:
    book.token += 1
    book.seen_mid_pass = False
    resume, book.resume = book.resume, None
    if resume is None:
        book.number += 1
        book.skip = 0
        book.draws, book.replay = _Draws(), False
    else:  # replay the interrupted pass: same number, same draws, skip what the loop had received
        book.number, book.skip = resume.number, resume.consumed
        book.draws, book.replay = resume.draws, True
    book.consumed, book.complete = book.skip, False
    sampler = _stateful_sampler(loader)
    book.sampler = None if sampler is None else sampler.state_dict()


_CLASSES: dict[type, type] = {}


def _iterating(loader: DataLoader[Any]) -> bool:
    """Whether an iterator of ``loader`` exists now (a pass may be under way that nobody counted).

    A persistent-workers loader keeps its iterator; any other iterator holds the loader's index sampler, so it is
    found among that object's referrers (looked up once per loader, when it is first seen).
    """
    if getattr(loader, "_iterator", None) is not None:
        return True
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    index_sampler = DataLoader._index_sampler.fget(loader)  # type: ignore[attr-defined]
    return any(isinstance(obj, _BaseDataLoaderIter) for obj in gc.get_referrers(index_sampler))


def is_instrumented(loader: object) -> bool:
    """Whether :func:`instrument` has been applied to ``loader``."""
    return bool(getattr(type(loader), "ferry_instrumented", False))


def instrument(loader: DataLoader[Any]) -> bool:
    """Make ``loader`` (in place) count what the loop receives and resume exactly; return whether it was not yet.

    The object keeps its identity and behaviour; its class becomes a subclass of its own class (``isinstance`` checks
    still hold). Its ``worker_init_fn`` is wrapped to reseed per batch (the original still runs, after).
    """
    if is_instrumented(loader):
        return False
    cls = type(loader)
    subclass = _CLASSES.get(cls)
    if subclass is None:
        subclass = _subclass(cls)
        _CLASSES[cls] = subclass
    loader.__dict__["_ferry_book"] = _Book(seed=torch.initial_seed() & (2**63 - 1), seen_mid_pass=_iterating(loader))
    if getattr(loader, "_iterator", None) is not None:  # persistent workers started uncounted: the next pass restarts
        loader._iterator = None  # them (the old ones stop when the loop drops the old iterator)
    loader.worker_init_fn = _WorkerInit(loader.worker_init_fn)
    loader.__class__ = subclass
    return True


def _not_exact(loader: DataLoader[Any], book: _Book) -> str | None:
    if isinstance(loader.dataset, IterableDataset):
        return (
            "its dataset is an IterableDataset, which orders its own samples: ferry cannot tell where the loop "
            "stopped. Use torchdata's StatefulDataLoader (its state_dict is saved) or a map-style dataset"
        )
    if book.seen_mid_pass:
        return (
            "the Checkpointer first saw it while one of its iterators was alive, so the batches of that pass are not "
            "counted. Call ckpt.restore(state) before the training loop (it also prepares the loaders in state)"
        )
    return None


def loader_state(loader: DataLoader[Any], *, name: str) -> dict[str, Any]:
    """The state to save of an instrumented loader: the current pass, its first draws, what the loop received.

    Warns:
        CheckpointWarning: the resume will not be exact (an IterableDataset, or a pass the Checkpointer did not see
            start); the message says why and what to change.
    """
    instrument(loader)
    book: _Book = loader.__dict__["_ferry_book"]
    problem = _not_exact(loader, book)
    if problem is not None:
        warnings.warn(
            f"DataLoader {name!r} will not resume exactly: {problem}.",
            CheckpointWarning,
            stacklevel=caller_stacklevel(),
        )
    running = book.number >= 0 and not book.complete
    sampler = _stateful_sampler(loader)
    sampler_state = book.sampler if running else (None if sampler is None else sampler.state_dict())
    generator = loader.generator
    return {
        "format": FORMAT,
        "version": _VERSION,
        "seed": book.seed,
        "pass": book.number,
        "running": running,
        "consumed": book.consumed if running else 0,
        **{key: getattr(book.draws, key) if running else None for key in _DRAW_KEYS},
        "generator": None if generator is None else generator.get_state(),
        "sampler": sampler_state,
        "num_workers": loader.num_workers,
    }


def load_loader_state(loader: DataLoader[Any], saved: Any, *, name: str, where: str) -> None:
    """Put ``loader`` where :func:`loader_state` left it: the next pass resumes the interrupted one exactly.

    A state saved by an older ferry (``{"generator", "sampler"}``) restores the generator and the sampler.

    Raises:
        CheckpointError: ``saved`` is not a DataLoader's state.
    """
    instrument(loader)
    if not isinstance(saved, Mapping) or not ("format" in saved or "generator" in saved):
        raise CheckpointError(
            f"checkpoint {where!r} did not save a DataLoader under {name!r}. Restore into what was saved.", path=where
        )
    sampler = _stateful_sampler(loader)
    if saved.get("format") != FORMAT:  # the state of ferry 0.1: the generator and the sampler as they were
        if loader.generator is not None and saved.get("generator") is not None:
            loader.generator.set_state(saved["generator"].cpu())
        if sampler is not None and saved.get("sampler") is not None:
            sampler.load_state_dict(saved["sampler"])
        return
    if int(saved["version"]) > _VERSION:
        raise CheckpointError(
            f"checkpoint {where!r} saved DataLoader {name!r} with a newer ferry (state version {saved['version']}). "
            "Upgrade ferry to restore it.",
            path=where,
        )
    book: _Book = loader.__dict__["_ferry_book"]
    book.seed = int(saved["seed"])
    book.number = int(saved["pass"])
    book.complete = not saved["running"]
    book.consumed = int(saved["consumed"])
    book.seen_mid_pass = False
    if sampler is not None and saved.get("sampler") is not None:
        sampler.load_state_dict(saved["sampler"])
    if loader.generator is not None and saved.get("generator") is not None:
        loader.generator.set_state(saved["generator"].cpu())
    if saved["running"]:
        draws = _Draws(**{key: None if saved.get(key) is None else saved[key].cpu() for key in _DRAW_KEYS})
        book.resume = _Resume(number=int(saved["pass"]), consumed=int(saved["consumed"]), draws=draws)
