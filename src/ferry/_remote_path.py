"""A folder or object on a remote file system, named by its URL, with the part of ``pathlib.Path`` checkpoints use.

The readers of checkpoint folders (listing a run, reading a manifest, restoring, verifying) were written against
``pathlib.Path``; a :class:`RemotePath` answers the same calls (``/``, ``name``, ``parent``, ``iterdir``,
``is_dir``, ``is_file``, ``exists``, ``stat().st_size``, ``read_bytes``, ``read_text``) through the URL's fsspec
file system, so those readers work on object storage unchanged. It carries the ``storage_options`` that reach the
server, and :func:`ferry.load`/:func:`ferry.verify` take it in place of a URL.

Listings and metadata are always fetched fresh (fsspec's listing cache is invalidated first): another process may
be writing the run. Errors: a missing object is ``FileNotFoundError``, as for a local path; anything else the
server says (wrong credentials, no permission, a missing bucket, an unreachable or throttled server) becomes a
:class:`ferry.CheckpointError` that names the fix (:func:`ferry._remote.remote_error`), so that a reader never
takes a refused request for a missing or incomplete checkpoint.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ferry._remote import filesystem, remote_error, split_url
from ferry.errors import ArgumentError, CheckpointError

__all__ = ["Folder", "RemotePath", "RemoteStat", "create_exclusive", "read_json", "remote_path", "shown_path"]


@dataclass(frozen=True)
class RemoteStat:
    """What ``RemotePath.stat()`` gives: the size in bytes (``st_size``, as ``os.stat_result``)."""

    st_size: int


class RemotePath:
    """A URL on an fsspec file system (``s3://bucket/run/step-000000100``) and the options that reach it.

    Equal, hashed and sorted by URL. ``str()`` is the URL. Not ``os.PathLike``: nothing can mistake it for a local
    path.

    Args:
        url: ``protocol://...``; a trailing ``/`` is dropped.
        storage_options: Passed to the URL's fsspec file system (``key``, ``secret``, ``client_kwargs``...).

    Raises:
        CheckpointError: fsspec or the protocol's file system is not installed, or rejects ``storage_options``.
    """

    __slots__ = ("_fs", "_kind", "_path", "_size", "storage_options", "url")

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None, *, _fs: Any = None) -> None:
        self.url = url.rstrip("/")
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise ArgumentError(
                f"storage_options must be a mapping of fsspec options (a dict), got {type(storage_options).__name__}. "
                'Pass e.g. storage_options={"key": ..., "secret": ..., "client_kwargs": {"endpoint_url": ...}} '
                "(json.loads(text) first, for options written as JSON)."
            )
        self.storage_options = dict(storage_options or {})
        if _fs is None:
            _fs, _ = filesystem(self.url, self.storage_options)
        self._fs = _fs
        self._path = self._fs._strip_protocol(self.url)
        self._kind: str | None = None  # "file" or "directory", when a listing said so
        self._size: int | None = None

    # -- names ----------------------------------------------------------------------------------------------------

    @property
    def fs(self) -> Any:
        """The fsspec file system."""
        return self._fs

    @property
    def fs_path(self) -> str:
        """The path on :attr:`fs` (the URL without its protocol)."""
        return str(self._path)

    @property
    def name(self) -> str:
        """The last part of the URL (``"step-000000100"``)."""
        return self.url.rsplit("/", 1)[-1]

    @property
    def parent(self) -> RemotePath:
        """The URL without its last part."""
        protocol, rest = split_url(self.url)
        head = rest.rsplit("/", 1)[0] if "/" in rest else rest
        return RemotePath(f"{protocol}://{head}", self.storage_options, _fs=self._fs)

    def __truediv__(self, name: str) -> RemotePath:
        return RemotePath(f"{self.url}/{name}", self.storage_options, _fs=self._fs)

    def with_name(self, name: str) -> RemotePath:
        """The sibling called ``name``."""
        return self.parent / name

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"RemotePath({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotePath) and other.url == self.url

    def __hash__(self) -> int:
        return hash(("RemotePath", self.url))

    def __lt__(self, other: RemotePath) -> bool:
        return self.url < other.url

    # -- queries --------------------------------------------------------------------------------------------------

    def _call(self, action: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``fs.<method>(*args)``; FileNotFoundError passes through, other failures become CheckpointErrors."""
        try:
            return getattr(self._fs, method)(*args, **kwargs)
        except FileNotFoundError:
            raise
        except CheckpointError:
            raise
        except Exception as err:
            raise remote_error(self.url, err, action) from err

    def _fresh(self) -> None:
        """Forget what fsspec's listing cache holds for this path, its parents and everything below it.

        A listing fills the cache for every folder it saw (s3fs's ``find`` does), and some reads consult it
        (s3fs's ``cat_file`` asks ``info`` for the size first): a manifest created after the listing would read
        as missing. Another process may be writing the run, so nothing cached is trusted.
        """
        with contextlib.suppress(Exception):
            self._fs.invalidate_cache(self._path)
            cache = getattr(self._fs, "dircache", None)
            if cache is not None:
                below = self._path.rstrip("/") + "/"
                for key in [k for k in list(cache) if str(k).startswith(below)]:
                    cache.pop(key, None)

    def iterdir(self) -> Iterator[RemotePath]:
        """The objects and folders directly inside this folder.

        Raises:
            FileNotFoundError: nothing is stored under this URL.
        """
        self._fresh()
        entries = self._call("list", "ls", self._path, detail=True)
        for entry in entries:
            name = str(entry["name"]).rstrip("/")
            if name == self._path.rstrip("/"):
                continue
            child = self / name.rsplit("/", 1)[-1]
            child._kind = "directory" if entry.get("type") == "directory" else "file"
            child._size = int(entry.get("size") or 0)
            yield child

    def _info(self) -> dict[str, Any]:
        self._fresh()
        return dict(self._call("read", "info", self._path))

    def is_dir(self) -> bool:
        """Whether something is stored under this URL as a folder (a prefix)."""
        if self._kind is not None:
            return self._kind == "directory"
        try:
            return self._info().get("type") == "directory"
        except FileNotFoundError:
            return False

    def is_file(self) -> bool:
        """Whether an object is stored at this URL."""
        if self._kind is not None:
            return self._kind == "file"
        try:
            return self._info().get("type") != "directory"
        except FileNotFoundError:
            return False

    def exists(self) -> bool:
        """Whether an object or a folder is stored at this URL."""
        try:
            self._info()
        except FileNotFoundError:
            return False
        return True

    def stat(self) -> RemoteStat:
        """The object's size.

        Raises:
            FileNotFoundError: there is no object at this URL.
        """
        info = self._info()
        return RemoteStat(int(info.get("size") or 0))

    def read_bytes(self) -> bytes:
        """The whole object.

        Raises:
            FileNotFoundError: there is no object at this URL.
        """
        self._fresh()
        return bytes(self._call("read", "cat_file", self._path))

    def read_text(self, encoding: str = "utf-8") -> str:
        """The whole object, decoded."""
        return self.read_bytes().decode(encoding)

    def files(self) -> dict[str, int]:
        """Every object under this folder, at any depth: ``{path relative to this folder: size in bytes}``."""
        self._fresh()
        try:
            found = self._call("list", "find", self._path, detail=True)
        except FileNotFoundError:
            return {}
        self._fresh()  # what the listing cached of the folders below is stale the moment a writer adds a file
        prefix = self._path.rstrip("/") + "/"
        return {
            str(name)[len(prefix) :]: int(info.get("size") or 0)
            for name, info in found.items()
            if str(name).startswith(prefix) and info.get("type") != "directory"
        }

    # -- writes ---------------------------------------------------------------------------------------------------

    def write_bytes(self, data: bytes) -> None:
        """Store ``data`` as the object at this URL (one PUT: complete or absent)."""
        self._call("save", "pipe_file", self._path, data)

    def unlink(self, missing_ok: bool = False) -> None:
        """Delete the object at this URL."""
        try:
            self._call("delete", "rm_file", self._path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def remove_tree(self) -> None:
        """Delete every object under this folder (and the folder, where the store keeps folders)."""
        with contextlib.suppress(FileNotFoundError):
            self._call("delete", "rm", self._path, recursive=True)
        if hasattr(self._fs, "call_s3") and hasattr(self._fs, "split_path"):
            # stores with real folders (SeaweedFS) keep an empty one until its `folder/` key is deleted too; on S3
            # deleting a key that is not there is a no-op
            bucket, key, _ = self._fs.split_path(self._path)
            with contextlib.suppress(Exception):
                self._fs.call_s3("delete_object", Bucket=bucket, Key=key.rstrip("/") + "/")
        self._fresh()


def remote_path(path: object, storage_options: Mapping[str, Any] | None) -> tuple[str, Mapping[str, Any] | None]:
    """``(url, storage_options)`` of a :class:`RemotePath` (its own options), else ``(path, storage_options)``."""
    if isinstance(path, RemotePath):
        return path.url, path.storage_options
    return path, storage_options  # type: ignore[return-value]


def shown_path(path: Path | RemotePath) -> Path:
    """``path`` where the file layer takes a ``Path`` only to name the file in messages (``str()`` of it)."""
    return path if isinstance(path, Path) else cast(Path, path.url)


#: Words of the server's answer when a conditional create finds the object already there (HTTP 412).
_PRECONDITION = ("pre-condition", "precondition", "PreconditionFailed", "412")


def create_exclusive(target: RemotePath, data: bytes) -> bool:
    """Create the object ``target`` with ``data`` only if no object is there: ``If-None-Match: *`` on S3.

    Returns:
        True when this call created it; False when an object was already there (another writer's).

    The create is atomic where the store supports conditional writes (S3 and S3-compatible servers that do,
    ``memory://``, local files); where a store refuses the condition itself, it falls back to a check, then a
    write (the caller's lock keeps other writers away then).

    Raises:
        CheckpointError: the server refused or could not be reached.
    """
    try:
        target.fs.pipe_file(target.fs_path, data, mode="create")
    except FileExistsError:
        return False
    except (TypeError, NotImplementedError, ValueError) as err:
        if "mode" not in str(err) and not isinstance(err, NotImplementedError):
            raise remote_error(target.url, err, "save") from err
        if target.exists():  # a store without conditional writes: check, then write
            return False
        target.write_bytes(data)
    except Exception as err:
        if any(word in str(err) for word in _PRECONDITION):
            return False
        raise remote_error(target.url, err, "save") from err
    finally:
        target._fresh()
    return True


def read_json(target: RemotePath) -> Any:
    """The JSON object stored at ``target``; FileNotFoundError when there is none, ValueError when it does not parse."""
    return json.loads(target.read_text())


#: A checkpoint folder or file: a local path, or a remote one.
Folder = Path | RemotePath
