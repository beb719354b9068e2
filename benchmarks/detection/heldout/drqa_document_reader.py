"""Trains DrQA's Document Reader (stacked BiLSTMs over document and question, an averaged question vector and bilinear
start/end attention) on a synthetic SQuAD-like task the way facebookresearch/DrQA's scripts/reader/train.py does: a
`DocReader` with its own `use_cuda` flag, `cuda()` and `parallelize()` (DataParallel), a `.checkpoint` per epoch and
the best model as `.mdl`; a second run resumes from the checkpoint, then predict.py reloads the `.mdl` and predicts.

Modeled on: facebookresearch/DrQA, drqa/reader/{model,rnn_reader,layers,vector,data,utils,config}.py,
scripts/reader/train.py and scripts/reader/predict.py at commit 6d7c1b7087b86cfe9bdf84a279adb58dceada3cd.
Kept: `DocReader` (`update` moving `ex[:5]` with `e.cuda(non_blocking=True)` unless None and the targets alike;
`predict` under `torch.no_grad()` with `score_s.data.cpu()` before the numpy `decode`; `save`/`checkpoint` unwrapping
`.module` when parallel; `load`/`load_checkpoint` with `map_location=lambda storage, loc: storage`; `cuda()`,
`parallelize()`); `StackedBRNN` (packed path in eval with `list(lengths[idx_sort])`, pad-up via
`.type(output.data.type())`), `BilinearSeqAttn`, `uniform_weights` (`if x.data.is_cuda: alpha = alpha.cuda()`),
`weighted_avg`; `vectorize`/`batchify`; train.py's `train`, `validate_unofficial`, `eval_accuracies`, `main`
(`load_checkpoint(checkpoint_file, args)` as written, `model.cuda()` then `model.parallelize()`, `pin_memory=args.cuda`)
and its `__main__` (`args.cuda`, `torch.cuda.set_device(args.gpu)`, seeding); predict.py (load, `.cuda()`, predict).
Changed to run here: `torch.BoolTensor` masks (uint8 `masked_fill_` is refused now); `keepdim=True` in
`uniform_weights` (pre-0.4 broadcasting); `torch.load(..., weights_only=False)`; argparse -> `Namespace`; no
CoreNLP/GloVe/SQuAD: `make_squad` writes tokenized examples, predict.py reads them instead of tokenizing; left out:
manual features, question alignment and self-attention merge (`question_merge='avg'`), RNN output dropout, the official
eval, `Dictionary` (a plain dict), partial tuning. Shrunk: dims 300/128 -> 16/16, 2 layers, 96/32 examples, batch 16,
2 epochs + 1 resumed, workers 0.
"""
import argparse
import copy
import json
import logging
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import Dataset

logger = logging.getLogger("drqa")

# ------------------------------------------------------------------------------ drqa/reader/config.py
MODEL_ARCHITECTURE = {'model_type', 'embedding_dim', 'hidden_size', 'doc_layers', 'question_layers', 'rnn_type',
                      'concat_rnn_layers', 'question_merge', 'use_qemb', 'use_in_question', 'use_tf'}
MODEL_OPTIMIZER = {'fix_embeddings', 'optimizer', 'weight_decay', 'rnn_padding', 'dropout_rnn', 'dropout_rnn_output',
                   'dropout_emb', 'max_len', 'grad_clipping', 'tune_partial'}

def get_model_args(args):
    required_args = MODEL_ARCHITECTURE | MODEL_OPTIMIZER
    return argparse.Namespace(**{k: v for k, v in vars(args).items() if k in required_args})

