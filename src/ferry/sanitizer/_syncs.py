"""Host-device synchronisations: reading an accelerator tensor's value on the host blocks until the device is done.

``.item()``, ``.tolist()``, ``.numpy()``, ``.cpu()``, ``bool(t)`` (``if loss < best:``) and printing or formatting
a tensor each wait for every queued kernel, so one per training step stalls the pipeline. They are counted per line
of the user's code and the busiest lines printed at the end.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import TextIO

import torch

from ferry.sanitizer._frames import SourceLine

#: Tensor methods that copy the value to the host and so wait for the device.
SYNC_METHODS = frozenset(
    getattr(torch.Tensor, name)
    for name in "item tolist numpy cpu __bool__ __repr__ __str__ __format__ __float__ __int__ __index__".split()
)


def is_accelerator(device: torch.device) -> bool:
    """The default test for "a device the host has to wait for": anything but ``cpu`` and ``meta``."""
    return device.type not in ("cpu", "meta")


AcceleratorTest = Callable[[torch.device], bool]


def print_host_syncs(counts: Counter[SourceLine], *, top: int = 10, file: TextIO | None = None) -> None:
    """Print the ``top`` lines with the most host syncs, busiest first, as plain lines (to stderr by default)."""
    if not counts:
        return
    out = sys.stderr if file is None else file
    total = sum(counts.values())
    print(f"ferry sanitize: {total} host-device synchronisation(s) on {len(counts)} line(s):", file=out)
    for where, count in counts.most_common(top):
        print(f"  {count:>8}  {where}  {where.text}", file=out)
    if len(counts) > top:
        print(f"  ... and {len(counts) - top} more line(s)", file=out)
    print(
        "  Each one waits for the device. Keep values on the device (accumulate `total += loss.detach()`) and read "
        "them with .item() only when logging.",
        file=out,
    )
