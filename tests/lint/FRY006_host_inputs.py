# Corner cases of input-on-other-device: lines marked with the code must be reported, nothing else.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
x = torch.randn(8, 4)  # FRY006
y = model(x)
ok = model(torch.randn(8, 4, device=device))
scaled = y * torch.tensor(2.0)  # a zero-dimensional host tensor mixes with device tensors
shifted = y - x.mean()
pairs = [(torch.randn(2, 4), torch.tensor([0, 1]))]
for feats, labels in pairs:
    out = model(feats.to(device))
    hits = (out.argmax(1) == labels).sum()  # FRY006
    fine = (out.argmax(1) == labels.to(device)).sum()


def predict(net, pixels, device):
    net.to(device)
    batch = torch.from_numpy(np.asarray(pixels)).float()
    batch = batch.permute(2, 0, 1).unsqueeze(0) / 255.0  # FRY006
    return net(batch)


def predict_moved(net, pixels, device):
    net.to(device)
    batch = torch.from_numpy(np.asarray(pixels)).float().to(device)
    return net(batch)


def discarded(net: nn.Module, device):
    net = net.to(device)
    image = torch.rand(3, 32, 32).unsqueeze(0)  # FRY006
    image.to(device)
    return net(image)


def guarded():
    net = nn.Conv2d(3, 8, 3)
    if torch.cuda.is_available():
        net = net.cuda()
    image = torch.zeros(1, 3, 8, 8)  # FRY006
    return net(image)


def flag_decides(args):
    net = nn.Conv2d(3, 8, 3)
    if args.gpu:
        net = net.cuda()
    return net(torch.zeros(1, 3, 8, 8))  # `args.gpu` may be off: the net may be on the CPU


def unknown_inputs(net, inputs, loader, device):
    net.to(device)
    out = net(inputs)
    for batch, target in loader:
        out = net(batch)
    return out


def handed_on(net, device, helper):
    net.to(device)
    helper(net)  # may move it back
    return net(torch.ones(2, 4))


def lengths_stay_on_host(rnn, device, tokens):
    rnn.to(device)
    lengths = torch.tensor([len(t) for t in tokens])
    padded = torch.zeros(2, 5, device=device)
    return rnn(padded, lengths)


def without_parameters():
    act = nn.ReLU().to(device)
    return act(torch.randn(3))


def wrapped(net):
    parallel = nn.DataParallel(net).cuda()
    return parallel(torch.randn(4, 4))  # DataParallel scatters host inputs itself


def moved_back(net):
    net.to(device)
    net.cpu()
    return net(torch.randn(2, 4))


def default_device_block(net):
    net.to(device)
    with torch.device(device):
        z = torch.randn(2, 4)
    return net(z)


def loss_term(net, device):
    net.to(device)
    prior = torch.full((4, 2), 0.5)  # FRY006
    logits = net(torch.randn(4, 4, device=device))
    return F.softmax(logits, dim=1) - prior


def later_move(net, device):
    net.to(device)
    x = torch.randn(2, 4)
    x = x.to(device)
    return net(x)


def cpu_device(net):
    device = torch.device("cpu")
    net.to(device)
    return net(torch.randn(2, 4))


def factory_keywords_from_a_dict(kernel_size, device=None, dtype=None):
    dd = dict(device=device, dtype=dtype)
    x = torch.eye(kernel_size, **dd)
    k = torch.arange(kernel_size, device=device)[None, :]
    return x * k
