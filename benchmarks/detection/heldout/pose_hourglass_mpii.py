"""Trains a stacked hourglass network for 2D human pose estimation (16 MPII joints, Gaussian heatmaps, intermediate
supervision, PCK accuracy from heatmap arg-maxes) on synthetic stick-figure images, resumes from the saved checkpoint
and runs the evaluation-only pass, as bearpaw/pytorch-pose does: a module-level ``device = torch.device("cuda" if
torch.cuda.is_available() else "cpu")``, ``torch.nn.DataParallel(model).to(device)`` and ``JointsMSELoss().to(device)``,
images, heatmaps and ``meta['target_weight']`` moved with ``.to(device, non_blocking=True)``, the training accuracy
computed from device outputs into CPU distance tensors, validation score maps brought back with ``output[-1].cpu()``
for the CPU accuracy and coordinate post-processing, and checkpoints (DataParallel state dict, optimizer state)
written with ``torch.save`` and read with ``torch.load`` without ``map_location``.

Modeled on: bearpaw/pytorch-pose, example/main.py, pose/models/hourglass.py, pose/losses/jointsmseloss.py,
pose/utils/evaluation.py, pose/utils/misc.py, pose/utils/transforms.py, pose/utils/imutils.py, pose/utils/logger.py
and pose/datasets/mpii.py at commit edc7aece651649927764435ce0c1f03cffa2edaf
(https://github.com/bearpaw/pytorch-pose/blob/edc7aece651649927764435ce0c1f03cffa2edaf/example/main.py,
https://github.com/bearpaw/pytorch-pose/blob/edc7aece651649927764435ce0c1f03cffa2edaf/pose/utils/evaluation.py).

Kept: example/main.py as written: the globals ``device``, ``best_acc`` and ``idx``; `main` (``DataParallel(model)
.to(device)``, ``JointsMSELoss().to(device)``, RMSprop, ``--resume`` with ``torch.load(args.resume)`` and the optimizer
state, ``--evaluate``, ``adjust_learning_rate``, ``save_checkpoint``); `train` (``.to(device, non_blocking=True)``,
stacked outputs, ``accuracy(output, target, idx)`` on device tensors, ``loss.item()``); `validate` (``torch.no_grad()``,
``output[-1].cpu()``, the ``--flip`` branch, ``accuracy(score_map, target.cpu(), idx)``, ``final_preds``, the CPU
``predictions`` tensor); the hourglass model, `JointsMSELoss`, evaluation.py (`calc_dists` fills a CPU
``torch.zeros`` from device distances), misc.py's checkpoint helpers, transforms.py's flip and coordinate transforms,
imutils.py's `draw_labelmap`, and the ``inp, target, meta`` items of `Mpii`.

Changed to run here: MPII images are replaced by `Mpii` drawing a jittered 16-joint stick figure at the network
resolution, so ``crop``, ``color_normalize`` and the scale/rotation/flip augmentations are left out; the progress bar
and logger are small stubs; ``final_preds`` gets the shrunk heatmap size instead of ``[64, 64]``; ``--flip`` stays off
(its default); the script runs three times: train, resume for one more epoch, evaluate only.
Shrunk: 256/64 pixel inputs/heatmaps -> 64/16, 8 stacks -> 2, 12 training / 8 validation images, batch 4, 2+1 epochs.
"""
import argparse
import math
import os
import shutil
import tempfile
import time

import numpy as np
import scipy.io
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data

# ---- pose/models/hourglass.py --------------------------------------------------------------------------------------
class Bottleneck(nn.Module):
    expansion = 2
    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(Bottleneck, self).__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(inplanes), nn.Conv2d(inplanes, planes, kernel_size=1, bias=True)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=stride, padding=1, bias=True)
        self.bn3, self.conv3 = nn.BatchNorm2d(planes), nn.Conv2d(planes, planes * 2, kernel_size=1, bias=True)
        self.relu = nn.ReLU(inplace=True)
        self.downsample, self.stride = downsample, stride
    def forward(self, x):
        residual = x
        out = self.conv1(self.relu(self.bn1(x)))
        out = self.conv2(self.relu(self.bn2(out)))
        out = self.conv3(self.relu(self.bn3(out)))
        if self.downsample is not None:
            residual = self.downsample(x)
        out += residual
        return out

