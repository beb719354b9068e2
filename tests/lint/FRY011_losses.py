# Corner cases of loss-on-other-device: lines marked with the code must be reported, nothing else.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def weighted(x):
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))  # FRY011
    return criterion(nn.Linear(4, 3).to(device)(x), torch.zeros(8, dtype=torch.long, device=device))


def positional_weight(x, y):
    criterion = nn.NLLLoss(torch.ones(3))  # FRY011
    return criterion(nn.Linear(4, 3).to(device)(x).log_softmax(1), y.to(device))


def pos_weight(x, y):
    bce = nn.BCEWithLogitsLoss(pos_weight=torch.full((3,), 2.0))  # FRY011
    return bce(nn.Linear(4, 3).to(device)(x), y.to(device))


def moved_loss(x, y):
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5])).to(device)
    return criterion(nn.Linear(4, 3).to(device)(x), y.to(device))


def moved_in_place(x, y):
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
    criterion.to(device)
    return criterion(nn.Linear(4, 3).to(device)(x), y.to(device))


def weight_on_device(x, y):
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5], device=device))
    return criterion(nn.Linear(4, 3).to(device)(x), y.to(device))


def handed_on(x, y, prepare):
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
    prepare(criterion)
    return criterion(nn.Linear(4, 3).to(device)(x), y.to(device))


def cpu_training(x, y):
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
    cpu_model = nn.Linear(4, 3)
    return criterion(cpu_model(x), y)


def host_target(x, labels):
    criterion = nn.CrossEntropyLoss()
    target = torch.from_numpy(np.asarray(labels)).long()  # FRY011
    return criterion(nn.Linear(4, 3).to(device)(x), target)


def functional_target(x):
    y = torch.tensor([0, 2, 1, 1])  # FRY011
    return F.cross_entropy(nn.Linear(4, 3).to(device)(x), y)


def functional_weight(x, y):
    w = torch.tensor([1.0, 2.0, 0.5])  # FRY011
    return F.cross_entropy(nn.Linear(4, 3).to(device)(x), y.to(device), weight=w)


def unknown_target(x, y):
    return F.cross_entropy(nn.Linear(4, 3).to(device)(x), y)


def loader_targets(loader):
    criterion = nn.MSELoss()
    for x, y in loader:
        loss = criterion(nn.Linear(4, 3).to(device)(x), y)
    return loss


def ctc_targets(log_probs, input_lengths):
    ctc = nn.CTCLoss()
    targets = torch.randint(1, 5, (2, 4))
    lengths = torch.tensor([4, 4])
    return ctc(log_probs.to(device), targets, input_lengths, lengths)


def scalar_target(x):
    return F.mse_loss(nn.Linear(4, 3).to(device)(x).sum(), torch.tensor(1.0))


def moved_target(x, labels):
    target = torch.tensor(labels)
    target = target.to(device)
    return F.cross_entropy(nn.Linear(4, 3).to(device)(x), target)
