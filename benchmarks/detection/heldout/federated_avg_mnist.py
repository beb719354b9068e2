"""Simulates federated learning with FedAvg (McMahan et al., "Communication-Efficient Learning of Deep Networks from
Decentralized Data") on MNIST-style digits: the users' data is split IID (`mnist_iid`) or into label shards
(`mnist_noniid`), each round samples a fraction of the users, `LocalUpdate.train` runs local SGD epochs on a deep
copy of the global net, `FedAvg` averages the returned state dicts and `test_img` scores the global model; a
centralised baseline (`main_nn.py`) trains the same net on all data and tests it with its own `test`. The device is
chosen once from the ``--gpu`` id (``torch.device('cuda:{}'.format(args.gpu) if torch.cuda.is_available() and
args.gpu != -1 else 'cpu')``), stored as ``args.device`` and passed down inside ``args``: the nets are built with
``.to(args.device)``, every local copy is moved again with ``copy.deepcopy(net_glob).to(args.device)``,
`LocalUpdate` moves batches with ``.to(self.args.device)``, while `test_img` checks the flag itself (``if args.gpu
!= -1: data, target = data.cuda(), target.cuda()``) and counts hits with ``.long().cpu().sum()``. The script code
lives under ``if __name__ == '__main__':`` with no main function, as in the original; the baseline's `test` reads the
module-level ``args``.

Modeled on: shaoxiongji/federated-learning, main_fed.py, main_nn.py, models/Update.py, models/Fed.py,
models/test.py, models/Nets.py, utils/sampling.py and utils/options.py at commit
5a9da1acd210aef030ff3841665c6d0cc0c8be23 (https://github.com/shaoxiongji/federated-learning).

Kept: `args_parser` (same options and defaults where they matter), `mnist_iid`, `mnist_noniid` (shards sorted by
label, two shards per user), `cifar_iid`; `MLP`, `CNNMnist`, `CNNCifar`; `DatasetSplit`, `LocalUpdate.train`
(``net.zero_grad()``, SGD with momentum, returns ``net.state_dict()`` and the mean loss); `FedAvg` (deep copy of the
first state dict, in-place sums, ``torch.div``); `test_img` with its ``args.gpu != -1`` check; main_fed's round loop
(``np.random.choice`` of users, ``all_clients`` mode keeping one state dict per user, ``net_glob.load_state_dict``)
and main_nn's training loop and `test`.

Changed to run here: MNIST comes from a synthetic digit dataset (ten noisy class prototypes) that keeps
``train_labels`` for `mnist_noniid`; the command line is read from a list (the three runs below) instead of
``sys.argv``; the ``--gpu`` default is -1 when CUDA is missing (standing for the ``--gpu -1`` a CPU user passes,
since `test_img` calls ``.cuda()`` whenever ``gpu != -1``); the loss curves are written to a text file in a
temporary folder instead of plotted with matplotlib; the `__main__` block of utils/sampling.py is left out.
Shrunk: 600 training and 200 test images of 28x28, 10 users, 20 shards of 30 images, 3 rounds with frac 0.3 (all 10
users in the ``all_clients`` run), 1 local epoch, 2 centralised epochs.
"""
import argparse
import copy
import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
from torch import nn
from torch.utils.data import DataLoader, Dataset


# ---------------------------------------------------------------- utils/options.py
def args_parser(argv=None):
    parser = argparse.ArgumentParser()
    # federated arguments
    parser.add_argument('--epochs', type=int, default=3, help="rounds of training")
    parser.add_argument('--num_users', type=int, default=10, help="number of users: K")
    parser.add_argument('--frac', type=float, default=0.3, help="the fraction of clients: C")
    parser.add_argument('--local_ep', type=int, default=1, help="the number of local epochs: E")
    parser.add_argument('--local_bs', type=int, default=10, help="local batch size: B")
    parser.add_argument('--bs', type=int, default=128, help="test batch size")
    parser.add_argument('--lr', type=float, default=0.01, help="learning rate")
    parser.add_argument('--momentum', type=float, default=0.5, help="SGD momentum (default: 0.5)")
    parser.add_argument('--split', type=str, default='user', help="train-test split type, user or sample")

    # model arguments
    parser.add_argument('--model', type=str, default='mlp', help='model name')
    parser.add_argument('--kernel_num', type=int, default=9, help='number of each kind of kernel')
    parser.add_argument('--kernel_sizes', type=str, default='3,4,5',
                        help='comma-separated kernel size to use for convolution')
    parser.add_argument('--norm', type=str, default='batch_norm', help="batch_norm, layer_norm, or None")
    parser.add_argument('--num_filters', type=int, default=32, help="number of filters for conv nets")
    parser.add_argument('--max_pool', type=str, default='True',
                        help="Whether use max pooling rather than strided convolutions")

    # other arguments
    parser.add_argument('--dataset', type=str, default='mnist', help="name of dataset")
    parser.add_argument('--iid', action='store_true', help='whether i.i.d or not')
    parser.add_argument('--num_classes', type=int, default=10, help="number of classes")
    parser.add_argument('--num_channels', type=int, default=3, help="number of channels of imges")
    parser.add_argument('--gpu', type=int, default=0 if torch.cuda.is_available() else -1,
                        help="GPU ID, -1 for CPU")
    parser.add_argument('--stopping_rounds', type=int, default=10, help='rounds of early stopping')
    parser.add_argument('--verbose', action='store_true', help='verbose print')
    parser.add_argument('--seed', type=int, default=1, help='random seed (default: 1)')
    parser.add_argument('--all_clients', action='store_true', help='aggregation over all clients')
    args = parser.parse_args(argv)
    return args


