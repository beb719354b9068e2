"""Trains a small ResNet image classifier with timm's train.py recipe on a synthetic image-folder dataset: first
without the prefetcher, with Mixup soft targets, a model EMA kept on the device and the best checkpoint saved,
then resumed from ``last.pth.tar`` with the CUDA-stream prefetcher, label smoothing and an EMA forced onto
the CPU, as huggingface/pytorch-image-models' train.py and timm/ do: `init_distributed_device` gives the device,
the model is moved with ``model.to(device=device)`` before ``create_optimizer_v2`` and before the ``ModelEmaV3``
copy (whose ``device='cpu'`` option moves the copy and then lerps ``model_v.to(device=self.device)``), AMP uses
``partial(torch.autocast, device_type=device.type)`` and a ``NativeScaler`` for CUDA float16, the losses are moved
with ``.to(device=device)``, without the prefetcher the loop moves ``input.to(device), target.to(device)`` before
`Mixup` (whose ``one_hot`` is made with ``device=x.device``), with it `PrefetchLoader` copies batches on a side
``torch.cuda.Stream`` and normalises them with mean/std tensors made on the device; validation runs under
``torch.no_grad()`` on ``model.eval()``, synchronises CUDA and reads ``acc1.item()``; `resume_checkpoint` and
`load_checkpoint` read with ``map_location='cpu'`` into the moved model, optimizer, scaler and EMA copy.

Modeled on: huggingface/pytorch-image-models, train.py, timm/utils/model_ema.py, timm/utils/cuda.py,
timm/utils/checkpoint_saver.py, timm/utils/metrics.py, timm/utils/distributed.py, timm/data/loader.py,
timm/data/mixup.py, timm/loss/cross_entropy.py and timm/models/_helpers.py at commit
620cb4f3cb02cd489c9a77711e7f5fc8d40e54b7
(https://github.com/huggingface/pytorch-image-models/blob/620cb4f3cb02cd489c9a77711e7f5fc8d40e54b7/train.py,
https://github.com/huggingface/pytorch-image-models/blob/620cb4f3cb02cd489c9a77711e7f5fc8d40e54b7/timm/utils/model_ema.py).

Kept: train.py's `main` order (device, AMP, seed, model, ``.to(device)``, lr from base size, optimizer, autocast and
scaler, resume, EMA + EMA resume, loaders, mixup, loss, saver, scheduler, epoch loop validating model and EMA),
`train_one_epoch` (accumulation with ``need_update``, ``_forward``/``_backward``, clipping, EMA update) and
`validate`; `ModelEmaV3`, `NativeScaler`, `CheckpointSaver` (last/best), `resume_checkpoint`, `load_checkpoint`,
`clean_state_dict`, `PrefetchLoader`, `fast_collate`, `Mixup`, `mixup_target`, `SoftTargetCrossEntropy`, `accuracy`.

Changed to run here: ``--device`` is ``cuda`` if available else ``cpu``, AMP only with CUDA; ``create_model`` is a
small BasicBlock ResNet, ``create_optimizer_v2`` an AdamW with no-decay groups, ``create_scheduler_v2`` a per-epoch
cosine with warmup; the data are synthetic uint8 stripe images; ``nn.CrossEntropyLoss(label_smoothing=...)`` for
`LabelSmoothingCrossEntropy`; no distributed, APEX, compile, random erasing, AugMix, CutMix, JSD/BCE, wandb.
Shrunk: 224px ImageNet -> 32px 5 classes, 160 train / 64 val images, batch 16 (accumulating 2 in the first run),
3 epochs + 1 resumed epoch.
"""
import argparse
import math
import os
import tempfile
from collections import OrderedDict
from contextlib import suppress
from copy import deepcopy
from functools import partial

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class AverageMeter:
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val * n, self.count + n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]


def init_distributed_device(args):
    args.distributed, args.world_size, args.rank, args.local_rank = False, 1, 0, 0
    return torch.device(args.device)


class NativeScaler:
    state_dict_key = "amp_scaler"

    def __init__(self, device='cuda'):
        self._scaler = torch.amp.GradScaler(device=device)

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, need_update=True):
        self._scaler.scale(loss).backward()
        if need_update:
            if clip_grad is not None:
                self._scaler.unscale_(optimizer)  # unscale the gradients of optimizer's assigned params in-place
                torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
            self._scaler.step(optimizer)
            self._scaler.update()

    def state_dict(self):
        return self._scaler.state_dict()

    def load_state_dict(self, state_dict):
        self._scaler.load_state_dict(state_dict)


