"""Paths the tests share (importable from every test folder: pyproject's ``pythonpath`` lists ``tests``)."""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: ``../shared`` beside the checkout: real-world cases (``cases/lint``, ``cases/checkpoints``)
SHARED = REPO.parent / "shared"
CASES = SHARED / "cases"
#: scripts the tests run under torchrun
WORKERS = Path(__file__).resolve().parent / "_workers"
#: ``ferry lint`` fixture files with inline ``# FRY001`` markers
LINT_FIXTURES = Path(__file__).resolve().parent / "lint" / "fixtures"


#: Whether the running test carries the ``launches`` marker (set by conftest for each test).
LAUNCHES_MARKED = False


@contextlib.contextmanager
def one_launch_at_a_time() -> Iterator[None]:
    """Hold a machine-wide lock while a test runs several ranks (torchrun, a 2-rank benchmark or demo).

    pytest-xdist runs tests side by side, and each launch picks "free" ports for its rendezvous and process group by
    binding port 0 and letting go: two launches at once can pick the same port and talk to each other's ranks (seen
    as a rank aborting at exit). Tests that launch carry ``@pytest.mark.launches``, which puts them all on one worker,
    one after another (see conftest), so none of them waits here while the other workers run the rest.
    """
    assert LAUNCHES_MARKED, "a test that launches several ranks needs @pytest.mark.launches (see tests/conftest.py)"
    with open(Path(tempfile.gettempdir()) / "ferry-tests-launch.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
