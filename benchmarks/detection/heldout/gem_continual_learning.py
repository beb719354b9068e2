"""Continual learning on a stream of permuted-MNIST tasks with Gradient Episodic Memory (Lopez-Paz & Ranzato, "Gradient
Episodic Memory for Continual Learning") and the paper's baselines: `Continuum` yields the tasks' samples in order,
`life_experience` calls ``model.observe(x, t, y)`` per minibatch and `eval_tasks` measures every task's accuracy at
task switches, and `confusion_matrix` turns the accuracy matrix into final accuracy, backward and forward transfer.
GPU use is a ``--cuda yes/no`` string flag turned into a bool ``args.cuda`` that is passed down: the script calls
``model.cuda()`` and moves batches with ``v_x.cuda()`` when it is set, `eval_tasks` moves only the inputs and brings
predictions back with ``.data.cpu()``, and the GEM `Net` stores the flag as ``self.gpu``, allocates its episodic
memory and gradient matrix on the CPU and moves them with ``.cuda()`` when ``args.cuda``, and builds its task index
as ``torch.cuda.LongTensor(...) if self.gpu else torch.LongTensor(...)``; `project2cone2` solves the dual QP in numpy
on ``memories.cpu()`` and copies ``torch.Tensor(x)`` back into the (GPU) gradient. EWC keeps its Fisher terms and
memories as clones of device tensors.

Modeled on: facebookresearch/GradientEpisodicMemory, main.py, model/gem.py, model/ewc.py, model/single.py,
model/common.py, metrics/metrics.py and data/mnist_permutations.py at commit
34c6b8e9a0607db7567301c48b727430d20bee7e (https://github.com/facebookresearch/GradientEpisodicMemory).

Kept: `load_datasets` (``torch.load`` of the ``[tasks_tr, tasks_te]`` file), `Continuum` with its batching by task,
`eval_tasks` (including the author's ``b_to = min(b_from + eval_bs, x.size(0) - 1)``), `life_experience`, the
argument parser and `__main__` flow (``torch.backends.cudnn.enabled = False``, seeding with
``torch.cuda.manual_seed_all`` when ``args.cuda``, save of results, state dict and stats with ``torch.save``);
`Xavier`, `MLP`; GEM's `compute_offsets`, `store_grad`, `overwrite_grad`, `project2cone2` and `Net` (ring-buffer
memory, per-task gradients, constraint check, projection); EWC's `Net` and single's `Net`; `task_changes` and
`confusion_matrix`; the permuted-task construction of data/mnist_permutations.py.

Changed to run here: MNIST digits are synthetic (ten noisy prototypes, flattened 28x28) and the task file is written
to a temporary folder; ``quadprog.solve_qp`` (not installed) is replaced by a small projected-gradient solver of the
same box-constrained dual with the same call; the model modules are looked up in a dict instead of
``importlib.import_module('model.' + args.model)``; the three runs (single, ewc, gem) are passed as argument lists
and ``--cuda`` defaults to ``yes`` when CUDA is available (the paper's scripts pass ``--cuda yes`` on GPU machines);
the ResNet18 CIFAR-100 branch is left out; ``cudnn.enabled`` is restored at the end; blank lines inside
functions and between methods dropped for length.
Shrunk: 3 tasks of 200 training and 100 test samples, 1 epoch, batch 10, 2 hidden layers of 64 units, 32 memories
per task, log every 25 minibatches.
"""
import argparse
import datetime
import math
import os
import random
import tempfile
import time
import types
import uuid

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


# ---------------------------------------------------------------- metrics/metrics.py
def task_changes(result_t):
    n_tasks = int(result_t.max() + 1)
    changes = []
    current = result_t[0]
    for i, t in enumerate(result_t):
        if t != current:
            changes.append(i)
            current = t
    return n_tasks, changes


