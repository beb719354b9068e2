"""PointNet classification of ModelNet-style point clouds: train with a feature-transform regulariser, test with votes.

Modeled on: yanx27/Pointnet_Pointnet2_pytorch (train_classification.py, test_classification.py,
models/pointnet_cls.py, models/pointnet_utils.py, provider.py, data_utils/ModelNetDataLoader.py) at commit
eb64fe0b4c24055559cea26299cb485dcb43d8dd
(https://github.com/yanx27/Pointnet_Pointnet2_pytorch/tree/eb64fe0b4c24055559cea26299cb485dcb43d8dd).
Kept: the ``use_cpu`` flag device logic (``os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu``; ``classifier.cuda()`` and
``criterion.cuda()`` when ``not args.use_cpu``; every batch moved with ``points.cuda(), target.cuda()`` under the same
flag, after the numpy augmentation and ``torch.Tensor(points)`` on the host and the ``transpose(2, 1)``; the
module-level ``args`` read inside ``test``); the models' tensors created inside ``forward`` on the host
(``Variable(torch.from_numpy(...))`` identity matrices in ``STN3d``/``STNkd`` and ``torch.eye`` in
``feature_transform_reguliarzer``) and moved with ``.cuda()`` only when ``x.is_cuda``/``trans.is_cuda``;
``classifier.apply(inplace_relu)``; the checkpoint resume ``torch.load(str(exp_dir) + '/checkpoints/best_model.pth')``
without ``map_location`` in a ``try``/``except`` before the optimizer is built; Adam and ``StepLR`` stepped at the
start of each epoch; ``classifier.train()``; ``pred.data.max(1)[1]``, ``.cpu().sum()`` and ``.item()`` for the
accuracy, per-class accuracy from ``np.unique(target.cpu())``; testing under ``torch.no_grad()`` with
``classifier.eval()``; saving ``model_state_dict``/``optimizer_state_dict`` when the instance accuracy does not drop;
test_classification.py rebuilding the classifier, ``.cuda()`` under the flag, ``torch.load`` without ``map_location``
(``weights_only=False`` is added to both loads, as PyTorch >= 2.6 needs it for the numpy floats in the checkpoint) and
voting over ``num_votes`` forward passes. One change: test_classification.py creates ``vote_pool =
torch.zeros(...).cuda()`` unconditionally, which crashes with ``--use_cpu`` on a machine without a GPU; here that
``.cuda()`` is guarded by the same ``use_cpu`` flag as every other move.
Shrunk: ten synthetic shape classes (sphere, cube, cylinder, cone, torus, ...) written as comma-separated
``x,y,z,nx,ny,nz`` text files with the ModelNet10 name/split lists in a temporary folder instead of the ModelNet
download, 256 points per file and 128 used, layer widths divided by 4 to 8 (1024 -> 128 global features, a 16x16
feature transform), batch 8, 6 epochs at learning rate 0.002, 2 votes, ``use_cpu`` set from
``torch.cuda.is_available()`` instead of the command line, no tqdm and no log-file handler.
"""

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
from torch.autograd import Variable
from torch.utils.data import Dataset

GLOBAL = 128  # 1024 in the original


# provider.py
def shift_point_cloud(batch_data, shift_range=0.1):
    shifts = np.random.uniform(-shift_range, shift_range, (batch_data.shape[0], 3))
    for batch_index in range(batch_data.shape[0]):
        batch_data[batch_index, :, :] += shifts[batch_index, :]
    return batch_data


def random_scale_point_cloud(batch_data, scale_low=0.8, scale_high=1.25):
    scales = np.random.uniform(scale_low, scale_high, batch_data.shape[0])
    for batch_index in range(batch_data.shape[0]):
        batch_data[batch_index, :, :] *= scales[batch_index]
    return batch_data


def random_point_dropout(batch_pc, max_dropout_ratio=0.875):
    for b in range(batch_pc.shape[0]):
        dropout_ratio = np.random.random() * max_dropout_ratio
        drop_idx = np.where(np.random.random((batch_pc.shape[1])) <= dropout_ratio)[0]
        if len(drop_idx) > 0:
            batch_pc[b, drop_idx, :] = batch_pc[b, 0, :]  # set to the first point
    return batch_pc


