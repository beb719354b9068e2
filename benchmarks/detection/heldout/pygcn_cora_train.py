"""Trains Kipf and Welling's two-layer graph convolutional network (pygcn) for semi-supervised node classification on
a citation graph in Cora's file format: `load_data` reads `cora.content` (paper id, binary word vector, class name)
and `cora.cites` with `np.genfromtxt`, one-hot encodes the labels, symmetrises the adjacency, row-normalises the
features and `A + I` with scipy, turns the adjacency into a torch sparse tensor and returns fixed train/val/test index
ranges; the model (`GraphConvolution` layers doing `torch.mm` then `torch.spmm`) is trained full-batch with Adam and
weight decay, with a separate dropout-free validation pass each epoch, then evaluated on the test nodes.

Modeled on: tkipf/pygcn, pygcn/train.py, pygcn/utils.py, pygcn/models.py and pygcn/layers.py
(https://github.com/tkipf/pygcn/blob/1600b5b748b3976413d1e307540ccc62605b4d6d/pygcn/train.py,
https://github.com/tkipf/pygcn/blob/1600b5b748b3976413d1e307540ccc62605b4d6d/pygcn/utils.py,
https://github.com/tkipf/pygcn/blob/1600b5b748b3976413d1e307540ccc62605b4d6d/pygcn/layers.py).

Kept: the `--no-cuda` flag and `args.cuda = not args.no_cuda and torch.cuda.is_available()`; `np.random.seed`,
`torch.manual_seed` and `torch.cuda.manual_seed(args.seed)` under `if args.cuda:`; `load_data` building everything on
the host (`torch.FloatTensor(np.array(features.todense()))`, `torch.LongTensor(np.where(labels)[1])`, the index
tensors from `torch.LongTensor(range(...))`, and `sparse_mx_to_torch_sparse_tensor` using `torch.from_numpy` and the
legacy `torch.sparse.FloatTensor(indices, values, shape)` constructor); the model built on the host with
`labels.max().item() + 1` classes and Adam created BEFORE the move; then, under `if args.cuda:`, `model.cuda()` and
`.cuda()` on features, adj, labels, idx_train, idx_val and idx_test, all at module level; the layer's
`Parameter(torch.FloatTensor(in, out))` weights initialised with `.data.uniform_`; `train(epoch)` with
`model.train()`, then (unless `--fastmode`) `model.eval()` and a second forward pass without `torch.no_grad()` for
the validation numbers; `test()` with `model.eval()` and no `torch.no_grad()`; `accuracy` doing
`output.max(1)[1].type_as(labels)`, `.eq(labels).double()` and dividing by `len(labels)` (a device tensor, read with
`.item()` when printed); the script-level structure (parser, data, model, train loop and test at module level).

Changed to run here: the Cora download is replaced by a synthetic citation graph (7 classes, class-dependent word
probabilities, mostly same-class citations) written to `cora.content`/`cora.cites` in a temporary folder, and
`load_data` is given that folder; `parser.parse_args()` is `parser.parse_args([])`; the per-epoch and total
wall-clock times are not printed, the epoch line is printed every 10th epoch and `train`/`test` return their losses
for the last line.
Shrunk: 320 papers with 200 words instead of 2708 with 1433; index ranges train 0-69, val 100-179, test 180-319
instead of 0-139, 200-499, 500-1499; 60 epochs instead of 200.
"""
from __future__ import division
from __future__ import print_function

import argparse
import math
import os
import tempfile

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter
from torch.nn.modules.module import Module


# ----------------------------------------------------------------------------- synthetic Cora files

CLASS_NAMES = ['Case_Based', 'Genetic_Algorithms', 'Neural_Networks', 'Probabilistic_Methods',
               'Reinforcement_Learning', 'Rule_Learning', 'Theory']


