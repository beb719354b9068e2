"""Trains the simple supervised GraphSAGE model (two stacked mean-aggregator encoders over sampled neighbourhoods and a
linear classifier) on a synthetic citation graph written in Cora's file format, then on one written in Pubmed's
format, the way williamleif/graphsage-simple's graphsage/model.py does it: `load_cora` / `load_pubmed` parse the
files, `run_cora` / `run_pubmed` build `MeanAggregator` -> `Encoder` -> `MeanAggregator` -> `Encoder` with a `cuda`
flag handed to every aggregator and encoder, train with SGD on shuffled 64-node minibatches and report the
validation micro-F1 and the mean batch time.

Modeled on: williamleif/graphsage-simple, graphsage/model.py, graphsage/encoders.py and graphsage/aggregators.py at
commit d3105e5223e9602ba3ef2dd27e343d044fe4bb5f
(https://github.com/williamleif/graphsage-simple/tree/d3105e5223e9602ba3ef2dd27e343d044fe4bb5f).

Kept: aggregators.py's `MeanAggregator` (the `cuda` flag stored as `self.cuda`, shadowing `nn.Module.cuda`; neighbour
sampling with `random.sample`; the row-normalised `mask` built on the host in a `Variable` and moved with
`mask.cuda()` when `self.cuda`; `self.features(torch.LongTensor(unique_nodes_list).cuda())` else the host index
tensor; `mask.mm(embed_matrix)`); encoders.py's `Encoder` (`self.cuda = cuda` and `self.aggregator.cuda = cuda`, which
overrides the `cuda=True` that `run_cora` gives the first aggregator; `torch.LongTensor(nodes).cuda()` for the self
features when not `gcn`; `F.relu(self.weight.mm(combined.t()))`); model.py's `SupervisedGraphSage` (`self.weight.mm(
embeds)`, `scores.t()`, `nn.CrossEntropyLoss` on `labels.squeeze()`), `load_cora` / `load_pubmed` (same parsing,
`defaultdict(set)` adjacency, `labels` an int64 column), `run_cora` / `run_pubmed` (`nn.Embedding` whose weight is a
frozen `nn.Parameter` of the features, the second encoder fed by `lambda nodes: enc1(nodes).t()` with
`base_model=enc1`, `enc1.num_samples = 5` as written (the encoders read `num_sample`), the seeded permutation into
test/val/train, SGD over `filter(lambda p: p.requires_grad, ...)` with lr 0.7, `train[:batch]` then
`random.shuffle(train)`, `Variable(torch.LongTensor(labels[np.array(batch_nodes)]))`, `f1_score(..., average="micro")`
on `val_output.data...numpy().argmax(axis=1)`, the batch times).

Changed to run here: the author's commented-out `# features.cuda()` and `# graphsage.cuda()` are made when
`torch.cuda.is_available()`, and that same `cuda` flag goes to the encoders (the repository hard-codes `cuda=False`),
so the label batch is moved with `.cuda()` and the validation scores come back with `.cpu()` before `.numpy()`;
Python 2 -> 3 (print, `map` into a numpy row through `list`), `random.sample` over `sorted(to_neigh)` (Python 3.11
refuses a set), `init.xavier_uniform_`, `loss.item()` for `loss.data[0]`, the unused `gcn` branch of
`MeanAggregator` uses `|` (a set has no `+`); the Cora and Pubmed files are not downloaded: `write_cora` /
`write_pubmed` draw a homophilous graph (nodes of a class share a bag-of-words profile and half of the citations stay
in the class) and write it in cora.content / cora.cites and Pubmed-Diabetes.NODE.paper.tab / DIRECTED.cites.tab format in a
temporary folder; `run_cora` and `run_pubmed` are both run from `__main__`.
Shrunk: Cora 2708 nodes x 1433 words x 7 classes -> 360 x 120 x 7, Pubmed 19717 x 500 x 3 -> 420 x 60 x 3; embed_dim
128 -> 32; test/val 1000/500 -> 80/60; 100 batches of 256 -> 25 of 64 (Cora), 200 of 1024 -> 12 of 64 (Pubmed).
"""

