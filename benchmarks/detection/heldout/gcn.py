"""Two-layer graph convolutional network for node classification, on a synthetic citation graph in Cora's format.

Modeled on: pytorch/examples, gcn/main.py (https://github.com/pytorch/examples/blob/main/gcn/main.py).
Kept: the device logic (``torch.accelerator.current_accelerator()`` unless switched off or absent, ``load_cora`` built
on the host with ``torch.FloatTensor``/``torch.LongTensor``/``torch.sparse_coo_tensor``/``torch.eye`` and returning
``features.to_sparse().to(device)``, ``labels.to(device)`` and ``adj_mat.to_sparse().to(device)``, the node split
from ``torch.randperm(...).to(device)``, the model built with ``GCN(...).to(device)`` with ``labels.max().item()``
classes, its ``nn.Parameter(torch.Tensor(...))`` weights, ``torch.mm``/``torch.spmm`` on the sparse inputs,
``train_iter`` and ``test`` taking the device tensors as arguments, ``test`` under ``model.eval()`` and
``torch.no_grad()`` reading the loss and accuracy back with ``.item()``). Shrunk: a random 140-node graph with
class-dependent words and mostly same-class citations, written to ``cora.content``/``cora.cites`` in a temporary
folder instead of downloading Cora, a 60/30/50 test/validation/training split, 40 epochs, the settings constants
instead of an argument parser.
"""

import os
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import Adam

EPOCHS = 40
LR = 0.01
L2 = 5e-4
DROPOUT_P = 0.5
HIDDEN_DIM = 16
VAL_EVERY = 10
INCLUDE_BIAS = False
NO_ACCEL = False
DRY_RUN = False
SEED = 42

NUM_NODES = 140
NUM_WORDS = 60
CLASSES = ["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods", "Theory"]


class GraphConv(nn.Module):
    """One graph convolution ``H' = A_hat @ (H @ W) (+ b)`` with a normalised sparse adjacency ``A_hat``."""

    def __init__(self, input_dim, output_dim, use_bias=False):
        super().__init__()
        self.kernel = nn.Parameter(torch.Tensor(input_dim, output_dim))
        nn.init.xavier_normal_(self.kernel)

        self.bias = None
        if use_bias:
            self.bias = nn.Parameter(torch.Tensor(output_dim))
            nn.init.zeros_(self.bias)

    def forward(self, input_tensor, adj_mat):
        """Mix each node's transformed features with its neighbours'."""
        support = torch.mm(input_tensor, self.kernel)
        output = torch.spmm(adj_mat, support)
        if self.bias is not None:
            output = output + self.bias
        return output


class GCN(nn.Module):
    """Two graph convolutions with ReLU and dropout between them, log-softmax over the classes."""

    def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.1):
        super().__init__()
        self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
        self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input_tensor, adj_mat):
        """Return per-node log-probabilities of the classes."""
        x = self.gc1(input_tensor, adj_mat)
        x = F.relu(x)
        x = self.dropout(x)
        x = self.gc2(x, adj_mat)
        return F.log_softmax(x, dim=1)


def write_synthetic_cora(path, seed=0):
    """Write ``cora.content`` (id, binary word vector, class) and ``cora.cites`` (cited, citing) for a random graph.

    Each class prefers its own block of words, and 4 in 5 citations stay inside a class, so the graph carries the
    labels the way Cora does.
    """
    rng = np.random.default_rng(seed)
    os.makedirs(path, exist_ok=True)
    ids = rng.choice(np.arange(1000, 100000), size=NUM_NODES, replace=False)
    labels = rng.integers(0, len(CLASSES), size=NUM_NODES)
    block = NUM_WORDS // len(CLASSES)
    with open(os.path.join(path, "cora.content"), "w") as f:
        for paper, label in zip(ids, labels, strict=True):
            p = np.full(NUM_WORDS, 0.03)
            p[label * block : (label + 1) * block] = 0.3
            words = (rng.random(NUM_WORDS) < p).astype(int)
            words[rng.integers(0, NUM_WORDS)] = 1  # no paper without a word
            f.write("\t".join([str(paper), *map(str, words), CLASSES[label]]) + "\n")
    with open(os.path.join(path, "cora.cites"), "w") as f:
        for citing in range(NUM_NODES):
            for _ in range(3):
                if rng.random() < 0.8:
                    same = np.flatnonzero(labels == labels[citing])
                    cited = rng.choice(same)
                else:
                    cited = rng.integers(0, NUM_NODES)
                if cited != citing:
                    f.write(f"{ids[cited]}\t{ids[citing]}\n")


