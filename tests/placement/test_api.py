"""Tests for ferry.placement: CPU only, with ``meta`` as the second device, plus a few ``gpu`` tests."""

from __future__ import annotations

import dataclasses
import gc
import warnings
from collections import OrderedDict, defaultdict, namedtuple
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from ferry.errors import ArgumentError, DeviceError, DeviceMismatchError, FerryError, MixedDeviceError, PlacementWarning
from ferry.placement import DeviceReport, check_devices, module_device, offload, place, to_device

META = torch.device("meta")
CPU = torch.device("cpu")

Pair = namedtuple("Pair", "first second")


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    label: str = "a"


@dataclasses.dataclass(frozen=True)
class FrozenBatch:
    x: torch.Tensor
    ids: torch.Tensor
    derived: torch.Tensor = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "derived", self.x * 2)


class InPlace:
    """Like PyG ``Data``: ``.to`` moves its tensors in place and returns None."""

    def __init__(self, x: torch.Tensor) -> None:
        self.x = x

    def to(self, device: torch.device) -> None:
        self.x = self.x.to(device)


class ReturnsNew:
    """Its ``.to`` returns a new object and takes no ``non_blocking``."""

    def __init__(self, x: torch.Tensor) -> None:
        self.x = x

    def to(self, device: torch.device) -> ReturnsNew:
        return ReturnsNew(self.x.to(device))


class FrozenMap(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class NoArgsMap(FrozenMap):
    def __init__(self) -> None:
        super().__init__({"x": torch.ones(1)})


class TaggedList(list[Any]):
    tag = "class"


class TaggedSet(set[Any]):
    tag = "class"


class SizedSet(frozenset[Any]):
    """A frozenset subclass whose constructor takes something else: ferry cannot rebuild it."""

    def __new__(cls, size: int) -> SizedSet:
        return super().__new__(cls, (torch.ones(1) for _ in range(size)))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.cache = torch.zeros(2)  # a plain attribute: Module.to leaves it behind


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(3, 1)
        self.scale = torch.ones(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.encoder.proj(x))
        return out


class BufferOnly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.arange(4))


