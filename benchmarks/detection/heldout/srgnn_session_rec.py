"""Trains SR-GNN (session-based recommendation with a gated graph neural network) on synthetic click sessions the way
CRIPAC-DIG/SR-GNN's pytorch_code does it: every session prefix becomes a small directed item graph (normalised
in/out adjacency `A`, its unique `items`, and `alias_inputs` mapping the clicks to graph nodes), a GGNN cell
propagates over the graph, a soft-attention readout over the last click and the whole session gives a session
embedding, and the scores are its dot products with every item embedding; the next click is the target. Each epoch
trains with Adam and a StepLR decay (both owned by the model), then scores Recall@20 and MRR@20 on the test
sessions, with early stopping on both.

Modeled on: CRIPAC-DIG/SR-GNN, pytorch_code/main.py, pytorch_code/model.py, pytorch_code/utils.py and
datasets/preprocess.py (`obtian_tra`, `obtian_tes`, `process_seqs`) at commit
e21cfa431f74c25ae6e4ae9261deefe11d1cb488
(https://github.com/CRIPAC-DIG/SR-GNN/blob/e21cfa431f74c25ae6e4ae9261deefe11d1cb488/pytorch_code/model.py and the
other files at the same commit).

Kept: main.py's argparse options and defaults (`--dataset sample` -> `n_node = 310`, `--validation` with
`split_validation`, `--patience`, `--nonhybrid`, `--step`, `--lr_dc_step`), `main()` (the pickled `(seqs, labels)`
train/test tuples wrapped in `Data`, `model = trans_to_cuda(SessionGraph(opt, n_node))`, the best-result/best-epoch
bookkeeping and `bad_counter`); model.py as written: `GNN` with its hand-made `Parameter(torch.Tensor(...))` gate
weights and `GNNCell`, `SessionGraph` that builds its own `loss_function`, Adam `optimizer` and StepLR `scheduler`,
`reset_parameters`, `compute_scores` (the last-click gather `hidden[torch.arange(mask.shape[0]).long(),
torch.sum(mask, 1) - 1]`, the attention readout, `self.embedding.weight[1:]` as the item table), `trans_to_cuda`
and `trans_to_cpu` (moving only when `torch.cuda.is_available()`), the module-level `forward` (numpy slices turned
into tensors with `torch.Tensor(...).long()` / `.float()` and moved with `trans_to_cuda`, the per-session
`hidden[i][alias_inputs[i]]` lambda stacked over `torch.arange(len(alias_inputs)).long()`), and `train_test` (the
`model.scheduler.step()` at the start of the epoch, `model.train()`, `targets - 1` against the scores,
`total_loss += loss`, `model.eval()` then the test pass without `torch.no_grad()` as written, `scores.topk(20)[1]`
brought back with `trans_to_cpu(...).detach().numpy()`, hit/MRR with `np.isin` / `np.where`); utils.py's
`data_masks`, `split_validation` and `Data` (`generate_batch` shuffling, `get_slice` building `A`, `items`,
`alias_inputs`); preprocess.py's item renumbering from 1 and `process_seqs` prefix augmentation.

Changed to run here: the diginetica / yoochoose click logs are not downloaded: `make_sample_dataset` draws sessions
from a random sparse item-transition chain, renumbers them with `obtian_tra` / `obtian_tes` and augments them with
`process_seqs`, and pickles `train.txt` / `test.txt` into a temporary `datasets/sample` folder that `main()` reads
(instead of `../datasets/`); `build_graph` (networkx, only used by commented-out code) is left out; the per-batch
print uses `int(len(slices) / 3 + 1)`; `main()` seeds numpy (the original seeds nothing), so the batches and the
final line repeat; a final `done` line is printed.
Shrunk: 200 training and 50 test sessions of 3-8 clicks over 309 items (about 900 training prefixes) instead of
the real logs; batch size 100 (as the default) but hidden size 100 -> 32; 3 epochs instead of 30.
"""

import argparse
import datetime
import math
import os
import pickle
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import Module, Parameter

