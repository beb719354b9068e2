"""Trains DeepLab-v3+ (MobileNetV2 backbone with atrous strides, ASPP, low-level-feature decoder) for semantic
segmentation on synthetic Pascal-like scenes with class-balanced weights and ignored borders, validates with a
confusion-matrix Evaluator each epoch, keeps the best checkpoint, then resumes from it for one more epoch, as
jfzhang95/pytorch-deeplab-xception's train.py and utils/ do: ``args.cuda = not args.no_cuda and
torch.cuda.is_available()`` gates every move, the SGD optimizer (1x backbone / 10x head parameter groups) is built
on the CPU model before it is wrapped in ``torch.nn.DataParallel(model, device_ids=args.gpu_ids)`` and moved with
``.cuda()``; a resumed checkpoint is read with ``torch.load(args.resume)`` (no map_location) into ``model.module``
(or the bare model without CUDA) and the optimizer; batches are dicts whose image and label are moved with
``image.cuda(), target.cuda()``; the class weights are computed from ``y.detach().cpu().numpy()`` counts, turned
into a CPU tensor, and `SegmentationLosses` builds a fresh ``nn.CrossEntropyLoss(weight=...)`` on every call and
moves it with ``criterion.cuda()``; validation runs the forward under ``torch.no_grad()`` after ``model.eval()``,
reads predictions with ``output.data.cpu().numpy()`` and targets with ``target.cpu().numpy()``, and the summary
decodes ``torch.max(output[:3], 1)[1].detach().cpu().numpy()`` into colour maps.

Modeled on: jfzhang95/pytorch-deeplab-xception, train.py, modeling/deeplab.py, modeling/aspp.py,
modeling/decoder.py, modeling/backbone/mobilenet.py, utils/loss.py, utils/metrics.py, utils/lr_scheduler.py,
utils/saver.py, utils/summaries.py, utils/calculate_weights.py and dataloaders/utils.py at commit
9135e104a7a51ea9effa9c6676a2fcffe6a6a2e6
(https://github.com/jfzhang95/pytorch-deeplab-xception/blob/9135e104a7a51ea9effa9c6676a2fcffe6a6a2e6/train.py,
https://github.com/jfzhang95/pytorch-deeplab-xception/blob/9135e104a7a51ea9effa9c6676a2fcffe6a6a2e6/utils/loss.py).

Kept: `Trainer` (`__init__` order: saver, summary, loaders, model, param groups, optimizer, balanced weights,
criterion, evaluator, scheduler, DataParallel + ``.cuda()``, resume; `training`; `validation` with best-mIoU
checkpointing), `main`'s argument defaults (``args.cuda``, ``gpu_ids``, sync-bn, epochs/batch/lr rules), `DeepLab`
(``get_1x_lr_params``/``get_10x_lr_params``, `freeze_bn`), `ASPP`/`_ASPPModule`, `Decoder`, `MobileNetV2` with
`InvertedResidual` and `fixed_padding`, `SegmentationLosses` (ce), `Evaluator`, `LR_Scheduler` (poly),
`Saver`, `calculate_weigths_labels`, `decode_seg_map_sequence`.

Changed to run here: VOC/SBD are synthetic coloured shapes on texture (255 on the borders, like VOC's void);
tensorboardX is a stub writer keeping the decoded maps; no tqdm, ImageNet weights, SynchronizedBatchNorm or
``patch_replication_callback`` (one GPU); checkpoints save ``self.model.module.state_dict()`` only when CUDA wrapped
the model in DataParallel (the source always calls ``.module``, which fails on the CPU); ``weights_only=False`` (the
checkpoint holds a numpy ``best_pred``) and ``reduction='mean'`` restore the old defaults of ``torch.load`` and
``size_average=True``; the class-weights file goes to the run folder.
Shrunk: 513 crops -> 64, MobileNetV2 width 1.0 -> 0.25, ASPP/decoder 256/48 -> 32/12 channels, 21 -> 6 classes,
48 train / 16 val images, batch 8, 2 epochs + 1 resumed.
"""
import argparse
import glob
import os
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 6


