"""Trains an FCN-32s semantic segmentation network (initialised from a VGG16 checkpoint) on synthetic SBD/VOC data
with a `Trainer` class that validates, logs to CSV and checkpoints, resumes from that checkpoint and evaluates the
best model, as wkentaro/pytorch-fcn does: train_fcn32s.py sets ``cuda = torch.cuda.is_available()``, restores
``torch.load(args.resume)`` (no map_location) into the CPU model or copies VGG16 weights (``torch.load(model_file)``),
moves the model with ``if cuda: model = model.cuda()`` and only then builds SGD over the `get_parameters` generators
and restores the optimizer state; `Trainer.train_epoch`/`validate` move batches with ``if self.cuda: data, target =
data.cuda(), target.cuda()``, read ``loss.data.item()`` and ``score.data.max(1)[1].cpu().numpy()``, validate under
``model.eval()`` with ``torch.no_grad()`` and restore ``model.train()``; `cross_entropy2d` divides by
``mask.data.sum()``; `FCN32s` builds its bilinear ``upscore`` kernel in numpy and copies it into the CPU weight;
evaluate.py moves the model when CUDA is available, loads the checkpoint without map_location and calls ``eval()``.

Modeled on: wkentaro/pytorch-fcn, torchfcn/trainer.py, torchfcn/models/fcn32s.py, torchfcn/models/vgg.py,
torchfcn/datasets/voc.py, torchfcn/utils.py, examples/voc/train_fcn32s.py and examples/voc/evaluate.py at commit
4b988509bfd1a613d5e8482595a1c6654047d69b
(https://github.com/wkentaro/pytorch-fcn/blob/4b988509bfd1a613d5e8482595a1c6654047d69b/torchfcn/trainer.py,
https://github.com/wkentaro/pytorch-fcn/blob/4b988509bfd1a613d5e8482595a1c6654047d69b/torchfcn/models/fcn32s.py,
https://github.com/wkentaro/pytorch-fcn/blob/4b988509bfd1a613d5e8482595a1c6654047d69b/examples/voc/train_fcn32s.py).

Kept: `cross_entropy2d`; `Trainer` (``validate`` with CSV log, checkpoint and ``model_best`` copy, ``train_epoch``
with the skip-to-resume logic, ``train``); `get_upsampling_weight`, `FCN32s` (``padding=100``, zero init, the
19-pixel crop, ``copy_params_from_vgg16``); `VGG16`; `VOCClassSegBase`, `VOC2011ClassSeg`, `SBDClassSeg` (``.mat``
labels via scipy); `label_accuracy_score`; train_fcn32s.py's `get_parameters` and `main`; evaluate.py's `main`.

Changed to run here: torchvision, PIL, fcn, skimage, pytz and yaml are missing: VGG16 is a shrunk copy of
torchvision's layout whose "pretrained" weights are a seeded state dict in the temporary folder, JPEG images are
binary PPM and palette PNG labels PGM, visualisations are skipped, timestamps are local and the config is JSON;
``Variable`` wrappers are dropped and evaluate.py's ``volatile=True`` is ``torch.no_grad()``; ``best_mean_iu`` is
saved as a float (a numpy scalar fails ``torch.load``'s weights-only default); the conv1-conv5 layers are built in
a loop with the same names; ``num_workers`` is 0; no ``git_hash``; all files live in a temporary folder.
Shrunk: VGG widths /8 (fc6/fc7 128), 48x48 images, 8 SBD training and 3 VOC validation images, max_iter 6 then
resumed to 11, validation every 4 iterations, learning rate 1e-7 instead of 1e-10 for the tiny model.
"""
import argparse
import collections
import datetime
import json
import math
import os
import os.path as osp
import shutil
import tempfile

import numpy as np
import scipy.io
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data

W = 8  # VGG16 channel-width divisor

# --------------------------------------------------------------------------- torchfcn/utils.py
def _fast_hist(label_true, label_pred, n_class):
    mask = (label_true >= 0) & (label_true < n_class)
    return np.bincount(n_class * label_true[mask].astype(int) + label_pred[mask],
                       minlength=n_class ** 2).reshape(n_class, n_class)

