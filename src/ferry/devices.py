"""Choosing and describing devices.

(First version: ``resolve_device`` only; ``pick_device`` and ``describe_devices`` are being written.)
"""

from __future__ import annotations

from typing import TypeAlias

import torch

from ferry.errors import DeviceError

DeviceLike: TypeAlias = "str | int | torch.device"

__all__ = ["DeviceLike", "resolve_device"]


def resolve_device(spec: DeviceLike) -> torch.device:
    """Return ``spec`` as a canonical ``torch.device`` that this machine can serve.

    Indexed device types always come back with an index (``cuda`` becomes ``cuda:0``), so two canonical devices
    compare equal exactly when they are the same device (``torch.device("cuda") != torch.device("cuda:0")``).
    ``meta`` and ``cpu`` are always accepted. Does not initialise CUDA.

    Args:
        spec: ``"cuda:1"``, ``"cpu"``, ``"meta"``, an int (an accelerator index) or a ``torch.device``.

    Returns:
        The canonical device.

    Raises:
        DeviceError: ``spec`` is malformed or names a device this machine lacks; the message lists those it has.
    """
    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError) as err:
        raise DeviceError(f"{spec!r} is not a device spec: {err}.", requested=spec) from None
    if device.type in ("cpu", "meta"):
        return torch.device(device.type)
    if device.type == "cuda":
        count = torch.cuda.device_count()
        index = 0 if device.index is None else device.index
        if index >= count:
            raise DeviceError(
                f"device {str(device)!r} is not available: this machine has {count} CUDA device(s).",
                requested=spec,
            )
        return torch.device("cuda", index)
    return device


# placeholders until the devices module is complete
DeviceRecord = None
def pick_device(spec=None): raise NotImplementedError  # type: ignore
def describe_devices(): raise NotImplementedError  # type: ignore
