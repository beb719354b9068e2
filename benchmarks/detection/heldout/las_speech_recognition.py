"""Trains a Listen-Attend-Spell speech recogniser (BiLSTM encoder, dot-product attention, LSTMCell decoder) on synthetic
filterbank features the way kaituoxu/Listen-Attend-Spell does: train.py calls `model.cuda()`, the `Solver` moves each
padded batch with `.cuda()`, saves `Seq2Seq.serialize(...)` packages and resumes with `torch.load`; recognize.py loads
the best package onto the host, calls `model.cuda()` and beam-searches each utterance under `torch.no_grad()`.

Modeled on: kaituoxu/Listen-Attend-Spell, src/bin/train.py, src/bin/recognize.py, src/solver/solver.py,
src/models/{seq2seq,encoder,decoder,attention}.py, src/data/data.py and src/utils/utils.py at commit b43ce63e
(https://github.com/kaituoxu/Listen-Attend-Spell/tree/b43ce63eaf68252fae2056bfcbbdef18c4be2340).
Kept: train.py's `main(args)` (`model.cuda()` before the optimizer); `Solver` (`_reset` resuming with `torch.load`
and no `map_location`, host loss-history tensors, a package per epoch and for the best model, lr halving through
`optimizer.load_state_dict`, `_run_one_epoch` moving `padded_input`, `input_lengths` and `padded_target` with
`.cuda()`, `clip_grad_norm_`, `loss.item()`, cross-validation in `eval()` mode); `Seq2Seq` (`load_model`,
`load_model_from_package`, `serialize`); `Encoder`; `Decoder` (`zero_state` via `new_zeros`, sos/eos via
`ys[0].new([...])`, `pad_list` via `xs[0].new(...)`, `recognize_beam` with `encoder_outputs.new_zeros(1).long()`,
scores summed from device `local_best_scores[0, j]`, ids read with `int(...)`, hypotheses sorted by device scores);
`DotProductAttention`; data.py; utils.py; recognize.py's `recognize(args)`.
Changed to run here: the author's `.cuda()` calls are made only when `torch.cuda.is_available()`; `Encoder.forward`
hands `input_lengths.cpu()` to `pack_padded_sequence` (PyTorch >= 1.7 refuses lengths on the GPU, where the Solver
puts them) and `bool(bidirectional)` to `nn.LSTM` (it now refuses the int flag); `reduction='elementwise_mean'` ->
`'mean'`; Kaldi ark features (`kaldi_io.read_mat`) are `.npy` files; the espnet data.json files and the dictionary
are written to a temporary folder (each character maps to a fixed 16-dim feature pattern held for 3 frames, plus
noise); the scripts' argparse options are given as `argparse.Namespace`s; visdom plotting, help strings, most
comments and `AudioDataset`'s debug `num_batches` are left out; `recognize` returns its json.
Shrunk: 80-dim fbank -> 16; encoder 4 x 512 -> 2 x 32; decoder embed 512 -> 16, hidden 1024 -> 64; 24 / 8 / 4
utterances of 2 words, batch 32 -> 4 (maxlen_in 800 -> 30), 30 epochs -> 8 + 1 resumed, workers 4 -> 0, beam 3,
decode_max_len 12.
"""
import argparse
import json
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

EXP_DIR = tempfile.mkdtemp(prefix="las_")
FEAT_DIM = 16
WORDS = ['yes', 'no', 'up', 'down', 'left', 'right', 'on', 'off', 'stop', 'go']