class ModelEmaV3(nn.Module):
    def __init__(self, model, decay=0.9999, min_decay=0.0, use_warmup=False, warmup_gamma=1.0, warmup_power=2 / 3,
                 device=None, foreach=True):
        super().__init__()
        # make a copy of the model for accumulating moving average of weights
        self.module = deepcopy(model)
        self.module.eval()
        self.decay, self.min_decay, self.use_warmup = decay, min_decay, use_warmup
        self.warmup_gamma, self.warmup_power, self.foreach = warmup_gamma, warmup_power, foreach
        self.device = device  # perform ema on different device from model if set
        if self.device is not None and device != next(model.parameters()).device:
            self.foreach = False  # cannot use foreach methods with different devices
            self.module.to(device=device)

    def get_decay(self, step=None):
        if step is None:
            return self.decay
        step = max(0, step - 1)
        if step <= 0:
            return 0.0
        if self.use_warmup:
            decay = 1 - (1 + step / self.warmup_gamma) ** -self.warmup_power
            return max(min(decay, self.decay), self.min_decay)
        return self.decay

    @torch.no_grad()
    def update(self, model, step=None):
        decay = self.get_decay(step)
        if self.foreach:
            ema_lerp_values, model_lerp_values = [], []
            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                if ema_v.is_floating_point():
                    ema_lerp_values.append(ema_v)
                    model_lerp_values.append(model_v)
                else:
                    ema_v.copy_(model_v)
            torch._foreach_lerp_(ema_lerp_values, model_lerp_values, weight=1. - decay)
        else:
            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                if ema_v.is_floating_point():
                    ema_v.lerp_(model_v.to(device=self.device), weight=1. - decay)
                else:
                    ema_v.copy_(model_v.to(device=self.device))

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def unwrap_model(model):
    return unwrap_model(model.module) if hasattr(model, 'module') else model


def clean_state_dict(state_dict):
    # 'clean' checkpoint by removing .module prefix from state dict if it exists from parallel training
    return {(k[len('module.'):] if k.startswith('module.') else k): v for k, v in state_dict.items()}


class CheckpointSaver:
    def __init__(self, model, optimizer, args=None, model_ema=None, amp_scaler=None, checkpoint_dir='',
                 decreasing=False):
        self.model, self.optimizer, self.args, self.model_ema = model, optimizer, args, model_ema
        self.amp_scaler, self.checkpoint_dir = amp_scaler, checkpoint_dir
        self.best_epoch = self.best_metric = None
        self.cmp = (lambda x, y: x < y) if decreasing else (lambda x, y: x > y)  # True if x better than y

    def save_checkpoint(self, epoch, metric=None):
        tmp_save_path = os.path.join(self.checkpoint_dir, 'tmp.pth.tar')
        last_save_path = os.path.join(self.checkpoint_dir, 'last.pth.tar')
        self._save(tmp_save_path, epoch, metric)
        os.replace(tmp_save_path, last_save_path)
        if metric is not None and (self.best_metric is None or self.cmp(metric, self.best_metric)):
            self.best_epoch, self.best_metric = epoch, metric  # checkpoint-N history files are left out
            best_save_path = os.path.join(self.checkpoint_dir, 'model_best.pth.tar')
            if os.path.exists(best_save_path):
                os.unlink(best_save_path)
            os.link(last_save_path, best_save_path)
        return (None, None) if self.best_metric is None else (self.best_metric, self.best_epoch)

    def _save(self, save_path, epoch, metric=None):
        save_state = {'epoch': epoch, 'arch': self.args.model, 'state_dict': unwrap_model(self.model).state_dict(),
                      'optimizer': self.optimizer.state_dict(), 'version': 2}
        if self.amp_scaler is not None:
            save_state[self.amp_scaler.state_dict_key] = self.amp_scaler.state_dict()
        if self.model_ema is not None:
            save_state['state_dict_ema'] = unwrap_model(self.model_ema).state_dict()
        save_state['metric'] = metric
        torch.save(save_state, save_path)


