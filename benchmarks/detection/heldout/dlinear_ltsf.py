"""Long-term time-series forecasting with DLinear: a moving-average `series_decomp` splits each input window into
trend and seasonal parts and one linear map per channel (`--individual`) projects `seq_len` steps to `pred_len`
steps. `Exp_Main` (on `Exp_Basic`, which picks the device and moves the model) trains with Adam and MSE, validates
and tests every epoch, checkpoints the best model with `EarlyStopping`, halves the learning rate each epoch, reloads
the best checkpoint and tests it; a new experiment object then reloads it via `test(setting, test=1)`.

Modeled on: cure-lab/LTSF-Linear, run_longExp.py, exp/exp_basic.py, exp/exp_main.py, models/DLinear.py,
data_provider/data_factory.py, data_provider/data_loader.py, utils/tools.py and utils/metrics.py
(https://github.com/cure-lab/LTSF-Linear/blob/0c113668a3b88c4c4ee586b8c5ec3e539c4de5a6/exp/exp_main.py,
https://github.com/cure-lab/LTSF-Linear/blob/0c113668a3b88c4c4ee586b8c5ec3e539c4de5a6/models/DLinear.py).

Kept: `args.use_gpu = True if torch.cuda.is_available() and args.use_gpu else False`; `_acquire_device` (setting
`CUDA_VISIBLE_DEVICES`, `torch.device('cuda:{}'.format(self.args.gpu))` or `'cpu'`) and `self.model =
self._build_model().to(self.device)` in `Exp_Basic.__init__`, the optimizer made later in `train`; `nn.DataParallel`;
in `train`/`vali`/`test` the per-batch `.float().to(self.device)` moves and the decoder input from
`torch.zeros_like(batch_y[...])` + `torch.cat` then `.float().to(self.device)` (in `vali` from a host `batch_y`);
`loss.item()`; `vali` bringing outputs and targets back with `.detach().cpu()` for a host-side criterion, under
`model.eval()` + `torch.no_grad()`, then `self.model.train()`; `.detach().cpu().numpy()` in `test`;
`EarlyStopping.save_checkpoint` (`torch.save(model.state_dict(), path + '/' + 'checkpoint.pth')`) and the reloads
with `load_state_dict(torch.load(...))` (no `map_location`) in `train` and `test(setting, test=1)`;
`adjust_learning_rate`; DLinear's `torch.zeros([...], dtype=...).to(seasonal_init.device)` buffers in the
`individual` branch; `torch.cuda.empty_cache()`.

Changed to run here: the ETT CSV is a synthetic hourly 7-channel series saved with `np.save` in a temporary folder;
pandas/sklearn are replaced by numpy (`time_features` from the hour index, a small `StandardScaler`); result files,
plots, `predict`, `--test_flop`, and the `use_amp` and Transformer-family branches are left out; `parse_args([...])`
declares only the options used; `num_workers` 0; blank lines inside classes removed to keep the file short.
Shrunk: 600 steps instead of 17420; seq/label/pred 48/24/24 instead of 336/48/96; 4 epochs instead of 10; itr 1.
"""
import argparse
import os
import random
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
from torch import optim
from torch.utils.data import Dataset, DataLoader

