"""Trains N-BEATS (stacks of trend, seasonality and generic blocks with doubly residual stacking) with the PyTorch
trainer example of philipperemy/n-beats on synthetic seasonal series and on an M4-Daily-style CSV, checkpointing the
model and optimizer and resuming from the checkpoint, then runs simple_example.py's PyTorch half (Keras-like
`compile`/`fit`/`predict`, `save` and `load` of the whole module). The device is passed down: trainer_pytorch.py
picks ``torch.device('cuda') if not args.disable_cuda and torch.cuda.is_available() else torch.device('cpu')`` and
builds ``NBeatsNet(device=device, ...)``, which hands it to every block; the blocks live in plain Python lists (only
their parameters are registered, through an ``nn.ParameterList`` that shadows ``self.parameters``), and
``self.to(self.device)`` moves those; each block moves its input with ``x.to(self.device)``, the trend/seasonality
bases are built from numpy and moved with ``.to(device)`` on every call, and `forward` starts the forecast as a CPU
``torch.zeros`` moved with ``.to(self.device)``. `simple_fit` moves numpy batches with ``torch.tensor(...).to(device)``;
the checkpoint holds state dicts and is loaded with ``torch.load(CHECKPOINT_NAME)`` (no map_location); `plot` feeds
a CPU tensor to the model and reads ``f.cpu().numpy()``. simple_example.py keeps the default
``device=torch.device('cpu')``, so `fit` and `predict` (which call ``.numpy()`` on outputs) stay on the CPU.

Modeled on: philipperemy/n-beats, nbeats_pytorch/model.py, examples/trainer_pytorch.py, examples/data.py and
examples/simple_example.py at commit 06a4e209ada80bf1f403ced5228261784dfb26ed (https://github.com/philipperemy/n-beats).

Kept: nbeats_pytorch/model.py as written (NBeatsNet with `create_stack`, `save`/`load`, `compile`, `fit`, `predict`,
`forward`; `squeeze_last_dim`, `seasonality_model`, `trend_model`, `linear_space`, `Block` and its three subclasses)
but for the unused intermediate-output getters and `name`; trainer_pytorch.py's `get_script_arguments`, `split`,
`batcher`, `main`, `simple_fit`, `save`, `load` and `plot`; data.py's `dummy_data_generator` (seasonality signal) and
`get_m4_data` (training branch); simple_example.py's `main` for the PyTorch model.
Changed to run here: the M4 CSV is synthetic and every file goes to a temporary folder; `get_script_arguments` and
`main` take argument lists; `Block.__str__` leaves out the block's ``id()`` so the printout repeats; `plot` saves the
series and forecasts with `np.save` (no matplotlib); simple_example.py's Keras model is left out; model.py's blank
lines between methods dropped; numpy's global generator is seeded once so the synthetic series repeat.
Shrunk: hidden units 1024 are 64, backcast 5 x forecast 10, ``--test`` (5 gradient steps, checkpoint at step 0),
150 M4-style series of 80-120 days; simple_example.py uses 2,000 samples, 3 epochs, 16 hidden units.
"""
import csv
import os
import pickle
import random
import tempfile
from argparse import ArgumentParser
from time import time
from typing import Union

import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.nn.functional import mse_loss, l1_loss, binary_cross_entropy, cross_entropy
from torch.optim import Optimizer


