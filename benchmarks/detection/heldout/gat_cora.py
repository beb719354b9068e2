"""Two-layer graph attention network for node classification, on a synthetic citation graph in Cora's file format.

Modeled on: pytorch/examples, gat/main.py (https://github.com/pytorch/examples/blob/main/gat/main.py).
Kept: the device logic (``torch.accelerator.current_accelerator()`` when ``torch.accelerator.is_available()`` and
not switched off, else ``torch.device('cpu')``); ``load_cora(path, device)`` building everything on the host
(``torch.FloatTensor`` features scaled by a sparse diagonal ``torch.diag(...).to_sparse()``, ``torch.LongTensor``
labels, a ``torch.sparse_coo_tensor`` adjacency plus ``torch.eye(V)`` self-loops, dense) and returning
``features.to(device), labels.to(device), adj_mat.to(device)``; the node split from
``torch.randperm(len(labels)).to(device)``; ``GAT(...).to(device)`` with ``labels.max().item() + 1`` classes; the
layer's ``nn.Parameter(torch.empty(...))`` weights with Xavier init, the ``-9e16 * torch.ones_like(e)`` mask used in
``torch.where(adj_mat > 0, e, ...)``, ``F.dropout(..., training=self.training)``; ``train_iter`` (``model.train()``,
one full-batch Adam step, then ``test`` on the training and validation nodes) and ``test`` under ``model.eval()``
and ``torch.no_grad()`` returning ``loss.item(), acc.item()``; no checkpoint (the example saves none). Shrunk: a
random 150-node graph with class-dependent words and mostly same-class citations, written to ``cora.content`` and
``cora.cites`` in a temporary folder instead of downloading the Cora tarball, a 60/30/60 test/validation/training
split, hidden size 16 with 4 heads, 40 epochs, settings as constants instead of argparse, the per-epoch wall time
left out of the printed line (so the output repeats).
"""

import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import Adam

EPOCHS = 40
LR = 0.005
L2 = 5e-4
DROPOUT_P = 0.6
HIDDEN_DIM = 16
NUM_HEADS = 4
CONCAT_HEADS = False
VAL_EVERY = 10
NO_ACCEL = False
DRY_RUN = False
SEED = 13

NUM_PAPERS = 150
VOCAB = 48
TOPICS = ["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Reinforcement_Learning", "Theory"]


class GraphAttentionLayer(nn.Module):
    """Multi-head graph attention: e_ij = LeakyReLU(a^T [W h_i || W h_j]), softmax over the neighbours j of i."""

    def __init__(self, in_features, out_features, n_heads, concat=False, dropout=0.4, leaky_relu_slope=0.2):
        super().__init__()
        self.n_heads = n_heads
        self.concat = concat
        self.dropout = dropout
        if concat:
            self.out_features = out_features
            assert out_features % n_heads == 0
            self.n_hidden = out_features // n_heads
        else:
            self.n_hidden = out_features

        self.W = nn.Parameter(torch.empty(size=(in_features, self.n_hidden * n_heads)))
        self.a = nn.Parameter(torch.empty(size=(n_heads, 2 * self.n_hidden, 1)))
        self.leakyrelu = nn.LeakyReLU(leaky_relu_slope)
        self.softmax = nn.Softmax(dim=1)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_normal_(self.W)
        nn.init.xavier_normal_(self.a)

    def _get_attention_scores(self, h_transformed):
        """Scores of every (source, target) pair, shape (n_heads, n_nodes, n_nodes)."""
        source_scores = torch.matmul(h_transformed, self.a[:, : self.n_hidden, :])
        target_scores = torch.matmul(h_transformed, self.a[:, self.n_hidden :, :])
        e = source_scores + target_scores.mT  # (heads, n, 1) + (heads, 1, n)
        return self.leakyrelu(e)

    def forward(self, h, adj_mat):
        n_nodes = h.shape[0]
        h_transformed = torch.mm(h, self.W)
        h_transformed = F.dropout(h_transformed, self.dropout, training=self.training)
        # (n_heads, n_nodes, n_hidden)
        h_transformed = h_transformed.view(n_nodes, self.n_heads, self.n_hidden).permute(1, 0, 2)

        e = self._get_attention_scores(h_transformed)
        # no attention across missing edges
        connectivity_mask = -9e16 * torch.ones_like(e)
        e = torch.where(adj_mat > 0, e, connectivity_mask)

        attention = F.softmax(e, dim=-1)
        attention = F.dropout(attention, self.dropout, training=self.training)
        h_prime = torch.matmul(attention, h_transformed)

        if self.concat:
            h_prime = h_prime.permute(1, 0, 2).contiguous().view(n_nodes, self.out_features)
        else:
            h_prime = h_prime.mean(dim=0)
        return h_prime


class GAT(nn.Module):
    """A multi-head attention layer, ELU, then a single-head layer producing class log-probabilities."""

    def __init__(self, in_features, n_hidden, n_heads, num_classes, concat=False, dropout=0.4, leaky_relu_slope=0.2):
        super().__init__()
        self.gat1 = GraphAttentionLayer(
            in_features=in_features,
            out_features=n_hidden,
            n_heads=n_heads,
            concat=concat,
            dropout=dropout,
            leaky_relu_slope=leaky_relu_slope,
        )
        self.gat2 = GraphAttentionLayer(
            in_features=n_hidden,
            out_features=num_classes,
            n_heads=1,
            concat=False,
            dropout=dropout,
            leaky_relu_slope=leaky_relu_slope,
        )

    def forward(self, input_tensor, adj_mat):
        x = self.gat1(input_tensor, adj_mat)
        x = F.elu(x)
        x = self.gat2(x, adj_mat)
        return F.log_softmax(x, dim=1)


