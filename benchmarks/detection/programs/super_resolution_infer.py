"""Train a sub-pixel convolution super-resolution net briefly, save it, load it back and upscale one image.

Modeled on: https://github.com/pytorch/examples (super_resolution/model.py, main.py and super_resolve.py).
Kept: the device logic (a --cuda style switch that falls back to the CPU, model and batches moved .to(device), PSNR
read with .item() under torch.no_grad(), the weights saved with torch.save and loaded with
torch.load(path, map_location=device), model.eval(), the input moved to the device, out = model(input).cpu(),
then out[0].detach().numpy() scaled and clipped with numpy). Shrunk: synthetic smooth 24x24 luminance images
instead of BSDS300 (no PIL), narrower convolutions, a handful of Adam steps, the checkpoint in a temporary folder.
"""

import argparse
import os
import tempfile
from math import log10

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    """Efficient sub-pixel CNN: three feature convolutions, then upscale_factor**2 channels and a PixelShuffle."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(8, upscale_factor**2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def make_images(n, size):
    """Smooth random images in [0, 1]: upsampled noise, like the Y channel of a natural photo."""
    coarse = torch.rand(n, 1, size // 4, size // 4)
    return F.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=False).clamp(0, 1)


def make_dataset(n, size, upscale_factor):
    """(low resolution input, high resolution target) pairs, the input downscaled from the target."""
    target = make_images(n, size)
    input = F.avg_pool2d(target, upscale_factor)
    return TensorDataset(input, target)


parser = argparse.ArgumentParser(description="Tiny super-resolution example")
parser.add_argument("--upscale_factor", type=int, default=3, help="super resolution upscale factor")
parser.add_argument("--no-cuda", action="store_true", help="run on the CPU even when a GPU is available")
parser.add_argument("--nEpochs", type=int, default=3, help="number of epochs to train for")
parser.add_argument("--lr", type=float, default=0.01, help="learning rate")
parser.add_argument("--seed", type=int, default=0, help="random seed")
opt = parser.parse_args()

use_cuda = not opt.no_cuda and torch.cuda.is_available()
torch.manual_seed(opt.seed)
device = torch.device("cuda" if use_cuda else "cpu")

print("===> Loading datasets")
crop_size = 24
training_data_loader = DataLoader(make_dataset(32, crop_size, opt.upscale_factor), batch_size=8, shuffle=True)
testing_data_loader = DataLoader(make_dataset(8, crop_size, opt.upscale_factor), batch_size=4, shuffle=False)

print("===> Building model")
model = Net(upscale_factor=opt.upscale_factor).to(device)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=opt.lr)


def train(epoch):
    """One pass over the training images."""
    epoch_loss = 0
    for batch in training_data_loader:
        input, target = batch[0].to(device), batch[1].to(device)

        optimizer.zero_grad()
        loss = criterion(model(input), target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()
    print(f"===> Epoch {epoch} Complete: Avg. Loss: {epoch_loss / len(training_data_loader):.4f}")


def test():
    """Average PSNR over the test images."""
    avg_psnr = 0
    with torch.no_grad():
        for batch in testing_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)

            prediction = model(input)
            mse = criterion(prediction, target)
            psnr = 10 * log10(1 / mse.item())
            avg_psnr += psnr
    avg_psnr /= len(testing_data_loader)
    print(f"===> Avg. PSNR: {avg_psnr:.4f} dB")
    return avg_psnr


with tempfile.TemporaryDirectory() as tmp:
    model_out_path = os.path.join(tmp, "model_epoch_{}.pth")
    for epoch in range(1, opt.nEpochs + 1):
        train(epoch)
        test()
        torch.save(model.state_dict(), model_out_path.format(epoch))
        print(f"Checkpoint saved to {model_out_path.format(epoch)}")

    # Inference, as super_resolve.py does it: a fresh model, the saved weights, one low resolution image.
    model = Net(upscale_factor=opt.upscale_factor).to(device)
    model.load_state_dict(torch.load(model_out_path.format(opt.nEpochs), map_location=device, weights_only=True))
    model.eval()

    target = make_images(1, crop_size)  # the "photo", 1 x 1 x H x W in [0, 1]
    input = F.avg_pool2d(target, opt.upscale_factor)  # what ToTensor() of the small Y channel would give
    with torch.no_grad():
        input = input.to(device)
        out = model(input).cpu()

out_img_y = out[0].detach().numpy()
out_img_y *= 255.0
out_img_y = out_img_y.clip(0, 255)
out_img_y = np.uint8(out_img_y[0])
print("output image", out_img_y.shape, out_img_y.dtype)

reference = np.uint8(target[0, 0].numpy() * 255.0)
mse = np.mean((out_img_y.astype(np.float64) - reference) ** 2)
print(f"done psnr={10 * log10(255.0**2 / mse):.2f}")
