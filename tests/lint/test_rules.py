"""The rule registry, and every rule's documented Example and Use-instead code as tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import ferry.lint.rules as rules_package
from _support import LINT_FIXTURES, REPO
from ferry.lint import RULES, lint_source
from ferry.lint.rules import MODULES

RULE_FILES = sorted(p.stem for p in Path(rules_package.__file__).parent.glob("*.py") if not p.stem.startswith("_"))
SECTIONS = ("## What it does", "## Why is this bad", "## Example", "## Use instead")
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
MARK = re.compile(r"#\s*(FRY\d{3})\b")


def blocks(doc: str, section: str) -> list[str]:
    start = doc.index(section)
    end = min((doc.index(s, start + 1) for s in SECTIONS if s in doc[start + 1 :]), default=len(doc))
    return BLOCK.findall(doc[start:end])


def test_every_rule_file_is_registered() -> None:
    assert RULE_FILES == sorted(m.__name__.rsplit(".", 1)[-1] for m in MODULES)


def test_codes_and_names_are_unique_and_well_formed() -> None:
    codes = [r.code for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in RULES:
        assert re.fullmatch(r"FRY\d{3}", rule.code)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", rule.name)


def test_rule_module_names_match_rule_names() -> None:
    for module in MODULES:
        assert module.RULE.name.replace("-", "_") == module.__name__.rsplit(".", 1)[-1]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_doc_has_every_section(rule) -> None:
    for section in SECTIONS:
        assert section in rule.doc, section
    assert rule.message
    assert rule.fix_title


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_example_triggers_exactly_the_marked_lines(rule) -> None:
    examples = blocks(rule.doc, "## Example")
    assert examples
    for code in examples:
        ast.parse(code)
        marked = {(n, m) for n, line in enumerate(code.splitlines(), 1) for m in MARK.findall(line)}
        assert marked, "the Example marks no line"
        found = {(d.line, d.code) for d in lint_source(code, rules=[rule])}
        assert marked == found


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_use_instead_is_clean(rule) -> None:
    for code in blocks(rule.doc, "## Use instead"):
        assert [] == [str(d) for d in lint_source(code, rules=[rule])]


FIXTURES = sorted(LINT_FIXTURES.glob("FRY*.py"))


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_fixture_markers(fixture: Path) -> None:
    """Corner cases: ``tests/lint/fixtures/FRYxxx_<what>.py``; lines marked ``# FRYxxx`` are reported, no others."""
    code = fixture.stem[:6]
    rule = next(r for r in RULES if r.code == code)
    source = fixture.read_text()
    marked = {n for n, line in enumerate(source.splitlines(), 1) if code in MARK.findall(line)}
    found = {d.line for d in lint_source(source, str(fixture), rules=[rule])}
    assert sorted(marked) == sorted(found)


def test_readme_rules_table_is_current() -> None:
    """README.md's table is generated from RULES: `python scripts/lint_rules_table.py --write` after adding a rule."""
    import importlib.util

    repo = REPO
    spec = importlib.util.spec_from_file_location("lint_rules_table", repo / "scripts" / "lint_rules_table.py")
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    readme = (repo / "README.md").read_text()
    assert f"{script.START}\n{script.table()}{script.END}" in readme


FRY001 = [r for r in RULES if r.code == "FRY001"]
HEADER = "import torch\n"


@pytest.mark.parametrize(
    ("code", "fixed"),
    [
        ("x = torch.zeros(2)\nx.cpu()\n", True),
        ("x = torch.zeros(2)\ndef f():\n    x.cpu()\n", False),  # a module global: the fix would make it local
        ("def f():\n    x = torch.zeros(2)\n    def g():\n        x.cpu()\n", False),  # enclosing function's
        ("x = torch.zeros(2)\ndef f():\n    global x\n    x = torch.ones(2)\n    x.cpu()\n", False),
        ("def f(x: torch.Tensor):\n    x.cpu()\n", True),
        ("x = torch.zeros(2)\n(x\n    .cpu())\n", False),  # multi-line: the brackets would be lost
    ],
)
def test_fry001_fix_only_for_locals_on_one_line(code: str, fixed: bool) -> None:
    (found,) = lint_source(HEADER + code, rules=FRY001)
    assert (found.fix is not None) == fixed


