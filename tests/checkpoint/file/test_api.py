"""ferry.save / ferry.load / verify: round trips, interop with safetensors readers, bad input, corruption, atomicity."""

from __future__ import annotations

import collections
import io
import json
import math
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors
import safetensors.torch
import torch
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ferry
from _support import CASES as SHARED_CASES
from ferry._fs import TMP_MARKER
from ferry.checkpoint.file.api import load, save, verify
from ferry.checkpoint.file.layout import DTYPES
from ferry.errors import ArgumentError, CheckpointError, CorruptCheckpointError, DeviceError

CASES = SHARED_CASES / "checkpoints"


# ---------------------------------------------------------------------------------------------------------- helpers


def raw_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().resolve_conj().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def assert_same(expected: Any, actual: Any, where: str = "obj") -> None:
    """Exact equality: same types (bool vs int, tuple vs list, OrderedDict vs dict), nan == nan, tensor bytes."""
    assert type(expected) is type(actual), f"{where}: {type(expected)} != {type(actual)}"
    if isinstance(expected, torch.Tensor):
        assert (expected.dtype, expected.shape) == (actual.dtype, actual.shape), where
        assert raw_bytes(expected) == raw_bytes(actual), where
    elif isinstance(expected, float):
        assert (math.isnan(expected) and math.isnan(actual)) or (
            expected == actual and math.copysign(1, expected) == math.copysign(1, actual)
        ), where
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual), where
        for index, (a, b) in enumerate(zip(expected, actual, strict=True)):
            assert_same(a, b, f"{where}[{index}]")
    elif isinstance(expected, dict):
        assert [(type(k), k) for k in expected if k == k] == [(type(k), k) for k in actual if k == k], where
        for (key, a), b in zip(expected.items(), actual.values(), strict=True):
            assert_same(a, b, f"{where}[{key!r}]")
    else:
        assert expected == actual, where


def round_trip(obj: Any, path: Path) -> Any:
    save(obj, path)
    verify(path)
    return load(path)


def header_of(path: Path) -> tuple[int, dict[str, Any]]:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return length, json.loads(data[8 : 8 + length])


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TMP_MARKER in p.name)


def make_tensor(dtype: torch.dtype) -> torch.Tensor:
    if dtype == getattr(torch, "float4_e2m1fn_x2", None):
        return torch.arange(6, dtype=torch.uint8).reshape(2, 3).view(dtype)
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    if dtype.is_complex:
        return torch.complex(torch.arange(6.0), -torch.arange(6.0)).reshape(2, 3).to(dtype)
    return torch.arange(6, dtype=torch.int64).reshape(2, 3).to(dtype)


# ------------------------------------------------------------------------------------------------------ round trips

DTYPE_CASES = sorted(DTYPES.items())


@pytest.mark.parametrize(("code", "dtype"), DTYPE_CASES, ids=[code for code, _ in DTYPE_CASES])
def test_every_dtype_round_trips_and_opens_in_safetensors(tmp_path: Path, code: str, dtype: torch.dtype) -> None:
    tensor = make_tensor(dtype)
    path = tmp_path / "t.safetensors"
    back = round_trip({"x": tensor}, path)
    assert_same({"x": tensor}, back)
    with safetensors.safe_open(str(path), framework="pt") as handle:
        assert raw_bytes(handle.get_tensor("x")) == raw_bytes(tensor)
    assert header_of(path)[1]["x"]["dtype"] == code


SHAPE_CASES = {
    "0-dim": torch.tensor(3.5),
    "empty": torch.zeros(0),
    "empty 2-d": torch.zeros(3, 0, dtype=torch.int32),
    "transposed": torch.arange(12.0).reshape(3, 4).t(),
    "strided slice": torch.arange(20.0).reshape(4, 5)[:, ::2],
    "expanded": torch.arange(3.0).expand(4, 3),
    "conjugate view": torch.complex(torch.ones(3), torch.arange(3.0)).conj(),
    "bfloat16 non-contiguous": torch.randn(4, 6).to(torch.bfloat16)[1:, 2:5],
}


@pytest.mark.parametrize("tensor", SHAPE_CASES.values(), ids=SHAPE_CASES.keys())
def test_shapes_and_layouts_round_trip(tmp_path: Path, tensor: torch.Tensor) -> None:
    back = round_trip({"t": tensor}, tmp_path / "t.safetensors")["t"]
    assert back.is_contiguous()
    assert not back.is_conj()
    assert_same(tensor.resolve_conj().contiguous(), back)


def test_bare_tensor_round_trips(tmp_path: Path) -> None:
    tensor = torch.randn(3, 2)
    back = round_trip(tensor, tmp_path / "t.safetensors")
    assert_same(tensor, back)
    assert list(safetensors.torch.load_file(tmp_path / "t.safetensors")) == ["~root"]


def test_nested_plain_values_and_key_types_round_trip(tmp_path: Path) -> None:
    obj = {
        "floats": [1.5, -0.0, math.inf, -math.inf, math.nan, 1e308, 5e-324],
        "ints": (0, -1, 2**70, True, False),
        "none": None,
        "text": ["", "ünïcødé ✓", 'quote " and \\ backslash', "\n"],
        0: "int key",
        "0": "str key that looks like an int",
        True: "bool key",
        None: "None key",
        2.5: "float key",
        math.inf: "inf key",
        "a/b": torch.ones(1),
        "a.b": torch.zeros(1),
        "a~1b": torch.full((1,), 2.0),
        "~": torch.full((1,), 3.0),
        "": torch.full((1,), 4.0),
        "ordered": OrderedDict([("z", 1), ("a", 2)]),
        "nested": [[{"deep": (1, [2, (3,)])}]],
        "torch values": [torch.Size([2, 3]), torch.float16, torch.device("cuda:1"), torch.device("cpu")],
    }
    back = round_trip(obj, tmp_path / "t.safetensors")
    assert_same(obj, back)
    assert list(back) == list(obj)


def test_a_key_named_like_the_header_metadata_is_escaped(tmp_path: Path) -> None:
    obj = {"__metadata__": torch.ones(2), "x": {"__metadata__": torch.zeros(1)}}
    back = round_trip(obj, tmp_path / "t.safetensors")
    assert_same(obj, back)
    assert sorted(safetensors.torch.load_file(tmp_path / "t.safetensors")) == ["x/__metadata__", "~s__metadata__"]


