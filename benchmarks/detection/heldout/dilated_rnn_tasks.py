"""Trains dilated recurrent networks (DRNN: a stack of GRU layers whose layer i runs on every 2**i-th step, done by
zero-padding the sequence to a multiple of the dilation, interleaving the sub-sequences into the batch dimension,
running the cell once and splitting the outputs back) on two of the paper's tasks: the copy-memory task (recall 5
digits after a long blank, accuracy over all steps) and character-level language modelling (bits per character with
an effective-history window, SGD with learning-rate decay on plateau, the model saved whole when the validation
loss improves), then reports the test loss.

Modeled on: zalandoresearch/pytorch-dilated-rnn, drnn.py, copy_memory/copymem_test.py, copy_memory/model.py,
char_rnn/char_rnn_test.py, char_rnn/model.py and char_rnn/utils.py
(https://github.com/zalandoresearch/pytorch-dilated-rnn/blob/c31bcce251ee827301ac29bc3b5f845b148cf02f/drnn.py,
https://github.com/zalandoresearch/pytorch-dilated-rnn/blob/394958977d367dfee0da20d0ffa7084c5a44486c/copy_memory/copymem_test.py,
https://github.com/zalandoresearch/pytorch-dilated-rnn/blob/f97a325a688e1d2cbf06e6b2ccf682d73a8c054a/char_rnn/char_rnn_test.py,
https://github.com/zalandoresearch/pytorch-dilated-rnn/blob/902bdb411771b6a43ccd5f2aa3f05f7de4e53a28/char_rnn/utils.py).

Kept: drnn.py's module-level `use_cuda = torch.cuda.is_available()` and its two moves: the padding
`zeros_ = torch.zeros(...)` followed by `zeros_ = zeros_.cuda()` under `if use_cuda:` in `_pad_inputs`, and
`init_hidden` building `autograd.Variable(torch.zeros(batch_size, hidden_dim))` then `.cuda()` under `if use_cuda:`
(the LSTM memory too); the `batch_first` transposes and the hidden-state path through `_prepare_inputs`. Copy memory:
`data_generator` building x/y on the host with `torch.from_numpy(...)`, `torch.zeros`, `torch.ones` and
`Variable(...)`; `if torch.cuda.is_available():` `model.cuda()` and `.cuda()` on train_x, train_y, test_x and test_y
(whatever `--cuda` says, as in the original); RMSprop made after the move; `train` with `model.train()`, batches
sliced from the device tensors, `pred.eq(...).cpu().sum()` for the accuracy, the loss accumulated as a tensor
(`total_loss += loss`), `clip_grad_norm` called before `backward()` (the author's order); `evaluate` with
`model.eval()` and no `torch.no_grad()`. Char LM: utils' module-level `cuda = torch.cuda.is_available()` and
`char_tensor` returning `tensor.cuda() if cuda else tensor`; `batchify(data, batch_size, args)` moving with
`data.cuda()` under `if args.cuda:`; `if args.cuda: model.cuda()`; the optimizer from `getattr(optim, args.optim)`
made after the move; `get_batch` slicing the device data; `evaluate` with `model.eval()` (no no_grad) and
`total_loss += loss.data * final_output.size(0)`; `train` with `model.train()`, clip then step, `total_loss +=
loss.data`; the lr decay rewriting `param_group['lr']`; `save(model)` as `torch.save(model, 'model.pt')`.

Changed for a current PyTorch: `loss.data[0]`/`total_loss[0]` on 0-dim tensors are `.item()`, `clip_grad_norm` is
`clip_grad_norm_`, the `global lr` of `main` is a dict entry, and drnn.py's `_split_outputs` uses `//` (it already does in this version).
Changed to run here: the two module-level scripts are the functions `copy_memory_main()` and `char_rnn_main()`; the
char LM's `--cuda` (action='store_false', so True by default, which makes `model.cuda()` fail on a machine without
a GPU) is followed by `args.cuda = args.cuda and torch.cuda.is_available()`; the char model's QRNN cell (from the
torchqrnn package, which needs CUDA) is a GRU cell; `observations.ptb` is replaced by synthetic text built from a
small word list; the timing columns are not printed; 'model.pt' is written in a temporary folder.
Shrunk: copy memory with blank T=20, 5 digits, 128 training and 64 test sequences, 4 levels of 10 units, 2 epochs,
batch 32; char LM with about 3000/600/600 characters, batch 4, seq_len 42 and validseqlen 30, embeddings 16, 3 levels
of 32 units, 2 epochs, log interval 4.
"""
import argparse
import math
import os
import tempfile
from collections import Counter

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable


