"""Sequence-to-sequence nn.Transformer translator with padding masks and greedy decoding, on a synthetic language pair.

Modeled on: pytorch/examples, language_translation/main.py, src/model.py and src/data.py
(https://github.com/pytorch/examples/tree/main/language_translation).
Kept: the module-level ``DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")``; ``get_data``
returning DataLoaders whose ``_collate_fn`` turns sentences into index tensors on the host (``_seq_transform`` of
tokenizer, vocabulary and ``_tensor_transform`` adding ``<bos>``/``<eos>``) and pads them with ``pad_sequence``
(sequence-first); ``generate_square_subsequent_mask(size, device)`` and ``create_mask(src, tgt, pad_idx, device)``
building the masks with ``device=device`` and the padding masks from the batch; the ``Translator`` model
(``PositionalEncoding`` with a registered ``pos_embedding`` buffer, two embeddings, ``nn.Transformer``, ``ff``
head, ``encode``/``decode``); ``train`` (model.train(), ``src.to(DEVICE)``, ``tgt.to(DEVICE)``, masks, zero_grad,
loss with ``ignore_index`` on ``<pad>``, step, ``losses / len(list(train_dl))``); ``validate`` (model.eval(), no
``torch.no_grad()`` as in the original); ``main`` saving ``best.pt`` and ``last.pt`` state_dicts; ``inference``
building a fresh model ``.to(DEVICE)``, ``model.load_state_dict(torch.load(opts.model_path))``, ``model.eval()``,
a host ``src_mask`` of ``torch.zeros(num_tokens, num_tokens).type(torch.bool)``, and ``greedy_decode`` moving
``src``/``src_mask``/``memory`` to ``DEVICE``, growing ``ys`` with ``torch.ones(1, 1).type_as(src.data)
.fill_(next_word)`` and reading the result with ``tgt_tokens.cpu().numpy()``. Shrunk: a made-up word-for-word
language pair (target words are the source words reversed, with a small vocabulary, from a fixed seed) instead of
Multi30k with spaCy tokenizers and torchtext vocabularies (a tiny ``Vocab`` class stands in), embed size 32, 2 heads,
2+2 layers, feed-forward 64, 5 epochs, batch 16, no tqdm and no logging to a file (prints instead), epoch time left
out of the output, a fixed list of sentences instead of the interactive ``input()`` loop, settings as a constant
namespace instead of argparse, files written in a temporary folder.
"""

import math
import os
import random
import tempfile
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

# Train on the GPU if possible
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


# ---------------------------------------------------------------------------------------------------------------
# src/model.py
# ---------------------------------------------------------------------------------------------------------------
class PositionalEncoding(nn.Module):
    def __init__(
        self,
        emb_size,
        dropout,
        maxlen=5000
    ):
        super(PositionalEncoding, self).__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)

        self.dropout = nn.Dropout(dropout)
        self.register_buffer('pos_embedding', pos_embedding)

    def forward(self, token_embedding):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class Translator(nn.Module):
    def __init__(
            self,
            num_encoder_layers,
            num_decoder_layers,
            embed_size,
            num_heads,
            src_vocab_size,
            tgt_vocab_size,
            dim_feedforward,
            dropout
    ):
        super(Translator, self).__init__()

        # Output of embedding must be equal (embed_size)
        self.src_embedding = nn.Embedding(src_vocab_size, embed_size)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, embed_size)

        self.pos_enc = PositionalEncoding(embed_size, dropout)

        self.transformer = nn.Transformer(
            d_model=embed_size,
            nhead=num_heads,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout
        )

        self.ff = nn.Linear(embed_size, tgt_vocab_size)

    def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):

        src_emb = self.pos_enc(self.src_embedding(src))
        tgt_emb = self.pos_enc(self.tgt_embedding(trg))

        outs = self.transformer(
            src_emb,
            tgt_emb,
            src_mask,
            tgt_mask,
            None,
            src_padding_mask,
            tgt_padding_mask,
            memory_key_padding_mask
        )

        return self.ff(outs)

    def encode(self, src, src_mask):

        embed = self.src_embedding(src)

        pos_enc = self.pos_enc(embed)

        return self.transformer.encoder(pos_enc, src_mask)

    def decode(self, tgt, memory, tgt_mask):

        embed = self.tgt_embedding(tgt)

        pos_enc = self.pos_enc(embed)

        return self.transformer.decoder(pos_enc, memory, tgt_mask)


