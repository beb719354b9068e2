"""Trains a GRU encoder-decoder with additive attention on a synthetic "German to English" word-translation task,
using packed padded source sequences and a source padding mask, keeps the checkpoint with the best validation loss,
reloads it for the test loss, then translates single sentences greedily (returning the attention matrix) and scores
the test set with corpus BLEU.

Modeled on: bentrevett/pytorch-seq2seq, "legacy/4 - Packed Padded Sequences, Masking, Inference and BLEU.ipynb"
(https://github.com/bentrevett/pytorch-seq2seq/blob/b3cd54c72cd6e4e63f672d334c795b4fe744ef92/legacy/4%20-%20Packed%20Padded%20Sequences%2C%20Masking%2C%20Inference%20and%20BLEU.ipynb).

Kept: the seeding cell (`torch.cuda.manual_seed(SEED)`, `cudnn.deterministic = True`); `device = torch.device('cuda'
if torch.cuda.is_available() else 'cpu')` handed to the iterators, which build every batch's `src`, its lengths
`src_len` and `trg` on that device (as torchtext's `BucketIterator(..., device=device)` with `include_lengths=True`
does), sorted within the batch by source length; the encoder's `pack_padded_sequence(embedded, src_len.to('cpu'))`
("need to explicitly put lengths on cpu!") and `pad_packed_sequence`; the attention's `masked_fill(mask == 0,
-1e10)`; the decoder's `assert (output == hidden).all()`; `Seq2Seq` holding `self.device` and making its output
buffer with `torch.zeros(trg_len, batch_size, trg_vocab_size).to(self.device)`, the mask from `create_mask` on the
source's device, teacher forcing by `random.random()`; `Seq2Seq(enc, dec, SRC_PAD_IDX, device).to(device)` then
`model.apply(init_weights)`, Adam and `CrossEntropyLoss(ignore_index = TRG_PAD_IDX)` (not moved); `train` with
`model.train()` and `clip_grad_norm_`, `evaluate` with `model.eval()` and `torch.no_grad()`; the best
`model.state_dict()` saved with `torch.save` and read back with `model.load_state_dict(torch.load(...))`;
`translate_sentence` building `src_tensor = torch.LongTensor(src_indexes).unsqueeze(1).to(device)` but `src_len =
torch.LongTensor([len(src_indexes)])` left on the host, calling the encoder under `torch.no_grad()` and
`create_mask` outside it, `attentions = torch.zeros(max_len, 1, len(src_indexes)).to(device)`, a fresh
`torch.LongTensor([trg_indexes[-1]]).to(device)` each step and `output.argmax(1).item()`; `calculate_bleu` over
`vars(datum)`; the f-string prints of loss and PPL.
Changed where needed: torchtext's Multi30k, spacy tokenizers, `Field` and `BucketIterator` are replaced by small
stand-ins with the same attributes (`vocab.stoi`/`itos`, `init_token`, `eos_token`, `pad_token`; batches with
`.src = (src, src_len)` and `.trg`), with the legacy vocabulary order (<unk>, <pad>, <sos>, <eos>, then by
frequency); torchtext's `bleu_score` is reimplemented (corpus BLEU-4, uniform weights, brevity penalty); the
matplotlib `display_attention` prints the attention's shape and row sums instead; the checkpoint goes to a temporary
directory; the epoch time print is kept but reads `time.time()`; `translate_sentence` drops its spacy branch for
raw strings (only token lists are passed, as in the notebook's calls).

Shrunk: synthetic sentence pairs (3-7 source words from 24 "German" words; the target is a fixed word-for-word
mapping to 24 "English" words with each adjacent pair swapped), 320 training, 64 validation and 64 test pairs instead
of Multi30k; embedding 32, hidden 32 instead of 256/512, dropout 0.1; batch 32; 16 epochs; max_len 12;
Adam lr 0.015 instead of the default 0.001 so that the few steps learn.
"""
import math
import os
import random
import tempfile
import time
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

SEED = 1234

random.seed(SEED)
np.random.seed(SEED)
torch.manual_seed(SEED)
torch.cuda.manual_seed(SEED)
torch.backends.cudnn.deterministic = True


# ----------------------------------------------------------------------------- stand-ins for torchtext / Multi30k