def write_synthetic_cora(path, n_papers=320, n_words=200, seed=7):
    """Writes cora.content and cora.cites (same layout as the LINQS files) for a random citation graph."""
    rng = np.random.RandomState(seed)
    paper_ids = rng.choice(np.arange(1000, 1000000), size=n_papers, replace=False)
    classes = rng.randint(len(CLASS_NAMES), size=n_papers)
    # each class prefers its own band of words
    base = np.full((len(CLASS_NAMES), n_words), 0.02)
    band = n_words // len(CLASS_NAMES)
    for c in range(len(CLASS_NAMES)):
        base[c, c * band:(c + 1) * band] = 0.18
    with open(os.path.join(path, 'cora.content'), 'w') as f:
        for pid, c in zip(paper_ids, classes):
            words = (rng.rand(n_words) < base[c]).astype(int)
            f.write('\t'.join([str(pid)] + [str(w) for w in words] + [CLASS_NAMES[c]]) + '\n')
    with open(os.path.join(path, 'cora.cites'), 'w') as f:
        for i in range(n_papers):
            for _ in range(rng.randint(1, 4)):
                if rng.rand() < 0.8:
                    same = np.where(classes == classes[i])[0]
                    j = same[rng.randint(len(same))]
                else:
                    j = rng.randint(n_papers)
                if j != i:
                    f.write('{}\t{}\n'.format(paper_ids[j], paper_ids[i]))


# ----------------------------------------------------------------------------- pygcn/utils.py

def encode_onehot(labels):
    classes = sorted(set(labels))
    classes_dict = {c: np.identity(len(classes))[i, :] for i, c in enumerate(classes)}
    labels_onehot = np.array(list(map(classes_dict.get, labels)), dtype=np.int32)
    return labels_onehot


def load_data(path="../data/cora/", dataset="cora"):
    """Load citation network dataset (cora only for now)"""
    print('Loading {} dataset...'.format(dataset))

    idx_features_labels = np.genfromtxt("{}{}.content".format(path, dataset), dtype=np.dtype(str))
    features = sp.csr_matrix(idx_features_labels[:, 1:-1], dtype=np.float32)
    labels = encode_onehot(idx_features_labels[:, -1])

    # build graph
    idx = np.array(idx_features_labels[:, 0], dtype=np.int32)
    idx_map = {j: i for i, j in enumerate(idx)}
    edges_unordered = np.genfromtxt("{}{}.cites".format(path, dataset), dtype=np.int32)
    edges = np.array(list(map(idx_map.get, edges_unordered.flatten())),
                     dtype=np.int32).reshape(edges_unordered.shape)
    adj = sp.coo_matrix((np.ones(edges.shape[0]), (edges[:, 0], edges[:, 1])),
                        shape=(labels.shape[0], labels.shape[0]), dtype=np.float32)

    # build symmetric adjacency matrix
    adj = adj + adj.T.multiply(adj.T > adj) - adj.multiply(adj.T > adj)

    features = normalize(features)
    adj = normalize(adj + sp.eye(adj.shape[0]))

    idx_train = range(70)
    idx_val = range(100, 180)
    idx_test = range(180, 320)

    features = torch.FloatTensor(np.array(features.todense()))
    labels = torch.LongTensor(np.where(labels)[1])
    adj = sparse_mx_to_torch_sparse_tensor(adj)

    idx_train = torch.LongTensor(idx_train)
    idx_val = torch.LongTensor(idx_val)
    idx_test = torch.LongTensor(idx_test)

    return adj, features, labels, idx_train, idx_val, idx_test


def normalize(mx):
    """Row-normalize sparse matrix"""
    rowsum = np.array(mx.sum(1))
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[np.isinf(r_inv)] = 0.
    r_mat_inv = sp.diags(r_inv)
    mx = r_mat_inv.dot(mx)
    return mx


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)


