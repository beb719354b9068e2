import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class Positions(nn.Module):
    def __init__(self, n=16, dim=8):
        super().__init__()
        self.dim = dim
        self.pos = nn.Embedding(n, dim)
        self.weight = nn.Parameter(torch.ones(dim))
        self.register_buffer("steps", torch.arange(n), persistent=False)  # __init__: no input at hand

    def forward(self, x):
        t = x.shape[1]
        a = x + torch.arange(t)  # FRY005
        b = torch.cat([x, torch.zeros(x.shape[0], 1)], dim=1)  # FRY005
        c = self.pos(torch.arange(t))  # FRY005
        d = self.weight * torch.ones(self.dim)  # FRY005
        e = x.masked_fill(torch.tensor([[True, False]]), 0.0)  # FRY005
        return a, b, c, d, e

    def follows_the_input(self, x: Tensor):
        a = x + torch.arange(x.shape[1], device=x.device)
        b = torch.zeros_like(x) + x.new_zeros(x.shape) + x.new_ones(3)
        c = x * torch.tensor(2.0) + torch.zeros(()) + torch.tensor(x.shape[0])
        d = x + torch.arange(x.shape[1]).to(x.device) + torch.ones(3).to(x) + torch.ones(3).type_as(x)
        e = x[torch.arange(3)]  # indexing with a CPU index works on every device
        f = torch.zeros(3, pin_memory=True)
        g = x + torch.ones(3, dtype=torch.float16).to(device=x.device)
        with torch.device(x.device):
            h = x + torch.ones(3)
        if torch.jit.is_tracing():
            i = x + torch.tensor([x.shape[0]])
        return a, b, c, d, e, f, g, h, i

    def only_cpu_values(self, x: Tensor):
        shape = torch.tensor([x.shape[-2], x.shape[-1]]) // 2
        return int(shape[0]) * x

    def unknown_partner(self, x, other):
        return torch.arange(3) + other  # `other` may be anything: a number, a list

    def lazily_built(self, x):
        if self.proj is None:
            self.proj = nn.Linear(x.shape[-1], 4)  # registered; moved with the module afterwards
        return self.proj(x)


def lengths_mask(x: Tensor, lengths: Tensor) -> Tensor:
    return torch.arange(x.shape[1])[None, :] < lengths[:, None]  # FRY005


def pad_rows(x: torch.Tensor, n: int) -> torch.Tensor:
    if n == 0:
        return torch.zeros(0, x.shape[1])  # an empty placeholder
    return torch.zeros(n, x.shape[1])  # FRY005


def gather(preds, targets):
    found = []
    for i, p in enumerate(preds):
        hits = targets.unsqueeze(0).nonzero()
        found.append(torch.ones(len(hits)) * i)  # FRY005
    return torch.cat(found)


def image_size(x: Tensor) -> Tensor:
    return torch.tensor([x.shape[-2], x.shape[-1]])  # numbers about `x`, kept on the host on purpose


def grid(n: int) -> Tensor:
    return torch.arange(n)  # no input tensor at hand


def to_tensor(array) -> Tensor:
    return torch.as_tensor(array)  # a conversion of what the caller passed


def band_mask(size):
    return torch.from_numpy(np.triu(np.ones((size, size)), k=1)) == 0  # FRY005


def combine(trg: Tensor, pad: int):
    return (trg != pad) & band_mask(trg.size(1))


class Sinusoid(nn.Module):
    def table(self, length):
        freq = torch.arange(0, 8, 2.0)  # FRY005
        pos = torch.arange(length, dtype=torch.float)  # FRY005
        return torch.outer(pos, freq).sin()

    def constant_table(self):
        return torch.arange(8.0)

    def forward(self, h):
        return h + self.table(h.shape[0]).to(h.device) + self.constant_table().to(h.device)


class Offsets(nn.Module):
    def forward(self, x):
        yy, xx = torch.meshgrid(torch.arange(x.shape[2]), torch.arange(x.shape[3]), indexing="ij")  # FRY005
        b, c, h, w = x.shape
        return x + torch.stack([xx, yy]) * math.pi / (h * w)


class Blocks(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        x = nn.BatchNorm2d(self.c)(x)  # FRY005
        norm = nn.LayerNorm(self.c)  # FRY005
        x = norm(x)
        x = nn.ReLU()(x)  # no parameters: harmless
        x = nn.Dropout(0.1)(x)
        x = nn.Conv2d(self.c, self.c, 1).to(x.device)(x)  # moved right away
        return F.relu(x)


class TokenCollator:
    def __call__(self, x: Tensor):
        return x + torch.arange(x.shape[1])  # data preparation: runs on the host before the batch is moved


def export_to_onnx(model: nn.Module, x: Tensor):
    return model(x) + torch.zeros(3)  # export code traces on the host


def host_copy(obj: Tensor, pin: bool) -> Tensor:
    if pin:
        return torch.empty(obj.shape, dtype=obj.dtype).pin_memory()
    return torch.empty(obj.shape, dtype=obj.dtype)  # the function copies to the host on purpose
