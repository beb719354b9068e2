"""Pretend GPU: CUDA scripts run on the CPU with every device check made against the pretend devices."""

from __future__ import annotations

import doctest
import io
import runpy
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import pytest
import torch
from torch import nn

from ferry.sanitizer import pretend as pretend_module
from ferry.sanitizer.pretend import PATCHED_CUDA_FUNCTIONS, is_pretend, pretend_cuda, real_tensor

CUDA0 = torch.device("cuda", 0)
CUDA1 = torch.device("cuda", 1)

# (case file prefix, exception raised at runtime, text in its message); the case's `expect` line is one past
# the line that raises
RUNTIME_CASES = [
    ("001", RuntimeError, "Expected all tensors to be on the same device"),
    ("003", RuntimeError, "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"),
    ("004", RuntimeError, "Expected all tensors to be on the same device"),
    ("010", RuntimeError, "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same"),
    ("011", RuntimeError, "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"),
    ("013", RuntimeError, "Expected all tensors to be on the same device"),
    ("023", RuntimeError, "Expected all tensors to be on the same device"),
    ("024", RuntimeError, "Expected all tensors to be on the same device"),
    ("039", RuntimeError, "Expected all tensors to be on the same device"),
    ("040", RuntimeError, "Expected all tensors to be on the same device"),
    ("046", TypeError, "can't convert cuda:0 device type tensor to numpy"),
]
# gpu cases with no runtime error: the negatives, and host-sync cases (slow on a GPU, not wrong)
CLEAN_CASES = ["029", "030", "031", "047", "049", "055", "056", "061"]

MOVES: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], torch.device]] = [
    ("cuda()", lambda t: t.cuda(), CUDA0),
    ("cuda(1)", lambda t: t.cuda(1), CUDA1),
    ('to("cuda")', lambda t: t.to("cuda"), CUDA0),
    ('to("cuda:1")', lambda t: t.to("cuda:1"), CUDA1),
    ("to(device, dtype)", lambda t: t.to(CUDA1, torch.float64), CUDA1),
    ("to(device=1)", lambda t: t.to(device=1), CUDA1),
    ("to(other)", lambda t: t.to(torch.zeros(1, device="cuda:1")), CUDA1),
    ("double().cuda()", lambda t: t.double().cuda(), CUDA0),
]

FACTORIES: list[tuple[str, Callable[[], torch.Tensor], torch.device]] = [
    ('zeros(device="cuda")', lambda: torch.zeros(3, device="cuda"), CUDA0),
    ('ones(device="cuda:1")', lambda: torch.ones(3, device="cuda:1"), CUDA1),
    ("tensor(device=CUDA1)", lambda: torch.tensor([1.0, 2.0], device=CUDA1), CUDA1),
    ("arange(device=0)", lambda: torch.arange(4, device=0), CUDA0),
    ("zeros_like(cuda)", lambda: torch.zeros_like(torch.ones(2, device="cuda:1")), CUDA1),
    ('zeros_like(cuda, device="cpu")', lambda: torch.zeros_like(torch.ones(2, device="cuda"), device="cpu"), None),
    ("new_zeros", lambda: torch.ones(2, device="cuda:1").new_zeros(3), CUDA1),
]


def _case(prefix: str, cases: Path) -> Path:
    (path,) = cases.joinpath("lint").glob(f"{prefix}_*.py")
    return path


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_cuda_answers_as_a_gpu_machine_inside_and_is_restored_after() -> None:
    originals = {name: getattr(torch.cuda, name) for name in PATCHED_CUDA_FUNCTIONS}
    with pretend_cuda(device_count=3):
        assert (True, 3, 0) == (torch.cuda.is_available(), torch.cuda.device_count(), torch.cuda.current_device())
        torch.cuda.set_device(2)
        assert 2 == torch.cuda.current_device()
        torch.cuda.synchronize()
        torch.cuda.manual_seed_all(0)
        torch.cuda.empty_cache()
        assert 0 == torch.cuda.memory_allocated()
        torch.backends.cudnn.benchmark = torch.backends.cudnn.benchmark
    assert originals == {name: getattr(torch.cuda, name) for name in PATCHED_CUDA_FUNCTIONS}
    assert torch.cuda.is_available() is False