def load_checkpoint(model, checkpoint_path, use_ema=True, device='cpu', strict=True):
    checkpoint = torch.load(checkpoint_path, map_location=device, weights_only=False)
    state_dict_key = 'state_dict_ema' if use_ema and checkpoint.get('state_dict_ema') is not None else 'state_dict'
    print("Loaded {} from checkpoint '{}'".format(state_dict_key, os.path.basename(checkpoint_path)))
    return model.load_state_dict(clean_state_dict(checkpoint[state_dict_key]), strict=strict)


def resume_checkpoint(model, checkpoint_path, optimizer=None, loss_scaler=None):
    checkpoint = torch.load(checkpoint_path, map_location='cpu', weights_only=False)
    model.load_state_dict(clean_state_dict(checkpoint['state_dict']))
    if optimizer is not None and 'optimizer' in checkpoint:
        optimizer.load_state_dict(checkpoint['optimizer'])
    if loss_scaler is not None and loss_scaler.state_dict_key in checkpoint:
        loss_scaler.load_state_dict(checkpoint[loss_scaler.state_dict_key])
    resume_epoch = checkpoint['epoch'] + int(checkpoint.get('version', 1) > 1)  # start at the next epoch
    print("Loaded checkpoint '{}' (epoch {})".format(os.path.basename(checkpoint_path), checkpoint['epoch']))
    return resume_epoch


def one_hot(x, num_classes, on_value=1., off_value=0.):
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value, device=x.device).scatter_(1, x, on_value)


def mixup_target(target, num_classes, lam=1., smoothing=0.0):
    off_value = smoothing / num_classes
    on_value = 1. - smoothing + off_value
    y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value)
    y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
    return y1 * lam + y2 * (1. - lam)


class Mixup:
    """Batch-mode mixup (the CutMix branch and per-element modes are left out)."""

    def __init__(self, mixup_alpha=1., prob=1.0, label_smoothing=0.1, num_classes=1000):
        self.mixup_alpha, self.mix_prob, self.label_smoothing = mixup_alpha, prob, label_smoothing
        self.num_classes, self.mixup_enabled = num_classes, True

    def _mix_batch(self, x):
        lam = 1.
        if self.mixup_enabled and np.random.rand() < self.mix_prob:  # _params_per_batch
            lam = float(np.random.beta(self.mixup_alpha, self.mixup_alpha))
        if lam == 1.:
            return 1.
        x_flipped = x.flip(0).mul_(1. - lam)
        x.mul_(lam).add_(x_flipped)
        return lam

    def __call__(self, x, target):
        assert len(x) % 2 == 0, 'Batch size should be even when using this'
        lam = self._mix_batch(x)
        return x, mixup_target(target, self.num_classes, lam, self.label_smoothing)


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


class SyntheticImageDataset(Dataset):
    """ImageFolder stand-in: HWC uint8 images of oriented coloured stripes, one orientation per class."""

    def __init__(self, n, num_classes, size, seed, is_training, use_prefetcher, mean, std):
        rng = np.random.RandomState(seed)
        yy, xx = np.mgrid[0:size, 0:size] / size
        self.samples = []
        for c in np.arange(n) % num_classes:
            angle = np.pi * c / num_classes + rng.normal(0, 0.1)
            wave = np.sin(2 * np.pi * 4 * (np.cos(angle) * xx + np.sin(angle) * yy) + rng.uniform(0, 6.3))
            img = 127 + 60 * wave[..., None] * rng.uniform(0.3, 1.0, 3) + rng.normal(0, 30, (size, size, 3))
            self.samples.append((np.clip(img, 0, 255).astype(np.uint8), int(c)))
        self.is_training, self.use_prefetcher = is_training, use_prefetcher
        self.mean, self.std = np.array(mean).reshape(3, 1, 1), np.array(std).reshape(3, 1, 1)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        img, target = self.samples[index]
        img = img[:, ::-1] if self.is_training and np.random.rand() < 0.5 else img  # RandomHorizontalFlip
        img = np.ascontiguousarray(img.transpose(2, 0, 1))
        if self.use_prefetcher:  # ToNumpy: normalisation happens on the device in PrefetchLoader
            return img, target
        return torch.from_numpy(((img / 255. - self.mean) / self.std).astype(np.float32)), target  # ToTensor+Normalize


def fast_collate(batch):
    targets = torch.tensor([b[1] for b in batch], dtype=torch.int64)
    return torch.from_numpy(np.stack([b[0] for b in batch])), targets