# ----------------------------------------------------------------------------- drnn.py

use_cuda = torch.cuda.is_available()


class DRNN(nn.Module):

    def __init__(self, n_input, n_hidden, n_layers, dropout=0, cell_type='GRU', batch_first=False):

        super(DRNN, self).__init__()

        self.dilations = [2 ** i for i in range(n_layers)]
        self.cell_type = cell_type
        self.batch_first = batch_first

        layers = []
        if self.cell_type == "GRU":
            cell = nn.GRU
        elif self.cell_type == "RNN":
            cell = nn.RNN
        elif self.cell_type == "LSTM":
            cell = nn.LSTM
        else:
            raise NotImplementedError

        for i in range(n_layers):
            if i == 0:
                c = cell(n_input, n_hidden, dropout=dropout)
            else:
                c = cell(n_hidden, n_hidden, dropout=dropout)
            layers.append(c)
        self.cells = nn.Sequential(*layers)

    def forward(self, inputs, hidden=None):
        if self.batch_first:
            inputs = inputs.transpose(0, 1)
        outputs = []
        for i, (cell, dilation) in enumerate(zip(self.cells, self.dilations)):
            if hidden is None:
                inputs, _ = self.drnn_layer(cell, inputs, dilation)
            else:
                inputs, hidden[i] = self.drnn_layer(cell, inputs, dilation, hidden[i])

            outputs.append(inputs[-dilation:])

        if self.batch_first:
            inputs = inputs.transpose(0, 1)
        return inputs, outputs

    def drnn_layer(self, cell, inputs, rate, hidden=None):

        n_steps = len(inputs)
        batch_size = inputs[0].size(0)
        hidden_size = cell.hidden_size

        inputs, dilated_steps = self._pad_inputs(inputs, n_steps, rate)
        dilated_inputs = self._prepare_inputs(inputs, rate)

        if hidden is None:
            dilated_outputs, hidden = self._apply_cell(dilated_inputs, cell, batch_size, rate, hidden_size)
        else:
            hidden = self._prepare_inputs(hidden, rate)
            dilated_outputs, hidden = self._apply_cell(dilated_inputs, cell, batch_size, rate, hidden_size,
                                                       hidden=hidden)

        splitted_outputs = self._split_outputs(dilated_outputs, rate)
        outputs = self._unpad_outputs(splitted_outputs, n_steps)

        return outputs, hidden

    def _apply_cell(self, dilated_inputs, cell, batch_size, rate, hidden_size, hidden=None):
        if hidden is None:
            if self.cell_type == 'LSTM':
                c, m = self.init_hidden(batch_size * rate, hidden_size)
                hidden = (c.unsqueeze(0), m.unsqueeze(0))
            else:
                hidden = self.init_hidden(batch_size * rate, hidden_size).unsqueeze(0)

        dilated_outputs, hidden = cell(dilated_inputs, hidden)

        return dilated_outputs, hidden

    def _unpad_outputs(self, splitted_outputs, n_steps):
        return splitted_outputs[:n_steps]

    def _split_outputs(self, dilated_outputs, rate):
        batchsize = dilated_outputs.size(1) // rate

        blocks = [dilated_outputs[:, i * batchsize: (i + 1) * batchsize, :] for i in range(rate)]

        interleaved = torch.stack((blocks)).transpose(1, 0).contiguous()
        interleaved = interleaved.view(dilated_outputs.size(0) * rate,
                                       batchsize,
                                       dilated_outputs.size(2))
        return interleaved

    def _pad_inputs(self, inputs, n_steps, rate):
        iseven = (n_steps % rate) == 0

        if not iseven:
            dilated_steps = n_steps // rate + 1

            zeros_ = torch.zeros(dilated_steps * rate - inputs.size(0),
                                 inputs.size(1),
                                 inputs.size(2))
            if use_cuda:
                zeros_ = zeros_.cuda()

            inputs = torch.cat((inputs, autograd.Variable(zeros_)))
        else:
            dilated_steps = n_steps // rate

        return inputs, dilated_steps

    def _prepare_inputs(self, inputs, rate):
        dilated_inputs = torch.cat([inputs[j::rate, :, :] for j in range(rate)], 1)
        return dilated_inputs

    def init_hidden(self, batch_size, hidden_dim):
        hidden = autograd.Variable(torch.zeros(batch_size, hidden_dim))
        if use_cuda:
            hidden = hidden.cuda()
        if self.cell_type == "LSTM":
            memory = autograd.Variable(torch.zeros(batch_size, hidden_dim))
            if use_cuda:
                memory = memory.cuda()
            return (hidden, memory)
        else:
            return hidden


