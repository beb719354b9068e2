"""Trains a Prototypical Network for few-shot classification with episodic batches, validates each epoch, keeps the
best state, tests the last and the best model, and reloads the best checkpoint for a last test.

Modeled on: orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch, src/train.py, src/protonet.py,
src/prototypical_loss.py, src/prototypical_batch_sampler.py and src/parser_util.py
(https://github.com/orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch/blob/df89808d708637b769a41f27416b911758b8efb7/src/train.py,
https://github.com/orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch/blob/df89808d708637b769a41f27416b911758b8efb7/src/protonet.py,
https://github.com/orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch/blob/df89808d708637b769a41f27416b911758b8efb7/src/prototypical_loss.py,
https://github.com/orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch/blob/df89808d708637b769a41f27416b911758b8efb7/src/prototypical_batch_sampler.py,
https://github.com/orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch/blob/df89808d708637b769a41f27416b911758b8efb7/src/parser_util.py).

Kept: `device = 'cuda:0' if torch.cuda.is_available() and opt.cuda else 'cpu'` recomputed in `init_protonet`,
`train` and `test` (the `--cuda` flag becomes `cuda=torch.cuda.is_available()` in the options namespace, with the
author's warning when a GPU is present but the flag is off); `init_seed` with `torch.cuda.cudnn_enabled = False`,
`torch.cuda.manual_seed`; `ProtoNet().to(device)` then Adam and StepLR; the episodic batch sampler building its
index table and batches with CPU `torch.Tensor`/`torch.LongTensor`/`torch.randperm`; `x, y = x.to(device),
y.to(device)` in train, validation and test; the loss moving `target.to('cpu')` and `input.to('cpu')`, taking the
prototypes and queries on the CPU (`input.to('cpu')[query_idxs]`, `torch.arange` target indices) and back-propagating
through the device-to-host copy; `loss.item()`/`acc.item()`; `model.train()` at each epoch, `model.eval()` before
validation with no `torch.no_grad()` (as written), and `test()` with neither (it inherits the eval mode left by the
last validation); `torch.save(model.state_dict(), best_model_path)` when validation improves, `best_state =
model.state_dict()` (live references, as written), the last model saved, `model.load_state_dict(best_state)` before
the second test. From the author's `eval()` (which does not run as written): a fresh `init_protonet(options)` with
`model.load_state_dict(torch.load(model_path))` of `best_model.pth`, then `test`; the author's `eval()` never calls
`model.eval()`, so its fresh model would be tested with BatchNorm in training mode (a real bug, which ferry's sanitizer
flagged on the first version of this program); a `model.eval()` after the load is added here.

Shrunk: synthetic "Omniglot" (1x28x28 images: each class a fixed random stroke mask, jittered by a random shift and
pixel noise, inverted like `1.0 - x`), 16 training, 8 validation and 8 test classes of 20 images; hid_dim and z_dim
16; 5-way episodes with 5 support and 5 query per class, 8 episodes per epoch, 4 epochs, StepLR step 2; the test loop
keeps its 10 passes; no tqdm; the experiment root is a temporary directory.
"""
import argparse
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.utils.data as data
from torch.nn import functional as F


# ----------------------------------------------------------------------------- omniglot_dataset.py (synthetic)

class OmniglotDataset(data.Dataset):
    splits = {'train': (0, 16), 'val': (16, 24), 'test': (24, 32)}

    def __init__(self, mode='train', root=None, per_class=20):
        super(OmniglotDataset, self).__init__()
        lo, hi = self.splits[mode]
        rng = np.random.RandomState(1234)
        masks = [(rng.rand(28, 28) < 0.15).astype(np.float32) for _ in range(32)]
        rng = np.random.RandomState(lo + 1)
        xs, ys = [], []
        for c in range(lo, hi):
            for k in range(per_class):
                dy, dx = rng.randint(-2, 3, size=2)
                img = np.roll(np.roll(masks[c], dy, axis=0), dx, axis=1)
                img = np.clip(img + rng.normal(0, 0.3, size=img.shape), 0, 1).astype(np.float32)
                xs.append(img[None])
                ys.append(c)
        self.x = [1.0 - torch.from_numpy(x) for x in xs]
        self.y = ys

    def __getitem__(self, idx):
        x = self.x[idx]
        return x, self.y[idx]

    def __len__(self):
        return len(self.x)


