"""Faults a Checkpointer must survive: SIGKILL mid-save, failing writes, fsyncs and renames, flipped and cut bytes.

Every test ends the same way: each committed checkpoint still verifies and restores the values its step saved, no
temporary files are left behind, and the run can go on saving.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import io
import json
import os
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import ferry
from ferry import _fs as atomic
from ferry._fs import TMP_MARKER
from ferry.checkpoint.file.api import verify
from ferry.checkpoint.folder import MANIFEST_FILE, STATE_FILE
from ferry.checkpoint.run import folders as store

ERRNOS = [pytest.param(errno.ENOSPC, id="ENOSPC"), pytest.param(errno.EIO, id="EIO")]
#: The file-system calls a save makes, each of which is made to fail in turn.
OPERATIONS = ["write", "fsync", "rename", "fsync-directory"]


@pytest.fixture(autouse=True)
def keep_global_rng():
    """``restore`` sets the global RNGs to the saved ones; give the other tests in this worker theirs back."""
    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    yield
    random.setstate(saved[0])
    np.random.set_state(saved[1])
    torch.set_rng_state(saved[2])


def state_for(step: int, numel: int = 64) -> dict[str, object]:
    """What step ``step`` saves: values from which the step can be read back, to check that a restore is right."""
    return {"step_value": step, "t": torch.full((numel,), float(step))}


def leftovers(directory: Path) -> list[str]:
    """Temporary files and folders anywhere under ``directory`` (relative paths, sorted)."""
    return sorted(
        str(path.relative_to(directory))
        for path in directory.rglob("*")
        if TMP_MARKER in path.name or path.name.endswith(".ferry-old")
    )


def committed(directory: Path) -> list[store.CheckpointEntry]:
    return [entry for entry in store.scan(directory) if entry.complete]


def assert_every_checkpoint_restores(directory: Path, numel: int = 64) -> list[int]:
    """Every committed checkpoint verifies and restores exactly what its step saved; returns the steps."""
    ckpt = ferry.Checkpointer(directory, read_only=True)
    for entry in committed(directory):
        verify(entry.folder / STATE_FILE)
        state = {"step_value": -1, "t": torch.zeros(numel)}
        assert entry.step == ckpt.restore(state, step=entry.step)
        assert entry.step == state["step_value"]
        assert torch.equal(torch.full((numel,), float(entry.step)), state["t"])
    return ckpt.steps()


# -- 1. SIGKILL at random moments ------------------------------------------------------------------------------------

#: A fork server: imports torch and ferry once, then for each folder read from stdin forks a child that restores the
#: newest checkpoint there (in a new run, commits step 0), prints that step, and saves one step after another until
#: it is killed; its first save also takes the directory lock. The server prints the child's pid, then its exit
#: status once it has reaped it (so the pid is free again, as after a real crash, when the test looks at the folder).
KILL_SERVER = textwrap.dedent(
    """
    import os, sys, time, traceback
    import torch
    torch.set_num_threads(1)  # no OpenMP pool in the server, so its forked children can run torch
    import ferry

    NUMEL = int(sys.argv[1])

    def save_until_killed(directory):
        ckpt = ferry.Checkpointer(directory, keep_last=2)
        state = {"step_value": -1, "t": torch.zeros(NUMEL)}
        step = ckpt.restore(state)
        if step is None:  # a new run: commit a first step before reporting
            step = 0
            ckpt.save(step, {"step_value": step, "t": torch.full((NUMEL,), float(step))})
        os.write(1, f"ready {step}\\n".encode())  # the newest committed step: it must never be lost
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            step += 1
            ckpt.save(step, {"step_value": step, "t": torch.full((NUMEL,), float(step))})

    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                save_until_killed(line.strip())
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(3)  # not killed in time, or an error (its traceback is on stderr)
        os.write(1, f"pid {pid}\\n".encode())  # one write each: the child writes to the same pipe
        os.write(1, f"dead {os.waitpid(pid, 0)[1]}\\n".encode())
    """
)
KILLS = 50
KILL_NUMEL = 1 << 16  # 256 KiB of float32: a save takes tens of ms, mostly in its fsyncs


def kill_phase(left: list[str], steps: list[int], newest: int) -> str:
    """Where a kill landed, judged from what it left: a save's temporary folder, an extra checkpoint, a pruned one."""
    folders = {name.split("/")[0] for name in left if TMP_MARKER in name.split("/")[0]}
    if any(name.startswith(".ferry-lock") for name in folders):
        return "locking"
    tmp_steps = {int(name.split(TMP_MARKER)[0].removeprefix("step-")) for name in folders}
    if any(step > newest for step in tmp_steps):
        return "saving"
    if tmp_steps:
        return "pruning"
    if len(steps) > 2:
        return "committed, not yet pruned"
    return "between saves"


