"""Trains DeepLab v2 (a dilated bottleneck ResNet with output stride 8 and an ASPP head of four atrous 3x3 convs
summed, wrapped in MSC: the image and its 0.5x and 0.75x copies go through the same base and the pixel-wise max of
the upsampled logits is a fourth output) on a COCO-Stuff-10k-style segmentation set with the v2 protocol: weights
initialised from a pretrained base (the ASPP skipped), batch norm frozen, SGD with 1x/10x/20x learning rates for the
backbone, ASPP weights and ASPP biases, gradients accumulated over ITER_SIZE batches, a cross-entropy on each of the
four outputs against labels downsampled by nearest neighbour, and a polynomial learning-rate decay; checkpoints are
saved every ITER_SAVE iterations and at the end. Then `main.py test` reloads the final checkpoint, saves each image's
logits for CRF post-processing and writes pixel accuracy, mean accuracy, frequency-weighted and mean IoU to JSON.

Modeled on: kazuto1011/deeplab-pytorch, main.py, libs/models/__init__.py, libs/models/deeplabv2.py,
libs/models/msc.py, libs/models/resnet.py, libs/datasets/base.py, libs/datasets/cocostuff.py,
libs/utils/lr_scheduler.py, libs/utils/metric.py and configs/cocostuff10k.yaml at commit
4219467fa5de07985f834f1bd8c04c186dc8f6d8
(https://github.com/kazuto1011/deeplab-pytorch/blob/4219467fa5de07985f834f1bd8c04c186dc8f6d8/main.py).

Kept: the click group with the `train` and `test` commands and their `--cuda/--cpu` flag; `get_device(cuda)`
(`cuda and torch.cuda.is_available()`, printing each `torch.cuda.get_device_name(i)`); in `train`,
`torch.backends.cudnn.benchmark = True`, the init weights read with `torch.load(CONFIG.MODEL.INIT_MODEL)` into
`model.base` with `strict=False`, `model = nn.DataParallel(model)` then `model.to(device)`, `criterion.to(device)`,
the SGD param groups from `get_params(model.module, key=...)` generators, `PolynomialLR` stepped with
`scheduler.step(epoch=iteration)`, `model.train()` then `model.module.base.freeze_bn()`, the loader iterator
restarted in a bare `except`, `model(images.to(device))`, `resize_labels` (on CPU label tensors through numpy) and
`criterion(logit, labels_.to(device))` for each of the MSC outputs, `iter_loss /= ITER_SIZE`, `loss +=
float(iter_loss)`, the MovingAverageValueMeter, the TensorBoard block logging lrs and
`torch.cuda.memory_cached(i)` for every `range(torch.cuda.device_count())`, and
`torch.save(model.module.state_dict(), ...)`; in `test`, `torch.set_grad_enabled(False)`, the model built with
`eval(CONFIG.MODEL.NAME)`, `torch.load(model_path, map_location=lambda storage, loc: storage)` and
`load_state_dict` before `nn.DataParallel`, `model.eval()` then `model.to(device)`, `images.to(device)`, the logits
saved with `np.save(filename, logit.cpu().numpy())`, `F.interpolate` to the label size, softmax, argmax and
`labels.cpu().numpy()` gathered with the CPU ground truth for `scores`; the `_BaseDataset` augmentation (random scale,
pad with the mean and the ignore label, random crop, flip), mean subtraction and HWC->CHW; CocoStuff10k's image
lists, .mat labels shifted by one with the unlabeled class mapped to 255, and the warp.
Changed to run here: the images and labels are synthetic (coloured rectangles of 6 classes on a noisy background,
stored as .npy images and scipy .mat labels) in a temporary directory, and the "pretrained" init file is a randomly
initialised base saved first; OmegaConf.load is a PyYAML reader giving attribute access; cv2 and PIL resizing are a
numpy nearest-neighbour resize with PIL's pixel-centre rule (neither library is installed here), and cv2's border
padding is np.pad; torch.utils.tensorboard's SummaryWriter and torchnet's MovingAverageValueMeter are small
stand-ins; tqdm is dropped; the commands are invoked with `main.main(args=[...], standalone_mode=False)`; grad mode
is switched back on after `test` (the author's process simply ends); the crf command is left out.
Shrunk: the ResNet-101 widths 64..2048 are 8..256 and its [3, 4, 23, 3] blocks are [1, 1, 1, 1]; 6 classes (the
author's 182); 12 train and 4 test images warped to 41x41 (the author's 513) and train crops of 33 (321); batch 2,
ITER_SIZE 2, ITER_MAX 6, ITER_SAVE 3, ITER_TB 3, LR_DECAY 2, AVERAGE_LOSS 4.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import os.path as osp
import random
import tempfile

import click
import numpy as np
import scipy.io as sio
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml
from torch.optim.lr_scheduler import _LRScheduler
from torch.utils import data

class OmegaConf(object):
    """Stand-in for omegaconf.OmegaConf.load: the YAML as nested objects with attribute access."""

    class _Node(dict):
        __getattr__ = dict.__getitem__

    @staticmethod
    def load(f):
        def wrap(x):
            return OmegaConf._Node({k: wrap(v) for k, v in x.items()}) if isinstance(x, dict) else x
        return wrap(yaml.safe_load(f))

class SummaryWriter(object):
    """Stand-in for torch.utils.tensorboard.SummaryWriter (scalars kept in memory)."""
    def __init__(self, log_dir):
        self.scalars = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, float(value), step))

class MovingAverageValueMeter(object):
    """Stand-in for torchnet.meter.MovingAverageValueMeter."""
    def __init__(self, windowsize):
        self.windowsize, self.values = windowsize, []

    def add(self, value):
        self.values = (self.values + [value])[-self.windowsize:]

    def value(self):
        return float(np.mean(self.values)), float(np.std(self.values))

def pil_nearest_resize(array, size):
    """What `Image.fromarray(a).resize(size, resample=Image.NEAREST)` gives; size is (width, height)."""
    w, h = size
    rows = np.minimum(((np.arange(h) + 0.5) * array.shape[0] / h).astype(int), array.shape[0] - 1)
    cols = np.minimum(((np.arange(w) + 0.5) * array.shape[1] / w).astype(int), array.shape[1] - 1)
    return array[rows][:, cols]

# ----------------------------------------------------------------------------- libs/models/resnet.py

_BATCH_NORM = nn.BatchNorm2d
_BOTTLENECK_EXPANSION = 4

class _ConvBnReLU(nn.Sequential):
    BATCH_NORM = _BATCH_NORM

    def __init__(self, in_ch, out_ch, kernel_size, stride, padding, dilation, relu=True):
        super(_ConvBnReLU, self).__init__()
        self.add_module("conv", nn.Conv2d(in_ch, out_ch, kernel_size, stride, padding, dilation, bias=False))
        self.add_module("bn", _BATCH_NORM(out_ch, eps=1e-5, momentum=1 - 0.999))
        if relu:
            self.add_module("relu", nn.ReLU())

class _Bottleneck(nn.Module):
    def __init__(self, in_ch, out_ch, stride, dilation, downsample):
        super(_Bottleneck, self).__init__()
        mid_ch = out_ch // _BOTTLENECK_EXPANSION
        self.reduce = _ConvBnReLU(in_ch, mid_ch, 1, stride, 0, 1, True)
        self.conv3x3 = _ConvBnReLU(mid_ch, mid_ch, 3, 1, dilation, dilation, True)
        self.increase = _ConvBnReLU(mid_ch, out_ch, 1, 1, 0, 1, False)
        self.shortcut = (_ConvBnReLU(in_ch, out_ch, 1, stride, 0, 1, False) if downsample else nn.Identity())

    def forward(self, x):
        h = self.reduce(x)
        h = self.conv3x3(h)
        h = self.increase(h)
        h += self.shortcut(x)
        return F.relu(h)

class _ResLayer(nn.Sequential):
    def __init__(self, n_layers, in_ch, out_ch, stride, dilation, multi_grids=None):
        super(_ResLayer, self).__init__()
        if multi_grids is None:
            multi_grids = [1 for _ in range(n_layers)]
        else:
            assert n_layers == len(multi_grids)
        # Downsampling is only in the first block
        for i in range(n_layers):
            self.add_module("block{}".format(i + 1), _Bottleneck(
                in_ch=(in_ch if i == 0 else out_ch), out_ch=out_ch, stride=(stride if i == 0 else 1),
                dilation=dilation * multi_grids[i], downsample=(True if i == 0 else False)))

class _Stem(nn.Sequential):
    def __init__(self, out_ch):
        super(_Stem, self).__init__()
        self.add_module("conv1", _ConvBnReLU(3, out_ch, 7, 2, 3, 1))
        self.add_module("pool", nn.MaxPool2d(3, 2, 1, ceil_mode=True))

# ----------------------------------------------------------------------------- libs/models/deeplabv2.py, msc.py

class _ASPP(nn.Module):
    def __init__(self, in_ch, out_ch, rates):
        super(_ASPP, self).__init__()
        for i, rate in enumerate(rates):
            self.add_module("c{}".format(i),
                            nn.Conv2d(in_ch, out_ch, 3, 1, padding=rate, dilation=rate, bias=True))
        for m in self.children():
            nn.init.normal_(m.weight, mean=0, std=0.01)
            nn.init.constant_(m.bias, 0)

    def forward(self, x):
        return sum([stage(x) for stage in self.children()])

class DeepLabV2(nn.Sequential):
    def __init__(self, n_classes, n_blocks, atrous_rates):
        super(DeepLabV2, self).__init__()
        ch = [8 * 2 ** p for p in range(6)]  # the author's 64 * 2 ** p
        self.add_module("layer1", _Stem(ch[0]))
        self.add_module("layer2", _ResLayer(n_blocks[0], ch[0], ch[2], 1, 1))
        self.add_module("layer3", _ResLayer(n_blocks[1], ch[2], ch[3], 2, 1))
        self.add_module("layer4", _ResLayer(n_blocks[2], ch[3], ch[4], 1, 2))
        self.add_module("layer5", _ResLayer(n_blocks[3], ch[4], ch[5], 1, 4))
        self.add_module("aspp", _ASPP(ch[5], n_classes, atrous_rates))

    def freeze_bn(self):
        for m in self.modules():
            if isinstance(m, _ConvBnReLU.BATCH_NORM):
                m.eval()

class MSC(nn.Module):
    def __init__(self, base, scales=None):
        super(MSC, self).__init__()
        self.base = base
        if scales:
            self.scales = scales
        else:
            self.scales = [0.5, 0.75]

    def forward(self, x):
        # Original
        logits = self.base(x)
        _, _, H, W = logits.shape
        interp = lambda l: F.interpolate(l, size=(H, W), mode="bilinear", align_corners=False)

        # Scaled
        logits_pyramid = []
        for p in self.scales:
            h = F.interpolate(x, scale_factor=p, mode="bilinear", align_corners=False)
            logits_pyramid.append(self.base(h))

        # Pixel-wise max
        logits_all = [logits] + [interp(l) for l in logits_pyramid]
        logits_max = torch.max(torch.stack(logits_all), dim=0)[0]

        if self.training:
            return [logits] + logits_pyramid + [logits_max]
        else:
            return logits_max

def DeepLabV2_ResNet101_MSC(n_classes):
    return MSC(base=DeepLabV2(n_classes=n_classes, n_blocks=[1, 1, 1, 1], atrous_rates=[6, 12, 18, 24]),
               scales=[0.5, 0.75])

# ----------------------------------------------------------------------------- libs/utils

class PolynomialLR(_LRScheduler):
    def __init__(self, optimizer, step_size, iter_max, power, last_epoch=-1):
        self.step_size = step_size
        self.iter_max = iter_max
        self.power = power
        super(PolynomialLR, self).__init__(optimizer, last_epoch)

    def polynomial_decay(self, lr):
        return lr * (1 - float(self.last_epoch) / self.iter_max) ** self.power

    def get_lr(self):
        if ((self.last_epoch == 0) or (self.last_epoch % self.step_size != 0)
                or (self.last_epoch > self.iter_max)):
            return [group["lr"] for group in self.optimizer.param_groups]
        return [self.polynomial_decay(lr) for lr in self.base_lrs]

def _fast_hist(label_true, label_pred, n_class):
    mask = (label_true >= 0) & (label_true < n_class)
    hist = np.bincount(n_class * label_true[mask].astype(int) + label_pred[mask],
                       minlength=n_class ** 2).reshape(n_class, n_class)
    return hist

def scores(label_trues, label_preds, n_class):
    hist = np.zeros((n_class, n_class))
    for lt, lp in zip(label_trues, label_preds):
        hist += _fast_hist(lt.flatten(), lp.flatten(), n_class)
    acc = np.diag(hist).sum() / hist.sum()
    acc_cls = np.diag(hist) / hist.sum(axis=1)
    acc_cls = np.nanmean(acc_cls)
    iu = np.diag(hist) / (hist.sum(axis=1) + hist.sum(axis=0) - np.diag(hist))
    valid = hist.sum(axis=1) > 0  # added
    mean_iu = np.nanmean(iu[valid])
    freq = hist.sum(axis=1) / hist.sum()
    fwavacc = (freq[freq > 0] * iu[freq > 0]).sum()
    cls_iu = dict(zip(range(n_class), iu))
    return {"Pixel Accuracy": acc, "Mean Accuracy": acc_cls, "Frequency Weighted IoU": fwavacc,
            "Mean IoU": mean_iu, "Class IoU": cls_iu}

# ----------------------------------------------------------------------------- libs/datasets

class _BaseDataset(data.Dataset):
    def __init__(self, root, split, ignore_label, mean_bgr, augment=True, base_size=None, crop_size=321,
                 scales=(1.0), flip=True):
        self.root = root
        self.split = split
        self.ignore_label = ignore_label
        self.mean_bgr = np.array(mean_bgr)
        self.augment = augment
        self.base_size = base_size
        self.crop_size = crop_size
        self.scales = scales
        self.flip = flip
        self.files = []
        self._set_files()

    def _augmentation(self, image, label):
        # Scaling
        h, w = label.shape
        if self.base_size:
            if h > w:
                h, w = (self.base_size, int(self.base_size * w / h))
            else:
                h, w = (int(self.base_size * h / w), self.base_size)
        scale_factor = random.choice(self.scales)
        h, w = (int(h * scale_factor), int(w * scale_factor))
        image = pil_nearest_resize(image, (w, h))
        label = pil_nearest_resize(label, (w, h))
        label = np.asarray(label, dtype=np.int64)

        # Padding to fit for crop_size
        h, w = label.shape
        pad_h = max(self.crop_size - h, 0)
        pad_w = max(self.crop_size - w, 0)
        if pad_h > 0 or pad_w > 0:
            image = np.stack([np.pad(image[..., c], ((0, pad_h), (0, pad_w)), constant_values=self.mean_bgr[c])
                              for c in range(3)], axis=-1)
            label = np.pad(label, ((0, pad_h), (0, pad_w)), constant_values=self.ignore_label)

        # Cropping
        h, w = label.shape
        start_h = random.randint(0, h - self.crop_size)
        start_w = random.randint(0, w - self.crop_size)
        end_h = start_h + self.crop_size
        end_w = start_w + self.crop_size
        image = image[start_h:end_h, start_w:end_w]
        label = label[start_h:end_h, start_w:end_w]

        if self.flip:
            # Random flipping
            if random.random() < 0.5:
                image = np.fliplr(image).copy()  # HWC
                label = np.fliplr(label).copy()  # HW
        return image, label

    def __getitem__(self, index):
        image_id, image, label = self._load_data(index)
        if self.augment:
            image, label = self._augmentation(image, label)
        # Mean subtraction
        image -= self.mean_bgr
        # HWC -> CHW
        image = image.transpose(2, 0, 1)
        return image_id, image.astype(np.float32), label.astype(np.int64)

    def __len__(self):
        return len(self.files)

class CocoStuff10k(_BaseDataset):
    """COCO-Stuff 10k dataset"""

    def __init__(self, warp_image=True, **kwargs):
        self.warp_image = warp_image
        super(CocoStuff10k, self).__init__(**kwargs)

    def _set_files(self):
        if self.split in ["train", "test", "all"]:
            file_list = osp.join(self.root, "imageLists", self.split + ".txt")
            file_list = tuple(open(file_list, "r"))
            file_list = [id_.rstrip() for id_ in file_list]
            self.files = file_list
        else:
            raise ValueError("Invalid split name: {}".format(self.split))

    def _load_data(self, index):
        image_id = self.files[index]
        image_path = osp.join(self.root, "images", image_id + ".npy")
        label_path = osp.join(self.root, "annotations", image_id + ".mat")
        image = np.load(image_path).astype(np.float32)
        label = sio.loadmat(label_path)["S"]
        label -= 1  # unlabeled (0 -> -1)
        label[label == -1] = 255
        # Warping: this is just for reproducing the official scores on GitHub
        if self.warp_image:
            image = pil_nearest_resize(image, (41, 41))  # the author's 513
            label = pil_nearest_resize(label, (41, 41))
        return image_id, image, label

def get_dataset(name):
    return {"cocostuff10k": CocoStuff10k}[name]

# ----------------------------------------------------------------------------- main.py

def makedirs(dirs):
    if not os.path.exists(dirs):
        os.makedirs(dirs)

def get_device(cuda):
    cuda = cuda and torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if cuda:
        print("Device:")
        for i in range(torch.cuda.device_count()):
            print("    {}:".format(i), torch.cuda.get_device_name(i))
    else:
        print("Device: CPU")
    return device

def get_params(model, key):
    # For Dilated FCN
    if key == "1x":
        for m in model.named_modules():
            if "layer" in m[0]:
                if isinstance(m[1], nn.Conv2d):
                    for p in m[1].parameters():
                        yield p
    # For conv weight in the ASPP module
    if key == "10x":
        for m in model.named_modules():
            if "aspp" in m[0]:
                if isinstance(m[1], nn.Conv2d):
                    yield m[1].weight
    # For conv bias in the ASPP module
    if key == "20x":
        for m in model.named_modules():
            if "aspp" in m[0]:
                if isinstance(m[1], nn.Conv2d):
                    yield m[1].bias

def resize_labels(labels, size):
    """Downsample labels for 0.5x and 0.75x logits by nearest interpolation."""
    new_labels = []
    for label in labels:
        label = label.float().numpy()
        label = pil_nearest_resize(label, size)
        new_labels.append(np.asarray(label))
    new_labels = torch.LongTensor(np.array(new_labels))
    return new_labels

@click.group()
@click.pass_context
def main(ctx):
    """Training and evaluation"""
    print("Mode:", ctx.invoked_subcommand)

@main.command()
@click.option("-c", "--config-path", type=click.File(), required=True, help="Dataset configuration file in YAML")
@click.option("--cuda/--cpu", default=True, help="Enable CUDA if available [default: --cuda]")
def train(config_path, cuda):
    """Training DeepLab by v2 protocol"""

    # Configuration
    CONFIG = OmegaConf.load(config_path)
    device = get_device(cuda)
    torch.backends.cudnn.benchmark = True

    # Dataset
    dataset = get_dataset(CONFIG.DATASET.NAME)(
        root=CONFIG.DATASET.ROOT, split=CONFIG.DATASET.SPLIT.TRAIN, ignore_label=CONFIG.DATASET.IGNORE_LABEL,
        mean_bgr=(CONFIG.IMAGE.MEAN.B, CONFIG.IMAGE.MEAN.G, CONFIG.IMAGE.MEAN.R), augment=True,
        base_size=CONFIG.IMAGE.SIZE.BASE, crop_size=CONFIG.IMAGE.SIZE.TRAIN, scales=CONFIG.DATASET.SCALES,
        flip=True)

    # DataLoader
    loader = torch.utils.data.DataLoader(dataset=dataset, batch_size=CONFIG.SOLVER.BATCH_SIZE.TRAIN,
                                         num_workers=CONFIG.DATALOADER.NUM_WORKERS, shuffle=True)
    loader_iter = iter(loader)

    # Model check
    print("Model:", CONFIG.MODEL.NAME)
    assert CONFIG.MODEL.NAME == "DeepLabV2_ResNet101_MSC", 'Currently support only "DeepLabV2_ResNet101_MSC"'

    # Model setup
    model = DeepLabV2_ResNet101_MSC(n_classes=CONFIG.DATASET.N_CLASSES)
    state_dict = torch.load(CONFIG.MODEL.INIT_MODEL)
    print("    Init:", CONFIG.MODEL.INIT_MODEL)
    for m in model.base.state_dict().keys():
        if m not in state_dict.keys():
            print("    Skip init:", m)
    model.base.load_state_dict(state_dict, strict=False)  # to skip ASPP
    model = nn.DataParallel(model)
    model.to(device)

    # Loss definition
    criterion = nn.CrossEntropyLoss(ignore_index=CONFIG.DATASET.IGNORE_LABEL)
    criterion.to(device)

    # Optimizer
    optimizer = torch.optim.SGD(
        # cf lr_mult and decay_mult in train.prototxt
        params=[
            {"params": get_params(model.module, key="1x"), "lr": CONFIG.SOLVER.LR,
             "weight_decay": CONFIG.SOLVER.WEIGHT_DECAY},
            {"params": get_params(model.module, key="10x"), "lr": 10 * CONFIG.SOLVER.LR,
             "weight_decay": CONFIG.SOLVER.WEIGHT_DECAY},
            {"params": get_params(model.module, key="20x"), "lr": 20 * CONFIG.SOLVER.LR, "weight_decay": 0.0},
        ],
        momentum=CONFIG.SOLVER.MOMENTUM,
    )

    # Learning rate scheduler
    scheduler = PolynomialLR(optimizer=optimizer, step_size=CONFIG.SOLVER.LR_DECAY, iter_max=CONFIG.SOLVER.ITER_MAX,
                             power=CONFIG.SOLVER.POLY_POWER)

    # Setup loss logger
    writer = SummaryWriter(os.path.join(CONFIG.EXP.OUTPUT_DIR, "logs", CONFIG.EXP.ID))
    average_loss = MovingAverageValueMeter(CONFIG.SOLVER.AVERAGE_LOSS)

    # Path to save models
    checkpoint_dir = os.path.join(CONFIG.EXP.OUTPUT_DIR, "models", CONFIG.EXP.ID, CONFIG.MODEL.NAME.lower(),
                                  CONFIG.DATASET.SPLIT.TRAIN)
    makedirs(checkpoint_dir)
    print("Checkpoint dst:", checkpoint_dir)

    # Freeze the batch norm pre-trained on COCO
    model.train()
    model.module.base.freeze_bn()

    for iteration in range(1, CONFIG.SOLVER.ITER_MAX + 1):

        # Clear gradients (ready to accumulate)
        optimizer.zero_grad()

        loss = 0
        for _ in range(CONFIG.SOLVER.ITER_SIZE):
            try:
                _, images, labels = next(loader_iter)
            except:
                loader_iter = iter(loader)
                _, images, labels = next(loader_iter)

            # Propagate forward
            logits = model(images.to(device))

            # Loss
            iter_loss = 0
            for logit in logits:
                # Resize labels for {100%, 75%, 50%, Max} logits
                _, _, H, W = logit.shape
                labels_ = resize_labels(labels, size=(H, W))
                iter_loss += criterion(logit, labels_.to(device))

            # Propagate backward (just compute gradients)
            iter_loss /= CONFIG.SOLVER.ITER_SIZE
            iter_loss.backward()

            loss += float(iter_loss)

        average_loss.add(loss)

        # Update weights with accumulated gradients
        optimizer.step()

        # Update learning rate
        scheduler.step(epoch=iteration)

        # TensorBoard
        if iteration % CONFIG.SOLVER.ITER_TB == 0:
            writer.add_scalar("loss/train", average_loss.value()[0], iteration)
            for i, o in enumerate(optimizer.param_groups):
                writer.add_scalar("lr/group_{}".format(i), o["lr"], iteration)
            for i in range(torch.cuda.device_count()):
                writer.add_scalar("gpu/device_{}/memory_cached".format(i),
                                  torch.cuda.memory_cached(i) / 1024 ** 3, iteration)
            print("iteration {}: loss {:.4f}, lr {:.2e}".format(iteration, average_loss.value()[0],
                                                                 optimizer.param_groups[0]["lr"]))

        # Save a model
        if iteration % CONFIG.SOLVER.ITER_SAVE == 0:
            torch.save(model.module.state_dict(),
                       os.path.join(checkpoint_dir, "checkpoint_{}.pth".format(iteration)))

    torch.save(model.module.state_dict(), os.path.join(checkpoint_dir, "checkpoint_final.pth"))

@main.command()
@click.option("-c", "--config-path", type=click.File(), required=True, help="Dataset configuration file in YAML")
@click.option("-m", "--model-path", type=click.Path(exists=True), required=True, help="PyTorch model to be loaded")
@click.option("--cuda/--cpu", default=True, help="Enable CUDA if available [default: --cuda]")
def test(config_path, model_path, cuda):
    """Evaluation on validation set"""

    # Configuration
    CONFIG = OmegaConf.load(config_path)
    device = get_device(cuda)
    torch.set_grad_enabled(False)

    # Dataset
    dataset = get_dataset(CONFIG.DATASET.NAME)(
        root=CONFIG.DATASET.ROOT, split=CONFIG.DATASET.SPLIT.VAL, ignore_label=CONFIG.DATASET.IGNORE_LABEL,
        mean_bgr=(CONFIG.IMAGE.MEAN.B, CONFIG.IMAGE.MEAN.G, CONFIG.IMAGE.MEAN.R), augment=False)

    # DataLoader
    loader = torch.utils.data.DataLoader(dataset=dataset, batch_size=CONFIG.SOLVER.BATCH_SIZE.TEST,
                                         num_workers=CONFIG.DATALOADER.NUM_WORKERS, shuffle=False)

    # Model
    model = eval(CONFIG.MODEL.NAME)(n_classes=CONFIG.DATASET.N_CLASSES)
    state_dict = torch.load(model_path, map_location=lambda storage, loc: storage)
    model.load_state_dict(state_dict)
    model = nn.DataParallel(model)
    model.eval()
    model.to(device)

    # Path to save logits
    logit_dir = os.path.join(CONFIG.EXP.OUTPUT_DIR, "features", CONFIG.EXP.ID, CONFIG.MODEL.NAME.lower(),
                             CONFIG.DATASET.SPLIT.VAL, "logit")
    makedirs(logit_dir)
    print("Logit dst:", logit_dir)

    # Path to save scores
    save_dir = os.path.join(CONFIG.EXP.OUTPUT_DIR, "scores", CONFIG.EXP.ID, CONFIG.MODEL.NAME.lower(),
                            CONFIG.DATASET.SPLIT.VAL)
    makedirs(save_dir)
    save_path = os.path.join(save_dir, "scores.json")
    print("Score dst:", save_path)

    preds, gts = [], []
    for image_ids, images, gt_labels in loader:
        # Image
        images = images.to(device)

        # Forward propagation
        logits = model(images)

        # Save on disk for CRF post-processing
        for image_id, logit in zip(image_ids, logits):
            filename = os.path.join(logit_dir, image_id + ".npy")
            np.save(filename, logit.cpu().numpy())

        # Pixel-wise labeling
        _, H, W = gt_labels.shape
        logits = F.interpolate(logits, size=(H, W), mode="bilinear", align_corners=False)
        probs = F.softmax(logits, dim=1)
        labels = torch.argmax(probs, dim=1)

        preds += list(labels.cpu().numpy())
        gts += list(gt_labels.numpy())

    # Pixel Accuracy, Mean Accuracy, Class IoU, Mean IoU, Freq Weighted IoU
    score = scores(gts, preds, n_class=CONFIG.DATASET.N_CLASSES)

    with open(save_path, "w") as f:
        json.dump(score, f, indent=4, sort_keys=True)
    print("Pixel Accuracy {:.3f}, Mean IoU {:.3f}".format(score["Pixel Accuracy"], score["Mean IoU"]))

# ----------------------------------------------------------------------------- synthetic data and config

CONFIG_YAML = """
EXP: {ID: cocostuff10k, OUTPUT_DIR: data}
DATASET: {NAME: cocostuff10k, ROOT: data/cocostuff-10k-v1.1, N_CLASSES: 6, IGNORE_LABEL: 255,
          SCALES: [0.5, 0.75, 1.0, 1.25, 1.5], SPLIT: {TRAIN: train, VAL: test, TEST: null}}