# ----------------------------------------------------------------------------- copy_memory

def copy_data_generator(T, mem_length, b_size):
    seq = torch.from_numpy(np.random.randint(1, 9, size=(b_size, mem_length))).float()
    zeros = torch.zeros((b_size, T))
    marker = 9 * torch.ones((b_size, mem_length + 1))
    placeholders = torch.zeros((b_size, mem_length))

    x = torch.cat((seq, zeros[:, :-1], marker), 1)
    y = torch.cat((placeholders, zeros, seq), 1).long()

    x, y = Variable(x), Variable(y)
    return x, y


class DRNN_Copy(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, dropout, output_size):
        super(DRNN_Copy, self).__init__()
        self.drnn = DRNN(cell_type='GRU', dropout=dropout, n_hidden=hidden_size,
                         n_input=input_size, n_layers=num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, output_size)
        self.init_weights()

    def init_weights(self):
        self.linear.weight.data.normal_(0, 0.01)

    def forward(self, x):  # x: (batch, steps, input_size)
        y1, _ = self.drnn(x)  # y1: (batch, steps, hidden_size)
        return self.linear(y1)  # (batch, steps, output_size)


def copy_memory_main():
    parser = argparse.ArgumentParser(description='Sequence Modeling - Copying Memory Task')
    parser.add_argument('--batch_size', type=int, default=32, metavar='N')
    parser.add_argument('--cuda', action='store_false', help='use CUDA (default: True)')
    parser.add_argument('--dropout', type=float, default=0.0)
    parser.add_argument('--clip', type=float, default=1.0)
    parser.add_argument('--epochs', type=int, default=2)
    parser.add_argument('--levels', type=int, default=4)
    parser.add_argument('--blank_len', type=int, default=20, metavar='N')
    parser.add_argument('--seq_len', type=int, default=5)
    parser.add_argument('--log-interval', type=int, default=2, metavar='N')
    parser.add_argument('--lr', type=float, default=5e-3)
    parser.add_argument('--optim', type=str, default='RMSprop')
    parser.add_argument('--nhid', type=int, default=10)
    parser.add_argument('--seed', type=int, default=1111)
    args = parser.parse_args([])

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if torch.cuda.is_available():
        if not args.cuda:
            print("WARNING: You have a CUDA device, so you should probably run with --cuda")

    batch_size = args.batch_size
    seq_len = args.seq_len
    epochs = args.epochs
    T = args.blank_len
    n_classes = 10  # Digits 0 - 9
    n_train = 128
    n_test = 64
    dropout = args.dropout
    input_size = 1
    hidden_size = args.nhid
    num_layers = args.levels

    print("Preparing data...")
    train_x, train_y = copy_data_generator(T, seq_len, n_train)
    test_x, test_y = copy_data_generator(T, seq_len, n_test)

    model = DRNN_Copy(input_size=input_size,
                      hidden_size=hidden_size,
                      num_layers=num_layers,
                      dropout=dropout,
                      output_size=n_classes)

    if torch.cuda.is_available():
        model.cuda()
        train_x = train_x.cuda()
        train_y = train_y.cuda()
        test_x = test_x.cuda()
        test_y = test_y.cuda()

    criterion = nn.CrossEntropyLoss()
    optimizer = optim.RMSprop(model.parameters(), lr=args.lr)

    def evaluate():
        model.eval()
        out = model(test_x.unsqueeze(2).contiguous())
        loss = criterion(out.view(-1, n_classes), test_y.view(-1))
        pred = out.view(-1, n_classes).data.max(1, keepdim=True)[1]
        correct = pred.eq(test_y.data.view_as(pred)).cpu().sum()
        counter = out.view(-1, n_classes).size(0)
        print('Test set: Average loss: {:.8f}  |  Accuracy: {:.4f}'.format(
            loss.item(), 100. * correct.item() / counter))
        return loss.item()

    def train(ep):
        model.train()
        total_loss = 0
        correct = 0
        counter = 0
        for batch_idx, batch in enumerate(range(0, n_train, batch_size)):
            start_ind = batch
            end_ind = start_ind + batch_size

            x = train_x[start_ind:end_ind]  # (batch, steps)
            y = train_y[start_ind:end_ind]  # (batch, steps)

            optimizer.zero_grad()
            out = model(x.unsqueeze(2).contiguous())  # out: (batch, steps, output_size)

            loss = criterion(out.view(-1, n_classes), y.view(-1))
            pred = out.view(-1, n_classes).data.max(1, keepdim=True)[1]
            correct += pred.eq(y.data.view_as(pred)).cpu().sum()
            counter += out.view(-1, n_classes).size(0)
            if args.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            loss.backward()
            optimizer.step()
            total_loss += loss

            if batch_idx > 0 and batch_idx % args.log_interval == 0:
                avg_loss = total_loss / args.log_interval
                print('| Epoch {:3d} | {:5d}/{:5d} batches | lr {:2.5f} | loss {:5.8f} | accuracy {:5.4f}'.format(
                    ep, batch_idx, n_train // batch_size + 1, args.lr, avg_loss.item(),
                    100. * correct.item() / counter))
                total_loss = 0
                correct = 0
                counter = 0

    test_loss = None
    for ep in range(1, epochs + 1):
        train(ep)
        test_loss = evaluate()
    return test_loss


