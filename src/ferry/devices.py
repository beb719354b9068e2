"""Choosing and describing devices.

Three public functions:

- :func:`resolve_device` turns a spec (``"cuda"``, ``1``, ``torch.device("cuda", 1)``) into a canonical
  ``torch.device`` that this machine can serve, or raises :class:`~ferry.errors.DeviceError` naming those it has.
- :func:`pick_device` chooses the device a program should use: an explicit spec, else ``FERRY_DEVICE``, else the
  accelerator of ``LOCAL_RANK`` under torchrun, else the machine's accelerator, else the CPU.
- :func:`describe_devices` lists every device with its name and memory (what ``ferry env`` prints).

Resolving and picking never initialise CUDA (see :func:`pick_device` for how), so a process may still fork workers
that use the GPU. Describing does initialise it.

Resolving and picking have private twins that take the machine as arguments (``probe``, ``environ``), and the CPU
record takes the procfs paths, so tests can fake two GPUs or a torchrun environment without monkeypatching torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import platform
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeAlias

import torch

from ferry.errors import DeviceError

DeviceLike: TypeAlias = "str | int | torch.device"

__all__ = ["DeviceLike", "DeviceRecord", "describe_devices", "pick_device", "resolve_device"]

_AUTO = "auto"
_ENV_DEVICE = "FERRY_DEVICE"
_ENV_LOCAL_RANK = "LOCAL_RANK"
_UNINDEXED = ("cpu", "meta")
# Device types a typo is matched against for a "did you mean" hint.
_KNOWN_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hpu", "mtia", "xla")
# Words people use for a GPU that are not PyTorch device types (or not the ones they mean).
_HINTS = {
    "gpu": 'PyTorch names GPUs by backend: "cuda" (NVIDIA and AMD ROCm), "xpu" (Intel) or "mps" (Apple)',
    "hip": 'PyTorch addresses AMD ROCm GPUs as "cuda"',
    "rocm": 'PyTorch addresses AMD ROCm GPUs as "cuda"',
}


@dataclasses.dataclass(frozen=True)
class _Accelerators:
    """What a probe saw: the machine's accelerator type and how many of its devices are visible.

    Attributes:
        type: ``"cuda"`` (NVIDIA or ROCm), ``"xpu"``, ``"mps"``, ... or ``None`` when there is none.
        count: Number of visible devices of that type; 0 when ``type`` is ``None``.
        current: The accelerator's current device index (``torch.cuda.current_device()``) when its runtime is
            already initialised, else 0. Bare ``"cuda"`` means this device, as it does in PyTorch.
    """

    type: str | None
    count: int
    current: int = 0

    def available(self) -> list[str]:
        """Return the devices this machine has as strings, accelerators first: ``["cuda:0", "cuda:1", "cpu"]``."""
        accelerators = [f"{self.type}:{index}" for index in range(self.count)] if self.type else []
        return [*accelerators, "cpu"]


_Probe: TypeAlias = Callable[[], _Accelerators]


def _probe() -> _Accelerators:
    """Look at the real machine without initialising any accelerator runtime.

    ``torch.accelerator.current_accelerator()`` reads the compile-time accelerator and does not poison fork;
    ``torch.cuda.device_count()`` asks NVML (AMD SMI on ROCm) before CUDA is initialised and creates no context;
    ``torch.xpu.device_count()`` likewise asks Level Zero Sysman. ``torch.cuda.is_available()`` is *not* used: it
    calls ``cudaGetDeviceCount``, which initialises the driver and makes forked children unable to use CUDA.
    """
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:  # torch >= 2.6
        device = accelerator.current_accelerator()
        kinds: tuple[str, ...] = () if device is None else (device.type,)
    else:  # torch 2.4 and 2.5: try the backends a build can have, in the order torch.accelerator prefers them
        kinds = ("cuda", "xpu", "mps")
    for kind in kinds:
        count = _device_count(kind)
        if count > 0:
            return _Accelerators(kind, count, _current_index(kind))
    return _Accelerators(None, 0)


def _device_count(kind: str) -> int:
    """Return how many ``kind`` devices are visible, without initialising the runtime (see :func:`_probe`)."""
    if kind == "mps":
        return 1 if torch.backends.mps.is_available() else 0
    count = getattr(getattr(torch, kind, None), "device_count", None)
    return int(count()) if callable(count) else 0


def _current_index(kind: str) -> int:
    """Return ``kind``'s current device index if its runtime is already initialised, else 0 (never initialises)."""
    module = getattr(torch, kind, None)
    is_initialized = getattr(module, "is_initialized", None)
    current_device = getattr(module, "current_device", None)
    if callable(is_initialized) and callable(current_device) and is_initialized():
        return int(current_device())
    return 0