def test_int_and_str_keys_that_render_alike_do_not_collide(tmp_path: Path) -> None:
    obj = {0: torch.zeros(1), "0": torch.ones(1), "flags": {True: torch.ones(1), None: torch.ones(1)}}
    back = round_trip(obj, tmp_path / "t.safetensors")
    assert_same(obj, back)
    names = sorted(safetensors.torch.load_file(tmp_path / "t.safetensors"))
    assert names == ["0", "flags/~none", "flags/~true", "~s0"]


class TinyLM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
        self.lm_head = torch.nn.Linear(4, 10, bias=False)
        self.lm_head.weight = self.embed.weight  # tied
        self.register_buffer("steps", torch.tensor(7))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.block(self.embed(tokens)))


def test_model_and_adam_state_round_trip_and_load_back(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999))
    model(torch.tensor([1, 2, 3])).sum().backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)  # keeps best = inf
    obj = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}

    back = round_trip(obj, tmp_path / "ckpt.safetensors")

    assert_same(obj, back)
    assert back["scheduler"]["best"] == math.inf
    assert back["model"]["lm_head.weight"] is back["model"]["embed.weight"]
    fresh_model = TinyLM()
    fresh_model.load_state_dict(back["model"])
    fresh_optimizer = torch.optim.Adam(fresh_model.parameters(), lr=1e-3)
    fresh_optimizer.load_state_dict(back["optimizer"])
    assert_same(optimizer.state_dict(), fresh_optimizer.state_dict())
    fresh_model(torch.tensor([4])).sum().backward()
    fresh_optimizer.step()


def test_tensors_are_stored_under_their_tree_paths(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 3)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    path = tmp_path / "ckpt.safetensors"
    save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    with safetensors.safe_open(str(path), framework="pt") as handle:
        assert sorted(handle.keys()) == [
            "model/bias",
            "model/weight",
            "optimizer/state/0/exp_avg",
            "optimizer/state/0/exp_avg_sq",
            "optimizer/state/0/step",
            "optimizer/state/1/exp_avg",
            "optimizer/state/1/exp_avg_sq",
            "optimizer/state/1/step",
        ]
        assert torch.equal(handle.get_tensor("model/weight"), model.weight.detach())
        metadata = handle.metadata()
    assert metadata["ferry.format"] == "2"
    assert set(metadata) == {
        "ferry.format",
        "ferry.tree",
        "ferry.checksum_algorithm",
        "ferry.checksums",
        "ferry.header_checksum",
    }


GOLDEN_DATA = b"\x00\x00\x80?\x00\x00\x00@"  # float32 [1.0, 2.0]
# A format 1 file, as ferry wrote it before it switched to xxh3_64: tensor checksums are CRC-32s.
CRC32_HEADER = (
    b'{"__metadata__":{"ferry.format":"1",'
    b'"ferry.tree":"{\\"dict\\":[[\\"a\\",{\\"tensor\\":\\"a\\"}]]}",'
    b'"ferry.checksum_algorithm":"crc32",'
    b'"ferry.checksums":"{\\"a\\":\\"2e3fa576\\"}",'
    b'"ferry.header_checksum":"105a6363"},'
    b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
)


# A format 1 file with xxh3_64 checksums, as development builds wrote it between the switch to xxh3_64 and format 2.
XXH3_FORMAT_1_HEADER = (
    b'{"__metadata__":{"ferry.format":"1",'
    b'"ferry.tree":"{\\"dict\\":[[\\"a\\",{\\"tensor\\":\\"a\\"}]]}",'
    b'"ferry.checksum_algorithm":"xxh3_64",'
    b'"ferry.checksums":"{\\"a\\":\\"4de8d78f7134f4b7\\"}",'
    b'"ferry.header_checksum":"7f37c8d6"},'
    b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}      '
)


def test_golden_header_bytes(tmp_path: Path) -> None:
    path = tmp_path / "tiny.safetensors"
    save({"a": torch.tensor([1.0, 2.0])}, path)
    assert "4de8d78f7134f4b7" == xxhash.xxh3_64_hexdigest(GOLDEN_DATA)
    header = (
        b'{"__metadata__":{"ferry.format":"2",'
        b'"ferry.tree":"{\\"dict\\":[[\\"a\\",{\\"tensor\\":\\"a\\"}]]}",'
        b'"ferry.checksum_algorithm":"xxh3_64",'
        b'"ferry.checksums":"{\\"a\\":\\"4de8d78f7134f4b7\\"}",'
        b'"ferry.header_checksum":"e4ad7239"},'
        b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}      '
    )
    assert len(header) % 8 == 0
    assert struct.pack("<Q", len(header)) + header + GOLDEN_DATA == path.read_bytes()


@pytest.fixture
def crc32_file(tmp_path: Path) -> Path:
    assert "2e3fa576" == f"{zlib.crc32(GOLDEN_DATA):08x}"
    assert 0 == len(CRC32_HEADER) % 8
    path = tmp_path / "crc32.safetensors"
    path.write_bytes(struct.pack("<Q", len(CRC32_HEADER)) + CRC32_HEADER + GOLDEN_DATA)
    return path


def test_crc32_files_from_earlier_versions_load_and_verify(crc32_file: Path) -> None:
    verify(crc32_file)
    assert_same({"a": torch.tensor([1.0, 2.0])}, load(crc32_file))


def test_format_1_files_with_xxh3_checksums_load_and_verify(tmp_path: Path) -> None:
    path = tmp_path / "xxh3-format-1.safetensors"
    path.write_bytes(struct.pack("<Q", len(XXH3_FORMAT_1_HEADER)) + XXH3_FORMAT_1_HEADER + GOLDEN_DATA)
    verify(path)
    assert_same({"a": torch.tensor([1.0, 2.0])}, load(path))


def test_crc32_file_with_a_flipped_bit_names_the_tensor(crc32_file: Path) -> None:
    data = bytearray(crc32_file.read_bytes())
    data[-1] ^= 0x01
    crc32_file.write_bytes(bytes(data))
    both_reject(crc32_file, r"tensor 'a' fails its checksum \(stored crc32 2e3fa576, computed [0-9a-f]{8}\)")


