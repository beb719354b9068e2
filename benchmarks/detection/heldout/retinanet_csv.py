"""Trains a RetinaNet detector (ResNet-18, feature pyramid, focal loss) on synthetic images of coloured boxes and
checks its recall, then reloads the pickled model and evaluates it again, as yhenon/pytorch-retinanet does: the
model goes to the GPU with ``retinanet.cuda()`` when ``torch.cuda.is_available()`` and is wrapped in
``DataParallel`` (which scatters the batch's CPU annotations to the GPU), and every helper that makes tensors picks
``.cuda()`` or the CPU with its own ``torch.cuda.is_available()`` test.

Modeled on: yhenon/pytorch-retinanet, train.py, retinanet/model.py, retinanet/losses.py, retinanet/anchors.py,
retinanet/utils.py, retinanet/dataloader.py, retinanet/csv_eval.py and visualize.py at commit
0348a9d57b279e3b5b235461b472d37da5feec3d
(https://github.com/yhenon/pytorch-retinanet/blob/0348a9d57b279e3b5b235461b472d37da5feec3d/train.py,
https://github.com/yhenon/pytorch-retinanet/blob/0348a9d57b279e3b5b235461b472d37da5feec3d/retinanet/model.py,
https://github.com/yhenon/pytorch-retinanet/blob/0348a9d57b279e3b5b235461b472d37da5feec3d/retinanet/losses.py).

Kept: `BasicBlock`, `BBoxTransform` (mean/std made with ``torch.from_numpy(...).cuda()`` or on the CPU), `ClipBoxes`,
`Anchors` (numpy anchors returned with ``torch.from_numpy(...).cuda()`` or not), `calc_iou`, `FocalLoss` (its
``torch.ones(...).cuda()``, ``torch.tensor(0).float().cuda()``, ``torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()`` and
``torch.zeros(...).cuda()`` branches, with their CPU twins), `PyramidFeatures`, the two heads and `ResNet` (with
`freeze_bn` and the eval-time post-processing: ``torch.Tensor([])`` accumulators moved with ``.cuda()``, per-class
NMS, ``torch.tensor([i] * n)`` labels moved the same way); `collater`; train.py's main (``use_gpu``, ``.cuda()``,
``DataParallel(retinanet).cuda()`` or plain ``DataParallel``, ``retinanet.training = True``, the try/except step with
``data['img'].cuda().float()`` and the CPU ``data['annot']``, ``float(loss)``, ReduceLROnPlateau,
``torch.save(retinanet.module, ...)`` each epoch and ``torch.save(retinanet, ...)``); csv_eval.py's `_get_detections`
(``.permute(2, 0, 1).cuda().float().unsqueeze(dim=0)``, ``.cpu().numpy()``); visualize.py's reloading of the pickled
model with ``torch.load``, ``.cuda()`` and ``DataParallel``.

Changed to run here: CSV files and images are replaced by `SyntheticCSVDataset` (every fifth image has no boxes),
which normalises like `Normalizer` and returns tensors like `Resizer` (the images are made at their final size);
torchvision's ``nms`` is a pure-torch stand-in; no ImageNet weights (``pretrained=False``); ``torch.load(...,
weights_only=False)`` for the pickled model; ``num_workers=0`` and a shuffling DataLoader instead of the aspect-ratio
sampler; the augmenter, the weight-init loop and the mAP curve are left out (`evaluate` reports per-class recall);
the reloaded model (last epoch's ``retinanet.module``) is evaluated instead of drawn with cv2; Adam's learning rate
is 1e-3 instead of 1e-5 so that the short run produces detections for the NMS path; ``verbose`` is dropped from
ReduceLROnPlateau (removed in torch 2).
Shrunk: ResNet-18 only, pyramid/head width 256 -> 64, head depth 4 -> 2 convolutions, 64-96 pixel images instead
of 608-1024, 10 training and 4 validation images, batch 2, 2 epochs.
"""
import collections
import math
import os
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

FEATURE_SIZE = 64

# ---- stand-in for torchvision.ops.nms ----------------------------------------
def nms(boxes, scores, iou_threshold):
    order, keep = scores.argsort(descending=True), []
    while order.numel() > 0:
        keep.append(order[0])
        iou = calc_iou(boxes[order[0]].unsqueeze(0), boxes[order[1:]])[0]
        order = order[1:][iou <= iou_threshold]
    return torch.stack(keep)

