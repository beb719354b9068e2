"""Trains TS2Vec, universal time-series representations learnt by hierarchical contrasting (a dilated Conv1d encoder
over randomly masked timestamps, two overlapping random crops of each series contrasted at every pooling scale
across instances and across time), with the weights averaged by `torch.optim.swa_utils.AveragedModel`, saving
checkpoints from an iteration or epoch callback; the representations are then evaluated as train.py --eval does for
a UCR classification set: the whole series max-pooled, an SVM fitted, accuracy and AUPRC reported. Two runs: one
counted in iterations, one in epochs with windows cropped to max_train_length.

Modeled on: yuezhihan/ts2vec, train.py, ts2vec.py, utils.py, datautils.py, models/encoder.py,
models/dilated_conv.py, models/losses.py, tasks/classification.py and tasks/_eval_protocols.py at commit
b0088e14a99706c05451316dc6db8d3da9351163
(https://github.com/yuezhihan/ts2vec/blob/b0088e14a99706c05451316dc6db8d3da9351163/ts2vec.py).

Kept: `init_dl_program(args.gpu, seed=..., max_threads=...)` turning the gpu option into a `torch.device`
(`torch.cuda.set_device` and `torch.cuda.manual_seed` for a cuda one, the cudnn and tf32 switches) and returning the
device that train.py hands to `TS2Vec(input_dims=..., device=device, **config)`; the class keeping
`self.device = device`, building `TSEncoder(...).to(self.device)` and wrapping it in `AveragedModel` updated after
every step; `fit` making a CPU `TensorDataset`/`DataLoader` from numpy, cropping to max_train_length on the CPU and
moving each batch with `x.to(self.device)`, the numpy crop offsets and `take_per_row` indexing the device tensor with
a CPU `torch.arange` and a numpy array; the encoder's binomial mask made on the CPU and moved with `.to(x.device)`,
or made with `x.new_full`; the losses' `torch.tensor(0., device=z1.device)` and `torch.arange(B,
device=z1.device)`; `encode` switching the averaged net to eval under `torch.no_grad()`, `_eval_with_pooling` moving
with `x.to(self.device, non_blocking=True)` and returning `out.cpu()`, then restoring the training flag; `save` (the
averaged net's state dict) and `load` with `map_location=self.device`; the `save_checkpoint_callback` closure reading
the module-level `run_dir`; the classification task and its SVM protocol.
Changed to run here: the UCR set is synthetic (noisy sine/square/sawtooth classes) written as .tsv files and read
back by the original loader (`np.loadtxt` for pandas), in a temporary directory; the `if __name__ == '__main__':`
body runs once per argument list; the gpu option is 0 when CUDA is available and 'cpu' otherwise; the run folder
name has no date stamp; to stay short, the other loaders and tasks (UEA, forecasting with its sliding-window
encoding, anomaly detection), the continuous mask, the integer and multiscale pooling windows and the NaN splitting
and centring of series are left out (`encode` raises on sliding_length).
Shrunk: 40 train and 40 test series of length 64 in 3 classes; repr_dims 32 (the author's 320), hidden_dims 16 (64),
depth 3 (10); 24 iterations, then 2 epochs on 48-step windows, batch 8; the SVM grid search skipped as the original
does for small sets.
"""
import argparse
import datetime
import os
import pickle
import random
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import average_precision_score
from sklearn.preprocessing import label_binarize
from sklearn.svm import SVC
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

# ----------------------------------------------------------------------------- utils.py

def pkl_save(name, var):
    with open(name, 'wb') as f:
        pickle.dump(var, f)

def take_per_row(A, indx, num_elem):
    all_indx = indx[:, None] + np.arange(num_elem)
    return A[torch.arange(all_indx.shape[0])[:, None], all_indx]

def name_with_datetime(prefix='default'):
    return prefix + '_run'

def init_dl_program(device_name, seed=None, use_cudnn=True, deterministic=False, benchmark=False,
                    use_tf32=False, max_threads=None):
    if max_threads is not None:
        torch.set_num_threads(max_threads)  # intraop

    if seed is not None:
        random.seed(seed)
        seed += 1
        np.random.seed(seed)
        seed += 1
        torch.manual_seed(seed)

    if isinstance(device_name, (str, int)):
        device_name = [device_name]

    devices = []
    for t in reversed(device_name):
        t_device = torch.device(t)
        devices.append(t_device)
        if t_device.type == 'cuda':
            assert torch.cuda.is_available()
            torch.cuda.set_device(t_device)
            if seed is not None:
                seed += 1
                torch.cuda.manual_seed(seed)
    devices.reverse()
    torch.backends.cudnn.enabled = use_cudnn
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = benchmark

    if hasattr(torch.backends.cudnn, 'allow_tf32'):
        torch.backends.cudnn.allow_tf32 = use_tf32
        torch.backends.cuda.matmul.allow_tf32 = use_tf32

    return devices if len(devices) > 1 else devices[0]

