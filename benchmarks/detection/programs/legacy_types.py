"""Old-style PyTorch: tensor types picked by `use_cuda`, Variables, .type(dtype) and weight updates through .data.

Modeled on: the PyTorch 0.3-era tutorials (https://github.com/jcjohnson/pytorch-examples, "PyTorch: Variables and
autograd", two_layer_net_variable.py) and the Stack Overflow answers built on them that many repositories still carry.
Kept: the device logic (use_cuda = torch.cuda.is_available(), dtype = torch.cuda.FloatTensor or torch.FloatTensor,
Variable(torch.randn(...).type(dtype)), model.cuda() under `if use_cuda`, inputs cast with x.type(dtype),
torch.cuda.LongTensor labels when use_cuda, loss.data.item(), SGD written by hand on .data). Shrunk: 64 samples,
a hidden layer of 32, a hundred-odd steps.
"""

import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)
use_cuda = torch.cuda.is_available()
dtype = torch.cuda.FloatTensor if use_cuda else torch.FloatTensor
ltype = torch.cuda.LongTensor if use_cuda else torch.LongTensor

# Part 1: a two-layer ReLU network with hand-written forward and backward through autograd Variables.
N, D_in, H, D_out = 64, 100, 32, 10

x = Variable(torch.randn(N, D_in).type(dtype), requires_grad=False)
y = Variable(torch.randn(N, D_out).type(dtype), requires_grad=False)
w1 = Variable(torch.randn(D_in, H).type(dtype), requires_grad=True)
w2 = Variable(torch.randn(H, D_out).type(dtype), requires_grad=True)

learning_rate = 1e-6
for t in range(100):
    y_pred = x.mm(w1).clamp(min=0).mm(w2)
    loss = (y_pred - y).pow(2).sum()
    if t % 25 == 0:
        print(t, loss.data.item())
    loss.backward()

    w1.data -= learning_rate * w1.grad.data
    w2.data -= learning_rate * w2.grad.data

    # Manually zero the gradients after updating weights
    w1.grad.data.zero_()
    w2.grad.data.zero_()
print("two-layer net loss", loss.data.item())

# Part 2: an nn.Sequential classifier, moved with .cuda() when there is a GPU, inputs cast with .type(dtype).
features = torch.randn(N, D_in)  # a CPU FloatTensor, as a numpy-loaded batch would be
labels_list = (features[:, 0] > 0).long().tolist()  # plain Python ints, as read from a label file

model = nn.Sequential(nn.Linear(D_in, H), nn.ReLU(), nn.Linear(H, 2))
if use_cuda:
    model.cuda()
loss_fn = nn.CrossEntropyLoss()

inputs = Variable(features.type(dtype))
labels = Variable(torch.cuda.LongTensor(labels_list) if use_cuda else torch.LongTensor(labels_list))

lr = 0.1
for t in range(40):
    scores = model(inputs)
    loss = loss_fn(scores, labels)
    model.zero_grad()
    loss.backward()
    for param in model.parameters():
        param.data.add_(param.grad.data, alpha=-lr)
    if t % 10 == 0:
        print(t, loss.data.item())

# Accuracy on a fresh batch: cast the new CPU data the same way, compare with labels of the same tensor type.
test_features = torch.randn(N, D_in)
test_labels = (test_features[:, 0] > 0).long().type(ltype)
pred = model(Variable(test_features.type(dtype))).data.max(1)[1]
accuracy = pred.eq(test_labels).sum().item() / N
print(f"done loss={loss.data.item():.4f} acc={accuracy:.3f}")
