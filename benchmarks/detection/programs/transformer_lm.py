"""Language model with ``nn.TransformerEncoder`` and sinusoidal positional encoding, on a synthetic corpus.

Modeled on: the PyTorch tutorial "Language Modeling with nn.Transformer and torchtext"
(https://pytorch.org/tutorials/beginner/transformer_tutorial.html).
Kept: the device logic (``torch.device('cuda' if ... else 'cpu')``, the positional encoding a buffer registered with
``register_buffer``, ``batchify`` returning ``data.to(device)``, the model moved with ``.to(device)``, the causal mask
made once per epoch by ``nn.Transformer.generate_square_subsequent_mask(bptt).to(device)`` and cut down for a short
last batch, as in the tutorial's earlier version, evaluate() under ``model.eval()``
and ``torch.no_grad()``, the best state_dict saved to a temporary directory and loaded back before the test).
Shrunk: random word ids instead of WikiText-2 (no download, no torchtext), a 2-layer 32-wide encoder over 50 words,
2 epochs of 4 batches.
"""

import math
import os
import time
from tempfile import TemporaryDirectory

import torch
from torch import Tensor, nn
from torch.nn import TransformerEncoder, TransformerEncoderLayer

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class TransformerModel(nn.Module):
    """Embedding, positional encoding, a causal transformer encoder and a linear decoder to the vocabulary."""

    def __init__(self, ntoken: int, d_model: int, nhead: int, d_hid: int, nlayers: int, dropout: float = 0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = TransformerEncoder(encoder_layers, nlayers)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)

        self.init_weights()

    def init_weights(self) -> None:
        """Draw the embedding and decoder weights uniformly, zero the decoder bias."""
        initrange = 0.1
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.linear.bias.data.zero_()
        self.linear.weight.data.uniform_(-initrange, initrange)

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """Map ``src``, ``[seq_len, batch_size]``, to logits, ``[seq_len, batch_size, ntoken]``.

        ``src_mask`` is the ``[seq_len, seq_len]`` causal mask.
        """
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, src_mask)
        return self.linear(output)


class PositionalEncoding(nn.Module):
    """Adds fixed sinusoidal position encodings (a buffer, so it follows the module's device) and applies dropout."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)

        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: Tensor) -> Tensor:
        """Add the encodings to ``x`` of shape ``[seq_len, batch_size, embedding_dim]``."""
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


def batchify(data: Tensor, bsz: int) -> Tensor:
    """Divide the data into ``bsz`` separate sequences, removing the extra elements that would not cleanly fit.

    Returns a tensor of shape ``[N // bsz, bsz]`` on the device.
    """
    seq_len = data.size(0) // bsz
    data = data[: seq_len * bsz]
    data = data.view(bsz, seq_len).t().contiguous()
    return data.to(device)


ntokens = 50  # size of the vocabulary
batch_size = 8
eval_batch_size = 4
bptt = 12
# random word ids stand in for WikiText-2's train, valid and test splits
train_data = batchify(torch.randint(0, ntokens, (batch_size * bptt * 4 + batch_size,)), batch_size)
val_data = batchify(torch.randint(0, ntokens, (eval_batch_size * bptt * 2 + eval_batch_size,)), eval_batch_size)
test_data = batchify(torch.randint(0, ntokens, (eval_batch_size * bptt * 2 + eval_batch_size,)), eval_batch_size)


def get_batch(source: Tensor, i: int) -> tuple[Tensor, Tensor]:
    """Return the rows from ``i`` as input, ``[seq_len, batch_size]``, and the next rows flattened as target."""
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].reshape(-1)
    return data, target


emsize = 32  # embedding dimension
d_hid = 64  # dimension of the feed-forward network in nn.TransformerEncoder
nlayers = 2  # number of nn.TransformerEncoderLayer in nn.TransformerEncoder
nhead = 2  # number of heads in nn.MultiheadAttention
dropout = 0.2  # dropout probability
model = TransformerModel(ntokens, emsize, nhead, d_hid, nlayers, dropout).to(device)

criterion = nn.CrossEntropyLoss()
lr = 5.0  # learning rate
optimizer = torch.optim.SGD(model.parameters(), lr=lr)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)


def train(model: nn.Module) -> None:
    """Run one training epoch, printing the loss every log_interval batches."""
    model.train()  # turn on train mode
    total_loss = 0.0
    log_interval = 2
    start_time = time.time()

    # a square causal mask, made once: position i may attend to positions <= i only
    src_mask = nn.Transformer.generate_square_subsequent_mask(bptt).to(device)

    num_batches = len(train_data) // bptt
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        seq_len = data.size(0)
        if seq_len != bptt:  # only on the last batch
            src_mask = src_mask[:seq_len, :seq_len]
        output = model(data, src_mask)
        output_flat = output.view(-1, ntokens)
        loss = criterion(output_flat, targets)

        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()

        total_loss += loss.item()
        if batch % log_interval == 0 and batch > 0:
            lr = scheduler.get_last_lr()[0]
            ms_per_batch = (time.time() - start_time) * 1000 / log_interval
            cur_loss = total_loss / log_interval
            ppl = math.exp(cur_loss)
            print(
                f"| epoch {epoch:3d} | {batch:5d}/{num_batches:5d} batches | lr {lr:02.2f} | "
                f"ms/batch {ms_per_batch:5.2f} | loss {cur_loss:5.2f} | ppl {ppl:8.2f}"
            )
            total_loss = 0
            start_time = time.time()


def evaluate(model: nn.Module, eval_data: Tensor) -> float:
    """Return the average loss per token over ``eval_data``."""
    model.eval()  # turn on evaluation mode
    total_loss = 0.0
    src_mask = nn.Transformer.generate_square_subsequent_mask(bptt).to(device)
    with torch.no_grad():
        for i in range(0, eval_data.size(0) - 1, bptt):
            data, targets = get_batch(eval_data, i)
            seq_len = data.size(0)
            if seq_len != bptt:
                src_mask = src_mask[:seq_len, :seq_len]
            output = model(data, src_mask)
            output_flat = output.view(-1, ntokens)
            total_loss += seq_len * criterion(output_flat, targets).item()
    return total_loss / (len(eval_data) - 1)


best_val_loss = float("inf")
epochs = 2

with TemporaryDirectory() as tempdir:
    best_model_params_path = os.path.join(tempdir, "best_model_params.pt")

    for epoch in range(1, epochs + 1):
        epoch_start_time = time.time()
        train(model)
        val_loss = evaluate(model, val_data)
        val_ppl = math.exp(val_loss)
        elapsed = time.time() - epoch_start_time
        print("-" * 89)
        print(
            f"| end of epoch {epoch:3d} | time: {elapsed:5.2f}s | valid loss {val_loss:5.2f} | valid ppl {val_ppl:8.2f}"
        )
        print("-" * 89)

        if val_loss < best_val_loss:
            best_val_loss = val_loss
            torch.save(model.state_dict(), best_model_params_path)

        scheduler.step()
    model.load_state_dict(torch.load(best_model_params_path))  # load the best model states

test_loss = evaluate(model, test_data)
test_ppl = math.exp(test_loss)
print("=" * 89)
print(f"| End of training | test loss {test_loss:5.2f} | test ppl {test_ppl:8.2f}")
print("=" * 89)
print(f"done test_ppl={test_ppl:.2f}")
