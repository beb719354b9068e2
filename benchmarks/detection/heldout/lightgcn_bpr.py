"""Trains LightGCN (and, for comparison, the pure matrix-factorisation baseline) with the BPR loss on a small
synthetic user-item interaction data set written in the gowalla text format, as gusye1234/LightGCN-PyTorch does:
a `world` module holds the configuration and `device = torch.device('cuda' if GPU else "cpu")`, the data loader
builds the normalised bipartite adjacency matrix with scipy and moves it to `world.device` as a coalesced sparse
tensor, the model propagates the embeddings with `torch.sparse.mm`, the BPR sampler draws (user, positive,
negative) triples in numpy which are turned into tensors and moved to the device before shuffling and
mini-batching, `BPRLoss.stageOne` steps the Adam optimizer and returns `loss.cpu().item()`, and the test procedure
ranks all items for batches of users moved to the device, masks the training positives, takes `torch.topk` and
brings the ranks back with `.cpu()` for the numpy recall/precision/NDCG metrics. Weights are saved with
`torch.save(Recmodel.state_dict(), weight_file)` after every epoch and reloaded with
`map_location=torch.device('cpu')` when `--load 1` is given (the second run here resumes the first).

Modeled on: gusye1234/LightGCN-PyTorch, code/main.py, code/world.py, code/parse.py, code/register.py,
code/dataloader.py, code/model.py, code/Procedure.py and code/utils.py at commit
947ca2b3b1d2d3545b114145710cb06c4e57b3d2
(https://github.com/gusye1234/LightGCN-PyTorch/blob/947ca2b3b1d2d3545b114145710cb06c4e57b3d2/code/main.py,
https://github.com/gusye1234/LightGCN-PyTorch/blob/947ca2b3b1d2d3545b114145710cb06c4e57b3d2/code/model.py,
https://github.com/gusye1234/LightGCN-PyTorch/blob/947ca2b3b1d2d3545b114145710cb06c4e57b3d2/code/Procedure.py).

Kept: world.py's configuration dict and `GPU = torch.cuda.is_available()`, `device = torch.device('cuda' if GPU
else "cpu")`; parse.py's options; dataloader.py's `BasicDataset` and `Loader` (reading train.txt/test.txt, the
`csr_matrix` of interactions, `getSparseGraph` with the `s_pre_adj_mat.npz` cache, `_convert_sp_mat_to_sp_tensor`
with `torch.sparse.FloatTensor`, `.coalesce().to(world.device)`, `_split_A_hat`, `getUserPosItems`); model.py's
`PureMF` and `LightGCN` as written (`__dropout_x` with its CPU `torch.rand` mask, `computer` with
`torch.sparse.mm`, `getUsersRating`, `getEmbedding`, `bpr_loss`); utils.py's `BPRLoss`, `UniformSample_original_python`,
`set_seed`, `getFileName`, `minibatch`, `shuffle`, `timer` and the metrics; Procedure.py's `BPR_train_original`
(tensors made with `torch.Tensor(S[:, 0]).long()` and moved with `.to(world.device)`) and `Test` (`rating[exclude_index,
exclude_items] = -(1<<10)`, `torch.topk`, `rating.cpu().numpy()`, `rating_K.cpu()`); main.py's loop, the
`map_location=torch.device('cpu')` reload under `world.LOAD` and the per-epoch `torch.save`.

Changed to run here: the modules live in one file, `world` is a module object built by `make_world(argv)` from the
parsed options (paths in a temporary folder) and `register` is the function `register_dataset`; the gowalla
files are generated (users with preferences over item clusters) and written in the repository's format; the
C++ sampler is absent (the repository falls back to the Python one); tensorboardX is off (`--tensorboard 0`);
`cprint` prints plainly; main.py's module-level script is `run(argv)` and runs three times: LightGCN from
scratch, LightGCN resumed with `--load 1`, and PureMF, each ending with one more `Test`; the multiprocessing pool
of `Test`, the unused `PairWiseModel`, AUC and MRR helpers are left out and `timer` keeps only its named tapes.
Shrunk: 125 users and 90 items instead of gowalla's 29858/40981, embedding size 32, 2 layers, BPR batch 256,
test batch 10, top-k 10, 6 + 3 + 3 epochs with a test every 3 instead of 10.
"""
import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import types
from os.path import join
from time import time

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse import csr_matrix
from torch import nn, optim
from torch.utils.data import Dataset