# ---------------------------------------------------------------- nbeats_pytorch/model.py
class NBeatsNet(nn.Module):
    SEASONALITY_BLOCK = 'seasonality'
    TREND_BLOCK = 'trend'
    GENERIC_BLOCK = 'generic'
    def __init__(
            self,
            device=torch.device('cpu'),
            stack_types=(TREND_BLOCK, SEASONALITY_BLOCK),
            nb_blocks_per_stack=3,
            forecast_length=5,
            backcast_length=10,
            thetas_dim=(4, 8),
            share_weights_in_stack=False,
            hidden_layer_units=256,
            nb_harmonics=None
    ):
        super(NBeatsNet, self).__init__()
        self.forecast_length = forecast_length
        self.backcast_length = backcast_length
        self.hidden_layer_units = hidden_layer_units
        self.nb_blocks_per_stack = nb_blocks_per_stack
        self.share_weights_in_stack = share_weights_in_stack
        self.nb_harmonics = nb_harmonics
        self.stack_types = stack_types
        self.stacks = []
        self.thetas_dim = thetas_dim
        self.parameters = []
        self.device = device
        print('| N-Beats')
        for stack_id in range(len(self.stack_types)):
            self.stacks.append(self.create_stack(stack_id))
        self.parameters = nn.ParameterList(self.parameters)
        self.to(self.device)
        self._loss = None
        self._opt = None
        self._gen_intermediate_outputs = False
        self._intermediary_outputs = []
    def create_stack(self, stack_id):
        stack_type = self.stack_types[stack_id]
        print(f'| --  Stack {stack_type.title()} (#{stack_id}) (share_weights_in_stack={self.share_weights_in_stack})')
        blocks = []
        for block_id in range(self.nb_blocks_per_stack):
            block_init = NBeatsNet.select_block(stack_type)
            if self.share_weights_in_stack and block_id != 0:
                block = blocks[-1]  # pick up the last one when we share weights.
            else:
                block = block_init(
                    self.hidden_layer_units, self.thetas_dim[stack_id],
                    self.device, self.backcast_length, self.forecast_length,
                    self.nb_harmonics
                )
                self.parameters.extend(block.parameters())
            print(f'     | -- {block}')
            blocks.append(block)
        return blocks
    def save(self, filename: str):
        torch.save(self, filename)
    @staticmethod
    def load(f, map_location=None, pickle_module=pickle, **pickle_load_args):
        return torch.load(f, map_location, pickle_module, **pickle_load_args)
    @staticmethod
    def select_block(block_type):
        if block_type == NBeatsNet.SEASONALITY_BLOCK:
            return SeasonalityBlock
        elif block_type == NBeatsNet.TREND_BLOCK:
            return TrendBlock
        else:
            return GenericBlock
    def compile(self, loss: str, optimizer: Union[str, Optimizer]):
        if loss == 'mae':
            loss_ = l1_loss
        elif loss == 'mse':
            loss_ = mse_loss
        elif loss == 'cross_entropy':
            loss_ = cross_entropy
        elif loss == 'binary_crossentropy':
            loss_ = binary_cross_entropy
        else:
            raise ValueError(f'Unknown loss name: {loss}.')
        # noinspection PyArgumentList
        if isinstance(optimizer, str):
            if optimizer == 'adam':
                opt_ = optim.Adam
            elif optimizer == 'sgd':
                opt_ = optim.SGD
            elif optimizer == 'rmsprop':
                opt_ = optim.RMSprop
            else:
                raise ValueError(f'Unknown opt name: {optimizer}.')
            opt_ = opt_(lr=1e-4, params=self.parameters())
        else:
            opt_ = optimizer
        self._opt = opt_
        self._loss = loss_
    def fit(self, x_train, y_train, validation_data=None, epochs=10, batch_size=32):

        def split(arr, size):
            arrays = []
            while len(arr) > size:
                slice_ = arr[:size]
                arrays.append(slice_)
                arr = arr[size:]
            arrays.append(arr)
            return arrays

        for epoch in range(epochs):
            x_train_list = split(x_train, batch_size)
            y_train_list = split(y_train, batch_size)
            assert len(x_train_list) == len(y_train_list)
            shuffled_indices = list(range(len(x_train_list)))
            random.shuffle(shuffled_indices)
            self.train()
            train_loss = []
            timer = time()
            for batch_id in shuffled_indices:
                batch_x, batch_y = x_train_list[batch_id], y_train_list[batch_id]
                self._opt.zero_grad()
                _, forecast = self(torch.tensor(batch_x, dtype=torch.float).to(self.device))
                loss = self._loss(forecast, squeeze_last_dim(torch.tensor(batch_y, dtype=torch.float).to(self.device)))
                train_loss.append(loss.item())
                loss.backward()
                self._opt.step()
            elapsed_time = time() - timer
            train_loss = np.mean(train_loss)

            test_loss = '[undefined]'
            if validation_data is not None:
                x_test, y_test = validation_data
                self.eval()
                _, forecast = self(torch.tensor(x_test, dtype=torch.float).to(self.device))
                test_loss = self._loss(forecast, squeeze_last_dim(torch.tensor(y_test, dtype=torch.float))).item()

            num_samples = len(x_train_list)
            time_per_step = int(elapsed_time / num_samples * 1000)
            print(f'Epoch {str(epoch + 1).zfill(len(str(epochs)))}/{epochs}')
            print(f'{num_samples}/{num_samples} [==============================] - '
                  f'{int(elapsed_time)}s {time_per_step}ms/step - '
                  f'loss: {train_loss:.4f} - val_loss: {test_loss:.4f}')
    def predict(self, x, return_backcast=False):
        self.eval()
        b, f = self(torch.tensor(x, dtype=torch.float).to(self.device))
        b, f = b.detach().numpy(), f.detach().numpy()
        if len(x.shape) == 3:
            b = np.expand_dims(b, axis=-1)
            f = np.expand_dims(f, axis=-1)
        if return_backcast:
            return b
        return f
    def forward(self, backcast):
        self._intermediary_outputs = []
        backcast = squeeze_last_dim(backcast)
        forecast = torch.zeros(size=(backcast.size()[0], self.forecast_length,))  # maybe batch size here.
        for stack_id in range(len(self.stacks)):
            for block_id in range(len(self.stacks[stack_id])):
                b, f = self.stacks[stack_id][block_id](backcast)
                backcast = backcast.to(self.device) - b
                forecast = forecast.to(self.device) + f
                block_type = self.stacks[stack_id][block_id].__class__.__name__
                layer_name = f'stack_{stack_id}-{block_type}_{block_id}'
                if self._gen_intermediate_outputs:
                    self._intermediary_outputs.append({'value': f.detach().numpy(), 'layer': layer_name})
        return backcast, forecast

