"""Checks that need a real CUDA GPU (``@pytest.mark.gpu``, skipped without one; run by ``scripts/gpu-check``)."""

import pytest
import torch
from torch import nn

import ferry

pytestmark = pytest.mark.gpu


def test_save_cuda_tensors_with_tied_weights_and_load_on_cpu_and_cuda(tmp_path):
    embed = nn.Embedding(100, 16).cuda()
    state = {"embed.weight": embed.weight.detach(), "head.weight": embed.weight.detach(), "idx": torch.arange(3).cuda()}
    path = tmp_path / "tied.safetensors"
    ferry.save(state, path)
    on_cpu = ferry.load(path)
    assert on_cpu["embed.weight"].device == torch.device("cpu")
    assert on_cpu["embed.weight"] is on_cpu["head.weight"]
    assert torch.equal(on_cpu["embed.weight"], embed.weight.detach().cpu())
    on_gpu = ferry.load(path, device="cuda")
    assert on_gpu["idx"].device == torch.device("cuda:0")
    assert torch.equal(on_gpu["embed.weight"], embed.weight.detach())


def test_checkpoint_saved_on_gpu_restores_into_cpu_model_and_back(tmp_path):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 8, device="cuda")).sum().backward()
    optimizer.step()
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(1, {"model": model, "optimizer": optimizer})

    cpu_model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    cpu_optimizer = torch.optim.Adam(cpu_model.parameters())
    assert ckpt.restore({"model": cpu_model, "optimizer": cpu_optimizer}) == 1
    for p_gpu, p_cpu in zip(model.parameters(), cpu_model.parameters(), strict=True):
        assert p_cpu.device.type == "cpu"
        assert torch.equal(p_gpu.detach().cpu(), p_cpu.detach())
    for state in cpu_optimizer.state.values():
        assert state["exp_avg"].device.type == "cpu"
    cpu_optimizer.step()  # works: state follows the parameters

    gpu_model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).cuda()
    gpu_optimizer = torch.optim.Adam(gpu_model.parameters())
    assert ckpt.restore({"model": gpu_model, "optimizer": gpu_optimizer}) == 1
    for state in gpu_optimizer.state.values():
        assert state["exp_avg"].device == torch.device("cuda:0")


def test_cuda_rng_state_is_restored(tmp_path):
    torch.cuda.manual_seed(7)
    torch.rand(1, device="cuda")
    ckpt = ferry.Checkpointer(tmp_path)
    ckpt.save(0, {})
    expected = torch.rand(4, device="cuda")
    ckpt.restore({})
    assert torch.equal(expected, torch.rand(4, device="cuda"))
