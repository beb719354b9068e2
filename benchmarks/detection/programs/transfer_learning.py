"""Fine-tune a small ResNet, then train only its new head, on synthetic two-class images; keep the best weights.

Modeled on: pytorch/tutorials, beginner_source/transfer_learning_tutorial.py
(https://github.com/pytorch/tutorials/blob/main/beginner_source/transfer_learning_tutorial.py).
Kept: the device logic (``cudnn.benchmark = True``, ``device = torch.device("cuda:0" if torch.cuda.is_available()
else "cpu")``, the new ``fc`` head put on the model before ``model.to(device)``, each batch moved with
``inputs.to(device)`` and ``labels.to(device)``, the train and val phases under ``model.train()`` /
``model.eval()`` and ``torch.set_grad_enabled(phase == 'train')``, the corrects counted in a device tensor with
``torch.sum(preds == labels.data)`` and turned into an accuracy with ``.double()``, the best weights kept both ways
the tutorial has over its revisions: ``copy.deepcopy(model.state_dict())`` and ``best_model_params.pt`` saved with
``torch.save`` in a ``TemporaryDirectory`` and loaded back with ``torch.load(..., weights_only=True)``; the
frozen backbone of the second scenario (``requires_grad = False``, an optimizer over ``model.fc.parameters()``
only), the predictions under ``model.eval()`` and ``torch.no_grad()`` with ``model.train(mode=was_training)``
after, and each shown image copied back with ``inputs.cpu().data[j]`` before ``.numpy()``). Shrunk: random 3x32x32
images instead of the ants and bees of hymenoptera_data (no download, no torchvision, no pretrained weights: a
randomly initialised ResNet18-shaped network with one narrow BasicBlock per stage stands in for ``resnet18``),
12 training and 8 validation images, 2 epochs per scenario, no worker processes, no plotting (imshow returns the
array), the custom image a random tensor.
"""

import copy
import os
from tempfile import TemporaryDirectory

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, TensorDataset

cudnn.benchmark = True
torch.manual_seed(0)

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def synthetic_images(n):
    """``n`` random images normalised with the ImageNet statistics, and labels 0 (ants) or 1 (bees)."""
    images = torch.rand(n, 3, 32, 32)
    labels = torch.randint(0, 2, (n,))
    images[:, 1] += 0.3 * labels.float().view(-1, 1, 1)  # bees are a little more green
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return TensorDataset((images - mean) / std, labels)


image_datasets = {"train": synthetic_images(12), "val": synthetic_images(8)}
dataloaders = {x: DataLoader(image_datasets[x], batch_size=4, shuffle=True) for x in ["train", "val"]}
dataset_sizes = {x: len(image_datasets[x]) for x in ["train", "val"]}
class_names = ["ants", "bees"]

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def imshow(inp, title=None):
    """Return a normalised CHW image tensor as an HWC numpy array in [0, 1] (the tutorial plots it)."""
    inp = inp.numpy().transpose((1, 2, 0))
    mean = np.array(MEAN)
    std = np.array(STD)
    inp = std * inp + mean
    inp = np.clip(inp, 0, 1)
    if title is not None:
        print(f"  shown {title}: mean {inp.mean():.4f}")
    return inp