# ---------------------------------------------------------------------------------------------------- parse.py
def parse_args(argv):
    parser = argparse.ArgumentParser(description="Go lightGCN")
    parser.add_argument('--bpr_batch', type=int, default=2048, help="the batch size for bpr loss training procedure")
    parser.add_argument('--recdim', type=int, default=64, help="the embedding size of lightGCN")
    parser.add_argument('--layer', type=int, default=3, help="the layer num of lightGCN")
    parser.add_argument('--lr', type=float, default=0.001, help="the learning rate")
    parser.add_argument('--decay', type=float, default=1e-4, help="the weight decay for l2 normalizaton")
    parser.add_argument('--dropout', type=int, default=0, help="using the dropout or not")
    parser.add_argument('--keepprob', type=float, default=0.6, help="the batch size for bpr loss training procedure")
    parser.add_argument('--a_fold', type=int, default=100, help="the fold num used to split large adj matrix")
    parser.add_argument('--testbatch', type=int, default=100, help="the batch size of users for testing")
    parser.add_argument('--dataset', type=str, default='gowalla', help="available datasets")
    parser.add_argument('--path', type=str, default="./checkpoints", help="path to save weights")
    parser.add_argument('--topks', nargs='?', default="[20]", help="@k test list")
    parser.add_argument('--tensorboard', type=int, default=1, help="enable tensorboard")
    parser.add_argument('--comment', type=str, default="lgn")
    parser.add_argument('--load', type=int, default=0)
    parser.add_argument('--epochs', type=int, default=1000)
    parser.add_argument('--multicore', type=int, default=0, help='whether we use multiprocessing or not in test')
    parser.add_argument('--pretrain', type=int, default=0, help='whether we use pretrained weight or not')
    parser.add_argument('--seed', type=int, default=2020, help='random seed')
    parser.add_argument('--model', type=str, default='lgn', help='rec-model, support [mf, lgn]')
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------------------- world.py
world = types.ModuleType('world')


def make_world(argv, root):
    args = parse_args(argv)
    world.ROOT_PATH = root
    world.DATA_PATH = join(root, 'data')
    world.FILE_PATH = join(root, 'checkpoints')
    if not os.path.exists(world.FILE_PATH):
        os.makedirs(world.FILE_PATH, exist_ok=True)

    config = {}
    config['bpr_batch_size'] = args.bpr_batch
    config['latent_dim_rec'] = args.recdim
    config['lightGCN_n_layers'] = args.layer
    config['dropout'] = args.dropout
    config['keep_prob'] = args.keepprob
    config['A_n_fold'] = args.a_fold
    config['test_u_batch_size'] = args.testbatch
    config['multicore'] = args.multicore
    config['lr'] = args.lr
    config['decay'] = args.decay
    config['pretrain'] = args.pretrain
    config['A_split'] = False
    config['bigdata'] = False
    world.config = config

    world.GPU = torch.cuda.is_available()
    world.device = torch.device('cuda' if world.GPU else "cpu")
    world.CORES = multiprocessing.cpu_count() // 2
    world.seed = args.seed
    world.dataset = args.dataset
    world.model_name = args.model
    world.TRAIN_epochs = args.epochs
    world.LOAD = args.load
    world.PATH = args.path
    world.topks = eval(args.topks)
    world.tensorboard = args.tensorboard
    world.comment = args.comment
    world.cprint = lambda words: print(words)


# ---------------------------------------------------------------------------------------------------- dataloader.py
class BasicDataset(Dataset):
    def __init__(self):
        print("init dataset")

    def getSparseGraph(self):
        raise NotImplementedError


