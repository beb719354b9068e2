"""Run the correct GPU programs of ``programs/`` on pretend GPUs, with and without the sanitizer.

Usage::

    python benchmarks/detection/run_programs.py [--repeat 3] [--json out.json] [program.py ...]

Each program (a training or inference script modeled on a public example; its docstring names the source) runs in
this interpreter as ``__main__`` under ``ferry.sanitize(pretend="cuda")``, the way ``ferry run --sanitize --pretend
cuda`` runs it, and must finish with no finding and no exception: a checker that crashes on, or complains about,
correct code is worse than none. A program that prints a line starting with ``done`` must end with it. Then each
runs ``--repeat`` times under ``pretend_cuda()`` alone and under the sanitizer, and the median wall times give the
sanitizer's overhead (interpreter start-up excluded). Exit status 1 when any program fails or reports a finding.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import io
import json
import os
import random
import re
import runpy
import signal
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch

import ferry
from ferry.sanitizer.pretend import pretend_cuda

PROGRAMS = Path(__file__).resolve().parent / "programs"
#: programs written for several GPUs, and how many to pretend
DEVICE_COUNT = {"data_parallel.py": 2}


class _Clock:
    """A clock for the program under test that advances 1 ms per reading, so timings it prints repeat exactly."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now

    def ns(self) -> int:
        return int(self() * 1e9)


@contextlib.contextmanager
def _frozen_clock() -> Any:
    """``time.time`` and ``time.perf_counter`` (what programs time themselves with) read :class:`_Clock`.

    ``time.monotonic`` keeps the real time: ``multiprocessing`` queues (DataLoader workers) wait with it.
    """
    saved = (time.time, time.perf_counter, time.time_ns, time.perf_counter_ns)
    clock = _Clock()
    time.time = time.perf_counter = clock  # type: ignore[assignment]
    time.time_ns = time.perf_counter_ns = clock.ns  # type: ignore[assignment]
    try:
        yield
    finally:
        time.time, time.perf_counter, time.time_ns, time.perf_counter_ns = saved


def run_program(
    path: Path, *, sanitize: bool, pretend: bool = True, timeout: float | None = None, repeatable: bool = False
) -> dict[str, Any]:
    """Run ``path`` once as ``__main__`` in a temporary folder; its findings, error, output and wall time.

    ``pretend=False`` runs it on this machine's own devices (a CPU-only machine here), with the sanitizer when
    ``sanitize``. ``timeout`` (seconds) stops a program that runs too long with ``TimeoutError`` (its error).
    The global random number generators are seeded with 0 first, so a program's output is repeatable;
    ``repeatable`` also gives the program a clock that advances 1 ms per reading (the timings it prints repeat, so
    a mutant's output can be compared line by line with the clean program's; the wall time is still measured).
    """
    count = DEVICE_COUNT.get(path.name, 1)
    findings: list[dict[str, Any]] = []
    error = None
    report = None
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    argv = sys.argv
    environ = dict(os.environ)  # VDSR's eval sets `CUDA_VISIBLE_DEVICES` for the process
    state = torch.random.get_rng_state()
    printer = builtins.print
    torch.manual_seed(0)
    random.seed(0)
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        os.chdir(folder)
        sys.argv = [str(path)]
        checks: Any
        if sanitize:
            checks = ferry.sanitize(pretend="cuda", device_count=count) if pretend else ferry.sanitize()
        else:
            checks = pretend_cuda(count) if pretend else contextlib.nullcontext()
        if timeout:
            signal.signal(signal.SIGALRM, _too_long)
            signal.setitimer(signal.ITIMER_REAL, timeout)
        clock = _frozen_clock() if repeatable else contextlib.nullcontext()
        started = time.perf_counter()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), clock, checks as report:
                runpy.run_path(str(path), run_name="__main__")
        except BaseException as failure:  # a program's failure is the result, whatever it is
            error = "".join(traceback.format_exception_only(type(failure), failure)).strip()
            error += "\n" + "".join(traceback.format_tb(failure.__traceback__)[-3:])
        finally:
            seconds = time.perf_counter() - started
            if timeout:
                signal.setitimer(signal.ITIMER_REAL, 0)
            os.chdir(cwd)
            sys.argv = argv
            torch.random.set_rng_state(state)
            torch.backends.cudnn.benchmark = False
            # what a fresh process starts with: deeplab-pytorch's `test` turns autograd off for the whole process
            # (`torch.set_grad_enabled(False)`), and a program that fails before it turns it back on would leave
            # the next program run in this interpreter without gradients
            torch.set_grad_enabled(True)
            torch.set_default_dtype(torch.float32)
            os.environ.clear()
            os.environ.update(environ)
            builtins.print = printer  # a worker process of a distributed script may silence print
            # a program that failed before its `destroy_process_group()` leaves its group behind, and the next
            # program run in this interpreter would fail at its `init_process_group` (a fresh process has none)
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()
    if sanitize and report is not None:
        findings = [
            {"kind": f.kind, "line": f.where.line, "file": f.where.file, "message": f.message.splitlines()[0]}
            for f in report.findings
        ]
    stdout = out.getvalue()
    last = (stdout.strip().splitlines() or [""])[-1]
    return {
        "seconds": seconds,
        "findings": findings,
        "error": error,
        "last_line": last,
        "stdout": stdout,
        "stderr": err.getvalue(),
    }


