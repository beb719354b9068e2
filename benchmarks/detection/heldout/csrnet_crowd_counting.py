"""Trains CSRNet (crowd counting by density-map regression: a VGG-16 front end and a dilated-convolution back end
producing a 1/8-resolution density map whose sum is the head count) on synthetic crowd images the way
leeyeehoo/CSRNet-pytorch's train.py does it: ground-truth density maps made by make_dataset.ipynb's geometry-adaptive
Gaussian kernels, a summed MSE loss, SGD with the step schedule of `adjust_learning_rate`, per-epoch validation by
the mean absolute count error and `save_checkpoint` keeping the best model; a second run resumes from the checkpoint
with `--pre`, and val.ipynb's evaluation then reloads `model_best.pth.tar` and counts the test images.

Modeled on: leeyeehoo/CSRNet-pytorch, train.py, model.py, dataset.py, image.py, utils.py, make_dataset.ipynb and
val.ipynb at commit ed29d895989c188cb913a9503721271c6cf1ab1f
(https://github.com/leeyeehoo/CSRNet-pytorch/tree/ed29d895989c188cb913a9503721271c6cf1ab1f).

Kept: train.py's argparse positionals (`train_json`, `test_json`, `gpu`, `task`, `--pre`) and `main` (the
hard-coded `args` hyper-parameters, `os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu`, `torch.cuda.manual_seed`,
`model.cuda()`, `nn.MSELoss(size_average=False).cuda()`, SGD, the `--pre` resume with `torch.load`, the epoch loop
with `is_best = prec1 < best_prec1` on the device-resident MAE and `save_checkpoint`), `train` (a `listDataset`
loader built every epoch with `seen=model.seen`, `img.cuda()` in a `Variable`, the target made
`target.type(torch.FloatTensor).unsqueeze(0).cuda()`, `loss.item()` into an `AverageMeter`), `validate` (no
`torch.no_grad()` as written, `mae += abs(output.data.sum() - target.sum().type(torch.FloatTensor).cuda())`),
`adjust_learning_rate`, `AverageMeter`; model.py's `CSRNet` (`seen`, front end / back end from `make_layers`,
`_initialize_weights`); dataset.py's `listDataset` (train list repeated 4 times and shuffled); image.py's
`load_data` (the density map shrunk 8x with its sum kept); utils.py's `save_checkpoint` (`torch.save` then
`shutil.copyfile` to `model_best.pth.tar`); make_dataset.ipynb's `gaussian_filter_density` (KD-tree, sigma from the
three nearest heads); val.ipynb's evaluation (`model.cuda()`, `torch.load('model_best.pth.tar')`, the 255-scaled
mean-subtracted image `.cuda()`, `output.detach().cpu().sum().numpy()`).

Changed to run here: every `.cuda()` of the author's (who needs a GPU) is made only when `torch.cuda.is_available()`;
Python 2 -> 3 (`xrange`, print, `dict.items()[i]`); ShanghaiTech is not downloaded: `make_shanghai` draws images of
Gaussian "heads" on textured backgrounds with their head positions, turned into density maps by
`gaussian_filter_density` and saved as `.npy` (instead of .jpg / .h5; PIL, h5py, cv2 and torchvision are not
installed: `cv2.resize(..., INTER_CUBIC) * 64` is an 8x8 sum pooling, `transforms.ToTensor` / `Normalize` are
numpy); the front end is not copied from an ImageNet VGG-16 (no download), it keeps `_initialize_weights`; the
json lists and checkpoints are in a temporary folder (`task` is a path prefix there); argv is given to `main`, and
the `CUDA_VISIBLE_DEVICES` it sets is restored at the end (the checker runs several programs in one process).
Shrunk: the VGG-16 / back-end widths divided by 8 (64..512 -> 8..64); 12 training, 4 validation and 4 test images of
64x64 (an 8x8 density map) instead of ShanghaiTech; 2 epochs + 1 resumed instead of 400, print_freq 30 -> 16,
workers 4 -> 0; the lr schedule's steps [-1, 1, 100, 150] -> [-1, 1, 2, 3].
"""
import argparse
import json
import os
import random
import shutil
import tempfile
import time

import numpy as np
import scipy.ndimage
import scipy.spatial
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.utils.data import Dataset