# ----------------------------------------------------------------------------- models/dilated_conv.py

class SamePadConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dilation=1, groups=1):
        super().__init__()
        self.receptive_field = (kernel_size - 1) * dilation + 1
        padding = self.receptive_field // 2
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=padding, dilation=dilation,
                              groups=groups)
        self.remove = 1 if self.receptive_field % 2 == 0 else 0

    def forward(self, x):
        out = self.conv(x)
        if self.remove > 0:
            out = out[:, :, : -self.remove]
        return out

class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dilation, final=False):
        super().__init__()
        self.conv1 = SamePadConv(in_channels, out_channels, kernel_size, dilation=dilation)
        self.conv2 = SamePadConv(out_channels, out_channels, kernel_size, dilation=dilation)
        self.projector = nn.Conv1d(in_channels, out_channels, 1) if in_channels != out_channels or final else None

    def forward(self, x):
        residual = x if self.projector is None else self.projector(x)
        x = F.gelu(x)
        x = self.conv1(x)
        x = F.gelu(x)
        x = self.conv2(x)
        return x + residual

class DilatedConvEncoder(nn.Module):
    def __init__(self, in_channels, channels, kernel_size):
        super().__init__()
        self.net = nn.Sequential(*[
            ConvBlock(channels[i - 1] if i > 0 else in_channels, channels[i], kernel_size=kernel_size,
                      dilation=2 ** i, final=(i == len(channels) - 1))
            for i in range(len(channels))
        ])

    def forward(self, x):
        return self.net(x)

# ----------------------------------------------------------------------------- models/encoder.py

def generate_binomial_mask(B, T, p=0.5):
    return torch.from_numpy(np.random.binomial(1, p, size=(B, T))).to(torch.bool)

class TSEncoder(nn.Module):
    def __init__(self, input_dims, output_dims, hidden_dims=64, depth=10, mask_mode='binomial'):
        super().__init__()
        self.input_dims = input_dims
        self.output_dims = output_dims
        self.hidden_dims = hidden_dims
        self.mask_mode = mask_mode
        self.input_fc = nn.Linear(input_dims, hidden_dims)
        self.feature_extractor = DilatedConvEncoder(hidden_dims, [hidden_dims] * depth + [output_dims], kernel_size=3)
        self.repr_dropout = nn.Dropout(p=0.1)

    def forward(self, x, mask=None):  # x: B x T x input_dims
        nan_mask = ~x.isnan().any(axis=-1)
        x[~nan_mask] = 0
        x = self.input_fc(x)  # B x T x Ch

        # generate & apply mask
        if mask is None:
            if self.training:
                mask = self.mask_mode
            else:
                mask = 'all_true'

        if mask == 'binomial':
            mask = generate_binomial_mask(x.size(0), x.size(1)).to(x.device)
        elif mask == 'all_true':
            mask = x.new_full((x.size(0), x.size(1)), True, dtype=torch.bool)
        elif mask == 'all_false':
            mask = x.new_full((x.size(0), x.size(1)), False, dtype=torch.bool)
        elif mask == 'mask_last':
            mask = x.new_full((x.size(0), x.size(1)), True, dtype=torch.bool)
            mask[:, -1] = False

        mask &= nan_mask
        x[~mask] = 0

        # conv encoder
        x = x.transpose(1, 2)  # B x Ch x T
        x = self.repr_dropout(self.feature_extractor(x))  # B x Co x T
        x = x.transpose(1, 2)  # B x T x Co
        return x

# ----------------------------------------------------------------------------- models/losses.py

def hierarchical_contrastive_loss(z1, z2, alpha=0.5, temporal_unit=0):
    loss = torch.tensor(0., device=z1.device)
    d = 0
    while z1.size(1) > 1:
        if alpha != 0:
            loss += alpha * instance_contrastive_loss(z1, z2)
        if d >= temporal_unit:
            if 1 - alpha != 0:
                loss += (1 - alpha) * temporal_contrastive_loss(z1, z2)
        d += 1
        z1 = F.max_pool1d(z1.transpose(1, 2), kernel_size=2).transpose(1, 2)
        z2 = F.max_pool1d(z2.transpose(1, 2), kernel_size=2).transpose(1, 2)
    if z1.size(1) == 1:
        if alpha != 0:
            loss += alpha * instance_contrastive_loss(z1, z2)
        d += 1
    return loss / d

