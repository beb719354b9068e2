"""Trains DeepLabV3+ (MobileNetV2 backbone at output stride 16, ASPP, low-level-feature decoder) on a PASCAL
VOC-style segmentation set with main.py, resumes from the latest checkpoint with ``--continue_training`` and
re-validates the best one with ``--test_only``. The device is ``torch.device('cuda' if torch.cuda.is_available() else
'cpu')`` after ``os.environ['CUDA_VISIBLE_DEVICES'] = opts.gpu_id``; the model is wrapped in ``nn.DataParallel`` and
moved with ``model.to(device)`` after a checkpoint (read with ``map_location=torch.device('cpu')``) is loaded into the
bare model; the SGD optimizer is built on the CPU parameters before that move and its state restored after it;
`validate` gets the device as an argument, moves images and labels with ``.to(device, dtype=...)`` and brings the
predictions back with ``.detach().max(dim=1)[1].cpu().numpy()`` for the numpy confusion matrix; the loss is read
with ``loss.detach().cpu().numpy()``; checkpoints hold ``model.module.state_dict()`` and the optimizer/scheduler states.

Modeled on: VainF/DeepLabV3Plus-Pytorch, main.py, network/modeling.py, network/_deeplab.py, network/utils.py,
network/backbone/mobilenetv2.py, utils/scheduler.py, utils/utils.py, utils/ext_transforms.py,
metrics/stream_metrics.py and datasets/voc.py at commit 4e1087de98bc49d55b9239ae92810ef7368660db
(https://github.com/VainF/DeepLabV3Plus-Pytorch).

Kept: main.py's `get_argparser`, `get_dataset` (voc branch), `validate` and `main` (seeding, the loaders,
`network.modeling.__dict__[opts.model]`, `set_bn_momentum`, SGD with a 0.1x backbone learning rate, PolyLR or StepLR
(StepLR runs here: a resumed PolyLR restores its saved max_iters), the nested `save_ckpt`, the restore block, the
`while True` loop with its interval loss, validation and best/latest checkpoints); MobileNetV2 with `fixed_padding`
and dilation, `IntermediateLayerGetter`, `DeepLabHeadV3Plus`, ASPP, `_segm_mobilenet`; `StreamSegMetrics`.
Changed to run here: the VOC folder is synthetic (rectangles of 4 classes on noise, a 255 void border) in a temporary
directory, stored as .npy instead of JPEG/PNG (no PIL or torchvision here), so the Ext transforms are numpy versions of
random crop with padding, flip, to-tensor and normalize (ExtRandomScale is left out); `network`, `network.modeling`,
`utils` and `et` are namespaces over the code below; `main` takes argument lists and returns its score; the checkpoint
is read with ``weights_only=False`` (its best score is a numpy float, which torch >= 2.6 refuses by default); visdom,
`--save_val_results`, predict.py, FocalLoss, separable convs, DeepLabHead, the download code, the other backbones and
ImageNet weights are left out; blank lines between methods dropped.
Shrunk: 64x64 crops, 12 train / 4 val images, batch 4, 8 iterations (validation every 4) and 4 more when resumed.
"""
import argparse
import os
import random
import tempfile
import types
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import _LRScheduler
from torch.utils import data

# ---------------------------------------------------------------- network/backbone/mobilenetv2.py
def _make_divisible(v, divisor, min_value=None):
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:  # Make sure that round down does not go down by more than 10%.
        new_v += divisor
    return new_v

class ConvBNReLU(nn.Sequential):
    def __init__(self, in_planes, out_planes, kernel_size=3, stride=1, dilation=1, groups=1):
        super(ConvBNReLU, self).__init__(
            nn.Conv2d(in_planes, out_planes, kernel_size, stride, 0, dilation=dilation, groups=groups, bias=False),
            nn.BatchNorm2d(out_planes), nn.ReLU6(inplace=True))

def fixed_padding(kernel_size, dilation):
    kernel_size_effective = kernel_size + (kernel_size - 1) * (dilation - 1)
    pad_total = kernel_size_effective - 1
    pad_beg, pad_end = pad_total // 2, pad_total - pad_total // 2
    return (pad_beg, pad_end, pad_beg, pad_end)

