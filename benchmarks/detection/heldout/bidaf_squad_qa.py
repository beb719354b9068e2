"""Trains BiDAF (Seo et al., "Bidirectional Attention Flow for Machine Comprehension") for extractive question
answering on SQuAD-style data: character CNN and (frozen) word embeddings, a highway network, contextual LSTMs,
the attention flow layer, modeling LSTMs and start/end pointers; parameters are tracked with an exponential moving
average (`EMA`), and `test` swaps the EMA weights in, decodes the best span with an upper-triangular mask, writes the
predictions as JSON and scores them with the SQuAD v1.1 evaluation script. `train` and `test` each build
``device = torch.device(f"cuda:{args.gpu}" if torch.cuda.is_available() else "cpu")``; the model goes there with
``.to(device)``, the data iterators (`SQuAD`) are built with the same device so every batch (ids, characters, words
and their lengths) arrives on it, the EMA shadows are clones of ``param.data`` (so live on the device), `test` backs
up the live weights with another `EMA(0)` and copies them back with ``param.data.copy_``, builds its span mask with
``.to(device)``, and the best model is kept with ``copy.deepcopy(model)`` and saved with
``torch.save(best_model.state_dict(), ...)``; evaluation runs under ``torch.set_grad_enabled(False)``.

Modeled on: galsang/BiDAF-pytorch, run.py, model/model.py, model/ema.py, model/data.py, utils/nn.py and evaluate.py
at commit 8e16379e33af725daec3ec6c170dfae69e54d51b (https://github.com/galsang/BiDAF-pytorch).

Kept: `train` (iterator epochs, Adadelta, loss on start and end indices, EMA update after each step, dev test every
``print_freq`` steps, best model by dev F1) and `test` (EMA swap-in and restore, span decoding, prediction file,
`evaluate.main`); `main` (argument defaults, vocab sizes set on ``args``, saving the best state dict); `BiDAF` with
its inner `char_emb_layer`, `highway_network`, `att_flow_layer` and `output_layer`; `LSTM` (sort by length, pack,
unsort) and `Linear`; `EMA`; evaluate.py's normalisation, F1, exact match and `evaluate`.

Changed to run here: SQuAD and GloVe are replaced by synthetic paragraphs whose answer is the span after a cue word,
with random "pretrained" vectors; torchtext's fields and ``BucketIterator`` (``device=device``, ``repeat=True`` for
training) are replaced by a small `SQuAD` class whose iterators build padded batches straight on the device, keep an
``epoch`` counter and give ``c_word``/``q_word`` as ``(tokens, lengths)`` like ``include_lengths=True``;
tensorboardX is dropped; files go to a temporary folder; the command line is a list. Fixed: the original passes the
lengths that the iterator put on the GPU straight to ``pack_padded_sequence``, which since PyTorch 1.7 requires them
on the CPU (a RuntimeError on a GPU); here `LSTM.forward` passes ``x_len_sorted.cpu()``; the forget-gate bias fill in
`LSTM.reset_params` runs under ``torch.no_grad()`` (newer PyTorch refuses it on a Parameter's chunk).
Shrunk: hidden size 16, word dim 24, char channels 8 with width 3, char dim 4, 120 training and 24 dev questions,
contexts of 12-20 words, batch 12, 2 epochs, dev test every 5 steps.
"""
import argparse
import copy
import json
import os
import random
import re
import string
import sys
import tempfile
from collections import Counter
from time import gmtime, strftime

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim


