"""Trains Deep Graph Infomax (DGI) on a citation graph stored in the Planetoid pickle format, the way PetarV-/DGI's
execute.py does it: a one-layer GCN encoder (PReLU) embeds the real graph and a corrupted copy (node features
shuffled with a numpy permutation), an average readout squashed by a sigmoid summarises the real graph, and a bilinear
discriminator scores (node, summary) pairs against the ones/zeros labels with BCE-with-logits; the best model by
training loss is saved to `best_dgi.pkl` with early stopping on patience; the best weights are loaded back, the
frozen embeddings of the train/test nodes are taken with `model.embed`, and several logistic-regression probes are
trained on them, their test accuracies summed into a device tensor and averaged.

Modeled on: PetarV-/DGI, execute.py, models/dgi.py, models/logreg.py, layers/gcn.py, layers/readout.py,
layers/discriminator.py and utils/process.py at commit 61baf67d7052905c77bdeb28c22926f04e182362
(https://github.com/PetarV-/DGI/blob/61baf67d7052905c77bdeb28c22926f04e182362/execute.py and the other files at the
same commit).

Kept: execute.py's training parameters as module globals (`batch_size = 1`, `patience`, `lr`, `l2_coef`,
`hid_units`, `sparse = True`, `nonlinearity = 'prelu'`); `process.load_data` (the seven pickles read with
`pkl.load(f, encoding='latin1')`, `parse_index_file`, the test-index reordering of features and labels, `idx_train =
range(len(y))`, `idx_val = range(len(y), len(y) + n)`), `preprocess_features` (row normalisation, returning the dense
matrix and the tuple form), `normalize_adj` on `adj + sp.eye(...)` and `sparse_mx_to_torch_sparse_tensor` (the legacy
`torch.sparse.FloatTensor(indices, values, shape)` constructor); all tensors built on the host
(`torch.FloatTensor(features[np.newaxis])`, one-hot labels as `torch.FloatTensor(labels[np.newaxis])`, index
tensors with `torch.LongTensor`), the model and the Adam optimizer built on the host, then, under
`if torch.cuda.is_available():`, `model.cuda()` and `.cuda()` on the features, the sparse adjacency (or the dense one
when `sparse` is False), the labels and the three index tensors; the training loop (`model.train()`, a numpy
permutation to corrupt the features with `features[:, idx, :]`, the labels `torch.ones`/`torch.zeros` made on the
host and `torch.cat`-ed, then `shuf_fts.cuda()`/`lbl.cuda()` under `torch.cuda.is_available()`, the loss printed as a
tensor, `loss < best` compared as a device tensor and kept as `best`, `torch.save(model.state_dict(),
'best_dgi.pkl')`, early stop on `cnt_wait == patience`, then `loss.backward()` and `optimiser.step()`);
`model.load_state_dict(torch.load('best_dgi.pkl'))`; `model.embed` returning detached tensors; the probe labels from
`torch.argmax(labels[0, idx_train], dim=1)`; the `tot = torch.zeros(1)` / `best_acc = torch.zeros(1)` accumulators
and `LogReg` models moved with `.cuda()` after their Adam optimizers are built; `acc` as a device tensor appended to
`accs`, added to `tot`, and `torch.stack(accs)` for the mean and standard deviation; the GCN layer (`nn.Linear` without
bias, a separate bias `Parameter`, `torch.spmm` on the squeezed features when sparse, `torch.bmm` otherwise), the
readout with its optional mask, and the bilinear discriminator with its optional sample biases.

Changed to run here: the Cora pickles are replaced by a synthetic citation graph written in the same Planetoid format
(`ind.cora.{x,y,tx,ty,allx,ally,graph,test.index}` in a `data/` folder of a temporary working directory, removed at the
end); `nx.adjacency_matrix(nx.from_dict_of_lists(graph))` (networkx is not installed) is an equivalent scipy
construction in `adjacency_from_dict_of_lists`; `np.bool` (gone from numpy) is `bool` in `sample_mask`; the author's
unconditional `tot.cuda()`, `log.cuda()` and `best_acc.cuda()` are under `if torch.cuda.is_available():` like the
other moves (they crash on a machine without a GPU); the loss is printed every 10th epoch and the per-probe
accuracy with `.item()`; the modules of models/ and layers/ are in this one file.
Shrunk: 280 nodes with 120 words and 7 classes (35 labelled training nodes, 70 validation, 100 test) instead of
Cora's 2708 x 1433; `hid_units` 512 -> 64, `nb_epochs` 10000 -> 60, `patience` 20 -> 10, `lr` 0.001 -> 0.005; 5
logistic-regression probes of 60 steps instead of 50 of 100.
"""
import os
import pickle as pkl
import shutil
import sys
import tempfile

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn


