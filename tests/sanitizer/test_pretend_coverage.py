"""The pretend GPU runs what a real GPU runs: each test is a correct program's idiom that failed under pretend once.

Each checks the result against what CUDA PyTorch gives (the device, the dtype, that backward runs), and, where the
idiom is a device bug in disguise, that the bug still raises.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ferry.sanitizer.pretend as pretend_module
from ferry.sanitizer.pretend import PATCHED_ACCELERATOR_FUNCTIONS, is_pretend, pretend_cuda

CUDA0 = torch.device("cuda", 0)
CUDA1 = torch.device("cuda", 1)
MISMATCH = "Expected all tensors to be on the same device"


def test_torch_accelerator_answers_for_the_pretend_gpus_and_is_restored_after() -> None:
    originals = {name: getattr(torch.accelerator, name) for name in PATCHED_ACCELERATOR_FUNCTIONS}
    with pretend_cuda(device_count=2):
        # PyTorch's own examples choose their device this way now
        device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
        assert (torch.device("cuda"), 2, 0) == (
            device,
            torch.accelerator.device_count(),
            torch.accelerator.current_device_index(),
        )
        torch.accelerator.set_device_index(1)
        assert 1 == torch.accelerator.current_device_index()
        assert CUDA1 == torch.ones(1, device="cuda").device
        with torch.accelerator.device_index(0):
            assert 0 == torch.accelerator.current_device_index()
        assert 1 == torch.accelerator.current_device_index()
        torch.accelerator.synchronize()
        torch.accelerator.set_device_index(0)
        assert CUDA0 == torch.ones(2).to(device, non_blocking=True).device
    assert originals == {name: getattr(torch.accelerator, name) for name in PATCHED_ACCELERATOR_FUNCTIONS}
    assert torch.accelerator.is_available() is False


def test_integer_ordinals_mean_cuda_for_modules_and_devices() -> None:
    with pretend_cuda(device_count=2):
        model = nn.Linear(2, 2).to(0)
        assert {CUDA0} == {p.device for p in model.parameters()}
        assert CUDA1 == model.to(device=1).weight.device
        assert CUDA1 == torch.device(1)
        assert isinstance(torch.device(1), torch.device)
        assert torch.device("cpu") == torch.device("cpu")
        assert CUDA0 == torch.ones(2).to(torch.device(0)).device
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            nn.Linear(2, 2).to(5)
    assert torch.device is pretend_module._REAL_DEVICE


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("FloatTensor", torch.float32), ("LongTensor", torch.int64), ("HalfTensor", torch.float16)],
)
def test_legacy_typed_tensors_build_convert_and_test_as_on_a_gpu(name: str, dtype: torch.dtype) -> None:
    with pretend_cuda():
        legacy = getattr(torch.cuda, name)
        from_data = legacy([1, 2, 3])
        from_size = legacy(2, 3)
        assert (CUDA0, dtype, [1, 2, 3]) == (from_data.device, from_data.dtype, from_data.int().tolist())
        assert (CUDA0, dtype, (2, 3)) == (from_size.device, from_size.dtype, tuple(from_size.shape))
        assert isinstance(from_data, legacy)
        assert not isinstance(torch.ones(1, dtype=dtype), legacy)  # a CPU tensor is not a torch.cuda type
        for target in (legacy, f"torch.cuda.{name}"):
            converted = torch.ones(2).type(target)
            assert (CUDA0, dtype) == (converted.device, converted.dtype)
            assert f"torch.cuda.{name}" == converted.type()
        back = from_data.type(f"torch.{name}")
        assert (torch.device("cpu"), dtype) == (back.device, back.dtype)
        with pytest.raises(RuntimeError, match=MISMATCH):
            torch.ones(3, dtype=dtype) + from_data  # the bug stays a bug


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU, nn.RNN])
def test_recurrent_layers_train_on_pretend_gpus(kind: type[nn.Module]) -> None:
    with pretend_cuda():
        torch.manual_seed(0)
        rnn = kind(4, 8, num_layers=2, batch_first=True).cuda()
        out, _ = rnn(torch.randn(2, 3, 4).cuda())
        out.sum().backward()
        assert {CUDA0} == {p.grad.device for p in rnn.parameters()}
        with pytest.raises(RuntimeError, match=MISMATCH):
            rnn(torch.randn(2, 3, 4))  # a CPU input to a GPU layer still raises


def test_attention_with_dropout_and_a_causal_mask_runs_as_on_a_gpu() -> None:
    with pretend_cuda():
        torch.manual_seed(0)
        q = torch.randn(2, 2, 5, 8, device="cuda", requires_grad=True)
        out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.1, is_causal=True)
        out.sum().backward()
        assert (CUDA0, CUDA0) == (out.device, q.grad.device)
        layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).cuda()
        x = torch.randn(2, 5, 8).cuda()
        mask = nn.Transformer.generate_square_subsequent_mask(5).cuda()
        assert CUDA0 == encoder(x, mask=mask, is_causal=True).device
        encoder.eval()
        with torch.no_grad():  # the fused fast path
            assert CUDA0 == encoder(x).device
        with pytest.raises(RuntimeError, match=MISMATCH):
            F.scaled_dot_product_attention(q, torch.randn(2, 2, 5, 8), q)  # a CPU key is the user's bug
        with pytest.raises(RuntimeError, match=MISMATCH):
            encoder(x, mask=nn.Transformer.generate_square_subsequent_mask(5))  # so is a CPU mask


def test_backward_formulas_that_make_temporaries_run_as_on_a_gpu() -> None:
    # a spatial transformer: affine_grid's backward builds its base grid with grad.options(), which is cuda on a GPU
    with pretend_cuda():
        theta = torch.randn(2, 2, 3, device="cuda", requires_grad=True)
        x = torch.randn(2, 1, 8, 8, device="cuda", requires_grad=True)
        grid = F.affine_grid(theta, list(x.size()), align_corners=False)
        F.grid_sample(x, grid, align_corners=False).sum().backward()
        assert (CUDA0, CUDA0) == (theta.grad.device, x.grad.device)


class _CPUInBackward(torch.autograd.Function):
    """A user's autograd.Function whose backward adds a CPU tensor: it fails on a GPU, so it fails here."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x * 2

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        return grad + torch.ones(grad.shape)


