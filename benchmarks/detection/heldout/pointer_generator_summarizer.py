"""Trains a pointer-generator summariser (bidirectional LSTM encoder, attention LSTM decoder that mixes generating from
the vocabulary with copying article words, in-article OOVs given temporary ids) on synthetic article/abstract pairs
the way atulkum/pointer_summarizer's training_ptr_gen does it: `Train.trainIters` from scratch, then resumed from its
checkpoint with the optimizer state moved back to the GPU; `BeamSearch.decode` then summarises the test articles
with beam search and scores them against the references.

Modeled on: atulkum/pointer_summarizer, training_ptr_gen/train.py, training_ptr_gen/model.py,
training_ptr_gen/train_util.py, training_ptr_gen/decode.py, data_util/config.py, data_util/data.py,
data_util/batcher.py and data_util/utils.py at commit 4967dd478ba70b1c12116ad6357dcc1d000e5dfa
(https://github.com/atulkum/pointer_summarizer/tree/4967dd478ba70b1c12116ad6357dcc1d000e5dfa).

Kept: `use_cuda = config.use_gpu and torch.cuda.is_available()`; model.py's `Encoder` (`pack_padded_sequence` over
the host `enc_lens`), `ReduceState`, `Attention`, `Decoder` (eval-mode step-0 context, `p_gen` mixing,
`torch.cat([vocab_dist_, extra_zeros], 1)`, `scatter_add` over `enc_batch_extend_vocab`) and `Model` (decoder
embedding tied to the encoder's, `.eval()` for `is_eval`, `.cuda()` on the three modules under `use_cuda`, then
`torch.load(..., map_location=lambda storage, location: storage)` and `load_state_dict`, the decoder's with
`strict=False`); train_util.py's `get_input_from_batch` / `get_output_from_batch` (host tensors from the numpy batch,
then `.cuda()` one by one under `use_cuda`, `enc_lens` left in numpy); train.py's `Train` (`save_model` with the
three state dicts and the optimizer's, `setup_train` with Adagrad, the checkpoint load and the loop moving the
optimizer state to the GPU with `state[k] = v.cuda()`, `train_one_batch` with teacher forcing, three
`clip_grad_norm_` calls and `loss.item()`, `trainIters`); decode.py's `Beam` and `BeamSearch` (host
`torch.LongTensor(latest_tokens)` moved under `use_cuda`, beam states stacked, `topk`, `.item()` per hypothesis);
data.py's `Vocab`, `article2ids`, `abstract2ids`, `outputids2words`; batcher.py's `Example`, `Batch` and batching
rules (sorted by `enc_len` in training, one example repeated `beam_size` times for decoding); `calc_running_avg_loss`.

Changed to run here: Python 2 -> 3; `config` is a class here; the CNN/DailyMail files are not downloaded:
`make_corpus` writes three-sentence articles of vocabulary words and OOV entity names, with the lead sentence as the
abstract, kept in memory; `Batcher` builds batches on demand instead of in queue threads (no `time.sleep(15)`),
`Vocab` takes a word list, `Batch` pads with numpy; the TensorFlow summary writer, pyrouge (here ROUGE-1 recall
inline), the `init_*` weight initialisers and the `is_coverage` branches (off in config.py) are left out;
`F.tanh` / `F.sigmoid` are `torch.tanh` / `torch.sigmoid`; `save_model` returns its path for the resume; the
training folders are in a temporary directory removed at the end.
Shrunk: vocabulary 50000 -> 64, hidden 256 -> 32, embedding 128 -> 16, max_enc_steps 400 -> 30, max_dec_steps
100 -> 10, min_dec_steps 35 -> 3; 48 + 24 iterations (checkpoint every 24, print every 12) instead of 500000;
96 training and 4 test articles.
"""
import os
import random
import shutil
import tempfile
import time
from random import shuffle

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.nn.utils import clip_grad_norm_
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.optim import Adagrad

ROOT = tempfile.mkdtemp(prefix='ptr_nw_')