parser = argparse.ArgumentParser()
parser.add_argument('--dataset', default='sample', help='dataset name: diginetica/yoochoose1_4/yoochoose1_64/sample')
parser.add_argument('--batchSize', type=int, default=100, help='input batch size')
parser.add_argument('--hiddenSize', type=int, default=32, help='hidden state size')
parser.add_argument('--epoch', type=int, default=3, help='the number of epochs to train for')
parser.add_argument('--lr', type=float, default=0.001, help='learning rate')  # [0.001, 0.0005, 0.0001]
parser.add_argument('--lr_dc', type=float, default=0.1, help='learning rate decay rate')
parser.add_argument('--lr_dc_step', type=int, default=3, help='the number of steps after which the learning rate decay')
parser.add_argument('--l2', type=float, default=1e-5, help='l2 penalty')  # [0.001, 0.0005, 0.0001, 0.00005, 0.00001]
parser.add_argument('--step', type=int, default=1, help='gnn propogation steps')
parser.add_argument('--patience', type=int, default=10, help='the number of epoch to wait before early stop ')
parser.add_argument('--nonhybrid', action='store_true', help='only use the global preference to predict')
parser.add_argument('--validation', action='store_true', help='validation')
parser.add_argument('--valid_portion', type=float, default=0.1, help='split the portion of training set as validation set')
opt = parser.parse_args()
print(opt)

DATA_ROOT = tempfile.mkdtemp(prefix='srgnn_')


# ----------------------------------------------------------------------------- datasets/preprocess.py (synthetic)

def make_sample_dataset(root, n_items=309, n_train=200, n_test=50, seed=7):
    """Sessions from a sparse item-transition chain, renumbered and augmented as preprocess.py does."""
    rng = np.random.RandomState(seed)
    raw_items = rng.permutation(10000)[:n_items] + 214000000  # raw item ids, as in the click logs
    successors = [rng.choice(n_items, size=3, replace=False) for _ in range(n_items)]

    def draw_session():
        length = rng.randint(3, 9)
        seq = [rng.randint(n_items)]
        for _ in range(length - 1):
            nxt = successors[seq[-1]][rng.randint(3)] if rng.rand() < 0.85 else rng.randint(n_items)
            seq.append(nxt)
        return [int(raw_items[i]) for i in seq]

    sess_clicks = {s: draw_session() for s in range(n_train + n_test)}
    dates = [(s, 1460000000.0 + 600.0 * s) for s in sess_clicks]
    splitdate = dates[n_train - 1][1]
    tra_sess = [d for d in dates if d[1] <= splitdate]
    tes_sess = [d for d in dates if d[1] > splitdate]

    item_dict = {}

    def obtian_tra():
        train_ids, train_seqs, train_dates = [], [], []
        item_ctr = 1
        for s, date in tra_sess:
            seq = sess_clicks[s]
            outseq = []
            for i in seq:
                if i in item_dict:
                    outseq += [item_dict[i]]
                else:
                    outseq += [item_ctr]
                    item_dict[i] = item_ctr
                    item_ctr += 1
            if len(outseq) < 2:  # Doesn't occur
                continue
            train_ids += [s]
            train_dates += [date]
            train_seqs += [outseq]
        print(item_ctr)
        return train_ids, train_dates, train_seqs

    def obtian_tes():
        test_ids, test_seqs, test_dates = [], [], []
        for s, date in tes_sess:
            seq = sess_clicks[s]
            outseq = []
            for i in seq:
                if i in item_dict:
                    outseq += [item_dict[i]]
            if len(outseq) < 2:
                continue
            test_ids += [s]
            test_dates += [date]
            test_seqs += [outseq]
        return test_ids, test_dates, test_seqs

    def process_seqs(iseqs, idates):
        out_seqs, out_dates, labs, ids = [], [], [], []
        for id, seq, date in zip(range(len(iseqs)), iseqs, idates):
            for i in range(1, len(seq)):
                tar = seq[-i]
                labs += [tar]
                out_seqs += [seq[:-i]]
                out_dates += [date]
                ids += [id]
        return out_seqs, out_dates, labs, ids

    tra_ids, tra_dates, tra_seqs = obtian_tra()
    tes_ids, tes_dates, tes_seqs = obtian_tes()
    tr_seqs, tr_dates, tr_labs, tr_ids = process_seqs(tra_seqs, tra_dates)
    te_seqs, te_dates, te_labs, te_ids = process_seqs(tes_seqs, tes_dates)
    print(len(tr_seqs))
    print(len(te_seqs))
    folder = os.path.join(root, 'sample')
    os.makedirs(folder, exist_ok=True)
    pickle.dump((tr_seqs, tr_labs), open(os.path.join(folder, 'train.txt'), 'wb'))
    pickle.dump((te_seqs, te_labs), open(os.path.join(folder, 'test.txt'), 'wb'))
    pickle.dump(tra_seqs, open(os.path.join(folder, 'all_train_seq.txt'), 'wb'))