# ---------------------------------------------------------------- synthetic stand-in for torchvision's MNIST
class SyntheticMNIST(Dataset):
    """28x28 digits drawn around ten fixed prototypes; normalised like ``Normalize((0.1307,), (0.3081,))``."""

    prototypes = None

    def __init__(self, train=True, size=600):
        if SyntheticMNIST.prototypes is None:
            g = torch.Generator().manual_seed(1234)
            SyntheticMNIST.prototypes = (torch.rand(10, 1, 28, 28, generator=g) > 0.75).float()
        g = torch.Generator().manual_seed(1 if train else 2)
        self.train_labels = torch.randint(0, 10, (size,), generator=g)
        noise = torch.rand(size, 1, 28, 28, generator=g) * 0.6
        images = (SyntheticMNIST.prototypes[self.train_labels] * 0.7 + noise).clamp(0, 1)
        self.data = (images - 0.1307) / 0.3081

    def __len__(self):
        return len(self.train_labels)

    def __getitem__(self, index):
        return self.data[index], int(self.train_labels[index])


# ---------------------------------------------------------------- utils/sampling.py
def mnist_iid(dataset, num_users):
    """
    Sample I.I.D. client data from MNIST dataset
    :param dataset:
    :param num_users:
    :return: dict of image index
    """
    num_items = int(len(dataset)/num_users)
    dict_users, all_idxs = {}, [i for i in range(len(dataset))]
    for i in range(num_users):
        dict_users[i] = set(np.random.choice(all_idxs, num_items, replace=False))
        all_idxs = list(set(all_idxs) - dict_users[i])
    return dict_users


def mnist_noniid(dataset, num_users):
    """
    Sample non-I.I.D client data from MNIST dataset
    :param dataset:
    :param num_users:
    :return:
    """
    num_shards, num_imgs = 20, 30
    idx_shard = [i for i in range(num_shards)]
    dict_users = {i: np.array([], dtype='int64') for i in range(num_users)}
    idxs = np.arange(num_shards*num_imgs)
    labels = dataset.train_labels.numpy()

    # sort labels
    idxs_labels = np.vstack((idxs, labels))
    idxs_labels = idxs_labels[:, idxs_labels[1, :].argsort()]
    idxs = idxs_labels[0, :]

    # divide and assign
    for i in range(num_users):
        rand_set = set(np.random.choice(idx_shard, 2, replace=False))
        idx_shard = list(set(idx_shard) - rand_set)
        for rand in rand_set:
            dict_users[i] = np.concatenate((dict_users[i], idxs[rand*num_imgs:(rand+1)*num_imgs]), axis=0)
    return dict_users


def cifar_iid(dataset, num_users):
    """
    Sample I.I.D. client data from CIFAR10 dataset
    :param dataset:
    :param num_users:
    :return: dict of image index
    """
    num_items = int(len(dataset)/num_users)
    dict_users, all_idxs = {}, [i for i in range(len(dataset))]
    for i in range(num_users):
        dict_users[i] = set(np.random.choice(all_idxs, num_items, replace=False))
        all_idxs = list(set(all_idxs) - dict_users[i])
    return dict_users


# ---------------------------------------------------------------- models/Nets.py
class MLP(nn.Module):
    def __init__(self, dim_in, dim_hidden, dim_out):
        super(MLP, self).__init__()
        self.layer_input = nn.Linear(dim_in, dim_hidden)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout()
        self.layer_hidden = nn.Linear(dim_hidden, dim_out)

    def forward(self, x):
        x = x.view(-1, x.shape[1]*x.shape[-2]*x.shape[-1])
        x = self.layer_input(x)
        x = self.dropout(x)
        x = self.relu(x)
        x = self.layer_hidden(x)
        return x


class CNNMnist(nn.Module):
    def __init__(self, args):
        super(CNNMnist, self).__init__()
        self.conv1 = nn.Conv2d(args.num_channels, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, args.num_classes)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, x.shape[1]*x.shape[2]*x.shape[3])
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return x