class Hourglass(nn.Module):
    def __init__(self, block, num_blocks, planes, depth):
        super(Hourglass, self).__init__()
        self.depth = depth
        self.block = block
        self.hg = self._make_hour_glass(block, num_blocks, planes, depth)
    def _make_residual(self, block, num_blocks, planes):
        layers = []
        for i in range(0, num_blocks):
            layers.append(block(planes*block.expansion, planes))
        return nn.Sequential(*layers)
    def _make_hour_glass(self, block, num_blocks, planes, depth):
        hg = []
        for i in range(depth):
            res = []
            for j in range(3):
                res.append(self._make_residual(block, num_blocks, planes))
            if i == 0:
                res.append(self._make_residual(block, num_blocks, planes))
            hg.append(nn.ModuleList(res))
        return nn.ModuleList(hg)
    def _hour_glass_forward(self, n, x):
        up1 = self.hg[n-1][0](x)
        low1 = self.hg[n-1][1](F.max_pool2d(x, 2, stride=2))
        if n > 1:
            low2 = self._hour_glass_forward(n-1, low1)
        else:
            low2 = self.hg[n-1][3](low1)
        low3 = self.hg[n-1][2](low2)
        up2 = F.interpolate(low3, scale_factor=2)
        return up1 + up2
    def forward(self, x):
        return self._hour_glass_forward(self.depth, x)

class HourglassNet(nn.Module):
    '''Hourglass model from Newell et al ECCV 2016'''
    def __init__(self, block, num_stacks=2, num_blocks=4, num_classes=16):
        super(HourglassNet, self).__init__()
        self.inplanes, self.num_feats, self.num_stacks = 64, 128, num_stacks
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=True)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_residual(block, self.inplanes, 1)
        self.layer2 = self._make_residual(block, self.inplanes, 1)
        self.layer3 = self._make_residual(block, self.num_feats, 1)
        self.maxpool = nn.MaxPool2d(2, stride=2)
        ch = self.num_feats*block.expansion
        hg, res, fc, score, fc_, score_ = [], [], [], [], [], []
        for i in range(num_stacks):
            hg.append(Hourglass(block, num_blocks, self.num_feats, 4))
            res.append(self._make_residual(block, self.num_feats, num_blocks))
            fc.append(self._make_fc(ch, ch))
            score.append(nn.Conv2d(ch, num_classes, kernel_size=1, bias=True))
            if i < num_stacks-1:
                fc_.append(nn.Conv2d(ch, ch, kernel_size=1, bias=True))
                score_.append(nn.Conv2d(num_classes, ch, kernel_size=1, bias=True))
        self.hg, self.res, self.fc = nn.ModuleList(hg), nn.ModuleList(res), nn.ModuleList(fc)
        self.score, self.fc_, self.score_ = nn.ModuleList(score), nn.ModuleList(fc_), nn.ModuleList(score_)
    def _make_residual(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=True),
            )
        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample))
        self.inplanes = planes * block.expansion
        for i in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)
    def _make_fc(self, inplanes, outplanes):
        bn = nn.BatchNorm2d(inplanes)
        conv = nn.Conv2d(inplanes, outplanes, kernel_size=1, bias=True)
        return nn.Sequential(conv, bn, self.relu)
    def forward(self, x):
        out = []
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.maxpool(self.layer1(x))
        x = self.layer3(self.layer2(x))
        for i in range(self.num_stacks):
            y = self.fc[i](self.res[i](self.hg[i](x)))
            score = self.score[i](y)
            out.append(score)
            if i < self.num_stacks-1:
                fc_ = self.fc_[i](y)
                score_ = self.score_[i](score)
                x = x + fc_ + score_
        return out

