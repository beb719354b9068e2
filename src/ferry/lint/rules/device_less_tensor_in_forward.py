"""FRY005 device-less-tensor-in-forward.

## What it does
Finds tensors created on the CPU (``torch.zeros``, ``ones``, ``arange``, ``randn``, ``tensor``, ``eye``, ``full``,
``from_numpy``, ... without ``device=``) inside code that works on input tensors (a module's ``forward`` and what it
calls, a LightningModule's ``training_step``/``validation_step``/``test_step``/``predict_step``, whose batch
Lightning moves to the module's device, and functions taking tensors), when the file shows that the CPU tensor then
meets them; in any other method of a module class that runs after the model is built (``predict(self, seqs,
items)`` on NumPy inputs; not ``__init__``, what it calls, or initialisers), a CPU tensor handed to one of its layers
(``self.item_emb(torch.LongTensor(items))``, ``self.layers[i](x, attn_mask=mask)``) is reported as well, since the
layers are where the model is:

- it is combined with an input tensor (an argument of the function that is used as a tensor, a parameter or buffer
  of the module, a submodule's output) in arithmetic, a comparison, a ``torch`` function or a module call;
- the function takes an input tensor and returns the CPU tensor (its result stays on the CPU whatever the input);
- a helper builds it on the CPU and the caller then copies the result to the input's device on every call.

It also finds layers with parameters (``nn.Linear``, ``nn.Conv2d``, ``nn.BatchNorm2d``, ...) built and used inside
``forward``, and plain tensor attributes: ``self.scale = torch.ones(4)`` in ``__init__`` (not a buffer or parameter)
used in arithmetic or a ``torch`` function in another method. ``model.to(device)`` moves parameters and buffers, not
plain attributes, so on a GPU the tensor stays behind; ``self.register_buffer("scale", torch.ones(4))`` moves with
the module. Attributes used only as indices, zero-dimensional ones, and classes that override ``_apply``/``to`` are
left alone.

Not reported, to stay clear of correct code: factories with ``device=``; ``*_like`` and ``x.new_*`` (they follow
their input); 0-dim tensors such as ``torch.tensor(2.0)`` (they mix with any device); tensors of sizes
(``torch.tensor(x.shape)``) and tensors only ever combined with other CPU values (shape arithmetic); a tensor moved
where it is made (``torch.arange(n).to(x.device)``); CPU index tensors (``x[torch.arange(n)]`` works everywhere);
empty placeholders returned or handed to a function (``torch.empty([0])`` as an unused argument; an empty tensor kept
in a name and grown with ``torch.cat`` is reported);
code under ``with torch.device(...)``, in tracing branches (``if torch.jit.is_tracing():``), in files that call
``torch.set_default_device``; data preparation and export code (collators, datasets, transforms, processors,
``*onnx*``/``*export*`` functions, files under ``data/``), which makes CPU tensors on purpose.

## Why is this bad
A factory without ``device=`` always makes a CPU tensor. The model works on the CPU and fails on a GPU with
"Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!", or, where the
tensor is copied over, quietly pays a host-to-device copy on every forward pass. A layer built inside ``forward`` is
created on the CPU with fresh random weights at every call, is never registered, so ``.to(device)`` never moves it
and the optimizer never trains it.

## Example
```python
import torch
import torch.nn as nn


class Positions(nn.Module):
    def forward(self, x):
        steps = torch.arange(x.shape[1])  # FRY005
        return x + steps
```

## Use instead
```python
import torch
import torch.nn as nn


class Positions(nn.Module):
    def forward(self, x):
        steps = torch.arange(x.shape[1], device=x.device)
        return x + steps
```
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from ferry.lint.context import FileContext, dotted
from ferry.lint.memo import Memo
from ferry.lint.model import Edit, Finding, Fix, Rule
from ferry.lint.rules._attributes import unregistered
from ferry.lint.rules._placement import host_fed
from ferry.lint.rules._placement_values import new_memory
from ferry.lint.rules._tensors import (
    Places,
    binding,
    has_double_star,
    is_dtype,
    keyword,
    parameters,
    returned_values,
)
from ferry.lint.torch_api import (
    AVAILABILITY_CHECKS,
    COMBINING_METHODS,
    DATA_FACTORIES,
    FACTORIES,
    GPU_FLAGS,
    GRAD_MODES,
    LAYERS_WITH_PARAMETERS,
    LEGACY_HOST,
    MASK_FACTORIES,
    MODULE_SELF_METHODS,
    NOT_TENSOR_FUNCTIONS,
    NOT_TENSOR_SUBMODULES,
    NUMPY_FACTORIES,
    PASS_THROUGH,
    TENSOR_ATTRIBUTES,
    TENSOR_SUBMODULES,
)

#: Functions that make a new tensor on the CPU unless given ``device=`` (the legacy constructors always do), but
#: ``torch.Tensor``: it is mostly a conversion of data the caller passed, which this rule cannot tell from sizes
#: (see :func:`new_memory` for the calls it can tell).
CPU_FACTORIES = (
    MASK_FACTORIES
    | frozenset(f"torch.{name}" for name in FACTORIES | DATA_FACTORIES | NUMPY_FACTORIES)
    | (LEGACY_HOST - {"torch.Tensor"})  # `torch.sparse.FloatTensor(indices, values, size)` too
)

FACTORY_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in CPU_FACTORIES)

#: Factories whose first argument is the data (a 0-dim tensor when that is a number).
DATA_CALLS = frozenset(f"torch.{name}" for name in DATA_FACTORIES)

#: Attributes and methods only tensors have (not NumPy arrays, lists or numbers): using one tells a parameter is one.
TENSOR_ONLY = frozenset(
    """
    device is_cuda unsqueeze unsqueeze_ masked_fill masked_fill_ new_zeros new_ones new_full new_empty new_tensor
    permute detach type_as expand expand_as softmax log_softmax index_select masked_select bmm view_as
    repeat_interleave long numel element_size
    """.split()
)


#: Tensor methods that give Python numbers.
NUMBER_METHODS = frozenset({"item", "tolist", "size", "dim", "numel", "nelement", "stride", "element_size"})
#: Methods of a module class whose first argument is an input on the module's device: ``forward``, and the
#: LightningModule steps (Lightning moves each batch to the module's device before calling them).
_INPUT_METHODS = frozenset({"forward", "training_step", "validation_step", "test_step", "predict_step"})

#: Builtins and modules whose calls give Python numbers.
NUMBER_CALLS = frozenset({"len", "int", "float", "round", "abs", "max", "min", "sum", "bool", "pow", "divmod"})

#: torch functions that take tensors of another device on purpose.
MIXING_ALLOWED = frozenset({"torch.tensor_split", "torch.Size", "torch.broadcast_shapes"})

#: Calls whose truth means "we are tracing or exporting": shapes become tensors there on purpose.
TRACING_CHECKS = frozenset(
    {
        "torch.jit.is_tracing",
        "torch.jit.is_scripting",
        "torch.onnx.is_in_onnx_export",
        "torch._dynamo.is_compiling",
        "torch.compiler.is_compiling",
        "torch.fx._symbolic_trace.is_fx_tracing",
        "is_torchdynamo_compiling",
        "is_tracing",
    }
)

#: Words of a file's path that say "data preparation" (which makes CPU tensors on purpose, before the batch is
#: moved) or "export" (tracing for ONNX, usually on the CPU).
HOST_SIDE_WORDS = frozenset(
    """
    data datasets dataset transform transforms processing preprocessing preprocess collate collator collators
    tokenization tokenizer augment augmentation augmentations feature_extraction configuration onnx export
    """.split()
)

#: Endings of class names that say "data preparation".
#: Words of a function's name that say it prepares data on the host (a transform of a dataset's samples).
_DATA_WORDS = frozenset({"transform", "transforms", "collate", "preprocess", "augment", "augmentation"})

HOST_SIDE_CLASSES = (
    "Collator",
    "Dataset",
    "Transform",
    "Transforms",
    "Processor",
    "Tokenizer",
    "TokenizerFast",
    "FeatureExtractor",
    "Sampler",
    "DataModule",
    "Augmentation",
)

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Dev:
    """Where a value of a function lives.

    ``where``: ``"cpu"`` (made on the CPU by the factory calls ``origins``), ``"input"`` (on the device of the
    function's input tensors or of the module: ``via`` names one), ``"scalar"`` (a Python number, a shape or a 0-dim
    tensor: mixes with any device).
    """

    where: str
    origins: frozenset[ast.Call] = frozenset()
    via: str = ""
    #: A CPU tensor joined (``torch.cat``) with tensors of unknown place: on the CPU if the join runs at all, so
    #: it fails where it meets the device; returned as it is, it may be a join of CPU tensors the caller moves.
    joined: bool = False


SCALAR = Dev("scalar")


@dataclass(frozen=True)
class Meeting:
    """A CPU tensor made by ``origin`` meets a tensor on the input's device at ``site``."""

    origin: ast.Call
    site: ast.AST
    how: str  # "meets", "returned", "copied"
    device: str = ""  # a tensor on the right device, for the fix: `device=<device>.device`


