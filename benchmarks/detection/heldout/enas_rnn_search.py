"""Searches a recurrent cell with ENAS on a small synthetic PTB-style corpus (shared-RNN steps on controller-sampled
DAGs, REINFORCE controller steps on validation perplexity, derive + evaluate + checkpoint each epoch), then resumes
from the checkpoint, as carpedm20/ENAS-pytorch does: ``args.cuda``/``args.num_gpu`` drive the placement,
`build_model` calls ``.cuda()`` on both models when ``num_gpu == 1``, `batchify` moves the corpus with ``.cuda()``,
`get_variable(x, cuda)` builds hidden states, the controller's cached static inputs and the REINFORCE advantages
(``torch.Tensor(numpy)`` then ``.cuda()``), actions come from ``multinomial`` and DAG indices are read with ``.item()``,
entropies and hidden norms come back with ``.data.cpu().numpy()``, dropout masks use ``weight.data.new(...)``, and
`load_model` passes ``map_location=lambda storage, loc: storage`` only when ``num_gpu == 0``.

Modeled on: carpedm20/ENAS-pytorch, main.py, config.py, trainer.py, utils.py, data/text.py, models/shared_base.py,
models/shared_rnn.py and models/controller.py at commit 0468b8c4ddcf540c9ed6f80c27289792ff9118c9
(https://github.com/carpedm20/ENAS-pytorch/blob/0468b8c4ddcf540c9ed6f80c27289792ff9118c9/trainer.py,
https://github.com/carpedm20/ENAS-pytorch/blob/0468b8c4ddcf540c9ed6f80c27289792ff9118c9/models/shared_rnn.py).

Kept: `get_variable`, `batchify`, `to_item`, `keydefaultdict`, `Corpus`, `_get_dropped_weights`, `EmbeddingDropout`,
`LockedDropout`, the shared `RNN` (static init-hidden cache, numpy hidden-norm clipping, BFS `cell`, batch norm),
`_construct_dags`, `Controller`, and `Trainer` (`build_model`, `train`, `get_loss`, `train_shared`, `get_reward`,
`train_controller` with EMA baseline, `evaluate`, `derive`, `get_batch`, `save_model`/`load_model`), `main`.

Changed to run here: the hidden-norm clipping's hard-coded ``torch.FloatTensor(mask).cuda()`` is ``.to(hidden.device)``
and its in-place ``hidden *=`` is out of place (autograd's version check rejects it); `train_controller` runs the
upstream commented-out ``self.shared.eval()`` so rewards are not scored in training mode (BatchNorm/dropout);
``--num_gpu`` defaults to ``1 if torch.cuda.is_available() else 0``; ``volatile`` is dropped, ``clip_grad_norm_`` and
``torch.sigmoid``/``torch.tanh`` replace removed names; `Dictionary` is folded into `Corpus`; TensorBoard, graphviz,
regularization penalties, max-grad log, reward discounting, lr decay, `SharedModel`, the CNN space and `single` mode
are left out; PTB files are generated into a temporary folder.
Shrunk: 60 words, 3.2k/320/320 tokens, 4 blocks, 32 hidden, batch 16, BPTT 10, 6+6 steps per epoch, 2 + 1 epochs.
"""
import argparse
import collections
import contextlib
import glob
import logging
import math
import os
import shutil
import tempfile
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Variable

logging.basicConfig(format='%(levelname)s %(message)s', level=logging.INFO)
logger = logging.getLogger('enas')
Node = collections.namedtuple('Node', ['id', 'name'])

def get_variable(inputs, cuda=False, **kwargs):
    if type(inputs) in [list, np.ndarray]:
        inputs = torch.Tensor(inputs)
    if cuda:
        out = Variable(inputs.cuda(), **kwargs)
    else:
        out = Variable(inputs, **kwargs)
    return out

def batchify(data, bsz, use_cuda):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    if use_cuda:
        data = data.cuda()
    return data

