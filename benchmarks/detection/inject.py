"""Inject one device bug per copy into a correct PyTorch program, by AST transformation.

Each operator walks the program's syntax tree, finds every place where its bug class fits (a move of a tensor, a
model's move, a factory's ``device=``, an ``eval()``, ...) and writes one copy (a *mutant*) per place, with the bug
written the way people write it (the move thrown away as a statement, the ``.to(device)`` left out, the ``eval()``
forgotten). The text is spliced at the node's position, so every other line keeps its number and the expected line
of the finding is known. What a call's receiver is at run time (a tensor or a module) comes from a trace of the
clean program (:func:`trace_sites`), so "the move of a tensor" means what it says, whatever the names.

Classes (the rule that should find each, statically and at run time):

====== =============================== ============================================================================
code   class                           injected as
====== =============================== ============================================================================
FRY001 discarded-tensor-move           ``x = x.to(d)`` -> ``x.to(d)``; tuples; attributes; container items
FRY002 hardcoded-cuda-device           the device chosen as ``torch.device("cuda")``; ``.to(device)`` -> ``.cuda()``;
                                       ``device=device`` -> ``device="cuda"``
FRY003 load-without-map-location       ``torch.load(f, map_location=...)`` -> ``torch.load(f)``
FRY004 whole-module-pickled            ``torch.save(m.state_dict(), f)`` -> ``torch.save(m, f)``
FRY005 device-less-tensor-in-forward   a factory's ``device=`` (or the ``.to(device)`` it is made with) removed
                                       inside a module's method
FRY006 input-on-other-device           a tensor's ``.to(device)`` left out (assignment, tuple, argument, return,
                                       DataLoader item, factory result); a factory's ``device=`` removed outside
                                       modules
FRY007 module-never-moved              a module's ``.to(device)``/``.cuda()`` left out
FRY008 optimizer-state-device          an eager-state optimizer (Adagrad) built before the model moves
FRY010 inference-in-train-mode         ``model.eval()`` left out before prediction
FRY012 numpy-of-device-tensor          ``.cpu()`` (or ``.to('cpu', ...)``) left out before ``.numpy()``
====== =============================== ============================================================================
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: rule code -> (rule name, sanitizer finding kinds that count as finding the bug at run time, where its effect
#: shows: "gpu" (run on pretend GPUs), "cpu" (run on a CPU-only machine) or None (only in a file, not visible as a
#: program's behaviour: static only)). Statically, the class's own rule must report it (see STATIC_CODES).
CLASSES: dict[str, tuple[str, frozenset[str], str | None]] = {
    "FRY001": ("discarded-tensor-move", frozenset({"discarded-tensor-move", "input-on-other-device"}), "gpu"),
    "FRY002": ("hardcoded-cuda-device", frozenset({"hardcoded-cuda-device"}), "cpu"),
    "FRY003": ("load-without-map-location", frozenset(), None),
    "FRY004": ("whole-module-pickled", frozenset(), None),
    "FRY005": (
        "device-less-tensor-in-forward",
        frozenset({"device-less-tensor-in-forward", "input-on-other-device"}),
        "gpu",
    ),
    "FRY006": ("input-on-other-device", frozenset({"input-on-other-device"}), "gpu"),
    "FRY007": ("module-never-moved", frozenset({"input-on-other-device"}), "gpu"),
    "FRY008": ("optimizer-state-device", frozenset({"optimizer-state-device"}), "gpu"),
    "FRY010": ("inference-in-train-mode", frozenset({"inference-in-train-mode"}), "gpu"),
    "FRY012": ("numpy-of-device-tensor", frozenset({"numpy-of-device-tensor"}), "gpu"),
}

#: Rules whose finding counts as finding a class statically: its own, and for a tensor left on the host the loss
#: rule too (FRY011 is FRY006 where the tensor that was not moved is a loss's target). FRY005 and FRY006 are one
#: mistake, a tensor made or left on the host meeting tensors on the device; which rule names it depends on where
#: the code runs (FRY005: in a module's forward and the helpers it calls), so each counts for the other.
STATIC_CODES: dict[str, frozenset[str]] = {code: frozenset({code}) for code in CLASSES}
STATIC_CODES["FRY006"] = frozenset({"FRY006", "FRY011", "FRY005"})
STATIC_CODES["FRY005"] = frozenset({"FRY005", "FRY006"})

#: torch functions that create a tensor and take ``device=``
FACTORIES = frozenset(
    "zeros ones empty full rand randn randint randperm arange linspace logspace eye tensor as_tensor "
    "zeros_like ones_like empty_like full_like rand_like randn_like randint_like".split()
)
#: factories that follow their input's device when ``device=`` is left out
_LIKE = frozenset(name for name in FACTORIES if name.endswith("_like"))
#: other calls that make a new tensor on the host and take no ``device=``: ``torch.from_numpy`` and the legacy typed
#: constructors (``torch.LongTensor(ids)``); moved straight after (``torch.LongTensor(ids).to(dev)``) they are made
#: as a factory's tensor is, so their move left out in a module's method is FRY005's bug as a factory's would be
HOST_CONSTRUCTORS = frozenset(
    "from_numpy FloatTensor DoubleTensor HalfTensor BFloat16Tensor ByteTensor CharTensor ShortTensor IntTensor "
    "LongTensor BoolTensor".split()
)


@dataclass(frozen=True)
class Mutant:
    """One copy of a program with one injected bug.

    Attributes:
        program: The clean program's file name.
        code: The bug class, as the rule code that should find it (``"FRY001"``).
        form: How the bug is written (``"tuple statement"``, ``"loop variable"``, ...).
        line: 1-based line of the injected change (every other line keeps its number).
        before: The clean text that was replaced.
        after: The text that replaced it.
        source: The mutant's whole source.
    """

    program: str
    code: str
    form: str
    line: int
    before: str
    after: str
    source: str = field(repr=False)

    @property
    def key(self) -> str:
        """A short unique name: ``program:line:code:form``."""
        return f"{self.program}:{self.line}:{self.code}:{self.form}"


# --------------------------------------------------------------------------------------------------------- tracing


#: ``(line, col, end_line, end_col)`` of a call in the program -> what its receiver was at run time
Sites = dict[tuple[int, int, int, int], set[str]]


def trace_sites(path: Path, run: Callable[[Path], Any]) -> Sites:
    """Run the clean program (``run(path)``) and record, for each ``.to``/``.cuda``/``.cpu``/``.eval``/``.numpy``
    call in it, whether its receiver was a ``"tensor"`` or a ``"module"`` (both when a call site saw both)."""
    sites: Sites = {}
    target = str(path)

    def where(frame: Any) -> tuple[int, int, int, int] | None:
        if frame is None or frame.f_code.co_filename != target:
            return None
        positions = list(frame.f_code.co_positions())
        index = frame.f_lasti // 2
        if index >= len(positions):
            return None
        line, end_line, col, end_col = positions[index]
        if None in (line, end_line, col, end_col):
            return None
        return (line, col, end_line, end_col)

    import torch

    names = {"to", "cuda", "cpu", "eval", "numpy"}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            if getattr(arg, "__name__", None) in names and isinstance(getattr(arg, "__self__", None), torch.Tensor):
                site = where(frame)
                if site:
                    sites.setdefault(site, set()).add("tensor")
        elif event == "call":
            code = frame.f_code
            if code.co_name in names and code.co_filename.endswith(("torch/nn/modules/module.py",)):
                site = where(frame.f_back)
                if site:
                    sites.setdefault(site, set()).add("module")
            elif code.co_name in names and "self" in frame.f_locals:
                receiver = frame.f_locals["self"]
                if isinstance(receiver, torch.Tensor):  # a Python-level override (pretend GPUs patch some)
                    site = where(frame.f_back)
                    if site:
                        sites.setdefault(site, set()).add("tensor")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run(path)
    finally:
        sys.setprofile(previous)
    return sites


# ------------------------------------------------------------------------------------------------------ the source


class Source:
    """A program's text and tree, with splicing that keeps every line number."""

    def __init__(self, name: str, text: str, sites: Sites) -> None:
        self.name = name
        self.text = text
        self.tree = ast.parse(text)
        self.sites = sites
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        lines = text.splitlines(keepends=True)
        self._starts = [0]
        for line in lines:
            self._starts.append(self._starts[-1] + len(line))
        self._lines = lines

    def offset(self, line: int, col: int) -> int:
        """The string offset of a 1-based line and a UTF-8 byte column."""
        return self._starts[line - 1] + len(self._lines[line - 1].encode()[:col].decode())

    def segment(self, node: ast.AST) -> str:
        """The node's source text."""
        return ast.get_source_segment(self.text, node) or ""

    def replace(self, node: ast.AST, text: str, *, statement: bool = False) -> str:
        """The whole source with ``node`` replaced by ``text``; lines the node spanned beyond its first are kept as
        blank lines (a statement) or as line breaks inside parentheses (an expression), so no line number moves."""
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        extra = node.end_lineno - node.lineno - text.count("\n")  # type: ignore[attr-defined]
        if extra > 0:
            text = text + "\n" * extra if statement else f"({text}" + "\n" * extra + ")"
        return self.text[:start] + text + self.text[end:]

    def kind(self, call: ast.Call) -> set[str]:
        """What the call's receiver was at run time: {"tensor"}, {"module"}, both, or empty (never ran)."""
        key = (call.lineno, call.col_offset, call.end_lineno, call.end_col_offset)  # type: ignore[arg-type]
        return self.sites.get(key, set())

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        """The node's parents, innermost first."""
        while node in self.parents:
            node = self.parents[node]
            yield node

    def function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The innermost function around ``node``."""
        for parent in self.ancestors(node):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return parent
        return None

    def in_module_class(self, node: ast.AST) -> bool:
        """Whether ``node`` is inside a method of a class deriving from ``nn.Module`` (or another class of the file
        that does)."""
        for parent in self.ancestors(node):
            if isinstance(parent, ast.ClassDef):
                return self._is_module_class(parent)
        return False

    def _is_module_class(self, cls: ast.ClassDef, seen: frozenset[str] = frozenset()) -> bool:
        for base in cls.bases:
            text = self.segment(base)
            if text.split(".")[-1] == "Module" or text.endswith(("nn.Module", "Module")):
                return True
            local = next(
                (c for c in ast.walk(self.tree) if isinstance(c, ast.ClassDef) and c.name == text and c is not cls),
                None,
            )
            if local is not None and local.name not in seen and self._is_module_class(local, seen | {cls.name}):
                return True
        return False

    def place(self, node: ast.AST) -> str:
        """``"module-level"``, ``"in forward"``, ``"in a method"`` or ``"in a function"``."""
        function = self.function(node)
        if function is None:
            return "module-level"
        if self.in_module_class(node):
            return "in forward" if function.name == "forward" else "in a method"
        return "in a function"

    def loop_targets(self, node: ast.AST) -> set[str]:
        """Names bound by the ``for`` loops around ``node``."""
        names: set[str] = set()
        for parent in self.ancestors(node):
            if isinstance(parent, (ast.For, ast.AsyncFor)):
                names |= {n.id for n in ast.walk(parent.target) if isinstance(n, ast.Name)}
        return names

    def loop_over_loader(self, node: ast.AST, name: str) -> bool:
        """Whether ``name`` is bound by a ``for`` loop around ``node`` over something named like a loader."""
        for parent in self.ancestors(node):
            if isinstance(parent, (ast.For, ast.AsyncFor)) and name in {
                n.id for n in ast.walk(parent.target) if isinstance(n, ast.Name)
            }:
                return "loader" in self.segment(parent.iter).lower() or "batch" in self.segment(parent.iter).lower()
        return False

    def parameters(self, node: ast.AST) -> set[str]:
        """Parameter names of the innermost function around ``node``."""
        function = self.function(node)
        if function is None:
            return set()
        args = function.args
        return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}


# ------------------------------------------------------------------------------------------------------- operators


def _is_move(node: ast.AST) -> bool:
    """``x.to(<device>)`` (not a dtype-only ``.to``) or ``x.cuda()``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr == "cuda":
        return True
    if node.func.attr != "to" or not (node.args or node.keywords):
        return False
    first = ast.unparse(node.args[0]) if node.args else ""
    if first.startswith("torch.") and not first.startswith("torch.device"):
        return False  # a dtype (torch.float16, ...)
    if "dtype" in first or "memory_format" in first:
        return False
    return bool(node.args) or any(k.arg == "device" for k in node.keywords)