def _not_available(spec: object, accelerators: _Accelerators, *, why: str = "") -> DeviceError:
    available = accelerators.available()
    return DeviceError(
        f'device "{spec}" is not available{why}: this machine has {", ".join(available)}. '
        "Use one of those, or ferry.pick_device() to choose automatically.",
        requested=spec,
        available=available,
    )


def _typo_hint(spec: str) -> str:
    """Say what is wrong with a spec ``torch.device`` refused: a bad type (with a guess) or a bad index."""
    if spec == _AUTO:
        return ' ("auto" is not a device; ferry.pick_device() takes it and chooses one)'
    kind, colon, _ = spec.strip().partition(":")
    if kind in _HINTS:
        return f" ({_HINTS[kind]})"
    if colon and kind in _KNOWN_TYPES:
        return f' (malformed index; write "{kind}:0", "{kind}:1"...)'
    matches = difflib.get_close_matches(kind.lower(), _KNOWN_TYPES, n=1, cutoff=0.6)
    return f' (not a device type; did you mean "{matches[0]}"?)' if matches else " (not a device spec)"


def _resolve_device(spec: DeviceLike, *, probe: _Probe) -> torch.device:
    """:func:`resolve_device` on the machine ``probe`` describes; ``probe`` is not called for ``cpu``/``meta``."""
    if isinstance(spec, bool) or not isinstance(spec, (str, int, torch.device)):
        raise _not_available(
            spec, probe(), why=f" (a device spec is a str, int or torch.device, not {type(spec).__name__})"
        )
    if isinstance(spec, int):
        accelerators = probe()
        if accelerators.type is None or not 0 <= spec < accelerators.count:
            raise _not_available(spec, accelerators, why=" (an int names an accelerator by index)")
        return torch.device(accelerators.type, spec)
    try:
        device = torch.device(spec)
    except (RuntimeError, ValueError):
        raise _not_available(spec, probe(), why=_typo_hint(str(spec))) from None
    if device.type in _UNINDEXED:
        return torch.device(device.type)
    accelerators = probe()
    if device.type != accelerators.type:
        raise _not_available(spec, accelerators, why=_typo_hint(device.type) if device.type in _HINTS else "")
    index = accelerators.current if device.index is None else device.index
    if index >= accelerators.count:
        raise _not_available(spec, accelerators)
    return torch.device(device.type, index)