# ---------------------------------------------------------------- utils/nn.py
class LSTM(nn.Module):
    def __init__(self, input_size, hidden_size, batch_first=False, num_layers=1, bidirectional=False, dropout=0.2):
        super(LSTM, self).__init__()
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers,
                           bidirectional=bidirectional, batch_first=batch_first)
        self.reset_params()
        self.dropout = nn.Dropout(p=dropout)

    def reset_params(self):
        for i in range(self.rnn.num_layers):
            nn.init.orthogonal_(getattr(self.rnn, f'weight_hh_l{i}'))
            nn.init.kaiming_normal_(getattr(self.rnn, f'weight_ih_l{i}'))
            nn.init.constant_(getattr(self.rnn, f'bias_hh_l{i}'), val=0)
            nn.init.constant_(getattr(self.rnn, f'bias_ih_l{i}'), val=0)
            with torch.no_grad():  # newer PyTorch refuses the bare in-place fill of a chunk of a Parameter
                getattr(self.rnn, f'bias_hh_l{i}').chunk(4)[1].fill_(1)
            if self.rnn.bidirectional:
                nn.init.orthogonal_(getattr(self.rnn, f'weight_hh_l{i}_reverse'))
                nn.init.kaiming_normal_(getattr(self.rnn, f'weight_ih_l{i}_reverse'))
                nn.init.constant_(getattr(self.rnn, f'bias_hh_l{i}_reverse'), val=0)
                nn.init.constant_(getattr(self.rnn, f'bias_ih_l{i}_reverse'), val=0)
                with torch.no_grad():
                    getattr(self.rnn, f'bias_hh_l{i}_reverse').chunk(4)[1].fill_(1)

    def forward(self, x):
        x, x_len = x
        x = self.dropout(x)
        x_len_sorted, x_idx = torch.sort(x_len, descending=True)
        x_sorted = x.index_select(dim=0, index=x_idx)
        _, x_ori_idx = torch.sort(x_idx)
        x_packed = nn.utils.rnn.pack_padded_sequence(x_sorted, x_len_sorted.cpu(), batch_first=True)
        x_packed, (h, c) = self.rnn(x_packed)
        x = nn.utils.rnn.pad_packed_sequence(x_packed, batch_first=True)[0]
        x = x.index_select(dim=0, index=x_ori_idx)
        h = h.permute(1, 0, 2).contiguous().view(-1, h.size(0) * h.size(2)).squeeze()
        h = h.index_select(dim=0, index=x_ori_idx)
        return x, h


class Linear(nn.Module):
    def __init__(self, in_features, out_features, dropout=0.0):
        super(Linear, self).__init__()
        self.linear = nn.Linear(in_features=in_features, out_features=out_features)
        if dropout > 0:
            self.dropout = nn.Dropout(p=dropout)
        self.reset_params()

    def reset_params(self):
        nn.init.kaiming_normal_(self.linear.weight)
        nn.init.constant_(self.linear.bias, 0)

    def forward(self, x):
        if hasattr(self, 'dropout'):
            x = self.dropout(x)
        x = self.linear(x)
        return x


# ---------------------------------------------------------------- model/ema.py
class EMA():
    def __init__(self, mu):
        self.mu = mu
        self.shadow = {}

    def register(self, name, val):
        self.shadow[name] = val.clone()

    def get(self, name):
        return self.shadow[name]

    def update(self, name, x):
        assert name in self.shadow
        new_average = (1.0 - self.mu) * x + self.mu * self.shadow[name]
        self.shadow[name] = new_average.clone()


