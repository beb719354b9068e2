"""``torch.distributed`` glue: start the process group torchrun asked for, and wrap a model for it.

- :func:`init` reads torchrun's environment, initialises the default process group and returns this rank's device;
  in a plain single process it does nothing and returns :func:`ferry.pick_device`.
- :func:`wrap` places a model on that device and wraps it in ``DistributedDataParallel`` or FSDP2.
- :func:`rank`, :func:`world_size`, :func:`is_main` and :func:`barrier` work the same with or without a process
  group, so one script runs under ``python train.py`` and ``torchrun --nproc-per-node=N train.py``.

:class:`ferry.ResumableSampler` splits its indices across ranks by itself once the process group is up.

``torch.distributed`` is imported inside the functions, never at import time, so ``import ferry`` stays fast and
fork-safe. :func:`init` has a private twin that takes the environment as an argument, so tests can fake torchrun.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import os
from collections.abc import Mapping

try:
    import torch
    from torch import nn
except ModuleNotFoundError as _err:  # `import ferry.distributed` names what to install
    from ferry._lazy import missing_torch

    raise missing_torch("ferry.distributed", _err) from _err

from ferry import _dist
from ferry.devices import pick_device
from ferry.errors import ArgumentError, DistributedError
from ferry.placement import place

__all__ = ["barrier", "init", "is_main", "rank", "world_size", "wrap"]

_STRATEGIES = ("ddp", "fsdp")
# The backend init() chooses for a device type; anything else runs on gloo.
_DEFAULT_BACKENDS = {"cuda": "nccl", "xpu": "xccl"}


def _check_backend(backend: object) -> str:
    """Return ``backend`` if this torch build can use it, else raise ArgumentError naming those it can."""
    names = [name for name in ("gloo", "nccl", "mpi", "ucc", "xccl") if _backend_available(name)]
    if isinstance(backend, str) and backend.strip():
        # "gloo" or a per-device list such as "cpu:gloo,cuda:nccl", as init_process_group takes
        parts = [part.rpartition(":")[2].strip().lower() for part in backend.split(",")]
        if all(part in names for part in parts):
            return backend
    raise ArgumentError(
        f"backend={backend!r} is not a torch.distributed backend this torch build has: it has "
        f"{', '.join(names) or 'none'}. Pass one of those, or backend=None to choose by device (nccl on CUDA, "
        "gloo on the CPU)."
    )


def _backend_available(name: str) -> bool:
    """Whether this torch build has the backend ``name`` (``torch.distributed.is_<name>_available()``)."""
    import torch.distributed as dist

    available = getattr(dist, f"is_{name}_available", None)
    return dist.is_available() and callable(available) and bool(available())


def _init(backend: str | None, *, environ: Mapping[str, str]) -> torch.device:
    """:func:`init` with the environment passed in."""
    if backend is not None:
        _check_backend(backend)
    launch = _dist.launch(environ)
    if launch is None:
        return pick_device()
    import torch.distributed as dist

    if not dist.is_available():
        raise DistributedError(
            f"this process was launched as rank {launch.rank} of {launch.world_size}, but this torch build has no "
            "torch.distributed. Install a torch build with distributed support (the Linux wheels have it).",
            variables={name: environ[name] for name in _dist.LAUNCH_VARIABLES if name in environ},
        )
    device = pick_device()
    if dist.is_initialized():
        return device
    if backend is None:
        backend = _DEFAULT_BACKENDS.get(device.type, "gloo")
        _check_backend(backend)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group(backend, device_id=device)
    else:
        dist.init_process_group(backend)
    _own_teardown(dist.group.WORLD)
    return device


#: How long the teardown at exit waits for the other ranks, in seconds (a rank that died is not waited for longer).
TEARDOWN_TIMEOUT = 60.0
_OWNED: list[object] = []  # the process group init() created, while it is up
_AT_EXIT: list[bool] = []  # [True] once _at_exit is registered


def _own_teardown(group: object) -> None:
    """At exit, end the group :func:`init` created: a barrier (with a timeout), then ``destroy_process_group``.

    Python destroys a process group that is still up in no particular order at exit; with gloo that can abort the
    process ("terminate called without an active exception", SIGABRT). PyTorch asks scripts to destroy the group
    themselves; ferry does it for the group it created, so scripts need no teardown code (their own stays harmless).
    """
    _register_at_exit()
    _OWNED[:] = [group]


def _register_at_exit() -> None:
    """Register :func:`_at_exit` once; :func:`init` and :func:`wrap` call it when a process group is up."""
    if not _AT_EXIT:
        atexit.register(_at_exit)
        _AT_EXIT.append(True)


def _at_exit() -> None:
    """What ferry does as the interpreter exits: end the group init() created, then let gloo's workers settle."""
    try:
        _teardown()
    finally:
        _dist.let_gloo_workers_settle()


