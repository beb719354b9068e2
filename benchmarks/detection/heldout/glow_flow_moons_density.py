"""Fits a Glow-style normalizing flow (blocks of BatchNormFlow, an LU-decomposed invertible linear map and an affine
coupling layer) to the two-moons density with main.py of pytorch-flows: maximum likelihood with Adam, a pass over the
whole training set with the batch-norm momentum set to 0 after each epoch, validation log-likelihood, a deep copy of
the best model, a test-set evaluation and samples drawn from the best model. main.py is a module-level script (no
main function): ``args.cuda = not args.no_cuda and torch.cuda.is_available()``, ``device = torch.device("cuda:0" if
args.cuda else "cpu")``, ``kwargs = {'num_workers': 4, 'pin_memory': True} if args.cuda else {}`` for the loaders,
the coupling masks built on the CPU and moved with ``mask.to(device).float()`` before they are handed to
`CouplingLayer` (which keeps them as plain attributes), ``model.to(device)``, and `train`/`validate` reading the
global ``device`` for each batch. `LUInvertibleMM` keeps P, the masks, the identity and the sign vector as plain
tensors and moves them lazily in `forward` when ``str(self.L_mask.device) != str(self.L.device)``; the BatchNorm
refresh pass moves the whole training tensor with ``.to(data.device)``; `FlowSequential.sample` draws CPU noise and
moves it to ``next(self.parameters()).device``, and the samples come back with ``.detach().cpu().numpy()``.

Modeled on: ikostrikov/pytorch-flows, main.py, flows.py, utils.py and datasets/moons.py at commit
bf12ed91b86867b38d74982f5e2d44c248604df9 (https://github.com/ikostrikov/pytorch-flows).

Kept: main.py's module-level code as written (parser, device and loader kwargs, the dataset switch, the
maf/realnvp/glow module lists with their masks, orthogonal initialisation of the Linear layers, Adam with weight
decay, `train(epoch)` with the global step and the BatchNorm momentum dance, `validate(epoch, model, loader,
prefix)`, the 30-epoch patience, `copy.deepcopy` of the best model, the final test); flows.py's `get_mask`,
`MaskedLinear`, `MADE`, `BatchNormFlow`, `LUInvertibleMM`, `Reverse`, `CouplingLayer` and `FlowSequential` with
`log_probs` and `sample`; datasets/moons.py's `MOONS`; utils.py's `save_moons_plot`.
Changed to run here: the argument list is given to `parse_args` (``--dataset MOONS --flow glow`` and the shrunk
sizes) and the multi-line add_argument calls are one line each; `datasets` is a namespace holding only MOONS (the other datasets read files that are not here);
`make_moons` gets ``random_state=0`` so runs repeat; tensorboardX's SummaryWriter is a stand-in that keeps the
scalars; `save_moons_plot` saves the real and sampled points with `np.save` instead of plotting them (no matplotlib)
into a temporary folder; the Python 3.8 ``args.dataset is 'GAS'`` is ``==``; the maf-split flows (MADESplit,
InvertibleMM), Sigmoid/Logit, ActNorm, Shuffle, the MNIST conditional branches and docstrings are left out;
blank lines between methods dropped.
Shrunk: 3,000 moons (2,400/300/300) instead of 30,000, 3 blocks, 3 epochs (so one plot, at epoch 0), learning rate
0.001, batch 100, test batch 300, 300 samples per plot.
"""
import argparse
import copy
import math
import os
import shutil
import sys
import tempfile
import types

import numpy as np
import scipy as sp
import scipy.linalg
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data
from sklearn import datasets as ds
from tqdm import tqdm


# ---------------------------------------------------------------- flows.py
def get_mask(in_features, out_features, in_flow_features, mask_type=None):
    """mask_type: input | None | output (see Figure 1 of https://arxiv.org/pdf/1502.03509.pdf)"""
    if mask_type == 'input':
        in_degrees = torch.arange(in_features) % in_flow_features
    else:
        in_degrees = torch.arange(in_features) % (in_flow_features - 1)
    if mask_type == 'output':
        out_degrees = torch.arange(out_features) % in_flow_features - 1
    else:
        out_degrees = torch.arange(out_features) % (in_flow_features - 1)
    return (out_degrees.unsqueeze(-1) >= in_degrees.unsqueeze(0)).float()


