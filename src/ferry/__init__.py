"""ferry: every model and tensor on the right device, and no training run ever lost.

The public API at a glance; see README.md for a quickstart.
"""

from ferry import distributed as distributed  # the submodule ferry.distributed (not in __all__)
from ferry.checkpoint.checkpointer import Checkpointer
from ferry.checkpoint.format import load, save, verify
from ferry.checkpoint.state_dict import LoadReport, load_state_dict
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
from ferry.placement import DeviceReport, check_devices, module_device, offload, place, to_device
from ferry.sampler import ResumableSampler
from ferry.sanitize import _from_environment, sanitize

__version__ = "0.1.0"

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
    "LoadReport",
    "MixedDeviceError",
    "PlacementWarning",
    "ResumableSampler",
    "SanitizerWarning",
    "StateDictMismatchError",
    "UnsafeCheckpointError",
    "__version__",
    "check_devices",
    "describe_devices",
    "load",
    "load_state_dict",
    "module_device",
    "offload",
    "pick_device",
    "place",
    "sanitize",
    "save",
    "to_device",
    "verify",
]

# FERRY_SANITIZE=1: the runtime checks for the whole process (a no-op, and no import of torch internals, unset)
_from_environment()