class PrefetchLoader:
    def __init__(self, loader, mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD, channels=3,
                 device=torch.device('cuda'), img_dtype=torch.float32):
        normalization_shape, self.loader, self.device, self.img_dtype = (1, channels, 1, 1), loader, device, img_dtype
        self.mean = torch.tensor([x * 255 for x in mean], device=device, dtype=img_dtype).view(normalization_shape)
        self.std = torch.tensor([x * 255 for x in std], device=device, dtype=img_dtype).view(normalization_shape)
        self.is_cuda = device.type == 'cuda' and torch.cuda.is_available()

    def __iter__(self):
        first = True
        stream = torch.cuda.Stream() if self.is_cuda else None
        stream_context = partial(torch.cuda.stream, stream=stream) if self.is_cuda else suppress
        for next_input, next_target in self.loader:
            with stream_context():
                next_input = next_input.to(device=self.device, non_blocking=True)
                next_target = next_target.to(device=self.device, non_blocking=True)
                next_input = next_input.to(self.img_dtype).sub_(self.mean).div_(self.std)
            if not first:
                yield input, target
            first = False
            if stream is not None:
                torch.cuda.current_stream().wait_stream(stream)
            input, target = next_input, next_target
        yield input, target

    def __len__(self):
        return len(self.loader)


def create_loader(dataset, batch_size, is_training, use_prefetcher, device, mean, std, pin_memory=False):
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=is_training, drop_last=is_training,
                        collate_fn=fast_collate if use_prefetcher else None, pin_memory=pin_memory)
    return PrefetchLoader(loader, mean=mean, std=std, device=device) if use_prefetcher else loader


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False), nn.BatchNorm2d(planes)
        nn.init.zeros_(self.bn2.weight)  # zero_init_last
        self.downsample = None if stride == 1 and inplanes == planes else nn.Sequential(
            nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        x = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(x)) + shortcut)


class ResNet(nn.Module):
    def __init__(self, num_classes=1000, channels=(16, 32, 64), drop_rate=0.):
        super().__init__()
        self.num_classes, self.drop_rate = num_classes, drop_rate
        self.conv1, self.bn1 = nn.Conv2d(3, channels[0], 3, 1, 1, bias=False), nn.BatchNorm2d(channels[0])
        self.layers = nn.Sequential(*[BasicBlock(channels[max(i - 1, 0)], c, stride=1 if i == 0 else 2)
                                      for i, c in enumerate(channels)])
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        x = F.dropout(x.mean((2, 3)), p=self.drop_rate, training=self.training)
        return self.fc(x)


class CosineLRScheduler:
    """create_scheduler_v2(sched='cosine') with linear warmup, stepped per epoch (t_in_epochs=True)."""

    def __init__(self, optimizer, t_initial, lr_min=1e-5, warmup_t=1, warmup_lr_init=1e-4):
        self.optimizer, self.t_initial, self.lr_min = optimizer, t_initial, lr_min
        self.warmup_t, self.warmup_lr_init = warmup_t, warmup_lr_init
        self.base_values = [group.setdefault('initial_lr', group['lr']) for group in optimizer.param_groups]
        self.step(0)

    def step(self, epoch, metric=None):
        for group, base in zip(self.optimizer.param_groups, self.base_values):
            if epoch < self.warmup_t:
                group['lr'] = self.warmup_lr_init + epoch * (base - self.warmup_lr_init) / self.warmup_t
            else:
                t = epoch - self.warmup_t
                group['lr'] = self.lr_min + 0.5 * (base - self.lr_min) * (1 + math.cos(math.pi * t / self.t_initial))


