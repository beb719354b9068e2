"""Deep convolutional GAN on synthetic 16x16 images.

Modeled on: pytorch/examples, dcgan/main.py (https://github.com/pytorch/examples/blob/main/dcgan/main.py).
Kept: the device logic (``torch.device("cuda:0" if ... else "cpu")``, both networks moved with ``.to(device)`` and
initialised with ``.apply(weights_init)``, ``data_parallel`` only when the input is on CUDA and ngpu > 1, the labels
made with ``torch.full(..., device=device)`` and refilled in place, the noise and ``fixed_noise`` drawn on the device,
the fake batch detached for the discriminator step, images copied back with ``.cpu()`` before saving, the
generator's state_dict saved every epoch). Shrunk: random images instead of a dataset (no download, no
torchvision), 16x16 images with narrower networks, 2 epochs of 3 batches of 16, samples saved with ``torch.save``
instead of ``vutils.save_image``.
"""

import os
import tempfile

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

NGPU = 1
NZ = 16  # size of the latent vector
NGF = 16
NDF = 16
NC = 3
IMAGE_SIZE = 16
BATCH_SIZE = 16
NITER = 2
LR = 0.0002
BETA1 = 0.5

torch.manual_seed(0)
use_cuda = torch.cuda.is_available()
device = torch.device("cuda:0" if use_cuda else "cpu")


def weights_init(m):
    """DCGAN initialisation: N(0, 0.02) for convolutions, N(1, 0.02) and zero bias for batch norms."""
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    """Maps a (NZ, 1, 1) latent vector to a (NC, 16, 16) image in [-1, 1]."""

    def __init__(self, ngpu):
        super().__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # NZ x 1 x 1 -> (NGF*2) x 4 x 4
            nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(NGF * 2),
            nn.ReLU(True),
            # -> NGF x 8 x 8
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NGF),
            nn.ReLU(True),
            # -> NC x 16 x 16
            nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        """Generate a batch of images, spread over the GPUs when there are several."""
        if input.is_cuda and self.ngpu > 1:
            return nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        return self.main(input)


class Discriminator(nn.Module):
    """Maps a (NC, 16, 16) image to the probability that it is real."""

    def __init__(self, ngpu):
        super().__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # NC x 16 x 16 -> NDF x 8 x 8
            nn.Conv2d(NC, NDF, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # -> (NDF*2) x 4 x 4
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NDF * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # -> 1 x 1 x 1
            nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        """Score a batch of images, one probability per image."""
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)
        return output.view(-1, 1).squeeze(1)


# random images in [-1, 1] stand in for the dataset
images = torch.rand(3 * BATCH_SIZE, NC, IMAGE_SIZE, IMAGE_SIZE) * 2 - 1
dataloader = DataLoader(TensorDataset(images), batch_size=BATCH_SIZE, shuffle=True)

netG = Generator(NGPU).to(device)
netG.apply(weights_init)
netD = Discriminator(NGPU).to(device)
netD.apply(weights_init)

criterion = nn.BCELoss()

fixed_noise = torch.randn(BATCH_SIZE, NZ, 1, 1, device=device)
real_label = 1
fake_label = 0

optimizerD = optim.Adam(netD.parameters(), lr=LR, betas=(BETA1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=LR, betas=(BETA1, 0.999))

with tempfile.TemporaryDirectory() as outf:
    for epoch in range(NITER):
        for i, data in enumerate(dataloader, 0):
            ############################
            # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            # train with real
            netD.zero_grad()
            real_cpu = data[0].to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=torch.float, device=device)

            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()

            # train with fake
            noise = torch.randn(batch_size, NZ, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            ############################
            # (2) Update G: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for the generator cost
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()

            print(
                f"[{epoch}/{NITER}][{i}/{len(dataloader)}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}"
            )
            if i == 0:
                torch.save(real_cpu.cpu(), os.path.join(outf, "real_samples.pt"))
                fake = netG(fixed_noise)
                torch.save(fake.detach().cpu(), os.path.join(outf, f"fake_samples_epoch_{epoch:03d}.pt"))

        # do checkpointing
        torch.save(netG.state_dict(), os.path.join(outf, f"netG_epoch_{epoch}.pth"))
        torch.save(netD.state_dict(), os.path.join(outf, f"netD_epoch_{epoch}.pth"))

print(f"done loss_D={errD.item():.4f} loss_G={errG.item():.4f}")
