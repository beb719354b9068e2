"""Calls in the placement analysis: moves, torch factories and functions, modules built and called, losses.

Part of :mod:`ferry.lint.rules._placement` (not a rule). The checks of the three rules live here: a module on the
device called with a host tensor (FRY006), a module built here and never moved called with a device tensor (FRY007),
a loss given a device tensor and a host target or weight (FRY011).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from ferry.lint.context import FileContext, dotted
from ferry.lint.kinds import registry
from ferry.lint.rules._attributes import moves_itself_last, moves_own_layers
from ferry.lint.rules._placement_devices import DevicesMixin
from ferry.lint.rules._placement_values import (
    CHECKED_LOSSES,
    COPIES,
    DEVICE,
    HARMLESS_BUILTINS,
    HARMLESS_READS,
    HOST,
    KEEP,
    NONE,
    OTHER,
    REDUCTIONS,
    SAFE_MODULE_USES,
    SAME_MODULE,
    SHAPERS,
    STRING,
    TENSOR_ONLY_METHODS,
    TENSORISH,
    UNKNOWN,
    Val,
    agree,
    bound_names,
    int_literal,
    is_static,
    keeping_parameters,
    kept_by,
    keyed,
    line,
    loader_name,
    loss_name,
    new_memory,
    property_setter,
    short,
)
from ferry.lint.torch_api import (
    ACCELERATOR_MOVES,
    ARRAY_CONVERTING,
    COMBINING_FUNCTIONS,
    COMBINING_METHODS,
    COMPILERS,
    DATA_FACTORIES,
    DATA_LOADERS,
    DATASET_VIEWS,
    DTYPES,
    FACTORIES,
    HOST_TARGET_LOSSES,
    LAYERS_WITH_PARAMETERS,
    LAYERS_WITHOUT_PARAMETERS,
    LEGACY_HOST,
    LIKE_FACTORIES,
    LOADS,
    LOSS_INPUTS,
    LOSS_WEIGHTS,
    MASK_FACTORIES,
    MOVES,
    NOT_TENSOR_METHODS,
    NUMPY_CONVERSIONS,
    NUMPY_FACTORIES,
    PARALLEL_WRAPPERS,
    PASS_THROUGH,
    RANDOM_SPLITS,
    SAVES,
    TENSOR_DATASETS,
    WEIGHT_FIRST_LOSSES,
)

#: ``torch.from_numpy`` by its full name: a tensor on the host.
_NUMPY_CALLS = frozenset(f"torch.{name}" for name in NUMPY_FACTORIES)

Args = list[Val]
Kwargs = dict[str | None, Val]


class CallsMixin(DevicesMixin):
    """Calls, for :class:`ferry.lint.rules._placement._Flow`."""

    excluded: frozenset[str]
    scope: ast.AST
    silent: int
    strange_context: int
    default_device_set: bool
    _moved: dict[ast.AST, dict[str, list[ast.Call]]]
    _escaped: dict[ast.AST, dict[str, list[ast.AST]]]
    _aliased: dict[ast.AST, dict[str, set[str]]]
    tensor_moves: set[ast.Call]
    device_numpy: dict[ast.Call, Val]
    converted: dict[ast.Call, int]
    _classes: dict[str, tuple[bool | None, bool]]

    local_functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]

    if TYPE_CHECKING:

        def record_call(
            self, node: ast.Call, args: list[Val], kwargs: dict[str | None, Val], top: bool = False
        ) -> set[ast.expr]: ...
        def returned(self, node: ast.Call, args: list[Val], kwargs: dict[str | None, Val]) -> Val: ...
        def _returned_by(
            self,
            func: ast.FunctionDef | ast.AsyncFunctionDef,
            node: ast.Call,
            args: list[Val],
            kwargs: dict[str | None, Val],
            bound: bool = False,
            yields: bool = False,
        ) -> Val: ...
        def method_returned(
            self, method: ast.FunctionDef, node: ast.Call, args: list[Val], kwargs: dict[str | None, Val]
        ) -> Val: ...
        def ev(self, node: ast.expr, top: bool = False) -> Val: ...
        def report(self, code: str, node: ast.AST, message: str) -> None: ...
        def label(self, val: Val, node: ast.AST) -> str: ...
        def fix(self, val: Val, node: ast.AST, where: str) -> str: ...
        def segment(self, node: ast.AST) -> str: ...
        def visible_device(self, where: str, at: ast.AST | None = None) -> str: ...

        attribute_appends: dict[tuple[ast.ClassDef, str], list[tuple[ast.Call, Val]]]
        cpu_only: int
        returns: list[Val] | None

        def global_names(self) -> set[str]: ...
        def drop_below(self, name: str) -> None: ...
        def own(self, name: str) -> None: ...
        def instance_attributes(self, cls: ast.ClassDef) -> dict[str, Val]: ...
        def dataset(self, cls: ast.ClassDef) -> Val: ...
        def _peek(self, node: ast.expr) -> Val: ...
        def _element(self, iterable: ast.expr | None, val: Val) -> Val: ...
        def note_closure_call(self, name: str) -> None: ...
        def record_construction(self, node: ast.Call, args: list[Val], kwargs: dict[str | None, Val]) -> None: ...
        def weight_attributes(self) -> dict[str, str]: ...
        def record_module_method_call(
            self, node: ast.Call, method: ast.FunctionDef, receiver: Val, args: list[Val], kwargs: dict[str | None, Val]
        ) -> None: ...
        def plain_method(self, func: ast.Attribute) -> ast.FunctionDef | None: ...
        def _instance_value(self, node: ast.Attribute) -> Val | None: ...
        def static_method(self, func: ast.Attribute) -> ast.FunctionDef | None: ...
        def _plain_class(self, cls: ast.ClassDef, depth: int = 0) -> bool: ...
        def _accelerator_branch(self, test: ast.expr, depth: int = 0) -> bool | None: ...
        def record_method_call(
            self, node: ast.Call, method: ast.FunctionDef, args: list[Val], kwargs: dict[str | None, Val]
        ) -> set[ast.expr]: ...
        def _mixes(self, node: ast.AST, left: Val, right: Val, left_node: ast.expr, right_node: ast.expr) -> bool: ...

    def call(self, node: ast.Call, top: bool) -> Val:
        """Evaluate a call (``top``: it is a statement of its own)."""
        func = node.func
        if isinstance(func, ast.Name):
            self.note_closure_call(func.id)
        full = self.ctx.qualname(func)
        bound = dotted(func) in self.env
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id not in self.env
            and self.ctx.kinds.class_is_module(func.value.id)
            and self._builds_own(func.value.id, func.attr)
            and full is not None
        ):
            args = [self.ev(a) for a in node.args]
            kwargs = {k.arg: self.ev(k.value) for k in node.keywords}
            built = self._function(full, node, args, kwargs)  # `ConvTasNet.load_model(path)`
            if built is not None:
                return built
        if isinstance(func, ast.Attribute) and not bound and not self._is_function_path(func):
            chain = top and func.attr in MOVES | SAME_MODULE
            receiver = self.ev(func.value, top=chain)
            args = [self.ev(a) for a in node.args]
            kwargs = {k.arg: self.ev(k.value) for k in node.keywords}
            return self._method(node, func, receiver, args, kwargs, top)
        callee = self.ev(func) if bound or not isinstance(func, ast.Name | ast.Attribute) else None
        args = [self.ev(a) for a in node.args]
        kwargs = {k.arg: self.ev(k.value) for k in node.keywords}
        helper = self._lambda_helper(func) if callee is None or callee.what in ("unknown", "other") else None
        if helper is not None:  # `Variable = lambda *args: autograd.Variable(*args).cuda() if USE_CUDA else ...`
            return self._lambda_value(helper, node, args)
        if callee is not None and callee.what in ("module", "any"):
            return self._call_module(node, callee, args, kwargs)
        choices = self.ctx.kinds.class_choices(func.id) if isinstance(func, ast.Name) else frozenset()
        if choices and (callee is None or callee.what == "unknown"):
            # `Model = MODELS[args.model]` (or `Net = A if deep else B`), then `Model(...)`: the classes it may build,
            # when they agree
            options = [self._function(name, node, args, kwargs) for name in sorted(choices)]
            if all(option is not None for option in options):
                return agree(option for option in options if option is not None)
        if isinstance(func, ast.Subscript) and self._registry_of_plain_classes(func):
            # `TRAINERS[args.trainer_code](args, model, loaders...)`: what the trainer's `__init__` keeps
            self.record_construction(node, args, kwargs)
        if isinstance(func, ast.Subscript) and self._registry_of_modules(func, node):
            # `globals()[args.model](...)`, `MODELS[name](...)`: one of the file's model builders, on the host
            made_here = HOST if not (self.default_device_set or self.strange_context) else None
            return Val("module", made_here, fresh=made_here == HOST, params=True)
        call_method = self._called_instance(func) if callee is None or callee.what == "unknown" else None
        if call_method is not None:
            # `compute_loss(X, Y, logits)` on an instance of a plain class of the file: its `__call__` sees what the
            # call passes, as `obj.method(...)` does
            self._escape(node, only=self.record_method_call(node, call_method, args, kwargs))
            return self.method_returned(call_method, node, args, kwargs)
        if self._is_local_call(func):
            self._escape(node, only=self.record_call(node, args, kwargs, top))
            return self.returned(node, args, kwargs)
        nested = self._nested_function(func)
        if nested is not None:
            # `def create_model(args): ... return model` inside `main`: what it returns, read with the call's values
            kept = keeping_parameters(nested, self.local_functions, self.reading_method)
            names = [a.arg for a in [*nested.args.posonlyargs, *nested.args.args]]
            passed = [*zip(names, node.args, strict=False), *((k.arg, k.value) for k in node.keywords)]
            self._escape(node, only={arg for name, arg in passed if name not in kept} | set(node.args[len(names) :]))
            return self._returned_by(nested, node, args, kwargs)
        if full in NUMPY_CONVERSIONS and args and args[0].what in TENSORISH and args[0].where == DEVICE:
            self.device_numpy.setdefault(node, args[0])  # `np.asarray(probs)`: `Tensor.__array__` is `.numpy()`
        if (
            full is not None
            and full.startswith(ARRAY_CONVERTING)
            and not any(isinstance(a, ast.Starred) for a in node.args)
        ):
            # `metrics.accuracy_score(true, predic)`: scikit-learn makes NumPy arrays of what it is given
            at = next((i for i, a in enumerate(args) if a.what in TENSORISH and a.where == DEVICE), None)
            if at is not None and node not in self.device_numpy:
                self.device_numpy[node] = args[at]
                self.converted[node] = at
        if callee is None and full is not None:
            known = self._function(full, node, args, kwargs)
            if known is not None:
                return known
            if full in HARMLESS_BUILTINS:
                return UNKNOWN
        if isinstance(func, ast.Name) and (callee is None or callee.what in ("unknown", "other")):
            typed = self._typed_where(func)  # `Tensor(...)`, `Tensor = torch.cuda.FloatTensor if cuda else ...`
            if typed is not None:
                return Val("tensor", typed, dev='"cuda"' if typed == DEVICE else None)
        if (
            isinstance(func, ast.Name)
            and (callee is None or callee.what == "unknown")
            and loss_name(func)
            and args
            and not func.id[:1].isupper()
            and func.id not in self.ctx.kinds.classes
        ):  # `criterion(output, target)` of a loss given as a parameter or imported (not a class being built)
            self._escape(node)
            return self._loss(node, None, args, kwargs)
        self._escape(node)
        return UNKNOWN

    def _called_instance(self, func: ast.expr) -> ast.FunctionDef | None:
        """The ``__call__`` of a plain class of the file that calling ``func`` runs (see :meth:`plain_method`)."""
        if not isinstance(func, ast.Name) or func.id in self.local_functions or func.id in self.ctx.kinds.classes:
            return None
        return self.plain_method(ast.Attribute(value=func, attr="__call__", ctx=ast.Load()))

    def _is_function_path(self, func: ast.Attribute) -> bool:
        """``torch.zeros``, ``nn.Linear``: a dotted path through an import, not a method of a local value."""
        name = dotted(func)
        if name is None:
            return False
        head = name.split(".")[0]
        return head in self.ctx.imports and head not in self.env

    def _nested_function(self, func: ast.expr) -> ast.FunctionDef | None:
        """The function that ``func`` names, defined once in the body of the function being read and never rebound.

        FixMatch's ``main``: ``def create_model(args): ...`` then ``model = create_model(args)``. Undecorated, not a
        generator, and not one that reads or rebinds names of the enclosing function (``nonlocal``).
        """
        scope = self.scope
        if not isinstance(func, ast.Name) or not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            return None
        if func.id in self.env and self.env[func.id].what != "unknown":
            return None
        defined = [s for s in scope.body if isinstance(s, ast.FunctionDef) and s.name == func.id]
        if len(defined) != 1 or defined[0].decorator_list:
            return None
        nested = defined[0]
        stores = [
            n
            for n in ast.walk(scope)
            if isinstance(n, ast.Name) and n.id == func.id and isinstance(n.ctx, ast.Store | ast.Del)
        ]
        inner = (ast.Yield, ast.YieldFrom, ast.Await, ast.Nonlocal, ast.Global)
        if stores or any(isinstance(n, inner) for n in ast.walk(nested)):
            return None
        return nested

    def _is_local_call(self, func: ast.expr) -> bool:
        """A call of a function of the file whose call sites the analysis follows (``train(model, device, ...)``)."""
        if not (isinstance(func, ast.Name) and func.id in self.local_functions):
            return False
        if self.env.get(func.id, UNKNOWN).what != "unknown":
            return False
        scope = self.scope
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            args = scope.args
            if func.id in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}:
                return False
        return True

    def _escape(self, node: ast.Call, only: set[ast.expr] | None = None) -> None:
        """Arguments handed to code the analysis cannot see: modules and containers may come back moved.

        ``only``: the arguments that may be moved or kept (a function of the file that only reads the others).
        A logging call (``logger.info(model)``, ``logging.debug(x)``) only formats what it is given.
        """
        if _logging_call(node):
            return
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if only is not None and arg not in only:
                continue
            if isinstance(arg, ast.Name) and self._held_unmoved(node, arg):
                continue  # `agent = PPO(actor_critic, ...)`: kept by a class that never moves it
            inner = arg.value if isinstance(arg, ast.Starred) else arg
            if not isinstance(inner, ast.Name | ast.Attribute):
                continue
            name = dotted(inner)
            if name is not None and name in self.env:
                val = self.env[name]
                if val.what in ("module", "any"):
                    self.env[name] = replace(val, where=None, fresh=False)
                elif val.what in ("seq", "dict", "tuple"):
                    self.env[name] = UNKNOWN

    # -- methods ----------------------------------------------------------------------------------------------

    def _method(self, node: ast.Call, func: ast.Attribute, receiver: Val, args: Args, kwargs: Kwargs, top: bool) -> Val:
        method = func.attr
        if method in ("append", "appendleft") and len(args) == 1 and self.returns is None and not self.silent:
            held = func.value  # `self.state_buffer.append(observation)` in a plain class's method
            if isinstance(held, ast.Attribute) and dotted(held.value) == "self" and args[0].what in TENSORISH:
                cls = self.ctx.enclosing_class(self.scope)
                if cls is not None and self._plain_class(cls):
                    self.attribute_appends.setdefault((cls, held.attr), []).append((node, args[0]))
        static = self.static_method(func)
        if static is not None:  # `KGEModel.train_step(model, ...)`, `kge_model.test_step(kge_model, ...)`
            self._escape(node, only=self.record_method_call(node, static, args, kwargs))
            return self.method_returned(static, node, args, kwargs)
        if receiver.what == "unknown" and (plain := self.plain_method(func)) is not None:
            # `trainer.train(loader)` on a plain class's instance: the method sees what the call passes, may move or
            # keep only what it does not just read, and returns what its body gives
            self._escape(node, only=self.record_method_call(node, plain, args, kwargs))
            if isinstance(func.value, ast.Name) and len(node.args) == 1 and not node.keywords:
                self._storage_moved(func.value.id, plain, node.args[0])
            returned = self.method_returned(plain, node, args, kwargs)
            if isinstance(func.value, ast.Name) and func.value.id == "self" and top:
                self._rebuilt(plain)
            return returned
        if receiver.what == "unknown" and (kept := self._instance_value(func)) is not None and kept.what == "module":
            # `self.model.encoder(enc_batch)`: a module that the `__init__` of a plain class moved and keeps
            return self._call_module(node, kept, args, kwargs)
        if (
            receiver.what == "unknown"
            and dotted(func.value) == "self"
            and (kind := self.ctx.kind(func)) is not None
            and kind.is_module
            and not module_methods(self.ctx, method)
        ):  # `self.network(*inputs)` of a module a method moves (DrQA's `cuda()`): its output is where its input is
            return self._call_module(node, Val("module"), args, kwargs)
        owner = dotted(func.value)
        inner = func.value
        while owner is None and isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
            if inner.func.attr not in ("eval", "train"):  # `m.eval().to(device)` moves `m`: these return the module
                break
            inner = inner.func.value
            owner = dotted(inner)
        tracked = owner is not None and owner in self.env
        tensor = receiver.what in TENSORISH or (receiver.what == "any" and not receiver.inplace)
        if method == "numpy" and not node.args and not node.keywords and receiver.where == DEVICE and tensor:
            self.device_numpy.setdefault(node, receiver)
        if receiver.what in TENSORISH:
            if top and method in MOVES:
                self.tensor_moves.add(node)
                moved = self._tensor_method(node, method, receiver)
                if tracked and owner is not None and receiver.where != moved.where:
                    # `inputs.to(device)` as a statement: FRY001 reports it, with the fix `inputs = inputs.to(device)`.
                    # `inputs` is still where it was, but after the fix it is not: where it is used next, its place is
                    # left unknown, so the one mistake gets one finding (not FRY006/FRY011 again at the model call)
                    self.env[owner] = replace(receiver, where=None, dev=None)
                return moved
            if method in COMBINING_METHODS:  # `out.gather(1, target)`: the arguments share the receiver's device
                self._combined(node, [(receiver, func.value), *zip(args, node.args, strict=False)])
            return self._tensor_method(node, method, receiver)
        if method == "forward" and receiver.what == "unknown" and args and _on_device_tensor(args[0]):
            # `_model.forward(frames)`: only a module has `forward`; with its input on the device, so is its output
            self._escape(node)
            return Val("output", DEVICE, dev=args[0].dev)
        if (
            (receiver.what == "unknown" or (receiver.what == "any" and receiver.inplace))
            and args
            and (defined := file_method(self.ctx, method)) is not None
            and reads_only(defined, self.ctx)
            and feeds_submodule(self.ctx, defined)
        ):  # `waveglow.infer(mel)` of a loaded model: only WaveGlow has `infer`, which runs its layers on `mel`
            if receiver.what == "any" and receiver.where == DEVICE:  # `waveglow.cuda()` as a statement moved it
                return self._call_module(node, replace(receiver, what="module", inplace=False), args, kwargs, True)
            if _on_device_tensor(args[0]):
                self._escape(node)
                return Val("output", DEVICE, dev=args[0].dev)
        if (
            receiver.what == "any"
            and receiver.inplace
            and receiver.where == DEVICE
            and not method.startswith("__")
            and method not in MOVES | SAME_MODULE
            and module_methods(self.ctx, method)
            and all(self.ctx.kinds.class_is_module(c.name) for c in _defining_classes(self.ctx, method))
        ):  # `model.observe(x, t, y)` after `model.cuda()`, the model class picked by name (GEM): only the file's
            # module classes define `observe`, so it is one of them, moved whole
            receiver = replace(receiver, what="module", inplace=False, params=True)
        if receiver.what == "module" or (receiver.what == "any" and method in MOVES | SAME_MODULE):
            if method in MOVES:
                moved = self._moved_module(node, receiver)
                if tracked and (receiver.what == "module" or top):  # modules move in place
                    # a value of unknown kind moved by a statement is a module moved in place (a tensor's move as a
                    # statement does nothing), as for a name of unknown value
                    inplace = receiver.what == "any" and top
                    self.env[owner] = replace(  # type: ignore[index]
                        moved, origin=receiver.origin, name=receiver.name, inplace=moved.inplace or inplace
                    )
                elif receiver.what == "module" and isinstance(func.value, ast.Subscript):
                    self._moved_in_dict(func.value, moved, receiver)  # `self.models["encoder"].to(self.device)`
                return moved
            if method in SAME_MODULE:
                return receiver
            if method in ("forward", "__call__"):
                return self._call_module(node, receiver, args, kwargs, method=True)
            if receiver.bound_self and not module_methods(self.ctx, method):
                # `self.fc(x)` in a method read with its module as `self`: a layer with weights is where the module
                # is; any other attribute (a container of layers without weights, a loss kept on another device)
                # is not known
                if self.weight_attributes().get(method) == "module":
                    return self._call_module(node, replace(receiver, bound_self=False), args, kwargs, method=True)
                return UNKNOWN
            definers = module_methods(self.ctx, method) if receiver.where is not None else []
            built = self.ctx.kinds.instance_classes(func.value.id) if isinstance(func.value, ast.Name) else None
            if built is not None:  # `model = Net(...)`: the method its class runs (its own or the nearest base's)
                runs = [
                    next(
                        (
                            d
                            for c in self.ctx.kinds.class_chain(self.ctx.kinds.classes[name])
                            for d in definers
                            if self.ctx.enclosing_class(d) is c
                        ),
                        None,
                    )
                    for name in sorted(built)
                ]
                definers = [d for d in definers if d in runs]
            # several classes define it (GEM's `model.observe(x, t, y)`, the model class picked by name): each is
            # read with this module as `self`, as one of them is what runs
            for definer in definers if not method.startswith("__") and receiver.params else []:
                owner_cls = self.ctx.enclosing_class(definer)
                # its layers may sit on several devices, unless it moves itself whole at the end
                if owner_cls is not None and (
                    not moves_own_layers(self.ctx, owner_cls.name) or moves_itself_last(self.ctx, owner_cls.name)
                ):
                    self.record_module_method_call(node, definer, receiver, args, kwargs)
            defined = file_method(self.ctx, method)
            if defined is not None and reads_only(defined, self.ctx):  # `vae.decode(z)`, `model.init_hidden(n)`
                if feeds_submodule(self.ctx, defined):
                    return self._call_module(node, receiver, args, kwargs, method=True)
                return self.method_returned(defined, node, args, kwargs)
            defined_by_modules = module_methods(self.ctx, method)
            if defined_by_modules and all(
                reads_only(m, self.ctx) and feeds_submodule(self.ctx, m) for m in defined_by_modules
            ):  # `self.policy.sample(state)` with a Gaussian or a deterministic policy: each runs its layers on it
                return self._call_module(node, receiver, args, kwargs, method=True)
            if not defined_by_modules and submodule_attribute(self.ctx, method):
                # `model.encoder(src)` from outside the model: a layer kept in `__init__`, where the model is
                return self._call_module(node, replace(receiver, loss=False), args, kwargs, method=True)
            if not defined_by_modules and args and _on_device_tensor(args[0]) and kept_attribute(self.ctx, method):
                # `model.encoder(images)` with `self.encoder = model_fun()` (a builder from a table): a layer that the
                # model built, given a device input: it is where the model is, so the call is the model's
                return self._call_module(node, replace(receiver, loss=False), args, kwargs, method=True)
            if _reading_method(self.ctx, method):  # several classes define it, and none changes its module
                return UNKNOWN
            if defined is not None and keeps_weights(defined, self.ctx):
                return UNKNOWN  # DeepCTR's `model.compile(optimizer, loss)`: it sets plain attributes, moves nothing
            if tracked and (method not in SAFE_MODULE_USES or _assigns_state(node)):
                self.env[owner] = replace(receiver, where=None, fresh=False)  # type: ignore[index]
            return UNKNOWN
        if receiver.what == "any" and not receiver.inplace and method in SHAPERS | REDUCTIONS | TENSOR_ONLY_METHODS:
            return Val("any", receiver.where, dev=receiver.dev)
        if receiver.what == "loader" and not node.args and method in ("__iter__", "__next__"):
            return receiver if method == "__iter__" else _batch(receiver)  # `it = loader.__iter__()`
        if receiver.what == "seq" and not node.args and method in ("__iter__", "__next__"):
            return receiver if method == "__iter__" else receiver.element or UNKNOWN  # a generator of the file
        if receiver.what in ("seq", "dict", "tuple"):
            if method in ("get", "pop") and receiver.element is not None:
                if method == "pop" and tracked:
                    self.env[owner] = UNKNOWN  # type: ignore[index]
                return receiver.element
            if method == "append" and receiver.what == "seq" and tracked and len(args) == 1:
                item = replace(args[0], origin=None, name=None)  # `text_list.append(t)`: a list of such items
                known = receiver.element == NONE or receiver.element == item
                self.env[owner] = Val("seq", element=item if known else None)  # type: ignore[index]
            elif method in ("append", "extend", "insert") and receiver.what == "seq" and tracked:
                self.env[owner] = Val("seq")  # type: ignore[index]  # still a list, of items now unknown
            elif method not in ("keys", "values", "items", "copy", "index", "count") and tracked:
                self.env[owner] = UNKNOWN  # type: ignore[index]
            self._escape(node)
            return UNKNOWN
        if receiver.what == "batch" and receiver.where is not None and method in _TENSOR_ONLY_BATCH_METHODS:
            # `network(data.float())` for each `data` of a loader: only a tensor has `.float()`, so the batch is one
            return Val("tensor", receiver.where, dev=receiver.dev)
        if receiver.what == "batch" and method in MOVES and method != "type" and not top:
            where, dev = self._move_target(node, method, receiver)  # `x = x.to(device)` for a loader's batch
            return UNKNOWN if where == KEEP else Val("batch", where, dev=dev, moved_at=line(node))
        if receiver.what == "unknown" and method in ("eval", "train") and not node.args:
            # only a module has `.eval()`: `my_net = torch.load(path).eval()` is a module whose place is not known
            return Val("module") if not top else UNKNOWN
        if receiver.what == "unknown" and method in MOVES and method != "type":
            where, dev = self._move_target(node, method, receiver)
            if where == KEEP:
                return UNKNOWN
            moved = Val("any", where, dev=dev, moved_at=line(node))
            if top and owner is not None and owner.split(".")[0] not in self.excluded:
                kind = self.ctx.kind(func.value)
                if kind is None or not kind.is_tensor:  # `x.to(device)` alone on a tensor moves nothing (FRY001)
                    self.env[owner] = replace(moved, inplace=True, name=owner)
                    self.drop_below(owner)
                    self.own(owner)
            return moved
        if receiver.what == "unknown" and args and loss_name(func) and not _defining_classes(self.ctx, method):
            # `self.loss_function(clean, enhanced)` of a loss function the trainer is given: its inputs meet
            self._escape(node)
            return self._loss(node, None, args, kwargs)
        self._escape(node)
        return UNKNOWN

    def _moved_module(self, node: ast.Call, module: Val) -> Val:
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if method == "type":
            return replace(module, where=None, fresh=False)
        where, dev = self._move_target(node, method, module)
        if where == KEEP:
            return module
        return replace(module, where=where, dev=dev, moved_at=line(node), fresh=False)

    def _move_target(self, node: ast.Call, method: str, receiver: Val) -> tuple[str | None, str | None]:
        """Where ``x.<method>(...)`` puts ``x`` (:data:`HOST`, :data:`DEVICE`, ``KEEP`` or ``None``), as written."""
        if method == "cpu":
            return HOST, None
        if method in ACCELERATOR_MOVES:
            return DEVICE, f'"{method}"' if not node.args else self.segment(node.args[0])
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return None, None
        target = next((k.value for k in node.keywords if k.arg == "device"), None)
        if target is None and node.args:
            target = node.args[0]
        if target is None:
            return (KEEP, receiver.dev) if method == "to" else (None, None)
        if self._is_dtype(target):
            return KEEP, receiver.dev
        other = self._peek(target)
        if other.what in TENSORISH:  # `x.to(other)`: other's device and dtype
            return other.where, other.dev or f"{self.segment(target)}.device"
        where = self.target_where(target)
        return where, self.segment(target) if where is not None else None

    def _typed_where(self, node: ast.expr, depth: int = 0) -> str | None:
        """Where ``x.type(node)`` puts ``x`` for a legacy tensor type.

        ``torch.cuda.FloatTensor``: the device; ``torch.FloatTensor``: the host; either picked on CUDA availability:
        the device; a name bound once to one of those (``dtype = torch.cuda.FloatTensor if use_cuda else ...``).
        """
        if isinstance(node, ast.IfExp) and depth < 3:
            body, orelse = self._typed_where(node.body, depth + 1), self._typed_where(node.orelse, depth + 1)
            if body == orelse:
                return body
            if {body, orelse} == {HOST, DEVICE} and self.ctx.mentions_availability(node.test):
                return DEVICE
            return None
        text = node.value if isinstance(node, ast.Constant) else self.ctx.qualname(node) or ""
        if isinstance(text, str) and ".cuda." in text and text.endswith("Tensor"):
            return DEVICE
        if isinstance(text, str) and text in LEGACY_HOST:
            return HOST
        if isinstance(node, ast.Name) and depth < 3:
            values = self.ctx.kinds.assigned_values(node.id)
            if len(values) == 1 and isinstance(values[0], ast.expr):
                return self._typed_where(values[0], depth + 1)
        return None

    def _converts_only(self, call: ast.Call) -> bool:
        """``x.to(torch.float32)``, ``x.to(dtype=d)``, ``x.type(torch.long)``: a dtype conversion, moving nothing."""
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("to", "type"):
            return False
        if any(k.arg is None or k.arg == "device" for k in call.keywords):
            return False
        if call.args:
            return len(call.args) == 1 and self._is_dtype(call.args[0])
        return func.attr == "to" and any(k.arg == "dtype" for k in call.keywords)

    def _to_host(self, call: ast.Call) -> bool:
        """``x.cpu()``, ``x.to("cpu")``, ``x.to(device="cpu")``: a move to the host, written so."""
        if not isinstance(call.func, ast.Attribute) or call.func.attr not in MOVES:
            return False
        if call.func.attr == "cpu":
            return True
        target = next((k.value for k in call.keywords if k.arg == "device"), None)
        if target is None and call.args and not isinstance(call.args[0], ast.Starred):
            target = call.args[0]
        return target is not None and self.device_where(target) == HOST

    def _is_dtype(self, node: ast.expr) -> bool:
        full = self.ctx.qualname(node)
        if full is None:
            return False
        head, _, last = full.rpartition(".")
        return (head == "torch" and last in DTYPES) or "dtype" in last.lower()

    def _tensor_method(self, node: ast.Call, method: str, receiver: Val) -> Val:
        base = Val("tensor", receiver.where, origin=receiver.origin, name=receiver.name, scalar=receiver.scalar)
        base = replace(base, dev=receiver.dev)
        if method in MOVES and method != "type":
            where, dev = self._move_target(node, method, receiver)
            return base if where == KEEP else replace(base, where=where, dev=dev)
        if method == "type":
            if not node.args:
                return STRING
            arg = node.args[0]
            typed = self._typed_where(arg)
            if typed == DEVICE:
                return replace(base, where=DEVICE, dev='"cuda"')
            if typed == HOST:
                return replace(base, where=HOST)
            return base if self._is_dtype(arg) else replace(base, where=None)
        if method == "type_as" and len(node.args) == 1 and not node.keywords:
            other = self._peek(node.args[0])  # `x.type_as(real)`: real's dtype, and its device
            if other.what in TENSORISH:
                return replace(base, where=other.where, dev=other.dev or f"{self.segment(node.args[0])}.device")
            return replace(base, where=None)
        if method == "pin_memory":
            return replace(base, where=HOST)
        if method in ("new_tensor", "new_zeros", "new_ones", "new_empty", "new_full"):
            device = next((k.value for k in node.keywords if k.arg == "device"), None)
            where = receiver.where if device is None else self.device_where(device)
            return Val("tensor", where, scalar=self._shape_scalar(node, method), dev=receiver.dev)
        if method in NOT_TENSOR_METHODS or method in ("numpy", "tolist", "item"):
            return OTHER
        if method in ("split", "chunk", "unbind", "tensor_split"):
            return Val("seq", element=replace(base, origin=None))
        if method in REDUCTIONS:
            return replace(base, scalar=True)
        if method in SHAPERS:
            return replace(base, scalar=False)
        return base

    def _shape_scalar(self, node: ast.Call, name: str) -> bool:
        """Whether a factory call may make a zero-dimensional tensor."""
        if name in ("tensor", "as_tensor", "asarray", "new_tensor"):
            data = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "data"), None)
            return not isinstance(data, ast.List | ast.Tuple | ast.ListComp)
        if name in ("arange", "range", "linspace", "logspace", "eye", "randperm"):
            return False
        shape = next((k.value for k in node.keywords if k.arg == "size"), None)
        if shape is None and node.args:
            shape = node.args[-1] if name in ("randint",) and len(node.args) > 1 else node.args[0]
        if isinstance(shape, ast.Tuple | ast.List):
            return not shape.elts
        if isinstance(shape, ast.Call) and self.ctx.qualname(shape.func) == "torch.Size":
            return not shape.args or (isinstance(shape.args[0], ast.List | ast.Tuple) and not shape.args[0].elts)
        return False

    # -- functions and classes --------------------------------------------------------------------------------

    def _loaded(self, node: ast.Call) -> Val | None:
        """``torch.load(path, map_location=...)``: what it gives, of unknown kind, where ``map_location`` puts it.

        On the host for ``"cpu"``, ``torch.device("cpu")`` or ``lambda storage, loc: storage`` (storages come back
        on the CPU, where they are read); on the chosen device for a device variable. It may be a module, a tensor,
        a dict of them or numbers: a possibly zero-dimensional value of unknown kind. Without ``map_location``: not
        known (where it was saved from).
        """
        target = next((k.value for k in node.keywords if k.arg == "map_location"), None)
        if target is None and len(node.args) > 1:
            target = node.args[1]
        if target is None:
            return None
        if isinstance(target, ast.Lambda):
            params = [a.arg for a in target.args.args]
            if params and isinstance(target.body, ast.Name) and target.body.id == params[0]:
                return Val("any", HOST, scalar=True)
            return None
        where = self.device_where(target)
        if where is None:
            return None
        return Val("any", where, scalar=True, dev=self.segment(target) if where == DEVICE else None)

    def _function(self, full: str, node: ast.Call, args: Args, kwargs: Kwargs) -> Val | None:
        """The value of a call to the known function or class ``full``; ``None``: not known."""
        last = full.rsplit(".", 1)[-1]
        device = next((k.value for k in node.keywords if k.arg == "device"), None)
        made_here = HOST if not (self.default_device_set or self.strange_context) else None
        top_level = full.startswith("torch.") and full.count(".") == 1
        if full == "torch.device":
            where = self.device_where(node)
            return Val("device", where, dev=self.segment(node)) if where is not None else Val("device")
        if full in LOADS:
            return self._loaded(node)
        if top_level and last in FACTORIES | DATA_FACTORIES:
            return self._factory(node, last, args, device, made_here)
        if top_level and last in LIKE_FACTORIES:
            source = args[0] if args else UNKNOWN
            where = self.device_where(device) if device is not None else source.where
            return Val("tensor", where, scalar=source.scalar, dev=source.dev)
        if full in PASS_THROUGH and args:
            return _unstarred(node, args)[0]  # deprecated `Variable(x)`: gives the tensor back, where it is
        if full in ("copy.deepcopy", "copy.copy") and len(node.args) == 1 and args[0].what in ("module", *TENSORISH):
            # `self.actor_target = copy.deepcopy(self.actor)`: a new module or tensor, where the original is
            return replace(args[0], origin=None, name=None, moved_at=None)
        if full == "torch.optim.swa_utils.AveragedModel" and args and args[0].what == "module":
            # a deep copy of the model, where it is, or on `device=` when given (TS2Vec's `self.net`)
            swa_device = node.args[1] if len(node.args) > 1 else device
            where = args[0].where if swa_device is None else self.device_where(swa_device)
            return replace(args[0], where=where, origin=None, name=None, moved_at=None, fresh=False)
        if full == "functools.partial" and node.args and isinstance(node.args[0], ast.Name):
            named = node.args[0].id
            defined = [f for f in self.ctx.tree.body if isinstance(f, ast.FunctionDef) and f.name == named]
            if len(defined) == 1 and loss_of_parameters(self.ctx, defined[0]):
                return Val("module", params=False, loss=True)  # `functools.partial(cross_entropy2d, **params)`
        if full in ("list", "tuple") and len(args) == 1 and not node.keywords:
            if args[0].what == "seq":  # `list(image.to(device) for image in images)`: the same items
                return replace(args[0], origin=None, name=None)
            if args[0].what == "tuple" and args[0].items:
                return Val("seq", element=agree(args[0].items))
        if full == "collections.deque" and len(args) <= 1 and all(k.arg == "maxlen" for k in node.keywords):
            if not args:
                return Val("seq", element=NONE)
            if args[0].what == "seq":  # `deque([], maxlen=4)`: a list as far as appends and reads go
                return replace(args[0], origin=None, name=None)
        if full in ("copy.deepcopy", "copy.copy") and len(args) == 1:
            # a copy where the original is (an EMA model: `copy.deepcopy(model)`); the original stays where it was
            return replace(args[0], origin=None, name=None, fresh=False) if args[0].what != "unknown" else UNKNOWN
        if full == "dict" and not args and node.keywords and all(k.arg is not None for k in node.keywords):
            return keyed([k.arg for k in node.keywords], [kwargs[k.arg] for k in node.keywords])  # `dict(x=x, y=y)`
        if full in MASK_FACTORIES:  # made where `device=` says, else on the host
            where = self.device_where(device) if device is not None else made_here
            return Val("tensor", where, dev=self.segment(device) if device is not None else None)
        if full == "iter" and len(args) == 1 and args[0].what == "loader":
            return args[0]  # an iterator over the loader's batches
        if full == "next" and args and args[0].what == "loader":
            return _batch(args[0])  # `next(iter(loader))`, `next(dataiter)`
        first = node.args[0] if node.args else None
        loader_named = isinstance(first, ast.Name | ast.Attribute) and loader_name(first)
        if full == "next" and args and args[0].what == "unknown" and loader_named:
            return Val("batch")  # `next(train_iterator)` of a parameter: a batch of unknown place
        if (
            full == "next"
            and len(node.args) == 1
            and isinstance(first, ast.Call)
            and self.ctx.call_name(first) in ("enumerate", "zip", "iter")
        ):  # `j, data = next(enumerate(testdataloader, 0))`: the first item of what it iterates
            return self._element(first, args[0])
        if full in ("next", "iter") and len(args) == 1 and args[0].what == "seq" and args[0].element is not None:
            return args[0] if full == "iter" else args[0].element  # `next(gen)` of a generator of the file
        if full in TENSOR_DATASETS:
            if len(node.args) == 1 and isinstance(node.args[0], ast.Starred):
                packed = self._peek(node.args[0].value)  # `TensorDataset(*make_images(n))`: the tuple's tensors
                args = list(packed.items) if packed.what == "tuple" else args
            held = [a for a in args if a.what in TENSORISH]
            if held and len(held) == len(args) and all(a.where == held[0].where for a in held):
                return Val("dataset", held[0].where)
            if held and len(held) == len(args) and all(a.where is not None for a in held):
                # tensors on different devices: each item of a batch is where its tensor is
                return Val("dataset", items=tuple(Val("tensor", a.where, dev=a.dev) for a in held))
            return Val("dataset")
        if full in DATA_LOADERS:
            return self._loader(node, args, kwargs)
        if (
            full in LEGACY_HOST
            and (len(node.args) > 1 or (node.args and isinstance(node.args[0], ast.Constant)))
            and not node.keywords
            and not any(isinstance(a, ast.Starred | ast.List | ast.Tuple) for a in node.args)
        ):  # `torch.LongTensor(n_tasks, n_memories)`: sizes, so as many dimensions (never a 0-dim scalar)
            return Val("tensor", made_here, dims=len(node.args))
        if full in _NUMPY_CALLS or full in LEGACY_HOST:
            return Val("tensor", made_here)
        if full.startswith("torch.cuda.") and last.endswith("Tensor"):
            return Val("tensor", DEVICE, dev='"cuda"')
        if full in ("torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer") and args:
            return replace(args[0], origin=None) if args[0].what in TENSORISH else Val("tensor")
        if full in COMPILERS and args:
            # the compiled module shares the parameters: bound to the same name it is the same module (a new name
            # is an alias, see `bind`)
            return args[0] if args[0].what in ("module", "any") else UNKNOWN
        if full.startswith("torch.nn.functional.") and last in CHECKED_LOSSES:
            return self._loss(node, None, args, kwargs)
        if full.startswith("torch.nn.") and last[:1].isupper():
            if "Parallel" in last:  # DataParallel/DDP move their inputs themselves; the module stays where it is
                # whatever it wraps is a module (`net.cuda()` of a model loaded from a file, then wrapped)
                inner = args[0] if args and args[0].what in ("module", "any") else Val("module")
                return replace(inner, what="module", wrapper=True, name=None, inplace=False)
            if full.startswith("torch.nn.utils."):
                return None
            return self._build_nn(node, last, args, device, made_here)
        if full.startswith(("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")) or (
            (top_level and last[:1].islower()) or full in ("torch.autograd.grad", "torch.autograd.backward")
        ):
            return self._follow(node, last, args, kwargs)
        if full.startswith("torchvision.models.") and last[:1].islower() and "feature_extraction" not in full:
            if last.startswith(("get_", "list_")) or "._" in full:
                return None
            return Val("module", made_here, fresh=made_here == HOST, params=True)
        if full.startswith(("torchvision.transforms.", "kornia.")) and last[:1].isupper():
            return Val("module", params=False)  # transforms and augmentations: no parameters, any device
        if full == "timm.create_model":
            where = self.device_where(device) if device is not None else made_here
            return Val("module", where, fresh=where == HOST, params=True)
        if full in self.ctx.kinds.classes and not self.ctx.kinds.class_is_module(full):
            self.record_construction(node, args, kwargs)
            relayed = self._relayed_argument(full, node)
            if relayed is not None:  # `_Progress(enumerate(loader), total)`: iterating it gives the loader's items
                element = self._element(relayed, self._peek(relayed))
                if element.what in ("tuple", "batch", *TENSORISH):
                    return Val("seq", element=element)
            batch = self._next_of_iterator(full, node)
            if batch is not None:  # `DatasetIterater(batches, batch_size, device)`: its `__next__` makes each batch
                return Val("seq", element=batch)
        if full in self.ctx.kinds.classes and self._dataset_class(full):
            return self.dataset(self.ctx.kinds.classes[full])
        if full.startswith("torchvision.datasets.") and last[:1].isupper():
            return self._vision_dataset(node)
        if full in DATASET_VIEWS and args and args[0].what == "dataset":
            return replace(args[0], origin=None, name=None)  # `Subset(dataset, indices)`: its items
        if full in RANDOM_SPLITS and args and args[0].what == "dataset":
            return Val("seq", element=replace(args[0], origin=None, name=None))  # `train, val = random_split(...)`
        if full in self.ctx.kinds.classes and self.ctx.kinds.class_is_module(full):
            params, aware = self._class_info(full)
            built = self.ctx.kinds.classes[full]
            if not params and (_combining_loss(built) or _forwarding_loss(self.ctx, built)):
                return Val("module", params=False, loss=True)  # `ContrastiveLoss(margin)`: its inputs meet
            parts = [a for a in [*args, *kwargs.values()] if a.what == "module" and a.params]
            if params is None and parts:
                # `Seq2Seq(encoder, decoder)`: built of layers with weights given to it, it sits where they are
                if {a.where for a in parts} == {DEVICE} and len({a.dev for a in parts}) == 1:
                    return Val("module", DEVICE, dev=parts[0].dev, params=True)
                if {a.where for a in parts} == {HOST}:
                    params = True
            # an argument that is a device (`Net(device)`, `Net(dev="cuda")`); a bare number is a size here, not a
            # device ordinal (`Model(layer, vocab_size=5)`), unless its keyword names a device
            given = [
                a
                for a, keyword in [*((a, None) for a in node.args), *((k.value, k.arg) for k in node.keywords)]
                if not (int_literal(a) is not None and "device" not in (keyword or "").lower())
            ]
            devices_given = device is not None or any(self.device_where(a) is not None for a in given)
            feeds = self._fed_device(full, node) if aware and params else None
            if aware and _moves_own_inputs(self.ctx.kinds.classes[full]):
                # `x = x.to(self.device)` in its forward, `self.device` where its weights are: inputs from anywhere
                return Val("module", made_here, fresh=made_here == HOST, params=False)
            if feeds is not None:  # it moves its inputs to a device it is given, and leaves its weights where built
                return Val("module", made_here, fresh=made_here == HOST, params=params, feeds=feeds)
            placed = self._built_on(full, node) if aware and devices_given else None
            if placed is not None:  # `SpeakerEncoder(device, loss_device)` moving each layer `.to(device)`
                return Val("module", placed[0], dev=placed[1], params=params)
            placed = self._moved_in_init(full, node) if aware and params else None
            if placed is not None:  # `self.to(Config.DEVICE)` at the end of its `__init__`
                return Val("module", placed[0], dev=placed[1], params=params)
            if aware or (devices_given and not self._device_kept_only(full, node)):
                return Val("module", params=params)
            return Val("module", made_here, fresh=made_here == HOST, params=params)
        owner, _, method = full.rpartition(".")
        if self.ctx.kinds.class_is_module(owner) and self._builds_own(owner, method):
            # `ConvTasNet.load_model(path)`: a classmethod that builds the class (`cls(...)`) and loads its weights
            params, aware = self._class_info(owner)
            if aware:
                return Val("module", params=params)
            return Val("module", made_here, fresh=made_here == HOST, params=params)
        return None

    def _builds_own(self, name: str, method: str, depth: int = 0) -> bool:
        """Whether ``name.method`` is a classmethod of the module class ``name`` that returns a new instance of it.

        Each of its ``return`` statements gives ``cls(...)``, a name bound only to that, or another such classmethod
        of the class (``cls.load_model_from_package(package)``); nothing in it moves anything, so the instance is
        where ``cls(...)`` built it (loading a state dict copies into its weights where they are).
        """
        cls = self.ctx.kinds.classes.get(name)
        func = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == method), None) if cls else None
        if func is None or depth > 2 or not func.args.args:
            return False
        if [dotted(d) for d in func.decorator_list] != ["classmethod"]:
            return False
        me = func.args.args[0].arg
        if any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MOVES
            for n in ast.walk(func)
        ):
            return False

        def builds(value: ast.expr | None) -> bool:
            if not isinstance(value, ast.Call):
                return False
            if isinstance(value.func, ast.Name) and value.func.id == me:
                return True
            inner = value.func
            return (
                isinstance(inner, ast.Attribute)
                and dotted(inner.value) == me
                and self._builds_own(name, inner.attr, depth + 1)
            )

        returns = [n for n in ast.walk(func) if isinstance(n, ast.Return)]
        if not returns:
            return False
        for ret in returns:
            value = ret.value
            if isinstance(value, ast.Name):
                bound = [
                    n.value
                    for n in ast.walk(func)
                    if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
                ]
                if not bound or not all(builds(b) for b in bound):
                    return False
            elif not builds(value):
                return False
        return True

    def _lambda_helper(self, func: ast.expr) -> ast.Lambda | None:
        """The lambda a module-level name is bound to, once in the file, where the call is of that name.

        ``Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else ...``: a
        helper written as a lambda. ``None`` otherwise.
        """
        if not isinstance(func, ast.Name):
            return None
        scope = self.ctx.enclosing_function(func)
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) and func.id in bound_names(scope):
            return None  # a local variable of that name
        values = self.ctx.kinds.assigned_values(func.id)
        if len(values) != 1 or not isinstance(values[0], ast.Lambda):
            return None
        holder = self.ctx.parent(values[0])
        if not isinstance(holder, ast.Assign) or self.ctx.parent(holder) is not self.ctx.tree:
            return None
        return values[0]

    def _lambda_value(self, helper: ast.Lambda, node: ast.Call, args: Args) -> Val:
        """What calling ``helper`` with ``args`` gives: its body read with its parameters bound to them."""
        params = helper.args
        names = [a.arg for a in [*params.posonlyargs, *params.args]]
        flat = _unstarred(node, args)
        if (
            params.kwonlyargs
            or len(flat) < len(names) - len(params.defaults)
            or (len(flat) > len(names) and params.vararg is None)
        ):
            return UNKNOWN
        saved = self.env
        self.env = dict(saved)
        for name in names:
            self.env.pop(name, None)
        for name, val in zip(names, flat, strict=False):
            self.env[name] = replace(val, origin=None, name=name)
        if params.vararg is not None:
            self.env[params.vararg.arg] = Val("tuple", items=tuple(flat[len(names) :]))
        if params.kwarg is not None:
            self.env.pop(params.kwarg.arg, None)
        self.silent += 1
        try:
            return self.ev(helper.body)
        finally:
            self.silent -= 1
            self.env = saved

    def _rebuilt(self, helper: ast.FunctionDef) -> None:
        """``self.build_model()`` as a statement of another method: what it sets is as ``__init__`` left it.

        Only for a helper that ``__init__`` calls too (see :func:`init_helpers`): each call builds the same
        (``del self.unet; self.build_model()`` before the test in Image_Segmentation's ``train``).
        """
        cls = self.ctx.enclosing_class(helper)
        if cls is None:
            return
        init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        if init is None or helper not in init_helpers(self.ctx, cls, init).values():
            return
        held = self.instance_attributes(cls)
        for node in ast.walk(helper):
            if isinstance(node, ast.Attribute) and dotted(node.value) == "self" and isinstance(node.ctx, ast.Store):
                key = f"self.{node.attr}"
                if key in held:
                    self.env[key] = held[key]
                else:
                    self.env.pop(key, None)

    def _storage_moved(self, owner: str, method: ast.FunctionDef, device: ast.expr) -> None:
        """``rollouts.to(device)`` where the class's method moves some of the tensors ``__init__`` makes on the host.

        a2c-ppo-acktr's ``RolloutStorage``: ``__init__`` makes ``self.obs = torch.zeros(...)`` and the others,
        ``to(self, device)`` does ``self.obs = self.obs.to(device)`` for each. After the call, ``rollouts.obs`` is
        on that device, and a host tensor of ``__init__`` that ``to`` leaves out is still on the host. Only tensors
        no other method rebinds; nothing when the method does anything else.
        """
        params = [a.arg for a in method.args.args]
        if len(params) != 2:
            return
        moved: set[str] = set()
        for stmt in method.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # a docstring
            if (  # `self.actions.to(device)` as a statement: a move thrown away, nothing moved
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Attribute)
                and stmt.value.func.attr == "to"
                and (dotted(stmt.value.func.value) or "").startswith(f"{params[0]}.")
            ):
                continue
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            value = stmt.value if isinstance(stmt, ast.Assign) else None
            if not (isinstance(target, ast.Attribute) and dotted(target.value) == params[0]):
                return
            if value is not None and dotted(value) == f"{params[0]}.{target.attr}":
                continue  # `self.obs = self.obs`: kept where it is
            if not (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr == "to"
                and dotted(value.func.value) == f"{params[0]}.{target.attr}"
                and len(value.args) == 1
                and dotted(value.args[0]) == params[1]
            ):
                return
            moved.add(target.attr)
        cls = self.ctx.enclosing_class(method)
        where = self.device_where(device)
        if cls is None or not moved or where is None:
            return
        made = _host_tensors_of_init(self.ctx, cls, method)
        for attr in moved:
            self.env[f"{owner}.{attr}"] = Val("tensor", where, dims=made.get(attr, 0), dev=self.segment(device))
        for attr, dims in made.items():
            if attr not in moved:
                self.env[f"{owner}.{attr}"] = Val("tensor", HOST, dims=dims)

    def _fed_device(self, name: str, node: ast.Call) -> str | None:
        """The device this construction gives a module class that moves its inputs there but not itself.

        ``self.dev = args.device`` in ``__init__`` and ``.to(self.dev)`` of tensors made from its inputs in its
        methods, with no other move in the class: built with ``SASRec(usernum, itemnum, args)``, its inputs go to
        ``args.device`` and its weights stay where they were built. Returns that device's text when it is the
        chosen device (an accelerator on a GPU run), else ``None``.
        """
        kept = _kept_input_device(self.ctx.kinds.classes[name])
        if kept is None or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        param, index, attr = kept
        given = node.args[index] if index is not None and index < len(node.args) else None
        given = given or next((k.value for k in node.keywords if k.arg == param), None)
        if given is None:
            return None
        expr: ast.expr = given
        if attr is not None:
            expr = ast.copy_location(ast.Attribute(value=given, attr=attr, ctx=ast.Load()), given)
        if self.device_where(expr) != DEVICE:
            return None
        return self.segment(given) + (f".{attr}" if attr is not None else "")

    def _next_of_iterator(self, name: str, node: ast.Call) -> Val | None:
        """What each step of iterating an instance of the plain class ``name`` gives, where its ``__next__`` says.

        Chinese-Text-Classification's ``DatasetIterater``: ``__iter__`` returns ``self`` and ``__next__`` returns
        ``self._to_tensor(batches)``, tensors moved with ``.to(self.device)``, ``self.device`` as the construction
        ``node`` gives it. ``None`` where the class is no such iterator or the batch is not a tensor or a tuple.
        """
        cls = self.ctx.kinds.classes[name]
        methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
        iterate, step = methods.get("__iter__"), methods.get("__next__")
        if iterate is None or step is None or not self._plain_class(cls):
            return None
        returned = [n.value for n in ast.walk(iterate) if isinstance(n, ast.Return)]
        if len(returned) != 1 or not (isinstance(returned[0], ast.Name) and returned[0].id == "self"):
            return None
        call = ast.copy_location(ast.Call(func=node.func, args=[], keywords=[]), node)
        batch = self.method_returned(step, call, [], {})
        return batch if batch.what in ("tuple", *TENSORISH) and batch.what != "unknown" else None

    def _relayed_argument(self, name: str, node: ast.Call) -> ast.expr | None:
        """The argument of this construction of the plain class ``name`` whose items iterating the object gives.

        A progress or logging wrapper around a loader: ``__init__`` keeps a parameter (``self.iterable =
        iterable``) and ``__iter__`` gives its items as they come (``return iter(self.iterable)``, ``yield from
        self.iterable``, ``for item in self.iterable: yield item``).
        """
        cls = self.ctx.kinds.classes[name]
        methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
        init, iterate = methods.get("__init__"), methods.get("__iter__")
        if init is None or iterate is None or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        kept = _kept_attribute(iterate)
        if kept is None:
            return None
        params = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        keyword_only = [a.arg for a in init.args.kwonlyargs]
        source = next(
            (
                stmt.value.id
                for stmt in init.body
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name)
                for target in stmt.targets
                if isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and target.attr == kept
            ),
            None,
        )
        if source is None or source not in params + keyword_only:
            return None
        if source in params and params.index(source) < len(node.args):
            return node.args[params.index(source)]
        return next((k.value for k in node.keywords if k.arg == source), None)

    def _dataset_class(self, name: str, depth: int = 0) -> bool:
        """Whether the class ``name`` of the file is a map-style ``torch.utils.data`` dataset (not a module).

        Directly or through classes of the file; not an ``IterableDataset`` or a ``TensorDataset``.
        """
        cls = self.ctx.kinds.classes.get(name)
        if cls is None or depth > 5 or self.ctx.kinds.class_is_module(name):
            return False
        for base in cls.bases:
            full = self.ctx.qualname(base) or ""
            if full.startswith("torch.utils.data.") and full.endswith("Dataset") and full not in TENSOR_DATASETS:
                return "Iterable" not in full
            if full in self.ctx.kinds.classes and self._dataset_class(full, depth + 1):
                return True
        return False

    def _vision_dataset(self, node: ast.Call) -> Val:
        """A ``torchvision.datasets`` dataset: its images and targets are made on the host.

        Unless a transform of the file's own may move them: a ``lambda`` or a function or class of the file in its
        arguments leaves its batches unknown.
        """
        own = set(self.local_functions) | set(self.ctx.kinds.classes)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for inner in ast.walk(arg):
                if isinstance(inner, ast.Lambda) or (isinstance(inner, ast.Name) and inner.id in own):
                    return Val("dataset")
                if isinstance(inner, ast.Attribute) and inner.attr in MOVES:
                    return Val("dataset")
        if any(k.arg is None for k in node.keywords):
            return Val("dataset")
        return Val("dataset", HOST)

    def _loader(self, node: ast.Call, args: Args, kwargs: Kwargs) -> Val:
        """A ``DataLoader``: its batches are where a ``TensorDataset``'s tensors are.

        Over a dataset class of the file, where its samples are made; over a dataset the file does not show, on the
        host. A ``collate_fn`` of the file gives the batches what it returns; another one (nested in a function, a
        lambda, imported) may put them anywhere, so they are known only as the loop that reads them shows them (see
        :func:`moves_items`).
        """
        if self._pinned(node):
            return Val("loader", HOST)  # `pin_memory=True` pins host tensors (a device tensor there is an error)
        collate = next((k.value for k in node.keywords if k.arg == "collate_fn"), None)
        if collate is not None:
            return self._collated(collate)
        if len(node.args) > 5:
            return UNKNOWN
        dataset = args[0] if args else kwargs.get("dataset", UNKNOWN)
        if dataset.what == "dataset":
            return Val("loader", dataset.where, items=dataset.items, item=dataset.item)
        if dataset.where is None and dataset.what in ("unknown", "other", "seq"):
            # a dataset the file does not show (`DataLoader(self.train_set, ...)`): the default collate stacks its
            # samples where they are, and a dataset makes them on the host (worker processes cannot even hand
            # out CUDA tensors); a dataset the file shows on a device keeps its place above
            return Val("loader", HOST)
        return Val("loader")

    def _pinned(self, node: ast.Call) -> bool:
        """Whether a ``DataLoader(...)`` call pins its batches.

        ``pin_memory=True``, directly or in the ``**kwargs`` dict it is given (``loader_args = dict(batch_size=8,
        pin_memory=True)``, bound once).
        """
        for keyword in node.keywords:
            value: ast.AST | None = keyword.value
            if keyword.arg is None and isinstance(keyword.value, ast.Name):
                values = list(self.ctx.kinds.assigned_values(keyword.value.id))
                value = values[0] if len(values) == 1 else None
                if isinstance(value, ast.Call) and self.ctx.call_name(value) == "dict" and not value.args:
                    value = next((k.value for k in value.keywords if k.arg == "pin_memory"), None)
                elif isinstance(value, ast.Dict):
                    pairs = zip(value.keys, value.values, strict=True)
                    value = next((v for k, v in pairs if isinstance(k, ast.Constant) and k.value == "pin_memory"), None)
                else:
                    value = None
            elif keyword.arg != "pin_memory":
                continue
            if isinstance(value, ast.Constant) and value.value is True:
                return True
        return False

    def _collated(self, collate: ast.expr) -> Val:
        """A ``DataLoader`` whose ``collate_fn`` is a function of this file: its batches are what that returns.

        Any other ``collate_fn``, or one whose value is not known: a loader of batches of unknown place.
        """
        if not isinstance(collate, ast.Name) or collate.id not in self.local_functions:
            return Val("loader")
        func = self.local_functions[collate.id]
        if len([*func.args.posonlyargs, *func.args.args]) != 1:
            return Val("loader")
        call = ast.Call(ast.Name(id=collate.id, ctx=ast.Load()), [ast.Name(id="batch", ctx=ast.Load())], [])
        batch = self.returned(call, [UNKNOWN], {})  # `return x.to(device), y.to(device)` for a list of samples
        if batch.what == "tuple" and batch.items:
            # an item the analysis cannot follow (`torch.stack(images, 0)` of the samples) is a batch part of unknown
            # place, which the loop that reads it may show to be on the host (see `moves_items`)
            items = tuple(Val("batch", item=True) if item.what == "unknown" else item for item in batch.items)
            return Val("loader", items=items)
        if batch.what in TENSORISH:
            return Val("loader", batch.where)
        return Val("loader")

    def _factory(self, node: ast.Call, name: str, args: Args, device: ast.expr | None, made_here: str | None) -> Val:
        """``torch.zeros(...)``, ``torch.tensor(data)``: on ``device=`` if given, else on the host.

        ``**kwargs`` may carry a device (``torch.eye(n, **dd)`` with ``dd = dict(device=..., dtype=...)``): unknown.
        """
        if device is None and any(k.arg is None for k in node.keywords):
            return Val("tensor")
        listed = bool(node.args and args and args[0].what == "seq")  # `torch.tensor(labels)` of a list: 1-D at least
        scalar = self._shape_scalar(node, name) and not listed
        dims = max(shape_dims(node, name), int(listed))
        if device is not None:
            where = self.target_where(device)
            return Val("tensor", where, scalar=scalar, dims=dims, dev=self.segment(device))
        if name in ("as_tensor", "asarray", "tensor") and node.args:
            first = args[0]
            if first.what in (*TENSORISH, "any"):  # a tensor stays where it is
                return replace(first, what="tensor", origin=None)
            kind = self.ctx.kind(node.args[0])
            if kind is not None and kind.is_tensor:
                return Val("tensor")
            data = first.what in ("seq", "tuple", "number", "other") or isinstance(node.args[0], ast.Constant)
            if not (data or (kind is not None and kind.name == "ndarray") or name == "tensor"):
                return Val("tensor")  # `torch.as_tensor(x)` of an unknown `x` may be a device tensor
        return Val("tensor", made_here, scalar=scalar, dims=dims)

    def _combined(self, node: ast.Call, pairs: list[tuple[Val, ast.expr]], stacked: bool = False) -> None:
        """FRY006 for a host tensor among ``pairs`` (values, nodes) that one call combines with a device tensor.

        ``stacked``: the items of ``torch.stack``/``torch.cat``, which make no exception for 0-dim CPU tensors.
        """
        device = next(((v, n) for v, n in pairs if v.where == DEVICE and v.what in TENSORISH), None)
        if device is None or any(isinstance(n, ast.Starred) for _, n in pairs):
            return
        for val, arg in pairs:
            if self._mixes(node, replace(val, scalar=False) if stacked else val, device[0], arg, device[1]):
                return

    def _follow(self, node: ast.Call, name: str, args: Args, kwargs: Kwargs) -> Val:
        """A torch function: the result is where its first tensor argument is."""
        if self.ctx.call_name(node) in ("torch.autograd.grad", "torch.autograd.backward"):
            # `grad(outputs=y, inputs=x, grad_outputs=torch.ones(y.size()))`: each gradient where its output is
            given = dict(zip(("outputs", "inputs", "grad_outputs"), zip(args, node.args, strict=False), strict=False))
            named = ("outputs", "tensors", "grad_outputs", "grad_tensors")
            given.update((k.arg, (kwargs[k.arg], k.value)) for k in node.keywords if k.arg in named)
            pairs = [given[k] for k in named if k in given]
            if len(pairs) == 2:  # the engine moves a 0-dim gradient to its output's device, any other fails
                self._combined(node, pairs)
        # `dim=`/`axis=` choose where to join (`torch.cat([a, b], dim=0)`); other keywords (`out=`) may place the result
        if name in COMBINING_FUNCTIONS and all(k.arg in ("dim", "axis") for k in node.keywords):
            first_arg = node.args[0] if node.args else None
            if isinstance(first_arg, ast.List | ast.Tuple) and name in _SEQUENCE_FUNCTIONS:
                self._combined(node, [(self._peek(item), item) for item in first_arg.elts], stacked=True)
            elif name not in _SEQUENCE_FUNCTIONS:
                self._combined(node, list(zip(args, node.args, strict=False)))
        if (
            name in ("min", "max")
            and len(node.args) == 2
            and not node.keywords
            and all(a.what in TENSORISH for a in args[:2])
        ):  # `torch.min(torch.Tensor([k]), labels.sum(1))`: two tensors, elementwise, as `torch.minimum`
            self._combined(node, list(zip(args, node.args, strict=False)))
        if name in _GRID_FUNCTIONS and self.ctx.call_name(node) == f"torch.{name}":
            # `torch.meshgrid(torch.arange(h), torch.arange(w, device=device), indexing="ij")`: every grid input on
            # one device, a 0-dim one too; the inputs one by one or as one list
            first_arg = node.args[0] if node.args else None
            if len(node.args) == 1 and isinstance(first_arg, ast.List | ast.Tuple):
                self._combined(node, [(self._peek(item), item) for item in first_arg.elts], stacked=True)
            else:
                pairs = [(replace(v, scalar=False), n) for v, n in zip(args, node.args, strict=False)]
                self._combined(node, pairs)
        first: Val | None
        if (
            node.args
            and isinstance(node.args[0], ast.List | ast.Tuple | ast.ListComp)
            and args[0].what in ("seq", "tuple")
        ):
            first = args[0].element if args[0].what == "seq" else _on_device(args[0].items) or agree(args[0].items)
        elif name in _SEQUENCE_FUNCTIONS and args and args[0].what == "seq":
            first = args[0].element  # `torch.cat(text_list)` of a list the code appended tensors to
        else:
            first = next((a for a in [*args, *kwargs.values()] if a.what in TENSORISH), None)
            if first is None and args and args[0].what == "any" and not args[0].inplace and args[0].where:
                first = replace(args[0], what="tensor")  # `torch.cumprod(self.alpha, 0)`: a moved value is a tensor
        if first is None or first.what not in TENSORISH:
            return UNKNOWN
        return Val("tensor", first.where, scalar=first.scalar or name in REDUCTIONS, dev=first.dev)

    def _build_nn(self, node: ast.Call, name: str, args: Args, device: ast.expr | None, made_here: str | None) -> Val:
        """A ``torch.nn`` class: on the host unless built with ``device=``; does it hold parameters?"""
        if any(k.arg is None for k in node.keywords):
            return Val("module")
        where = made_here if device is None else self.target_where(device)
        if name in HOST_TARGET_LOSSES:  # its targets and lengths may stay on the CPU
            return Val("module", where, params=False)
        if name.endswith("Loss"):
            weight = next((k.value for k in node.keywords if k.arg in LOSS_WEIGHTS), None)
            if weight is None and node.args and name in WEIGHT_FIRST_LOSSES:
                weight = node.args[0]
            held = self._peek(weight) if weight is not None else None
            if held is not None and held.what in TENSORISH and held.where == HOST:
                return Val("module", where, fresh=where == HOST, params=True, loss=True, weight=weight)
            return Val("module", where, params=weight is not None or None, loss=True, fresh=where == HOST)
        params: bool | None = None
        if name in LAYERS_WITH_PARAMETERS:
            params = True
        elif name.startswith("InstanceNorm"):
            params = _norm_with_state(node)
        elif name in LAYERS_WITHOUT_PARAMETERS:
            params = False
        elif name in ("Sequential", "ModuleList"):
            args = _unstarred(node, args)  # `nn.Sequential(*layers, *head)`: the layers of each list
            parts = [a for a in args if a.what == "module"]
            if parts and len(parts) == len(args):
                known = [p.params for p in parts]
                params = True if any(known) else False if all(k is False for k in known) else None
            elif args and args[0].what == "seq" and args[0].element is not None and args[0].element.what == "module":
                params = args[0].element.params
        return Val("module", where, fresh=where == HOST, params=params)

    def _fresh_factory(self, node: ast.AST) -> bool:
        """``torch.zeros(...)``, ``torch.tensor(...)``: a tensor made right here (moving it moves nothing else)."""
        if not isinstance(node, ast.Call):
            return False
        full = self.ctx.qualname(node.func) or ""
        return full.startswith("torch.") and full.rsplit(".", 1)[-1] in FACTORIES | DATA_FACTORIES

    def _made_fresh(
        self, node: ast.expr, func: ast.FunctionDef | ast.AsyncFunctionDef, line: int, depth: int = 0
    ) -> bool:
        """A tensor ``func`` makes itself, or a name it binds above ``line`` only to such tensors or moves of itself.

        A factory (legacy constructors too) under casts, arithmetic and in-place fills.

        RVAE's negative samples: ``noise = t.Tensor(batch_size, k).uniform_(0, n - 1).long()``, then ``if use_cuda:
        noise = noise.cuda()``: moving it moves nothing the module holds or was given.
        """
        for _ in range(6):
            if self._fresh_factory(node) or (
                isinstance(node, ast.Call)
                and (self.ctx.qualname(node.func) or "") in LEGACY_HOST
                and new_memory(node)  # sizes, not a conversion of what the caller passed (`torch.LongTensor(seqs)`)
            ):
                return True
            if isinstance(node, ast.BinOp):
                node = node.left
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr != "__call__":
                node = node.func.value
            else:
                break
        if not isinstance(node, ast.Name) or depth > 0:
            return False
        values = [
            n.value
            for n in ast.walk(func)
            if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign)
            and n.lineno < line
            and any(isinstance(t, ast.Name) and t.id == node.id for t in _assign_targets(n))
        ]
        stored = sum(
            1
            for n in ast.walk(func)
            if isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Store) and n.lineno < line
        )
        if not values or stored != len(values) or any(v is None for v in values):
            return False  # also bound by a loop, a `with`, an unpacking or a parameter: not known
        if node.id in {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}:
            return False
        return all(
            v is not None
            and (
                self._made_fresh(v, func, line, depth + 1)
                or (  # `noise = noise.cuda()`: a move of itself
                    isinstance(v, ast.Call)
                    and isinstance(v.func, ast.Attribute)
                    and v.func.attr in MOVES
                    and isinstance(v.func.value, ast.Name)
                    and v.func.value.id == node.id
                )
            )
            for v in values
        )

    def _class_info(self, name: str) -> tuple[bool | None, bool]:
        """For a module class of the file: (holds parameters?, deals with devices itself?).

        A class deals with devices itself when its ``__init__`` or ``forward`` takes a device, a method moves
        itself, a part of itself or its inputs, or its ``forward`` moves anything but a tensor it makes right there
        (``torch.zeros(...).to(device)`` moves no weight; other moves may put its outputs anywhere). A dtype
        conversion (``X.to(torch.float32)``) is not a move.
        """
        if name in self._classes:
            return self._classes[name]
        self._classes[name] = (None, True)  # recursion guard
        cls = self.ctx.kinds.classes[name]
        params: bool | None = None
        aware = False
        for base in cls.bases:
            full = self.ctx.qualname(base) or ""
            if full.startswith("torch.nn.") and full.rsplit(".", 1)[-1] in LAYERS_WITH_PARAMETERS:
                params = True
            elif full in self.ctx.kinds.classes:
                base_params, base_aware = self._class_info(full)
                params = params or base_params
                aware = aware or base_aware
        forward_args: set[str] = set()
        host_loss = False
        overrides = {n for m in cls.body if _moving_override(m) for n in ast.walk(m)}
        # a static method is a function kept in the class (`train_step(model, optimizer, iterator, args)`): what it
        # moves are its arguments, not this module's weights or inputs
        overrides |= {n for m in cls.body if isinstance(m, ast.FunctionDef) and is_static(m) for n in ast.walk(m)}
        for node in ast.walk(cls):  # breadth first: every method is seen before the calls in it
            if node in overrides:
                continue  # `def to(self, device): self.scale = self.scale.to(device); return super().to(device)`
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]]
                if node.name == "__init__":  # other methods count when they move `self`
                    aware = aware or any(self._places_weights(cls, node, n) for n in names if "device" in n.lower())
                elif node.name in ("forward", "__call__"):
                    aware = aware or any("device" in n.lower() for n in names)
                if node.name in ("forward", "__call__"):
                    forward_args.update(n for n in names if n != "self")
                    aware = aware or any(
                        isinstance(c, ast.Call)
                        and isinstance(c.func, ast.Attribute)
                        and c.func.attr in MOVES
                        and not self._made_fresh(c.func.value, node, c.lineno)
                        and not self._converts_only(c)  # `X = X.to(torch.float32)` in forward
                        and not self._to_host(c)  # `lengths.to("cpu")` for pack_padded_sequence: weights stay put
                        for c in ast.walk(node)
                    )
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in MOVES and not self._converts_only(node):
                    receiver = (dotted(func.value) or ".").split(".")[0]
                    # an input moved to the host (`lengths.to("cpu")` to pack a sequence) leaves the weights put
                    # a host copy read on (`self.in_embed.weight.data.cpu().numpy()`) moves no weight either
                    copied = self._to_host(node) and isinstance(self.ctx.parent(node), ast.Attribute)
                    aware = aware or (receiver == "self" and not copied)
                    aware = aware or (receiver in forward_args and not self._to_host(node))
                if isinstance(func, ast.Attribute) and func.attr in ("register_buffer", "register_parameter"):
                    params = True
                full = self.ctx.qualname(func) or ""
                if (
                    (full.startswith("torch.nn.") and full.rsplit(".", 1)[-1] in LAYERS_WITH_PARAMETERS)
                    or full in ("torch.nn.Parameter", "torch.nn.parameter.Parameter", "timm.create_model")
                    or (full.startswith("torch.nn.InstanceNorm") and _norm_with_state(node))
                ):
                    params = True
                elif full in self.ctx.kinds.classes and full != name and self.ctx.kinds.class_is_module(full):
                    part_params, _ = self._class_info(full)  # `self.conv1 = ConvLayer(...)`: a layer of the file
                    params = params or part_params
                    # a part that moves its own layers when it is built (`if self.gpu: self.lstm = self.lstm.cuda()`)
                    # puts some of this module's weights where it chooses
                    aware = aware or moves_own_layers(self.ctx, full)
                elif full.startswith("torch.") and full.rsplit(".", 1)[-1] in HOST_TARGET_LOSSES:
                    host_loss = True
                elif isinstance(func, ast.Name) and self._layer_factory(func.id):
                    params = True  # `self.encoder = nn.Sequential(conv_block(1, 64), ...)`: a helper's layers
        if params is None and host_loss:
            params = False  # a wrapper of `F.ctc_loss`: its targets and lengths may stay on the host
        self._classes[name] = (params, aware)
        return params, aware

    def _layer_factory(self, name: str, depth: int = 0) -> bool:
        """Whether ``name`` is a function of the file that returns layers with parameters it builds.

        ``def conv_block(i, o): return nn.Sequential(nn.Conv2d(i, o, 3), nn.BatchNorm2d(o), nn.ReLU())``; also one
        that builds a module class of the file holding parameters, or calls such a function (pytorch-fid's
        ``fid_inception_v3()`` -> ``_inception_v3(...)`` -> ``Inception3(...)``).
        """
        func = next(
            (s for s in self.ctx.tree.body if isinstance(s, ast.FunctionDef) and s.name == name),
            None,
        )
        if func is None or not any(isinstance(r, ast.Return) and r.value is not None for r in ast.walk(func)):
            return False
        for call in ast.walk(func):  # `layers = [nn.Conv2d(...), ...]; return nn.Sequential(*layers)` too
            full = self.ctx.qualname(call.func) if isinstance(call, ast.Call) else None
            if full and full.startswith("torch.nn.") and full.rsplit(".", 1)[-1] in LAYERS_WITH_PARAMETERS:
                return True
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)) or call.func.id == name:
                continue
            built = call.func.id
            if built in self.ctx.kinds.classes and self.ctx.kinds.class_is_module(built):
                if self._class_info(built)[0]:
                    return True
            elif depth < 2 and self._layer_factory(built, depth + 1):
                return True
        return False

    def _device_kept_only(self, name: str, node: ast.Call) -> bool:
        """Whether every device that ``node`` hands the module class ``name`` only feeds factories (see below).

        ``UNet(num_classes=10, device=device)`` whose ``__init__`` keeps ``self.device = device`` for the
        ``torch.arange(..., device=self.device)`` of its forward builds its layers on the host all the same.
        """
        cls = self.ctx.kinds.classes[name]
        init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is None or init.args.kwarg is not None or init.args.vararg is not None:
            return False
        positional = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        named = [a.arg for a in init.args.kwonlyargs]
        passed = [*zip(positional, node.args, strict=False), *((k.arg, k.value) for k in node.keywords)]
        for param, value in passed:
            if param is None or param not in (*positional, *named):
                return False
            if (self.device_where(value) is None or int_literal(value) is not None) and "device" not in param.lower():
                continue  # a bare number is a size or an index here (`pad_idx=0`), as for the call's devices
            if "device" not in param.lower() or self._places_weights(cls, init, param):
                return False
        return True

    def _built_on(self, name: str, node: ast.Call) -> tuple[str, str] | None:
        """Where a module class of the file that builds each of its layers on a device it is given is built.

        Its ``__init__`` moves every layer with weights that it keeps to the same parameter (``self.lstm =
        nn.LSTM(...).to(device)``, ``self.fc = self.fc.to(device)``; an ``nn.Parameter`` may go elsewhere, as a loss
        device); the construction's argument for it says where (``SpeakerEncoder(device, loss_device)``), with how
        it is written. ``None`` when a layer is not moved, layers go to different parameters, or the argument's
        place is not known. Only classes whose only base is ``nn.Module``.
        """
        cls = self.ctx.kinds.classes.get(name)
        if cls is None or [self.ctx.qualname(b) for b in cls.bases] != ["torch.nn.Module"]:
            return None
        init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        if init is None or not init.args.args:
            return None
        me = init.args.args[0].arg
        names = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        layers: set[str] = set()
        moved: dict[str, set[str]] = {}
        for stmt in ast.walk(init):
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                continue
            target = stmt.targets[0]
            if not (isinstance(target, ast.Attribute) and dotted(target.value) == me):
                continue
            value: ast.expr = stmt.value
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
                if value.func.attr == "to" and value.args and isinstance(value.args[0], ast.Name):
                    moved.setdefault(target.attr, set()).add(value.args[0].id)
                value = value.func.value
            full = self.ctx.call_name(value) if isinstance(value, ast.Call) else None
            if full in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
                moved.pop(target.attr, None)
                continue
            if isinstance(value, ast.Call) and self._builds_layer_with_weights(value):
                layers.add(target.attr)
        for call in ast.walk(init):  # `self.fc.to(device)` as a statement
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "to":
                owner = call.func.value
                to = call.args[0] if call.args else None
                if isinstance(owner, ast.Attribute) and dotted(owner.value) == me and isinstance(to, ast.Name):
                    moved.setdefault(owner.attr, set()).add(to.id)
        if not layers or any(layer not in moved for layer in layers):
            return None
        used = set().union(*(moved[layer] for layer in layers))
        if len(used) != 1 or next(iter(used)) not in names:
            return None
        param = next(iter(used))
        index = names.index(param)
        arg = node.args[index] if index < len(node.args) else None
        arg = next((k.value for k in node.keywords if k.arg == param), arg)
        where = self.device_where(arg) if arg is not None else None
        return (where, self.segment(arg)) if where is not None and arg is not None else None

    def _moved_in_init(self, name: str, node: ast.Call, depth: int = 0) -> tuple[str, str] | None:
        """Where the module class ``name`` of the file puts its weights itself when ``node`` builds it.

        Its ``__init__`` ends by moving the whole module (``self.to(Config.DEVICE)``, ``self.cuda()``), or moves each
        layer with weights that it keeps (``self.lstm = self.lstm.cuda()``), or builds it from module classes of the
        file that do, at its top level or in the branch that runs on an accelerator (``if self.gpu:`` with
        ``self.gpu = data.HP_gpu`` and ``data.HP_gpu = torch.cuda.is_available()``). The device is the one the move
        names: a parameter of ``__init__`` is what the construction passes. ``None`` when a layer is built after the
        move, a layer is left where it was built, or the device is not known.
        """
        cls = self.ctx.kinds.classes.get(name)
        methods = cls.body if cls is not None else []
        init = next((m for m in methods if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        if init is None or not init.args.args or depth > 3 or init.args.vararg or init.args.kwarg:
            return None
        me = init.args.args[0].arg
        names = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]

        def device_of(call: ast.Call) -> tuple[str, str] | None:
            if isinstance(call.func, ast.Attribute) and call.func.attr == "cuda":
                return DEVICE, '"cuda"'
            to = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
            if to is None or not isinstance(call.func, ast.Attribute) or call.func.attr != "to":
                return None
            if isinstance(to, ast.Name) and to.id in names:
                index = names.index(to.id)
                given = node.args[index] if index < len(node.args) else None
                to = next((k.value for k in node.keywords if k.arg == to.id), given)
                where = self.device_where(to) if to is not None else None
            elif any(isinstance(n, ast.Name) and n.id == me for n in ast.walk(to)):
                return None  # `self.to(self.device)`: kept from elsewhere
            else:
                where = self.device_where(to, pure=True)
            return (where, self.segment(to)) if where == DEVICE and to is not None else None

        def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
            for stmt in body:
                if isinstance(stmt, ast.If):  # the accelerator's side, or both sides of another test
                    side = self._accelerator_branch(stmt.test)
                    if side is None:
                        yield from statements(stmt.body)
                    yield from statements(stmt.orelse if side is None or not side else stmt.body)
                    continue
                if isinstance(stmt, ast.For | ast.With):
                    yield from statements(stmt.body)
                    continue
                yield stmt

        layers: dict[str, int] = {}  # layer with weights kept -> line built
        moved: dict[str, tuple[str, str]] = {}
        moved_locals: dict[str, tuple[str, str]] = {}  # `init_transitions = init_transitions.cuda()`
        whole: tuple[int, tuple[str, str]] | None = None
        for stmt in statements(init.body):
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Attribute)
                and stmt.value.func.attr in ("to", "cuda")
                and dotted(stmt.value.func.value) == stmt.targets[0].id
                and not self._converts_only(stmt.value)
            ):
                found = device_of(stmt.value)
                if found is not None:
                    moved_locals[stmt.targets[0].id] = found
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                func = call.func
                if (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id == me
                    and func.attr in ("to", "cuda")
                    and not self._converts_only(call)
                ):
                    found = device_of(call)
                    if found is None:
                        return None
                    whole = (stmt.lineno, found)
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, value = stmt.targets[0], stmt.value
            if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me):
                continue
            if not isinstance(value, ast.Call):
                continue
            if isinstance(value.func, ast.Attribute) and value.func.attr in ("to", "cuda"):
                if not self._converts_only(value) and dotted(value.func.value) == f"{me}.{target.attr}":
                    found = device_of(value)
                    if found is None:
                        return None
                    moved[target.attr] = found
                continue
            full = self.ctx.call_name(value)
            if full in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") and value.args:
                layers[target.attr] = stmt.lineno  # `self.transitions = nn.Parameter(init_transitions)`
                data = value.args[0]
                if isinstance(data, ast.Name) and data.id in moved_locals:
                    moved[target.attr] = moved_locals[data.id]
                continue
            if self._builds_layer_with_weights(value):
                layers[target.attr] = stmt.lineno
                part = dotted(value.func)
                if part is not None and part in self.ctx.kinds.classes and part != name:
                    inner = self._moved_in_init(part, value, depth + 1)
                    if inner is not None:
                        moved[target.attr] = inner
        if whole is not None:
            return whole[1] if all(line < whole[0] for line in layers.values()) else None
        if not layers or any(layer not in moved for layer in layers):
            return None
        found_devices = {moved[layer] for layer in layers}
        return found_devices.pop() if len(found_devices) == 1 else None

    def _moved_in_dict(self, item: ast.Subscript, moved: Val, receiver: Val) -> None:
        """Record a module moved in place as the value a keyed dict holds under a literal key."""
        holder = dotted(item.value)
        held = self.env.get(holder) if holder is not None else None
        key = item.slice.value if isinstance(item.slice, ast.Constant) else None
        if holder is None or held is None or held.what != "dict" or not held.keys or not isinstance(key, str):
            return
        pairs = [(k, replace(moved, origin=receiver.origin) if k == key else v) for k, v in held.keys]
        self.env[holder] = keyed([k for k, _ in pairs], [v for _, v in pairs])

    def _registry_of_plain_classes(self, func: ast.Subscript) -> bool:
        """Whether ``func`` looks up a class in a dict of the file's plain classes (see :func:`registry`)."""
        entries = registry(self.ctx, func.value)
        return bool(entries) and all(
            isinstance(e, ast.Name)
            and e.id in self.ctx.kinds.classes
            and self._plain_class(self.ctx.kinds.classes[e.id])
            for e in entries or ()
        )

    def _registry_of_modules(self, func: ast.Subscript, node: ast.Call) -> bool:
        """Whether ``func`` looks a model builder up by name (``globals()[args.model]``, ``MODELS[name]``).

        A dict bound once at the top of the file whose values are all module classes of the file or functions that
        build one; or ``globals()``/``vars()`` when the file's own code treats what the call returns as a model
        with weights (the name it is bound to gives ``.parameters()``/``.named_parameters()``) and defines at
        least one such builder.
        """
        table = func.value
        if isinstance(table, ast.Call) and isinstance(table.func, ast.Name) and table.func.id in ("globals", "vars"):
            if table.args:
                return False
            builders = [
                s.name
                for s in self.ctx.tree.body
                if (
                    isinstance(s, ast.ClassDef)
                    and self.ctx.kinds.class_is_module(s.name)
                    and self._class_info(s.name)[0]
                )
                or (isinstance(s, ast.FunctionDef) and self._layer_factory(s.name))
            ]
            above = self.ctx.parent(node)
            if not builders or not (
                isinstance(above, ast.Assign) and len(above.targets) == 1 and isinstance(above.targets[0], ast.Name)
            ):
                return False
            name = above.targets[0].id
            scope = self.ctx.enclosing_function(node) or self.ctx.tree
            return any(
                isinstance(use, ast.Attribute)
                and use.attr in ("parameters", "named_parameters")
                and isinstance(use.value, ast.Name)
                and use.value.id == name
                for use in ast.walk(scope)
            )
        entries = registry(self.ctx, table)
        if not entries:
            return False
        for value in entries:
            if not isinstance(value, ast.Name):
                return False
            if value.id in self.ctx.kinds.classes and self.ctx.kinds.class_is_module(value.id):
                if not self._class_info(value.id)[0]:
                    return False
            elif not self._layer_factory(value.id):
                return False
        return True

    def _builds_layer_with_weights(self, call: ast.Call) -> bool:
        """``nn.LSTM(...)``, ``nn.Sequential(...)`` or a module class of the file that holds weights."""
        full = self.ctx.call_name(call) or ""
        if full.startswith("torch.nn.") and full.rsplit(".", 1)[-1] in LAYERS_WITH_PARAMETERS | {"Sequential"}:
            return True
        name = dotted(call.func)
        return name is not None and name in self.ctx.kinds.classes and bool(self._class_info(name)[0])

    def _places_weights(self, cls: ast.ClassDef, init: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
        """Whether the device that ``__init__`` takes as ``name`` may place the module's weights.

        Not when it is only kept (``self.device = device``) and read by torch factories (``torch.arange(...,
        device=self.device)`` in ``forward``, ``torch.randn(...).to(self.device)``): they make new tensors there,
        while the layers stay on the host until the module is moved (a diffusion UNet built with ``device=``).
        """
        kept: set[str] = set()
        for use in ast.walk(init):
            if not (isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load)):
                continue
            above = self.ctx.parent(use)
            if isinstance(above, ast.Assign) and len(above.targets) == 1 and above.value is use:
                target = above.targets[0]
                if isinstance(target, ast.Attribute) and dotted(target.value) == "self":
                    kept.add(target.attr)
                    continue
            if not self._feeds_a_factory(use):
                return True
        for use in ast.walk(cls):
            if (
                isinstance(use, ast.Attribute)
                and isinstance(use.ctx, ast.Load)
                and dotted(use.value) == "self"
                and use.attr in kept
                and not self._feeds_a_factory(use)
            ):
                return True
        return False

    def _feeds_a_factory(self, use: ast.expr) -> bool:
        """``torch.arange(n, device=use)`` or ``torch.zeros(n).to(use)``: a device that places a new tensor only."""
        above = self.ctx.parent(use)
        if isinstance(above, ast.keyword) and above.arg == "device":
            call = self.ctx.parent(above)
            full = self.ctx.qualname(call.func) if isinstance(call, ast.Call) else None
            return full is not None and full.startswith("torch.") and full.rsplit(".", 1)[-1] in FACTORIES
        moved = isinstance(above, ast.Call) and above.args and above.args[0] is use
        if moved and isinstance(above, ast.Call) and isinstance(above.func, ast.Attribute):
            receiver: ast.expr = above.func.value
            for _ in range(6):  # `(torch.ones(n) * i).long().to(self.device)`: the factory under casts and arithmetic
                if self._fresh_factory(receiver):
                    break
                if isinstance(receiver, ast.BinOp):
                    receiver = receiver.left
                elif isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute):
                    receiver = receiver.func.value
                else:
                    break
            return above.func.attr == "to" and self._fresh_factory(receiver)
        return False

    # -- modules and losses called ----------------------------------------------------------------------------

    def _call_module(self, node: ast.Call, module: Val, args: Args, kwargs: Kwargs, method: bool = False) -> Val:
        """``module(x, ...)``: FRY006 for a host ``x`` into a module on the device, FRY007 for the reverse."""
        # `policy.act(state)`, `vae.decode(z)`, `model.forward(x)`: the module is the receiver of the method
        func = node.func.value if method and isinstance(node.func, ast.Attribute) else node.func
        if module.loss:
            return self._loss(node, module, args, kwargs)
        nodes: list[ast.expr] = list(node.args)
        unpacked: set[ast.expr] = set()  # `model(**inputs)`: the dicts whose values are the inputs
        star = nodes[0] if len(nodes) == 1 and isinstance(nodes[0], ast.Starred) else None
        packed = self.ev(star.value) if star is not None and isinstance(star.value, ast.Name | ast.Attribute) else None
        if packed is not None and packed.what == "tuple" and packed.items:
            args = list(packed.items)  # `model(*inputs)` with `inputs` a tuple of known items
            nodes = [node.args[0]] * len(args)
        elif packed is not None and packed.what == "seq" and packed.element is not None and star is not None:
            args = [packed]  # `model(*data)` with items alike: reported as a list of inputs is
            nodes = [star.value]
        elif not nodes and node.keywords:
            # `model(input_ids=ids, attention_mask=mask)`, `model(**inputs)` of a dict of known keys: the inputs
            # by keyword (lengths and sizes excepted, as for later positional inputs)
            named: list[tuple[Val, ast.expr]] = []
            for keyword in node.keywords:
                held = kwargs.get(keyword.arg, UNKNOWN)
                if keyword.arg is None and held.what == "dict" and held.keys:
                    named.extend((val, keyword.value) for key, val in held.keys if not _length_keyword(key))
                    unpacked.add(keyword.value)
                elif keyword.arg is not None and not _length_keyword(keyword.arg):
                    named.append((held, keyword.value))
            named = [(val, n) for val, n in named if val.what in TENSORISH]
            if not named:
                return Val("output", module.where, dev=module.dev) if module.where == DEVICE else UNKNOWN
            args, nodes = [v for v, _ in named], [n for _, n in named]
        elif not nodes or isinstance(nodes[0], ast.Starred):
            return Val("output", module.where, dev=module.dev) if module.where == DEVICE else UNKNOWN
        written = nodes[0].elts if isinstance(nodes[0], ast.Tuple | ast.List) else []
        if written and args[0].what == "tuple" and len(written) == len(args[0].items):
            # `model((positive_sample, negative_sample), mode)`: each tensor of the written tuple is an input
            args = [*args[0].items, *args[1:]]
            nodes = [*written, *nodes[1:]]
        element = args[0].element if args and args[0].what == "seq" else None
        listed = element is not None and element.what in TENSORISH
        if element is not None and listed:
            # `model(images)` with a list of image tensors (torchvision's detection models): each is an input
            args = [replace(element, origin=args[0].origin, name=args[0].name), *args[1:]]
        first, first_node = args[0], nodes[0]
        callee = self.label(module, func)
        origin = module.origin
        if (
            module.wrapper
            and module.where == HOST
            and module.fresh
            and module.params
            and origin is not None
            and not self.cpu_only
            and self._never_moved(func, origin)
        ):
            # TSN's `model = torch.nn.DataParallel(model, device_ids=args.gpus)` with its `model.cuda()` left out:
            # on a GPU machine the wrapper runs its module on `device_ids[0]`, and refuses weights elsewhere
            targets = origin.targets if isinstance(origin, ast.Assign) else []
            built = targets[0].id if len(targets) == 1 and isinstance(targets[0], ast.Name) else callee
            self.report(
                "FRY007",
                origin,
                f"`{built}` is built here and never moved, but it is wrapped in `DataParallel`, which on a GPU "
                f"machine runs it on `cuda:0` (its first device) and raises for weights on the CPU (called at line "
                f"{line(node)}); fix: `{built}.to(device)` before wrapping it, or move the wrapper "
                f"(`{callee} = {callee}.to(device)`)",
            )
            return UNKNOWN
        if module.wrapper and module.where == DEVICE:
            return Val("output", DEVICE, dev=module.dev)  # gathered on the device whatever the input
        if module.where == DEVICE and module.params is not False:
            host = [
                (a, n)
                for i, (a, n) in enumerate(zip(args, nodes, strict=False))
                if a.where == HOST
                and (a.what in TENSORISH or (a.what == "batch" and i == 0))  # a whole host batch as the input
                and (i == 0 or _later_input(a, n))
            ]
            states = [  # `lstm(x, (h0, c0))`, `model(x, state)` with `state = (torch.zeros(...), torch.zeros(...))`
                (replace(held, origin=a.origin, name=a.name), n)
                for i, (a, n) in enumerate(zip(args, nodes, strict=False))
                if i > 0 and not isinstance(n, ast.Tuple) and _state_tuple(a)
                for held in [next(v for v in a.items or (a.element,) if v is not None and v.where == HOST)]
                if _later_input(replace(held, name=a.name), n)
            ]
            states += [  # `lstm(x, (h0, c0))` written out
                (item, e)
                for i, n in enumerate(nodes)
                if i > 0 and isinstance(n, ast.Tuple) and i < len(args) and _state_tuple(args[i])
                for item, e in zip(args[i].items, n.elts, strict=False)
                if item.where == HOST and not item.scalar and _later_input(item, e)
            ][:1]
            if host or states:
                first, first_node = (host or states)[0]
                name = self.label(first, first_node)
                where = module.dev or "device"
                moved = f" (line {module.moved_at})" if module.moved_at else ""
                fix = self.fix(first, first_node, where)
                if not host and not isinstance(first_node, ast.Tuple) and first_node in nodes:
                    fix = f"`{name} = tuple(t.to({where}) for t in {name})`"
                if first_node in unpacked:  # `model(**inputs)`: move every value of the dict
                    name = short(self.segment(first_node))
                    fix = f"`{name} = {{k: v.to({where}) for k, v in {name}.items()}}`"
                if listed and first is args[0]:
                    items = f"`{name} = [t.to({where}) for t in {name}]`"
                    fix = items if first.name is not None else f"move each tensor of `{name}` with `.to({where})`"
                what = "holds tensors on the host" if listed and first is args[0] else "is on the host"
                self.report(
                    "FRY006",
                    first.origin or first_node,
                    f"`{name}` {what} and never moved, but `{callee}` is on `{where}`{moved} and gets it at "
                    f"line {line(node)}; fix: {fix}",
                )
            return Val("output", DEVICE, dev=module.dev)
        if module.where != HOST:
            if module.params is False and first.what in TENSORISH and first.where is not None:
                # `nn.LogSoftmax().cuda() if cuda else nn.LogSoftmax()`: no weights, its output is where its input is
                return Val("output", first.where, dev=first.dev)
            if module.where is None and module.params is not False and _on_device_tensor(first):
                # where the module is, is not known, but its input is on the device: its weights must be there too
                # (or this call fails), so its output is (`embed = model.forward(frames).detach().numpy()`)
                return Val("output", DEVICE, dev=first.dev)
            return UNKNOWN
        if module.params is False:
            return Val("output", first.where, dev=first.dev) if first.what in TENSORISH else UNKNOWN
        if (
            on_device_input(first)
            and not module.fresh
            and module.params
            and module.moved_at is not None
            and module.where == HOST
            and module.dev is None
        ):
            where = first.dev or "device"
            self.report(
                "FRY007",
                node,
                f"`{callee}` was moved to the host at line {module.moved_at} (a module's `.cpu()` moves it in place, "
                f"it is not a copy), but gets `{self.label(first, first_node)}` on `{where}` here; fix: save a copy "
                f"(`{{k: v.cpu() for k, v in {callee}.state_dict().items()}}`), or move it back with "
                f"`{callee}.to({where})`",
            )
            return UNKNOWN
        origin = module.origin
        if module.feeds and module.fresh and module.params and origin and self._never_moved(func, origin):
            targets = origin.targets if isinstance(origin, ast.Assign) else []
            built = targets[0].id if len(targets) == 1 and isinstance(targets[0], ast.Name) else callee
            self.report(
                "FRY007",
                origin,
                f"`{built}` is built here and never moved, but it moves its inputs to `{module.feeds}` itself (called "
                f"at line {line(node)}): its weights stay on the host; fix: `{built}.to({module.feeds})` after "
                "building it",
            )
            return UNKNOWN
        on_device = first.where == DEVICE and (
            first.what in (*TENSORISH, "batch") or (first.what == "any" and not first.inplace)
        )  # a batch moved with `.to(device)` is a tensor or an object that moves its tensors
        origin = module.origin
        if on_device and module.part is not None and origin is not None and not self._moved_after(func, origin):
            where = first.dev or "device"
            value = origin.value if isinstance(origin, ast.Assign) else None
            built = short(self.segment(value)) if value is not None else "..."
            built = built if len(built) <= 40 and not built.endswith("...") else "<the new layer>"
            moved = f" (line {module.moved_at})" if module.moved_at else ""
            self.report(
                "FRY007",
                origin,
                f"`{module.part}` is replaced by a layer built on the host after `{callee}` was moved to `{where}`"
                f"{moved}: `.to()` moved the old layer, not this one, and `{callee}` gets an input on `{where}` at "
                f"line {line(node)}; fix: move it too (`{module.part} = {built}.to({where})`), or move `{callee}` "
                "after replacing the layer",
            )
            return UNKNOWN
        if (
            on_device
            and module.what == "any"
            and module.where == HOST
            and isinstance(origin, ast.Assign)
            and _loaded_name(self.ctx, origin)
            and self._never_moved(func, origin, to_host_ok=True)
        ):  # VDSR's `model = torch.load(opt.model, map_location=lambda storage, loc: storage)["model"]`, never moved
            where = first.dev or "device"
            fix_where = self.visible_device(where, origin)
            self.report(
                "FRY007",
                origin,
                f"`{callee}` is loaded onto the host here (`map_location`) and never moved, but its input "
                f"`{self.label(first, first_node)}` is on `{where}` (line {line(node)}); fix: `{callee} = "
                f"{callee}.to({fix_where})` after loading it",
            )
            return UNKNOWN
        if on_device and module.fresh and module.params and origin and self._never_moved(func, origin):
            where = first.dev or "device"
            fix_where = self.visible_device(where, origin)
            targets = origin.targets if isinstance(origin, ast.Assign) else []
            built = callee
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id != callee:
                built = targets[0].id  # built by a caller, used here under another name
            used = f" as `{callee}`" if built != callee else ""
            value = origin.value if isinstance(origin, ast.Assign) else None
            kept = isinstance(value, ast.Name | ast.Attribute)  # `self.model = model`: built elsewhere, kept here
            made, after = ("kept here", "keeping it") if kept else ("built here", "building it")
            self.report(
                "FRY007",
                origin,
                f"`{built}` is {made} and never moved, but its input `{self.label(first, first_node)}` is on "
                f"`{where}` (line {line(node)}{used}); fix: `{built}.to({fix_where})` after {after}",
            )
            return UNKNOWN
        return Val("output", HOST) if first.what in TENSORISH and first.where == HOST else UNKNOWN

    def _loss(self, node: ast.Call, module: Val | None, args: Args, kwargs: Kwargs) -> Val:
        """A loss module or function: FRY011 for a host target, or a host weight, with device tensors."""
        pairs = [(a, n) for a, n in zip(args, node.args, strict=True) if not isinstance(n, ast.Starred)]
        star = node.args[0] if len(node.args) == 1 and isinstance(node.args[0], ast.Starred) else None
        packed = self._peek(star.value) if star is not None else None
        if star is not None and packed is not None and packed.what == "tuple" and packed.items:
            pairs = [(item, star) for item in packed.items]  # `loss_fn(*loss_inputs)` of known items
        pairs += [(kwargs[k.arg], k.value) for k in node.keywords if k.arg in LOSS_INPUTS]
        on_device = [(v, n) for v, n in pairs if v.where == DEVICE and (v.what in TENSORISH or v.what == "any")]
        on_host = [
            (v, n)
            for v, n in pairs
            if (v.what in TENSORISH or (v.what == "batch" and v.item)) and v.where == HOST and not v.scalar
        ]  # an item of a collated batch is a tensor (`disp_L` of `imgL, imgR, disp_L`)
        result = Val("tensor", DEVICE if on_device else None, scalar=True)
        if not on_device:
            return result
        dev, dev_node = on_device[0]
        where = dev.dev or "device"
        got = f"`{self.label(dev, dev_node)}` on `{where}` (line {line(node)})"
        callee = self.label(module, node.func) if module is not None else self.segment(node.func)
        if on_host:
            host, host_node = on_host[0]
            self.report(
                "FRY011",
                host.origin or host_node,
                f"`{self.label(host, host_node)}` is on the host and never moved, but `{callee}` gets it with {got}; "
                f"fix: {self.fix(host, host_node, where)}",
            )
        if module is not None and module.weight is not None and module.where == HOST:
            if module.origin is not None and self._never_moved(node.func, module.origin):
                self.report(
                    "FRY011",
                    module.origin,
                    f"`{callee}` holds the host tensor `{short(self.segment(module.weight))}` as its weight and is "
                    f"never moved, but gets {got}; fix: `{callee}.to({where})`, or make the weight with "
                    f"`device={where}`",
                )
        elif module is None:
            weight = next((k.value for k in node.keywords if k.arg in LOSS_WEIGHTS), None)
            held = self._peek(weight) if weight is not None else None
            if weight is not None and held is not None and held.what in TENSORISH and held.where == HOST:
                self.report(
                    "FRY011",
                    held.origin or weight,
                    f"the weight `{self.label(held, weight)}` is on the host and never moved, but `{callee}` gets "
                    f"{got}; fix: {self.fix(held, weight, where)}",
                )
        return result

    def _never_moved(self, func: ast.expr, origin: ast.AST | None = None, to_host_ok: bool = False) -> bool:
        """Whether the module called as ``func`` (a plain name) is never moved, handed on or aliased.

        ``origin``: the statement that built the module. In the module's own code, moves and hand-offs that can
        only run before it (higher up, outside any loop around it) concern an older value of the name.
        ``to_host_ok``: moves to the host (``model.cpu()``) leave it where it is, so they do not count.
        """
        if isinstance(func, ast.Attribute) and dotted(func.value) != "self":
            kept = self._instance_value(func)  # `self.model.encoder`: checked by `_kept_on_device`
            return kept is not None and kept.what == "module" and kept.where == HOST
        if isinstance(func, ast.Attribute) and dotted(func.value) == "self":
            cls = self.ctx.enclosing_class(func)
            instance = self.instance_attributes(cls) if cls is not None else {}
            return f"self.{func.attr}" in instance and not self._moved_names().get(f"self.{func.attr}")
        if isinstance(func, ast.Subscript):
            return self._item_never_moved(func, origin)
        if not isinstance(func, ast.Name):
            return False
        home = self.ctx.enclosing_function(origin) if origin is not None else None
        if func.id in self.global_names() and not self._only_global_writer(func.id, home):
            return False  # another function may rebind it (VDSR's `global opt, model` in `main` alone is fine)
        names = {func.id}
        aliases = self._aliases()
        for _ in range(3):  # `raw_model = model`: what is done to an alias is done to the module
            names |= {alias for name in names for alias in aliases.get(name, ())}
        moves = [n for name in names for n in self._moved_names().get(name, [])]
        if to_host_ok:
            moves = [n for n in moves if self._move_target(n, n.func.attr, UNKNOWN)[0] != HOST]  # type: ignore[attr-defined]
        nodes = [*(n for name in names for n in self._escapes().get(name, [])), *moves]
        inside = {id(n) for n in ast.walk(origin)} if origin is not None else set()  # the statement that built it
        return not any(
            self._may_run_before(node, func)
            and not self._runs_before(node, origin)
            and id(node) not in inside
            and not self._other_variable(node, home)
            for node in nodes
        )

    def _only_global_writer(self, name: str, home: ast.AST | None) -> bool:
        """Whether ``home`` (a function) is the only one that declares ``name`` ``global`` and binds it.

        Its other uses (moves, hand-offs, in any function or in the module's code) are then read as for a local.
        """
        if not isinstance(home, ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        for node in self.ctx.nodes(ast.Global):
            if name not in node.names:
                continue
            scope = self.ctx.enclosing_function(node)
            if scope is home:
                continue
            if scope is None or any(
                isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store | ast.Del)
                for n in ast.walk(scope)
            ):
                return False
        return True

    def _other_variable(self, node: ast.AST, home: ast.AST | None) -> bool:
        """Whether ``node`` (a move or hand-off of a name) is in another function that binds that name itself.

        DANN's ``test()`` loads its own ``my_net`` and moves it: that is not the module-level ``my_net``.
        """
        scope = self.ctx.enclosing_function(node)
        if scope is None or scope is home or not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        name = dotted(node.func.value) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
        name = name or (node.id if isinstance(node, ast.Name) else None)
        if name is None or "." in name:
            return False
        declared = {n for g in ast.walk(scope) if isinstance(g, ast.Global | ast.Nonlocal) for n in g.names}
        return name in bound_names(scope) and name not in declared

    def _item_never_moved(self, func: ast.Subscript, origin: ast.AST | None) -> bool:
        """Whether the module kept as ``holder["key"]`` (``self.models["depth"]``) is never moved.

        Nothing in the file moves ``holder["key"]`` or rebinds it (but ``origin``), and ``holder`` itself is only
        ever read with literal keys: never iterated (``for m in models.values(): m.to(device)``), indexed with a
        computed key, or handed to a call other than its own methods.
        """
        holder = dotted(func.value)
        key = func.slice.value if isinstance(func.slice, ast.Constant) else None
        if holder is None or not isinstance(key, str):
            return False
        # `self.models` of one class is another attribute than `self.models` of another
        region = self.ctx.enclosing_class(func) if holder.startswith("self.") else None
        for node in ast.walk(region or self.ctx.tree):
            if isinstance(node, ast.Subscript) and dotted(node.value) == holder:
                index = node.slice.value if isinstance(node.slice, ast.Constant) else None
                if not isinstance(index, str):
                    return False  # `models[name]`: any of its modules
                if index != key:
                    continue
                above = self.ctx.parent(node)
                if isinstance(above, ast.Attribute) and above.attr in MOVES:
                    return False
                if isinstance(node.ctx, ast.Store) and (origin is None or not any(n is node for n in ast.walk(origin))):
                    return False
            elif isinstance(node, ast.Name | ast.Attribute) and dotted(node) == holder:
                above = self.ctx.parent(node)
                if isinstance(above, ast.Subscript) and above.value is node:
                    continue
                if isinstance(above, ast.Assign) and any(node is t for t in above.targets):
                    continue  # `self.models = {}`
                if isinstance(above, ast.AnnAssign) and node is above.target:
                    continue
                if self._iterated_without_moves(node):
                    continue  # `for m in self.models.values(): m.train()`
                return False  # iterated with moves, handed on, aliased or read as a whole
        return True

    def _iterated_without_moves(self, node: ast.expr) -> bool:
        """``for m in holder.values(): m.train()``: a loop over a dict's modules whose body moves nothing."""
        above = self.ctx.parent(node)
        loop: ast.AST | None = None
        if isinstance(above, ast.Attribute) and above.attr in ("values", "items", "keys"):
            call = self.ctx.parent(above)
            loop = self.ctx.parent(call) if isinstance(call, ast.Call) and call.func is above else None
            iterated = call
        else:
            loop, iterated = above, node
        if not isinstance(loop, ast.For) or loop.iter is not iterated:
            return False
        return not any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MOVES
            for stmt in loop.body
            for n in ast.walk(stmt)
        )

    def _moved_after(self, func: ast.expr, origin: ast.AST) -> bool:
        """Whether the module called as ``func`` may be moved or handed on after ``origin``.

        Below it, or in a loop around it: a replaced layer is then moved with the rest.
        """
        if not isinstance(func, ast.Name) or func.id in self.global_names():
            return True
        nodes = [*self._escapes().get(func.id, []), *self._moved_names().get(func.id, [])]
        loops = [a for a in self.ctx.ancestors(origin) if isinstance(a, ast.For | ast.AsyncFor | ast.While)]
        inside = {id(n) for n in ast.walk(origin)}
        for node in nodes:
            if id(node) in inside:
                continue
            if line(node) > line(origin) or any(any(n is node for n in ast.walk(loop)) for loop in loops):
                return True
        return False

    def _aliases(self) -> dict[str, set[str]]:
        """``alias = name`` statements of this scope: for each name, the names bound to it."""
        self._escapes()
        return self._aliased.get(self.scope, {})

    def _runs_before(self, node: ast.AST, origin: ast.AST | None) -> bool:
        """Whether ``node`` only runs before ``origin``.

        Both in the module's own code, ``node`` higher up and in no loop around ``origin``.
        """
        if origin is None or not isinstance(self.scope, ast.Module) or line(node) >= line(origin):
            return False
        if self.ctx.enclosing_function(node) is not None or self.ctx.enclosing_function(origin) is not None:
            return False
        loops = {id(a) for a in self.ctx.ancestors(origin) if isinstance(a, ast.For | ast.AsyncFor | ast.While)}
        return not any(id(a) in loops for a in self.ctx.ancestors(node))

    def _may_run_before(self, move: ast.AST, use: ast.AST) -> bool:
        """Whether ``move`` may run before ``use``: in a function, earlier in the code, or in a loop around both.

        A move further down the module's own code, outside any loop around the use, runs after it; so does a move
        further down the same function, even in a loop around both: the first pass reaches the use first.
        """
        if line(move) < line(use):
            return True
        function = self.ctx.enclosing_function(use)
        if function is not None and function is self.ctx.enclosing_function(move) and function is self.scope:
            return False
        if not isinstance(self.scope, ast.Module):
            return True
        if self.ctx.enclosing_function(move) is not None:
            return True
        around_use = {id(a) for a in self.ctx.ancestors(use) if isinstance(a, ast.For | ast.AsyncFor | ast.While)}
        return any(id(a) in around_use for a in self.ctx.ancestors(move))

    def _moved_names(self) -> dict[str, list[ast.Call]]:
        """Receivers of ``.to``/``.cuda``/..., with the calls that move them.

        In this scope and its nested functions; the whole file for the module.
        """
        scope = self.scope
        if scope not in self._moved:
            calls = self.ctx.nodes(ast.Call) if isinstance(scope, ast.Module) else ast.walk(scope)
            names: dict[str, list[ast.Call]] = {}
            for call in calls:
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in MOVES:
                    name = dotted(call.func.value)
                    if name is not None:
                        names.setdefault(name, []).append(call)
            self._moved[scope] = names
        return self._moved[scope]

    def _escapes(self) -> dict[str, list[ast.AST]]:
        """Names of this scope used other than by calling, moving or a harmless attribute, and where they are.

        Handing a module to a function of the file that only reads that parameter (see
        :func:`~ferry.lint.rules._placement_values.keeping_parameters`) is not a use that may move it.
        """
        scope = self.scope
        if scope not in self._escaped:
            names: dict[str, list[ast.AST]] = {}
            aliased: dict[str, set[str]] = {}
            local: dict[ast.AST, frozenset[str]] = {}
            for node in ast.walk(scope):
                if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
                    continue
                inner = self.ctx.enclosing_function(node) if isinstance(scope, ast.Module) else None
                if inner is not None:  # a function's own name of the same spelling is another variable
                    if inner not in local:
                        local[inner] = bound_names(inner) - self.global_names()
                    if node.id in local[inner]:
                        continue
                parent = self.ctx.parent(node)
                if isinstance(parent, ast.Call) and parent.func is node:
                    continue
                if isinstance(parent, ast.Attribute) and parent.attr in SAFE_MODULE_USES:
                    continue
                if (
                    isinstance(parent, ast.Attribute)
                    and isinstance(parent.ctx, ast.Load)
                    and not isinstance(self.ctx.parent(parent), ast.Call | ast.Attribute | ast.Subscript)
                ):
                    continue  # `encoder_hidden[: decoder.n_layers]`: reading a plain attribute
                if isinstance(parent, ast.Attribute) and isinstance(parent.ctx, ast.Load):
                    grand = self.ctx.parent(parent)
                    if (
                        isinstance(grand, ast.Call)
                        and isinstance(grand.func, ast.Name)
                        and grand.func.id in HARMLESS_READS - {"getattr", "setattr"}
                        and parent in grand.args
                    ):
                        continue  # `len(net.chars)`, `print(model.config)`: an attribute read
                    if (
                        isinstance(grand, ast.Subscript)
                        and grand.value is parent
                        and isinstance(grand.ctx, ast.Load)
                        and not isinstance(self.ctx.parent(grand), ast.Call | ast.Attribute | ast.Subscript)
                    ):
                        continue  # `net.char2int[char]`: an item of a plain attribute, read
                if isinstance(parent, ast.Attribute) and _reads_a_layer(self.ctx, parent):
                    continue  # `model.classifier.parameters()`: reading a layer's parameters
                if isinstance(parent, ast.Attribute) and _writes_weight_values(self.ctx, parent):
                    continue  # `model.pos_emb.weight.data[0, :] = 0`: values written in place, nothing moved
                if isinstance(parent, ast.Attribute) and self.reading_method(parent.attr):
                    continue
                if isinstance(parent, ast.Attribute) and parent.attr in MOVES and parent.attr != "type":
                    grand = self.ctx.parent(parent)
                    if isinstance(grand, ast.Call) and grand.func is parent:
                        continue  # a move: `_moved_names` knows where it runs
                if isinstance(parent, ast.Call) and kept_by(parent, node, self.local_functions, self.reading_method):
                    continue
                if isinstance(parent, ast.Call) and self._held_unmoved(parent, node):
                    continue  # `agent = PPO(actor_critic, ...)`: a class of the file that keeps it and never moves it
                if isinstance(parent, ast.Call) and _logging_call(parent):
                    continue  # `logger.info(model)`: formatted into a message
                if (
                    isinstance(parent, ast.Call)
                    and isinstance(parent.func, ast.Name)
                    and parent.func.id in HARMLESS_READS - {"getattr"}
                    and node in parent.args
                ):
                    continue  # `isinstance(net, nn.Module)`, `print(model)`: read, not moved
                if isinstance(parent, ast.Call) and parent.args[:1] == [node] and _wraps(self.ctx.call_name(parent)):
                    continue  # `torch.compile(model)`, `nn.DataParallel(model)`: share the module's parameters
                if isinstance(parent, ast.Call) and parent.args[:1] == [node] and self.ctx.call_name(parent) in SAVES:
                    continue  # `torch.save(my_net, path)`: pickled where it is, not moved
                if isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1:
                    target = parent.targets[0]
                    if isinstance(target, ast.Name):
                        aliased.setdefault(node.id, set()).add(target.id)
                        continue
                if self._returned_only(node, parent):
                    continue
                names.setdefault(node.id, []).append(node)
            self._escaped[scope] = names
            self._aliased[scope] = aliased
        return self._escaped[scope]

    def _held_unmoved(self, call: ast.Call, arg: ast.Name) -> bool:
        """Whether ``call`` builds a plain class of the file that keeps ``arg`` and never moves or hands it on.

        ``PPO(actor_critic, clip_param, ...)`` whose ``__init__`` does ``self.actor_critic = actor_critic`` and whose
        methods only call it, read its parameters or call its reading methods (``evaluate_actions``): the module
        stays where it is.
        """
        name = self.ctx.qualname(call.func) if isinstance(call.func, ast.Name) else None
        cls = self.ctx.kinds.classes.get(name or "")
        if cls is None or self.ctx.kinds.class_is_module(cls.name) or not self._plain_class(cls):
            return False
        init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        if init is None or any(isinstance(a, ast.Starred) for a in call.args):
            return False
        params = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        index = next((i for i, a in enumerate(call.args) if a is arg), None)
        param = params[index] if index is not None and index < len(params) else None
        param = param or next((k.arg for k in call.keywords if k.value is arg), None)
        if param is None:
            return False
        uses = [n for n in ast.walk(init) if isinstance(n, ast.Name) and n.id == param and isinstance(n.ctx, ast.Load)]
        kept: set[str] = set()
        for use in uses:
            holder = self.ctx.parent(use)
            if isinstance(holder, ast.Attribute) and isinstance(holder.ctx, ast.Load):
                grand = self.ctx.parent(holder)
                called = isinstance(grand, ast.Call) and grand.func is holder
                if not called or holder.attr in SAFE_MODULE_USES - MOVES or self.reading_method(holder.attr):
                    continue  # `torch.optim.Adam(actor_critic.parameters(), ...)`: read
                return False
            if isinstance(holder, ast.Call) and holder.args[:1] == [use] and dotted(holder.func) in COPIES:
                continue  # FixMatch's `ModelEMA`: `self.ema = deepcopy(model)` copies it and leaves it where it is
            target: ast.expr | None = None
            if isinstance(holder, ast.Assign) and holder.value is use and len(holder.targets) == 1:
                target = holder.targets[0]
            elif isinstance(holder, ast.Tuple) and isinstance(assign := self.ctx.parent(holder), ast.Assign):
                # `self.model, self.scheduler = model, scheduler` (RAFT's Logger)
                targets = (
                    assign.targets[0].elts
                    if len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Tuple)
                    else []
                )
                index = next((i for i, e in enumerate(holder.elts) if e is use), None)
                if assign.value is holder and index is not None and len(targets) == len(holder.elts):
                    target = targets[index]
            if not (isinstance(target, ast.Attribute) and dotted(target.value) == "self"):
                return False
            kept.add(target.attr)
        return bool(uses) and all(self._only_used(cls, attr) for attr in kept)

    def _only_used(self, cls: ast.ClassDef, attr: str) -> bool:
        """Whether ``self.<attr>`` is bound once in ``cls`` and every use leaves the module where it is.

        Calls of it, reads of its attributes, and calls of methods that neither move nor change it.
        """
        stores = 0
        for node in ast.walk(cls):
            if not (isinstance(node, ast.Attribute) and node.attr == attr and dotted(node.value) == "self"):
                continue
            holder = self.ctx.parent(node)
            if isinstance(node.ctx, ast.Store):
                stores += 1
                continue
            if isinstance(holder, ast.Call) and holder.func is node:
                continue  # `self.actor_critic(inputs)`
            if isinstance(holder, ast.Attribute) and isinstance(holder.ctx, ast.Load):
                grand = self.ctx.parent(holder)
                if not (isinstance(grand, ast.Call) and grand.func is holder):
                    continue  # `self.actor_critic.is_recurrent`
                if holder.attr in MOVES or holder.attr in ("load_state_dict", "apply", "_apply", "to_empty"):
                    return False
                if holder.attr in SAFE_MODULE_USES or self.reading_method(holder.attr):
                    continue
            return False
        return stores == 1

    def _returned_only(self, node: ast.Name, parent: ast.AST | None) -> bool:
        """``return model`` or ``return model, acc`` in a function: it leaves the function.

        What the caller does with it next runs after every use here (the callers' values for the parameter tell
        where it is when the function is called again).
        """
        if isinstance(self.scope, ast.Module):
            return False
        if isinstance(parent, ast.Tuple):
            parent = self.ctx.parent(parent)
        return isinstance(parent, ast.Return)

    def reading_method(self, name: str) -> bool:
        """Whether ``name`` is a method of the file's module classes that leaves its module where it is."""
        return _reading_method(self.ctx, name)


