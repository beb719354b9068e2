# input-on-other-device: with torch.set_default_device every factory follows it, so nothing here is reported.
import torch
import torch.nn as nn

torch.set_default_device("cuda")
device = torch.device("cuda")
model = nn.Linear(4, 2).to(device)
x = torch.randn(8, 4)
y = model(x)