class CNNCifar(nn.Module):
    def __init__(self, args):
        super(CNNCifar, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, args.num_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


# ---------------------------------------------------------------- models/Update.py
class DatasetSplit(Dataset):
    def __init__(self, dataset, idxs):
        self.dataset = dataset
        self.idxs = list(idxs)

    def __len__(self):
        return len(self.idxs)

    def __getitem__(self, item):
        image, label = self.dataset[self.idxs[item]]
        return image, label


class LocalUpdate(object):
    def __init__(self, args, dataset=None, idxs=None):
        self.args = args
        self.loss_func = nn.CrossEntropyLoss()
        self.selected_clients = []
        self.ldr_train = DataLoader(DatasetSplit(dataset, idxs), batch_size=self.args.local_bs, shuffle=True)

    def train(self, net):
        net.train()
        # train and update
        optimizer = torch.optim.SGD(net.parameters(), lr=self.args.lr, momentum=self.args.momentum)

        epoch_loss = []
        for iter in range(self.args.local_ep):
            batch_loss = []
            for batch_idx, (images, labels) in enumerate(self.ldr_train):
                images, labels = images.to(self.args.device), labels.to(self.args.device)
                net.zero_grad()
                log_probs = net(images)
                loss = self.loss_func(log_probs, labels)
                loss.backward()
                optimizer.step()
                if self.args.verbose and batch_idx % 10 == 0:
                    print('Update Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                        iter, batch_idx * len(images), len(self.ldr_train.dataset),
                        100. * batch_idx / len(self.ldr_train), loss.item()))
                batch_loss.append(loss.item())
            epoch_loss.append(sum(batch_loss)/len(batch_loss))
        return net.state_dict(), sum(epoch_loss) / len(epoch_loss)


# ---------------------------------------------------------------- models/Fed.py
def FedAvg(w):
    w_avg = copy.deepcopy(w[0])
    for k in w_avg.keys():
        for i in range(1, len(w)):
            w_avg[k] += w[i][k]
        w_avg[k] = torch.div(w_avg[k], len(w))
    return w_avg


# ---------------------------------------------------------------- models/test.py
def test_img(net_g, datatest, args):
    net_g.eval()
    # testing
    test_loss = 0
    correct = 0
    data_loader = DataLoader(datatest, batch_size=args.bs)
    l = len(data_loader)
    for idx, (data, target) in enumerate(data_loader):
        if args.gpu != -1:
            data, target = data.cuda(), target.cuda()
        log_probs = net_g(data)
        # sum up batch loss
        test_loss += F.cross_entropy(log_probs, target, reduction='sum').item()
        # get the index of the max log-probability
        y_pred = log_probs.data.max(1, keepdim=True)[1]
        correct += y_pred.eq(target.data.view_as(y_pred)).long().cpu().sum()

    test_loss /= len(data_loader.dataset)
    accuracy = 100.00 * correct / len(data_loader.dataset)
    if args.verbose:
        print('\nTest set: Average loss: {:.4f} \nAccuracy: {}/{} ({:.2f}%)\n'.format(
            test_loss, correct, len(data_loader.dataset), accuracy))
    return accuracy, test_loss


# ---------------------------------------------------------------- main_nn.py's test (reads the global `args`)
def test(net_g, data_loader):
    # testing
    net_g.eval()
    test_loss = 0
    correct = 0
    l = len(data_loader)
    for idx, (data, target) in enumerate(data_loader):
        data, target = data.to(args.device), target.to(args.device)
        log_probs = net_g(data)
        test_loss += F.cross_entropy(log_probs, target).item()
        y_pred = log_probs.data.max(1, keepdim=True)[1]
        correct += y_pred.eq(target.data.view_as(y_pred)).long().cpu().sum()

    test_loss /= len(data_loader.dataset)
    print('\nTest set: Average loss: {:.4f} \nAccuracy: {}/{} ({:.2f}%)\n'.format(
        test_loss, correct, len(data_loader.dataset),
        100. * correct / len(data_loader.dataset)))

    return correct, test_loss