def instance_contrastive_loss(z1, z2):
    B, T = z1.size(0), z1.size(1)
    if B == 1:
        return z1.new_tensor(0.)
    z = torch.cat([z1, z2], dim=0)  # 2B x T x C
    z = z.transpose(0, 1)  # T x 2B x C
    sim = torch.matmul(z, z.transpose(1, 2))  # T x 2B x 2B
    logits = torch.tril(sim, diagonal=-1)[:, :, :-1]  # T x 2B x (2B-1)
    logits += torch.triu(sim, diagonal=1)[:, :, 1:]
    logits = -F.log_softmax(logits, dim=-1)

    i = torch.arange(B, device=z1.device)
    loss = (logits[:, i, B + i - 1].mean() + logits[:, B + i, i].mean()) / 2
    return loss

def temporal_contrastive_loss(z1, z2):
    B, T = z1.size(0), z1.size(1)
    if T == 1:
        return z1.new_tensor(0.)
    z = torch.cat([z1, z2], dim=1)  # B x 2T x C
    sim = torch.matmul(z, z.transpose(1, 2))  # B x 2T x 2T
    logits = torch.tril(sim, diagonal=-1)[:, :, :-1]  # B x 2T x (2T-1)
    logits += torch.triu(sim, diagonal=1)[:, :, 1:]
    logits = -F.log_softmax(logits, dim=-1)

    t = torch.arange(T, device=z1.device)
    loss = (logits[:, t, T + t - 1].mean() + logits[:, T + t, t].mean()) / 2
    return loss

# ----------------------------------------------------------------------------- ts2vec.py

class TS2Vec:
    '''The TS2Vec model'''

    def __init__(self, input_dims, output_dims=320, hidden_dims=64, depth=10, device='cuda', lr=0.001,
                 batch_size=16, max_train_length=None, temporal_unit=0, after_iter_callback=None,
                 after_epoch_callback=None):
        super().__init__()
        self.device = device
        self.lr = lr
        self.batch_size = batch_size
        self.max_train_length = max_train_length
        self.temporal_unit = temporal_unit

        self._net = TSEncoder(input_dims=input_dims, output_dims=output_dims, hidden_dims=hidden_dims,
                              depth=depth).to(self.device)
        self.net = torch.optim.swa_utils.AveragedModel(self._net)
        self.net.update_parameters(self._net)

        self.after_iter_callback = after_iter_callback
        self.after_epoch_callback = after_epoch_callback

        self.n_epochs = 0
        self.n_iters = 0

    def fit(self, train_data, n_epochs=None, n_iters=None, verbose=False):
        assert train_data.ndim == 3

        if n_iters is None and n_epochs is None:
            n_iters = 200 if train_data.size <= 100000 else 600  # default param for n_iters

        train_data = train_data[~np.isnan(train_data).all(axis=2).all(axis=1)]

        train_dataset = TensorDataset(torch.from_numpy(train_data).to(torch.float))
        train_loader = DataLoader(train_dataset, batch_size=min(self.batch_size, len(train_dataset)), shuffle=True,
                                  drop_last=True)

        optimizer = torch.optim.AdamW(self._net.parameters(), lr=self.lr)

        loss_log = []

        while True:
            if n_epochs is not None and self.n_epochs >= n_epochs:
                break

            cum_loss = 0
            n_epoch_iters = 0

            interrupted = False
            for batch in train_loader:
                if n_iters is not None and self.n_iters >= n_iters:
                    interrupted = True
                    break

                x = batch[0]
                if self.max_train_length is not None and x.size(1) > self.max_train_length:
                    window_offset = np.random.randint(x.size(1) - self.max_train_length + 1)
                    x = x[:, window_offset: window_offset + self.max_train_length]
                x = x.to(self.device)

                ts_l = x.size(1)
                crop_l = np.random.randint(low=2 ** (self.temporal_unit + 1), high=ts_l + 1)
                crop_left = np.random.randint(ts_l - crop_l + 1)
                crop_right = crop_left + crop_l
                crop_eleft = np.random.randint(crop_left + 1)
                crop_eright = np.random.randint(low=crop_right, high=ts_l + 1)
                crop_offset = np.random.randint(low=-crop_eleft, high=ts_l - crop_eright + 1, size=x.size(0))

                optimizer.zero_grad()

                out1 = self._net(take_per_row(x, crop_offset + crop_eleft, crop_right - crop_eleft))
                out1 = out1[:, -crop_l:]

                out2 = self._net(take_per_row(x, crop_offset + crop_left, crop_eright - crop_left))
                out2 = out2[:, :crop_l]

                loss = hierarchical_contrastive_loss(out1, out2, temporal_unit=self.temporal_unit)

                loss.backward()
                optimizer.step()
                self.net.update_parameters(self._net)

                cum_loss += loss.item()
                n_epoch_iters += 1

                self.n_iters += 1

                if self.after_iter_callback is not None:
                    self.after_iter_callback(self, loss.item())

            if interrupted:
                break

            cum_loss /= n_epoch_iters
            loss_log.append(cum_loss)
            if verbose:
                print(f"Epoch #{self.n_epochs}: loss={cum_loss:.4f}")
            self.n_epochs += 1

            if self.after_epoch_callback is not None:
                self.after_epoch_callback(self, cum_loss)

        return loss_log

    def _eval_with_pooling(self, x, mask=None, slicing=None, encoding_window=None):
        out = self.net(x.to(self.device, non_blocking=True), mask)
        if encoding_window == 'full_series':
            if slicing is not None:
                out = out[:, slicing]
            out = F.max_pool1d(out.transpose(1, 2), kernel_size=out.size(1)).transpose(1, 2)
        else:
            if slicing is not None:
                out = out[:, slicing]
        return out.cpu()

    def encode(self, data, mask=None, encoding_window=None, causal=False, sliding_length=None, sliding_padding=0,
               batch_size=None):
        assert self.net is not None, 'please train or load a net first'
        assert data.ndim == 3
        if batch_size is None:
            batch_size = self.batch_size
        n_samples, ts_l, _ = data.shape

        org_training = self.net.training
        self.net.eval()

        dataset = TensorDataset(torch.from_numpy(data).to(torch.float))
        loader = DataLoader(dataset, batch_size=batch_size)

        with torch.no_grad():
            output = []
            for batch in loader:
                x = batch[0]
                if sliding_length is not None:
                    raise NotImplementedError('sliding inference (tasks/forecasting.py) is left out here')
                else:
                    out = self._eval_with_pooling(x, mask, encoding_window=encoding_window)
                    if encoding_window == 'full_series':
                        out = out.squeeze(1)

                output.append(out)

            output = torch.cat(output, dim=0)

        self.net.train(org_training)
        return output.numpy()

    def save(self, fn):
        torch.save(self.net.state_dict(), fn)

    def load(self, fn):
        state_dict = torch.load(fn, map_location=self.device)
        self.net.load_state_dict(state_dict)