def make_fake_cora(folder, seed=1):
    """Write a small citation graph as ``cora.content`` (id, 0/1 words, topic) and ``cora.cites`` (cited, citing)."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    paper_ids = rng.permutation(np.arange(30000, 30000 + 7 * NUM_PAPERS, 7))[:NUM_PAPERS]
    topic_of = rng.integers(0, len(TOPICS), size=NUM_PAPERS)
    words_per_topic = VOCAB // len(TOPICS)
    rows = []
    for pid, topic in zip(paper_ids, topic_of, strict=True):
        prob = np.full(VOCAB, 0.04)
        prob[topic * words_per_topic : (topic + 1) * words_per_topic] = 0.35
        bag = (rng.random(VOCAB) < prob).astype(np.int32)
        rows.append(" ".join([str(pid), *(str(b) for b in bag), TOPICS[topic]]))
    with open(os.path.join(folder, "cora.content"), "w") as f:
        f.write("\n".join(rows) + "\n")
    links = set()
    for citing in range(NUM_PAPERS):
        for _ in range(2):
            if rng.random() < 0.85:
                cited = int(rng.choice(np.flatnonzero(topic_of == topic_of[citing])))
            else:
                cited = int(rng.integers(0, NUM_PAPERS))
            if cited != citing:
                links.add((int(paper_ids[cited]), int(paper_ids[citing])))
    with open(os.path.join(folder, "cora.cites"), "w") as f:
        f.write("\n".join(f"{a} {b}" for a, b in sorted(links)) + "\n")


def load_cora(path="./cora", device="cpu"):
    """Row-normalised features, labels and the adjacency with self-loops, built on the host and moved."""
    content_path = os.path.join(path, "cora.content")
    cites_path = os.path.join(path, "cora.cites")
    content_tensor = np.genfromtxt(content_path, dtype=np.dtype(str))
    cites_tensor = np.genfromtxt(cites_path, dtype=np.int32)

    features = torch.FloatTensor(content_tensor[:, 1:-1].astype(np.int32))
    scale_vector = torch.sum(features, dim=1)
    scale_vector = 1 / scale_vector
    scale_vector[scale_vector == float("inf")] = 0  # papers without any word
    scale_vector = torch.diag(scale_vector).to_sparse()
    features = scale_vector @ features

    _classes, labels = np.unique(content_tensor[:, -1], return_inverse=True)
    labels = torch.LongTensor(labels)

    idx = content_tensor[:, 0].astype(np.int32)
    idx_map = {paper: row for row, paper in enumerate(idx)}
    edges = np.array([[idx_map[e[0]], idx_map[e[1]]] for e in cites_tensor], dtype=np.int32)

    V = len(idx)
    E = edges.shape[0]
    adj_mat = torch.sparse_coo_tensor(edges.T, torch.ones(E), (V, V), dtype=torch.int64)
    adj_mat = torch.eye(V) + adj_mat

    return features.to(device), labels.to(device), adj_mat.to(device)


def train_iter(epoch, model, optimizer, criterion, input, target, mask_train, mask_val, print_every=10):
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
            f"Epoch: {epoch:04d} loss_train: {loss_train:.4f} acc_train: {acc_train:.4f} "
            f"loss_val: {loss_val:.4f} acc_val: {acc_val:.4f}"
        )


def test(model, criterion, input, target, mask):
    model.eval()
    with torch.no_grad():
        output = model(*input)
        output, target = output[mask], target[mask]
        loss = criterion(output, target)
        acc = (output.argmax(dim=1) == target).float().sum() / len(target)
    return loss.item(), acc.item()


if __name__ == "__main__":
    torch.manual_seed(SEED)

    use_accel = not NO_ACCEL and torch.accelerator.is_available()
    if use_accel:  # noqa: SIM108 (the example's if/else)
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    print(f"Using {device.type} device")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cora")
        print("Writing dataset...")
        make_fake_cora(path)
        print("Loading dataset...")
        features, labels, adj_mat = load_cora(path, device=device)

    idx = torch.randperm(len(labels)).to(device)
    idx_test, idx_val, idx_train = idx[:60], idx[60:90], idx[90:]

    gat_net = GAT(
        in_features=features.shape[1],
        n_hidden=HIDDEN_DIM,
        n_heads=NUM_HEADS,
        num_classes=labels.max().item() + 1,
        concat=CONCAT_HEADS,
        dropout=DROPOUT_P,
        leaky_relu_slope=0.2,
    ).to(device)

    optimizer = Adam(gat_net.parameters(), lr=LR, weight_decay=L2)
    criterion = nn.NLLLoss()

    for epoch in range(EPOCHS):
        train_iter(epoch + 1, gat_net, optimizer, criterion, (features, adj_mat), labels, idx_train, idx_val, VAL_EVERY)
        if DRY_RUN:
            break
    loss_test, acc_test = test(gat_net, criterion, (features, adj_mat), labels, idx_test)
    print(f"Test set results: loss {loss_test:.4f} accuracy {acc_test:.4f}")
    print(f"done test_loss={loss_test:.4f} test_accuracy={acc_test:.4f}")
