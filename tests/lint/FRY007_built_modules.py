# Corner cases of module-never-moved: lines marked with the code must be reported, nothing else.
import torch
import torch.nn as nn
import torchvision

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


class SelfPlacing(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.fc = nn.Linear(4, 2, device=device)

    def forward(self, x):
        return self.fc(x)


class MovesInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        x = x.to(self.fc.weight.device)
        return self.fc(x)


def local_class():
    net = Net()  # FRY007
    x = torch.randn(2, 4).to(device)
    return net(x)


def torchvision_model(images):
    model = torchvision.models.resnet18()  # FRY007
    model.eval()
    batch = torch.stack(images).cuda()
    with torch.no_grad():
        return model(batch)


def in_a_loop(frames):
    backbone = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU())  # FRY007
    for frame in frames:
        batch = frame.unsqueeze(0).to(device)
        heat = backbone(batch)
    return heat


def moved_later():
    net = Net()
    x = torch.randn(2, 4).to(device)
    net.cuda()
    return net(x)


def handed_on(load):
    net = Net()
    load(net)
    return net(torch.randn(2, 4).to(device))


def aliased():
    net = Net()
    other = net
    other.to(device)
    return net(torch.randn(2, 4).to(device))


def without_parameters():
    act = nn.Sequential(nn.ReLU(), nn.Flatten())
    return act(torch.randn(2, 4).to(device))


def built_on_device():
    layer = nn.Linear(4, 2, device=device)
    return layer(torch.randn(2, 4, device=device))


def places_itself():
    net = SelfPlacing(device)
    return net(torch.randn(2, 4, device=device))


def moves_its_inputs():
    net = MovesInputs()
    return net(torch.randn(2, 4, device=device))


def inputs_of_unknown_kind(batch):
    net = Net()
    batch.to(device)  # could be a tensor whose move is discarded: not known to be on the device
    return net(batch)


def follows_the_model(inputs):
    net = Net()
    inputs = inputs.to(next(net.parameters()).device)
    return net(inputs)


def built_in_a_context(fabric):
    with fabric.init_module():
        net = Net()
    return net(torch.randn(2, 4).to(device))


def guarded():
    net = Net()
    if torch.cuda.is_available():
        net.cuda()
    return net(torch.randn(2, 4).to(device))


def cpu_inputs():
    net = Net()
    return net(torch.randn(2, 4).to("cpu"))