# ---------------------------------------------------------------- model/model.py
class BiDAF(nn.Module):
    def __init__(self, args, pretrained):
        super(BiDAF, self).__init__()
        self.args = args
        # 1. Character Embedding Layer
        self.char_emb = nn.Embedding(args.char_vocab_size, args.char_dim, padding_idx=1)
        nn.init.uniform_(self.char_emb.weight, -0.001, 0.001)
        self.char_conv = nn.Sequential(
            nn.Conv2d(1, args.char_channel_size, (args.char_dim, args.char_channel_width)),
            nn.ReLU()
            )
        # 2. Word Embedding Layer
        # initialize word embedding with GloVe
        self.word_emb = nn.Embedding.from_pretrained(pretrained, freeze=True)
        # highway network
        assert self.args.hidden_size * 2 == (self.args.char_channel_size + self.args.word_dim)
        for i in range(2):
            setattr(self, 'highway_linear{}'.format(i),
                    nn.Sequential(Linear(args.hidden_size * 2, args.hidden_size * 2), nn.ReLU()))
            setattr(self, 'highway_gate{}'.format(i),
                    nn.Sequential(Linear(args.hidden_size * 2, args.hidden_size * 2), nn.Sigmoid()))
        # 3. Contextual Embedding Layer
        self.context_LSTM = LSTM(input_size=args.hidden_size * 2, hidden_size=args.hidden_size,
                                 bidirectional=True, batch_first=True, dropout=args.dropout)
        # 4. Attention Flow Layer
        self.att_weight_c = Linear(args.hidden_size * 2, 1)
        self.att_weight_q = Linear(args.hidden_size * 2, 1)
        self.att_weight_cq = Linear(args.hidden_size * 2, 1)
        # 5. Modeling Layer
        self.modeling_LSTM1 = LSTM(input_size=args.hidden_size * 8, hidden_size=args.hidden_size,
                                   bidirectional=True, batch_first=True, dropout=args.dropout)
        self.modeling_LSTM2 = LSTM(input_size=args.hidden_size * 2, hidden_size=args.hidden_size,
                                   bidirectional=True, batch_first=True, dropout=args.dropout)
        # 6. Output Layer
        self.p1_weight_g = Linear(args.hidden_size * 8, 1, dropout=args.dropout)
        self.p1_weight_m = Linear(args.hidden_size * 2, 1, dropout=args.dropout)
        self.p2_weight_g = Linear(args.hidden_size * 8, 1, dropout=args.dropout)
        self.p2_weight_m = Linear(args.hidden_size * 2, 1, dropout=args.dropout)
        self.output_LSTM = LSTM(input_size=args.hidden_size * 2, hidden_size=args.hidden_size,
                                bidirectional=True, batch_first=True, dropout=args.dropout)
        self.dropout = nn.Dropout(p=args.dropout)

    def forward(self, batch):
        def char_emb_layer(x):
            batch_size = x.size(0)
            # (batch, seq_len, word_len, char_dim)
            x = self.dropout(self.char_emb(x))
            # (batch, seq_len, char_dim, word_len)
            x = x.transpose(2, 3)
            # (batch * seq_len, 1, char_dim, word_len)
            x = x.view(-1, self.args.char_dim, x.size(3)).unsqueeze(1)
            # (batch * seq_len, char_channel_size, 1, conv_len) -> (batch * seq_len, char_channel_size, conv_len)
            x = self.char_conv(x).squeeze()
            # (batch * seq_len, char_channel_size, 1) -> (batch * seq_len, char_channel_size)
            x = F.max_pool1d(x, x.size(2)).squeeze()
            # (batch, seq_len, char_channel_size)
            x = x.view(batch_size, -1, self.args.char_channel_size)
            return x

        def highway_network(x1, x2):
            # (batch, seq_len, char_channel_size + word_dim)
            x = torch.cat([x1, x2], dim=-1)
            for i in range(2):
                h = getattr(self, 'highway_linear{}'.format(i))(x)
                g = getattr(self, 'highway_gate{}'.format(i))(x)
                x = g * h + (1 - g) * x
            # (batch, seq_len, hidden_size * 2)
            return x

        def att_flow_layer(c, q):
            c_len = c.size(1)
            q_len = q.size(1)
            cq = []
            for i in range(q_len):
                #(batch, 1, hidden_size * 2)
                qi = q.select(1, i).unsqueeze(1)
                #(batch, c_len, 1)
                ci = self.att_weight_cq(c * qi).squeeze()
                cq.append(ci)
            # (batch, c_len, q_len)
            cq = torch.stack(cq, dim=-1)
            # (batch, c_len, q_len)
            s = self.att_weight_c(c).expand(-1, -1, q_len) + \
                self.att_weight_q(q).permute(0, 2, 1).expand(-1, c_len, -1) + \
                cq
            # (batch, c_len, q_len)
            a = F.softmax(s, dim=2)
            # (batch, c_len, q_len) * (batch, q_len, hidden_size * 2) -> (batch, c_len, hidden_size * 2)
            c2q_att = torch.bmm(a, q)
            # (batch, 1, c_len)
            b = F.softmax(torch.max(s, dim=2)[0], dim=1).unsqueeze(1)
            # (batch, 1, c_len) * (batch, c_len, hidden_size * 2) -> (batch, hidden_size * 2)
            q2c_att = torch.bmm(b, c).squeeze()
            # (batch, c_len, hidden_size * 2) (tiled)
            q2c_att = q2c_att.unsqueeze(1).expand(-1, c_len, -1)
            # (batch, c_len, hidden_size * 8)
            x = torch.cat([c, c2q_att, c * c2q_att, c * q2c_att], dim=-1)
            return x

        def output_layer(g, m, l):
            # (batch, c_len)
            p1 = (self.p1_weight_g(g) + self.p1_weight_m(m)).squeeze()
            # (batch, c_len, hidden_size * 2)
            m2 = self.output_LSTM((m, l))[0]
            # (batch, c_len)
            p2 = (self.p2_weight_g(g) + self.p2_weight_m(m2)).squeeze()
            return p1, p2

        # 1. Character Embedding Layer
        c_char = char_emb_layer(batch.c_char)
        q_char = char_emb_layer(batch.q_char)
        # 2. Word Embedding Layer
        c_word = self.word_emb(batch.c_word[0])
        q_word = self.word_emb(batch.q_word[0])
        c_lens = batch.c_word[1]
        q_lens = batch.q_word[1]
        # Highway network
        c = highway_network(c_char, c_word)
        q = highway_network(q_char, q_word)
        # 3. Contextual Embedding Layer
        c = self.context_LSTM((c, c_lens))[0]
        q = self.context_LSTM((q, q_lens))[0]
        # 4. Attention Flow Layer
        g = att_flow_layer(c, q)
        # 5. Modeling Layer
        m = self.modeling_LSTM2((self.modeling_LSTM1((g, c_lens))[0], c_lens))[0]
        # 6. Output Layer
        p1, p2 = output_layer(g, m, c_lens)
        # (batch, c_len), (batch, c_len)
        return p1, p2