def decode_segmap(label_mask, dataset):
    label_colours = np.asarray([[0, 0, 0], [128, 0, 0], [0, 128, 0], [128, 128, 0], [0, 0, 128], [128, 0, 128]])
    rgb = np.zeros(label_mask.shape + (3,))
    for ll in range(0, NUM_CLASSES):
        rgb[label_mask == ll] = label_colours[ll]
    return rgb / 255.0


def decode_seg_map_sequence(label_masks, dataset='pascal'):
    return torch.from_numpy(np.array([decode_segmap(m, dataset) for m in label_masks]).transpose([0, 3, 1, 2]))


class SyntheticVOCSegmentation(Dataset):
    """Up to three shapes (disc, box, triangle) of classes 1..5 on a textured background; borders are 255."""
    NUM_CLASSES = NUM_CLASSES

    def __init__(self, n, crop_size, seed):
        rng = np.random.RandomState(seed)
        yy, xx = np.mgrid[0:crop_size, 0:crop_size] / crop_size
        palette = rng.uniform(0.2, 1.0, (NUM_CLASSES, 3))
        self.samples = []
        for _ in range(n):
            label = np.zeros((crop_size, crop_size), dtype=np.int64)
            for _ in range(rng.randint(1, 4)):
                cls, (cx, cy), r = rng.randint(1, NUM_CLASSES), rng.uniform(0.2, 0.8, 2), rng.uniform(0.1, 0.25)
                inside = [(xx - cx) ** 2 + (yy - cy) ** 2 < r ** 2, (abs(xx - cx) < r) & (abs(yy - cy) < r * 0.6),
                          (yy > cy - r) & (yy < cy + r) & (abs(xx - cx) < (yy - cy + r) / 2)][cls % 3]
                label[inside] = cls
            image = 0.15 * rng.rand(3, crop_size, crop_size) + 0.1 * np.sin(20 * xx)[None]
            image += palette[label].transpose(2, 0, 1) * (label > 0)[None]
            border = np.zeros_like(label, dtype=bool)
            border[1:, :] |= label[1:, :] != label[:-1, :]
            border[:, 1:] |= label[:, 1:] != label[:, :-1]
            label[border] = 255
            self.samples.append((((image - 0.45) / 0.225).astype(np.float32), label.astype(np.float32)))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        return {'image': torch.from_numpy(self.samples[index][0]), 'label': torch.from_numpy(self.samples[index][1])}


def make_data_loader(args, **kwargs):
    train_set = SyntheticVOCSegmentation(48, args.crop_size, seed=1)
    val_set = SyntheticVOCSegmentation(16, args.crop_size, seed=2)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, **kwargs)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, shuffle=False, **kwargs)
    return train_loader, val_loader, None, train_set.NUM_CLASSES


def conv_bn(inp, oup, stride, BatchNorm):
    return nn.Sequential(nn.Conv2d(inp, oup, 3, stride, 1, bias=False), BatchNorm(oup), nn.ReLU6(inplace=True))


def fixed_padding(inputs, kernel_size, dilation):
    pad_total = kernel_size + (kernel_size - 1) * (dilation - 1) - 1  # kernel_size_effective - 1
    pad_beg = pad_total // 2
    pad_end = pad_total - pad_beg
    return F.pad(inputs, (pad_beg, pad_end, pad_beg, pad_end))


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, dilation, expand_ratio, BatchNorm):
        super(InvertedResidual, self).__init__()
        self.stride = stride
        hidden_dim = round(inp * expand_ratio)
        self.use_res_connect = self.stride == 1 and inp == oup
        self.kernel_size, self.dilation = 3, dilation
        layers = [] if expand_ratio == 1 else [nn.Conv2d(inp, hidden_dim, 1, 1, 0, 1, bias=False),
                                               BatchNorm(hidden_dim), nn.ReLU6(inplace=True)]  # pw
        layers += [nn.Conv2d(hidden_dim, hidden_dim, 3, stride, 0, dilation, groups=hidden_dim, bias=False),  # dw
                   BatchNorm(hidden_dim), nn.ReLU6(inplace=True),
                   nn.Conv2d(hidden_dim, oup, 1, 1, 0, 1, 1, bias=False), BatchNorm(oup)]  # pw-linear
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        x_pad = fixed_padding(x, self.kernel_size, dilation=self.dilation)
        if self.use_res_connect:
            return x + self.conv(x_pad)
        return self.conv(x_pad)