# data_utils/ModelNetDataLoader.py
def pc_normalize(pc):
    pc = pc - np.mean(pc, axis=0)
    return pc / np.max(np.sqrt(np.sum(pc ** 2, axis=1)))


SHAPES = ['sphere', 'cube', 'cylinder', 'cone', 'torus', 'plane', 'ellipsoid', 'pyramid', 'rod', 'ring']


def sample_shape(name, n, rng):
    u, v = rng.uniform(0, 1, n), rng.uniform(0, 2 * np.pi, n)
    if name in ('sphere', 'ellipsoid'):
        p = rng.normal(size=(n, 3))
        p = p / np.linalg.norm(p, axis=1, keepdims=True) * ([1, 1, 1] if name == 'sphere' else [1.5, 0.7, 0.5])
    elif name in ('cube', 'pyramid'):
        p, face = rng.uniform(-1, 1, (n, 3)), rng.randint(0, 3, n)
        p[np.arange(n), face] = np.sign(p[np.arange(n), face])
        if name == 'pyramid':
            p[:, :2] *= (1 - (p[:, 2:] + 1) / 2)
    elif name in ('cylinder', 'cone', 'rod'):
        r = {'cylinder': 1.0, 'cone': 1.0 - u, 'rod': 0.1}[name]
        p = np.stack([r * np.cos(v), r * np.sin(v), 2 * u - 1], 1)
    elif name in ('torus', 'ring'):
        w, tube = rng.uniform(0, 2 * np.pi, n), (0.4 if name == 'torus' else 0.05)
        p = np.stack([(1 + tube * np.cos(w)) * np.cos(v), (1 + tube * np.cos(w)) * np.sin(v), tube * np.sin(w)], 1)
    else:  # plane
        p = np.stack([rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), 0.02 * rng.normal(size=n)], 1)
    p = p + 0.01 * rng.normal(size=p.shape)
    return np.concatenate([p, p / (np.linalg.norm(p, axis=1, keepdims=True) + 1e-6)], 1)  # xyz and normals


def write_synthetic_modelnet(root, per_class=(8, 2), n_points=256):
    rng = np.random.RandomState(0)
    root.mkdir(parents=True)
    (root / 'modelnet10_shape_names.txt').write_text('\n'.join(SHAPES) + '\n')
    splits = {'train': [], 'test': []}
    for name in SHAPES:
        (root / name).mkdir()
        for i in range(sum(per_class)):
            shape_id = f'{name}_{i + 1:04d}'
            np.savetxt(root / name / f'{shape_id}.txt', sample_shape(name, n_points, rng), delimiter=',', fmt='%.5f')
            splits['train' if i < per_class[0] else 'test'].append(shape_id)
    for split, ids in splits.items():
        (root / f'modelnet10_{split}.txt').write_text('\n'.join(ids) + '\n')


class ModelNetDataLoader(Dataset):
    def __init__(self, root, args, split='train', process_data=False):
        self.root, self.npoints, self.use_normals = root, args.num_point, args.use_normals
        self.catfile = os.path.join(self.root, 'modelnet10_shape_names.txt')
        self.cat = [line.rstrip() for line in open(self.catfile)]
        self.classes = dict(zip(self.cat, range(len(self.cat))))
        assert split == 'train' or split == 'test'
        shape_ids = [line.rstrip() for line in open(os.path.join(self.root, f'modelnet10_{split}.txt'))]
        shape_names = ['_'.join(x.split('_')[0:-1]) for x in shape_ids]
        self.datapath = [(shape_names[i], os.path.join(self.root, shape_names[i], shape_ids[i]) + '.txt')
                         for i in range(len(shape_ids))]
        print('The size of %s data is %d' % (split, len(self.datapath)))

    def __len__(self):
        return len(self.datapath)

    def __getitem__(self, index):
        fn = self.datapath[index]
        cls = self.classes[self.datapath[index][0]]
        label = np.array([cls]).astype(np.int32)
        point_set = np.loadtxt(fn[1], delimiter=',').astype(np.float32)[0:self.npoints, :]
        point_set[:, 0:3] = pc_normalize(point_set[:, 0:3])
        if not self.use_normals:
            point_set = point_set[:, 0:3]
        return point_set, label[0]