def create_optimizer_v2(model, opt='adamw', lr=None, weight_decay=0.):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:  # param_groups_weight_decay: no decay on biases and norm weights
            (no_decay if param.ndim <= 1 or name.endswith(".bias") else decay).append(param)
    return torch.optim.AdamW([{'params': no_decay, 'weight_decay': 0.},
                              {'params': decay, 'weight_decay': weight_decay}], lr=lr)


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, device=torch.device('cuda'), lr_scheduler=None,
                    amp_autocast=suppress, loss_scaler=None, model_ema=None, mixup_fn=None):
    if args.mixup_off_epoch and epoch >= args.mixup_off_epoch and mixup_fn is not None:
        mixup_fn.mixup_enabled = False
    losses_m = AverageMeter()
    model.train()
    accum_steps = args.grad_accum_steps
    last_accum_steps = len(loader) % accum_steps
    updates_per_epoch = (len(loader) + accum_steps - 1) // accum_steps
    num_updates = epoch * updates_per_epoch
    last_batch_idx, last_batch_idx_to_accum = len(loader) - 1, len(loader) - last_accum_steps
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(loader):
        last_batch = batch_idx == last_batch_idx
        need_update = last_batch or (batch_idx + 1) % accum_steps == 0
        update_idx = batch_idx // accum_steps
        if batch_idx >= last_batch_idx_to_accum:
            accum_steps = last_accum_steps
        if not args.prefetcher:
            input, target = input.to(device), target.to(device)
            if mixup_fn is not None:
                input, target = mixup_fn(input, target)

        def _forward():
            with amp_autocast():
                output = model(input)
                loss = loss_fn(output, target)
            if accum_steps > 1:
                loss /= accum_steps
            return loss

        def _backward(_loss):
            if loss_scaler is not None:
                loss_scaler(_loss, optimizer, clip_grad=args.clip_grad, parameters=model.parameters(),
                            need_update=need_update)
            else:
                _loss.backward()
                if need_update:
                    if args.clip_grad is not None:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
                    optimizer.step()

        loss = _forward()
        _backward(loss)
        losses_m.update(loss.item() * accum_steps, input.size(0))
        if not need_update:
            continue
        num_updates += 1
        optimizer.zero_grad()
        if model_ema is not None:
            model_ema.update(model, step=num_updates)
        if update_idx % args.log_interval == 0:
            lr = np.mean([param_group['lr'] for param_group in optimizer.param_groups])
            print(f'Train: {epoch} [{update_idx:>4d}/{updates_per_epoch}]  Loss: {losses_m.val:#.3g} '
                  f'({losses_m.avg:#.3g})  LR: {lr:.3e}')
    return OrderedDict([('loss', losses_m.avg)])


