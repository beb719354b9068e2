# Corner cases of load-without-map-location: lines marked with the code must be reported, nothing else.
import io

import torch
from torch import load

import ferry

state = torch.load("model.pt")  # FRY003
weights = load("weights.pt", weights_only=True)  # FRY003
safe = torch.load("model.pt", map_location="cpu")
positional = torch.load("model.pt", "cpu")
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
later = torch.load("later.pt")  # FRY003 (module-level device: fix adds map_location=device)


def restore(path, device):
    return torch.load(path)  # FRY003 (fix: map_location=device)


def restore_picked(path):
    target = ferry.pick_device()
    return torch.load(  # FRY003 (fix: map_location=target)
        path,
        weights_only=True,
    )


def restore_forwarded(path, **kwargs):
    return torch.load(path, **kwargs)


def restore_args(*args):
    return torch.load(*args)


def round_trip(tensor):
    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    buffer.seek(0)
    return torch.load(buffer)


def guarded(path):
    if torch.cuda.is_available():
        return torch.load(path)
    return torch.load(path, map_location="cpu")


def with_map_location(path, map_location=None):
    return torch.load(path)  # FRY003 (fix: map_location=map_location)


class Cache(torch.utils.data.Dataset):
    def __init__(self, path):
        self.items = torch.load(path)


class Restorer:
    def load(self, path):
        return torch.load(path)  # FRY003


def try_load(path):
    try:
        return torch.load(path)  # FRY003
    except FileNotFoundError:
        return None
