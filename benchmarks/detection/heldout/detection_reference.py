"""Trains, checkpoints, resumes and evaluates a tiny one-stage detector with torchvision's detection reference loop.

Modeled on: pytorch/vision, references/detection/train.py, engine.py, utils.py and transforms.py
(https://github.com/pytorch/vision/blob/3ceb056d4c4a2d79ccdc65cbd2342b0e89a7ae47/references/detection/train.py,
https://github.com/pytorch/vision/blob/08eb80315bc838623d908c6e81bd119d98057bd7/references/detection/engine.py,
https://github.com/pytorch/vision/blob/15fc26c7008e792893b7dba1581e4cf080933f73/references/detection/utils.py).

Kept: the device is `torch.device(args.device)`; `model.to(device)` once, with `model_without_ddp` kept for the
state_dict; the DataLoader yields tuples of images and of target dicts (`utils.collate_fn`), and `train_one_epoch`
moves them with `list(image.to(device) for image in images)` and `[{k: v.to(device) for k, v in t.items()} for t in
targets]`; a `torch.cuda.amp.GradScaler()` only when `args.amp`, `torch.cuda.amp.autocast(enabled=scaler is not None)`
around the forward, and the scaler's `scale/step/update` path; a LinearLR warmup built inside the first epoch;
`loss_dict` reduced with `reduce_dict` and read with `.item()` every step (with the non-finite check); `evaluate`
under `@torch.inference_mode()`, `model.eval()`, only the images moved to the device, a `torch.cuda.synchronize()`
when `torch.cuda.is_available()`, outputs moved back with `v.to(cpu_device)`, targets left on the host and keyed by
`target["image_id"].item()`, `torch.set_num_threads(1)` restored afterwards; MetricLogger prints
`torch.cuda.max_memory_allocated()` when CUDA is available; the checkpoint dict (model, optimizer, lr_scheduler, args,
epoch, and scaler under amp) written by `save_on_master` every epoch, and the `--resume` / `--test-only` path that
loads it with `torch.load(..., map_location="cpu")` into a fresh model already on the device. The model follows
torchvision's GeneralizedRCNNTransform idioms (`torch.as_tensor(mean, dtype=..., device=...)`,
`images[0].new_full(...)` for the padded batch) and FCOS-style location grids made with `device=feature.device`.

Shrunk: synthetic images with coloured rectangles instead of COCO, a four-layer anchor-free detector of my own instead
of torchvision's Mask R-CNN, a small VOC-style AP@0.5 evaluator instead of pycocotools, SimpleNamespace args (device
is cuda when available, amp on with cuda), 2 loader workers, 3 epochs of 8 steps, no distributed mode, no timings in
the printed lines, `args` stored as a plain dict so `weights_only` loading works.
"""
import datetime
import math
import os
import random
import sys
import tempfile
import time
from collections import defaultdict, deque
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data


# ----------------------------------------------------------------------------- utils.py


class SmoothedValue:
    def __init__(self, window_size=20, fmt=None):
        if fmt is None:
            fmt = "{median:.4f} ({global_avg:.4f})"
        self.deque = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0
        self.fmt = fmt

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def median(self):
        d = torch.tensor(list(self.deque))
        return d.median().item()

    @property
    def global_avg(self):
        return self.total / self.count

    @property
    def value(self):
        return self.deque[-1]

    def __str__(self):
        return self.fmt.format(median=self.median, global_avg=self.global_avg, value=self.value)


class MetricLogger:
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def __getattr__(self, attr):
        if attr in self.meters:
            return self.meters[attr]
        if attr in self.__dict__:
            return self.__dict__[attr]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")

    def __str__(self):
        return self.delimiter.join(f"{name}: {meter}" for name, meter in self.meters.items())

    def add_meter(self, name, meter):
        self.meters[name] = meter

    def log_every(self, iterable, print_freq, header=""):
        MB = 1024.0 * 1024.0
        space_fmt = ":" + str(len(str(len(iterable)))) + "d"
        log_msg = self.delimiter.join([header, "[{0" + space_fmt + "}/{1}]", "{meters}"])
        start_time = time.time()
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0 or i == len(iterable) - 1:
                line = log_msg.format(i, len(iterable), meters=str(self))
                if torch.cuda.is_available():
                    line += self.delimiter + "max mem: {:.0f}".format(torch.cuda.max_memory_allocated() / MB)
                print(line)
        total_time = time.time() - start_time
        # the reference prints this; kept out of stdout so that two runs print the same
        print(f"{header} Total time: {datetime.timedelta(seconds=int(total_time))}", file=sys.stderr)