class Flow:
    """Follows the CPU tensors of one file's functions to where they meet input tensors."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.meetings: dict[ast.Call, Meeting] = {}
        self._devs: Memo[ast.AST, Dev | None] = Memo(self._dev, None)
        self._inputs: dict[ast.AST, dict[str, str]] = {}
        self._host_aware: dict[ast.AST, bool] = {}
        self._model_parts: dict[ast.ClassDef, bool] = {}

    # -- facts about the file -----------------------------------------------------------------------------------

    @cached_property
    def host_side_file(self) -> bool:
        """Whether the file's path says data preparation or export (``data/``, ``image_processing_x.py``)."""
        parts = re.split(r"[\\/]", self.ctx.path.lower())
        stem = parts[-1].rsplit(".", 1)[0]
        words = {stem, *re.split(r"[^a-z0-9]+", stem)}
        if "feature_extraction" in stem:
            words.add("feature_extraction")
        if len(parts) > 1 and parts[-2] in ("data", "datasets", "transforms"):
            return True
        return bool(words & HOST_SIDE_WORDS)

    def host_side(self, node: ast.AST) -> bool:
        """Whether ``node`` is in code that makes CPU tensors on purpose.

        Data preparation and export (a collator, a dataset, ``export_onnx``), or a function that names the host
        itself (``device="cpu"``, ``.cpu()``, ``.pin_memory()``, ``.share_memory_()``): it knows where its tensors go.
        """
        for above in self.ctx.ancestors(node):
            if isinstance(above, ast.ClassDef) and self._host_side_class(above):
                return not self._part_of_a_model(above)
            if isinstance(above, FUNCTIONS) and (
                any(w in above.name.lower() for w in ("onnx", "export", "trac"))
                or self._names_host(above)
                or self._data_function(above)
            ):
                return True
        return False

    def _data_function(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A function of data preparation, by its name, that is not a method of a module class.

        ``_data_transforms_cifar10``, ``train_transform``, ``collate_batch``, ``preprocess``.
        """
        words = set(func.name.lower().strip("_").split("_"))
        if not words & _DATA_WORDS:
            return False
        cls = self.ctx.enclosing_class(func)
        return cls is None or not self.ctx.kinds.class_is_module(cls.name)

    def _host_side_class(self, cls: ast.ClassDef, depth: int = 0) -> bool:
        """Whether a class is named for data preparation, or derives from one (``class Tasks(Dataset):``)."""
        if cls.name.endswith(HOST_SIDE_CLASSES):
            return True
        for base in cls.bases:
            name = dotted(base) or ""
            if name.rsplit(".", 1)[-1].endswith(HOST_SIDE_CLASSES):
                return True
            local = self.ctx.kinds.classes.get(name)
            if local is not None and local is not cls and depth < 8 and self._host_side_class(local, depth + 1):
                return True
        return False

    def _part_of_a_model(self, cls: ast.ClassDef) -> bool:
        """Whether a module class named for data preparation is a layer of a module class of the file.

        ``self.transform = DetectionTransform(...)`` in a detector's ``__init__`` (torchvision's
        ``GeneralizedRCNNTransform``): it runs inside the model's forward, on the model's device.
        """
        if cls not in self._model_parts:
            self._model_parts[cls] = self.ctx.kinds.class_is_module(cls.name) and self._built_as_a_layer(cls)
        return self._model_parts[cls]

    def _built_as_a_layer(self, cls: ast.ClassDef) -> bool:
        for call in self.ctx.nodes(ast.Call):
            if self.ctx.qualname(call.func) != cls.name:
                continue
            assign = self.ctx.parent(call)
            owner = self.ctx.enclosing_class(call)
            if (
                isinstance(assign, ast.Assign)
                and any(isinstance(t, ast.Attribute) and dotted(t.value) == "self" for t in assign.targets)
                and owner is not None
                and owner is not cls
                and self.ctx.kinds.class_is_module(owner.name)
            ):
                return True
        return False

    def _names_host(self, func: ast.AST) -> bool:
        if func not in self._host_aware:
            # `torch.device("cuda") if features.is_cuda else torch.device("cpu")`: the input's device, spelled out
            follows = {
                inner
                for n in _walk_body(func)
                if isinstance(n, ast.IfExp)
                and any(isinstance(t, ast.Attribute) and t.attr in ("is_cuda", "device") for t in ast.walk(n.test))
                for inner in ast.walk(n)
            }
            self._host_aware[func] = any(
                (
                    isinstance(n, ast.Attribute)
                    and n.attr in ("cpu", "pin_memory", "share_memory_")
                    and not self._read_out(n)
                )
                or (isinstance(n, ast.Constant) and n.value == "cpu" and n not in follows)
                for n in _walk_body(func)
            )
        return self._host_aware[func]

    def _read_out(self, node: ast.Attribute) -> bool:
        """``out[0].cpu().data.numpy()``, ``x.cpu().tolist()``: a result copied out to be read, not a host tensor made.

        Tacotron's ``generate`` ends with ``mel_outputs[0].cpu().data.numpy()``: its factories are still meant for
        the model's device.
        """
        above = self.ctx.parent(node)
        for _ in range(6):
            if isinstance(above, ast.Attribute) and above.attr in ("numpy", "tolist", "item"):
                return True
            if not isinstance(above, ast.Call | ast.Attribute | ast.Subscript):
                return False
            above = self.ctx.parent(above)
        return False

    @cached_property
    def default_device_set(self) -> bool:
        """Whether the file changes where factories put tensors (then no factory is known to make CPU tensors)."""
        for call in self.ctx.nodes(ast.Call):
            name = self.ctx.call_name(call)
            if name in ("torch.set_default_device", "torch.set_default_tensor_type"):
                return True
        return False

    @cached_property
    def array_libraries(self) -> bool:
        """Whether the file imports NumPy or another array library (then ``p[:, 0]`` says nothing of ``p``)."""
        heads = {full.split(".")[0] for full in self.ctx.imports.values()}
        return bool(heads & {"numpy", "jax", "tensorflow", "cupy", "pandas", "mxnet", "paddle", "scipy", "dask"})

    @cached_property
    def appended(self) -> dict[tuple[ast.AST, str], list[ast.expr]]:
        """(scope, list name) -> the values its ``.append(...)`` calls add."""
        found: dict[tuple[ast.AST, str], list[ast.expr]] = defaultdict(list)
        for call in self.ctx.nodes(ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "append" and len(call.args) == 1:
                name = dotted(func.value)
                if name is not None:
                    found[(self.ctx.kinds.scope_of(call), name)].append(call.args[0])
        return found

    def inputs(self, func: ast.AST) -> dict[str, str]:
        """The parameters of ``func`` used as tensors: name -> how the file shows it."""
        if func in self._inputs:
            return self._inputs[func]
        found: dict[str, str] = {}
        self._inputs[func] = found
        if not isinstance(func, FUNCTIONS):
            return found
        for name, arg in parameters(func).items():
            if name in ("self", "cls"):
                continue
            if arg.annotation is not None:
                kind = self.ctx.kinds.lookup(name, func.body[0])  # the parameter, as the body starts
                if kind is not None and kind.is_tensor:
                    found[name] = "annotation"
                    continue
            how = self._evidence.get((func, name))
            if how is not None:
                found[name] = how
        found.update((name, "passed") for name in self._passed_tensors(func) if name not in found)
        if found and not self._in_module_method(func.body[0]) and _moves_a_parameter(func):
            # `batch_x = batch_x.float().to(self.device)` beside `batch_y = batch_y.float()` (Informer's
            # `_process_one_batch`): its author knows the inputs arrive on the host, and moves those it needs there
            found.clear()
            return found
        if not found and func.name in _INPUT_METHODS and self._in_module_method(func.body[0]):
            first = [a for a in [*func.args.posonlyargs, *func.args.args][1:2] if a.annotation is None]
            # `def forward(self, x)`: the module's input; `def training_step(self, batch, batch_idx)`: the batch,
            # which Lightning moves to the module's device before the call
            found.update((a.arg, func.name) for a in first)
        return found

    def _computed_from_inputs(self, name: ast.Name, inputs: dict[str, str]) -> bool:
        """Whether ``name`` holds what a method or layer of the module returns for an input (``h = self.enc(x)``)."""
        bound = binding(self.ctx, name.id, name)
        if bound is None:
            return False
        source = bound.source
        if source[0] == "project" and isinstance(source[1], tuple):
            source = source[1]
        value = source[1] if source[0] == "expr" else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and _self_chain(value.func)):
            return False
        return any(isinstance(a, ast.Name) and a.id in inputs for a in value.args)

    def _passed_tensors(self, func: ast.AST) -> list[str]:
        """Parameters of a module's method that its own methods call it with tensors: ``self.reparameterize(mu, lv)``.

        A tensor here is an input of the calling method or the output of one of the module's layers.
        """
        cls = self.ctx.enclosing_class(func)
        if not isinstance(func, FUNCTIONS):
            return []
        if cls is None and func in self.ctx.tree.body:
            return self._passed_by_modules(func)
        if cls is None or func not in cls.body:
            return []
        if not self.ctx.kinds.class_is_module(cls.name):
            return []
        params = [a.arg for a in func.args.args[1:]]
        passed: set[str] = set()
        for call in ast.walk(cls):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and _self_chain(call.func)):
                continue
            if _called_name(call) != func.name:
                continue
            caller = self.ctx.enclosing_function(call)
            if caller is None or caller is func:
                continue
            given = self.inputs(caller)
            for index, arg in enumerate(call.args[: len(params)]):
                layer = isinstance(arg, ast.Call) and _submodule(arg.func)
                if layer or (isinstance(arg, ast.Name) and arg.id in given):
                    passed.add(params[index])
                elif given and isinstance(arg, ast.Name) and self._computed_from_inputs(arg, given):
                    passed.add(params[index])  # `mu, logvar = self.encode(x)`: what the module computes from x
                elif given and isinstance(arg, ast.Name) and self._item_of_inputs(arg, call, given):
                    passed.add(params[index])  # `[self.normalize(img) for img in images]`: each input image
        return sorted(passed)

    def _passed_by_modules(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
        """Parameters of a function of the file that a module's method calls with one of that method's inputs.

        DDIM's ``get_timestep_embedding(t, self.ch)`` in ``Model.forward``.
        """
        params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
        passed: set[str] = set()
        for call in self.ctx.nodes(ast.Call):
            if not (isinstance(call.func, ast.Name) and call.func.id == func.name):
                continue
            caller = self.ctx.enclosing_function(call)
            if caller is None or caller is func or not self._in_module_method(call):
                continue
            given = set(self.inputs(caller)) | _forward_parameters(caller)
            for index, arg in enumerate(call.args[: len(params)]):
                if isinstance(arg, ast.Name) and arg.id in given:
                    passed.add(params[index])
        return sorted(passed)

    def _item_of_inputs(self, name: ast.Name, call: ast.Call, inputs: dict[str, str]) -> bool:
        """Whether ``name`` at ``call`` is an item of an input: ``for img in images`` (a loop or a comprehension)."""
        loops: list[ast.For | ast.comprehension] = []
        for above in self.ctx.ancestors(call):
            if isinstance(above, ast.For | ast.AsyncFor):
                loops.append(above)  # type: ignore[arg-type]
            elif isinstance(above, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
                loops.extend(above.generators)
            elif isinstance(above, FUNCTIONS):
                break
        for loop in loops:
            iterated = loop.iter
            if isinstance(iterated, ast.Call) and self.ctx.call_name(iterated) in ("enumerate", "zip"):
                continue  # the target is a tuple there
            if isinstance(loop.target, ast.Name) and loop.target.id == name.id:
                return isinstance(iterated, ast.Name) and iterated.id in inputs
        return False

    @cached_property
    def _evidence(self) -> dict[tuple[ast.AST, str], str]:
        """(function, parameter) -> the use that shows the parameter is a tensor, from one pass over the file.

        ``p.unsqueeze(...)``, ``p.device``, ``(p != 0).detach()`` (methods only tensors have); ``torch.cat([p, q])``,
        ``F.relu(p)``, ``self.conv(p)`` (it is passed first to a ``torch`` function or a module); ``p[:, 0]`` in a file
        that imports no array library.
        """
        ctx = self.ctx
        found: dict[tuple[ast.AST, str], str] = {}

        def note(root: ast.Name | None, how: str, call: ast.Call | None = None) -> None:
            if root is None:
                return
            scope = ctx.kinds.scope_of(root)
            if root.id not in parameters(scope) or (scope, root.id) in found:
                return
            if call is None or self._takes_tensors(call):
                found[(scope, root.id)] = how

        for attribute in ctx.nodes(ast.Attribute):
            if attribute.attr in TENSOR_ONLY:
                note(_root_name(attribute.value), attribute.attr)
            elif attribute.attr == "size" and isinstance(parent := ctx.parent(attribute), ast.Call):
                if parent.func is attribute:
                    note(_root_name(attribute.value), "size()")
            elif (
                attribute.attr in ("shape", "dtype", "ndim")
                and isinstance(attribute.value, ast.Name)
                and self._in_module_method(attribute)
            ):
                note(attribute.value, attribute.attr)
        for call in ctx.nodes(ast.Call):
            if call.args:
                first = call.args[0]
                if isinstance(first, ast.List | ast.Tuple) and first.elts:
                    first = first.elts[0]
                note(_tensor_operand(first), "call", call)
        if not self.array_libraries:
            for subscript in ctx.nodes(ast.Subscript):
                if isinstance(subscript.value, ast.Name) and _array_index(subscript.slice):
                    note(subscript.value, "index")
        for call in ctx.nodes(ast.Call):  # `math.log(w_m)`, `range(depth)`: a Python number after all
            name = ctx.call_name(call) or ""
            if name.startswith("math.") or name == "range":
                for arg in call.args:
                    if isinstance(arg, ast.Name):
                        found.pop((ctx.kinds.scope_of(arg), arg.id), None)
        return found

    def _in_module_method(self, node: ast.AST) -> bool:
        """Whether ``node`` is in a method of an ``nn.Module`` subclass (whose arguments are mostly tensors)."""
        func = self.ctx.enclosing_function(node)
        if func is None:
            return False
        cls = self.ctx.parent(func)
        return isinstance(cls, ast.ClassDef) and self.ctx.kinds.class_is_module(cls.name)

    def _takes_tensors(self, call: ast.Call) -> bool:
        """Whether ``call`` wants a tensor first: a ``torch`` function or a module."""
        name = self.ctx.call_name(call)
        if name is not None and name not in CPU_FACTORIES and _tensor_function(name):
            return True
        kind = self.ctx.kind(call.func)
        return kind is not None and kind.is_module

    # -- factories --------------------------------------------------------------------------------------------

    def cpu_factory(self, call: ast.Call) -> bool | None:
        """``True``: ``call`` makes a CPU tensor of one or more dimensions; ``False``: a 0-dim one; ``None``: not."""
        name = self.ctx.call_name(call)
        if name == "torch.Tensor" and new_memory(call):
            name = "torch.FloatTensor"  # `torch.Tensor(batch_size, k)`: new memory of that size, on the CPU
        if name not in CPU_FACTORIES or self.default_device_set:
            return None
        if keyword(call, "device") is not None or keyword(call, "out") is not None or has_double_star(call):
            return None
        if keyword(call, "pin_memory") is not None:
            return None  # pinned: meant to stay on the host
        if name in DATA_CALLS or name == "torch.from_numpy":
            data = call.args[0] if call.args else keyword(call, "data")
            func = self.ctx.enclosing_function(call)
            if data is None:
                return None
            kept = self._literal_attribute(data)
            kind = self.ctx.kind(data)
            array = kind is not None and kind.name == "ndarray"  # `self.pe_table[:n]`, a NumPy table it keeps
            root = _root(data)
            passed = func is not None and root is not None and root in parameters(func) and not kept and not array
            if passed and (name != "torch.from_numpy" or root != "self"):
                # a conversion of what the caller passed: `torch.as_tensor(x)` keeps a tensor's device; but
                # `torch.from_numpy(self.pe_table[:n])` of an array the module keeps is on the CPU
                return None
            literal = isinstance(data, ast.List | ast.Tuple | ast.ListComp) or kept or array
            if name != "torch.from_numpy" and not literal:
                return False if self.dev(data) == SCALAR else None
        if name in ("torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn", "torch.full"):
            size = call.args[0] if call.args else keyword(call, "size")
            if isinstance(size, ast.Tuple | ast.List) and not size.elts:
                return False
            empty = _zero(size) or (isinstance(size, ast.Tuple | ast.List) and any(_zero(e) for e in size.elts))
            if empty and self._placeholder_argument(call):
                return None  # `F.multi_head_attention_forward(..., torch.empty([0]), ...)`: an unused placeholder
        if self._special_context(call):
            return None
        return True

    def _literal_attribute(self, data: ast.expr) -> bool:
        """Whether ``data`` is ``self.x`` kept by ``__init__`` from a parameter that every call fills with numbers.

        ``DetectionTransform([0.485, 0.456, 0.406], ...)`` keeps ``self.image_mean = image_mean``: a
        ``torch.as_tensor(self.image_mean)`` in its methods is made from a list on the CPU, like a literal.
        """
        if not (isinstance(data, ast.Attribute) and dotted(data.value) == "self"):
            return False
        cls = self.ctx.enclosing_class(data)
        init = next((f for f in cls.body if isinstance(f, FUNCTIONS) and f.name == "__init__"), None) if cls else None
        if cls is None or init is None:
            return False
        stores = [
            n
            for n in ast.walk(cls)
            if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign)
            and any(isinstance(t, ast.Attribute) and t.attr == data.attr for t in _targets(n))
        ]
        if len(stores) != 1 or not isinstance(stores[0], ast.Assign) or not isinstance(stores[0].value, ast.Name):
            return False
        positional = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        param = stores[0].value.id
        if param not in positional and param not in [a.arg for a in init.args.kwonlyargs]:
            return False
        names = {full for full, c in self.ctx.kinds.classes.items() if c is cls}
        calls = [c for c in self.ctx.nodes(ast.Call) if self.ctx.qualname(c.func) in names]
        for call in calls:
            passed = next((k.value for k in call.keywords if k.arg == param), None)
            if passed is None and param in positional and positional.index(param) < len(call.args):
                passed = call.args[positional.index(param)]
            if any(isinstance(a, ast.Starred) for a in call.args) or has_double_star(call):
                return False
            if not _numbers_literal(passed):
                return False
        return bool(calls)

    def _placeholder_argument(self, call: ast.Call) -> bool:
        """Whether ``call`` is returned, or written as an argument of a call that does not combine it (``torch.cat``).

        An empty tensor kept in a name is an accumulator (``tokens = torch.zeros([0])``, then ``torch.cat``).
        """
        parent = self.ctx.parent(call)
        if isinstance(parent, ast.Return):
            return True  # `if n == 0: return torch.zeros(0, d)`: an empty result
        if isinstance(parent, ast.keyword):
            parent = self.ctx.parent(parent)
        if isinstance(parent, ast.Tuple | ast.List):
            parent = self.ctx.parent(parent)
        if not isinstance(parent, ast.Call) or call is parent.func:
            return False
        return self.ctx.call_name(parent) not in ("torch.cat", "torch.concat", "torch.concatenate", "torch.stack")

    def _special_context(self, node: ast.AST) -> bool:
        """Under ``with torch.device(...)`` or in a branch taken only when tracing or exporting."""
        child = node
        for above in self.ctx.ancestors(node):
            if isinstance(above, ast.With | ast.AsyncWith):
                for item in above.items:
                    if self.ctx.call_name(item.context_expr) in ("torch.device",):
                        return True
            if isinstance(above, ast.If | ast.IfExp) and child is not above.test:
                for sub in ast.walk(above.test):
                    name = self.ctx.call_name(sub)
                    if name is not None and (name in TRACING_CHECKS or name.rsplit(".", 1)[-1] in TRACING_CHECKS):
                        return True
            if isinstance(above, FUNCTIONS):
                return False
            child = above
        return False

    # -- where values live ------------------------------------------------------------------------------------

    def dev(self, node: ast.AST) -> Dev | None:
        """Where ``node`` lives; ``None``: not known."""
        return self._devs(node)

    def _dev(self, node: ast.AST) -> Dev | None:
        if isinstance(node, ast.Constant):
            return SCALAR if isinstance(node.value, int | float | bool) else None
        if isinstance(node, ast.Name | ast.Attribute):
            return self._dev_name(node)
        if isinstance(node, ast.Subscript):
            return self.dev(node.value)
        if isinstance(node, ast.BinOp):
            return self._combine(node, [node.left, node.right])
        if isinstance(node, ast.Compare):
            if all(isinstance(op, ast.Eq | ast.NotEq | ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops):
                return self._combine(node, [node.left, *node.comparators])
            return None
        if isinstance(node, ast.UnaryOp):
            return None if isinstance(node.op, ast.Not) else self.dev(node.operand)
        if isinstance(node, ast.IfExp):
            body, orelse = self.dev(node.body), self.dev(node.orelse)
            if body is not None and orelse is not None and body.where == orelse.where:
                return Dev(body.where, body.origins | orelse.origins, body.via)
            cpu = [d for d in (body, orelse) if d is not None and d.where == "cpu"]
            if cpu:  # `m[:, :, t - 1] if t > 0 else go_frame`: one branch gives the CPU tensor to what follows
                return cpu[0]
            return None
        if isinstance(node, ast.List | ast.Tuple):
            return self._gather([self.dev(e) for e in node.elts])
        if isinstance(node, ast.Call):
            return self._dev_call(node)
        return None

    def _dev_name(self, node: ast.Name | ast.Attribute) -> Dev | None:
        ctx = self.ctx
        name = dotted(node)
        if name is not None and name.split(".")[0] in ctx.imports:
            full = ctx.qualname(node) or ""
            return SCALAR if is_dtype(ctx, node) or full.startswith(("math.", "numpy.pi", "numpy.e")) else None
        bound = binding(ctx, name, node) if name is not None else None
        if bound is not None and name is not None:
            if bound.parameter is not None:
                if bound.parameter.arg in self.inputs(bound.scope):
                    return Dev("input", via=bound.parameter.arg)
                return None
            source = bound.source
            if source[0] == "expr":
                value = source[1]
                if isinstance(value, ast.List) and not value.elts:
                    return self._gather([self.dev(v) for v in self.appended.get((bound.scope, name), [])])
                other = self._other_branch(name, value, node)
                if other is not None:
                    found = self.dev(other)
                    if found is not None and found.where == "cpu":
                        return found  # `if self.individual: out = torch.zeros(...)` / `else: out = self.linear(x)`
                return self.dev(value)
            if source[0] in ("project", "iter") and _counter(ctx, source):
                return SCALAR
            if source[0] == "project" and source[1][0] == "expr":
                value, index = source[1][1], source[2]
                if isinstance(value, ast.Tuple | ast.List) and 0 <= index < len(value.elts):
                    item = value.elts[index]
                    if isinstance(item, ast.List) and not item.elts:  # `mel_outputs, attn_scores = [], []`
                        return self._gather([self.dev(v) for v in self.appended.get((bound.scope, name), [])])
                return self._item(value, index)
            return None
        if isinstance(node, ast.Attribute):
            if node.attr in ("shape", "ndim"):
                return SCALAR
            if name is not None and name.startswith("self.") and name.count(".") == 1:
                return self._dev_self_attribute(node, name)
            owner = self.dev(node.value)
            if owner is not None and owner.where != "scalar" and node.attr in TENSOR_ATTRIBUTES:
                return owner
        return None

    def _other_branch(self, name: str, value: ast.AST, use: ast.AST) -> ast.expr | None:
        """The value the other branch of an ``if``/``else`` gives ``name``, where both bind it and ``use`` follows.

        The latest binding before ``use`` is the ``else:`` one; the ``if`` branch's binding reaches ``use`` as well.
        """
        assign = self.ctx.parent(value)
        if not isinstance(assign, ast.Assign) or not any(dotted(t) == name for t in assign.targets):
            return None
        branch = self.ctx.parent(assign)
        if not isinstance(branch, ast.If) or assign not in branch.orelse or use in set(ast.walk(branch)):
            return None
        for stmt in reversed(branch.body):
            if isinstance(stmt, ast.Assign) and any(dotted(t) == name for t in stmt.targets):
                return stmt.value
        return None

    def _item(self, value: ast.AST, index: int) -> Dev | None:
        """``a, b = value``: item ``index`` of a literal; the parts of a tensor op's result live where it does."""
        if isinstance(value, ast.Tuple | ast.List):
            items = value.elts
            if 0 <= index < len(items) and not isinstance(items[index], ast.Starred):
                return self.dev(items[index])
            return None
        return self.dev(value)  # `yy, xx = torch.meshgrid(...)`, `q, k = x.chunk(2)`, `b, c = x.shape`

    def _dev_self_attribute(self, node: ast.Attribute, name: str) -> Dev | None:
        """``self.x``: parameters and buffers are on the module's device; numbers set in ``__init__`` are numbers."""
        cls = self.ctx.enclosing_class(node)
        if cls is None or not self.ctx.kinds.class_is_module(cls.name):
            return None
        sources = self.ctx.kinds.self_attributes.get(cls.name, {}).get(name, [])
        if not sources:
            return None
        if all(s[0] == "kind" or (s[0] == "expr" and _is_parameter(self.ctx, s[1])) for s in sources):
            return Dev("input", via=name)
        if all(s[0] == "expr" and _is_number(self.ctx, s[1]) for s in sources):
            return SCALAR
        made = [s[1] for s in sources if s[0] == "expr" and not _none(s[1])]
        if made and len(made) == len(sources) - sum(s[0] == "expr" and _none(s[1]) for s in sources):
            # `self.cumulative = torch.zeros(b, t)` in `init_attention`, read in `forward`: a state the module
            # resets in a method after it is built, with CPU factories only (and `None` in `__init__`)
            calls = [v for v in made if isinstance(v, ast.Call) and self._method_state(v)]
            if len(calls) == len(made):
                return Dev("cpu", frozenset(calls))
        return self._reset_before(node, name, cls)

    def _reset_before(self, node: ast.Attribute, name: str, cls: ast.ClassDef) -> Dev | None:
        """``self.x`` read after a call of the module's method that binds it to CPU factories only, in this function.

        Tacotron's attention: ``if t == 0: self.init_attention(x)`` (``self.cumulative = torch.zeros(b, t)``), then
        ``torch.cat([self.cumulative.unsqueeze(1), ...])``: what the read sees on the first step is the CPU tensor,
        whatever later steps bind.
        """
        func = self.ctx.enclosing_function(node)
        if func is None:
            return None
        methods = {m.name: m for m in cls.body if isinstance(m, FUNCTIONS)}
        at = _position(node)
        latest: tuple[tuple[int, int], Dev] | None = None
        for stmt in _walk_body(func):
            if _position(stmt) >= at:
                continue
            if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign) and any(
                dotted(t) == name for t in _targets(stmt)
            ):
                latest = None if latest is None or _position(stmt) > latest[0] else latest
                continue
            called = stmt.func if isinstance(stmt, ast.Call) else None
            if not isinstance(called, ast.Attribute) or dotted(called.value) != "self" or called.attr not in methods:
                continue
            method = methods[called.attr]
            bound = [
                n.value
                for n in _walk_body(method)
                if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign)
                and any(dotted(t) == name for t in _targets(n))
                and n.value is not None
            ]
            made = bound and all(isinstance(v, ast.Call) and self._method_state(v) for v in bound)
            if made and (latest is None or _position(stmt) > latest[0]):
                latest = (_position(stmt), Dev("cpu", frozenset(v for v in bound if isinstance(v, ast.Call))))
        return latest[1] if latest is not None else None

    def _method_state(self, call: ast.Call) -> bool:
        """A CPU factory that a module's method other than ``__init__`` (or what it calls) binds to ``self.<x>``."""
        func = self.ctx.enclosing_function(call)
        if func is None or func.name == "__init__" or not self.cpu_factory(call):
            return False
        return self._runs_on_the_module(func)

    def _dev_call(self, node: ast.Call) -> Dev | None:
        ctx = self.ctx
        factory = self.cpu_factory(node)
        if factory is not None:
            return Dev("cpu", frozenset({node})) if factory else SCALAR
        func = node.func
        full = ctx.call_name(node)
        if full in NUMBER_CALLS or (full is not None and full.startswith("math.")):
            return SCALAR
        if full in PASS_THROUGH and node.args:
            return self.dev(node.args[0])  # `Variable(torch.from_numpy(...))`: the tensor itself
        if full is not None and full.startswith("torch."):
            if full in CPU_FACTORIES:
                return self._moved_factory(node)
            if not _tensor_function(full) or full in MIXING_ALLOWED:
                return None
            return self._combine(node, self._tensor_arguments(node))
        if isinstance(func, ast.Subscript) and _submodule(func.value):
            held = ctx.kind(func.value)  # `self.layers[i](x)`: a layer of a ModuleList/ModuleDict of the module
            if held is not None and held.is_module:
                self._module_call(node)
                return Dev("input")
        itself = (isinstance(func, ast.Name) and func.id == "self") or (
            isinstance(func, ast.Attribute) and func.attr == "forward" and dotted(func.value) == "self"
        )
        if itself and self._in_module_method(node):  # `self(ids)` in the module's `generate`: its own forward
            self._module_call(node)
            return Dev("input")
        callee = ctx.kind(func)
        if callee is not None and callee.is_module:
            if not _submodule(func):
                return None  # a module of unknown place
            self._module_call(node)
            return Dev("input")  # a submodule's output
        if isinstance(func, ast.Attribute):
            helper = Places.function_called(ctx, node)
            if helper is not None:
                fed = self._fed_to_layers(node, helper) if _submodule(func) else []
                if fed:  # `self.forward_step(cpu_tensor, ...)`
                    self._module_call(node, fed)
                return self._helper(node, helper)
            kind = ctx.kind(func.value)
            if kind is not None and kind.is_module:
                if _self_chain(func) and func.attr not in MODULE_METHODS:  # `self.transformer.wte(idx)`
                    self._module_call(node)
                    return Dev("input")  # a submodule's output
                return None  # `self.block.method(...)`: not followed
            method = func.attr
            if method in ("to", "cuda", "type_as", "cpu"):
                return self._move(node)
            if method in NUMBER_METHODS:
                return SCALAR
            receiver = self.dev(func.value)
            if receiver is None or receiver.where == "scalar":
                return None
            if method in COMBINING_METHODS:
                return self._combine(node, [func.value, *node.args])
            return receiver
        helper = Places.function_called(ctx, node)
        if helper is not None:
            return self._helper(node, helper)
        return None

    def _moved_factory(self, node: ast.Call) -> Dev | None:
        """A factory given a device: on the input's device when that is ``x.device`` of an input ``x``."""
        device = keyword(node, "device")
        if isinstance(device, ast.Name):  # `device = feature.device` a line above
            bound = binding(self.ctx, device.id, device)
            if bound is not None and bound.parameter is None and bound.source[0] == "expr":
                device = bound.source[1]
        if isinstance(device, ast.Attribute) and device.attr == "device":
            owner = self.dev(device.value)
            if owner is not None and owner.where == "input":
                return owner
        return None

    def _tensor_arguments(self, call: ast.Call) -> list[ast.AST]:
        values: list[ast.AST] = []
        for arg in call.args:
            if isinstance(arg, ast.List | ast.Tuple):
                values.extend(e.value if isinstance(e, ast.Starred) else e for e in arg.elts)
            else:
                values.append(arg.value if isinstance(arg, ast.Starred) else arg)
        for kw in call.keywords:
            if kw.arg in ("input", "other", "weight", "bias", "mask", "tensors", "target"):
                values.append(kw.value)
        return values

    def _combine(self, site: ast.AST, operands: list[ast.AST]) -> Dev | None:
        """Where the result of combining ``operands`` lives; a CPU tensor meeting an input one is recorded."""
        devs = [self.dev(op) for op in operands]
        cpu = [d for d in devs if d is not None and d.where == "cpu"]
        inputs = [d for d in devs if d is not None and d.where == "input"]
        if cpu and inputs:
            via = next((d.via for d in inputs if d.via), "")
            for origin in sorted({o for d in cpu for o in d.origins}, key=_position):
                self.meetings.setdefault(origin, Meeting(origin, site, "meets", via))
            return inputs[0]
        if inputs:
            return inputs[0]
        joined = isinstance(site, ast.Call) and self.ctx.call_name(site) in _JOINS
        if cpu and (isinstance(site, ast.BinOp) or joined):
            # `torch.arange(0, channels, 2).float() / channels` with `channels` not known: a number leaves a CPU
            # tensor, and a tensor of another device would fail right here; either way it is a CPU tensor after
            unknown = (joined and any(d is None for d in devs)) or any(d.joined for d in cpu)
            return Dev("cpu", frozenset(o for d in cpu for o in d.origins), joined=unknown)
        if any(d is None for d in devs):
            return None
        if cpu:
            return Dev("cpu", frozenset(o for d in cpu for o in d.origins), joined=any(d.joined for d in cpu))
        return SCALAR

    @staticmethod
    def _gather(devs: list[Dev | None]) -> Dev | None:
        """A list or tuple of values: where all of them live, when they agree."""
        if not devs or any(d is None for d in devs):
            return None
        known = [d for d in devs if d is not None]
        places = {d.where for d in known}
        if places == {"cpu"} or places == {"cpu", "scalar"}:
            return Dev("cpu", frozenset(o for d in known for o in d.origins), joined=any(d.joined for d in known))
        if places == {"scalar"}:
            return SCALAR
        if places == {"input"}:
            return known[0]
        return None

    def _module_call(self, node: ast.Call, args: list[ast.expr] | None = None) -> None:
        """``self.embed(torch.arange(n))``: a CPU tensor fed to a submodule, which lives on the input's device.

        ``args``: the arguments that reach the submodule (default: all of them).
        """
        func = self.ctx.enclosing_function(node)
        if func is None or not (self.inputs(func) or self._runs_on_the_module(func)):
            return
        if args is None:  # `self.enc(x, mask=mask)`: keyword arguments reach the submodule too
            args = [*node.args, *(k.value for k in node.keywords if k.arg is not None)]
        # `self.lstm(x, (h0, c0))`: each item of a tuple or list argument reaches the submodule, also of one held in
        # a name (`hidden_states = (attn_hidden, rnn1_hidden)`, then `self.decoder(x, hidden_states)`)
        items = [e for arg in args for e in self._written_items(arg)]
        for arg in items:
            found = self.dev(arg)
            if found is not None and found.where == "cpu":
                inputs = sorted(self.inputs(func))
                device = inputs[0] if len(inputs) == 1 else ""
                for origin in sorted(found.origins, key=_position):
                    self.meetings.setdefault(origin, Meeting(origin, node, "meets", device))

    def _written_items(self, arg: ast.expr) -> list[ast.expr]:
        """The items of a tuple or list written at the call or bound to the name ``arg`` just before; else ``arg``."""
        if isinstance(arg, ast.Tuple | ast.List):
            return list(arg.elts)
        if isinstance(arg, ast.Name):
            bound = binding(self.ctx, arg.id, arg)
            if bound is not None and bound.parameter is None and bound.source[0] == "expr":
                value = bound.source[1]
                if isinstance(value, ast.Tuple | ast.List) and value.elts:
                    return [e for e in value.elts if not isinstance(e, ast.Starred)]
        return [arg]

    def _runs_on_the_module(self, func: ast.AST) -> bool:
        """Whether ``func`` is a method of a module class of the file that runs after the model is built.

        ``def predict(self, log_seqs, item_indices)`` whose inputs are NumPy arrays: its layers are where the model
        is, so a CPU tensor handed to them fails on an accelerator as in ``forward``. Not ``__init__``, methods it
        calls (they run before any move) or initialisers (``reset_parameters``, ``_init_weights``).
        """
        if not isinstance(func, FUNCTIONS):
            return False
        for decorator in func.decorator_list:  # `@torch.no_grad()` on a generation method changes no placement
            if self.ctx.qualname(decorator.func if isinstance(decorator, ast.Call) else decorator) not in GRAD_MODES:
                return False
        cls = self.ctx.enclosing_class(func)
        if cls is None or func not in cls.body or not self.ctx.kinds.class_is_module(cls.name):
            return False
        if func.name.startswith("__"):
            return False
        if ("init" in func.name.lower() or func.name.startswith("reset")) and not _called_by_forward(cls, func):
            return False  # an initialiser; `init_attention(x)` called by `forward` at each sequence runs after the move
        init = next((m for m in cls.body if isinstance(m, FUNCTIONS) and m.name == "__init__"), None)
        return init is None or not any(
            isinstance(n, ast.Attribute) and n.attr == func.name and dotted(n.value) == "self" for n in ast.walk(init)
        )

    def _fed_to_layers(self, node: ast.Call, method: ast.AST) -> list[ast.expr]:
        """The arguments of ``node`` (a call of the method ``self.<name>(...)``) that it hands to a submodule.

        ``def forward_step(self, input, ...): self.embedding(input)``: calling it with a CPU tensor is calling the
        embedding with it.
        """
        if not isinstance(method, ast.FunctionDef) or not method.args.args:
            return []
        params = [a.arg for a in method.args.args[1:]]
        fed: set[str] = set()
        for call in ast.walk(method):
            if isinstance(call, ast.Call) and _submodule(call.func):
                kind = self.ctx.kind(call.func)
                if kind is not None and kind.is_module:
                    fed.update(a.id for a in call.args if isinstance(a, ast.Name))
        return [arg for i, arg in enumerate(node.args) if i < len(params) and params[i] in fed]

    def _move(self, node: ast.Call) -> Dev | None:
        """``t.to(...)``, ``.cuda()``, ``.type_as(x)``: moved (a dtype-only ``.to`` keeps the place).

        A CPU tensor that a helper built from the input's sizes and that is copied here is recorded.
        """
        func = node.func
        assert isinstance(func, ast.Attribute)
        receiver = self.dev(func.value)
        if func.attr == "to" and keyword(node, "device") is None and all(is_dtype(self.ctx, a) for a in node.args):
            return receiver
        if func.attr == "cpu":
            return None
        target = node.args[0] if node.args else keyword(node, "device")
        # `.to(features.device)`, `.type_as(x)`, `.to(device)` with `device` chosen by `x.is_cuda`: the input's device
        follows = self._input_device(target) if func.attr in ("to", "type_as") and target is not None else None
        here = self.ctx.enclosing_function(node)
        if here is not None and _initialisation(here.name):
            return None  # `_init_weights`: built once on the CPU and copied into the parameter, not at every call
        if receiver is not None and receiver.where == "cpu" and here is not None and self._sized_by_input(func.value):
            for origin in sorted(receiver.origins, key=_position):
                if self.ctx.enclosing_function(origin) is not here and not self._numpy_data(origin):
                    self.meetings.setdefault(origin, Meeting(origin, node, "copied"))
        return follows

    def _numpy_data(self, origin: ast.AST) -> bool:
        """``torch.from_numpy(np.random.binomial(...))``: NumPy data, which only a copy gets onto a device.

        TS2Vec's ``generate_binomial_mask`` returns it and the caller moves it: creating it there is no option.
        """
        if not isinstance(origin, ast.Call):
            return False
        full = self.ctx.call_name(origin)
        if full == "torch.from_numpy":
            return True
        data = origin.args[0] if origin.args else None
        if full not in DATA_CALLS or data is None:
            return False
        kind = self.ctx.kind(data)
        made = self.ctx.call_name(data) if isinstance(data, ast.Call) else None
        return (kind is not None and kind.name == "ndarray") or (made or "").startswith("numpy.")

    def _input_device(self, target: ast.expr, depth: int = 0) -> Dev | None:
        """The input whose device a move's target names.

        ``x.device``, ``x`` itself (``.to(x)``, ``.type_as(x)``), or a name bound to one of those or to
        ``torch.device("cuda") if x.is_cuda else torch.device("cpu")``.
        """
        if depth > 3:
            return None
        if isinstance(target, ast.Name):
            bound = binding(self.ctx, target.id, target)
            if bound is not None and bound.parameter is None and bound.source[0] == "expr":
                value = bound.source[1]
                if isinstance(value, ast.expr):
                    return self._input_device(value, depth + 1)
        if isinstance(target, ast.Attribute) and target.attr == "device":
            owner = self.dev(target.value)
            return owner if owner is not None and owner.where == "input" else None
        if isinstance(target, ast.IfExp):
            test = target.test
            if isinstance(test, ast.Attribute) and test.attr == "is_cuda":
                owner = self.dev(test.value)
                return owner if owner is not None and owner.where == "input" else None
            return None
        if isinstance(target, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
            owner = self.dev(target)
            return owner if owner is not None and owner.where == "input" else None
        return None

    def _sized_by_input(self, value: ast.AST) -> bool:
        """Whether ``value`` is a call of a helper of this file given something of an input (``h.shape[0]``)."""
        if isinstance(value, ast.Name):
            bound = binding(self.ctx, value.id, value)
            value = bound.value if bound is not None and bound.value is not None else value
        if not isinstance(value, ast.Call) or Places.function_called(self.ctx, value) is None:
            return False
        here = self.ctx.enclosing_function(value)
        inputs = self.inputs(here) if here is not None else {}
        arguments = [*value.args, *(kw.value for kw in value.keywords)]
        return any(_root(arg) in inputs for arg in arguments)

    def _helper(self, node: ast.Call, helper: Function) -> Dev | None:
        """A call of a function of this file: a CPU tensor it returns stays one (anything else is not followed)."""
        values = returned_values(helper)
        devs = [self.dev(v) for v in values]
        if values and all(d is not None and d.where == "cpu" for d in devs):
            return Dev("cpu", frozenset(o for d in devs if d is not None for o in d.origins))
        return None

    # -- the findings -----------------------------------------------------------------------------------------

    def run(self) -> None:
        """Evaluate every function that makes CPU tensors, and every function that calls one."""
        ctx = self.ctx
        if self.host_side_file:
            return
        makers: set[ast.AST] = set()
        for call in ctx.nodes(ast.Call):
            if _called_name(call) in FACTORY_NAMES | {"Tensor"} and self.cpu_factory(call):
                maker = ctx.enclosing_function(call)
                if maker is not None:
                    makers.add(maker)
        if not makers:
            return
        names = {f.name for f in makers if isinstance(f, FUNCTIONS)}
        todo = set(makers)
        for call in ctx.nodes(ast.Call):
            if _called_name(call) in names and Places.function_called(ctx, call) in makers:
                caller = ctx.enclosing_function(call)
                if caller is not None:
                    todo.add(caller)
        for func in sorted(todo, key=_position):
            for node in _walk_body(func):
                if isinstance(node, ast.BinOp | ast.Compare | ast.Call):
                    self.dev(node)
                elif isinstance(node, ast.Return) and node.value is not None:
                    self._returned(func, node.value)

    def _returned(self, func: ast.AST, value: ast.expr) -> None:
        """``return`` of a CPU tensor made here, from a function that takes an input tensor."""
        if not self.inputs(func):
            return
        items = value.elts if isinstance(value, ast.Tuple) else [value]
        if not self._in_module_method(value) and any(self._raw_input(func, item) for item in items):
            return  # `return b[0], b[1], torch.ones(b[1].size())`: unpacking a batch where it is, on the host
        if isinstance(func, FUNCTIONS) and self._result_indexes_only(func):
            return  # GIN's padded neighbour list: CPU indices into the caller's device tensor, which work anywhere
        if isinstance(func, FUNCTIONS) and not self._in_module_method(value) and _moved_by_every_caller(self.ctx, func):
            return  # StarGAN's `label2onehot`: made on the CPU on purpose, and every caller moves what it gives
        for item in items:
            found = self.dev(item)
            if found is not None and found.where == "cpu" and not found.joined:
                for origin in sorted(found.origins, key=_position):
                    if self.ctx.enclosing_function(origin) is func and not self._numbers(origin):
                        inputs = sorted(self.inputs(func))
                        device = inputs[0] if len(inputs) == 1 else ""
                        self.meetings.setdefault(origin, Meeting(origin, value, "returned", device))

    def _result_indexes_only(self, func: Function) -> bool:
        """Whether every call of the module method ``func`` keeps its result in a name used only as an index.

        ``idx = self.__neighbors(graphs)`` then ``h[idx]``, or handed to another method of the class that uses its
        parameter only so (``self.maxpool(h, idx)``). Only methods called as ``self.<name>(...)`` in their class.
        """
        cls = self.ctx.enclosing_class(func)
        if cls is None or func not in cls.body:
            return False
        calls = [
            c
            for c in ast.walk(cls)
            if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute)
            and dotted(c.func.value) == "self"
            and c.func.attr == func.name
        ]
        if not calls:
            return False
        for call in calls:
            assign = self.ctx.parent(call)
            caller = self.ctx.enclosing_function(call)
            if not (
                isinstance(assign, ast.Assign)
                and len(assign.targets) == 1
                and isinstance(assign.targets[0], ast.Name)
                and caller is not None
                and _index_only_name(self.ctx, cls, caller, assign.targets[0].id, 0)
            ):
                return False
        return True

    def _raw_input(self, func: ast.AST, item: ast.expr) -> bool:
        """Whether ``item`` is a parameter of ``func`` or a part of one as it came (``b[0]``, ``batch.x``)."""
        while isinstance(item, ast.Subscript | ast.Attribute):
            item = item.value
        return isinstance(item, ast.Name) and item.id in parameters(func)

    def stays_on_input(self, func: ast.AST, name: str) -> bool:
        """Whether every binding of ``name`` in ``func`` is a tensor on the input's device (``x = self.conv(x)``)."""
        for _, source in self.ctx.kinds.bindings.get(func, {}).get(name, []):
            if source[0] == "aug":
                continue
            if source[0] != "expr" and not (source[0] in ("none", "annotation", "passed") and name in parameters(func)):
                return False
            if source[0] == "expr":
                found = self.dev(source[1])
                if found is None or found.where != "input":
                    return False
        return True

    def _numbers(self, origin: ast.Call) -> bool:
        """``torch.tensor([h, w])``, ``torch.tensor([b0, 0, -b0])``: values gathered into a tensor.

        Sizes, scales, or the values of input tensors (read one by one, to the host): such a tensor may well be
        meant to stay there.
        """
        if self.ctx.call_name(origin) not in DATA_CALLS or not origin.args:
            return False
        data = origin.args[0]
        if isinstance(data, ast.List | ast.Tuple):
            found = [self.dev(e) for e in data.elts]
            return all(d is not None and d.where in ("scalar", "input") for d in found)
        return self.dev(data) == SCALAR


