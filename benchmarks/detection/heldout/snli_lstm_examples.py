"""Natural language inference with a shared bidirectional LSTM encoder, on a synthetic premise/hypothesis corpus.

Modeled on: pytorch/examples, legacy/snli/train.py, model.py and util.py
(https://github.com/pytorch/examples/tree/main/legacy/snli).
Kept: the device logic (``torch.cuda.set_device(args.gpu)`` and ``torch.device('cuda:{}'.format(args.gpu))`` when
CUDA is available, else ``mps`` when available, else ``cpu``); the torchtext-style pipeline in which the iterators
(``BucketIterator.splits(..., batch_size=..., device=device)``) numericalize every batch straight onto the device
and hand out ``batch.premise``, ``batch.hypothesis`` (sequence-first) and ``batch.label``; the word-vector cache
(``torch.load(args.vector_cache)`` when the file exists, else build the vectors and ``torch.save`` them);
``config.n_cells`` doubled for the bidirectional encoder; the resume path ``model = torch.load(args.resume_snapshot,
map_location=device)`` of a whole pickled model, else ``SNLIClassifier(config)``, ``model.embed.weight.data.copy_(
inputs.vocab.vectors)`` and ``model.to(device)`` inside ``if args.word_vectors:`` as in the original; the model
(``Bottle``/``Linear`` mix-in, ``Encoder`` whose initial states are ``inputs.new_zeros(state_shape)``, fixed
embeddings via ``.detach()``, projection, 4-layer MLP head); the loop (``model.train(); opt.zero_grad()`` each
iteration, accuracy with ``torch.max(answer, 1)[1].view(batch.label.size()) == batch.label``, periodic
``torch.save(model, snapshot_path)`` of the whole model with the older snapshots removed by ``glob``, periodic
``model.eval(); dev_iter.init_epoch()`` and ``torch.no_grad()`` validation keeping the best snapshot). Shrunk: a
made-up corpus (premises of 4-8 words from a 24-word vocabulary; hypotheses copied, reversed or unrelated give
entailment, neutral or contradiction, from a fixed seed) instead of SNLI with spaCy, random 16-dimensional "word
vectors" instead of GloVe, sizes 16, batch 16, 3 epochs, validation every 6 iterations; a second run resumes from the
best snapshot for one more epoch (``weights_only=False`` added to that ``torch.load``, which PyTorch 2.6+ needs for
a pickled module); the elapsed-time column left out of the log lines (so the output repeats); settings as constant
namespaces instead of argparse; all files under a temporary folder.
"""

import glob
import os
import random
import tempfile
import time
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.optim as O


# ---------------------------------------------------------------------------------------------------------------
# model.py
# ---------------------------------------------------------------------------------------------------------------
class Bottle(nn.Module):

    def forward(self, input):
        if len(input.size()) <= 2:
            return super(Bottle, self).forward(input)
        size = input.size()[:2]
        out = super(Bottle, self).forward(input.view(size[0]*size[1], -1))
        return out.view(size[0], size[1], -1)


class Linear(Bottle, nn.Linear):
    pass


class Encoder(nn.Module):

    def __init__(self, config):
        super(Encoder, self).__init__()
        self.config = config
        input_size = config.d_proj if config.projection else config.d_embed
        dropout = 0 if config.n_layers == 1 else config.dp_ratio
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=config.d_hidden,
                           num_layers=config.n_layers, dropout=dropout,
                           bidirectional=config.birnn)

    def forward(self, inputs):
        batch_size = inputs.size()[1]
        state_shape = self.config.n_cells, batch_size, self.config.d_hidden
        h0 = c0 = inputs.new_zeros(state_shape)
        outputs, (ht, ct) = self.rnn(inputs, (h0, c0))
        return ht[-1] if not self.config.birnn else ht[-2:].transpose(0, 1).contiguous().view(batch_size, -1)


