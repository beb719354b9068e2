"""Trains Bai, Kolter and Koltun's Temporal Convolutional Network (TCN) on two of the repository's sequence modeling
benchmarks, one after the other, each as the module-level script the repository ships: first the adding problem
(regress the sum of the two marked numbers of a long random sequence; the whole data set is moved to the GPU up
front and sliced into batches there), then polyphonic music modeling (a sigmoid TCN predicts the next 88-key piano
roll frame; every sequence is moved to the GPU on its own, the output is taken to float64 by the model, the negative
log-likelihood is computed with `torch.trace`, the best model is pickled whole with `torch.save(model, f)` and
reloaded with `torch.load` for a final test evaluation). Both use the shared `TemporalConvNet` of weight-normalised,
dilated, causal (chomped) residual blocks.

Modeled on: locuslab/TCN, TCN/tcn.py, TCN/adding_problem/add_test.py, TCN/adding_problem/model.py,
TCN/adding_problem/utils.py, TCN/poly_music/music_test.py, TCN/poly_music/model.py and TCN/poly_music/utils.py at
commit 2f8c2b817050206397458dfd1f5a25ce8a32fe65
(https://github.com/locuslab/TCN/blob/2f8c2b817050206397458dfd1f5a25ce8a32fe65/TCN/tcn.py,
https://github.com/locuslab/TCN/blob/2f8c2b817050206397458dfd1f5a25ce8a32fe65/TCN/adding_problem/add_test.py,
https://github.com/locuslab/TCN/blob/2f8c2b817050206397458dfd1f5a25ce8a32fe65/TCN/poly_music/music_test.py).

Kept: tcn.py's `Chomp1d`, `TemporalBlock` (with `weight_norm`, `init_weights`, optional 1x1 `downsample`) and
`TemporalConvNet` as written; both `TCN` models as written (the adding model's `linear(y1[:, :, -1])`, the music
model's `self.linear(output).double()` before the sigmoid); both argparse parsers with their options, including
`--cuda` as `action='store_false'` (CUDA on by default) and the "WARNING: You have a CUDA device" check; the adding
problem's `data_generator` (`torch.rand`/`torch.zeros` on the CPU, wrapped in `Variable`), its
`if args.cuda: model.cuda(); X_train = X_train.cuda(); ...` block moving the model and all four data tensors
before the optimizer is built with `getattr(optim, args.optim)`, its `train` (`global lr`, slicing batches of the
device-resident data, `F.mse_loss`, optional clipping) and `evaluate` (`model.eval()`, `torch.no_grad()`,
`.item()`); the music script's `model.cuda()` under `args.cuda` before the optimizer, `evaluate` and `train` with
`Variable(data_line[:-1]), Variable(data_line[1:])` and `if args.cuda: x, y = x.cuda(), y.cuda()` per sequence,
`model(x.unsqueeze(0)).squeeze(0)`, the `-torch.trace(torch.matmul(y, torch.log(output).float().t()) + ...)` loss,
`clip_grad_norm_` called before `backward()` as the author wrote it, `np.random.shuffle` of the index list, the
best-model `torch.save(model, f)`, the learning-rate annealing over `optimizer.param_groups` and the final
`model = torch.load(open(model_name, "rb"))` followed by `evaluate(X_test)`.

Changed to run here: the two scripts live in one file and run one after the other at module level (their globals
`args`, `model`, `optimizer`, `lr`, `train`, `evaluate` are simply redefined by the second); the two `TCN` classes
are named `AddingTCN` and `MusicTCN`; `parser.parse_args()` is `parser.parse_args(argv)` with the sizes below,
where `argv` holds `--cuda` (which turns CUDA off, the option being `store_false`) when `torch.cuda.is_available()`
is false, as a user without a GPU has to pass it; the music data (`scipy.io.loadmat` of the Nottingham `.mat`) is
replaced by random piano rolls made with numpy in `data_generator` and converted with the author's
`torch.Tensor(data[i].astype(np.float64))` loop; `np.random.seed` is added for the adding data; the pickled model
is written to a temporary folder, and `torch.load` gets `weights_only=False` (PyTorch 2.6+ refuses whole pickled
models otherwise); per-epoch prints are kept, the ones inside `train` fire every few batches.
Shrunk: adding problem: 512 training and 128 test sequences of length 48 instead of 50000/1000 of length 400, 4
levels of 12 channels with kernel size 4 instead of 8 of 30 with 7, 2 epochs instead of 10, batch 32; music: 12
training, 4 validation and 4 test rolls of 16 to 31 frames instead of the Nottingham set, 2 levels of 24 channels
with kernel 3 instead of 4 of 150 with 5, lr 5e-3 instead of 1e-3, 3 epochs instead of 100; report intervals 8 and
5 instead of 100.
"""
import argparse
import os
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from torch.nn.utils import weight_norm

