"""Trains the word-level BiLSTM-CRF tagger of LM-LSTM-CRF on a CoNLL-2003-style IOBES NER corpus with train_w.py
(SGD with a 1/(1+t*decay) learning rate, Viterbi CRF loss, dev accuracy for model selection, the best epoch's
checkpoint saved with its feature maps), then evaluates that checkpoint on the test file with eval_w.py. The device is
the `--gpu` id: when it is ``>= 0`` the scripts call ``torch.cuda.set_device(args.gpu)``, move the CRF loss and the
model with ``.cuda()`` and build ``CRFRepack(len(l_map), True)``: the packer keeps the `if_cuda` flag and moves each
CPU batch from the bucket loaders with ``.cuda()`` inside `repack_vb`. The Viterbi decoder fills a CPU
``torch.LongTensor`` with the (device) back-pointers, so decoded paths and the CPU gold labels meet in numpy. eval_w.py
reads the training arguments from the JSON next to the checkpoint, loads it with ``torch.load(...,
map_location=lambda storage, loc: storage)``, calls `load_state_dict` and then ``.cuda()``.

Modeled on: LiyuanLucasLiu/LM-LSTM-CRF, train_w.py, eval_w.py, model/lstm_crf.py, model/crf.py,
model/evaluator.py, model/ner_dataset.py and model/utils.py at commit b03ecf37799dee8f899783e7c475698d29288bc6
(https://github.com/LiyuanLucasLiu/LM-LSTM-CRF).

Kept: train_w.py's and eval_w.py's ``if __name__ == "__main__"`` script bodies (the options, corpus reading, coding
tables, bucket loaders, the `args.gpu >= 0` device blocks, the epoch loop with `packer.repack_vb`, `crit.forward`,
`clip_grad_norm_`, `utils.to_scalar`, `adjust_learning_rate`, the dev/test evaluation with its patience counter,
`save_checkpoint` of the best epoch, and the reload for evaluation); `LSTM_CRF`, `CRF_L`, `CRFRepack`, `CRFLoss_vb`,
`CRFDecode_vb`, `CRFDataset`, `eval_batch` and `eval_w`, and the utils they call.
Changed to run here: the CoNLL files are a synthetic IOBES corpus in a temporary folder; `--rand_embedding` is given
(no GloVe file, so `load_embedding_wlm` is left out); the argument lists are passed to `parse_args`, with `--gpu -1`
when no GPU is available (the default 0 needs one); the train parser is built from a table; tqdm is dropped; padding
masks are ``torch.BoolTensor`` and the decoder flips them with ``~mask`` (the author's ``torch.ByteTensor`` and
``1 - mask`` predate bool masks, which masked_select/masked_fill now require); `generate_corpus` shares
`read_corpus`'s loop; the evaluation runs with ``--eva_matrix a`` (token accuracy), and the F1 branch
(`iobes_to_spans`, `calc_f1_batch`), CRF_S, the greedy-decode classes, the char-aware LM_LSTM_CRF, the pretrained
embedding code and most docstrings are left out; blank lines between methods dropped.
Shrunk: 80/24/24 sentences of 4-9 words, embedding dim 16, hidden 24, batch 10, 4 epochs.
"""
import argparse
import codecs
import functools
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import Dataset

# ---------------------------------------------------------------- model/utils.py
def to_scalar(var):
    return var.view(-1).data.tolist()[0]

def log_sum_exp(vec, m_size):
    _, idx = torch.max(vec, 1)  # B * 1 * M
    max_score = torch.gather(vec, 1, idx.view(-1, 1, m_size)).view(-1, 1, m_size)  # B * M
    return max_score.view(-1, m_size) + torch.log(torch.sum(torch.exp(vec - max_score.expand_as(vec)), 1)).view(-1, m_size)  # B * M

def encode_safe(input_lines, word_dict, unk):
    return list(map(lambda t: list(map(lambda m: word_dict.get(m, unk), t)), input_lines))

def encode(input_lines, word_dict):
    return list(map(lambda t: list(map(lambda m: word_dict[m], t)), input_lines))

def shrink_features(feature_map, features, thresholds):
    feature_count = {k: 0 for (k, v) in iter(feature_map.items())}
    for feature_list in features:
        for feature in feature_list:
            feature_count[feature] += 1
    shrinked_feature_count = [k for (k, v) in iter(feature_count.items()) if v >= thresholds]
    feature_map = {shrinked_feature_count[ind]: (ind + 1) for ind in range(0, len(shrinked_feature_count))}
    feature_map['<unk>'] = 0  # inserting unk to be 0 encoded
    feature_map['<eof>'] = len(feature_map)  # inserting eof
    return feature_map