def shape_dims(node: ast.Call, name: str) -> int:
    """How many dimensions the tensor a factory call makes has at least, as the call shows (0: not shown).

    ``torch.zeros(n, p, 1)`` and ``torch.zeros((n, p, 1))``: 3 (a starred size, ``*obs_shape``, adds none);
    ``torch.tensor([[0.0], [1.0]])``: 2; ``torch.arange(n)``: 1; ``torch.eye(n)``: 2.
    """
    if name in ("arange", "range", "linspace", "logspace", "randperm") or name.endswith("_window"):
        return 1
    if name in ("eye", "tril_indices", "triu_indices"):
        return 2
    if name in ("tensor", "as_tensor", "asarray", "new_tensor"):
        data = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "data"), None)
        depth = 0
        while isinstance(data, ast.List | ast.Tuple | ast.ListComp):
            depth += 1
            if isinstance(data, ast.ListComp):
                data = data.elt
            elif data.elts and not any(isinstance(e, ast.Starred) for e in data.elts):
                data = data.elts[0]
            else:
                break
        return depth
    if name not in ("zeros", "ones", "empty", "full", "rand", "randn", "randint", "empty_strided"):
        return 0
    size = next((k.value for k in node.keywords if k.arg == "size"), None)
    if size is not None:
        sizes = [size]
    elif name == "randint":
        sizes = node.args[-1:] if len(node.args) > 1 else []
    elif name in ("full", "empty_strided"):
        sizes = node.args[:1]
    else:
        sizes = list(node.args)
    if len(sizes) == 1 and isinstance(sizes[0], ast.Tuple | ast.List):
        sizes = list(sizes[0].elts)
    elif len(sizes) == 1 and not isinstance(sizes[0], ast.Constant | ast.BinOp | ast.Starred):
        return 0  # `torch.zeros(shape)`: a size held in a name may be a tuple of any length
    return sum(1 for s in sizes if not isinstance(s, ast.Starred))