def resolve_device(spec: DeviceLike) -> torch.device:
    """Return ``spec`` as a canonical ``torch.device`` that this machine can serve.

    Indexed device types always come back with an index, so two canonical devices compare equal exactly when they
    are the same device (``torch.device("cuda") != torch.device("cuda:0")`` in PyTorch). A bare type means the
    current device, as in PyTorch: ``"cuda"`` becomes ``cuda:0``, or ``cuda:N`` after ``torch.cuda.set_device(N)``.
    ``cpu`` and ``meta`` come back without an index and are always accepted. An int is an accelerator index, as in
    ``torch.device(1)``. ``"auto"`` is not a device: use :func:`pick_device` for that. Does not initialise CUDA
    (see :func:`pick_device`).

    Args:
        spec: ``"cuda:1"``, ``"cuda"``, ``"cpu"``, ``"meta"``, ``"mps"``, an int or a ``torch.device``.

    Returns:
        The canonical device, e.g. ``torch.device("cuda", 0)`` for ``"cuda"``.

    Raises:
        DeviceError: ``spec`` is malformed (``"cdua"``, with a "did you mean" hint) or names a device this machine
            lacks (``"cuda:3"`` with two GPUs, ``"cuda"`` on a CPU-only build, ``"mps"`` on Linux). The message
            lists the devices it has; ``requested`` is ``spec`` and ``available`` those devices, as strings.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
        >>> resolve_device(torch.device("meta"))
        device(type='meta')
    """
    cached = _RESOLVED.get(spec) if isinstance(spec, (str, torch.device)) else None
    if cached is not None:
        return cached
    device = _resolve_device(spec, probe=_probe)
    if isinstance(spec, (str, torch.device)):
        explicit_index = spec.index is not None if isinstance(spec, torch.device) else ":" in spec
        if explicit_index or device.type in _UNINDEXED:
            _RESOLVED[spec] = device
    return device


#: Specs already resolved that name one fixed device (an explicit index, or cpu/meta): devices do not disappear
#: from a running process, so they need no second probe. Bare types ("cuda") are not cached: they follow the
#: current device.
_RESOLVED: dict[str | torch.device, torch.device] = {}


def _pick_device(spec: DeviceLike | None, *, environ: Mapping[str, str], probe: _Probe) -> torch.device:
    """:func:`pick_device` with the environment variables and the machine passed in."""
    if spec is not None and spec != _AUTO:
        return _resolve_device(spec, probe=probe)
    from_env = environ.get(_ENV_DEVICE, "").strip()
    if from_env and from_env != _AUTO:
        try:
            return _resolve_device(from_env, probe=probe)
        except DeviceError as err:
            raise DeviceError(
                f'{_ENV_DEVICE}="{from_env}" names a device this machine cannot serve: this machine has '
                f"{', '.join(err.available)}. Set {_ENV_DEVICE} to one of those, or unset it "
                f"(unset {_ENV_DEVICE}) to let ferry.pick_device() choose automatically.",
                requested=from_env,
                available=err.available,
            ) from None
    accelerators = probe()
    local_rank = environ.get(_ENV_LOCAL_RANK, "").strip()
    if local_rank:
        return _device_of_rank(local_rank, accelerators)
    if accelerators.type is not None and accelerators.count > 0:
        return torch.device(accelerators.type, accelerators.current)
    return torch.device("cpu")


def _device_of_rank(local_rank: str, accelerators: _Accelerators) -> torch.device:
    available = accelerators.available()
    if not local_rank.isdigit():
        raise DeviceError(
            f'{_ENV_LOCAL_RANK}="{local_rank}" is not a rank: torchrun sets it to the process\'s index on its node '
            f"(0, 1, ...). Fix the launcher, unset {_ENV_LOCAL_RANK}, or pass a device to ferry.pick_device().",
            requested=local_rank,
            available=available,
        )
    rank = int(local_rank)
    if accelerators.type is None or accelerators.count == 0:
        return torch.device("cpu")
    if rank >= accelerators.count:
        kind, count = accelerators.type, accelerators.count
        processes = "1 process" if count == 1 else f"{count} processes"
        raise DeviceError(
            f"{_ENV_LOCAL_RANK}={rank} but this machine has {count} {kind} device(s) "
            f"({', '.join(available[:-1])}): processes would share a device, which is slow and runs out of memory. "
            f"Launch at most {processes} per node (torchrun --nproc-per-node={count}), or, if each process "
            f"was given its own device (CUDA_VISIBLE_DEVICES per rank), set {_ENV_DEVICE}={kind}:0.",
            requested=f"{kind}:{rank}",
            available=available,
        )
    return torch.device(accelerators.type, rank)


