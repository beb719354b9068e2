"""Trains a StyleGAN2 generator/discriminator pair (Karras et al.) with lazy R1 and path-length regularisation and
an EMA generator, resumes from its own checkpoint and samples with the truncation trick, as rosinality's
train.py and generate.py do. The device is a string chosen in the main flow; generator, discriminator and
``g_ema`` get ``.to(device)`` before the Adam optimizers; latents come from `make_noise`/`mixing_noise` with
``torch.randn(..., device=device)``; skipped losses start as ``torch.tensor(0.0, device=device)``; the moved real
batch gets ``requires_grad = True`` for R1; `accumulate` updates ``g_ema`` through ``.data``; per-layer noise is a
registered buffer or ``image.new_empty(...).normal_()``; `mean_latent` samples on ``self.input.input.device``;
checkpoints load with ``map_location=lambda storage, loc: storage`` (generate.py: plain ``torch.load``); samples
are drawn under ``torch.no_grad()`` with ``g_ema.eval()`` and read with ``.cpu().numpy()``.

Modeled on: rosinality/stylegan2-pytorch, train.py, model.py, generate.py, op/fused_act.py and op/upfirdn2d.py at
commit bef283a1c24087da704d16c30abc8e36e63efa0e
(https://github.com/rosinality/stylegan2-pytorch/tree/bef283a1c24087da704d16c30abc8e36e63efa0e).

Kept: model.py's layers (`EqualConv2d`, `EqualLinear`, `ModulatedConv2d` with grouped conv, demodulation and
transposed-conv + blur upsampling, `NoiseInjection`, `ConstantInput`, `StyledConv`, `ToRGB`, `Upsample`, `Blur`),
`Generator` (style MLP, mixing with ``inject_index``, truncation, noise buffers, `mean_latent`), `Discriminator`
(`ConvLayer`, `ResBlock`, minibatch stddev); `FusedLeakyReLU`; train.py's helpers, four losses and `train` (lazy R1
every ``d_reg_every``, lazy path length every ``g_reg_every`` with ``path_batch_shrink``, EMA, fixed ``sample_z``,
checkpoints holding ``args``); the main flow (reg ratios, ``accumulate(g_ema, generator, 0)``, resume with
``start_iter`` parsed from the file name); generate.py's `generate` and truncation mean.

Changed to run here: ``device = "cuda"`` falls back to ``"cpu"``; the compiled CUDA ops become native PyTorch for
every device (``upfirdn2d`` as zero insertion + pad + ``F.conv2d``, the CPU formula of ``fused_leaky_relu``,
``F.conv2d`` for `conv2d_gradfix`); the LMDB dataset is synthetic 16x16 blob images made in memory; samples are
.npy arrays, not PNG grids; ``torch.load`` gets ``weights_only=False`` (the checkpoint pickles ``args``); ADA, wandb,
tqdm, DDP and its helpers, the unused downsampling branch of `ModulatedConv2d`, `Generator.make_noise` and
``input_is_latent`` are left out; sample/checkpoint intervals are arguments; blank lines inside classes dropped.
Shrunk: size 16, latent 32, 2 mapping layers, channels 32/32/16 (x channel_multiplier/2) instead of 512...,
batch 4, 4 samples, 8 iterations, then resumed from iteration 4 to 10; d_reg_every 4, g_reg_every 2.
"""
import argparse
import math
import os
import random
import tempfile

import numpy as np
import torch
from torch import nn, autograd, optim
from torch.nn import functional as F
from torch.utils import data

class FusedLeakyReLU(nn.Module):
    def __init__(self, channel, bias=True, negative_slope=0.2, scale=2 ** 0.5):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channel)) if bias else None
        self.negative_slope, self.scale = negative_slope, scale
    def forward(self, input):
        return fused_leaky_relu(input, self.bias, self.negative_slope, self.scale)

def fused_leaky_relu(input, bias=None, negative_slope=0.2, scale=2 ** 0.5):
    if bias is not None:
        rest_dim = [1] * (input.ndim - bias.ndim - 1)
        return F.leaky_relu(input + bias.view(1, bias.shape[0], *rest_dim), negative_slope=0.2) * scale
    return F.leaky_relu(input, negative_slope=0.2) * scale