# ---- retinanet/utils.py ------------------------------------------------------------------------------------------
def conv3x3(in_planes, out_planes, stride=1):
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)

class BasicBlock(nn.Module):
    expansion = 1
    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(BasicBlock, self).__init__()
        self.conv1, self.bn1 = conv3x3(inplanes, planes, stride), nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2, self.bn2 = conv3x3(planes, planes), nn.BatchNorm2d(planes)
        self.downsample, self.stride = downsample, stride
    def forward(self, x):
        residual = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        out += residual
        return self.relu(out)

class BBoxTransform(nn.Module):
    def __init__(self, mean=None, std=None):
        super(BBoxTransform, self).__init__()
        if mean is None:
            if torch.cuda.is_available():
                self.mean = torch.from_numpy(np.array([0, 0, 0, 0]).astype(np.float32)).cuda()
            else:
                self.mean = torch.from_numpy(np.array([0, 0, 0, 0]).astype(np.float32))
        else:
            self.mean = mean
        if std is None:
            if torch.cuda.is_available():
                self.std = torch.from_numpy(np.array([0.1, 0.1, 0.2, 0.2]).astype(np.float32)).cuda()
            else:
                self.std = torch.from_numpy(np.array([0.1, 0.1, 0.2, 0.2]).astype(np.float32))
        else:
            self.std = std
    def forward(self, boxes, deltas):
        widths, heights = boxes[:, :, 2] - boxes[:, :, 0], boxes[:, :, 3] - boxes[:, :, 1]
        ctr_x, ctr_y = boxes[:, :, 0] + 0.5 * widths, boxes[:, :, 1] + 0.5 * heights
        dx = deltas[:, :, 0] * self.std[0] + self.mean[0]
        dy = deltas[:, :, 1] * self.std[1] + self.mean[1]
        dw = deltas[:, :, 2] * self.std[2] + self.mean[2]
        dh = deltas[:, :, 3] * self.std[3] + self.mean[3]
        pred_ctr_x, pred_ctr_y = ctr_x + dx * widths, ctr_y + dy * heights
        pred_w, pred_h = torch.exp(dw) * widths, torch.exp(dh) * heights
        pred_boxes = torch.stack([pred_ctr_x - 0.5 * pred_w, pred_ctr_y - 0.5 * pred_h,
                                  pred_ctr_x + 0.5 * pred_w, pred_ctr_y + 0.5 * pred_h], dim=2)
        return pred_boxes

class ClipBoxes(nn.Module):
    def __init__(self, width=None, height=None):
        super(ClipBoxes, self).__init__()
    def forward(self, boxes, img):
        batch_size, num_channels, height, width = img.shape
        boxes[:, :, 0] = torch.clamp(boxes[:, :, 0], min=0)
        boxes[:, :, 1] = torch.clamp(boxes[:, :, 1], min=0)
        boxes[:, :, 2] = torch.clamp(boxes[:, :, 2], max=width)
        boxes[:, :, 3] = torch.clamp(boxes[:, :, 3], max=height)
        return boxes

