"""Run by tests/checkpoint/sharded/test_ranks.py under torchrun: the Checkpointer on several ranks.

Usage: python -m torch.distributed.run --standalone --nproc-per-node N checkpoint_worker.py SCENARIO OUT_DIR [ARGS]

Each rank writes OUT_DIR/<scenario>-rank<R>.json. A directory may be a URL of object storage; its storage options
come from the environment variable FERRY_TEST_STORAGE_OPTIONS (JSON).
"""

import itertools
import json
import os
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

import ferry
import ferry.distributed

DATA = torch.arange(40 * 4, dtype=torch.float32).reshape(40, 4).sin()
TARGETS = DATA.sum(dim=1, keepdim=True).cos()


def checkpointer(directory, **kwargs):
    """``ferry.Checkpointer(directory)``, with the test's storage options for a URL of object storage."""
    options = json.loads(os.environ.get("FERRY_TEST_STORAGE_OPTIONS", "null")) if "://" in str(directory) else None
    return ferry.Checkpointer(directory, storage_options=options, **kwargs)


def model(dropout=0.0):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.Dropout(dropout), nn.ReLU(), nn.Linear(16, 6), nn.Linear(6, 1))


def full(tensor):
    return (tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor).detach().flatten().tolist()


def params(wrapped):
    return [full(p) for p in wrapped.parameters()]


def optimizer_state(wrapped, optimizer):
    """The whole optimizer state by parameter name (gathered from the shards), as lists."""
    state = get_optimizer_state_dict(wrapped, optimizer, options=StateDictOptions(full_state_dict=True))
    return {
        f"{name}.{key}": full(value) if isinstance(value, torch.Tensor) else value
        for name, entry in sorted(state["state"].items())
        for key, value in sorted(entry.items())
    }