def write_data(exp_dir):
    rng = np.random.RandomState(0)
    chars = ['<blank>', '<unk>', '<space>'] + sorted(set(''.join(WORDS))) + ['<sos>', '<eos>']
    with open(os.path.join(exp_dir, 'dict.txt'), 'w') as f:
        f.write(''.join('{} {}\n'.format(c, i) for i, c in enumerate(chars)))
    patterns = rng.randn(len(chars), FEAT_DIM).astype(np.float32)
    os.makedirs(os.path.join(exp_dir, 'feats'))
    for split, count in (('train', 24), ('valid', 8), ('test', 4)):
        utts = {}
        for i in range(count):
            text = ' '.join(rng.choice(WORDS, 2))
            tokens = [c if c != ' ' else '<space>' for c in text]
            ids = [chars.index(t) for t in tokens]
            feat = np.repeat(patterns[ids], 3, axis=0) + rng.randn(3 * len(ids), FEAT_DIM).astype(np.float32) * 0.3
            path = os.path.join(exp_dir, 'feats', '{}_{:03d}.npy'.format(split, i))
            np.save(path, feat)
            utts['{}_{:03d}'.format(split, i)] = {
                'input': [{'feat': path, 'name': 'input1', 'shape': list(feat.shape)}], 'utt2spk': 'spk0',
                'output': [{'name': 'target1', 'shape': [len(ids), len(chars)], 'text': text,
                            'token': ' '.join(tokens), 'tokenid': ' '.join(str(x) for x in ids)}]}
        with open(os.path.join(exp_dir, '{}.json'.format(split)), 'w') as f:
            json.dump({'utts': utts}, f)

# src/utils/utils.py
IGNORE_ID = -1

def pad_list(xs, pad_value):
    # From: espnet/src/nets/e2e_asr_th.py: pad_list()
    n_batch = len(xs)
    max_len = max(x.size(0) for x in xs)
    pad = xs[0].new(n_batch, max_len, * xs[0].size()[1:]).fill_(pad_value)
    for i in range(n_batch):
        pad[i, :xs[i].size(0)] = xs[i]
    return pad

def process_dict(dict_path):
    with open(dict_path, 'rb') as f:
        dictionary = f.readlines()
    char_list = [entry.decode('utf-8').split(' ')[0] for entry in dictionary]
    sos_id = char_list.index('<sos>')
    eos_id = char_list.index('<eos>')
    return char_list, sos_id, eos_id

def parse_hypothesis(hyp, char_list):
    # remove sos and get results
    tokenid_as_list = list(map(int, hyp['yseq'][1:]))
    token_as_list = [char_list[idx] for idx in tokenid_as_list]
    score = float(hyp['score'])
    tokenid = " ".join([str(idx) for idx in tokenid_as_list])
    token = " ".join(token_as_list)
    text = "".join(token_as_list).replace('<space>', ' ')
    return text, token, tokenid, score

def add_results_to_json(js, nbest_hyps, char_list):
    new_js = dict()
    new_js['utt2spk'] = js['utt2spk']
    new_js['output'] = []
    for n, hyp in enumerate(nbest_hyps, 1):
        rec_text, rec_token, rec_tokenid, score = parse_hypothesis(hyp, char_list)
        out_dic = dict(js['output'][0].items())
        out_dic['name'] += '[%d]' % n
        out_dic['rec_text'], out_dic['rec_token'], out_dic['rec_tokenid'] = rec_text, rec_token, rec_tokenid
        out_dic['score'] = score
        new_js['output'].append(out_dic)
        if n == 1:
            print('groundtruth: %s' % out_dic['text'])
            print('prediction : %s' % out_dic['rec_text'])
    return new_js

# src/data/data.py
class AudioDataset(data.Dataset):
    def __init__(self, data_json_path, batch_size, max_length_in, max_length_out):
        super(AudioDataset, self).__init__()
        with open(data_json_path, 'rb') as f:
            data = json.load(f)['utts']
        sorted_data = sorted(data.items(), key=lambda data: int(data[1]['input'][0]['shape'][0]), reverse=True)
        minibatch = []
        start = 0
        while True:
            ilen = int(sorted_data[start][1]['input'][0]['shape'][0])
            olen = int(sorted_data[start][1]['output'][0]['shape'][0])
            factor = max(int(ilen / max_length_in), int(olen / max_length_out))
            b = max(1, int(batch_size / (1 + factor)))
            end = min(len(sorted_data), start + b)
            minibatch.append(sorted_data[start:end])
            if end == len(sorted_data):
                break
            start = end
        self.minibatch = minibatch

    def __getitem__(self, index):
        return self.minibatch[index]

    def __len__(self):
        return len(self.minibatch)

class AudioDataLoader(data.DataLoader):
    def __init__(self, *args, **kwargs):
        super(AudioDataLoader, self).__init__(*args, **kwargs)
        self.collate_fn = _collate_fn

