"""Trains Kim's CNN sentence classifier (parallel convolutions of widths 3, 4, 5 over word embeddings, max-over-time
pooling, dropout, a max-norm constraint on the output layer) on synthetic movie-review polarity sentences, evaluating
on the dev split every test_interval steps and saving the best snapshot; then, like a second run of main.py with
-snapshot, -test and -predict, reloads the snapshot into a fresh model, re-evaluates the dev set and labels new text.

Modeled on: Shawn1993/cnn-text-classification-pytorch, main.py, train.py, model.py and mydatasets.py
(https://github.com/Shawn1993/cnn-text-classification-pytorch/blob/93415f08168a1ae60635320569f6eca0ae3a40bb/main.py,
https://github.com/Shawn1993/cnn-text-classification-pytorch/blob/93415f08168a1ae60635320569f6eca0ae3a40bb/train.py,
https://github.com/Shawn1993/cnn-text-classification-pytorch/blob/93415f08168a1ae60635320569f6eca0ae3a40bb/model.py,
https://github.com/Shawn1993/cnn-text-classification-pytorch/blob/93415f08168a1ae60635320569f6eca0ae3a40bb/mydatasets.py).

Kept: the `-device` (default -1) and `-no-cuda` options, `args.cuda = (not args.no_cuda) and
torch.cuda.is_available(); del args.no_cuda`; the model built on the CPU, a `-snapshot` read with
`cnn.load_state_dict(torch.load(args.snapshot, weights_only=True))` *before* `torch.cuda.set_device(args.device)` and
`cnn = cnn.cuda()` under `if args.cuda:`; `train.train` calling `model.cuda()` again under `if args.cuda:` and making
the optimizer after it; `model.train()` at every batch, `feature, target = feature.cuda(), target.cuda()` under
`if args.cuda:`; the max-norm rescale of `fc1.weight` in place under `torch.no_grad()`; the device accuracy tensors
`corrects`/`accuracy` read with `.item()` in the `sys.stdout.write('\\rBatch[...]')` log; `train.eval` with
`model.eval()`, `torch.no_grad()`, `reduction='sum'` and `.item()` sums (it leaves the model in eval mode, and the
next batch's `model.train()` undoes it); `save` writing `model.state_dict()` as `best_steps_{}.pt`; the main
script's reload of the newest best file with `weights_only=True` into the live (device) model; `predict` building
`x = torch.tensor([text_ids], dtype=torch.long)` on the host and moving it with `x.cuda()` under its `cuda_flag`;
the embedding's padding row zeroed with `.weight.data[0].fill_(0)`; `collate_fn` padding on the host to at least
min_len 5; the `Vocab` with `<pad>`, `<unk>` specials.
Changed where needed to run in one process: the three invocations of main.py (train; -snapshot -test; -snapshot
-predict) run one after another, with `args` an `argparse.Namespace` of the parser's options instead of
`parser.parse_args()`; the dataset stands in for `MRDataset` (same `__getitem__`), and the save_dir is a temporary
directory (the author's timestamp subfolder kept); the newest best file is picked by its step number rather than
its mtime (files written in the same second tie), the reload happens for the dev set as there is no test split, and
the parameter listing leaves out the temporary paths; clean_str's `" \( "` replacements are written `" ( "` (the
originals are invalid string escapes that newer Pythons warn about).

Shrunk: synthetic two-class "reviews" (5-14 words drawn from 24 positive, 24 negative and 40 neutral words, with a
negation word flipping some) instead of the rt-polarity files: 480 sentences, 10% dev; embed_dim 32, kernel_num 24,
batch 32, 6 epochs, test_interval 15, save_interval 25, log_interval 5; lr 0.004 instead of 0.001 so the few steps learn.
"""
import argparse
import datetime
import glob
import os
import random
import re
import sys
import tempfile
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


# ----------------------------------------------------------------------------- mydatasets.py

class Vocab:
    """Simple vocabulary class to replace legacy torchtext Field.vocab."""

    def __init__(self, counter, specials=('<pad>', '<unk>')):
        self.itos = list(specials)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        # Sort by frequency desc, then alphabetically for deterministic ordering
        for word, _ in sorted(counter.items(), key=lambda x: (-x[1], x[0])):
            if word not in self.stoi:
                self.stoi[word] = len(self.itos)
                self.itos.append(word)

    def __len__(self):
        return len(self.itos)


