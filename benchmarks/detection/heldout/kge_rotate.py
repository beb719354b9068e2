"""Trains knowledge graph embeddings (RotatE with self-adversarial negative sampling, then TransE on a Countries-style
region task) on small synthetic knowledge graphs in the repository's file format, evaluates filtered MRR/MR/HITS@k
(AUC-PR for Countries) and resumes training from the saved checkpoint, as DeepGraphLearning/KnowledgeGraphEmbedding
does: ``args.cuda`` moves the model with ``kge_model.cuda()``, the static ``train_step``/``test_step`` move each batch
(positive and negative samples, subsampling weights, filter bias) with ``.cuda()`` under ``if args.cuda``, embeddings
and the ``gamma``/``embedding_range`` constants are ``nn.Parameter``s, rankings are computed on the device with
``torch.argsort`` and read with ``.item()``, Countries scores come back with ``.cpu().numpy()`` for scikit-learn, and
`save_model` writes model/optimizer state dicts with ``torch.save`` and embeddings with ``.detach().cpu().numpy()``.

Modeled on: DeepGraphLearning/KnowledgeGraphEmbedding, codes/run.py, codes/model.py and codes/dataloader.py at commit
2e440e0f9c687314d5ff67ead68ce985dc446e3a
(https://github.com/DeepGraphLearning/KnowledgeGraphEmbedding/blob/2e440e0f9c687314d5ff67ead68ce985dc446e3a/codes/run.py,
https://github.com/DeepGraphLearning/KnowledgeGraphEmbedding/blob/2e440e0f9c687314d5ff67ead68ce985dc446e3a/codes/model.py).

Kept: model.py's `KGEModel` (``nn.Parameter`` gamma, embedding_range and embeddings; `forward` with
``torch.index_select`` in the single/head-batch/tail-batch modes; TransE and RotatE; the static `train_step` with its
``if args.cuda: ... .cuda()`` moves, self-adversarial weighting and ``.item()`` logs; `test_step` with the Countries
AUC-PR branch (``torch.LongTensor(sample)``, ``.cuda()``, ``.squeeze(1).cpu().numpy()``) and the filtered ranking
branch (``score += filter_bias``, ``torch.argsort``, ``.nonzero()``, ``ranking.item()``)); dataloader.py's
`TrainDataset`, `TestDataset` and `BidirectionalOneShotIterator`; run.py's `parse_args`, `override_config`,
`save_model`, `read_triple`, `set_logger`, `log_metrics` and `main` (``kge_model.cuda()``, the warm-up that rebuilds
Adam, ``torch.load`` of the checkpoint without map_location, the optimizer state restore).

Changed to run here: FB15k/Countries files are generated into a temporary folder in the repository's format;
``--cuda`` is passed when ``torch.cuda.is_available()``; DataLoader ``num_workers`` is 0; ``np.isin`` for the
removed ``np.in1d``; logging handlers are reset between the three runs; DistMult/ComplEx/pRotatE, the
``--evaluate_train`` pass and unused options are left out.
Shrunk: 40 entities, 4 relations, ~300 training triples, hidden size 16, 8 negatives, batch 32, 40+20+12 steps.
"""
import argparse
import json
import logging
import os
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.metrics import average_precision_score
from torch.utils.data import DataLoader, Dataset

