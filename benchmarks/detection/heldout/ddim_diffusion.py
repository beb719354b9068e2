"""Trains a small DDPM noise-prediction U-Net with EMA on synthetic CIFAR-10 pickles, resumes from the checkpoint,
then samples FID images with DDIM generalized steps, as ermongroup/ddim does: `parse_args_and_config` stores
``torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")`` in ``config.device``;
`Diffusion.__init__` builds the beta schedule in numpy and keeps ``self.betas`` on the device
(``torch.from_numpy(betas).float().to(self.device)``, ``torch.ones(1).to(device)``); `train` moves the model, wraps it
in ``torch.nn.DataParallel``, builds optimizer and EMA shadow after the move, resumes with ``torch.load(ckpt.pth)``
(no ``map_location``), moves batches with ``x.to(self.device)``, draws antithetic timesteps on the CPU then
``.to(self.device)`` and logs the loss tensor; `sample` loads with ``map_location=self.config.device``, moves/wraps
the model, applies the EMA weights and calls ``model.eval()``; noise comes from ``torch.randn(..., device=self.device)``;
`get_timestep_embedding` moves its CPU frequency table to ``timesteps.device``; `compute_alpha` pads with
``torch.zeros(1).to(beta.device)``; `generalized_steps` builds ``t`` with ``(torch.ones(n) * i).to(x.device)`` and
parks every intermediate on the host with ``.to('cpu')``.

Modeled on: ermongroup/ddim, main.py, runners/diffusion.py, models/diffusion.py, models/ema.py, functions/__init__.py,
functions/losses.py, functions/denoising.py, datasets/__init__.py and configs/cifar10.yml at commit
e8df66cf02e457719930748b5c26e37e3126dfdd
(https://github.com/ermongroup/ddim/blob/e8df66cf02e457719930748b5c26e37e3126dfdd/runners/diffusion.py,
https://github.com/ermongroup/ddim/blob/e8df66cf02e457719930748b5c26e37e3126dfdd/models/diffusion.py,
https://github.com/ermongroup/ddim/blob/e8df66cf02e457719930748b5c26e37e3126dfdd/functions/denoising.py).

Kept: `get_timestep_embedding`, `Normalize`, `Upsample`, `Downsample`, `ResnetBlock`, `AttnBlock`, `Model`;
`EMAHelper` (with the DataParallel unwrapping); `get_optimizer`; `noise_estimation_loss`; `data_transform`,
`inverse_data_transform`; `get_beta_schedule`; `Diffusion` (``train`` with resume and snapshots, ``sample``,
``sample_fid`` continuing an existing folder, ``sample_image``); `compute_alpha`, `generalized_steps`;
`dict2namespace` and the device/seed part of `parse_args_and_config`.

Changed to run here: denoising.py moves each step's input with a hard-coded ``.to('cuda')``, which fails without a
GPU; it is ``.to(x.device)`` here (the initial noise's device, ``self.device``), the same on a GPU. torchvision's
CIFAR10/transforms/``save_image`` become a ``cifar-10-batches-py`` pickle reader with a flip, and a ``.npy`` writer;
TensorBoard a scalar recorder; the YAML config JSON; ``--use_pretrained`` (downloads) and the overwrite prompts are
left out; ``num_workers`` is 0; everything is written to a temporary folder.
Shrunk: 16x16 images, ch 32, ch_mult (1, 2), 1 res block, attention only in the middle, 100 diffusion steps,
64 images, batch 16, 2 epochs + 1 resumed, 10 sampling steps, 8 + 4 FID samples; ``ddpm_steps`` and the
interpolation/sequence samplers, the EMA ``ema_copy`` and unused config branches are left out.
"""
import argparse
import glob
import json
import logging
import math
import os
import pickle
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data as data

