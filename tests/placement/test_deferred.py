"""ferry.deferred_init and ferry.materialize: built on meta, made real once, equal to a normal build."""

from __future__ import annotations

import gc
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import ferry
from _deferred_models import NoReset, Rope, TinyLM, assert_equal, tensors_of
from ferry.errors import ArgumentError, DeviceError, FerryError, InitializationError

#: constructor arguments of every torch.nn module type that needs some (the ones without are built bare)
ARGS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "AdaptiveLogSoftmaxWithLoss": ((16, 20, [5, 10]), {}),
    "BatchNorm1d": ((4,), {}),
    "BatchNorm2d": ((4,), {}),
    "BatchNorm3d": ((4,), {}),
    "Bilinear": ((3, 4, 5), {}),
    "Conv1d": ((2, 4, 3), {}),
    "Conv2d": ((2, 4, 3), {}),
    "Conv3d": ((2, 4, 3), {}),
    "ConvTranspose1d": ((2, 4, 3), {}),
    "ConvTranspose2d": ((2, 4, 3), {}),
    "ConvTranspose3d": ((2, 4, 3), {}),
    "Embedding": ((10, 4), {"padding_idx": 1}),
    "EmbeddingBag": ((10, 4), {}),
    "GRU": ((4, 6), {"num_layers": 2, "bidirectional": True}),
    "GRUCell": ((4, 6), {}),
    "GroupNorm": ((2, 4), {}),
    "InstanceNorm1d": ((4,), {"affine": True, "track_running_stats": True}),
    "InstanceNorm2d": ((4,), {"affine": True, "track_running_stats": True}),
    "InstanceNorm3d": ((4,), {"affine": True, "track_running_stats": True}),
    "LSTM": ((4, 6), {"proj_size": 3}),
    "LSTMCell": ((4, 6), {}),
    "LayerNorm": ((4,), {}),
    "Linear": ((4, 3), {}),
    "LinearCrossEntropyLoss": ((4, 7), {"bias": True}),
    "MultiheadAttention": ((8, 2), {"kdim": 5, "vdim": 6}),
    "PReLU": ((3,), {}),
    "RMSNorm": ((4,), {}),
    "RNN": ((4, 6), {}),
    "RNNCell": ((4, 6), {}),
    "SyncBatchNorm": ((4,), {}),
    "Transformer": ((), {"d_model": 8, "nhead": 2, "num_encoder_layers": 1, "num_decoder_layers": 1}),
    "TransformerDecoderLayer": ((8, 2), {"dim_feedforward": 16}),
    "TransformerEncoderLayer": ((8, 2), {"dim_feedforward": 16}),
    "CrossEntropyLoss": ((), {"weight": None}),
}

#: torch.nn types with parameters or buffers that are not modules one builds on meta
NOT_BUILT = {
    # lazy modules have no shapes until their first forward: nothing to allocate before it
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LazyLinear",
    # containers of other modules, abstract bases and wrappers: covered through what they hold
    "RNNBase",
    "RNNCellBase",
    "DataParallel",
    "TransformerDecoder",
    "TransformerEncoder",
}


def _module_types() -> list[str]:
    names = []
    for name in sorted(dir(nn)):
        value = getattr(nn, name)
        if isinstance(value, type) and issubclass(value, nn.Module) and value is not nn.Module:
            names.append(name)
    return names


