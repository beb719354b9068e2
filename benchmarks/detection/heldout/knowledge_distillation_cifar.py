"""Knowledge distillation on CIFAR-10-shaped images: train a ResNet-18 teacher, then distil it into a 3-layer CNN.

Modeled on: haitongli/knowledge-distillation-pytorch (train.py, evaluate.py, utils.py, model/net.py, model/resnet.py,
model/data_loader.py, experiments/*/params.json) at commit 9937528f0be0efa979c745174fbcbe9621cea8b7
(https://github.com/haitongli/knowledge-distillation-pytorch/tree/9937528f0be0efa979c745174fbcbe9621cea8b7).
Kept: the ``params.cuda`` device logic (``params.cuda = torch.cuda.is_available()`` after reading params.json,
``torch.cuda.manual_seed(230)`` under it, ``pin_memory=params.cuda`` in the loaders, models built as
``net.Net(params).cuda() if params.cuda else net.Net(params)`` / ``ResNet18().cuda() if params.cuda else ResNet18()``
before their optimizers, the teacher as ``teacher_model.cuda() if params.cuda else teacher_model``); batches moved
with ``.cuda(non_blocking=True)`` under ``if params.cuda:`` and wrapped in ``Variable``; ``train`` and ``train_kd``
with ``model.train()`` and ``teacher_model.eval()``, the teacher's outputs computed under ``torch.no_grad()`` and
moved with ``.cuda(non_blocking=True)`` under the flag; ``loss_fn_kd`` (``KLDivLoss`` on ``log_softmax(outputs / T)``
and ``softmax(teacher_outputs / T)`` scaled by ``alpha * T * T`` plus the hard-label cross entropy); summaries every
``save_summary_steps`` copying outputs and labels with ``.data.cpu().numpy()`` for the numpy ``accuracy`` metric;
``evaluate``/``evaluate_kd`` with ``model.eval()`` (and, as in the original, no ``torch.no_grad()``); ``StepLR``
chosen by ``model_version`` and stepped at the start of each epoch; ``utils.save_checkpoint`` writing ``last.pth.tar``
and copying ``best.pth.tar``; ``utils.load_checkpoint`` using ``torch.load(checkpoint)`` when
``torch.cuda.is_available()`` and otherwise ``map_location=lambda storage, loc: storage``, then ``load_state_dict`` of
the model (and of the optimizer when given); the ``restore_file`` resume path; ``Params`` loaded from and saved to
JSON; metrics JSON files for the best and last weights.
Modernised: ``.cuda(async=True)`` (a syntax error since Python 3.7) is written ``.cuda(non_blocking=True)``, and
``loss.data[0]`` is ``loss.item()``.
Shrunk: 192 training and 64 dev images of 32x32 synthetic ten-class colour patterns in memory instead of downloading
CIFAR-10 (flip augmentation only), a ResNet-18 with widths 8-64 instead of 64-512, a student with ``num_channels`` 4,
batch 32, 3 teacher epochs and 3 distillation epochs, ``params.json`` files written to a temporary experiments folder,
no tqdm or TensorBoard, the two command-line runs (``base_resnet18`` then ``cnn_distill``) made one after the other in
``main``.
"""

import json
import logging
import os
import random
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset


# utils.py
class Params():
    def __init__(self, json_path):
        with open(json_path) as f:
            self.__dict__.update(json.load(f))

    def save(self, json_path):
        with open(json_path, 'w') as f:
            json.dump(self.__dict__, f, indent=4)


class RunningAverage():
    def __init__(self):
        self.steps, self.total = 0, 0

    def update(self, val):
        self.total, self.steps = self.total + val, self.steps + 1

    def __call__(self):
        return self.total / float(self.steps)


def save_dict_to_json(d, json_path):
    with open(json_path, 'w') as f:
        json.dump({k: float(v) for k, v in d.items()}, f, indent=4)


def save_checkpoint(state, is_best, checkpoint):
    filepath = os.path.join(checkpoint, 'last.pth.tar')
    if not os.path.exists(checkpoint):
        os.mkdir(checkpoint)
    torch.save(state, filepath)
    if is_best:
        shutil.copyfile(filepath, os.path.join(checkpoint, 'best.pth.tar'))


