"""Trains a pre-activation ResNet-18 on CIFAR-10-shaped images with mixup (each minibatch is blended with a shuffled
copy of itself, lambda ~ Beta(alpha, alpha), and the loss is the same blend of the two cross-entropies), under SGD with
momentum, weight decay and a step learning-rate schedule; each epoch it evaluates on the test set, checkpoints the
whole network (with the accuracy, the epoch and the CPU RNG state) when the accuracy improves or at the last epoch,
and appends a row to a CSV log; a second run then resumes from that checkpoint and trains one more epoch.

Modeled on: facebookresearch/mixup-cifar10, train.py, models/resnet.py, models/lenet.py and utils.py
(https://github.com/facebookresearch/mixup-cifar10/blob/eaff31ab397a90fbc0a4aac71fb5311144b3608b/train.py,
https://github.com/facebookresearch/mixup-cifar10/blob/eaff31ab397a90fbc0a4aac71fb5311144b3608b/models/resnet.py).

Kept: module-level `use_cuda = torch.cuda.is_available()` (no flag); the model made on the host (fresh from
`models.__dict__[args.model]()`, or on `--resume` the pickled network `checkpoint['net']` plus `best_acc`,
`start_epoch` and `torch.set_rng_state(checkpoint['rng_state'])`); then `if use_cuda:` `net.cuda()`,
`net = torch.nn.DataParallel(net)`, `print(torch.cuda.device_count())` and `cudnn.benchmark = True`, with SGD
built after the move; `train` with `net.train()`, `inputs, targets = inputs.cuda(), targets.cuda()` under
`if use_cuda:`, `mixup_data(x, y, alpha, use_cuda)` drawing lambda with `np.random.beta` and the permutation with
`torch.randperm(batch_size).cuda()` when `use_cuda` (else on the host), `map(Variable, ...)` on the mixed inputs and
both targets, `mixup_criterion`, `predicted.eq(targets_a.data).cpu().sum().float()` blended with lambda for the
accuracy; `test` with `net.eval()`, the same `.cuda()` calls, `Variable(inputs, volatile=True)` (which no longer
turns off autograd: there is no `torch.no_grad()`, as in the original) and `predicted.eq(targets.data).cpu().sum()`;
`checkpoint` saving the whole (DataParallel-wrapped) `net` with `torch.save`, so that a resumed net is wrapped in
`DataParallel` a second time, as in the original; `adjust_learning_rate` rewriting `param_group['lr']`.

Changed for a current PyTorch: `loss.data[0]` is `loss.item()`; `torch.load` of the pickled network passes
`weights_only=False`.
Changed to run here: torchvision's CIFAR-10 download and transforms are replaced by a small synthetic 10-class image
set (class-dependent colour patterns plus noise) whose Dataset does the random crop with 4-pixel padding, the
horizontal flip and the per-channel normalisation itself; `num_workers=0`; the module-level script is split into
`setup(argv)` (parser, data, model, moves, optimizer; it rebinds the same module globals) and `run()` (CSV log and
epoch loop) so that it can be run twice, the second time with `--resume`; `np.random.seed(args.seed)` is added and the
default seed is 1 (the original seeds nothing by default, so its output is not repeatable); the terminal progress
bar (it reads `stty size`) prints only its last line per epoch, without timings; the CSV row gets `float()` of the
two accuracy tensors and `run()` returns the last test accuracy; the best accuracy and the log's row count are printed
at the end.
Shrunk: ResNet-18 widths 8/16/32/64 instead of 64/128/256/512; 256 training and 200 test images; batch 64; 4 epochs
with the learning rate divided by 10 at epochs 2 and 3 (instead of 200 epochs with steps at 100 and 150), then 1
resumed epoch.
"""
from __future__ import print_function

import argparse
import csv
import os
import tempfile

import numpy as np
import torch
from torch.autograd import Variable
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data


# ----------------------------------------------------------------------------- models/resnet.py, models/lenet.py

def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class PreActBlock(nn.Module):
    '''Pre-activation version of the BasicBlock.'''
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(PreActBlock, self).__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes)

        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False)
            )

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        out += shortcut
        return out


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, widths=(8, 16, 32, 64)):
        super(ResNet, self).__init__()
        self.in_planes = widths[0]

        self.conv1 = conv3x3(3, widths[0])
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.layer1 = self._make_layer(block, widths[0], num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, widths[1], num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, widths[2], num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, widths[3], num_blocks[3], stride=2)
        self.linear = nn.Linear(widths[3] * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x, lin=0, lout=5):
        out = x
        if lin < 1 and lout > -1:
            out = self.conv1(out)
            out = self.bn1(out)
            out = F.relu(out)
        if lin < 2 and lout > 0:
            out = self.layer1(out)
        if lin < 3 and lout > 1:
            out = self.layer2(out)
        if lin < 4 and lout > 2:
            out = self.layer3(out)
        if lin < 5 and lout > 3:
            out = self.layer4(out)
        if lout > 4:
            out = F.avg_pool2d(out, 4)
            out = out.view(out.size(0), -1)
            out = self.linear(out)
        return out


