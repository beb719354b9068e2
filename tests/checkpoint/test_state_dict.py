import dataclasses
import itertools
import re
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from torch import nn

import ferry
import ferry.checkpoint.file.api
from ferry import CheckpointError, LoadReport, StateDictMismatchError, load_state_dict
from ferry.checkpoint.state_dict import ShapeMismatch


class Net(nn.Module):
    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 5)
        self.bn = nn.BatchNorm1d(5)
        self.head = nn.Linear(5, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.bn(self.fc(x)))


class Wrap(nn.Module):
    """Holds ``inner`` under ``attr``, as DataParallel (``module``) or torch.compile (``_orig_mod``) do."""

    def __init__(self, inner: nn.Module, attr: str) -> None:
        super().__init__()
        self.add_module(attr, inner)


def wrapped(inner: nn.Module, chain: tuple[str, ...]) -> nn.Module:
    """``inner`` inside wrappers, outermost first: ``("module", "_orig_mod")`` gives keys ``module._orig_mod.*``."""
    for attr in reversed(chain):
        inner = Wrap(inner, attr)
    return inner


def trained(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    net = Net()
    net.train()
    net(torch.randn(8, 3))  # moves the BatchNorm running stats off their defaults
    return net


def plain_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """The module's state under canonical names (wrapper segments dropped), cloned."""
    out = {}
    for key, value in module.state_dict().items():
        parts = key.split(".")
        while parts[0] in {"module", "_orig_mod"}:
            parts = parts[1:]
        out[".".join(p for p in parts if p not in {"_fsdp_wrapped_module", "_checkpoint_wrapped_module"})] = (
            value.clone()
        )
    return out


def assert_same_state(expected: dict[str, torch.Tensor], module: nn.Module) -> None:
    actual = plain_state(module)
    assert sorted(expected) == sorted(actual)
    for key in expected:
        assert torch.equal(expected[key], actual[key]), key


# --- exact match ---------------------------------------------------------------------------------------------------


def test_exact_match_loads_every_key_in_place():
    source, target = trained(0), Net()
    params_before = [id(p) for p in target.parameters()]
    report = load_state_dict(target, source.state_dict())
    assert report.ok
    assert list(target.state_dict()) == report.loaded
    assert ([], [], [], {}, {}, ()) == (
        report.missing,
        report.unexpected,
        report.mismatched,
        report.suggestions,
        report.renamed,
        report.notes,
    )
    assert_same_state(plain_state(source), target)
    assert params_before == [id(p) for p in target.parameters()]  # an optimizer holding them still works


# --- wrapper prefixes ----------------------------------------------------------------------------------------------

CHAINS = [(), ("module",), ("_orig_mod",), ("module", "_orig_mod"), ("_orig_mod", "module")]


@pytest.mark.parametrize(("saved_from", "loaded_into"), list(itertools.product(CHAINS, CHAINS)))
def test_wrapper_prefixes_are_added_or_stripped_in_any_nesting(saved_from, loaded_into):
    source = wrapped(trained(1), saved_from)
    target = wrapped(Net(), loaded_into)
    report = load_state_dict(target, source.state_dict())
    assert report.ok
    assert_same_state(plain_state(source), target)
    assert len(report.loaded) == len(source.state_dict())
    assert (len(report.renamed) == len(report.loaded)) == (saved_from != loaded_into)


NOTES = [
    (("module",), (), "stripped 'module.' from 9 keys"),
    ((), ("module",), "added 'module.' to 9 keys"),
    (("_orig_mod", "module"), (), "stripped '_orig_mod.module.' from 9 keys"),
    (
        ("module", "_orig_mod"),
        ("_orig_mod", "module"),
        "replaced 'module._orig_mod.' with '_orig_mod.module.' in 9 keys",
    ),
]


@pytest.mark.parametrize(("saved_from", "loaded_into", "note"), NOTES)
def test_report_notes_the_prefix_change(saved_from, loaded_into, note):
    report = load_state_dict(wrapped(Net(), loaded_into), wrapped(trained(), saved_from).state_dict())
    assert (note,) == report.notes
    source_key, module_key = (".".join([*chain, "fc.weight"]) for chain in (saved_from, loaded_into))
    assert module_key == report.renamed[source_key]


def test_plain_checkpoint_into_data_parallel():
    model = Net()
    parallel = nn.DataParallel(model)  # works on a CPU-only machine: no device_ids, forward runs the module
    source = trained(2)
    report = load_state_dict(parallel, source.state_dict())
    assert report.ok
    assert report.renamed["fc.weight"] == "module.fc.weight"
    assert_same_state(plain_state(source), model)


def test_real_torch_compile_both_ways():
    compiled = torch.compile(Net(), backend="eager")  # wrapping is lazy: nothing is compiled until it is called
    source = trained(3)
    assert load_state_dict(compiled, source.state_dict()).ok
    assert_same_state(plain_state(source), compiled)

    plain = Net()
    report = load_state_dict(plain, compiled.state_dict())
    assert ("stripped '_orig_mod.' from 9 keys",) == report.notes
    assert_same_state(plain_state(source), plain)


@pytest.mark.parametrize("attr", ["_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"])
def test_wrapper_segments_in_the_middle_of_keys(attr):
    source = trained(4)
    inner_wrapped = trained(4)
    inner_wrapped.fc = Wrap(inner_wrapped.fc, attr)  # keys "fc.<attr>.weight"
    assert f"fc.{attr}.weight" in inner_wrapped.state_dict()

    plain = Net()
    assert load_state_dict(plain, inner_wrapped.state_dict()).ok
    assert_same_state(plain_state(source), plain)

    target = Net()
    target.fc = Wrap(nn.Linear(3, 5), attr)
    report = load_state_dict(target, source.state_dict())
    assert report.ok
    assert (f"added '{attr}.' to 2 keys",) == report.notes
    assert torch.equal(source.fc.weight, target.state_dict()[f"fc.{attr}.weight"])


class Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.module = nn.Linear(2, 2)  # a real child that happens to be called "module"


def test_a_real_child_called_module_in_the_middle_is_kept():
    saved = nn.DataParallel(Wrap(Holder(), "block"))
    assert ["module.block.module.weight", "module.block.module.bias"] == list(saved.state_dict())
    target = Wrap(Holder(), "block")
    report = load_state_dict(target, saved.state_dict())
    assert report.ok
    assert {"module.block.module.weight": "block.module.weight", "module.block.module.bias": "block.module.bias"} == (
        report.renamed
    )


def test_ambiguous_canonical_keys_are_reported_not_guessed():
    source = dict(Net().state_dict())
    source.update({f"module.{key}": value for key, value in source.items()})  # both "fc.weight" and "module.fc.weight"
    target = wrapped(Net(), ("_orig_mod",))
    with pytest.raises(StateDictMismatchError) as caught:
        load_state_dict(target, source)
    report = caught.value.report
    assert "_orig_mod.fc.weight" in report.missing
    assert {"fc.weight", "module.fc.weight"} <= set(report.unexpected)


# --- mismatches: all at once, strict and not ------------------------------------------------------------------------


def broken_source() -> dict[str, torch.Tensor]:
    """A state_dict with a typo (fc.weigth), a leftover key and a head for 10 classes instead of 4."""
    source = dict(trained(5).state_dict())
    source["fc.weigth"] = source.pop("fc.weight")
    source["head.weight"] = torch.randn(10, 5)
    source["head.bias"] = torch.randn(10)
    source["aux.scale"] = torch.ones(1)
    return source


def test_strict_reports_every_mismatch_at_once_and_loads_nothing():
    target = Net()
    before = plain_state(target)
    with pytest.raises(StateDictMismatchError) as caught:
        load_state_dict(target, broken_source())
    report = caught.value.report
    assert isinstance(report, LoadReport)
    assert not report.ok
    assert ["fc.weight"] == report.missing
    assert ["fc.weigth", "aux.scale"] == report.unexpected
    assert [
        ShapeMismatch("head.weight", (4, 5), (10, 5)),
        ShapeMismatch("head.bias", (4,), (10,)),
    ] == report.mismatched
    assert "fc.weight" == report.suggestions["fc.weigth"]
    assert "fc.weigth" == report.suggestions["fc.weight"]
    message = str(caught.value)
    for text in ["fc.weight", "fc.weigth", "aux.scale", "head.weight: (4, 5) vs (10, 5)", "head.bias: (4,) vs (10,)"]:
        assert text in message
    assert "strict=False" in message
    assert "nothing was loaded" in message
    assert_same_state(before, target)


def test_strict_false_loads_what_fits_and_skips_the_rest():
    target = Net()
    before = plain_state(target)
    source = broken_source()
    report = load_state_dict(target, source, strict=False)
    assert not report.ok
    assert ["fc.weight"] == report.missing
    assert ["head.weight", "head.bias"] == [m.key for m in report.mismatched]
    assert "fc.bias" in report.loaded
    assert "head.weight" not in report.loaded
    after = plain_state(target)
    assert torch.equal(source["fc.bias"], after["fc.bias"])
    assert torch.equal(source["bn.running_mean"], after["bn.running_mean"])
    for untouched in ["fc.weight", "head.weight", "head.bias"]:
        assert torch.equal(before[untouched], after[untouched])


def test_error_message_lists_every_key_even_past_the_str_limit():
    target = nn.Sequential(*[nn.Linear(1, 1) for _ in range(15)])
    source = {f"layer{i}.{leaf}": torch.zeros(1) for i in range(15) for leaf in ("w", "b")}
    with pytest.raises(StateDictMismatchError) as caught:
        load_state_dict(target, source)
    message = str(caught.value)
    assert all(key in message for key in target.state_dict())
    assert all(key in message for key in source)
    assert "... and 20 more" in str(caught.value.report)  # 30 missing, 10 shown


def test_non_tensor_values_are_unexpected_and_named_as_such():
    source = dict(Net().state_dict())
    source["note"] = "trained on cifar"
    with pytest.raises(StateDictMismatchError) as caught:
        load_state_dict(Net(), source)
    assert ["note"] == caught.value.report.unexpected
    assert "note  [holds a str, not a tensor]" in str(caught.value)


# --- devices --------------------------------------------------------------------------------------------------------


def test_values_land_on_the_module_device_and_keep_its_dtype():
    target = Net().double()
    report = load_state_dict(target, trained(6).state_dict())  # float32 source
    assert report.ok
    for name, value in target.state_dict().items():
        assert torch.device("cpu") == value.device, name
    assert torch.float64 == target.fc.weight.dtype


def test_meta_module_is_materialised_from_the_checkpoint():
    with torch.device("meta"):
        target = Net().double()
    source = trained(7).state_dict()
    report = load_state_dict(target, source)
    assert report.ok
    for name, value in target.state_dict().items():
        assert torch.device("cpu") == value.device, name
    assert torch.float64 == target.fc.weight.dtype
    assert isinstance(target.fc.weight, nn.Parameter)
    assert target.fc.weight.requires_grad
    assert torch.equal(source["fc.weight"].double(), target.fc.weight.detach())
    assert torch.equal(source["bn.num_batches_tracked"], target.bn.num_batches_tracked)
    same = target.bn.running_mean.untyped_storage().data_ptr() == source["bn.running_mean"].untyped_storage().data_ptr()
    assert not same  # copied: the module does not share memory with the caller's tensors


def test_partly_meta_module_loads_both_parts_without_warnings():
    target = Net()
    target.bn.to("meta")
    source = dict(trained(8).state_dict())  # a plain dict: no _metadata, so BatchNorm's fill-in hook is live
    report = load_state_dict(target, source)
    assert report.ok
    assert_same_state(source, target)
    assert all(torch.device("cpu") == value.device for value in target.state_dict().values())


def test_meta_values_cannot_load_into_real_tensors():
    with torch.device("meta"):
        empty = Net()
    with pytest.raises(CheckpointError, match="meta device") as caught:
        load_state_dict(Net(), empty.state_dict())
    assert "fc.weight" in str(caught.value)


def test_meta_values_into_a_meta_module_load_as_shapes():
    with torch.device("meta"):
        source, target = Net(), Net()
    assert load_state_dict(target, source.state_dict()).ok
    assert target.fc.weight.is_meta


# --- BatchNorm, metadata and hooks ----------------------------------------------------------------------------------


def test_batchnorm_buffers_load():
    source = trained(9)
    source.bn.num_batches_tracked.fill_(42)
    target = Net()
    assert load_state_dict(target, source.state_dict()).ok
    assert 42 == target.bn.num_batches_tracked.item()
    assert torch.equal(source.bn.running_var, target.bn.running_var)


def test_num_batches_tracked_absent_from_an_unversioned_checkpoint_is_filled_by_batchnorm():
    source = {key: value for key, value in trained().state_dict().items() if key != "bn.num_batches_tracked"}
    target = Net()
    report = load_state_dict(target, source)  # strict: like Module.load_state_dict, this is not an error
    assert report.ok
    assert "bn.num_batches_tracked" not in report.loaded
    assert any("bn.num_batches_tracked" in note for note in report.notes)


def test_metadata_is_renamed_with_the_keys():
    # A DataParallel state_dict carries _metadata for "module.bn" (version 2): renamed to "bn", BatchNorm sees a
    # current checkpoint and a missing num_batches_tracked is reported, as Module.load_state_dict would.
    source = nn.DataParallel(trained()).state_dict()
    del source["module.bn.num_batches_tracked"]
    assert 2 == source._metadata["module.bn"]["version"]
    with pytest.raises(StateDictMismatchError) as caught:
        load_state_dict(Net(), source)
    assert ["bn.num_batches_tracked"] == caught.value.report.missing


class Scaled(nn.Module):
    """Keeps extra state and counts calls to its own loading hook."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.scale = 1.0
        self.hook_calls = 0

    def get_extra_state(self) -> dict[str, float]:
        return {"scale": self.scale}

    def set_extra_state(self, state: dict[str, float]) -> None:
        self.scale = state["scale"]

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.hook_calls += 1
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def test_module_hooks_and_extra_state_run_under_renamed_keys():
    source = Scaled()
    source.scale = 3.5
    saved = nn.DataParallel(source).state_dict()
    assert "module._extra_state" in saved
    target = Scaled()
    report = load_state_dict(target, saved)
    assert report.ok
    assert 3.5 == target.scale
    assert 1 == target.hook_calls
    assert "_extra_state" in report.loaded


# --- the source: wrapper dicts, wrong types, paths ------------------------------------------------------------------


def test_whole_checkpoint_dict_is_refused_with_the_entry_to_pass():
    net = trained()
    checkpoint = {"model": net.state_dict(), "optimizer": {"state": {}, "param_groups": []}, "epoch": 3}
    with pytest.raises(CheckpointError) as caught:
        load_state_dict(Net(), checkpoint)
    message = str(caught.value)
    assert "'model', 'optimizer', 'epoch'" in message
    assert 'load_state_dict(model, checkpoint["model"])' in message


@pytest.mark.parametrize(
    ("source", "words"),
    [([torch.zeros(1)], "is a list"), (Net(), "other.state_dict()"), ({0: torch.zeros(1)}, "not strings")],
)
def test_source_that_is_not_a_state_dict(source, words):
    with pytest.raises(CheckpointError, match=re.escape(words)):
        load_state_dict(Net(), source)


def test_module_must_be_a_module():
    with pytest.raises(TypeError, match="load_state_dict\\(model, state_dict_or_path\\)"):
        load_state_dict(Net().state_dict(), Net())  # type: ignore[arg-type]


def test_path_source_is_read_on_the_cpu_through_ferry_load(monkeypatch, tmp_path):
    calls = []
    saved = nn.DataParallel(trained()).state_dict()

    def fake_load(path, *, device="cpu", trusted=False):
        calls.append((path, device, trusted))
        return saved

    monkeypatch.setattr(ferry.checkpoint.file.api, "load", fake_load)
    target = Net()
    report = load_state_dict(target, tmp_path / "net.pt")
    assert [(str(tmp_path / "net.pt"), "cpu", False)] == calls
    assert report.ok
    assert_same_state(plain_state(saved_module_of(saved)), target)


def saved_module_of(state: dict[str, torch.Tensor]) -> nn.Module:
    net = Net()
    net.load_state_dict({key.removeprefix("module."): value for key, value in state.items()})
    return net


def test_path_holding_a_whole_checkpoint_names_the_entry(monkeypatch, tmp_path):
    monkeypatch.setattr(ferry.checkpoint.file.api, "load", lambda path, **_: {"state_dict": Net().state_dict()})
    with pytest.raises(CheckpointError) as caught:
        load_state_dict(Net(), tmp_path / "ckpt.pt")
    assert 'ferry.load(path)["state_dict"]' in str(caught.value)
    assert tmp_path / "ckpt.pt" == caught.value.path


def load_or_skip(target: nn.Module, path: Path) -> LoadReport:
    try:
        return load_state_dict(target, path)
    except NotImplementedError:
        pytest.skip("ferry.checkpoint.file.api.load is still a placeholder")


def test_torch_save_file_with_module_prefix(tmp_path):
    source = trained(10)
    torch.save(nn.DataParallel(source).state_dict(), tmp_path / "net.pth")
    target = Net()
    report = load_or_skip(target, tmp_path / "net.pth")
    assert report.ok
    assert_same_state(plain_state(source), target)


def test_safetensors_file(tmp_path):
    from safetensors.torch import save_file

    source = trained(11)
    save_file({f"_orig_mod.{k}": v for k, v in source.state_dict().items()}, str(tmp_path / "net.safetensors"))
    target = Net()
    report = load_or_skip(target, tmp_path / "net.safetensors")
    assert report.ok
    assert ("stripped '_orig_mod.' from 9 keys",) == report.notes
    assert_same_state(plain_state(source), target)


def test_ferry_file_holding_a_wrapped_state_dict(tmp_path):
    source = trained(12)
    try:
        ferry.save(nn.DataParallel(source).state_dict(), tmp_path / "net.ferry")
    except NotImplementedError:
        pytest.skip("ferry.save is still a placeholder")
    target = Net()
    report = load_or_skip(target, tmp_path / "net.ferry")
    assert report.ok
    assert_same_state(plain_state(source), target)


# --- real-world cases (../shared/cases/lint) ------------------------------------------------------------------------


def make_vgg() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3))


def test_case_037_yolo_v1_predict_unexpected_module_keys(tmp_path):
    # train.py saves the DataParallel wrapper's state_dict; predict.py loads it into the bare network.
    net = nn.DataParallel(make_vgg())
    torch.save(net.state_dict(), tmp_path / "yolo.pth")
    state = torch.load(tmp_path / "yolo.pth", map_location="cpu", weights_only=True)
    model = make_vgg()
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\) in state_dict: \"module.0.weight\""):
        model.load_state_dict(state)  # the bug as reported
    report = load_state_dict(model, state)
    assert report.ok
    assert ("stripped 'module.' from 4 keys",) == report.notes
    assert torch.equal(net.module[0].weight, model[0].weight)


class ImplicitNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 1)


def test_case_038_implicit_shape_eval_module_prefix():
    parallel = nn.DataParallel(ImplicitNet())
    saved = {"net_state": parallel.state_dict()}
    net = ImplicitNet()
    with pytest.raises(RuntimeError, match=re.escape("module.fc.weight")):
        net.load_state_dict(saved["net_state"], strict=True)  # the bug as reported
    with pytest.raises(CheckpointError, match=r'load_state_dict\(model, checkpoint\["net_state"\]\)'):
        load_state_dict(net, saved)  # the whole dict: ferry names the entry instead of guessing
    report = load_state_dict(net, saved["net_state"])
    assert report.ok
    assert {"module.fc.weight": "fc.weight", "module.fc.bias": "fc.bias"} == report.renamed
    assert torch.equal(parallel.module.fc.weight, net.fc.weight)


# --- LoadReport -----------------------------------------------------------------------------------------------------


def test_load_report_is_frozen_and_prints_a_summary():
    report = load_state_dict(Net(), broken_source(), strict=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.missing = []  # type: ignore[misc]
    text = str(report)
    assert text.startswith("loaded 6 of 9 keys; 1 missing, 2 unexpected, 2 shape mismatches")
    assert "fc.weight  (closest: fc.weigth)" in text
    assert "head.weight: (4, 5) vs (10, 5)" in text


def test_ok_report_prints_one_line():
    report = load_state_dict(Net(), OrderedDict(Net().state_dict()))
    assert "loaded 9 of 9 keys; 0 missing, 0 unexpected, 0 shape mismatches" == str(report)


def test_a_checkpointer_step_folder_or_its_state_file_loads_its_one_module(tmp_path):
    source = torch.nn.Linear(3, 2)
    with ferry.Checkpointer(tmp_path / "run") as ckpt:
        folder = ckpt.save(5, {"model": source, "optimizer": torch.optim.Adam(source.parameters()), "epoch": 2})
    for path in (folder, folder / "state.safetensors"):
        target = torch.nn.Linear(3, 2)
        assert ferry.load_state_dict(target, path).ok
        assert torch.equal(source.weight, target.weight)
    assert ferry.load_state_dict(torch.nn.Linear(3, 2), ferry.load(folder / "state.safetensors")).ok


def test_a_checkpoint_of_several_modules_names_the_entry_to_pick(tmp_path):
    with ferry.Checkpointer(tmp_path / "run") as ckpt:
        folder = ckpt.save(5, {"encoder": torch.nn.Linear(3, 2), "decoder": torch.nn.Linear(2, 3)})
    with pytest.raises(
        ferry.CheckpointError, match=r"modules: .*encoder.*Pick one: load_state_dict\(model, ferry\.load"
    ):
        ferry.load_state_dict(torch.nn.Linear(3, 2), folder)