def _root(node: ast.AST) -> ast.AST:
    """The receiver at the start of a chain of method calls: ``x`` in ``x.pin_memory().to(d)``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return node


def _statement(src: Source, node: ast.AST) -> ast.stmt:
    for parent in [node, *src.ancestors(node)]:
        if isinstance(parent, ast.stmt):
            return parent
    raise AssertionError("no statement around a node")


def _mutant(src: Source, code: str, form: str, node: ast.AST, after: str, *, statement: bool = False) -> Mutant:
    return Mutant(
        src.name,
        code,
        form,
        node.lineno,  # type: ignore[attr-defined]
        src.segment(node),
        after,
        src.replace(node, after, statement=statement),
    )


def discarded_moves(src: Source) -> Iterator[Mutant]:
    """FRY001: an assignment that keeps a tensor's move becomes a statement that throws it away."""
    for node in ast.walk(src.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        pairs: list[tuple[ast.AST, ast.AST]]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts, strict=True))
            form = "tuple statement"
        else:
            pairs = [(target, value)]
            if isinstance(target, ast.Attribute):
                form = "attribute"
            elif isinstance(target, ast.Subscript):
                form = "container item"
            elif isinstance(target, ast.Name) and target.id in src.loop_targets(node):
                form = "loop variable"
            elif isinstance(target, ast.Name) and target.id in src.parameters(node):
                form = "function parameter"
            else:
                form = "statement"
        moved = [
            (t, v)
            for t, v in pairs
            if _is_move(v) and src.segment(_root(v)) == src.segment(t) and src.kind(v) == {"tensor"}  # type: ignore[arg-type]
        ]
        if not moved or len(moved) != len(pairs):
            continue
        if any(src.segment(v).endswith(".cuda()") for _, v in moved):
            form += " (.cuda())"
        if src.place(node) == "module-level":
            form += ", module-level"
        yield _mutant(src, "FRY001", form, node, src.segment(value), statement=True)
        if len(moved) > 1 and node.lineno == node.end_lineno:
            # one move of the tuple thrown away, the others kept: `x.to(d); y = y.to(d)`
            for index, (_, value_item) in enumerate(moved):
                rest = [(t, v) for i, (t, v) in enumerate(moved) if i != index]
                kept = "; ".join(f"{src.segment(t)} = {src.segment(v)}" for t, v in rest)
                text = f"{src.segment(value_item)}; {kept}"
                yield _mutant(src, "FRY001", "one of a tuple, as a statement", node, text, statement=True)


