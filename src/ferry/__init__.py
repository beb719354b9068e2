"""ferry: every model and tensor on the right device, and no training run ever lost.

The public API at a glance; see README.md for a quickstart. Names are imported on first use (PEP 562), so
``import ferry`` imports no torch: ``ferry lint`` and the error classes work without it, and ``ferry.save`` pays for
torch the first time it is called.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ferry import _lazy
from ferry._version import __version__

#: public name -> the module that defines it
_NAMES: dict[str, str] = {
    "Checkpointer": "ferry.checkpoint.run",
    "load": "ferry.checkpoint.file",
    "save": "ferry.checkpoint.file",
    "verify": "ferry.checkpoint.tools",
    "LoadReport": "ferry.checkpoint.state_dict",
    "load_state_dict": "ferry.checkpoint.state_dict",
    "DeviceRecord": "ferry.devices",
    "describe_devices": "ferry.devices",
    "pick_device": "ferry.devices",
    "ArgumentError": "ferry.errors",
    "CheckpointError": "ferry.errors",
    "CheckpointWarning": "ferry.errors",
    "CorruptCheckpointError": "ferry.errors",
    "DeviceError": "ferry.errors",
    "InitializationError": "ferry.errors",
    "DeviceMismatchError": "ferry.errors",
    "DistributedError": "ferry.errors",
    "FerryError": "ferry.errors",
    "FerryWarning": "ferry.errors",
    "MixedDeviceError": "ferry.errors",
    "PlacementWarning": "ferry.errors",
    "SanitizerWarning": "ferry.errors",
    "StateDictMismatchError": "ferry.errors",
    "UnsafeCheckpointError": "ferry.errors",
    "DeviceReport": "ferry.placement",
    "check_devices": "ferry.placement",
    "deferred_init": "ferry.placement",
    "materialize": "ferry.placement",
    "module_device": "ferry.placement",
    "offload": "ferry.placement",
    "place": "ferry.placement",
    "to_device": "ferry.placement",
    "ResumableSampler": "ferry.sampler",
    "sanitize": "ferry.sanitizer",
}

#: subpackages reachable as attributes without an import of their own (``ferry.distributed.init()``)
_SUBMODULES = ("checkpoint", "devices", "distributed", "errors", "lint", "placement", "sampler", "sanitizer")

__all__ = [
    "ArgumentError",
    "CheckpointError",
    "CheckpointWarning",
    "Checkpointer",
    "CorruptCheckpointError",
    "DeviceError",
    "DeviceMismatchError",
    "DeviceRecord",
    "DeviceReport",
    "DistributedError",
    "FerryError",
    "FerryWarning",
    "InitializationError",
    "LoadReport",
    "MixedDeviceError",
    "PlacementWarning",
    "ResumableSampler",
    "SanitizerWarning",
    "StateDictMismatchError",
    "UnsafeCheckpointError",
    "__version__",
    "check_devices",
    "deferred_init",
    "describe_devices",
    "load",
    "load_state_dict",
    "materialize",
    "module_device",
    "offload",
    "pick_device",
    "place",
    "sanitize",
    "save",
    "to_device",
    "verify",
]

if TYPE_CHECKING:
    from ferry import checkpoint as checkpoint
    from ferry import devices as devices
    from ferry import distributed as distributed
    from ferry import errors as errors
    from ferry import lint as lint
    from ferry import placement as placement
    from ferry import sampler as sampler
    from ferry import sanitizer as sanitizer
    from ferry.checkpoint.file import load, save
    from ferry.checkpoint.run import Checkpointer
    from ferry.checkpoint.state_dict import LoadReport, load_state_dict
    from ferry.checkpoint.tools import verify
    from ferry.devices import DeviceRecord, describe_devices, pick_device
    from ferry.errors import (
        ArgumentError,
        CheckpointError,
        CheckpointWarning,
        CorruptCheckpointError,
        DeviceError,
        DeviceMismatchError,
        DistributedError,
        FerryError,
        FerryWarning,
        MixedDeviceError,
        PlacementWarning,
        SanitizerWarning,
        StateDictMismatchError,
        UnsafeCheckpointError,
    )
    from ferry.placement import (
        DeviceReport,
        check_devices,
        deferred_init,
        materialize,
        module_device,
        offload,
        place,
        to_device,
    )
    from ferry.sampler import ResumableSampler
    from ferry.sanitizer import sanitize


def __getattr__(name: str) -> Any:
    """Import a public name's module the first time the name is used, and keep the name here."""
    if name in _NAMES:
        value = getattr(_lazy.load(_NAMES[name], f"ferry.{name}"), name)
    elif name in _SUBMODULES:
        value = _lazy.load(f"ferry.{name}", f"ferry.{name}")
    else:
        raise AttributeError(f"module 'ferry' has no attribute {name!r}")
    globals()[name] = value
    return value


#: what works without PyTorch (``ferry lint`` and the error classes)
_TORCH_FREE = ("ferry.errors", "ferry.lint")


def __dir__() -> list[str]:
    """Every public name; without PyTorch, only those that work there, so ``help(ferry)`` shows them."""
    if _lazy.torch_installed():
        return sorted({*globals(), *__all__, *_SUBMODULES})
    usable = {name for name, module in _NAMES.items() if module in _TORCH_FREE}
    return sorted({*globals(), *usable, *(name for name in _SUBMODULES if f"ferry.{name}" in _TORCH_FREE)})


# FERRY_SANITIZE=1: the runtime checks for the whole process. Unset, nothing is imported (no torch).
if os.environ.get("FERRY_SANITIZE", "") not in ("", "0"):
    _lazy.load("ferry.sanitizer", "FERRY_SANITIZE=1")._from_environment()
