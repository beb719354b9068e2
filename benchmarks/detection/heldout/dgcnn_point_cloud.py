"""Trains Wang et al.'s Dynamic Graph CNN (DGCNN, "Dynamic Graph CNN for Learning on Point Clouds") and the PointNet
baseline for point-cloud shape classification, then evaluates the best saved DGCNN, the way WangYueFt/dgcnn's
pytorch/main.py does: ``args.cuda = not args.no_cuda and torch.cuda.is_available()`` picks
``torch.device("cuda" if args.cuda else "cpu")``, the model is built with ``.to(device)`` and wrapped in
``nn.DataParallel`` before SGD/Adam and ``CosineAnnealingLR`` are built, each batch moves with ``data.to(device)``
and ``label.to(device).squeeze()`` and is permuted to (B, 3, N), predictions are read back with
``.detach().cpu().numpy()``, the epoch's test pass runs under ``model.eval()`` without ``torch.no_grad()``, the best
``model.state_dict()`` is saved and `test` reloads it with ``torch.load(args.model_path)`` into a fresh DataParallel
model. `get_graph_feature` builds the k-nearest-neighbour edge features, offsetting the neighbour indices per cloud
with an ``idx_base`` made by ``torch.arange(..., device=device)``.

Modeled on: WangYueFt/dgcnn, pytorch/main.py, pytorch/model.py, pytorch/data.py and pytorch/util.py at commit
f765b469a67730658ba554e97dc11723a7bab628
(https://github.com/WangYueFt/dgcnn/tree/f765b469a67730658ba554e97dc11723a7bab628/pytorch).

Kept: `knn`, `get_graph_feature`, `PointNet` and `DGCNN` (edge convs with shared batch norms, max + average pooled
embedding, dropout head); `cal_loss` with label smoothing (``torch.zeros_like(pred).scatter(...)``) and `IOStream`;
`translate_pointcloud`, `jitter_pointcloud`, `load_data` globbing the per-partition files, `ModelNet40` (shuffles
the points of training clouds); main.py's `_init_`, `train` (DataLoaders with ``drop_last``, SGD at ``lr*100`` or
Adam, ``scheduler.step()`` at the start of each epoch, best-accuracy checkpoint) and `test`; the argparse options,
seeding with ``torch.manual_seed``/``torch.cuda.manual_seed`` and the ``Using GPU``/``Using CPU`` message.

Changed to run here: `get_graph_feature` takes ``device = x.device`` where the original hard-codes
``torch.device('cuda')``; ModelNet40's HDF5 files are replaced by synthetic clouds of eight primitive shapes
(sphere, cube, cylinder, cone, torus, plane, line, helix) written as .npz files to a temporary folder, so there is
no download; sklearn's accuracy and balanced accuracy are small numpy functions; ``cp`` backups become
``shutil.copy``; ``num_workers`` is 0; the checkpoint folder lives in the temporary folder; the script trains PointNet
for one epoch, then DGCNN, then runs the ``--eval`` path on the saved DGCNN.
Shrunk: 128 points per cloud instead of 1024, k=10 instead of 20, emb_dims 128 instead of 1024, 64 training and 32
test clouds, batch 16 / test batch 8, 3 epochs instead of 250.
"""
from __future__ import print_function

import argparse
import glob
import os
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.utils.data import DataLoader, Dataset


# ---------------------------------------------------------------- util.py
def cal_loss(pred, gold, smoothing=True):
    ''' Calculate cross entropy loss, apply label smoothing if needed. '''
    gold = gold.contiguous().view(-1)
    if smoothing:
        eps = 0.2
        n_class = pred.size(1)
        one_hot = torch.zeros_like(pred).scatter(1, gold.view(-1, 1), 1)
        one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (n_class - 1)
        log_prb = F.log_softmax(pred, dim=1)
        loss = -(one_hot * log_prb).sum(dim=1).mean()
    else:
        loss = F.cross_entropy(pred, gold, reduction='mean')
    return loss


class IOStream():
    def __init__(self, path):
        self.f = open(path, 'a')

    def cprint(self, text):
        print(text)
        self.f.write(text + '\n')
        self.f.flush()

    def close(self):
        self.f.close()


def accuracy_score(y_true, y_pred):
    return float(np.mean(y_true == y_pred))


def balanced_accuracy_score(y_true, y_pred):
    return float(np.mean([np.mean(y_pred[y_true == c] == c) for c in np.unique(y_true)]))