def _build(name: str) -> nn.Module | None:
    args, kwargs = ARGS.get(name, ((), {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return getattr(nn, name)(*args, **kwargs)  # type: ignore[no-any-return]
        except TypeError:
            return None


def _deferred(build: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    with ferry.deferred_init():
        module = build()
    return module


def _normal(build: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return build()


#: torch.nn types whose constructor needs arguments that only shape their computation (no parameters, buffers)
NO_TENSORS = {
    "ChannelShuffle",
    "CrossMapLRN2d",
    "Fold",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
    "LocalResponseNorm",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "PixelShuffle",
    "PixelUnshuffle",
    "Threshold",
    "Unflatten",
    "Unfold",
}


def _shape_only(name: str) -> bool:
    return name in NO_TENSORS or name.endswith(("Pool1d", "Pool2d", "Pool3d", "Pad1d", "Pad2d", "Pad3d"))


def test_every_torch_nn_module_type_is_built_by_the_table_or_holds_notensors_of() -> None:
    unbuilt = [name for name in _module_types() if name not in NOT_BUILT and _build(name) is None]
    assert [name for name in unbuilt if not _shape_only(name)] == []


def _holdstensors_of(name: str) -> bool:
    module = _build(name)
    return module is not None and bool(tensors_of(module))


WITH_TENSORS = [name for name in _module_types() if name not in NOT_BUILT and _holdstensors_of(name)]


def test_the_module_types_with_tensors_are_the_ones_expected() -> None:
    assert {"Linear", "Embedding", "MultiheadAttention", "LSTM", "Transformer", "BatchNorm2d", "RMSNorm"} <= set(
        WITH_TENSORS
    )
    assert len(WITH_TENSORS) >= 30


@pytest.mark.parametrize("name", WITH_TENSORS)
def test_each_torch_nn_module_type_materialises_equal_to_a_normal_build(name: str) -> None:
    built = _normal(lambda: _build(name))  # type: ignore[arg-type,return-value]
    made = _deferred(lambda: _build(name))  # type: ignore[arg-type,return-value]
    assert all(t.is_meta for t in tensors_of(made).values())
    assert ferry.materialize(made, "cpu") is made
    assert_equal(built, made)


def test_a_model_with_rope_custom_init_and_ties_equals_a_normal_build_bit_for_bit() -> None:
    built = _normal(TinyLM)
    made = _deferred(TinyLM)
    assert made.rope.inv_freq.is_meta
    assert made.extra.scale.is_meta
    ferry.materialize(made, "cpu")
    assert_equal(built, made)
    assert torch.equal(made.extra.scale, built.extra.scale)
    assert made.head.weight is made.embed.weight
    ids = torch.randint(0, 20, (2, 5))
    built.eval(), made.eval()
    assert torch.equal(built(ids), made(ids))


def test_the_random_number_stream_after_materialize_is_where_a_normal_build_leaves_it() -> None:
    _normal(TinyLM)
    after_build = torch.get_rng_state()
    made = _deferred(TinyLM)
    ferry.materialize(made, "cpu")
    assert torch.equal(torch.get_rng_state(), after_build)


def test_two_models_of_one_block_materialised_in_build_order_equal_their_normal_builds() -> None:
    torch.manual_seed(3)
    first, second = nn.Linear(4, 4), TinyLM()
    torch.manual_seed(3)
    with ferry.deferred_init():
        made_first, made_second = nn.Linear(4, 4), TinyLM()
    ferry.materialize(made_first, "cpu")
    ferry.materialize(made_second, "cpu")
    assert_equal(first, made_first)
    assert_equal(second, made_second)


def test_a_dtype_change_in_the_block_is_replayed_and_one_after_it_is_kept_for_parameters() -> None:
    built = _normal(lambda: TinyLM().to(torch.bfloat16))
    torch.manual_seed(0)
    with ferry.deferred_init():
        made = TinyLM().to(torch.bfloat16)
    ferry.materialize(made, "cpu")
    assert_equal(built, made)
    linear = _normal(lambda: nn.Linear(4, 4)).half()
    later = _deferred(lambda: nn.Linear(4, 4)).half()  # Module._apply keeps each Parameter object: still recorded
    assert_equal(linear, ferry.materialize(later, "cpu"))


def test_conversions_and_initialisers_applied_after_the_block_are_recorded_too() -> None:
    built = _normal(lambda: Rope(8)).to(torch.float64)
    made = _deferred(lambda: Rope(8)).to(torch.float64)  # Module._apply: new buffers, made after the block
    assert_equal(built, ferry.materialize(made, "cpu"))

    def init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.constant_(module.weight, 0.5)
        if isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(2.0)

    built = _normal(lambda: nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8)))
    built.apply(init)
    made = _deferred(lambda: nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8)))
    made.apply(init)  # the usual `model.apply(init_fn)` after building
    ferry.materialize(made, "cpu")
    assert_equal(built, made)
    assert torch.equal(made[0].weight, torch.full((8, 8), 0.5))


def test_a_weight_replaced_after_the_block_is_made_by_reset_parameters() -> None:
    made = _deferred(TinyLM)
    with torch.device("meta"):
        made.extra2 = nn.Linear(8, 8)  # built on meta outside the block: nothing recorded
    ferry.materialize(made, "cpu")
    assert not made.extra2.weight.is_meta
    assert made.extra2.weight.abs().max() <= 1 / math.sqrt(8)  # kaiming_uniform_'s bound: reset_parameters ran


def test_a_plain_meta_model_is_reset_and_the_tensors_nothing_writes_are_named() -> None:
    with torch.device("meta"):
        model = TinyLM()
    with pytest.raises(InitializationError) as caught:
        ferry.materialize(model, "cpu")
    error = caught.value
    assert isinstance(error, FerryError)
    assert error.names == [
        "rope.inv_freq",
        "rope.cos_cached",
        "rope.sin_cached",
        "extra.weight",
        "extra.gate",
        "extra.scale",
    ]
    assert error.kinds == ["non-persistent buffer"] * 3 + ["parameter", "parameter", "tensor attribute"]
    assert "ferry.deferred_init()" in str(error)
    assert "init=" in str(error)
    assert not model.embed.weight.is_meta  # the module got memory; reset_parameters filled what it could


def test_init_fills_what_reset_parameters_does_not() -> None:
    with torch.device("meta"):
        model = TinyLM()

    def init(module: nn.Module) -> None:
        rope = Rope(8)  # built for real under materialize's torch.device("cpu")
        module.rope.inv_freq.copy_(rope.inv_freq)
        module.rope.cos_cached.copy_(rope.cos_cached)
        module.rope.sin_cached.copy_(rope.sin_cached)
        with torch.no_grad():
            nn.init.normal_(module.extra.weight)
            module.extra.gate.zero_()
        module.extra.scale = torch.ones(4)

    ferry.materialize(model, "cpu", init=init)
    assert torch.equal(model.rope.inv_freq, Rope(8).inv_freq)
    assert model.extra.scale.device.type == "cpu"


def test_a_partial_write_of_a_tensor_by_init_counts_as_written() -> None:
    with torch.device("meta"):
        model = NoReset()

    def init(module: nn.Module) -> None:
        with torch.no_grad():
            module.weight.data.normal_()
            module.gate[:] = 1.0
        module.scale = torch.zeros(4)

    ferry.materialize(model, "cpu", init=init)
    assert torch.equal(model.gate, torch.ones(6))


def test_a_tensor_made_by_torch_empty_in_the_block_and_never_written_is_not_taken_as_initialised() -> None:
    class Lazy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.empty(3, 3))  # the author forgot to initialise it

    with ferry.deferred_init():
        model = Lazy()
    with pytest.raises(InitializationError, match="weight"):
        ferry.materialize(model, "cpu")