if __name__ == '__main__':
    save_dir = tempfile.mkdtemp(prefix='fedavg_')
    runs = [['--model', 'cnn', '--num_channels', '1', '--local_bs', '20'],
            ['--model', 'mlp', '--iid', '--all_clients', '--verbose']]
    for argv in runs:
        # parse args
        args = args_parser(argv)
        args.device = torch.device('cuda:{}'.format(args.gpu) if torch.cuda.is_available() and args.gpu != -1 else 'cpu')

        # load dataset and split users
        dataset_train = SyntheticMNIST(train=True, size=600)
        dataset_test = SyntheticMNIST(train=False, size=200)
        if args.iid:
            dict_users = mnist_iid(dataset_train, args.num_users)
        else:
            dict_users = mnist_noniid(dataset_train, args.num_users)
        img_size = dataset_train[0][0].shape

        # build model
        if args.model == 'cnn' and args.dataset == 'cifar':
            net_glob = CNNCifar(args=args).to(args.device)
        elif args.model == 'cnn' and args.dataset == 'mnist':
            net_glob = CNNMnist(args=args).to(args.device)
        elif args.model == 'mlp':
            len_in = 1
            for x in img_size:
                len_in *= x
            net_glob = MLP(dim_in=len_in, dim_hidden=200, dim_out=args.num_classes).to(args.device)
        else:
            exit('Error: unrecognized model')
        print(net_glob)
        net_glob.train()

        # copy weights
        w_glob = net_glob.state_dict()

        # training
        loss_train = []
        cv_loss, cv_acc = [], []
        val_loss_pre, counter = 0, 0
        net_best = None
        best_loss = None
        val_acc_list, net_list = [], []

        if args.all_clients:
            print("Aggregation over all clients")
            w_locals = [w_glob for i in range(args.num_users)]
        for iter in range(args.epochs):
            loss_locals = []
            if not args.all_clients:
                w_locals = []
            m = max(int(args.frac * args.num_users), 1)
            idxs_users = np.random.choice(range(args.num_users), m, replace=False)
            for idx in idxs_users:
                local = LocalUpdate(args=args, dataset=dataset_train, idxs=dict_users[idx])
                w, loss = local.train(net=copy.deepcopy(net_glob).to(args.device))
                if args.all_clients:
                    w_locals[idx] = copy.deepcopy(w)
                else:
                    w_locals.append(copy.deepcopy(w))
                loss_locals.append(copy.deepcopy(loss))
            # update global weights
            w_glob = FedAvg(w_locals)

            # copy weight to net_glob
            net_glob.load_state_dict(w_glob)

            # print loss
            loss_avg = sum(loss_locals) / len(loss_locals)
            print('Round {:3d}, Average loss {:.3f}'.format(iter, loss_avg))
            loss_train.append(loss_avg)

        # "plot" loss curve
        with open(os.path.join(save_dir, 'fed_{}_{}_{}_C{}_iid{}.txt'.format(
                args.dataset, args.model, args.epochs, args.frac, args.iid)), 'w') as f:
            f.write('\n'.join('{:.4f}'.format(v) for v in loss_train))

        # testing
        net_glob.eval()
        acc_train, loss_train = test_img(net_glob, dataset_train, args)
        acc_test, loss_test = test_img(net_glob, dataset_test, args)
        print("Training accuracy: {:.2f}".format(acc_train))
        print("Testing accuracy: {:.2f}".format(acc_test))

    # ------------------------------------------------------------ main_nn.py: the centralised baseline
    args = args_parser(['--model', 'cnn', '--num_channels', '1', '--epochs', '2'])
    args.device = torch.device('cuda:{}'.format(args.gpu) if torch.cuda.is_available() and args.gpu != -1 else 'cpu')

    torch.manual_seed(args.seed)
    dataset_train = SyntheticMNIST(train=True, size=600)
    img_size = dataset_train[0][0].shape
    net_glob = CNNMnist(args=args).to(args.device)
    print(net_glob)

    # training
    optimizer = optim.SGD(net_glob.parameters(), lr=args.lr, momentum=args.momentum)
    train_loader = DataLoader(dataset_train, batch_size=64, shuffle=True)

    list_loss = []
    net_glob.train()
    for epoch in range(args.epochs):
        batch_loss = []
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(args.device), target.to(args.device)
            optimizer.zero_grad()
            output = net_glob(data)
            loss = F.cross_entropy(output, target)
            loss.backward()
            optimizer.step()
            if batch_idx % 50 == 0:
                print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                    epoch, batch_idx * len(data), len(train_loader.dataset),
                    100. * batch_idx / len(train_loader), loss.item()))
            batch_loss.append(loss.item())
        loss_avg = sum(batch_loss)/len(batch_loss)
        print('\nTrain loss:', loss_avg)
        list_loss.append(loss_avg)

    with open(os.path.join(save_dir, 'nn_{}_{}_{}.txt'.format(args.dataset, args.model, args.epochs)), 'w') as f:
        f.write('\n'.join('{:.4f}'.format(v) for v in list_loss))

    # testing
    dataset_test = SyntheticMNIST(train=False, size=200)
    test_loader = DataLoader(dataset_test, batch_size=1000, shuffle=False)
    print('test on', len(dataset_test), 'samples')
    test_acc, test_loss = test(net_glob, test_loader)
    print('done: federated and centralised runs finished, centralised test accuracy {:.2f}%'.format(
        100. * float(test_acc) / len(dataset_test)))
