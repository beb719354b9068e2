"""Shared test setup: the ``gpu`` marker skips without a CUDA GPU; paths to ``../shared/cases``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from _support import SHARED


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