# ----------------------------------------------------------------------------- utils.py

def data_masks(all_usr_pois, item_tail):
    us_lens = [len(upois) for upois in all_usr_pois]
    len_max = max(us_lens)
    us_pois = [upois + item_tail * (len_max - le) for upois, le in zip(all_usr_pois, us_lens)]
    us_msks = [[1] * le + [0] * (len_max - le) for le in us_lens]
    return us_pois, us_msks, len_max


def split_validation(train_set, valid_portion):
    train_set_x, train_set_y = train_set
    n_samples = len(train_set_x)
    sidx = np.arange(n_samples, dtype='int32')
    np.random.shuffle(sidx)
    n_train = int(np.round(n_samples * (1. - valid_portion)))
    valid_set_x = [train_set_x[s] for s in sidx[n_train:]]
    valid_set_y = [train_set_y[s] for s in sidx[n_train:]]
    train_set_x = [train_set_x[s] for s in sidx[:n_train]]
    train_set_y = [train_set_y[s] for s in sidx[:n_train]]

    return (train_set_x, train_set_y), (valid_set_x, valid_set_y)


class Data():
    def __init__(self, data, shuffle=False, graph=None):
        inputs = data[0]
        inputs, mask, len_max = data_masks(inputs, [0])
        self.inputs = np.asarray(inputs)
        self.mask = np.asarray(mask)
        self.len_max = len_max
        self.targets = np.asarray(data[1])
        self.length = len(inputs)
        self.shuffle = shuffle
        self.graph = graph

    def generate_batch(self, batch_size):
        if self.shuffle:
            shuffled_arg = np.arange(self.length)
            np.random.shuffle(shuffled_arg)
            self.inputs = self.inputs[shuffled_arg]
            self.mask = self.mask[shuffled_arg]
            self.targets = self.targets[shuffled_arg]
        n_batch = int(self.length / batch_size)
        if self.length % batch_size != 0:
            n_batch += 1
        slices = np.split(np.arange(n_batch * batch_size), n_batch)
        slices[-1] = slices[-1][:(self.length - batch_size * (n_batch - 1))]
        return slices

    def get_slice(self, i):
        inputs, mask, targets = self.inputs[i], self.mask[i], self.targets[i]
        items, n_node, A, alias_inputs = [], [], [], []
        for u_input in inputs:
            n_node.append(len(np.unique(u_input)))
        max_n_node = np.max(n_node)
        for u_input in inputs:
            node = np.unique(u_input)
            items.append(node.tolist() + (max_n_node - len(node)) * [0])
            u_A = np.zeros((max_n_node, max_n_node))
            for i in np.arange(len(u_input) - 1):
                if u_input[i + 1] == 0:
                    break
                u = np.where(node == u_input[i])[0][0]
                v = np.where(node == u_input[i + 1])[0][0]
                u_A[u][v] = 1
            u_sum_in = np.sum(u_A, 0)
            u_sum_in[np.where(u_sum_in == 0)] = 1
            u_A_in = np.divide(u_A, u_sum_in)
            u_sum_out = np.sum(u_A, 1)
            u_sum_out[np.where(u_sum_out == 0)] = 1
            u_A_out = np.divide(u_A.transpose(), u_sum_out)
            u_A = np.concatenate([u_A_in, u_A_out]).transpose()
            A.append(u_A)
            alias_inputs.append([np.where(node == i)[0][0] for i in u_input])
        return alias_inputs, A, items, mask, targets


# ----------------------------------------------------------------------------- model.py