def test_a_users_backward_that_mixes_devices_still_raises() -> None:
    with pretend_cuda():
        x = torch.randn(3, device="cuda", requires_grad=True)
        with pytest.raises(RuntimeError, match=MISMATCH):
            _CPUInBackward.apply(x).sum().backward()


@pytest.mark.parametrize("device_count", [1, 2])
def test_data_parallel_trains_on_pretend_gpus(device_count: int) -> None:
    with pretend_cuda(device_count=device_count):
        torch.manual_seed(0)
        model = nn.DataParallel(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)).cuda())
        for inputs in (torch.randn(6, 4), torch.randn(6, 4).cuda()):  # DataParallel scatters CPU inputs too
            out = model(inputs)
            out.sum().backward()
            assert (CUDA0, (6, 2)) == (out.device, tuple(out.shape))
        assert {CUDA0} == {p.grad.device for p in model.parameters()}


def test_tensor_factories_read_pretend_scalars() -> None:
    with pretend_cuda():
        losses = [torch.tensor(1.5).cuda(), torch.tensor(2.5).cuda()]
        stacked = torch.tensor(losses)
        assert (torch.device("cpu"), [1.5, 2.5]) == (stacked.device, stacked.tolist())  # as torch.tensor does
        assert CUDA0 == torch.tensor([losses[0]], device="cuda").device
        assert CUDA0 == torch.as_tensor([losses[0]], device="cuda").device
        assert CUDA0 == losses[0].new_tensor([1.0, 2.0]).device


def test_cuda_rng_state_round_trips_and_generators_work() -> None:
    with pretend_cuda(device_count=2):
        states = torch.cuda.get_rng_state_all()
        assert 2 == len(states)
        changed = torch.arange(16, dtype=torch.uint8)
        torch.cuda.set_rng_state(changed, 1)
        assert torch.equal(changed, torch.cuda.get_rng_state(1))
        torch.cuda.set_rng_state_all(states)
        assert torch.equal(states[1], torch.cuda.get_rng_state("cuda:1"))
        generator = torch.Generator(device="cuda").manual_seed(0)
        assert isinstance(generator, torch.Generator)
        assert CUDA0 == torch.randn(3, device="cuda", generator=generator).device
        assert isinstance(torch.cuda.memory_summary(), str)
        torch.cuda.ipc_collect()


