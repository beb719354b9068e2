"""Iterative magnitude pruning in search of winning lottery tickets (Frankle & Carbin, "The Lottery Ticket
Hypothesis"), as rahulvigneswaran/Lottery-Ticket-Hypothesis-in-Pytorch's main.py does: train, prune the smallest
``prune_percent`` of each weight tensor, rewind the surviving weights to their initial values (``lt``) or
re-initialise them (``reinit``), and train again, recording the best test accuracy at every sparsity level. The
device is ``torch.device("cuda" if torch.cuda.is_available() else "cpu")``, computed in `main` and again inside
`train` and `test`; the model is built with ``.to(device)`` and the whole module is pickled with ``torch.save``;
the pruning masks live in a global list of numpy arrays, so `prune_by_percentile`, `original_initialization` and
the ``reinit`` branch pull each weight to the host with ``param.data.cpu().numpy()`` and write it back with
``torch.from_numpy(...).to(weight_dev)`` where ``weight_dev = param.device``; `train` freezes pruned weights by
round-tripping every gradient through numpy (``p.grad.data = torch.from_numpy(grad_tensor).to(device)``); a new
Adam optimizer is built after each pruning round; `test` runs under ``model.eval()`` and ``torch.no_grad()``.

Modeled on: rahulvigneswaran/Lottery-Ticket-Hypothesis-in-Pytorch, main.py, utils.py, archs/mnist/fc1.py and
archs/mnist/LeNet5.py at commit 34a8c9678406a1c7dd0fec4c9f0d25d017be55fb
(https://github.com/rahulvigneswaran/Lottery-Ticket-Hypothesis-in-Pytorch/blob/34a8c9678406a1c7dd0fec4c9f0d25d017be55fb/main.py).

Kept: `main(args, ITE)` with the global ``model``, the deep-copied ``initial_state_dict``, the pruning loop over
``_ite`` (``prune_by_percentile`` from the second round on, ``reinit`` re-applying `weight_init` and the mask,
``lt`` calling `original_initialization`), validation every ``valid_freq`` epochs saving the best model with
``torch.save(model, ...)``, the per-round loss/accuracy arrays dumped with ``ndarray.dump`` and the masks with
pickle; `train` (gradient freezing with ``np.where(tensor < EPS, 0, grad_tensor)`` as the authors wrote it),
`test` (``F.nll_loss`` on the logits and ``pred.eq(...).sum().item()``), `prune_by_percentile`, `make_mask`,
`original_initialization`, `weight_init` (its Linear/Conv/BatchNorm branches); utils' `print_nonzeros` and
`checkdir`; the `fc1` and `LeNet5` MNIST architectures; the argparse options.

Changed to run here: MNIST is replaced by synthetic 28x28 digits (ten noisy stroke prototypes) made in memory;
torchvision transforms become a normalisation of the tensors; tqdm, TensorBoard, seaborn and the matplotlib plots
are left out (the dumped arrays are kept); the save/dump folders live in a temporary folder instead of
``os.getcwd()``; the script runs ``lt`` pruning on fc1 and then ``reinit`` pruning on LeNet5; weight_init's
ConvTranspose/3-D/RNN branches are left out.
Shrunk: 600 training and 200 test images; LeNet5 with 16 instead of 64 channels and a 128-unit hidden layer;
end_iter 3 epochs instead of 100; 3 and 2 pruning rounds instead of 35; prune_percent 20.
"""
import argparse
import copy
import os
import pickle
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
from torch.utils.data import Dataset


# ---------------------------------------------------------------- archs/mnist/fc1.py, LeNet5.py
class fc1(nn.Module):

    def __init__(self, num_classes=10):
        super(fc1, self).__init__()
        self.classifier = nn.Sequential(
            nn.Linear(28 * 28, 300),
            nn.ReLU(inplace=True),
            nn.Linear(300, 100),
            nn.ReLU(inplace=True),
            nn.Linear(100, num_classes),
        )

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


