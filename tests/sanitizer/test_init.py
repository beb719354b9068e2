import importlib.util
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import ferry
from ferry.sanitizer import Sanitizer


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(4, 4)

    def forward(self, x):
        return self.attn(x)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()

    def forward(self, x):
        return self.encoder(x)


def test_mismatch_in_a_module_names_everything():
    model = Model()
    model.encoder.layers[3].to("meta")
    inputs = torch.randn(2, 4)
    with pytest.raises(ferry.DeviceMismatchError) as caught, ferry.sanitize():
        model(inputs)
    error = caught.value
    assert "torch.nn.functional.linear" == error.operation
    assert "encoder.layers.3.attn" == error.module_path
    assert [
        ("x", "cpu", (2, 4), "float32"),
        ("encoder.layers.3.attn.weight", "meta", (4, 4), "float32"),
        ("encoder.layers.3.attn.bias", "meta", (4,), "float32"),
    ] == error.arguments
    assert "meta" == error.expected
    assert [("x", "cpu")] == error.mismatches
    assert "return self.attn(x)" == error.source
    assert error.location.endswith(f"test_init.py:{Block.forward.__code__.co_firstlineno + 1}")
    assert "x = x.to('meta')" == error.fix
    assert "return self.attn(x)" in str(error)
    assert "x = x.to('meta')" in str(error)


def test_mismatch_fix_uses_the_variable_names():
    outputs = torch.randn(3, device="meta")
    labels = torch.randn(3)
    with pytest.raises(ferry.DeviceMismatchError) as caught, ferry.sanitize():
        outputs - labels
    error = caught.value
    assert "labels = labels.to(outputs.device)" == error.fix
    assert error.module_path is None
    assert [("outputs", "meta", (3,), "float32"), ("labels", "cpu", (3,), "float32")] == error.arguments
    assert "outputs - labels" == error.source


def test_mismatch_inside_lists_and_kwargs():
    a, b = torch.randn(2, device="meta"), torch.randn(2)
    with pytest.raises(ferry.DeviceMismatchError), ferry.sanitize():
        torch.cat([a, b])
    with pytest.raises(ferry.DeviceMismatchError), ferry.sanitize():
        torch.add(a, other=b)


def test_zero_dim_cpu_tensors_mix_with_any_device():
    with ferry.sanitize() as report:
        out = torch.randn(3, device="meta") * torch.tensor(2.0)
        out = torch.randn(3) * torch.tensor(2.0)
    assert [] == report.findings
    assert (3,) == tuple(out.shape)


def test_a_zero_dim_cpu_tensor_written_in_place_does_not_mix():
    """`loss = torch.tensor(0.)`, then `loss += value` of a device value (TS2Vec's loss): PyTorch raises (#40986)."""
    value = torch.randn(3, device="meta").sum()
    loss = torch.tensor(0.0)
    with pytest.raises(ferry.DeviceMismatchError) as caught, ferry.sanitize():
        loss += value
    error = caught.value
    assert [("loss", "cpu")] == error.mismatches
    assert "loss = loss.to(value.device)" == error.fix
    assert "only as inputs" in str(error)
    with ferry.sanitize() as report:  # the other way round it is an input: fine
        total = torch.randn(3, device="meta").sum()
        total += torch.tensor(1.0)
        total.mul_(torch.tensor(2.0))
    assert [] == report.findings


def test_warn_mode_warns_and_runs_on():
    a, b = torch.randn(2, device="meta"), torch.randn(2)
    with (
        pytest.warns(ferry.SanitizerWarning, match="device mismatch"),
        ferry.sanitize(on_error="warn") as report,
        pytest.raises(RuntimeError),  # PyTorch's own error, after the warning
    ):
        torch.stack([a, b])
    assert ["input-on-other-device"] == [f.kind for f in report.findings]


def test_breakpoint_mode_calls_the_breakpoint_hook(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: calls.append(1))
    a, b = torch.randn(2, device="meta"), torch.randn(2)
    with ferry.sanitize(on_error="breakpoint"), pytest.raises(RuntimeError):
        torch.stack([a, b])
    assert [1] == calls
    assert "device mismatch" in capsys.readouterr().err


def test_bad_on_error_is_an_argument_error():
    with pytest.raises(ferry.ArgumentError):
        ferry.sanitize(on_error="ignore")  # type: ignore[arg-type]


def test_cpu_factory_in_forward_warns_once_per_line():
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            mask = torch.ones(4)  # the bug: on the CPU while the module is on meta
            return self.proj(x), mask

    model = Masked().to("meta")
    with (  # noqa: PT031  # two calls: the second must not warn again
        pytest.warns(ferry.SanitizerWarning, match=r"torch\.ones built a CPU tensor") as caught,
        ferry.sanitize() as report,
    ):
        for _ in range(2):  # the second call must not warn again
            model(torch.randn(2, 4, device="meta"))
    assert 1 == len(caught)
    line = Masked.forward.__code__.co_firstlineno + 1
    assert [("device-less-tensor-in-forward", line, 2)] == [(f.kind, f.where.line, f.count) for f in report.findings]


def test_zero_dim_constant_in_forward_is_fine():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            scale = torch.tensor(8.0).sqrt()  # 0-dim: mixes with any device, as in PyTorch
            return self.proj(x) / scale

    with ferry.sanitize(strict=True) as report:
        Scaled().to("meta")(torch.randn(2, 4, device="meta"))
    assert [] == report.findings


