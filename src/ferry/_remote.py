"""Object storage and other remote file systems, through fsspec: URLs, opening, and errors that name the fix.

A checkpoint path is remote when it is a URL with a protocol other than ``file`` (``s3://bucket/run/model.safetensors``,
``gs://...``, ``az://...``, ``memory://...`` for tests). fsspec finds the file system for the protocol (``s3fs`` for
``s3://``: ``pip install "ferry[s3]"``); ``storage_options`` go to it unchanged (``key``, ``secret``,
``client_kwargs={"endpoint_url": ...}`` for an S3-compatible server), as for ``pandas.read_csv`` and
``torch.distributed.checkpoint.FsspecWriter``.

Writes never rename (object stores have no rename: it is a copy and a delete). A single object is complete or
absent: the bytes go up in one PUT, or as a multipart upload that the server makes visible only when it is completed,
after the last byte. A failed write aborts its multipart upload (:func:`upload`), so the previous object under that
name stays as it was. A process killed during an upload leaves an incomplete multipart upload, invisible to readers;
the bucket's lifecycle rule for incomplete uploads (or ``ferry ckpt gc``) reclaims its space.

Reads fetch byte ranges (``cat_file(path, start, end)``), several at once: :class:`RemoteFile` is what the file
reader reads from.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, BinaryIO

from ferry.errors import CheckpointError

__all__ = ["RemoteFile", "is_url", "open_remote", "remote_error", "split_url", "upload"]

#: ``protocol://rest``: a URL fsspec may know (``s3``, ``gs``, ``gcs``, ``az``, ``abfs``, ``memory``, ``http``...).
_URL = re.compile(r"^(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$", re.DOTALL)
#: The package each common protocol's file system comes in, for the "install it" message.
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs"}
#: Words of errors that say the server refused the credentials or the request.
_REFUSED = ("AccessDenied", "InvalidAccessKeyId", "Signature")
#: Words of errors that say the server asked the client to slow down.
_THROTTLED = ("SlowDown", "Throttl", "TooManyRequests", "RequestLimitExceeded", "503")


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL of a remote file system (``s3://...``); ``file://`` and plain paths are local."""
    if not isinstance(path, str):
        return False
    match = _URL.match(path)
    return match is not None and match.group("protocol").lower() != "file"


def split_url(url: str) -> tuple[str, str]:
    """``("s3", "bucket/key")`` for ``"s3://bucket/key"``."""
    match = _URL.match(url)
    if match is None:
        raise ValueError(f"not a URL: {url!r}")
    return match.group("protocol").lower(), match.group("rest")