class LeNet5(nn.Module):
    def __init__(self, num_classes=10):
        super(LeNet5, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=(3, 3), stride=1, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, kernel_size=(3, 3), stride=1, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 14 * 14, 128),
            nn.ReLU(inplace=True),
            nn.Linear(128, 128),
            nn.ReLU(inplace=True),
            nn.Linear(128, num_classes),
        )

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


# ---------------------------------------------------------------- utils.py
def print_nonzeros(model):
    nonzero = total = 0
    for name, p in model.named_parameters():
        tensor = p.data.cpu().numpy()
        nz_count = np.count_nonzero(tensor)
        total_params = np.prod(tensor.shape)
        nonzero += nz_count
        total += total_params
        print(f'{name:20} | nonzeros = {nz_count:7} / {total_params:7} ({100 * nz_count / total_params:6.2f}%) | '
              f'total_pruned = {total_params - nz_count :7} | shape = {tensor.shape}')
    print(f'alive: {nonzero}, pruned : {total - nonzero}, total: {total}, Compression rate : {total/nonzero:10.2f}x  '
          f'({100 * (total-nonzero) / total:6.2f}% pruned)')
    return (round((nonzero / total) * 100, 1))


def checkdir(directory):
    if not os.path.exists(directory):
        os.makedirs(directory)


# ---------------------------------------------------------------- data (stands in for torchvision MNIST)
class SyntheticMNIST(Dataset):
    """Ten noisy stroke prototypes on a 28x28 canvas, normalised like transforms.Normalize((0.1307,), (0.3081,))."""

    def __init__(self, n, train=True, seed=0):
        rng = np.random.RandomState(seed)
        protos = np.zeros((10, 28, 28), dtype=np.float32)
        for k in range(10):
            for r in rng.randint(4, 24, size=(4, 2)):
                protos[k, r[0] - 2:r[0] + 2, 3:25] = 1.0 if k % 2 else 0.0
                protos[k, 3:25, r[1] - 2:r[1] + 2] = 1.0
        rng = np.random.RandomState(seed + (1 if train else 2))
        self.targets = torch.from_numpy(rng.randint(0, 10, size=n)).long()
        imgs = protos[self.targets.numpy()] + 0.3 * rng.randn(n, 28, 28).astype(np.float32)
        self.data = (torch.from_numpy(np.clip(imgs, 0, 1)).unsqueeze(1) - 0.1307) / 0.3081

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        return self.data[index], self.targets[index]


