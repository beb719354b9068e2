"""Fits a TabNetClassifier (sequential sparsemax attention over feature groups, ghost batch norm, GLU feature
transformers, categorical embeddings) on a synthetic tabular task with early stopping on validation AUC, explains
its predictions with the attention masks, saves it as a zip and reloads it, as dreamquark-ai/tabnet's
abstract_model.py and tab_model.py do: the device comes from ``define_device("auto")``, the network is built with
the group matrix already moved (``group_attention_matrix=self.group_matrix.to(self.device)``) and then moved with
``.to(self.device)``, so the encoder's and embedder's group matrices are plain tensor attributes (not buffers) that
sit on the device from construction (the embedder's with ``torch.empty(..., device=group_matrix.device)``); the
optimizer is made after the network; every batch is moved with ``X.to(self.device).float()``, the priors and
explanations are made with ``.to(x.device)``, the GLU scale with ``torch.FloatTensor([0.5]).to(x.device)`` and
sparsemax's ranks with ``device=input.device``; losses, scores and masks are read with ``.cpu().detach().numpy()``
(masks then go through a scipy sparse reducing matrix), early stopping keeps a deep copy of the best
``state_dict``, and `load_model` reads ``network.pt`` from the zip with ``torch.load(f, map_location=self.device)``
into a freshly built network.

Modeled on: dreamquark-ai/tabnet, pytorch_tabnet/abstract_model.py, pytorch_tabnet/tab_model.py,
pytorch_tabnet/tab_network.py, pytorch_tabnet/sparsemax.py, pytorch_tabnet/utils.py and pytorch_tabnet/callbacks.py
at commit 2c0c4ebd2bb1cb639ea94ab4b11823bc49265588
(https://github.com/dreamquark-ai/tabnet/blob/2c0c4ebd2bb1cb639ea94ab4b11823bc49265588/pytorch_tabnet/abstract_model.py,
https://github.com/dreamquark-ai/tabnet/blob/2c0c4ebd2bb1cb639ea94ab4b11823bc49265588/pytorch_tabnet/tab_network.py).

Kept: `TabModel`'s and `TabNetClassifier`'s fit/predict/explain/save/load methods and their `_train_batch`,
`_predict_epoch`, `_predict_batch`, `_set_network`; the network (`GBN`, `GLU_Layer`, `GLU_Block`, `FeatTransformer`,
`AttentiveTransformer`, `TabNetEncoder` with `forward_masks`, `EmbeddingGenerator`, `TabNetNoEmbeddings`, `TabNet`),
sparsemax's threshold, `define_device`, `create_group_matrix`, `create_explain_matrix` and EarlyStopping.

Changed to run here: sklearn's BaseEstimator and the callbacks are folded into `TabModel` (`get_params` reads the
dataclass fields; history and early stopping run at the epoch end); autograd differentiates sparsemax; AUC is a
numpy rank statistic; no pretraining, sparse inputs, entmax, weights, augmentations or multi-task heads.
Shrunk: 1024/128 batch/virtual batch -> 128/32, n_d = n_a = 8, 3 steps, 512 train / 256 valid rows, 5 epochs.
"""
import copy
import dataclasses
import io
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import scipy.sparse
import torch
from scipy.special import softmax
from torch.nn import BatchNorm1d, Linear, ReLU
from torch.nn.utils import clip_grad_norm_
from torch.utils.data import DataLoader, Dataset


def define_device(device_name):
    if device_name == "auto" or (device_name == "cuda" and not torch.cuda.is_available()):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device_name


def create_group_matrix(list_groups, input_dim):
    # features not mentionned in list_groups get assigned their own group of singleton
    groups = list_groups + [[f] for f in range(input_dim) if all(f not in group for group in list_groups)]
    group_matrix = torch.zeros((len(groups), input_dim))
    for current_group_idx, group in enumerate(groups):
        group_matrix[current_group_idx, group] = 1 / len(group)
    return group_matrix