# ---- retinanet/anchors.py ----------------------------------------------------------------------------------------
class Anchors(nn.Module):
    def __init__(self, pyramid_levels=None, strides=None, sizes=None, ratios=None, scales=None):
        super(Anchors, self).__init__()
        self.pyramid_levels = [3, 4, 5, 6, 7]
        self.strides = [2 ** x for x in self.pyramid_levels]
        self.sizes = [2 ** (x + 2) for x in self.pyramid_levels]
        self.ratios = np.array([0.5, 1, 2])
        self.scales = np.array([2 ** 0, 2 ** (1.0 / 3.0), 2 ** (2.0 / 3.0)])
    def forward(self, image):
        image_shape = np.array(image.shape[2:])
        image_shapes = [(image_shape + 2 ** x - 1) // (2 ** x) for x in self.pyramid_levels]
        all_anchors = np.zeros((0, 4)).astype(np.float32)
        for idx, p in enumerate(self.pyramid_levels):
            anchors = generate_anchors(base_size=self.sizes[idx], ratios=self.ratios, scales=self.scales)
            shifted_anchors = shift(image_shapes[idx], self.strides[idx], anchors)
            all_anchors = np.append(all_anchors, shifted_anchors, axis=0)
        all_anchors = np.expand_dims(all_anchors, axis=0)
        if torch.cuda.is_available():
            return torch.from_numpy(all_anchors.astype(np.float32)).cuda()
        else:
            return torch.from_numpy(all_anchors.astype(np.float32))

def generate_anchors(base_size=16, ratios=None, scales=None):
    num_anchors = len(ratios) * len(scales)
    anchors = np.zeros((num_anchors, 4))
    anchors[:, 2:] = base_size * np.tile(scales, (2, len(ratios))).T
    areas = anchors[:, 2] * anchors[:, 3]
    anchors[:, 2] = np.sqrt(areas / np.repeat(ratios, len(scales)))
    anchors[:, 3] = anchors[:, 2] * np.repeat(ratios, len(scales))
    anchors[:, 0::2] -= np.tile(anchors[:, 2] * 0.5, (2, 1)).T
    anchors[:, 1::2] -= np.tile(anchors[:, 3] * 0.5, (2, 1)).T
    return anchors

def shift(shape, stride, anchors):
    shift_x = (np.arange(0, shape[1]) + 0.5) * stride
    shift_y = (np.arange(0, shape[0]) + 0.5) * stride
    shift_x, shift_y = np.meshgrid(shift_x, shift_y)
    shifts = np.vstack((shift_x.ravel(), shift_y.ravel(), shift_x.ravel(), shift_y.ravel())).transpose()
    A, K = anchors.shape[0], shifts.shape[0]
    all_anchors = (anchors.reshape((1, A, 4)) + shifts.reshape((1, K, 4)).transpose((1, 0, 2)))
    return all_anchors.reshape((K * A, 4))

# ---- retinanet/losses.py -----------------------------------------------------------------------------------------
def calc_iou(a, b):
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    iw = torch.min(torch.unsqueeze(a[:, 2], dim=1), b[:, 2]) - torch.max(torch.unsqueeze(a[:, 0], 1), b[:, 0])
    ih = torch.min(torch.unsqueeze(a[:, 3], dim=1), b[:, 3]) - torch.max(torch.unsqueeze(a[:, 1], 1), b[:, 1])
    iw, ih = torch.clamp(iw, min=0), torch.clamp(ih, min=0)
    ua = torch.unsqueeze((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]), dim=1) + area - iw * ih
    ua = torch.clamp(ua, min=1e-8)
    intersection = iw * ih
    return intersection / ua