# --------------------------------------------------------------------------- models/diffusion.py
def get_timestep_embedding(timesteps, embedding_dim):
    assert len(timesteps.shape) == 1
    half_dim = embedding_dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float32) * -emb)
    emb = emb.to(device=timesteps.device)
    emb = timesteps.float()[:, None] * emb[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
    return emb  # (odd embedding_dim zero-pad branch left out)

def nonlinearity(x):
    # swish
    return x * torch.sigmoid(x)

def Normalize(in_channels):
    return torch.nn.GroupNorm(num_groups=32, num_channels=in_channels, eps=1e-6, affine=True)

class Upsample(nn.Module):
    def __init__(self, in_channels, with_conv):
        super().__init__()
        self.with_conv = with_conv
        self.conv = torch.nn.Conv2d(in_channels, in_channels, kernel_size=3, stride=1, padding=1)

    def forward(self, x):
        return self.conv(torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest"))

class Downsample(nn.Module):
    def __init__(self, in_channels, with_conv):
        super().__init__()
        self.with_conv = with_conv
        # no asymmetric padding in torch conv, must do it ourselves
        self.conv = torch.nn.Conv2d(in_channels, in_channels, kernel_size=3, stride=2, padding=0)

    def forward(self, x):
        return self.conv(torch.nn.functional.pad(x, (0, 1, 0, 1), mode="constant", value=0))

class ResnetBlock(nn.Module):
    def __init__(self, *, in_channels, out_channels=None, dropout, temb_channels=512):
        super().__init__()
        self.in_channels = in_channels
        out_channels = in_channels if out_channels is None else out_channels
        self.out_channels = out_channels
        self.norm1 = Normalize(in_channels)
        self.conv1 = torch.nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.temb_proj = torch.nn.Linear(temb_channels, out_channels)
        self.norm2 = Normalize(out_channels)
        self.dropout = torch.nn.Dropout(dropout)
        self.conv2 = torch.nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1)
        if self.in_channels != self.out_channels:
            self.nin_shortcut = torch.nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, x, temb):
        h = self.conv1(nonlinearity(self.norm1(x)))
        h = h + self.temb_proj(nonlinearity(temb))[:, :, None, None]
        h = self.conv2(self.dropout(nonlinearity(self.norm2(h))))
        if self.in_channels != self.out_channels:
            x = self.nin_shortcut(x)
        return x + h

class AttnBlock(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.in_channels = in_channels
        self.norm = Normalize(in_channels)
        self.q = torch.nn.Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.k = torch.nn.Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.v = torch.nn.Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.proj_out = torch.nn.Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, x):
        h_ = self.norm(x)
        q, k, v = self.q(h_), self.k(h_), self.v(h_)
        b, c, h, w = q.shape  # compute attention
        w_ = torch.bmm(q.reshape(b, c, h * w).permute(0, 2, 1), k.reshape(b, c, h * w)) * (int(c) ** (-0.5))
        w_ = torch.nn.functional.softmax(w_, dim=2).permute(0, 2, 1)
        h_ = torch.bmm(v.reshape(b, c, h * w), w_).reshape(b, c, h, w)  # attend to values
        return x + self.proj_out(h_)