# ---------------------------------------------------------------------------------------------------------------
# src/data.py (a made-up language pair instead of Multi30k, a small Vocab instead of torchtext's)
# ---------------------------------------------------------------------------------------------------------------
SRC_WORDS = ["ein", "mann", "frau", "hund", "katze", "sieht", "hat", "den", "die", "ball", "baum", "rot", "blau",
             "groß", "klein", "läuft"]


def _to_target(word):
    return word[::-1]


def _make_pairs(n, rng):
    pairs = []
    for _ in range(n):
        words = [rng.choice(SRC_WORDS) for _ in range(rng.randint(3, 7))]
        pairs.append((" ".join(words) + "\n", " ".join(_to_target(w) for w in words) + "\n"))
    return pairs


class Vocab:
    def __init__(self, tokens, specials):
        self.itos = list(specials) + sorted(set(tokens))
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.default_index = 0

    def set_default_index(self, index):
        self.default_index = index

    def __len__(self):
        return len(self.itos)

    def __call__(self, tokens):
        return [self.stoi.get(t, self.default_index) for t in tokens]

    def lookup_tokens(self, indices):
        return [self.itos[int(i)] for i in indices]


def _yield_tokens(iterable_data, tokenizer, src):

    # Iterable data stores the samples as (src, tgt) so this will help us select just one language or the other
    index = 0 if src else 1

    for data in iterable_data:
        yield tokenizer(data[index])


def get_data(opts):

    # Define a token "unkown", "padding", "beginning of sentence", and "end of sentence"
    special_symbols = {
        "<unk>": 0,
        "<pad>": 1,
        "<bos>": 2,
        "<eos>": 3
    }

    rng = random.Random(opts.data_seed)
    train_iterator = _make_pairs(320, rng)
    valid_iterator = _make_pairs(64, rng)

    # Grab a tokenizer for these languages
    src_tokenizer = str.split
    tgt_tokenizer = str.split

    # Build a vocabulary object for these languages
    src_vocab = Vocab(
        [tok for toks in _yield_tokens(train_iterator, src_tokenizer, True) for tok in toks],
        specials=list(special_symbols.keys()),
    )
    tgt_vocab = Vocab(
        [tok for toks in _yield_tokens(train_iterator, tgt_tokenizer, False) for tok in toks],
        specials=list(special_symbols.keys()),
    )

    src_vocab.set_default_index(special_symbols["<unk>"])
    tgt_vocab.set_default_index(special_symbols["<unk>"])

    # Helper function to sequentially apply transformations
    def _seq_transform(*transforms):
        def func(txt_input):
            for transform in transforms:
                txt_input = transform(txt_input)
            return txt_input
        return func

    # Function to add BOS/EOS and create tensor for input sequence indices
    def _tensor_transform(token_ids):
        return torch.cat(
            (torch.tensor([special_symbols["<bos>"]]),
             torch.tensor(token_ids),
             torch.tensor([special_symbols["<eos>"]]))
        )

    src_lang_transform = _seq_transform(src_tokenizer, src_vocab, _tensor_transform)
    tgt_lang_transform = _seq_transform(tgt_tokenizer, tgt_vocab, _tensor_transform)

    # Now we want to convert the data to a dataloader. We will need to collate batches
    def _collate_fn(batch):
        src_batch, tgt_batch = [], []
        for src_sample, tgt_sample in batch:
            src_batch.append(src_lang_transform(src_sample.rstrip("\n")))
            tgt_batch.append(tgt_lang_transform(tgt_sample.rstrip("\n")))

        src_batch = pad_sequence(src_batch, padding_value=special_symbols["<pad>"])
        tgt_batch = pad_sequence(tgt_batch, padding_value=special_symbols["<pad>"])
        return src_batch, tgt_batch

    # Create the dataloader
    train_dataloader = DataLoader(train_iterator, batch_size=opts.batch, collate_fn=_collate_fn)
    valid_dataloader = DataLoader(valid_iterator, batch_size=opts.batch, collate_fn=_collate_fn)

    return train_dataloader, valid_dataloader, src_vocab, tgt_vocab, src_lang_transform, tgt_lang_transform, special_symbols