def ResNet18():
    return ResNet(PreActBlock, [2, 2, 2, 2])


class LeNet(nn.Module):
    def __init__(self):
        super(LeNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        out = F.relu(self.conv1(x))
        out = F.max_pool2d(out, 2)
        out = F.relu(self.conv2(out))
        out = F.max_pool2d(out, 2)
        out = out.view(out.size(0), -1)
        out = F.relu(self.fc1(out))
        out = F.relu(self.fc2(out))
        out = self.fc3(out)
        return out


class _Models(object):
    """Stands in for the `models` package: `models.__dict__[name]()`."""

    def __init__(self):
        self.__dict__.update({'ResNet18': ResNet18, 'LeNet': LeNet})


models = _Models()


# ----------------------------------------------------------------------------- utils.py (progress bar) and the data

def progress_bar(current, total, msg=None):
    if current == total - 1 and msg:
        print(' [%d/%d] %s' % (current + 1, total, msg))


MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2023, 0.1994, 0.2010)


class SyntheticCIFAR10(torch.utils.data.Dataset):
    """32x32 RGB images whose class sets a colour and a stripe direction; uint8 HWC storage like CIFAR10.data."""

    def __init__(self, n, seed, train, augment):
        rng = np.random.RandomState(seed)
        self.targets = rng.randint(10, size=n).tolist()
        colours = np.random.RandomState(0).randint(40, 215, size=(10, 3))
        yy, xx = np.mgrid[0:32, 0:32]
        images = []
        for c in self.targets:
            stripes = np.sin((xx if c % 2 else yy) * (0.3 + 0.1 * (c // 2)))
            img = colours[c][None, None, :] + 30 * stripes[:, :, None] + rng.randn(32, 32, 3) * 25
            images.append(np.clip(img, 0, 255).astype(np.uint8))
        self.data = np.stack(images)
        self.train = train
        self.augment = augment
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img = torch.from_numpy(self.data[index]).permute(2, 0, 1).float().div(255)  # ToTensor
        if self.train and self.augment:
            padded = F.pad(img, (4, 4, 4, 4))  # RandomCrop(32, padding=4)
            i, j = torch.randint(0, 9, (2,)).tolist()
            img = padded[:, i:i + 32, j:j + 32]
            if torch.rand(1).item() < 0.5:  # RandomHorizontalFlip
                img = img.flip(2)
        img = (img - self.mean) / self.std  # Normalize
        return img, self.targets[index]


# ----------------------------------------------------------------------------- train.py

use_cuda = torch.cuda.is_available()

args = None
net = None
optimizer = None
criterion = None
trainloader = None
testloader = None
logname = None
best_acc = 0  # best test accuracy
start_epoch = 0  # start from epoch 0 or last checkpoint epoch


def setup(argv):
    global args, net, optimizer, criterion, trainloader, testloader, logname, best_acc, start_epoch

    parser = argparse.ArgumentParser(description='PyTorch CIFAR10 Training')
    parser.add_argument('--lr', default=0.1, type=float, help='learning rate')
    parser.add_argument('--resume', '-r', action='store_true',
                        help='resume from checkpoint')
    parser.add_argument('--model', default="ResNet18", type=str,
                        help='model type (default: ResNet18)')
    parser.add_argument('--name', default='0', type=str, help='name of run')
    parser.add_argument('--seed', default=1, type=int, help='random seed')
    parser.add_argument('--batch-size', default=64, type=int, help='batch size')
    parser.add_argument('--epoch', default=4, type=int,
                        help='total epochs to run')
    parser.add_argument('--no-augment', dest='augment', action='store_false',
                        help='use standard augmentation (default: True)')
    parser.add_argument('--decay', default=1e-4, type=float, help='weight decay')
    parser.add_argument('--alpha', default=1., type=float,
                        help='mixup interpolation coefficient (default: 1)')
    args = parser.parse_args(argv)

    best_acc = 0
    start_epoch = 0

    if args.seed != 0:
        torch.manual_seed(args.seed)
        np.random.seed(args.seed)

    # Data
    print('==> Preparing data..')
    trainset = SyntheticCIFAR10(256, seed=11, train=True, augment=args.augment)
    trainloader = torch.utils.data.DataLoader(trainset,
                                              batch_size=args.batch_size,
                                              shuffle=True, num_workers=0)

    testset = SyntheticCIFAR10(200, seed=12, train=False, augment=False)
    testloader = torch.utils.data.DataLoader(testset, batch_size=100,
                                             shuffle=False, num_workers=0)

    # Model
    if args.resume:
        # Load checkpoint.
        print('==> Resuming from checkpoint..')
        assert os.path.isdir('checkpoint'), 'Error: no checkpoint directory found!'
        checkpoint = torch.load('./checkpoint/ckpt.t7' + args.name + '_'
                                + str(args.seed), weights_only=False)
        net = checkpoint['net']
        best_acc = checkpoint['acc']
        start_epoch = checkpoint['epoch'] + 1
        rng_state = checkpoint['rng_state']
        torch.set_rng_state(rng_state)
    else:
        print('==> Building model..')
        net = models.__dict__[args.model]()

    if not os.path.isdir('results'):
        os.mkdir('results')
    logname = ('results/log_' + net.__class__.__name__ + '_' + args.name + '_'
               + str(args.seed) + '.csv')

    if use_cuda:
        net.cuda()
        net = torch.nn.DataParallel(net)
        print(torch.cuda.device_count())
        cudnn.benchmark = True
        print('Using CUDA..')

    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9,
                          weight_decay=args.decay)


def mixup_data(x, y, alpha=1.0, use_cuda=True):
    '''Returns mixed inputs, pairs of targets, and lambda'''
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1

    batch_size = x.size()[0]
    if use_cuda:
        index = torch.randperm(batch_size).cuda()
    else:
        index = torch.randperm(batch_size)

    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


def train(epoch):
    print('\nEpoch: %d' % epoch)
    net.train()
    train_loss = 0
    reg_loss = 0
    correct = 0
    total = 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        if use_cuda:
            inputs, targets = inputs.cuda(), targets.cuda()

        inputs, targets_a, targets_b, lam = mixup_data(inputs, targets,
                                                       args.alpha, use_cuda)
        inputs, targets_a, targets_b = map(Variable, (inputs,
                                                      targets_a, targets_b))
        outputs = net(inputs)
        loss = mixup_criterion(criterion, outputs, targets_a, targets_b, lam)
        train_loss += loss.item()
        _, predicted = torch.max(outputs.data, 1)
        total += targets.size(0)
        correct += (lam * predicted.eq(targets_a.data).cpu().sum().float()
                    + (1 - lam) * predicted.eq(targets_b.data).cpu().sum().float())

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        progress_bar(batch_idx, len(trainloader),
                     'Loss: %.3f | Reg: %.5f | Acc: %.3f%% (%d/%d)'
                     % (train_loss / (batch_idx + 1), reg_loss / (batch_idx + 1),
                        100. * correct / total, correct, total))
    return (train_loss / batch_idx, reg_loss / batch_idx, 100. * correct / total)


def test(epoch):
    global best_acc
    net.eval()
    test_loss = 0
    correct = 0
    total = 0
    for batch_idx, (inputs, targets) in enumerate(testloader):
        if use_cuda:
            inputs, targets = inputs.cuda(), targets.cuda()
        inputs, targets = Variable(inputs, volatile=True), Variable(targets)
        outputs = net(inputs)
        loss = criterion(outputs, targets)

        test_loss += loss.item()
        _, predicted = torch.max(outputs.data, 1)
        total += targets.size(0)
        correct += predicted.eq(targets.data).cpu().sum()

        progress_bar(batch_idx, len(testloader),
                     'Loss: %.3f | Acc: %.3f%% (%d/%d)'
                     % (test_loss / (batch_idx + 1), 100. * correct / total,
                        correct, total))
    acc = 100. * correct / total
    if epoch == start_epoch + args.epoch - 1 or acc > best_acc:
        checkpoint(acc, epoch)
    if acc > best_acc:
        best_acc = acc
    return (test_loss / batch_idx, 100. * correct / total)


def checkpoint(acc, epoch):
    # Save checkpoint.
    print('Saving..')
    state = {
        'net': net,
        'acc': acc,
        'epoch': epoch,
        'rng_state': torch.get_rng_state()
    }
    if not os.path.isdir('checkpoint'):
        os.mkdir('checkpoint')
    torch.save(state, './checkpoint/ckpt.t7' + args.name + '_'
               + str(args.seed))


def adjust_learning_rate(optimizer, epoch):
    """decrease the learning rate at 2 and 3 epoch"""
    lr = args.lr
    if epoch >= 2:
        lr /= 10
    if epoch >= 3:
        lr /= 10
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def run():
    if not os.path.exists(logname):
        with open(logname, 'w') as logfile:
            logwriter = csv.writer(logfile, delimiter=',')
            logwriter.writerow(['epoch', 'train loss', 'reg loss', 'train acc',
                                'test loss', 'test acc'])

    test_acc = None
    for epoch in range(start_epoch, args.epoch):
        train_loss, reg_loss, train_acc = train(epoch)
        test_loss, test_acc = test(epoch)
        adjust_learning_rate(optimizer, epoch)
        with open(logname, 'a') as logfile:
            logwriter = csv.writer(logfile, delimiter=',')
            logwriter.writerow([epoch, train_loss, reg_loss, float(train_acc), test_loss,
                                float(test_acc)])
    return float(test_acc)


if __name__ == '__main__':
    os.chdir(tempfile.mkdtemp())
    setup([])
    first_acc = run()
    setup(['--resume', '--epoch', '5'])
    resumed_acc = run()
    with open(logname) as logfile:
        rows = list(csv.reader(logfile))
    print('log rows: %d, best acc %.2f' % (len(rows) - 1, float(best_acc)))
    print('done acc=%.2f resumed_acc=%.2f' % (first_acc, resumed_acc))