class FocalLoss(nn.Module):
    def forward(self, classifications, regressions, anchors, annotations):
        alpha, gamma = 0.25, 2.0
        batch_size = classifications.shape[0]
        classification_losses, regression_losses = [], []
        anchor = anchors[0, :, :]
        anchor_widths, anchor_heights = anchor[:, 2] - anchor[:, 0], anchor[:, 3] - anchor[:, 1]
        anchor_ctr_x, anchor_ctr_y = anchor[:, 0] + 0.5 * anchor_widths, anchor[:, 1] + 0.5 * anchor_heights
        for j in range(batch_size):
            classification, regression = classifications[j, :, :], regressions[j, :, :]
            bbox_annotation = annotations[j, :, :]
            bbox_annotation = bbox_annotation[bbox_annotation[:, 4] != -1]
            classification = torch.clamp(classification, 1e-4, 1.0 - 1e-4)
            if bbox_annotation.shape[0] == 0:
                if torch.cuda.is_available():
                    alpha_factor = torch.ones(classification.shape).cuda() * alpha
                    alpha_factor = 1. - alpha_factor
                    focal_weight = classification
                    focal_weight = alpha_factor * torch.pow(focal_weight, gamma)
                    bce = -(torch.log(1.0 - classification))
                    cls_loss = focal_weight * bce
                    classification_losses.append(cls_loss.sum())
                    regression_losses.append(torch.tensor(0).float().cuda())
                else:
                    alpha_factor = torch.ones(classification.shape) * alpha
                    alpha_factor = 1. - alpha_factor
                    focal_weight = classification
                    focal_weight = alpha_factor * torch.pow(focal_weight, gamma)
                    bce = -(torch.log(1.0 - classification))
                    cls_loss = focal_weight * bce
                    classification_losses.append(cls_loss.sum())
                    regression_losses.append(torch.tensor(0).float())
                continue
            IoU = calc_iou(anchors[0, :, :], bbox_annotation[:, :4])  # num_anchors x num_annotations
            IoU_max, IoU_argmax = torch.max(IoU, dim=1)  # num_anchors x 1
            targets = torch.ones(classification.shape) * -1
            if torch.cuda.is_available():
                targets = targets.cuda()
            targets[torch.lt(IoU_max, 0.4), :] = 0
            positive_indices = torch.ge(IoU_max, 0.5)
            num_positive_anchors = positive_indices.sum()
            assigned_annotations = bbox_annotation[IoU_argmax, :]
            targets[positive_indices, :] = 0
            targets[positive_indices, assigned_annotations[positive_indices, 4].long()] = 1
            if torch.cuda.is_available():
                alpha_factor = torch.ones(targets.shape).cuda() * alpha
            else:
                alpha_factor = torch.ones(targets.shape) * alpha
            alpha_factor = torch.where(torch.eq(targets, 1.), alpha_factor, 1. - alpha_factor)
            focal_weight = torch.where(torch.eq(targets, 1.), 1. - classification, classification)
            focal_weight = alpha_factor * torch.pow(focal_weight, gamma)
            bce = -(targets * torch.log(classification) + (1.0 - targets) * torch.log(1.0 - classification))
            cls_loss = focal_weight * bce
            if torch.cuda.is_available():
                cls_loss = torch.where(torch.ne(targets, -1.0), cls_loss, torch.zeros(cls_loss.shape).cuda())
            else:
                cls_loss = torch.where(torch.ne(targets, -1.0), cls_loss, torch.zeros(cls_loss.shape))
            classification_losses.append(cls_loss.sum() / torch.clamp(num_positive_anchors.float(), min=1.0))
            if positive_indices.sum() > 0:
                assigned_annotations = assigned_annotations[positive_indices, :]
                anchor_widths_pi, anchor_heights_pi = anchor_widths[positive_indices], anchor_heights[positive_indices]
                anchor_ctr_x_pi, anchor_ctr_y_pi = anchor_ctr_x[positive_indices], anchor_ctr_y[positive_indices]
                gt_widths = assigned_annotations[:, 2] - assigned_annotations[:, 0]
                gt_heights = assigned_annotations[:, 3] - assigned_annotations[:, 1]
                gt_ctr_x = assigned_annotations[:, 0] + 0.5 * gt_widths
                gt_ctr_y = assigned_annotations[:, 1] + 0.5 * gt_heights
                gt_widths, gt_heights = torch.clamp(gt_widths, min=1), torch.clamp(gt_heights, min=1)
                targets_dx = (gt_ctr_x - anchor_ctr_x_pi) / anchor_widths_pi
                targets_dy = (gt_ctr_y - anchor_ctr_y_pi) / anchor_heights_pi
                targets_dw = torch.log(gt_widths / anchor_widths_pi)
                targets_dh = torch.log(gt_heights / anchor_heights_pi)
                targets = torch.stack((targets_dx, targets_dy, targets_dw, targets_dh)).t()
                if torch.cuda.is_available():
                    targets = targets / torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()
                else:
                    targets = targets / torch.Tensor([[0.1, 0.1, 0.2, 0.2]])
                regression_diff = torch.abs(targets - regression[positive_indices, :])
                regression_loss = torch.where(torch.le(regression_diff, 1.0 / 9.0),
                                              0.5 * 9.0 * torch.pow(regression_diff, 2), regression_diff - 0.5 / 9.0)
                regression_losses.append(regression_loss.mean())
            else:
                if torch.cuda.is_available():
                    regression_losses.append(torch.tensor(0).float().cuda())
                else:
                    regression_losses.append(torch.tensor(0).float())
        return torch.stack(classification_losses).mean(dim=0, keepdim=True), \
            torch.stack(regression_losses).mean(dim=0, keepdim=True)