def _collate_fn(batch):
    assert len(batch) == 1
    batch = load_inputs_and_targets(batch[0])
    xs, ys = batch
    ilens = np.array([x.shape[0] for x in xs])
    xs_pad = pad_list([torch.from_numpy(x).float() for x in xs], 0)
    ilens = torch.from_numpy(ilens)
    ys_pad = pad_list([torch.from_numpy(y).long() for y in ys], IGNORE_ID)
    return xs_pad, ilens, ys_pad

def load_inputs_and_targets(batch):
    xs = [np.load(b[1]['input'][0]['feat']) for b in batch]
    ys = [b[1]['output'][0]['tokenid'].split() for b in batch]
    nonzero_idx = filter(lambda i: len(ys[i]) > 0, range(len(xs)))
    nonzero_sorted_idx = sorted(nonzero_idx, key=lambda i: -len(xs[i]))
    xs = [xs[i] for i in nonzero_sorted_idx]
    ys = [np.fromiter(map(int, ys[i]), dtype=np.int64) for i in nonzero_sorted_idx]
    return xs, ys

# src/models/attention.py, encoder.py, decoder.py, seq2seq.py
class DotProductAttention(nn.Module):
    def __init__(self):
        super(DotProductAttention, self).__init__()

    def forward(self, queries, values):
        batch_size = queries.size(0)
        input_lengths = values.size(1)
        attention_scores = torch.bmm(queries, values.transpose(1, 2))
        attention_distribution = F.softmax(
            attention_scores.view(-1, input_lengths), dim=1).view(batch_size, -1, input_lengths)
        attention_output = torch.bmm(attention_distribution, values)
        return attention_output, attention_distribution

class Encoder(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, dropout=0.0, bidirectional=True, rnn_type='lstm'):
        super(Encoder, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.rnn_type = rnn_type
        self.dropout = dropout
        if self.rnn_type == 'lstm':
            self.rnn = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dropout=dropout,
                               bidirectional=bool(bidirectional))

    def forward(self, padded_input, input_lengths):
        total_length = padded_input.size(1)  # get the max sequence length
        packed_input = pack_padded_sequence(padded_input, input_lengths.cpu(), batch_first=True)
        packed_output, hidden = self.rnn(packed_input)
        output, _ = pad_packed_sequence(packed_output, batch_first=True, total_length=total_length)
        return output, hidden

    def flatten_parameters(self):
        self.rnn.flatten_parameters()

