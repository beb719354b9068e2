"""Deprecated alias of :mod:`ferry.checkpoint.sharded.storage` (ferry's DCP storage), kept for one release."""

from __future__ import annotations

import warnings

from ferry.checkpoint.sharded.storage import *  # noqa: F403  (the alias re-exports the module's public names)
from ferry.checkpoint.sharded.storage import __all__ as __all__

warnings.warn(
    "ferry.checkpoint.dcp is deprecated and will be removed in the next release: import ferry's DCP storage from "
    "ferry.checkpoint.sharded (e.g. `from ferry.checkpoint.sharded import FerryStorageWriter`).",
    DeprecationWarning,
    stacklevel=2,
)
