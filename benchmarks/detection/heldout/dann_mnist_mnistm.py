"""Trains a domain-adversarial neural network (DANN) from labelled source digits (MNIST-style, grey) to unlabelled
target digits (MNIST-M-style, the digits blended into colour textures) the way fungtion/DANN's train/main.py does it:
one CNN with a label classifier and, behind a gradient-reversal layer (`ReverseLayerF`), a domain classifier; each
step sums the source label loss and the source/target domain losses with the reversal weight `alpha` ramped by the
training progress; after every epoch the whole model is pickled with `torch.save(my_net, ...)`, and train/test.py's
`test` loads it back with `torch.load`, moves it to the GPU and measures the accuracy on both domains.

Modeled on: fungtion/DANN, train/main.py, train/test.py, models/model.py, models/functions.py and
dataset/data_loader.py at commit 476147f70bb818a63bb3461a6ecc12f97f7ab15e
(https://github.com/fungtion/DANN/blob/476147f70bb818a63bb3461a6ecc12f97f7ab15e/train/main.py and the other files at
the same commit).

Kept: main.py's module-level script (`cuda`, `cudnn.benchmark = True`, `lr`, `batch_size`, `image_size`, `n_epoch`,
`manual_seed = random.randint(1, 10000)` fed to `random.seed` and `torch.manual_seed`); the model and the Adam
optimizer built on the host, then `my_net.cuda()`, `loss_class.cuda()`, `loss_domain.cuda()` under `if cuda:`; the
`requires_grad = True` loop; the epoch loop with `iter()` over both loaders, `alpha = 2. / (1. + np.exp(-10 * p)) -
1`, `my_net.zero_grad()`, the host buffers `input_img = torch.FloatTensor(batch_size, 3, image_size, image_size)`,
`class_label = torch.LongTensor(batch_size)` and `domain_label = torch.zeros(batch_size).long()` (ones for the
target) moved with `.cuda()` together with the batch, then filled with `input_img.resize_as_(s_img).copy_(s_img)` and
`class_label.resize_as_(s_label).copy_(s_label)`; the three NLL losses summed, `err.backward()`, `optimizer.step()`;
the losses printed through `err.cpu().data.numpy()`; `torch.save(my_net, ...)` of the whole model each epoch and
`test(source)`/`test(target)`; test.py's `test` (`torch.load` of that file, `my_net.eval()`, `my_net.cuda()` under
`cuda`, the same host buffers moved and filled, `alpha = 0`, `class_output.data.max(1, keepdim=True)[1]`,
`n_correct += pred.eq(class_label.data.view_as(pred)).cpu().sum()` and `n_correct.data.numpy() * 1.0 / n_total`,
without `torch.no_grad()` as written); `CNNModel` (the `expand` of grey inputs to three channels, `feature.view(-1,
50 * 4 * 4)`, `ReverseLayerF.apply`, `LogSoftmax` heads) and `ReverseLayerF`; `GetLoader` (a label list file whose
lines are parsed with `data[:-3]`/`data[-2]`, `int(labels)` after the transform).

Changed to run here: the code is Python 2 (print statements, `xrange`, `iterator.next()`), here Python 3;
`cuda = True` is `cuda = torch.cuda.is_available()` in both scripts (the author's crashes without a GPU); MNIST and
MNIST-M are not downloaded: `write_synthetic_digits` draws ten seven-segment-style digit glyphs with random jitter and
stroke width, stores the grey source sets as `.npy` arrays read by a small `MNIST` dataset, and the target images
(glyph XOR-blended into a random colour texture, as MNIST-M is made) as `.npy` files listed in
`mnist_m_{train,test}_labels.txt`, read by `GetLoader` with `np.load` instead of PIL; the torchvision transforms
(`Resize` is the identity at 28x28, `ToTensor`, `Normalize`) are numpy functions; the model and data folders are in
a temporary directory removed at the end; `num_workers` 8 -> 0; the per-iteration print is every 5th iteration;
`test` returns the accuracy; `torch.load` of the whole model gets `weights_only=False` (torch >= 2.6).
Shrunk: 640 source and 640 target training images instead of 60000/59001, 200 test images per domain instead of
10000/9001; batch size 128 -> 64; 3 epochs instead of 100.
"""
import os
import random
import shutil
import tempfile

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
import torch.utils.data
import torch.utils.data as data
from torch.autograd import Function

WORKDIR = tempfile.mkdtemp(prefix='dann_')

# ----------------------------------------------------------------------------- synthetic MNIST / MNIST-M

