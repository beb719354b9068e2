"""Trains a DeepFM click-through-rate model on Criteo-style rows with DeepCTR-Torch's Keras-like
`compile`/`fit`/`evaluate`/`predict` API (label-encoded categorical and min-max scaled dense fields, an Adagrad
optimizer passed to `compile` as in the FAQ, a validation split evaluated every epoch), saves the whole model with
`torch.save(model, ...)` and loads it back for the test predictions, then loads its `state_dict()` into a fresh model
built with `gpus=[0]` (the library's `DataParallel` path) and fine-tunes it for one more epoch.

Modeled on: shenweichen/DeepCTR-Torch, deepctr_torch/models/basemodel.py, deepctr_torch/models/deepfm.py,
deepctr_torch/inputs.py, deepctr_torch/layers/{core,interaction,utils}.py, examples/run_classification_criteo.py and
docs/source/FAQ.md at commit f6854257b1fc29caab655ce72c6b5528b7432574
(https://github.com/shenweichen/DeepCTR-Torch/blob/f6854257b1fc29caab655ce72c6b5528b7432574/deepctr_torch/models/basemodel.py
and the other files at the same commit).

Kept: the example's `device = 'cpu'`, `use_cuda = True`, `if use_cuda and torch.cuda.is_available(): device =
'cuda:0'`, passed to the model as a string; `BaseModel.__init__` (`reg_loss`/`aux_loss` made with `torch.zeros((1,),
device=device)`, the `gpus[0]` vs `device` check, `create_embedding_matrix(...).to(device)`, `Linear`'s dense weight
`torch.Tensor(...).to(device)`, `self.to(device)`) and DeepFM's (`DNN(..., device=device)`, `nn.Linear(...).to(
device)`, `self.to(device)`); `fit` (`validation_split` with `slice_arrays`, a `TensorDataset` of host arrays,
`DataParallel(model, device_ids=self.gpus)` with the batch size scaled when `gpus` is given, batches moved with
`x_train.to(self.device).float()`, the summed loss plus `get_regularization_loss()` plus `self.aux_loss`,
`loss.item()` per step, batch metrics on `y.cpu().data.numpy()`/`y_pred.cpu().data.numpy()`, `evaluate` on the
validation split, the history callback and `stop_training`); `predict` (`self.eval()`, `torch.no_grad()`,
`model(x).cpu().data.numpy()`); `get_regularization_loss` accumulating into `torch.zeros((1,), device=self.device)`;
`Linear.forward`'s `torch.zeros([X.shape[0], 1]).to(self.device)`; `input_from_feature_columns`, `DNN`, `FM`,
`PredictionLayer` (bias `Parameter(torch.zeros((1,)))`); the FAQ's `torch.save(model, ...)`/`torch.load(...)`,
`torch.save(model.state_dict(), ...)`/`load_state_dict(torch.load(...))` and `DeepFM(..., device=device, gpus=[...])`.

Changed to run here: tensorflow (Keras's `CallbackList`, `History`) and pandas are not installed: small stand-ins
for the two callbacks, and the table is a dict of numpy arrays; criteo_sample.txt is replaced by synthetic rows from
a hidden logistic model; `gpus` is `[0]` only when CUDA is available; `torch.load` of the whole model gets
`weights_only=False` (torch >= 2.6); files go to a temporary folder; only what DeepFM uses on sparse and dense fields
is kept (no `VarLenSparseFeat`, batch norm, Dice, `validation_data`, other optimizers/losses); docstrings and blank
lines inside functions are dropped.
Shrunk: 1600 rows with 8 sparse and 4 dense fields instead of 26 and 13; DNN (256, 128) -> (32, 16); batch size
64; 4 epochs instead of 10, then 1 epoch of fine-tuning.
"""
import os
import tempfile
import time
from collections import OrderedDict, namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as Data
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder, MinMaxScaler
from torch.utils.data import DataLoader
from tqdm import tqdm

DEFAULT_GROUP_NAME = "default_group"