# ---- codes/dataloader.py -----------------------------------------------------------------------------------------
class TrainDataset(Dataset):
    def __init__(self, triples, nentity, nrelation, negative_sample_size, mode):
        self.len, self.triples, self.triple_set = len(triples), triples, set(triples)
        self.nentity, self.nrelation, self.negative_sample_size, self.mode = nentity, nrelation, negative_sample_size, mode
        self.count = self.count_frequency(triples)
        self.true_head, self.true_tail = self.get_true_head_and_tail(self.triples)
    def __len__(self):
        return self.len
    def __getitem__(self, idx):
        positive_sample = self.triples[idx]
        head, relation, tail = positive_sample
        subsampling_weight = self.count[(head, relation)] + self.count[(tail, -relation - 1)]
        subsampling_weight = torch.sqrt(1 / torch.Tensor([subsampling_weight]))
        negative_sample_list = []
        negative_sample_size = 0
        while negative_sample_size < self.negative_sample_size:
            negative_sample = np.random.randint(self.nentity, size=self.negative_sample_size * 2)
            if self.mode == 'head-batch':
                mask = np.isin(negative_sample, self.true_head[(relation, tail)], assume_unique=True, invert=True)
            elif self.mode == 'tail-batch':
                mask = np.isin(negative_sample, self.true_tail[(head, relation)], assume_unique=True, invert=True)
            else:
                raise ValueError('Training batch mode %s not supported' % self.mode)
            negative_sample = negative_sample[mask]
            negative_sample_list.append(negative_sample)
            negative_sample_size += negative_sample.size
        negative_sample = np.concatenate(negative_sample_list)[:self.negative_sample_size]
        negative_sample = torch.LongTensor(negative_sample)
        positive_sample = torch.LongTensor(positive_sample)
        return positive_sample, negative_sample, subsampling_weight, self.mode
    @staticmethod
    def collate_fn(data):
        positive_sample = torch.stack([_[0] for _ in data], dim=0)
        negative_sample = torch.stack([_[1] for _ in data], dim=0)
        subsample_weight = torch.cat([_[2] for _ in data], dim=0)
        mode = data[0][3]
        return positive_sample, negative_sample, subsample_weight, mode
    @staticmethod
    def count_frequency(triples, start=4):
        '''Get frequency of a partial triple like (head, relation) or (relation, tail)'''
        count = {}
        for head, relation, tail in triples:
            count[(head, relation)] = count[(head, relation)] + 1 if (head, relation) in count else start
            count[(tail, -relation - 1)] = count[(tail, -relation - 1)] + 1 if (tail, -relation - 1) in count else start
        return count
    @staticmethod
    def get_true_head_and_tail(triples):
        '''Build a dictionary of true triples that will be used to filter these true triples for negative sampling'''
        true_head, true_tail = {}, {}
        for head, relation, tail in triples:
            true_tail.setdefault((head, relation), []).append(tail)
            true_head.setdefault((relation, tail), []).append(head)
        for relation, tail in true_head:
            true_head[(relation, tail)] = np.array(list(set(true_head[(relation, tail)])))
        for head, relation in true_tail:
            true_tail[(head, relation)] = np.array(list(set(true_tail[(head, relation)])))
        return true_head, true_tail

class TestDataset(Dataset):
    def __init__(self, triples, all_true_triples, nentity, nrelation, mode):
        self.len, self.triple_set, self.triples = len(triples), set(all_true_triples), triples
        self.nentity, self.nrelation, self.mode = nentity, nrelation, mode
    def __len__(self):
        return self.len
    def __getitem__(self, idx):
        head, relation, tail = self.triples[idx]
        if self.mode == 'head-batch':
            tmp = [(0, rand_head) if (rand_head, relation, tail) not in self.triple_set
                   else (-1, head) for rand_head in range(self.nentity)]
            tmp[head] = (0, head)
        elif self.mode == 'tail-batch':
            tmp = [(0, rand_tail) if (head, relation, rand_tail) not in self.triple_set
                   else (-1, tail) for rand_tail in range(self.nentity)]
            tmp[tail] = (0, tail)
        else:
            raise ValueError('negative batch mode %s not supported' % self.mode)
        tmp = torch.LongTensor(tmp)
        filter_bias = tmp[:, 0].float()
        negative_sample = tmp[:, 1]
        positive_sample = torch.LongTensor((head, relation, tail))
        return positive_sample, negative_sample, filter_bias, self.mode
    @staticmethod
    def collate_fn(data):
        positive_sample = torch.stack([_[0] for _ in data], dim=0)
        negative_sample = torch.stack([_[1] for _ in data], dim=0)
        filter_bias = torch.stack([_[2] for _ in data], dim=0)
        mode = data[0][3]
        return positive_sample, negative_sample, filter_bias, mode

