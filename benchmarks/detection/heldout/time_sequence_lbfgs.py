"""Two stacked LSTMCells learn sine waves with LBFGS, then predict future values.

Modeled on: pytorch/examples, time_sequence_prediction/train.py (https://github.com/pytorch/examples/blob/main/time_sequence_prediction/train.py), with data from time_sequence_prediction/generate_sine_wave.py.
Kept: the author's device logic exactly, which is none: everything runs on the default (CPU) device in float64, with the `torch.zeros(..., dtype=torch.double)` hidden/cell states built inside `Sequence.forward`, `seq.double()`, an LBFGS optimizer stepped with a closure, and prediction under `torch.no_grad()` followed by `pred.detach().numpy()`; the `if __name__ == '__main__':` block; no checkpoint (the original saves none). Shrunk: sine data generated in memory instead of loading traindata.pt, N=10 sequences of length L=60, future=30, LBFGS `max_iter=6` (default 20), `steps = 2` constant instead of argparse `--steps`, matplotlib plotting replaced by printing the prediction's shape.
"""

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

steps = 2  # was argparse --steps


def generate_sine_wave(T=20, L=60, N=10):
    np.random.seed(2)
    x = np.empty((N, L), 'int64')
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype('float64')
    return data


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future = 0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):# if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


if __name__ == '__main__':
    # set random seed to 0
    np.random.seed(0)
    torch.manual_seed(0)
    # load data and make training set
    data = generate_sine_wave()
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    # build the model
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=6)
    #begin to train
    for i in range(steps):
        print('STEP: ', i)
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print('loss:', loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 30
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            y = pred.detach().numpy()
        # draw the result (plotting dropped; report what would be drawn)
        def draw(yi, color):
            known = yi[:input.size(1)]
            predicted = yi[input.size(1):]
            print(color, np.arange(input.size(1)).shape, known.shape,
                  np.arange(input.size(1), input.size(1) + future).shape, predicted.shape)
        draw(y[0], 'r')
        draw(y[1], 'g')
        draw(y[2], 'b')
