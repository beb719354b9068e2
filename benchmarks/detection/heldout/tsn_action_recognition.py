"""Trains a Temporal Segment Network (a 2-D ResNet on frames sampled from 3 segments per video, an averaging segment
consensus, partial BatchNorm, per-layer-type lr policies) on synthetic RGB "videos" the way yjxiong/tsn-pytorch's
main.py does it, resumes once from its checkpoint, then runs test_models.py's module-level evaluation (checkpoint
`module.` prefixes stripped, `torch.nn.DataParallel(net.cuda(devices[0]), device_ids=devices)`, a confusion matrix).

Modeled on: yjxiong/tsn-pytorch, main.py, opts.py, models.py, ops/basic_ops.py, dataset.py, transforms.py and
test_models.py at commit 2f0468e049760530b4995bf72c8a512623929c39.
Kept: main.py (`global args, best_prec1`; TSN built on the host, then `torch.nn.DataParallel(model,
device_ids=args.gpus).cuda()`; `--resume` via `torch.load(args.resume)`, no `map_location`; `CrossEntropyLoss()
.cuda()`; SGD over `get_optim_policies()` groups with `lr_mult` / `decay_mult`; `train` calling
`model.module.partialBN`, `target.cuda(async=True)` with the input left on the host for DataParallel to scatter,
`accuracy(output.data, ...)` device tensors accumulated by `AverageMeter`s and kept in `best_prec1` (checkpointed), the
"clipping gradient" report; `validate`; `save_checkpoint` + `shutil.copyfile`; `adjust_learning_rate`); `TSN` (`fc`
swapped for dropout + `new_fc`, `train()` freezing all BatchNorm but the first, `get_optim_policies`, segment reshape
and consensus); `ConsensusModule`; `VideoRecord` / `TSNDataSet`; the group transforms; test_models.py's module-level
code (`devices` from `--gpus` and `-j`, `checkpoint['best_prec1']` printed, a 1-segment net fed all test segments,
`.data.cpu().numpy()`, `confusion_matrix`).
Changed to run here: each of the author's `.cuda()` is made only when `torch.cuda.is_available()`; `async=True` ->
`non_blocking=True`; `SegmentConsensus` is a static-method `autograd.Function`; `Variable(volatile=True)` ->
`torch.no_grad()`; `loss.item()`, `clip_grad_norm_`; `correct[:k].reshape(-1)...sum(0, keepdim=True)` (`view` fails on
the transposed slice; a 0-dim sum cannot be indexed); no torchvision / PIL / downloads: `resnet18` is a small stand-in
with torchvision's layer names, transforms work on numpy frames drawn at `scale_size` (no GroupScale), training crops
with GroupRandomCrop (not GroupMultiScaleCrop + flips), frames are `.npy` files of a blob whose motion is the class;
Flow / RGBDiff, softmax-before-consensus and 10-crop testing left out. Shrunk: input 224 -> 32, widths / 8, 24 / 8
videos of 12 frames, 4 classes (hmdb51's 51 outputs), batch 4, 2 epochs + 1 resumed, test_segments 5, workers 0.
"""
import argparse
import os
import random
import shutil
import tempfile
import time
from collections import OrderedDict

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.utils.data as data
from numpy.random import randint
from sklearn.metrics import confusion_matrix
from torch.nn.init import constant_, normal_

FOLDER = tempfile.mkdtemp(prefix='tsn_')

# ------------------------------------------------------------------ torchvision stand-ins (resnet18, Compose)
def _block(inplanes, planes, stride):
    return nn.Sequential(nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(),
                         nn.Conv2d(planes, planes, 3, 1, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU())

def resnet18(pretrained=False):
    """torchvision.models.resnet18 stand-in: its layer names (conv1, bn1, ..., fc), plain blocks, widths / 8."""
    return nn.Sequential(OrderedDict([
        ('conv1', nn.Conv2d(3, 8, 7, 2, 3, bias=False)), ('bn1', nn.BatchNorm2d(8)), ('relu', nn.ReLU()),
        ('maxpool', nn.MaxPool2d(3, 2, 1)), ('layer1', _block(8, 8, 1)), ('layer2', _block(8, 16, 2)),
        ('layer3', _block(16, 32, 2)), ('layer4', _block(32, 64, 2)), ('avgpool', nn.AdaptiveAvgPool2d(1)),
        ('flatten', nn.Flatten()), ('fc', nn.Linear(64, 1000))]))

class Compose(object):
    def __init__(self, transforms):
        self.transforms = transforms
    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

# ------------------------------------------------------------------------------------------------ ops/basic_ops.py
class SegmentConsensus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_tensor, consensus_type, dim=1):
        ctx.consensus_type, ctx.dim, ctx.shape = consensus_type, dim, input_tensor.size()
        return input_tensor.mean(dim=dim, keepdim=True) if consensus_type == 'avg' else input_tensor  # 'identity'
    @staticmethod
    def backward(ctx, grad_output):
        if ctx.consensus_type == 'avg':
            return grad_output.expand(ctx.shape) / float(ctx.shape[ctx.dim]), None, None
        return grad_output, None, None  # 'identity'