class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        ch, out_ch, ch_mult = config.model.ch, config.model.out_ch, tuple(config.model.ch_mult)
        num_res_blocks = config.model.num_res_blocks
        dropout, in_channels, resolution = config.model.dropout, config.model.in_channels, config.data.image_size
        resamp_with_conv = config.model.resamp_with_conv
        self.ch, self.temb_ch, self.num_resolutions = ch, ch * 4, len(ch_mult)
        self.num_res_blocks, self.resolution, self.in_channels = num_res_blocks, resolution, in_channels
        self.temb = nn.Module()
        self.temb.dense = nn.ModuleList([torch.nn.Linear(self.ch, self.temb_ch),
                                         torch.nn.Linear(self.temb_ch, self.temb_ch)])
        self.conv_in = torch.nn.Conv2d(in_channels, self.ch, kernel_size=3, stride=1, padding=1)
        curr_res = resolution
        in_ch_mult = (1,) + ch_mult
        self.down = nn.ModuleList()
        block_in = None
        for i_level in range(self.num_resolutions):
            block = nn.ModuleList()
            block_in = ch * in_ch_mult[i_level]
            block_out = ch * ch_mult[i_level]
            for i_block in range(self.num_res_blocks):
                block.append(ResnetBlock(in_channels=block_in, out_channels=block_out,
                                         temb_channels=self.temb_ch, dropout=dropout))
                block_in = block_out
            down = nn.Module()
            down.block = block
            if i_level != self.num_resolutions - 1:
                down.downsample = Downsample(block_in, resamp_with_conv)
                curr_res = curr_res // 2
            self.down.append(down)
        self.mid = nn.Module()
        self.mid.block_1 = ResnetBlock(in_channels=block_in, out_channels=block_in,
                                       temb_channels=self.temb_ch, dropout=dropout)
        self.mid.attn_1 = AttnBlock(block_in)
        self.mid.block_2 = ResnetBlock(in_channels=block_in, out_channels=block_in,
                                       temb_channels=self.temb_ch, dropout=dropout)
        self.up = nn.ModuleList()
        for i_level in reversed(range(self.num_resolutions)):
            block = nn.ModuleList()
            block_out = ch * ch_mult[i_level]
            skip_in = ch * ch_mult[i_level]
            for i_block in range(self.num_res_blocks + 1):
                if i_block == self.num_res_blocks:
                    skip_in = ch * in_ch_mult[i_level]
                block.append(ResnetBlock(in_channels=block_in + skip_in, out_channels=block_out,
                                         temb_channels=self.temb_ch, dropout=dropout))
                block_in = block_out
            up = nn.Module()
            up.block = block
            if i_level != 0:
                up.upsample = Upsample(block_in, resamp_with_conv)
                curr_res = curr_res * 2
            self.up.insert(0, up)  # prepend to get consistent order
        self.norm_out = Normalize(block_in)
        self.conv_out = torch.nn.Conv2d(block_in, out_ch, kernel_size=3, stride=1, padding=1)

    def forward(self, x, t):
        assert x.shape[2] == x.shape[3] == self.resolution
        temb = get_timestep_embedding(t, self.ch)
        temb = self.temb.dense[1](nonlinearity(self.temb.dense[0](temb)))
        hs = [self.conv_in(x)]
        for i_level in range(self.num_resolutions):
            for i_block in range(self.num_res_blocks):
                hs.append(self.down[i_level].block[i_block](hs[-1], temb))
            if i_level != self.num_resolutions - 1:
                hs.append(self.down[i_level].downsample(hs[-1]))
        h = self.mid.block_2(self.mid.attn_1(self.mid.block_1(hs[-1], temb)), temb)
        for i_level in reversed(range(self.num_resolutions)):
            for i_block in range(self.num_res_blocks + 1):
                h = self.up[i_level].block[i_block](torch.cat([h, hs.pop()], dim=1), temb)
            if i_level != 0:
                h = self.up[i_level].upsample(h)
        h = nonlinearity(self.norm_out(h))
        return self.conv_out(h)

# --------------------------------------------------------------------------- models/ema.py
class EMAHelper(object):
    def __init__(self, mu=0.999):
        self.mu, self.shadow = mu, {}

    def register(self, module):
        if isinstance(module, nn.DataParallel):
            module = module.module
        for name, param in module.named_parameters():
            if param.requires_grad:
                self.shadow[name] = param.data.clone()

    def update(self, module):
        if isinstance(module, nn.DataParallel):
            module = module.module
        for name, param in module.named_parameters():
            if param.requires_grad:
                self.shadow[name].data = (1. - self.mu) * param.data + self.mu * self.shadow[name].data

    def ema(self, module):
        if isinstance(module, nn.DataParallel):
            module = module.module
        for name, param in module.named_parameters():
            if param.requires_grad:
                param.data.copy_(self.shadow[name].data)

    def state_dict(self):
        return self.shadow

    def load_state_dict(self, state_dict):
        self.shadow = state_dict

