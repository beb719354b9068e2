"""Runtime device checks: ``with ferry.sanitize(): ...`` watches every torch operation the block runs.

It reports, at the line of your code that caused it:

- a device mismatch before PyTorch's own error, naming the operation, each tensor argument (device, shape, dtype),
  the module whose forward was running (``encoder.layers.3.attn``) and the fix (:class:`ferry.DeviceMismatchError`);
- a move whose result is thrown away (``x.to(device)`` as a statement), and a device this machine does not have;
- a CPU tensor built by a factory (``torch.zeros(n)``) inside the forward of a module that lives elsewhere;
- host-device synchronisations (``.item()``, ``.cpu()``, ``.tolist()``, ``.numpy()``, ``bool(t)``, printing),
  counted per line and printed when the block ends.

``FERRY_SANITIZE=1`` turns it on for the whole process when ferry is imported (``FERRY_ON_ERROR`` picks
``on_error``); ``ferry run --sanitize script.py`` runs a script under it. Unset, it costs nothing: no mode, no hooks.
The checks run on the thread that entered the block (torch keeps function modes per thread).
"""

from __future__ import annotations

import atexit
import os
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Literal

from ferry.errors import ArgumentError, SanitizerWarning
from ferry.sanitize._frames import SourceLine

if TYPE_CHECKING:
    from ferry.sanitize._mode import SanitizerMode
    from ferry.sanitize._syncs import AcceleratorTest

__all__ = ["Finding", "SanitizeReport", "Sanitizer", "SourceLine", "sanitize"]

OnError = Literal["raise", "warn", "breakpoint"]
_ON_ERROR = ("raise", "warn", "breakpoint")


@dataclass
class Finding:
    """One problem the sanitizer found.

    Attributes:
        kind: The bug class, named as ferry lint names it: ``input-on-other-device``, ``discarded-tensor-move``,
            ``hardcoded-cuda-device``, ``device-less-tensor-in-forward``.
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
    """

    findings: list[Finding] = field(default_factory=list)
    host_syncs: Counter[SourceLine] = field(default_factory=Counter)


class Sanitizer:
    """The context manager :func:`sanitize` returns; entering it installs the checks, leaving removes them."""

    def __init__(
        self,
        *,
        on_error: OnError = "raise",
        strict: bool = False,
        is_accelerator: AcceleratorTest | None = None,
        print_report: bool = True,
    ) -> None:
        if on_error not in _ON_ERROR:
            raise ArgumentError(f"on_error={on_error!r} is not one of {', '.join(map(repr, _ON_ERROR))}.")
        self.on_error: OnError = on_error
        self.strict = strict
        self.print_report = print_report
        self.report = SanitizeReport()
        self._is_accelerator = is_accelerator
        self._seen: dict[tuple[str, str, int], Finding] = {}
        self._mode: SanitizerMode | None = None

    def __enter__(self) -> SanitizeReport:
        from ferry.sanitize._mode import SanitizerMode
        from ferry.sanitize._syncs import is_accelerator

        self._mode = SanitizerMode(
            emit=self._emit, count_sync=self._count_sync, is_accelerator=self._is_accelerator or is_accelerator
        )
        self._mode.modules.install()
        self._mode.__enter__()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        return self.report

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Remove the checks (if installed) and print the host-sync summary; what ``__exit__`` does."""
        mode, self._mode = self._mode, None
        if mode is None:
            return
        mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        mode.modules.remove()
        if self.print_report:
            from ferry.sanitize._syncs import print_host_syncs

            print_host_syncs(self.report.host_syncs)

    def _count_sync(self, where: SourceLine) -> None:
        self.report.host_syncs[where] += 1

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
            ``meta``.

    Returns:
        A context manager whose ``as`` value is the :class:`SanitizeReport` (``report.host_syncs``,
        ``report.findings``), filled in as the block runs; the busiest host-sync lines are printed to stderr at
        the end of the block.

    Raises:
        ArgumentError: ``on_error`` is not one of the three.

    Example:
        >>> import torch, ferry
        >>> with ferry.sanitize() as report:
        ...     total = torch.ones(3).sum()
        >>> report.findings
        []
    """
    return Sanitizer(on_error=on_error, strict=strict, is_accelerator=is_accelerator)


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