# models/pointnet_utils.py
class STN3d(nn.Module):
    def __init__(self, channel):
        super(STN3d, self).__init__()
        self.conv1, self.conv2 = nn.Conv1d(channel, 16, 1), nn.Conv1d(16, 32, 1)
        self.conv3 = nn.Conv1d(32, GLOBAL, 1)
        self.fc1, self.fc2, self.fc3 = nn.Linear(GLOBAL, 64), nn.Linear(64, 32), nn.Linear(32, 9)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(16), nn.BatchNorm1d(32), nn.BatchNorm1d(GLOBAL)
        self.bn4, self.bn5 = nn.BatchNorm1d(64), nn.BatchNorm1d(32)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, GLOBAL)
        x = self.fc3(F.relu(self.bn5(self.fc2(F.relu(self.bn4(self.fc1(x)))))))
        iden = Variable(torch.from_numpy(np.array([1, 0, 0, 0, 1, 0, 0, 0, 1]).astype(np.float32))).view(1, 9).repeat(
            batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        return (x + iden).view(-1, 3, 3)


class STNkd(nn.Module):
    def __init__(self, k=16):
        super(STNkd, self).__init__()
        self.conv1, self.conv2 = nn.Conv1d(k, 16, 1), nn.Conv1d(16, 32, 1)
        self.conv3 = nn.Conv1d(32, GLOBAL, 1)
        self.fc1, self.fc2, self.fc3 = nn.Linear(GLOBAL, 64), nn.Linear(64, 32), nn.Linear(32, k * k)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(16), nn.BatchNorm1d(32), nn.BatchNorm1d(GLOBAL)
        self.bn4, self.bn5 = nn.BatchNorm1d(64), nn.BatchNorm1d(32)
        self.k = k

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, GLOBAL)
        x = self.fc3(F.relu(self.bn5(self.fc2(F.relu(self.bn4(self.fc1(x)))))))
        iden = Variable(torch.from_numpy(np.eye(self.k).flatten().astype(np.float32))).view(1, self.k * self.k).repeat(
            batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        return (x + iden).view(-1, self.k, self.k)


class PointNetEncoder(nn.Module):
    def __init__(self, global_feat=True, feature_transform=False, channel=3):
        super(PointNetEncoder, self).__init__()
        self.stn = STN3d(channel)
        self.conv1, self.conv2 = nn.Conv1d(channel, 16, 1), nn.Conv1d(16, 32, 1)
        self.conv3 = nn.Conv1d(32, GLOBAL, 1)
        self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(16), nn.BatchNorm1d(32), nn.BatchNorm1d(GLOBAL)
        self.global_feat = global_feat
        self.feature_transform = feature_transform
        if self.feature_transform:
            self.fstn = STNkd(k=16)

    def forward(self, x):
        B, D, N = x.size()
        trans = self.stn(x)
        x = x.transpose(2, 1)
        if D > 3:
            feature, x = x[:, :, 3:], x[:, :, :3]
        x = torch.bmm(x, trans)
        if D > 3:
            x = torch.cat([x, feature], dim=2)
        x = x.transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        if self.feature_transform:
            trans_feat = self.fstn(x)
            x = torch.bmm(x.transpose(2, 1), trans_feat).transpose(2, 1)
        else:
            trans_feat = None
        pointfeat = x
        x = self.bn3(self.conv3(F.relu(self.bn2(self.conv2(x)))))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, GLOBAL)
        if self.global_feat:
            return x, trans, trans_feat
        return torch.cat([x.view(-1, GLOBAL, 1).repeat(1, 1, N), pointfeat], 1), trans, trans_feat


