"""Trains a graph attention network (GAT: several attention heads whose outputs are concatenated, then one output
attention layer, log-softmax over the classes) for semi-supervised node classification on a Cora-like citation graph,
both as the dense model (masked attention over the full adjacency matrix) and as the sparse model (SpGAT: attention
scores only on the edges, aggregated with a custom autograd sparse x dense product); every epoch it evaluates the
validation nodes in eval mode, saves the state dict as `<epoch>.pkl`, keeps the best epoch by validation loss with
early stopping on patience, deletes the other checkpoints, reloads the best one and reports the test accuracy.

Modeled on: Diego999/pyGAT, train.py, models.py, layers.py and utils.py
(https://github.com/Diego999/pyGAT/blob/master/train.py, https://github.com/Diego999/pyGAT/blob/master/models.py,
https://github.com/Diego999/pyGAT/blob/master/layers.py, https://github.com/Diego999/pyGAT/blob/master/utils.py).

Kept: the `--no-cuda` flag and `args.cuda = not args.no_cuda and torch.cuda.is_available()`; the seeding with
`torch.cuda.manual_seed(args.seed)` under `if args.cuda:`; `load_data()` building everything on the host
(`torch.FloatTensor(np.array(features.todense()))`, `torch.LongTensor(np.where(labels)[1])`, a dense
`torch.FloatTensor` adjacency from scipy, `torch.LongTensor` index ranges); the model (GAT or, with `--sparse`, SpGAT)
and Adam made on the host, then, `if args.cuda:`, `model.cuda()` and `.cuda()` on features, adj, labels and the three
index tensors; the `Variable(...)` wrapping; `train(epoch)` with `model.train()`, the loss on `output[idx_train]`, the
`if not args.fastmode:` `model.eval()` re-run without `torch.no_grad()` (as in the original), `.data.item()` on the
losses and accuracies; `accuracy` with `output.max(1)[1].type_as(labels)` and `.double()`; the per-epoch
`torch.save(model.state_dict(), '{}.pkl'.format(epoch))`, the glob/os.remove bookkeeping, and the final
`model.load_state_dict(torch.load('{}.pkl'.format(best_epoch)))` without map_location; `compute_test()` with
`model.eval()`. In the layers: `zero_vec = -9e15*torch.ones_like(e)` and `torch.where(adj > 0, e, zero_vec)`; in
SpGraphAttentionLayer `dv = 'cuda' if input.is_cuda else 'cpu'`, `edge = adj.nonzero().t()`, the row sums from
`torch.ones(size=(N, 1), device=dv)`, the NaN asserts; SpecialSpmmFunction building
`torch.sparse_coo_tensor(indices, values, shape)` from the tensors' own device and its backward indexing
`grad_a_dense.view(-1)` with `a._indices()`.

Changed to run here: the module-level part of train.py is a function `main(argv)` run twice, once for the dense GAT
and once with `--sparse` (the original runs one per invocation); the checkpoints are written in a temporary working
directory; the per-epoch wall time and the total time are not printed.
Changed for no downloads: `load_data()` draws a synthetic citation graph (7 classes, nodes linked mostly within their
class, sparse bag-of-words features whose active words depend on the class) instead of reading cora.content and
cora.cites; the row normalisation of the features and the symmetric normalisation of `adj + I` are the author's
scipy code.
Shrunk: 140 nodes, 60 features, hidden 8 per head with 4 heads instead of 8, 12 epochs with patience 5 (the author's
10000 and 100), 35/35/70 train/val/test nodes.
"""
import argparse
import glob
import os
import random
import tempfile

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable


# ----------------------------------------------------------------------------- utils.py

def encode_onehot(labels):
    classes = sorted(set(labels))
    classes_dict = {c: np.identity(len(classes))[i, :] for i, c in enumerate(classes)}
    labels_onehot = np.array(list(map(classes_dict.get, labels)), dtype=np.int32)
    return labels_onehot


