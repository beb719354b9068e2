"""Trains PointNet part segmentation (PointNetDenseCls with its 3x3 input transform; the optional k x k feature
transform is built only with `--feature_transform`) on synthetic ShapeNet-part "Chair" point clouds, the way
fxia22/pointnet.pytorch's utils/train_segmentation.py does it as module-level script code, benchmarks the per-shape
mIOU, then runs utils/show_seg.py's module-level code: the saved state_dict is loaded without `map_location` into a
fresh classifier left on the host and one shape is segmented.

Modeled on: fxia22/pointnet.pytorch, utils/train_segmentation.py, utils/show_seg.py, pointnet/model.py and
pointnet/dataset.py at commit bafbf401e0af19be3262e448c59313fd2be0e421
(https://github.com/fxia22/pointnet.pytorch/tree/bafbf401e0af19be3262e448c59313fd2be0e421).
Kept: train_segmentation.py as module-level code (argparse `opt`, `opt.manualSeed = random.randint(1, 10000)`, the
two `ShapeNetDataset`s with `class_choice=[opt.class_choice]`, `num_classes = dataset.num_seg_classes`, `os.makedirs`
in a `try`, `PointNetDenseCls(k=num_classes, feature_transform=opt.feature_transform)`, the `opt.model` reload before
the optimizer, Adam + `StepLR` stepped at the top of each epoch, `classifier.cuda()` after the optimizer is built,
`points.transpose(2, 1)` on the host then `points.cuda(), target.cuda()`, `classifier = classifier.train()` /
`.eval()` reassigned inside the loop, `pred.view(-1, num_classes)` against `target.view(-1, 1)[:, 0] - 1`, the
feature-transform regulariser, `pred.data.max(1)[1]`, `.eq(target.data).cpu().sum()` and `.item()`, the test batch
every 10 iterations via `next(enumerate(testdataloader, 0))` with no `no_grad`, `torch.save(classifier.state_dict(),
'%s/seg_model_%s_%d.pth' ...)` each epoch, the mIOU benchmark with `pred_choice.cpu().data.numpy()` and
`target.cpu().data.numpy() - 1`); show_seg.py as module-level code (`d[idx]` on the host, `torch.load(opt.model)`
without `map_location`, `PointNetDenseCls(k=state_dict['conv4.weight'].size()[0])` built and run on the host after
`load_state_dict`, `Variable(point.view(1, ...))`, `pred.data.max(2)[1]`, the colour map indexed with
`seg.numpy() - 1` and `pred_choice.numpy()[0]`); model.py (`STN3d` / `STNkd` with the identity built on the host by
`torch.from_numpy` and moved with `.cuda()` only `if x.is_cuda`, `PointNetfeat`, `PointNetDenseCls`,
`feature_transform_regularizer` with `torch.eye` moved `if trans.is_cuda`); dataset.py's `ShapeNetDataset` (the
synsetoffset2category.txt / shuffled_*_file_list.json / .pts / .seg layout read with `np.loadtxt`, the resample,
centring, unit-sphere scaling, random y-rotation and jitter, num_seg_classes.txt).
Changed to run here: the author's `.cuda()` calls (which fail on a machine without a GPU) are made only when
`torch.cuda.is_available()`; no download: a synthetic ShapeNet-part folder (chairs and tables of box-shaped parts:
seat, back, legs, arms) is written in a temporary folder, and misc/num_seg_classes.txt is read from that folder
rather than from next to dataset.py; `--dataset` and `--model` default to the written folders (the scripts require
them on the command line); show_seg.py's matplotlib `hsv` colour map is a fixed numpy table and its OpenGL
`showpoints` viewer is left out (the colour arrays' shapes are printed instead); tqdm writes to a string buffer.
Shrunk: 2500 points per shape -> 256, layer widths / 8 (64/128/1024 -> 8/16/128 in the encoder, 1088 -> 136 and
512/256/128 -> 64/32/16 in the head, `STNkd(k=8)`), 24 train / 8 test chairs (+ tables filtered out by
class_choice), batch 8, 5 epochs, workers 0. `--feature_transform` keeps the author's default (off), so show_seg.py's
classifier, built without it, loads the saved keys.
"""
from __future__ import print_function

import argparse
import io
import json
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.parallel
import torch.optim as optim
import torch.utils.data
import torch.utils.data as data
from torch.autograd import Variable
from tqdm import tqdm

NPOINTS = 256  # 2500 in the original
ROOT = tempfile.mkdtemp(prefix="shapenet_part_")
CATEGORIES = {"Chair": "03001627", "Table": "04379243"}
PARTS = {"Chair": 4, "Table": 3}


