"""Trains a CIFAR-100 ResNet-18 the way weiaicunzai/pytorch-cifar100's train.py does it (module-level script code whose
`train` / `eval_training` read the script's globals; a `-gpu` flag that `get_network(args)` and the loops use for
`.cuda()`; warm-up then MultiStepLR; weights saved every SAVE_EPOCH and as `best` after the second milestone), stops,
resumes with `-resume` from the most recent checkpoint folder, then runs test.py's module-level evaluation of the best
weights (`net.load_state_dict(torch.load(args.weights))`, top-1 / top-5 error).

Modeled on: weiaicunzai/pytorch-cifar100, train.py, test.py, utils.py, conf/global_settings.py and models/resnet.py at
commit 11d8418f415b261e4ae3cb1ffe20d06ec95b98e4.
Kept: train.py's `train(epoch)` (`if args.gpu: labels = labels.cuda(); images = images.cuda()`, the last layer's
`para.grad.norm()` device scalars handed to the writer, per-iteration `warmup_scheduler.step()`), `@torch.no_grad()
eval_training` (`correct += preds.eq(labels).sum()` on the device, `torch.cuda.memory_summary()` under `-gpu`, the
device accuracy returned and compared with `best_acc`) and the `__main__` body (argparse, `get_network(args)`, SGD +
`MultiStepLR` + `WarmUpLR`, the resume logic with the folder helpers and `net.load_state_dict(torch.load(
weights_path))` (no `map_location`), `torch.Tensor(1, 3, 32, 32)` moved with `.cuda()` under `-gpu` for `add_graph`,
`train_scheduler.step(epoch)`, best / regular `torch.save(net.state_dict())`); test.py's body (`torch.load(
args.weights)`, `net.eval()`, `image.cuda()` / `label.cuda()` + `memory_summary()` under `-gpu`, `output.topk(5, 1,
largest=True, sorted=True)`, `correct[:, :5].sum()` accumulated on the device); utils.py's `get_network` (`if
args.gpu: net = net.cuda()`), the loaders, `WarmUpLR`, the checkpoint-folder helpers (`most_recent_weights`'
`len(weights_folder)` check as written); global_settings.py; models/resnet.py's `BasicBlock` / `ResNet` / `resnet18`.
Changed to run here: `-gpu` is passed when `torch.cuda.is_available()`; no torchvision: `CIFAR100` is synthetic (class
templates plus noise, 32x32 uint8 HWC) and `transforms` a small stand-in (`RandomRotation(15)` left out); tensorboard's
`SummaryWriter` is a recorder whose `add_graph` keeps the input's device and shape (no trace, so no forward on the
uninitialized tensor); `get_network` keeps only resnet18; settings point into a temporary folder; the first run stops
at EPOCH 2 and the resumed run goes on to EPOCH 4 (settings edited between runs); argv given in code.
Shrunk: widths 64..512 -> 8..64; 192 training / 64 test images over 20 classes; batch 32 (test 16); EPOCH 200 -> 4,
MILESTONES [60, 120, 160] -> [1, 2, 3], SAVE_EPOCH 10 -> 1; workers 0.
"""
import argparse
import datetime
import os
import re
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import _LRScheduler
from torch.utils.data import DataLoader, Dataset

# ------------------------------------------------------------------------------------------ conf/global_settings.py
ROOT = tempfile.mkdtemp(prefix='cifar100_')
settings = SimpleNamespace(
    CIFAR100_TRAIN_MEAN=(0.5070751592371323, 0.48654887331495095, 0.4409178433670343),
    CIFAR100_TRAIN_STD=(0.2673342858792401, 0.2564384629170883, 0.27615047132568404),
    CHECKPOINT_PATH=os.path.join(ROOT, 'checkpoint'),  # directory to save weights file
    EPOCH=2,  # total training epoches (200)
    MILESTONES=[1, 2, 3],  # [60, 120, 160]
    DATE_FORMAT='%A_%d_%B_%Y_%Hh_%Mm_%Ss',
    TIME_NOW=datetime.datetime.now().strftime('%A_%d_%B_%Y_%Hh_%Mm_%Ss'),  # time of we run the script
    LOG_DIR=os.path.join(ROOT, 'runs'),  # tensorboard log dir
    SAVE_EPOCH=1)  # save weights file per SAVE_EPOCH epoch (10)


