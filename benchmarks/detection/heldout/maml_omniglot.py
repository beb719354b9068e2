"""Meta-trains a 4-block convolutional network with Model-Agnostic Meta-Learning (MAML) on 5-way 1-shot Omniglot-style
tasks and meta-tests it, as tristandeleu/pytorch-maml does: `train.py` builds the benchmark, an Adam meta-optimizer and
a `ModelAgnosticMetaLearning` learner, which moves the model to its device, moves each task batch there with
`tensors_to_device`, adapts the parameters with `gradient_update_parameters` (second order, `create_graph=True`) and
backpropagates the mean outer loss; the best model is saved next to the run's `config.json`; `test.py` reads the
config, loads the weights with `map_location=device` into a fresh model and evaluates it on meta-test tasks. The parts
of Torchmeta the code uses (`MetaModule`, `MetaConv2d`, `MetaLinear`, `MetaSequential`, `gradient_update_parameters`)
are included.

Modeled on: tristandeleu/pytorch-maml, train.py, test.py, maml/metalearners/maml.py, maml/model.py, maml/utils.py,
maml/datasets.py (https://github.com/tristandeleu/pytorch-maml/tree/44104272a0140b35e2223ba68750e7e715315653) and
tristandeleu/pytorch-meta, torchmeta/modules/*.py, torchmeta/utils/gradient_based.py (https://github.com/tristandeleu/
pytorch-meta/tree/d55d89ebd47f340180267106bde3e4b723f23762).

Kept: `device = torch.device('cuda' if args.use_cuda and torch.cuda.is_available() else 'cpu')` in both scripts; the
meta-optimizer built on the host model BEFORE the learner does `self.model = model.to(device=device)`;
`self.step_size = torch.tensor(step_size, dtype=torch.float32, device=self.device, ...)`; `get_outer_loss` with
`mean_outer_loss = torch.tensor(0., device=self.device)`, numpy result arrays filled with `.item()`,
`torch.set_grad_enabled(self.model.training)`, `mean_outer_loss.div_(num_tasks)`; `adapt` with
`first_order=(not self.model.training) or first_order`; `compute_accuracy` under `torch.no_grad()` returning
`.item()`; the recursive `tensors_to_device`; `train_iter`/`evaluate_iter` with `model.train()`/`model.eval()`;
`BatchMetaDataLoader(..., pin_memory=True)`; `torch.save(benchmark.model.state_dict(), f)` for the best model;
test.py's `torch.load(f, map_location=device)` into a host model and a learner without optimizer.

Changed to run here: Omniglot is replaced by synthetic 28x28 "characters" (random stroke prototypes per class, noise,
shifts) served as torchmeta-style task dicts by a `Dataset` and a plain `DataLoader`; tqdm by a minimal stand-in;
`parse_args([...])` follows the README's Omniglot 5-way 1-shot command (`--use-cuda --step-size 0.4`), test.py's
arguments are a `Namespace`; `json.dump(..., default=float)` (numpy 2 float32); temporary output folder. The
per-parameter step sizes, logging, config overrides and error checks are dropped, argument lists joined.
Shrunk: hidden size 16 instead of 64; 5 test shots instead of 15; 4 tasks per batch instead of 32; 2 epochs of 5
batches instead of 600 of 100; 0 data workers instead of 8.
"""
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections import OrderedDict, namedtuple
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

class MetaModule(nn.Module):
    def meta_named_parameters(self, prefix='', recurse=True):
        gen = self._named_members(
            lambda module: module._parameters.items()
            if isinstance(module, MetaModule) else [],
            prefix=prefix, recurse=recurse)
        for elem in gen:
            yield elem
    def get_subdict(self, params, key=None):
        if params is None:
            return None
        key_re = re.compile(r'^{0}\.(.+)'.format(re.escape(key)))
        return OrderedDict((key_re.sub(r'\1', k), value) for (k, value)
            in params.items() if key_re.match(k) is not None)

class MetaLinear(nn.Linear, MetaModule):
    def forward(self, input, params=None):
        if params is None:
            params = OrderedDict(self.named_parameters())
        return F.linear(input, params['weight'], params.get('bias', None))

class MetaConv2d(nn.Conv2d, MetaModule):
    def forward(self, input, params=None):
        if params is None:
            params = OrderedDict(self.named_parameters())
        return self._conv_forward(input, params['weight'], params.get('bias', None))

