"""Hogwild-style training of a small CNN digit classifier whose parameters sit in shared memory, then a test pass.

Modeled on: pytorch/examples, mnist_hogwild/main.py and mnist_hogwild/train.py
(https://github.com/pytorch/examples/tree/main/mnist_hogwild).
Kept: the device logic (``use_cuda = args.cuda and torch.cuda.is_available()``, the same for MPS, the device
chosen among ``torch.device("cuda")``, ``"mps"`` and ``"cpu"``, DataLoader kwargs with a worker and pinned memory
only with CUDA, ``Net().to(device)`` then ``model.share_memory()``, the model and the device handed as arguments to
``train(rank, args, model, device, dataset, dataloader_kwargs)`` and ``test(...)``, each worker's own SGD optimizer,
inputs and targets moved inside the calls with ``model(data.to(device))`` and ``F.nll_loss(output,
target.to(device))``, the loss read with ``.item()`` when logging, ``test_epoch`` under ``model.eval()`` and
``torch.no_grad()`` summing ``.item()`` values, the state_dict saved with ``torch.save``). Shrunk: the training
"processes" run one after the other in this process instead of as ``torch.multiprocessing`` workers (the
single-process variant), synthetic digits (a fixed pattern per class plus noise) instead of MNIST (no download, no
torchvision), 128 training and 64 test images, 2 ranks, 2 epochs, the log line naming the rank instead of the
process id, the settings a ``Namespace`` of constants instead of an argument parser, the weights saved in a
temporary folder.
"""

import os
import tempfile
from argparse import Namespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import TensorDataset

# ---------------------------------------------------------------------------------------------------- train.py


def train(rank, args, model, device, dataset, dataloader_kwargs):
    """One Hogwild worker: its own loader and optimizer over the shared model."""
    torch.manual_seed(args.seed + rank)

    train_loader = torch.utils.data.DataLoader(dataset, **dataloader_kwargs)

    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    for epoch in range(1, args.epochs + 1):
        train_epoch(rank, epoch, args, model, device, train_loader, optimizer)


def test(args, model, device, dataset, dataloader_kwargs):
    """Evaluate the shared model on the test set."""
    torch.manual_seed(args.seed)

    test_loader = torch.utils.data.DataLoader(dataset, **dataloader_kwargs)

    return test_epoch(model, device, test_loader)


def train_epoch(rank, epoch, args, model, device, data_loader, optimizer):
    """One pass over the worker's data."""
    model.train()
    for batch_idx, (data, target) in enumerate(data_loader):
        optimizer.zero_grad()
        output = model(data.to(device))
        loss = F.nll_loss(output, target.to(device))
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(
                f"rank {rank}\tTrain Epoch: {epoch} [{batch_idx * len(data)}/{len(data_loader.dataset)} "
                f"({100.0 * batch_idx / len(data_loader):.0f}%)]\tLoss: {loss.item():.6f}"
            )
            if args.dry_run:
                break


def test_epoch(model, device, data_loader):
    """Average loss and accuracy over a loader."""
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in data_loader:
            output = model(data.to(device))
            test_loss += F.nll_loss(output, target.to(device), reduction="sum").item()  # sum up batch loss
            pred = output.max(1)[1]  # get the index of the max log-probability
            correct += pred.eq(target.to(device)).sum().item()

    test_loss /= len(data_loader.dataset)
    print(
        f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(data_loader.dataset)} "
        f"({100.0 * correct / len(data_loader.dataset):.0f}%)\n"
    )
    return test_loss, correct


# ----------------------------------------------------------------------------------------------------- main.py

# the example's command line defaults, with --cuda and --save_model given and fewer images, epochs and workers
args = Namespace(
    batch_size=32,
    test_batch_size=64,
    epochs=2,
    lr=0.01,
    momentum=0.5,
    seed=1,
    log_interval=2,
    num_processes=2,
    cuda=True,
    mps=False,
    save_model=True,
    dry_run=False,
)


class Net(nn.Module):
    """Two convolutions with max pooling and dropout, two linear layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def synthetic_mnist(n, seed):
    """``n`` 1x28x28 digits, normalised as ``Normalize((0.1307,), (0.3081,))`` leaves them: a pattern per class."""
    templates = torch.rand(10, 1, 7, 7, generator=torch.Generator().manual_seed(0)) > 0.6
    templates = F.interpolate(templates.float(), size=(28, 28))
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=generator)
    images = (0.7 * templates[labels] + 0.4 * torch.rand(n, 1, 28, 28, generator=generator)).clamp(0, 1)
    return TensorDataset((images - 0.1307) / 0.3081, labels)


if __name__ == "__main__":
    use_cuda = args.cuda and torch.cuda.is_available()
    use_mps = args.mps and torch.backends.mps.is_available()
    if use_cuda:
        device = torch.device("cuda")
    elif use_mps:
        device = torch.device("mps")
    else:
        device = torch.device("cpu")

    dataset1 = synthetic_mnist(128, seed=1)
    dataset2 = synthetic_mnist(64, seed=2)
    kwargs = {"batch_size": args.batch_size, "shuffle": True}
    if use_cuda:
        kwargs.update(
            {
                "num_workers": 1,
                "pin_memory": True,
            }
        )

    torch.manual_seed(args.seed)

    model = Net().to(device)
    model.share_memory()  # gradients are allocated lazily, so they are not shared here

    # the example starts one process per rank; here the ranks take turns
    for rank in range(args.num_processes):
        train(rank, args, model, device, dataset1, kwargs)

    with tempfile.TemporaryDirectory() as out:
        if args.save_model:
            torch.save(model.state_dict(), os.path.join(out, "MNIST_hogwild.pt"))
            print("saved", sorted(os.listdir(out)))

    # Once training is complete, we can test the model
    test_loss, correct = test(args, model, device, dataset2, kwargs)
    print(f"done test_loss={test_loss:.4f} correct={correct}/{len(dataset2)}")