def squeeze_last_dim(tensor):
    if len(tensor.shape) == 3 and tensor.shape[-1] == 1:  # (128, 10, 1) => (128, 10).
        return tensor[..., 0]
    return tensor

def seasonality_model(thetas, t, device):
    p = thetas.size()[-1]
    assert p <= thetas.shape[1], 'thetas_dim is too big.'
    p1, p2 = (p // 2, p // 2) if p % 2 == 0 else (p // 2, p // 2 + 1)
    s1 = torch.tensor(np.array([np.cos(2 * np.pi * i * t) for i in range(p1)])).float()  # H/2-1
    s2 = torch.tensor(np.array([np.sin(2 * np.pi * i * t) for i in range(p2)])).float()
    S = torch.cat([s1, s2])
    return thetas.mm(S.to(device))

def trend_model(thetas, t, device):
    p = thetas.size()[-1]
    assert p <= 4, 'thetas_dim is too big.'
    T = torch.tensor(np.array([t ** i for i in range(p)])).float()
    return thetas.mm(T.to(device))

def linear_space(backcast_length, forecast_length, is_forecast=True):
    horizon = forecast_length if is_forecast else backcast_length
    return np.arange(0, horizon) / horizon

class Block(nn.Module):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5, share_thetas=False,
                 nb_harmonics=None):
        super(Block, self).__init__()
        self.units = units
        self.thetas_dim = thetas_dim
        self.backcast_length = backcast_length
        self.forecast_length = forecast_length
        self.share_thetas = share_thetas
        self.fc1 = nn.Linear(backcast_length, units)
        self.fc2 = nn.Linear(units, units)
        self.fc3 = nn.Linear(units, units)
        self.fc4 = nn.Linear(units, units)
        self.device = device
        self.backcast_linspace = linear_space(backcast_length, forecast_length, is_forecast=False)
        self.forecast_linspace = linear_space(backcast_length, forecast_length, is_forecast=True)
        if share_thetas:
            self.theta_f_fc = self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
        else:
            self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
            self.theta_f_fc = nn.Linear(units, thetas_dim, bias=False)
    def forward(self, x):
        x = squeeze_last_dim(x)
        x = F.relu(self.fc1(x.to(self.device)))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        x = F.relu(self.fc4(x))
        return x
    def __str__(self):
        block_type = type(self).__name__
        return f'{block_type}(units={self.units}, thetas_dim={self.thetas_dim}, ' \
               f'backcast_length={self.backcast_length}, forecast_length={self.forecast_length}, ' \
               f'share_thetas={self.share_thetas})'  # (the author appends ' at @{id(self)}')

