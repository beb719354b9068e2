"""Runtime device checks: ``with ferry.sanitize(): ...`` watches every torch operation the block runs.

It reports, at the line of your code that caused it:

- a device mismatch before PyTorch's own error, naming the operation, each tensor argument (device, shape, dtype),
  the module whose forward was running (``encoder.layers.3.attn``) and the fix (:class:`ferry.DeviceMismatchError`);
- a move whose result is thrown away (``x.to(device)`` as a statement), and a device this machine does not have;
- a CPU tensor built by a factory (``torch.zeros(n)``, ``torch.from_numpy``, a layer's parameters) inside the
  forward of a module that lives elsewhere, and a mismatch caused by a CPU tensor the same line built;
- ``.numpy()`` of a device tensor, before PyTorch's ``TypeError``;
- ``load_state_dict`` of a ``module.``-prefixed (DataParallel/DDP) state dict into a bare module, or the reverse;
- a model given weights by ``load_state_dict`` and then run for inference in training mode (no ``.eval()``);
- host-device synchronisations (``.item()``, ``.cpu()``, ``.tolist()``, ``.numpy()``, ``bool(t)``, printing),
  counted per line and printed when the block ends.

``FERRY_SANITIZE=1`` turns it on for the whole process when ferry is imported (``FERRY_ON_ERROR`` picks
``on_error``); ``ferry run --sanitize script.py`` runs a script under it. Unset, it costs nothing: no mode, no hooks.
``sanitize(pretend="cuda")`` (``ferry run --sanitize --pretend cuda``) runs the checks on a CPU-only machine against
pretend GPUs (:mod:`ferry.sanitizer.pretend`).
The checks run on the thread that entered the block (torch keeps function modes per thread).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import warnings
import weakref
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Literal

from ferry.errors import ArgumentError, SanitizerWarning
from ferry.sanitizer._frames import SourceLine

if TYPE_CHECKING:
    import torch
    from torch.utils.hooks import RemovableHandle

    from ferry.sanitizer._mode import SanitizerMode
    from ferry.sanitizer._patches import Patches
    from ferry.sanitizer._syncs import AcceleratorTest

__all__ = ["Finding", "SanitizeReport", "Sanitizer", "SourceLine", "sanitize"]

OnError = Literal["raise", "warn", "breakpoint"]
_ON_ERROR = ("raise", "warn", "breakpoint")
#: What ``pretend=`` accepts: the accelerators :mod:`ferry.sanitizer.pretend` can stand in for.
PRETEND_DEVICES = ("cuda",)


@dataclass
class Finding:
    """One problem the sanitizer found.

    Attributes:
        kind: The bug class, named as ferry lint names it: ``input-on-other-device``, ``discarded-tensor-move``,
            ``hardcoded-cuda-device``, ``device-less-tensor-in-forward``, ``numpy-of-device-tensor``,
            ``data-parallel-state-dict``, ``inference-in-train-mode``.
        where: The line of the user's code.
        message: The full message (what, why, the fix).
        count: How many times it happened at that line.
    """

    kind: str
    where: SourceLine
    message: str
    count: int = 1


@dataclass
class SanitizeReport:
    """What a :func:`sanitize` block found; it fills in while the block runs.

    Attributes:
        findings: One :class:`Finding` per kind and line, in the order first seen.
        host_syncs: Host-device synchronisations on accelerator tensors, per line of the user's code.
        optimizer_steps: Training steps: ``optimizer.step()`` calls, where the optimizers that step one after
            another in a round make one step together (a GAN's two optimizers each step once per training step;
            models trained one after the other add their steps up).
        training_host_syncs: The part of ``host_syncs`` made with gradients enabled.
        training_sync_steps: For each line of ``training_host_syncs``: the first and the last training step it
            synchronised in (counted from 0, the steps before the first ``optimizer.step()``), and in how many
            distinct steps.
    """

    findings: list[Finding] = field(default_factory=list)
    host_syncs: Counter[SourceLine] = field(default_factory=Counter)
    optimizer_steps: int = 0
    training_host_syncs: Counter[SourceLine] = field(default_factory=Counter)
    training_sync_steps: dict[SourceLine, tuple[int, int, int]] = field(default_factory=dict)

    def host_syncs_per_step(self) -> dict[SourceLine, float]:
        """The lines that synchronise at every training step, and how often per step (busiest first).

        A training step is an ``optimizer.step()`` (see ``optimizer_steps``). A line counts when it synchronised,
        with gradients enabled, in every training step from the first one it ran in to the last, over two steps at
        least (or in the only one); its rate is its syncs over those steps. So a model trained after another one is
        measured over its own steps, and lines that run less often (logging every N steps), once (a final check)
        or with gradients off (evaluation under ``no_grad``) are left out. Empty when no optimizer stepped (an
        inference script).
        """
        if not self.optimizer_steps:
            return {}
        rates: dict[SourceLine, float] = {}
        for where, count in self.training_host_syncs.items():
            first, last, distinct = self.training_sync_steps.get(where, (0, 0, 0))
            span = last - first + 1
            if distinct == span and (span >= 2 or self.optimizer_steps == 1):
                rates[where] = count / span
        return dict(sorted(rates.items(), key=lambda item: -item[1]))


class Sanitizer:
    """The context manager :func:`sanitize` returns; entering it installs the checks, leaving removes them."""

    def __init__(
        self,
        *,
        on_error: OnError = "raise",
        strict: bool = False,
        is_accelerator: AcceleratorTest | None = None,
        print_report: bool = True,
        pretend: str | None = None,
        device_count: int = 1,
    ) -> None:
        if on_error not in _ON_ERROR:
            raise ArgumentError(f"on_error={on_error!r} is not one of {', '.join(map(repr, _ON_ERROR))}.")
        if pretend is not None and pretend not in PRETEND_DEVICES:
            raise ArgumentError(
                f'pretend={pretend!r}: ferry can only pretend CUDA GPUs. Use pretend="cuda", or pretend=None to '
                f"check against the devices this machine has."
            )
        if pretend is not None and (isinstance(device_count, bool) or not isinstance(device_count, int)):
            raise ArgumentError(f"device_count={device_count!r}: give the number of pretend GPUs, e.g. device_count=2.")
        if pretend is not None and device_count < 1:
            raise ArgumentError(f"device_count={device_count}: pretend at least one GPU, device_count=1.")
        self.pretend = pretend
        self.device_count = device_count
        self._pretending: contextlib.ExitStack | None = None
        self.on_error: OnError = on_error
        self.strict = strict
        self.print_report = print_report
        self.report = SanitizeReport()
        self._is_accelerator = is_accelerator
        self._seen: dict[tuple[str, str, int], Finding] = {}
        self._mode: SanitizerMode | None = None
        self._patches: Patches | None = None
        self._step_hook: RemovableHandle | None = None
        # Weakly keyed: an optimizer freed after its phase must not lend its count to a new one that Python places
        # at the same address (``id()`` is reused), or the new phase is not counted as a step.
        self._stepped_this_round: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._steps_by_optimizer: weakref.WeakKeyDictionary[torch.optim.Optimizer, int] = weakref.WeakKeyDictionary()

    def __enter__(self) -> SanitizeReport:
        from ferry.sanitizer._mode import SanitizerMode
        from ferry.sanitizer._syncs import is_accelerator

        if self.pretend is not None:
            from ferry.sanitizer.pretend import pretend_cuda

            # pretend outside, checks inside: the sanitizer's mode, pushed last, sees each call first (as the user
            # wrote it) and the pretend mode then runs it on the pretend devices
            self._pretending = contextlib.ExitStack()
            self._pretending.enter_context(pretend_cuda(self.device_count))
        self._mode = SanitizerMode(
            emit=self._emit, count_sync=self._count_sync, is_accelerator=self._is_accelerator or is_accelerator
        )
        self._mode.modules.install()
        from ferry.sanitizer._patches import Patches

        self._patches = Patches(self._mode)
        self._patches.install()
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._step_hook = register_optimizer_step_pre_hook(self._before_step)
        self._mode.__enter__()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        return self.report

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Remove the checks (if installed) and print the host-sync summary; what ``__exit__`` does."""
        mode, self._mode = self._mode, None
        pretending, self._pretending = self._pretending, None
        if mode is None:
            return
        patches, self._patches = self._patches, None
        step_hook, self._step_hook = self._step_hook, None
        try:
            if step_hook is not None:
                step_hook.remove()
            mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]  # torch leaves it unannotated
            mode.modules.remove()
            if patches is not None:
                patches.remove()
            strict, self.strict = self.strict, False  # reported as the block ends: warnings, never raised
            try:
                mode.train_mode.close()
            finally:
                self.strict = strict
        finally:
            if pretending is not None:
                pretending.close()
        if self.print_report:
            from ferry.sanitizer._syncs import print_host_syncs

            print_host_syncs(self.report)

    def _count_sync(self, where: SourceLine) -> None:
        import torch

        self.report.host_syncs[where] += 1
        if torch.is_grad_enabled():
            self.report.training_host_syncs[where] += 1
            step = self.report.optimizer_steps  # syncs before a step's optimizer.step() belong to that step
            first, last, distinct = self.report.training_sync_steps.get(where, (step, step - 1, 0))
            self.report.training_sync_steps[where] = (first, step, distinct + (step != last))

    def _before_step(self, optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        """Before ``optimizer.step()``: count the step, and check each state tensor is on its parameter's device."""
        from ferry.sanitizer._optimizer import misplaced_state

        # Optimizers stepping one after another in a round make one training step (a GAN's discriminator and
        # generator). A round ends when one of its optimizers steps again, or when an optimizer steps for the first
        # time after the round's others have stepped before: a model trained after another one.
        stepped, counts = self._stepped_this_round, self._steps_by_optimizer
        new_phase = optimizer not in counts and any(counts.get(other, 0) > 1 for other in stepped)
        if not stepped or optimizer in stepped or new_phase:
            stepped.clear()
            self.report.optimizer_steps += 1
        stepped.add(optimizer)
        counts[optimizer] = counts.get(optimizer, 0) + 1
        message = misplaced_state(optimizer)
        if message is None:
            return
        from ferry.errors import DeviceError
        from ferry.sanitizer._frames import source_line, user_frame

        frame = user_frame()
        if frame is None:
            return
        self._emit("optimizer-state-device", source_line(frame), message, DeviceError(message), frame)

    def _emit(
        self, kind: str, where: SourceLine, message: str, error: Exception | None, frame: FrameType | None
    ) -> None:
        key = (kind, where.file, where.line)
        seen = self._seen.get(key)
        if seen is not None:
            seen.count += 1
        else:
            self._seen[key] = finding = Finding(kind, where, message)
            self.report.findings.append(finding)
        if error is None and not self.strict:
            if seen is None:  # a warning once per line, however often the line runs
                _warn(message, where, frame)
            return
        if self.on_error == "raise":
            raise error if error is not None else SanitizerWarning(message)
        if self.on_error == "warn":
            if seen is None:
                _warn(message, where, frame)
            return
        print(f"ferry sanitize: {message}", file=sys.stderr)
        print(f"ferry sanitize: stopping in the debugger; `up` leads to {where}.", file=sys.stderr)
        sys.breakpointhook()


def _warn(message: str, where: SourceLine, frame: FrameType | None) -> None:
    module = frame.f_globals.get("__name__", "__main__") if frame is not None else "__main__"
    warnings.warn_explicit(message, SanitizerWarning, where.file, where.line, module=str(module))


def sanitize(
    *,
    on_error: OnError = "raise",
    strict: bool = False,
    is_accelerator: AcceleratorTest | None = None,
    pretend: str | None = None,
    device_count: int = 1,
) -> Sanitizer:
    """Check every torch operation run inside the ``with`` block for device bugs, at the user's line of code.

    Args:
        on_error: What a device mismatch or an unavailable device does: ``"raise"`` a :class:`ferry.DeviceError`
            (:class:`ferry.DeviceMismatchError` for a mismatch) before PyTorch's own error; ``"warn"`` with a
            :class:`ferry.SanitizerWarning` and let the operation run; ``"breakpoint"`` print the message and call
            :func:`sys.breakpointhook` (``pdb`` unless ``PYTHONBREAKPOINT`` says otherwise).
        strict: Treat the warnings (discarded move, CPU tensor built in a forward) as errors too: ``on_error``
            decides, and ``"raise"`` raises the :class:`ferry.SanitizerWarning`.
        is_accelerator: ``device -> bool``: which devices count for host syncs. Default: all but ``cpu`` and
            ``meta``, so tensors on pretend GPUs (they report ``cuda:i``) count.
        pretend: ``"cuda"``: run the block on this machine's CPU as if it had ``device_count`` CUDA GPUs
            (:func:`ferry.sanitizer.pretend.pretend_cuda`): ``.cuda()``, ``device="cuda"`` and
            ``torch.cuda.is_available()`` work, tensors report ``cuda:i`` while their data stays on the CPU, and
            every check above runs against those devices. It cannot model kernels (numerics are the CPU's), memory
            (no out-of-memory), speed, CUDA-only ops and extensions, or autocast dtypes: see the docstring of
            :mod:`ferry.sanitizer.pretend` for the full list. ``None`` (default): the devices this machine has.
        device_count: How many pretend GPUs there are with ``pretend="cuda"`` (``cuda:0`` ... ``cuda:{n-1}``).

    Returns:
        A context manager whose ``as`` value is the :class:`SanitizeReport` (``report.host_syncs``,
        ``report.findings``), filled in as the block runs; the busiest host-sync lines are printed to stderr at
        the end of the block.

    Raises:
        ArgumentError: ``on_error`` is not one of the three, ``pretend`` is not ``None`` or ``"cuda"``, or
            ``device_count`` is below 1.

    Example:
        >>> import torch, ferry
        >>> with ferry.sanitize() as report:
        ...     total = torch.ones(3).sum()
        >>> report.findings
        []
        >>> with ferry.sanitize(pretend="cuda") as report:  # a CPU-only machine, checked as if it had a GPU
        ...     y = torch.ones(3).cuda() * 2
        >>> y.device, report.findings
        (device(type='cuda', index=0), [])
    """
    return Sanitizer(
        on_error=on_error, strict=strict, is_accelerator=is_accelerator, pretend=pretend, device_count=device_count
    )


def _sanitize_process(on_error: str | None = None) -> Sanitizer:
    """Turn the sanitizer on for the rest of the process (``FERRY_SANITIZE=1``); the summary prints at exit."""
    choice = on_error or os.environ.get("FERRY_ON_ERROR") or "raise"
    if choice not in _ON_ERROR:
        raise ArgumentError(f"FERRY_ON_ERROR={choice!r} is not one of {', '.join(_ON_ERROR)}.")
    sanitizer = Sanitizer(on_error=choice)  # type: ignore[arg-type]  # checked against _ON_ERROR just above
    sanitizer.__enter__()
    atexit.register(sanitizer.close)
    return sanitizer


def _from_environment(environ: dict[str, str] | os._Environ[str] = os.environ) -> Sanitizer | None:
    """Sanitize the whole process when ``FERRY_SANITIZE`` is set to anything but ``""``/``0``; else do nothing."""
    if environ.get("FERRY_SANITIZE", "") in ("", "0"):
        return None
    return _sanitize_process(environ.get("FERRY_ON_ERROR"))
