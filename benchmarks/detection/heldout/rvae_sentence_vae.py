"""Trains word2vec-style embeddings with negative sampling, then a character-aware recurrent VAE for sentences on
them, validates, samples sentences word by word, saves the model and reloads it to sample again, as
kefirski/pytorch_RVAE does: each script takes a ``--use-cuda`` flag and moves the module with ``.cuda()`` after any
``load_state_dict(t.load(...))`` (no map_location) and before the optimizer is built; numpy batches from
`BatchLoader` are moved with ``[var.cuda() if use_cuda else var for var in input]``; the modules read
``use_cuda = ...weight.is_cuda`` and move freshly drawn CPU tensors (the VAE noise ``z``, the negative samples) with
``.cuda()``; `parameters_allocation_check` asserts all parameters share one memory; `Highway` and `TDNN` keep layers
and kernels in plain lists and register their parameters by hand; the frozen word-embedding matrix is an
``nn.Parameter(requires_grad=False)`` left out by `learnable_parameters`; losses and embeddings come back with
``.data.cpu().numpy()`` and sampling reads the softmax with ``prediction.data.cpu().numpy()``.

Modeled on: kefirski/pytorch_RVAE, train.py, sample.py, train_word_embeddings.py, model/rvae.py, model/encoder.py,
model/decoder.py, selfModules/{embedding,highway,tdnn,neg}.py and utils/{batch_loader,parameters,functional}.py at
commit 19103d1298d7d77423c6e7d76dcc190400d7256e
(https://github.com/kefirski/pytorch_RVAE/blob/19103d1298d7d77423c6e7d76dcc190400d7256e/train.py,
https://github.com/kefirski/pytorch_RVAE/blob/19103d1298d7d77423c6e7d76dcc190400d7256e/model/rvae.py,
https://github.com/kefirski/pytorch_RVAE/blob/19103d1298d7d77423c6e7d76dcc190400d7256e/selfModules/neg.py).

Kept: `fold`, `parameters_allocation_check`, `kld_coef`; `Parameters`; `BatchLoader` (``preprocess`` /
``load_preprocessed`` with the pickle and ``.npy`` caches, ``next_batch``, ``next_embedding_seq``, ``go_input``,
``sample_word_from_distribution``, ``encode_characters``); `Highway`, `TDNN`, `Embedding`, `NEG_loss`; `Encoder`,
`Decoder`, `RVAE` (``forward``, ``learnable_parameters``, the ``trainer``/``validater`` closures, ``sample``);
the three scripts as functions.

Changed to run here: ``--use-cuda`` defaults to ``torch.cuda.is_available()`` instead of ``True``;
`parameters_allocation_check` folds over ``p.is_cuda`` (folding over the tensors themselves is ambiguous on current
PyTorch); ``.data.cpu().numpy()[0]`` on 0-d losses becomes ``float(...)``; `TDNN` drops ``.squeeze(2)`` after
``max(2)[0]`` (max no longer keeps the dim); ``F.softmax`` gets ``dim=1``; ragged tensors use ``dtype=object`` and
``allow_pickle=True``; ``cPickle`` is ``pickle``; the character vocabulary is ``sorted(set(...))`` (``list(set())``
order changes per run); no ``Variable``; synthetic corpus; a temporary working directory; condensed printouts.
Shrunk: ~35-word vocabulary, 200/40 sentences, word embeddings 16, char embeddings 8, TDNN kernels (1,4),(2,6),(3,8),
encoder 24, latent 16, decoder 32x2; 60 embedding iterations, 30 VAE iterations, batch 8, 12-word samples.
"""
import argparse
import collections
import os
import pickle
import shutil
import tempfile

import numpy as np
import torch as t
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Parameter
from torch.optim import SGD, Adam

# ------------------------------------------------------------------ utils/functional.py, utils/parameters.py
def fold(f, l, a):
    return a if (len(l) == 0) else fold(f, l[1:], f(a, l[0]))

def f_and(x, y):
    return x and y

def f_or(x, y):
    return x or y

