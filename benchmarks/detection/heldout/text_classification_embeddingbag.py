"""News-topic classification with ``nn.EmbeddingBag`` + a linear layer, on a synthetic AG_NEWS-like corpus.

Modeled on: PyTorch tutorials, "Text classification with the torchtext library"
(https://pytorch.org/tutorials/beginner/text_sentiment_ngrams_tutorial.html,
beginner_source/text_sentiment_ngrams_tutorial.py).
Kept: the device logic: module-level ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")``;
``collate_batch`` building ``label_list``, ``text_list`` and ``offsets`` on the host (``torch.tensor(...,
dtype=torch.int64)``, ``torch.tensor(offsets[:-1]).cumsum(dim=0)``, ``torch.cat``) and returning
``label_list.to(device), text_list.to(device), offsets.to(device)``; ``TextClassificationModel(...).to(device)``
with uniform-initialised embedding and linear weights; ``train`` (``model.train()``, SGD, ``clip_grad_norm_(...,
0.1)``, accuracy summed with ``.sum().item()``) and ``evaluate`` (``model.eval()`` and ``torch.no_grad()``); the
StepLR scheduler stepped only when the validation accuracy drops; ``random_split`` into training and validation
sets; the final test pass; then ``model = model.to("cpu")`` and ``predict`` building
``torch.tensor(text_pipeline(text))`` and ``torch.tensor([0])`` on the CPU under ``torch.no_grad()``. No checkpoint
(the tutorial saves none). Shrunk: 4 synthetic topics whose sentences draw most words from a topic vocabulary, a
whitespace tokenizer and a vocabulary built in the program instead of torchtext's ``AG_NEWS``, ``get_tokenizer`` and
``build_vocab_from_iterator`` (``to_map_style_dataset`` becomes a plain list), 480 training and 96 test samples,
embedding size 16, batch size 16, 4 epochs, the log interval shortened to 10 batches, and the elapsed times left out
of the printed lines.
"""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.dataset import random_split

torch.manual_seed(0)
random.seed(0)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# ----------------------------------------------------------------------------------------------------------------
# Synthetic AG_NEWS: (label, text) pairs with labels 1..4
TOPIC_WORDS = {
    1: "minister election border treaty parliament embassy rebels summit president ceasefire",
    2: "match season coach goal striker playoff tournament champion league inning",
    3: "shares profit market investors quarterly merger stocks earnings bank oil",
    4: "software internet chip researchers space wireless browser computer genome satellite",
}
COMMON_WORDS = "the a of in on to and for with says new after over report said".split()


def synthetic_ag_news(n, rng):
    samples = []
    for _ in range(n):
        label = rng.randint(1, 4)
        topic = TOPIC_WORDS[label].split()
        length = rng.randint(4, 10)
        words = [rng.choice(topic) if rng.random() < 0.18 else rng.choice(COMMON_WORDS) for _ in range(length)]
        samples.append((label, " ".join(words)))
    return samples


data_rng = random.Random(1)
train_iter = synthetic_ag_news(480, data_rng)
test_iter = synthetic_ag_news(96, data_rng)


def tokenizer(line):
    return line.lower().split()


def build_vocab(texts, specials=("<unk>",)):
    itos = list(specials)
    for line in texts:
        for token in tokenizer(line):
            if token not in itos:
                itos.append(token)
    return {token: i for i, token in enumerate(itos)}


vocab = build_vocab(text for _, text in train_iter)
UNK = vocab["<unk>"]


def text_pipeline(x):
    return [vocab.get(token, UNK) for token in tokenizer(x)]


def label_pipeline(x):
    return int(x) - 1


# ----------------------------------------------------------------------------------------------------------------
def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for _label, _text in batch:
        label_list.append(label_pipeline(_label))
        processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list.to(device), text_list.to(device), offsets.to(device)


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


num_class = len({label for (label, _) in train_iter})
vocab_size = len(vocab)
emsize = 16
model = TextClassificationModel(vocab_size, emsize, num_class).to(device)


def train(dataloader):
    model.train()
    total_acc, total_count = 0, 0
    log_interval = 10

    for idx, (label, text, offsets) in enumerate(dataloader):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        total_acc += (predicted_label.argmax(1) == label).sum().item()
        total_count += label.size(0)
        if idx % log_interval == 0 and idx > 0:
            print(
                f"| epoch {epoch:3d} | {idx:5d}/{len(dataloader):5d} batches | accuracy {total_acc / total_count:8.3f}"
            )
            total_acc, total_count = 0, 0


def evaluate(dataloader):
    model.eval()
    total_acc, total_count = 0, 0

    with torch.no_grad():
        for idx, (label, text, offsets) in enumerate(dataloader):  # noqa: B007
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)  # noqa: F841 (computed and unused, as in the tutorial)
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
    return total_acc / total_count


# Hyperparameters
EPOCHS = 4
LR = 5
BATCH_SIZE = 16

criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
total_accu = None
train_dataset = list(train_iter)  # to_map_style_dataset
test_dataset = list(test_iter)
num_train = int(len(train_dataset) * 0.95)
split_train_, split_valid_ = random_split(train_dataset, [num_train, len(train_dataset) - num_train])

train_dataloader = DataLoader(split_train_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)
valid_dataloader = DataLoader(split_valid_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)
test_dataloader = DataLoader(test_dataset, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)

for epoch in range(1, EPOCHS + 1):
    train(train_dataloader)
    accu_val = evaluate(valid_dataloader)
    if total_accu is not None and total_accu > accu_val:
        scheduler.step()
    else:
        total_accu = accu_val
    print("-" * 59)
    print(f"| end of epoch {epoch:3d} | valid accuracy {accu_val:8.3f} ")
    print("-" * 59)

print("Checking the results of test dataset.")
accu_test = evaluate(test_dataloader)
print(f"test accuracy {accu_test:8.3f}")

# ----------------------------------------------------------------------------------------------------------------
ag_news_label = {1: "World", 2: "Sports", 3: "Business", 4: "Sci/Tec"}


def predict(text, text_pipeline):
    with torch.no_grad():
        text = torch.tensor(text_pipeline(text))
        output = model(text, torch.tensor([0]))
        return output.argmax(1).item() + 1


ex_text_str = (
    "the coach said the striker and the goal keeper will miss the playoff match after a season of injuries in "
    "the league"
)

model = model.to("cpu")

print(f"This is a {ag_news_label[predict(ex_text_str, text_pipeline)]} news")
print(f"done valid_accuracy={total_accu:.4f} test_accuracy={accu_test:.4f}")
