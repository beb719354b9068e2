"""Trains FixMatch (Sohn et al., "FixMatch: Simplifying Semi-Supervised Learning with Consistency and Confidence")
on a CIFAR-10-style set with a handful of labels, then resumes from its checkpoint, as kekmodel/FixMatch-pytorch's
train.py does: ``args.device`` is chosen once in `main` (``torch.device('cuda', args.gpu_id)``), the WideResNet is
moved with ``model.to(args.device)`` before the SGD optimizer (decay / no-decay parameter groups) and the cosine
warm-up ``LambdaLR`` are built, `ModelEMA` deep-copies the model and calls ``self.ema.to(args.device)``, updating its
parameters and buffers in place through ``state_dict()`` under ``torch.no_grad()``; each step interleaves the
labelled batch with the weak and strong unlabelled views on the host and moves them with one
``.to(args.device)``, ``targets_x.to(args.device)``, forms pseudo-labels from ``logits_u_w.detach()`` and a
``max_probs.ge(threshold).float()`` mask, and reads losses with ``.item()``; `test` evaluates the EMA model under
``torch.no_grad()`` with ``model.eval()``; checkpoints hold model, EMA, optimizer and scheduler states and are
reloaded with ``torch.load(args.resume)``.

Modeled on: kekmodel/FixMatch-pytorch, train.py, models/ema.py, models/wideresnet.py, dataset/cifar.py,
dataset/randaugment.py and utils/misc.py at commit 040be3b8950300b052f810df31a0c6c09561e09f
(https://github.com/kekmodel/FixMatch-pytorch/tree/040be3b8950300b052f810df31a0c6c09561e09f).

Kept: `save_checkpoint`, `set_seed` (with ``torch.cuda.manual_seed_all`` when ``args.n_gpu > 0``),
`get_cosine_schedule_with_warmup`, `interleave`/`de_interleave`, `main` (argument parsing, model creation, grouped
SGD, EMA, resume: ``best_acc``, ``start_epoch``, model/EMA/optimizer/scheduler states), `train` (two cycling
iterators, ``model.zero_grad()`` after each step, EMA update, per-epoch test of ``ema_model.ema``, checkpoint with
``model.module if hasattr(model, "module")``), `test` (top-1/top-5 with `accuracy`), `ModelEMA`, `WideResNet`
(BasicBlock, NetworkBlock, init loop), `x_u_split` (labelled indices expanded to fill ``eval_step`` batches),
`TransformFixMatch`, `CIFAR10SSL`, `AverageMeter`, `accuracy`.

Changed to run here: ``args.device`` falls back to the CPU when CUDA is missing (the original always builds
``torch.device('cuda', args.gpu_id)``); ``labeled_iter.next()`` becomes ``next(labeled_iter)``; CIFAR-10 is
replaced by synthetic 16x16 colour images (class-dependent colour and stripe orientation) made in memory; the
torchvision/PIL transforms and RandAugmentMC are numpy stand-ins (flip, reflect-padded crop, a five-op RandAugment
pool, cutout); the apex AMP and distributed branches, tqdm progress bars and TensorBoard scalars are left out;
``--out`` is a temporary folder; the script trains, then resumes from its checkpoint; test batch is 4x the batch.
Shrunk: WideResNet-10-1 instead of 28-2; 400 training images with 40 labels, 200 test images; batch 8, mu 3,
eval_step 4, total_steps 8 (12 after resuming) instead of 2**20; threshold 0.6 instead of 0.95; EMA decay 0.9
instead of 0.999.
"""
import argparse
import logging
import math
import os
import random
import shutil
import tempfile
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler

logger = logging.getLogger(__name__)
best_acc = 0


# ---------------------------------------------------------------- utils/misc.py
def accuracy(output, target, topk=(1,)):
    """Computes the precision@k for the specified values of k"""
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res


class AverageMeter(object):
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