def parameters_allocation_check(module):
    parameters = [p.is_cuda for p in module.parameters()]
    return fold(f_and, parameters, True) or not fold(f_or, parameters, False)

def kld_coef(i):
    import math
    return (math.tanh((i - 3500) / 1000) + 1) / 2

class Parameters:
    def __init__(self, max_word_len, max_seq_len, word_vocab_size, char_vocab_size):
        self.max_word_len = int(max_word_len)
        self.max_seq_len = int(max_seq_len) + 1  # go or eos token
        self.word_vocab_size = int(word_vocab_size)
        self.char_vocab_size = int(char_vocab_size)
        self.word_embed_size = 16  # 300
        self.char_embed_size = 8  # 15
        self.kernels = [(1, 4), (2, 6), (3, 8)]  # [(1, 25), (2, 50), ..., (6, 150)]
        self.sum_depth = fold(lambda x, y: x + y, [depth for _, depth in self.kernels], 0)
        self.encoder_rnn_size = 24  # 600
        self.encoder_num_layers = 1
        self.latent_variable_size = 16  # 1100
        self.decoder_rnn_size = 32  # 800
        self.decoder_num_layers = 2

# ------------------------------------------------------------------ utils/batch_loader.py
class BatchLoader:
    def __init__(self, path='../../'):
        self.data_files = [path + 'data/train.txt', path + 'data/test.txt']
        self.idx_files = [path + 'data/words_vocab.pkl', path + 'data/characters_vocab.pkl']
        self.tensor_files = [[path + 'data/train_word_tensor.npy', path + 'data/valid_word_tensor.npy'],
                             [path + 'data/train_character_tensor.npy', path + 'data/valid_character_tensor.npy']]
        self.blind_symbol = ''
        self.pad_token = '_'
        self.go_token = '>'
        self.end_token = '|'
        idx_exists = fold(f_and, [os.path.exists(file) for file in self.idx_files], True)
        tensors_exists = fold(f_and, [os.path.exists(file) for target in self.tensor_files for file in target], True)
        if idx_exists and tensors_exists:
            self.load_preprocessed(self.data_files, self.idx_files, self.tensor_files)
            print('preprocessed data was found and loaded')
        else:
            self.preprocess(self.data_files, self.idx_files, self.tensor_files)
            print('data have preprocessed')
        self.word_embedding_index = 0
    def build_character_vocab(self, data):
        # unique characters with blind symbol
        idx_to_char = sorted(set(data)) + [self.blind_symbol, self.pad_token, self.go_token, self.end_token]
        return len(idx_to_char), idx_to_char, {x: i for i, x in enumerate(idx_to_char)}
    def build_word_vocab(self, sentences):
        word_counts = collections.Counter(sentences)
        idx_to_word = [x[0] for x in word_counts.most_common()]
        idx_to_word = list(sorted(idx_to_word)) + [self.pad_token, self.go_token, self.end_token]
        return len(idx_to_word), idx_to_word, {x: i for i, x in enumerate(idx_to_word)}
    def preprocess(self, data_files, idx_files, tensor_files):
        data = [open(file, "r").read() for file in data_files]
        merged_data = data[0] + '\n' + data[1]
        self.chars_vocab_size, self.idx_to_char, self.char_to_idx = self.build_character_vocab(merged_data)
        with open(idx_files[1], 'wb') as f:
            pickle.dump(self.idx_to_char, f)
        data_words = [[line.split() for line in target.split('\n')] for target in data]
        merged_data_words = merged_data.split()
        self.words_vocab_size, self.idx_to_word, self.word_to_idx = self.build_word_vocab(merged_data_words)
        self.max_word_len = np.amax([len(word) for word in self.idx_to_word])
        self.max_seq_len = np.amax([len(line) for target in data_words for line in target])
        self.num_lines = [len(target) for target in data_words]
        with open(idx_files[0], 'wb') as f:
            pickle.dump(self.idx_to_word, f)
        self.word_tensor = [self._ragged([list(map(self.word_to_idx.get, line)) for line in target])
                            for target in data_words]
        for i, path in enumerate(tensor_files[0]):
            np.save(path, self.word_tensor[i])
        self.character_tensor = [self._ragged([list(map(self.encode_characters, line)) for line in target])
                                 for target in data_words]
        for i, path in enumerate(tensor_files[1]):
            np.save(path, self.character_tensor[i])
        self.just_words = [word for line in self.word_tensor[0] for word in line]
    @staticmethod
    def _ragged(lines):  # np.array(ragged lists) needs dtype=object on current numpy
        arr = np.empty(len(lines), dtype=object)
        arr[:] = lines
        return arr
    def load_preprocessed(self, data_files, idx_files, tensor_files):
        data = [open(file, "r").read() for file in data_files]
        data_words = [[line.split() for line in target.split('\n')] for target in data]
        self.max_seq_len = np.amax([len(line) for target in data_words for line in target])
        self.num_lines = [len(target) for target in data_words]
        [self.idx_to_word, self.idx_to_char] = [pickle.load(open(file, "rb")) for file in idx_files]
        [self.words_vocab_size, self.chars_vocab_size] = [len(idx) for idx in [self.idx_to_word, self.idx_to_char]]
        [self.word_to_idx, self.char_to_idx] = [dict(zip(idx, range(len(idx))))
                                                for idx in [self.idx_to_word, self.idx_to_char]]
        self.max_word_len = np.amax([len(word) for word in self.idx_to_word])
        [self.word_tensor, self.character_tensor] = [[np.load(target, allow_pickle=True) for target in input_type]
                                                     for input_type in tensor_files]
        self.just_words = [word for line in self.word_tensor[0] for word in line]
    def next_batch(self, batch_size, target_str):
        target = 0 if target_str == 'train' else 1
        indexes = np.array(np.random.randint(self.num_lines[target], size=batch_size))
        encoder_word_input = [self.word_tensor[target][index] for index in indexes]
        encoder_character_input = [self.character_tensor[target][index] for index in indexes]
        input_seq_len = [len(line) for line in encoder_word_input]
        max_input_seq_len = np.amax(input_seq_len)
        encoded_words = [[idx for idx in line] for line in encoder_word_input]
        decoder_word_input = [[self.word_to_idx[self.go_token]] + line for line in encoder_word_input]
        decoder_character_input = [[self.encode_characters(self.go_token)] + line for line in encoder_character_input]
        decoder_output = [line + [self.word_to_idx[self.end_token]] for line in encoded_words]
        pad_word, pad_chars = self.word_to_idx[self.pad_token], self.encode_characters(self.pad_token)
        for i in range(batch_size):  # "sorry": pad every sequence to the longest one
            to_add = max_input_seq_len - input_seq_len[i]
            decoder_word_input[i] = decoder_word_input[i] + [pad_word] * to_add
            decoder_character_input[i] = decoder_character_input[i] + [pad_chars] * to_add
            decoder_output[i] = decoder_output[i] + [pad_word] * to_add
            encoder_word_input[i] = [pad_word] * to_add + encoder_word_input[i][::-1]
            encoder_character_input[i] = [pad_chars] * to_add + encoder_character_input[i][::-1]
        return np.array(encoder_word_input), np.array(encoder_character_input), \
            np.array(decoder_word_input), np.array(decoder_character_input), np.array(decoder_output)
    def next_embedding_seq(self, seq_len):
        words_len = len(self.just_words)
        seq = [self.just_words[i % words_len]
               for i in np.arange(self.word_embedding_index, self.word_embedding_index + seq_len)]
        result = []
        for i in range(seq_len - 2):
            result.append([seq[i + 1], seq[i]])
            result.append([seq[i + 1], seq[i + 2]])
        self.word_embedding_index = (self.word_embedding_index + seq_len) % words_len - 2
        # input and target
        result = np.array(result)
        return result[:, 0], result[:, 1]
    def go_input(self, batch_size):
        go_word_input = [[self.word_to_idx[self.go_token]] for _ in range(batch_size)]
        go_character_input = [[self.encode_characters(self.go_token)] for _ in range(batch_size)]
        return np.array(go_word_input), np.array(go_character_input)
    def sample_word_from_distribution(self, distribution):
        ix = np.random.choice(range(self.words_vocab_size), p=distribution.ravel())
        x = np.zeros((self.words_vocab_size, 1))
        x[ix] = 1
        return self.idx_to_word[np.argmax(x)]
    def encode_characters(self, characters):
        word_len = len(characters)
        to_add = self.max_word_len - word_len
        characters_idx = [self.char_to_idx[i] for i in characters] + to_add * [self.char_to_idx['']]
        return characters_idx