DATALOADER: {NUM_WORKERS: 0}
IMAGE: {MEAN: {R: 122.675, G: 116.669, B: 104.008}, SIZE: {BASE: null, TRAIN: 33, TEST: 41}}
MODEL: {NAME: DeepLabV2_ResNet101_MSC,
        INIT_MODEL: data/models/coco/deeplabv1_resnet101/caffemodel/deeplabv1_resnet101-coco.pth}
SOLVER: {BATCH_SIZE: {TRAIN: 2, TEST: 2}, ITER_MAX: 6, ITER_SIZE: 2, ITER_SAVE: 3, ITER_TB: 3, LR_DECAY: 2,
         LR: 2.5e-4, MOMENTUM: 0.9, POLY_POWER: 0.9, WEIGHT_DECAY: 5.0e-4, AVERAGE_LOSS: 4}
"""

COLOURS = np.array([[40, 40, 40], [200, 60, 60], [60, 200, 60], [60, 60, 200], [200, 200, 60], [60, 200, 200]])

def write_synthetic_cocostuff(root, n_train=12, n_test=4, seed=0):
    rng = np.random.RandomState(seed)
    for sub in ("imageLists", "images", "annotations"):
        os.makedirs(osp.join(root, sub), exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        ids = ["{}_{:03d}".format(split, k) for k in range(n)]
        with open(osp.join(root, "imageLists", split + ".txt"), "w") as f:
            f.write("\n".join(ids) + "\n")
        for image_id in ids:
            label = np.ones((48, 48), dtype=np.uint8)  # stored labels are class + 1, 0 for unlabeled
            for _ in range(3):
                c = rng.randint(2, 7)
                y, x = rng.randint(0, 36, size=2)
                hh, ww = rng.randint(8, 20, size=2)
                label[y:y + hh, x:x + ww] = c
            label[:2] = 0
            image = COLOURS[np.maximum(label.astype(int) - 1, 0)] + rng.randn(48, 48, 3) * 20
            np.save(osp.join(root, "images", image_id + ".npy"), image.astype(np.float32))
            sio.savemat(osp.join(root, "annotations", image_id + ".mat"), {"S": label})

if __name__ == "__main__":
    workdir = tempfile.TemporaryDirectory()
    home = os.getcwd()
    os.chdir(workdir.name)
    random.seed(0)
    with open("cocostuff10k.yaml", "w") as f:
        f.write(CONFIG_YAML)
    CONFIG = OmegaConf.load(open("cocostuff10k.yaml"))
    write_synthetic_cocostuff(CONFIG.DATASET.ROOT)
    init_base = DeepLabV2(n_classes=CONFIG.DATASET.N_CLASSES, n_blocks=[1, 1, 1, 1], atrous_rates=[6, 12, 18, 24])
    makedirs(osp.dirname(CONFIG.MODEL.INIT_MODEL))
    torch.save({k: v for k, v in init_base.state_dict().items() if not k.startswith("aspp")},
               CONFIG.MODEL.INIT_MODEL)

    main.main(args=["train", "-c", "cocostuff10k.yaml", "--cuda"], standalone_mode=False)
    final = "data/models/cocostuff10k/deeplabv2_resnet101_msc/train/checkpoint_final.pth"
    main.main(args=["test", "-c", "cocostuff10k.yaml", "-m", final, "--cuda"], standalone_mode=False)
    torch.set_grad_enabled(True)
    print(sorted(os.listdir(osp.dirname(final))))
    os.chdir(home)
    workdir.cleanup()
    print("done")