# Get a batch of training data and "show" it side by side
inputs, classes = next(iter(dataloaders["train"]))
out = torch.cat(list(inputs), dim=2)
imshow(out, title=" ".join(class_names[x] for x in classes))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a shortcut, as in torchvision's ResNet18."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    """ResNet18's layout (7x7 stem, max pool, four stages, average pool, ``fc``) with one 4-16 channel block a stage."""

    def __init__(self, num_classes=1000, width=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, 2 * width, stride=2)
        self.layer3 = BasicBlock(2 * width, 4 * width, stride=2)
        self.layer4 = BasicBlock(4 * width, 4 * width, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(4 * width, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def train_model(model, criterion, optimizer, scheduler, num_epochs=25):
    """Train with a train and a val phase each epoch; return the model with the weights of the best val accuracy."""
    # Create a temporary directory to save training checkpoints
    with TemporaryDirectory() as tempdir:
        best_model_params_path = os.path.join(tempdir, "best_model_params.pt")

        torch.save(model.state_dict(), best_model_params_path)
        best_model_wts = copy.deepcopy(model.state_dict())
        best_acc = 0.0

        for epoch in range(num_epochs):
            print(f"Epoch {epoch}/{num_epochs - 1}")
            print("-" * 10)

            # Each epoch has a training and validation phase
            for phase in ["train", "val"]:
                if phase == "train":
                    model.train()  # Set model to training mode
                else:
                    model.eval()  # Set model to evaluate mode

                running_loss = 0.0
                running_corrects = 0

                # Iterate over data.
                for inputs, labels in dataloaders[phase]:
                    inputs = inputs.to(device)
                    labels = labels.to(device)

                    # zero the parameter gradients
                    optimizer.zero_grad()

                    # forward
                    # track history if only in train
                    with torch.set_grad_enabled(phase == "train"):
                        outputs = model(inputs)
                        _, preds = torch.max(outputs, 1)
                        loss = criterion(outputs, labels)

                        # backward + optimize only if in training phase
                        if phase == "train":
                            loss.backward()
                            optimizer.step()

                    # statistics
                    running_loss += loss.item() * inputs.size(0)
                    running_corrects += torch.sum(preds == labels.data)
                if phase == "train":
                    scheduler.step()

                epoch_loss = running_loss / dataset_sizes[phase]
                epoch_acc = running_corrects.double() / dataset_sizes[phase]

                print(f"{phase} Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}")

                # deep copy the model
                if phase == "val" and epoch_acc > best_acc:
                    best_acc = epoch_acc
                    best_model_wts = copy.deepcopy(model.state_dict())
                    torch.save(model.state_dict(), best_model_params_path)

            print()

        print(f"Best val Acc: {best_acc:4f}")

        # load best model weights
        model.load_state_dict(torch.load(best_model_params_path, weights_only=True))
    restored = all(torch.equal(value, best_model_wts[key]) for key, value in model.state_dict().items())
    print(f"best weights restored: {restored}")
    return model, float(best_acc)


def visualize_model(model, num_images=6):
    """Predict the classes of ``num_images`` validation images, then put the model back in its former mode."""
    was_training = model.training
    model.eval()
    images_so_far = 0

    with torch.no_grad():
        for inputs, labels in dataloaders["val"]:
            inputs = inputs.to(device)
            labels = labels.to(device)

            outputs = model(inputs)
            _, preds = torch.max(outputs, 1)

            for j in range(inputs.size()[0]):
                images_so_far += 1
                imshow(inputs.cpu().data[j], title=f"predicted: {class_names[preds[j]]}")

                if images_so_far == num_images:
                    model.train(mode=was_training)
                    return
        model.train(mode=was_training)


# Finetuning the ConvNet: a new head of 2 outputs on the whole network, all parameters optimised
model_ft = TinyResNet()  # stands in for models.resnet18(weights='IMAGENET1K_V1')
num_ftrs = model_ft.fc.in_features
model_ft.fc = nn.Linear(num_ftrs, 2)

model_ft = model_ft.to(device)

criterion = nn.CrossEntropyLoss()

# Observe that all parameters are being optimized
optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.001, momentum=0.9)

# Decay LR by a factor of 0.1 every 7 epochs
exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)

model_ft, best_ft = train_model(model_ft, criterion, optimizer_ft, exp_lr_scheduler, num_epochs=2)
visualize_model(model_ft)

# ConvNet as fixed feature extractor: freeze everything but the new head
model_conv = TinyResNet()
for param in model_conv.parameters():
    param.requires_grad = False

# Parameters of newly constructed modules have requires_grad=True by default
num_ftrs = model_conv.fc.in_features
model_conv.fc = nn.Linear(num_ftrs, 2)

model_conv = model_conv.to(device)

criterion = nn.CrossEntropyLoss()

# Observe that only parameters of final layer are being optimized as opposed to before.
optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.001, momentum=0.9)

# Decay LR by a factor of 0.1 every 7 epochs
exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=7, gamma=0.1)

model_conv, best_conv = train_model(model_conv, criterion, optimizer_conv, exp_lr_scheduler, num_epochs=2)
visualize_model(model_conv)


def visualize_model_predictions(model, img):
    """Classify one normalised CHW image; return the predicted class name."""
    was_training = model.training
    model.eval()

    img = img.unsqueeze(0)
    img = img.to(device)

    with torch.no_grad():
        outputs = model(img)
        _, preds = torch.max(outputs, 1)

        imshow(img.cpu().data[0], title=f"Predicted: {class_names[preds[0]]}")

        model.train(mode=was_training)
    return class_names[preds[0]]


# a random "custom image" in place of data/hymenoptera_data/val/bees/72100438_73de9f17af.jpg
custom = image_datasets["val"][0][0]
predicted = visualize_model_predictions(model_conv, custom)
print(f"done best_ft={best_ft:.4f} best_conv={best_conv:.4f} custom={predicted}")