class SNLIClassifier(nn.Module):

    def __init__(self, config):
        super(SNLIClassifier, self).__init__()
        self.config = config
        self.embed = nn.Embedding(config.n_embed, config.d_embed)
        self.projection = Linear(config.d_embed, config.d_proj)
        self.encoder = Encoder(config)
        self.dropout = nn.Dropout(p=config.dp_ratio)
        self.relu = nn.ReLU()
        seq_in_size = 2*config.d_hidden
        if self.config.birnn:
            seq_in_size *= 2
        lin_config = [seq_in_size]*2
        self.out = nn.Sequential(
            Linear(*lin_config),
            self.relu,
            self.dropout,
            Linear(*lin_config),
            self.relu,
            self.dropout,
            Linear(*lin_config),
            self.relu,
            self.dropout,
            Linear(seq_in_size, config.d_out))

    def forward(self, batch):
        prem_embed = self.embed(batch.premise)
        hypo_embed = self.embed(batch.hypothesis)
        if self.config.fix_emb:
            prem_embed = prem_embed.detach()
            hypo_embed = hypo_embed.detach()
        if self.config.projection:
            prem_embed = self.relu(self.projection(prem_embed))
            hypo_embed = self.relu(self.projection(hypo_embed))
        premise = self.encoder(prem_embed)
        hypothesis = self.encoder(hypo_embed)
        scores = self.out(torch.cat([premise, hypothesis], 1))
        return scores


# ---------------------------------------------------------------------------------------------------------------
# util.py
# ---------------------------------------------------------------------------------------------------------------
def makedirs(name):
    """helper function for python 2 and 3 to call os.makedirs()
       avoiding an error if the directory to be created already exists"""

    import os, errno

    try:
        os.makedirs(name)
    except OSError as ex:
        if ex.errno == errno.EEXIST and os.path.isdir(name):
            # ignore existing directory
            pass
        else:
            # a different error happened
            raise


def get_args(root, resume_snapshot=''):
    return SimpleNamespace(
        epochs=3, batch_size=16, d_embed=16, d_proj=16, d_hidden=16, n_layers=1, log_every=3, lr=.003,
        dev_every=6, save_every=6, dp_ratio=0.2, birnn=True, lower=True, projection=True, fix_emb=True, gpu=0,
        save_path=os.path.join(root, 'results'),
        vector_cache=os.path.join(root, '.vector_cache/input_vectors.pt'),
        word_vectors='random.16d', resume_snapshot=resume_snapshot, dry_run=False,
    )


# ---------------------------------------------------------------------------------------------------------------
# A stand-in for the torchtext.legacy pieces the example uses (Field, Vocab, SNLI splits, BucketIterator)
# ---------------------------------------------------------------------------------------------------------------
WORDS = ["a", "the", "man", "woman", "child", "dog", "cat", "plays", "eats", "sees", "runs", "with", "in", "park",
         "ball", "food", "red", "small", "big", "garden", "street", "sleeps", "old", "young"]
LABELS = ["entailment", "neutral", "contradiction"]


class Vocab:
    def __init__(self, tokens, specials):
        self.itos = list(specials) + sorted(set(tokens))
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.vectors = None

    def __len__(self):
        return len(self.itos)

    def load_vectors(self, name):
        dim = int(name.split('.')[-1].rstrip('d'))
        g = torch.Generator().manual_seed(7)
        self.vectors = torch.randn(len(self.itos), dim, generator=g) * 0.5


class Field:
    def __init__(self, sequential=True, lower=False):
        self.sequential = sequential
        self.lower = lower
        self.vocab = None

    def build_vocab(self, *datasets):
        tokens = []
        for ds in datasets:
            for ex in ds:
                if self.sequential:
                    tokens += ex.premise + ex.hypothesis
                else:
                    tokens.append(ex.label)
        specials = ['<unk>', '<pad>'] if self.sequential else ['<unk>']
        self.vocab = Vocab(tokens, specials)

    def process(self, batch, device):
        # numericalize and pad, straight onto the device, as torchtext's Field.process does
        if self.sequential:
            max_len = max(len(x) for x in batch)
            arr = [[self.vocab.stoi.get(w, 0) for w in x] + [1] * (max_len - len(x)) for x in batch]
            return torch.tensor(arr, dtype=torch.long, device=device).t().contiguous()
        return torch.tensor([self.vocab.stoi[x] for x in batch], dtype=torch.long, device=device)


