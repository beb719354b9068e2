"""Trains a HiFi-GAN vocoder (generator + multi-scale discriminator) on synthetic LJSpeech-style wav files, resumes
from its own checkpoints and synthesises audio from mel spectrograms, as jik876/hifi-gan does: `train` builds
``torch.device('cuda:{:d}'.format(rank))`` and moves generator and MSD with ``.to(device)`` before AdamW is built,
`load_checkpoint` uses ``torch.load(filepath, map_location=device)`` and the optimizer states are restored after
construction, batches move with ``.to(device, non_blocking=True)``, `mel_spectrogram` caches the filter bank and
Hann window in the module-level ``mel_basis``/``hann_window`` dicts keyed by ``str(y.device)`` (``.to(y.device)``),
the data set computes mel features on the CPU in ``__getitem__``, validation runs under ``generator.eval()`` and
``torch.no_grad()`` reading ``.item()``/``.cpu().numpy()``, and `inference` picks ``cuda``/``cpu`` itself, removes
weight norm and writes ``y_g_hat.cpu().numpy().astype('int16')`` with scipy.

Modeled on: jik876/hifi-gan, train.py, meldataset.py, models.py, utils.py, env.py and inference.py at commit
4769534d45265d52a904b850da5a622601885777
(https://github.com/jik876/hifi-gan/blob/4769534d45265d52a904b850da5a622601885777/train.py,
https://github.com/jik876/hifi-gan/blob/4769534d45265d52a904b850da5a622601885777/meldataset.py,
https://github.com/jik876/hifi-gan/blob/4769534d45265d52a904b850da5a622601885777/models.py).

Kept: `ResBlock1`, `Generator` (with `remove_weight_norm`), `DiscriminatorS` (spectral/weight norm),
`MultiScaleDiscriminator`, the three losses; `load_wav`, the global caches and `mel_spectrogram` (with its
``if fmax not in mel_basis`` check), `get_dataset_filelist`, `MelDataset`; utils' checkpoint helpers; `AttrDict`,
`build_env`; train.py's `train` (moves, resume, optimizer/scheduler restore, DDP branch for ``num_gpus > 1``,
validation) and `main` (``torch.cuda.is_available()`` sets ``num_gpus``); inference.py's `inference`.

Changed to run here: `train`'s device falls back to ``cpu`` without CUDA (the original always builds ``cuda:{rank}``);
librosa's mel filter bank and ``normalize`` are small numpy stand-ins; ``torch.stft(..., return_complex=True)`` is
viewed as real; the first generator conv takes ``h.num_mels`` (not a hard-coded 80); TensorBoard, plots and
``mp.spawn`` are left out; argparse defaults become a Namespace; ``num_workers`` is 0; files live in a temp folder.
Shrunk: the multi-period discriminator is left out (only ResBlock1 kept); 8 kHz audio, n_fft 128, hop 32, 20 mels,
1024-sample segments, generator channels 32, MSD 16-64 channels, 16+2 clips, batch 4, 2 epochs + 1 resumed epoch.
"""
import warnings
warnings.simplefilter(action='ignore', category=FutureWarning)
import argparse
import glob
import json
import os
import random
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.io.wavfile import read, write
from torch.nn import AvgPool1d, Conv1d, ConvTranspose1d
from torch.nn.parallel import DistributedDataParallel
from torch.nn.utils import remove_weight_norm, spectral_norm, weight_norm
from torch.utils.data import DataLoader, DistributedSampler

torch.backends.cudnn.benchmark = True

MAX_WAV_VALUE = 32768.0
LRELU_SLOPE = 0.1

# ----------------------------------------------------------------------------- env.py / utils.py
class AttrDict(dict):
    def __init__(self, *args, **kwargs):
        super(AttrDict, self).__init__(*args, **kwargs)
        self.__dict__ = self

def build_env(config, config_name, path):
    t_path = os.path.join(path, config_name)
    if config != t_path:
        os.makedirs(path, exist_ok=True)
        shutil.copyfile(config, os.path.join(path, config_name))

def init_weights(m, mean=0.0, std=0.01):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(mean, std)

def get_padding(kernel_size, dilation=1):
    return int((kernel_size * dilation - dilation) / 2)