def upfirdn2d(input, kernel, up=1, down=1, pad=(0, 0)):
    """Upsample (zero insertion), pad, FIR filter, downsample: upfirdn2d_native for non-negative pads."""
    batch, channel, in_h, in_w = input.shape
    out = input.reshape(batch * channel, 1, in_h, 1, in_w, 1)
    out = F.pad(out, [0, up - 1, 0, 0, 0, up - 1]).view(batch * channel, 1, in_h * up, in_w * up)
    out = F.pad(out, [pad[0], pad[1], pad[0], pad[1]])
    out = F.conv2d(out, torch.flip(kernel, [0, 1]).view(1, 1, *kernel.shape))
    out = out[:, :, ::down, ::down]
    return out.reshape(batch, channel, out.shape[2], out.shape[3])

class PixelNorm(nn.Module):
    def forward(self, input):
        return input * torch.rsqrt(torch.mean(input ** 2, dim=1, keepdim=True) + 1e-8)

def make_kernel(k):
    k = torch.tensor(k, dtype=torch.float32)
    if k.ndim == 1:
        k = k[None, :] * k[:, None]
    k /= k.sum()
    return k

class Upsample(nn.Module):
    def __init__(self, kernel, factor=2):
        super().__init__()
        self.factor = factor
        kernel = make_kernel(kernel) * (factor ** 2)
        self.register_buffer("kernel", kernel)
        p = kernel.shape[0] - factor
        self.pad = ((p + 1) // 2 + factor - 1, p // 2)
    def forward(self, input):
        return upfirdn2d(input, self.kernel, up=self.factor, down=1, pad=self.pad)

class Blur(nn.Module):
    def __init__(self, kernel, pad, upsample_factor=1):
        super().__init__()
        kernel = make_kernel(kernel)
        if upsample_factor > 1:
            kernel = kernel * (upsample_factor ** 2)
        self.register_buffer("kernel", kernel)
        self.pad = pad
    def forward(self, input):
        return upfirdn2d(input, self.kernel, pad=self.pad)

class EqualConv2d(nn.Module):
    def __init__(self, in_channel, out_channel, kernel_size, stride=1, padding=0, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channel, in_channel, kernel_size, kernel_size))
        self.scale = 1 / math.sqrt(in_channel * kernel_size ** 2)
        self.stride, self.padding = stride, padding
        self.bias = nn.Parameter(torch.zeros(out_channel)) if bias else None
    def forward(self, input):
        return F.conv2d(input, self.weight * self.scale, bias=self.bias, stride=self.stride, padding=self.padding)

class EqualLinear(nn.Module):
    def __init__(self, in_dim, out_dim, bias=True, bias_init=0, lr_mul=1, activation=None):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim).div_(lr_mul))
        self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init)) if bias else None
        self.activation = activation
        self.scale, self.lr_mul = (1 / math.sqrt(in_dim)) * lr_mul, lr_mul
    def forward(self, input):
        if self.activation:
            out = F.linear(input, self.weight * self.scale)
            out = fused_leaky_relu(out, self.bias * self.lr_mul)
        else:
            out = F.linear(input, self.weight * self.scale, bias=self.bias * self.lr_mul)
        return out

