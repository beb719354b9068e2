"""Runs a DARTS convolutional architecture search (second-order, unrolled) on a synthetic CIFAR-10 split, derives the
genotype, evaluates the supernet and saves/reloads its weights, as quark0/darts does in cnn/: `main` selects the GPU
with ``torch.cuda.set_device(args.gpu)`` and moves criterion and `Network` before the SGD optimizer is built; the
architecture weights ``alphas_normal``/``alphas_reduce`` are plain leaf tensors put on the device in
`_initialize_alphas` (not parameters, so moving the model would not move them); `Network.new` and
`Architect._construct_model_from_theta` move the copies they build; `Architect` has its own Adam over
``arch_parameters()``, reads the SGD ``momentum_buffer`` and does the finite-difference Hessian-vector product in
place on ``p.data``; `train` moves the training batch and a search batch (targets with ``non_blocking``); `infer`
runs under ``model.eval()``; `genotype` reads the alphas with ``.data.cpu().numpy()``; `save`/`load` use
``torch.save``/``torch.load`` on the state dict.

Modeled on: quark0/darts, cnn/train_search.py, cnn/architect.py, cnn/model_search.py, cnn/operations.py,
cnn/genotypes.py and cnn/utils.py at commit f276dd346a09ae3160f8e3aca5c7b193fda1da37
(https://github.com/quark0/darts/blob/f276dd346a09ae3160f8e3aca5c7b193fda1da37/cnn/train_search.py,
https://github.com/quark0/darts/blob/f276dd346a09ae3160f8e3aca5c7b193fda1da37/cnn/architect.py,
https://github.com/quark0/darts/blob/f276dd346a09ae3160f8e3aca5c7b193fda1da37/cnn/model_search.py).

Kept: the ``OPS`` table and `ReLUConvBN`, `DilConv`, `SepConv`, `Zero`, `FactorizedReduce`; ``PRIMITIVES``,
``Genotype``; `MixedOp`, `Cell`, `Network` (``new``, ``_loss``, ``_initialize_alphas``, ``genotype``); `_concat` and
all of `Architect`; utils' `AvgrageMeter`, `accuracy`, `count_parameters_in_MB`, `save`, `load`; train_search.py's
`main`, `train`, `infer` with the SubsetRandomSampler train/search split.

Changed to run here: train_search.py exits without a GPU and calls ``.cuda()``; here ``device`` is ``cuda:{gpu}`` when
``torch.cuda.is_available()`` else ``cpu``, and ``.cuda()``/``.cuda(async=True)`` became ``.to(device)``/
``.to(device, non_blocking=True)``; PyTorch 0.3 idioms are updated (no ``Variable``, ``.item()``, ``alpha=``,
``clip_grad_norm_``, ``torch.no_grad()`` for ``volatile``, scheduler stepped after the epoch); torchvision's CIFAR10
and transforms become a reader of the ``cifar-10-batches-py`` pickle format (synthetic, in a temporary folder) with
crop/flip/normalize in torch; ``num_workers`` 0; after the search the saved weights are reloaded into a new
`Network` (alphas copied) and evaluated again.
Shrunk: 16x16 images, 48 training images (half used for search), init_channels 4, 3 layers, batch 8, 2 epochs;
the unused 7x7 ops are left out.
"""
import argparse
import logging
import os
import pickle
import shutil
import sys
import tempfile
import time
from collections import namedtuple

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data

# ------------------------------------------------------------------ genotypes.py
Genotype = namedtuple('Genotype', 'normal normal_concat reduce reduce_concat')
PRIMITIVES = ['none', 'max_pool_3x3', 'avg_pool_3x3', 'skip_connect',
              'sep_conv_3x3', 'sep_conv_5x5', 'dil_conv_3x3', 'dil_conv_5x5']

# ------------------------------------------------------------------ operations.py
OPS = {
  'none' : lambda C, stride, affine: Zero(stride),
  'avg_pool_3x3' : lambda C, stride, affine: nn.AvgPool2d(3, stride=stride, padding=1, count_include_pad=False),
  'max_pool_3x3' : lambda C, stride, affine: nn.MaxPool2d(3, stride=stride, padding=1),
  'skip_connect' : lambda C, stride, affine: nn.Identity() if stride == 1 else FactorizedReduce(C, C, affine=affine),
  'sep_conv_3x3' : lambda C, stride, affine: SepConv(C, C, 3, stride, 1, affine=affine),
  'sep_conv_5x5' : lambda C, stride, affine: SepConv(C, C, 5, stride, 2, affine=affine),
  'dil_conv_3x3' : lambda C, stride, affine: DilConv(C, C, 3, stride, 2, 2, affine=affine),
  'dil_conv_5x5' : lambda C, stride, affine: DilConv(C, C, 5, stride, 4, 2, affine=affine),
}