def confusion_matrix(result_t, result_a, fname=None):
    nt, changes = task_changes(result_t)
    baseline = result_a[0]
    changes = torch.LongTensor(changes + [result_a.size(0)]) - 1
    result = result_a[changes]
    # acc[t] equals result[t,t]
    acc = result.diag()
    fin = result[nt - 1]
    # bwt[t] equals result[T,t] - acc[t]
    bwt = result[nt - 1] - acc
    # fwt[t] equals result[t-1,t] - baseline[t]
    fwt = torch.zeros(nt)
    for t in range(1, nt):
        fwt[t] = result[t - 1, t] - baseline[t]
    if fname is not None:
        f = open(fname, 'w')
        print(' '.join(['%.4f' % r for r in baseline]), file=f)
        print('|', file=f)
        for row in range(result.size(0)):
            print(' '.join(['%.4f' % r for r in result[row]]), file=f)
        print('', file=f)
        print('Final Accuracy: %.4f' % fin.mean(), file=f)
        print('Backward: %.4f' % bwt.mean(), file=f)
        print('Forward:  %.4f' % fwt.mean(), file=f)
        f.close()
    stats = []
    stats.append(fin.mean())
    stats.append(bwt.mean())
    stats.append(fwt.mean())
    return stats


# ---------------------------------------------------------------- model/common.py
def Xavier(m):
    if m.__class__.__name__ == 'Linear':
        fan_in, fan_out = m.weight.data.size(1), m.weight.data.size(0)
        std = 1.0 * math.sqrt(2.0 / (fan_in + fan_out))
        a = math.sqrt(3.0) * std
        m.weight.data.uniform_(-a, a)
        m.bias.data.fill_(0.0)


class MLP(nn.Module):
    def __init__(self, sizes):
        super(MLP, self).__init__()
        layers = []
        for i in range(0, len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i < (len(sizes) - 2):
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)
        self.net.apply(Xavier)
    def forward(self, x):
        return self.net(x)


# ---------------------------------------------------------------- model/single.py
class SingleNet(torch.nn.Module):

    def __init__(self, n_inputs, n_outputs, n_tasks, args):
        super(SingleNet, self).__init__()
        nl, nh = args.n_layers, args.n_hiddens
        # setup network
        self.is_cifar = (args.data_file == 'cifar100.pt')
        self.net = MLP([n_inputs] + [nh] * nl + [n_outputs])
        # setup optimizer
        self.opt = torch.optim.SGD(self.parameters(), lr=args.lr)
        # setup losses
        self.bce = torch.nn.CrossEntropyLoss()
        self.nc_per_task = n_outputs
        self.n_outputs = n_outputs
    def forward(self, x, t):
        output = self.net(x)
        return output
    def observe(self, x, t, y):
        self.train()
        self.zero_grad()
        self.bce(self(x, t), y).backward()
        self.opt.step()


# ---------------------------------------------------------------- model/ewc.py
class EWCNet(torch.nn.Module):

    def __init__(self, n_inputs, n_outputs, n_tasks, args):
        super(EWCNet, self).__init__()
        nl, nh = args.n_layers, args.n_hiddens
        self.reg = args.memory_strength
        # setup network
        self.is_cifar = (args.data_file == 'cifar100.pt')
        self.net = MLP([n_inputs] + [nh] * nl + [n_outputs])
        # setup optimizer
        self.opt = torch.optim.SGD(self.net.parameters(), lr=args.lr)
        # setup losses
        self.bce = torch.nn.CrossEntropyLoss()
        # setup memories
        self.current_task = 0
        self.fisher = {}
        self.optpar = {}
        self.memx = None
        self.memy = None
        self.nc_per_task = n_outputs
        self.n_outputs = n_outputs
        self.n_memories = args.n_memories
    def forward(self, x, t):
        output = self.net(x)
        return output
    def observe(self, x, t, y):
        self.net.train()
        # next task?
        if t != self.current_task:
            self.net.zero_grad()
            self.bce(self(self.memx, self.current_task), self.memy).backward()
            self.fisher[self.current_task] = []
            self.optpar[self.current_task] = []
            for p in self.net.parameters():
                pd = p.data.clone()
                pg = p.grad.data.clone().pow(2)
                self.optpar[self.current_task].append(pd)
                self.fisher[self.current_task].append(pg)
            self.current_task = t
            self.memx = None
            self.memy = None
        if self.memx is None:
            self.memx = x.data.clone()
            self.memy = y.data.clone()
        else:
            if self.memx.size(0) < self.n_memories:
                self.memx = torch.cat((self.memx, x.data.clone()))
                self.memy = torch.cat((self.memy, y.data.clone()))
                if self.memx.size(0) > self.n_memories:
                    self.memx = self.memx[:self.n_memories]
                    self.memy = self.memy[:self.n_memories]
        self.net.zero_grad()
        loss = self.bce(self(x, t), y)
        for tt in range(t):
            for i, p in enumerate(self.net.parameters()):
                l = self.reg * self.fisher[tt][i]
                l = l * (p - self.optpar[tt][i]).pow(2)
                loss += l.sum()
        loss.backward()
        self.opt.step()


