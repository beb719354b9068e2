"""Simple Graph Convolution (SGC: K-step feature propagation with the augmented normalised adjacency, precomputed once
with `torch.spmm`, then logistic regression) on a synthetic Cora in the Planetoid file format and a synthetic Reddit,
run as the module-level scripts of Tiiiger/SGC: citation.py trains and tests on Cora, tuning.py searches the weight
decay and pickles it, reddit.py trains with L-BFGS on Reddit and reports the micro-F1. Every script derives
`args.cuda = not args.no_cuda and torch.cuda.is_available()` and hands that flag to the helpers (`set_seed`,
`load_citation`, `load_reddit_data`, `get_model`), which move the tensors and the model with `.cuda()` when it is set.

Modeled on: Tiiiger/SGC, citation.py, tuning.py, reddit.py, args.py, utils.py, normalization.py, models.py and
metrics.py at commit 2c7a2727e82e462d8ef9d6e57f0b08888e16488f
(https://github.com/Tiiiger/SGC/tree/2c7a2727e82e462d8ef9d6e57f0b08888e16488f).
Kept: args.py's `get_citation_args` (`parse_known_args`, `args.cuda` from `--no-cuda` and `torch.cuda.is_available()`);
utils.py (`load_citation(dataset_str, normalization, cuda)` reading the pickled x / y / tx / ty / allx / ally / graph
objects and the test index file, reordering the test rows, building features / labels / a torch sparse adjacency /
index tensors on the host and moving all six with `.cuda()` when `cuda`; `sparse_mx_to_torch_sparse_tensor`;
`sgc_precompute` timing `torch.spmm(adj, features)` with `perf_counter`; `set_seed(seed, cuda)` calling
`torch.cuda.manual_seed` under the flag; `load_reddit_data(..., cuda)` with the feature standardisation on the host
and the same `.cuda()` moves, `train_adj` sliced with the numpy train index); normalization.py; models.py (`SGC`,
`GraphConvolution`, `GCN`, `get_model(..., cuda)` calling `model.cuda()` when `cuda`); metrics.py (`accuracy` returning
a device tensor printed with `{:.4f}`, `f1` with `.cpu().detach().numpy()`); citation.py's module-level code (the
`--tuned` weight-decay pickle branch, `train_regression` with defaults bound to `args`, Adam, `model.train()`,
validation under `torch.no_grad()` with `model.eval()`, `test_regression`, device index tensors into device
features); tuning.py's module-level code (its own data load, `sgc_objective` building a fresh model per trial with
`args.cuda`, the best weight decay pickled to `SGC-tuning/<dataset>.txt`); reddit.py's module-level code (its own
parser and `args.cuda`, `load_reddit_data(args.normalization, cuda=args.cuda)` as written (the normalisation string
lands in the unused `data_path`), `model.cuda()` under the flag, transductive and inductive precompute, numpy index
arrays into device tensors, L-BFGS with a closure).
Changed to run here: networkx is not installed, so `nx.adjacency_matrix(nx.from_dict_of_lists(graph))` is a scipy
matrix built from the same dict of lists; hyperopt is not installed, so tuning.py's `fmin(..., algo=tpe.suggest)` is
a seeded random search over the same log-uniform space that returns the same `{'weight_decay': ...}` dict;
`GraphConvolution.forward` gets the `return output` it lacks (GCN is never run); `torch.sparse.FloatTensor(...)` ->
`torch.sparse_coo_tensor(...)`; the data files live in a temporary folder (the scripts read `data/` and
`SGC-tuning/` under the working directory) and are drawn here: a homophilous citation graph whose classes have their
own bag-of-words profile, in the Planetoid ind.cora.* pickle format, and a Reddit-like graph in reddit_adj.npz /
reddit.npz; the three scripts run one after the other in this file, each with its own argument parsing, and reddit.py's code runs
twice (as is and with `--inductive --test`); the validation split is 60 nodes instead of 500.
Shrunk: Cora 2708 nodes x 1433 words -> 300 x 100 (7 classes, 35 train / 60 val / 100 test); Reddit 232965 nodes x
602 features x 41 classes -> 400 x 32 x 5; 60 tuning trials -> 6.
"""
import os
import pickle as pkl
import sys
import tempfile
import time
import argparse
from math import log
from time import perf_counter

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from sklearn.metrics import f1_score