class config:  # data_util/config.py (paths into a temporary folder)
    log_root = os.path.join(ROOT, "log")
    hidden_dim, emb_dim, batch_size = 32, 16, 8
    max_enc_steps, max_dec_steps, beam_size, min_dec_steps, vocab_size = 30, 10, 4, 3, 64
    lr, adagrad_init_acc, max_grad_norm = 0.15, 0.1, 2.0
    pointer_gen, is_coverage, cov_loss_wt = True, False, 1.0
    eps, max_iterations, use_gpu, lr_coverage = 1e-12, 48, True, 0.15

use_cuda = config.use_gpu and torch.cuda.is_available()
random.seed(123)
np.random.seed(123)
torch.manual_seed(123)
if torch.cuda.is_available():
    torch.cuda.manual_seed_all(123)

# ----------------------------------------------------------------------------- synthetic data, data_util/data.py
COMMON = ['w%d' % i for i in range(58)] + ['.', ',']  # 60 vocabulary words + 4 special tokens = vocab_size
PAD_TOKEN, UNKNOWN_TOKEN, START_DECODING, STOP_DECODING = '[PAD]', '[UNK]', '[START]', '[STOP]'

def make_corpus(n, seed):
    """(article, abstract_sentences) pairs: three sentences of vocabulary words and an OOV entity name each."""
    rng, pairs = np.random.RandomState(seed), []
    for _ in range(n):
        sents = [[COMMON[k] for k in rng.randint(0, 58, rng.randint(4, 7))] for _ in range(3)]
        sents = [' '.join(w[:p] + ['ent%d' % rng.randint(40)] + w[p:] + ['.'])
                 for w, p in ((w, rng.randint(len(w))) for w in sents)]
        pairs.append((' '.join(sents), [sents[0]]))
    return pairs

class Vocab(object):
    def __init__(self, words, max_size):
        self._id_to_word = [UNKNOWN_TOKEN, PAD_TOKEN, START_DECODING, STOP_DECODING] + words[:max_size - 4]
        self._word_to_id = {w: i for i, w in enumerate(self._id_to_word)}
    def word2id(self, word):
        return self._word_to_id.get(word, self._word_to_id[UNKNOWN_TOKEN])
    def id2word(self, word_id):
        return self._id_to_word[word_id] if word_id < len(self._id_to_word) else None
    def size(self):
        return len(self._id_to_word)

def article2ids(article_words, vocab):
    ids, oovs = [], []
    for w in article_words:
        i = vocab.word2id(w)
        if i == vocab.word2id(UNKNOWN_TOKEN):  # If w is OOV
            if w not in oovs:
                oovs.append(w)
            ids.append(vocab.size() + oovs.index(w))  # This is e.g. 50000 for the first article OOV
        else:
            ids.append(i)
    return ids, oovs

def abstract2ids(abstract_words, vocab, article_oovs):
    unk_id = vocab.word2id(UNKNOWN_TOKEN)
    return [vocab.size() + article_oovs.index(w) if vocab.word2id(w) == unk_id and w in article_oovs
            else vocab.word2id(w) for w in abstract_words]

def outputids2words(id_list, vocab, article_oovs):
    return [vocab.id2word(i) if i < vocab.size() else article_oovs[i - vocab.size()] for i in id_list]

# ----------------------------------------------------------------------------- data_util/batcher.py (condensed)
class Example(object):
    def __init__(self, article, abstract_sentences, vocab):
        start_decoding, stop_decoding = vocab.word2id(START_DECODING), vocab.word2id(STOP_DECODING)
        article_words = article.split()[:config.max_enc_steps]
        self.enc_len = len(article_words)  # store the length after truncation but before padding
        self.enc_input = [vocab.word2id(w) for w in article_words]
        abstract_words = ' '.join(abstract_sentences).split()
        abs_ids = [vocab.word2id(w) for w in abstract_words]
        self.dec_input, self.target = self.get_dec_inp_targ_seqs(abs_ids, config.max_dec_steps, start_decoding,
                                                                 stop_decoding)
        self.dec_len = len(self.dec_input)
        if config.pointer_gen:
            self.enc_input_extend_vocab, self.article_oovs = article2ids(article_words, vocab)
            abs_ids_extend_vocab = abstract2ids(abstract_words, vocab, self.article_oovs)
            _, self.target = self.get_dec_inp_targ_seqs(abs_ids_extend_vocab, config.max_dec_steps,
                                                        start_decoding, stop_decoding)
        self.original_abstract_sents = abstract_sentences

    def get_dec_inp_targ_seqs(self, sequence, max_len, start_id, stop_id):
        inp, target = [start_id] + sequence[:], sequence[:]
        if len(inp) > max_len:  # truncate
            inp, target = inp[:max_len], target[:max_len]  # no end_token
        else:  # no truncation
            target.append(stop_id)  # end token
        return inp, target