# ---------------------------------------------------------------- model/gem.py
def solve_qp(P, a, C, b, iters=500):
    """Stand-in for ``quadprog.solve_qp``: min 1/2 v'Pv - a'v s.t. C'v >= b, for GEM's C = I (projected gradient)."""
    v = np.maximum(np.zeros_like(a), b)
    step = 1.0 / max(np.linalg.eigvalsh(P).max(), 1e-12)
    for _ in range(iters):
        v = np.maximum(v - step * (np.dot(P, v) - a), b)
    return (v,)


def compute_offsets(task, nc_per_task, is_cifar):
    """Compute offsets for cifar to determine which outputs to select for a given task."""
    if is_cifar:
        offset1 = task * nc_per_task
        offset2 = (task + 1) * nc_per_task
    else:
        offset1 = 0
        offset2 = nc_per_task
    return offset1, offset2


def store_grad(pp, grads, grad_dims, tid):
    """This stores parameter gradients of past tasks."""
    # store the gradients
    grads[:, tid].fill_(0.0)
    cnt = 0
    for param in pp():
        if param.grad is not None:
            beg = 0 if cnt == 0 else sum(grad_dims[:cnt])
            en = sum(grad_dims[:cnt + 1])
            grads[beg: en, tid].copy_(param.grad.data.view(-1))
        cnt += 1


def overwrite_grad(pp, newgrad, grad_dims):
    """This is used to overwrite the gradients with a new gradient vector, whenever violations occur."""
    cnt = 0
    for param in pp():
        if param.grad is not None:
            beg = 0 if cnt == 0 else sum(grad_dims[:cnt])
            en = sum(grad_dims[:cnt + 1])
            this_grad = newgrad[beg: en].contiguous().view(param.grad.data.size())
            param.grad.data.copy_(this_grad)
        cnt += 1


def project2cone2(gradient, memories, margin=0.5, eps=1e-3):
    """Solves the GEM dual QP given a proposed gradient and a memory of task gradients (overwrites "gradient")."""
    memories_np = memories.cpu().t().double().numpy()
    gradient_np = gradient.cpu().contiguous().view(-1).double().numpy()
    t = memories_np.shape[0]
    P = np.dot(memories_np, memories_np.transpose())
    P = 0.5 * (P + P.transpose()) + np.eye(t) * eps
    q = np.dot(memories_np, gradient_np) * -1
    G = np.eye(t)
    h = np.zeros(t) + margin
    v = solve_qp(P, q, G, h)[0]
    x = np.dot(v, memories_np) + gradient_np
    gradient.copy_(torch.Tensor(x).view(-1, 1))


