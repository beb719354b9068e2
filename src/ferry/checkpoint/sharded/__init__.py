"""Sharded checkpoints through ``torch.distributed.checkpoint`` (DCP): the only part of ferry that imports it.

``ranks`` holds the exchanges between ranks and the sharded save of a step folder; ``storage`` ferry's DCP storage
writer, reader and planners (safetensors files and JSON, no pickle); ``metadata`` DCP's metadata as JSON
(``shards.json``); ``consolidate`` loads a sharded folder whole in one process. DCP itself is imported only when a
sharded checkpoint is saved or read: the storage classes below are resolved on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ferry.checkpoint.sharded.storage import (
        FerryLoadPlanner,
        FerrySavePlanner,
        FerryStorageReader,
        FerryStorageWriter,
    )

__all__ = ["FerryLoadPlanner", "FerrySavePlanner", "FerryStorageReader", "FerryStorageWriter"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("ferry.checkpoint.sharded.storage"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