class Decoder(nn.Module):
    def __init__(self, vocab_size, embedding_dim, sos_id, eos_id, hidden_size, num_layers,
                 bidirectional_encoder=True):
        super(Decoder, self).__init__()
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.sos_id = sos_id  # Start of Sentence
        self.eos_id = eos_id  # End of Sentence
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bidirectional_encoder = bidirectional_encoder  # useless now
        self.encoder_hidden_size = hidden_size  # must be equal now
        self.embedding = nn.Embedding(self.vocab_size, self.embedding_dim)
        self.rnn = nn.ModuleList()
        self.rnn += [nn.LSTMCell(self.embedding_dim + self.encoder_hidden_size, self.hidden_size)]
        for l in range(1, self.num_layers):
            self.rnn += [nn.LSTMCell(self.hidden_size, self.hidden_size)]
        self.attention = DotProductAttention()
        self.mlp = nn.Sequential(nn.Linear(self.encoder_hidden_size + self.hidden_size, self.hidden_size),
                                 nn.Tanh(), nn.Linear(self.hidden_size, self.vocab_size))

    def zero_state(self, encoder_padded_outputs, H=None):
        N = encoder_padded_outputs.size(0)
        H = self.hidden_size if H == None else H
        return encoder_padded_outputs.new_zeros(N, H)

    def forward(self, padded_input, encoder_padded_outputs):
        ys = [y[y != IGNORE_ID] for y in padded_input]  # parse padded ys
        eos = ys[0].new([self.eos_id])
        sos = ys[0].new([self.sos_id])
        ys_in = [torch.cat([sos, y], dim=0) for y in ys]
        ys_out = [torch.cat([y, eos], dim=0) for y in ys]
        ys_in_pad = pad_list(ys_in, self.eos_id)
        ys_out_pad = pad_list(ys_out, IGNORE_ID)
        assert ys_in_pad.size() == ys_out_pad.size()
        batch_size = ys_in_pad.size(0)
        output_length = ys_in_pad.size(1)
        h_list = [self.zero_state(encoder_padded_outputs)]
        c_list = [self.zero_state(encoder_padded_outputs)]
        for l in range(1, self.num_layers):
            h_list.append(self.zero_state(encoder_padded_outputs))
            c_list.append(self.zero_state(encoder_padded_outputs))
        att_c = self.zero_state(encoder_padded_outputs, H=encoder_padded_outputs.size(2))
        y_all = []
        embedded = self.embedding(ys_in_pad)
        for t in range(output_length):
            rnn_input = torch.cat((embedded[:, t, :], att_c), dim=1)
            h_list[0], c_list[0] = self.rnn[0](rnn_input, (h_list[0], c_list[0]))
            for l in range(1, self.num_layers):
                h_list[l], c_list[l] = self.rnn[l](h_list[l-1], (h_list[l], c_list[l]))
            rnn_output = h_list[-1]  # below unsqueeze: (N x H) -> (N x 1 x H)
            att_c, att_w = self.attention(rnn_output.unsqueeze(dim=1), encoder_padded_outputs)
            att_c = att_c.squeeze(dim=1)
            mlp_input = torch.cat((rnn_output, att_c), dim=1)
            predicted_y_t = self.mlp(mlp_input)
            y_all.append(predicted_y_t)
        y_all = torch.stack(y_all, dim=1)  # N x To x C
        y_all = y_all.view(batch_size * output_length, self.vocab_size)
        ce_loss = F.cross_entropy(y_all, ys_out_pad.view(-1), ignore_index=IGNORE_ID, reduction='mean')
        return ce_loss

    def recognize_beam(self, encoder_outputs, char_list, args):
        """Beam search, decode one utterence now."""
        beam = args.beam_size
        nbest = args.nbest
        if args.decode_max_len == 0:
            maxlen = encoder_outputs.size(0)
        else:
            maxlen = args.decode_max_len
        h_list = [self.zero_state(encoder_outputs.unsqueeze(0))]
        c_list = [self.zero_state(encoder_outputs.unsqueeze(0))]
        for l in range(1, self.num_layers):
            h_list.append(self.zero_state(encoder_outputs.unsqueeze(0)))
            c_list.append(self.zero_state(encoder_outputs.unsqueeze(0)))
        att_c = self.zero_state(encoder_outputs.unsqueeze(0), H=encoder_outputs.unsqueeze(0).size(2))
        y = self.sos_id
        vy = encoder_outputs.new_zeros(1).long()
        hyp = {'score': 0.0, 'yseq': [y], 'c_prev': c_list, 'h_prev': h_list, 'a_prev': att_c}
        hyps = [hyp]
        ended_hyps = []
        for i in range(maxlen):
            hyps_best_kept = []
            for hyp in hyps:
                vy[0] = hyp['yseq'][i]
                embedded = self.embedding(vy)
                rnn_input = torch.cat((embedded, hyp['a_prev']), dim=1)
                h_list[0], c_list[0] = self.rnn[0](rnn_input, (hyp['h_prev'][0], hyp['c_prev'][0]))
                for l in range(1, self.num_layers):
                    h_list[l], c_list[l] = self.rnn[l](h_list[l-1], (hyp['h_prev'][l], hyp['c_prev'][l]))
                rnn_output = h_list[-1]
                att_c, att_w = self.attention(rnn_output.unsqueeze(dim=1), encoder_outputs.unsqueeze(0))
                att_c = att_c.squeeze(dim=1)
                mlp_input = torch.cat((rnn_output, att_c), dim=1)
                predicted_y_t = self.mlp(mlp_input)
                local_scores = F.log_softmax(predicted_y_t, dim=1)
                local_best_scores, local_best_ids = torch.topk(local_scores, beam, dim=1)
                for j in range(beam):
                    new_hyp = {}
                    new_hyp['h_prev'] = h_list[:]
                    new_hyp['c_prev'] = c_list[:]
                    new_hyp['a_prev'] = att_c[:]
                    new_hyp['score'] = hyp['score'] + local_best_scores[0, j]
                    new_hyp['yseq'] = [0] * (1 + len(hyp['yseq']))
                    new_hyp['yseq'][:len(hyp['yseq'])] = hyp['yseq']
                    new_hyp['yseq'][len(hyp['yseq'])] = int(local_best_ids[0, j])
                    hyps_best_kept.append(new_hyp)
                hyps_best_kept = sorted(hyps_best_kept, key=lambda x: x['score'], reverse=True)[:beam]
            hyps = hyps_best_kept
            if i == maxlen - 1:
                for hyp in hyps:
                    hyp['yseq'].append(self.eos_id)
            remained_hyps = []
            for hyp in hyps:
                if hyp['yseq'][-1] == self.eos_id:
                    ended_hyps.append(hyp)
                else:
                    remained_hyps.append(hyp)
            hyps = remained_hyps
            if len(hyps) > 0:
                print('remeined hypothes: ' + str(len(hyps)))
            else:
                print('no hypothesis. Finish decoding.')
                break
        nbest_hyps = sorted(ended_hyps, key=lambda x: x['score'], reverse=True)[:min(len(ended_hyps), nbest)]
        return nbest_hyps

