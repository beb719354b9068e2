"""Trains WaveGlow (a flow-based vocoder: audio squeezed into groups of 8 samples, invertible 1x1 convolutions and
affine couplings whose scales and shifts come from a WaveNet-like `WN` conditioned on the upsampled mel spectrogram,
early outputs every few flows) on synthetic speech-like tones the way NVIDIA/waveglow's train.py does it, the JSON
config parsed into the globals `data_config`, `dist_config` and `waveglow_config`: a run from scratch that pickles a
copy of the model every `iters_per_checkpoint` iterations, a run resumed from that checkpoint, then inference.py's
`main` loads the pickled model, removes weight norm, moves it to the GPU and synthesises a wav from a saved mel.

Modeled on: NVIDIA/waveglow, train.py, glow.py, mel2samp.py, inference.py and config.json at commit
8afb643df59265016af6bd255c7516309d675168, with the mel front end of its tacotron2 submodule (layers.py
`TacotronSTFT`, stft.py `STFT.transform`, audio_processing.py `dynamic_range_compression`) at commit
185cd24e046cc1304b4f8e564734d2498c6e2e6f (https://github.com/NVIDIA/waveglow/tree/8afb643df59265016af6bd255c7516309d675168).

Kept: glow.py as written (`fused_add_tanh_sigmoid_multiply` under `@torch.jit.script` given the host tensor
`torch.IntTensor([self.n_channels])`, `WaveGlowLoss`, `Invertible1x1Conv` with its cached `W_inverse` and the
`torch.cuda.HalfTensor` type checks, `WN`, `WaveGlow.forward`, `infer` drawing its noise with
`torch.cuda.FloatTensor(...).normal_()`, `remove_weightnorm`); train.py's `load_checkpoint`
(`torch.load(..., map_location='cpu')` of the pickled model, its `state_dict()` loaded into the live one),
`save_checkpoint` (a fresh `WaveGlow(**waveglow_config).cuda()` given the weights and pickled whole with the
optimizer state), `train` (`torch.cuda.manual_seed`, `WaveGlow(...).cuda()`, Adam, resume with `iteration += 1` and
`epoch_offset`, `mel.cuda()` / `audio.cuda()` in `Variable`s, `loss.item()`) and `__main__` (`num_gpus =
torch.cuda.device_count()`, the rank check, cuDNN flags); mel2samp.py's `files_to_list`, `load_wav_to_torch`,
`Mel2Samp` and its `__main__` saving mels with `torch.save`; inference.py's `main` (`torch.load(path)['model']`,
`waveglow.cuda().eval()`, `mel.cuda()`, `torch.no_grad()` around `infer`, `audio.cpu().numpy()` to a wav).

Changed to run here: the author's GPU-only calls (`.cuda()` in train.py, inference.py and `save_checkpoint`,
`torch.cuda.FloatTensor` in `infer`) are made only when `torch.cuda.is_available()`; LJ Speech is not downloaded:
`make_wavs` writes 16-bit wavs of gliding harmonic tones and the file lists into a temporary folder; librosa is not
installed, so its Slaney mel filters and `pad_center` are small numpy functions; `torch.load` of pickled models gets
`weights_only=False` (PyTorch >= 2.6); `fp16_run` is false (no apex), no tensorboard, the distributed helpers (for
several GPUs) and the denoiser (strength 0) are left out, as is `STFT.inverse`; `num_workers` 1 -> 0; the config
dict is written to `config.json` and read back instead of coming from `-c`.
Shrunk: n_mel_channels 80 -> 20 (`TacotronSTFT`'s default too), n_flows 12 -> 4, n_early_every 4 -> 2, WN n_layers
8 -> 2 and n_channels 256 -> 16; segment_length 16000 -> 4096, batch size 12 -> 4; 16 training clips; 3 + 2 epochs
(12 + 12 iterations), a checkpoint every 8 iterations instead of 2000; one 0.5 s clip synthesised.
"""
import json
import os
import random
import shutil
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.data
from scipy.io.wavfile import read, write
from scipy.signal import get_window
from torch.autograd import Variable
from torch.utils.data import DataLoader

