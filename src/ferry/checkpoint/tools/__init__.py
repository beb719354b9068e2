"""What ``ferry ckpt`` does, as functions over any kind of checkpoint path.

A path may be a ferry, safetensors or ``torch.save`` file; a checkpoint (step) folder, plain or sharded; a folder
``dcp.save`` wrote with ferry's storage; or a Checkpointer run directory; locally, or as a URL of object storage
(``s3://bucket/run``, with ``storage_options`` for its fsspec file system). ``ferry.cli`` only parses arguments
and prints what these return.

- :func:`resolve`: the checkpoint a path names (a run directory: its newest complete checkpoint);
- :func:`describe`: what a checkpoint holds, from headers (``ferry ckpt inspect``);
- :func:`verify` (``ferry.verify``) and :func:`verify_path` (``ferry ckpt verify``);
- :func:`list_run` and :func:`collect`: a run directory's checkpoints, and removing what retention lets go
  (``ferry ckpt ls`` and ``gc``);
- :func:`diff` (``ferry ckpt diff``) and :func:`convert` (``ferry ckpt convert``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ferry import _lazy

if TYPE_CHECKING:
    from ferry.checkpoint.file.structure import flatten
    from ferry.checkpoint.tools._convert import convert
    from ferry.checkpoint.tools._describe import describe
    from ferry.checkpoint.tools._diff import diff, diff_objects, max_abs_diff
    from ferry.checkpoint.tools._paths import Meter, Progress, Target, location, no_progress, resolve, run_directory
    from ferry.checkpoint.tools._runs import collect, list_run, recorded_policy
    from ferry.checkpoint.tools._verify import Check, verify, verify_path

#: public name -> its module; imported on first use, so that ``ferry.verify`` does not import DCP (1.5 s)
_NAMES = {
    "flatten": "ferry.checkpoint.file.structure",
    "convert": "ferry.checkpoint.tools._convert",
    "describe": "ferry.checkpoint.tools._describe",
    "diff": "ferry.checkpoint.tools._diff",
    "diff_objects": "ferry.checkpoint.tools._diff",
    "max_abs_diff": "ferry.checkpoint.tools._diff",
    "Meter": "ferry.checkpoint.tools._paths",
    "Progress": "ferry.checkpoint.tools._paths",
    "Target": "ferry.checkpoint.tools._paths",
    "location": "ferry.checkpoint.tools._paths",
    "no_progress": "ferry.checkpoint.tools._paths",
    "resolve": "ferry.checkpoint.tools._paths",
    "run_directory": "ferry.checkpoint.tools._paths",
    "collect": "ferry.checkpoint.tools._runs",
    "list_run": "ferry.checkpoint.tools._runs",
    "recorded_policy": "ferry.checkpoint.tools._runs",
    "Check": "ferry.checkpoint.tools._verify",
    "verify": "ferry.checkpoint.tools._verify",
    "verify_path": "ferry.checkpoint.tools._verify",
}

__all__ = [
    "Check",
    "Meter",
    "Progress",
    "Target",
    "collect",
    "convert",
    "describe",
    "diff",
    "diff_objects",
    "flatten",
    "list_run",
    "location",
    "max_abs_diff",
    "no_progress",
    "recorded_policy",
    "resolve",
    "run_directory",
    "verify",
    "verify_path",
]


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(_lazy.load(_NAMES[name], f"ferry.checkpoint.tools.{name}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