CPU_ARGV = [] if torch.cuda.is_available() else ['--cuda']
workdir = tempfile.mkdtemp()


# ---------------------------------------------------------------------------------------------------- TCN/tcn.py
class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2):
        super(TemporalBlock, self).__init__()
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)
        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)
        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2):
        super(TemporalConvNet, self).__init__()
        layers = []
        num_levels = len(num_channels)
        for i in range(num_levels):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i-1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size-1) * dilation_size, dropout=dropout)]
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


# ------------------------------------------------------------------- TCN/adding_problem/model.py and utils.py
class AddingTCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout):
        super(AddingTCN, self).__init__()
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size=kernel_size, dropout=dropout)
        self.linear = nn.Linear(num_channels[-1], output_size)
        self.init_weights()

    def init_weights(self):
        self.linear.weight.data.normal_(0, 0.01)

    def forward(self, x):
        y1 = self.tcn(x)
        return self.linear(y1[:, :, -1])


def data_generator(N, seq_length):
    """
    Args:
        seq_length: Length of the adding problem data
        N: # of data in the set
    """
    X_num = torch.rand([N, 1, seq_length])
    X_mask = torch.zeros([N, 1, seq_length])
    Y = torch.zeros([N, 1])
    for i in range(N):
        positions = np.random.choice(seq_length, size=2, replace=False)
        X_mask[i, 0, positions[0]] = 1
        X_mask[i, 0, positions[1]] = 1
        Y[i,0] = X_num[i, 0, positions[0]] + X_num[i, 0, positions[1]]
    X = torch.cat((X_num, X_mask), dim=1)
    return Variable(X), Variable(Y)


# ----------------------------------------------------------------------------- TCN/adding_problem/add_test.py
parser = argparse.ArgumentParser(description='Sequence Modeling - The Adding Problem')
parser.add_argument('--batch_size', type=int, default=32, metavar='N',
                    help='batch size (default: 32)')
parser.add_argument('--cuda', action='store_false',
                    help='use CUDA (default: True)')
parser.add_argument('--dropout', type=float, default=0.0,
                    help='dropout applied to layers (default: 0.0)')
parser.add_argument('--clip', type=float, default=-1,
                    help='gradient clip, -1 means no clip (default: -1)')
parser.add_argument('--epochs', type=int, default=10,
                    help='upper epoch limit (default: 10)')
parser.add_argument('--ksize', type=int, default=7,
                    help='kernel size (default: 7)')
parser.add_argument('--levels', type=int, default=8,
                    help='# of levels (default: 8)')
parser.add_argument('--seq_len', type=int, default=400,
                    help='sequence length (default: 400)')
parser.add_argument('--log-interval', type=int, default=100, metavar='N',
                    help='report interval (default: 100')
parser.add_argument('--lr', type=float, default=4e-3,
                    help='initial learning rate (default: 4e-3)')
parser.add_argument('--optim', type=str, default='Adam',
                    help='optimizer to use (default: Adam)')
parser.add_argument('--nhid', type=int, default=30,
                    help='number of hidden units per layer (default: 30)')
parser.add_argument('--seed', type=int, default=1111,
                    help='random seed (default: 1111)')
args = parser.parse_args(CPU_ARGV + ['--epochs', '2', '--ksize', '4', '--levels', '4', '--seq_len', '48',
                                     '--log-interval', '8', '--nhid', '12'])

torch.manual_seed(args.seed)
np.random.seed(args.seed)
if torch.cuda.is_available():
    if not args.cuda:
        print("WARNING: You have a CUDA device, so you should probably run with --cuda")

input_channels = 2
n_classes = 1
batch_size = args.batch_size
seq_length = args.seq_len
epochs = args.epochs