def create_explain_matrix(input_dim, cat_emb_dim, cat_idxs, post_embed_dim):
    reducing_matrix = np.zeros((post_embed_dim, input_dim))
    acc_emb, nb_emb = 0, 0
    for i in range(input_dim):
        width = cat_emb_dim[nb_emb] if i in cat_idxs else 1
        reducing_matrix[i + acc_emb:i + acc_emb + width, i] = 1
        acc_emb, nb_emb = acc_emb + width - 1, nb_emb + (i in cat_idxs)
    return scipy.sparse.csc_matrix(reducing_matrix)


class TorchDataset(Dataset):
    def __init__(self, x, y=None):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index] if self.y is None else (self.x[index], self.y[index])


def _make_ix_like(input, dim=0):
    rho = torch.arange(1, input.size(dim) + 1, device=input.device, dtype=input.dtype)
    view = [1] * input.dim()
    view[0] = -1
    return rho.view(view).transpose(0, dim)


def sparsemax(input, dim=-1):
    """SparsemaxFunction.forward (Martins & Astudillo, 2016); autograd differentiates it here."""
    max_val, _ = input.max(dim=dim, keepdim=True)
    input = input - max_val  # same numerical stability trick as for softmax
    input_srt, _ = torch.sort(input, descending=True, dim=dim)
    input_cumsum = input_srt.cumsum(dim) - 1
    support = _make_ix_like(input, dim) * input_srt > input_cumsum
    support_size = support.sum(dim=dim).unsqueeze(dim)
    tau = input_cumsum.gather(dim, support_size - 1) / support_size.to(input.dtype)
    return torch.clamp(input - tau, min=0)


def initialize_non_glu(module, input_dim, output_dim, glu=False):
    gain_value = np.sqrt((input_dim + output_dim) / np.sqrt(input_dim if glu else 4 * input_dim))
    torch.nn.init.xavier_normal_(module.weight, gain=gain_value)


class GBN(torch.nn.Module):  # Ghost Batch Normalization
    def __init__(self, input_dim, virtual_batch_size=128, momentum=0.01):
        super(GBN, self).__init__()
        self.virtual_batch_size = virtual_batch_size
        self.bn = BatchNorm1d(input_dim, momentum=momentum)

    def forward(self, x):
        chunks = x.chunk(int(np.ceil(x.shape[0] / self.virtual_batch_size)), 0)
        return torch.cat([self.bn(x_) for x_ in chunks], dim=0)


class GLU_Layer(torch.nn.Module):
    def __init__(self, input_dim, output_dim, fc=None, virtual_batch_size=128, momentum=0.02):
        super(GLU_Layer, self).__init__()
        self.output_dim = output_dim
        self.fc = fc if fc else Linear(input_dim, 2 * output_dim, bias=False)
        initialize_non_glu(self.fc, input_dim, 2 * output_dim, glu=True)  # initialize_glu
        self.bn = GBN(2 * output_dim, virtual_batch_size=virtual_batch_size, momentum=momentum)

    def forward(self, x):
        x = self.bn(self.fc(x))
        return torch.mul(x[:, : self.output_dim], torch.sigmoid(x[:, self.output_dim:]))


class GLU_Block(torch.nn.Module):
    def __init__(self, input_dim, output_dim, n_glu=2, first=False, shared_layers=None, virtual_batch_size=128,
                 momentum=0.02):
        super(GLU_Block, self).__init__()
        self.first, self.n_glu = first, n_glu
        params = {"virtual_batch_size": virtual_batch_size, "momentum": momentum}
        self.glu_layers = torch.nn.ModuleList([
            GLU_Layer(input_dim if glu_id == 0 else output_dim, output_dim,
                      fc=shared_layers[glu_id] if shared_layers else None, **params) for glu_id in range(n_glu)])

    def forward(self, x):
        scale = torch.sqrt(torch.FloatTensor([0.5]).to(x.device))
        if self.first:  # the first layer of the block has no scale multiplication
            x = self.glu_layers[0](x)
            layers_left = range(1, self.n_glu)
        else:
            layers_left = range(self.n_glu)
        for glu_id in layers_left:
            x = torch.add(x, self.glu_layers[glu_id](x))
            x = x * scale
        return x


