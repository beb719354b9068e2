# Corner cases of data-parallel-state-dict: lines marked with the code must be reported, nothing else.
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make():
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU())


def save_checkpoint(state, filename="checkpoint.pth"):
    torch.save(state, filename)


def write(state, path):
    blob = {"model": state}
    torch.save(blob, path)


def train_dp(path):
    model = nn.DataParallel(make()).cuda()
    torch.save(model.state_dict(), path)  # FRY009
    torch.save({"epoch": 1, "state_dict": model.state_dict()}, path)  # FRY009
    torch.save(dict(epoch=1, model=model.state_dict()), path)  # FRY009
    save_checkpoint({"epoch": 1, "state_dict": model.state_dict()})  # FRY009
    write(model.state_dict(), path)  # FRY009
    ckpt = {}
    ckpt["model"] = model.state_dict()  # FRY009
    torch.save(ckpt, path)
    sd = model.state_dict()  # FRY009
    torch.save(sd, path)


def train_ddp(rank, path):
    model = DDP(make().to(rank), device_ids=[rank])
    if rank == 0:
        torch.save(model.state_dict(), path)  # FRY009
    plain = make()
    plain.load_state_dict(model.state_dict())  # FRY009


# -- correct look-alikes ----------------------------------------------------------------------------------------------


def unwrapped(path, rank):
    model = nn.DataParallel(make())
    torch.save(model.module.state_dict(), path)
    torch.save({"model": model.module.state_dict()}, path)
    inner = model.module
    torch.save(inner.state_dict(), path)
    stripped = {k.removeprefix("module."): v for k, v in model.state_dict().items()}
    torch.save(stripped, path)
    prefixed = model.state_dict()
    torch.save({k[len("module.") :]: v for k, v in prefixed.items()}, path)
    model.load_state_dict(model.state_dict())
    again = DDP(make().to(rank), device_ids=[rank])
    again.load_state_dict(model.state_dict())
    print(len(model.state_dict()))


def unknown_model(model, path):
    torch.save(model.state_dict(), path)


def bare_model(path):
    model = make()
    torch.save(model.state_dict(), path)
    torch.save({"model": model.state_dict()}, path)
