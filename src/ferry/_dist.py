"""The one answer to "which process am I?": a process group's rank and size, else torchrun's variables, else 0 of 1.

Used by :mod:`ferry.distributed` (public), the Checkpointer (which ranks write) and :class:`ferry.ResumableSampler`
(which share of the data). ``torch.distributed`` is imported inside the functions, never at import time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from ferry.errors import DistributedError

__all__ = ["LAUNCH_VARIABLES", "Launch", "launch", "process_group", "rank", "world_size"]

#: What torchrun (torch.distributed.run) sets for every worker, in the order messages list them.
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclasses.dataclass(frozen=True)
class Launch:
    """What the launcher told this process: its global rank, the number of processes, its rank on the node."""

    rank: int
    world_size: int
    local_rank: int


def launch(environ: Mapping[str, str]) -> Launch | None:
    """Parse torchrun's variables from ``environ``: ``None`` for a plain process (neither RANK nor WORLD_SIZE set).

    Raises:
        DistributedError: Some of the variables are set but not all, or they are not integers in range.
    """
    seen = {name: environ[name] for name in LAUNCH_VARIABLES if name in environ}
    if "RANK" not in seen and "WORLD_SIZE" not in seen:
        return None
    shown = ", ".join(f"{name}={value!r}" for name, value in seen.items())
    missing = [name for name in LAUNCH_VARIABLES if not seen.get(name, "").strip()]
    if missing:
        raise DistributedError(
            f"the torchrun environment is incomplete: {', '.join(missing)} not set (this process has {shown}). "
            "ferry.distributed.init() needs all of RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. Launch "
            "with torchrun (torchrun --nproc-per-node=N script.py), which sets them all, or, for a single process, "
            "unset RANK and WORLD_SIZE.",
            variables=seen,
        )
    numbers: dict[str, int] = {}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
        value = seen[name].strip()
        if not value.isdigit():
            raise DistributedError(
                f"{name}={seen[name]!r} is not a non-negative integer (this process has {shown}). Fix the launcher, "
                "or launch with torchrun, which sets it.",
                variables=seen,
            )
        numbers[name] = int(value)
    launch = Launch(numbers["RANK"], numbers["WORLD_SIZE"], numbers["LOCAL_RANK"])
    if not 0 <= launch.rank < launch.world_size or launch.local_rank > launch.rank:
        raise DistributedError(
            f"RANK={launch.rank}, LOCAL_RANK={launch.local_rank} and WORLD_SIZE={launch.world_size} contradict each "
            "other: torchrun gives every process 0 <= LOCAL_RANK <= RANK < WORLD_SIZE. Fix the launcher, or launch "
            "with torchrun, which sets them consistently.",
            variables=seen,
        )
    return launch


def process_group() -> tuple[int, int] | None:
    """``(rank, world size)`` of the initialised default ``torch.distributed`` process group, else ``None``."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def rank(environ: Mapping[str, str] = os.environ) -> int:
    """The process group's rank; else torchrun's ``RANK`` (before the group is up); else 0.

    Raises:
        DistributedError: torchrun's variables are incomplete or inconsistent.
    """
    group = process_group()
    if group is not None:
        return group[0]
    launched = launch(environ)
    return launched.rank if launched else 0


def world_size(environ: Mapping[str, str] = os.environ) -> int:
    """The process group's size; else torchrun's ``WORLD_SIZE``; else 1.

    Raises:
        DistributedError: torchrun's variables are incomplete or inconsistent.
    """
    group = process_group()
    if group is not None:
        return group[1]
    launched = launch(environ)
    return launched.world_size if launched else 1