# ---------------------------------------------------------------------------------------------------------------------
# a synthetic shapenetcore_partanno_segmentation_benchmark_v0 folder (replaces scripts/download.sh)
# ---------------------------------------------------------------------------------------------------------------------
def _part_boxes(category, rng):
    w, d = rng.uniform(0.8, 1.2), rng.uniform(0.8, 1.2)
    h = rng.uniform(0.8, 1.2)
    if category == "Chair":  # seat, back, legs, arms
        return [((-w, w), (h - 0.1, h + 0.1), (-d, d)), ((-w, w), (h, 2.4 * h), (d - 0.1, d + 0.1)),
                ((-w, -w + 0.15), (0.0, h), (-d, -d + 0.15)), ((w - 0.3, w), (h, 1.5 * h), (-d, d))]
    return [((-1.5 * w, 1.5 * w), (h - 0.05, h + 0.05), (-d, d)), ((-0.15, 0.15), (0.0, h), (-0.15, 0.15)),
            ((-0.6, 0.6), (0.0, 0.08), (-0.6, 0.6))]


def write_shapenet_part(root, per_split=(24, 8)):
    rng = np.random.RandomState(7)
    with open(os.path.join(root, "synsetoffset2category.txt"), "w") as f:
        for name, synset in CATEGORIES.items():
            f.write("{}\t{}\n".format(name, synset))
    os.makedirs(os.path.join(root, "train_test_split"), exist_ok=True)
    os.makedirs(os.path.join(root, "misc"), exist_ok=True)
    with open(os.path.join(root, "misc", "num_seg_classes.txt"), "w") as f:
        for name in CATEGORIES:
            f.write("{}\t{}\n".format(name, PARTS[name]))
    for split, count in zip(("train", "test"), per_split):
        files = []
        for name, synset in CATEGORIES.items():
            os.makedirs(os.path.join(root, synset, "points"), exist_ok=True)
            os.makedirs(os.path.join(root, synset, "points_label"), exist_ok=True)
            for i in range(count):
                uuid = "{}_{}_{:04d}".format(split, name.lower(), i)
                pts, seg = [], []
                for part, box in enumerate(_part_boxes(name, rng)):
                    n = rng.randint(60, 120)
                    pts.append(np.stack([rng.uniform(lo, hi, n) for lo, hi in box], 1))
                    seg.append(np.full(n, part + 1))
                np.savetxt(os.path.join(root, synset, "points", uuid + ".pts"), np.concatenate(pts), fmt="%.5f")
                np.savetxt(os.path.join(root, synset, "points_label", uuid + ".seg"), np.concatenate(seg), fmt="%d")
                files.append("shape_data/{}/{}".format(synset, uuid))
        random.Random(3).shuffle(files)
        with open(os.path.join(root, "train_test_split", "shuffled_{}_file_list.json".format(split)), "w") as f:
            json.dump(files, f)


write_shapenet_part(ROOT)