class ModulatedConv2d(nn.Module):
    def __init__(self, in_channel, out_channel, kernel_size, style_dim, demodulate=True, upsample=False,
                 blur_kernel=[1, 3, 3, 1]):
        super().__init__()
        self.kernel_size, self.in_channel, self.out_channel = kernel_size, in_channel, out_channel
        self.upsample = upsample
        if upsample:
            factor = 2
            p = (len(blur_kernel) - factor) - (kernel_size - 1)
            self.blur = Blur(blur_kernel, pad=((p + 1) // 2 + factor - 1, p // 2 + 1), upsample_factor=factor)
        fan_in = in_channel * kernel_size ** 2
        self.scale = 1 / math.sqrt(fan_in)
        self.padding = kernel_size // 2
        self.weight = nn.Parameter(torch.randn(1, out_channel, in_channel, kernel_size, kernel_size))
        self.modulation = EqualLinear(style_dim, in_channel, bias_init=1)
        self.demodulate = demodulate
    def forward(self, input, style):
        batch, in_channel, height, width = input.shape
        style = self.modulation(style).view(batch, 1, in_channel, 1, 1)
        weight = self.scale * self.weight * style
        if self.demodulate:
            demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
            weight = weight * demod.view(batch, self.out_channel, 1, 1, 1)
        weight = weight.view(batch * self.out_channel, in_channel, self.kernel_size, self.kernel_size)
        if self.upsample:
            input = input.view(1, batch * in_channel, height, width)
            weight = weight.view(batch, self.out_channel, in_channel, self.kernel_size, self.kernel_size)
            weight = weight.transpose(1, 2).reshape(batch * in_channel, self.out_channel, self.kernel_size,
                                                    self.kernel_size)
            out = F.conv_transpose2d(input, weight, padding=0, stride=2, groups=batch)
            _, _, height, width = out.shape
            out = out.view(batch, self.out_channel, height, width)
            out = self.blur(out)
        else:
            input = input.view(1, batch * in_channel, height, width)
            out = F.conv2d(input, weight, padding=self.padding, groups=batch)
            _, _, height, width = out.shape
            out = out.view(batch, self.out_channel, height, width)
        return out

class NoiseInjection(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
    def forward(self, image, noise=None):
        if noise is None:
            batch, _, height, width = image.shape
            noise = image.new_empty(batch, 1, height, width).normal_()
        return image + self.weight * noise

class ConstantInput(nn.Module):
    def __init__(self, channel, size=4):
        super().__init__()
        self.input = nn.Parameter(torch.randn(1, channel, size, size))
    def forward(self, input):
        return self.input.repeat(input.shape[0], 1, 1, 1)

class StyledConv(nn.Module):
    def __init__(self, in_channel, out_channel, kernel_size, style_dim, upsample=False, blur_kernel=[1, 3, 3, 1],
                 demodulate=True):
        super().__init__()
        self.conv = ModulatedConv2d(in_channel, out_channel, kernel_size, style_dim, upsample=upsample,
                                    blur_kernel=blur_kernel, demodulate=demodulate)
        self.noise = NoiseInjection()
        self.activate = FusedLeakyReLU(out_channel)
    def forward(self, input, style, noise=None):
        out = self.noise(self.conv(input, style), noise=noise)
        return self.activate(out)

class ToRGB(nn.Module):
    def __init__(self, in_channel, style_dim, upsample=True, blur_kernel=[1, 3, 3, 1]):
        super().__init__()
        if upsample:
            self.upsample = Upsample(blur_kernel)
        self.conv = ModulatedConv2d(in_channel, 3, 1, style_dim, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))
    def forward(self, input, style, skip=None):
        out = self.conv(input, style) + self.bias
        if skip is not None:
            skip = self.upsample(skip)
            out = out + skip
        return out

CHANNELS = {4: 32, 8: 32, 16: 16, 32: 16}

class Generator(nn.Module):
    def __init__(self, size, style_dim, n_mlp, channel_multiplier=2, blur_kernel=[1, 3, 3, 1], lr_mlp=0.01):
        super().__init__()
        self.size, self.style_dim = size, style_dim
        layers = [PixelNorm()]
        for i in range(n_mlp):
            layers.append(EqualLinear(style_dim, style_dim, lr_mul=lr_mlp, activation="fused_lrelu"))
        self.style = nn.Sequential(*layers)
        self.channels = {k: v * channel_multiplier // 2 for k, v in CHANNELS.items()}
        self.input = ConstantInput(self.channels[4])
        self.conv1 = StyledConv(self.channels[4], self.channels[4], 3, style_dim, blur_kernel=blur_kernel)
        self.to_rgb1 = ToRGB(self.channels[4], style_dim, upsample=False)
        self.log_size = int(math.log(size, 2))
        self.num_layers = (self.log_size - 2) * 2 + 1
        self.convs, self.to_rgbs = nn.ModuleList(), nn.ModuleList()
        self.noises = nn.Module()
        in_channel = self.channels[4]
        for layer_idx in range(self.num_layers):
            res = (layer_idx + 5) // 2
            self.noises.register_buffer(f"noise_{layer_idx}", torch.randn(1, 1, 2 ** res, 2 ** res))
        for i in range(3, self.log_size + 1):
            out_channel = self.channels[2 ** i]
            self.convs.append(StyledConv(in_channel, out_channel, 3, style_dim, upsample=True,
                                         blur_kernel=blur_kernel))
            self.convs.append(StyledConv(out_channel, out_channel, 3, style_dim, blur_kernel=blur_kernel))
            self.to_rgbs.append(ToRGB(out_channel, style_dim))
            in_channel = out_channel
        self.n_latent = self.log_size * 2 - 2
    def mean_latent(self, n_latent):
        latent_in = torch.randn(n_latent, self.style_dim, device=self.input.input.device)
        latent = self.style(latent_in).mean(0, keepdim=True)
        return latent
    def forward(self, styles, return_latents=False, inject_index=None, truncation=1, truncation_latent=None,
                noise=None, randomize_noise=True):
        styles = [self.style(s) for s in styles]
        if noise is None:
            if randomize_noise:
                noise = [None] * self.num_layers
            else:
                noise = [getattr(self.noises, f"noise_{i}") for i in range(self.num_layers)]
        if truncation < 1:
            styles = [truncation_latent + truncation * (style - truncation_latent) for style in styles]
        if len(styles) < 2:
            inject_index = self.n_latent
            latent = styles[0].unsqueeze(1).repeat(1, inject_index, 1)
        else:
            if inject_index is None:
                inject_index = random.randint(1, self.n_latent - 1)
            latent = styles[0].unsqueeze(1).repeat(1, inject_index, 1)
            latent2 = styles[1].unsqueeze(1).repeat(1, self.n_latent - inject_index, 1)
            latent = torch.cat([latent, latent2], 1)
        out = self.input(latent)
        out = self.conv1(out, latent[:, 0], noise=noise[0])
        skip = self.to_rgb1(out, latent[:, 1])
        i = 1
        for conv1, conv2, noise1, noise2, to_rgb in zip(self.convs[::2], self.convs[1::2], noise[1::2], noise[2::2],
                                                        self.to_rgbs):
            out = conv1(out, latent[:, i], noise=noise1)
            out = conv2(out, latent[:, i + 1], noise=noise2)
            skip = to_rgb(out, latent[:, i + 2], skip)
            i += 2
        image = skip
        return (image, latent) if return_latents else (image, None)

class ConvLayer(nn.Sequential):
    def __init__(self, in_channel, out_channel, kernel_size, downsample=False, blur_kernel=[1, 3, 3, 1], bias=True,
                 activate=True):
        layers = []
        if downsample:
            factor = 2
            p = (len(blur_kernel) - factor) + (kernel_size - 1)
            layers.append(Blur(blur_kernel, pad=((p + 1) // 2, p // 2)))
            stride, self.padding = 2, 0
        else:
            stride, self.padding = 1, kernel_size // 2
        layers.append(EqualConv2d(in_channel, out_channel, kernel_size, padding=self.padding, stride=stride,
                                  bias=bias and not activate))
        if activate:
            layers.append(FusedLeakyReLU(out_channel, bias=bias))
        super().__init__(*layers)

class ResBlock(nn.Module):
    def __init__(self, in_channel, out_channel, blur_kernel=[1, 3, 3, 1]):
        super().__init__()
        self.conv1 = ConvLayer(in_channel, in_channel, 3)
        self.conv2 = ConvLayer(in_channel, out_channel, 3, downsample=True)
        self.skip = ConvLayer(in_channel, out_channel, 1, downsample=True, activate=False, bias=False)
    def forward(self, input):
        out = self.conv1(input)
        out = self.conv2(out)
        skip = self.skip(input)
        return (out + skip) / math.sqrt(2)

class Discriminator(nn.Module):
    def __init__(self, size, channel_multiplier=2, blur_kernel=[1, 3, 3, 1]):
        super().__init__()
        channels = {k: v * channel_multiplier // 2 for k, v in CHANNELS.items()}
        convs = [ConvLayer(3, channels[size], 1)]
        log_size = int(math.log(size, 2))
        in_channel = channels[size]
        for i in range(log_size, 2, -1):
            out_channel = channels[2 ** (i - 1)]
            convs.append(ResBlock(in_channel, out_channel, blur_kernel))
            in_channel = out_channel
        self.convs = nn.Sequential(*convs)
        self.stddev_group, self.stddev_feat = 4, 1
        self.final_conv = ConvLayer(in_channel + 1, channels[4], 3)
        self.final_linear = nn.Sequential(EqualLinear(channels[4] * 4 * 4, channels[4], activation="fused_lrelu"),
                                          EqualLinear(channels[4], 1))
    def forward(self, input):
        out = self.convs(input)
        batch, channel, height, width = out.shape
        group = min(batch, self.stddev_group)
        stddev = out.view(group, -1, self.stddev_feat, channel // self.stddev_feat, height, width)
        stddev = torch.sqrt(stddev.var(0, unbiased=False) + 1e-8)
        stddev = stddev.mean([2, 3, 4], keepdims=True).squeeze(2)
        stddev = stddev.repeat(group, 1, height, width)
        out = torch.cat([out, stddev], 1)
        out = self.final_conv(out).view(batch, -1)
        return self.final_linear(out)

# ---------------------------------------------------------------- dataset.py stand-in, train.py
class BlobDataset(data.Dataset):
    """Synthetic stand-in for MultiResolutionDataset: a coloured Gaussian blob on a gradient background."""
    def __init__(self, n, size, seed=0):
        rng = np.random.RandomState(seed)
        yy, xx, _ = np.mgrid[0:size, 0:size, 0:1] / (size - 1)
        cy, cx, r = rng.uniform(0.25, 0.75, (3, n, 1, 1, 1)) * np.array([1, 1, 0.4]).reshape(3, 1, 1, 1, 1)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r ** 2))
        colour, back = rng.rand(n, 1, 1, 3), rng.rand(n, 1, 1, 3) * 0.3
        self.imgs = (blob * colour + (1 - blob) * back * yy).astype(np.float32)
    def __len__(self):
        return len(self.imgs)
    def __getitem__(self, index):
        img = self.imgs[index]
        if random.random() < 0.5:  # transforms.RandomHorizontalFlip()
            img = img[:, ::-1]
        return (torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1) - 0.5) / 0.5  # Normalize((0.5,) * 3, ...)

def data_sampler(dataset, shuffle, distributed):
    if shuffle:
        return data.RandomSampler(dataset)
    else:
        return data.SequentialSampler(dataset)

def requires_grad(model, flag=True):
    for p in model.parameters():
        p.requires_grad = flag

def accumulate(model1, model2, decay=0.999):
    par1 = dict(model1.named_parameters())
    par2 = dict(model2.named_parameters())
    for k in par1.keys():
        par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)

def sample_data(loader):
    while True:
        for batch in loader:
            yield batch

def d_logistic_loss(real_pred, fake_pred):
    real_loss = F.softplus(-real_pred)
    fake_loss = F.softplus(fake_pred)
    return real_loss.mean() + fake_loss.mean()

def d_r1_loss(real_pred, real_img):
    grad_real, = autograd.grad(outputs=real_pred.sum(), inputs=real_img, create_graph=True)
    grad_penalty = grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()
    return grad_penalty

def g_nonsaturating_loss(fake_pred):
    return F.softplus(-fake_pred).mean()

def g_path_regularize(fake_img, latents, mean_path_length, decay=0.01):
    noise = torch.randn_like(fake_img) / math.sqrt(fake_img.shape[2] * fake_img.shape[3])
    grad, = autograd.grad(outputs=(fake_img * noise).sum(), inputs=latents, create_graph=True)
    path_lengths = torch.sqrt(grad.pow(2).sum(2).mean(1))
    path_mean = mean_path_length + decay * (path_lengths.mean() - mean_path_length)
    path_penalty = (path_lengths - path_mean).pow(2).mean()
    return path_penalty, path_mean.detach(), path_lengths

def make_noise(batch, latent_dim, n_noise, device):
    if n_noise == 1:
        return torch.randn(batch, latent_dim, device=device)
    noises = torch.randn(n_noise, batch, latent_dim, device=device).unbind(0)
    return noises

def mixing_noise(batch, latent_dim, prob, device):
    if prob > 0 and random.random() < prob:
        return make_noise(batch, latent_dim, 2, device)
    else:
        return [make_noise(batch, latent_dim, 1, device)]

def train(args, loader, generator, discriminator, g_optim, d_optim, g_ema, device):
    loader = sample_data(loader)
    pbar = range(args.iter)
    mean_path_length = 0
    r1_loss = torch.tensor(0.0, device=device)
    path_loss = torch.tensor(0.0, device=device)
    path_lengths = torch.tensor(0.0, device=device)
    mean_path_length_avg = 0
    loss_dict = {}
    g_module, d_module = generator, discriminator
    accum = 0.5 ** (32 / (10 * 1000))
    sample_z = torch.randn(args.n_sample, args.latent, device=device)
    for idx in pbar:
        i = idx + args.start_iter
        if i > args.iter:
            print("Done!")
            break
        real_img = next(loader)
        real_img = real_img.to(device)
        requires_grad(generator, False)
        requires_grad(discriminator, True)
        noise = mixing_noise(args.batch, args.latent, args.mixing, device)
        fake_img, _ = generator(noise)
        fake_pred = discriminator(fake_img)
        real_pred = discriminator(real_img)
        d_loss = d_logistic_loss(real_pred, fake_pred)
        loss_dict["d"] = d_loss
        discriminator.zero_grad()
        d_loss.backward()
        d_optim.step()
        d_regularize = i % args.d_reg_every == 0
        if d_regularize:
            real_img.requires_grad = True
            real_pred = discriminator(real_img)
            r1_loss = d_r1_loss(real_pred, real_img)
            discriminator.zero_grad()
            (args.r1 / 2 * r1_loss * args.d_reg_every + 0 * real_pred[0]).backward()
            d_optim.step()
        loss_dict["r1"] = r1_loss
        requires_grad(generator, True)
        requires_grad(discriminator, False)
        noise = mixing_noise(args.batch, args.latent, args.mixing, device)
        fake_img, _ = generator(noise)
        fake_pred = discriminator(fake_img)
        g_loss = g_nonsaturating_loss(fake_pred)
        loss_dict["g"] = g_loss
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
        g_regularize = i % args.g_reg_every == 0
        if g_regularize:
            path_batch_size = max(1, args.batch // args.path_batch_shrink)
            noise = mixing_noise(path_batch_size, args.latent, args.mixing, device)
            fake_img, latents = generator(noise, return_latents=True)
            path_loss, mean_path_length, path_lengths = g_path_regularize(fake_img, latents, mean_path_length)
            generator.zero_grad()
            weighted_path_loss = args.path_regularize * args.g_reg_every * path_loss
            if args.path_batch_shrink:
                weighted_path_loss += 0 * fake_img[0, 0, 0, 0]
            weighted_path_loss.backward()
            g_optim.step()
            mean_path_length_avg = mean_path_length.item()
        loss_dict["path"] = path_loss
        accumulate(g_ema, g_module, accum)
        d_loss_val = loss_dict["d"].mean().item()
        g_loss_val = loss_dict["g"].mean().item()
        r1_val = loss_dict["r1"].mean().item()
        path_loss_val = loss_dict["path"].mean().item()
        print(f"{i}: d: {d_loss_val:.4f}; g: {g_loss_val:.4f}; r1: {r1_val:.4f}; "
              f"path: {path_loss_val:.4f}; mean path: {mean_path_length_avg:.4f}")
        if i % args.sample_every == 0:
            with torch.no_grad():
                g_ema.eval()
                sample, _ = g_ema([sample_z])
                np.save(os.path.join(args.out, f"sample/{str(i).zfill(6)}.npy"), sample.cpu().numpy())
        if i % args.ckpt_every == 0:
            torch.save({"g": g_module.state_dict(), "d": d_module.state_dict(), "g_ema": g_ema.state_dict(),
                        "g_optim": g_optim.state_dict(), "d_optim": d_optim.state_dict(), "args": args,
                        "ada_aug_p": 0.0}, os.path.join(args.out, f"checkpoint/{str(i).zfill(6)}.pt"))

# ---------------------------------------------------------------- generate.py
def generate(args, g_ema, device, mean_latent):
    with torch.no_grad():
        g_ema.eval()
        for i in range(args.pics):
            sample_z = torch.randn(args.sample, args.latent, device=device)
            sample, _ = g_ema([sample_z], truncation=args.truncation, truncation_latent=mean_latent)
            np.save(os.path.join(args.out, f"sample/gen_{str(i).zfill(6)}.npy"), sample.cpu().numpy())
            print('generated', tuple(sample.shape), 'mean %.4f' % sample.mean().item())

def run(out, **overrides):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    args = argparse.Namespace(**{**dict(iter=8, batch=4, n_sample=4, size=16, r1=10.0, path_regularize=2.0,
                                        path_batch_shrink=2, d_reg_every=4, g_reg_every=2, mixing=0.9, lr=0.002,
                                        channel_multiplier=2, sample_every=4, ckpt_every=4, ckpt=None), **overrides})
    args.distributed, args.out = False, out
    args.latent, args.n_mlp = 32, 2
    args.start_iter = 0
    generator = Generator(args.size, args.latent, args.n_mlp, channel_multiplier=args.channel_multiplier).to(device)
    discriminator = Discriminator(args.size, channel_multiplier=args.channel_multiplier).to(device)
    g_ema = Generator(args.size, args.latent, args.n_mlp, channel_multiplier=args.channel_multiplier).to(device)
    g_ema.eval()
    accumulate(g_ema, generator, 0)
    g_reg_ratio = args.g_reg_every / (args.g_reg_every + 1)
    d_reg_ratio = args.d_reg_every / (args.d_reg_every + 1)
    g_optim = optim.Adam(generator.parameters(), lr=args.lr * g_reg_ratio, betas=(0 ** g_reg_ratio, 0.99 ** g_reg_ratio))
    d_optim = optim.Adam(discriminator.parameters(), lr=args.lr * d_reg_ratio,
                         betas=(0 ** d_reg_ratio, 0.99 ** d_reg_ratio))
    if args.ckpt is not None:
        print("load model:", args.ckpt)
        ckpt = torch.load(args.ckpt, map_location=lambda storage, loc: storage, weights_only=False)
        try:
            ckpt_name = os.path.basename(args.ckpt)
            args.start_iter = int(os.path.splitext(ckpt_name)[0])
        except ValueError:
            pass
        generator.load_state_dict(ckpt["g"])
        discriminator.load_state_dict(ckpt["d"])
        g_ema.load_state_dict(ckpt["g_ema"])
        g_optim.load_state_dict(ckpt["g_optim"])
        d_optim.load_state_dict(ckpt["d_optim"])
    dataset = BlobDataset(32, args.size)
    loader = data.DataLoader(dataset, batch_size=args.batch,
                             sampler=data_sampler(dataset, shuffle=True, distributed=args.distributed), drop_last=True)
    train(args, loader, generator, discriminator, g_optim, d_optim, g_ema, device)
    return device, g_ema

if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    with tempfile.TemporaryDirectory() as out:
        os.makedirs(os.path.join(out, "sample"))
        os.makedirs(os.path.join(out, "checkpoint"))
        run(out)
        device, g_ema = run(out, iter=10, ckpt=os.path.join(out, "checkpoint", "000004.pt"))
        gen_args = argparse.Namespace(size=16, sample=2, pics=2, truncation=0.7, truncation_mean=64, latent=32,
                                      n_mlp=2, channel_multiplier=2, out=out, ckpt=f"{out}/checkpoint/000008.pt")
        g_ema = Generator(gen_args.size, gen_args.latent, gen_args.n_mlp, gen_args.channel_multiplier).to(device)
        checkpoint = torch.load(gen_args.ckpt, weights_only=False)
        g_ema.load_state_dict(checkpoint["g_ema"])
        if gen_args.truncation < 1:
            with torch.no_grad():
                mean_latent = g_ema.mean_latent(gen_args.truncation_mean)
        else:
            mean_latent = None
        generate(gen_args, g_ema, device, mean_latent)
    print("done")