class FeatTransformer(torch.nn.Module):
    def __init__(self, input_dim, output_dim, shared_layers, n_glu_independent, virtual_batch_size=128,
                 momentum=0.02):
        super(FeatTransformer, self).__init__()
        self.shared = GLU_Block(input_dim, output_dim, first=True, shared_layers=shared_layers,
                                n_glu=len(shared_layers), virtual_batch_size=virtual_batch_size, momentum=momentum)
        self.specifics = GLU_Block(output_dim, output_dim, first=False, n_glu=n_glu_independent,
                                   virtual_batch_size=virtual_batch_size, momentum=momentum)

    def forward(self, x):
        return self.specifics(self.shared(x))


class AttentiveTransformer(torch.nn.Module):
    def __init__(self, input_dim, group_dim, group_matrix, virtual_batch_size=128, momentum=0.02):
        super(AttentiveTransformer, self).__init__()
        self.fc = Linear(input_dim, group_dim, bias=False)
        initialize_non_glu(self.fc, input_dim, group_dim)
        self.bn = GBN(group_dim, virtual_batch_size=virtual_batch_size, momentum=momentum)

    def forward(self, priors, processed_feat):
        x = self.bn(self.fc(processed_feat))
        return sparsemax(torch.mul(x, priors), dim=-1)  # mask_type="sparsemax"


class TabNetEncoder(torch.nn.Module):
    def __init__(self, input_dim, output_dim, n_d=8, n_a=8, n_steps=3, gamma=1.3, n_independent=2, n_shared=2,
                 epsilon=1e-15, virtual_batch_size=128, momentum=0.02, group_attention_matrix=None):
        super(TabNetEncoder, self).__init__()
        self.input_dim, self.n_d, self.n_steps, self.gamma, self.epsilon = input_dim, n_d, n_steps, gamma, epsilon
        self.initial_bn = BatchNorm1d(self.input_dim, momentum=0.01)
        self.group_attention_matrix = group_attention_matrix
        self.attention_dim = self.group_attention_matrix.shape[0]
        shared_feat_transform = torch.nn.ModuleList([
            Linear(self.input_dim if i == 0 else n_d + n_a, 2 * (n_d + n_a), bias=False) for i in range(n_shared)])
        params = dict(n_glu_independent=n_independent, virtual_batch_size=virtual_batch_size, momentum=momentum)
        self.initial_splitter = FeatTransformer(self.input_dim, n_d + n_a, shared_feat_transform, **params)
        self.feat_transformers = torch.nn.ModuleList([
            FeatTransformer(self.input_dim, n_d + n_a, shared_feat_transform, **params) for _ in range(n_steps)])
        self.att_transformers = torch.nn.ModuleList([
            AttentiveTransformer(n_a, self.attention_dim, group_attention_matrix, virtual_batch_size, momentum)
            for _ in range(n_steps)])

    def forward(self, x, prior=None):
        x = self.initial_bn(x)
        if prior is None:
            prior = torch.ones((x.shape[0], self.attention_dim)).to(x.device)
        M_loss = 0
        att = self.initial_splitter(x)[:, self.n_d:]
        steps_output = []
        for step in range(self.n_steps):
            M = self.att_transformers[step](prior, att)
            M_loss += torch.mean(torch.sum(torch.mul(M, torch.log(M + self.epsilon)), dim=1))
            prior = torch.mul(self.gamma - M, prior)
            M_feature_level = torch.matmul(M, self.group_attention_matrix)
            out = self.feat_transformers[step](torch.mul(M_feature_level, x))
            steps_output.append(ReLU()(out[:, : self.n_d]))
            att = out[:, self.n_d:]
        return steps_output, M_loss / self.n_steps

    def forward_masks(self, x):
        x = self.initial_bn(x)
        prior = torch.ones((x.shape[0], self.attention_dim)).to(x.device)
        M_explain = torch.zeros(x.shape).to(x.device)
        att = self.initial_splitter(x)[:, self.n_d:]
        masks = {}
        for step in range(self.n_steps):
            M = self.att_transformers[step](prior, att)
            M_feature_level = torch.matmul(M, self.group_attention_matrix)
            masks[step] = M_feature_level
            prior = torch.mul(self.gamma - M, prior)
            out = self.feat_transformers[step](torch.mul(M_feature_level, x))
            step_importance = torch.sum(ReLU()(out[:, : self.n_d]), dim=1)
            M_explain += torch.mul(M_feature_level, step_importance.unsqueeze(dim=1))
            att = out[:, self.n_d:]
        return M_explain, masks