class BidirectionalOneShotIterator(object):
    def __init__(self, dataloader_head, dataloader_tail):
        self.iterator_head = self.one_shot_iterator(dataloader_head)
        self.iterator_tail = self.one_shot_iterator(dataloader_tail)
        self.step = 0
    def __next__(self):
        self.step += 1
        if self.step % 2 == 0:
            data = next(self.iterator_head)
        else:
            data = next(self.iterator_tail)
        return data
    @staticmethod
    def one_shot_iterator(dataloader):
        '''Transform a PyTorch Dataloader into python iterator'''
        while True:
            for data in dataloader:
                yield data

# ---- codes/model.py ----------------------------------------------------------------------------------------------
class KGEModel(nn.Module):
    def __init__(self, model_name, nentity, nrelation, hidden_dim, gamma,
                 double_entity_embedding=False, double_relation_embedding=False):
        super(KGEModel, self).__init__()
        self.model_name, self.nentity, self.nrelation, self.hidden_dim = model_name, nentity, nrelation, hidden_dim
        self.epsilon = 2.0
        self.gamma = nn.Parameter(torch.Tensor([gamma]), requires_grad=False)
        self.embedding_range = nn.Parameter(
            torch.Tensor([(self.gamma.item() + self.epsilon) / hidden_dim]), requires_grad=False)
        self.entity_dim = hidden_dim * 2 if double_entity_embedding else hidden_dim
        self.relation_dim = hidden_dim * 2 if double_relation_embedding else hidden_dim
        self.entity_embedding = nn.Parameter(torch.zeros(nentity, self.entity_dim))
        nn.init.uniform_(tensor=self.entity_embedding, a=-self.embedding_range.item(), b=self.embedding_range.item())
        self.relation_embedding = nn.Parameter(torch.zeros(nrelation, self.relation_dim))
        nn.init.uniform_(tensor=self.relation_embedding, a=-self.embedding_range.item(), b=self.embedding_range.item())
        if model_name not in ['TransE', 'RotatE']:
            raise ValueError('model %s not supported' % model_name)
        if model_name == 'RotatE' and (not double_entity_embedding or double_relation_embedding):
            raise ValueError('RotatE should use --double_entity_embedding')
    def forward(self, sample, mode='single'):
        '''Calculate the score of a batch of triples (single mode), or of positive triples against the negative
        entities of the second part (head-batch / tail-batch modes).'''
        if mode == 'single':
            batch_size, negative_sample_size = sample.size(0), 1
            head = torch.index_select(self.entity_embedding, dim=0, index=sample[:, 0]).unsqueeze(1)
            relation = torch.index_select(self.relation_embedding, dim=0, index=sample[:, 1]).unsqueeze(1)
            tail = torch.index_select(self.entity_embedding, dim=0, index=sample[:, 2]).unsqueeze(1)
        elif mode == 'head-batch':
            tail_part, head_part = sample
            batch_size, negative_sample_size = head_part.size(0), head_part.size(1)
            head = torch.index_select(
                self.entity_embedding, dim=0, index=head_part.view(-1)).view(batch_size, negative_sample_size, -1)
            relation = torch.index_select(self.relation_embedding, dim=0, index=tail_part[:, 1]).unsqueeze(1)
            tail = torch.index_select(self.entity_embedding, dim=0, index=tail_part[:, 2]).unsqueeze(1)
        elif mode == 'tail-batch':
            head_part, tail_part = sample
            batch_size, negative_sample_size = tail_part.size(0), tail_part.size(1)
            head = torch.index_select(self.entity_embedding, dim=0, index=head_part[:, 0]).unsqueeze(1)
            relation = torch.index_select(self.relation_embedding, dim=0, index=head_part[:, 1]).unsqueeze(1)
            tail = torch.index_select(
                self.entity_embedding, dim=0, index=tail_part.view(-1)).view(batch_size, negative_sample_size, -1)
        else:
            raise ValueError('mode %s not supported' % mode)
        model_func = {'TransE': self.TransE, 'RotatE': self.RotatE}
        if self.model_name in model_func:
            score = model_func[self.model_name](head, relation, tail, mode)
        else:
            raise ValueError('model %s not supported' % self.model_name)
        return score
    def TransE(self, head, relation, tail, mode):
        if mode == 'head-batch':
            score = head + (relation - tail)
        else:
            score = (head + relation) - tail
        score = self.gamma.item() - torch.norm(score, p=1, dim=2)
        return score
    def RotatE(self, head, relation, tail, mode):
        pi = 3.14159265358979323846
        re_head, im_head = torch.chunk(head, 2, dim=2)
        re_tail, im_tail = torch.chunk(tail, 2, dim=2)
        phase_relation = relation / (self.embedding_range.item() / pi)
        re_relation = torch.cos(phase_relation)
        im_relation = torch.sin(phase_relation)
        if mode == 'head-batch':
            re_score = re_relation * re_tail + im_relation * im_tail
            im_score = re_relation * im_tail - im_relation * re_tail
            re_score = re_score - re_head
            im_score = im_score - im_head
        else:
            re_score = re_head * re_relation - im_head * im_relation
            im_score = re_head * im_relation + im_head * re_relation
            re_score = re_score - re_tail
            im_score = im_score - im_tail
        score = torch.stack([re_score, im_score], dim=0)
        score = score.norm(dim=0)
        score = self.gamma.item() - score.sum(dim=2)
        return score
    @staticmethod
    def train_step(model, optimizer, train_iterator, args):
        '''A single train step. Apply back-propation and return the loss'''
        model.train()
        optimizer.zero_grad()
        positive_sample, negative_sample, subsampling_weight, mode = next(train_iterator)
        if args.cuda:
            positive_sample = positive_sample.cuda()
            negative_sample = negative_sample.cuda()
            subsampling_weight = subsampling_weight.cuda()
        negative_score = model((positive_sample, negative_sample), mode=mode)
        if args.negative_adversarial_sampling:
            negative_score = (F.softmax(negative_score * args.adversarial_temperature, dim=1).detach()
                              * F.logsigmoid(-negative_score)).sum(dim=1)
        else:
            negative_score = F.logsigmoid(-negative_score).mean(dim=1)
        positive_score = model(positive_sample)
        positive_score = F.logsigmoid(positive_score).squeeze(dim=1)
        if args.uni_weight:
            positive_sample_loss = - positive_score.mean()
            negative_sample_loss = - negative_score.mean()
        else:
            positive_sample_loss = - (subsampling_weight * positive_score).sum() / subsampling_weight.sum()
            negative_sample_loss = - (subsampling_weight * negative_score).sum() / subsampling_weight.sum()
        loss = (positive_sample_loss + negative_sample_loss) / 2
        if args.regularization != 0.0:
            regularization = args.regularization * (
                model.entity_embedding.norm(p=3) ** 3 +
                model.relation_embedding.norm(p=3).norm(p=3) ** 3
            )
            loss = loss + regularization
            regularization_log = {'regularization': regularization.item()}
        else:
            regularization_log = {}
        loss.backward()
        optimizer.step()
        log = {**regularization_log, 'positive_sample_loss': positive_sample_loss.item(),
               'negative_sample_loss': negative_sample_loss.item(), 'loss': loss.item()}
        return log
    @staticmethod
    def test_step(model, test_triples, all_true_triples, args):
        '''Evaluate the model on test or valid datasets'''
        model.eval()
        if args.countries:
            sample = list()
            y_true = list()
            for head, relation, tail in test_triples:
                for candidate_region in args.regions:
                    y_true.append(1 if candidate_region == tail else 0)
                    sample.append((head, relation, candidate_region))
            sample = torch.LongTensor(sample)
            if args.cuda:
                sample = sample.cuda()
            with torch.no_grad():
                y_score = model(sample).squeeze(1).cpu().numpy()
            y_true = np.array(y_true)
            auc_pr = average_precision_score(y_true, y_score)
            metrics = {'auc_pr': auc_pr}
        else:
            test_dataloader_head = DataLoader(
                TestDataset(test_triples, all_true_triples, args.nentity, args.nrelation, 'head-batch'),
                batch_size=args.test_batch_size, num_workers=0, collate_fn=TestDataset.collate_fn)
            test_dataloader_tail = DataLoader(
                TestDataset(test_triples, all_true_triples, args.nentity, args.nrelation, 'tail-batch'),
                batch_size=args.test_batch_size, num_workers=0, collate_fn=TestDataset.collate_fn)
            test_dataset_list = [test_dataloader_head, test_dataloader_tail]
            logs = []
            step = 0
            total_steps = sum([len(dataset) for dataset in test_dataset_list])
            with torch.no_grad():
                for test_dataset in test_dataset_list:
                    for positive_sample, negative_sample, filter_bias, mode in test_dataset:
                        if args.cuda:
                            positive_sample = positive_sample.cuda()
                            negative_sample = negative_sample.cuda()
                            filter_bias = filter_bias.cuda()
                        batch_size = positive_sample.size(0)
                        score = model((positive_sample, negative_sample), mode)
                        score += filter_bias
                        argsort = torch.argsort(score, dim=1, descending=True)
                        if mode == 'head-batch':
                            positive_arg = positive_sample[:, 0]
                        elif mode == 'tail-batch':
                            positive_arg = positive_sample[:, 2]
                        else:
                            raise ValueError('mode %s not supported' % mode)
                        for i in range(batch_size):
                            ranking = (argsort[i, :] == positive_arg[i]).nonzero()
                            assert ranking.size(0) == 1
                            ranking = 1 + ranking.item()
                            logs.append({'MRR': 1.0 / ranking, 'MR': float(ranking),
                                         'HITS@1': 1.0 if ranking <= 1 else 0.0, 'HITS@3': 1.0 if ranking <= 3 else 0.0,
                                         'HITS@10': 1.0 if ranking <= 10 else 0.0})
                        if step % args.test_log_steps == 0:
                            logging.info('Evaluating the model... (%d/%d)' % (step, total_steps))
                        step += 1
            metrics = {}
            for metric in logs[0].keys():
                metrics[metric] = sum([log[metric] for log in logs]) / len(logs)
        return metrics

