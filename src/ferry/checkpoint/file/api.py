"""The ferry file format: ``save``, ``load`` and ``verify``.

A ferry file is a safetensors file (any safetensors reader opens it; each tensor is stored under its path in the
saved structure, e.g. ``model/layer.weight``) whose ``__metadata__`` also holds the structure itself as JSON (so
dicts with int keys, tuples, OrderedDicts and plain values such as ``inf`` come back exactly), a checksum of every
tensor (XXH3-64; CRC-32 in files from earlier versions, which still load and verify), and a checksum of the header.
No pickle is involved. The byte layout is in ``layout.py`` (written by ``writer.py``, read by ``reader.py``), the
structure encoding in ``tree.py``, ``torch.save`` files in ``torch_save.py``, telling them apart in ``kinds.py``.

Writes are atomic and durable: a temporary file in the same folder, fsync, ``os.replace``, fsync of the folder.
A crash at any moment leaves the previous file or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast

import torch

from ferry._remote import is_url, open_remote, upload
from ferry._remote_path import RemotePath, remote_path
from ferry.checkpoint.file import layout, reader, tree, writer
from ferry.checkpoint.file import torch_save as legacy
from ferry.checkpoint.file.kinds import SNIFF_BYTES, foreign_kind, torch_save_kind
from ferry.checkpoint.file.layout import Blob
from ferry.devices import DeviceLike, resolve_device
from ferry.errors import ArgumentError, CheckpointError, CorruptCheckpointError

__all__ = ["as_path", "load", "open_any", "open_file", "save", "save_tensors", "verify"]

#: How many leading bytes are read to tell the kinds of file apart.
_SNIFF = SNIFF_BYTES


def save(
    obj: object, path: str | os.PathLike[str] | RemotePath, *, storage_options: Mapping[str, Any] | None = None
) -> None:
    """Write ``obj`` to ``path`` as one safetensors file, atomically and durably; mirrors ``torch.save(obj, f)``.

    Tensors are stored once per storage (tied weights stay tied), contiguous, in their own dtype; tensors on an
    accelerator are copied to the CPU one at a time while writing. A contiguous CPU tensor is written straight
    from its memory, without a copy. ``nn.Parameter`` values come back as parameters (with their
    ``requires_grad``); other tensors come back detached, like a ``state_dict``. The file is first written under
    a temporary name in the same folder, fsynced, renamed over ``path`` and the folder fsynced: if anything fails
    (or the process dies) ``path`` keeps what it held before, and a failed save removes its temporary file.

    Args:
        obj: A tensor, or any nesting of dict, ``OrderedDict``, list and tuple holding tensors and plain values
            (None, bool, int, float including inf and nan, str; also ``torch.Size``, ``torch.dtype``,
            ``torch.device``). Dict keys may be str, int, bool, float or None: e.g. a model and optimizer
            ``state_dict``. Tensors may be on any device except ``meta``, in any dtype safetensors stores (F64,
            F32, F16, BF16, F8_*, F4, C64, I64..I8, U64..U8, BOOL).
        path: The file to write; its folder must exist. Or a URL of object storage or another fsspec file system
            (``"s3://bucket/run/model.safetensors"``, ``gs://``, ``az://``, ``memory://``): the file is uploaded as
            one object, which appears complete or not at all (one PUT, or a multipart upload completed after the
            last byte and aborted on any error), so the object that was there before stays intact when a save
            fails. The tensors are checksummed first, then streamed; no copy of the whole state is made.
        storage_options: For a URL: passed to its fsspec file system (for ``s3://``, e.g. ``{"key": ...,
            "secret": ..., "client_kwargs": {"endpoint_url": "http://127.0.0.1:8333"}}``); ``pip install
            "ferry[s3]"`` brings ``s3fs``. Not allowed with a local path.

    Raises:
        ArgumentError: ``path`` is not a ``str`` or ``os.PathLike`` (e.g. a file object, or the arguments swapped),
            or ``storage_options`` is given with a local path.
        CheckpointError: a value that is not a tensor or plain value (the message gives its path in ``obj`` and
            the conversion to make), a tensor on ``meta`` or of an unsupported kind or dtype, or a file-system
            failure (missing folder, full disk, permissions; ``path`` is then unchanged); for a URL, also wrong
            credentials, a missing bucket, no permission, a throttled or unreachable server (each message names
            the fix; the object at ``path`` is then unchanged).

    Example:
        >>> import tempfile, torch, ferry
        >>> folder = tempfile.mkdtemp()
        >>> ferry.save({"step": 3, "weight": torch.ones(2)}, f"{folder}/ckpt.safetensors")
        >>> ferry.load(f"{folder}/ckpt.safetensors")
        {'step': 3, 'weight': tensor([1., 1.])}
    """
    path, storage_options = remote_path(path, storage_options)
    if is_url(path):
        url = str(path)
        encoded = tree.encode(obj, _shown(url))
        upload(url, storage_options, lambda stream: writer.write_stream(stream, url, encoded.tree_json, encoded.blobs))
        return
    target = as_path(path, "save", obj)
    _local_only(path, storage_options, "save")
    encoded = tree.encode(obj, target)
    try:
        writer.write_file(target, encoded.tree_json, encoded.blobs)
    except OSError as err:
        raise _write_error(target, err) from err


def save_tensors(target: RemotePath, tree_json: str, blobs: Sequence[Blob]) -> None:
    """Upload a ferry file made of an encoded tree and its tensors as one object (see :func:`save` for URLs).

    Raises:
        CheckpointError: as :func:`save` for a URL.
    """
    upload(target.url, target.storage_options, lambda stream: writer.write_stream(stream, target.url, tree_json, blobs))


def load(
    path: str | os.PathLike[str] | RemotePath,
    *,
    device: DeviceLike = "cpu",
    trusted: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """Read a checkpoint, verifying it, with every tensor on ``device``; mirrors ``torch.load(f, map_location=)``.

    Reads ferry files (every checksum is verified), plain safetensors files (returned as a flat dict name ->
    tensor) and ``torch.save`` files (zip or legacy pickle, detected by content), the latter through torch's
    restricted unpickler. Tensors come back on ``device`` whatever device they were saved from, so a file saved
    on a GPU loads on a machine without one.

    Args:
        path: The file, or a URL (``"s3://bucket/run/model.safetensors"``; see :func:`save`): its byte ranges are
            fetched several at once, and every byte is verified against its checksum as for a local file.
        device: Where to put the tensors (``"cpu"``, ``"cuda:1"``, ``"meta"``, ...), like ``map_location``.
        trusted: Only for ``torch.save`` files whose origin you trust: run their pickle unrestricted
            (``weights_only=False``), which can execute any code the file contains.
        storage_options: For a URL: passed to its fsspec file system (see :func:`save`).

    Returns:
        The saved object: same containers, key types, plain values and tensor sharing as when saved.

    Raises:
        CorruptCheckpointError: the file is truncated, fails a checksum (the message names the tensor and both
            checksums), or is not a checkpoint at all (empty, junk, another kind of file).
        UnsafeCheckpointError: a pickle that would run code (the message names the global); see ``trusted``.
        CheckpointError: the file is missing or unreadable, is a TorchScript archive (use ``torch.jit.load``), or
            was written by a newer ferry.
        DeviceError: ``device`` does not exist on this machine.
        ArgumentError: ``path`` is not a ``str`` or ``os.PathLike`` (e.g. an open file object).
    """
    opened: contextlib.AbstractContextManager[tuple[BinaryIO, int]]
    path, storage_options = remote_path(path, storage_options)
    if is_url(path):
        file = _shown(str(path))
        opened = cast(Any, open_remote(str(path), storage_options))
    else:
        file = as_path(path, "load")
        _local_only(path, storage_options, "load")
        opened = open_file(file)
    target_device = resolve_device(device)
    with opened as (handle, size):
        head = handle.read(_SNIFF)
        if layout.looks_like_safetensors(head):
            return _load_safetensors(handle, file, size, target_device)
        kind = torch_save_kind(head)
        if kind is not None:
            return legacy.load_torch_file(handle, file, kind, target_device, trusted)
        raise _not_a_checkpoint(file, head, size)


def verify(path: str | os.PathLike[str] | RemotePath, *, storage_options: Mapping[str, Any] | None = None) -> None:
    """Check a checkpoint without building it: header, offsets, size and every checksum, streaming the file.

    For plain safetensors files (no ferry checksums) the header, offsets and size are checked. For ``torch.save``
    zip files the CRC-32 of every entry is checked; a legacy pickle is checked by loading it on the CPU.

    Raises:
        CorruptCheckpointError: as :func:`load` (names the file, the tensor, the expected and computed checksum).
        CheckpointError: the file is missing or unreadable, a TorchScript archive, or from a newer ferry.
        UnsafeCheckpointError: a legacy pickle that would run code.
        ArgumentError: ``path`` is not a ``str`` or ``os.PathLike`` (e.g. an open file object).
    """
    opened: contextlib.AbstractContextManager[tuple[BinaryIO, int]]
    path, storage_options = remote_path(path, storage_options)
    if is_url(path):
        file = _shown(str(path))
        opened = cast(Any, open_remote(str(path), storage_options))
    else:
        file = as_path(path, "verify")
        _local_only(path, storage_options, "verify")
        opened = open_file(file)
    with opened as (handle, size):
        head = handle.read(_SNIFF)
        if layout.looks_like_safetensors(head):
            header = reader.read_header(handle, file, size)
            if header.is_ferry:
                tree.decode(header.metadata[layout.TREE_KEY], _numels(header), None, file)
            reader.verify_data(handle, header)
            return
        kind = torch_save_kind(head)
        if kind is None:
            raise _not_a_checkpoint(file, head, size)
        legacy.verify_torch_file(handle, file, kind)


def as_path(path: object, function: str, obj: object = None) -> Path:
    """``path`` as a Path, or an ArgumentError that says what was passed instead and what to pass."""
    if isinstance(path, str) and not path:
        signature = "ferry.save(obj, path)" if function == "save" else f"ferry.{function}(path)"
        raise ArgumentError(f'{signature} got an empty path (""). Pass a name, e.g. "checkpoints/model.safetensors".')
    if isinstance(path, (str, os.PathLike)):
        with contextlib.suppress(TypeError):  # an os.PathLike whose __fspath__ returns bytes
            return Path(path)
    got = f"{type(path).__module__}.{type(path).__qualname__}".removeprefix("builtins.")
    shown = repr(path)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    signature = "ferry.save(obj, path)" if function == "save" else f"ferry.{function}(path)"
    kind = "a file or checkpoint folder path" if "verify" in function else "a file path"
    if function == "save" and isinstance(obj, (str, os.PathLike)):
        why = (
            f"The arguments look swapped: {signature} takes the object first and the file second, like "
            f"torch.save(obj, f). Call ferry.save(obj, {str(os.fspath(obj))!r})"
        )
    elif hasattr(path, "read") or hasattr(path, "write"):
        why = (
            "ferry reads and writes files by name, not through file objects (a save renames a finished temporary "
            "file into place, which needs the name). Pass the file's path as a str or pathlib.Path"
        )
    elif path is None and "verify" in function:
        why = (
            "Checkpointer.latest() returns None while a run has no checkpoint yet: check for None before verifying; "
            'pass the path as a str or pathlib.Path, e.g. "runs/a" or "checkpoints/model.safetensors"'
        )
    else:
        why = 'Pass the path as a str or pathlib.Path, e.g. "checkpoints/model.safetensors"'
    raise ArgumentError(f"{signature} needs {kind} (str or os.PathLike), but path is a {got}: {shown}. {why}.")


def _shown(url: str) -> Path:
    """A URL where the file layer takes a ``Path`` only to name the file in messages (``str()`` of it)."""
    return cast(Path, url)


def _local_only(path: object, storage_options: Mapping[str, Any] | None, function: str) -> None:
    if storage_options is not None:
        raise ArgumentError(
            f"ferry.{function}({str(path)!r}, storage_options=...) got storage options for a local path: they are "
            "for URLs of object storage (s3://bucket/key, gs://..., memory://...). Drop storage_options, or pass "
            "the object's URL."
        )


def _numels(header: layout.Header) -> dict[str, int]:
    numels = {}
    for entry in header.entries:
        count = 1
        for dim in entry.shape:
            count *= dim
        numels[entry.name] = count
    return numels


def _load_safetensors(handle: BinaryIO, file: Path, size: int, device: torch.device) -> Any:
    header = reader.read_header(handle, file, size)
    if header.is_ferry:  # check the tree before reading gigabytes of data
        tree.decode(header.metadata[layout.TREE_KEY], _numels(header), None, file)
    tensors = reader.read_tensors(handle, header)
    if device.type != "cpu":
        tensors = {name: tensor.to(device) for name, tensor in tensors.items()}
    if not header.is_ferry:
        return tensors
    return tree.decode(header.metadata[layout.TREE_KEY], _numels(header), tensors, file)


def open_any(file: Path | RemotePath) -> contextlib.AbstractContextManager[tuple[BinaryIO, int]]:
    """:func:`open_file` for a local file, :func:`ferry._remote.open_remote` for a remote one (ranged reads)."""
    if isinstance(file, RemotePath):
        opened: contextlib.AbstractContextManager[tuple[BinaryIO, int]] = cast(
            Any, open_remote(file.url, file.storage_options)
        )
        return opened
    return open_file(file)


@contextlib.contextmanager
def open_file(file: Path) -> Iterator[tuple[BinaryIO, int]]:
    """Open ``file`` for reading and yield ``(handle, size in bytes)``; OS errors become CheckpointError."""
    try:
        handle = open(file, "rb")  # noqa: SIM115 - closed below; the with block must not catch the body's errors
        size = os.fstat(handle.fileno()).st_size
    except FileNotFoundError as err:
        raise CheckpointError(
            f"no checkpoint at {str(file)!r}: the file does not exist (working directory {os.getcwd()!r}). "
            "Check the path; a Checkpointer folder is opened with the Checkpointer, not ferry.load.",
            path=file,
        ) from err
    except IsADirectoryError as err:
        raise CheckpointError(
            f"{str(file)!r} is a folder, not a checkpoint file. Pass the path of a file inside it.", path=file
        ) from err
    except OSError as err:
        raise CheckpointError(
            f"cannot open {str(file)!r}: {err.strerror or err}. Check that the file is readable by this user.",
            path=file,
        ) from err
    with handle:
        try:
            yield handle, size
        except OSError as err:
            raise CheckpointError(
                f"reading {str(file)!r} failed: {err.strerror or err}. The disk or network file system returned "
                "an error; check it, then retry.",
                path=file,
            ) from err


def _write_error(file: Path, err: OSError) -> CheckpointError:
    kept = "Nothing was changed at that path"
    if isinstance(err, FileNotFoundError) and not file.parent.is_dir():
        what = f"the folder {str(file.parent)!r} does not exist"
        fix = f"Create it first: Path({str(file.parent)!r}).mkdir(parents=True, exist_ok=True)"
    elif isinstance(err, IsADirectoryError) or file.is_dir():
        what = "that path is a folder"
        fix = "Save to a file name inside it"
    elif err.errno in (errno.ENOSPC, errno.EDQUOT):
        what = f"the disk is full ({err.strerror})"
        fix = "Free space (e.g. delete old checkpoints) or save to another disk"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = f"permission denied ({err.strerror})"
        fix = "Save to a folder this user can write to"
    else:
        what = f"{type(err).__name__}: {err.strerror or err}"
        fix = "Check the disk and the folder, then retry"
    return CheckpointError(f"cannot save to {str(file)!r}: {what}. {kept}. {fix}.", path=file)


def _not_a_checkpoint(file: Path, head: bytes, size: int) -> CorruptCheckpointError:
    if size == 0:
        return CorruptCheckpointError(
            f"checkpoint {str(file)!r} is corrupt: the file is empty (0 bytes); a crash during an in-place write "
            "or a failed copy leaves this. Restore the file from a copy, or load an earlier checkpoint.",
            path=file,
        )
    if size < 9 and foreign_kind(head) is None:
        return CorruptCheckpointError(
            f"checkpoint {str(file)!r} is corrupt: the file is {size} bytes, too short for any checkpoint: "
            "truncated. Restore the file from a copy, or load an earlier checkpoint.",
            path=file,
        )
    kind = foreign_kind(head)
    looks = f", it looks like {kind}" if kind else ""
    return CorruptCheckpointError(
        f"{str(file)!r} is not a checkpoint{looks}: its {size} bytes start with {head[:16]!r}, which is neither a "
        "safetensors file nor a torch.save zip or pickle. Check the path: ferry.load reads files written by "
        "ferry.save, safetensors and torch.save.",
        path=file,
    )
