"""Trains a SegNet (encoder blocks of conv-BN-ReLU with max-pooling that returns the indices, decoder blocks that
max-unpool with those indices) for semantic segmentation with the config-driven training loop of pytorch-semseg:
iteration-based training with a polynomial LR scheduler stepped every iteration, validation every few iterations
under `torch.no_grad()` with a running confusion matrix (overall/mean/frequency-weighted accuracy, mean IoU), the
best model written as a checkpoint dict; then a second run resumes from that checkpoint, and the validation script
reloads it into a fresh model (stripping the DataParallel "module." prefix) and evaluates with flip averaging.

Modeled on: meetps/pytorch-semseg, train.py, validate.py, ptsemseg/models/segnet.py, ptsemseg/models/utils.py,
ptsemseg/loss/loss.py, ptsemseg/metrics.py, ptsemseg/schedulers/schedulers.py and ptsemseg/utils.py
(https://github.com/meetps/pytorch-semseg/blob/b09daf50db82bb1c901e84848d180596b3a98e8c/train.py,
https://github.com/meetps/pytorch-semseg/blob/master/validate.py,
https://github.com/meetps/pytorch-semseg/tree/master/ptsemseg).

Kept (train.py): `torch.manual_seed` and `torch.cuda.manual_seed` (unconditional) from `cfg.get("seed", 1337)`;
`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`; `get_model(cfg["model"],
n_classes).to(device)` then `torch.nn.DataParallel(model, device_ids=range(torch.cuda.device_count()))`; the optimizer
from the config over the wrapped model's parameters and the scheduler made on it; the resume branch with
`torch.load(cfg["training"]["resume"])` without map_location and `model.load_state_dict(checkpoint["model_state"])`,
`optimizer.load_state_dict(...)`, `scheduler.load_state_dict(...)`, `start_iter = checkpoint["epoch"]`; the loop with
`scheduler.step()` first, `model.train()`, `images.to(device)`, `labels.to(device)`, `loss.item()`; validation with
`model.eval()` and `torch.no_grad()`, `images_val.to(device)`, `labels_val.to(device)`,
`outputs.data.max(1)[1].cpu().numpy()` and `labels_val.data.cpu().numpy()` into `runningScore`, `val_loss.item()`
into the meter; the best-IoU `state = {"epoch", "model_state": model.state_dict(), "optimizer_state",
"scheduler_state", "best_iou"}` written with `torch.save`. Kept (validate.py): the same `device`, the model built
with `.to(device)`, `convert_state_dict(torch.load(args.model_path)["model_state"])`, `model.eval()` and
`model.to(device)` again, `images.to(device)`, the `--eval_flip` branch (`outputs.data.cpu().numpy()`,
`np.copy(images.data.cpu().numpy()[:, :, :, ::-1])`, `torch.from_numpy(...).float().to(device)`), `gt =
labels.numpy()` from the host labels, no `torch.no_grad()`. The loss `cross_entropy2d` (bilinear `F.interpolate`
when the sizes differ, `ignore_index=250`, the deprecated `size_average`), SegNet's `MaxPool2d(2, 2,
return_indices=True)` / `MaxUnpool2d` with `output_size=unpooled_shape`.

Changed for PyTorch >= 2.6: both `torch.load` calls pass `weights_only=False` (the checkpoint holds the numpy
float `best_iou`, which the new default refuses); still no map_location.
Changed to run here: `train(cfg, writer, logger)` and `validate(cfg, args)` get dict configs instead of YAML files;
tensorboardX's SummaryWriter is a stand-in that only keeps the log dir, the logger is a `logging` logger, tqdm is
left out and the Time/Image column is not printed; the dataset loader (VOC) is a synthetic `data.Dataset` of 3x32x32
images with 4 classes of rectangles and a border of ignored (250) pixels, returning
`torch.from_numpy(img).float()` / `torch.from_numpy(lbl).long()` as the loaders' `transform` does; `n_workers` 0.
Shrunk: SegNet's VGG16 widths 64/128/256/512/512 are 4/8/16/32/32, 48 training and 16 validation images, batch 4,
30 iterations (validation every 10), then 10 more after the resume; validate.py reads the
resumed run's best checkpoint. The optimizer in the config is Adam (lr 0.01), one of the config's choices.
"""
import functools
import logging
import os
import random
import tempfile
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import _LRScheduler
from torch.utils import data