def load_checkpoint(filepath, device):
    assert os.path.isfile(filepath)
    print("Loading '{}'".format(filepath))
    checkpoint_dict = torch.load(filepath, map_location=device)
    print("Complete.")
    return checkpoint_dict

def save_checkpoint(filepath, obj):
    print("Saving checkpoint to {}".format(filepath))
    torch.save(obj, filepath)
    print("Complete.")

def scan_checkpoint(cp_dir, prefix):
    pattern = os.path.join(cp_dir, prefix + '????????')
    cp_list = glob.glob(pattern)
    return None if len(cp_list) == 0 else sorted(cp_list)[-1]

# ----------------------------------------------------------------------------- meldataset.py
def librosa_mel_fn(sr, n_fft, n_mels, fmin, fmax):  # triangular mel filter bank (HTK scale), librosa stand-in
    fmax = float(sr) / 2 if fmax is None else fmax
    fftfreqs = np.linspace(0, float(sr) / 2, 1 + n_fft // 2)
    m = np.linspace(2595 * np.log10(1 + fmin / 700.0), 2595 * np.log10(1 + fmax / 700.0), n_mels + 2)
    mel_f = 700.0 * (10 ** (m / 2595) - 1)
    fdiff, ramps = np.diff(mel_f), np.subtract.outer(mel_f, fftfreqs)
    weights = np.maximum(0, np.minimum(-ramps[:-2] / fdiff[:-1, None], ramps[2:] / fdiff[1:, None]))
    return (weights * (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]).astype(np.float32)

def normalize(x):
    return x / np.max(np.abs(x))

def load_wav(full_path):
    sampling_rate, data = read(full_path)
    return data, sampling_rate

def dynamic_range_compression_torch(x, C=1, clip_val=1e-5):
    return torch.log(torch.clamp(x, min=clip_val) * C)

def spectral_normalize_torch(magnitudes):
    return dynamic_range_compression_torch(magnitudes)

mel_basis = {}
hann_window = {}

def mel_spectrogram(y, n_fft, num_mels, sampling_rate, hop_size, win_size, fmin, fmax, center=False):
    if torch.min(y) < -1. or torch.max(y) > 1.:
        print('min/max value is ', torch.min(y), torch.max(y))
    global mel_basis, hann_window
    if fmax not in mel_basis:
        mel = librosa_mel_fn(sampling_rate, n_fft, num_mels, fmin, fmax)
        mel_basis[str(fmax) + '_' + str(y.device)] = torch.from_numpy(mel).float().to(y.device)
        hann_window[str(y.device)] = torch.hann_window(win_size).to(y.device)
    y = torch.nn.functional.pad(y.unsqueeze(1), (int((n_fft - hop_size) / 2), int((n_fft - hop_size) / 2)),
                                mode='reflect').squeeze(1)
    spec = torch.view_as_real(torch.stft(y, n_fft, hop_length=hop_size, win_length=win_size,
                                         window=hann_window[str(y.device)], center=center, pad_mode='reflect',
                                         normalized=False, onesided=True, return_complex=True))
    spec = torch.sqrt(spec.pow(2).sum(-1) + (1e-9))
    spec = torch.matmul(mel_basis[str(fmax) + '_' + str(y.device)], spec)
    spec = spectral_normalize_torch(spec)
    return spec

def get_dataset_filelist(a):
    lists = []
    for path in (a.input_training_file, a.input_validation_file):
        with open(path, 'r', encoding='utf-8') as fi:
            lists.append([os.path.join(a.input_wavs_dir, x.split('|')[0] + '.wav')
                          for x in fi.read().split('\n') if len(x) > 0])
    return lists[0], lists[1]

class MelDataset(torch.utils.data.Dataset):
    def __init__(self, training_files, segment_size, n_fft, num_mels,
                 hop_size, win_size, sampling_rate, fmin, fmax, split=True, shuffle=True, n_cache_reuse=1,
                 device=None, fmax_loss=None):
        self.audio_files = training_files
        random.seed(1234)
        if shuffle:
            random.shuffle(self.audio_files)
        self.segment_size, self.sampling_rate, self.split = segment_size, sampling_rate, split
        self.n_fft, self.num_mels, self.hop_size, self.win_size = n_fft, num_mels, hop_size, win_size
        self.fmin, self.fmax, self.fmax_loss = fmin, fmax, fmax_loss
        self.cached_wav = None
        self.n_cache_reuse = n_cache_reuse
        self._cache_ref_count = 0
        self.device = device
    def __getitem__(self, index):
        filename = self.audio_files[index]
        if self._cache_ref_count == 0:
            audio, sampling_rate = load_wav(filename)
            audio = audio / MAX_WAV_VALUE
            audio = normalize(audio) * 0.95
            self.cached_wav = audio
            if sampling_rate != self.sampling_rate:
                raise ValueError("{} SR doesn't match target {} SR".format(sampling_rate, self.sampling_rate))
            self._cache_ref_count = self.n_cache_reuse
        else:
            audio = self.cached_wav
            self._cache_ref_count -= 1
        audio = torch.FloatTensor(audio).unsqueeze(0)
        if self.split:
            if audio.size(1) >= self.segment_size:
                max_audio_start = audio.size(1) - self.segment_size
                audio_start = random.randint(0, max_audio_start)
                audio = audio[:, audio_start:audio_start + self.segment_size]
            else:
                audio = torch.nn.functional.pad(audio, (0, self.segment_size - audio.size(1)), 'constant')
        mel = mel_spectrogram(audio, self.n_fft, self.num_mels, self.sampling_rate, self.hop_size, self.win_size,
                              self.fmin, self.fmax, center=False)
        mel_loss = mel_spectrogram(audio, self.n_fft, self.num_mels, self.sampling_rate, self.hop_size,
                                   self.win_size, self.fmin, self.fmax_loss, center=False)
        return (mel.squeeze(), audio.squeeze(0), filename, mel_loss.squeeze())
    def __len__(self):
        return len(self.audio_files)

# ----------------------------------------------------------------------------- models.py
class ResBlock1(torch.nn.Module):
    def __init__(self, h, channels, kernel_size=3, dilation=(1, 3, 5)):
        super(ResBlock1, self).__init__()
        self.h = h
        self.convs1 = nn.ModuleList([
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=d, padding=get_padding(kernel_size, d)))
            for d in dilation])
        self.convs1.apply(init_weights)
        self.convs2 = nn.ModuleList([
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=1, padding=get_padding(kernel_size, 1)))
            for _ in dilation])
        self.convs2.apply(init_weights)
    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            xt = F.leaky_relu(x, LRELU_SLOPE)
            xt = c1(xt)
            xt = F.leaky_relu(xt, LRELU_SLOPE)
            xt = c2(xt)
            x = xt + x
        return x
    def remove_weight_norm(self):
        for l in list(self.convs1) + list(self.convs2):
            remove_weight_norm(l)