# ------------------------------------------------------------------------------ drqa/reader/layers.py
class StackedBRNN(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, dropout_rate=0, dropout_output=False,
                 rnn_type=nn.LSTM, concat_layers=False, padding=False):
        super(StackedBRNN, self).__init__()
        self.padding, self.dropout_output, self.dropout_rate = padding, dropout_output, dropout_rate
        self.num_layers, self.concat_layers = num_layers, concat_layers
        self.rnns = nn.ModuleList()
        for i in range(num_layers):
            input_size = input_size if i == 0 else 2 * hidden_size
            self.rnns.append(rnn_type(input_size, hidden_size, num_layers=1, bidirectional=True))

    def forward(self, x, x_mask):
        if x_mask.data.sum() == 0:
            output = self._forward_unpadded(x, x_mask)  # No padding necessary.
        elif self.padding or not self.training:
            output = self._forward_padded(x, x_mask)  # Pad if we care or if its during eval.
        else:
            output = self._forward_unpadded(x, x_mask)  # We don't care.
        return output.contiguous()

    def _forward_unpadded(self, x, x_mask):
        outputs = [x.transpose(0, 1)]
        for i in range(self.num_layers):
            rnn_input = outputs[-1]
            if self.dropout_rate > 0:
                rnn_input = F.dropout(rnn_input, p=self.dropout_rate, training=self.training)
            outputs.append(self.rnns[i](rnn_input)[0])
        output = torch.cat(outputs[1:], 2) if self.concat_layers else outputs[-1]
        output = output.transpose(0, 1)
        return output

    def _forward_padded(self, x, x_mask):
        # Compute sorted sequence lengths
        lengths = x_mask.data.eq(0).long().sum(1).squeeze()
        _, idx_sort = torch.sort(lengths, dim=0, descending=True)
        _, idx_unsort = torch.sort(idx_sort, dim=0)
        lengths = list(lengths[idx_sort])
        x = x.index_select(0, idx_sort).transpose(0, 1)
        rnn_input = nn.utils.rnn.pack_padded_sequence(x, lengths)
        outputs = [rnn_input]
        for i in range(self.num_layers):
            rnn_input = outputs[-1]
            if self.dropout_rate > 0:
                dropout_input = F.dropout(rnn_input.data, p=self.dropout_rate, training=self.training)
                rnn_input = nn.utils.rnn.PackedSequence(dropout_input, rnn_input.batch_sizes)
            outputs.append(self.rnns[i](rnn_input)[0])
        for i, o in enumerate(outputs[1:], 1):
            outputs[i] = nn.utils.rnn.pad_packed_sequence(o)[0]
        output = torch.cat(outputs[1:], 2) if self.concat_layers else outputs[-1]
        output = output.transpose(0, 1)
        output = output.index_select(0, idx_unsort)
        # Pad up to original batch sequence length
        if output.size(1) != x_mask.size(1):
            padding = torch.zeros(output.size(0), x_mask.size(1) - output.size(1),
                                  output.size(2)).type(output.data.type())
            output = torch.cat([output, padding], 1)
        return output

class BilinearSeqAttn(nn.Module):
    def __init__(self, x_size, y_size, normalize=True):
        super(BilinearSeqAttn, self).__init__()
        self.normalize = normalize
        self.linear = nn.Linear(y_size, x_size)

    def forward(self, x, y, x_mask):
        Wy = self.linear(y)
        xWy = x.bmm(Wy.unsqueeze(2)).squeeze(2)
        xWy.data.masked_fill_(x_mask.data, -float('inf'))
        if self.training:
            alpha = F.log_softmax(xWy, dim=-1)  # In training we output log-softmax for NLL
        else:
            alpha = F.softmax(xWy, dim=-1)  # ...Otherwise 0-1 probabilities (normalize=True)
        return alpha

def uniform_weights(x, x_mask):
    alpha = torch.ones(x.size(0), x.size(1))
    if x.data.is_cuda:
        alpha = alpha.cuda()
    alpha = alpha * x_mask.eq(0).float()
    alpha = alpha / alpha.sum(1, keepdim=True).expand(alpha.size())
    return alpha

def weighted_avg(x, weights):
    return weights.unsqueeze(1).bmm(x).squeeze(1)