def _too_long(signum: int, frame: Any) -> None:
    raise TimeoutError("the program ran past its time limit")


def _run(path: Path, *, sanitize: bool) -> dict[str, Any]:
    """``run_program`` on pretend GPUs, findings as one line each."""
    result = run_program(path, sanitize=sanitize)
    result["findings"] = [f"{f['kind']} at {f['file']}:{f['line']}: {f['message']}" for f in result["findings"]]
    del result["stdout"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", nargs="*", type=Path, help="default: every programs/*.py")
    parser.add_argument("--repeat", type=int, default=0, help="timed runs of each for the overhead (default 0)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    paths = [p.resolve() for p in args.programs] or sorted(PROGRAMS.glob("*.py"))
    results = []
    failed = 0
    for path in paths:
        checked = _run(path, sanitize=True)
        # a program that prints a `done` line must get there (the 20 programs all do; not every held-out one)
        ends = re.search(r"print\(\s*f?[\"']done", path.read_text()) is None or checked["last_line"].startswith("done")
        ok = checked["error"] is None and not checked["findings"] and ends
        failed += not ok
        row: dict[str, Any] = {"program": path.name, "ok": ok, **checked}
        if args.repeat and ok:
            alone = [_run(path, sanitize=False)["seconds"] for _ in range(args.repeat)]
            sanitized = [_run(path, sanitize=True)["seconds"] for _ in range(args.repeat)]
            row["pretend_s"], row["sanitize_pretend_s"] = statistics.median(alone), statistics.median(sanitized)
            row["overhead"] = row["sanitize_pretend_s"] / row["pretend_s"]
        results.append(row)
        status = "ok" if ok else "FAILED"
        timing = (
            f"  pretend {row['pretend_s']:.2f} s, sanitize+pretend {row['sanitize_pretend_s']:.2f} s "
            f"({row['overhead']:.2f}x)"
            if "overhead" in row
            else ""
        )
        print(f"{path.name:<28} {status}  {checked['seconds']:.2f} s{timing}", flush=True)
        for line in checked["findings"]:
            print(f"    finding: {line}", flush=True)
        if checked["error"]:
            print("    " + checked["error"].replace("\n", "\n    "), flush=True)
    timed = [r for r in results if "overhead" in r]
    if timed:
        total_alone = sum(r["pretend_s"] for r in timed)
        total_sanitized = sum(r["sanitize_pretend_s"] for r in timed)
        print(
            f"total: pretend {total_alone:.2f} s, sanitize+pretend {total_sanitized:.2f} s "
            f"({total_sanitized / total_alone:.2f}x over {len(timed)} programs, median of {args.repeat} runs each)"
        )
    print(f"{len(results) - failed} of {len(results)} programs ran clean")
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