def init_helpers(ctx: FileContext, cls: ast.ClassDef, init: ast.FunctionDef) -> dict[ast.stmt, ast.FunctionDef]:
    """The statements of ``__init__`` that call a method of the class with no arguments, and the method.

    ``self.build_model()`` in a trainer's ``__init__`` (a ``def build_model(self):`` that builds ``self.unet`` and
    moves it): its body is part of building the instance. Only calls with no arguments, of undecorated methods that
    take only ``self``, as statements of their own, and that the file calls with no arguments wherever it calls them
    again (each call then leaves the attributes as ``__init__`` does).
    """
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef) and not m.decorator_list}
    found: dict[ast.stmt, ast.FunctionDef] = {}
    for stmt in init.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and dotted(call.func.value) == "self"
            and not call.args
            and not call.keywords
        ):
            continue
        method = methods.get(call.func.attr)
        if method is None or method is init or method.name.startswith("__"):
            continue
        args = method.args
        if len(args.args) != 1 or args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            continue
        calls = [
            n
            for n in ctx.nodes(ast.Call)
            if isinstance(n.func, ast.Attribute) and n.func.attr == method.name and n is not call
        ]
        if any(n.args or n.keywords for n in calls) or any(
            isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(method)
        ):
            continue  # called again with other values: it may leave its attributes otherwise after `__init__`
        found[stmt] = method  # called again as it is here, it rebuilds the same (`del self.unet; self.build_model()`)
    return found