GERMAN = ['ein', 'mann', 'frau', 'hund', 'kind', 'spielt', 'läuft', 'sitzt', 'auf', 'im', 'dem', 'der', 'die',
          'roten', 'großen', 'kleinen', 'ball', 'wasser', 'straße', 'park', 'mit', 'und', 'einem', 'schnell']
ENGLISH = ['a', 'man', 'woman', 'dog', 'child', 'plays', 'runs', 'sits', 'on', 'in', 'the', 'the', 'the',
           'red', 'big', 'small', 'ball', 'water', 'street', 'park', 'with', 'and', 'an', 'fast']
DICT = dict(zip(GERMAN, ENGLISH))


class Example(object):
    def __init__(self, src, trg):
        self.src = src
        self.trg = trg


class Dataset(object):
    def __init__(self, examples):
        self.examples = examples

    def __len__(self):
        return len(self.examples)

    def __iter__(self):
        return iter(self.examples)


def make_pair(rng):
    src = [rng.choice(GERMAN) for _ in range(rng.randint(3, 7))]
    trg = [DICT[w] for w in src]
    for i in range(0, len(trg) - 1, 2):
        trg[i], trg[i + 1] = trg[i + 1], trg[i]
    return Example(src, trg)


class Vocab(object):
    def __init__(self, counter, specials, min_freq=1):
        self.itos = list(specials)
        for word, freq in sorted(counter.items(), key=lambda tup: (-tup[1], tup[0])):
            if freq >= min_freq and word not in self.itos:
                self.itos.append(word)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)


class Field(object):
    def __init__(self, init_token='<sos>', eos_token='<eos>', lower=True, include_lengths=False):
        self.init_token = init_token
        self.eos_token = eos_token
        self.pad_token = '<pad>'
        self.unk_token = '<unk>'
        self.lower = lower
        self.include_lengths = include_lengths
        self.vocab = None

    def build_vocab(self, data, attr, min_freq=1):
        counter = Counter()
        for ex in data:
            counter.update(getattr(ex, attr))
        self.vocab = Vocab(counter, [self.unk_token, self.pad_token, self.init_token, self.eos_token], min_freq)

    def process(self, batch, device):
        seqs = [[self.init_token] + list(x) + [self.eos_token] for x in batch]
        lengths = [len(x) for x in seqs]
        max_len = max(lengths)
        padded = [x + [self.pad_token] * (max_len - len(x)) for x in seqs]
        arr = [[self.vocab.stoi.get(w, 0) for w in x] for x in padded]
        var = torch.tensor(arr, dtype=torch.long, device=device).t().contiguous()  # [len, batch]
        if self.include_lengths:
            return var, torch.tensor(lengths, dtype=torch.long, device=device)
        return var


class Batch(object):
    pass


class BucketIterator(object):
    """Buckets examples of similar source length, sorts each batch by decreasing source length (sort_within_batch)
    and puts every tensor on `device`, like torchtext.legacy's BucketIterator."""

    def __init__(self, dataset, batch_size, sort_key, device, train, src_field, trg_field):
        self.dataset = dataset
        self.batch_size = batch_size
        self.sort_key = sort_key
        self.device = device
        self.train = train
        self.src_field = src_field
        self.trg_field = trg_field

    def __len__(self):
        return math.ceil(len(self.dataset) / self.batch_size)

    def __iter__(self):
        examples = list(self.dataset.examples)
        if self.train:
            random.shuffle(examples)
        pool = sorted(examples, key=self.sort_key)
        chunks = [pool[i:i + self.batch_size] for i in range(0, len(pool), self.batch_size)]
        if self.train:
            random.shuffle(chunks)
        for chunk in chunks:
            chunk = sorted(chunk, key=self.sort_key, reverse=True)
            batch = Batch()
            batch.src = self.src_field.process([ex.src for ex in chunk], self.device)
            batch.trg = self.trg_field.process([ex.trg for ex in chunk], self.device)
            yield batch

    @classmethod
    def splits(cls, datasets, batch_size, sort_within_batch, sort_key, device, fields):
        return tuple(cls(d, batch_size, sort_key, device, i == 0, *fields) for i, d in enumerate(datasets))