ROOT = tempfile.mkdtemp(prefix='waveglow_')
MAX_WAV_VALUE = 32768.0
CONFIG = {
    "train_config": {"fp16_run": False, "output_directory": os.path.join(ROOT, "checkpoints"), "epochs": 3,
                     "learning_rate": 1e-4, "sigma": 1.0, "iters_per_checkpoint": 8, "batch_size": 4, "seed": 1234,
                     "checkpoint_path": "", "with_tensorboard": False},
    "data_config": {"training_files": os.path.join(ROOT, "train_files.txt"), "segment_length": 4096,
                    "sampling_rate": 22050, "filter_length": 1024, "hop_length": 256, "win_length": 1024,
                    "mel_fmin": 0.0, "mel_fmax": 8000.0},
    "dist_config": {"dist_backend": "nccl", "dist_url": "tcp://localhost:54321"},
    "waveglow_config": {"n_mel_channels": 20, "n_flows": 4, "n_group": 8, "n_early_every": 2, "n_early_size": 2,
                        "WN_config": {"n_layers": 2, "n_channels": 16, "kernel_size": 3}},
}

# ----------------------------------------------------------------------------- synthetic LJ Speech
def make_wavs(folder, n=16, sampling_rate=22050, seed=4):
    rng = np.random.RandomState(seed)
    os.makedirs(folder)
    paths = []
    for k in range(n + 1):
        seconds = rng.uniform(0.15, 0.4) if k < n else 0.5
        t = np.arange(int(seconds * sampling_rate)) / sampling_rate
        f0 = rng.uniform(100, 220) * (1 + 0.3 * t / seconds) * (1 + 0.01 * np.sin(2 * np.pi * 5 * t))
        phase = 2 * np.pi * np.cumsum(f0) / sampling_rate
        wave = sum(np.sin(h * phase) / h for h in range(1, 6)) * np.hanning(len(t)) + rng.normal(0, 0.01, len(t))
        paths.append(os.path.join(folder, 'LJ%03d.wav' % k))
        write(paths[-1], sampling_rate, (0.3 * wave / np.abs(wave).max() * MAX_WAV_VALUE).astype(np.int16))
    with open(CONFIG['data_config']['training_files'], 'w') as f:
        f.write('\n'.join(paths[:n]) + '\n')
    with open(os.path.join(ROOT, 'test_files.txt'), 'w') as f:
        f.write(paths[n] + '\n')