# ---------------------------------------------------------------- model/data.py (synthetic stand-in for torchtext)
class _Vocab:
    def __init__(self, itos):
        self.itos = itos
        self.stoi = {s: i for i, s in enumerate(itos)}
        self.vectors = None

    def __len__(self):
        return len(self.itos)


class _Batch:
    pass


class _Iterator:
    """What the ``data.BucketIterator`` gives: padded batches built on ``device``, an ``epoch`` counter."""

    def __init__(self, examples, batch_size, device, repeat, shuffle, word_vocab, char_vocab):
        self.examples, self.batch_size, self.device = examples, batch_size, device
        self.repeat, self.shuffle, self.epoch = repeat, shuffle, 0
        self.word_vocab, self.char_vocab = word_vocab, char_vocab

    def _field(self, seqs):
        lengths = [len(s) for s in seqs]
        words = torch.ones(len(seqs), max(lengths), dtype=torch.long)  # <pad> is 1
        width = max(len(w) for s in seqs for w in s)
        chars = torch.ones(len(seqs), max(lengths), width, dtype=torch.long)
        for i, s in enumerate(seqs):
            for j, w in enumerate(s):
                words[i, j] = self.word_vocab.stoi.get(w, 0)
                chars[i, j, :len(w)] = torch.tensor([self.char_vocab.stoi.get(ch, 0) for ch in w])
        return ((words.to(self.device), torch.tensor(lengths, device=self.device)), chars.to(self.device))

    def __iter__(self):
        while True:
            order = list(range(len(self.examples)))
            if self.shuffle:
                random.shuffle(order)
            for b in range(0, len(order), self.batch_size):
                chunk = [self.examples[k] for k in order[b:b + self.batch_size]]
                batch = _Batch()
                batch.id = [e['id'] for e in chunk]
                batch.c_word, batch.c_char = self._field([e['c_word'] for e in chunk])
                batch.q_word, batch.q_char = self._field([e['q_word'] for e in chunk])
                batch.s_idx = torch.tensor([e['s_idx'] for e in chunk], device=self.device)
                batch.e_idx = torch.tensor([e['e_idx'] for e in chunk], device=self.device)
                yield batch
            self.epoch += 1
            if not self.repeat:
                return


