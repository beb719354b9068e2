from __future__ import annotations

import dataclasses
import doctest
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import ferry.devices
from ferry import DeviceError, DeviceRecord, describe_devices, pick_device
from ferry.devices import _Accelerators, _cpu_record, _pick_device, _probe, _resolve_device, resolve_device

NONE = _Accelerators(None, 0)
TWO_GPUS = _Accelerators("cuda", 2)
TWO_GPUS_CURRENT_1 = _Accelerators("cuda", 2, current=1)
ONE_GPU = _Accelerators("cuda", 1)
MPS = _Accelerators("mps", 1)
TWO_XPUS = _Accelerators("xpu", 2)
CPU = torch.device("cpu")
CUDA0 = torch.device("cuda", 0)
CUDA1 = torch.device("cuda", 1)

# (spec, machine, expected canonical device)
RESOLVE = [
    ("cpu", NONE, CPU),
    ("cpu:0", NONE, CPU),
    ("meta", NONE, torch.device("meta")),
    ("meta", TWO_GPUS, torch.device("meta")),
    (torch.device("cpu"), TWO_GPUS, CPU),
    ("cuda", TWO_GPUS, CUDA0),
    ("cuda:0", TWO_GPUS, CUDA0),
    ("cuda:1", TWO_GPUS, CUDA1),
    (torch.device("cuda"), TWO_GPUS, CUDA0),
    (torch.device("cuda", 1), TWO_GPUS, CUDA1),
    (1, TWO_GPUS, CUDA1),
    (0, MPS, torch.device("mps", 0)),
    ("cuda", TWO_GPUS_CURRENT_1, CUDA1),  # bare "cuda" is the current device, as in PyTorch
    ("cuda:0", TWO_GPUS_CURRENT_1, CUDA0),
    ("mps", MPS, torch.device("mps", 0)),
    ("xpu:1", TWO_XPUS, torch.device("xpu", 1)),
]

# (spec, machine, a fragment the message must contain)
RESOLVE_ERRORS = [
    ("cuda:3", TWO_GPUS, "this machine has cuda:0, cuda:1, cpu."),
    ("cuda", NONE, 'device "cuda" is not available: this machine has cpu.'),
    ("cuda:0", MPS, "this machine has mps:0, cpu."),
    ("cdua", TWO_GPUS, 'did you mean "cuda"?'),
    ("CUDA", TWO_GPUS, 'did you mean "cuda"?'),
    ("mps", TWO_GPUS, 'device "mps" is not available'),
    ("xpu", NONE, 'device "xpu" is not available'),
    ("xpu:2", TWO_XPUS, "this machine has xpu:0, xpu:1, cpu."),
    ("gpu", TWO_GPUS, '"cuda" (NVIDIA and AMD ROCm)'),
    ("hip", TWO_GPUS, 'addresses AMD ROCm GPUs as "cuda"'),
    ("cuda:-1", TWO_GPUS, 'malformed index; write "cuda:0"'),
    ("cuda:01", TWO_GPUS, "malformed index"),
    ("auto", TWO_GPUS, "ferry.pick_device() takes it"),
    ("", NONE, "not a device spec"),
    (2, TWO_GPUS, "an int names an accelerator by index"),
    (0, NONE, "this machine has cpu."),
    (-1, TWO_GPUS, "an int names an accelerator by index"),
    (True, TWO_GPUS, "not bool"),
    (1.5, TWO_GPUS, "not float"),
    (None, TWO_GPUS, "not NoneType"),
]