def make_split(n, rng):
    examples = []
    for _ in range(n):
        premise = [rng.choice(WORDS) for _ in range(rng.randint(4, 8))]
        kind = rng.randrange(3)
        if kind == 0:
            hypothesis = premise[:rng.randint(3, len(premise))]
        elif kind == 1:
            hypothesis = premise[::-1]
        else:
            hypothesis = [rng.choice(WORDS) for _ in range(rng.randint(4, 8))]
        examples.append(SimpleNamespace(premise=premise, hypothesis=hypothesis, label=LABELS[kind]))
    return examples


class Batch:
    def __init__(self, examples, inputs, answers, device):
        self.batch_size = len(examples)
        self.premise = inputs.process([ex.premise for ex in examples], device)
        self.hypothesis = inputs.process([ex.hypothesis for ex in examples], device)
        self.label = answers.process([ex.label for ex in examples], device)


class BucketIterator:
    def __init__(self, dataset, batch_size, device, inputs, answers, train, seed):
        self.dataset, self.batch_size, self.device = dataset, batch_size, device
        self.inputs, self.answers, self.train = inputs, answers, train
        self.rng = random.Random(seed)
        self.order = list(range(len(dataset)))

    @classmethod
    def splits(cls, datasets, batch_size, device, inputs, answers):
        return tuple(cls(ds, batch_size, device, inputs, answers, train=(i == 0), seed=i)
                     for i, ds in enumerate(datasets))

    def init_epoch(self):
        self.order = list(range(len(self.dataset)))
        if self.train:
            self.rng.shuffle(self.order)

    def __len__(self):
        return (len(self.dataset) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        for start in range(0, len(self.order), self.batch_size):
            chunk = [self.dataset[i] for i in self.order[start:start + self.batch_size]]
            # bucket: sort the batch by premise length, longest first
            chunk.sort(key=lambda ex: len(ex.premise), reverse=True)
            yield Batch(chunk, self.inputs, self.answers, self.device)


# ---------------------------------------------------------------------------------------------------------------
# train.py
# ---------------------------------------------------------------------------------------------------------------
def train_main(args):
    if torch.cuda.is_available():
        torch.cuda.set_device(args.gpu)
        device = torch.device('cuda:{}'.format(args.gpu))
    elif torch.backends.mps.is_available():
        device = torch.device('mps')
    else:
        device = torch.device('cpu')

    inputs = Field(lower=args.lower)
    answers = Field(sequential=False)

    rng = random.Random(1234)
    train, dev, test = make_split(192, rng), make_split(48, rng), make_split(48, rng)

    inputs.build_vocab(train, dev, test)
    if args.word_vectors:
        if os.path.isfile(args.vector_cache):
            inputs.vocab.vectors = torch.load(args.vector_cache)
        else:
            inputs.vocab.load_vectors(args.word_vectors)
            makedirs(os.path.dirname(args.vector_cache))
            torch.save(inputs.vocab.vectors, args.vector_cache)
    answers.build_vocab(train)

    train_iter, dev_iter, test_iter = BucketIterator.splits(
                (train, dev, test), batch_size=args.batch_size, device=device, inputs=inputs, answers=answers)

    config = args
    config.n_embed = len(inputs.vocab)
    config.d_out = len(answers.vocab)
    config.n_cells = config.n_layers

    # double the number of cells for bidirectional networks
    if config.birnn:
        config.n_cells *= 2

    if args.resume_snapshot:
        model = torch.load(args.resume_snapshot, map_location=device, weights_only=False)
    else:
        model = SNLIClassifier(config)
        if args.word_vectors:
            model.embed.weight.data.copy_(inputs.vocab.vectors)
            model.to(device)

    criterion = nn.CrossEntropyLoss()
    opt = O.Adam(model.parameters(), lr=args.lr)

    iterations = 0
    start = time.time()
    best_dev_acc = -1
    header = 'Epoch Iteration Progress    (%Epoch)   Loss   Dev/Loss     Accuracy  Dev/Accuracy'
    dev_log_template = ' '.join('{:>5.0f},{:>9.0f},{:>5.0f}/{:<5.0f} {:>7.0f}%,{:>8.6f},{:8.6f},{:12.4f},{:12.4f}'.split(','))
    log_template =     ' '.join('{:>5.0f},{:>9.0f},{:>5.0f}/{:<5.0f} {:>7.0f}%,{:>8.6f},{},{:12.4f},{}'.split(','))
    makedirs(args.save_path)
    print(header)

    for epoch in range(args.epochs):
        train_iter.init_epoch()
        n_correct, n_total = 0, 0
        for batch_idx, batch in enumerate(train_iter):

            # switch model to training mode, clear gradient accumulators
            model.train(); opt.zero_grad()

            iterations += 1

            # forward pass
            answer = model(batch)

            # calculate accuracy of predictions in the current batch
            n_correct += (torch.max(answer, 1)[1].view(batch.label.size()) == batch.label).sum().item()
            n_total += batch.batch_size
            train_acc = 100. * n_correct/n_total

            # calculate loss of the network output with respect to training labels
            loss = criterion(answer, batch.label)

            # backpropagate and update optimizer learning rate
            loss.backward(); opt.step()

            # checkpoint model periodically
            if iterations % args.save_every == 0:
                snapshot_prefix = os.path.join(args.save_path, 'snapshot')
                snapshot_path = snapshot_prefix + '_acc_{:.4f}_loss_{:.6f}_iter_{}_model.pt'.format(train_acc, loss.item(), iterations)
                torch.save(model, snapshot_path)
                for f in glob.glob(snapshot_prefix + '*'):
                    if f != snapshot_path:
                        os.remove(f)

            # evaluate performance on validation set periodically
            if iterations % args.dev_every == 0:

                # switch model to evaluation mode
                model.eval(); dev_iter.init_epoch()

                # calculate accuracy on validation set
                n_dev_correct, dev_loss = 0, 0
                with torch.no_grad():
                    for dev_batch_idx, dev_batch in enumerate(dev_iter):
                        answer = model(dev_batch)
                        n_dev_correct += (torch.max(answer, 1)[1].view(dev_batch.label.size()) == dev_batch.label).sum().item()
                        dev_loss = criterion(answer, dev_batch.label)
                dev_acc = 100. * n_dev_correct / len(dev)

                print(dev_log_template.format(
                    epoch, iterations, 1+batch_idx, len(train_iter),
                    100. * (1+batch_idx) / len(train_iter), loss.item(), dev_loss.item(), train_acc, dev_acc))

                # update best validation set accuracy
                if dev_acc > best_dev_acc:

                    # found a model with better validation set accuracy

                    best_dev_acc = dev_acc
                    snapshot_prefix = os.path.join(args.save_path, 'best_snapshot')
                    snapshot_path = snapshot_prefix + '_devacc_{}_devloss_{}__iter_{}_model.pt'.format(dev_acc, dev_loss.item(), iterations)

                    # save model, delete previous 'best_snapshot' files
                    torch.save(model, snapshot_path)
                    for f in glob.glob(snapshot_prefix + '*'):
                        if f != snapshot_path:
                            os.remove(f)

            elif iterations % args.log_every == 0:

                # print progress message
                print(log_template.format(
                    epoch, iterations, 1+batch_idx, len(train_iter),
                    100. * (1+batch_idx) / len(train_iter), loss.item(), ' '*8, n_correct/n_total*100, ' '*12))
            if args.dry_run:
                break
    return best_dev_acc


if __name__ == '__main__':
    torch.manual_seed(0)
    root = tempfile.mkdtemp()
    best = train_main(get_args(root))
    print('best dev accuracy {:.4f}'.format(best))

    # resume from the best snapshot (the example's --resume_snapshot)
    best_snapshot = sorted(glob.glob(os.path.join(root, 'results', 'best_snapshot*')))[0]
    resume_args = get_args(root, resume_snapshot=best_snapshot)
    resume_args.epochs = 1
    best = train_main(resume_args)
    print('resumed: best dev accuracy {:.4f}'.format(best))
    print('done')