def _host_tensors_of_init(ctx: FileContext, cls: ast.ClassDef, mover: ast.FunctionDef) -> dict[str, int]:
    """The ``self.<attr>`` that ``__init__`` makes on the host and no method but ``mover`` rebinds.

    Made by a torch factory without ``device=``, and kept there by a conversion such as ``.long()``. Each with the
    number of dimensions its factory call shows (see :func:`shape_dims`).
    """
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
    if init is None:
        return {}
    made: dict[str, int] = {}
    others: set[str] = set()
    for stmt in ast.walk(init):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        if not (isinstance(target, ast.Attribute) and dotted(target.value) == "self"):
            continue
        if isinstance(value, ast.Call) and _host_factory_call(ctx, value):
            made[target.attr] = shape_dims(value, (ctx.call_name(value) or "").rsplit(".", 1)[-1])
            continue
        converted = (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("long", "float", "int", "bool", "half", "double", "byte")
            and dotted(value.func.value) == f"self.{target.attr}"
        )
        if not converted:
            others.add(target.attr)
    for method in cls.body:
        if method is init or method is mover or not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(method):
            if isinstance(node, ast.Attribute) and dotted(node.value) == "self" and isinstance(node.ctx, ast.Store):
                others.add(node.attr)
    return {attr: dims for attr, dims in made.items() if attr not in others}


