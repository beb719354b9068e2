"""Loading torch.save files: restricted unpickler, unsafe pickles, trusted opt-in, CUDA storages, real files."""

from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from _support import CASES as SHARED_CASES
from ferry.checkpoint.file.api import load, verify
from ferry.checkpoint.file.kinds import torch_save_kind as sniff
from ferry.checkpoint.file.torch_save import _scan, restricted_unpickler_is_safe
from ferry.errors import CheckpointError, CorruptCheckpointError, UnsafeCheckpointError

CASES = SHARED_CASES / "checkpoints"


def case(name: str) -> Path:
    path = CASES / name
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared test files (../shared/cases) are not checked out")
    return path


class RunsShell:
    """Pickles as a call to os.system: loading it with the full unpickler would run the command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (self.command,))


class Harmless:
    """A class the restricted unpickler does not know; loading it runs no code beyond building it."""

    def __init__(self, value: int) -> None:
        self.value = value


def state_dict() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2).state_dict()


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy pickle"])
def test_torch_save_file_loads_as_state_dict(tmp_path: Path, zipped: bool) -> None:
    path = tmp_path / "model.bin"  # extension says nothing: detected by content
    expected = state_dict()
    torch.save(expected, path, _use_new_zipfile_serialization=zipped)
    back = load(path)
    assert list(back) == list(expected)
    for name, tensor in expected.items():
        assert torch.equal(back[name], tensor)
    verify(path)


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy pickle"])
def test_map_location_is_honoured(tmp_path: Path, zipped: bool) -> None:
    path = tmp_path / "model.pt"
    torch.save(state_dict(), path, _use_new_zipfile_serialization=zipped)
    back = load(path, device="meta")
    assert {tensor.device for tensor in back.values()} == {torch.device("meta")}


def test_cuda_storages_load_on_a_cpu_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "from_gpu.pt"
    expected = state_dict()
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save(expected, path)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):  # the pitfall ferry avoids
            torch.load(path, weights_only=True)
    back = load(path)
    for name, tensor in expected.items():
        assert back[name].device == torch.device("cpu")
        assert torch.equal(back[name], tensor)


def test_pickle_that_runs_a_shell_command_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"weights": torch.ones(2), "payload": RunsShell(f"touch {marker}")}, path)
    with pytest.raises(UnsafeCheckpointError, match=r"calls (posix|os|nt)\.system") as caught:
        load(path)
    assert "ferry.load(path, trusted=True)" in str(caught.value)
    assert caught.value.path == path
    assert not marker.exists()


def test_legacy_pickle_that_runs_a_shell_command_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save([RunsShell(f"touch {marker}")], path, _use_new_zipfile_serialization=False)
    with pytest.raises(UnsafeCheckpointError, match="system"):
        load(path)
    with pytest.raises(UnsafeCheckpointError):
        verify(path)
    assert not marker.exists()


def test_unknown_class_is_refused_then_loads_when_trusted(tmp_path: Path) -> None:
    path = tmp_path / "custom.pt"
    torch.save({"config": Harmless(3), "order": collections.OrderedDict(a=1)}, path)
    with pytest.raises(UnsafeCheckpointError, match=r"calls \S*Harmless"):
        load(path)
    back = load(path, trusted=True)
    assert isinstance(back["config"], Harmless)
    assert back["config"].value == 3


def test_trusted_load_of_a_class_that_cannot_be_imported_says_so(tmp_path: Path) -> None:
    path = tmp_path / "custom.pt"
    buffer = io.BytesIO()
    torch.save({"config": Harmless(3)}, buffer)
    # point the pickle at a module that does not exist
    module = Harmless.__module__.encode()
    path.write_bytes(
        buffer.getvalue().replace(module, b"gone_module_" * (len(module) // 12) + b"x" * (len(module) % 12))
    )
    with pytest.raises(CheckpointError, match="not importable here") as caught:
        load(path, trusted=True)
    assert not isinstance(caught.value, CorruptCheckpointError)


def test_old_torch_refuses_every_untrusted_pickle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.pt"
    torch.save(state_dict(), path)
    monkeypatch.setattr(torch, "__version__", "2.5.1")
    with pytest.raises(UnsafeCheckpointError, match="CVE-2025-32434"):
        load(path)
    assert set(load(path, trusted=True)) == {"weight", "bias"}


VERSIONS = {"2.5.1": False, "2.6.0": True, "2.13.0+cpu": True, "1.13.1": False, "10.0": True, "nightly": False}


@pytest.mark.parametrize(("version", "safe"), VERSIONS.items())
def test_restricted_unpickler_is_safe(version: str, safe: bool) -> None:
    assert restricted_unpickler_is_safe(version) is safe


BROKEN = {
    "junk with pickle start": b"\x80\x02junk junk junk",
    "zip magic then junk": b"PK\x03\x04" + b"junk" * 100,
    "plain pickle, not torch": pickle.dumps({"a": 1}, protocol=2),
}


@pytest.mark.parametrize("content", BROKEN.values(), ids=BROKEN.keys())
def test_broken_torch_files_are_corrupt_not_unsafe(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.pt"
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as caught:
        load(path)
    assert type(caught.value) is CorruptCheckpointError
    assert caught.value.path == path


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9, 0.99])
def test_truncated_torch_zip_is_corrupt(tmp_path: Path, fraction: float) -> None:
    path = tmp_path / "cut.pt"
    torch.save({"w": torch.randn(1000)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    for check in (load, verify):
        with pytest.raises(CorruptCheckpointError) as caught:
            check(path)
        assert type(caught.value) is CorruptCheckpointError


def test_truncated_legacy_pickle_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "cut.pt"
    torch.save({"w": torch.randn(1000)}, path, _use_new_zipfile_serialization=False)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CorruptCheckpointError):
        load(path)


def test_bit_flip_in_a_torch_zip_entry_is_caught_by_verify(tmp_path: Path) -> None:
    path = tmp_path / "flip.pt"
    torch.save({"w": torch.zeros(10_000)}, path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # inside the tensor data record
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="damaged"):
        verify(path)


def test_zip_that_is_not_a_torch_file_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(CorruptCheckpointError, match=r"without a data\.pkl"):
        load(path)


SNIFF_CASES = {
    b"PK\x03\x04rest": "zip",
    b"\x80\x02\x8a\x0al": "pickle",
    b"\x80\x05\x95": "pickle",
    b"\x80\x07": None,
    b"hello": None,
    b"hello, world\n" * 40: None,
    b"": None,
    pickle.dumps({"a": [1, 2]}, protocol=0): "pickle",
    pickle.dumps({"a": [1, 2]}, protocol=1): "pickle",
    pickle.dumps({str(i): i for i in range(200)}, protocol=0)[:512]: "pickle",  # the head of a longer pickle
    pickle.dumps({str(i): i for i in range(200)}, protocol=0)[:100]: None,  # a short file that ends mid-pickle
}


@pytest.mark.parametrize(("head", "kind"), SNIFF_CASES.items(), ids=[repr(h[:12]) for h in SNIFF_CASES])
def test_sniff(head: bytes, kind: str | None) -> None:
    assert sniff(head) == kind


@pytest.mark.parametrize("name", ["facenet_pnet.pt", "facenet_rnet.pt", "lpips_v0.1_alex.pth"])
def test_real_legacy_pickles_load_as_state_dicts(name: str) -> None:
    path = case(name)
    reference = torch.load(path, map_location="cpu", weights_only=True)
    back = load(path)
    assert isinstance(back, collections.OrderedDict)
    assert list(back) == list(reference)
    assert all(torch.equal(back[key], reference[key]) for key in reference)
    verify(path)


def test_real_torchscript_archive_says_to_use_torch_jit_load() -> None:
    path = case("silero_vad.jit")
    for check in (load, verify):
        with pytest.raises(CheckpointError, match=r"TorchScript.*torch\.jit\.load\(path\)") as caught:
            check(path)
        assert type(caught.value) is CheckpointError
        assert caught.value.path == path


# ---------------------------------------------------------------- pickle protocols, plain pickles, focused messages

TORCH_BOILERPLATE = ("Weights only load failed", "Check the documentation", "pytorch.org", "file an issue")


def assert_focused(error: Exception, *phrases: str) -> None:
    """ferry's own words: the phrases, none of torch's boilerplate, and short enough to read."""
    message = str(error)
    for phrase in phrases:
        assert phrase in message
    assert not [text for text in TORCH_BOILERPLATE if text in message]
    assert len(message) < 600, message


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_plain_pickle_of_any_protocol_is_named_as_such(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / "data.pt"
    path.write_bytes(pickle.dumps({"a": [1, 2]}, protocol=protocol))
    for check in (load, verify, lambda p: load(p, trusted=True)):
        with pytest.raises(CorruptCheckpointError) as caught:
            check(path)
        assert type(caught.value) is CorruptCheckpointError
        assert_focused(caught.value, f"plain Python pickle (protocol {protocol}), not a torch.save file", "pickle.load")
        assert "looks like text" not in str(caught.value)


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_plain_pickle_that_runs_a_shell_command_never_runs_even_when_trusted(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"w": 1, "x": RunsShell(f"touch {marker}")}, protocol=protocol))
    for check in (load, verify, lambda p: load(p, trusted=True)):
        with pytest.raises(UnsafeCheckpointError, match=r"calls (posix|os|nt)\.system when loaded") as caught:
            check(path)
        assert_focused(caught.value, f"plain Python pickle (protocol {protocol})", "pickle.load", "ferry.save")
        assert caught.value.path == path
    assert not marker.exists()


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy pickle"])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_refusal_names_the_global_in_ferrys_words_with_torchs_text_as_the_cause(
    tmp_path: Path, protocol: int, zipped: bool
) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save([RunsShell(f"touch {marker}")], path, pickle_protocol=protocol, _use_new_zipfile_serialization=zipped)
    for check in (load,) if zipped else (load, verify):  # verify checks a zip's CRCs without unpickling
        with pytest.raises(UnsafeCheckpointError, match=r"calls (posix|os|nt)\.system when loaded") as caught:
            check(path)
        assert_focused(caught.value, "ferry.load(path, trusted=True)", "ferry.save")
        assert isinstance(caught.value.__cause__, pickle.UnpicklingError)
        assert "Weights only load failed" in str(caught.value.__cause__)
    assert not marker.exists()


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy pickle"])
@pytest.mark.parametrize("protocol", [2, 3])
def test_protocols_torchs_restricted_unpickler_reads_load_without_warnings(
    tmp_path: Path, protocol: int, zipped: bool
) -> None:
    path = tmp_path / "model.pt"
    expected = state_dict()
    torch.save(expected, path, pickle_protocol=protocol, _use_new_zipfile_serialization=zipped)
    back = load(path)  # torch warns "Detected pickle protocol 3": with filterwarnings=error that would fail
    assert all(torch.equal(back[key], expected[key]) for key in expected)
    verify(path)


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy pickle"])
@pytest.mark.parametrize(("protocol", "opcode"), [(1, "LONG"), (4, "FRAME"), (5, "FRAME")])
def test_protocols_torchs_restricted_unpickler_cannot_read_ask_for_trust(
    tmp_path: Path, protocol: int, opcode: str, zipped: bool
) -> None:
    path = tmp_path / "model.pt"
    expected = state_dict()
    torch.save(expected, path, pickle_protocol=protocol, _use_new_zipfile_serialization=zipped)
    with pytest.raises(UnsafeCheckpointError) as caught:
        load(path)
    assert_focused(caught.value, f"protocol {protocol}", "restricted unpickler cannot read", "trusted=True")
    if not zipped:
        assert f"its {opcode} opcode" in str(caught.value)
    back = load(path, trusted=True)
    assert all(torch.equal(back[key], expected[key]) for key in expected)


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_scan_names_every_global_without_running_the_pickle(protocol: int) -> None:
    # the second os function reuses the memoized module name (BINGET before STACK_GLOBAL in protocol 4+);
    # protocols 0 and 1 build Harmless through copyreg._reconstructor and builtins.object
    data = pickle.dumps([os.system, os.getcwd, collections.OrderedDict, Harmless(1)], protocol=protocol)
    scan = _scan(io.BytesIO(data))
    module = os.system.__module__
    expected = (f"{module}.system", f"{module}.getcwd", "collections.OrderedDict", f"{__name__}.Harmless")
    assert expected == tuple(name for name in scan.globals if not name.startswith(("copyreg.", "builtins.")))
    assert protocol == scan.protocol
    assert scan.value is None


def test_scan_of_a_huge_pickle_stops_at_its_limit() -> None:
    data = pickle.dumps([os.system, *range(1000), os.getcwd], protocol=2)
    scan = _scan(io.BytesIO(data), limit=50)
    assert (f"{os.system.__module__}.system",) == scan.globals
    assert _scan(io.BytesIO(pickle.dumps(7, protocol=2))).value == 7
    assert _scan(io.BytesIO(pickle.dumps(7, protocol=2)), limit=1).value is None