def collate_fn(batch):
    return tuple(zip(*batch))


def get_world_size():
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return 1
    return torch.distributed.get_world_size()


def is_main_process():
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return True
    return torch.distributed.get_rank() == 0


def save_on_master(*args, **kwargs):
    if is_main_process():
        torch.save(*args, **kwargs)


def reduce_dict(input_dict, average=True):
    world_size = get_world_size()
    if world_size < 2:
        return input_dict
    with torch.no_grad():
        names = sorted(input_dict.keys())
        values = torch.stack([input_dict[k] for k in names], dim=0)
        torch.distributed.all_reduce(values)
        if average:
            values /= world_size
        return {k: v for k, v in zip(names, values)}


# ----------------------------------------------------------------------------- transforms.py and the data


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, image, target):
        for t in self.transforms:
            image, target = t(image, target)
        return image, target


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, image, target):
        if torch.rand(1) < self.p:
            image = image.flip(-1)
            width = image.shape[-1]
            boxes = target["boxes"].clone()
            boxes[:, [0, 2]] = width - target["boxes"][:, [2, 0]]
            target["boxes"] = boxes
        return image, target


class SyntheticShapes(torch.utils.data.Dataset):
    """Images of a dark background with 1-3 rectangles; the class is the colour channel that lights up."""

    num_classes = 4  # background + 3

    def __init__(self, n, seed, transforms=None):
        self.n = n
        self.seed = seed
        self.transforms = transforms

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        g = torch.Generator().manual_seed(self.seed * 10007 + idx)
        h = 32 + 8 * int(torch.randint(0, 3, (1,), generator=g))
        w = 32 + 8 * int(torch.randint(0, 3, (1,), generator=g))
        image = torch.rand(3, h, w, generator=g) * 0.15
        boxes, labels = [], []
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            label = int(torch.randint(1, 4, (1,), generator=g))
            bw = int(torch.randint(10, 17, (1,), generator=g))
            bh = int(torch.randint(10, 17, (1,), generator=g))
            x0 = int(torch.randint(0, w - bw, (1,), generator=g))
            y0 = int(torch.randint(0, h - bh, (1,), generator=g))
            image[label - 1, y0 : y0 + bh, x0 : x0 + bw] = 0.9
            boxes.append([x0, y0, x0 + bw, y0 + bh])
            labels.append(label)
        boxes = torch.tensor(boxes, dtype=torch.float32)
        target = {
            "boxes": boxes,
            "labels": torch.tensor(labels, dtype=torch.int64),
            "image_id": torch.tensor(idx),
            "area": (boxes[:, 3] - boxes[:, 1]) * (boxes[:, 2] - boxes[:, 0]),
            "iscrowd": torch.zeros((len(labels),), dtype=torch.int64),
        }
        if self.transforms is not None:
            image, target = self.transforms(image, target)
        return image, target


def get_transform(train):
    return Compose([RandomHorizontalFlip(0.5)]) if train else Compose([])


# ----------------------------------------------------------------------------- the model


class DetectionTransform(nn.Module):
    """Normalize and pad a list of images into one batch, as GeneralizedRCNNTransform does (no resizing)."""

    def __init__(self, image_mean, image_std, size_divisible=8):
        super().__init__()
        self.image_mean = image_mean
        self.image_std = image_std
        self.size_divisible = size_divisible

    def normalize(self, image):
        dtype, device = image.dtype, image.device
        mean = torch.as_tensor(self.image_mean, dtype=dtype, device=device)
        std = torch.as_tensor(self.image_std, dtype=dtype, device=device)
        return (image - mean[:, None, None]) / std[:, None, None]

    def batch_images(self, images):
        max_size = [max(s) for s in zip(*[img.shape for img in images])]
        stride = float(self.size_divisible)
        max_size[1] = int(math.ceil(float(max_size[1]) / stride) * stride)
        max_size[2] = int(math.ceil(float(max_size[2]) / stride) * stride)
        batch_shape = [len(images)] + max_size
        batched_imgs = images[0].new_full(batch_shape, 0)
        for i in range(batched_imgs.shape[0]):
            img = images[i]
            batched_imgs[i, : img.shape[0], : img.shape[1], : img.shape[2]].copy_(img)
        return batched_imgs

    def forward(self, images):
        images = [self.normalize(img) for img in images]
        image_sizes = [tuple(img.shape[-2:]) for img in images]
        return self.batch_images(images), image_sizes


def box_iou(boxes1, boxes2):
    area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])
    area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area1[:, None] + area2 - inter)