class Loader(BasicDataset):
    """
    Dataset type for pytorch \n
    Incldue graph information
    gowalla dataset
    """

    def __init__(self, config=None, path="../data/gowalla"):
        config = config or world.config
        world.cprint(f'loading [{path}]')
        self.split = config['A_split']
        self.folds = config['A_n_fold']
        self.mode_dict = {'train': 0, "test": 1}
        self.mode = self.mode_dict['train']
        self.n_user = 0
        self.m_item = 0
        train_file = path + '/train.txt'
        test_file = path + '/test.txt'
        self.path = path
        trainUniqueUsers, trainItem, trainUser = [], [], []
        testUniqueUsers, testItem, testUser = [], [], []
        self.traindataSize = 0
        self.testDataSize = 0

        with open(train_file) as f:
            for l in f.readlines():
                if len(l) > 0:
                    l = l.strip('\n').split(' ')
                    items = [int(i) for i in l[1:]]
                    uid = int(l[0])
                    trainUniqueUsers.append(uid)
                    trainUser.extend([uid] * len(items))
                    trainItem.extend(items)
                    self.m_item = max(self.m_item, max(items))
                    self.n_user = max(self.n_user, uid)
                    self.traindataSize += len(items)
        self.trainUniqueUsers = np.array(trainUniqueUsers)
        self.trainUser = np.array(trainUser)
        self.trainItem = np.array(trainItem)

        with open(test_file) as f:
            for l in f.readlines():
                if len(l) > 0:
                    l = l.strip('\n').split(' ')
                    items = [int(i) for i in l[1:]]
                    uid = int(l[0])
                    testUniqueUsers.append(uid)
                    testUser.extend([uid] * len(items))
                    testItem.extend(items)
                    self.m_item = max(self.m_item, max(items))
                    self.n_user = max(self.n_user, uid)
                    self.testDataSize += len(items)
        self.m_item += 1
        self.n_user += 1
        self.testUniqueUsers = np.array(testUniqueUsers)
        self.testUser = np.array(testUser)
        self.testItem = np.array(testItem)

        self.Graph = None
        print(f"{self.trainDataSize} interactions for training")
        print(f"{self.testDataSize} interactions for testing")
        print(f"{world.dataset} Sparsity : {(self.trainDataSize + self.testDataSize) / self.n_users / self.m_items}")

        # (users,items), bipartite graph
        self.UserItemNet = csr_matrix((np.ones(len(self.trainUser)), (self.trainUser, self.trainItem)),
                                      shape=(self.n_user, self.m_item))
        self.users_D = np.array(self.UserItemNet.sum(axis=1)).squeeze()
        self.users_D[self.users_D == 0.] = 1
        self.items_D = np.array(self.UserItemNet.sum(axis=0)).squeeze()
        self.items_D[self.items_D == 0.] = 1.
        # pre-calculate
        self._allPos = self.getUserPosItems(list(range(self.n_user)))
        self.__testDict = self.__build_test()
        print(f"{world.dataset} is ready to go")

    @property
    def n_users(self):
        return self.n_user

    @property
    def m_items(self):
        return self.m_item

    @property
    def trainDataSize(self):
        return self.traindataSize

    @property
    def testDict(self):
        return self.__testDict

    @property
    def allPos(self):
        return self._allPos

    def _split_A_hat(self, A):
        A_fold = []
        fold_len = (self.n_users + self.m_items) // self.folds
        for i_fold in range(self.folds):
            start = i_fold * fold_len
            if i_fold == self.folds - 1:
                end = self.n_users + self.m_items
            else:
                end = (i_fold + 1) * fold_len
            A_fold.append(self._convert_sp_mat_to_sp_tensor(A[start:end]).coalesce().to(world.device))
        return A_fold

    def _convert_sp_mat_to_sp_tensor(self, X):
        coo = X.tocoo().astype(np.float32)
        row = torch.Tensor(coo.row).long()
        col = torch.Tensor(coo.col).long()
        index = torch.stack([row, col])
        data = torch.FloatTensor(coo.data)
        return torch.sparse.FloatTensor(index, data, torch.Size(coo.shape))

    def getSparseGraph(self):
        print("loading adjacency matrix")
        if self.Graph is None:
            try:
                pre_adj_mat = sp.load_npz(self.path + '/s_pre_adj_mat.npz')
                print("successfully loaded...")
                norm_adj = pre_adj_mat
            except:
                print("generating adjacency matrix")
                s = time()
                adj_mat = sp.dok_matrix((self.n_users + self.m_items, self.n_users + self.m_items), dtype=np.float32)
                adj_mat = adj_mat.tolil()
                R = self.UserItemNet.tolil()
                adj_mat[:self.n_users, self.n_users:] = R
                adj_mat[self.n_users:, :self.n_users] = R.T
                adj_mat = adj_mat.todok()

                rowsum = np.array(adj_mat.sum(axis=1))
                d_inv = np.power(rowsum, -0.5).flatten()
                d_inv[np.isinf(d_inv)] = 0.
                d_mat = sp.diags(d_inv)

                norm_adj = d_mat.dot(adj_mat)
                norm_adj = norm_adj.dot(d_mat)
                norm_adj = norm_adj.tocsr()
                end = time()
                print(f"costing {end-s:.3f}s, saved norm_mat...")
                sp.save_npz(self.path + '/s_pre_adj_mat.npz', norm_adj)

            if self.split == True:
                self.Graph = self._split_A_hat(norm_adj)
                print("done split matrix")
            else:
                self.Graph = self._convert_sp_mat_to_sp_tensor(norm_adj)
                self.Graph = self.Graph.coalesce().to(world.device)
                print("don't split the matrix")
        return self.Graph

    def __build_test(self):
        test_data = {}
        for i, item in enumerate(self.testItem):
            user = self.testUser[i]
            if test_data.get(user):
                test_data[user].append(item)
            else:
                test_data[user] = [item]
        return test_data

    def getUserPosItems(self, users):
        posItems = []
        for user in users:
            posItems.append(self.UserItemNet[user].nonzero()[1])
        return posItems