def load_checkpoint(checkpoint, model, optimizer=None):
    if not os.path.exists(checkpoint):
        raise FileNotFoundError("File doesn't exist {}".format(checkpoint))
    if torch.cuda.is_available():
        checkpoint = torch.load(checkpoint)
    else:
        # this helps avoid errors when loading single-GPU-trained weights onto CPU-model
        checkpoint = torch.load(checkpoint, map_location=lambda storage, loc: storage)
    model.load_state_dict(checkpoint['state_dict'])
    if optimizer:
        optimizer.load_state_dict(checkpoint['optim_dict'])
    return checkpoint


# model/net.py
class Net(nn.Module):
    def __init__(self, params):
        super(Net, self).__init__()
        self.num_channels = params.num_channels
        c = self.num_channels
        self.conv1, self.bn1 = nn.Conv2d(3, c, 3, stride=1, padding=1), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c * 2, 3, stride=1, padding=1), nn.BatchNorm2d(c * 2)
        self.conv3, self.bn3 = nn.Conv2d(c * 2, c * 4, 3, stride=1, padding=1), nn.BatchNorm2d(c * 4)
        self.fc1, self.fcbn1 = nn.Linear(4 * 4 * c * 4, c * 4), nn.BatchNorm1d(c * 4)
        self.fc2 = nn.Linear(c * 4, 10)
        self.dropout_rate = params.dropout_rate

    def forward(self, s):
        s = F.relu(F.max_pool2d(self.bn1(self.conv1(s)), 2))   # batch_size x c x 16 x 16
        s = F.relu(F.max_pool2d(self.bn2(self.conv2(s)), 2))   # batch_size x 2c x 8 x 8
        s = F.relu(F.max_pool2d(self.bn3(self.conv3(s)), 2))   # batch_size x 4c x 4 x 4
        s = s.view(-1, 4 * 4 * self.num_channels * 4)
        s = F.dropout(F.relu(self.fcbn1(self.fc1(s))), p=self.dropout_rate, training=self.training)
        return self.fc2(s)


def loss_fn(outputs, labels):
    return nn.CrossEntropyLoss()(outputs, labels)


def loss_fn_kd(outputs, labels, teacher_outputs, params):
    alpha = params.alpha
    T = params.temperature
    KD_loss = nn.KLDivLoss()(F.log_softmax(outputs / T, dim=1),
                             F.softmax(teacher_outputs / T, dim=1)) * (alpha * T * T) + \
        F.cross_entropy(outputs, labels) * (1. - alpha)
    return KD_loss


def accuracy(outputs, labels):
    outputs = np.argmax(outputs, axis=1)
    return np.sum(outputs == labels) / float(labels.size)


metrics = {'accuracy': accuracy}


# model/resnet.py
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes))

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, width=8):
        super(ResNet, self).__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, width * 2, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, num_blocks[3], stride=2)
        self.linear = nn.Linear(width * 8 * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        layers = []
        for stride in [stride] + [1] * (num_blocks - 1):
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.avg_pool2d(out, 4)
        return self.linear(out.view(out.size(0), -1))


def ResNet18():
    return ResNet(BasicBlock, [2, 2, 2, 2])


# model/data_loader.py
class SyntheticCIFAR10(Dataset):
    """Class k: a blob at one of ten positions with a class colour, over noise, CIFAR-normalised."""

    mean, std = torch.tensor([0.4914, 0.4822, 0.4465]), torch.tensor([0.247, 0.243, 0.261])

    def __init__(self, n, seed, augment):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(32.), torch.arange(32.), indexing='ij')
        imgs = 0.5 * torch.rand(n, 3, 32, 32, generator=g)
        for i, k in enumerate(self.labels.tolist()):
            cy, cx = 8 + 16 * (k // 5), 4 + 6 * (k % 5)
            blob = torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 18.0)
            colour = torch.tensor([(k * 37 % 10) / 10, (k * 53 % 10) / 10, (k * 71 % 10) / 10])
            imgs[i] = (imgs[i] + blob * colour[:, None, None]).clamp(0, 1)
        self.images = (imgs - self.mean[:, None, None]) / self.std[:, None, None]
        self.augment = augment

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        img = self.images[idx]
        if self.augment and random.random() < 0.5:
            img = img.flip(-2)  # a vertical flip keeps the left/right blob positions informative
        return img, int(self.labels[idx])


def fetch_dataloader(types, params):
    train = types == 'train'
    ds = SyntheticCIFAR10(192, 1, params.augmentation == "yes") if train else SyntheticCIFAR10(64, 2, False)
    return DataLoader(ds, batch_size=params.batch_size, shuffle=train, num_workers=params.num_workers,
                      pin_memory=params.cuda)