class GNN(Module):
    def __init__(self, hidden_size, step=1):
        super(GNN, self).__init__()
        self.step = step
        self.hidden_size = hidden_size
        self.input_size = hidden_size * 2
        self.gate_size = 3 * hidden_size
        self.w_ih = Parameter(torch.Tensor(self.gate_size, self.input_size))
        self.w_hh = Parameter(torch.Tensor(self.gate_size, self.hidden_size))
        self.b_ih = Parameter(torch.Tensor(self.gate_size))
        self.b_hh = Parameter(torch.Tensor(self.gate_size))
        self.b_iah = Parameter(torch.Tensor(self.hidden_size))
        self.b_oah = Parameter(torch.Tensor(self.hidden_size))

        self.linear_edge_in = nn.Linear(self.hidden_size, self.hidden_size, bias=True)
        self.linear_edge_out = nn.Linear(self.hidden_size, self.hidden_size, bias=True)
        self.linear_edge_f = nn.Linear(self.hidden_size, self.hidden_size, bias=True)

    def GNNCell(self, A, hidden):
        input_in = torch.matmul(A[:, :, :A.shape[1]], self.linear_edge_in(hidden)) + self.b_iah
        input_out = torch.matmul(A[:, :, A.shape[1]: 2 * A.shape[1]], self.linear_edge_out(hidden)) + self.b_oah
        inputs = torch.cat([input_in, input_out], 2)
        gi = F.linear(inputs, self.w_ih, self.b_ih)
        gh = F.linear(hidden, self.w_hh, self.b_hh)
        i_r, i_i, i_n = gi.chunk(3, 2)
        h_r, h_i, h_n = gh.chunk(3, 2)
        resetgate = torch.sigmoid(i_r + h_r)
        inputgate = torch.sigmoid(i_i + h_i)
        newgate = torch.tanh(i_n + resetgate * h_n)
        hy = newgate + inputgate * (hidden - newgate)
        return hy

    def forward(self, A, hidden):
        for i in range(self.step):
            hidden = self.GNNCell(A, hidden)
        return hidden


class SessionGraph(Module):
    def __init__(self, opt, n_node):
        super(SessionGraph, self).__init__()
        self.hidden_size = opt.hiddenSize
        self.n_node = n_node
        self.batch_size = opt.batchSize
        self.nonhybrid = opt.nonhybrid
        self.embedding = nn.Embedding(self.n_node, self.hidden_size)
        self.gnn = GNN(self.hidden_size, step=opt.step)
        self.linear_one = nn.Linear(self.hidden_size, self.hidden_size, bias=True)
        self.linear_two = nn.Linear(self.hidden_size, self.hidden_size, bias=True)
        self.linear_three = nn.Linear(self.hidden_size, 1, bias=False)
        self.linear_transform = nn.Linear(self.hidden_size * 2, self.hidden_size, bias=True)
        self.loss_function = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.parameters(), lr=opt.lr, weight_decay=opt.l2)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=opt.lr_dc_step, gamma=opt.lr_dc)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            weight.data.uniform_(-stdv, stdv)

    def compute_scores(self, hidden, mask):
        ht = hidden[torch.arange(mask.shape[0]).long(), torch.sum(mask, 1) - 1]  # batch_size x latent_size
        q1 = self.linear_one(ht).view(ht.shape[0], 1, ht.shape[1])  # batch_size x 1 x latent_size
        q2 = self.linear_two(hidden)  # batch_size x seq_length x latent_size
        alpha = self.linear_three(torch.sigmoid(q1 + q2))
        a = torch.sum(alpha * hidden * mask.view(mask.shape[0], -1, 1).float(), 1)
        if not self.nonhybrid:
            a = self.linear_transform(torch.cat([a, ht], 1))
        b = self.embedding.weight[1:]  # n_nodes x latent_size
        scores = torch.matmul(a, b.transpose(1, 0))
        return scores

    def forward(self, inputs, A):
        hidden = self.embedding(inputs)
        hidden = self.gnn(A, hidden)
        return hidden


def trans_to_cuda(variable):
    if torch.cuda.is_available():
        return variable.cuda()
    else:
        return variable


def trans_to_cpu(variable):
    if torch.cuda.is_available():
        return variable.cpu()
    else:
        return variable