def test_cpu_factory_in_a_cpu_module_is_fine():
    with ferry.sanitize() as report:
        Block()(torch.randn(2, 4))
    assert [] == report.findings


def test_unavailable_device_is_reported_at_the_users_line():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ferry.DeviceError, match="this machine has no cuda") as caught, ferry.sanitize():
        torch.zeros(2, device="cuda")
    line = test_unavailable_device_is_reported_at_the_users_line.__code__.co_firstlineno + 4
    assert f'test_init.py:{line}: `torch.zeros(2, device="cuda")`' in str(caught.value)
    assert "cuda" == caught.value.requested


def test_module_cuda_without_cuda_is_reported_at_the_users_line():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    model = nn.Linear(2, 2)
    # Module.cuda() calls `t.cuda(None)` for each tensor
    with pytest.raises(ferry.DeviceError, match="this machine has no cuda") as caught, ferry.sanitize():
        model.cuda()
    line = test_module_cuda_without_cuda_is_reported_at_the_users_line.__code__.co_firstlineno + 6
    assert f"test_init.py:{line}: `model.cuda()`" in str(caught.value)


def test_load_onto_an_unavailable_device_is_reported_at_the_users_line(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    device = torch.device("cuda")  # MAML's test script with its availability check left out
    no_cuda = r"torch\.load\(map_location=\.\.\.\) .*no cuda"
    with pytest.raises(ferry.DeviceError, match=no_cuda) as caught, ferry.sanitize():
        torch.load(path, map_location=device)
    line = test_load_onto_an_unavailable_device_is_reported_at_the_users_line.__code__.co_firstlineno + 8
    assert f"test_init.py:{line}: `torch.load(path, map_location=device)`" in str(caught.value)
    assert "`torch.load(f, map_location=ferry.pick_device())`" in str(caught.value)
    with ferry.sanitize() as report:
        assert [1.0, 1.0] == torch.load(path, map_location="cpu")["w"].tolist()
        assert [1.0, 1.0] == torch.load(path, map_location={"cuda:0": "cpu"})["w"].tolist()
    assert [] == report.findings


def test_no_mode_is_installed_when_not_enabled():
    assert 0 == torch._C._len_torch_function_stack()
    with ferry.sanitize():
        assert 1 == torch._C._len_torch_function_stack()
    assert 0 == torch._C._len_torch_function_stack()
    assert not torch.nn.modules.module._global_forward_pre_hooks


@pytest.mark.parametrize(
    ("environ", "expected"), [({}, "0"), ({"FERRY_SANITIZE": "0"}, "0"), ({"FERRY_SANITIZE": "1"}, "1")]
)
def test_env_var_enables_it_for_the_process(environ, expected):
    code = "import torch, ferry; print(torch._C._len_torch_function_stack())"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("FERRY_")}
    done = subprocess.run(
        [sys.executable, "-c", code], env={**env, **environ}, capture_output=True, text=True, check=True
    )
    assert expected == done.stdout.strip()


def test_env_var_on_error_warn_and_summary_at_exit(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import torch, ferry\nx = torch.ones(2)\nx.to('meta')\n")
    env = {**__import__("os").environ, "FERRY_SANITIZE": "1", "FERRY_ON_ERROR": "warn"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert f"{script}:3: SanitizerWarning: result of Tensor.to() discarded" in done.stderr


def test_sanitizer_leaves_warnings_filters_alone():
    with warnings.catch_warnings(record=True), Sanitizer(on_error="warn"):
        pass


# --- pretend="cuda": the checks against pretend GPUs on this CPU-only machine ----------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_pretend_cuda_mismatch_is_reported_with_the_fix():
    model = Encoder()
    with ferry.sanitize(pretend="cuda"):
        model.cuda()
        x = torch.randn(2, 4)
        with pytest.raises(ferry.DeviceMismatchError) as caught:
            model(x)
    assert caught.value.mismatches == [("x", "cpu")]
    assert caught.value.expected == "cuda:0"
    assert caught.value.module_path == "layers.0.attn"
    # x was passed to the model on the CPU: the caller's line is reported and fixed, not the op deep inside forward
    line = test_pretend_cuda_mismatch_is_reported_with_the_fix.__code__.co_firstlineno + 7
    assert caught.value.location == f"{__file__}:{line}"
    assert caught.value.fix == f"x = x.to('cuda:0')  # before model(...) at {__file__}:{line}"
    assert not torch.cuda.is_available()  # restored on exit


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_a_loss_modules_cpu_weight_is_the_tensor_to_move_not_the_logits():
    with ferry.sanitize(pretend="cuda"):
        logits = torch.randn(5, 3, device="cuda")
        labels = torch.randint(0, 3, (5,), device="cuda")
        criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0]))
        with pytest.raises(ferry.DeviceMismatchError) as caught:
            criterion(logits, labels)
    assert caught.value.expected == "cuda:0"
    assert caught.value.mismatches == [("weight", "cpu")]
    assert (
        caught.value.fix
        == "criterion.to(logits.device)  # weight is a parameter or buffer of it: move the whole module"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_pretend_cuda_is_not_an_unavailable_device_inside_and_is_after():
    with ferry.sanitize(pretend="cuda", device_count=2) as report:
        x = torch.ones(2, device="cuda:1")
        y = torch.zeros(2).to("cuda")
    assert (x.device, y.device) == (torch.device("cuda:1"), torch.device("cuda:0"))
    assert report.findings == []
    with ferry.sanitize(), pytest.raises(ferry.DeviceError, match="no cuda"):
        torch.ones(2, device="cuda")
    with ferry.sanitize(pretend="cuda") as report:  # and available again in a new block
        torch.ones(2, device="cuda")
    assert report.findings == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_pretend_cuda_host_syncs_are_counted():
    with ferry.sanitize(pretend="cuda") as report:
        loss = torch.ones(3, device="cuda").sum()
        for _ in range(3):
            loss.item()
        torch.ones(3).sum().item()  # a CPU tensor: no sync
    assert sorted(report.host_syncs.values()) == [3]


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_host_syncs_inside_an_installed_trainer_are_not_the_users(tmp_path):
    # Lightning's own `if total_length == 0:` on a device tensor is not a line the user can change
    package = tmp_path / "lib" / "python3" / "site-packages" / "some_trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("def log(value):\n    return value.item()\n")
    spec = importlib.util.spec_from_file_location("some_trainer", package / "__init__.py")
    assert spec is not None
    assert spec.loader is not None
    trainer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trainer)
    with ferry.sanitize(pretend="cuda") as report:
        loss = torch.ones(3, device="cuda").sum()
        for _ in range(2):
            trainer.log(loss)
        loss.item()
    assert [__file__] == [where.file for where in report.host_syncs]
    assert [1] == list(report.host_syncs.values())


