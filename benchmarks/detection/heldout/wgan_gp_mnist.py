"""WGAN-GP: a fully connected generator and critic trained with the Wasserstein loss and a gradient penalty.

Modeled on: eriklindernoren/PyTorch-GAN, implementations/wgan_gp/wgan_gp.py at commit
36d3c77e5ff20ebe0aeefd322326a134a279b93e
(https://github.com/eriklindernoren/PyTorch-GAN/blob/36d3c77e5ff20ebe0aeefd322326a134a279b93e/implementations/wgan_gp/wgan_gp.py).
Kept: the module-level script structure and its device logic: ``cuda = True if torch.cuda.is_available() else False``;
the generator and discriminator built on the host and moved with ``generator.cuda()`` and ``discriminator.cuda()``
under ``if cuda:``; both Adam optimizers created after the move; the tensor-type alias ``Tensor =
torch.cuda.FloatTensor if cuda else torch.FloatTensor`` used for everything the loop creates: the real images
converted with ``Variable(imgs.type(Tensor))``, the noise ``Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0],
opt.latent_dim))))``, and in ``compute_gradient_penalty`` the interpolation weights
``Tensor(np.random.random((real_samples.size(0), 1, 1, 1)))`` and the ``grad_outputs``
``Variable(Tensor(real_samples.shape[0], 1).fill_(1.0), requires_grad=False)``; ``.requires_grad_(True)`` on the
interpolates and ``autograd.grad(..., create_graph=True, retain_graph=True, only_inputs=True)``; the penalty computed
on ``real_imgs.data``/``fake_imgs.data``; the critic loss ``-torch.mean(real_validity) + torch.mean(fake_validity) +
lambda_gp * gradient_penalty``; the generator trained every ``n_critic`` critic steps on ``generator(z)`` with the
same noise; ``d_loss.item()``/``g_loss.item()`` in the progress line; ``save_image(fake_imgs.data[:25], ...)`` every
``sample_interval`` batches (``batches_done += opt.n_critic``); ``BatchNorm1d(out_feat, 0.8)`` in the generator blocks.
Shrunk: 16x16 synthetic "digits" (random strokes and rings, normalised to [-1, 1] like ``Normalize([0.5], [0.5])``)
from an in-memory ``Dataset`` instead of downloading MNIST, latent size 16, hidden layers 32-256 instead of 128-1024,
batch 32, 3 epochs of 320 images, ``save_image`` replaced by writing the sample grid as a ``.npy`` file in a temporary
folder, argparse replaced by a constant namespace, fixed seeds.
"""

import os
import tempfile
from types import SimpleNamespace

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
from torch.autograd import Variable
from torch.utils.data import Dataset

torch.manual_seed(0)
np.random.seed(0)

tmpdir = tempfile.TemporaryDirectory()
os.makedirs(os.path.join(tmpdir.name, "images"), exist_ok=True)

opt = SimpleNamespace(n_epochs=3, batch_size=32, lr=0.0002, b1=0.5, b2=0.999, n_cpu=0, latent_dim=16,
                      img_size=16, channels=1, n_critic=5, clip_value=0.01, sample_interval=20)
print(opt)

img_shape = (opt.channels, opt.img_size, opt.img_size)

cuda = True if torch.cuda.is_available() else False


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(opt.latent_dim, 32, normalize=False),
            *block(32, 64),
            *block(64, 128),
            *block(128, 256),
            nn.Linear(256, int(np.prod(img_shape))),
            nn.Tanh()
        )

    def forward(self, z):
        img = self.model(z)
        img = img.view(img.shape[0], *img_shape)
        return img


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        self.model = nn.Sequential(
            nn.Linear(int(np.prod(img_shape)), 128),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(128, 64),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(64, 1),
        )

    def forward(self, img):
        img_flat = img.view(img.shape[0], -1)
        validity = self.model(img_flat)
        return validity