def loss_of_parameters(ctx: FileContext, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``func`` computes a checked loss of its first two parameters, reshaped on the way.

    pytorch-semseg's ``cross_entropy2d(input, target, ...)``: ``input = input.transpose(1, 2)...view(-1, c)``,
    ``target = target.view(-1)``, then ``F.cross_entropy(input, target, ...)``: calling it is calling that loss.
    """
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
    if len(params) < 2:
        return False
    first, second = {params[0]}, {params[1]}
    for node in ast.walk(func):  # names rebound from one parameter only, through its own methods
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            for group, other in ((first, second), (second, first)):
                if used & group and not used & other:
                    group.add(node.targets[0].id)
    for node in ast.walk(func):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        full = ctx.call_name(node) or ""
        last = full.rsplit(".", 1)[-1]
        if not (full.startswith("torch.nn.functional.") and last in CHECKED_LOSSES):
            continue
        a, b = node.args[0], node.args[1]
        if isinstance(a, ast.Name) and isinstance(b, ast.Name) and a.id in first and b.id in second:
            return True
    return False


def _host_factory_call(ctx: FileContext, call: ast.Call) -> bool:
    """``torch.zeros(...)`` and the like without ``device=`` (or ``out=``, or ``**kwargs`` that may hold one)."""
    full = ctx.call_name(call) or ""
    if not (full.startswith("torch.") and full.rsplit(".", 1)[-1] in FACTORIES):
        return False
    return not any(k.arg in ("device", "out") or k.arg is None for k in call.keywords)


def _kept_input_device(cls: ast.ClassDef) -> tuple[str, int | None, str | None] | None:
    """The ``__init__`` parameter a module class keeps as the device it moves its inputs to; else ``None``.

    ``(parameter, position, attribute)``: ``self.dev = args.device`` gives ``("args", 2, "device")``, when every move
    in the class is a ``.to(self.dev)`` of something other than the module.
    """
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
    if init is None:
        return None
    params = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
    kept: dict[str, tuple[str, str | None]] = {}
    for stmt in ast.walk(init):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        if not (isinstance(target, ast.Attribute) and dotted(target.value) == "self" and "dev" in target.attr.lower()):
            continue
        if isinstance(value, ast.Name) and value.id in params + [a.arg for a in init.args.kwonlyargs]:
            kept[target.attr] = (value.id, None)
        elif isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id in params:
            kept[target.attr] = (value.value.id, value.attr)
    used: set[str] = set()
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MOVES):
            continue
        receiver = (dotted(node.func.value) or "").split(".")[0]
        moved_to = node.args[0] if len(node.args) == 1 and not node.keywords else None
        attr = moved_to.attr if isinstance(moved_to, ast.Attribute) and dotted(moved_to.value) == "self" else None
        if receiver == "self" or node.func.attr != "to" or attr is None or attr not in kept:
            return None  # the class moves itself, a part of itself, or to somewhere else
        used.add(attr)
    if len(used) != 1:
        return None
    param, attr = kept[used.pop()]
    return param, params.index(param) if param in params else None, attr


def _combining_loss(cls: ast.ClassDef) -> bool:
    """A loss module of the file whose ``forward(output, target, ...)`` combines its target with other tensors.

    ``class ContrastiveLoss(nn.Module)`` (a name ending in ``Loss``) whose ``forward`` uses its second parameter in
    arithmetic or a comparison (``target.float() * distances``): a host target with outputs on the device fails
    there, as it does for ``nn.MSELoss``. A loss that hands its target to a helper (an online miner that reads it
    on the host) is not one.
    """
    if not cls.name.endswith("Loss"):
        return False
    forward = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "forward"), None)
    params = [a.arg for a in forward.args.args[1:]] if forward is not None else []
    if forward is None or len(params) < 2:
        return False
    target = params[1]
    for node in ast.walk(forward):
        if isinstance(node, ast.BinOp | ast.Compare):
            operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.left, *node.comparators]
            if any(isinstance(n, ast.Name) and n.id == target for o in operands for n in ast.walk(o)) and any(
                not any(isinstance(n, ast.Name) and n.id == target for n in ast.walk(o))
                and not isinstance(o, ast.Constant)
                for o in operands
            ):
                return True
    return False


def _forwarding_loss(ctx: FileContext, cls: ast.ClassDef) -> bool:
    """A module of the file whose ``forward(input, target, ...)`` hands both to a loss that checks their devices.

    arcface-pytorch's ``FocalLoss``: ``self.ce = nn.CrossEntropyLoss()`` in ``__init__``, then ``logp =
    self.ce(input, target)`` in ``forward``; or ``F.cross_entropy(input, target)`` there. Its inputs meet as they
    do in that loss: a host target with outputs on the device fails. Losses that keep their targets on the host
    (``CTCLoss``) are not such a loss.
    """
    forward = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "forward"), None)
    params = [a.arg for a in forward.args.args[1:]] if forward is not None else []
    if forward is None or len(params) < 2:
        return False
    losses: set[str] = set()  # `self.ce = nn.CrossEntropyLoss()` in the class
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute)
            and dotted(node.targets[0].value) == "self"
            and isinstance(node.value, ast.Call)
        ):
            full = ctx.qualname(node.value.func) or ""
            last = full.rsplit(".", 1)[-1]
            if full.startswith("torch.nn.") and last.endswith("Loss") and last not in HOST_TARGET_LOSSES:
                losses.add(node.targets[0].attr)
    for node in ast.walk(forward):
        if not isinstance(node, ast.Call) or len(node.args) < 2 or [dotted(a) for a in node.args[:2]] != params[:2]:
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and dotted(func.value) == "self" and func.attr in losses:
            return True
        full = ctx.qualname(func) or ""
        if full.startswith("torch.nn.functional.") and full.rsplit(".", 1)[-1] in CHECKED_LOSSES:
            return True
    return False


def _kept_attribute(method: ast.FunctionDef) -> str | None:
    """``X`` where an ``__iter__`` gives the items of ``self.X`` unchanged, else ``None``."""
    body = [s for s in method.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1:
        return None
    stmt = body[0]

    def own(node: ast.expr | None) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return node.attr
        return None

    if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call) and not stmt.value.keywords:
        call = stmt.value
        if isinstance(call.func, ast.Name) and call.func.id == "iter" and len(call.args) == 1:
            return own(call.args[0])  # `return iter(self.iterable)`
        if isinstance(call.func, ast.Attribute) and call.func.attr == "__iter__" and not call.args:
            return own(call.func.value)  # `return self.iterable.__iter__()`
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.YieldFrom):
        return own(stmt.value.value)  # `yield from self.iterable`
    if (
        isinstance(stmt, ast.For)
        and isinstance(stmt.target, ast.Name)
        and len(stmt.body) == 1
        and not stmt.orelse
        and isinstance(stmt.body[0], ast.Expr)
        and isinstance(stmt.body[0].value, ast.Yield)
        and isinstance(stmt.body[0].value.value, ast.Name)
        and stmt.body[0].value.value.id == stmt.target.id
    ):
        return own(stmt.iter)  # `for item in self.iterable: yield item`
    return None


def _moving_override(method: ast.stmt) -> bool:
    """``def to(self, device): ...; return super().to(device)``: an override of a move that calls the module's own.

    It moves the module's plain tensor attributes along with its weights (SAC's policies), which is what a move of
    the module does anyway: the class does not place its inputs.
    """
    if not isinstance(method, ast.FunctionDef) or method.name not in MOVES | {"_apply"}:
        return False
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == method.name
        and isinstance(n.func.value, ast.Call)
        and dotted(n.func.value.func) == "super"
        for n in ast.walk(method)
    )


def _reads_a_layer(ctx: FileContext, attribute: ast.Attribute) -> bool:
    """``model.fc.parameters()``, ``model.encoder.layer.weight``: a chain of attributes that ends in a harmless read."""
    top: ast.AST = attribute
    above = ctx.parent(top)
    while isinstance(above, ast.Attribute):
        top, above = above, ctx.parent(above)
    assert isinstance(top, ast.Attribute)
    if top is attribute or top.attr not in SAFE_MODULE_USES - {"load_state_dict", "apply"}:
        return False
    if isinstance(above, ast.Assign):
        return top not in above.targets  # `model.fc.weight = ...` changes it
    return not (isinstance(above, ast.AugAssign) and above.target is top)


def _length_keyword(name: str) -> bool:
    """A keyword whose tensor may stay on the host (``lengths=`` for packing, sizes, counts)."""
    return any(word in name.lower() for word in _HOST_ARGUMENT_WORDS)


def on_device_input(val: Val) -> bool:
    """Whether a module input ``val`` is known to be on the chosen device (a tensor, a moved batch or value)."""
    return val.where == DEVICE and (val.what in (*TENSORISH, "batch") or (val.what == "any" and not val.inplace))


def _writes_weight_values(ctx: FileContext, attribute: ast.Attribute) -> bool:
    """``model.emb.weight.data[0, :] = 0``: a store into an element range of a tensor held by the module.

    The chain goes through ``.weight``/``.bias``/``.data`` and ends in a subscript that is assigned to: the values
    change where they are; the module does not move.
    """
    node: ast.AST = attribute
    through = False
    while isinstance(node, ast.Attribute):
        through = through or node.attr in ("weight", "bias", "data")
        parent = ctx.parent(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return through and isinstance(parent.ctx, ast.Store)
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            return False
        node = parent
    return False


def _assigns_state(node: ast.Call) -> bool:
    """``m.load_state_dict(sd, assign=True)``: the module takes the state dict's tensors, wherever they are."""
    assign = next((k.value for k in node.keywords if k.arg == "assign"), None)
    return assign is not None and not (isinstance(assign, ast.Constant) and assign.value is False)