class ReLUConvBN(nn.Module):
  def __init__(self, C_in, C_out, kernel_size, stride, padding, affine=True):
    super(ReLUConvBN, self).__init__()
    self.op = nn.Sequential(
      nn.ReLU(inplace=False),
      nn.Conv2d(C_in, C_out, kernel_size, stride=stride, padding=padding, bias=False),
      nn.BatchNorm2d(C_out, affine=affine))

  def forward(self, x):
    return self.op(x)

class DilConv(nn.Module):
  def __init__(self, C_in, C_out, kernel_size, stride, padding, dilation, affine=True):
    super(DilConv, self).__init__()
    self.op = nn.Sequential(
      nn.ReLU(inplace=False),
      nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                groups=C_in, bias=False),
      nn.Conv2d(C_in, C_out, kernel_size=1, padding=0, bias=False),
      nn.BatchNorm2d(C_out, affine=affine))

  def forward(self, x):
    return self.op(x)

class SepConv(nn.Module):
  def __init__(self, C_in, C_out, kernel_size, stride, padding, affine=True):
    super(SepConv, self).__init__()
    self.op = nn.Sequential(
      nn.ReLU(inplace=False),
      nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=stride, padding=padding, groups=C_in, bias=False),
      nn.Conv2d(C_in, C_in, kernel_size=1, padding=0, bias=False),
      nn.BatchNorm2d(C_in, affine=affine),
      nn.ReLU(inplace=False),
      nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=1, padding=padding, groups=C_in, bias=False),
      nn.Conv2d(C_in, C_out, kernel_size=1, padding=0, bias=False),
      nn.BatchNorm2d(C_out, affine=affine))

  def forward(self, x):
    return self.op(x)

class Zero(nn.Module):
  def __init__(self, stride):
    super(Zero, self).__init__()
    self.stride = stride

  def forward(self, x):
    if self.stride == 1:
      return x.mul(0.)
    return x[:, :, ::self.stride, ::self.stride].mul(0.)

class FactorizedReduce(nn.Module):
  def __init__(self, C_in, C_out, affine=True):
    super(FactorizedReduce, self).__init__()
    assert C_out % 2 == 0
    self.relu = nn.ReLU(inplace=False)
    self.conv_1 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
    self.conv_2 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
    self.bn = nn.BatchNorm2d(C_out, affine=affine)

  def forward(self, x):
    x = self.relu(x)
    out = torch.cat([self.conv_1(x), self.conv_2(x[:, :, 1:, 1:])], dim=1)
    return self.bn(out)

# ------------------------------------------------------------------ model_search.py
class MixedOp(nn.Module):
  def __init__(self, C, stride):
    super(MixedOp, self).__init__()
    self._ops = nn.ModuleList()
    for primitive in PRIMITIVES:
      op = OPS[primitive](C, stride, False)
      if 'pool' in primitive:
        op = nn.Sequential(op, nn.BatchNorm2d(C, affine=False))
      self._ops.append(op)

  def forward(self, x, weights):
    return sum(w * op(x) for w, op in zip(weights, self._ops))

class Cell(nn.Module):
  def __init__(self, steps, multiplier, C_prev_prev, C_prev, C, reduction, reduction_prev):
    super(Cell, self).__init__()
    self.reduction = reduction
    if reduction_prev:
      self.preprocess0 = FactorizedReduce(C_prev_prev, C, affine=False)
    else:
      self.preprocess0 = ReLUConvBN(C_prev_prev, C, 1, 1, 0, affine=False)
    self.preprocess1 = ReLUConvBN(C_prev, C, 1, 1, 0, affine=False)
    self._steps = steps
    self._multiplier = multiplier
    self._ops = nn.ModuleList()
    for i in range(self._steps):
      for j in range(2 + i):
        stride = 2 if reduction and j < 2 else 1
        self._ops.append(MixedOp(C, stride))

  def forward(self, s0, s1, weights):
    s0 = self.preprocess0(s0)
    s1 = self.preprocess1(s1)
    states = [s0, s1]
    offset = 0
    for i in range(self._steps):
      s = sum(self._ops[offset + j](h, weights[offset + j]) for j, h in enumerate(states))
      offset += len(states)
      states.append(s)
    return torch.cat(states[-self._multiplier:], dim=1)