class SparseFeat(namedtuple('SparseFeat', ['name', 'vocabulary_size', 'embedding_dim', 'use_hash', 'dtype',
                                           'embedding_name', 'group_name'])):
    __slots__ = ()
    def __new__(cls, name, vocabulary_size, embedding_dim=4, use_hash=False, dtype="int32", embedding_name=None,
                group_name=DEFAULT_GROUP_NAME):
        if embedding_name is None:
            embedding_name = name
        return super(SparseFeat, cls).__new__(cls, name, vocabulary_size, embedding_dim, use_hash, dtype,
                                              embedding_name, group_name)
    def __hash__(self):
        return self.name.__hash__()


class DenseFeat(namedtuple('DenseFeat', ['name', 'dimension', 'dtype'])):
    __slots__ = ()
    def __new__(cls, name, dimension=1, dtype="float32"):
        return super(DenseFeat, cls).__new__(cls, name, dimension, dtype)
    def __hash__(self):
        return self.name.__hash__()


def get_feature_names(feature_columns):
    features = build_input_features(feature_columns)
    return list(features.keys())


def build_input_features(feature_columns):
    # Return OrderedDict: {feature_name:(start, start+dimension)}
    features = OrderedDict()
    start = 0
    for feat in feature_columns:
        feat_name = feat.name
        if feat_name in features:
            continue
        if isinstance(feat, SparseFeat):
            features[feat_name] = (start, start + 1)
            start += 1
        elif isinstance(feat, DenseFeat):
            features[feat_name] = (start, start + feat.dimension)
            start += feat.dimension
        else:
            raise TypeError("Invalid feature column type,got", type(feat))
    return features


def concat_fun(inputs, axis=-1):
    return inputs[0] if len(inputs) == 1 else torch.cat(inputs, dim=axis)


def combined_dnn_input(sparse_embedding_list, dense_value_list):
    if len(sparse_embedding_list) > 0 and len(dense_value_list) > 0:
        sparse_dnn_input = torch.flatten(torch.cat(sparse_embedding_list, dim=-1), start_dim=1)
        dense_dnn_input = torch.flatten(torch.cat(dense_value_list, dim=-1), start_dim=1)
        return concat_fun([sparse_dnn_input, dense_dnn_input])
    elif len(sparse_embedding_list) > 0:
        return torch.flatten(torch.cat(sparse_embedding_list, dim=-1), start_dim=1)
    raise NotImplementedError


def create_embedding_matrix(feature_columns, init_std=0.0001, linear=False, sparse=False, device='cpu'):
    # Return nn.ModuleDict: for sparse features, {embedding_name: nn.Embedding}
    sparse_feature_columns = list(
        filter(lambda x: isinstance(x, SparseFeat), feature_columns)) if len(feature_columns) else []
    embedding_dict = nn.ModuleDict(
        {feat.embedding_name: nn.Embedding(feat.vocabulary_size, feat.embedding_dim if not linear else 1, sparse=sparse)
         for feat in sparse_feature_columns})
    for tensor in embedding_dict.values():
        nn.init.normal_(tensor.weight, mean=0, std=init_std)
    return embedding_dict.to(device)


def slice_arrays(arrays, start=None, stop=None):
    if isinstance(arrays, np.ndarray):
        arrays = [arrays]
    if len(arrays) == 1:
        return arrays[0][start:stop]
    return [None if x is None else x[start:stop] for x in arrays]


class DNN(nn.Module):
    def __init__(self, inputs_dim, hidden_units, activation='relu', l2_reg=0, dropout_rate=0, use_bn=False,
                 init_std=0.0001, dice_dim=3, seed=1024, device='cpu'):
        super(DNN, self).__init__()
        self.dropout_rate = dropout_rate
        self.dropout = nn.Dropout(dropout_rate)
        hidden_units = [inputs_dim] + list(hidden_units)
        self.linears = nn.ModuleList(
            [nn.Linear(hidden_units[i], hidden_units[i + 1]) for i in range(len(hidden_units) - 1)])
        self.activation_layers = nn.ModuleList([nn.ReLU(inplace=True) for i in range(len(hidden_units) - 1)])
        for name, tensor in self.linears.named_parameters():
            if 'weight' in name:
                nn.init.normal_(tensor, mean=0, std=init_std)
        self.to(device)

    def forward(self, inputs):
        deep_input = inputs
        for i in range(len(self.linears)):
            fc = self.activation_layers[i](self.linears[i](deep_input))
            deep_input = self.dropout(fc)
        return deep_input