# ------------------------------------------------------------------ selfModules/
class Highway(nn.Module):
    def __init__(self, size, num_layers, f):
        super(Highway, self).__init__()
        self.num_layers = num_layers
        for kind in ('nonlinear', 'linear', 'gate'):  # three plain lists of Linear layers
            setattr(self, kind, [nn.Linear(size, size) for _ in range(num_layers)])
            for i, module in enumerate(getattr(self, kind)):
                self._add_to_parameters(module.parameters(), '{}_module_{}'.format(kind, i))
        self.f = f
    def forward(self, x):
        """applies sigma(x) * f(G(x)) + (1 - sigma(x)) * Q(x) with affine G, Q and sigmoid gate sigma"""
        for layer in range(self.num_layers):
            gate = F.sigmoid(self.gate[layer](x))
            nonlinear = self.f(self.nonlinear[layer](x))
            linear = self.linear[layer](x)
            x = gate * nonlinear + (1 - gate) * linear
        return x
    def _add_to_parameters(self, parameters, name):
        for i, parameter in enumerate(parameters):
            self.register_parameter(name='{}-{}'.format(name, i), param=parameter)

class TDNN(nn.Module):
    def __init__(self, params):
        super(TDNN, self).__init__()
        self.params = params
        self.kernels = [Parameter(t.Tensor(out_dim, self.params.char_embed_size, kW).uniform_(-1, 1))
                        for kW, out_dim in params.kernels]
        self._add_to_parameters(self.kernels, 'TDNN_kernel')
    def forward(self, x):
        """[batch_size, max_seq_len, max_word_len, char_embed_size] -> [batch_size, max_seq_len, depth_sum]"""
        assert len(x.size()) == 4, 'Wrong input rang, must be equal to 4, but {} found'.format(len(x.size()))
        [batch_size, seq_len, _, embed_size] = x.size()
        assert embed_size == self.params.char_embed_size, \
            'Wrong embedding size, must be equal to {}, but {} found'.format(self.params.char_embed_size, embed_size)
        # leaps with shape
        x = x.view(-1, self.params.max_word_len, self.params.char_embed_size).transpose(1, 2).contiguous()
        xs = [F.tanh(F.conv1d(x, kernel)) for kernel in self.kernels]
        xs = [x.max(2)[0] for x in xs]
        x = t.cat(xs, 1)
        x = x.view(batch_size, seq_len, -1)
        return x
    def _add_to_parameters(self, parameters, name):
        for i, parameter in enumerate(parameters):
            self.register_parameter(name='{}-{}'.format(name, i), param=parameter)

