"""The training run: :class:`~ferry.checkpoint.run.checkpointer.Checkpointer` and what only it needs.

Step folders of a run directory, retention and scanning (``folders``), the commit (``commit``), one writer per
directory (``lock``), deletion off the save path (``pruning``), copies for async saves (``snapshot``), RNG states
(``rng``), what is saved in place (``saveable``) and reading a folder back into live objects (``restore``).
"""

from ferry.checkpoint.run.checkpointer import Checkpointer

__all__ = ["Checkpointer"]