class SQuAD():
    def __init__(self, args, n_train=120, n_dev=24):
        rng = random.Random(0)
        words = ['w%d' % i for i in range(60)]
        cues = ['answer', 'name', 'place']

        def example(i, split):
            cue = rng.choice(cues)
            context = [rng.choice(words) for _ in range(rng.randint(12, 20))]
            k, n = rng.randrange(0, len(context) - 3), rng.randint(1, 2)
            context[k] = cue
            question = ['what', 'follows', cue] + [rng.choice(words) for _ in range(rng.randint(1, 4))]
            return {'id': '%s-%d' % (split, i), 'c_word': context, 'q_word': question, 's_idx': k + 1,
                    'e_idx': k + n, 'answer': ' '.join(context[k + 1:k + n + 1])}

        self.train = [example(i, 'train') for i in range(n_train)]
        self.dev = [example(i, 'dev') for i in range(n_dev)]
        with open(os.path.join(args.data_dir, args.dev_file), 'w') as f:
            json.dump({'version': '1.1', 'data': [{'paragraphs': [{'qas': [
                {'id': e['id'], 'answers': [{'text': e['answer']}]} for e in self.dev]}]}]}, f)
        #cut too long context in the training set for efficiency.
        if args.context_threshold > 0:
            self.train = [e for e in self.train if len(e['c_word']) <= args.context_threshold]
        print("building vocab...")
        self.WORD = types_namespace(vocab=_Vocab(['<unk>', '<pad>'] + words + cues + ['what', 'follows']))
        self.CHAR = types_namespace(vocab=_Vocab(['<unk>', '<pad>'] + list(string.ascii_lowercase + string.digits)))
        self.WORD.vocab.vectors = torch.randn(len(self.WORD.vocab), args.word_dim)  # stands for GloVe 6B
        print("building iterators...")
        device = torch.device("cuda:{}".format(args.gpu) if torch.cuda.is_available() else "cpu")
        self.train_iter = _Iterator(self.train, args.train_batch_size, device, repeat=True, shuffle=True,
                                    word_vocab=self.WORD.vocab, char_vocab=self.CHAR.vocab)
        self.dev_iter = _Iterator(self.dev, args.dev_batch_size, device, repeat=False, shuffle=False,
                                  word_vocab=self.WORD.vocab, char_vocab=self.CHAR.vocab)


def types_namespace(**kwargs):
    return argparse.Namespace(**kwargs)


# ---------------------------------------------------------------- evaluate.py
def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction, ground_truth):
    return (normalize_answer(prediction) == normalize_answer(ground_truth))


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths)


def evaluate_squad(dataset, predictions):
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article['paragraphs']:
            for qa in paragraph['qas']:
                total += 1
                if qa['id'] not in predictions:
                    print('Unanswered question ' + qa['id'] + ' will receive score 0.', file=sys.stderr)
                    continue
                ground_truths = list(map(lambda x: x['text'], qa['answers']))
                prediction = predictions[qa['id']]
                exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
    exact_match = 100.0 * exact_match / total
    f1 = 100.0 * f1 / total
    return {'exact_match': exact_match, 'f1': f1}


def evaluate_main(args):
    with open(args.dataset_file) as dataset_file:
        dataset = json.load(dataset_file)['data']
    with open(args.prediction_file) as prediction_file:
        predictions = json.load(prediction_file)
    return evaluate_squad(dataset, predictions)


# ---------------------------------------------------------------- run.py
def train(args, data):
    device = torch.device(f"cuda:{args.gpu}" if torch.cuda.is_available() else "cpu")
    model = BiDAF(args, data.WORD.vocab.vectors).to(device)
    ema = EMA(args.exp_decay_rate)
    for name, param in model.named_parameters():
        if param.requires_grad:
            ema.register(name, param.data)
    parameters = filter(lambda p: p.requires_grad, model.parameters())
    optimizer = optim.Adadelta(parameters, lr=args.learning_rate)
    criterion = nn.CrossEntropyLoss()
    model.train()
    loss, last_epoch = 0, -1
    max_dev_exact, max_dev_f1 = -1, -1
    iterator = data.train_iter
    for i, batch in enumerate(iterator):
        present_epoch = int(iterator.epoch)
        if present_epoch == args.epoch:
            break
        if present_epoch > last_epoch:
            print('epoch:', present_epoch + 1)
        last_epoch = present_epoch
        p1, p2 = model(batch)
        optimizer.zero_grad()
        batch_loss = criterion(p1, batch.s_idx) + criterion(p2, batch.e_idx)
        loss += batch_loss.item()
        batch_loss.backward()
        optimizer.step()
        for name, param in model.named_parameters():
            if param.requires_grad:
                ema.update(name, param.data)
        if (i + 1) % args.print_freq == 0:
            dev_loss, dev_exact, dev_f1 = test(model, ema, args, data)
            print(f'train loss: {loss:.3f} / dev loss: {dev_loss:.3f}'
                  f' / dev EM: {dev_exact:.3f} / dev F1: {dev_f1:.3f}')
            if dev_f1 > max_dev_f1:
                max_dev_f1 = dev_f1
                max_dev_exact = dev_exact
                best_model = copy.deepcopy(model)
            loss = 0
            model.train()
    print(f'max dev EM: {max_dev_exact:.3f} / max dev F1: {max_dev_f1:.3f}')
    return best_model


