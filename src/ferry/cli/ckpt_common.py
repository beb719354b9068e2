"""What the ``ferry ckpt`` subcommands share for people: sizes in bytes, and a rich progress bar."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ferry.checkpoint.tools import Meter

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["PROGRESS_FROM", "human_bytes", "meter"]

#: Work over this many bytes gets a progress bar (when stderr is a terminal).
PROGRESS_FROM = 256 << 20


def human_bytes(size: int) -> str:
    """``size`` in bytes for people: ``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:,.1f} {unit}"


@contextlib.contextmanager
def meter(
    total: int, description: str, console: Console | None = None, *, threshold: int = PROGRESS_FROM
) -> Iterator[Meter]:
    """A rich progress bar on stderr over ``total`` bytes when ``total >= threshold`` and stderr is a terminal.

    Args:
        total: Bytes of work.
        description: What the bar says at first.
        console: Where to draw it (default: a stderr console).
        threshold: Below this many bytes, no bar.
    """
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    console = console or Console(stderr=True)
    if total < threshold or not console.is_terminal:
        yield Meter()
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield Meter(
            lambda nbytes: bar.advance(task, nbytes),
            lambda text: bar.update(task, description=text),
        )