def _teardown(timeout: float | None = None) -> None:
    """End the process group init() created, if it is still the one up (see :func:`_own_teardown`)."""
    import torch.distributed as dist

    owned, _OWNED[:] = list(_OWNED), []
    if not owned or not (dist.is_available() and dist.is_initialized()) or dist.group.WORLD is not owned[0]:
        return  # never created, already destroyed by the script, or replaced by a group of the script's own
    wait = datetime.timedelta(seconds=TEARDOWN_TIMEOUT if timeout is None else timeout)
    # every rank reaches its exit before any destroys its side of the connections; a rank that is gone or stuck
    # makes the barrier fail or time out, and this one leaves anyway (torchrun ends the job)
    with contextlib.suppress(Exception):
        work = dist.barrier(async_op=True)
        if work is not None:
            work.wait(timeout=wait)
    dist.destroy_process_group()


def init(backend: str | None = None) -> torch.device:
    """Initialise the default process group torchrun asked for, bind this process to its device, and return it.

    Under torchrun (``RANK`` and ``WORLD_SIZE`` set) this reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``MASTER_ADDR`` and ``MASTER_PORT``, chooses the device as :func:`ferry.pick_device` does (``cuda:LOCAL_RANK``
    on a GPU machine, the CPU without one, or ``FERRY_DEVICE``), calls ``torch.cuda.set_device`` on CUDA, and
    initialises the default group as ``torch.distributed.init_process_group(backend)`` does with ``env://`` (on CUDA
    it also passes ``device_id``, which binds the NCCL communicator to the device). In a plain single process it
    initialises nothing. Calling it again, or after your own ``init_process_group``, initialises nothing more and
    returns the same device.

    Args:
        backend: ``"nccl"``, ``"gloo"``, ... or a per-device list (``"cpu:gloo,cuda:nccl"``) as
            ``init_process_group`` takes; ``None`` chooses ``nccl`` on CUDA, ``xccl`` on XPU and ``gloo`` otherwise.

    Returns:
        This rank's device: ``cuda:LOCAL_RANK`` on a GPU machine, else ``cpu``; in a single process,
        ``ferry.pick_device()``.

    Raises:
        ArgumentError: ``backend`` is not one this torch build has (the message lists those it has).
        DistributedError: torchrun's variables are incomplete (``RANK`` without ``WORLD_SIZE``...), not integers, or
            out of range; or torch has no ``torch.distributed``. ``variables`` holds what the process saw.
        DeviceError: ``LOCAL_RANK`` is at least the number of GPUs (see :func:`ferry.pick_device`).

    Example:
        >>> init()  # a plain process: no process group, the device pick_device() chooses
        device(type='cpu')
    """
    return _init(backend, environ=os.environ)


def rank() -> int:
    """Return this process's global rank, as ``torch.distributed.get_rank()`` does, but also without a group.

    Returns:
        The process group's rank when one is initialised; else torchrun's ``RANK`` when set (before :func:`init`);
        else 0.

    Raises:
        DistributedError: torchrun's variables are incomplete or inconsistent (see :func:`init`).

    Example:
        >>> rank()
        0
    """
    return _dist.rank()


def world_size() -> int:
    """Return the number of processes, as ``torch.distributed.get_world_size()`` does, but also without a group.

    Returns:
        The process group's size when one is initialised; else torchrun's ``WORLD_SIZE`` when set; else 1.

    Raises:
        DistributedError: torchrun's variables are incomplete or inconsistent (see :func:`init`).

    Example:
        >>> world_size()
        1
    """
    return _dist.world_size()


def is_main() -> bool:
    """Return whether this is rank 0, the process that should log, print and write shared files.

    Raises:
        DistributedError: torchrun's variables are incomplete or inconsistent (see :func:`init`).

    Example:
        >>> is_main()
        True
    """
    return rank() == 0


def barrier() -> None:
    """Wait until every rank gets here, as ``torch.distributed.barrier()`` does; a no-op in a single process.

    Raises:
        DistributedError: this process was launched with other ranks (``WORLD_SIZE`` > 1) but no process group is
            initialised, so it cannot wait for them: call :func:`init` first.

    Example:
        >>> barrier()
    """
    import torch.distributed as dist

    if _dist.process_group() is not None:
        dist.barrier()
        return
    size = world_size()
    if size > 1:
        raise DistributedError(
            f"barrier() with WORLD_SIZE={size} but no process group: this process cannot wait for the other ranks. "
            "Call ferry.distributed.init() first.",
            variables={name: os.environ[name] for name in _dist.LAUNCH_VARIABLES if name in os.environ},
        )


