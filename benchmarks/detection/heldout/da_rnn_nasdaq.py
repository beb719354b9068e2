"""Trains Qin et al.'s Dual-Stage Attention-Based RNN (DA-RNN) to predict a stock index from its own history and the
prices of its member stocks, the way Zhenye-Na/DA-RNN does it on NASDAQ 100 data: an LSTM encoder with input
attention over the driving series and an LSTM decoder with temporal attention over the encoder states, both created
and moved to the device inside the `DA_RNN` wrapper class, which holds ``self.device`` (``cuda:0`` when available),
two Adam optimizers, the numpy data and its own training loop. Each mini-batch is assembled in numpy windows and turned
into device tensors with ``torch.from_numpy(...).type(torch.FloatTensor).to(self.device)``; the encoder and decoder
create their zero initial states and output buffers with ``X.data.new(...).zero_()``, and predictions come back with
``.cpu().data.numpy()``.

Modeled on: Zhenye-Na/DA-RNN, src/model.py, src/main.py and src/utils.py at commit
4294abc8be739a4272f39f673a809b595c7220a6
(https://github.com/Zhenye-Na/DA-RNN/blob/4294abc8be739a4272f39f673a809b595c7220a6/src/model.py,
https://github.com/Zhenye-Na/DA-RNN/blob/4294abc8be739a4272f39f673a809b595c7220a6/src/main.py,
https://github.com/Zhenye-Na/DA-RNN/blob/4294abc8be739a4272f39f673a809b595c7220a6/src/utils.py).

Kept: model.py's `Encoder` (``X_tilde``/``X_encoded`` buffers and ``_init_states`` from
``Variable(X.data.new(...).zero_())``, the input-attention loop, ``flatten_parameters`` before each LSTM call, the
in-place writes into the buffers), `Decoder` (its ``_init_states`` from the encoded input, the temporal-attention
loop, ``self.fc.weight.data.normal_()``) and `DA_RNN` as written: ``self.device = torch.device('cuda:0' if
torch.cuda.is_available() else 'cpu')``, ``Encoder(...).to(self.device)`` and ``Decoder(...).to(self.device)``, the
CPU ``nn.MSELoss``, the (disabled) ``self.parallel`` DataParallel branch, the two Adam optimizers over
``filter(lambda p: p.requires_grad, ...)`` built after the move, the mean-centred target, `train` (a method that
shadows ``nn.Module.train``: numpy window batching, per-iteration losses, the learning-rate decay every 10000
iterations, the periodic `test` on the training and test parts), `train_forward` (``Variable(torch.from_numpy(X)
.type(torch.FloatTensor).to(self.device))`` for inputs, history and targets, ``loss.item()``) and `test`
(``.cpu().data.numpy()[:, 0]``); main.py's `parse_args` options and `main` (``model.train()`` then
``model.test()``); utils.py's `read_data` splitting the index column ``NDX`` from the stock columns.

Changed to run here: the NASDAQ 100 csv is replaced by a synthetic table (12 random-walk stock prices and an index
``NDX`` that is a weighted sum of them plus noise) generated with numpy inside `read_data`, which returns the same
``X, y`` arrays (pandas is not used); ``parser.parse_args()`` gets a fixed list with the sizes below; the script is
seeded (the original is not); matplotlib plots are replaced by printed numbers (the training-set and test-set
errors at the periodic test, the loss curve's first and last values at the end); `main` returns the final numbers
for the last line.
Shrunk: 81 stocks -> 12 and about 40000 time steps -> 500; hidden sizes 128 -> 32; batch size 128 -> 64; 10 epochs
-> 6, with the periodic test every 5 epochs instead of 10; learning rate 0.001 -> 0.01 so that the short run learns.
"""

import torch
import argparse
import numpy as np
from torch import nn
from torch import optim
import torch.nn.functional as F

from torch.autograd import Variable