# ---------------------------------------------------------------- data.py
def make_shape(kind, n, rng):
    u, v = rng.rand(n), rng.rand(n)
    if kind == 0:  # sphere
        p = rng.randn(n, 3)
        p /= np.linalg.norm(p, axis=1, keepdims=True)
    elif kind == 1:  # cube surface
        p = rng.uniform(-1, 1, (n, 3))
        axis = rng.randint(0, 3, n)
        p[np.arange(n), axis] = np.sign(rng.randn(n))
    elif kind == 2:  # cylinder
        p = np.stack([np.cos(2 * np.pi * u), np.sin(2 * np.pi * u), 2 * v - 1], 1)
    elif kind == 3:  # cone
        p = np.stack([(1 - v) * np.cos(2 * np.pi * u), (1 - v) * np.sin(2 * np.pi * u), 2 * v - 1], 1)
    elif kind == 4:  # torus
        a, b = 2 * np.pi * u, 2 * np.pi * v
        p = np.stack([(1 + 0.4 * np.cos(b)) * np.cos(a), (1 + 0.4 * np.cos(b)) * np.sin(a), 0.4 * np.sin(b)], 1)
    elif kind == 5:  # plane
        p = np.stack([2 * u - 1, 2 * v - 1, np.zeros(n)], 1)
    elif kind == 6:  # line with thickness
        p = np.stack([2 * u - 1, 0.05 * rng.randn(n), 0.05 * rng.randn(n)], 1)
    else:  # helix
        t = 4 * np.pi * u
        p = np.stack([np.cos(t), np.sin(t), t / (2 * np.pi) - 1], 1)
    rot, _ = np.linalg.qr(rng.randn(3, 3))
    return (p @ rot).astype('float32')