# ---- retinanet/model.py ------------------------------------------------------------------------------------------
class PyramidFeatures(nn.Module):
    def __init__(self, C3_size, C4_size, C5_size, feature_size=FEATURE_SIZE):
        super(PyramidFeatures, self).__init__()
        self.P5_1 = nn.Conv2d(C5_size, feature_size, kernel_size=1, stride=1, padding=0)
        self.P5_upsampled = nn.Upsample(scale_factor=2, mode='nearest')
        self.P5_2 = nn.Conv2d(feature_size, feature_size, kernel_size=3, stride=1, padding=1)
        self.P4_1 = nn.Conv2d(C4_size, feature_size, kernel_size=1, stride=1, padding=0)
        self.P4_upsampled = nn.Upsample(scale_factor=2, mode='nearest')
        self.P4_2 = nn.Conv2d(feature_size, feature_size, kernel_size=3, stride=1, padding=1)
        self.P3_1 = nn.Conv2d(C3_size, feature_size, kernel_size=1, stride=1, padding=0)
        self.P3_2 = nn.Conv2d(feature_size, feature_size, kernel_size=3, stride=1, padding=1)
        self.P6 = nn.Conv2d(C5_size, feature_size, kernel_size=3, stride=2, padding=1)
        self.P7_1 = nn.ReLU()
        self.P7_2 = nn.Conv2d(feature_size, feature_size, kernel_size=3, stride=2, padding=1)
    def forward(self, inputs):
        C3, C4, C5 = inputs
        P5_x = self.P5_1(C5)
        P5_upsampled_x = self.P5_upsampled(P5_x)
        P5_x = self.P5_2(P5_x)
        P4_x = P5_upsampled_x + self.P4_1(C4)
        P4_upsampled_x = self.P4_upsampled(P4_x)
        P4_x = self.P4_2(P4_x)
        P3_x = self.P3_2(self.P3_1(C3) + P4_upsampled_x)
        P6_x = self.P6(C5)
        P7_x = self.P7_2(self.P7_1(P6_x))
        return [P3_x, P4_x, P5_x, P6_x, P7_x]

class RegressionModel(nn.Module):
    def __init__(self, num_features_in, num_anchors=9, feature_size=FEATURE_SIZE):
        super(RegressionModel, self).__init__()
        self.conv1 = nn.Conv2d(num_features_in, feature_size, kernel_size=3, padding=1)
        self.act1 = nn.ReLU()
        self.conv2 = nn.Conv2d(feature_size, feature_size, kernel_size=3, padding=1)
        self.act2 = nn.ReLU()
        self.output = nn.Conv2d(feature_size, num_anchors * 4, kernel_size=3, padding=1)
    def forward(self, x):
        out = self.act1(self.conv1(x))
        out = self.act2(self.conv2(out))
        out = self.output(out)
        out = out.permute(0, 2, 3, 1)
        return out.contiguous().view(out.shape[0], -1, 4)

class ClassificationModel(nn.Module):
    def __init__(self, num_features_in, num_anchors=9, num_classes=80, prior=0.01, feature_size=FEATURE_SIZE):
        super(ClassificationModel, self).__init__()
        self.num_classes, self.num_anchors = num_classes, num_anchors
        self.conv1 = nn.Conv2d(num_features_in, feature_size, kernel_size=3, padding=1)
        self.act1 = nn.ReLU()
        self.conv2 = nn.Conv2d(feature_size, feature_size, kernel_size=3, padding=1)
        self.act2 = nn.ReLU()
        self.output = nn.Conv2d(feature_size, num_anchors * num_classes, kernel_size=3, padding=1)
        self.output_act = nn.Sigmoid()
    def forward(self, x):
        out = self.act1(self.conv1(x))
        out = self.act2(self.conv2(out))
        out = self.output_act(self.output(out))
        out1 = out.permute(0, 2, 3, 1)
        batch_size, width, height, channels = out1.shape
        out2 = out1.view(batch_size, width, height, self.num_anchors, self.num_classes)
        return out2.contiguous().view(x.shape[0], -1, self.num_classes)