def forward(model, i, data):
    alias_inputs, A, items, mask, targets = data.get_slice(i)
    alias_inputs = trans_to_cuda(torch.Tensor(alias_inputs).long())
    items = trans_to_cuda(torch.Tensor(items).long())
    A = trans_to_cuda(torch.Tensor(A).float())
    mask = trans_to_cuda(torch.Tensor(mask).long())
    hidden = model(items, A)
    get = lambda i: hidden[i][alias_inputs[i]]
    seq_hidden = torch.stack([get(i) for i in torch.arange(len(alias_inputs)).long()])
    return targets, model.compute_scores(seq_hidden, mask)


def train_test(model, train_data, test_data):
    model.scheduler.step()
    print('start training: ', datetime.datetime.now())
    model.train()
    total_loss = 0.0
    slices = train_data.generate_batch(model.batch_size)
    for i, j in zip(slices, np.arange(len(slices))):
        model.optimizer.zero_grad()
        targets, scores = forward(model, i, train_data)
        targets = trans_to_cuda(torch.Tensor(targets).long())
        loss = model.loss_function(scores, targets - 1)
        loss.backward()
        model.optimizer.step()
        total_loss += loss
        if j % int(len(slices) / 3 + 1) == 0:
            print('[%d/%d] Loss: %.4f' % (j, len(slices), loss.item()))
    print('\tLoss:\t%.3f' % total_loss)

    print('start predicting: ', datetime.datetime.now())
    model.eval()
    hit, mrr = [], []
    slices = test_data.generate_batch(model.batch_size)
    for i in slices:
        targets, scores = forward(model, i, test_data)
        sub_scores = scores.topk(20)[1]
        sub_scores = trans_to_cpu(sub_scores).detach().numpy()
        for score, target, mask in zip(sub_scores, targets, test_data.mask):
            hit.append(np.isin(target - 1, score))
            if len(np.where(score == target - 1)[0]) == 0:
                mrr.append(0)
            else:
                mrr.append(1 / (np.where(score == target - 1)[0][0] + 1))
    hit = np.mean(hit) * 100
    mrr = np.mean(mrr) * 100
    return hit, mrr


# ----------------------------------------------------------------------------- main.py

def main():
    np.random.seed(0)  # not in the original: numpy's shuffles (Data.generate_batch) repeat from run to run
    dataset_dir = os.path.join(DATA_ROOT, 'datasets')
    make_sample_dataset(dataset_dir)
    train_data = pickle.load(open(os.path.join(dataset_dir, opt.dataset, 'train.txt'), 'rb'))
    if opt.validation:
        train_data, valid_data = split_validation(train_data, opt.valid_portion)
        test_data = valid_data
    else:
        test_data = pickle.load(open(os.path.join(dataset_dir, opt.dataset, 'test.txt'), 'rb'))
    train_data = Data(train_data, shuffle=True)
    test_data = Data(test_data, shuffle=False)
    if opt.dataset == 'diginetica':
        n_node = 43098
    elif opt.dataset == 'yoochoose1_64' or opt.dataset == 'yoochoose1_4':
        n_node = 37484
    else:
        n_node = 310

    model = trans_to_cuda(SessionGraph(opt, n_node))

    start = time.time()
    best_result = [0, 0]
    best_epoch = [0, 0]
    bad_counter = 0
    for epoch in range(opt.epoch):
        print('-------------------------------------------------------')
        print('epoch: ', epoch)
        hit, mrr = train_test(model, train_data, test_data)
        flag = 0
        if hit >= best_result[0]:
            best_result[0] = hit
            best_epoch[0] = epoch
            flag = 1
        if mrr >= best_result[1]:
            best_result[1] = mrr
            best_epoch[1] = epoch
            flag = 1
        print('Best Result:')
        print('\tRecall@20:\t%.4f\tMMR@20:\t%.4f\tEpoch:\t%d,\t%d' % (best_result[0], best_result[1], best_epoch[0], best_epoch[1]))
        bad_counter += 1 - flag
        if bad_counter >= opt.patience:
            break
    print('-------------------------------------------------------')
    end = time.time()
    print("Run time: %f s" % (end - start))
    return best_result


if __name__ == '__main__':
    try:
        best = main()
    finally:
        shutil.rmtree(DATA_ROOT, ignore_errors=True)
    print('done: best Recall@20 %.2f, MRR@20 %.2f' % (best[0], best[1]))