def _move_form(src: Source, call: ast.Call) -> str:
    parent = src.parents.get(call)
    assert isinstance(call.func, ast.Attribute)
    direct = call.func.value
    receiver = _root(call)
    if isinstance(direct, ast.Call) and src.segment(direct.func).split(".")[-1] in FACTORIES | HOST_CONSTRUCTORS:
        form = "factory result"
    elif isinstance(receiver, ast.Name) and src.loop_over_loader(call, receiver.id):
        form = "DataLoader item"
    elif isinstance(parent, ast.Tuple):
        form = "tuple assignment"
    elif isinstance(parent, (ast.Call, ast.keyword)):
        form = "argument"
    elif isinstance(parent, ast.Return):
        form = "return value"
    elif isinstance(receiver, ast.Subscript):
        form = "container item"
    elif isinstance(receiver, ast.Attribute):
        form = "attribute"
    elif isinstance(receiver, ast.Name) and receiver.id in src.parameters(call):
        form = "function parameter"
    else:
        form = "assignment"
    return form + (", module-level" if src.place(call) == "module-level" else "")


def _calls(src: Source) -> Iterator[ast.Call]:
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call):
            yield node


def inputs_not_moved(src: Source) -> Iterator[Mutant]:
    """FRY006: a tensor's ``.to(device)``/``.cuda()`` left out; a factory's ``device=`` left out outside modules."""
    for call in _calls(src):
        if _is_move(call) and src.kind(call) == {"tensor"}:
            assert isinstance(call.func, ast.Attribute)
            parent = src.parents.get(call)
            if isinstance(parent, ast.Expr):
                continue  # a discarded move already; leaving it out changes nothing
            form = _move_form(src, call)
            if _to_host(call) and _chained_into(src, call, "numpy"):
                # `t.to('cpu', torch.uint8).numpy()` without its move: numpy of a device tensor, FRY012's class
                yield _mutant(src, "FRY012", "chained (.to('cpu'))", call, src.segment(call.func.value))
            elif form.startswith("factory result") and src.in_module_class(call):
                # `torch.zeros(...).to(device)` in a module's method without its move: a device-less tensor in the
                # forward, FRY005's class (its own injector leaves out `device=`)
                yield _mutant(src, "FRY005", f"factory result, {src.place(call)}", call, src.segment(call.func.value))
            elif src.in_module_class(call) and _made_by_a_factory_here(src, call):
                # `iden = torch.from_numpy(...)...` then `iden = iden.cuda()` in forward, without the move: the same
                # device-less tensor in the forward, moved on a later line (PointNet's STN)
                yield _mutant(src, "FRY005", f"made here, {src.place(call)}", call, src.segment(call.func.value))
            else:
                yield _mutant(src, "FRY006", form, call, src.segment(call.func.value))
    for call, keyword in _factories_with_device(src):
        if not src.in_module_class(call):
            form = "factory without device=" + (", module-level" if src.place(call) == "module-level" else "")
            yield _mutant(src, "FRY006", form, call, _without_keyword(src, call, keyword))