class EmbeddingGenerator(torch.nn.Module):
    def __init__(self, input_dim, cat_dims, cat_idxs, cat_emb_dims, group_matrix):
        super(EmbeddingGenerator, self).__init__()
        self.post_embed_dim = int(input_dim + np.sum(cat_emb_dims) - len(cat_emb_dims))
        self.embeddings = torch.nn.ModuleList([torch.nn.Embedding(c, e) for c, e in zip(cat_dims, cat_emb_dims)])
        self.continuous_idx = torch.ones(input_dim, dtype=torch.bool)
        self.continuous_idx[cat_idxs] = 0
        n_groups = group_matrix.shape[0]
        self.embedding_group_matrix = torch.empty((n_groups, self.post_embed_dim), device=group_matrix.device)
        for group_idx in range(n_groups):
            post_emb_idx, cat_feat_counter = 0, 0
            for init_feat_idx in range(input_dim):
                n_embeddings = 1 if self.continuous_idx[init_feat_idx] else cat_emb_dims[cat_feat_counter]
                self.embedding_group_matrix[group_idx, post_emb_idx:post_emb_idx + n_embeddings] = \
                    group_matrix[group_idx, init_feat_idx] / n_embeddings
                post_emb_idx += n_embeddings
                cat_feat_counter += int(not self.continuous_idx[init_feat_idx])

    def forward(self, x):
        cols, cat_feat_counter = [], 0
        for feat_init_idx, is_continuous in enumerate(self.continuous_idx):
            if is_continuous:
                cols.append(x[:, feat_init_idx].float().view(-1, 1))
            else:
                cols.append(self.embeddings[cat_feat_counter](x[:, feat_init_idx].long()))
                cat_feat_counter += 1
        return torch.cat(cols, dim=1)  # post_embeddings


class TabNetNoEmbeddings(torch.nn.Module):
    def __init__(self, input_dim, output_dim, n_d, n_a, n_steps, gamma, n_independent, n_shared, epsilon,
                 virtual_batch_size, momentum, group_attention_matrix):
        super(TabNetNoEmbeddings, self).__init__()
        self.encoder = TabNetEncoder(input_dim, output_dim, n_d, n_a, n_steps, gamma, n_independent, n_shared,
                                     epsilon, virtual_batch_size, momentum, group_attention_matrix)
        self.final_mapping = Linear(n_d, output_dim, bias=False)
        initialize_non_glu(self.final_mapping, n_d, output_dim)

    def forward(self, x):
        steps_output, M_loss = self.encoder(x)
        res = torch.sum(torch.stack(steps_output, dim=0), dim=0)
        return self.final_mapping(res), M_loss

    def forward_masks(self, x):
        return self.encoder.forward_masks(x)


class TabNet(torch.nn.Module):
    def __init__(self, input_dim, output_dim, n_d=8, n_a=8, n_steps=3, gamma=1.3, cat_idxs=[], cat_dims=[],
                 cat_emb_dim=1, n_independent=2, n_shared=2, epsilon=1e-15, virtual_batch_size=128, momentum=0.02,
                 group_attention_matrix=[]):
        super(TabNet, self).__init__()
        self.input_dim, self.cat_idxs, self.cat_emb_dim = input_dim, cat_idxs, cat_emb_dim
        self.embedder = EmbeddingGenerator(input_dim, cat_dims, cat_idxs, cat_emb_dim, group_attention_matrix)
        self.post_embed_dim = self.embedder.post_embed_dim
        self.tabnet = TabNetNoEmbeddings(self.post_embed_dim, output_dim, n_d, n_a, n_steps, gamma, n_independent,
                                         n_shared, epsilon, virtual_batch_size, momentum,
                                         self.embedder.embedding_group_matrix)

    def forward(self, x):
        return self.tabnet(self.embedder(x))

    def forward_masks(self, x):
        return self.tabnet.forward_masks(self.embedder(x))