class SeasonalityBlock(Block):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5, nb_harmonics=None):
        if nb_harmonics:
            super(SeasonalityBlock, self).__init__(units, nb_harmonics, device, backcast_length,
                                                   forecast_length, share_thetas=True)
        else:
            super(SeasonalityBlock, self).__init__(units, forecast_length, device, backcast_length,
                                                   forecast_length, share_thetas=True)
    def forward(self, x):
        x = super(SeasonalityBlock, self).forward(x)
        backcast = seasonality_model(self.theta_b_fc(x), self.backcast_linspace, self.device)
        forecast = seasonality_model(self.theta_f_fc(x), self.forecast_linspace, self.device)
        return backcast, forecast

class TrendBlock(Block):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5, nb_harmonics=None):
        super(TrendBlock, self).__init__(units, thetas_dim, device, backcast_length,
                                         forecast_length, share_thetas=True)
    def forward(self, x):
        x = super(TrendBlock, self).forward(x)
        backcast = trend_model(self.theta_b_fc(x), self.backcast_linspace, self.device)
        forecast = trend_model(self.theta_f_fc(x), self.forecast_linspace, self.device)
        return backcast, forecast

class GenericBlock(Block):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5, nb_harmonics=None):
        super(GenericBlock, self).__init__(units, thetas_dim, device, backcast_length, forecast_length)

        self.backcast_fc = nn.Linear(thetas_dim, backcast_length)
        self.forecast_fc = nn.Linear(thetas_dim, forecast_length)
    def forward(self, x):
        # no constraint for generic arch.
        x = super(GenericBlock, self).forward(x)

        theta_b = self.theta_b_fc(x)
        theta_f = self.theta_f_fc(x)

        backcast = self.backcast_fc(theta_b)  # generic. 3.3.
        forecast = self.forecast_fc(theta_f)  # generic. 3.3.

        return backcast, forecast


# ---------------------------------------------------------------- examples/data.py
def dummy_data_generator(backcast_length, forecast_length, signal_type='seasonality', random=False, batch_size=32):
    def get_x_y():
        lin_space = np.linspace(-backcast_length, forecast_length, backcast_length + forecast_length)
        if random:
            offset = np.random.standard_normal() * 0.1
        else:
            offset = 1
        if signal_type == 'seasonality':  # (the 'trend' and 'cos' signals are left out)
            a = np.cos(2 * np.random.randint(low=1, high=3) * np.pi * lin_space)
            a += np.cos(2 * np.random.randint(low=2, high=4) * np.pi * lin_space)
            a += lin_space * offset + np.random.rand() * 0.1
        else:
            raise Exception('Unknown signal type.')
        x = a[:backcast_length]
        y = a[backcast_length:]
        min_x, max_x = np.minimum(np.min(x), 0), np.max(np.abs(x))
        x -= min_x
        y -= min_x
        x /= max_x
        y /= max_x
        return x, y

    def gen():
        while True:
            xx = []
            yy = []
            for i in range(batch_size):
                x, y = get_x_y()
                xx.append(x)
                yy.append(y)
            yield np.array(xx), np.array(yy)

    return gen()


def get_m4_data(backcast_length, forecast_length, is_training=True):
    # https://www.mcompetitions.unic.ac.cy/the-dataset/
    if is_training:
        filename = 'data/m4/train/Daily-train.csv'
    else:
        filename = 'data/m4/val/Daily-test.csv'
    x = np.array([]).reshape(0, backcast_length)
    y = np.array([]).reshape(0, forecast_length)
    x_tl = []
    headers = True
    with open(filename, "r") as file:
        reader = csv.reader(file, delimiter=',')
        for line in reader:
            line = line[1:]
            if not headers:
                x_tl.append(line)
            if headers:
                headers = False
    for i in range(len(x_tl)):
        if len(x_tl[i]) < backcast_length + forecast_length:
            continue
        time_series = np.array(x_tl[i])
        time_series = [float(s) for s in time_series if s != '']
        time_series_cleaned = np.array(time_series)
        if is_training:  # (the evaluation branch, every window of the series, is left out)
            time_series_cleaned_forlearning_x = np.zeros((1, backcast_length))
            time_series_cleaned_forlearning_y = np.zeros((1, forecast_length))
            j = np.random.randint(backcast_length, time_series_cleaned.shape[0] + 1 - forecast_length)
            time_series_cleaned_forlearning_x[0, :] = time_series_cleaned[j - backcast_length: j]
            time_series_cleaned_forlearning_y[0, :] = time_series_cleaned[j:j + forecast_length]
        x = np.vstack((x, time_series_cleaned_forlearning_x))
        y = np.vstack((y, time_series_cleaned_forlearning_y))
    return x, y


