"""Trains LSTNet (CNN + GRU + skip-GRU + highway) to forecast a multivariate series, saves the best model, reloads it.

Modeled on: laiguokun/LSTNet, main.py, utils.py, Optim.py and models/LSTNet.py
(https://github.com/laiguokun/LSTNet/blob/001bec3916352c02a773a5570691288c0e52b4f9/main.py,
https://github.com/laiguokun/LSTNet/blob/8d9b2064956a8eb28593fe4583b4ad7b613d8886/utils.py,
https://github.com/laiguokun/LSTNet/blob/bc61d033c5ae597db3f6e533d50c21aea84be91e/Optim.py,
https://github.com/laiguokun/LSTNet/blob/001bec3916352c02a773a5570691288c0e52b4f9/models/LSTNet.py).

Kept: `args.cuda = args.gpu is not None` and `torch.cuda.set_device(args.gpu)` under it; the seeding block with the
"you have a CUDA device" warning; `Data_utility(..., args.cuda, ...)` that builds the whole dataset as host tensors,
computes rse/rae on the host, then moves only `self.scale` with `.cuda()` when cuda (wrapped in `Variable`), and whose
`get_batches` generator moves each batch with `X.cuda()`/`Y.cuda()` under `self.cuda`; the model keeps
`self.use_cuda`; `model.cuda()` and the three criteria `.cuda()` only under `args.cuda`; the losses scaled with
`data.scale.expand(...)`; the Optim wrapper that sums `math.pow(param.grad.data.norm(), 2)` on the host and rescales
gradients in place; `evaluate` with `model.eval()` but no `no_grad` (as the author has it), concatenating outputs and
reading them with `.data.cpu().numpy()`; saving the whole model with `torch.save(model, f)` when the validation rse
improves, a test every 5 epochs, and reloading it with `torch.load(f)` (no map_location) for the final test.

Shrunk: a synthetic 8-series daily-periodic signal instead of the electricity/solar files, window 48, horizon 3,
hidden sizes 16/16/4, 5 epochs; args as a SimpleNamespace (gpu 0 when CUDA is available, else None); `.data[0]`
replaced by `.item()` and `size_average=False` by `reduction="sum"` for today's torch; the skip length made an int
(the author's float division breaks `view` on Python 3); the whole-model load passes `weights_only=False` (today's
default refuses pickled modules); the model file lives in a temporary directory.
"""
import math
import os
import random
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable


# ----------------------------------------------------------------------------- utils.py


def normal_std(x):
    return x.std() * np.sqrt((len(x) - 1.) / (len(x)))


def synthetic_series(n, m, seed):
    """Hourly load-like data: a daily cycle with a per-series phase, a weekly ripple, noise, all positive."""
    rs = np.random.RandomState(seed)
    t = np.arange(n)[:, None]
    phase = rs.uniform(0, 2 * np.pi, m)[None]
    level = rs.uniform(2, 5, m)[None]
    daily = np.sin(2 * np.pi * t / 24 + phase)
    weekly = 0.3 * np.sin(2 * np.pi * t / 168 + 2 * phase)
    return level + daily + weekly + 0.1 * rs.randn(n, m)


class Data_utility(object):
    # train and valid is the ratio of training set and validation set. test = 1 - train - valid
    def __init__(self, rawdat, train, valid, cuda, horizon, window, normalize=2):
        self.cuda = cuda
        self.P = window
        self.h = horizon
        self.rawdat = rawdat
        self.dat = np.zeros(self.rawdat.shape)
        self.n, self.m = self.dat.shape
        self.normalize = 2
        self.scale = np.ones(self.m)
        self._normalized(normalize)
        self._split(int(train * self.n), int((train + valid) * self.n), self.n)

        self.scale = torch.from_numpy(self.scale).float()
        tmp = self.test[1] * self.scale.expand(self.test[1].size(0), self.m)

        if self.cuda:
            self.scale = self.scale.cuda()
        self.scale = Variable(self.scale)

        self.rse = normal_std(tmp)
        self.rae = torch.mean(torch.abs(tmp - torch.mean(tmp)))

    def _normalized(self, normalize):
        # normalized by the maximum value of entire matrix.
        if normalize == 0:
            self.dat = self.rawdat

        if normalize == 1:
            self.dat = self.rawdat / np.max(self.rawdat)

        # normlized by the maximum value of each row(sensor).
        if normalize == 2:
            for i in range(self.m):
                self.scale[i] = np.max(np.abs(self.rawdat[:, i]))
                self.dat[:, i] = self.rawdat[:, i] / np.max(np.abs(self.rawdat[:, i]))

    def _split(self, train, valid, test):
        train_set = range(self.P + self.h - 1, train)
        valid_set = range(train, valid)
        test_set = range(valid, self.n)
        self.train = self._batchify(train_set, self.h)
        self.valid = self._batchify(valid_set, self.h)
        self.test = self._batchify(test_set, self.h)

    def _batchify(self, idx_set, horizon):
        n = len(idx_set)
        X = torch.zeros((n, self.P, self.m))
        Y = torch.zeros((n, self.m))

        for i in range(n):
            end = idx_set[i] - self.h + 1
            start = end - self.P
            X[i, :, :] = torch.from_numpy(self.dat[start:end, :])
            Y[i, :] = torch.from_numpy(self.dat[idx_set[i], :])

        return [X, Y]

    def get_batches(self, inputs, targets, batch_size, shuffle=True):
        length = len(inputs)
        if shuffle:
            index = torch.randperm(length)
        else:
            index = torch.LongTensor(range(length))
        start_idx = 0
        while start_idx < length:
            end_idx = min(length, start_idx + batch_size)
            excerpt = index[start_idx:end_idx]
            X = inputs[excerpt]
            Y = targets[excerpt]
            if self.cuda:
                X = X.cuda()
                Y = Y.cuda()
            yield Variable(X), Variable(Y)
            start_idx += batch_size


