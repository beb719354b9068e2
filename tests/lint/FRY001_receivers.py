# Corner cases of discarded-tensor-move: lines marked with the code must be reported, nothing else.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.register_buffer("scale", torch.ones(2))

    def forward(self, x: torch.Tensor):
        x.float()  # FRY001
        self.scale.cuda()  # FRY001
        self.fc.cuda()
        self.cuda()
        return self.fc(x)


def helper(batch, device):
    batch.to(device)  # unknown receiver: could be a BatchEncoding, which moves in place
    return batch


def train(loader: DataLoader, model: nn.Module, device: torch.device):
    model.to(device)
    for inputs, targets in loader:
        inputs.to(device)  # FRY001
        targets.to(device, non_blocking=True)  # FRY001
        out = model(inputs)
        out.cpu()  # FRY001
        out.type()
        (inputs * 2).half()  # FRY001
    for i, (x, y) in enumerate(DataLoader([])):
        x.pin_memory()  # FRY001
        y.contiguous()  # noqa: FRY001
        y.double()  # noqa
    xs = [torch.zeros(2) for _ in range(3)]
    for t in xs:
        t.bfloat16()  # FRY001
    pairs = {"a": torch.ones(1)}
    pairs["a"].to(device)  # FRY001
    numbers = torch.arange(3).tolist()
    model2 = nn.Sequential(nn.Linear(2, 2)).to(device)
    model2.half()
    wrapped = nn.DataParallel(model2)
    wrapped.cuda()
    compiled = torch.compile(model2)
    compiled.to(device)
    return numbers