# evaluate.py
def evaluate(model, loss_fn, dataloader, metrics, params):
    model.eval()
    summ = []
    for data_batch, labels_batch in dataloader:
        if params.cuda:
            data_batch, labels_batch = data_batch.cuda(non_blocking=True), labels_batch.cuda(non_blocking=True)
        data_batch, labels_batch = Variable(data_batch), Variable(labels_batch)
        output_batch = model(data_batch)
        loss = loss_fn(output_batch, labels_batch)
        output_batch = output_batch.data.cpu().numpy()
        labels_batch = labels_batch.data.cpu().numpy()
        summary_batch = {metric: metrics[metric](output_batch, labels_batch) for metric in metrics}
        summary_batch['loss'] = loss.item()
        summ.append(summary_batch)
    return {metric: np.mean([x[metric] for x in summ]) for metric in summ[0]}


def evaluate_kd(model, dataloader, metrics, params):
    model.eval()
    summ = []
    for i, (data_batch, labels_batch) in enumerate(dataloader):
        if params.cuda:
            data_batch, labels_batch = data_batch.cuda(non_blocking=True), labels_batch.cuda(non_blocking=True)
        data_batch, labels_batch = Variable(data_batch), Variable(labels_batch)
        output_batch = model(data_batch)
        loss = 0.0  # force validation loss to zero to reduce computation time
        output_batch = output_batch.data.cpu().numpy()
        labels_batch = labels_batch.data.cpu().numpy()
        summary_batch = {metric: metrics[metric](output_batch, labels_batch) for metric in metrics}
        summary_batch['loss'] = loss
        summ.append(summary_batch)
    return {metric: np.mean([x[metric] for x in summ]) for metric in summ[0]}


