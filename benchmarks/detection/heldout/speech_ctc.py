"""Trains a small Deep Speech 2 style recogniser (ResCNN + BiGRU) with CTC loss, greedy-decodes, saves and reloads it.

Modeled on: AssemblyAI's "Building an End-to-End Speech Recognition Model in PyTorch" (Michael Nguyen, 2020,
https://www.assemblyai.com/blog/end-to-end-speech-recognition-pytorch/, its Colab notebook, as reproduced in e.g.
https://www.comet.com/site/customers/assemblyai/).

Kept: `use_cuda = torch.cuda.is_available()`, `torch.manual_seed(7)`, `device = torch.device("cuda" if use_cuda else
"cpu")`; DataLoader kwargs `{'num_workers': 1, 'pin_memory': True} if use_cuda else {}` and a collate_fn calling
`data_processing(x, 'train')`; `data_processing` building padded spectrograms and float labels
(`torch.Tensor(text_transform.text_to_int(...))`) and returning input/label lengths as Python lists; `model =
SpeechRecognitionModel(...).to(device)`, `criterion = nn.CTCLoss(blank=28).to(device)`, AdamW with a per-batch
OneCycleLR; `train()` taking `device`, moving only `spectrograms, labels` with `.to(device)`, `log_softmax` then
`transpose(0, 1)` and CTC with the host length lists; `test()` with `model.eval()` and `torch.no_grad()`, and the
`GreedyDecoder` that walks the device argmax tensor element by element (`index != blank_label`, `index.item()`); the
BiGRU stack's `batch_first=i==0` exactly as written. Added (the tutorial has no checkpoint): a `torch.save` of the
state_dict and a reload with `map_location=device` into a fresh model for a last greedy decode.

Shrunk: synthetic "spectrograms" (each character drawn as a fixed random 32-bin spectral profile over 3-5 frames, plus
noise) of short phrases instead of LibriSpeech and torchaudio's MelSpectrogram; SpecAugment written as two random zero
masks; 16 conv channels, 1 ResCNN and 1 BiGRU layer of width 48 (so the `batch_first=False` layers are not built); 48
training and 16 test utterances, batch 8, 12 epochs; a plain Levenshtein CER/WER instead of the tutorial's helpers; no
Comet logging; the collate lambdas become `functools.partial` so that worker processes can also be started by
spawn/forkserver.
"""
import functools
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data


# ----------------------------------------------------------------------------- text and data


class TextTransform:
    """Maps characters to integers and vice versa"""

    def __init__(self):
        char_map_str = """
        ' 0
        <SPACE> 1
        a 2
        b 3
        c 4
        d 5
        e 6
        f 7
        g 8
        h 9
        i 10
        j 11
        k 12
        l 13
        m 14
        n 15
        o 16
        p 17
        q 18
        r 19
        s 20
        t 21
        u 22
        v 23
        w 24
        x 25
        y 26
        z 27
        """
        self.char_map = {}
        self.index_map = {}
        for line in char_map_str.strip().split('\n'):
            ch, index = line.split()
            self.char_map[ch] = int(index)
            self.index_map[int(index)] = ch
        self.index_map[1] = ' '

    def text_to_int(self, text):
        """ Use a character map and convert text to an integer sequence """
        int_sequence = []
        for c in text:
            if c == ' ':
                ch = self.char_map['<SPACE>']
            else:
                ch = self.char_map[c]
            int_sequence.append(ch)
        return int_sequence

    def int_to_text(self, labels):
        """ Use a character map and convert integer labels to an text sequence """
        string = []
        for i in labels:
            string.append(self.index_map[i])
        return ''.join(string).replace('<SPACE>', ' ')


text_transform = TextTransform()
N_FEATS = 32
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "red", "sun"]