# ------------------------------------------------------------------------------ drqa/reader/rnn_reader.py
class RnnDocReader(nn.Module):
    RNN_TYPES = {'lstm': nn.LSTM, 'gru': nn.GRU, 'rnn': nn.RNN}

    def __init__(self, args, normalize=True):
        super(RnnDocReader, self).__init__()
        self.args = args
        self.embedding = nn.Embedding(args.vocab_size, args.embedding_dim, padding_idx=0)
        doc_input_size = args.embedding_dim + args.num_features
        self.doc_rnn = StackedBRNN(
            input_size=doc_input_size, hidden_size=args.hidden_size, num_layers=args.doc_layers,
            dropout_rate=args.dropout_rnn, dropout_output=args.dropout_rnn_output,
            concat_layers=args.concat_rnn_layers, rnn_type=self.RNN_TYPES[args.rnn_type], padding=args.rnn_padding)
        self.question_rnn = StackedBRNN(
            input_size=args.embedding_dim, hidden_size=args.hidden_size, num_layers=args.question_layers,
            dropout_rate=args.dropout_rnn, dropout_output=args.dropout_rnn_output,
            concat_layers=args.concat_rnn_layers, rnn_type=self.RNN_TYPES[args.rnn_type], padding=args.rnn_padding)
        doc_hidden_size = 2 * args.hidden_size * (args.doc_layers if args.concat_rnn_layers else 1)
        question_hidden_size = 2 * args.hidden_size * (args.question_layers if args.concat_rnn_layers else 1)
        self.start_attn = BilinearSeqAttn(doc_hidden_size, question_hidden_size, normalize=normalize)
        self.end_attn = BilinearSeqAttn(doc_hidden_size, question_hidden_size, normalize=normalize)

    def forward(self, x1, x1_f, x1_mask, x2, x2_mask):
        x1_emb, x2_emb = self.embedding(x1), self.embedding(x2)  # Embed both document and question
        if self.args.dropout_emb > 0:
            x1_emb = nn.functional.dropout(x1_emb, p=self.args.dropout_emb, training=self.training)
            x2_emb = nn.functional.dropout(x2_emb, p=self.args.dropout_emb, training=self.training)
        drnn_input = [x1_emb]
        if self.args.num_features > 0:
            drnn_input.append(x1_f)
        doc_hiddens = self.doc_rnn(torch.cat(drnn_input, 2), x1_mask)
        question_hiddens = self.question_rnn(x2_emb, x2_mask)
        q_merge_weights = uniform_weights(question_hiddens, x2_mask)  # question_merge == 'avg'
        question_hidden = weighted_avg(question_hiddens, q_merge_weights)
        start_scores = self.start_attn(doc_hiddens, question_hidden, x1_mask)
        end_scores = self.end_attn(doc_hiddens, question_hidden, x1_mask)
        return start_scores, end_scores

