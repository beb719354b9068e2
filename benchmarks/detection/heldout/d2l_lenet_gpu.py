"""LeNet-5 (sigmoid, average pooling) trained on Fashion-MNIST-shaped images with the D2L GPU training loop.

Modeled on: Dive into Deep Learning, section 7.6 "Convolutional Neural Networks (LeNet)" and the ``d2l.torch`` helpers
``try_gpu``, ``evaluate_accuracy_gpu``, ``train_ch6``, ``accuracy`` and ``Accumulator``
(https://d2l.ai/chapter_convolutional-neural-networks/lenet.html, https://github.com/d2l-ai/d2l-en).
Kept: the device logic: ``try_gpu(i=0)`` returning ``torch.device(f'cuda:{i}')`` when ``torch.cuda.device_count() >=
i + 1`` and the CPU otherwise; the shape walk-through of the layers on a CPU tensor before training; ``train_ch6``
initialising the weights with ``net.apply(init_weights)`` (Xavier on Linear/Conv2d) *before* ``net.to(device)``,
then ``net.train()`` each epoch, ``X, y = X.to(device), y.to(device)`` per batch, SGD, and the metrics accumulated
under ``torch.no_grad()`` with ``metric.add(l * X.shape[0], accuracy(y_hat, y), ...)`` (``Accumulator.add`` turning
each argument into a Python float); ``evaluate_accuracy_gpu(net, data_iter, device=None)`` calling ``net.eval()``,
taking the device from ``next(iter(net.parameters())).device`` when none is given, moving ``X`` (or each element of
a list ``X``) and ``y`` there, under ``torch.no_grad()``. No checkpoint (the book saves none). Shrunk: synthetic
28x28 images (a class template plus noise) in ``TensorDataset``s instead of downloading Fashion-MNIST, 512 training
and 128 test images, batch size 64, 3 epochs, the animator and the examples/sec timer replaced by printed numbers.
"""

import torch
from torch import nn
from torch.utils import data

torch.manual_seed(0)

BATCH_SIZE = 64
NUM_EPOCHS = 3
LR = 0.9
NUM_TRAIN = 512
NUM_TEST = 128


def try_gpu(i=0):
    """The i-th GPU when there is one, else the CPU."""
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


class Accumulator:
    """Running sums of n quantities."""

    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args, strict=True)]

    def reset(self):
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def accuracy(y_hat, y):
    """The number of correct predictions."""
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.type(y.dtype) == y
    return float(cmp.type(y.dtype).sum())


def load_data_fashion_mnist_like(batch_size):
    """Train and test iterators over synthetic Fashion-MNIST-shaped images (1x28x28, 10 classes)."""
    templates = torch.rand(10, 1, 28, 28)

    def make(n):
        labels = torch.randint(0, 10, (n,))
        images = 0.6 * templates[labels] + 0.4 * torch.rand(n, 1, 28, 28)
        return data.TensorDataset(images, labels)

    train_set, test_set = make(NUM_TRAIN), make(NUM_TEST)
    return (
        data.DataLoader(train_set, batch_size, shuffle=True, num_workers=0),
        data.DataLoader(test_set, batch_size, shuffle=False, num_workers=0),
    )


net = nn.Sequential(
    nn.Conv2d(1, 6, kernel_size=5, padding=2),
    nn.Sigmoid(),
    nn.AvgPool2d(kernel_size=2, stride=2),
    nn.Conv2d(6, 16, kernel_size=5),
    nn.Sigmoid(),
    nn.AvgPool2d(kernel_size=2, stride=2),
    nn.Flatten(),
    nn.Linear(16 * 5 * 5, 120),
    nn.Sigmoid(),
    nn.Linear(120, 84),
    nn.Sigmoid(),
    nn.Linear(84, 10),
)

# walk a single image through the layers to check the shapes (on the CPU, before any training)
X = torch.rand(size=(1, 1, 28, 28), dtype=torch.float32)
for layer in net:
    X = layer(X)
    print(layer.__class__.__name__, "output shape:\t", tuple(X.shape))

train_iter, test_iter = load_data_fashion_mnist_like(batch_size=BATCH_SIZE)


def evaluate_accuracy_gpu(net, data_iter, device=None):
    """Accuracy of ``net`` over ``data_iter``, computed on ``device`` (default: where the parameters are)."""
    if isinstance(net, nn.Module):
        net.eval()  # evaluation mode
        if not device:
            device = next(iter(net.parameters())).device
    # number of correct predictions, number of predictions
    metric = Accumulator(2)
    with torch.no_grad():
        for X, y in data_iter:
            if isinstance(X, list):  # noqa: SIM108 (the book's if/else)
                # needed for BERT fine-tuning later in the book
                X = [x.to(device) for x in X]
            else:
                X = X.to(device)
            y = y.to(device)
            metric.add(accuracy(net(X), y), y.numel())
    return metric[0] / metric[1]


def train_ch6(net, train_iter, test_iter, num_epochs, lr, device):
    """Train a model with a GPU (when there is one)."""

    def init_weights(m):
        if type(m) is nn.Linear or type(m) is nn.Conv2d:
            nn.init.xavier_uniform_(m.weight)

    net.apply(init_weights)
    print("training on", device)
    net.to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    loss = nn.CrossEntropyLoss()
    num_batches = len(train_iter)
    for epoch in range(num_epochs):
        # sum of training loss, sum of training accuracy, number of examples
        metric = Accumulator(3)
        net.train()
        for i, (X, y) in enumerate(train_iter):
            optimizer.zero_grad()
            X, y = X.to(device), y.to(device)
            y_hat = net(X)
            l = loss(y_hat, y)  # noqa: E741 (the book's name)
            l.backward()
            optimizer.step()
            with torch.no_grad():
                metric.add(l * X.shape[0], accuracy(y_hat, y), X.shape[0])
            train_l = metric[0] / metric[2]
            train_acc = metric[1] / metric[2]
            if (i + 1) % (num_batches // 2) == 0 or i == num_batches - 1:
                print(f"epoch {epoch + 1} batch {i + 1}/{num_batches}: loss {train_l:.4f}, train acc {train_acc:.3f}")
        test_acc = evaluate_accuracy_gpu(net, test_iter)
        print(f"epoch {epoch + 1}: test acc {test_acc:.3f}")
    print(f"loss {train_l:.3f}, train acc {train_acc:.3f}, test acc {test_acc:.3f}")
    print(f"{metric[2] * num_epochs:.0f} examples seen on {device.type}")
    return train_l, train_acc, test_acc


train_l, train_acc, test_acc = train_ch6(net, train_iter, test_iter, NUM_EPOCHS, LR, try_gpu())
print(f"done loss={train_l:.4f} train_acc={train_acc:.4f} test_acc={test_acc:.4f}")