@pytest.mark.parametrize("pretend", ["mps", "CUDA", "cuda:0", ""])
def test_pretend_other_devices_are_refused_with_the_fix(pretend):
    with pytest.raises(ferry.ArgumentError, match='pretend="cuda"'):
        ferry.sanitize(pretend=pretend)


def test_pretend_device_count_below_one_is_refused():
    with pytest.raises(ferry.ArgumentError, match="at least one GPU"):
        ferry.sanitize(pretend="cuda", device_count=0)


def test_numpy_of_a_device_tensor_raises_ferrys_error_first():
    with ferry.sanitize(pretend="cuda") as report:
        dist = torch.ones(3, device="cuda")
        with pytest.raises(ferry.DeviceError, match=r"dist\.cpu\(\)\.numpy\(\)"):
            dist.numpy()
    line = test_numpy_of_a_device_tensor_raises_ferrys_error_first.__code__.co_firstlineno + 4
    assert [("numpy-of-device-tensor", line)] == [(f.kind, f.where.line) for f in report.findings]


def test_numpy_of_a_device_tensor_warns_then_pytorchs_error():
    with (
        pytest.warns(ferry.SanitizerWarning, match="numpy-of-device-tensor"),
        ferry.sanitize(on_error="warn", pretend="cuda"),
        pytest.raises(TypeError, match="can't convert cuda:0"),
    ):
        torch.ones(3, device="cuda").numpy()
    with ferry.sanitize(pretend="cuda") as report:
        assert [1.0] == torch.ones(1, device="cuda").cpu().numpy().tolist()
        assert [1.0] == torch.ones(1, device="cuda").numpy(force=True).tolist()
    assert [] == report.findings


def _make_mask(n):
    return torch.from_numpy(np.ones((n, n), dtype="uint8")) == 1  # the bug: a CPU tensor, from a helper


def test_cpu_tensor_from_a_helper_in_forward_is_reported_at_the_creation_line():
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x), _make_mask(4)

    model = Masked().to("meta")
    with ferry.sanitize() as report, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # the second call must not warn again
            model(torch.randn(2, 4, device="meta"))
    assert 1 == len(caught)
    assert "from_numpy" in str(caught[0].message)
    line = _make_mask.__code__.co_firstlineno + 1
    assert [("device-less-tensor-in-forward", line, 2)] == [(f.kind, f.where.line, f.count) for f in report.findings]


def test_mismatch_with_a_cpu_tensor_a_helper_built_names_the_bug():
    def combine(x):
        return x & _make_mask(2)

    with ferry.sanitize(on_error="warn", pretend="cuda") as report, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            combine(torch.ones(2, 2, dtype=torch.bool, device="cuda"))
    line = combine.__code__.co_firstlineno + 1
    kinds = {(f.kind, f.where.line) for f in report.findings}
    assert {("device-less-tensor-in-forward", line), ("input-on-other-device", line)} == kinds
    with ferry.sanitize(pretend="cuda"), pytest.raises(ferry.DeviceMismatchError, match="without a device"):
        combine(torch.ones(2, 2, dtype=torch.bool, device="cuda"))  # on_error=raise: the cause is in the error


def test_layer_built_inside_forward_is_reported():
    class Conv(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 4, 3)

        def forward(self, x):
            return nn.BatchNorm2d(4)(self.c(x))

    with ferry.sanitize(on_error="warn", pretend="cuda") as report, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            Conv().cuda()(torch.rand(1, 3, 8, 8, device="cuda"))
    line = Conv.forward.__code__.co_firstlineno + 1
    built = [f for f in report.findings if f.kind == "device-less-tensor-in-forward"]
    assert [line] == [f.where.line for f in built]
    assert "BatchNorm2d is constructed" in built[0].message