def wrap(model: nn.Module, *, strategy: str = "ddp") -> nn.Module:
    """Place ``model`` on this rank's device and wrap it for data-parallel training.

    Calls :func:`init` (harmless if already called) for the device, moves ``model`` there with
    :func:`ferry.place`, then:

    - ``"ddp"``: returns ``torch.nn.parallel.DistributedDataParallel(model)`` (with ``device_ids=[index]`` on an
      accelerator); gradients are all-reduced in ``backward``. The original module is ``wrapped.module``.
    - ``"fsdp"``: FSDP2, as the PyTorch FSDP2 tutorial does: ``torch.distributed.fsdp.fully_shard`` on each direct
      child module that holds parameters (children sharing a parameter, such as an embedding tied to the output
      layer, in one call together), then on ``model``; returns ``model`` itself, its parameters now ``DTensor``
      shards over all ranks.

    In a single process (no process group) it returns the placed ``model``, unwrapped, whatever ``strategy``.

    A model on ``meta`` (built under :func:`ferry.deferred_init`) is not moved: it is sharded on ``meta``, and
    :func:`ferry.materialize` (or ``Checkpointer.restore``) then gives each rank memory for its own shards only.

    Args:
        model: The module to place and wrap; it is moved in place. Create its optimizer after wrapping.
        strategy: ``"ddp"`` or ``"fsdp"``.

    Returns:
        The wrapped model (``model`` itself for ``"fsdp"`` and in a single process).

    Raises:
        ArgumentError: ``model`` is not an ``nn.Module`` or is already wrapped, or ``strategy`` is not ``"ddp"``
            or ``"fsdp"``.
        DistributedError: torchrun's variables are incomplete or inconsistent (see :func:`init`).
        DeviceError: this rank's device does not exist (see :func:`ferry.pick_device`).

    Example:
        >>> model = wrap(nn.Linear(2, 2))  # a plain process: placed, not wrapped
        >>> type(model).__name__, model.weight.device
        ('Linear', device(type='cpu'))
    """
    if strategy not in _STRATEGIES:
        raise ArgumentError(
            f'strategy={strategy!r} is not one ferry.distributed.wrap() knows. Pass strategy="ddp" '
            '(DistributedDataParallel) or strategy="fsdp" (FSDP2, parameters sharded across ranks).'
        )
    if not isinstance(model, nn.Module):
        raise ArgumentError(
            f"ferry.distributed.wrap() needs an nn.Module as its first argument, got a {type(model).__name__}. "
            "Pass the model to train."
        )
    from torch.nn.parallel import DistributedDataParallel

    if isinstance(model, DistributedDataParallel) or _is_fsdp(model):
        raise ArgumentError(
            f"the model is already wrapped ({type(model).__name__}): wrapping it again would nest the wrappers. "
            "Pass the unwrapped model (for DistributedDataParallel, wrapped.module)."
        )
    device = init()
    on_meta = any(t.is_meta for t in (*model.parameters(), *model.buffers()))
    if not on_meta:
        place(model, device)
    if _dist.process_group() is None:
        return model
    _register_at_exit()  # the wrapper holds the group past destroy_process_group() (see _dist.let_gloo_workers_settle)
    if strategy == "ddp":
        device_ids = None if device.type == "cpu" else [device]
        return DistributedDataParallel(model, device_ids=device_ids)
    from torch.distributed.fsdp import fully_shard

    built = dict(model.named_parameters(remove_duplicate=False)) if on_meta else {}
    for group in _sharing_groups(model):
        fully_shard(group[0] if len(group) == 1 else group)
    fully_shard(model)
    for name, shard in model.named_parameters(remove_duplicate=False) if on_meta else ():
        if name in built and shard is not built[name]:
            shard._ferry_origin = built[name]  # type: ignore[attr-defined]  # what ferry.materialize replays
    return model


def _sharing_groups(model: nn.Module) -> list[list[nn.Module]]:
    """The direct children of ``model`` that hold parameters, those sharing a parameter (tied weights) together.

    FSDP2 needs modules that share a parameter in one ``fully_shard`` call (``fully_shard([a, b])``); sharding them
    one by one fails at the first forward.
    """
    children = [child for child in model.children() if any(True for _ in child.parameters())]
    owner = list(range(len(children)))  # union-find over the children

    def root(i: int) -> int:
        while owner[i] != i:
            owner[i] = owner[owner[i]]
            i = owner[i]
        return i

    first: dict[int, int] = {}
    for index, child in enumerate(children):
        for param in child.parameters():
            seen = first.setdefault(id(param), index)
            owner[root(index)] = root(seen)
    groups: dict[int, list[nn.Module]] = {}
    for index, child in enumerate(children):
        groups.setdefault(root(index), []).append(child)
    return list(groups.values())


def _is_fsdp(model: nn.Module) -> bool:
    """Whether ``model`` already went through ``fully_shard`` (FSDP2) or is an FSDP1 wrapper."""
    import torch.distributed as dist

    if not dist.is_available():
        return False
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    return isinstance(model, (FSDPModule, FullyShardedDataParallel))