class Seq2Seq(nn.Module):
    """Sequence-to-Sequence architecture with configurable encoder and decoder."""

    def __init__(self, encoder, decoder):
        super(Seq2Seq, self).__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, padded_input, input_lengths, padded_target):
        encoder_padded_outputs, _ = self.encoder(padded_input, input_lengths)
        loss = self.decoder(padded_target, encoder_padded_outputs)
        return loss

    def recognize(self, input, input_length, char_list, args):
        encoder_outputs, _ = self.encoder(input.unsqueeze(0), input_length)
        nbest_hyps = self.decoder.recognize_beam(encoder_outputs[0], char_list, args)
        return nbest_hyps

    @classmethod
    def load_model(cls, path):
        package = torch.load(path, map_location=lambda storage, loc: storage)
        model = cls.load_model_from_package(package)
        return model

    @classmethod
    def load_model_from_package(cls, package):
        encoder = Encoder(package['einput'], package['ehidden'], package['elayer'], dropout=package['edropout'],
                          bidirectional=package['ebidirectional'], rnn_type=package['etype'])
        decoder = Decoder(package['dvocab_size'], package['dembed'], package['dsos_id'], package['deos_id'],
                          package['dhidden'], package['dlayer'], bidirectional_encoder=package['ebidirectional'])
        encoder.flatten_parameters()
        model = cls(encoder, decoder)
        model.load_state_dict(package['state_dict'])
        return model

    @staticmethod
    def serialize(model, optimizer, epoch, tr_loss=None, cv_loss=None):
        package = {
            'einput': model.encoder.input_size, 'ehidden': model.encoder.hidden_size,
            'elayer': model.encoder.num_layers, 'edropout': model.encoder.dropout,
            'ebidirectional': model.encoder.bidirectional, 'etype': model.encoder.rnn_type,
            'dvocab_size': model.decoder.vocab_size, 'dembed': model.decoder.embedding_dim,
            'dsos_id': model.decoder.sos_id, 'deos_id': model.decoder.eos_id,
            'dhidden': model.decoder.hidden_size, 'dlayer': model.decoder.num_layers,
            'state_dict': model.state_dict(), 'optim_dict': optimizer.state_dict(), 'epoch': epoch
        }
        if tr_loss is not None:
            package['tr_loss'] = tr_loss
            package['cv_loss'] = cv_loss
        return package

