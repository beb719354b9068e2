"""ferry.load_state_dict(model, path, device=...): a model built on meta read straight from the file onto a device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

import ferry
from _deferred_models import Rope, TinyLM, assert_equal
from ferry.checkpoint.file import reader
from ferry.errors import CorruptCheckpointError, InitializationError, StateDictMismatchError


def _reference(seed: int = 0) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM()


def _deferred(seed: int = 7) -> TinyLM:
    torch.manual_seed(seed)  # another seed: every loaded value must come from the file
    with ferry.deferred_init():
        return TinyLM()


def _no_meta(module: nn.Module) -> bool:
    tensors = [*module.parameters(), *module.buffers()]
    return not any(t.is_meta for t in tensors)


@pytest.mark.parametrize("kind", ["ferry", "safetensors", "torch.save"])
def test_a_deferred_model_loads_from_each_file_kind_with_ties_and_rope_buffers(tmp_path: Path, kind: str) -> None:
    reference = _reference()
    state = reference.state_dict()
    file = tmp_path / "model.bin"
    if kind == "ferry":
        ferry.save(state, file)
    elif kind == "safetensors":
        save_file({k: v.contiguous() for k, v in state.items() if k != "head.weight"}, str(file))  # ties: once
    else:
        torch.save(state, file)
    model = _deferred()
    report = ferry.load_state_dict(model, file, device="cpu", strict=kind != "safetensors")
    assert report.missing == ([] if kind != "safetensors" else ["head.weight"])
    assert _no_meta(model)
    assert_equal(reference, model)
    assert model.head.weight is model.embed.weight
    assert torch.equal(model.rope.inv_freq, reference.rope.inv_freq)  # not in the file: replayed
    assert model.extra.scale.device.type == "cpu"


def test_a_model_in_another_dtype_is_cast_through_the_staging_buffer_in_small_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "STAGING", 40)  # many pieces per tensor, checksums streamed across them
    reference = _reference()
    ferry.save(reference.state_dict(), tmp_path / "model.safetensors")
    torch.manual_seed(0)
    with ferry.deferred_init():
        model = TinyLM().to(torch.bfloat16)
    ferry.load_state_dict(model, tmp_path / "model.safetensors", device="cpu")
    assert model.embed.weight.dtype == torch.bfloat16
    assert torch.equal(model.embed.weight, reference.embed.weight.to(torch.bfloat16))
    assert torch.equal(model.block.linear1.weight, reference.block.linear1.weight.to(torch.bfloat16))


def test_a_damaged_tensor_is_detected_on_the_way_in(tmp_path: Path) -> None:
    file = tmp_path / "model.safetensors"
    ferry.save(_reference().state_dict(), file)
    data = bytearray(file.read_bytes())
    data[-5] ^= 0x40  # inside the last tensor's bytes
    file.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="fails its checksum"):
        ferry.load_state_dict(_deferred(), file, device="cpu")


def test_a_mismatch_loads_nothing_and_leaves_the_model_on_meta(tmp_path: Path) -> None:
    file = tmp_path / "model.safetensors"
    state = _reference().state_dict()
    del state["block.linear2.bias"]
    ferry.save(state, file)
    model = _deferred()
    with pytest.raises(StateDictMismatchError, match=r"block\.linear2\.bias"):
        ferry.load_state_dict(model, file, device="cpu")
    assert model.embed.weight.is_meta


def test_missing_keys_with_strict_false_are_made_as_materialize_makes_them(tmp_path: Path) -> None:
    file = tmp_path / "model.safetensors"
    state = _reference().state_dict()
    del state["block.linear2.bias"]
    ferry.save(state, file)
    model = _deferred()
    report = ferry.load_state_dict(model, file, device="cpu", strict=False)
    assert report.missing == ["block.linear2.bias"]
    assert not model.block.linear2.bias.is_meta


def test_a_plain_meta_model_is_told_which_tensors_the_file_does_not_hold(tmp_path: Path) -> None:
    file = tmp_path / "model.safetensors"
    ferry.save(_reference().state_dict(), file)
    with torch.device("meta"):
        model = TinyLM()
    with pytest.raises(InitializationError) as caught:
        ferry.load_state_dict(model, file, device="cpu")
    assert caught.value.names == ["rope.inv_freq", "rope.cos_cached", "rope.sin_cached", "extra.scale"]
    assert "the checkpoint" in str(caught.value)


def test_a_real_model_on_the_device_is_read_into_in_place(tmp_path: Path) -> None:
    reference = _reference()
    file = tmp_path / "model.safetensors"
    ferry.save(reference.state_dict(), file)
    model = _reference(seed=9)
    weight = model.embed.weight
    ferry.load_state_dict(model, file, device="cpu")
    assert model.embed.weight is weight
    assert_equal(reference, model)


def test_a_checkpointer_step_folder_gives_its_model(tmp_path: Path) -> None:
    reference = _reference()
    with ferry.Checkpointer(tmp_path / "run") as ckpt:
        folder = ckpt.save(5, {"model": reference, "epoch": 1})
    model = _deferred()
    ferry.load_state_dict(model, folder, device="cpu")
    assert_equal(reference, model)


def test_a_rope_module_alone_needs_nothing_from_the_file(tmp_path: Path) -> None:
    file = tmp_path / "empty.safetensors"
    ferry.save({}, file)
    with ferry.deferred_init():
        rope = Rope(8)
    ferry.load_state_dict(rope, file, device="cpu")
    assert torch.equal(rope.inv_freq, Rope(8).inv_freq)


@pytest.mark.gpu
def test_a_deferred_model_loads_straight_onto_the_gpu(tmp_path: Path) -> None:
    reference = _reference()
    file = tmp_path / "model.safetensors"
    ferry.save(reference.state_dict(), file)
    model = _deferred()
    ferry.load_state_dict(model, file, device="cuda")
    assert model.embed.weight.device.type == "cuda"
    assert model.rope.inv_freq.device.type == "cuda"
    assert torch.equal(model.embed.weight.cpu(), reference.embed.weight)
    assert model.head.weight is model.embed.weight


def test_checkpointer_restore_into_a_deferred_model_makes_it_then_loads_it(tmp_path: Path) -> None:
    fresh = _deferred(seed=0)
    with ferry.Checkpointer(tmp_path / "run") as ckpt:
        assert ckpt.restore({"model": fresh}) is None  # nothing saved: the whole model is made as a normal build
        assert_equal(_reference(seed=0), fresh)
        ckpt.save(4, {"model": fresh})
    model = _deferred(seed=11)
    with ferry.Checkpointer(tmp_path / "run", read_only=True) as ckpt:
        assert ckpt.restore({"model": model}) == 4
    assert_equal(fresh, model)
    assert model.head.weight is model.embed.weight
    assert torch.equal(model.rope.inv_freq, fresh.rope.inv_freq)


def test_a_plain_meta_model_keeps_the_loaded_weights_of_a_module_reset_for_a_missing_key(tmp_path: Path) -> None:
    torch.manual_seed(0)
    source = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    state = dict(source.state_dict())
    del state["1.bias"]
    ferry.save(state, tmp_path / "part.safetensors")
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    report = ferry.load_state_dict(model, tmp_path / "part.safetensors", device="cpu", strict=False)
    assert report.missing == ["1.bias"]
    assert torch.equal(model[1].weight, source[1].weight)  # reset_parameters() ran for the bias only
    assert not model[1].bias.is_meta


def test_meta_values_and_a_meta_device_are_refused_clearly() -> None:
    with ferry.deferred_init():
        donor = nn.Linear(4, 4)
    with ferry.deferred_init():
        model = nn.Linear(4, 4)
    with pytest.raises(ferry.CheckpointError, match="meta device"):
        ferry.load_state_dict(model, donor.state_dict(), device="cpu")
    with pytest.raises(ferry.ArgumentError, match="device='meta'"):
        ferry.load_state_dict(model, nn.Linear(4, 4).state_dict(), device="meta")


def test_an_optimizer_built_before_restore_trains_the_restored_parameters(tmp_path: Path) -> None:
    reference = _reference()
    saved_optimizer = torch.optim.Adam(reference.parameters(), lr=0.1)
    reference(torch.randint(0, 20, (2, 5))).sum().backward()
    saved_optimizer.step()
    with ferry.Checkpointer(tmp_path / "run") as ckpt:
        ckpt.save(1, {"model": reference, "optimizer": saved_optimizer})
    model = _deferred()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)  # built before the restore, on meta parameters
    with ferry.Checkpointer(tmp_path / "run", read_only=True) as ckpt:
        assert ckpt.restore({"model": model, "optimizer": optimizer}) == 1
    assert_equal(reference, model)
    assert all(not s.is_meta for state in optimizer.state.values() for s in state.values() if torch.is_tensor(s))
    before = model.embed.weight.detach().clone()
    model(torch.randint(0, 20, (2, 5))).sum().backward()
    optimizer.step()
    assert not torch.equal(model.embed.weight, before)