def label_accuracy_score(label_trues, label_preds, n_class):
    """Returns accuracy score evaluation result: overall accuracy, mean accuracy, mean IU, fwavacc"""
    hist = np.zeros((n_class, n_class))
    for lt, lp in zip(label_trues, label_preds):
        hist += _fast_hist(lt.flatten(), lp.flatten(), n_class)
    acc = np.diag(hist).sum() / hist.sum()
    with np.errstate(divide='ignore', invalid='ignore'):
        acc_cls = np.nanmean(np.diag(hist) / hist.sum(axis=1))
        iu = np.diag(hist) / (hist.sum(axis=1) + hist.sum(axis=0) - np.diag(hist))
    freq = hist.sum(axis=1) / hist.sum()
    fwavacc = (freq[freq > 0] * iu[freq > 0]).sum()
    return acc, acc_cls, np.nanmean(iu), fwavacc

# --------------------------------------------------------------------------- torchfcn/models/
def get_upsampling_weight(in_channels, out_channels, kernel_size):
    """Make a 2D bilinear kernel suitable for upsampling"""
    factor = (kernel_size + 1) // 2
    center = factor - 1 if kernel_size % 2 == 1 else factor - 0.5
    og = np.ogrid[:kernel_size, :kernel_size]
    filt = (1 - abs(og[0] - center) / factor) * (1 - abs(og[1] - center) / factor)
    weight = np.zeros((in_channels, out_channels, kernel_size, kernel_size), dtype=np.float64)
    weight[range(in_channels), range(out_channels), :, :] = filt
    return torch.from_numpy(weight).float()