class ConsensusModule(torch.nn.Module):
    def __init__(self, consensus_type, dim=1):
        super(ConsensusModule, self).__init__()
        self.consensus_type = consensus_type if consensus_type != 'rnn' else 'identity'
        self.dim = dim
    def forward(self, input):
        return SegmentConsensus.apply(input, self.consensus_type, self.dim)

# --------------------------------------------------------------------------------------------------- transforms.py
class GroupCenterCrop(object):
    def __init__(self, size):
        self.size = size
    def __call__(self, img_group):
        h, w = img_group[0].shape[:2]
        y1, x1 = (h - self.size) // 2, (w - self.size) // 2
        return [img[y1:y1 + self.size, x1:x1 + self.size] for img in img_group]

class GroupRandomCrop(object):
    def __init__(self, size):
        self.size = size
    def __call__(self, img_group):
        h, w = img_group[0].shape[:2]
        x1, y1 = random.randint(0, w - self.size), random.randint(0, h - self.size)
        return [img[y1:y1 + self.size, x1:x1 + self.size] for img in img_group]

class GroupNormalize(object):
    def __init__(self, mean, std):
        self.mean, self.std = mean, std
    def __call__(self, tensor):
        rep_mean = self.mean * (tensor.size()[0]//len(self.mean))
        rep_std = self.std * (tensor.size()[0]//len(self.std))
        for t, m, s in zip(tensor, rep_mean, rep_std):
            t.sub_(m).div_(s)
        return tensor

class Stack(object):
    def __init__(self, roll=False):
        self.roll = roll
    def __call__(self, img_group):  # (flow frames: expand_dims; roll: BNInception's BGR, x[:, :, ::-1])
        return np.concatenate(img_group, axis=2)

class ToTorchFormatTensor(object):
    def __init__(self, div=True):
        self.div = div
    def __call__(self, pic):
        img = torch.from_numpy(np.ascontiguousarray(pic)).permute(2, 0, 1).contiguous()
        return img.float().div(255) if self.div else img.float()

# ------------------------------------------------------------------------------------------------------ dataset.py
class VideoRecord(object):
    def __init__(self, row):
        self._data = row
    path = property(lambda self: self._data[0])
    num_frames = property(lambda self: int(self._data[1]))
    label = property(lambda self: int(self._data[2]))

class TSNDataSet(data.Dataset):
    def __init__(self, root_path, list_file, num_segments=3, new_length=1, modality='RGB',
                 image_tmpl='img_{:05d}.npy', transform=None, random_shift=True, test_mode=False):
        self.root_path, self.list_file, self.num_segments = root_path, list_file, num_segments
        self.new_length, self.modality, self.image_tmpl = new_length, modality, image_tmpl
        self.transform, self.random_shift, self.test_mode = transform, random_shift, test_mode
        self._parse_list()
    def _load_image(self, directory, idx):
        return [np.load(os.path.join(directory, self.image_tmpl.format(idx)))]  # Image.open(...).convert('RGB')
    def _parse_list(self):
        self.video_list = [VideoRecord(x.strip().split(' ')) for x in open(self.list_file)]
    def _sample_indices(self, record):
        average_duration = (record.num_frames - self.new_length + 1) // self.num_segments
        if average_duration > 0:
            offsets = np.multiply(list(range(self.num_segments)), average_duration) + \
                randint(average_duration, size=self.num_segments)
        elif record.num_frames > self.num_segments:
            offsets = np.sort(randint(record.num_frames - self.new_length + 1, size=self.num_segments))
        else:
            offsets = np.zeros((self.num_segments,))
        return offsets + 1
    def _get_val_indices(self, record):
        if record.num_frames > self.num_segments + self.new_length - 1:
            tick = (record.num_frames - self.new_length + 1) / float(self.num_segments)
            offsets = np.array([int(tick / 2.0 + tick * x) for x in range(self.num_segments)])
        else:
            offsets = np.zeros((self.num_segments,))
        return offsets + 1
    def _get_test_indices(self, record):
        tick = (record.num_frames - self.new_length + 1) / float(self.num_segments)
        offsets = np.array([int(tick / 2.0 + tick * x) for x in range(self.num_segments)])
        return offsets + 1
    def __getitem__(self, index):
        record = self.video_list[index]
        if not self.test_mode:
            segment_indices = self._sample_indices(record) if self.random_shift else self._get_val_indices(record)
        else:
            segment_indices = self._get_test_indices(record)
        return self.get(record, segment_indices)
    def get(self, record, indices):
        images = list()
        for seg_ind in indices:
            p = int(seg_ind)
            for i in range(self.new_length):
                images.extend(self._load_image(record.path, p))
                if p < record.num_frames:
                    p += 1
        return self.transform(images), record.label
    def __len__(self):
        return len(self.video_list)

# ------------------------------------------------------------------------------------------------------- models.py
class TSN(nn.Module):
    def __init__(self, num_class, num_segments, modality, base_model='resnet101', new_length=None,
                 consensus_type='avg', before_softmax=True, dropout=0.8, crop_num=1, partial_bn=True):
        super(TSN, self).__init__()
        self.modality, self.num_segments, self.reshape, self.dropout = modality, num_segments, True, dropout
        self.before_softmax, self.crop_num, self.consensus_type = before_softmax, crop_num, consensus_type
        self.new_length = (1 if modality == "RGB" else 5) if new_length is None else new_length
        print("Initializing TSN with base model: {}. consensus_module: {}".format(base_model, consensus_type))
        self._prepare_base_model(base_model)
        feature_dim = self._prepare_tsn(num_class)
        self.consensus = ConsensusModule(consensus_type)  # (+ nn.Softmax() when not before_softmax)
        self._enable_pbn = partial_bn
        if partial_bn:
            self.partialBN(True)

    def _prepare_tsn(self, num_class):
        feature_dim = getattr(self.base_model, self.base_model.last_layer_name).in_features
        # (dropout == 0 replaces the last layer by nn.Linear(feature_dim, num_class) instead)
        setattr(self.base_model, self.base_model.last_layer_name, nn.Dropout(p=self.dropout))
        self.new_fc = nn.Linear(feature_dim, num_class)
        std = 0.001
        normal_(self.new_fc.weight, 0, std)
        constant_(self.new_fc.bias, 0)
        return feature_dim

    def _prepare_base_model(self, base_model):
        if 'resnet' in base_model:
            self.base_model = {'resnet18': resnet18}[base_model](True)  # getattr(torchvision.models, base_model)
            self.base_model.last_layer_name = 'fc'
            self.input_size = 32  # 224
            self.input_mean = [0.485, 0.456, 0.406]
            self.input_std = [0.229, 0.224, 0.225]
        else:
            raise ValueError('Unknown base model: {}'.format(base_model))

    def train(self, mode=True):
        """Override the default train() to freeze the BN parameters"""
        super(TSN, self).train(mode)
        count = 0
        if self._enable_pbn:
            print("Freezing BatchNorm2D except the first one.")
            for m in self.base_model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    count += 1
                    if count >= (2 if self._enable_pbn else 1):
                        m.eval()
                        # shutdown update in frozen mode
                        m.weight.requires_grad = False
                        m.bias.requires_grad = False

    def partialBN(self, enable):
        self._enable_pbn = enable

    def get_optim_policies(self):
        first_conv_weight, first_conv_bias, normal_weight, normal_bias, bn = [], [], [], [], []
        conv_cnt, bn_cnt = 0, 0
        for m in self.modules():
            if isinstance(m, torch.nn.Conv2d):  # or Conv1d
                ps = list(m.parameters())
                conv_cnt += 1
                if conv_cnt == 1:
                    first_conv_weight.append(ps[0])
                    if len(ps) == 2:
                        first_conv_bias.append(ps[1])
                else:
                    normal_weight.append(ps[0])
                    if len(ps) == 2:
                        normal_bias.append(ps[1])
            elif isinstance(m, torch.nn.Linear):
                ps = list(m.parameters())
                normal_weight.append(ps[0])
                normal_bias.extend(ps[1:])
            elif isinstance(m, torch.nn.BatchNorm2d):
                bn_cnt += 1
                # later BN's are frozen
                if not self._enable_pbn or bn_cnt == 1:
                    bn.extend(list(m.parameters()))
            elif len(m._modules) == 0:
                if len(list(m.parameters())) > 0:
                    raise ValueError("New atomic module type: {}. Need to give it a learning policy".format(type(m)))
        return [
            {'params': first_conv_weight, 'lr_mult': 1, 'decay_mult': 1, 'name': "first_conv_weight"},  # 5 for Flow
            {'params': first_conv_bias, 'lr_mult': 2, 'decay_mult': 0, 'name': "first_conv_bias"},  # 10 for Flow
            {'params': normal_weight, 'lr_mult': 1, 'decay_mult': 1, 'name': "normal_weight"},
            {'params': normal_bias, 'lr_mult': 2, 'decay_mult': 0, 'name': "normal_bias"},
            {'params': bn, 'lr_mult': 1, 'decay_mult': 0, 'name': "BN scale/shift"},
        ]

    def forward(self, input):
        sample_len = (3 if self.modality == "RGB" else 2) * self.new_length
        base_out = self.base_model(input.view((-1, sample_len) + input.size()[-2:]))
        if self.dropout > 0:
            base_out = self.new_fc(base_out)
        if self.reshape:
            base_out = base_out.view((-1, self.num_segments) + base_out.size()[1:])
        output = self.consensus(base_out)
        return output.squeeze(1)

    crop_size = property(lambda self: self.input_size)
    scale_size = property(lambda self: self.input_size * 256 // 224)

    def get_augmentation(self):  # GroupMultiScaleCrop(input_size, [1, .875, .75, .66]) + GroupRandomHorizontalFlip
        return Compose([GroupRandomCrop(self.input_size)])

# ---------------------------------------------------------------------------------------------- opts.py, main.py
parser = argparse.ArgumentParser(description="PyTorch implementation of Temporal Segment Networks")
parser.add_argument('dataset', type=str, choices=['ucf101', 'hmdb51', 'kinetics'])
parser.add_argument('modality', type=str, choices=['RGB', 'Flow', 'RGBDiff'])
parser.add_argument('train_list', type=str)
parser.add_argument('val_list', type=str)
parser.add_argument('--arch', type=str, default="resnet101")
parser.add_argument('--num_segments', type=int, default=3)
parser.add_argument('--consensus_type', type=str, default='avg', choices=['avg', 'max', 'topk', 'identity', 'rnn'])
parser.add_argument('--dropout', '--do', default=0.5, type=float, metavar='DO', help='dropout ratio (default: 0.5)')
parser.add_argument('--epochs', default=45, type=int, metavar='N', help='number of total epochs to run')
parser.add_argument('-b', '--batch-size', default=256, type=int, metavar='N', help='mini-batch size (default: 256)')
parser.add_argument('--lr', '--learning-rate', default=0.001, type=float, metavar='LR', help='initial learning rate')
parser.add_argument('--lr_steps', default=[20, 40], type=float, nargs="+", metavar='LRSteps')
parser.add_argument('--momentum', default=0.9, type=float, metavar='M', help='momentum')
parser.add_argument('--weight-decay', '--wd', default=5e-4, type=float, metavar='W', help='weight decay')
parser.add_argument('--clip-gradient', '--gd', default=None, type=float, metavar='W', help='gradient norm clipping')
parser.add_argument('--no_partialbn', '--npb', default=False, action="store_true")
parser.add_argument('--print-freq', '-p', default=20, type=int, metavar='N', help='print frequency (default: 10)')
parser.add_argument('--eval-freq', '-ef', default=5, type=int, metavar='N', help='evaluation frequency (default: 5)')
parser.add_argument('-j', '--workers', default=4, type=int, metavar='N', help='number of data loading workers')
parser.add_argument('--resume', default='', type=str, metavar='PATH', help='path to latest checkpoint')
parser.add_argument('--snapshot_pref', type=str, default="")
parser.add_argument('--start-epoch', default=0, type=int, metavar='N', help='manual epoch number')
parser.add_argument('--gpus', nargs='+', type=int, default=None)
best_prec1 = 0

def main(argv):
    global args, best_prec1
    args = parser.parse_args(argv)
    num_class = {'ucf101': 101, 'hmdb51': 51, 'kinetics': 400}[args.dataset]
    model = TSN(num_class, args.num_segments, args.modality, base_model=args.arch,
                consensus_type=args.consensus_type, dropout=args.dropout, partial_bn=not args.no_partialbn)
    crop_size, scale_size, input_mean, input_std = model.crop_size, model.scale_size, model.input_mean, model.input_std
    policies = model.get_optim_policies()
    train_augmentation = model.get_augmentation()

    model = torch.nn.DataParallel(model, device_ids=args.gpus)
    if torch.cuda.is_available():
        model = model.cuda()

    if args.resume:
        if os.path.isfile(args.resume):  # (else "=> no checkpoint found")
            print(("=> loading checkpoint '{}'".format(args.resume)))
            checkpoint = torch.load(args.resume)
            args.start_epoch = checkpoint['epoch']
            best_prec1 = checkpoint['best_prec1']
            model.load_state_dict(checkpoint['state_dict'])
            print(("=> loaded checkpoint '{}' (epoch {})".format(args.resume, checkpoint['epoch'])))

    cudnn.benchmark = True
    normalize, data_length = GroupNormalize(input_mean, input_std), 1  # modality == 'RGB'
    train_loader = torch.utils.data.DataLoader(
        TSNDataSet("", args.train_list, num_segments=args.num_segments, new_length=data_length,
                   modality=args.modality, image_tmpl="img_{:05d}.npy",
                   transform=Compose([train_augmentation, Stack(roll=args.arch == 'BNInception'),
                                      ToTorchFormatTensor(div=args.arch != 'BNInception'), normalize])),
        batch_size=args.batch_size, shuffle=True, num_workers=args.workers, pin_memory=True)
    val_loader = torch.utils.data.DataLoader(
        TSNDataSet("", args.val_list, num_segments=args.num_segments, new_length=data_length,
                   modality=args.modality, image_tmpl="img_{:05d}.npy", random_shift=False,
                   transform=Compose([GroupCenterCrop(crop_size),  # GroupScale(int(scale_size)) is the identity
                                      Stack(roll=args.arch == 'BNInception'),
                                      ToTorchFormatTensor(div=args.arch != 'BNInception'), normalize])),
        batch_size=args.batch_size, shuffle=False, num_workers=args.workers, pin_memory=True)

    criterion = torch.nn.CrossEntropyLoss()  # define loss function (criterion) and optimizer
    if torch.cuda.is_available():
        criterion = criterion.cuda()
    print(['group: {} has {} params'.format(group['name'], len(group['params'])) for group in policies])
    optimizer = torch.optim.SGD(policies, args.lr, momentum=args.momentum, weight_decay=args.weight_decay)

    for epoch in range(args.start_epoch, args.epochs):
        adjust_learning_rate(optimizer, epoch, args.lr_steps)
        train(train_loader, model, criterion, optimizer, epoch)
        if (epoch + 1) % args.eval_freq == 0 or epoch == args.epochs - 1:
            prec1 = validate(val_loader, model, criterion, (epoch + 1) * len(train_loader))
            is_best = prec1 > best_prec1
            best_prec1 = max(prec1, best_prec1)
            save_checkpoint({'epoch': epoch + 1, 'arch': args.arch, 'state_dict': model.state_dict(),
                             'best_prec1': best_prec1}, is_best)

def train(train_loader, model, criterion, optimizer, epoch):
    losses, top1, top5 = AverageMeter(), AverageMeter(), AverageMeter()  # (+ batch_time, data_time)
    if args.no_partialbn:
        model.module.partialBN(False)
    else:
        model.module.partialBN(True)
    model.train()  # switch to train mode
    for i, (input, target) in enumerate(train_loader):
        if torch.cuda.is_available():
            target = target.cuda(non_blocking=True)
        input_var = torch.autograd.Variable(input)
        target_var = torch.autograd.Variable(target)
        output = model(input_var)
        loss = criterion(output, target_var)
        prec1, prec5 = accuracy(output.data, target, topk=(1, 5))
        losses.update(loss.item(), input.size(0))
        top1.update(prec1[0], input.size(0))
        top5.update(prec5[0], input.size(0))
        optimizer.zero_grad()
        loss.backward()
        if args.clip_gradient is not None:
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_gradient)
            if total_norm > args.clip_gradient:
                print("clipping gradient: {} with coef {}".format(total_norm, args.clip_gradient / total_norm))
        optimizer.step()
        if i % args.print_freq == 0:
            print(('Epoch: [{0}][{1}/{2}], lr: {lr:.5f}\tLoss {loss.val:.4f} ({loss.avg:.4f})\t'
                   'Prec@1 {top1.val:.3f} ({top1.avg:.3f})\tPrec@5 {top5.val:.3f} ({top5.avg:.3f})'.format(
                       epoch, i, len(train_loader), loss=losses, top1=top1, top5=top5,
                       lr=optimizer.param_groups[-1]['lr'])))

def validate(val_loader, model, criterion, iter, logger=None):
    losses, top1, top5 = AverageMeter(), AverageMeter(), AverageMeter()
    model.eval()  # switch to evaluate mode
    with torch.no_grad():  # Variable(..., volatile=True)
        for i, (input, target) in enumerate(val_loader):
            if torch.cuda.is_available():
                target = target.cuda(non_blocking=True)
            output = model(input)
            loss = criterion(output, target)
            prec1, prec5 = accuracy(output.data, target, topk=(1, 5))
            losses.update(loss.item(), input.size(0))
            top1.update(prec1[0], input.size(0))
            top5.update(prec5[0], input.size(0))
    print(('Testing Results: Prec@1 {top1.avg:.3f} Prec@5 {top5.avg:.3f} Loss {loss.avg:.5f}'
           .format(top1=top1, top5=top5, loss=losses)))
    return top1.avg

def save_checkpoint(state, is_best, filename='checkpoint.pth.tar'):
    filename = '_'.join((args.snapshot_pref, args.modality.lower(), filename))
    torch.save(state, filename)
    if is_best:
        best_name = '_'.join((args.snapshot_pref, args.modality.lower(), 'model_best.pth.tar'))
        shutil.copyfile(filename, best_name)

class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self):
        self.reset()
    def reset(self):
        self.val = self.avg = self.sum = self.count = 0
    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val * n, self.count + n
        self.avg = self.sum / self.count

def adjust_learning_rate(optimizer, epoch, lr_steps):
    decay = 0.1 ** (sum(epoch >= np.array(lr_steps)))
    lr = args.lr * decay
    decay = args.weight_decay
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr * param_group['lr_mult']
        param_group['weight_decay'] = decay * param_group['decay_mult']

def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res

# ----------------------------------------------------------------------- synthetic "hmdb51" frames (not in repo)
def make_videos(root, split, n, rng, num_frames=12, size=36):
    lines = []
    for k in range(n):
        label, path = k % 4, os.path.join(root, split, 'v%03d' % k)
        os.makedirs(path)
        color, (y, x) = rng.randint(80, 255, size=3), rng.randint(8, size - 8, size=2)
        dy, dx = [(0, 2), (0, -2), (2, 0), (-2, 0)][label]
        for f in range(1, num_frames + 1):
            img = (rng.rand(size, size, 3) * 60).astype(np.uint8)
            yy, xx = (y + dy * f) % (size - 6), (x + dx * f) % (size - 6)
            img[yy:yy + 6, xx:xx + 6] = color
            np.save(os.path.join(path, 'img_{:05d}.npy'.format(f)), img)
        lines.append('%s %d %d\n' % (path, num_frames, label))
    list_file = os.path.join(root, '%s_list.txt' % split)
    with open(list_file, 'w') as f:
        f.writelines(lines)
    return list_file

if __name__ == '__main__':
    random.seed(0)
    train_list, val_list = [make_videos(FOLDER, split, n, np.random.RandomState(n)) for split, n in [('train', 24),
                                                                                                   ('val', 8)]]
    snapshot = os.path.join(FOLDER, 'hmdb51_resnet18')
    common = ['hmdb51', 'RGB', train_list, val_list, '--arch', 'resnet18', '--num_segments', '3', '--gd', '20',
              '--lr', '0.01', '--lr_steps', '2', '-b', '4', '-j', '0', '--eval-freq', '1', '--print-freq', '3',
              '--snapshot_pref', snapshot, '--gpus', '0']
    main(common + ['--epochs', '2'])
    main(common + ['--epochs', '3', '--resume', snapshot + '_rgb_checkpoint.pth.tar'])
    # ------------------------------------------------------------------------------------------ test_models.py
    test_parser = argparse.ArgumentParser(description="Standard video-level testing")
    test_parser.add_argument('dataset', type=str, choices=['ucf101', 'hmdb51', 'kinetics'])
    test_parser.add_argument('modality', type=str, choices=['RGB', 'Flow', 'RGBDiff'])
    test_parser.add_argument('test_list', type=str)
    test_parser.add_argument('weights', type=str)
    test_parser.add_argument('--arch', type=str, default="resnet101")
    test_parser.add_argument('--test_segments', type=int, default=25)
    test_parser.add_argument('--test_crops', type=int, default=10)
    test_parser.add_argument('--crop_fusion_type', type=str, default='avg', choices=['avg', 'max', 'topk'])
    test_parser.add_argument('--dropout', type=float, default=0.7)
    test_parser.add_argument('-j', '--workers', default=4, type=int, metavar='N')
    test_parser.add_argument('--gpus', nargs='+', type=int, default=None)
    args = test_parser.parse_args(['hmdb51', 'RGB', val_list, snapshot + '_rgb_model_best.pth.tar', '--arch',
                                   'resnet18', '--test_segments', '5', '--test_crops', '1', '-j', '1',
                                   '--gpus', '0'])

    num_class = {'ucf101': 101, 'hmdb51': 51, 'kinetics': 400}[args.dataset]
    net = TSN(num_class, 1, args.modality, base_model=args.arch, consensus_type=args.crop_fusion_type,
              dropout=args.dropout)
    checkpoint = torch.load(args.weights)
    print("model epoch {} best prec@1: {}".format(checkpoint['epoch'], checkpoint['best_prec1']))
    base_dict = {'.'.join(k.split('.')[1:]): v for k, v in list(checkpoint['state_dict'].items())}
    net.load_state_dict(base_dict)
    cropping = Compose([GroupCenterCrop(net.input_size)])  # test_crops == 1 (GroupScale(net.scale_size) is a no-op)
    data_loader = torch.utils.data.DataLoader(
        TSNDataSet("", args.test_list, num_segments=args.test_segments, new_length=1, modality=args.modality,
                   image_tmpl="img_{:05d}.npy", test_mode=True,
                   transform=Compose([cropping, Stack(roll=args.arch == 'BNInception'),
                                      ToTorchFormatTensor(div=args.arch != 'BNInception'),
                                      GroupNormalize(net.input_mean, net.input_std)])),
        batch_size=1, shuffle=False, num_workers=0, pin_memory=True)  # num_workers=args.workers * 2

    if args.gpus is not None:
        devices = [args.gpus[i] for i in range(args.workers)]
    else:
        devices = list(range(args.workers))
    if torch.cuda.is_available():
        net = net.cuda(devices[0])
    net = torch.nn.DataParallel(net, device_ids=devices)
    net.eval()
    data_gen, total_num, output = enumerate(data_loader), len(data_loader.dataset), []

    def eval_video(video_data):
        i, data, label = video_data
        num_crop, length = args.test_crops, 3  # args.modality == 'RGB'
        with torch.no_grad():  # Variable(..., volatile=True)
            input_var = data.view(-1, length, data.size(2), data.size(3))
            rst = net(input_var).data.cpu().numpy().copy()
        return i, rst.reshape((num_crop, args.test_segments, num_class)).mean(axis=0).reshape(
            (args.test_segments, 1, num_class)), label[0]

    proc_start_time = time.time()
    for i, (data, label) in data_gen:
        rst = eval_video((i, data, label))
        output.append(rst[1:])
        cnt_time = time.time() - proc_start_time
        print('video {} done, total {}/{}, average {:.3f} sec/video'.format(i, i+1, total_num, float(cnt_time) / (i+1)))
    video_pred, video_labels = [np.argmax(np.mean(x[0], axis=0)) for x in output], [x[1] for x in output]
    cf = confusion_matrix(video_labels, video_pred).astype(float)
    cls_acc = np.diag(cf) / cf.sum(axis=1)  # cls_hit / cls_cnt
    print(cls_acc)
    print('Accuracy {:.02f}%'.format(np.mean(cls_acc) * 100))
    print("done")