# ---------------------------------------------------------------- models/wideresnet.py, models/ema.py
class BasicBlock(nn.Module):
    def __init__(self, in_planes, out_planes, stride, drop_rate=0.0, activate_before_residual=False):
        super(BasicBlock, self).__init__()
        self.bn1 = nn.BatchNorm2d(in_planes, momentum=0.001)
        self.relu1 = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.conv1 = nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_planes, momentum=0.001)
        self.relu2 = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.conv2 = nn.Conv2d(out_planes, out_planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.drop_rate = drop_rate
        self.equalInOut = (in_planes == out_planes)
        self.convShortcut = (not self.equalInOut) and nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride,
                                                                padding=0, bias=False) or None
        self.activate_before_residual = activate_before_residual

    def forward(self, x):
        if not self.equalInOut and self.activate_before_residual == True:
            x = self.relu1(self.bn1(x))
        else:
            out = self.relu1(self.bn1(x))
        out = self.relu2(self.bn2(self.conv1(out if self.equalInOut else x)))
        if self.drop_rate > 0:
            out = F.dropout(out, p=self.drop_rate, training=self.training)
        out = self.conv2(out)
        return torch.add(x if self.equalInOut else self.convShortcut(x), out)


class NetworkBlock(nn.Module):
    def __init__(self, nb_layers, in_planes, out_planes, block, stride, drop_rate=0.0, activate_before_residual=False):
        super(NetworkBlock, self).__init__()
        layers = []
        for i in range(int(nb_layers)):
            layers.append(block(i == 0 and in_planes or out_planes, out_planes,
                                i == 0 and stride or 1, drop_rate, activate_before_residual))
        self.layer = nn.Sequential(*layers)

    def forward(self, x):
        return self.layer(x)


class WideResNet(nn.Module):
    def __init__(self, num_classes, depth=28, widen_factor=2, drop_rate=0.0):
        super(WideResNet, self).__init__()
        channels = [16, 16 * widen_factor, 32 * widen_factor, 64 * widen_factor]
        assert((depth - 4) % 6 == 0)
        n = (depth - 4) / 6
        block = BasicBlock
        self.conv1 = nn.Conv2d(3, channels[0], kernel_size=3, stride=1, padding=1, bias=False)
        self.block1 = NetworkBlock(n, channels[0], channels[1], block, 1, drop_rate, activate_before_residual=True)
        self.block2 = NetworkBlock(n, channels[1], channels[2], block, 2, drop_rate)
        self.block3 = NetworkBlock(n, channels[2], channels[3], block, 2, drop_rate)
        self.bn1 = nn.BatchNorm2d(channels[3], momentum=0.001)
        self.relu = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.fc = nn.Linear(channels[3], num_classes)
        self.channels = channels[3]
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='leaky_relu')
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1.0)
                nn.init.constant_(m.bias, 0.0)
            elif isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                nn.init.constant_(m.bias, 0.0)

    def forward(self, x):
        out = self.conv1(x)
        out = self.block1(out)
        out = self.block2(out)
        out = self.block3(out)
        out = self.relu(self.bn1(out))
        out = F.adaptive_avg_pool2d(out, 1)
        out = out.view(-1, self.channels)
        return self.fc(out)


def build_wideresnet(depth, widen_factor, dropout, num_classes):
    logger.info(f"Model: WideResNet {depth}x{widen_factor}")
    return WideResNet(depth=depth, widen_factor=widen_factor, drop_rate=dropout, num_classes=num_classes)


class ModelEMA(object):
    def __init__(self, args, model, decay):
        self.ema = deepcopy(model)
        self.ema.to(args.device)
        self.ema.eval()
        self.decay = decay
        self.ema_has_module = hasattr(self.ema, 'module')
        # Fix EMA. https://github.com/valencebond/FixMatch_pytorch thank you!
        self.param_keys = [k for k, _ in self.ema.named_parameters()]
        self.buffer_keys = [k for k, _ in self.ema.named_buffers()]
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        needs_module = hasattr(model, 'module') and not self.ema_has_module
        with torch.no_grad():
            msd = model.state_dict()
            esd = self.ema.state_dict()
            for k in self.param_keys:
                j = 'module.' + k if needs_module else k
                model_v = msd[j].detach()
                ema_v = esd[k]
                esd[k].copy_(ema_v * self.decay + (1. - self.decay) * model_v)
            for k in self.buffer_keys:
                j = 'module.' + k if needs_module else k
                esd[k].copy_(msd[j])