def _head():
    return nn.Sequential(nn.Linear(4, 4), nn.Dropout(), nn.Linear(4, 2))


def test_loaded_model_run_without_eval_is_reported():
    with ferry.sanitize() as report, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        head = _head()
        head.load_state_dict(_head().state_dict())  # watched: loads made while the sanitizer is on
        with torch.no_grad():
            head(torch.randn(1, 4))
    assert "model.eval()" in str(caught[0].message)
    line = test_loaded_model_run_without_eval_is_reported.__code__.co_firstlineno + 6
    assert [("inference-in-train-mode", line)] == [(f.kind, f.where.line) for f in report.findings]


def test_a_whole_model_from_torch_load_run_without_eval_is_reported(tmp_path):
    path = tmp_path / "checkpoint.pth"
    torch.save({"epoch": 3, "generator": _head()}, path)  # a checkpoint that pickles the whole model
    with ferry.sanitize() as report, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        generator = torch.load(path, weights_only=False)["generator"]
        with torch.no_grad():
            generator(torch.randn(1, 4))
        fine = torch.load(path, weights_only=False)["generator"]
        fine.eval()
        with torch.no_grad():
            fine(torch.randn(1, 4))
        resumed = torch.load(path, weights_only=False)["generator"]
        for _ in range(2):  # training resumed: a backward follows each forward
            resumed(torch.randn(1, 4)).sum().backward()
    assert "after torch.load" in str(caught[0].message)
    line = test_a_whole_model_from_torch_load_run_without_eval_is_reported.__code__.co_firstlineno + 7
    assert [("inference-in-train-mode", line)] == [(f.kind, f.where.line) for f in report.findings]


