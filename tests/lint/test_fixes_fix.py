"""Every fix ferry lint offers removes the finding it was offered for, and changes nothing else.

Checked over every rule fixture and every rule doc's example: after ``--fix``, none of the fixed findings is
reported again, the file still parses, and only the statements the fixes named changed. The FRY001 forms people
write are also run: the fixed program moves its tensors (checked under pretend GPUs), the original does not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ferry.lint import RULES, lint_source
from ferry.lint.fix import apply_fixes, fix_text

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("FRY*.py"))
EXAMPLES = {
    f"{rule.code} doc": block
    for rule in RULES
    for block in re.findall(r"## Example\n```python\n(.*?)```", rule.doc, flags=re.S)[:1]
}
SOURCES = {path.name: path.read_text() for path in FIXTURES} | EXAMPLES


@pytest.mark.parametrize("name", SOURCES)
def test_each_fix_removes_its_finding_and_changes_only_its_statement(name: str) -> None:
    text = SOURCES[name]
    if not any(f.fix is not None for f in lint_source(text, "example.py")):
        pytest.skip("no fix offered here")
    edited: set[int] = set()
    for _ in range(5):  # fix rounds, as `ferry lint --fix` runs them: a fix may uncover the next finding
        fixable = [f for f in lint_source(text, "example.py") if f.fix is not None]
        if not fixable:
            break
        fixed, applied = apply_fixes(text, [f.fix for f in fixable if f.fix is not None])
        assert applied >= 1
        ast.parse(fixed)
        again = {(f.code, f.message) for f in lint_source(fixed, "example.py")}
        for finding in fixable:
            assert (finding.code, finding.message) not in again, f"{finding.code} at line {finding.line} survives"
        assert len(fixed.splitlines()) == len(text.splitlines())  # one statement for one: line numbers hold
        edited |= {line for f in fixable if f.fix for e in f.fix.edits for line in range(e.start[0], e.end[0] + 1)}
        text = fixed
    before = SOURCES[name].splitlines()
    changed = {number for number, (old, new) in enumerate(zip(before, text.splitlines(), strict=True), 1) if old != new}
    assert changed <= edited, sorted(changed - edited)


FORMS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = torch.nn.Linear(4, 2).to(device)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)
total = 0.0
for inputs, labels in loader:
    inputs.to(device)
    labels.cuda()
    total += torch.nn.functional.cross_entropy(model(inputs), labels).item()
for data, target in loader:
    data.to(device), target.to(device)
    total += torch.nn.functional.cross_entropy(model(data), target).item()
batch = {"x": torch.randn(2, 4)}
for key in batch:
    batch[key].to(device)
total += model(batch["x"]).sum().item()
print(round(total, 6))
"""


def _run(path: Path, *, pretend: bool) -> str:
    """Run ``path`` as ``__main__`` in this process (on pretend GPUs if asked); what it printed."""
    import contextlib
    import io
    import runpy

    from ferry.sanitizer.pretend import pretend_cuda

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pretend_cuda() if pretend else contextlib.nullcontext():
        runpy.run_path(str(path), run_name="__main__")
    return out.getvalue()


def test_fry001_forms_are_fixed_so_that_the_program_moves_its_tensors(tmp_path: Path) -> None:
    found = [(f.code, f.line) for f in lint_source(FORMS, "train.py") if f.code == "FRY001"]
    assert [("FRY001", 10), ("FRY001", 11), ("FRY001", 14), ("FRY001", 14), ("FRY001", 18)] == found
    fixed, _ = fix_text(FORMS, "train.py", RULES)
    assert "    inputs = inputs.to(device)\n" in fixed
    assert "    labels = labels.to(device)\n" in fixed  # the device variable in scope, not a bare .cuda()
    assert "    data, target = data.to(device), target.to(device)\n" in fixed
    assert "    batch[key] = batch[key].to(device)\n" in fixed
    assert [] == [f.code for f in lint_source(fixed, "train.py") if f.code == "FRY001"]
    (tmp_path / "original.py").write_text(FORMS)
    (tmp_path / "fixed.py").write_text(fixed)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        _run(tmp_path / "original.py", pretend=True)
    on_gpu = _run(tmp_path / "fixed.py", pretend=True)
    assert _run(tmp_path / "fixed.py", pretend=False) == on_gpu  # the same numbers: only where tensors live changed


BATCH_FORMS = """\
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        noise = torch.randn(x.shape)
        return self.fc(x + noise)


class PairNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, batch):
        x, y = batch
        noise = torch.randn(x.shape)
        return self.fc(x + noise), y


torch.manual_seed(0)
x = torch.randn(3, 4).to(device)
print(Net().to(device)(x).shape, PairNet().to(device)((x, x))[0].shape)
"""


def test_fry005_fixes_take_the_device_from_a_tensor_not_from_the_batch_that_holds_it(tmp_path: Path) -> None:
    # `x, y = batch`: the fix reads `x.device` (a tuple has no `.device`)
    assert [13, 24] == [f.line for f in lint_source(BATCH_FORMS, "nets.py") if f.code == "FRY005"]
    fixed, _ = fix_text(BATCH_FORMS, "nets.py", RULES)
    assert fixed.count("noise = torch.randn(x.shape, device=x.device)") == 2
    (tmp_path / "original.py").write_text(BATCH_FORMS)
    (tmp_path / "fixed.py").write_text(fixed)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        _run(tmp_path / "original.py", pretend=True)
    assert "torch.Size([3, 2]) torch.Size([3, 2])" in _run(tmp_path / "fixed.py", pretend=True)


def test_fry005_in_a_lightning_step_is_fixed_with_the_modules_device() -> None:
    source = (
        "import lightning as L\nimport torch\n\n\nclass Lit(L.LightningModule):\n"
        "    def __init__(self):\n        super().__init__()\n        self.net = torch.nn.Linear(4, 2)\n\n"
        "    def training_step(self, batch, batch_idx):\n        x, y = batch\n"
        "        noise = torch.randn(x.shape)\n        return torch.nn.functional.mse_loss(self.net(x + noise), y)\n"
    )
    found = [f for f in lint_source(source, "lit.py") if f.code == "FRY005"]
    assert [12] == [f.line for f in found]
    assert "device=self.device" in found[0].message
    fixed, _ = fix_text(source, "lit.py", RULES)
    assert "noise = torch.randn(x.shape, device=self.device)" in fixed


def test_fry003_fix_uses_only_a_device_the_function_can_see_when_imported() -> None:
    # `device` bound only under `if __name__ == "__main__":` is undefined when another module imports the function
    only_in_main = (
        "import torch\n\n\ndef load(path):\n    return torch.load(path)\n\n\n"
        'if __name__ == "__main__":\n    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        '    print(load("m.pt"))\n'
    )
    (finding,) = [f for f in lint_source(only_in_main, "evaluate.py") if f.code == "FRY003"]
    assert finding.fix is None
    assert 'map_location="cpu"' in finding.message
    module_level = only_in_main.replace('if __name__ == "__main__":\n    device', "device").replace(
        '    print(load("m.pt"))', 'print(load("m.pt"))'
    )
    (finding,) = [f for f in lint_source(module_level, "evaluate.py") if f.code == "FRY003"]
    assert finding.fix is not None
    assert "torch.load(path, map_location=device)" in fix_text(module_level, "evaluate.py", RULES)[0]