DATA_DIR = tempfile.mkdtemp(prefix="sgc_")


def write_planetoid(dataset_str="cora", n=300, n_feat=100, n_class=7, n_train=35, n_val=60, n_test=100):
    rng = np.random.RandomState(0)
    labels = rng.randint(n_class, size=n)
    labels[:n_train] = np.arange(n_train) % n_class
    profiles = rng.rand(n_class, n_feat) < 0.08
    feats = ((rng.rand(n, n_feat) < 0.03) | (profiles[labels] & (rng.rand(n, n_feat) < 0.6))).astype(np.float32)
    onehot = np.eye(n_class)[labels]
    graph = {i: [] for i in range(n)}
    for i in range(n):
        for _ in range(3):
            same = np.flatnonzero(labels == labels[i]) if rng.rand() < 0.8 else np.arange(n)
            j = int(rng.choice(same))
            if j != i:
                graph[i].append(j), graph[j].append(i)
    test_ids = rng.permutation(np.arange(n - n_test, n))  # ind.cora.test.index order = tx / ty row order
    objects = {'x': sp.csr_matrix(feats[:n_train]), 'y': onehot[:n_train], 'allx': sp.csr_matrix(feats[:n - n_test]),
               'ally': onehot[:n - n_test], 'tx': sp.csr_matrix(feats[test_ids]), 'ty': onehot[test_ids],
               'graph': graph}
    os.makedirs(os.path.join(DATA_DIR, "data"), exist_ok=True)
    for name, obj in objects.items():
        with open(os.path.join(DATA_DIR, "data/ind.{}.{}".format(dataset_str, name)), 'wb') as f:
            pkl.dump(obj, f)
    with open(os.path.join(DATA_DIR, "data/ind.{}.test.index".format(dataset_str)), 'w') as f:
        f.write('\n'.join(str(i) for i in test_ids) + '\n')


def write_reddit(n=400, n_feat=32, n_class=5):
    rng = np.random.RandomState(1)
    labels = rng.randint(n_class, size=n)
    feats = rng.randn(n, n_feat) * 2.0 + np.eye(n_class, n_feat)[labels]
    rows, cols = [], []
    for i in range(n):
        for j in rng.choice(np.flatnonzero(labels == labels[i]), 4):
            rows.append(i), cols.append(j)
    adj = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    perm = rng.permutation(n)
    train_index, val_index, test_index = np.sort(perm[:240]), np.sort(perm[240:320]), np.sort(perm[320:])
    sp.save_npz(os.path.join(DATA_DIR, "data/reddit_adj.npz"), adj)
    np.savez(os.path.join(DATA_DIR, "data/reddit.npz"), feats=feats, y_train=labels[train_index],
             y_val=labels[val_index], y_test=labels[test_index], train_index=train_index, val_index=val_index,
             test_index=test_index)


write_planetoid()
write_reddit()


# normalization.py
def aug_normalized_adjacency(adj):
   adj = adj + sp.eye(adj.shape[0])
   adj = sp.coo_matrix(adj)
   row_sum = np.array(adj.sum(1))
   d_inv_sqrt = np.power(row_sum, -0.5).flatten()
   d_inv_sqrt[np.isinf(d_inv_sqrt)] = 0.
   d_mat_inv_sqrt = sp.diags(d_inv_sqrt)
   return d_mat_inv_sqrt.dot(adj).dot(d_mat_inv_sqrt).tocoo()

def fetch_normalization(type):
   switcher = {
       'AugNormAdj': aug_normalized_adjacency,  # A' = (D + I)^-1/2 * ( A + I ) * (D + I)^-1/2
   }
   func = switcher.get(type, lambda: "Invalid normalization technique.")
   return func