class _Seq2Seq(nn.Module):
    """A model used through its own methods (the translation example's ``greedy_decode``): no root forward."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 4), nn.Dropout())
        self.decoder = nn.Linear(4, 2)

    def encode(self, x):
        return self.encoder(x)

    def decode(self, memory):
        return self.decoder(memory)


def test_a_loaded_model_run_through_its_own_methods_without_eval_is_reported():
    with ferry.sanitize() as report, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _Seq2Seq()
        model.load_state_dict(_Seq2Seq().state_dict())
        with torch.no_grad():
            model.decode(model.encode(torch.randn(1, 4)))
        fine = _Seq2Seq()
        fine.load_state_dict(_Seq2Seq().state_dict())
        fine.eval()  # reaches every submodule
        with torch.no_grad():
            fine.decode(fine.encode(torch.randn(1, 4)))
    # reported where the encoder runs (in `encode`); the decoder has no Dropout
    assert [("inference-in-train-mode", _Seq2Seq.encode.__code__.co_firstlineno + 1)] == [
        (f.kind, f.where.line) for f in report.findings
    ]


def test_loaded_model_without_backward_is_reported_at_the_next_call():
    with ferry.sanitize() as report, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        head = _head()
        head.load_state_dict(_head().state_dict())
        for _ in range(3):
            head(torch.randn(1, 4))
    line = test_loaded_model_without_backward_is_reported_at_the_next_call.__code__.co_firstlineno + 6
    assert [("inference-in-train-mode", line, 1)] == [(f.kind, f.where.line, f.count) for f in report.findings]


def test_resumed_training_and_eval_are_not_reported():
    with ferry.sanitize() as report:
        head = _head()
        head.load_state_dict(_head().state_dict())
        for _ in range(3):  # resuming training: a backward follows each forward
            head(torch.randn(1, 4)).sum().backward()
        other = _head()
        other.load_state_dict(_head().state_dict())
        other.eval()
        with torch.no_grad():
            other(torch.randn(1, 4))
        _head()(torch.randn(1, 4))  # no weights loaded: a fresh model in training mode
    assert [] == report.findings


def _train_steps(model, steps=2):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()


def test_evaluation_after_training_without_eval_is_reported():
    with ferry.sanitize() as report, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        head = _head()
        head.train()
        _train_steps(head)
        with torch.no_grad():
            for _ in range(3):
                head(torch.randn(1, 4))
    assert "model.eval()" in str(caught[0].message)
    assert "after it trained" in str(caught[0].message)
    line = test_evaluation_after_training_without_eval_is_reported.__code__.co_firstlineno + 8
    assert [("inference-in-train-mode", line)] == [(f.kind, f.where.line) for f in report.findings]


def test_evaluation_in_the_mode_chosen_after_training_is_not_reported():
    with ferry.sanitize() as report:
        head = _head()
        _train_steps(head)
        head.eval()
        with torch.no_grad():
            head(torch.randn(1, 4))
        head.train()
        _train_steps(head)
        head.train(mode=True)  # chosen on purpose (Monte Carlo dropout): no finding
        with torch.no_grad():
            head(torch.randn(1, 4))
        norm = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
        _train_steps(norm)
        with torch.no_grad():  # BatchNorm only: recomputing statistics, sampling a generator
            norm(torch.randn(2, 4))
        fresh = _head()
        with torch.no_grad():  # never trained here
            fresh(torch.randn(1, 4))
    assert [] == report.findings


def _validate(model, batches):
    total = 0.0
    for x, y in batches:
        total += nn.functional.cross_entropy(model(x), y).item()  # grad enabled: validation as many scripts write it
    return total


def _train_and_validate(model, batches):
    _train_steps(model)
    return _validate_in_eval_mode(model, batches)


def _validate_in_eval_mode(model, batches):
    model.eval()
    return _validate(model, batches)


def test_validation_with_grad_enabled_after_training_is_reported_by_its_function_name():
    batches = [(torch.randn(2, 4), torch.tensor([0, 1]))]
    with warnings.catch_warnings(record=True), ferry.sanitize() as report:  # reported when the block ends
        warnings.simplefilter("always")
        head = _head()
        _train_steps(head)
        _validate(head, batches)  # still in training mode: Dropout active
    line = _validate.__code__.co_firstlineno + 3
    assert [("inference-in-train-mode", line)] == [(f.kind, f.where.line) for f in report.findings]
    assert "from `_validate` (evaluation, no backward followed)" in report.findings[0].message
    with warnings.catch_warnings(record=True), ferry.sanitize() as report:
        warnings.simplefilter("always")
        head = _head()
        _train_steps(head)
        _validate(head, batches * 3)  # several batches: reported at the second call
        assert 1 == len(report.findings)


def test_validation_in_eval_mode_and_steps_written_in_a_test_function_are_not_reported():
    batches = [(torch.randn(2, 4), torch.tensor([0, 1]))]
    with ferry.sanitize() as report:
        head = _head()
        _train_and_validate(head, batches)  # eval() first
        head.train()
        _train_steps(head)
        for _ in range(2):  # steps written in this function (named for testing): a backward follows each call
            head(torch.randn(2, 4)).sum().backward()
        fresh = _head()
        _validate(fresh, batches)  # never trained here
    assert [] == report.findings


def test_data_parallel_state_dict_is_reported_before_pytorchs_error():
    saved = nn.DataParallel(nn.Linear(2, 1)).state_dict()
    model = nn.Linear(2, 1)
    with ferry.sanitize() as report, pytest.raises(ferry.StateDictMismatchError, match=r"ferry\.load_state_dict"):
        model.load_state_dict(saved)
    line = test_data_parallel_state_dict_is_reported_before_pytorchs_error.__code__.co_firstlineno + 4
    assert [("data-parallel-state-dict", line)] == [(f.kind, f.where.line) for f in report.findings]
    assert nn.Module.load_state_dict.__module__ == "torch.nn.modules.module"  # restored
    with ferry.sanitize() as report:
        model.load_state_dict(nn.Linear(2, 1).state_dict())
        ferry.load_state_dict(model, saved)
        nn.DataParallel(model).load_state_dict(saved)
    assert [] == report.findings


def test_an_accelerator_index_into_a_cpu_tensor_is_a_mismatch_and_a_cpu_index_into_a_gpu_tensor_is_not():
    with ferry.sanitize(pretend="cuda", on_error="warn") as report, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        labels = torch.tensor([0, 1]).to("cuda")
        host = torch.zeros(2, 3)
        with pytest.raises(RuntimeError, match="indices should be either on cpu"):
            host[range(2), labels] = 1.0  # the forward-forward example's one-hot, with labels left on the GPU
        gpu = torch.zeros(2, 3).cuda()
        gpu[torch.tensor([0, 1])] = 2.0
        gpu[torch.tensor([0, 1]), torch.tensor([1, 2])]
    line = test_an_accelerator_index_into_a_cpu_tensor_is_a_mismatch_and_a_cpu_index_into_a_gpu_tensor_is_not
    assert [("input-on-other-device", line.__code__.co_firstlineno + 6)] == [
        (f.kind, f.where.line) for f in report.findings
    ]


def _norm_net() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def test_batchnorm_model_scored_in_training_mode_after_training_is_reported():
    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        net = _norm_net()
        _train_steps(net)
        targets = torch.tensor([0, 1, 2, 1])
        with torch.no_grad():
            outputs = net(torch.randn(4, 4))
            _, predicted = outputs.max(1)
            correct = predicted.eq(targets).sum().item()
    assert correct >= 0
    line = test_batchnorm_model_scored_in_training_mode_after_training_is_reported.__code__.co_firstlineno + 7
    assert [("inference-in-train-mode", line)] == [(f.kind, f.where.line) for f in report.findings]
    assert "scored (eq)" in report.findings[0].message


def test_loaded_model_wrapped_in_data_parallel_predicting_in_training_mode_is_reported():
    # DeepLabV3+'s `--test_only`: weights restored, then `model = nn.DataParallel(model)`; the wrapper is the root
    # module called for prediction, and runs the loaded model in training mode unless `model.eval()` came first
    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        net = _norm_net()
        net.load_state_dict(_norm_net().state_dict())
        wrapped = nn.DataParallel(net)
        with torch.no_grad():
            wrapped(torch.randn(4, 4))
        checked = _norm_net()
        checked.load_state_dict(net.state_dict())
        checked = nn.DataParallel(checked)
        checked.eval()
        with torch.no_grad():
            checked(torch.randn(4, 4))
    line = test_loaded_model_wrapped_in_data_parallel_predicting_in_training_mode_is_reported.__code__.co_firstlineno
    assert [("inference-in-train-mode", line + 9)] == [(f.kind, f.where.line) for f in report.findings]
    assert "DataParallel is called" in report.findings[0].message


def test_batchnorm_model_whose_evaluation_forward_fails_in_training_mode_is_reported():
    # DeepLabV3+'s `validate` without `model.eval()`: one image reaches a BatchNorm after global pooling, which in
    # training mode raises before any output can be scored; the training mode is the cause, and the report says so
    pooled = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Unflatten(1, (8, 1)), nn.BatchNorm1d(8))
    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        _train_steps(pooled)
        with torch.no_grad(), pytest.raises(ValueError, match="more than 1 value per channel"):
            pooled(torch.randn(1, 4))
        pooled.eval()
        with torch.no_grad():
            pooled(torch.randn(1, 4))
    line = test_batchnorm_model_whose_evaluation_forward_fails_in_training_mode_is_reported.__code__.co_firstlineno + 8
    assert [("inference-in-train-mode", line)] == [(f.kind, f.where.line) for f in report.findings]
    assert "its forward failed (Expected more than 1 value per channel" in report.findings[0].message


def test_batchnorm_model_with_a_loss_under_no_grad_is_reported_and_sampling_is_not():
    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        generator = _norm_net()
        _train_steps(generator)
        with torch.no_grad():  # sampling a generator in training mode (the DCGAN tutorial): left alone
            fake = generator(torch.randn(4, 4)).detach().cpu()
            grid = torch.cat([fake, fake]) * 0.5 + 0.5
        assert grid.shape == (8, 3)
        recalibrated = _norm_net()
        _train_steps(recalibrated)
        recalibrated[1].momentum = None  # recomputing the statistics on purpose (swa_utils.update_bn)
        with torch.no_grad():
            out = recalibrated(torch.randn(4, 4))
            nn.functional.mse_loss(out, torch.zeros(4, 3))
        evaluated = _norm_net()
        _train_steps(evaluated)
        with torch.no_grad():
            loss = nn.CrossEntropyLoss()(evaluated(torch.randn(4, 4)), torch.tensor([0, 1, 2, 0]))
    assert loss.dim() == 0
    line = test_batchnorm_model_with_a_loss_under_no_grad_is_reported_and_sampling_is_not.__code__.co_firstlineno
    assert [("inference-in-train-mode", line + 18)] == [(f.kind, f.where.line) for f in report.findings]


def _gan_steps(generator: nn.Module, steps: int) -> None:
    """A GAN's steps: the discriminator on `with torch.no_grad(): fake = generator(z)`, then the generator."""
    discriminator = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(8, 1))
    opt_d = torch.optim.SGD(discriminator.parameters(), lr=0.1)
    opt_g = torch.optim.SGD(generator.parameters(), lr=0.1)
    bce = nn.BCEWithLogitsLoss()
    for _ in range(steps):
        with torch.no_grad():  # the generator stays in training mode on purpose
            fake = generator(torch.randn(4, 4))
        real = bce(discriminator(torch.randn(4, 3)), torch.ones(4, 1))
        d_loss = real + bce(discriminator(fake), torch.zeros(4, 1))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = bce(discriminator(generator(torch.randn(4, 4))), torch.ones(4, 1))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()