def test_mixed_precision_fused_optimizers_and_streams_run() -> None:
    with pretend_cuda():
        torch.manual_seed(0)
        model = nn.Linear(4, 2).cuda()
        optimizer = torch.optim.Adam(model.parameters(), fused=True)
        scaler = torch.amp.GradScaler("cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(torch.randn(3, 4, device="cuda")).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            x = torch.ones(2, device="cuda")
        x.record_stream(stream)
        assert CUDA0 == optimizer.state[model.weight]["exp_avg"].device


def test_share_memory_is_a_no_op_on_pretend_gpus_and_hogwild_processes_train() -> None:
    # model.share_memory() once crashed with SIGSEGV (so: a process of its own); fork keeps the pretend GPUs in the
    # child, where the shared model trains
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork")
    code = (
        "import torch, torch.multiprocessing as mp\nfrom torch import nn\n"
        "from ferry.sanitizer.pretend import pretend_cuda\n"
        "def train(model):\n"
        "    model(torch.randn(2, 2).cuda()).sum().backward()\n"
        "    print('child', model.weight.grad.device, flush=True)\n"
        "if __name__ == '__main__':\n"
        "    mp.set_start_method('fork')\n"
        "    with pretend_cuda():\n"
        "        model = nn.Linear(2, 2).cuda()\n"
        "        model.share_memory()\n"
        "        cpu = nn.Linear(2, 2).share_memory()\n"
        "        print(model.weight.device, cpu.weight.is_shared(), flush=True)\n"
        "        p = mp.Process(target=train, args=(model,))\n"
        "        p.start(); p.join()\n"
        "        print('exit', p.exitcode)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert ["cuda:0 True", "child cuda:0", "exit 0"] == result.stdout.split("\n")[:3], result.stderr[-2000:]


def test_everything_patched_is_restored_exactly() -> None:
    import torch.nn.parallel.comm as comm

    before = (torch.device, torch.Generator, torch.Stream, torch._C._nn._parse_to, comm.scatter, torch.cuda.FloatTensor)
    with pretend_cuda():
        assert is_pretend(torch.cuda.FloatTensor([1.0]))
    assert before == (
        torch.device,
        torch.Generator,
        torch.Stream,
        torch._C._nn._parse_to,
        comm.scatter,
        torch.cuda.FloatTensor,
    )
    with pytest.raises(TypeError):
        torch.cuda.FloatTensor([1.0])  # not available on a CPU-only build, as before


def test_ferrys_own_device_functions_see_the_pretend_gpus_as_torch_does(tmp_path) -> None:
    import ferry

    with pretend_cuda(device_count=2):
        assert CUDA0 == ferry.pick_device()
        assert CUDA1 == ferry.pick_device("cuda:1")
        assert ["cuda", "cuda", "cpu"] == [record.type for record in ferry.describe_devices()]
        model = nn.Linear(2, 2)
        optimizer = torch.optim.Adam(model.parameters())
        model(torch.randn(1, 2)).sum().backward()
        optimizer.step()
        ferry.place(model, "cuda:1", optimizer=optimizer)
        assert (CUDA1, CUDA1) == (ferry.module_device(model), optimizer.state[model.weight]["exp_avg"].device)
        batch = ferry.to_device({"x": torch.ones(2, 2)}, "cuda:1")
        assert ferry.check_devices(model, batch["x"]).ok
        assert not ferry.check_devices(model, torch.ones(2, 2)).ok
        # saved as a GPU tensor is, through the host; loaded back onto a pretend GPU
        ferry.save(model.state_dict(), tmp_path / "m.safetensors")
        loaded = ferry.load(tmp_path / "m.safetensors", device="cuda:1")
        assert CUDA1 == loaded["weight"].device
        assert torch.equal(model.weight.cpu(), loaded["weight"].cpu())


def test_the_readme_quickstart_runs_on_pretend_gpus_under_the_sanitizer(tmp_path) -> None:
    import re

    from _support import REPO

    quickstart = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)[0]
    script = tmp_path / "quickstart.py"
    # 30 steps, a checkpoint every 10, instead of 300 and 100: the same code paths, a tenth of the time
    assert "range(start + 1, 301)" in quickstart
    assert "step % 100 == 0" in quickstart
    quickstart = quickstart.replace("range(start + 1, 301)", "range(start + 1, 31)").replace("% 100", "% 10")
    script.write_text(quickstart + "print('resumed at', start, optimizer.state[model[0].weight]['exp_avg'].device)\n")
    command = [sys.executable, "-m", "ferry", "run", "--sanitize", "--pretend", "cuda", str(script)]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path)
    assert 0 == result.returncode, result.stderr[-3000:]
    assert ["cuda:0", "True", "resumed at 0 cuda:0"] == result.stdout.split("\n")[:3], result.stderr[-3000:]
    assert "FRY" not in result.stderr
    assert 3 == len(list((tmp_path / "runs" / "a").glob("step-*")))