class ResNet(nn.Module):
    def __init__(self, num_classes, block, layers):
        self.inplanes = 64
        super(ResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        fpn_sizes = [self.layer2[layers[1] - 1].conv2.out_channels, self.layer3[layers[2] - 1].conv2.out_channels,
                     self.layer4[layers[3] - 1].conv2.out_channels]
        self.fpn = PyramidFeatures(fpn_sizes[0], fpn_sizes[1], fpn_sizes[2])
        self.regressionModel = RegressionModel(FEATURE_SIZE)
        self.classificationModel = ClassificationModel(FEATURE_SIZE, num_classes=num_classes)
        self.anchors, self.regressBoxes, self.clipBoxes = Anchors(), BBoxTransform(), ClipBoxes()
        self.focalLoss = FocalLoss()
        prior = 0.01
        self.classificationModel.output.weight.data.fill_(0)
        self.classificationModel.output.bias.data.fill_(-math.log((1.0 - prior) / prior))
        self.regressionModel.output.weight.data.fill_(0)
        self.regressionModel.output.bias.data.fill_(0)
        self.freeze_bn()
    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for i in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)
    def freeze_bn(self):
        '''Freeze BatchNorm layers.'''
        for layer in self.modules():
            if isinstance(layer, nn.BatchNorm2d):
                layer.eval()
    def forward(self, inputs):
        if self.training:
            img_batch, annotations = inputs
        else:
            img_batch = inputs
        x = self.maxpool(self.relu(self.bn1(self.conv1(img_batch))))
        x2 = self.layer2(self.layer1(x))
        x3 = self.layer3(x2)
        x4 = self.layer4(x3)
        features = self.fpn([x2, x3, x4])
        regression = torch.cat([self.regressionModel(feature) for feature in features], dim=1)
        classification = torch.cat([self.classificationModel(feature) for feature in features], dim=1)
        anchors = self.anchors(img_batch)
        if self.training:
            return self.focalLoss(classification, regression, anchors, annotations)
        else:
            transformed_anchors = self.regressBoxes(anchors, regression)
            transformed_anchors = self.clipBoxes(transformed_anchors, img_batch)
            finalResult = [[], [], []]
            finalScores = torch.Tensor([])
            finalAnchorBoxesIndexes = torch.Tensor([]).long()
            finalAnchorBoxesCoordinates = torch.Tensor([])
            if torch.cuda.is_available():
                finalScores = finalScores.cuda()
                finalAnchorBoxesIndexes = finalAnchorBoxesIndexes.cuda()
                finalAnchorBoxesCoordinates = finalAnchorBoxesCoordinates.cuda()
            for i in range(classification.shape[2]):
                scores = torch.squeeze(classification[:, :, i])
                scores_over_thresh = (scores > 0.05)
                if scores_over_thresh.sum() == 0:
                    continue
                scores = scores[scores_over_thresh]
                anchorBoxes = torch.squeeze(transformed_anchors)
                anchorBoxes = anchorBoxes[scores_over_thresh]
                anchors_nms_idx = nms(anchorBoxes, scores, 0.5)
                finalResult[0].extend(scores[anchors_nms_idx])
                finalResult[1].extend(torch.tensor([i] * anchors_nms_idx.shape[0]))
                finalResult[2].extend(anchorBoxes[anchors_nms_idx])
                finalScores = torch.cat((finalScores, scores[anchors_nms_idx]))
                finalAnchorBoxesIndexesValue = torch.tensor([i] * anchors_nms_idx.shape[0])
                if torch.cuda.is_available():
                    finalAnchorBoxesIndexesValue = finalAnchorBoxesIndexesValue.cuda()
                finalAnchorBoxesIndexes = torch.cat((finalAnchorBoxesIndexes, finalAnchorBoxesIndexesValue))
                finalAnchorBoxesCoordinates = torch.cat((finalAnchorBoxesCoordinates, anchorBoxes[anchors_nms_idx]))
            return [finalScores, finalAnchorBoxesIndexes, finalAnchorBoxesCoordinates]

def resnet18(num_classes, pretrained=False, **kwargs):
    """Constructs a ResNet-18 model."""
    return ResNet(num_classes, BasicBlock, [2, 2, 2, 2], **kwargs)

