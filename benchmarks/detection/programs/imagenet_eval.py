"""Train a tiny image classifier for a few steps, then validate it with top-1/top-5 accuracy as the ImageNet example.

Modeled on: https://github.com/pytorch/examples (imagenet/main.py: main_worker(), train(), validate(), accuracy(),
AverageMeter).
Kept: the device logic (device = cuda if available, model.to(device), criterion = nn.CrossEntropyLoss().to(device),
DataLoader(pin_memory=True), images/target moved with .to(device, non_blocking=True), model.eval() and
torch.no_grad() in validate(), accuracy() with topk/t()/eq/expand_as on the device, AverageMeter fed loss.item()
and the 1-element accuracy tensors, CUDA events and torch.cuda.synchronize() to time validation when cuda is
available). Shrunk: a two-convolution CNN on synthetic 3x16x16 images of 20 classes, no distributed or
multiprocessing paths, one short training epoch.
"""

import time
from enum import Enum

import torch
import torch.nn as nn
import torch.optim
import torch.utils.data
from torch.utils.data import TensorDataset


class Summary(Enum):
    """Which statistic a meter prints in the final summary."""

    NONE = 0
    AVERAGE = 1
    SUM = 2
    COUNT = 3


class AverageMeter:
    """Computes and stores the average and current value."""

    def __init__(self, name, fmt=":f", summary_type=Summary.AVERAGE):
        self.name = name
        self.fmt = fmt
        self.summary_type = summary_type
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

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)

    def summary(self):
        if self.summary_type is Summary.NONE:
            fmtstr = ""
        elif self.summary_type is Summary.AVERAGE:
            fmtstr = "{name} {avg:.3f}"
        elif self.summary_type is Summary.SUM:
            fmtstr = "{name} {sum:.3f}"
        elif self.summary_type is Summary.COUNT:
            fmtstr = "{name} {count:.3f}"
        else:
            raise ValueError(f"invalid summary type {self.summary_type!r}")
        return fmtstr.format(**self.__dict__)


class ProgressMeter:
    """Prints a batch counter followed by the meters."""

    def __init__(self, num_batches, meters, prefix=""):
        num_digits = len(str(num_batches // 1))
        fmt = "{:" + str(num_digits) + "d}"
        self.batch_fmtstr = "[" + fmt + "/" + fmt.format(num_batches) + "]"
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print("\t".join(entries))

    def display_summary(self):
        entries = [" *"]
        entries += [meter.summary() for meter in self.meters]
        print(" ".join(entries))


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k."""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))

        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


class TinyNet(nn.Module):
    """Two conv-BN-ReLU blocks, global average pooling and a linear classifier."""

    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def make_dataset(n, num_classes, prototypes):
    """Images that are a noisy copy of their class prototype."""
    target = torch.randint(0, num_classes, (n,))
    images = prototypes[target] + 0.8 * torch.randn(n, 3, 16, 16)
    return TensorDataset(images, target)


def train(train_loader, model, criterion, optimizer, epoch, device, print_freq):
    """One training epoch, logging loss and top-1/top-5 accuracy every `print_freq` batches."""
    batch_time = AverageMeter("Time", ":6.3f")
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    top5 = AverageMeter("Acc@5", ":6.2f")
    progress = ProgressMeter(len(train_loader), [batch_time, losses, top1, top5], prefix=f"Epoch: [{epoch}]")

    # switch to train mode
    model.train()

    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        # move data to the same device as model
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)

        # compute output
        output = model(images)
        loss = criterion(output, target)

        # measure accuracy and record loss
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0], images.size(0))
        top5.update(acc5[0], images.size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        if i % print_freq == 0:
            progress.display(i + 1)


def validate(val_loader, model, criterion, device, print_freq):
    """Evaluate without gradients, time it, print the summary and return the top-1 average (a tensor)."""
    batch_time = AverageMeter("Time", ":6.3f", Summary.NONE)
    losses = AverageMeter("Loss", ":.4e", Summary.NONE)
    top1 = AverageMeter("Acc@1", ":6.2f", Summary.AVERAGE)
    top5 = AverageMeter("Acc@5", ":6.2f", Summary.AVERAGE)
    progress = ProgressMeter(len(val_loader), [batch_time, losses, top1, top5], prefix="Test: ")

    # switch to evaluate mode
    model.eval()

    use_cuda = device.type == "cuda"
    if use_cuda:
        start_event = torch.cuda.Event(enable_timing=True)
        end_event = torch.cuda.Event(enable_timing=True)
        start_event.record()
    wall_start = time.perf_counter()

    with torch.no_grad():
        end = time.time()
        for i, (images, target) in enumerate(val_loader):
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)

            # compute output
            output = model(images)
            loss = criterion(output, target)

            # measure accuracy and record loss
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0], images.size(0))
            top5.update(acc5[0], images.size(0))

            # measure elapsed time
            batch_time.update(time.time() - end)
            end = time.time()

            if i % print_freq == 0:
                progress.display(i + 1)

    if use_cuda:
        end_event.record()
        torch.cuda.synchronize()
        elapsed_ms = start_event.elapsed_time(end_event)
    else:
        elapsed_ms = (time.perf_counter() - wall_start) * 1000.0
    print(f"validation took {elapsed_ms:.1f} ms")

    progress.display_summary()
    return top1.avg


def main():
    """Build the model, data and optimizer, train one short epoch and validate."""
    torch.manual_seed(0)
    num_classes = 20
    print_freq = 2

    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

    model = TinyNet(num_classes)
    model = model.to(device)

    # define loss function (criterion), optimizer and learning rate scheduler
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=1e-4)

    prototypes = torch.randn(num_classes, 3, 16, 16)
    train_dataset = make_dataset(128, num_classes, prototypes)
    val_dataset = make_dataset(64, num_classes, prototypes)

    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=32, shuffle=True, num_workers=0, pin_memory=True
    )
    val_loader = torch.utils.data.DataLoader(val_dataset, batch_size=32, shuffle=False, num_workers=0, pin_memory=True)

    train(train_loader, model, criterion, optimizer, 0, device, print_freq)
    acc1 = validate(val_loader, model, criterion, device, print_freq)
    print(f"done acc1={acc1.item():.2f}")


if __name__ == "__main__":
    main()