import os
import random
import tempfile
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.metrics import f1_score
from torch.autograd import Variable
from torch.nn import init

CORA_NODES, CORA_FEATS, CORA_CLASSES = 360, 120, 7
PUBMED_NODES, PUBMED_FEATS, PUBMED_CLASSES = 420, 60, 3
DATA_DIR = tempfile.mkdtemp(prefix="graphsage_")


# ---------------------------------------------------------------------------
# graphsage/aggregators.py
# ---------------------------------------------------------------------------
class MeanAggregator(nn.Module):
    """
    Aggregates a node's embeddings using mean of neighbors' embeddings
    """
    def __init__(self, features, cuda=False, gcn=False):
        """
        Initializes the aggregator for a specific graph.

        features -- function mapping LongTensor of node ids to FloatTensor of feature values.
        cuda -- whether to use GPU
        gcn --- whether to perform concatenation GraphSAGE-style, or add self-loops GCN-style
        """

        super(MeanAggregator, self).__init__()

        self.features = features
        self.cuda = cuda
        self.gcn = gcn

    def forward(self, nodes, to_neighs, num_sample=10):
        """
        nodes --- list of nodes in a batch
        to_neighs --- list of sets, each set is the set of neighbors for node in batch
        num_sample --- number of neighbors to sample. No sampling if None.
        """
        # Local pointers to functions (speed hack)
        _set = set
        if not num_sample is None:
            _sample = random.sample
            samp_neighs = [_set(_sample(sorted(to_neigh),
                            num_sample,
                            )) if len(to_neigh) >= num_sample else to_neigh for to_neigh in to_neighs]
        else:
            samp_neighs = to_neighs

        if self.gcn:
            samp_neighs = [samp_neigh | set([nodes[i]]) for i, samp_neigh in enumerate(samp_neighs)]
        unique_nodes_list = list(set.union(*samp_neighs))
        unique_nodes = {n: i for i, n in enumerate(unique_nodes_list)}
        mask = Variable(torch.zeros(len(samp_neighs), len(unique_nodes)))
        column_indices = [unique_nodes[n] for samp_neigh in samp_neighs for n in samp_neigh]
        row_indices = [i for i in range(len(samp_neighs)) for j in range(len(samp_neighs[i]))]
        mask[row_indices, column_indices] = 1
        if self.cuda:
            mask = mask.cuda()
        num_neigh = mask.sum(1, keepdim=True)
        mask = mask.div(num_neigh)
        if self.cuda:
            embed_matrix = self.features(torch.LongTensor(unique_nodes_list).cuda())
        else:
            embed_matrix = self.features(torch.LongTensor(unique_nodes_list))
        to_feats = mask.mm(embed_matrix)
        return to_feats


# ---------------------------------------------------------------------------
# graphsage/encoders.py
# ---------------------------------------------------------------------------
class Encoder(nn.Module):
    """
    Encodes a node's using 'convolutional' GraphSage approach
    """
    def __init__(self, features, feature_dim,
            embed_dim, adj_lists, aggregator,
            num_sample=10,
            base_model=None, gcn=False, cuda=False,
            feature_transform=False):
        super(Encoder, self).__init__()

        self.features = features
        self.feat_dim = feature_dim
        self.adj_lists = adj_lists
        self.aggregator = aggregator
        self.num_sample = num_sample
        if base_model != None:
            self.base_model = base_model

        self.gcn = gcn
        self.embed_dim = embed_dim
        self.cuda = cuda
        self.aggregator.cuda = cuda
        self.weight = nn.Parameter(
                torch.FloatTensor(embed_dim, self.feat_dim if self.gcn else 2 * self.feat_dim))
        init.xavier_uniform_(self.weight)

    def forward(self, nodes):
        """
        Generates embeddings for a batch of nodes.

        nodes     -- list of nodes
        """
        neigh_feats = self.aggregator.forward(nodes, [self.adj_lists[int(node)] for node in nodes],
                self.num_sample)
        if not self.gcn:
            if self.cuda:
                self_feats = self.features(torch.LongTensor(nodes).cuda())
            else:
                self_feats = self.features(torch.LongTensor(nodes))
            combined = torch.cat([self_feats, neigh_feats], dim=1)
        else:
            combined = neigh_feats
        combined = F.relu(self.weight.mm(combined.t()))
        return combined