def generate_square_subsequent_mask(size, device):
    mask = (torch.triu(torch.ones((size, size), device=device)) == 1).transpose(0, 1)
    mask = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))
    return mask


# Create masks for input into model
def create_mask(src, tgt, pad_idx, device):

    # Get sequence length
    src_seq_len = src.shape[0]
    tgt_seq_len = tgt.shape[0]

    # Generate the mask
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len, device)
    src_mask = torch.zeros((src_seq_len, src_seq_len), device=device).type(torch.bool)

    # Overlay the mask over the original input
    src_padding_mask = (src == pad_idx).transpose(0, 1)
    tgt_padding_mask = (tgt == pad_idx).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


# ---------------------------------------------------------------------------------------------------------------
# main.py
# ---------------------------------------------------------------------------------------------------------------
# Function to generate output sequence using greedy algorithm
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol):

    # Move to device
    src = src.to(DEVICE)
    src_mask = src_mask.to(DEVICE)

    # Encode input
    memory = model.encode(src, src_mask)

    # Output will be stored here
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long).to(DEVICE)

    # For each element in our translation (which could range up to the maximum translation length)
    for _ in range(max_len-1):

        # Decode the encoded representation of the input
        memory = memory.to(DEVICE)
        tgt_mask = (generate_square_subsequent_mask(ys.size(0), DEVICE).type(torch.bool)).to(DEVICE)
        out = model.decode(ys, memory, tgt_mask)

        # Reshape
        out = out.transpose(0, 1)

        # Covert to probabilities and take the max of these probabilities
        prob = model.ff(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()

        # Now we have an output which is the vector representation of the translation
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == end_symbol:
            break

    return ys


# Translates sentences with a trained model (the original reads them from input() in a loop)
def inference(opts, sentences):

    # Get training data, tokenizer and vocab
    # objects as well as any special symbols we added to our dataset
    _, _, src_vocab, tgt_vocab, src_transform, _, special_symbols = get_data(opts)

    src_vocab_size = len(src_vocab)
    tgt_vocab_size = len(tgt_vocab)

    # Create model
    model = Translator(
        num_encoder_layers=opts.enc_layers,
        num_decoder_layers=opts.dec_layers,
        embed_size=opts.embed_size,
        num_heads=opts.attn_heads,
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        dim_feedforward=opts.dim_feedforward,
        dropout=opts.dropout
    ).to(DEVICE)

    # Load in weights
    model.load_state_dict(torch.load(opts.model_path))

    # Set to inference
    model.eval()

    for sentence in sentences:
        print("> " + sentence)

        # Convert to tokens
        src = src_transform(sentence).view(-1, 1)
        num_tokens = src.shape[0]

        src_mask = (torch.zeros(num_tokens, num_tokens)).type(torch.bool)

        # Decode
        tgt_tokens = greedy_decode(
            model, src, src_mask, max_len=num_tokens+5, start_symbol=special_symbols["<bos>"], end_symbol=special_symbols["<eos>"]
        ).flatten()

        # Convert to list of tokens
        output_as_list = list(tgt_tokens.cpu().numpy())

        # Convert tokens to words
        output_list_words = tgt_vocab.lookup_tokens(output_as_list)

        # Remove special tokens and convert to string
        translation = " ".join(output_list_words).replace("<bos>", "").replace("<eos>", "")

        print(translation.strip())


# Train the model for 1 epoch
def train(model, train_dl, loss_fn, optim, special_symbols, opts):

    # Object for accumulating losses
    losses = 0

    # Put model into inference mode
    model.train()
    for src, tgt in train_dl:

        src = src.to(DEVICE)
        tgt = tgt.to(DEVICE)

        # We need to reshape the input slightly to fit into the transformer
        tgt_input = tgt[:-1, :]

        # Create masks
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input, special_symbols["<pad>"], DEVICE)

        # Pass into model, get probability over the vocab out
        logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)

        # Reset gradients before we try to compute the gradients over the loss
        optim.zero_grad()

        # Get original shape back
        tgt_out = tgt[1:, :]

        # Compute loss and gradient over that loss
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()

        # Step weights
        optim.step()

        # Accumulate a running loss for reporting
        losses += loss.item()

        if opts.dry_run:
            break

    # Return the average loss
    return losses / len(list(train_dl))