def pick_device(spec: DeviceLike | None = None) -> torch.device:
    """Choose the device this process should use, as a canonical ``torch.device``.

    In order of precedence:

    1. ``spec``, when given and not ``"auto"``: resolved as :func:`resolve_device` does.
    2. The ``FERRY_DEVICE`` environment variable (``"cuda:1"``, ``"cpu"``...), unless empty or ``"auto"``. It
       applies to every process that reads it, torchrun ranks included.
    3. Under torchrun (``LOCAL_RANK`` set): the accelerator of that rank, ``cuda:<LOCAL_RANK>``; the CPU on a
       machine with no accelerator. ``LOCAL_RANK`` at or past the number of accelerators raises rather than
       silently putting two processes on one device.
    4. The machine's accelerator (CUDA or ROCm, XPU, MPS): its current device, ``cuda:0`` unless
       ``torch.cuda.set_device`` was called.
    5. ``cpu``.

    Fork safety: this never initialises CUDA, so a process may call it and then fork workers that use the GPU.
    The accelerator type comes from ``torch.accelerator.current_accelerator()`` (compile-time, no runtime call;
    on torch 2.4/2.5 each backend's ``device_count`` is tried instead) and the count from
    ``torch.cuda.device_count()``, which asks NVML (AMD SMI on ROCm) and creates no CUDA context, or
    ``torch.xpu.device_count()``, which asks Level Zero Sysman. ``torch.cuda.is_available()`` is avoided because
    it calls ``cudaGetDeviceCount``. Caveat, from PyTorch itself: when NVML cannot answer (no NVML library, or
    MIG UUIDs in ``CUDA_VISIBLE_DEVICES``), ``torch.cuda.device_count()`` falls back to ``cudaGetDeviceCount``.

    Args:
        spec: A device to use (as for :func:`resolve_device`), or ``None``/``"auto"`` to choose.

    Returns:
        The chosen device, always with an index for accelerators (``cuda:0``, never bare ``cuda``).

    Raises:
        DeviceError: ``spec`` names a device this machine cannot serve; or ``FERRY_DEVICE`` does (the message says
            the value came from ``FERRY_DEVICE`` and how to fix or unset it); or, under torchrun, ``LOCAL_RANK`` is
            not a non-negative integer or is at least the number of accelerators. With ``spec`` ``None``/``"auto"``
            and none of these variables set, it never raises.

    Example:
        >>> pick_device("cpu")
        device(type='cpu')
    """
    return _pick_device(spec, environ=os.environ, probe=_probe)


@dataclasses.dataclass(frozen=True)
class DeviceRecord:
    """One device of this machine, as :func:`describe_devices` reports it.

    Attributes:
        type: The PyTorch device type: ``"cpu"``, ``"cuda"`` (NVIDIA or ROCm), ``"xpu"``, ``"mps"``...
        index: The device index for accelerators (``0`` for ``cuda:0``); ``None`` for the CPU.
        name: Human-readable model name, e.g. ``"NVIDIA H100 80GB HBM3"`` or the CPU's model name.
        total_memory: Total memory in bytes (the CPU: installed RAM), or ``None`` when unknown.
        free_memory: Memory free for new allocations in bytes (the CPU: ``MemAvailable``), or ``None`` when unknown.
    """

    type: str
    index: int | None
    name: str
    total_memory: int | None
    free_memory: int | None

    @property
    def device(self) -> torch.device:
        """The device as a ``torch.device``; its string form is ``"cuda:0"``, ``"cpu"``..."""
        return torch.device(self.type, self.index) if self.index is not None else torch.device(self.type)


