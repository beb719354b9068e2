"""Atomic writes: leftovers of killed writers are removed by the next write of the same name, live ones kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from ferry._fs import TMP_MARKER, atomic_file, pid_alive, remove_stale_temporaries, temporary_name
from ferry.checkpoint.file.api import load, save, verify


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped (free unless the system reuses it at once)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not pid_alive(child.pid)
    return child.pid


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TMP_MARKER in p.name)


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(dead_pid())


def test_save_removes_leftovers_of_dead_writers_and_keeps_live_ones(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    dead = tmp_path / f"model.safetensors{TMP_MARKER}{dead_pid()}-0123abcd"
    live = tmp_path / f"model.safetensors{TMP_MARKER}{os.getpid()}-89abcdef"
    dead_dir = tmp_path / f"model.safetensors{TMP_MARKER}{dead_pid()}-00ff00ff"
    dead.write_bytes(b"x" * 1000)
    live.write_bytes(b"y" * 1000)
    dead_dir.mkdir()
    (dead_dir / "inside").write_bytes(b"z")
    save({"w": torch.ones(3)}, path)
    assert sorted([live.name]) == leftovers(tmp_path)
    assert torch.equal(torch.ones(3), load(path)["w"])


UNTOUCHED = {
    "another file's leftover": f"other.safetensors{TMP_MARKER}{{dead}}-0123abcd",
    "a longer name sharing the prefix": f"model.safetensors.bak{TMP_MARKER}{{dead}}-0123abcd",
    "no hex suffix": f"model.safetensors{TMP_MARKER}{{dead}}",
    "not a pid": f"model.safetensors{TMP_MARKER}abc-0123abcd",
    "trailing text": f"model.safetensors{TMP_MARKER}{{dead}}-0123abcd.keep",
    "the final name itself": "model.safetensors",
}


@pytest.mark.parametrize("name", UNTOUCHED.values(), ids=UNTOUCHED.keys())
def test_only_temporaries_of_the_same_final_name_are_candidates(tmp_path: Path, name: str) -> None:
    entry = tmp_path / name.format(dead=dead_pid())
    entry.write_bytes(b"keep me")
    assert [] == remove_stale_temporaries(tmp_path / "model.safetensors", alive=lambda pid: False)
    assert b"keep me" == entry.read_bytes()


def test_the_pid_check_is_injectable_and_a_missing_folder_removes_nothing(tmp_path: Path) -> None:
    final = tmp_path / "state.safetensors"
    first, second = temporary_name(final), final.with_name(f"{final.name}{TMP_MARKER}7-ab")
    first.write_bytes(b"")
    second.write_bytes(b"")
    assert [second] == remove_stale_temporaries(final, alive=lambda pid: pid != 7)
    assert [first] == remove_stale_temporaries(final, alive=lambda pid: False)
    assert [] == remove_stale_temporaries(tmp_path / "absent" / "x.safetensors")


def write(path: Path, data: bytes, *, fail: bool = False) -> None:
    with atomic_file(path) as handle:
        handle.write(data)
        if fail:
            raise RuntimeError("boom")


def test_atomic_file_leaves_nothing_behind_on_success_or_failure(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    write(path, b"new")
    with pytest.raises(RuntimeError, match="boom"):
        write(path, b"half", fail=True)
    assert b"new" == path.read_bytes()
    assert [] == leftovers(tmp_path)


SAVER = textwrap.dedent(
    """
    import sys, torch, ferry
    path = sys.argv[1]
    big = {"w": torch.ones(4_000_000)}
    print("ready", flush=True)
    while True:
        ferry.save(big, path)
    """
)


@pytest.mark.slow
def test_killed_save_loops_do_not_accumulate_temporaries(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    for delay in (0.1, 0.3, 0.5):
        writer = subprocess.Popen([sys.executable, "-c", SAVER, str(path)], stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None
        assert "ready\n" == writer.stdout.readline()
        time.sleep(delay)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
    save({"w": torch.zeros(2)}, path)
    assert [] == leftovers(tmp_path)
    verify(path)