@pytest.mark.slow
def test_sigkill_at_random_moments_never_loses_a_committed_checkpoint(tmp_path):
    """SIGKILL a process that saves checkpoint after checkpoint, 50 times, at random moments.

    Starting Python and torch costs about a second, so the writers are forked from one warm server process
    (``KILL_SERVER``, whose torch runs single-threaded, so forking is safe); each writer is one crash of a
    crash-looping job: it resumes the run directory from the newest checkpoint (the first one commits step 0),
    reports that step, and keeps saving (256 KiB per step, keep_last=2) until killed after a random delay spread over
    a few saves, so kills land while taking the lock, writing, before and after the commit rename, and while
    pruning. After each kill: every committed checkpoint verifies, no step folder is incomplete (``latest()`` would
    warn), the newest is what ``latest()`` returns and restores the values of its step, no step the writer reported
    is lost, and a new Checkpointer removes the writer's temporary files and folders.
    """
    rng = random.Random(1234)
    directory = tmp_path / "run"
    errors = tmp_path / "server-stderr.txt"
    phases: collections.Counter[str] = collections.Counter()
    with open(errors, "w") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-c", KILL_SERVER, str(KILL_NUMEL)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # its own process group, with the writers it forks
        )
    assert server.stdin is not None
    assert server.stdout is not None
    newest = -1
    finished = False
    try:
        for _ in range(KILLS):
            server.stdin.write(f"{directory}\n")
            server.stdin.flush()
            pid = ready = None
            while pid is None or ready is None:
                kind, _, value = server.stdout.readline().partition(" ")
                assert kind in ("pid", "ready"), f"the writer died before it was killed: {errors.read_text()}"
                pid, ready = (int(value), ready) if kind == "pid" else (pid, int(value))
            assert max(newest, 0) == ready, "the writer resumes from the newest checkpoint"
            time.sleep(rng.uniform(0, 0.08))
            with contextlib.suppress(ProcessLookupError):  # if it died on its own, the status check says why
                os.kill(pid, signal.SIGKILL)
            kind, _, status = server.stdout.readline().partition(" ")
            assert "dead" == kind
            assert os.WIFSIGNALED(int(status)), f"the writer exited on its own: {errors.read_text()}"

            left = leftovers(directory)
            entries = committed(directory)
            for entry in entries:
                verify(entry.folder / STATE_FILE)
            with ferry.Checkpointer(directory, keep_last=2) as ckpt:
                assert [] == leftovers(directory), f"left by the killed writer: {left}"
                assert entries[-1].folder == ckpt.latest()
                state = {"step_value": -1, "t": torch.zeros(KILL_NUMEL)}
                step = ckpt.restore(state)
            assert step is not None
            assert step >= ready
            assert step == state["step_value"]
            assert torch.equal(torch.full((KILL_NUMEL,), float(step)), state["t"])
            phases[kill_phase(left, [entry.step for entry in entries], step)] += 1
            newest = step
        finished = True
    finally:
        server.stdin.close()
        if not finished:  # an assertion failed: stop the server and a writer that may still be saving
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
        server.stdout.close()
    print(dict(phases))
    assert phases["saving"] >= 10, f"too few kills landed inside a save: {dict(phases)}"