def clean_str(string):
    """
    Tokenization/string cleaning for all datasets except for SST.
    Original taken from https://github.com/yoonkim/CNN_sentence/blob/master/process_data.py
    """
    string = re.sub(r"[^A-Za-z0-9(),!?\'\`]", " ", string)
    string = re.sub(r"\'s", " \'s", string)
    string = re.sub(r"\'ve", " \'ve", string)
    string = re.sub(r"n\'t", " n\'t", string)
    string = re.sub(r"\'re", " \'re", string)
    string = re.sub(r"\'d", " \'d", string)
    string = re.sub(r"\'ll", " \'ll", string)
    string = re.sub(r",", " , ", string)
    string = re.sub(r"!", " ! ", string)
    string = re.sub(r"\(", " ( ", string)
    string = re.sub(r"\)", " ) ", string)
    string = re.sub(r"\?", " ? ", string)
    string = re.sub(r"\s{2,}", " ", string)
    return string.strip()


POS_WORDS = ['good', 'great', 'moving', 'funny', 'brilliant', 'charming', 'smart', 'warm', 'fresh', 'superb',
             'lovely', 'gripping', 'clever', 'touching', 'vivid', 'witty', 'tender', 'bold', 'rich', 'fine',
             'joyful', 'stunning', 'honest', 'sharp']
NEG_WORDS = ['bad', 'dull', 'boring', 'awful', 'flat', 'tedious', 'weak', 'silly', 'stale', 'messy', 'lame',
             'bland', 'clumsy', 'shallow', 'tired', 'empty', 'predictable', 'sloppy', 'cheap', 'poor', 'forced',
             'grating', 'hollow', 'murky']
NEUTRAL_WORDS = ['the', 'a', 'film', 'movie', 'story', 'plot', 'cast', 'director', 'and', 'is', 'of', 'with',
                 'its', 'this', 'it', 'script', 'scenes', 'ending', 'acting', 'music', 'camera', 'as', 'an', 'but',
                 'still', 'too', 'very', 'quite', 'rather', 'mostly', 'at', 'times', 'in', 'on', 'by', 'for', ',',
                 '!', 'feels', 'looks']


def make_examples(n, rng):
    """Synthetic rt-polarity: (tokens, 'positive'|'negative') pairs, cleaned with clean_str like the real files."""
    examples = []
    for _ in range(n):
        label = 'positive' if rng.random() < 0.5 else 'negative'
        length = rng.randint(5, 14)
        words = [rng.choice(NEUTRAL_WORDS) for _ in range(length)]
        n_sent = rng.randint(1, 3)
        for _ in range(n_sent):
            flip = rng.random() < 0.15
            polar = POS_WORDS if (label == 'positive') != flip else NEG_WORDS
            word = rng.choice(polar)
            if flip:
                word = "isn't " + word
            words.insert(rng.randint(0, len(words)), word)
        line = ' '.join(words)
        examples.append((clean_str(line).lower().split(), label))
    return examples


class MRDataset(Dataset):
    """Movie Review polarity dataset using standard PyTorch Dataset."""

    def __init__(self, examples, text_vocab, label_vocab):
        self.examples = examples  # list of (text_tokens, label_str)
        self.text_vocab = text_vocab
        self.label_vocab = label_vocab

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, idx):
        tokens, label = self.examples[idx]
        text_ids = [self.text_vocab.stoi.get(t, 1) for t in tokens]  # 1 = <unk>
        text_tensor = torch.tensor(text_ids, dtype=torch.long)
        label_id = self.label_vocab.stoi[label]
        label_tensor = torch.tensor(label_id, dtype=torch.long)
        return text_tensor, label_tensor

    @classmethod
    def splits(cls, dev_ratio=0.1, shuffle=True, n=480, seed=3):
        rng = random.Random(seed)
        examples = make_examples(n, rng)
        if shuffle:
            rng.shuffle(examples)

        # Build vocabularies from all data
        text_counter = Counter()
        label_counter = Counter()
        for tokens, label in examples:
            text_counter.update(tokens)
            label_counter[label] += 1

        text_vocab = Vocab(text_counter)
        label_vocab = Vocab(label_counter, specials=[])

        # Split into train/dev
        dev_index = -1 * int(dev_ratio * len(examples))
        train_examples = examples[:dev_index]
        dev_examples = examples[dev_index:]

        train_dataset = cls(train_examples, text_vocab, label_vocab)
        dev_dataset = cls(dev_examples, text_vocab, label_vocab)

        return train_dataset, dev_dataset, text_vocab, label_vocab


def collate_fn(batch, min_len=5):
    """Pad sequences in a batch to the same length (at least min_len for conv kernels)."""
    texts, labels = zip(*batch)
    max_len = max(max(len(t) for t in texts), min_len)
    padded = torch.zeros(len(texts), max_len, dtype=torch.long)
    for i, t in enumerate(texts):
        padded[i, :len(t)] = t
    labels = torch.stack(labels)
    return padded, labels


