"""SimCLR: contrastive pre-training of a ResNet with the InfoNCE loss, then a linear evaluation of the frozen features.

Modeled on: sthalles/SimCLR (run.py, simclr.py, utils.py, models/resnet_simclr.py, data_aug/view_generator.py,
data_aug/contrastive_learning_dataset.py and feature_eval/mini_batch_logistic_regression_evaluator.ipynb) at commit
1848fc934ad844ae630e6c452300433fe99acfd9
(https://github.com/sthalles/SimCLR/tree/1848fc934ad844ae630e6c452300433fe99acfd9).
Kept: the device logic of run.py (``if not args.disable_cuda and torch.cuda.is_available(): args.device =
torch.device('cuda')`` with ``cudnn.deterministic``/``cudnn.benchmark``, else ``args.device = torch.device('cpu')``
and ``args.gpu_index = -1``; the model and the Adam optimizer and ``CosineAnnealingLR`` created on the host, then
``with torch.cuda.device(args.gpu_index):`` around building ``SimCLR`` and training); the ``SimCLR`` trainer class
moving the model with ``kwargs['model'].to(self.args.device)`` and the loss with
``CrossEntropyLoss().to(self.args.device)``; ``info_nce_loss`` building its labels on the host from
``torch.arange(self.args.batch_size)`` and moving them with ``.to(self.args.device)``, the diagonal mask
``torch.eye(..., dtype=torch.bool).to(self.args.device)``, the boolean indexing of the similarity matrix and the
target ``torch.zeros(logits.shape[0], dtype=torch.long).to(self.args.device)``; ``train`` with
``GradScaler(enabled=self.args.fp16_precision)``/``autocast`` from ``torch.cuda.amp``, ``torch.cat(images, dim=0)`` of
the two views then ``.to(self.args.device)``, logging top-1/top-5 from ``accuracy`` (under ``torch.no_grad()``) and
``self.scheduler.get_lr()[0]``, the scheduler stepped only after 10 warm-up epochs, ``save_checkpoint`` of a dict with
``epoch``/``arch``/``state_dict``/``optimizer``; ``ResNetSimCLR`` replacing the backbone's ``fc`` with an MLP head;
the view generator returning a list of ``n_views`` augmentations; loaders with ``pin_memory=True`` and
``drop_last=True``. From the evaluation notebook: ``device = 'cuda' if torch.cuda.is_available() else 'cpu'`` (a
string), ``resnet18(num_classes=10).to(device)``, ``torch.load(..., map_location=device)``, stripping the
``backbone.`` prefix and dropping ``backbone.fc``, ``load_state_dict(strict=False)`` with the ``missing_keys`` check,
freezing all but ``fc``, Adam over all parameters, ``CrossEntropyLoss().to(device)``, batches moved with
``.to(device)``, and a test loop without ``model.eval()`` or ``torch.no_grad()``, as in the notebook.
Shrunk: a torchvision-free ResNet-18 with widths 8-64, 32x32 synthetic ten-class pattern images in memory instead of
STL10/CIFAR-10 (tensor augmentations: random resized crop, flip, colour jitter, grayscale; no Gaussian blur), batch
16, 3 pre-training epochs, 4 linear-evaluation epochs, a stub summary writer in a temporary folder instead of
TensorBoard and YAML, argparse replaced by a constant namespace, no tqdm.
"""

import logging
import os
import tempfile
from types import SimpleNamespace

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)