def read_corpus(lines, build_maps=False):
    # the author's generate_corpus and read_corpus repeat this loop; generate_corpus also builds the maps
    features, labels, tmp_fl, tmp_ll, feature_map, label_map = list(), list(), list(), list(), dict(), dict()
    for line in lines:
        if not (line.isspace() or (len(line) > 10 and line[0:10] == '-DOCSTART-')):
            line = line.rstrip('\n').split()
            tmp_fl.append(line[0])
            tmp_ll.append(line[-1])
            if build_maps and line[0] not in feature_map:
                feature_map[line[0]] = len(feature_map) + 1  # 0 is for unk
            if build_maps and line[-1] not in label_map:
                label_map[line[-1]] = len(label_map)
        elif len(tmp_fl) > 0:
            features.append(tmp_fl)
            labels.append(tmp_ll)
            tmp_fl, tmp_ll = list(), list()
    if len(tmp_fl) > 0:
        features.append(tmp_fl)
        labels.append(tmp_ll)
    return (features, labels, feature_map, label_map) if build_maps else (features, labels)

def generate_corpus(lines, if_shrink_feature=False, thresholds=1):
    features, labels, feature_map, label_map = read_corpus(lines, build_maps=True)
    label_map['<start>'] = len(label_map)
    label_map['<pad>'] = len(label_map)
    if if_shrink_feature:
        feature_map = shrink_features(feature_map, features, thresholds)
    else:
        feature_map['<unk>'] = 0  # inserting unk to be 0 encoded
        feature_map['<eof>'] = len(feature_map)  # inserting eof
    return features, labels, feature_map, label_map

def calc_threshold_mean(features):
    lines_len = list(map(lambda t: len(t) + 1, features))
    average = int(sum(lines_len) / len(lines_len))
    lower_line = list(filter(lambda t: t < average, lines_len))
    upper_line = list(filter(lambda t: t >= average, lines_len))
    lower_average = int(sum(lower_line) / len(lower_line))
    upper_average = int(sum(upper_line) / len(upper_line))
    max_len = max(lines_len)
    return [lower_average, average, upper_average, max_len]

def construct_bucket_mean_vb(input_features, input_label, word_dict, label_dict, caseless):
    if caseless:
        input_features = list(map(lambda t: list(map(lambda x: x.lower(), t)), input_features))
    features = encode_safe(input_features, word_dict, word_dict['<unk>'])
    labels = encode(input_label, label_dict)
    labels = list(map(lambda t: [label_dict['<start>']] + list(t), labels))
    thresholds = calc_threshold_mean(features)
    return construct_bucket_vb(features, labels, thresholds, word_dict['<eof>'], label_dict['<pad>'], len(label_dict))

def construct_bucket_vb(input_features, input_labels, thresholds, pad_feature, pad_label, label_size):
    buckets = [[[], [], []] for _ in range(len(thresholds))]
    for feature, label in zip(input_features, input_labels):
        cur_len = len(feature)
        idx = 0
        cur_len_1 = cur_len + 1
        while thresholds[idx] < cur_len_1:
            idx += 1
        buckets[idx][0].append(feature + [pad_feature] * (thresholds[idx] - cur_len))
        buckets[idx][1].append([label[ind] * label_size + label[ind + 1] for ind in range(0, cur_len)] + [
            label[cur_len] * label_size + pad_label] + [pad_label * label_size + pad_label] * (
                                       thresholds[idx] - cur_len_1))
        buckets[idx][2].append([1] * cur_len_1 + [0] * (thresholds[idx] - cur_len_1))
    bucket_dataset = [CRFDataset(torch.LongTensor(bucket[0]), torch.LongTensor(bucket[1]), torch.BoolTensor(bucket[2]))
                      for bucket in buckets]
    return bucket_dataset

def find_length_from_labels(labels, label_to_ix):
    end_position = len(labels) - 1
    for position, label in enumerate(labels):
        if label == label_to_ix['<pad>']:
            end_position = position
            break
    return end_position

def save_checkpoint(state, track_list, filename):
    with open(filename + '.json', 'w') as f:
        json.dump(track_list, f)
    torch.save(state, filename + '.model')