def describe_devices() -> list[DeviceRecord]:
    """List every device of this machine with its name and memory: the accelerators in index order, then the CPU.

    Accelerator figures come from the device's runtime: ``torch.cuda.get_device_properties`` and
    ``torch.cuda.mem_get_info`` for CUDA/ROCm (``torch.xpu`` likewise; for MPS the total is
    ``torch.mps.recommended_max_memory()`` and the free memory is unknown). Those calls initialise CUDA and create
    a context on every GPU, so unlike :func:`pick_device` this function is not fork-safe: call it in the process
    that will use the GPUs, or in a throwaway one (as ``ferry env`` does). The CPU's name comes from
    ``/proc/cpuinfo`` (else ``platform.processor()``, else ``platform.machine()``), its memory from
    ``/proc/meminfo`` (``MemTotal``, ``MemAvailable``; else ``os.sysconf``).

    Returns:
        One :class:`DeviceRecord` per device, the CPU last; memory in bytes.

    Raises:
        RuntimeError: From PyTorch, when a visible accelerator cannot be queried (e.g. a broken driver).
    """
    accelerators = _probe()
    kind = accelerators.type
    records = [_accelerator_record(kind, index) for index in range(accelerators.count)] if kind else []
    return [*records, _cpu_record()]


def _accelerator_record(kind: str, index: int) -> DeviceRecord:
    name, total, free = kind, None, None
    if kind == "mps":
        name = f"Apple {platform.machine()} GPU (MPS)"
        recommended = getattr(torch.mps, "recommended_max_memory", None)  # torch >= 2.5
        total = int(recommended()) if callable(recommended) else None
        return DeviceRecord(kind, index, name, total, None)
    module = getattr(torch, kind, None)
    get_properties = getattr(module, "get_device_properties", None)
    if callable(get_properties):
        properties = get_properties(index)
        name = str(getattr(properties, "name", kind))
        total = getattr(properties, "total_memory", None)
    mem_get_info = getattr(module, "mem_get_info", None)
    if callable(mem_get_info):
        # some drivers do not report free memory (e.g. older XPU stacks): keep the total from the properties
        with contextlib.suppress(RuntimeError):
            free, total = (int(value) for value in mem_get_info(index))
    return DeviceRecord(kind, index, name, None if total is None else int(total), free)


def _cpu_record(*, cpuinfo: Path = Path("/proc/cpuinfo"), meminfo: Path = Path("/proc/meminfo")) -> DeviceRecord:
    """Describe the CPU from ``cpuinfo`` and ``meminfo`` (Linux procfs formats), with portable fallbacks."""
    name = _read_field(cpuinfo, "model name") or platform.processor() or platform.machine() or "unknown CPU"
    total = _read_kib(meminfo, "MemTotal")
    free = _read_kib(meminfo, "MemAvailable")
    if total is None:
        total = _sysconf_bytes("SC_PHYS_PAGES")
    if free is None:
        free = _sysconf_bytes("SC_AVPHYS_PAGES")
    return DeviceRecord("cpu", None, name, total, free)


def _read_field(path: Path, key: str) -> str | None:
    """Return the value of the first ``key : value`` line of ``path``, or ``None`` (missing file or key)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        field, sep, value = line.partition(":")
        if sep and field.strip() == key and value.strip():
            return value.strip()
    return None


def _read_kib(path: Path, key: str) -> int | None:
    """Return a ``/proc/meminfo`` field (``"MemTotal:  16333452 kB"``) in bytes, or ``None``."""
    value = _read_field(path, key)
    if value is None:
        return None
    number, _, unit = value.partition(" ")
    if not number.isdigit() or unit.strip() not in ("kB", ""):
        return None
    return int(number) * (1024 if unit.strip() == "kB" else 1)


def _sysconf_bytes(name: str) -> int | None:
    """Return ``os.sysconf(name)`` pages in bytes, or ``None`` where the platform lacks it (Windows, macOS)."""
    try:
        pages = os.sysconf(name)
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None