def _synthetic_cora(n_nodes=140, n_feats=60, n_classes=7, seed=7):
    """Stands in for reading data/cora/cora.content and cora.cites."""
    rng = np.random.RandomState(seed)
    raw_labels = np.array(['class_%d' % (i % n_classes) for i in rng.permutation(n_nodes)])
    cls = np.array([int(s.split('_')[1]) for s in raw_labels])
    words = rng.rand(n_nodes, n_feats) < 0.05
    for i in range(n_nodes):
        topic = rng.choice(np.arange(cls[i] * 8, cls[i] * 8 + 8) % n_feats, size=3, replace=False)
        words[i, topic] = True
    edges = []
    for i in range(n_nodes):
        for _ in range(3):
            same = np.where(cls == cls[i])[0] if rng.rand() < 0.85 else np.arange(n_nodes)
            j = rng.choice(same)
            if j != i:
                edges.append((i, j))
    return sp.csr_matrix(words.astype(np.float32)), raw_labels, np.array(edges, dtype=np.int32)


def load_data(path="./data/cora/", dataset="cora"):
    """Load citation network dataset (synthetic here)"""
    print('Loading {} dataset...'.format(dataset))

    features, raw_labels, edges = _synthetic_cora()
    labels = encode_onehot(raw_labels)

    adj = sp.coo_matrix((np.ones(edges.shape[0]), (edges[:, 0], edges[:, 1])),
                        shape=(labels.shape[0], labels.shape[0]), dtype=np.float32)

    # build symmetric adjacency matrix
    adj = adj + adj.T.multiply(adj.T > adj) - adj.multiply(adj.T > adj)

    features = normalize_features(features)
    adj = normalize_adj(adj + sp.eye(adj.shape[0]))

    idx_train = range(35)
    idx_val = range(35, 70)
    idx_test = range(70, 140)

    adj = torch.FloatTensor(np.array(adj.todense()))
    features = torch.FloatTensor(np.array(features.todense()))
    labels = torch.LongTensor(np.where(labels)[1])

    idx_train = torch.LongTensor(idx_train)
    idx_val = torch.LongTensor(idx_val)
    idx_test = torch.LongTensor(idx_test)

    return adj, features, labels, idx_train, idx_val, idx_test


def normalize_adj(mx):
    """Row-normalize sparse matrix"""
    rowsum = np.array(mx.sum(1))
    r_inv_sqrt = np.power(rowsum, -0.5).flatten()
    r_inv_sqrt[np.isinf(r_inv_sqrt)] = 0.
    r_mat_inv_sqrt = sp.diags(r_inv_sqrt)
    return mx.dot(r_mat_inv_sqrt).transpose().dot(r_mat_inv_sqrt)


def normalize_features(mx):
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


# ----------------------------------------------------------------------------- layers.py

class GraphAttentionLayer(nn.Module):
    """Simple GAT layer, similar to https://arxiv.org/abs/1710.10903"""

    def __init__(self, in_features, out_features, dropout, alpha, concat=True):
        super(GraphAttentionLayer, self).__init__()
        self.dropout = dropout
        self.in_features = in_features
        self.out_features = out_features
        self.alpha = alpha
        self.concat = concat

        self.W = nn.Parameter(torch.empty(size=(in_features, out_features)))
        nn.init.xavier_uniform_(self.W.data, gain=1.414)
        self.a = nn.Parameter(torch.empty(size=(2 * out_features, 1)))
        nn.init.xavier_uniform_(self.a.data, gain=1.414)

        self.leakyrelu = nn.LeakyReLU(self.alpha)

    def forward(self, h, adj):
        Wh = torch.mm(h, self.W)  # h.shape: (N, in_features), Wh.shape: (N, out_features)
        e = self._prepare_attentional_mechanism_input(Wh)

        zero_vec = -9e15 * torch.ones_like(e)
        attention = torch.where(adj > 0, e, zero_vec)
        attention = F.softmax(attention, dim=1)
        attention = F.dropout(attention, self.dropout, training=self.training)
        h_prime = torch.matmul(attention, Wh)

        if self.concat:
            return F.elu(h_prime)
        else:
            return h_prime

    def _prepare_attentional_mechanism_input(self, Wh):
        Wh1 = torch.matmul(Wh, self.a[:self.out_features, :])
        Wh2 = torch.matmul(Wh, self.a[self.out_features:, :])
        # broadcast add
        e = Wh1 + Wh2.T
        return self.leakyrelu(e)


class SpecialSpmmFunction(torch.autograd.Function):
    """Special function for only sparse region backpropataion layer."""

    @staticmethod
    def forward(ctx, indices, values, shape, b):
        assert indices.requires_grad == False
        a = torch.sparse_coo_tensor(indices, values, shape)
        ctx.save_for_backward(a, b)
        ctx.N = shape[0]
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_values = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a_dense = grad_output.matmul(b.t())
            edge_idx = a._indices()[0, :] * ctx.N + a._indices()[1, :]
            grad_values = grad_a_dense.view(-1)[edge_idx]
        if ctx.needs_input_grad[3]:
            grad_b = a.t().matmul(grad_output)
        return None, grad_values, None, grad_b


