"""Trains Deep SVDD (Ruff et al., "Deep One-Class Classification") for one-class anomaly detection on MNIST-style
digits: `AETrainer` pretrains `MNIST_LeNet_Autoencoder`, its encoder weights initialise `MNIST_LeNet`,
`DeepSVDDTrainer.init_center_c` sets the hypersphere centre from a forward pass, the net pulls normal samples
towards it and `test` scores test images by their distance (AUC). The trainers carry the device as a plain string
(``'cuda'`` by default, replaced by ``'cpu'`` in `main` when CUDA is missing), move nets with
``net.to(self.device)`` and batches with ``inputs.to(self.device)``, hold ``R`` and ``c`` as tensors made with
``torch.tensor(..., device=self.device)`` and read results with ``.cpu().data.numpy()``; `DeepSVDD` keeps ``R`` as
a float and ``c`` as a list, saves them with the state dicts and reloads them with ``torch.load(model_path)``.
Runs twice: one-class objective with pretraining, then soft-boundary Deep SVDD resumed from the saved model.

Modeled on: lukasruff/Deep-SVDD-PyTorch, src/main.py, src/deepSVDD.py, src/optim/deepSVDD_trainer.py,
src/optim/ae_trainer.py, src/base/*.py, src/networks/mnist_LeNet.py, src/datasets/mnist.py and
src/datasets/preprocessing.py at commit 1901612d595e23675fb75c4ebb563dd0ffebc21e
(https://github.com/lukasruff/Deep-SVDD-PyTorch/tree/1901612d595e23675fb75c4ebb563dd0ffebc21e/src).

Kept: `BaseADDataset`/`TorchvisionDataset.loaders`, `MyMNIST.__getitem__` returning ``(img, target, index)``,
`global_contrast_normalization`, `get_target_label_idx`; `BaseNet`, `MNIST_LeNet`, `MNIST_LeNet_Autoencoder`;
`BaseTrainer` storing ``device``; `AETrainer.train/test`, `DeepSVDDTrainer.train/test/init_center_c`
(``torch.zeros(net.rep_dim, device=self.device)``, the +-eps fix, the soft-boundary loss with ``torch.zeros_like``,
``self.R.data = torch.tensor(get_radius(dist, self.nu), device=self.device)`` after the warm-up, ``scheduler.step()``
at the start of each epoch as the authors wrote it); `DeepSVDD` with `init_network_weights_from_pretraining`,
`save_model`, `load_model` (``torch.load`` without ``map_location``), `save_results`; `Config`; `main`'s flow.

Changed to run here: MNIST is replaced by synthetic 28x28 digits (ten noisy class prototypes) in an .npz file in a
temporary folder; the torchvision transforms become a plain function (GCN + min-max scaling with bounds computed
from the normal class instead of the hard-coded table); sklearn's `roc_auc_score` is a rank-based numpy version;
click is replaced by keyword arguments; image grids are not plotted; CIFAR-10 parts are left out; blank lines
between methods dropped for length.
Shrunk: 1200 training images (normal class only used) and 400 test images; 3 pretraining and 4 training epochs
with milestone 2; batch 64; soft-boundary warm-up 1 epoch instead of 10 (a trainer argument here).
"""
import json
import logging
import os
import random
import tempfile
import time
from abc import ABC, abstractmethod

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset, Subset

def roc_auc_score(labels, scores):
    """Area under the ROC curve from the Mann-Whitney U statistic (stand-in for sklearn.metrics)."""
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind='mergesort')] = np.arange(1, len(scores) + 1)
    n_pos, n_neg = labels.sum(), len(labels) - labels.sum()
    return (ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)

class Config(object):
    """Base class for experimental setting/configuration."""
    def __init__(self, settings):
        self.settings = settings
    def save_config(self, export_json):
        with open(export_json, 'w') as fp:
            json.dump(self.settings, fp)

