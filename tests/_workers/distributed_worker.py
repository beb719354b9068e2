"""Run by tests/test_distributed.py under torchrun: one scenario per call, results as JSON per rank.

Usage: python -m torch.distributed.run --standalone --nproc-per-node 2 distributed_worker.py SCENARIO OUT_DIR
"""

import atexit
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

import ferry
import ferry.distributed


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def train_step(wrapped, rank):
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)  # each rank its own batch, as data parallelism has
    inputs, targets = torch.randn(6, 4), torch.randn(6, 2)
    loss = nn.functional.mse_loss(wrapped(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


def full_state(module):
    """Every parameter as a flat list of floats; DTensor shards gathered."""
    values = []
    for param in module.parameters():
        tensor = param.full_tensor() if hasattr(param, "full_tensor") else param
        values.extend(tensor.detach().flatten().tolist())
    return values


def basics():
    device = ferry.distributed.init()
    again = ferry.distributed.init()
    wrapped = ferry.distributed.wrap(model(), strategy="ddp")
    loss = train_step(wrapped, dist.get_rank())
    ferry.distributed.barrier()
    return {
        "device": str(device),
        "again": str(again),
        "backend": dist.get_backend(),
        "rank": ferry.distributed.rank(),
        "world_size": ferry.distributed.world_size(),
        "is_main": ferry.distributed.is_main(),
        "type": type(wrapped).__name__,
        "initial": full_state(model()),
        "loss": loss,
        "params": full_state(wrapped.module),
    }


def fsdp():
    from torch.distributed.fsdp import FSDPModule

    ferry.distributed.init()
    wrapped = ferry.distributed.wrap(model(), strategy="fsdp")
    sharded = [isinstance(child, FSDPModule) for child in wrapped.children()]
    local = [param.to_local().numel() for param in wrapped.parameters()]
    loss = train_step(wrapped, dist.get_rank())
    return {
        "root": isinstance(wrapped, FSDPModule),
        "children": sharded,
        "local_numels": local,
        "loss": loss,
        "params": full_state(wrapped),
    }


def sampler():
    ferry.distributed.init()
    dataset = range(11)
    whole = ferry.ResumableSampler(dataset, seed=5)
    epoch0, epoch1 = list(whole), list(whole)
    interrupted = ferry.ResumableSampler(dataset, seed=5)
    iterator = iter(interrupted)
    seen = [next(iterator) for _ in range(3)]
    state = interrupted.state_dict()
    resumed = ferry.ResumableSampler(dataset, seed=5)
    resumed.load_state_dict(state)
    rest = list(resumed)
    return {
        "len": len(whole),
        "epoch0": epoch0,
        "epoch1": epoch1,
        "resumed": seen + rest,
        "next_epoch": list(resumed),
    }


def no_teardown():
    """FSDP2, a step and a sharded save, then exit with no teardown code: ferry.distributed.init() owns it."""
    out = Path(sys.argv[2])

    def report():  # registered before init(): runs after ferry's teardown (atexit runs last in, first out)
        (out / f"exit{os.environ['RANK']}.json").write_text(json.dumps({"initialized": dist.is_initialized()}))

    atexit.register(report)
    ferry.distributed.init()
    wrapped = ferry.distributed.wrap(model(), strategy="fsdp")
    loss = train_step(wrapped, dist.get_rank())
    with ferry.Checkpointer(out / "run") as ckpt:
        ckpt.save(1, {"model": wrapped})
    return {"rank": dist.get_rank(), "loss": loss}


if __name__ == "__main__":
    scenario, out = sys.argv[1], Path(sys.argv[2])
    scenarios = {"basics": basics, "fsdp": fsdp, "sampler": sampler, "no_teardown": no_teardown}
    result = scenarios[scenario]()
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(result))
    if scenario != "no_teardown":
        dist.barrier()  # without it one rank may tear gloo down while the other still uses it (abort at exit)
        dist.destroy_process_group()