# seven-segment layout: a top, b upper right, c lower right, d bottom, e lower left, f upper left, g middle
SEGMENTS = {
    0: 'abcdef', 1: 'bc', 2: 'abdeg', 3: 'abcdg', 4: 'bcfg', 5: 'acdfg', 6: 'acdefg', 7: 'abc', 8: 'abcdefg',
    9: 'abcdfg'}


def draw_digit(label, rng):
    """A 28x28 grey digit glyph in [0, 255] with random offset and stroke width."""
    img = np.zeros((28, 28), dtype=np.float32)
    t = rng.randint(2, 4)
    x0, y0, w, h = 8 + rng.randint(-2, 3), 4 + rng.randint(-2, 3), 11, 9
    boxes = {'a': (y0, x0, t, w), 'g': (y0 + h, x0, t, w), 'd': (y0 + 2 * h, x0, t, w),
             'f': (y0, x0, h + t, t), 'b': (y0, x0 + w - t, h + t, t),
             'e': (y0 + h, x0, h + t, t), 'c': (y0 + h, x0 + w - t, h + t, t)}
    for seg in SEGMENTS[label]:
        y, x, hh, ww = boxes[seg]
        img[y:y + hh, x:x + ww] = 255.0
    return img


def write_synthetic_digits(root, n_train=640, n_test=200, seed=5):
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(root, 'MNIST'), exist_ok=True)
    for split, n in (('train', n_train), ('test', n_test)):
        labels = rng.randint(10, size=n)
        images = np.stack([draw_digit(l, rng) for l in labels]).astype(np.uint8)
        np.savez(os.path.join(root, 'MNIST', split + '.npz'), images=images, labels=labels)
        folder = os.path.join(root, 'mnist_m', 'mnist_m_' + split)
        os.makedirs(folder, exist_ok=True)
        lines = []
        for i in range(n):
            label = rng.randint(10)
            background = rng.uniform(0, 255, size=(1, 1, 3)) * rng.uniform(0.5, 1.0, size=(28, 28, 3))
            image = np.abs(background - draw_digit(label, rng)[:, :, None]).astype(np.uint8)
            np.save(os.path.join(folder, '%08d.npy' % i), image)
            lines.append('%08d.npy %d\n' % (i, label))
        with open(os.path.join(root, 'mnist_m', 'mnist_m_%s_labels.txt' % split), 'w') as f:
            f.writelines(lines)


def transform(mean, std):
    """transforms.Compose([Resize(28), ToTensor(), Normalize(mean, std)]) for H x W (x C) uint8 arrays."""
    def apply(img):
        img = img.astype(np.float32)[:, :, None] if img.ndim == 2 else img.astype(np.float32)
        img = img.transpose(2, 0, 1) / 255.0
        mean_, std_ = np.array(mean, np.float32)[:, None, None], np.array(std, np.float32)[:, None, None]
        return torch.from_numpy((img - mean_) / std_)
    return apply


class MNIST(data.Dataset):
    """What torchvision's datasets.MNIST returns: (1 x 28 x 28 tensor, int label)."""

    def __init__(self, root, train=True, transform=None, download=False):
        arrays = np.load(os.path.join(root, 'MNIST', 'train.npz' if train else 'test.npz'))
        self.data, self.targets, self.transform = arrays['images'], arrays['labels'], transform

    def __getitem__(self, index):
        return self.transform(self.data[index]), int(self.targets[index])

    def __len__(self):
        return len(self.data)


# ----------------------------------------------------------------------------- dataset/data_loader.py

class GetLoader(data.Dataset):
    def __init__(self, data_root, data_list, transform=None):
        self.root = data_root
        self.transform = transform

        f = open(data_list, 'r')
        data_list = f.readlines()
        f.close()

        self.n_data = len(data_list)

        self.img_paths = []
        self.img_labels = []

        for data in data_list:
            self.img_paths.append(data[:-3])
            self.img_labels.append(data[-2])

    def __getitem__(self, item):
        img_paths, labels = self.img_paths[item], self.img_labels[item]
        imgs = np.load(os.path.join(self.root, img_paths))

        if self.transform is not None:
            imgs = self.transform(imgs)
            labels = int(labels)

        return imgs, labels

    def __len__(self):
        return self.n_data


# ----------------------------------------------------------------------------- models/functions.py, models/model.py

class ReverseLayerF(Function):

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha

        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        output = grad_output.neg() * ctx.alpha

        return output, None