# ----------------------------------------------------------------------------- models/LSTNet.py


class Model(nn.Module):
    def __init__(self, args, data):
        super(Model, self).__init__()
        self.use_cuda = args.cuda
        self.P = args.window
        self.m = data.m
        self.hidR = args.hidRNN
        self.hidC = args.hidCNN
        self.hidS = args.hidSkip
        self.Ck = args.CNN_kernel
        self.skip = args.skip
        self.pt = (self.P - self.Ck) // self.skip
        self.hw = args.highway_window
        self.conv1 = nn.Conv2d(1, self.hidC, kernel_size=(self.Ck, self.m))
        self.GRU1 = nn.GRU(self.hidC, self.hidR)
        self.dropout = nn.Dropout(p=args.dropout)
        if self.skip > 0:
            self.GRUskip = nn.GRU(self.hidC, self.hidS)
            self.linear1 = nn.Linear(self.hidR + self.skip * self.hidS, self.m)
        else:
            self.linear1 = nn.Linear(self.hidR, self.m)
        if self.hw > 0:
            self.highway = nn.Linear(self.hw, 1)
        self.output = None
        if args.output_fun == 'sigmoid':
            self.output = F.sigmoid
        if args.output_fun == 'tanh':
            self.output = F.tanh

    def forward(self, x):
        batch_size = x.size(0)

        # CNN
        c = x.view(-1, 1, self.P, self.m)
        c = F.relu(self.conv1(c))
        c = self.dropout(c)
        c = torch.squeeze(c, 3)

        # RNN
        r = c.permute(2, 0, 1).contiguous()
        _, r = self.GRU1(r)
        r = self.dropout(torch.squeeze(r, 0))

        # skip-rnn
        if self.skip > 0:
            s = c[:, :, int(-self.pt * self.skip):].contiguous()
            s = s.view(batch_size, self.hidC, self.pt, self.skip)
            s = s.permute(2, 0, 3, 1).contiguous()
            s = s.view(self.pt, batch_size * self.skip, self.hidC)
            _, s = self.GRUskip(s)
            s = s.view(batch_size, self.skip * self.hidS)
            s = self.dropout(s)
            r = torch.cat((r, s), 1)

        res = self.linear1(r)

        # highway
        if self.hw > 0:
            z = x[:, -self.hw:, :]
            z = z.permute(0, 2, 1).contiguous().view(-1, self.hw)
            z = self.highway(z)
            z = z.view(-1, self.m)
            res = res + z

        if self.output:
            res = self.output(res)
        return res


# ----------------------------------------------------------------------------- Optim.py


class Optim(object):
    def _makeOptimizer(self):
        if self.method == 'sgd':
            self.optimizer = optim.SGD(self.params, lr=self.lr)
        elif self.method == 'adagrad':
            self.optimizer = optim.Adagrad(self.params, lr=self.lr)
        elif self.method == 'adadelta':
            self.optimizer = optim.Adadelta(self.params, lr=self.lr)
        elif self.method == 'adam':
            self.optimizer = optim.Adam(self.params, lr=self.lr)
        else:
            raise RuntimeError("Invalid optim method: " + self.method)

    def __init__(self, params, method, lr, max_grad_norm, lr_decay=1, start_decay_at=None):
        self.params = list(params)  # careful: params may be a generator
        self.last_ppl = None
        self.lr = lr
        self.max_grad_norm = max_grad_norm
        self.method = method
        self.lr_decay = lr_decay
        self.start_decay_at = start_decay_at
        self.start_decay = False

        self._makeOptimizer()

    def step(self):
        # Compute gradients norm.
        grad_norm = 0
        for param in self.params:
            grad_norm += math.pow(param.grad.data.norm(), 2)

        grad_norm = math.sqrt(grad_norm)
        if grad_norm > 0:
            shrinkage = self.max_grad_norm / grad_norm
        else:
            shrinkage = 1.

        for param in self.params:
            if shrinkage < 1:
                param.grad.data.mul_(shrinkage)

        self.optimizer.step()
        return grad_norm


# ----------------------------------------------------------------------------- main.py