#: Calls on ``self`` in a method that may move the module or change what it holds.
_CHANGES_SELF = MOVES | frozenset({"register_buffer", "register_parameter", "register_module", "add_module", "apply"})


def _loads_value(ctx: FileContext, value: ast.AST) -> bool:
    """``torch.load(...)``, or an item of what it gives (``torch.load(path, map_location=...)["model"]``)."""
    while isinstance(value, ast.Subscript):
        value = value.value
    return isinstance(value, ast.Call) and ctx.call_name(value) in LOADS


def _loaded_name(ctx: FileContext, origin: ast.Assign) -> bool:
    """Whether the name ``origin`` binds holds what ``torch.load`` gave: each binding loads, or keeps the name.

    ``model = torch.load(path, map_location=...)["model"]``, later ``model = model`` or ``model = model.cpu()``.
    """
    if len(origin.targets) != 1 or not isinstance(origin.targets[0], ast.Name):
        return False
    name = origin.targets[0].id
    home = ctx.enclosing_function(origin)
    values = [v for v in ctx.kinds.assigned_values(name) if ctx.enclosing_function(v) is home]
    loads = False
    for value in values:
        if _loads_value(ctx, value):
            loads = True
            continue
        inner = value
        while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr in MOVES:
            inner = inner.func.value
        if not (isinstance(inner, ast.Name) and inner.id == name):
            return False
    return loads