# ---------------------------------------------------------------------------------------------------------------------
# pointnet/dataset.py
# ---------------------------------------------------------------------------------------------------------------------
class ShapeNetDataset(data.Dataset):
    def __init__(self,
                 root,
                 npoints=NPOINTS,
                 classification=False,
                 class_choice=None,
                 split='train',
                 data_augmentation=True):
        self.npoints = npoints
        self.root = root
        self.catfile = os.path.join(self.root, 'synsetoffset2category.txt')
        self.cat = {}
        self.data_augmentation = data_augmentation
        self.classification = classification
        self.seg_classes = {}

        with open(self.catfile, 'r') as f:
            for line in f:
                ls = line.strip().split()
                self.cat[ls[0]] = ls[1]
        if not class_choice is None:
            self.cat = {k: v for k, v in self.cat.items() if k in class_choice}

        self.id2cat = {v: k for k, v in self.cat.items()}

        self.meta = {}
        splitfile = os.path.join(self.root, 'train_test_split', 'shuffled_{}_file_list.json'.format(split))
        filelist = json.load(open(splitfile, 'r'))
        for item in self.cat:
            self.meta[item] = []

        for file in filelist:
            _, category, uuid = file.split('/')
            if category in self.cat.values():
                self.meta[self.id2cat[category]].append((os.path.join(self.root, category, 'points', uuid+'.pts'),
                                        os.path.join(self.root, category, 'points_label', uuid+'.seg')))

        self.datapath = []
        for item in self.cat:
            for fn in self.meta[item]:
                self.datapath.append((item, fn[0], fn[1]))

        self.classes = dict(zip(sorted(self.cat), range(len(self.cat))))
        print(self.classes)
        with open(os.path.join(self.root, 'misc', 'num_seg_classes.txt'), 'r') as f:
            for line in f:
                ls = line.strip().split()
                self.seg_classes[ls[0]] = int(ls[1])
        self.num_seg_classes = self.seg_classes[list(self.cat.keys())[0]]
        print(self.seg_classes, self.num_seg_classes)

    def __getitem__(self, index):
        fn = self.datapath[index]
        cls = self.classes[self.datapath[index][0]]
        point_set = np.loadtxt(fn[1]).astype(np.float32)
        seg = np.loadtxt(fn[2]).astype(np.int64)

        choice = np.random.choice(len(seg), self.npoints, replace=True)
        #resample
        point_set = point_set[choice, :]

        point_set = point_set - np.expand_dims(np.mean(point_set, axis = 0), 0) # center
        dist = np.max(np.sqrt(np.sum(point_set ** 2, axis = 1)),0)
        point_set = point_set / dist #scale

        if self.data_augmentation:
            theta = np.random.uniform(0,np.pi*2)
            rotation_matrix = np.array([[np.cos(theta), -np.sin(theta)],[np.sin(theta), np.cos(theta)]])
            point_set[:,[0,2]] = point_set[:,[0,2]].dot(rotation_matrix) # random rotation
            point_set += np.random.normal(0, 0.02, size=point_set.shape) # random jitter

        seg = seg[choice]
        point_set = torch.from_numpy(point_set.astype(np.float32))
        seg = torch.from_numpy(seg)
        cls = torch.from_numpy(np.array([cls]).astype(np.int64))

        if self.classification:
            return point_set, cls
        else:
            return point_set, seg

    def __len__(self):
        return len(self.datapath)


# ---------------------------------------------------------------------------------------------------------------------
# pointnet/model.py
# ---------------------------------------------------------------------------------------------------------------------
class STN3d(nn.Module):
    def __init__(self):
        super(STN3d, self).__init__()
        self.conv1 = torch.nn.Conv1d(3, 8, 1)
        self.conv2 = torch.nn.Conv1d(8, 16, 1)
        self.conv3 = torch.nn.Conv1d(16, 128, 1)
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, 9)
        self.relu = nn.ReLU()

        self.bn1 = nn.BatchNorm1d(8)
        self.bn2 = nn.BatchNorm1d(16)
        self.bn3 = nn.BatchNorm1d(128)
        self.bn4 = nn.BatchNorm1d(64)
        self.bn5 = nn.BatchNorm1d(32)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 128)

        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)

        iden = Variable(torch.from_numpy(np.array([1,0,0,0,1,0,0,0,1]).astype(np.float32))).view(1,9).repeat(batchsize,1)
        if x.is_cuda:
            iden = iden.cuda()
        x = x + iden
        x = x.view(-1, 3, 3)
        return x


class STNkd(nn.Module):
    def __init__(self, k=8):
        super(STNkd, self).__init__()
        self.conv1 = torch.nn.Conv1d(k, 8, 1)
        self.conv2 = torch.nn.Conv1d(8, 16, 1)
        self.conv3 = torch.nn.Conv1d(16, 128, 1)
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, k*k)
        self.relu = nn.ReLU()

        self.bn1 = nn.BatchNorm1d(8)
        self.bn2 = nn.BatchNorm1d(16)
        self.bn3 = nn.BatchNorm1d(128)
        self.bn4 = nn.BatchNorm1d(64)
        self.bn5 = nn.BatchNorm1d(32)

        self.k = k

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 128)

        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)

        iden = Variable(torch.from_numpy(np.eye(self.k).flatten().astype(np.float32))).view(1,self.k*self.k).repeat(batchsize,1)
        if x.is_cuda:
            iden = iden.cuda()
        x = x + iden
        x = x.view(-1, self.k, self.k)
        return x


class PointNetfeat(nn.Module):
    def __init__(self, global_feat = True, feature_transform = False):
        super(PointNetfeat, self).__init__()
        self.stn = STN3d()
        self.conv1 = torch.nn.Conv1d(3, 8, 1)
        self.conv2 = torch.nn.Conv1d(8, 16, 1)
        self.conv3 = torch.nn.Conv1d(16, 128, 1)
        self.bn1 = nn.BatchNorm1d(8)
        self.bn2 = nn.BatchNorm1d(16)
        self.bn3 = nn.BatchNorm1d(128)
        self.global_feat = global_feat
        self.feature_transform = feature_transform
        if self.feature_transform:
            self.fstn = STNkd(k=8)

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = x.transpose(2, 1)
        x = torch.bmm(x, trans)
        x = x.transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))

        if self.feature_transform:
            trans_feat = self.fstn(x)
            x = x.transpose(2,1)
            x = torch.bmm(x, trans_feat)
            x = x.transpose(2,1)
        else:
            trans_feat = None

        pointfeat = x
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 128)
        if self.global_feat:
            return x, trans, trans_feat
        else:
            x = x.view(-1, 128, 1).repeat(1, 1, n_pts)
            return torch.cat([x, pointfeat], 1), trans, trans_feat


