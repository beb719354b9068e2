"""Correct GPU programs (benchmarks/detection/programs, modeled on public examples) run clean on pretend GPUs.

A checker that crashes on, or complains about, correct code is worse than none: each program runs under
``ferry.sanitize(pretend="cuda")`` to its last line with no finding and no exception.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from _support import REPO

RUNNER = REPO / "benchmarks" / "detection" / "run_programs.py"
PROGRAMS = sorted((REPO / "benchmarks" / "detection" / "programs").glob("*.py"))


def test_there_are_at_least_twelve_programs_each_naming_its_source() -> None:
    assert len(PROGRAMS) >= 12
    for path in PROGRAMS:
        assert "Modeled on:" in path.read_text().split('"""')[1], path.name


@pytest.mark.parametrize("half", [0, 1], ids=["first half", "second half"])
def test_every_correct_gpu_program_runs_clean_under_the_sanitizer_on_pretend_gpus(half: int) -> None:
    programs = PROGRAMS[half::2]  # two runners, so that the suite's two workers share them
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # tiny programs: threads only add hand-offs on 2 cores
    result = subprocess.run(
        [sys.executable, str(RUNNER), *map(str, programs)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=env,
    )
    assert 0 == result.returncode, result.stdout[-6000:] + result.stderr[-3000:]
    assert f"{len(programs)} of {len(programs)} programs ran clean" in result.stdout