# ---------------------------------------------------------------------------
# graphsage/model.py
# ---------------------------------------------------------------------------
class SupervisedGraphSage(nn.Module):

    def __init__(self, num_classes, enc):
        super(SupervisedGraphSage, self).__init__()
        self.enc = enc
        self.xent = nn.CrossEntropyLoss()

        self.weight = nn.Parameter(torch.FloatTensor(num_classes, enc.embed_dim))
        init.xavier_uniform_(self.weight)

    def forward(self, nodes):
        embeds = self.enc(nodes)
        scores = self.weight.mm(embeds)
        return scores.t()

    def loss(self, nodes, labels):
        scores = self.forward(nodes)
        return self.xent(scores, labels.squeeze())


# --- synthetic stand-ins for the downloaded cora/ and pubmed-data/ files (not in the repository) -------------------
def _draw_graph(rng, num_nodes, num_feats, num_classes, avg_degree, p_same):
    classes = rng.randint(num_classes, size=num_nodes)
    profiles = rng.rand(num_classes, num_feats) < 0.15
    feats = np.where(rng.rand(num_nodes, num_feats) < 0.2, profiles[classes], rng.rand(num_nodes, num_feats) < 0.12)
    feats[np.arange(num_nodes), rng.randint(num_feats, size=num_nodes)] = True  # no empty word list
    edges = set()
    by_class = [np.flatnonzero(classes == c) for c in range(num_classes)]
    for a in range(num_nodes):  # every paper cites at least one other (no empty neighbourhood)
        b = a
        while b == a:
            b = int(rng.choice(by_class[classes[a]]))
        edges.add((min(a, b), max(a, b)))
    while len(edges) < num_nodes * avg_degree // 2:
        a = rng.randint(num_nodes)
        pool = by_class[classes[a]] if rng.rand() < p_same else np.arange(num_nodes)
        b = int(rng.choice(pool))
        if a != b:
            edges.add((min(a, b), max(a, b)))
    return classes, feats.astype(np.float64), sorted(edges)


def write_cora(folder):
    rng = np.random.RandomState(7)
    classes, feats, edges = _draw_graph(rng, CORA_NODES, CORA_FEATS, CORA_CLASSES, 4, 0.5)
    names = ["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods",
             "Reinforcement_Learning", "Rule_Learning", "Theory"]
    paper_ids = [str(31336 + 17 * i) for i in range(CORA_NODES)]
    os.makedirs(os.path.join(folder, "cora"), exist_ok=True)
    with open(os.path.join(folder, "cora", "cora.content"), "w") as fp:
        for i in range(CORA_NODES):
            words = "\t".join(str(int(v)) for v in feats[i])
            fp.write("%s\t%s\t%s\n" % (paper_ids[i], words, names[classes[i]]))
    with open(os.path.join(folder, "cora", "cora.cites"), "w") as fp:
        for a, b in edges:
            fp.write("%s\t%s\n" % (paper_ids[a], paper_ids[b]))