class PointNetDenseCls(nn.Module):
    def __init__(self, k = 2, feature_transform=False):
        super(PointNetDenseCls, self).__init__()
        self.k = k
        self.feature_transform=feature_transform
        self.feat = PointNetfeat(global_feat=False, feature_transform=feature_transform)
        self.conv1 = torch.nn.Conv1d(136, 64, 1)
        self.conv2 = torch.nn.Conv1d(64, 32, 1)
        self.conv3 = torch.nn.Conv1d(32, 16, 1)
        self.conv4 = torch.nn.Conv1d(16, self.k, 1)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(32)
        self.bn3 = nn.BatchNorm1d(16)

    def forward(self, x):
        batchsize = x.size()[0]
        n_pts = x.size()[2]
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = self.conv4(x)
        x = x.transpose(2,1).contiguous()
        x = F.log_softmax(x.view(-1,self.k), dim=-1)
        x = x.view(batchsize, n_pts, self.k)
        return x, trans, trans_feat


def feature_transform_regularizer(trans):
    d = trans.size()[1]
    batchsize = trans.size()[0]
    I = torch.eye(d)[None, :, :]
    if trans.is_cuda:
        I = I.cuda()
    loss = torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2,1)) - I, dim=(1,2)))
    return loss


# ---------------------------------------------------------------------------------------------------------------------
# utils/train_segmentation.py (module-level script code)
# ---------------------------------------------------------------------------------------------------------------------
parser = argparse.ArgumentParser()
parser.add_argument(
    '--batchSize', type=int, default=8, help='input batch size')
parser.add_argument(
    '--workers', type=int, help='number of data loading workers', default=0)
parser.add_argument(
    '--nepoch', type=int, default=5, help='number of epochs to train for')
parser.add_argument('--outf', type=str, default=os.path.join(ROOT, 'seg'), help='output folder')
parser.add_argument('--model', type=str, default='', help='model path')
parser.add_argument('--dataset', type=str, default=ROOT, help="dataset path")
parser.add_argument('--class_choice', type=str, default='Chair', help="class_choice")
parser.add_argument('--feature_transform', action='store_true', help="use feature transform")

opt = parser.parse_args()
print(opt)

opt.manualSeed = random.randint(1, 10000)  # fix seed
print("Random Seed: ", opt.manualSeed)
random.seed(opt.manualSeed)
torch.manual_seed(opt.manualSeed)

dataset = ShapeNetDataset(
    root=opt.dataset,
    classification=False,
    class_choice=[opt.class_choice])
dataloader = torch.utils.data.DataLoader(
    dataset,
    batch_size=opt.batchSize,
    shuffle=True,
    num_workers=int(opt.workers))

test_dataset = ShapeNetDataset(
    root=opt.dataset,
    classification=False,
    class_choice=[opt.class_choice],
    split='test',
    data_augmentation=False)
testdataloader = torch.utils.data.DataLoader(
    test_dataset,
    batch_size=opt.batchSize,
    shuffle=True,
    num_workers=int(opt.workers))

print(len(dataset), len(test_dataset))
num_classes = dataset.num_seg_classes
print('classes', num_classes)
try:
    os.makedirs(opt.outf)
except OSError:
    pass

blue = lambda x: '\033[94m' + x + '\033[0m'

classifier = PointNetDenseCls(k=num_classes, feature_transform=opt.feature_transform)

if opt.model != '':
    classifier.load_state_dict(torch.load(opt.model))

optimizer = optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999))
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
if torch.cuda.is_available():
    classifier.cuda()

num_batch = len(dataset) / opt.batchSize