def test_real_tensors_are_moved_and_meta_as_a_target_or_a_non_module_is_refused() -> None:
    model = nn.Linear(2, 2)
    assert ferry.materialize(model, "cpu").weight.device.type == "cpu"
    with pytest.raises(ArgumentError, match="materialize\\(model, 'cuda'\\)"):
        ferry.materialize(model, "meta")
    with pytest.raises(ArgumentError, match=r"needs an nn\.Module"):
        ferry.materialize(torch.zeros(2), "cpu")  # type: ignore[arg-type]
    with pytest.raises(DeviceError):
        ferry.materialize(model, "cuda:7" if not torch.cuda.is_available() else "cuda:99")


def test_the_block_leaves_torch_as_it_found_it() -> None:
    gc.collect()  # recordings of earlier tests, freed: nothing recorded is alive
    init_normal = nn.init.normal_
    parameter_new = nn.Parameter.__new__
    apply = nn.Module.apply
    with pytest.raises(RuntimeError, match="boom"), ferry.deferred_init():
        raise RuntimeError("boom")
    gc.collect()
    assert nn.Module.apply is apply
    assert nn.init.normal_ is init_normal
    assert nn.Parameter.__new__ is parameter_new
    assert torch.empty(1).device.type == "cpu"
    assert torch.get_default_device().type == "cpu"


def test_an_empty_tensor_made_in_the_block_probes_the_default_device() -> None:
    with ferry.deferred_init():
        probe = torch.tensor([])
        weight = torch.zeros(3)
    assert probe.device.type == "cpu"
    assert weight.is_meta


def test_a_transformers_model_from_a_config_equals_a_normal_build() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
        max_position_embeddings=32,
        tie_word_embeddings=True,
    )
    built = _normal(lambda: transformers.LlamaForCausalLM(config))
    made = _deferred(lambda: transformers.LlamaForCausalLM(config))
    rotary = made.model.rotary_emb
    assert rotary.inv_freq.is_meta
    ferry.materialize(made, "cpu")
    assert_equal(built, made)
    assert torch.equal(made.model.rotary_emb.inv_freq, built.model.rotary_emb.inv_freq)
    assert made.lm_head.weight is made.model.embed_tokens.weight
    ids = torch.randint(0, 64, (1, 6))
    built.eval(), made.eval()
    assert torch.equal(built(ids).logits, made(ids).logits)


