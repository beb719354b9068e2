"""Byte-mutated checkpoints: ``ferry.load`` and ``ferry.verify`` raise only ``FerryError`` (or succeed), never another
exception, for ferry files, plain safetensors files and ``torch.save`` files (zip and legacy pickle)."""

from __future__ import annotations

import contextlib
import pickle
from pathlib import Path

import pytest
import safetensors.torch
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ferry


def _ferry(path: Path) -> None:
    ferry.save(
        {"w": torch.arange(12.0).reshape(3, 4), "step": 3, "name": "x", "b": torch.ones(2, dtype=torch.int8)}, path
    )


def _safetensors(path: Path) -> None:
    safetensors.torch.save_file({"w": torch.arange(12.0), "b": torch.zeros(3, dtype=torch.int64)}, str(path))


def _zip(path: Path) -> None:
    torch.save({"w": torch.arange(6.0), "step": 4, "nested": [torch.ones(2)]}, path)


def _legacy(path: Path) -> None:
    torch.save({"w": torch.arange(6.0), "step": 4}, path, _use_new_zipfile_serialization=False)


def _pickle(path: Path) -> None:
    path.write_bytes(pickle.dumps({"a": 1, "b": [1.5, "x"]}, protocol=2))


KINDS = {"ferry": _ferry, "safetensors": _safetensors, "zip": _zip, "legacy": _legacy, "pickle": _pickle}


def _original(kind: str, folder: Path) -> bytes:
    path = folder / f"{kind}.bin"
    KINDS[kind](path)
    return path.read_bytes()


#: mutations: (offset fraction, new byte); a truncation; an insertion
MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.floats(0, 1, exclude_max=True), st.just(0)),
    st.tuples(st.just("insert"), st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
)


def _mutate(data: bytes, mutation: tuple[str, float, int]) -> bytes:
    kind, where, value = mutation
    at = int(where * len(data))
    if kind == "flip":
        return data[:at] + bytes([value]) + data[at + 1 :]
    if kind == "cut":
        return data[:at]
    return data[:at] + bytes([value]) + data[at:]


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_mutated_files_raise_only_ferry_errors(tmp_path: Path, kind: str, mutations: list) -> None:
    data = _original(kind, tmp_path)
    for mutation in mutations:
        data = _mutate(data, mutation)
    path = tmp_path / "mutated.bin"
    path.write_bytes(data)
    for call in (lambda: ferry.load(path), lambda: ferry.verify(path), lambda: ferry.load(path, trusted=True)):
        with contextlib.suppress(ferry.FerryError):  # anything else fails the test
            call()


@pytest.mark.parametrize(
    "opcode", [pickle.BINBYTES8, pickle.BINUNICODE8, pickle.BYTEARRAY8], ids=["BINBYTES8", "BINUNICODE8", "BYTEARRAY8"]
)
def test_a_huge_declared_length_in_a_pickle_is_a_ferry_error(tmp_path: Path, opcode: bytes) -> None:
    # found by the fuzz test above: a flipped byte made an 8-byte length field (2**60 bytes); reading it once raised
    # MemoryError
    path = tmp_path / "huge.bin"
    path.write_bytes(b"\x80\x04" + opcode + (2**60).to_bytes(8, "little") + b"abc.")
    for call in (lambda: ferry.load(path), lambda: ferry.verify(path), lambda: ferry.load(path, trusted=True)):
        with pytest.raises(ferry.FerryError):
            call()


def test_the_originals_load(tmp_path: Path) -> None:
    for kind in KINDS:
        path = tmp_path / f"{kind}.bin"
        path.write_bytes(_original(kind, tmp_path))
        if kind == "pickle":
            with pytest.raises(ferry.FerryError):
                ferry.load(path)  # a plain pickle is not a torch.save file
            continue
        ferry.verify(path)
        assert ferry.load(path) is not None


#: (what a damaged central directory entry says, offset in the entry, new little-endian value): zipfile raises
#: NotImplementedError and RuntimeError for these, which ferry.load once let through
ZIP_DAMAGE = {
    "version needed 10.3": (6, 103),
    "encrypted flag": (8, 1),
    "unknown compression": (10, 77),
}


@pytest.mark.parametrize(("offset", "value"), ZIP_DAMAGE.values(), ids=ZIP_DAMAGE.keys())
def test_a_damaged_zip_entry_is_a_corrupt_checkpoint(tmp_path: Path, offset: int, value: int) -> None:
    path = tmp_path / "model.pt"
    _zip(path)
    data = bytearray(path.read_bytes())
    for at in range(len(data) - 4):
        if data[at : at + 4] == b"PK\x01\x02":  # every central directory entry
            data[at + offset : at + offset + 2] = value.to_bytes(2, "little")
    path.write_bytes(bytes(data))
    for call in (lambda: ferry.load(path), lambda: ferry.verify(path), lambda: ferry.load(path, trusted=True)):
        with pytest.raises(ferry.CorruptCheckpointError, match=r"model\.pt"):
            call()