class MaskedLinear(nn.Module):
    def __init__(self, in_features, out_features, mask, cond_in_features=None, bias=True):
        super(MaskedLinear, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        if cond_in_features is not None:
            self.cond_linear = nn.Linear(cond_in_features, out_features, bias=False)
        self.register_buffer('mask', mask)
    def forward(self, inputs, cond_inputs=None):
        output = F.linear(inputs, self.linear.weight * self.mask, self.linear.bias)
        if cond_inputs is not None:
            output += self.cond_linear(cond_inputs)
        return output


nn.MaskedLinear = MaskedLinear


class MADE(nn.Module):
    """ An implementation of MADE (https://arxiv.org/abs/1502.03509). """
    def __init__(self, num_inputs, num_hidden, num_cond_inputs=None, act='relu', pre_exp_tanh=False):
        super(MADE, self).__init__()
        activations = {'relu': nn.ReLU, 'sigmoid': nn.Sigmoid, 'tanh': nn.Tanh}
        act_func = activations[act]
        input_mask = get_mask(num_inputs, num_hidden, num_inputs, mask_type='input')
        hidden_mask = get_mask(num_hidden, num_hidden, num_inputs)
        output_mask = get_mask(num_hidden, num_inputs * 2, num_inputs, mask_type='output')
        self.joiner = nn.MaskedLinear(num_inputs, num_hidden, input_mask, num_cond_inputs)
        self.trunk = nn.Sequential(act_func(),
                                   nn.MaskedLinear(num_hidden, num_hidden, hidden_mask), act_func(),
                                   nn.MaskedLinear(num_hidden, num_inputs * 2, output_mask))
    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            h = self.joiner(inputs, cond_inputs)
            m, a = self.trunk(h).chunk(2, 1)
            u = (inputs - m) * torch.exp(-a)
            return u, -a.sum(-1, keepdim=True)
        else:
            x = torch.zeros_like(inputs)
            for i_col in range(inputs.shape[1]):
                h = self.joiner(x, cond_inputs)
                m, a = self.trunk(h).chunk(2, 1)
                x[:, i_col] = inputs[:, i_col] * torch.exp(a[:, i_col]) + m[:, i_col]
            return x, -a.sum(-1, keepdim=True)


class BatchNormFlow(nn.Module):
    """ An implementation of a batch normalization layer from Density estimation using Real NVP
    (https://arxiv.org/abs/1605.08803). """
    def __init__(self, num_inputs, momentum=0.0, eps=1e-5):
        super(BatchNormFlow, self).__init__()
        self.log_gamma = nn.Parameter(torch.zeros(num_inputs))
        self.beta = nn.Parameter(torch.zeros(num_inputs))
        self.momentum = momentum
        self.eps = eps
        self.register_buffer('running_mean', torch.zeros(num_inputs))
        self.register_buffer('running_var', torch.ones(num_inputs))
    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            if self.training:
                self.batch_mean = inputs.mean(0)
                self.batch_var = (inputs - self.batch_mean).pow(2).mean(0) + self.eps
                self.running_mean.mul_(self.momentum)
                self.running_var.mul_(self.momentum)
                self.running_mean.add_(self.batch_mean.data * (1 - self.momentum))
                self.running_var.add_(self.batch_var.data * (1 - self.momentum))
                mean = self.batch_mean
                var = self.batch_var
            else:
                mean = self.running_mean
                var = self.running_var
            x_hat = (inputs - mean) / var.sqrt()
            y = torch.exp(self.log_gamma) * x_hat + self.beta
            return y, (self.log_gamma - 0.5 * torch.log(var)).sum(-1, keepdim=True)
        else:
            if self.training:
                mean = self.batch_mean
                var = self.batch_var
            else:
                mean = self.running_mean
                var = self.running_var
            x_hat = (inputs - self.beta) / torch.exp(self.log_gamma)
            y = x_hat * var.sqrt() + mean
            return y, (-self.log_gamma + 0.5 * torch.log(var)).sum(-1, keepdim=True)


class LUInvertibleMM(nn.Module):
    """ An implementation of a invertible matrix multiplication layer from Glow: Generative Flow with Invertible 1x1
    Convolutions (https://arxiv.org/abs/1807.03039). """
    def __init__(self, num_inputs):
        super(LUInvertibleMM, self).__init__()
        self.W = torch.Tensor(num_inputs, num_inputs)
        nn.init.orthogonal_(self.W)
        self.L_mask = torch.tril(torch.ones(self.W.size()), -1)
        self.U_mask = self.L_mask.t().clone()
        P, L, U = sp.linalg.lu(self.W.numpy())
        self.P = torch.from_numpy(P)
        self.L = nn.Parameter(torch.from_numpy(L))
        self.U = nn.Parameter(torch.from_numpy(U))
        S = np.diag(U)
        sign_S = np.sign(S)
        log_S = np.log(abs(S))
        self.sign_S = torch.from_numpy(sign_S)
        self.log_S = nn.Parameter(torch.from_numpy(log_S))
        self.I = torch.eye(self.L.size(0))
    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if str(self.L_mask.device) != str(self.L.device):
            self.L_mask = self.L_mask.to(self.L.device)
            self.U_mask = self.U_mask.to(self.L.device)
            self.I = self.I.to(self.L.device)
            self.P = self.P.to(self.L.device)
            self.sign_S = self.sign_S.to(self.L.device)
        L = self.L * self.L_mask + self.I
        U = self.U * self.U_mask + torch.diag(self.sign_S * torch.exp(self.log_S))
        W = self.P @ L @ U
        if mode == 'direct':
            return inputs @ W, self.log_S.sum().unsqueeze(0).unsqueeze(0).repeat(inputs.size(0), 1)
        else:
            return inputs @ torch.inverse(W), -self.log_S.sum().unsqueeze(0).unsqueeze(0).repeat(inputs.size(0), 1)


class Reverse(nn.Module):
    """ An implementation of a reversing layer from Density estimation using Real NVP
    (https://arxiv.org/abs/1605.08803). """
    def __init__(self, num_inputs):
        super(Reverse, self).__init__()
        self.perm = np.array(np.arange(0, num_inputs)[::-1])
        self.inv_perm = np.argsort(self.perm)
    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            return inputs[:, self.perm], torch.zeros(inputs.size(0), 1, device=inputs.device)
        else:
            return inputs[:, self.inv_perm], torch.zeros(inputs.size(0), 1, device=inputs.device)


class CouplingLayer(nn.Module):
    """ An implementation of a coupling layer from RealNVP (https://arxiv.org/abs/1605.08803). """
    def __init__(self, num_inputs, num_hidden, mask, num_cond_inputs=None, s_act='tanh', t_act='relu'):
        super(CouplingLayer, self).__init__()
        self.num_inputs = num_inputs
        self.mask = mask
        activations = {'relu': nn.ReLU, 'sigmoid': nn.Sigmoid, 'tanh': nn.Tanh}
        s_act_func = activations[s_act]
        t_act_func = activations[t_act]
        if num_cond_inputs is not None:
            total_inputs = num_inputs + num_cond_inputs
        else:
            total_inputs = num_inputs
        self.scale_net = nn.Sequential(
            nn.Linear(total_inputs, num_hidden), s_act_func(),
            nn.Linear(num_hidden, num_hidden), s_act_func(),
            nn.Linear(num_hidden, num_inputs))
        self.translate_net = nn.Sequential(
            nn.Linear(total_inputs, num_hidden), t_act_func(),
            nn.Linear(num_hidden, num_hidden), t_act_func(),
            nn.Linear(num_hidden, num_inputs))
        def init(m):
            if isinstance(m, nn.Linear):
                m.bias.data.fill_(0)
                nn.init.orthogonal_(m.weight.data)
    def forward(self, inputs, cond_inputs=None, mode='direct'):
        mask = self.mask
        masked_inputs = inputs * mask
        if cond_inputs is not None:
            masked_inputs = torch.cat([masked_inputs, cond_inputs], -1)
        if mode == 'direct':
            log_s = self.scale_net(masked_inputs) * (1 - mask)
            t = self.translate_net(masked_inputs) * (1 - mask)
            s = torch.exp(log_s)
            return inputs * s + t, log_s.sum(-1, keepdim=True)
        else:
            log_s = self.scale_net(masked_inputs) * (1 - mask)
            t = self.translate_net(masked_inputs) * (1 - mask)
            s = torch.exp(-log_s)
            return (inputs - t) * s, -log_s.sum(-1, keepdim=True)


class FlowSequential(nn.Sequential):
    """ A sequential container for flows. In addition to a forward pass it implements a backward pass and
    computes log jacobians. """
    def forward(self, inputs, cond_inputs=None, mode='direct', logdets=None):
        self.num_inputs = inputs.size(-1)
        if logdets is None:
            logdets = torch.zeros(inputs.size(0), 1, device=inputs.device)
        assert mode in ['direct', 'inverse']
        if mode == 'direct':
            for module in self._modules.values():
                inputs, logdet = module(inputs, cond_inputs, mode)
                logdets += logdet
        else:
            for module in reversed(self._modules.values()):
                inputs, logdet = module(inputs, cond_inputs, mode)
                logdets += logdet
        return inputs, logdets
    def log_probs(self, inputs, cond_inputs=None):
        u, log_jacob = self(inputs, cond_inputs)
        log_probs = (-0.5 * u.pow(2) - 0.5 * math.log(2 * math.pi)).sum(-1, keepdim=True)
        return (log_probs + log_jacob).sum(-1, keepdim=True)
    def sample(self, num_samples=None, noise=None, cond_inputs=None):
        if noise is None:
            noise = torch.Tensor(num_samples, self.num_inputs).normal_()
        device = next(self.parameters()).device
        noise = noise.to(device)
        if cond_inputs is not None:
            cond_inputs = cond_inputs.to(device)
        samples = self.forward(noise, cond_inputs, mode='inverse')[0]
        return samples


fnn = types.SimpleNamespace(MADE=MADE, BatchNormFlow=BatchNormFlow, LUInvertibleMM=LUInvertibleMM, Reverse=Reverse,
                            CouplingLayer=CouplingLayer, FlowSequential=FlowSequential)


# ---------------------------------------------------------------- datasets/moons.py
class MOONS:
    class Data:
        def __init__(self, data):
            self.x = data.astype(np.float32)
            self.N = self.x.shape[0]
    def __init__(self):
        trn, val, tst = load_data()
        self.trn = self.Data(trn)
        self.val = self.Data(val)
        self.tst = self.Data(tst)
        self.n_dims = self.trn.x.shape[1]


def load_data():
    x = ds.make_moons(n_samples=3000, shuffle=True, noise=0.05, random_state=0)[0]
    return x[:2400], x[2400:2700], x[2700:]


datasets = types.SimpleNamespace(MOONS=MOONS)


# ---------------------------------------------------------------- utils.py, tensorboardX
PLOT_DIR = tempfile.mkdtemp()


def save_moons_plot(epoch, best_model, dataset):
    # generate some examples
    best_model.eval()
    with torch.no_grad():
        x_synth = best_model.sample(300).detach().cpu().numpy()
    # the author plots dataset.val.x next to x_synth with matplotlib
    try:
        os.makedirs(os.path.join(PLOT_DIR, 'plots'))
    except OSError:
        pass
    np.save(os.path.join(PLOT_DIR, 'plots/plot_{:03d}.npy'.format(epoch)), np.stack([dataset.val.x[:300], x_synth]))


utils = types.SimpleNamespace(save_moons_plot=save_moons_plot)


class SummaryWriter:
    """tensorboardX.SummaryWriter: here the scalars are only kept"""
    def __init__(self, comment=''):
        self.comment, self.scalars = comment, []
    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, float(value), step))


