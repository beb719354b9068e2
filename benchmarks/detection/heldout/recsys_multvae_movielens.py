"""Trains jaywonchung/BERT4Rec-VAE-Pytorch's Mult-VAE (collaborative filtering, KL weight beta annealed in training) on
a synthetic MovieLens-1m, searching the best beta (`train_vae_search_beta`), then with a given beta
(`train_vae_give_beta`): `main.py`'s `train()`, batches moved with `x.to(self.device)`, Recall@k / NDCG@k validation,
the checkpoint loggers, and `trainer.test()` reloading `best_acc_model.pth` for the test users.

Modeled on: jaywonchung/BERT4Rec-VAE-Pytorch, main.py, options.py, templates.py, config.py, utils.py, loggers.py,
datasets/base.py, dataloaders/ae.py, models/vae.py, trainers/{base,vae,utils}.py at commit
f66f2534ebfd937778c7174b5f9f216efdebe5de.
Kept: `args.device` / `num_gpu` / `device_idx` and `set_up_gpu` (`CUDA_VISIBLE_DEVICES` from `device_idx`);
`fix_random_seed_as` (`torch.cuda.manual_seed_all`, cudnn flags) in the model constructor; `AbstractTrainer`
(`model.to(self.device)`, `nn.DataParallel` when `num_gpu > 1`, `batch = [x.to(self.device) for x in batch]` (an AE
batch is one tensor: a list of its rows), `loss.item()`, eval under `torch.no_grad()`, `_create_state_dict` with
`.module` when parallel, `test` doing `torch.load(...).get('model_state_dict')` with no `map_location`); `VAETrainer`
(`torch.stack(batch)`, `beta` annealed only while `self.model.training`, `logits[inputs!=0] = -float("Inf")`, best-beta
search); `recalls_and_ndcgs_for_ks` (`torch.Tensor([k]).to(labels.device)`, `weights.to(hits.device)`, host-built idcg
`.to(dcg.device)`, `.cpu().item()`); `VAEModel` (`torch.randn_like`); `AEDataloader` (`pin_memory=True`), the AE
datasets, the pickled `holdout` split; `RecentModelLogger` / `BestModelLogger`; `AverageMeterSet`.
Changed to run here: `args.device` is 'cuda' only when `torch.cuda.is_available()`; options become a `Namespace` plus
the templates, the `input()` prompts are answered in code; no pandas or download (`load_ratings_df` draws rows); no
tensorboard graph printers or tqdm; the DAE and BERT4Rec paths are left out; files in a temporary folder;
`CUDA_VISIBLE_DEVICES` is restored at the end. Shrunk: 420 users x 160 movies, eval_set_size 40, batch 32, hidden 48,
latent 16, 1 hidden layer, 3 epochs, total_anneal_steps 24.
"""
import json
import os
import pickle
import pprint as pp
import random
import tempfile
from abc import ABCMeta
from argparse import Namespace
from datetime import date
from pathlib import Path

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data_utils
from scipy import sparse

ROOT = tempfile.mkdtemp(prefix='bert4rec_vae_')
RAW_DATASET_ROOT_FOLDER = os.path.join(ROOT, 'Data')  # config.py
STATE_DICT_KEY, OPTIMIZER_STATE_DICT_KEY = 'model_state_dict', 'optimizer_state_dict'

# ---------------------------------------------------------------------------- utils.py
def setup_train(args):
    set_up_gpu(args)
    export_root = create_experiment_export_folder(args)
    with open(os.path.join(export_root, 'config.json'), 'w') as outfile:  # export_experiments_config_as_json
        json.dump(vars(args), outfile, indent=2)
    pp.pprint({k: v for k, v in vars(args).items() if v is not None}, width=1)
    return export_root