# models: a small torchvision-style ResNet-18 (BasicBlock, [2, 2, 2, 2]) with an ``fc`` attribute
class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers, num_classes=1000, widths=(8, 16, 32, 64)):
        super().__init__()
        self.inplanes = widths[0]
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(widths[0], layers[0], 1)
        self.layer2 = self._make_layer(widths[1], layers[1], 2)
        self.layer3 = self._make_layer(widths[2], layers[2], 2)
        self.layer4 = self._make_layer(widths[3], layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3], num_classes)

    def _make_layer(self, planes, blocks, stride):
        layers = [BasicBlock(self.inplanes, planes, stride)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(pretrained=False, num_classes=1000):
    return ResNet([2, 2, 2, 2], num_classes=num_classes)


def resnet50(pretrained=False, num_classes=1000):
    return ResNet([3, 4, 6, 3], num_classes=num_classes)


class ResNetSimCLR(nn.Module):
    def __init__(self, base_model, out_dim):
        super().__init__()
        self.resnet_dict = {"resnet18": resnet18(pretrained=False, num_classes=out_dim),
                            "resnet50": resnet50(pretrained=False, num_classes=out_dim)}
        self.backbone = self._get_basemodel(base_model)
        dim_mlp = self.backbone.fc.in_features
        # add mlp projection head
        self.backbone.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.backbone.fc)

    def _get_basemodel(self, model_name):
        try:
            return self.resnet_dict[model_name]
        except KeyError:
            raise ValueError("Invalid backbone architecture. Pass one of: resnet18 or resnet50")

    def forward(self, x):
        return self.backbone(x)