def test_fry001_message_shows_the_real_call() -> None:
    (found,) = lint_source(HEADER + "x = torch.zeros(2)\nx.cpu()\n", rules=FRY001)
    assert "`x.cpu()` is discarded" in found.message
    assert "`x = x.cpu()`" in found.message
    long = "x.to(" + "a" * 70 + ")"
    (found,) = lint_source(HEADER + f"x = torch.zeros(2)\n{long}\n", rules=FRY001)
    assert "`x.to(...)` is discarded" in found.message


def test_fry001_loop_variable_says_rebuild_the_container() -> None:
    code = HEADER + "ts = [torch.zeros(2)]\nfor t in ts:\n    t.to('cuda')\n"
    (found,) = lint_source(code, rules=FRY001)
    assert found.fix is None
    assert "`ts = [t.to('cuda') for t in ts]`" in found.message
    code = HEADER + "d = {'a': torch.zeros(2)}\nfor k, v in d.items():\n    v.to('cuda')\n"
    (found,) = lint_source(code, rules=FRY001)
    assert found.fix is None
    assert "`d = {k: v.to('cuda') for k, v in d.items()}`" in found.message


@pytest.mark.parametrize(
    "code",
    [
        "import torch\nx = torch.ones(2)\nz = " + "+".join(["x"] * 500) + "\n",
        "import torch\nt = torch.ones(2)\nt.to('cpu')" + ".to('cpu')" * 400 + "\n",
    ],
)
def test_deep_nesting_is_followed_a_bounded_depth_without_crashing(code: str) -> None:
    for diagnostic in lint_source(code):
        assert diagnostic.code != "FRY000" or "nests deeper" in diagnostic.message


def test_recursion_in_a_rule_gives_fry000(monkeypatch: pytest.MonkeyPatch) -> None:
    import ferry.lint.engine as engine

    def deep(*args: object) -> None:
        raise RecursionError

    monkeypatch.setattr(engine, "FileContext", deep)
    [found] = lint_source("x = 1\n", "t.py")
    assert ("FRY000", "not checked: the code nests deeper than the linter follows") == (found.code, found.message)


def test_parser_giving_up_gives_fry000() -> None:
    [found] = lint_source("x = " + "-" * 100_000 + "1\n", "t.py")
    assert "FRY000" == found.code
    assert "too complex" in found.message


@pytest.mark.parametrize(
    ("line", "silenced"),
    [
        ('s = "# noqa"; x.cpu()', False),
        ("s = '# noqa: FRY001'; x.cpu()", False),
        ("x.cpu()  # noqa: FRY001", True),
        ("x.cpu()  # noqa", True),
        ('x.cpu()  # "quoted" noqa: FRY001', False),
    ],
)
def test_noqa_counts_only_in_comments(line: str, silenced: bool) -> None:
    found = lint_source(HEADER + "x = torch.zeros(2)\n" + line + "\n", rules=FRY001)
    assert (not found) == silenced


def test_noqa_falls_back_to_text_when_tokenizing_fails() -> None:
    from ferry.lint.engine import _noqa_lines

    assert {2: None} == _noqa_lines('x = 1\ny = """  # noqa\n')


def test_fry009_inline_wrapper_suggests_the_bare_model() -> None:
    code = (
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\n"
        "torch.save(nn.DataParallel(model).state_dict(), 'p.pt')\n"
    )
    [found] = lint_source(code, rules=[r for r in RULES if r.code == "FRY009"])
    assert "`model.state_dict()`" in found.message
    assert "model.module" not in found.message