class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, dilation, expand_ratio):
        super(InvertedResidual, self).__init__()
        self.stride = stride
        assert stride in [1, 2]
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(inp, hidden_dim, kernel_size=1))  # pw
        layers.extend([ConvBNReLU(hidden_dim, hidden_dim, stride=stride, dilation=dilation, groups=hidden_dim),  # dw
                       nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False), nn.BatchNorm2d(oup)])  # pw-linear
        self.conv = nn.Sequential(*layers)
        self.input_padding = fixed_padding(3, dilation)
    def forward(self, x):
        x_pad = F.pad(x, self.input_padding)
        if self.use_res_connect:
            return x + self.conv(x_pad)
        return self.conv(x_pad)

class MobileNetV2(nn.Module):
    def __init__(self, num_classes=1000, output_stride=8, width_mult=1.0, inverted_residual_setting=None, round_nearest=8):
        super(MobileNetV2, self).__init__()
        block = InvertedResidual
        input_channel = 32
        last_channel = 1280
        self.output_stride = output_stride
        current_stride = 1
        if inverted_residual_setting is None:
            inverted_residual_setting = [  # t, c, n, s
                [1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features = [ConvBNReLU(3, input_channel, stride=2)]
        current_stride *= 2
        dilation = previous_dilation = 1
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            previous_dilation = dilation
            if current_stride == output_stride:
                stride = 1
                dilation *= s
            else:
                stride = s
                current_stride *= s
            output_channel = int(c * width_mult)
            for i in range(n):
                if i == 0:
                    features.append(block(input_channel, output_channel, stride, previous_dilation, expand_ratio=t))
                else:
                    features.append(block(input_channel, output_channel, 1, dilation, expand_ratio=t))
                input_channel = output_channel
        features.append(ConvBNReLU(input_channel, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))
        for m in self.modules():  # weight initialization
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out')
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

def mobilenet_v2(pretrained=False, progress=True, **kwargs):
    return MobileNetV2(**kwargs)  # (the author loads ImageNet weights when pretrained)

# ---------------------------------------------------------------- network/utils.py
class _SimpleSegmentationModel(nn.Module):
    def __init__(self, backbone, classifier):
        super(_SimpleSegmentationModel, self).__init__()
        self.backbone, self.classifier = backbone, classifier
    def forward(self, x):
        input_shape = x.shape[-2:]
        features = self.backbone(x)
        x = self.classifier(features)
        x = F.interpolate(x, size=input_shape, mode='bilinear', align_corners=False)
        return x

class IntermediateLayerGetter(nn.ModuleDict):
    """Module wrapper that returns intermediate layers from a model (the hrnet branch is left out)"""
    def __init__(self, model, return_layers):
        if not set(return_layers).issubset([name for name, _ in model.named_children()]):
            raise ValueError("return_layers are not present in model")
        orig_return_layers, return_layers = return_layers, {k: v for k, v in return_layers.items()}
        layers = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            if name in return_layers:
                del return_layers[name]
            if not return_layers:
                break
        super(IntermediateLayerGetter, self).__init__(layers)
        self.return_layers = orig_return_layers
    def forward(self, x):
        out = OrderedDict()
        for name, module in self.named_children():
            x = module(x)
            if name in self.return_layers:  # (the hrnet concatenation is left out)
                out[self.return_layers[name]] = x
        return out

# ---------------------------------------------------------------- network/_deeplab.py
class DeepLabV3(_SimpleSegmentationModel):
    pass

class DeepLabHeadV3Plus(nn.Module):
    def __init__(self, in_channels, low_level_channels, num_classes, aspp_dilate=[12, 24, 36]):
        super(DeepLabHeadV3Plus, self).__init__()
        self.project = nn.Sequential(nn.Conv2d(low_level_channels, 48, 1, bias=False), nn.BatchNorm2d(48), nn.ReLU(inplace=True))
        self.aspp = ASPP(in_channels, aspp_dilate)
        self.classifier = nn.Sequential(nn.Conv2d(304, 256, 3, padding=1, bias=False), nn.BatchNorm2d(256),
                                        nn.ReLU(inplace=True), nn.Conv2d(256, num_classes, 1))
        self._init_weight()
    def forward(self, feature):
        low_level_feature = self.project(feature['low_level'])
        output_feature = self.aspp(feature['out'])
        output_feature = F.interpolate(output_feature, size=low_level_feature.shape[2:], mode='bilinear', align_corners=False)
        return self.classifier(torch.cat([low_level_feature, output_feature], dim=1))
    def _init_weight(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

class ASPPConv(nn.Sequential):
    def __init__(self, in_channels, out_channels, dilation):
        modules = [nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False),
                   nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]
        super(ASPPConv, self).__init__(*modules)

class ASPPPooling(nn.Sequential):
    def __init__(self, in_channels, out_channels):
        super(ASPPPooling, self).__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                                          nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True))
    def forward(self, x):
        size = x.shape[-2:]
        x = super(ASPPPooling, self).forward(x)
        return F.interpolate(x, size=size, mode='bilinear', align_corners=False)