# ---- retinanet/dataloader.py (data replaced; collater kept) -------------------------------------------------------
class SyntheticCSVDataset(Dataset):
    """Stand-in for CSVDataset: images (sides multiples of 32) with rectangles of three classes; some have none."""
    def __init__(self, num_images, seed):
        self.labels = {0: 'red', 1: 'green', 2: 'blue'}
        rng = np.random.RandomState(seed)
        self.image_data = []
        for index in range(num_images):
            h, w = int(rng.choice([64, 96])), int(rng.choice([64, 96]))
            img = rng.uniform(0.0, 0.2, size=(h, w, 3)).astype(np.float32)
            annots = np.zeros((0, 5))
            for _ in range(rng.randint(1, 3) if index % 5 != 4 else 0):
                c, bw, bh = rng.randint(3), rng.randint(24, 40), rng.randint(24, 40)
                x1, y1 = rng.randint(0, w - bw), rng.randint(0, h - bh)
                img[y1:y1 + bh, x1:x1 + bw, c] = 0.9
                annots = np.append(annots, [[x1, y1, x1 + bw, y1 + bh, c]], axis=0)
            self.image_data.append((img, annots))
    def __len__(self):
        return len(self.image_data)
    def __getitem__(self, idx):  # Normalizer, then the tensors made by Resizer (which has nothing else to do)
        img = (self.image_data[idx][0] - np.array([[[0.485, 0.456, 0.406]]])) / np.array([[[0.229, 0.224, 0.225]]])
        return {'img': torch.from_numpy(img.astype(np.float32)), 'annot': torch.from_numpy(self.load_annotations(idx)),
                'scale': 1.0}
    def load_annotations(self, image_index):
        return self.image_data[image_index][1].copy()
    def label_to_name(self, label):
        return self.labels[label]
    def num_classes(self):
        return 3

def collater(data):
    imgs = [s['img'] for s in data]
    annots = [s['annot'] for s in data]
    scales = [s['scale'] for s in data]
    widths = [int(s.shape[0]) for s in imgs]
    heights = [int(s.shape[1]) for s in imgs]
    batch_size = len(imgs)
    max_width, max_height = np.array(widths).max(), np.array(heights).max()
    padded_imgs = torch.zeros(batch_size, max_width, max_height, 3)
    for i in range(batch_size):
        img = imgs[i]
        padded_imgs[i, :int(img.shape[0]), :int(img.shape[1]), :] = img
    max_num_annots = max(annot.shape[0] for annot in annots)
    if max_num_annots > 0:
        annot_padded = torch.ones((len(annots), max_num_annots, 5)) * -1
        for idx, annot in enumerate(annots):
            if annot.shape[0] > 0:
                annot_padded[idx, :annot.shape[0], :] = annot
    else:
        annot_padded = torch.ones((len(annots), 1, 5)) * -1
    padded_imgs = padded_imgs.permute(0, 3, 1, 2)
    return {'img': padded_imgs, 'annot': annot_padded, 'scale': scales}

# ---- retinanet/csv_eval.py ---------------------------------------------------------------------------------------
def _get_detections(dataset, retinanet, score_threshold=0.05, max_detections=100, save_path=None):
    all_detections = [[None for i in range(dataset.num_classes())] for j in range(len(dataset))]
    retinanet.eval()
    with torch.no_grad():
        for index in range(len(dataset)):
            data = dataset[index]
            scale = data['scale']
            if torch.cuda.is_available():
                scores, labels, boxes = retinanet(data['img'].permute(2, 0, 1).cuda().float().unsqueeze(dim=0))
            else:
                scores, labels, boxes = retinanet(data['img'].permute(2, 0, 1).float().unsqueeze(dim=0))
            scores, labels, boxes = scores.cpu().numpy(), labels.cpu().numpy(), boxes.cpu().numpy()
            boxes /= scale
            indices = np.where(scores > score_threshold)[0]
            if indices.shape[0] > 0:
                scores_sort = np.argsort(-scores[indices])[:max_detections]
                image_detections = np.concatenate([boxes[indices[scores_sort], :],
                                                   np.expand_dims(scores[indices][scores_sort], axis=1),
                                                   np.expand_dims(labels[indices[scores_sort]], axis=1)], axis=1)
                for label in range(dataset.num_classes()):
                    all_detections[index][label] = image_detections[image_detections[:, -1] == label, :-1]
            else:
                for label in range(dataset.num_classes()):
                    all_detections[index][label] = np.zeros((0, 5))
    return all_detections