# ---- codes/run.py ------------------------------------------------------------------------------------------------
def parse_args(args=None):
    parser = argparse.ArgumentParser(description='Training and Testing Knowledge Graph Embedding Models',
                                     usage='train.py [<args>] [-h | --help]')
    parser.add_argument('--cuda', action='store_true', help='use GPU')
    for flag in ['--do_train', '--do_valid', '--do_test', '--countries', '--uni_weight']:
        parser.add_argument(flag, action='store_true')
    parser.add_argument('--regions', type=int, nargs='+', default=None, help='DO NOT MANUALLY SET')
    parser.add_argument('--data_path', type=str, default=None)
    parser.add_argument('--model', default='TransE', type=str)
    parser.add_argument('-de', '--double_entity_embedding', action='store_true')
    parser.add_argument('-dr', '--double_relation_embedding', action='store_true')
    parser.add_argument('-n', '--negative_sample_size', default=128, type=int)
    parser.add_argument('-d', '--hidden_dim', default=500, type=int)
    parser.add_argument('-g', '--gamma', default=12.0, type=float)
    parser.add_argument('-adv', '--negative_adversarial_sampling', action='store_true')
    parser.add_argument('-a', '--adversarial_temperature', default=1.0, type=float)
    parser.add_argument('-b', '--batch_size', default=1024, type=int)
    parser.add_argument('-r', '--regularization', default=0.0, type=float)
    parser.add_argument('--test_batch_size', default=4, type=int, help='valid/test batch size')
    parser.add_argument('-lr', '--learning_rate', default=0.0001, type=float)
    parser.add_argument('-init', '--init_checkpoint', default=None, type=str)
    parser.add_argument('-save', '--save_path', default=None, type=str)
    for name, default in [('max_steps', 100000), ('warm_up_steps', None), ('save_checkpoint_steps', 10000),
                          ('valid_steps', 10000), ('log_steps', 100), ('test_log_steps', 1000), ('nentity', 0),
                          ('nrelation', 0)]:
        parser.add_argument('--' + name, default=default, type=int)
    return parser.parse_args(args)

