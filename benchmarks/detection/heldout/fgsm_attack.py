"""Fast Gradient Sign attack on a small pretrained digit classifier: accuracy under attack for several epsilons.

Modeled on: pytorch/tutorials, beginner_source/fgsm_tutorial.py
(https://github.com/pytorch/tutorials/blob/main/beginner_source/fgsm_tutorial.py).
Kept: the device logic (``device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available()
else "cpu"``, ``Net().to(device)`` loading the pretrained weights with ``torch.load(pretrained_model,
map_location=device, weights_only=True)``, ``model.eval()`` for the dropout layers, each test image and label moved
with ``data, target = data.to(device), target.to(device)``, ``data.requires_grad = True`` and the gradient read from
``data.grad.data``, the predictions compared with ``.item()``, ``denorm`` building its mean and std with
``torch.tensor(mean).to(device)``, the perturbed image normalised again the way ``transforms.Normalize`` does it, with
the constants made on the input's device, and the adversarial examples kept as
``perturbed_data.squeeze().detach().cpu().numpy()``). Shrunk: synthetic digits (a smooth template per class plus
noise) instead of MNIST, 12x12 images, 20 test images, a narrower LeNet, the "pretrained" weights made by a short
CPU training written to a temporary folder instead of downloaded, the accuracy curve and examples printed instead of
plotted.
"""

import os
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

epsilons = [0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
use_cuda = True
torch.manual_seed(42)

MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)


class Net(nn.Module):
    """The MNIST example's network, narrower: two convolutions, max pooling, dropout, two linear layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(128, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        """Return log-probabilities of the 10 digits."""
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def normalize(tensor, mean, std):
    """What ``transforms.Normalize(mean, std)`` does to a batch: the constants made on the tensor's own device."""
    mean = torch.as_tensor(mean, dtype=tensor.dtype, device=tensor.device).view(-1, 1, 1)
    std = torch.as_tensor(std, dtype=tensor.dtype, device=tensor.device).view(-1, 1, 1)
    return (tensor - mean) / std


def synthetic_digits(n, generator):
    """``n`` 1x12x12 images in [0, 1], normalised as the tutorial's ``Normalize((0.1307,), (0.3081,))`` leaves them.

    Each class is a fixed smooth blob pattern; an image is its class's pattern plus pixel noise.
    """
    templates = F.interpolate(torch.rand(10, 1, 4, 4, generator=torch.Generator().manual_seed(7)), size=(12, 12))
    templates = (templates > 0.6).float()
    labels = torch.randint(0, 10, (n,), generator=generator)
    images = (templates[labels] * 0.8 + 0.5 * torch.rand(n, 1, 12, 12, generator=generator)).clamp(0, 1)
    return TensorDataset(normalize(images, MNIST_MEAN, MNIST_STD), labels)


def write_pretrained_model(path):
    """Stand-in for the download: train the network briefly on the CPU and save its state_dict to ``path``."""
    generator = torch.Generator().manual_seed(1)
    loader = DataLoader(synthetic_digits(128, generator), batch_size=32, shuffle=True, generator=generator)
    net = Net()
    optimizer = optim.Adam(net.parameters(), lr=0.003)
    for _ in range(10):
        for images, labels in loader:
            optimizer.zero_grad()
            F.nll_loss(net(images), labels).backward()
            optimizer.step()
    torch.save(net.state_dict(), path)


data_dir = tempfile.mkdtemp()
pretrained_model = os.path.join(data_dir, "lenet_mnist_model.pth")
write_pretrained_model(pretrained_model)

test_loader = DataLoader(
    synthetic_digits(20, torch.Generator().manual_seed(2)),
    batch_size=1,
    shuffle=True,
)

# the accelerator when there is one (CUDA, MPS, XPU, ...), else the CPU
device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
print(f"Using {device} device")

model = Net().to(device)

model.load_state_dict(torch.load(pretrained_model, map_location=device, weights_only=True))

# evaluation mode, for the dropout layers
model.eval()


def fgsm_attack(image, epsilon, data_grad):
    """Step every pixel by ``epsilon`` in the direction that raises the loss, then clip to [0, 1]."""
    sign_data_grad = data_grad.sign()
    perturbed_image = image + epsilon * sign_data_grad
    perturbed_image = torch.clamp(perturbed_image, 0, 1)
    return perturbed_image


def denorm(batch, mean=[0.1307], std=[0.3081]):  # noqa: B006 (the tutorial's signature)
    """Undo the normalisation of a batch, back to pixel values in [0, 1]."""
    if isinstance(mean, list):
        mean = torch.tensor(mean).to(device)
    if isinstance(std, list):
        std = torch.tensor(std).to(device)

    return batch * std.view(1, -1, 1, 1) + mean.view(1, -1, 1, 1)


def test(model, device, test_loader, epsilon):
    """Accuracy of ``model`` on the test images attacked with strength ``epsilon``, and up to 5 examples."""
    correct = 0
    adv_examples = []

    for data, target in test_loader:
        data, target = data.to(device), target.to(device)

        # the attack needs the gradient with respect to the input
        data.requires_grad = True

        output = model(data)
        init_pred = output.max(1, keepdim=True)[1]

        # already wrong: nothing to attack
        if init_pred.item() != target.item():
            continue

        loss = F.nll_loss(output, target)

        model.zero_grad()

        loss.backward()

        data_grad = data.grad.data

        # attack the image in pixel space, then normalise it again for the model
        data_denorm = denorm(data)
        perturbed_data = fgsm_attack(data_denorm, epsilon, data_grad)
        perturbed_data_normalized = normalize(perturbed_data, MNIST_MEAN, MNIST_STD)

        output = model(perturbed_data_normalized)

        final_pred = output.max(1, keepdim=True)[1]
        if final_pred.item() == target.item():
            correct += 1
            # keep a few unperturbed examples too
            if epsilon == 0 and len(adv_examples) < 5:
                adv_ex = perturbed_data.squeeze().detach().cpu().numpy()
                adv_examples.append((init_pred.item(), final_pred.item(), adv_ex))
        else:
            if len(adv_examples) < 5:
                adv_ex = perturbed_data.squeeze().detach().cpu().numpy()
                adv_examples.append((init_pred.item(), final_pred.item(), adv_ex))

    final_acc = correct / float(len(test_loader))
    print(f"Epsilon: {epsilon}\tTest Accuracy = {correct} / {len(test_loader)} = {final_acc}")

    return final_acc, adv_examples


accuracies = []
examples = []

for eps in epsilons:
    acc, ex = test(model, device, test_loader, eps)
    accuracies.append(acc)
    examples.append(ex)

# the plots of the tutorial, as text
print("accuracy vs epsilon:", " ".join(f"{e}:{a:.3f}" for e, a in zip(epsilons, accuracies, strict=True)))
for eps, row in zip(epsilons, examples, strict=True):
    shown = ", ".join(f"{orig} -> {adv} (mean {np.mean(ex):.3f})" for orig, adv, ex in row)
    print(f"Eps: {eps}: {shown}")
shapes = {ex.shape for row in examples for _, _, ex in row}
shutil.rmtree(data_dir)
print(f"done accuracy={accuracies[0]:.3f}->{accuracies[-1]:.3f} examples={sum(map(len, examples))} shapes={shapes}")