class SpecialSpmm(nn.Module):
    def forward(self, indices, values, shape, b):
        return SpecialSpmmFunction.apply(indices, values, shape, b)


class SpGraphAttentionLayer(nn.Module):
    """Sparse version GAT layer, similar to https://arxiv.org/abs/1710.10903"""

    def __init__(self, in_features, out_features, dropout, alpha, concat=True):
        super(SpGraphAttentionLayer, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.alpha = alpha
        self.concat = concat

        self.W = nn.Parameter(torch.zeros(size=(in_features, out_features)))
        nn.init.xavier_normal_(self.W.data, gain=1.414)

        self.a = nn.Parameter(torch.zeros(size=(1, 2 * out_features)))
        nn.init.xavier_normal_(self.a.data, gain=1.414)

        self.dropout = nn.Dropout(dropout)
        self.leakyrelu = nn.LeakyReLU(self.alpha)
        self.special_spmm = SpecialSpmm()

    def forward(self, input, adj):
        dv = 'cuda' if input.is_cuda else 'cpu'

        N = input.size()[0]
        edge = adj.nonzero().t()

        h = torch.mm(input, self.W)
        # h: N x out
        assert not torch.isnan(h).any()

        # Self-attention on the nodes - Shared attention mechanism
        edge_h = torch.cat((h[edge[0, :], :], h[edge[1, :], :]), dim=1).t()
        # edge: 2*D x E

        edge_e = torch.exp(-self.leakyrelu(self.a.mm(edge_h).squeeze()))
        assert not torch.isnan(edge_e).any()
        # edge_e: E

        e_rowsum = self.special_spmm(edge, edge_e, torch.Size([N, N]), torch.ones(size=(N, 1), device=dv))
        # e_rowsum: N x 1

        edge_e = self.dropout(edge_e)
        # edge_e: E

        h_prime = self.special_spmm(edge, edge_e, torch.Size([N, N]), h)
        assert not torch.isnan(h_prime).any()
        # h_prime: N x out

        h_prime = h_prime.div(e_rowsum)
        # h_prime: N x out
        assert not torch.isnan(h_prime).any()

        if self.concat:
            # if this layer is not last layer,
            return F.elu(h_prime)
        else:
            # if this layer is last layer,
            return h_prime


# ----------------------------------------------------------------------------- models.py

class GAT(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout, alpha, nheads):
        """Dense version of GAT."""
        super(GAT, self).__init__()
        self.dropout = dropout

        self.attentions = [GraphAttentionLayer(nfeat, nhid, dropout=dropout, alpha=alpha, concat=True)
                           for _ in range(nheads)]
        for i, attention in enumerate(self.attentions):
            self.add_module('attention_{}'.format(i), attention)

        self.out_att = GraphAttentionLayer(nhid * nheads, nclass, dropout=dropout, alpha=alpha, concat=False)

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, training=self.training)
        x = torch.cat([att(x, adj) for att in self.attentions], dim=1)
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.elu(self.out_att(x, adj))
        return F.log_softmax(x, dim=1)


class SpGAT(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout, alpha, nheads):
        """Sparse version of GAT."""
        super(SpGAT, self).__init__()
        self.dropout = dropout

        self.attentions = [SpGraphAttentionLayer(nfeat, nhid, dropout=dropout, alpha=alpha, concat=True)
                           for _ in range(nheads)]
        for i, attention in enumerate(self.attentions):
            self.add_module('attention_{}'.format(i), attention)

        self.out_att = SpGraphAttentionLayer(nhid * nheads, nclass, dropout=dropout, alpha=alpha, concat=False)

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, training=self.training)
        x = torch.cat([att(x, adj) for att in self.attentions], dim=1)
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.elu(self.out_att(x, adj))
        return F.log_softmax(x, dim=1)


# ----------------------------------------------------------------------------- train.py