class SyntheticSpeech(data.Dataset):
    """(waveform-free) utterances: a (1, n_feats, time) spectrogram and its transcript, like LIBRISPEECH items."""

    def __init__(self, n, seed):
        profile_rng = np.random.RandomState(1234)  # the same "voice" for every split
        self.profiles = profile_rng.rand(28, N_FEATS).astype(np.float32) * 2.0
        rs = np.random.RandomState(seed)
        self.items = []
        for _ in range(n):
            utterance = " ".join(rs.choice(WORDS) for _ in range(rs.randint(2, 4)))
            frames = []
            for c in utterance:
                idx = text_transform.text_to_int(c)[0]
                for _ in range(rs.randint(3, 6)):
                    frames.append(self.profiles[idx] + 0.3 * rs.randn(N_FEATS).astype(np.float32))
            spec = torch.from_numpy(np.stack(frames, axis=1)).unsqueeze(0)  # (1, n_feats, time)
            self.items.append((spec, utterance))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def spec_augment(spec, freq_mask_param=6, time_mask_param=8):
    """FrequencyMasking + TimeMasking on a (1, n_feats, time) spectrogram."""
    spec = spec.clone()
    f = int(torch.randint(0, freq_mask_param + 1, (1,)))
    f0 = int(torch.randint(0, spec.shape[1] - f + 1, (1,)))
    spec[:, f0:f0 + f, :] = 0
    t = int(torch.randint(0, min(time_mask_param, spec.shape[2] // 4) + 1, (1,)))
    t0 = int(torch.randint(0, spec.shape[2] - t + 1, (1,)))
    spec[:, :, t0:t0 + t] = 0
    return spec


def data_processing(data, data_type="train"):
    spectrograms = []
    labels = []
    input_lengths = []
    label_lengths = []
    for (waveform, utterance) in data:
        if data_type == 'train':
            spec = spec_augment(waveform).squeeze(0).transpose(0, 1)
        elif data_type == 'valid':
            spec = waveform.squeeze(0).transpose(0, 1)
        else:
            raise Exception('data_type should be train or valid')
        spectrograms.append(spec)
        label = torch.Tensor(text_transform.text_to_int(utterance.lower()))
        labels.append(label)
        input_lengths.append(spec.shape[0] // 2)
        label_lengths.append(len(label))

    spectrograms = nn.utils.rnn.pad_sequence(spectrograms, batch_first=True).unsqueeze(1).transpose(2, 3)
    labels = nn.utils.rnn.pad_sequence(labels, batch_first=True)

    return spectrograms, labels, input_lengths, label_lengths


# ----------------------------------------------------------------------------- metrics


def levenshtein(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def cer(reference, hypothesis):
    return levenshtein(reference, hypothesis) / max(len(reference), 1)


def wer(reference, hypothesis):
    ref = reference.split()
    return levenshtein(ref, hypothesis.split()) / max(len(ref), 1)


def GreedyDecoder(output, labels, label_lengths, blank_label=28, collapse_repeated=True):
    arg_maxes = torch.argmax(output, dim=2)
    decodes = []
    targets = []
    for i, args in enumerate(arg_maxes):
        decode = []
        targets.append(text_transform.int_to_text(labels[i][:label_lengths[i]].tolist()))
        for j, index in enumerate(args):
            if index != blank_label:
                if collapse_repeated and j != 0 and index == args[j - 1]:
                    continue
                decode.append(index.item())
        decodes.append(text_transform.int_to_text(decode))
    return decodes, targets


# ----------------------------------------------------------------------------- the model


class CNNLayerNorm(nn.Module):
    """Layer normalization built for cnns input"""

    def __init__(self, n_feats):
        super(CNNLayerNorm, self).__init__()
        self.layer_norm = nn.LayerNorm(n_feats)

    def forward(self, x):
        # x (batch, channel, feature, time)
        x = x.transpose(2, 3).contiguous()  # (batch, channel, time, feature)
        x = self.layer_norm(x)
        return x.transpose(2, 3).contiguous()  # (batch, channel, feature, time)


class ResidualCNN(nn.Module):
    """Residual CNN inspired by https://arxiv.org/pdf/1603.05027.pdf
        except with layer norm instead of batch norm
    """

    def __init__(self, in_channels, out_channels, kernel, stride, dropout, n_feats):
        super(ResidualCNN, self).__init__()

        self.cnn1 = nn.Conv2d(in_channels, out_channels, kernel, stride, padding=kernel // 2)
        self.cnn2 = nn.Conv2d(out_channels, out_channels, kernel, stride, padding=kernel // 2)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.layer_norm1 = CNNLayerNorm(n_feats)
        self.layer_norm2 = CNNLayerNorm(n_feats)

    def forward(self, x):
        residual = x  # (batch, channel, feature, time)
        x = self.layer_norm1(x)
        x = F.gelu(x)
        x = self.dropout1(x)
        x = self.cnn1(x)
        x = self.layer_norm2(x)
        x = F.gelu(x)
        x = self.dropout2(x)
        x = self.cnn2(x)
        x += residual
        return x  # (batch, channel, feature, time)


class BidirectionalGRU(nn.Module):

    def __init__(self, rnn_dim, hidden_size, dropout, batch_first):
        super(BidirectionalGRU, self).__init__()

        self.BiGRU = nn.GRU(
            input_size=rnn_dim, hidden_size=hidden_size,
            num_layers=1, batch_first=batch_first, bidirectional=True)
        self.layer_norm = nn.LayerNorm(rnn_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.layer_norm(x)
        x = F.gelu(x)
        x, _ = self.BiGRU(x)
        x = self.dropout(x)
        return x


class SpeechRecognitionModel(nn.Module):

    def __init__(self, n_cnn_layers, n_rnn_layers, rnn_dim, n_class, n_feats, stride=2, dropout=0.1):
        super(SpeechRecognitionModel, self).__init__()
        n_feats = n_feats // 2
        self.cnn = nn.Conv2d(1, 16, 3, stride=stride, padding=3 // 2)  # cnn for extracting heirachal features

        # n residual cnn layers with filter size of 16
        self.rescnn_layers = nn.Sequential(*[
            ResidualCNN(16, 16, kernel=3, stride=1, dropout=dropout, n_feats=n_feats)
            for _ in range(n_cnn_layers)
        ])
        self.fully_connected = nn.Linear(n_feats * 16, rnn_dim)
        self.birnn_layers = nn.Sequential(*[
            BidirectionalGRU(rnn_dim=rnn_dim if i == 0 else rnn_dim * 2,
                             hidden_size=rnn_dim, dropout=dropout, batch_first=i == 0)
            for i in range(n_rnn_layers)
        ])
        self.classifier = nn.Sequential(
            nn.Linear(rnn_dim * 2, rnn_dim),  # birnn returns rnn_dim*2
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(rnn_dim, n_class)
        )

    def forward(self, x):
        x = self.cnn(x)
        x = self.rescnn_layers(x)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])  # (batch, feature, time)
        x = x.transpose(1, 2)  # (batch, time, feature)
        x = self.fully_connected(x)
        x = self.birnn_layers(x)
        x = self.classifier(x)
        return x


# ----------------------------------------------------------------------------- training


class IterMeter(object):
    """keeps track of total iterations"""

    def __init__(self):
        self.val = 0

    def step(self):
        self.val += 1

    def get(self):
        return self.val


def train(model, device, train_loader, criterion, optimizer, scheduler, epoch, iter_meter):
    model.train()
    data_len = len(train_loader.dataset)
    for batch_idx, _data in enumerate(train_loader):
        spectrograms, labels, input_lengths, label_lengths = _data
        spectrograms, labels = spectrograms.to(device), labels.to(device)

        optimizer.zero_grad()

        output = model(spectrograms)  # (batch, time, n_class)
        output = F.log_softmax(output, dim=2)
        output = output.transpose(0, 1)  # (time, batch, n_class)

        loss = criterion(output, labels, input_lengths, label_lengths)
        loss.backward()

        optimizer.step()
        scheduler.step()
        iter_meter.step()
        if batch_idx % 3 == 0 or batch_idx == data_len:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(spectrograms), data_len,
                100. * batch_idx / len(train_loader), loss.item()))


def test(model, device, test_loader, criterion, epoch, iter_meter):
    print('\nevaluating...')
    model.eval()
    test_loss = 0
    test_cer, test_wer = [], []
    examples = []
    with torch.no_grad():
        for i, _data in enumerate(test_loader):
            spectrograms, labels, input_lengths, label_lengths = _data
            spectrograms, labels = spectrograms.to(device), labels.to(device)

            output = model(spectrograms)  # (batch, time, n_class)
            output = F.log_softmax(output, dim=2)
            output = output.transpose(0, 1)  # (time, batch, n_class)

            loss = criterion(output, labels, input_lengths, label_lengths)
            test_loss += loss.item() / len(test_loader)

            decoded_preds, decoded_targets = GreedyDecoder(output.transpose(0, 1), labels, label_lengths)
            for j in range(len(decoded_preds)):
                test_cer.append(cer(decoded_targets[j], decoded_preds[j]))
                test_wer.append(wer(decoded_targets[j], decoded_preds[j]))
            examples.append((decoded_targets[0], decoded_preds[0]))

    avg_cer = sum(test_cer) / len(test_cer)
    avg_wer = sum(test_wer) / len(test_wer)

    print('Test set: Average loss: {:.4f}, Average CER: {:4f} Average WER: {:.4f}'.format(test_loss, avg_cer, avg_wer))
    print('  e.g. target {!r} -> predicted {!r}\n'.format(*examples[0]))
    return avg_cer


def main(save_dir, learning_rate=1e-2, batch_size=8, epochs=12):
    hparams = {
        "n_cnn_layers": 1,
        "n_rnn_layers": 1,
        "rnn_dim": 48,
        "n_class": 29,
        "n_feats": N_FEATS,
        "stride": 2,
        "dropout": 0.1,
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "epochs": epochs
    }

    use_cuda = torch.cuda.is_available()
    torch.manual_seed(7)
    device = torch.device("cuda" if use_cuda else "cpu")

    train_dataset = SyntheticSpeech(48, seed=1)
    test_dataset = SyntheticSpeech(16, seed=2)

    kwargs = {'num_workers': 1, 'pin_memory': True} if use_cuda else {}
    train_loader = data.DataLoader(dataset=train_dataset,
                                   batch_size=hparams['batch_size'],
                                   shuffle=True,
                                   collate_fn=functools.partial(data_processing, data_type='train'),
                                   **kwargs)
    test_loader = data.DataLoader(dataset=test_dataset,
                                  batch_size=hparams['batch_size'],
                                  shuffle=False,
                                  collate_fn=functools.partial(data_processing, data_type='valid'),
                                  **kwargs)

    model = SpeechRecognitionModel(
        hparams['n_cnn_layers'], hparams['n_rnn_layers'], hparams['rnn_dim'],
        hparams['n_class'], hparams['n_feats'], hparams['stride'], hparams['dropout']
    ).to(device)

    print('Num Model Parameters', sum([param.nelement() for param in model.parameters()]))

    optimizer = optim.AdamW(model.parameters(), hparams['learning_rate'])
    criterion = nn.CTCLoss(blank=28).to(device)
    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=hparams['learning_rate'],
                                              steps_per_epoch=int(len(train_loader)),
                                              epochs=hparams['epochs'],
                                              anneal_strategy='linear')

    iter_meter = IterMeter()
    for epoch in range(1, epochs + 1):
        train(model, device, train_loader, criterion, optimizer, scheduler, epoch, iter_meter)
        if epoch % 6 == 0:
            test(model, device, test_loader, criterion, epoch, iter_meter)

    path = os.path.join(save_dir, 'model.pt')
    torch.save(model.state_dict(), path)

    reloaded = SpeechRecognitionModel(
        hparams['n_cnn_layers'], hparams['n_rnn_layers'], hparams['rnn_dim'],
        hparams['n_class'], hparams['n_feats'], hparams['stride'], hparams['dropout']
    ).to(device)
    reloaded.load_state_dict(torch.load(path, map_location=device))
    print('reloaded model:')
    test(reloaded, device, test_loader, criterion, epochs, iter_meter)


if __name__ == '__main__':
    random.seed(0)
    np.random.seed(0)
    with tempfile.TemporaryDirectory() as save_dir:
        main(save_dir)