class CNNModel(nn.Module):

    def __init__(self):
        super(CNNModel, self).__init__()
        self.feature = nn.Sequential()
        self.feature.add_module('f_conv1', nn.Conv2d(3, 64, kernel_size=5))
        self.feature.add_module('f_bn1', nn.BatchNorm2d(64))
        self.feature.add_module('f_pool1', nn.MaxPool2d(2))
        self.feature.add_module('f_relu1', nn.ReLU(True))
        self.feature.add_module('f_conv2', nn.Conv2d(64, 50, kernel_size=5))
        self.feature.add_module('f_bn2', nn.BatchNorm2d(50))
        self.feature.add_module('f_drop1', nn.Dropout2d())
        self.feature.add_module('f_pool2', nn.MaxPool2d(2))
        self.feature.add_module('f_relu2', nn.ReLU(True))

        self.class_classifier = nn.Sequential()
        self.class_classifier.add_module('c_fc1', nn.Linear(50 * 4 * 4, 100))
        self.class_classifier.add_module('c_bn1', nn.BatchNorm1d(100))
        self.class_classifier.add_module('c_relu1', nn.ReLU(True))
        self.class_classifier.add_module('c_drop1', nn.Dropout2d())
        self.class_classifier.add_module('c_fc2', nn.Linear(100, 100))
        self.class_classifier.add_module('c_bn2', nn.BatchNorm1d(100))
        self.class_classifier.add_module('c_relu2', nn.ReLU(True))
        self.class_classifier.add_module('c_fc3', nn.Linear(100, 10))
        self.class_classifier.add_module('c_softmax', nn.LogSoftmax())

        self.domain_classifier = nn.Sequential()
        self.domain_classifier.add_module('d_fc1', nn.Linear(50 * 4 * 4, 100))
        self.domain_classifier.add_module('d_bn1', nn.BatchNorm1d(100))
        self.domain_classifier.add_module('d_relu1', nn.ReLU(True))
        self.domain_classifier.add_module('d_fc2', nn.Linear(100, 2))
        self.domain_classifier.add_module('d_softmax', nn.LogSoftmax(dim=1))

    def forward(self, input_data, alpha):
        input_data = input_data.expand(input_data.data.shape[0], 3, 28, 28)
        feature = self.feature(input_data)
        feature = feature.view(-1, 50 * 4 * 4)
        reverse_feature = ReverseLayerF.apply(feature, alpha)
        class_output = self.class_classifier(feature)
        domain_output = self.domain_classifier(reverse_feature)

        return class_output, domain_output


# ----------------------------------------------------------------------------- train/test.py

def test(dataset_name, epoch):
    assert dataset_name in ['MNIST', 'mnist_m']

    model_root = os.path.join(WORKDIR, 'models')
    image_root = os.path.join(WORKDIR, 'dataset', dataset_name)

    cuda = torch.cuda.is_available()
    cudnn.benchmark = True
    batch_size = 64
    image_size = 28
    alpha = 0

    """load data"""

    img_transform_source = transform(mean=(0.1307,), std=(0.3081,))
    img_transform_target = transform(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))

    if dataset_name == 'mnist_m':
        test_list = os.path.join(image_root, 'mnist_m_test_labels.txt')

        dataset = GetLoader(
            data_root=os.path.join(image_root, 'mnist_m_test'),
            data_list=test_list,
            transform=img_transform_target
        )
    else:
        dataset = MNIST(
            root=os.path.join(WORKDIR, 'dataset'),
            train=False,
            transform=img_transform_source,
        )

    dataloader = torch.utils.data.DataLoader(
        dataset=dataset,
        batch_size=batch_size,
        shuffle=False,
        num_workers=0
    )

    """ training """

    my_net = torch.load(os.path.join(
        model_root, 'mnist_mnistm_model_epoch_' + str(epoch) + '.pth'
    ), weights_only=False)
    my_net = my_net.eval()

    if cuda:
        my_net = my_net.cuda()

    len_dataloader = len(dataloader)
    data_target_iter = iter(dataloader)

    i = 0
    n_total = 0
    n_correct = 0

    while i < len_dataloader:

        # test model using target data
        data_target = next(data_target_iter)
        t_img, t_label = data_target

        batch_size = len(t_label)

        input_img = torch.FloatTensor(batch_size, 3, image_size, image_size)
        class_label = torch.LongTensor(batch_size)

        if cuda:
            t_img = t_img.cuda()
            t_label = t_label.cuda()
            input_img = input_img.cuda()
            class_label = class_label.cuda()

        input_img.resize_as_(t_img).copy_(t_img)
        class_label.resize_as_(t_label).copy_(t_label)

        class_output, _ = my_net(input_data=input_img, alpha=alpha)
        pred = class_output.data.max(1, keepdim=True)[1]
        n_correct += pred.eq(class_label.data.view_as(pred)).cpu().sum()
        n_total += batch_size

        i += 1

    accu = n_correct.data.numpy() * 1.0 / n_total

    print('epoch: %d, accuracy of the %s dataset: %f' % (epoch, dataset_name, accu))
    return accu


# ----------------------------------------------------------------------------- train/main.py