# ----------------------------------------------------------------------------- tacotron2: layers.py, stft.py
def librosa_mel_fn(sr, n_fft, n_mels, fmin, fmax):  # librosa.filters.mel (htk=False, norm='slaney')
    def hz_to_mel(f):
        return np.where(f >= 1000.0, 15.0 + np.log(max(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), f / (200.0 / 3))

    def mel_to_hz(m):
        return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), (200.0 / 3) * m)
    fftfreqs = np.linspace(0, sr / 2, 1 + n_fft // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff, ramps = np.diff(mel_f), np.subtract.outer(mel_f, fftfreqs)
    weights = np.maximum(0, np.minimum(-ramps[:-2] / fdiff[:-1, None], ramps[2:] / fdiff[1:, None]))
    return weights * (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]

def pad_center(data, size):  # librosa.util.pad_center
    lpad = int((size - data.shape[-1]) // 2)
    return np.pad(data, (lpad, int(size - data.shape[-1] - lpad)))

class STFT(torch.nn.Module):
    """adapted from Prem Seetharaman's https://github.com/pseeth/pytorch-stft (transform only)"""
    def __init__(self, filter_length=800, hop_length=200, win_length=800, window='hann'):
        super(STFT, self).__init__()
        self.filter_length = filter_length
        self.hop_length = hop_length
        self.win_length = win_length
        fourier_basis = np.fft.fft(np.eye(self.filter_length))
        cutoff = int((self.filter_length / 2 + 1))
        fourier_basis = np.vstack([np.real(fourier_basis[:cutoff, :]), np.imag(fourier_basis[:cutoff, :])])
        forward_basis = torch.FloatTensor(fourier_basis[:, None, :])
        fft_window = get_window(window, win_length, fftbins=True)
        fft_window = torch.from_numpy(pad_center(fft_window, filter_length)).float()
        forward_basis *= fft_window
        self.register_buffer('forward_basis', forward_basis.float())

    def transform(self, input_data):
        num_batches = input_data.size(0)
        num_samples = input_data.size(1)
        input_data = input_data.view(num_batches, 1, num_samples)
        input_data = F.pad(input_data.unsqueeze(1), (int(self.filter_length / 2), int(self.filter_length / 2), 0, 0),
                           mode='reflect')
        input_data = input_data.squeeze(1)
        forward_transform = F.conv1d(input_data, Variable(self.forward_basis, requires_grad=False),
                                     stride=self.hop_length, padding=0)
        cutoff = int((self.filter_length / 2) + 1)
        real_part = forward_transform[:, :cutoff, :]
        imag_part = forward_transform[:, cutoff:, :]
        magnitude = torch.sqrt(real_part**2 + imag_part**2)
        phase = torch.autograd.Variable(torch.atan2(imag_part.data, real_part.data))
        return magnitude, phase

class TacotronSTFT(torch.nn.Module):
    def __init__(self, filter_length=1024, hop_length=256, win_length=1024, n_mel_channels=20, sampling_rate=22050,
                 mel_fmin=0.0, mel_fmax=8000.0):
        super(TacotronSTFT, self).__init__()
        self.n_mel_channels = n_mel_channels
        self.sampling_rate = sampling_rate
        self.stft_fn = STFT(filter_length, hop_length, win_length)
        mel_basis = librosa_mel_fn(sampling_rate, filter_length, n_mel_channels, mel_fmin, mel_fmax)
        mel_basis = torch.from_numpy(mel_basis).float()
        self.register_buffer('mel_basis', mel_basis)

    def mel_spectrogram(self, y):
        assert(torch.min(y.data) >= -1)
        assert(torch.max(y.data) <= 1)
        magnitudes, phases = self.stft_fn.transform(y)
        magnitudes = magnitudes.data
        mel_output = torch.matmul(self.mel_basis, magnitudes)
        return torch.log(torch.clamp(mel_output, min=1e-5) * 1)  # dynamic_range_compression

# ----------------------------------------------------------------------------- mel2samp.py
def files_to_list(filename):
    with open(filename, encoding='utf-8') as f:
        files = f.readlines()
    files = [f.rstrip() for f in files]
    return files

def load_wav_to_torch(full_path):
    sampling_rate, data = read(full_path)
    return torch.from_numpy(data).float(), sampling_rate

class Mel2Samp(torch.utils.data.Dataset):
    def __init__(self, training_files, segment_length, filter_length, hop_length, win_length, sampling_rate,
                 mel_fmin, mel_fmax):
        self.audio_files = files_to_list(training_files)
        random.seed(1234)
        random.shuffle(self.audio_files)
        self.stft = TacotronSTFT(filter_length=filter_length, hop_length=hop_length, win_length=win_length,
                                 sampling_rate=sampling_rate, mel_fmin=mel_fmin, mel_fmax=mel_fmax)
        self.segment_length = segment_length
        self.sampling_rate = sampling_rate

    def get_mel(self, audio):
        audio_norm = audio / MAX_WAV_VALUE
        audio_norm = audio_norm.unsqueeze(0)
        audio_norm = torch.autograd.Variable(audio_norm, requires_grad=False)
        melspec = self.stft.mel_spectrogram(audio_norm)
        melspec = torch.squeeze(melspec, 0)
        return melspec

    def __getitem__(self, index):
        filename = self.audio_files[index]
        audio, sampling_rate = load_wav_to_torch(filename)
        if sampling_rate != self.sampling_rate:
            raise ValueError("{} SR doesn't match target {} SR".format(sampling_rate, self.sampling_rate))
        # Take segment
        if audio.size(0) >= self.segment_length:
            max_audio_start = audio.size(0) - self.segment_length
            audio_start = random.randint(0, max_audio_start)
            audio = audio[audio_start:audio_start + self.segment_length]
        else:
            audio = torch.nn.functional.pad(audio, (0, self.segment_length - audio.size(0)), 'constant').data
        mel = self.get_mel(audio)
        audio = audio / MAX_WAV_VALUE
        return (mel, audio)

    def __len__(self):
        return len(self.audio_files)

def mel2samp_main(filelist_path, config, output_dir):  # mel2samp.py's __main__
    mel2samp = Mel2Samp(**config["data_config"])
    filepaths = files_to_list(filelist_path)
    if not os.path.isdir(output_dir):
        os.makedirs(output_dir)
    new_filepaths = []
    for filepath in filepaths:
        audio, sr = load_wav_to_torch(filepath)
        melspectrogram = mel2samp.get_mel(audio)
        new_filepath = output_dir + '/' + os.path.basename(filepath) + '.pt'
        print(new_filepath)
        torch.save(melspectrogram, new_filepath)
        new_filepaths.append(new_filepath)
    return new_filepaths

# ----------------------------------------------------------------------------- glow.py
@torch.jit.script
def fused_add_tanh_sigmoid_multiply(input_a, input_b, n_channels):
    n_channels_int = n_channels[0]
    in_act = input_a + input_b
    t_act = torch.tanh(in_act[:, :n_channels_int, :])
    s_act = torch.sigmoid(in_act[:, n_channels_int:, :])
    acts = t_act * s_act
    return acts

class WaveGlowLoss(torch.nn.Module):
    def __init__(self, sigma=1.0):
        super(WaveGlowLoss, self).__init__()
        self.sigma = sigma

    def forward(self, model_output):
        z, log_s_list, log_det_W_list = model_output
        for i, log_s in enumerate(log_s_list):
            if i == 0:
                log_s_total = torch.sum(log_s)
                log_det_W_total = log_det_W_list[i]
            else:
                log_s_total = log_s_total + torch.sum(log_s)
                log_det_W_total += log_det_W_list[i]
        loss = torch.sum(z * z) / (2 * self.sigma * self.sigma) - log_s_total - log_det_W_total
        return loss / (z.size(0) * z.size(1) * z.size(2))

class Invertible1x1Conv(torch.nn.Module):
    """The layer outputs both the convolution, and the log determinant of its weight matrix.  If reverse=True it
    does convolution with inverse"""
    def __init__(self, c):
        super(Invertible1x1Conv, self).__init__()
        self.conv = torch.nn.Conv1d(c, c, kernel_size=1, stride=1, padding=0, bias=False)
        # Sample a random orthonormal matrix to initialize weights
        W = torch.qr(torch.FloatTensor(c, c).normal_())[0]
        # Ensure determinant is 1.0 not -1.0
        if torch.det(W) < 0:
            W[:, 0] = -1 * W[:, 0]
        W = W.view(c, c, 1)
        self.conv.weight.data = W

    def forward(self, z, reverse=False):
        batch_size, group_size, n_of_groups = z.size()
        W = self.conv.weight.squeeze()
        if reverse:
            if not hasattr(self, 'W_inverse'):
                # Reverse computation
                W_inverse = W.float().inverse()
                W_inverse = Variable(W_inverse[..., None])
                if z.type() == 'torch.cuda.HalfTensor':
                    W_inverse = W_inverse.half()
                self.W_inverse = W_inverse
            z = F.conv1d(z, self.W_inverse, bias=None, stride=1, padding=0)
            return z
        else:
            # Forward computation
            log_det_W = batch_size * n_of_groups * torch.logdet(W)
            z = self.conv(z)
            return z, log_det_W

class WN(torch.nn.Module):
    """WaveNet like layer for the affine coupling (not causal, dilation doubling on each layer)"""
    def __init__(self, n_in_channels, n_mel_channels, n_layers, n_channels, kernel_size):
        super(WN, self).__init__()
        assert(kernel_size % 2 == 1)
        assert(n_channels % 2 == 0)
        self.n_layers = n_layers
        self.n_channels = n_channels
        self.in_layers = torch.nn.ModuleList()
        self.res_skip_layers = torch.nn.ModuleList()
        start = torch.nn.Conv1d(n_in_channels, n_channels, 1)
        start = torch.nn.utils.weight_norm(start, name='weight')
        self.start = start
        # Initializing last layer to 0 makes the affine coupling layers do nothing at first
        end = torch.nn.Conv1d(n_channels, 2 * n_in_channels, 1)
        end.weight.data.zero_()
        end.bias.data.zero_()
        self.end = end
        cond_layer = torch.nn.Conv1d(n_mel_channels, 2 * n_channels * n_layers, 1)
        self.cond_layer = torch.nn.utils.weight_norm(cond_layer, name='weight')
        for i in range(n_layers):
            dilation = 2 ** i
            padding = int((kernel_size * dilation - dilation) / 2)
            in_layer = torch.nn.Conv1d(n_channels, 2 * n_channels, kernel_size, dilation=dilation, padding=padding)
            in_layer = torch.nn.utils.weight_norm(in_layer, name='weight')
            self.in_layers.append(in_layer)
            # last one is not necessary
            if i < n_layers - 1:
                res_skip_channels = 2 * n_channels
            else:
                res_skip_channels = n_channels
            res_skip_layer = torch.nn.Conv1d(n_channels, res_skip_channels, 1)
            res_skip_layer = torch.nn.utils.weight_norm(res_skip_layer, name='weight')
            self.res_skip_layers.append(res_skip_layer)

    def forward(self, forward_input):
        audio, spect = forward_input
        audio = self.start(audio)
        output = torch.zeros_like(audio)
        n_channels_tensor = torch.IntTensor([self.n_channels])
        spect = self.cond_layer(spect)
        for i in range(self.n_layers):
            spect_offset = i * 2 * self.n_channels
            acts = fused_add_tanh_sigmoid_multiply(self.in_layers[i](audio),
                                                   spect[:, spect_offset:spect_offset + 2 * self.n_channels, :],
                                                   n_channels_tensor)
            res_skip_acts = self.res_skip_layers[i](acts)
            if i < self.n_layers - 1:
                audio = audio + res_skip_acts[:, :self.n_channels, :]
                output = output + res_skip_acts[:, self.n_channels:, :]
            else:
                output = output + res_skip_acts
        return self.end(output)

class WaveGlow(torch.nn.Module):
    def __init__(self, n_mel_channels, n_flows, n_group, n_early_every, n_early_size, WN_config):
        super(WaveGlow, self).__init__()
        self.upsample = torch.nn.ConvTranspose1d(n_mel_channels, n_mel_channels, 1024, stride=256)
        assert(n_group % 2 == 0)
        self.n_flows = n_flows
        self.n_group = n_group
        self.n_early_every = n_early_every
        self.n_early_size = n_early_size
        self.WN = torch.nn.ModuleList()
        self.convinv = torch.nn.ModuleList()
        n_half = int(n_group / 2)
        # Set up layers with the right sizes based on how many dimensions have been output already
        n_remaining_channels = n_group
        for k in range(n_flows):
            if k % self.n_early_every == 0 and k > 0:
                n_half = n_half - int(self.n_early_size / 2)
                n_remaining_channels = n_remaining_channels - self.n_early_size
            self.convinv.append(Invertible1x1Conv(n_remaining_channels))
            self.WN.append(WN(n_half, n_mel_channels * n_group, **WN_config))
        self.n_remaining_channels = n_remaining_channels  # Useful during inference

    def forward(self, forward_input):
        spect, audio = forward_input
        #  Upsample spectrogram to size of audio
        spect = self.upsample(spect)
        assert(spect.size(2) >= audio.size(1))
        if spect.size(2) > audio.size(1):
            spect = spect[:, :, :audio.size(1)]
        spect = spect.unfold(2, self.n_group, self.n_group).permute(0, 2, 1, 3)
        spect = spect.contiguous().view(spect.size(0), spect.size(1), -1).permute(0, 2, 1)
        audio = audio.unfold(1, self.n_group, self.n_group).permute(0, 2, 1)
        output_audio, log_s_list, log_det_W_list = [], [], []
        for k in range(self.n_flows):
            if k % self.n_early_every == 0 and k > 0:
                output_audio.append(audio[:, :self.n_early_size, :])
                audio = audio[:, self.n_early_size:, :]
            audio, log_det_W = self.convinv[k](audio)
            log_det_W_list.append(log_det_W)
            n_half = int(audio.size(1) / 2)
            audio_0 = audio[:, :n_half, :]
            audio_1 = audio[:, n_half:, :]
            output = self.WN[k]((audio_0, spect))
            log_s = output[:, n_half:, :]
            b = output[:, :n_half, :]
            audio_1 = torch.exp(log_s) * audio_1 + b
            log_s_list.append(log_s)
            audio = torch.cat([audio_0, audio_1], 1)
        output_audio.append(audio)
        return torch.cat(output_audio, 1), log_s_list, log_det_W_list

    def infer(self, spect, sigma=1.0):
        spect = self.upsample(spect)
        # trim conv artifacts. maybe pad spec to kernel multiple
        time_cutoff = self.upsample.kernel_size[0] - self.upsample.stride[0]
        spect = spect[:, :, :-time_cutoff]
        spect = spect.unfold(2, self.n_group, self.n_group).permute(0, 2, 1, 3)
        spect = spect.contiguous().view(spect.size(0), spect.size(1), -1).permute(0, 2, 1)
        FloatTensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
        if spect.type() == 'torch.cuda.HalfTensor':
            audio = torch.cuda.HalfTensor(spect.size(0), self.n_remaining_channels, spect.size(2)).normal_()
        else:
            audio = FloatTensor(spect.size(0), self.n_remaining_channels, spect.size(2)).normal_()
        audio = torch.autograd.Variable(sigma * audio)
        for k in reversed(range(self.n_flows)):
            n_half = int(audio.size(1) / 2)
            audio_0 = audio[:, :n_half, :]
            audio_1 = audio[:, n_half:, :]
            output = self.WN[k]((audio_0, spect))
            s = output[:, n_half:, :]
            b = output[:, :n_half, :]
            audio_1 = (audio_1 - b) / torch.exp(s)
            audio = torch.cat([audio_0, audio_1], 1)
            audio = self.convinv[k](audio, reverse=True)
            if k % self.n_early_every == 0 and k > 0:
                if spect.type() == 'torch.cuda.HalfTensor':
                    z = torch.cuda.HalfTensor(spect.size(0), self.n_early_size, spect.size(2)).normal_()
                else:
                    z = FloatTensor(spect.size(0), self.n_early_size, spect.size(2)).normal_()
                audio = torch.cat((sigma * z, audio), 1)
        audio = audio.permute(0, 2, 1).contiguous().view(audio.size(0), -1).data
        return audio

    @staticmethod
    def remove_weightnorm(model):
        waveglow = model
        for WN in waveglow.WN:
            WN.start = torch.nn.utils.remove_weight_norm(WN.start)
            WN.in_layers = remove(WN.in_layers)
            WN.cond_layer = torch.nn.utils.remove_weight_norm(WN.cond_layer)
            WN.res_skip_layers = remove(WN.res_skip_layers)
        return waveglow

def remove(conv_list):
    new_conv_list = torch.nn.ModuleList()
    for old_conv in conv_list:
        old_conv = torch.nn.utils.remove_weight_norm(old_conv)
        new_conv_list.append(old_conv)
    return new_conv_list

# ----------------------------------------------------------------------------- train.py
def load_checkpoint(checkpoint_path, model, optimizer):
    assert os.path.isfile(checkpoint_path)
    checkpoint_dict = torch.load(checkpoint_path, map_location='cpu', weights_only=False)
    iteration = checkpoint_dict['iteration']
    optimizer.load_state_dict(checkpoint_dict['optimizer'])
    model_for_loading = checkpoint_dict['model']
    model.load_state_dict(model_for_loading.state_dict())
    print("Loaded checkpoint '{}' (iteration {})" .format(checkpoint_path, iteration))
    return model, optimizer, iteration

def save_checkpoint(model, optimizer, learning_rate, iteration, filepath):
    print("Saving model and optimizer state at iteration {} to {}".format(iteration, filepath))
    model_for_saving = WaveGlow(**waveglow_config)
    if torch.cuda.is_available():
        model_for_saving = model_for_saving.cuda()
    model_for_saving.load_state_dict(model.state_dict())
    torch.save({'model': model_for_saving, 'iteration': iteration, 'optimizer': optimizer.state_dict(),
                'learning_rate': learning_rate}, filepath)

def train(num_gpus, rank, group_name, output_directory, epochs, learning_rate, sigma, iters_per_checkpoint,
          batch_size, seed, fp16_run, checkpoint_path, with_tensorboard):
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)
    criterion = WaveGlowLoss(sigma)
    model = WaveGlow(**waveglow_config)
    if torch.cuda.is_available():
        model = model.cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    # Load checkpoint if one exists
    iteration = 0
    if checkpoint_path != "":
        model, optimizer, iteration = load_checkpoint(checkpoint_path, model, optimizer)
        iteration += 1  # next iteration is iteration + 1
    trainset = Mel2Samp(**data_config)
    train_loader = DataLoader(trainset, num_workers=0, shuffle=False, sampler=None, batch_size=batch_size,
                              pin_memory=False, drop_last=True)
    # Get shared output_directory ready
    if rank == 0:
        if not os.path.isdir(output_directory):
            os.makedirs(output_directory)
            os.chmod(output_directory, 0o775)
        print("output directory", output_directory)
    model.train()
    epoch_offset = max(0, int(iteration / len(train_loader)))
    # ================ MAIN TRAINNIG LOOP! ===================
    for epoch in range(epoch_offset, epochs):
        print("Epoch: {}".format(epoch))
        for i, batch in enumerate(train_loader):
            model.zero_grad()
            mel, audio = batch
            mel = torch.autograd.Variable(mel.cuda() if torch.cuda.is_available() else mel)
            audio = torch.autograd.Variable(audio.cuda() if torch.cuda.is_available() else audio)
            outputs = model((mel, audio))
            loss = criterion(outputs)
            reduced_loss = loss.item()
            loss.backward()
            optimizer.step()
            print("{}:\t{:.9f}".format(iteration, reduced_loss))
            if (iteration % iters_per_checkpoint == 0):
                if rank == 0:
                    checkpoint_path = "{}/waveglow_{}".format(output_directory, iteration)
                    save_checkpoint(model, optimizer, learning_rate, iteration, checkpoint_path)
            iteration += 1
    return reduced_loss

# ----------------------------------------------------------------------------- inference.py
def inference_main(mel_files, waveglow_path, sigma, output_dir, sampling_rate, is_fp16, denoiser_strength):
    mel_files = files_to_list(mel_files)
    waveglow = torch.load(waveglow_path, weights_only=False)['model']
    waveglow = waveglow.remove_weightnorm(waveglow)
    (waveglow.cuda() if torch.cuda.is_available() else waveglow).eval()
    for i, file_path in enumerate(mel_files):
        file_name = os.path.splitext(os.path.basename(file_path))[0]
        mel = torch.load(file_path)
        mel = torch.autograd.Variable(mel.cuda() if torch.cuda.is_available() else mel)
        mel = torch.unsqueeze(mel, 0)
        mel = mel.half() if is_fp16 else mel
        with torch.no_grad():
            audio = waveglow.infer(mel, sigma=sigma)
            audio = audio * MAX_WAV_VALUE
        audio = audio.squeeze()
        audio = audio.cpu().numpy()
        audio = audio.astype('int16')
        audio_path = os.path.join(output_dir, "{}_synthesis.wav".format(file_name))
        write(audio_path, sampling_rate, audio)
        print(audio_path)
    return audio

if __name__ == "__main__":
    try:
        make_wavs(os.path.join(ROOT, 'wavs'))
        with open(os.path.join(ROOT, 'config.json'), 'w') as f:
            json.dump(CONFIG, f)
        with open(os.path.join(ROOT, 'config.json')) as f:
            data = f.read()
        config = json.loads(data)
        train_config = config["train_config"]
        data_config = config["data_config"]
        dist_config = config["dist_config"]
        waveglow_config = config["waveglow_config"]
        num_gpus = torch.cuda.device_count()
        rank, group_name = 0, ''
        if num_gpus > 1:
            print("WARNING: Multiple GPUs detected but no distributed group set")
            num_gpus = 1
        if num_gpus == 1 and rank != 0:
            raise Exception("Doing single GPU training on rank > 0")
        torch.backends.cudnn.enabled = True
        torch.backends.cudnn.benchmark = False
        train(num_gpus, rank, group_name, **train_config)
        # resume from the last checkpoint for two more epochs
        train_config.update(checkpoint_path=os.path.join(train_config['output_directory'], 'waveglow_8'), epochs=5)
        loss = train(num_gpus, rank, group_name, **train_config)
        with open(os.path.join(ROOT, 'mel_files.txt'), 'w') as f:
            f.write('\n'.join(mel2samp_main(os.path.join(ROOT, 'test_files.txt'), config, os.path.join(ROOT, 'mels'))))
        audio = inference_main(os.path.join(ROOT, 'mel_files.txt'), os.path.join(train_config['output_directory'],
                               'waveglow_16'), 1.0, ROOT, data_config['sampling_rate'], False, 0.0)
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)
    print('done: final training loss %.4f, synthesised %d samples' % (loss, len(audio)))