class Embedding(nn.Module):
    def __init__(self, params, path='../../../'):
        super(Embedding, self).__init__()
        self.params = params
        word_embed = np.load(path + 'data/word_embeddings.npy')
        self.word_embed = nn.Embedding(self.params.word_vocab_size, self.params.word_embed_size)
        self.char_embed = nn.Embedding(self.params.char_vocab_size, self.params.char_embed_size)
        self.word_embed.weight = Parameter(t.from_numpy(word_embed).float(), requires_grad=False)
        self.char_embed.weight = Parameter(
            t.Tensor(self.params.char_vocab_size, self.params.char_embed_size).uniform_(-1, 1))
        self.TDNN = TDNN(self.params)
    def forward(self, word_input, character_input):
        assert word_input.size()[:2] == character_input.size()[:2], \
            'Word input and character input must have the same sizes, but {} and {} found'.format(
                word_input.size(), character_input.size())
        [batch_size, seq_len] = word_input.size()
        word_input = self.word_embed(word_input)
        character_input = character_input.view(-1, self.params.max_word_len)
        character_input = self.char_embed(character_input)
        character_input = character_input.view(batch_size, seq_len, self.params.max_word_len,
                                               self.params.char_embed_size)
        character_input = self.TDNN(character_input)
        result = t.cat([word_input, character_input], 2)
        return result

