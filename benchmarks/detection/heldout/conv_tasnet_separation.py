"""Trains Luo and Mesgarani's Conv-TasNet to separate two-source mixtures with utterance-level permutation invariant
training (PIT) on the scale-invariant SNR, using Kaituo Xu's `Solver`: a 1-D conv encoder, a separator of dilated
depthwise-separable blocks with global layer norm that emits one mask per source, and a linear decoder whose frames
are put back together by `overlap_and_add`. Training batches of fixed-length segments and validation batches of
whole, zero-padded utterances with their lengths are moved to the GPU in `_run_one_epoch`; the loss masks the
padding, picks the best permutation per utterance and reorders the estimates. The solver saves a package per epoch
and the best model; a second run resumes from an epoch package (`--continue_from`); evaluate.py's loop reloads the
best model onto the CPU, moves it to the GPU and reports the SI-SNR improvement on held-out mixtures.

Modeled on: kaituoxu/Conv-TasNet, src/train.py, src/solver.py, src/conv_tasnet.py, src/pit_criterion.py,
src/utils.py, src/data.py and src/evaluate.py at commit 0d9d9dcd8037b396fd029000af58cda6b7663b11
(https://github.com/kaituoxu/Conv-TasNet/blob/0d9d9dcd8037b396fd029000af58cda6b7663b11/src/solver.py,
https://github.com/kaituoxu/Conv-TasNet/blob/0d9d9dcd8037b396fd029000af58cda6b7663b11/src/conv_tasnet.py).

Kept: train.py's `main` with `if args.use_cuda: model = torch.nn.DataParallel(model); model.cuda()` before the
optimizer is built (`--use_cuda` an int option); the `Solver`: `self.use_cuda = args.use_cuda`, CPU
`self.tr_loss = torch.Tensor(self.epochs)`, `_reset` with `package = torch.load(self.continue_from)` (no
`map_location`), `self.model.module.load_state_dict`, optimizer state and loss history restored; `train` with
`model.train()`/`model.eval()` and per-epoch and best-model `torch.save(self.model.module.serialize(...))`;
`_run_one_epoch` with `if self.use_cuda: padded_mixture = padded_mixture.cuda(); mixture_lengths =
mixture_lengths.cuda(); padded_source = padded_source.cuda()`, `clip_grad_norm_`, `loss.item()`; conv_tasnet.py's
modules, `load_model` (`torch.load(path, map_location=lambda storage, loc: storage)`, "Load to CPU"),
`load_model_from_package` and `serialize`; utils.py's `overlap_and_add` (`signal.new_tensor(frame)` "signal may in
GPU or CPU", `signal.new_zeros`) and `remove_pad` (`.cpu().numpy()`); pit_criterion.py's `cal_loss`,
`cal_si_snr_with_pit` (`source.new_tensor(list(permutations(...)))`, `source.new_zeros`, `einsum`),
`reorder_source` (`torch.zeros_like`) and `get_mask` (`source.new_ones`); data.py's `_collate_fn` (`ilens` a CPU
tensor from numpy), `load_mixtures_and_sources` and `pad_list`; evaluate.py's `evaluate` (`load_model`,
`model.eval()`, `if args.use_cuda: model.cuda()`, the three batch tensors moved under `args.use_cuda`,
`remove_pad` of the reordered estimates), `cal_SISNRi` and `cal_SISNR`.

Changed to run here: WSJ0-2mix wav files and json lists are replaced by `make_mixtures`, which puts sinusoid and
decaying square-wave "speakers" in an in-memory `WAVS` table that `load_wav` reads instead of `librosa.load`;
`AudioDataset` takes those (name, #samples) lists and groups sorted utterances `batch_size` at a time (the author
also counts segments per batch); DataLoaders use `num_workers=0`; `--use_cuda` defaults to
`int(torch.cuda.is_available())`, and with 0 `main` still wraps the model in `torch.nn.DataParallel` (no `.cuda()`),
since the author's `Solver` calls `self.model.module` unconditionally and so only runs with `--use_cuda 1`; the
solver's visdom plots, lr halving and early stop, the model's causal (Chomp1d) path, and evaluate.py's SDR
(mir_eval) are left out; the argparse options are abbreviated (N..C declared in a loop) and `parse_args` gets lists;
the script runs in a temporary folder (holding `exp/temp`); one-line comments and blank lines inside functions are
dropped, a few long statements joined.
Shrunk: N=32, L=16, B=16, H=32, X=4, R=2 instead of 256/20/256/512/8/4; 24 training mixtures of 300-700 samples in
320-sample segments instead of 4 s, 8 validation and 6 test mixtures; batch 4; lr 5e-3 instead of 1e-3; 3 epochs,
then 1 resumed epoch.
"""
import argparse
import math
import os
import shutil
import tempfile
import time
from itertools import permutations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data