def test_pinned_loader_with_workers_formatting_and_state_dict_loading_run_as_on_a_gpu() -> None:
    from torch.utils.data import DataLoader, TensorDataset

    with pretend_cuda():
        loader = DataLoader(
            TensorDataset(torch.randn(8, 3), torch.arange(8)), batch_size=4, num_workers=1, pin_memory=True
        )
        for x, _ in loader:  # the DataLoader pins on a thread of its own
            assert CUDA0 == x.to("cuda", non_blocking=True).device
        accuracy = torch.tensor([75.0], device="cuda")[0]
        assert ("75.00", "75.0") == (f"{accuracy:.2f}", f"{accuracy}")  # as ImageNet's AverageMeter prints
    with ferry_sanitize(pretend="cuda") as report:
        model = nn.Linear(2, 2).cuda()
        model.load_state_dict({k: v.detach().cpu() for k, v in model.state_dict().items()})
        assert CUDA0 == model.weight.device
    assert [] == report.findings


def ferry_sanitize(**kwargs: object):  # type: ignore[no-untyped-def]
    import ferry

    return ferry.sanitize(**kwargs)  # type: ignore[arg-type]


def test_packed_sequences_keep_lengths_and_batch_sizes_on_the_host_and_train() -> None:
    # pack_padded_sequence requires CPU lengths; batch_sizes stay on the host through the RNN and pad_packed_sequence
    with pretend_cuda():
        torch.manual_seed(0)
        embedded = torch.randn(5, 2, 4, device="cuda", requires_grad=True)
        packed = nn.utils.rnn.pack_padded_sequence(embedded, torch.tensor([5, 3]))
        gru = nn.GRU(4, 4, bidirectional=True).cuda()
        out, hidden = gru(packed)
        padded, lengths = nn.utils.rnn.pad_packed_sequence(out)
        (padded.sum() + hidden.sum()).backward()
        assert (CUDA0, "cpu", CUDA0, "cpu") == (
            packed.data.device,
            packed.batch_sizes.device.type,
            out.data.device,
            out.batch_sizes.device.type,
        )
        assert (CUDA0, [5, 3]) == (padded.device, lengths.tolist())
        assert {CUDA0} == {embedded.grad.device, *(p.grad.device for p in gru.parameters())}
        with pytest.raises(RuntimeError, match=MISMATCH):
            gru(torch.randn(5, 2, 4))  # a host input into the GPU layer still fails