def hg(**kwargs):
    model = HourglassNet(Bottleneck, num_stacks=kwargs['num_stacks'], num_blocks=kwargs['num_blocks'],
                         num_classes=kwargs['num_classes'])
    return model

models = {'hg': hg}

# ---- pose/losses/jointsmseloss.py ----------------------------------------------------------------------------------
class JointsMSELoss(nn.Module):
    def __init__(self, use_target_weight=True):
        super(JointsMSELoss, self).__init__()
        self.criterion = nn.MSELoss(reduction='mean')
        self.use_target_weight = use_target_weight
    def forward(self, output, target, target_weight):
        batch_size = output.size(0)
        num_joints = output.size(1)
        heatmaps_pred = output.reshape((batch_size, num_joints, -1)).split(1, 1)
        heatmaps_gt = target.reshape((batch_size, num_joints, -1)).split(1, 1)
        loss = 0
        for idx in range(num_joints):
            heatmap_pred = heatmaps_pred[idx].squeeze()
            heatmap_gt = heatmaps_gt[idx].squeeze()
            if self.use_target_weight:
                loss += 0.5 * self.criterion(
                    heatmap_pred.mul(target_weight[:, idx]),
                    heatmap_gt.mul(target_weight[:, idx])
                )
            else:
                loss += 0.5 * self.criterion(heatmap_pred, heatmap_gt)
        return loss / num_joints

# ---- pose/utils/misc.py, transforms.py, imutils.py, logger.py ------------------------------------------------------
def to_numpy(tensor):
    if torch.is_tensor(tensor):
        return tensor.detach().cpu().numpy()
    elif type(tensor).__module__ != 'numpy':
        raise ValueError("Cannot convert {} to numpy array".format(type(tensor)))
    return tensor

def to_torch(ndarray):
    if type(ndarray).__module__ == 'numpy':
        return torch.from_numpy(ndarray)
    elif not torch.is_tensor(ndarray):
        raise ValueError("Cannot convert {} to torch tensor".format(type(ndarray)))
    return ndarray

def save_checkpoint(state, preds, is_best, checkpoint='checkpoint', filename='checkpoint.pth.tar', snapshot=None):
    preds = to_numpy(preds)
    filepath = os.path.join(checkpoint, filename)
    torch.save(state, filepath)
    scipy.io.savemat(os.path.join(checkpoint, 'preds.mat'), mdict={'preds': preds})
    if snapshot and state.epoch % snapshot == 0:
        shutil.copyfile(filepath, os.path.join(checkpoint, 'checkpoint_{}.pth.tar'.format(state.epoch)))
    if is_best:
        shutil.copyfile(filepath, os.path.join(checkpoint, 'model_best.pth.tar'))
        scipy.io.savemat(os.path.join(checkpoint, 'preds_best.mat'), mdict={'preds': preds})

def save_pred(preds, checkpoint='checkpoint', filename='preds_valid.mat'):
    preds = to_numpy(preds)
    filepath = os.path.join(checkpoint, filename)
    scipy.io.savemat(filepath, mdict={'preds': preds})

def adjust_learning_rate(optimizer, epoch, lr, schedule, gamma):
    """Sets the learning rate to the initial LR decayed by schedule"""
    if epoch in schedule:
        lr *= gamma
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
    return lr

def flip_back(flip_output, dataset='mpii'):
    """flip output map"""
    matchedParts = ([0, 5], [1, 4], [2, 3], [10, 15], [11, 14], [12, 13])
    flip_output = fliplr(flip_output.numpy())
    for pair in matchedParts:
        tmp = np.copy(flip_output[:, pair[0], :, :])
        flip_output[:, pair[0], :, :] = flip_output[:, pair[1], :, :]
        flip_output[:, pair[1], :, :] = tmp
    return torch.from_numpy(flip_output).float()

def fliplr(x):
    if x.ndim == 3:
        x = np.transpose(np.fliplr(np.transpose(x, (0, 2, 1))), (0, 2, 1))
    elif x.ndim == 4:
        for i in range(x.shape[0]):
            x[i] = np.transpose(np.fliplr(np.transpose(x[i], (0, 2, 1))), (0, 2, 1))
    return x.astype(float)

