"""Trains, resumes, evaluates and fine-tunes a 3D ResNet video classifier on synthetic clips the way
kenshohara/3D-ResNets-PyTorch does it: ``opt.device`` is ``cpu`` with ``--no_cuda`` and ``cuda`` otherwise; the model is
built on the CPU, restored from a checkpoint with ``map_location='cpu'`` when resuming or loading pretrained weights,
and then handed to `make_data_parallel`, which wraps it in ``nn.DataParallel(model, device_ids=None).cuda()`` on a GPU.
The training, validation and inference loops move only the targets (``targets.to(device, non_blocking=True)``); the
clip batches stay on the CPU and DataParallel scatters them. Checkpoints save the unwrapped ``model.module`` state dict
with the optimizer and scheduler. The script runs three times: training from scratch (with checkpoints), resuming
from the last checkpoint with an inference pass that writes a JSON of per-video top-k scores, and fine-tuning only
the new ``fc`` layer of a model initialised from the trained checkpoint (``--pretrain_path --ft_begin_module fc``).

Modeled on: kenshohara/3D-ResNets-PyTorch, main.py, model.py, training.py, validation.py, inference.py, utils.py,
opts.py, mean.py, models/resnet.py, datasets/videodataset_multiclips.py and temporal_transforms.py at commit
540a0ea1abaee379fa3651d4d5afbd2d667a1f49
(https://github.com/kenshohara/3D-ResNets-PyTorch/blob/540a0ea1abaee379fa3651d4d5afbd2d667a1f49/main.py and the
other files at the same commit).

Kept: main.py's `get_opt`, `resume_model` and `resume_train_utils` (``torch.load(resume_path, map_location='cpu')``,
``model.module.load_state_dict`` when wrapped), `save_checkpoint` (``model.module.state_dict()`` when wrapped), the
optimizer/scheduler part of `get_train_utils`, the DataLoaders with ``pin_memory=True``, `main_worker` for the
non-distributed case (``generate_model``, ``load_pretrained_model``, ``resume_model``, then ``make_data_parallel(model,
opt.distributed, opt.device)``, fine-tuning parameters taken from the wrapped model, ``CrossEntropyLoss().to(
opt.device)``, the epoch loop with checkpointing, validation, scheduler steps and inference) and the ``__main__``
lines ``opt.device = torch.device('cpu' if opt.no_cuda else 'cuda')`` and ``cudnn.benchmark = True``; model.py's
`get_module_name`, `get_fine_tuning_parameters`, `load_pretrained_model` (``map_location='cpu'``, new ``fc`` made on
the CPU) and `make_data_parallel`; `train_epoch`, `val_epoch` (``torch.no_grad()``) and `inference`
(``F.softmax(outputs, dim=1).cpu()``, per-video averaging, ``topk``/``.item()``), all moving only the targets;
utils.py's helpers; models/resnet.py's `BasicBlock` and `ResNet`, including `_downsample_basic_block` for shortcut
type A (used here), which makes its zero padding on the CPU and calls ``.cuda()`` on it when ``isinstance(out.data,
torch.cuda.FloatTensor)``; collate_fn of datasets/videodataset_multiclips.py.

Changed to run here: Kinetics videos and their JPEG loaders and PIL spatial transforms are replaced by
`SyntheticVideoDataset`, a seeded set of 16-frame videos of a bright square moving in one of four directions
(the class), returning normalised clips (C x T x H x W) with random-crop/even-crop/sliding-window temporal sampling and
the original target types (``label``, or ``['video_id', 'segment']`` for inference); `parse_opts` keeps only the
options the code reads and takes an argument list; ``--no_cuda`` is added when no GPU is available (that is how the
script is run on a CPU); `get_opt` creates the result folder; `generate_model` builds only the ResNet; the
distributed parts of `main_worker`/`train_epoch`/`val_epoch` (``mp.spawn``, process groups, all-reduce of the
metrics), tensorboard, ``print(model)`` and the per-iteration printing are dropped (one line per epoch instead);
`inference` and `main_worker` return their results; the three runs share a temporary working folder that is removed
at the end.
Shrunk: ResNet-18 -> ResNet-10 with widen factor 0.125 (8-16-32-64 channels), clips of 8 frames of 32x32 instead of
16 frames of 112x112, 4 classes, 48 training and 16 validation videos, batch size 8, 2 + 1 + 1 epochs, learning
rate 0.1 -> 0.01 with the multistep milestone at epoch 2, 2 validation clips per video, top-2 scores in the JSON.
"""
import argparse
import json
import math
import os
import random
import shutil
import tempfile
import time
import csv
from collections import defaultdict
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import CrossEntropyLoss
from torch.optim import SGD, lr_scheduler
from torch.backends import cudnn
from torch.utils.data.dataloader import default_collate