# ---------------------------------------------------------------------------------------------- models/resnet.py
class BasicBlock(nn.Module):
    """Basic Block for resnet 18 and resnet 34"""
    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        #residual function
        self.residual_function = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels * BasicBlock.expansion, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels * BasicBlock.expansion)
        )
        #shortcut
        self.shortcut = nn.Sequential()
        #the shortcut output dimension is not the same with residual function: use 1*1 convolution
        if stride != 1 or in_channels != BasicBlock.expansion * out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels * BasicBlock.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels * BasicBlock.expansion)
            )

    def forward(self, x):
        return nn.ReLU(inplace=True)(self.residual_function(x) + self.shortcut(x))


class ResNet(nn.Module):

    def __init__(self, block, num_block, num_classes=100, widths=(8, 16, 32, 64)):
        super().__init__()
        self.in_channels = widths[0]
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, widths[0], kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True))
        #we use a different inputsize than the original paper, so conv2_x's stride is 1
        self.conv2_x = self._make_layer(block, widths[0], num_block[0], 1)
        self.conv3_x = self._make_layer(block, widths[1], num_block[1], 2)
        self.conv4_x = self._make_layer(block, widths[2], num_block[2], 2)
        self.conv5_x = self._make_layer(block, widths[3], num_block[3], 2)
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3] * block.expansion, num_classes)

    def _make_layer(self, block, out_channels, num_blocks, stride):
        # the first block could be 1 or 2, other blocks would always be 1
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_channels, out_channels, stride))
            self.in_channels = out_channels * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        output = self.conv1(x)
        output = self.conv2_x(output)
        output = self.conv3_x(output)
        output = self.conv4_x(output)
        output = self.conv5_x(output)
        output = self.avg_pool(output)
        output = output.view(output.size(0), -1)
        output = self.fc(output)
        return output


def resnet18():
    """ return a ResNet 18 object"""
    return ResNet(BasicBlock, [2, 2, 2, 2])


# ------------------------------------------------------------------------ torchvision / tensorboard stand-ins
class transforms(object):
    class Compose(object):
        def __init__(self, ts):
            self.ts = ts

        def __call__(self, img):
            for t in self.ts:
                img = t(img)
            return img

    class RandomCrop(object):
        def __init__(self, size, padding=0):
            self.size, self.padding = size, padding

        def __call__(self, img):
            img = np.pad(img, ((self.padding, self.padding), (self.padding, self.padding), (0, 0)))
            y, x = np.random.randint(0, img.shape[0] - self.size + 1, size=2)
            return img[y:y + self.size, x:x + self.size]

    class RandomHorizontalFlip(object):
        def __call__(self, img):
            return img[:, ::-1] if np.random.rand() < 0.5 else img

    class ToTensor(object):
        def __call__(self, img):
            return torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float().div(255)

    class Normalize(object):
        def __init__(self, mean, std):
            self.mean, self.std = torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

        def __call__(self, tensor):
            return (tensor - self.mean) / self.std


class CIFAR100(Dataset):
    """torchvision.datasets.CIFAR100 stand-in: 32x32 RGB uint8 images from 20 class templates plus noise."""

    def __init__(self, root, train=True, download=False, transform=None):
        rng = np.random.RandomState(0)
        templates = rng.randint(0, 256, size=(20, 4, 4, 3))
        n = 192 if train else 64
        rng = np.random.RandomState(1 if train else 2)
        self.targets = [int(t) for t in rng.randint(0, 20, size=n)]
        self.data = np.clip(np.kron(templates[self.targets], np.ones((1, 8, 8, 1)))
                            + rng.randn(n, 32, 32, 3) * 40, 0, 255).astype(np.uint8)
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.transform(self.data[index]), self.targets[index]


class SummaryWriter(object):
    """torch.utils.tensorboard.SummaryWriter stand-in (tensorboard is not installed): records what it is given."""

    def __init__(self, log_dir):
        os.makedirs(log_dir, exist_ok=True)
        self.scalars, self.graph = [], None

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))

    def add_histogram(self, tag, values, step):
        self.scalars.append((tag, values.detach().norm(), step))

    def add_graph(self, model, input_to_model):
        self.graph = (type(model).__name__, input_to_model.device, tuple(input_to_model.shape))

    def close(self):
        pass


# -------------------------------------------------------------------------------------------------------- utils.py
def get_network(args):
    """ return given network"""
    if args.net == 'resnet18':
        net = resnet18()
    else:
        print('the network name you have entered is not supported yet')
        sys.exit()

    if args.gpu: #use_gpu
        net = net.cuda()

    return net