def batched_nms(boxes, scores, idxs, iou_threshold):
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    # the coordinate-offset trick of torchvision.ops.batched_nms: boxes of different classes never overlap
    offsets = idxs.to(boxes) * (boxes.max() + 1)
    boxes_for_nms = boxes + offsets[:, None]
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i)
        if order.numel() == 1:
            break
        ious = box_iou(boxes_for_nms[i][None], boxes_for_nms[order[1:]])[0]
        order = order[1:][ious <= iou_threshold]
    return torch.stack(keep)


def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0):
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
    return (alpha_t * loss).sum()


class TinyFCOS(nn.Module):
    """An anchor-free single-level detector: every location inside a box predicts its class and ltrb distances."""

    def __init__(self, num_classes, score_thresh=0.3, nms_thresh=0.5, detections_per_img=20):
        super().__init__()
        self.num_classes = num_classes
        self.stride = 8
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.transform = DetectionTransform([0.1, 0.1, 0.1], [0.3, 0.3, 0.3], size_divisible=self.stride)

        def block(cin, cout, stride):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.GroupNorm(4, cout), nn.ReLU(inplace=True))

        self.backbone = nn.Sequential(block(3, 8, 2), block(8, 16, 2), block(16, 16, 2), block(16, 16, 1))
        self.cls_logits = nn.Conv2d(16, num_classes - 1, 3, 1, 1)
        self.bbox_reg = nn.Conv2d(16, 4, 3, 1, 1)
        nn.init.constant_(self.cls_logits.bias, -math.log((1 - 0.01) / 0.01))

    def locations(self, feature):
        h, w = feature.shape[-2:]
        device = feature.device
        shifts_x = torch.arange(0, w * self.stride, step=self.stride, dtype=torch.float32, device=device)
        shifts_y = torch.arange(0, h * self.stride, step=self.stride, dtype=torch.float32, device=device)
        shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
        return torch.stack((shift_x.reshape(-1), shift_y.reshape(-1)), dim=1) + self.stride // 2

    def compute_loss(self, cls_logits, bbox_reg, locations, targets):
        xs, ys = locations[:, 0], locations[:, 1]
        all_labels, all_reg = [], []
        for t in targets:
            boxes, labels = t["boxes"], t["labels"]
            reg = torch.stack(
                [xs[:, None] - boxes[None, :, 0], ys[:, None] - boxes[None, :, 1],
                 boxes[None, :, 2] - xs[:, None], boxes[None, :, 3] - ys[:, None]], dim=2)
            inside = reg.min(dim=2).values > 0
            area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))[None].expand(len(locations), -1)
            area = torch.where(inside, area, torch.full_like(area, float("inf")))
            min_area, idx = area.min(dim=1)
            reg_t = reg[torch.arange(len(locations), device=reg.device), idx]
            lab = torch.where(torch.isinf(min_area), torch.zeros_like(labels[idx]), labels[idx])
            all_labels.append(lab)
            all_reg.append(reg_t / self.stride)
        labels = torch.stack(all_labels)  # (N, L)
        reg_targets = torch.stack(all_reg)  # (N, L, 4)
        pos = labels > 0
        num_pos = pos.sum().clamp(min=1).float()
        gt_classes = F.one_hot(labels, self.num_classes)[..., 1:].to(cls_logits.dtype)
        loss_cls = sigmoid_focal_loss(cls_logits, gt_classes) / num_pos
        loss_box = F.l1_loss(F.softplus(bbox_reg[pos]), reg_targets[pos], reduction="sum") / num_pos
        return {"loss_classifier": loss_cls, "loss_box_reg": loss_box}

    def postprocess(self, cls_logits, bbox_reg, locations, image_sizes):
        detections = []
        for logits, reg, (h, w) in zip(cls_logits, bbox_reg, image_sizes):
            scores = torch.sigmoid(logits).flatten()
            keep = scores > self.score_thresh
            scores = scores[keep]
            topk = min(100, scores.numel())
            scores, order = scores.topk(topk)
            flat_idx = torch.nonzero(keep).flatten()[order]
            loc_idx = torch.div(flat_idx, self.num_classes - 1, rounding_mode="floor")
            labels = flat_idx % (self.num_classes - 1) + 1
            dist = F.softplus(reg[loc_idx]) * self.stride
            loc = locations[loc_idx]
            boxes = torch.stack([loc[:, 0] - dist[:, 0], loc[:, 1] - dist[:, 1],
                                 loc[:, 0] + dist[:, 2], loc[:, 1] + dist[:, 3]], dim=1)
            boxes[:, 0::2] = boxes[:, 0::2].clamp(min=0, max=w)
            boxes[:, 1::2] = boxes[:, 1::2].clamp(min=0, max=h)
            keep = batched_nms(boxes, scores, labels, self.nms_thresh)[: self.detections_per_img]
            detections.append({"boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep]})
        return detections

    def forward(self, images, targets=None):
        if self.training and targets is None:
            raise ValueError("In training mode, targets should be passed")
        batch, image_sizes = self.transform(images)
        feature = self.backbone(batch)
        n = feature.shape[0]
        cls_logits = self.cls_logits(feature).permute(0, 2, 3, 1).reshape(n, -1, self.num_classes - 1)
        bbox_reg = self.bbox_reg(feature).permute(0, 2, 3, 1).reshape(n, -1, 4)
        locations = self.locations(feature)
        if self.training:
            return self.compute_loss(cls_logits, bbox_reg, locations, targets)
        return self.postprocess(cls_logits, bbox_reg, locations, image_sizes)


# ----------------------------------------------------------------------------- a small stand-in for CocoEvaluator


class BoxAPEvaluator:
    """VOC-style AP at IoU 0.5 per class, averaged; ground truth read from the dataset like get_coco_api_from_dataset."""

    def __init__(self, dataset, num_classes):
        self.num_classes = num_classes
        self.gt = {}
        for i in range(len(dataset)):
            _, target = dataset[i]
            self.gt[int(target["image_id"])] = (target["boxes"], target["labels"])
        self.results = {}

    def update(self, res):
        self.results.update(res)

    def summarize(self):
        aps = []
        for c in range(1, self.num_classes):
            dets, n_gt = [], 0
            for image_id, (gt_boxes, gt_labels) in self.gt.items():
                g = gt_boxes[gt_labels == c]
                n_gt += len(g)
                out = self.results[image_id]
                m = out["labels"] == c
                b, s = out["boxes"][m], out["scores"][m]
                matched = torch.zeros(len(g), dtype=torch.bool)
                for j in s.argsort(descending=True).tolist():
                    tp = False
                    if len(g):
                        ious = box_iou(b[j][None], g)[0]
                        ious[matched] = -1
                        best = int(ious.argmax())
                        if ious[best] >= 0.5:
                            matched[best] = True
                            tp = True
                    dets.append((float(s[j]), tp))
            dets.sort(key=lambda d: -d[0])
            tps = np.cumsum([d[1] for d in dets]) if dets else np.zeros(0)
            recall = tps / max(n_gt, 1)
            precision = tps / np.arange(1, len(dets) + 1) if dets else np.zeros(0)
            ap = 0.0
            for r in np.linspace(0, 1, 11):
                p = precision[recall >= r].max() if (recall >= r).any() else 0.0
                ap += p / 11
            aps.append(ap)
        self.stats = [float(np.mean(aps))] + [float(a) for a in aps]
        print(" Average Precision (AP) @[ IoU=0.50 ] = {:.3f}  per class: {}".format(
            self.stats[0], " ".join(f"{a:.3f}" for a in self.stats[1:])))


# ----------------------------------------------------------------------------- engine.py


def train_one_epoch(model, optimizer, data_loader, device, epoch, print_freq, scaler=None):
    model.train()
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
    header = f"Epoch: [{epoch}]"

    lr_scheduler = None
    if epoch == 0:
        warmup_factor = 1.0 / 1000
        warmup_iters = min(1000, len(data_loader) - 1)

        lr_scheduler = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=warmup_factor, total_iters=warmup_iters
        )

    for images, targets in metric_logger.log_every(data_loader, print_freq, header):
        images = list(image.to(device) for image in images)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
        with torch.cuda.amp.autocast(enabled=scaler is not None):
            loss_dict = model(images, targets)
            losses = sum(loss for loss in loss_dict.values())

        # reduce losses over all GPUs for logging purposes
        loss_dict_reduced = reduce_dict(loss_dict)
        losses_reduced = sum(loss for loss in loss_dict_reduced.values())

        loss_value = losses_reduced.item()

        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value}, stopping training")
            print(loss_dict_reduced)
            sys.exit(1)

        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(losses).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            losses.backward()
            optimizer.step()

        if lr_scheduler is not None:
            lr_scheduler.step()

        metric_logger.update(loss=losses_reduced, **loss_dict_reduced)
        metric_logger.update(lr=optimizer.param_groups[0]["lr"])

    return metric_logger