def write_pubmed(folder):
    rng = np.random.RandomState(11)
    classes, feats, edges = _draw_graph(rng, PUBMED_NODES, PUBMED_FEATS, PUBMED_CLASSES, 5, 0.45)
    words = ["w%d" % j for j in range(PUBMED_FEATS)]
    paper_ids = [str(12187484 + 31 * i) for i in range(PUBMED_NODES)]
    os.makedirs(os.path.join(folder, "pubmed-data"), exist_ok=True)
    with open(os.path.join(folder, "pubmed-data", "Pubmed-Diabetes.NODE.paper.tab"), "w") as fp:
        fp.write("NODE\tpaper\n")
        fp.write("cat=1,2,3:label\t" + "\t".join("numeric:%s:0.0" % w for w in words) + "\tstring:summary\n")
        for i in range(PUBMED_NODES):
            tfidf = ["%s=%.3f" % (words[j], feats[i, j] * (0.5 + rng.rand())) for j in np.flatnonzero(feats[i])]
            fp.write("%s\tlabel=%d\t%s\tsummary=%s\n" % (paper_ids[i], classes[i] + 1, "\t".join(tfidf),
                                                        ",".join(words[:2])))
    with open(os.path.join(folder, "pubmed-data", "Pubmed-Diabetes.DIRECTED.cites.tab"), "w") as fp:
        fp.write("DIRECTED\tcites\n")
        fp.write("NO_FEATURES\n")
        for k, (a, b) in enumerate(edges):
            fp.write("%d\tpaper:%s\t|\tpaper:%s\n" % (k, paper_ids[a], paper_ids[b]))


def load_cora():
    num_nodes = CORA_NODES
    num_feats = CORA_FEATS
    feat_data = np.zeros((num_nodes, num_feats))
    labels = np.empty((num_nodes, 1), dtype=np.int64)
    node_map = {}
    label_map = {}
    with open("cora/cora.content") as fp:
        for i, line in enumerate(fp):
            info = line.strip().split()
            feat_data[i, :] = list(map(float, info[1:-1]))
            node_map[info[0]] = i
            if not info[-1] in label_map:
                label_map[info[-1]] = len(label_map)
            labels[i] = label_map[info[-1]]

    adj_lists = defaultdict(set)
    with open("cora/cora.cites") as fp:
        for i, line in enumerate(fp):
            info = line.strip().split()
            paper1 = node_map[info[0]]
            paper2 = node_map[info[1]]
            adj_lists[paper1].add(paper2)
            adj_lists[paper2].add(paper1)
    return feat_data, labels, adj_lists


def run_cora():
    np.random.seed(1)
    random.seed(1)
    num_nodes = CORA_NODES
    feat_data, labels, adj_lists = load_cora()
    features = nn.Embedding(CORA_NODES, CORA_FEATS)
    features.weight = nn.Parameter(torch.FloatTensor(feat_data), requires_grad=False)
    cuda = torch.cuda.is_available()
    if cuda:
        features.cuda()

    agg1 = MeanAggregator(features, cuda=True)
    enc1 = Encoder(features, CORA_FEATS, 32, adj_lists, agg1, gcn=True, cuda=cuda)
    agg2 = MeanAggregator(lambda nodes: enc1(nodes).t(), cuda=cuda)
    enc2 = Encoder(lambda nodes: enc1(nodes).t(), enc1.embed_dim, 32, adj_lists, agg2,
            base_model=enc1, gcn=True, cuda=cuda)
    enc1.num_samples = 5
    enc2.num_samples = 5

    graphsage = SupervisedGraphSage(CORA_CLASSES, enc2)
    if cuda:
        graphsage.cuda()
    rand_indices = np.random.permutation(num_nodes)
    test = rand_indices[:80]
    val = rand_indices[80:140]
    train = list(rand_indices[140:])

    optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, graphsage.parameters()), lr=0.7)
    times = []
    for batch in range(25):
        batch_nodes = train[:64]
        random.shuffle(train)
        start_time = time.time()
        optimizer.zero_grad()
        batch_labels = Variable(torch.LongTensor(labels[np.array(batch_nodes)]))
        if cuda:
            batch_labels = batch_labels.cuda()
        loss = graphsage.loss(batch_nodes, batch_labels)
        loss.backward()
        optimizer.step()
        end_time = time.time()
        times.append(end_time - start_time)
        print(batch, loss.item())

    val_output = graphsage.forward(val)
    print("Validation F1:", f1_score(labels[val], val_output.data.cpu().numpy().argmax(axis=1), average="micro"))
    print("Average batch time:", np.mean(times))