def get_training_dataloader(mean, std, batch_size=16, num_workers=2, shuffle=True):
    transform_train = transforms.Compose([
        #transforms.ToPILImage(),
        transforms.RandomCrop(32, padding=4),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean, std)
    ])
    cifar100_training = CIFAR100(root='./data', train=True, download=True, transform=transform_train)
    cifar100_training_loader = DataLoader(
        cifar100_training, shuffle=shuffle, num_workers=num_workers, batch_size=batch_size)
    return cifar100_training_loader


def get_test_dataloader(mean, std, batch_size=16, num_workers=2, shuffle=True):
    transform_test = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize(mean, std)
    ])
    cifar100_test = CIFAR100(root='./data', train=False, download=True, transform=transform_test)
    cifar100_test_loader = DataLoader(
        cifar100_test, shuffle=shuffle, num_workers=num_workers, batch_size=batch_size)
    return cifar100_test_loader


class WarmUpLR(_LRScheduler):
    """warmup_training learning rate scheduler"""
    def __init__(self, optimizer, total_iters, last_epoch=-1):
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """we will use the first m batches, and set the learning rate to base_lr * m / total_iters"""
        return [base_lr * self.last_epoch / (self.total_iters + 1e-8) for base_lr in self.base_lrs]


def most_recent_folder(net_weights, fmt):
    # get subfolders in net_weights
    folders = os.listdir(net_weights)
    # filter out empty folders
    folders = [f for f in folders if len(os.listdir(os.path.join(net_weights, f)))]
    if len(folders) == 0:
        return ''
    # sort folders by folder created time
    folders = sorted(folders, key=lambda f: datetime.datetime.strptime(f, fmt))
    return folders[-1]


def most_recent_weights(weights_folder):
    weight_files = os.listdir(weights_folder)
    if len(weights_folder) == 0:
        return ''
    regex_str = r'([A-Za-z0-9]+)-([0-9]+)-(regular|best)'
    # sort files by epoch
    weight_files = sorted(weight_files, key=lambda w: int(re.search(regex_str, w).groups()[1]))
    return weight_files[-1]


def last_epoch(weights_folder):
    weight_file = most_recent_weights(weights_folder)
    if not weight_file:
        raise Exception('no recent weights were found')
    resume_epoch = int(weight_file.split('-')[1])
    return resume_epoch


def best_acc_weights(weights_folder):
    files = os.listdir(weights_folder)
    if len(files) == 0:
        return ''
    regex_str = r'([A-Za-z0-9]+)-([0-9]+)-(regular|best)'
    best_files = [w for w in files if re.search(regex_str, w).groups()[2] == 'best']
    if len(best_files) == 0:
        return ''
    best_files = sorted(best_files, key=lambda w: int(re.search(regex_str, w).groups()[1]))
    return best_files[-1]


# -------------------------------------------------------------------------------------------------------- train.py
def train(epoch):
    start = time.time()
    net.train()
    for batch_index, (images, labels) in enumerate(cifar100_training_loader):
        if args.gpu:
            labels = labels.cuda()
            images = images.cuda()

        optimizer.zero_grad()
        outputs = net(images)
        loss = loss_function(outputs, labels)
        loss.backward()
        optimizer.step()
        n_iter = (epoch - 1) * len(cifar100_training_loader) + batch_index + 1
        last_layer = list(net.children())[-1]
        for name, para in last_layer.named_parameters():
            if 'weight' in name:
                writer.add_scalar('LastLayerGradients/grad_norm2_weights', para.grad.norm(), n_iter)
            if 'bias' in name:
                writer.add_scalar('LastLayerGradients/grad_norm2_bias', para.grad.norm(), n_iter)

        print('Training Epoch: {epoch} [{trained_samples}/{total_samples}]\tLoss: {:0.4f}\tLR: {:0.6f}'.format(
            loss.item(),
            optimizer.param_groups[0]['lr'],
            epoch=epoch,
            trained_samples=batch_index * args.b + len(images),
            total_samples=len(cifar100_training_loader.dataset)
        ))
        #update training loss for each iteration
        writer.add_scalar('Train/loss', loss.item(), n_iter)
        if epoch <= args.warm:
            warmup_scheduler.step()

    for name, param in net.named_parameters():
        layer, attr = os.path.splitext(name)
        attr = attr[1:]
        writer.add_histogram("{}/{}".format(layer, attr), param, epoch)
    finish = time.time()
    print('epoch {} training time consumed: {:.2f}s'.format(epoch, finish - start))


