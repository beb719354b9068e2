"""Real-world device bugs from ``../shared/cases/lint`` that ferry's placement and file API fix at run time.

Each test reproduces the situation of one case (named in the test) with ``meta`` standing in for the GPU, and
shows the ferry call that makes it correct. The lint-side expectations of these cases belong to ``ferry lint``.
"""

import collections

import pytest
import torch
from torch import nn

import ferry

CASES_USED = [
    "013_flower_quickstart_labels_not_moved.py",
    "014_cmt_load_checkpoint_no_map_location.py",
    "016_e2vid_cpu_only_checkpoint.py",
    "017_textclf_whole_model_pickle.py",
    "019_notebook_saved_model_loaded_in_script.py",
    "026_optimizer_state_loaded_before_model_moved.py",
    "040_cross_entropy_weight_on_cpu.py",
    "043_tianshou_float64_batch_to_mps.py",
    "050_neg_hf_batchencoding_to_is_in_place.py",
]


@pytest.mark.parametrize("name", CASES_USED)
def test_case_files_exist(shared_cases, name):
    assert (shared_cases / "lint" / name).is_file()


def test_013_labels_never_moved_is_reported_by_check_devices():
    net = nn.Linear(10, 3).to("meta")
    feats, labels = torch.randn(4, 10), torch.tensor([0, 1, 2, 1])
    report = ferry.check_devices(net, feats.to("meta"), labels)
    assert not report.ok
    assert [name for name, _ in report.mismatches] == ["args[1]"]
    with pytest.raises(ferry.DeviceMismatchError, match=r"args\[1\]"):
        report.raise_if_bad()
    feats, labels = ferry.to_device((feats, labels), "meta")
    assert ferry.check_devices(net, feats, labels).ok


def _save_as_if_on_cuda(obj, path, monkeypatch):
    """torch.save ``obj`` with every storage tagged ``cuda:0``, as a GPU machine would write it."""
    monkeypatch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
    torch.save(obj, path)
    monkeypatch.undo()


@pytest.mark.parametrize("case", ["014", "016"])
def test_014_016_gpu_checkpoint_loads_on_a_cpu_only_machine(tmp_path, monkeypatch, case):
    net = nn.Linear(3, 2)
    path = tmp_path / f"{case}.pth"
    _save_as_if_on_cuda({"state_dict": net.state_dict(), "epoch": 7}, path, monkeypatch)
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(path, weights_only=True)  # what the case hits
    blob = ferry.load(path)
    assert blob["epoch"] == 7
    assert blob["state_dict"]["weight"].device == torch.device("cpu")
    fresh = nn.Linear(3, 2)
    ferry.load_state_dict(fresh, blob["state_dict"])
    assert torch.equal(fresh.weight, net.weight)


class TextCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(50, 4)


@pytest.mark.parametrize("case", ["017", "019"])
def test_017_019_whole_module_pickle_is_refused_unless_trusted(tmp_path, case):
    model = TextCNN()
    path = tmp_path / f"{case}.pt"
    torch.save({"epoch": 1, "model": model}, path)
    with pytest.raises(ferry.UnsafeCheckpointError, match="trusted=True") as info:
        ferry.load(path)
    assert not isinstance(info.value, ferry.CorruptCheckpointError)
    loaded = ferry.load(path, trusted=True)
    assert isinstance(loaded["model"], TextCNN)
    # the fix the case calls for: save the state_dict, which needs no pickle at all
    ferry.save(model.state_dict(), tmp_path / "model.safetensors")
    fresh = TextCNN()
    assert ferry.load_state_dict(fresh, tmp_path / "model.safetensors").ok


def test_026_optimizer_state_loaded_before_move_follows_place():
    net = nn.Linear(8, 2)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(4, 8)).sum().backward()
    opt.step()
    saved = {"net": net.state_dict(), "opt": opt.state_dict()}

    net2 = nn.Linear(8, 2)
    opt2 = torch.optim.Adam(net2.parameters(), lr=1e-3)
    net2.load_state_dict(saved["net"])
    opt2.load_state_dict(saved["opt"])  # state is cast to the params' current device: cpu
    ferry.place(net2, "meta", optimizer=opt2)  # the case's net.to(cuda), done right
    params = list(net2.parameters())
    assert [p for group in opt2.param_groups for p in group["params"]] == params
    for param in params:
        assert opt2.state[param]["exp_avg"].device.type == "meta"
        assert opt2.state[param]["exp_avg_sq"].device.type == "meta"


def test_040_loss_weight_left_on_cpu_is_reported_and_fixed_by_place():
    loss_fn = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.5, 0.7]))
    logits = torch.randn(6, 3, device="meta")
    labels = torch.randint(0, 3, (6,), device="meta")
    report = ferry.check_devices(loss_fn, input=logits, target=labels)
    assert not report.ok
    ferry.place(loss_fn, "meta")
    assert ferry.module_device(loss_fn) == torch.device("meta")
    assert ferry.check_devices(loss_fn, input=logits, target=labels).ok


def test_043_float64_cast_before_it_reaches_the_device():
    obs = torch.rand(8, 4, dtype=torch.float64)
    moved = ferry.to_device({"obs": obs, "step": torch.tensor(3)}, "meta", dtype=torch.float32)
    assert moved["obs"].dtype == torch.float32
    assert moved["step"].dtype == torch.int64  # integers keep their dtype, as Module.to does
    if not torch.backends.mps.is_available():
        with pytest.raises(ferry.DeviceError, match="mps"):
            ferry.to_device(obs, "mps")


class InPlaceBatch(collections.UserDict):
    """Like transformers' BatchEncoding: ``.to`` moves the tensors in place and returns the same instance."""

    def to(self, device):
        self.data = {k: v.to(device) for k, v in self.data.items()}
        return self


def test_050_batch_object_with_in_place_to_is_moved():
    enc = InPlaceBatch(input_ids=torch.tensor([[101, 7592, 102]]), attention_mask=torch.ones(1, 3))
    moved = ferry.to_device({"enc": enc}, "meta")
    assert moved["enc"]["input_ids"].device.type == "meta"
    assert moved["enc"]["input_ids"].dtype == torch.int64