# ---- utils.py -----------------------------------------------------------------------------------------------------
def read_data(input_path, debug=True):
    """
    Read nasdaq stocks data (here: a synthetic table with the same layout).

    Returns:
        X (np.ndarray): features.
        y (np.ndarray): ground truth.

    """
    rng = np.random.RandomState(0)
    n_rows, n_stocks = 250 if debug else 500, 12
    X = 100 + np.cumsum(rng.randn(n_rows, n_stocks) * 0.2, axis=0)
    weights = rng.dirichlet(np.ones(n_stocks))
    y = X.dot(weights) + np.cumsum(rng.randn(n_rows)) * 0.05

    return X, y


# ---- model.py -----------------------------------------------------------------------------------------------------
class Encoder(nn.Module):
    """encoder in DA_RNN."""

    def __init__(self, T,
                 input_size,
                 encoder_num_hidden,
                 parallel=False):
        """Initialize an encoder in DA_RNN."""
        super(Encoder, self).__init__()
        self.encoder_num_hidden = encoder_num_hidden
        self.input_size = input_size
        self.parallel = parallel
        self.T = T

        # Fig 1. Temporal Attention Mechanism: Encoder is LSTM
        self.encoder_lstm = nn.LSTM(
            input_size=self.input_size,
            hidden_size=self.encoder_num_hidden,
            num_layers=1
        )

        # Construct Input Attention Mechanism via deterministic attention model
        # Eq. 8: W_e[h_{t-1}; s_{t-1}] + U_e * x^k
        self.encoder_attn = nn.Linear(
            in_features=2 * self.encoder_num_hidden + self.T - 1,
            out_features=1
        )

    def forward(self, X):
        """forward.

        Args:
            X: input data

        """
        X_tilde = Variable(X.data.new(
            X.size(0), self.T - 1, self.input_size).zero_())
        X_encoded = Variable(X.data.new(
            X.size(0), self.T - 1, self.encoder_num_hidden).zero_())

        # h_n, s_n: initial states with dimention hidden_size
        h_n = self._init_states(X)
        s_n = self._init_states(X)

        for t in range(self.T - 1):
            # batch_size * input_size * (2 * hidden_size + T - 1)
            x = torch.cat((h_n.repeat(self.input_size, 1, 1).permute(1, 0, 2),
                           s_n.repeat(self.input_size, 1, 1).permute(1, 0, 2),
                           X.permute(0, 2, 1)), dim=2)

            x = self.encoder_attn(
                x.view(-1, self.encoder_num_hidden * 2 + self.T - 1))

            # get weights by softmax
            alpha = F.softmax(x.view(-1, self.input_size), dim=1)

            # get new input for LSTM
            x_tilde = torch.mul(alpha, X[:, t, :])

            # Fix the warning about non-contiguous memory
            # https://discuss.pytorch.org/t/dataparallel-issue-with-flatten-parameter/8282
            self.encoder_lstm.flatten_parameters()

            # encoder LSTM
            _, final_state = self.encoder_lstm(
                x_tilde.unsqueeze(0), (h_n, s_n))
            h_n = final_state[0]
            s_n = final_state[1]

            X_tilde[:, t, :] = x_tilde
            X_encoded[:, t, :] = h_n

        return X_tilde, X_encoded

    def _init_states(self, X):
        """Initialize all 0 hidden states and cell states for encoder."""
        # https://pytorch.org/docs/master/nn.html?#lstm
        return Variable(X.data.new(1, X.size(0), self.encoder_num_hidden).zero_())