print(args)
print("Producing data...")
X_train, Y_train = data_generator(512, seq_length)
X_test, Y_test = data_generator(128, seq_length)


# Note: We use a very simple setting here (assuming all levels have the same # of channels.
channel_sizes = [args.nhid]*args.levels
kernel_size = args.ksize
dropout = args.dropout
model = AddingTCN(input_channels, n_classes, channel_sizes, kernel_size=kernel_size, dropout=dropout)

if args.cuda:
    model.cuda()
    X_train = X_train.cuda()
    Y_train = Y_train.cuda()
    X_test = X_test.cuda()
    Y_test = Y_test.cuda()

lr = args.lr
optimizer = getattr(optim, args.optim)(model.parameters(), lr=lr)


def train(epoch):
    global lr
    model.train()
    batch_idx = 1
    total_loss = 0
    for i in range(0, X_train.size(0), batch_size):
        if i + batch_size > X_train.size(0):
            x, y = X_train[i:], Y_train[i:]
        else:
            x, y = X_train[i:(i+batch_size)], Y_train[i:(i+batch_size)]
        optimizer.zero_grad()
        output = model(x)
        loss = F.mse_loss(output, y)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        batch_idx += 1
        total_loss += loss.item()
        if batch_idx % args.log_interval == 0:
            cur_loss = total_loss / args.log_interval
            processed = min(i+batch_size, X_train.size(0))
            print('Train Epoch: {:2d} [{:6d}/{:6d} ({:.0f}%)]\tLearning rate: {:.4f}\tLoss: {:.6f}'.format(
                epoch, processed, X_train.size(0), 100.*processed/X_train.size(0), lr, cur_loss))
            total_loss = 0


def evaluate():
    model.eval()
    with torch.no_grad():
        output = model(X_test)
        test_loss = F.mse_loss(output, Y_test)
        print('\nTest set: Average loss: {:.6f}\n'.format(test_loss.item()))
        return test_loss.item()


for ep in range(1, epochs+1):
    train(ep)
    tloss = evaluate()

adding_test_loss = tloss


# ------------------------------------------------------------------------ TCN/poly_music/model.py and utils.py
class MusicTCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout):
        super(MusicTCN, self).__init__()
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size, dropout=dropout)
        self.linear = nn.Linear(num_channels[-1], output_size)
        self.sig = nn.Sigmoid()

    def forward(self, x):
        # x needs to have dimension (N, C, L) in order to be passed into CNN
        output = self.tcn(x.transpose(1, 2)).transpose(1, 2)
        output = self.linear(output).double()
        return self.sig(output)


def data_generator(dataset):
    print('making {} piano rolls...'.format(dataset))
    rng = np.random.RandomState(7)

    def rolls(n):
        out = np.empty(n, dtype=object)
        for i in range(n):
            T = rng.randint(16, 32)
            roll = np.zeros((T, 88), dtype=np.uint8)
            chord = rng.choice(np.arange(30, 70), size=3, replace=False)
            for t in range(T):
                if t % 4 == 0:
                    chord = (chord + rng.randint(-2, 3)) % 88
                roll[t, chord] = 1
            out[i] = roll
        return out
    X_train = rolls(12)
    X_valid = rolls(4)
    X_test = rolls(4)
    for data in [X_train, X_valid, X_test]:
        for i in range(len(data)):
            data[i] = torch.Tensor(data[i].astype(np.float64))
    return X_train, X_valid, X_test


# ------------------------------------------------------------------------------- TCN/poly_music/music_test.py
parser = argparse.ArgumentParser(description='Sequence Modeling - Polyphonic Music')
parser.add_argument('--cuda', action='store_false',
                    help='use CUDA (default: True)')
parser.add_argument('--dropout', type=float, default=0.25,
                    help='dropout applied to layers (default: 0.25)')
parser.add_argument('--clip', type=float, default=0.2,
                    help='gradient clip, -1 means no clip (default: 0.2)')
parser.add_argument('--epochs', type=int, default=100,
                    help='upper epoch limit (default: 100)')
parser.add_argument('--ksize', type=int, default=5,
                    help='kernel size (default: 5)')
parser.add_argument('--levels', type=int, default=4,
                    help='# of levels (default: 4)')
parser.add_argument('--log-interval', type=int, default=100, metavar='N',
                    help='report interval (default: 100')