def write_gowalla_like(path, n_users=125, n_items=90, seed=7):
    """Each user likes one of six item clusters; ~80% of the sampled interactions go to train.txt."""
    rng = np.random.RandomState(seed)
    os.makedirs(path, exist_ok=True)
    cluster_of_item = rng.randint(0, 6, size=n_items)
    with open(path + '/train.txt', 'w') as ftrain, open(path + '/test.txt', 'w') as ftest:
        for u in range(n_users):
            fav = rng.randint(0, 6)
            p = np.where(cluster_of_item == fav, 8.0, 1.0)
            items = rng.choice(n_items, size=rng.randint(8, 16), replace=False, p=p / p.sum())
            cut = max(1, int(0.8 * len(items)))
            ftrain.write(' '.join(map(str, [u] + sorted(items[:cut].tolist()))) + '\n')
            ftest.write(' '.join(map(str, [u] + sorted(items[cut:].tolist()))) + '\n')


# ---------------------------------------------------------------------------------------------------- model.py
class BasicModel(nn.Module):
    def __init__(self):
        super(BasicModel, self).__init__()

    def getUsersRating(self, users):
        raise NotImplementedError


class PureMF(BasicModel):
    def __init__(self, config: dict, dataset: BasicDataset):
        super(PureMF, self).__init__()
        self.num_users = dataset.n_users
        self.num_items = dataset.m_items
        self.latent_dim = config['latent_dim_rec']
        self.f = nn.Sigmoid()
        self.__init_weight()

    def __init_weight(self):
        self.embedding_user = torch.nn.Embedding(num_embeddings=self.num_users, embedding_dim=self.latent_dim)
        self.embedding_item = torch.nn.Embedding(num_embeddings=self.num_items, embedding_dim=self.latent_dim)
        print("using Normal distribution N(0,1) initialization for PureMF")

    def getUsersRating(self, users):
        users = users.long()
        users_emb = self.embedding_user(users)
        items_emb = self.embedding_item.weight
        scores = torch.matmul(users_emb, items_emb.t())
        return self.f(scores)

    def bpr_loss(self, users, pos, neg):
        users_emb = self.embedding_user(users.long())
        pos_emb = self.embedding_item(pos.long())
        neg_emb = self.embedding_item(neg.long())
        pos_scores = torch.sum(users_emb * pos_emb, dim=1)
        neg_scores = torch.sum(users_emb * neg_emb, dim=1)
        loss = torch.mean(nn.functional.softplus(neg_scores - pos_scores))
        reg_loss = (1 / 2) * (users_emb.norm(2).pow(2) +
                              pos_emb.norm(2).pow(2) +
                              neg_emb.norm(2).pow(2)) / float(len(users))
        return loss, reg_loss