class MobileNetV2(nn.Module):
    def __init__(self, output_stride=8, BatchNorm=None, width_mult=1.):
        super(MobileNetV2, self).__init__()
        input_channel, current_stride, rate = int(32 * width_mult), 1, 1
        interverted_residual_setting = [  # t, c, n, s
            [1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
        self.features = [conv_bn(3, input_channel, 2, BatchNorm)]
        current_stride *= 2
        for t, c, n, s in interverted_residual_setting:
            if current_stride == output_stride:
                stride, dilation = 1, rate
                rate *= s
            else:
                stride, dilation = s, 1
                current_stride *= s
            output_channel = int(c * width_mult)
            for i in range(n):
                self.features.append(InvertedResidual(input_channel, output_channel, stride if i == 0 else 1,
                                                      dilation, t, BatchNorm))
                input_channel = output_channel
        self.features = nn.Sequential(*self.features)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight)
        self.low_level_features = self.features[0:4]
        self.high_level_features = self.features[4:]

    def forward(self, x):
        low_level_feat = self.low_level_features(x)
        return self.high_level_features(low_level_feat), low_level_feat


class _ASPPModule(nn.Module):
    def __init__(self, inplanes, planes, kernel_size, padding, dilation, BatchNorm):
        super(_ASPPModule, self).__init__()
        self.atrous_conv = nn.Conv2d(inplanes, planes, kernel_size=kernel_size, stride=1, padding=padding,
                                     dilation=dilation, bias=False)
        self.bn, self.relu = BatchNorm(planes), nn.ReLU()
        torch.nn.init.kaiming_normal_(self.atrous_conv.weight)

    def forward(self, x):
        return self.relu(self.bn(self.atrous_conv(x)))


class ASPP(nn.Module):
    def __init__(self, backbone, output_stride, BatchNorm, inplanes=80, planes=32):
        super(ASPP, self).__init__()
        dilations = [1, 6, 12, 18] if output_stride == 16 else [1, 12, 24, 36]
        self.aspp1 = _ASPPModule(inplanes, planes, 1, padding=0, dilation=dilations[0], BatchNorm=BatchNorm)
        self.aspp2 = _ASPPModule(inplanes, planes, 3, padding=dilations[1], dilation=dilations[1], BatchNorm=BatchNorm)
        self.aspp3 = _ASPPModule(inplanes, planes, 3, padding=dilations[2], dilation=dilations[2], BatchNorm=BatchNorm)
        self.aspp4 = _ASPPModule(inplanes, planes, 3, padding=dilations[3], dilation=dilations[3], BatchNorm=BatchNorm)
        self.global_avg_pool = nn.Sequential(nn.AdaptiveAvgPool2d((1, 1)),
                                             nn.Conv2d(inplanes, planes, 1, stride=1, bias=False),
                                             BatchNorm(planes), nn.ReLU())
        self.conv1, self.bn1 = nn.Conv2d(planes * 5, planes, 1, bias=False), BatchNorm(planes)
        self.relu, self.dropout = nn.ReLU(), nn.Dropout(0.5)

    def forward(self, x):
        x1, x2, x3, x4 = self.aspp1(x), self.aspp2(x), self.aspp3(x), self.aspp4(x)
        x5 = self.global_avg_pool(x)
        x5 = F.interpolate(x5, size=x4.size()[2:], mode='bilinear', align_corners=True)
        x = self.relu(self.bn1(self.conv1(torch.cat((x1, x2, x3, x4, x5), dim=1))))
        return self.dropout(x)


class Decoder(nn.Module):
    def __init__(self, num_classes, backbone, BatchNorm, low_level_inplanes=6, planes=32):
        super(Decoder, self).__init__()
        self.conv1, self.bn1, self.relu = nn.Conv2d(low_level_inplanes, 12, 1, bias=False), BatchNorm(12), nn.ReLU()
        self.last_conv = nn.Sequential(nn.Conv2d(planes + 12, planes, kernel_size=3, stride=1, padding=1, bias=False),
                                       BatchNorm(planes), nn.ReLU(), nn.Dropout(0.5),
                                       nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False),
                                       BatchNorm(planes), nn.ReLU(), nn.Dropout(0.1),
                                       nn.Conv2d(planes, num_classes, kernel_size=1, stride=1))

    def forward(self, x, low_level_feat):
        low_level_feat = self.relu(self.bn1(self.conv1(low_level_feat)))
        x = F.interpolate(x, size=low_level_feat.size()[2:], mode='bilinear', align_corners=True)
        x = torch.cat((x, low_level_feat), dim=1)
        return self.last_conv(x)