class Batch(object):
    def __init__(self, example_list, vocab, batch_size):
        self.batch_size, pad_id = batch_size, vocab.word2id(PAD_TOKEN)
        max_enc_seq_len = max([ex.enc_len for ex in example_list])

        def pad(seqs, n):
            return np.array([seq + [pad_id] * (n - len(seq)) for seq in seqs], dtype=np.int32)
        self.enc_batch = pad([ex.enc_input for ex in example_list], max_enc_seq_len)
        self.enc_lens = np.array([ex.enc_len for ex in example_list], dtype=np.int32)
        self.enc_padding_mask = (np.arange(max_enc_seq_len)[None, :] < self.enc_lens[:, None]).astype(np.float32)
        if config.pointer_gen:
            self.max_art_oovs = max([len(ex.article_oovs) for ex in example_list])
            self.art_oovs = [ex.article_oovs for ex in example_list]
            self.enc_batch_extend_vocab = pad([ex.enc_input_extend_vocab for ex in example_list], max_enc_seq_len)
        self.dec_batch = pad([ex.dec_input for ex in example_list], config.max_dec_steps)
        self.target_batch = pad([ex.target for ex in example_list], config.max_dec_steps)
        self.dec_lens = np.array([ex.dec_len for ex in example_list], dtype=np.int32)
        self.dec_padding_mask = (np.arange(config.max_dec_steps)[None, :] < self.dec_lens[:, None]).astype(np.float32)
        self.original_abstracts_sents = [ex.original_abstract_sents for ex in example_list]

class Batcher(object):
    def __init__(self, pairs, vocab, mode, batch_size, single_pass):
        self._pairs, self._vocab, self.mode, self.batch_size = pairs, vocab, mode, batch_size
        self._single_pass, self._pos = single_pass, 0
    def next_batch(self):
        n = 1 if self.mode == 'decode' else self.batch_size
        if self._pos + n > len(self._pairs):
            if self._single_pass:
                return None  # finished reading dataset in single_pass mode
            self._pos = 0
            shuffle(self._pairs)
        inputs = [Example(a, s, self._vocab) for a, s in self._pairs[self._pos:self._pos + n]]
        self._pos += n
        if self.mode == 'decode':  # beam search decode mode single example repeated in the batch
            return Batch([inputs[0] for _ in range(self.batch_size)], self._vocab, self.batch_size)
        inputs = sorted(inputs, key=lambda inp: inp.enc_len, reverse=True)  # sort by length of encoder sequence
        return Batch(inputs, self._vocab, self.batch_size)

def calc_running_avg_loss(loss, running_avg_loss, summary_writer, step, decay=0.99):  # data_util/utils.py
    if running_avg_loss == 0:  # on the first iteration just take the loss
        running_avg_loss = loss
    else:
        running_avg_loss = running_avg_loss * decay + (1 - decay) * loss
    return min(running_avg_loss, 12)  # clip