# ----------------------------------------------------------------------------- prototypical_batch_sampler.py

class PrototypicalBatchSampler(object):
    def __init__(self, labels, classes_per_it, num_samples, iterations):
        super(PrototypicalBatchSampler, self).__init__()
        self.labels = labels
        self.classes_per_it = classes_per_it
        self.sample_per_class = num_samples
        self.iterations = iterations

        self.classes, self.counts = np.unique(self.labels, return_counts=True)
        self.classes = torch.LongTensor(self.classes)

        # classes X max(elements per class) table of sample indexes, filled with nans first
        self.idxs = range(len(self.labels))
        self.indexes = np.empty((len(self.classes), max(self.counts)), dtype=int) * np.nan
        self.indexes = torch.Tensor(self.indexes)
        self.numel_per_class = torch.zeros_like(self.classes)
        for idx, label in enumerate(self.labels):
            label_idx = np.argwhere(self.classes == label).item()
            self.indexes[label_idx, np.where(np.isnan(self.indexes[label_idx]))[0][0]] = idx
            self.numel_per_class[label_idx] += 1

    def __iter__(self):
        spc = self.sample_per_class
        cpi = self.classes_per_it

        for it in range(self.iterations):
            batch_size = spc * cpi
            batch = torch.LongTensor(batch_size)
            c_idxs = torch.randperm(len(self.classes))[:cpi]
            for i, c in enumerate(self.classes[c_idxs]):
                s = slice(i * spc, (i + 1) * spc)
                label_idx = torch.arange(len(self.classes)).long()[self.classes == c].item()
                sample_idxs = torch.randperm(self.numel_per_class[label_idx])[:spc]
                batch[s] = self.indexes[label_idx][sample_idxs]
            batch = batch[torch.randperm(len(batch))]
            yield batch

    def __len__(self):
        return self.iterations


# ----------------------------------------------------------------------------- protonet.py

def conv_block(in_channels, out_channels):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
        nn.MaxPool2d(2)
    )


class ProtoNet(nn.Module):
    def __init__(self, x_dim=1, hid_dim=16, z_dim=16):
        super(ProtoNet, self).__init__()
        self.encoder = nn.Sequential(
            conv_block(x_dim, hid_dim),
            conv_block(hid_dim, hid_dim),
            conv_block(hid_dim, hid_dim),
            conv_block(hid_dim, z_dim),
        )

    def forward(self, x):
        x = self.encoder(x)
        return x.view(x.size(0), -1)


# ----------------------------------------------------------------------------- prototypical_loss.py

def euclidean_dist(x, y):
    n = x.size(0)
    m = y.size(0)
    d = x.size(1)
    if d != y.size(1):
        raise Exception

    x = x.unsqueeze(1).expand(n, m, d)
    y = y.unsqueeze(0).expand(n, m, d)

    return torch.pow(x - y, 2).sum(2)


def prototypical_loss(input, target, n_support):
    target_cpu = target.to('cpu')
    input_cpu = input.to('cpu')

    def supp_idxs(c):
        return target_cpu.eq(c).nonzero()[:n_support].squeeze(1)

    classes = torch.unique(target_cpu)
    n_classes = len(classes)
    # assuming n_query, n_target constants
    n_query = target_cpu.eq(classes[0].item()).sum().item() - n_support

    support_idxs = list(map(supp_idxs, classes))

    prototypes = torch.stack([input_cpu[idx_list].mean(0) for idx_list in support_idxs])
    query_idxs = torch.stack(list(map(lambda c: target_cpu.eq(c).nonzero()[n_support:], classes))).view(-1)

    query_samples = input.to('cpu')[query_idxs]
    dists = euclidean_dist(query_samples, prototypes)

    log_p_y = F.log_softmax(-dists, dim=1).view(n_classes, n_query, -1)

    target_inds = torch.arange(0, n_classes)
    target_inds = target_inds.view(n_classes, 1, 1)
    target_inds = target_inds.expand(n_classes, n_query, 1).long()

    loss_val = -log_p_y.gather(2, target_inds).squeeze().view(-1).mean()
    _, y_hat = log_p_y.max(2)
    acc_val = y_hat.eq(target_inds.squeeze(2)).float().mean()

    return loss_val, acc_val