class ASPP(nn.Module):
    def __init__(self, in_channels, atrous_rates):
        super(ASPP, self).__init__()
        out_channels = 256
        modules = []
        modules.append(nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)))
        rate1, rate2, rate3 = tuple(atrous_rates)
        modules.extend([ASPPConv(in_channels, out_channels, rate1), ASPPConv(in_channels, out_channels, rate2),
                        ASPPConv(in_channels, out_channels, rate3), ASPPPooling(in_channels, out_channels)])
        self.convs = nn.ModuleList(modules)
        self.project = nn.Sequential(nn.Conv2d(5 * out_channels, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels),
                                     nn.ReLU(inplace=True), nn.Dropout(0.1),)
    def forward(self, x):
        res = []
        for conv in self.convs:
            res.append(conv(x))
        res = torch.cat(res, dim=1)
        return self.project(res)

# ---------------------------------------------------------------- network/modeling.py
def _segm_mobilenet(name, backbone_name, num_classes, output_stride, pretrained_backbone):
    if output_stride == 8:
        aspp_dilate = [12, 24, 36]
    else:
        aspp_dilate = [6, 12, 18]
    backbone = mobilenet_v2(pretrained=pretrained_backbone, output_stride=output_stride)
    backbone.low_level_features = backbone.features[0:4]
    backbone.high_level_features = backbone.features[4:-1]
    backbone.features = backbone.classifier = None
    inplanes, low_level_planes = 320, 24
    if name == 'deeplabv3plus':
        return_layers = {'high_level_features': 'out', 'low_level_features': 'low_level'}
        classifier = DeepLabHeadV3Plus(inplanes, low_level_planes, num_classes, aspp_dilate)
    backbone = IntermediateLayerGetter(backbone, return_layers=return_layers)
    model = DeepLabV3(backbone, classifier)
    return model

def _load_model(arch_type, backbone, num_classes, output_stride, pretrained_backbone):
    if backbone == 'mobilenetv2':  # the resnet, hrnetv2 and xception branches are left out
        model = _segm_mobilenet(arch_type, backbone, num_classes, output_stride=output_stride, pretrained_backbone=pretrained_backbone)
    return model

def deeplabv3plus_mobilenet(num_classes=21, output_stride=8, pretrained_backbone=True):
    return _load_model('deeplabv3plus', 'mobilenetv2', num_classes, output_stride=output_stride, pretrained_backbone=pretrained_backbone)

network = types.SimpleNamespace(modeling=types.SimpleNamespace(deeplabv3plus_mobilenet=deeplabv3plus_mobilenet))

# ---------------------------------------------------------------- utils/scheduler.py, utils/loss.py, utils/utils.py
class PolyLR(_LRScheduler):
    def __init__(self, optimizer, max_iters, power=0.9, last_epoch=-1, min_lr=1e-6):
        self.power, self.max_iters, self.min_lr = power, max_iters, min_lr  # avoid zero lr
        super(PolyLR, self).__init__(optimizer, last_epoch)
    def get_lr(self):
        return [max(base_lr * (1 - self.last_epoch / self.max_iters) ** self.power, self.min_lr) for base_lr in self.base_lrs]