# --------------------------------------------------------------------------- functions/ and datasets/
def get_optimizer(config, parameters):
    if config.optim.optimizer == 'Adam':
        return optim.Adam(parameters, lr=config.optim.lr, weight_decay=config.optim.weight_decay,
                          betas=(config.optim.beta1, 0.999), amsgrad=config.optim.amsgrad, eps=config.optim.eps)
    raise NotImplementedError('Optimizer {} not understood.'.format(config.optim.optimizer))

def noise_estimation_loss(model, x0, t, e, b, keepdim=False):
    a = (1 - b).cumprod(dim=0).index_select(0, t).view(-1, 1, 1, 1)
    x = x0 * a.sqrt() + e * (1.0 - a).sqrt()
    output = model(x, t.float())
    loss = (e - output).square().sum(dim=(1, 2, 3))
    return loss if keepdim else loss.mean(dim=0)

loss_registry = {'simple': noise_estimation_loss}

def compute_alpha(beta, t):
    beta = torch.cat([torch.zeros(1).to(beta.device), beta], dim=0)
    a = (1 - beta).cumprod(dim=0).index_select(0, t + 1).view(-1, 1, 1, 1)
    return a

def generalized_steps(x, seq, model, b, **kwargs):
    with torch.no_grad():
        n = x.size(0)
        seq_next = [-1] + list(seq[:-1])
        x0_preds = []
        xs = [x]
        for i, j in zip(reversed(seq), reversed(seq_next)):
            t = (torch.ones(n) * i).to(x.device)
            next_t = (torch.ones(n) * j).to(x.device)
            at = compute_alpha(b, t.long())
            at_next = compute_alpha(b, next_t.long())
            xt = xs[-1].to(x.device)  # .to('cuda') in the original
            et = model(xt, t)
            x0_t = (xt - et * (1 - at).sqrt()) / at.sqrt()
            x0_preds.append(x0_t.to('cpu'))
            c1 = kwargs.get("eta", 0) * ((1 - at / at_next) * (1 - at_next) / (1 - at)).sqrt()
            c2 = ((1 - at_next) - c1 ** 2).sqrt()
            xt_next = at_next.sqrt() * x0_t + c1 * torch.randn_like(x) + c2 * et
            xs.append(xt_next.to('cpu'))
    return xs, x0_preds