def test_fry008_second_report_refers_to_the_first() -> None:
    code = (
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "opt.load_state_dict(torch.load('o.pt', map_location='cpu'))\nmodel.to('cuda')\n"
    )
    found = lint_source(code, rules=[r for r in RULES if r.code == "FRY008"])
    assert [5, 6] == [d.line for d in found]
    assert "the same problem as reported at line 5" in found[1].message


_AGENT = """
import torch
import torch.nn as nn


class Env:
    def __init__(self, args):
        self.device = args.device

    def reset(self):
        return torch.zeros(4, device=self.device)


class Agent:
    def __init__(self, args):
        self.net = nn.Linear(4, 2){move}

    def act(self, state):
        return self.net(state){rest}


def main(args):
    if torch.cuda.is_available():
        args.device = torch.device("cuda")
    else:
        args.device = torch.device("cpu")
    env = Env(args)
    agent = Agent(args)
    state = {state}
    print(agent.act(state))
"""


def test_placement_fixes_name_a_device_the_fixed_scope_can_reach() -> None:
    # `self.device` of the Env class is not the Agent's: a fix inside Agent names no attribute Agent lacks
    source = _AGENT.format(move="", rest="", state="env.reset()")
    (found,) = [d for d in lint_source(source) if d.code == "FRY007"]
    assert "fix: `self.net.to(device)` after building it" in found.message
    source = _AGENT.format(move=".to(device=args.device)", rest="", state="torch.randn(4)")
    (found,) = [d for d in lint_source(source) if d.code == "FRY006"]
    assert "`state = state.to(args.device)`" not in found.message
    assert "fix: `state = state.to(device)` before this line" in found.message


_TRAINER = """
import torch
from torch import nn


class Trainer:
    def __init__(self, model):
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model

    def step(self, x):
        return self.model(x.to(self.device))


Trainer(nn.Linear(8, 1)).step(torch.randn(2, 8))
"""


def test_a_model_kept_by_a_trainer_is_kept_not_built_there() -> None:
    # `self.model = model` in a trainer's `__init__`: the model was built by the caller, the trainer keeps it
    (found,) = [d for d in lint_source(_TRAINER) if d.code == "FRY007"]
    assert found.message.startswith("`self.model` is kept here and never moved")
    assert found.message.endswith("fix: `self.model.to(self.device)` after keeping it")


def test_a_discarded_move_is_one_finding_not_three() -> None:
    """``inputs.to(device)`` as a statement is FRY001; the model call and the loss that then get the host tensor are
    the same mistake, which FRY001's fix (``inputs = inputs.to(device)``) fixes: no FRY006/FRY011 for them."""
    source = (
        "import torch\n"
        "import torch.nn as nn\n"
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "model = nn.Linear(4, 2).to(device)\n"
        "criterion = nn.CrossEntropyLoss()\n"
        "loader = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]\n"
        "for inputs, labels in loader:\n"
        "    inputs.to(device)\n"
        "    labels.to(device)\n"
        "    loss = criterion(model(inputs), labels)\n"
        "    loss.backward()\n"
    )
    assert [(8, "FRY001"), (9, "FRY001")] == [(d.line, d.code) for d in lint_source(source)]


def test_fry005_fix_uses_the_device_a_helper_already_takes() -> None:
    """RAFT's ``coords_grid(batch, ht, wd, device)`` called from ``forward``: the fix is ``device=device``."""
    source = (
        "import torch\n"
        "import torch.nn as nn\n"
        "def coords_grid(batch, ht, wd, device):\n"
        "    coords = torch.arange(ht).float()\n"
        "    return coords[None].repeat(batch, 1)\n"
        "class Flow(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x) + coords_grid(x.shape[0], 4, 4, device=x.device)\n"
    )
    found = [d for d in lint_source(source) if d.code == "FRY005"]
    assert [4] == [d.line for d in found]
    assert "`coords_grid` takes `device`: create the tensor there, `device=device`" in found[0].message
