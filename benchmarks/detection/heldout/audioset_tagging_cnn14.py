"""Trains a (narrow) Cnn14 audio tagger with mixup and SpecAugment on synthetic multi-label clips, following
qiuqiangkong/audioset_tagging_cnn's pytorch/main.py: `--cuda` is a `store_true` flag and the device is
`torch.device('cuda') if args.cuda and torch.cuda.is_available() else torch.device('cpu')`, later turned into the
string 'cuda' or 'cpu'; the model is always wrapped in `torch.nn.DataParallel` and moved with `model.to(device)`
only `if 'cuda' in str(device)`; batches come from the data generator as dicts of numpy arrays (waveform, target,
audio names, and the mixup coefficients drawn in numpy by `Mixup.get_lambda`), and every entry is moved with
`move_data_to_device`, which turns float arrays into `torch.Tensor` and int arrays into `torch.LongTensor` before
`.to(device)` and leaves string arrays alone. The spectrogram and log-mel front ends are frozen convolution and
matmul parameters inside the model, SpecAugment zeroes stripes chosen with CPU `torch.randint`, and `do_mixup`
mixes spectrograms and targets with the device mixup coefficients. The `Evaluator` holds the unwrapped model,
finds its device with `next(model.parameters()).device`, collects `.data.cpu().numpy()` outputs and computes mAP and
AUC with sklearn. Checkpoints hold `model.module.state_dict()` and the sampler state, and a second run resumes from
one with `torch.load(resume_checkpoint_path)` before the `DataParallel` wrap and the move.

Modeled on: qiuqiangkong/audioset_tagging_cnn, pytorch/main.py, pytorch/models.py (Cnn14, ConvBlock),
pytorch/pytorch_utils.py, pytorch/evaluate.py, pytorch/losses.py, utils/data_generator.py and utils/utilities.py at
commit d2f4b8c18eab44737fcc0de1248ae21eb43f6aa4
(https://github.com/qiuqiangkong/audioset_tagging_cnn/blob/d2f4b8c18eab44737fcc0de1248ae21eb43f6aa4/pytorch/main.py,
https://github.com/qiuqiangkong/audioset_tagging_cnn/blob/d2f4b8c18eab44737fcc0de1248ae21eb43f6aa4/pytorch/models.py,
https://github.com/qiuqiangkong/audioset_tagging_cnn/blob/d2f4b8c18eab44737fcc0de1248ae21eb43f6aa4/pytorch/pytorch_utils.py),
with the front end from qiuqiangkong/torchlibrosa, torchlibrosa/stft.py and torchlibrosa/augmentation.py at commit
d4e8add6c9ee49ae531c78a4901e4fdcc88c746a.

Kept: `train(args)` as written (device choice and the 'cuda'/'cpu' string, model built by `eval(model_type)`,
samplers and loaders, `Evaluator(model=model)` before the wrap, the optimizer, the resume branch, `DataParallel`,
`model.to(device)` under `'cuda' in str(device)`, the evaluation/save/mixup/move/forward/loss/backward/step loop,
`print(loss)` and `early_stop`); pytorch_utils.py's `move_data_to_device`, `do_mixup`, `append_to_dict`,
`forward` and `count_parameters`; `Evaluator`, `clip_bce`/`get_loss_func`; `ConvBlock`, `init_layer`, `init_bn` and
`Cnn14`; data_generator.py's `AudioSetDataset` (with `resample`), `Base`, `TrainSampler`, `BalancedTrainSampler`
(with `state_dict`/`load_state_dict`), `EvaluateSampler` and `collate_fn`; utilities.py's `Mixup`,
`StatisticsContainer`, `create_folder`, `create_logging` and `int16_to_float32`; torchlibrosa's `STFT`,
`Spectrogram`, `LogmelFilterBank`, `DropStripes` and `SpecAugmentation` (frozen `nn.Parameter`s, CPU `randint`).

Changed to run here: one file; h5py is not installed, so the packed waveform and index "hdf5" files are `.npz`
archives opened through a two-line `h5py.File` stand-in (byte strings and `.decode()` kept); librosa's window
and mel filterbank are computed with numpy; the 527 AudioSet classes and csv metadata are 10 synthetic sound
classes (clips made of one or two class tones plus noise); `num_workers` is 0; the argument parser gets an argument
list and `--cuda` is passed when `torch.cuda.is_available()` (the flag defaults to off); the evaluation and
checkpoint intervals (2000 and 100000 iterations) are options; the resume `torch.load` gets `weights_only=False` (the
checkpoint holds the sampler's numpy state, which PyTorch 2.6+ refuses otherwise); `AlternateTrainSampler`, the
black list and `count_flops` are left out; one line per evaluation is printed; logging handlers are closed after
each run; all files go to a temporary folder.
Shrunk: Cnn14 channels 8..256 instead of 64..2048 (fc 256), 0.5 s clips at 32 kHz resampled to 8 kHz, window 256,
hop 40, 32 mel bins, SpecAugment time stripes of 16, batch 8 (16 with mixup), 96 training and 40 evaluation clips,
10 + 6 iterations with evaluation every 5 and checkpoints every 10.
"""
import argparse
import datetime
import logging
import os
import pickle
import shutil
import tempfile
import time
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data
from sklearn import metrics

