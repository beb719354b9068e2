"""Run by tests/test_distributed.py: a 1-rank gloo group whose worker thread is left waiting for the GIL, or not.

Usage: python gloo_gil_holder.py hold|release

Both issue all_gathers of Python tensors (64 MiB each) and drop them at once. ``hold`` then keeps the GIL in a
pure-Python loop that never lets it go (the switch interval is set to an hour first), so the gloo worker that
finished an all_gather waits for the GIL to free its tensors; ``release`` sleeps, so the workers free them and go
idle. The parent reads /proc and kills this process.
"""

import sys
import tempfile

import torch
import torch.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo", rank=0, world_size=1, store=dist.FileStore(tempfile.mktemp(), 1))
if mode == "hold":
    sys.setswitchinterval(3600.0)
for _ in range(4):  # Work and tensors dropped at once, before the copy is done: the worker frees them last
    dist.all_gather([torch.empty(1 << 24)], torch.ones(1 << 24), async_op=True)
if mode == "hold":
    while True:
        pass
else:
    import time

    time.sleep(600)