# data_aug: synthetic pattern images, SimCLR augmentations and the view generator
def make_pattern_images(n, size=32, seed=0):
    """Class k: a stripe pattern of orientation k % 5 tinted with one of two colours, plus noise."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 10
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    images = []
    for k in labels.tolist():
        angle = (k % 5) * np.pi / 5
        stripes = torch.sin((xx * np.cos(angle) + yy * np.sin(angle)) * 0.6) * 0.5 + 0.5
        tint = torch.tensor([0.9, 0.3, 0.2]) if k < 5 else torch.tensor([0.2, 0.5, 0.9])
        img = stripes[None] * tint[:, None, None] + 0.15 * torch.rand(3, size, size, generator=g)
        images.append(img.clamp(0, 1))
    return torch.stack(images), labels


class SimCLRTransform:
    """RandomResizedCrop, RandomHorizontalFlip, ColorJitter (p=0.8) and RandomGrayscale (p=0.2) on a tensor."""

    def __init__(self, size, s=1):
        self.size, self.s = size, s

    def __call__(self, img):
        _, h, w = img.shape
        scale = float(np.random.uniform(0.3, 1.0))
        ch, cw = max(4, int(h * scale ** 0.5)), max(4, int(w * scale ** 0.5))
        top, left = np.random.randint(0, h - ch + 1), np.random.randint(0, w - cw + 1)
        img = img[:, top:top + ch, left:left + cw]
        img = F.interpolate(img[None], size=(self.size, self.size), mode="bilinear", align_corners=False)[0]
        if np.random.rand() < 0.5:
            img = img.flip(-1)
        if np.random.rand() < 0.8:
            brightness = 1 + np.random.uniform(-0.8, 0.8) * self.s
            contrast = 1 + np.random.uniform(-0.8, 0.8) * self.s
            img = ((img * brightness - img.mean()) * contrast + img.mean()).clamp(0, 1)
        if np.random.rand() < 0.2:
            img = img.mean(0, keepdim=True).expand(3, -1, -1)
        return img.contiguous()


class ContrastiveLearningViewGenerator(object):
    """Take two random crops of one image as the query and key."""

    def __init__(self, base_transform, n_views=2):
        self.base_transform = base_transform
        self.n_views = n_views

    def __call__(self, x):
        return [self.base_transform(x) for i in range(self.n_views)]


class PatternDataset(Dataset):
    def __init__(self, n, seed, transform=None):
        self.images, self.labels = make_pattern_images(n, seed=seed)
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        img = self.images[idx]
        return (self.transform(img) if self.transform else img), int(self.labels[idx])


class ContrastiveLearningDataset:
    def __init__(self, root_folder):
        self.root_folder = root_folder

    def get_dataset(self, name, n_views):
        assert name in ("cifar10", "stl10"), "invalid dataset"
        return PatternDataset(96, seed=0, transform=ContrastiveLearningViewGenerator(SimCLRTransform(32), n_views))


# utils.py
class SummaryWriter:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.scalars = {}

    def add_scalar(self, tag, value, global_step=None):
        self.scalars.setdefault(tag, []).append((global_step, float(value)))


def save_checkpoint(state, is_best, filename='checkpoint.pth.tar'):
    torch.save(state, filename)


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
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


# simclr.py
class SimCLR(object):

    def __init__(self, *args, **kwargs):
        self.args = kwargs['args']
        self.model = kwargs['model'].to(self.args.device)
        self.optimizer = kwargs['optimizer']
        self.scheduler = kwargs['scheduler']
        self.writer = SummaryWriter(self.args.log_dir)
        self.criterion = torch.nn.CrossEntropyLoss().to(self.args.device)

    def info_nce_loss(self, features):
        labels = torch.cat([torch.arange(self.args.batch_size) for i in range(self.args.n_views)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        labels = labels.to(self.args.device)

        features = F.normalize(features, dim=1)
        similarity_matrix = torch.matmul(features, features.T)

        # discard the main diagonal from both: labels and similarities matrix
        mask = torch.eye(labels.shape[0], dtype=torch.bool).to(self.args.device)
        labels = labels[~mask].view(labels.shape[0], -1)
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)

        # select and combine multiple positives, then the negatives
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)

        logits = torch.cat([positives, negatives], dim=1)
        labels = torch.zeros(logits.shape[0], dtype=torch.long).to(self.args.device)
        logits = logits / self.args.temperature
        return logits, labels

    def train(self, train_loader):
        scaler = GradScaler(enabled=self.args.fp16_precision)
        n_iter = 0
        logging.info(f"Start SimCLR training for {self.args.epochs} epochs.")

        for epoch_counter in range(self.args.epochs):
            for images, _ in train_loader:
                images = torch.cat(images, dim=0)
                images = images.to(self.args.device)

                with autocast(enabled=self.args.fp16_precision):
                    features = self.model(images)
                    logits, labels = self.info_nce_loss(features)
                    loss = self.criterion(logits, labels)

                self.optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(self.optimizer)
                scaler.update()

                if n_iter % self.args.log_every_n_steps == 0:
                    top1, top5 = accuracy(logits, labels, topk=(1, 5))
                    self.writer.add_scalar('loss', loss, global_step=n_iter)
                    self.writer.add_scalar('acc/top1', top1[0], global_step=n_iter)
                    self.writer.add_scalar('acc/top5', top5[0], global_step=n_iter)
                    self.writer.add_scalar('learning_rate', self.scheduler.get_lr()[0], global_step=n_iter)
                n_iter += 1

            # warmup for the first 10 epochs
            if epoch_counter >= 10:
                self.scheduler.step()
            print(f"Epoch: {epoch_counter}\tLoss: {loss.item():.4f}\tTop1 accuracy: {top1[0].item():.2f}")

        checkpoint_name = 'checkpoint_{:04d}.pth.tar'.format(self.args.epochs)
        save_checkpoint({
            'epoch': self.args.epochs,
            'arch': self.args.arch,
            'state_dict': self.model.state_dict(),
            'optimizer': self.optimizer.state_dict(),
        }, is_best=False, filename=os.path.join(self.writer.log_dir, checkpoint_name))
        return os.path.join(self.writer.log_dir, checkpoint_name)


# run.py
def main(log_dir):
    args = SimpleNamespace(data='./datasets', dataset_name='cifar10', arch='resnet18', workers=0, epochs=3,
                           batch_size=16, lr=0.0003, weight_decay=1e-4, seed=None, disable_cuda=False,
                           fp16_precision=False, out_dim=32, log_every_n_steps=2, temperature=0.07, n_views=2,
                           gpu_index=0, log_dir=log_dir)
    assert args.n_views == 2, "Only two view training is supported. Please use --n-views 2."
    # check if gpu training is available
    if not args.disable_cuda and torch.cuda.is_available():
        args.device = torch.device('cuda')
        cudnn.deterministic = True
        cudnn.benchmark = True
    else:
        args.device = torch.device('cpu')
        args.gpu_index = -1

    dataset = ContrastiveLearningDataset(args.data)
    train_dataset = dataset.get_dataset(args.dataset_name, args.n_views)
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=True,
        num_workers=args.workers, pin_memory=True, drop_last=True)

    model = ResNetSimCLR(base_model=args.arch, out_dim=args.out_dim)
    optimizer = torch.optim.Adam(model.parameters(), args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(train_loader), eta_min=0,
                                                           last_epoch=-1)

    #  It's a no-op if the 'gpu_index' argument is a negative integer or None.
    with torch.cuda.device(args.gpu_index):
        simclr = SimCLR(model=model, optimizer=optimizer, scheduler=scheduler, args=args)
        return simclr.train(train_loader)


# feature_eval/mini_batch_logistic_regression_evaluator.ipynb
def linear_evaluation(checkpoint_path):
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    print("Using device:", device)

    train_loader = DataLoader(PatternDataset(80, seed=1), batch_size=16, num_workers=0, drop_last=False,
                              shuffle=False)
    test_loader = DataLoader(PatternDataset(40, seed=2), batch_size=2 * 16, num_workers=0, drop_last=False,
                             shuffle=False)

    model = resnet18(pretrained=False, num_classes=10).to(device)
    checkpoint = torch.load(checkpoint_path, map_location=device)
    state_dict = checkpoint['state_dict']
    for k in list(state_dict.keys()):
        if k.startswith('backbone.'):
            if k.startswith('backbone') and not k.startswith('backbone.fc'):
                # remove prefix
                state_dict[k[len("backbone."):]] = state_dict[k]
        del state_dict[k]
    log = model.load_state_dict(state_dict, strict=False)
    assert log.missing_keys == ['fc.weight', 'fc.bias']

    # freeze all layers but the last fc
    for name, param in model.named_parameters():
        if name not in ['fc.weight', 'fc.bias']:
            param.requires_grad = False
    parameters = list(filter(lambda p: p.requires_grad, model.parameters()))
    assert len(parameters) == 2  # fc.weight, fc.bias

    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=0.0008)
    criterion = torch.nn.CrossEntropyLoss().to(device)

    epochs = 4
    for epoch in range(epochs):
        top1_train_accuracy = 0
        for counter, (x_batch, y_batch) in enumerate(train_loader):
            x_batch = x_batch.to(device)
            y_batch = y_batch.to(device)
            logits = model(x_batch)
            loss = criterion(logits, y_batch)
            top1 = accuracy(logits, y_batch, topk=(1,))
            top1_train_accuracy += top1[0]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        top1_train_accuracy /= (counter + 1)

        top1_accuracy = 0
        top5_accuracy = 0
        for counter, (x_batch, y_batch) in enumerate(test_loader):
            x_batch = x_batch.to(device)
            y_batch = y_batch.to(device)
            logits = model(x_batch)
            top1, top5 = accuracy(logits, y_batch, topk=(1, 5))
            top1_accuracy += top1[0]
            top5_accuracy += top5[0]
        top1_accuracy /= (counter + 1)
        top5_accuracy /= (counter + 1)
        print(f"Epoch {epoch}\tTop1 Train accuracy {top1_train_accuracy.item():.2f}\t"
              f"Top1 Test accuracy: {top1_accuracy.item():.2f}\tTop5 test acc: {top5_accuracy.item():.2f}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = main(tmp)
        print("checkpoint:", os.path.basename(ckpt))
        linear_evaluation(ckpt)
