"""Character-level RNN that classifies synthetic surnames by language, from one-hot letter tensors.

Modeled on: pytorch/tutorials, intermediate_source/char_rnn_classification_tutorial.py
(https://github.com/pytorch/tutorials/blob/main/intermediate_source/char_rnn_classification_tutorial.py).
Kept: the device logic (``device = torch.device('cpu')`` switched to ``torch.device('cuda')`` when available, then
``torch.set_default_device(device)``, so the one-hot ``torch.zeros`` of ``lineToTensor``, the label tensors made
with ``torch.tensor(..., dtype=torch.long)`` and the model's parameters all land on it without a ``.to``; the
train/test split by ``torch.utils.data.random_split`` with ``generator=torch.Generator(device=device)``; training
under ``rnn.train()`` with minibatches shuffled by Python's ``random`` and split with ``np.array_split``, the loss
summed over each batch, ``nn.utils.clip_grad_norm_`` and ``.item()``; evaluate() under ``rnn.eval()`` and
``torch.no_grad()`` filling a confusion matrix made with ``torch.zeros`` and converted with ``.cpu().numpy()``).
Shrunk: 40 synthetic names built from four made-up syllable sets instead of the 18 files of data/names (no download,
no files), labels sorted (the tutorial lists a set, whose order changes from run to run), a 32-unit RNN, 2 epochs
of 3 minibatches, no plotting (the confusion matrix's diagonal is printed).
"""

import random
import string

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset

# Check if CUDA is available
device = torch.device("cpu")
if torch.cuda.is_available():
    device = torch.device("cuda")

torch.set_default_device(device)
print(f"Using device = {torch.get_default_device()}")

torch.manual_seed(0)
random.seed(0)

# We can use "_" to represent an out-of-vocabulary character, that is, any character we are not handling in our model
allowed_characters = string.ascii_letters + " .,;'" + "_"
n_letters = len(allowed_characters)


# Find letter index from all_letters, e.g. "a" = 0
def letterToIndex(letter):
    # return our out-of-vocabulary character if we encounter a letter unknown to our model
    if letter not in allowed_characters:
        return allowed_characters.find("_")
    else:
        return allowed_characters.find(letter)


# Turn a line into a <line_length x 1 x n_letters>,
# or an array of one-hot letter vectors
def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


print(f"The name 'Ahn' becomes a tensor of size {tuple(lineToTensor('Ahn').shape)}")

#: made-up syllables of four "languages"; a name is two or three of them (a stand-in for data/names/*.txt)
SYLLABLES = {
    "Italian": ["ro", "ssi", "ni", "ca", "lo", "tti", "ve"],
    "Japanese": ["ka", "ta", "mo", "shi", "ya", "su", "hi"],
    "German": ["sch", "mid", "ber", "hof", "mann", "er", "tz"],
    "Polish": ["ski", "wicz", "cz", "ow", "rz", "ak", "szy"],
}


def synthetic_names(per_language, rng):
    """``{language: [names]}`` with ``per_language`` random names each, e.g. ``Tashika``."""
    return {
        label: ["".join(rng.choice(parts) for _ in range(rng.randint(2, 3))).capitalize() for _ in range(per_language)]
        for label, parts in SYLLABLES.items()
    }


class NamesDataset(Dataset):
    """Names, their one-hot tensors, their language labels and the label tensors, all made once up front."""

    def __init__(self, names_by_label):
        labels_set = set()  # set of all classes

        self.data = []
        self.data_tensors = []
        self.labels = []
        self.labels_tensors = []

        for label, lines in names_by_label.items():
            labels_set.add(label)
            for name in lines:
                self.data.append(name)
                self.data_tensors.append(lineToTensor(name))
                self.labels.append(label)

        # Cache the tensor representation of the labels
        self.labels_uniq = sorted(labels_set)
        for idx in range(len(self.labels)):
            temp_tensor = torch.tensor([self.labels_uniq.index(self.labels[idx])], dtype=torch.long)
            self.labels_tensors.append(temp_tensor)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        data_item = self.data[idx]
        data_label = self.labels[idx]
        data_tensor = self.data_tensors[idx]
        label_tensor = self.labels_tensors[idx]

        return label_tensor, data_tensor, data_label, data_item