ROOT = tempfile.mkdtemp(prefix='csrnet_')
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


# ----------------------------------------------------------------------------- make_dataset.ipynb (synthetic)
def gaussian_filter_density(gt):
    density = np.zeros(gt.shape, dtype=np.float32)
    gt_count = np.count_nonzero(gt)
    if gt_count == 0:
        return density
    pts = np.array(list(zip(np.nonzero(gt)[1], np.nonzero(gt)[0])))
    leafsize = 2048
    # build kdtree
    tree = scipy.spatial.KDTree(pts.copy(), leafsize=leafsize)
    # query kdtree
    distances, locations = tree.query(pts, k=4)
    for i, pt in enumerate(pts):
        pt2d = np.zeros(gt.shape, dtype=np.float32)
        pt2d[pt[1], pt[0]] = 1.
        if gt_count > 1:
            sigma = (distances[i][1] + distances[i][2] + distances[i][3]) * 0.1
        else:
            sigma = np.average(np.array(gt.shape)) / 2. / 2.  # case: 1 point
        density += scipy.ndimage.gaussian_filter(pt2d, sigma, mode='constant')
    return density


def make_shanghai(root, seed=9):
    rng = np.random.RandomState(seed)
    lists = {}
    for split, n in (('train', 12), ('val', 4), ('test', 4)):
        os.makedirs(os.path.join(root, split + '_data', 'images'))
        os.makedirs(os.path.join(root, split + '_data', 'ground_truth'))
        paths = []
        for k in range(n):
            img = rng.uniform(0.2, 0.5, (64, 64, 3)) + 0.1 * rng.normal(0, 1, (64, 64, 1))
            k_map = np.zeros((64, 64))
            heads = rng.randint(3, 40)
            yy, xx = np.mgrid[0:64, 0:64]
            for _ in range(heads):
                y, x = rng.randint(2, 62), rng.randint(2, 62)
                img += (0.5 * np.exp(-((yy - y) ** 2 + (xx - x) ** 2) / 3.0))[..., None] * rng.uniform(0.5, 1, 3)
                k_map[y, x] = 1
            path = os.path.join(root, split + '_data', 'images', 'IMG_%d.npy' % (k + 1))
            np.save(path, (np.clip(img, 0, 1) * 255).astype(np.uint8))
            np.save(path.replace('images', 'ground_truth'), gaussian_filter_density(k_map))
            paths.append(path)
        lists[split] = os.path.join(root, 'part_A_%s.json' % split)
        with open(lists[split], 'w') as f:
            json.dump(paths, f)
    return lists


def transform(img):  # transforms.Compose([ToTensor(), Normalize(mean, std)])
    return torch.from_numpy(((img / 255.0 - MEAN) / STD).transpose(2, 0, 1).astype(np.float32))


# ----------------------------------------------------------------------------- image.py, dataset.py
def load_data(img_path, train=True):
    gt_path = img_path.replace('images', 'ground_truth')
    img = np.load(img_path)
    target = np.load(gt_path)
    # cv2.resize(target, (w/8, h/8), interpolation=cv2.INTER_CUBIC) * 64: keep the count at 1/8 resolution
    h, w = target.shape
    target = target.reshape(h // 8, 8, w // 8, 8).mean(axis=(1, 3)) * 64
    return img, target


class listDataset(Dataset):
    def __init__(self, root, shape=None, shuffle=True, transform=None, train=False, seen=0, batch_size=1,
                 num_workers=4):
        if train:
            root = root * 4
        random.shuffle(root)
        self.nSamples = len(root)
        self.lines = root
        self.transform = transform
        self.train = train
        self.shape = shape
        self.seen = seen
        self.batch_size = batch_size
        self.num_workers = num_workers

    def __len__(self):
        return self.nSamples

    def __getitem__(self, index):
        assert index <= len(self), 'index range error'
        img_path = self.lines[index]
        img, target = load_data(img_path, self.train)
        if self.transform is not None:
            img = self.transform(img)
        return img, target


# ----------------------------------------------------------------------------- model.py, utils.py
class CSRNet(nn.Module):
    def __init__(self, load_weights=False):
        super(CSRNet, self).__init__()
        self.seen = 0
        self.frontend_feat = [8, 8, 'M', 16, 16, 'M', 32, 32, 32, 'M', 64, 64, 64]
        self.backend_feat = [64, 64, 64, 32, 16, 8]
        self.frontend = make_layers(self.frontend_feat)
        self.backend = make_layers(self.backend_feat, in_channels=64, dilation=True)
        self.output_layer = nn.Conv2d(8, 1, kernel_size=1)
        if not load_weights:
            self._initialize_weights()  # then the front end is copied from models.vgg16(pretrained=True)

    def forward(self, x):
        x = self.frontend(x)
        x = self.backend(x)
        x = self.output_layer(x)
        return x

    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)