def override_config(args):
    '''Override model and data configuration'''
    with open(os.path.join(args.init_checkpoint, 'config.json'), 'r') as fjson:
        argparse_dict = json.load(fjson)
    args.countries = argparse_dict['countries']
    if args.data_path is None:
        args.data_path = argparse_dict['data_path']
    args.model = argparse_dict['model']
    args.double_entity_embedding = argparse_dict['double_entity_embedding']
    args.double_relation_embedding = argparse_dict['double_relation_embedding']
    args.hidden_dim = argparse_dict['hidden_dim']
    args.test_batch_size = argparse_dict['test_batch_size']

def save_model(model, optimizer, save_variable_list, args):
    '''Save the parameters of the model and the optimizer, as well as some other variables'''
    argparse_dict = vars(args)
    with open(os.path.join(args.save_path, 'config.json'), 'w') as fjson:
        json.dump(argparse_dict, fjson)
    torch.save({**save_variable_list, 'model_state_dict': model.state_dict(),
                'optimizer_state_dict': optimizer.state_dict()}, os.path.join(args.save_path, 'checkpoint'))
    entity_embedding = model.entity_embedding.detach().cpu().numpy()
    np.save(os.path.join(args.save_path, 'entity_embedding'), entity_embedding)
    relation_embedding = model.relation_embedding.detach().cpu().numpy()
    np.save(os.path.join(args.save_path, 'relation_embedding'), relation_embedding)