alldata = NamesDataset(synthetic_names(10, random.Random(0)))
print(f"loaded {len(alldata)} items of data")
print(f"example = {alldata[0][2]}, {alldata[0][3]}")

train_set, test_set = torch.utils.data.random_split(
    alldata, [0.85, 0.15], generator=torch.Generator(device=device).manual_seed(2024)
)

print(f"train examples = {len(train_set)}, validation examples = {len(test_set)}")


class CharRNN(nn.Module):
    """An ``nn.RNN`` over the letters, its last hidden state mapped to log-probabilities of the languages."""

    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()

        self.rnn = nn.RNN(input_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, line_tensor):
        _rnn_out, hidden = self.rnn(line_tensor)
        output = self.h2o(hidden[0])
        output = self.softmax(output)

        return output


n_hidden = 32
rnn = CharRNN(n_letters, n_hidden, len(alldata.labels_uniq))
print(rnn)


def label_from_output(output, output_labels):
    _top_n, top_i = output.topk(1)
    label_i = top_i[0].item()
    return output_labels[label_i], label_i


input = lineToTensor("Albert")
output = rnn(input)  # this is equivalent to ``output = rnn.forward(input)``
print(label_from_output(output, alldata.labels_uniq))


def train(rnn, training_data, n_epoch=10, n_batch_size=64, report_every=50, learning_rate=0.2, criterion=None):
    """Learn on minibatches of training_data for n_epoch epochs; return the average batch loss of each epoch."""
    criterion = criterion or nn.NLLLoss()
    # Keep track of losses for plotting
    current_loss = 0
    all_losses = []
    rnn.train()
    optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)

    print(f"training on data set with n = {len(training_data)}")

    for iter in range(1, n_epoch + 1):
        rnn.zero_grad()  # clear the gradients

        # create some minibatches
        # we cannot use dataloaders because each of our names is a different length
        batches = list(range(len(training_data)))
        random.shuffle(batches)
        batches = np.array_split(batches, len(batches) // n_batch_size)

        for batch in batches:
            batch_loss = 0
            for i in batch:  # for each example in this batch
                (label_tensor, text_tensor, _label, _text) = training_data[i]
                output = rnn.forward(text_tensor)
                loss = criterion(output, label_tensor)
                batch_loss += loss

            # optimize parameters
            batch_loss.backward()
            nn.utils.clip_grad_norm_(rnn.parameters(), 3)
            optimizer.step()
            optimizer.zero_grad()

            current_loss += batch_loss.item() / len(batch)

        all_losses.append(current_loss / len(batches))
        if iter % report_every == 0:
            print(f"{iter} ({iter / n_epoch:.0%}): \t average batch loss = {all_losses[-1]:.4f}")
        current_loss = 0

    return all_losses


all_losses = train(rnn, train_set, n_epoch=2, n_batch_size=11, learning_rate=0.15, report_every=1)


def evaluate(rnn, testing_data, classes):
    """Return the row-normalised confusion matrix of the test data as a numpy array."""
    confusion = torch.zeros(len(classes), len(classes))

    rnn.eval()  # set to eval mode
    with torch.no_grad():  # do not record the gradients during eval phase
        for i in range(len(testing_data)):
            (_label_tensor, text_tensor, label, _text) = testing_data[i]
            output = rnn(text_tensor)
            _guess, guess_i = label_from_output(output, classes)
            label_i = classes.index(label)
            confusion[label_i][guess_i] += 1

    # Normalize by dividing every row by its sum
    for i in range(len(classes)):
        denom = confusion[i].sum()
        if denom > 0:
            confusion[i] = confusion[i] / denom

    return confusion.cpu().numpy()  # numpy uses cpu here so we need to use a cpu version


confusion = evaluate(rnn, test_set, classes=alldata.labels_uniq)
for label, row in zip(alldata.labels_uniq, confusion, strict=True):
    print(f"{label:>8s}: " + " ".join(f"{value:.2f}" for value in row))
print(f"done loss={all_losses[-1]:.4f} diagonal={np.trace(confusion):.2f}")
