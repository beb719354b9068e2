"""Trains Xu et al.'s Graph Isomorphism Network (GIN, "How Powerful are Graph Neural Networks?") for whole-graph
classification: `load_data` turns graphs into `S2VGraph` objects (neighbour lists, `edge_mat` long tensors, one-hot
`node_features`), `separate_data` takes one of 10 stratified folds, and `GraphCNN` batches graphs by building a
block-diagonal sparse adjacency (or a padded neighbour list for max pooling) and a sparse graph-pooling matrix on the
host and moving them to `device`; trained with Adam and StepLR on random minibatches, evaluated with
`pass_data_iteratively`. Runs twice: default sum pooling, then max pooling, learnt epsilon and degree tags.

Modeled on: weihua916/powerful-gnns, main.py, models/graphcnn.py, models/mlp.py and util.py
(https://github.com/weihua916/powerful-gnns/tree/9a2ce8ac3e99278307093a464a95caf0fb04b602).

Kept: `device = torch.device("cuda:" + str(args.device)) if torch.cuda.is_available() else torch.device("cpu")`
and `torch.cuda.manual_seed_all(0)`; `GraphCNN(..., device).to(device)` storing the device, Adam + StepLR built after
the move, `scheduler.step()` at the start of each epoch; in `GraphCNN`: `X_concat = torch.cat([...]).to(self.device)`,
the block-diagonal `torch.sparse.FloatTensor(...)` and pooling matrix built from host tensors and returned with
`.to(self.device)`, the padded neighbour list returned as a host `torch.LongTensor` and used to index the device
tensor in `maxpool` (with `dummy.reshape((1, -1)).to(self.device)`), `torch.ones(...).to(self.device)` for the
average-pooling degree, `torch.spmm`, `nn.Parameter(torch.zeros(...))` epsilons; `MLP` with batch norms; `train`
with `torch.LongTensor([...]).to(device)` labels and `loss.detach().cpu().numpy()`; `pass_data_iteratively` with
`model.eval()` and `.detach()` (no `torch.no_grad()`); `test` reading `pred.eq(...).sum().cpu().item()`;
`edge_mat = torch.LongTensor(edges).transpose(0,1)` and one-hot `torch.zeros` features; `print(model.eps)`.

Changed to run here: MUTAG is replaced by 120 synthetic two-class graphs made in memory (ring plus chords, denser
in class 1, class-dependent node tags) instead of parsing the dataset file; networkx is replaced by a minimal
`Graph`, StratifiedKFold by a numpy stratified split, tqdm by `range`; `parse_args(argv)` without help strings;
`--filename` in a temporary folder; some one-line comments and blank lines inside functions dropped for length.
Shrunk: hidden 32 instead of 64; 10 iterations per epoch instead of 50; 6 and 3 epochs instead of 350.
"""
import argparse
import os
import shutil
import tempfile
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

class Graph(object):
    def __init__(self, n):
        self._adj = {j: set() for j in range(n)}
    def add_edge(self, u, v):
        self._adj[u].add(v)
        self._adj[v].add(u)
    def edges(self):
        return [(u, v) for u in sorted(self._adj) for v in sorted(self._adj[u]) if u < v]
    def degree(self):
        return [(n, len(self._adj[n])) for n in sorted(self._adj)]
    def __len__(self):
        return len(self._adj)

class S2VGraph(object):
    def __init__(self, g, label, node_tags=None, node_features=None):
        self.label = label
        self.g = g
        self.node_tags = node_tags
        self.neighbors = []
        self.node_features = 0
        self.edge_mat = 0
        self.max_neighbor = 0