# ----------------------------------------------------------------------------- model.py

class CNN_Text(nn.Module):

    def __init__(self, args):
        super(CNN_Text, self).__init__()
        self.args = args

        V = args.embed_num
        D = args.embed_dim
        C = args.class_num
        Ci = 1
        Co = args.kernel_num
        Ks = args.kernel_sizes

        self.embed = nn.Embedding(V, D, padding_idx=0)
        # Kim's paper: uniform[-0.25, 0.25] initialization for random embeddings
        nn.init.uniform_(self.embed.weight, -0.25, 0.25)
        self.embed.weight.data[0].fill_(0)  # padding stays zero

        self.convs = nn.ModuleList([nn.Conv2d(Ci, Co, (K, D)) for K in Ks])
        self.dropout = nn.Dropout(args.dropout)
        self.fc1 = nn.Linear(len(Ks) * Co, C)

        if self.args.static:
            self.embed.weight.requires_grad = False

    def forward(self, x):
        x = self.embed(x)  # (N, W, D)

        x = x.unsqueeze(1)  # (N, Ci, W, D)

        x = [F.relu(conv(x)).squeeze(3) for conv in self.convs]  # [(N, Co, W), ...]*len(Ks)

        x = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in x]  # [(N, Co), ...]*len(Ks)

        x = torch.cat(x, 1)

        x = self.dropout(x)  # (N, len(Ks)*Co)
        logit = self.fc1(x)  # (N, C)
        return logit


# ----------------------------------------------------------------------------- train.py

def train(train_iter, dev_iter, model, args):
    if args.cuda:
        model.cuda()

    if getattr(args, 'optimizer', 'adam') == 'adadelta':
        optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr, rho=0.95)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    steps = 0
    best_acc = 0
    last_step = 0
    model.train()
    for epoch in range(1, args.epochs + 1):
        for batch in train_iter:
            model.train()
            feature, target = batch
            if args.cuda:
                feature, target = feature.cuda(), target.cuda()

            optimizer.zero_grad()
            logit = model(feature)
            loss = F.cross_entropy(logit, target)
            loss.backward()
            optimizer.step()

            # Kim's paper: L2 weight constraint on fc layer (rescale if norm > max_norm)
            with torch.no_grad():
                for name, param in model.named_parameters():
                    if 'fc1.weight' in name:
                        norms = param.norm(2, dim=-1, keepdim=True)
                        desired = torch.clamp(norms, max=args.max_norm)
                        param.mul_(desired / (norms + 1e-8))

            steps += 1
            if steps % args.log_interval == 0:
                corrects = (torch.max(logit, 1)[1] == target).sum()
                accuracy = 100.0 * corrects / feature.size(0)
                sys.stdout.write(
                    '\rBatch[{}] - loss: {:.6f}  acc: {:.4f}%({}/{})'.format(steps,
                                                                             loss.item(),
                                                                             accuracy.item(),
                                                                             corrects.item(),
                                                                             feature.size(0)))
            if steps % args.test_interval == 0:
                dev_acc = eval(dev_iter, model, args)
                if dev_acc > best_acc:
                    best_acc = dev_acc
                    last_step = steps
                    if args.save_best:
                        save(model, args.save_dir, 'best', steps)
                else:
                    if steps - last_step >= args.early_stop:
                        print('early stop by {} steps, best acc: {:.4f}%'.format(
                            args.early_stop, best_acc))
                        return best_acc
            elif steps % args.save_interval == 0:
                save(model, args.save_dir, 'snapshot', steps)

    return best_acc


def eval(data_iter, model, args):
    model.eval()
    corrects, avg_loss = 0, 0
    total = 0
    with torch.no_grad():
        for batch in data_iter:
            feature, target = batch
            if args.cuda:
                feature, target = feature.cuda(), target.cuda()

            logit = model(feature)
            loss = F.cross_entropy(logit, target, reduction='sum')

            avg_loss += loss.item()
            corrects += (torch.max(logit, 1)[1] == target).sum().item()
            total += target.size(0)

    avg_loss /= total
    accuracy = 100.0 * corrects / total
    print('\nEvaluation - loss: {:.6f}  acc: {:.4f}%({}/{}) \n'.format(avg_loss,
                                                                       accuracy,
                                                                       corrects,
                                                                       total))
    return accuracy