def get_target_label_idx(labels, targets):
    return np.argwhere(np.isin(labels, targets)).flatten().tolist()

def global_contrast_normalization(x: torch.tensor, scale='l2'):
    assert scale in ('l1', 'l2')
    n_features = int(np.prod(x.shape))
    x -= torch.mean(x)  # mean over all features (pixels) per sample
    if scale == 'l1':
        x_scale = torch.mean(torch.abs(x))
    if scale == 'l2':
        x_scale = torch.sqrt(torch.sum(x ** 2)) / n_features
    x /= x_scale
    return x

class BaseADDataset(ABC):
    """Anomaly detection dataset base class."""
    def __init__(self, root: str):
        super().__init__()
        self.root = root  # root path to data
        self.n_classes = 2  # 0: normal, 1: outlier
        self.normal_classes = self.outlier_classes = None
        self.train_set = self.test_set = None  # must be of type torch.utils.data.Dataset
    @abstractmethod
    def loaders(self, batch_size: int, shuffle_train=True, shuffle_test=False, num_workers: int = 0):
        pass

class TorchvisionDataset(BaseADDataset):
    def loaders(self, batch_size: int, shuffle_train=True, shuffle_test=False, num_workers: int = 0):
        train_loader = DataLoader(dataset=self.train_set, batch_size=batch_size, shuffle=shuffle_train,
                                  num_workers=num_workers)
        test_loader = DataLoader(dataset=self.test_set, batch_size=batch_size, shuffle=shuffle_test,
                                 num_workers=num_workers)
        return train_loader, test_loader