# ------------------------------------------------------------------------------ drqa/reader/model.py
class DocReader(object):
    def __init__(self, args, word_dict, feature_dict, state_dict=None, normalize=True):
        # Book-keeping.
        self.args, self.word_dict, self.feature_dict = args, word_dict, feature_dict
        self.args.vocab_size, self.args.num_features = len(word_dict), len(feature_dict)
        self.updates = 0
        self.use_cuda = False
        self.parallel = False
        self.network = RnnDocReader(args, normalize)  # args.model_type == 'rnn'
        if state_dict:
            self.network.load_state_dict(state_dict)

    def init_optimizer(self, state_dict=None):
        if self.args.fix_embeddings:
            for p in self.network.embedding.parameters():
                p.requires_grad = False
        parameters = [p for p in self.network.parameters() if p.requires_grad]
        self.optimizer = optim.Adamax(parameters, weight_decay=self.args.weight_decay)  # args.optimizer == 'adamax'

    def update(self, ex):
        """Forward a batch of examples; step the optimizer to update weights."""
        if not self.optimizer:
            raise RuntimeError('No optimizer set.')
        self.network.train()
        # Transfer to GPU
        if self.use_cuda:
            inputs = [e if e is None else e.cuda(non_blocking=True) for e in ex[:5]]
            target_s = ex[5].cuda(non_blocking=True)
            target_e = ex[6].cuda(non_blocking=True)
        else:
            inputs = [e if e is None else e for e in ex[:5]]
            target_s = ex[5]
            target_e = ex[6]
        score_s, score_e = self.network(*inputs)
        loss = F.nll_loss(score_s, target_s) + F.nll_loss(score_e, target_e)
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.network.parameters(), self.args.grad_clipping)
        self.optimizer.step()
        self.updates += 1
        return loss.item(), ex[0].size(0)

    def predict(self, ex, candidates=None, top_n=1):
        self.network.eval()
        # Transfer to GPU
        if self.use_cuda:
            inputs = [e if e is None else e.cuda(non_blocking=True) for e in ex[:5]]
        else:
            inputs = [e for e in ex[:5]]
        with torch.no_grad():
            score_s, score_e = self.network(*inputs)
        # Decode predictions
        score_s = score_s.data.cpu()
        score_e = score_e.data.cpu()
        return self.decode(score_s, score_e, top_n, self.args.max_len)

    @staticmethod
    def decode(score_s, score_e, top_n=1, max_len=None):
        pred_s, pred_e, pred_score = [], [], []
        max_len = max_len or score_s.size(1)
        for i in range(score_s.size(0)):
            # Outer product of scores to get full p_s * p_e matrix
            scores = torch.ger(score_s[i], score_e[i])
            scores.triu_().tril_(max_len - 1)
            scores = scores.numpy()
            scores_flat = scores.flatten()
            idx = np.argpartition(-scores_flat, top_n)[0:top_n]
            idx_sort = idx[np.argsort(-scores_flat[idx])]
            s_idx, e_idx = np.unravel_index(idx_sort, scores.shape)
            pred_s.append(s_idx)
            pred_e.append(e_idx)
            pred_score.append(scores_flat[idx_sort])
        return pred_s, pred_e, pred_score

    def save(self, filename):
        network = self.network.module if self.parallel else self.network
        state_dict = copy.copy(network.state_dict())
        state_dict.pop('fixed_embedding', None)
        params = {'state_dict': state_dict, 'word_dict': self.word_dict, 'feature_dict': self.feature_dict,
                  'args': self.args}
        torch.save(params, filename)

    def checkpoint(self, filename, epoch):
        network = self.network.module if self.parallel else self.network
        params = {'state_dict': network.state_dict(), 'word_dict': self.word_dict,
                  'feature_dict': self.feature_dict, 'args': self.args, 'epoch': epoch,
                  'optimizer': self.optimizer.state_dict()}
        torch.save(params, filename)

    @staticmethod
    def load(filename, new_args=None, normalize=True):
        logger.info('Loading model %s' % filename)
        saved_params = torch.load(filename, map_location=lambda storage, loc: storage, weights_only=False)
        word_dict, feature_dict = saved_params['word_dict'], saved_params['feature_dict']
        state_dict, args = saved_params['state_dict'], saved_params['args']
        return DocReader(args, word_dict, feature_dict, state_dict, normalize)

    @staticmethod
    def load_checkpoint(filename, normalize=True):
        logger.info('Loading model %s' % filename)
        saved_params = torch.load(filename, map_location=lambda storage, loc: storage, weights_only=False)
        word_dict, feature_dict = saved_params['word_dict'], saved_params['feature_dict']
        state_dict, epoch = saved_params['state_dict'], saved_params['epoch']
        optimizer, args = saved_params['optimizer'], saved_params['args']
        model = DocReader(args, word_dict, feature_dict, state_dict, normalize)
        model.init_optimizer(optimizer)
        return model, epoch

    def cuda(self):
        self.use_cuda = True
        self.network = self.network.cuda()

    def parallelize(self):
        """Use data parallel to copy the model across several gpus.
        This will take all gpus visible with CUDA_VISIBLE_DEVICES.
        """
        self.parallel = True
        self.network = torch.nn.DataParallel(self.network)

# ------------------------------------------------------------------------------ drqa/reader/vector.py
def vectorize(ex, model, single_answer=False):
    """Torchify a single example."""
    word_dict, feature_dict = model.word_dict, model.feature_dict  # (model.args: the features are off)
    document = torch.LongTensor([word_dict.get(w, word_dict['<UNK>']) for w in ex['document']])
    question = torch.LongTensor([word_dict.get(w, word_dict['<UNK>']) for w in ex['question']])
    features = torch.zeros(len(ex['document']), len(feature_dict)) if len(feature_dict) > 0 else None
    if 'answers' not in ex:
        return document, features, question, ex['id']
    if single_answer:
        assert(len(ex['answers']) > 0)
        start = torch.LongTensor(1).fill_(ex['answers'][0][0])
        end = torch.LongTensor(1).fill_(ex['answers'][0][1])
    else:
        start = [a[0] for a in ex['answers']]
        end = [a[1] for a in ex['answers']]
    return document, features, question, start, end, ex['id']