class Decoder(nn.Module):
    """decoder in DA_RNN."""

    def __init__(self, T, decoder_num_hidden, encoder_num_hidden):
        """Initialize a decoder in DA_RNN."""
        super(Decoder, self).__init__()
        self.decoder_num_hidden = decoder_num_hidden
        self.encoder_num_hidden = encoder_num_hidden
        self.T = T

        self.attn_layer = nn.Sequential(
            nn.Linear(2 * decoder_num_hidden +
                      encoder_num_hidden, encoder_num_hidden),
            nn.Tanh(),
            nn.Linear(encoder_num_hidden, 1)
        )
        self.lstm_layer = nn.LSTM(
            input_size=1,
            hidden_size=decoder_num_hidden
        )
        self.fc = nn.Linear(encoder_num_hidden + 1, 1)
        self.fc_final = nn.Linear(decoder_num_hidden + encoder_num_hidden, 1)

        self.fc.weight.data.normal_()

    def forward(self, X_encoded, y_prev):
        """forward."""
        d_n = self._init_states(X_encoded)
        c_n = self._init_states(X_encoded)

        for t in range(self.T - 1):

            x = torch.cat((d_n.repeat(self.T - 1, 1, 1).permute(1, 0, 2),
                           c_n.repeat(self.T - 1, 1, 1).permute(1, 0, 2),
                           X_encoded), dim=2)

            beta = F.softmax(self.attn_layer(
                x.view(-1, 2 * self.decoder_num_hidden + self.encoder_num_hidden)).view(-1, self.T - 1), dim=1)

            # Eqn. 14: compute context vector
            # batch_size * encoder_hidden_size
            context = torch.bmm(beta.unsqueeze(1), X_encoded)[:, 0, :]
            if t < self.T - 1:
                # Eqn. 15
                # batch_size * 1
                y_tilde = self.fc(
                    torch.cat((context, y_prev[:, t].unsqueeze(1)), dim=1))

                # Eqn. 16: LSTM
                self.lstm_layer.flatten_parameters()
                _, final_states = self.lstm_layer(
                    y_tilde.unsqueeze(0), (d_n, c_n))

                d_n = final_states[0]  # 1 * batch_size * decoder_num_hidden
                c_n = final_states[1]  # 1 * batch_size * decoder_num_hidden

        # Eqn. 22: final output
        y_pred = self.fc_final(torch.cat((d_n[0], context), dim=1))

        return y_pred

    def _init_states(self, X):
        """Initialize all 0 hidden states and cell states for encoder."""
        # hidden state and cell state [num_layers*num_directions, batch_size, hidden_size]
        # https://pytorch.org/docs/master/nn.html?#lstm
        return Variable(X.data.new(1, X.size(0), self.decoder_num_hidden).zero_())