# ---- opts.py, mean.py ---------------------------------------------------------------------------------------------
def parse_opts(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument('--root_path', default=None, type=Path, help='Root directory path')
    parser.add_argument('--result_path', default=None, type=Path, help='Result directory path')
    parser.add_argument('--n_classes', default=400, type=int, help='Number of classes')
    parser.add_argument('--n_pretrain_classes', default=0, type=int, help='Number of classes of pretraining task.')
    parser.add_argument('--pretrain_path', default=None, type=Path, help='Pretrained model path (.pth).')
    parser.add_argument('--ft_begin_module', default='', type=str, help='Module name of beginning of fine-tuning')
    parser.add_argument('--sample_size', default=112, type=int, help='Height and width of inputs')
    parser.add_argument('--sample_duration', default=16, type=int, help='Temporal duration of inputs')
    parser.add_argument('--learning_rate', default=0.1, type=float, help='Initial learning rate')
    parser.add_argument('--momentum', default=0.9, type=float, help='Momentum')
    parser.add_argument('--dampening', default=0.0, type=float, help='dampening of SGD')
    parser.add_argument('--weight_decay', default=1e-3, type=float, help='Weight Decay')
    parser.add_argument('--mean_dataset', default='kinetics', type=str, help='dataset for mean values')
    parser.add_argument('--value_scale', default=1, type=int, help='If 1, range of inputs is [0-1].')
    parser.add_argument('--nesterov', action='store_true', help='Nesterov momentum')
    parser.add_argument('--lr_scheduler', default='multistep', type=str, help='(multistep | plateau)')
    parser.add_argument('--multistep_milestones', default=[50, 100, 150], type=int, nargs='+')
    parser.add_argument('--overwrite_milestones', action='store_true')
    parser.add_argument('--plateau_patience', default=10, type=int)
    parser.add_argument('--batch_size', default=128, type=int, help='Batch Size')
    parser.add_argument('--inference_batch_size', default=0, type=int)
    parser.add_argument('--n_epochs', default=200, type=int, help='Number of total epochs to run')
    parser.add_argument('--n_val_samples', default=3, type=int, help='Number of validation samples for each activity')
    parser.add_argument('--resume_path', default=None, type=Path, help='Save data (.pth) of previous training')
    parser.add_argument('--no_train', action='store_true', help='If true, training is not performed.')
    parser.add_argument('--no_val', action='store_true', help='If true, validation is not performed.')
    parser.add_argument('--inference', action='store_true', help='If true, inference is performed.')
    parser.add_argument('--inference_subset', default='val', type=str)
    parser.add_argument('--inference_stride', default=16, type=int, help='Stride of sliding window in inference.')
    parser.add_argument('--inference_no_average', action='store_true')
    parser.add_argument('--no_cuda', action='store_true', help='If true, cuda is not used.')
    parser.add_argument('--n_threads', default=4, type=int, help='Number of threads for multi-thread loading')
    parser.add_argument('--checkpoint', default=10, type=int, help='Trained model is saved at every this epochs.')
    parser.add_argument('--model', default='resnet', type=str)
    parser.add_argument('--model_depth', default=18, type=int, help='Depth of resnet (10 | 18 | 34 | 50 | 101)')
    parser.add_argument('--conv1_t_size', default=7, type=int, help='Kernel size in t dim of conv1.')
    parser.add_argument('--conv1_t_stride', default=1, type=int, help='Stride in t dim of conv1.')
    parser.add_argument('--no_max_pool', action='store_true')
    parser.add_argument('--resnet_shortcut', default='B', type=str, help='Shortcut type of resnet (A | B)')
    parser.add_argument('--resnet_widen_factor', default=1.0, type=float)
    parser.add_argument('--manual_seed', default=1, type=int, help='Manually set random seed')
    parser.add_argument('--output_topk', default=5, type=int, help='Top-k scores are saved in json file.')
    parser.add_argument('--batchnorm_sync', action='store_true')
    parser.add_argument('--distributed', action='store_true')
    return parser.parse_args(argv)

def get_mean_std(value_scale, dataset):
    assert dataset in ['activitynet', 'kinetics', '0.5']
    if dataset == 'kinetics':
        mean = [0.4345, 0.4051, 0.3775]
        std = [0.2768, 0.2713, 0.2737]
    else:
        mean = [0.5, 0.5, 0.5]
        std = [0.5, 0.5, 0.5]
    mean = [x * value_scale for x in mean]
    std = [x * value_scale for x in std]
    return mean, std

# ---- datasets (synthetic stand-in) and collate_fn of videodataset_multiclips.py -------------------------------------
class SyntheticVideoDataset(torch.utils.data.Dataset):
    """Videos of a square moving right/left/down/up (the four classes); clips are C x T x H x W."""
    class_names = {0: 'right', 1: 'left', 2: 'down', 3: 'up'}

    def __init__(self, subset, n_videos, size, duration, mean, std, clips='random', n_samples=1, stride=0,
                 target_type='label', seed=0):
        rng = np.random.RandomState(seed)
        self.videos, self.labels = [], []
        for v in range(n_videos):
            label = v % 4
            frames = rng.rand(16, 3, size, size).astype(np.float32) * 0.3
            x, y = rng.randint(4, size - 12, size=2)
            for t in range(16):
                dx, dy = [(t, 0), (-t, 0), (0, t), (0, -t)][label]
                frames[t, :, max(0, y + dy // 2):y + dy // 2 + 8, max(0, x + dx // 2):x + dx // 2 + 8] = 1.0
            self.videos.append(frames)
            self.labels.append(label)
        self.subset, self.duration, self.clips = subset, duration, clips
        self.n_samples, self.stride, self.target_type = n_samples, stride or duration, target_type
        self.mean = np.array(mean, np.float32)[None, :, None, None]
        self.std = np.array(std, np.float32)[None, :, None, None]

    def clip(self, index, begin):
        frames = (self.videos[index][begin:begin + self.duration] - self.mean) / self.std
        return torch.from_numpy(frames).permute(1, 0, 2, 3)

    def __getitem__(self, index):
        if self.clips == 'random':  # TemporalRandomCrop, one clip
            begin = random.randint(0, 16 - self.duration)
            return self.clip(index, begin), self.labels[index]
        if self.clips == 'even':  # TemporalEvenCrop
            stride = max(1, math.ceil((16 - 1 - self.duration) / (self.n_samples - 1)))
            begins = list(range(0, 16 - self.duration + 1, stride))[:self.n_samples]
        else:  # SlidingWindow
            begins = list(range(0, 16 - self.duration + 1, self.stride))
        clips = [self.clip(index, b) for b in begins]
        if self.target_type == 'label':
            targets = [self.labels[index] for _ in begins]
        else:
            targets = [['v%03d' % index, [b, b + self.duration]] for b in begins]
        return clips, targets

    def __len__(self):
        return len(self.videos)

def collate_fn(batch):
    batch_clips, batch_targets = zip(*batch)
    batch_clips = [clip for multi_clips in batch_clips for clip in multi_clips]
    batch_targets = [target for multi_targets in batch_targets for target in multi_targets]
    target_element = batch_targets[0]
    if isinstance(target_element, int) or isinstance(target_element, str):
        return default_collate(batch_clips), default_collate(batch_targets)
    else:
        return default_collate(batch_clips), batch_targets

# ---- utils.py -----------------------------------------------------------------------------------------------------
class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

class Logger(object):

    def __init__(self, path, header):
        self.log_file = path.open('w')
        self.logger = csv.writer(self.log_file, delimiter='\t')
        self.logger.writerow(header)
        self.header = header

    def log(self, values):
        write_values = []
        for col in self.header:
            assert col in values
            write_values.append(values[col])
        self.logger.writerow(write_values)
        self.log_file.flush()

def calculate_accuracy(outputs, targets):
    with torch.no_grad():
        batch_size = targets.size(0)
        _, pred = outputs.topk(1, 1, largest=True, sorted=True)
        pred = pred.t()
        correct = pred.eq(targets.view(1, -1))
        n_correct_elems = correct.float().sum().item()
        return n_correct_elems / batch_size

def worker_init_fn(worker_id):
    torch_seed = torch.initial_seed()
    random.seed(torch_seed + worker_id)
    if torch_seed >= 2**32:
        torch_seed = torch_seed % 2**32
    np.random.seed(torch_seed + worker_id)

def get_lr(optimizer):
    lrs = []
    for param_group in optimizer.param_groups:
        lr = float(param_group['lr'])
        lrs.append(lr)
    return max(lrs)

# ---- models/resnet.py ---------------------------------------------------------------------------------------------
def get_inplanes():
    return [64, 128, 256, 512]

def conv3x3x3(in_planes, out_planes, stride=1):
    return nn.Conv3d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)

def conv1x1x1(in_planes, out_planes, stride=1):
    return nn.Conv3d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm3d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3x3(planes, planes)
        self.bn2 = nn.BatchNorm3d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            residual = self.downsample(x)
        out += residual
        out = self.relu(out)
        return out

class ResNet(nn.Module):

    def __init__(self, block, layers, block_inplanes, n_input_channels=3, conv1_t_size=7, conv1_t_stride=1,
                 no_max_pool=False, shortcut_type='B', widen_factor=1.0, n_classes=400):
        super().__init__()
        block_inplanes = [int(x * widen_factor) for x in block_inplanes]
        self.in_planes = block_inplanes[0]
        self.no_max_pool = no_max_pool
        self.conv1 = nn.Conv3d(n_input_channels, self.in_planes, kernel_size=(conv1_t_size, 7, 7),
                               stride=(conv1_t_stride, 2, 2), padding=(conv1_t_size // 2, 3, 3), bias=False)
        self.bn1 = nn.BatchNorm3d(self.in_planes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool3d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, block_inplanes[0], layers[0], shortcut_type)
        self.layer2 = self._make_layer(block, block_inplanes[1], layers[1], shortcut_type, stride=2)
        self.layer3 = self._make_layer(block, block_inplanes[2], layers[2], shortcut_type, stride=2)
        self.layer4 = self._make_layer(block, block_inplanes[3], layers[3], shortcut_type, stride=2)
        self.avgpool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.fc = nn.Linear(block_inplanes[3] * block.expansion, n_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, nn.BatchNorm3d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _downsample_basic_block(self, x, planes, stride):
        out = F.avg_pool3d(x, kernel_size=1, stride=stride)
        zero_pads = torch.zeros(out.size(0), planes - out.size(1), out.size(2),
                                out.size(3), out.size(4))
        if isinstance(out.data, torch.cuda.FloatTensor):
            zero_pads = zero_pads.cuda()

        out = torch.cat([out.data, zero_pads], dim=1)

        return out

    def _make_layer(self, block, planes, blocks, shortcut_type, stride=1):
        downsample = None
        if stride != 1 or self.in_planes != planes * block.expansion:
            if shortcut_type == 'A':
                downsample = partial(self._downsample_basic_block, planes=planes * block.expansion, stride=stride)
            else:
                downsample = nn.Sequential(conv1x1x1(self.in_planes, planes * block.expansion, stride),
                                           nn.BatchNorm3d(planes * block.expansion))
        layers = []
        layers.append(block(in_planes=self.in_planes, planes=planes, stride=stride, downsample=downsample))
        self.in_planes = planes * block.expansion
        for i in range(1, blocks):
            layers.append(block(self.in_planes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        if not self.no_max_pool:
            x = self.maxpool(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        x = self.fc(x)
        return x

# ---- model.py -----------------------------------------------------------------------------------------------------
def get_module_name(name):
    name = name.split('.')
    if name[0] == 'module':
        i = 1
    else:
        i = 0
    if name[i] == 'features':
        i += 1
    return name[i]

def get_fine_tuning_parameters(model, ft_begin_module):
    if not ft_begin_module:
        return model.parameters()
    parameters = []
    add_flag = False
    for k, v in model.named_parameters():
        if ft_begin_module == get_module_name(k):
            add_flag = True
        if add_flag:
            parameters.append({'params': v})
    return parameters

def generate_model(opt):
    assert opt.model in ['resnet']
    assert opt.model_depth in [10, 18]
    model = ResNet(BasicBlock, [1, 1, 1, 1] if opt.model_depth == 10 else [2, 2, 2, 2], get_inplanes(),
                   n_classes=opt.n_classes, n_input_channels=opt.n_input_channels,
                   shortcut_type=opt.resnet_shortcut, conv1_t_size=opt.conv1_t_size,
                   conv1_t_stride=opt.conv1_t_stride, no_max_pool=opt.no_max_pool,
                   widen_factor=opt.resnet_widen_factor)
    return model

def load_pretrained_model(model, pretrain_path, model_name, n_finetune_classes):
    if pretrain_path:
        print('loading pretrained model {}'.format(pretrain_path))
        pretrain = torch.load(pretrain_path, map_location='cpu')

        model.load_state_dict(pretrain['state_dict'])
        tmp_model = model
        if model_name == 'densenet':
            tmp_model.classifier = nn.Linear(tmp_model.classifier.in_features,
                                             n_finetune_classes)
        else:
            tmp_model.fc = nn.Linear(tmp_model.fc.in_features,
                                     n_finetune_classes)

    return model

def make_data_parallel(model, is_distributed, device):
    if is_distributed:
        if device.type == 'cuda' and device.index is not None:
            torch.cuda.set_device(device)
            model.to(device)

            model = nn.parallel.DistributedDataParallel(model,
                                                        device_ids=[device])
        else:
            model.to(device)
            model = nn.parallel.DistributedDataParallel(model)
    elif device.type == 'cuda':
        model = nn.DataParallel(model, device_ids=None).cuda()

    return model

# ---- training.py, validation.py, inference.py -----------------------------------------------------------------------
def train_epoch(epoch, data_loader, model, criterion, optimizer, device, current_lr, epoch_logger, batch_logger,
                tb_writer=None, distributed=False):
    print('train at epoch {}'.format(epoch))
    model.train()
    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()
    accuracies = AverageMeter()
    end_time = time.time()
    for i, (inputs, targets) in enumerate(data_loader):
        data_time.update(time.time() - end_time)
        targets = targets.to(device, non_blocking=True)
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        acc = calculate_accuracy(outputs, targets)
        losses.update(loss.item(), inputs.size(0))
        accuracies.update(acc, inputs.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch_time.update(time.time() - end_time)
        end_time = time.time()
        if batch_logger is not None:
            batch_logger.log({'epoch': epoch, 'batch': i + 1, 'iter': (epoch - 1) * len(data_loader) + (i + 1),
                              'loss': losses.val, 'acc': accuracies.val, 'lr': current_lr})
    print('Epoch: [{0}]\tLoss {loss.avg:.4f}\tAcc {acc.avg:.3f}'.format(epoch, loss=losses, acc=accuracies))
    if epoch_logger is not None:
        epoch_logger.log({'epoch': epoch, 'loss': losses.avg, 'acc': accuracies.avg, 'lr': current_lr})

def val_epoch(epoch, data_loader, model, criterion, device, logger, tb_writer=None, distributed=False):
    print('validation at epoch {}'.format(epoch))
    model.eval()
    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()
    accuracies = AverageMeter()
    end_time = time.time()
    with torch.no_grad():
        for i, (inputs, targets) in enumerate(data_loader):
            data_time.update(time.time() - end_time)
            targets = targets.to(device, non_blocking=True)
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            acc = calculate_accuracy(outputs, targets)
            losses.update(loss.item(), inputs.size(0))
            accuracies.update(acc, inputs.size(0))
            batch_time.update(time.time() - end_time)
            end_time = time.time()
    print('Epoch: [{0}]\tVal Loss {loss.avg:.4f}\tVal Acc {acc.avg:.3f}'.format(epoch, loss=losses, acc=accuracies))
    if logger is not None:
        logger.log({'epoch': epoch, 'loss': losses.avg, 'acc': accuracies.avg})
    return losses.avg

def get_video_results(outputs, class_names, output_topk):
    sorted_scores, locs = torch.topk(outputs, k=min(output_topk, len(class_names)))
    video_results = []
    for i in range(sorted_scores.size(0)):
        video_results.append({'label': class_names[locs[i].item()], 'score': sorted_scores[i].item()})
    return video_results

def inference(data_loader, model, result_path, class_names, no_average, output_topk):
    print('inference')
    model.eval()
    results = {'results': defaultdict(list)}
    with torch.no_grad():
        for i, (inputs, targets) in enumerate(data_loader):
            video_ids, segments = zip(*targets)
            outputs = model(inputs)
            outputs = F.softmax(outputs, dim=1).cpu()
            for j in range(outputs.size(0)):
                results['results'][video_ids[j]].append({'segment': segments[j], 'output': outputs[j]})
    inference_results = {'results': {}}
    if not no_average:
        for video_id, video_results in results['results'].items():
            video_outputs = [segment_result['output'] for segment_result in video_results]
            video_outputs = torch.stack(video_outputs)
            average_scores = torch.mean(video_outputs, dim=0)
            inference_results['results'][video_id] = get_video_results(average_scores, class_names, output_topk)
    else:
        for video_id, video_results in results['results'].items():
            inference_results['results'][video_id] = []
            for segment_result in video_results:
                segment = segment_result['segment']
                result = get_video_results(segment_result['output'], class_names, output_topk)
                inference_results['results'][video_id].append({'segment': segment, 'result': result})
    with result_path.open('w') as f:
        json.dump(inference_results, f)
    return inference_results

# ---- main.py ------------------------------------------------------------------------------------------------------
def json_serial(obj):
    if isinstance(obj, Path):
        return str(obj)

def get_opt(argv):
    opt = parse_opts(argv)
    if opt.root_path is not None:
        opt.result_path = opt.root_path / opt.result_path
        if opt.resume_path is not None:
            opt.resume_path = opt.root_path / opt.resume_path
        if opt.pretrain_path is not None:
            opt.pretrain_path = opt.root_path / opt.pretrain_path
    if opt.pretrain_path is not None:
        opt.n_finetune_classes = opt.n_classes
        opt.n_classes = opt.n_pretrain_classes
    if opt.output_topk <= 0:
        opt.output_topk = opt.n_classes
    if opt.inference_batch_size == 0:
        opt.inference_batch_size = opt.batch_size
    opt.arch = '{}-{}'.format(opt.model, opt.model_depth)
    opt.begin_epoch = 1
    opt.mean, opt.std = get_mean_std(opt.value_scale, dataset=opt.mean_dataset)
    opt.n_input_channels = 3
    opt.result_path.mkdir(parents=True, exist_ok=True)
    with (opt.result_path / 'opts.json').open('w') as opt_file:
        json.dump(vars(opt), opt_file, default=json_serial)
    return opt

def resume_model(resume_path, arch, model):
    print('loading checkpoint {} model'.format(resume_path))
    checkpoint = torch.load(resume_path, map_location='cpu')
    assert arch == checkpoint['arch']
    if hasattr(model, 'module'):
        model.module.load_state_dict(checkpoint['state_dict'])
    else:
        model.load_state_dict(checkpoint['state_dict'])
    return model

def resume_train_utils(resume_path, begin_epoch, optimizer, scheduler):
    print('loading checkpoint {} train utils'.format(resume_path))
    checkpoint = torch.load(resume_path, map_location='cpu')
    begin_epoch = checkpoint['epoch'] + 1
    if optimizer is not None and 'optimizer' in checkpoint:
        optimizer.load_state_dict(checkpoint['optimizer'])
    if scheduler is not None and 'scheduler' in checkpoint:
        scheduler.load_state_dict(checkpoint['scheduler'])
    return begin_epoch, optimizer, scheduler

def get_train_utils(opt, model_parameters):
    train_data = SyntheticVideoDataset('training', 48, opt.sample_size, opt.sample_duration, opt.mean, opt.std, seed=1)
    train_sampler = None
    train_loader = torch.utils.data.DataLoader(train_data, batch_size=opt.batch_size, shuffle=(train_sampler is None),
                                               num_workers=opt.n_threads, pin_memory=True, sampler=train_sampler,
                                               worker_init_fn=worker_init_fn)
    train_logger = Logger(opt.result_path / 'train.log', ['epoch', 'loss', 'acc', 'lr'])
    train_batch_logger = Logger(opt.result_path / 'train_batch.log', ['epoch', 'batch', 'iter', 'loss', 'acc', 'lr'])
    if opt.nesterov:
        dampening = 0
    else:
        dampening = opt.dampening
    optimizer = SGD(model_parameters, lr=opt.learning_rate, momentum=opt.momentum, dampening=dampening,
                    weight_decay=opt.weight_decay, nesterov=opt.nesterov)
    assert opt.lr_scheduler in ['plateau', 'multistep']
    assert not (opt.lr_scheduler == 'plateau' and opt.no_val)
    if opt.lr_scheduler == 'plateau':
        scheduler = lr_scheduler.ReduceLROnPlateau(optimizer, 'min', patience=opt.plateau_patience)
    else:
        scheduler = lr_scheduler.MultiStepLR(optimizer, opt.multistep_milestones)
    return (train_loader, train_sampler, train_logger, train_batch_logger, optimizer, scheduler)

def get_val_utils(opt):
    val_data = SyntheticVideoDataset('validation', 16, opt.sample_size, opt.sample_duration, opt.mean, opt.std,
                                     clips='even', n_samples=opt.n_val_samples, seed=2)
    val_loader = torch.utils.data.DataLoader(val_data, batch_size=(opt.batch_size // opt.n_val_samples),
                                             shuffle=False, num_workers=opt.n_threads, pin_memory=True,
                                             sampler=None, worker_init_fn=worker_init_fn, collate_fn=collate_fn)
    val_logger = Logger(opt.result_path / 'val.log', ['epoch', 'loss', 'acc'])
    return val_loader, val_logger

def get_inference_utils(opt):
    inference_data = SyntheticVideoDataset(opt.inference_subset, 16, opt.sample_size, opt.sample_duration, opt.mean,
                                           opt.std, clips='sliding', stride=opt.inference_stride,
                                           target_type=['video_id', 'segment'], seed=2)
    inference_loader = torch.utils.data.DataLoader(inference_data, batch_size=opt.inference_batch_size,
                                                   shuffle=False, num_workers=opt.n_threads, pin_memory=True,
                                                   worker_init_fn=worker_init_fn, collate_fn=collate_fn)
    return inference_loader, inference_data.class_names

def save_checkpoint(save_file_path, epoch, arch, model, optimizer, scheduler):
    if hasattr(model, 'module'):
        model_state_dict = model.module.state_dict()
    else:
        model_state_dict = model.state_dict()
    save_states = {
        'epoch': epoch,
        'arch': arch,
        'state_dict': model_state_dict,
        'optimizer': optimizer.state_dict(),
        'scheduler': scheduler.state_dict()
    }
    torch.save(save_states, save_file_path)

def main_worker(index, opt):
    random.seed(opt.manual_seed)
    np.random.seed(opt.manual_seed)
    torch.manual_seed(opt.manual_seed)
    if index >= 0 and opt.device.type == 'cuda':
        opt.device = torch.device(f'cuda:{index}')
    opt.is_master_node = not opt.distributed or opt.dist_rank == 0
    model = generate_model(opt)
    if opt.batchnorm_sync:
        assert opt.distributed, 'SyncBatchNorm only supports DistributedDataParallel.'
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    if opt.pretrain_path:
        model = load_pretrained_model(model, opt.pretrain_path, opt.model, opt.n_finetune_classes)
    if opt.resume_path is not None:
        model = resume_model(opt.resume_path, opt.arch, model)
    model = make_data_parallel(model, opt.distributed, opt.device)
    if opt.pretrain_path:
        parameters = get_fine_tuning_parameters(model, opt.ft_begin_module)
    else:
        parameters = model.parameters()
    criterion = CrossEntropyLoss().to(opt.device)
    if not opt.no_train:
        (train_loader, train_sampler, train_logger, train_batch_logger, optimizer,
         scheduler) = get_train_utils(opt, parameters)
        if opt.resume_path is not None:
            opt.begin_epoch, optimizer, scheduler = resume_train_utils(opt.resume_path, opt.begin_epoch, optimizer,
                                                                       scheduler)
            if opt.overwrite_milestones:
                scheduler.milestones = opt.multistep_milestones
    if not opt.no_val:
        val_loader, val_logger = get_val_utils(opt)
    tb_writer = None
    prev_val_loss = None
    for i in range(opt.begin_epoch, opt.n_epochs + 1):
        if not opt.no_train:
            current_lr = get_lr(optimizer)
            train_epoch(i, train_loader, model, criterion, optimizer, opt.device, current_lr, train_logger,
                        train_batch_logger, tb_writer, opt.distributed)
            if i % opt.checkpoint == 0 and opt.is_master_node:
                save_file_path = opt.result_path / 'save_{}.pth'.format(i)
                save_checkpoint(save_file_path, i, opt.arch, model, optimizer, scheduler)
        if not opt.no_val:
            prev_val_loss = val_epoch(i, val_loader, model, criterion, opt.device, val_logger, tb_writer,
                                      opt.distributed)
        if not opt.no_train and opt.lr_scheduler == 'multistep':
            scheduler.step()
        elif not opt.no_train and opt.lr_scheduler == 'plateau':
            scheduler.step(prev_val_loss)
    results = None
    if opt.inference:
        inference_loader, inference_class_names = get_inference_utils(opt)
        inference_result_path = opt.result_path / '{}.json'.format(opt.inference_subset)
        results = inference(inference_loader, model, inference_result_path, inference_class_names,
                            opt.inference_no_average, opt.output_topk)
    return prev_val_loss, results

def run(argv):
    opt = get_opt(argv + (['--no_cuda'] if not torch.cuda.is_available() else []))
    opt.device = torch.device('cpu' if opt.no_cuda else 'cuda')
    if not opt.no_cuda:
        cudnn.benchmark = True
    opt.ngpus_per_node = torch.cuda.device_count()
    return main_worker(-1, opt)

if __name__ == '__main__':
    root, startdir = tempfile.mkdtemp(), os.getcwd()
    os.chdir(root)
    common = ['--root_path', '.', '--result_path', 'results', '--n_classes', '4', '--model_depth', '10',
              '--resnet_widen_factor', '0.125', '--resnet_shortcut', 'A', '--sample_size', '32',
              '--sample_duration', '8', '--batch_size', '8', '--n_val_samples', '2', '--n_threads', '0',
              '--learning_rate', '0.01', '--multistep_milestones', '2', '--output_topk', '2']
    try:
        val_loss1, _ = run(common + ['--n_epochs', '2', '--checkpoint', '1'])
        val_loss2, results = run(common + ['--resume_path', 'results/save_2.pth', '--n_epochs', '3',
                                           '--inference', '--inference_stride', '8'])
        top = results['results']['v001'][0]
        print('inference v001 (class left): {} {:.3f}'.format(top['label'], top['score']))
        val_loss3, _ = run(common + ['--pretrain_path', 'results/save_2.pth', '--n_pretrain_classes', '4',
                                     '--ft_begin_module', 'fc', '--n_epochs', '1', '--result_path', 'finetune'])
    finally:
        os.chdir(startdir)
        shutil.rmtree(root)
    print('done val_loss={:.4f} resumed_val_loss={:.4f} finetuned_val_loss={:.4f} n_videos={}'.format(
        val_loss1, val_loss2, val_loss3, len(results['results'])))
