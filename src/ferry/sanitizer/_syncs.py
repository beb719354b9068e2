"""Host-device synchronisations: reading an accelerator tensor's value on the host blocks until the device is done.

``.item()``, ``.tolist()``, ``.numpy()``, ``.cpu()``, ``bool(t)`` (``if loss < best:``) and printing or formatting
a tensor each wait for every queued kernel, so one per training step stalls the pipeline; so do operations whose
result's size depends on the values (``nonzero``, ``masked_select``, ``unique``, indexing with a boolean mask
``sim[~mask]``), which read that size on the host. They are counted per line
of the user's code; at the end, the lines that sync at every training step (or, without an optimizer, the busiest
lines) are printed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

import torch

if TYPE_CHECKING:
    from ferry.sanitizer import SanitizeReport

#: Tensor methods that copy the value to the host and so wait for the device.
SYNC_METHODS = frozenset(
    getattr(torch.Tensor, name)
    for name in "item tolist numpy cpu __bool__ __repr__ __str__ __format__ __float__ __int__ __index__".split()
)


#: Operations whose result's size depends on the values: the host reads the count from the device first.
SHAPE_SYNCS = frozenset(
    {
        torch.nonzero,
        torch.Tensor.nonzero,
        torch.argwhere,
        torch.Tensor.argwhere,
        torch.masked_select,
        torch.Tensor.masked_select,
        torch.unique,
        torch.Tensor.unique,
        torch.unique_consecutive,
        torch.Tensor.unique_consecutive,
    }
)


def bool_mask(index: object) -> bool:
    """Whether ``index`` (of ``t[index]`` or ``t[index] = v``) holds a boolean tensor: a mask, which syncs on a GPU."""
    if isinstance(index, torch.Tensor):
        return index.dtype == torch.bool and index.dim() > 0
    if isinstance(index, tuple):
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool and i.dim() > 0 for i in index)
    return False


def is_accelerator(device: torch.device) -> bool:
    """The default test for "a device the host has to wait for": anything but ``cpu`` and ``meta``."""
    return device.type not in ("cpu", "meta")


AcceleratorTest = Callable[[torch.device], bool]


def print_host_syncs(report: SanitizeReport, *, top: int = 10, file: TextIO | None = None) -> None:
    """Print the lines that synchronise the host with the device most, as plain lines (to stderr by default).

    In a training run (an optimizer stepped), only the lines that sync at every training step are listed, with
    their syncs per step: a line gated by a logging interval or run under ``no_grad`` (evaluation) is not a cost
    per step, and is left out. Without optimizer steps (inference), the ``top`` busiest lines are listed.
    """
    out = sys.stderr if file is None else file
    advice = (
        "  Each one waits for the device. Keep values on the device (accumulate `total += loss.detach()`) and read "
        "them with .item() only when logging."
    )
    if report.optimizer_steps:
        per_step = report.host_syncs_per_step()
        if not per_step:
            return
        total = sum(per_step.values())
        print(
            f"ferry sanitize: {total:g} host-device synchronisation(s) per training step on {len(per_step)} line(s) "
            f"(over {report.optimizer_steps} training step(s)):",
            file=out,
        )
        for where, rate in list(per_step.items())[:top]:
            print(f"  {rate:>8g}/step  {where}  {where.text}", file=out)
        if len(per_step) > top:
            print(f"  ... and {len(per_step) - top} more line(s)", file=out)
        print(advice, file=out)
        return
    counts = report.host_syncs
    if not counts:
        return
    total = sum(counts.values())
    print(f"ferry sanitize: {total} host-device synchronisation(s) on {len(counts)} line(s):", file=out)
    for where, count in counts.most_common(top):
        print(f"  {count:>8}  {where}  {where.text}", file=out)
    if len(counts) > top:
        print(f"  ... and {len(counts) - top} more line(s)", file=out)
    print(advice, file=out)
