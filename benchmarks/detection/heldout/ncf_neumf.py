"""Trains neural collaborative filtering recommenders (GMF, MLP, then NeuMF initialised from the two saved
pre-trained models) with sampled negatives, evaluating HR@K and NDCG@K by leave-one-out ranking each epoch.

Modeled on: guoyang9/NCF, main.py, model.py, evaluate.py, data_utils.py and config.py
(https://github.com/guoyang9/NCF/blob/89ff06ffcd2bca6bb773b54925265c208a28d318/main.py,
https://github.com/guoyang9/NCF/blob/89ff06ffcd2bca6bb773b54925265c208a28d318/model.py,
https://github.com/guoyang9/NCF/blob/89ff06ffcd2bca6bb773b54925265c208a28d318/evaluate.py,
https://github.com/guoyang9/NCF/blob/89ff06ffcd2bca6bb773b54925265c208a28d318/data_utils.py,
https://github.com/guoyang9/NCF/blob/89ff06ffcd2bca6bb773b54925265c208a28d318/config.py).

Kept: `cudnn.benchmark = True`; for 'NeuMF-pre', the whole pre-trained GMF and MLP models read back with
`torch.load(path)` (they come back on the device they were saved from) and handed to `NCF.__init__`, whose
`_init_weight_` copies them into the new CPU model with `.weight.data.copy_(...)`, `torch.cat` of the two predict
weights and the summed biases, before `model.cuda()`; the loss and the optimizer (SGD for NeuMF-pre, else Adam) made
after the move; `model.train()` at each epoch start, `train_loader.dataset.ng_sample()`, `user.cuda()`,
`item.cuda()`, `label.float().cuda()`, `model.zero_grad()`; `model.eval()` then `evaluate.metrics`, which moves
`user`, `item` with `.cuda()`, runs the model without `torch.no_grad()` (as written), `torch.topk`, `torch.take(item,
indices).cpu().numpy().tolist()` and `item[0].item()`; the best model saved whole with `torch.save(model, ...)`.
The author calls `.cuda()` unconditionally; here every `.cuda()` is under `if use_cuda:` with `use_cuda =
torch.cuda.is_available()`. `torch.load` of a whole model gets `weights_only=False`, which torch >= 2.6 needs.

Shrunk: a synthetic implicit-feedback data set (60 users in 4 taste groups, 80 items, 12 interactions per user, the
last one held out) instead of MovieLens-1M files read with pandas/scipy (a set of pairs replaces the dok_matrix);
factor_num 8, 2 MLP layers, batch 64, 19 test negatives, top_k 5, 4 epochs per model; `num_workers=0`; the
`CUDA_VISIBLE_DEVICES` line and tensorboardX are left out; `config` is a namespace and `config.model_path` a
temporary directory.
"""
import argparse
import os
import random
import tempfile
import time

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
import torch.utils.data as data


# ----------------------------------------------------------------------------- model.py