#: Functions that join tensors of one device into one (no zero-dimensional operand): the result of joining a CPU
#: tensor is on the CPU, or the call fails.
_JOINS = frozenset(f"torch.{name}" for name in "cat concat concatenate stack hstack vstack dstack".split())


def _forward_parameters(func: ast.AST) -> set[str]:
    """The parameters of a module's ``forward`` that have no default and no annotation: its input tensors."""
    if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef) or func.name != "forward":
        return set()
    positional = [*func.args.posonlyargs, *func.args.args][1:]
    required = positional[: len(positional) - len(func.args.defaults)]
    return {a.arg for a in required if a.annotation is None}


def _called_by_forward(cls: ast.ClassDef, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a method of ``cls`` that is not an initialiser (``forward``, ``generate``) calls ``self.<func>(...)``."""
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) or method is func:
            continue
        if method.name.startswith("__") or "init" in method.name.lower() or method.name.startswith("reset"):
            continue
        for node in ast.walk(method):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Attribute) and called.attr == func.name and dotted(called.value) == "self":
                return True
    return False


def _none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _targets(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> list[ast.expr]:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


def _numbers_literal(node: ast.expr | None) -> bool:
    """``[0.485, 0.456, 0.406]``, ``(1, -1)``: a list or tuple of number constants."""
    if not isinstance(node, ast.List | ast.Tuple) or not node.elts:
        return False
    values = [e.operand if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) else e for e in node.elts]
    return all(isinstance(v, ast.Constant) and isinstance(v.value, int | float) for v in values)


def _index_only_name(ctx: FileContext, cls: ast.ClassDef, func: ast.AST, name: str, depth: int) -> bool:
    """Whether ``name`` in ``func`` is read, and only to index or to hand on to a method that indexes with it.

    ``h[name]``, or ``self.maxpool(h, name)`` / ``padded=name`` for a method of ``cls`` whose parameter is used only
    so (a few calls deep).
    """
    reads = [n for n in _walk_body(func) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    if not reads or depth > 3:
        return False
    return all(_indexes_or_passes(ctx, cls, read, depth) for read in reads)


def _indexes_or_passes(ctx: FileContext, cls: ast.ClassDef, read: ast.Name, depth: int) -> bool:
    parent = ctx.parent(read)
    if isinstance(parent, ast.Subscript) and parent.slice is read:
        return True
    above = ctx.parent(parent) if parent is not None else None
    if isinstance(parent, ast.Tuple) and isinstance(above, ast.Subscript):
        return above.slice is parent
    keyword = parent if isinstance(parent, ast.keyword) else None
    call = above if keyword is not None else parent
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and dotted(call.func.value) == "self"):
        return False
    method = next((m for m in cls.body if isinstance(m, FUNCTIONS) and m.name == call.func.attr), None)
    if method is None:
        return False
    params = [a.arg for a in [*method.args.posonlyargs, *method.args.args][1:]]
    if keyword is not None:
        param = keyword.arg
    else:
        position = next((i for i, a in enumerate(call.args) if a is read), None)
        param = params[position] if position is not None and position < len(params) else None
    return param is not None and _index_only_name(ctx, cls, method, param, depth + 1)


def _called_name(call: ast.Call) -> str | None:
    """The last name of what ``call`` calls: ``zeros`` for ``torch.zeros(...)``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _moves_a_parameter(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``func`` moves one of its parameters to a device (``x.to(self.device)``, ``x.float().cuda()``)."""
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]} - {"self", "cls"}
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in ("to", "cuda") or (node.func.attr == "to" and not (node.args or node.keywords)):
            continue
        if (
            node.func.attr == "to"
            and node.args
            and isinstance(node.args[0], ast.Attribute)
            and (node.args[0].attr in ("float32", "float16", "float64", "bfloat16", "long", "int64", "int32", "bool"))
        ):
            continue  # `x.to(torch.float32)`: a conversion
        root = _root(node.func.value)
        if root in params:
            return True
    return False


def _walk_body(func: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions or classes defined inside it."""
    stack: list[ast.AST] = list(getattr(func, "body", []))
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                stack.append(child)


def _root(node: ast.AST) -> str | None:
    """The name under a chain of attributes, calls, subscripts and operators: ``x`` for ``(x != 0).sum(1)``."""
    found = _root_name(node)
    return found.id if found is not None else None


def _initialisation(name: str) -> bool:
    """``__init__``, ``_init_weights``, ``reset_parameters``: code that runs once, when the model is built."""
    bare = name.strip("_").lower()
    return bare.startswith("init") or bare.endswith("init") or bare.startswith("reset_param")


def _tensor_operand(node: ast.AST) -> ast.Name | None:
    """The name that must be a tensor when ``node`` is handed to a function that takes one.

    As :func:`_root_name`, except through arithmetic with anything but a number: ``w_0 * torch.pow(w_m, capacity)``
    is a tensor because of its right side, whatever ``w_0`` is (an ``int`` in torchvision's RegNet).
    """
    inner = node
    while isinstance(inner, ast.BinOp):
        if not (isinstance(inner.right, ast.Constant) and isinstance(inner.right.value, int | float)):
            return None
        inner = inner.left
    return _root_name(inner)


def _root_name(node: ast.AST) -> ast.Name | None:
    """The :func:`_root` name node."""
    while True:
        if isinstance(node, ast.Name):
            return node
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.BinOp | ast.Compare):
            node = node.left
        elif isinstance(node, ast.UnaryOp):
            node = node.operand
        else:
            return None


def _zero(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


#: Methods of ``nn.Module`` (a call of one of these on a submodule is not a call of a sub-submodule).
MODULE_METHODS = MODULE_SELF_METHODS | frozenset(
    """
    forward zero_grad parameters named_parameters buffers named_buffers children named_children modules
    named_modules state_dict load_state_dict register_buffer register_parameter register_module add_module
    get_submodule get_parameter get_buffer extra_repr register_forward_hook register_forward_pre_hook
    register_full_backward_hook register_backward_hook keys values items
    """.split()
)


def _self_chain(func: ast.Attribute) -> bool:
    """``self.a.b``: attributes all the way down to ``self``."""
    node: ast.AST = func.value
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _submodule(func: ast.AST) -> bool:
    """``self.embed``: a submodule, which lives where the module (and so its inputs) do."""
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"


def _array_index(index: ast.AST) -> bool:
    """``[:, 0]``, ``[..., 1]``, ``[None, :]``: indexing only arrays and tensors take."""
    if not isinstance(index, ast.Tuple) or len(index.elts) < 2:
        return False
    return any(
        isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and (e.value is None or e.value is Ellipsis))
        for e in index.elts
    )


def _tensor_function(name: str) -> bool:
    """Whether ``torch.<name>`` is a function on tensors (``torch.cat``, ``F.relu``, ``torch.linalg.norm``)."""
    if name.startswith(TENSOR_SUBMODULES):
        return True
    parts = name.split(".")
    return (
        len(parts) == 2
        and parts[0] == "torch"
        and parts[1] not in NOT_TENSOR_FUNCTIONS
        and parts[1] not in NOT_TENSOR_SUBMODULES
        and parts[1][:1].islower()
    )


def _counter(ctx: FileContext, source: tuple[object, ...]) -> bool:
    """``for i in range(n)`` or the index of ``for i, x in enumerate(xs)``: a Python integer."""
    if source[0] == "iter":
        return isinstance(source[1], ast.Call) and ctx.call_name(source[1]) == "range"
    inner = source[1]
    return (
        source[2] == 0
        and isinstance(inner, tuple)
        and inner[0] == "iter"
        and isinstance(inner[1], ast.Call)
        and ctx.call_name(inner[1]) == "enumerate"
    )


def _is_parameter(ctx: FileContext, value: ast.AST) -> bool:
    return isinstance(value, ast.Call) and ctx.call_name(value) in (
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
    )


def _is_number(ctx: FileContext, value: ast.AST) -> bool:
    """A number, or a parameter of ``__init__`` whose default is one."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, int | float) and not isinstance(value.value, bool)
    if isinstance(value, ast.Name):
        bound = binding(ctx, value.id, value)
        if bound is not None and bound.parameter is not None:
            func = bound.scope
            assert isinstance(func, FUNCTIONS)
            args = func.args
            positional = [*args.posonlyargs, *args.args]
            pairs = zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
            for arg, default in [*pairs, *zip(args.kwonlyargs, args.kw_defaults, strict=True)]:
                if arg is bound.parameter:
                    return default is not None and _is_number(ctx, default)
    return False


def _position(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


# -- reporting ----------------------------------------------------------------------------------------------------


def _device_holder(ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> str | None:
    """What the fix reads ``.device`` from for the input parameter ``name`` of ``func``; ``None``: no safe choice.

    ``self`` in a LightningModule (its ``device`` property); the tensor unpacked first from a batch parameter
    (``x, y = batch``: ``x``); ``None`` for a batch used by index or key (``batch[0]``, ``batch["x"]``), which has no
    ``.device``; else the parameter itself.
    """
    cls = ctx.enclosing_class(func)
    if cls is not None and any("LightningModule" in (ctx.qualname(base) or "") for base in cls.bases):
        return "self"
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name:
            target = node.targets[0]
            if isinstance(target, ast.Tuple | ast.List):
                first = target.elts[0] if target.elts else None
                return first.id if isinstance(first, ast.Name) else None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
            return None
    return name


def _device_expression(ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> str | None:
    """What the fix writes after ``device=`` for the input ``name`` of ``func``; ``None``: no safe choice.

    The device the function moves that input to, where it is kept by the module (``torch.LongTensor(log_seqs)
    .to(self.dev)``: ``self.dev``; the input may be a NumPy array, which has no ``.device``); else
    ``<holder>.device`` (see :func:`_device_holder`).
    """
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "to"
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.Attribute)
            and _self_chain(node.args[0])
            and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.func.value))
        ):
            return ctx.segment(node.args[0])
    kept = _kept_device(ctx, func)
    if kept is not None:
        return kept
    holder = _device_holder(ctx, func, name)
    return None if holder is None else f"{holder}.device"


def _kept_device(ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """``self.<attr>`` where the module of ``func`` keeps a device and moves tensors to it; else ``None``.

    ``self.dev = args.device`` and ``torch.LongTensor(log_seqs).to(self.dev)``: the device its inputs are put on.
    """
    cls = ctx.enclosing_class(func)
    if cls is None:
        return None
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "to"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Attribute)
            and dotted(node.args[0].value) == "self"
            and "dev" in node.args[0].attr.lower()
        ):
            return ctx.segment(node.args[0])
    return None


def _fix(ctx: FileContext, flow: Flow, meeting: Meeting) -> Fix | None:
    """``device=<input>.device`` added to the factory, when its function has that one input tensor."""
    origin = meeting.origin
    func = ctx.enclosing_function(origin)
    inputs = sorted(flow.inputs(func)) if func is not None else []
    if func is None or len(inputs) != 1 or not flow.stays_on_input(func, inputs[0]):
        return None
    device = _device_expression(ctx, func, inputs[0])
    if device is None:
        return None
    factory = ctx.call_name(origin) or ""
    if factory == "torch.from_numpy" or not factory[len("torch.") :][:1].islower():
        return None
    last = max([*origin.args, *(kw.value for kw in origin.keywords)], key=_position, default=None)
    if last is None:
        at = (origin.end_lineno or origin.lineno, (origin.end_col_offset or 1) - 1)
        text = f"device={device}"
    else:
        at = (last.end_lineno or last.lineno, last.end_col_offset or 0)
        text = f", device={device}"
    return Fix(f"Create it on `{device}`", (Edit(at, at, text),))


def _message(ctx: FileContext, flow: Flow, meeting: Meeting) -> str:
    origin = meeting.origin
    made = f"`{ctx.segment(origin.func)}(...)`"
    func = ctx.enclosing_function(origin)
    inside = f"`{func.name}`" if func is not None else "module code"
    given = (meeting.device or next(iter(sorted(flow.inputs(func))), "")) if func is not None else ""
    device = given or "x"
    where = f"{(_device_holder(ctx, func, device) if func is not None else None) or device}.device"
    if func is not None and not given:  # a method of the module with no tensor input (`predict` on NumPy arrays)
        where = _kept_device(ctx, func) or "next(self.parameters()).device"
        device = where
    elif func is not None:
        where = _device_expression(ctx, func, device) or where
        device = _device_holder(ctx, func, device) or device
    factory = ctx.call_name(origin) or ""
    takes_device = factory != "torch.from_numpy" and factory[len("torch.") :][:1].islower()
    there = f"`device={where}`" if takes_device else f"`.to({where})`"
    line = _position(meeting.site)[0]
    if meeting.how == "meets":
        site = ctx.enclosing_function(meeting.site)
        if site is not func and site is not None and func is not None:
            taken = next(  # `def coords_grid(batch, ht, wd, device)`: the helper already takes the device
                (
                    a.arg
                    for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
                    if a.arg == "device" or a.arg.endswith("_device")
                ),
                None,
            )
            if taken is not None and takes_device:
                return (
                    f"{made} in {inside} makes a CPU tensor, which line {line} (in `{site.name}`) combines with "
                    f"tensors on the input's device: that fails on an accelerator; `{func.name}` takes `{taken}`: "
                    f"create the tensor there, `device={taken}`"
                )
            return (
                f"{made} in {inside} makes a CPU tensor, which line {line} (in `{site.name}`) combines with tensors "
                f"on the input's device: that fails on an accelerator; give `{func.name}` the device of "
                f"`{device}` and create the tensor there"
            )
        return (
            f"{made} in {inside} makes a CPU tensor, which line {line} combines with tensors on the input's "
            f"device: that fails on an accelerator; create it there: {there}"
        )
    if meeting.how == "returned":
        inputs = ", ".join(f"`{name}`" for name in sorted(flow.inputs(func))) if func is not None else "`x`"
        return (
            f"{made} in {inside} makes the returned tensor live on the CPU whatever the device of {inputs}; "
            f"create it on the input's device: {there}"
        )
    return (
        f"{made} in {inside} builds its tensor on the CPU, and line {line} copies the result to the input's "
        "device at every call; pass the device in and create it there (`device=...`)"
    )


def _layers_in_forward(ctx: FileContext) -> Iterator[Finding]:
    """``nn.BatchNorm2d(c)(x)`` in ``forward``: a layer with parameters made (on the CPU) at every call."""
    for call in ctx.nodes(ast.Call):
        name = ctx.call_name(call)
        if name is None or not name.startswith("torch.nn.") or name.rsplit(".", 1)[-1] not in LAYERS_WITH_PARAMETERS:
            continue
        func = ctx.enclosing_function(call)
        if func is None or func.name != "forward":
            continue
        cls = ctx.enclosing_class(func)
        if cls is None or not ctx.kinds.class_is_module(cls.name):
            continue
        parent = ctx.parent(call)
        used = isinstance(parent, ast.Call) and parent.func is call
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            local = parent.targets[0].id
            used = any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == local
                for n in _walk_body(func)
            ) and not any(
                isinstance(n, ast.Attribute)
                and n.attr in ("to", "cuda")
                and isinstance(n.value, ast.Name)
                and n.value.id == local
                for n in _walk_body(func)
            )
        if not used:
            continue
        layer = ctx.segment(call.func) or "the layer"
        yield Finding(
            call,
            message=f"layer constructed inside `forward`: `{layer}(...)` is made on the CPU with new weights at "
            f"every call, never registered, moved by `.to(device)` or trained; build it once in `__init__` "
            f"(`self.layer = {layer}(...)`) and call `self.layer(x)`",
        )


def check(ctx: FileContext) -> Iterator[Finding]:
    """Yield each CPU factory whose tensor meets input tensors, and each parameterised layer built in ``forward``."""
    yield from _layers_in_forward(ctx)
    for plain in unregistered(ctx)[0]:
        value = ctx.segment(plain.assign.value)
        yield Finding(
            plain.assign,
            message=f"`self.{plain.attr}` is a plain tensor attribute of `{plain.cls}`, made on the CPU, and "
            f"`{plain.method}` combines it with other tensors (line {getattr(plain.use, 'lineno', 0)}): "
            f"`model.to(device)` moves parameters and buffers, not plain attributes, so on a GPU it stays behind; "
            f'fix: `self.register_buffer("{plain.attr}", {value})`',
        )
    flow = Flow(ctx)
    flow.run()
    fed_from_host: frozenset[ast.AST] | None = None
    for origin in sorted(flow.meetings, key=_position):
        meeting = flow.meetings[origin]
        if flow.host_side(origin) or flow.host_side(meeting.site) or _cpu_only_branch(ctx, origin):
            continue
        if fed_from_host is None:
            fed_from_host = host_fed(ctx)
        if ctx.enclosing_function(origin) in fed_from_host:
            continue  # `fliplr(img)` that every caller gives a host image: the CPU index meets host tensors only
        yield Finding(origin, message=_message(ctx, flow, meeting), fix=_fix(ctx, flow, meeting))


def _moved_by_every_caller(ctx: FileContext, func: Function) -> bool:
    """Whether every call of the helper ``func`` in the file moves its result before using it.

    ``self.label2onehot(labels, dim).to(device)``, or ``c_org = self.label2onehot(...)`` whose next use in the
    caller is ``c_org.to(device)``. Calls are ``self.<name>(...)`` in its class for a method, ``<name>(...)`` for a
    function of the file; none found: ``False``.
    """
    cls = ctx.enclosing_class(func)
    method = cls is not None and func in cls.body
    calls = [
        c
        for c in ctx.nodes(ast.Call)
        if (
            method and isinstance(c.func, ast.Attribute) and dotted(c.func.value) == "self" and c.func.attr == func.name
        )
        or (not method and isinstance(c.func, ast.Name) and c.func.id == func.name)
    ]
    return bool(calls) and all(_result_moved(ctx, call) for call in calls)


def _result_moved(ctx: FileContext, call: ast.Call) -> bool:
    above = ctx.parent(call)
    if isinstance(above, ast.Attribute) and above.attr in ("to", "cuda") and isinstance(ctx.parent(above), ast.Call):
        return True  # `helper(...).to(device)`
    if not (isinstance(above, ast.Assign) and len(above.targets) == 1 and isinstance(above.targets[0], ast.Name)):
        return False
    name, scope = above.targets[0].id, ctx.enclosing_function(call)
    later = [
        n
        for n in ast.walk(scope if scope is not None else ctx.tree)
        if isinstance(n, ast.Name)
        and n.id == name
        and isinstance(n.ctx, ast.Load)
        and (n.lineno, n.col_offset) > (above.lineno, above.col_offset)
    ]
    if not later:
        return False
    first = min(later, key=lambda n: (n.lineno, n.col_offset))
    use = ctx.parent(first)
    return isinstance(use, ast.Attribute) and use.attr in ("to", "cuda") and isinstance(ctx.parent(use), ast.Call)


def _cpu_only_branch(ctx: FileContext, node: ast.AST) -> bool:
    """Whether ``node`` runs only without CUDA, where a CPU tensor is what the code means to make.

    The ``else`` of ``if torch.cuda.is_available():``, or the body of ``if not torch.cuda.is_available():``; also of
    a flag named for the GPU (``if self.cuda:`` in GraphSAGE's aggregator, whose ``else`` makes the CPU ids).
    """
    child = node
    for above in ctx.ancestors(node):
        if isinstance(above, ast.If | ast.IfExp) and child is not above.test:
            test, negated = above.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negated = test.operand, True
            flag = (dotted(test) or "").rsplit(".", 1)[-1] in GPU_FLAGS
            if (isinstance(test, ast.Call) and ctx.call_name(test) in AVAILABILITY_CHECKS) or flag:
                in_body = child is above.body or (isinstance(above.body, list) and child in above.body)
                return in_body == negated
        if isinstance(above, FUNCTIONS):
            return False
        child = above
    return False


RULE = Rule(
    code="FRY005",
    name="device-less-tensor-in-forward",
    message="tensor created without `device=` where input tensors are at hand: it lives on the CPU",
    fix_title="create it on the input's device: `device=x.device`, or `x.new_zeros(...)`",
    doc=__doc__ or "",
    check=check,
)