# (spec, environment variables, machine, expected device)
PICK = [
    (None, {}, NONE, CPU),
    ("auto", {}, NONE, CPU),
    (None, {}, TWO_GPUS, CUDA0),
    ("auto", {}, TWO_GPUS, CUDA0),
    (None, {}, TWO_GPUS_CURRENT_1, CUDA1),
    (None, {}, MPS, torch.device("mps", 0)),
    (None, {}, TWO_XPUS, torch.device("xpu", 0)),
    # explicit spec beats FERRY_DEVICE beats LOCAL_RANK beats the accelerator
    ("cuda:1", {"FERRY_DEVICE": "cpu", "LOCAL_RANK": "0"}, TWO_GPUS, CUDA1),
    ("meta", {"FERRY_DEVICE": "cuda:9"}, NONE, torch.device("meta")),
    (None, {"FERRY_DEVICE": "cpu"}, TWO_GPUS, CPU),
    (None, {"FERRY_DEVICE": "cuda"}, TWO_GPUS, CUDA0),
    (None, {"FERRY_DEVICE": "cuda:1", "LOCAL_RANK": "0"}, TWO_GPUS, CUDA1),
    ("auto", {"FERRY_DEVICE": "cpu"}, TWO_GPUS, CPU),
    (None, {"FERRY_DEVICE": "auto", "LOCAL_RANK": "1"}, TWO_GPUS, CUDA1),
    (None, {"FERRY_DEVICE": "", "LOCAL_RANK": ""}, TWO_GPUS, CUDA0),
    # torchrun
    (None, {"LOCAL_RANK": "0"}, TWO_GPUS, CUDA0),
    (None, {"LOCAL_RANK": "1"}, TWO_GPUS, CUDA1),
    (None, {"LOCAL_RANK": "1"}, TWO_GPUS_CURRENT_1, CUDA1),
    (None, {"LOCAL_RANK": "0"}, TWO_GPUS_CURRENT_1, CUDA0),
    (None, {"LOCAL_RANK": "3"}, NONE, CPU),  # no accelerator: every rank on the CPU (gloo)
    (None, {"LOCAL_RANK": "0"}, MPS, torch.device("mps", 0)),
    (None, {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, TWO_XPUS, torch.device("xpu", 1)),
]

# (spec, environment variables, machine, fragments the message must contain, expected `requested`)
PICK_ERRORS = [
    ("cuda:3", {}, TWO_GPUS, ['device "cuda:3" is not available'], "cuda:3"),
    ("cuda", {"FERRY_DEVICE": "cpu"}, NONE, ['device "cuda" is not available'], "cuda"),
    (
        None,
        {"FERRY_DEVICE": "cuda:3"},
        TWO_GPUS,
        ['FERRY_DEVICE="cuda:3"', "cuda:0, cuda:1, cpu", "unset FERRY_DEVICE"],
        "cuda:3",
    ),
    ("auto", {"FERRY_DEVICE": "cdua"}, TWO_GPUS, ['FERRY_DEVICE="cdua"', "unset FERRY_DEVICE"], "cdua"),
    (None, {"FERRY_DEVICE": "cuda", "LOCAL_RANK": "0"}, NONE, ['FERRY_DEVICE="cuda"', "this machine has cpu"], "cuda"),
    (None, {"LOCAL_RANK": "2"}, TWO_GPUS, ["LOCAL_RANK=2", "--nproc-per-node=2", "FERRY_DEVICE=cuda:0"], "cuda:2"),
    (None, {"LOCAL_RANK": "1"}, ONE_GPU, ["processes would share a device"], "cuda:1"),
    (None, {"LOCAL_RANK": "1"}, MPS, ["--nproc-per-node=1"], "mps:1"),
    (None, {"LOCAL_RANK": "-1"}, TWO_GPUS, ['LOCAL_RANK="-1" is not a rank'], "-1"),
    (None, {"LOCAL_RANK": "one"}, NONE, ['LOCAL_RANK="one" is not a rank'], "one"),
]

CPUINFO_X86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\n"
CPUINFO_ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n"
MEMINFO = "MemTotal:       16333452 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n"

# (device record, expected torch.device)
RECORD_DEVICES = [
    (DeviceRecord("cpu", None, "x", None, None), CPU),
    (DeviceRecord("cuda", 1, "x", 1, 1), CUDA1),
    (DeviceRecord("mps", 0, "x", None, None), torch.device("mps", 0)),
]


def machine(accelerators: _Accelerators) -> ferry.devices._Probe:
    return lambda: accelerators


def run_python(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter, outside torchrun and without FERRY_DEVICE."""
    env = {key: value for key, value in os.environ.items() if key not in ("FERRY_DEVICE", "LOCAL_RANK")}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False)


def no_probe() -> _Accelerators:
    raise AssertionError("the machine was probed for a device that needs no probing")


@pytest.mark.parametrize(("spec", "accelerators", "expected"), RESOLVE)
def test_resolve_device(spec: object, accelerators: _Accelerators, expected: torch.device) -> None:
    actual = _resolve_device(spec, probe=machine(accelerators))  # type: ignore[arg-type]
    assert expected == actual
    assert (expected.index, str(expected)) == (actual.index, str(actual))


@pytest.mark.parametrize(("spec", "accelerators", "fragment"), RESOLVE_ERRORS)
def test_resolve_device_errors(spec: object, accelerators: _Accelerators, fragment: str) -> None:
    with pytest.raises(DeviceError) as caught:
        _resolve_device(spec, probe=machine(accelerators))  # type: ignore[arg-type]
    assert fragment in str(caught.value)
    assert "Use one of those, or ferry.pick_device() to choose automatically." in str(caught.value)
    assert spec == caught.value.requested
    assert accelerators.available() == caught.value.available


def test_resolve_device_message_in_full() -> None:
    with pytest.raises(DeviceError) as caught:
        _resolve_device("cuda:3", probe=machine(TWO_GPUS))
    expected = (
        'device "cuda:3" is not available: this machine has cuda:0, cuda:1, cpu. '
        "Use one of those, or ferry.pick_device() to choose automatically."
    )
    assert expected == str(caught.value)
    expected_available = ["cuda:0", "cuda:1", "cpu"]
    assert expected_available == caught.value.available


@pytest.mark.parametrize("spec", ["cpu", "meta", torch.device("meta"), "cpu:0"])
def test_resolve_cpu_and_meta_need_no_probe(spec: object) -> None:
    assert torch.device(str(spec).split(":")[0]) == _resolve_device(spec, probe=no_probe)  # type: ignore[arg-type]


@pytest.mark.parametrize(("spec", "environ", "accelerators", "expected"), PICK)
def test_pick_device(
    spec: object, environ: dict[str, str], accelerators: _Accelerators, expected: torch.device
) -> None:
    actual = _pick_device(spec, environ=environ, probe=machine(accelerators))  # type: ignore[arg-type]
    assert expected == actual
    assert str(expected) == str(actual)


@pytest.mark.parametrize(("spec", "environ", "accelerators", "fragments", "requested"), PICK_ERRORS)
def test_pick_device_errors(
    spec: object, environ: dict[str, str], accelerators: _Accelerators, fragments: list[str], requested: str
) -> None:
    with pytest.raises(DeviceError) as caught:
        _pick_device(spec, environ=environ, probe=machine(accelerators))  # type: ignore[arg-type]
    for fragment in fragments:
        assert fragment in str(caught.value)
    assert requested == caught.value.requested
    assert accelerators.available() == caught.value.available


def test_pick_device_ferry_device_message_in_full() -> None:
    with pytest.raises(DeviceError) as caught:
        _pick_device(None, environ={"FERRY_DEVICE": "cuda:3"}, probe=machine(TWO_GPUS))
    expected = (
        'FERRY_DEVICE="cuda:3" names a device this machine cannot serve: this machine has cuda:0, cuda:1, cpu. '
        "Set FERRY_DEVICE to one of those, or unset it (unset FERRY_DEVICE) to let ferry.pick_device() choose "
        "automatically."
    )
    assert expected == str(caught.value)


def test_pick_device_explicit_cpu_needs_no_probe() -> None:
    expected = CPU
    assert expected == _pick_device("cpu", environ={"LOCAL_RANK": "5"}, probe=no_probe)


# --- the real machine -----------------------------------------------------------------------------------------


def test_probe_agrees_with_torch() -> None:
    accelerators = _probe()
    assert (accelerators.type is None) == (accelerators.count == 0)
    if torch.cuda.device_count() > 0:
        assert ("cuda", torch.cuda.device_count()) == (accelerators.type, accelerators.count)


def test_pick_device_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERRY_DEVICE", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    accelerators = _probe()
    expected = torch.device(accelerators.type, accelerators.current) if accelerators.type else CPU
    assert expected == pick_device()
    assert expected == pick_device("auto")
    meta, cpu = torch.device("meta"), torch.device("cpu")
    assert meta == pick_device("meta")
    assert meta == resolve_device("meta")
    assert cpu == resolve_device("cpu")


def test_pick_device_reads_ferry_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_DEVICE", "meta")
    assert torch.device("meta") == pick_device()
    monkeypatch.setenv("FERRY_DEVICE", "cdua")
    with pytest.raises(DeviceError, match='FERRY_DEVICE="cdua"'):
        pick_device()


@pytest.mark.skipif(torch.cuda.device_count() > 0, reason="this machine has a CUDA GPU")
def test_cuda_on_a_machine_without_cuda_raises() -> None:
    with pytest.raises(DeviceError, match='device "cuda" is not available'):
        pick_device("cuda")
    with pytest.raises(DeviceError, match='device "cuda:0" is not available'):
        resolve_device("cuda:0")


@pytest.mark.skipif(sys.platform == "darwin", reason="MPS may exist on macOS")
def test_mps_off_macos_raises() -> None:
    with pytest.raises(DeviceError, match='device "mps" is not available'):
        resolve_device("mps")


def test_typo_raises_on_this_machine() -> None:
    with pytest.raises(DeviceError, match='did you mean "cuda"'):
        resolve_device("cdua")


def test_import_and_pick_device_do_not_initialise_cuda() -> None:
    # A fresh interpreter: this test process may have initialised CUDA in another test.
    script = textwrap.dedent(
        """
        import torch, ferry
        from ferry.devices import resolve_device
        ferry.pick_device(); ferry.pick_device("auto"); resolve_device("meta")
        try:
            resolve_device("cuda")
        except ferry.DeviceError:
            pass
        print(torch.cuda.is_initialized())
        """
    )
    result = run_python(script)
    expected = (0, "False")
    assert expected == (result.returncode, result.stdout.strip()), result.stderr


# --- describing devices ---------------------------------------------------------------------------------------


def test_cpu_record_from_procfs(tmp_path: Path) -> None:
    (tmp_path / "cpuinfo").write_text(CPUINFO_X86)
    (tmp_path / "meminfo").write_text(MEMINFO)
    expected = DeviceRecord("cpu", None, "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 16333452 * 1024, 8000000 * 1024)
    assert expected == _cpu_record(cpuinfo=tmp_path / "cpuinfo", meminfo=tmp_path / "meminfo")


def test_cpu_record_falls_back_without_model_name_or_procfs(tmp_path: Path) -> None:
    (tmp_path / "cpuinfo").write_text(CPUINFO_ARM)
    record = _cpu_record(cpuinfo=tmp_path / "cpuinfo", meminfo=tmp_path / "missing")
    assert (platform.processor() or platform.machine() or "unknown CPU") == record.name
    if sys.platform == "linux":  # os.sysconf knows physical and available pages
        assert record.total_memory is not None
        assert record.free_memory is not None
        assert 0 < record.free_memory <= record.total_memory


@pytest.mark.parametrize(("record", "expected"), RECORD_DEVICES)
def test_device_record_device(record: DeviceRecord, expected: torch.device) -> None:
    assert expected == record.device
    assert str(expected) == str(record.device)


def test_device_record_is_frozen() -> None:
    record = DeviceRecord("cpu", None, "x", None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "y"  # type: ignore[misc]


@pytest.mark.skipif(_probe().count > 0, reason="describing accelerators initialises them; see the gpu test")
def test_describe_devices_on_this_machine() -> None:
    records = describe_devices()
    expected = [torch.device("cpu")]
    assert expected == [record.device for record in records]
    cpu = records[-1]
    assert cpu.name
    if sys.platform == "linux":
        assert cpu.total_memory is not None
        assert cpu.free_memory is not None
        assert 0 < cpu.free_memory <= cpu.total_memory


def test_doctests() -> None:
    result = doctest.testmod(ferry.devices, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


# --- a real GPU -----------------------------------------------------------------------------------------------

FORK_AFTER_PICK = """
import multiprocessing
import torch
import ferry

device = ferry.pick_device()
assert device == torch.device("cuda", 0), device
assert not torch.cuda.is_initialized()

def child(queue):
    queue.put(float(torch.ones(3, device=device).sum()))

context = multiprocessing.get_context("fork")
queue = context.Queue()
process = context.Process(target=child, args=(queue,))
process.start()
process.join(60)
assert process.exitcode == 0, process.exitcode
print(queue.get(timeout=10))
"""

DESCRIBE_GPUS = """
import torch, ferry
records = ferry.describe_devices()
assert [r.device for r in records] == [torch.device("cuda", i) for i in range(torch.cuda.device_count())] + [
    torch.device("cpu")
], records
for r in records[:-1]:
    assert r.name and 0 < r.free_memory <= r.total_memory, r
print(len(records))
"""


@pytest.mark.gpu
def test_forked_child_can_use_cuda_after_pick_device() -> None:
    result = run_python(FORK_AFTER_PICK)
    expected = (0, "3.0")
    assert expected == (result.returncode, result.stdout.strip()), result.stderr


@pytest.mark.gpu
def test_describe_devices_lists_every_gpu() -> None:
    result = run_python(DESCRIBE_GPUS)
    assert (0, str(torch.cuda.device_count() + 1)) == (result.returncode, result.stdout.strip()), result.stderr