class GEMNet(nn.Module):
    def __init__(self, n_inputs, n_outputs, n_tasks, args):
        super(GEMNet, self).__init__()
        nl, nh = args.n_layers, args.n_hiddens
        self.margin = args.memory_strength
        self.is_cifar = (args.data_file == 'cifar100.pt')
        self.net = MLP([n_inputs] + [nh] * nl + [n_outputs])
        self.ce = nn.CrossEntropyLoss()
        self.n_outputs = n_outputs
        self.opt = optim.SGD(self.parameters(), args.lr)
        self.n_memories = args.n_memories
        self.gpu = args.cuda
        # allocate episodic memory
        self.memory_data = torch.FloatTensor(n_tasks, self.n_memories, n_inputs)
        self.memory_labs = torch.LongTensor(n_tasks, self.n_memories)
        if args.cuda:
            self.memory_data = self.memory_data.cuda()
            self.memory_labs = self.memory_labs.cuda()
        # allocate temporary synaptic memory
        self.grad_dims = []
        for param in self.parameters():
            self.grad_dims.append(param.data.numel())
        self.grads = torch.Tensor(sum(self.grad_dims), n_tasks)
        if args.cuda:
            self.grads = self.grads.cuda()
        # allocate counters
        self.observed_tasks = []
        self.old_task = -1
        self.mem_cnt = 0
        self.nc_per_task = n_outputs
    def forward(self, x, t):
        output = self.net(x)
        return output
    def observe(self, x, t, y):
        # update memory
        if t != self.old_task:
            self.observed_tasks.append(t)
            self.old_task = t
        # Update ring buffer storing examples from current task
        bsz = y.data.size(0)
        endcnt = min(self.mem_cnt + bsz, self.n_memories)
        effbsz = endcnt - self.mem_cnt
        self.memory_data[t, self.mem_cnt: endcnt].copy_(x.data[: effbsz])
        if bsz == 1:
            self.memory_labs[t, self.mem_cnt] = y.data[0]
        else:
            self.memory_labs[t, self.mem_cnt: endcnt].copy_(y.data[: effbsz])
        self.mem_cnt += effbsz
        if self.mem_cnt == self.n_memories:
            self.mem_cnt = 0
        # compute gradient on previous tasks
        if len(self.observed_tasks) > 1:
            for tt in range(len(self.observed_tasks) - 1):
                self.zero_grad()
                # fwd/bwd on the examples in the memory
                past_task = self.observed_tasks[tt]
                offset1, offset2 = compute_offsets(past_task, self.nc_per_task, self.is_cifar)
                ptloss = self.ce(self.forward(self.memory_data[past_task], past_task)[:, offset1: offset2],
                    self.memory_labs[past_task] - offset1)
                ptloss.backward()
                store_grad(self.parameters, self.grads, self.grad_dims, past_task)
        # now compute the grad on the current minibatch
        self.zero_grad()
        offset1, offset2 = compute_offsets(t, self.nc_per_task, self.is_cifar)
        loss = self.ce(self.forward(x, t)[:, offset1: offset2], y - offset1)
        loss.backward()
        # check if gradient violates constraints
        if len(self.observed_tasks) > 1:
            # copy gradient
            store_grad(self.parameters, self.grads, self.grad_dims, t)
            indx = torch.cuda.LongTensor(self.observed_tasks[:-1]) if self.gpu \
                else torch.LongTensor(self.observed_tasks[:-1])
            dotp = torch.mm(self.grads[:, t].unsqueeze(0), self.grads.index_select(1, indx))
            if (dotp < 0).sum() != 0:
                project2cone2(self.grads[:, t].unsqueeze(1), self.grads.index_select(1, indx), self.margin)
                # copy gradients back
                overwrite_grad(self.parameters, self.grads[:, t], self.grad_dims)
        self.opt.step()


MODELS = {'single': types.SimpleNamespace(Net=SingleNet), 'ewc': types.SimpleNamespace(Net=EWCNet),
          'gem': types.SimpleNamespace(Net=GEMNet)}


# ---------------------------------------------------------------- data/mnist_permutations.py (synthetic raw digits)
def make_mnist_permutations(out_file, n_tasks=3, n_train=200, n_test=100, seed=0):
    torch.manual_seed(seed)
    protos = (torch.rand(10, 784) > 0.7).float()
    y_tr, y_te = torch.randint(0, 10, (n_train,)), torch.randint(0, 10, (n_test,))
    x_tr = ((protos[y_tr] * 0.8 + torch.rand(n_train, 784) * 0.5).clamp(0, 1) * 255).byte()
    x_te = ((protos[y_te] * 0.8 + torch.rand(n_test, 784) * 0.5).clamp(0, 1) * 255).byte()
    x_tr = x_tr.float().view(x_tr.size(0), -1) / 255.0
    x_te = x_te.float().view(x_te.size(0), -1) / 255.0
    tasks_tr, tasks_te = [], []
    for t in range(n_tasks):
        p = torch.randperm(x_tr.size(1)).long().view(-1)
        tasks_tr.append(['random permutation', x_tr.index_select(1, p), y_tr])
        tasks_te.append(['random permutation', x_te.index_select(1, p), y_te])
    torch.save([tasks_tr, tasks_te], out_file)


