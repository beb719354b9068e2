"""Trains DeepSpeech2 (strided 2-D convolutions over a spectrogram, bidirectional GRUs with sequence-wise batch
norm, softmax only at inference) with CTC on synthetic AN4-style utterances the way SeanNaren/deepspeech.pytorch
v1.2's train.py does it, as module-level script code: `--cuda` wraps the model in `torch.nn.DataParallel(model)
.cuda()` and moves each batch with `.cuda()`; greedy-decoded WER/CER each epoch; `DeepSpeech.serialize` checkpoints;
a second run continues from the epoch-1 checkpoint, with the optimizer state moved to the GPU by hand.

Modeled on: SeanNaren/deepspeech.pytorch, train.py, model.py, decoder.py, data/data_loader.py and labels.json at tag
v1.2, commit 99fee14eb99c7a476d719965184f9911b4232b4b.
Kept: train.py's module-level body: `continue_from` (`torch.load(..., map_location=lambda storage, loc: storage)`,
`load_model_package`, a fresh SGD loaded with `optim_dict` and, when `args.cuda`, each state tensor moved with
`state[k] = v.cuda()`), `DataParallel(model).cuda()`, `inputs.cuda()`, host sizes from `input_percentages`, loss per
batch with the inf check on `loss.data.sum()`, `torch.cuda.synchronize()`, the per-epoch validation (host targets split
by `target_sizes`, `decoder.decode(out.data, sizes)`), `serialize` per epoch and for the best WER, the lr anneal through
`optimizer.state_dict()` / `load_state_dict`; model.py (`SequenceWise`, `InferenceBatchSoftmax`, `BatchRNN`,
`DeepSpeech`; `load_model_package`; `serialize` / `get_labels` / `get_audio_conf` picking `model.module` by
`next(model.parameters()).is_cuda`); `GreedyDecoder`; `SpectrogramDataset`, `_collate_fn`, `AudioDataLoader`,
`BucketingSampler`.
Changed to run here: no warp-ctc: `nn.CTCLoss(reduction='sum', zero_infinity=True)` on `out.log_softmax(-1)` with the
host targets, as later releases do; `Variable(..., volatile=True)` -> `torch.no_grad()`; `process_string` uses
`sequence[i].item()` (a tensor is no dict key now); `clip_grad_norm_`, `loss.item()`; `--cuda` is passed when
`torch.cuda.is_available()`; no librosa / torchaudio / Levenshtein: numpy STFT, a small edit distance, `.npy` audio;
`make_an4` synthesizes utterances (a tone per letter) and manifests in a temporary folder; the train body runs twice
(fresh, then `--continue-from`); left out: test.py / `load_model`, distributed training, visdom / tensorboard,
augmentation, the Lookahead layer, the beam decoder; parser options trimmed to those used.
Shrunk: 8 kHz audio, hidden 800 -> 64, 5 -> 2 GRU layers, 24 / 8 utterances, batch 8, 2 epochs, workers 0.
"""
import argparse
import json
import math
import os
import tempfile
import time
from collections import OrderedDict

import numpy as np
import scipy.signal
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.sampler import Sampler

LABELS = ["_", "'", "A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M", "N", "O", "P", "Q", "R", "S",
          "T", "U", "V", "W", "X", "Y", "Z", " "]  # labels.json

# ------------------------------------------------------------------------------------------------------ decoder.py
class Lev(object):  # stand-in for python-Levenshtein
    @staticmethod
    def distance(s1, s2):
        prev = list(range(len(s2) + 1))
        for i, c1 in enumerate(s1, 1):
            cur = [i]
            for j, c2 in enumerate(s2, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (c1 != c2)))
            prev = cur
        return prev[-1]

class Decoder(object):
    def __init__(self, labels, blank_index=0):
        self.labels = labels
        self.int_to_char = dict([(i, c) for (i, c) in enumerate(labels)])
        self.blank_index = blank_index
        # To prevent errors in decode, we add an out of bounds index for the space
        self.space_index = labels.index(' ') if ' ' in labels else len(labels)

    def wer(self, s1, s2):
        b = set(s1.split() + s2.split())
        word2char = dict(zip(b, range(len(b))))
        w1 = [chr(word2char[w]) for w in s1.split()]
        w2 = [chr(word2char[w]) for w in s2.split()]
        return Lev.distance(''.join(w1), ''.join(w2))

    def cer(self, s1, s2):
        s1, s2, = s1.replace(' ', ''), s2.replace(' ', '')
        return Lev.distance(s1, s2)

