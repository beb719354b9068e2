"""Every error and warning ferry raises.

The tree::

    FerryError                      base of everything ferry raises
    ├── ArgumentError               a call with an argument of the wrong kind (also a TypeError and ValueError)
    ├── DeviceError                 a device this machine cannot serve, or tensors on the wrong device
    │   ├── MixedDeviceError        one module's parameters/buffers live on several devices
    │   └── DeviceMismatchError     parameters, buffers or inputs not on the module's device
    ├── CheckpointError             a checkpoint cannot be written, found or restored
    │   ├── CorruptCheckpointError  a file is truncated, bit-flipped, or not a checkpoint at all
    │   └── UnsafeCheckpointError   a pickle that needs arbitrary code to load (opt in with ``trusted=True``)
    ├── StateDictMismatchError      ``load_state_dict`` found missing, unexpected or mis-shaped keys
    ├── InitializationError         ``materialize`` would leave parameters or buffers uninitialised (garbage)
    └── DistributedError            a torchrun environment that is incomplete or contradicts itself

    FerryWarning (UserWarning)
    ├── PlacementWarning            something a move leaves behind (plain tensor attributes)
    ├── CheckpointWarning           a checkpoint skipped or a resume that may not be exact
    └── SanitizerWarning            a runtime check of ``ferry.sanitize`` found a device bug

Every message says what happened (with the values), why, and the exact fix. Errors carry structured fields so
programs can act on them without parsing the message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ferry.checkpoint.state_dict import LoadReport

__all__ = [
    "ArgumentError",
    "CheckpointError",
    "CheckpointWarning",
    "CorruptCheckpointError",
    "DeviceError",
    "DeviceMismatchError",
    "DistributedError",
    "FerryError",
    "FerryWarning",
    "InitializationError",
    "MixedDeviceError",
    "PlacementWarning",
    "SanitizerWarning",
    "StateDictMismatchError",
    "UnsafeCheckpointError",
]


class FerryError(Exception):
    """Base class of every error ferry raises; ``except ferry.FerryError`` catches them all.

    Attributes:
        cli_message: The same message with the fix in the words of the ``ferry`` command line (``--trusted``
            instead of ``trusted=True``), where the two differ; ``None`` otherwise. The CLI prints :meth:`for_cli`.
    """

    def __init__(self, *args: object, cli_message: str | None = None) -> None:
        super().__init__(*args)
        self.cli_message = cli_message

    def for_cli(self) -> str:
        """The message as a command-line user should read it."""
        return self.cli_message or str(self)


class ArgumentError(FerryError, TypeError, ValueError):
    """A ferry function was called with an argument of the wrong type or value (e.g. a tensor where a module goes).

    Also a ``TypeError`` and a ``ValueError``, so code that catches the built-in errors keeps working.
    """


class DeviceError(FerryError):
    """A device that this machine cannot serve was asked for, or tensors are on the wrong device.

    Attributes:
        requested: The device spec that was asked for, as given (``None`` when not applicable).
        available: The devices this machine does have, as strings (``["cpu", "cuda:0"]``).
    """

    def __init__(self, message: str, *, requested: object = None, available: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.requested = requested
        self.available = list(available)


class InitializationError(FerryError):
    """Tensors of a module would be left holding whatever memory happened to contain (``to_empty`` garbage).

    Raised by :func:`ferry.materialize` and :func:`ferry.load_state_dict` for a module built on ``meta`` when
    neither a recorded construction (``ferry.deferred_init``), nor ``reset_parameters()``, nor the ``init``
    function, nor the checkpoint wrote some of its parameters or buffers. Nothing is returned half-initialised.

    Attributes:
        names: Dotted names of every such tensor (``"layers.0.rope.inv_freq"``), in the module's order.
        kinds: The kind of each, in the same order: ``"parameter"``, ``"buffer"``, ``"non-persistent buffer"`` or
            ``"tensor attribute"``.
    """

    def __init__(self, message: str, *, names: Sequence[str] = (), kinds: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.names = list(names)
        self.kinds = list(kinds)


class MixedDeviceError(DeviceError):
    """A module's parameters and buffers live on more than one device.

    Attributes:
        devices: Each device (as a string) mapped to the dotted names of the tensors on it.
    """

    def __init__(self, message: str, *, devices: Mapping[str, Sequence[str]]) -> None:
        super().__init__(message)
        self.devices = {device: list(names) for device, names in devices.items()}


class DeviceMismatchError(DeviceError):
    """Tensors that should share a device do not.

    Attributes:
        mismatches: ``(name, device)`` pairs, one per tensor not on the expected device.
        expected: The device they should be on, as a string.
        operation: The torch operation that got them (``"torch.nn.functional.linear"``), when the runtime sanitizer
            raised; else ``None``.
        arguments: ``(name, device, shape, dtype)`` of every tensor argument of ``operation`` (strings, shape as a
            tuple), in order; empty when not raised by the sanitizer.
        location: ``"file:line"`` of the user's code that ran the operation, or ``None``.
        source: The text of that line, stripped, or ``None``.
        module_path: Dotted path of the module whose forward was running (``"encoder.layers.3.attn"``; ``""`` for
            the root module), or ``None`` outside any forward.
        fix: The code that fixes it (``"labels = labels.to(outputs.device)"``), or ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        mismatches: Sequence[tuple[str, str]] = (),
        expected: str | None = None,
        operation: str | None = None,
        arguments: Sequence[tuple[str, str, tuple[int, ...], str]] = (),
        location: str | None = None,
        source: str | None = None,
        module_path: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.mismatches = list(mismatches)
        self.expected = expected
        self.operation = operation
        self.arguments = list(arguments)
        self.location = location
        self.source = source
        self.module_path = module_path
        self.fix = fix