def _made_by_a_factory_here(src: Source, call: ast.Call) -> bool:
    """Whether the moved name was bound, in the same function, to a torch factory's tensor (``iden = torch.eye(3)``).

    ``*_like`` factories follow their input's device and do not count.
    """
    assert isinstance(call.func, ast.Attribute)
    receiver = call.func.value
    if not isinstance(receiver, ast.Name):
        return False
    scope = src.parents.get(call)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        scope = src.parents.get(scope)
    if scope is None:
        return False
    for node in ast.walk(scope):
        if not (isinstance(node, ast.Assign) and node.lineno < call.lineno):
            continue
        if not any(isinstance(t, ast.Name) and t.id == receiver.id for t in node.targets):
            continue
        for inner in ast.walk(node.value):
            if isinstance(inner, ast.Call):
                name = src.segment(inner.func)
                if name.startswith("torch.") and name.split(".")[-1] in (FACTORIES - _LIKE) | {"from_numpy"}:
                    return True
    return False


def _to_host(call: ast.Call) -> bool:
    """``x.to("cpu", ...)``, ``x.to(torch.device("cpu"))`` or ``x.to(device="cpu")``: a move to the host."""
    target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    return target is not None and "'cpu'" in ast.unparse(target).replace('"', "'")


def _chained_into(src: Source, call: ast.Call, method: str) -> bool:
    """Whether ``call``'s result goes, through a chain of method calls, into ``.<method>()``."""
    parent = src.parents.get(call)
    while isinstance(parent, ast.Attribute) and isinstance(src.parents.get(parent), ast.Call):
        if parent.attr == method:
            return True
        parent = src.parents.get(src.parents[parent])
    return False


