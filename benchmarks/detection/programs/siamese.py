"""Siamese network that learns whether two synthetic 28x28 digits show the same class.

Modeled on: pytorch/examples, siamese_network/main.py
(https://github.com/pytorch/examples/blob/main/siamese_network/main.py).
Kept: the device logic (``torch.accelerator.current_accelerator()`` unless switched off or absent, DataLoader kwargs
with a worker, pinned memory and shuffling when accelerated, the model moved with ``.to(device)``, the two image
batches and the targets moved in one tuple assignment in train() and test(), test() under ``model.eval()`` (the
feature extractor has batch norm) and ``torch.no_grad()`` with ``torch.where(outputs > 0.5, 1, 0)`` on the device
and ``.item()`` counts, the state_dict saved with ``torch.save``; the dataset's pairs drawn on the host with
``random`` and numpy as in the original). Shrunk: random uint8 images and labels in place of MNIST (no download, no
torchvision), a two-stage ResNet-style extractor written out instead of torchvision's resnet18, 64 training and 32
test pairs, 2 epochs, the weights saved in a temporary folder, no argument parser.
"""

import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset

BATCH_SIZE = 16
TEST_BATCH_SIZE = 16
EPOCHS = 2
LR = 1.0
GAMMA = 0.7
NO_ACCEL = False
SEED = 0
LOG_INTERVAL = 2
SAVE_MODEL = True


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and an identity shortcut (one block of a ResNet stage)."""

    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        """Return ``relu(x + F(x))``."""
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class TinyResNet(nn.Module):
    """A narrow ResNet laid out like torchvision's (conv1, bn1, relu, maxpool, layers, avgpool, fc)."""

    def __init__(self, width=16, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = BasicBlock(width)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width, num_classes)


class SiameseNetwork(nn.Module):
    """Two images through one shared feature extractor; their features concatenated, compared by linear layers.

    The extractor is a ResNet whose first convolution reads one grey channel and whose last (fc) layer is dropped;
    a sigmoid gives the probability that the two images show the same class, trained with ``BCELoss``.
    """

    def __init__(self):
        super().__init__()
        self.resnet = TinyResNet()

        # read one grey channel instead of three RGB ones
        self.resnet.conv1 = nn.Conv2d(1, 16, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
        self.fc_in_features = self.resnet.fc.in_features

        # every layer but the last linear one
        self.resnet = torch.nn.Sequential(*(list(self.resnet.children())[:-1]))

        # linear layers that compare the features of the two images
        self.fc = nn.Sequential(
            nn.Linear(self.fc_in_features * 2, 32),
            nn.ReLU(inplace=True),
            nn.Linear(32, 1),
        )

        self.sigmoid = nn.Sigmoid()

        self.resnet.apply(self.init_weights)
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        """Xavier-initialise the weights of a linear layer and set its bias to 0.01."""
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        """Return the flattened features of one batch of images."""
        output = self.resnet(x)
        return output.view(output.size()[0], -1)

    def forward(self, input1, input2):
        """Return the probability that each pair shows the same class."""
        output1 = self.forward_once(input1)
        output2 = self.forward_once(input2)

        output = torch.cat((output1, output2), 1)
        output = self.fc(output)
        return self.sigmoid(output)


class APP_MATCHER(Dataset):
    """Pairs of images: even indices two different images of one class (target 1), odd ones two classes (0)."""

    def __init__(self, n):
        super().__init__()
        # random grey images and labels stand in for MNIST's uint8 data and targets
        self.data = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8).unsqueeze(1).clone()
        self.targets = torch.arange(n) % 10
        self.group_examples()

    def group_examples(self):
        """Map each class to the indices of its examples."""
        np_arr = np.array(self.targets.clone(), dtype=None, copy=None)

        self.grouped_examples = {}
        for i in range(0, 10):
            self.grouped_examples[i] = np.where(np_arr == i)[0]

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, index):
        selected_class = random.randint(0, 9)
        random_index_1 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)
        index_1 = self.grouped_examples[selected_class][random_index_1]
        image_1 = self.data[index_1].clone().float()

        if index % 2 == 0:
            # the same class, but never the same image
            random_index_2 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)
            while random_index_2 == random_index_1:
                random_index_2 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)
            index_2 = self.grouped_examples[selected_class][random_index_2]
            image_2 = self.data[index_2].clone().float()
            target = torch.tensor(1, dtype=torch.float)
        else:
            # another class
            other_selected_class = random.randint(0, 9)
            while other_selected_class == selected_class:
                other_selected_class = random.randint(0, 9)
            random_index_2 = random.randint(0, self.grouped_examples[other_selected_class].shape[0] - 1)
            index_2 = self.grouped_examples[other_selected_class][random_index_2]
            image_2 = self.data[index_2].clone().float()
            target = torch.tensor(0, dtype=torch.float)

        return image_1, image_2, target


def train(model, device, train_loader, optimizer, epoch):
    """Run one training epoch, printing the loss every LOG_INTERVAL batches."""
    model.train()

    criterion = nn.BCELoss()

    for batch_idx, (images_1, images_2, targets) in enumerate(train_loader):
        images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        if batch_idx % LOG_INTERVAL == 0:
            seen = batch_idx * len(images_1)
            total = len(train_loader.dataset)
            percent = 100.0 * batch_idx / len(train_loader)
            print(f"Train Epoch: {epoch} [{seen}/{total} ({percent:.0f}%)]\tLoss: {loss.item():.6f}")


def test(model, device, test_loader):
    """Return the test accuracy in percent, printing it with the average loss."""
    model.eval()
    test_loss = 0
    correct = 0

    criterion = nn.BCELoss()

    with torch.no_grad():
        for images_1, images_2, targets in test_loader:
            images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
            outputs = model(images_1, images_2).squeeze()
            test_loss += criterion(outputs, targets).sum().item()
            pred = torch.where(outputs > 0.5, 1, 0)  # same class when the probability passes one half
            correct += pred.eq(targets.view_as(pred)).sum().item()

    n = len(test_loader.dataset)
    test_loss /= n
    accuracy = 100.0 * correct / n
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{n} ({accuracy:.0f}%)\n")
    return accuracy


def main():
    """Train and test the siamese network, then save its weights."""
    use_accel = not NO_ACCEL and torch.accelerator.is_available()

    torch.manual_seed(SEED)
    random.seed(SEED)

    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")

    print(f"Using device: {device}")

    train_kwargs = {"batch_size": BATCH_SIZE}
    test_kwargs = {"batch_size": TEST_BATCH_SIZE}
    if use_accel:
        accel_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
        train_kwargs.update(accel_kwargs)
        test_kwargs.update(accel_kwargs)

    train_dataset = APP_MATCHER(64)
    test_dataset = APP_MATCHER(32)
    train_loader = DataLoader(train_dataset, **train_kwargs)
    test_loader = DataLoader(test_dataset, **test_kwargs)

    model = SiameseNetwork().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=LR)

    scheduler = StepLR(optimizer, step_size=1, gamma=GAMMA)
    accuracy = 0.0
    for epoch in range(1, EPOCHS + 1):
        train(model, device, train_loader, optimizer, epoch)
        accuracy = test(model, device, test_loader)
        scheduler.step()

    if SAVE_MODEL:
        with tempfile.TemporaryDirectory() as out_dir:
            torch.save(model.state_dict(), os.path.join(out_dir, "siamese_network.pt"))
    print(f"done accuracy={accuracy:.1f}")


if __name__ == "__main__":
    main()
