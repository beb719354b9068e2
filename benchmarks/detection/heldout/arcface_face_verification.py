"""Trains a face-recognition ResNet (IR blocks, PReLU, a 512-d BatchNorm'd embedding) with an additive angular margin
head (ArcFace: `ArcMarginProduct`) and a focal loss on synthetic grey "faces" the way ronghuaiyang/arcface-pytorch's
train.py does it, both nets wrapped in `DataParallel`; after every epoch it saves the backbone's state dict and runs
the LFW-style verification test of test.py (each image and its mirror embedded, their features concatenated,
cosine similarity per listed pair, best-threshold accuracy); at the end test.py's `__main__` reloads the saved
checkpoint into a fresh `DataParallel` model on the GPU and runs the same test.

Modeled on: ronghuaiyang/arcface-pytorch, train.py, test.py, config/config.py, models/resnet.py (`IRBlock`,
`ResNetFace`, `resnet_face18`), models/metrics.py (`ArcMarginProduct`), models/focal_loss.py and data/dataset.py at
commit 47ace80b128042cd8d2efd408f55c5a3e156b032
(https://github.com/ronghuaiyang/arcface-pytorch/blob/47ace80b128042cd8d2efd408f55c5a3e156b032/train.py and the
other files at the same commit).

Kept: `Config` with its option names (`backbone`, `metric`, `easy_margin`, `use_se`, `loss`, `print_freq`,
`save_interval`, `lr_step`, `optimizer`); train.py's `save_model` (`torch.save(model.state_dict(), ...)` of the
`DataParallel` wrapper) and `__main__` (the loss / backbone / metric choices, `model.to(device)` then
`model = DataParallel(model)` and the same for `metric_fc`, SGD over both param groups, `StepLR`, the
`scheduler.step()` at the top of each epoch, `data_input.to(device)` and `label.to(device).long()`,
`metric_fc(feature, label)`, the `output.data.cpu().numpy()` / `label.data.cpu().numpy()` accuracy every
`print_freq` iterations, `save_model` every `save_interval` epochs, `model.eval()` then `lfw_test`, left in eval mode
as written); test.py's `get_lfw_list`, `load_image` (image and its left-right flip stacked), `get_featurs` (batches
built on the host with `np.concatenate`, `data.to(torch.device("cuda"))`, `output.data.cpu().numpy()`, no
`torch.no_grad()` as written), `load_model`, `get_feature_dict`, `cosin_metric`, `cal_accuracy`, `test_performance`,
`lfw_test` and `__main__` (`DataParallel(model)`, `model.load_state_dict(torch.load(path))`, `model.to(cuda)`);
`ArcMarginProduct` (normalised linear, the margin with `th` / `mm`, the one-hot made with
`torch.zeros(cosine.size(), device='cuda')` and `scatter_`), `FocalLoss`, `IRBlock`, `ResNetFace` and `Dataset`.

Changed to run here: the hard-coded device "cuda" (train.py, `get_featurs`, test.py's `__main__`,
`ArcMarginProduct`) is `DEVICE`, "cuda" when available else "cpu" (the author's code needs a GPU); CASIA-WebFace and
LFW are not downloaded: `make_faces` draws per-identity smooth random patterns plus noise, saved as `.npy` files with
the train list ("path label") and the LFW pair list ("a b same") in a temporary folder; `Dataset` and `load_image`
read them with `np.load` instead of PIL / `cv2.imread`, with numpy random crop, flip and `Normalize(0.5, 0.5)`;
the visdom `Visualizer` (`display = False`), the unused backbones / metrics and the model printout are left out;
train.py's `__main__` body is `train_main` (its batch variable `data` renamed `data_`, since in a function it would
shadow the `data` module) and test.py's is `test_main`; numpy is seeded (the original seeds nothing) so the output
repeats; a final `done` line is printed.
Shrunk: 12 identities x 24 training images instead of 13938 identities; 36x36 images cropped to 32x32 instead of
144 -> 128; `ResNetFace` widths 64/128/256/512 -> 16/32/64/128 (so `fc5` takes 128*2*2 inputs), the 512-d embedding
kept; 3 epochs (lr_step 2) instead of 50; 40 verification pairs over (at most) 48 images.
"""
from __future__ import print_function

