"""Small convolutional classifier on synthetic 28x28 digits.

Modeled on: pytorch/examples, mnist/main.py (https://github.com/pytorch/examples/blob/main/mnist/main.py).
Kept: the device logic (the accelerator chosen with ``torch.accelerator``, DataLoader kwargs with a worker and
pinned memory when accelerated, the model moved with ``.to(device)``, each batch moved in train() and test(),
test() under ``torch.no_grad()``, the state_dict saved at the end). Shrunk: synthetic random images instead of
MNIST (no download), 64 training and 32 test images, 2 epochs, no argument parser.
"""

import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

BATCH_SIZE = 32
TEST_BATCH_SIZE = 32
EPOCHS = 2
LR = 1.0
GAMMA = 0.7
LOG_INTERVAL = 1


class Net(nn.Module):
    """Two convolutions, max pooling, dropout and two fully connected layers; returns log-probabilities."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        """Classify a batch of 1x28x28 images."""
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def train(model, device, train_loader, optimizer, epoch):
    """Run one training epoch, printing the loss every LOG_INTERVAL batches."""
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % LOG_INTERVAL == 0:
            seen = batch_idx * len(data)
            total = len(train_loader.dataset)
            print(f"Train Epoch: {epoch} [{seen}/{total}]\tLoss: {loss.item():.6f}")


def test(model, device, test_loader):
    """Return the test accuracy in percent, printing the average loss."""
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    n = len(test_loader.dataset)
    test_loss /= n
    accuracy = 100.0 * correct / n
    print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{n} ({accuracy:.0f}%)")
    return accuracy


def synthetic_digits(n, generator):
    """Return ``n`` normalised random 1x28x28 images and labels 0-9 (a stand-in for MNIST)."""
    images = torch.rand(n, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (n,), generator=generator)
    return TensorDataset((images - 0.1307) / 0.3081, labels)


def main():
    """Train and test the network, then save its weights."""
    use_accel = torch.accelerator.is_available()
    torch.manual_seed(0)

    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")

    train_kwargs = {"batch_size": BATCH_SIZE}
    test_kwargs = {"batch_size": TEST_BATCH_SIZE}
    if use_accel:
        accel_kwargs = {"num_workers": 1, "persistent_workers": True, "pin_memory": True, "shuffle": True}
        train_kwargs.update(accel_kwargs)
        test_kwargs.update(accel_kwargs)

    generator = torch.Generator().manual_seed(0)
    train_loader = DataLoader(synthetic_digits(64, generator), **train_kwargs)
    test_loader = DataLoader(synthetic_digits(32, generator), **test_kwargs)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=LR)

    scheduler = StepLR(optimizer, step_size=1, gamma=GAMMA)
    accuracy = 0.0
    for epoch in range(1, EPOCHS + 1):
        train(model, device, train_loader, optimizer, epoch)
        accuracy = test(model, device, test_loader)
        scheduler.step()

    with tempfile.TemporaryDirectory() as out_dir:
        torch.save(model.state_dict(), os.path.join(out_dir, "mnist_cnn.pt"))
    print(f"done accuracy={accuracy:.1f}")


if __name__ == "__main__":
    main()