def test_a_negative_device_index_is_a_no_op_as_in_cuda_pytorch() -> None:
    """``torch.cuda.set_device(-1)`` (cnn-text-classification's ``-device -1`` default) and ``torch.cuda.device(-1)``
    change nothing on a CUDA machine; the pretend one must not raise."""
    with pretend_cuda(device_count=2):
        torch.cuda.set_device(1)
        torch.cuda.set_device(-1)
        assert 1 == torch.cuda.current_device()
        with torch.cuda.device(-1):
            assert 1 == torch.cuda.current_device()
        with torch.cuda.device(0):
            assert 0 == torch.cuda.current_device()
        assert 1 == torch.cuda.current_device()


def test_exit_restores_after_an_exception_and_the_default_device() -> None:
    def fail() -> None:
        with pretend_cuda():
            torch.set_default_device("cuda")
            assert CUDA0 == torch.ones(1).device
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        fail()
    assert torch.cuda.is_available() is False
    assert torch.device("cpu") == torch.ones(1).device


def test_device_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="device_count=1"), pretend_cuda(device_count=0):
        pass


@pytest.mark.parametrize(("name", "op", "device"), MOVES, ids=[m[0] for m in MOVES])
def test_moves_report_the_pretend_device_and_keep_the_values(
    name: str, op: Callable[[torch.Tensor], torch.Tensor], device: torch.device
) -> None:
    x = torch.randn(3)
    with pretend_cuda(device_count=2):
        y = op(x)
        z = (y * 2 + 1).sum()
    assert (device, device, True, True) == (y.device, z.device, y.is_cuda, is_pretend(y))
    assert torch.equal(x.to(y.dtype), real_tensor(y))
    assert torch.equal((x.to(y.dtype) * 2 + 1).sum(), real_tensor(z))


@pytest.mark.parametrize(("name", "make", "device"), FACTORIES, ids=[f[0] for f in FACTORIES])
def test_factories_make_tensors_on_the_pretend_device(
    name: str, make: Callable[[], torch.Tensor], device: torch.device | None
) -> None:
    with pretend_cuda(device_count=2):
        t = make()
    assert (device or torch.device("cpu")) == t.device
    assert (device is not None) == is_pretend(t)


def test_default_device_and_device_contexts() -> None:
    with pretend_cuda(device_count=2):
        with torch.device("cuda:1"):
            assert CUDA1 == torch.randn(2).device
        with torch.cuda.device(1):
            assert (CUDA1, CUDA1) == (torch.zeros(1, device="cuda").device, torch.ones(1).cuda().device)
        assert CUDA0 == torch.zeros(1, device="cuda").device


def test_a_gpu_that_does_not_exist_is_an_error() -> None:
    with pretend_cuda(device_count=2), pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(1).to("cuda:2")


def test_cpu_and_numpy() -> None:
    with pretend_cuda():
        y = torch.arange(3.0).cuda()
        back = y.cpu()
        with pytest.raises(TypeError, match=r"^can't convert cuda:0 device type tensor to numpy\."):
            y.numpy()
        assert [0.0, 1.0, 2.0] == y.tolist()
        assert 2.0 == y[2].item()
    assert (torch.device("cpu"), False) == (back.device, is_pretend(back))
    assert [0.0, 1.0, 2.0] == back.numpy().tolist()
    back[0] = 5.0  # a copy, as a device-to-host copy is
    assert 0.0 == real_tensor(y)[0].item()


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        ("cuda:0", "cpu", "cuda:0 and cpu"),
        ("cpu", "cuda:0", "cuda:0 and cpu"),
        ("cuda:0", "cuda:1", "cuda:0 and cuda:1"),
    ],
)
def test_mixing_devices_raises_pytorchs_error(first: str, second: str, message: str) -> None:
    expected = f"Expected all tensors to be on the same device, but found at least two devices, {message}!"
    with pretend_cuda(device_count=2):
        a, b = torch.ones(3).to(first), torch.ones(3).to(second)
        for op in (torch.add, torch.mul, torch.maximum):
            with pytest.raises(RuntimeError) as info:
                op(a, b)
            assert expected == str(info.value)
        with pytest.raises(RuntimeError, match="same device"):
            torch.cat([a, b])


