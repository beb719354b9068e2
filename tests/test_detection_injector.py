"""The bug injector of the detection benchmark (benchmarks/detection/inject.py) on a small program.

The benchmark itself (every program, every mutant, both detectors) runs for minutes and lives in
``benchmarks/detection/run_benchmark.py``; these tests check that the injector writes the bugs it claims, where it
claims, in code that parses and keeps every line number, and that it leaves alone what would not be a bug.
"""

from __future__ import annotations

import ast
import os
import runpy
import sys

import pytest

from _support import REPO
from ferry.lint import lint_source

sys.path.insert(0, str(REPO / "benchmarks" / "detection"))
import inject

PROGRAM = """\
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        noise = torch.zeros(x.shape, device=x.device)
        return self.fc(self.drop(x + noise))


def main():
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for data, target in [(torch.randn(2, 4), torch.tensor([0, 1]))]:
        data, target = data.to(device), target.to(device)
        F.cross_entropy(model(data), target).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(1, 4).to(device)).cpu().numpy()
    torch.save(model.state_dict(), "m.pt")
    print("done", out.shape)


main()
"""


@pytest.fixture(scope="module")
def mutants(tmp_path_factory: pytest.TempPathFactory) -> list[inject.Mutant]:
    folder = tmp_path_factory.mktemp("program")
    path = folder / "program.py"
    path.write_text(PROGRAM)

    def run(program):
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            runpy.run_path(str(program), run_name="__main__")
        finally:
            os.chdir(cwd)

    sites = inject.trace_sites(path, run)
    return inject.mutants("program.py", PROGRAM, sites)


def test_every_class_is_injected_at_its_line(mutants: list[inject.Mutant]) -> None:
    found = {(m.code, m.form, m.line) for m in mutants}
    assert ("FRY001", "tuple statement", 23) in found
    assert ("FRY002", "device variable, module-level", 5) in found
    assert ("FRY004", "in a function", 29) in found
    assert ("FRY005", "in forward", 15) in found
    assert ("FRY006", "tuple assignment", 23) in found
    assert ("FRY006", "factory result", 28) in found
    assert ("FRY007", "constructor chain, in a function", 20) in found
    assert ("FRY008", "built before the move", 21) in found
    assert ("FRY010", "before evaluation, in a function", 26) in found
    assert ("FRY012", "chained", 28) in found


def test_mutants_parse_and_keep_every_line_number(mutants: list[inject.Mutant]) -> None:
    lines = PROGRAM.splitlines()
    for mutant in mutants:
        ast.parse(mutant.source)
        changed = mutant.source.splitlines()
        assert len(changed) == len(lines), mutant.key
        differing = [i + 1 for i, (a, b) in enumerate(zip(lines, changed, strict=True)) if a != b]
        if mutant.code == "FRY008":  # the model's move leaves its line for the optimizer's
            assert differing == [20, mutant.line], mutant.key
        else:
            assert differing == [mutant.line], mutant.key


def test_moves_of_modules_are_not_thrown_away_as_tensor_moves(mutants: list[inject.Mutant]) -> None:
    # `model = Net().to(device)` as a statement moves the module in place: not a discarded move
    assert not [m for m in mutants if m.code in ("FRY001", "FRY006") and m.line == 20]
    assert not [m for m in mutants if m.code == "FRY007" and m.line == 23]


def test_lint_finds_the_injected_tuple_statement(mutants: list[inject.Mutant]) -> None:
    assert not [d for d in lint_source(PROGRAM, "program.py") if d.code == "FRY001"]
    mutant = next(m for m in mutants if m.code == "FRY001")
    assert {23} == {d.line for d in lint_source(mutant.source, "program.py") if d.code == "FRY001"}


MADE_IN_FORWARD = """\
import torch
import torch.nn as nn


class Stn(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 9)

    def forward(self, x):
        y = self.fc(x)
        iden = torch.eye(3).view(1, 9).repeat(x.size(0), 1)
        if y.is_cuda:
            iden = iden.cuda()
        return y + iden


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
print(Stn().to(device)(torch.randn(2, 4).to(device)).shape)
"""


def test_a_move_left_out_of_a_tensor_made_in_forward_is_a_device_less_tensor_in_forward(tmp_path) -> None:
    # PointNet's STN: removing `iden = iden.cuda()` leaves a factory's CPU tensor meeting the input: FRY005's class
    path = tmp_path / "stn.py"
    path.write_text(MADE_IN_FORWARD)
    from ferry.sanitizer.pretend import pretend_cuda

    def run(program: object) -> None:
        with pretend_cuda():  # as the benchmark traces: the branch under `if y.is_cuda:` runs
            runpy.run_path(str(program), run_name="__main__")

    sites = inject.trace_sites(path, run)
    found = [(m.code, m.form) for m in inject.mutants("stn.py", MADE_IN_FORWARD, sites) if m.line == 14]
    assert ("FRY005", "made here, in forward") in found
    assert not any(code == "FRY006" for code, _ in found)
