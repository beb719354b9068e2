"""One memo with a recursion guard, for the analyses that answer questions about the nodes of one file.

Every analysis of the linter asks recursive questions ("what kind is this name?" leads to "what kind is the value
it was bound to?"), and the answers of a file are asked for many times by many rules. :class:`Memo` keeps each
answer, and answers ``cycle`` (the analysis's "don't know") to a question asked again while it is being answered,
so a name bound to itself (``x = x + 1``) ends instead of recursing. An answer given while a cycle was cut is still
kept: the question is asked again only if a rule asks it through another path first.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Memo"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(Generic[K, V]):
    """``compute(key)`` once per key; ``cycle`` for a key asked again while it is computed, or past ``max_depth``.

    Args:
        compute: The analysis's own answer for one key (it may ask the memo again for other keys).
        cycle: The answer for a key already being computed (the analysis's "unknown").
        max_depth: How many questions may be open at once; beyond it ``cycle`` is answered and not kept, so a
            shallower question may still answer it. ``None``: no limit besides the cycle guard.
    """

    def __init__(self, compute: Callable[[K], V], cycle: V, max_depth: int | None = None) -> None:
        self._compute = compute
        self._cycle = cycle
        self._max_depth = max_depth
        self._known: dict[K, V] = {}
        self._open: set[K] = set()

    def __call__(self, key: K) -> V:
        """The answer for ``key``."""
        if key in self._known:
            return self._known[key]
        if key in self._open or (self._max_depth is not None and len(self._open) >= self._max_depth):
            return self._cycle
        self._open.add(key)
        try:
            found = self._compute(key)
        finally:
            self._open.discard(key)
        self._known[key] = found
        return found

    def __contains__(self, key: object) -> bool:
        """Whether an answer for ``key`` is kept."""
        return key in self._known