class Generator(torch.nn.Module):
    def __init__(self, h):
        super(Generator, self).__init__()
        self.h = h
        self.num_kernels = len(h.resblock_kernel_sizes)
        self.num_upsamples = len(h.upsample_rates)
        self.conv_pre = weight_norm(Conv1d(h.num_mels, h.upsample_initial_channel, 7, 1, padding=3))
        resblock = ResBlock1  # config 'resblock': '1'
        self.ups = nn.ModuleList()
        for i, (u, k) in enumerate(zip(h.upsample_rates, h.upsample_kernel_sizes)):
            self.ups.append(weight_norm(
                ConvTranspose1d(h.upsample_initial_channel // (2 ** i), h.upsample_initial_channel // (2 ** (i + 1)),
                                k, u, padding=(k - u) // 2)))
        self.resblocks = nn.ModuleList()
        for i in range(len(self.ups)):
            ch = h.upsample_initial_channel // (2 ** (i + 1))
            for j, (k, d) in enumerate(zip(h.resblock_kernel_sizes, h.resblock_dilation_sizes)):
                self.resblocks.append(resblock(h, ch, k, d))
        self.conv_post = weight_norm(Conv1d(ch, 1, 7, 1, padding=3))
        self.ups.apply(init_weights)
        self.conv_post.apply(init_weights)
    def forward(self, x):
        x = self.conv_pre(x)
        for i in range(self.num_upsamples):
            x = F.leaky_relu(x, LRELU_SLOPE)
            x = self.ups[i](x)
            xs = None
            for j in range(self.num_kernels):
                if xs is None:
                    xs = self.resblocks[i * self.num_kernels + j](x)
                else:
                    xs += self.resblocks[i * self.num_kernels + j](x)
            x = xs / self.num_kernels
        x = self.conv_post(F.leaky_relu(x))
        return torch.tanh(x)
    def remove_weight_norm(self):
        print('Removing weight norm...')
        for l in self.ups:
            remove_weight_norm(l)
        for l in self.resblocks:
            l.remove_weight_norm()
        remove_weight_norm(self.conv_pre)
        remove_weight_norm(self.conv_post)

class DiscriminatorS(torch.nn.Module):
    def __init__(self, use_spectral_norm=False):
        super(DiscriminatorS, self).__init__()
        norm_f = weight_norm if use_spectral_norm == False else spectral_norm
        self.convs = nn.ModuleList([
            norm_f(Conv1d(1, 16, 15, 1, padding=7)),
            norm_f(Conv1d(16, 16, 41, 2, groups=4, padding=20)),
            norm_f(Conv1d(16, 32, 41, 2, groups=16, padding=20)),
            norm_f(Conv1d(32, 64, 41, 4, groups=16, padding=20)),
            norm_f(Conv1d(64, 64, 41, 1, groups=16, padding=20)),
            norm_f(Conv1d(64, 64, 5, 1, padding=2)),
        ])
        self.conv_post = norm_f(Conv1d(64, 1, 3, 1, padding=1))
    def forward(self, x):
        fmap = []
        for l in self.convs:
            x = l(x)
            x = F.leaky_relu(x, LRELU_SLOPE)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        x = torch.flatten(x, 1, -1)
        return x, fmap

class MultiScaleDiscriminator(torch.nn.Module):
    def __init__(self):
        super(MultiScaleDiscriminator, self).__init__()
        self.discriminators = nn.ModuleList([DiscriminatorS(use_spectral_norm=True), DiscriminatorS(),
                                             DiscriminatorS()])
        self.meanpools = nn.ModuleList([AvgPool1d(4, 2, padding=2), AvgPool1d(4, 2, padding=2)])
    def forward(self, y, y_hat):
        y_d_rs, y_d_gs, fmap_rs, fmap_gs = [], [], [], []
        for i, d in enumerate(self.discriminators):
            if i != 0:
                y = self.meanpools[i - 1](y)
                y_hat = self.meanpools[i - 1](y_hat)
            y_d_r, fmap_r = d(y)
            y_d_g, fmap_g = d(y_hat)
            y_d_rs.append(y_d_r), fmap_rs.append(fmap_r)
            y_d_gs.append(y_d_g), fmap_gs.append(fmap_g)
        return y_d_rs, y_d_gs, fmap_rs, fmap_gs

def feature_loss(fmap_r, fmap_g):
    loss = 0
    for dr, dg in zip(fmap_r, fmap_g):
        for rl, gl in zip(dr, dg):
            loss += torch.mean(torch.abs(rl - gl))
    return loss * 2

def discriminator_loss(disc_real_outputs, disc_generated_outputs):
    loss = 0
    r_losses = []
    g_losses = []
    for dr, dg in zip(disc_real_outputs, disc_generated_outputs):
        r_loss = torch.mean((1 - dr) ** 2)
        g_loss = torch.mean(dg ** 2)
        loss += (r_loss + g_loss)
        r_losses.append(r_loss.item())
        g_losses.append(g_loss.item())
    return loss, r_losses, g_losses

def generator_loss(disc_outputs):
    loss = 0
    gen_losses = []
    for dg in disc_outputs:
        l = torch.mean((1 - dg) ** 2)
        gen_losses.append(l)
        loss += l
    return loss, gen_losses

# ----------------------------------------------------------------------------- train.py
def train(rank, a, h):
    torch.cuda.manual_seed(h.seed)
    device = torch.device('cuda:{:d}'.format(rank) if torch.cuda.is_available() else 'cpu')
    generator = Generator(h).to(device)
    msd = MultiScaleDiscriminator().to(device)
    if rank == 0:
        print("generator parameters:", sum(p.numel() for p in generator.parameters()))
        os.makedirs(a.checkpoint_path, exist_ok=True)
        print("checkpoints directory : ", a.checkpoint_path)
    if os.path.isdir(a.checkpoint_path):
        cp_g = scan_checkpoint(a.checkpoint_path, 'g_')
        cp_do = scan_checkpoint(a.checkpoint_path, 'do_')
    steps = 0
    if cp_g is None or cp_do is None:
        state_dict_do = None
        last_epoch = -1
    else:
        state_dict_g = load_checkpoint(cp_g, device)
        state_dict_do = load_checkpoint(cp_do, device)
        generator.load_state_dict(state_dict_g['generator'])
        msd.load_state_dict(state_dict_do['msd'])
        steps = state_dict_do['steps'] + 1
        last_epoch = state_dict_do['epoch']
    if h.num_gpus > 1:
        generator = DistributedDataParallel(generator, device_ids=[rank]).to(device)
        msd = DistributedDataParallel(msd, device_ids=[rank]).to(device)
    optim_g = torch.optim.AdamW(generator.parameters(), h.learning_rate, betas=[h.adam_b1, h.adam_b2])
    optim_d = torch.optim.AdamW(msd.parameters(),
                                h.learning_rate, betas=[h.adam_b1, h.adam_b2])
    if state_dict_do is not None:
        optim_g.load_state_dict(state_dict_do['optim_g'])
        optim_d.load_state_dict(state_dict_do['optim_d'])
    scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=h.lr_decay, last_epoch=last_epoch)
    scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=h.lr_decay, last_epoch=last_epoch)
    training_filelist, validation_filelist = get_dataset_filelist(a)
    trainset = MelDataset(training_filelist, h.segment_size, h.n_fft, h.num_mels, h.hop_size, h.win_size,
                          h.sampling_rate, h.fmin, h.fmax, n_cache_reuse=0,
                          shuffle=False if h.num_gpus > 1 else True, fmax_loss=h.fmax_for_loss, device=device)
    train_sampler = DistributedSampler(trainset) if h.num_gpus > 1 else None
    train_loader = DataLoader(trainset, num_workers=h.num_workers, shuffle=False, sampler=train_sampler,
                              batch_size=h.batch_size, pin_memory=True, drop_last=True)
    if rank == 0:
        validset = MelDataset(validation_filelist, h.segment_size, h.n_fft, h.num_mels, h.hop_size, h.win_size,
                              h.sampling_rate, h.fmin, h.fmax, False, False, n_cache_reuse=0,
                              fmax_loss=h.fmax_for_loss, device=device)
        validation_loader = DataLoader(validset, num_workers=0, shuffle=False, sampler=None, batch_size=1,
                                       pin_memory=True, drop_last=True)
    generator.train()
    msd.train()
    val_err = float('nan')
    for epoch in range(max(0, last_epoch), a.training_epochs):
        if rank == 0:
            start = time.time()
            print("Epoch: {}".format(epoch + 1))
        if h.num_gpus > 1:
            train_sampler.set_epoch(epoch)
        for i, batch in enumerate(train_loader):
            if rank == 0:
                start_b = time.time()
            x, y, _, y_mel = batch
            x = torch.autograd.Variable(x.to(device, non_blocking=True))
            y = torch.autograd.Variable(y.to(device, non_blocking=True))
            y_mel = torch.autograd.Variable(y_mel.to(device, non_blocking=True))
            y = y.unsqueeze(1)
            y_g_hat = generator(x)
            y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1), h.n_fft, h.num_mels, h.sampling_rate, h.hop_size,
                                          h.win_size, h.fmin, h.fmax_for_loss)
            optim_d.zero_grad()
            # MSD
            y_ds_hat_r, y_ds_hat_g, _, _ = msd(y, y_g_hat.detach())
            loss_disc_s, losses_disc_s_r, losses_disc_s_g = discriminator_loss(y_ds_hat_r, y_ds_hat_g)
            loss_disc_all = loss_disc_s
            loss_disc_all.backward()
            optim_d.step()
            # Generator
            optim_g.zero_grad()
            # L1 Mel-Spectrogram Loss
            loss_mel = F.l1_loss(y_mel, y_g_hat_mel) * 45
            y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = msd(y, y_g_hat)
            loss_fm_s = feature_loss(fmap_s_r, fmap_s_g)
            loss_gen_s, losses_gen_s = generator_loss(y_ds_hat_g)
            loss_gen_all = loss_gen_s + loss_fm_s + loss_mel
            loss_gen_all.backward()
            optim_g.step()
            if rank == 0:
                # STDOUT logging
                if steps % a.stdout_interval == 0:
                    with torch.no_grad():
                        mel_error = F.l1_loss(y_mel, y_g_hat_mel).item()
                    print('Steps : {:d}, Gen Loss Total : {:4.3f}, Mel-Spec. Error : {:4.3f}, s/b : {:4.3f}'.
                          format(steps, loss_gen_all, mel_error, time.time() - start_b))
                # checkpointing
                if steps % a.checkpoint_interval == 0 and steps != 0:
                    checkpoint_path = "{}/g_{:08d}".format(a.checkpoint_path, steps)
                    save_checkpoint(checkpoint_path,
                                    {'generator': (generator.module if h.num_gpus > 1 else generator).state_dict()})
                    checkpoint_path = "{}/do_{:08d}".format(a.checkpoint_path, steps)
                    save_checkpoint(checkpoint_path,
                                    {'msd': (msd.module if h.num_gpus > 1 else msd).state_dict(),
                                     'optim_g': optim_g.state_dict(), 'optim_d': optim_d.state_dict(),
                                     'steps': steps, 'epoch': epoch})
                # Validation
                if steps % a.validation_interval == 0:
                    generator.eval()
                    torch.cuda.empty_cache()
                    val_err_tot = 0
                    with torch.no_grad():
                        for j, batch in enumerate(validation_loader):
                            x, y, _, y_mel = batch
                            y_g_hat = generator(x.to(device))
                            y_mel = torch.autograd.Variable(y_mel.to(device, non_blocking=True))
                            y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1), h.n_fft, h.num_mels, h.sampling_rate,
                                                          h.hop_size, h.win_size, h.fmin, h.fmax_for_loss)
                            val_err_tot += F.l1_loss(y_mel, y_g_hat_mel).item()
                            if j <= 4:
                                y_hat_spec = mel_spectrogram(y_g_hat.squeeze(1), h.n_fft, h.num_mels,
                                                             h.sampling_rate, h.hop_size, h.win_size, h.fmin, h.fmax)
                                spec_np = y_hat_spec.squeeze(0).cpu().numpy()
                                assert spec_np.shape[0] == h.num_mels
                        val_err = val_err_tot / (j + 1)
                        print("validation/mel_spec_error {:4.3f} at step {}".format(val_err, steps))
                    generator.train()
            steps += 1
        scheduler_g.step()
        scheduler_d.step()
        if rank == 0:
            print('Time taken for epoch {} is {} sec\n'.format(epoch + 1, int(time.time() - start)))
    return steps, val_err