# ---------------------------------------------------------------- main.py
if sys.version_info < (3, 6):
    print('Sorry, this code might need Python 3.6 or higher')

# Training settings
parser = argparse.ArgumentParser(description='PyTorch Flows')
parser.add_argument('--batch-size', type=int, default=100, help='input batch size for training (default: 100)')
parser.add_argument('--test-batch-size', type=int, default=1000, help='input batch size for testing (default: 1000)')
parser.add_argument('--epochs', type=int, default=1000, help='number of epochs to train (default: 1000)')
parser.add_argument('--lr', type=float, default=0.0001, help='learning rate (default: 0.0001)')
parser.add_argument('--dataset', default='POWER', help='POWER | GAS | HEPMASS | MINIBONE | BSDS300 | MOONS')
parser.add_argument('--flow', default='maf', help='flow to use: maf | realnvp | glow')
parser.add_argument('--no-cuda', action='store_true', default=False, help='disables CUDA training')
parser.add_argument('--cond', action='store_true', default=False, help='train class conditional flow (only for MNIST)')
parser.add_argument('--num-blocks', type=int, default=5, help='number of invertible blocks (default: 5)')
parser.add_argument('--seed', type=int, default=1, help='random seed (default: 1)')
parser.add_argument('--log-interval', type=int, default=1000, help='how many batches to wait before logging training status')