EPS = 1e-8
WAVS = {}  # stands in for the wav files on disk


def load_wav(path, sr=8000):
    return WAVS[path], sr


def make_mixtures(prefix, n, rng):
    infos = [[], [], []]
    for i in range(n):
        T = int(rng.randint(300, 700))
        t = np.arange(T) / 8000.0
        s1 = sum(rng.uniform(0.2, 0.6) * np.sin(2 * np.pi * rng.uniform(150, 600) * t + rng.uniform(0, 6))
                 for _ in range(2))
        s2 = np.sign(np.sin(2 * np.pi * rng.uniform(700, 1500) * t)) * rng.uniform(0.1, 0.4) * np.exp(-t * 20)
        for k, (name, wav) in enumerate([('mix', s1 + s2), ('s1', s1), ('s2', s2)]):
            WAVS['%s/%s/%d.wav' % (prefix, name, i)] = wav.astype(np.float32)
            infos[k].append(['%s/%s/%d.wav' % (prefix, name, i), T])
    return infos


# ------------------------------------------------------------------------------------------------- utils.py
def overlap_and_add(signal, frame_step):
    outer_dimensions = signal.size()[:-2]
    frames, frame_length = signal.size()[-2:]
    subframe_length = math.gcd(frame_length, frame_step)  # gcd=Greatest Common Divisor
    subframe_step = frame_step // subframe_length
    subframes_per_frame = frame_length // subframe_length
    output_size = frame_step * (frames - 1) + frame_length
    output_subframes = output_size // subframe_length
    subframe_signal = signal.view(*outer_dimensions, -1, subframe_length)
    frame = torch.arange(0, output_subframes).unfold(0, subframes_per_frame, subframe_step)
    frame = signal.new_tensor(frame).long()  # signal may in GPU or CPU
    frame = frame.contiguous().view(-1)
    result = signal.new_zeros(*outer_dimensions, output_subframes, subframe_length)
    result.index_add_(-2, frame, subframe_signal)
    result = result.view(*outer_dimensions, -1)
    return result


def remove_pad(inputs, inputs_lengths):
    results = []
    dim = inputs.dim()
    if dim == 3:
        C = inputs.size(1)
    for input, length in zip(inputs, inputs_lengths):
        if dim == 3: # [B, C, T]
            results.append(input[:,:length].view(C, -1).cpu().numpy())
        elif dim == 2:  # [B, T]
            results.append(input[:length].view(-1).cpu().numpy())
    return results