class NEG_loss(nn.Module):
    def __init__(self, num_classes, embed_size):
        super(NEG_loss, self).__init__()
        self.num_classes, self.embed_size = num_classes, embed_size
        self.out_embed = nn.Embedding(self.num_classes, self.embed_size)
        self.out_embed.weight = Parameter(t.FloatTensor(self.num_classes, self.embed_size).uniform_(-1, 1))
        self.in_embed = nn.Embedding(self.num_classes, self.embed_size)
        self.in_embed.weight = Parameter(t.FloatTensor(self.num_classes, self.embed_size).uniform_(-1, 1))
    def forward(self, input_labes, out_labels, num_sampled):
        assert parameters_allocation_check(self), \
            """Invalid CUDA options. out_embed and in_embed parameters both should be stored in the same memory
            got out_embed.is_cuda = {}, in_embed.is_cuda = {}""".format(self.out_embed.weight.is_cuda,
                                                                       self.in_embed.weight.is_cuda)
        use_cuda = self.out_embed.weight.is_cuda
        [batch_size] = input_labes.size()
        input = self.in_embed(input_labes)
        output = self.out_embed(out_labels)
        noise = t.Tensor(batch_size, num_sampled).uniform_(0, self.num_classes - 1).long()
        if use_cuda:
            noise = noise.cuda()
        noise = self.out_embed(noise).neg()
        log_target = (input * output).sum(1).squeeze().sigmoid().log()
        sum_log_sampled = t.bmm(noise, input.unsqueeze(2)).sigmoid().log().sum(1).squeeze()
        loss = log_target + sum_log_sampled
        return -loss
    def input_embeddings(self):
        return self.in_embed.weight.data.cpu().numpy()

# ------------------------------------------------------------------ model/
class Encoder(nn.Module):
    def __init__(self, params):
        super(Encoder, self).__init__()
        self.params = params
        self.hw1 = Highway(self.params.sum_depth + self.params.word_embed_size, 2, F.relu)
        self.rnn = nn.LSTM(input_size=self.params.word_embed_size + self.params.sum_depth,
                           hidden_size=self.params.encoder_rnn_size, num_layers=self.params.encoder_num_layers,
                           batch_first=True, bidirectional=True)
    def forward(self, input):
        [batch_size, seq_len, embed_size] = input.size()
        input = input.view(-1, embed_size)
        input = self.hw1(input)
        input = input.view(batch_size, seq_len, embed_size)
        assert parameters_allocation_check(self), \
            'Invalid CUDA options. Parameters should be allocated in the same memory'
        # Unfold rnn with zero initial state and get its final state from the last layer
        _, (_, final_state) = self.rnn(input)
        final_state = final_state.view(self.params.encoder_num_layers, 2, batch_size, self.params.encoder_rnn_size)
        final_state = final_state[-1]
        h_1, h_2 = final_state[0], final_state[1]
        return t.cat([h_1, h_2], 1)

