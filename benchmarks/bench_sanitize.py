"""Overhead of ``ferry.sanitize`` on a training step (forward, backward, optimizer step), in one run.

Two models, batch 32, on the CPU: a small CNN (two conv layers, 1x28x28 input) and one transformer encoder block
(d_model 128, 4 heads, sequence 64). Each step is timed with and without the sanitizer, alternating, so drift of the
machine hits both alike; the figures are medians over --repeat steps, and the ratio is sanitized / plain (target:
at most 1.5x on the transformer block). A last line gives the sanitizer's own cost per torch operation (a tiny
``a + b`` timed 10,000 times each way), which busy machines distort far less than whole steps.

    python benchmarks/bench_sanitize.py
    python benchmarks/bench_sanitize.py --repeat 50 --quick
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

import ferry


def cnn() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )
    return model, torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))


def transformer() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    block = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, batch_first=True, dropout=0.1)
    model = nn.Sequential(block, nn.Flatten(), nn.Linear(64 * 128, 10))
    return model, torch.randn(32, 64, 128), torch.randint(0, 10, (32,))


def step_fn(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def timed(step: Callable[[], None], context: Callable[[], AbstractContextManager[object]]) -> float:
    with context():
        start = time.perf_counter()
        step()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed steps per case (median)")
    parser.add_argument("--quick", action="store_true", help="a few steps, for a smoke test")
    options = parser.parse_args()
    repeat = 3 if options.quick else options.repeat
    torch.manual_seed(0)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch 32, median of {repeat} steps")
    print(f"{'model':<14}{'plain ms':>10}{'sanitized ms':>14}{'ratio':>8}")
    for name, build in (("cnn", cnn), ("transformer", transformer)):
        step = step_fn(*build())
        for _ in range(3):  # warm-up: allocator, optimizer state, first sanitized call's caches
            timed(step, nullcontext)
            timed(step, lambda: ferry.sanitize(on_error="warn"))
        plain, checked = [], []
        for _ in range(repeat):
            plain.append(timed(step, nullcontext))
            checked.append(timed(step, lambda: ferry.sanitize(on_error="warn")))
        p, c = statistics.median(plain) * 1e3, statistics.median(checked) * 1e3
        print(f"{name:<14}{p:>10.2f}{c:>14.2f}{c / p:>7.2f}x")
    a, b = torch.ones(4), torch.ones(4)
    calls = 1_000 if options.quick else 10_000

    def ops() -> None:
        for _ in range(calls):
            a + b  # the operation is the point

    plain_op = statistics.median(timed(ops, nullcontext) for _ in range(5)) / calls * 1e6
    checked_op = statistics.median(timed(ops, lambda: ferry.sanitize(on_error="warn")) for _ in range(5)) / calls * 1e6
    print(f"per operation: {plain_op:.2f} us plain, {checked_op:.2f} us sanitized (+{checked_op - plain_op:.2f} us)")


if __name__ == "__main__":
    main()