def test_cat_and_stack_take_no_cpu_scalar_among_gpu_tensors_as_on_a_gpu() -> None:
    # the CUDA kernel of cat checks every input's device (pytorch#35053); stack dispatches to cat
    with pretend_cuda():
        loss = torch.ones((), device="cuda")
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            torch.stack([loss, torch.tensor(0.5)])
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            torch.cat([loss.view(1), torch.tensor([0.5])])
        assert CUDA0 == torch.stack([loss, loss * 2]).device
        assert CUDA0 == (loss + torch.tensor(0.5)).device  # arithmetic still takes the CPU scalar


def test_cpu_scalars_and_cpu_indices_mix_with_gpu_tensors_as_on_a_gpu() -> None:
    with pretend_cuda():
        x = torch.arange(6.0, device="cuda").view(2, 3)
        assert CUDA0 == (x * torch.tensor(2.0)).device
        assert CUDA0 == x[torch.tensor([1, 0])].device
        x.copy_(torch.zeros(2, 3))
        assert torch.equal(torch.zeros(2, 3), real_tensor(x))


@pytest.mark.parametrize(
    ("name", "op", "shape"),
    [
        ("unsqueeze_", lambda x: x.unsqueeze_(0), (1, 2, 3)),
        ("t_", lambda x: x.t_(), (3, 2)),
        ("resize_", lambda x: x.resize_(6), (6,)),
    ],
)
def test_in_place_shape_changes_keep_the_tensor_and_its_device(
    name: str, op: Callable[[torch.Tensor], torch.Tensor], shape: tuple[int, ...]
) -> None:
    with pretend_cuda():
        x = torch.arange(6.0).view(2, 3).cuda()
        y = op(x)
        z = y + 1
    assert (True, shape, shape, CUDA0) == (y is x, tuple(x.shape), tuple(z.shape), z.device)
    assert real_tensor(x).stride() == x.stride()


def test_indexing_rules_as_on_a_gpu() -> None:
    with pretend_cuda(device_count=2):
        x = torch.arange(4.0, device="cuda")
        x[torch.tensor([0, 1], device="cuda")] = torch.tensor(9.0)
        with pytest.raises(RuntimeError, match=r"^indices should be either on cpu or on the same device .* \(cpu\)"):
            torch.arange(4.0)[torch.tensor([0], device="cuda")]
        with pytest.raises(RuntimeError, match=r"\(cuda:0\)$"):
            x[torch.tensor([0], device="cuda:1")]
        with pytest.raises(RuntimeError, match="cuda:0 and cpu"):
            x[torch.tensor([0, 1])] = torch.ones(2)
    assert [9.0, 9.0, 2.0, 3.0] == real_tensor(x).tolist()


def test_copy_into_a_cpu_tensor_and_assigning_grads() -> None:
    with pretend_cuda(device_count=2):
        host = torch.zeros(2)
        host.copy_(torch.ones(2, device="cuda"))
        weight = nn.Linear(2, 2).cuda().weight
        with pytest.raises(RuntimeError, match=r"^assigned grad has data of a different type$"):
            weight.grad = torch.zeros(2, 2)
        with pytest.raises(RuntimeError, match=r"^assigned grad has data located on a different device$"):
            weight.grad = torch.zeros(2, 2, device="cuda:1")
        weight.grad = torch.ones(2, 2, device="cuda")
    assert (False, [1.0, 1.0], CUDA0) == (is_pretend(host), host.tolist(), weight.grad.device)