# ------------------------------------------------------------------------------------------- conv_tasnet.py
class ConvTasNet(nn.Module):
    def __init__(self, N, L, B, H, P, X, R, C, norm_type="gLN", causal=False, mask_nonlinear='relu'):
        super(ConvTasNet, self).__init__()
        self.N, self.L, self.B, self.H, self.P, self.X, self.R, self.C = N, L, B, H, P, X, R, C
        self.norm_type = norm_type
        self.causal = causal
        self.mask_nonlinear = mask_nonlinear
        self.encoder = Encoder(L, N)
        self.separator = TemporalConvNet(N, B, H, P, X, R, C, norm_type, causal, mask_nonlinear)
        self.decoder = Decoder(N, L)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_normal_(p)

    def forward(self, mixture):
        mixture_w = self.encoder(mixture)
        est_mask = self.separator(mixture_w)
        est_source = self.decoder(mixture_w, est_mask)
        # T changed after conv1d in encoder, fix it here
        T_origin = mixture.size(-1)
        T_conv = est_source.size(-1)
        est_source = F.pad(est_source, (0, T_origin - T_conv))
        return est_source

    @classmethod
    def load_model(cls, path):
        # Load to CPU
        package = torch.load(path, map_location=lambda storage, loc: storage)
        model = cls.load_model_from_package(package)
        return model

    @classmethod
    def load_model_from_package(cls, package):
        model = cls(package['N'], package['L'], package['B'], package['H'],
                    package['P'], package['X'], package['R'], package['C'],
                    norm_type=package['norm_type'], causal=package['causal'],
                    mask_nonlinear=package['mask_nonlinear'])
        model.load_state_dict(package['state_dict'])
        return model

    @staticmethod
    def serialize(model, optimizer, epoch, tr_loss=None, cv_loss=None):
        package = {'N': model.N, 'L': model.L, 'B': model.B, 'H': model.H,
                   'P': model.P, 'X': model.X, 'R': model.R, 'C': model.C,
                   'norm_type': model.norm_type, 'causal': model.causal,
                   'mask_nonlinear': model.mask_nonlinear,
                   'state_dict': model.state_dict(),
                   'optim_dict': optimizer.state_dict(),
                   'epoch': epoch}
        if tr_loss is not None:
            package['tr_loss'] = tr_loss
            package['cv_loss'] = cv_loss
        return package


class Encoder(nn.Module):
    def __init__(self, L, N):
        super(Encoder, self).__init__()
        self.L, self.N = L, N
        self.conv1d_U = nn.Conv1d(1, N, kernel_size=L, stride=L // 2, bias=False)

    def forward(self, mixture):
        mixture = torch.unsqueeze(mixture, 1)  # [M, 1, T]
        mixture_w = F.relu(self.conv1d_U(mixture))  # [M, N, K]
        return mixture_w


class Decoder(nn.Module):
    def __init__(self, N, L):
        super(Decoder, self).__init__()
        self.N, self.L = N, L
        self.basis_signals = nn.Linear(N, L, bias=False)

    def forward(self, mixture_w, est_mask):
        source_w = torch.unsqueeze(mixture_w, 1) * est_mask  # [M, C, N, K]
        source_w = torch.transpose(source_w, 2, 3) # [M, C, K, N]
        est_source = self.basis_signals(source_w)  # [M, C, K, L]
        est_source = overlap_and_add(est_source, self.L//2) # M x C x T
        return est_source


class TemporalConvNet(nn.Module):
    def __init__(self, N, B, H, P, X, R, C, norm_type="gLN", causal=False, mask_nonlinear='relu'):
        super(TemporalConvNet, self).__init__()
        self.C = C
        self.mask_nonlinear = mask_nonlinear
        layer_norm = ChannelwiseLayerNorm(N)
        bottleneck_conv1x1 = nn.Conv1d(N, B, 1, bias=False)
        repeats = []
        for r in range(R):
            blocks = []
            for x in range(X):
                dilation = 2**x
                padding = (P - 1) * dilation if causal else (P - 1) * dilation // 2
                blocks += [TemporalBlock(B, H, P, stride=1, padding=padding, dilation=dilation,
                                         norm_type=norm_type, causal=causal)]
            repeats += [nn.Sequential(*blocks)]
        temporal_conv_net = nn.Sequential(*repeats)
        mask_conv1x1 = nn.Conv1d(B, C*N, 1, bias=False)
        self.network = nn.Sequential(layer_norm, bottleneck_conv1x1, temporal_conv_net, mask_conv1x1)

    def forward(self, mixture_w):
        M, N, K = mixture_w.size()
        score = self.network(mixture_w)  # [M, N, K] -> [M, C*N, K]
        score = score.view(M, self.C, N, K) # [M, C*N, K] -> [M, C, N, K]
        if self.mask_nonlinear == 'softmax':
            est_mask = F.softmax(score, dim=1)
        elif self.mask_nonlinear == 'relu':
            est_mask = F.relu(score)
        return est_mask


class TemporalBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, norm_type="gLN",
                 causal=False):
        super(TemporalBlock, self).__init__()
        conv1x1 = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        prelu = nn.PReLU()
        norm = chose_norm(norm_type, out_channels)
        dsconv = DepthwiseSeparableConv(out_channels, in_channels, kernel_size,
                                        stride, padding, dilation, norm_type, causal)
        self.net = nn.Sequential(conv1x1, prelu, norm, dsconv)

    def forward(self, x):
        residual = x
        out = self.net(x)
        return out + residual  # look like w/o F.relu is better than w/ F.relu


class DepthwiseSeparableConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, norm_type="gLN",
                 causal=False):
        super(DepthwiseSeparableConv, self).__init__()
        depthwise_conv = nn.Conv1d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                                   dilation=dilation, groups=in_channels, bias=False)
        prelu = nn.PReLU()
        norm = chose_norm(norm_type, in_channels)
        pointwise_conv = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        self.net = nn.Sequential(depthwise_conv, prelu, norm, pointwise_conv)

    def forward(self, x):
        return self.net(x)