def create_experiment_export_folder(args):
    experiment_dir, experiment_description = args.experiment_dir, args.experiment_description
    os.makedirs(experiment_dir, exist_ok=True)
    experiment_path = os.path.join(experiment_dir, (experiment_description + "_" + str(date.today())))
    idx = 0  # get_name_of_experiment_path / _get_experiment_index
    while os.path.exists(experiment_path + "_" + str(idx)):
        idx += 1
    experiment_path = experiment_path + "_" + str(idx)
    os.mkdir(experiment_path)
    print('Folder created: ' + os.path.abspath(experiment_path))
    return experiment_path

def fix_random_seed_as(random_seed):
    random.seed(random_seed)
    torch.manual_seed(random_seed)
    torch.cuda.manual_seed_all(random_seed)
    np.random.seed(random_seed)
    cudnn.deterministic = True
    cudnn.benchmark = False

def set_up_gpu(args):
    os.environ['CUDA_VISIBLE_DEVICES'] = args.device_idx
    args.num_gpu = len(args.device_idx.split(","))

class AverageMeterSet(object):
    def __init__(self, meters=None):
        self.meters = meters if meters else {}

    def __getitem__(self, key):
        if key not in self.meters:
            meter = AverageMeter()
            meter.update(0)
            return meter
        return self.meters[key]

    def update(self, name, value, n=1):
        if name not in self.meters:
            self.meters[name] = AverageMeter()
        self.meters[name].update(value, n)

    def averages(self):
        return {name: meter.avg for name, meter in self.meters.items()}

class AverageMeter(object):
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val, self.count + n
        self.avg = self.sum / self.count

# ---------------------------------------------------------------------------- loggers.py
def save_state_dict(state_dict, path, filename):
    torch.save(state_dict, os.path.join(path, filename))

class LoggerService(object):
    def __init__(self, train_loggers=None, val_loggers=None):
        self.train_loggers, self.val_loggers = train_loggers or [], val_loggers or []

    def complete(self, log_data):
        for logger in self.train_loggers + self.val_loggers:
            logger.complete(**log_data)

    def log_val(self, log_data):
        for logger in self.val_loggers:
            logger.log(**log_data)

class RecentModelLogger(object):  # loggers derive from AbstractBaseLogger (log / complete)
    def __init__(self, checkpoint_path, filename='checkpoint-recent.pth'):
        self.checkpoint_path = checkpoint_path
        if not os.path.exists(self.checkpoint_path):
            os.mkdir(self.checkpoint_path)
        self.recent_epoch, self.filename = None, filename

    def log(self, *args, **kwargs):
        epoch = kwargs['epoch']
        if self.recent_epoch != epoch:
            self.recent_epoch = epoch
            state_dict = kwargs['state_dict']
            state_dict['epoch'] = kwargs['epoch']
            save_state_dict(state_dict, self.checkpoint_path, self.filename)

    def complete(self, *args, **kwargs):
        save_state_dict(kwargs['state_dict'], self.checkpoint_path, self.filename + '.final')

class BestModelLogger(object):
    def __init__(self, checkpoint_path, metric_key='mean_iou', filename='best_acc_model.pth'):
        self.checkpoint_path = checkpoint_path
        if not os.path.exists(self.checkpoint_path):
            os.mkdir(self.checkpoint_path)
        self.best_metric, self.metric_key, self.filename = 0., metric_key, filename

    def complete(self, *args, **kwargs):
        pass

    def log(self, *args, **kwargs):
        current_metric = kwargs[self.metric_key]
        if self.best_metric < current_metric:
            print("Update Best {} Model at {}".format(self.metric_key, kwargs['epoch']))
            self.best_metric = current_metric
            save_state_dict(kwargs['state_dict'], self.checkpoint_path, self.filename)

