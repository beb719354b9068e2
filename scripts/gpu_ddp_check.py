"""The DDP path end to end, for scripts/gpu-check: init, wrap, train, Checkpointer save + restore, on every rank.

Run under torchrun, one rank per GPU (1 is fine: NCCL still runs)::

    python -m torch.distributed.run --standalone --nproc-per-node "$(nvidia-smi -L | wc -l)" \\
        scripts/gpu_ddp_check.py OUTDIR [--expect-backend nccl]

Each rank: ``ferry.distributed.init()`` (on CUDA it must choose nccl and ``cuda:LOCAL_RANK``),
``wrap(model, strategy="ddp")``, a few Adam steps on its own batches, a Checkpointer save, then a restore into a
freshly wrapped model and optimizer, and one more step on both, which must agree bit for bit. The ranks' parameters
must be equal after training and after the restore. Rank 0 prints one line of JSON (``{"ok": ..., "backend": ...,
"devices": [...], "checks": {...}, "seconds": ...}``) and the exit status is 0 only if every check passed on every
rank. Checkpoints go to OUTDIR/ddp-checkpoints (removed at the end when every check passed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

import ferry
import ferry.distributed

STEPS = 5
BATCH = 32


def _model() -> nn.Module:
    torch.manual_seed(0)  # the same initial weights on every rank, as DDP expects
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


def _step(model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device, seed: int) -> float:
    batch = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, 64, generator=batch).to(device)
    y = torch.randint(0, 10, (BATCH,), generator=batch).to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    optimizer.step()
    return float(loss.item())


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _same_on_every_rank(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is bitwise equal on every rank (max and min of each element agree)."""
    high, low = tensor.clone(), tensor.clone()
    torch.distributed.all_reduce(high, op=torch.distributed.ReduceOp.MAX)
    torch.distributed.all_reduce(low, op=torch.distributed.ReduceOp.MIN)
    return bool(torch.equal(high, low))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--expect-backend", default=None, help="fail unless init() chose this backend")
    args = parser.parse_args()
    started = time.monotonic()

    device = ferry.distributed.init()
    rank, world = ferry.distributed.rank(), ferry.distributed.world_size()
    backend = torch.distributed.get_backend()
    checks: dict[str, Any] = {}
    local_rank = int(os.environ["LOCAL_RANK"])
    if device.type == "cuda":
        checks["nccl_on_cuda"] = backend == "nccl"
        checks["device_is_local_rank"] = device == torch.device("cuda", local_rank)
    if args.expect_backend is not None:
        checks["expected_backend"] = backend == args.expect_backend

    model = ferry.distributed.wrap(_model(), strategy="ddp")
    checks["wrapped_ddp"] = type(model).__name__ == "DistributedDataParallel"
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    initial = _flat(model).clone()
    losses = [_step(model, optimizer, device, seed=100 * rank + i) for i in range(STEPS)]
    trained = _flat(model)
    checks["trained"] = not torch.equal(initial, trained)
    checks["equal_across_ranks_after_training"] = _same_on_every_rank(trained)

    directory = args.outdir / "ddp-checkpoints"
    if rank == 0:
        shutil.rmtree(directory, ignore_errors=True)
    ferry.distributed.barrier()
    with ferry.Checkpointer(directory, keep_last=2) as checkpointer:
        checkpointer.save(STEPS, {"model": model, "optimizer": optimizer})
        fresh = ferry.distributed.wrap(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)))
        fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=1e-2)
        restored = checkpointer.restore({"model": fresh, "optimizer": fresh_optimizer})
    checks["restored_step"] = restored == STEPS
    checks["restored_parameters_equal"] = torch.equal(trained, _flat(fresh))
    # the optimizer state came back too: one more step on both gives the same parameters
    _step(model, optimizer, device, seed=999 + rank)
    _step(fresh, fresh_optimizer, device, seed=999 + rank)
    checks["next_step_equal_after_restore"] = torch.equal(_flat(model), _flat(fresh))
    checks["equal_across_ranks_after_restore"] = _same_on_every_rank(_flat(fresh))

    ok = all(checks.values())
    everyone: list[Any] = [None] * world
    torch.distributed.all_gather_object(everyone, {"rank": rank, "device": str(device), "ok": ok, "checks": checks})
    all_ok = all(r["ok"] for r in everyone)
    if rank == 0:
        result = {
            "ok": all_ok,
            "backend": backend,
            "world_size": world,
            "devices": [r["device"] for r in everyone],
            "checks": checks,
            "failed": {r["rank"]: [k for k, v in r["checks"].items() if not v] for r in everyone if not r["ok"]},
            "losses": [round(loss, 4) for loss in losses],
            "seconds": round(time.monotonic() - started, 2),
        }
        print(json.dumps(result), flush=True)
        if all_ok:
            shutil.rmtree(directory, ignore_errors=True)
    torch.distributed.destroy_process_group()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
