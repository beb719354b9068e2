"""Trains a row of pytorch-fm's click-through-rate models (FM, HOFM, NCF, DeepFM, xDeepFM, AutoInt) on a synthetic
MovieLens-1M ratings file and a synthetic MovieLens-20M ratings.csv the way rixwew/pytorch-fm's examples/main.py does
it: `main(...)` turns the `--device` string into a `torch.device` and hands it to `train` and `test`, which move each
`(fields, target)` batch with `.to(device)`; an `EarlyStopper` saves the whole model with `torch.save(model, ...)`
whenever the validation AUC improves; the test AUC is printed at the end.

Modeled on: rixwew/pytorch-fm, examples/main.py, torchfm/layer.py, torchfm/dataset/movielens.py and
torchfm/model/{fm,hofm,ncf,dfm,xdfm,afi}.py at commit f74ad19771eda104e99874d19dc892e988ec53fa
(https://github.com/rixwew/pytorch-fm/tree/f74ad19771eda104e99874d19dc892e988ec53fa).
Kept: main.py (`get_dataset`, `get_model` with the author's hyper-parameters for these models, `EarlyStopper` with
`torch.save(model, self.save_path)`, `train(model, optimizer, data_loader, criterion, device, log_interval)` with
`model.train()`, `fields.to(device), target.to(device)`, `criterion(y, target.float())`, `model.zero_grad()`,
`loss.item()` and tqdm's `set_postfix`; `test(model, data_loader, device)` with `model.eval()`, `torch.no_grad()`,
`target.tolist()` / `y.tolist()` into `roc_auc_score`; `main` with `torch.device(device)`, `random_split` 0.8/0.1/0.1,
`get_model(...).to(device)`, `BCELoss`, Adam with weight decay, the early-stopping loop, the final test); layer.py
(`FeaturesLinear` / `FeaturesEmbedding` offsets kept as a numpy array and turned into a device tensor by
`x.new_tensor(self.offsets)` in `forward`, `FactorizationMachine`, `MultiLayerPerceptron`,
`CompressedInteractionNetwork`, `AnovaKernel` building its buffers on the host and moving them with `.to(x.device)`);
the model classes as written (NCF indexing the device embeddings with the dataset's numpy `user_field_idx` /
`item_field_idx`, AutoInt's `nn.MultiheadAttention` stack); movielens.py (ratings <= 3 are negatives, ids - 1,
`field_dims` from the maxima).
Changed to run here: `--device` defaults to `cuda:0` only when `torch.cuda.is_available()` (else `cpu`); pandas is not
installed, so `MovieLens20MDataset` reads the file with a small reader into the same `(n, 3)` array
(`to_numpy()[:, :3]`); `np.long` (removed from numpy) -> `np.int64`, `.astype(np.int)` -> `np.int64`; the MovieLens
files are not downloaded: a ratings.dat ("UserID::MovieID::Rating::Timestamp") and a ratings.csv (with a header) are
drawn from a user/movie bias + low-rank taste model in a temporary folder; `__main__` runs `main` for several
dataset/model pairs instead of one from the command line, and `main` returns the test AUC; tqdm writes to a string
buffer; the other models of the repository (LR, FFM, FNN, Wide&Deep, PNN, DCN, NFM, FNFM, AFM, AFN) and the
Criteo / Avazu datasets (lmdb) are left out.
Shrunk: MovieLens-1M (6040 users x 3706 movies, 1M ratings) -> 120 x 80 with 3000 ratings, 20M -> 90 x 60 with 2000;
batch 2048 -> 256; 100 epochs -> 3 (the early stopper still runs); learning rate 0.001 -> 0.01; AutoInt's mlp_dims
(400, 400) -> (32, 32); workers 8 -> 0.
"""
import csv
import io
import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.data
import tqdm
from sklearn.metrics import roc_auc_score
from torch.utils.data import DataLoader

DATA_DIR = tempfile.mkdtemp(prefix="torchfm_")
TQDM_OUT = io.StringIO()