def test(model, ema, args, data):
    device = torch.device(f"cuda:{args.gpu}" if torch.cuda.is_available() else "cpu")
    criterion = nn.CrossEntropyLoss()
    loss = 0
    answers = dict()
    model.eval()
    backup_params = EMA(0)
    for name, param in model.named_parameters():
        if param.requires_grad:
            backup_params.register(name, param.data)
            param.data.copy_(ema.get(name))
    with torch.set_grad_enabled(False):
        for batch in iter(data.dev_iter):
            p1, p2 = model(batch)
            batch_loss = criterion(p1, batch.s_idx) + criterion(p2, batch.e_idx)
            loss += batch_loss.item()
            # (batch, c_len, c_len)
            batch_size, c_len = p1.size()
            ls = nn.LogSoftmax(dim=1)
            mask = (torch.ones(c_len, c_len) * float('-inf')).to(device).tril(-1).unsqueeze(0).expand(batch_size, -1, -1)
            score = (ls(p1).unsqueeze(2) + ls(p2).unsqueeze(1)) + mask
            score, s_idx = score.max(dim=1)
            score, e_idx = score.max(dim=1)
            s_idx = torch.gather(s_idx, 1, e_idx.view(-1, 1)).squeeze()
            for i in range(batch_size):
                id = batch.id[i]
                answer = batch.c_word[0][i][s_idx[i]:e_idx[i]+1]
                answer = ' '.join([data.WORD.vocab.itos[idx] for idx in answer])
                answers[id] = answer
        for name, param in model.named_parameters():
            if param.requires_grad:
                param.data.copy_(backup_params.get(name))
    with open(args.prediction_file, 'w', encoding='utf-8') as f:
        print(json.dumps(answers), file=f)
    results = evaluate_main(args)
    return loss, results['exact_match'], results['f1']


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument('--char-dim', default=8, type=int)
    parser.add_argument('--char-channel-width', default=5, type=int)
    parser.add_argument('--char-channel-size', default=100, type=int)
    parser.add_argument('--context-threshold', default=400, type=int)
    parser.add_argument('--dev-batch-size', default=100, type=int)
    parser.add_argument('--dev-file', default='dev-v1.1.json')
    parser.add_argument('--dropout', default=0.2, type=float)
    parser.add_argument('--epoch', default=12, type=int)
    parser.add_argument('--exp-decay-rate', default=0.999, type=float)
    parser.add_argument('--gpu', default=0, type=int)
    parser.add_argument('--hidden-size', default=100, type=int)
    parser.add_argument('--learning-rate', default=0.5, type=float)
    parser.add_argument('--print-freq', default=250, type=int)
    parser.add_argument('--train-batch-size', default=60, type=int)
    parser.add_argument('--train-file', default='train-v1.1.json')
    parser.add_argument('--word-dim', default=100, type=int)
    parser.add_argument('--data-dir', default='.data/squad')
    args = parser.parse_args(argv)
    print('loading SQuAD data...')
    data = SQuAD(args)
    setattr(args, 'char_vocab_size', len(data.CHAR.vocab))
    setattr(args, 'word_vocab_size', len(data.WORD.vocab))
    setattr(args, 'dataset_file', os.path.join(args.data_dir, args.dev_file))
    setattr(args, 'prediction_file', os.path.join(args.data_dir, f'prediction{args.gpu}.out'))
    setattr(args, 'model_time', strftime('%H-%M-%S', gmtime()))
    print('data loading complete!')
    print('training start!')
    best_model = train(args, data)
    saved = os.path.join(args.data_dir, 'saved_models')
    if not os.path.exists(saved):
        os.makedirs(saved)
    torch.save(best_model.state_dict(), os.path.join(saved, f'BiDAF_{args.model_time}.pt'))
    print('training finished!')
    return best_model


if __name__ == '__main__':
    workdir = tempfile.mkdtemp(prefix='bidaf_')
    best = main(['--data-dir', workdir, '--char-dim', '4', '--char-channel-width', '3', '--char-channel-size', '8',
                 '--hidden-size', '16', '--word-dim', '24', '--dev-batch-size', '12', '--train-batch-size', '12',
                 '--epoch', '2', '--print-freq', '5'])
    print('done: BiDAF trained, best model with %d parameters saved' % sum(p.numel() for p in best.parameters()))