class keydefaultdict(defaultdict):
    def __missing__(self, key):
        ret = self[key] = self.default_factory(key)
        return ret

def to_item(x):
    """Converts x, possibly scalar and possibly tensor, to a Python scalar."""
    return x if isinstance(x, (float, int)) else x.item()

class Corpus(object):  # data/text.py, with the Dictionary folded in
    def __init__(self, path):
        self.word2idx, self.idx2word = {}, []
        self.train, self.valid, self.test = [self.tokenize(os.path.join(path, f'{split}.txt'))
                                             for split in ('train', 'valid', 'test')]
        self.num_tokens = len(self.idx2word)
    def tokenize(self, path):
        with open(path, 'r') as f:
            words = [word for line in f for word in line.split() + ['<eos>']]
        for word in words:
            if word not in self.word2idx:
                self.idx2word.append(word)
                self.word2idx[word] = len(self.idx2word) - 1
        return torch.LongTensor([self.word2idx[word] for word in words])

def _get_dropped_weights(w_raw, dropout_p, is_training):
    dropped_w = F.dropout(w_raw, p=dropout_p, training=is_training)
    if isinstance(dropped_w, torch.nn.Parameter):
        dropped_w = dropped_w.clone()
    return dropped_w

class EmbeddingDropout(torch.nn.Embedding):
    def __init__(self, num_embeddings, embedding_dim, dropout=0.1):
        torch.nn.Embedding.__init__(self, num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.dropout = dropout
    def forward(self, inputs):
        dropout = self.dropout if self.training else 0
        if dropout:
            mask = self.weight.data.new(self.weight.size(0), 1).bernoulli_(1 - dropout)
            mask = mask.expand_as(self.weight) / (1 - dropout)
            masked_weight = self.weight * Variable(mask)
        else:
            masked_weight = self.weight
        return F.embedding(inputs, masked_weight)

class LockedDropout(nn.Module):
    def forward(self, x, dropout=0.5):
        if not self.training or not dropout:
            return x
        m = x.data.new(1, x.size(1), x.size(2)).bernoulli_(1 - dropout)
        mask = Variable(m, requires_grad=False) / (1 - dropout)
        return mask.expand_as(x) * x

class RNN(torch.nn.Module):  # models.shared_base.SharedModel
    """Shared RNN model."""
    def __init__(self, args, corpus):
        torch.nn.Module.__init__(self)
        self.args, self.corpus = args, corpus
        self.decoder = nn.Linear(args.shared_hid, corpus.num_tokens)
        self.encoder = EmbeddingDropout(corpus.num_tokens, args.shared_embed, dropout=args.shared_dropoute)
        self.lockdrop = LockedDropout()
        if self.args.tie_weights:
            self.decoder.weight = self.encoder.weight
        self.w_xc = nn.Linear(args.shared_embed, args.shared_hid)
        self.w_xh = nn.Linear(args.shared_embed, args.shared_hid)
        self.w_hc_raw = torch.nn.Parameter(torch.Tensor(args.shared_hid, args.shared_hid))
        self.w_hh_raw = torch.nn.Parameter(torch.Tensor(args.shared_hid, args.shared_hid))
        self.w_hc, self.w_hh = None, None
        self.w_h, self.w_c = collections.defaultdict(dict), collections.defaultdict(dict)
        for idx in range(args.num_blocks):
            for jdx in range(idx + 1, args.num_blocks):
                self.w_h[idx][jdx] = nn.Linear(args.shared_hid, args.shared_hid, bias=False)
                self.w_c[idx][jdx] = nn.Linear(args.shared_hid, args.shared_hid, bias=False)
        self._w_h = nn.ModuleList([self.w_h[idx][jdx] for idx in self.w_h for jdx in self.w_h[idx]])
        self._w_c = nn.ModuleList([self.w_c[idx][jdx] for idx in self.w_c for jdx in self.w_c[idx]])
        self.batch_norm = nn.BatchNorm1d(args.shared_hid) if args.mode == 'train' else None
        self.reset_parameters()
        self.static_init_hidden = keydefaultdict(self.init_hidden)
    def forward(self, inputs, dag, hidden=None, is_train=True):
        time_steps, batch_size = inputs.size(0), inputs.size(1)
        is_train = is_train and self.args.mode in ['train']
        self.w_hh = _get_dropped_weights(self.w_hh_raw, self.args.shared_wdrop, self.training)
        self.w_hc = _get_dropped_weights(self.w_hc_raw, self.args.shared_wdrop, self.training)
        if hidden is None:
            hidden = self.static_init_hidden[batch_size]
        embed = self.encoder(inputs)
        if self.args.shared_dropouti > 0:
            embed = self.lockdrop(embed, self.args.shared_dropouti if is_train else 0)
        clipped_num, max_clipped_norm, h1tohT, logits = 0, 0, [], []
        for step in range(time_steps):
            logit, hidden = self.cell(embed[step], hidden, dag)
            hidden_norms, max_norm = hidden.norm(dim=-1), 25.0
            if hidden_norms.data.max() > max_norm:
                # This workaround for PyTorch v0.3.1 does everything in numpy
                hidden_norms = hidden_norms.data.cpu().numpy()
                clipped_num += 1
                max_clipped_norm = max(max_clipped_norm, hidden_norms.max())
                clip_select = hidden_norms > max_norm
                mask = np.ones(hidden.size())
                mask[clip_select] = (max_norm / hidden_norms[clip_select])[:, np.newaxis]
                hidden = hidden * torch.autograd.Variable(torch.FloatTensor(mask).to(hidden.device),
                                                          requires_grad=False)
            logits.append(logit)
            h1tohT.append(hidden)
        if clipped_num > 0:
            logger.info(f'clipped {clipped_num} hidden states in one forward pass. '
                        f'max clipped hidden state norm: {max_clipped_norm}')
        h1tohT, output = torch.stack(h1tohT), torch.stack(logits)
        raw_output = output
        if self.args.shared_dropout > 0:
            output = self.lockdrop(output, self.args.shared_dropout if is_train else 0)
        dropped_output = output
        decoded = self.decoder(output.view(output.size(0) * output.size(1), output.size(2)))
        decoded = decoded.view(output.size(0), output.size(1), decoded.size(1))
        extra_out = {'dropped': dropped_output, 'hiddens': h1tohT, 'raw': raw_output}
        return decoded, hidden, extra_out
    def cell(self, x, h_prev, dag):
        """Computes a single pass through the discovered RNN cell."""
        c, h, f = {}, {}, {}
        f[0] = self.get_f(dag[-1][0].name)
        c[0] = torch.sigmoid(self.w_xc(x) + F.linear(h_prev, self.w_hc, None))
        h[0] = c[0] * f[0](self.w_xh(x) + F.linear(h_prev, self.w_hh, None)) + (1 - c[0]) * h_prev
        leaf_node_ids, q = [], collections.deque([0])
        while len(q) > 0:
            node_id = q.popleft()
            nodes = dag[node_id]
            for next_node in nodes:
                next_id = next_node.id
                if next_id == self.args.num_blocks:
                    leaf_node_ids.append(node_id)
                    assert len(nodes) == 1, 'parent of leaf node should have only one child'
                    continue
                w_h, w_c = self.w_h[node_id][next_id], self.w_c[node_id][next_id]
                f[next_id] = self.get_f(next_node.name)
                c[next_id] = torch.sigmoid(w_c(h[node_id]))
                h[next_id] = c[next_id] * f[next_id](w_h(h[node_id])) + (1 - c[next_id]) * h[node_id]
                q.append(next_id)
        output = torch.mean(torch.stack([h[node_id] for node_id in leaf_node_ids], 2), -1)  # average loose ends
        if self.batch_norm is not None:
            output = self.batch_norm(output)
        return output, h[self.args.num_blocks - 1]
    def init_hidden(self, batch_size):
        zeros = torch.zeros(batch_size, self.args.shared_hid)
        return get_variable(zeros, self.args.cuda, requires_grad=False)
    def get_f(self, name):
        return {'relu': F.relu, 'tanh': torch.tanh, 'identity': lambda x: x, 'sigmoid': torch.sigmoid}[name.lower()]
    def reset_parameters(self):
        init_range = 0.025 if self.args.mode == 'train' else 0.04
        for param in self.parameters():
            param.data.uniform_(-init_range, init_range)
        self.decoder.bias.data.fill_(0)

def _construct_dags(prev_nodes, activations, func_names, num_blocks):
    dags = []
    for nodes, func_ids in zip(prev_nodes, activations):
        dag = collections.defaultdict(list)
        dag[-1] = [Node(0, func_names[func_ids[0]])]
        dag[-2] = [Node(0, func_names[func_ids[0]])]
        for jdx, (idx, func_id) in enumerate(zip(nodes, func_ids[1:])):
            dag[to_item(idx)].append(Node(jdx + 1, func_names[func_id]))
        leaf_nodes = set(range(num_blocks)) - dag.keys()
        for idx in leaf_nodes:
            dag[idx] = [Node(num_blocks, 'avg')]
        dag[num_blocks] = [Node(num_blocks + 1, 'h[t]')]  # last h[t] node
        dags.append(dag)
    return dags

class Controller(torch.nn.Module):
    def __init__(self, args):
        torch.nn.Module.__init__(self)
        self.args = args
        self.num_tokens = [len(args.shared_rnn_activations)]
        for idx in range(self.args.num_blocks):
            self.num_tokens += [idx + 1, len(args.shared_rnn_activations)]
        self.func_names = args.shared_rnn_activations
        self.encoder = torch.nn.Embedding(sum(self.num_tokens), args.controller_hid)
        self.lstm = torch.nn.LSTMCell(args.controller_hid, args.controller_hid)
        self.decoders = [torch.nn.Linear(args.controller_hid, size) for size in self.num_tokens]
        self._decoders = torch.nn.ModuleList(self.decoders)
        self.reset_parameters()
        self.static_init_hidden = keydefaultdict(self.init_hidden)
        def _get_default_hidden(key):  # noqa: E306
            return get_variable(torch.zeros(key, self.args.controller_hid), self.args.cuda, requires_grad=False)
        self.static_inputs = keydefaultdict(_get_default_hidden)
    def reset_parameters(self):
        for param in self.parameters():
            param.data.uniform_(-0.1, 0.1)  # init_range
        for decoder in self.decoders:
            decoder.bias.data.fill_(0)
    def forward(self, inputs, hidden, block_idx, is_embed):
        embed = self.encoder(inputs) if not is_embed else inputs
        hx, cx = self.lstm(embed, hidden)
        logits = self.decoders[block_idx](hx)
        logits /= self.args.softmax_temperature
        if self.args.mode == 'train':  # exploration
            logits = (self.args.tanh_c * torch.tanh(logits))
        return logits, (hx, cx)
    def sample(self, batch_size=1, with_details=False, save_dir=None):
        inputs = self.static_inputs[batch_size]  # [B, L, H]
        hidden = self.static_init_hidden[batch_size]
        activations, entropies, log_probs, prev_nodes = [], [], [], []
        for block_idx in range(2 * (self.args.num_blocks - 1) + 1):
            logits, hidden = self.forward(inputs, hidden, block_idx, is_embed=(block_idx == 0))
            probs, log_prob = F.softmax(logits, dim=-1), F.log_softmax(logits, dim=-1)
            entropy = -(log_prob * probs).sum(1, keepdim=False)
            action = probs.multinomial(num_samples=1).data
            selected_log_prob = log_prob.gather(1, get_variable(action, requires_grad=False))
            entropies.append(entropy)
            log_probs.append(selected_log_prob[:, 0])
            mode = block_idx % 2  # 0: function, 1: previous node
            inputs = get_variable(action[:, 0] + sum(self.num_tokens[:mode]), requires_grad=False)
            (activations if mode == 0 else prev_nodes).append(action[:, 0])
        prev_nodes, activations = torch.stack(prev_nodes).transpose(0, 1), torch.stack(activations).transpose(0, 1)
        dags = _construct_dags(prev_nodes, activations, self.func_names, self.args.num_blocks)
        if with_details:
            return dags, torch.cat(log_probs), torch.cat(entropies)
        return dags
    def init_hidden(self, batch_size):
        zeros = torch.zeros(batch_size, self.args.controller_hid)
        return (get_variable(zeros, self.args.cuda, requires_grad=False),
                get_variable(zeros.clone(), self.args.cuda, requires_grad=False))

def _get_optimizer(name):
    return {'sgd': torch.optim.SGD, 'adam': torch.optim.Adam}[name.lower()]

def _get_no_grad_ctx_mgr():
    return torch.no_grad() if float(torch.__version__[0:3]) >= 0.4 else contextlib.suppress()

class Trainer(object):
    """A class to wrap training code."""
    def __init__(self, args, dataset):
        self.args, self.cuda, self.dataset = args, args.cuda, dataset
        self.controller_step, self.epoch, self.shared_step, self.start_epoch = 0, 0, 0, 0
        self.train_data = batchify(dataset.train, args.batch_size, self.cuda)
        self.valid_data = batchify(dataset.valid, args.batch_size, self.cuda)
        self.eval_data = batchify(dataset.valid, args.test_batch_size, self.cuda)
        self.test_data = batchify(dataset.test, args.test_batch_size, self.cuda)
        self.max_length = self.args.shared_rnn_max_length
        self.build_model()
        if self.args.load_path:
            self.load_model()
        shared_optimizer = _get_optimizer(self.args.shared_optim)
        controller_optimizer = _get_optimizer(self.args.controller_optim)
        self.shared_optim = shared_optimizer(self.shared.parameters(), lr=self.shared_lr,
                                             weight_decay=self.args.shared_l2_reg)
        self.controller_optim = controller_optimizer(self.controller.parameters(), lr=self.args.controller_lr)
        self.ce = nn.CrossEntropyLoss()
    def build_model(self):
        self.shared = RNN(self.args, self.dataset)
        self.controller = Controller(self.args)
        if self.args.num_gpu == 1:
            self.shared.cuda()
            self.controller.cuda()
    def train(self, single=False):
        dag = None
        if self.args.shared_initial_step > 0:
            self.train_shared(self.args.shared_initial_step)
            self.train_controller()
        for self.epoch in range(self.start_epoch, self.args.max_epoch):
            self.train_shared(dag=dag)  # 1. Training the shared parameters omega of the child models
            if not single:
                self.train_controller()  # 2. Training the controller parameters theta
            if self.epoch % self.args.save_epoch == 0:
                with _get_no_grad_ctx_mgr():
                    best_dag = dag if dag else self.derive()
                    self.evaluate(self.eval_data, best_dag, 'val_best', max_num=self.args.batch_size * 100)
                self.save_model()
    def get_loss(self, inputs, targets, hidden, dags):
        if not isinstance(dags, list):
            dags = [dags]
        loss = 0
        for dag in dags:
            output, hidden, extra_out = self.shared(inputs, dag, hidden=hidden)
            output_flat = output.view(-1, self.dataset.num_tokens)
            loss += (self.ce(output_flat, targets) / self.args.shared_num_sample)
        assert len(dags) == 1, 'there are multiple `hidden` for multple `dags`'
        return loss, hidden, extra_out
    def train_shared(self, max_step=None, dag=None):
        model = self.shared
        model.train()
        self.controller.eval()
        hidden = self.shared.init_hidden(self.args.batch_size)
        max_step = self.args.shared_max_step if max_step is None else min(self.args.shared_max_step, max_step)
        abs_max_hidden_norm, step, raw_total_loss, total_loss, train_idx = 0, 0, 0, 0, 0
        while train_idx < self.train_data.size(0) - 1 - 1:
            if step > max_step:
                break
            dags = dag if dag else self.controller.sample(self.args.shared_num_sample)
            inputs, targets = self.get_batch(self.train_data, train_idx, self.max_length)
            loss, hidden, extra_out = self.get_loss(inputs, targets, hidden, dags)
            hidden.detach_()
            raw_total_loss += loss.data
            self.shared_optim.zero_grad()
            loss.backward()
            h1tohT = extra_out['hiddens']
            abs_max_hidden_norm = max(abs_max_hidden_norm, to_item(h1tohT.norm(dim=-1).data.max()))
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.args.shared_grad_clip)
            self.shared_optim.step()
            total_loss += loss.data
            if ((step % self.args.log_step) == 0) and (step > 0):  # _summarize_shared_train
                logger.info(f'| epoch {self.epoch:3d} | raw loss {to_item(raw_total_loss) / self.args.log_step:.2f}')
                raw_total_loss, total_loss = 0, 0
            step, self.shared_step, train_idx = step + 1, self.shared_step + 1, train_idx + self.max_length
    def get_reward(self, dag, entropies, hidden, valid_idx=0):
        if not isinstance(entropies, np.ndarray):
            entropies = entropies.data.cpu().numpy()
        inputs, targets = self.get_batch(self.valid_data, valid_idx, self.max_length, volatile=True)
        valid_loss, hidden, _ = self.get_loss(inputs, targets, hidden, dag)
        valid_ppl = math.exp(to_item(valid_loss.data))
        R = self.args.reward_c / valid_ppl
        if self.args.entropy_mode == 'reward':
            rewards = R + self.args.entropy_coeff * entropies
        elif self.args.entropy_mode == 'regularizer':
            rewards = R * np.ones_like(entropies)
        return rewards, hidden
    def train_controller(self):
        model = self.controller
        model.train()
        self.shared.eval()  # commented out upstream ("Leads to loss being uniformly zero"); see the docstring
        baseline, entropy_history, reward_history = None, [], []
        hidden = self.shared.init_hidden(self.args.batch_size)
        total_loss, valid_idx = 0, 0
        for step in range(self.args.controller_max_step):
            dags, log_probs, entropies = self.controller.sample(with_details=True)  # sample models
            np_entropies = entropies.data.cpu().numpy()
            with _get_no_grad_ctx_mgr():
                rewards, hidden = self.get_reward(dags, np_entropies, hidden, valid_idx)
            reward_history.extend(rewards)
            entropy_history.extend(np_entropies)
            if baseline is None:  # moving average baseline
                baseline = rewards
            else:
                decay = self.args.ema_baseline_decay
                baseline = decay * baseline + (1 - decay) * rewards
            adv = rewards - baseline
            loss = -log_probs * get_variable(adv, self.cuda, requires_grad=False)  # policy loss
            if self.args.entropy_mode == 'regularizer':
                loss -= self.args.entropy_coeff * entropies
            loss = loss.sum()
            self.controller_optim.zero_grad()
            loss.backward()
            if self.args.controller_grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), self.args.controller_grad_clip)
            self.controller_optim.step()
            total_loss += to_item(loss.data)
            if ((step % self.args.log_step) == 0) and (step > 0):
                logger.info(f'| epoch {self.epoch:3d} | R {np.mean(reward_history):.5f} '
                            f'| entropy {np.mean(entropy_history):.4f} | loss {total_loss / self.args.log_step:.5f}')
                reward_history, entropy_history, total_loss = [], [], 0
            self.controller_step += 1
            prev_valid_idx, valid_idx = valid_idx, ((valid_idx + self.max_length) % (self.valid_data.size(0) - 1))
            if prev_valid_idx > valid_idx:
                hidden = self.shared.init_hidden(self.args.batch_size)
    def evaluate(self, source, dag, name, batch_size=1, max_num=None):
        self.shared.eval()
        self.controller.eval()
        data, total_loss = source[:max_num * self.max_length], 0
        hidden = self.shared.init_hidden(batch_size)
        for count, idx in enumerate(range(0, data.size(0) - 1, self.max_length)):
            inputs, targets = self.get_batch(data, idx, volatile=True)
            output, hidden, _ = self.shared(inputs, dag, hidden=hidden, is_train=False)
            output_flat = output.view(-1, self.dataset.num_tokens)
            total_loss += len(inputs) * self.ce(output_flat, targets).data
            hidden.detach_()
        val_loss = to_item(total_loss) / len(data)
        ppl = math.exp(val_loss)
        logger.info(f'eval | loss: {val_loss:8.2f} | ppl: {ppl:8.2f}')
        return ppl
    def derive(self, sample_num=None, valid_idx=0):
        hidden = self.shared.init_hidden(self.args.batch_size)
        sample_num = self.args.derive_num_sample if sample_num is None else sample_num
        dags, _, entropies = self.controller.sample(sample_num, with_details=True)
        max_R, best_dag = 0, None
        for dag in dags:
            R, _ = self.get_reward(dag, entropies, hidden, valid_idx)
            if R.max() > max_R:
                max_R, best_dag = R.max(), dag
        logger.info(f'derive | max_R: {max_R:8.6f}')
        return best_dag
    @property
    def shared_lr(self):
        degree = max(self.epoch - self.args.shared_decay_after + 1, 0)
        return self.args.shared_lr * (self.args.shared_decay ** degree)
    def get_batch(self, source, idx, length=None, volatile=False):
        length = min(length if length else self.max_length, len(source) - 1 - idx)
        return Variable(source[idx:idx + length]), Variable(source[idx + 1:idx + 1 + length].view(-1))
    @property
    def shared_path(self):
        return f'{self.args.model_dir}/shared_epoch{self.epoch}_step{self.shared_step}.pth'
    @property
    def controller_path(self):
        return f'{self.args.model_dir}/controller_epoch{self.epoch}_step{self.controller_step}.pth'
    def get_saved_models_info(self):
        paths = sorted(glob.glob(os.path.join(self.args.model_dir, '*.pth')))
        def get_numbers(items, delimiter, idx, replace_word, must_contain=''):
            return list(set([int(name.split(delimiter)[idx].replace(replace_word, ''))
                             for name in basenames if must_contain in name]))
        basenames = [os.path.basename(path.rsplit('.', 1)[0]) for path in paths]
        epochs = sorted(get_numbers(basenames, '_', 1, 'epoch'))
        shared_steps = sorted(get_numbers(basenames, '_', 2, 'step', 'shared'))
        controller_steps = sorted(get_numbers(basenames, '_', 2, 'step', 'controller'))
        return epochs, shared_steps, controller_steps
    def save_model(self):
        torch.save(self.shared.state_dict(), self.shared_path)
        torch.save(self.controller.state_dict(), self.controller_path)
        logger.info(f'[*] SAVED: {os.path.basename(self.shared_path)}, {os.path.basename(self.controller_path)}')
        epochs, shared_steps, controller_steps = self.get_saved_models_info()
        for epoch in epochs[:-self.args.max_save_num]:
            for path in glob.glob(os.path.join(self.args.model_dir, f'*_epoch{epoch}_*.pth')):
                os.remove(path)
    def load_model(self):
        epochs, shared_steps, controller_steps = self.get_saved_models_info()
        if len(epochs) == 0:
            logger.info(f'[!] No checkpoint found in {self.args.model_dir}...')
            return
        self.epoch = self.start_epoch = max(epochs)
        self.shared_step, self.controller_step = max(shared_steps), max(controller_steps)
        if self.args.num_gpu == 0:
            map_location = lambda storage, loc: storage  # noqa: E731
        else:
            map_location = None
        self.shared.load_state_dict(torch.load(self.shared_path, map_location=map_location))
        self.controller.load_state_dict(torch.load(self.controller_path, map_location=map_location))
        logger.info(f'[*] LOADED: {os.path.basename(self.shared_path)}, {os.path.basename(self.controller_path)}')