# ----------------------------------------------------------------------------- synthetic Planetoid files

def write_synthetic_planetoid(folder, dataset_str='cora', n_nodes=280, n_words=120, n_classes=7, n_train=35,
                              n_test=100, seed=3):
    """Writes ind.<dataset>.* pickles laid out like the Planetoid splits (x/y: labelled training nodes, allx/ally:
    every node that is not a test node, tx/ty: test nodes, graph: dict of lists, test.index: shuffled test ids)."""
    rng = np.random.RandomState(seed)
    classes = rng.randint(n_classes, size=n_nodes)
    band = n_words // n_classes
    probs = np.full((n_classes, n_words), 0.03)
    for c in range(n_classes):
        probs[c, c * band:(c + 1) * band] = 0.3
    feats = (rng.rand(n_nodes, n_words) < probs[classes]).astype(np.float32)
    feats[feats.sum(1) == 0, 0] = 1.0
    onehot = np.eye(n_classes)[classes]
    n_all = n_nodes - n_test
    test_ids = np.arange(n_all, n_nodes)
    test_order = rng.permutation(test_ids)
    # features of test nodes are stored in the shuffled order of ind.cora.test.index
    objects = {
        'x': sp.csr_matrix(feats[:n_train]), 'y': onehot[:n_train],
        'allx': sp.csr_matrix(feats[:n_all]), 'ally': onehot[:n_all],
        'tx': sp.csr_matrix(feats[test_order]), 'ty': onehot[test_order],
    }
    graph = {i: [] for i in range(n_nodes)}
    for i in range(n_nodes):
        for _ in range(rng.randint(1, 4)):
            if rng.rand() < 0.85:
                same = np.where(classes == classes[i])[0]
                j = int(same[rng.randint(len(same))])
            else:
                j = int(rng.randint(n_nodes))
            if j != i and j not in graph[i]:
                graph[i].append(j)
    # the loader puts the test rows back in place, so the graph uses the real node ids
    objects['graph'] = graph
    os.makedirs(folder, exist_ok=True)
    for name, obj in objects.items():
        with open(os.path.join(folder, 'ind.{}.{}'.format(dataset_str, name)), 'wb') as f:
            pkl.dump(obj, f)
    with open(os.path.join(folder, 'ind.{}.test.index'.format(dataset_str)), 'w') as f:
        f.write('\n'.join(str(i) for i in test_order) + '\n')


# ----------------------------------------------------------------------------- utils/process.py

def parse_index_file(filename):
    """Parse index file."""
    index = []
    for line in open(filename):
        index.append(int(line.strip()))
    return index


def sample_mask(idx, l):
    """Create mask."""
    mask = np.zeros(l)
    mask[idx] = 1
    return np.array(mask, dtype=bool)


def adjacency_from_dict_of_lists(graph):
    """What nx.adjacency_matrix(nx.from_dict_of_lists(graph)) returns: a symmetric 0/1 scipy matrix."""
    n = max(max(graph.keys()), max((max(v) for v in graph.values() if v), default=0)) + 1
    rows, cols = [], []
    for i, neighbours in graph.items():
        for j in neighbours:
            rows += [i, j]
            cols += [j, i]
    adj = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)).tocsr()
    adj.data[:] = 1.0
    return adj


