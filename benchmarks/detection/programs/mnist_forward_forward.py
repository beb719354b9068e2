"""Forward-Forward training (Hinton, 2022) of a two-layer net, layer by layer, on synthetic flattened digits.

Modeled on: pytorch/examples, mnist_forward_forward/main.py
(https://github.com/pytorch/examples/blob/main/mnist_forward_forward/main.py).
Kept: the device logic (``torch.accelerator.current_accelerator()`` unless switched off or absent, DataLoader kwargs
with a worker, pinned memory and shuffling when accelerated, each ``Layer(...).to(device)`` kept in a plain list of
the net, the one training batch and the one test batch moved with ``x, y = x.to(device), y.to(device)``, the
negative labels picked on the host with ``.item()`` and returned with ``y_neg.to(device)`` through the module-level
``device``, labels overlaid on the device images by advanced indexing, prediction read back with ``.item()``, the
net's state_dict saved with ``torch.save``, empty as in the original since the layers are not registered). Shrunk:
random normalised images instead of MNIST (no download, no torchvision), layers of 64 units, 64 training and 32 test
images, 20 epochs per layer, the settings constants instead of an argument parser, the weights saved in a temporary
folder, the seed set with ``torch.manual_seed``.
"""

import os
import tempfile

import torch
import torch.nn as nn
from torch.optim import Adam
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 20
LR = 0.03
NO_ACCEL = False
SEED = 0
SAVE_MODEL = True
TRAIN_SIZE = 64
TEST_SIZE = 32
THRESHOLD = 2.0
LOG_INTERVAL = 10


def get_y_neg(y):
    """Return, for each label in ``y``, a random label other than it (the negative data's labels)."""
    y_neg = y.clone()
    for idx, y_samp in enumerate(y):
        allowed_indices = list(range(10))
        allowed_indices.remove(y_samp.item())
        y_neg[idx] = torch.tensor(allowed_indices)[torch.randint(len(allowed_indices), size=(1,))].item()
    return y_neg.to(device)


def overlay_y_on_x(x, y, classes=10):
    """Return ``x`` with its first ``classes`` pixels replaced by a one-hot code of label ``y`` (scaled to x.max())."""
    x_ = x.clone()
    x_[:, :classes] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class Net(torch.nn.Module):
    """A stack of Forward-Forward layers, each trained on its own; classifies by the label of highest goodness."""

    def __init__(self, dims):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = [*self.layers, Layer(dims[d], dims[d + 1]).to(device)]

    def predict(self, x):
        """Return the label whose overlay gives the highest summed goodness over the layers."""
        goodness_per_label = []
        for label in range(10):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness = [*goodness, h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = torch.cat(goodness_per_label, 1)
        return goodness_per_label.argmax(1)

    def train(self, x_pos, x_neg):
        """Train the layers one after the other, each on the previous layer's outputs."""
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            print("training layer:", i)
            h_pos, h_neg = layer.train(h_pos, h_neg)


class Layer(nn.Linear):
    """A ReLU linear layer with its own optimizer, trained to give positive data high and negative data low goodness."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.relu = torch.nn.ReLU()
        self.opt = Adam(self.parameters(), lr=LR)
        self.threshold = THRESHOLD
        self.num_epochs = EPOCHS

    def forward(self, x):
        """Normalise each input to unit length, then apply the linear map and ReLU."""
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train(self, x_pos, x_neg):
        """Run the layer's epochs and return its detached outputs for positive and negative data."""
        for i in range(self.num_epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            # push positive goodness above the threshold and negative goodness below it
            loss = torch.log1p(torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if i % LOG_INTERVAL == 0:
                print(f"Loss: {loss.item():.6f}")
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


def synthetic_mnist(n):
    """Return ``n`` random flattened images normalised like MNIST, and labels 0-9 (a stand-in for the dataset)."""
    images = torch.rand(n, 784)
    labels = torch.randint(0, 10, (n,))
    return TensorDataset((images - 0.1307) / 0.3081, labels)


if __name__ == "__main__":
    use_accel = not NO_ACCEL and torch.accelerator.is_available()
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")
    torch.manual_seed(SEED)

    train_kwargs = {"batch_size": TRAIN_SIZE}
    test_kwargs = {"batch_size": TEST_SIZE}

    if use_accel:
        accel_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
        train_kwargs.update(accel_kwargs)
        test_kwargs.update(accel_kwargs)

    train_loader = DataLoader(synthetic_mnist(TRAIN_SIZE), **train_kwargs)
    test_loader = DataLoader(synthetic_mnist(TEST_SIZE), **test_kwargs)

    net = Net([784, 64, 64])
    x, y = next(iter(train_loader))
    x, y = x.to(device), y.to(device)
    x_pos = overlay_y_on_x(x, y)
    y_neg = get_y_neg(y)
    x_neg = overlay_y_on_x(x, y_neg)
    net.train(x_pos, x_neg)
    train_error = 1.0 - net.predict(x).eq(y).float().mean().item()
    print(f"train error: {train_error:.4f}")

    x_te, y_te = next(iter(test_loader))
    x_te, y_te = x_te.to(device), y_te.to(device)
    if SAVE_MODEL:
        with tempfile.TemporaryDirectory() as out_dir:
            torch.save(net.state_dict(), os.path.join(out_dir, "mnist_ff.pt"))
    test_error = 1.0 - net.predict(x_te).eq(y_te).float().mean().item()
    print(f"test error: {test_error:.4f}")
    print(f"done test_error={test_error:.4f}")
