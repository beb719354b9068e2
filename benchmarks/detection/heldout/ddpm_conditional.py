"""Trains a class-conditional DDPM with an EMA copy and classifier-free guidance, samples, saves and reloads it.

Modeled on: dome272/Diffusion-Models-pytorch, ddpm_conditional.py and modules.py
(https://github.com/dome272/Diffusion-Models-pytorch/blob/3ed73b91c9542d5e85ef40a4594849553f64bca5/ddpm_conditional.py,
https://github.com/dome272/Diffusion-Models-pytorch/blob/3ed73b91c9542d5e85ef40a4594849553f64bca5/modules.py).

Kept: `device = args.device` handed to everything as a string; `UNet_conditional(..., device=...)` keeps that string
in `self.device` and builds its sinusoidal encoding with `torch.arange(..., device=self.device)` inside forward;
`Diffusion(img_size=..., device=device)` keeps the noise schedule as plain tensors (`self.beta =
prepare_noise_schedule().to(device)`, `alpha`, `alpha_hat` derived from it) that are indexed with device timesteps;
the batch moved with `images.to(device)` / `labels.to(device)`, timesteps drawn on the host and moved with
`.to(device)`, labels dropped to None 10% of the time through `np.random.random()`; the EMA model made with
`copy.deepcopy(model).eval().requires_grad_(False)` and updated through `.data` assignment after a copy-only warm-up;
`sample()` calling `model.eval()`, working under `torch.no_grad()`, making noise with
`torch.randn(...).to(self.device)` and `(torch.ones(n) * i).long().to(self.device)`, mixing the unconditional
prediction with `torch.lerp`, then `model.train()` (also on the EMA model, as the author does) and returning uint8
images; sampling labels made with `torch.arange(...).long().to(device)`; `torch.save` of model, EMA and optimizer
state_dicts; and the author's commented-out inference snippet (a fresh `UNet_conditional(...).to(device)`,
`torch.load(ckpt)` without map_location, `load_state_dict`, `torch.Tensor([c] * n).long().to(device)` labels,
`sample(..., cfg_scale=0)`).

Shrunk: 8x8 synthetic images of four stripe/checker classes instead of CIFAR-10, channel widths divided by 8, time_dim
32, 10 noise steps, 3 epochs of 8 steps with sampling after epochs 0 and 2 (the author: every 10th), an EMA warm-up of
8 steps instead of 2000, samples summarised by their mean instead of written as JPEGs, no tensorboard/tqdm/logging,
files in a temporary directory; `args.device` is cuda only when available, and `train()` passes `device=device` to
`UNet_conditional`, whose default is "cuda" (the author's call relies on that default, which only works where CUDA
exists).
"""
import copy
import os
import random
import tempfile
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, TensorDataset


# ----------------------------------------------------------------------------- modules.py


class EMA:
    def __init__(self, beta):
        super().__init__()
        self.beta = beta
        self.step = 0

    def update_model_average(self, ma_model, current_model):
        for current_params, ma_params in zip(current_model.parameters(), ma_model.parameters()):
            old_weight, up_weight = ma_params.data, current_params.data
            ma_params.data = self.update_average(old_weight, up_weight)

    def update_average(self, old, new):
        if old is None:
            return new
        return old * self.beta + (1 - self.beta) * new

    def step_ema(self, ema_model, model, step_start_ema=8):
        if self.step < step_start_ema:
            self.reset_parameters(ema_model, model)
            self.step += 1
            return
        self.update_model_average(ema_model, model)
        self.step += 1

    def reset_parameters(self, ema_model, model):
        ema_model.load_state_dict(model.state_dict())


class SelfAttention(nn.Module):
    def __init__(self, channels, size):
        super(SelfAttention, self).__init__()
        self.channels = channels
        self.size = size
        self.mha = nn.MultiheadAttention(channels, 4, batch_first=True)
        self.ln = nn.LayerNorm([channels])
        self.ff_self = nn.Sequential(
            nn.LayerNorm([channels]),
            nn.Linear(channels, channels),
            nn.GELU(),
            nn.Linear(channels, channels),
        )

    def forward(self, x):
        x = x.view(-1, self.channels, self.size * self.size).swapaxes(1, 2)
        x_ln = self.ln(x)
        attention_value, _ = self.mha(x_ln, x_ln, x_ln)
        attention_value = attention_value + x
        attention_value = self.ff_self(attention_value) + attention_value
        return attention_value.swapaxes(2, 1).view(-1, self.channels, self.size, self.size)


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels, mid_channels=None, residual=False):
        super().__init__()
        self.residual = residual
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.GroupNorm(1, mid_channels),
            nn.GELU(),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.GroupNorm(1, out_channels),
        )

    def forward(self, x):
        if self.residual:
            return F.gelu(x + self.double_conv(x))
        else:
            return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels, emb_dim=32):
        super().__init__()
        self.maxpool_conv = nn.Sequential(
            nn.MaxPool2d(2),
            DoubleConv(in_channels, in_channels, residual=True),
            DoubleConv(in_channels, out_channels),
        )
        self.emb_layer = nn.Sequential(nn.SiLU(), nn.Linear(emb_dim, out_channels))

    def forward(self, x, t):
        x = self.maxpool_conv(x)
        emb = self.emb_layer(t)[:, :, None, None].repeat(1, 1, x.shape[-2], x.shape[-1])
        return x + emb