def get_transform(center, scale, res, rot=0):
    """General image processing functions"""
    h = 200 * scale
    t = np.zeros((3, 3))
    t[0, 0] = float(res[1]) / h
    t[1, 1] = float(res[0]) / h
    t[0, 2] = res[1] * (-float(center[0]) / h + .5)
    t[1, 2] = res[0] * (-float(center[1]) / h + .5)
    t[2, 2] = 1
    return t

def transform(pt, center, scale, res, invert=0, rot=0):
    t = get_transform(center, scale, res, rot=rot)
    if invert:
        t = np.linalg.inv(t)
    new_pt = np.array([pt[0] - 1, pt[1] - 1, 1.]).T
    new_pt = np.dot(t, new_pt)
    return new_pt[:2].astype(int) + 1

def transform_preds(coords, center, scale, res):
    for p in range(coords.size(0)):
        coords[p, 0:2] = to_torch(transform(coords[p, 0:2], center, scale, res, 1, 0))
    return coords

def draw_labelmap(img, pt, sigma, type='Gaussian'):
    img = to_numpy(img)
    ul = [int(pt[0] - 3 * sigma), int(pt[1] - 3 * sigma)]
    br = [int(pt[0] + 3 * sigma + 1), int(pt[1] + 3 * sigma + 1)]
    if (ul[0] >= img.shape[1] or ul[1] >= img.shape[0] or br[0] < 0 or br[1] < 0):
        return to_torch(img), 0
    size = 6 * sigma + 1
    x = np.arange(0, size, 1, float)
    y = x[:, np.newaxis]
    x0 = y0 = size // 2
    g = np.exp(- ((x - x0) ** 2 + (y - y0) ** 2) / (2 * sigma ** 2))
    g_x = max(0, -ul[0]), min(br[0], img.shape[1]) - ul[0]
    g_y = max(0, -ul[1]), min(br[1], img.shape[0]) - ul[1]
    img_x = max(0, ul[0]), min(br[0], img.shape[1])
    img_y = max(0, ul[1]), min(br[1], img.shape[0])
    img[img_y[0]:img_y[1], img_x[0]:img_x[1]] = g[g_y[0]:g_y[1], g_x[0]:g_x[1]]
    return to_torch(img), 1

class Logger(object):
    '''Save training process to log file (plotting left out).'''
    def __init__(self, fpath, title=None, resume=False):
        self.resume = resume
        self.title = '' if title == None else title
        if resume:
            with open(fpath, 'r') as f:
                self.names = f.readline().rstrip().split('\t')
            self.file = open(fpath, 'a')
        else:
            self.file = open(fpath, 'w')
    def set_names(self, names):
        self.names = names
        self.file.write('\t'.join(names) + '\n')
    def append(self, numbers):
        assert len(self.names) == len(numbers), 'Numbers do not match names'
        self.file.write('\t'.join("{0:.6f}".format(num) for num in numbers) + '\n')
        self.file.flush()
    def close(self):
        self.file.close()

# ---- pose/utils/evaluation.py --------------------------------------------------------------------------------------
def get_preds(scores):
    ''' get predictions from score maps in torch Tensor
        return type: torch.LongTensor
    '''
    assert scores.dim() == 4, 'Score maps should be 4-dim'
    maxval, idx = torch.max(scores.view(scores.size(0), scores.size(1), -1), 2)
    maxval = maxval.view(scores.size(0), scores.size(1), 1)
    idx = idx.view(scores.size(0), scores.size(1), 1) + 1
    preds = idx.repeat(1, 1, 2).float()
    preds[:, :, 0] = (preds[:, :, 0] - 1) % scores.size(3) + 1
    preds[:, :, 1] = torch.floor((preds[:, :, 1] - 1) / scores.size(3)) + 1
    pred_mask = maxval.gt(0).repeat(1, 1, 2).float()
    preds *= pred_mask
    return preds