def make_synthetic_mnist(root, n_train=1200, n_test=400, seed=0):
    """Ten blurry stroke prototypes plus noise, stored as uint8 like the MNIST files."""
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    protos = np.zeros((10, 28, 28))
    for k in range(10):
        for cy, cx in rng.randint(6, 22, size=(3, 2)):
            protos[k] += np.exp(-(((yy - cy) / (2 + k % 3)) ** 2 + ((xx - cx) / (2 + k // 4)) ** 2))
        protos[k] /= protos[k].max()
    def sample(n):
        labels = rng.randint(0, 10, size=n)
        imgs = protos[labels] + 0.15 * rng.randn(n, 28, 28)
        return (np.clip(imgs, 0, 1) * 255).astype(np.uint8), labels.astype(np.int64)
    (train_data, train_labels), (test_data, test_labels) = sample(n_train), sample(n_test)
    np.savez(os.path.join(root, 'mnist_synthetic.npz'), train_data=train_data, train_labels=train_labels,
             test_data=test_data, test_labels=test_labels)

class MyMNIST(Dataset):
    """MNIST-like set whose __getitem__ also returns the index of a data sample."""
    def __init__(self, root, train=True, transform=None, target_transform=None):
        arrays = np.load(os.path.join(root, 'mnist_synthetic.npz'))
        self.train = train
        split = 'train' if self.train else 'test'
        setattr(self, split + '_data', torch.from_numpy(arrays[split + '_data']))
        setattr(self, split + '_labels', torch.from_numpy(arrays[split + '_labels']))
        self.transform, self.target_transform = transform, target_transform
    def __len__(self):
        return len(self.train_data) if self.train else len(self.test_data)
    def __getitem__(self, index):
        if self.train:
            img, target = self.train_data[index], self.train_labels[index]
        else:
            img, target = self.test_data[index], self.test_labels[index]
        img = img.float().div(255).unsqueeze(0)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target, index  # only line changed

class MNIST_Dataset(TorchvisionDataset):
    def __init__(self, root: str, normal_class=0):
        super().__init__(root)
        self.n_classes = 2  # 0: normal, 1: outlier
        self.normal_classes = tuple([normal_class])
        self.outlier_classes = list(range(0, 10))
        self.outlier_classes.remove(normal_class)
        train_set = MyMNIST(root=self.root, train=True)
        train_idx_normal = get_target_label_idx(train_set.train_labels.clone().data.cpu().numpy(), self.normal_classes)
        # min and max values (after applying GCN) of the normal class, as the authors precomputed per class
        gcn = [global_contrast_normalization(train_set[i][0], scale='l1') for i in train_idx_normal]
        min_max = (min(float(x.min()) for x in gcn), max(float(x.max()) for x in gcn))
        def transform(x):
            x = global_contrast_normalization(x, scale='l1')
            return (x - min_max[0]) / (min_max[1] - min_max[0])
        def target_transform(x):
            return int(x in self.outlier_classes)
        train_set.transform, train_set.target_transform = transform, target_transform
        self.train_set = Subset(train_set, train_idx_normal)
        self.test_set = MyMNIST(root=self.root, train=False, transform=transform, target_transform=target_transform)

def load_dataset(dataset_name, data_path, normal_class):
    assert dataset_name in ('mnist',)
    return MNIST_Dataset(root=data_path, normal_class=normal_class)

class BaseNet(nn.Module):
    """Base class for all neural networks."""
    def __init__(self):
        super().__init__()
        self.logger = logging.getLogger(self.__class__.__name__)
        self.rep_dim = None  # representation dimensionality, i.e. dim of the last layer

class MNIST_LeNet(BaseNet):
    def __init__(self):
        super().__init__()
        self.rep_dim = 32
        self.pool = nn.MaxPool2d(2, 2)
        self.conv1 = nn.Conv2d(1, 8, 5, bias=False, padding=2)
        self.bn1 = nn.BatchNorm2d(8, eps=1e-04, affine=False)
        self.conv2 = nn.Conv2d(8, 4, 5, bias=False, padding=2)
        self.bn2 = nn.BatchNorm2d(4, eps=1e-04, affine=False)
        self.fc1 = nn.Linear(4 * 7 * 7, self.rep_dim, bias=False)
    def forward(self, x):
        x = self.conv1(x)
        x = self.pool(F.leaky_relu(self.bn1(x)))
        x = self.conv2(x)
        x = self.pool(F.leaky_relu(self.bn2(x)))
        x = x.view(x.size(0), -1)
        x = self.fc1(x)
        return x

class MNIST_LeNet_Autoencoder(BaseNet):
    def __init__(self):
        super().__init__()
        self.rep_dim = 32
        self.pool = nn.MaxPool2d(2, 2)
        # Encoder (must match the Deep SVDD network above)
        self.conv1 = nn.Conv2d(1, 8, 5, bias=False, padding=2)
        self.bn1 = nn.BatchNorm2d(8, eps=1e-04, affine=False)
        self.conv2 = nn.Conv2d(8, 4, 5, bias=False, padding=2)
        self.bn2 = nn.BatchNorm2d(4, eps=1e-04, affine=False)
        self.fc1 = nn.Linear(4 * 7 * 7, self.rep_dim, bias=False)
        # Decoder
        self.deconv1 = nn.ConvTranspose2d(2, 4, 5, bias=False, padding=2)
        self.bn3 = nn.BatchNorm2d(4, eps=1e-04, affine=False)
        self.deconv2 = nn.ConvTranspose2d(4, 8, 5, bias=False, padding=3)
        self.bn4 = nn.BatchNorm2d(8, eps=1e-04, affine=False)
        self.deconv3 = nn.ConvTranspose2d(8, 1, 5, bias=False, padding=2)
    def forward(self, x):
        x = self.conv1(x)
        x = self.pool(F.leaky_relu(self.bn1(x)))
        x = self.conv2(x)
        x = self.pool(F.leaky_relu(self.bn2(x)))
        x = x.view(x.size(0), -1)
        x = self.fc1(x)
        x = x.view(x.size(0), int(self.rep_dim / 16), 4, 4)
        x = F.interpolate(F.leaky_relu(x), scale_factor=2)
        x = self.deconv1(x)
        x = F.interpolate(F.leaky_relu(self.bn3(x)), scale_factor=2)
        x = self.deconv2(x)
        x = F.interpolate(F.leaky_relu(self.bn4(x)), scale_factor=2)
        x = self.deconv3(x)
        x = torch.sigmoid(x)
        return x

def build_network(net_name):
    assert net_name in ('mnist_LeNet',)
    return MNIST_LeNet()

def build_autoencoder(net_name):
    assert net_name in ('mnist_LeNet',)
    return MNIST_LeNet_Autoencoder()

class BaseTrainer(ABC):
    """Trainer base class."""
    def __init__(self, optimizer_name: str, lr: float, n_epochs: int, lr_milestones: tuple, batch_size: int,
                 weight_decay: float, device: str, n_jobs_dataloader: int):
        super().__init__()
        self.optimizer_name = optimizer_name
        self.lr = lr
        self.n_epochs = n_epochs
        self.lr_milestones = lr_milestones
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.device = device
        self.n_jobs_dataloader = n_jobs_dataloader
    @abstractmethod
    def train(self, dataset: BaseADDataset, net: BaseNet) -> BaseNet:
        pass
    @abstractmethod
    def test(self, dataset: BaseADDataset, net: BaseNet):
        pass

class AETrainer(BaseTrainer):
    def __init__(self, optimizer_name: str = 'adam', lr: float = 0.001, n_epochs: int = 150, lr_milestones: tuple = (),
                 batch_size: int = 128, weight_decay: float = 1e-6, device: str = 'cuda', n_jobs_dataloader: int = 0):
        super().__init__(optimizer_name, lr, n_epochs, lr_milestones, batch_size, weight_decay, device,
                         n_jobs_dataloader)
    def train(self, dataset: BaseADDataset, ae_net: BaseNet):
        logger = logging.getLogger()
        # Set device for network
        ae_net = ae_net.to(self.device)
        train_loader, _ = dataset.loaders(batch_size=self.batch_size, num_workers=self.n_jobs_dataloader)
        optimizer = optim.Adam(ae_net.parameters(), lr=self.lr, weight_decay=self.weight_decay,
                               amsgrad=self.optimizer_name == 'amsgrad')
        scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=self.lr_milestones, gamma=0.1)
        start_time = time.time()
        ae_net.train()
        for epoch in range(self.n_epochs):
            scheduler.step()
            if epoch in self.lr_milestones:
                logger.info('  LR scheduler: new learning rate is %g' % float(scheduler.get_lr()[0]))
            loss_epoch, n_batches, epoch_start_time = 0.0, 0, time.time()
            for data in train_loader:
                inputs, _, _ = data
                inputs = inputs.to(self.device)
                optimizer.zero_grad()
                outputs = ae_net(inputs)
                scores = torch.sum((outputs - inputs) ** 2, dim=tuple(range(1, outputs.dim())))
                loss = torch.mean(scores)
                loss.backward()
                optimizer.step()
                loss_epoch += loss.item()
                n_batches += 1
            epoch_train_time = time.time() - epoch_start_time
            logger.info('  Epoch {}/{}\t Time: {:.3f}\t Loss: {:.8f}'
                        .format(epoch + 1, self.n_epochs, epoch_train_time, loss_epoch / n_batches))
        logger.info('Pretraining time: %.3f' % (time.time() - start_time))
        return ae_net
    def test(self, dataset: BaseADDataset, ae_net: BaseNet):
        logger = logging.getLogger()
        ae_net = ae_net.to(self.device)
        _, test_loader = dataset.loaders(batch_size=self.batch_size, num_workers=self.n_jobs_dataloader)
        loss_epoch, n_batches, idx_label_score = 0.0, 0, []
        ae_net.eval()
        with torch.no_grad():
            for data in test_loader:
                inputs, labels, idx = data
                inputs = inputs.to(self.device)
                outputs = ae_net(inputs)
                scores = torch.sum((outputs - inputs) ** 2, dim=tuple(range(1, outputs.dim())))
                loss = torch.mean(scores)
                idx_label_score += list(zip(idx.cpu().data.numpy().tolist(),
                                            labels.cpu().data.numpy().tolist(),
                                            scores.cpu().data.numpy().tolist()))
                loss_epoch += loss.item()
                n_batches += 1
        _, labels, scores = zip(*idx_label_score)
        auc = roc_auc_score(np.array(labels), np.array(scores))
        logger.info('Test set AUC: {:.2f}%'.format(100. * auc))
        print('autoencoder test loss %.6f, AUC %.4f' % (loss_epoch / n_batches, auc))

class DeepSVDDTrainer(BaseTrainer):
    def __init__(self, objective, R, c, nu: float, optimizer_name: str = 'adam', lr: float = 0.001, n_epochs: int = 150,
                 lr_milestones: tuple = (), batch_size: int = 128, weight_decay: float = 1e-6, device: str = 'cuda',
                 n_jobs_dataloader: int = 0, warm_up_n_epochs: int = 10):
        super().__init__(optimizer_name, lr, n_epochs, lr_milestones, batch_size, weight_decay, device,
                         n_jobs_dataloader)
        assert objective in ('one-class', 'soft-boundary'), "Objective must be either 'one-class' or 'soft-boundary'."
        self.objective = objective
        # Deep SVDD parameters
        self.R = torch.tensor(R, device=self.device)  # radius R initialized with 0 by default.
        self.c = torch.tensor(c, device=self.device) if c is not None else None
        self.nu = nu
        # number of training epochs for soft-boundary Deep SVDD before radius R gets updated
        self.warm_up_n_epochs = warm_up_n_epochs
        # Results
        self.train_time = self.test_auc = self.test_time = self.test_scores = None
    def train(self, dataset: BaseADDataset, net: BaseNet):
        logger = logging.getLogger()
        net = net.to(self.device)
        train_loader, _ = dataset.loaders(batch_size=self.batch_size, num_workers=self.n_jobs_dataloader)
        optimizer = optim.Adam(net.parameters(), lr=self.lr, weight_decay=self.weight_decay,
                               amsgrad=self.optimizer_name == 'amsgrad')
        scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=self.lr_milestones, gamma=0.1)
        # Initialize hypersphere center c (if c not loaded)
        if self.c is None:
            logger.info('Initializing center c...')
            self.c = self.init_center_c(train_loader, net)
        start_time = time.time()
        net.train()
        for epoch in range(self.n_epochs):
            scheduler.step()
            if epoch in self.lr_milestones:
                logger.info('  LR scheduler: new learning rate is %g' % float(scheduler.get_lr()[0]))
            loss_epoch, n_batches, epoch_start_time = 0.0, 0, time.time()
            for data in train_loader:
                inputs, _, _ = data
                inputs = inputs.to(self.device)
                optimizer.zero_grad()
                outputs = net(inputs)
                dist = torch.sum((outputs - self.c) ** 2, dim=1)
                if self.objective == 'soft-boundary':
                    scores = dist - self.R ** 2
                    loss = self.R ** 2 + (1 / self.nu) * torch.mean(torch.max(torch.zeros_like(scores), scores))
                else:
                    loss = torch.mean(dist)
                loss.backward()
                optimizer.step()
                # Update hypersphere radius R on mini-batch distances
                if (self.objective == 'soft-boundary') and (epoch >= self.warm_up_n_epochs):
                    self.R.data = torch.tensor(get_radius(dist, self.nu), device=self.device)
                loss_epoch += loss.item()
                n_batches += 1
            epoch_train_time = time.time() - epoch_start_time
            logger.info('  Epoch {}/{}\t Time: {:.3f}\t Loss: {:.8f}'
                        .format(epoch + 1, self.n_epochs, epoch_train_time, loss_epoch / n_batches))
            print('%s epoch %d loss %.6f' % (self.objective, epoch + 1, loss_epoch / n_batches))
        self.train_time = time.time() - start_time
        logger.info('Training time: %.3f' % self.train_time)
        return net
    def test(self, dataset: BaseADDataset, net: BaseNet):
        logger = logging.getLogger()
        net = net.to(self.device)
        _, test_loader = dataset.loaders(batch_size=self.batch_size, num_workers=self.n_jobs_dataloader)
        start_time = time.time()
        idx_label_score = []
        net.eval()
        with torch.no_grad():
            for data in test_loader:
                inputs, labels, idx = data
                inputs = inputs.to(self.device)
                outputs = net(inputs)
                dist = torch.sum((outputs - self.c) ** 2, dim=1)
                if self.objective == 'soft-boundary':
                    scores = dist - self.R ** 2
                else:
                    scores = dist
                idx_label_score += list(zip(idx.cpu().data.numpy().tolist(),
                                            labels.cpu().data.numpy().tolist(),
                                            scores.cpu().data.numpy().tolist()))
        self.test_time = time.time() - start_time
        self.test_scores = idx_label_score
        _, labels, scores = zip(*idx_label_score)
        self.test_auc = roc_auc_score(np.array(labels), np.array(scores))
        logger.info('Test set AUC: {:.2f}%'.format(100. * self.test_auc))
    def init_center_c(self, train_loader: DataLoader, net: BaseNet, eps=0.1):
        """Initialize hypersphere center c as the mean from an initial forward pass on the data."""
        n_samples = 0
        c = torch.zeros(net.rep_dim, device=self.device)
        net.eval()
        with torch.no_grad():
            for data in train_loader:
                inputs, _, _ = data
                inputs = inputs.to(self.device)
                outputs = net(inputs)
                n_samples += outputs.shape[0]
                c += torch.sum(outputs, dim=0)
        c /= n_samples
        # If c_i is too close to 0, set to +-eps. Reason: a zero unit can be trivially matched with zero weights.
        c[(abs(c) < eps) & (c < 0)] = -eps
        c[(abs(c) < eps) & (c > 0)] = eps
        return c

def get_radius(dist: torch.Tensor, nu: float):
    """Optimally solve for radius R via the (1-nu)-quantile of distances."""
    return np.quantile(np.sqrt(dist.clone().data.cpu().numpy()), 1 - nu)

class DeepSVDD(object):
    """A class for the Deep SVDD method."""
    def __init__(self, objective: str = 'one-class', nu: float = 0.1):
        assert objective in ('one-class', 'soft-boundary'), "Objective must be either 'one-class' or 'soft-boundary'."
        self.objective = objective
        assert (0 < nu) & (nu <= 1), "For hyperparameter nu, it must hold: 0 < nu <= 1."
        self.nu = nu
        self.R = 0.0  # hypersphere radius R
        self.c = None  # hypersphere center c
        self.net_name = self.net = None  # neural network \phi
        self.trainer = self.optimizer_name = None
        self.ae_net = self.ae_trainer = self.ae_optimizer_name = None  # autoencoder network for pretraining
        self.results = {'train_time': None, 'test_auc': None, 'test_time': None, 'test_scores': None}
    def set_network(self, net_name):
        self.net_name = net_name
        self.net = build_network(net_name)
    def train(self, dataset: BaseADDataset, optimizer_name: str = 'adam', lr: float = 0.001, n_epochs: int = 50,
              lr_milestones: tuple = (), batch_size: int = 128, weight_decay: float = 1e-6, device: str = 'cuda',
              n_jobs_dataloader: int = 0, warm_up_n_epochs: int = 10):
        self.optimizer_name = optimizer_name
        self.trainer = DeepSVDDTrainer(self.objective, self.R, self.c, self.nu, optimizer_name, lr=lr,
                                       n_epochs=n_epochs, lr_milestones=lr_milestones, batch_size=batch_size,
                                       weight_decay=weight_decay, device=device, n_jobs_dataloader=n_jobs_dataloader,
                                       warm_up_n_epochs=warm_up_n_epochs)
        self.net = self.trainer.train(dataset, self.net)
        self.R = float(self.trainer.R.cpu().data.numpy())  # get float
        self.c = self.trainer.c.cpu().data.numpy().tolist()  # get list
        self.results['train_time'] = self.trainer.train_time
    def test(self, dataset: BaseADDataset, device: str = 'cuda', n_jobs_dataloader: int = 0):
        if self.trainer is None:
            self.trainer = DeepSVDDTrainer(self.objective, self.R, self.c, self.nu,
                                           device=device, n_jobs_dataloader=n_jobs_dataloader)
        self.trainer.test(dataset, self.net)
        self.results.update(test_auc=self.trainer.test_auc, test_time=self.trainer.test_time,
                            test_scores=self.trainer.test_scores)
    def pretrain(self, dataset: BaseADDataset, optimizer_name: str = 'adam', lr: float = 0.001, n_epochs: int = 100,
                 lr_milestones: tuple = (), batch_size: int = 128, weight_decay: float = 1e-6, device: str = 'cuda',
                 n_jobs_dataloader: int = 0):
        self.ae_net = build_autoencoder(self.net_name)
        self.ae_optimizer_name = optimizer_name
        self.ae_trainer = AETrainer(optimizer_name, lr=lr, n_epochs=n_epochs, lr_milestones=lr_milestones,
                                    batch_size=batch_size, weight_decay=weight_decay, device=device,
                                    n_jobs_dataloader=n_jobs_dataloader)
        self.ae_net = self.ae_trainer.train(dataset, self.ae_net)
        self.ae_trainer.test(dataset, self.ae_net)
        self.init_network_weights_from_pretraining()
    def init_network_weights_from_pretraining(self):
        """Initialize the Deep SVDD network weights from the encoder weights of the pretraining autoencoder."""
        net_dict = self.net.state_dict()
        ae_net_dict = self.ae_net.state_dict()
        # Filter out decoder network keys
        ae_net_dict = {k: v for k, v in ae_net_dict.items() if k in net_dict}
        net_dict.update(ae_net_dict)
        self.net.load_state_dict(net_dict)
    def save_model(self, export_model, save_ae=True):
        net_dict = self.net.state_dict()
        ae_net_dict = self.ae_net.state_dict() if save_ae else None
        torch.save({'R': self.R, 'c': self.c, 'net_dict': net_dict, 'ae_net_dict': ae_net_dict}, export_model)
    def load_model(self, model_path, load_ae=False):
        model_dict = torch.load(model_path)
        self.R = model_dict['R']
        self.c = model_dict['c']
        self.net.load_state_dict(model_dict['net_dict'])
        if load_ae:
            if self.ae_net is None:
                self.ae_net = build_autoencoder(self.net_name)
            self.ae_net.load_state_dict(model_dict['ae_net_dict'])
    def save_results(self, export_json):
        with open(export_json, 'w') as fp:
            json.dump(self.results, fp)

def main(dataset_name, net_name, xp_path, data_path, load_model=None, objective='one-class', nu=0.1,
         device='cuda', seed=-1, optimizer_name='adam', lr=0.001, n_epochs=50, lr_milestone=(0,), batch_size=128,
         weight_decay=1e-6, pretrain=True, ae_optimizer_name='adam', ae_lr=0.001, ae_n_epochs=100,
         ae_lr_milestone=(0,), ae_batch_size=128, ae_weight_decay=1e-6, n_jobs_dataloader=0, normal_class=0,
         warm_up_n_epochs=10):
    cfg = Config(locals().copy())
    logging.basicConfig(level=logging.INFO)
    logger = logging.getLogger()
    logger.setLevel(logging.INFO)
    file_handler = logging.FileHandler(xp_path + '/log.txt')
    file_handler.setLevel(logging.INFO)
    file_handler.setFormatter(logging.Formatter('%(asctime)s - %(name)s - %(levelname)s - %(message)s'))
    logger.addHandler(file_handler)
    logger.info('Dataset: %s, normal class: %d, network: %s, objective: %s' % (
        dataset_name, normal_class, net_name, cfg.settings['objective']))
    if cfg.settings['seed'] != -1:
        random.seed(cfg.settings['seed'])
        np.random.seed(cfg.settings['seed'])
        torch.manual_seed(cfg.settings['seed'])
    # Default device to 'cpu' if cuda is not available
    if not torch.cuda.is_available():
        device = 'cpu'
    logger.info('Computation device: %s' % device)
    dataset = load_dataset(dataset_name, data_path, normal_class)
    deep_SVDD = DeepSVDD(cfg.settings['objective'], cfg.settings['nu'])
    deep_SVDD.set_network(net_name)
    # If specified, load Deep SVDD model (radius R, center c, network weights, and possibly autoencoder weights)
    if load_model:
        deep_SVDD.load_model(model_path=load_model, load_ae=True)
    if pretrain:
        deep_SVDD.pretrain(dataset, optimizer_name=cfg.settings['ae_optimizer_name'], lr=cfg.settings['ae_lr'],
                           n_epochs=cfg.settings['ae_n_epochs'], lr_milestones=cfg.settings['ae_lr_milestone'],
                           batch_size=cfg.settings['ae_batch_size'], weight_decay=cfg.settings['ae_weight_decay'],
                           device=device, n_jobs_dataloader=n_jobs_dataloader)
    deep_SVDD.train(dataset, optimizer_name=cfg.settings['optimizer_name'], lr=cfg.settings['lr'],
                    n_epochs=cfg.settings['n_epochs'], lr_milestones=cfg.settings['lr_milestone'],
                    batch_size=cfg.settings['batch_size'], weight_decay=cfg.settings['weight_decay'],
                    device=device, n_jobs_dataloader=n_jobs_dataloader, warm_up_n_epochs=warm_up_n_epochs)
    deep_SVDD.test(dataset, device=device, n_jobs_dataloader=n_jobs_dataloader)
    # Most anomalous and most normal (within-class) test samples
    indices, labels, scores = zip(*deep_SVDD.results['test_scores'])
    indices, labels, scores = np.array(indices), np.array(labels), np.array(scores)
    idx_sorted = indices[labels == 0][np.argsort(scores[labels == 0])]  # sorted from lowest to highest anomaly score
    print('%s test AUC %.4f, R %.4f, most normal %s, most anomalous %s' % (
        objective, deep_SVDD.results['test_auc'], deep_SVDD.R, idx_sorted[:3].tolist(), idx_sorted[-3:].tolist()))
    deep_SVDD.save_results(export_json=xp_path + '/results.json')
    deep_SVDD.save_model(export_model=xp_path + '/model.tar')
    cfg.save_config(export_json=xp_path + '/config.json')
    logger.removeHandler(file_handler)
    file_handler.close()
    return xp_path + '/model.tar'

if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as root:
        data_path, xp_path = os.path.join(root, 'data'), os.path.join(root, 'log')
        os.makedirs(data_path)
        os.makedirs(xp_path)
        make_synthetic_mnist(data_path)
        common = dict(device='cuda', seed=0, lr=1e-3, lr_milestone=(2,), batch_size=64, ae_lr=1e-3,
                      ae_lr_milestone=(2,), ae_batch_size=64, normal_class=0)
        model_path = main('mnist', 'mnist_LeNet', xp_path, data_path, objective='one-class', n_epochs=4,
                          pretrain=True, ae_n_epochs=3, **common)
        main('mnist', 'mnist_LeNet', xp_path, data_path, load_model=model_path, objective='soft-boundary', nu=0.1,
             n_epochs=3, pretrain=False, warm_up_n_epochs=1, **common)
    print('done')