def write_synthetic_modelnet(data_dir, n_points, n_train=64, n_test=32, n_classes=8, seed=0):
    """Stand-in for modelnet40_ply_hdf5_2048: one file per chunk with 'data' (N, P, 3) and 'label' (N, 1)."""
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(data_dir, 'modelnet40_ply_hdf5_2048'))
    for partition, n in (('train', n_train), ('test', n_test)):
        for chunk in range(2):
            labels = rng.randint(0, n_classes, size=(n // 2, 1)).astype('int64')
            data = np.stack([make_shape(int(c), n_points, rng) for c in labels[:, 0]])
            np.savez(os.path.join(data_dir, 'modelnet40_ply_hdf5_2048', 'ply_data_%s%d.npz' % (partition, chunk)),
                     data=data, label=labels)


def load_data(data_dir, partition):
    all_data = []
    all_label = []
    for h5_name in sorted(glob.glob(os.path.join(data_dir, 'modelnet40_ply_hdf5_2048', 'ply_data_%s*.npz' % partition))):
        f = np.load(h5_name)
        data = f['data'][:].astype('float32')
        label = f['label'][:].astype('int64')
        all_data.append(data)
        all_label.append(label)
    all_data = np.concatenate(all_data, axis=0)
    all_label = np.concatenate(all_label, axis=0)
    return all_data, all_label


def translate_pointcloud(pointcloud):
    xyz1 = np.random.uniform(low=2. / 3., high=3. / 2., size=[3])
    xyz2 = np.random.uniform(low=-0.2, high=0.2, size=[3])
    translated_pointcloud = np.add(np.multiply(pointcloud, xyz1), xyz2).astype('float32')
    return translated_pointcloud


def jitter_pointcloud(pointcloud, sigma=0.01, clip=0.02):
    N, C = pointcloud.shape
    pointcloud += np.clip(sigma * np.random.randn(N, C), -1 * clip, clip)
    return pointcloud


class ModelNet40(Dataset):
    def __init__(self, num_points, partition='train', data_dir='data'):
        self.data, self.label = load_data(data_dir, partition)
        self.num_points = num_points
        self.partition = partition

    def __getitem__(self, item):
        pointcloud = self.data[item][:self.num_points]
        label = self.label[item]
        if self.partition == 'train':
            pointcloud = translate_pointcloud(pointcloud)
            np.random.shuffle(pointcloud)
        return pointcloud, label

    def __len__(self):
        return self.data.shape[0]


# ---------------------------------------------------------------- model.py
def knn(x, k):
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = torch.sum(x ** 2, dim=1, keepdim=True)
    pairwise_distance = -xx - inner - xx.transpose(2, 1)
    idx = pairwise_distance.topk(k=k, dim=-1)[1]  # (batch_size, num_points, k)
    return idx


def get_graph_feature(x, k=20, idx=None):
    batch_size = x.size(0)
    num_points = x.size(2)
    x = x.view(batch_size, -1, num_points)
    if idx is None:
        idx = knn(x, k=k)  # (batch_size, num_points, k)
    device = x.device

    idx_base = torch.arange(0, batch_size, device=device).view(-1, 1, 1) * num_points
    idx = idx + idx_base
    idx = idx.view(-1)

    _, num_dims, _ = x.size()
    x = x.transpose(2, 1).contiguous()  # (batch_size, num_points, num_dims)
    feature = x.view(batch_size * num_points, -1)[idx, :]
    feature = feature.view(batch_size, num_points, k, num_dims)
    x = x.view(batch_size, num_points, 1, num_dims).repeat(1, 1, k, 1)
    feature = torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()
    return feature


class PointNet(nn.Module):
    def __init__(self, args, output_channels=40):
        super(PointNet, self).__init__()
        self.args = args
        self.conv1 = nn.Conv1d(3, 64, kernel_size=1, bias=False)
        self.conv2 = nn.Conv1d(64, 64, kernel_size=1, bias=False)
        self.conv3 = nn.Conv1d(64, 64, kernel_size=1, bias=False)
        self.conv4 = nn.Conv1d(64, 128, kernel_size=1, bias=False)
        self.conv5 = nn.Conv1d(128, args.emb_dims, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(64)
        self.bn4 = nn.BatchNorm1d(128)
        self.bn5 = nn.BatchNorm1d(args.emb_dims)
        self.linear1 = nn.Linear(args.emb_dims, 512, bias=False)
        self.bn6 = nn.BatchNorm1d(512)
        self.dp1 = nn.Dropout()
        self.linear2 = nn.Linear(512, output_channels)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = F.relu(self.bn4(self.conv4(x)))
        x = F.relu(self.bn5(self.conv5(x)))
        x = F.adaptive_max_pool1d(x, 1).squeeze()
        x = F.relu(self.bn6(self.linear1(x)))
        x = self.dp1(x)
        x = self.linear2(x)
        return x


class DGCNN(nn.Module):
    def __init__(self, args, output_channels=40):
        super(DGCNN, self).__init__()
        self.args = args
        self.k = args.k

        self.bn1 = nn.BatchNorm2d(64)
        self.bn2 = nn.BatchNorm2d(64)
        self.bn3 = nn.BatchNorm2d(128)
        self.bn4 = nn.BatchNorm2d(256)
        self.bn5 = nn.BatchNorm1d(args.emb_dims)

        self.conv1 = nn.Sequential(nn.Conv2d(6, 64, kernel_size=1, bias=False),
                                   self.bn1,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.conv2 = nn.Sequential(nn.Conv2d(64 * 2, 64, kernel_size=1, bias=False),
                                   self.bn2,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.conv3 = nn.Sequential(nn.Conv2d(64 * 2, 128, kernel_size=1, bias=False),
                                   self.bn3,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.conv4 = nn.Sequential(nn.Conv2d(128 * 2, 256, kernel_size=1, bias=False),
                                   self.bn4,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.conv5 = nn.Sequential(nn.Conv1d(512, args.emb_dims, kernel_size=1, bias=False),
                                   self.bn5,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.linear1 = nn.Linear(args.emb_dims * 2, 512, bias=False)
        self.bn6 = nn.BatchNorm1d(512)
        self.dp1 = nn.Dropout(p=args.dropout)
        self.linear2 = nn.Linear(512, 256)
        self.bn7 = nn.BatchNorm1d(256)
        self.dp2 = nn.Dropout(p=args.dropout)
        self.linear3 = nn.Linear(256, output_channels)

    def forward(self, x):
        batch_size = x.size(0)
        x = get_graph_feature(x, k=self.k)
        x = self.conv1(x)
        x1 = x.max(dim=-1, keepdim=False)[0]

        x = get_graph_feature(x1, k=self.k)
        x = self.conv2(x)
        x2 = x.max(dim=-1, keepdim=False)[0]

        x = get_graph_feature(x2, k=self.k)
        x = self.conv3(x)
        x3 = x.max(dim=-1, keepdim=False)[0]

        x = get_graph_feature(x3, k=self.k)
        x = self.conv4(x)
        x4 = x.max(dim=-1, keepdim=False)[0]

        x = torch.cat((x1, x2, x3, x4), dim=1)

        x = self.conv5(x)
        x1 = F.adaptive_max_pool1d(x, 1).view(batch_size, -1)
        x2 = F.adaptive_avg_pool1d(x, 1).view(batch_size, -1)
        x = torch.cat((x1, x2), 1)

        x = F.leaky_relu(self.bn6(self.linear1(x)), negative_slope=0.2)
        x = self.dp1(x)
        x = F.leaky_relu(self.bn7(self.linear2(x)), negative_slope=0.2)
        x = self.dp2(x)
        x = self.linear3(x)
        return x


# ---------------------------------------------------------------- main.py
def _init_(args):
    exp_dir = os.path.join(args.root, 'checkpoints', args.exp_name)
    if not os.path.exists(os.path.join(exp_dir, 'models')):
        os.makedirs(os.path.join(exp_dir, 'models'))
    shutil.copy(os.path.abspath(__file__), os.path.join(exp_dir, 'main.py.backup'))


def train(args, io):
    train_loader = DataLoader(ModelNet40(partition='train', num_points=args.num_points, data_dir=args.data_dir),
                              num_workers=0, batch_size=args.batch_size, shuffle=True, drop_last=True)
    test_loader = DataLoader(ModelNet40(partition='test', num_points=args.num_points, data_dir=args.data_dir),
                             num_workers=0, batch_size=args.test_batch_size, shuffle=True, drop_last=False)

    device = torch.device("cuda" if args.cuda else "cpu")

    # Try to load models
    if args.model == 'pointnet':
        model = PointNet(args).to(device)
    elif args.model == 'dgcnn':
        model = DGCNN(args).to(device)
    else:
        raise Exception("Not implemented")
    print(type(model).__name__, sum(p.numel() for p in model.parameters()), 'parameters')

    model = nn.DataParallel(model)
    print("Let's use", torch.cuda.device_count(), "GPUs!")

    if args.use_sgd:
        print("Use SGD")
        opt = optim.SGD(model.parameters(), lr=args.lr * 100, momentum=args.momentum, weight_decay=1e-4)
    else:
        print("Use Adam")
        opt = optim.Adam(model.parameters(), lr=args.lr, weight_decay=1e-4)

    scheduler = CosineAnnealingLR(opt, args.epochs, eta_min=args.lr)

    criterion = cal_loss

    best_test_acc = 0
    for epoch in range(args.epochs):
        scheduler.step()
        ####################
        # Train
        ####################
        train_loss = 0.0
        count = 0.0
        model.train()
        train_pred = []
        train_true = []
        for data, label in train_loader:
            data, label = data.to(device), label.to(device).squeeze()
            data = data.permute(0, 2, 1)
            batch_size = data.size()[0]
            opt.zero_grad()
            logits = model(data)
            loss = criterion(logits, label)
            loss.backward()
            opt.step()
            preds = logits.max(dim=1)[1]
            count += batch_size
            train_loss += loss.item() * batch_size
            train_true.append(label.cpu().numpy())
            train_pred.append(preds.detach().cpu().numpy())
        train_true = np.concatenate(train_true)
        train_pred = np.concatenate(train_pred)
        outstr = 'Train %d, loss: %.6f, train acc: %.6f, train avg acc: %.6f' % (
            epoch, train_loss * 1.0 / count, accuracy_score(train_true, train_pred),
            balanced_accuracy_score(train_true, train_pred))
        io.cprint(outstr)

        ####################
        # Test
        ####################
        test_loss = 0.0
        count = 0.0
        model.eval()
        test_pred = []
        test_true = []
        for data, label in test_loader:
            data, label = data.to(device), label.to(device).squeeze()
            data = data.permute(0, 2, 1)
            batch_size = data.size()[0]
            logits = model(data)
            loss = criterion(logits, label)
            preds = logits.max(dim=1)[1]
            count += batch_size
            test_loss += loss.item() * batch_size
            test_true.append(label.cpu().numpy())
            test_pred.append(preds.detach().cpu().numpy())
        test_true = np.concatenate(test_true)
        test_pred = np.concatenate(test_pred)
        test_acc = accuracy_score(test_true, test_pred)
        avg_per_class_acc = balanced_accuracy_score(test_true, test_pred)
        outstr = 'Test %d, loss: %.6f, test acc: %.6f, test avg acc: %.6f' % (
            epoch, test_loss * 1.0 / count, test_acc, avg_per_class_acc)
        io.cprint(outstr)
        if test_acc >= best_test_acc:
            best_test_acc = test_acc
            torch.save(model.state_dict(), os.path.join(args.root, 'checkpoints/%s/models/model.t7' % args.exp_name))


def test(args, io):
    test_loader = DataLoader(ModelNet40(partition='test', num_points=args.num_points, data_dir=args.data_dir),
                             batch_size=args.test_batch_size, shuffle=True, drop_last=False)

    device = torch.device("cuda" if args.cuda else "cpu")

    # Try to load models
    model = DGCNN(args).to(device)
    model = nn.DataParallel(model)
    model.load_state_dict(torch.load(args.model_path))
    model = model.eval()
    test_true = []
    test_pred = []
    for data, label in test_loader:
        data, label = data.to(device), label.to(device).squeeze()
        data = data.permute(0, 2, 1)
        logits = model(data)
        preds = logits.max(dim=1)[1]
        test_true.append(label.cpu().numpy())
        test_pred.append(preds.detach().cpu().numpy())
    test_true = np.concatenate(test_true)
    test_pred = np.concatenate(test_pred)
    test_acc = accuracy_score(test_true, test_pred)
    avg_per_class_acc = balanced_accuracy_score(test_true, test_pred)
    outstr = 'Test :: test acc: %.6f, test avg acc: %.6f' % (test_acc, avg_per_class_acc)
    io.cprint(outstr)
    return test_acc


def parse_args():
    parser = argparse.ArgumentParser(description='Point Cloud Recognition')
    parser.add_argument('--exp_name', type=str, default='exp', metavar='N')
    parser.add_argument('--model', type=str, default='dgcnn', metavar='N', choices=['pointnet', 'dgcnn'])
    parser.add_argument('--dataset', type=str, default='modelnet40', metavar='N', choices=['modelnet40'])
    parser.add_argument('--batch_size', type=int, default=16, metavar='batch_size')
    parser.add_argument('--test_batch_size', type=int, default=8, metavar='batch_size')
    parser.add_argument('--epochs', type=int, default=3, metavar='N')
    parser.add_argument('--use_sgd', type=bool, default=True)
    parser.add_argument('--lr', type=float, default=0.001, metavar='LR')
    parser.add_argument('--momentum', type=float, default=0.9, metavar='M')
    parser.add_argument('--no_cuda', type=bool, default=False)
    parser.add_argument('--seed', type=int, default=1, metavar='S')
    parser.add_argument('--eval', type=bool, default=False)
    parser.add_argument('--num_points', type=int, default=128)
    parser.add_argument('--dropout', type=float, default=0.5)
    parser.add_argument('--emb_dims', type=int, default=128, metavar='N')
    parser.add_argument('--k', type=int, default=10, metavar='N')
    parser.add_argument('--model_path', type=str, default='', metavar='N')
    return parser.parse_args()


def run(args):
    _init_(args)

    io = IOStream(os.path.join(args.root, 'checkpoints', args.exp_name, 'run.log'))
    io.cprint(str(args))

    args.cuda = not args.no_cuda and torch.cuda.is_available()
    torch.manual_seed(args.seed)
    if args.cuda:
        io.cprint(
            'Using GPU : ' + str(torch.cuda.current_device()) + ' from ' + str(torch.cuda.device_count()) + ' devices')
        torch.cuda.manual_seed(args.seed)
    else:
        io.cprint('Using CPU')

    if not args.eval:
        train(args, io)
    else:
        test(args, io)
    io.close()


if __name__ == "__main__":
    np.random.seed(1)
    with tempfile.TemporaryDirectory() as root:
        args = parse_args()
        args.root, args.data_dir = root, os.path.join(root, 'data')
        write_synthetic_modelnet(args.data_dir, n_points=args.num_points)

        # the PointNet baseline for one epoch, then DGCNN, then the --eval path on DGCNN's best checkpoint
        run(argparse.Namespace(**{**vars(args), 'model': 'pointnet', 'exp_name': 'pointnet', 'epochs': 1,
                                  'use_sgd': False}))
        run(args)
        args.eval = True
        args.model_path = os.path.join(root, 'checkpoints', args.exp_name, 'models', 'model.t7')
        run(args)
    print('done')