def calc_dists(preds, target, normalize):
    preds = preds.float()
    target = target.float()
    dists = torch.zeros(preds.size(1), preds.size(0))
    for n in range(preds.size(0)):
        for c in range(preds.size(1)):
            if target[n, c, 0] > 1 and target[n, c, 1] > 1:
                dists[c, n] = torch.dist(preds[n, c, :], target[n, c, :])/normalize[n]
            else:
                dists[c, n] = -1
    return dists

def dist_acc(dist, thr=0.5):
    ''' Return percentage below threshold while ignoring values with a -1 '''
    dist = dist[dist != -1]
    if len(dist) > 0:
        return 1.0 * (dist < thr).sum().item() / len(dist)
    else:
        return -1

def accuracy(output, target, idxs, thr=0.5):
    ''' Calculate accuracy according to PCK, but uses ground truth heatmap rather than x,y locations
        First value to be returned is average accuracy across 'idxs', followed by individual accuracies
    '''
    preds = get_preds(output)
    gts = get_preds(target)
    norm = torch.ones(preds.size(0))*output.size(3)/10
    dists = calc_dists(preds, gts, norm)
    acc = torch.zeros(len(idxs)+1)
    avg_acc = 0
    cnt = 0
    for i in range(len(idxs)):
        acc[i+1] = dist_acc(dists[idxs[i]-1])
        if acc[i+1] >= 0:
            avg_acc = avg_acc + acc[i+1]
            cnt += 1
    if cnt != 0:
        acc[0] = avg_acc / cnt
    return acc

def final_preds(output, center, scale, res):
    coords = get_preds(output)  # float type
    for n in range(coords.size(0)):
        for p in range(coords.size(1)):
            hm = output[n][p]
            px = int(math.floor(coords[n][p][0]))
            py = int(math.floor(coords[n][p][1]))
            if px > 1 and px < res[0] and py > 1 and py < res[1]:
                diff = torch.Tensor([hm[py - 1][px] - hm[py - 1][px - 2], hm[py][px - 1]-hm[py - 2][px - 1]])
                coords[n][p] += diff.sign() * .25
    coords += 0.5
    preds = coords.clone()
    for i in range(coords.size(0)):
        preds[i] = transform_preds(coords[i], center[i], scale[i], res)
    if preds.dim() < 3:
        preds = preds.view(1, preds.size())
    return preds

class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self):
        self.reset()
    def reset(self):
        self.val, self.avg, self.sum, self.count = 0, 0, 0, 0
    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

# ---- pose/datasets/mpii.py (images replaced) -----------------------------------------------------------------------
class Mpii(data.Dataset):
    """A 16-joint stick figure drawn at the network resolution; items laid out as in Mpii.__getitem__."""
    njoints = 16
    skeleton = [(0, 1), (1, 2), (2, 6), (6, 3), (3, 4), (4, 5), (6, 7), (7, 8), (8, 9), (10, 11), (11, 12), (12, 8),
                (8, 13), (13, 14), (14, 15)]
    def __init__(self, is_train=True, **kwargs):
        self.is_train = is_train
        self.inp_res = kwargs['inp_res']
        self.out_res = kwargs['out_res']
        self.sigma = kwargs['sigma']
        self.rng = np.random.RandomState(0 if is_train else 1)
        base = np.array([[22, 58], [24, 46], [27, 36], [37, 36], [40, 46], [42, 58], [32, 36], [32, 24], [32, 18],
                         [32, 9], [15, 32], [19, 27], [25, 20], [39, 20], [45, 27], [49, 32]], dtype=np.float32)
        self.anno = [base + self.rng.uniform(-3, 3, base.shape) for _ in range(12 if is_train else 8)]
    def __getitem__(self, index):
        pts = torch.Tensor(np.concatenate([self.anno[index], np.ones((16, 1))], 1))
        c = torch.Tensor([self.inp_res / 2, self.inp_res / 2])
        s = self.inp_res / 200.0
        nparts = pts.size(0)
        r = 0
        inp = torch.zeros(3, self.inp_res, self.inp_res)
        for a, b in self.skeleton:
            for t in np.linspace(0, 1, 12):
                x, y = (1 - t) * pts[a, :2] + t * pts[b, :2]
                inp[(a + b) % 3, int(y) - 1:int(y) + 1, int(x) - 1:int(x) + 1] = 1.0
        tpts = pts.clone()
        target = torch.zeros(nparts, self.out_res, self.out_res)
        target_weight = tpts[:, 2].clone().view(nparts, 1)
        for i in range(nparts):
            if tpts[i, 1] > 0:
                tpts[i, 0:2] = to_torch(transform(tpts[i, 0:2]+1, c, s, [self.out_res, self.out_res], rot=r))
                target[i], vis = draw_labelmap(target[i], tpts[i]-1, self.sigma, type='Gaussian')
                target_weight[i, 0] *= vis
        meta = {'index': index, 'center': c, 'scale': s, 'pts': pts, 'tpts': tpts, 'target_weight': target_weight}
        return inp, target, meta
    def __len__(self):
        return len(self.anno)