def _defining_classes(ctx: FileContext, name: str) -> list[ast.ClassDef]:
    """The classes of the file whose body defines a method ``name``."""
    return [
        cls
        for cls in ctx.kinds.classes.values()
        if any(isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == name for s in cls.body)
    ]


def file_method(ctx: FileContext, name: str) -> ast.FunctionDef | None:
    """The method ``name`` of the file's ``nn.Module`` classes.

    ``None`` unless exactly one module class defines it and no other class of the file does (which one runs is
    not known then).
    """
    found: list[ast.FunctionDef] = []
    for cls_name, cls in ctx.kinds.classes.items():
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                if not ctx.kinds.class_is_module(cls_name) or not all(_harmless(ctx, d) for d in stmt.decorator_list):
                    return None
                found.append(stmt)
    return found[0] if len(found) == 1 else None


def _kept_in_init(ctx: FileContext, name: str) -> list[tuple[str, ast.FunctionDef, ast.Assign]] | None:
    """Every ``self.<name> = ...`` in the ``__init__`` of a module class of the file.

    Each as (the class's name, its ``__init__``, the assignment); ``None`` when a class of the file defines a method
    of that name.
    """
    found: list[tuple[str, ast.FunctionDef, ast.Assign]] = []
    for cls_name, cls in ctx.kinds.classes.items():
        if any(isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == name for s in cls.body):
            return None
        if not ctx.kinds.class_is_module(cls_name):
            continue
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None or not init.args.args:
            continue
        me = init.args.args[0].arg
        found.extend(
            (cls_name, init, node)
            for node in ast.walk(init)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Attribute) and dotted(t) == f"{me}.{name}" for t in node.targets)
        )
    return found