def row_normalize(mx):
    """Row-normalize sparse matrix"""
    rowsum = np.array(mx.sum(1))
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[np.isinf(r_inv)] = 0.
    r_mat_inv = sp.diags(r_inv)
    mx = r_mat_inv.dot(mx)
    return mx


# utils.py
def parse_index_file(filename):
    """Parse index file."""
    index = []
    for line in open(filename):
        index.append(int(line.strip()))
    return index

def preprocess_citation(adj, features, normalization="FirstOrderGCN"):
    adj_normalizer = fetch_normalization(normalization)
    adj = adj_normalizer(adj)
    features = row_normalize(features)
    return adj, features

def sparse_mx_to_torch_sparse_tensor(sparse_mx):
    """Convert a scipy sparse matrix to a torch sparse tensor."""
    sparse_mx = sparse_mx.tocoo().astype(np.float32)
    indices = torch.from_numpy(
        np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
    values = torch.from_numpy(sparse_mx.data)
    shape = torch.Size(sparse_mx.shape)
    return torch.sparse_coo_tensor(indices, values, shape)

def adjacency_from_dict_of_lists(graph):
    rows = [i for i in sorted(graph) for _ in graph[i]]
    cols = [j for i in sorted(graph) for j in graph[i]]
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(graph), len(graph)))

def load_citation(dataset_str="cora", normalization="AugNormAdj", cuda=True):
    """
    Load Citation Networks Datasets.
    """
    names = ['x', 'y', 'tx', 'ty', 'allx', 'ally', 'graph']
    objects = []
    for i in range(len(names)):
        with open(os.path.join(DATA_DIR, "data/ind.{}.{}".format(dataset_str.lower(), names[i])), 'rb') as f:
            if sys.version_info > (3, 0):
                objects.append(pkl.load(f, encoding='latin1'))
            else:
                objects.append(pkl.load(f))

    x, y, tx, ty, allx, ally, graph = tuple(objects)
    test_idx_reorder = parse_index_file(os.path.join(DATA_DIR, "data/ind.{}.test.index".format(dataset_str)))
    test_idx_range = np.sort(test_idx_reorder)

    features = sp.vstack((allx, tx)).tolil()
    features[test_idx_reorder, :] = features[test_idx_range, :]
    adj = adjacency_from_dict_of_lists(graph)
    adj = adj + adj.T.multiply(adj.T > adj) - adj.multiply(adj.T > adj)
    labels = np.vstack((ally, ty))
    labels[test_idx_reorder, :] = labels[test_idx_range, :]

    idx_test = test_idx_range.tolist()
    idx_train = range(len(y))
    idx_val = range(len(y), len(y)+60)

    adj, features = preprocess_citation(adj, features, normalization)

    # porting to pytorch
    features = torch.FloatTensor(np.array(features.todense())).float()
    labels = torch.LongTensor(labels)
    labels = torch.max(labels, dim=1)[1]
    adj = sparse_mx_to_torch_sparse_tensor(adj).float()
    idx_train = torch.LongTensor(idx_train)
    idx_val = torch.LongTensor(idx_val)
    idx_test = torch.LongTensor(idx_test)

    if cuda:
        features = features.cuda()
        adj = adj.cuda()
        labels = labels.cuda()
        idx_train = idx_train.cuda()
        idx_val = idx_val.cuda()
        idx_test = idx_test.cuda()

    return adj, features, labels, idx_train, idx_val, idx_test

def sgc_precompute(features, adj, degree):
    t = perf_counter()
    for i in range(degree):
        features = torch.spmm(adj, features)
    precompute_time = perf_counter()-t
    return features, precompute_time

def set_seed(seed, cuda):
    np.random.seed(seed)
    torch.manual_seed(seed)
    if cuda: torch.cuda.manual_seed(seed)