def feature_transform_reguliarzer(trans):
    d = trans.size()[1]
    I = torch.eye(d)[None, :, :]
    if trans.is_cuda:
        I = I.cuda()
    return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - I, dim=(1, 2)))


# models/pointnet_cls.py
class get_model(nn.Module):
    def __init__(self, k=40, normal_channel=True):
        super(get_model, self).__init__()
        channel = 6 if normal_channel else 3
        self.feat = PointNetEncoder(global_feat=True, feature_transform=True, channel=channel)
        self.fc1, self.fc2, self.fc3 = nn.Linear(GLOBAL, 64), nn.Linear(64, 32), nn.Linear(32, k)
        self.dropout = nn.Dropout(p=0.4)
        self.bn1, self.bn2 = nn.BatchNorm1d(64), nn.BatchNorm1d(32)
        self.relu = nn.ReLU()

    def forward(self, x):
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        return F.log_softmax(self.fc3(x), dim=1), trans_feat


class get_loss(torch.nn.Module):
    def __init__(self, mat_diff_loss_scale=0.001):
        super(get_loss, self).__init__()
        self.mat_diff_loss_scale = mat_diff_loss_scale

    def forward(self, pred, target, trans_feat):
        return F.nll_loss(pred, target) + feature_transform_reguliarzer(trans_feat) * self.mat_diff_loss_scale


# train_classification.py
def inplace_relu(m):
    classname = m.__class__.__name__
    if classname.find('ReLU') != -1:
        m.inplace = True


def test(model, loader, num_class=40, vote_num=1):
    mean_correct = []
    class_acc = np.zeros((num_class, 3))
    classifier = model.eval()
    for j, (points, target) in enumerate(loader):
        if not args.use_cpu:
            points, target = points.cuda(), target.cuda()
        points = points.transpose(2, 1)
        vote_pool = torch.zeros(target.size()[0], num_class)
        if not args.use_cpu:
            vote_pool = vote_pool.cuda()
        for _ in range(vote_num):
            pred, _ = classifier(points)
            vote_pool += pred
        pred = vote_pool / vote_num
        pred_choice = pred.data.max(1)[1]
        for cat in np.unique(target.cpu()):
            classacc = pred_choice[target == cat].eq(target[target == cat].long().data).cpu().sum()
            class_acc[cat, 0] += classacc.item() / float(points[target == cat].size()[0])
            class_acc[cat, 1] += 1
        correct = pred_choice.eq(target.long().data).cpu().sum()
        mean_correct.append(correct.item() / float(points.size()[0]))
    class_acc[:, 2] = class_acc[:, 0] / class_acc[:, 1]
    return np.mean(mean_correct), np.mean(class_acc[:, 2])