def read_triple(file_path, entity2id, relation2id):
    '''Read triples and map them into ids.'''
    triples = []
    with open(file_path) as fin:
        for line in fin:
            h, r, t = line.strip().split('\t')
            triples.append((entity2id[h], relation2id[r], entity2id[t]))
    return triples

def set_logger(args):
    '''Write logs to checkpoint and console'''
    if args.do_train:
        log_file = os.path.join(args.save_path or args.init_checkpoint, 'train.log')
    else:
        log_file = os.path.join(args.save_path or args.init_checkpoint, 'test.log')
    for handler in logging.getLogger('').handlers[:]:  # (added here: the program runs main three times)
        logging.getLogger('').removeHandler(handler)
    logging.basicConfig(format='%(asctime)s %(levelname)-8s %(message)s', level=logging.INFO,
                        datefmt='%Y-%m-%d %H:%M:%S', filename=log_file, filemode='w')
    console = logging.StreamHandler()
    console.setLevel(logging.INFO)
    console.setFormatter(logging.Formatter('%(levelname)-8s %(message)s'))
    logging.getLogger('').addHandler(console)

def log_metrics(mode, step, metrics):
    '''Print the evaluation logs'''
    for metric in metrics:
        logging.info('%s %s at step %d: %f' % (mode, metric, step, metrics[metric]))