class Decoder(nn.Module):
    def __init__(self, params):
        super(Decoder, self).__init__()
        self.params = params
        self.rnn = nn.LSTM(input_size=self.params.latent_variable_size + self.params.word_embed_size,
                           hidden_size=self.params.decoder_rnn_size, num_layers=self.params.decoder_num_layers,
                           batch_first=True)
        self.fc = nn.Linear(self.params.decoder_rnn_size, self.params.word_vocab_size)
    def forward(self, decoder_input, z, drop_prob, initial_state=None):
        assert parameters_allocation_check(self), \
            'Invalid CUDA options. Parameters should be allocated in the same memory'
        [batch_size, seq_len, _] = decoder_input.size()
        ''' decoder rnn is conditioned on context via additional bias = W_cond * z to every input token '''
        decoder_input = F.dropout(decoder_input, drop_prob)
        z = t.cat([z] * seq_len, 1).view(batch_size, seq_len, self.params.latent_variable_size)
        decoder_input = t.cat([decoder_input, z], 2)
        rnn_out, final_state = self.rnn(decoder_input, initial_state)
        rnn_out = rnn_out.contiguous().view(-1, self.params.decoder_rnn_size)
        result = self.fc(rnn_out)
        result = result.view(batch_size, seq_len, self.params.word_vocab_size)
        return result, final_state

class RVAE(nn.Module):
    def __init__(self, params):
        super(RVAE, self).__init__()
        self.params = params
        self.embedding = Embedding(self.params, '')
        self.encoder = Encoder(self.params)
        self.context_to_mu = nn.Linear(self.params.encoder_rnn_size * 2, self.params.latent_variable_size)
        self.context_to_logvar = nn.Linear(self.params.encoder_rnn_size * 2, self.params.latent_variable_size)
        self.decoder = Decoder(self.params)
    def forward(self, drop_prob, encoder_word_input=None, encoder_character_input=None,
                decoder_word_input=None, decoder_character_input=None, z=None, initial_state=None):
        assert parameters_allocation_check(self), \
            'Invalid CUDA options. Parameters should be allocated in the same memory'
        use_cuda = self.embedding.word_embed.weight.is_cuda
        assert z is None and fold(lambda acc, parameter: acc and parameter is not None,
                                  [encoder_word_input, encoder_character_input, decoder_word_input], True) \
            or (z is not None and decoder_word_input is not None), \
            "Invalid input. If z is None then encoder and decoder inputs should be passed as arguments"
        if z is None:
            ''' Get context from encoder and sample z ~ N(mu, std) '''
            [batch_size, _] = encoder_word_input.size()
            encoder_input = self.embedding(encoder_word_input, encoder_character_input)
            context = self.encoder(encoder_input)
            mu = self.context_to_mu(context)
            logvar = self.context_to_logvar(context)
            std = t.exp(0.5 * logvar)
            z = t.randn([batch_size, self.params.latent_variable_size])
            if use_cuda:
                z = z.cuda()
            z = z * std + mu
            kld = (-0.5 * t.sum(logvar - t.pow(mu, 2) - t.exp(logvar) + 1, 1)).mean().squeeze()
        else:
            kld = None
        decoder_input = self.embedding.word_embed(decoder_word_input)
        out, final_state = self.decoder(decoder_input, z, drop_prob, initial_state)
        return out, final_state, kld
    def learnable_parameters(self):
        # word_embedding is constant parameter thus it must be dropped from list of parameters for optimizer
        return [p for p in self.parameters() if p.requires_grad]
    def trainer(self, optimizer, batch_loader):
        def train(i, batch_size, use_cuda, dropout):
            input = batch_loader.next_batch(batch_size, 'train')
            input = [t.from_numpy(var) for var in input]
            input = [var.long() for var in input]
            input = [var.cuda() if use_cuda else var for var in input]
            [encoder_word_input, encoder_character_input, decoder_word_input, decoder_character_input, target] = input
            logits, _, kld = self(dropout, encoder_word_input, encoder_character_input,
                                  decoder_word_input, decoder_character_input, z=None)
            logits = logits.view(-1, self.params.word_vocab_size)
            target = target.view(-1)
            cross_entropy = F.cross_entropy(logits, target)
            loss = 79 * cross_entropy + kld_coef(i) * kld
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return cross_entropy, kld, kld_coef(i)
        return train
    def validater(self, batch_loader):
        def validate(batch_size, use_cuda):
            input = batch_loader.next_batch(batch_size, 'valid')
            input = [t.from_numpy(var) for var in input]
            input = [var.long() for var in input]
            input = [var.cuda() if use_cuda else var for var in input]
            [encoder_word_input, encoder_character_input, decoder_word_input, decoder_character_input, target] = input
            logits, _, kld = self(0., encoder_word_input, encoder_character_input,
                                  decoder_word_input, decoder_character_input, z=None)
            logits = logits.view(-1, self.params.word_vocab_size)
            target = target.view(-1)
            cross_entropy = F.cross_entropy(logits, target)
            return cross_entropy, kld
        return validate
    def sample(self, batch_loader, seq_len, seed, use_cuda):
        seed = t.from_numpy(seed).float()
        if use_cuda:
            seed = seed.cuda()
        decoder_word_input_np, decoder_character_input_np = batch_loader.go_input(1)
        decoder_word_input = t.from_numpy(decoder_word_input_np).long()
        decoder_character_input = t.from_numpy(decoder_character_input_np).long()
        if use_cuda:
            decoder_word_input, decoder_character_input = decoder_word_input.cuda(), decoder_character_input.cuda()
        result = ''
        initial_state = None
        for i in range(seq_len):
            logits, initial_state, _ = self(0., None, None, decoder_word_input, decoder_character_input,
                                            seed, initial_state)
            logits = logits.view(-1, self.params.word_vocab_size)
            prediction = F.softmax(logits, dim=1)
            word = batch_loader.sample_word_from_distribution(prediction.data.cpu().numpy()[-1])
            if word == batch_loader.end_token:
                break
            result += ' ' + word
            decoder_word_input_np = np.array([[batch_loader.word_to_idx[word]]])
            decoder_character_input_np = np.array([[batch_loader.encode_characters(word)]])
            decoder_word_input = t.from_numpy(decoder_word_input_np).long()
            decoder_character_input = t.from_numpy(decoder_character_input_np).long()
            if use_cuda:
                decoder_word_input, decoder_character_input = decoder_word_input.cuda(), decoder_character_input.cuda()
        return result