class DeepLab(nn.Module):
    def __init__(self, backbone='mobilenet', output_stride=16, num_classes=21, sync_bn=True, freeze_bn=False):
        super(DeepLab, self).__init__()
        BatchNorm = nn.BatchNorm2d  # SynchronizedBatchNorm2d when sync_bn
        self.backbone = MobileNetV2(output_stride, BatchNorm, width_mult=0.25)
        self.aspp = ASPP(backbone, output_stride, BatchNorm)
        self.decoder = Decoder(num_classes, backbone, BatchNorm)
        self.freeze_bn = freeze_bn

    def forward(self, input):
        x, low_level_feat = self.backbone(input)
        x = self.aspp(x)
        x = self.decoder(x, low_level_feat)
        return F.interpolate(x, size=input.size()[2:], mode='bilinear', align_corners=True)

    def _lr_params(self, modules):
        for module in modules:
            for m in module.named_modules():
                kinds = (nn.Conv2d,) if self.freeze_bn else (nn.Conv2d, nn.BatchNorm2d)
                if isinstance(m[1], kinds):
                    for p in m[1].parameters():
                        if p.requires_grad:
                            yield p

    def get_1x_lr_params(self):
        return self._lr_params([self.backbone])

    def get_10x_lr_params(self):
        return self._lr_params([self.aspp, self.decoder])


class SegmentationLosses(object):
    def __init__(self, weight=None, size_average=True, batch_average=True, ignore_index=255, cuda=False):
        self.ignore_index, self.weight, self.size_average = ignore_index, weight, size_average
        self.batch_average, self.cuda = batch_average, cuda

    def build_loss(self, mode='ce'):
        return {'ce': self.CrossEntropyLoss}[mode]  # 'focal' is left out

    def CrossEntropyLoss(self, logit, target):
        n, c, h, w = logit.size()
        criterion = nn.CrossEntropyLoss(weight=self.weight, ignore_index=self.ignore_index,
                                        reduction='mean' if self.size_average else 'sum')
        if self.cuda:
            criterion = criterion.cuda()
        loss = criterion(logit, target.long())
        if self.batch_average:
            loss /= n
        return loss


class Evaluator(object):
    def __init__(self, num_class):
        self.num_class = num_class
        self.confusion_matrix = np.zeros((self.num_class,) * 2)

    def Pixel_Accuracy(self):
        return np.diag(self.confusion_matrix).sum() / self.confusion_matrix.sum()

    def Pixel_Accuracy_Class(self):
        return np.nanmean(np.diag(self.confusion_matrix) / self.confusion_matrix.sum(axis=1))

    def _iu(self):
        return np.diag(self.confusion_matrix) / (np.sum(self.confusion_matrix, axis=1) +
                                                 np.sum(self.confusion_matrix, axis=0) -
                                                 np.diag(self.confusion_matrix))

    def Mean_Intersection_over_Union(self):
        return np.nanmean(self._iu())

    def Frequency_Weighted_Intersection_over_Union(self):
        freq = np.sum(self.confusion_matrix, axis=1) / np.sum(self.confusion_matrix)
        iu = self._iu()
        return (freq[freq > 0] * iu[freq > 0]).sum()

    def _generate_matrix(self, gt_image, pre_image):
        mask = (gt_image >= 0) & (gt_image < self.num_class)
        label = self.num_class * gt_image[mask].astype('int') + pre_image[mask]
        return np.bincount(label, minlength=self.num_class ** 2).reshape(self.num_class, self.num_class)

    def add_batch(self, gt_image, pre_image):
        assert gt_image.shape == pre_image.shape
        self.confusion_matrix += self._generate_matrix(gt_image, pre_image)

    def reset(self):
        self.confusion_matrix = np.zeros((self.num_class,) * 2)


