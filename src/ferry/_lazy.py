"""Importing on first use, and the one message for a missing PyTorch.

``ferry`` and ``ferry.checkpoint.tools`` resolve their public names on first use (PEP 562), so that ``import ferry``
and ``ferry lint`` import no torch; :func:`load` is how they import, and :func:`missing_torch` the error every part
raises when PyTorch is not installed.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from ferry.errors import FerryError

__all__ = ["load", "missing_torch", "torch_installed"]

#: How to install PyTorch, for people (pip pulls the CUDA build unless pointed at the CPU index).
INSTALL_TORCH = (
    "Install the build for your machine first: `pip install torch` (with CUDA; several GB), or "
    "`pip install torch --index-url https://download.pytorch.org/whl/cpu` on a machine without an NVIDIA GPU"
)


def missing_torch(what: str, err: ModuleNotFoundError) -> FerryError:
    """The error for ``what`` (``"ferry.save"``, ``"ferry ckpt"``) used where PyTorch is not installed."""
    return FerryError(f"{what} needs PyTorch, which is not installed in this environment ({err}). {INSTALL_TORCH}.")


def torch_installed() -> bool:
    """Whether ``import torch`` can work here, found without importing it."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def load(module: str, what: str) -> ModuleType:
    """``importlib.import_module(module)``; a missing PyTorch becomes :func:`missing_torch` for ``what``.

    Raises:
        FerryError: PyTorch (or one of its parts) is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] != "torch":
            raise
        raise missing_torch(what, err) from err