def chose_norm(norm_type, channel_size):
    if norm_type == "gLN":
        return GlobalLayerNorm(channel_size)
    elif norm_type == "cLN":
        return ChannelwiseLayerNorm(channel_size)
    else: # norm_type == "BN":
        return nn.BatchNorm1d(channel_size)


class ChannelwiseLayerNorm(nn.Module):
    """Channel-wise Layer Normalization (cLN)"""
    def __init__(self, channel_size):
        super(ChannelwiseLayerNorm, self).__init__()
        self.gamma = nn.Parameter(torch.Tensor(1, channel_size, 1))  # [1, N, 1]
        self.beta = nn.Parameter(torch.Tensor(1, channel_size,1 ))  # [1, N, 1]
        self.reset_parameters()

    def reset_parameters(self):
        self.gamma.data.fill_(1)
        self.beta.data.zero_()

    def forward(self, y):
        mean = torch.mean(y, dim=1, keepdim=True)  # [M, 1, K]
        var = torch.var(y, dim=1, keepdim=True, unbiased=False)  # [M, 1, K]
        cLN_y = self.gamma * (y - mean) / torch.pow(var + EPS, 0.5) + self.beta
        return cLN_y


class GlobalLayerNorm(ChannelwiseLayerNorm):
    """Global Layer Normalization (gLN)"""
    def forward(self, y):
        mean = y.mean(dim=1, keepdim=True).mean(dim=2, keepdim=True) #[M, 1, 1]
        var = (torch.pow(y-mean, 2)).mean(dim=1, keepdim=True).mean(dim=2, keepdim=True)
        gLN_y = self.gamma * (y - mean) / torch.pow(var + EPS, 0.5) + self.beta
        return gLN_y


# ----------------------------------------------------------------------------------------- pit_criterion.py
def cal_loss(source, estimate_source, source_lengths):
    max_snr, perms, max_snr_idx = cal_si_snr_with_pit(source, estimate_source, source_lengths)
    loss = 0 - torch.mean(max_snr)
    reorder_estimate_source = reorder_source(estimate_source, perms, max_snr_idx)
    return loss, max_snr, estimate_source, reorder_estimate_source