class GreedyDecoder(Decoder):
    def convert_to_strings(self, sequences, sizes=None, remove_repetitions=False, return_offsets=False):
        """Given a list of numeric sequences, returns the corresponding strings"""
        strings, offsets = [], []
        for x in range(len(sequences)):
            seq_len = sizes[x] if sizes is not None else len(sequences[x])
            string, string_offsets = self.process_string(sequences[x], seq_len, remove_repetitions)
            strings.append([string])  # We only return one path
            offsets.append([string_offsets])
        return (strings, offsets) if return_offsets else strings

    def process_string(self, sequence, size, remove_repetitions=False):
        string = ''
        offsets = []
        for i in range(size):
            char = self.int_to_char[sequence[i].item()]
            if char != self.int_to_char[self.blank_index]:
                # if this char is a repetition and remove_repetitions=true, then skip
                if remove_repetitions and i != 0 and char == self.int_to_char[sequence[i - 1].item()]:
                    pass
                elif char == self.labels[self.space_index]:
                    string += ' '
                    offsets.append(i)
                else:
                    string = string + char
                    offsets.append(i)
        return string, torch.IntTensor(offsets)

    def decode(self, probs, sizes=None):
        _, max_probs = torch.max(probs, 2)
        return self.convert_to_strings(max_probs.view(max_probs.size(0), max_probs.size(1)), sizes,
                                       remove_repetitions=True, return_offsets=True)

# ------------------------------------------------------------------------------------------- data/data_loader.py
windows = {'hamming': scipy.signal.windows.hamming, 'hann': scipy.signal.windows.hann}