def test_resize_as_takes_a_template_on_another_device_as_cuda_pytorch_does() -> None:
    # WassersteinGAN: `input.resize_as_(real_cpu).copy_(real_cpu)`; resize_as_ reads only the template's sizes
    with pretend_cuda():
        buffer = torch.empty(2).cuda()
        batch = torch.ones(3, 4)
        buffer.resize_as_(batch).copy_(batch)
        host = torch.empty(1)
        host.resize_as_(torch.ones(2, 2, device="cuda"))
    assert (CUDA0, (3, 4), [1.0] * 4, (2, 2)) == (
        buffer.device,
        tuple(buffer.shape),
        real_tensor(buffer)[0].tolist(),
        tuple(host.shape),
    )


def test_products_with_a_sparse_operand_run_on_the_pretend_gpu_as_on_cuda() -> None:
    # `torch.sparse.mm(adj, x)` and `adj @ x` add into zeros made with the dense operand's options, CPU ones here
    n = 4
    index = torch.arange(n)
    with pretend_cuda(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on sparse invariant checks
        adj = torch.sparse_coo_tensor(torch.stack([index, index]), torch.ones(n), (n, n)).to("cuda")
        x = torch.randn(n, 8, device="cuda", requires_grad=True)
        outputs = [torch.sparse.mm(adj, x), adj @ x, torch.mm(adj, x), adj.mm(x), torch.matmul(adj, x)]
        sum(o.sum() for o in outputs).backward()
        with pytest.raises(RuntimeError, match="cuda:0 and cpu"):
            torch.sparse.mm(adj, torch.randn(n, 8))  # the caller's own CPU operand still fails, as on a GPU
    assert [CUDA0] * 6 == [o.device for o in outputs] + [x.grad.device]
    assert torch.equal(real_tensor(outputs[0]), real_tensor(x).detach())


def test_conv_input_on_other_device_words_it_as_pytorch_does() -> None:
    with pretend_cuda():
        conv = nn.Conv2d(1, 1, 3).cuda()
        with pytest.raises(RuntimeError, match=r"^Input type \(torch\.FloatTensor\) and weight type \(torch\.cuda"):
            conv(torch.randn(1, 1, 5, 5))


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda ps: torch.optim.Adam(ps, lr=0.1),
        lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=True),
        lambda ps: torch.optim.AdamW(ps, lr=0.1, fused=True),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True),
    ],
    ids=["adam", "adam-foreach", "adamw-fused", "sgd-foreach"],
)
def test_training_step_on_pretend_gpu_matches_the_cpu_bitwise(
    make_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
) -> None:
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 1, 0])
    expected_model = _model()
    expected_opt = make_optimizer(list(expected_model.parameters()))
    for _ in range(2):
        nn.functional.cross_entropy(expected_model(x), y).backward()
        expected_opt.step()
        expected_opt.zero_grad()
    model = _model()
    with pretend_cuda():
        model.to("cuda")
        opt = make_optimizer(list(model.parameters()))
        for _ in range(2):
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            grads = [p.grad.device for p in model.parameters() if p.grad is not None]
            opt.step()
            opt.zero_grad()
        state = [t.device for s in opt.state.values() for t in s.values() if t.dim() > 0]
        params = list(model.parameters())
    assert (CUDA0, [CUDA0] * 4) == (loss.device, grads)
    assert all(CUDA0 == d for d in state)
    assert all(isinstance(p, nn.Parameter) and CUDA0 == p.device for p in params)
    for want, got in zip(expected_model.parameters(), params, strict=True):
        assert torch.equal(want.detach(), real_tensor(got))