# src/solver/solver.py
class Solver(object):
    def __init__(self, data, model, optimizer, args):
        self.tr_loader = data['tr_loader']
        self.cv_loader = data['cv_loader']
        self.model, self.optimizer = model, optimizer
        # Training config
        self.epochs, self.half_lr = args.epochs, args.half_lr
        self.early_stop, self.max_norm = args.early_stop, args.max_norm
        # save and load model
        self.save_folder, self.checkpoint = args.save_folder, args.checkpoint
        self.continue_from, self.model_path = args.continue_from, args.model_path
        self.print_freq = args.print_freq
        self.tr_loss = torch.Tensor(self.epochs)
        self.cv_loss = torch.Tensor(self.epochs)
        self._reset()

    def _reset(self):
        if self.continue_from:
            print('Loading checkpoint model %s' % self.continue_from)
            package = torch.load(self.continue_from)
            self.model.load_state_dict(package['state_dict'])
            self.optimizer.load_state_dict(package['optim_dict'])
            self.start_epoch = int(package.get('epoch', 1))
            self.tr_loss[:self.start_epoch] = package['tr_loss'][:self.start_epoch]
            self.cv_loss[:self.start_epoch] = package['cv_loss'][:self.start_epoch]
        else:
            self.start_epoch = 0
        os.makedirs(self.save_folder, exist_ok=True)
        self.prev_val_loss = float("inf")
        self.best_val_loss = float("inf")
        self.halving = False

    def train(self):
        for epoch in range(self.start_epoch, self.epochs):
            print("Training...")
            self.model.train()  # Turn on BatchNorm & Dropout
            start = time.time()
            tr_avg_loss = self._run_one_epoch(epoch)
            print('Train Summary | End of Epoch {0} | Time {1:.2f}s | Train Loss {2:.3f}'.format(
                epoch + 1, time.time() - start, tr_avg_loss))
            if self.checkpoint:
                file_path = os.path.join(self.save_folder, 'epoch%d.pth.tar' % (epoch + 1))
                torch.save(self.model.serialize(self.model, self.optimizer, epoch + 1,
                                                tr_loss=self.tr_loss, cv_loss=self.cv_loss), file_path)
                print('Saving checkpoint model to %s' % file_path)
            print('Cross validation...')
            self.model.eval()  # Turn off Batchnorm & Dropout
            val_loss = self._run_one_epoch(epoch, cross_valid=True)
            print('Valid Summary | End of Epoch {0} | Time {1:.2f}s | Valid Loss {2:.3f}'.format(
                epoch + 1, time.time() - start, val_loss))
            if self.half_lr and val_loss >= self.prev_val_loss:
                if self.early_stop and self.halving:
                    print("Already start halving learing rate, it still gets too small imporvement, stop training "
                          "early.")
                    break
                self.halving = True
            if self.halving:
                optim_state = self.optimizer.state_dict()
                optim_state['param_groups'][0]['lr'] = optim_state['param_groups'][0]['lr'] / 2.0
                self.optimizer.load_state_dict(optim_state)
                print('Learning rate adjusted to: {lr:.6f}'.format(lr=optim_state['param_groups'][0]['lr']))
            self.prev_val_loss = val_loss
            self.tr_loss[epoch] = tr_avg_loss
            self.cv_loss[epoch] = val_loss
            if val_loss < self.best_val_loss:
                self.best_val_loss = val_loss
                file_path = os.path.join(self.save_folder, self.model_path)
                torch.save(self.model.serialize(self.model, self.optimizer, epoch + 1,
                                                tr_loss=self.tr_loss, cv_loss=self.cv_loss), file_path)
                print("Find better validated model, saving to %s" % file_path)

    def _run_one_epoch(self, epoch, cross_valid=False):
        start = time.time()
        total_loss = 0
        data_loader = self.tr_loader if not cross_valid else self.cv_loader
        for i, (data) in enumerate(data_loader):
            padded_input, input_lengths, padded_target = data
            if torch.cuda.is_available():
                padded_input = padded_input.cuda()
                input_lengths = input_lengths.cuda()
                padded_target = padded_target.cuda()
            loss = self.model(padded_input, input_lengths, padded_target)
            if not cross_valid:
                self.optimizer.zero_grad()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
                self.optimizer.step()
            total_loss += loss.item()
            if i % self.print_freq == 0:
                print('Epoch {0} | Iter {1} | Average Loss {2:.3f} | Current Loss {3:.6f} | {4:.1f} ms/batch'.format(
                    epoch + 1, i + 1, total_loss / (i + 1), loss.item(), 1000 * (time.time() - start) / (i + 1)),
                    flush=True)
        return total_loss / (i + 1)

