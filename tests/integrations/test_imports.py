"""The integrations stay out of the way: ``import ferry`` and its other parts import no trainer, and a missing
trainer package is an ImportError naming the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ferry.integrations import require

TRAINERS = ("lightning", "pytorch_lightning", "transformers", "accelerate")


def test_import_ferry_and_its_parts_import_no_trainer() -> None:
    code = (
        "import sys, ferry, ferry.checkpoint, ferry.placement, ferry.sanitizer, ferry.distributed, ferry.integrations\n"
        "ferry.Checkpointer; ferry.save; ferry.load; ferry.pick_device\n"
        f"print(sorted(m for m in {TRAINERS!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "[]" == out.strip()


def test_a_missing_trainer_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r'pip install "ferry\[lightning\]"'):
        require("no_such_trainer_package", "lightning", "ferry.integrations.lightning")


def test_a_present_package_is_returned() -> None:
    assert "json" == require("json", "lightning", "ferry.integrations.lightning").__name__