# ----------------------------------------------------------------------------- ptsemseg/loader (synthetic)

class SyntheticSegLoader(data.Dataset):
    n_classes = 4

    def __init__(self, root, split="train", is_transform=True, img_size=(32, 32), augmentations=None):
        self.split = split
        self.is_transform = is_transform
        self.img_size = img_size
        self.augmentations = augmentations
        n = 48 if split == "train" else 16
        rng = np.random.RandomState(0 if split == "train" else 1)
        self.items = []
        h, w = img_size
        for _ in range(n):
            img = rng.rand(h, w, 3).astype(np.float32) * 0.2
            lbl = np.zeros((h, w), dtype=np.int32)
            for c in range(1, self.n_classes):
                y0, x0 = rng.randint(0, h - 10), rng.randint(0, w - 10)
                y1, x1 = y0 + rng.randint(5, 12), x0 + rng.randint(5, 12)
                lbl[y0:y1, x0:x1] = c
                img[y0:y1, x0:x1, c - 1] += 0.7
            lbl[0, :] = 250
            lbl[:, 0] = 250
            self.items.append((img, lbl))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        img, lbl = self.items[index]
        if self.is_transform:
            img, lbl = self.transform(img, lbl)
        return img, lbl

    def transform(self, img, lbl):
        img = img.transpose(2, 0, 1)  # NHWC -> NCHW
        img = torch.from_numpy(img.copy()).float()
        lbl = torch.from_numpy(lbl.copy()).long()
        return img, lbl


def get_loader(name):
    return SyntheticSegLoader


# ----------------------------------------------------------------------------- ptsemseg/models

class conv2DBatchNormRelu(nn.Module):
    def __init__(self, in_channels, n_filters, k_size, stride, padding, bias=True, dilation=1, is_batchnorm=True):
        super(conv2DBatchNormRelu, self).__init__()

        conv_mod = nn.Conv2d(int(in_channels), int(n_filters), kernel_size=k_size, padding=padding,
                             stride=stride, bias=bias, dilation=dilation)

        if is_batchnorm:
            self.cbr_unit = nn.Sequential(conv_mod, nn.BatchNorm2d(int(n_filters)), nn.ReLU(inplace=True))
        else:
            self.cbr_unit = nn.Sequential(conv_mod, nn.ReLU(inplace=True))

    def forward(self, inputs):
        outputs = self.cbr_unit(inputs)
        return outputs


class segnetDown2(nn.Module):
    def __init__(self, in_size, out_size):
        super(segnetDown2, self).__init__()
        self.conv1 = conv2DBatchNormRelu(in_size, out_size, 3, 1, 1)
        self.conv2 = conv2DBatchNormRelu(out_size, out_size, 3, 1, 1)
        self.maxpool_with_argmax = nn.MaxPool2d(2, 2, return_indices=True)

    def forward(self, inputs):
        outputs = self.conv1(inputs)
        outputs = self.conv2(outputs)
        unpooled_shape = outputs.size()
        outputs, indices = self.maxpool_with_argmax(outputs)
        return outputs, indices, unpooled_shape


class segnetDown3(nn.Module):
    def __init__(self, in_size, out_size):
        super(segnetDown3, self).__init__()
        self.conv1 = conv2DBatchNormRelu(in_size, out_size, 3, 1, 1)
        self.conv2 = conv2DBatchNormRelu(out_size, out_size, 3, 1, 1)
        self.conv3 = conv2DBatchNormRelu(out_size, out_size, 3, 1, 1)
        self.maxpool_with_argmax = nn.MaxPool2d(2, 2, return_indices=True)

    def forward(self, inputs):
        outputs = self.conv1(inputs)
        outputs = self.conv2(outputs)
        outputs = self.conv3(outputs)
        unpooled_shape = outputs.size()
        outputs, indices = self.maxpool_with_argmax(outputs)
        return outputs, indices, unpooled_shape


