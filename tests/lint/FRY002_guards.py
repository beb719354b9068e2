# Corner cases of hardcoded-cuda-device: lines marked with the code must be reported, nothing else.
import argparse
import sys

import torch
import torch.nn as nn

DEVICE = "cuda:0"  # FRY002
dev = torch.device("cuda")  # FRY002
fallback_device = "cuda"
if not torch.cuda.is_available():
    fallback_device = "cpu"
chosen_device = "cuda" if torch.cuda.is_available() else "cpu"
gpu_device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")

# top-level script code of a file that asks which devices exist: a literal CUDA use breaks that choice
net = nn.Linear(4, 4).cuda()  # FRY002
batch = torch.randn(2, 4, device="cuda").to("cuda:0")  # FRY002
parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda")


class Block(nn.Module):
    def __init__(self, use_gpu=True, on_gpu=False):
        super().__init__()
        self.use_gpu = use_gpu
        self.on_gpu = on_gpu
        self.scale = torch.ones(4).cuda()  # FRY002

    def forward(self, x):
        mask = torch.ones_like(x).cuda()  # FRY002
        if self.use_gpu:
            mask = mask.cuda()  # FRY002
        if self.on_gpu:
            mask = mask.cuda()
        if x.is_cuda:
            mask = mask.cuda()
        if x.device.type == "cuda":
            mask = mask.to("cuda")
        return x * mask


class Loss(nn.Module):
    def __init__(self, use_cuda=True):
        super().__init__()
        self.use_cuda = use_cuda

    def forward(self, x):
        if self.use_cuda:
            x = x.cuda()
        return x.sum()


loss = Loss(use_cuda=torch.cuda.is_available())


def make(n, device="cuda"):  # FRY002
    return torch.zeros(n, device=device)


def make_on(n, device: torch.device = torch.device("cuda:1")):  # FRY002
    return torch.zeros(n, device=device)


def place(t, rank):
    a = t.to("cuda")  # FRY002
    b = t.to(device="cuda", non_blocking=True)  # FRY002
    c = t.cuda(0)  # FRY002
    d = t.cuda(non_blocking=True)  # FRY002
    e = t.cuda(rank)
    f = torch.empty(3, device=torch.device("cuda", rank))
    g = t.to(f"cuda:{rank}")
    state = torch.load("w.pt", map_location="cuda")  # FRY002
    return a, b, c, d, e, f, g, state


def guarded(t, use_cuda, args):
    if torch.cuda.is_available():
        t = t.cuda()
    else:
        t = t.cpu()
    t = t.cuda() if use_cuda else t
    if args.cuda:
        t = t.cuda()
    if not args.no_cuda:
        t = t.to("cuda")
    ready = torch.cuda.is_available()
    if ready and t.dim() > 1:
        t = t.cuda()
    ready and t.cuda()
    if t.device != torch.device("cuda"):
        pass
    try:
        t = t.cuda()
    except RuntimeError:
        pass
    return t


def early_exit(t):
    if not torch.cuda.is_available():
        return t
    return t.cuda()


def asserted(t):
    assert torch.cuda.is_available(), "needs a GPU"
    return t.to("cuda")


def exits(t):
    if not torch.cuda.is_available():
        sys.exit("no GPU")
    return t.cuda()


def benchmark_gpu(model, x):
    return model.cuda()(x.cuda())


def timed(model, x):
    torch.cuda.synchronize()
    out = model(x.cuda())
    torch.cuda.synchronize()
    return out


def streamed(t):
    with torch.cuda.device(0):
        return t.cuda()


class CudaGraphRunner:
    def capture(self, t):
        return t.cuda()


class Rotation:
    def cuda(self):
        return Rotation(self.rot.cuda())


def stream_api():
    return torch.cuda.Stream(device="cuda")


def compared(t):
    same = t.device == torch.device("cuda")
    return same


def choose(device=None):
    device = "cuda"  # FRY002
    return torch.zeros(1, device=device)


def choose_with_fallback():
    device = "cuda"
    if not torch.cuda.is_available():
        device = "cpu"
    return device


def per_gpu(t):
    for _ in range(torch.cuda.device_count()):
        t = t.cuda()
    return t


def names(t):
    device_type = "cuda"
    cuda_device = torch.device("cuda:0") if torch.cuda.is_available() else None
    with torch.autocast(device_type=device_type):
        return t, cuda_device


def check_device(a, b, device="cuda"):
    return a.device.type == b.device.type == device


def decompose(a, b):
    return check_device(a, b, device="cuda")


def device_module(device="cuda"):
    return getattr(torch, device)


def unused(x, device: str = "cuda"):
    return x


class Scaler:
    def __init__(self, device="cuda"):
        self._device = device
        if self._device == "cuda" and not torch.cuda.is_available():
            self._device = "cpu"


class Eraser:
    def __init__(self, device="cuda"):  # FRY002
        self.device = device

    def __call__(self, x):
        return torch.empty(x.shape, device=self.device)


def device_with_fallback():
    device = torch.device("cuda")
    if not torch.cuda.is_available():
        device = torch.device("cpu")
    return device


def device_once():
    target = torch.device("cuda", 0)  # FRY002
    return target


def main():
    model = nn.Linear(2, 2)
    model.cuda()  # FRY002
    return model


if __name__ == "__main__":
    demo = nn.Linear(2, 2).to("cuda")  # FRY002
    print(demo(torch.randn(1, 2, device="cuda")))  # FRY002
