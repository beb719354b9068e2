"""Sentiment analysis with a bidirectional LSTM over packed padded sequences, dict batches from a custom collate_fn.

Modeled on: bentrevett/pytorch-sentiment-analysis, "2 - Recurrent Neural Networks.ipynb" at commit
329f654b2cfaed22fee432569ebd7a2674584f79
(https://github.com/bentrevett/pytorch-sentiment-analysis/blob/329f654b2cfaed22fee432569ebd7a2674584f79/2%20-%20Recurrent%20Neural%20Networks.ipynb).
Kept: the notebook's module-level structure and device logic: seeds including ``torch.cuda.manual_seed(seed)`` and
``cudnn.deterministic``; the model built, initialised with ``model.apply(initialize_weights)`` and given its
pre-trained embedding (``model.embedding.weight.data = pretrained_embedding``) on the host, the Adam optimizer and
``CrossEntropyLoss`` created next, then ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`` and
``model = model.to(device)``/``criterion = criterion.to(device)`` after the optimizer; ``get_collate_fn`` padding
``ids`` with ``nn.utils.rnn.pad_sequence(..., batch_first=True)`` and stacking ``length`` and ``label`` into a dict
batch; ``train(dataloader, model, criterion, optimizer, device)`` and ``evaluate(...)`` moving ``batch["ids"]`` and
``batch["label"]`` with ``.to(device)`` while ``batch["length"]`` stays on the host for
``pack_padded_sequence(embedded, length, batch_first=True, enforce_sorted=False)``; ``model.train()``,
``model.eval()`` with ``torch.no_grad()``; ``get_accuracy`` with ``argmax``/``eq``/``sum`` and ``.item()``; the
``bidirectional`` branch ``torch.cat([hidden[-1], hidden[-2]], dim=-1)``; ``pad_packed_sequence`` (as in the notebook,
without ``batch_first``); saving the best state dict with ``torch.save(model.state_dict(), "lstm.pt")`` and reloading
it with ``torch.load("lstm.pt")`` (no ``map_location``) before the test set; ``predict_sentiment`` building ``length =
torch.LongTensor([len(ids)])`` on the host and ``torch.LongTensor(ids).unsqueeze(dim=0).to(device)``, reading
``.item()`` of the class and probability.
Shrunk: synthetic movie reviews built from positive, negative and neutral word lists (some negated) instead of the
IMDb download, a regex tokenizer in place of torchtext's ``basic_english``, a hand-built vocabulary with
``min_freq``/``<unk>``/``<pad>`` in place of ``build_vocab_from_iterator``, plain lists of dicts with tensors in place
of Hugging Face ``datasets``, deterministic random vectors in place of GloVe, embedding and hidden sizes 32, batch 32,
4 epochs, max length 40, no plots, no tqdm; ``lstm.pt`` lives in a temporary folder.
"""

import collections
import os
import random
import re
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

seed = 1234

random.seed(seed)
np.random.seed(seed)
torch.manual_seed(seed)
torch.cuda.manual_seed(seed)
torch.backends.cudnn.deterministic = True

workdir = tempfile.TemporaryDirectory()
os.chdir(workdir.name)

# ----- data: synthetic reviews in place of datasets.load_dataset("imdb")
POSITIVE = ["great", "wonderful", "brilliant", "moving", "superb", "funny", "charming", "gripping", "beautiful"]
NEGATIVE = ["terrible", "boring", "awful", "dull", "clumsy", "predictable", "painful", "bland", "annoying"]
NEUTRAL = ["the", "film", "movie", "plot", "acting", "was", "and", "a", "story", "director", "with", "this",
           "cast", "scenes", "music", "ending", "i", "thought", "it", "really", "quite", "rather", "of"]


def make_review(rng):
    label = rng.randint(0, 1)
    words = []
    for _ in range(rng.randint(6, 50)):
        r = rng.random()
        if r < 0.25:
            if rng.random() < 0.15:  # a negated word of the opposite polarity
                words += ["not", rng.choice(NEGATIVE if label else POSITIVE)]
            else:
                words.append(rng.choice(POSITIVE if label else NEGATIVE))
        elif r < 0.3:
            words.append(rng.choice(POSITIVE + NEGATIVE))
        else:
            words.append(rng.choice(NEUTRAL))
    return {"text": " ".join(words).capitalize() + "!", "label": label}


rng = random.Random(seed)
train_data = [make_review(rng) for _ in range(384)]
test_data = [make_review(rng) for _ in range(128)]


def tokenizer(text):
    """torchtext's basic_english: lower-case and split off punctuation."""
    text = re.sub(r"([.,!?'])", r" \1 ", text.lower())
    return text.split()