def load_data(dataset_str, n_val=70):  # {'pubmed', 'citeseer', 'cora'}
    """Load data."""
    names = ['x', 'y', 'tx', 'ty', 'allx', 'ally', 'graph']
    objects = []
    for i in range(len(names)):
        with open("data/ind.{}.{}".format(dataset_str, names[i]), 'rb') as f:
            if sys.version_info > (3, 0):
                objects.append(pkl.load(f, encoding='latin1'))
            else:
                objects.append(pkl.load(f))

    x, y, tx, ty, allx, ally, graph = tuple(objects)
    test_idx_reorder = parse_index_file("data/ind.{}.test.index".format(dataset_str))
    test_idx_range = np.sort(test_idx_reorder)

    features = sp.vstack((allx, tx)).tolil()
    features[test_idx_reorder, :] = features[test_idx_range, :]
    adj = adjacency_from_dict_of_lists(graph)

    labels = np.vstack((ally, ty))
    labels[test_idx_reorder, :] = labels[test_idx_range, :]

    idx_test = test_idx_range.tolist()
    idx_train = range(len(y))
    idx_val = range(len(y), len(y) + n_val)

    return adj, features, labels, idx_train, idx_val, idx_test


def sparse_to_tuple(sparse_mx, insert_batch=False):
    """Convert sparse matrix to tuple representation."""
    def to_tuple(mx):
        if not sp.isspmatrix_coo(mx):
            mx = mx.tocoo()
        if insert_batch:
            coords = np.vstack((np.zeros(mx.row.shape[0]), mx.row, mx.col)).transpose()
            values = mx.data
            shape = (1,) + mx.shape
        else:
            coords = np.vstack((mx.row, mx.col)).transpose()
            values = mx.data
            shape = mx.shape
        return coords, values, shape

    if isinstance(sparse_mx, list):
        for i in range(len(sparse_mx)):
            sparse_mx[i] = to_tuple(sparse_mx[i])
    else:
        sparse_mx = to_tuple(sparse_mx)

    return sparse_mx


def preprocess_features(features):
    """Row-normalize feature matrix and convert to tuple representation"""
    rowsum = np.array(features.sum(1))
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[np.isinf(r_inv)] = 0.
    r_mat_inv = sp.diags(r_inv)
    features = r_mat_inv.dot(features)
    return features.todense(), sparse_to_tuple(features)


def normalize_adj(adj):
    """Symmetrically normalize adjacency matrix."""
    adj = sp.coo_matrix(adj)
    rowsum = np.array(adj.sum(1))
    d_inv_sqrt = np.power(rowsum, -0.5).flatten()
    d_inv_sqrt[np.isinf(d_inv_sqrt)] = 0.
    d_mat_inv_sqrt = sp.diags(d_inv_sqrt)
    return adj.dot(d_mat_inv_sqrt).transpose().dot(d_mat_inv_sqrt).tocoo()