class segnetUp2(nn.Module):
    def __init__(self, in_size, out_size):
        super(segnetUp2, self).__init__()
        self.unpool = nn.MaxUnpool2d(2, 2)
        self.conv1 = conv2DBatchNormRelu(in_size, in_size, 3, 1, 1)
        self.conv2 = conv2DBatchNormRelu(in_size, out_size, 3, 1, 1)

    def forward(self, inputs, indices, output_shape):
        outputs = self.unpool(input=inputs, indices=indices, output_size=output_shape)
        outputs = self.conv1(outputs)
        outputs = self.conv2(outputs)
        return outputs


class segnetUp3(nn.Module):
    def __init__(self, in_size, out_size):
        super(segnetUp3, self).__init__()
        self.unpool = nn.MaxUnpool2d(2, 2)
        self.conv1 = conv2DBatchNormRelu(in_size, in_size, 3, 1, 1)
        self.conv2 = conv2DBatchNormRelu(in_size, in_size, 3, 1, 1)
        self.conv3 = conv2DBatchNormRelu(in_size, out_size, 3, 1, 1)

    def forward(self, inputs, indices, output_shape):
        outputs = self.unpool(input=inputs, indices=indices, output_size=output_shape)
        outputs = self.conv1(outputs)
        outputs = self.conv2(outputs)
        outputs = self.conv3(outputs)
        return outputs


class segnet(nn.Module):
    def __init__(self, n_classes=21, in_channels=3, is_unpooling=True, widths=(4, 8, 16, 32, 32)):
        super(segnet, self).__init__()

        self.in_channels = in_channels
        self.is_unpooling = is_unpooling
        w1, w2, w3, w4, w5 = widths

        self.down1 = segnetDown2(self.in_channels, w1)
        self.down2 = segnetDown2(w1, w2)
        self.down3 = segnetDown3(w2, w3)
        self.down4 = segnetDown3(w3, w4)
        self.down5 = segnetDown3(w4, w5)

        self.up5 = segnetUp3(w5, w4)
        self.up4 = segnetUp3(w4, w3)
        self.up3 = segnetUp3(w3, w2)
        self.up2 = segnetUp2(w2, w1)
        self.up1 = segnetUp2(w1, n_classes)

    def forward(self, inputs):

        down1, indices_1, unpool_shape1 = self.down1(inputs)
        down2, indices_2, unpool_shape2 = self.down2(down1)
        down3, indices_3, unpool_shape3 = self.down3(down2)
        down4, indices_4, unpool_shape4 = self.down4(down3)
        down5, indices_5, unpool_shape5 = self.down5(down4)

        up5 = self.up5(down5, indices_5, unpool_shape5)
        up4 = self.up4(up5, indices_4, unpool_shape4)
        up3 = self.up3(up4, indices_3, unpool_shape3)
        up2 = self.up2(up3, indices_2, unpool_shape2)
        up1 = self.up1(up2, indices_1, unpool_shape1)

        return up1


def get_model(model_dict, n_classes, version=None):
    name = model_dict["arch"]
    param_dict = {k: v for k, v in model_dict.items() if k != "arch"}
    if name == "segnet":
        return segnet(n_classes=n_classes, **param_dict)
    raise ValueError("Model {} not available".format(name))


# ----------------------------------------------------------------------------- ptsemseg/loss, optimizers, schedulers

def cross_entropy2d(input, target, weight=None, size_average=True):
    n, c, h, w = input.size()
    nt, ht, wt = target.size()

    # Handle inconsistent size between input and target
    if h != ht and w != wt:  # upsample labels
        input = F.interpolate(input, size=(ht, wt), mode="bilinear", align_corners=True)

    input = input.transpose(1, 2).transpose(2, 3).contiguous().view(-1, c)
    target = target.view(-1)
    loss = F.cross_entropy(input, target, weight=weight, size_average=size_average, ignore_index=250)
    return loss


def get_loss_function(cfg):
    loss_dict = cfg["training"]["loss"]
    loss_params = {k: v for k, v in loss_dict.items() if k != "name"}
    return functools.partial(cross_entropy2d, **loss_params)