class MetaSequential(nn.Sequential, MetaModule):
    def forward(self, input, params=None):
        for name, module in self._modules.items():
            if isinstance(module, MetaModule):
                input = module(input, params=self.get_subdict(params, name))
            elif isinstance(module, nn.Module):
                input = module(input)
        return input

def gradient_update_parameters(model, loss, params=None, step_size=0.5, first_order=False):
    if params is None:
        params = OrderedDict(model.meta_named_parameters())
    grads = torch.autograd.grad(loss, params.values(), create_graph=not first_order)
    updated_params = OrderedDict()
    if isinstance(step_size, (dict, OrderedDict)):
        for (name, param), grad in zip(params.items(), grads):
            updated_params[name] = param - step_size[name] * grad
    else:
        for (name, param), grad in zip(params.items(), grads):
            updated_params[name] = param - step_size * grad
    return updated_params

def conv_block(in_channels, out_channels, **kwargs):
    return MetaSequential(OrderedDict([
        ('conv', MetaConv2d(in_channels, out_channels, **kwargs)),
        ('norm', nn.BatchNorm2d(out_channels, momentum=1., track_running_stats=False)),
        ('relu', nn.ReLU()),
        ('pool', nn.MaxPool2d(2))
    ]))

class MetaConvModel(MetaModule):
    def __init__(self, in_channels, out_features, hidden_size=64, feature_size=64):
        super(MetaConvModel, self).__init__()
        self.in_channels, self.out_features, self.hidden_size, self.feature_size = (
            in_channels, out_features, hidden_size, feature_size)
        self.features = MetaSequential(OrderedDict([
            ('layer1', conv_block(in_channels, hidden_size, kernel_size=3, stride=1, padding=1, bias=True)),
            ('layer2', conv_block(hidden_size, hidden_size, kernel_size=3, stride=1, padding=1, bias=True)),
            ('layer3', conv_block(hidden_size, hidden_size, kernel_size=3, stride=1, padding=1, bias=True)),
            ('layer4', conv_block(hidden_size, hidden_size, kernel_size=3, stride=1, padding=1, bias=True))
        ]))
        self.classifier = MetaLinear(feature_size, out_features, bias=True)
    def forward(self, inputs, params=None):
        features = self.features(inputs, params=self.get_subdict(params, 'features'))
        features = features.view((features.size(0), -1))
        logits = self.classifier(features, params=self.get_subdict(params, 'classifier'))
        return logits

def ModelConvOmniglot(out_features, hidden_size=64):
    return MetaConvModel(1, out_features, hidden_size=hidden_size,
                         feature_size=hidden_size)

def compute_accuracy(logits, targets):
    with torch.no_grad():
        _, predictions = torch.max(logits, dim=1)
        accuracy = torch.mean(predictions.eq(targets).float())
    return accuracy.item()

def tensors_to_device(tensors, device=torch.device('cpu')):
    if isinstance(tensors, torch.Tensor):
        return tensors.to(device=device)
    elif isinstance(tensors, (list, tuple)):
        return type(tensors)(tensors_to_device(tensor, device=device)
            for tensor in tensors)
    elif isinstance(tensors, (dict, OrderedDict)):
        return type(tensors)([(name, tensors_to_device(tensor, device=device))
            for (name, tensor) in tensors.items()])
    else:
        raise NotImplementedError()

class tqdm(object):
    """Stand-in for tqdm: prints the description and the last postfix on exit."""
    def __init__(self, total=None, disable=False, desc=None, leave=True):
        self.desc, self.postfix = desc, {}
    def __enter__(self): return self
    def __exit__(self, *exc):
        print('{0}: {1}'.format(self.desc, ', '.join('{0}={1}'.format(k, v) for k, v in self.postfix.items())))
    def update(self, n=1): pass
    def set_postfix(self, **kwargs): self.postfix = kwargs