# ----------------------------------------------------------------------------- tasks/_eval_protocols.py

def fit_svm(features, y, MAX_SAMPLES=10000):
    nb_classes = np.unique(y, return_counts=True)[1].shape[0]
    train_size = features.shape[0]
    svm = SVC(C=np.inf, gamma='scale')
    # the author grid-searches C when train_size // nb_classes >= 5 and train_size >= 50
    return svm.fit(features, y)

# ----------------------------------------------------------------------------- tasks/classification.py

def eval_classification(model, train_data, train_labels, test_data, test_labels, eval_protocol='linear'):
    assert train_labels.ndim == 1 or train_labels.ndim == 2
    train_repr = model.encode(train_data, encoding_window='full_series' if train_labels.ndim == 1 else None)
    test_repr = model.encode(test_data, encoding_window='full_series' if train_labels.ndim == 1 else None)

    assert eval_protocol == 'svm'
    fit_clf = fit_svm
    clf = fit_clf(train_repr, train_labels)

    acc = clf.score(test_repr, test_labels)
    y_score = clf.decision_function(test_repr)
    test_labels_onehot = label_binarize(test_labels, classes=np.arange(train_labels.max() + 1))
    auprc = average_precision_score(test_labels_onehot, y_score)
    return y_score, {'acc': acc, 'auprc': auprc}

# ----------------------------------------------------------------------------- datautils.py (synthetic files)

def write_synthetic_datasets():
    rng = np.random.RandomState(0)
    os.makedirs('datasets/UCR/SynthShapes', exist_ok=True)
    for split in ('TRAIN', 'TEST'):
        rows = []
        for n in range(40):
            label = n % 3 + 1
            t = np.linspace(0, 1, 64) + rng.rand()
            base = [np.sin(2 * np.pi * 3 * t), np.sign(np.sin(2 * np.pi * 2 * t)), (4 * t) % 1.0][label - 1]
            rows.append(np.concatenate([[label], 2.0 * base + 0.3 * rng.randn(64)]))
        np.savetxt(f'datasets/UCR/SynthShapes/SynthShapes_{split}.tsv', np.array(rows), delimiter='\t')