args = parser.parse_args(['--dataset', 'MOONS', '--flow', 'glow', '--epochs', '3', '--num-blocks', '3',
                          '--test-batch-size', '300', '--lr', '0.001'])
args.cuda = not args.no_cuda and torch.cuda.is_available()
device = torch.device("cuda:0" if args.cuda else "cpu")

torch.manual_seed(args.seed)
if args.cuda:
    torch.cuda.manual_seed(args.seed)

kwargs = {'num_workers': 4, 'pin_memory': True} if args.cuda else {}

assert args.dataset in ['POWER', 'GAS', 'HEPMASS', 'MINIBONE', 'BSDS300', 'MOONS', 'MNIST']
dataset = getattr(datasets, args.dataset)()

if args.cond:
    raise NotImplementedError('the class-conditional MNIST branch is left out')
else:
    train_tensor = torch.from_numpy(dataset.trn.x)
    train_dataset = torch.utils.data.TensorDataset(train_tensor)
    valid_tensor = torch.from_numpy(dataset.val.x)
    valid_dataset = torch.utils.data.TensorDataset(valid_tensor)
    test_tensor = torch.from_numpy(dataset.tst.x)
    test_dataset = torch.utils.data.TensorDataset(test_tensor)
    num_cond_inputs = None

train_loader = torch.utils.data.DataLoader(
    train_dataset, batch_size=args.batch_size, shuffle=True, **kwargs)