# ----------------------------------------------------------------------------- training_ptr_gen/train_util.py
def get_input_from_batch(batch, use_cuda):
    batch_size = len(batch.enc_lens)
    enc_batch = Variable(torch.from_numpy(batch.enc_batch).long())
    enc_padding_mask = Variable(torch.from_numpy(batch.enc_padding_mask)).float()
    enc_lens = batch.enc_lens
    extra_zeros = None
    enc_batch_extend_vocab = None
    if config.pointer_gen:
        enc_batch_extend_vocab = Variable(torch.from_numpy(batch.enc_batch_extend_vocab).long())
        if batch.max_art_oovs > 0:
            extra_zeros = Variable(torch.zeros((batch_size, batch.max_art_oovs)))
    c_t_1 = Variable(torch.zeros((batch_size, 2 * config.hidden_dim)))
    coverage = None
    if use_cuda:
        enc_batch = enc_batch.cuda()
        enc_padding_mask = enc_padding_mask.cuda()
        if enc_batch_extend_vocab is not None:
            enc_batch_extend_vocab = enc_batch_extend_vocab.cuda()
        if extra_zeros is not None:
            extra_zeros = extra_zeros.cuda()
        c_t_1 = c_t_1.cuda()
        if coverage is not None:
            coverage = coverage.cuda()
    return enc_batch, enc_padding_mask, enc_lens, enc_batch_extend_vocab, extra_zeros, c_t_1, coverage

def get_output_from_batch(batch, use_cuda):
    dec_batch = Variable(torch.from_numpy(batch.dec_batch).long())
    dec_padding_mask = Variable(torch.from_numpy(batch.dec_padding_mask)).float()
    dec_lens = batch.dec_lens
    max_dec_len = np.max(dec_lens)
    dec_lens_var = Variable(torch.from_numpy(dec_lens)).float()
    target_batch = Variable(torch.from_numpy(batch.target_batch)).long()
    if use_cuda:
        dec_batch = dec_batch.cuda()
        dec_padding_mask = dec_padding_mask.cuda()
        dec_lens_var = dec_lens_var.cuda()
        target_batch = target_batch.cuda()
    return dec_batch, dec_padding_mask, max_dec_len, dec_lens_var, target_batch

# ----------------------------------------------------------------------------- training_ptr_gen/model.py
class Encoder(nn.Module):
    def __init__(self):
        super(Encoder, self).__init__()
        self.embedding = nn.Embedding(config.vocab_size, config.emb_dim)
        self.lstm = nn.LSTM(config.emb_dim, config.hidden_dim, num_layers=1, batch_first=True, bidirectional=True)
        self.W_h = nn.Linear(config.hidden_dim * 2, config.hidden_dim * 2, bias=False)

    def forward(self, input, seq_lens):  # seq_lens should be in descending order
        embedded = self.embedding(input)
        packed = pack_padded_sequence(embedded, seq_lens, batch_first=True)
        output, hidden = self.lstm(packed)
        encoder_outputs, _ = pad_packed_sequence(output, batch_first=True)  # h dim = B x t_k x n
        encoder_outputs = encoder_outputs.contiguous()
        encoder_feature = encoder_outputs.view(-1, 2 * config.hidden_dim)  # B * t_k x 2*hidden_dim
        encoder_feature = self.W_h(encoder_feature)
        return encoder_outputs, encoder_feature, hidden

class ReduceState(nn.Module):
    def __init__(self):
        super(ReduceState, self).__init__()
        self.reduce_h = nn.Linear(config.hidden_dim * 2, config.hidden_dim)
        self.reduce_c = nn.Linear(config.hidden_dim * 2, config.hidden_dim)

    def forward(self, hidden):
        h, c = hidden  # h, c dim = 2 x b x hidden_dim
        h_in = h.transpose(0, 1).contiguous().view(-1, config.hidden_dim * 2)
        hidden_reduced_h = F.relu(self.reduce_h(h_in))
        c_in = c.transpose(0, 1).contiguous().view(-1, config.hidden_dim * 2)
        hidden_reduced_c = F.relu(self.reduce_c(c_in))
        return (hidden_reduced_h.unsqueeze(0), hidden_reduced_c.unsqueeze(0))  # h, c dim = 1 x b x hidden_dim