# ----------------------------------------------------------------------------- inference.py
def inference(a, h, device):
    generator = Generator(h).to(device)
    state_dict_g = load_checkpoint(a.checkpoint_file, device)
    generator.load_state_dict(state_dict_g['generator'])
    filelist = sorted(os.listdir(a.input_wavs_dir))[:3]
    os.makedirs(a.output_dir, exist_ok=True)
    generator.eval()
    generator.remove_weight_norm()
    written = []  # output lengths, for the final print
    with torch.no_grad():
        for i, filname in enumerate(filelist):
            wav, sr = load_wav(os.path.join(a.input_wavs_dir, filname))
            wav = wav / MAX_WAV_VALUE
            wav = torch.FloatTensor(wav).to(device)
            x = mel_spectrogram(wav.unsqueeze(0), h.n_fft, h.num_mels, h.sampling_rate, h.hop_size, h.win_size,
                                h.fmin, h.fmax)
            y_g_hat = generator(x)
            audio = y_g_hat.squeeze() * MAX_WAV_VALUE
            audio = audio.cpu().numpy().astype('int16')
            output_file = os.path.join(a.output_dir, os.path.splitext(filname)[0] + '_generated.wav')
            write(output_file, h.sampling_rate, audio)
            written.append(len(audio))
    return written

