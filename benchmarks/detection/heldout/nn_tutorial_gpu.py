"""MNIST-shaped classification refactored with fit/loss_batch/get_data and a WrappedDataLoader that moves batches to the GPU.

Modeled on: pytorch/tutorials, beginner_source/nn_tutorial.py ("What is torch.nn really?", https://github.com/pytorch/tutorials/blob/main/beginner_source/nn_tutorial.py).
Kept: module-level script; numpy arrays converted with `map(torch.tensor, ...)`; `loss_batch`, `fit` (with `model.train()` / `model.eval()` + `torch.no_grad()` validation), `get_data`, `get_model`, `Lambda`, `WrappedDataLoader`; the CPU run with the plain `preprocess` first, then the "Using your GPU" section: `dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")`, `preprocess` redefined to return `x.view(-1, 1, 28, 28).to(dev), y.to(dev)`, loaders re-wrapped, `model.to(dev)` followed by a new SGD optimizer, and `fit` again; `torch.randn`/`torch.zeros` parameter init of the from-scratch logistic model; no checkpoint (the original saves none). Shrunk: synthetic float32 MNIST-shaped numpy arrays instead of downloading mnist.pkl.gz (256 train / 128 valid rows), only the later refactoring stages of the tutorial, plotting and IPython debugger dropped.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch import optim
from torch.utils.data import DataLoader, TensorDataset

np.random.seed(0)
torch.manual_seed(0)

# Synthetic stand-in for the pickled MNIST arrays (flattened 28x28, float32)
x_train = np.random.rand(256, 784).astype(np.float32)
y_train = np.random.randint(0, 10, 256).astype(np.int64)
x_valid = np.random.rand(128, 784).astype(np.float32)
y_valid = np.random.randint(0, 10, 128).astype(np.int64)

x_train, y_train, x_valid, y_valid = map(
    torch.tensor, (x_train, y_train, x_valid, y_valid)
)
n, c = x_train.shape
print(x_train.shape)
print(y_train.min(), y_train.max())

bs = 64  # batch size
lr = 0.5  # learning rate
epochs = 2  # how many epochs to train for

loss_func = F.cross_entropy


def accuracy(out, yb):
    preds = torch.argmax(out, dim=1)
    return (preds == yb).float().mean()


class Mnist_Logistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(784, 10) / math.sqrt(784))
        self.bias = nn.Parameter(torch.zeros(10))

    def forward(self, xb):
        return xb @ self.weights + self.bias


def get_model():
    model = Mnist_Logistic()
    return model, optim.SGD(model.parameters(), lr=lr)


train_ds = TensorDataset(x_train, y_train)
valid_ds = TensorDataset(x_valid, y_valid)


def loss_batch(model, loss_func, xb, yb, opt=None):
    loss = loss_func(model(xb), yb)

    if opt is not None:
        loss.backward()
        opt.step()
        opt.zero_grad()

    return loss.item(), len(xb)


def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_dl:
            loss_batch(model, loss_func, xb, yb, opt)

        model.eval()
        with torch.no_grad():
            losses, nums = zip(
                *[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl]
            )
        val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)

        print(epoch, val_loss)


def get_data(train_ds, valid_ds, bs):
    return (
        DataLoader(train_ds, batch_size=bs, shuffle=True),
        DataLoader(valid_ds, batch_size=bs * 2),
    )


train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
model, opt = get_model()
fit(epochs, model, loss_func, opt, train_dl, valid_dl)

xb, yb = x_valid[0:bs], y_valid[0:bs]
print(loss_func(model(xb), yb), accuracy(model(xb), yb))


class Lambda(nn.Module):
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, x):
        return self.func(x)


def preprocess(x, y):
    return x.view(-1, 1, 28, 28), y


class WrappedDataLoader:
    def __init__(self, dl, func):
        self.dl = dl
        self.func = func

    def __len__(self):
        return len(self.dl)

    def __iter__(self):
        batches = iter(self.dl)
        for b in batches:
            yield (self.func(*b))

train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
train_dl = WrappedDataLoader(train_dl, preprocess)
valid_dl = WrappedDataLoader(valid_dl, preprocess)

lr = 0.1

model = nn.Sequential(
    nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1),
    nn.ReLU(),
    nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1),
    nn.ReLU(),
    nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    Lambda(lambda x: x.view(x.size(0), -1)),
)

opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)

fit(epochs, model, loss_func, opt, train_dl, valid_dl)

# Using your GPU
print(torch.cuda.is_available())

dev = torch.device(
    "cuda") if torch.cuda.is_available() else torch.device("cpu")


def preprocess(x, y):
    return x.view(-1, 1, 28, 28).to(dev), y.to(dev)


train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
train_dl = WrappedDataLoader(train_dl, preprocess)
valid_dl = WrappedDataLoader(valid_dl, preprocess)

model.to(dev)
opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)

fit(epochs, model, loss_func, opt, train_dl, valid_dl)
