"""Trains a CRNN text recogniser (conv stack + two bidirectional LSTMs, CTC loss) on rendered digit strings with the
author's preallocated input buffers, validates with greedy CTC decoding, checkpoints, and runs the demo on a reload.

Modeled on: meijieru/crnn.pytorch, train.py, models/crnn.py, utils.py, dataset.py and demo.py
(https://github.com/meijieru/crnn.pytorch/blob/3cc7904c5ba20b18fcdc2d02ac2b24a9be9eafaf/train.py,
https://github.com/meijieru/crnn.pytorch/blob/3cc7904c5ba20b18fcdc2d02ac2b24a9be9eafaf/models/crnn.py,
https://github.com/meijieru/crnn.pytorch/blob/3cc7904c5ba20b18fcdc2d02ac2b24a9be9eafaf/utils.py,
https://github.com/meijieru/crnn.pytorch/blob/3cc7904c5ba20b18fcdc2d02ac2b24a9be9eafaf/dataset.py,
https://github.com/meijieru/crnn.pytorch/blob/3cc7904c5ba20b18fcdc2d02ac2b24a9be9eafaf/demo.py).

Kept: `cudnn.benchmark = True` and the "you should probably run with --cuda" warning (the `--cuda` flag becomes
`cuda=torch.cuda.is_available()` in the options namespace); `crnn.apply(weights_init)` on the CPU; the preallocated
`image = torch.FloatTensor(...)`, `text = torch.IntTensor(...)`, `length = torch.IntTensor(...)` buffers wrapped in
`Variable`, with only `image` (and the criterion) moved under `if opt.cuda:` next to `crnn.cuda()` and
`torch.nn.DataParallel(crnn, device_ids=range(opt.ngpu))`, so text and lengths stay on the host for the CTC loss;
`utils.loadData` refilling the buffers in place with `resize_(data.size()).copy_(data)` (a host-to-device copy for
the image); `preds_size = Variable(torch.IntTensor([preds.size(0)] * batch_size))` on the host; the optimizer made after
the move; `trainBatch` with `crnn.zero_grad()`; each step setting `p.requires_grad = True` and `crnn.train()`; `val`
turning `requires_grad` off and calling `net.eval()` with no `torch.no_grad()`, adding the device loss tensor to the
`averager` (which keeps a device running sum), and `strLabelConverter.decode` walking the device argmax tensor
element by element; `torch.save(crnn.state_dict(), ...)` every `saveInterval`; demo.py's `model.cuda()` when
available *before* `model.load_state_dict(torch.load(model_path))`, `image.cuda()` and `model.eval()`.
Changed where the 2017 code no longer runs: warp-ctc's `CTCLoss` (softmax inside, summed cost) is a small module over
`F.ctc_loss(acts.log_softmax(2), ..., reduction='sum', zero_infinity=True)`; `.next()` becomes `next(...)`; the
`preds.squeeze(2)` after `max(2)` is dropped (max no longer keeps the dim); `random_sample=True` so the loader is
not given both a sampler and `shuffle=True`; `collections.Iterable` is `collections.abc.Iterable`; `loadData`'s `v.data.resize_(...)` no longer resizes `v`
itself, so it is `v.resize_(...).copy_(...)` under `torch.no_grad()`, the usual port. Added: the demo
strips the `module.` prefix that DataParallel puts on the saved keys.

Shrunk: synthetic 1x32x64 "word" images (each digit a fixed random 32x10 glyph, 3-5 digits, pixel noise) instead of
lmdb text crops, alphabet '0123456789'; channel widths [8, 16, 32, 32, 64, 64, 64] instead of up to 512, nh 32; 128
training and 32 validation images, batch 16, 6 epochs, display every 4 and validation/checkpoint every 8 batches;
Adam (the author's `--adam` option); workers 0; expr_dir a temporary directory.
"""
from __future__ import division, print_function

import argparse
import collections.abc
import os
import random
import tempfile

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data
from torch.autograd import Variable


# ----------------------------------------------------------------------------- models/crnn.py

class BidirectionalLSTM(nn.Module):

    def __init__(self, nIn, nHidden, nOut):
        super(BidirectionalLSTM, self).__init__()
        self.rnn = nn.LSTM(nIn, nHidden, bidirectional=True)
        self.embedding = nn.Linear(nHidden * 2, nOut)

    def forward(self, input):
        recurrent, _ = self.rnn(input)
        T, b, h = recurrent.size()
        t_rec = recurrent.view(T * b, h)

        output = self.embedding(t_rec)  # [T * b, nOut]
        output = output.view(T, b, -1)
        return output