import math
import os
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import DataParallel, Parameter
from torch.optim.lr_scheduler import StepLR
from torch.utils import data

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROOT = tempfile.mkdtemp(prefix='arcface_')


class Config(object):  # config/config.py
    env = 'default'
    backbone = 'resnet18'
    classify = 'softmax'
    num_classes = 12
    metric = 'arc_margin'
    easy_margin = False
    use_se = False
    loss = 'focal_loss'
    display = False
    train_root = os.path.join(ROOT, 'webface')
    train_list = os.path.join(ROOT, 'webface', 'train_data.txt')
    lfw_root = os.path.join(ROOT, 'lfw')
    lfw_test_list = os.path.join(ROOT, 'lfw', 'lfw_test_pair.txt')
    checkpoints_path = os.path.join(ROOT, 'checkpoints')
    test_model_path = os.path.join(ROOT, 'checkpoints', 'resnet18_2.pth')
    save_interval = 1
    train_batch_size = 16  # batch size
    test_batch_size = 12
    input_shape = (1, 32, 32)
    optimizer = 'sgd'
    use_gpu = True  # use GPU or not
    num_workers = 0  # how many workers for loading data
    print_freq = 6  # print info every N batch
    max_epoch = 3
    lr = 1e-1  # initial learning rate
    lr_step = 2
    weight_decay = 5e-4


# ----------------------------------------------------------------------------- synthetic CASIA-WebFace / LFW
def make_faces(opt, n_ids=12, n_train=24, n_test=4, seed=3):
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:36, 0:36] / 35.0
    bases = []
    for _ in range(n_ids):
        img = np.zeros((36, 36))
        for _ in range(4):  # a few Gaussian blobs per identity
            cy, cx, s, a = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.08, 0.2), rng.uniform(-1, 1)
            img += a * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s ** 2))
        bases.append(img)

    def sample(i):
        img = np.roll(bases[i], (rng.randint(-2, 3), rng.randint(-2, 3)), axis=(0, 1)) + rng.normal(0, 0.15, (36, 36))
        return np.clip(127.5 + 90 * img, 0, 255).astype(np.uint8)
    os.makedirs(opt.train_root, exist_ok=True)
    os.makedirs(opt.lfw_root, exist_ok=True)
    with open(opt.train_list, 'w') as f:
        for i in range(n_ids):
            for k in range(n_train):
                name = '%04d/%03d.npy' % (i, k)
                os.makedirs(os.path.join(opt.train_root, '%04d' % i), exist_ok=True)
                np.save(os.path.join(opt.train_root, name), sample(i))
                f.write('%s %d\n' % (name, i))
    names = []
    for i in range(n_ids):
        for k in range(n_test):
            names.append(('person%02d/person%02d_%04d.npy' % (i, i, k), i))
            os.makedirs(os.path.join(opt.lfw_root, 'person%02d' % i), exist_ok=True)
            np.save(os.path.join(opt.lfw_root, names[-1][0]), sample(i)[2:34, 2:34])
    with open(opt.lfw_test_list, 'w') as f:
        for p in range(40):
            a = names[rng.randint(len(names))]
            same = [n for n in names if n[1] == a[1] and n != a] if p % 2 == 0 else \
                [n for n in names if n[1] != a[1]]
            b = same[rng.randint(len(same))]
            f.write('%s %s %d\n' % (a[0], b[0], int(a[1] == b[1])))