datasets = {'mpii': Mpii}

# ---- example/main.py -----------------------------------------------------------------------------------------------
class Bar(object):
    """Stand-in for progress.bar.Bar: prints the suffix at the end."""
    def __init__(self, message, max):
        self.message, self.max, self.suffix = message, max, ''
    def next(self):
        pass
    def finish(self):
        print(self.message, self.suffix)

# init global variables
best_acc = 0
idx = []

# select proper device to run
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
cudnn.benchmark = True  # There is BN issue for early version of PyTorch

def main(args):
    global best_acc
    global idx
    if args.dataset in ['mpii', 'lsp']:
        idx = [1, 2, 3, 4, 5, 6, 11, 12, 15, 16]
    else:
        print("Unknown dataset: {}".format(args.dataset))
        assert False
    if not os.path.isdir(args.checkpoint):
        os.makedirs(args.checkpoint)
    njoints = datasets[args.dataset].njoints
    print("==> creating model '{}', stacks={}, blocks={}".format(args.arch, args.stacks, args.blocks))
    model = models[args.arch](num_stacks=args.stacks, num_blocks=args.blocks, num_classes=njoints,
                              resnet_layers=args.resnet_layers)
    model = torch.nn.DataParallel(model).to(device)
    criterion = JointsMSELoss().to(device)
    if args.solver == 'rms':
        optimizer = torch.optim.RMSprop(model.parameters(), lr=args.lr, momentum=args.momentum,
                                        weight_decay=args.weight_decay)
    elif args.solver == 'adam':
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    else:
        print('Unknown solver: {}'.format(args.solver))
        assert False
    title = args.dataset + ' ' + args.arch
    if args.resume:
        if os.path.isfile(args.resume):
            print("=> loading checkpoint '{}'".format(args.resume))
            checkpoint = torch.load(args.resume)
            args.start_epoch = checkpoint['epoch']
            best_acc = checkpoint['best_acc']
            model.load_state_dict(checkpoint['state_dict'])
            optimizer.load_state_dict(checkpoint['optimizer'])
            print("=> loaded checkpoint '{}' (epoch {})".format(args.resume, checkpoint['epoch']))
            logger = Logger(os.path.join(args.checkpoint, 'log.txt'), title=title, resume=True)
        else:
            print("=> no checkpoint found at '{}'".format(args.resume))
    else:
        logger = Logger(os.path.join(args.checkpoint, 'log.txt'), title=title)
        logger.set_names(['Epoch', 'LR', 'Train Loss', 'Val Loss', 'Train Acc', 'Val Acc'])
    print('    Total params: %.2fM' % (sum(p.numel() for p in model.parameters())/1000000.0))
    train_dataset = datasets[args.dataset](is_train=True, **vars(args))
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.train_batch, shuffle=True,
                                               num_workers=args.workers, pin_memory=True)
    val_dataset = datasets[args.dataset](is_train=False, **vars(args))
    val_loader = torch.utils.data.DataLoader(val_dataset, batch_size=args.test_batch, shuffle=False,
                                             num_workers=args.workers, pin_memory=True)
    if args.evaluate:
        print('\nEvaluation only')
        loss, acc, predictions = validate(val_loader, model, criterion, njoints, args.debug, args.flip)
        save_pred(predictions, checkpoint=args.checkpoint)
        return loss, acc
    lr = args.lr
    for epoch in range(args.start_epoch, args.epochs):
        lr = adjust_learning_rate(optimizer, epoch, lr, args.schedule, args.gamma)
        print('\nEpoch: %d | LR: %.8f' % (epoch + 1, lr))
        if args.sigma_decay > 0:
            train_loader.dataset.sigma *= args.sigma_decay
            val_loader.dataset.sigma *= args.sigma_decay
        train_loss, train_acc = train(train_loader, model, criterion, optimizer, args.debug, args.flip)
        valid_loss, valid_acc, predictions = validate(val_loader, model, criterion, njoints, args.debug, args.flip)
        logger.append([epoch + 1, lr, train_loss, valid_loss, train_acc, valid_acc])
        is_best = valid_acc > best_acc
        best_acc = max(valid_acc, best_acc)
        save_checkpoint({
            'epoch': epoch + 1,
            'arch': args.arch,
            'state_dict': model.state_dict(),
            'best_acc': best_acc,
            'optimizer': optimizer.state_dict(),
        }, predictions, is_best, checkpoint=args.checkpoint, snapshot=args.snapshot)
    logger.close()
    return valid_loss, valid_acc

