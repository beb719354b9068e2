"""ferry's checkpoints inside the trainers people already use, each through that trainer's own extension point.

- :mod:`ferry.integrations.lightning`: ``FerryCheckpointIO`` for ``lightning.pytorch.Trainer`` and
  ``lightning.fabric.Fabric`` (``pip install "ferry[lightning]"``);
- :mod:`ferry.integrations.transformers`: ``FerryCallback`` (and ``FerryTrainer``) for the Hugging Face ``Trainer``
  (``pip install "ferry[transformers]"``);
- :mod:`ferry.integrations.accelerate`: ``save_state``/``load_state`` for an ``accelerate.Accelerator``
  (``pip install "ferry[accelerate]"``).

``import ferry`` imports none of them, and none of the trainers: each module imports its trainer when it is
imported itself, and a missing trainer package is an ``ImportError`` that names the extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(package: str, extra: str, what: str) -> ModuleType:
    """Import ``package`` for ``what`` (``"ferry.integrations.lightning"``), or say which extra installs it.

    Raises:
        ImportError: ``package`` is not installed; the message names ``pip install "ferry[<extra>]"``.
    """
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as err:
        if err.name is not None and err.name.split(".")[0] != package.split(".")[0]:
            raise  # the package is there but one of its own dependencies is missing: its own error says which
        raise ImportError(
            f"{what} needs the `{package.split('.')[0]}` package, which is not installed in this environment. "
            f'Install it with `pip install "ferry[{extra}]"`.'
        ) from err