def make_layers(cfg, in_channels=3, batch_norm=False, dilation=False):
    if dilation:
        d_rate = 2
    else:
        d_rate = 1
    layers = []
    for v in cfg:
        if v == 'M':
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=d_rate, dilation=d_rate)
            if batch_norm:
                layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            else:
                layers += [conv2d, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


def save_checkpoint(state, is_best, task_id, filename='checkpoint.pth.tar'):
    torch.save(state, task_id + filename)
    if is_best:
        shutil.copyfile(task_id + filename, task_id + 'model_best.pth.tar')


# ----------------------------------------------------------------------------- train.py
parser = argparse.ArgumentParser(description='PyTorch CSRNet')
parser.add_argument('train_json', metavar='TRAIN', help='path to train json')
parser.add_argument('test_json', metavar='TEST', help='path to test json')
parser.add_argument('--pre', '-p', metavar='PRETRAINED', default=None, type=str, help='path to the pretrained model')
parser.add_argument('gpu', metavar='GPU', type=str, help='GPU id to use.')
parser.add_argument('task', metavar='TASK', type=str, help='task id to use.')


def main(argv, epochs=2):
    global args, best_prec1
    best_prec1 = 1e6
    args = parser.parse_args(argv)
    args.original_lr = 1e-7
    args.lr = 1e-7
    args.batch_size = 1
    args.momentum = 0.95
    args.decay = 5 * 1e-4
    args.start_epoch = 0
    args.epochs = epochs
    args.steps = [-1, 1, 2, 3]
    args.scales = [1, 1, 1, 1]
    args.workers = 0
    args.seed = time.time()
    args.print_freq = 16
    with open(args.train_json, 'r') as outfile:
        train_list = json.load(outfile)
    with open(args.test_json, 'r') as outfile:
        val_list = json.load(outfile)
    os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu
    torch.cuda.manual_seed(args.seed)
    model = CSRNet()
    if torch.cuda.is_available():
        model = model.cuda()
    criterion = nn.MSELoss(size_average=False)
    if torch.cuda.is_available():
        criterion = criterion.cuda()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.decay)
    if args.pre:
        if os.path.isfile(args.pre):
            print("=> loading checkpoint '{}'".format(args.pre))
            checkpoint = torch.load(args.pre)
            args.start_epoch = checkpoint['epoch']
            best_prec1 = checkpoint['best_prec1']
            model.load_state_dict(checkpoint['state_dict'])
            optimizer.load_state_dict(checkpoint['optimizer'])
            print("=> loaded checkpoint '{}' (epoch {})".format(args.pre, checkpoint['epoch']))
        else:
            print("=> no checkpoint found at '{}'".format(args.pre))
    for epoch in range(args.start_epoch, args.epochs):
        adjust_learning_rate(optimizer, epoch)
        train(train_list, model, criterion, optimizer, epoch)
        prec1 = validate(val_list, model, criterion)
        is_best = prec1 < best_prec1
        best_prec1 = min(prec1, best_prec1)
        print(' * best MAE {mae:.3f} '.format(mae=best_prec1))
        save_checkpoint({
            'epoch': epoch + 1,
            'arch': args.pre,
            'state_dict': model.state_dict(),
            'best_prec1': best_prec1,
            'optimizer': optimizer.state_dict(),
        }, is_best, args.task)
    return best_prec1


