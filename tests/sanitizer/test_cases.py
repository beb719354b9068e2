"""The runnable cases of ``../shared/cases/lint`` under the sanitizer.

For every case whose ``# runs-on:`` is cpu or gpu, each ``[runtime]`` or ``[both]`` expectation must be reported by
the sanitizer, and ``# expect: none`` cases must give nothing. The gpu cases run under
``ferry.sanitize(pretend="cuda")``: on this CPU-only machine their ``.cuda()`` and ``device="cuda"`` give tensors
that report ``cuda:0``. As for ``ferry lint`` (tests/lint/test_cases.py), an expectation's line is the line of the
code itself: 008 expects 17 for the failing ``model.to(device)``. Slugs the sanitizer has no runtime check for yet
are skipped, by name.

How a slug is reported: ``host-sync-in-training-loop`` is a line in ``report.host_syncs`` (the sanitizer counts host
syncs, it does not warn on each); ``loss-on-other-device`` is an ``input-on-other-device`` finding (the sanitizer has
one kind for every device mismatch, its message names the loss function); every other slug is a finding of that kind.
A gpu ``none`` case may still count the host syncs it needs (049 reads its predictions once, 055 logs every 50
steps): the count is a summary, not a diagnostic, so only its findings must be empty.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import re
import runpy
import warnings
from pathlib import Path

import pytest

import ferry
from _support import CASES
from ferry.sanitizer import SanitizeReport

LINT_CASES = CASES / "lint"
CASE_FILES = sorted(LINT_CASES.glob("*.py")) if LINT_CASES.is_dir() else []
EXPECT = re.compile(r"^# expect: (?P<line>\d+):(?P<slug>[\w-]+) .*\[(?P<where>static|runtime|both)\]\s*$")
#: slugs with no runtime check yet: what they need is said in the skip reason
NOT_CHECKED: dict[str, str] = {}
#: the finding kind that reports a case's slug, where the sanitizer names it differently
FINDING_KIND = {"loss-on-other-device": "input-on-other-device"}
#: slugs reported as a line of ``report.host_syncs`` rather than as a finding
HOST_SYNC_SLUGS = {"host-sync-in-training-loop"}


def runs_on(path: Path) -> str:
    """The first word of the case's ``# runs-on:`` line: cpu, gpu or no."""
    for line in path.read_text().splitlines()[:10]:
        if line.startswith("# runs-on:"):
            return line.removeprefix("# runs-on:").split()[0]
    return ""


def runs_on_cpu(path: Path) -> bool:
    return runs_on(path) == "cpu"


def runnable(path: Path) -> bool:
    return runs_on(path) in ("cpu", "gpu")


def missing_packages(path: Path) -> list[str]:
    """The top-level packages the case imports that are not installed here (e.g. transformers)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return sorted(name for name in names if importlib.util.find_spec(name) is None)


def case_marks(path: Path) -> list[pytest.MarkDecorator]:
    missing = missing_packages(path)
    if missing:
        return [pytest.mark.skip(reason=f"needs {', '.join(missing)}, not installed here")]
    return []


def runtime_expectations(path: Path) -> list[tuple[int, str]]:
    found = []
    for line in path.read_text().splitlines():
        match = EXPECT.match(line)
        if match and match["where"] in ("runtime", "both"):
            found.append((int(match["line"]), match["slug"]))
    return found


def run_case(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SanitizeReport:
    monkeypatch.chdir(tmp_path)  # some cases write files (torch.save)
    pretend = "cuda" if runs_on(path) == "gpu" else None
    with (
        warnings.catch_warnings(),
        ferry.sanitize(on_error="warn", pretend=pretend) as report,
        contextlib.suppress(Exception),  # the case's own bug, after the sanitizer has reported it
    ):
        warnings.simplefilter("ignore")
        runpy.run_path(str(path), run_name="__main__")
    return report


def expectation_marks(path: Path, line: int, slug: str) -> list[pytest.MarkDecorator]:
    if slug in NOT_CHECKED:
        return [pytest.mark.skip(reason=NOT_CHECKED[slug])]
    return case_marks(path)


RUNTIME = [
    pytest.param(path, line, slug, id=f"{path.stem[:3]}:{line}:{slug}", marks=expectation_marks(path, line, slug))
    for path in CASE_FILES
    if runnable(path)
    for line, slug in runtime_expectations(path)
]
NEGATIVE = [
    pytest.param(path, id=path.stem, marks=case_marks(path))
    for path in CASE_FILES
    if runnable(path) and "# expect: none" in path.read_text().splitlines()[:8]
]


def test_there_are_runnable_cases():
    if not LINT_CASES.is_dir():
        pytest.skip(f"{LINT_CASES} not found")
    assert RUNTIME
    assert NEGATIVE
    assert {runs_on(p.values[0]) for p in RUNTIME} == {"cpu", "gpu"}
    assert {runs_on(p.values[0]) for p in NEGATIVE} == {"cpu", "gpu"}


@pytest.mark.parametrize(("path", "line", "slug"), RUNTIME)
def test_runtime_expectation_is_reported(path, line, slug, tmp_path, monkeypatch):
    report = run_case(path, tmp_path, monkeypatch)
    if slug in HOST_SYNC_SLUGS:
        synced = {where.line: count for where, count in report.host_syncs.items() if where.file == str(path)}
        assert line in synced, synced
        return
    found = [(f.where.line, f.kind) for f in report.findings if f.where.file == str(path)]
    assert (line, FINDING_KIND.get(slug, slug)) in found, found


@pytest.mark.parametrize("path", NEGATIVE)
def test_correct_look_alike_reports_nothing(path, tmp_path, monkeypatch):
    report = run_case(path, tmp_path, monkeypatch)
    assert [] == [f.message for f in report.findings]
    if runs_on(path) == "cpu":
        assert not report.host_syncs  # no accelerator tensors at all