def step(wrapped, optimizer, batch=None):
    inputs, targets = (DATA[:8], TARGETS[:8]) if batch is None else batch
    loss = nn.functional.mse_loss(wrapped(inputs), targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def train(strategy, directory, steps, every, stop_at=None):
    """Dropout, a shuffled ResumableSampler split across ranks, per-rank RNG: resumes exactly or not at all."""
    wrapped = ferry.distributed.wrap(model(dropout=0.3), strategy=strategy)
    optimizer = torch.optim.Adam(wrapped.parameters(), lr=0.01)
    sampler = ferry.ResumableSampler(range(len(DATA)), seed=3)
    torch.manual_seed(1000 + dist.get_rank())
    state = {"model": wrapped, "optimizer": optimizer, "sampler": sampler, "note": ""}
    losses = []
    with ferry.Checkpointer(directory, keep_last=2, every_steps=every) as ckpt:
        done = ckpt.restore(state) or 0
        batches = iter(sampler)
        while done < steps:
            indices = list(itertools.islice(batches, 4))
            if len(indices) < 4:  # the epoch ran out: the next iterator starts the next epoch
                batches = iter(sampler)
                continue
            noise = torch.randn(4, 1) * 0.01  # per-rank RNG in the data path
            losses.append(step(wrapped, optimizer, (DATA[indices], TARGETS[indices] + noise)))
            done += 1
            state["note"] = f"step {done}"
            ckpt.save_if_due(done, state)
            if done == stop_at:
                break
    return {"params": params(wrapped), "losses": losses, "done": done, "rand": torch.rand(2).tolist()}


def exact(directory, steps, every, stop_at):
    """An uninterrupted run in DIR/whole and, in the same process, a run stopped at stop_at in DIR/cut."""
    whole = train("ddp", f"{directory}/whole", steps, every)
    cut = train("ddp", f"{directory}/cut", steps, every, stop_at=stop_at)
    return {"whole": whole, "cut": cut}


def resume(directory, steps, every):
    return train("ddp", f"{directory}/cut", steps, every)


def save_fsdp(directory):
    """Two steps of FSDP2 training, save at step 2; returns what was saved (gathered)."""
    wrapped = ferry.distributed.wrap(model(), strategy="fsdp")
    optimizer = torch.optim.Adam(wrapped.parameters(), lr=0.01)
    for _ in range(2):
        step(wrapped, optimizer)
    with checkpointer(directory) as ckpt:
        ckpt.save(2, {"model": wrapped, "optimizer": optimizer, "epoch": 7})
    return {"params": params(wrapped), "optimizer": optimizer_state(wrapped, optimizer)}


def restore_fsdp(directory):
    """Restore DIR into a fresh FSDP2 model and optimizer (whatever world size saved it); report what came back."""
    wrapped = ferry.distributed.wrap(nn.Sequential(*[layer for layer in model()]), strategy="fsdp")
    with torch.no_grad():
        for param in wrapped.parameters():
            param.zero_()
    optimizer = torch.optim.Adam(wrapped.parameters(), lr=0.5)
    state = {"model": wrapped, "optimizer": optimizer, "epoch": 0}
    torch.manual_seed(50 + dist.get_rank())
    with warnings.catch_warnings(record=True) as caught, checkpointer(directory) as ckpt:
        warnings.simplefilter("always")
        restored = ckpt.restore(state)
    after = {"params": params(wrapped), "optimizer": optimizer_state(wrapped, optimizer)}
    local = [p.to_local().numel() for p in wrapped.parameters()]
    warned = [str(w.message) for w in caught if issubclass(w.category, ferry.CheckpointWarning)]
    extra = {"rand": torch.rand(2).tolist(), "warned": warned}
    return {
        "step": restored,
        "epoch": state["epoch"],
        "lr": optimizer.param_groups[0]["lr"],
        "local": local,
        **after,
        **extra,
    }


def buffers_warning(directory):
    """FSDP2 with BatchNorm and tied weights; each rank its own batch, so the running statistics differ."""
    torch.manual_seed(0)
    embedding = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = embedding.weight  # tied
    wrapped = ferry.distributed.wrap(nn.Sequential(embedding, nn.BatchNorm1d(4), head), strategy="fsdp")
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    torch.manual_seed(10 + dist.get_rank())
    wrapped(torch.randint(0, 10, (8,))).sum().backward()
    optimizer.step()
    with warnings.catch_warnings(record=True) as caught, ferry.Checkpointer(directory) as ckpt:
        warnings.simplefilter("always")
        ckpt.save(1, {"model": wrapped, "optimizer": optimizer})
    return [str(w.message) for w in caught if issubclass(w.category, ferry.CheckpointWarning)]


def restore_and_save_fsdp(directory, again):
    """Restore DIR into a fresh FSDP2 model and save it again, sharded over this world size, to AGAIN."""
    restored = restore_fsdp(directory)
    wrapped = ferry.distributed.wrap(model(), strategy="fsdp")
    optimizer = torch.optim.Adam(wrapped.parameters(), lr=0.5)
    state = {"model": wrapped, "optimizer": optimizer, "epoch": 0}
    with ferry.Checkpointer(directory) as ckpt:
        ckpt.restore(state)
    with ferry.Checkpointer(again) as ckpt:
        ckpt.save(3, state)
    return restored


def save_and_restore_fsdp(directory, other, plain):
    """Save an FSDP2 run to DIR; restore it (same world size), OTHER (another world size) and PLAIN (no torchrun)."""
    saved = save_fsdp(directory)
    return {
        "saved": saved,
        "same": restore_fsdp(directory),
        "other": restore_fsdp(other),
        "plain": restore_fsdp(plain),
        "buffers_warning": buffers_warning(f"{directory}-bn"),
    }


class FailsOnRank:
    """A stateful object whose state_dict and load_state_dict raise where ``fails`` is true."""

    def __init__(self, fails):
        self.fails = fails

    def state_dict(self):
        if self.fails:
            raise RuntimeError("state_dict failed on this rank")
        return {"x": 1}

    def load_state_dict(self, state):
        if self.fails:
            raise RuntimeError("load_state_dict failed on this rank")


def die(directory):
    """Save step 1; then rank 1 dies while writing step 2 (after its shard file is written, before the commit)."""
    wrapped = ferry.distributed.wrap(model(), strategy="fsdp")
    optimizer = torch.optim.Adam(wrapped.parameters(), lr=0.01)
    step(wrapped, optimizer)
    ckpt = ferry.Checkpointer(directory)
    ckpt.save(1, {"model": wrapped, "optimizer": optimizer})
    saved = params(wrapped)
    Path(directory, f"saved-rank{dist.get_rank()}.json").write_text(json.dumps(saved))
    dist.barrier()
    step(wrapped, optimizer)
    try:  # the ranks disagree on the step: every rank refuses, nothing is written
        ckpt.save(5 + dist.get_rank(), {"model": wrapped, "optimizer": optimizer})
    except ferry.CheckpointError as err:
        Path(directory, f"mismatch-rank{dist.get_rank()}.txt").write_text(str(err))
    try:  # the same in save_if_due, which saves on no rank then
        ckpt.save_if_due(10 + dist.get_rank(), {"model": wrapped, "optimizer": optimizer})
    except ferry.CheckpointError as err:
        Path(directory, f"due-rank{dist.get_rank()}.txt").write_text(str(err))
    refusals = []
    fails_on_rank_1 = FailsOnRank(dist.get_rank() == 1)
    for label, call in (
        ("bad step on rank 1", lambda: ckpt.save(-1 if dist.get_rank() else 7, {"model": wrapped})),
        ("state_dict fails on rank 1", lambda: ckpt.save(7, {"model": wrapped, "odd": fails_on_rank_1})),
        ("load_state_dict fails on rank 1", lambda: ckpt.restore({"model": wrapped, "odd": fails_on_rank_1}, step=3)),
    ):
        if label.startswith("load"):
            ckpt.save(3, {"model": wrapped, "odd": FailsOnRank(False)})
        try:  # one rank fails: every rank raises, none is left waiting in a collective
            call()
            refusals.append(f"{label}: no error")
        except ferry.CheckpointError as err:
            refusals.append(f"{label}: {type(err).__name__}")
    Path(directory, f"refusals-rank{dist.get_rank()}.json").write_text(json.dumps(refusals))
    ckpt.close()
    ckpt = ferry.Checkpointer(directory)
    if dist.get_rank() == 1:
        from ferry.checkpoint.sharded import storage as dcp

        write_file = dcp.writer.write_file

        def write_then_die(path, tree_json, blobs):
            write_file(path, tree_json, blobs)
            os._exit(17)

        dcp.writer.write_file = write_then_die
    ckpt.save(2, {"model": wrapped, "optimizer": optimizer})
    return {"unreachable": True}


def deferred_fsdp(directory):
    """A model built under ferry.deferred_init, sharded on meta by wrap(strategy="fsdp"), then materialised (each
    rank its shards) and compared with a normal build; saved; a second one, built with another seed, restored into."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the shared models
    from _deferred_models import TinyLM

    def shards(module):
        return {name: list(p.to_local().shape) for name, p in module.named_parameters()}

    def values(module):
        found = {name: full(p) for name, p in module.named_parameters()}
        found.update({name: full(b) for name, b in module.named_buffers()})
        return found

    torch.manual_seed(0)
    reference = values(TinyLM())
    torch.manual_seed(0)
    with ferry.deferred_init():
        built = TinyLM()
    wrapped = ferry.distributed.wrap(built, strategy="fsdp")
    on_meta = all(p.is_meta for p in wrapped.parameters())
    ferry.materialize(wrapped, "cpu")
    made = values(wrapped)
    with checkpointer(directory) as ckpt:
        ckpt.save(3, {"model": wrapped})
    torch.manual_seed(5)
    with ferry.deferred_init():
        other = TinyLM()
    other = ferry.distributed.wrap(other, strategy="fsdp")
    with checkpointer(directory) as ckpt:
        step = ckpt.restore({"model": other})
    # a file saved by a plain process, read straight into the shards of a deferred FSDP2 model
    torch.manual_seed(9)
    plain = TinyLM()
    file = Path(directory).parent / "plain.safetensors"
    if dist.get_rank() == 0:
        ferry.save(plain.state_dict(), file)
    dist.barrier()
    with ferry.deferred_init():
        from_file = TinyLM()
    from_file = ferry.distributed.wrap(from_file, strategy="fsdp")
    ferry.load_state_dict(from_file, file, device="cpu")
    return {
        "from_file": values(from_file),
        "plain": values(plain),
        "on_meta": on_meta,
        "shards": shards(wrapped),
        "reference": reference,
        "made": made,
        "restored_step": step,
        "restored": values(other),
        "tied": other.head.weight is other.embed.weight,
    }


SCENARIOS = {
    "exact": lambda a: exact(a[0], int(a[1]), int(a[2]), int(a[3])),
    "resume": lambda a: resume(a[0], int(a[1]), int(a[2])),
    "save_fsdp": lambda a: save_fsdp(a[0]),
    "restore_fsdp": lambda a: restore_fsdp(a[0]),
    "restore_and_save_fsdp": lambda a: restore_and_save_fsdp(a[0], a[1]),
    "save_and_restore_fsdp": lambda a: save_and_restore_fsdp(a[0], a[1], a[2]),
    "die": lambda a: die(a[0]),
    "remote_fsdp": lambda a: {"saved": save_fsdp(a[0]), "restored": restore_fsdp(a[0])},
    "deferred_fsdp": lambda a: deferred_fsdp(a[0]),
}

if __name__ == "__main__":
    scenario, out, args = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    ferry.distributed.init()
    result = SCENARIOS[scenario](args)
    (out / f"{scenario}-rank{dist.get_rank()}.json").write_text(json.dumps(result))
    dist.barrier()  # without it one rank may tear gloo down while the other still uses it (abort at exit)
    dist.destroy_process_group()