valid_loader = torch.utils.data.DataLoader(
    valid_dataset, batch_size=args.test_batch_size, shuffle=False, drop_last=False, **kwargs)

test_loader = torch.utils.data.DataLoader(
    test_dataset, batch_size=args.test_batch_size, shuffle=False, drop_last=False, **kwargs)

num_inputs = dataset.n_dims
num_hidden = {'POWER': 100, 'GAS': 100, 'HEPMASS': 512, 'MINIBOONE': 512, 'BSDS300': 512, 'MOONS': 64,
              'MNIST': 1024}[args.dataset]

act = 'tanh' if args.dataset == 'GAS' else 'relu'

modules = []

assert args.flow in ['maf', 'maf-split', 'maf-split-glow', 'realnvp', 'glow']
if args.flow == 'glow':
    mask = torch.arange(0, num_inputs) % 2
    mask = mask.to(device).float()

    print("Warning: Results for GLOW are not as good as for MAF yet.")
    for _ in range(args.num_blocks):
        modules += [
            fnn.BatchNormFlow(num_inputs),
            fnn.LUInvertibleMM(num_inputs),
            fnn.CouplingLayer(
                num_inputs, num_hidden, mask, num_cond_inputs,
                s_act='tanh', t_act='relu')
        ]
        mask = 1 - mask
elif args.flow == 'realnvp':
    mask = torch.arange(0, num_inputs) % 2
    mask = mask.to(device).float()

    for _ in range(args.num_blocks):
        modules += [
            fnn.CouplingLayer(
                num_inputs, num_hidden, mask, num_cond_inputs,
                s_act='tanh', t_act='relu'),
            fnn.BatchNormFlow(num_inputs)
        ]
        mask = 1 - mask
