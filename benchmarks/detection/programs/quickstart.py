"""Fully connected classifier on synthetic 28x28 clothing images: train, test, save, load and predict.

Modeled on: pytorch/tutorials, beginner_source/basics/quickstart_tutorial.py
(https://github.com/pytorch/tutorials/blob/main/beginner_source/basics/quickstart_tutorial.py).
Kept: the device logic (``device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available()
else "cpu"``, the model built with ``NeuralNetwork().to(device)``, ``X, y = X.to(device), y.to(device)`` in train()
and test(), test() under ``model.eval()`` and ``torch.no_grad()`` summing ``(pred.argmax(1) == y)`` with
``.item()``, the state_dict saved with ``torch.save``, a new ``NeuralNetwork().to(device)`` loading it with
``torch.load(..., weights_only=True)``, then one test image moved with ``x.to(device)`` and classified under
``model.eval()`` and ``torch.no_grad()``, the class picked by indexing a list with ``pred[0].argmax(0)``).
Shrunk: random images in [0, 1) instead of FashionMNIST (no download, no torchvision), 192 training and 128 test
images, 2 epochs, the weights file in a temporary folder.
"""

import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

# random images stand in for FashionMNIST, already as ToTensor() gives them: 1x28x28 floats in [0, 1)
training_data = TensorDataset(torch.rand(192, 1, 28, 28), torch.randint(0, 10, (192,)))
test_data = TensorDataset(torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,)))

batch_size = 64

# Create data loaders.
train_dataloader = DataLoader(training_data, batch_size=batch_size)
test_dataloader = DataLoader(test_data, batch_size=batch_size)

for X, y in test_dataloader:
    print(f"Shape of X [N, C, H, W]: {X.shape}")
    print(f"Shape of y: {y.shape} {y.dtype}")
    break

device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
print(f"Using {device} device")


# Define model
class NeuralNetwork(nn.Module):
    """Flatten, then two hidden layers of 512 ReLU units and 10 logits."""

    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


model = NeuralNetwork().to(device)
print(model)

loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)


def train(dataloader, model, loss_fn, optimizer):
    """One pass over the training data, printing the loss of every 100th batch."""
    size = len(dataloader.dataset)
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        X, y = X.to(device), y.to(device)

        # Compute prediction error
        pred = model(X)
        loss = loss_fn(pred, y)

        # Backpropagation
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

        if batch % 100 == 0:
            loss, current = loss.item(), (batch + 1) * len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


def test(dataloader, model, loss_fn):
    """Return the test accuracy (a fraction) and the average loss per batch."""
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            X, y = X.to(device), y.to(device)
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    test_loss /= num_batches
    correct /= size
    print(f"Test Error: \n Accuracy: {(100 * correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")
    return correct, test_loss


epochs = 2
for t in range(epochs):
    print(f"Epoch {t + 1}\n-------------------------------")
    train(train_dataloader, model, loss_fn, optimizer)
    test(test_dataloader, model, loss_fn)
print("Done!")

classes = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "model.pth")
    torch.save(model.state_dict(), path)
    print("Saved PyTorch Model State to model.pth")

    model = NeuralNetwork().to(device)
    model.load_state_dict(torch.load(path, weights_only=True))

model.eval()
x, y = test_data[0][0], test_data[0][1]
with torch.no_grad():
    x = x.to(device)
    pred = model(x)
    predicted, actual = classes[pred[0].argmax(0)], classes[y]
    print(f'Predicted: "{predicted}", Actual: "{actual}"')

accuracy, avg_loss = test(test_dataloader, model, loss_fn)
print(f"done accuracy={100 * accuracy:.1f} loss={avg_loss:.4f}")