def sparse_mx_to_torch_sparse_tensor(sparse_mx):
    """Convert a scipy sparse matrix to a torch sparse tensor."""
    sparse_mx = sparse_mx.tocoo().astype(np.float32)
    indices = torch.from_numpy(
        np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
    values = torch.from_numpy(sparse_mx.data)
    shape = torch.Size(sparse_mx.shape)
    return torch.sparse.FloatTensor(indices, values, shape)


# ----------------------------------------------------------------------------- layers/

class GCN(nn.Module):
    def __init__(self, in_ft, out_ft, act, bias=True):
        super(GCN, self).__init__()
        self.fc = nn.Linear(in_ft, out_ft, bias=False)
        self.act = nn.PReLU() if act == 'prelu' else act

        if bias:
            self.bias = nn.Parameter(torch.FloatTensor(out_ft))
            self.bias.data.fill_(0.0)
        else:
            self.register_parameter('bias', None)

        for m in self.modules():
            self.weights_init(m)

    def weights_init(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight.data)
            if m.bias is not None:
                m.bias.data.fill_(0.0)

    # Shape of seq: (batch, nodes, features)
    def forward(self, seq, adj, sparse=False):
        seq_fts = self.fc(seq)
        if sparse:
            out = torch.unsqueeze(torch.spmm(adj, torch.squeeze(seq_fts, 0)), 0)
        else:
            out = torch.bmm(adj, seq_fts)
        if self.bias is not None:
            out += self.bias

        return self.act(out)


# Applies an average on seq, of shape (batch, nodes, features)
# While taking into account the masking of msk
class AvgReadout(nn.Module):
    def __init__(self):
        super(AvgReadout, self).__init__()

    def forward(self, seq, msk):
        if msk is None:
            return torch.mean(seq, 1)
        else:
            msk = torch.unsqueeze(msk, -1)
            return torch.sum(seq * msk, 1) / torch.sum(msk)


class Discriminator(nn.Module):
    def __init__(self, n_h):
        super(Discriminator, self).__init__()
        self.f_k = nn.Bilinear(n_h, n_h, 1)

        for m in self.modules():
            self.weights_init(m)

    def weights_init(self, m):
        if isinstance(m, nn.Bilinear):
            torch.nn.init.xavier_uniform_(m.weight.data)
            if m.bias is not None:
                m.bias.data.fill_(0.0)

    def forward(self, c, h_pl, h_mi, s_bias1=None, s_bias2=None):
        c_x = torch.unsqueeze(c, 1)
        c_x = c_x.expand_as(h_pl)

        sc_1 = torch.squeeze(self.f_k(h_pl, c_x), 2)
        sc_2 = torch.squeeze(self.f_k(h_mi, c_x), 2)

        if s_bias1 is not None:
            sc_1 += s_bias1
        if s_bias2 is not None:
            sc_2 += s_bias2

        logits = torch.cat((sc_1, sc_2), 1)

        return logits


# ----------------------------------------------------------------------------- models/

class DGI(nn.Module):
    def __init__(self, n_in, n_h, activation):
        super(DGI, self).__init__()
        self.gcn = GCN(n_in, n_h, activation)
        self.read = AvgReadout()

        self.sigm = nn.Sigmoid()

        self.disc = Discriminator(n_h)

    def forward(self, seq1, seq2, adj, sparse, msk, samp_bias1, samp_bias2):
        h_1 = self.gcn(seq1, adj, sparse)

        c = self.read(h_1, msk)
        c = self.sigm(c)

        h_2 = self.gcn(seq2, adj, sparse)

        ret = self.disc(c, h_1, h_2, samp_bias1, samp_bias2)

        return ret

    # Detach the return variables
    def embed(self, seq, adj, sparse, msk):
        h_1 = self.gcn(seq, adj, sparse)
        c = self.read(h_1, msk)

        return h_1.detach(), c.detach()


class LogReg(nn.Module):
    def __init__(self, ft_in, nb_classes):
        super(LogReg, self).__init__()
        self.fc = nn.Linear(ft_in, nb_classes)

        for m in self.modules():
            self.weights_init(m)

    def weights_init(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight.data)
            if m.bias is not None:
                m.bias.data.fill_(0.0)

    def forward(self, seq):
        ret = self.fc(seq)
        return ret


# ----------------------------------------------------------------------------- execute.py

workdir = tempfile.mkdtemp(prefix='dgi_')
cwd = os.getcwd()
os.chdir(workdir)
np.random.seed(0)
torch.manual_seed(0)

dataset = 'cora'
write_synthetic_planetoid('data', dataset)

# training params
batch_size = 1
nb_epochs = 60
patience = 10
lr = 0.005
l2_coef = 0.0
drop_prob = 0.0
hid_units = 64
sparse = True
nonlinearity = 'prelu'  # special name to separate parameters
nb_probes = 5

adj, features, labels, idx_train, idx_val, idx_test = load_data(dataset)
features, _ = preprocess_features(features)

nb_nodes = features.shape[0]
ft_size = features.shape[1]
nb_classes = labels.shape[1]

adj = normalize_adj(adj + sp.eye(adj.shape[0]))

if sparse:
    sp_adj = sparse_mx_to_torch_sparse_tensor(adj)
else:
    adj = (adj + sp.eye(adj.shape[0])).todense()

features = torch.FloatTensor(features[np.newaxis])
if not sparse:
    adj = torch.FloatTensor(adj[np.newaxis])
labels = torch.FloatTensor(labels[np.newaxis])
idx_train = torch.LongTensor(idx_train)
idx_val = torch.LongTensor(idx_val)
idx_test = torch.LongTensor(idx_test)

model = DGI(ft_size, hid_units, nonlinearity)
optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=l2_coef)