class NCF(nn.Module):
    def __init__(self, user_num, item_num, factor_num, num_layers, dropout, model, GMF_model=None, MLP_model=None):
        super(NCF, self).__init__()
        self.dropout = dropout
        self.model = model
        self.GMF_model = GMF_model
        self.MLP_model = MLP_model

        self.embed_user_GMF = nn.Embedding(user_num, factor_num)
        self.embed_item_GMF = nn.Embedding(item_num, factor_num)
        self.embed_user_MLP = nn.Embedding(user_num, factor_num * (2 ** (num_layers - 1)))
        self.embed_item_MLP = nn.Embedding(item_num, factor_num * (2 ** (num_layers - 1)))

        MLP_modules = []
        for i in range(num_layers):
            input_size = factor_num * (2 ** (num_layers - i))
            MLP_modules.append(nn.Dropout(p=self.dropout))
            MLP_modules.append(nn.Linear(input_size, input_size // 2))
            MLP_modules.append(nn.ReLU())
        self.MLP_layers = nn.Sequential(*MLP_modules)

        if self.model in ['MLP', 'GMF']:
            predict_size = factor_num
        else:
            predict_size = factor_num * 2
        self.predict_layer = nn.Linear(predict_size, 1)

        self._init_weight_()

    def _init_weight_(self):
        if not self.model == 'NeuMF-pre':
            nn.init.normal_(self.embed_user_GMF.weight, std=0.01)
            nn.init.normal_(self.embed_user_MLP.weight, std=0.01)
            nn.init.normal_(self.embed_item_GMF.weight, std=0.01)
            nn.init.normal_(self.embed_item_MLP.weight, std=0.01)

            for m in self.MLP_layers:
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
            nn.init.kaiming_uniform_(self.predict_layer.weight, a=1, nonlinearity='sigmoid')

            for m in self.modules():
                if isinstance(m, nn.Linear) and m.bias is not None:
                    m.bias.data.zero_()
        else:
            # embedding layers
            self.embed_user_GMF.weight.data.copy_(self.GMF_model.embed_user_GMF.weight)
            self.embed_item_GMF.weight.data.copy_(self.GMF_model.embed_item_GMF.weight)
            self.embed_user_MLP.weight.data.copy_(self.MLP_model.embed_user_MLP.weight)
            self.embed_item_MLP.weight.data.copy_(self.MLP_model.embed_item_MLP.weight)

            # mlp layers
            for (m1, m2) in zip(self.MLP_layers, self.MLP_model.MLP_layers):
                if isinstance(m1, nn.Linear) and isinstance(m2, nn.Linear):
                    m1.weight.data.copy_(m2.weight)
                    m1.bias.data.copy_(m2.bias)

            # predict layers
            predict_weight = torch.cat([self.GMF_model.predict_layer.weight,
                                        self.MLP_model.predict_layer.weight], dim=1)
            precit_bias = self.GMF_model.predict_layer.bias + self.MLP_model.predict_layer.bias

            self.predict_layer.weight.data.copy_(0.5 * predict_weight)
            self.predict_layer.bias.data.copy_(0.5 * precit_bias)

    def forward(self, user, item):
        if not self.model == 'MLP':
            embed_user_GMF = self.embed_user_GMF(user)
            embed_item_GMF = self.embed_item_GMF(item)
            output_GMF = embed_user_GMF * embed_item_GMF
        if not self.model == 'GMF':
            embed_user_MLP = self.embed_user_MLP(user)
            embed_item_MLP = self.embed_item_MLP(item)
            interaction = torch.cat((embed_user_MLP, embed_item_MLP), -1)
            output_MLP = self.MLP_layers(interaction)

        if self.model == 'GMF':
            concat = output_GMF
        elif self.model == 'MLP':
            concat = output_MLP
        else:
            concat = torch.cat((output_GMF, output_MLP), -1)

        prediction = self.predict_layer(concat)
        return prediction.view(-1)


# ----------------------------------------------------------------------------- evaluate.py

use_cuda = torch.cuda.is_available()


def hit(gt_item, pred_items):
    if gt_item in pred_items:
        return 1
    return 0


def ndcg(gt_item, pred_items):
    if gt_item in pred_items:
        index = pred_items.index(gt_item)
        return np.reciprocal(np.log2(index + 2))
    return 0


def metrics(model, test_loader, top_k):
    HR, NDCG = [], []

    for user, item, label in test_loader:
        if use_cuda:
            user = user.cuda()
            item = item.cuda()

        predictions = model(user, item)
        _, indices = torch.topk(predictions, top_k)
        recommends = torch.take(item, indices).cpu().numpy().tolist()

        gt_item = item[0].item()
        HR.append(hit(gt_item, recommends))
        NDCG.append(ndcg(gt_item, recommends))

    return np.mean(HR), np.mean(NDCG)


# ----------------------------------------------------------------------------- data_utils.py

def load_all(test_num_ng, user_num=60, item_num=80, per_user=12, seed=0):
    """Synthetic stand-in for the MovieLens files: users prefer the items of their taste group."""
    rng = np.random.RandomState(seed)
    groups = 4
    train_data, test_data = [], []
    train_mat = set()
    for u in range(user_num):
        g = u % groups
        liked = [i for i in range(item_num) if i % groups == g]
        others = [i for i in range(item_num) if i % groups != g]
        n_liked = per_user - 2
        items = list(rng.choice(liked, n_liked, replace=False)) + list(rng.choice(others, 2, replace=False))
        rng.shuffle(items)
        for i in items[:-1]:
            train_data.append([u, int(i)])
            train_mat.add((u, int(i)))
        test_item = int(items[-1])
        test_data.append([u, test_item])
        seen = set(items)
        negatives = [i for i in range(item_num) if i not in seen]
        for i in rng.choice(negatives, test_num_ng, replace=False):
            test_data.append([u, int(i)])
    return train_data, test_data, user_num, item_num, train_mat


class NCFData(data.Dataset):
    def __init__(self, features, num_item, train_mat=None, num_ng=0, is_training=None):
        super(NCFData, self).__init__()
        self.features_ps = features
        self.num_item = num_item
        self.train_mat = train_mat
        self.num_ng = num_ng
        self.is_training = is_training
        self.labels = [0 for _ in range(len(features))]

    def ng_sample(self):
        assert self.is_training, 'no need to sampling when testing'

        self.features_ng = []
        for x in self.features_ps:
            u = x[0]
            for t in range(self.num_ng):
                j = np.random.randint(self.num_item)
                while (u, j) in self.train_mat:
                    j = np.random.randint(self.num_item)
                self.features_ng.append([u, j])

        labels_ps = [1 for _ in range(len(self.features_ps))]
        labels_ng = [0 for _ in range(len(self.features_ng))]

        self.features_fill = self.features_ps + self.features_ng
        self.labels_fill = labels_ps + labels_ng

    def __len__(self):
        return (self.num_ng + 1) * len(self.labels)

    def __getitem__(self, idx):
        features = self.features_fill if self.is_training else self.features_ps
        labels = self.labels_fill if self.is_training else self.labels

        user = features[idx][0]
        item = features[idx][1]
        label = labels[idx]
        return user, item, label


# ----------------------------------------------------------------------------- main.py

def main(args, config):
    cudnn.benchmark = True

    ############################## PREPARE DATASET ##########################
    train_data, test_data, user_num, item_num, train_mat = load_all(args.test_num_ng)

    train_dataset = NCFData(train_data, item_num, train_mat, args.num_ng, True)
    test_dataset = NCFData(test_data, item_num, train_mat, 0, False)
    train_loader = data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True, num_workers=0)
    test_loader = data.DataLoader(test_dataset, batch_size=args.test_num_ng + 1, shuffle=False, num_workers=0)

    ########################### CREATE MODEL #################################
    if config.model == 'NeuMF-pre':
        assert os.path.exists(config.GMF_model_path), 'lack of GMF model'
        assert os.path.exists(config.MLP_model_path), 'lack of MLP model'
        GMF_model = torch.load(config.GMF_model_path, weights_only=False)
        MLP_model = torch.load(config.MLP_model_path, weights_only=False)
    else:
        GMF_model = None
        MLP_model = None

    model = NCF(user_num, item_num, args.factor_num, args.num_layers, args.dropout, config.model, GMF_model,
                MLP_model)
    if use_cuda:
        model.cuda()
    loss_function = nn.BCEWithLogitsLoss()

    if config.model == 'NeuMF-pre':
        optimizer = optim.SGD(model.parameters(), lr=args.lr)
    else:
        optimizer = optim.Adam(model.parameters(), lr=args.lr)

    ########################### TRAINING #####################################
    count, best_hr = 0, 0
    for epoch in range(args.epochs):
        model.train()  # Enable dropout (if have).
        start_time = time.time()
        train_loader.dataset.ng_sample()
        loss_sum, n = 0.0, 0

        for user, item, label in train_loader:
            if use_cuda:
                user = user.cuda()
                item = item.cuda()
                label = label.float().cuda()
            else:
                label = label.float()

            model.zero_grad()
            prediction = model(user, item)
            loss = loss_function(prediction, label)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
            n += 1
            count += 1

        model.eval()
        HR, NDCG = metrics(model, test_loader, args.top_k)

        elapsed_time = time.time() - start_time
        print("[{}] epoch {:03d} loss {:.4f}, {} steps".format(config.model, epoch, loss_sum / n, count))
        print("HR: {:.3f}\tNDCG: {:.3f}".format(np.mean(HR), np.mean(NDCG)))

        if HR > best_hr:
            best_hr, best_ndcg, best_epoch = HR, NDCG, epoch
            if args.out:
                if not os.path.exists(config.model_path):
                    os.mkdir(config.model_path)
                torch.save(model, '{}{}.pth'.format(config.model_path, config.model))

    print("End. Best epoch {:03d}: HR = {:.3f}, NDCG = {:.3f}".format(best_epoch, best_hr, best_ndcg))
    return best_hr, best_ndcg


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    with tempfile.TemporaryDirectory() as directory:
        model_path = os.path.join(directory, 'models') + os.sep
        results = {}
        for name, lr in (('GMF', 0.01), ('MLP', 0.01), ('NeuMF-pre', 0.05)):
            config = argparse.Namespace(dataset='synthetic', model=name, model_path=model_path,
                                        GMF_model_path=model_path + 'GMF.pth', MLP_model_path=model_path + 'MLP.pth',
                                        NeuMF_model_path=model_path + 'NeuMF.pth')
            args = argparse.Namespace(lr=lr, dropout=0.0, batch_size=64, epochs=4, top_k=5, factor_num=8,
                                      num_layers=2, num_ng=4, test_num_ng=19, out=True, gpu="0")
            results[name] = main(args, config)
    print("done: " + ", ".join("{} HR {:.3f} NDCG {:.3f}".format(k, *v) for k, v in results.items()))