def main(args):
    if (not args.do_train) and (not args.do_valid) and (not args.do_test):
        raise ValueError('one of train/val/test mode must be choosed.')
    if args.init_checkpoint:
        override_config(args)
    elif args.data_path is None:
        raise ValueError('one of init_checkpoint/data_path must be choosed.')
    if args.do_train and args.save_path is None:
        raise ValueError('Where do you want to save your trained model?')
    if args.save_path and not os.path.exists(args.save_path):
        os.makedirs(args.save_path)
    set_logger(args)
    with open(os.path.join(args.data_path, 'entities.dict')) as fin:
        entity2id = {entity: int(eid) for eid, entity in (line.strip().split('\t') for line in fin)}
    with open(os.path.join(args.data_path, 'relations.dict')) as fin:
        relation2id = {relation: int(rid) for rid, relation in (line.strip().split('\t') for line in fin)}
    if args.countries:
        with open(os.path.join(args.data_path, 'regions.list')) as fin:
            args.regions = [entity2id[line.strip()] for line in fin]
    nentity, nrelation = len(entity2id), len(relation2id)
    args.nentity, args.nrelation = nentity, nrelation
    logging.info('Model: %s, #entity: %d, #relation: %d' % (args.model, nentity, nrelation))
    train_triples = read_triple(os.path.join(args.data_path, 'train.txt'), entity2id, relation2id)
    valid_triples = read_triple(os.path.join(args.data_path, 'valid.txt'), entity2id, relation2id)
    test_triples = read_triple(os.path.join(args.data_path, 'test.txt'), entity2id, relation2id)
    logging.info('#train: %d, #valid: %d, #test: %d' % (len(train_triples), len(valid_triples), len(test_triples)))
    all_true_triples = train_triples + valid_triples + test_triples
    kge_model = KGEModel(model_name=args.model, nentity=nentity, nrelation=nrelation, hidden_dim=args.hidden_dim,
                         gamma=args.gamma, double_entity_embedding=args.double_entity_embedding,
                         double_relation_embedding=args.double_relation_embedding)
    if args.cuda:
        kge_model = kge_model.cuda()
    if args.do_train:
        train_dataloader_head = DataLoader(
            TrainDataset(train_triples, nentity, nrelation, args.negative_sample_size, 'head-batch'),
            batch_size=args.batch_size, shuffle=True, num_workers=0, collate_fn=TrainDataset.collate_fn)
        train_dataloader_tail = DataLoader(
            TrainDataset(train_triples, nentity, nrelation, args.negative_sample_size, 'tail-batch'),
            batch_size=args.batch_size, shuffle=True, num_workers=0, collate_fn=TrainDataset.collate_fn)
        train_iterator = BidirectionalOneShotIterator(train_dataloader_head, train_dataloader_tail)
        current_learning_rate = args.learning_rate
        optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, kge_model.parameters()),
                                     lr=current_learning_rate)
        if args.warm_up_steps:
            warm_up_steps = args.warm_up_steps
        else:
            warm_up_steps = args.max_steps // 2
    if args.init_checkpoint:
        logging.info('Loading checkpoint %s...' % args.init_checkpoint)
        checkpoint = torch.load(os.path.join(args.init_checkpoint, 'checkpoint'))
        init_step = checkpoint['step']
        kge_model.load_state_dict(checkpoint['model_state_dict'])
        if args.do_train:
            current_learning_rate = checkpoint['current_learning_rate']
            warm_up_steps = checkpoint['warm_up_steps']
            optimizer.load_state_dict(checkpoint['optimizer_state_dict'])
    else:
        logging.info('Ramdomly Initializing %s Model...' % args.model)
        init_step = 0
    step = init_step
    logging.info('Start Training... init_step = %d' % init_step)
    if args.do_train:
        training_logs = []
        for step in range(init_step, args.max_steps):
            log = kge_model.train_step(kge_model, optimizer, train_iterator, args)
            training_logs.append(log)
            if step >= warm_up_steps:
                current_learning_rate = current_learning_rate / 10
                logging.info('Change learning_rate to %f at step %d' % (current_learning_rate, step))
                optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, kge_model.parameters()),
                                             lr=current_learning_rate)
                warm_up_steps = warm_up_steps * 3
            if step % args.save_checkpoint_steps == 0:
                save_variable_list = {'step': step, 'current_learning_rate': current_learning_rate,
                                      'warm_up_steps': warm_up_steps}
                save_model(kge_model, optimizer, save_variable_list, args)
            if step % args.log_steps == 0:
                metrics = {}
                for metric in training_logs[0].keys():
                    metrics[metric] = sum([log[metric] for log in training_logs]) / len(training_logs)
                log_metrics('Training average', step, metrics)
                training_logs = []
            if args.do_valid and step % args.valid_steps == 0:
                logging.info('Evaluating on Valid Dataset...')
                metrics = kge_model.test_step(kge_model, valid_triples, all_true_triples, args)
                log_metrics('Valid', step, metrics)
        save_variable_list = {'step': step, 'current_learning_rate': current_learning_rate,
                              'warm_up_steps': warm_up_steps}
        save_model(kge_model, optimizer, save_variable_list, args)
    if args.do_valid:
        logging.info('Evaluating on Valid Dataset...')
        metrics = kge_model.test_step(kge_model, valid_triples, all_true_triples, args)
        log_metrics('Valid', step, metrics)
    if args.do_test:
        logging.info('Evaluating on Test Dataset...')
        metrics = kge_model.test_step(kge_model, test_triples, all_true_triples, args)
        log_metrics('Test', step, metrics)
    return metrics