def cal_si_snr_with_pit(source, estimate_source, source_lengths):
    assert source.size() == estimate_source.size()
    B, C, T = source.size()
    mask = get_mask(source, source_lengths)
    estimate_source *= mask
    num_samples = source_lengths.view(-1, 1, 1).float()  # [B, 1, 1]
    mean_target = torch.sum(source, dim=2, keepdim=True) / num_samples
    mean_estimate = torch.sum(estimate_source, dim=2, keepdim=True) / num_samples
    zero_mean_target = source - mean_target
    zero_mean_estimate = estimate_source - mean_estimate
    zero_mean_target *= mask
    zero_mean_estimate *= mask
    s_target = torch.unsqueeze(zero_mean_target, dim=1)  # [B, 1, C, T]
    s_estimate = torch.unsqueeze(zero_mean_estimate, dim=2)  # [B, C, 1, T]
    pair_wise_dot = torch.sum(s_estimate * s_target, dim=3, keepdim=True)  # [B, C, C, 1]
    s_target_energy = torch.sum(s_target ** 2, dim=3, keepdim=True) + EPS  # [B, 1, C, 1]
    pair_wise_proj = pair_wise_dot * s_target / s_target_energy  # [B, C, C, T]
    e_noise = s_estimate - pair_wise_proj  # [B, C, C, T]
    pair_wise_si_snr = torch.sum(pair_wise_proj ** 2, dim=3) / (torch.sum(e_noise ** 2, dim=3) + EPS)
    pair_wise_si_snr = 10 * torch.log10(pair_wise_si_snr + EPS)  # [B, C, C]
    perms = source.new_tensor(list(permutations(range(C))), dtype=torch.long)
    index = torch.unsqueeze(perms, 2)
    perms_one_hot = source.new_zeros((*perms.size(), C)).scatter_(2, index, 1)
    snr_set = torch.einsum('bij,pij->bp', [pair_wise_si_snr, perms_one_hot])
    max_snr_idx = torch.argmax(snr_set, dim=1)  # [B]
    max_snr, _ = torch.max(snr_set, dim=1, keepdim=True)
    max_snr /= C
    return max_snr, perms, max_snr_idx


def reorder_source(source, perms, max_snr_idx):
    B, C, *_ = source.size()
    max_snr_perm = torch.index_select(perms, dim=0, index=max_snr_idx)
    reorder_source = torch.zeros_like(source)
    for b in range(B):
        for c in range(C):
            reorder_source[b, c] = source[b, max_snr_perm[b][c]]
    return reorder_source


def get_mask(source, source_lengths):
    B, _, T = source.size()
    mask = source.new_ones((B, 1, T))
    for i in range(B):
        mask[i, :, source_lengths[i]:] = 0
    return mask


# ------------------------------------------------------------------------------------------------- data.py
class AudioDataset(data.Dataset):
    def __init__(self, infos, batch_size, sample_rate=8000, segment=4.0):
        super(AudioDataset, self).__init__()
        def sort(infos): return sorted(infos, key=lambda info: int(info[1]), reverse=True)
        mix_infos, s1_infos, s2_infos = [sort(x) for x in infos]
        segment_len = int(segment * sample_rate) if segment >= 0.0 else segment
        self.minibatch = [[mix_infos[i:i + batch_size], s1_infos[i:i + batch_size], s2_infos[i:i + batch_size],
                           sample_rate, segment_len] for i in range(0, len(mix_infos), batch_size)]

    def __getitem__(self, index):
        return self.minibatch[index]

    def __len__(self):
        return len(self.minibatch)


class AudioDataLoader(data.DataLoader):
    def __init__(self, *args, **kwargs):
        super(AudioDataLoader, self).__init__(*args, **kwargs)
        self.collate_fn = _collate_fn


def _collate_fn(batch):
    assert len(batch) == 1
    mixtures, sources = load_mixtures_and_sources(batch[0])
    ilens = np.array([mix.shape[0] for mix in mixtures])
    pad_value = 0
    mixtures_pad = pad_list([torch.from_numpy(mix).float() for mix in mixtures], pad_value)
    ilens = torch.from_numpy(ilens)
    sources_pad = pad_list([torch.from_numpy(s).float() for s in sources], pad_value)
    sources_pad = sources_pad.permute((0, 2, 1)).contiguous()
    return mixtures_pad, ilens, sources_pad


def load_mixtures_and_sources(batch):
    mixtures, sources = [], []
    mix_infos, s1_infos, s2_infos, sample_rate, segment_len = batch
    for mix_info, s1_info, s2_info in zip(mix_infos, s1_infos, s2_infos):
        assert mix_info[1] == s1_info[1] and s1_info[1] == s2_info[1]
        mix, _ = load_wav(mix_info[0], sr=sample_rate)
        s1, _ = load_wav(s1_info[0], sr=sample_rate)
        s2, _ = load_wav(s2_info[0], sr=sample_rate)
        s = np.dstack((s1, s2))[0]  # T x C, C = 2
        utt_len = mix.shape[-1]
        if segment_len >= 0:
            for i in range(0, utt_len - segment_len + 1, segment_len):
                mixtures.append(mix[i:i+segment_len])
                sources.append(s[i:i+segment_len])
            if utt_len % segment_len != 0:
                mixtures.append(mix[-segment_len:])
                sources.append(s[-segment_len:])
        else:  # full utterance
            mixtures.append(mix)
            sources.append(s)
    return mixtures, sources


