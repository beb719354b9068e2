"""The linter never crashes on valid Python: random programs (hypothesmith), torch-flavoured ones, torch itself."""

from __future__ import annotations

import ast
from pathlib import Path

import hypothesmith
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferry.lint import RULES, Diagnostic, lint_source
from ferry.lint.fix import fix_text

ALL = list(RULES)

#: Lines of PyTorch code, good and bad, that random programs are made of.
SNIPPETS = [
    "import torch",
    "import torch.nn as nn",
    "from torch.utils.data import DataLoader",
    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
    "device = 'cuda'",
    "x = torch.randn(8, 3)",
    "x.to(device)",
    "x = x.to(device)",
    "x.cuda()",
    "y = x.cpu().numpy()",
    "model = nn.Linear(3, 2)",
    "model.to(device)",
    "model.eval()",
    "model = nn.DataParallel(model)",
    "opt = torch.optim.Adam(model.parameters())",
    "opt.load_state_dict(torch.load('opt.pt'))",
    "state = torch.load('ckpt.pt')",
    "torch.save(model, 'model.pt')",
    "torch.save(model.state_dict(), 'model.pt')",
    "loader = DataLoader(range(10), batch_size=2)",
    "loss = model(x).sum()",
    "print(loss.item())",
    "t = torch.ones(2, dtype=torch.float64).to('mps')",
    "z = torch.zeros(3, device=device)",
]
BLOCKS = [
    "for batch in loader:\n{body}",
    "with torch.no_grad():\n{body}",
    "if torch.cuda.is_available():\n{body}",
    "def step(x):\n{body}\n    return x",
    "class Net(nn.Module):\n    def forward(self, x):\n{body2}\n        return x",
    "while True:\n{body}\n    break",
    "try:\n{body}\nexcept Exception:\n    pass",
]


@st.composite
def torch_programs(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 12))):
        body = draw(st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=4))
        if draw(st.booleans()):
            block = draw(st.sampled_from(BLOCKS))
            parts.append(
                block.format(
                    body="\n".join("    " + line for line in body), body2="\n".join("        " + line for line in body)
                )
            )
        else:
            parts.extend(body)
    return "\n".join(parts) + "\n"


def check(source: str) -> list[Diagnostic]:
    found = lint_source(source, "t.py", rules=ALL)
    assert isinstance(found, list)
    assert all(isinstance(d, Diagnostic) and d.line >= 1 and d.col >= 1 for d in found)
    return found


@settings(max_examples=150, deadline=None)
@given(torch_programs())
def test_torch_programs_lint_and_fix_cleanly(source: str) -> None:
    ast.parse(source)
    check(source)
    fixed, _ = fix_text(source, "t.py", ALL)
    ast.parse(fixed)  # fixes never break the syntax
    assert (fixed, 0) == fix_text(fixed, "t.py", ALL)  # a second --fix changes nothing


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hypothesmith.from_grammar())
def test_random_valid_python_never_crashes(source: str) -> None:
    check(source)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hypothesmith.from_node())
def test_random_syntax_trees_never_crash(source: str) -> None:
    check(source)


def test_every_file_of_torch_nn() -> None:
    folder = Path(torch.nn.__file__).parent
    files = sorted(folder.rglob("*.py"))
    assert len(files) > 50
    for path in files:
        source = path.read_text(encoding="utf-8")
        found = lint_source(source, str(path), rules=ALL)
        assert not [d for d in found if d.code == "FRY000"], path