def adjust_learning_rate(optimizer, epoch, args):
    # lr = args.learning_rate * (0.2 ** (epoch // 2))
    if args.lradj == 'type1':
        lr_adjust = {epoch: args.learning_rate * (0.5 ** ((epoch - 1) // 1))}
    elif args.lradj == 'type2':
        lr_adjust = {2: 5e-5, 4: 1e-5, 6: 5e-6, 8: 1e-6, 10: 5e-7, 15: 1e-7, 20: 5e-8}
    if epoch in lr_adjust.keys():
        lr = lr_adjust[epoch]
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        print('Updating learning rate to {}'.format(lr))

class EarlyStopping:
    def __init__(self, patience=7, verbose=False, delta=0):
        self.patience = patience
        self.verbose = verbose
        self.counter = 0
        self.best_score = None
        self.early_stop = False
        self.val_loss_min = np.inf
        self.delta = delta
    def __call__(self, val_loss, model, path):
        score = -val_loss
        if self.best_score is None:
            self.best_score = score
            self.save_checkpoint(val_loss, model, path)
        elif score < self.best_score + self.delta:
            self.counter += 1
            print(f'EarlyStopping counter: {self.counter} out of {self.patience}')
            if self.counter >= self.patience:
                self.early_stop = True
        else:
            self.best_score = score
            self.save_checkpoint(val_loss, model, path)
            self.counter = 0
    def save_checkpoint(self, val_loss, model, path):
        if self.verbose:
            print(f'Validation loss decreased ({self.val_loss_min:.6f} --> {val_loss:.6f}).  Saving model ...')
        torch.save(model.state_dict(), path + '/' + 'checkpoint.pth')
        self.val_loss_min = val_loss

def metric(pred, true):
    mae = np.mean(np.abs(pred - true))
    mse = np.mean((pred - true) ** 2)
    return mae, mse

class StandardScaler():
    def fit(self, data):
        self.mean_, self.scale_ = data.mean(0), data.std(0)
    def transform(self, data):
        return (data - self.mean_) / self.scale_

def time_features(hours, freq='h'):
    days = hours // 24
    return np.stack([(hours % 24) / 23.0 - 0.5, (days % 7) / 6.0 - 0.5, (days % 30) / 30.0 - 0.5,
                     (days % 365) / 365.0 - 0.5]).astype(np.float32)

class Dataset_Custom(Dataset):
    def __init__(self, root_path, flag='train', size=None, data_path='ETTh1.csv', scale=True, train_only=False):
        self.seq_len, self.label_len, self.pred_len = size
        self.set_type = {'train': 0, 'val': 1, 'test': 2}[flag]
        self.scale, self.train_only = scale, train_only
        self.scaler = StandardScaler()
        df_data = np.load(os.path.join(root_path, data_path))
        dates = np.arange(len(df_data))
        num_train = int(len(dates) * (0.7 if not self.train_only else 1))
        num_test = int(len(dates) * 0.2)
        num_vali = len(dates) - num_train - num_test
        border1s = [0, num_train - self.seq_len, len(dates) - num_test - self.seq_len]
        border2s = [num_train, num_train + num_vali, len(dates)]
        border1, border2 = border1s[self.set_type], border2s[self.set_type]
        self.scaler.fit(df_data[border1s[0]:border2s[0]])
        data = self.scaler.transform(df_data) if self.scale else df_data
        self.data_x = data[border1:border2]
        self.data_y = data[border1:border2]
        self.data_stamp = time_features(dates[border1:border2]).transpose(1, 0)
    def __getitem__(self, index):
        s_begin = index
        s_end = s_begin + self.seq_len
        r_begin = s_end - self.label_len
        r_end = r_begin + self.label_len + self.pred_len
        return (self.data_x[s_begin:s_end], self.data_y[r_begin:r_end],
                self.data_stamp[s_begin:s_end], self.data_stamp[r_begin:r_end])
    def __len__(self):
        return len(self.data_x) - self.seq_len - self.pred_len + 1

def data_provider(args, flag):
    Data = Dataset_Custom
    shuffle_flag, drop_last, batch_size = (False, False, args.batch_size) if flag == 'test' else (True, True, args.batch_size)
    data_set = Data(root_path=args.root_path, data_path=args.data_path, flag=flag,
                    size=[args.seq_len, args.label_len, args.pred_len], train_only=args.train_only)
    print(flag, len(data_set))
    data_loader = DataLoader(data_set, batch_size=batch_size, shuffle=shuffle_flag,
                             num_workers=args.num_workers, drop_last=drop_last)
    return data_set, data_loader

class moving_avg(nn.Module):
    """Moving average block to highlight the trend of time series"""
    def __init__(self, kernel_size, stride):
        super(moving_avg, self).__init__()
        self.kernel_size = kernel_size
        self.avg = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=0)
    def forward(self, x):
        front = x[:, 0:1, :].repeat(1, (self.kernel_size - 1) // 2, 1)
        end = x[:, -1:, :].repeat(1, (self.kernel_size - 1) // 2, 1)
        x = torch.cat([front, x, end], dim=1)
        x = self.avg(x.permute(0, 2, 1))
        x = x.permute(0, 2, 1)
        return x

class series_decomp(nn.Module):
    """Series decomposition block"""
    def __init__(self, kernel_size):
        super(series_decomp, self).__init__()
        self.moving_avg = moving_avg(kernel_size, stride=1)
    def forward(self, x):
        moving_mean = self.moving_avg(x)
        res = x - moving_mean
        return res, moving_mean

class Model(nn.Module):
    """Decomposition-Linear"""
    def __init__(self, configs):
        super(Model, self).__init__()
        self.seq_len = configs.seq_len
        self.pred_len = configs.pred_len
        kernel_size = 25
        self.decompsition = series_decomp(kernel_size)
        self.individual = configs.individual
        self.channels = configs.enc_in
        if self.individual:
            self.Linear_Seasonal = nn.ModuleList()
            self.Linear_Trend = nn.ModuleList()
            for i in range(self.channels):
                self.Linear_Seasonal.append(nn.Linear(self.seq_len,self.pred_len))
                self.Linear_Trend.append(nn.Linear(self.seq_len,self.pred_len))
        else:
            self.Linear_Seasonal = nn.Linear(self.seq_len,self.pred_len)
            self.Linear_Trend = nn.Linear(self.seq_len,self.pred_len)
    def forward(self, x):
        # x: [Batch, Input length, Channel]
        seasonal_init, trend_init = self.decompsition(x)
        seasonal_init, trend_init = seasonal_init.permute(0,2,1), trend_init.permute(0,2,1)
        if self.individual:
            seasonal_output = torch.zeros([seasonal_init.size(0),seasonal_init.size(1),self.pred_len],dtype=seasonal_init.dtype).to(seasonal_init.device)
            trend_output = torch.zeros([trend_init.size(0),trend_init.size(1),self.pred_len],dtype=trend_init.dtype).to(trend_init.device)
            for i in range(self.channels):
                seasonal_output[:,i,:] = self.Linear_Seasonal[i](seasonal_init[:,i,:])
                trend_output[:,i,:] = self.Linear_Trend[i](trend_init[:,i,:])
        else:
            seasonal_output = self.Linear_Seasonal(seasonal_init)
            trend_output = self.Linear_Trend(trend_init)
        x = seasonal_output + trend_output
        return x.permute(0,2,1) # to [Batch, Output length, Channel]

class Exp_Basic(object):
    def __init__(self, args):
        self.args = args
        self.device = self._acquire_device()
        self.model = self._build_model().to(self.device)
    def _acquire_device(self):
        if self.args.use_gpu:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(
                self.args.gpu) if not self.args.use_multi_gpu else self.args.devices
            device = torch.device('cuda:{}'.format(self.args.gpu))
            print('Use GPU: cuda:{}'.format(self.args.gpu))
        else:
            device = torch.device('cpu')
            print('Use CPU')
        return device

class Exp_Main(Exp_Basic):
    def _build_model(self):
        model_dict = {'DLinear': Model}
        model = model_dict[self.args.model](self.args).float()
        if self.args.use_multi_gpu and self.args.use_gpu:
            model = nn.DataParallel(model, device_ids=self.args.device_ids)
        return model
    def _get_data(self, flag):
        data_set, data_loader = data_provider(self.args, flag)
        return data_set, data_loader
    def _select_optimizer(self):
        model_optim = optim.Adam(self.model.parameters(), lr=self.args.learning_rate)
        return model_optim
    def _select_criterion(self):
        criterion = nn.MSELoss()
        return criterion
    def vali(self, vali_data, vali_loader, criterion):
        total_loss = []
        self.model.eval()
        with torch.no_grad():
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(vali_loader):
                batch_x = batch_x.float().to(self.device)
                batch_y = batch_y.float()
                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)
                # decoder input
                dec_inp = torch.zeros_like(batch_y[:, -self.args.pred_len:, :]).float()
                dec_inp = torch.cat([batch_y[:, :self.args.label_len, :], dec_inp], dim=1).float().to(self.device)
                # encoder - decoder
                if 'Linear' in self.args.model:
                    outputs = self.model(batch_x)
                f_dim = -1 if self.args.features == 'MS' else 0
                outputs = outputs[:, -self.args.pred_len:, f_dim:]
                batch_y = batch_y[:, -self.args.pred_len:, f_dim:].to(self.device)
                pred = outputs.detach().cpu()
                true = batch_y.detach().cpu()
                loss = criterion(pred, true)
                total_loss.append(loss)
        total_loss = np.average(total_loss)
        self.model.train()
        return total_loss
    def train(self, setting):
        train_data, train_loader = self._get_data(flag='train')
        if not self.args.train_only:
            vali_data, vali_loader = self._get_data(flag='val')
            test_data, test_loader = self._get_data(flag='test')
        path = os.path.join(self.args.checkpoints, setting)
        if not os.path.exists(path):
            os.makedirs(path)
        train_steps = len(train_loader)
        early_stopping = EarlyStopping(patience=self.args.patience, verbose=True)
        model_optim = self._select_optimizer()
        criterion = self._select_criterion()
        for epoch in range(self.args.train_epochs):
            train_loss = []
            self.model.train()
            epoch_time = time.time()
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(train_loader):
                model_optim.zero_grad()
                batch_x = batch_x.float().to(self.device)
                batch_y = batch_y.float().to(self.device)
                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)
                # decoder input
                dec_inp = torch.zeros_like(batch_y[:, -self.args.pred_len:, :]).float()
                dec_inp = torch.cat([batch_y[:, :self.args.label_len, :], dec_inp], dim=1).float().to(self.device)
                # encoder - decoder
                if 'Linear' in self.args.model:
                        outputs = self.model(batch_x)
                f_dim = -1 if self.args.features == 'MS' else 0
                outputs = outputs[:, -self.args.pred_len:, f_dim:]
                batch_y = batch_y[:, -self.args.pred_len:, f_dim:].to(self.device)
                loss = criterion(outputs, batch_y)
                train_loss.append(loss.item())
                loss.backward()
                model_optim.step()
            print("Epoch: {} cost time: {:.3f}".format(epoch + 1, time.time() - epoch_time))
            train_loss = np.average(train_loss)
            if not self.args.train_only:
                vali_loss = self.vali(vali_data, vali_loader, criterion)
                test_loss = self.vali(test_data, test_loader, criterion)
                print("Epoch: {0}, Steps: {1} | Train Loss: {2:.7f} Vali Loss: {3:.7f} Test Loss: {4:.7f}".format(
                    epoch + 1, train_steps, train_loss, vali_loss, test_loss))
                early_stopping(vali_loss, self.model, path)
            else:
                early_stopping(train_loss, self.model, path)
            if early_stopping.early_stop:
                print("Early stopping")
                break
            adjust_learning_rate(model_optim, epoch + 1, self.args)
        best_model_path = path + '/' + 'checkpoint.pth'
        self.model.load_state_dict(torch.load(best_model_path))
        return self.model
    def test(self, setting, test=0):
        test_data, test_loader = self._get_data(flag='test')
        if test:
            print('loading model')
            self.model.load_state_dict(torch.load(os.path.join(self.args.checkpoints, setting, 'checkpoint.pth')))
        preds = []
        trues = []
        self.model.eval()
        with torch.no_grad():
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(test_loader):
                batch_x = batch_x.float().to(self.device)
                batch_y = batch_y.float().to(self.device)
                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)
                # decoder input
                dec_inp = torch.zeros_like(batch_y[:, -self.args.pred_len:, :]).float()
                dec_inp = torch.cat([batch_y[:, :self.args.label_len, :], dec_inp], dim=1).float().to(self.device)
                if 'Linear' in self.args.model:
                        outputs = self.model(batch_x)
                f_dim = -1 if self.args.features == 'MS' else 0
                outputs = outputs[:, -self.args.pred_len:, f_dim:]
                batch_y = batch_y[:, -self.args.pred_len:, f_dim:].to(self.device)
                outputs = outputs.detach().cpu().numpy()
                batch_y = batch_y.detach().cpu().numpy()
                preds.append(outputs)
                trues.append(batch_y)
        preds = np.concatenate(preds, axis=0)
        trues = np.concatenate(trues, axis=0)
        mae, mse = metric(preds, trues)
        print('mse:{}, mae:{}'.format(mse, mae))
        return mse, mae

def write_synthetic_series(path, n=600, channels=7, seed=0):
    rng = np.random.RandomState(seed)
    k = np.arange(n)[:, None]
    phase = rng.uniform(0, 2 * np.pi, size=channels)
    vals = (5 + 2 * np.sin(2 * np.pi * k / 24 + phase) + np.sin(2 * np.pi * k / 168 + phase)
            + 0.005 * k + 0.3 * rng.randn(n, channels))
    np.save(path, vals)

if __name__ == '__main__':
    fix_seed = 2021
    random.seed(fix_seed)
    torch.manual_seed(fix_seed)
    np.random.seed(fix_seed)
    root = tempfile.mkdtemp()
    write_synthetic_series(os.path.join(root, 'synthetic_ett.npy'))
    parser = argparse.ArgumentParser(description='Autoformer & Transformer family for Time Series Forecasting')
    for name, typ, default in [('--model_id', str, 'test'), ('--model', str, 'Autoformer'), ('--data', str, 'ETTm1'),
                               ('--root_path', str, './data/ETT/'), ('--data_path', str, 'ETTh1.csv'),
                               ('--features', str, 'M'), ('--checkpoints', str, './checkpoints/'),
                               ('--seq_len', int, 96), ('--label_len', int, 48), ('--pred_len', int, 96),
                               ('--enc_in', int, 7), ('--num_workers', int, 10), ('--itr', int, 2),
                               ('--train_epochs', int, 10), ('--batch_size', int, 32), ('--patience', int, 3),
                               ('--learning_rate', float, 0.0001), ('--des', str, 'test'), ('--lradj', str, 'type1'),
                               ('--use_gpu', bool, True), ('--gpu', int, 0), ('--devices', str, '0,1,2,3'),
                               ('--train_only', bool, False)]:
        parser.add_argument(name, type=typ, default=default)
    parser.add_argument('--individual', action='store_true', default=False)
    parser.add_argument('--use_multi_gpu', action='store_true', help='use multiple gpus', default=False)
    args = parser.parse_args([
        '--root_path', root, '--data_path', 'synthetic_ett.npy', '--model_id', 'synthetic_48_24',
        '--model', 'DLinear', '--data', 'custom', '--features', 'M', '--seq_len', '48', '--label_len', '24',
        '--pred_len', '24', '--enc_in', '7', '--individual', '--des', 'Exp', '--itr', '1', '--batch_size', '32',
        '--learning_rate', '0.005', '--train_epochs', '4', '--num_workers', '0',
        '--checkpoints', os.path.join(root, 'checkpoints')])
    args.use_gpu = True if torch.cuda.is_available() and args.use_gpu else False
    if args.use_gpu and args.use_multi_gpu:
        args.dvices = args.devices.replace(' ', '')
        device_ids = args.devices.split(',')
        args.device_ids = [int(id_) for id_ in device_ids]
        args.gpu = args.device_ids[0]
    print('Args in experiment:', args)
    Exp = Exp_Main
    try:
        for ii in range(args.itr):
            setting = '{}_{}_{}_ft{}_sl{}_ll{}_pl{}_{}_{}'.format(args.model_id, args.model, args.data,
                args.features, args.seq_len, args.label_len, args.pred_len, args.des, ii)
            exp = Exp(args)  # set experiments
            print('>>>>>>>start training : {}>>>>>>>>>>>>>>>>>>>>>>>>>>'.format(setting))
            exp.train(setting)
            if not args.train_only:
                print('>>>>>>>testing : {}<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<'.format(setting))
                mse, mae = exp.test(setting)
            torch.cuda.empty_cache()
        # run_longExp.py with --is_training 0: a fresh experiment that reloads the checkpoint in test(setting, test=1)
        exp = Exp(args)
        print('>>>>>>>testing : {}<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<'.format(setting))
        mse2, mae2 = exp.test(setting, test=1)
        torch.cuda.empty_cache()
    finally:
        shutil.rmtree(root)
    print('done test_mse={:.4f} test_mae={:.4f} reloaded_test_mse={:.4f}'.format(mse, mae, mse2))