if torch.cuda.is_available():
    print('Using CUDA')
    model.cuda()
    features = features.cuda()
    if sparse:
        sp_adj = sp_adj.cuda()
    else:
        adj = adj.cuda()
    labels = labels.cuda()
    idx_train = idx_train.cuda()
    idx_val = idx_val.cuda()
    idx_test = idx_test.cuda()

b_xent = nn.BCEWithLogitsLoss()
xent = nn.CrossEntropyLoss()
cnt_wait = 0
best = 1e9
best_t = 0

for epoch in range(nb_epochs):
    model.train()
    optimiser.zero_grad()

    idx = np.random.permutation(nb_nodes)
    shuf_fts = features[:, idx, :]

    lbl_1 = torch.ones(batch_size, nb_nodes)
    lbl_2 = torch.zeros(batch_size, nb_nodes)
    lbl = torch.cat((lbl_1, lbl_2), 1)

    if torch.cuda.is_available():
        shuf_fts = shuf_fts.cuda()
        lbl = lbl.cuda()

    logits = model(features, shuf_fts, sp_adj if sparse else adj, sparse, None, None, None)

    loss = b_xent(logits, lbl)

    if epoch % 10 == 0:
        print('Loss:', loss)

    if loss < best:
        best = loss
        best_t = epoch
        cnt_wait = 0
        torch.save(model.state_dict(), 'best_dgi.pkl')
    else:
        cnt_wait += 1

    if cnt_wait == patience:
        print('Early stopping!')
        break

    loss.backward()
    optimiser.step()

print('Loading {}th epoch'.format(best_t))
model.load_state_dict(torch.load('best_dgi.pkl'))

embeds, _ = model.embed(features, sp_adj if sparse else adj, sparse, None)
train_embs = embeds[0, idx_train]
val_embs = embeds[0, idx_val]
test_embs = embeds[0, idx_test]

train_lbls = torch.argmax(labels[0, idx_train], dim=1)
val_lbls = torch.argmax(labels[0, idx_val], dim=1)
test_lbls = torch.argmax(labels[0, idx_test], dim=1)

tot = torch.zeros(1)
if torch.cuda.is_available():
    tot = tot.cuda()

accs = []

for _ in range(nb_probes):
    log = LogReg(hid_units, nb_classes)
    opt = torch.optim.Adam(log.parameters(), lr=0.01, weight_decay=0.0)
    if torch.cuda.is_available():
        log.cuda()

    pat_steps = 0
    best_acc = torch.zeros(1)
    if torch.cuda.is_available():
        best_acc = best_acc.cuda()
    for _ in range(60):
        log.train()
        opt.zero_grad()

        logits = log(train_embs)
        loss = xent(logits, train_lbls)

        loss.backward()
        opt.step()

    logits = log(test_embs)
    preds = torch.argmax(logits, dim=1)
    acc = torch.sum(preds == test_lbls).float() / test_lbls.shape[0]
    accs.append(acc * 100)
    print('probe accuracy: {:.4f}'.format(acc.item()))
    tot += acc

print('Average accuracy:', tot / nb_probes)

accs = torch.stack(accs)
print(accs.mean())
print(accs.std())

os.chdir(cwd)
shutil.rmtree(workdir, ignore_errors=True)
print('done: best epoch {}, best loss {:.4f}, mean probe accuracy {:.2f}%'.format(
    best_t, best.item(), accs.mean().item()))