def loadRedditFromNPZ(dataset_dir):
    adj = sp.load_npz(dataset_dir+"reddit_adj.npz")
    data = np.load(dataset_dir+"reddit.npz")

    return adj, data['feats'], data['y_train'], data['y_val'], data['y_test'], data['train_index'], data['val_index'], data['test_index']

def load_reddit_data(data_path="data/", normalization="AugNormAdj", cuda=True):
    adj, features, y_train, y_val, y_test, train_index, val_index, test_index = loadRedditFromNPZ(os.path.join(DATA_DIR, "data/"))
    labels = np.zeros(adj.shape[0])
    labels[train_index]  = y_train
    labels[val_index]  = y_val
    labels[test_index]  = y_test
    adj = adj + adj.T
    train_adj = adj[train_index, :][:, train_index]
    features = torch.FloatTensor(np.array(features))
    features = (features-features.mean(dim=0))/features.std(dim=0)
    adj_normalizer = fetch_normalization(normalization)
    adj = adj_normalizer(adj)
    adj = sparse_mx_to_torch_sparse_tensor(adj).float()
    train_adj = adj_normalizer(train_adj)
    train_adj = sparse_mx_to_torch_sparse_tensor(train_adj).float()
    labels = torch.LongTensor(labels)
    if cuda:
        adj = adj.cuda()
        train_adj = train_adj.cuda()
        features = features.cuda()
        labels = labels.cuda()
    return adj, train_adj, features, labels, train_index, val_index, test_index


# metrics.py
def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)

def f1(output, labels):
    preds = output.max(1)[1]
    preds = preds.cpu().detach().numpy()
    labels = labels.cpu().detach().numpy()
    micro = f1_score(labels, preds, average='micro')
    macro = f1_score(labels, preds, average='macro')
    return micro, macro


# models.py
class SGC(nn.Module):
    """
    A Simple PyTorch Implementation of Logistic Regression.
    Assuming the features have been preprocessed with k-step graph propagation.
    """
    def __init__(self, nfeat, nclass):
        super(SGC, self).__init__()

        self.W = nn.Linear(nfeat, nclass)

    def forward(self, x):
        return self.W(x)

class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.W = nn.Linear(in_features, out_features, bias=bias)
        self.init()

    def init(self):
        stdv = 1. / (self.W.weight.size(1) ** 0.5)
        self.W.weight.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = self.W(input)
        output = torch.spmm(adj, support)
        return output

class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super(GCN, self).__init__()

        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj, use_relu=True):
        x = self.gc1(x, adj)
        if use_relu:
            x = F.relu(x)
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return x

def get_model(model_opt, nfeat, nclass, nhid=0, dropout=0, cuda=True):
    if model_opt == "GCN":
        model = GCN(nfeat=nfeat,
                    nhid=nhid,
                    nclass=nclass,
                    dropout=dropout)
    elif model_opt == "SGC":
        model = SGC(nfeat=nfeat,
                    nclass=nclass)
    else:
        raise NotImplementedError('model:{} is not implemented!'.format(model_opt))

    if cuda: model.cuda()
    return model


# args.py
def get_citation_args():
    parser = argparse.ArgumentParser()
    parser.add_argument('--no-cuda', action='store_true', default=False, help='Disables CUDA training.')
    parser.add_argument('--seed', type=int, default=42, help='Random seed.')
    parser.add_argument('--epochs', type=int, default=100, help='Number of epochs to train.')
    parser.add_argument('--lr', type=float, default=0.2, help='Initial learning rate.')
    parser.add_argument('--weight_decay', type=float, default=5e-6, help='Weight decay (L2 loss on parameters).')
    parser.add_argument('--hidden', type=int, default=0, help='Number of hidden units.')
    parser.add_argument('--dropout', type=float, default=0, help='Dropout rate (1 - keep probability).')
    parser.add_argument('--dataset', type=str, default="cora", help='Dataset to use.')
    parser.add_argument('--model', type=str, default="SGC", choices=["SGC", "GCN"], help='model to use.')
    parser.add_argument('--feature', type=str, default="mul", choices=['mul', 'cat', 'adj'], help='feature-type')
    parser.add_argument('--normalization', type=str, default='AugNormAdj', choices=['AugNormAdj'],
                        help='Normalization method for the adjacency matrix.')
    parser.add_argument('--degree', type=int, default=2, help='degree of the approximation.')
    parser.add_argument('--per', type=int, default=-1, help='Number of each nodes so as to balance.')
    parser.add_argument('--experiment', type=str, default="base-experiment", help='feature-type')
    parser.add_argument('--tuned', action='store_true', help='use tuned hyperparams')

    args, _ = parser.parse_known_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    return args