def bleu_score(candidate_corpus, references_corpus, max_n=4):
    """Corpus BLEU with uniform weights and the brevity penalty, as torchtext.data.metrics.bleu_score."""
    clipped = [0] * max_n
    total = [0] * max_n
    cand_len, ref_len = 0, 0
    for cand, refs in zip(candidate_corpus, references_corpus):
        cand_len += len(cand)
        ref_len += min((len(r) for r in refs), key=lambda l: (abs(l - len(cand)), l))
        for n in range(1, max_n + 1):
            cand_counts = Counter(tuple(cand[i:i + n]) for i in range(len(cand) - n + 1))
            max_ref = Counter()
            for r in refs:
                max_ref |= Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
            clipped[n - 1] += sum(min(c, max_ref[g]) for g, c in cand_counts.items())
            total[n - 1] += max(len(cand) - n + 1, 0)
    if min(clipped) == 0:
        return 0.0
    log_p = sum(math.log(c / t) for c, t in zip(clipped, total)) / max_n
    bp = 1.0 if cand_len > ref_len else math.exp(1 - ref_len / max(cand_len, 1))
    return bp * math.exp(log_p)


SRC = Field(init_token='<sos>', eos_token='<eos>', lower=True, include_lengths=True)
TRG = Field(init_token='<sos>', eos_token='<eos>', lower=True)

data_rng = random.Random(7)
train_data = Dataset([make_pair(data_rng) for _ in range(320)])
valid_data = Dataset([make_pair(data_rng) for _ in range(64)])
test_data = Dataset([make_pair(data_rng) for _ in range(64)])
print(f'Number of training examples: {len(train_data.examples)}')

SRC.build_vocab(train_data, 'src', min_freq=2)
TRG.build_vocab(train_data, 'trg', min_freq=2)

BATCH_SIZE = 32

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

train_iterator, valid_iterator, test_iterator = BucketIterator.splits(
    (train_data, valid_data, test_data),
    batch_size=BATCH_SIZE,
    sort_within_batch=True,
    sort_key=lambda x: len(x.src),
    device=device,
    fields=(SRC, TRG))


# ----------------------------------------------------------------------------- model

class Encoder(nn.Module):
    def __init__(self, input_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout):
        super().__init__()

        self.embedding = nn.Embedding(input_dim, emb_dim)

        self.rnn = nn.GRU(emb_dim, enc_hid_dim, bidirectional=True)

        self.fc = nn.Linear(enc_hid_dim * 2, dec_hid_dim)

        self.dropout = nn.Dropout(dropout)

    def forward(self, src, src_len):

        # src = [src len, batch size]
        # src_len = [batch size]

        embedded = self.dropout(self.embedding(src))

        # need to explicitly put lengths on cpu!
        packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, src_len.to('cpu'))

        packed_outputs, hidden = self.rnn(packed_embedded)

        outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_outputs)

        # outputs = [src len, batch size, hid dim * num directions]
        # hidden = [n layers * num directions, batch size, hid dim]

        hidden = torch.tanh(self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)))

        return outputs, hidden


class Attention(nn.Module):
    def __init__(self, enc_hid_dim, dec_hid_dim):
        super().__init__()

        self.attn = nn.Linear((enc_hid_dim * 2) + dec_hid_dim, dec_hid_dim)
        self.v = nn.Linear(dec_hid_dim, 1, bias=False)

    def forward(self, hidden, encoder_outputs, mask):

        batch_size = encoder_outputs.shape[1]
        src_len = encoder_outputs.shape[0]

        # repeat decoder hidden state src_len times
        hidden = hidden.unsqueeze(1).repeat(1, src_len, 1)

        encoder_outputs = encoder_outputs.permute(1, 0, 2)

        energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs), dim=2)))

        attention = self.v(energy).squeeze(2)

        # attention = [batch size, src len]

        attention = attention.masked_fill(mask == 0, -1e10)

        return F.softmax(attention, dim=1)