def kept_attribute(ctx: FileContext, name: str) -> bool:
    """Whether ``self.<name>`` is what a module class of the file builds in ``__init__`` by a call, not a method.

    ``self.encoder = model_fun()``: what a call returns, kept by a module, is a layer of it (a function would be
    kept by name: ``self.act = F.relu``). No class of the file defines a method of that name.
    """
    kept = _kept_in_init(ctx, name)
    return bool(kept) and any(isinstance(node.value, ast.Call) for _, _, node in kept or ())


def submodule_attribute(ctx: FileContext, name: str) -> bool:
    """Whether ``self.<name>`` is a layer in every ``nn.Module`` class of the file that keeps one in ``__init__``.

    A layer: built there (``self.fc = nn.Linear(...)``, a module class of the file), or an ``__init__`` parameter
    that every construction of the class in the file passes a module (``Seq2Seq(enc, dec)`` with ``enc =
    Encoder(...)``). ``False`` when some class keeps something else under that name (``self.act = act_fn``, a
    function: it runs wherever its input is) or no class keeps it, or a class of the file defines a method of that
    name.
    """
    kept = _kept_in_init(ctx, name)
    if not kept:
        return False
    return all(
        _built_layer(ctx, node.value) or _passed_layer(ctx, cls_name, init, node.value) for cls_name, init, node in kept
    )


def _built_layer(ctx: FileContext, value: ast.expr) -> bool:
    kind = ctx.kind(value)
    return isinstance(value, ast.Call) and kind is not None and kind.is_module


def _passed_layer(ctx: FileContext, cls_name: str, init: ast.FunctionDef, value: ast.expr) -> bool:
    """``self.encoder = encoder`` of a parameter that each ``cls_name(...)`` of the file passes a module."""
    if not isinstance(value, ast.Name):
        return False
    names = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
    if value.id not in names and value.id not in {a.arg for a in init.args.kwonlyargs}:
        return False
    sites = [n for n in ctx.nodes(ast.Call) if isinstance(n.func, ast.Name) and n.func.id == cls_name]
    for site in sites:
        passed = next((k.value for k in site.keywords if k.arg == value.id), None)
        if passed is None and value.id in names and names.index(value.id) < len(site.args):
            passed = site.args[names.index(value.id)]
        if passed is None or isinstance(passed, ast.Starred):
            return False
        kind = ctx.kind(passed)
        if kind is None or not kind.is_module:
            return False
    return bool(sites)


def module_methods(ctx: FileContext, name: str) -> list[ast.FunctionDef]:
    """The definitions of the method ``name`` in the file's ``nn.Module`` classes, undecorated or harmlessly so.

    Empty when one of them has another decorator (what it does to the call is not known).
    """
    found: list[ast.FunctionDef] = []
    for cls_name, cls in ctx.kinds.classes.items():
        if not ctx.kinds.class_is_module(cls_name):
            continue
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
                if not isinstance(stmt, ast.FunctionDef) or not all(_harmless(ctx, d) for d in stmt.decorator_list):
                    return []
                found.append(stmt)
    return found


def reads_only(method: ast.FunctionDef, ctx: FileContext | None = None) -> bool:
    """Whether a method leaves its module where it is: it assigns no attribute of ``self`` and moves nothing of it.

    With ``ctx``, setting a property of the class through its setter (``self.r = value``) counts as reading.
    """
    if not method.args.args:
        return False
    me = method.args.args[0].arg
    for node in ast.walk(method):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            value = node.value if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) else None
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == me:
                        if part is target and _setter_of(ctx, method, part.attr) and not isinstance(value, ast.Call):
                            continue  # `self.r = state_dict["r"]`: the class's property setter, no layer replaced
                        return False
        if isinstance(node, ast.Call) and _changes_self(node, me):
            return False
    return True


def _changes_self(call: ast.Call, me: str) -> bool:
    """Whether ``call`` moves or changes the module ``me`` names (``self.to(...)``, ``self.fc.cuda()``, ``setattr``)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "setattr"
    if not isinstance(func, ast.Attribute) or func.attr not in _CHANGES_SELF:
        return False
    root = func.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id == me


def keeps_weights(method: ast.FunctionDef, ctx: FileContext, depth: int = 0) -> bool:
    """Whether a method of a module class leaves every weight of its module where it is, though it sets attributes.

    DeepCTR's ``compile(self, optimizer, loss, metrics)``: ``self.optim = self._get_optim(optimizer)`` and the like.
    It moves nothing of ``self`` (no ``.to``/``.cuda``/``load_state_dict``/``apply``, no ``setattr``), and neither it
    nor the methods of ``self`` it calls (two levels) builds a layer (a ``torch.nn`` class or a module class of the
    file) or a parameter, or stores a value of ``self`` under another name.
    """
    if not method.args.args or depth > 2:
        return False
    me = method.args.args[0].arg
    cls = ctx.enclosing_class(method)
    own = {m.name: m for m in (cls.body if cls is not None else []) if isinstance(m, ast.FunctionDef)}
    for node in ast.walk(method):
        if isinstance(node, ast.Call):
            func = node.func
            if _changes_self(node, me):
                return False
            full = ctx.call_name(node) or ""
            last = full.rsplit(".", 1)[-1]
            layer = full.startswith("torch.nn.") and not full.startswith("torch.nn.functional.") and last[:1].isupper()
            if layer and not full.startswith("torch.nn.utils."):
                return False
            if full in ctx.kinds.classes and ctx.kinds.class_is_module(full):
                return False
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me:
                callee = own.get(func.attr)
                if callee is not None and callee is not method and not keeps_weights(callee, ctx, depth + 1):
                    return False
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute | ast.Name):
            source = dotted(node.value) or ""
            if source == me or source.startswith(me + "."):
                return False  # `self.backbone = self.encoder`: a layer under a second name
    return True


def _setter_of(ctx: FileContext | None, method: ast.FunctionDef, name: str) -> bool:
    """Whether the class that defines ``method`` has a property ``name`` with a setter."""
    cls = ctx.enclosing_class(method) if ctx is not None else None
    return cls is not None and property_setter([cls], name)


def feeds_submodule(ctx: FileContext, method: ast.FunctionDef, depth: int = 0) -> bool:
    """Whether a method hands its first input straight to one of the module's layers.

    ``self.fc(z)``, ``self(z)``, or another such method: calling it is calling the module.
    """
    params = method.args.args
    if len(params) < 2 or depth > 2:
        return False
    me = params[0].arg
    derived = {params[1].arg}  # the input, and names computed from it (`idx_cond = idx[:, -n:]`)
    assigns = [n for n in ast.walk(method) if isinstance(n, ast.Assign)]
    for _ in range(2):  # twice: a name may be computed from one assigned further down the walk
        for node in assigns:
            if any(isinstance(n, ast.Name) and n.id in derived for n in ast.walk(node.value)):
                for target in node.targets:
                    while isinstance(target, ast.Subscript):  # `gen_seq[..., :n] = primer`: written into it
                        target = target.value
                    if isinstance(target, ast.Name):
                        derived.add(target.id)
    for call in ast.walk(method):
        if not isinstance(call, ast.Call) or not call.args:
            continue
        first = call.args[0]
        while isinstance(first, ast.Subscript):  # `self.forward(gen_seq[..., :cur_i])`: a slice of it
            first = first.value
        if not isinstance(first, ast.Name) or first.id not in derived:
            continue
        func = call.func
        if isinstance(func, ast.Name) and func.id == me:
            return True
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == me:
            if func.attr in ("forward", "__call__"):
                return True  # `mean, log_std = self.forward(state)`
            other = file_method(ctx, func.attr)
            if other is None:
                if _layer(ctx, ctx.enclosing_class(method), func.attr):
                    return True  # `self.fc(z)`: a layer with parameters
                continue
            if other is not method and feeds_submodule(ctx, other, depth + 1):
                return True
    return False


def _harmless(ctx: FileContext, decorator: ast.expr) -> bool:
    """``@torch.no_grad()``, ``@torch.inference_mode()``: decorators that leave a method's devices alone."""
    full = ctx.qualname(decorator.func if isinstance(decorator, ast.Call) else decorator)
    return full in ("torch.no_grad", "torch.inference_mode", "torch.enable_grad")


def _layer(ctx: FileContext, cls: ast.ClassDef | None, attr: str) -> bool:
    """Whether ``self.<attr>`` is set in the class's ``__init__`` to a layer with parameters.

    ``nn.Linear(...)`` and the like, or a module class of the file; or, in a module class, a network the
    constructor is handed (``self.embedding_net = embedding_net``, a parameter named for a network).
    """
    if cls is None:
        return False
    for stmt in cls.body:
        if not (isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__"):
            continue
        handed = {a.arg for a in [*stmt.args.args, *stmt.args.kwonlyargs][1:] if _names_a_network(a.arg)}
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Assign):
                continue
            if not any(isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets):
                continue
            if isinstance(node.value, ast.Call) and _holds_parameters(ctx, node.value):
                return True
            if isinstance(node.value, ast.Name) and node.value.id in handed and ctx.kinds.class_is_module(cls.name):
                return True
    return False


#: Words in a constructor parameter's name that say it is handed a network (``embedding_net``, ``encoder``).
_NETWORK_WORDS = ("net", "model", "encoder", "decoder", "backbone")


def _names_a_network(name: str) -> bool:
    words = name.lower().split("_")
    return any(word in _NETWORK_WORDS or word.endswith(_NETWORK_WORDS) for word in words)


#: Containers of layers: they hold parameters where a layer in them does.
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})


def _holds_parameters(ctx: FileContext, call: ast.Call, depth: int = 0) -> bool:
    """Whether the module built by ``call`` holds parameters.

    A layer with parameters, a module class of the file, or an ``nn.Sequential``/``ModuleList``/``ModuleDict`` with
    one of those in it.
    """
    full = ctx.call_name(call) or ""
    last = full.rsplit(".", 1)[-1]
    if full.startswith("torch.nn.") and last in LAYERS_WITH_PARAMETERS:
        return True
    if full in ctx.kinds.classes and ctx.kinds.class_is_module(full):
        return True
    if isinstance(call.func, ast.Name) and (kind := ctx.kind(call)) is not None and kind.is_module:
        return True  # `base = MLPBase`, then `self.base = base(obs_shape[0])`: a module class of the file
    if full.startswith("torch.nn.") and last in _CONTAINERS and depth < 3:
        inner = [n for a in [*call.args, *(k.value for k in call.keywords)] for n in ast.walk(a)]
        return any(isinstance(n, ast.Call) and _holds_parameters(ctx, n, depth + 1) for n in inner)
    return False


def _on_device(items: tuple[Val | None, ...]) -> Val | None:
    """A tensor on the device when one of the tensors ``items`` combines is there (with any other, it raises).

    ``torch.cat((predict, output))`` where ``predict`` starts as ``None`` before a loop (LSTNet's evaluation) and
    ``output`` is a device model's output: whatever ``predict`` was, the result is on the device.
    """
    found = next((v for v in items if v is not None and v.what in TENSORISH and v.where == DEVICE), None)
    return None if found is None else Val("tensor", DEVICE, dev=found.dev)


#: Methods that only a tensor has (not a tuple, list, dict or NumPy array): a batch they are called on is a tensor.
_TENSOR_ONLY_BATCH_METHODS = TENSOR_ONLY_METHODS | SHAPERS | frozenset({"float", "half", "double", "bfloat16"})

#: Combining functions that take their tensors as one sequence (``torch.cat((a, b))``).
_SEQUENCE_FUNCTIONS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack"})

#: Functions that build a grid of their 1-D inputs and check that all are on one device (no 0-dim exception).
_GRID_FUNCTIONS = frozenset({"meshgrid", "cartesian_prod"})


def _norm_with_state(node: ast.Call) -> bool:
    """Whether the ``InstanceNorm`` built by ``node`` holds parameters or buffers (``affine``, running stats)."""
    return any(
        k.arg in ("affine", "track_running_stats") and not (isinstance(k.value, ast.Constant) and not k.value.value)
        for k in node.keywords
    )


def _unstarred(node: ast.Call, args: list[Val]) -> list[Val]:
    """``args`` of ``node`` with each ``*seq`` replaced by the sequence's items (its element, once, for a list)."""
    if not any(isinstance(a, ast.Starred) for a in node.args):
        return args
    flat: list[Val] = []
    for arg_node, val in zip(node.args, args, strict=False):
        if not isinstance(arg_node, ast.Starred):
            flat.append(val)
        elif val.what == "tuple" and val.items:
            flat.extend(val.items)
        elif val.what == "seq" and val.element is not None:
            flat.append(val.element)
        else:
            flat.append(UNKNOWN)
    return flat


#: Methods of a ``logging.Logger`` (and of the ``logging`` module) that write a message.
_LOG_METHODS = frozenset("debug info warning warn error exception critical fatal log".split())


def _logging_call(node: ast.Call) -> bool:
    """``logger.info(...)``, ``self.log.warning(...)``, ``logging.debug(...)``: a logger writing a message."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS):
        return False
    owner = dotted(func.value)
    return owner is not None and "log" in owner.rsplit(".", 1)[-1].lower()


def _batch(source: Val) -> Val:
    """What a loader or a dataset gives: a batch where its tensors are, or a tuple of tensors each on its own."""
    if source.items:
        return Val("tuple", items=source.items)
    return Val("batch", source.where)


def _wraps(name: str | None) -> bool:
    """Whether a call of ``name`` wraps the module it is given, sharing its parameters."""
    if name is None:
        return False
    return name in COMPILERS or name in PARALLEL_WRAPPERS


#: Words in the name of a later argument of a module call that may rightly stay on the host (``lengths`` for
#: ``pack_padded_sequence``, sizes, counts).
_HOST_ARGUMENT_WORDS = ("len", "size", "count", "num", "cpu", "shape", "step")


def _state_tuple(val: Val) -> bool:
    """A tuple of tensors, one of them on the host (an LSTM's ``(h, c)`` state), or a sequence of host tensors."""
    if val.what == "tuple" and val.items:
        return all(v.what in TENSORISH for v in val.items) and any(v.where == HOST and not v.scalar for v in val.items)
    element = val.element
    return val.what == "seq" and element is not None and element.what in TENSORISH and element.where == HOST


def _later_input(val: Val, node: ast.expr) -> bool:
    """Whether a host tensor given as a later argument of a module call is an input that must be on its device.

    Not a zero-dimensional one, and not one named as a length, size or count.
    """
    if val.scalar or (isinstance(node, ast.Starred) and val.name is None):
        return False
    inner = node.value if isinstance(node, ast.Subscript) else node  # `rollouts.masks[step]`: the tensor's name
    text = (val.name or dotted(inner) or "").lower()
    if not text and isinstance(node, ast.Call):  # `Variable(torch.from_numpy(y_prev).type(...))`: the data's names
        names = {n.id.lower() for n in ast.walk(node) if isinstance(n, ast.Name)} - _API_NAMES
        return bool(names) and not any(word in name for name in names for word in _HOST_ARGUMENT_WORDS)
    return bool(text) and not any(word in text for word in _HOST_ARGUMENT_WORDS)


#: Names in a call's text that are the API, not the data it converts (see :func:`_later_input`).
_API_NAMES = frozenset({"torch", "np", "numpy", "variable", "autograd", "nn", "f"})


def _on_device_tensor(val: Val) -> bool:
    """A tensor (or a module's output) known to be on the chosen device."""
    return val.what in TENSORISH and val.where == DEVICE


def _reading_method(ctx: FileContext, name: str) -> bool:
    """Whether calling the method ``name`` on a module of the file leaves the module where it is.

    True when the file's classes define ``name`` and every definition only reads (:func:`reads_only`), with no
    decorator but harmless ones: whichever class the receiver is of (``RNNModel`` or ``RNNModelScratch``, both with
    a ``begin_state``), the call moves nothing.
    """
    found = [
        stmt
        for cls in ctx.kinds.classes.values()
        for stmt in cls.body
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name
    ]
    return bool(found) and all(
        isinstance(method, ast.FunctionDef)
        and reads_only(method, ctx)
        and all(_harmless(ctx, d) for d in method.decorator_list)
        for method in found
    )


def _moves_own_inputs(cls: ast.ClassDef) -> bool:
    """Whether the ``forward`` of module class ``cls`` moves its first input to where the module itself is.

    ``x = x.to(self.device)`` with ``device`` a property giving ``self.proj.weight.device``, ``x.to(self.fc.weight
    .device)``, ``x.to(next(self.parameters()).device)``: the module takes its input from any device. Not a device
    the class keeps from its construction (``self.dev = args.device``), which may differ from its weights'.
    """
    forward = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name in ("forward", "__call__")), None)
    if forward is None or len(forward.args.args) < 2:
        return False
    first = forward.args.args[1].arg
    kept = {  # `self.device = device` in `__init__`: a device it is given, not necessarily its weights'
        t.attr
        for m in cls.body
        if isinstance(m, ast.FunctionDef) and m.name == "__init__"
        for n in ast.walk(m)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Attribute) and dotted(t.value) == "self"
    }
    for stmt in ast.walk(forward):
        if not (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == first for t in stmt.targets)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr == "to"
            and dotted(stmt.value.func.value) == first
            and len(stmt.value.args) == 1
        ):
            continue
        target = stmt.value.args[0]
        text = ast.unparse(target)
        if "self.parameters()" in text or ("self." in text and text.endswith(".device")):
            name = dotted(target) or ""
            return not (name.count(".") == 1 and name.split(".")[1] in kept)
    return False


def _assign_targets(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]