def sparse_mx_to_torch_sparse_tensor(sparse_mx):
    """Convert a scipy sparse matrix to a torch sparse tensor."""
    sparse_mx = sparse_mx.tocoo().astype(np.float32)
    indices = torch.from_numpy(np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
    values = torch.from_numpy(sparse_mx.data)
    shape = torch.Size(sparse_mx.shape)
    return torch.sparse.FloatTensor(indices, values, shape)


# ----------------------------------------------------------------------------- pygcn/layers.py, pygcn/models.py

class GraphConvolution(Module):
    """
    Simple GCN layer, similar to https://arxiv.org/abs/1609.02907
    """

    def __init__(self, in_features, out_features, bias=True):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        if bias:
            self.bias = Parameter(torch.FloatTensor(out_features))
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1. / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        if self.bias is not None:
            return output + self.bias
        else:
            return output

    def __repr__(self):
        return '{} ({} -> {})'.format(self.__class__.__name__, self.in_features, self.out_features)


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super(GCN, self).__init__()

        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


# ----------------------------------------------------------------------------- pygcn/train.py

# Training settings
parser = argparse.ArgumentParser()
parser.add_argument('--no-cuda', action='store_true', default=False,
                    help='Disables CUDA training.')
parser.add_argument('--fastmode', action='store_true', default=False,
                    help='Validate during training pass.')
parser.add_argument('--seed', type=int, default=42, help='Random seed.')
parser.add_argument('--epochs', type=int, default=60,
                    help='Number of epochs to train.')
parser.add_argument('--lr', type=float, default=0.01,
                    help='Initial learning rate.')
parser.add_argument('--weight_decay', type=float, default=5e-4,
                    help='Weight decay (L2 loss on parameters).')
parser.add_argument('--hidden', type=int, default=16,
                    help='Number of hidden units.')
parser.add_argument('--dropout', type=float, default=0.5,
                    help='Dropout rate (1 - keep probability).')

args = parser.parse_args([])
args.cuda = not args.no_cuda and torch.cuda.is_available()

np.random.seed(args.seed)
torch.manual_seed(args.seed)
if args.cuda:
    torch.cuda.manual_seed(args.seed)

# Load data
data_dir = tempfile.mkdtemp()
write_synthetic_cora(data_dir)
adj, features, labels, idx_train, idx_val, idx_test = load_data(path=data_dir + os.sep)

# Model and optimizer
model = GCN(nfeat=features.shape[1],
            nhid=args.hidden,
            nclass=labels.max().item() + 1,
            dropout=args.dropout)
optimizer = optim.Adam(model.parameters(),
                       lr=args.lr, weight_decay=args.weight_decay)

if args.cuda:
    model.cuda()
    features = features.cuda()
    adj = adj.cuda()
    labels = labels.cuda()
    idx_train = idx_train.cuda()
    idx_val = idx_val.cuda()
    idx_test = idx_test.cuda()


def train(epoch):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    acc_train = accuracy(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()

    if not args.fastmode:
        # Evaluate validation set performance separately,
        # deactivates dropout during validation run.
        model.eval()
        output = model(features, adj)

    loss_val = F.nll_loss(output[idx_val], labels[idx_val])
    acc_val = accuracy(output[idx_val], labels[idx_val])
    if epoch % 10 == 0 or epoch == args.epochs - 1:
        print('Epoch: {:04d}'.format(epoch + 1),
              'loss_train: {:.4f}'.format(loss_train.item()),
              'acc_train: {:.4f}'.format(acc_train.item()),
              'loss_val: {:.4f}'.format(loss_val.item()),
              'acc_val: {:.4f}'.format(acc_val.item()))
    return loss_val.item()


def test():
    model.eval()
    output = model(features, adj)
    loss_test = F.nll_loss(output[idx_test], labels[idx_test])
    acc_test = accuracy(output[idx_test], labels[idx_test])
    print("Test set results:",
          "loss= {:.4f}".format(loss_test.item()),
          "accuracy= {:.4f}".format(acc_test.item()))
    return loss_test.item(), acc_test.item()


# Train model
for epoch in range(args.epochs):
    last_val_loss = train(epoch)
print("Optimization Finished!")

# Testing
test_loss, test_acc = test()
print('done val_loss={:.4f} test_loss={:.4f} test_acc={:.4f}'.format(last_val_loss, test_loss, test_acc))