def roc_auc(y_true, y_score):
    ranks = np.argsort(np.argsort(y_score[:, 1])) + 1
    n_pos = np.sum(y_true == 1)
    n_neg = len(y_true) - n_pos
    return (np.sum(ranks[y_true == 1]) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


@dataclass
class TabModel:
    n_d: int = 8
    n_a: int = 8
    n_steps: int = 3
    gamma: float = 1.3
    cat_idxs: List[int] = field(default_factory=list)
    cat_dims: List[int] = field(default_factory=list)
    cat_emb_dim: Any = 1
    n_independent: int = 2
    n_shared: int = 2
    momentum: float = 0.02
    lambda_sparse: float = 1e-3
    seed: int = 0
    clip_value: int = 1
    optimizer_fn: Any = torch.optim.Adam
    optimizer_params: Dict = field(default_factory=lambda: dict(lr=2e-2))
    input_dim: int = None
    output_dim: int = None
    device_name: str = "auto"
    grouped_features: List[List[int]] = field(default_factory=list)

    def __post_init__(self):
        self.batch_size, self.virtual_batch_size = 1024, 128
        torch.manual_seed(self.seed)
        self.device = torch.device(define_device(self.device_name))  # Defining device
        print(f"Device used : {self.device}")
        if isinstance(self.cat_emb_dim, int):
            self.cat_emb_dim = [self.cat_emb_dim] * len(self.cat_idxs)

    def get_params(self):
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def fit(self, X_train, y_train, eval_set=None, max_epochs=100, patience=10, batch_size=1024,
            virtual_batch_size=128, drop_last=True, pin_memory=True):
        self.max_epochs, self.patience, self.batch_size = max_epochs, patience, batch_size
        self.virtual_batch_size, self.input_dim = virtual_batch_size, X_train.shape[1]
        self.pin_memory = pin_memory and (self.device.type != "cpu")
        self.loss_fn = self._default_loss
        self.update_fit_params(X_train, y_train)
        eval_set = [(X, self.prepare_target(y)) for X, y in eval_set or []]
        train_dataloader = DataLoader(TorchDataset(X_train.astype(np.float32), self.prepare_target(y_train)),
                                      batch_size=self.batch_size, shuffle=True, drop_last=drop_last,
                                      pin_memory=self.pin_memory)
        valid_dataloaders = [DataLoader(TorchDataset(X.astype(np.float32), y), batch_size=self.batch_size,
                                        shuffle=False, pin_memory=self.pin_memory) for X, y in eval_set]
        self._set_network()
        self.network.virtual_batch_size = self.virtual_batch_size
        self._set_optimizer()
        self._run_epochs(train_dataloader, valid_dataloaders)
        sum_explain = self.explain(X_train)[0].sum(axis=0)  # feature importance once the best model is defined
        self.feature_importances_ = sum_explain / np.sum(sum_explain)

    def _run_epochs(self, train_dataloader, valid_dataloaders):
        best_loss, best_weights, wait = -np.inf, None, 0  # EarlyStopping(is_maximize=True)
        for epoch_idx in range(self.max_epochs):
            self.epoch_metrics = {}
            self._train_epoch(train_dataloader)
            for valid_dataloader in valid_dataloaders:
                self._predict_epoch("valid", valid_dataloader)
            current = self.epoch_metrics[self.early_stopping_metric]
            print(f"epoch {epoch_idx} | " + " | ".join(f"{k}: {v:.5f}" for k, v in self.epoch_metrics.items()))
            if current > best_loss:
                best_loss, self.best_epoch, wait = current, epoch_idx, 1
                best_weights = copy.deepcopy(self.network.state_dict())
            elif wait >= self.patience:
                break
            else:
                wait += 1
        print(f"best_epoch = {self.best_epoch} and best_{self.early_stopping_metric} = {round(best_loss, 5)}")
        self.network.load_state_dict(best_weights)
        self.network.eval()

    def predict(self, X):
        self.network.eval()
        dataloader = DataLoader(TorchDataset(X), batch_size=self.batch_size, shuffle=False)
        results = []
        for batch_nb, data in enumerate(dataloader):
            output, M_loss = self.network(data.to(self.device).float())
            results.append(output.cpu().detach().numpy())
        return self.predict_func(np.vstack(results))

    def explain(self, X, normalize=False):
        self.network.eval()
        dataloader = DataLoader(TorchDataset(X), batch_size=self.batch_size, shuffle=False)
        res_explain = []
        for batch_nb, data in enumerate(dataloader):
            data = data.to(self.device).float()
            M_explain, masks = self.network.forward_masks(data)
            for key, value in masks.items():
                masks[key] = scipy.sparse.csc_matrix.dot(value.cpu().detach().numpy(), self.reducing_matrix)
            res_explain.append(scipy.sparse.csc_matrix.dot(M_explain.cpu().detach().numpy(), self.reducing_matrix))
            if batch_nb == 0:
                res_masks = masks
            else:
                for key, value in masks.items():
                    res_masks[key] = np.vstack([res_masks[key], value])
        res_explain = np.vstack(res_explain)
        return res_explain / np.sum(res_explain, axis=1)[:, None] if normalize else res_explain, res_masks

    def save_model(self, path):
        init_params = {k: v for k, v in self.get_params().items() if not isinstance(v, type)}
        saved_params = {"init_params": init_params, "class_attrs": {"preds_mapper": self.preds_mapper}}
        Path(path).mkdir(parents=True, exist_ok=True)
        with open(Path(path).joinpath("model_params.json"), "w", encoding="utf8") as f:
            json.dump(saved_params, f)
        torch.save(self.network.state_dict(), Path(path).joinpath("network.pt"))
        shutil.make_archive(path, "zip", path)
        shutil.rmtree(path)
        return f"{path}.zip"

    def load_model(self, filepath):
        with zipfile.ZipFile(filepath) as z:
            with z.open("model_params.json") as f:
                loaded_params = json.load(f)
                loaded_params["init_params"]["device_name"] = self.device_name
            with z.open("network.pt") as f:
                saved_state_dict = torch.load(io.BytesIO(f.read()), map_location=self.device)
        self.__init__(**loaded_params["init_params"])
        self._set_network()
        self.network.load_state_dict(saved_state_dict)
        self.network.eval()
        self.preds_mapper = loaded_params["class_attrs"]["preds_mapper"]

    def _train_epoch(self, train_loader):
        self.network.train()
        losses = [self._train_batch(X, y)["loss"] for X, y in train_loader]
        self.epoch_metrics.update({"loss": float(np.mean(losses)), "lr": self._optimizer.param_groups[-1]["lr"]})

    def _train_batch(self, X, y):
        batch_logs = {"batch_size": X.shape[0]}
        X, y = X.to(self.device).float(), y.to(self.device).float()
        for param in self.network.parameters():
            param.grad = None
        output, M_loss = self.network(X)
        loss = self.compute_loss(output, y) - self.lambda_sparse * M_loss  # Add the overall sparsity loss
        loss.backward()
        if self.clip_value:
            clip_grad_norm_(self.network.parameters(), self.clip_value)
        self._optimizer.step()
        batch_logs["loss"] = loss.cpu().detach().numpy().item()
        return batch_logs

    def _predict_epoch(self, name, loader):
        self.network.eval()
        list_y_true, list_y_score = [], []
        for batch_idx, (X, y) in enumerate(loader):
            list_y_true.append(y)
            list_y_score.append(self._predict_batch(X))
        y_true, scores = self.stack_batches(list_y_true, list_y_score)
        self.network.train()
        self.epoch_metrics.update(self.eval_metrics(name, y_true, scores))

    def _predict_batch(self, X):
        scores, _ = self.network(X.to(self.device).float())  # compute model output
        return scores.cpu().detach().numpy()

    def _set_network(self):
        torch.manual_seed(self.seed)
        self.group_matrix = create_group_matrix(self.grouped_features, self.input_dim)
        self.network = TabNet(self.input_dim, self.output_dim, n_d=self.n_d, n_a=self.n_a, n_steps=self.n_steps,
                              gamma=self.gamma, cat_idxs=self.cat_idxs, cat_dims=self.cat_dims,
                              cat_emb_dim=self.cat_emb_dim, n_independent=self.n_independent,
                              n_shared=self.n_shared,
                              virtual_batch_size=self.virtual_batch_size, momentum=self.momentum,
                              group_attention_matrix=self.group_matrix.to(self.device)).to(self.device)
        self.reducing_matrix = create_explain_matrix(self.network.input_dim, self.network.cat_emb_dim,
                                                     self.network.cat_idxs, self.network.post_embed_dim)

    def _set_optimizer(self):
        self._optimizer = self.optimizer_fn(self.network.parameters(), **self.optimizer_params)


class TabNetClassifier(TabModel):
    def __post_init__(self):
        super(TabNetClassifier, self).__post_init__()
        self._default_loss = torch.nn.functional.cross_entropy

    def prepare_target(self, y):
        return np.vectorize(self.target_mapper.get)(y)

    def compute_loss(self, y_pred, y_true):
        return self.loss_fn(y_pred, y_true.long())

    def update_fit_params(self, X_train, y_train):
        self.classes_ = np.unique(y_train)
        self.output_dim = len(self.classes_)
        self.early_stopping_metric = "valid_auc"  # binary task
        self.target_mapper = {class_label: index for index, class_label in enumerate(self.classes_)}
        self.preds_mapper = {str(index): int(class_label) for index, class_label in enumerate(self.classes_)}

    def eval_metrics(self, name, y_true, y_score):
        return {f"{name}_accuracy": float(np.mean(np.argmax(y_score, axis=1) == y_true)),
                f"{name}_auc": float(roc_auc(y_true, y_score))}

    def stack_batches(self, list_y_true, list_y_score):
        return np.hstack(list_y_true), softmax(np.vstack(list_y_score), axis=1)

    def predict_func(self, outputs):
        return np.vectorize(self.preds_mapper.get)(np.argmax(outputs, axis=1).astype(str))

    def predict_proba(self, X):
        self.network.eval()
        dataloader = DataLoader(TorchDataset(X), batch_size=self.batch_size, shuffle=False)
        results = []
        for batch_nb, data in enumerate(dataloader):
            data = data.to(self.device).float()
            output, M_loss = self.network(data)
            results.append(torch.nn.Softmax(dim=1)(output).cpu().detach().numpy())
        return np.vstack(results)


def make_data(n, rng):
    # six numerical columns and two categorical ones (4 and 3 levels); the label mixes both
    num = rng.randn(n, 6).astype(np.float32)
    cat_a, cat_b = rng.randint(0, 4, n), rng.randint(0, 3, n)
    logits = 1.5 * num[:, 0] - num[:, 1] * num[:, 2] + 0.8 * (cat_a == 2) - 0.6 * cat_b + 0.3 * rng.randn(n)
    X = np.concatenate([num[:, :3], cat_a[:, None], num[:, 3:], cat_b[:, None]], axis=1).astype(np.float32)
    return X, (logits > np.median(logits)).astype(np.int64)


if __name__ == "__main__":
    rng = np.random.RandomState(0)
    (X_train, y_train), (X_valid, y_valid), (X_test, y_test) = [make_data(n, rng) for n in (512, 256, 256)]
    params = dict(n_d=8, n_a=8, n_steps=3, cat_idxs=[3, 7], cat_dims=[4, 3], cat_emb_dim=2, seed=0,
                  grouped_features=[[0, 1], [4, 5]], optimizer_fn=torch.optim.Adam,
                  optimizer_params=dict(lr=2e-2))
    clf = TabNetClassifier(**params)
    clf.fit(X_train, y_train, eval_set=[(X_valid, y_valid)], max_epochs=5, patience=3, batch_size=128,
            virtual_batch_size=32)
    proba = clf.predict_proba(X_test)
    print(f"test accuracy {np.mean(clf.predict(X_test) == y_test):.4f}, test auc {roc_auc(y_test, proba):.4f}")
    explain_matrix, masks = clf.explain(X_test[:16], normalize=True)
    print("feature importances", np.round(clf.feature_importances_, 3), "masks", sorted(masks))

    with tempfile.TemporaryDirectory() as tmp:  # save then load with map_location=self.device
        saved_filepath = clf.save_model(os.path.join(tmp, "tabnet_model_test_1"))
        loaded_clf = TabNetClassifier()
        loaded_clf.load_model(saved_filepath)
    assert np.allclose(loaded_clf.predict_proba(X_test), proba, atol=1e-5), "reloaded model disagrees"
    print(f"done: test accuracy {np.mean(loaded_clf.predict(X_test) == y_test):.4f}")