def write_m4_daily_csv(n_series, seed=0):
    """data/m4/train/Daily-train.csv stand-in: ragged rows of daily values (trend + weekly cycle + noise)"""
    rng = np.random.RandomState(seed)
    os.makedirs('data/m4/train', exist_ok=True)
    with open('data/m4/train/Daily-train.csv', 'w', newline='') as f:
        writer, length = csv.writer(f), 120
        writer.writerow(['V1'] + ['V%d' % (i + 2) for i in range(length)])
        for s in range(n_series):
            n = rng.randint(80, length + 1)
            t = np.arange(n)
            series = 1000 + rng.randn() * 200 + t * rng.randn() * 2 + 50 * np.sin(2 * np.pi * t / 7) + rng.randn(n) * 10
            writer.writerow(['D%d' % (s + 1)] + ['%.2f' % v for v in series] + [''] * (length - n))


# ---------------------------------------------------------------- examples/trainer_pytorch.py
CHECKPOINT_NAME = 'nbeats-training-checkpoint.th'


def get_script_arguments(argv):
    parser = ArgumentParser(description='N-Beats')
    parser.add_argument('--disable-cuda', action='store_true', help='Disable CUDA')
    parser.add_argument('--disable-plot', action='store_true', help='Disable interactive plots')
    parser.add_argument('--task', choices=['m4', 'dummy'], required=True)
    parser.add_argument('--test', action='store_true')
    return parser.parse_args(argv)


def split(arr, size):
    arrays = []
    while len(arr) > size:
        slice_ = arr[:size]
        arrays.append(slice_)
        arr = arr[size:]
    arrays.append(arr)
    return arrays


def batcher(dataset, batch_size, infinite=False):
    while True:
        x, y = dataset
        for x_, y_ in zip(split(x, batch_size), split(y, batch_size)):
            yield x_, y_
        if not infinite:
            break


def main(argv):
    args = get_script_arguments(argv)
    device = torch.device('cuda') if not args.disable_cuda and torch.cuda.is_available() else torch.device('cpu')
    forecast_length = 10
    backcast_length = 5 * forecast_length
    batch_size = 4  # greater than 4 for viz
    if args.task == 'm4':
        data_gen = batcher(get_m4_data(backcast_length, forecast_length), batch_size=batch_size, infinite=True)
    elif args.task == 'dummy':
        data_gen = dummy_data_generator(backcast_length, forecast_length, signal_type='seasonality', random=True,
                                        batch_size=batch_size)
    else:
        raise Exception('Unknown task.')
    print('--- Model ---')
    net = NBeatsNet(device=device,
                    stack_types=[NBeatsNet.TREND_BLOCK, NBeatsNet.SEASONALITY_BLOCK, NBeatsNet.GENERIC_BLOCK],
                    forecast_length=forecast_length, thetas_dim=[2, 8, 3], nb_blocks_per_stack=3,
                    backcast_length=backcast_length, hidden_layer_units=64, share_weights_in_stack=False,
                    nb_harmonics=None)
    optimiser = optim.Adam(net.parameters())

    def plot_model(x, target, grad_step):
        if not args.disable_plot:
            print('plot()')
            plot(net, x, target, backcast_length, forecast_length, grad_step)

    max_grad_steps = 10000
    if args.test:
        max_grad_steps = 5
    return simple_fit(net, optimiser, data_gen, plot_model, device, max_grad_steps)


def simple_fit(net, optimiser, data_generator, on_save_callback=None, device=torch.device('cpu'), max_grad_steps=10000):
    print('--- Training ---')
    initial_grad_step = load(net, optimiser)
    for grad_step, (x, target) in enumerate(data_generator):
        grad_step += initial_grad_step
        optimiser.zero_grad()
        net.train()
        backcast, forecast = net(torch.tensor(x, dtype=torch.float).to(device))
        loss = F.mse_loss(forecast, torch.tensor(target, dtype=torch.float).to(device))
        loss.backward()
        optimiser.step()
        print(f'grad_step = {str(grad_step).zfill(6)}, loss = {loss.item():.6f}')
        if grad_step % 1000 == 0 or (grad_step < 1000 and grad_step % 100 == 0):
            with torch.no_grad():
                save(net, optimiser, grad_step)
                if on_save_callback is not None:
                    on_save_callback(x, target, grad_step)
        if grad_step > max_grad_steps:
            print('Finished.')
            break
    return loss.item()