class LightGCN(BasicModel):
    def __init__(self, config: dict, dataset: BasicDataset):
        super(LightGCN, self).__init__()
        self.config = config
        self.dataset: BasicDataset = dataset
        self.__init_weight()

    def __init_weight(self):
        self.num_users = self.dataset.n_users
        self.num_items = self.dataset.m_items
        self.latent_dim = self.config['latent_dim_rec']
        self.n_layers = self.config['lightGCN_n_layers']
        self.keep_prob = self.config['keep_prob']
        self.A_split = self.config['A_split']
        self.embedding_user = torch.nn.Embedding(num_embeddings=self.num_users, embedding_dim=self.latent_dim)
        self.embedding_item = torch.nn.Embedding(num_embeddings=self.num_items, embedding_dim=self.latent_dim)
        if self.config['pretrain'] == 0:
            nn.init.normal_(self.embedding_user.weight, std=0.1)
            nn.init.normal_(self.embedding_item.weight, std=0.1)
            world.cprint('use NORMAL distribution initilizer')
        else:
            self.embedding_user.weight.data.copy_(torch.from_numpy(self.config['user_emb']))
            self.embedding_item.weight.data.copy_(torch.from_numpy(self.config['item_emb']))
            print('use pretarined data')
        self.f = nn.Sigmoid()
        self.Graph = self.dataset.getSparseGraph()
        print(f"lgn is already to go(dropout:{self.config['dropout']})")

    def __dropout_x(self, x, keep_prob):
        size = x.size()
        index = x.indices().t()
        values = x.values()
        random_index = torch.rand(len(values)) + keep_prob
        random_index = random_index.int().bool()
        index = index[random_index]
        values = values[random_index] / keep_prob
        g = torch.sparse.FloatTensor(index.t(), values, size)
        return g

    def __dropout(self, keep_prob):
        if self.A_split:
            graph = []
            for g in self.Graph:
                graph.append(self.__dropout_x(g, keep_prob))
        else:
            graph = self.__dropout_x(self.Graph, keep_prob)
        return graph

    def computer(self):
        """
        propagate methods for lightGCN
        """
        users_emb = self.embedding_user.weight
        items_emb = self.embedding_item.weight
        all_emb = torch.cat([users_emb, items_emb])
        embs = [all_emb]
        if self.config['dropout']:
            if self.training:
                print("droping")
                g_droped = self.__dropout(self.keep_prob)
            else:
                g_droped = self.Graph
        else:
            g_droped = self.Graph

        for layer in range(self.n_layers):
            if self.A_split:
                temp_emb = []
                for f in range(len(g_droped)):
                    temp_emb.append(torch.sparse.mm(g_droped[f], all_emb))
                side_emb = torch.cat(temp_emb, dim=0)
                all_emb = side_emb
            else:
                all_emb = torch.sparse.mm(g_droped, all_emb)
            embs.append(all_emb)
        embs = torch.stack(embs, dim=1)
        light_out = torch.mean(embs, dim=1)
        users, items = torch.split(light_out, [self.num_users, self.num_items])
        return users, items

    def getUsersRating(self, users):
        all_users, all_items = self.computer()
        users_emb = all_users[users.long()]
        items_emb = all_items
        rating = self.f(torch.matmul(users_emb, items_emb.t()))
        return rating

    def getEmbedding(self, users, pos_items, neg_items):
        all_users, all_items = self.computer()
        users_emb = all_users[users]
        pos_emb = all_items[pos_items]
        neg_emb = all_items[neg_items]
        users_emb_ego = self.embedding_user(users)
        pos_emb_ego = self.embedding_item(pos_items)
        neg_emb_ego = self.embedding_item(neg_items)
        return users_emb, pos_emb, neg_emb, users_emb_ego, pos_emb_ego, neg_emb_ego

    def bpr_loss(self, users, pos, neg):
        (users_emb, pos_emb, neg_emb,
         userEmb0, posEmb0, negEmb0) = self.getEmbedding(users.long(), pos.long(), neg.long())
        reg_loss = (1 / 2) * (userEmb0.norm(2).pow(2) +
                              posEmb0.norm(2).pow(2) +
                              negEmb0.norm(2).pow(2)) / float(len(users))
        pos_scores = torch.mul(users_emb, pos_emb)
        pos_scores = torch.sum(pos_scores, dim=1)
        neg_scores = torch.mul(users_emb, neg_emb)
        neg_scores = torch.sum(neg_scores, dim=1)

        loss = torch.mean(torch.nn.functional.softplus(neg_scores - pos_scores))

        return loss, reg_loss