def train_main(args, data_path, exp_dir):
    os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu
    checkpoints_dir = exp_dir.joinpath('checkpoints/')
    checkpoints_dir.mkdir(parents=True, exist_ok=True)

    train_dataset = ModelNetDataLoader(root=data_path, args=args, split='train')
    test_dataset = ModelNetDataLoader(root=data_path, args=args, split='test')
    trainDataLoader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True,
                                                  drop_last=True)
    testDataLoader = torch.utils.data.DataLoader(test_dataset, batch_size=args.batch_size, shuffle=False)

    num_class = args.num_category
    classifier = get_model(num_class, normal_channel=args.use_normals)
    criterion = get_loss()
    classifier.apply(inplace_relu)

    if not args.use_cpu:
        classifier = classifier.cuda()
        criterion = criterion.cuda()

    try:
        checkpoint = torch.load(str(exp_dir) + '/checkpoints/best_model.pth', weights_only=False)
        start_epoch = checkpoint['epoch']
        classifier.load_state_dict(checkpoint['model_state_dict'])
        print('Use pretrain model')
    except Exception:
        print('No existing model, starting training from scratch...')
        start_epoch = 0

    if args.optimizer == 'Adam':
        optimizer = torch.optim.Adam(classifier.parameters(), lr=args.learning_rate, betas=(0.9, 0.999),
                                     eps=1e-08, weight_decay=args.decay_rate)
    else:
        optimizer = torch.optim.SGD(classifier.parameters(), lr=0.01, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.7)
    best_instance_acc, best_class_acc = 0.0, 0.0

    for epoch in range(start_epoch, args.epoch):
        mean_correct = []
        classifier = classifier.train()
        scheduler.step()
        for batch_id, (points, target) in enumerate(trainDataLoader, 0):
            optimizer.zero_grad()
            points = points.data.numpy()
            points = random_point_dropout(points)
            points[:, :, 0:3] = random_scale_point_cloud(points[:, :, 0:3])
            points[:, :, 0:3] = shift_point_cloud(points[:, :, 0:3])
            points = torch.Tensor(points)
            points = points.transpose(2, 1)
            if not args.use_cpu:
                points, target = points.cuda(), target.cuda()
            pred, trans_feat = classifier(points)
            loss = criterion(pred, target.long(), trans_feat)
            pred_choice = pred.data.max(1)[1]
            correct = pred_choice.eq(target.long().data).cpu().sum()
            mean_correct.append(correct.item() / float(points.size()[0]))
            loss.backward()
            optimizer.step()
        train_instance_acc = np.mean(mean_correct)

        with torch.no_grad():
            instance_acc, class_acc = test(classifier.eval(), testDataLoader, num_class=num_class)
            if instance_acc >= best_instance_acc:
                best_instance_acc = instance_acc
                best_epoch = epoch + 1
            if class_acc >= best_class_acc:
                best_class_acc = class_acc
            print('Epoch %d: loss %.4f, train instance acc %.4f, test instance acc %.4f, class acc %.4f'
                  % (epoch + 1, loss.item(), train_instance_acc, instance_acc, class_acc))
            if instance_acc >= best_instance_acc:
                savepath = str(checkpoints_dir) + '/best_model.pth'
                state = {'epoch': best_epoch, 'instance_acc': instance_acc, 'class_acc': class_acc,
                         'model_state_dict': classifier.state_dict(),
                         'optimizer_state_dict': optimizer.state_dict()}
                torch.save(state, savepath)


# test_classification.py
def test_main(args, data_path, experiment_dir):
    os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu
    test_dataset = ModelNetDataLoader(root=data_path, args=args, split='test')
    testDataLoader = torch.utils.data.DataLoader(test_dataset, batch_size=args.batch_size, shuffle=False)
    num_class = args.num_category
    classifier = get_model(num_class, normal_channel=args.use_normals)
    if not args.use_cpu:
        classifier = classifier.cuda()
    checkpoint = torch.load(str(experiment_dir) + '/checkpoints/best_model.pth', weights_only=False)
    classifier.load_state_dict(checkpoint['model_state_dict'])
    with torch.no_grad():
        instance_acc, class_acc = test(classifier.eval(), testDataLoader, vote_num=args.num_votes,
                                       num_class=num_class)
        print('Test Instance Accuracy: %f, Class Accuracy: %f (best epoch %d)'
              % (instance_acc, class_acc, checkpoint['epoch']))


if __name__ == '__main__':
    torch.manual_seed(0)
    np.random.seed(0)
    args = SimpleNamespace(use_cpu=not torch.cuda.is_available(), gpu='0', batch_size=8, model='pointnet_cls',
                           num_category=10, epoch=6, learning_rate=0.002, num_point=128, optimizer='Adam',
                           log_dir='pointnet_cls', decay_rate=1e-4, use_normals=False, process_data=False,
                           use_uniform_sample=False, num_votes=2)
    with tempfile.TemporaryDirectory() as tmp:
        data_path = Path(tmp) / 'modelnet40_normal_resampled'
        write_synthetic_modelnet(data_path)
        exp_dir = Path(tmp) / 'log' / 'classification' / args.log_dir
        train_main(args, str(data_path), exp_dir)
        test_main(args, str(data_path), exp_dir)