def batchify(batch):
    """Gather a batch of individual examples into one batch."""
    NUM_INPUTS, NUM_TARGETS, NUM_EXTRA = 3, 2, 1
    ids, docs = [ex[-1] for ex in batch], [ex[0] for ex in batch]
    features, questions = [ex[1] for ex in batch], [ex[2] for ex in batch]
    max_length = max([d.size(0) for d in docs])
    x1 = torch.LongTensor(len(docs), max_length).zero_()
    x1_mask = torch.BoolTensor(len(docs), max_length).fill_(1)
    x1_f = None if features[0] is None else torch.zeros(len(docs), max_length, features[0].size(1))
    for i, d in enumerate(docs):
        x1[i, :d.size(0)].copy_(d)
        x1_mask[i, :d.size(0)].fill_(0)
        if x1_f is not None:
            x1_f[i, :d.size(0)].copy_(features[i])
    max_length = max([q.size(0) for q in questions])
    x2 = torch.LongTensor(len(questions), max_length).zero_()
    x2_mask = torch.BoolTensor(len(questions), max_length).fill_(1)
    for i, q in enumerate(questions):
        x2[i, :q.size(0)].copy_(q)
        x2_mask[i, :q.size(0)].fill_(0)
    if len(batch[0]) == NUM_INPUTS + NUM_EXTRA:
        return x1, x1_f, x1_mask, x2, x2_mask, ids
    elif len(batch[0]) == NUM_INPUTS + NUM_EXTRA + NUM_TARGETS:
        if torch.is_tensor(batch[0][3]):
            y_s = torch.cat([ex[3] for ex in batch])
            y_e = torch.cat([ex[4] for ex in batch])
        else:
            y_s = [ex[3] for ex in batch]
            y_e = [ex[4] for ex in batch]
    else:
        raise RuntimeError('Incorrect number of inputs per example.')
    return x1, x1_f, x1_mask, x2, x2_mask, y_s, y_e, ids

# ------------------------------------------------------------------------------ drqa/reader/data.py, utils.py
class ReaderDataset(Dataset):
    def __init__(self, examples, model, single_answer=False):
        self.model, self.examples, self.single_answer = model, examples, single_answer

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, index):
        return vectorize(self.examples[index], self.model, self.single_answer)

def load_data(args, filename, skip_no_answer=False):
    with open(filename) as f:
        examples = [json.loads(line) for line in f]
    if skip_no_answer:
        examples = [ex for ex in examples if len(ex['answers']) > 0]
    return examples

def build_word_dict(args, examples):
    word_dict = {'<NULL>': 0, '<UNK>': 1}  # data.Dictionary, reduced to its tok2ind map
    for w in [w for ex in examples for w in ex['question'] + ex['document']]:
        word_dict.setdefault(w, len(word_dict))
    return word_dict

def build_feature_dict(args, examples):
    return {}  # use_in_question, use_pos, use_ner, use_lemma and use_tf are all off here

class AverageMeter(object):
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val, self.sum, self.count = val, self.sum + val * n, self.count + n
        self.avg = self.sum / self.count

# ------------------------------------------------------------------------------ scripts/reader/train.py
def init_from_scratch(args, train_exs, dev_exs):
    feature_dict = build_feature_dict(args, train_exs)
    word_dict = build_word_dict(args, train_exs + dev_exs)
    logger.info('Num features = %d, num words = %d' % (len(feature_dict), len(word_dict)))
    return DocReader(get_model_args(args), word_dict, feature_dict)

def train(args, data_loader, model, global_stats):
    train_loss = AverageMeter()
    epoch_start = time.time()
    for idx, ex in enumerate(data_loader):
        train_loss.update(*model.update(ex))
        if idx % args.display_iter == 0:
            logger.info('train: Epoch = %d | iter = %d/%d | ' % (global_stats['epoch'], idx, len(data_loader)) +
                        'loss = %.2f | elapsed time = %.2f (s)' % (train_loss.avg, time.time() - global_stats['timer']))
            train_loss.reset()
    logger.info('train: Epoch %d done. Time for epoch = %.2f (s)' % (global_stats['epoch'], time.time() - epoch_start))
    # Checkpoint
    if args.checkpoint:
        model.checkpoint(args.model_file + '.checkpoint', global_stats['epoch'] + 1)