@torch.inference_mode()
def evaluate(model, data_loader, device):
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cpu_device = torch.device("cpu")
    model.eval()
    metric_logger = MetricLogger(delimiter="  ")
    header = "Test:"

    evaluator = BoxAPEvaluator(data_loader.dataset, SyntheticShapes.num_classes)

    for images, targets in metric_logger.log_every(data_loader, 100, header):
        images = list(img.to(device) for img in images)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        model_time = time.time()
        outputs = model(images)

        outputs = [{k: v.to(cpu_device) for k, v in t.items()} for t in outputs]
        model_time = time.time() - model_time

        res = {target["image_id"].item(): output for target, output in zip(targets, outputs)}
        evaluator_time = time.time()
        evaluator.update(res)
        evaluator_time = time.time() - evaluator_time
        # the reference logs model_time and evaluator_time here; detections are logged so two runs print the same
        metric_logger.update(detections=sum(len(o["boxes"]) for o in outputs))

    evaluator.summarize()
    torch.set_num_threads(n_threads)
    return evaluator


# ----------------------------------------------------------------------------- train.py


def build(args, device):
    dataset = SyntheticShapes(32, seed=1, transforms=get_transform(True))
    dataset_test = SyntheticShapes(8, seed=2, transforms=get_transform(False))
    num_classes = SyntheticShapes.num_classes

    train_sampler = torch.utils.data.RandomSampler(dataset)
    test_sampler = torch.utils.data.SequentialSampler(dataset_test)
    train_batch_sampler = torch.utils.data.BatchSampler(train_sampler, args.batch_size, drop_last=True)

    data_loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=train_batch_sampler, num_workers=args.workers, collate_fn=collate_fn
    )
    data_loader_test = torch.utils.data.DataLoader(
        dataset_test, batch_size=1, sampler=test_sampler, num_workers=args.workers, collate_fn=collate_fn
    )

    model = TinyFCOS(num_classes=num_classes)
    model.to(device)
    model_without_ddp = model

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    scaler = torch.cuda.amp.GradScaler() if args.amp else None
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=args.lr_steps, gamma=args.lr_gamma)
    return data_loader, data_loader_test, model, model_without_ddp, optimizer, scaler, lr_scheduler