@torch.no_grad()
def eval_training(epoch=0, tb=True):
    start = time.time()
    net.eval()
    test_loss = 0.0 # cost function error
    correct = 0.0
    for (images, labels) in cifar100_test_loader:
        if args.gpu:
            images = images.cuda()
            labels = labels.cuda()
        outputs = net(images)
        loss = loss_function(outputs, labels)
        test_loss += loss.item()
        _, preds = outputs.max(1)
        correct += preds.eq(labels).sum()
    finish = time.time()
    if args.gpu:
        print('GPU INFO.....')
        print(torch.cuda.memory_summary(), end='')
    print('Evaluating Network.....')
    print('Test set: Epoch: {}, Average loss: {:.4f}, Accuracy: {:.4f}, Time consumed:{:.2f}s'.format(
        epoch,
        test_loss / len(cifar100_test_loader.dataset),
        correct.float() / len(cifar100_test_loader.dataset),
        finish - start
    ))
    print()
    #add informations to tensorboard
    if tb:
        writer.add_scalar('Test/Average loss', test_loss / len(cifar100_test_loader.dataset), epoch)
        writer.add_scalar('Test/Accuracy', correct.float() / len(cifar100_test_loader.dataset), epoch)

    return correct.float() / len(cifar100_test_loader.dataset)