def adjust_learning_rate(optimizer, lr):
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

def init_embedding(input_embedding):
    bias = np.sqrt(3.0 / input_embedding.size(1))
    nn.init.uniform_(input_embedding, -bias, bias)

def init_linear(input_linear):
    bias = np.sqrt(6.0 / (input_linear.weight.size(0) + input_linear.weight.size(1)))
    nn.init.uniform_(input_linear.weight, -bias, bias)
    if input_linear.bias is not None:
        input_linear.bias.data.zero_()

def init_lstm(input_lstm):
    for ind in range(0, input_lstm.num_layers):
        for name in ('weight_ih_l', 'weight_hh_l'):
            weight = eval('input_lstm.' + name + str(ind))
            bias = np.sqrt(6.0 / (weight.size(0) / 4 + weight.size(1)))
            nn.init.uniform_(weight, -bias, bias)
    if input_lstm.bias:
        for ind in range(0, input_lstm.num_layers):
            for name in ('bias_ih_l', 'bias_hh_l'):
                weight = eval('input_lstm.' + name + str(ind))
                weight.data.zero_()
                weight.data[input_lstm.hidden_size: 2 * input_lstm.hidden_size] = 1

# ---------------------------------------------------------------- model/ner_dataset.py
class CRFDataset(Dataset):
    def __init__(self, data_tensor, label_tensor, mask_tensor):
        assert data_tensor.size(0) == label_tensor.size(0) == mask_tensor.size(0)
        self.data_tensor = data_tensor
        self.label_tensor = label_tensor
        self.mask_tensor = mask_tensor
    def __getitem__(self, index):
        return self.data_tensor[index], self.label_tensor[index], self.mask_tensor[index]
    def __len__(self):
        return self.data_tensor.size(0)

# ---------------------------------------------------------------- model/crf.py
class CRF_L(nn.Module):
    """CRF layer of Ma et al. 2016: more parameters than CRF_S"""
    def __init__(self, hidden_dim, tagset_size, if_bias=True):
        super(CRF_L, self).__init__()
        self.tagset_size = tagset_size
        self.hidden2tag = nn.Linear(hidden_dim, self.tagset_size * self.tagset_size, bias=if_bias)
    def rand_init(self):
        init_linear(self.hidden2tag)
    def forward(self, feats):
        return self.hidden2tag(feats).view(-1, self.tagset_size, self.tagset_size)

class CRFRepack:
    """Packer for word level model; if_cuda: whether use GPU"""
    def __init__(self, tagset_size, if_cuda):
        self.tagset_size = tagset_size
        self.if_cuda = if_cuda
    def repack_vb(self, feature, target, mask):
        if self.if_cuda:
            fea_v = feature.transpose(0, 1).cuda()
            tg_v = target.transpose(0, 1).unsqueeze(2).cuda()
            mask_v = mask.transpose(0, 1).cuda()
        else:
            fea_v = feature.transpose(0, 1)
            tg_v = target.transpose(0, 1).contiguous().unsqueeze(2)
            mask_v = mask.transpose(0, 1).contiguous()
        return fea_v, tg_v, mask_v
    def convert_for_eval(self, target):
        return target % self.tagset_size

class CRFLoss_vb(nn.Module):
    """loss for viterbi decode"""
    def __init__(self, tagset_size, start_tag, end_tag, average_batch=True):
        super(CRFLoss_vb, self).__init__()
        self.tagset_size = tagset_size
        self.start_tag = start_tag
        self.end_tag = end_tag
        self.average_batch = average_batch
    def forward(self, scores, target, mask):
        seq_len = scores.size(0)
        bat_size = scores.size(1)
        # calculate sentence score
        tg_energy = torch.gather(scores.view(seq_len, bat_size, -1), 2, target).view(seq_len, bat_size)  # seq_len * bat_size
        tg_energy = tg_energy.masked_select(mask).sum()
        # calculate forward partition score
        seq_iter = enumerate(scores)
        _, inivalues = seq_iter.__next__()  # bat_size * from_target_size * to_target_size
        partition = inivalues[:, self.start_tag, :].clone()  # bat_size * to_target_size
        for idx, cur_values in seq_iter:
            cur_values = cur_values + partition.contiguous().view(bat_size, self.tagset_size, 1).expand(bat_size, self.tagset_size, self.tagset_size)
            cur_partition = log_sum_exp(cur_values, self.tagset_size)
            mask_idx = mask[idx, :].view(bat_size, 1).expand(bat_size, self.tagset_size)
            partition.masked_scatter_(mask_idx, cur_partition.masked_select(mask_idx))  # 0 for partition, 1 for cur_partition
        partition = partition[:, self.end_tag].sum()  # only need end at end_tag
        if self.average_batch:
            loss = (partition - tg_energy) / bat_size
        else:
            loss = (partition - tg_energy)
        return loss