# ---------------------------------------------------------------------------------------------------------------------
# citation.py (module-level script code)
# ---------------------------------------------------------------------------------------------------------------------
# Arguments
args = get_citation_args()

if args.tuned:
    if args.model == "SGC":
        with open(os.path.join(DATA_DIR, "{}-tuning/{}.txt".format(args.model, args.dataset)), 'rb') as f:
            args.weight_decay = pkl.load(f)['weight_decay']
            print("using tuned weight decay: {}".format(args.weight_decay))
    else:
        raise NotImplemented

# setting random seeds
set_seed(args.seed, args.cuda)

adj, features, labels, idx_train, idx_val, idx_test = load_citation(args.dataset, args.normalization, args.cuda)

model = get_model(args.model, features.size(1), labels.max().item()+1, args.hidden, args.dropout, args.cuda)

if args.model == "SGC": features, precompute_time = sgc_precompute(features, adj, args.degree)
print("{:.4f}s".format(precompute_time))

def train_regression(model,
                     train_features, train_labels,
                     val_features, val_labels,
                     epochs=args.epochs, weight_decay=args.weight_decay,
                     lr=args.lr, dropout=args.dropout):

    optimizer = optim.Adam(model.parameters(), lr=lr,
                           weight_decay=weight_decay)
    t = perf_counter()
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        output = model(train_features)
        loss_train = F.cross_entropy(output, train_labels)
        loss_train.backward()
        optimizer.step()
    train_time = perf_counter()-t

    with torch.no_grad():
        model.eval()
        output = model(val_features)
        acc_val = accuracy(output, val_labels)

    return model, acc_val, train_time

def test_regression(model, test_features, test_labels):
    model.eval()
    return accuracy(model(test_features), test_labels)

if args.model == "SGC":
    model, acc_val, train_time = train_regression(model, features[idx_train], labels[idx_train], features[idx_val], labels[idx_val],
                     args.epochs, args.weight_decay, args.lr, args.dropout)
    acc_test = test_regression(model, features[idx_test], labels[idx_test])

print("Validation Accuracy: {:.4f} Test Accuracy: {:.4f}".format(acc_val, acc_test))
print("Pre-compute time: {:.4f}s, train time: {:.4f}s, total: {:.4f}s".format(precompute_time, train_time, precompute_time+train_time))
citation_test_acc = float(acc_test)


# ---------------------------------------------------------------------------------------------------------------------
# tuning.py (module-level script code)
# ---------------------------------------------------------------------------------------------------------------------
def fmin(fn, space, algo=None, max_evals=60):
    # hyperopt stand-in: seeded random search over hp.loguniform('weight_decay', log(1e-10), log(1e-4))
    rng = np.random.RandomState(0)
    low, high = space['weight_decay']
    trials = [{'weight_decay': float(np.exp(rng.uniform(low, high)))} for _ in range(max_evals)]
    return min(trials, key=lambda s: fn(s)['loss'])

STATUS_OK = 'ok'

# Arguments
args = get_citation_args()

# setting random seeds
set_seed(args.seed, args.cuda)

# Hyperparameter optimization
space = {'weight_decay' : (log(1e-10), log(1e-4))}

adj, features, labels, idx_train, idx_val, idx_test = load_citation(args.dataset, args.normalization, args.cuda)
if args.model == "SGC": features, precompute_time = sgc_precompute(features, adj, args.degree)