def test_lock_file_left_empty_by_a_kill_is_taken_over(tmp_path):
    # What a kill between creating the lock file and writing its record left behind before the lock was written
    # atomically (the kill loop above caught it when a kill landed in a writer's first save): an empty lock file.
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, state_for(1))
    (tmp_path / ".ferry-lock").write_bytes(b"")
    with ferry.Checkpointer(tmp_path) as ckpt:
        ckpt.save(2, state_for(2))
    assert [1, 2] == assert_every_checkpoint_restores(tmp_path)


# -- 2. Writes, fsyncs and renames that fail -------------------------------------------------------------------------


class Faults:
    """Counts a save's writes, file fsyncs, renames and directory fsyncs; fails the ``nth`` of one kind (and more).

    ``times`` calls fail in a row, from the ``nth`` on.
    """

    def __init__(self, operation: str | None = None, nth: int = 0, code: int = 0, *, times: int = 1) -> None:
        self.operation, self.nth, self.code, self.times = operation, nth, code, times
        self.calls: list[tuple[str, str]] = []  # (operation, file or folder name), in call order
        self.counts: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def check(self, operation: str, name: str) -> None:
        with self.lock:  # the writer may write from worker threads
            self.calls.append((operation, name))
            self.counts[operation] += 1
            fail = operation == self.operation and self.nth <= self.counts[operation] < self.nth + self.times
        if fail:
            raise OSError(self.code, os.strerror(self.code), name)

    def install(self, mp: pytest.MonkeyPatch) -> Faults:
        """Route the calls a save makes through :meth:`check`.

        The writer writes through the file ``atomic.open`` returns, or (large files) with ``os.pwrite``.
        """
        faults = self
        real_fsync, real_replace, real_pwrite = os.fsync, os.replace, os.pwrite

        class FaultyFile(io.FileIO):
            def write(self, data):
                faults.check("write", os.path.basename(self.name))
                return super().write(data)

        def faulty_open(file, mode="r", buffering=-1):
            raw = FaultyFile(file, mode)
            return raw if buffering == 0 else io.BufferedWriter(raw)

        def faulty_pwrite(fd, data, offset):
            try:
                faults.check("write", f"fd {fd}")
            except OSError:
                del data  # as after a real failed pwrite, the traceback must not keep the writer's buffer exported
                raise
            return real_pwrite(fd, data, offset)

        def faulty_fsync(fd):
            kind = "fsync-directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync"
            name = os.readlink(f"/proc/self/fd/{fd}") if sys.platform == "linux" else f"fd {fd}"
            faults.check(kind, os.path.basename(name))
            real_fsync(fd)

        def faulty_replace(src, dst):
            faults.check("rename", Path(dst).name)
            real_replace(src, dst)

        mp.setattr(atomic, "open", faulty_open, raising=False)
        mp.setattr(os, "fsync", faulty_fsync)
        mp.setattr(os, "replace", faulty_replace)
        mp.setattr(os, "pwrite", faulty_pwrite)
        return self


def count_calls(tmp_path: Path, step: int, numel: int = 64) -> Faults:
    """The calls one save of ``step`` makes into a folder holding two checkpoints (so it prunes one).

    They include those of the background thread that deletes the pruned checkpoint (``wait()`` waits for it).
    """
    with ferry.Checkpointer(tmp_path / "count", keep_last=2) as ckpt:
        ckpt.save(step - 2, state_for(step - 2, numel))
        ckpt.save(step - 1, state_for(step - 1, numel))
        with pytest.MonkeyPatch.context() as mp:
            faults = Faults().install(mp)
            ckpt.save(step, state_for(step, numel))
            ckpt.wait()
    return faults