def save(model, optimiser, grad_step=0):
    torch.save({
        'grad_step': grad_step, 'model_state_dict': model.state_dict(), 'optimizer_state_dict': optimiser.state_dict(),
    }, CHECKPOINT_NAME)


def load(model, optimiser):
    if os.path.exists(CHECKPOINT_NAME):
        checkpoint = torch.load(CHECKPOINT_NAME)
        model.load_state_dict(checkpoint['model_state_dict'])
        optimiser.load_state_dict(checkpoint['optimizer_state_dict'])
        grad_step = checkpoint['grad_step']
        print(f'Restored checkpoint from {CHECKPOINT_NAME}.')
        return grad_step
    return 0


def plot(net, x, target, backcast_length, forecast_length, grad_step):
    net.eval()
    _, f = net(torch.tensor(x, dtype=torch.float))
    rows = []
    for i in range(4):
        ff, xx, yy = f.cpu().numpy()[i], x[i], target[i]
        rows.append(np.concatenate([xx, yy, ff]))  # the author plots xx, yy and ff in a 2x2 grid of subplots
    output = 'n_beats_{}.npy'.format(grad_step)
    np.save(output, np.stack(rows))
    print('Saved image to {}.'.format(output))


# ---------------------------------------------------------------- examples/simple_example.py (the PyTorch model)
def simple_example_main():
    num_samples, time_steps, input_dim, output_steps = 2_000, 10, 1, 1
    model_pytorch = NBeatsNet(backcast_length=time_steps, forecast_length=output_steps,
                              stack_types=(NBeatsNet.GENERIC_BLOCK, NBeatsNet.GENERIC_BLOCK),
                              nb_blocks_per_stack=2, thetas_dim=(4, 4), share_weights_in_stack=True,
                              hidden_layer_units=16)
    model_pytorch.compile(loss='mae', optimizer='adam')
    x = np.random.uniform(size=(num_samples, time_steps, input_dim))  # find f such as | f(x) - y | -> 0 (f = np.mean)
    y = np.mean(x, axis=1, keepdims=True)
    c = num_samples // 10
    x_train, y_train, x_test, y_test = x[c:], y[c:], x[:c], y[:c]
    test_size = len(x_test)
    print('Pytorch training...')
    model_pytorch.fit(x_train, y_train, validation_data=(x_test, y_test), epochs=3, batch_size=128)
    model_pytorch.save('n_beats_pytorch.th')
    predictions_pytorch_forecast = model_pytorch.predict(x_test)  # Predict on the testing set (forecast).
    np.testing.assert_equal(predictions_pytorch_forecast.shape, (test_size, model_pytorch.forecast_length, output_steps))
    predictions_pytorch_backcast = model_pytorch.predict(x_test, return_backcast=True)  # (backcast)
    np.testing.assert_equal(predictions_pytorch_backcast.shape, (test_size, model_pytorch.backcast_length, output_steps))
    model_pytorch_2 = NBeatsNet.load('n_beats_pytorch.th')
    np.testing.assert_almost_equal(predictions_pytorch_forecast, model_pytorch_2.predict(x_test))
    return float(np.abs(predictions_pytorch_forecast - y_test).mean())


if __name__ == '__main__':
    np.random.seed(0)  # the examples draw their data from numpy's global generator
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        write_m4_daily_csv(150)
        dummy_loss = main(['--task', 'dummy', '--test'])
        resumed_loss = main(['--task', 'dummy', '--test'])  # restores the grad-step-0 checkpoint
        os.remove(CHECKPOINT_NAME)
        m4_loss = main(['--task', 'm4', '--test', '--disable-plot'])
        test_mae = simple_example_main()
        os.chdir('/')
    print('done: dummy loss %.4f, resumed %.4f, m4 loss %.4f, simple example test MAE %.4f' % (
        dummy_loss, resumed_loss, m4_loss, test_mae))