class PredictionLayer(nn.Module):
    def __init__(self, task='binary', use_bias=True, **kwargs):
        super(PredictionLayer, self).__init__()
        self.use_bias = use_bias
        self.task = task
        if self.use_bias:
            self.bias = nn.Parameter(torch.zeros((1,)))

    def forward(self, X):
        output = X
        if self.use_bias:
            output += self.bias
        if self.task == "binary":
            output = torch.sigmoid(output)
        return output


class FM(nn.Module):
    """Factorization Machine models pairwise (order-2) feature interactions without linear term and bias."""

    def forward(self, inputs):
        fm_input = inputs
        square_of_sum = torch.pow(torch.sum(fm_input, dim=1, keepdim=True), 2)
        sum_of_square = torch.sum(fm_input * fm_input, dim=1, keepdim=True)
        cross_term = square_of_sum - sum_of_square
        cross_term = 0.5 * torch.sum(cross_term, dim=2, keepdim=False)
        return cross_term


class CallbackList(object):
    def __init__(self, callbacks):
        self.callbacks = list(callbacks)
    def set_model(self, model):
        self.model = model
        for c in self.callbacks:
            c.model = model
    def __getattr__(self, hook):  # on_train_begin, on_epoch_begin, on_epoch_end, on_train_end
        return lambda *args: [getattr(c, hook, lambda *a: None)(*args) for c in self.callbacks]


class History(object):
    def on_train_begin(self, logs=None):
        self.epoch, self.history = [], {}
    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class Linear(nn.Module):
    def __init__(self, feature_columns, feature_index, init_std=0.0001, device='cpu'):
        super(Linear, self).__init__()
        self.feature_index = feature_index
        self.device = device
        self.sparse_feature_columns = list(
            filter(lambda x: isinstance(x, SparseFeat), feature_columns)) if len(feature_columns) else []
        self.dense_feature_columns = list(
            filter(lambda x: isinstance(x, DenseFeat), feature_columns)) if len(feature_columns) else []
        self.embedding_dict = create_embedding_matrix(feature_columns, init_std, linear=True, sparse=False,
                                                      device=device)
        for tensor in self.embedding_dict.values():
            nn.init.normal_(tensor.weight, mean=0, std=init_std)
        if len(self.dense_feature_columns) > 0:
            self.weight = nn.Parameter(torch.Tensor(sum(fc.dimension for fc in self.dense_feature_columns), 1).to(
                device))
            torch.nn.init.normal_(self.weight, mean=0, std=init_std)

    def forward(self, X):
        sparse_embedding_list = [self.embedding_dict[feat.embedding_name](
            X[:, self.feature_index[feat.name][0]:self.feature_index[feat.name][1]].long()) for
            feat in self.sparse_feature_columns]
        dense_value_list = [X[:, self.feature_index[feat.name][0]:self.feature_index[feat.name][1]] for feat in
                            self.dense_feature_columns]
        linear_logit = torch.zeros([X.shape[0], 1]).to(self.device)
        if len(sparse_embedding_list) > 0:
            sparse_embedding_cat = torch.cat(sparse_embedding_list, dim=-1)
            linear_logit += torch.sum(sparse_embedding_cat, dim=-1, keepdim=False)
        if len(dense_value_list) > 0:
            linear_logit += torch.cat(dense_value_list, dim=-1).matmul(self.weight)
        return linear_logit