def train(train_loader, model, criterion, optimizer, debug=False, flip=True):
    batch_time, data_time, losses, acces = AverageMeter(), AverageMeter(), AverageMeter(), AverageMeter()
    model.train()
    end = time.time()
    bar = Bar('Train', max=len(train_loader))
    for i, (input, target, meta) in enumerate(train_loader):
        data_time.update(time.time() - end)
        input, target = input.to(device), target.to(device, non_blocking=True)
        target_weight = meta['target_weight'].to(device, non_blocking=True)
        output = model(input)
        if type(output) == list:  # multiple output
            loss = 0
            for o in output:
                loss += criterion(o, target, target_weight)
            output = output[-1]
        else:  # single output
            loss = criterion(output, target, target_weight)
        acc = accuracy(output, target, idx)
        losses.update(loss.item(), input.size(0))
        acces.update(acc[0], input.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch_time.update(time.time() - end)
        end = time.time()
        bar.suffix = '({batch}/{size}) Batch: {bt:.3f}s | Loss: {loss:.4f} | Acc: {acc: .4f}'.format(
            batch=i + 1, size=len(train_loader), bt=batch_time.val, loss=losses.avg, acc=acces.avg)
        bar.next()
    bar.finish()
    return losses.avg, acces.avg

def validate(val_loader, model, criterion, num_classes, debug=False, flip=True):
    batch_time, data_time, losses, acces = AverageMeter(), AverageMeter(), AverageMeter(), AverageMeter()
    predictions = torch.Tensor(val_loader.dataset.__len__(), num_classes, 2)
    model.eval()
    end = time.time()
    bar = Bar('Eval ', max=len(val_loader))
    with torch.no_grad():
        for i, (input, target, meta) in enumerate(val_loader):
            data_time.update(time.time() - end)
            input = input.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            target_weight = meta['target_weight'].to(device, non_blocking=True)
            output = model(input)
            score_map = output[-1].cpu() if type(output) == list else output.cpu()
            if flip:
                flip_input = torch.from_numpy(fliplr(input.clone().numpy())).float().to(device)
                flip_output = model(flip_input)
                flip_output = flip_output[-1].cpu() if type(flip_output) == list else flip_output.cpu()
                flip_output = flip_back(flip_output)
                score_map += flip_output
            if type(output) == list:  # multiple output
                loss = 0
                for o in output:
                    loss += criterion(o, target, target_weight)
                output = output[-1]
            else:  # single output
                loss = criterion(output, target, target_weight)
            acc = accuracy(score_map, target.cpu(), idx)
            preds = final_preds(score_map, meta['center'], meta['scale'], [16, 16])
            for n in range(score_map.size(0)):
                predictions[meta['index'][n], :, :] = preds[n, :, :]
            losses.update(loss.item(), input.size(0))
            acces.update(acc[0], input.size(0))
            batch_time.update(time.time() - end)
            end = time.time()
            bar.suffix = '({batch}/{size}) Batch: {bt:.3f}s | Loss: {loss:.4f} | Acc: {acc: .4f}'.format(
                batch=i + 1, size=len(val_loader), bt=batch_time.avg, loss=losses.avg, acc=acces.avg)
            bar.next()
        bar.finish()
    return losses.avg, acces.avg, predictions

def parse_args(argv):
    parser = argparse.ArgumentParser(description='PyTorch ImageNet Training')
    parser.add_argument('--dataset', metavar='DATASET', default='mpii', choices=sorted(datasets))
    parser.add_argument('--inp-res', default=64, type=int)
    parser.add_argument('--out-res', default=16, type=int)
    parser.add_argument('--arch', '-a', metavar='ARCH', default='hg', choices=sorted(models))
    parser.add_argument('-s', '--stacks', default=2, type=int, metavar='N')
    parser.add_argument('--resnet-layers', default=50, type=int, metavar='N', choices=[18, 34, 50, 101, 152])
    parser.add_argument('-b', '--blocks', default=1, type=int, metavar='N')
    parser.add_argument('--solver', metavar='SOLVER', default='rms', choices=['rms', 'adam'])
    parser.add_argument('-j', '--workers', default=0, type=int, metavar='N')
    parser.add_argument('--epochs', default=2, type=int, metavar='N')
    parser.add_argument('--start-epoch', default=0, type=int, metavar='N')
    parser.add_argument('--train-batch', default=4, type=int, metavar='N')
    parser.add_argument('--test-batch', default=4, type=int, metavar='N')
    parser.add_argument('--lr', '--learning-rate', default=2.5e-4, type=float, metavar='LR')
    parser.add_argument('--momentum', default=0, type=float, metavar='M')
    parser.add_argument('--weight-decay', '--wd', default=0, type=float, metavar='W')
    parser.add_argument('--schedule', type=int, nargs='+', default=[60, 90])
    parser.add_argument('--gamma', type=float, default=0.1)
    parser.add_argument('-f', '--flip', dest='flip', action='store_true')
    parser.add_argument('--sigma', type=float, default=1)
    parser.add_argument('--sigma-decay', type=float, default=0)
    parser.add_argument('-c', '--checkpoint', default='checkpoint', type=str, metavar='PATH')
    parser.add_argument('--snapshot', default=0, type=int)
    parser.add_argument('--resume', default='', type=str, metavar='PATH')
    parser.add_argument('-e', '--evaluate', dest='evaluate', action='store_true')
    parser.add_argument('-d', '--debug', dest='debug', action='store_true')
    return parser.parse_args(argv)

def run():
    folder = tempfile.mkdtemp(prefix='pose_')
    try:
        checkpoint = os.path.join(folder, 'checkpoint', 'mpii', 'hg_s2_b1')
        first = main(parse_args(['-c', checkpoint]))
        resumed = main(parse_args(['-c', checkpoint, '--epochs', '3',
                                   '--resume', os.path.join(checkpoint, 'checkpoint.pth.tar')]))
        evaluated = main(parse_args(['-c', checkpoint, '-e', '--resume', os.path.join(checkpoint, 'checkpoint.pth.tar')]))
        saved = scipy.io.loadmat(os.path.join(checkpoint, 'preds_valid.mat'))['preds']
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print('done: val loss {:.5f} -> {:.5f}, val acc {:.3f}, evaluation acc {:.3f}, predictions {}'.format(
        first[0], resumed[0], float(resumed[1]), float(evaluated[1]), saved.shape))

if __name__ == '__main__':
    run()