class Network(nn.Module):
  def __init__(self, C, num_classes, layers, criterion, steps=4, multiplier=4, stem_multiplier=3):
    super(Network, self).__init__()
    self._C, self._num_classes, self._layers, self._criterion = C, num_classes, layers, criterion
    self._steps, self._multiplier = steps, multiplier
    C_curr = stem_multiplier * C
    self.stem = nn.Sequential(nn.Conv2d(3, C_curr, 3, padding=1, bias=False), nn.BatchNorm2d(C_curr))
    C_prev_prev, C_prev, C_curr = C_curr, C_curr, C
    self.cells = nn.ModuleList()
    reduction_prev = False
    for i in range(layers):
      if i in [layers // 3, 2 * layers // 3]:
        C_curr *= 2
        reduction = True
      else:
        reduction = False
      cell = Cell(steps, multiplier, C_prev_prev, C_prev, C_curr, reduction, reduction_prev)
      reduction_prev = reduction
      self.cells += [cell]
      C_prev_prev, C_prev = C_prev, multiplier * C_curr
    self.global_pooling = nn.AdaptiveAvgPool2d(1)
    self.classifier = nn.Linear(C_prev, num_classes)
    self._initialize_alphas()

  def new(self):
    model_new = Network(self._C, self._num_classes, self._layers, self._criterion).to(device)
    for x, y in zip(model_new.arch_parameters(), self.arch_parameters()):
      x.data.copy_(y.data)
    return model_new

  def forward(self, input):
    s0 = s1 = self.stem(input)
    for i, cell in enumerate(self.cells):
      if cell.reduction:
        weights = F.softmax(self.alphas_reduce, dim=-1)
      else:
        weights = F.softmax(self.alphas_normal, dim=-1)
      s0, s1 = s1, cell(s0, s1, weights)
    out = self.global_pooling(s1)
    logits = self.classifier(out.view(out.size(0), -1))
    return logits

  def _loss(self, input, target):
    logits = self(input)
    return self._criterion(logits, target)

  def _initialize_alphas(self):
    k = sum(1 for i in range(self._steps) for n in range(2 + i))
    num_ops = len(PRIMITIVES)
    self.alphas_normal = (1e-3 * torch.randn(k, num_ops).to(device)).requires_grad_(True)
    self.alphas_reduce = (1e-3 * torch.randn(k, num_ops).to(device)).requires_grad_(True)
    self._arch_parameters = [self.alphas_normal, self.alphas_reduce]

  def arch_parameters(self):
    return self._arch_parameters

  def genotype(self):
    def _parse(weights):
      gene = []
      n = 2
      start = 0
      for i in range(self._steps):
        end = start + n
        W = weights[start:end].copy()
        edges = sorted(range(i + 2), key=lambda x: -max(W[x][k] for k in range(len(W[x]))
                                                         if k != PRIMITIVES.index('none')))[:2]
        for j in edges:
          k_best = None
          for k in range(len(W[j])):
            if k != PRIMITIVES.index('none'):
              if k_best is None or W[j][k] > W[j][k_best]:
                k_best = k
          gene.append((PRIMITIVES[k_best], j))
        start = end
        n += 1
      return gene
    gene_normal = _parse(F.softmax(self.alphas_normal, dim=-1).data.cpu().numpy())
    gene_reduce = _parse(F.softmax(self.alphas_reduce, dim=-1).data.cpu().numpy())
    concat = range(2 + self._steps - self._multiplier, self._steps + 2)
    return Genotype(normal=gene_normal, normal_concat=concat, reduce=gene_reduce, reduce_concat=concat)

# ------------------------------------------------------------------ architect.py
def _concat(xs):
  return torch.cat([x.view(-1) for x in xs])

class Architect(object):
  def __init__(self, model, args):
    self.network_momentum = args.momentum
    self.network_weight_decay = args.weight_decay
    self.model = model
    self.optimizer = torch.optim.Adam(self.model.arch_parameters(),
        lr=args.arch_learning_rate, betas=(0.5, 0.999), weight_decay=args.arch_weight_decay)

  def _compute_unrolled_model(self, input, target, eta, network_optimizer):
    loss = self.model._loss(input, target)
    theta = _concat(self.model.parameters()).data
    try:
      moment = _concat(network_optimizer.state[v]['momentum_buffer']
                       for v in self.model.parameters()).mul_(self.network_momentum)
    except:
      moment = torch.zeros_like(theta)
    dtheta = _concat(torch.autograd.grad(loss, self.model.parameters())).data + self.network_weight_decay * theta
    unrolled_model = self._construct_model_from_theta(theta.sub(moment + dtheta, alpha=eta))
    return unrolled_model

  def step(self, input_train, target_train, input_valid, target_valid, eta, network_optimizer, unrolled):
    self.optimizer.zero_grad()
    if unrolled:
      self._backward_step_unrolled(input_train, target_train, input_valid, target_valid, eta, network_optimizer)
    else:
      self._backward_step(input_valid, target_valid)
    self.optimizer.step()

  def _backward_step(self, input_valid, target_valid):
    loss = self.model._loss(input_valid, target_valid)
    loss.backward()

  def _backward_step_unrolled(self, input_train, target_train, input_valid, target_valid, eta, network_optimizer):
    unrolled_model = self._compute_unrolled_model(input_train, target_train, eta, network_optimizer)
    unrolled_loss = unrolled_model._loss(input_valid, target_valid)
    unrolled_loss.backward()
    dalpha = [v.grad for v in unrolled_model.arch_parameters()]
    vector = [v.grad.data for v in unrolled_model.parameters()]
    implicit_grads = self._hessian_vector_product(vector, input_train, target_train)
    for g, ig in zip(dalpha, implicit_grads):
      g.data.sub_(ig.data, alpha=eta)
    for v, g in zip(self.model.arch_parameters(), dalpha):
      if v.grad is None:
        v.grad = g.data.clone()
      else:
        v.grad.data.copy_(g.data)

  def _construct_model_from_theta(self, theta):
    model_new = self.model.new()
    model_dict = self.model.state_dict()
    params, offset = {}, 0
    for k, v in self.model.named_parameters():
      v_length = int(np.prod(v.size()))
      params[k] = theta[offset: offset + v_length].view(v.size())
      offset += v_length
    assert offset == len(theta)
    model_dict.update(params)
    model_new.load_state_dict(model_dict)
    return model_new.to(device)

  def _hessian_vector_product(self, vector, input, target, r=1e-2):
    R = r / _concat(vector).norm()
    for p, v in zip(self.model.parameters(), vector):
      p.data.add_(v, alpha=R)
    loss = self.model._loss(input, target)
    grads_p = torch.autograd.grad(loss, self.model.arch_parameters())
    for p, v in zip(self.model.parameters(), vector):
      p.data.sub_(v, alpha=2 * R)
    loss = self.model._loss(input, target)
    grads_n = torch.autograd.grad(loss, self.model.arch_parameters())
    for p, v in zip(self.model.parameters(), vector):
      p.data.add_(v, alpha=R)
    return [(x - y).div_(2 * R) for x, y in zip(grads_p, grads_n)]

# ------------------------------------------------------------------ utils.py
class AvgrageMeter(object):
  def __init__(self):
    self.reset()

  def reset(self):
    self.avg, self.sum, self.cnt = 0, 0, 0

  def update(self, val, n=1):
    self.sum += val * n
    self.cnt += n
    self.avg = self.sum / self.cnt

def accuracy(output, target, topk=(1,)):
  maxk = max(topk)
  batch_size = target.size(0)
  _, pred = output.topk(maxk, 1, True, True)
  pred = pred.t()
  correct = pred.eq(target.view(1, -1).expand_as(pred))
  res = []
  for k in topk:
    correct_k = correct[:k].reshape(-1).float().sum(0)
    res.append(correct_k.mul_(100.0 / batch_size))
  return res

def count_parameters_in_MB(model):
  return np.sum([np.prod(v.size()) for name, v in model.named_parameters() if "auxiliary" not in name]) / 1e6

def save(model, model_path):
  torch.save(model.state_dict(), model_path)

def load(model, model_path):
  model.load_state_dict(torch.load(model_path))

class CIFAR10(torch.utils.data.Dataset):
  """torchvision.datasets.CIFAR10 stand-in: reads cifar-10-batches-py/data_batch_* pickles."""

  def __init__(self, root, train=True, transform=None):
    files = ['data_batch_1'] if train else ['test_batch']
    data, labels = [], []
    for f in files:
      with open(os.path.join(root, 'cifar-10-batches-py', f), 'rb') as fo:
        entry = pickle.load(fo, encoding='latin1')
      data.append(entry['data'])
      labels.extend(entry['labels'])
    side = int(np.sqrt(data[0].shape[1] // 3))
    self.data = np.vstack(data).reshape(-1, 3, side, side)
    self.targets = labels
    self.transform = transform

  def __getitem__(self, index):
    img = torch.from_numpy(self.data[index]).float().div(255.)  # ToTensor
    return self.transform(img), self.targets[index]

  def __len__(self):
    return len(self.data)

def _data_transforms_cifar10(args):
  CIFAR_MEAN = torch.tensor([0.49139968, 0.48215827, 0.44653124]).view(3, 1, 1)
  CIFAR_STD = torch.tensor([0.24703233, 0.24348505, 0.26158768]).view(3, 1, 1)

  def train_transform(img):  # RandomCrop(padding=4 -> 2), RandomHorizontalFlip, Normalize
    side = img.size(1)
    img = F.pad(img, (2, 2, 2, 2))
    i, j = np.random.randint(0, 5, size=2)
    img = img[:, i:i + side, j:j + side]
    if np.random.rand() < 0.5:
      img = img.flip(2)
    return (img - CIFAR_MEAN) / CIFAR_STD

  def valid_transform(img):
    return (img - CIFAR_MEAN) / CIFAR_STD
  return train_transform, valid_transform

def write_fake_cifar(root, n=48, side=16, seed=0):
  rng = np.random.RandomState(seed)
  os.makedirs(os.path.join(root, 'cifar-10-batches-py'))
  labels = rng.randint(0, 10, size=n)
  base = rng.randint(0, 256, size=(10, 3 * side * side))
  data = np.clip(base[labels] + rng.randint(-40, 40, size=(n, 3 * side * side)), 0, 255).astype(np.uint8)
  with open(os.path.join(root, 'cifar-10-batches-py', 'data_batch_1'), 'wb') as fo:
    pickle.dump({'data': data, 'labels': labels.tolist(), 'batch_label': 'synthetic'}, fo)

# ------------------------------------------------------------------ train_search.py
CIFAR_CLASSES = 10
device = torch.device('cpu')

def main(args):
  global device
  np.random.seed(args.seed)
  if torch.cuda.is_available():
    torch.cuda.set_device(args.gpu)
    device = torch.device('cuda', args.gpu)
  else:
    logging.info('no gpu device available, searching on the cpu')
  cudnn.benchmark = True
  torch.manual_seed(args.seed)
  cudnn.enabled = True
  torch.cuda.manual_seed(args.seed)
  logging.info('gpu device = %d' % args.gpu)
  criterion = nn.CrossEntropyLoss()
  criterion = criterion.to(device)
  model = Network(args.init_channels, CIFAR_CLASSES, args.layers, criterion)
  model = model.to(device)
  logging.info("param size = %fMB", count_parameters_in_MB(model))
  optimizer = torch.optim.SGD(model.parameters(), args.learning_rate, momentum=args.momentum,
                              weight_decay=args.weight_decay)
  train_transform, valid_transform = _data_transforms_cifar10(args)
  train_data = CIFAR10(root=args.data, train=True, transform=train_transform)
  num_train = len(train_data)
  indices = list(range(num_train))
  split = int(np.floor(args.train_portion * num_train))
  train_queue = torch.utils.data.DataLoader(
      train_data, batch_size=args.batch_size,
      sampler=torch.utils.data.sampler.SubsetRandomSampler(indices[:split]), pin_memory=True, num_workers=0)
  valid_queue = torch.utils.data.DataLoader(
      train_data, batch_size=args.batch_size,
      sampler=torch.utils.data.sampler.SubsetRandomSampler(indices[split:num_train]), pin_memory=True,
      num_workers=0)
  scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, float(args.epochs),
                                                         eta_min=args.learning_rate_min)
  architect = Architect(model, args)
  for epoch in range(args.epochs):
    lr = scheduler.get_last_lr()[0]
    logging.info('epoch %d lr %e', epoch, lr)
    genotype = model.genotype()
    logging.info('genotype = %s', genotype)
    print(F.softmax(model.alphas_normal, dim=-1)[:2])
    print(F.softmax(model.alphas_reduce, dim=-1)[:2])
    # training
    train_acc, train_obj = train(args, train_queue, valid_queue, model, architect, criterion, optimizer, lr)
    logging.info('train_acc %f', train_acc)
    # validation
    valid_acc, valid_obj = infer(args, valid_queue, model, criterion)
    logging.info('valid_acc %f', valid_acc)
    save(model, os.path.join(args.save, 'weights.pt'))
    scheduler.step()
  # reload the saved supernet weights (the architecture weights are not in the state dict) and re-evaluate
  model2 = Network(args.init_channels, CIFAR_CLASSES, args.layers, criterion).to(device)
  load(model2, os.path.join(args.save, 'weights.pt'))
  for x, y in zip(model2.arch_parameters(), model.arch_parameters()):
    x.data.copy_(y.data)
  valid_acc2, valid_obj2 = infer(args, valid_queue, model2, criterion)
  return model.genotype(), valid_acc, valid_obj2

def train(args, train_queue, valid_queue, model, architect, criterion, optimizer, lr):
  objs, top1, top5 = AvgrageMeter(), AvgrageMeter(), AvgrageMeter()
  for step, (input, target) in enumerate(train_queue):
    model.train()
    n = input.size(0)
    input = input.to(device)
    target = target.to(device, non_blocking=True)
    # get a random minibatch from the search queue with replacement
    input_search, target_search = next(iter(valid_queue))
    input_search = input_search.to(device)
    target_search = target_search.to(device, non_blocking=True)
    architect.step(input, target, input_search, target_search, lr, optimizer, unrolled=args.unrolled)
    optimizer.zero_grad()
    logits = model(input)
    loss = criterion(logits, target)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    optimizer.step()
    prec1, prec5 = accuracy(logits, target, topk=(1, 5))
    objs.update(loss.item(), n)
    top1.update(prec1.item(), n)
    top5.update(prec5.item(), n)
    if step % args.report_freq == 0:
      logging.info('train %03d %e %f %f', step, objs.avg, top1.avg, top5.avg)
  return top1.avg, objs.avg

def infer(args, valid_queue, model, criterion):
  objs, top1, top5 = AvgrageMeter(), AvgrageMeter(), AvgrageMeter()
  model.eval()
  with torch.no_grad():
    for step, (input, target) in enumerate(valid_queue):
      input = input.to(device)
      target = target.to(device, non_blocking=True)
      logits = model(input)
      loss = criterion(logits, target)
      prec1, prec5 = accuracy(logits, target, topk=(1, 5))
      n = input.size(0)
      objs.update(loss.item(), n)
      top1.update(prec1.item(), n)
      top5.update(prec5.item(), n)
      if step % args.report_freq == 0:
        logging.info('valid %03d %e %f %f', step, objs.avg, top1.avg, top5.avg)
  return top1.avg, objs.avg

if __name__ == '__main__':
  parser = argparse.ArgumentParser("cifar")
  for name, typ, default in [('data', str, '../data'), ('batch_size', int, 8), ('learning_rate', float, 0.025),
                             ('learning_rate_min', float, 0.001), ('momentum', float, 0.9),
                             ('weight_decay', float, 3e-4), ('report_freq', float, 2), ('gpu', int, 0),
                             ('epochs', int, 2), ('init_channels', int, 4), ('layers', int, 3), ('save', str, 'EXP'),
                             ('seed', int, 2), ('grad_clip', float, 5), ('train_portion', float, 0.5),
                             ('arch_learning_rate', float, 3e-4), ('arch_weight_decay', float, 1e-3)]:
    parser.add_argument('--' + name, type=typ, default=default)
  parser.add_argument('--unrolled', action='store_true', default=True)
  args = parser.parse_args([])
  tmp = tempfile.mkdtemp(prefix='darts_')
  try:
    args.data = os.path.join(tmp, 'data')
    write_fake_cifar(args.data)
    args.save = os.path.join(tmp, 'search-{}-{}'.format(args.save, time.strftime("%Y%m%d-%H%M%S")))
    os.mkdir(args.save)
    log_format = '%(asctime)s %(message)s'
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format=log_format, datefmt='%m/%d %I:%M:%S %p')
    fh = logging.FileHandler(os.path.join(args.save, 'log.txt'))
    fh.setFormatter(logging.Formatter(log_format))
    logging.getLogger().addHandler(fh)
    genotype, valid_acc, reload_obj = main(args)
    logging.getLogger().removeHandler(fh)
    fh.close()
    print("done genotype_normal={} valid_acc={:.1f} reloaded_loss={:.4f}".format(
        [op for op, _ in genotype.normal][:4], valid_acc, reload_obj))
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