class BaseModel(nn.Module):
    def __init__(self, linear_feature_columns, dnn_feature_columns, l2_reg_linear=1e-5, l2_reg_embedding=1e-5,
                 init_std=0.0001, seed=1024, task='binary', device='cpu', gpus=None):
        super(BaseModel, self).__init__()
        torch.manual_seed(seed)
        self.dnn_feature_columns = dnn_feature_columns
        self.reg_loss = torch.zeros((1,), device=device)
        self.aux_loss = torch.zeros((1,), device=device)
        self.device = device
        self.gpus = gpus
        if gpus and str(self.gpus[0]) not in self.device:
            raise ValueError("`gpus[0]` should be the same gpu with `device`")
        self.feature_index = build_input_features(linear_feature_columns + dnn_feature_columns)
        self.embedding_dict = create_embedding_matrix(dnn_feature_columns, init_std, sparse=False, device=device)
        self.linear_model = Linear(linear_feature_columns, self.feature_index, device=device)
        self.regularization_weight = []
        self.add_regularization_weight(self.embedding_dict.parameters(), l2=l2_reg_embedding)
        self.add_regularization_weight(self.linear_model.parameters(), l2=l2_reg_linear)
        self.out = PredictionLayer(task, )
        self.to(device)
        self.history = History()

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose=1, initial_epoch=0, validation_split=0.,
            validation_data=None, shuffle=True, callbacks=None):
        if isinstance(x, dict):
            x = [x[feature] for feature in self.feature_index]
        do_validation = bool(validation_split and 0. < validation_split < 1.)
        if do_validation:
            split_at = int(x[0].shape[0] * (1. - validation_split))
            x, val_x = (slice_arrays(x, 0, split_at), slice_arrays(x, split_at))
            y, val_y = (slice_arrays(y, 0, split_at), slice_arrays(y, split_at))
        else:
            val_x, val_y = [], []
        for i in range(len(x)):
            if len(x[i].shape) == 1:
                x[i] = np.expand_dims(x[i], axis=1)
        train_tensor_data = Data.TensorDataset(torch.from_numpy(np.concatenate(x, axis=-1)), torch.from_numpy(y))
        batch_size = 256 if batch_size is None else batch_size
        model = self.train()
        loss_func = self.loss_func
        optim = self.optim
        if self.gpus:
            print('parallel running on these gpus:', self.gpus)
            model = torch.nn.DataParallel(model, device_ids=self.gpus)
            batch_size *= len(self.gpus)  # input `batch_size` is batch_size per gpu
        else:
            print(self.device)
        train_loader = DataLoader(dataset=train_tensor_data, shuffle=shuffle, batch_size=batch_size)
        sample_num = len(train_tensor_data)
        steps_per_epoch = (sample_num - 1) // batch_size + 1
        # configure callbacks
        callbacks = (callbacks or []) + [self.history]  # add history callback
        callbacks = CallbackList(callbacks)
        callbacks.set_model(self)
        callbacks.on_train_begin()
        callbacks.set_model(self)
        callbacks.model.stop_training = False
        # Train
        print("Train on {0} samples, validate on {1} samples, {2} steps per epoch".format(
            len(train_tensor_data), len(val_y), steps_per_epoch))
        for epoch in range(initial_epoch, epochs):
            callbacks.on_epoch_begin(epoch)
            epoch_logs, start_time = {}, time.time()
            loss_epoch, total_loss_epoch, train_result = 0, 0, {}
            with tqdm(enumerate(train_loader), disable=verbose != 1) as t:
                for _, (x_train, y_train) in t:
                    x = x_train.to(self.device).float()
                    y = y_train.to(self.device).float()
                    y_pred = model(x).squeeze()
                    optim.zero_grad()
                    loss = loss_func(y_pred, y.squeeze(), reduction='sum')
                    reg_loss = self.get_regularization_loss()
                    total_loss = loss + reg_loss + self.aux_loss
                    loss_epoch += loss.item()
                    total_loss_epoch += total_loss.item()
                    total_loss.backward()
                    optim.step()
                    if verbose > 0:
                        for name, metric_fun in self.metrics.items():
                            train_result.setdefault(name, []).append(metric_fun(
                                y.cpu().data.numpy(), y_pred.cpu().data.numpy().astype("float64")))
            # Add epoch_logs
            epoch_logs["loss"] = total_loss_epoch / sample_num
            for name, result in train_result.items():
                epoch_logs[name] = np.sum(result) / steps_per_epoch
            if do_validation:
                eval_result = self.evaluate(val_x, val_y, batch_size)
                for name, result in eval_result.items():
                    epoch_logs["val_" + name] = result
            if verbose > 0:
                epoch_time = int(time.time() - start_time)
                print('Epoch {0}/{1}'.format(epoch + 1, epochs))
                eval_str = "{0}s - loss: {1: .4f}".format(epoch_time, epoch_logs["loss"])
                for name in list(self.metrics) + (["val_" + n for n in self.metrics] if do_validation else []):
                    eval_str += " - " + name + ": {0: .4f}".format(epoch_logs[name])
                print(eval_str)
            callbacks.on_epoch_end(epoch, epoch_logs)
            if self.stop_training:
                break
        callbacks.on_train_end()
        return self.history

    def evaluate(self, x, y, batch_size=256):
        pred_ans = self.predict(x, batch_size)
        eval_result = {}
        for name, metric_fun in self.metrics.items():
            eval_result[name] = metric_fun(y, pred_ans)
        return eval_result

    def predict(self, x, batch_size=256):
        model = self.eval()
        if isinstance(x, dict):
            x = [x[feature] for feature in self.feature_index]
        for i in range(len(x)):
            if len(x[i].shape) == 1:
                x[i] = np.expand_dims(x[i], axis=1)
        tensor_data = Data.TensorDataset(torch.from_numpy(np.concatenate(x, axis=-1)))
        test_loader = DataLoader(dataset=tensor_data, shuffle=False, batch_size=batch_size)
        pred_ans = []
        with torch.no_grad():
            for _, x_test in enumerate(test_loader):
                x = x_test[0].to(self.device).float()
                y_pred = model(x).cpu().data.numpy()  # .squeeze()
                pred_ans.append(y_pred)
        return np.concatenate(pred_ans).astype("float64")

    def input_from_feature_columns(self, X, feature_columns, embedding_dict, support_dense=True):
        sparse_feature_columns = list(
            filter(lambda x: isinstance(x, SparseFeat), feature_columns)) if len(feature_columns) else []
        dense_feature_columns = list(
            filter(lambda x: isinstance(x, DenseFeat), feature_columns)) if len(feature_columns) else []
        if not support_dense and len(dense_feature_columns) > 0:
            raise ValueError("DenseFeat is not supported in dnn_feature_columns")
        sparse_embedding_list = [embedding_dict[feat.embedding_name](
            X[:, self.feature_index[feat.name][0]:self.feature_index[feat.name][1]].long()) for
            feat in sparse_feature_columns]
        dense_value_list = [X[:, self.feature_index[feat.name][0]:self.feature_index[feat.name][1]] for feat in
                            dense_feature_columns]
        return sparse_embedding_list, dense_value_list

    def compute_input_dim(self, feature_columns, include_sparse=True, include_dense=True):
        sparse_input_dim = sum(feat.embedding_dim for feat in feature_columns if isinstance(feat, SparseFeat))
        dense_input_dim = sum(feat.dimension for feat in feature_columns if isinstance(feat, DenseFeat))
        return (sparse_input_dim if include_sparse else 0) + (dense_input_dim if include_dense else 0)

    def add_regularization_weight(self, weight_list, l1=0.0, l2=0.0):
        # For a Parameter, put it in a list to keep Compatible with get_regularization_loss()
        if isinstance(weight_list, torch.nn.parameter.Parameter):
            weight_list = [weight_list]
        else:
            weight_list = list(weight_list)
        self.regularization_weight.append((weight_list, l1, l2))

    def get_regularization_loss(self, ):
        total_reg_loss = torch.zeros((1,), device=self.device)
        for weight_list, l1, l2 in self.regularization_weight:
            for w in weight_list:
                parameter = w[1] if isinstance(w, tuple) else w  # named_parameters
                if l1 > 0:
                    total_reg_loss += torch.sum(l1 * torch.abs(parameter))
                if l2 > 0:
                    total_reg_loss += torch.sum(l2 * torch.square(parameter))
        return total_reg_loss

    def compile(self, optimizer, loss=None, metrics=None, ):
        self.metrics_names = ["loss"]
        self.optim = self._get_optim(optimizer)
        self.loss_func = {"binary_crossentropy": F.binary_cross_entropy, "mse": F.mse_loss}[loss]
        self.metrics = self._get_metrics(metrics)

    def _get_optim(self, optimizer):
        if optimizer == "adagrad":
            return torch.optim.Adagrad(self.parameters())  # 0.01
        elif optimizer == "adam":
            return torch.optim.Adam(self.parameters())  # 0.001
        return optimizer

    def _get_metrics(self, metrics, set_eps=False):
        metrics_ = {}
        for metric in metrics or []:
            if metric == "binary_crossentropy" or metric == "logloss":
                metrics_[metric] = log_loss
            if metric == "auc":
                metrics_[metric] = roc_auc_score
            self.metrics_names.append(metric)
        return metrics_