def stft(y, n_fft, hop_length, win_length, window):
    """librosa.stft stand-in: centred frames (reflect padding), a periodic window, rfft -> (1 + n_fft/2, frames)."""
    y = np.pad(y, n_fft // 2, mode='reflect')
    frames = np.lib.stride_tricks.sliding_window_view(y, n_fft)[::hop_length]
    return np.fft.rfft(frames * window(win_length, sym=False), n=n_fft, axis=1).T

class SpectrogramParser(object):
    def __init__(self, audio_conf, normalize=False, augment=False):
        self.window_stride, self.window_size = audio_conf['window_stride'], audio_conf['window_size']
        self.sample_rate = audio_conf['sample_rate']
        self.window = windows.get(audio_conf['window'], windows['hamming'])
        self.normalize, self.augment = normalize, augment

    def parse_audio(self, audio_path):
        y = np.load(audio_path)  # load_audio: torchaudio.load(path), mono
        n_fft = int(self.sample_rate * self.window_size)
        win_length = n_fft
        hop_length = int(self.sample_rate * self.window_stride)
        D = stft(y, n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=self.window)
        spect = torch.FloatTensor(np.log1p(np.abs(D)))  # librosa.magphase(D)[0]; S = log(S+1)
        if self.normalize:
            mean, std = spect.mean(), spect.std()
            spect.add_(-mean)
            spect.div_(std)
        return spect

class SpectrogramDataset(Dataset, SpectrogramParser):
    def __init__(self, audio_conf, manifest_filepath, labels, normalize=False, augment=False):
        with open(manifest_filepath) as f:
            ids = f.readlines()
        self.ids = [x.strip().split(',') for x in ids]
        self.size = len(ids)
        self.labels_map = dict([(labels[i], i) for i in range(len(labels))])
        super(SpectrogramDataset, self).__init__(audio_conf, normalize, augment)

    def __getitem__(self, index):
        audio_path, transcript_path = self.ids[index][0], self.ids[index][1]
        return self.parse_audio(audio_path), self.parse_transcript(transcript_path)

    def parse_transcript(self, transcript_path):
        with open(transcript_path, 'r', encoding='utf8') as transcript_file:
            transcript = transcript_file.read().replace('\n', '')
        return list(filter(None, [self.labels_map.get(x) for x in list(transcript)]))

    def __len__(self):
        return self.size

def _collate_fn(batch):
    def func(p):
        return p[0].size(1)
    longest_sample = max(batch, key=func)[0]
    freq_size = longest_sample.size(0)
    minibatch_size = len(batch)
    max_seqlength = longest_sample.size(1)
    inputs = torch.zeros(minibatch_size, 1, freq_size, max_seqlength)
    input_percentages = torch.FloatTensor(minibatch_size)
    target_sizes = torch.IntTensor(minibatch_size)
    targets = []
    for x in range(minibatch_size):
        tensor, target = batch[x]
        seq_length = tensor.size(1)
        inputs[x][0].narrow(1, 0, seq_length).copy_(tensor)
        input_percentages[x] = seq_length / float(max_seqlength)
        target_sizes[x] = len(target)
        targets.extend(target)
    targets = torch.IntTensor(targets)
    return inputs, targets, input_percentages, target_sizes

class AudioDataLoader(DataLoader):
    def __init__(self, *args, **kwargs):
        super(AudioDataLoader, self).__init__(*args, **kwargs)
        self.collate_fn = _collate_fn

class BucketingSampler(Sampler):
    def __init__(self, data_source, batch_size=1):
        ids = list(range(0, len(data_source)))
        self.bins = [ids[i:i + batch_size] for i in range(0, len(ids), batch_size)]

    def __iter__(self):
        for ids in self.bins:
            np.random.shuffle(ids)
            yield ids

    def __len__(self):
        return len(self.bins)

    def shuffle(self, epoch):
        np.random.shuffle(self.bins)

# ------------------------------------------------------------------------------------------------------- model.py
supported_rnns = {'lstm': nn.LSTM, 'rnn': nn.RNN, 'gru': nn.GRU}
supported_rnns_inv = dict((v, k) for k, v in supported_rnns.items())

class SequenceWise(nn.Module):
    def __init__(self, module):  # Collapses input of dim T*N*H to (T*N)*H, and applies to a module.
        super(SequenceWise, self).__init__()
        self.module = module

    def forward(self, x):
        t, n = x.size(0), x.size(1)
        return self.module(x.view(t * n, -1)).view(t, n, -1)

class InferenceBatchSoftmax(nn.Module):
    def forward(self, input_):
        if not self.training:
            return F.softmax(input_, dim=-1)
        else:
            return input_

class BatchRNN(nn.Module):
    def __init__(self, input_size, hidden_size, rnn_type=nn.LSTM, bidirectional=False, batch_norm=True):
        super(BatchRNN, self).__init__()
        self.input_size, self.hidden_size, self.bidirectional = input_size, hidden_size, bidirectional
        self.batch_norm = SequenceWise(nn.BatchNorm1d(input_size)) if batch_norm else None
        self.rnn = rnn_type(input_size=input_size, hidden_size=hidden_size, bidirectional=bidirectional, bias=False)

    def forward(self, x):
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x, _ = self.rnn(x)
        if self.bidirectional:
            x = x.view(x.size(0), x.size(1), 2, -1).sum(2).view(x.size(0), x.size(1), -1)  # (TxNxH*2) -> (TxNxH) by sum
        return x

class DeepSpeech(nn.Module):
    def __init__(self, rnn_type=nn.LSTM, labels="abc", rnn_hidden_size=768, nb_layers=5, audio_conf=None,
                 bidirectional=True, context=20):
        super(DeepSpeech, self).__init__()
        # model metadata needed for serialization/deserialization
        self._version, self._hidden_size, self._hidden_layers = '0.0.1', rnn_hidden_size, nb_layers
        self._rnn_type, self._audio_conf, self._labels = rnn_type, audio_conf or {}, labels
        self._bidirectional = bidirectional
        sample_rate = self._audio_conf.get("sample_rate", 16000)
        window_size = self._audio_conf.get("window_size", 0.02)
        num_classes = len(self._labels)
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, kernel_size=(41, 11), stride=(2, 2), padding=(0, 10)),
            nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(32, 32, kernel_size=(21, 11), stride=(2, 1), ),
            nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True))
        # Based on above convolutions and spectrogram size using conv formula (W - F + 2P)/ S+1
        rnn_input_size = int(math.floor((sample_rate * window_size) / 2) + 1)
        rnn_input_size = int(math.floor(rnn_input_size - 41) / 2 + 1)
        rnn_input_size = int(math.floor(rnn_input_size - 21) / 2 + 1)
        rnn_input_size *= 32
        rnns = []
        rnn = BatchRNN(input_size=rnn_input_size, hidden_size=rnn_hidden_size, rnn_type=rnn_type,
                       bidirectional=bidirectional, batch_norm=False)
        rnns.append(('0', rnn))
        for x in range(nb_layers - 1):
            rnn = BatchRNN(input_size=rnn_hidden_size, hidden_size=rnn_hidden_size, rnn_type=rnn_type,
                           bidirectional=bidirectional)
            rnns.append(('%d' % (x + 1), rnn))
        self.rnns = nn.Sequential(OrderedDict(rnns))  # (+ Lookahead when not bidirectional)
        fully_connected = nn.Sequential(nn.BatchNorm1d(rnn_hidden_size),
                                        nn.Linear(rnn_hidden_size, num_classes, bias=False))
        self.fc = nn.Sequential(SequenceWise(fully_connected), )
        self.inference_softmax = InferenceBatchSoftmax()

    def forward(self, x):
        x = self.conv(x)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])  # Collapse feature dimension
        x = x.transpose(1, 2).transpose(0, 1).contiguous()  # TxNxH
        x = self.rnns(x)
        x = self.fc(x)
        x = x.transpose(0, 1)
        x = self.inference_softmax(x)  # identity in training mode, softmax in eval mode
        return x

    @classmethod
    def load_model_package(cls, package, cuda=False):
        model = cls(rnn_hidden_size=package['hidden_size'], nb_layers=package['hidden_layers'],
                    labels=package['labels'], audio_conf=package['audio_conf'],
                    rnn_type=supported_rnns[package['rnn_type']], bidirectional=package.get('bidirectional', True))
        model.load_state_dict(package['state_dict'])
        if cuda:
            model = torch.nn.DataParallel(model).cuda()
        return model

    @staticmethod
    def serialize(model, optimizer=None, epoch=None, iteration=None, loss_results=None,
                  cer_results=None, wer_results=None, avg_loss=None, meta=None):
        model_is_cuda = next(model.parameters()).is_cuda
        model = model.module if model_is_cuda else model
        package = {'version': model._version, 'hidden_size': model._hidden_size, 'hidden_layers': model._hidden_layers,
                   'rnn_type': supported_rnns_inv.get(model._rnn_type, model._rnn_type.__name__.lower()),
                   'audio_conf': model._audio_conf, 'labels': model._labels, 'state_dict': model.state_dict(),
                   'bidirectional': model._bidirectional}
        if optimizer is not None:
            package['optim_dict'] = optimizer.state_dict()
        if avg_loss is not None:
            package['avg_loss'] = avg_loss
        if epoch is not None:
            package['epoch'] = epoch + 1  # increment for readability
        if iteration is not None:
            package['iteration'] = iteration
        if loss_results is not None:
            package.update(loss_results=loss_results, cer_results=cer_results, wer_results=wer_results)
        return package

    @staticmethod
    def get_labels(model):
        model_is_cuda = next(model.parameters()).is_cuda
        return model.module._labels if model_is_cuda else model._labels

    @staticmethod
    def get_param_size(model):
        return sum(int(np.prod(p.size())) for p in model.parameters())

    @staticmethod
    def get_audio_conf(model):
        model_is_cuda = next(model.parameters()).is_cuda
        return model.module._audio_conf if model_is_cuda else model._audio_conf