def evaluate(data, X, Y, model, evaluateL2, evaluateL1, batch_size):
    model.eval()
    total_loss = 0
    total_loss_l1 = 0
    n_samples = 0
    predict = None
    test = None

    for X, Y in data.get_batches(X, Y, batch_size, False):
        output = model(X)
        if predict is None:
            predict = output
            test = Y
        else:
            predict = torch.cat((predict, output))
            test = torch.cat((test, Y))

        scale = data.scale.expand(output.size(0), data.m)
        total_loss += evaluateL2(output * scale, Y * scale).item()
        total_loss_l1 += evaluateL1(output * scale, Y * scale).item()
        n_samples += (output.size(0) * data.m)
    rse = math.sqrt(total_loss / n_samples) / data.rse
    rae = (total_loss_l1 / n_samples) / data.rae

    predict = predict.data.cpu().numpy()
    Ytest = test.data.cpu().numpy()
    sigma_p = (predict).std(axis=0)
    sigma_g = (Ytest).std(axis=0)
    mean_p = predict.mean(axis=0)
    mean_g = Ytest.mean(axis=0)
    index = (sigma_g != 0)
    correlation = ((predict - mean_p) * (Ytest - mean_g)).mean(axis=0) / (sigma_p * sigma_g)
    correlation = (correlation[index]).mean()
    return rse, rae, correlation


def train(data, X, Y, model, criterion, optim, batch_size):
    model.train()
    total_loss = 0
    n_samples = 0
    for X, Y in data.get_batches(X, Y, batch_size, True):
        model.zero_grad()
        output = model(X)
        scale = data.scale.expand(output.size(0), data.m)
        loss = criterion(output * scale, Y * scale)
        loss.backward()
        grad_norm = optim.step()
        total_loss += loss.item()
        n_samples += (output.size(0) * data.m)
    return total_loss / n_samples


def main(save_dir):
    args = SimpleNamespace(
        model='LSTNet', hidCNN=16, hidRNN=16, window=48, CNN_kernel=6, highway_window=12, clip=10.,
        epochs=5, batch_size=32, dropout=0.2, seed=54321,
        gpu=0 if torch.cuda.is_available() else None,
        log_interval=2000, save=os.path.join(save_dir, 'model.pt'), cuda=True, optim='adam', lr=0.005,
        horizon=3, skip=24, hidSkip=4, L1Loss=True, normalize=2, output_fun='sigmoid',
    )

    args.cuda = args.gpu is not None
    if args.cuda:
        torch.cuda.set_device(args.gpu)
    # Set the random seed manually for reproducibility.
    torch.manual_seed(args.seed)
    if torch.cuda.is_available():
        if not args.cuda:
            print("WARNING: You have a CUDA device, so you should probably run with --cuda")
        else:
            torch.cuda.manual_seed(args.seed)

    Data = Data_utility(synthetic_series(600, 8, seed=7), 0.6, 0.2, args.cuda, args.horizon, args.window,
                        args.normalize)
    print("{:.4f}".format(float(Data.rse)))

    model = Model(args, Data)

    if args.cuda:
        model.cuda()

    nParams = sum([p.nelement() for p in model.parameters()])
    print('* number of parameters: %d' % nParams)

    if args.L1Loss:
        criterion = nn.L1Loss(reduction="sum")
    else:
        criterion = nn.MSELoss(reduction="sum")
    evaluateL2 = nn.MSELoss(reduction="sum")
    evaluateL1 = nn.L1Loss(reduction="sum")
    if args.cuda:
        criterion = criterion.cuda()
        evaluateL1 = evaluateL1.cuda()
        evaluateL2 = evaluateL2.cuda()

    best_val = 10000000
    optim = Optim(model.parameters(), args.optim, args.lr, args.clip)

    print('begin training')
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        train_loss = train(Data, Data.train[0], Data.train[1], model, criterion, optim, args.batch_size)
        val_loss, val_rae, val_corr = evaluate(Data, Data.valid[0], Data.valid[1], model, evaluateL2, evaluateL1,
                                               args.batch_size)
        print('| end of epoch {:3d} | train_loss {:5.4f} | valid rse {:5.4f} | valid rae {:5.4f} | valid corr  {:5.4f}'
              .format(epoch, train_loss, val_loss, val_rae, val_corr))
        # Save the model if the validation loss is the best we've seen so far.

        if val_loss < best_val:
            with open(args.save, 'wb') as f:
                torch.save(model, f)
            best_val = val_loss
        if epoch % 5 == 0:
            test_acc, test_rae, test_corr = evaluate(Data, Data.test[0], Data.test[1], model, evaluateL2, evaluateL1,
                                                     args.batch_size)
            print("test rse {:5.4f} | test rae {:5.4f} | test corr {:5.4f}".format(test_acc, test_rae, test_corr))

    # Load the best saved model.
    with open(args.save, 'rb') as f:
        model = torch.load(f, weights_only=False)
    test_acc, test_rae, test_corr = evaluate(Data, Data.test[0], Data.test[1], model, evaluateL2, evaluateL1,
                                             args.batch_size)
    print("test rse {:5.4f} | test rae {:5.4f} | test corr {:5.4f}".format(test_acc, test_rae, test_corr))


if __name__ == '__main__':
    random.seed(0)
    np.random.seed(0)
    with tempfile.TemporaryDirectory() as save_dir:
        main(save_dir)