def filesystem(url: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    """The fsspec file system for ``url`` and the path on it, built with ``storage_options``.

    Raises:
        CheckpointError: fsspec, or the package of the URL's protocol, is not installed; the protocol is unknown.
    """
    protocol, _ = split_url(url)
    package = _PACKAGES.get(protocol, f"the fsspec file system for {protocol}://")
    try:
        import fsspec.core  # type: ignore[import-untyped]
    except ImportError as err:
        raise CheckpointError(
            f"cannot open {url!r}: remote paths go through fsspec, which is not installed. Install it with "
            f'`pip install "ferry[s3]"` (fsspec and s3fs) or `pip install fsspec {package}`.',
            path=url,
        ) from err
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except ImportError as err:
        raise CheckpointError(
            f"cannot open {url!r}: the file system for {protocol}:// is not installed ({err}). Install it: "
            f'`pip install "ferry[s3]"` for s3://, or `pip install {package}`.',
            path=url,
        ) from err
    except ValueError as err:
        raise CheckpointError(
            f"cannot open {url!r}: fsspec knows no file system for the protocol {protocol!r} ({err}). Check the "
            "URL's scheme (s3://, gs://, az://, memory://), or pass a local path.",
            path=url,
        ) from err
    except TypeError as err:
        raise CheckpointError(
            f"cannot open {url!r}: the {protocol}:// file system rejected "
            f"storage_options={dict(storage_options or {})!r} ({err}). Pass only options it takes (for s3://: key, "
            "secret, token, endpoint_url, client_kwargs).",
            path=url,
        ) from err
    return fs, path


def remote_error(url: str, err: BaseException, action: str) -> CheckpointError:
    """A CheckpointError for a failed ``action`` ("save", "read", ...) on ``url``, with the fix for its cause.

    Wrong credentials and missing permissions (``PermissionError``), a missing bucket or object
    (``FileNotFoundError``), a throttled server and an unreachable one each get their own fix.
    """
    text = f"{type(err).__name__}: {err}"
    protocol, rest = split_url(url)
    bucket = rest.split("/", 1)[0]
    if any(w in text for w in ("NoCredentials", "Unable to locate credentials")):
        why = (
            f"no credentials were found ({err}). Pass them in storage_options={{'key': ..., 'secret': ...}} (on the "
            'command line: --storage-options \'{"key": ..., "secret": ...}\'), or set the AWS_ACCESS_KEY_ID and '
            "AWS_SECRET_ACCESS_KEY environment variables (or an AWS profile)"
        )
    elif isinstance(err, TypeError) and "unexpected keyword argument" in text:
        why = (
            f"the file system does not take one of the storage_options ({err}). Pass only options it takes (for "
            "s3://: key, secret, token, endpoint_url, client_kwargs, config_kwargs)"
        )
    elif isinstance(err, PermissionError) or any(
        w in text for w in ("AccessDenied", "InvalidAccessKeyId", "Signature")
    ):
        why = (
            "the server refused the credentials or this user lacks permission"
            f" ({err}). Check the key and secret (storage_options={{'key': ..., 'secret': ...}}, or the "
            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY environment variables) and that the user may read and write "
            f"{protocol}://{bucket}"
        )
    elif isinstance(err, FileNotFoundError) or "NoSuchBucket" in text:
        if "bucket" in text.lower():
            why = f"the bucket {bucket!r} does not exist ({err}). Create it first, or fix the bucket name in the URL"
        else:
            why = f"there is no object at that path ({err}). Check the URL (`ferry ckpt ls` lists a run's checkpoints)"
    elif any(word in text for word in _THROTTLED):
        why = (
            f"the server is throttling requests ({err}). Retry later, save less often (every_steps=...), or raise "
            "the request limit of the bucket"
        )
    elif isinstance(err, ConnectionError | TimeoutError) or any(
        w in text for w in ("EndpointConnectionError", "Could not connect", "ConnectTimeout", "Connection refused")
    ):
        why = (
            f"the server cannot be reached ({err}). Check the endpoint (storage_options={{'client_kwargs': "
            "{'endpoint_url': ...}}) and the network, then retry"
        )
    else:
        why = f"{text}. Check the server and the URL, then retry"
    kept = " Nothing already stored under that name was changed." if action == "save" else ""
    return CheckpointError(f"cannot {action} {url!r}: {why}.{kept}", path=url)


