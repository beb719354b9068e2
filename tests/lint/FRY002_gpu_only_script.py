# A script that never asks which devices exist was written for a GPU machine: its top-level literal CUDA uses fail at
# once, with PyTorch's own clear error, elsewhere. Only its device choice, and code inside functions, is reported.
import torch
import torch.nn as nn

DEVICE = "cuda"  # FRY002

net = nn.Linear(4, 4).cuda()
batch = torch.randn(2, 4, device="cuda").to("cuda:0")
out = net(batch)


def helper(x):
    return x.cuda()  # FRY002


if __name__ == "__main__":
    print(nn.Linear(2, 2).to("cuda")(torch.randn(1, 2, device="cuda")))