class Attention(nn.Module):
    def __init__(self):
        super(Attention, self).__init__()
        self.decode_proj = nn.Linear(config.hidden_dim * 2, config.hidden_dim * 2)
        self.v = nn.Linear(config.hidden_dim * 2, 1, bias=False)

    def forward(self, s_t_hat, encoder_outputs, encoder_feature, enc_padding_mask, coverage):
        b, t_k, n = list(encoder_outputs.size())
        dec_fea = self.decode_proj(s_t_hat)  # B x 2*hidden_dim
        dec_fea_expanded = dec_fea.unsqueeze(1).expand(b, t_k, n).contiguous()  # B x t_k x 2*hidden_dim
        dec_fea_expanded = dec_fea_expanded.view(-1, n)  # B * t_k x 2*hidden_dim
        att_features = encoder_feature + dec_fea_expanded  # B * t_k x 2*hidden_dim
        e = torch.tanh(att_features)  # B * t_k x 2*hidden_dim
        scores = self.v(e)  # B * t_k x 1
        scores = scores.view(-1, t_k)  # B x t_k
        attn_dist_ = F.softmax(scores, dim=1) * enc_padding_mask  # B x t_k
        normalization_factor = attn_dist_.sum(1, keepdim=True)
        attn_dist = attn_dist_ / normalization_factor
        attn_dist = attn_dist.unsqueeze(1)  # B x 1 x t_k
        c_t = torch.bmm(attn_dist, encoder_outputs)  # B x 1 x n
        c_t = c_t.view(-1, config.hidden_dim * 2)  # B x 2*hidden_dim
        attn_dist = attn_dist.view(-1, t_k)  # B x t_k
        return c_t, attn_dist, coverage

class Decoder(nn.Module):
    def __init__(self):
        super(Decoder, self).__init__()
        self.attention_network = Attention()
        self.embedding = nn.Embedding(config.vocab_size, config.emb_dim)
        self.x_context = nn.Linear(config.hidden_dim * 2 + config.emb_dim, config.emb_dim)
        self.lstm = nn.LSTM(config.emb_dim, config.hidden_dim, num_layers=1, batch_first=True, bidirectional=False)
        if config.pointer_gen:
            self.p_gen_linear = nn.Linear(config.hidden_dim * 4 + config.emb_dim, 1)
        self.out1 = nn.Linear(config.hidden_dim * 3, config.hidden_dim)
        self.out2 = nn.Linear(config.hidden_dim, config.vocab_size)

    def forward(self, y_t_1, s_t_1, encoder_outputs, encoder_feature, enc_padding_mask,
                c_t_1, extra_zeros, enc_batch_extend_vocab, coverage, step):
        if not self.training and step == 0:
            h_decoder, c_decoder = s_t_1
            s_t_hat = torch.cat((h_decoder.view(-1, config.hidden_dim),
                                 c_decoder.view(-1, config.hidden_dim)), 1)  # B x 2*hidden_dim
            c_t, _, coverage_next = self.attention_network(s_t_hat, encoder_outputs, encoder_feature,
                                                           enc_padding_mask, coverage)
            coverage = coverage_next
        y_t_1_embd = self.embedding(y_t_1)
        x = self.x_context(torch.cat((c_t_1, y_t_1_embd), 1))
        lstm_out, s_t = self.lstm(x.unsqueeze(1), s_t_1)
        h_decoder, c_decoder = s_t
        s_t_hat = torch.cat((h_decoder.view(-1, config.hidden_dim),
                             c_decoder.view(-1, config.hidden_dim)), 1)  # B x 2*hidden_dim
        c_t, attn_dist, coverage_next = self.attention_network(s_t_hat, encoder_outputs, encoder_feature,
                                                               enc_padding_mask, coverage)
        if self.training or step > 0:
            coverage = coverage_next
        p_gen = None
        if config.pointer_gen:
            p_gen_input = torch.cat((c_t, s_t_hat, x), 1)  # B x (2*2*hidden_dim + emb_dim)
            p_gen = self.p_gen_linear(p_gen_input)
            p_gen = torch.sigmoid(p_gen)
        output = torch.cat((lstm_out.view(-1, config.hidden_dim), c_t), 1)  # B x hidden_dim * 3
        output = self.out1(output)  # B x hidden_dim
        output = self.out2(output)  # B x vocab_size
        vocab_dist = F.softmax(output, dim=1)
        if config.pointer_gen:
            vocab_dist_ = p_gen * vocab_dist
            attn_dist_ = (1 - p_gen) * attn_dist
            if extra_zeros is not None:
                vocab_dist_ = torch.cat([vocab_dist_, extra_zeros], 1)
            final_dist = vocab_dist_.scatter_add(1, enc_batch_extend_vocab, attn_dist_)
        else:
            final_dist = vocab_dist
        return final_dist, s_t, c_t, attn_dist, p_gen, coverage

