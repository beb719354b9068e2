"""LSTM classifier that reads synthetic 28x28 digits one row per time step.

Modeled on: pytorch/examples, mnist_rnn/main.py (https://github.com/pytorch/examples/blob/main/mnist_rnn/main.py).
Kept: the device logic (the ``--accel`` switch choosing ``torch.accelerator.current_accelerator()`` or the CPU,
DataLoader kwargs with a worker and pinned memory when accelerated, the model moved with ``.to(device)``, each batch
moved with ``data, target = data.to(device), target.to(device)`` in train() and test(), test() under
``model.eval()`` (the net has batch norm and dropout) and ``torch.no_grad()`` reading results back with ``.item()``,
the state_dict saved with ``torch.save``). Shrunk: random normalised images instead of MNIST (no download, no
torchvision), 64 training and 32 test images, 2 epochs, the ``--accel`` flag a constant that falls back to the CPU
when no accelerator is present, the weights saved in a temporary folder, no argument parser.
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
LR = 0.1
GAMMA = 0.7
ACCEL = True
SEED = 0
LOG_INTERVAL = 1
SAVE_MODEL = True


class Net(nn.Module):
    """An LSTM over the 28 rows of an image, its last output through batch norm, dropout and two linear layers."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(input_size=28, hidden_size=64, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(64)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, input):
        """Return log-probabilities of the 10 classes for a batch of 1x28x28 images."""
        # (batch, 1, 28, 28) -> (batch, 28 rows, 28 pixels), as batch_first wants
        input = input.reshape(-1, 28, 28)
        output, _ = self.rnn(input)

        # keep the output of the last time step only
        output = output[:, -1, :]
        output = self.batchnorm(output)
        output = self.dropout1(output)
        output = self.fc1(output)
        output = F.relu(output)
        output = self.dropout2(output)
        output = self.fc2(output)
        return F.log_softmax(output, dim=1)


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
            percent = 100.0 * batch_idx / len(train_loader)
            print(f"Train Epoch: {epoch} [{seen}/{total} ({percent:.0f}%)]\tLoss: {loss.item():.6f}")


def test(model, device, test_loader):
    """Return the average test loss, printing it with the accuracy."""
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()  # summed over the batch
            pred = output.argmax(dim=1, keepdim=True)  # the class of highest log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    n = len(test_loader.dataset)
    test_loss /= n
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{n} ({100.0 * correct / n:.0f}%)\n")
    return test_loss


def synthetic_mnist(n):
    """Return ``n`` random images normalised like MNIST, and labels 0-9 (a stand-in for the dataset)."""
    images = torch.rand(n, 1, 28, 28)
    labels = torch.randint(0, 10, (n,))
    return TensorDataset((images - 0.1307) / 0.3081, labels)


def main():
    """Train and test the LSTM classifier, then save its weights."""
    use_accel = ACCEL and torch.accelerator.is_available()
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")

    torch.manual_seed(SEED)

    kwargs = {"num_workers": 1, "pin_memory": True} if use_accel else {}
    train_loader = DataLoader(synthetic_mnist(64), batch_size=BATCH_SIZE, shuffle=True, **kwargs)
    test_loader = DataLoader(synthetic_mnist(32), batch_size=TEST_BATCH_SIZE, shuffle=True, **kwargs)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=LR)

    scheduler = StepLR(optimizer, step_size=1, gamma=GAMMA)
    test_loss = 0.0
    for epoch in range(1, EPOCHS + 1):
        train(model, device, train_loader, optimizer, epoch)
        test_loss = test(model, device, test_loader)
        scheduler.step()

    if SAVE_MODEL:
        with tempfile.TemporaryDirectory() as out_dir:
            torch.save(model.state_dict(), os.path.join(out_dir, "mnist_rnn.pt"))
    print(f"done test_loss={test_loss:.4f}")


if __name__ == "__main__":
    main()