def load_cora(path="./cora", device="cpu"):
    """Features, labels and the renormalised adjacency ``D^-1/2 (A + I) D^-1/2``, built on the host, then moved."""
    content_path = os.path.join(path, "cora.content")
    cites_path = os.path.join(path, "cora.cites")

    content_tensor = np.genfromtxt(content_path, dtype=np.dtype(str))
    cites_tensor = np.genfromtxt(cites_path, dtype=np.int32)

    # row-normalised bag-of-words features
    features = torch.FloatTensor(content_tensor[:, 1:-1].astype(np.int32))
    scale_vector = torch.sum(features, dim=1)
    scale_vector = 1 / scale_vector
    scale_vector[scale_vector == float("inf")] = 0
    scale_vector = torch.diag(scale_vector).to_sparse()
    features = scale_vector @ features

    _classes, labels = np.unique(content_tensor[:, -1], return_inverse=True)
    labels = torch.LongTensor(labels)

    # paper ids -> rows
    idx = content_tensor[:, 0].astype(np.int32)
    idx_map = {paper: pos for pos, paper in enumerate(idx)}
    edges = np.array([[idx_map[cited], idx_map[citing]] for cited, citing in cites_tensor], dtype=np.int32)

    V = len(idx)
    E = edges.shape[0]
    adj_mat = torch.sparse_coo_tensor(edges.T, torch.ones(E), (V, V), dtype=torch.int64)
    adj_mat = torch.eye(V) + adj_mat  # self-loops

    degree_mat = torch.sum(adj_mat, dim=1)
    degree_mat = torch.sqrt(1 / degree_mat)
    degree_mat[degree_mat == float("inf")] = 0
    degree_mat = torch.diag(degree_mat).to_sparse()

    adj_mat = degree_mat @ adj_mat @ degree_mat

    return features.to_sparse().to(device), labels.to(device), adj_mat.to_sparse().to(device)


def train_iter(epoch, model, optimizer, criterion, input, target, mask_train, mask_val, print_every=10):
    """One full-batch step on the training nodes; every ``print_every`` epochs, the train and validation scores."""
    start_t = time.time()
    model.train()
    optimizer.zero_grad()

    output = model(*input)
    loss = criterion(output[mask_train], target[mask_train])

    loss.backward()
    optimizer.step()

    loss_train, acc_train = test(model, criterion, input, target, mask_train)
    loss_val, acc_val = test(model, criterion, input, target, mask_val)

    if epoch % print_every == 0:
        print(
            f"Epoch: {epoch:04d} ({(time.time() - start_t):.4f}s) loss_train: {loss_train:.4f} "
            f"acc_train: {acc_train:.4f} loss_val: {loss_val:.4f} acc_val: {acc_val:.4f}"
        )


def test(model, criterion, input, target, mask):
    """Loss and accuracy on the nodes of ``mask``."""
    model.eval()
    with torch.no_grad():
        output = model(*input)
        output, target = output[mask], target[mask]

        loss = criterion(output, target)
        acc = (output.argmax(dim=1) == target).float().sum() / len(target)
    return loss.item(), acc.item()


if __name__ == "__main__":
    use_accel = not NO_ACCEL and torch.accelerator.is_available()

    torch.manual_seed(SEED)

    if use_accel:  # noqa: SIM108 (the example's if/else)
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    print(f"Using {device} device")

    with tempfile.TemporaryDirectory() as data_dir:
        print("Writing dataset...")
        write_synthetic_cora(os.path.join(data_dir, "cora"))

        print("Loading dataset...")
        features, labels, adj_mat = load_cora(os.path.join(data_dir, "cora"), device=device)
    idx = torch.randperm(len(labels)).to(device)
    idx_test, idx_val, idx_train = idx[:60], idx[60:90], idx[90:]

    gcn = GCN(features.shape[1], HIDDEN_DIM, labels.max().item() + 1, INCLUDE_BIAS, DROPOUT_P).to(device)
    optimizer = Adam(gcn.parameters(), lr=LR, weight_decay=L2)
    criterion = nn.NLLLoss()

    for epoch in range(EPOCHS):
        train_iter(epoch + 1, gcn, optimizer, criterion, (features, adj_mat), labels, idx_train, idx_val, VAL_EVERY)
        if DRY_RUN:
            break

    loss_test, acc_test = test(gcn, criterion, (features, adj_mat), labels, idx_test)
    print(f"Test set results: loss {loss_test:.4f} accuracy {acc_test:.4f}")
    print(f"done loss={loss_test:.4f} accuracy={acc_test:.4f}")