parser.add_argument('--lr', type=float, default=1e-3,
                    help='initial learning rate (default: 1e-3)')
parser.add_argument('--optim', type=str, default='Adam',
                    help='optimizer to use (default: Adam)')
parser.add_argument('--nhid', type=int, default=150,
                    help='number of hidden units per layer (default: 150)')
parser.add_argument('--data', type=str, default='Nott',
                    help='the dataset to run (default: Nott)')
parser.add_argument('--seed', type=int, default=1111,
                    help='random seed (default: 1111)')

args = parser.parse_args(CPU_ARGV + ['--epochs', '3', '--ksize', '3', '--levels', '2', '--log-interval', '5',
                                     '--lr', '5e-3', '--nhid', '24'])

# Set the random seed manually for reproducibility.
torch.manual_seed(args.seed)
if torch.cuda.is_available():
    if not args.cuda:
        print("WARNING: You have a CUDA device, so you should probably run with --cuda")

print(args)
input_size = 88
X_train, X_valid, X_test = data_generator(args.data)

n_channels = [args.nhid] * args.levels
kernel_size = args.ksize
dropout = args.dropout

model = MusicTCN(input_size, input_size, n_channels, kernel_size, dropout=args.dropout)


if args.cuda:
    model.cuda()

criterion = nn.CrossEntropyLoss()
lr = args.lr
optimizer = getattr(optim, args.optim)(model.parameters(), lr=lr)


def evaluate(X_data, name='Eval'):
    model.eval()
    eval_idx_list = np.arange(len(X_data), dtype="int32")
    total_loss = 0.0
    count = 0
    with torch.no_grad():
        for idx in eval_idx_list:
            data_line = X_data[idx]
            x, y = Variable(data_line[:-1]), Variable(data_line[1:])
            if args.cuda:
                x, y = x.cuda(), y.cuda()
            output = model(x.unsqueeze(0)).squeeze(0)
            loss = -torch.trace(torch.matmul(y, torch.log(output).float().t()) +
                                torch.matmul((1-y), torch.log(1-output).float().t()))
            total_loss += loss.item()
            count += output.size(0)
        eval_loss = total_loss / count
        print(name + " loss: {:.5f}".format(eval_loss))
        return eval_loss


def train(ep):
    model.train()
    total_loss = 0
    count = 0
    train_idx_list = np.arange(len(X_train), dtype="int32")
    np.random.shuffle(train_idx_list)
    for idx in train_idx_list:
        data_line = X_train[idx]
        x, y = Variable(data_line[:-1]), Variable(data_line[1:])
        if args.cuda:
            x, y = x.cuda(), y.cuda()
        optimizer.zero_grad()
        output = model(x.unsqueeze(0)).squeeze(0)
        loss = -torch.trace(torch.matmul(y, torch.log(output).float().t()) +
                            torch.matmul((1 - y), torch.log(1 - output).float().t()))
        total_loss += loss.item()
        count += output.size(0)
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        loss.backward()
        optimizer.step()
        if idx > 0 and idx % args.log_interval == 0:
            cur_loss = total_loss / count
            print("Epoch {:2d} | lr {:.5f} | loss {:.5f}".format(ep, lr, cur_loss))
            total_loss = 0.0
            count = 0


if __name__ == "__main__":
    best_vloss = 1e8
    vloss_list = []
    model_name = os.path.join(workdir, "poly_music_{0}.pt".format(args.data))
    for ep in range(1, args.epochs+1):
        train(ep)
        vloss = evaluate(X_valid, name='Validation')
        tloss = evaluate(X_test, name='Test')
        if vloss < best_vloss:
            with open(model_name, "wb") as f:
                torch.save(model, f)
                print("Saved model!\n")
            best_vloss = vloss
        if ep > 10 and vloss > max(vloss_list[-3:]):
            lr /= 10
            for param_group in optimizer.param_groups:
                param_group['lr'] = lr
        vloss_list.append(vloss)
    print('-' * 89)
    model = torch.load(open(model_name, "rb"), weights_only=False)
    tloss = evaluate(X_test)
    shutil.rmtree(workdir)
    print("done adding_test_mse={:.4f} music_best_valid={:.4f} music_test_nll={:.4f}".format(
        adding_test_loss, best_vloss, tloss))