# ----------------------------------------------------------------------------- char_rnn

cuda = torch.cuda.is_available()


class Dictionary(object):
    def __init__(self):
        self.char2idx = {}
        self.idx2char = []
        self.counter = Counter()

    def add_word(self, char):
        self.counter[char] += 1

    def prep_dict(self):
        for char in self.counter:
            if char not in self.char2idx:
                self.idx2char.append(char)
                self.char2idx[char] = len(self.idx2char) - 1

    def __len__(self):
        return len(self.idx2char)


class Corpus(object):
    def __init__(self, string):
        self.dict = Dictionary()
        for c in string:
            self.dict.add_word(c)
        self.dict.prep_dict()


def _synthetic_text(n_chars, rng):
    words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'its', 'home', 'bank', 'rose']
    out = []
    length = 0
    while length < n_chars:
        w = words[rng.randint(len(words))]
        out.append(w)
        length += len(w) + 1
    return ' '.join(out)[:n_chars]


def data_generator(args):
    rng = np.random.RandomState(3)
    file, valfile, testfile = _synthetic_text(3000, rng), _synthetic_text(600, rng), _synthetic_text(600, rng)
    file_len = len(file)
    valfile_len = len(valfile)
    testfile_len = len(testfile)
    corpus = Corpus(file + " " + valfile + " " + testfile)
    return file, file_len, valfile, valfile_len, testfile, testfile_len, corpus