class RemoteFile:
    """A read-only remote file: ``read``/``seek`` for the header, :meth:`pread_into` for the data, from any thread."""

    def __init__(self, fs: Any, path: str, size: int) -> None:
        self._fs = fs
        self._path = path
        self.size = size
        self._position = 0

    def read(self, count: int = -1) -> bytes:
        """The next ``count`` bytes (all the rest for -1), fetched as one range."""
        end = self.size if count < 0 else min(self.size, self._position + count)
        if end <= self._position:
            return b""
        data = bytes(self._fs.cat_file(self._path, start=self._position, end=end))
        self._position += len(data)
        return data

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` from the current position; returns the bytes read."""
        data = self.read(len(buffer))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move the position, as for a local file."""
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self.size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def tell(self) -> int:
        """The current position."""
        return self._position

    def pread_into(self, buffers: list[memoryview], offset: int) -> int:
        """Fill ``buffers`` in order from byte ``offset`` with one ranged GET; returns the bytes read."""
        total = sum(len(buffer) for buffer in buffers)
        end = min(self.size, offset + total)
        data = memoryview(bytes(self._fs.cat_file(self._path, start=offset, end=end))) if end > offset else b""
        done = 0
        for buffer in buffers:
            take = min(len(buffer), len(data) - done)
            if take <= 0:
                break
            buffer[:take] = data[done : done + take]
            done += take
        return done


@contextlib.contextmanager
def open_remote(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[tuple[RemoteFile, int]]:
    """Open the object at ``url`` for reading; yields ``(file, size in bytes)``.

    Raises:
        CheckpointError: the object is missing, is a folder, or the server refuses or cannot be reached.
    """
    fs, path = filesystem(url, storage_options)
    try:
        info = fs.info(path)
    except FileNotFoundError as err:
        root = path.split("/", 1)[0]
        missing_root = False
        with contextlib.suppress(Exception):  # cannot tell: the plain message below
            missing_root = root != path and not fs.exists(root)
        if missing_root:
            raise CheckpointError(
                f"no checkpoint at {url!r}: the bucket {root!r} does not exist. Check the bucket name in the URL "
                "and the endpoint in storage_options.",
                path=url,
            ) from err
        raise CheckpointError(
            f"no checkpoint at {url!r}: there is no object at that path. Check the URL (fs.ls of its folder lists "
            "what is there).",
            path=url,
        ) from err
    except Exception as err:
        raise remote_error(url, err, "read") from err
    if info.get("type") == "directory":
        raise CheckpointError(
            f"{url!r} is a folder, not a checkpoint file. Pass the URL of an object inside it.", path=url
        )
    size = int(info.get("size") or 0)
    try:
        yield RemoteFile(fs, path, size), size
    except CheckpointError:
        raise
    except Exception as err:
        raise remote_error(url, err, "read") from err


#: Bytes per part of ferry's own S3 multipart uploads (S3 takes 5 MiB to 5 GiB; 10,000 parts at most).
PART_BYTES = 16 << 20
#: Parts uploaded at once; the writer fills the next one meanwhile (so at most PARTS_IN_FLIGHT + 1 part buffers).
PARTS_IN_FLIGHT = 4


class _S3Upload:
    """A write stream that sends an S3 multipart upload's parts several at once, as they fill.

    fsspec's buffered S3 file sends each part before it takes the next bytes; here the writer goes on filling the
    next part while up to ``PARTS_IN_FLIGHT`` are on the wire. An object smaller than one part goes up in one PUT.
    :meth:`close` completes the upload (the object appears then), :meth:`discard` aborts it.
    """

    def __init__(self, fs: Any, path: str) -> None:
        import concurrent.futures
        import threading

        self._fs = fs
        self._path = path
        self._bucket, self._key, _ = fs.split_path(path)
        self._upload_id: str | None = None
        self._parts: list[concurrent.futures.Future[dict[str, Any]]] = []
        self._pool = concurrent.futures.ThreadPoolExecutor(PARTS_IN_FLIGHT, thread_name_prefix="ferry-upload")
        self._slots = threading.BoundedSemaphore(PARTS_IN_FLIGHT + 1)
        self._slots.acquire()
        self._buffer = bytearray()
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        """Add ``data``; each full part is handed to an uploading thread."""
        view = memoryview(data).cast("B")
        taken = 0
        while taken < len(view):
            room = PART_BYTES - len(self._buffer)
            self._buffer += view[taken : taken + room]
            taken += min(room, len(view) - taken)
            if len(self._buffer) == PART_BYTES:
                self._send()
        return len(view)

    def _send(self) -> None:
        if self._upload_id is None:
            started = self._fs.call_s3("create_multipart_upload", Bucket=self._bucket, Key=self._key)
            self._upload_id = started["UploadId"]
        for done in [part for part in self._parts if part.done()]:
            done.result()  # a failed part stops the save at once
        number = len(self._parts) + 1
        body, self._buffer = self._buffer, bytearray()  # the part owns its buffer
        self._parts.append(self._pool.submit(self._part, number, body))
        self._slots.acquire()  # wait while PARTS_IN_FLIGHT parts are on the wire and this one is full

    def _part(self, number: int, body: bytearray) -> dict[str, Any]:
        try:
            sent = self._fs.call_s3(
                "upload_part",
                Bucket=self._bucket,
                Key=self._key,
                UploadId=self._upload_id,
                PartNumber=number,
                Body=io.BytesIO(bytes(body)),  # a stream: aiohttp sends it in chunks, not in one blocking write
            )
            return {"PartNumber": number, "ETag": sent["ETag"]}
        finally:
            self._slots.release()

    def close(self) -> None:
        """Send the last part and complete the upload (or PUT the whole object if it fits in one part)."""
        if self.closed:
            return
        try:
            if self._upload_id is None:
                body = io.BytesIO(bytes(self._buffer))
                self._fs.call_s3("put_object", Bucket=self._bucket, Key=self._key, Body=body)
            else:
                if self._buffer:
                    self._send()
                parts = [part.result() for part in self._parts]
                self._fs.call_s3(
                    "complete_multipart_upload",
                    Bucket=self._bucket,
                    Key=self._key,
                    UploadId=self._upload_id,
                    MultipartUpload={"Parts": parts},
                )
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._fs.invalidate_cache(self._path)
        self.closed = True

    def discard(self) -> None:
        """Abort the upload: the parts sent are dropped, and nothing appears under the key."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.closed = True
        if self._upload_id is not None:
            self._fs.call_s3("abort_multipart_upload", Bucket=self._bucket, Key=self._key, UploadId=self._upload_id)


def _open_for_upload(fs: Any, path: str) -> Any:
    """An upload stream for ``path``: ferry's parallel multipart upload on S3, fsspec's own file elsewhere."""
    if hasattr(fs, "call_s3") and hasattr(fs, "split_path"):
        return _S3Upload(fs, path)
    return fs.open(path, "wb")


def upload(url: str, storage_options: Mapping[str, Any] | None, write: Callable[[BinaryIO], None]) -> None:
    """Write one object at ``url`` with ``write(stream)``: all of it, or nothing.

    On S3 the stream sends the parts of a multipart upload several at once (one PUT for an object smaller than
    a part); other file systems get fsspec's buffered upload. Only when ``write`` returns is the upload
    completed, which is when the server makes the object visible; if ``write`` raises (a tensor that cannot be
    saved, the server going away), the upload is aborted and whatever object was there before is left as it was.

    Raises:
        CheckpointError: the server refused or failed (see :func:`remote_error`); errors of ``write`` pass through.
    """
    fs, path = filesystem(url, storage_options)
    try:
        stream = _open_for_upload(fs, path)
    except Exception as err:
        raise remote_error(url, err, "save") from err
    try:
        write(stream)
    except BaseException as err:
        _discard(stream)
        if isinstance(err, Exception) and not isinstance(err, CheckpointError):  # the server, the network, a part
            raise remote_error(url, err, "save") from err
        raise
    try:
        stream.close()  # completes the multipart upload (or sends the one PUT): the object appears now
    except Exception as err:
        _discard(stream)
        raise remote_error(url, err, "save") from err


def _discard(stream: Any) -> None:
    """Abort an upload in progress so that closing it later cannot commit the part written so far."""
    with contextlib.suppress(Exception):
        stream.discard()  # s3fs: abort the multipart upload
    with contextlib.suppress(Exception):
        stream.closed = True  # fsspec's buffered files commit in close(), also from __del__: never here