# Check the model accuracy on the validation dataset
def validate(model, valid_dl, loss_fn, special_symbols):

    # Object for accumulating losses
    losses = 0

    # Turn off gradients a moment
    model.eval()

    for src, tgt in valid_dl:

        src = src.to(DEVICE)
        tgt = tgt.to(DEVICE)

        # We need to reshape the input slightly to fit into the transformer
        tgt_input = tgt[:-1, :]

        # Create masks
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input, special_symbols["<pad>"], DEVICE)

        # Pass into model, get probability over the vocab out
        logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)

        # Get original shape back, compute loss, accumulate that loss
        tgt_out = tgt[1:, :]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        losses += loss.item()

    # Return the average loss
    return losses / len(list(valid_dl))


# Train the model
def main(opts):

    os.makedirs(opts.logging_dir, exist_ok=True)

    print(f"Translation task: {opts.src} -> {opts.tgt}")

    # Get training data, tokenizer and vocab
    # objects as well as any special symbols we added to our dataset
    train_dl, valid_dl, src_vocab, tgt_vocab, _, _, special_symbols = get_data(opts)

    print("Loaded data")

    src_vocab_size = len(src_vocab)
    tgt_vocab_size = len(tgt_vocab)

    print(f"{opts.src} vocab size: {src_vocab_size}")
    print(f"{opts.tgt} vocab size: {tgt_vocab_size}")

    # Create model
    model = Translator(
        num_encoder_layers=opts.enc_layers,
        num_decoder_layers=opts.dec_layers,
        embed_size=opts.embed_size,
        num_heads=opts.attn_heads,
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        dim_feedforward=opts.dim_feedforward,
        dropout=opts.dropout
    ).to(DEVICE)

    print("Model created... starting training!")

    # Set up our learning tools
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=special_symbols["<pad>"])

    # These special values are from the "Attention is all you need" paper
    optim = torch.optim.Adam(model.parameters(), lr=opts.lr, betas=(0.9, 0.98), eps=1e-9)

    best_val_loss = 1e6

    for idx, epoch in enumerate(range(1, opts.epochs+1)):

        train_loss = train(model, train_dl, loss_fn, optim, special_symbols, opts)
        val_loss = validate(model, valid_dl, loss_fn, special_symbols)

        # Once training is done, we want to save out the model
        if val_loss < best_val_loss:
            best_val_loss = val_loss
            print("New best model, saving...")
            torch.save(model.state_dict(), opts.logging_dir + "best.pt")

        torch.save(model.state_dict(), opts.logging_dir + "last.pt")

        print(f"Epoch: {epoch}\n\tTrain loss: {train_loss:.3f}\n\tVal loss: {val_loss:.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    logging_dir = tempfile.mkdtemp() + "/"
    args = SimpleNamespace(
        src="de", tgt="ed", epochs=5, lr=1e-3, batch=16, attn_heads=2, enc_layers=2, dec_layers=2, embed_size=32,
        dim_feedforward=64, dropout=0.1, logging_dir=logging_dir, dry_run=False, data_seed=1,
        inference=False, model_path=None,
    )

    main(args)

    args.inference = True
    args.model_path = logging_dir + "best.pt"
    inference(args, ["ein mann sieht den hund", "die katze hat den roten ball"])
    print("done")