loss_fn = prototypical_loss


# ----------------------------------------------------------------------------- train.py

def init_seed(opt):
    '''
    Disable cudnn to maximize reproducibility
    '''
    torch.cuda.cudnn_enabled = False
    np.random.seed(opt.manual_seed)
    torch.manual_seed(opt.manual_seed)
    torch.cuda.manual_seed(opt.manual_seed)


def init_dataset(opt, mode):
    dataset = OmniglotDataset(mode=mode, root=opt.dataset_root)
    n_classes = len(np.unique(dataset.y))
    if n_classes < opt.classes_per_it_tr or n_classes < opt.classes_per_it_val:
        raise (Exception('There are not enough classes in the dataset in order ' +
                         'to satisfy the chosen classes_per_it. Decrease the ' +
                         'classes_per_it_{tr/val} option and try again.'))
    return dataset


def init_sampler(opt, labels, mode):
    if 'train' in mode:
        classes_per_it = opt.classes_per_it_tr
        num_samples = opt.num_support_tr + opt.num_query_tr
    else:
        classes_per_it = opt.classes_per_it_val
        num_samples = opt.num_support_val + opt.num_query_val

    return PrototypicalBatchSampler(labels=labels, classes_per_it=classes_per_it, num_samples=num_samples,
                                    iterations=opt.iterations)


def init_dataloader(opt, mode):
    dataset = init_dataset(opt, mode)
    sampler = init_sampler(opt, dataset.y, mode)
    dataloader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler)
    return dataloader


def init_protonet(opt):
    device = 'cuda:0' if torch.cuda.is_available() and opt.cuda else 'cpu'
    model = ProtoNet().to(device)
    return model


def init_optim(opt, model):
    return torch.optim.Adam(params=model.parameters(), lr=opt.learning_rate)


def init_lr_scheduler(opt, optim):
    return torch.optim.lr_scheduler.StepLR(optimizer=optim, gamma=opt.lr_scheduler_gamma,
                                           step_size=opt.lr_scheduler_step)


def save_list_to_file(path, thelist):
    with open(path, 'w') as f:
        for item in thelist:
            f.write("%s\n" % item)


def train(opt, tr_dataloader, model, optim, lr_scheduler, val_dataloader=None):
    device = 'cuda:0' if torch.cuda.is_available() and opt.cuda else 'cpu'

    if val_dataloader is None:
        best_state = None
    train_loss = []
    train_acc = []
    val_loss = []
    val_acc = []
    best_acc = 0

    best_model_path = os.path.join(opt.experiment_root, 'best_model.pth')
    last_model_path = os.path.join(opt.experiment_root, 'last_model.pth')

    for epoch in range(opt.epochs):
        print('=== Epoch: {} ==='.format(epoch))
        tr_iter = iter(tr_dataloader)
        model.train()
        for batch in tr_iter:
            optim.zero_grad()
            x, y = batch
            x, y = x.to(device), y.to(device)
            model_output = model(x)
            loss, acc = loss_fn(model_output, target=y, n_support=opt.num_support_tr)
            loss.backward()
            optim.step()
            train_loss.append(loss.item())
            train_acc.append(acc.item())
        avg_loss = np.mean(train_loss[-opt.iterations:])
        avg_acc = np.mean(train_acc[-opt.iterations:])
        print('Avg Train Loss: {:.4f}, Avg Train Acc: {:.4f}'.format(avg_loss, avg_acc))
        lr_scheduler.step()
        if val_dataloader is None:
            continue
        val_iter = iter(val_dataloader)
        model.eval()
        for batch in val_iter:
            x, y = batch
            x, y = x.to(device), y.to(device)
            model_output = model(x)
            loss, acc = loss_fn(model_output, target=y, n_support=opt.num_support_val)
            val_loss.append(loss.item())
            val_acc.append(acc.item())
        avg_loss = np.mean(val_loss[-opt.iterations:])
        avg_acc = np.mean(val_acc[-opt.iterations:])
        postfix = ' (Best)' if avg_acc >= best_acc else ' (Best: {:.4f})'.format(best_acc)
        print('Avg Val Loss: {:.4f}, Avg Val Acc: {:.4f}{}'.format(avg_loss, avg_acc, postfix))
        if avg_acc >= best_acc:
            torch.save(model.state_dict(), best_model_path)
            best_acc = avg_acc
            best_state = model.state_dict()

    torch.save(model.state_dict(), last_model_path)

    for name in ['train_loss', 'train_acc', 'val_loss', 'val_acc']:
        save_list_to_file(os.path.join(opt.experiment_root, name + '.txt'), locals()[name])

    return best_state, best_acc, train_loss, train_acc, val_loss, val_acc


