"""What the ``ferry ckpt`` subcommands share for people: sizes in bytes, and a rich progress bar."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ferry._remote import is_url
from ferry.checkpoint.tools import Meter
from ferry.errors import ArgumentError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["PROGRESS_FROM", "human_bytes", "meter", "storage_options"]

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


def storage_options(args: argparse.Namespace, *paths: str) -> dict[str, Any] | None:
    """``--storage-options JSON`` as a dict; a usage error naming the flag when it is not a JSON object.

    Raises:
        ArgumentError: not a JSON object, or none of ``paths`` (the command's path arguments) is a URL.
    """
    text = getattr(args, "storage_options", None)
    if text is None:
        return None
    if not any(is_url(path) for path in paths):
        shown = " and ".join(repr(path) for path in paths)
        raise ArgumentError(
            f"--storage-options is for URLs of object storage (s3://bucket/key), but {shown} "
            f"{'is a local path' if len(paths) == 1 else 'are local paths'}. Drop --storage-options, or pass the URL."
        )
    try:
        options = json.loads(text)
    except json.JSONDecodeError as err:
        # the text is not shown: it may hold a secret
        raise ArgumentError(
            f"--storage-options is not JSON ({err.msg} at character {err.pos} of {len(text)}). Pass an object, e.g. "
            '--storage-options \'{"key": "...", "secret": "...", "client_kwargs": {"endpoint_url": '
            '"http://127.0.0.1:8333"}}\''
        ) from None
    if not isinstance(options, dict):
        raise ArgumentError(
            f"--storage-options must be a JSON object of fsspec options, got a JSON {type(options).__name__}. Pass "
            '--storage-options \'{"key": "...", "secret": "..."}\''
        )
    return options