# ---------------------------------------------------------------------------------------------------- utils.py
class BPRLoss:
    def __init__(self, recmodel, config: dict):
        self.model = recmodel
        self.weight_decay = config['decay']
        self.lr = config['lr']
        self.opt = optim.Adam(recmodel.parameters(), lr=self.lr)

    def stageOne(self, users, pos, neg):
        loss, reg_loss = self.model.bpr_loss(users, pos, neg)
        reg_loss = reg_loss * self.weight_decay
        loss = loss + reg_loss

        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

        return loss.cpu().item()


def UniformSample_original(dataset, neg_ratio=1):
    return UniformSample_original_python(dataset)


def UniformSample_original_python(dataset):
    """
    the original impliment of BPR Sampling in LightGCN
    :return:
        np.array
    """
    user_num = dataset.trainDataSize
    users = np.random.randint(0, dataset.n_users, user_num)
    allPos = dataset.allPos
    S = []
    for i, user in enumerate(users):
        posForUser = allPos[user]
        if len(posForUser) == 0:
            continue
        posindex = np.random.randint(0, len(posForUser))
        positem = posForUser[posindex]
        while True:
            negitem = np.random.randint(0, dataset.m_items)
            if negitem in posForUser:
                continue
            else:
                break
        S.append([user, positem, negitem])
    return np.array(S)


def set_seed(seed):
    np.random.seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
    torch.manual_seed(seed)


def getFileName():
    if world.model_name == 'mf':
        file = f"mf-{world.dataset}-{world.config['latent_dim_rec']}.pth.tar"
    elif world.model_name == 'lgn':
        file = f"lgn-{world.dataset}-{world.config['lightGCN_n_layers']}-{world.config['latent_dim_rec']}.pth.tar"
    return os.path.join(world.FILE_PATH, file)


def minibatch(*tensors, **kwargs):
    batch_size = kwargs.get('batch_size', world.config['bpr_batch_size'])

    if len(tensors) == 1:
        tensor = tensors[0]
        for i in range(0, len(tensor), batch_size):
            yield tensor[i:i + batch_size]
    else:
        for i in range(0, len(tensors[0]), batch_size):
            yield tuple(x[i:i + batch_size] for x in tensors)


def shuffle(*arrays, **kwargs):
    require_indices = kwargs.get('indices', False)

    if len(set(len(x) for x in arrays)) != 1:
        raise ValueError('All inputs to shuffle must have the same length.')

    shuffle_indices = np.arange(len(arrays[0]))
    np.random.shuffle(shuffle_indices)

    if len(arrays) == 1:
        result = arrays[0][shuffle_indices]
    else:
        result = tuple(x[shuffle_indices] for x in arrays)

    if require_indices:
        return result, shuffle_indices
    else:
        return result


class timer:
    """
    Time context manager for code block
    """
    NAMED_TAPE = {}

    @staticmethod
    def dict():
        hint = "|"
        for key, value in timer.NAMED_TAPE.items():
            hint = hint + f"{key}:{value:.2f}|"
        return hint

    @staticmethod
    def zero():
        for key in timer.NAMED_TAPE:
            timer.NAMED_TAPE[key] = 0

    def __init__(self, name):
        timer.NAMED_TAPE[name] = timer.NAMED_TAPE.get(name, 0.)
        self.named = name

    def __enter__(self):
        self.start = time()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        timer.NAMED_TAPE[self.named] += time() - self.start