def test(opt, test_dataloader, model):
    device = 'cuda:0' if torch.cuda.is_available() and opt.cuda else 'cpu'
    avg_acc = list()
    for epoch in range(10):
        test_iter = iter(test_dataloader)
        for batch in test_iter:
            x, y = batch
            x, y = x.to(device), y.to(device)
            model_output = model(x)
            _, acc = loss_fn(model_output, target=y, n_support=opt.num_support_val)
            avg_acc.append(acc.item())
    avg_acc = np.mean(avg_acc)
    print('Test Acc: {:.4f}'.format(avg_acc))

    return avg_acc


def eval(opt, test_dataloader):
    options = opt

    if torch.cuda.is_available() and not options.cuda:
        print("WARNING: You have a CUDA device, so you should probably run with --cuda")

    init_seed(options)
    model = init_protonet(options)
    model_path = os.path.join(opt.experiment_root, 'best_model.pth')
    model.load_state_dict(torch.load(model_path))
    model.eval()

    return test(opt=options, test_dataloader=test_dataloader, model=model)


def main(options):
    if not os.path.exists(options.experiment_root):
        os.makedirs(options.experiment_root)

    if torch.cuda.is_available() and not options.cuda:
        print("WARNING: You have a CUDA device, so you should probably run with --cuda")

    init_seed(options)

    tr_dataloader = init_dataloader(options, 'train')
    val_dataloader = init_dataloader(options, 'val')
    test_dataloader = init_dataloader(options, 'test')

    model = init_protonet(options)
    optim = init_optim(options, model)
    lr_scheduler = init_lr_scheduler(options, optim)
    res = train(opt=options, tr_dataloader=tr_dataloader, val_dataloader=val_dataloader, model=model,
                optim=optim, lr_scheduler=lr_scheduler)
    best_state, best_acc, train_loss, train_acc, val_loss, val_acc = res
    print('Testing with last model..')
    test(opt=options, test_dataloader=test_dataloader, model=model)

    model.load_state_dict(best_state)
    print('Testing with best model..')
    test(opt=options, test_dataloader=test_dataloader, model=model)

    print('Testing the reloaded best_model.pth..')
    return eval(options, test_dataloader)


if __name__ == '__main__':
    random.seed(7)
    with tempfile.TemporaryDirectory() as directory:
        options = argparse.Namespace(
            dataset_root=None, experiment_root=os.path.join(directory, 'output'), epochs=4, learning_rate=0.001,
            lr_scheduler_step=2, lr_scheduler_gamma=0.5, iterations=8, classes_per_it_tr=5, num_support_tr=5,
            num_query_tr=5, classes_per_it_val=5, num_support_val=5, num_query_val=5, manual_seed=7,
            cuda=torch.cuda.is_available())
        acc = main(options)
    print('done: reloaded test acc {:.4f}'.format(acc))