# ------------------------------------------------------------------ train_word_embeddings.py, train.py, sample.py
def train_word_embeddings(args):
    batch_loader = BatchLoader('')
    params = Parameters(batch_loader.max_word_len, batch_loader.max_seq_len, batch_loader.words_vocab_size,
                        batch_loader.chars_vocab_size)
    neg_loss = NEG_loss(params.word_vocab_size, params.word_embed_size)
    if args.use_cuda:
        neg_loss = neg_loss.cuda()
    # NEG_loss is defined over two embedding matrixes with shape of [params.word_vocab_size, params.word_embed_size]
    optimizer = SGD(neg_loss.parameters(), 0.1)
    for iteration in range(args.num_iterations):
        input_idx, target_idx = batch_loader.next_embedding_seq(args.batch_size)
        input = t.from_numpy(input_idx).long()
        target = t.from_numpy(target_idx).long()
        if args.use_cuda:
            input, target = input.cuda(), target.cuda()
        out = neg_loss(input, target, args.num_sample).mean()
        optimizer.zero_grad()
        out.backward()
        optimizer.step()
        if iteration % 20 == 0:
            out = float(out.cpu().data.numpy())
            print('iteration = {}, loss = {}'.format(iteration, out))
    word_embeddings = neg_loss.input_embeddings()
    np.save('data/word_embeddings.npy', word_embeddings)