if __name__ == '__main__':
    gpu_flag = ['-gpu'] if torch.cuda.is_available() else []
    for run_argv in [['-net', 'resnet18', '-b', '32', '-lr', '0.1'] + gpu_flag,
                     ['-net', 'resnet18', '-b', '32', '-lr', '0.1', '-resume'] + gpu_flag]:
        if '-resume' in run_argv:
            settings.EPOCH = 4  # the cut run is resumed up to the full schedule

        parser = argparse.ArgumentParser()
        parser.add_argument('-net', type=str, required=True, help='net type')
        parser.add_argument('-gpu', action='store_true', default=False, help='use gpu or not')
        parser.add_argument('-b', type=int, default=128, help='batch size for dataloader')
        parser.add_argument('-warm', type=int, default=1, help='warm up training phase')
        parser.add_argument('-lr', type=float, default=0.1, help='initial learning rate')
        parser.add_argument('-resume', action='store_true', default=False, help='resume training')
        args = parser.parse_args(run_argv)

        net = get_network(args)

        #data preprocessing:
        cifar100_training_loader = get_training_dataloader(
            settings.CIFAR100_TRAIN_MEAN,
            settings.CIFAR100_TRAIN_STD,
            num_workers=0,
            batch_size=args.b,
            shuffle=True
        )

        cifar100_test_loader = get_test_dataloader(
            settings.CIFAR100_TRAIN_MEAN,
            settings.CIFAR100_TRAIN_STD,
            num_workers=0,
            batch_size=args.b,
            shuffle=True
        )

        loss_function = nn.CrossEntropyLoss()
        optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
        train_scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=settings.MILESTONES,
                                                         gamma=0.2) #learning rate decay
        iter_per_epoch = len(cifar100_training_loader)
        warmup_scheduler = WarmUpLR(optimizer, iter_per_epoch * args.warm)

        if args.resume:
            recent_folder = most_recent_folder(os.path.join(settings.CHECKPOINT_PATH, args.net),
                                               fmt=settings.DATE_FORMAT)
            if not recent_folder:
                raise Exception('no recent folder were found')

            checkpoint_path = os.path.join(settings.CHECKPOINT_PATH, args.net, recent_folder)
        else:
            checkpoint_path = os.path.join(settings.CHECKPOINT_PATH, args.net, settings.TIME_NOW)

        #use tensorboard
        if not os.path.exists(settings.LOG_DIR):
            os.mkdir(settings.LOG_DIR)

        #since tensorboard can't overwrite old values
        #so the only way is to create a new tensorboard log
        writer = SummaryWriter(log_dir=os.path.join(
                settings.LOG_DIR, args.net, settings.TIME_NOW))
        input_tensor = torch.Tensor(1, 3, 32, 32)
        if args.gpu:
            input_tensor = input_tensor.cuda()
        writer.add_graph(net, input_tensor)

        #create checkpoint folder to save model
        if not os.path.exists(checkpoint_path):
            os.makedirs(checkpoint_path)
        checkpoint_path = os.path.join(checkpoint_path, '{net}-{epoch}-{type}.pth')

        best_acc = 0.0
        if args.resume:
            best_weights = best_acc_weights(os.path.join(settings.CHECKPOINT_PATH, args.net, recent_folder))
            if best_weights:
                weights_path = os.path.join(settings.CHECKPOINT_PATH, args.net, recent_folder, best_weights)
                print('found best acc weights file:{}'.format(weights_path))
                print('load best training file to test acc...')
                net.load_state_dict(torch.load(weights_path))
                best_acc = eval_training(tb=False)
                print('best acc is {:0.2f}'.format(best_acc))

            recent_weights_file = most_recent_weights(os.path.join(settings.CHECKPOINT_PATH, args.net, recent_folder))
            if not recent_weights_file:
                raise Exception('no recent weights file were found')
            weights_path = os.path.join(settings.CHECKPOINT_PATH, args.net, recent_folder, recent_weights_file)
            print('loading weights file {} to resume training.....'.format(weights_path))
            net.load_state_dict(torch.load(weights_path))

            resume_epoch = last_epoch(os.path.join(settings.CHECKPOINT_PATH, args.net, recent_folder))

        for epoch in range(1, settings.EPOCH + 1):
            if epoch > args.warm:
                train_scheduler.step(epoch)

            if args.resume:
                if epoch <= resume_epoch:
                    continue

            train(epoch)
            acc = eval_training(epoch)

            #start to save best performance model after learning rate decay to 0.01
            if epoch > settings.MILESTONES[1] and best_acc < acc:
                weights_path = checkpoint_path.format(net=args.net, epoch=epoch, type='best')
                print('saving weights file to {}'.format(weights_path))
                torch.save(net.state_dict(), weights_path)
                best_acc = acc
                continue

            if not epoch % settings.SAVE_EPOCH:
                weights_path = checkpoint_path.format(net=args.net, epoch=epoch, type='regular')
                print('saving weights file to {}'.format(weights_path))
                torch.save(net.state_dict(), weights_path)

        writer.close()

    # ------------------------------------------------------------------------------------------------------- test.py
    parser = argparse.ArgumentParser()
    parser.add_argument('-net', type=str, required=True, help='net type')
    parser.add_argument('-weights', type=str, required=True, help='the weights file you want to test')
    parser.add_argument('-gpu', action='store_true', default=False, help='use gpu or not')
    parser.add_argument('-b', type=int, default=16, help='batch size for dataloader')
    best_folder = os.path.join(settings.CHECKPOINT_PATH, 'resnet18', recent_folder)
    args = parser.parse_args(['-net', 'resnet18', '-weights', os.path.join(best_folder, best_acc_weights(best_folder))]
                             + gpu_flag)

    net = get_network(args)

    cifar100_test_loader = get_test_dataloader(
        settings.CIFAR100_TRAIN_MEAN,
        settings.CIFAR100_TRAIN_STD,
        #settings.CIFAR100_PATH,
        num_workers=0,
        batch_size=args.b,
    )

    net.load_state_dict(torch.load(args.weights))
    print(net)
    net.eval()

    correct_1 = 0.0
    correct_5 = 0.0
    total = 0

    with torch.no_grad():
        for n_iter, (image, label) in enumerate(cifar100_test_loader):
            print("iteration: {}\ttotal {} iterations".format(n_iter + 1, len(cifar100_test_loader)))

            if args.gpu:
                image = image.cuda()
                label = label.cuda()
                print('GPU INFO.....')
                print(torch.cuda.memory_summary(), end='')

            output = net(image)
            _, pred = output.topk(5, 1, largest=True, sorted=True)

            label = label.view(label.size(0), -1).expand_as(pred)
            correct = pred.eq(label).float()

            #compute top 5
            correct_5 += correct[:, :5].sum()

            #compute top1
            correct_1 += correct[:, :1].sum()

    if args.gpu:
        print('GPU INFO.....')
        print(torch.cuda.memory_summary(), end='')

    print()
    print("Top 1 err: ", 1 - correct_1 / len(cifar100_test_loader.dataset))
    print("Top 5 err: ", 1 - correct_5 / len(cifar100_test_loader.dataset))
    print("Parameter numbers: {}".format(sum(p.numel() for p in net.parameters())))
    print("done")