def test_unknown_checksum_algorithm_asks_for_upgrade(tmp_path: Path) -> None:
    from ferry.checkpoint.file.layout import encode_header, header_checksum

    rows = [("a", "F32", [2], 0, 8)]
    metadata = {
        "ferry.format": "2",
        "ferry.tree": '{"dict":[["a",{"tensor":"a"}]]}',
        "ferry.checksum_algorithm": "blake9",
        "ferry.checksums": '{"a":"00"}',
    }
    metadata["ferry.header_checksum"] = f"{header_checksum(metadata, rows):08x}"
    path = tmp_path / "future.safetensors"
    path.write_bytes(encode_header(metadata, rows) + GOLDEN_DATA)
    for check in (verify, load):
        with pytest.raises(CheckpointError, match=r"'blake9'.*newer ferry\. Upgrade ferry") as caught:
            check(path)
        assert type(caught.value) is CheckpointError


def test_header_is_padded_and_every_tensor_aligned(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    save({"b": torch.ones(3, dtype=torch.uint8), "f": torch.ones(3), "d": torch.ones(3, dtype=torch.float64)}, path)
    length, header = header_of(path)
    assert length % 8 == 0
    for name, info in header.items():
        if name != "__metadata__":
            assert info["data_offsets"][0] % DTYPES[info["dtype"]].itemsize == 0, name
    assert [header[name]["dtype"] for name in ("d", "f", "b")] == ["F64", "F32", "U8"]


def test_plain_tensors_come_back_detached(tmp_path: Path) -> None:
    leaf = torch.ones(2, requires_grad=True)
    back = round_trip({"leaf": leaf, "nonleaf": leaf * 2}, tmp_path / "t.safetensors")
    assert not back["leaf"].requires_grad
    assert torch.equal(back["nonleaf"], torch.full((2,), 2.0))


def test_parameters_come_back_as_parameters_and_ties_hold(tmp_path: Path) -> None:
    weight = torch.nn.Parameter(torch.randn(2, 2))
    frozen = torch.nn.Parameter(torch.randn(2), requires_grad=False)
    back = round_trip({"a": weight, "b": weight, "frozen": frozen}, tmp_path / "p.safetensors")
    assert isinstance(back["a"], torch.nn.Parameter)
    assert back["a"].requires_grad
    assert back["a"] is back["b"]
    assert isinstance(back["frozen"], torch.nn.Parameter)
    assert not back["frozen"].requires_grad
    assert torch.equal(back["a"], weight)


# ---------------------------------------------------------------------------------------------------- shared memory


def test_identical_aliases_are_stored_once_and_come_back_as_one_object(tmp_path: Path) -> None:
    weight = torch.randn(4, 3)
    obj = {"embed.weight": weight, "lm_head.weight": weight.view(4, 3), "again": [weight]}
    path = tmp_path / "tied.safetensors"
    back = round_trip(obj, path)
    assert back["embed.weight"] is back["lm_head.weight"] is back["again"][0]
    assert list(safetensors.torch.load_file(path)) == ["embed.weight"]
    back["embed.weight"][0, 0] = 100.0
    assert back["lm_head.weight"][0, 0] == 100.0


def test_views_of_one_tensor_come_back_as_views(tmp_path: Path) -> None:
    weight = torch.arange(12.0).reshape(3, 4)
    obj = {"w": weight, "wt": weight.t(), "row": weight[1], "col": weight[:, 2]}
    path = tmp_path / "views.safetensors"
    back = round_trip(obj, path)
    assert_same(obj["wt"], back["wt"].contiguous())
    assert torch.equal(back["row"], weight[1])
    assert torch.equal(back["col"], weight[:, 2])
    assert list(safetensors.torch.load_file(path)) == ["w"]
    back["w"][1, 2] = -1.0
    assert back["wt"][2, 1] == back["row"][2] == back["col"][1] == -1.0


def test_overlapping_slices_without_a_covering_tensor_share_one_region(tmp_path: Path) -> None:
    base = torch.arange(10.0)
    obj = {"head": base[:6], "tail": base[4:]}
    path = tmp_path / "slices.safetensors"
    back = round_trip(obj, path)
    assert torch.equal(back["head"], base[:6])
    assert torch.equal(back["tail"], base[4:])
    assert list(safetensors.torch.load_file(path)) == ["~shared/0"]
    back["head"][5] = -1.0
    assert back["tail"][1] == -1.0


def test_far_apart_slices_of_a_big_buffer_are_stored_separately(tmp_path: Path) -> None:
    big = torch.arange(100_000.0)
    obj = {"first": big[:2], "last": big[-2:]}
    path = tmp_path / "slices.safetensors"
    back = round_trip(obj, path)
    assert_same({"first": big[:2].clone(), "last": big[-2:].clone()}, back)
    assert path.stat().st_size < 2000  # not the 400 kB buffer


def test_same_storage_in_two_dtypes_is_stored_twice(tmp_path: Path) -> None:
    floats = torch.arange(4.0)
    back = round_trip({"f": floats, "i": floats.view(torch.int32)}, tmp_path / "t.safetensors")
    assert torch.equal(back["f"], floats)
    assert torch.equal(back["i"], floats.view(torch.int32))


# ---------------------------------------------------------------------------------------------- devices and loading


def test_load_on_meta_device(tmp_path: Path) -> None:
    weight = torch.randn(3, 3)
    path = tmp_path / "t.safetensors"
    save({"w": weight, "wt": weight.t(), "n": 3}, path)
    back = load(path, device="meta")
    assert back["w"].device == back["wt"].device == torch.device("meta")
    assert back["wt"].shape == (3, 3)
    assert back["n"] == 3


def test_load_on_a_missing_device_raises_device_error(tmp_path: Path) -> None:
    save({"w": torch.ones(1)}, tmp_path / "t.safetensors")
    with pytest.raises(DeviceError):
        load(tmp_path / "t.safetensors", device="cuda:7")


def test_package_reexports_save_and_load() -> None:
    assert ferry.save is save
    assert ferry.load is load


# ----------------------------------------------------------------------------------------------------- bad inputs


class MyTensor(torch.Tensor):
    pass


BAD_INPUTS = {
    "numpy array": ({"a": [1, np.zeros(3)]}, "obj['a'][1]", "torch.from_numpy"),
    "numpy scalar": ({"lr": np.float64(0.1)}, "obj['lr']", ".item()"),
    "object": ({"cfg": object()}, "obj['cfg']", "plain values"),
    "defaultdict": ({"d": collections.defaultdict(int)}, "obj['d']", "dict(value)"),
    "bytes": ({"b": b"raw"}, "obj['b']", "plain values"),
    "tuple key": ({(1, 2): 3}, "obj", "keys must be str, int"),
    "meta tensor": ({"w": torch.empty(2, 3, device="meta")}, "obj['w']", "meta device"),
    "complex128": ({"z": torch.zeros(2, dtype=torch.complex128)}, "obj['z']", "torch.view_as_real"),
    "sparse": ({"s": torch.eye(3).to_sparse()}, "obj['s']", "to_dense()"),
    "tensor subclass": ({"t": torch.ones(2).as_subclass(MyTensor)}, "obj['t']", "as_subclass(torch.Tensor)"),
    "lone surrogate": ({"s": "\ud800"}, "obj['s']", "surrogate"),
}


@pytest.mark.parametrize(("obj", "where", "fix"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_raises_with_path_and_fix_and_writes_nothing(tmp_path: Path, obj: Any, where: str, fix: str) -> None:
    path = tmp_path / "bad.safetensors"
    with pytest.raises(CheckpointError) as caught:
        save(obj, path)
    assert f"cannot save {where} " in str(caught.value)
    assert fix in str(caught.value)
    assert caught.value.path == path
    assert list(tmp_path.iterdir()) == []


def test_a_cycle_raises(tmp_path: Path) -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(CheckpointError, match="cycle"):
        save({"loop": loop}, tmp_path / "t.safetensors")


def test_save_into_a_missing_folder_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"does not exist.*mkdir\(parents=True"):
        save({"a": 1}, tmp_path / "no" / "such" / "t.safetensors")


def test_save_onto_a_folder_raises(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    with pytest.raises(CheckpointError, match="is a folder"):
        save({"a": 1}, tmp_path / "dir")
    assert leftovers(tmp_path) == []


def test_load_missing_file_raises_checkpoint_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.safetensors"
    with pytest.raises(CheckpointError, match="does not exist") as caught:
        load(path)
    assert not isinstance(caught.value, CorruptCheckpointError)
    assert caught.value.path == path
    assert isinstance(caught.value.__cause__, FileNotFoundError)
    with pytest.raises(CheckpointError, match="does not exist"):
        verify(path)


def test_load_a_folder_raises_checkpoint_error(tmp_path: Path) -> None:
    for check in (load, verify):
        with pytest.raises(CheckpointError, match="is a folder") as caught:
            check(tmp_path)
        assert caught.value.path == tmp_path


class BytesPath:
    def __fspath__(self) -> bytes:
        return b"model.safetensors"


BAD_PATHS = {
    "int": (5, "path is a int: 5", "as a str or pathlib.Path"),
    "None": (None, "path is a NoneType: None", "as a str or pathlib.Path"),
    "bytes": (b"model.safetensors", "path is a bytes: b'model.safetensors'", "as a str or pathlib.Path"),
    "PathLike of bytes": (BytesPath(), f"path is a {__name__}.BytesPath", "as a str or pathlib.Path"),
    "file object": (io.BytesIO(), "path is a _io.BytesIO", "not through file objects"),
    "swapped arguments": ({"w": 1}, "path is a dict: {'w': 1}", "look swapped"),
}


@pytest.mark.parametrize(("path", "what", "fix"), BAD_PATHS.values(), ids=BAD_PATHS.keys())
def test_a_path_that_is_not_a_path_raises_argument_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: Any, what: str, fix: str
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written, even under a name derived from the bad path
    swapped = fix == "look swapped"
    calls = {"save": lambda: save("model.safetensors" if swapped else {"w": 1}, path)}
    if not swapped:
        calls.update(load=lambda: load(path), verify=lambda: verify(path))
    for function, call in calls.items():
        with pytest.raises(ArgumentError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(f"ferry.{function}(")
        assert what in message
        assert fix in message
        assert isinstance(caught.value, TypeError)
    assert [] == list(tmp_path.iterdir())


def test_swapped_save_arguments_say_the_exact_call(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match=r"Call ferry\.save\(obj, 'runs/model\.safetensors'\)"):
        save(Path("runs/model.safetensors"), {"w": torch.ones(1)})


# ------------------------------------------------------------------------------------------------------ corruption


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    path = tmp_path / "good.safetensors"
    save({"w": torch.arange(64.0).reshape(8, 8), "b": torch.ones(8, dtype=torch.int64), "step": 3}, path)
    return path


def both_reject(path: Path, pattern: str | None = None) -> CorruptCheckpointError:
    with pytest.raises(CorruptCheckpointError, match=pattern):
        verify(path)
    with pytest.raises(CorruptCheckpointError, match=pattern) as caught:
        load(path)
    assert caught.value.path == path
    return caught.value


@pytest.mark.parametrize("keep", [0, 1, 7, 8, 9, 100, -600, -300, -1])
def test_truncated_file_is_corrupt(good_file: Path, keep: int) -> None:
    data = good_file.read_bytes()
    good_file.write_bytes(data[: keep if keep >= 0 else len(data) + keep])
    error = both_reject(good_file)
    assert "truncated" in str(error) or "empty" in str(error)
    assert str(good_file) in str(error)


def test_truncation_message_gives_both_sizes(good_file: Path) -> None:
    data = good_file.read_bytes()
    good_file.write_bytes(data[:-10])
    both_reject(good_file, rf"the file is {len(data) - 10} bytes but the header says {len(data)}: truncated")


def test_trailing_bytes_are_corrupt(good_file: Path) -> None:
    with open(good_file, "ab") as handle:
        handle.write(b"extra")
    both_reject(good_file, "trailing bytes")


def test_bit_flip_in_data_names_the_tensor(good_file: Path) -> None:
    data = bytearray(good_file.read_bytes())
    data[-100] ^= 0x04  # inside "w": tensors are ordered by element size, so int64 "b" comes first
    good_file.write_bytes(bytes(data))
    error = both_reject(
        good_file, r"tensor 'w' fails its checksum \(stored xxh3_64 [0-9a-f]{16}, computed [0-9a-f]{16}\)"
    )
    assert "earlier checkpoint" in str(error)


def test_every_single_bit_flip_is_caught(good_file: Path) -> None:
    original = good_file.read_bytes()
    for position in range(len(original)):
        for bit in (0x01, 0x80):
            flipped = bytearray(original)
            flipped[position] ^= bit
            good_file.write_bytes(bytes(flipped))
            for check in (verify, load):
                with pytest.raises(CorruptCheckpointError):
                    check(good_file)


JUNK = {
    "empty": b"",
    "text": b"hello, this is not a checkpoint\n" * 4,
    "png": b"\x89PNG\r\n\x1a\n" + bytes(100),
    "random": np.random.default_rng(0).bytes(4096),
    "json": b'{"a": 1}',
    "lfs pointer": b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n",
    "plausible length, bad json": struct.pack("<Q", 16) + b"{not json at all",
}


@pytest.mark.parametrize("content", JUNK.values(), ids=JUNK.keys())
def test_junk_is_corrupt_not_unsafe(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.safetensors"
    path.write_bytes(content)
    error = both_reject(path)
    assert type(error) is CorruptCheckpointError


def test_png_is_named(tmp_path: Path) -> None:
    path = tmp_path / "image.pt"
    path.write_bytes(JUNK["png"])
    both_reject(path, "not a checkpoint, it looks like a PNG image")


def test_header_from_newer_ferry_asks_for_upgrade(tmp_path: Path) -> None:
    header = json.dumps({"__metadata__": {"ferry.format": "3"}}).encode()
    header += b" " * (-len(header) % 8)
    path = tmp_path / "future.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(CheckpointError, match="newer ferry"):
        load(path)


def test_file_of_a_newer_format_is_refused_with_a_request_to_upgrade(tmp_path: Path) -> None:
    from ferry.checkpoint.file.layout import encode_header, header_checksum

    rows = [("a", "F32", [2], 0, 8)]
    metadata = {
        "ferry.format": "3",
        "ferry.tree": '{"dict":[["a",{"tensor":"a"}]]}',
        "ferry.checksum_algorithm": "xxh3_64",
        "ferry.checksums": '{"a":"4de8d78f7134f4b7"}',
    }
    metadata["ferry.header_checksum"] = f"{header_checksum(metadata, rows):08x}"
    path = tmp_path / "future.safetensors"
    path.write_bytes(encode_header(metadata, rows) + GOLDEN_DATA)
    for check in (verify, load):
        with pytest.raises(CheckpointError) as caught:
            check(path)
        assert type(caught.value) is CheckpointError  # not CorruptCheckpointError: nothing is wrong with the file
        assert (
            f"{str(path)!r} is a ferry format 3 file; this ferry reads formats up to 2. It was written by a newer "
            "ferry. Upgrade ferry (pip install -U ferry) to load it."
        ) == str(caught.value)
        assert path == caught.value.path


def test_a_flipped_format_digit_is_corruption_not_a_newer_format(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    save({"a": torch.tensor([1.0, 2.0])}, path)
    path.write_bytes(path.read_bytes().replace(b'"ferry.format":"2"', b'"ferry.format":"3"'))  # 0x32 -> 0x33
    both_reject(path, "the header fails its checksum")


@pytest.mark.parametrize(
    ("flip", "detail"),
    [
        ((b'"dtype"', b'"dtypf"'), "the header entry of tensor 'a' lacks dtype (it has 'dtypf' instead)"),
        ((b'"shape"', b'"shapf"'), "the header entry of tensor 'a' lacks shape (it has 'shapf' instead)"),
        ((b'"F32"', b'"F33"'), "tensor 'a' has unknown dtype 'F33'"),
        ((b'"shape":[2]', b'"shape":[3]'), "tensor 'a' (F32, shape [3]) needs 12 bytes"),
    ],
    ids=["dtype key", "shape key", "dtype code", "shape value"],
)
def test_a_flip_in_a_ferry_files_tensor_index_says_its_checksummed_header_changed(
    tmp_path: Path, flip: tuple[bytes, bytes], detail: str
) -> None:
    # The header checksum needs the parsed index, so a flip that breaks the index is caught first: named as what it is.
    path = tmp_path / "t.safetensors"
    save({"a": torch.tensor([1.0, 2.0])}, path)
    original = path.read_bytes()
    assert original.count(flip[0]) == 1
    path.write_bytes(original.replace(*flip))
    error = both_reject(path, "its checksummed header changed after it was written: ")
    assert detail in str(error)


def test_a_plain_safetensors_file_with_a_bad_entry_is_not_said_to_be_checksummed(tmp_path: Path) -> None:
    path = tmp_path / "plain.safetensors"
    safetensors.torch.save_file({"a": torch.ones(2)}, path)
    path.write_bytes(path.read_bytes().replace(b'"dtype"', b'"dtypf"'))
    error = both_reject(path, "the header entry of tensor 'a' lacks dtype")
    assert "checksummed" not in str(error)


# ---------------------------------------------------------------------------------------------- plain safetensors


def test_plain_safetensors_file_loads_as_flat_dict(tmp_path: Path) -> None:
    tensors = {"b.weight": torch.randn(3, 2), "a.bias": torch.arange(4, dtype=torch.int16)}
    path = tmp_path / "plain.safetensors"
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})
    verify(path)
    back = load(path)
    assert type(back) is dict
    assert sorted(back) == sorted(tensors)
    for name, tensor in tensors.items():
        assert_same(tensor, back[name])


def test_plain_safetensors_header_may_be_laid_out_freely(tmp_path: Path) -> None:
    # Only ferry files must hold the exact header bytes ferry writes; other writers indent, reorder and pad freely.
    tensors = {"x": torch.arange(3.0), "y": torch.ones(2, dtype=torch.int64)}
    path = tmp_path / "plain.safetensors"
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.dumps(dict(reversed(json.loads(data[8 : 8 + length]).items())), indent=2).encode()
    header += b"\n" * (-(8 + len(header)) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + data[8 + length :])
    verify(path)
    back = load(path)
    assert sorted(tensors) == sorted(back)
    for name, tensor in tensors.items():
        assert_same(tensor, back[name])


def test_plain_safetensors_truncation_is_caught_by_verify(tmp_path: Path) -> None:
    path = tmp_path / "plain.safetensors"
    safetensors.torch.save_file({"x": torch.randn(100)}, path)
    path.write_bytes(path.read_bytes()[:-4])
    both_reject(path, "truncated")


def test_real_silero_safetensors_loads_and_verifies() -> None:
    path = CASES / "silero_vad_16k.safetensors"
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared test files (../shared/cases) are not checked out")
    verify(path)
    back = load(path)
    reference = safetensors.torch.load_file(path)
    assert sorted(back) == sorted(reference)
    for name, tensor in reference.items():
        assert_same(tensor, back[name])


# ------------------------------------------------------------------------------------------------------ atomicity


def old_and_new(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = tmp_path / "ckpt.safetensors"
    old = {"w": torch.zeros(1000), "step": 1}
    save(old, path)
    return path, old


@pytest.mark.parametrize("target", ["replace", "fsync"])
def test_failing_replace_or_fsync_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    path, old = old_and_new(tmp_path)

    def fail(*args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, target, fail)
    with pytest.raises(CheckpointError, match="Input/output error") as caught:
        save({"w": torch.ones(1000), "step": 2}, path)
    monkeypatch.undo()
    assert isinstance(caught.value.__cause__, OSError)
    assert "Nothing was changed" in str(caught.value)
    verify(path)
    assert_same(old, load(path))
    assert leftovers(tmp_path) == []


def test_failure_midway_through_the_data_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, old = old_and_new(tmp_path)
    from ferry.checkpoint.file import writer

    real = writer._host_bytes
    calls = []

    def flaky(tensor: torch.Tensor) -> np.ndarray:
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(tensor)

    monkeypatch.setattr(writer, "_host_bytes", flaky)
    with pytest.raises(CheckpointError, match="disk is full"):
        save({"a": torch.ones(10), "b": torch.ones(10)}, path)
    assert_same(old, load(path))
    assert leftovers(tmp_path) == []


WRITER = textwrap.dedent(
    """
    import sys, torch, ferry
    path, size = sys.argv[1], int(sys.argv[2])
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        ferry.save({"w": torch.full((size,), float(i)), "v": torch.full((size // 3,), -float(i)), "i": i}, path)
        print("saved", i, flush=True)
    """
)


@pytest.mark.slow
def test_killed_writer_leaves_old_or_new_complete_file(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.safetensors"
    size = 4_000_000  # 16 MB of float32 per save
    save({"w": torch.full((size,), 0.0), "v": torch.full((size // 3,), -0.0), "i": 0}, path)
    seen = set()
    # killed at moments spread over a save, after a number of completed saves (counted, so a slow machine does not
    # turn the test into "killed before the first save")
    for saves, delay in ((0, 0.05), (1, 0.0), (1, 0.1), (2, 0.02), (2, 0.2)):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(size)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
        for _ in range(saves):
            assert writer.stdout.readline().startswith("saved")
        time.sleep(delay)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        verify(path)
        back = load(path)
        i = back["i"]
        assert torch.equal(back["w"], torch.full((size,), float(i)))
        assert torch.equal(back["v"], torch.full((size // 3,), -float(i)))
        seen.add(i)
        for tmp in tmp_path.iterdir():  # a killed writer leaves its temporary file, recognisable by its name
            if tmp != path:
                assert TMP_MARKER in tmp.name
                tmp.unlink()
    assert len(seen) > 1, "the writer never completed a save: make the file smaller"


# ------------------------------------------------------------------------------------------------ property test

keys = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none())
plain = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
)
small_tensors = st.builds(
    lambda values, dtype: torch.tensor(values).to(dtype),
    st.lists(st.floats(-1e3, 1e3, width=32), max_size=5),
    st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bfloat16, torch.bool, torch.uint8]),
)
trees = st.recursive(
    st.one_of(plain, small_tensors),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4),
        st.dictionaries(keys, children, max_size=4).map(OrderedDict),
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=trees)
def test_random_trees_round_trip(tmp_path: Path, obj: Any) -> None:
    assert_same(obj, round_trip(obj, tmp_path / "prop.safetensors"))


def test_plain_safetensors_with_misaligned_tensors_loads(tmp_path: Path) -> None:
    header = json.dumps(
        {
            "a": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [3, 11]},
        }
    ).encode()
    header += b" " * (-len(header) % 8)
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\x01\x02\x03" + struct.pack("<2f", 1.5, -2.0))
    back = load(path)
    assert back["a"].tolist() == [1, 2, 3]
    assert back["b"].tolist() == [1.5, -2.0]
    assert back["b"].data_ptr() % 4 == 0


def test_large_file_round_trips_through_the_threaded_paths(tmp_path: Path) -> None:
    obj = {f"w{i}": torch.randn(1024, 1024) for i in range(6)}  # 24 MiB: above the threading threshold
    obj["tied"] = obj["w0"]
    back = round_trip(obj, tmp_path / "big.safetensors")
    assert_same(obj, back)
    assert back["tied"] is back["w0"]
    data = bytearray((tmp_path / "big.safetensors").read_bytes())
    data[-5] ^= 0x10
    (tmp_path / "big.safetensors").write_bytes(bytes(data))
    both_reject(tmp_path / "big.safetensors", "tensor 'w5' fails its checksum")


# ------------------------------------------------------------------------- large files: direct writes, threaded reads


def big_state(seed: int = 0) -> dict[str, Any]:
    """~20 MiB (above DIRECT_FROM and THREADS_FROM) of mixed dtypes and odd sizes, plus small and empty tensors."""
    gen = torch.Generator().manual_seed(seed)
    return {
        "w": torch.randn(1000, 2001, generator=gen),  # 8 MB, not a multiple of the page size
        "h": torch.randn(3, 1_000_003, generator=gen).to(torch.float16),  # 6 MB
        "d": torch.randn(777_777, generator=gen, dtype=torch.float64),  # 6.2 MB
        "b": torch.rand(1001, generator=gen) > 0.5,
        "i": torch.arange(5, dtype=torch.int8),
        "e": torch.empty(0, 3),
        "step": 7,
    }


def test_large_file_data_starts_on_a_page_and_opens_in_safetensors(tmp_path: Path) -> None:
    from ferry.checkpoint.file.layout import DIRECT_ALIGN, DIRECT_FROM

    obj = big_state()
    path = tmp_path / "big.safetensors"
    save(obj, path)
    length, header = header_of(path)
    data_bytes = sum(t.numel() * t.element_size() for t in obj.values() if isinstance(t, torch.Tensor))
    assert data_bytes >= DIRECT_FROM
    assert 0 == (8 + length) % DIRECT_ALIGN
    assert 8 + length + data_bytes == path.stat().st_size  # the padding of the last direct write is cut off
    assert header["__metadata__"]["ferry.checksum_algorithm"] == "xxh3_64"
    assert_same(obj, load(path))
    verify(path)
    reference = safetensors.torch.load_file(path)
    for name in ("w", "h", "d", "b", "i", "e"):
        assert_same(obj[name], reference[name])


def test_without_direct_io_the_bytes_are_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ferry.checkpoint.file import writer

    obj = big_state()
    save(obj, tmp_path / "direct.safetensors")
    monkeypatch.setattr(writer, "_set_direct", lambda fd, *, on: False)  # a file system without O_DIRECT
    save(obj, tmp_path / "buffered.safetensors")
    assert (tmp_path / "direct.safetensors").read_bytes() == (tmp_path / "buffered.safetensors").read_bytes()


def test_a_refused_direct_write_falls_back_to_the_page_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ferry.checkpoint.file import writer

    real, calls = os.pwrite, []

    def picky(fd: int, data: Any, offset: int) -> int:
        calls.append(offset)
        if len(calls) == 2:
            raise OSError(22, "Invalid argument")  # what a file system with stricter alignment says
        return real(fd, data, offset)

    monkeypatch.setattr(writer.os, "pwrite", picky)
    obj = big_state()
    path = tmp_path / "big.safetensors"
    save(obj, path)
    monkeypatch.undo()
    assert len(calls) > 2
    verify(path)
    assert_same(obj, load(path))


@pytest.mark.parametrize("where", ["pwrite", "fallocate"])
def test_a_full_disk_during_a_large_save_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    from ferry.checkpoint.file import writer

    path, old = old_and_new(tmp_path)
    if where == "pwrite":
        real, calls = os.pwrite, []

        def full(fd: int, data: Any, offset: int) -> int:
            calls.append(offset)
            if len(calls) == 1:
                raise OSError(28, "No space left on device")
            return real(fd, data, offset)

        monkeypatch.setattr(writer.os, "pwrite", full)
    else:
        monkeypatch.setattr(writer, "_fallocate", lambda: lambda fd, mode, offset, size: -1)
        monkeypatch.setattr(writer.ctypes, "get_errno", lambda: 28)
    with pytest.raises(CheckpointError, match="disk is full"):
        save(big_state(), path)
    monkeypatch.undo()
    assert_same(old, load(path))
    assert leftovers(tmp_path) == []
    save(big_state(1), path)  # the staging buffers went back to the pool
    assert_same(big_state(1), load(path))


def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make reads cut tensors into many pieces, read by several threads even for a small file."""
    from ferry.checkpoint.file import reader

    monkeypatch.setattr(reader, "PIECE", 64 << 10)
    monkeypatch.setattr(reader, "THREADS_FROM", 0)
    monkeypatch.setattr(reader, "_READERS", 4)
    monkeypatch.setattr(reader.os, "cpu_count", lambda: 4)


@pytest.mark.parametrize("algorithm", ["xxh3_64", "crc32"])
def test_tensors_read_in_pieces_by_threads_verify_and_catch_a_flip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    from ferry.checkpoint.file import writer
    from ferry.checkpoint.file.layout import ALGORITHMS

    if algorithm == "crc32":  # a format 1 file, as earlier ferry versions wrote
        monkeypatch.setattr(writer, "FORMAT_VERSION", "1")
    monkeypatch.setattr(writer, "ALGORITHM", ALGORITHMS[algorithm])
    obj = big_state()
    path = tmp_path / "big.safetensors"
    save(obj, path)
    assert header_of(path)[1]["__metadata__"]["ferry.checksum_algorithm"] == algorithm
    small_pieces(monkeypatch)
    assert_same(obj, load(path))
    verify(path)
    length, header = header_of(path)
    start, end = header["h"]["data_offsets"]
    data = bytearray(path.read_bytes())
    data[8 + length + (start + end) // 2] ^= 0x01  # in the middle of a tensor of many pieces
    path.write_bytes(bytes(data))
    both_reject(path, rf"tensor 'h' fails its checksum \(stored {algorithm} ")


def test_pieces_hashed_out_of_order_give_the_tensor_checksum(tmp_path: Path) -> None:
    from ferry.checkpoint.file import reader

    obj = {"a": torch.arange(1000.0), "b": torch.arange(10.0)}
    path = tmp_path / "t.safetensors"
    save(obj, path)
    with open(path, "rb") as handle:
        header = reader.read_header(handle, path, path.stat().st_size)
    regions = [reader._Region(0, 4000, (0,)), reader._Region(4000, 4040, (1,))]
    views = [raw_bytes(obj["a"]), raw_bytes(obj["b"])]
    pieces = [
        reader._Piece(0, ((0, 0, 0, 1000), (0, 1, 1000, 2400))),
        reader._Piece(0, ((0, 2, 2400, 4000), (1, 0, 0, 40))),
    ]
    verifier = reader._Verifier(header, regions, [memoryview(v) for v in views])
    verifier.expect(pieces)
    for index, position in [(0, 2), (1, 0), (0, 1), (0, 0)]:  # the last part to arrive hashes all three
        verifier.done(index, position)
    damaged = bytearray(views[0])
    damaged[3000] ^= 1
    verifier = reader._Verifier(header, regions, [memoryview(bytes(damaged)), memoryview(views[1])])
    verifier.expect(pieces)
    verifier.done(0, 1)
    verifier.done(0, 0)
    with pytest.raises(CorruptCheckpointError, match="tensor 'a' fails its checksum"):
        verifier.done(0, 2)


def test_a_file_that_shrinks_while_being_read_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ferry.checkpoint.file import reader

    path = tmp_path / "big.safetensors"
    save(big_state(), path)
    small_pieces(monkeypatch)
    real = reader._read_into

    def shrinking(handle: Any, lock: Any, buffers: list[memoryview], offset: int) -> int:
        got = real(handle, lock, buffers, offset)
        return got // 2 if offset > 10 << 20 else got  # another process truncated the file at 10 MB

    monkeypatch.setattr(reader, "_read_into", shrinking)
    with pytest.raises(CorruptCheckpointError, match="the file shrank while being read"):
        load(path)


def test_loaded_tensors_own_their_memory_and_do_not_follow_the_file(tmp_path: Path) -> None:
    obj = big_state()
    path = tmp_path / "big.safetensors"
    save(obj, path)
    back = load(path)
    with open(path, "r+b") as handle:  # overwrite the file in place, then truncate it
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(size // 2)
        handle.write(bytes(size - size // 2))
        handle.truncate(size // 2)
    assert_same(obj, back)
    for name in ("w", "h", "d"):  # large tensors do not keep a shared buffer alive
        assert back[name].untyped_storage().nbytes() - back[name].numel() * back[name].element_size() in range(8)


def test_the_reader_reads_more_than_iov_max_tensors_per_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ferry.checkpoint.file import reader

    monkeypatch.setattr(reader, "_IOV_MAX", 7)
    obj = {f"t{i}": torch.full((i % 5,), float(i)) for i in range(100)}
    assert_same(obj, round_trip(obj, tmp_path / "many.safetensors"))


# ------------------------------------------------------------------------------------------- async-save snapshots


def test_snapshots_reuse_their_buffers_and_copy_every_kind_of_tensor() -> None:
    from ferry.checkpoint.run.snapshot import Snapshotter

    base = torch.randn(64, 32)
    tree = {
        "w": base,
        "tied": base,
        "t": base.t(),  # strided
        "bf": torch.randn(40 << 10).to(torch.bfloat16),
        "c": torch.randn(3, dtype=torch.complex64).conj(),
        "e": torch.empty(0),
        "p": torch.nn.Parameter(torch.ones(3)),
        "big": torch.randn(24 << 20 >> 2),  # 24 MiB: copied by threads, in pieces
        "n": [1, (torch.arange(3), "x")],
    }
    snapshots = Snapshotter()
    first = snapshots.copy(tree)
    assert_same({k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in tree.items()}, first)
    assert first["tied"] is first["w"]
    assert first["w"].data_ptr() != base.data_ptr()
    assert first["t"].is_contiguous()
    assert not first["p"].requires_grad
    pointers = {k: v.data_ptr() for k, v in first.items() if isinstance(v, torch.Tensor)}
    base.add_(1)  # training changes the state in place
    tree["big"].mul_(2)
    second = snapshots.copy(tree)
    assert pointers == {k: v.data_ptr() for k, v in second.items() if isinstance(v, torch.Tensor)}
    assert torch.equal(second["w"], base)
    assert torch.equal(second["t"], base.t())
    assert torch.equal(second["big"], tree["big"])


def test_small_tensors_sharing_memory_split_across_pieces_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    obj = {f"t{i}": torch.full((1000 + i,), float(i)) for i in range(300)}  # 1.3 MB of tensors under 1 MiB each
    path = tmp_path / "small.safetensors"
    save(obj, path)
    small_pieces(monkeypatch)  # regions of small tensors end up cut by piece boundaries
    back = load(path)
    assert_same(obj, back)
    back["t0"].add_(1)  # tensors sharing memory do not overlap
    assert torch.equal(back["t1"], obj["t1"])
    length, header = header_of(path)
    data = bytearray(path.read_bytes())
    data[8 + length + header["t200"]["data_offsets"][0] + 5] ^= 0x40
    path.write_bytes(bytes(data))
    both_reject(path, "tensor 't200' fails its checksum")


def test_loaded_tensors_start_their_storage_like_after_torch_load(tmp_path: Path) -> None:
    state = torch.get_rng_state()
    obj = {"rng": state, "scalars": [torch.tensor(float(i)) for i in range(10)], "w": torch.randn(300_000)}
    back = round_trip(obj, tmp_path / "rng.safetensors")
    assert [0] * 12 == [t.storage_offset() for t in (back["rng"], *back["scalars"], back["w"])]
    torch.set_rng_state(back["rng"])  # torch's generator reads the storage from its start
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.gpu
def test_large_cuda_state_saves_through_the_direct_writer_and_loads_on_both_devices(tmp_path: Path) -> None:
    state = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in big_state().items()}
    path = tmp_path / "cuda.safetensors"
    save(state, path)
    verify(path)
    assert_same(big_state(), load(path))
    on_gpu = load(path, device="cuda")
    assert on_gpu["w"].device.type == "cuda"
    assert torch.equal(on_gpu["w"], state["w"])


@pytest.mark.gpu
def test_snapshots_of_cuda_tensors_land_in_reused_pinned_buffers() -> None:
    from ferry.checkpoint.run.snapshot import Snapshotter

    tree = {"w": torch.randn(1 << 20, device="cuda"), "c": torch.arange(5.0)}
    snapshots = Snapshotter()
    first = snapshots.copy(tree)
    assert first["w"].device.type == "cpu"
    assert first["w"].is_pinned()
    assert torch.equal(first["w"], tree["w"].cpu())
    pointer = first["w"].data_ptr()
    tree["w"].add_(1)  # the next training step
    second = snapshots.copy(tree)
    assert pointer == second["w"].data_ptr()
    assert torch.equal(second["w"], tree["w"].cpu())


def test_a_small_json_file_is_not_a_checkpoint_rather_than_truncated(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"a": 1}')
    with pytest.raises(CorruptCheckpointError, match="is not a checkpoint, it looks like text") as caught:
        load(path)
    assert "truncated" not in str(caught.value)