def test_model_moves_keep_the_parameter_objects_as_on_a_gpu() -> None:
    # a GPU keeps each Parameter (param.data = moved): optimizers, tied weights and hooks still see the module's
    model = _model()
    model[2].weight = nn.Parameter(torch.randn(3, 8))
    tied = nn.Linear(8, 3, bias=False)
    tied.weight = model[2].weight
    on_cpu = model[0].weight
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # tied's weight is one of them
    with pretend_cuda(device_count=2):
        model.cuda()
        tied.cuda()
        assert (True, CUDA0, True) == (model[0].weight is on_cpu, on_cpu.device, tied.weight is model[2].weight)
        model.to("cuda:1")
        tied.to("cuda:1")
        assert (CUDA1, CUDA1) == (on_cpu.device, model(torch.ones(4, device="cuda:1")).device)
        model(torch.ones(2, 4, device="cuda:1")).sum().backward()
        optimizer.step()  # the optimizer built before the moves steps the moved parameters
        assert CUDA1 == on_cpu.grad.device
        with pytest.raises(RuntimeError, match="cuda:1 and cpu"):
            model(torch.ones(4))
        with pytest.raises(RuntimeError, match="incompatible tensor type"):
            torch.ones(8, 4).data = on_cpu
        model.cpu()
    assert (True, nn.Parameter, torch.device("cpu")) == (
        model[0].weight is on_cpu,
        type(model[0].weight),
        model[0].weight.device,
    )


def test_gradient_of_a_move_flows_back_to_the_cpu_leaf() -> None:
    x = torch.randn(3, requires_grad=True)
    with pretend_cuda():
        (x.to("cuda") * 2).sum().backward()
    assert (torch.Tensor, True) == (type(x.grad), torch.equal(torch.full((3,), 2.0), x.grad))


def test_torch_save_writes_the_gpu_location_and_torch_load_puts_it_back_as_on_a_gpu() -> None:
    # a file saved under pretend says cuda:0, as a GPU's does: back on the pretend GPU under pretend (pickled whole
    # modules too, their parameters still Parameters), and on a CPU-only machine it needs map_location
    with pretend_cuda():
        model = _model().cuda()
        state, whole = io.BytesIO(), io.BytesIO()
        torch.save({**model.state_dict(), "cpu": torch.zeros(2)}, state)
        torch.save(model, whole)
        model.load_state_dict(_model().state_dict())  # CPU -> pretend GPU, as on a GPU
        state.seek(0)
        whole.seek(0)
        loaded = torch.load(state)
        reloaded = torch.load(whole, weights_only=False)
        assert {CUDA0} == {t.device for k, t in loaded.items() if k != "cpu"}
        assert torch.device("cpu") == loaded["cpu"].device
        assert all(CUDA0 == p.device and isinstance(p, nn.Parameter) for p in reloaded.parameters())
        assert CUDA0 == reloaded(torch.ones(4, device="cuda")).device
    state.seek(0)
    with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
        torch.load(state)
    state.seek(0)
    on_cpu = torch.load(state, map_location="cpu")
    assert all(not is_pretend(t) and t.device.type == "cpu" for t in on_cpu.values())
    _model().load_state_dict({k: v for k, v in on_cpu.items() if k != "cpu"})


def test_repr_and_type_name_as_on_a_gpu() -> None:
    with pretend_cuda():
        t = torch.ones(2, device="cuda", requires_grad=True)
        assert "tensor([1., 1.], device='cuda:0', requires_grad=True)" == repr(t)
        assert ("torch.cuda.FloatTensor", 0) == (t.type(), t.get_device())


@pytest.mark.parametrize(("prefix", "error", "message"), RUNTIME_CASES, ids=[c[0] for c in RUNTIME_CASES])
def test_gpu_cases_fail_at_runtime_where_they_would_on_a_gpu(
    shared_cases: Path, prefix: str, error: type[Exception], message: str
) -> None:
    path = _case(prefix, shared_cases)
    expect = [line for line in path.read_text().splitlines() if line.startswith("# expect:") and "runtime" in line]
    lines = {int(line.split(":")[1]) for line in expect}
    with pretend_cuda(), pytest.raises(error) as info:
        runpy.run_path(str(path), run_name="__main__")
    assert message in str(info.value)
    frames = [
        tb.tb_lineno for tb in _traceback(info.value.__traceback__) if tb.tb_frame.f_code.co_filename == str(path)
    ]
    assert frames[-1] in lines or not lines  # 046's numpy error is marked [both], not [runtime]