def main(args):
    print({k: v for k, v in vars(args).items() if k not in ("output_dir", "resume")})
    device = torch.device(args.device)

    print("Loading data")
    data_loader, data_loader_test, model, model_without_ddp, optimizer, scaler, lr_scheduler = build(args, device)

    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu")
        model_without_ddp.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        lr_scheduler.load_state_dict(checkpoint["lr_scheduler"])
        args.start_epoch = checkpoint["epoch"] + 1
        if args.amp:
            scaler.load_state_dict(checkpoint["scaler"])
        print(f"Resumed from epoch {checkpoint['epoch']}, lr {optimizer.param_groups[0]['lr']:.6f}")

    if args.test_only:
        return evaluate(model, data_loader_test, device=device).stats

    print("Start training")
    stats = None
    for epoch in range(args.start_epoch, args.epochs):
        train_one_epoch(model, optimizer, data_loader, device, epoch, args.print_freq, scaler)
        lr_scheduler.step()
        if args.output_dir:
            checkpoint = {
                "model": model_without_ddp.state_dict(),
                "optimizer": optimizer.state_dict(),
                "lr_scheduler": lr_scheduler.state_dict(),
                "args": vars(args).copy(),
                "epoch": epoch,
            }
            if args.amp:
                checkpoint["scaler"] = scaler.state_dict()
            save_on_master(checkpoint, os.path.join(args.output_dir, f"model_{epoch}.pth"))
            save_on_master(checkpoint, os.path.join(args.output_dir, "checkpoint.pth"))

        # evaluate after every epoch
        stats = evaluate(model, data_loader_test, device=device).stats
    return stats


if __name__ == "__main__":
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    use_cuda = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as output_dir:
        args = SimpleNamespace(
            device="cuda" if use_cuda else "cpu", batch_size=4, epochs=3, workers=2, lr=0.01, momentum=0.9,
            weight_decay=1e-4, lr_steps=[2], lr_gamma=0.1, print_freq=4, output_dir=output_dir, resume="",
            start_epoch=0, test_only=False, amp=use_cuda,
        )
        final_stats = main(args)

        # python train.py --resume output_dir/checkpoint.pth --test-only
        torch.manual_seed(0)
        args_resume = SimpleNamespace(**{**vars(args), "resume": os.path.join(output_dir, "checkpoint.pth"),
                                         "test_only": True, "start_epoch": 0})
        resumed_stats = main(args_resume)
        print("final AP {:.4f}, resumed AP {:.4f}, same: {}".format(
            final_stats[0], resumed_stats[0], final_stats == resumed_stats))