class DA_RNN(nn.Module):
    """Dual-Stage Attention-Based Recurrent Neural Network."""

    def __init__(self, X, y, T,
                 encoder_num_hidden,
                 decoder_num_hidden,
                 batch_size,
                 learning_rate,
                 epochs,
                 parallel=False):
        """initialization."""
        super(DA_RNN, self).__init__()
        self.encoder_num_hidden = encoder_num_hidden
        self.decoder_num_hidden = decoder_num_hidden
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.parallel = parallel
        self.shuffle = False
        self.epochs = epochs
        self.T = T
        self.X = X
        self.y = y

        self.device = torch.device(
            'cuda:0' if torch.cuda.is_available() else 'cpu')
        print("==> Use accelerator: ", self.device)

        self.Encoder = Encoder(input_size=X.shape[1],
                               encoder_num_hidden=encoder_num_hidden,
                               T=T).to(self.device)
        self.Decoder = Decoder(encoder_num_hidden=encoder_num_hidden,
                               decoder_num_hidden=decoder_num_hidden,
                               T=T).to(self.device)

        # Loss function
        self.criterion = nn.MSELoss()

        if self.parallel:
            self.encoder = nn.DataParallel(self.encoder)
            self.decoder = nn.DataParallel(self.decoder)

        self.encoder_optimizer = optim.Adam(params=filter(lambda p: p.requires_grad,
                                                          self.Encoder.parameters()),
                                            lr=self.learning_rate)
        self.decoder_optimizer = optim.Adam(params=filter(lambda p: p.requires_grad,
                                                          self.Decoder.parameters()),
                                            lr=self.learning_rate)

        # Training set
        self.train_timesteps = int(self.X.shape[0] * 0.7)
        self.y = self.y - np.mean(self.y[:self.train_timesteps])
        self.input_size = self.X.shape[1]

    def train(self):
        """Training process."""
        iter_per_epoch = int(
            np.ceil(self.train_timesteps * 1. / self.batch_size))
        self.iter_losses = np.zeros(self.epochs * iter_per_epoch)
        self.epoch_losses = np.zeros(self.epochs)

        n_iter = 0

        for epoch in range(self.epochs):
            if self.shuffle:
                ref_idx = np.random.permutation(self.train_timesteps - self.T)
            else:
                ref_idx = np.array(range(self.train_timesteps - self.T))

            idx = 0

            while (idx < self.train_timesteps):
                # get the indices of X_train
                indices = ref_idx[idx:(idx + self.batch_size)]
                # x = np.zeros((self.T - 1, len(indices), self.input_size))
                x = np.zeros((len(indices), self.T - 1, self.input_size))
                y_prev = np.zeros((len(indices), self.T - 1))
                y_gt = self.y[indices + self.T]

                # format x into 3D tensor
                for bs in range(len(indices)):
                    x[bs, :, :] = self.X[indices[bs]:(
                        indices[bs] + self.T - 1), :]
                    y_prev[bs, :] = self.y[indices[bs]: (indices[bs] + self.T - 1)]

                loss = self.train_forward(x, y_prev, y_gt)
                self.iter_losses[int(
                    epoch * iter_per_epoch + idx / self.batch_size)] = loss

                idx += self.batch_size
                n_iter += 1

                if n_iter % 10000 == 0 and n_iter != 0:
                    for param_group in self.encoder_optimizer.param_groups:
                        param_group['lr'] = param_group['lr'] * 0.9
                    for param_group in self.decoder_optimizer.param_groups:
                        param_group['lr'] = param_group['lr'] * 0.9

                self.epoch_losses[epoch] = np.mean(self.iter_losses[range(
                    epoch * iter_per_epoch, (epoch + 1) * iter_per_epoch)])

            if epoch % 5 == 0:
                print("Epochs: ", epoch, " Iterations: ", n_iter,
                      " Loss: ", self.epoch_losses[epoch])

            if epoch % 5 == 0:
                y_train_pred = self.test(on_train=True)
                y_test_pred = self.test(on_train=False)
                y_pred = np.concatenate((y_train_pred, y_test_pred))
                # (the original plots self.y against y_train_pred and y_test_pred here)
                print("    train RMSE: %.4f  test RMSE: %.4f  (%d predictions)" % (
                    np.sqrt(np.mean((y_train_pred - self.y[self.T - 1:self.train_timesteps]) ** 2)),
                    np.sqrt(np.mean((y_test_pred - self.y[self.train_timesteps:]) ** 2)), len(y_pred)))

    def train_forward(self, X, y_prev, y_gt):
        """Forward pass."""
        # zero gradients
        self.encoder_optimizer.zero_grad()
        self.decoder_optimizer.zero_grad()

        input_weighted, input_encoded = self.Encoder(
            Variable(torch.from_numpy(X).type(torch.FloatTensor).to(self.device)))
        y_pred = self.Decoder(input_encoded, Variable(
            torch.from_numpy(y_prev).type(torch.FloatTensor).to(self.device)))

        y_true = Variable(torch.from_numpy(
            y_gt).type(torch.FloatTensor).to(self.device))

        y_true = y_true.view(-1, 1)
        loss = self.criterion(y_pred, y_true)
        loss.backward()

        self.encoder_optimizer.step()
        self.decoder_optimizer.step()

        return loss.item()

    def test(self, on_train=False):
        """Prediction."""

        if on_train:
            y_pred = np.zeros(self.train_timesteps - self.T + 1)
        else:
            y_pred = np.zeros(self.X.shape[0] - self.train_timesteps)

        i = 0
        while i < len(y_pred):
            batch_idx = np.array(range(len(y_pred)))[i: (i + self.batch_size)]
            X = np.zeros((len(batch_idx), self.T - 1, self.X.shape[1]))
            y_history = np.zeros((len(batch_idx), self.T - 1))

            for j in range(len(batch_idx)):
                if on_train:
                    X[j, :, :] = self.X[range(
                        batch_idx[j], batch_idx[j] + self.T - 1), :]
                    y_history[j, :] = self.y[range(
                        batch_idx[j], batch_idx[j] + self.T - 1)]
                else:
                    X[j, :, :] = self.X[range(
                        batch_idx[j] + self.train_timesteps - self.T, batch_idx[j] + self.train_timesteps - 1), :]
                    y_history[j, :] = self.y[range(
                        batch_idx[j] + self.train_timesteps - self.T, batch_idx[j] + self.train_timesteps - 1)]

            y_history = Variable(torch.from_numpy(
                y_history).type(torch.FloatTensor).to(self.device))
            _, input_encoded = self.Encoder(
                Variable(torch.from_numpy(X).type(torch.FloatTensor).to(self.device)))
            y_pred[i:(i + self.batch_size)] = self.Decoder(input_encoded,
                                                           y_history).cpu().data.numpy()[:, 0]
            i += self.batch_size

        return y_pred