class CIFAR10(data.Dataset):
    """torchvision.datasets.CIFAR10 stand-in reading the cifar-10-batches-py pickles (RandomHorizontalFlip, ToTensor)."""

    def __init__(self, root, train=True, random_flip=True):
        with open(os.path.join(root, 'cifar-10-batches-py', 'data_batch_1'), 'rb') as f:
            entry = pickle.load(f, encoding='latin1')
        side = int(np.sqrt(entry['data'].shape[1] // 3))
        self.data, self.targets = entry['data'].reshape(-1, 3, side, side), entry['labels']
        self.random_flip = random_flip

    def __getitem__(self, index):
        img = torch.from_numpy(self.data[index]).float().div(255.)
        if self.random_flip and torch.rand(1).item() < 0.5:
            img = img.flip(2)
        return img, self.targets[index]

    def __len__(self):
        return len(self.data)

def get_dataset(args, config):
    dataset = CIFAR10(os.path.join(args.exp, "datasets", "cifar10"), train=True, random_flip=config.data.random_flip)
    return dataset, None  # the test split is never read by the runner

def data_transform(config, X):
    if config.data.rescaled:
        X = 2 * X - 1.0
    if hasattr(config, "image_mean"):
        return X - config.image_mean.to(X.device)[None, ...]
    return X

def inverse_data_transform(config, X):
    if hasattr(config, "image_mean"):
        X = X + config.image_mean.to(X.device)[None, ...]
    if config.data.rescaled:
        X = (X + 1.0) / 2.0
    return torch.clamp(X, 0.0, 1.0)

def save_image(x, path):  # torchvision.utils.save_image stand-in (host copy as uint8 .npy)
    np.save(path.replace(".png", ".npy"), (x.detach().cpu().numpy() * 255 + 0.5).clip(0, 255).astype(np.uint8))

class ScalarLogger(object):  # SummaryWriter stand-in
    def __init__(self):
        self.scalars = []

    def add_scalar(self, tag, value, global_step=None):
        self.scalars.append((tag, value.item() if torch.is_tensor(value) else value, global_step))

# --------------------------------------------------------------------------- runners/diffusion.py
def get_beta_schedule(beta_schedule, *, beta_start, beta_end, num_diffusion_timesteps):
    if beta_schedule == "quad":
        betas = np.linspace(beta_start ** 0.5, beta_end ** 0.5, num_diffusion_timesteps, dtype=np.float64) ** 2
    elif beta_schedule == "linear":
        betas = np.linspace(beta_start, beta_end, num_diffusion_timesteps, dtype=np.float64)
    else:
        raise NotImplementedError(beta_schedule)
    assert betas.shape == (num_diffusion_timesteps,)
    return betas

class Diffusion(object):
    def __init__(self, args, config, device=None):
        self.args, self.config = args, config
        if device is None:
            device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        self.device = device
        self.model_var_type = config.model.var_type
        betas = get_beta_schedule(beta_schedule=config.diffusion.beta_schedule,
                                  beta_start=config.diffusion.beta_start, beta_end=config.diffusion.beta_end,
                                  num_diffusion_timesteps=config.diffusion.num_diffusion_timesteps)
        betas = self.betas = torch.from_numpy(betas).float().to(self.device)
        self.num_timesteps = betas.shape[0]
        alphas_cumprod = (1.0 - betas).cumprod(dim=0)
        alphas_cumprod_prev = torch.cat([torch.ones(1).to(device), alphas_cumprod[:-1]], dim=0)
        posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
        if self.model_var_type == "fixedlarge":
            self.logvar = betas.log()
        elif self.model_var_type == "fixedsmall":
            self.logvar = posterior_variance.clamp(min=1e-20).log()

    def train(self):
        args, config = self.args, self.config
        tb_logger = self.config.tb_logger
        dataset, test_dataset = get_dataset(args, config)
        train_loader = data.DataLoader(dataset, batch_size=config.training.batch_size, shuffle=True,
                                       num_workers=config.data.num_workers)
        model = Model(config)
        model = model.to(self.device)
        model = torch.nn.DataParallel(model)
        optimizer = get_optimizer(self.config, model.parameters())
        if self.config.model.ema:
            ema_helper = EMAHelper(mu=self.config.model.ema_rate)
            ema_helper.register(model)
        else:
            ema_helper = None
        start_epoch, step = 0, 0
        if self.args.resume_training:
            states = torch.load(os.path.join(self.args.log_path, "ckpt.pth"))
            model.load_state_dict(states[0])
            states[1]["param_groups"][0]["eps"] = self.config.optim.eps
            optimizer.load_state_dict(states[1])
            start_epoch = states[2]
            step = states[3]
            if self.config.model.ema:
                ema_helper.load_state_dict(states[4])
        for epoch in range(start_epoch, self.config.training.n_epochs):
            for i, (x, y) in enumerate(train_loader):
                n = x.size(0)
                model.train()
                step += 1
                x = data_transform(self.config, x.to(self.device))
                e = torch.randn_like(x)
                b = self.betas
                # antithetic sampling
                t = torch.randint(low=0, high=self.num_timesteps, size=(n // 2 + 1,)).to(self.device)
                t = torch.cat([t, self.num_timesteps - t - 1], dim=0)[:n]
                loss = loss_registry[config.model.type](model, x, t, e, b)
                tb_logger.add_scalar("loss", loss, global_step=step)
                logging.info(f"step: {step}, loss: {loss.item()}")
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip)
                optimizer.step()
                if self.config.model.ema:
                    ema_helper.update(model)
                if step % self.config.training.snapshot_freq == 0 or step == 1:
                    states = [model.state_dict(), optimizer.state_dict(), epoch, step]
                    if self.config.model.ema:
                        states.append(ema_helper.state_dict())
                    torch.save(states, os.path.join(self.args.log_path, "ckpt_{}.pth".format(step)))
                    torch.save(states, os.path.join(self.args.log_path, "ckpt.pth"))
        return step, loss.item()

    def sample(self):
        model = Model(self.config)
        ckpt = "ckpt.pth" if getattr(self.config.sampling, "ckpt_id", None) is None else \
            f"ckpt_{self.config.sampling.ckpt_id}.pth"
        states = torch.load(os.path.join(self.args.log_path, ckpt), map_location=self.config.device)
        model = model.to(self.device)
        model = torch.nn.DataParallel(model)
        model.load_state_dict(states[0], strict=True)
        if self.config.model.ema:
            ema_helper = EMAHelper(mu=self.config.model.ema_rate)
            ema_helper.register(model)
            ema_helper.load_state_dict(states[-1])
            ema_helper.ema(model)
        model.eval()
        if self.args.fid:
            return self.sample_fid(model)
        raise NotImplementedError("Sample procedeure not defined")  # interpolation/sequence are left out

    def sample_fid(self, model):
        config = self.config
        img_id = len(glob.glob(f"{self.args.image_folder}/*"))
        print(f"starting from image {img_id}")
        total_n_samples = config.sampling.total_n_samples  # 50000 in the original
        n_rounds = (total_n_samples - img_id) // config.sampling.batch_size
        with torch.no_grad():
            for _ in range(n_rounds):
                n = config.sampling.batch_size
                x = torch.randn(n, config.data.channels, config.data.image_size, config.data.image_size,
                                device=self.device)
                x = inverse_data_transform(config, self.sample_image(x, model))
                for i in range(n):
                    save_image(x[i], os.path.join(self.args.image_folder, f"{img_id}.png"))
                    img_id += 1
        return img_id

    def sample_image(self, x, model, last=True):
        if self.args.skip_type == "uniform":
            skip = self.num_timesteps // self.args.timesteps
            seq = range(0, self.num_timesteps, skip)
        elif self.args.skip_type == "quad":
            seq = np.linspace(0, np.sqrt(self.num_timesteps * 0.8), self.args.timesteps) ** 2
            seq = [int(s) for s in list(seq)]
        else:
            raise NotImplementedError
        if self.args.sample_type != "generalized":  # "ddpm_noisy" (ddpm_steps) is left out
            raise NotImplementedError
        x = generalized_steps(x, seq, model, self.betas, eta=self.args.eta)
        if last:
            x = x[0][-1]
        return x

# --------------------------------------------------------------------------- main.py
def dict2namespace(config):
    namespace = argparse.Namespace()
    for key, value in config.items():
        setattr(namespace, key, dict2namespace(value) if isinstance(value, dict) else value)
    return namespace

CONFIG_JSON = """{
 "data": {"dataset": "CIFAR10", "image_size": 16, "channels": 3, "random_flip": true, "rescaled": true,
          "num_workers": 0},
 "model": {"type": "simple", "in_channels": 3, "out_ch": 3, "ch": 32, "ch_mult": [1, 2], "num_res_blocks": 1,
           "dropout": 0.1, "var_type": "fixedlarge", "ema_rate": 0.9999, "ema": true, "resamp_with_conv": true},
 "diffusion": {"beta_schedule": "linear", "beta_start": 0.0001, "beta_end": 0.02, "num_diffusion_timesteps": 100},
 "training": {"batch_size": 16, "n_epochs": 2, "snapshot_freq": 3},
 "sampling": {"batch_size": 4, "total_n_samples": 8, "last_only": true},
 "optim": {"weight_decay": 0.0, "optimizer": "Adam", "lr": 0.0002, "beta1": 0.9, "amsgrad": false,
           "eps": 0.00000001, "grad_clip": 1.0}
}"""

def parse_args_and_config(exp, argv):
    parser = argparse.ArgumentParser()
    for flag in ("--sample", "--fid", "--resume_training"):
        parser.add_argument(flag, action="store_true")
    for flag, typ, default in (("--seed", int, 1234), ("--exp", str, exp), ("--doc", str, "cifar10"),
                               ("--image_folder", str, "images"), ("--sample_type", str, "generalized"),
                               ("--skip_type", str, "uniform"), ("--timesteps", int, 10), ("--eta", float, 0.0)):
        parser.add_argument(flag, type=typ, default=default)
    args = parser.parse_args(argv)
    args.log_path = os.path.join(args.exp, "logs", args.doc)
    new_config = dict2namespace(json.loads(CONFIG_JSON))
    if not args.sample:
        os.makedirs(args.log_path, exist_ok=True)
        new_config.tb_logger = ScalarLogger()
    else:
        args.image_folder = os.path.join(args.exp, "image_samples", args.image_folder)
        os.makedirs(args.image_folder, exist_ok=True)
    # add device
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    logging.info("Using device: {}".format(device))
    new_config.device = device
    # set random seed
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(args.seed)
    torch.backends.cudnn.benchmark = True
    return args, new_config

def write_fake_cifar(folder, n, seed, side=16):
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(folder, "cifar-10-batches-py"))
    yy, xx = np.mgrid[0:side, 0:side] / float(side)
    imgs = [np.stack([np.sin(2 * np.pi * (rng.uniform(0.5, 2) * xx + rng.uniform(0.5, 2) * yy) + rng.uniform(0, 6))
                      for _ in range(3)]) for _ in range(n)]
    arr = ((np.stack(imgs) * 0.45 + 0.5) * 255).astype(np.uint8).reshape(n, -1)
    with open(os.path.join(folder, "cifar-10-batches-py", "data_batch_1"), "wb") as f:
        pickle.dump({"data": arr, "labels": rng.randint(0, 10, n).tolist()}, f)

def main():
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING)
    exp = tempfile.mkdtemp(prefix="ddim_")
    try:
        write_fake_cifar(os.path.join(exp, "datasets", "cifar10"), 64, seed=0)
        args, config = parse_args_and_config(exp, [])
        steps, loss = Diffusion(args, config).train()
        args, config = parse_args_and_config(exp, ["--resume_training"])
        config.training.n_epochs = 3
        steps2, loss2 = Diffusion(args, config).train()
        print("trained {} steps (loss {:.2f}), resumed to {} steps (loss {:.2f})".format(steps, loss, steps2, loss2))
        args, config = parse_args_and_config(exp, ["--sample", "--fid", "--image_folder", "fid"])
        n_fid = Diffusion(args, config).sample()
        # a second sampling run continues the FID folder: quadratic skips and eta > 0 (stochastic DDIM)
        args, config = parse_args_and_config(exp, ["--sample", "--fid", "--image_folder", "fid", "--eta", "0.5",
                                                   "--skip_type", "quad"])
        config.sampling.total_n_samples = 12
        n_fid2 = Diffusion(args, config).sample()
        pixels = np.load(os.path.join(exp, "image_samples", "fid", "10.npy"))
        print("done steps={} loss={:.2f} fid_images={}+{} mean_pixel={:.1f}".format(
            steps2, loss2, n_fid, n_fid2 - n_fid, pixels.mean()))
    finally:
        shutil.rmtree(exp, ignore_errors=True)

if __name__ == "__main__":
    main()