def _factories_with_device(src: Source) -> Iterator[tuple[ast.Call, ast.keyword]]:
    for call in _calls(src):
        name = src.segment(call.func)
        if not (name.startswith("torch.") and name.split(".")[-1] in FACTORIES):
            continue
        for keyword in call.keywords:
            if keyword.arg == "device":
                yield call, keyword


def _without_keyword(src: Source, call: ast.Call, drop: ast.keyword) -> str:
    parts = [src.segment(a) for a in call.args] + [src.segment(k) for k in call.keywords if k is not drop]
    return f"{src.segment(call.func)}({', '.join(parts)})"


def device_less_factories(src: Source) -> Iterator[Mutant]:
    """FRY005: a factory's ``device=`` left out inside a module's method (``forward`` or a helper it calls)."""
    for call, keyword in _factories_with_device(src):
        if src.in_module_class(call) and src.segment(call.func).split(".")[-1] not in _LIKE:
            yield _mutant(src, "FRY005", src.place(call), call, _without_keyword(src, call, keyword))


def modules_not_moved(src: Source) -> Iterator[Mutant]:
    """FRY007: a module's ``.to(device)``/``.cuda()`` left out."""
    for call in _calls(src):
        if not (_is_move(call) and src.kind(call) == {"module"}):
            continue
        assert isinstance(call.func, ast.Attribute)
        parent = src.parents.get(call)
        under_if = any(isinstance(p, ast.If) for p in src.ancestors(call))
        where = src.place(call)
        if isinstance(parent, ast.Expr):
            form = "statement" + (" under if" if under_if else "")
            yield _mutant(src, "FRY007", f"{form}, {where}", parent, "pass", statement=True)
        else:
            receiver = call.func.value
            form = "constructor chain" if isinstance(receiver, ast.Call) else "reassignment"
            yield _mutant(src, "FRY007", f"{form}, {where}", call, src.segment(receiver))