class CRFDecode_vb():
    """Batch-mode viterbi decode"""
    def __init__(self, tagset_size, start_tag, end_tag, average_batch=True):
        self.tagset_size = tagset_size
        self.start_tag = start_tag
        self.end_tag = end_tag
        self.average_batch = average_batch
    def decode(self, scores, mask):
        seq_len = scores.size(0)
        bat_size = scores.size(1)
        mask = ~mask
        decode_idx = torch.LongTensor(seq_len - 1, bat_size)
        seq_iter = enumerate(scores)
        _, inivalues = seq_iter.__next__()  # bat_size * from_target_size * to_target_size
        forscores = inivalues[:, self.start_tag, :]  # bat_size * to_target_size
        back_points = list()
        for idx, cur_values in seq_iter:
            cur_values = cur_values + forscores.contiguous().view(bat_size, self.tagset_size, 1).expand(bat_size, self.tagset_size, self.tagset_size)
            forscores, cur_bp = torch.max(cur_values, 1)
            cur_bp.masked_fill_(mask[idx].view(bat_size, 1).expand(bat_size, self.tagset_size), self.end_tag)
            back_points.append(cur_bp)
        pointer = back_points[-1][:, self.end_tag]
        decode_idx[-1] = pointer
        for idx in range(len(back_points) - 2, -1, -1):
            back_point = back_points[idx]
            index = pointer.contiguous().view(-1, 1)
            pointer = torch.gather(back_point, 1, index).view(-1)
            decode_idx[idx] = pointer
        return decode_idx

# ---------------------------------------------------------------- model/lstm_crf.py
class LSTM_CRF(nn.Module):
    def __init__(self, vocab_size, tagset_size, embedding_dim, hidden_dim, rnn_layers, dropout_ratio, large_CRF=True):
        super(LSTM_CRF, self).__init__()
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.vocab_size = vocab_size
        self.word_embeds = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2,
                            num_layers=rnn_layers, bidirectional=True, dropout=dropout_ratio)
        self.rnn_layers = rnn_layers
        self.dropout1 = nn.Dropout(p=dropout_ratio)
        self.dropout2 = nn.Dropout(p=dropout_ratio)
        self.tagset_size = tagset_size
        self.crf = CRF_L(hidden_dim, tagset_size)  # large_CRF (the default); CRF_S is left out
        self.batch_size = 1
        self.seq_length = 1
    def set_batch_seq_size(self, sentence):
        tmp = sentence.size()
        self.seq_length = tmp[0]
        self.batch_size = tmp[1]
    def rand_init(self, init_embedding=False):
        if init_embedding:
            globals()['init_embedding'](self.word_embeds.weight)  # utils.init_embedding in the author's module
        init_lstm(self.lstm)
        self.crf.rand_init()
    def forward(self, sentence, hidden=None):
        self.set_batch_seq_size(sentence)
        embeds = self.word_embeds(sentence)
        d_embeds = self.dropout1(embeds)
        lstm_out, hidden = self.lstm(d_embeds, hidden)
        lstm_out = lstm_out.view(-1, self.hidden_dim)
        d_lstm_out = self.dropout2(lstm_out)
        crf_out = self.crf(d_lstm_out)
        crf_out = crf_out.view(self.seq_length, self.batch_size, self.tagset_size, self.tagset_size)
        return crf_out, hidden

# ---------------------------------------------------------------- model/evaluator.py
class eval_batch:
    """Base class for evaluation, provide method to calculate f1 score and accuracy"""
    def __init__(self, packer, l_map):
        self.packer = packer
        self.l_map = l_map
    def reset(self):
        self.correct_labels = 0
        self.total_labels = 0
    def calc_acc_batch(self, decoded_data, target_data):
        batch_decoded = torch.unbind(decoded_data, 1)
        batch_targets = torch.unbind(target_data, 0)
        for decoded, target in zip(batch_decoded, batch_targets):
            gold = self.packer.convert_for_eval(target)
            # remove padding
            length = find_length_from_labels(gold, self.l_map)
            gold = gold[:length].numpy()
            best_path = decoded[:length].numpy()
            self.total_labels += length
            self.correct_labels += np.sum(np.equal(best_path, gold))
    def acc_score(self):
        if 0 == self.total_labels:
            return 0.0
        accuracy = float(self.correct_labels) / self.total_labels
        return accuracy