def make_ljspeech(root, h, n_train=16, n_valid=2):
    """Synthetic LJSpeech-1.1 layout: wavs/LJ001-00NN.wav plus training.txt / validation.txt."""
    rng = np.random.RandomState(0)
    wav_dir = os.path.join(root, 'LJSpeech-1.1', 'wavs')
    os.makedirs(wav_dir)
    names = ['LJ001-{:04d}'.format(i + 1) for i in range(n_train + n_valid)]
    for name in names:
        t = np.arange(int(h.segment_size * 1.5) + rng.randint(0, h.segment_size // 2)) / h.sampling_rate
        f0 = rng.uniform(120, 400)
        sig = 0.5 * np.sin(2 * np.pi * f0 * t) + 0.2 * np.sin(5 * np.pi * f0 * t) + 0.05 * rng.randn(len(t))
        write(os.path.join(wav_dir, name + '.wav'), h.sampling_rate, (sig / 1.2 * 20000).astype(np.int16))
    for fname, subset in (('training.txt', names[:n_train]), ('validation.txt', names[n_train:])):
        with open(os.path.join(root, 'LJSpeech-1.1', fname), 'w', encoding='utf-8') as f:
            f.write('\n'.join('{}|synthetic text|synthetic text'.format(nm) for nm in subset) + '\n')
    return wav_dir

def main():
    print('Initializing Training Process..')
    root = tempfile.mkdtemp(prefix='hifigan_')
    config = {
        "resblock": "1", "num_gpus": 0, "batch_size": 4, "learning_rate": 0.0002, "adam_b1": 0.8,
        "adam_b2": 0.99, "lr_decay": 0.999, "seed": 1234,
        "upsample_rates": [4, 4, 2], "upsample_kernel_sizes": [8, 8, 4], "upsample_initial_channel": 32,
        "resblock_kernel_sizes": [3, 5], "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5]],
        "segment_size": 1024, "num_mels": 20, "num_freq": 65, "n_fft": 128, "hop_size": 32, "win_size": 128,
        "sampling_rate": 8000, "fmin": 0, "fmax": 4000, "fmax_for_loss": None, "num_workers": 0,
        "dist_config": {"dist_backend": "nccl", "dist_url": "tcp://localhost:54321", "world_size": 1}}
    try:
        config_path = os.path.join(root, 'config_v1.json')
        with open(config_path, 'w') as f:
            json.dump(config, f)
        wav_dir = make_ljspeech(root, AttrDict(config))
        a = argparse.Namespace(  # train.py's argparse defaults, pointed at the temporary folder
            input_wavs_dir=wav_dir, input_training_file=os.path.join(root, 'LJSpeech-1.1', 'training.txt'),
            input_validation_file=os.path.join(root, 'LJSpeech-1.1', 'validation.txt'),
            checkpoint_path=os.path.join(root, 'cp_hifigan'), config=config_path, training_epochs=2,
            stdout_interval=2, checkpoint_interval=5, validation_interval=4)
        with open(a.config) as f:
            data = f.read()
        h = AttrDict(json.loads(data))
        build_env(a.config, 'config.json', a.checkpoint_path)
        torch.manual_seed(h.seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed(h.seed)
            h.num_gpus = torch.cuda.device_count()
            h.batch_size = int(h.batch_size / h.num_gpus)
            print('Batch size per GPU :', h.batch_size)
        steps, val_err = train(0, a, h)
        # a second launch resumes from the newest g_/do_ checkpoints and trains one more epoch
        a.training_epochs = 3
        steps2, val_err2 = train(0, a, h)
        # inference.py: separate process in the original, with its own device choice
        if torch.cuda.is_available():
            torch.cuda.manual_seed(h.seed)
            device = torch.device('cuda')
        else:
            device = torch.device('cpu')
        a.checkpoint_file = scan_checkpoint(a.checkpoint_path, 'g_')
        a.output_dir = os.path.join(root, 'generated_files')
        lengths = inference(a, h, device)
        print("done steps={} resumed_steps={} val_err={:.3f} generated={}".format(steps, steps2, val_err2, lengths))
    finally:
        shutil.rmtree(root, ignore_errors=True)

if __name__ == '__main__':
    main()
