"""What a rule sees of one file: its tree, names resolved through its imports, parents, guards, and value kinds.

Built once per file by the engine; everything is computed lazily and cached, so a rule pays only for what it asks.

- :meth:`FileContext.nodes` gives every node of a type, from one walk of the tree.
- :meth:`FileContext.qualname` resolves ``nn.Linear`` to ``torch.nn.Linear`` through the file's imports.
- :meth:`FileContext.kind` tells what a name or expression holds at that point of the code (a tensor, a module,
  a data loader, ...), see :mod:`ferry.lint.kinds`.
- :meth:`FileContext.cuda_guarded` tells whether code runs only where CUDA is available.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import TypeVar, cast

from ferry.lint.kinds import Kind, KindInference
from ferry.lint.torch_api import AVAILABILITY_CHECKS, DEVICE_TYPES, DEVICE_WORDS, MASK_FACTORIES

#: Static methods of ``torch.nn`` classes by name, for calls through an instance (``self.transformer.<name>(...)``).
_INSTANCE_STATICS = {full.rsplit(".", 1)[-1]: full for full in sorted(MASK_FACTORIES, key=len, reverse=True)}

__all__ = ["FileContext", "dotted"]

N = TypeVar("N", bound=ast.AST)
T = TypeVar("T")


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_AST_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")

#: Calls whose result still carries the decision passed to them (``torch.device("cuda" if use_cuda else "cpu")``).
_DECISION_PASSING_CALLS = frozenset(
    {
        *("bool", "int", "float", "str", "len", "min", "max", "any", "all"),
        *("torch.device", "torch.accelerator.current_accelerator"),
    }
)

#: A comparison on ``num_cpus`` counts cores, not devices; ``npu`` is also part of ``input``.
_DEVICE_WORDS = DEVICE_WORDS - {"cpu", "npu"}


def device_given_test(test: ast.AST) -> bool:
    """``device is None``, ``self.device is not None``: whether a device was given at all.

    That says nothing of CUDA (the given device may be the CPU), so it is no decision on devices. A GPU's name
    (``args.gpu is not None``) does say that one was asked for.
    """
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is | ast.IsNot)):
        return False
    other = test.comparators[0]
    name = dotted(test.left) if isinstance(other, ast.Constant) and other.value is None else None
    last = name.rsplit(".", 1)[-1].lower() if name else ""
    return "device" in last and "cuda" not in last and "gpu" not in last


def _about_devices(compare: ast.Compare) -> bool:
    """Whether a comparison decides on devices: a device string, or a name that speaks of devices.

    Not whether a device was given (:func:`device_given_test`).
    """
    if device_given_test(compare):
        return False
    for sub in ast.walk(compare):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.split(":")[0] in DEVICE_TYPES:
            return True
        name = dotted(sub) if isinstance(sub, ast.Name | ast.Attribute) else None
        if name and any(word in name.lower() for word in _DEVICE_WORDS):
            return True
    return False


class FileContext:
    """One parsed file and the facts rules ask about it.

    Args:
        source: The Python source (for a notebook, its code cells joined).
        tree: ``ast.parse(source)``.
        path: The file's path as given, for messages.
    """

    def __init__(self, source: str, tree: ast.Module, path: str = "-") -> None:
        self.source = source
        self.tree = tree
        self.path = path
        self.lines = source.splitlines(keepends=True)
        self._shared: dict[Callable[[FileContext], object], object] = {}

    def shared(self, build: Callable[[FileContext], T]) -> T:
        """``build(self)``, made once per file and shared by every rule that asks: the file's one cache.

        The analyses the rules share (the device flow, where tensors live, the guards on devices) are built through
        it, keyed by their builder, and go away with the file.
        """
        if build not in self._shared:
            self._shared[build] = build(self)
        return cast(T, self._shared[build])

    # -- the tree ---------------------------------------------------------------------------------------------

    @cached_property
    def _index(self) -> tuple[dict[type, list[ast.AST]], dict[ast.AST, ast.AST]]:
        by_type: dict[type, list[ast.AST]] = defaultdict(list)
        parents: dict[ast.AST, ast.AST] = {}
        stack: list[ast.AST] = [self.tree]
        order: list[ast.AST] = []
        while stack:
            node = stack.pop()
            order.append(node)
            children = list(ast.iter_child_nodes(node))
            for child in children:
                parents[child] = node
            stack.extend(reversed(children))
        for node in order:  # pre-order: source order for statements and expressions alike
            by_type[type(node)].append(node)
        return by_type, parents

    def nodes(self, kind: type[N]) -> list[N]:
        """Every node of type ``kind`` (exact type) in source order."""
        return self._index[0].get(kind, [])  # type: ignore[return-value]

    def parent(self, node: ast.AST) -> ast.AST | None:
        """The node that holds ``node`` (``None`` for the module)."""
        return self._index[1].get(node)

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        """The parents of ``node``, nearest first, up to the module."""
        parents = self._index[1]
        while node in parents:
            node = parents[node]
            yield node

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The innermost function or method that contains ``node``."""
        for above in self.ancestors(node):
            if isinstance(above, ast.FunctionDef | ast.AsyncFunctionDef):
                return above
        return None

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        """The innermost class whose body contains ``node``."""
        for above in self.ancestors(node):
            if isinstance(above, ast.ClassDef):
                return above
        return None

    def segment(self, node: ast.AST) -> str:
        """The exact source text of ``node`` (what ``ast.get_source_segment`` gives, without re-splitting the file)."""
        line: int | None = getattr(node, "lineno", None)
        end_line: int | None = getattr(node, "end_lineno", None)
        col: int | None = getattr(node, "col_offset", None)
        end_col: int | None = getattr(node, "end_col_offset", None)
        if line is None or end_line is None or col is None or end_col is None:
            return ""
        lines = self._ast_lines
        if not 1 <= line <= end_line <= len(lines):
            return ast.get_source_segment(self.source, node) or ""
        if line == end_line:
            return lines[line - 1].encode()[col:end_col].decode()
        first = lines[line - 1].encode()[col:].decode()
        last = lines[end_line - 1].encode()[:end_col].decode()
        return "".join([first, *lines[line : end_line - 1], last])

    @cached_property
    def _ast_lines(self) -> list[str]:
        """The source split as ``ast`` counts lines: at LF, CRLF and CR only (not form feeds), ends kept."""
        return _AST_LINE.findall(self.source)

    # -- names ------------------------------------------------------------------------------------------------

    @cached_property
    def imports(self) -> dict[str, str]:
        """Local name -> the dotted name it was imported as, e.g. ``{"nn": "torch.nn"}``."""
        names: dict[str, str] = {}
        for node in self.nodes(ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        for found in self.nodes(ast.ImportFrom):
            if found.module is None or found.level:
                continue
            for alias in found.names:
                names[alias.asname or alias.name] = f"{found.module}.{alias.name}"
        return names

    def qualname(self, node: ast.AST) -> str | None:
        """The full dotted name an expression refers to through the file's imports.

        ``nn.Linear`` -> ``"torch.nn.Linear"`` after ``import torch.nn as nn``; ``F.relu`` ->
        ``"torch.nn.functional.relu"``; a name that is not imported resolves to itself (``"print"``); anything that
        is not a name or attribute chain gives ``None``.
        """
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.imports.get(head, head)
        return f"{full}.{rest}" if rest else full

    def call_name(self, node: ast.AST) -> str | None:
        """:meth:`qualname` of the function a call calls, ``None`` if ``node`` is not such a call."""
        if isinstance(node, ast.Call):
            full = self.qualname(node.func)
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in _INSTANCE_STATICS
                and (full is None or not full.startswith("torch."))
                and (kind := self.kind(func.value)) is not None
                and kind.is_module
            ):  # `self.transformer.generate_square_subsequent_mask(n)`: the static method, through an instance
                return _INSTANCE_STATICS[func.attr]
            return full
        return None

    # -- kinds ------------------------------------------------------------------------------------------------

    @cached_property
    def kinds(self) -> KindInference:
        """The kind inference of this file (see :mod:`ferry.lint.kinds`)."""
        return KindInference(self)

    def kind(self, node: ast.expr) -> Kind | None:
        """What ``node`` holds where it stands (``None``: not known)."""
        return self.kinds.infer(node)

    # -- guards -----------------------------------------------------------------------------------------------

    def mentions_availability(self, test: ast.AST, _seen: frozenset[str] = frozenset()) -> bool:
        """Whether ``test`` asks if CUDA or an accelerator is available.

        Directly or through a name bound to such a check (``use_cuda = torch.cuda.is_available()``;
        ``args.cuda = not args.no_cuda and ...``), or compares a device's type or name (``device.type == "cuda"``,
        ``"cuda" in device``).
        """
        deciding = self._deciding_names
        stack = [test]
        while stack:
            sub = stack.pop()
            if device_given_test(sub):
                continue  # `device is None`, even where `device` was chosen by an availability check
            stack.extend(ast.iter_child_nodes(sub))
            if isinstance(sub, ast.Call) and self.call_name(sub) in AVAILABILITY_CHECKS:
                return True
            if isinstance(sub, ast.Compare) and _about_devices(sub):
                return True  # `device.type == "cuda"`, `"cuda" in str(device)`, `n_gpu > 0`: a decision on devices
            name = dotted(sub) if isinstance(sub, ast.Name | ast.Attribute) else None
            if name and name not in _seen and name in deciding:
                return True
        return False

    def _decides(self, node: ast.Call | ast.Compare) -> bool:
        if isinstance(node, ast.Call):
            return self.call_name(node) in AVAILABILITY_CHECKS
        return _about_devices(node)

    @cached_property
    def _deciding_names(self) -> frozenset[str]:
        """The names :meth:`mentions_availability` follows to a check: bound to one, directly or through names.

        One pass over the assigned values, then a walk back along "is bound to a value naming" edges, so a file
        with long chains of names costs linear time rather than one walk per path.
        """
        users: dict[str, set[str]] = defaultdict(set)  # name -> the names whose values mention it
        found: list[str] = []
        for name, values in self.kinds.values.items():
            direct = False
            for value in values:
                for sub in self._decision_parts(value):
                    if isinstance(sub, ast.Call | ast.Compare) and self._decides(sub):
                        direct = True
                    elif isinstance(sub, ast.Name | ast.Attribute):
                        mentioned = dotted(sub)
                        if mentioned and mentioned != name:
                            users[mentioned].add(name)
            if direct:
                found.append(name)
        deciding = set(found)
        while found:
            for user in users.get(found.pop(), ()):
                if user not in deciding:
                    deciding.add(user)
                    found.append(user)
        return frozenset(deciding)

    def _decision_parts(self, value: ast.AST) -> Iterator[ast.AST]:
        """The parts of an assigned value that carry a decision into the name it is bound to.

        Everything but the arguments of calls that build something else from the decision: ``use_cuda = args.cuda and
        torch.cuda.is_available()`` and ``device = torch.device("cuda" if use_cuda else "cpu")`` decide;
        ``loader = DataLoader(data, **kwargs)`` with ``kwargs`` chosen by availability, or ``model =
        Net(use_gpu=torch.cuda.is_available())``, are a loader and a model, not a decision.
        """
        stack = [value]
        while stack:
            node = stack.pop()
            yield node
            if isinstance(node, ast.Call) and (self.call_name(node) or "") not in _DECISION_PASSING_CALLS:
                stack.append(node.func)
                continue
            stack.extend(ast.iter_child_nodes(node))

    def cuda_guarded(self, node: ast.AST) -> bool:
        """Whether ``node`` runs only after a check that CUDA (or an accelerator) is available.

        True inside ``if``/``elif``/``while`` branches, conditional expressions and ``assert`` s whose test asks,
        in a function that returned early when the check failed, and after ``if not torch.cuda.is_available():
        raise ...``/``return``.
        """
        child = node
        for above in self.ancestors(node):
            guard = isinstance(above, ast.If | ast.While | ast.IfExp) and child is not above.test
            if guard and self.mentions_availability(above.test):  # type: ignore[attr-defined]
                return True
            if isinstance(above, ast.BoolOp) and self.mentions_availability(above):
                return True
            body = getattr(above, "body", None)
            if isinstance(body, list) and child in body:
                for stmt in body[: body.index(child)]:
                    if self._guards_rest(stmt):
                        return True
            child = above
        return False

    def _guards_rest(self, stmt: ast.stmt) -> bool:
        """``assert torch.cuda.is_available()`` or ``if not ...is_available(): raise/return/sys.exit``."""
        if isinstance(stmt, ast.Assert):
            return self.mentions_availability(stmt.test)
        if isinstance(stmt, ast.If) and self.mentions_availability(stmt.test):
            last = stmt.body[-1] if stmt.body else None
            return isinstance(last, ast.Raise | ast.Return | ast.Continue | ast.Break) or (
                isinstance(last, ast.Expr) and self.call_name(last.value) in {"sys.exit", "exit", "quit"}
            )
        return False