class eval_w(eval_batch):
    """evaluation class for word level model (LSTM-CRF)"""
    def __init__(self, packer, l_map, score_type):
        eval_batch.__init__(self, packer, l_map)
        self.decoder = CRFDecode_vb(len(l_map), l_map['<start>'], l_map['<pad>'])
        self.eval_b = self.calc_acc_batch  # score_type 'a' (the F1 branch is left out)
        self.calc_s = self.acc_score
    def calc_score(self, ner_model, dataset_loader):
        ner_model.eval()
        self.reset()
        for feature, tg, mask in itertools.chain.from_iterable(dataset_loader):
            fea_v, _, mask_v = self.packer.repack_vb(feature, tg, mask)
            scores, _ = ner_model(fea_v)
            decoded = self.decoder.decode(scores.data, mask_v.data)
            self.eval_b(decoded, tg)
        return self.calc_s()

# ---------------------------------------------------------------- synthetic data/ner2003/eng.*.iobes
def write_conll_iobes(path, n_sentences, rng):
    names = {'PER': [['john'], ['mary', 'smith'], ['peter', 'van', 'dyke']], 'LOC': [['paris'], ['new', 'york']],
             'ORG': [['reuters'], ['united', 'nations']]}
    filler = ['the', 'said', 'in', 'on', 'a', 'visit', 'to', 'met', 'with', 'today', 'of', 'and']
    with codecs.open(path, 'w', 'utf-8') as f:
        f.write('-DOCSTART- -X- O O\n\n')
        for _ in range(n_sentences):
            tokens, length = [], rng.randint(4, 9)
            while len(tokens) < length:
                if rng.random() < 0.3:
                    etype = rng.choice(sorted(names))
                    words = rng.choice(names[etype])
                    tags = ['S-' + etype] if len(words) == 1 else ['B-' + etype] + ['I-' + etype] * (len(words) - 2) + ['E-' + etype]
                    tokens.extend(zip([w.capitalize() for w in words], tags))
                else:
                    tokens.append((rng.choice(filler), 'O'))
            f.write(''.join('%s NN I-NP %s\n' % (word, tag) for word, tag in tokens) + '\n')