class FCN32s(nn.Module):
    N_CONVS = (2, 2, 3, 3, 3)

    def __init__(self, n_class=21):
        super(FCN32s, self).__init__()
        widths = [64 // W, 128 // W, 256 // W, 512 // W, 512 // W]
        fc = 4096 // 32
        cin = 3
        # conv1 .. conv5: 2, 2, 3, 3, 3 convs, each block ends in a ceil-mode 2x2 pooling (1/2 .. 1/32)
        for block, (n_conv, cout) in enumerate(zip(self.N_CONVS, widths), start=1):
            for i in range(1, n_conv + 1):
                setattr(self, 'conv%d_%d' % (block, i), nn.Conv2d(cin, cout, 3, padding=100 if block == i == 1 else 1))
                setattr(self, 'relu%d_%d' % (block, i), nn.ReLU(inplace=True))
                cin = cout
            setattr(self, 'pool%d' % block, nn.MaxPool2d(2, stride=2, ceil_mode=True))
        self.fc6 = nn.Conv2d(cin, fc, 7)
        self.relu6 = nn.ReLU(inplace=True)
        self.drop6 = nn.Dropout2d()
        self.fc7 = nn.Conv2d(fc, fc, 1)
        self.relu7 = nn.ReLU(inplace=True)
        self.drop7 = nn.Dropout2d()
        self.score_fr = nn.Conv2d(fc, n_class, 1)
        self.upscore = nn.ConvTranspose2d(n_class, n_class, 64, stride=32, bias=False)
        self._initialize_weights()

    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                m.weight.data.zero_()
                if m.bias is not None:
                    m.bias.data.zero_()
            if isinstance(m, nn.ConvTranspose2d):
                assert m.kernel_size[0] == m.kernel_size[1]
                initial_weight = get_upsampling_weight(m.in_channels, m.out_channels, m.kernel_size[0])
                m.weight.data.copy_(initial_weight)

    def forward(self, x):
        h = x
        for block, n_conv in enumerate(self.N_CONVS, start=1):
            for i in range(1, n_conv + 1):
                h = getattr(self, 'relu%d_%d' % (block, i))(getattr(self, 'conv%d_%d' % (block, i))(h))
            h = getattr(self, 'pool%d' % block)(h)
        h = self.drop6(self.relu6(self.fc6(h)))
        h = self.drop7(self.relu7(self.fc7(h)))
        h = self.upscore(self.score_fr(h))
        h = h[:, :, 19:19 + x.size()[2], 19:19 + x.size()[3]].contiguous()
        return h

    def copy_params_from_vgg16(self, vgg16):
        features = []
        for block, n_conv in enumerate(self.N_CONVS, start=1):
            for i in range(1, n_conv + 1):
                features += [getattr(self, 'conv%d_%d' % (block, i)), getattr(self, 'relu%d_%d' % (block, i))]
            features.append(getattr(self, 'pool%d' % block))
        for l1, l2 in zip(vgg16.features, features):
            if isinstance(l1, nn.Conv2d) and isinstance(l2, nn.Conv2d):
                assert l1.weight.size() == l2.weight.size()
                assert l1.bias.size() == l2.bias.size()
                l2.weight.data = l1.weight.data
                l2.bias.data = l1.bias.data
        for i, name in zip([0, 3], ['fc6', 'fc7']):
            l1 = vgg16.classifier[i]
            l2 = getattr(self, name)
            l2.weight.data = l1.weight.data.view(l2.weight.size())
            l2.bias.data = l1.bias.data.view(l2.bias.size())

class TorchvisionVGG16(nn.Module):
    """Layout of torchvision.models.vgg16 (features / avgpool / classifier), widths divided by W."""

    def __init__(self, num_classes=1000):
        super(TorchvisionVGG16, self).__init__()
        layers, in_c = [], 3
        for v in [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, 512, 'M']:
            if v == 'M':
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(in_c, v // W, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                in_c = v // W
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(nn.Linear(in_c * 7 * 7, 4096 // 32), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(4096 // 32, 4096 // 32), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(4096 // 32, num_classes))

VGG16_PRETRAINED = None  # set in __main__: '~/data/models/pytorch/vgg16_from_caffe.pth' in the original

def VGG16(pretrained=False):
    model = TorchvisionVGG16()
    if not pretrained:
        return model
    model_file = VGG16_PRETRAINED  # _get_vgg16_pretrained_model()
    state_dict = torch.load(model_file)
    model.load_state_dict(state_dict)
    return model

# --------------------------------------------------------------------------- torchfcn/datasets/voc.py
def read_pnm(path):
    """PIL.Image.open stand-in for binary PPM (P6, RGB) and PGM (P5, palette indices)."""
    with open(path, 'rb') as f:
        ch = 3 if f.readline().strip() == b'P6' else 1
        w, h = map(int, f.readline().split())
        f.readline()
        return np.frombuffer(f.read(w * h * ch), np.uint8).reshape((h, w, 3) if ch == 3 else (h, w))

class VOCClassSegBase(torch.utils.data.Dataset):
    class_names = np.array(['background', 'aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat',
                            'chair', 'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person', 'potted plant',
                            'sheep', 'sofa', 'train', 'tv/monitor'])
    mean_bgr = np.array([104.00698793, 116.66876762, 122.67891434])

    def __init__(self, root, split='train', transform=False):
        self.root, self.split, self._transform = root, split, transform
        # VOC2011 and others are subset of VOC2012
        dataset_dir = osp.join(self.root, 'VOC/VOCdevkit/VOC2012')
        self.files = collections.defaultdict(list)
        for split in ['train', 'val']:
            imgsets_file = osp.join(dataset_dir, 'ImageSets/Segmentation/%s.txt' % split)
            for did in open(imgsets_file):
                did = did.strip()
                self.files[split].append({'img': osp.join(dataset_dir, 'JPEGImages/%s.ppm' % did),
                                          'lbl': osp.join(dataset_dir, 'SegmentationClass/%s.pgm' % did)})

    def __len__(self):
        return len(self.files[self.split])

    def __getitem__(self, index):
        data_file = self.files[self.split][index]
        img = np.array(read_pnm(data_file['img']), dtype=np.uint8)
        lbl = np.array(read_pnm(data_file['lbl']), dtype=np.int32)
        lbl[lbl == 255] = -1
        if self._transform:
            return self.transform(img, lbl)
        return img, lbl

    def transform(self, img, lbl):
        img = img[:, :, ::-1].astype(np.float64)  # RGB -> BGR
        img -= self.mean_bgr
        img = torch.from_numpy(img.transpose(2, 0, 1)).float()
        lbl = torch.from_numpy(lbl).long()
        return img, lbl

    def untransform(self, img, lbl):
        img = img.numpy().transpose(1, 2, 0)
        img += self.mean_bgr
        img = img.astype(np.uint8)[:, :, ::-1]
        return img, lbl.numpy()

class VOC2011ClassSeg(VOCClassSegBase):
    def __init__(self, root, split='train', transform=False):
        super(VOC2011ClassSeg, self).__init__(root, split=split, transform=transform)
        imgsets_file = osp.join(self.root, 'ext/fcn.berkeleyvision.org', 'data/pascal/seg11valid.txt')
        dataset_dir = osp.join(self.root, 'VOC/VOCdevkit/VOC2012')
        for did in open(imgsets_file):
            did = did.strip()
            self.files['seg11valid'].append({'img': osp.join(dataset_dir, 'JPEGImages/%s.ppm' % did),
                                             'lbl': osp.join(dataset_dir, 'SegmentationClass/%s.pgm' % did)})

class SBDClassSeg(VOCClassSegBase):
    def __init__(self, root, split='train', transform=False):
        self.root, self.split, self._transform = root, split, transform
        dataset_dir = osp.join(self.root, 'VOC/benchmark_RELEASE/dataset')
        self.files = collections.defaultdict(list)
        for split in ['train', 'val']:
            imgsets_file = osp.join(dataset_dir, '%s.txt' % split)
            for did in open(imgsets_file):
                did = did.strip()
                self.files[split].append({'img': osp.join(dataset_dir, 'img/%s.ppm' % did),
                                          'lbl': osp.join(dataset_dir, 'cls/%s.mat' % did)})

    def __getitem__(self, index):
        data_file = self.files[self.split][index]
        img = np.array(read_pnm(data_file['img']), dtype=np.uint8)
        mat = scipy.io.loadmat(data_file['lbl'])
        lbl = mat['GTcls'][0]['Segmentation'][0].astype(np.int32)
        lbl[lbl == 255] = -1
        if self._transform:
            return self.transform(img, lbl)
        return img, lbl

# --------------------------------------------------------------------------- torchfcn/trainer.py
def cross_entropy2d(input, target, weight=None, size_average=True):
    # input: (n, c, h, w), target: (n, h, w)
    n, c, h, w = input.size()
    log_p = F.log_softmax(input, dim=1)  # >=0.3 branch of the version check
    # log_p: (n*h*w, c)
    log_p = log_p.transpose(1, 2).transpose(2, 3).contiguous()
    log_p = log_p[target.view(n, h, w, 1).repeat(1, 1, 1, c) >= 0]
    log_p = log_p.view(-1, c)
    # target: (n*h*w,)
    mask = target >= 0
    target = target[mask]
    loss = F.nll_loss(log_p, target, weight=weight, reduction='sum')
    if size_average:
        loss /= mask.data.sum()
    return loss

class Trainer(object):

    def __init__(self, cuda, model, optimizer, train_loader, val_loader, out, max_iter,
                 size_average=False, interval_validate=None):
        self.cuda = cuda
        self.model, self.optim = model, optimizer
        self.train_loader, self.val_loader = train_loader, val_loader
        self.timestamp_start = datetime.datetime.now()  # pytz 'Asia/Tokyo' in the original
        self.size_average = size_average
        self.interval_validate = len(self.train_loader) if interval_validate is None else interval_validate
        self.out = out
        os.makedirs(self.out, exist_ok=True)  # `if not osp.exists(self.out): os.makedirs(self.out)`
        self.log_headers = ['epoch', 'iteration', 'train/loss', 'train/acc', 'train/acc_cls', 'train/mean_iu',
                            'train/fwavacc', 'valid/loss', 'valid/acc', 'valid/acc_cls', 'valid/mean_iu',
                            'valid/fwavacc', 'elapsed_time']
        if not osp.exists(osp.join(self.out, 'log.csv')):
            with open(osp.join(self.out, 'log.csv'), 'w') as f:
                f.write(','.join(self.log_headers) + '\n')
        self.epoch, self.iteration = 0, 0
        self.max_iter = max_iter
        self.best_mean_iu = 0

    def validate(self):
        training = self.model.training
        self.model.eval()
        n_class = len(self.val_loader.dataset.class_names)
        val_loss = 0
        label_trues, label_preds = [], []
        for batch_idx, (data, target) in enumerate(self.val_loader):
            if self.cuda:
                data, target = data.cuda(), target.cuda()
            with torch.no_grad():
                score = self.model(data)
            loss = cross_entropy2d(score, target, size_average=self.size_average)
            loss_data = loss.data.item()
            if np.isnan(loss_data):
                raise ValueError('loss is nan while validating')
            val_loss += loss_data / len(data)
            imgs = data.data.cpu()
            lbl_pred = score.data.max(1)[1].cpu().numpy()[:, :, :]
            lbl_true = target.data.cpu()
            for img, lt, lp in zip(imgs, lbl_true, lbl_pred):
                img, lt = self.val_loader.dataset.untransform(img, lt)
                label_trues.append(lt)
                label_preds.append(lp)
        metrics = label_accuracy_score(label_trues, label_preds, n_class)
        val_loss /= len(self.val_loader)
        with open(osp.join(self.out, 'log.csv'), 'a') as f:
            elapsed_time = (datetime.datetime.now() - self.timestamp_start).total_seconds()
            log = [self.epoch, self.iteration] + [''] * 5 + [val_loss] + list(metrics) + [elapsed_time]
            log = map(str, log)
            f.write(','.join(log) + '\n')
        mean_iu = float(metrics[2])  # a numpy scalar in the original; torch.load(weights_only=True) rejects it
        is_best = mean_iu > self.best_mean_iu
        if is_best:
            self.best_mean_iu = mean_iu
        torch.save({
            'epoch': self.epoch,
            'iteration': self.iteration,
            'arch': self.model.__class__.__name__,
            'optim_state_dict': self.optim.state_dict(),
            'model_state_dict': self.model.state_dict(),
            'best_mean_iu': self.best_mean_iu,
        }, osp.join(self.out, 'checkpoint.pth.tar'))
        if is_best:
            shutil.copy(osp.join(self.out, 'checkpoint.pth.tar'), osp.join(self.out, 'model_best.pth.tar'))
        if training:
            self.model.train()

    def train_epoch(self):
        self.model.train()
        n_class = len(self.train_loader.dataset.class_names)
        for batch_idx, (data, target) in enumerate(self.train_loader):
            iteration = batch_idx + self.epoch * len(self.train_loader)
            if self.iteration != 0 and (iteration - 1) != self.iteration:
                continue  # for resuming
            self.iteration = iteration
            if self.iteration % self.interval_validate == 0:
                self.validate()
            assert self.model.training
            if self.cuda:
                data, target = data.cuda(), target.cuda()
            self.optim.zero_grad()
            score = self.model(data)
            loss = cross_entropy2d(score, target, size_average=self.size_average)
            loss /= len(data)
            loss_data = loss.data.item()
            if np.isnan(loss_data):
                raise ValueError('loss is nan while training')
            loss.backward()
            self.optim.step()
            lbl_pred = score.data.max(1)[1].cpu().numpy()[:, :, :]
            lbl_true = target.data.cpu().numpy()
            acc, acc_cls, mean_iu, fwavacc = label_accuracy_score(lbl_true, lbl_pred, n_class=n_class)
            metrics = np.mean([(acc, acc_cls, mean_iu, fwavacc)], axis=0)
            with open(osp.join(self.out, 'log.csv'), 'a') as f:
                elapsed_time = (datetime.datetime.now() - self.timestamp_start).total_seconds()
                log = [self.epoch, self.iteration] + [loss_data] + metrics.tolist() + [''] * 5 + [elapsed_time]
                log = map(str, log)
                f.write(','.join(log) + '\n')
            if self.iteration >= self.max_iter:
                break

    def train(self):
        max_epoch = int(math.ceil(1. * self.max_iter / len(self.train_loader)))
        for epoch in range(self.epoch, max_epoch):
            self.epoch = epoch
            self.train_epoch()
            if self.iteration >= self.max_iter:
                break

# --------------------------------------------------------------------------- examples/voc/train_fcn32s.py
def get_parameters(model, bias=False):
    modules_skipped = (nn.ReLU, nn.MaxPool2d, nn.Dropout2d, nn.Sequential, FCN32s)
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            if bias:
                yield m.bias
            else:
                yield m.weight
        elif isinstance(m, nn.ConvTranspose2d):
            # weight is frozen because it is just a bilinear upsampling
            if bias:
                assert m.bias is None
        elif isinstance(m, modules_skipped):
            continue
        else:
            raise ValueError('Unexpected module: %s' % str(m))

def main(argv, root, logs):
    parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument('-g', '--gpu', type=int, required=True, help='gpu id')
    parser.add_argument('--resume', help='checkpoint path')
    parser.add_argument('--max-iteration', type=int, default=100000, help='max iteration')
    parser.add_argument('--lr', type=float, default=1.0e-10, help='learning rate')
    parser.add_argument('--weight-decay', type=float, default=0.0005, help='weight decay')
    parser.add_argument('--momentum', type=float, default=0.99, help='momentum')
    parser.add_argument('--interval-validate', type=int, default=4000)
    args = parser.parse_args(argv)
    args.model = 'FCN32s'
    now = datetime.datetime.now()
    args.out = osp.join(logs, now.strftime('%Y%m%d_%H%M%S.%f'))
    os.makedirs(args.out)
    with open(osp.join(args.out, 'config.json'), 'w') as f:
        json.dump(args.__dict__, f)
    os.environ['CUDA_VISIBLE_DEVICES'] = str(args.gpu)
    cuda = torch.cuda.is_available()
    torch.manual_seed(1337)
    if cuda:
        torch.cuda.manual_seed(1337)
    # 1. dataset
    kwargs = {'num_workers': 0, 'pin_memory': True} if cuda else {}
    train_loader = torch.utils.data.DataLoader(SBDClassSeg(root, split='train', transform=True),
                                               batch_size=1, shuffle=True, **kwargs)
    val_loader = torch.utils.data.DataLoader(VOC2011ClassSeg(root, split='seg11valid', transform=True),
                                             batch_size=1, shuffle=False, **kwargs)
    # 2. model
    model = FCN32s(n_class=21)
    start_epoch, start_iteration = 0, 0
    if args.resume:
        checkpoint = torch.load(args.resume)
        model.load_state_dict(checkpoint['model_state_dict'])
        start_epoch = checkpoint['epoch']
        start_iteration = checkpoint['iteration']
    else:
        vgg16 = VGG16(pretrained=True)
        model.copy_params_from_vgg16(vgg16)
    if cuda:
        model = model.cuda()
    # 3. optimizer
    optim = torch.optim.SGD(
        [{'params': get_parameters(model, bias=False)},
         {'params': get_parameters(model, bias=True), 'lr': args.lr * 2, 'weight_decay': 0}],
        lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    if args.resume:
        optim.load_state_dict(checkpoint['optim_state_dict'])
    trainer = Trainer(cuda=cuda, model=model, optimizer=optim, train_loader=train_loader, val_loader=val_loader,
                      out=args.out, max_iter=args.max_iteration, interval_validate=args.interval_validate)
    trainer.epoch = start_epoch
    trainer.iteration = start_iteration
    trainer.train()
    return args.out, trainer

# --------------------------------------------------------------------------- examples/voc/evaluate.py
def evaluate(model_file, root):
    val_loader = torch.utils.data.DataLoader(VOC2011ClassSeg(root, split='seg11valid', transform=True),
                                             batch_size=1, shuffle=False, num_workers=0, pin_memory=True)
    n_class = len(val_loader.dataset.class_names)
    model = FCN32s(n_class=21)
    if torch.cuda.is_available():
        model = model.cuda()
    print('==> Loading %s model file: %s' % (model.__class__.__name__, model_file))
    model_data = torch.load(model_file)
    try:
        model.load_state_dict(model_data)
    except Exception:
        model.load_state_dict(model_data['model_state_dict'])
    model.eval()
    label_trues, label_preds = [], []
    for batch_idx, (data, target) in enumerate(val_loader):
        if torch.cuda.is_available():
            data, target = data.cuda(), target.cuda()
        with torch.no_grad():  # Variable(data, volatile=True)
            score = model(data)
        imgs = data.data.cpu()
        lbl_pred = score.data.max(1)[1].cpu().numpy()[:, :, :]
        lbl_true = target.data.cpu()
        for img, lt, lp in zip(imgs, lbl_true, lbl_pred):
            img, lt = val_loader.dataset.untransform(img, lt)
            label_trues.append(lt)
            label_preds.append(lp)
    metrics = label_accuracy_score(label_trues, label_preds, n_class=n_class)
    metrics = np.array(metrics) * 100
    print('Accuracy: {0}\nAccuracy Class: {1}\nMean IU: {2}\nFWAV Accuracy: {3}'.format(*metrics))
    return metrics

def make_fake_voc(root, n_train=8, n_val=3, side=48, seed=0):
    """SBD (img/*.ppm, cls/*.mat) and VOC2012 (JPEGImages/*.ppm, SegmentationClass/*.pgm) layouts."""
    rng = np.random.RandomState(seed)
    palette = rng.randint(0, 256, size=(21, 3))
    sbd, voc = osp.join(root, 'VOC/benchmark_RELEASE/dataset'), osp.join(root, 'VOC/VOCdevkit/VOC2012')
    pascal = osp.join(root, 'ext/fcn.berkeleyvision.org/data/pascal')
    for d in ('img', 'cls'):
        os.makedirs(osp.join(sbd, d))
    for d in ('JPEGImages', 'SegmentationClass', 'ImageSets/Segmentation'):
        os.makedirs(osp.join(voc, d))
    os.makedirs(pascal)
    ids, val_ids = ['2008_%06d' % i for i in range(n_train)], ['2007_%06d' % i for i in range(n_val)]
    for did in ids + val_ids:
        lbl = np.zeros((side, side), np.uint8)
        for _ in range(3):
            y, x, h, w = rng.randint(0, side - 8, 2).tolist() + rng.randint(6, 20, 2).tolist()
            lbl[y:y + h, x:x + w] = rng.randint(1, 21)
        img = np.clip(palette[lbl] + rng.randint(-20, 20, (side, side, 3)), 0, 255).astype(np.uint8)
        lbl[np.abs(np.diff(lbl.astype(int), axis=0, prepend=0)) > 0] = 255  # void boundaries
        img_path = osp.join(sbd, 'img/%s.ppm' % did) if did in ids else osp.join(voc, 'JPEGImages/%s.ppm' % did)
        with open(img_path, 'wb') as f:
            f.write(b'P6\n%d %d\n255\n' % (side, side) + img.tobytes())
        if did in ids:
            scipy.io.savemat(osp.join(sbd, 'cls/%s.mat' % did), {'GTcls': {'Segmentation': lbl}})
        else:
            with open(osp.join(voc, 'SegmentationClass/%s.pgm' % did), 'wb') as f:
                f.write(b'P5\n%d %d\n255\n' % (side, side) + lbl.tobytes())
    for path, lst in ((osp.join(sbd, 'train.txt'), ids), (osp.join(sbd, 'val.txt'), val_ids),
                      (osp.join(voc, 'ImageSets/Segmentation/train.txt'), []),
                      (osp.join(voc, 'ImageSets/Segmentation/val.txt'), val_ids),
                      (osp.join(pascal, 'seg11valid.txt'), val_ids)):
        with open(path, 'w') as f:
            f.write(''.join(d + '\n' for d in lst))

if __name__ == '__main__':
    tmp = tempfile.mkdtemp(prefix='fcn_')
    try:
        root, logs = osp.join(tmp, 'datasets'), osp.join(tmp, 'logs')
        make_fake_voc(root)
        torch.manual_seed(0)
        VGG16_PRETRAINED = osp.join(tmp, 'vgg16_from_caffe.pth')
        vgg = TorchvisionVGG16()
        for m in [m for m in vgg.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]:  # "pretrained" weights
            nn.init.kaiming_normal_(m.weight, nonlinearity='relu'), nn.init.constant_(m.bias, 0.01)
        torch.save(vgg.state_dict(), VGG16_PRETRAINED)
        common = ['-g', '0', '--lr', '1e-7', '--interval-validate', '4']
        out1, trainer1 = main(common + ['--max-iteration', '6'], root, logs)
        out2, trainer2 = main(common + ['--max-iteration', '11', '--resume', osp.join(out1, 'checkpoint.pth.tar')],
                              root, logs)
        best = osp.join(out2, 'model_best.pth.tar')
        metrics = evaluate(best if osp.exists(best) else osp.join(out2, 'checkpoint.pth.tar'), root)
        with open(osp.join(out2, 'log.csv')) as f:
            n_rows = len(f.readlines()) - 1
        print('done iterations={}+{} log_rows={} best_mean_iu={:.3f} eval_acc={:.1f}'.format(
            trainer1.iteration, trainer2.iteration, n_rows, trainer2.best_mean_iu, metrics[0]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