# ----------------------------------------------------------------------------- data/dataset.py
class Dataset(data.Dataset):
    def __init__(self, root, data_list_file, phase='train', input_shape=(1, 128, 128)):
        self.phase = phase
        self.input_shape = input_shape
        with open(os.path.join(data_list_file), 'r') as fd:
            imgs = fd.readlines()
        imgs = [os.path.join(root, img[:-1]) for img in imgs]
        self.imgs = np.random.permutation(imgs)

    def transforms(self, img):  # T.RandomCrop / T.CenterCrop, T.RandomHorizontalFlip, T.ToTensor, T.Normalize
        h, w = self.input_shape[1:]
        if self.phase == 'train':
            y, x = np.random.randint(0, img.shape[0] - h + 1), np.random.randint(0, img.shape[1] - w + 1)
            img = img[y:y + h, x:x + w]
            if np.random.rand() < 0.5:
                img = img[:, ::-1]
        else:
            y, x = (img.shape[0] - h) // 2, (img.shape[1] - w) // 2
            img = img[y:y + h, x:x + w]
        img = torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32) / 255.0)[None]
        return (img - 0.5) / 0.5

    def __getitem__(self, index):
        sample = self.imgs[index]
        splits = sample.split()
        img_path = splits[0]
        data = np.load(img_path)
        data = self.transforms(data)
        label = np.int32(splits[1])
        return data.float(), label

    def __len__(self):
        return len(self.imgs)


# ----------------------------------------------------------------------------- models/resnet.py, metrics.py, focal_loss.py
def conv3x3(in_planes, out_planes, stride=1):
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class IRBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, use_se=True):
        super(IRBlock, self).__init__()
        self.bn0 = nn.BatchNorm2d(inplanes)
        self.conv1 = conv3x3(inplanes, inplanes)
        self.bn1 = nn.BatchNorm2d(inplanes)
        self.prelu = nn.PReLU()
        self.conv2 = conv3x3(inplanes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride
        self.use_se = use_se

    def forward(self, x):
        residual = x
        out = self.bn0(x)
        out = self.conv1(out)
        out = self.bn1(out)
        out = self.prelu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            residual = self.downsample(x)
        out += residual
        out = self.prelu(out)
        return out


class ResNetFace(nn.Module):
    def __init__(self, block, layers, use_se=True, widths=(16, 32, 64, 128)):
        self.inplanes = widths[0]
        self.use_se = use_se
        super(ResNetFace, self).__init__()
        self.conv1 = nn.Conv2d(1, widths[0], kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.prelu = nn.PReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.layer1 = self._make_layer(block, widths[0], layers[0])
        self.layer2 = self._make_layer(block, widths[1], layers[1], stride=2)
        self.layer3 = self._make_layer(block, widths[2], layers[2], stride=2)
        self.layer4 = self._make_layer(block, widths[3], layers[3], stride=2)
        self.bn4 = nn.BatchNorm2d(widths[3])
        self.dropout = nn.Dropout()
        self.fc5 = nn.Linear(widths[3] * 2 * 2, 512)
        self.bn5 = nn.BatchNorm1d(512)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.xavier_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d) or isinstance(m, nn.BatchNorm1d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample, use_se=self.use_se))
        self.inplanes = planes
        for i in range(1, blocks):
            layers.append(block(self.inplanes, planes, use_se=self.use_se))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.prelu(x)
        x = self.maxpool(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.bn4(x)
        x = self.dropout(x)
        x = x.view(x.size(0), -1)
        x = self.fc5(x)
        x = self.bn5(x)
        return x


def resnet_face18(use_se=True, **kwargs):
    model = ResNetFace(IRBlock, [2, 2, 2, 2], use_se=use_se, **kwargs)
    return model


class ArcMarginProduct(nn.Module):
    r"""Implement of large margin arc distance: cos(theta + m)"""
    def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
        super(ArcMarginProduct, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.s = s
        self.m = m
        self.weight = Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.easy_margin = easy_margin
        self.cos_m = math.cos(m)
        self.sin_m = math.sin(m)
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, input, label):
        # --------------------------- cos(theta) & phi(theta) ---------------------------
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1))
        phi = cosine * self.cos_m - sine * self.sin_m
        if self.easy_margin:
            phi = torch.where(cosine > 0, phi, cosine)
        else:
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        # --------------------------- convert label to one-hot ---------------------------
        one_hot = torch.zeros(cosine.size(), device=DEVICE)
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
        output *= self.s
        return output