class DeepFM(BaseModel):
    def __init__(self, linear_feature_columns, dnn_feature_columns, use_fm=True, dnn_hidden_units=(256, 128),
                 l2_reg_linear=0.00001, l2_reg_embedding=0.00001, l2_reg_dnn=0, init_std=0.0001, seed=1024,
                 dnn_dropout=0, dnn_activation='relu', dnn_use_bn=False, task='binary', device='cpu', gpus=None):
        super(DeepFM, self).__init__(linear_feature_columns, dnn_feature_columns, l2_reg_linear=l2_reg_linear,
                                     l2_reg_embedding=l2_reg_embedding, init_std=init_std, seed=seed, task=task,
                                     device=device, gpus=gpus)
        self.use_fm = use_fm
        self.use_dnn = len(dnn_feature_columns) > 0 and len(dnn_hidden_units) > 0
        if use_fm:
            self.fm = FM()
        if self.use_dnn:
            self.dnn = DNN(self.compute_input_dim(dnn_feature_columns), dnn_hidden_units,
                           activation=dnn_activation, l2_reg=l2_reg_dnn, dropout_rate=dnn_dropout, use_bn=dnn_use_bn,
                           init_std=init_std, device=device)
            self.dnn_linear = nn.Linear(dnn_hidden_units[-1], 1, bias=False).to(device)
            self.add_regularization_weight(
                filter(lambda x: 'weight' in x[0] and 'bn' not in x[0], self.dnn.named_parameters()), l2=l2_reg_dnn)
            self.add_regularization_weight(self.dnn_linear.weight, l2=l2_reg_dnn)
        self.to(device)

    def forward(self, X):
        sparse_embedding_list, dense_value_list = self.input_from_feature_columns(X, self.dnn_feature_columns,
                                                                                  self.embedding_dict)
        logit = self.linear_model(X)
        if self.use_fm and len(sparse_embedding_list) > 0:
            fm_input = torch.cat(sparse_embedding_list, dim=1)
            logit += self.fm(fm_input)
        if self.use_dnn:
            dnn_input = combined_dnn_input(sparse_embedding_list, dense_value_list)
            dnn_output = self.dnn(dnn_input)
            dnn_logit = self.dnn_linear(dnn_output)
            logit += dnn_logit
        y_pred = self.out(logit)
        return y_pred