def evaluate(generator, retinanet, iou_threshold=0.5, score_threshold=0.05, max_detections=100, save_path=None):
    """csv_eval.evaluate, reduced to the recall of each class at ``iou_threshold``."""
    all_detections = _get_detections(generator, retinanet, score_threshold=score_threshold,
                                     max_detections=max_detections, save_path=save_path)
    recalls = {}
    for label in range(generator.num_classes()):
        found, num_annotations = 0, 0
        for i in range(len(generator)):
            annotations = generator.load_annotations(i)
            annotations = annotations[annotations[:, 4] == label, :4]
            num_annotations += annotations.shape[0]
            if annotations.shape[0] and all_detections[i][label].shape[0]:
                overlaps = calc_iou(torch.from_numpy(annotations), torch.from_numpy(all_detections[i][label]))
                found += int((overlaps.max(1)[0] >= iou_threshold).sum())
        recalls[label] = found / max(num_annotations, 1)
        print('{}: recall {:.3f}'.format(generator.label_to_name(label), recalls[label]))
    return recalls

# ---- train.py ----------------------------------------------------------------------------------------------------
def main(epochs=2):
    dataset_train = SyntheticCSVDataset(10, seed=1)
    dataset_val = SyntheticCSVDataset(4, seed=2)
    dataloader_train = DataLoader(dataset_train, batch_size=2, shuffle=True, num_workers=0, collate_fn=collater)
    retinanet = resnet18(num_classes=dataset_train.num_classes(), pretrained=False)
    use_gpu = True
    if use_gpu:
        if torch.cuda.is_available():
            retinanet = retinanet.cuda()
    if torch.cuda.is_available():
        retinanet = torch.nn.DataParallel(retinanet).cuda()
    else:
        retinanet = torch.nn.DataParallel(retinanet)
    retinanet.training = True
    optimizer = optim.Adam(retinanet.parameters(), lr=1e-3)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=3)
    loss_hist = collections.deque(maxlen=500)
    retinanet.train()
    retinanet.module.freeze_bn()
    print('Num training images: {}'.format(len(dataset_train)))
    for epoch_num in range(epochs):
        retinanet.train()
        retinanet.module.freeze_bn()
        epoch_loss = []
        for iter_num, data in enumerate(dataloader_train):
            try:
                optimizer.zero_grad()
                if torch.cuda.is_available():
                    classification_loss, regression_loss = retinanet([data['img'].cuda().float(), data['annot']])
                else:
                    classification_loss, regression_loss = retinanet([data['img'].float(), data['annot']])
                classification_loss = classification_loss.mean()
                regression_loss = regression_loss.mean()
                loss = classification_loss + regression_loss
                if bool(loss == 0):
                    continue
                loss.backward()
                torch.nn.utils.clip_grad_norm_(retinanet.parameters(), 0.1)
                optimizer.step()
                loss_hist.append(float(loss))
                epoch_loss.append(float(loss))
                print('Epoch: {} | Iteration: {} | Classification loss: {:1.5f} | Regression loss: {:1.5f} | '
                      'Running loss: {:1.5f}'.format(epoch_num, iter_num, float(classification_loss),
                                                     float(regression_loss), np.mean(loss_hist)))
                del classification_loss
                del regression_loss
            except Exception as e:
                print(e)
                continue
        print('Evaluating dataset')
        evaluate(dataset_val, retinanet)
        scheduler.step(np.mean(epoch_loss))
        torch.save(retinanet.module, '{}_retinanet_{}.pt'.format('csv', epoch_num))
    retinanet.eval()
    torch.save(retinanet, 'model_final.pt')

# ---- visualize.py (the model loading and moving), with csv_eval.evaluate on the reloaded model ---------------------
def validate(model_path):
    dataset_val = SyntheticCSVDataset(4, seed=2)
    retinanet = torch.load(model_path, weights_only=False)
    use_gpu = True
    if use_gpu:
        if torch.cuda.is_available():
            retinanet = retinanet.cuda()
    if torch.cuda.is_available():
        retinanet = torch.nn.DataParallel(retinanet).cuda()
    else:
        retinanet = torch.nn.DataParallel(retinanet)
    retinanet.training = False
    retinanet.eval()
    retinanet.module.freeze_bn()
    return evaluate(dataset_val, retinanet, iou_threshold=0.5)

def run():
    print('CUDA available: {}'.format(torch.cuda.is_available()))
    folder = tempfile.mkdtemp(prefix='retinanet_')
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        main()
        recalls = validate(os.path.join(folder, 'csv_retinanet_1.pt'))
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)
    print('done: recall {}'.format(' '.join('{:.3f}'.format(r) for r in recalls.values())))

if __name__ == '__main__':
    run()