for epoch in range(opt.nepoch):
    scheduler.step()
    for i, data in enumerate(dataloader, 0):
        points, target = data
        points = points.transpose(2, 1)
        if torch.cuda.is_available():
            points, target = points.cuda(), target.cuda()
        optimizer.zero_grad()
        classifier = classifier.train()
        pred, trans, trans_feat = classifier(points)
        pred = pred.view(-1, num_classes)
        target = target.view(-1, 1)[:, 0] - 1
        loss = F.nll_loss(pred, target)
        if opt.feature_transform:
            loss += feature_transform_regularizer(trans_feat) * 0.001
        loss.backward()
        optimizer.step()
        pred_choice = pred.data.max(1)[1]
        correct = pred_choice.eq(target.data).cpu().sum()
        print('[%d: %d/%d] train loss: %f accuracy: %f' % (epoch, i, num_batch, loss.item(), correct.item()/float(opt.batchSize * NPOINTS)))

        if i % 10 == 0:
            j, data = next(enumerate(testdataloader, 0))
            points, target = data
            points = points.transpose(2, 1)
            if torch.cuda.is_available():
                points, target = points.cuda(), target.cuda()
            classifier = classifier.eval()
            pred, _, _ = classifier(points)
            pred = pred.view(-1, num_classes)
            target = target.view(-1, 1)[:, 0] - 1
            loss = F.nll_loss(pred, target)
            pred_choice = pred.data.max(1)[1]
            correct = pred_choice.eq(target.data).cpu().sum()
            print('[%d: %d/%d] %s loss: %f accuracy: %f' % (epoch, i, num_batch, blue('test'), loss.item(), correct.item()/float(opt.batchSize * NPOINTS)))

    torch.save(classifier.state_dict(), '%s/seg_model_%s_%d.pth' % (opt.outf, opt.class_choice, epoch))

## benchmark mIOU
shape_ious = []
for i,data in tqdm(enumerate(testdataloader, 0), file=io.StringIO()):
    points, target = data
    points = points.transpose(2, 1)
    if torch.cuda.is_available():
        points, target = points.cuda(), target.cuda()
    classifier = classifier.eval()
    pred, _, _ = classifier(points)
    pred_choice = pred.data.max(2)[1]

    pred_np = pred_choice.cpu().data.numpy()
    target_np = target.cpu().data.numpy() - 1

    for shape_idx in range(target_np.shape[0]):
        parts = range(num_classes)#np.unique(target_np[shape_idx])
        part_ious = []
        for part in parts:
            I = np.sum(np.logical_and(pred_np[shape_idx] == part, target_np[shape_idx] == part))
            U = np.sum(np.logical_or(pred_np[shape_idx] == part, target_np[shape_idx] == part))
            if U == 0:
                iou = 1 #If the union of groundtruth and prediction points is empty, then count part IoU as 1
            else:
                iou = I / float(U)
            part_ious.append(iou)
        shape_ious.append(np.mean(part_ious))

print("mIOU for class {}: {}".format(opt.class_choice, np.mean(shape_ious)))


# ---------------------------------------------------------------------------------------------------------------------
# utils/show_seg.py (module-level script code)
# ---------------------------------------------------------------------------------------------------------------------
parser = argparse.ArgumentParser()

parser.add_argument('--model', type=str, default='%s/seg_model_%s_%d.pth' % (opt.outf, opt.class_choice, opt.nepoch - 1), help='model path')
parser.add_argument('--idx', type=int, default=0, help='model index')
parser.add_argument('--dataset', type=str, default=ROOT, help='dataset path')
parser.add_argument('--class_choice', type=str, default='Chair', help='class choice')

opt = parser.parse_args()
print(opt)

d = ShapeNetDataset(
    root=opt.dataset,
    class_choice=[opt.class_choice],
    split='test',
    data_augmentation=False)

idx = opt.idx

print("model %d/%d" % (idx, len(d)))
point, seg = d[idx]
print(point.size(), seg.size())
point_np = point.numpy()

cmap = np.array([[1.0, 0.0, 0.0], [1.0, 0.6, 0.0], [0.8, 1.0, 0.0], [0.2, 1.0, 0.0], [0.0, 1.0, 0.4],
                 [0.0, 1.0, 1.0], [0.0, 0.4, 1.0], [0.2, 0.0, 1.0], [0.8, 0.0, 1.0], [1.0, 0.0, 0.6]])
gt = cmap[seg.numpy() - 1, :]

state_dict = torch.load(opt.model)
classifier = PointNetDenseCls(k= state_dict['conv4.weight'].size()[0])
classifier.load_state_dict(state_dict)
classifier.eval()

point = point.transpose(1, 0).contiguous()

point = Variable(point.view(1, point.size()[0], point.size()[1]))
pred, _, _ = classifier(point)
pred_choice = pred.data.max(2)[1]
print(pred_choice)

pred_color = cmap[pred_choice.numpy()[0], :]

print("showpoints:", point_np.shape, gt.shape, pred_color.shape)
print("done: part accuracy of shape %d %.3f" % (idx, float((pred_choice.numpy()[0] == seg.numpy() - 1).mean())))