def validate(model, loader, loss_fn, args, device=torch.device('cuda'), amp_autocast=suppress, log_suffix=''):
    losses_m, top1_m, top5_m = AverageMeter(), AverageMeter(), AverageMeter()
    model.eval()
    with torch.no_grad():
        for batch_idx, (input, target) in enumerate(loader):
            if not args.prefetcher:
                input = input.to(device)
                target = target.to(device)
            with amp_autocast():
                output = model(input)
                loss = loss_fn(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            reduced_loss = loss.data
            if device.type == 'cuda':
                torch.cuda.synchronize()
            losses_m.update(reduced_loss.item(), input.size(0))
            top1_m.update(acc1.item(), output.size(0))
            top5_m.update(acc5.item(), output.size(0))
    print(f'Test{log_suffix}: Loss: {losses_m.avg:>6.3f}  Acc@1: {top1_m.avg:>7.3f}  Acc@5: {top5_m.avg:>7.3f}')
    return OrderedDict([('loss', losses_m.avg), ('top1', top1_m.avg), ('top5', top5_m.avg)])


def main(args):
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.benchmark = True
    args.prefetcher = not args.no_prefetcher
    device = init_distributed_device(args)
    print(f'Training with a single process on 1 device ({args.device}).')
    use_amp, amp_dtype = ('native' if args.amp else None), torch.float16
    torch.manual_seed(args.seed)  # utils.random_seed
    np.random.seed(args.seed)

    model = ResNet(num_classes=args.num_classes, drop_rate=args.drop)
    model.to(device=device)
    if not args.lr:
        args.lr = args.lr_base * args.batch_size * args.grad_accum_steps / args.lr_base_size
    optimizer = create_optimizer_v2(model, opt=args.opt, lr=args.lr, weight_decay=args.weight_decay)

    amp_autocast, loss_scaler = suppress, None  # do nothing
    if use_amp == 'native':
        amp_autocast = partial(torch.autocast, device_type=device.type, dtype=amp_dtype)
        if device.type in ('cuda',) and amp_dtype == torch.float16:
            loss_scaler = NativeScaler(device=device.type)

    resume_epoch = None
    if args.resume:
        resume_epoch = resume_checkpoint(model, args.resume, optimizer=optimizer, loss_scaler=loss_scaler)

    model_ema = None
    if args.model_ema:
        model_ema = ModelEmaV3(model, decay=args.model_ema_decay, use_warmup=args.model_ema_warmup,
                               device='cpu' if args.model_ema_force_cpu else None)
        if args.resume:
            load_checkpoint(model_ema.module, args.resume, use_ema=True)

    data_config = dict(mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD)
    dataset_train = SyntheticImageDataset(160, args.num_classes, 32, 1, True, args.prefetcher, **data_config)
    dataset_eval = SyntheticImageDataset(64, args.num_classes, 32, 2, False, args.prefetcher, **data_config)
    mixup_active = args.mixup > 0
    mixup_fn = Mixup(mixup_alpha=args.mixup, prob=args.mixup_prob, label_smoothing=args.smoothing,
                     num_classes=args.num_classes) if mixup_active else None
    loader_train = create_loader(dataset_train, args.batch_size, True, args.prefetcher, device,
                                 pin_memory=args.pin_mem, **data_config)
    loader_eval = create_loader(dataset_eval, args.batch_size, False, args.prefetcher, device,
                                pin_memory=args.pin_mem, **data_config)

    if mixup_active:
        train_loss_fn = SoftTargetCrossEntropy()
    elif args.smoothing:
        train_loss_fn = nn.CrossEntropyLoss(label_smoothing=args.smoothing)  # LabelSmoothingCrossEntropy
    else:
        train_loss_fn = nn.CrossEntropyLoss()
    train_loss_fn = train_loss_fn.to(device=device)
    validate_loss_fn = nn.CrossEntropyLoss().to(device=device)

    eval_metric = args.eval_metric
    saver = CheckpointSaver(model=model, optimizer=optimizer, args=args, model_ema=model_ema, amp_scaler=loss_scaler,
                            checkpoint_dir=args.output, decreasing=eval_metric == 'loss')
    lr_scheduler = CosineLRScheduler(optimizer, t_initial=args.epochs, warmup_t=args.warmup_epochs)
    num_epochs = args.epochs
    start_epoch = resume_epoch if resume_epoch is not None else 0
    if lr_scheduler is not None and start_epoch > 0:
        lr_scheduler.step(start_epoch)

    best_metric = best_epoch = None
    for epoch in range(start_epoch, num_epochs):
        train_metrics = train_one_epoch(epoch, model, loader_train, optimizer, train_loss_fn, args, device=device,
                                        lr_scheduler=lr_scheduler, amp_autocast=amp_autocast,
                                        loss_scaler=loss_scaler, model_ema=model_ema, mixup_fn=mixup_fn)
        eval_metrics = validate(model, loader_eval, validate_loss_fn, args, device=device, amp_autocast=amp_autocast)
        if model_ema is not None and not args.model_ema_force_cpu:
            eval_metrics = validate(model_ema, loader_eval, validate_loss_fn, args, device=device,
                                    amp_autocast=amp_autocast, log_suffix=' (EMA)')
        latest_metric = eval_metrics[eval_metric]
        best_metric, best_epoch = saver.save_checkpoint(epoch, metric=latest_metric)
        if lr_scheduler is not None:  # step LR for next epoch
            lr_scheduler.step(epoch + 1, latest_metric)
        print(f"epoch {epoch}: train loss {train_metrics['loss']:.4f}, eval {eval_metric} {latest_metric:.3f}")
    print('*** Best metric: {0} (epoch {1})'.format(best_metric, best_epoch))
    return best_metric


def make_args(**overrides):
    args = argparse.Namespace(
        device='cuda' if torch.cuda.is_available() else 'cpu', amp=torch.cuda.is_available(), model='resnet_tiny',
        num_classes=5, drop=0.1, seed=42, lr=None, lr_base=0.1, lr_base_size=256, opt='adamw', weight_decay=0.05,
        batch_size=16, grad_accum_steps=2, epochs=3, warmup_epochs=1, clip_grad=1.0, no_prefetcher=True,
        pin_mem=False, mixup=0.8, mixup_prob=1.0, mixup_off_epoch=2,
        smoothing=0.1, model_ema=True, model_ema_decay=0.9, model_ema_warmup=True, model_ema_force_cpu=False,
        resume='', eval_metric='top1', log_interval=3, output='')
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as output_dir:
        main(make_args(output=output_dir))
        # resume from last.pth.tar: prefetcher on, no mixup, label smoothing, EMA tracked on the CPU
        best = main(make_args(output=output_dir, epochs=4, grad_accum_steps=1, no_prefetcher=False, mixup=0.,
                              model_ema_force_cpu=True, resume=os.path.join(output_dir, 'last.pth.tar')))
    print(f"done: best top1 {best:.2f}")