def sgc_objective(space):
    model = get_model(args.model, features.size(1), labels.max().item()+1, args.hidden, args.dropout, args.cuda)
    model, acc_val, _ = train_regression(model, features[idx_train], labels[idx_train], features[idx_val], labels[idx_val],
                                      args.epochs, space['weight_decay'], args.lr, args.dropout)
    print('weight decay: {:.2e} '.format(space['weight_decay']) + 'accuracy: {:.4f}'.format(acc_val))
    return {'loss': -acc_val, 'status': STATUS_OK}

best = fmin(sgc_objective, space=space, max_evals=6)
print("Best weight decay: {:.2e}".format(best["weight_decay"]))

os.makedirs(os.path.join(DATA_DIR, "./{}-tuning".format(args.model)), exist_ok=True)
path = os.path.join(DATA_DIR, '{}-tuning/{}.txt'.format(args.model, args.dataset))
with open(path, 'wb') as f: pkl.dump(best, f)


# ---------------------------------------------------------------------------------------------------------------------
# reddit.py (module-level script code)
# ---------------------------------------------------------------------------------------------------------------------
# Args
parser = argparse.ArgumentParser()
parser.add_argument('--no-cuda', action='store_true', default=False, help='Disables CUDA training.')
parser.add_argument('--inductive', action='store_true', default=False, help='inductive training.')
parser.add_argument('--test', action='store_true', default=False, help='inductive training.')
parser.add_argument('--seed', type=int, default=42, help='Random seed.')
parser.add_argument('--epochs', type=int, default=2, help='Number of epochs to train.')
parser.add_argument('--weight_decay', type=float, default=0, help='Weight decay (L2 loss on parameters).')
parser.add_argument('--normalization', type=str, default='AugNormAdj',
                   choices=['NormLap', 'Lap', 'RWalkLap', 'FirstOrderGCN',
                            'AugNormAdj', 'NormAdj', 'RWalk', 'AugRWalk', 'NoNorm'],
                   help='Normalization method for the adjacency matrix.')
parser.add_argument('--model', type=str, default="SGC", help='model to use.')
parser.add_argument('--degree', type=int, default=2, help='degree of the approximation.')

reddit_f1 = []
for argv in ([], ['--inductive', '--test']):
    args = parser.parse_args(argv)
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    set_seed(args.seed, args.cuda)

    adj, train_adj, features, labels, idx_train, idx_val, idx_test = load_reddit_data(args.normalization, cuda=args.cuda)
    print("Finished data loading.")

    model = SGC(features.size(1), labels.max().item()+1)
    if args.cuda: model.cuda()
    processed_features, precompute_time = sgc_precompute(features, adj, args.degree)
    if args.inductive:
        train_features, _ = sgc_precompute(features[idx_train], train_adj, args.degree)
    else:
        train_features = processed_features[idx_train]

    test_features = processed_features[idx_test if args.test else idx_val]

    def train_regression(model, train_features, train_labels, epochs):
        optimizer = optim.LBFGS(model.parameters(), lr=1)
        model.train()
        def closure():
            optimizer.zero_grad()
            output = model(train_features)
            loss_train = F.cross_entropy(output, train_labels)
            loss_train.backward()
            return loss_train
        t = perf_counter()
        for epoch in range(epochs):
            loss_train = optimizer.step(closure)
        train_time = perf_counter()-t
        return model, train_time

    def test_regression(model, test_features, test_labels):
        model.eval()
        return f1(model(test_features), test_labels)

    model, train_time = train_regression(model, train_features, labels[idx_train], args.epochs)
    test_f1, _ = test_regression(model, test_features, labels[idx_test if args.test else idx_val])
    print("Total Time: {:.4f}s, {} F1: {:.4f}".format(train_time+precompute_time,
                                                      "Test" if args.test else "Val",
                                                      test_f1))
    reddit_f1.append(test_f1)

print("done: cora test accuracy {:.4f}, reddit F1 {}".format(citation_test_acc, ", ".join("{:.4f}".format(v) for v in reddit_f1)))