def write_movielens(path, n_users, n_items, n_ratings, sep, header, seed):
    rng = np.random.RandomState(seed)
    u_f, i_f = rng.randn(n_users, 4), rng.randn(n_items, 4)
    u_b, i_b = rng.randn(n_users), rng.randn(n_items)
    with open(path, "w") as f:
        if header:
            f.write("userId,movieId,rating,timestamp\n")
        for _ in range(n_ratings):
            u, i = rng.randint(n_users), rng.randint(n_items)
            score = u_b[u] + i_b[i] + u_f[u] @ i_f[i] * 0.5 + rng.randn() * 0.3
            rating = int(np.clip(np.round(3.2 + score * 0.8), 1, 5))
            f.write(sep.join(str(v) for v in (u + 1, i + 1, rating, 978300000 + rng.randint(10 ** 6))) + "\n")


# ---------------------------------------------------------------------------------------------------------------------
# torchfm/dataset/movielens.py
# ---------------------------------------------------------------------------------------------------------------------
def _read_ratings(dataset_path, sep, header):
    with open(dataset_path) as f:
        rows = [line.rstrip("\n").split(sep) for line in f] if len(sep) > 1 else list(csv.reader(f, delimiter=sep))
    if header == 'infer':
        rows = rows[1:]
    return np.array([[float(v) for v in row] for row in rows])


class MovieLens20MDataset(torch.utils.data.Dataset):
    """
    MovieLens 20M Dataset

    Data preparation
        treat samples with a rating less than 3 as negative samples
    """

    def __init__(self, dataset_path, sep=',', engine='c', header='infer'):
        data = _read_ratings(dataset_path, sep, header)[:, :3]
        self.items = data[:, :2].astype(np.int64) - 1  # -1 because ID begins from 1
        self.targets = self.__preprocess_target(data[:, 2]).astype(np.float32)
        self.field_dims = np.max(self.items, axis=0) + 1
        self.user_field_idx = np.array((0, ), dtype=np.int64)
        self.item_field_idx = np.array((1,), dtype=np.int64)

    def __len__(self):
        return self.targets.shape[0]

    def __getitem__(self, index):
        return self.items[index], self.targets[index]

    def __preprocess_target(self, target):
        target[target <= 3] = 0
        target[target > 3] = 1
        return target


class MovieLens1MDataset(MovieLens20MDataset):
    """
    MovieLens 1M Dataset
    """

    def __init__(self, dataset_path):
        super().__init__(dataset_path, sep='::', engine='python', header=None)


# ---------------------------------------------------------------------------------------------------------------------
# torchfm/layer.py
# ---------------------------------------------------------------------------------------------------------------------
class FeaturesLinear(torch.nn.Module):

    def __init__(self, field_dims, output_dim=1):
        super().__init__()
        self.fc = torch.nn.Embedding(sum(field_dims), output_dim)
        self.bias = torch.nn.Parameter(torch.zeros((output_dim,)))
        self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)

    def forward(self, x):
        x = x + x.new_tensor(self.offsets).unsqueeze(0)
        return torch.sum(self.fc(x), dim=1) + self.bias


class FeaturesEmbedding(torch.nn.Module):

    def __init__(self, field_dims, embed_dim):
        super().__init__()
        self.embedding = torch.nn.Embedding(sum(field_dims), embed_dim)
        self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)
        torch.nn.init.xavier_uniform_(self.embedding.weight.data)

    def forward(self, x):
        x = x + x.new_tensor(self.offsets).unsqueeze(0)
        return self.embedding(x)


class FactorizationMachine(torch.nn.Module):

    def __init__(self, reduce_sum=True):
        super().__init__()
        self.reduce_sum = reduce_sum

    def forward(self, x):
        square_of_sum = torch.sum(x, dim=1) ** 2
        sum_of_square = torch.sum(x ** 2, dim=1)
        ix = square_of_sum - sum_of_square
        if self.reduce_sum:
            ix = torch.sum(ix, dim=1, keepdim=True)
        return 0.5 * ix