# ---------------------------------------------------------------- dataset/cifar.py, dataset/randaugment.py
cifar10_mean = (0.4914, 0.4822, 0.4465)
cifar10_std = (0.2471, 0.2435, 0.2616)


def make_synthetic_cifar(n, size, seed):
    rng = np.random.RandomState(seed)
    targets = rng.randint(0, 10, size=n)
    yy, xx = np.mgrid[0:size, 0:size]
    data = np.zeros((n, size, size, 3), dtype=np.uint8)
    for i, t in enumerate(targets):
        colour = np.array([(t * 37) % 256, (t * 91) % 256, (t * 53) % 256]) / 255.
        angle = np.pi * (t % 5) / 5
        stripes = 0.5 + 0.5 * np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * (1 + t // 5) + rng.rand() * 6)
        img = stripes[..., None] * colour + 0.1 * rng.randn(size, size, 3)
        data[i] = (np.clip(img, 0, 1) * 255).astype(np.uint8)
    return data, targets.tolist()


def random_flip_crop(img, size):
    if random.random() < 0.5:
        img = img[:, ::-1]
    pad = int(size * 0.125)
    img = np.pad(img, ((pad, pad), (pad, pad), (0, 0)), mode='reflect')
    y, x = np.random.randint(0, 2 * pad + 1, size=2)
    return img[y:y + size, x:x + size]


def CutoutAbs(img, v):
    h, w = img.shape[:2]
    x0, y0 = int(max(0, np.random.uniform(0, w) - v / 2.)), int(max(0, np.random.uniform(0, h) - v / 2.))
    img = img.copy()
    img[y0:min(h, y0 + v), x0:min(w, x0 + v)] = 127  # gray
    return img


class RandAugmentMC(object):
    def __init__(self, n, m):
        assert n >= 1
        assert 1 <= m <= 10
        self.n = n
        self.m = m
        self.augment_pool = [
            (lambda img, v: img, 1),  # Identity
            (lambda img, v: np.clip(img.astype(np.float32) * (0.05 + v), 0, 255).astype(np.uint8), 0.9),  # Brightness
            (lambda img, v: np.clip((img - img.mean()) * (0.05 + v) + img.mean(), 0, 255).astype(np.uint8), 0.9),
            (lambda img, v: np.where(img < 256 - int(v), img, 255 - img).astype(np.uint8), 256),  # Solarize
            (lambda img, v: np.roll(img, int(v * img.shape[1]), axis=1), 0.3),  # TranslateX
        ]

    def __call__(self, img):
        ops = random.choices(self.augment_pool, k=self.n)
        for op, max_v in ops:
            v = np.random.randint(1, self.m)
            if random.random() < 0.5:
                img = op(img, v * max_v / 10)
        img = CutoutAbs(img, int(img.shape[0] * 0.5))
        return img


def normalize(img, mean, std):
    x = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float().div(255)
    return (x - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)


class TransformFixMatch(object):
    def __init__(self, mean, std, size):
        self.mean, self.std, self.size = mean, std, size
        self.strong_aug = RandAugmentMC(n=2, m=10)

    def __call__(self, x):
        weak = random_flip_crop(x, self.size)
        strong = self.strong_aug(random_flip_crop(x, self.size))
        return normalize(weak, self.mean, self.std), normalize(strong, self.mean, self.std)


class CIFAR10SSL(Dataset):
    def __init__(self, base, indexs, transform=None):
        self.data, self.targets = base
        if indexs is not None:
            self.data = self.data[indexs]
            self.targets = np.array(self.targets)[indexs]
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        img, target = self.data[index], self.targets[index]
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def x_u_split(args, labels):
    label_per_class = args.num_labeled // args.num_classes
    labels = np.array(labels)
    labeled_idx = []
    # unlabeled data: all data (https://github.com/kekmodel/FixMatch-pytorch/issues/10)
    unlabeled_idx = np.array(range(len(labels)))
    for i in range(args.num_classes):
        idx = np.where(labels == i)[0]
        idx = np.random.choice(idx, label_per_class, False)
        labeled_idx.extend(idx)
    labeled_idx = np.array(labeled_idx)
    assert len(labeled_idx) == args.num_labeled
    if args.expand_labels or args.num_labeled < args.batch_size:
        num_expand_x = math.ceil(args.batch_size * args.eval_step / args.num_labeled)
        labeled_idx = np.hstack([labeled_idx for _ in range(num_expand_x)])
    np.random.shuffle(labeled_idx)
    return labeled_idx, unlabeled_idx


def get_cifar10(args, size=16):
    transform_labeled = lambda x: normalize(random_flip_crop(x, size), cifar10_mean, cifar10_std)
    transform_val = lambda x: normalize(x, cifar10_mean, cifar10_std)
    base_dataset = make_synthetic_cifar(400, size, seed=1)
    train_labeled_idxs, train_unlabeled_idxs = x_u_split(args, base_dataset[1])
    train_labeled_dataset = CIFAR10SSL(base_dataset, train_labeled_idxs, transform=transform_labeled)
    train_unlabeled_dataset = CIFAR10SSL(base_dataset, train_unlabeled_idxs,
                                         transform=TransformFixMatch(cifar10_mean, cifar10_std, size))
    test_dataset = CIFAR10SSL(make_synthetic_cifar(200, size, seed=2), None, transform=transform_val)
    return train_labeled_dataset, train_unlabeled_dataset, test_dataset


DATASET_GETTERS = {'cifar10': get_cifar10}


# ---------------------------------------------------------------- train.py
def save_checkpoint(state, is_best, checkpoint, filename='checkpoint.pth.tar'):
    filepath = os.path.join(checkpoint, filename)
    torch.save(state, filepath)
    if is_best:
        shutil.copyfile(filepath, os.path.join(checkpoint, 'model_best.pth.tar'))


def set_seed(args):
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.n_gpu > 0:
        torch.cuda.manual_seed_all(args.seed)


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=7. / 16.,
                                    last_epoch=-1):
    def _lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        no_progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0., math.cos(math.pi * num_cycles * no_progress))

    return LambdaLR(optimizer, _lr_lambda, last_epoch)