def load_pubmed():
    #hardcoded for simplicity...
    num_nodes = PUBMED_NODES
    num_feats = PUBMED_FEATS
    feat_data = np.zeros((num_nodes, num_feats))
    labels = np.empty((num_nodes, 1), dtype=np.int64)
    node_map = {}
    with open("pubmed-data/Pubmed-Diabetes.NODE.paper.tab") as fp:
        fp.readline()
        feat_map = {entry.split(":")[1]: i - 1 for i, entry in enumerate(fp.readline().split("\t"))}
        for i, line in enumerate(fp):
            info = line.split("\t")
            node_map[info[0]] = i
            labels[i] = int(info[1].split("=")[1]) - 1
            for word_info in info[2:-1]:
                word_info = word_info.split("=")
                feat_data[i][feat_map[word_info[0]]] = float(word_info[1])
    adj_lists = defaultdict(set)
    with open("pubmed-data/Pubmed-Diabetes.DIRECTED.cites.tab") as fp:
        fp.readline()
        fp.readline()
        for line in fp:
            info = line.strip().split("\t")
            paper1 = node_map[info[1].split(":")[1]]
            paper2 = node_map[info[-1].split(":")[1]]
            adj_lists[paper1].add(paper2)
            adj_lists[paper2].add(paper1)
    return feat_data, labels, adj_lists


def run_pubmed():
    np.random.seed(1)
    random.seed(1)
    num_nodes = PUBMED_NODES
    feat_data, labels, adj_lists = load_pubmed()
    features = nn.Embedding(PUBMED_NODES, PUBMED_FEATS)
    features.weight = nn.Parameter(torch.FloatTensor(feat_data), requires_grad=False)
    cuda = torch.cuda.is_available()
    if cuda:
        features.cuda()

    agg1 = MeanAggregator(features, cuda=True)
    enc1 = Encoder(features, PUBMED_FEATS, 32, adj_lists, agg1, gcn=True, cuda=cuda)
    agg2 = MeanAggregator(lambda nodes: enc1(nodes).t(), cuda=cuda)
    enc2 = Encoder(lambda nodes: enc1(nodes).t(), enc1.embed_dim, 32, adj_lists, agg2,
            base_model=enc1, gcn=True, cuda=cuda)
    enc1.num_samples = 10
    enc2.num_samples = 25

    graphsage = SupervisedGraphSage(PUBMED_CLASSES, enc2)
    if cuda:
        graphsage.cuda()
    rand_indices = np.random.permutation(num_nodes)
    test = rand_indices[:80]
    val = rand_indices[80:140]
    train = list(rand_indices[140:])

    optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, graphsage.parameters()), lr=0.7)
    times = []
    for batch in range(12):
        batch_nodes = train[:64]
        random.shuffle(train)
        start_time = time.time()
        optimizer.zero_grad()
        batch_labels = Variable(torch.LongTensor(labels[np.array(batch_nodes)]))
        if cuda:
            batch_labels = batch_labels.cuda()
        loss = graphsage.loss(batch_nodes, batch_labels)
        loss.backward()
        optimizer.step()
        end_time = time.time()
        times.append(end_time - start_time)
        print(batch, loss.item())

    val_output = graphsage.forward(val)
    print("Validation F1:", f1_score(labels[val], val_output.data.cpu().numpy().argmax(axis=1), average="micro"))
    print("Average batch time:", np.mean(times))


if __name__ == "__main__":
    write_cora(DATA_DIR)
    write_pubmed(DATA_DIR)
    cwd = os.getcwd()
    os.chdir(DATA_DIR)  # the loaders open "cora/..." and "pubmed-data/..." relative to the repository root
    try:
        run_cora()
        run_pubmed()
    finally:
        os.chdir(cwd)
    print("done")