def char_tensor(corpus, string):
    tensor = torch.zeros(len(string)).long()
    for i in range(len(string)):
        tensor[i] = corpus.dict.char2idx[string[i]]
    return tensor.cuda() if cuda else tensor


def batchify(data, batch_size, args):
    """The output should have size [L x batch_size], where L could be a long sequence length"""
    nbatch = data.size(0) // batch_size
    data = data.narrow(0, 0, nbatch * batch_size)
    data = data.view(batch_size, -1)
    if args.cuda:
        data = data.cuda()
    return data


def get_batch(source, start_index, args):
    seq_len = min(args.seq_len, source.size(1) - 1 - start_index)
    end_index = start_index + seq_len
    inp = source[:, start_index:end_index].contiguous()
    target = source[:, start_index + 1:end_index + 1].contiguous()  # The successors of the inp.
    return inp, target


def save(model):
    save_filename = 'model.pt'
    torch.save(model, save_filename)
    print('Saved as %s' % save_filename)


class DRNN_Char(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size, dropout=0.2, emb_dropout=0.2):
        super(DRNN_Char, self).__init__()
        self.encoder = nn.Embedding(output_size, input_size)
        self.drnn = DRNN(cell_type='GRU',
                         dropout=dropout,
                         n_hidden=hidden_size,
                         n_input=input_size,
                         n_layers=num_layers,
                         batch_first=True)
        self.decoder = nn.Linear(hidden_size, output_size)
        self.drop = nn.Dropout(emb_dropout)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.fill_(0)
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, x):
        # input has dimension (N, L_in), and emb has dimension (N, L_in, C_in)
        emb = self.drop(self.encoder(x))
        y, _ = self.drnn(emb)
        o = self.decoder(y)
        return o.contiguous()