def interleave(x, size):
    s = list(x.shape)
    return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def de_interleave(x, size):
    s = list(x.shape)
    return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def main(argv):
    parser = argparse.ArgumentParser(description='PyTorch FixMatch Training')
    parser.add_argument('--gpu-id', default='0', type=int)
    parser.add_argument('--num-workers', type=int, default=0)
    parser.add_argument('--dataset', default='cifar10', type=str, choices=['cifar10'])
    parser.add_argument('--num-labeled', type=int, default=40)
    parser.add_argument("--expand-labels", action="store_true")
    parser.add_argument('--arch', default='wideresnet', type=str, choices=['wideresnet'])
    parser.add_argument('--total-steps', default=8, type=int)
    parser.add_argument('--eval-step', default=4, type=int)
    parser.add_argument('--start-epoch', default=0, type=int)
    parser.add_argument('--batch-size', default=8, type=int)
    parser.add_argument('--lr', '--learning-rate', default=0.03, type=float)
    parser.add_argument('--warmup', default=0, type=float)
    parser.add_argument('--wdecay', default=5e-4, type=float)
    parser.add_argument('--nesterov', action='store_true', default=True)
    parser.add_argument('--use-ema', action='store_true', default=True)
    parser.add_argument('--ema-decay', default=0.9, type=float)
    parser.add_argument('--mu', default=3, type=int)
    parser.add_argument('--lambda-u', default=1, type=float)
    parser.add_argument('--T', default=1, type=float)
    parser.add_argument('--threshold', default=0.6, type=float)
    parser.add_argument('--out', default='result')
    parser.add_argument('--resume', default='', type=str)
    parser.add_argument('--seed', default=None, type=int)
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args(argv)
    global best_acc

    def create_model(args):
        model = build_wideresnet(depth=args.model_depth, widen_factor=args.model_width, dropout=0,
                                 num_classes=args.num_classes)
        logger.info("Total params: {:.2f}M".format(sum(p.numel() for p in model.parameters()) / 1e6))
        return model

    device = torch.device('cuda', args.gpu_id) if torch.cuda.is_available() else torch.device('cpu')
    args.world_size = 1
    args.n_gpu = torch.cuda.device_count()
    args.device = device
    logger.warning(f"Process rank: {args.local_rank}, device: {args.device}, n_gpu: {args.n_gpu}")
    if args.seed is not None:
        set_seed(args)
    os.makedirs(args.out, exist_ok=True)
    args.num_classes = 10
    args.model_depth = 10
    args.model_width = 1

    labeled_dataset, unlabeled_dataset, test_dataset = DATASET_GETTERS[args.dataset](args)
    labeled_trainloader = DataLoader(labeled_dataset, sampler=RandomSampler(labeled_dataset),
                                     batch_size=args.batch_size, num_workers=args.num_workers, drop_last=True)
    unlabeled_trainloader = DataLoader(unlabeled_dataset, sampler=RandomSampler(unlabeled_dataset),
                                       batch_size=args.batch_size * args.mu, num_workers=args.num_workers,
                                       drop_last=True)
    test_loader = DataLoader(test_dataset, sampler=SequentialSampler(test_dataset), batch_size=args.batch_size * 4,
                             num_workers=args.num_workers)

    model = create_model(args)
    model.to(args.device)

    no_decay = ['bias', 'bn']
    grouped_parameters = [
        {'params': [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         'weight_decay': args.wdecay},
        {'params': [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], 'weight_decay': 0.0}
    ]
    optimizer = optim.SGD(grouped_parameters, lr=args.lr, momentum=0.9, nesterov=args.nesterov)
    args.epochs = math.ceil(args.total_steps / args.eval_step)
    scheduler = get_cosine_schedule_with_warmup(optimizer, args.warmup, args.total_steps)
    if args.use_ema:
        ema_model = ModelEMA(args, model, args.ema_decay)
    args.start_epoch = 0
    if args.resume:
        logger.info("==> Resuming from checkpoint..")
        assert os.path.isfile(args.resume), "Error: no checkpoint directory found!"
        args.out = os.path.dirname(args.resume)
        checkpoint = torch.load(args.resume)
        best_acc = checkpoint['best_acc']
        args.start_epoch = checkpoint['epoch']
        model.load_state_dict(checkpoint['state_dict'])
        if args.use_ema:
            ema_model.ema.load_state_dict(checkpoint['ema_state_dict'])
        optimizer.load_state_dict(checkpoint['optimizer'])
        scheduler.load_state_dict(checkpoint['scheduler'])
        print('resumed at epoch %d, best acc %.2f' % (args.start_epoch, best_acc))
    logger.info(f"  Num Epochs = {args.epochs}, total optimization steps = {args.total_steps}")
    model.zero_grad()
    train(args, labeled_trainloader, unlabeled_trainloader, test_loader, model, optimizer, ema_model, scheduler)


def train(args, labeled_trainloader, unlabeled_trainloader, test_loader, model, optimizer, ema_model, scheduler):
    global best_acc
    test_accs = []
    labeled_iter = iter(labeled_trainloader)
    unlabeled_iter = iter(unlabeled_trainloader)
    model.train()
    for epoch in range(args.start_epoch, args.epochs):
        losses, losses_x, losses_u, mask_probs = AverageMeter(), AverageMeter(), AverageMeter(), AverageMeter()
        for batch_idx in range(args.eval_step):
            try:
                inputs_x, targets_x = next(labeled_iter)
            except StopIteration:
                labeled_iter = iter(labeled_trainloader)
                inputs_x, targets_x = next(labeled_iter)
            try:
                (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)
            except StopIteration:
                unlabeled_iter = iter(unlabeled_trainloader)
                (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)
            batch_size = inputs_x.shape[0]
            inputs = interleave(torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * args.mu + 1).to(args.device)
            targets_x = targets_x.to(args.device)
            logits = model(inputs)
            logits = de_interleave(logits, 2 * args.mu + 1)
            logits_x = logits[:batch_size]
            logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
            del logits
            Lx = F.cross_entropy(logits_x, targets_x, reduction='mean')
            pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
            max_probs, targets_u = torch.max(pseudo_label, dim=-1)
            mask = max_probs.ge(args.threshold).float()
            Lu = (F.cross_entropy(logits_u_s, targets_u, reduction='none') * mask).mean()
            loss = Lx + args.lambda_u * Lu
            loss.backward()
            losses.update(loss.item())
            losses_x.update(Lx.item())
            losses_u.update(Lu.item())
            optimizer.step()
            scheduler.step()
            if args.use_ema:
                ema_model.update(model)
            model.zero_grad()
            mask_probs.update(mask.mean().item())
        print("Train Epoch: {epoch}/{epochs:4}. LR: {lr:.4f}. Loss: {loss:.4f}. Loss_x: {loss_x:.4f}. "
              "Loss_u: {loss_u:.4f}. Mask: {mask:.2f}.".format(
                  epoch=epoch + 1, epochs=args.epochs, lr=scheduler.get_last_lr()[0], loss=losses.avg,
                  loss_x=losses_x.avg, loss_u=losses_u.avg, mask=mask_probs.avg))
        if args.use_ema:
            test_model = ema_model.ema
        else:
            test_model = model
        if args.local_rank in [-1, 0]:
            test_loss, test_acc = test(args, test_loader, test_model, epoch)
            is_best = test_acc > best_acc
            best_acc = max(test_acc, best_acc)
            model_to_save = model.module if hasattr(model, "module") else model
            if args.use_ema:
                ema_to_save = ema_model.ema.module if hasattr(ema_model.ema, "module") else ema_model.ema
            save_checkpoint({
                'epoch': epoch + 1,
                'state_dict': model_to_save.state_dict(),
                'ema_state_dict': ema_to_save.state_dict() if args.use_ema else None,
                'acc': test_acc,
                'best_acc': best_acc,
                'optimizer': optimizer.state_dict(),
                'scheduler': scheduler.state_dict(),
            }, is_best, args.out)
            test_accs.append(test_acc)
            logger.info('Best top-1 acc: {:.2f}'.format(best_acc))
            logger.info('Mean top-1 acc: {:.2f}\n'.format(np.mean(test_accs[-20:])))


def test(args, test_loader, model, epoch):
    losses, top1, top5 = AverageMeter(), AverageMeter(), AverageMeter()
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(test_loader):
            model.eval()
            inputs = inputs.to(args.device)
            targets = targets.to(args.device)
            outputs = model(inputs)
            loss = F.cross_entropy(outputs, targets)
            prec1, prec5 = accuracy(outputs, targets, topk=(1, 5))
            losses.update(loss.item(), inputs.shape[0])
            top1.update(prec1.item(), inputs.shape[0])
            top5.update(prec5.item(), inputs.shape[0])
    print("Test epoch {}: loss {:.4f}, top-1 acc: {:.2f}, top-5 acc: {:.2f}".format(
        epoch + 1, losses.avg, top1.avg, top5.avg))
    return losses.avg, top1.avg


if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as out:
        main(['--seed', '5', '--out', out])
        main(['--seed', '5', '--out', out, '--total-steps', '12',
              '--resume', os.path.join(out, 'checkpoint.pth.tar')])
    print('done')
