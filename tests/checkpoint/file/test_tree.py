"""The structure encoding: tensor names and their escaping, and malformed trees in otherwise valid files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ferry.checkpoint.file.api import load, verify
from ferry.checkpoint.file.layout import Blob
from ferry.checkpoint.file.tree import describe, encode, tensor_name
from ferry.checkpoint.file.writer import write_file
from ferry.errors import CorruptCheckpointError

NAMES = [
    ((), "~root"),
    (("model", "layer.weight"), "model/layer.weight"),
    (("optimizer", "state", 0, "exp_avg"), "optimizer/state/0/exp_avg"),
    (("a/b",), "a~1b"),
    (("~x",), "~0x"),
    (("~1",), "~01"),
    (("0",), "~s0"),
    (("-12",), "~s-12"),
    ((0,), "0"),
    ((-3,), "-3"),
    ((True,), "~true"),
    ((False,), "~false"),
    ((None,), "~none"),
    ((1.5,), "~f1.5"),
    ((float("-inf"),), "~f-inf"),
    (("",), ""),
    (("__metadata__",), "~s__metadata__"),
    (("__metadata__", "x"), "__metadata__/x"),
    (("", ""), "/"),
    (("ünï", "✓"), "ünï/✓"),
]


@pytest.mark.parametrize(("trail", "name"), NAMES)
def test_tensor_name(trail: tuple[object, ...], name: str) -> None:
    assert name == tensor_name(trail)  # type: ignore[arg-type]


keys = st.one_of(st.text(max_size=6), st.integers(-100, 100), st.booleans(), st.none(), st.floats(allow_nan=False))


@given(st.lists(keys, max_size=4), st.lists(keys, max_size=4))
def test_distinct_paths_get_distinct_names(first: list[object], second: list[object]) -> None:
    same_path = [(type(k), k) for k in first] == [(type(k), k) for k in second]
    assert same_path == (tensor_name(first) == tensor_name(second))  # type: ignore[arg-type]


def test_describe_reads_as_python() -> None:
    assert describe(("optimizer", "state", 0)) == "obj['optimizer']['state'][0]"
    assert describe(()) == "obj"


def test_shared_regions_get_reserved_names_that_no_key_renders_to() -> None:
    base = torch.arange(8.0)
    encoded = encode({"~shared": {"0": base[:5]}, "x": base[3:]}, Path("t"))
    assert [blob.name for blob in encoded.blobs] == ["~shared/0"]
    assert tensor_name(("~shared", "0")) == "~0shared/~s0"


MALFORMED = {
    "not json": "{",
    "unknown tag": '{"weird": []}',
    "two tags": '{"tuple": [], "dict": []}',
    "bad float": '{"float": "pinf"}',
    "pair of one": '{"dict": [[1]]}',
    "tuple key": '{"dict": [[{"tuple": []}, 1]]}',
    "duplicate key": '{"dict": [["a", 1], ["a", 2]]}',
    "missing tensor": '{"tensor": "nope"}',
    "view out of bounds": '{"tensor": "t", "view": [2, [3], [1]]}',
    "malformed view": '{"tensor": "t", "view": [0, [3]]}',
    "negative stride": '{"tensor": "t", "view": [0, [2], [-1]]}',
    "bad parameter flag": '{"tensor": "t", "parameter": 1}',
    "extra tensor key": '{"tensor": "t", "dtype": "float32"}',
    "not a dtype": '{"dtype": "Tensor"}',
    "unknown dtype": '{"dtype": "float99"}',
    "bad device": '{"device": "toaster:0"}',
    "negative size": '{"size": [-1]}',
    "too deep": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("tree_json", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_tree_is_corrupt(tmp_path: Path, tree_json: str) -> None:
    path = tmp_path / "crafted.safetensors"
    write_file(path, tree_json, [Blob("t", torch.arange(4.0))])  # valid checksums around a bad tree
    for check in (load, verify):
        with pytest.raises(CorruptCheckpointError, match="tree is malformed"):
            check(path)