class FocalLoss(nn.Module):
    def __init__(self, gamma=0, eps=1e-7):
        super(FocalLoss, self).__init__()
        self.gamma = gamma
        self.eps = eps
        self.ce = torch.nn.CrossEntropyLoss()

    def forward(self, input, target):
        logp = self.ce(input, target)
        p = torch.exp(-logp)
        loss = (1 - p) ** self.gamma * logp
        return loss.mean()


# ----------------------------------------------------------------------------- test.py
def get_lfw_list(pair_list):
    with open(pair_list, 'r') as fd:
        pairs = fd.readlines()
    data_list = []
    for pair in pairs:
        splits = pair.split()
        if splits[0] not in data_list:
            data_list.append(splits[0])
        if splits[1] not in data_list:
            data_list.append(splits[1])
    return data_list


def load_image(img_path):
    image = np.load(img_path)
    if image is None:
        return None
    image = np.dstack((image, np.fliplr(image)))
    image = image.transpose((2, 0, 1))
    image = image[:, np.newaxis, :, :]
    image = image.astype(np.float32, copy=False)
    image -= 127.5
    image /= 127.5
    return image


def get_featurs(model, test_list, batch_size=10):
    images = None
    features = None
    cnt = 0
    for i, img_path in enumerate(test_list):
        image = load_image(img_path)
        if image is None:
            print('read {} error'.format(img_path))
        if images is None:
            images = image
        else:
            images = np.concatenate((images, image), axis=0)
        if images.shape[0] % batch_size == 0 or i == len(test_list) - 1:
            cnt += 1
            data = torch.from_numpy(images)
            data = data.to(torch.device(DEVICE))
            output = model(data)
            output = output.data.cpu().numpy()
            fe_1 = output[::2]
            fe_2 = output[1::2]
            feature = np.hstack((fe_1, fe_2))
            if features is None:
                features = feature
            else:
                features = np.vstack((features, feature))
            images = None
    return features, cnt


def load_model(model, model_path):
    model_dict = model.state_dict()
    pretrained_dict = torch.load(model_path)
    pretrained_dict = {k: v for k, v in pretrained_dict.items() if k in model_dict}
    model_dict.update(pretrained_dict)
    model.load_state_dict(model_dict)


def get_feature_dict(test_list, features):
    fe_dict = {}
    for i, each in enumerate(test_list):
        fe_dict[each] = features[i]
    return fe_dict


def cosin_metric(x1, x2):
    return np.dot(x1, x2) / (np.linalg.norm(x1) * np.linalg.norm(x2))


def cal_accuracy(y_score, y_true):
    y_score = np.asarray(y_score)
    y_true = np.asarray(y_true)
    best_acc = 0
    best_th = 0
    for i in range(len(y_score)):
        th = y_score[i]
        y_test = (y_score >= th)
        acc = np.mean((y_test == y_true).astype(int))
        if acc > best_acc:
            best_acc = acc
            best_th = th
    return (best_acc, best_th)


def test_performance(fe_dict, pair_list):
    with open(pair_list, 'r') as fd:
        pairs = fd.readlines()
    sims = []
    labels = []
    for pair in pairs:
        splits = pair.split()
        fe_1 = fe_dict[splits[0]]
        fe_2 = fe_dict[splits[1]]
        label = int(splits[2])
        sim = cosin_metric(fe_1, fe_2)
        sims.append(sim)
        labels.append(label)
    acc, th = cal_accuracy(sims, labels)
    return acc, th


def lfw_test(model, img_paths, identity_list, compair_list, batch_size):
    s = time.time()
    features, cnt = get_featurs(model, img_paths, batch_size=batch_size)
    print(features.shape)
    t = time.time() - s
    print('total time is {}, average time is {}'.format(t, t / cnt))
    fe_dict = get_feature_dict(identity_list, features)
    acc, th = test_performance(fe_dict, compair_list)
    print('lfw face verification accuracy: ', acc, 'threshold: ', th)
    return acc