# src/bin/train.py
def main(args):
    tr_dataset = AudioDataset(args.train_json, args.batch_size, args.maxlen_in, args.maxlen_out)
    cv_dataset = AudioDataset(args.valid_json, args.batch_size, args.maxlen_in, args.maxlen_out)
    tr_loader = AudioDataLoader(tr_dataset, batch_size=1, num_workers=args.num_workers)
    cv_loader = AudioDataLoader(cv_dataset, batch_size=1, num_workers=args.num_workers)
    char_list, sos_id, eos_id = process_dict(args.dict)
    vocab_size = len(char_list)
    data = {'tr_loader': tr_loader, 'cv_loader': cv_loader}
    encoder = Encoder(args.einput, args.ehidden, args.elayer, dropout=args.edropout,
                      bidirectional=args.ebidirectional, rnn_type=args.etype)
    decoder = Decoder(vocab_size, args.dembed, sos_id, eos_id, args.dhidden, args.dlayer,
                      bidirectional_encoder=args.ebidirectional)
    model = Seq2Seq(encoder, decoder)
    print(model)
    if torch.cuda.is_available():
        model.cuda()
    if args.optimizer == 'sgd':
        optimizier = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.l2)
    elif args.optimizer == 'adam':
        optimizier = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.l2)
    else:
        print("Not support optimizer")
        return
    solver = Solver(data, model, optimizier, args)
    solver.train()

# src/bin/recognize.py
def recognize(args):
    model = Seq2Seq.load_model(args.model_path)
    print(model)
    model.eval()
    if torch.cuda.is_available():
        model.cuda()
    char_list, sos_id, eos_id = process_dict(args.dict)
    assert model.decoder.sos_id == sos_id and model.decoder.eos_id == eos_id
    with open(args.recog_json, 'rb') as f:
        js = json.load(f)['utts']
    new_js = {}
    with torch.no_grad():
        for idx, name in enumerate(js.keys(), 1):
            print('(%d/%d) decoding %s' % (idx, len(js.keys()), name), flush=True)
            input = np.load(js[name]['input'][0]['feat'])  # TxD
            input = torch.from_numpy(input).float()
            input_length = torch.tensor([input.size(0)], dtype=torch.int)
            if torch.cuda.is_available():
                input = input.cuda()
                input_length = input_length.cuda()
            nbest_hyps = model.recognize(input, input_length, char_list, args)
            new_js[name] = add_results_to_json(js[name], nbest_hyps, char_list)
    with open(args.result_label, 'wb') as f:
        f.write(json.dumps({'utts': new_js}, indent=4, sort_keys=True).encode('utf_8'))
    return new_js

if __name__ == '__main__':
    write_data(EXP_DIR)
    # src/bin/train.py's options (argparse defaults shrunk, see the docstring)
    args = argparse.Namespace(
        train_json=os.path.join(EXP_DIR, 'train.json'), valid_json=os.path.join(EXP_DIR, 'valid.json'),
        dict=os.path.join(EXP_DIR, 'dict.txt'), einput=FEAT_DIM, ehidden=32, elayer=2, edropout=0.0,
        ebidirectional=1, etype='lstm', atype='dot', dembed=16, dhidden=64, dlayer=1, epochs=8, half_lr=1,
        early_stop=0, max_norm=5, batch_size=4, maxlen_in=30, maxlen_out=20, num_workers=0, optimizer='adam',
        lr=3e-3, momentum=0.0, l2=0.0, save_folder=os.path.join(EXP_DIR, 'exp'), checkpoint=1, continue_from='',
        model_path='final.pth.tar', print_freq=3)
    main(args)
    # resume from the epoch-8 package for one more epoch
    args.epochs, args.continue_from = 9, os.path.join(EXP_DIR, 'exp', 'epoch8.pth.tar')
    main(args)
    # src/bin/recognize.py's options
    args = argparse.Namespace(
        recog_json=os.path.join(EXP_DIR, 'test.json'), dict=os.path.join(EXP_DIR, 'dict.txt'),
        result_label=os.path.join(EXP_DIR, 'result.json'), model_path=os.path.join(EXP_DIR, 'exp', 'final.pth.tar'),
        beam_size=3, nbest=1, decode_max_len=12)
    print(args, flush=True)
    results = recognize(args)
    correct = sum(r['output'][0]['rec_text'].replace('<eos>', '') == r['output'][0]['text'] for r in results.values())
    print('done: {} / {} test utterances recognised exactly'.format(correct, len(results)))
