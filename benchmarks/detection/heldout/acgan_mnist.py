"""Trains an auxiliary-classifier GAN (ACGAN: a label-embedding generator, a discriminator with a real/fake head and a
class head) on synthetic 10-class digit images, logging D loss, D class accuracy and G loss per batch, sampling a
10x10 class-ordered grid every sample_interval batches, and at the end scoring generated and held-out real images
with the discriminator's class head.

Modeled on: eriklindernoren/PyTorch-GAN, implementations/acgan/acgan.py
(https://github.com/eriklindernoren/PyTorch-GAN/blob/36d3c77e5ff20ebe0aeefd322326a134a279b93e/implementations/acgan/acgan.py).

Kept: `cuda = True if torch.cuda.is_available() else False`; generator, discriminator and both losses moved with
`.cuda()` under `if cuda:` *before* `apply(weights_init_normal)`; the optimizers made after; the legacy tensor types
`FloatTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor` (and `LongTensor`) used for everything the
loop creates: `Variable(FloatTensor(batch_size, 1).fill_(1.0), requires_grad=False)` targets, `imgs.type(FloatTensor)`
and `labels.type(LongTensor)` for the host batches, `FloatTensor(np.random.normal(...))` noise and
`LongTensor(np.random.randint(...))` labels built from numpy arrays; the generator step before the discriminator
step, `gen_imgs.detach()` for the fake pass; the discriminator accuracy computed in numpy from
`real_aux.data.cpu().numpy()` etc.; `sample_image` with numpy labels turned into a `LongTensor`, run with the models
in train mode and no `torch.no_grad()` (as written), handing `gen_imgs.data` (a device tensor) to `save_image`;
`nn.Softmax()` without a dim in the auxiliary head (a UserWarning today) feeding `CrossEntropyLoss`, and
`nn.BatchNorm2d(n, 0.8)` (0.8 lands in eps), as written;
`Variable` wrappers; `opt` printed.
Changed where needed: `parser.parse_args()` becomes an `argparse.Namespace` of the same options; the images folder
is a temporary directory and torchvision's `save_image` is a small stand-in (normalize, tile into a grid on the
tensor's device, then `.cpu()` and `np.save`), since torchvision is not used; the MNIST loader is a `DataLoader` over
a host `TensorDataset`. Added: the final evaluation (models in eval mode under `torch.no_grad()`), which the script
does not have, so that inference shows in the output.

Shrunk: synthetic 1x16x16 "digits" (a fixed random smooth template per class plus noise, scaled to [-1, 1]), 320
training and 100 held-out images; img_size 16, latent_dim 32, generator widths 128/64 -> 32/16, discriminator widths
16/32/64/128 -> 8/16/32/64; batch 32, 5 epochs, sample_interval 16; lr 0.002 instead of 0.0002 so that the few steps learn.
"""
import argparse
import os
import math
import tempfile

import numpy as np

import torch.nn as nn
import torch.nn.functional as F
import torch
import torch.utils.data
from torch.autograd import Variable

images_dir = os.path.join(tempfile.mkdtemp(), "images")
os.makedirs(images_dir, exist_ok=True)

opt = argparse.Namespace(
    n_epochs=5,  # number of epochs of training
    batch_size=32,  # size of the batches
    lr=0.002,  # adam: learning rate
    b1=0.5,  # adam: decay of first order momentum of gradient
    b2=0.999,  # adam: decay of first order momentum of gradient
    n_cpu=8,  # number of cpu threads to use during batch generation
    latent_dim=32,  # dimensionality of the latent space
    n_classes=10,  # number of classes for dataset
    img_size=16,  # size of each image dimension
    channels=1,  # number of image channels
    sample_interval=16,  # interval between image sampling
)
print(opt)

cuda = True if torch.cuda.is_available() else False