# ---- main.py ------------------------------------------------------------------------------------------------------
def parse_args():
    """Parse arguments."""
    # Parameters settings
    parser = argparse.ArgumentParser(description="PyTorch implementation of paper 'A Dual-Stage Attention-Based Recurrent Neural Network for Time Series Prediction'")

    # Dataset setting
    parser.add_argument('--dataroot', type=str, default="../nasdaq/nasdaq100_padding.csv", help='path to dataset')
    parser.add_argument('--batchsize', type=int, default=128, help='input batch size [128]')

    # Encoder / Decoder parameters setting
    parser.add_argument('--nhidden_encoder', type=int, default=128, help='size of hidden states for the encoder m [64, 128]')
    parser.add_argument('--nhidden_decoder', type=int, default=128, help='size of hidden states for the decoder p [64, 128]')
    parser.add_argument('--ntimestep', type=int, default=10, help='the number of time steps in the window T [10]')

    # Training parameters setting
    parser.add_argument('--epochs', type=int, default=10, help='number of epochs to train [10, 200, 500]')
    parser.add_argument('--lr', type=float, default=0.001, help='learning rate [0.001] reduced by 0.1 after each 10000 iterations')

    # parse the arguments
    args = parser.parse_args(['--batchsize', '64', '--nhidden_encoder', '32', '--nhidden_decoder', '32',
                              '--epochs', '6', '--lr', '0.01'])

    return args


def main():
    """Main pipeline of DA-RNN."""
    args = parse_args()

    # Read dataset
    print("==> Load dataset ...")
    X, y = read_data(args.dataroot, debug=False)

    # Initialize model
    print("==> Initialize DA-RNN model ...")
    model = DA_RNN(
        X,
        y,
        args.ntimestep,
        args.nhidden_encoder,
        args.nhidden_decoder,
        args.batchsize,
        args.lr,
        args.epochs
    )

    # Train
    print("==> Start training ...")
    model.train()

    # Prediction
    y_pred = model.test()

    # (the original saves plots of model.iter_losses, model.epoch_losses and y_pred against model.y here)
    test_rmse = np.sqrt(np.mean((y_pred - model.y[model.train_timesteps:]) ** 2))
    print("first/last iteration loss: %.4f / %.4f" % (model.iter_losses[0], model.iter_losses[-1]))
    print("test RMSE: %.4f" % test_rmse)
    print('Finished Training')
    return model.epoch_losses[-1], test_rmse


if __name__ == '__main__':
    torch.manual_seed(0)
    np.random.seed(0)
    final_loss, test_rmse = main()
    print("done epoch_loss=%.4f test_rmse=%.4f" % (final_loss, test_rmse))