def set_bn_momentum(model, momentum=0.1):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = momentum

def mkdir(path):
    if not os.path.exists(path):
        os.mkdir(path)

utils = types.SimpleNamespace(PolyLR=PolyLR, set_bn_momentum=set_bn_momentum, mkdir=mkdir)

# ---------------------------------------------------------------- metrics/stream_metrics.py
class StreamSegMetrics(object):
    """Stream Metrics for Semantic Segmentation Task"""
    def __init__(self, n_classes):
        self.n_classes = n_classes
        self.confusion_matrix = np.zeros((n_classes, n_classes))
    def update(self, label_trues, label_preds):
        for lt, lp in zip(label_trues, label_preds):
            self.confusion_matrix += self._fast_hist(lt.flatten(), lp.flatten())
    @staticmethod
    def to_str(results):
        string = "\n"
        for k, v in results.items():
            if k != "Class IoU":
                string += "%s: %f\n" % (k, v)
        return string
    def _fast_hist(self, label_true, label_pred):
        mask = (label_true >= 0) & (label_true < self.n_classes)
        hist = np.bincount(self.n_classes * label_true[mask].astype(int) + label_pred[mask],
                           minlength=self.n_classes ** 2).reshape(self.n_classes, self.n_classes)
        return hist
    def get_results(self):
        hist = self.confusion_matrix
        acc = np.diag(hist).sum() / hist.sum()
        acc_cls = np.diag(hist) / hist.sum(axis=1)
        acc_cls = np.nanmean(acc_cls)
        iu = np.diag(hist) / (hist.sum(axis=1) + hist.sum(axis=0) - np.diag(hist))
        mean_iu = np.nanmean(iu)
        freq = hist.sum(axis=1) / hist.sum()
        fwavacc = (freq[freq > 0] * iu[freq > 0]).sum()
        cls_iu = dict(zip(range(self.n_classes), iu))
        return {"Overall Acc": acc, "Mean Acc": acc_cls, "FreqW Acc": fwavacc, "Mean IoU": mean_iu, "Class IoU": cls_iu}
    def reset(self):
        self.confusion_matrix = np.zeros((self.n_classes, self.n_classes))

# ---------------------------------------------------------------- datasets/voc.py, utils/ext_transforms.py
class VOCSegmentation(data.Dataset):
    def __init__(self, root, year='2012', image_set='train', download=False, transform=None):
        self.root = os.path.expanduser(root)
        self.year, self.transform, self.image_set = year, transform, image_set
        voc_root = os.path.join(self.root, 'VOCdevkit/VOC2012')
        image_dir = os.path.join(voc_root, 'JPEGImages')
        mask_dir = os.path.join(voc_root, 'SegmentationClass')
        split_f = os.path.join(voc_root, 'ImageSets/Segmentation', image_set.rstrip('\n') + '.txt')
        with open(split_f, "r") as f:
            file_names = [x.strip() for x in f.readlines()]
        self.images = [os.path.join(image_dir, x + ".npy") for x in file_names]
        self.masks = [os.path.join(mask_dir, x + ".npy") for x in file_names]
        assert (len(self.images) == len(self.masks))
    def __getitem__(self, index):
        img = np.load(self.images[index])  # Image.open(...).convert('RGB')
        target = np.load(self.masks[index])
        if self.transform is not None:
            img, target = self.transform(img, target)
        return img, target
    def __len__(self):
        return len(self.images)

