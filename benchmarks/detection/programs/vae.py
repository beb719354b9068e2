"""Variational autoencoder with fully connected encoder and decoder, on synthetic 28x28 images.

Modeled on: pytorch/examples, vae/main.py (https://github.com/pytorch/examples/blob/main/vae/main.py).
Kept: the device logic (``torch.device("cuda" if args.cuda else "cpu")``, DataLoader kwargs with a worker and
pinned memory on CUDA, the model moved with ``.to(device)``, each batch moved in train() and test(), the noise drawn
with ``torch.randn_like``, test() under ``model.eval()`` and ``torch.no_grad()``, samples drawn with
``torch.randn(64, 20).to(device)`` and copied back with ``.cpu()`` before saving). Shrunk: random images in [0, 1]
instead of MNIST (no download, no torchvision), 128 training and 64 test images, 2 epochs, images saved with
``torch.save`` instead of ``save_image``, no argument parser.
"""

import os
import tempfile

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import TensorDataset

BATCH_SIZE = 32
EPOCHS = 2
LOG_INTERVAL = 2
NO_CUDA = False

cuda = not NO_CUDA and torch.cuda.is_available()
torch.manual_seed(0)
device = torch.device("cuda" if cuda else "cpu")

kwargs = {"num_workers": 1, "pin_memory": True} if cuda else {}
# random images in [0, 1] stand in for MNIST
train_loader = torch.utils.data.DataLoader(
    TensorDataset(torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,))),
    batch_size=BATCH_SIZE,
    shuffle=True,
    **kwargs,
)
test_loader = torch.utils.data.DataLoader(
    TensorDataset(torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,))),
    batch_size=BATCH_SIZE,
    shuffle=False,
    **kwargs,
)


class VAE(nn.Module):
    """784 -> 400 -> (mu, logvar) of a 20-dimensional latent -> 400 -> 784 Bernoulli means."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        """Return the mean and log-variance of the latent for a batch of flattened images."""
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        """Draw a latent sample as ``mu + eps * std``, so gradients reach mu and logvar."""
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        """Return pixel probabilities for a batch of latents."""
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        """Return the reconstruction, mu and logvar."""
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction + KL divergence losses summed over all elements and the batch."""
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    # see Appendix B of Kingma and Welling, "Auto-Encoding Variational Bayes" (2014)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def train(epoch):
    """Run one training epoch."""
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % LOG_INTERVAL == 0:
            seen = batch_idx * len(data)
            print(f"Train Epoch: {epoch} [{seen}/{len(train_loader.dataset)}]\tLoss: {loss.item() / len(data):.6f}")
    print(f"====> Epoch: {epoch} Average loss: {train_loss / len(train_loader.dataset):.4f}")


def test(epoch, out_dir):
    """Return the average test loss per image; saves a comparison of inputs and reconstructions."""
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            if i == 0:
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n], recon_batch.view(BATCH_SIZE, 1, 28, 28)[:n]])
                torch.save(comparison.cpu(), os.path.join(out_dir, f"reconstruction_{epoch}.pt"))

    test_loss /= len(test_loader.dataset)
    print(f"====> Test set loss: {test_loss:.4f}")
    return test_loss


if __name__ == "__main__":
    test_loss = 0.0
    with tempfile.TemporaryDirectory() as results:
        for epoch in range(1, EPOCHS + 1):
            train(epoch)
            test_loss = test(epoch, results)
            with torch.no_grad():
                sample = torch.randn(64, 20).to(device)
                sample = model.decode(sample).cpu()
                torch.save(sample.view(64, 1, 28, 28), os.path.join(results, f"sample_{epoch}.pt"))
    print(f"done test_loss={test_loss:.4f}")