def eager_optimizers(src: Source) -> Iterator[Mutant]:
    """FRY008: the model's move put after the optimizer's construction, and the optimizer made Adagrad (whose state
    is created at construction, on the parameters' device then)."""
    statements = [n for n in ast.walk(src.tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)]
    for node in statements:
        value = node.value
        assert isinstance(value, ast.Call)
        name = src.segment(value.func)
        if not re.search(r"(^|\.)optim\.[A-Z]\w+$", name) or not value.args:
            continue
        params = src.segment(value.args[0])
        match = re.match(r"(\w+)\.parameters\(\)$", params)
        if not match:
            continue
        model = match.group(1)
        # the model's move: `model = Net(...).to(device)` before the optimizer, in the same block
        block = _block(src, node)
        if block is None:
            continue
        index = block.index(node)
        for earlier in reversed(block[:index]):
            if (
                isinstance(earlier, ast.Assign)
                and len(earlier.targets) == 1
                and src.segment(earlier.targets[0]) == model
                and _is_move(earlier.value)
                and src.kind(earlier.value) == {"module"}  # type: ignore[arg-type]
            ):
                move = earlier.value
                assert isinstance(move, ast.Call)
                assert isinstance(move.func, ast.Attribute)
                device = src.segment(move.args[0]) if move.args else "device"
                built = src.replace(move, src.segment(move.func.value))
                # the optimizer line: Adagrad, then the move after it on the same line
                moved = Source(src.name, built, src.sites)
                target = next(
                    n
                    for n in ast.walk(moved.tree)
                    if isinstance(n, ast.Assign) and n.lineno == node.lineno and n.col_offset == node.col_offset
                )
                optimizer = moved.segment(target.targets[0])
                text = f"{optimizer} = torch.optim.Adagrad({params}, lr=0.01); {model}.to({device})"
                source = moved.replace(target, text, statement=True)
                yield Mutant(src.name, "FRY008", "built before the move", node.lineno, src.segment(node), text, source)
                break


def _block(src: Source, node: ast.stmt) -> list[ast.stmt] | None:
    parent = src.parents.get(node)
    for name in ("body", "orelse", "finalbody"):
        block = getattr(parent, name, None)
        if isinstance(block, list) and node in block:
            return block
    return None


def train_mode_predictions(src: Source) -> Iterator[Mutant]:
    """FRY010: ``model.eval()`` left out before prediction."""
    for node in ast.walk(src.tree):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        if isinstance(call.func, ast.Attribute) and call.func.attr == "eval" and not call.args:
            if src.kind(call) != {"module"}:
                continue
            block = _block(src, node) or []
            index = block.index(node) if node in block else 0
            previous = src.segment(block[index - 1]) if index else ""
            loads = "load_state_dict" in previous or "torch.load" in previous
            form = "after loading" if loads else "before evaluation"
            yield _mutant(src, "FRY010", f"{form}, {src.place(node)}", node, "pass", statement=True)


