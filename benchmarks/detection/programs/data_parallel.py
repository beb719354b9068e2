"""Split each batch across every visible GPU with nn.DataParallel, then take a few SGD steps the same way.

Modeled on: the PyTorch tutorial "Optional: Data Parallelism",
https://pytorch.org/tutorials/beginner/blitz/data_parallel_tutorial.html
Kept: the device logic (device = cuda:0 if available, nn.DataParallel only when device_count() > 1, model.to(device)
after wrapping, each batch moved with .to(device), the model printing the sizes it sees per replica). Shrunk: the same
tiny sizes as the tutorial; added a short training loop (targets moved to the same device) so the replicas' gradients
are exercised too. Meant to be run with one GPU and with two.
"""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

# Parameters and DataLoaders
input_size = 5
output_size = 2

batch_size = 30
data_size = 60

torch.manual_seed(0)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


class RandomDataset(Dataset):
    """`length` random vectors of `size` features, with a regression target that is a fixed linear map of them."""

    def __init__(self, size, length):
        self.len = length
        self.data = torch.randn(length, size)
        self.target = self.data @ torch.randn(size, output_size)

    def __getitem__(self, index):
        return self.data[index], self.target[index]

    def __len__(self):
        return self.len


rand_loader = DataLoader(dataset=RandomDataset(input_size, data_size), batch_size=batch_size, shuffle=True)


class Model(nn.Module):
    """A single linear layer that reports the size of the chunk of the batch it was handed."""

    def __init__(self, input_size, output_size):
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)

    def forward(self, input):
        output = self.fc(input)
        print("\tIn Model: input size", input.size(), "output size", output.size())
        return output


model = Model(input_size, output_size)
if torch.cuda.device_count() > 1:
    print("Let's use", torch.cuda.device_count(), "GPUs!")
    # dim = 0 [30, xxx] -> [15, ...], [15, ...] on 2 GPUs
    model = nn.DataParallel(model)

model.to(device)

# Run the model: DataParallel scatters the input over the GPUs and gathers the outputs back on cuda:0.
for data, _ in rand_loader:
    input = data.to(device)
    output = model(input)
    print("Outside: input size", input.size(), "output_size", output.size())

# A few training steps through the same wrapper: the replicas' gradients are reduced onto the module on cuda:0.
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    running = 0.0
    for data, target in rand_loader:
        input, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        loss.backward()
        optimizer.step()
        running += loss.item() * input.size(0)
    print(f"epoch {epoch}: mse {running / data_size:.4f}")

print(f"done mse={running / data_size:.4f}")
