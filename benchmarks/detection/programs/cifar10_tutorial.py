"""Small LeNet-style classifier on synthetic 32x32 colour images, trained on the GPU as the tutorial's end says.

Modeled on: pytorch/tutorials, beginner_source/blitz/cifar10_tutorial.py
(https://github.com/pytorch/tutorials/blob/main/beginner_source/blitz/cifar10_tutorial.py).
Kept: the device logic of its "Training on GPU" section applied to the whole script
(``device = torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')``, ``net.to(device)``,
``inputs, labels = data[0].to(device), data[1].to(device)`` at every training step), the images shown with
``.numpy()`` while still on the host, the state_dict saved with ``torch.save`` and loaded into a new ``Net()``
with ``torch.load(PATH, weights_only=True)`` and moved to the device, a prediction outside ``no_grad`` whose classes
are picked by indexing a tuple with ``predicted[j]``, the accuracy and the per-class accuracy under
``torch.no_grad()`` with ``.item()`` and label tensors used as tuple indices). Shrunk: random images normalised to
[-1, 1] instead of CIFAR10 (no download, no torchvision), 16 training and 8 test images, no worker processes, the
grid of images built with ``torch.cat`` instead of ``make_grid`` and no plotting, the weights file in a temporary
folder.
"""

import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


def synthetic_cifar(n):
    """``n`` random 3x32x32 images, normalised as ``Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))`` leaves them."""
    images = torch.rand(n, 3, 32, 32)
    labels = torch.randint(0, 10, (n,))
    return TensorDataset((images - 0.5) / 0.5, labels)


batch_size = 4

trainset = synthetic_cifar(16)
trainloader = DataLoader(trainset, batch_size=batch_size, shuffle=True)

testset = synthetic_cifar(8)
testloader = DataLoader(testset, batch_size=batch_size, shuffle=False)

classes = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def imshow(img):
    """Unnormalise a 3xHxW image and return it as an HxWx3 numpy array (the tutorial plots it)."""
    img = img / 2 + 0.5  # unnormalize
    npimg = img.numpy()
    return np.transpose(npimg, (1, 2, 0))


# get some random training images
dataiter = iter(trainloader)
images, labels = next(dataiter)

# show images, side by side
shown = imshow(torch.cat(list(images), dim=2))
print(f"grid {shown.shape} mean {shown.mean():.4f}")
# print labels
print(" ".join(f"{classes[labels[j]]:5s}" for j in range(batch_size)))


class Net(nn.Module):
    """Two 5x5 convolutions with max pooling, then three fully connected layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # flatten all dimensions except batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

# Assuming that we are on a CUDA machine, this should print a CUDA device:
print(device)

net = Net()
net.to(device)

criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)

for epoch in range(2):  # loop over the dataset multiple times
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        # get the inputs; data is a list of [inputs, labels]
        inputs, labels = data[0].to(device), data[1].to(device)

        # zero the parameter gradients
        optimizer.zero_grad()

        # forward + backward + optimize
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()

        # print statistics
        running_loss += loss.item()
        if i % 2 == 1:  # print every 2 mini-batches
            print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 2:.3f}")
            running_loss = 0.0

print("Finished Training")

with tempfile.TemporaryDirectory() as tmp:
    PATH = os.path.join(tmp, "cifar_net.pth")
    torch.save(net.state_dict(), PATH)

    dataiter = iter(testloader)
    images, labels = next(dataiter)

    # print images
    shown = imshow(torch.cat(list(images), dim=2))
    print(f"grid {shown.shape} mean {shown.mean():.4f}")
    print("GroundTruth: ", " ".join(f"{classes[labels[j]]:5s}" for j in range(4)))

    # load back the saved model (not needed here, done to show how)
    net = Net()
    net.load_state_dict(torch.load(PATH, weights_only=True))
    net.to(device)

outputs = net(images.to(device))

# the class with the highest energy is the prediction
_, predicted = torch.max(outputs, 1)

print("Predicted: ", " ".join(f"{classes[predicted[j]]:5s}" for j in range(4)))

correct = 0
total = 0
# since we're not training, we don't need to calculate the gradients for our outputs
with torch.no_grad():
    for data in testloader:
        images, labels = data[0].to(device), data[1].to(device)
        # calculate outputs by running images through the network
        outputs = net(images)
        # the class with the highest energy is what we choose as prediction
        _, predicted = torch.max(outputs, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()

print(f"Accuracy of the network on the {total} test images: {100 * correct // total} %")

# prepare to count predictions for each class
correct_pred = {classname: 0 for classname in classes}
total_pred = {classname: 0 for classname in classes}

# again no gradients needed
with torch.no_grad():
    for data in testloader:
        images, labels = data[0].to(device), data[1].to(device)
        outputs = net(images)
        _, predictions = torch.max(outputs, 1)
        # collect the correct predictions for each class
        for label, prediction in zip(labels, predictions, strict=True):
            if label == prediction:
                correct_pred[classes[label]] += 1
            total_pred[classes[label]] += 1

# print accuracy for each class (classes missing from the small test set are skipped)
for classname, correct_count in correct_pred.items():
    if total_pred[classname]:
        accuracy = 100 * float(correct_count) / total_pred[classname]
        print(f"Accuracy for class: {classname:5s} is {accuracy:.1f} %")

print(f"done accuracy={100 * correct / total:.1f}")