def predict(text, model, text_vocab, label_vocab, cuda_flag):
    assert isinstance(text, str)
    model.eval()
    tokens = clean_str(text).lower().split()
    text_ids = [text_vocab.stoi.get(t, 1) for t in tokens]  # 1 = <unk>
    x = torch.tensor([text_ids], dtype=torch.long)
    if cuda_flag:
        x = x.cuda()
    with torch.no_grad():
        output = model(x)
    _, predicted = torch.max(output, 1)
    return label_vocab.itos[predicted.item()]


def save(model, save_dir, save_prefix, steps):
    if not os.path.isdir(save_dir):
        os.makedirs(save_dir)
    save_prefix = os.path.join(save_dir, save_prefix)
    save_path = '{}_steps_{}.pt'.format(save_prefix, steps)
    torch.save(model.state_dict(), save_path)


# ----------------------------------------------------------------------------- main.py

def parse_args(**overrides):
    # the options of main.py's parser (learning, data, model, device, option), shrunk where noted
    args = argparse.Namespace(
        lr=0.004, epochs=6, batch_size=32, log_interval=5, test_interval=15, save_interval=25,
        save_dir=os.path.join(tempfile.mkdtemp(), 'snapshot'), early_stop=1000, save_best=True,
        dataset='MR', no_phrases=False, shuffle=False,
        dropout=0.5, max_norm=3.0, embed_dim=32, kernel_num=24, kernel_sizes='3,4,5', static=False,
        optimizer='adam',
        device=-1, no_cuda=False,
        snapshot=None, predict=None, test=False)
    for k, v in overrides.items():
        setattr(args, k, v)
    return args


def main(args, datasets):
    train_dataset, dev_dataset, text_vocab, label_vocab = datasets
    test_dataset = None

    train_iter = DataLoader(train_dataset, batch_size=args.batch_size,
                            shuffle=True, collate_fn=collate_fn)
    dev_iter = DataLoader(dev_dataset, batch_size=len(dev_dataset),
                          shuffle=False, collate_fn=collate_fn)
    test_iter = None

    # update args and print
    args.embed_num = len(text_vocab)
    args.class_num = len(label_vocab)
    args.cuda = (not args.no_cuda) and torch.cuda.is_available(); del args.no_cuda
    args.kernel_sizes = [int(k) for k in args.kernel_sizes.split(',')]
    args.save_dir = os.path.join(args.save_dir, datetime.datetime.now().strftime('%Y-%m-%d_%H-%M-%S'))

    print("\nParameters:")
    for attr, value in sorted(args.__dict__.items()):
        if attr in ('save_dir', 'snapshot'):
            continue  # temporary paths: left out so that the output repeats
        print("\t{}={}".format(attr.upper(), value))

    # model
    cnn = CNN_Text(args)
    if args.snapshot is not None:
        print('\nLoading model from {}...'.format(os.path.basename(args.snapshot)))
        cnn.load_state_dict(torch.load(args.snapshot, weights_only=True))

    if args.cuda:
        torch.cuda.set_device(args.device)
        cnn = cnn.cuda()

    # train or predict
    if args.predict is not None:
        label = predict(args.predict, cnn, text_vocab, label_vocab, args.cuda)
        print('\n[Text]  {}\n[Label] {}\n'.format(args.predict, label))
    elif args.test:
        try:
            print("\n--- Dev Set ---")
            eval(dev_iter, cnn, args)
            if test_iter is not None:
                print("--- Test Set ---")
                eval(test_iter, cnn, args)
        except Exception as e:
            print("\nSorry. The test dataset doesn't exist.\n")
    else:
        print()
        best_acc = train(train_iter, dev_iter, cnn, args)
        best_files = glob.glob(os.path.join(args.save_dir, 'best_steps_*.pt'))
        if best_files:
            best_path = max(best_files, key=lambda p: int(p.rsplit('_', 1)[1][:-3]))
            print('\nLoading best model from {}...'.format(os.path.basename(best_path)))
            cnn.load_state_dict(torch.load(best_path, weights_only=True))
            print("\n--- Dev Set (best model) ---")
            eval(dev_iter, cnn, args)
        print('best acc: {:.4f}%'.format(best_acc))
        return best_path


if __name__ == '__main__':
    torch.manual_seed(0)
    random.seed(0)
    print("\nLoading data...")
    datasets = MRDataset.splits()
    print('MR (synthetic): train={}, dev={}'.format(len(datasets[0]), len(datasets[1])))
    best_path = main(parse_args(), datasets)
    main(parse_args(snapshot=best_path, test=True), datasets)
    main(parse_args(snapshot=best_path, predict="a charming , witty film with a superb cast"), datasets)
    main(parse_args(snapshot=best_path, predict="the plot is dull and the acting isn't good"), datasets)
    print('done')