def main(argv):
    # Training settings
    parser = argparse.ArgumentParser()
    parser.add_argument('--no-cuda', action='store_true', default=False, help='Disables CUDA training.')
    parser.add_argument('--fastmode', action='store_true', default=False, help='Validate during training pass.')
    parser.add_argument('--sparse', action='store_true', default=False, help='GAT with sparse version or not.')
    parser.add_argument('--seed', type=int, default=72, help='Random seed.')
    parser.add_argument('--epochs', type=int, default=12, help='Number of epochs to train.')
    parser.add_argument('--lr', type=float, default=0.005, help='Initial learning rate.')
    parser.add_argument('--weight_decay', type=float, default=5e-4, help='Weight decay (L2 loss on parameters).')
    parser.add_argument('--hidden', type=int, default=8, help='Number of hidden units.')
    parser.add_argument('--nb_heads', type=int, default=4, help='Number of head attentions.')
    parser.add_argument('--dropout', type=float, default=0.6, help='Dropout rate (1 - keep probability).')
    parser.add_argument('--alpha', type=float, default=0.2, help='Alpha for the leaky_relu.')
    parser.add_argument('--patience', type=int, default=5, help='Patience')

    args = parser.parse_args(argv)
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.cuda:
        torch.cuda.manual_seed(args.seed)

    # Load data
    adj, features, labels, idx_train, idx_val, idx_test = load_data()

    # Model and optimizer
    if args.sparse:
        model = SpGAT(nfeat=features.shape[1],
                      nhid=args.hidden,
                      nclass=int(labels.max()) + 1,
                      dropout=args.dropout,
                      nheads=args.nb_heads,
                      alpha=args.alpha)
    else:
        model = GAT(nfeat=features.shape[1],
                    nhid=args.hidden,
                    nclass=int(labels.max()) + 1,
                    dropout=args.dropout,
                    nheads=args.nb_heads,
                    alpha=args.alpha)
    optimizer = optim.Adam(model.parameters(),
                           lr=args.lr,
                           weight_decay=args.weight_decay)

    if args.cuda:
        model.cuda()
        features = features.cuda()
        adj = adj.cuda()
        labels = labels.cuda()
        idx_train = idx_train.cuda()
        idx_val = idx_val.cuda()
        idx_test = idx_test.cuda()

    features, adj, labels = Variable(features), Variable(adj), Variable(labels)

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
        print('Epoch: {:04d}'.format(epoch + 1),
              'loss_train: {:.4f}'.format(loss_train.data.item()),
              'acc_train: {:.4f}'.format(acc_train.data.item()),
              'loss_val: {:.4f}'.format(loss_val.data.item()),
              'acc_val: {:.4f}'.format(acc_val.data.item()))

        return loss_val.data.item()

    def compute_test():
        model.eval()
        output = model(features, adj)
        loss_test = F.nll_loss(output[idx_test], labels[idx_test])
        acc_test = accuracy(output[idx_test], labels[idx_test])
        print("Test set results:",
              "loss= {:.4f}".format(loss_test.data.item()),
              "accuracy= {:.4f}".format(acc_test.data.item()))
        return loss_test.data.item(), acc_test.data.item()

    # Train model
    loss_values = []
    bad_counter = 0
    best = args.epochs + 1
    best_epoch = 0
    for epoch in range(args.epochs):
        loss_values.append(train(epoch))

        torch.save(model.state_dict(), '{}.pkl'.format(epoch))
        if loss_values[-1] < best:
            best = loss_values[-1]
            best_epoch = epoch
            bad_counter = 0
        else:
            bad_counter += 1

        if bad_counter == args.patience:
            break

        files = glob.glob('*.pkl')
        for file in files:
            epoch_nb = int(file.split('.')[0])
            if epoch_nb < best_epoch:
                os.remove(file)

    files = glob.glob('*.pkl')
    for file in files:
        epoch_nb = int(file.split('.')[0])
        if epoch_nb > best_epoch:
            os.remove(file)

    print("Optimization Finished!")

    # Restore best model
    print('Loading {}th epoch'.format(best_epoch))
    model.load_state_dict(torch.load('{}.pkl'.format(best_epoch)))

    # Testing
    result = compute_test()
    for file in glob.glob('*.pkl'):
        os.remove(file)
    return result


if __name__ == '__main__':
    workdir = tempfile.mkdtemp()
    os.chdir(workdir)
    dense_loss, dense_acc = main([])
    sparse_loss, sparse_acc = main(['--sparse'])
    print('done dense_acc={:.4f} sparse_acc={:.4f}'.format(dense_acc, sparse_acc))