# train.py
def train(model, optimizer, loss_fn, dataloader, metrics, params):
    model.train()
    summ = []
    loss_avg = RunningAverage()
    for i, (train_batch, labels_batch) in enumerate(dataloader):
        if params.cuda:
            train_batch, labels_batch = train_batch.cuda(non_blocking=True), labels_batch.cuda(non_blocking=True)
        train_batch, labels_batch = Variable(train_batch), Variable(labels_batch)
        output_batch = model(train_batch)
        loss = loss_fn(output_batch, labels_batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % params.save_summary_steps == 0:
            output_batch = output_batch.data.cpu().numpy()
            labels_batch = labels_batch.data.cpu().numpy()
            summary_batch = {metric: metrics[metric](output_batch, labels_batch) for metric in metrics}
            summary_batch['loss'] = loss.item()
            summ.append(summary_batch)
        loss_avg.update(loss.item())
    return {metric: np.mean([x[metric] for x in summ]) for metric in summ[0]}


def train_kd(model, teacher_model, optimizer, loss_fn_kd, dataloader, metrics, params):
    model.train()
    teacher_model.eval()
    summ = []
    loss_avg = RunningAverage()
    for i, (train_batch, labels_batch) in enumerate(dataloader):
        if params.cuda:
            train_batch, labels_batch = train_batch.cuda(non_blocking=True), labels_batch.cuda(non_blocking=True)
        train_batch, labels_batch = Variable(train_batch), Variable(labels_batch)
        output_batch = model(train_batch)
        with torch.no_grad():
            output_teacher_batch = teacher_model(train_batch)
        if params.cuda:
            output_teacher_batch = output_teacher_batch.cuda(non_blocking=True)
        loss = loss_fn_kd(output_batch, labels_batch, output_teacher_batch, params)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % params.save_summary_steps == 0:
            output_batch = output_batch.data.cpu().numpy()
            labels_batch = labels_batch.data.cpu().numpy()
            summary_batch = {metric: metrics[metric](output_batch, labels_batch) for metric in metrics}
            summary_batch['loss'] = loss.item()
            summ.append(summary_batch)
        loss_avg.update(loss.item())
    return {metric: np.mean([x[metric] for x in summ]) for metric in summ[0]}


def train_and_evaluate(model, train_dataloader, val_dataloader, optimizer, loss_fn, metrics, params, model_dir,
                       restore_file=None, teacher_model=None):
    """train.py's train_and_evaluate and train_and_evaluate_kd (chosen by whether a teacher is given)."""
    if restore_file is not None:
        restore_path = os.path.join(model_dir, restore_file + '.pth.tar')
        load_checkpoint(restore_path, model, optimizer)
    best_val_acc = 0.0
    if params.model_version in ("resnet18", "resnet18_distill"):
        scheduler = StepLR(optimizer, step_size=150, gamma=0.1)
    elif params.model_version in ("cnn", "cnn_distill"):
        scheduler = StepLR(optimizer, step_size=100, gamma=0.2)
    for epoch in range(params.num_epochs):
        scheduler.step()
        if teacher_model is None:
            train_metrics = train(model, optimizer, loss_fn, train_dataloader, metrics, params)
            val_metrics = evaluate(model, loss_fn, val_dataloader, metrics, params)
        else:
            train_metrics = train_kd(model, teacher_model, optimizer, loss_fn, train_dataloader, metrics, params)
            val_metrics = evaluate_kd(model, val_dataloader, metrics, params)
        val_acc = val_metrics['accuracy']
        is_best = val_acc >= best_val_acc
        save_checkpoint({'epoch': epoch + 1, 'state_dict': model.state_dict(), 'optim_dict': optimizer.state_dict()},
                        is_best=is_best, checkpoint=model_dir)
        if is_best:
            best_val_acc = val_acc
            save_dict_to_json(val_metrics, os.path.join(model_dir, "metrics_val_best_weights.json"))
        save_dict_to_json(val_metrics, os.path.join(model_dir, "metrics_val_last_weights.json"))
        print("{} epoch {}: train loss {:.4f} acc {:.3f} ; val acc {:.3f}".format(
            params.model_version, epoch + 1, train_metrics['loss'], train_metrics['accuracy'], val_acc))


def run(model_dir, restore_file=None):
    params = Params(os.path.join(model_dir, 'params.json'))
    # use GPU if available
    params.cuda = torch.cuda.is_available()
    random.seed(230)
    torch.manual_seed(230)
    if params.cuda:
        torch.cuda.manual_seed(230)

    train_dl = fetch_dataloader('train', params)
    dev_dl = fetch_dataloader('dev', params)

    if "distill" in params.model_version:
        model = Net(params).cuda() if params.cuda else Net(params)
        optimizer = optim.Adam(model.parameters(), lr=params.learning_rate)
        teacher_model = ResNet18()
        teacher_checkpoint = os.path.join(os.path.dirname(model_dir), 'base_resnet18', 'best.pth.tar')
        teacher_model = teacher_model.cuda() if params.cuda else teacher_model
        load_checkpoint(teacher_checkpoint, teacher_model)
        train_and_evaluate(model, train_dl, dev_dl, optimizer, loss_fn_kd, metrics, params, model_dir,
                           restore_file, teacher_model=teacher_model)
    else:
        model = ResNet18().cuda() if params.cuda else ResNet18()
        optimizer = optim.SGD(model.parameters(), lr=params.learning_rate, momentum=0.9, weight_decay=5e-4)
        train_and_evaluate(model, train_dl, dev_dl, optimizer, loss_fn, metrics, params, model_dir, restore_file)
    with open(os.path.join(model_dir, "metrics_val_best_weights.json")) as f:
        print(params.model_version, "best val accuracy:", round(json.load(f)['accuracy'], 4))


def main():
    logging.basicConfig(level=logging.WARNING)
    common = dict(subset_percent=1.0, augmentation="yes", batch_size=32, dropout_rate=0.5, save_summary_steps=2,
                  num_workers=0)
    configs = {
        "base_resnet18": dict(model_version="resnet18", teacher="none", alpha=0.0, temperature=1,
                              learning_rate=0.05, num_epochs=3, num_channels=4, **common),
        "cnn_distill": dict(model_version="cnn_distill", teacher="resnet18", alpha=0.9, temperature=20,
                            learning_rate=3e-3, num_epochs=3, num_channels=4, **common),
    }
    with tempfile.TemporaryDirectory() as experiments:
        for name, cfg in configs.items():
            model_dir = os.path.join(experiments, name)
            os.makedirs(model_dir)
            with open(os.path.join(model_dir, 'params.json'), 'w') as f:
                json.dump(cfg, f, indent=4)
            run(model_dir)
        # resume the distilled student from its last checkpoint for one more epoch
        params = Params(os.path.join(experiments, "cnn_distill", 'params.json'))
        params.num_epochs = 1
        params.save(os.path.join(experiments, "cnn_distill", 'params.json'))
        run(os.path.join(experiments, "cnn_distill"), restore_file='last')


if __name__ == '__main__':
    main()