def test_on_pretend_gpus_a_model_is_materialised_and_loaded_onto_cuda(tmp_path: Path) -> None:
    reference = _normal(TinyLM)
    ferry.save(reference.state_dict(), tmp_path / "model.safetensors")
    with ferry.sanitize(pretend="cuda") as report:
        made = _deferred(TinyLM)
        ferry.materialize(made, "cuda")
        assert made.embed.weight.device == torch.device("cuda", 0)
        assert made.rope.inv_freq.device == torch.device("cuda", 0)
        loaded = _deferred(TinyLM, seed=3)
        ferry.load_state_dict(loaded, tmp_path / "model.safetensors", device="cuda")
        assert loaded.head.weight is loaded.embed.weight
        assert loaded.block.linear1.weight.device == torch.device("cuda", 0)
        loaded.eval()
        out = loaded(torch.randint(0, 20, (2, 5), device="cuda"))
        assert out.device == torch.device("cuda", 0)
    assert [f.kind for f in report.findings] == []


def test_parameters_keep_their_python_objects_so_an_optimizer_built_before_still_trains_them() -> None:
    model = _deferred(TinyLM)
    weight = model.embed.weight
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ferry.materialize(model, "cpu")
    assert model.embed.weight is weight
    assert model.head.weight is weight
    before = weight.detach().clone()
    model(torch.randint(0, 20, (2, 5))).sum().backward()
    optimizer.step()
    assert not torch.equal(weight, before)


def test_materialising_a_submodule_first_keeps_its_tie_with_the_rest() -> None:
    built = _normal(TinyLM)
    made = _deferred(TinyLM)
    ferry.materialize(made.head, "cpu")  # holds the weight tied to the embedding
    ferry.materialize(made, "cpu")
    assert made.head.weight is made.embed.weight
    assert len(list(made.parameters())) == len(list(built.parameters()))


def test_nested_blocks_each_record_their_own_model() -> None:
    torch.manual_seed(0)
    first, second = nn.Linear(3, 3), nn.Linear(3, 3)
    torch.manual_seed(0)
    with ferry.deferred_init():
        made_first = nn.Linear(3, 3)
        with ferry.deferred_init():
            made_second = nn.Linear(3, 3)
    assert_equal(first, ferry.materialize(made_first, "cpu"))
    assert_equal(second, ferry.materialize(made_second, "cpu"))


def test_a_lazy_module_in_the_block_is_left_to_its_first_forward() -> None:
    with ferry.deferred_init():
        model = nn.Sequential(nn.Linear(4, 4), nn.LazyLinear(2))
    ferry.materialize(model, "cpu")
    assert model(torch.ones(1, 4)).shape == (1, 2)


def test_a_partly_written_tensor_is_not_taken_as_initialised() -> None:
    class Half(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.empty(4))

        def reset_parameters(self) -> None:
            with torch.no_grad():
                self.w[:2].zero_()  # forgets w[2:]

    with torch.device("meta"):
        model = Half()
    with pytest.raises(InitializationError, match=r"w \(parameter\)"):
        ferry.materialize(model, "cpu")


def test_random_draws_between_the_block_and_materialize_do_not_change_the_model() -> None:
    built = _normal(TinyLM)
    made = _deferred(TinyLM)
    data = torch.randn(100)  # e.g. a dataset made before the model is materialised
    stream = torch.get_rng_state()
    ferry.materialize(made, "cpu")
    assert_equal(built, made)
    assert torch.equal(torch.get_rng_state(), stream)  # the caller's stream is given back untouched
    assert data.shape == (100,)


def test_two_models_of_one_block_materialised_in_any_order_equal_their_normal_builds() -> None:
    torch.manual_seed(3)
    first, second = nn.Linear(4, 4), TinyLM()
    torch.manual_seed(3)
    with ferry.deferred_init():
        made_first, made_second = nn.Linear(4, 4), TinyLM()
    ferry.materialize(made_second, "cpu")
    ferry.materialize(made_first, "cpu")
    assert_equal(first, made_first)
    assert_equal(second, made_second)


def test_a_manual_seed_inside_the_constructor_is_replayed_in_its_place() -> None:
    class Seeded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.x = nn.Parameter(torch.randn(3))
            torch.manual_seed(42)
            self.y = nn.Parameter(torch.randn(3))

    built = _normal(Seeded)
    after_build = torch.get_rng_state()
    made = _deferred(Seeded)
    ferry.materialize(made, "cpu")
    assert_equal(built, made)
    assert torch.equal(torch.get_rng_state(), after_build)
    assert torch.manual_seed is not None


def test_an_in_place_change_after_the_block_that_ferry_cannot_record_is_warned_about() -> None:
    made = _deferred(lambda: nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)))
    with torch.no_grad():
        made[0].weight.mul_(2)  # not through apply or nn.init: not recorded
    with pytest.warns(ferry.PlacementWarning, match=r"0\.weight"):
        ferry.materialize(made, "cpu")