def numpy_of_device_tensors(src: Source) -> Iterator[Mutant]:
    """FRY012: the ``.cpu()`` before ``.numpy()`` left out (in the chain, or where the variable was made)."""
    for call in _calls(src):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "cpu" and not call.args):
            continue
        if src.kind(call) != {"tensor"}:
            continue
        receiver = src.segment(call.func.value)
        chain = call
        parent = src.parents.get(chain)
        while isinstance(parent, ast.Attribute) and isinstance(src.parents.get(parent), ast.Call):
            if parent.attr == "numpy":
                yield _mutant(src, "FRY012", "chained", call, receiver)
                break
            chain = src.parents[parent]  # type: ignore[assignment]
            parent = src.parents.get(chain)
        else:
            statement = _statement(src, call)
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = src.segment(statement.targets[0])
                later = src.text[src.offset(statement.end_lineno or 1, statement.end_col_offset or 0) :]
                if isinstance(statement.targets[0], ast.Name) and re.search(
                    rf"\b{re.escape(target)}\b[^\n]*\.numpy\(\)", later
                ):
                    yield _mutant(src, "FRY012", "via a variable", call, receiver)


def hardcoded_cuda(src: Source) -> Iterator[Mutant]:
    """FRY002: the device written as CUDA where the program chose it."""
    for node in ast.walk(src.tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and "device" in node.targets[0].id
            and ("cuda" in src.segment(node.value) or "accelerator" in src.segment(node.value))
        ):
            yield _mutant(src, "FRY002", f"device variable, {src.place(node)}", node.value, 'torch.device("cuda")')
    for call in _calls(src):
        to = isinstance(call.func, ast.Attribute) and call.func.attr == "to"
        if _is_move(call) and src.kind(call) and to and len(call.args) == 1 and not call.keywords:
            kind = "module" if src.kind(call) == {"module"} else "tensor"
            assert isinstance(call.func, ast.Attribute)
            receiver = src.segment(call.func.value)
            yield _mutant(src, "FRY002", f".cuda() on a {kind}", call, f"{receiver}.cuda()")
            yield _mutant(src, "FRY002", f'.to("cuda") on a {kind}', call, f'{receiver}.to("cuda")')
    for _call, keyword in _factories_with_device(src):
        if isinstance(keyword.value, ast.Name):
            yield _mutant(src, "FRY002", 'factory device="cuda"', keyword.value, '"cuda"')


def loads_without_map_location(src: Source) -> Iterator[Mutant]:
    """FRY003: ``map_location=`` left out of ``torch.load``."""
    for call in _calls(src):
        if src.segment(call.func) == "torch.load":
            for keyword in call.keywords:
                if keyword.arg == "map_location":
                    yield _mutant(src, "FRY003", src.place(call), call, _without_keyword(src, call, keyword))


def whole_modules_pickled(src: Source) -> Iterator[Mutant]:
    """FRY004: ``torch.save(m.state_dict(), f)`` becomes ``torch.save(m, f)``."""
    for call in _calls(src):
        if src.segment(call.func) == "torch.save" and call.args:
            first = call.args[0]
            if (
                isinstance(first, ast.Call)
                and isinstance(first.func, ast.Attribute)
                and first.func.attr == "state_dict"
                and not first.args
            ):
                yield _mutant(src, "FRY004", src.place(call), first, src.segment(first.func.value))


OPERATORS: tuple[Callable[[Source], Iterator[Mutant]], ...] = (
    discarded_moves,
    hardcoded_cuda,
    loads_without_map_location,
    whole_modules_pickled,
    device_less_factories,
    inputs_not_moved,
    modules_not_moved,
    eager_optimizers,
    train_mode_predictions,
    numpy_of_device_tensors,
)


def mutants(name: str, text: str, sites: Sites) -> list[Mutant]:
    """Every mutant of one program whose source parses, one per (place, class), in a stable order."""
    src = Source(name, text, sites)
    found: dict[str, Mutant] = {}
    for operator in OPERATORS:
        for mutant in operator(src):
            try:
                ast.parse(mutant.source)
            except SyntaxError:
                continue  # an injection that does not parse is dropped, not counted
            if mutant.source != text:
                found.setdefault(mutant.key + mutant.after, mutant)
    return list(found.values())
