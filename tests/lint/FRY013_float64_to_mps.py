import numpy as np
import torch
import torch.nn as nn

mps = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
table = np.random.rand(60, 4)

a = torch.from_numpy(np.random.rand(3)).to("mps")  # FRY013
b = torch.tensor(np.zeros((2, 2)), device="mps")  # FRY013
c = torch.ones(3, dtype=torch.float64, device=mps)  # FRY013
d = torch.ones(3).to("mps", dtype=torch.float64)  # FRY013
e = torch.ones(3).double().to(mps)  # FRY013
f = torch.as_tensor(np.array([1.5, 2.0]), device=mps)  # FRY013
g = torch.from_numpy(table[:10]).to(mps)  # FRY013
h = torch.from_numpy(np.loadtxt("f.txt").astype(np.float64)).to(mps)  # FRY013
on_mps = torch.ones(3, device="mps")
i = on_mps.double()  # FRY013
model = nn.Linear(2, 2).double()
model.to("mps")  # FRY013
other = nn.Linear(2, 2)
other.double()
other.to(mps)  # FRY013

# float32 by the time it moves, or not sent to mps
k = torch.from_numpy(np.random.rand(3).astype(np.float32)).to("mps")
m = torch.from_numpy(np.random.rand(3)).float().to("mps")
n = torch.tensor([1.5, 2.0], device="mps")  # Python floats make float32
o = torch.as_tensor(np.random.rand(3), dtype=torch.float32, device=mps)
p = torch.from_numpy(np.random.rand(3)).to("cuda")
q = torch.from_numpy(np.zeros(3, dtype=np.float32)).to("mps")
r = torch.from_numpy(np.zeros(3, np.float32)).to("mps")
s = torch.rand(3).to("mps")
t = torch.from_numpy(np.arange(3)).to("mps")
u = torch.ones(3, dtype=torch.float64).to("mps", dtype=torch.float32)
w = nn.Linear(2, 2).double()
w.float()
w.to("mps")


def elsewhere(x, device):
    return x.double().to(device)  # `device` is not known here