def test_main(opt):  # test.py's __main__
    if opt.backbone == 'resnet18':
        model = resnet_face18(opt.use_se)
    model = DataParallel(model)
    # load_model(model, opt.test_model_path)
    model.load_state_dict(torch.load(opt.test_model_path))
    model.to(torch.device(DEVICE))
    identity_list = get_lfw_list(opt.lfw_test_list)
    img_paths = [os.path.join(opt.lfw_root, each) for each in identity_list]
    model.eval()
    return lfw_test(model, img_paths, identity_list, opt.lfw_test_list, opt.test_batch_size)


# ----------------------------------------------------------------------------- train.py
def save_model(model, save_path, name, iter_cnt):
    save_name = os.path.join(save_path, name + '_' + str(iter_cnt) + '.pth')
    torch.save(model.state_dict(), save_name)
    return save_name


def train_main(opt):
    device = torch.device(DEVICE)
    train_dataset = Dataset(opt.train_root, opt.train_list, phase='train', input_shape=opt.input_shape)
    trainloader = data.DataLoader(train_dataset, batch_size=opt.train_batch_size, shuffle=True,
                                  num_workers=opt.num_workers)
    identity_list = get_lfw_list(opt.lfw_test_list)
    img_paths = [os.path.join(opt.lfw_root, each) for each in identity_list]
    print('{} train iters per epoch:'.format(len(trainloader)))
    if opt.loss == 'focal_loss':
        criterion = FocalLoss(gamma=2)
    else:
        criterion = torch.nn.CrossEntropyLoss()
    if opt.backbone == 'resnet18':
        model = resnet_face18(use_se=opt.use_se)
    if opt.metric == 'arc_margin':
        metric_fc = ArcMarginProduct(512, opt.num_classes, s=30, m=0.5, easy_margin=opt.easy_margin)
    else:
        metric_fc = nn.Linear(512, opt.num_classes)
    model.to(device)
    model = DataParallel(model)
    metric_fc.to(device)
    metric_fc = DataParallel(metric_fc)
    if opt.optimizer == 'sgd':
        optimizer = torch.optim.SGD([{'params': model.parameters()}, {'params': metric_fc.parameters()}],
                                    lr=opt.lr, weight_decay=opt.weight_decay)
    else:
        optimizer = torch.optim.Adam([{'params': model.parameters()}, {'params': metric_fc.parameters()}],
                                     lr=opt.lr, weight_decay=opt.weight_decay)
    scheduler = StepLR(optimizer, step_size=opt.lr_step, gamma=0.1)
    start = time.time()
    for i in range(opt.max_epoch):
        scheduler.step()
        model.train()
        for ii, data_ in enumerate(trainloader):
            data_input, label = data_
            data_input = data_input.to(device)
            label = label.to(device).long()
            feature = model(data_input)
            output = metric_fc(feature, label)
            loss = criterion(output, label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            iters = i * len(trainloader) + ii
            if iters % opt.print_freq == 0:
                output = output.data.cpu().numpy()
                output = np.argmax(output, axis=1)
                label = label.data.cpu().numpy()
                acc = np.mean((output == label).astype(int))
                speed = opt.print_freq / (time.time() - start)
                time_str = time.asctime(time.localtime(time.time()))
                print('{} train epoch {} iter {} {} iters/s loss {} acc {}'.format(time_str, i, ii, speed,
                                                                                   loss.item(), acc))
                start = time.time()
        if i % opt.save_interval == 0 or i == opt.max_epoch:
            save_model(model, opt.checkpoints_path, opt.backbone, i)
        model.eval()
        acc = lfw_test(model, img_paths, identity_list, opt.lfw_test_list, opt.test_batch_size)
    return acc


if __name__ == '__main__':
    opt = Config()
    np.random.seed(0)  # not in the original: the list permutation, crops and flips repeat from run to run
    try:
        make_faces(opt)
        os.makedirs(opt.checkpoints_path, exist_ok=True)
        train_acc = train_main(opt)
        test_acc = test_main(opt)
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)
    print('done: lfw-style verification accuracy after training %.3f, reloaded %.3f' % (train_acc, test_acc))
