"""Moving tensors, nested batches, modules and optimizer state between devices, and checking where they are.

:mod:`ferry.placement.api` holds the functions, :mod:`ferry.placement.deferred` building on ``meta`` and
materialising on a device, :mod:`ferry.placement.walk` the walker that takes nested containers
apart and rebuilds them.
"""

from ferry.placement.api import DeviceReport, check_devices, module_device, offload, place, to_device
from ferry.placement.deferred import deferred_init, materialize

__all__ = [
    "DeviceReport",
    "check_devices",
    "deferred_init",
    "materialize",
    "module_device",
    "offload",
    "place",
    "to_device",
]
