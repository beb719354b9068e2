"""Models shared by the tests of ferry.deferred_init, ferry.materialize and load_state_dict(..., device=...)."""

from __future__ import annotations

import math

import torch
from torch import nn


def tensors_of(module: nn.Module) -> dict[str, torch.Tensor]:
    found = dict(module.named_parameters(remove_duplicate=False))
    found.update(module.named_buffers(remove_duplicate=False))
    return found


def assert_equal(built: nn.Module, made: nn.Module) -> None:
    expected, got = tensors_of(built), tensors_of(made)
    assert expected.keys() == got.keys()
    for name, tensor in expected.items():
        assert got[name].device == tensor.device, name
        assert got[name].dtype == tensor.dtype, name
        assert type(got[name]) is type(tensor), name
        assert got[name].requires_grad == tensor.requires_grad, name
        assert torch.equal(got[name], tensor), name


class Rope(nn.Module):
    """A rotary embedding whose tables are non-persistent buffers computed in __init__ (not in any state_dict)."""

    def __init__(self, dim: int = 8, base: float = 10000.0, length: int = 16) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        positions = torch.arange(length, dtype=inv_freq.dtype)
        freqs = torch.outer(positions, inv_freq)
        table = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", table.cos(), persistent=False)
        self.register_buffer("sin_cached", table.sin(), persistent=False)


class NoReset(nn.Module):
    """A custom module with its own initialisation and no reset_parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 4) / math.sqrt(4))
        self.gate = nn.Parameter(torch.zeros(6))
        self.scale = torch.full((4,), 0.5)  # a plain tensor attribute, not a buffer
        with torch.no_grad():
            self.weight[0].fill_(1.0)


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 20, width: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rope = Rope(width)
        self.block = nn.TransformerEncoderLayer(width, 2, 16, dropout=0.0, batch_first=True)
        self.extra = NoReset()
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied
        nn.init.trunc_normal_(self.embed.weight, std=0.02)  # no-op on meta in torch: must be replayed whole
        nn.init.orthogonal_(self.block.linear1.weight)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(ids) * self.rope.cos_cached[: ids.shape[1]]
        return self.head(self.block(hidden))  # type: ignore[no-any-return]
