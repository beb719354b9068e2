"""The device-choice and serialization rules (FRY002-FRY004): fixes and messages beyond the fixture markers."""

from __future__ import annotations

import pytest

from ferry.lint import RULES, Edit, lint_source

FRY002, FRY003, FRY004 = ([r for r in RULES if r.code == code] for code in ("FRY002", "FRY003", "FRY004"))


def apply(source: str, edits: tuple[Edit, ...]) -> str:
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    for edit in sorted(edits, reverse=True):
        start = starts[edit.start[0] - 1] + edit.start[1]
        end = starts[edit.end[0] - 1] + edit.end[1]
        source = source[:start] + edit.text + source[end:]
    return source


MAP_LOCATION_FIXES = [
    (
        "import torch\n\ndef f(path, device):\n    return torch.load(path)\n",
        "import torch\n\ndef f(path, device):\n    return torch.load(path, map_location=device)\n",
    ),
    (
        "import torch\nimport ferry\n\ndef f(path):\n    dev = ferry.pick_device()\n"
        "    return torch.load(\n        path,  # the checkpoint\n        weights_only=True,\n    )\n",
        "import torch\nimport ferry\n\ndef f(path):\n    dev = ferry.pick_device()\n"
        "    return torch.load(\n        path,  # the checkpoint\n"
        "        weights_only=True, map_location=dev,\n    )\n",
    ),
    (
        'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\nsd = torch.load("w.pt")\n',
        'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n'
        'sd = torch.load("w.pt", map_location=device)\n',
    ),
    (
        "import torch\n\ndef get_device():\n    return torch.device('cpu')\n\ndef f(p):\n    target = get_device()\n"
        "    return torch.load(p)\n",
        "import torch\n\ndef get_device():\n    return torch.device('cpu')\n\ndef f(p):\n    target = get_device()\n"
        "    return torch.load(p, map_location=target)\n",
    ),
]


@pytest.mark.parametrize(("source", "expected"), MAP_LOCATION_FIXES)
def test_map_location_fix_adds_the_device_in_scope(source: str, expected: str) -> None:
    [diagnostic] = lint_source(source, rules=FRY003)
    assert diagnostic.fix is not None
    assert expected == apply(source, diagnostic.fix.edits)
    assert [] == lint_source(expected, rules=FRY003)


def test_no_device_fix_from_a_value_that_only_depends_on_availability() -> None:
    # pytorch-cifar100's runner: `gpu_flag = ["-gpu"] if torch.cuda.is_available() else []` is a list of
    # command-line flags, not a device; `map_location=gpu_flag` would be wrong
    source = 'import torch\ngpu_flag = ["-gpu"] if torch.cuda.is_available() else []\nsd = torch.load("w.pt")\n'
    [diagnostic] = lint_source(source, rules=FRY003)
    assert diagnostic.fix is None
    assert "gpu_flag" not in diagnostic.message
    chosen = 'import torch\ndev = torch.device("cuda") if torch.cuda.is_available() else "cpu"\n'
    chosen += 'sd = torch.load("w.pt")\n'
    [diagnostic] = lint_source(chosen, rules=FRY003)
    assert "map_location=dev" in diagnostic.message


def test_no_fix_where_the_argument_has_its_own_parentheses() -> None:
    source = "import torch\n\ndef f(path, device):\n    return torch.load((path))\n"
    [diagnostic] = lint_source(source, rules=FRY003)
    assert diagnostic.fix is None
    assert "map_location=device" in diagnostic.message


def test_fix_keeps_a_trailing_comment() -> None:
    source = "import torch\n\ndef f(path, device):\n    return torch.load(path  # here\n    )\n"
    [diagnostic] = lint_source(source, rules=FRY003)
    assert diagnostic.fix is not None
    expected = "import torch\n\ndef f(path, device):\n    return torch.load(path, map_location=device  # here\n    )\n"
    assert expected == apply(source, diagnostic.fix.edits)


def test_no_fix_without_a_device_variable() -> None:
    [diagnostic] = lint_source("import torch\n\ndef f(path):\n    return torch.load(path)\n", rules=FRY003)
    assert diagnostic.fix is None
    assert 'map_location="cpu"' in diagnostic.message
    assert "ferry.load(path)" in diagnostic.message


def test_device_variable_bound_after_the_load_is_not_used() -> None:
    source = "import torch\nsd = torch.load('w.pt')\ndevice = torch.device('cpu')\n"
    [diagnostic] = lint_source(source, rules=FRY003)
    assert diagnostic.fix is None


HARDCODED_MESSAGES = [
    ("import torch\n\ndef f(x):\n    return x.cuda()\n", (4, 14), "`x.to(device)`"),
    (
        "import torch.nn as nn\n\nclass M(nn.Module):\n    def forward(self, feats):\n        return feats.cuda()\n",
        (5, 22),
        "`feats.to(feats.device)`",
    ),
    ("import torch\n\ndef f(x):\n    return (x * 2).to('cuda')\n", (4, 23), "`(x * 2).to(device)`"),
]


@pytest.mark.parametrize(("source", "where", "fix"), HARDCODED_MESSAGES)
def test_hardcoded_cuda_messages_name_the_fix(source: str, where: tuple[int, int], fix: str) -> None:
    [diagnostic] = lint_source(source, rules=FRY002)
    assert where == (diagnostic.line, diagnostic.col)
    assert fix in diagnostic.message


def test_whole_module_message_names_the_key() -> None:
    source = (
        "import torch\nimport torch.nn as nn\nnet = nn.Linear(2, 2)\ntorch.save({'epoch': 1, 'weights': net}, 'c.pt')\n"
    )
    [diagnostic] = lint_source(source, rules=FRY004)
    assert 4 == diagnostic.line
    assert "`net` (key 'weights')" in diagnostic.message
    assert "`net.state_dict()`" in diagnostic.message