def pad_list(xs, pad_value):
    n_batch = len(xs)
    max_len = max(x.size(0) for x in xs)
    pad = xs[0].new(n_batch, max_len, * xs[0].size()[1:]).fill_(pad_value)
    for i in range(n_batch):
        pad[i, :xs[i].size(0)] = xs[i]
    return pad


# ----------------------------------------------------------------------------------------------- solver.py
class Solver(object):
    def __init__(self, data, model, optimizer, args):
        self.tr_loader = data['tr_loader']
        self.cv_loader = data['cv_loader']
        self.model = model
        self.optimizer = optimizer
        self.use_cuda = args.use_cuda
        self.epochs = args.epochs
        self.max_norm = args.max_norm
        self.save_folder = args.save_folder
        self.checkpoint = args.checkpoint
        self.continue_from = args.continue_from
        self.model_path = args.model_path
        self.print_freq = args.print_freq
        self.tr_loss = torch.Tensor(self.epochs)
        self.cv_loss = torch.Tensor(self.epochs)
        self._reset()

    def _reset(self):
        if self.continue_from:
            print('Loading checkpoint model %s' % self.continue_from)
            package = torch.load(self.continue_from)
            self.model.module.load_state_dict(package['state_dict'])
            self.optimizer.load_state_dict(package['optim_dict'])
            self.start_epoch = int(package.get('epoch', 1))
            self.tr_loss[:self.start_epoch] = package['tr_loss'][:self.start_epoch]
            self.cv_loss[:self.start_epoch] = package['cv_loss'][:self.start_epoch]
        else:
            self.start_epoch = 0
        os.makedirs(self.save_folder, exist_ok=True)
        self.best_val_loss = float("inf")

    def train(self):
        for epoch in range(self.start_epoch, self.epochs):
            print("Training...")
            self.model.train()  # Turn on BatchNorm & Dropout
            start = time.time()
            tr_avg_loss = self._run_one_epoch(epoch)
            print('Train Summary | End of Epoch {0} | Time {1:.2f}s | '
                  'Train Loss {2:.3f}'.format(epoch + 1, time.time() - start, tr_avg_loss))
            if self.checkpoint:
                file_path = os.path.join(self.save_folder, 'epoch%d.pth.tar' % (epoch + 1))
                torch.save(self.model.module.serialize(self.model.module, self.optimizer, epoch + 1,
                                                       tr_loss=self.tr_loss, cv_loss=self.cv_loss), file_path)
                print('Saving checkpoint model to %s' % file_path)
            print('Cross validation...')
            self.model.eval()  # Turn off Batchnorm & Dropout
            val_loss = self._run_one_epoch(epoch, cross_valid=True)
            print('Valid Summary | End of Epoch {0} | Time {1:.2f}s | '
                  'Valid Loss {2:.3f}'.format(epoch + 1, time.time() - start, val_loss))
            self.tr_loss[epoch] = tr_avg_loss
            self.cv_loss[epoch] = val_loss
            if val_loss < self.best_val_loss:
                self.best_val_loss = val_loss
                file_path = os.path.join(self.save_folder, self.model_path)
                torch.save(self.model.module.serialize(self.model.module, self.optimizer, epoch + 1,
                                                       tr_loss=self.tr_loss, cv_loss=self.cv_loss), file_path)
                print("Find better validated model, saving to %s" % file_path)

    def _run_one_epoch(self, epoch, cross_valid=False):
        start = time.time()
        total_loss = 0
        data_loader = self.tr_loader if not cross_valid else self.cv_loader
        for i, (data) in enumerate(data_loader):
            padded_mixture, mixture_lengths, padded_source = data
            if self.use_cuda:
                padded_mixture = padded_mixture.cuda()
                mixture_lengths = mixture_lengths.cuda()
                padded_source = padded_source.cuda()
            estimate_source = self.model(padded_mixture)
            loss, max_snr, estimate_source, reorder_estimate_source = \
                cal_loss(padded_source, estimate_source, mixture_lengths)
            if not cross_valid:
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.optimizer.step()
            total_loss += loss.item()
            if i % self.print_freq == 0:
                print('Epoch {0} | Iter {1} | Average Loss {2:.3f} | Current Loss {3:.6f} | {4:.1f} ms/batch'.format(
                    epoch + 1, i + 1, total_loss / (i + 1), loss.item(), 1000 * (time.time() - start) / (i + 1)),
                      flush=True)
        return total_loss / (i + 1)


