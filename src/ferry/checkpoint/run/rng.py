"""Capturing and restoring random number generator states, so a resumed run draws the same numbers.

Covered: Python's ``random``, NumPy's legacy global generator (``np.random.*``), torch's CPU generator and the
generator of every accelerator device that this process has initialised (CUDA/ROCm, XPU, MPS). An accelerator that
was never initialised has never drawn a number, so its state is not read (reading it would initialise CUDA and cost
a context). The captured state is a tree of tensors and plain values that :func:`ferry.save` writes without pickle.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import torch

from ferry.errors import CheckpointWarning

__all__ = ["capture_rng_state", "restore_rng_state"]


def _accelerator_modules() -> dict[str, Any]:
    """The torch submodules of accelerators whose generators this process has initialised, by device type."""
    found: dict[str, Any] = {}
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        found["cuda"] = torch.cuda
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and getattr(xpu, "is_initialized", lambda: False)():
        found["xpu"] = xpu
    return found


def capture_rng_state() -> dict[str, Any]:
    """Return the current RNG states of Python, NumPy, torch CPU and every initialised accelerator.

    Returns:
        A dict ``{"python": ..., "numpy": ..., "torch": uint8 tensor, "cuda": [uint8 tensor per device], ...}``;
        every tensor is on the CPU.
    """
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "torch": torch.get_rng_state(),
    }
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency, but torch runs without it
        pass
    else:
        legacy: tuple[str, Any, int, int, float] = np.random.get_state(legacy=True)  # type: ignore[assignment]
        kind, keys, pos, has_gauss, cached = legacy
        state["numpy"] = {
            "kind": str(kind),
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    for device_type, module in _accelerator_modules().items():
        state[device_type] = list(module.get_rng_state_all())
    mps = getattr(torch, "mps", None)
    if mps is not None and torch.backends.mps.is_available():  # pragma: no cover - macOS only
        state["mps"] = mps.get_rng_state()
    return state


def restore_rng_state(state: dict[str, Any], *, where: str = "checkpoint") -> None:
    """Set every generator captured by :func:`capture_rng_state` back to its saved state.

    Generators of accelerators this machine lacks (a run saved on a GPU and resumed on a CPU) cannot be restored:
    a :class:`ferry.CheckpointWarning` says so, naming ``where``, since the resumed run will not be bit-exact.

    Args:
        state: What :func:`capture_rng_state` returned (after a round trip through the file).
        where: The checkpoint folder, for the warning.
    """
    python = state.get("python")
    if python is not None:
        internal = tuple(int(v) for v in python["state"].tolist())
        random.setstate((int(python["version"]), internal, python["gauss"]))
    if "torch" in state:
        torch.set_rng_state(state["torch"].cpu())
    numpy_state = state.get("numpy")
    if numpy_state is not None:
        import numpy as np

        keys = numpy_state["keys"].numpy().astype(np.uint32)
        np.random.set_state(
            (
                numpy_state["kind"],
                keys,
                numpy_state["pos"],
                numpy_state["has_gauss"],
                numpy_state["cached_gaussian"],
            )
        )
    for device_type in ("cuda", "xpu"):
        saved = state.get(device_type)
        if not saved:
            continue
        module = getattr(torch, device_type, None)
        count = module.device_count() if module is not None else 0
        if count < len(saved):
            warnings.warn(
                f"{where}: saved the RNG states of {len(saved)} {device_type} device(s) but this machine has "
                f"{count}; the states of the missing devices are not restored, so random draws on them will differ "
                "from the uninterrupted run. Resume on a machine with the same devices for an exact resume.",
                CheckpointWarning,
                stacklevel=3,
            )
        for index, tensor in enumerate(saved[:count]):
            module.set_rng_state(tensor.cpu(), index)  # type: ignore[union-attr]
    if "mps" in state and torch.backends.mps.is_available():  # pragma: no cover - macOS only
        torch.mps.set_rng_state(state["mps"].cpu())