elif args.flow == 'maf':
    for _ in range(args.num_blocks):
        modules += [
            fnn.MADE(num_inputs, num_hidden, num_cond_inputs, act=act),
            fnn.BatchNormFlow(num_inputs),
            fnn.Reverse(num_inputs)
        ]

model = fnn.FlowSequential(*modules)

for module in model.modules():
    if isinstance(module, nn.Linear):
        nn.init.orthogonal_(module.weight)
        if hasattr(module, 'bias') and module.bias is not None:
            module.bias.data.fill_(0)

model.to(device)

optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=1e-6)

writer = SummaryWriter(comment=args.flow + "_" + args.dataset)
global_step = 0

def train(epoch):
    global global_step, writer
    model.train()
    train_loss = 0

    pbar = tqdm(total=len(train_loader.dataset))
    for batch_idx, data in enumerate(train_loader):
        if isinstance(data, list):
            if len(data) > 1:
                cond_data = data[1].float()
                cond_data = cond_data.to(device)
            else:
                cond_data = None
            data = data[0]
        data = data.to(device)
        optimizer.zero_grad()
        loss = -model.log_probs(data, cond_data).mean()
        train_loss += loss.item()
        loss.backward()
        optimizer.step()

        pbar.update(data.size(0))
        pbar.set_description('Train, Log likelihood in nats: {:.6f}'.format(
            -train_loss / (batch_idx + 1)))

        writer.add_scalar('training/loss', loss.item(), global_step)
        global_step += 1

    pbar.close()

    for module in model.modules():
        if isinstance(module, fnn.BatchNormFlow):
            module.momentum = 0
    if args.cond:
        with torch.no_grad():
            model(train_loader.dataset.tensors[0].to(data.device),
                train_loader.dataset.tensors[1].to(data.device).float())
    else:
        with torch.no_grad():
            model(train_loader.dataset.tensors[0].to(data.device))

    for module in model.modules():
        if isinstance(module, fnn.BatchNormFlow):
            module.momentum = 1


def validate(epoch, model, loader, prefix='Validation'):
    global global_step, writer

    model.eval()
    val_loss = 0

    pbar = tqdm(total=len(loader.dataset))
    pbar.set_description('Eval')
    for batch_idx, data in enumerate(loader):
        if isinstance(data, list):
            if len(data) > 1:
                cond_data = data[1].float()
                cond_data = cond_data.to(device)
            else:
                cond_data = None
            data = data[0]
        data = data.to(device)
        with torch.no_grad():
            val_loss += -model.log_probs(data, cond_data).sum().item()  # sum up batch loss
        pbar.update(data.size(0))
        pbar.set_description('Val, Log likelihood in nats: {:.6f}'.format(
            -val_loss / pbar.n))

    writer.add_scalar('validation/LL', val_loss / len(loader.dataset), epoch)

    pbar.close()
    return val_loss / len(loader.dataset)


best_validation_loss = float('inf')
best_validation_epoch = 0
best_model = model

for epoch in range(args.epochs):
    print('\nEpoch: {}'.format(epoch))

    train(epoch)
    validation_loss = validate(epoch, model, valid_loader)

    if epoch - best_validation_epoch >= 30:
        break

    if validation_loss < best_validation_loss:
        best_validation_epoch = epoch
        best_validation_loss = validation_loss
        best_model = copy.deepcopy(model)

    print('Best validation at epoch {}: Average Log Likelihood in nats: {:.4f}'.format(
        best_validation_epoch, -best_validation_loss))

    if args.dataset == 'MOONS' and epoch % 10 == 0:
        utils.save_moons_plot(epoch, model, dataset)
    elif args.dataset == 'MNIST' and epoch % 1 == 0:
        utils.save_images(epoch, model, args.cond)


test_loss = validate(best_validation_epoch, best_model, test_loader, prefix='Test')
n_plots = len(os.listdir(os.path.join(PLOT_DIR, 'plots')))
shutil.rmtree(PLOT_DIR)
print('done: best validation epoch {}, test log likelihood {:.4f} nats, {} plots'.format(
    best_validation_epoch, -test_loss, n_plots))