def validate_unofficial(args, data_loader, model, global_stats, mode):
    eval_start = time.time()
    start_acc, end_acc, exact_match, examples = AverageMeter(), AverageMeter(), AverageMeter(), 0
    for ex in data_loader:
        batch_size = ex[0].size(0)
        pred_s, pred_e, _ = model.predict(ex)
        target_s, target_e = ex[-3:-1]
        accuracies = eval_accuracies(pred_s, target_s, pred_e, target_e)
        for meter, value in zip((start_acc, end_acc, exact_match), accuracies):
            meter.update(value, batch_size)
        examples += batch_size
    logger.info('%s valid unofficial: Epoch = %d | start = %.2f | ' % (mode, global_stats['epoch'], start_acc.avg) +
                'end = %.2f | exact = %.2f | examples = %d | ' % (end_acc.avg, exact_match.avg, examples) +
                'valid time = %.2f (s)' % (time.time() - eval_start))
    return {'exact_match': exact_match.avg}

def eval_accuracies(pred_s, target_s, pred_e, target_e):
    if torch.is_tensor(target_s):
        target_s = [[e.item()] for e in target_s]
        target_e = [[e.item()] for e in target_e]
    start = np.mean([pred_s[i] in target_s[i] for i in range(len(pred_s))])
    end = np.mean([pred_e[i] in target_e[i] for i in range(len(pred_s))])
    em = np.mean([any(_s == pred_s[i] and _e == pred_e[i] for _s, _e in zip(target_s[i], target_e[i]))
                  for i in range(len(pred_s))])
    return start * 100, end * 100, em * 100

def main(args):
    train_exs = load_data(args, args.train_file, skip_no_answer=True)
    dev_exs = load_data(args, args.dev_file)
    logger.info('Num train examples = %d, num dev examples = %d' % (len(train_exs), len(dev_exs)))
    start_epoch = 0
    if args.checkpoint and os.path.isfile(args.model_file + '.checkpoint'):
        logger.info('Found a checkpoint...')  # Just resume training, no modifications.
        checkpoint_file = args.model_file + '.checkpoint'
        model, start_epoch = DocReader.load_checkpoint(checkpoint_file, args)
    else:
        logger.info('Training model from scratch...')
        model = init_from_scratch(args, train_exs, dev_exs)
        model.init_optimizer()
    # Use the GPU?
    if args.cuda:
        model.cuda()
    # Use multiple GPUs?
    if args.parallel:
        model.parallelize()
    train_dataset = ReaderDataset(train_exs, model, single_answer=True)
    train_sampler = torch.utils.data.sampler.RandomSampler(train_dataset)
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, sampler=train_sampler, num_workers=args.data_workers,
        collate_fn=batchify, pin_memory=args.cuda)
    dev_dataset = ReaderDataset(dev_exs, model, single_answer=False)
    dev_sampler = torch.utils.data.sampler.SequentialSampler(dev_dataset)
    dev_loader = torch.utils.data.DataLoader(
        dev_dataset, batch_size=args.test_batch_size, sampler=dev_sampler, num_workers=args.data_workers,
        collate_fn=batchify, pin_memory=args.cuda)
    stats = {'timer': time.time(), 'epoch': 0, 'best_valid': 0}
    for epoch in range(start_epoch, args.num_epochs):
        stats['epoch'] = epoch
        train(args, train_loader, model, stats)
        result = validate_unofficial(args, dev_loader, model, stats, mode='dev')
        # Save best valid
        if result[args.valid_metric] >= stats['best_valid']:
            logger.info('Best valid: %s = %.2f (epoch %d, %d updates)' %
                        (args.valid_metric, result[args.valid_metric], stats['epoch'], model.updates))
            model.save(args.model_file)
            stats['best_valid'] = result[args.valid_metric]

def run_train(args):  # train.py's __main__ block
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    if args.cuda:
        torch.cuda.set_device(args.gpu)
    np.random.seed(args.random_seed)
    torch.manual_seed(args.random_seed)
    if args.cuda:
        torch.cuda.manual_seed(args.random_seed)
    logger.info('COMMAND: train.py --num-epochs %d --checkpoint true --parallel true' % args.num_epochs)
    main(args)