class CRNN(nn.Module):

    def __init__(self, imgH, nc, nclass, nh, n_rnn=2, leakyRelu=False):
        super(CRNN, self).__init__()
        assert imgH % 16 == 0, 'imgH has to be a multiple of 16'

        ks = [3, 3, 3, 3, 3, 3, 2]
        ps = [1, 1, 1, 1, 1, 1, 0]
        ss = [1, 1, 1, 1, 1, 1, 1]
        nm = [8, 16, 32, 32, 64, 64, 64]

        cnn = nn.Sequential()

        def convRelu(i, batchNormalization=False):
            nIn = nc if i == 0 else nm[i - 1]
            nOut = nm[i]
            cnn.add_module('conv{0}'.format(i), nn.Conv2d(nIn, nOut, ks[i], ss[i], ps[i]))
            if batchNormalization:
                cnn.add_module('batchnorm{0}'.format(i), nn.BatchNorm2d(nOut))
            if leakyRelu:
                cnn.add_module('relu{0}'.format(i), nn.LeakyReLU(0.2, inplace=True))
            else:
                cnn.add_module('relu{0}'.format(i), nn.ReLU(True))

        convRelu(0)
        cnn.add_module('pooling{0}'.format(0), nn.MaxPool2d(2, 2))
        convRelu(1)
        cnn.add_module('pooling{0}'.format(1), nn.MaxPool2d(2, 2))
        convRelu(2, True)
        convRelu(3)
        cnn.add_module('pooling{0}'.format(2), nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        convRelu(4, True)
        convRelu(5)
        cnn.add_module('pooling{0}'.format(3), nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        convRelu(6, True)

        self.cnn = cnn
        self.rnn = nn.Sequential(
            BidirectionalLSTM(nm[-1], nh, nh),
            BidirectionalLSTM(nh, nh, nclass))

    def forward(self, input):
        # conv features
        conv = self.cnn(input)
        b, c, h, w = conv.size()
        assert h == 1, "the height of conv must be 1"
        conv = conv.squeeze(2)
        conv = conv.permute(2, 0, 1)  # [w, b, c]

        # rnn features
        output = self.rnn(conv)
        return output


# ----------------------------------------------------------------------------- utils.py

class strLabelConverter(object):
    """Convert between str and label; index 0 is the CTC blank."""

    def __init__(self, alphabet, ignore_case=True):
        self._ignore_case = ignore_case
        if self._ignore_case:
            alphabet = alphabet.lower()
        self.alphabet = alphabet + '-'  # for `-1` index

        self.dict = {}
        for i, char in enumerate(alphabet):
            self.dict[char] = i + 1

    def encode(self, text):
        if isinstance(text, str):
            text = [self.dict[char.lower() if self._ignore_case else char] for char in text]
            length = [len(text)]
        elif isinstance(text, collections.abc.Iterable):
            length = [len(s) for s in text]
            text = ''.join(text)
            text, _ = self.encode(text)
        return (torch.IntTensor(text), torch.IntTensor(length))

    def decode(self, t, length, raw=False):
        if length.numel() == 1:
            length = length[0]
            assert t.numel() == length, "text with length: {} does not match declared length: {}".format(
                t.numel(), length)
            if raw:
                return ''.join([self.alphabet[i - 1] for i in t])
            else:
                char_list = []
                for i in range(length):
                    if t[i] != 0 and (not (i > 0 and t[i - 1] == t[i])):
                        char_list.append(self.alphabet[t[i] - 1])
                return ''.join(char_list)
        else:
            # batch mode
            assert t.numel() == length.sum(), "texts with length: {} does not match declared length: {}".format(
                t.numel(), length.sum())
            texts = []
            index = 0
            for i in range(length.numel()):
                l = length[i]
                texts.append(self.decode(t[index:index + l], torch.IntTensor([l]), raw=raw))
                index += l
            return texts


class averager(object):
    """Compute average for `torch.Variable` and `torch.Tensor`. """

    def __init__(self):
        self.reset()

    def add(self, v):
        if isinstance(v, Variable):
            count = v.data.numel()
            v = v.data.sum()
        elif isinstance(v, torch.Tensor):
            count = v.numel()
            v = v.sum()

        self.n_count += count
        self.sum += v

    def reset(self):
        self.n_count = 0
        self.sum = 0

    def val(self):
        res = 0
        if self.n_count != 0:
            res = self.sum / float(self.n_count)
        return res


def loadData(v, data):
    with torch.no_grad():
        v.resize_(data.size()).copy_(data)


# ----------------------------------------------------------------------------- warp-ctc stand-in

class CTCLoss(nn.Module):
    """warpctc_pytorch.CTCLoss: raw activations (T, N, C), int targets and lengths on the host, summed cost."""

    def forward(self, acts, labels, act_lens, label_lens):
        return F.ctc_loss(acts.log_softmax(2), labels, act_lens, label_lens, blank=0, reduction='sum',
                          zero_infinity=True)


# ----------------------------------------------------------------------------- dataset.py (synthetic)

class wordDataset(torch.utils.data.Dataset):
    """Digit strings rendered from fixed random glyphs, already resized and normalized to [-1, 1]."""

    def __init__(self, n, alphabet, imgH=32, imgW=64, seed=0):
        glyph_rng = np.random.RandomState(99)
        glyphs = {c: np.kron(glyph_rng.rand((imgH - 8) // 4, 2) < 0.5, np.ones((4, 4))).astype(np.float32)
                  for c in alphabet}
        rng = np.random.RandomState(seed)
        self.images, self.labels = [], []
        for _ in range(n):
            word = ''.join(rng.choice(list(alphabet), rng.randint(3, 6)))
            img = np.zeros((imgH, imgW), dtype=np.float32)
            x = rng.randint(0, 4)
            for c in word:
                img[4:imgH - 4, x:x + 8] = np.maximum(img[4:imgH - 4, x:x + 8], glyphs[c])
                x += 10 + rng.randint(0, 2)
            img = np.clip(img + rng.normal(0, 0.15, img.shape), 0, 1).astype(np.float32)
            t = torch.from_numpy(img)[None]
            t.sub_(0.5).div_(0.5)
            self.images.append(t)
            self.labels.append(word)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return (self.images[index], self.labels[index])


class alignCollate(object):

    def __call__(self, batch):
        images, labels = zip(*batch)
        images = torch.cat([t.unsqueeze(0) for t in images], 0)
        return images, labels


# ----------------------------------------------------------------------------- train.py

opt = argparse.Namespace(workers=0, batchSize=16, imgH=32, imgW=64, nh=32, nepoch=6, cuda=torch.cuda.is_available(),
                         ngpu=1, pretrained='', alphabet='0123456789', expr_dir=None, displayInterval=4,
                         n_test_disp=4, valInterval=8, saveInterval=8, lr=0.002, beta1=0.5, adam=True,
                         adadelta=False, keep_ratio=False, manualSeed=1234, random_sample=True)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


def val(net, dataset, criterion, max_iter=100):
    print('Start val')

    for p in crnn.parameters():
        p.requires_grad = False

    net.eval()
    data_loader = torch.utils.data.DataLoader(dataset, shuffle=True, batch_size=opt.batchSize,
                                              num_workers=int(opt.workers), collate_fn=alignCollate())
    val_iter = iter(data_loader)

    i = 0
    n_correct = 0
    loss_avg = averager()

    max_iter = min(max_iter, len(data_loader))
    for i in range(max_iter):
        data = next(val_iter)
        i += 1
        cpu_images, cpu_texts = data
        batch_size = cpu_images.size(0)
        loadData(image, cpu_images)
        t, l = converter.encode(cpu_texts)
        loadData(text, t)
        loadData(length, l)

        preds = crnn(image)
        preds_size = Variable(torch.IntTensor([preds.size(0)] * batch_size))
        cost = criterion(preds, text, preds_size, length) / batch_size
        loss_avg.add(cost)

        _, preds = preds.max(2)
        preds = preds.transpose(1, 0).contiguous().view(-1)
        sim_preds = converter.decode(preds.data, preds_size.data, raw=False)
        for pred, target in zip(sim_preds, cpu_texts):
            if pred == target.lower():
                n_correct += 1

    raw_preds = converter.decode(preds.data, preds_size.data, raw=True)[:opt.n_test_disp]
    for raw_pred, pred, gt in zip(raw_preds, sim_preds, cpu_texts):
        print('%-20s => %-20s, gt: %-20s' % (raw_pred, pred, gt))

    accuracy = n_correct / float(max_iter * opt.batchSize)
    print('Test loss: %f, accuray: %f' % (loss_avg.val(), accuracy))
    return accuracy


def trainBatch(net, criterion, optimizer):
    data = next(train_iter)
    cpu_images, cpu_texts = data
    batch_size = cpu_images.size(0)
    loadData(image, cpu_images)
    t, l = converter.encode(cpu_texts)
    loadData(text, t)
    loadData(length, l)

    preds = crnn(image)
    preds_size = Variable(torch.IntTensor([preds.size(0)] * batch_size))
    cost = criterion(preds, text, preds_size, length) / batch_size
    crnn.zero_grad()
    cost.backward()
    optimizer.step()
    return cost


def demo(model_path, sample):
    """demo.py, on one validation image instead of data/demo.png."""
    model = CRNN(32, 1, len(opt.alphabet) + 1, opt.nh)
    if torch.cuda.is_available():
        model = model.cuda()
    print('loading pretrained model from %s' % os.path.basename(model_path))
    state_dict = torch.load(model_path)
    model.load_state_dict({k.replace('module.', '', 1): v for k, v in state_dict.items()})

    image, gt = sample
    if torch.cuda.is_available():
        image = image.cuda()
    image = image.view(1, *image.size())
    image = Variable(image)

    model.eval()
    preds = model(image)

    _, preds = preds.max(2)
    preds = preds.transpose(1, 0).contiguous().view(-1)

    preds_size = Variable(torch.IntTensor([preds.size(0)]))
    raw_pred = converter.decode(preds.data, preds_size.data, raw=True)
    sim_pred = converter.decode(preds.data, preds_size.data, raw=False)
    print('%-20s => %-20s, gt: %-20s' % (raw_pred, sim_pred, gt))
    return sim_pred


if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as expr_dir:
        print(opt)
        opt.expr_dir = expr_dir

        random.seed(opt.manualSeed)
        np.random.seed(opt.manualSeed)
        torch.manual_seed(opt.manualSeed)

        cudnn.benchmark = True

        if torch.cuda.is_available() and not opt.cuda:
            print("WARNING: You have a CUDA device, so you should probably run with --cuda")

        train_dataset = wordDataset(128, opt.alphabet, opt.imgH, opt.imgW, seed=1)
        assert train_dataset
        sampler = None
        train_loader = torch.utils.data.DataLoader(
            train_dataset, batch_size=opt.batchSize, shuffle=True, sampler=sampler,
            num_workers=int(opt.workers), collate_fn=alignCollate())
        test_dataset = wordDataset(32, opt.alphabet, opt.imgH, opt.imgW, seed=2)

        nclass = len(opt.alphabet) + 1
        nc = 1

        converter = strLabelConverter(opt.alphabet)
        criterion = CTCLoss()

        crnn = CRNN(opt.imgH, nc, nclass, opt.nh)
        crnn.apply(weights_init)
        if opt.pretrained != '':
            print('loading pretrained model from %s' % opt.pretrained)
            crnn.load_state_dict(torch.load(opt.pretrained))

        image = torch.FloatTensor(opt.batchSize, 3, opt.imgH, opt.imgH)
        text = torch.IntTensor(opt.batchSize * 5)
        length = torch.IntTensor(opt.batchSize)

        if opt.cuda:
            crnn.cuda()
            crnn = torch.nn.DataParallel(crnn, device_ids=range(opt.ngpu))
            image = image.cuda()
            criterion = criterion.cuda()

        image = Variable(image)
        text = Variable(text)
        length = Variable(length)

        # loss averager
        loss_avg = averager()

        # setup optimizer
        if opt.adam:
            optimizer = optim.Adam(crnn.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
        elif opt.adadelta:
            optimizer = optim.Adadelta(crnn.parameters())
        else:
            optimizer = optim.RMSprop(crnn.parameters(), lr=opt.lr)

        last_path, accuracy = None, 0.0
        for epoch in range(opt.nepoch):
            train_iter = iter(train_loader)
            i = 0
            while i < len(train_loader):
                for p in crnn.parameters():
                    p.requires_grad = True
                crnn.train()

                cost = trainBatch(crnn, criterion, optimizer)
                loss_avg.add(cost)
                i += 1

                if i % opt.displayInterval == 0:
                    print('[%d/%d][%d/%d] Loss: %f' % (epoch, opt.nepoch, i, len(train_loader), loss_avg.val()))
                    loss_avg.reset()

                if i % opt.valInterval == 0:
                    accuracy = val(crnn, test_dataset, criterion)

                # do checkpointing
                if i % opt.saveInterval == 0:
                    last_path = '{0}/netCRNN_{1}_{2}.pth'.format(opt.expr_dir, epoch, i)
                    torch.save(crnn.state_dict(), last_path)

        pred = demo(last_path, test_dataset[0])
    print('done: val accuracy %.4f, demo %s' % (accuracy, pred))