# ----------------------------------------------------------------------- synthetic AN4 (the repo downloads it)
def make_an4(root, rng, sample_rate=8000):
    words = ['YES', 'NO', 'GO', 'STOP', 'UP', 'DOWN', 'ENTER', 'ERASE', 'RUBOUT', 'TWO', 'SIX']
    tone = {c: 300.0 + 110.0 * i for i, c in enumerate(LABELS[2:-1])}
    t = np.arange(int(0.06 * sample_rate)) / sample_rate
    manifests = {}
    for split, n in [('train', 24), ('val', 8)]:
        lines = []
        for k in range(n):
            text = ' '.join(words[j] for j in rng.randint(len(words), size=rng.randint(2, 5)))
            pieces = [np.zeros(400)] + [np.sin(2 * np.pi * tone[c] * t) if c != ' ' else 0 * t for c in text]
            audio = np.concatenate(pieces + [np.zeros(400)])
            path = os.path.join(root, '%s_%d' % (split, k))
            np.save(path + '.npy', (audio + 0.05 * rng.randn(len(audio))).astype(np.float32))
            with open(path + '.txt', 'w') as f:
                f.write(text)
            lines.append('%s.npy,%s.txt\n' % (path, path))
        manifests[split] = os.path.join(root, '%s_manifest.csv' % split)
        with open(manifests[split], 'w') as f:
            f.writelines(lines)
    with open(os.path.join(root, 'labels.json'), 'w') as f:
        json.dump(LABELS, f)
    return manifests