def train(args):
    batch_loader = BatchLoader('')
    parameters = Parameters(batch_loader.max_word_len, batch_loader.max_seq_len, batch_loader.words_vocab_size,
                            batch_loader.chars_vocab_size)
    rvae = RVAE(parameters)
    if args.use_trained:
        rvae.load_state_dict(t.load('trained_RVAE'))
    if args.use_cuda:
        rvae = rvae.cuda()
    optimizer = Adam(rvae.learnable_parameters(), args.learning_rate)
    train_step = rvae.trainer(optimizer, batch_loader)
    validate = rvae.validater(batch_loader)
    ce_result, kld_result = [], []
    for iteration in range(args.num_iterations):
        cross_entropy, kld, coef = train_step(iteration, args.batch_size, args.use_cuda, args.dropout)
        if iteration % 5 == 0:
            print('train {:3d}: cross-entropy {:.4f}, kld {:.4f}, kld-coef {:.5f}'.format(
                iteration, float(cross_entropy.data.cpu().numpy()), float(kld.data.cpu().numpy()), coef))
        if iteration % 10 == 0:
            cross_entropy, kld = validate(args.batch_size, args.use_cuda)
            cross_entropy, kld = float(cross_entropy.data.cpu().numpy()), float(kld.data.cpu().numpy())
            print('valid: cross-entropy {:.4f}, kld {:.4f}'.format(cross_entropy, kld))
            ce_result, kld_result = ce_result + [cross_entropy], kld_result + [kld]
        if iteration % 20 == 0:
            seed = np.random.normal(size=[1, parameters.latent_variable_size])
            sample = rvae.sample(batch_loader, 12, seed, args.use_cuda)
            print('sample:', sample)
    t.save(rvae.state_dict(), 'trained_RVAE')
    np.save('ce_result_{}.npy'.format(args.ce_result), np.array(ce_result))
    np.save('kld_result_npy_{}'.format(args.kld_result), np.array(kld_result))
    return ce_result

def sample(args):
    assert os.path.exists('trained_RVAE'), 'trained model not found'
    batch_loader = BatchLoader('')
    parameters = Parameters(batch_loader.max_word_len, batch_loader.max_seq_len, batch_loader.words_vocab_size,
                            batch_loader.chars_vocab_size)
    rvae = RVAE(parameters)
    rvae.load_state_dict(t.load('trained_RVAE'))
    if args.use_cuda:
        rvae = rvae.cuda()
    results = []
    for iteration in range(args.num_sample):
        seed = np.random.normal(size=[1, parameters.latent_variable_size])
        results.append(rvae.sample(batch_loader, 12, seed, args.use_cuda))
        print(results[-1])
    return results

def write_corpus(n_train=200, n_test=40, seed=0):
    rng = np.random.RandomState(seed)
    words = {c: ws.split() for c, ws in (('D', 'the a this every'), ('N', 'cat dog bird model tensor kernel stone'),
                                         ('V', 'sees eats moves trains loads copies'), ('A', 'small red quick old'),
                                         ('P', 'on near under over'))}
    patterns = ['D N V D N', 'D A N V D N', 'D N V D A N P D N', 'D A N V P D N', 'D N V']
    lines = [' '.join(rng.choice(words[c]) for c in rng.choice(patterns).split()) + ' .'
             for _ in range(n_train + n_test)]
    os.makedirs('data')
    for name, part in (('data/train.txt', lines[:n_train]), ('data/test.txt', lines[n_train:])):
        with open(name, 'w') as f:
            f.write('\n'.join(part))

if __name__ == '__main__':
    np.random.seed(0)
    t.manual_seed(0)
    cwd, tmp = os.getcwd(), tempfile.mkdtemp(prefix='rvae_')
    os.chdir(tmp)  # the scripts read and write 'data/...' and 'trained_RVAE' relative to the working directory
    try:
        write_corpus()
        parser = argparse.ArgumentParser(description='RVAE')
        for flag, typ, default in (('--num-iterations', int, 30), ('--batch-size', int, 8), ('--num-sample', int, 3),
                                   ('--use-cuda', bool, t.cuda.is_available()), ('--learning-rate', float, 0.005),
                                   ('--dropout', float, 0.3), ('--use-trained', bool, False),
                                   ('--ce-result', str, ''), ('--kld-result', str, '')):
            parser.add_argument(flag, type=typ, default=default)
        train_word_embeddings(parser.parse_args(['--num-iterations', '60', '--batch-size', '10']))
        ce = train(parser.parse_args([]))
        samples = sample(parser.parse_args([]))
        print('done valid_ce={:.3f}->{:.3f} samples={}'.format(ce[0], ce[-1], [len(s.split()) for s in samples]))
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