source_dataset_name = 'MNIST'
target_dataset_name = 'mnist_m'
source_image_root = os.path.join(WORKDIR, 'dataset', source_dataset_name)
target_image_root = os.path.join(WORKDIR, 'dataset', target_dataset_name)
model_root = os.path.join(WORKDIR, 'models')
cuda = torch.cuda.is_available()
cudnn.benchmark = True
lr = 1e-3
batch_size = 64
image_size = 28
n_epoch = 3

manual_seed = random.randint(1, 10000)
random.seed(manual_seed)
torch.manual_seed(manual_seed)

write_synthetic_digits(os.path.join(WORKDIR, 'dataset'))
os.makedirs(model_root)

# load data

img_transform_source = transform(mean=(0.1307,), std=(0.3081,))
img_transform_target = transform(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))

dataset_source = MNIST(
    root=os.path.join(WORKDIR, 'dataset'),
    train=True,
    transform=img_transform_source,
    download=True
)

dataloader_source = torch.utils.data.DataLoader(
    dataset=dataset_source,
    batch_size=batch_size,
    shuffle=True,
    num_workers=0)

train_list = os.path.join(target_image_root, 'mnist_m_train_labels.txt')

dataset_target = GetLoader(
    data_root=os.path.join(target_image_root, 'mnist_m_train'),
    data_list=train_list,
    transform=img_transform_target
)

dataloader_target = torch.utils.data.DataLoader(
    dataset=dataset_target,
    batch_size=batch_size,
    shuffle=True,
    num_workers=0)

# load model

my_net = CNNModel()

# setup optimizer

optimizer = optim.Adam(my_net.parameters(), lr=lr)

loss_class = torch.nn.NLLLoss()
loss_domain = torch.nn.NLLLoss()

if cuda:
    my_net = my_net.cuda()
    loss_class = loss_class.cuda()
    loss_domain = loss_domain.cuda()

for p in my_net.parameters():
    p.requires_grad = True

# training

for epoch in range(n_epoch):

    len_dataloader = min(len(dataloader_source), len(dataloader_target))
    data_source_iter = iter(dataloader_source)
    data_target_iter = iter(dataloader_target)

    i = 0
    while i < len_dataloader:

        p = float(i + epoch * len_dataloader) / n_epoch / len_dataloader
        alpha = 2. / (1. + np.exp(-10 * p)) - 1

        # training model using source data
        data_source = next(data_source_iter)
        s_img, s_label = data_source

        my_net.zero_grad()
        batch_size = len(s_label)

        input_img = torch.FloatTensor(batch_size, 3, image_size, image_size)
        class_label = torch.LongTensor(batch_size)
        domain_label = torch.zeros(batch_size)
        domain_label = domain_label.long()

        if cuda:
            s_img = s_img.cuda()
            s_label = s_label.cuda()
            input_img = input_img.cuda()
            class_label = class_label.cuda()
            domain_label = domain_label.cuda()

        input_img.resize_as_(s_img).copy_(s_img)
        class_label.resize_as_(s_label).copy_(s_label)

        class_output, domain_output = my_net(input_data=input_img, alpha=alpha)
        err_s_label = loss_class(class_output, class_label)
        err_s_domain = loss_domain(domain_output, domain_label)

        # training model using target data
        data_target = next(data_target_iter)
        t_img, _ = data_target

        batch_size = len(t_img)

        input_img = torch.FloatTensor(batch_size, 3, image_size, image_size)
        domain_label = torch.ones(batch_size)
        domain_label = domain_label.long()

        if cuda:
            t_img = t_img.cuda()
            input_img = input_img.cuda()
            domain_label = domain_label.cuda()

        input_img.resize_as_(t_img).copy_(t_img)

        _, domain_output = my_net(input_data=input_img, alpha=alpha)
        err_t_domain = loss_domain(domain_output, domain_label)
        err = err_t_domain + err_s_domain + err_s_label
        err.backward()
        optimizer.step()

        i += 1

        if i % 5 == 0:
            print('epoch: %d, [iter: %d / all %d], err_s_label: %f, err_s_domain: %f, err_t_domain: %f'
                  % (epoch, i, len_dataloader, err_s_label.cpu().data.numpy(),
                     err_s_domain.cpu().data.numpy(), err_t_domain.cpu().data.numpy()))

    torch.save(my_net, '{0}/mnist_mnistm_model_epoch_{1}.pth'.format(model_root, epoch))
    accu_s = test(source_dataset_name, epoch)
    accu_t = test(target_dataset_name, epoch)

shutil.rmtree(WORKDIR, ignore_errors=True)
print('done: source accuracy %.3f, target accuracy %.3f' % (accu_s, accu_t))