# ------------------------------------------------------------------------------------------------------- train.py
parser = argparse.ArgumentParser(description='DeepSpeech training')
parser.add_argument('--train-manifest', metavar='DIR', default='data/train_manifest.csv')
parser.add_argument('--val-manifest', metavar='DIR', default='data/val_manifest.csv')
parser.add_argument('--sample-rate', default=16000, type=int, help='Sample rate')
parser.add_argument('--batch-size', default=20, type=int, help='Batch size for training')
parser.add_argument('--num-workers', default=4, type=int, help='Number of workers used in data-loading')
parser.add_argument('--labels-path', default='labels.json', help='Contains all characters for transcription')
parser.add_argument('--window-size', default=.02, type=float, help='Window size for spectrogram in seconds')
parser.add_argument('--window-stride', default=.01, type=float, help='Window stride for spectrogram in seconds')
parser.add_argument('--hidden-size', default=800, type=int, help='Hidden size of RNNs')
parser.add_argument('--hidden-layers', default=5, type=int, help='Number of RNN layers')
parser.add_argument('--rnn-type', default='gru', help='Type of the RNN. rnn|gru|lstm are supported')
parser.add_argument('--epochs', default=70, type=int, help='Number of training epochs')
parser.add_argument('--cuda', dest='cuda', action='store_true', help='Use cuda to train model')
parser.add_argument('--lr', '--learning-rate', default=3e-4, type=float, help='initial learning rate')
parser.add_argument('--momentum', default=0.9, type=float, help='momentum')
parser.add_argument('--max-norm', default=400, type=int, help='Norm cutoff to prevent explosion of gradients')
parser.add_argument('--learning-anneal', default=1.1, type=float, help='Annealing applied to learning rate every epoch')
parser.add_argument('--checkpoint', dest='checkpoint', action='store_true', help='Enables checkpoint saving of model')
parser.add_argument('--save-folder', default='models/', help='Location to save epoch models')
parser.add_argument('--model-path', default='models/deepspeech_final.pth')
parser.add_argument('--continue-from', default='', help='Continue from checkpoint model')
parser.add_argument('--world-size', default=1, type=int, help='number of distributed processes')

torch.manual_seed(123456)
torch.cuda.manual_seed_all(123456)

class AverageMeter(object):
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val * n, self.count + n
        self.avg = self.sum / self.count