def tokenize_example(example, tokenizer, max_length):
    tokens = tokenizer(example["text"])[:max_length]
    length = len(tokens)
    return {"tokens": tokens, "length": length}


max_length = 40

train_data = [dict(ex, **tokenize_example(ex, tokenizer, max_length)) for ex in train_data]
test_data = [dict(ex, **tokenize_example(ex, tokenizer, max_length)) for ex in test_data]

test_size = 0.25
random.Random(0).shuffle(train_data)
n_valid = int(len(train_data) * test_size)
train_data, valid_data = train_data[n_valid:], train_data[:n_valid]

min_freq = 5
special_tokens = ["<unk>", "<pad>"]


class Vocab:
    def __init__(self, token_lists, min_freq, specials):
        counts = collections.Counter(t for tokens in token_lists for t in tokens)
        self.itos = list(specials) + sorted(t for t, c in counts.items() if c >= min_freq and t not in specials)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.default_index = None

    def __len__(self):
        return len(self.itos)

    def __getitem__(self, token):
        return self.stoi.get(token, self.default_index)

    def set_default_index(self, index):
        self.default_index = index

    def lookup_indices(self, tokens):
        return [self[t] for t in tokens]

    def get_itos(self):
        return self.itos


vocab = Vocab([ex["tokens"] for ex in train_data], min_freq=min_freq, specials=special_tokens)
unk_index = vocab["<unk>"]
pad_index = vocab["<pad>"]
vocab.set_default_index(unk_index)


def numericalize_example(example, vocab):
    ids = vocab.lookup_indices(example["tokens"])
    return {"ids": ids}


def with_torch_format(data):
    """``dataset.with_format(type="torch", columns=["ids", "label", "length"])``."""
    return [{"ids": torch.tensor(numericalize_example(ex, vocab)["ids"]), "label": torch.tensor(ex["label"]),
             "length": torch.tensor(ex["length"])} for ex in data]


train_data = with_torch_format(train_data)
valid_data = with_torch_format(valid_data)
test_data = with_torch_format(test_data)


def get_collate_fn(pad_index):
    def collate_fn(batch):
        batch_ids = [i["ids"] for i in batch]
        batch_ids = nn.utils.rnn.pad_sequence(batch_ids, padding_value=pad_index, batch_first=True)
        batch_length = [i["length"] for i in batch]
        batch_length = torch.stack(batch_length)
        batch_label = [i["label"] for i in batch]
        batch_label = torch.stack(batch_label)
        batch = {"ids": batch_ids, "length": batch_length, "label": batch_label}
        return batch

    return collate_fn


def get_data_loader(dataset, batch_size, pad_index, shuffle=False):
    collate_fn = get_collate_fn(pad_index)
    data_loader = torch.utils.data.DataLoader(dataset=dataset, batch_size=batch_size, collate_fn=collate_fn,
                                              shuffle=shuffle)
    return data_loader


batch_size = 32

train_data_loader = get_data_loader(train_data, batch_size, pad_index, shuffle=True)
valid_data_loader = get_data_loader(valid_data, batch_size, pad_index)
test_data_loader = get_data_loader(test_data, batch_size, pad_index)


class LSTM(nn.Module):
    def __init__(self, vocab_size, embedding_dim, hidden_dim, output_dim, n_layers, bidirectional, dropout_rate,
                 pad_index):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_index)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, n_layers, bidirectional=bidirectional,
                            dropout=dropout_rate, batch_first=True)
        self.fc = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, ids, length):
        # ids = [batch size, seq len], length = [batch size]
        embedded = self.dropout(self.embedding(ids))
        packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, length, batch_first=True,
                                                            enforce_sorted=False)
        packed_output, (hidden, cell) = self.lstm(packed_embedded)
        # hidden = [n layers * n directions, batch size, hidden dim]
        output, output_length = nn.utils.rnn.pad_packed_sequence(packed_output)
        if self.lstm.bidirectional:
            hidden = self.dropout(torch.cat([hidden[-1], hidden[-2]], dim=-1))
        else:
            hidden = self.dropout(hidden[-1])
        prediction = self.fc(hidden)
        return prediction


vocab_size = len(vocab)
embedding_dim = 32
hidden_dim = 32
output_dim = len(set(int(ex["label"]) for ex in train_data))
n_layers = 2
bidirectional = True
dropout_rate = 0.5

model = LSTM(vocab_size, embedding_dim, hidden_dim, output_dim, n_layers, bidirectional, dropout_rate, pad_index)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