def train(train_list, model, criterion, optimizer, epoch):
    losses = AverageMeter()
    batch_time = AverageMeter()
    data_time = AverageMeter()
    train_loader = torch.utils.data.DataLoader(
        listDataset(train_list, shuffle=True, transform=transform, train=True, seen=model.seen,
                    batch_size=args.batch_size, num_workers=args.workers),
        batch_size=args.batch_size)
    print('epoch %d, processed %d samples, lr %.10f' % (epoch, epoch * len(train_loader.dataset), args.lr))
    model.train()
    end = time.time()
    for i, (img, target) in enumerate(train_loader):
        data_time.update(time.time() - end)
        if torch.cuda.is_available():
            img = img.cuda()
        img = Variable(img)
        output = model(img)
        target = target.type(torch.FloatTensor).unsqueeze(0)
        if torch.cuda.is_available():
            target = target.cuda()
        target = Variable(target)
        loss = criterion(output, target)
        losses.update(loss.item(), img.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch_time.update(time.time() - end)
        end = time.time()
        if i % args.print_freq == 0:
            print('Epoch: [{0}][{1}/{2}]\t'
                  'Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t'
                  'Data {data_time.val:.3f} ({data_time.avg:.3f})\t'
                  'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                  .format(epoch, i, len(train_loader), batch_time=batch_time, data_time=data_time, loss=losses))


def validate(val_list, model, criterion):
    print('begin test')
    test_loader = torch.utils.data.DataLoader(
        listDataset(val_list, shuffle=False, transform=transform, train=False),
        batch_size=args.batch_size)
    model.eval()
    mae = 0
    for i, (img, target) in enumerate(test_loader):
        if torch.cuda.is_available():
            img = img.cuda()
        img = Variable(img)
        output = model(img)
        target_count = target.sum().type(torch.FloatTensor)
        if torch.cuda.is_available():
            target_count = target_count.cuda()
        mae += abs(output.data.sum() - target_count)
    mae = mae / len(test_loader)
    print(' * MAE {mae:.3f} '.format(mae=mae))
    return mae


def adjust_learning_rate(optimizer, epoch):
    """Sets the learning rate to the initial LR decayed by 10 every 30 epochs"""
    args.lr = args.original_lr
    for i in range(len(args.steps)):
        scale = args.scales[i] if i < len(args.scales) else 1
        if epoch >= args.steps[i]:
            args.lr = args.lr * scale
            if epoch == args.steps[i]:
                break
        else:
            break
    for param_group in optimizer.param_groups:
        param_group['lr'] = args.lr


class AverageMeter(object):
    """Computes and stores the average and current value"""
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


# ----------------------------------------------------------------------------- val.ipynb
def evaluate(img_paths, best_path):
    model = CSRNet()
    if torch.cuda.is_available():
        model = model.cuda()
    checkpoint = torch.load(best_path)
    model.load_state_dict(checkpoint['state_dict'])
    mae = 0
    for i in range(len(img_paths)):
        img = 255.0 * torch.from_numpy(np.load(img_paths[i]).transpose(2, 0, 1).astype(np.float32) / 255.0)
        img[0, :, :] = img[0, :, :] - 92.8207477031
        img[1, :, :] = img[1, :, :] - 95.2757037428
        img[2, :, :] = img[2, :, :] - 104.877445883
        if torch.cuda.is_available():
            img = img.cuda()
        groundtruth = np.load(img_paths[i].replace('images', 'ground_truth'))
        output = model(img.unsqueeze(0))
        mae += abs(output.detach().cpu().sum().numpy() - np.sum(groundtruth))
        print(i, mae)
    print(mae / len(img_paths))
    return mae / len(img_paths)


if __name__ == '__main__':
    saved_visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    try:
        lists = make_shanghai(os.path.join(ROOT, 'part_A_final'))
        task = os.path.join(ROOT, '0')
        main([lists['train'], lists['val'], '0', task], epochs=2)
        best = main([lists['train'], lists['val'], '--pre', task + 'checkpoint.pth.tar', '0', task], epochs=3)
        with open(lists['test']) as f:
            test_mae = evaluate(json.load(f), task + 'model_best.pth.tar')
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)
        if saved_visible is None:  # main() set it for this process
            os.environ.pop('CUDA_VISIBLE_DEVICES', None)
        else:
            os.environ['CUDA_VISIBLE_DEVICES'] = saved_visible
    print('done: best validation MAE %.3f, test MAE %.3f' % (float(best), float(test_mae)))
