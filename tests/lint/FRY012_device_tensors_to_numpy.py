import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
cuda0 = torch.device("cuda:0")

x = torch.randn(3, device="cuda")
a = x.numpy()  # FRY012
b = torch.ones(2).cuda().numpy()  # FRY012
c = (x + 1).numpy()  # FRY012
d = torch.zeros(2, device="mps").numpy()  # FRY012
e = torch.ones(2).to(cuda0)
f = e.numpy()  # FRY012

model = nn.Linear(4, 2).to(device)
out = model(torch.randn(8, 4))
scores = out.detach().numpy()  # FRY012
probs = out.softmax(1).detach().cpu().numpy()

net = nn.Linear(4, 2)
net.to("cuda")
logits = net(torch.randn(1, 4)).detach().numpy()  # FRY012

wrapped = nn.DataParallel(nn.Linear(4, 2))
wrapped(torch.randn(2, 4)).detach().numpy()  # FRY012


def double(t):
    return t * 2


g = double(x).numpy()  # FRY012
h = double(torch.ones(3)).numpy()

# not on an accelerator, or copied back first
y = x.cpu()
i = y.numpy()
j = x.numpy(force=True)
k = torch.randn(3, device="cpu").numpy()
l = torch.randn(3).to(torch.float16).numpy()
m = x.detach().cpu().numpy()
z = torch.ones(3)
z.cuda()  # a discarded move (FRY001): `z` stays on the CPU
n = z.numpy()


def unknown(t, where):
    return t.to(where).numpy()  # `where` may be the CPU


def defaults_to_cpu(t, where="cpu"):
    return t.to(where).numpy()


x = x.cpu()
o = x.numpy()

w = torch.ones(3).to(device)
if device.type == "cpu":
    p = w.numpy()  # the code decided where `w` is
q = w.numpy() if not torch.cuda.is_available() else w.cpu().numpy()
