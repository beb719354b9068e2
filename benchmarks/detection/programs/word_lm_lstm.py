"""Word-level LSTM language model with tied weights, trained by truncated backpropagation through time.

Modeled on: pytorch/examples, word_language_model/main.py and word_language_model/model.py
(https://github.com/pytorch/examples/tree/main/word_language_model).
Kept: the device logic (``torch.device("cuda" if ... else "cpu")``, ``batchify(...)`` returning ``data.to(device)``,
the model moved with ``.to(device)``, hidden states made with ``weight.new_zeros(...)`` and detached by
repackage_hidden, the manual SGD update on ``p.data``, evaluate() under ``model.eval()`` and ``torch.no_grad()``, the
best model saved whole with ``torch.save(model, f)`` and reloaded for the test). Shrunk: a synthetic random corpus of
50 words instead of Wikitext-2 (no download), a 2-layer LSTM of 32 units, 2 epochs of 5 batches, no argument parser.
"""

import math
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

NTOKENS = 50
EMSIZE = 32
NHID = 32
NLAYERS = 2
DROPOUT = 0.2
LR = 20.0
CLIP = 0.25
EPOCHS = 2
BATCH_SIZE = 8
EVAL_BATCH_SIZE = 4
BPTT = 10
LOG_INTERVAL = 2


class RNNModel(nn.Module):
    """An embedding, a recurrent encoder and a linear decoder; the decoder may share the embedding's weight."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)

        # "Using the Output Embedding to Improve Language Models" (Press & Wolf 2016)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight

        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        """Draw the embedding and decoder weights uniformly, zero the decoder bias."""
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        """Return log-probabilities of the next word, (seq_len * batch, ntoken), and the new hidden state."""
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        """Return a zero hidden state for a batch of ``bsz`` sequences, on the parameters' device and dtype."""
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def batchify(data, bsz):
    """Cut a 1-D stream of word ids into ``bsz`` columns, (len // bsz, bsz), on the device."""
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


# a synthetic corpus stands in for Wikitext-2: random word ids
train_ids = torch.randint(0, NTOKENS, (BATCH_SIZE * BPTT * 5 + BATCH_SIZE,))
valid_ids = torch.randint(0, NTOKENS, (EVAL_BATCH_SIZE * BPTT * 2 + EVAL_BATCH_SIZE,))
test_ids = torch.randint(0, NTOKENS, (EVAL_BATCH_SIZE * BPTT * 2 + EVAL_BATCH_SIZE,))
train_data = batchify(train_ids, BATCH_SIZE)
val_data = batchify(valid_ids, EVAL_BATCH_SIZE)
test_data = batchify(test_ids, EVAL_BATCH_SIZE)

model = RNNModel("LSTM", NTOKENS, EMSIZE, NHID, NLAYERS, DROPOUT, tie_weights=True).to(device)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    """Detach hidden states from their history, so backpropagation stops at the batch boundary."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    """Return the inputs starting at row ``i`` and the next-word targets, flattened."""
    seq_len = min(BPTT, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def evaluate(data_source):
    """Return the average loss per word over ``data_source``."""
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(EVAL_BATCH_SIZE)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, BPTT):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train(epoch):
    """Run one epoch of truncated backpropagation through time with plain SGD."""
    model.train()
    total_loss = 0.0
    hidden = model.init_hidden(BATCH_SIZE)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, BPTT)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()

        # clip_grad_norm_ helps prevent the exploding gradient problem in RNNs / LSTMs
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)

        total_loss += loss.item()
        if batch % LOG_INTERVAL == 0 and batch > 0:
            cur_loss = total_loss / LOG_INTERVAL
            print(f"| epoch {epoch:3d} | batch {batch:3d} | lr {lr:02.2f} | loss {cur_loss:5.2f}")
            total_loss = 0.0


lr = LR
best_val_loss = None
with tempfile.TemporaryDirectory() as save_dir:
    save_path = os.path.join(save_dir, "model.pt")
    for epoch in range(1, EPOCHS + 1):
        train(epoch)
        val_loss = evaluate(val_data)
        print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
        # save the model if the validation loss is the best so far, else anneal the learning rate
        if not best_val_loss or val_loss < best_val_loss:
            with open(save_path, "wb") as f:
                torch.save(model, f)
            best_val_loss = val_loss
        else:
            lr /= 4.0

    # load the best saved model (a whole pickled module, hence weights_only=False)
    with open(save_path, "rb") as f:
        model = torch.load(f, weights_only=False)
        # after load the RNN params are not a continuous chunk of memory; this makes them so
        model.rnn.flatten_parameters()

test_loss = evaluate(test_data)
print(f"| end of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
print(f"done test_ppl={math.exp(test_loss):.2f}")
