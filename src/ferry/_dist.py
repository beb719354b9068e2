"""The one answer to "which process am I?": a process group's rank and size, else torchrun's variables, else 0 of 1.

Used by :mod:`ferry.distributed` (public), the Checkpointer (which ranks write) and :class:`ferry.ResumableSampler`
(which share of the data). ``torch.distributed`` is imported inside the functions, never at import time.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pathlib
import time
from collections.abc import Mapping

from ferry.errors import DistributedError

__all__ = [
    "LAUNCH_VARIABLES",
    "Launch",
    "gloo_workers_busy",
    "launch",
    "let_gloo_workers_settle",
    "process_group",
    "rank",
    "world_size",
]

#: How long the exit waits at most for gloo's worker threads to let go of their last collective, in seconds.
GLOO_SETTLE_TIMEOUT = 2.0
_GLOO_WORKER_THREAD = "pt_gloo_runloop"  # the name ProcessGroupGloo gives its worker threads
_SETTLING: list[bool] = []  # [True] once let_gloo_workers_settle is registered to run at exit

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
        if not _SETTLING:  # a DDP model keeps the group's gloo threads alive past destroy_process_group()
            _SETTLING.append(True)
            atexit.register(let_gloo_workers_settle)
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


def let_gloo_workers_settle(timeout: float | None = None) -> float:
    """Release the GIL until gloo's worker threads are idle (at most ``timeout`` seconds); return the seconds waited.

    A gloo worker thread frees each finished collective after the caller's ``wait()`` has returned, and freeing its
    tensors takes the GIL. ``destroy_process_group()`` does not stop those threads while a
    ``DistributedDataParallel`` model still holds the group, so a script that ends right after its last collective
    (``all_gather_object``, then ``destroy_process_group()``) can reach interpreter finalization while a worker
    still waits for the GIL: the worker is then killed inside C++ code and the rank aborts with "terminate called
    without an active exception" (SIGABRT), about one exit in five on a 2-rank DDP run. Called from an ``atexit``
    handler, while the interpreter is still whole, this sleeps in short steps until no such thread is running or
    waiting on a timed lock (the GIL); where ``/proc`` cannot tell, it sleeps once for 50 ms. :func:`process_group`
    registers it to run at exit the first time it sees a process group, whoever started it.
    """
    limit = GLOO_SETTLE_TIMEOUT if timeout is None else timeout
    started = time.monotonic()
    time.sleep(0.005)  # the GIL changes hands at least once
    while (busy := gloo_workers_busy()) and time.monotonic() - started < limit:
        time.sleep(0.005)
    if busy is None:
        time.sleep(min(0.05, limit))
    return time.monotonic() - started


def gloo_workers_busy(process: str = "self") -> bool | None:
    """Whether a gloo worker thread of ``process`` (a pid) runs or waits with a timeout; ``None`` without ``/proc``.

    An idle worker waits on its work queue's condition variable with no timeout (``futex`` whose fourth argument,
    the timeout, is 0 in ``/proc/<pid>/task/<tid>/syscall``); one waiting for the GIL waits with a timeout.
    """
    tasks = pathlib.Path("/proc", process, "task")
    try:
        threads = list(tasks.iterdir())
    except OSError:
        return None
    for thread in threads:
        try:
            if (thread / "comm").read_text().strip() != _GLOO_WORKER_THREAD:
                continue
            state = (thread / "stat").read_text().rpartition(")")[2].split()[0]
            call = (thread / "syscall").read_text().split()
            timed = len(call) > 4 and int(call[4], 16) != 0
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile, or this kernel shows it another way
        if state == "R" or not call or call[0] == "running" or timed:
            return True
    return False