# ---------------------------------------------------------------------------- datasets/base.py, datasets/ml_1m.py
class ML1MDataset(object):
    def __init__(self, args):
        self.args = args
        self.min_rating, self.min_uc, self.min_sc, self.split = args.min_rating, args.min_uc, args.min_sc, args.split

    code = staticmethod(lambda: 'ml-1m')

    def load_ratings_df(self, num_users=420, num_items=160, clusters=4):
        """Synthetic ratings.dat rows (uid, sid, rating, timestamp); a user's cluster likes part of the catalogue."""
        rng = np.random.RandomState(5)
        taste = rng.dirichlet(np.full(num_items, 0.15), size=clusters)
        return [(uid, sid, rng.randint(1, 6), 978300000 + rng.randint(10 ** 6)) for uid in range(1, num_users + 1)
                for sid in rng.choice(num_items, size=rng.randint(6, 30), replace=False, p=taste[uid % clusters]) + 1]

    def load_dataset(self):
        self.preprocess()
        return pickle.load(self._get_preprocessed_dataset_path().open('rb'))

    def preprocess(self):
        dataset_path = self._get_preprocessed_dataset_path()
        if dataset_path.is_file():
            print('Already preprocessed. Skip preprocessing')
            return
        dataset_path.parent.mkdir(parents=True, exist_ok=True)  # (maybe_download_raw_dataset: nothing to fetch)
        df = [row for row in self.load_ratings_df() if row[2] >= self.min_rating]  # make_implicit
        user_sizes = np.bincount([row[0] for row in df])  # filter_triplets (min_sc is 0)
        df = [row for row in df if user_sizes[row[0]] >= self.min_uc]
        umap = {u: i for i, u in enumerate(sorted(set(row[0] for row in df)))}  # densify_index
        smap = {s: i for i, s in enumerate(sorted(set(row[1] for row in df)))}
        df = [(umap[u], smap[s], r, t) for u, s, r, t in df]
        train, val, test = self.split_df(df, len(umap))
        with dataset_path.open('wb') as f:
            pickle.dump({'train': train, 'val': val, 'test': test, 'umap': umap, 'smap': smap}, f)

    def split_df(self, df, user_count):  # self.args.split == 'holdout'
        np.random.seed(self.args.dataset_split_seed)
        eval_set_size = self.args.eval_set_size
        permuted_index = np.random.permutation(user_count)
        train_user_index = set(permuted_index[:-2 * eval_set_size])
        val_user_index = set(permuted_index[-2 * eval_set_size:-eval_set_size])
        train, val, test = {}, {}, {}
        for u, s, _, _ in df:
            part = train if u in train_user_index else (val if u in val_user_index else test)
            part.setdefault(u, []).append(s)
        return train, val, test

    def _get_preprocessed_folder_path(self):
        folder_name = '{}_min_rating{}-min_uc{}-min_sc{}-split{}' \
            .format(self.code(), self.min_rating, self.min_uc, self.min_sc, self.split)
        return Path(RAW_DATASET_ROOT_FOLDER).joinpath('preprocessed').joinpath(folder_name)

    def _get_preprocessed_dataset_path(self):
        return self._get_preprocessed_folder_path().joinpath('dataset.pkl')

# ---------------------------------------------------------------------------- dataloaders/base.py, dataloaders/ae.py
class AEDataloader(object):
    def __init__(self, args, dataset):
        self.args = args
        dataset = dataset.load_dataset()
        self.train, self.val, self.test = dataset['train'], dataset['val'], dataset['test']
        self.umap, self.smap = dataset['umap'], dataset['smap']
        self.user_count, self.item_count = len(self.umap), len(self.smap)
        # For autoencoders, we should remove users from val/test sets that rated items NOT in the training set
        unique_items = set()
        for items in self.train.values():
            unique_items.update(items)
        self.val = {user: items for user, items in self.val.items() if all(item in unique_items for item in items)}
        self.test = {user: items for user, items in self.test.items() if all(item in unique_items for item in items)}
        self.smap = {s: i for i, s in enumerate(unique_items)}
        remap = lambda items: [self.smap[item] for item in items]
        self.train = {user: remap(items) for user, items in self.train.items()}
        self.val = {user: remap(items) for user, items in self.val.items()}
        self.test = {user: remap(items) for user, items in self.test.items()}
        del self.umap, self.user_count
        self.item_count = len(unique_items)
        args.num_items = self.item_count

    def get_pytorch_dataloaders(self):
        train_loader = data_utils.DataLoader(AETrainDataset(self.train, item_count=self.item_count),
                                             batch_size=self.args.train_batch_size, shuffle=True, pin_memory=True)
        return train_loader, self._get_eval_loader(mode='val'), self._get_eval_loader(mode='test')

    def _get_eval_loader(self, mode):
        batch_size = self.args.val_batch_size if mode == 'val' else self.args.test_batch_size
        dataset = AEEvalDataset(self.val if mode == 'val' else self.test, item_count=self.item_count)
        return data_utils.DataLoader(dataset, batch_size=batch_size, shuffle=False, pin_memory=True)