class Decoder(nn.Module):
    def __init__(self, output_dim, emb_dim, enc_hid_dim, dec_hid_dim, dropout, attention):
        super().__init__()

        self.output_dim = output_dim
        self.attention = attention

        self.embedding = nn.Embedding(output_dim, emb_dim)

        self.rnn = nn.GRU((enc_hid_dim * 2) + emb_dim, dec_hid_dim)

        self.fc_out = nn.Linear((enc_hid_dim * 2) + dec_hid_dim + emb_dim, output_dim)

        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, encoder_outputs, mask):

        # input = [batch size]
        # hidden = [batch size, dec hid dim]
        # encoder_outputs = [src len, batch size, enc hid dim * 2]
        # mask = [batch size, src len]

        input = input.unsqueeze(0)

        embedded = self.dropout(self.embedding(input))

        a = self.attention(hidden, encoder_outputs, mask)

        a = a.unsqueeze(1)

        encoder_outputs = encoder_outputs.permute(1, 0, 2)

        weighted = torch.bmm(a, encoder_outputs)

        weighted = weighted.permute(1, 0, 2)

        rnn_input = torch.cat((embedded, weighted), dim=2)

        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))

        # this also means that output == hidden
        assert (output == hidden).all()

        embedded = embedded.squeeze(0)
        output = output.squeeze(0)
        weighted = weighted.squeeze(0)

        prediction = self.fc_out(torch.cat((output, weighted, embedded), dim=1))

        # prediction = [batch size, output dim]

        return prediction, hidden.squeeze(0), a.squeeze(1)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, src_pad_idx, device):
        super().__init__()

        self.encoder = encoder
        self.decoder = decoder
        self.src_pad_idx = src_pad_idx
        self.device = device

    def create_mask(self, src):
        mask = (src != self.src_pad_idx).permute(1, 0)
        return mask

    def forward(self, src, src_len, trg, teacher_forcing_ratio=0.5):

        batch_size = src.shape[1]
        trg_len = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim

        # tensor to store decoder outputs
        outputs = torch.zeros(trg_len, batch_size, trg_vocab_size).to(self.device)

        encoder_outputs, hidden = self.encoder(src, src_len)

        # first input to the decoder is the <sos> tokens
        input = trg[0, :]

        mask = self.create_mask(src)

        for t in range(1, trg_len):

            output, hidden, _ = self.decoder(input, hidden, encoder_outputs, mask)

            # place predictions in a tensor holding predictions for each token
            outputs[t] = output

            # decide if we are going to use teacher forcing or not
            teacher_force = random.random() < teacher_forcing_ratio

            # get the highest predicted token from our predictions
            top1 = output.argmax(1)

            # if teacher forcing, use actual next token as next input
            # if not, use predicted token
            input = trg[t] if teacher_force else top1

        return outputs


INPUT_DIM = len(SRC.vocab)
OUTPUT_DIM = len(TRG.vocab)
ENC_EMB_DIM = 32
DEC_EMB_DIM = 32
ENC_HID_DIM = 32
DEC_HID_DIM = 32
ENC_DROPOUT = 0.1
DEC_DROPOUT = 0.1
SRC_PAD_IDX = SRC.vocab.stoi[SRC.pad_token]

attn = Attention(ENC_HID_DIM, DEC_HID_DIM)
enc = Encoder(INPUT_DIM, ENC_EMB_DIM, ENC_HID_DIM, DEC_HID_DIM, ENC_DROPOUT)
dec = Decoder(OUTPUT_DIM, DEC_EMB_DIM, ENC_HID_DIM, DEC_HID_DIM, DEC_DROPOUT, attn)

model = Seq2Seq(enc, dec, SRC_PAD_IDX, device).to(device)


def init_weights(m):
    for name, param in m.named_parameters():
        if 'weight' in name:
            nn.init.normal_(param.data, mean=0, std=0.01)
        else:
            nn.init.constant_(param.data, 0)


model.apply(init_weights)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


print(f'The model has {count_parameters(model):,} trainable parameters')

optimizer = optim.Adam(model.parameters(), lr=0.015)

TRG_PAD_IDX = TRG.vocab.stoi[TRG.pad_token]

criterion = nn.CrossEntropyLoss(ignore_index=TRG_PAD_IDX)


def train(model, iterator, optimizer, criterion, clip):

    model.train()

    epoch_loss = 0

    for i, batch in enumerate(iterator):

        src, src_len = batch.src
        trg = batch.trg

        optimizer.zero_grad()

        output = model(src, src_len, trg)

        output_dim = output.shape[-1]

        output = output[1:].view(-1, output_dim)
        trg = trg[1:].view(-1)

        loss = criterion(output, trg)

        loss.backward()

        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)

        optimizer.step()

        epoch_loss += loss.item()

    return epoch_loss / len(iterator)


def evaluate(model, iterator, criterion):

    model.eval()

    epoch_loss = 0

    with torch.no_grad():

        for i, batch in enumerate(iterator):

            src, src_len = batch.src
            trg = batch.trg

            output = model(src, src_len, trg, 0)  # turn off teacher forcing

            output_dim = output.shape[-1]

            output = output[1:].view(-1, output_dim)
            trg = trg[1:].view(-1)

            loss = criterion(output, trg)

            epoch_loss += loss.item()

    return epoch_loss / len(iterator)