class Up(nn.Module):
    def __init__(self, in_channels, out_channels, emb_dim=32):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = nn.Sequential(
            DoubleConv(in_channels, in_channels, residual=True),
            DoubleConv(in_channels, out_channels, in_channels // 2),
        )
        self.emb_layer = nn.Sequential(nn.SiLU(), nn.Linear(emb_dim, out_channels))

    def forward(self, x, skip_x, t):
        x = self.up(x)
        x = torch.cat([skip_x, x], dim=1)
        x = self.conv(x)
        emb = self.emb_layer(t)[:, :, None, None].repeat(1, 1, x.shape[-2], x.shape[-1])
        return x + emb


class UNet_conditional(nn.Module):
    def __init__(self, c_in=3, c_out=3, time_dim=32, num_classes=None, device="cuda"):
        super().__init__()
        self.device = device
        self.time_dim = time_dim
        self.inc = DoubleConv(c_in, 16)
        self.down1 = Down(16, 32, emb_dim=time_dim)
        self.sa1 = SelfAttention(32, 4)
        self.down2 = Down(32, 32, emb_dim=time_dim)
        self.sa2 = SelfAttention(32, 2)

        self.bot1 = DoubleConv(32, 64)
        self.bot3 = DoubleConv(64, 32)

        self.up1 = Up(64, 16, emb_dim=time_dim)
        self.sa4 = SelfAttention(16, 4)
        self.up2 = Up(32, 16, emb_dim=time_dim)
        self.sa5 = SelfAttention(16, 8)
        self.outc = nn.Conv2d(16, c_out, kernel_size=1)

        if num_classes is not None:
            self.label_emb = nn.Embedding(num_classes, time_dim)

    def pos_encoding(self, t, channels):
        inv_freq = 1.0 / (
            10000
            ** (torch.arange(0, channels, 2, device=self.device).float() / channels)
        )
        pos_enc_a = torch.sin(t.repeat(1, channels // 2) * inv_freq)
        pos_enc_b = torch.cos(t.repeat(1, channels // 2) * inv_freq)
        pos_enc = torch.cat([pos_enc_a, pos_enc_b], dim=-1)
        return pos_enc

    def forward(self, x, t, y):
        t = t.unsqueeze(-1).type(torch.float)
        t = self.pos_encoding(t, self.time_dim)

        if y is not None:
            t += self.label_emb(y)

        x1 = self.inc(x)
        x2 = self.down1(x1, t)
        x2 = self.sa1(x2)
        x3 = self.down2(x2, t)
        x3 = self.sa2(x3)

        x3 = self.bot1(x3)
        x3 = self.bot3(x3)

        x = self.up1(x3, x2, t)
        x = self.sa4(x)
        x = self.up2(x, x1, t)
        x = self.sa5(x)
        output = self.outc(x)
        return output


# ----------------------------------------------------------------------------- utils.py (synthetic stand-in for get_data)


def get_data(args):
    """Four classes of small RGB patterns in [-1, 1]: horizontal stripes, vertical stripes, checkerboard, centre blob."""
    g = torch.Generator().manual_seed(args.seed)
    n, s = args.n_images, args.image_size
    yy, xx = torch.meshgrid(torch.arange(s), torch.arange(s), indexing="ij")
    patterns = torch.stack([
        ((yy // 2) % 2).float(),
        ((xx // 2) % 2).float(),
        (((yy // 4) + (xx // 4)) % 2).float(),
        (((yy - s / 2) ** 2 + (xx - s / 2) ** 2) < (s / 3) ** 2).float(),
    ])  # (4, s, s)
    labels = torch.randint(0, args.num_classes, (n,), generator=g)
    colours = torch.rand(n, 3, 1, 1, generator=g) * 0.5 + 0.5
    images = patterns[labels][:, None] * colours * 2 - 1 + 0.05 * torch.randn(n, 3, s, s, generator=g)
    return DataLoader(TensorDataset(images.clamp(-1, 1), labels), batch_size=args.batch_size, shuffle=True)


def setup_logging(root, run_name):
    os.makedirs(os.path.join(root, "models", run_name), exist_ok=True)
    os.makedirs(os.path.join(root, "results", run_name), exist_ok=True)


def describe_images(tag, images, labels):
    means = images.float().mean(dim=(1, 2, 3)).cpu().tolist()
    print(f"{tag}: " + " ".join(f"class {int(c)}={m:.2f}" for c, m in zip(labels.tolist(), means)))


# ----------------------------------------------------------------------------- ddpm_conditional.py


class Diffusion:
    def __init__(self, noise_steps=1000, beta_start=1e-4, beta_end=0.02, img_size=256, device="cuda"):
        self.noise_steps = noise_steps
        self.beta_start = beta_start
        self.beta_end = beta_end

        self.beta = self.prepare_noise_schedule().to(device)
        self.alpha = 1. - self.beta
        self.alpha_hat = torch.cumprod(self.alpha, dim=0)

        self.img_size = img_size
        self.device = device

    def prepare_noise_schedule(self):
        return torch.linspace(self.beta_start, self.beta_end, self.noise_steps)

    def noise_images(self, x, t):
        sqrt_alpha_hat = torch.sqrt(self.alpha_hat[t])[:, None, None, None]
        sqrt_one_minus_alpha_hat = torch.sqrt(1 - self.alpha_hat[t])[:, None, None, None]
        eps = torch.randn_like(x)
        return sqrt_alpha_hat * x + sqrt_one_minus_alpha_hat * eps, eps

    def sample_timesteps(self, n):
        return torch.randint(low=1, high=self.noise_steps, size=(n,))

    def sample(self, model, n, labels, cfg_scale=3):
        model.eval()
        with torch.no_grad():
            x = torch.randn((n, 3, self.img_size, self.img_size)).to(self.device)
            for i in reversed(range(1, self.noise_steps)):
                t = (torch.ones(n) * i).long().to(self.device)
                predicted_noise = model(x, t, labels)
                if cfg_scale > 0:
                    uncond_predicted_noise = model(x, t, None)
                    predicted_noise = torch.lerp(uncond_predicted_noise, predicted_noise, cfg_scale)
                alpha = self.alpha[t][:, None, None, None]
                alpha_hat = self.alpha_hat[t][:, None, None, None]
                beta = self.beta[t][:, None, None, None]
                if i > 1:
                    noise = torch.randn_like(x)
                else:
                    noise = torch.zeros_like(x)
                x = 1 / torch.sqrt(alpha) * (x - ((1 - alpha) / (torch.sqrt(1 - alpha_hat))) * predicted_noise) + torch.sqrt(beta) * noise
        model.train()
        x = (x.clamp(-1, 1) + 1) / 2
        x = (x * 255).type(torch.uint8)
        return x


def train(args):
    setup_logging(args.root, args.run_name)
    device = args.device
    dataloader = get_data(args)
    model = UNet_conditional(num_classes=args.num_classes, device=device).to(device)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr)
    mse = nn.MSELoss()
    diffusion = Diffusion(noise_steps=args.noise_steps, img_size=args.image_size, device=device)
    ema = EMA(0.995)
    ema_model = copy.deepcopy(model).eval().requires_grad_(False)

    for epoch in range(args.epochs):
        epoch_loss = 0.0
        for i, (images, labels) in enumerate(dataloader):
            images = images.to(device)
            labels = labels.to(device)
            t = diffusion.sample_timesteps(images.shape[0]).to(device)
            x_t, noise = diffusion.noise_images(images, t)
            if np.random.random() < 0.1:
                labels = None
            predicted_noise = model(x_t, t, labels)
            loss = mse(noise, predicted_noise)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            ema.step_ema(ema_model, model)

            epoch_loss += loss.item()
        print(f"epoch {epoch}: MSE {epoch_loss / len(dataloader):.4f}")

        if epoch % 2 == 0:
            labels = torch.arange(args.num_classes).long().to(device)
            sampled_images = diffusion.sample(model, n=len(labels), labels=labels)
            ema_sampled_images = diffusion.sample(ema_model, n=len(labels), labels=labels)
            describe_images(f"  epoch {epoch} samples", sampled_images, labels)
            describe_images(f"  epoch {epoch} ema samples", ema_sampled_images, labels)
            torch.save(model.state_dict(), os.path.join(args.root, "models", args.run_name, f"ckpt.pt"))
            torch.save(ema_model.state_dict(), os.path.join(args.root, "models", args.run_name, f"ema_ckpt.pt"))
            torch.save(optimizer.state_dict(), os.path.join(args.root, "models", args.run_name, f"optim.pt"))


def launch(root):
    args = SimpleNamespace()
    args.run_name = "DDPM_conditional"
    args.epochs = 3
    args.batch_size = 8
    args.n_images = 64
    args.image_size = 8
    args.num_classes = 4
    args.noise_steps = 10
    args.seed = 0
    args.root = root
    args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.lr = 3e-4
    train(args)
    return args


if __name__ == '__main__':
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as root:
        args = launch(root)

        # the author's inference snippet, at the bottom of ddpm_conditional.py
        device = args.device
        model = UNet_conditional(num_classes=args.num_classes, device=device).to(device)
        ckpt = torch.load(os.path.join(root, "models", args.run_name, "ema_ckpt.pt"))
        model.load_state_dict(ckpt)
        diffusion = Diffusion(noise_steps=args.noise_steps, img_size=args.image_size, device=device)
        n = 4
        y = torch.Tensor([2] * n).long().to(device)
        x = diffusion.sample(model, n, y, cfg_scale=0)
        describe_images("reloaded ema model, cfg_scale=0", x, y)
