"""Trains an ODE-Net classifier on digit images: a convolutional downsampling stem, one ODEBlock whose hidden state
is integrated from t=0 to t=1 by an adaptive Dormand-Prince solver through an ODE function of time-concatenated
convolutions with GroupNorm, then pooling and a linear head; with SGD and a piecewise-constant learning rate in one
infinite loop over the training batches, counting the forward and backward function evaluations (NFE), and every
epoch measuring train and test accuracy under torch.no_grad() and saving the model when the test accuracy improves.

Modeled on: rtqichen/torchdiffeq, examples/odenet_mnist.py
(https://github.com/rtqichen/torchdiffeq/blob/657943acefa826ef04c025ebeb1ff5e9d60dc268/examples/odenet_mnist.py),
with the solver standing in for torchdiffeq's odeint (torchdiffeq/_impl/dopri5.py, rk_common.py, misc.py:
https://github.com/rtqichen/torchdiffeq/tree/657943acefa826ef04c025ebeb1ff5e9d60dc268/torchdiffeq/_impl).

Kept: the module-level `parser.parse_args()` with `--gpu` (default 0), `--tol`, `--network`,
`--downsampling-method`, `--data_aug`, `--save`; `device = torch.device('cuda:' + str(args.gpu) if
torch.cuda.is_available() else 'cpu')` set inside `if __name__ == '__main__':` and read as a global by the
module-level `accuracy()`; the `ODEBlock`'s `self.integration_time = torch.tensor([0, 1]).float()` made on the host
in `__init__` and re-bound with `.type_as(x)` in every forward (so it follows the input's device), `odeint(...,
rtol=args.tol, atol=args.tol)` returning `out[1]`; `ConcatConv2d` building `tt = torch.ones_like(x[:, :1, :, :]) *
t`; the `nfe` counter property and setter; `Flatten` computing its size with `torch.prod(torch.tensor(x.shape[1:]))
.item()` on the host; the model assembled with `nn.Sequential(...).to(device)` and `criterion =
nn.CrossEntropyLoss().to(device)`; SGD made after the move, its lr set per iteration from `learning_rate_with_decay`;
`inf_generator` over the train loader, `x = x.to(device)`, `y = y.to(device)`; the NFE read and reset around
`loss.backward()`; the RunningAverageMeters; `accuracy()` moving `x.to(device)`, one-hot labels made with numpy from
`y.numpy()`, and `np.argmax(model(x).cpu().detach().numpy(), axis=1)`, called inside `torch.no_grad()` (without
`model.eval()`: GroupNorm has no running statistics); `torch.save({'state_dict': model.state_dict(), 'args': args},
...)` when `val_acc > best_acc`; the logger (`get_logger` logging the script itself, the args, the model and the
epoch lines); `drop_last=True` loaders with `num_workers=2`.
Changed for no torchdiffeq, torchvision or downloads: `from torchdiffeq import odeint` is a small adaptive
Dormand-Prince `odeint(func, y0, t, rtol, atol)` in this file (initial step selection, error-ratio step control,
FSAL, the state and the times on the inputs' device); MNIST is a synthetic 16x16 digit dataset (a fixed stroke
template per class, shifted and noised), ToTensor/RandomCrop(padding) are tensor stand-ins; `--adjoint` is left out
(it would import torchdiffeq's odeint_adjoint). Changed to run here: the arguments are an explicit list with `--save`
a temporary folder; at the end the epoch lines are read back from the log file and printed (the logger writes to
stderr), and the logging handlers are removed.
Shrunk: 16 channels instead of 64 (GroupNorm groups min(32, dim)); 320 training and 160 test images, batch 32, test
batch 160; 2 epochs with decay boundaries at epochs 1 and 1.5 instead of 160 epochs with boundaries 60, 100, 140;
lr 0.1 (scaled by batch/128 as written); tol 1e-3 as the default.
"""
import argparse
import logging
import math
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument('--network', type=str, choices=['resnet', 'odenet'], default='odenet')
parser.add_argument('--tol', type=float, default=1e-3)
parser.add_argument('--downsampling-method', type=str, default='conv', choices=['conv', 'res'])
parser.add_argument('--nepochs', type=int, default=160)
parser.add_argument('--data_aug', type=eval, default=True, choices=[True, False])
parser.add_argument('--lr', type=float, default=0.1)
parser.add_argument('--batch_size', type=int, default=128)
parser.add_argument('--test_batch_size', type=int, default=1000)