def make_criteo_sample(n=1600, n_sparse=8, n_dense=4, seed=2020):
    """Rows like criteo_sample.txt: hashed categories C*, counts I* with missing values, and a click label."""
    rng = np.random.RandomState(seed)
    data, logit = {}, rng.randn(n) * 0.3 - 0.2
    for j in range(1, n_sparse + 1):
        vocab = ['%08x' % rng.randint(1 << 30) for _ in range(rng.randint(5, 30))]
        ids = rng.randint(len(vocab), size=n)
        logit += rng.randn(len(vocab))[ids] * 0.6  # the hidden click model
        data['C%d' % j] = np.array([vocab[i] if rng.rand() > 0.05 else None for i in ids], dtype=object)
    for j in range(1, n_dense + 1):
        values = rng.poisson(rng.randint(1, 20), size=n).astype(np.float64)
        logit += (values - values.mean()) / (values.std() + 1e-6) * rng.randn() * 0.5
        data['I%d' % j] = np.where(rng.rand(n) < 0.1, np.nan, values)
    data['label'] = (rng.rand(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return data


def main(folder):
    data = make_criteo_sample()
    sparse_features = ['C' + str(i) for i in range(1, 9)]
    dense_features = ['I' + str(i) for i in range(1, 5)]
    for feat in sparse_features:  # data[sparse_features].fillna('-1', )
        data[feat] = np.array(['-1' if v is None else v for v in data[feat]], dtype=object)
    for feat in dense_features:  # data[dense_features].fillna(0, )
        data[feat] = np.nan_to_num(data[feat], nan=0)
    target = ['label']

    # 1.Label Encoding for sparse features,and do simple Transformation for dense features
    for feat in sparse_features:
        lbe = LabelEncoder()
        data[feat] = lbe.fit_transform(data[feat])
    mms = MinMaxScaler(feature_range=(0, 1))
    dense = mms.fit_transform(np.stack([data[f] for f in dense_features], axis=1))
    for j, feat in enumerate(dense_features):
        data[feat] = dense[:, j]

    # 2.count #unique features for each sparse field,and record dense feature field name
    fixlen_feature_columns = [SparseFeat(feat, vocabulary_size=data[feat].max() + 1, embedding_dim=4)
                              for feat in sparse_features] + [DenseFeat(feat, 1, ) for feat in dense_features]
    dnn_feature_columns = fixlen_feature_columns
    linear_feature_columns = fixlen_feature_columns
    feature_names = get_feature_names(linear_feature_columns + dnn_feature_columns)

    # 3.generate input data for model
    train, test = train_test_split(np.arange(len(data[target[0]])), test_size=0.2, random_state=2020)
    train_model_input = {name: data[name][train] for name in feature_names}
    test_model_input = {name: data[name][test] for name in feature_names}
    train_y, test_y = data[target[0]][train][:, None], data[target[0]][test][:, None]

    # 4.Define Model,train,predict and evaluate
    device = 'cpu'
    use_cuda = True
    if use_cuda and torch.cuda.is_available():
        print('cuda ready...')
        device = 'cuda:0'

    model = DeepFM(linear_feature_columns=linear_feature_columns, dnn_feature_columns=dnn_feature_columns,
                   dnn_hidden_units=(32, 16), task='binary', l2_reg_embedding=1e-5, device=device)
    model.compile(torch.optim.Adagrad(model.parameters(), 0.05), "binary_crossentropy",
                  metrics=["binary_crossentropy", "auc"], )
    history = model.fit(train_model_input, train_y, batch_size=64, epochs=4, verbose=2, validation_split=0.2)

    # FAQ 1: save and load the model
    torch.save(model, os.path.join(folder, 'DeepFM.h5'))
    model = torch.load(os.path.join(folder, 'DeepFM.h5'), weights_only=False)
    pred_ans = model.predict(test_model_input, 256)
    print("")
    print("test LogLoss", round(log_loss(test_y, pred_ans), 4))
    print("test AUC", round(roc_auc_score(test_y, pred_ans), 4))

    # FAQ 1 and 5: save the weights, load them into a model on the GPUs and fine-tune it
    torch.save(model.state_dict(), os.path.join(folder, 'DeepFM_weights.h5'))
    gpus = [0] if torch.cuda.is_available() else None
    model = DeepFM(linear_feature_columns, dnn_feature_columns, dnn_hidden_units=(32, 16), task='binary',
                   device=device, gpus=gpus)
    model.load_state_dict(torch.load(os.path.join(folder, 'DeepFM_weights.h5')))
    model.compile("adagrad", "binary_crossentropy", metrics=["binary_crossentropy", "auc"], )
    model.fit(train_model_input, train_y, batch_size=64, epochs=1, verbose=2, validation_split=0.2)
    pred_tuned = model.predict(test_model_input, 256)
    print("fine-tuned test AUC", round(roc_auc_score(test_y, pred_tuned), 4))
    return history.history['val_auc'][-1], roc_auc_score(test_y, pred_ans), roc_auc_score(test_y, pred_tuned)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        val_auc, auc, tuned_auc = main(folder)
    print("done: val AUC {:.4f}, test AUC {:.4f}, fine-tuned test AUC {:.4f}".format(val_auc, auc, tuned_auc))