def get_args(argv):
    parser = argparse.ArgumentParser()
    for name, default in [('num_blocks', 4), ('controller_hid', 32), ('shared_wdrop', 0.5), ('shared_dropout', 0.4),
                          ('shared_dropoute', 0.1), ('shared_dropouti', 0.65), ('shared_embed', 32), ('shared_hid', 32),
                          ('shared_rnn_max_length', 10), ('batch_size', 16), ('test_batch_size', 1), ('max_epoch', 2),
                          ('reward_c', 80), ('ema_baseline_decay', 0.95), ('controller_max_step', 6),
                          ('controller_lr', 3.5e-4), ('controller_grad_clip', 0.), ('tanh_c', 2.5),
                          ('softmax_temperature', 5.0), ('entropy_coeff', 1e-4), ('shared_initial_step', 0),
                          ('shared_max_step', 6), ('shared_num_sample', 1), ('shared_lr', 20.0), ('shared_decay', 0.96),
                          ('shared_decay_after', 15.), ('shared_l2_reg', 1e-7), ('shared_grad_clip', 0.25),
                          ('derive_num_sample', 4), ('log_step', 3), ('save_epoch', 1), ('max_save_num', 4),
                          ('random_seed', 12345), ('num_gpu', 1 if torch.cuda.is_available() else 0)]:
        parser.add_argument('--' + name, type=type(default), default=default)
    parser.add_argument('--tie_weights', type=lambda v: v.lower() in ('true'), default=True)
    for name, default in [('mode', 'train'), ('entropy_mode', 'reward'), ('shared_optim', 'sgd'),
                          ('controller_optim', 'adam'), ('load_path', ''), ('model_dir', ''), ('data_path', '')]:
        parser.add_argument('--' + name, type=str, default=default)
    parser.add_argument('--shared_rnn_activations', type=eval, default="['tanh', 'ReLU', 'identity', 'sigmoid']")
    args = parser.parse_args(argv)
    setattr(args, 'cuda', args.num_gpu > 0)
    return args