# ---------------------------------------------------------------- main.py
def main(args, ITE=0):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    reinit = True if args.prune_type == "reinit" else False

    # Data Loader
    traindataset = SyntheticMNIST(600, train=True)
    testdataset = SyntheticMNIST(200, train=False)
    train_loader = torch.utils.data.DataLoader(traindataset, batch_size=args.batch_size, shuffle=True, num_workers=0,
                                               drop_last=False)
    test_loader = torch.utils.data.DataLoader(testdataset, batch_size=args.batch_size, shuffle=False, num_workers=0,
                                              drop_last=True)

    # Importing Network Architecture
    global model
    if args.arch_type == "fc1":
        model = fc1().to(device)
    elif args.arch_type == "lenet5":
        model = LeNet5().to(device)
    else:
        print("\nWrong Model choice\n")
        exit()

    # Weight Initialization
    model.apply(weight_init)

    # Copying and Saving Initial State
    initial_state_dict = copy.deepcopy(model.state_dict())
    checkdir(f"{args.root}/saves/{args.arch_type}/{args.dataset}/")
    torch.save(model, f"{args.root}/saves/{args.arch_type}/{args.dataset}/initial_state_dict_{args.prune_type}.pth.tar")

    # Making Initial Mask
    make_mask(model)

    # Optimizer and Loss
    optimizer = torch.optim.Adam(model.parameters(), weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()  # Default was F.nll_loss

    # Layer Looper
    for name, param in model.named_parameters():
        print(name, param.size())

    # Pruning
    # NOTE First Pruning Iteration is of No Compression
    best_accuracy = 0
    ITERATION = args.prune_iterations
    comp = np.zeros(ITERATION, float)
    bestacc = np.zeros(ITERATION, float)
    step = 0
    all_loss = np.zeros(args.end_iter, float)
    all_accuracy = np.zeros(args.end_iter, float)

    for _ite in range(args.start_iter, ITERATION):
        if not _ite == 0:
            prune_by_percentile(args.prune_percent, resample=resample, reinit=reinit)
            if reinit:
                model.apply(weight_init)
                step = 0
                for name, param in model.named_parameters():
                    if 'weight' in name:
                        weight_dev = param.device
                        param.data = torch.from_numpy(param.data.cpu().numpy() * mask[step]).to(weight_dev)
                        step = step + 1
                step = 0
            else:
                original_initialization(mask, initial_state_dict)
            optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=1e-4)
        print(f"\n--- Pruning Level [{ITE}:{_ite}/{ITERATION}]: ---")

        # Print the table of Nonzeros in each layer
        comp1 = print_nonzeros(model)
        comp[_ite] = comp1

        for iter_ in range(args.end_iter):

            # Frequency for Testing
            if iter_ % args.valid_freq == 0:
                accuracy = test(model, test_loader, criterion)

                # Save Weights
                if accuracy > best_accuracy:
                    best_accuracy = accuracy
                    checkdir(f"{args.root}/saves/{args.arch_type}/{args.dataset}/")
                    torch.save(model, f"{args.root}/saves/{args.arch_type}/{args.dataset}/{_ite}_model_{args.prune_type}.pth.tar")

            # Training
            loss = train(model, train_loader, optimizer, criterion)
            all_loss[iter_] = loss
            all_accuracy[iter_] = accuracy

            # Frequency for Printing Accuracy and Loss
            if iter_ % args.print_freq == 0:
                print(f'Train Epoch: {iter_}/{args.end_iter} Loss: {loss:.6f} Accuracy: {accuracy:.2f}% '
                      f'Best Accuracy: {best_accuracy:.2f}%')

        bestacc[_ite] = best_accuracy

        # Dump Plot values
        checkdir(f"{args.root}/dumps/lt/{args.arch_type}/{args.dataset}/")
        all_loss.dump(f"{args.root}/dumps/lt/{args.arch_type}/{args.dataset}/{args.prune_type}_all_loss_{comp1}.dat")
        all_accuracy.dump(f"{args.root}/dumps/lt/{args.arch_type}/{args.dataset}/{args.prune_type}_all_accuracy_{comp1}.dat")

        # Dumping mask
        with open(f"{args.root}/dumps/lt/{args.arch_type}/{args.dataset}/{args.prune_type}_mask_{comp1}.pkl", 'wb') as fp:
            pickle.dump(mask, fp)

        # Making variables into 0
        best_accuracy = 0
        all_loss = np.zeros(args.end_iter, float)
        all_accuracy = np.zeros(args.end_iter, float)

    # Dumping Values for Plotting
    comp.dump(f"{args.root}/dumps/lt/{args.arch_type}/{args.dataset}/{args.prune_type}_compression.dat")
    bestacc.dump(f"{args.root}/dumps/lt/{args.arch_type}/{args.dataset}/{args.prune_type}_bestaccuracy.dat")
    print(f"{args.arch_type} {args.prune_type}: unpruned % {comp.tolist()} best accuracy {bestacc.tolist()}")


# Function for Training
def train(model, train_loader, optimizer, criterion):
    EPS = 1e-6
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.train()
    for batch_idx, (imgs, targets) in enumerate(train_loader):
        optimizer.zero_grad()
        imgs, targets = imgs.to(device), targets.to(device)
        output = model(imgs)
        train_loss = criterion(output, targets)
        train_loss.backward()

        # Freezing Pruned weights by making their gradients Zero
        for name, p in model.named_parameters():
            if 'weight' in name:
                tensor = p.data.cpu().numpy()
                grad_tensor = p.grad.data.cpu().numpy()
                grad_tensor = np.where(tensor < EPS, 0, grad_tensor)
                p.grad.data = torch.from_numpy(grad_tensor).to(device)
        optimizer.step()
    return train_loss.item()