class Model(object):
    def __init__(self, model_file_path=None, is_eval=False):
        encoder = Encoder()
        decoder = Decoder()
        reduce_state = ReduceState()
        # shared the embedding between encoder and decoder
        decoder.embedding.weight = encoder.embedding.weight
        if is_eval:
            encoder = encoder.eval()
            decoder = decoder.eval()
            reduce_state = reduce_state.eval()
        if use_cuda:
            encoder = encoder.cuda()
            decoder = decoder.cuda()
            reduce_state = reduce_state.cuda()
        self.encoder = encoder
        self.decoder = decoder
        self.reduce_state = reduce_state
        if model_file_path is not None:
            state = torch.load(model_file_path, map_location=lambda storage, location: storage)
            self.encoder.load_state_dict(state['encoder_state_dict'])
            self.decoder.load_state_dict(state['decoder_state_dict'], strict=False)
            self.reduce_state.load_state_dict(state['reduce_state_dict'])

# ----------------------------------------------------------------------------- training_ptr_gen/train.py
class Train(object):
    def __init__(self, pairs):
        self.vocab = Vocab(COMMON, config.vocab_size)
        self.batcher = Batcher(pairs, self.vocab, mode='train', batch_size=config.batch_size, single_pass=False)
        train_dir = os.path.join(config.log_root, 'train_%d' % (int(time.time())))
        self.model_dir = os.path.join(train_dir, 'model')
        os.makedirs(self.model_dir, exist_ok=True)
        self.summary_writer = None

    def save_model(self, running_avg_loss, iter):
        state = {
            'iter': iter,
            'encoder_state_dict': self.model.encoder.state_dict(),
            'decoder_state_dict': self.model.decoder.state_dict(),
            'reduce_state_dict': self.model.reduce_state.state_dict(),
            'optimizer': self.optimizer.state_dict(),
            'current_loss': running_avg_loss
        }
        model_save_path = os.path.join(self.model_dir, 'model_%d_%d' % (iter, int(time.time())))
        torch.save(state, model_save_path)
        return model_save_path

    def setup_train(self, model_file_path=None):
        self.model = Model(model_file_path)
        params = list(self.model.encoder.parameters()) + list(self.model.decoder.parameters()) + \
            list(self.model.reduce_state.parameters())
        initial_lr = config.lr_coverage if config.is_coverage else config.lr
        self.optimizer = Adagrad(params, lr=initial_lr, initial_accumulator_value=config.adagrad_init_acc)
        start_iter, start_loss = 0, 0
        if model_file_path is not None:
            state = torch.load(model_file_path, map_location=lambda storage, location: storage)
            start_iter, start_loss = state['iter'], state['current_loss']
            if not config.is_coverage:
                self.optimizer.load_state_dict(state['optimizer'])
                if use_cuda:
                    for state in self.optimizer.state.values():
                        for k, v in state.items():
                            if torch.is_tensor(v):
                                state[k] = v.cuda()
        return start_iter, start_loss

    def train_one_batch(self, batch):
        enc_batch, enc_padding_mask, enc_lens, enc_batch_extend_vocab, extra_zeros, c_t_1, coverage = \
            get_input_from_batch(batch, use_cuda)
        dec_batch, dec_padding_mask, max_dec_len, dec_lens_var, target_batch = \
            get_output_from_batch(batch, use_cuda)
        self.optimizer.zero_grad()
        encoder_outputs, encoder_feature, encoder_hidden = self.model.encoder(enc_batch, enc_lens)
        s_t_1 = self.model.reduce_state(encoder_hidden)
        step_losses = []
        for di in range(min(max_dec_len, config.max_dec_steps)):
            y_t_1 = dec_batch[:, di]  # Teacher forcing
            final_dist, s_t_1, c_t_1, attn_dist, p_gen, next_coverage = self.model.decoder(
                y_t_1, s_t_1, encoder_outputs, encoder_feature, enc_padding_mask, c_t_1, extra_zeros,
                enc_batch_extend_vocab, coverage, di)
            target = target_batch[:, di]
            gold_probs = torch.gather(final_dist, 1, target.unsqueeze(1)).squeeze()
            step_loss = -torch.log(gold_probs + config.eps)
            step_mask = dec_padding_mask[:, di]
            step_loss = step_loss * step_mask
            step_losses.append(step_loss)
        sum_losses = torch.sum(torch.stack(step_losses, 1), 1)
        batch_avg_loss = sum_losses / dec_lens_var
        loss = torch.mean(batch_avg_loss)
        loss.backward()
        self.norm = clip_grad_norm_(self.model.encoder.parameters(), config.max_grad_norm)
        clip_grad_norm_(self.model.decoder.parameters(), config.max_grad_norm)
        clip_grad_norm_(self.model.reduce_state.parameters(), config.max_grad_norm)
        self.optimizer.step()
        return loss.item()

    def trainIters(self, n_iters, model_file_path=None, save_every=24, print_interval=12):
        iter, running_avg_loss = self.setup_train(model_file_path)
        start = time.time()
        saved = None
        while iter < n_iters:
            batch = self.batcher.next_batch()
            loss = self.train_one_batch(batch)
            running_avg_loss = calc_running_avg_loss(loss, running_avg_loss, self.summary_writer, iter)
            iter += 1
            if iter % print_interval == 0:
                print('steps %d, seconds for %d batch: %.2f , loss: %f' % (iter, print_interval,
                                                                           time.time() - start, loss))
                start = time.time()
            if iter % save_every == 0:
                saved = self.save_model(running_avg_loss, iter)
        return saved