if __name__ == "__main__":
    work_dir = tempfile.mkdtemp()  # holds ./data/ner2003 and ./checkpoint
    os.chdir(work_dir)
    os.makedirs('data/ner2003')
    os.makedirs('checkpoint')
    corpus_rng = random.Random(0)
    for split, n in (('train', 80), ('testa', 24), ('testb', 24)):
        write_conll_iobes('./data/ner2003/eng.%s.iobes' % split, n, corpus_rng)
    gpu = '0' if torch.cuda.is_available() else '-1'

    # ============================================================ train_w.py
    parser = argparse.ArgumentParser(description='Learning with BLSTM-CRF')
    for flag, kwargs in [  # the author's add_argument calls (help strings dropped), as a table
            ('--rand_embedding', dict(action='store_true')), ('--train_file', dict(default='./data/ner2003/eng.train.iobes')),
            ('--dev_file', dict(default='./data/ner2003/eng.testa.iobes')), ('--test_file', dict(default='./data/ner2003/eng.testb.iobes')),
            ('--gpu', dict(type=int, default=0)), ('--batch_size', dict(type=int, default=10)),
            ('--checkpoint', dict(default='./checkpoint/')), ('--hidden', dict(type=int, default=100)),
            ('--drop_out', dict(type=float, default=0.55)), ('--epoch', dict(type=int, default=200)),
            ('--start_epoch', dict(type=int, default=0)), ('--caseless', dict(action='store_true')),
            ('--embedding_dim', dict(type=int, default=100)), ('--layers', dict(type=int, default=1)),
            ('--lr', dict(type=float, default=0.015)), ('--lr_decay', dict(type=float, default=0.05)),
            ('--update', dict(choices=['sgd', 'adam'], default='sgd')), ('--momentum', dict(type=float, default=0.9)),
            ('--clip_grad', dict(type=float, default=5.0)), ('--small_crf', dict(action='store_false')),
            ('--mini_count', dict(type=float, default=5)), ('--eva_matrix', dict(choices=['a', 'fa'], default='fa')),
            ('--patience', dict(type=int, default=15)), ('--least_iters', dict(type=int, default=50))]:
        parser.add_argument(flag, **kwargs)
    args = parser.parse_args([
        '--rand_embedding', '--caseless', '--hidden', '24', '--embedding_dim', '16', '--epoch', '4', '--lr', '0.05',
        '--eva_matrix', 'a', '--gpu', gpu])
    if args.gpu >= 0:
        torch.cuda.set_device(args.gpu)
    print('setting:')
    print(args)
    with codecs.open(args.train_file, 'r', 'utf-8') as f:
        lines = f.readlines()
    with codecs.open(args.dev_file, 'r', 'utf-8') as f:
        dev_lines = f.readlines()
    with codecs.open(args.test_file, 'r', 'utf-8') as f:
        test_lines = f.readlines()
    dev_features, dev_labels = read_corpus(dev_lines)
    test_features, test_labels = read_corpus(test_lines)
    train_features, train_labels, f_map, l_map = generate_corpus(lines, if_shrink_feature=True, thresholds=0)
    f_set = {v for v in f_map}
    f_map = shrink_features(f_map, train_features, args.mini_count)
    l_set = functools.reduce(lambda x, y: x | y, map(lambda t: set(t), dev_labels))
    l_set = functools.reduce(lambda x, y: x | y, map(lambda t: set(t), test_labels), l_set)
    for label in l_set:
        if label not in l_map:
            l_map[label] = len(l_map)
    dataset = construct_bucket_mean_vb(train_features, train_labels, f_map, l_map, args.caseless)
    dev_dataset = construct_bucket_mean_vb(dev_features, dev_labels, f_map, l_map, args.caseless)
    test_dataset = construct_bucket_mean_vb(test_features, test_labels, f_map, l_map, args.caseless)
    dataset_loader = [torch.utils.data.DataLoader(tup, args.batch_size, shuffle=True, drop_last=False) for tup in dataset]
    dev_dataset_loader = [torch.utils.data.DataLoader(tup, 50, shuffle=False, drop_last=False) for tup in dev_dataset]
    test_dataset_loader = [torch.utils.data.DataLoader(tup, 50, shuffle=False, drop_last=False) for tup in test_dataset]

    ner_model = LSTM_CRF(len(f_map), len(l_map), args.embedding_dim, args.hidden, args.layers, args.drop_out, large_CRF=args.small_crf)
    ner_model.rand_init(init_embedding=args.rand_embedding)
    if args.update == 'sgd':
        optimizer = optim.SGD(ner_model.parameters(), lr=args.lr, momentum=args.momentum)
    elif args.update == 'adam':
        optimizer = optim.Adam(ner_model.parameters(), lr=args.lr)
    crit = CRFLoss_vb(len(l_map), l_map['<start>'], l_map['<pad>'])

    if args.gpu >= 0:
        if_cuda = True
        print('device: ' + str(args.gpu))
        torch.cuda.set_device(args.gpu)
        crit.cuda()
        ner_model.cuda()
        packer = CRFRepack(len(l_map), True)
    else:
        if_cuda = False
        packer = CRFRepack(len(l_map), False)
    tot_length = sum(map(lambda t: len(t), dataset_loader))
    best_acc = float('-inf')
    track_list = list()
    start_time = time.time()
    epoch_list = range(args.start_epoch, args.start_epoch + args.epoch)
    patience_count = 0
    evaluator = eval_w(packer, l_map, args.eva_matrix)

    for epoch_idx, args.start_epoch in enumerate(epoch_list):
        epoch_loss = 0
        ner_model.train()
        for feature, tg, mask in itertools.chain.from_iterable(dataset_loader):
            fea_v, tg_v, mask_v = packer.repack_vb(feature, tg, mask)
            ner_model.zero_grad()
            scores, hidden = ner_model.forward(fea_v)
            loss = crit.forward(scores, tg_v, mask_v)
            loss.backward()
            nn.utils.clip_grad_norm_(ner_model.parameters(), args.clip_grad)
            optimizer.step()
            epoch_loss += to_scalar(loss)
        adjust_learning_rate(optimizer, args.lr / (1 + (args.start_epoch + 1) * args.lr_decay))
        epoch_loss /= tot_length
        # eval & save check_point
        dev_acc = evaluator.calc_score(ner_model, dev_dataset_loader)
        if dev_acc > best_acc:
            patience_count = 0
            best_acc = dev_acc
            test_acc = evaluator.calc_score(ner_model, test_dataset_loader)
            track_list.append({'loss': epoch_loss, 'dev_acc': dev_acc, 'test_acc': test_acc})
            print('(loss: %.4f, epoch: %d, dev acc = %.4f, acc on test= %.4f), saving...' %
                  (epoch_loss, args.start_epoch, dev_acc, test_acc))
            try:
                save_checkpoint({
                    'epoch': args.start_epoch,
                    'state_dict': ner_model.state_dict(),
                    'optimizer': optimizer.state_dict(),
                    'f_map': f_map,
                    'l_map': l_map,
                }, {'track_list': track_list,
                    'args': vars(args)
                    }, args.checkpoint + 'lstm_crf')
            except Exception as inst:
                print(inst)
        else:
            patience_count += 1
            print('(loss: %.4f, epoch: %d, dev acc = %.4f)' % (epoch_loss, args.start_epoch, dev_acc))
            track_list.append({'loss': epoch_loss, 'dev_acc': dev_acc})
        print('epoch: ' + str(args.start_epoch) + '\t in ' + str(args.epoch) + ' take: ' + str(time.time() - start_time) + ' s')
        if patience_count >= args.patience and args.start_epoch >= args.least_iters:
            break
    print(args.checkpoint + ' dev_acc: %.4f test_acc: %.4f\n' % (dev_acc, test_acc), file=sys.stderr)

    # ============================================================ eval_w.py
    parser = argparse.ArgumentParser(description='Evaluating BLSTM-CRF')
    parser.add_argument('--load_arg', default='./checkpoint/soa/check_wc_p_char_lstm_crf.json', help='arg json file path')
    parser.add_argument('--load_check_point', default='./checkpoint/soa/check_wc_p_char_lstm_crf.model', help='checkpoint path')
    parser.add_argument('--gpu', type=int, default=0, help='gpu id')
    parser.add_argument('--eva_matrix', choices=['a', 'fa'], default='fa', help='use f1 and accuracy or accuracy alone')
    parser.add_argument('--test_file', default='', help='path to test file, if set to none, would use test_file path in the checkpoint file')
    args = parser.parse_args(['--load_arg', './checkpoint/lstm_crf.json', '--load_check_point', './checkpoint/lstm_crf.model',
                              '--eva_matrix', 'a', '--gpu', gpu])
    with open(args.load_arg, 'r') as f:
        jd = json.load(f)
    jd = jd['args']
    checkpoint_file = torch.load(args.load_check_point, map_location=lambda storage, loc: storage)
    f_map = checkpoint_file['f_map']
    l_map = checkpoint_file['l_map']
    if args.gpu >= 0:
        torch.cuda.set_device(args.gpu)
    if args.test_file:
        with codecs.open(args.test_file, 'r', 'utf-8') as f:
            test_lines = f.readlines()
    else:
        with codecs.open(jd['test_file'], 'r', 'utf-8') as f:
            test_lines = f.readlines()
    test_features, test_labels = read_corpus(test_lines)
    test_dataset = construct_bucket_mean_vb(test_features, test_labels, f_map, l_map, jd['caseless'])
    test_dataset_loader = [torch.utils.data.DataLoader(tup, 50, shuffle=False, drop_last=False) for tup in test_dataset]
    ner_model = LSTM_CRF(len(f_map), len(l_map), jd['embedding_dim'], jd['hidden'], jd['layers'], jd['drop_out'], large_CRF=jd['small_crf'])
    ner_model.load_state_dict(checkpoint_file['state_dict'])
    if args.gpu >= 0:
        if_cuda = True
        torch.cuda.set_device(args.gpu)
        ner_model.cuda()
        packer = CRFRepack(len(l_map), True)
    else:
        if_cuda = False
        packer = CRFRepack(len(l_map), False)
    evaluator = eval_w(packer, l_map, args.eva_matrix)
    test_acc = evaluator.calc_score(ner_model, test_dataset_loader)
    print(jd['checkpoint'] + ' test_acc: %.4f\n' % (test_acc))
    os.chdir('/')
    shutil.rmtree(work_dir)
    print('done: best dev acc %.4f, reloaded test acc %.4f' % (best_acc, test_acc))