def RecallPrecision_ATk(test_data, r, k):
    right_pred = r[:, :k].sum(1)
    precis_n = k
    recall_n = np.array([len(test_data[i]) for i in range(len(test_data))])
    recall = np.sum(right_pred / recall_n)
    precis = np.sum(right_pred) / precis_n
    return {'recall': recall, 'precision': precis}


def NDCGatK_r(test_data, r, k):
    assert len(r) == len(test_data)
    pred_data = r[:, :k]

    test_matrix = np.zeros((len(pred_data), k))
    for i, items in enumerate(test_data):
        length = k if k <= len(items) else len(items)
        test_matrix[i, :length] = 1
    max_r = test_matrix
    idcg = np.sum(max_r * 1. / np.log2(np.arange(2, k + 2)), axis=1)
    dcg = pred_data * (1. / np.log2(np.arange(2, k + 2)))
    dcg = np.sum(dcg, axis=1)
    idcg[idcg == 0.] = 1.
    ndcg = dcg / idcg
    ndcg[np.isnan(ndcg)] = 0.
    return np.sum(ndcg)


def getLabel(test_data, pred_data):
    r = []
    for i in range(len(test_data)):
        groundTrue = test_data[i]
        predictTopK = pred_data[i]
        pred = list(map(lambda x: x in groundTrue, predictTopK))
        pred = np.array(pred).astype("float")
        r.append(pred)
    return np.array(r).astype('float')


# ---------------------------------------------------------------------------------------------------- Procedure.py
def BPR_train_original(dataset, recommend_model, loss_class, epoch, neg_k=1, w=None):
    Recmodel = recommend_model
    Recmodel.train()
    bpr: BPRLoss = loss_class

    with timer(name="Sample"):
        S = UniformSample_original(dataset)
    users = torch.Tensor(S[:, 0]).long()
    posItems = torch.Tensor(S[:, 1]).long()
    negItems = torch.Tensor(S[:, 2]).long()

    users = users.to(world.device)
    posItems = posItems.to(world.device)
    negItems = negItems.to(world.device)
    users, posItems, negItems = shuffle(users, posItems, negItems)
    total_batch = len(users) // world.config['bpr_batch_size'] + 1
    aver_loss = 0.
    for (batch_i, (batch_users, batch_pos, batch_neg)) in enumerate(
            minibatch(users, posItems, negItems, batch_size=world.config['bpr_batch_size'])):
        cri = bpr.stageOne(batch_users, batch_pos, batch_neg)
        aver_loss += cri
        if world.tensorboard:
            w.add_scalar(f'BPRLoss/BPR', cri, epoch * int(len(users) / world.config['bpr_batch_size']) + batch_i)
    aver_loss = aver_loss / total_batch
    time_info = timer.dict()
    timer.zero()
    return f"loss{aver_loss:.3f}-{time_info}"


def test_one_batch(X):
    sorted_items = X[0].numpy()
    groundTrue = X[1]
    r = getLabel(groundTrue, sorted_items)
    pre, recall, ndcg = [], [], []
    for k in world.topks:
        ret = RecallPrecision_ATk(groundTrue, r, k)
        pre.append(ret['precision'])
        recall.append(ret['recall'])
        ndcg.append(NDCGatK_r(groundTrue, r, k))
    return {'recall': np.array(recall), 'precision': np.array(pre), 'ndcg': np.array(ndcg)}


