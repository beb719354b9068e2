"""Fully connected GAN (generator + discriminator) on MNIST-shaped images.

Modeled on: yunjey/pytorch-tutorial, tutorials/03-advanced/generative_adversarial_network/main.py (https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/03-advanced/generative_adversarial_network/main.py).
Kept: module-level script; `device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')`; `D = D.to(device)` / `G = G.to(device)` after building the nn.Sequential models; images reshaped and `.to(device)` inside the loop; `torch.ones(...).to(device)` / `torch.zeros(...).to(device)` labels and `torch.randn(...).to(device)` latent codes made each step; two Adam optimizers with the `reset_grad` helper; `denorm` + `save_image` of real and fake samples; `torch.save(G.state_dict(), ...)` / `torch.save(D.state_dict(), ...)` at the end. Shrunk: synthetic MNIST-shaped data in [-1, 1] instead of the torchvision download, hidden_size 64, 2 epochs of 4 batches, a small numpy stand-in for torchvision's save_image, sample dir and checkpoints in a temporary folder (checkpoints loaded back).
"""

import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset

torch.manual_seed(0)

# Device configuration
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

# Hyper-parameters
latent_size = 64
hidden_size = 64
image_size = 784
num_epochs = 2
batch_size = 25
work_dir = tempfile.TemporaryDirectory()
sample_dir = os.path.join(work_dir.name, 'samples')

# Create a directory if not exists
if not os.path.exists(sample_dir):
    os.makedirs(sample_dir)

# Synthetic MNIST-shaped dataset, already normalized to [-1, 1]
mnist = TensorDataset(torch.rand(100, 1, 28, 28) * 2 - 1,
                      torch.randint(0, 10, (100,)))

# Data loader
data_loader = torch.utils.data.DataLoader(dataset=mnist,
                                          batch_size=batch_size,
                                          shuffle=True)


def save_image(tensor, fp):
    # Stand-in for torchvision.utils.save_image: writes the uint8 pixels with numpy.
    ndarr = tensor.mul(255).add_(0.5).clamp_(0, 255).to('cpu', torch.uint8).numpy()
    np.save(fp, ndarr)


# Discriminator
D = nn.Sequential(
    nn.Linear(image_size, hidden_size),
    nn.LeakyReLU(0.2),
    nn.Linear(hidden_size, hidden_size),
    nn.LeakyReLU(0.2),
    nn.Linear(hidden_size, 1),
    nn.Sigmoid())

# Generator
G = nn.Sequential(
    nn.Linear(latent_size, hidden_size),
    nn.ReLU(),
    nn.Linear(hidden_size, hidden_size),
    nn.ReLU(),
    nn.Linear(hidden_size, image_size),
    nn.Tanh())

# Device setting
D = D.to(device)
G = G.to(device)

# Binary cross entropy loss and optimizer
criterion = nn.BCELoss()
d_optimizer = torch.optim.Adam(D.parameters(), lr=0.0002)
g_optimizer = torch.optim.Adam(G.parameters(), lr=0.0002)

def denorm(x):
    out = (x + 1) / 2
    return out.clamp(0, 1)

def reset_grad():
    d_optimizer.zero_grad()
    g_optimizer.zero_grad()

# Start training
total_step = len(data_loader)
for epoch in range(num_epochs):
    for i, (images, _) in enumerate(data_loader):
        images = images.reshape(batch_size, -1).to(device)

        # Create the labels which are later used as input for the BCE loss
        real_labels = torch.ones(batch_size, 1).to(device)
        fake_labels = torch.zeros(batch_size, 1).to(device)

        # ================================================================== #
        #                      Train the discriminator                       #
        # ================================================================== #

        # Compute BCE_Loss using real images
        outputs = D(images)
        d_loss_real = criterion(outputs, real_labels)
        real_score = outputs

        # Compute BCELoss using fake images
        z = torch.randn(batch_size, latent_size).to(device)
        fake_images = G(z)
        outputs = D(fake_images)
        d_loss_fake = criterion(outputs, fake_labels)
        fake_score = outputs

        # Backprop and optimize
        d_loss = d_loss_real + d_loss_fake
        reset_grad()
        d_loss.backward()
        d_optimizer.step()

        # ================================================================== #
        #                        Train the generator                         #
        # ================================================================== #

        # Compute loss with fake images
        z = torch.randn(batch_size, latent_size).to(device)
        fake_images = G(z)
        outputs = D(fake_images)

        # We train G to maximize log(D(G(z)) instead of minimizing log(1-D(G(z)))
        g_loss = criterion(outputs, real_labels)

        # Backprop and optimize
        reset_grad()
        g_loss.backward()
        g_optimizer.step()

        if (i+1) % 2 == 0:
            print('Epoch [{}/{}], Step [{}/{}], d_loss: {:.4f}, g_loss: {:.4f}, D(x): {:.2f}, D(G(z)): {:.2f}'
                  .format(epoch, num_epochs, i+1, total_step, d_loss.item(), g_loss.item(),
                          real_score.mean().item(), fake_score.mean().item()))

    # Save real images
    if (epoch+1) == 1:
        images = images.reshape(images.size(0), 1, 28, 28)
        save_image(denorm(images), os.path.join(sample_dir, 'real_images.npy'))

    # Save sampled images
    fake_images = fake_images.reshape(fake_images.size(0), 1, 28, 28)
    save_image(denorm(fake_images), os.path.join(sample_dir, 'fake_images-{}.npy'.format(epoch+1)))

# Save the model checkpoints
torch.save(G.state_dict(), os.path.join(work_dir.name, 'G.ckpt'))
torch.save(D.state_dict(), os.path.join(work_dir.name, 'D.ckpt'))

G.load_state_dict(torch.load(os.path.join(work_dir.name, 'G.ckpt')))
D.load_state_dict(torch.load(os.path.join(work_dir.name, 'D.ckpt')))
print('Saved samples:', sorted(os.listdir(sample_dir)))
work_dir.cleanup()