def load_UCR(dataset):
    train_file = os.path.join('datasets/UCR', dataset, dataset + "_TRAIN.tsv")
    test_file = os.path.join('datasets/UCR', dataset, dataset + "_TEST.tsv")
    train_array = np.loadtxt(train_file, delimiter='\t')
    test_array = np.loadtxt(test_file, delimiter='\t')

    # Move the labels to {0, ..., L-1}
    labels = np.unique(train_array[:, 0])
    transform = {}
    for i, l in enumerate(labels):
        transform[l] = i

    train = train_array[:, 1:].astype(np.float64)
    train_labels = np.vectorize(transform.get)(train_array[:, 0])
    test = test_array[:, 1:].astype(np.float64)
    test_labels = np.vectorize(transform.get)(test_array[:, 0])

    mean = np.nanmean(train)
    std = np.nanstd(train)
    train = (train - mean) / std
    test = (test - mean) / std
    return train[..., np.newaxis], train_labels, test[..., np.newaxis], test_labels

# ----------------------------------------------------------------------------- train.py

def save_checkpoint_callback(save_every=1, unit='epoch'):
    assert unit in ('epoch', 'iter')

    def callback(model, loss):
        n = model.n_epochs if unit == 'epoch' else model.n_iters
        if n % save_every == 0:
            model.save(f'{run_dir}/model_{n}.pkl')
    return callback

RUNS = [
    ['SynthShapes', 'ucr', '--loader', 'UCR', '--batch-size', '8', '--repr-dims', '32', '--iters', '24',
     '--save-every', '8', '--seed', '1', '--eval'],
    ['SynthShapes', 'ucr_epochs', '--loader', 'UCR', '--batch-size', '8', '--repr-dims', '32', '--max-train-length',
     '48', '--epochs', '2', '--save-every', '1', '--seed', '2', '--eval'],
]

if __name__ == '__main__':
    workdir = tempfile.TemporaryDirectory()
    home = os.getcwd()
    os.chdir(workdir.name)
    write_synthetic_datasets()

    parser = argparse.ArgumentParser()
    parser.add_argument('dataset')
    parser.add_argument('run_name')
    parser.add_argument('--loader', type=str, required=True)
    parser.add_argument('--gpu', default=0 if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--lr', type=float, default=0.001)
    parser.add_argument('--repr-dims', type=int, default=320)
    parser.add_argument('--max-train-length', type=int, default=3000)
    parser.add_argument('--iters', type=int, default=None)
    parser.add_argument('--epochs', type=int, default=None)
    parser.add_argument('--save-every', type=int, default=None)
    parser.add_argument('--seed', type=int, default=None)
    parser.add_argument('--max-threads', type=int, default=None)
    parser.add_argument('--eval', action="store_true")

    for argv in RUNS:
        args = parser.parse_args(argv)
        print("Dataset:", args.dataset)

        device = init_dl_program(args.gpu, seed=args.seed, max_threads=args.max_threads)

        print('Loading data... ', end='')
        if args.loader == 'UCR':
            task_type = 'classification'
            train_data, train_labels, test_data, test_labels = load_UCR(args.dataset)
        else:
            raise ValueError(f"Unknown loader {args.loader}.")
        print('loaded')

        config = dict(batch_size=args.batch_size, lr=args.lr, output_dims=args.repr_dims,
                      max_train_length=args.max_train_length, hidden_dims=16, depth=3)

        if args.save_every is not None:
            unit = 'epoch' if args.epochs is not None else 'iter'
            config[f'after_{unit}_callback'] = save_checkpoint_callback(args.save_every, unit)

        run_dir = 'training/' + args.dataset + '__' + name_with_datetime(args.run_name)
        os.makedirs(run_dir, exist_ok=True)

        t = time.time()

        model = TS2Vec(input_dims=train_data.shape[-1], device=device, **config)
        loss_log = model.fit(train_data, n_epochs=args.epochs, n_iters=args.iters, verbose=True)
        model.save(f'{run_dir}/model.pkl')

        t = time.time() - t
        print(f"\nTraining time: {datetime.timedelta(seconds=t)}\n")

        if args.eval:
            if task_type == 'classification':
                out, eval_res = eval_classification(model, train_data, train_labels, test_data, test_labels,
                                                    eval_protocol='svm')
            else:
                assert False
            pkl_save(f'{run_dir}/out.pkl', out)
            pkl_save(f'{run_dir}/eval_res.pkl', eval_res)
            print('Evaluation result:', eval_res)
        print(sorted(os.listdir(run_dir)))

    print("Finished.")
    os.chdir(home)
    workdir.cleanup()
    print("done")