parser.add_argument('--save', type=str, default='./experiment1')
parser.add_argument('--debug', action='store_true')
parser.add_argument('--gpu', type=int, default=0)
args = parser.parse_args(['--nepochs', '2', '--batch_size', '32', '--test_batch_size', '160',
                          '--save', os.path.join(tempfile.mkdtemp(), 'experiment1')])


# ----------------------------------------------------------------------------- stand-in for torchdiffeq.odeint

_DOPRI5_C = [1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1.]
_DOPRI5_A = [
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
_DOPRI5_B_ERR = [35 / 384 - 1951 / 21600, 0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
                 -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60]


def _rms_norm(tensor):
    return tensor.pow(2).mean().sqrt()


def odeint(func, y0, t, rtol=1e-7, atol=1e-9, method='dopri5'):
    """Solve dy/dt = func(t, y) from t[0] through every time in t; the solution at each, stacked (like torchdiffeq)."""
    assert method == 'dopri5'
    solution = [y0]
    t0 = t[0]
    f0 = func(t0, y0)
    # initial step (torchdiffeq's _select_initial_step)
    scale = atol + y0.abs() * rtol
    d0, d1 = _rms_norm(y0 / scale).item(), _rms_norm(f0 / scale).item()
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    f1 = func(t0 + h0, y0 + h0 * f0)
    d2 = _rms_norm((f1 - f0) / scale).item() / h0
    h1 = max(1e-6, h0 * 1e-3) if max(d1, d2) <= 1e-15 else (0.01 / max(d1, d2)) ** (1. / 5)
    dt = min(100 * h0, h1)

    y, f, t_now = y0, f0, 0.0
    for i in range(1, len(t)):
        t_end = (t[i] - t0).item()
        while t_now < t_end:
            dt = min(dt, t_end - t_now)
            k = [f]
            for c, a in zip(_DOPRI5_C, _DOPRI5_A):
                y_stage = y + dt * sum(a_j * k_j for a_j, k_j in zip(a, k) if a_j != 0)
                k.append(func(t0 + (t_now + c * dt), y_stage))
            y_new = y_stage  # the last stage is the 5th-order solution (FSAL)
            y_err = dt * sum(b * k_j for b, k_j in zip(_DOPRI5_B_ERR, k) if b != 0)
            error_tol = atol + rtol * torch.max(y.abs(), y_new.abs())
            error_ratio = _rms_norm(y_err / error_tol).item()
            if error_ratio <= 1:
                y, f, t_now = y_new, k[-1], t_now + dt
            factor = 10. if error_ratio == 0 else min(10., max(0.2, 0.9 * error_ratio ** (-1. / 5)))
            dt = dt * factor
        solution.append(y)
    return torch.stack(solution)


# ----------------------------------------------------------------------------- odenet_mnist.py

def conv3x3(in_planes, out_planes, stride=1):
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    """1x1 convolution"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


def norm(dim):
    return nn.GroupNorm(min(32, dim), dim)


class ResBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(ResBlock, self).__init__()
        self.norm1 = norm(inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.norm2 = norm(planes)
        self.conv2 = conv3x3(planes, planes)

    def forward(self, x):
        shortcut = x

        out = self.relu(self.norm1(x))

        if self.downsample is not None:
            shortcut = self.downsample(out)

        out = self.conv1(out)
        out = self.norm2(out)
        out = self.relu(out)
        out = self.conv2(out)

        return out + shortcut


class ConcatConv2d(nn.Module):

    def __init__(self, dim_in, dim_out, ksize=3, stride=1, padding=0, dilation=1, groups=1, bias=True, transpose=False):
        super(ConcatConv2d, self).__init__()
        module = nn.ConvTranspose2d if transpose else nn.Conv2d
        self._layer = module(
            dim_in + 1, dim_out, kernel_size=ksize, stride=stride, padding=padding, dilation=dilation, groups=groups,
            bias=bias
        )

    def forward(self, t, x):
        tt = torch.ones_like(x[:, :1, :, :]) * t
        ttx = torch.cat([tt, x], 1)
        return self._layer(ttx)


class ODEfunc(nn.Module):

    def __init__(self, dim):
        super(ODEfunc, self).__init__()
        self.norm1 = norm(dim)
        self.relu = nn.ReLU(inplace=True)
        self.conv1 = ConcatConv2d(dim, dim, 3, 1, 1)
        self.norm2 = norm(dim)
        self.conv2 = ConcatConv2d(dim, dim, 3, 1, 1)
        self.norm3 = norm(dim)
        self.nfe = 0

    def forward(self, t, x):
        self.nfe += 1
        out = self.norm1(x)
        out = self.relu(out)
        out = self.conv1(t, out)
        out = self.norm2(out)
        out = self.relu(out)
        out = self.conv2(t, out)
        out = self.norm3(out)
        return out


class ODEBlock(nn.Module):

    def __init__(self, odefunc):
        super(ODEBlock, self).__init__()
        self.odefunc = odefunc
        self.integration_time = torch.tensor([0, 1]).float()

    def forward(self, x):
        self.integration_time = self.integration_time.type_as(x)
        out = odeint(self.odefunc, x, self.integration_time, rtol=args.tol, atol=args.tol)
        return out[1]

    @property
    def nfe(self):
        return self.odefunc.nfe

    @nfe.setter
    def nfe(self, value):
        self.odefunc.nfe = value


class Flatten(nn.Module):

    def __init__(self):
        super(Flatten, self).__init__()

    def forward(self, x):
        shape = torch.prod(torch.tensor(x.shape[1:])).item()
        return x.view(-1, shape)


class RunningAverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self, momentum=0.99):
        self.momentum = momentum
        self.reset()

    def reset(self):
        self.val = None
        self.avg = 0

    def update(self, val):
        if self.val is None:
            self.avg = val
        else:
            self.avg = self.avg * self.momentum + val * (1 - self.momentum)
        self.val = val


class ToTensor:
    """transforms.ToTensor() for the uint8 HxW digits."""

    def __call__(self, img):
        return img.float().div(255).unsqueeze(0)


class RandomCrop:
    """transforms.RandomCrop(size, padding) on a CxHxW tensor (zero padding)."""

    def __init__(self, size, padding):
        self.size, self.padding = size, padding

    def __call__(self, img):
        img = nn.functional.pad(img, [self.padding] * 4)
        top, left = torch.randint(0, 2 * self.padding + 1, (2,)).tolist()
        return img[:, top:top + self.size, left:left + self.size]


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class MNIST(Dataset):
    """Stands in for torchvision.datasets.MNIST: synthetic 16x16 digits, 10 classes."""

    def __init__(self, root, train=True, download=False, transform=None):
        rng = np.random.RandomState(77)
        templates = []
        for _ in range(10):
            tpl = np.zeros((16, 16), dtype=np.float32)
            for _ in range(2):
                r0, c0 = rng.randint(3, 13, 2)
                dr, dc = rng.randint(-1, 2, 2)
                for k in range(7):
                    r, c = np.clip(r0 + k * dr, 2, 13), np.clip(c0 + k * dc, 2, 13)
                    tpl[r - 1:r + 2, c - 1:c + 1] = 1.0
            templates.append(tpl)
        n = 320 if train else 160
        rng = np.random.RandomState(5 if train else 6)
        labels = np.arange(n) % 10
        rng.shuffle(labels)
        images = [np.clip(np.roll(templates[c], tuple(rng.randint(-1, 2, 2)), axis=(0, 1))
                          + rng.normal(0, 0.2, (16, 16)), 0, 1) for c in labels]
        self.data = torch.from_numpy((np.stack(images) * 255).astype(np.uint8))
        self.targets = torch.from_numpy(labels.astype(np.int64))
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def get_mnist_loaders(data_aug=False, batch_size=128, test_batch_size=1000, perc=1.0):
    if data_aug:
        transform_train = Compose([
            ToTensor(),
            RandomCrop(16, padding=2),
        ])
    else:
        transform_train = Compose([
            ToTensor(),
        ])

    transform_test = Compose([
        ToTensor(),
    ])

    train_loader = DataLoader(
        MNIST(root='.data/mnist', train=True, download=True, transform=transform_train), batch_size=batch_size,
        shuffle=True, num_workers=2, drop_last=True
    )

    train_eval_loader = DataLoader(
        MNIST(root='.data/mnist', train=True, download=True, transform=transform_test),
        batch_size=test_batch_size, shuffle=False, num_workers=2, drop_last=True
    )

    test_loader = DataLoader(
        MNIST(root='.data/mnist', train=False, download=True, transform=transform_test),
        batch_size=test_batch_size, shuffle=False, num_workers=2, drop_last=True
    )

    return train_loader, test_loader, train_eval_loader


def inf_generator(iterable):
    """Allows training with DataLoaders in a single infinite loop:
        for i, (x, y) in enumerate(inf_generator(train_loader)):
    """
    iterator = iterable.__iter__()
    while True:
        try:
            yield iterator.__next__()
        except StopIteration:
            iterator = iterable.__iter__()


def learning_rate_with_decay(batch_size, batch_denom, batches_per_epoch, boundary_epochs, decay_rates):
    initial_learning_rate = args.lr * batch_size / batch_denom

    boundaries = [int(batches_per_epoch * epoch) for epoch in boundary_epochs]
    vals = [initial_learning_rate * decay for decay in decay_rates]

    def learning_rate_fn(itr):
        lt = [itr < b for b in boundaries] + [True]
        i = np.argmax(lt)
        return vals[i]

    return learning_rate_fn


def one_hot(x, K):
    return np.array(x[:, None] == np.arange(K)[None, :], dtype=int)


def accuracy(model, dataset_loader):
    total_correct = 0
    for x, y in dataset_loader:
        x = x.to(device)
        y = one_hot(np.array(y.numpy()), 10)

        target_class = np.argmax(y, axis=1)
        predicted_class = np.argmax(model(x).cpu().detach().numpy(), axis=1)
        total_correct += np.sum(predicted_class == target_class)
    return total_correct / len(dataset_loader.dataset)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def makedirs(dirname):
    if not os.path.exists(dirname):
        os.makedirs(dirname)


def get_logger(logpath, filepath, package_files=[], displaying=True, saving=True, debug=False):
    logger = logging.getLogger()
    if debug:
        level = logging.DEBUG
    else:
        level = logging.INFO
    logger.setLevel(level)
    if saving:
        info_file_handler = logging.FileHandler(logpath, mode="a")
        info_file_handler.setLevel(level)
        logger.addHandler(info_file_handler)
    if displaying:
        console_handler = logging.StreamHandler()
        console_handler.setLevel(level)
        logger.addHandler(console_handler)
    logger.info(filepath)
    with open(filepath, "r") as f:
        logger.info(f.read())

    for f in package_files:
        logger.info(f)
        with open(f, "r") as package_f:
            logger.info(package_f.read())

    return logger


if __name__ == '__main__':
    torch.manual_seed(0)
    np.random.seed(0)

    makedirs(args.save)
    logger = get_logger(logpath=os.path.join(args.save, 'logs'), filepath=os.path.abspath(__file__))
    logger.info(args)

    device = torch.device('cuda:' + str(args.gpu) if torch.cuda.is_available() else 'cpu')

    is_odenet = args.network == 'odenet'

    if args.downsampling_method == 'conv':
        downsampling_layers = [
            nn.Conv2d(1, 16, 3, 1),
            norm(16),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 16, 4, 2, 1),
            norm(16),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 16, 4, 2, 1),
        ]
    elif args.downsampling_method == 'res':
        downsampling_layers = [
            nn.Conv2d(1, 16, 3, 1),
            ResBlock(16, 16, stride=2, downsample=conv1x1(16, 16, 2)),
            ResBlock(16, 16, stride=2, downsample=conv1x1(16, 16, 2)),
        ]

    feature_layers = [ODEBlock(ODEfunc(16))] if is_odenet else [ResBlock(16, 16) for _ in range(6)]
    fc_layers = [norm(16), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)), Flatten(), nn.Linear(16, 10)]

    model = nn.Sequential(*downsampling_layers, *feature_layers, *fc_layers).to(device)

    logger.info(model)
    logger.info('Number of parameters: {}'.format(count_parameters(model)))

    criterion = nn.CrossEntropyLoss().to(device)

    train_loader, test_loader, train_eval_loader = get_mnist_loaders(
        args.data_aug, args.batch_size, args.test_batch_size
    )

    data_gen = inf_generator(train_loader)
    batches_per_epoch = len(train_loader)

    lr_fn = learning_rate_with_decay(
        args.batch_size, batch_denom=128, batches_per_epoch=batches_per_epoch, boundary_epochs=[1, 1.5, 1.75],
        decay_rates=[1, 0.1, 0.01, 0.001]
    )

    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    best_acc = 0
    batch_time_meter = RunningAverageMeter()
    f_nfe_meter = RunningAverageMeter()
    b_nfe_meter = RunningAverageMeter()
    end = time.time()

    for itr in range(args.nepochs * batches_per_epoch):

        for param_group in optimizer.param_groups:
            param_group['lr'] = lr_fn(itr)

        optimizer.zero_grad()
        x, y = data_gen.__next__()
        x = x.to(device)
        y = y.to(device)
        logits = model(x)
        loss = criterion(logits, y)

        if is_odenet:
            nfe_forward = feature_layers[0].nfe
            feature_layers[0].nfe = 0

        loss.backward()
        optimizer.step()

        if is_odenet:
            nfe_backward = feature_layers[0].nfe
            feature_layers[0].nfe = 0

        batch_time_meter.update(time.time() - end)
        if is_odenet:
            f_nfe_meter.update(nfe_forward)
            b_nfe_meter.update(nfe_backward)
        end = time.time()

        if itr % batches_per_epoch == 0:
            with torch.no_grad():
                train_acc = accuracy(model, train_eval_loader)
                val_acc = accuracy(model, test_loader)
                if val_acc > best_acc:
                    torch.save({'state_dict': model.state_dict(), 'args': args}, os.path.join(args.save, 'model.pth'))
                    best_acc = val_acc
                logger.info(
                    "Epoch {:04d} | Time {:.3f} ({:.3f}) | NFE-F {:.1f} | NFE-B {:.1f} | "
                    "Train Acc {:.4f} | Test Acc {:.4f}".format(
                        itr // batches_per_epoch, batch_time_meter.val, batch_time_meter.avg, f_nfe_meter.avg,
                        b_nfe_meter.avg, train_acc, val_acc
                    )
                )

    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    with open(os.path.join(args.save, 'logs')) as f:
        for line in f:
            if line.startswith('Epoch ') or line.startswith('Number of parameters'):
                print(line.split(' | Time')[0] + (' |' + line.split(') |', 1)[1] if ') |' in line else ''), end='')
    print('done: last loss {:.4f}, best test acc {:.4f}, saved {}'.format(
        loss.item(), best_acc, os.path.exists(os.path.join(args.save, 'model.pth'))))