def make_synthetic_voc(root, n_train, n_val, size=64, seed=0):
    rng = np.random.RandomState(seed)
    voc_root = os.path.join(root, 'VOCdevkit/VOC2012')
    names = {'train': [], 'val': []}
    [os.makedirs(os.path.join(voc_root, sub)) for sub in ('JPEGImages', 'SegmentationClass', 'ImageSets/Segmentation')]
    for i in range(n_train + n_val):
        img = rng.randint(0, 60, (size, size, 3)).astype(np.uint8)
        mask = np.zeros((size, size), np.uint8)
        for cls in rng.choice(np.arange(1, 5), 2, replace=False):
            (y, x), (h, w) = rng.randint(0, size - 24, 2), rng.randint(12, 24, 2)
            mask[y:y + h, x:x + w] = cls
            img[y:y + h, x:x + w] = 40 * cls + rng.randint(0, 60, (h, w, 3))
        mask[:2, :] = 255  # VOC's void border
        name = '2012_%06d' % i
        np.save(os.path.join(voc_root, 'JPEGImages', name + '.npy'), img)
        np.save(os.path.join(voc_root, 'SegmentationClass', name + '.npy'), mask)
        names['train' if i < n_train else 'val'].append(name)
    for split, files in names.items():
        open(os.path.join(voc_root, 'ImageSets/Segmentation', split + '.txt'), 'w').write('\n'.join(files) + '\n')

class ExtCompose(object):
    def __init__(self, transforms):
        self.transforms = transforms
    def __call__(self, img, lbl):
        for t in self.transforms:
            img, lbl = t(img, lbl)
        return img, lbl

class ExtRandomHorizontalFlip(object):
    def __init__(self, p=0.5):
        self.p = p
    def __call__(self, img, lbl):
        if random.random() < self.p:
            return img[:, ::-1].copy(), lbl[:, ::-1].copy()
        return img, lbl

class ExtRandomCrop(object):
    def __init__(self, size, padding=0, pad_if_needed=False):
        self.size, self.padding, self.pad_if_needed = size, padding, pad_if_needed
    def __call__(self, img, lbl):
        th, tw = self.size
        if self.pad_if_needed and (img.shape[0] < th or img.shape[1] < tw):  # pad the image with 0, the label with 255
            pad = ((0, max(th - img.shape[0], 0)), (0, max(tw - img.shape[1], 0)))
            img, lbl = np.pad(img, pad + ((0, 0),)), np.pad(lbl, pad, constant_values=255)
        i, j = random.randint(0, img.shape[0] - th), random.randint(0, img.shape[1] - tw)
        return img[i:i + th, j:j + tw], lbl[i:i + th, j:j + tw]

class ExtToTensor(object):
    """HWC uint8 array -> CHW float tensor in [0, 1], label -> long tensor"""
    def __call__(self, pic, lbl):
        return torch.from_numpy(np.ascontiguousarray(pic.transpose(2, 0, 1))).float().div(255), torch.from_numpy(np.array(lbl, dtype=np.uint8))

class ExtNormalize(object):
    def __init__(self, mean, std):
        self.mean, self.std = mean, std
    def __call__(self, tensor, lbl):
        return (tensor - torch.tensor(self.mean).view(-1, 1, 1)) / torch.tensor(self.std).view(-1, 1, 1), lbl

et = types.SimpleNamespace(ExtCompose=ExtCompose, ExtRandomCrop=ExtRandomCrop, ExtRandomHorizontalFlip=ExtRandomHorizontalFlip, ExtToTensor=ExtToTensor, ExtNormalize=ExtNormalize)

# ---------------------------------------------------------------- main.py
def get_argparser():
    parser = argparse.ArgumentParser()
    available_models = sorted(name for name in network.modeling.__dict__ if name.islower() and
                              not (name.startswith("__") or name.startswith('_')) and callable(network.modeling.__dict__[name]))
    for flag, kwargs in [  # the author's Dataset, Deeplab and Train options (help strings dropped)
            ("--data_root", dict(type=str, default='./datasets/data')), ("--dataset", dict(type=str, default='voc', choices=['voc', 'cityscapes'])),
            ("--num_classes", dict(type=int, default=None)), ("--model", dict(type=str, default='deeplabv3plus_mobilenet', choices=available_models)),
            ("--output_stride", dict(type=int, default=16, choices=[8, 16])),
            ("--test_only", dict(action='store_true', default=False)), ("--total_itrs", dict(type=int, default=30e3)),
            ("--lr", dict(type=float, default=0.01)), ("--lr_policy", dict(type=str, default='poly', choices=['poly', 'step'])),
            ("--step_size", dict(type=int, default=10000)), ("--batch_size", dict(type=int, default=16)),
            ("--val_batch_size", dict(type=int, default=4)), ("--crop_size", dict(type=int, default=513)),
            ("--ckpt", dict(default=None, type=str)), ("--continue_training", dict(action='store_true', default=False)),
            ("--loss_type", dict(type=str, default='cross_entropy', choices=['cross_entropy'])), ("--gpu_id", dict(type=str, default='0')),
            ("--weight_decay", dict(type=float, default=1e-4)), ("--random_seed", dict(type=int, default=1)),
            ("--print_interval", dict(type=int, default=10)), ("--val_interval", dict(type=int, default=100)),
            ("--year", dict(type=str, default='2012'))]:
        parser.add_argument(flag, **kwargs)
    return parser