class AETrainDataset(data_utils.Dataset):
    def __init__(self, user2items, item_count):
        # Row / column indices for sparse matrix
        user_row = [user for user, useritem in enumerate(user2items.values()) for _ in range(len(useritem))]
        item_col = [item for useritem in user2items.values() for item in useritem]
        sparse_data = sparse.csr_matrix((np.ones(len(user_row)), (user_row, item_col)),
                                        dtype='float64', shape=(len(user2items), item_count))
        self.data = torch.FloatTensor(sparse_data.toarray())

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, index):
        return self.data[index]

class AEEvalDataset(data_utils.Dataset):
    def __init__(self, user2items, item_count):
        input_list, label_list = self.split_input_label_proportion(user2items)
        input_user_row = np.array([user for user, items in enumerate(input_list) for _ in range(len(items))])
        label_user_row = np.array([user for user, items in enumerate(label_list) for _ in range(len(items))])
        input_item_col, label_item_col = np.hstack(input_list), np.hstack(label_list)
        sparse_input = sparse.csr_matrix((np.ones(len(input_user_row)), (input_user_row, input_item_col)),
                                         dtype='float64', shape=(len(input_list), item_count))
        sparse_label = sparse.csr_matrix((np.ones(len(label_user_row)), (label_user_row, label_item_col)),
                                         dtype='float64', shape=(len(label_list), item_count))
        self.input_data = torch.FloatTensor(sparse_input.toarray())
        self.label_data = torch.FloatTensor(sparse_label.toarray())

    def split_input_label_proportion(self, data, label_prop=0.2):
        input_list, label_list = [], []
        for items in data.values():
            items = np.array(items)
            if len(items) * label_prop >= 1:
                # ith item => "chosen for label" if choose_as_label[i] is True else "chosen for input"
                choose_as_label = np.zeros(len(items), dtype='bool')
                choose_as_label[np.random.choice(len(items), size=int(label_prop * len(items)), replace=False)] = True
                input_list.append(items[np.logical_not(choose_as_label)])
                label_list.append(items[choose_as_label])
            else:
                input_list.append(items)
                label_list.append(np.array([]))
        return input_list, label_list

    def __len__(self):
        return len(self.input_data)

    def __getitem__(self, index):
        return self.input_data[index], self.label_data[index]