class SyntheticDigits(Dataset):
    """A stand-in for ``datasets.MNIST`` + ``ToTensor`` + ``Normalize([0.5], [0.5])``: strokes and rings."""

    def __init__(self, n, size, seed=0):
        rng = np.random.RandomState(seed)
        yy, xx = np.mgrid[0:size, 0:size] / (size - 1.0)
        images, labels = [], []
        for i in range(n):
            label = i % 10
            img = np.zeros((size, size), dtype=np.float32)
            if label % 2 == 0:  # a ring of random radius
                cy, cx, r = rng.uniform(0.35, 0.65), rng.uniform(0.35, 0.65), rng.uniform(0.2, 0.35)
                img += np.exp(-((np.hypot(yy - cy, xx - cx) - r) ** 2) / 0.004)
            else:  # a slanted stroke
                angle = rng.uniform(-0.6, 0.6) + label * 0.1
                d = (xx - 0.5) * np.cos(angle) - (yy - 0.5) * np.sin(angle)
                img += np.exp(-(d ** 2) / 0.004) * ((yy > 0.1) & (yy < 0.9))
            img = np.clip(img, 0, 1)
            images.append((img - 0.5) / 0.5)
            labels.append(label)
        self.images = torch.tensor(np.stack(images)[:, None], dtype=torch.float32)
        self.labels = torch.tensor(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


def save_image(images, path, nrow=5, normalize=True):
    """Writes the images as one grid (a ``.npy`` array) instead of a PNG."""
    images = images.cpu().numpy()
    if normalize:
        images = (images - images.min()) / (images.max() - images.min() + 1e-8)
    n, c, h, w = images.shape
    rows = int(np.ceil(n / nrow))
    grid = np.zeros((c, rows * h, nrow * w), dtype=np.float32)
    for k in range(n):
        r, col = divmod(k, nrow)
        grid[:, r * h:(r + 1) * h, col * w:(col + 1) * w] = images[k]
    np.save(path.replace(".png", ".npy"), grid)
    return grid


# Loss weight for gradient penalty
lambda_gp = 10

# Initialize generator and discriminator
generator = Generator()
discriminator = Discriminator()

if cuda:
    generator.cuda()
    discriminator.cuda()

# Configure data loader
dataloader = torch.utils.data.DataLoader(
    SyntheticDigits(320, opt.img_size),
    batch_size=opt.batch_size,
    shuffle=True,
)

# Optimizers
optimizer_G = torch.optim.Adam(generator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))

Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor


def compute_gradient_penalty(D, real_samples, fake_samples):
    """Calculates the gradient penalty loss for WGAN GP"""
    # Random weight term for interpolation between real and fake samples
    alpha = Tensor(np.random.random((real_samples.size(0), 1, 1, 1)))
    # Get random interpolation between real and fake samples
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = Variable(Tensor(real_samples.shape[0], 1).fill_(1.0), requires_grad=False)
    # Get gradient w.r.t. interpolates
    gradients = autograd.grad(
        outputs=d_interpolates,
        inputs=interpolates,
        grad_outputs=fake,
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]
    gradients = gradients.view(gradients.size(0), -1)
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
    return gradient_penalty


# ----------
#  Training
# ----------

batches_done = 0
for epoch in range(opt.n_epochs):
    for i, (imgs, _) in enumerate(dataloader):

        # Configure input
        real_imgs = Variable(imgs.type(Tensor))

        # ---------------------
        #  Train Discriminator
        # ---------------------

        optimizer_D.zero_grad()

        # Sample noise as generator input
        z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], opt.latent_dim))))

        # Generate a batch of images
        fake_imgs = generator(z)

        # Real images
        real_validity = discriminator(real_imgs)
        # Fake images
        fake_validity = discriminator(fake_imgs)
        # Gradient penalty
        gradient_penalty = compute_gradient_penalty(discriminator, real_imgs.data, fake_imgs.data)
        # Adversarial loss
        d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + lambda_gp * gradient_penalty

        d_loss.backward()
        optimizer_D.step()

        optimizer_G.zero_grad()

        # Train the generator every n_critic steps
        if i % opt.n_critic == 0:

            # -----------------
            #  Train Generator
            # -----------------

            # Generate a batch of images
            fake_imgs = generator(z)
            # Loss measures generator's ability to fool the discriminator
            # Train on fake images
            fake_validity = discriminator(fake_imgs)
            g_loss = -torch.mean(fake_validity)

            g_loss.backward()
            optimizer_G.step()

            print(
                "[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f]"
                % (epoch, opt.n_epochs, i, len(dataloader), d_loss.item(), g_loss.item())
            )

            if batches_done % opt.sample_interval == 0:
                grid = save_image(fake_imgs.data[:25], os.path.join(tmpdir.name, "images/%d.png" % batches_done),
                                  nrow=5, normalize=True)
                print("saved sample grid %s at %d batches" % (grid.shape, batches_done))

            batches_done += opt.n_critic

tmpdir.cleanup()
