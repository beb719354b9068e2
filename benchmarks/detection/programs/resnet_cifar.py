"""Train a small ResNet on CIFAR-shaped data, keep the best checkpoint, then resume from it.

Modeled on: https://github.com/kuangliu/pytorch-cifar (main.py and models/resnet.py).
Kept: the device logic (device = 'cuda' if available else 'cpu', net.to(device), DataParallel and
cudnn.benchmark only on cuda, inputs/targets moved with .to(device), .item() accuracy counting, a checkpoint dict
saved from test() and torch.load'ed on resume). Shrunk: synthetic 8x8 images, a ResNet with one narrow BasicBlock
per stage, two epochs of a few batches, the checkpoint in a temporary folder.
"""

import os
import tempfile

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm, plus an identity or 1x1 projection shortcut."""

    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = out + self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    """A CIFAR-style ResNet: a 3x3 stem, four stages of residual blocks, average pooling and a linear head."""

    def __init__(self, block, num_blocks, num_classes=10, width=8):
        super().__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 2 * width, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 4 * width, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, 8 * width, num_blocks[3], stride=2)
        self.linear = nn.Linear(8 * width * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for s in strides:
            layers.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.layer3(out)
        out = self.layer4(out)
        out = F.avg_pool2d(out, out.size(-1))
        out = out.view(out.size(0), -1)
        return self.linear(out)


def TinyResNet():
    """One block per stage: the ResNet18 layout with [1, 1, 1, 1] blocks instead of [2, 2, 2, 2]."""
    return ResNet(BasicBlock, [1, 1, 1, 1])


def make_loader(n, shuffle):
    """A loader over synthetic CIFAR-like images whose class shifts the mean of one colour channel."""
    targets = torch.randint(0, 10, (n,))
    inputs = torch.randn(n, 3, 8, 8)
    inputs[:, 0] += (targets.float() - 4.5).view(-1, 1, 1) * 0.5
    return DataLoader(TensorDataset(inputs, targets), batch_size=16, shuffle=shuffle)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
best_acc = 0  # best test accuracy
start_epoch = 0

trainloader = make_loader(48, shuffle=True)
testloader = make_loader(32, shuffle=False)

print("==> Building model..")
net = TinyResNet()
net = net.to(device)
if device == "cuda":
    net = torch.nn.DataParallel(net)
    cudnn.benchmark = True

criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)


def train(epoch):
    """One pass over the training set."""
    print(f"\nEpoch: {epoch}")
    net.train()
    train_loss = 0
    correct = 0
    total = 0
    for inputs, targets in trainloader:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()

        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
    print(f"train loss {train_loss / len(trainloader):.3f} | acc {100.0 * correct / total:.1f}% ({correct}/{total})")


def test(epoch, ckpt_path):
    """Evaluate on the test set and save a checkpoint when the accuracy is the best so far."""
    global best_acc
    net.eval()
    test_loss = 0
    correct = 0
    total = 0
    with torch.no_grad():
        for inputs, targets in testloader:
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = net(inputs)
            loss = criterion(outputs, targets)

            test_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
    print(f"test loss {test_loss / len(testloader):.3f} | acc {100.0 * correct / total:.1f}% ({correct}/{total})")

    acc = 100.0 * correct / total
    if acc > best_acc:
        print("Saving..")
        state = {
            "net": net.state_dict(),
            "acc": acc,
            "epoch": epoch,
        }
        torch.save(state, ckpt_path)
        best_acc = acc
    return acc


with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "checkpoint"))
    ckpt_path = os.path.join(tmp, "checkpoint", "ckpt.pth")
    for epoch in range(start_epoch, start_epoch + 2):
        train(epoch)
        test(epoch, ckpt_path)
        scheduler.step()

    # Resume from the saved checkpoint, as `python main.py --resume` does, and check the accuracy it recorded.
    print("==> Resuming from checkpoint..")
    net = TinyResNet()
    net = net.to(device)
    if device == "cuda":
        net = torch.nn.DataParallel(net)
    checkpoint = torch.load(ckpt_path)
    net.load_state_dict(checkpoint["net"])
    best_acc = checkpoint["acc"]
    start_epoch = checkpoint["epoch"] + 1
    resumed_acc = test(checkpoint["epoch"], ckpt_path)

print(f"resumed at epoch {start_epoch}, saved acc {best_acc:.1f}%, re-evaluated acc {resumed_acc:.1f}%")
print(f"done acc={resumed_acc:.1f}")