def main(args):
    torch.manual_seed(args.random_seed)
    if args.num_gpu > 0:
        torch.cuda.manual_seed(args.random_seed)
    dataset = Corpus(args.data_path)
    trnr = Trainer(args, dataset)
    if args.mode == 'train':
        trnr.train()
    elif args.mode == 'derive':
        trnr.derive()
    return trnr

def write_ptb_like(path, n_train=3200, n_other=320, vocab=60, seed=0):
    rng = np.random.RandomState(seed)
    trans = rng.dirichlet(np.ones(vocab) * 0.1, size=vocab)  # a sparse Markov chain over 'w0'..'w59'
    os.makedirs(path)
    for split, n in (('train', n_train), ('valid', n_other), ('test', n_other)):
        with open(os.path.join(path, split + '.txt'), 'w') as f:
            w, count = rng.randint(vocab), 0
            while count < n:
                line = [f'w{(w := rng.choice(vocab, p=trans[w]))}' for _ in range(rng.randint(5, 15))]
                f.write(' '.join(line) + '\n')
                count += len(line) + 1

if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="enas_")
    try:
        data_path, model_dir = os.path.join(tmp, 'data', 'ptb'), os.path.join(tmp, 'logs', 'ptb_run')
        write_ptb_like(data_path)
        os.makedirs(model_dir)
        main(get_args(['--data_path', data_path, '--model_dir', model_dir]))
        trainer = main(get_args(['--data_path', data_path, '--model_dir', model_dir, '--load_path', model_dir,
                                 '--max_epoch', '2']))  # resumes from the latest saved epoch
        with _get_no_grad_ctx_mgr():
            ppl = trainer.evaluate(trainer.test_data, trainer.derive(), 'test_best', max_num=32)
        print(f"done: resumed at epoch {trainer.start_epoch}, shared step {trainer.shared_step}, test ppl {ppl:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