if __name__ == '__main__':
    root = tempfile.mkdtemp(prefix='deepspeech_an4_')
    manifests = make_an4(root, np.random.RandomState(0))
    save_folder = os.path.join(root, 'models')
    common = ['--train-manifest', manifests['train'], '--val-manifest', manifests['val'], '--sample-rate', '8000',
              '--batch-size', '8', '--num-workers', '0', '--labels-path', os.path.join(root, 'labels.json'),
              '--hidden-size', '64', '--hidden-layers', '2', '--epochs', '2', '--lr', '3e-3', '--checkpoint',
              '--save-folder', save_folder, '--model-path', os.path.join(save_folder, 'final.pth')]
    common += ['--cuda'] if torch.cuda.is_available() else []
    for run_argv in [common, common + ['--continue-from', os.path.join(save_folder, 'deepspeech_1.pth.tar')]]:
        args = parser.parse_args(run_argv)
        args.distributed = args.world_size > 1
        main_proc = True
        save_folder = args.save_folder
        loss_results, cer_results, wer_results = [torch.Tensor(args.epochs) for _ in range(3)]
        best_wer = None
        os.makedirs(save_folder, exist_ok=True)
        criterion = nn.CTCLoss(blank=LABELS.index('_'), reduction='sum', zero_infinity=True)  # warpctc CTCLoss()
        avg_loss, start_epoch, start_iter = 0, 0, 0
        if args.continue_from:  # Starting from previous model
            print("Loading checkpoint model %s" % args.continue_from)
            package = torch.load(args.continue_from, map_location=lambda storage, loc: storage)
            model = DeepSpeech.load_model_package(package)
            labels = DeepSpeech.get_labels(model)
            audio_conf = DeepSpeech.get_audio_conf(model)
            parameters = model.parameters()
            optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=args.momentum, nesterov=True)
            optimizer.load_state_dict(package['optim_dict'])  # (not args.finetune)
            # Temporary fix for pytorch #2830 & #1442 while pull request #3658 in not incorporated in a release
            if args.cuda:
                for state in optimizer.state.values():
                    for k, v in state.items():
                        if torch.is_tensor(v):
                            state[k] = v.cuda()
            start_epoch = int(package.get('epoch', 1)) - 1  # Index start at 0 for training
            start_iter = package.get('iteration', None)
            if start_iter is None:
                start_epoch += 1  # We saved model after epoch finished, start at the next epoch.
                start_iter = 0
            else:
                start_iter += 1
            avg_loss = int(package.get('avg_loss', 0))
            loss_results, cer_results, wer_results = [package[k] for k in ['loss_results', 'cer_results',
                                                                           'wer_results']]
        else:
            with open(args.labels_path) as label_file:
                labels = str(''.join(json.load(label_file)))
            audio_conf = dict(sample_rate=args.sample_rate, window_size=args.window_size,
                              window_stride=args.window_stride, window='hamming')
            rnn_type = args.rnn_type.lower()
            model = DeepSpeech(rnn_hidden_size=args.hidden_size, nb_layers=args.hidden_layers, labels=labels,
                               rnn_type=supported_rnns[rnn_type], audio_conf=audio_conf)
            parameters = model.parameters()
            optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=args.momentum, nesterov=True)
        decoder = GreedyDecoder(labels)
        train_dataset = SpectrogramDataset(audio_conf=audio_conf, manifest_filepath=args.train_manifest, labels=labels,
                                           normalize=True)
        test_dataset = SpectrogramDataset(audio_conf=audio_conf, manifest_filepath=args.val_manifest, labels=labels,
                                          normalize=True)
        train_sampler = BucketingSampler(train_dataset, batch_size=args.batch_size)
        train_loader = AudioDataLoader(train_dataset, num_workers=args.num_workers, batch_sampler=train_sampler)
        test_loader = AudioDataLoader(test_dataset, batch_size=args.batch_size, num_workers=args.num_workers)
        if start_epoch != 0:  # and not args.no_shuffle
            print("Shuffling batches for the following epochs")
            train_sampler.shuffle(start_epoch)
        if args.cuda and not args.distributed:
            model = torch.nn.DataParallel(model).cuda()
        print("Number of parameters: %d" % DeepSpeech.get_param_size(model))

        losses = AverageMeter()
        for epoch in range(start_epoch, args.epochs):
            model.train()
            start_epoch_time = time.time()
            for i, (data) in enumerate(train_loader, start=start_iter):
                if i == len(train_sampler):
                    break
                inputs, targets, input_percentages, target_sizes = data
                inputs = Variable(inputs, requires_grad=False)
                if args.cuda:
                    inputs = inputs.cuda()
                out = model(inputs)
                out = out.transpose(0, 1)  # TxNxH
                seq_length = out.size(0)
                sizes = Variable(input_percentages.mul_(int(seq_length)).int(), requires_grad=False)
                loss = criterion(out.log_softmax(-1), targets, sizes, target_sizes)
                loss = loss / inputs.size(0)  # average the loss by minibatch
                loss_sum = loss.data.sum()
                inf = float("inf")
                if loss_sum == inf or loss_sum == -inf:
                    print("WARNING: received an inf loss, setting loss value to 0")
                    loss_value = 0
                else:
                    loss_value = loss.item()
                avg_loss += loss_value
                losses.update(loss_value, inputs.size(0))
                optimizer.zero_grad()  # compute gradient
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)
                optimizer.step()  # SGD step
                if args.cuda:
                    torch.cuda.synchronize()
                print('Epoch: [{0}][{1}/{2}]\tLoss {loss.val:.4f} ({loss.avg:.4f})\t'.format(
                    (epoch + 1), (i + 1), len(train_sampler), loss=losses))
                del loss
                del out
            avg_loss /= len(train_sampler)
            print('Training Summary Epoch: [{0}]\tTime taken (s): {epoch_time:.0f}\tAverage Loss {loss:.3f}\t'.format(
                epoch + 1, epoch_time=time.time() - start_epoch_time, loss=avg_loss))

            start_iter = 0  # Reset start iteration for next epoch
            total_cer, total_wer = 0, 0
            model.eval()
            with torch.no_grad():  # Variable(inputs, volatile=True)
                for i, (data) in enumerate(test_loader):
                    inputs, targets, input_percentages, target_sizes = data
                    split_targets, offset = [], 0  # unflatten targets
                    for size in target_sizes:
                        split_targets.append(targets[offset:offset + size])
                        offset += size
                    if args.cuda:
                        inputs = inputs.cuda()
                    out = model(inputs)  # NxTxH
                    seq_length = out.size(1)
                    sizes = input_percentages.mul_(int(seq_length)).int()
                    decoded_output, _ = decoder.decode(out.data, sizes)
                    target_strings = decoder.convert_to_strings(split_targets)
                    wer, cer = 0, 0
                    for x in range(len(target_strings)):
                        transcript, reference = decoded_output[x][0], target_strings[x][0]
                        wer += decoder.wer(transcript, reference) / float(len(reference.split()))
                        cer += decoder.cer(transcript, reference) / float(len(reference))
                    total_cer += cer
                    total_wer += wer
                    if args.cuda:
                        torch.cuda.synchronize()
                    del out
            wer = total_wer / len(test_loader.dataset) * 100
            cer = total_cer / len(test_loader.dataset) * 100
            loss_results[epoch], wer_results[epoch], cer_results[epoch] = avg_loss, wer, cer
            print('Validation Summary Epoch: [{0}]\tAverage WER {wer:.3f}\tAverage CER {cer:.3f}\t'.format(
                epoch + 1, wer=wer, cer=cer))
            if args.checkpoint and main_proc:
                file_path = '%s/deepspeech_%d.pth.tar' % (save_folder, epoch + 1)
                torch.save(DeepSpeech.serialize(model, optimizer=optimizer, epoch=epoch, loss_results=loss_results,
                                                wer_results=wer_results, cer_results=cer_results), file_path)
            # anneal lr
            optim_state = optimizer.state_dict()
            optim_state['param_groups'][0]['lr'] = optim_state['param_groups'][0]['lr'] / args.learning_anneal
            optimizer.load_state_dict(optim_state)
            print('Learning rate annealed to: {lr:.6f}'.format(lr=optim_state['param_groups'][0]['lr']))
            if (best_wer is None or best_wer > wer) and main_proc:
                print("Found better validated model, saving to %s" % args.model_path)
                torch.save(DeepSpeech.serialize(model, optimizer=optimizer, epoch=epoch, loss_results=loss_results,
                                                wer_results=wer_results, cer_results=cer_results), args.model_path)
                best_wer = wer
            avg_loss = 0
            print("Shuffling batches...")  # not args.no_shuffle
            train_sampler.shuffle(epoch)

    print("done")