class MultiLayerPerceptron(torch.nn.Module):

    def __init__(self, input_dim, embed_dims, dropout, output_layer=True):
        super().__init__()
        layers = list()
        for embed_dim in embed_dims:
            layers.append(torch.nn.Linear(input_dim, embed_dim))
            layers.append(torch.nn.BatchNorm1d(embed_dim))
            layers.append(torch.nn.ReLU())
            layers.append(torch.nn.Dropout(p=dropout))
            input_dim = embed_dim
        if output_layer:
            layers.append(torch.nn.Linear(input_dim, 1))
        self.mlp = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.mlp(x)


class CompressedInteractionNetwork(torch.nn.Module):

    def __init__(self, input_dim, cross_layer_sizes, split_half=True):
        super().__init__()
        self.num_layers = len(cross_layer_sizes)
        self.split_half = split_half
        self.conv_layers = torch.nn.ModuleList()
        prev_dim, fc_input_dim = input_dim, 0
        for i in range(self.num_layers):
            cross_layer_size = cross_layer_sizes[i]
            self.conv_layers.append(torch.nn.Conv1d(input_dim * prev_dim, cross_layer_size, 1,
                                                    stride=1, dilation=1, bias=True))
            if self.split_half and i != self.num_layers - 1:
                cross_layer_size //= 2
            prev_dim = cross_layer_size
            fc_input_dim += prev_dim
        self.fc = torch.nn.Linear(fc_input_dim, 1)

    def forward(self, x):
        xs = list()
        x0, h = x.unsqueeze(2), x
        for i in range(self.num_layers):
            x = x0 * h.unsqueeze(1)
            batch_size, f0_dim, fin_dim, embed_dim = x.shape
            x = x.view(batch_size, f0_dim * fin_dim, embed_dim)
            x = F.relu(self.conv_layers[i](x))
            if self.split_half and i != self.num_layers - 1:
                x, h = torch.split(x, x.shape[1] // 2, dim=1)
            else:
                h = x
            xs.append(x)
        return self.fc(torch.sum(torch.cat(xs, dim=1), 2))


class AnovaKernel(torch.nn.Module):

    def __init__(self, order, reduce_sum=True):
        super().__init__()
        self.order = order
        self.reduce_sum = reduce_sum

    def forward(self, x):
        batch_size, num_fields, embed_dim = x.shape
        a_prev = torch.ones((batch_size, num_fields + 1, embed_dim), dtype=torch.float).to(x.device)
        for t in range(self.order):
            a = torch.zeros((batch_size, num_fields + 1, embed_dim), dtype=torch.float).to(x.device)
            a[:, t+1:, :] += x[:, t:, :] * a_prev[:, t:-1, :]
            a = torch.cumsum(a, dim=1)
            a_prev = a
        if self.reduce_sum:
            return torch.sum(a[:, -1, :], dim=-1, keepdim=True)
        else:
            return a[:, -1, :]


# ---------------------------------------------------------------------------------------------------------------------
# torchfm/model/*.py
# ---------------------------------------------------------------------------------------------------------------------
class FactorizationMachineModel(torch.nn.Module):

    def __init__(self, field_dims, embed_dim):
        super().__init__()
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.linear = FeaturesLinear(field_dims)
        self.fm = FactorizationMachine(reduce_sum=True)

    def forward(self, x):
        x = self.linear(x) + self.fm(self.embedding(x))
        return torch.sigmoid(x.squeeze(1))


class HighOrderFactorizationMachineModel(torch.nn.Module):

    def __init__(self, field_dims, order, embed_dim):
        super().__init__()
        if order < 1:
            raise ValueError(f'invalid order: {order}')
        self.order = order
        self.embed_dim = embed_dim
        self.linear = FeaturesLinear(field_dims)
        if order >= 2:
            self.embedding = FeaturesEmbedding(field_dims, embed_dim * (order - 1))
            self.fm = FactorizationMachine(reduce_sum=True)
        if order >= 3:
            self.kernels = torch.nn.ModuleList([
                AnovaKernel(order=i, reduce_sum=True) for i in range(3, order + 1)
            ])

    def forward(self, x):
        y = self.linear(x).squeeze(1)
        if self.order >= 2:
            x = self.embedding(x)
            x_part = x[:, :, :self.embed_dim]
            y += self.fm(x_part).squeeze(1)
            for i in range(self.order - 2):
                x_part = x[:, :, (i + 1) * self.embed_dim: (i + 2) * self.embed_dim]
                y += self.kernels[i](x_part).squeeze(1)
        return torch.sigmoid(y)


class NeuralCollaborativeFiltering(torch.nn.Module):

    def __init__(self, field_dims, user_field_idx, item_field_idx, embed_dim, mlp_dims, dropout):
        super().__init__()
        self.user_field_idx = user_field_idx
        self.item_field_idx = item_field_idx
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.embed_output_dim = len(field_dims) * embed_dim
        self.mlp = MultiLayerPerceptron(self.embed_output_dim, mlp_dims, dropout, output_layer=False)
        self.fc = torch.nn.Linear(mlp_dims[-1] + embed_dim, 1)

    def forward(self, x):
        x = self.embedding(x)
        user_x = x[:, self.user_field_idx].squeeze(1)
        item_x = x[:, self.item_field_idx].squeeze(1)
        x = self.mlp(x.view(-1, self.embed_output_dim))
        gmf = user_x * item_x
        x = torch.cat([gmf, x], dim=1)
        x = self.fc(x).squeeze(1)
        return torch.sigmoid(x)


class DeepFactorizationMachineModel(torch.nn.Module):

    def __init__(self, field_dims, embed_dim, mlp_dims, dropout):
        super().__init__()
        self.linear = FeaturesLinear(field_dims)
        self.fm = FactorizationMachine(reduce_sum=True)
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.embed_output_dim = len(field_dims) * embed_dim
        self.mlp = MultiLayerPerceptron(self.embed_output_dim, mlp_dims, dropout)

    def forward(self, x):
        embed_x = self.embedding(x)
        x = self.linear(x) + self.fm(embed_x) + self.mlp(embed_x.view(-1, self.embed_output_dim))
        return torch.sigmoid(x.squeeze(1))


class ExtremeDeepFactorizationMachineModel(torch.nn.Module):

    def __init__(self, field_dims, embed_dim, mlp_dims, dropout, cross_layer_sizes, split_half=True):
        super().__init__()
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.embed_output_dim = len(field_dims) * embed_dim
        self.cin = CompressedInteractionNetwork(len(field_dims), cross_layer_sizes, split_half)
        self.mlp = MultiLayerPerceptron(self.embed_output_dim, mlp_dims, dropout)
        self.linear = FeaturesLinear(field_dims)

    def forward(self, x):
        embed_x = self.embedding(x)
        x = self.linear(x) + self.cin(embed_x) + self.mlp(embed_x.view(-1, self.embed_output_dim))
        return torch.sigmoid(x.squeeze(1))


class AutomaticFeatureInteractionModel(torch.nn.Module):

    def __init__(self, field_dims, embed_dim, atten_embed_dim, num_heads, num_layers, mlp_dims, dropouts, has_residual=True):
        super().__init__()
        self.num_fields = len(field_dims)
        self.linear = FeaturesLinear(field_dims)
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.atten_embedding = torch.nn.Linear(embed_dim, atten_embed_dim)
        self.embed_output_dim = len(field_dims) * embed_dim
        self.atten_output_dim = len(field_dims) * atten_embed_dim
        self.has_residual = has_residual
        self.mlp = MultiLayerPerceptron(self.embed_output_dim, mlp_dims, dropouts[1])
        self.self_attns = torch.nn.ModuleList([
            torch.nn.MultiheadAttention(atten_embed_dim, num_heads, dropout=dropouts[0]) for _ in range(num_layers)
        ])
        self.attn_fc = torch.nn.Linear(self.atten_output_dim, 1)
        if self.has_residual:
            self.V_res_embedding = torch.nn.Linear(embed_dim, atten_embed_dim)

    def forward(self, x):
        embed_x = self.embedding(x)
        atten_x = self.atten_embedding(embed_x)
        cross_term = atten_x.transpose(0, 1)
        for self_attn in self.self_attns:
            cross_term, _ = self_attn(cross_term, cross_term, cross_term)
        cross_term = cross_term.transpose(0, 1)
        if self.has_residual:
            V_res = self.V_res_embedding(embed_x)
            cross_term += V_res
        cross_term = F.relu(cross_term).contiguous().view(-1, self.atten_output_dim)
        x = self.linear(x) + self.attn_fc(cross_term) + self.mlp(embed_x.view(-1, self.embed_output_dim))
        return torch.sigmoid(x.squeeze(1))


# ---------------------------------------------------------------------------------------------------------------------
# examples/main.py
# ---------------------------------------------------------------------------------------------------------------------
def get_dataset(name, path):
    if name == 'movielens1M':
        return MovieLens1MDataset(path)
    elif name == 'movielens20M':
        return MovieLens20MDataset(path)
    else:
        raise ValueError('unknown dataset name: ' + name)


def get_model(name, dataset):
    """
    Hyperparameters are empirically determined, not opitmized.
    """
    field_dims = dataset.field_dims
    if name == 'fm':
        return FactorizationMachineModel(field_dims, embed_dim=16)
    elif name == 'hofm':
        return HighOrderFactorizationMachineModel(field_dims, order=3, embed_dim=16)
    elif name == 'ncf':
        # only supports MovieLens dataset because for other datasets user/item colums are indistinguishable
        assert isinstance(dataset, MovieLens20MDataset) or isinstance(dataset, MovieLens1MDataset)
        return NeuralCollaborativeFiltering(field_dims, embed_dim=16, mlp_dims=(16, 16), dropout=0.2,
                                            user_field_idx=dataset.user_field_idx,
                                            item_field_idx=dataset.item_field_idx)
    elif name == 'dfm':
        return DeepFactorizationMachineModel(field_dims, embed_dim=16, mlp_dims=(16, 16), dropout=0.2)
    elif name == 'xdfm':
        return ExtremeDeepFactorizationMachineModel(
            field_dims, embed_dim=16, cross_layer_sizes=(16, 16), split_half=False, mlp_dims=(16, 16), dropout=0.2)
    elif name == 'afi':
        return AutomaticFeatureInteractionModel(
             field_dims, embed_dim=16, atten_embed_dim=64, num_heads=2, num_layers=3, mlp_dims=(32, 32), dropouts=(0, 0, 0))
    else:
        raise ValueError('unknown model name: ' + name)


class EarlyStopper(object):

    def __init__(self, num_trials, save_path):
        self.num_trials = num_trials
        self.trial_counter = 0
        self.best_accuracy = 0
        self.save_path = save_path

    def is_continuable(self, model, accuracy):
        if accuracy > self.best_accuracy:
            self.best_accuracy = accuracy
            self.trial_counter = 0
            torch.save(model, self.save_path)
            return True
        elif self.trial_counter + 1 < self.num_trials:
            self.trial_counter += 1
            return True
        else:
            return False


def train(model, optimizer, data_loader, criterion, device, log_interval=100):
    model.train()
    total_loss = 0
    tk0 = tqdm.tqdm(data_loader, smoothing=0, mininterval=1.0, file=TQDM_OUT)
    for i, (fields, target) in enumerate(tk0):
        fields, target = fields.to(device), target.to(device)
        y = model(fields)
        loss = criterion(y, target.float())
        model.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        if (i + 1) % log_interval == 0:
            tk0.set_postfix(loss=total_loss / log_interval)
            total_loss = 0


def test(model, data_loader, device):
    model.eval()
    targets, predicts = list(), list()
    with torch.no_grad():
        for fields, target in tqdm.tqdm(data_loader, smoothing=0, mininterval=1.0, file=TQDM_OUT):
            fields, target = fields.to(device), target.to(device)
            y = model(fields)
            targets.extend(target.tolist())
            predicts.extend(y.tolist())
    return roc_auc_score(targets, predicts)


def main(dataset_name,
         dataset_path,
         model_name,
         epoch,
         learning_rate,
         batch_size,
         weight_decay,
         device,
         save_dir):
    device = torch.device(device)
    dataset = get_dataset(dataset_name, dataset_path)
    train_length = int(len(dataset) * 0.8)
    valid_length = int(len(dataset) * 0.1)
    test_length = len(dataset) - train_length - valid_length
    train_dataset, valid_dataset, test_dataset = torch.utils.data.random_split(
        dataset, (train_length, valid_length, test_length))
    train_data_loader = DataLoader(train_dataset, batch_size=batch_size, num_workers=0)
    valid_data_loader = DataLoader(valid_dataset, batch_size=batch_size, num_workers=0)
    test_data_loader = DataLoader(test_dataset, batch_size=batch_size, num_workers=0)
    model = get_model(model_name, dataset).to(device)
    criterion = torch.nn.BCELoss()
    optimizer = torch.optim.Adam(params=model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    early_stopper = EarlyStopper(num_trials=2, save_path=f'{save_dir}/{model_name}.pt')
    for epoch_i in range(epoch):
        train(model, optimizer, train_data_loader, criterion, device)
        auc = test(model, valid_data_loader, device)
        print('epoch:', epoch_i, 'validation: auc:', auc)
        if not early_stopper.is_continuable(model, auc):
            print(f'validation: best auc: {early_stopper.best_accuracy}')
            break
    auc = test(model, test_data_loader, device)
    print(f'test auc: {auc}')
    return auc


if __name__ == '__main__':
    import argparse

    ml1m_path = os.path.join(DATA_DIR, 'ml-1m', 'ratings.dat')
    ml20m_path = os.path.join(DATA_DIR, 'ml-20m', 'ratings.csv')
    os.makedirs(os.path.dirname(ml1m_path)), os.makedirs(os.path.dirname(ml20m_path))
    write_movielens(ml1m_path, 120, 80, 3000, '::', header=False, seed=1)
    write_movielens(ml20m_path, 90, 60, 2000, ',', header=True, seed=2)

    parser = argparse.ArgumentParser()
    parser.add_argument('--dataset_name', default='movielens1M')
    parser.add_argument('--dataset_path', default=ml1m_path, help='criteo/train.txt, avazu/train, or ml-1m/ratings.dat')
    parser.add_argument('--model_name', default='afi')
    parser.add_argument('--epoch', type=int, default=3)
    parser.add_argument('--learning_rate', type=float, default=0.01)
    parser.add_argument('--batch_size', type=int, default=256)
    parser.add_argument('--weight_decay', type=float, default=1e-6)
    parser.add_argument('--device', default='cuda:0' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--save_dir', default=os.path.join(DATA_DIR, 'chkpt'))
    args = parser.parse_args()
    os.makedirs(args.save_dir, exist_ok=True)
    runs = [('movielens1M', ml1m_path, name) for name in ('fm', 'hofm', 'ncf', 'dfm', 'xdfm', 'afi')]
    runs += [('movielens20M', ml20m_path, name) for name in ('ncf', 'dfm')]
    aucs = []
    for dataset_name, dataset_path, model_name in runs:
        print(f'== {model_name} on {dataset_name}')
        aucs.append(main(dataset_name,
                         dataset_path,
                         model_name,
                         args.epoch,
                         args.learning_rate,
                         args.batch_size,
                         args.weight_decay,
                         args.device,
                         args.save_dir))
    print('done: mean test auc over {} runs {:.4f}'.format(len(aucs), float(np.mean(aucs))))