def epoch_time(start_time, end_time):
    elapsed_time = end_time - start_time
    elapsed_mins = int(elapsed_time / 60)
    elapsed_secs = int(elapsed_time - (elapsed_mins * 60))
    return elapsed_mins, elapsed_secs


N_EPOCHS = 16
CLIP = 1
MODEL_PATH = os.path.join(tempfile.mkdtemp(), 'tut4-model.pt')

best_valid_loss = float('inf')

for epoch in range(N_EPOCHS):

    start_time = time.time()

    train_loss = train(model, train_iterator, optimizer, criterion, CLIP)
    valid_loss = evaluate(model, valid_iterator, criterion)

    end_time = time.time()

    epoch_mins, epoch_secs = epoch_time(start_time, end_time)

    if valid_loss < best_valid_loss:
        best_valid_loss = valid_loss
        torch.save(model.state_dict(), MODEL_PATH)

    print(f'Epoch: {epoch+1:02} | Time: {epoch_mins}m {epoch_secs}s')
    print(f'\tTrain Loss: {train_loss:.3f} | Train PPL: {math.exp(train_loss):7.3f}')
    print(f'\t Val. Loss: {valid_loss:.3f} |  Val. PPL: {math.exp(valid_loss):7.3f}')

model.load_state_dict(torch.load(MODEL_PATH))

test_loss = evaluate(model, test_iterator, criterion)

print(f'| Test Loss: {test_loss:.3f} | Test PPL: {math.exp(test_loss):7.3f} |')


def translate_sentence(sentence, src_field, trg_field, model, device, max_len=50):

    model.eval()

    tokens = [token.lower() for token in sentence]

    tokens = [src_field.init_token] + tokens + [src_field.eos_token]

    src_indexes = [src_field.vocab.stoi.get(token, 0) for token in tokens]

    src_tensor = torch.LongTensor(src_indexes).unsqueeze(1).to(device)

    src_len = torch.LongTensor([len(src_indexes)])

    with torch.no_grad():
        encoder_outputs, hidden = model.encoder(src_tensor, src_len)

    mask = model.create_mask(src_tensor)

    trg_indexes = [trg_field.vocab.stoi[trg_field.init_token]]

    attentions = torch.zeros(max_len, 1, len(src_indexes)).to(device)

    for i in range(max_len):

        trg_tensor = torch.LongTensor([trg_indexes[-1]]).to(device)

        with torch.no_grad():
            output, hidden, attention = model.decoder(trg_tensor, hidden, encoder_outputs, mask)

        attentions[i] = attention

        pred_token = output.argmax(1).item()

        trg_indexes.append(pred_token)

        if pred_token == trg_field.vocab.stoi[trg_field.eos_token]:
            break

    trg_tokens = [trg_field.vocab.itos[i] for i in trg_indexes]

    return trg_tokens[1:], attentions[:len(trg_tokens) - 1]


def display_attention(sentence, translation, attention):

    attention = attention.squeeze(1).cpu().detach().numpy()

    print(f'attention {attention.shape}, row sums {np.round(attention.sum(1), 3).tolist()}')


for data, example_idx in ((train_data, 12), (valid_data, 14), (test_data, 18)):
    src = vars(data.examples[example_idx])['src']
    trg = vars(data.examples[example_idx])['trg']

    print(f'src = {src}')
    print(f'trg = {trg}')

    translation, attention = translate_sentence(src, SRC, TRG, model, device, max_len=12)

    print(f'predicted trg = {translation}')

    display_attention(src, translation, attention)


def calculate_bleu(data, src_field, trg_field, model, device, max_len=50):

    trgs = []
    pred_trgs = []

    for datum in data:

        src = vars(datum)['src']
        trg = vars(datum)['trg']

        pred_trg, _ = translate_sentence(src, src_field, trg_field, model, device, max_len)

        # cut off <eos> token
        pred_trg = pred_trg[:-1]

        pred_trgs.append(pred_trg)
        trgs.append([trg])

    return bleu_score(pred_trgs, trgs)


bleu_score = calculate_bleu(test_data, SRC, TRG, model, device, max_len=12)

print(f'BLEU score = {bleu_score*100:.2f}')
print('done')