# ------------------------------------------------------------------------------------------------ train.py
parser = argparse.ArgumentParser(
    "Fully-Convolutional Time-domain Audio Separation Network (Conv-TasNet) "
    "with Permutation Invariant Training")
parser.add_argument('--sample_rate', default=8000, type=int, help='Sample rate')
parser.add_argument('--segment', default=4, type=float, help='Segment length (seconds)')
for name, default in [('N', 256), ('L', 20), ('B', 256), ('H', 512), ('P', 3), ('X', 8), ('R', 4), ('C', 2)]:
    parser.add_argument('--' + name, default=default, type=int)
parser.add_argument('--norm_type', default='gLN', type=str, choices=['gLN', 'cLN', 'BN'])
parser.add_argument('--causal', type=int, default=0, help='Causal (1) or noncausal(0) training')
parser.add_argument('--mask_nonlinear', default='relu', type=str, choices=['relu', 'softmax'])
parser.add_argument('--use_cuda', type=int, default=int(torch.cuda.is_available()), help='Whether use GPU')
parser.add_argument('--epochs', default=30, type=int, help='Number of maximum epochs')
parser.add_argument('--max_norm', default=5, type=float, help='Gradient norm threshold to clip')
parser.add_argument('--batch_size', default=128, type=int, help='Batch size')
parser.add_argument('--num_workers', default=4, type=int, help='Number of workers to generate minibatch')
parser.add_argument('--optimizer', default='adam', type=str, choices=['sgd', 'adam'])
parser.add_argument('--lr', default=1e-3, type=float, help='Init learning rate')
parser.add_argument('--save_folder', default='exp/temp', help='Location to save epoch models')
parser.add_argument('--checkpoint', dest='checkpoint', default=0, type=int)
parser.add_argument('--continue_from', default='', help='Continue from checkpoint model')
parser.add_argument('--model_path', default='final.pth.tar', help='Location to save best validation model')
parser.add_argument('--print_freq', default=10, type=int, help='Frequency of printing training infomation')

def main(args, tr_infos, cv_infos):
    tr_dataset = AudioDataset(tr_infos, args.batch_size, sample_rate=args.sample_rate, segment=args.segment)
    cv_dataset = AudioDataset(cv_infos, batch_size=1,  # 1 -> use less GPU memory to do cv
                              sample_rate=args.sample_rate, segment=-1)  # -1 -> use full audio
    tr_loader = AudioDataLoader(tr_dataset, batch_size=1, num_workers=args.num_workers)
    cv_loader = AudioDataLoader(cv_dataset, batch_size=1, num_workers=0)
    data = {'tr_loader': tr_loader, 'cv_loader': cv_loader}
    model = ConvTasNet(args.N, args.L, args.B, args.H, args.P, args.X, args.R,
                       args.C, norm_type=args.norm_type, causal=args.causal,
                       mask_nonlinear=args.mask_nonlinear)
    if args.use_cuda:
        model = torch.nn.DataParallel(model)
        model.cuda()
    else:
        model = torch.nn.DataParallel(model)  # the Solver uses model.module
    if args.optimizer == 'sgd':
        optimizier = torch.optim.SGD(model.parameters(), lr=args.lr)
    elif args.optimizer == 'adam':
        optimizier = torch.optim.Adam(model.parameters(), lr=args.lr)
    solver = Solver(data, model, optimizier, args)
    solver.train()
    return solver