# ------------------------------------------------------------------------------ scripts/reader/predict.py
def run_predict(args):
    t0 = time.time()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    if args.cuda:
        torch.cuda.set_device(args.gpu)
    logger.info('CUDA enabled (GPU %d)' % args.gpu if args.cuda else 'Running on CPU only.')
    model = DocReader.load(args.model, normalize=True)
    if args.cuda:
        model.cuda()
    with open(args.dataset) as f:
        examples = [json.loads(line) for line in f]
    results, exact = {}, 0
    for i in range(0, len(examples), args.batch_size):
        chunk = examples[i:i + args.batch_size]
        batch_exs = batchify([vectorize({k: v for k, v in e.items() if k != 'answers'}, model) for e in chunk])
        s, e, score = model.predict(batch_exs, None, args.top_n)
        for j, ex in enumerate(chunk):
            results[ex['id']] = [(' '.join(ex['document'][s[j][k]:e[j][k] + 1]), float(score[j][k]))
                                 for k in range(len(s[j]))]
            exact += int([s[j][0], e[j][0]] in ex['answers'])
    outfile = os.path.join(args.out_dir, 'dev-processed-squad-reader.preds')
    with open(outfile, 'w') as f:
        json.dump(results, f)
    logger.info('Wrote %s; exact span matches (top 1): %d/%d; total time: %.2f'
                % (outfile, exact, len(examples), time.time() - t0))

# ------------------------------------------------------------------------------ synthetic SQuAD (not in the repo)
def make_squad(path, n, rng, id_prefix):
    fillers = ['the', 'of', 'river', 'city', 'was', 'built', 'in', 'by', 'a', 'long', 'war', 'King', 'north',
               'trade', 'after', 'during', 'many', 'people', 'lived', 'near', 'sea', 'old', 'empire', 'church']
    keys = ['founded', 'ruled', 'named', 'crossed', 'defended', 'painted']
    answers = ['Rome', 'Paris', 'Otto', 'Anna', 'Nile', 'Alps', 'Lyon', 'Oslo', 'Cairo', 'Maria', 'Ivan', 'Kyoto']
    with open(path, 'w') as f:
        for k in range(n):
            key, pos = keys[rng.randint(len(keys))], rng.randint(1, 14)
            ans = [answers[j] for j in rng.choice(len(answers), size=rng.randint(1, 3), replace=False)]
            doc = [fillers[j] for j in rng.randint(len(fillers), size=rng.randint(16, 28))]
            doc = doc[:pos] + [key] + ans + doc[pos:]
            question = ['who', 'or', 'what', 'was', key] + [fillers[j] for j in rng.randint(len(fillers), size=3)]
            f.write(json.dumps({'id': '%s%d' % (id_prefix, k), 'question': question, 'document': doc,
                                'answers': [[pos + 1, pos + len(ans)]]}) + '\n')

def make_args(folder, num_epochs):
    return argparse.Namespace(
        no_cuda=False, gpu=-1, data_workers=0, parallel=True, random_seed=1013, num_epochs=num_epochs,
        batch_size=16, test_batch_size=32, train_file=os.path.join(folder, 'train-processed.txt'),
        dev_file=os.path.join(folder, 'dev-processed.txt'), checkpoint=True, valid_metric='exact_match',
        display_iter=4, model_file=os.path.join(folder, 'squad-reader.mdl'),
        model_type='rnn', embedding_dim=16, hidden_size=16, doc_layers=2, question_layers=2, rnn_type='lstm',
        concat_rnn_layers=True, question_merge='avg', use_qemb=False, use_tf=False, dropout_emb=0.4,
        dropout_rnn=0.4, dropout_rnn_output=True, optimizer='adamax', grad_clipping=10, weight_decay=0,
        fix_embeddings=False, tune_partial=0, rnn_padding=False, max_len=15)

if __name__ == '__main__':
    logger.setLevel(logging.INFO)
    logger.propagate, console = False, logging.StreamHandler(sys.stdout)
    console.setFormatter(logging.Formatter('%(asctime)s: [ %(message)s ]', '%m/%d/%Y %I:%M:%S %p'))
    logger.handlers = [console]
    folder = tempfile.mkdtemp(prefix='drqa_')
    for name, n, rng in [('train', 96, np.random.RandomState(3)), ('dev', 32, np.random.RandomState(4))]:
        make_squad(os.path.join(folder, name + '-processed.txt'), n, rng, name)
    run_train(make_args(folder, num_epochs=2))
    run_train(make_args(folder, num_epochs=3))  # finds squad-reader.mdl.checkpoint and resumes at epoch 2
    run_predict(argparse.Namespace(dataset=os.path.join(folder, 'dev-processed.txt'), no_cuda=False, gpu=-1,
                                   model=os.path.join(folder, 'squad-reader.mdl'), out_dir=folder, batch_size=32,
                                   top_n=2))
    print("done")