def Test(dataset, Recmodel, epoch, w=None, multicore=0):
    u_batch_size = world.config['test_u_batch_size']
    testDict: dict = dataset.testDict
    # eval mode with no dropout
    Recmodel = Recmodel.eval()
    max_K = max(world.topks)
    results = {'precision': np.zeros(len(world.topks)),
               'recall': np.zeros(len(world.topks)),
               'ndcg': np.zeros(len(world.topks))}
    with torch.no_grad():
        users = list(testDict.keys())
        try:
            assert u_batch_size <= len(users) / 10
        except AssertionError:
            print(f"test_u_batch_size is too big for this dataset, try a small one {len(users) // 10}")
        users_list = []
        rating_list = []
        groundTrue_list = []
        total_batch = len(users) // u_batch_size + 1
        for batch_users in minibatch(users, batch_size=u_batch_size):
            allPos = dataset.getUserPosItems(batch_users)
            groundTrue = [testDict[u] for u in batch_users]
            batch_users_gpu = torch.Tensor(batch_users).long()
            batch_users_gpu = batch_users_gpu.to(world.device)

            rating = Recmodel.getUsersRating(batch_users_gpu)
            exclude_index = []
            exclude_items = []
            for range_i, items in enumerate(allPos):
                exclude_index.extend([range_i] * len(items))
                exclude_items.extend(items)
            rating[exclude_index, exclude_items] = -(1 << 10)
            _, rating_K = torch.topk(rating, k=max_K)
            rating = rating.cpu().numpy()
            del rating
            users_list.append(batch_users)
            rating_list.append(rating_K.cpu())
            groundTrue_list.append(groundTrue)
        assert total_batch == len(users_list)
        X = zip(rating_list, groundTrue_list)
        pre_results = []
        for x in X:
            pre_results.append(test_one_batch(x))
        for result in pre_results:
            results['recall'] += result['recall']
            results['precision'] += result['precision']
            results['ndcg'] += result['ndcg']
        results['recall'] /= float(len(users))
        results['precision'] /= float(len(users))
        results['ndcg'] /= float(len(users))
        print({k: np.round(v, 4).tolist() for k, v in results.items()})
        return results


# ---------------------------------------------------------------------------------------------------- register.py / main.py
def register_dataset():
    dataset = Loader(path=join(world.DATA_PATH, world.dataset))
    print("Test Topks:", world.topks, "LOAD:", world.LOAD)
    MODELS = {'mf': PureMF, 'lgn': LightGCN}
    return dataset, MODELS


def run(argv, root):
    make_world(argv, root)
    set_seed(world.seed)
    print(">>SEED:", world.seed)
    dataset, MODELS = register_dataset()

    Recmodel = MODELS[world.model_name](world.config, dataset)
    Recmodel = Recmodel.to(world.device)
    bpr = BPRLoss(Recmodel, world.config)

    weight_file = getFileName()
    print(f"load and save to {os.path.basename(weight_file)}")
    if world.LOAD:
        try:
            Recmodel.load_state_dict(torch.load(weight_file, map_location=torch.device('cpu')))
            world.cprint(f"loaded model weights from {os.path.basename(weight_file)}")
        except FileNotFoundError:
            print(f"{weight_file} not exists, start from beginning")
    Neg_k = 1

    w = None
    world.cprint("not enable tensorflowboard")

    results = None
    for epoch in range(world.TRAIN_epochs):
        if epoch % 3 == 0:
            world.cprint("[TEST]")
            results = Test(dataset, Recmodel, epoch, w, world.config['multicore'])
        output_information = BPR_train_original(dataset, Recmodel, bpr, epoch, neg_k=Neg_k, w=w)
        print(f'EPOCH[{epoch+1}/{world.TRAIN_epochs}] {output_information}')
        torch.save(Recmodel.state_dict(), weight_file)
    results = Test(dataset, Recmodel, world.TRAIN_epochs, w, world.config['multicore'])
    return results


def main():
    root = tempfile.mkdtemp()
    try:
        write_gowalla_like(join(root, 'data', 'gowalla'))
        common = ['--dataset', 'gowalla', '--recdim', '32', '--layer', '2', '--bpr_batch', '256', '--lr', '0.01',
                  '--testbatch', '10', '--topks', '[10]', '--tensorboard', '0']
        run(common + ['--model', 'lgn', '--epochs', '6'], root)
        res = run(common + ['--model', 'lgn', '--epochs', '3', '--load', '1'], root)
        mf = run(common + ['--model', 'mf', '--epochs', '3'], root)
        print(f"done: lightgcn recall@10 {res['recall'][0]:.4f} ndcg@10 {res['ndcg'][0]:.4f}, "
              f"mf recall@10 {mf['recall'][0]:.4f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