def get_dataset(opts):
    """ Dataset And Augmentation """
    train_transform = et.ExtCompose([
        et.ExtRandomCrop(size=(opts.crop_size, opts.crop_size), pad_if_needed=True), et.ExtRandomHorizontalFlip(),
        et.ExtToTensor(), et.ExtNormalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    val_transform = et.ExtCompose([et.ExtToTensor(), et.ExtNormalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    train_dst = VOCSegmentation(root=opts.data_root, year=opts.year, image_set='train', download=False, transform=train_transform)
    val_dst = VOCSegmentation(root=opts.data_root, year=opts.year, image_set='val', download=False, transform=val_transform)
    return train_dst, val_dst

def validate(opts, model, loader, device, metrics, ret_samples_ids=None):
    """Do validation and return specified samples"""
    metrics.reset()
    ret_samples = []
    with torch.no_grad():
        for i, (images, labels) in enumerate(loader):
            images = images.to(device, dtype=torch.float32)
            labels = labels.to(device, dtype=torch.long)
            outputs = model(images)
            preds = outputs.detach().max(dim=1)[1].cpu().numpy()
            targets = labels.cpu().numpy()
            metrics.update(targets, preds)
            if ret_samples_ids is not None and i in ret_samples_ids:  # get vis samples
                ret_samples.append((images[0].detach().cpu().numpy(), targets[0], preds[0]))
        score = metrics.get_results()
    return score, ret_samples

def main(argv):
    opts = get_argparser().parse_args(argv)
    if opts.dataset.lower() == 'voc':
        opts.num_classes = 21
    os.environ['CUDA_VISIBLE_DEVICES'] = opts.gpu_id
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    print("Device: %s" % device)
    torch.manual_seed(opts.random_seed)
    np.random.seed(opts.random_seed)
    random.seed(opts.random_seed)
    if opts.dataset == 'voc':
        opts.val_batch_size = 1
    train_dst, val_dst = get_dataset(opts)
    train_loader = data.DataLoader(train_dst, batch_size=opts.batch_size, shuffle=True, num_workers=0, drop_last=True)
    val_loader = data.DataLoader(val_dst, batch_size=opts.val_batch_size, shuffle=True, num_workers=0)
    print("Dataset: %s, Train set: %d, Val set: %d" % (opts.dataset, len(train_dst), len(val_dst)))
    # Set up model (all models are 'constructed at network.modeling)
    model = network.modeling.__dict__[opts.model](num_classes=opts.num_classes, output_stride=opts.output_stride)
    utils.set_bn_momentum(model.backbone, momentum=0.01)
    metrics = StreamSegMetrics(opts.num_classes)
    optimizer = torch.optim.SGD(params=[
        {'params': model.backbone.parameters(), 'lr': 0.1 * opts.lr},
        {'params': model.classifier.parameters(), 'lr': opts.lr},
    ], lr=opts.lr, momentum=0.9, weight_decay=opts.weight_decay)
    if opts.lr_policy == 'poly':
        scheduler = utils.PolyLR(optimizer, opts.total_itrs, power=0.9)
    elif opts.lr_policy == 'step':
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=opts.step_size, gamma=0.1)
    if opts.loss_type == 'cross_entropy':  # utils.FocalLoss is left out
        criterion = nn.CrossEntropyLoss(ignore_index=255, reduction='mean')

    def save_ckpt(path):
        """ save current model """
        torch.save({"cur_itrs": cur_itrs, "model_state": model.module.state_dict(), "optimizer_state": optimizer.state_dict(),
                    "scheduler_state": scheduler.state_dict(), "best_score": best_score}, path)
        print("Model saved as %s" % path)

    utils.mkdir('checkpoints')
    best_score = 0.0
    cur_itrs = 0
    cur_epochs = 0
    if opts.ckpt is not None and os.path.isfile(opts.ckpt):
        checkpoint = torch.load(opts.ckpt, map_location=torch.device('cpu'), weights_only=False)
        model.load_state_dict(checkpoint["model_state"])
        model = nn.DataParallel(model)
        model.to(device)
        if opts.continue_training:
            optimizer.load_state_dict(checkpoint["optimizer_state"])
            scheduler.load_state_dict(checkpoint["scheduler_state"])
            cur_itrs = checkpoint["cur_itrs"]
            best_score = checkpoint['best_score']
            print("Training state restored from %s" % opts.ckpt)
        print("Model restored from %s" % opts.ckpt)
        del checkpoint  # free memory
    else:
        print("[!] Retrain")
        model = nn.DataParallel(model)
        model.to(device)

    # ==========   Train Loop   ==========#
    vis_sample_id = None  # visdom (--enable_vis) is left out
    if opts.test_only:
        model.eval()
        val_score, ret_samples = validate(opts=opts, model=model, loader=val_loader, device=device, metrics=metrics, ret_samples_ids=vis_sample_id)
        print(metrics.to_str(val_score))
        return val_score
    interval_loss = 0
    while True:  # cur_itrs < opts.total_itrs:
        model.train()
        cur_epochs += 1
        for (images, labels) in train_loader:
            cur_itrs += 1
            images = images.to(device, dtype=torch.float32)
            labels = labels.to(device, dtype=torch.long)
            optimizer.zero_grad()
            outputs = model(images)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            np_loss = loss.detach().cpu().numpy()
            interval_loss += np_loss
            if (cur_itrs) % opts.print_interval == 0:
                interval_loss = interval_loss / opts.print_interval
                print("Epoch %d, Itrs %d/%d, Loss=%f" % (cur_epochs, cur_itrs, opts.total_itrs, interval_loss))
                interval_loss = 0.0
            if (cur_itrs) % opts.val_interval == 0:
                save_ckpt('checkpoints/latest_%s_%s_os%d.pth' % (opts.model, opts.dataset, opts.output_stride))
                print("validation...")
                model.eval()
                val_score, ret_samples = validate(opts=opts, model=model, loader=val_loader, device=device, metrics=metrics, ret_samples_ids=vis_sample_id)
                print(metrics.to_str(val_score))
                if val_score['Mean IoU'] > best_score:  # save best model
                    best_score = val_score['Mean IoU']
                    save_ckpt('checkpoints/best_%s_%s_os%d.pth' % (opts.model, opts.dataset, opts.output_stride))
                model.train()
            scheduler.step()
            if cur_itrs >= opts.total_itrs:
                return best_score

if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as root:
        make_synthetic_voc(root, n_train=12, n_val=4)
        os.chdir(root)
        common = ['--data_root', root, '--crop_size', '64', '--batch_size', '4', '--lr', '0.05', '--print_interval', '2',
                  '--lr_policy', 'step', '--step_size', '6']  # PolyLR's max_iters is restored with its state: no resume past it
        best = main(common + ['--total_itrs', '8', '--val_interval', '4'])
        main(common + ['--total_itrs', '12', '--val_interval', '4', '--continue_training',
                       '--ckpt', 'checkpoints/latest_deeplabv3plus_mobilenet_voc_os16.pth'])
        score = main(common + ['--test_only', '--ckpt', 'checkpoints/best_deeplabv3plus_mobilenet_voc_os16.pth'])
        os.chdir('/')
    print('done: best mIoU %.4f, reloaded mIoU %.4f' % (best, score['Mean IoU']))
