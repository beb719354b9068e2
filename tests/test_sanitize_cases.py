"""The runnable cases of ``../shared/cases/lint`` under the sanitizer.

For every case whose ``# runs-on:`` is cpu, each ``[runtime]`` or ``[both]`` expectation must be reported by the
sanitizer, and ``# expect: none`` cases must give nothing. As for ``ferry lint`` (tests/test_lint_cases.py), the
expected line numbers are one past the code line in the runtime expectations too: 008 expects 18 for the failing
``model.to(device)`` on line 17 (line 18 is never reached), 006 and 007 expect 20 for the ``.cuda()`` on line 19.
Slugs the sanitizer has no runtime check for yet are skipped, by name.
"""

from __future__ import annotations

import contextlib
import re
import runpy
import warnings
from pathlib import Path

import pytest

import ferry
from ferry.sanitize import SanitizeReport

LINT_CASES = Path(__file__).resolve().parents[2] / "shared" / "cases" / "lint"
CASE_FILES = sorted(LINT_CASES.glob("*.py")) if LINT_CASES.is_dir() else []
LINE_OFFSET = 1
EXPECT = re.compile(r"^# expect: (?P<line>\d+):(?P<slug>[\w-]+) .*\[(?P<where>static|runtime|both)\]\s*$")
#: slugs with no runtime check yet: what they need is said in the skip reason
NOT_CHECKED = {
    "inference-in-train-mode": "needs a check for Dropout/BatchNorm forwards in training mode with no backward",
    "data-parallel-state-dict": "load_state_dict is not a torch operation; ferry.load_state_dict fixes the prefix",
}


def runs_on_cpu(path: Path) -> bool:
    return any(line.startswith("# runs-on: cpu") for line in path.read_text().splitlines()[:8])


def runtime_expectations(path: Path) -> list[tuple[int, str]]:
    found = []
    for line in path.read_text().splitlines():
        match = EXPECT.match(line)
        if match and match["where"] in ("runtime", "both"):
            found.append((int(match["line"]), match["slug"]))
    return found


def run_case(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SanitizeReport:
    monkeypatch.chdir(tmp_path)  # some cases write files (torch.save)
    with (
        warnings.catch_warnings(),
        ferry.sanitize(on_error="warn") as report,
        contextlib.suppress(Exception),  # the case's own bug, after the sanitizer has reported it
    ):
        warnings.simplefilter("ignore")
        runpy.run_path(str(path), run_name="__main__")
    return report


RUNTIME = [
    pytest.param(
        path,
        line,
        slug,
        id=f"{path.stem[:3]}:{line}:{slug}",
        marks=[pytest.mark.skip(reason=NOT_CHECKED[slug])] if slug in NOT_CHECKED else [],
    )
    for path in CASE_FILES
    if runs_on_cpu(path)
    for line, slug in runtime_expectations(path)
]
NEGATIVE = [
    pytest.param(path, id=path.stem)
    for path in CASE_FILES
    if runs_on_cpu(path) and "# expect: none" in path.read_text().splitlines()[:8]
]


def test_there_are_runnable_cases():
    if not LINT_CASES.is_dir():
        pytest.skip(f"{LINT_CASES} not found")
    assert RUNTIME
    assert NEGATIVE


@pytest.mark.parametrize(("path", "line", "slug"), RUNTIME)
def test_runtime_expectation_is_reported(path, line, slug, tmp_path, monkeypatch):
    report = run_case(path, tmp_path, monkeypatch)
    found = [(f.where.line, f.kind) for f in report.findings if f.where.file == str(path)]
    assert (line - LINE_OFFSET, slug) in found, found


@pytest.mark.parametrize("path", NEGATIVE)
def test_correct_look_alike_reports_nothing(path, tmp_path, monkeypatch):
    report = run_case(path, tmp_path, monkeypatch)
    assert [] == [f.message for f in report.findings]
    assert not report.host_syncs
