"""Trains RAFT-small (recurrent all-pairs field transforms for optical flow: a shared feature encoder, a context
encoder, a 4-D correlation pyramid looked up around the current flow, a ConvGRU update block) on synthetic
FlyingChairs-like image pairs, validates on a "chairs" split and a KITTI-like split with sparse validity and padded
odd sizes, fine-tunes from the saved checkpoint for a second stage, then runs the demo's inference, as
princeton-vl/RAFT's train.py, evaluate.py, demo.py and core/ do: the model is wrapped in ``nn.DataParallel(RAFT(args),
device_ids=args.gpus)``, a restored checkpoint is loaded with ``torch.load(args.restore_ckpt)`` before
``model.cuda()``, the AdamW/OneCycle pair is made after the move, every batch list is moved with ``[x.cuda() for x in
data_blob]``, the noise augmentation is ``torch.randn(*image1.shape).cuda()``, the GradScaler and ``autocast`` are
enabled by ``--mixed_precision``, the coordinate grids are made with ``coords_grid(..., device=img.device)`` and the
lookup offsets with ``torch.linspace(..., device=coords.device)``, the correlation volume is rescaled with a CPU
``torch.tensor(dim)``; validation calls ``model.module`` under ``torch.no_grad()`` after ``model.eval()``, moves single
images with ``image1[None].cuda()`` and compares ``flow_pr[0].cpu()`` with the CPU ground truth; demo.py loads the
DataParallel checkpoint, unwraps ``model.module``, moves it to ``DEVICE`` and reads flows with ``.cpu().numpy()``.

Modeled on: princeton-vl/RAFT, train.py, evaluate.py, demo.py, core/raft.py, core/corr.py, core/update.py,
core/extractor.py and core/utils/utils.py at commit 2888e15a51fa41140771d3f498ed8023cff098d1
(https://github.com/princeton-vl/RAFT/blob/2888e15a51fa41140771d3f498ed8023cff098d1/train.py,
https://github.com/princeton-vl/RAFT/blob/2888e15a51fa41140771d3f498ed8023cff098d1/core/raft.py,
https://github.com/princeton-vl/RAFT/blob/2888e15a51fa41140771d3f498ed8023cff098d1/evaluate.py).

Kept: train.py's `sequence_loss`, `fetch_optimizer`, `Logger`, `train` (DataParallel, restore, freeze_bn for later
stages, noise, scaler/clip/scheduler order, periodic checkpoint + validation, final save); evaluate.py's
`validate_chairs` and `validate_kitti` (`InputPadder` in kitti mode, EPE and F1 outliers); demo.py's inference;
`RAFT` (small branch: `initialize_flow`, the update loop with ``coords1.detach()``, `upflow8`, ``test_mode``),
`CorrBlock`, `SmallEncoder` with `BottleneckBlock`, `SmallMotionEncoder`, `ConvGRU`, `FlowHead`,
`SmallUpdateBlock`, `bilinear_sampler`, `coords_grid`.

Changed to run here: ``.cuda()`` is ``.to(DEVICE)``, ``DEVICE = 'cuda'`` if available else ``'cpu'`` (demo.py's
name); ``--gpus`` is ``[0]`` with CUDA, none without; mixed precision only with CUDA; ``torch.autocast``/``torch.amp``
for the deprecated ``torch.cuda.amp``; the data are synthetic textures warped by smooth affine flows (KITTI-like
pairs valid on half the pixels); no tensorboard, cv2, Sintel, alternate CUDA correlation or `BasicEncoder`.
Shrunk: 368x496 crops -> 64x64, encoder 32/64/96 -> 16/24/32 channels, hidden/context 96/64 -> 32/24, 4 -> 3
correlation levels of radius 3 -> 2, 12 -> 4 training iterations (6 at validation), batch 6 -> 4, 15 + 8 steps.
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'
MAX_FLOW = 400  # exclude extremly large displacements
SUM_FREQ = 5
VAL_FREQ = 7


def autocast(enabled):
    return torch.autocast("cuda", enabled=enabled)


class InputPadder:
    """ Pads images such that dimensions are divisible by 8 """
    def __init__(self, dims, mode='sintel'):
        self.ht, self.wd = dims[-2:]
        pad_ht = (((self.ht // 8) + 1) * 8 - self.ht) % 8
        pad_wd = (((self.wd // 8) + 1) * 8 - self.wd) % 8
        if mode == 'sintel':
            self._pad = [pad_wd // 2, pad_wd - pad_wd // 2, pad_ht // 2, pad_ht - pad_ht // 2]
        else:
            self._pad = [pad_wd // 2, pad_wd - pad_wd // 2, 0, pad_ht]

    def pad(self, *inputs):
        return [F.pad(x, self._pad, mode='replicate') for x in inputs]

    def unpad(self, x):
        ht, wd = x.shape[-2:]
        c = [self._pad[2], ht - self._pad[3], self._pad[0], wd - self._pad[1]]
        return x[..., c[0]:c[1], c[2]:c[3]]


def bilinear_sampler(img, coords):
    """ Wrapper for grid_sample, uses pixel coordinates """
    H, W = img.shape[-2:]
    xgrid, ygrid = coords.split([1, 1], dim=-1)
    xgrid = 2 * xgrid / (W - 1) - 1
    ygrid = 2 * ygrid / (H - 1) - 1
    grid = torch.cat([xgrid, ygrid], dim=-1)
    return F.grid_sample(img, grid, align_corners=True)


def coords_grid(batch, ht, wd, device):
    coords = torch.meshgrid(torch.arange(ht, device=device), torch.arange(wd, device=device), indexing='ij')
    coords = torch.stack(coords[::-1], dim=0).float()
    return coords[None].repeat(batch, 1, 1, 1)


def upflow8(flow, mode='bilinear'):
    new_size = (8 * flow.shape[2], 8 * flow.shape[3])
    return 8 * F.interpolate(flow, size=new_size, mode=mode, align_corners=True)


class CorrBlock:
    def __init__(self, fmap1, fmap2, num_levels=4, radius=4):
        self.num_levels, self.radius = num_levels, radius
        self.corr_pyramid = []
        # all pairs correlation
        corr = CorrBlock.corr(fmap1, fmap2)
        batch, h1, w1, dim, h2, w2 = corr.shape
        corr = corr.reshape(batch * h1 * w1, dim, h2, w2)
        self.corr_pyramid.append(corr)
        for i in range(self.num_levels - 1):
            corr = F.avg_pool2d(corr, 2, stride=2)
            self.corr_pyramid.append(corr)

    def __call__(self, coords):
        r = self.radius
        coords = coords.permute(0, 2, 3, 1)
        batch, h1, w1, _ = coords.shape
        out_pyramid = []
        for i in range(self.num_levels):
            corr = self.corr_pyramid[i]
            dx = torch.linspace(-r, r, 2 * r + 1, device=coords.device)
            dy = torch.linspace(-r, r, 2 * r + 1, device=coords.device)
            delta = torch.stack(torch.meshgrid(dy, dx, indexing='ij'), axis=-1)
            centroid_lvl = coords.reshape(batch * h1 * w1, 1, 1, 2) / 2 ** i
            delta_lvl = delta.view(1, 2 * r + 1, 2 * r + 1, 2)
            corr = bilinear_sampler(corr, centroid_lvl + delta_lvl)
            out_pyramid.append(corr.view(batch, h1, w1, -1))
        out = torch.cat(out_pyramid, dim=-1)
        return out.permute(0, 3, 1, 2).contiguous().float()

    @staticmethod
    def corr(fmap1, fmap2):
        batch, dim, ht, wd = fmap1.shape
        fmap1 = fmap1.view(batch, dim, ht * wd)
        fmap2 = fmap2.view(batch, dim, ht * wd)
        corr = torch.matmul(fmap1.transpose(1, 2), fmap2)
        corr = corr.view(batch, ht, wd, 1, ht, wd)
        return corr / torch.sqrt(torch.tensor(dim).float())


class BottleneckBlock(nn.Module):
    def __init__(self, in_planes, planes, norm_fn='group', stride=1):
        super(BottleneckBlock, self).__init__()
        self.conv1 = nn.Conv2d(in_planes, planes // 4, kernel_size=1, padding=0)
        self.conv2 = nn.Conv2d(planes // 4, planes // 4, kernel_size=3, padding=1, stride=stride)
        self.conv3 = nn.Conv2d(planes // 4, planes, kernel_size=1, padding=0)
        self.relu = nn.ReLU(inplace=True)
        norm = {'instance': nn.InstanceNorm2d, 'batch': nn.BatchNorm2d, 'none': lambda c: nn.Sequential()}[norm_fn]
        self.norm1, self.norm2, self.norm3 = norm(planes // 4), norm(planes // 4), norm(planes)
        if stride == 1:
            self.downsample = None
        else:
            self.norm4 = norm(planes)
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride), self.norm4)

    def forward(self, x):
        y = self.relu(self.norm1(self.conv1(x)))
        y = self.relu(self.norm2(self.conv2(y)))
        y = self.relu(self.norm3(self.conv3(y)))
        if self.downsample is not None:
            x = self.downsample(x)
        return self.relu(x + y)


class SmallEncoder(nn.Module):
    def __init__(self, output_dim=128, norm_fn='batch', dropout=0.0):
        super(SmallEncoder, self).__init__()
        self.norm_fn = norm_fn
        self.norm1 = {'instance': nn.InstanceNorm2d, 'batch': nn.BatchNorm2d,
                      'none': lambda c: nn.Sequential()}[norm_fn](16)
        self.conv1 = nn.Conv2d(3, 16, kernel_size=7, stride=2, padding=3)
        self.relu1 = nn.ReLU(inplace=True)
        self.in_planes = 16
        self.layer1 = self._make_layer(16, stride=1)
        self.layer2 = self._make_layer(24, stride=2)
        self.layer3 = self._make_layer(32, stride=2)
        self.dropout = nn.Dropout2d(p=dropout) if dropout > 0 else None
        self.conv2 = nn.Conv2d(32, output_dim, kernel_size=1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')

    def _make_layer(self, dim, stride=1):
        layer1 = BottleneckBlock(self.in_planes, dim, self.norm_fn, stride=stride)
        layer2 = BottleneckBlock(dim, dim, self.norm_fn, stride=1)
        self.in_planes = dim
        return nn.Sequential(layer1, layer2)

    def forward(self, x):
        # if input is list, combine batch dimension
        is_list = isinstance(x, tuple) or isinstance(x, list)
        if is_list:
            batch_dim = x[0].shape[0]
            x = torch.cat(x, dim=0)
        x = self.relu1(self.norm1(self.conv1(x)))
        x = self.conv2(self.layer3(self.layer2(self.layer1(x))))
        if self.training and self.dropout is not None:
            x = self.dropout(x)
        if is_list:
            x = torch.split(x, [batch_dim, batch_dim], dim=0)
        return x


class FlowHead(nn.Module):
    def __init__(self, input_dim=128, hidden_dim=256):
        super(FlowHead, self).__init__()
        self.conv1, self.conv2 = nn.Conv2d(input_dim, hidden_dim, 3, padding=1), nn.Conv2d(hidden_dim, 2, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.conv2(self.relu(self.conv1(x)))


class ConvGRU(nn.Module):
    def __init__(self, hidden_dim=128, input_dim=192 + 128):
        super(ConvGRU, self).__init__()
        self.convz = nn.Conv2d(hidden_dim + input_dim, hidden_dim, 3, padding=1)
        self.convr = nn.Conv2d(hidden_dim + input_dim, hidden_dim, 3, padding=1)
        self.convq = nn.Conv2d(hidden_dim + input_dim, hidden_dim, 3, padding=1)

    def forward(self, h, x):
        hx = torch.cat([h, x], dim=1)
        z = torch.sigmoid(self.convz(hx))
        r = torch.sigmoid(self.convr(hx))
        q = torch.tanh(self.convq(torch.cat([r * h, x], dim=1)))
        return (1 - z) * h + z * q


class SmallMotionEncoder(nn.Module):
    def __init__(self, args):
        super(SmallMotionEncoder, self).__init__()
        cor_planes = args.corr_levels * (2 * args.corr_radius + 1) ** 2
        self.convc1 = nn.Conv2d(cor_planes, 48, 1, padding=0)
        self.convf1 = nn.Conv2d(2, 32, 7, padding=3)
        self.convf2 = nn.Conv2d(32, 16, 3, padding=1)
        self.conv = nn.Conv2d(64, 38, 3, padding=1)

    def forward(self, flow, corr):
        cor = F.relu(self.convc1(corr))
        flo = F.relu(self.convf2(F.relu(self.convf1(flow))))
        out = F.relu(self.conv(torch.cat([cor, flo], dim=1)))
        return torch.cat([out, flow], dim=1)


class SmallUpdateBlock(nn.Module):
    def __init__(self, args, hidden_dim=96, context_dim=64):
        super(SmallUpdateBlock, self).__init__()
        self.encoder = SmallMotionEncoder(args)
        self.gru = ConvGRU(hidden_dim=hidden_dim, input_dim=40 + context_dim)
        self.flow_head = FlowHead(hidden_dim, hidden_dim=48)

    def forward(self, net, inp, corr, flow):
        motion_features = self.encoder(flow, corr)
        inp = torch.cat([inp, motion_features], dim=1)
        net = self.gru(net, inp)
        delta_flow = self.flow_head(net)
        return net, None, delta_flow


class RAFT(nn.Module):
    def __init__(self, args):
        super(RAFT, self).__init__()
        self.args = args
        self.hidden_dim = hdim = 32  # args.small
        self.context_dim = cdim = 24
        args.corr_levels, args.corr_radius = 3, 2
        self.fnet = SmallEncoder(output_dim=48, norm_fn='instance', dropout=args.dropout)
        self.cnet = SmallEncoder(output_dim=hdim + cdim, norm_fn='none', dropout=args.dropout)
        self.update_block = SmallUpdateBlock(self.args, hidden_dim=hdim, context_dim=cdim)

    def freeze_bn(self):
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()

    def initialize_flow(self, img):
        """ Flow is represented as difference between two coordinate grids flow = coords1 - coords0"""
        N, C, H, W = img.shape
        coords0 = coords_grid(N, H // 8, W // 8, device=img.device)
        coords1 = coords_grid(N, H // 8, W // 8, device=img.device)
        return coords0, coords1

    def forward(self, image1, image2, iters=12, flow_init=None, upsample=True, test_mode=False):
        """ Estimate optical flow between pair of frames """
        image1 = (2 * (image1 / 255.0) - 1.0).contiguous()
        image2 = (2 * (image2 / 255.0) - 1.0).contiguous()
        hdim, cdim = self.hidden_dim, self.context_dim

        # run the feature network
        with autocast(enabled=self.args.mixed_precision):
            fmap1, fmap2 = self.fnet([image1, image2])
        fmap1, fmap2 = fmap1.float(), fmap2.float()
        corr_fn = CorrBlock(fmap1, fmap2, num_levels=self.args.corr_levels, radius=self.args.corr_radius)

        # run the context network
        with autocast(enabled=self.args.mixed_precision):
            cnet = self.cnet(image1)
            net, inp = torch.split(cnet, [hdim, cdim], dim=1)
            net = torch.tanh(net)
            inp = torch.relu(inp)

        coords0, coords1 = self.initialize_flow(image1)
        if flow_init is not None:
            coords1 = coords1 + flow_init

        flow_predictions = []
        for itr in range(iters):
            coords1 = coords1.detach()
            corr = corr_fn(coords1)  # index correlation volume
            flow = coords1 - coords0
            with autocast(enabled=self.args.mixed_precision):
                net, up_mask, delta_flow = self.update_block(net, inp, corr, flow)
            # F(t+1) = F(t) + \Delta(t)
            coords1 = coords1 + delta_flow.float()
            flow_up = upflow8(coords1 - coords0)  # the small model has no convex upsampling mask
            flow_predictions.append(flow_up)

        if test_mode:
            return coords1 - coords0, flow_up
        return flow_predictions


class SyntheticFlowDataset(Dataset):
    """Pairs of random sinusoid textures, the second warped by a smooth affine flow (FlyingChairs/KITTI stand-in)."""

    def __init__(self, n, size, seed, sparse=False):
        rng = np.random.RandomState(seed)
        self.items = []
        ht, wd = size
        y, x = np.mgrid[0:ht, 0:wd].astype(np.float32)
        for _ in range(n):
            freqs, phases = rng.uniform(0.05, 0.35, (6, 2)), rng.uniform(0, 2 * np.pi, (6, 3))
            a, b = rng.uniform(-3, 3, (2, 1, 1)), rng.uniform(-0.04, 0.04, (2, 2, 1, 1))
            flow = a + b[:, 0] * (x - wd / 2) + b[:, 1] * (y - ht / 2)
            texture = lambda px, py: 127.5 + 20.0 * sum(np.sin(f[0] * px + f[1] * py + p[:, None, None])
                                                        for f, p in zip(freqs, phases))
            image2 = texture(x - flow[0], y - flow[1])  # image2(x + flow) = image1(x)
            valid = (rng.rand(ht, wd) < 0.5) if sparse else np.ones((ht, wd))
            self.items.append([v.astype(np.float32) for v in (texture(x, y), image2, flow, valid)])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return tuple(torch.from_numpy(v) for v in self.items[index])  # image1, image2, flow, valid


def fetch_dataloader(args):
    train_dataset = SyntheticFlowDataset(24, args.image_size, seed=1 if args.stage == 'chairs' else 2)
    return DataLoader(train_dataset, batch_size=args.batch_size, pin_memory=False, shuffle=True, drop_last=True)


@torch.no_grad()
def validate_chairs(model, iters=6):
    """ Perform evaluation on the FlyingChairs (test) split """
    model.eval()
    epe_list = []
    val_dataset = SyntheticFlowDataset(4, (64, 64), seed=10)
    for val_id in range(len(val_dataset)):
        image1, image2, flow_gt, _ = val_dataset[val_id]
        image1, image2 = image1[None].to(DEVICE), image2[None].to(DEVICE)
        _, flow_pr = model(image1, image2, iters=iters, test_mode=True)
        epe = torch.sum((flow_pr[0].cpu() - flow_gt) ** 2, dim=0).sqrt()
        epe_list.append(epe.view(-1).numpy())
    epe = np.mean(np.concatenate(epe_list))
    print("Validation Chairs EPE: %f" % epe)
    return {'chairs': epe}


@torch.no_grad()
def validate_kitti(model, iters=6):
    """ Peform validation using the KITTI-2015 (train) split """
    model.eval()
    val_dataset = SyntheticFlowDataset(4, (60, 76), seed=11, sparse=True)
    out_list, epe_list = [], []
    for val_id in range(len(val_dataset)):
        image1, image2, flow_gt, valid_gt = val_dataset[val_id]
        image1, image2 = image1[None].to(DEVICE), image2[None].to(DEVICE)
        padder = InputPadder(image1.shape, mode='kitti')
        image1, image2 = padder.pad(image1, image2)
        flow_low, flow_pr = model(image1, image2, iters=iters, test_mode=True)
        flow = padder.unpad(flow_pr[0]).cpu()
        epe = torch.sum((flow - flow_gt) ** 2, dim=0).sqrt()
        mag = torch.sum(flow_gt ** 2, dim=0).sqrt()
        epe, mag, val = epe.view(-1), mag.view(-1), valid_gt.view(-1) >= 0.5
        out = ((epe > 3.0) & ((epe / mag) > 0.05)).float()
        epe_list.append(epe[val].mean().item())
        out_list.append(out[val].cpu().numpy())
    epe = np.mean(np.array(epe_list))
    f1 = 100 * np.mean(np.concatenate(out_list))
    print("Validation KITTI: %f, %f" % (epe, f1))
    return {'kitti-epe': epe, 'kitti-f1': f1}


def sequence_loss(flow_preds, flow_gt, valid, gamma=0.8, max_flow=MAX_FLOW):
    """ Loss function defined over sequence of flow predictions """
    n_predictions = len(flow_preds)
    flow_loss = 0.0
    # exlude invalid pixels and extremely large diplacements
    mag = torch.sum(flow_gt ** 2, dim=1).sqrt()
    valid = (valid >= 0.5) & (mag < max_flow)
    for i in range(n_predictions):
        i_weight = gamma ** (n_predictions - i - 1)
        i_loss = (flow_preds[i] - flow_gt).abs()
        flow_loss += i_weight * (valid[:, None] * i_loss).mean()
    epe = torch.sum((flow_preds[-1] - flow_gt) ** 2, dim=1).sqrt()
    epe = epe.view(-1)[valid.view(-1)]
    metrics = {'epe': epe.mean().item(), '1px': (epe < 1).float().mean().item(),
               '3px': (epe < 3).float().mean().item(), '5px': (epe < 5).float().mean().item()}
    return flow_loss, metrics


def fetch_optimizer(args, model):
    """ Create the optimizer and learning rate scheduler """
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.wdecay, eps=args.epsilon)
    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, args.lr, args.num_steps + 100, pct_start=0.05,
                                              cycle_momentum=False, anneal_strategy='linear')
    return optimizer, scheduler


class Logger:
    def __init__(self, model, scheduler):
        self.model, self.scheduler = model, scheduler
        self.total_steps, self.running_loss = 0, {}

    def _print_training_status(self):
        metrics_data = [self.running_loss[k] / SUM_FREQ for k in sorted(self.running_loss.keys())]
        training_str = "[{:6d}, {:10.7f}] ".format(self.total_steps + 1, self.scheduler.get_last_lr()[0])
        metrics_str = ("{:10.4f}, " * len(metrics_data)).format(*metrics_data)
        print(training_str + metrics_str)

    def push(self, metrics):
        self.total_steps += 1
        for key in metrics:
            self.running_loss[key] = self.running_loss.get(key, 0.0) + metrics[key]
        if self.total_steps % SUM_FREQ == SUM_FREQ - 1:
            self._print_training_status()
            self.running_loss = {}

    def write_dict(self, results):  # tensorboard's add_scalar
        print("step %d: %s" % (self.total_steps, ", ".join("%s %.4f" % kv for kv in sorted(results.items()))))


def train(args):
    model = nn.DataParallel(RAFT(args), device_ids=args.gpus)
    print("Parameter Count: %d" % sum(p.numel() for p in model.parameters() if p.requires_grad))

    if args.restore_ckpt is not None:
        model.load_state_dict(torch.load(args.restore_ckpt), strict=False)

    model.to(DEVICE)
    model.train()

    if args.stage != 'chairs':
        model.module.freeze_bn()

    train_loader = fetch_dataloader(args)
    optimizer, scheduler = fetch_optimizer(args, model)

    total_steps = 0
    scaler = torch.amp.GradScaler("cuda", enabled=args.mixed_precision)
    logger = Logger(model, scheduler)

    should_keep_training = True
    while should_keep_training:
        for i_batch, data_blob in enumerate(train_loader):
            optimizer.zero_grad()
            image1, image2, flow, valid = [x.to(DEVICE) for x in data_blob]

            if args.add_noise:
                stdv = np.random.uniform(0.0, 5.0)
                image1 = (image1 + stdv * torch.randn(*image1.shape).to(DEVICE)).clamp(0.0, 255.0)
                image2 = (image2 + stdv * torch.randn(*image2.shape).to(DEVICE)).clamp(0.0, 255.0)

            flow_predictions = model(image1, image2, iters=args.iters)

            loss, metrics = sequence_loss(flow_predictions, flow, valid, args.gamma)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)

            scaler.step(optimizer)
            scheduler.step()
            scaler.update()

            logger.push(metrics)

            if total_steps % VAL_FREQ == VAL_FREQ - 1:
                PATH = os.path.join(args.checkpoint_dir, '%d_%s.pth' % (total_steps + 1, args.name))
                torch.save(model.state_dict(), PATH)

                results = {}
                for val_dataset in args.validation:
                    if val_dataset == 'chairs':
                        results.update(validate_chairs(model.module))
                    elif val_dataset == 'kitti':
                        results.update(validate_kitti(model.module))
                logger.write_dict(results)

                model.train()
                if args.stage != 'chairs':
                    model.module.freeze_bn()

            total_steps += 1
            if total_steps > args.num_steps:
                should_keep_training = False
                break

    PATH = os.path.join(args.checkpoint_dir, '%s.pth' % args.name)
    torch.save(model.state_dict(), PATH)
    return PATH


def demo(args):
    """demo.py: load the DataParallel checkpoint, unwrap it and estimate flow on a fresh pair."""
    model = torch.nn.DataParallel(RAFT(args))
    model.load_state_dict(torch.load(args.model))
    model = model.module
    model.to(DEVICE)
    model.eval()
    with torch.no_grad():
        image1, image2, flow_gt, _ = SyntheticFlowDataset(1, (60, 60), seed=21)[0]
        image1, image2 = image1[None].to(DEVICE), image2[None].to(DEVICE)
        padder = InputPadder(image1.shape)
        image1, image2 = padder.pad(image1, image2)
        flow_low, flow_up = model(image1, image2, iters=6, test_mode=True)
        flo = padder.unpad(flow_up)[0].permute(1, 2, 0).cpu().numpy()
    return float(np.sqrt(((flo - flow_gt.permute(1, 2, 0).numpy()) ** 2).sum(-1)).mean())


def make_args(**overrides):
    args = argparse.Namespace(name='raft', stage='chairs', restore_ckpt=None, small=True, validation=['chairs'],
                              lr=0.0004, num_steps=14, batch_size=4, image_size=[64, 64],
                              gpus=[0] if torch.cuda.is_available() else None,
                              mixed_precision=torch.cuda.is_available(), iters=4, wdecay=.0001, epsilon=1e-8,
                              clip=1.0, dropout=0.0, gamma=0.8, add_noise=True, checkpoint_dir='checkpoints')
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


if __name__ == '__main__':
    torch.manual_seed(1234)
    np.random.seed(1234)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint_dir = os.path.join(tmp, 'checkpoints')
        if not os.path.isdir(checkpoint_dir):
            os.mkdir(checkpoint_dir)
        # train_standard.sh: chairs first, then the next stage restores the chairs checkpoint
        chairs_ckpt = train(make_args(name='raft-chairs', checkpoint_dir=checkpoint_dir))
        kitti_ckpt = train(make_args(name='raft-kitti', stage='kitti', validation=['kitti'], restore_ckpt=chairs_ckpt,
                                     num_steps=7, lr=0.0001, checkpoint_dir=checkpoint_dir))
        demo_epe = demo(make_args(model=kitti_ckpt))
    print("done: demo EPE %.4f" % demo_epe)