class ModelAgnosticMetaLearning(object):
    def __init__(self, model, optimizer=None, step_size=0.1, first_order=False,
                 learn_step_size=False, per_param_step_size=False,
                 num_adaptation_steps=1, scheduler=None,
                 loss_function=F.cross_entropy, device=None):
        self.model = model.to(device=device)
        self.optimizer = optimizer
        self.step_size = step_size
        self.first_order = first_order
        self.num_adaptation_steps = num_adaptation_steps
        self.scheduler = scheduler
        self.loss_function = loss_function
        self.device = device
        self.step_size = torch.tensor(step_size, dtype=torch.float32,
            device=self.device, requires_grad=learn_step_size)
        if (self.optimizer is not None) and learn_step_size:
            self.optimizer.add_param_group({'params': [self.step_size]})
    def get_outer_loss(self, batch):
        _, test_targets = batch['test']
        num_tasks = test_targets.size(0)
        is_classification_task = (not test_targets.dtype.is_floating_point)
        results = {'num_tasks': num_tasks,
                   'inner_losses': np.zeros((self.num_adaptation_steps, num_tasks), dtype=np.float32),
                   'outer_losses': np.zeros((num_tasks,), dtype=np.float32), 'mean_outer_loss': 0.}
        if is_classification_task:
            results.update({'accuracies_before': np.zeros((num_tasks,), dtype=np.float32),
                            'accuracies_after': np.zeros((num_tasks,), dtype=np.float32)})
        mean_outer_loss = torch.tensor(0., device=self.device)
        for task_id, (train_inputs, train_targets, test_inputs, test_targets) \
                in enumerate(zip(*batch['train'], *batch['test'])):
            params, adaptation_results = self.adapt(train_inputs, train_targets,
                is_classification_task=is_classification_task,
                num_adaptation_steps=self.num_adaptation_steps,
                step_size=self.step_size, first_order=self.first_order)
            results['inner_losses'][:, task_id] = adaptation_results['inner_losses']
            if is_classification_task:
                results['accuracies_before'][task_id] = adaptation_results['accuracy_before']
            with torch.set_grad_enabled(self.model.training):
                test_logits = self.model(test_inputs, params=params)
                outer_loss = self.loss_function(test_logits, test_targets)
                results['outer_losses'][task_id] = outer_loss.item()
                mean_outer_loss += outer_loss
            if is_classification_task:
                results['accuracies_after'][task_id] = compute_accuracy(
                    test_logits, test_targets)
        mean_outer_loss.div_(num_tasks)
        results['mean_outer_loss'] = mean_outer_loss.item()
        return mean_outer_loss, results
    def adapt(self, inputs, targets, is_classification_task=None,
              num_adaptation_steps=1, step_size=0.1, first_order=False):
        if is_classification_task is None:
            is_classification_task = (not targets.dtype.is_floating_point)
        params = None
        results = {'inner_losses': np.zeros((num_adaptation_steps,), dtype=np.float32)}
        for step in range(num_adaptation_steps):
            logits = self.model(inputs, params=params)
            inner_loss = self.loss_function(logits, targets)
            results['inner_losses'][step] = inner_loss.item()
            if (step == 0) and is_classification_task:
                results['accuracy_before'] = compute_accuracy(logits, targets)
            self.model.zero_grad()
            params = gradient_update_parameters(self.model, inner_loss,
                step_size=step_size, params=params,
                first_order=(not self.model.training) or first_order)
        return params, results
    def train(self, dataloader, max_batches=500, verbose=True, **kwargs):
        with tqdm(total=max_batches, disable=not verbose, **kwargs) as pbar:
            for results in self.train_iter(dataloader, max_batches=max_batches):
                pbar.update(1)
                postfix = {'loss': '{0:.4f}'.format(results['mean_outer_loss'])}
                if 'accuracies_after' in results:
                    postfix['accuracy'] = '{0:.4f}'.format(np.mean(results['accuracies_after']))
                pbar.set_postfix(**postfix)
    def train_iter(self, dataloader, max_batches=500):
        num_batches = 0
        self.model.train()
        while num_batches < max_batches:
            for batch in dataloader:
                if num_batches >= max_batches:
                    break
                if self.scheduler is not None:
                    self.scheduler.step(epoch=num_batches)
                self.optimizer.zero_grad()
                batch = tensors_to_device(batch, device=self.device)
                outer_loss, results = self.get_outer_loss(batch)
                yield results
                outer_loss.backward()
                self.optimizer.step()
                num_batches += 1
    def evaluate(self, dataloader, max_batches=500, verbose=True, **kwargs):
        mean_outer_loss, mean_accuracy, count = 0., 0., 0
        with tqdm(total=max_batches, disable=not verbose, **kwargs) as pbar:
            for results in self.evaluate_iter(dataloader, max_batches=max_batches):
                pbar.update(1)
                count += 1
                mean_outer_loss += (results['mean_outer_loss'] - mean_outer_loss) / count
                postfix = {'loss': '{0:.4f}'.format(mean_outer_loss)}
                if 'accuracies_after' in results:
                    mean_accuracy += (np.mean(results['accuracies_after']) - mean_accuracy) / count
                    postfix['accuracy'] = '{0:.4f}'.format(mean_accuracy)
                pbar.set_postfix(**postfix)
        mean_results = {'mean_outer_loss': mean_outer_loss}
        if 'accuracies_after' in results:
            mean_results['accuracies_after'] = mean_accuracy
        return mean_results
    def evaluate_iter(self, dataloader, max_batches=500):
        num_batches = 0
        self.model.eval()
        while num_batches < max_batches:
            for batch in dataloader:
                if num_batches >= max_batches:
                    break
                batch = tensors_to_device(batch, device=self.device)
                _, results = self.get_outer_loss(batch)
                yield results
                num_batches += 1