class LR_Scheduler(object):
    """Poly mode: ``lr = baselr * (1 - iter/maxiter) ^ 0.9``"""

    def __init__(self, mode, base_lr, num_epochs, iters_per_epoch=0, lr_step=0, warmup_epochs=0):
        self.mode = mode
        print('Using {} LR Scheduler!'.format(self.mode))
        self.lr, self.lr_step, self.iters_per_epoch = base_lr, lr_step, iters_per_epoch
        self.N, self.epoch = num_epochs * iters_per_epoch, -1

    def __call__(self, optimizer, i, epoch, best_pred):
        T = epoch * self.iters_per_epoch + i
        lr = self.lr * pow((1 - 1.0 * T / self.N), 0.9)
        if epoch > self.epoch:
            print('=>Epoches %i, learning rate = %.4f, previous best = %.4f' % (epoch, lr, best_pred))
            self.epoch = epoch
        assert lr >= 0
        optimizer.param_groups[0]['lr'] = lr
        for i in range(1, len(optimizer.param_groups)):  # enlarge the lr at the head
            optimizer.param_groups[i]['lr'] = lr * 10


class Saver(object):
    def __init__(self, args):
        self.args = args
        self.directory = os.path.join(args.run_root, 'run', args.dataset, args.checkname)
        self.runs = sorted(glob.glob(os.path.join(self.directory, 'experiment_*')))
        run_id = int(self.runs[-1].split('_')[-1]) + 1 if self.runs else 0
        self.experiment_dir = os.path.join(self.directory, 'experiment_{}'.format(str(run_id)))
        os.makedirs(self.experiment_dir, exist_ok=True)

    def save_checkpoint(self, state, is_best, filename='checkpoint.pth.tar'):
        """Saves checkpoint to disk"""
        filename = os.path.join(self.experiment_dir, filename)
        torch.save(state, filename)
        if is_best:
            with open(os.path.join(self.experiment_dir, 'best_pred.txt'), 'w') as f:
                f.write(str(state['best_pred']))
            shutil.copyfile(filename, os.path.join(self.directory, 'model_best.pth.tar'))

    def save_experiment_config(self):
        keys = ('dataset', 'backbone', 'out_stride', 'lr', 'lr_scheduler', 'loss_type', 'epochs', 'crop_size')
        with open(os.path.join(self.experiment_dir, 'parameters.txt'), 'w') as log_file:
            log_file.writelines(key + ':' + str(getattr(self.args, key)) + '\n' for key in keys)


class TensorboardSummary(object):
    """Keeps the decoded images it would have written to tensorboard (their sizes are printed)."""

    def __init__(self, directory):
        self.directory, self.scalars, self.images = directory, {}, {}

    def create_summary(self):
        return self

    def add_scalar(self, tag, value, step):
        self.scalars[tag] = float(value)

    def visualize_image(self, writer, dataset, image, target, output, global_step):
        writer.images['Image'] = image[:3].clone().cpu().data
        writer.images['Predicted label'] = decode_seg_map_sequence(
            torch.max(output[:3], 1)[1].detach().cpu().numpy(), dataset=dataset)
        writer.images['Groundtruth label'] = decode_seg_map_sequence(
            torch.squeeze(target[:3], 1).detach().cpu().numpy(), dataset=dataset)

    def close(self):
        print('summary images:', {k: tuple(v.shape) for k, v in self.images.items()})


def calculate_weigths_labels(dataset, dataloader, num_classes, directory):
    z = np.zeros((num_classes,))
    print('Calculating classes weights')
    for sample in dataloader:
        y = sample['label']
        y = y.detach().cpu().numpy()
        mask = (y >= 0) & (y < num_classes)
        z += np.bincount(y[mask].astype(np.uint8), minlength=num_classes)
    total_frequency = np.sum(z)
    ret = np.array([1 / (np.log(1.02 + (frequency / total_frequency))) for frequency in z])
    np.save(os.path.join(directory, dataset + '_classes_weights.npy'), ret)
    return ret