h5py = types.SimpleNamespace(File=lambda path, mode='r': np.load(path))   # the "hdf5" files are .npz archives
config = types.SimpleNamespace(sample_rate=32000, clip_samples=32000 // 2, classes_num=10)


# ---------------------------------------------------------------------------------------------------- utils/utilities.py
def create_folder(fd):
    if not os.path.exists(fd):
        os.makedirs(fd)


def create_logging(log_dir, filemode):
    create_folder(log_dir)
    i1 = 0
    while os.path.isfile(os.path.join(log_dir, '{:04d}.log'.format(i1))):
        i1 += 1
    log_path = os.path.join(log_dir, '{:04d}.log'.format(i1))
    logging.basicConfig(level=logging.DEBUG, format='%(asctime)s %(filename)s[line:%(lineno)d] %(levelname)s %(message)s',
                        datefmt='%a, %d %b %Y %H:%M:%S', filename=log_path, filemode=filemode)
    # Print to console
    console = logging.StreamHandler()
    console.setLevel(logging.INFO)
    console.setFormatter(logging.Formatter('%(name)-12s: %(levelname)-8s %(message)s'))
    logging.getLogger('').addHandler(console)
    return logging


def int16_to_float32(x):
    return (x / 32767.).astype(np.float32)


class Mixup(object):
    def __init__(self, mixup_alpha, random_seed=1234):
        """Mixup coefficient generator."""
        self.mixup_alpha = mixup_alpha
        self.random_state = np.random.RandomState(random_seed)

    def get_lambda(self, batch_size):
        mixup_lambdas = []
        for n in range(0, batch_size, 2):
            lam = self.random_state.beta(self.mixup_alpha, self.mixup_alpha, 1)[0]
            mixup_lambdas.append(lam)
            mixup_lambdas.append(1. - lam)
        return np.array(mixup_lambdas)


class StatisticsContainer(object):
    def __init__(self, statistics_path):
        """Contain statistics of different training iterations."""
        self.statistics_path = statistics_path
        self.backup_statistics_path = '{}_{}.pkl'.format(
            os.path.splitext(self.statistics_path)[0], datetime.datetime.now().strftime('%Y-%m-%d_%H-%M-%S'))
        self.statistics_dict = {'bal': [], 'test': []}

    def append(self, iteration, statistics, data_type):
        statistics['iteration'] = iteration
        self.statistics_dict[data_type].append(statistics)

    def dump(self):
        pickle.dump(self.statistics_dict, open(self.statistics_path, 'wb'))
        pickle.dump(self.statistics_dict, open(self.backup_statistics_path, 'wb'))
        logging.info('    Dump statistics to {}'.format(self.statistics_path))

    def load_state_dict(self, resume_iteration):
        self.statistics_dict = pickle.load(open(self.statistics_path, 'rb'))
        resume_statistics_dict = {'bal': [], 'test': []}
        for key in self.statistics_dict.keys():
            for statistics in self.statistics_dict[key]:
                if statistics['iteration'] <= resume_iteration:
                    resume_statistics_dict[key].append(statistics)
        self.statistics_dict = resume_statistics_dict


# ---------------------------------------------------------------------------------------------------- utils/data_generator.py
class AudioSetDataset(object):
    def __init__(self, sample_rate=32000):
        self.sample_rate = sample_rate

    def __getitem__(self, meta):
        hdf5_path = meta['hdf5_path']
        index_in_hdf5 = meta['index_in_hdf5']
        with h5py.File(hdf5_path, 'r') as hf:
            audio_name = hf['audio_name'][index_in_hdf5].decode()
            waveform = int16_to_float32(hf['waveform'][index_in_hdf5])
            waveform = self.resample(waveform)
            target = hf['target'][index_in_hdf5].astype(np.float32)
        data_dict = {'audio_name': audio_name, 'waveform': waveform, 'target': target}
        return data_dict

    def resample(self, waveform):
        if self.sample_rate == 32000:
            return waveform
        elif self.sample_rate == 16000:
            return waveform[0:: 2]
        elif self.sample_rate == 8000:
            return waveform[0:: 4]
        else:
            raise Exception('Incorrect sample rate!')


class Base(object):
    def __init__(self, indexes_hdf5_path, batch_size, black_list_csv, random_seed):
        self.batch_size = batch_size
        self.random_state = np.random.RandomState(random_seed)
        self.black_list_names = []
        with h5py.File(indexes_hdf5_path, 'r') as hf:
            self.audio_names = [audio_name.decode() for audio_name in hf['audio_name'][:]]
            self.hdf5_paths = [hdf5_path.decode() for hdf5_path in hf['hdf5_path'][:]]
            self.indexes_in_hdf5 = hf['index_in_hdf5'][:]
            self.targets = hf['target'][:].astype(np.float32)
        (self.audios_num, self.classes_num) = self.targets.shape
        logging.info('Training number: {}'.format(self.audios_num))


class TrainSampler(Base):
    def __init__(self, indexes_hdf5_path, batch_size, black_list_csv=None, random_seed=1234):
        super(TrainSampler, self).__init__(indexes_hdf5_path, batch_size, black_list_csv, random_seed)
        self.indexes = np.arange(self.audios_num)
        self.random_state.shuffle(self.indexes)
        self.pointer = 0

    def __iter__(self):
        batch_size = self.batch_size
        while True:
            batch_meta = []
            i = 0
            while i < batch_size:
                index = self.indexes[self.pointer]
                self.pointer += 1
                # Shuffle indexes and reset pointer
                if self.pointer >= self.audios_num:
                    self.pointer = 0
                    self.random_state.shuffle(self.indexes)
                # If audio in black list then continue
                if self.audio_names[index] in self.black_list_names:
                    continue
                else:
                    batch_meta.append({'hdf5_path': self.hdf5_paths[index], 'index_in_hdf5': self.indexes_in_hdf5[index]})
                    i += 1
            yield batch_meta

    def state_dict(self):
        return {'indexes': self.indexes, 'pointer': self.pointer}

    def load_state_dict(self, state):
        self.indexes = state['indexes']
        self.pointer = state['pointer']


class BalancedTrainSampler(Base):
    def __init__(self, indexes_hdf5_path, batch_size, black_list_csv=None, random_seed=1234):
        super(BalancedTrainSampler, self).__init__(indexes_hdf5_path, batch_size, black_list_csv, random_seed)
        self.samples_num_per_class = np.sum(self.targets, axis=0)
        logging.info('samples_num_per_class: {}'.format(self.samples_num_per_class.astype(np.int32)))
        self.indexes_per_class = []
        for k in range(self.classes_num):
            self.indexes_per_class.append(np.where(self.targets[:, k] == 1)[0])
        for k in range(self.classes_num):
            self.random_state.shuffle(self.indexes_per_class[k])
        self.queue = []
        self.pointers_of_classes = [0] * self.classes_num

    def expand_queue(self, queue):
        classes_set = np.arange(self.classes_num).tolist()
        self.random_state.shuffle(classes_set)
        queue += classes_set
        return queue

    def __iter__(self):
        batch_size = self.batch_size
        while True:
            batch_meta = []
            i = 0
            while i < batch_size:
                if len(self.queue) == 0:
                    self.queue = self.expand_queue(self.queue)
                class_id = self.queue.pop(0)
                pointer = self.pointers_of_classes[class_id]
                self.pointers_of_classes[class_id] += 1
                index = self.indexes_per_class[class_id][pointer]
                # When finish one epoch of a sound class, then shuffle its indexes and reset pointer
                if self.pointers_of_classes[class_id] >= self.samples_num_per_class[class_id]:
                    self.pointers_of_classes[class_id] = 0
                    self.random_state.shuffle(self.indexes_per_class[class_id])
                if self.audio_names[index] in self.black_list_names:
                    continue
                else:
                    batch_meta.append({'hdf5_path': self.hdf5_paths[index], 'index_in_hdf5': self.indexes_in_hdf5[index]})
                    i += 1
            yield batch_meta

    def state_dict(self):
        return {'indexes_per_class': self.indexes_per_class, 'queue': self.queue,
                'pointers_of_classes': self.pointers_of_classes}

    def load_state_dict(self, state):
        self.indexes_per_class = state['indexes_per_class']
        self.queue = state['queue']
        self.pointers_of_classes = state['pointers_of_classes']


class EvaluateSampler(object):
    def __init__(self, indexes_hdf5_path, batch_size):
        self.batch_size = batch_size
        with h5py.File(indexes_hdf5_path, 'r') as hf:
            self.audio_names = [audio_name.decode() for audio_name in hf['audio_name'][:]]
            self.hdf5_paths = [hdf5_path.decode() for hdf5_path in hf['hdf5_path'][:]]
            self.indexes_in_hdf5 = hf['index_in_hdf5'][:]
            self.targets = hf['target'][:].astype(np.float32)
        self.audios_num = len(self.audio_names)

    def __iter__(self):
        batch_size = self.batch_size
        pointer = 0
        while pointer < self.audios_num:
            batch_indexes = np.arange(pointer, min(pointer + batch_size, self.audios_num))
            batch_meta = []
            for index in batch_indexes:
                batch_meta.append({'audio_name': self.audio_names[index], 'hdf5_path': self.hdf5_paths[index],
                                   'index_in_hdf5': self.indexes_in_hdf5[index], 'target': self.targets[index]})
            pointer += batch_size
            yield batch_meta


def collate_fn(list_data_dict):
    np_data_dict = {}
    for key in list_data_dict[0].keys():
        np_data_dict[key] = np.array([data_dict[key] for data_dict in list_data_dict])
    return np_data_dict


def pack_synthetic_audioset(workspace, name, n, seed):
    """Waveforms (int16, 32 kHz) of one or two class tones plus noise, and the index file pointing at them."""
    rng = np.random.RandomState(seed)
    t = np.arange(config.clip_samples) / config.sample_rate
    freqs = 200. * 1.3 ** np.arange(config.classes_num)
    targets = np.zeros((n, config.classes_num), dtype=bool)
    waveforms = np.zeros((n, config.clip_samples), dtype=np.int16)
    for i in range(n):
        classes = [i % config.classes_num] + ([rng.randint(config.classes_num)] if rng.rand() < 0.4 else [])
        targets[i, classes] = True
        wav = sum(0.3 * np.sin(2 * np.pi * freqs[c] * t + rng.uniform(0, 6)) for c in classes)
        waveforms[i] = (np.clip(wav + 0.05 * rng.randn(len(t)), -1, 1) * 32767.).astype(np.int16)
    audio_names = np.array(['Y{}_{:04d}.wav'.format(name, i).encode() for i in range(n)])
    waveforms_path = os.path.join(workspace, 'hdf5s', 'waveforms', '{}.npz'.format(name))
    create_folder(os.path.dirname(waveforms_path))
    np.savez(waveforms_path, audio_name=audio_names, waveform=waveforms, target=targets)
    index_path = os.path.join(workspace, 'hdf5s', 'indexes', '{}.npz'.format(name))
    create_folder(os.path.dirname(index_path))
    np.savez(index_path, audio_name=audio_names, target=targets, index_in_hdf5=np.arange(n),
             hdf5_path=np.array([waveforms_path.encode()] * n))


# ---------------------------------------------------------------------------------------------------- torchlibrosa
class STFT(nn.Module):
    def __init__(self, n_fft=2048, hop_length=None, win_length=None, window='hann', center=True, pad_mode='reflect',
                 freeze_parameters=True):
        super(STFT, self).__init__()
        self.n_fft, self.hop_length, self.center, self.pad_mode = n_fft, hop_length, center, pad_mode
        fft_window = np.hanning(n_fft + 1)[:-1]   # librosa.filters.get_window('hann', n_fft, fftbins=True)
        (x, y) = np.meshgrid(np.arange(n_fft), np.arange(n_fft))
        W = np.power(np.exp(-2 * np.pi * 1j / n_fft), x * y)
        out_channels = n_fft // 2 + 1
        self.conv_real = nn.Conv1d(in_channels=1, out_channels=out_channels, kernel_size=n_fft,
                                   stride=self.hop_length, padding=0, dilation=1, groups=1, bias=False)
        self.conv_imag = nn.Conv1d(in_channels=1, out_channels=out_channels, kernel_size=n_fft,
                                   stride=self.hop_length, padding=0, dilation=1, groups=1, bias=False)
        self.conv_real.weight.data = torch.Tensor(
            np.real(W[:, 0: out_channels] * fft_window[:, None]).T)[:, None, :].contiguous()
        self.conv_imag.weight.data = torch.Tensor(
            np.imag(W[:, 0: out_channels] * fft_window[:, None]).T)[:, None, :].contiguous()
        if freeze_parameters:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, input):
        x = input[:, None, :]   # (batch_size, channels_num, data_length)
        if self.center:
            x = F.pad(x, pad=(self.n_fft // 2, self.n_fft // 2), mode=self.pad_mode)
        real = self.conv_real(x)
        imag = self.conv_imag(x)
        real = real[:, None, :, :].transpose(2, 3)
        imag = imag[:, None, :, :].transpose(2, 3)
        return real, imag


class Spectrogram(nn.Module):
    def __init__(self, n_fft=2048, hop_length=None, win_length=None, window='hann', center=True, pad_mode='reflect',
                 power=2.0, freeze_parameters=True):
        super(Spectrogram, self).__init__()
        self.power = power
        self.stft = STFT(n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window, center=center,
                         pad_mode=pad_mode, freeze_parameters=True)

    def forward(self, input):
        (real, imag) = self.stft.forward(input)
        spectrogram = real ** 2 + imag ** 2
        if self.power != 2.0:
            spectrogram = spectrogram ** (self.power / 2.0)
        return spectrogram


class LogmelFilterBank(nn.Module):
    def __init__(self, sr=22050, n_fft=2048, n_mels=64, fmin=0.0, fmax=None, is_log=True, ref=1.0, amin=1e-10,
                 top_db=80.0, freeze_parameters=True):
        super(LogmelFilterBank, self).__init__()
        self.is_log, self.ref, self.amin, self.top_db = is_log, ref, amin, top_db
        mel = lambda f: 2595. * np.log10(1. + f / 700.)
        edges = 700. * (10. ** (np.linspace(mel(fmin), mel(fmax), n_mels + 2) / 2595.) - 1.)
        freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
        melW = np.stack([np.clip(np.minimum((freqs - edges[m]) / (edges[m + 1] - edges[m]),
                                            (edges[m + 2] - freqs) / (edges[m + 2] - edges[m + 1])), 0, None)
                         * 2. / (edges[m + 2] - edges[m]) for m in range(n_mels)])
        self.melW = melW.T   # (n_fft // 2 + 1, mel_bins), as librosa.filters.mel(...).T
        self.melW = nn.Parameter(torch.Tensor(self.melW))
        if freeze_parameters:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, input):
        mel_spectrogram = torch.matmul(input, self.melW)
        if self.is_log:
            output = self.power_to_db(mel_spectrogram)
        else:
            output = mel_spectrogram
        return output

    def power_to_db(self, input):
        ref_value = self.ref
        log_spec = 10.0 * torch.log10(torch.clamp(input, min=self.amin, max=np.inf))
        log_spec -= 10.0 * np.log10(np.maximum(self.amin, ref_value))
        if self.top_db is not None:
            log_spec = torch.clamp(log_spec, min=log_spec.max().item() - self.top_db, max=np.inf)
        return log_spec


class DropStripes(nn.Module):
    def __init__(self, dim, drop_width, stripes_num):
        super(DropStripes, self).__init__()
        assert dim in [2, 3]    # dim 2: time; dim 3: frequency
        self.dim = dim
        self.drop_width = drop_width
        self.stripes_num = stripes_num

    def forward(self, input):
        """input: (batch_size, channels, time_steps, freq_bins)"""
        assert input.ndimension() == 4
        if self.training is False:
            return input
        else:
            batch_size = input.shape[0]
            total_width = input.shape[self.dim]
            for n in range(batch_size):
                self.transform_slice(input[n], total_width)
            return input

    def transform_slice(self, e, total_width):
        """e: (channels, time_steps, freq_bins)"""
        for _ in range(self.stripes_num):
            distance = torch.randint(low=0, high=self.drop_width, size=(1,))[0]
            bgn = torch.randint(low=0, high=total_width - distance, size=(1,))[0]
            if self.dim == 2:
                e[:, bgn: bgn + distance, :] = 0
            elif self.dim == 3:
                e[:, :, bgn: bgn + distance] = 0


class SpecAugmentation(nn.Module):
    def __init__(self, time_drop_width, time_stripes_num, freq_drop_width, freq_stripes_num):
        super(SpecAugmentation, self).__init__()
        self.time_dropper = DropStripes(dim=2, drop_width=time_drop_width, stripes_num=time_stripes_num)
        self.freq_dropper = DropStripes(dim=3, drop_width=freq_drop_width, stripes_num=freq_stripes_num)

    def forward(self, input):
        x = self.time_dropper(input)
        x = self.freq_dropper(x)
        return x


# ---------------------------------------------------------------------------------------------------- pytorch/pytorch_utils.py
def move_data_to_device(x, device):
    if 'float' in str(x.dtype):
        x = torch.Tensor(x)
    elif 'int' in str(x.dtype):
        x = torch.LongTensor(x)
    else:
        return x
    return x.to(device)


def do_mixup(x, mixup_lambda):
    """Mixup x of even indexes (0, 2, 4, ...) with x of odd indexes (1, 3, 5, ...)."""
    out = (x[0:: 2].transpose(0, -1) * mixup_lambda[0:: 2] +
           x[1:: 2].transpose(0, -1) * mixup_lambda[1:: 2]).transpose(0, -1)
    return out


def append_to_dict(dict, key, value):
    if key in dict.keys():
        dict[key].append(value)
    else:
        dict[key] = [value]


def forward(model, generator, return_input=False, return_target=False):
    """Forward data to a model."""
    output_dict = {}
    device = next(model.parameters()).device
    time1 = time.time()

    # Forward data to a model in mini-batches
    for n, batch_data_dict in enumerate(generator):
        batch_waveform = move_data_to_device(batch_data_dict['waveform'], device)
        with torch.no_grad():
            model.eval()
            batch_output = model(batch_waveform)
        append_to_dict(output_dict, 'audio_name', batch_data_dict['audio_name'])
        append_to_dict(output_dict, 'clipwise_output', batch_output['clipwise_output'].data.cpu().numpy())
        if 'segmentwise_output' in batch_output.keys():
            append_to_dict(output_dict, 'segmentwise_output', batch_output['segmentwise_output'].data.cpu().numpy())
        if 'framewise_output' in batch_output.keys():
            append_to_dict(output_dict, 'framewise_output', batch_output['framewise_output'].data.cpu().numpy())
        if return_input:
            append_to_dict(output_dict, 'waveform', batch_data_dict['waveform'])
        if return_target:
            if 'target' in batch_data_dict.keys():
                append_to_dict(output_dict, 'target', batch_data_dict['target'])
        if n % 10 == 0:
            print(' --- Inference time: {:.3f} s / 10 iterations ---'.format(time.time() - time1))
            time1 = time.time()

    for key in output_dict.keys():
        output_dict[key] = np.concatenate(output_dict[key], axis=0)
    return output_dict


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---------------------------------------------------------------------------------------------------- pytorch/evaluate.py, losses.py
class Evaluator(object):
    def __init__(self, model):
        self.model = model

    def evaluate(self, data_loader):
        # Forward
        output_dict = forward(model=self.model, generator=data_loader, return_target=True)
        clipwise_output = output_dict['clipwise_output']    # (audios_num, classes_num)
        target = output_dict['target']    # (audios_num, classes_num)
        average_precision = metrics.average_precision_score(target, clipwise_output, average=None)
        auc = metrics.roc_auc_score(target, clipwise_output, average=None)
        statistics = {'average_precision': average_precision, 'auc': auc}
        return statistics


def clip_bce(output_dict, target_dict):
    """Binary crossentropy loss."""
    return F.binary_cross_entropy(output_dict['clipwise_output'], target_dict['target'])


def get_loss_func(loss_type):
    if loss_type == 'clip_bce':
        return clip_bce


# ---------------------------------------------------------------------------------------------------- pytorch/models.py
def init_layer(layer):
    """Initialize a Linear or Convolutional layer. """
    nn.init.xavier_uniform_(layer.weight)
    if hasattr(layer, 'bias'):
        if layer.bias is not None:
            layer.bias.data.fill_(0.)


def init_bn(bn):
    """Initialize a Batchnorm layer. """
    bn.bias.data.fill_(0.)
    bn.weight.data.fill_(1.)


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(ConvBlock, self).__init__()
        self.conv1 = nn.Conv2d(in_channels=in_channels, out_channels=out_channels, kernel_size=(3, 3), stride=(1, 1),
                               padding=(1, 1), bias=False)
        self.conv2 = nn.Conv2d(in_channels=out_channels, out_channels=out_channels, kernel_size=(3, 3),
                               stride=(1, 1), padding=(1, 1), bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.init_weight()

    def init_weight(self):
        init_layer(self.conv1)
        init_layer(self.conv2)
        init_bn(self.bn1)
        init_bn(self.bn2)

    def forward(self, input, pool_size=(2, 2), pool_type='avg'):
        x = input
        x = F.relu_(self.bn1(self.conv1(x)))
        x = F.relu_(self.bn2(self.conv2(x)))
        if pool_type == 'max':
            x = F.max_pool2d(x, kernel_size=pool_size)
        elif pool_type == 'avg':
            x = F.avg_pool2d(x, kernel_size=pool_size)
        elif pool_type == 'avg+max':
            x1 = F.avg_pool2d(x, kernel_size=pool_size)
            x2 = F.max_pool2d(x, kernel_size=pool_size)
            x = x1 + x2
        else:
            raise Exception('Incorrect argument!')
        return x


class Cnn14(nn.Module):
    def __init__(self, sample_rate, window_size, hop_size, mel_bins, fmin, fmax, classes_num):
        super(Cnn14, self).__init__()
        window = 'hann'
        center = True
        pad_mode = 'reflect'
        ref = 1.0
        amin = 1e-10
        top_db = None

        # Spectrogram extractor
        self.spectrogram_extractor = Spectrogram(n_fft=window_size, hop_length=hop_size, win_length=window_size,
                                                 window=window, center=center, pad_mode=pad_mode,
                                                 freeze_parameters=True)
        # Logmel feature extractor
        self.logmel_extractor = LogmelFilterBank(sr=sample_rate, n_fft=window_size, n_mels=mel_bins, fmin=fmin,
                                                 fmax=fmax, ref=ref, amin=amin, top_db=top_db, freeze_parameters=True)
        # Spec augmenter
        self.spec_augmenter = SpecAugmentation(time_drop_width=16, time_stripes_num=2, freq_drop_width=8,
                                               freq_stripes_num=2)

        self.bn0 = nn.BatchNorm2d(32)

        self.conv_block1 = ConvBlock(in_channels=1, out_channels=8)
        self.conv_block2 = ConvBlock(in_channels=8, out_channels=16)
        self.conv_block3 = ConvBlock(in_channels=16, out_channels=32)
        self.conv_block4 = ConvBlock(in_channels=32, out_channels=64)
        self.conv_block5 = ConvBlock(in_channels=64, out_channels=128)
        self.conv_block6 = ConvBlock(in_channels=128, out_channels=256)

        self.fc1 = nn.Linear(256, 256, bias=True)
        self.fc_audioset = nn.Linear(256, classes_num, bias=True)

        self.init_weight()

    def init_weight(self):
        init_bn(self.bn0)
        init_layer(self.fc1)
        init_layer(self.fc_audioset)

    def forward(self, input, mixup_lambda=None):
        """
        Input: (batch_size, data_length)"""
        x = self.spectrogram_extractor(input)   # (batch_size, 1, time_steps, freq_bins)
        x = self.logmel_extractor(x)    # (batch_size, 1, time_steps, mel_bins)

        x = x.transpose(1, 3)
        x = self.bn0(x)
        x = x.transpose(1, 3)

        if self.training:
            x = self.spec_augmenter(x)

        # Mixup on spectrogram
        if self.training and mixup_lambda is not None:
            x = do_mixup(x, mixup_lambda)

        x = self.conv_block1(x, pool_size=(2, 2), pool_type='avg')
        x = F.dropout(x, p=0.2, training=self.training)
        x = self.conv_block2(x, pool_size=(2, 2), pool_type='avg')
        x = F.dropout(x, p=0.2, training=self.training)
        x = self.conv_block3(x, pool_size=(2, 2), pool_type='avg')
        x = F.dropout(x, p=0.2, training=self.training)
        x = self.conv_block4(x, pool_size=(2, 2), pool_type='avg')
        x = F.dropout(x, p=0.2, training=self.training)
        x = self.conv_block5(x, pool_size=(2, 2), pool_type='avg')
        x = F.dropout(x, p=0.2, training=self.training)
        x = self.conv_block6(x, pool_size=(1, 1), pool_type='avg')
        x = F.dropout(x, p=0.2, training=self.training)
        x = torch.mean(x, dim=3)

        (x1, _) = torch.max(x, dim=2)
        x2 = torch.mean(x, dim=2)
        x = x1 + x2
        x = F.dropout(x, p=0.5, training=self.training)
        x = F.relu_(self.fc1(x))
        embedding = F.dropout(x, p=0.5, training=self.training)
        clipwise_output = torch.sigmoid(self.fc_audioset(x))

        output_dict = {'clipwise_output': clipwise_output, 'embedding': embedding}
        return output_dict


# ---------------------------------------------------------------------------------------------------- pytorch/main.py
def train(args):
    """Train AudioSet tagging model."""
    # Arugments & parameters
    workspace = args.workspace
    data_type = args.data_type
    sample_rate = args.sample_rate
    window_size = args.window_size
    hop_size = args.hop_size
    mel_bins = args.mel_bins
    fmin = args.fmin
    fmax = args.fmax
    model_type = args.model_type
    loss_type = args.loss_type
    balanced = args.balanced
    augmentation = args.augmentation
    batch_size = args.batch_size
    learning_rate = args.learning_rate
    resume_iteration = args.resume_iteration
    early_stop = args.early_stop
    device = torch.device('cuda') if args.cuda and torch.cuda.is_available() else torch.device('cpu')
    filename = args.filename

    num_workers = 0
    classes_num = config.classes_num
    loss_func = get_loss_func(loss_type)

    # Paths
    black_list_csv = None
    train_indexes_hdf5_path = os.path.join(workspace, 'hdf5s', 'indexes', '{}.npz'.format(data_type))
    eval_bal_indexes_hdf5_path = os.path.join(workspace, 'hdf5s', 'indexes', 'balanced_train.npz')
    eval_test_indexes_hdf5_path = os.path.join(workspace, 'hdf5s', 'indexes', 'eval.npz')

    settings = os.path.join(
        'sample_rate={},window_size={},hop_size={},mel_bins={},fmin={},fmax={}'.format(
            sample_rate, window_size, hop_size, mel_bins, fmin, fmax),
        'data_type={}'.format(data_type), model_type, 'loss_type={}'.format(loss_type),
        'balanced={}'.format(balanced), 'augmentation={}'.format(augmentation), 'batch_size={}'.format(batch_size))
    checkpoints_dir = os.path.join(workspace, 'checkpoints', filename, settings)
    create_folder(checkpoints_dir)
    statistics_path = os.path.join(workspace, 'statistics', filename, settings, 'statistics.pkl')
    create_folder(os.path.dirname(statistics_path))
    logs_dir = os.path.join(workspace, 'logs', filename, settings)

    create_logging(logs_dir, filemode='w')
    logging.info(args)

    if 'cuda' in str(device):
        logging.info('Using GPU.')
        device = 'cuda'
    else:
        logging.info('Using CPU. Set --cuda flag to use GPU.')
        device = 'cpu'

    # Model
    Model = eval(model_type)
    model = Model(sample_rate=sample_rate, window_size=window_size, hop_size=hop_size, mel_bins=mel_bins, fmin=fmin,
                  fmax=fmax, classes_num=classes_num)
    params_num = count_parameters(model)
    logging.info('Parameters num: {}'.format(params_num))

    # Dataset will be used by DataLoader later. Dataset takes a meta as input
    # and return a waveform and a target.
    dataset = AudioSetDataset(sample_rate=sample_rate)

    # Train sampler
    if balanced == 'none':
        Sampler = TrainSampler
    elif balanced == 'balanced':
        Sampler = BalancedTrainSampler

    train_sampler = Sampler(indexes_hdf5_path=train_indexes_hdf5_path,
                            batch_size=batch_size * 2 if 'mixup' in augmentation else batch_size,
                            black_list_csv=black_list_csv)

    # Evaluate sampler
    eval_bal_sampler = EvaluateSampler(indexes_hdf5_path=eval_bal_indexes_hdf5_path, batch_size=batch_size)
    eval_test_sampler = EvaluateSampler(indexes_hdf5_path=eval_test_indexes_hdf5_path, batch_size=batch_size)

    # Data loader
    train_loader = torch.utils.data.DataLoader(dataset=dataset, batch_sampler=train_sampler, collate_fn=collate_fn,
                                               num_workers=num_workers, pin_memory=True)
    eval_bal_loader = torch.utils.data.DataLoader(dataset=dataset, batch_sampler=eval_bal_sampler,
                                                  collate_fn=collate_fn, num_workers=num_workers, pin_memory=True)
    eval_test_loader = torch.utils.data.DataLoader(dataset=dataset, batch_sampler=eval_test_sampler,
                                                   collate_fn=collate_fn, num_workers=num_workers, pin_memory=True)

    if 'mixup' in augmentation:
        mixup_augmenter = Mixup(mixup_alpha=1.)

    # Evaluator
    evaluator = Evaluator(model=model)

    # Statistics
    statistics_container = StatisticsContainer(statistics_path)

    # Optimizer
    optimizer = optim.Adam(model.parameters(), lr=learning_rate, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.,
                           amsgrad=True)

    train_bgn_time = time.time()

    # Resume training
    if resume_iteration > 0:
        resume_checkpoint_path = os.path.join(workspace, 'checkpoints', filename, settings,
                                              '{}_iterations.pth'.format(resume_iteration))
        logging.info('Loading checkpoint {}'.format(os.path.basename(resume_checkpoint_path)))
        checkpoint = torch.load(resume_checkpoint_path, weights_only=False)
        model.load_state_dict(checkpoint['model'])
        train_sampler.load_state_dict(checkpoint['sampler'])
        statistics_container.load_state_dict(resume_iteration)
        iteration = checkpoint['iteration']
    else:
        iteration = 0

    # Parallel
    print('GPU number: {}'.format(torch.cuda.device_count()))
    model = torch.nn.DataParallel(model)

    if 'cuda' in str(device):
        model.to(device)

    time1 = time.time()
    test_statistics = None

    for batch_data_dict in train_loader:
        """batch_data_dict: {
            'audio_name': (batch_size [*2 if mixup],),
            'waveform': (batch_size [*2 if mixup], clip_samples),
            'target': (batch_size [*2 if mixup], classes_num),
            (ifexist) 'mixup_lambda': (batch_size * 2,)}
        """
        # Evaluate
        if (iteration % args.eval_every == 0 and iteration > resume_iteration) or (iteration == 0):
            train_fin_time = time.time()

            bal_statistics = evaluator.evaluate(eval_bal_loader)
            test_statistics = evaluator.evaluate(eval_test_loader)
            logging.info('Validate bal mAP: {:.3f}'.format(np.mean(bal_statistics['average_precision'])))
            logging.info('Validate test mAP: {:.3f}'.format(np.mean(test_statistics['average_precision'])))
            print('iteration {}: validate bal mAP {:.3f}, test mAP {:.3f}, test AUC {:.3f}'.format(
                iteration, np.mean(bal_statistics['average_precision']),
                np.mean(test_statistics['average_precision']), np.mean(test_statistics['auc'])))

            statistics_container.append(iteration, bal_statistics, data_type='bal')
            statistics_container.append(iteration, test_statistics, data_type='test')
            statistics_container.dump()

            train_time = train_fin_time - train_bgn_time
            validate_time = time.time() - train_fin_time
            logging.info('iteration: {}, train time: {:.3f} s, validate time: {:.3f} s'
                         ''.format(iteration, train_time, validate_time))
            train_bgn_time = time.time()

        # Save model
        if iteration % args.save_every == 0:
            checkpoint = {
                'iteration': iteration,
                'model': model.module.state_dict(),
                'sampler': train_sampler.state_dict()}
            checkpoint_path = os.path.join(checkpoints_dir, '{}_iterations.pth'.format(iteration))
            torch.save(checkpoint, checkpoint_path)
            logging.info('Model saved to {}'.format(os.path.basename(checkpoint_path)))

        # Mixup lambda
        if 'mixup' in augmentation:
            batch_data_dict['mixup_lambda'] = mixup_augmenter.get_lambda(batch_size=len(batch_data_dict['waveform']))

        # Move data to device
        for key in batch_data_dict.keys():
            batch_data_dict[key] = move_data_to_device(batch_data_dict[key], device)

        # Forward
        model.train()

        if 'mixup' in augmentation:
            batch_output_dict = model(batch_data_dict['waveform'], batch_data_dict['mixup_lambda'])
            """{'clipwise_output': (batch_size, classes_num), ...}"""
            batch_target_dict = {'target': do_mixup(batch_data_dict['target'], batch_data_dict['mixup_lambda'])}
            """{'target': (batch_size, classes_num)}"""
        else:
            batch_output_dict = model(batch_data_dict['waveform'], None)
            batch_target_dict = {'target': batch_data_dict['target']}

        # Loss
        loss = loss_func(batch_output_dict, batch_target_dict)

        # Backward
        loss.backward()
        print(loss)

        optimizer.step()
        optimizer.zero_grad()

        if iteration % 10 == 0:
            print('--- Iteration: {}, train time: {:.3f} s / 10 iterations ---'.format(iteration, time.time() - time1))
            time1 = time.time()

        # Stop learning
        if iteration == early_stop:
            break

        iteration += 1
    return test_statistics


def parse_args(argv):
    parser = argparse.ArgumentParser(description='Example of parser. ')
    subparsers = parser.add_subparsers(dest='mode')

    parser_train = subparsers.add_parser('train')
    parser_train.add_argument('--workspace', type=str, required=True)
    parser_train.add_argument('--data_type', type=str, default='full_train', choices=['balanced_train', 'full_train'])
    parser_train.add_argument('--sample_rate', type=int, default=32000)
    parser_train.add_argument('--window_size', type=int, default=1024)
    parser_train.add_argument('--hop_size', type=int, default=320)
    parser_train.add_argument('--mel_bins', type=int, default=64)
    parser_train.add_argument('--fmin', type=int, default=50)
    parser_train.add_argument('--fmax', type=int, default=14000)
    parser_train.add_argument('--model_type', type=str, required=True)
    parser_train.add_argument('--loss_type', type=str, default='clip_bce', choices=['clip_bce'])
    parser_train.add_argument('--balanced', type=str, default='balanced', choices=['none', 'balanced'])
    parser_train.add_argument('--augmentation', type=str, default='mixup', choices=['none', 'mixup'])
    parser_train.add_argument('--batch_size', type=int, default=32)
    parser_train.add_argument('--learning_rate', type=float, default=1e-3)
    parser_train.add_argument('--resume_iteration', type=int, default=0)
    parser_train.add_argument('--early_stop', type=int, default=1000000)
    parser_train.add_argument('--eval_every', type=int, default=2000)
    parser_train.add_argument('--save_every', type=int, default=100000)
    parser_train.add_argument('--cuda', action='store_true', default=False)

    args = parser.parse_args(argv)
    args.filename = 'main'
    return args


def close_logging():
    root = logging.getLogger('')
    for handler in list(root.handlers):
        handler.close()
        root.removeHandler(handler)


def main():
    np.random.seed(0)
    workspace = tempfile.mkdtemp()
    try:
        pack_synthetic_audioset(workspace, 'full_train', 96, seed=0)
        pack_synthetic_audioset(workspace, 'balanced_train', 40, seed=1)
        pack_synthetic_audioset(workspace, 'eval', 40, seed=2)
        common = ['train', '--workspace', workspace, '--data_type', 'full_train', '--sample_rate', '8000',
                  '--window_size', '256', '--hop_size', '40', '--mel_bins', '32', '--fmin', '50', '--fmax', '4000',
                  '--model_type', 'Cnn14', '--loss_type', 'clip_bce', '--balanced', 'balanced',
                  '--augmentation', 'mixup', '--batch_size', '8', '--learning_rate', '1e-3',
                  '--eval_every', '5', '--save_every', '10']
        if torch.cuda.is_available():
            common.append('--cuda')
        args = parse_args(common + ['--early_stop', '10'])
        if args.mode == 'train':
            train(args)
        close_logging()
        args = parse_args(common + ['--resume_iteration', '10', '--early_stop', '16'])
        if args.mode == 'train':
            statistics = train(args)
        print('done: test mAP {:.3f}, AUC {:.3f}'.format(np.mean(statistics['average_precision']),
                                                        np.mean(statistics['auc'])))
    finally:
        close_logging()
        shutil.rmtree(workspace, ignore_errors=True)


if __name__ == '__main__':
    main()