def test_generator_output_for_a_discriminator_step_is_not_reported():
    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        _gan_steps(_norm_net(), 3)
        evaluated = _norm_net()
        _train_steps(evaluated)
        with torch.no_grad():  # still reported: scored by a loss directly
            nn.functional.cross_entropy(evaluated(torch.randn(4, 4)), torch.tensor([0, 1, 2, 0]))
    line = test_generator_output_for_a_discriminator_step_is_not_reported.__code__.co_firstlineno
    assert [("inference-in-train-mode", line + 7)] == [(f.kind, f.where.line) for f in report.findings]


class _SwitchesItsOwnMode(nn.Module):
    """Tacotron's forward: `self.eval()` when it makes ground-truth-aligned features, else `self.train()`."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))

    def forward(self, x: torch.Tensor, generate_gta: bool = False) -> torch.Tensor:
        if generate_gta:
            self.eval()
        else:
            self.train()
        return self.net(x)


def test_a_forward_that_switches_its_own_mode_decides_it():
    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        model = _SwitchesItsOwnMode()
        model.load_state_dict(_SwitchesItsOwnMode().state_dict())
        with torch.no_grad():
            model(torch.randn(4, 4), generate_gta=True)  # switched to eval() by its forward: meant
        other = _SwitchesItsOwnMode()
        other.load_state_dict(model.state_dict())
        with torch.no_grad():
            other(torch.randn(4, 4))  # switched to train() by its forward: inference in training mode
    line = test_a_forward_that_switches_its_own_mode_decides_it.__code__.co_firstlineno
    assert [("inference-in-train-mode", line + 10)] == [(f.kind, f.where.line) for f in report.findings]


def test_batchnorm_model_scored_by_a_loss_module_of_the_users_is_reported():
    # Real NVP's test() without net.eval(): `loss = loss_fn(z, sldj)` with `loss_fn = RealNVPLoss()` under no_grad

    class RealNVPLoss(nn.Module):
        def forward(self, z, sldj):
            return (z.pow(2).sum(1) - sldj).mean()

    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        net = _norm_net()
        _train_steps(net)
        loss_fn = RealNVPLoss()
        with torch.no_grad():
            z = net(torch.randn(4, 4))
            loss = loss_fn(z, torch.zeros(4))
    assert loss.dim() == 0
    line = test_batchnorm_model_scored_by_a_loss_module_of_the_users_is_reported.__code__.co_firstlineno + 13
    assert [("inference-in-train-mode", line)] == [(f.kind, f.where.line) for f in report.findings]
    assert "scored (RealNVPLoss, a loss)" in report.findings[0].message


def test_batchnorm_model_scored_by_a_dice_product_with_integer_masks_is_reported():
    # Pytorch-UNet's binary evaluate without net.eval(): `inter = 2 * (input * target).sum()` with long masks
    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        net = _norm_net()
        _train_steps(net)
        masks = torch.tensor([[0, 1, 1], [1, 0, 0], [0, 0, 1], [1, 1, 0]])
        with torch.inference_mode():
            predicted = (torch.sigmoid(net(torch.randn(4, 4))) > 0.5).float()
            dice = 2 * (predicted * masks).sum() / (predicted.sum() + masks.sum())
    assert dice.dim() == 0
    line = test_batchnorm_model_scored_by_a_dice_product_with_integer_masks_is_reported.__code__.co_firstlineno
    assert [("inference-in-train-mode", line + 8)] == [(f.kind, f.where.line) for f in report.findings]


def test_batchnorm_model_scored_by_a_multiclass_dice_of_one_hot_floats_is_reported():
    # Pytorch-UNet's multi-class evaluate without net.eval(): both masks one-hot encoded and made float first
    with ferry.sanitize() as report, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        net = _norm_net()
        _train_steps(net)
        labels = torch.tensor([0, 1, 2, 1])
        with torch.inference_mode():
            predicted = net(torch.randn(4, 4))
            truth = nn.functional.one_hot(labels, 3).permute(1, 0).float()
            guess = nn.functional.one_hot(predicted.argmax(dim=1), 3).permute(1, 0).float()
            dice = 2 * (guess[1:] * truth[1:]).sum() / (guess[1:].sum() + truth[1:].sum())
        with torch.inference_mode():  # a product with float data that is not made from labels: not a score
            sampled = net(torch.randn(4, 4))
            scaled = sampled * torch.randn(4, 3).permute(1, 0).permute(1, 0)
    assert dice.dim() == 0
    assert scaled.shape == (4, 3)
    line = test_batchnorm_model_scored_by_a_multiclass_dice_of_one_hot_floats_is_reported.__code__.co_firstlineno
    assert [("inference-in-train-mode", line + 8)] == [(f.kind, f.where.line) for f in report.findings]


class _PlainLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.heads = [nn.Linear(4, 2), nn.Linear(4, 3)]  # a plain list: model.to() never reaches these

    def forward(self, x):
        h = self.trunk(x)
        return [head(h) for head in self.heads]


class _PlainTensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        table = torch.zeros(16, 4)
        self.pe = table.unsqueeze(0)  # a plain attribute, not a buffer

    def forward(self, x):
        return self.proj(x) + self.pe[:, : x.size(1)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_a_layer_in_a_plain_list_gets_the_module_list_fix():
    with ferry.sanitize(pretend="cuda"):
        model = _PlainLayers().to("cuda")
        with pytest.raises(ferry.DeviceMismatchError) as caught:
            model(torch.randn(2, 4, device="cuda"))
    assert caught.value.fix.startswith("self.heads = nn.ModuleList([...])  # in _PlainLayers.__init__")


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_a_plain_tensor_attribute_gets_the_register_buffer_fix():
    with ferry.sanitize(pretend="cuda"):
        model = _PlainTensor().to("cuda")
        with pytest.raises(ferry.DeviceMismatchError) as caught:
            model(torch.randn(1, 3, 4, device="cuda"))
    assert caught.value.fix.startswith('self.register_buffer("pe", ...)  # in _PlainTensor.__init__')


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_a_cpu_factory_moved_further_down_its_forward_is_not_reported():
    # PointNet's STN: `iden = torch.from_numpy(...)`, then `if x.is_cuda: iden = iden.cuda()`: correct on a GPU
    class Stn(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 9)

        def forward(self, x):
            y = self.fc(x)
            iden = torch.from_numpy(np.eye(3, dtype=np.float32).flatten()).view(1, 9).repeat(x.size(0), 1)
            if y.is_cuda:
                iden = iden.cuda()
            return (y + iden).view(-1, 3, 3)

    with ferry.sanitize(pretend="cuda") as report:
        Stn().cuda()(torch.randn(2, 4, device="cuda"))
    assert [] == report.findings


def test_a_cpu_tensor_from_numpy_in_forward_is_fixed_with_a_move_not_a_device_argument():
    class Stn(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 9)

        def forward(self, x):
            iden = torch.from_numpy(np.eye(3, dtype=np.float32).flatten())
            return self.fc(x), iden

    with ferry.sanitize() as report, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Stn().to("meta")(torch.randn(2, 4, device="meta"))
    assert ["device-less-tensor-in-forward"] == [f.kind for f in report.findings]
    assert "`from_numpy(...).to(x.device)`" in str(caught[0].message)  # from_numpy takes no device=


def test_a_cpu_factory_moved_on_the_line_that_makes_it_is_not_reported():
    class Positions(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            positions = torch.arange(x.size(1)).to(x.device)  # made on the CPU, moved at once: as FRY005 lets pass
            offsets = torch.ones(x.size(1)).type_as(x)
            return self.proj(x) + positions[None, :, None] + offsets[None, :, None]

    model = Positions().to("meta")
    with ferry.sanitize() as report:
        model(torch.randn(2, 3, 4, device="meta"))
    assert [f.kind for f in report.findings if f.kind == "device-less-tensor-in-forward"] == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_a_mismatch_fix_moves_to_the_scripts_own_device_variable():
    # `labels = labels.to('cuda:0')` would hard-code what the script chose (and fail on a CPU-only machine)
    with ferry.sanitize(pretend="cuda"):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(4, 3).to(device)
        labels = torch.tensor([0, 1])
        outputs = model(torch.randn(2, 4, device=device))
        with pytest.raises(ferry.DeviceMismatchError) as caught:
            nn.functional.cross_entropy(outputs, labels)
    assert caught.value.fix == "labels = labels.to(device)"


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_cpu_integer_indices_made_in_a_forward_are_not_reported_but_a_float_tensor_is():
    # DLRM's interaction: `li = torch.tensor([...])` then `Z[:, li, lj]`; CPU integer indices index a GPU tensor
    class Interaction(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            z = torch.bmm(self.fc(x), self.fc(x).transpose(1, 2))
            li = torch.tensor([i for i in range(4) for j in range(i)])
            lj = torch.tensor([j for i in range(4) for j in range(i)])
            return z[:, li, lj]

    class Scaled(Interaction):
        def forward(self, x):
            scale = torch.tensor([2.0, 3.0, 4.0, 5.0])  # a float tensor used as a value, not an index
            return self.fc(x)[0] * scale[None]

    with ferry.sanitize(pretend="cuda") as report:
        Interaction().cuda()(torch.randn(2, 4, 4, device="cuda"))
    assert [] == report.findings
    with (
        ferry.sanitize(pretend="cuda") as report,
        pytest.warns(ferry.SanitizerWarning, match=r"torch\.tensor built a CPU tensor"),
        pytest.raises(ferry.DeviceMismatchError),
    ):
        Scaled().cuda()(torch.randn(2, 4, 4, device="cuda"))
    assert "device-less-tensor-in-forward" in [f.kind for f in report.findings]


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_cpu_tensors_a_forward_builds_and_moves_through_other_tensors_are_not_reported():
    # GIN's block-diagonal adjacency: `torch.ones` values and `cat`-ed self-loops on the host, put into a matrix that
    # is then moved (`Adj_block.to(self.device)`); and a CPU tensor only read on the host. A real GPU runs both.
    class Graph(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.device = torch.device("cuda")

        def forward(self, x, edges):
            values = torch.ones(edges.shape[1])
            loops = torch.ones(x.shape[0])
            values = torch.cat([values, loops], 0)
            index = torch.cat([edges, torch.arange(x.shape[0]).repeat(2, 1)], 1)
            adj = torch.zeros(x.shape[0], x.shape[0]).index_put((index[0], index[1]), values, accumulate=True)
            sizes = torch.zeros(3)  # read on the host only
            print(sizes.tolist())
            return adj.to(self.device) @ self.fc(x)

    with ferry.sanitize(pretend="cuda") as report:
        Graph().cuda()(torch.randn(3, 4, device="cuda"), torch.tensor([[0, 1], [1, 2]]))
    assert [] == [f.kind for f in report.findings if f.kind == "device-less-tensor-in-forward"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_a_cpu_tensor_made_from_a_forward_factory_and_returned_is_reported_at_the_factory():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            weights = torch.ones(4)
            return self.fc(x), weights.float() * 2  # made from it, left on the host, handed to the caller

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = Head()

        def forward(self, x):
            return self.head(x)

    with ferry.sanitize(pretend="cuda") as report, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Outer().cuda()(torch.randn(2, 4, device="cuda"))
    line = Head.forward.__code__.co_firstlineno + 1
    assert [("device-less-tensor-in-forward", line)] == [(f.kind, f.where.line) for f in report.findings]


@pytest.mark.skipif(torch.cuda.is_available(), reason="pretend GPUs are for a machine without CUDA")
def test_a_cpu_tensor_returned_in_a_list_or_only_cast_is_reported():
    # a list literal is no indexing, and `.to(dtype)` is no move: each returns a CPU tensor beside the outputs
    class Listed(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            pos = torch.arange(x.shape[0])
            return [self.lin(x), pos]

    class Cast(Listed):
        def forward(self, x):
            mask = torch.ones(x.shape[0], 8)
            mask = mask.to(x.dtype)
            return self.lin(x), mask, torch.zeros(x.shape[0]).to(torch.float16)

    lines = []
    for model in (Listed(), Cast()):
        with ferry.sanitize(pretend="cuda") as report, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.cuda()(torch.randn(4, 8, device="cuda"))
        lines.append(sorted(f.where.line for f in report.findings if f.kind == "device-less-tensor-in-forward"))
    first = Listed.forward.__code__.co_firstlineno
    cast = Cast.forward.__code__.co_firstlineno
    assert [[first + 1], [cast + 1, cast + 3]] == lines