def test_the_same_sanitized_program_with_packed_sequences_reports_nothing(tmp_path) -> None:
    script = tmp_path / "packed.py"
    script.write_text(
        "import torch\nfrom torch import nn\n"
        "x = torch.randn(5, 2, 4, device='cuda')\n"
        "packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3]))\n"
        "out, h = nn.LSTM(4, 4).cuda()(packed)\n"
        "print('done', nn.utils.rnn.pad_packed_sequence(out)[0].device)\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "ferry", "run", "--sanitize", "--pretend", "cuda", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "done cuda:0" in run.stdout


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")
def test_torch_tensor_of_a_gpu_tensor_stays_on_its_device() -> None:
    # torch.tensor(data) with no device= copies a tensor where it is (PyTorch's documented rule)
    with pretend_cuda():
        mean = torch.tensor([0.485, 0.456, 0.406]).cuda()
        assert CUDA0 == torch.tensor(mean).device
        assert CUDA0 == torch.as_tensor(mean).device
        assert torch.device("cpu") == torch.tensor(mean, device="cpu").device
        assert torch.device("cpu") == torch.tensor([mean[0], mean[1]]).device  # a list of scalars: read, on the host


@pytest.mark.filterwarnings("ignore:torch.set_default_tensor_type")
def test_legacy_cpu_types_read_gpu_scalars_and_keep_their_type_checks() -> None:
    with pretend_cuda():
        top = torch.tensor([[3], [1], [4]], device="cuda")
        built = torch.LongTensor([[top[i][0] for i in range(3)]])
        assert (torch.device("cpu"), torch.int64, [[3, 1, 4]]) == (built.device, built.dtype, built.tolist())
        assert isinstance(built, torch.LongTensor)
        assert not isinstance(top, torch.LongTensor)
        assert isinstance(top, torch.cuda.LongTensor)
        assert torch.int64 == torch.ones(2).type(torch.LongTensor).dtype
        torch.set_default_tensor_type(torch.DoubleTensor)
        try:
            assert torch.float64 == torch.zeros(1).dtype
        finally:
            torch.set_default_tensor_type(torch.FloatTensor)
    assert torch.LongTensor.__module__ == "torch"
    assert isinstance(torch.zeros(1, dtype=torch.long), torch.LongTensor)


@pytest.mark.filterwarnings("ignore:torch.set_default_tensor_type")
def test_a_cuda_default_tensor_type_puts_new_tensors_on_the_pretend_gpu() -> None:
    """ssd.pytorch's `torch.set_default_tensor_type('torch.cuda.FloatTensor')`: a TypeError on pretend GPUs before."""
    with pretend_cuda():
        torch.set_default_tensor_type("torch.cuda.FloatTensor")
        try:
            assert (CUDA0, torch.float32) == (torch.zeros(2).device, torch.zeros(2).dtype)
            assert CUDA0 == nn.Linear(2, 2).weight.device
            # the legacy constructor too (ssd.pytorch's priors, `torch.Tensor(mean)`), not an explicit CPU type
            assert (CUDA0, CUDA0) == (torch.Tensor([0.5, 0.25]).device, torch.Tensor(2, 3).device)
            assert torch.device("cpu") == torch.FloatTensor([1.0]).device
            # ssd.pytorch's nms: `xx1 = boxes.new()`, then `torch.index_select(x1, 0, idx, out=xx1)`
            boxes = torch.ones(3, device="cuda", dtype=torch.float64)
            assert [CUDA0, CUDA0, CUDA0] == [boxes.new().device, boxes.new(2).device, boxes.new([1.0]).device]
            assert torch.float64 == boxes.new([1.0]).dtype
            assert torch.device("cpu") == boxes.new(2, device="cpu").device
            # `priors.type(type(x.data))`: the default tensor type, whatever class the input is
            made = torch.arange(3).type(type(torch.ones(1).data))
            assert (CUDA0, torch.float32) == (made.device, made.dtype)
            torch.set_default_tensor_type(torch.cuda.DoubleTensor)
            assert (CUDA0, torch.float64) == (torch.ones(1).device, torch.ones(1).dtype)
            with pytest.raises(TypeError, match="floating-point"):
                torch.set_default_tensor_type("torch.cuda.LongTensor")
        finally:
            torch.set_default_tensor_type("torch.FloatTensor")
        assert (torch.device("cpu"), torch.float32) == (torch.ones(1).device, torch.ones(1).dtype)
        assert torch.device("cpu") == torch.Tensor([1.0]).device
    assert torch.device("cpu") == torch.ones(1).device


def test_a_model_moved_while_an_earlier_output_holds_its_graph() -> None:
    # a GPU moves parameters with `param.data = ...`; swapping them fails while a graph holds them: moved anyway,
    # tied weights still tied
    with pretend_cuda():
        embedding = nn.Embedding(5, 4)
        head = nn.Linear(4, 5, bias=False)
        head.weight = embedding.weight
        net = nn.Sequential(embedding, nn.Linear(4, 4), head)
        kept = net(torch.tensor([[1, 2]]))  # keeps the graph, and so the parameters, alive
        net.to("cuda")
        assert net[0].weight is net[2].weight
        assert {CUDA0} == {p.device for p in net.parameters()}
        out = net(torch.tensor([[1, 2]], device="cuda"))
        out.sum().backward()
        assert (CUDA0, CUDA0) == (out.device, net[1].weight.grad.device)
        assert kept.device.type == "cpu"


def test_frozen_parameters_moved_while_a_graph_holds_them_stay_the_optimizers() -> None:
    # pix2pix: `requires_grad = False` on the discriminator while its losses are alive, then `net.cpu()` and
    # `net.cuda()` to save: a GPU keeps the Parameter objects (`param.data = moved`), so the optimizer still trains
    # them, and they stay frozen
    with pretend_cuda():
        net = nn.Linear(2, 2).to("cuda")
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        kept = net(torch.ones(1, 2, device="cuda"))
        for p in net.parameters():
            p.requires_grad = False
        weight = net.weight
        net.cpu()
        net.cuda(0)
        assert net.weight is weight
        assert [False, False] == [p.requires_grad for p in net.parameters()]
        for p in net.parameters():
            p.requires_grad = True
        before = net.weight.detach().clone()
        net(torch.ones(1, 2, device="cuda")).sum().backward()
        optimizer.step()
        assert not torch.equal(before, net.weight.detach())
        assert kept.device == CUDA0


def test_saved_parameters_and_tensors_load_back_with_requires_grad() -> None:
    import io

    def round_trip(obj: object, **kwargs: object) -> object:
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        buffer.seek(0)
        return torch.load(buffer, weights_only=False, **kwargs)  # type: ignore[arg-type]

    with pretend_cuda():
        parameter = nn.Parameter(torch.ones(2, device="cuda"))
        loaded = round_trip(parameter)
        assert isinstance(loaded, nn.Parameter)
        assert (CUDA0, True, True) == (loaded.device, loaded.requires_grad, loaded.is_leaf)
        on_host = round_trip(parameter, map_location="cpu")
        assert isinstance(on_host, nn.Parameter)
        assert (torch.device("cpu"), True) == (on_host.device, on_host.requires_grad)
        leaf = round_trip(torch.ones(2, device="cuda", requires_grad=True))
        assert (CUDA0, True, True) == (leaf.device, leaf.requires_grad, leaf.is_leaf)  # type: ignore[union-attr]
        model = round_trip(nn.Linear(3, 2).cuda(), map_location="cuda:0")
        assert [(CUDA0, True)] * 2 == [(p.device, p.requires_grad) for p in model.parameters()]  # type: ignore[union-attr]
        model(torch.ones(1, 3, device="cuda")).sum().backward()  # type: ignore[operator]


def test_one_hot_ctc_quantile_combinations_and_type_as_run_as_on_a_gpu() -> None:
    with pretend_cuda():
        index = torch.tensor([0, 2, 1], device="cuda")
        assert (CUDA0, (3, 3)) == (F.one_hot(index).device, tuple(F.one_hot(index).shape))
        assert CUDA0 == F.one_hot(index, 5).device
        log_probs = torch.randn(6, 2, 4, device="cuda").log_softmax(2)
        targets = torch.randint(1, 4, (2, 3), device="cuda")
        assert CUDA0 == F.ctc_loss(log_probs, targets, torch.tensor([6, 6]), torch.tensor([3, 2])).device
        # targets on the host, as floats (the AssemblyAI speech tutorial's `torch.Tensor(labels)`): PyTorch's native
        # CUDA path converts them with `targets.to(log_probs.device, torch.long)`
        host_targets = torch.tensor([[1.0, 2.0, 3.0], [2.0, 3.0, 1.0]])
        assert CUDA0 == nn.CTCLoss()(log_probs, host_targets, torch.tensor([6, 6]), torch.tensor([3, 2])).device
        assert CUDA0 == F.ctc_loss(log_probs, host_targets.long(), [6, 6], [3, 2]).device
        assert CUDA0 == torch.quantile(torch.randn(4, 5, device="cuda"), 0.5).device
        assert CUDA0 == torch.combinations(index).device
        # `type_as` is `self.type(other.type())`: a CPU tensor typed as a CUDA one moves to the GPU
        typed = torch.ones(1, 1).type_as(index)
        assert (CUDA0, torch.long) == (typed.device, typed.dtype)
        with pytest.raises(RuntimeError, match="same device"):
            F.one_hot(index) + torch.ones(3, 3, dtype=torch.long)  # a user's CPU tensor still raises


def test_a_torch_size_given_to_legacy_constructors_stays_sizes_on_the_pretend_gpu() -> None:
    """Beta-VAE's `std.data.new(std.size()).normal_()`: a torch.Size is sizes, not data (shape (2,) before)."""
    with pretend_cuda():
        std = torch.rand(8, 4, device="cuda")
        eps = std.data.new(std.size()).normal_()
        assert (CUDA0, (8, 4)) == (eps.device, tuple(eps.shape))
        assert (8, 4) == tuple((std * eps).shape)
        assert (8, 4) == tuple(torch.cuda.FloatTensor(std.size()).shape)
        assert (2,) == tuple(std.new((8, 4)).shape)  # a plain tuple is data, as on a real GPU


def test_a_zero_dim_cpu_tensor_written_in_place_with_a_gpu_value_raises() -> None:
    """`a = torch.tensor(2.)` then `a += b` with `b` on a GPU raises there (pytorch#40986); as an input it mixes."""
    with pretend_cuda():
        b = torch.ones(3, device="cuda").sum()
        a = torch.tensor(0.0)
        with pytest.raises(RuntimeError, match="same device"):
            a += b
        assert CUDA0 == (torch.tensor(2.0) * b).device
        c = b.clone()
        c += torch.tensor(1.0)
        assert CUDA0 == c.device