def leaves(obj: Any) -> Iterator[Any]:
    """Every non-container leaf, depth first, iteratively (deep structures must not recurse)."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
        else:
            yield item


# --- to_device: containers ------------------------------------------------------------------------------------------

CONTAINERS = [
    pytest.param(lambda t: t, id="tensor"),
    pytest.param(lambda t: {"a": t, "b": 1}, id="dict"),
    pytest.param(lambda t: OrderedDict(a=t, b=1), id="ordereddict"),
    pytest.param(lambda t: [t, 1], id="list"),
    pytest.param(lambda t: (t, 1), id="tuple"),
    pytest.param(lambda t: Pair(t, 1), id="namedtuple"),
    pytest.param(lambda t: Batch(t), id="dataclass"),
    pytest.param(lambda t: FrozenBatch(t, t.long()), id="frozen-dataclass"),
    pytest.param(lambda t: FrozenMap({"a": t}), id="mapping"),
    pytest.param(lambda t: TaggedList([t]), id="list-subclass"),
    pytest.param(lambda t: {t, t.clone(), "a"}, id="set"),
    pytest.param(lambda t: frozenset([t, (t.clone(), 1)]), id="frozenset"),
    pytest.param(lambda t: TaggedSet([t]), id="set-subclass"),
    pytest.param(lambda t: {"deep": [(Pair(t, [{"x": t}]),)]}, id="nested"),
]


@pytest.mark.parametrize("make", CONTAINERS)
def test_to_device_moves_every_tensor_and_keeps_the_container_types(make: Any) -> None:
    batch = make(torch.ones(2))
    out = to_device(batch, "meta")
    assert type(batch) is type(out)
    moved = [leaf for leaf in leaves(out) if isinstance(leaf, torch.Tensor)]
    assert moved
    assert all(t.device == META for t in moved)
    assert all(t.device == CPU for t in leaves(batch) if isinstance(t, torch.Tensor))  # input not mutated


def test_namedtuple_is_rebuilt_with_its_fields() -> None:
    out = to_device(Pair(torch.ones(1), "x"), "meta")
    assert isinstance(out, Pair)
    assert (META, "x") == (out.first.device, out.second)


def test_defaultdict_keeps_its_default_factory() -> None:
    batch: defaultdict[str, list[torch.Tensor]] = defaultdict(list, {"a": [torch.ones(1)]})
    out = to_device(batch, "meta")
    assert isinstance(out, defaultdict)
    assert list is out.default_factory
    assert META == out["a"][0].device
    assert [] == out["missing"]
    assert "missing" not in batch


def test_frozen_dataclass_keeps_init_false_fields_without_rerunning_post_init() -> None:
    batch = FrozenBatch(torch.ones(2), torch.arange(2))
    out = to_device(batch, "meta")
    assert isinstance(out, FrozenBatch)
    assert (META, META, META) == (out.x.device, out.ids.device, out.derived.device)
    assert CPU == batch.x.device


def test_unchanged_immutable_containers_come_back_as_is() -> None:
    shape = torch.Size([2, 3])
    frozen = FrozenBatch(torch.ones(1, device="meta"), torch.ones(1, device="meta"))
    assert to_device(shape, "meta") is shape
    assert to_device(frozen, "meta") is frozen
    assert to_device((1, "a"), "meta") == (1, "a")


def test_mutable_containers_are_always_new() -> None:
    batch = {"a": [torch.ones(1)]}
    out = to_device(batch, "cpu")
    assert out is not batch
    assert out["a"] is not batch["a"]
    assert out["a"][0] is batch["a"][0]  # Tensor.to returns a tensor already in place as-is


def test_list_subclass_keeps_its_class_and_attributes() -> None:
    batch = TaggedList([torch.ones(1)])
    batch.extra = "kept"  # type: ignore[attr-defined]
    out = to_device(batch, "meta")
    assert (TaggedList, "kept") == (type(out), out.extra)


@pytest.mark.parametrize(("obj", "plain"), [(NoArgsMap(), "a dict"), (SizedSet(2), "a set")])
def test_container_that_cannot_be_rebuilt_says_how_to_fix_it(obj: Any, plain: str) -> None:
    with pytest.raises(ArgumentError, match=rf"cannot rebuild a {type(obj).__name__}.*\.to\(device\) method") as caught:
        to_device(obj, "meta")
    assert f"or pass {plain} instead" in str(caught.value)
    assert isinstance(caught.value, TypeError)  # what it raised before ArgumentError


def test_set_is_rebuilt_with_the_moved_tensors() -> None:
    a, b = torch.ones(1), torch.zeros(1)
    batch = {"s": {a, b, "tag"}}
    out = to_device(batch, "meta")
    assert set is type(out["s"])
    assert 3 == len(out["s"])
    assert {"tag"} == {x for x in out["s"] if not isinstance(x, torch.Tensor)}
    assert [META, META] == [x.device for x in out["s"] if isinstance(x, torch.Tensor)]
    assert {a, b, "tag"} == batch["s"]  # the input set is untouched


def test_set_subclass_keeps_its_class_and_shared_tensors_stay_shared() -> None:
    t = torch.ones(1)
    out = to_device([TaggedSet([t]), t], "meta")
    assert TaggedSet is type(out[0])
    assert {id(out[1])} == {id(x) for x in out[0]}


def test_unchanged_frozenset_comes_back_as_is_and_a_set_is_always_new() -> None:
    frozen = frozenset([torch.ones(1, device="meta"), "a"])
    plain = {torch.ones(1, device="meta")}
    assert to_device(frozen, "meta") is frozen
    out = to_device(plain, "meta")
    assert out is not plain
    assert plain == out


def test_generators_and_iterators_pass_through_unconsumed() -> None:
    t = torch.ones(1)
    gen = (x for x in [t])
    it = iter([t])
    out = to_device({"gen": gen, "it": it}, "meta")
    assert out["gen"] is gen
    assert out["it"] is it
    assert [t] == list(gen)  # nothing was consumed: the tensor is still there, not moved
    assert [t] == list(it)


def test_other_leaves_pass_through_untouched() -> None:
    array, marker, text = np.ones(2), object(), "text"
    out = to_device([array, marker, text, None, 3, 2.5, torch.float16, CPU, Batch], "meta")
    assert [array, marker, text, None, 3, 2.5, torch.float16, CPU, Batch] == out
    assert out[0] is array
    assert out[1] is marker


def test_object_whose_to_moves_in_place_and_returns_none_is_kept() -> None:
    data = InPlace(torch.ones(1))
    out = to_device({"graph": data}, "meta")
    assert out["graph"] is data
    assert META == data.x.device


def test_object_whose_to_returns_a_new_object_and_takes_no_non_blocking() -> None:
    data = ReturnsNew(torch.ones(1))
    out = to_device([data], "meta", non_blocking=True)
    assert isinstance(out[0], ReturnsNew)
    assert META == out[0].x.device
    assert CPU == data.x.device


def test_module_is_moved_in_place_and_returned() -> None:
    model = nn.Linear(2, 2)
    out = to_device({"model": model}, "meta", dtype=torch.float16)
    assert out["model"] is model
    assert (META, torch.float16) == (model.weight.device, model.weight.dtype)
    assert to_device(model, "meta") is model


# --- to_device: tensors, sharing, dtype ----------------------------------------------------------------------------


def test_shared_tensors_stay_shared() -> None:
    t = torch.ones(2)
    inner = [t]
    out = to_device({"a": t, "b": t, "c": inner, "d": inner}, "meta")
    assert out["a"] is out["b"]
    assert out["c"] is out["d"]
    assert out["c"][0] is out["a"]


def test_sharing_holds_between_plain_and_other_containers() -> None:
    t = torch.ones(1)
    inner = [t]
    out = to_device({"a": inner, "b": Batch(inner), "c": Pair(t, inner)}, "meta")
    assert out["a"] is out["b"].x
    assert out["a"] is out["c"].second
    assert out["a"][0] is out["c"].first


def test_tensor_already_in_place_is_not_copied() -> None:
    t = torch.ones(2)
    assert to_device(t, "cpu") is t
    assert to_device(t, "cpu", dtype=torch.float32) is t


def test_parameter_mirrors_tensor_to() -> None:
    param = nn.Parameter(torch.ones(2))
    assert to_device(param, "cpu") is param
    moved = to_device(param, "meta")
    assert type(moved) is torch.Tensor
    assert META == moved.device


DTYPE_CASES = [
    (torch.float32, torch.float16),
    (torch.float64, torch.float16),
    (torch.complex64, torch.complex64),  # complex64 -> complex128 below would be a cast; float16 dtype discards imag
    (torch.int64, torch.int64),
    (torch.int8, torch.int8),
    (torch.bool, torch.bool),
]


@pytest.mark.parametrize(("before", "after"), DTYPE_CASES)
def test_dtype_casts_only_floating_point_tensors(before: torch.dtype, after: torch.dtype) -> None:
    dtype = torch.complex64 if before.is_complex else torch.float16
    out = to_device({"t": torch.zeros(2, dtype=before)}, "meta", dtype=dtype)
    assert after == out["t"].dtype


def test_dtype_casts_complex_tensors() -> None:
    assert torch.complex128 == to_device(torch.zeros(1, dtype=torch.complex64), "cpu", dtype=torch.complex128).dtype


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_integer_dtype_is_refused_like_module_to(dtype: torch.dtype) -> None:
    with pytest.raises(ArgumentError, match="floating point or complex") as caught:
        to_device(torch.ones(1), "cpu", dtype=dtype)
    assert isinstance(caught.value, TypeError)  # what it raised before ArgumentError
    assert "dtype=torch.bfloat16" in str(caught.value)


@pytest.mark.parametrize("dtype", ["float16", np.float16, 16])
def test_dtype_that_is_not_a_torch_dtype_is_refused(dtype: Any) -> None:
    with pytest.raises(ArgumentError, match=r"must be a torch\.dtype.*dtype=torch\.bfloat16"):
        to_device(torch.ones(1), "cpu", dtype=dtype)
    with pytest.raises(ArgumentError, match=r"must be a torch\.dtype"):
        place(nn.Linear(1, 1), "cpu", dtype=dtype)


def test_input_is_not_mutated() -> None:
    t = torch.ones(2)
    batch = {"a": [t, (t, Pair(t, 1))], "b": Batch(t)}
    before = (batch["a"], batch["a"][1], batch["b"], batch["b"].x)
    to_device(batch, "meta", dtype=torch.float16)
    assert before == (batch["a"], batch["a"][1], batch["b"], batch["b"].x)
    assert (CPU, torch.float32) == (t.device, t.dtype)
    assert ["a", "b"] == list(batch)


@pytest.mark.parametrize("depth", [1_000, 50_000])
def test_deep_nesting_does_not_hit_the_recursion_limit(depth: int) -> None:
    batch: Any = torch.ones(1)
    for i in range(depth):
        batch = [batch] if i % 2 else {"k": batch}
    out = to_device(batch, "meta")
    for i in reversed(range(depth)):
        out = out[0] if i % 2 else out["k"]
    assert META == out.device


def test_a_structure_containing_itself_is_refused() -> None:
    loop: list[Any] = [torch.ones(1)]
    loop.append(loop)
    with pytest.raises(ArgumentError, match="contains itself: a list") as caught:
        to_device(loop, "meta")
    assert isinstance(caught.value, ValueError)  # what it raised before ArgumentError
    assert "without the back-reference" in str(caught.value)


def test_non_blocking_on_the_cpu_returns_the_data() -> None:
    batch = {"x": torch.arange(10.0)}
    out = to_device(batch, "cpu", non_blocking=True)
    assert torch.equal(batch["x"], out["x"])
    assert META == to_device(batch, "meta", non_blocking=True)["x"].device


@pytest.mark.parametrize("spec", [META, "meta", "cpu", torch.device("cpu")])
def test_device_spec_forms(spec: Any) -> None:
    assert torch.device(spec) == to_device(torch.ones(1), spec).device


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", 0, "nonsense"])
def test_unavailable_device_raises_device_error(spec: Any) -> None:
    with pytest.raises(DeviceError):
        to_device(torch.ones(1), spec)
    model = nn.Linear(1, 1)
    with pytest.raises(DeviceError):
        place(model, spec)
    assert CPU == model.weight.device


# --- to_device: property -------------------------------------------------------------------------------------------

tensors = st.builds(
    lambda shape, dtype: torch.zeros(shape, dtype=dtype),
    st.lists(st.integers(0, 3), max_size=2),
    st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool, torch.uint8]),
)
atoms = st.one_of(tensors, st.integers(), st.text(max_size=3), st.none(), st.floats(allow_nan=False))
structures = st.recursive(
    atoms,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=3), children, max_size=4),
        st.dictionaries(st.text(max_size=3), children, max_size=4).map(OrderedDict),
        st.dictionaries(st.text(max_size=3), children, max_size=4).map(lambda d: defaultdict(int, d)),
        st.builds(Pair, children, children),
        st.builds(Batch, children, st.text(max_size=3)),
    ),
    max_leaves=20,
)


def assert_same_shape(before: Any, after: Any, device: torch.device, dtype: torch.dtype | None) -> None:
    assert type(before) is type(after)
    if isinstance(before, torch.Tensor):
        cast = dtype is not None and before.is_floating_point()
        assert (device, before.shape, dtype if cast else before.dtype) == (after.device, after.shape, after.dtype)
        assert CPU == before.device
    elif isinstance(before, Mapping):
        assert list(before) == list(after)
        if isinstance(before, defaultdict):
            assert before.default_factory is after.default_factory
        for key in before:
            assert_same_shape(before[key], after[key], device, dtype)
    elif isinstance(before, (list, tuple)):
        assert len(before) == len(after)
        for old, new in zip(before, after, strict=True):
            assert_same_shape(old, new, device, dtype)
    elif isinstance(before, Batch):
        assert before.label is after.label
        assert_same_shape(before.x, after.x, device, dtype)
    else:
        assert before is after


@settings(max_examples=150, deadline=None)
@given(structures, st.sampled_from([CPU, META]), st.sampled_from([None, torch.float16]))
def test_to_device_preserves_structure_and_types(batch: Any, device: torch.device, dtype: torch.dtype | None) -> None:
    assert_same_shape(batch, to_device(batch, device, dtype=dtype), device, dtype)


# --- module_device -------------------------------------------------------------------------------------------------

MODULE_DEVICES = [
    pytest.param(lambda: nn.Linear(2, 2), CPU, id="linear"),
    pytest.param(lambda: nn.Linear(2, 2).to("meta"), META, id="linear-meta"),
    pytest.param(nn.ReLU, CPU, id="no-parameters"),
    pytest.param(lambda: BufferOnly().to("meta"), META, id="buffer-only"),
    pytest.param(lambda: nn.BatchNorm1d(3, affine=False).to("meta"), META, id="batchnorm-buffers"),
]


@pytest.mark.parametrize(("make", "expected"), MODULE_DEVICES)
def test_module_device(make: Any, expected: torch.device) -> None:
    assert expected == module_device(make())


def test_mixed_device_module_names_devices_tensors_and_fix() -> None:
    model = nn.Sequential(*(nn.Linear(2, 2) for _ in range(4)))
    model[3].to("meta")
    with pytest.raises(MixedDeviceError) as caught:
        module_device(model)
    message = str(caught.value)
    assert "cpu: 0.weight, 0.bias, 1.weight and 3 more" in message
    assert "meta: 3.weight, 3.bias" in message
    assert "ferry.place(model, device)" in message
    assert {
        "cpu": ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"],
        "meta": ["3.weight", "3.bias"],
    } == caught.value.devices


def test_parameters_and_buffers_on_different_devices_are_mixed() -> None:
    model = BufferOnly()
    model.weight = nn.Parameter(torch.ones(1, device="meta"))
    with pytest.raises(MixedDeviceError, match="table"):
        module_device(model)


# --- place ---------------------------------------------------------------------------------------------------------


def trained(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()


def quiet_model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Linear(3, 1))


def test_place_moves_in_place_and_returns_the_module() -> None:
    model = quiet_model()
    assert place(model, "meta", dtype=torch.float16) is model
    assert {META} == {t.device for t in model.state_dict().values()}
    assert torch.float16 == model[0].weight.dtype
    assert torch.int64 == model[1].num_batches_tracked.dtype  # integer buffers keep their dtype


def test_place_with_adam_to_meta_repoints_and_moves_the_state() -> None:
    model = quiet_model()
    optimizer = torch.optim.Adam(model.parameters())
    trained(model, optimizer)
    place(model, "meta", optimizer=optimizer)
    params = list(model.parameters())
    assert [id(p) for p in params] == [id(p) for p in optimizer.param_groups[0]["params"]]
    assert {id(p) for p in params} == {id(p) for p in optimizer.state}
    for state in optimizer.state.values():
        assert (META, META) == (state["exp_avg"].device, state["exp_avg_sq"].device)
        assert CPU == state["step"].device  # torch keeps the scalar step on the CPU (not fused/capturable)


def test_place_keeps_a_working_optimizer_on_the_same_device() -> None:
    model = quiet_model()
    optimizer = torch.optim.Adam(model.parameters())
    trained(model, optimizer)
    before = [id(p) for p in model.parameters()]
    place(model, "cpu", optimizer=optimizer)
    assert before == [id(p) for p in model.parameters()]
    trained(model, optimizer)
    assert 2.0 == next(iter(optimizer.state.values()))["step"].item()


def test_place_with_dtype_casts_floating_state_and_keeps_step() -> None:
    model = quiet_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trained(model, optimizer)
    place(model, "meta", optimizer=optimizer, dtype=torch.float16)
    buffers = [state["momentum_buffer"] for state in optimizer.state.values()]
    assert {(META, torch.float16)} == {(b.device, b.dtype) for b in buffers}


def test_place_moves_step_of_a_capturable_optimizer() -> None:
    model = nn.Linear(3, 1)
    optimizer = torch.optim.Adam(model.parameters(), capturable=True)
    for p in model.parameters():
        optimizer.state[p] = {"step": torch.tensor(1.0), "exp_avg": torch.zeros_like(p)}
    place(model, "meta", optimizer=optimizer)
    steps = {(s["step"].device, s["step"].dtype) for s in optimizer.state.values()}
    assert {(META, torch.float32)} == steps


def test_place_with_an_optimizer_over_a_submodule_moves_its_state() -> None:
    model = quiet_model()
    optimizer = torch.optim.Adam(model[2].parameters())
    trained(model, optimizer)
    place(model, "meta", optimizer=optimizer)
    assert [id(p) for p in model[2].parameters()] == [id(p) for p in optimizer.param_groups[0]["params"]]
    assert {META} == {state["exp_avg"].device for state in optimizer.state.values()}


OTHER_OPTIMIZERS = [
    pytest.param(lambda model, other: [*other.parameters()], "2 of the optimizer's 2", id="another-model"),
    pytest.param(lambda model, other: [*model.parameters(), other.weight], "1 of the optimizer's 3", id="extra"),
]


@pytest.mark.parametrize(("params", "counted"), OTHER_OPTIMIZERS)
def test_place_refuses_an_optimizer_with_parameters_not_in_the_module(params: Any, counted: str) -> None:
    model, other = nn.Linear(3, 1), nn.Linear(3, 1)
    optimizer = torch.optim.Adam(params(model, other))
    before = [id(p) for group in optimizer.param_groups for p in group["params"]]
    with pytest.raises(ArgumentError) as caught:
        place(model, "meta", optimizer=optimizer)
    message = str(caught.value)
    assert f"{counted} parameters are not parameters of this Linear" in message
    assert "Pass the optimizer built from this module's parameters" in message
    assert "torch.optim.Adam(model.parameters())" in message
    assert CPU == model.weight.device  # refused before anything moved
    assert before == [id(p) for group in optimizer.param_groups for p in group["params"]]


def test_place_warns_once_about_plain_tensor_attributes() -> None:
    model = Model()
    with pytest.warns(PlacementWarning) as record:
        place(model, "meta")
    assert 1 == len(record)
    message = str(record[0].message)
    assert "scale (cpu), encoder.cache (cpu)" in message
    assert "register_buffer" in message
    assert record[0].filename == __file__  # points at the caller
    assert CPU == model.encoder.cache.device


def test_place_does_not_warn_about_attributes_already_there() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        place(Model(), "cpu")


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool])
def test_place_refuses_an_integer_dtype(dtype: torch.dtype) -> None:
    with pytest.raises(ArgumentError, match="floating point"):
        place(nn.Linear(1, 1), "meta", dtype=dtype)


# --- arguments of the wrong kind -----------------------------------------------------------------------------------

WRONG_KINDS = [
    pytest.param(lambda: place(torch.ones(1), "cpu"), r"ferry\.place.*got a torch\.Tensor", id="place-tensor"),
    pytest.param(lambda: offload(torch.ones(1)), r"ferry\.offload.*got a torch\.Tensor", id="offload-tensor"),
    pytest.param(lambda: module_device(torch.ones(1)), r"module_device.*got a torch\.Tensor", id="device-tensor"),
    pytest.param(lambda: check_devices(torch.ones(1)), r"check_devices.*got a torch\.Tensor", id="check-tensor"),
    pytest.param(lambda: place({"x": nn.Linear(1, 1)}, "cpu"), r"ferry\.place.*got a dict", id="place-dict"),
    pytest.param(lambda: check_devices(torch.ones(1), nn.Linear(1, 1)), r"Pass the module first", id="check-swapped"),
]


@pytest.mark.parametrize(("call", "match"), WRONG_KINDS)
def test_wrong_kind_of_module_names_the_type_and_the_fix(call: Any, match: str) -> None:
    with pytest.raises(ArgumentError, match=match) as caught:
        call()
    message = str(caught.value)
    assert "needs an nn.Module as its first argument" in message
    if "torch.Tensor" in message:
        assert "use ferry.to_device(t, device)" in message


NOT_OPTIMIZERS = [
    pytest.param(lambda opt: [opt], "list", id="list"),
    pytest.param(lambda opt: {"main": opt}, "dict", id="dict"),
    pytest.param(lambda opt: "adam", "str", id="name"),
]


@pytest.mark.parametrize(("wrap", "type_name"), NOT_OPTIMIZERS)
def test_place_refuses_an_optimizer_that_is_not_one(wrap: Any, type_name: str) -> None:
    model = nn.Linear(1, 1)
    optimizer = wrap(torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ArgumentError, match=rf"must be a torch\.optim\.Optimizer, got a {type_name}\.") as caught:
        place(model, "meta", optimizer=optimizer)
    assert "Pass the optimizer itself (optimizer=opt, not a list)" in str(caught.value)
    assert CPU == model.weight.device


def test_argument_error_is_a_ferry_error_and_a_builtin_one() -> None:
    with pytest.raises(FerryError):
        place(torch.ones(1), "cpu")  # type: ignore[type-var]
    with pytest.raises(TypeError):
        module_device(torch.ones(1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"nn\.Module"):
        check_devices(torch.ones(1))  # type: ignore[arg-type]


# --- offload -------------------------------------------------------------------------------------------------------


def test_offload_moves_to_the_cpu_in_place_without_initialising_cuda() -> None:
    initialised = torch.cuda.is_initialized()
    model = nn.Linear(2, 2)
    assert offload(model) is model
    assert CPU == model.weight.device
    assert initialised == torch.cuda.is_initialized()


def test_offload_warns_about_plain_tensor_attributes() -> None:
    model = Model()
    model.encoder.cache = torch.zeros(1, device="meta")
    with pytest.warns(PlacementWarning, match=r"encoder\.cache") as record:
        offload(model)
    assert record[0].filename == __file__


# --- check_devices -------------------------------------------------------------------------------------------------


def test_check_devices_names_inputs_by_argument_path() -> None:
    model = nn.Linear(3, 1)
    meta = torch.ones(1, device="meta")
    report = check_devices(
        model,
        {"input_ids": meta, "ok": torch.ones(1)},
        [torch.ones(1), meta.clone()],
        Pair(1, meta.clone()),
        Batch(meta.clone()),
        mask=meta.clone(),
        flag=True,
    )
    expected = (
        ('args[0]["input_ids"]', META),
        ("args[1][1]", META),
        ("args[2].second", META),
        ("args[3].x", META),
        ('kwargs["mask"]', META),
    )
    assert DeviceReport(CPU, expected) == report
    assert not report.ok


def test_check_devices_reports_stray_parameters_against_the_main_device() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2).to("meta"))
    report = check_devices(model, torch.ones(2))
    assert DeviceReport(CPU, (("2.weight", META), ("2.bias", META))) == report


PARAMETERLESS = [
    pytest.param([], DeviceReport(CPU), id="no-inputs"),
    pytest.param(["meta"], DeviceReport(META), id="one-input"),
    pytest.param(["meta", "cpu", "meta"], DeviceReport(META, (("args[1]", CPU),)), id="most-common"),
    pytest.param(["cpu", "meta"], DeviceReport(CPU, (("args[1]", META),)), id="tie-first-seen"),
    pytest.param(["meta", "cpu"], DeviceReport(META, (("args[1]", CPU),)), id="tie-first-seen-meta"),
]


@pytest.mark.parametrize(("devices", "expected"), PARAMETERLESS)
def test_check_devices_of_a_parameterless_module_uses_the_inputs_device(
    devices: list[str], expected: DeviceReport
) -> None:
    assert expected == check_devices(nn.ReLU(), *(torch.ones(1, device=d) for d in devices))


def test_check_devices_walks_sets() -> None:
    report = check_devices(nn.Linear(1, 1), {"ids": {torch.ones(1, device="meta")}})
    assert DeviceReport(CPU, (('args[0]["ids"]{0}', META),)) == report


@pytest.mark.parametrize(("report", "truth"), [(DeviceReport(CPU), True), (DeviceReport(CPU, (("x", META),)), False)])
def test_report_is_truthy_only_when_all_is_well(report: DeviceReport, truth: bool) -> None:
    assert truth is bool(report)
    assert truth is report.ok
    assert bool(check_devices(nn.Linear(1, 1), torch.ones(1)))
    assert not check_devices(nn.Linear(1, 1), torch.ones(1, device="meta"))


def test_report_when_all_is_well() -> None:
    report = check_devices(nn.Linear(2, 2).to("meta"), torch.ones(1, device="meta"))
    assert report.ok
    assert "all tensors on meta" == str(report)
    report.raise_if_bad()


def test_raise_if_bad_lists_mismatches_and_the_fix() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2).to("meta"))
    report = check_devices(model, mask=torch.ones(1, device="meta"))
    with pytest.raises(DeviceMismatchError) as caught:
        report.raise_if_bad()
    error = caught.value
    assert [("2.weight", "meta"), ("2.bias", "meta"), ('kwargs["mask"]', "meta")] == error.mismatches
    assert "cpu" == error.expected
    assert 'ferry.to_device(batch, "cpu")' in str(error)
    assert 'ferry.place(model, "cpu")' in str(error)
    assert "2.weight: meta" in str(report)


def test_device_report_is_frozen() -> None:
    report = DeviceReport(CPU)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.device = META  # type: ignore[misc]


# --- GPU -----------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_non_blocking_copy_to_the_cpu_is_complete() -> None:
    x = torch.randn(1 << 26, device="cuda")
    for _ in range(20):  # keep the GPU busy so the copy is queued behind work
        x = x * 1.0001 + 1
    out = to_device({"x": x, "ids": [x.long()]}, "cpu", non_blocking=True)
    got, ids = out["x"].clone(), out["ids"][0].clone()  # read on the CPU at once, no synchronize in between
    expected = x.cpu()
    assert torch.equal(expected, got)
    assert torch.equal(expected.long(), ids)


@pytest.mark.gpu
def test_copy_from_pageable_memory_to_cuda_has_read_its_source() -> None:
    source = torch.randn(1 << 24)
    expected = source.clone()
    out = to_device({"x": source}, "cuda")
    source.zero_()  # the copy must be done reading by now
    assert torch.equal(expected, out["x"].cpu())


@pytest.mark.gpu
def test_place_with_adam_to_cuda_then_step() -> None:
    model = quiet_model()
    optimizer = torch.optim.Adam(model.parameters())
    trained(model, optimizer)
    place(model, "cuda", optimizer=optimizer)
    assert torch.device("cuda:0") == module_device(model)
    model(torch.ones(4, 3, device="cuda")).sum().backward()
    optimizer.step()
    for state in optimizer.state.values():
        assert "cuda" == state["exp_avg"].device.type
        assert 2.0 == state["step"].item()


@pytest.mark.gpu
def test_offload_frees_cached_memory() -> None:
    model = nn.Linear(8192, 8192, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_reserved()
    offload(model)
    gc.collect()
    assert CPU == model.weight.device
    assert before - 8192 * 8192 * 4 >= torch.cuda.memory_reserved()


@pytest.mark.gpu
def test_cuda_devices_are_canonical() -> None:
    out = to_device(torch.ones(1), "cuda")
    assert torch.device("cuda:0") == out.device
    model = nn.Linear(2, 2).to("cuda")
    assert check_devices(model, out).ok
    assert (("args[0]", CPU),) == check_devices(model, torch.ones(1)).mismatches


class _Holder:
    def __init__(self) -> None:
        self.x = torch.ones(2)
        self.name = "a"


@dataclasses.dataclass
class _WithExtra:
    x: torch.Tensor


def test_tensors_to_device_cannot_reach_are_named_in_a_warning() -> None:
    extra = _WithExtra(torch.ones(1))
    extra.cache = torch.zeros(1)  # an attribute that is not a field
    with pytest.warns(PlacementWarning, match=r"\.x of a _Holder \(object\).*\.cache of a _WithExtra"):
        out = to_device({"holder": _Holder(), "extra": extra}, "meta")
    assert out["extra"].x.device.type == "meta"
    assert out["extra"].cache.device.type == "cpu"  # left behind, as the warning says


def test_plain_values_and_objects_without_tensors_pass_quietly() -> None:
    class Config:
        def __init__(self) -> None:
            self.lr = 0.1

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_device({"x": torch.ones(1), "cfg": Config(), "s": "a", "n": None}, "meta")