def write_dataset(folder, seed, countries=False):
    """Writes a knowledge graph in the FB15k/Countries file format: entities.dict, relations.dict, *.txt."""
    rng = np.random.RandomState(seed)
    os.makedirs(folder)
    entities, relations = ['e%d' % i for i in range(40)], ['r%d' % i for i in range(4)]
    perms = [rng.permutation(40) for _ in relations]  # relation k maps entity i to perms[k][i]
    triples = sorted({(int(h), k, int(perms[k][h])) for k in range(4) for h in rng.randint(0, 40, 110)})
    if countries:  # relation 0 ("locatedin") points at the five first entities, the regions
        triples = sorted({(h, k, t) for h, k, t in triples if k != 0} | {(h, 0, h % 5) for h in range(5, 40)})
    order = rng.permutation(len(triples))
    test = [triples[i] for i in order[:24] if not countries or triples[i][1] == 0][:12]
    rest = [t for t in triples if t not in test]
    valid, train = rest[:16], rest[16:]
    for name, names in [('entities.dict', entities), ('relations.dict', relations)]:
        with open(os.path.join(folder, name), 'w') as f:
            f.writelines('%d\t%s\n' % (i, e) for i, e in enumerate(names))
    for name, part in [('train', train), ('valid', valid), ('test', test)]:
        with open(os.path.join(folder, name + '.txt'), 'w') as f:
            f.writelines('%s\t%s\t%s\n' % (entities[h], relations[r], entities[t]) for h, r, t in part)
    with open(os.path.join(folder, 'regions.list'), 'w') as f:
        f.writelines('%s\n' % e for e in entities[:5])

def run():
    folder = tempfile.mkdtemp(prefix='kge_')
    try:
        cuda = ['--cuda'] if torch.cuda.is_available() else []
        write_dataset(os.path.join(folder, 'kg'), seed=0)
        write_dataset(os.path.join(folder, 'countries'), seed=1, countries=True)
        save = os.path.join(folder, 'RotatE_kg_0')
        first = main(parse_args(cuda + [
            '--do_train', '--do_valid', '--do_test', '--data_path', os.path.join(folder, 'kg'), '--model', 'RotatE',
            '-n', '8', '-b', '32', '-d', '16', '-g', '6.0', '-a', '1.0', '-adv', '-lr', '0.05', '--max_steps', '40',
            '--valid_steps', '20', '--log_steps', '20', '--save_checkpoint_steps', '20', '-save', save, '-de']))
        resumed = main(parse_args(cuda + [
            '--do_train', '--do_test', '--init_checkpoint', save, '-n', '8', '-b', '32', '-g', '6.0', '-adv',
            '--max_steps', '60', '--log_steps', '10', '--save_checkpoint_steps', '1000', '-save', save + '_more']))
        countries = main(parse_args(cuda + [
            '--do_train', '--do_test', '--countries', '--data_path', os.path.join(folder, 'countries'),
            '--model', 'TransE', '-n', '8', '-b', '32', '-d', '8', '-g', '6.0', '-lr', '0.05', '--max_steps', '12',
            '--log_steps', '6', '-save', os.path.join(folder, 'TransE_countries')]))
    finally:
        logging.getLogger('').handlers.clear()
        shutil.rmtree(folder, ignore_errors=True)
    print('done: RotatE test MRR %.3f (HITS@10 %.3f), resumed MRR %.3f, TransE countries AUC-PR %.3f' % (
        first['MRR'], first['HITS@10'], resumed['MRR'], countries['auc_pr']))

if __name__ == '__main__':
    run()