# --------------------------------------------------------------------------------------------- evaluate.py
def evaluate(args, infos):
    total_SISNRi = 0
    total_cnt = 0
    model = ConvTasNet.load_model(args.model_path)
    model.eval()
    if args.use_cuda:
        model.cuda()
    dataset = AudioDataset(infos, args.batch_size, sample_rate=args.sample_rate, segment=-1)
    data_loader = AudioDataLoader(dataset, batch_size=1, num_workers=0)
    with torch.no_grad():
        for i, (data) in enumerate(data_loader):
            padded_mixture, mixture_lengths, padded_source = data
            if args.use_cuda:
                padded_mixture = padded_mixture.cuda()
                mixture_lengths = mixture_lengths.cuda()
                padded_source = padded_source.cuda()
            estimate_source = model(padded_mixture)  # [B, C, T]
            loss, max_snr, estimate_source, reorder_estimate_source = \
                cal_loss(padded_source, estimate_source, mixture_lengths)
            mixture = remove_pad(padded_mixture, mixture_lengths)
            source = remove_pad(padded_source, mixture_lengths)
            estimate_source = remove_pad(reorder_estimate_source, mixture_lengths)
            for mix, src_ref, src_est in zip(mixture, source, estimate_source):
                avg_SISNRi = cal_SISNRi(src_ref, src_est, mix)
                print("Utt {0}\tSI-SNRi={1:.2f}".format(total_cnt + 1, avg_SISNRi))
                total_SISNRi += avg_SISNRi
                total_cnt += 1
    print("Average SISNR improvement: {0:.2f}".format(total_SISNRi / total_cnt))
    return total_SISNRi / total_cnt


def cal_SISNRi(src_ref, src_est, mix):
    sisnr1 = cal_SISNR(src_ref[0], src_est[0])
    sisnr2 = cal_SISNR(src_ref[1], src_est[1])
    sisnr1b = cal_SISNR(src_ref[0], mix)
    sisnr2b = cal_SISNR(src_ref[1], mix)
    avg_SISNRi = ((sisnr1 - sisnr1b) + (sisnr2 - sisnr2b)) / 2
    return avg_SISNRi


def cal_SISNR(ref_sig, out_sig, eps=1e-8):
    assert len(ref_sig) == len(out_sig)
    ref_sig = ref_sig - np.mean(ref_sig)
    out_sig = out_sig - np.mean(out_sig)
    ref_energy = np.sum(ref_sig ** 2) + eps
    proj = np.sum(ref_sig * out_sig) * ref_sig / ref_energy
    noise = out_sig - proj
    ratio = np.sum(proj ** 2) / (np.sum(noise ** 2) + eps)
    sisnr = 10 * np.log(ratio + eps) / np.log(10.0)
    return sisnr


if __name__ == '__main__':
    torch.manual_seed(123)
    rng = np.random.RandomState(123)
    tr_infos = make_mixtures('tr', 24, rng)
    cv_infos = make_mixtures('cv', 8, rng)
    tt_infos = make_mixtures('tt', 6, rng)
    cwd, workdir = os.getcwd(), tempfile.mkdtemp()
    os.chdir(workdir)
    sizes = ['--segment', '0.04', '--N', '32', '--L', '16', '--B', '16', '--H', '32', '--X', '4', '--R', '2',
             '--batch_size', '4', '--num_workers', '0', '--lr', '5e-3', '--print_freq', '4']
    try:
        args = parser.parse_args(sizes + ['--epochs', '3', '--checkpoint', '1'])
        print(args)
        solver = main(args, tr_infos, cv_infos)
        # resume from the second epoch's package and train the third epoch again
        args = parser.parse_args(sizes + ['--epochs', '3', '--continue_from', 'exp/temp/epoch2.pth.tar'])
        resumed = main(args, tr_infos, cv_infos)
        eval_args = parser.parse_args(sizes + ['--model_path', 'exp/temp/final.pth.tar'])
        sisnri = evaluate(eval_args, tt_infos)
    finally:
        os.chdir(cwd)
        shutil.rmtree(workdir)
    print('done best_cv_loss={:.3f} resumed_cv_loss={:.3f} sisnri={:.3f}'.format(
        solver.best_val_loss, resumed.best_val_loss, sisnri))
