"""Spatial transformer network (localization net + affine grid sampler) in front of a small MNIST CNN.

Modeled on: pytorch/tutorials, intermediate_source/spatial_transformer_tutorial.py (https://github.com/pytorch/tutorials/blob/main/intermediate_source/spatial_transformer_tutorial.py).
Kept: module-level script; `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`; `model = Net().to(device)`; identity init of the affine regressor via `.data.zero_()` / `.data.copy_(torch.tensor([...], dtype=torch.float))`; SGD optimizer; `train(epoch)` with `model.train()` and `data.to(device), target.to(device)`; `test()` opening `torch.no_grad()` before `model.eval()`; `visualize_stn()` under `torch.no_grad()` moving a batch `.to(device)` and bringing results back with `.cpu()`; no checkpoint (the original saves none). Shrunk: synthetic MNIST-shaped TensorDatasets instead of the torchvision download, num_workers=0, 2 epochs instead of 20, a small torch stand-in for torchvision.utils.make_grid, matplotlib display replaced by printing grid shapes, `align_corners=False` and `reduction='sum'` spelled out (same behaviour as the original's defaults, without deprecation warnings).
"""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import TensorDataset

torch.manual_seed(0)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# Training dataset (synthetic, already normalized like MNIST)
train_loader = torch.utils.data.DataLoader(
    TensorDataset((torch.rand(128, 1, 28, 28) - 0.1307) / 0.3081,
                  torch.randint(0, 10, (128,))),
    batch_size=64, shuffle=True, num_workers=0)
# Test dataset
test_loader = torch.utils.data.DataLoader(
    TensorDataset((torch.rand(64, 1, 28, 28) - 0.1307) / 0.3081,
                  torch.randint(0, 10, (64,))),
    batch_size=64, shuffle=True, num_workers=0)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

        # Spatial transformer localization-network
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True)
        )

        # Regressor for the 3 * 2 affine matrix
        self.fc_loc = nn.Sequential(
            nn.Linear(10 * 3 * 3, 32),
            nn.ReLU(True),
            nn.Linear(32, 3 * 2)
        )

        # Initialize the weights/bias with identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    # Spatial transformer network forward function
    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)

        grid = F.affine_grid(theta, x.size(), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)

        return x

    def forward(self, x):
        # transform the input
        x = self.stn(x)

        # Perform the usual forward pass
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


model = Net().to(device)

optimizer = optim.SGD(model.parameters(), lr=0.01)


def train(epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)

        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 500 == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))
#
# A simple test procedure to measure the STN performances on MNIST.
#


def test():
    with torch.no_grad():
        model.eval()
        test_loss = 0
        correct = 0
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)

            # sum up batch loss
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            # get the index of the max log-probability
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()

        test_loss /= len(test_loader.dataset)
        print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'
              .format(test_loss, correct, len(test_loader.dataset),
                      100. * correct / len(test_loader.dataset)))


def make_grid(tensor, nrow=8, padding=2):
    # Stand-in for torchvision.utils.make_grid on a (B, 1, H, W) CPU batch.
    tensor = tensor.repeat(1, 3, 1, 1)
    tensor = F.pad(tensor, (padding, 0, padding, 0))
    rows = [torch.cat(list(tensor[i:i + nrow]), dim=2) for i in range(0, tensor.size(0), nrow)]
    return F.pad(torch.cat(rows, dim=1), (0, padding, 0, padding))


def convert_image_np(inp):
    """Convert a Tensor to numpy image."""
    inp = inp.numpy().transpose((1, 2, 0))
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    inp = std * inp + mean
    inp = np.clip(inp, 0, 1)
    return inp


def visualize_stn():
    with torch.no_grad():
        # Get a batch of training data
        data = next(iter(test_loader))[0].to(device)

        input_tensor = data.cpu()
        transformed_input_tensor = model.stn(data).cpu()

        in_grid = convert_image_np(
            make_grid(input_tensor))

        out_grid = convert_image_np(
            make_grid(transformed_input_tensor))

        # Show the results side-by-side (plotting dropped)
        print('Dataset Images', in_grid.shape, 'Transformed Images', out_grid.shape)

for epoch in range(1, 2 + 1):
    train(epoch)
    test()

# Visualize the STN transformation on some input batch
visualize_stn()
