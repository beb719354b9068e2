"""Moving tensors, batches, modules and optimizer state between devices (placeholder, being written)."""
# ruff: noqa
from typing import Any
DeviceReport: Any = None
def to_device(obj: Any, device: Any, *, dtype: Any = None, non_blocking: bool = False) -> Any: raise NotImplementedError
def module_device(module: Any) -> Any: raise NotImplementedError
def place(module: Any, device: Any, *, optimizer: Any = None, dtype: Any = None) -> Any: raise NotImplementedError
def offload(module: Any) -> Any: raise NotImplementedError
def check_devices(module: Any, *args: Any, **kwargs: Any) -> Any: raise NotImplementedError