def char_rnn_main():
    parser = argparse.ArgumentParser(description='Sequence Modeling - Character Level Language Model')
    parser.add_argument('--batch_size', type=int, default=4, metavar='N')
    parser.add_argument('--cuda', action='store_false', help='use CUDA (default: True)')
    parser.add_argument('--dropout', type=float, default=0.1)
    parser.add_argument('--emb_dropout', type=float, default=0.1)
    parser.add_argument('--clip', type=float, default=0.15)
    parser.add_argument('--epochs', type=int, default=2)
    parser.add_argument('--levels', type=int, default=3)
    parser.add_argument('--log-interval', type=int, default=4, metavar='N')
    parser.add_argument('--lr', type=float, default=4)
    parser.add_argument('--emsize', type=int, default=16)
    parser.add_argument('--optim', type=str, default='SGD')
    parser.add_argument('--nhid', type=int, default=32)
    parser.add_argument('--validseqlen', type=int, default=30)
    parser.add_argument('--seq_len', type=int, default=42)
    parser.add_argument('--seed', type=int, default=1111)
    parser.add_argument('--dataset', type=str, default='ptb')
    args = parser.parse_args([])
    args.cuda = args.cuda and torch.cuda.is_available()

    torch.manual_seed(args.seed)
    if torch.cuda.is_available():
        if not args.cuda:
            print("WARNING: You have a CUDA device, so you should probably run with --cuda")

    file, file_len, valfile, valfile_len, testfile, testfile_len, corpus = data_generator(args)

    n_characters = len(corpus.dict)
    train_data = batchify(char_tensor(corpus, file), args.batch_size, args)
    val_data = batchify(char_tensor(corpus, valfile), 1, args)
    test_data = batchify(char_tensor(corpus, testfile), 1, args)
    print("Corpus size: ", n_characters)

    model = DRNN_Char(input_size=args.emsize,
                      output_size=n_characters,
                      hidden_size=args.nhid,
                      num_layers=args.levels,
                      dropout=args.dropout,
                      emb_dropout=args.emb_dropout)

    if args.cuda:
        model.cuda()

    criterion = nn.CrossEntropyLoss()
    state = {'lr': args.lr}
    optimizer = getattr(optim, args.optim)(model.parameters(), lr=state['lr'])

    def evaluate(source):
        model.eval()
        total_loss = 0
        count = 0
        source_len = source.size(1)
        for batch, i in enumerate(range(0, source_len - 1, args.validseqlen)):
            if i + args.seq_len - args.validseqlen >= source_len:
                continue
            inp, target = get_batch(source, i, args)
            output = model(inp)
            eff_history = args.seq_len - args.validseqlen
            final_output = output[:, eff_history:].contiguous().view(-1, n_characters)
            final_target = target[:, eff_history:].contiguous().view(-1)
            loss = criterion(final_output, final_target)

            total_loss += loss.data * final_output.size(0)
            count += final_output.size(0)

        val_loss = total_loss.item() / count * 1.0
        return val_loss

    def train(epoch):
        model.train()
        total_loss = 0
        losses = []
        source = train_data
        source_len = source.size(1)
        for batch_idx, i in enumerate(range(0, source_len - 1, args.validseqlen)):
            if i + args.seq_len - args.validseqlen >= source_len:
                continue
            inp, target = get_batch(source, i, args)
            optimizer.zero_grad()
            output = model(inp)
            eff_history = args.seq_len - args.validseqlen
            final_output = output[:, eff_history:].contiguous().view(-1, n_characters)
            final_target = target[:, eff_history:].contiguous().view(-1)
            loss = criterion(final_output, final_target)
            loss.backward()

            if args.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            total_loss += loss.data

            if batch_idx % args.log_interval == 0 and batch_idx > 0:
                cur_loss = total_loss.item() / args.log_interval
                losses.append(cur_loss)
                print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.5f} | loss {:5.3f} | bpc {:5.3f}'.format(
                    epoch, batch_idx, int((source_len - 0.5) / args.validseqlen), state['lr'],
                    cur_loss, cur_loss / math.log(2)))
                total_loss = 0

        return sum(losses) * 1.0 / len(losses)

    print("Training for %d epochs..." % args.epochs)
    all_losses = []
    best_vloss = 1e7
    for epoch in range(1, args.epochs + 1):
        train(epoch)

        vloss = evaluate(val_data)
        print('-' * 89)
        print('| End of epoch {:3d} | valid loss {:5.3f} | valid bpc {:8.3f}'.format(
            epoch, vloss, vloss / math.log(2)))

        test_loss = evaluate(test_data)
        print('| End of epoch {:3d} | test loss {:5.3f} | test bpc {:8.3f}'.format(
            epoch, test_loss, test_loss / math.log(2)))

        if epoch > 5 and vloss > max(all_losses[-3:]):
            state['lr'] = state['lr'] / 10.
            for param_group in optimizer.param_groups:
                param_group['lr'] = state['lr']
        all_losses.append(vloss)

        if vloss < best_vloss:
            print("Saving...")
            save(model)
            best_vloss = vloss

    # Run on test data.
    test_loss = evaluate(test_data)
    print('=' * 89)
    print('| End of training | test loss {:5.3f} | test bpc {:8.3f}'.format(test_loss, test_loss / math.log(2)))
    print('=' * 89)
    return test_loss


if __name__ == "__main__":
    os.chdir(tempfile.mkdtemp())
    copy_loss = copy_memory_main()
    char_loss = char_rnn_main()
    print('done copy_loss={:.4f} char_loss={:.4f}'.format(copy_loss, char_loss))