# ---------------------------------------------------------------- main.py
def load_datasets(args):
    d_tr, d_te = torch.load(args.data_path + '/' + args.data_file)
    n_inputs = d_tr[0][1].size(1)
    n_outputs = 0
    for i in range(len(d_tr)):
        n_outputs = max(n_outputs, d_tr[i][2].max().item())
        n_outputs = max(n_outputs, d_te[i][2].max().item())
    return d_tr, d_te, n_inputs, n_outputs + 1, len(d_tr)


class Continuum:

    def __init__(self, data, args):
        self.data = data
        self.batch_size = args.batch_size
        n_tasks = len(data)
        task_permutation = range(n_tasks)
        if args.shuffle_tasks == 'yes':
            task_permutation = torch.randperm(n_tasks).tolist()
        sample_permutations = []
        for t in range(n_tasks):
            N = data[t][1].size(0)
            if args.samples_per_task <= 0:
                n = N
            else:
                n = min(args.samples_per_task, N)
            p = torch.randperm(N)[0:n]
            sample_permutations.append(p)
        self.permutation = []
        for t in range(n_tasks):
            task_t = task_permutation[t]
            for _ in range(args.n_epochs):
                task_p = [[task_t, i] for i in sample_permutations[task_t]]
                random.shuffle(task_p)
                self.permutation += task_p
        self.length = len(self.permutation)
        self.current = 0
    def __iter__(self):
        return self
    def next(self):
        return self.__next__()
    def __next__(self):
        if self.current >= self.length:
            raise StopIteration
        else:
            ti = self.permutation[self.current][0]
            j = []
            i = 0
            while (((self.current + i) < self.length) and
                   (self.permutation[self.current + i][0] == ti) and
                   (i < self.batch_size)):
                j.append(self.permutation[self.current + i][1])
                i += 1
            self.current += i
            j = torch.LongTensor(j)
            return self.data[ti][1][j], ti, self.data[ti][2][j]


def eval_tasks(model, tasks, args):
    model.eval()
    result = []
    for i, task in enumerate(tasks):
        t = i
        x = task[1]
        y = task[2]
        rt = 0
        eval_bs = x.size(0)
        for b_from in range(0, x.size(0), eval_bs):
            b_to = min(b_from + eval_bs, x.size(0) - 1)
            if b_from == b_to:
                xb = x[b_from].view(1, -1)
                yb = torch.LongTensor([y[b_to]]).view(1, -1)
            else:
                xb = x[b_from:b_to]
                yb = y[b_from:b_to]
            if args.cuda:
                xb = xb.cuda()
            _, pb = torch.max(model(xb, t).data.cpu(), 1, keepdim=False)
            rt += (pb == yb).float().sum()
        result.append(rt / x.size(0))
    return result


def life_experience(model, continuum, x_te, args):
    result_a = []
    result_t = []
    current_task = 0
    time_start = time.time()
    for (i, (x, t, y)) in enumerate(continuum):
        if(((i % args.log_every) == 0) or (t != current_task)):
            result_a.append(eval_tasks(model, x_te, args))
            result_t.append(current_task)
            current_task = t
        v_x = x.view(x.size(0), -1)
        v_y = y.long()
        if args.cuda:
            v_x = v_x.cuda()
            v_y = v_y.cuda()
        model.train()
        model.observe(v_x, t, v_y)
    result_a.append(eval_tasks(model, x_te, args))
    result_t.append(current_task)
    time_end = time.time()
    time_spent = time_end - time_start
    return torch.Tensor(result_t), torch.Tensor(result_a), time_spent