class _HasUrl(Protocol):
    """A remote location: what has a ``url`` (``ferry._remote_path.RemotePath``)."""

    @property
    def url(self) -> str: ...


class CheckpointError(FerryError):
    """A checkpoint cannot be written, found or restored.

    Attributes:
        path: The local file or folder concerned, when there is one.
        url: The remote object or folder concerned (``s3://bucket/run/...``), when there is one.
    """

    def __init__(
        self, message: str, *, path: str | os.PathLike[str] | _HasUrl | None = None, cli_message: str | None = None
    ) -> None:
        super().__init__(message, cli_message=cli_message)
        if path is not None and not isinstance(path, (str, os.PathLike)):
            path = path.url  # a remote folder or object (ferry._remote_path.RemotePath)
        remote = isinstance(path, str) and "://" in path and not path.startswith("file://")
        self.url: str | None = path if remote else None  # type: ignore[assignment]
        self.path = Path(path) if path is not None and not remote else None


class CorruptCheckpointError(CheckpointError):
    """A file is truncated, corrupted (checksum mismatch) or not a checkpoint at all."""


class UnsafeCheckpointError(CheckpointError):
    """A pickled checkpoint needs arbitrary code to load; ``trusted=True`` is the explicit opt-in."""


class StateDictMismatchError(FerryError):
    """A state_dict does not fit a module: missing, unexpected or shape-mismatched keys.

    Attributes:
        report: The full :class:`ferry.LoadReport` (``missing``, ``unexpected``, ``mismatched``, suggestions).
    """

    def __init__(self, message: str, *, report: LoadReport) -> None:
        super().__init__(message)
        self.report = report


class DistributedError(FerryError):
    """The launcher's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``...) is incomplete or contradicts itself.

    Attributes:
        variables: The launcher variables as this process saw them (name to value; unset ones are absent).
    """

    def __init__(self, message: str, *, variables: Mapping[str, str]) -> None:
        super().__init__(message)
        self.variables = dict(variables)


class FerryWarning(UserWarning):
    """Base class of every warning ferry issues."""


class PlacementWarning(FerryWarning):
    """A move left something behind, e.g. plain tensor attributes that ``Module.to`` does not move."""


class CheckpointWarning(FerryWarning):
    """A checkpoint was skipped (does not verify) or a resume may not be exact; the message names the folder."""


class SanitizerWarning(FerryWarning):
    """A runtime check of :func:`ferry.sanitize` found a device bug (a discarded move, a CPU tensor built in a forward).

    Issued at the user's line, so the warning filters and the printed location point at the code to fix.
    """