class Trainer(object):
    def __init__(self, args):
        self.args = args
        self.saver = Saver(args)
        self.saver.save_experiment_config()
        self.summary = TensorboardSummary(self.saver.experiment_dir)
        self.writer = self.summary.create_summary()
        kwargs = {'num_workers': args.workers, 'pin_memory': True}
        self.train_loader, self.val_loader, self.test_loader, self.nclass = make_data_loader(args, **kwargs)
        model = DeepLab(num_classes=self.nclass, backbone=args.backbone, output_stride=args.out_stride,
                        sync_bn=args.sync_bn, freeze_bn=args.freeze_bn)
        train_params = [{'params': model.get_1x_lr_params(), 'lr': args.lr},
                        {'params': model.get_10x_lr_params(), 'lr': args.lr * 10}]
        optimizer = torch.optim.SGD(train_params, momentum=args.momentum, weight_decay=args.weight_decay,
                                    nesterov=args.nesterov)
        # Define Criterion: whether to use class balanced weights
        if args.use_balanced_weights:
            classes_weights_path = os.path.join(args.run_root, args.dataset + '_classes_weights.npy')
            if os.path.isfile(classes_weights_path):
                weight = np.load(classes_weights_path)
            else:
                weight = calculate_weigths_labels(args.dataset, self.train_loader, self.nclass, args.run_root)
            weight = torch.from_numpy(weight.astype(np.float32))
        else:
            weight = None
        self.criterion = SegmentationLosses(weight=weight, cuda=args.cuda).build_loss(mode=args.loss_type)
        self.model, self.optimizer = model, optimizer
        self.evaluator = Evaluator(self.nclass)
        self.scheduler = LR_Scheduler(args.lr_scheduler, args.lr, args.epochs, len(self.train_loader))

        if args.cuda:  # Using cuda
            self.model = torch.nn.DataParallel(self.model, device_ids=self.args.gpu_ids)
            self.model = self.model.cuda()

        self.best_pred = 0.0  # Resuming checkpoint
        if args.resume is not None:
            if not os.path.isfile(args.resume):
                raise RuntimeError("=> no checkpoint found at '{}'".format(args.resume))
            checkpoint = torch.load(args.resume, weights_only=False)  # best_pred is a numpy float
            args.start_epoch = checkpoint['epoch']
            if args.cuda:
                self.model.module.load_state_dict(checkpoint['state_dict'])
            else:
                self.model.load_state_dict(checkpoint['state_dict'])
            if not args.ft:
                self.optimizer.load_state_dict(checkpoint['optimizer'])
            self.best_pred = checkpoint['best_pred']
            print("=> loaded checkpoint '{}' (epoch {})".format(args.resume, checkpoint['epoch']))
        if args.ft:  # Clear start epoch if fine-tuning
            args.start_epoch = 0

    def model_state_dict(self):
        return self.model.module.state_dict() if self.args.cuda else self.model.state_dict()

    def training(self, epoch):
        train_loss = 0.0
        self.model.train()
        num_img_tr = len(self.train_loader)
        for i, sample in enumerate(self.train_loader):
            image, target = sample['image'], sample['label']
            if self.args.cuda:
                image, target = image.cuda(), target.cuda()
            self.scheduler(self.optimizer, i, epoch, self.best_pred)
            self.optimizer.zero_grad()
            output = self.model(image)
            loss = self.criterion(output, target)
            loss.backward()
            self.optimizer.step()
            train_loss += loss.item()
            self.writer.add_scalar('train/total_loss_iter', loss.item(), i + num_img_tr * epoch)
            # Show 10 * 3 inference results each epoch
            if i % max(num_img_tr // 10, 1) == 0:
                global_step = i + num_img_tr * epoch
                self.summary.visualize_image(self.writer, self.args.dataset, image, target, output, global_step)
        self.writer.add_scalar('train/total_loss_epoch', train_loss, epoch)
        print('[Epoch: %d, numImages: %5d]' % (epoch, i * self.args.batch_size + image.data.shape[0]))
        print('Loss: %.3f' % train_loss)
        if self.args.no_val:  # save checkpoint every epoch
            self.saver.save_checkpoint({'epoch': epoch + 1, 'state_dict': self.model_state_dict(),
                                        'optimizer': self.optimizer.state_dict(), 'best_pred': self.best_pred}, False)

    def validation(self, epoch):
        self.model.eval()
        self.evaluator.reset()
        test_loss = 0.0
        for i, sample in enumerate(self.val_loader):
            image, target = sample['image'], sample['label']
            if self.args.cuda:
                image, target = image.cuda(), target.cuda()
            with torch.no_grad():
                output = self.model(image)
            loss = self.criterion(output, target)
            test_loss += loss.item()
            pred = output.data.cpu().numpy()
            target = target.cpu().numpy()
            self.evaluator.add_batch(target, np.argmax(pred, axis=1))  # Add batch sample into evaluator

        # Fast test during the training
        Acc = self.evaluator.Pixel_Accuracy()
        Acc_class = self.evaluator.Pixel_Accuracy_Class()
        mIoU = self.evaluator.Mean_Intersection_over_Union()
        FWIoU = self.evaluator.Frequency_Weighted_Intersection_over_Union()
        for tag, value in (('total_loss_epoch', test_loss), ('mIoU', mIoU), ('Acc', Acc), ('fwIoU', FWIoU)):
            self.writer.add_scalar('val/' + tag, value, epoch)
        print('Validation:')
        print('[Epoch: %d, numImages: %5d]' % (epoch, i * self.args.batch_size + image.data.shape[0]))
        print("Acc:{:.4f}, Acc_class:{:.4f}, mIoU:{:.4f}, fwIoU: {:.4f}".format(Acc, Acc_class, mIoU, FWIoU))
        print('Loss: %.3f' % test_loss)

        new_pred = mIoU
        if new_pred > self.best_pred:
            self.best_pred = new_pred
            self.saver.save_checkpoint({'epoch': epoch + 1, 'state_dict': self.model_state_dict(),
                                        'optimizer': self.optimizer.state_dict(), 'best_pred': self.best_pred}, True)
        return mIoU


def main(run_root, argv):
    parser = argparse.ArgumentParser(description="PyTorch DeeplabV3Plus Training")
    for flag, kind, default in [('backbone', str, 'mobilenet'), ('out-stride', int, 16), ('dataset', str, 'pascal'),
                                ('workers', int, 0), ('base-size', int, 64), ('crop-size', int, 64),
                                ('sync-bn', bool, None), ('freeze-bn', bool, False), ('loss-type', str, 'ce'),
                                ('epochs', int, None), ('start_epoch', int, 0), ('batch-size', int, None),
                                ('lr', float, None), ('lr-scheduler', str, 'poly'), ('momentum', float, 0.9),
                                ('weight-decay', float, 5e-4), ('gpu-ids', str, '0'), ('seed', int, 1),
                                ('resume', str, None), ('checkname', str, None), ('eval-interval', int, 1)]:
        parser.add_argument('--' + flag, type=kind, default=default)
    for flag in ('use-balanced-weights', 'nesterov', 'no-cuda', 'ft', 'no-val'):
        parser.add_argument('--' + flag, action='store_true', default=False)
    args = parser.parse_args(argv)
    args.run_root = run_root
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    args.gpu_ids = [int(s) for s in args.gpu_ids.split(',')]
    if args.sync_bn is None:
        args.sync_bn = bool(args.cuda and len(args.gpu_ids) > 1)
    # default settings for epochs, batch_size and lr
    if args.epochs is None:
        args.epochs = {'coco': 30, 'cityscapes': 200, 'pascal': 2}[args.dataset.lower()]
    if args.batch_size is None:
        args.batch_size = 8 * len(args.gpu_ids)
    if args.lr is None:
        args.lr = {'coco': 0.1, 'cityscapes': 0.01, 'pascal': 0.007}[args.dataset.lower()] / 4 * args.batch_size
    if args.checkname is None:
        args.checkname = 'deeplab-' + str(args.backbone)
    torch.manual_seed(args.seed)
    trainer = Trainer(args)
    print('Starting Epoch:', trainer.args.start_epoch, 'Total Epoches:', trainer.args.epochs)
    for epoch in range(trainer.args.start_epoch, trainer.args.epochs):
        trainer.training(epoch)
        if not trainer.args.no_val and epoch % args.eval_interval == (args.eval_interval - 1):
            trainer.validation(epoch)
    trainer.writer.close()
    return trainer


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as run_root:
        first = main(run_root, ['--use-balanced-weights'])
        best = os.path.join(first.saver.directory, 'model_best.pth.tar')
        second = main(run_root, ['--use-balanced-weights', '--epochs', '3', '--resume', best])
    print("done: best mIoU %.4f" % second.best_pred)