def failure_chain(err: BaseException) -> list[BaseException]:
    chain = [err]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return chain


def test_a_save_makes_every_kind_of_call_the_fault_tests_fail(tmp_path):
    faults = count_calls(tmp_path, 3)
    assert set(OPERATIONS) == set(faults.counts)
    # the commit is the rename of the finished temporary folder onto its step folder
    assert ("rename", "step-000000003") in faults.calls


#: (operation, tensor elements): every kind of call with a small state, and the writes of a state large enough (16 MiB
#: and a bit) for the writer's other path (worker threads; direct I/O where the file system allows it).
FAULT_CASES = [*((op, 64) for op in OPERATIONS), ("write", (16 << 20) // 4 + 4096)]


@pytest.mark.parametrize("code", ERRNOS)
@pytest.mark.parametrize(
    ("operation", "numel"), FAULT_CASES, ids=[f"{op}-{'large' if numel > 64 else 'small'}" for op, numel in FAULT_CASES]
)
def test_each_failing_call_of_a_save_leaves_the_previous_checkpoints_intact(tmp_path, operation, numel, code):
    """Fail the 1st, 2nd, ... call of one kind in turn; each time check the run directory and save again."""
    clean = count_calls(tmp_path, 3, numel)
    commit = clean.calls.index(("rename", "step-000000003"))
    positions = [i for i, call in enumerate(clean.calls) if call[0] == operation]
    nths = range(1, len(positions) + 1)
    directory = tmp_path / "run"
    with ferry.Checkpointer(directory, keep_last=2) as ckpt:
        ckpt.save(1, state_for(1, numel))
        ckpt.save(2, state_for(2, numel))
        for step, nth in enumerate(nths, start=3):
            before = ckpt.steps()
            with pytest.MonkeyPatch.context() as mp:
                faults = Faults(operation, nth, code).install(mp)
                try:
                    ckpt.save(step, state_for(step, numel))
                    ckpt.wait()  # the deletion of the pruned checkpoint, in the background
                except ferry.CheckpointError as err:  # anything else (a bare OSError) fails the test
                    failed: ferry.CheckpointError | None = err
                else:
                    failed = None
            after_commit = len(faults.calls) - 1 > commit
            failing = [call for call in faults.calls if call[0] == operation][nth - 1]
            where = f"{operation} #{nth} {failing} failing with {errno.errorcode[code]}"
            if not after_commit:
                assert failed is not None, f"{where}: the save did not fail"
                assert before == ckpt.steps(), where
                assert not ckpt.path_for(step).exists(), where
            if failed is not None:
                message = str(failed)
                assert f"saving step {step}" in message, where
                assert "previous checkpoints are untouched" in message, where
                assert os.strerror(code) in message, where
                assert code in [getattr(e, "errno", None) for e in failure_chain(failed)], where
            assert [] == leftovers(directory), where
            after = assert_every_checkpoint_restores(directory, numel)
            if failed is not None:
                assert set(before) <= set(after), where  # a failed save deletes nothing
            else:  # only a failure after the commit lets the save succeed: pruned as usual, or not at all
                assert {before[-1], step} <= set(after) <= {*before, step}, where

            ckpt.save(step, state_for(step, numel))  # the fault is gone: saving works again
            assert [step - 1, step] == ckpt.steps()[-2:], where
            ckpt.wait()
            assert [] == leftovers(directory), where
    assert_every_checkpoint_restores(directory, numel)


def test_failed_fsync_after_pruning_does_not_fail_the_committed_save(tmp_path):
    last = count_calls(tmp_path, 3).counts["fsync-directory"]  # the fsync of the run directory after pruning
    with ferry.Checkpointer(tmp_path / "run", keep_last=2) as ckpt:
        ckpt.save(1, state_for(1))
        ckpt.save(2, state_for(2))
        with pytest.MonkeyPatch.context() as mp:
            faults = Faults("fsync-directory", last, errno.EIO).install(mp)
            assert ckpt.path_for(3) == ckpt.save(3, state_for(3))
            ckpt.wait()  # the fsync follows the deletion, in the background
        assert ("fsync-directory", "run") == faults.calls[-1]
        assert [2, 3] == ckpt.steps()
    assert [] == leftovers(tmp_path / "run")


@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("times", [1, 2], ids=["fails-once", "fails-twice"])
def test_failing_directory_fsync_after_the_commit_leaves_the_step_committed(tmp_path, times, async_save):
    """The commit rename happened: the step is saved. A failing fsync of the directory is retried once; if the retry
    fails too, the save says the folder is in place but not known durable, and prunes nothing."""
    clean = count_calls(tmp_path, 3)
    commit = clean.calls.index(("rename", "step-000000003"))
    assert ("fsync-directory", "count") == clean.calls[commit + 1]
    nth = [operation for operation, _ in clean.calls[: commit + 2]].count("fsync-directory")
    directory = tmp_path / "run"
    ckpt = ferry.Checkpointer(directory, keep_last=2, async_save=async_save)
    ckpt.save(1, state_for(1))
    ckpt.save(2, state_for(2))
    ckpt.wait()
    final = ckpt.path_for(3)
    with pytest.MonkeyPatch.context() as mp:
        faults = Faults("fsync-directory", nth, errno.EIO, times=times).install(mp)
        try:
            assert final == ckpt.save(3, state_for(3))
            ckpt.wait()
        except ferry.CheckpointError as err:
            failed: ferry.CheckpointError | None = err
        else:
            failed = None
    assert [("fsync-directory", "run")] * 2 == faults.calls[commit + 1 : commit + 3]  # the fsync and its retry
    if times == 1:
        assert failed is None
        assert [2, 3] == ckpt.steps()  # pruned as usual
    else:
        assert failed is not None
        assert type(failed) is ferry.CheckpointError
        assert final == failed.path
        assert (
            f"step 3 is saved and committed at {str(final)!r}, but its durability is not confirmed: the fsync of "
            f"{str(directory)!r} after the commit rename failed twice (errno {errno.EIO} EIO: "
            f"{os.strerror(errno.EIO)}). The checkpoint is listed and restores now, but a power cut or host crash "
            "could still lose it; no older checkpoint was pruned. Check the disk (e.g. dmesg), then save again."
        ) == str(failed)
        assert errno.EIO in [getattr(e, "errno", None) for e in failure_chain(failed)]
        assert commit + 3 == len(faults.calls)  # nothing after the retry: no pruning
        assert [1, 2, 3] == ckpt.steps()
    assert final == ckpt.latest()
    assert not ckpt.save_if_due(3, state_for(3))  # saved already
    assert [] == leftovers(directory)
    ckpt.save(4, state_for(4))
    ckpt.close()
    assert [3, 4] == assert_every_checkpoint_restores(directory)
    assert [] == leftovers(directory)


ASYNC_FAULTS = [("write", 1), ("fsync", 1), ("rename", 3), ("fsync-directory", 1)]


@pytest.mark.parametrize("surfaces_on", ["save", "wait", "close"])
@pytest.mark.parametrize(("operation", "nth"), ASYNC_FAULTS, ids=[f"{op}{nth}" for op, nth in ASYNC_FAULTS])
def test_async_save_failure_surfaces_on_the_next_call(tmp_path, operation, nth, surfaces_on):
    directory = tmp_path / "run"
    ckpt = ferry.Checkpointer(directory, keep_last=2, async_save=True)
    ckpt.save(1, state_for(1))
    ckpt.wait()
    with pytest.MonkeyPatch.context() as mp:
        faults = Faults(operation, nth, errno.ENOSPC).install(mp)
        assert ckpt.path_for(2) == ckpt.save(2, state_for(2))  # returns once the state is copied
        next_call = {"save": lambda: ckpt.save(3, state_for(3)), "wait": ckpt.wait, "close": ckpt.close}[surfaces_on]
        with pytest.raises(ferry.CheckpointError, match="saving step 2") as failed:
            next_call()
    assert "No space left on device" in str(failed.value)
    assert "previous checkpoints are untouched" in str(failed.value)
    assert faults.counts[operation] >= nth
    assert [] == leftovers(directory)
    assert [1] == assert_every_checkpoint_restores(directory)
    if surfaces_on == "close":
        ckpt = ferry.Checkpointer(directory, keep_last=2, async_save=True)
    ckpt.save(3, state_for(3))
    ckpt.close()
    assert [1, 3] == assert_every_checkpoint_restores(directory)
    assert [] == leftovers(directory)


def test_save_if_due_retries_a_step_whose_save_failed(tmp_path):
    directory = tmp_path / "run"
    with ferry.Checkpointer(directory, every_steps=5) as ckpt:
        with pytest.MonkeyPatch.context() as mp:
            Faults("write", 1, errno.ENOSPC).install(mp)
            with pytest.raises(ferry.CheckpointError, match="No space left"):
                ckpt.save_if_due(5, state_for(5))
        # the disk has room again: the step that could not be saved is saved now (e.g. a preempted job's last save)
        assert ckpt.save_if_due(5, state_for(5))
        assert [5] == ckpt.steps()


# -- 3. Flipped bits, overwritten blocks, truncated files ------------------------------------------------------------

CORRUPTIONS = 240


def corruptions(data: bytes, header_end: int, seed: int, count: int) -> list[tuple[str, bytes]]:
    """``count`` damaged copies of ``data``: single bit flips, random bytes, zeroed blocks, truncations.

    Half of the byte-level damage lands in the header (the length prefix and the JSON), where one flipped bit can
    change a shape or an offset rather than the data.
    """
    rng = random.Random(seed)
    damaged = []
    for index in range(count):
        kind = ("bit", "byte", "block", "truncate")[index % 4]
        buffer = bytearray(data)
        position = rng.randrange(header_end) if rng.random() < 0.5 else rng.randrange(len(data))
        if kind == "bit":
            buffer[position] ^= 1 << rng.randrange(8)
        elif kind == "byte":
            buffer[position] ^= rng.randrange(1, 256)
        elif kind == "block":
            length = rng.choice([4, 64, 512, 4096])
            block = bytes(length) if rng.random() < 0.5 else rng.randbytes(length)
            buffer[position : position + length] = block[: len(data) - position]
            if buffer == bytearray(data):  # the block held those bytes already
                buffer[position] ^= 0xFF
        else:
            del buffer[rng.randrange(len(data)) :]
        assert bytes(buffer) != data
        damaged.append((f"{kind}@{position}", bytes(buffer)))
    return damaged


def header_end(data: bytes) -> int:
    return 8 + struct.unpack("<Q", data[:8])[0]


def test_every_random_corruption_is_detected_and_latest_falls_back(tmp_path):
    directory = tmp_path / "run"
    with ferry.Checkpointer(directory) as ckpt:
        good = ckpt.save(1, state_for(1))
        bad = ckpt.save(2, state_for(2))
    ckpt = ferry.Checkpointer(directory)
    target = bad / STATE_FILE
    pristine = target.read_bytes()
    for name, damaged in corruptions(pristine, header_end(pristine), seed=7, count=CORRUPTIONS):
        target.write_bytes(damaged)
        with pytest.raises(ferry.CorruptCheckpointError):
            verify(target)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert good == ckpt.latest(), name
        # skipped with one warning naming the folder: "does not verify", or for a file of another size than its
        # manifest records, "is incomplete"
        assert 1 == len(caught), name
        assert issubclass(caught[0].category, ferry.CheckpointWarning), name
        assert bad.name in str(caught[0].message), name
        state = {"step_value": -1, "t": torch.zeros(64)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ferry.CheckpointWarning)
            assert 1 == ckpt.restore(state), name
        assert 1 == state["step_value"]
    target.write_bytes(pristine)
    assert bad == ckpt.latest()


def test_truncated_newest_checkpoint_is_skipped_with_a_warning(tmp_path):
    with ferry.Checkpointer(tmp_path) as ckpt:
        good = ckpt.save(1, state_for(1))
        bad = ckpt.save(2, state_for(2))
    with open(bad / STATE_FILE, "r+b") as handle:
        handle.truncate(100)
    with pytest.warns(ferry.CheckpointWarning, match=rf"{bad.name}.*is incomplete.*{STATE_FILE} is 100 bytes"):
        assert good == ferry.Checkpointer(tmp_path).latest()


def reordered(text: bytes) -> bytes:
    """The header JSON with the tensor index first and ``__metadata__`` last: same content, same length."""
    header = json.loads(text)
    metadata = header.pop("__metadata__")
    return json.dumps({**header, "__metadata__": metadata}, separators=(",", ":"), ensure_ascii=False).encode()


#: Edits of a ferry header that keep its meaning and its length: (JSON, its padding) -> header bytes.
HEADER_EDITS = {
    "newline for the last padding space": lambda text, pad: text + b" " * (pad - 1) + b"\n",
    "tab for the first padding space": lambda text, pad: text + b"\t" + b" " * (pad - 1),
    "carriage return in the padding": lambda text, pad: text + b" \r" + b" " * (pad - 2),
    "space after a colon": lambda text, pad: text.replace(b":", b": ", 1) + b" " * (pad - 1),
    "newline after a comma": lambda text, pad: text.replace(b",", b",\n", 1) + b" " * (pad - 1),
    "padding before the closing brace": lambda text, pad: text[:-1] + b" " * pad + b"}",
    "escaped letter": lambda text, pad: text.replace(b'"dtype"', b'"\\u0064type"', 1) + b" " * (pad - 5),
    "keys reordered": lambda text, pad: reordered(text) + b" " * pad,
    "key repeated": lambda text, pad: (
        text.replace(b'{"ferry.format":"2"', b'{"ferry.format":"2","ferry.format":"2"', 1) + b" " * (pad - 19)
    ),
}
#: (edit, file): every edit on a small file (header padded to 8 bytes) and on a large one (padded to a page).
HEADER_EDIT_CASES = [
    *((edit, "small") for edit in HEADER_EDITS if edit != "key repeated"),  # needs 19 bytes of padding
    *((edit, "large") for edit in HEADER_EDITS),
]


def padded_file(path: Path, size: str) -> bytes:
    """Save a state whose header ends in at least 5 padding spaces (small) or 20 (large); return its bytes."""
    numel = 1 if size == "small" else (16 << 20) // 4  # large: 16 MiB, the data starts on a page boundary
    for length in range(64):
        ferry.save({"t": torch.ones(numel), "s": "a" * length}, path)
        data = path.read_bytes()
        end = header_end(data)
        if data[end - 20 if size == "large" else end - 5 : end].strip(b" ") == b"":
            return data
    raise AssertionError("no string length gives the header enough padding")


@pytest.mark.parametrize(("edit", "size"), HEADER_EDIT_CASES, ids=[f"{e}-{s}" for e, s in HEADER_EDIT_CASES])
def test_changed_header_bytes_are_detected(tmp_path, edit, size):
    """Bytes of a ferry header that no checksum covers (the padding; the JSON's layout) must not change either."""
    path = tmp_path / "x.safetensors"
    data = padded_file(path, size)
    end = header_end(data)
    text = data[8:end].rstrip(b" ")
    edited = HEADER_EDITS[edit](text, end - 8 - len(text))
    assert len(edited) == end - 8
    assert edited != data[8:end]
    assert ferry.load(path)["t"].numel() > 0  # the untouched file loads
    path.write_bytes(data[:8] + edited + data[end:])
    for check in (verify, ferry.load):
        with pytest.raises(ferry.CorruptCheckpointError, match="its bytes differ from what ferry wrote"):
            check(path)


def manifest_damage(text: bytes, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    damaged = [("empty", b""), ("garbage", rng.randbytes(len(text))), ("not json", b"step 2\n")]
    damaged += [("other json", b"[]"), ("wrong format", text.replace(b"ferry.checkpoint", b"ferry.checkpoinX"))]
    damaged += [(f"truncated@{n}", text[:n]) for n in sorted(rng.sample(range(len(text)), 40))]
    return damaged


def test_damaged_manifest_unlists_its_checkpoint_with_a_warning(tmp_path):
    directory = tmp_path / "run"
    with ferry.Checkpointer(directory) as ckpt:
        good = ckpt.save(1, state_for(1))
        bad = ckpt.save(2, state_for(2))
    ckpt = ferry.Checkpointer(directory)
    manifest = bad / MANIFEST_FILE
    pristine = manifest.read_bytes()
    skipped = rf"{bad.name}.* is incomplete and is skipped"
    for name, damaged in manifest_damage(pristine, seed=3):
        manifest.write_bytes(damaged)
        assert [1] == ckpt.steps(), name
        with pytest.warns(ferry.CheckpointWarning, match=skipped):
            assert good == ckpt.latest(), name
        state = {"step_value": -1, "t": torch.zeros(64)}
        with pytest.warns(ferry.CheckpointWarning, match=skipped):
            assert 1 == ckpt.restore(state), name
        assert 1 == state["step_value"]
        with pytest.raises(ferry.CheckpointError, match="no complete checkpoint for step 2"):
            ckpt.restore(state, step=2)
    manifest.unlink()
    assert [1] == ckpt.steps()
    with pytest.warns(ferry.CheckpointWarning, match=rf"{skipped}: no {MANIFEST_FILE}"):
        assert good == ckpt.latest()
    manifest.write_bytes(pristine)
    assert [1, 2] == ckpt.steps()


def test_corrupt_older_checkpoint_does_not_hide_a_good_newer_one(tmp_path):
    directory = tmp_path / "run"
    with ferry.Checkpointer(directory) as ckpt:
        older = ckpt.save(1, state_for(1))
        newer = ckpt.save(2, state_for(2))
    data = bytearray((older / STATE_FILE).read_bytes())
    data[-1] ^= 0x10
    (older / STATE_FILE).write_bytes(bytes(data))
    ckpt = ferry.Checkpointer(directory)
    assert newer == ckpt.latest()  # the older one is never read: no warning
    with pytest.raises(ferry.CorruptCheckpointError, match="fails its checksum"):
        ckpt.restore({"step_value": 0, "t": torch.zeros(64)}, step=1)


def test_every_checkpoint_corrupt_raises_after_warning_about_each(tmp_path):
    directory = tmp_path / "run"
    with ferry.Checkpointer(directory) as ckpt:
        folders = [ckpt.save(step, state_for(step)) for step in (1, 2)]
    for folder in folders:
        data = bytearray((folder / STATE_FILE).read_bytes())
        data[-1] ^= 0x01
        (folder / STATE_FILE).write_bytes(bytes(data))
    ckpt = ferry.Checkpointer(directory)
    with pytest.warns(ferry.CheckpointWarning) as caught, pytest.raises(ferry.CorruptCheckpointError):
        ckpt.latest()
    assert [folder.name for folder in reversed(folders)] == [
        next(name for name in (f.name for f in folders) if name in str(w.message)) for w in caught
    ]
    shutil.rmtree(folders[1])
    with pytest.warns(ferry.CheckpointWarning, match=folders[0].name), pytest.raises(ferry.CorruptCheckpointError):
        ckpt.restore({"step_value": 0, "t": torch.zeros(64)})