# Function for Testing
def test(model, test_loader, criterion):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.data.max(1, keepdim=True)[1]  # get the index of the max log-probability
            correct += pred.eq(target.data.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        accuracy = 100. * correct / len(test_loader.dataset)
    return accuracy


# Prune by Percentile module
def prune_by_percentile(percent, resample=False, reinit=False, **kwargs):
    global step
    global mask
    global model

    # Calculate percentile value
    step = 0
    for name, param in model.named_parameters():

        # We do not prune bias term
        if 'weight' in name:
            tensor = param.data.cpu().numpy()
            alive = tensor[np.nonzero(tensor)]  # flattened array of nonzero values
            percentile_value = np.percentile(abs(alive), percent)

            # Convert Tensors to numpy and calculate
            weight_dev = param.device
            new_mask = np.where(abs(tensor) < percentile_value, 0, mask[step])

            # Apply new weight and mask
            param.data = torch.from_numpy(tensor * new_mask).to(weight_dev)
            mask[step] = new_mask
            step += 1
    step = 0


# Function to make an empty mask of the same size as the model
def make_mask(model):
    global step
    global mask
    step = 0
    for name, param in model.named_parameters():
        if 'weight' in name:
            step = step + 1
    mask = [None] * step
    step = 0
    for name, param in model.named_parameters():
        if 'weight' in name:
            tensor = param.data.cpu().numpy()
            mask[step] = np.ones_like(tensor)
            step = step + 1
    step = 0


def original_initialization(mask_temp, initial_state_dict):
    global model

    step = 0
    for name, param in model.named_parameters():
        if "weight" in name:
            weight_dev = param.device
            param.data = torch.from_numpy(mask_temp[step] * initial_state_dict[name].cpu().numpy()).to(weight_dev)
            step = step + 1
        if "bias" in name:
            param.data = initial_state_dict[name]
    step = 0


# Function for Initialization
def weight_init(m):
    '''
    Usage:
        model = Model()
        model.apply(weight_init)
    '''
    if isinstance(m, nn.Conv1d):
        init.normal_(m.weight.data)
        if m.bias is not None:
            init.normal_(m.bias.data)
    elif isinstance(m, nn.Conv2d):
        init.xavier_normal_(m.weight.data)
        if m.bias is not None:
            init.normal_(m.bias.data)
    elif isinstance(m, nn.BatchNorm1d):
        init.normal_(m.weight.data, mean=1, std=0.02)
        init.constant_(m.bias.data, 0)
    elif isinstance(m, nn.BatchNorm2d):
        init.normal_(m.weight.data, mean=1, std=0.02)
        init.constant_(m.bias.data, 0)
    elif isinstance(m, nn.Linear):
        init.xavier_normal_(m.weight.data)
        init.normal_(m.bias.data)


if __name__ == "__main__":
    # Arguement Parser
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", default=1.2e-3, type=float, help="Learning rate")
    parser.add_argument("--batch_size", default=60, type=int)
    parser.add_argument("--start_iter", default=0, type=int)
    parser.add_argument("--end_iter", default=3, type=int)
    parser.add_argument("--print_freq", default=1, type=int)
    parser.add_argument("--valid_freq", default=1, type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--prune_type", default="lt", type=str, help="lt | reinit")
    parser.add_argument("--gpu", default="0", type=str)
    parser.add_argument("--dataset", default="mnist", type=str, help="mnist")
    parser.add_argument("--arch_type", default="fc1", type=str, help="fc1 | lenet5")
    parser.add_argument("--prune_percent", default=20, type=int, help="Pruning percent")
    parser.add_argument("--prune_iterations", default=3, type=int, help="Pruning iterations count")

    args = parser.parse_args()

    #FIXME resample
    resample = False

    torch.manual_seed(0)
    np.random.seed(0)
    with tempfile.TemporaryDirectory() as root:
        args.root = root
        # Looping Entire process
        main(args, ITE=1)
        args.arch_type, args.prune_type, args.prune_iterations = "lenet5", "reinit", 2
        main(args, ITE=1)
    print('done')