if __name__ == "__main__":
    workdir = tempfile.mkdtemp(prefix='gem_')
    make_mnist_permutations(os.path.join(workdir, 'mnist_permutations.pt'))
    cudnn_enabled = torch.backends.cudnn.enabled
    runs = [['--model', 'single', '--lr', '0.1'],
            ['--model', 'ewc', '--lr', '0.1', '--n_memories', '32', '--memory_strength', '3'],
            ['--model', 'gem', '--lr', '0.1', '--n_memories', '32', '--memory_strength', '0.5']]
    for argv in runs:
        parser = argparse.ArgumentParser(description='Continuum learning')
        # model parameters
        parser.add_argument('--model', type=str, default='single', help='model to train')
        parser.add_argument('--n_hiddens', type=int, default=64, help='number of hidden neurons at each layer')
        parser.add_argument('--n_layers', type=int, default=2, help='number of hidden layers')
        # memory parameters
        parser.add_argument('--n_memories', type=int, default=0, help='number of memories per task')
        parser.add_argument('--memory_strength', default=0, type=float,
                            help='memory strength (meaning depends on memory)')
        parser.add_argument('--finetune', default='no', type=str, help='whether to initialize nets in indep. nets')
        # optimizer parameters
        parser.add_argument('--n_epochs', type=int, default=1, help='Number of epochs per task')
        parser.add_argument('--batch_size', type=int, default=10, help='batch size')
        parser.add_argument('--lr', type=float, default=1e-3, help='SGD learning rate')
        # experiment parameters
        parser.add_argument('--cuda', type=str, default='yes' if torch.cuda.is_available() else 'no', help='Use GPU?')
        parser.add_argument('--seed', type=int, default=0, help='random seed')
        parser.add_argument('--log_every', type=int, default=25, help='frequency of logs, in minibatches')
        parser.add_argument('--save_path', type=str, default=os.path.join(workdir, 'results/'),
                            help='save models at the end of training')
        # data parameters
        parser.add_argument('--data_path', default=workdir, help='path where data is located')
        parser.add_argument('--data_file', default='mnist_permutations.pt', help='data file')
        parser.add_argument('--samples_per_task', type=int, default=-1,
                            help='training samples per task (all if negative)')
        parser.add_argument('--shuffle_tasks', type=str, default='no', help='present tasks in order')
        args = parser.parse_args(argv)
        args.cuda = True if args.cuda == 'yes' else False
        args.finetune = True if args.finetune == 'yes' else False
        # unique identifier
        uid = uuid.uuid4().hex
        # initialize seeds
        torch.backends.cudnn.enabled = False
        torch.manual_seed(args.seed)
        np.random.seed(args.seed)
        random.seed(args.seed)
        if args.cuda:
            torch.cuda.manual_seed_all(args.seed)
        # load data
        x_tr, x_te, n_inputs, n_outputs, n_tasks = load_datasets(args)
        # set up continuum
        continuum = Continuum(x_tr, args)
        # load model
        Model = MODELS[args.model]
        model = Model.Net(n_inputs, n_outputs, n_tasks, args)
        if args.cuda:
            model.cuda()
        # run model on continuum
        result_t, result_a, spent_time = life_experience(model, continuum, x_te, args)
        # prepare saving path and file name
        if not os.path.exists(args.save_path):
            os.makedirs(args.save_path)
        fname = args.model + '_' + args.data_file + '_'
        fname += datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S")
        fname += '_' + uid
        fname = os.path.join(args.save_path, fname)
        # save confusion matrix and print one line of stats
        stats = confusion_matrix(result_t, result_a, fname + '.txt')
        one_liner = str(vars(args)) + ' # '
        one_liner += ' '.join(["%.3f" % stat for stat in stats])
        print(fname + ': ' + one_liner + ' # ' + str(spent_time))
        # save all results in binary file
        torch.save((result_t, result_a, model.state_dict(), stats, one_liner, args), fname + '.pt')
    torch.backends.cudnn.enabled = cudnn_enabled
    print('done: single, ewc and gem ran on {} tasks'.format(n_tasks))