@pytest.mark.parametrize("prefix", CLEAN_CASES)
def test_gpu_cases_without_a_device_bug_run_clean(
    shared_cases: Path, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pretend_cuda():
        runpy.run_path(str(_case(prefix, shared_cases)), run_name="__main__")


def test_amp_grad_scaler_steps() -> None:
    with pretend_cuda():
        model = nn.Linear(3, 2).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cuda")
        scaler.scale(model(torch.ones(4, 3, device="cuda")).sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert (65536.0, CUDA0) == (scaler.get_scale(), model.weight.device)


def test_first_optimizer_in_a_fresh_process() -> None:
    # the optimizers import torch._dynamo on first use, which registers torch.cuda's functions: that must see
    # PyTorch's own, not the pretend replacements (this process imported it long ago, so use a fresh one)
    script = (
        "import torch\n"
        "from ferry.sanitizer.pretend import pretend_cuda\n"
        "with pretend_cuda():\n"
        "    model = torch.nn.Linear(2, 2).cuda()\n"
        "    torch.optim.Adam(model.parameters()).step()\n"
        "print(torch.cuda.is_available())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert (0, "False") == (done.returncode, done.stdout.strip()), done.stderr


def test_doctests() -> None:
    result = doctest.testmod(pretend_module, optionflags=doctest.ELLIPSIS)
    assert (0, True) == (result.failed, result.attempted > 0)


def _traceback(tb: TracebackType | None) -> list[TracebackType]:
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    return frames


def test_an_optimizer_pickled_whole_comes_back_with_its_state_on_the_gpu(tmp_path) -> None:
    """``torch.save({"model": model, "optimizer": optimizer})`` (the image-captioning tutorial's checkpoint): on a
    GPU the optimizer's state loads back onto the GPU, next to its parameters; Adam's ``step`` stays on the CPU."""
    with pretend_cuda():
        model = nn.Linear(3, 3).cuda()
        optimizer = torch.optim.Adam(model.parameters())
        model(torch.randn(2, 3, device="cuda")).sum().backward()
        optimizer.step()
        torch.save({"model": model, "optimizer": optimizer}, tmp_path / "checkpoint.pth.tar")
        loaded = torch.load(tmp_path / "checkpoint.pth.tar", weights_only=False)
        param = loaded["optimizer"].param_groups[0]["params"][0]
        assert param is loaded["model"].weight
        state = loaded["optimizer"].state[param]
        assert (CUDA0, CUDA0, torch.device("cpu")) == (state["exp_avg"].device, state["exp_avg_sq"].device,
                                                       state["step"].device)  # fmt: skip
        loaded["model"](torch.randn(2, 3, device="cuda")).sum().backward()
        loaded["optimizer"].step()


def test_torch_load_with_a_cuda_map_location_lands_on_the_pretend_gpu(tmp_path) -> None:
    path = tmp_path / "c.pt"
    torch.save({"w": torch.ones(2), "step": 3}, path)
    with pretend_cuda(device_count=2):
        back = torch.load(path, map_location="cuda:1")
        assert torch.device("cuda", 1) == back["w"].device
        assert 3 == back["step"]
        assert torch.equal(torch.ones(2), back["w"].cpu())
        plain = torch.load(path, map_location="cpu")
        assert torch.device("cpu") == plain["w"].device
    assert torch.load is torch.serialization.load


def test_only_torch_save_records_locations_so_no_stale_address_tags_a_later_save() -> None:
    import pickle

    from ferry.sanitizer.pretend._tensor import SAVED_LOCATIONS

    with pretend_cuda():
        x = torch.ones(3, device="cuda")
        pickle.loads(pickle.dumps(x))  # plain pickle writes CPU data with its device, and records nothing here
        assert {} == SAVED_LOCATIONS
        torch.save(x, io.BytesIO())
        assert {} == SAVED_LOCATIONS  # cleared when torch.save returns
    buffer = io.BytesIO()
    torch.save(torch.zeros(3), buffer)  # a later CPU save is a CPU save
    buffer.seek(0)
    assert torch.device("cpu") == torch.load(buffer).device


def test_plain_pickle_and_copy_bring_a_gpu_tensor_back_on_its_gpu_as_pytorch_does() -> None:
    # Rainbow pickles its replay memory (tensors on the GPU) to a bz2 file and reads it back to resume
    import copy
    import pickle

    with pretend_cuda(device_count=2):
        memory = {"frames": torch.arange(6.0, device="cuda:1"), "host": torch.ones(2), "w": nn.Parameter(torch.ones(2))}
        memory["w"] = nn.Parameter(memory["w"].cuda())
        back = pickle.loads(pickle.dumps(memory))
        assert CUDA1 == back["frames"].device
        assert is_pretend(back["frames"])
        assert torch.equal(torch.arange(6.0), back["frames"].cpu())
        assert torch.device("cpu") == back["host"].device
        assert isinstance(back["w"], nn.Parameter)
        assert CUDA0 == back["w"].device
        assert back["w"].requires_grad
        assert CUDA1 == copy.copy(memory["frames"]).device
        written = pickle.dumps(memory["frames"])
    outside = pickle.loads(written)  # no pretend GPU to put it on: the data, on the CPU
    assert torch.device("cpu") == outside.device
    assert not is_pretend(outside)


def test_a_users_autograd_function_backward_sees_the_pretend_devices() -> None:
    # pytorch-grad-cam's guided backpropagation: `torch.zeros(x.size()).type_as(x)` in `backward` is on x's GPU
    class GuidedRelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            zeros = torch.zeros(x.size()).type_as(x)
            assert CUDA0 == zeros.device
            return torch.addcmul(zeros, grad, (x > 0).type_as(grad))

    with pretend_cuda():
        x = torch.tensor([-1.0, 2.0], device="cuda", requires_grad=True)
        GuidedRelu.apply(x).sum().backward()
        assert CUDA0 == x.grad.device
        assert [0.0, 1.0] == x.grad.cpu().tolist()
        (g,) = torch.autograd.grad(GuidedRelu.apply(x * 2).sum(), x)
        assert [0.0, 2.0] == g.cpu().tolist()


def test_pytorchs_own_warnings_point_at_the_users_line():
    import warnings

    shown: list[tuple[str, int]] = []
    original = warnings.showwarning
    warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: shown.append(
        (filename, lineno)
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            with pretend_cuda():
                torch.add(torch.ones(2), torch.ones(2), out=torch.empty(1))  # PyTorch warns: the output is resized
    finally:
        warnings.showwarning = original
    line = test_pytorchs_own_warnings_point_at_the_users_line.__code__.co_firstlineno + 12
    assert shown == [(__file__, line)]


def test_moving_a_meta_tensor_to_a_pretend_gpu_raises_as_on_a_gpu() -> None:
    with pretend_cuda():
        with torch.device("meta"):
            model = torch.nn.Linear(4, 4)
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            model.cuda()
        meta = torch.empty(3, device="meta")
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            meta.to("cuda")
        assert torch.ones(2, device="cuda").to("meta").is_meta


def test_views_of_normal_tensors_under_inference_mode_stay_normal_tensors_as_in_pytorch() -> None:
    """open_clip evaluates under ``torch.inference_mode()`` with views of its parameters: no crash, same flags."""

    def flags(device: str) -> tuple[bool, ...]:
        torch.manual_seed(0)
        weight = nn.Parameter(torch.randn(8, device=device))
        layer = nn.Linear(8, 3).to(device)
        with torch.inference_mode():
            view = weight.view(1, -1)
            scores = layer(view).softmax(-1)
            again = scores.view(-1)
        assert scores.device.type == device
        return view.is_inference(), scores.is_inference(), again.is_inference(), view._is_view()

    expected = flags("cpu")
    with pretend_cuda(1):
        assert flags("cuda") == expected == (False, True, True, True)