# ---------------------------------------------------------------------------- models/vae.py
class VAEModel(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        fix_random_seed_as(args.model_init_seed)
        self.latent_dim = args.vae_latent_dim
        self.input_dropout = nn.Dropout(p=args.vae_dropout)
        dims = [args.vae_hidden_dim] * 2 * args.vae_num_hidden
        dims = [args.num_items] + dims + [args.vae_latent_dim * 2]
        encoder_modules, decoder_modules = [], []
        for i in range(len(dims)//2):
            encoder_modules.append(nn.Linear(dims[2*i], dims[2*i+1]))
            if i == 0:
                decoder_modules.append(nn.Linear(dims[-1]//2, dims[-2]))
            else:
                decoder_modules.append(nn.Linear(dims[-2*i-1], dims[-2*i-2]))
        self.encoder = nn.ModuleList(encoder_modules)
        self.decoder = nn.ModuleList(decoder_modules)
        self.encoder.apply(self.weight_init)
        self.decoder.apply(self.weight_init)

    def weight_init(self, m):
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight)
            m.bias.data.zero_()

    def forward(self, x):
        x = F.normalize(x)
        x = self.input_dropout(x)
        for i, layer in enumerate(self.encoder):
            x = layer(x)
            if i != len(self.encoder) - 1:
                x = torch.tanh(x)
        mu, logvar = x[:, :self.latent_dim], x[:, self.latent_dim:]
        if self.training:  # since log(var) = log(sigma^2) = 2*log(sigma)
            sigma = torch.exp(0.5 * logvar)
            eps = torch.randn_like(sigma)
            x = mu + eps * sigma
        else:
            x = mu
        for i, layer in enumerate(self.decoder):
            x = layer(x)
            if i != len(self.decoder) - 1:
                x = torch.tanh(x)
        return x, mu, logvar

# ---------------------------------------------------------------------------- trainers/utils.py, trainers/base.py
def recalls_and_ndcgs_for_ks(scores, labels, ks):
    metrics = {}
    answer_count = labels.sum(1)
    labels_float = labels.float()
    rank = (-scores).argsort(dim=1)
    cut = rank
    for k in sorted(ks, reverse=True):
        cut = cut[:, :k]
        hits = labels_float.gather(1, cut)
        metrics['Recall@%d' % k] = \
            (hits.sum(1) / torch.min(torch.Tensor([k]).to(labels.device), labels.sum(1).float())).mean().cpu().item()
        position = torch.arange(2, 2+k)
        weights = 1 / torch.log2(position.float())
        dcg = (hits * weights.to(hits.device)).sum(1)
        idcg = torch.Tensor([weights[:min(int(n), k)].sum() for n in answer_count]).to(dcg.device)
        ndcg = (dcg / idcg).mean()
        metrics['NDCG@%d' % k] = ndcg.cpu().item()
    return metrics

class AbstractTrainer(metaclass=ABCMeta):
    def __init__(self, args, model, train_loader, val_loader, test_loader, export_root):
        self.args = args
        self.device = args.device
        self.model = model.to(self.device)
        self.is_parallel = args.num_gpu > 1
        if self.is_parallel:
            self.model = nn.DataParallel(self.model)
        self.train_loader, self.val_loader, self.test_loader = train_loader, val_loader, test_loader
        self.optimizer = self._create_optimizer()
        if args.enable_lr_schedule:
            self.lr_scheduler = optim.lr_scheduler.StepLR(self.optimizer, step_size=args.decay_step, gamma=args.gamma)
        self.num_epochs, self.metric_ks, self.best_metric = args.num_epochs, args.metric_ks, args.best_metric
        self.export_root = export_root
        self.writer, self.train_loggers, self.val_loggers = self._create_loggers()
        self.add_extra_loggers()
        self.logger_service = LoggerService(self.train_loggers, self.val_loggers)

    def train(self):
        accum_iter = 0
        self.validate(0, accum_iter)
        for epoch in range(self.num_epochs):
            accum_iter = self.train_one_epoch(epoch, accum_iter)
            self.validate(epoch, accum_iter)
        self.logger_service.complete({'state_dict': (self._create_state_dict())})

    def train_one_epoch(self, epoch, accum_iter):
        self.model.train()
        if self.args.enable_lr_schedule:
            self.lr_scheduler.step()
        average_meter_set = AverageMeterSet()
        for batch_idx, batch in enumerate(self.train_loader):
            batch_size = batch[0].size(0)
            batch = [x.to(self.device) for x in batch]
            self.optimizer.zero_grad()
            loss = self.calculate_loss(batch)
            loss.backward()
            self.optimizer.step()
            average_meter_set.update('loss', loss.item())
            accum_iter += batch_size  # (+ tensorboard logging every log_period_as_iter)
        print('Epoch {}, loss {:.3f} '.format(epoch+1, average_meter_set['loss'].avg))
        return accum_iter

    def validate(self, epoch, accum_iter):
        self.model.eval()
        average_meter_set = AverageMeterSet()
        with torch.no_grad():
            for batch_idx, batch in enumerate(self.val_loader):
                batch = [x.to(self.device) for x in batch]
                metrics = self.calculate_metrics(batch)
                for k, v in metrics.items():
                    average_meter_set.update(k, v)
            print(self._describe(average_meter_set, 'Val'))
            log_data = {'state_dict': (self._create_state_dict()), 'epoch': epoch+1, 'accum_iter': accum_iter}
            log_data.update(average_meter_set.averages())
            self.log_extra_val_info(log_data)
            self.logger_service.log_val(log_data)

    def test(self):
        print('Test best model with test set!')
        best_model = torch.load(os.path.join(self.export_root, 'models', 'best_acc_model.pth')).get('model_state_dict')
        self.model.load_state_dict(best_model)
        self.model.eval()
        average_meter_set = AverageMeterSet()
        with torch.no_grad():
            for batch_idx, batch in enumerate(self.test_loader):
                batch = [x.to(self.device) for x in batch]
                metrics = self.calculate_metrics(batch)
                for k, v in metrics.items():
                    average_meter_set.update(k, v)
            print(self._describe(average_meter_set, 'Test'))
            average_metrics = average_meter_set.averages()
            with open(os.path.join(self.export_root, 'logs', 'test_metrics.json'), 'w') as f:
                json.dump(average_metrics, f, indent=4)

    def _describe(self, average_meter_set, prefix):  # the tqdm description
        description_metrics = ['NDCG@%d' % k for k in self.metric_ks[:3]] + \
                              ['Recall@%d' % k for k in self.metric_ks[:3]]
        return prefix + ': ' + ', '.join('%s %.3f' % (s.replace('NDCG', 'N').replace('Recall', 'R'),
                                                     average_meter_set[s].avg) for s in description_metrics)

    def _create_optimizer(self):
        args = self.args
        if args.optimizer.lower() == 'adam':
            return optim.Adam(self.model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        return optim.SGD(self.model.parameters(), lr=args.lr, weight_decay=args.weight_decay, momentum=args.momentum)

    def _create_loggers(self):
        root = Path(self.export_root)
        root.joinpath('logs').mkdir()  # SummaryWriter(root.joinpath('logs')) made it
        model_checkpoint = root.joinpath('models')  # (the tensorboard MetricGraphPrinters are left out)
        return None, [], [RecentModelLogger(model_checkpoint),
                          BestModelLogger(model_checkpoint, metric_key=self.best_metric)]

    def _create_state_dict(self):
        return {
            STATE_DICT_KEY: self.model.module.state_dict() if self.is_parallel else self.model.state_dict(),
            OPTIMIZER_STATE_DICT_KEY: self.optimizer.state_dict(),
        }

# ---------------------------------------------------------------------------- trainers/vae.py
class VAETrainer(AbstractTrainer):
    def __init__(self, args, model, train_loader, val_loader, test_loader, export_root):
        super().__init__(args, model, train_loader, val_loader, test_loader, export_root)
        self.__beta = 0.0  # Finding or using given optimal beta
        self.finding_best_beta = args.find_best_beta
        self.anneal_amount = 1.0 / args.total_anneal_steps
        if self.finding_best_beta:
            self.current_best_metric, self.anneal_cap = 0.0, 1.0
        else:
            self.anneal_cap = args.anneal_cap

    def add_extra_loggers(self):
        pass  # the 'Beta' / 'Best_beta' MetricGraphPrinters

    def log_extra_val_info(self, log_data):
        if self.finding_best_beta:
            log_data.update({'best_beta': self.best_beta})

    @property
    def beta(self):
        if self.model.training:
            self.__beta = min(self.__beta + self.anneal_amount, self.anneal_cap)
        return self.__beta

    def calculate_loss(self, batch):
        input_x = torch.stack(batch)
        recon_x, mu, logvar = self.model(input_x)
        CE = -torch.mean(torch.sum(F.log_softmax(recon_x, 1) * input_x, -1))
        KLD = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1))
        return CE + self.beta * KLD

    def calculate_metrics(self, batch):
        inputs, labels = batch
        logits, _, _ = self.model(inputs)
        logits[inputs!=0] = -float("Inf")  # IMPORTANT: remove items that were in the input
        metrics = recalls_and_ndcgs_for_ks(logits, labels, self.metric_ks)
        if self.finding_best_beta:
            if self.current_best_metric < metrics[self.best_metric]:
                self.current_best_metric = metrics[self.best_metric]
                self.best_beta = self.__beta
        return metrics

MODELS, TRAINERS = {'vae': VAEModel}, {'vae': VAETrainer}

# ---------------------------------------------------------------------------- main.py, options.py, templates.py
def train(args):
    export_root = setup_train(args)
    dataloader = AEDataloader(args, ML1MDataset(args))  # dataloader_factory
    train_loader, val_loader, test_loader = dataloader.get_pytorch_dataloaders()
    model = MODELS[args.model_code](args)  # model_factory
    trainer = TRAINERS[args.trainer_code](args, model, train_loader, val_loader, test_loader, export_root)
    trainer.train()
    test_model = ('y' == 'y')  # input('Test model with test dataset? y/[n]: ') == 'y'
    if test_model:
        trainer.test()

def parse_args(template):  # options.py's defaults + templates.set_template
    args = Namespace(template=template, dataloader_random_seed=0.0, decay_step=15, gamma=0.1, momentum=None,
                     experiment_dir=os.path.join(ROOT, 'experiments'), experiment_description=template)
    args.dataset_code = 'ml-' + '1' + 'm'  # input('Input 1 for ml-1m, 20 for ml-20m: ')
    args.min_rating = 0 if args.dataset_code == 'ml-1m' else 4
    args.min_uc, args.min_sc, args.split, args.dataset_split_seed, args.eval_set_size = 5, 0, 'holdout', 98765, 40
    args.dataloader_code = 'ae'
    args.train_batch_size = args.val_batch_size = args.test_batch_size = 32
    args.device, args.num_gpu, args.device_idx = 'cuda' if torch.cuda.is_available() else 'cpu', 1, '0'
    args.optimizer, args.lr, args.enable_lr_schedule, args.num_epochs = 'Adam', 1e-3, False, 3
    args.metric_ks = [1, 5, 10, 20, 50, 100]
    args.model_init_seed = 0
    args.trainer_code = args.model_code = 'vae'
    args.weight_decay, args.total_anneal_steps = 0.01, 24
    args.find_best_beta = args.template.startswith('train_vae_search_beta')
    args.anneal_cap = 0.342  # train_vae_give_beta
    args.best_metric = 'NDCG@10' if args.find_best_beta else 'NDCG@100'
    args.vae_num_hidden, args.vae_hidden_dim, args.vae_latent_dim, args.vae_dropout = 1, 48, 16, 0.5
    return args

if __name__ == '__main__':
    saved_visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    try:
        for template in ['train_vae_search_beta', 'train_vae_give_beta']:
            args = parse_args(template)
            train(args)  # args.mode == 'train'
    finally:
        os.environ.pop('CUDA_VISIBLE_DEVICES', None)
        if saved_visible is not None:
            os.environ['CUDA_VISIBLE_DEVICES'] = saved_visible
    print("done")