class SyntheticCharacters(Dataset):
    """Each item is a task: `num_ways` random classes, `num_shots` + `num_shots_test` noisy shifted samples each."""
    def __init__(self, num_classes, num_ways, num_shots, num_shots_test, num_tasks=10000, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.prototypes = (torch.rand(num_classes, 1, 28, 28, generator=g) > 0.8).float()
        self.num_ways, self.num_shots, self.num_shots_test = num_ways, num_shots, num_shots_test
        self.num_tasks, self.seed = num_tasks, seed
    def __len__(self): return self.num_tasks
    def _samples(self, protos, n, g):
        x = protos.repeat_interleave(n, 0)
        shifts = torch.randint(-2, 3, (2,), generator=g).tolist()
        x = torch.roll(x, shifts=shifts, dims=(2, 3)) + 0.3 * torch.randn(x.shape, generator=g)
        return x, torch.arange(self.num_ways).repeat_interleave(n)
    def __getitem__(self, index):
        g = torch.Generator().manual_seed(self.seed * 100003 + index)
        classes = torch.randperm(self.prototypes.size(0), generator=g)[:self.num_ways]
        protos = self.prototypes[classes]
        return {'train': self._samples(protos, self.num_shots, g),
                'test': self._samples(protos, self.num_shots_test, g)}

Benchmark = namedtuple('Benchmark', 'meta_train_dataset meta_val_dataset meta_test_dataset model loss_function')

def get_benchmark_by_name(name, folder, num_ways, num_shots, num_shots_test, hidden_size=None):
    assert name == 'omniglot'
    meta_train_dataset, meta_val_dataset, meta_test_dataset = [
        SyntheticCharacters(n, num_ways, num_shots, num_shots_test, seed=i) for i, n in [(1, 60), (2, 20), (3, 20)]]
    model = ModelConvOmniglot(num_ways, hidden_size=hidden_size)
    loss_function = F.cross_entropy
    return Benchmark(meta_train_dataset=meta_train_dataset, meta_val_dataset=meta_val_dataset,
                     meta_test_dataset=meta_test_dataset, model=model, loss_function=loss_function)

BatchMetaDataLoader = DataLoader

def train_main(args):
    device = torch.device('cuda' if args.use_cuda and torch.cuda.is_available() else 'cpu')
    if (args.output_folder is not None):
        if not os.path.exists(args.output_folder):
            os.makedirs(args.output_folder)
        folder = os.path.join(args.output_folder, time.strftime('%Y-%m-%d_%H%M%S'))
        os.makedirs(folder)
        args.folder = os.path.abspath(args.folder)
        args.model_path = os.path.abspath(os.path.join(folder, 'model.th'))
        with open(os.path.join(folder, 'config.json'), 'w') as f:
            json.dump(vars(args), f, indent=2)
    benchmark = get_benchmark_by_name(args.dataset, args.folder, args.num_ways, args.num_shots,
                                      args.num_shots_test, hidden_size=args.hidden_size)
    meta_train_dataloader = BatchMetaDataLoader(benchmark.meta_train_dataset, batch_size=args.batch_size,
                                                shuffle=True, num_workers=args.num_workers, pin_memory=True)
    meta_val_dataloader = BatchMetaDataLoader(benchmark.meta_val_dataset, batch_size=args.batch_size,
                                              shuffle=True, num_workers=args.num_workers, pin_memory=True)
    meta_optimizer = torch.optim.Adam(benchmark.model.parameters(), lr=args.meta_lr)
    metalearner = ModelAgnosticMetaLearning(benchmark.model, meta_optimizer, first_order=args.first_order,
                                            num_adaptation_steps=args.num_steps, step_size=args.step_size,
                                            loss_function=benchmark.loss_function, device=device)
    best_value = None
    epoch_desc = 'Epoch {{0: <{0}d}}'.format(1 + int(math.log10(args.num_epochs)))
    for epoch in range(args.num_epochs):
        metalearner.train(meta_train_dataloader, max_batches=args.num_batches, verbose=args.verbose,
                          desc='Training', leave=False)
        results = metalearner.evaluate(meta_val_dataloader, max_batches=args.num_batches, verbose=args.verbose,
                                       desc=epoch_desc.format(epoch + 1))
        if 'accuracies_after' in results:
            if (best_value is None) or (best_value < results['accuracies_after']):
                best_value = results['accuracies_after']
                save_model = True
        elif (best_value is None) or (best_value > results['mean_outer_loss']):
            best_value = results['mean_outer_loss']
            save_model = True
        else:
            save_model = False
        if save_model and (args.output_folder is not None):
            with open(args.model_path, 'wb') as f:
                torch.save(benchmark.model.state_dict(), f)
    return os.path.join(folder, 'config.json'), best_value

def test_main(args):
    with open(args.config, 'r') as f:
        config = json.load(f)
    if args.num_batches > 0:
        config['num_batches'] = args.num_batches
    device = torch.device('cuda' if args.use_cuda and torch.cuda.is_available() else 'cpu')
    benchmark = get_benchmark_by_name(config['dataset'], config['folder'], config['num_ways'], config['num_shots'],
                                      config['num_shots_test'], hidden_size=config['hidden_size'])
    with open(config['model_path'], 'rb') as f:
        benchmark.model.load_state_dict(torch.load(f, map_location=device))
    meta_test_dataloader = BatchMetaDataLoader(benchmark.meta_test_dataset, batch_size=config['batch_size'],
                                               shuffle=True, num_workers=args.num_workers, pin_memory=True)
    metalearner = ModelAgnosticMetaLearning(benchmark.model, first_order=config['first_order'],
                                            num_adaptation_steps=config['num_steps'], step_size=config['step_size'],
                                            loss_function=benchmark.loss_function, device=device)
    results = metalearner.evaluate(meta_test_dataloader, max_batches=config['num_batches'], verbose=args.verbose,
                                   desc='Test')
    dirname = os.path.dirname(config['model_path'])
    with open(os.path.join(dirname, 'results.json'), 'w') as f:
        json.dump(results, f, default=float)
    return results

if __name__ == '__main__':
    import argparse
    torch.manual_seed(0)
    np.random.seed(0)
    root = tempfile.mkdtemp()
    try:
        parser = argparse.ArgumentParser('MAML')
        parser.add_argument('folder', type=str)
        parser.add_argument('--dataset', type=str, choices=['sinusoid', 'omniglot', 'miniimagenet'], default='omniglot')
        parser.add_argument('--output-folder', type=str, default=None)
        for name, default in [('--num-ways', 5), ('--num-shots', 5), ('--num-shots-test', 15), ('--hidden-size', 64),
                              ('--batch-size', 25), ('--num-steps', 1), ('--num-epochs', 50),
                              ('--num-batches', 100), ('--num-workers', 1)]:
            parser.add_argument(name, type=int, default=default)
        parser.add_argument('--step-size', type=float, default=0.1)
        parser.add_argument('--first-order', action='store_true')
        parser.add_argument('--meta-lr', type=float, default=0.001)
        parser.add_argument('--verbose', action='store_true')
        parser.add_argument('--use-cuda', action='store_true')
        args = parser.parse_args([os.path.join(root, 'data'), '--dataset', 'omniglot', '--num-ways', '5',
                                  '--num-shots', '1', '--num-shots-test', '5', '--use-cuda', '--step-size', '0.4',
                                  '--batch-size', '4', '--num-workers', '0', '--num-epochs', '2',
                                  '--num-batches', '5', '--hidden-size', '16', '--verbose',
                                  '--output-folder', os.path.join(root, 'results')])
        config_path, best_value = train_main(args)

        # python test.py /path/to/results/config.json --use-cuda
        results = test_main(argparse.Namespace(config=config_path, folder=None, num_steps=-1, num_batches=-1,
                                               num_workers=0, verbose=True, use_cuda=True))
    finally:
        shutil.rmtree(root)
    print('done best_val_accuracy={0:.4f} test_loss={1:.4f} test_accuracy={2:.4f}'.format(
        best_value, results['mean_outer_loss'], results['accuracies_after']))