print(f"The model has {count_parameters(model):,} trainable parameters")


def initialize_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.xavier_normal_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LSTM):
        for name, param in m.named_parameters():
            if "bias" in name:
                nn.init.zeros_(param)
            elif "weight" in name:
                nn.init.orthogonal_(param)


model.apply(initialize_weights)


def fake_glove_vectors(tokens, dim):
    """``torchtext.vocab.GloVe().get_vecs_by_tokens``: a fixed vector per word (zeros for the specials)."""
    vecs = []
    for t in tokens:
        if t in special_tokens:
            vecs.append(np.zeros(dim, dtype=np.float32))
        else:
            vecs.append(np.random.RandomState(sum(map(ord, t))).normal(0, 0.5, dim).astype(np.float32))
    return torch.from_numpy(np.stack(vecs))


pretrained_embedding = fake_glove_vectors(vocab.get_itos(), embedding_dim)
model.embedding.weight.data = pretrained_embedding

lr = 5e-3
optimizer = optim.Adam(model.parameters(), lr=lr)
criterion = nn.CrossEntropyLoss()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

model = model.to(device)
criterion = criterion.to(device)


def train(dataloader, model, criterion, optimizer, device):
    model.train()
    epoch_losses = []
    epoch_accs = []
    for batch in dataloader:
        ids = batch["ids"].to(device)
        length = batch["length"]
        label = batch["label"].to(device)
        prediction = model(ids, length)
        loss = criterion(prediction, label)
        accuracy = get_accuracy(prediction, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_losses.append(loss.item())
        epoch_accs.append(accuracy.item())
    return np.mean(epoch_losses), np.mean(epoch_accs)


def evaluate(dataloader, model, criterion, device):
    model.eval()
    epoch_losses = []
    epoch_accs = []
    with torch.no_grad():
        for batch in dataloader:
            ids = batch["ids"].to(device)
            length = batch["length"]
            label = batch["label"].to(device)
            prediction = model(ids, length)
            loss = criterion(prediction, label)
            accuracy = get_accuracy(prediction, label)
            epoch_losses.append(loss.item())
            epoch_accs.append(accuracy.item())
    return np.mean(epoch_losses), np.mean(epoch_accs)


def get_accuracy(prediction, label):
    batch_size, _ = prediction.shape
    predicted_classes = prediction.argmax(dim=-1)
    correct_predictions = predicted_classes.eq(label).sum()
    accuracy = correct_predictions / batch_size
    return accuracy


n_epochs = 4
best_valid_loss = float("inf")

metrics = collections.defaultdict(list)

for epoch in range(n_epochs):
    train_loss, train_acc = train(train_data_loader, model, criterion, optimizer, device)
    valid_loss, valid_acc = evaluate(valid_data_loader, model, criterion, device)
    metrics["train_losses"].append(train_loss)
    metrics["train_accs"].append(train_acc)
    metrics["valid_losses"].append(valid_loss)
    metrics["valid_accs"].append(valid_acc)
    if valid_loss < best_valid_loss:
        best_valid_loss = valid_loss
        torch.save(model.state_dict(), "lstm.pt")
    print(f"epoch: {epoch}")
    print(f"train_loss: {train_loss:.3f}, train_acc: {train_acc:.3f}")
    print(f"valid_loss: {valid_loss:.3f}, valid_acc: {valid_acc:.3f}")

model.load_state_dict(torch.load("lstm.pt"))

test_loss, test_acc = evaluate(test_data_loader, model, criterion, device)

print(f"test_loss: {test_loss:.3f}, test_acc: {test_acc:.3f}")


def predict_sentiment(text, model, tokenizer, vocab, device):
    tokens = tokenizer(text)
    ids = vocab.lookup_indices(tokens)
    length = torch.LongTensor([len(ids)])
    tensor = torch.LongTensor(ids).unsqueeze(dim=0).to(device)
    prediction = model(tensor, length).squeeze(dim=0)
    probability = torch.softmax(prediction, dim=-1)
    predicted_class = prediction.argmax(dim=-1).item()
    predicted_probability = probability[predicted_class].item()
    return predicted_class, predicted_probability


for text in ["This film is terrible!", "This film is great!", "This film is not terrible, it's great!",
             "This film is not great, it's terrible!"]:
    predicted_class, predicted_probability = predict_sentiment(text, model, tokenizer, vocab, device)
    print(f"{text!r}: class {predicted_class}, probability {predicted_probability:.3f}")

os.chdir("/")
workdir.cleanup()
print(f"done test_loss={test_loss:.3f} test_acc={test_acc:.3f}")