def read_synthetic_graphs(n_graphs=120, seed=3):
    rng = np.random.RandomState(seed)
    g_list = []
    for i in range(n_graphs):
        label, n = i % 2, rng.randint(8, 17)
        g = Graph(n)
        for j in range(n):
            g.add_edge(j, (j + 1) % n)
        for _ in range(1 if label == 0 else n // 2):
            a, b = rng.choice(n, 2, replace=False)
            g.add_edge(a, b)
        tags = rng.choice(4, size=n, p=[0.5, 0.3, 0.2, 0.0] if label == 0 else [0.0, 0.2, 0.3, 0.5])
        g_list.append(S2VGraph(g, label, [int(t) for t in tags]))
    return g_list

def load_data(dataset, degree_as_tag):
    print('loading data')
    g_list = read_synthetic_graphs()
    label_dict = {l: i for i, l in enumerate(sorted(set(g.label for g in g_list)))}
    #add labels and edge_mat
    for g in g_list:
        g.neighbors = [[] for i in range(len(g.g))]
        for i, j in g.g.edges():
            g.neighbors[i].append(j)
            g.neighbors[j].append(i)
        degree_list = []
        for i in range(len(g.g)):
            g.neighbors[i] = g.neighbors[i]
            degree_list.append(len(g.neighbors[i]))
        g.max_neighbor = max(degree_list)
        g.label = label_dict[g.label]
        edges = [list(pair) for pair in g.g.edges()]
        edges.extend([[i, j] for j, i in edges])
        g.edge_mat = torch.LongTensor(edges).transpose(0,1)
    if degree_as_tag:
        for g in g_list:
            g.node_tags = list(dict(g.g.degree()).values())
    #Extracting unique tag labels
    tagset = set([])
    for g in g_list:
        tagset = tagset.union(set(g.node_tags))
    tagset = list(tagset)
    tag2index = {tagset[i]:i for i in range(len(tagset))}
    for g in g_list:
        g.node_features = torch.zeros(len(g.node_tags), len(tagset))
        g.node_features[range(len(g.node_tags)), [tag2index[tag] for tag in g.node_tags]] = 1
    print('# classes: %d' % len(label_dict))
    print('# maximum node tag: %d' % len(tagset))
    print("# data: %d" % len(g_list))
    return g_list, len(label_dict)

def separate_data(graph_list, seed, fold_idx):
    rng = np.random.RandomState(seed)
    labels = np.array([graph.label for graph in graph_list])
    fold_of = np.zeros(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        members = rng.permutation(np.where(labels == c)[0])
        fold_of[members] = np.arange(len(members)) % 10
    train_idx, test_idx = np.where(fold_of != fold_idx)[0], np.where(fold_of == fold_idx)[0]
    train_graph_list = [graph_list[i] for i in train_idx]
    test_graph_list = [graph_list[i] for i in test_idx]
    return train_graph_list, test_graph_list

###MLP with lienar output
class MLP(nn.Module):
    def __init__(self, num_layers, input_dim, hidden_dim, output_dim):
        super(MLP, self).__init__()
        self.linear_or_not = True #default is linear model
        self.num_layers = num_layers
        if num_layers == 1:
            self.linear = nn.Linear(input_dim, output_dim)
        else:
            self.linear_or_not = False
            self.linears = torch.nn.ModuleList()
            self.batch_norms = torch.nn.ModuleList()
            self.linears.append(nn.Linear(input_dim, hidden_dim))
            for layer in range(num_layers - 2):
                self.linears.append(nn.Linear(hidden_dim, hidden_dim))
            self.linears.append(nn.Linear(hidden_dim, output_dim))
            for layer in range(num_layers - 1):
                self.batch_norms.append(nn.BatchNorm1d((hidden_dim)))
    def forward(self, x):
        if self.linear_or_not:
            return self.linear(x)
        else:
            h = x
            for layer in range(self.num_layers - 1):
                h = F.relu(self.batch_norms[layer](self.linears[layer](h)))
            return self.linears[self.num_layers - 1](h)

class GraphCNN(nn.Module):
    def __init__(self, num_layers, num_mlp_layers, input_dim, hidden_dim, output_dim, final_dropout, learn_eps, graph_pooling_type, neighbor_pooling_type, device):
        super(GraphCNN, self).__init__()
        self.final_dropout = final_dropout
        self.device = device
        self.num_layers = num_layers
        self.graph_pooling_type = graph_pooling_type
        self.neighbor_pooling_type = neighbor_pooling_type
        self.learn_eps = learn_eps
        self.eps = nn.Parameter(torch.zeros(self.num_layers-1))
        ###List of MLPs
        self.mlps = torch.nn.ModuleList()
        ###List of batchnorms applied to the output of MLP (input of the final prediction linear layer)
        self.batch_norms = torch.nn.ModuleList()
        for layer in range(self.num_layers-1):
            if layer == 0:
                self.mlps.append(MLP(num_mlp_layers, input_dim, hidden_dim, hidden_dim))
            else:
                self.mlps.append(MLP(num_mlp_layers, hidden_dim, hidden_dim, hidden_dim))
            self.batch_norms.append(nn.BatchNorm1d(hidden_dim))
        #Linear function that maps the hidden representation at dofferemt layers into a prediction score
        self.linears_prediction = torch.nn.ModuleList()
        for layer in range(num_layers):
            if layer == 0:
                self.linears_prediction.append(nn.Linear(input_dim, output_dim))
            else:
                self.linears_prediction.append(nn.Linear(hidden_dim, output_dim))
    def __preprocess_neighbors_maxpool(self, batch_graph):
        ###create padded_neighbor_list in concatenated graph
        #compute the maximum number of neighbors within the graphs in the current minibatch
        max_deg = max([graph.max_neighbor for graph in batch_graph])
        padded_neighbor_list = []
        start_idx = [0]
        for i, graph in enumerate(batch_graph):
            start_idx.append(start_idx[i] + len(graph.g))
            padded_neighbors = []
            for j in range(len(graph.neighbors)):
                #add off-set values to the neighbor indices
                pad = [n + start_idx[i] for n in graph.neighbors[j]]
                #padding, dummy data is assumed to be stored in -1
                pad.extend([-1]*(max_deg - len(pad)))
                #Add center nodes in the maxpooling if learn_eps is False, i.e., aggregate center nodes and neighbor nodes altogether.
                if not self.learn_eps:
                    pad.append(j + start_idx[i])
                padded_neighbors.append(pad)
            padded_neighbor_list.extend(padded_neighbors)
        return torch.LongTensor(padded_neighbor_list)
    def __preprocess_neighbors_sumavepool(self, batch_graph):
        ###create block diagonal sparse matrix
        edge_mat_list = []
        start_idx = [0]
        for i, graph in enumerate(batch_graph):
            start_idx.append(start_idx[i] + len(graph.g))
            edge_mat_list.append(graph.edge_mat + start_idx[i])
        Adj_block_idx = torch.cat(edge_mat_list, 1)
        Adj_block_elem = torch.ones(Adj_block_idx.shape[1])
        #Add self-loops in the adjacency matrix if learn_eps is False, i.e., aggregate center nodes and neighbor nodes altogether.
        if not self.learn_eps:
            num_node = start_idx[-1]
            self_loop_edge = torch.LongTensor([range(num_node), range(num_node)])
            elem = torch.ones(num_node)
            Adj_block_idx = torch.cat([Adj_block_idx, self_loop_edge], 1)
            Adj_block_elem = torch.cat([Adj_block_elem, elem], 0)
        Adj_block = torch.sparse.FloatTensor(Adj_block_idx, Adj_block_elem, torch.Size([start_idx[-1],start_idx[-1]]))
        return Adj_block.to(self.device)
    def __preprocess_graphpool(self, batch_graph):
        ###create sum or average pooling sparse matrix over entire nodes in each graph (num graphs x num nodes)
        start_idx = [0]
        #compute the padded neighbor list
        for i, graph in enumerate(batch_graph):
            start_idx.append(start_idx[i] + len(graph.g))
        idx = []
        elem = []
        for i, graph in enumerate(batch_graph):
            ###average pooling
            if self.graph_pooling_type == "average":
                elem.extend([1./len(graph.g)]*len(graph.g))
            else:
            ###sum pooling
                elem.extend([1]*len(graph.g))
            idx.extend([[i, j] for j in range(start_idx[i], start_idx[i+1], 1)])
        elem = torch.FloatTensor(elem)
        idx = torch.LongTensor(idx).transpose(0,1)
        graph_pool = torch.sparse.FloatTensor(idx, elem, torch.Size([len(batch_graph), start_idx[-1]]))
        return graph_pool.to(self.device)
    def maxpool(self, h, padded_neighbor_list):
        ###Element-wise minimum will never affect max-pooling
        dummy = torch.min(h, dim = 0)[0]
        h_with_dummy = torch.cat([h, dummy.reshape((1, -1)).to(self.device)])
        pooled_rep = torch.max(h_with_dummy[padded_neighbor_list], dim = 1)[0]
        return pooled_rep
    def next_layer_eps(self, h, layer, padded_neighbor_list = None, Adj_block = None):
        ###pooling neighboring nodes and center nodes separately by epsilon reweighting.
        if self.neighbor_pooling_type == "max":
            pooled = self.maxpool(h, padded_neighbor_list)
        else:
            pooled = torch.spmm(Adj_block, h)
            if self.neighbor_pooling_type == "average":
                degree = torch.spmm(Adj_block, torch.ones((Adj_block.shape[0], 1)).to(self.device))
                pooled = pooled/degree
        #Reweights the center node representation when aggregating it with its neighbors
        pooled = pooled + (1 + self.eps[layer])*h
        pooled_rep = self.mlps[layer](pooled)
        h = self.batch_norms[layer](pooled_rep)
        h = F.relu(h)
        return h
    def next_layer(self, h, layer, padded_neighbor_list = None, Adj_block = None):
        ###pooling neighboring nodes and center nodes altogether
        if self.neighbor_pooling_type == "max":
            pooled = self.maxpool(h, padded_neighbor_list)
        else:
            pooled = torch.spmm(Adj_block, h)
            if self.neighbor_pooling_type == "average":
                degree = torch.spmm(Adj_block, torch.ones((Adj_block.shape[0], 1)).to(self.device))
                pooled = pooled/degree
        #representation of neighboring and center nodes
        pooled_rep = self.mlps[layer](pooled)
        h = self.batch_norms[layer](pooled_rep)
        h = F.relu(h)
        return h
    def forward(self, batch_graph):
        X_concat = torch.cat([graph.node_features for graph in batch_graph], 0).to(self.device)
        graph_pool = self.__preprocess_graphpool(batch_graph)
        if self.neighbor_pooling_type == "max":
            padded_neighbor_list = self.__preprocess_neighbors_maxpool(batch_graph)
        else:
            Adj_block = self.__preprocess_neighbors_sumavepool(batch_graph)
        #list of hidden representation at each layer (including input)
        hidden_rep = [X_concat]
        h = X_concat
        for layer in range(self.num_layers-1):
            if self.neighbor_pooling_type == "max" and self.learn_eps:
                h = self.next_layer_eps(h, layer, padded_neighbor_list = padded_neighbor_list)
            elif not self.neighbor_pooling_type == "max" and self.learn_eps:
                h = self.next_layer_eps(h, layer, Adj_block = Adj_block)
            elif self.neighbor_pooling_type == "max" and not self.learn_eps:
                h = self.next_layer(h, layer, padded_neighbor_list = padded_neighbor_list)
            elif not self.neighbor_pooling_type == "max" and not self.learn_eps:
                h = self.next_layer(h, layer, Adj_block = Adj_block)
            hidden_rep.append(h)
        score_over_layer = 0
        #perform pooling over all nodes in each graph in every layer
        for layer, h in enumerate(hidden_rep):
            pooled_h = torch.spmm(graph_pool, h)
            score_over_layer += F.dropout(self.linears_prediction[layer](pooled_h), self.final_dropout, training = self.training)
        return score_over_layer

criterion = nn.CrossEntropyLoss()

def train(args, model, device, train_graphs, optimizer, epoch):
    model.train()
    total_iters = args.iters_per_epoch
    pbar = range(total_iters)
    loss_accum = 0
    for pos in pbar:
        selected_idx = np.random.permutation(len(train_graphs))[:args.batch_size]
        batch_graph = [train_graphs[idx] for idx in selected_idx]
        output = model(batch_graph)
        labels = torch.LongTensor([graph.label for graph in batch_graph]).to(device)
        loss = criterion(output, labels)
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        loss = loss.detach().cpu().numpy()
        loss_accum += loss
    average_loss = loss_accum/total_iters
    print("epoch: %d loss training: %f" % (epoch, average_loss))
    return average_loss

###pass data to model with minibatch during testing to avoid memory overflow (does not perform backpropagation)
def pass_data_iteratively(model, graphs, minibatch_size = 64):
    model.eval()
    output = []
    idx = np.arange(len(graphs))
    for i in range(0, len(graphs), minibatch_size):
        sampled_idx = idx[i:i+minibatch_size]
        if len(sampled_idx) == 0:
            continue
        output.append(model([graphs[j] for j in sampled_idx]).detach())
    return torch.cat(output, 0)

def test(args, model, device, train_graphs, test_graphs, epoch):
    model.eval()
    output = pass_data_iteratively(model, train_graphs)
    pred = output.max(1, keepdim=True)[1]
    labels = torch.LongTensor([graph.label for graph in train_graphs]).to(device)
    correct = pred.eq(labels.view_as(pred)).sum().cpu().item()
    acc_train = correct / float(len(train_graphs))
    output = pass_data_iteratively(model, test_graphs)
    pred = output.max(1, keepdim=True)[1]
    labels = torch.LongTensor([graph.label for graph in test_graphs]).to(device)
    correct = pred.eq(labels.view_as(pred)).sum().cpu().item()
    acc_test = correct / float(len(test_graphs))
    print("accuracy train: %f test: %f" % (acc_train, acc_test))
    return acc_train, acc_test

def main(argv):
    parser = argparse.ArgumentParser(description='PyTorch graph convolutional neural net for whole-graph classification')
    parser.add_argument('--dataset', type=str, default="MUTAG")
    parser.add_argument('--device', type=int, default=0)
    parser.add_argument('--batch_size', type=int, default=32)
    parser.add_argument('--iters_per_epoch', type=int, default=10)
    parser.add_argument('--epochs', type=int, default=6)
    parser.add_argument('--lr', type=float, default=0.01)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--fold_idx', type=int, default=0)
    parser.add_argument('--num_layers', type=int, default=5)
    parser.add_argument('--num_mlp_layers', type=int, default=2)
    parser.add_argument('--hidden_dim', type=int, default=32)
    parser.add_argument('--final_dropout', type=float, default=0.5)
    parser.add_argument('--graph_pooling_type', type=str, default="sum", choices=["sum", "average"])
    parser.add_argument('--neighbor_pooling_type', type=str, default="sum", choices=["sum", "average", "max"])
    parser.add_argument('--learn_eps', action="store_true")
    parser.add_argument('--degree_as_tag', action="store_true")
    parser.add_argument('--filename', type = str, default = "")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    np.random.seed(0)
    device = torch.device("cuda:" + str(args.device)) if torch.cuda.is_available() else torch.device("cpu")
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(0)
    graphs, num_classes = load_data(args.dataset, args.degree_as_tag)
    train_graphs, test_graphs = separate_data(graphs, args.seed, args.fold_idx)
    model = GraphCNN(args.num_layers, args.num_mlp_layers, train_graphs[0].node_features.shape[1], args.hidden_dim, num_classes, args.final_dropout, args.learn_eps, args.graph_pooling_type, args.neighbor_pooling_type, device).to(device)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.5)
    for epoch in range(1, args.epochs + 1):
        scheduler.step()
        avg_loss = train(args, model, device, train_graphs, optimizer, epoch)
        acc_train, acc_test = test(args, model, device, train_graphs, test_graphs, epoch)
        if not args.filename == "":
            with open(args.filename, 'w') as f:
                f.write("%f %f %f" % (avg_loss, acc_train, acc_test) + "\n")
        print(model.eps)
    return avg_loss, acc_train, acc_test

if __name__ == '__main__':
    root = tempfile.mkdtemp()
    try:
        result_file = os.path.join(root, 'result.txt')
        loss, acc_train, acc_test = main(['--filename', result_file])
        with open(result_file) as f:
            print('result file:', f.read().strip())
        loss2, acc_train2, acc_test2 = main(['--neighbor_pooling_type', 'max', '--learn_eps',
                                             '--graph_pooling_type', 'average', '--degree_as_tag',
                                             '--epochs', '3'])
    finally:
        shutil.rmtree(root)
    print("done loss=%.4f acc_test=%.3f max_pool_loss=%.4f max_pool_acc_test=%.3f" % (loss, acc_test, loss2, acc_test2))