def weights_init_normal(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm2d") != -1:
        torch.nn.init.normal_(m.weight.data, 1.0, 0.02)
        torch.nn.init.constant_(m.bias.data, 0.0)


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()

        self.label_emb = nn.Embedding(opt.n_classes, opt.latent_dim)

        self.init_size = opt.img_size // 4  # Initial size before upsampling
        self.l1 = nn.Sequential(nn.Linear(opt.latent_dim, 32 * self.init_size ** 2))

        self.conv_blocks = nn.Sequential(
            nn.BatchNorm2d(32),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(32, 32, 3, stride=1, padding=1),
            nn.BatchNorm2d(32, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(32, 16, 3, stride=1, padding=1),
            nn.BatchNorm2d(16, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(16, opt.channels, 3, stride=1, padding=1),
            nn.Tanh(),
        )

    def forward(self, noise, labels):
        gen_input = torch.mul(self.label_emb(labels), noise)
        out = self.l1(gen_input)
        out = out.view(out.shape[0], 32, self.init_size, self.init_size)
        img = self.conv_blocks(out)
        return img


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        def discriminator_block(in_filters, out_filters, bn=True):
            """Returns layers of each discriminator block"""
            block = [nn.Conv2d(in_filters, out_filters, 3, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Dropout2d(0.25)]
            if bn:
                block.append(nn.BatchNorm2d(out_filters, 0.8))
            return block

        self.conv_blocks = nn.Sequential(
            *discriminator_block(opt.channels, 8, bn=False),
            *discriminator_block(8, 16),
            *discriminator_block(16, 32),
            *discriminator_block(32, 64),
        )

        # The height and width of downsampled image
        ds_size = opt.img_size // 2 ** 4

        # Output layers
        self.adv_layer = nn.Sequential(nn.Linear(64 * ds_size ** 2, 1), nn.Sigmoid())
        self.aux_layer = nn.Sequential(nn.Linear(64 * ds_size ** 2, opt.n_classes), nn.Softmax())

    def forward(self, img):
        out = self.conv_blocks(img)
        out = out.view(out.shape[0], -1)
        validity = self.adv_layer(out)
        label = self.aux_layer(out)

        return validity, label


def save_image(tensor, filename, nrow=8, normalize=False):
    """Stand-in for torchvision.utils.save_image: a normalized grid of the batch, written with numpy."""
    tensor = tensor.clone()
    if normalize:
        low, high = float(tensor.min()), float(tensor.max())
        tensor.clamp_(min=low, max=high)
        tensor.add_(-low).div_(max(high - low, 1e-5))
    n, c, h, w = tensor.shape
    ncol = int(math.ceil(float(n) / nrow))
    grid = tensor.new_zeros((c, ncol * h, nrow * w))
    for k in range(n):
        r, q = divmod(k, nrow)
        grid[:, r * h:(r + 1) * h, q * w:(q + 1) * w] = tensor[k]
    ndarr = grid.mul(255).add_(0.5).clamp_(0, 255).to("cpu", torch.uint8).numpy()
    np.save(filename, ndarr)
    return ndarr


def make_digits(n, rng, templates):
    """Synthetic MNIST: each class a fixed smooth random template, plus noise, in [-1, 1] like Normalize([0.5], [0.5])."""
    labels = rng.randint(0, opt.n_classes, n)
    imgs = templates[labels] + 0.15 * rng.randn(n, 1, opt.img_size, opt.img_size)
    imgs = np.clip(imgs, 0.0, 1.0) * 2.0 - 1.0
    return torch.from_numpy(imgs.astype(np.float32)), torch.from_numpy(labels.astype(np.int64))


rng = np.random.RandomState(0)
np.random.seed(0)
torch.manual_seed(0)
raw = rng.rand(opt.n_classes, 1, opt.img_size // 4, opt.img_size // 4)
templates = np.kron(raw, np.ones((1, 1, 4, 4)))  # blocky 16x16 template per class
templates = (templates > 0.55).astype(np.float64)
train_imgs, train_labels = make_digits(320, rng, templates)
test_imgs, test_labels = make_digits(100, rng, templates)

# Loss functions
adversarial_loss = torch.nn.BCELoss()
auxiliary_loss = torch.nn.CrossEntropyLoss()

# Initialize generator and discriminator
generator = Generator()
discriminator = Discriminator()

if cuda:
    generator.cuda()
    discriminator.cuda()
    adversarial_loss.cuda()
    auxiliary_loss.cuda()

# Initialize weights
generator.apply(weights_init_normal)
discriminator.apply(weights_init_normal)

# Configure data loader
dataloader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(train_imgs, train_labels),
    batch_size=opt.batch_size,
    shuffle=True,
)

# Optimizers
optimizer_G = torch.optim.Adam(generator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))

FloatTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor


def sample_image(n_row, batches_done):
    """Saves a grid of generated digits ranging from 0 to n_classes"""
    # Sample noise
    z = Variable(FloatTensor(np.random.normal(0, 1, (n_row ** 2, opt.latent_dim))))
    # Get labels ranging from 0 to n_classes for n rows
    labels = np.array([num for _ in range(n_row) for num in range(n_row)])
    labels = Variable(LongTensor(labels))
    gen_imgs = generator(z, labels)
    grid = save_image(gen_imgs.data, os.path.join(images_dir, "%d.npy" % batches_done), nrow=n_row, normalize=True)
    print("saved sample grid %d: shape %s, mean %.2f" % (batches_done, grid.shape, grid.mean()))


# ----------
#  Training
# ----------

for epoch in range(opt.n_epochs):
    for i, (imgs, labels) in enumerate(dataloader):

        batch_size = imgs.shape[0]

        # Adversarial ground truths
        valid = Variable(FloatTensor(batch_size, 1).fill_(1.0), requires_grad=False)
        fake = Variable(FloatTensor(batch_size, 1).fill_(0.0), requires_grad=False)

        # Configure input
        real_imgs = Variable(imgs.type(FloatTensor))
        labels = Variable(labels.type(LongTensor))

        # -----------------
        #  Train Generator
        # -----------------

        optimizer_G.zero_grad()

        # Sample noise and labels as generator input
        z = Variable(FloatTensor(np.random.normal(0, 1, (batch_size, opt.latent_dim))))
        gen_labels = Variable(LongTensor(np.random.randint(0, opt.n_classes, batch_size)))

        # Generate a batch of images
        gen_imgs = generator(z, gen_labels)

        # Loss measures generator's ability to fool the discriminator
        validity, pred_label = discriminator(gen_imgs)
        g_loss = 0.5 * (adversarial_loss(validity, valid) + auxiliary_loss(pred_label, gen_labels))

        g_loss.backward()
        optimizer_G.step()

        # ---------------------
        #  Train Discriminator
        # ---------------------

        optimizer_D.zero_grad()

        # Loss for real images
        real_pred, real_aux = discriminator(real_imgs)
        d_real_loss = (adversarial_loss(real_pred, valid) + auxiliary_loss(real_aux, labels)) / 2

        # Loss for fake images
        fake_pred, fake_aux = discriminator(gen_imgs.detach())
        d_fake_loss = (adversarial_loss(fake_pred, fake) + auxiliary_loss(fake_aux, gen_labels)) / 2

        # Total discriminator loss
        d_loss = (d_real_loss + d_fake_loss) / 2

        # Calculate discriminator accuracy
        pred = np.concatenate([real_aux.data.cpu().numpy(), fake_aux.data.cpu().numpy()], axis=0)
        gt = np.concatenate([labels.data.cpu().numpy(), gen_labels.data.cpu().numpy()], axis=0)
        d_acc = np.mean(np.argmax(pred, axis=1) == gt)

        d_loss.backward()
        optimizer_D.step()

        print(
            "[Epoch %d/%d] [Batch %d/%d] [D loss: %f, acc: %d%%] [G loss: %f]"
            % (epoch, opt.n_epochs, i, len(dataloader), d_loss.item(), 100 * d_acc, g_loss.item())
        )
        batches_done = epoch * len(dataloader) + i
        if batches_done % opt.sample_interval == 0:
            sample_image(n_row=10, batches_done=batches_done)

# ----------
#  Evaluation (added)
# ----------

generator.eval()
discriminator.eval()
with torch.no_grad():
    real_pred, real_aux = discriminator(Variable(test_imgs.type(FloatTensor)))
    real_acc = (real_aux.argmax(1).cpu() == test_labels).float().mean().item()
    z = Variable(FloatTensor(np.random.normal(0, 1, (100, opt.latent_dim))))
    gen_labels = Variable(LongTensor(np.array([num for _ in range(10) for num in range(10)])))
    fake_pred, fake_aux = discriminator(generator(z, gen_labels))
    fake_acc = (fake_aux.argmax(1) == gen_labels).float().mean().item()
print("[Eval] real D(x) %.4f, class acc %.2f%% | fake D(G(z)) %.4f, class acc %.2f%%"
      % (real_pred.mean().item(), 100 * real_acc, fake_pred.mean().item(), 100 * fake_acc))
print("done")