def get_optimizer(cfg):
    return {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[cfg["training"]["optimizer"]["name"]]


class PolynomialLR(_LRScheduler):
    def __init__(self, optimizer, max_iter, decay_iter=1, gamma=0.9, last_epoch=-1):
        self.decay_iter = decay_iter
        self.max_iter = max_iter
        self.gamma = gamma
        super(PolynomialLR, self).__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch % self.decay_iter or self.last_epoch % self.max_iter:
            return [base_lr for base_lr in self.base_lrs]
        else:
            factor = (1 - self.last_epoch / float(self.max_iter)) ** self.gamma
            return [base_lr * factor for base_lr in self.base_lrs]


def get_scheduler(optimizer, scheduler_dict):
    s_dict = {k: v for k, v in scheduler_dict.items() if k != "name"}
    return PolynomialLR(optimizer, **s_dict)


# ----------------------------------------------------------------------------- ptsemseg/metrics.py, utils.py

class runningScore(object):
    def __init__(self, n_classes):
        self.n_classes = n_classes
        self.confusion_matrix = np.zeros((n_classes, n_classes))

    def _fast_hist(self, label_true, label_pred, n_class):
        mask = (label_true >= 0) & (label_true < n_class)
        hist = np.bincount(
            n_class * label_true[mask].astype(int) + label_pred[mask], minlength=n_class ** 2
        ).reshape(n_class, n_class)
        return hist

    def update(self, label_trues, label_preds):
        for lt, lp in zip(label_trues, label_preds):
            self.confusion_matrix += self._fast_hist(lt.flatten(), lp.flatten(), self.n_classes)

    def get_scores(self):
        hist = self.confusion_matrix
        acc = np.diag(hist).sum() / hist.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            acc_cls = np.diag(hist) / hist.sum(axis=1)
            acc_cls = np.nanmean(acc_cls)
            iu = np.diag(hist) / (hist.sum(axis=1) + hist.sum(axis=0) - np.diag(hist))
        mean_iu = np.nanmean(iu)
        freq = hist.sum(axis=1) / hist.sum()
        fwavacc = (freq[freq > 0] * iu[freq > 0]).sum()
        cls_iu = dict(zip(range(self.n_classes), iu))

        return (
            {
                "Overall Acc: \t": acc,
                "Mean Acc : \t": acc_cls,
                "FreqW Acc : \t": fwavacc,
                "Mean IoU : \t": mean_iu,
            },
            cls_iu,
        )

    def reset(self):
        self.confusion_matrix = np.zeros((self.n_classes, self.n_classes))


class averageMeter(object):
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


def convert_state_dict(state_dict):
    """Converts a state dict saved from a dataParallel module to normal module state_dict inplace"""
    if not next(iter(state_dict)).startswith("module."):
        return state_dict  # abort if dict is not a DataParallel model_state
    new_state_dict = OrderedDict()
    for k, v in state_dict.items():
        name = k[7:]  # remove `module.`
        new_state_dict[name] = v
    return new_state_dict


class _FileWriter(object):
    def __init__(self, logdir):
        self.logdir = logdir

    def get_logdir(self):
        return self.logdir


class SummaryWriter(object):
    """Stands in for tensorboardX.SummaryWriter: keeps the log dir, drops the scalars."""

    def __init__(self, log_dir):
        os.makedirs(log_dir, exist_ok=True)
        self.file_writer = _FileWriter(log_dir)

    def add_scalar(self, tag, value, step):
        pass


def get_logger(logdir):
    logger = logging.getLogger("ptsemseg")
    logger.handlers = []
    hdlr = logging.FileHandler(os.path.join(logdir, "run.log"))
    hdlr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(hdlr)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger


# ----------------------------------------------------------------------------- train.py

def train(cfg, writer, logger):

    # Setup seeds
    torch.manual_seed(cfg.get("seed", 1337))
    torch.cuda.manual_seed(cfg.get("seed", 1337))
    np.random.seed(cfg.get("seed", 1337))
    random.seed(cfg.get("seed", 1337))

    # Setup device
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    # Setup Dataloader
    data_loader = get_loader(cfg["data"]["dataset"])
    data_path = cfg["data"]["path"]

    t_loader = data_loader(
        data_path,
        is_transform=True,
        split=cfg["data"]["train_split"],
        img_size=(cfg["data"]["img_rows"], cfg["data"]["img_cols"]),
        augmentations=None,
    )

    v_loader = data_loader(
        data_path,
        is_transform=True,
        split=cfg["data"]["val_split"],
        img_size=(cfg["data"]["img_rows"], cfg["data"]["img_cols"]),
    )

    n_classes = t_loader.n_classes
    trainloader = data.DataLoader(
        t_loader,
        batch_size=cfg["training"]["batch_size"],
        num_workers=cfg["training"]["n_workers"],
        shuffle=True,
    )

    valloader = data.DataLoader(
        v_loader, batch_size=cfg["training"]["batch_size"], num_workers=cfg["training"]["n_workers"]
    )

    # Setup Metrics
    running_metrics_val = runningScore(n_classes)

    # Setup Model
    model = get_model(cfg["model"], n_classes).to(device)

    model = torch.nn.DataParallel(model, device_ids=range(torch.cuda.device_count()))

    # Setup optimizer, lr_scheduler and loss function
    optimizer_cls = get_optimizer(cfg)
    optimizer_params = {k: v for k, v in cfg["training"]["optimizer"].items() if k != "name"}

    optimizer = optimizer_cls(model.parameters(), **optimizer_params)
    logger.info("Using optimizer {}".format(optimizer))

    scheduler = get_scheduler(optimizer, cfg["training"]["lr_schedule"])

    loss_fn = get_loss_function(cfg)
    logger.info("Using loss {}".format(loss_fn))

    start_iter = 0
    if cfg["training"]["resume"] is not None:
        if os.path.isfile(cfg["training"]["resume"]):
            logger.info("Loading model and optimizer from checkpoint '{}'".format(cfg["training"]["resume"]))
            checkpoint = torch.load(cfg["training"]["resume"], weights_only=False)
            model.load_state_dict(checkpoint["model_state"])
            optimizer.load_state_dict(checkpoint["optimizer_state"])
            scheduler.load_state_dict(checkpoint["scheduler_state"])
            start_iter = checkpoint["epoch"]
            print("Loaded checkpoint (iter {})".format(checkpoint["epoch"]))
        else:
            logger.info("No checkpoint found at '{}'".format(cfg["training"]["resume"]))

    val_loss_meter = averageMeter()

    best_iou = -100.0
    i = start_iter
    flag = True

    while i <= cfg["training"]["train_iters"] and flag:
        for (images, labels) in trainloader:
            i += 1
            scheduler.step()
            model.train()
            images = images.to(device)
            labels = labels.to(device)

            optimizer.zero_grad()
            outputs = model(images)

            loss = loss_fn(input=outputs, target=labels)

            loss.backward()
            optimizer.step()

            if (i + 1) % cfg["training"]["print_interval"] == 0:
                fmt_str = "Iter [{:d}/{:d}]  Loss: {:.4f}"
                print_str = fmt_str.format(i + 1, cfg["training"]["train_iters"], loss.item())

                print(print_str)
                logger.info(print_str)
                writer.add_scalar("loss/train_loss", loss.item(), i + 1)

            if (i + 1) % cfg["training"]["val_interval"] == 0 or (i + 1) == cfg["training"]["train_iters"]:
                model.eval()
                with torch.no_grad():
                    for i_val, (images_val, labels_val) in enumerate(valloader):
                        images_val = images_val.to(device)
                        labels_val = labels_val.to(device)

                        outputs = model(images_val)
                        val_loss = loss_fn(input=outputs, target=labels_val)

                        pred = outputs.data.max(1)[1].cpu().numpy()
                        gt = labels_val.data.cpu().numpy()

                        running_metrics_val.update(gt, pred)
                        val_loss_meter.update(val_loss.item())

                writer.add_scalar("loss/val_loss", val_loss_meter.avg, i + 1)
                print("Iter %d Loss: %.4f" % (i + 1, val_loss_meter.avg))

                score, class_iou = running_metrics_val.get_scores()
                for k, v in score.items():
                    print(k.strip(), "%.4f" % v)
                    logger.info("{}: {}".format(k, v))
                    writer.add_scalar("val_metrics/{}".format(k), v, i + 1)

                for k, v in class_iou.items():
                    logger.info("{}: {}".format(k, v))
                    writer.add_scalar("val_metrics/cls_{}".format(k), v, i + 1)

                val_loss_meter.reset()
                running_metrics_val.reset()

                if score["Mean IoU : \t"] >= best_iou:
                    best_iou = score["Mean IoU : \t"]
                    state = {
                        "epoch": i + 1,
                        "model_state": model.state_dict(),
                        "optimizer_state": optimizer.state_dict(),
                        "scheduler_state": scheduler.state_dict(),
                        "best_iou": best_iou,
                    }
                    save_path = os.path.join(
                        writer.file_writer.get_logdir(),
                        "{}_{}_best_model.pkl".format(cfg["model"]["arch"], cfg["data"]["dataset"]),
                    )
                    torch.save(state, save_path)

            if (i + 1) == cfg["training"]["train_iters"]:
                flag = False
                break

    return best_iou


# ----------------------------------------------------------------------------- validate.py

def validate(cfg, args):

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    # Setup Dataloader
    data_loader = get_loader(cfg["data"]["dataset"])
    data_path = cfg["data"]["path"]

    loader = data_loader(
        data_path,
        split=cfg["data"]["val_split"],
        is_transform=True,
        img_size=(cfg["data"]["img_rows"], cfg["data"]["img_cols"]),
    )

    n_classes = loader.n_classes

    valloader = data.DataLoader(loader, batch_size=cfg["training"]["batch_size"], num_workers=0)
    running_metrics = runningScore(n_classes)

    # Setup Model

    model = get_model(cfg["model"], n_classes).to(device)
    state = convert_state_dict(torch.load(args["model_path"], weights_only=False)["model_state"])
    model.load_state_dict(state)
    model.eval()
    model.to(device)

    for i, (images, labels) in enumerate(valloader):
        images = images.to(device)

        if args["eval_flip"]:
            outputs = model(images)

            # Flip images in numpy (not support in tensor)
            outputs = outputs.data.cpu().numpy()
            flipped_images = np.copy(images.data.cpu().numpy()[:, :, :, ::-1])
            flipped_images = torch.from_numpy(flipped_images).float().to(device)
            outputs_flipped = model(flipped_images)
            outputs_flipped = outputs_flipped.data.cpu().numpy()
            outputs = (outputs + outputs_flipped[:, :, :, ::-1]) / 2.0

            pred = np.argmax(outputs, axis=1)
        else:
            outputs = model(images)
            pred = outputs.data.max(1)[1].cpu().numpy()

        gt = labels.numpy()
        running_metrics.update(gt, pred)

    score, class_iou = running_metrics.get_scores()

    for k, v in score.items():
        print(k.strip(), "%.4f" % v)

    for i in range(n_classes):
        print(i, "%.4f" % class_iou[i])

    return score["Mean IoU : \t"]


def make_cfg(train_iters, resume):
    return {
        "seed": 1337,
        "model": {"arch": "segnet"},
        "data": {"dataset": "synthvoc", "train_split": "train", "val_split": "val",
                 "img_rows": 32, "img_cols": 32, "path": None},
        "training": {
            "train_iters": train_iters, "batch_size": 4, "val_interval": 10, "n_workers": 0, "print_interval": 3,
            "optimizer": {"name": "adam", "lr": 0.01, "weight_decay": 5e-4},
            "loss": {"name": "cross_entropy", "size_average": True},
            "lr_schedule": {"name": "poly_lr", "max_iter": 60},
            "resume": resume,
        },
    }


if __name__ == "__main__":
    root = tempfile.mkdtemp()
    logdir = os.path.join(root, "runs", "segnet_synthvoc", "1")
    writer = SummaryWriter(log_dir=logdir)
    logger = get_logger(logdir)
    logger.info("Let the games begin")

    best = train(make_cfg(30, None), writer, logger)
    print("best mean IoU %.4f" % best)

    ckpt = os.path.join(logdir, "segnet_synthvoc_best_model.pkl")
    writer2 = SummaryWriter(log_dir=os.path.join(root, "runs", "segnet_synthvoc", "2"))
    best2 = train(make_cfg(40, ckpt), writer2, logger)
    print("resumed best mean IoU %.4f" % best2)

    ckpt2 = os.path.join(writer2.file_writer.get_logdir(), "segnet_synthvoc_best_model.pkl")
    miou = validate(make_cfg(40, None), {"model_path": ckpt2 if os.path.isfile(ckpt2) else ckpt, "eval_flip": True})
    print("done miou=%.4f" % miou)