# ----------------------------------------------------------------------------- training_ptr_gen/decode.py
class Beam(object):
    def __init__(self, tokens, log_probs, state, context, coverage):
        self.tokens, self.log_probs, self.state, self.context, self.coverage = tokens, log_probs, state, context, coverage
        self.latest_token = tokens[-1]
        self.avg_log_prob = sum(log_probs) / len(tokens)
    def extend(self, token, log_prob, state, context, coverage):
        return Beam(tokens=self.tokens + [token], log_probs=self.log_probs + [log_prob], state=state,
                    context=context, coverage=coverage)

class BeamSearch(object):
    def __init__(self, model_file_path, pairs):
        self.vocab = Vocab(COMMON, config.vocab_size)
        self.batcher = Batcher(pairs, self.vocab, mode='decode', batch_size=config.beam_size, single_pass=True)
        self.model = Model(model_file_path, is_eval=True)

    def sort_beams(self, beams):
        return sorted(beams, key=lambda h: h.avg_log_prob, reverse=True)

    def decode(self):
        counter, scores, batch = 0, [], self.batcher.next_batch()
        while batch is not None:
            best_summary = self.beam_search(batch)  # Run beam search to get best Hypothesis
            output_ids = [int(t) for t in best_summary.tokens[1:]]
            decoded_words = outputids2words(output_ids, self.vocab, (batch.art_oovs[0] if config.pointer_gen else None))
            if STOP_DECODING in decoded_words:  # Remove the [STOP] token from decoded_words, if necessary
                decoded_words = decoded_words[:decoded_words.index(STOP_DECODING)]
            reference = ' '.join(batch.original_abstracts_sents[0]).split()  # ROUGE-1 recall instead of pyrouge
            scores.append(sum(w in decoded_words for w in reference) / len(reference))
            print('decoded %d: %s' % (counter, ' '.join(decoded_words)))
            counter += 1
            batch = self.batcher.next_batch()
        return float(np.mean(scores))

    def beam_search(self, batch):
        # batch should have only one example
        enc_batch, enc_padding_mask, enc_lens, enc_batch_extend_vocab, extra_zeros, c_t_0, coverage_t_0 = \
            get_input_from_batch(batch, use_cuda)
        encoder_outputs, encoder_feature, encoder_hidden = self.model.encoder(enc_batch, enc_lens)
        s_t_0 = self.model.reduce_state(encoder_hidden)
        dec_h, dec_c = s_t_0  # 1 x 2*hidden_size
        dec_h, dec_c = dec_h.squeeze(), dec_c.squeeze()
        # decoder batch preparation, it has beam_size example initially everything is repeated
        beams = [Beam(tokens=[self.vocab.word2id(START_DECODING)], log_probs=[0.0], state=(dec_h[0], dec_c[0]),
                      context=c_t_0[0], coverage=None)
                 for _ in range(config.beam_size)]
        results, steps = [], 0
        while steps < config.max_dec_steps and len(results) < config.beam_size:
            latest_tokens = [h.latest_token for h in beams]
            latest_tokens = [t if t < self.vocab.size() else self.vocab.word2id(UNKNOWN_TOKEN)
                             for t in latest_tokens]
            y_t_1 = Variable(torch.LongTensor(latest_tokens))
            if use_cuda:
                y_t_1 = y_t_1.cuda()
            all_state_h = [h.state[0] for h in beams]
            all_state_c = [h.state[1] for h in beams]
            all_context = [h.context for h in beams]
            s_t_1 = (torch.stack(all_state_h, 0).unsqueeze(0), torch.stack(all_state_c, 0).unsqueeze(0))
            c_t_1 = torch.stack(all_context, 0)
            coverage_t_1 = None  # is_coverage is off
            final_dist, s_t, c_t, attn_dist, p_gen, coverage_t = self.model.decoder(
                y_t_1, s_t_1, encoder_outputs, encoder_feature, enc_padding_mask, c_t_1, extra_zeros,
                enc_batch_extend_vocab, coverage_t_1, steps)
            log_probs = torch.log(final_dist)
            topk_log_probs, topk_ids = torch.topk(log_probs, config.beam_size * 2)
            dec_h, dec_c = s_t
            dec_h, dec_c = dec_h.squeeze(), dec_c.squeeze()
            all_beams = []
            num_orig_beams = 1 if steps == 0 else len(beams)
            for i in range(num_orig_beams):
                h = beams[i]
                state_i = (dec_h[i], dec_c[i])
                context_i = c_t[i]
                for j in range(config.beam_size * 2):  # for each of the top 2*beam_size hyps:
                    new_beam = h.extend(token=topk_ids[i, j].item(), log_prob=topk_log_probs[i, j].item(),
                                        state=state_i, context=context_i, coverage=None)
                    all_beams.append(new_beam)
            beams = []
            for h in self.sort_beams(all_beams):
                if h.latest_token == self.vocab.word2id(STOP_DECODING):
                    if steps >= config.min_dec_steps:
                        results.append(h)
                else:
                    beams.append(h)
                if len(beams) == config.beam_size or len(results) == config.beam_size:
                    break
            steps += 1
        if len(results) == 0:
            results = beams
        return self.sort_beams(results)[0]

if __name__ == '__main__':
    os.makedirs(config.log_root)
    train_pairs, test_pairs = make_corpus(96, seed=1), make_corpus(4, seed=2)
    try:
        # train from scratch, resume from the checkpoint (optimizer state moved back to the GPU), then decode
        train_processor = Train(train_pairs)
        model_file = train_processor.trainIters(config.max_iterations)
        train_processor = Train(train_pairs)
        model_file = train_processor.trainIters(config.max_iterations + 24, model_file)
        beam_Search_processor = BeamSearch(model_file, test_pairs)
        rouge = beam_Search_processor.decode()
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)
    print('done: ROUGE-1 recall %.3f' % rouge)
