"""``inference-in-train-mode``: a model run for inference in training mode.

Two shapes, chosen to stay quiet in normal training:

- **after loading**: a root module (one called outside any other module's forward) whose weights were set by
  ``load_state_dict`` (on it, or on a module that holds it: a model run through its own methods calls its layers
  as roots) while it was in training mode, with no ``.train()``/``.eval()`` call since, and with an active
  Dropout or BatchNorm layer, is reported at the line that calls it when it runs under
  ``torch.no_grad()``/``inference_mode`` (no backward can follow: this is inference), or with grad enabled and no
  backward through its output before its next forward, or before the sanitizer block ends (a resumed training run
  calls ``loss.backward()`` and is never reported);
- **after training**: a root module that trained (a backward went through its output since its last
  ``.train()``/``.eval()`` call) and has an active Dropout layer is then called under ``torch.no_grad()``/
  ``inference_mode`` still in training mode: the evaluation after a training loop that forgot ``model.eval()``.
  With grad enabled, the same holds when the call comes from a function named for evaluation (``validate``,
  ``eval_fn``, ``test``, ``predict``; not one whose name also says ``train``) other than the one that trained it:
  validation loops that compute a loss without ``no_grad``.
  A module whose only mode-dependent layers are BatchNorm is reported only when what it gave is then scored: its
  output (or what is computed from it) reaches a loss function (or a loss module, one named ``...Loss`` included)
  or is compared with another tensor
  (``criterion(outputs, targets)``, ``predicted.eq(targets)``). Running BatchNorm in training mode under
  ``no_grad`` is otherwise a known technique (sampling a GAN generator, recomputing the statistics with
  ``momentum=None`` as ``torch.optim.swa_utils.update_bn`` does), and is left alone; so is an output given to
  another model that is training (a GAN's discriminator step: ``with torch.no_grad(): fake = G(z)``, then
  ``D(fake)`` into the discriminator's loss).

Dropout then zeroes random activations and BatchNorm uses (and updates) batch statistics, so each call gives a
different answer. Calling ``model.eval()`` (or ``model.train()``, to say training is meant) ends the watch.
"""

from __future__ import annotations

import re
import sys
import weakref
from collections.abc import Callable
from types import CodeType
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from ferry.sanitizer._frames import SourceLine, source_line, user_frame

Emit = Callable[[str, SourceLine, str, "Exception | None", Any], None]
#: A watched output: the model's class name, where it was called, its BatchNorm layers, how (``under no_grad``).
_Scored = tuple[str, SourceLine, list[str], str]
#: How many tensors computed from watched outputs are followed at most.
_WATCHED = 4096


#: Words of a function's name that say it evaluates (the linter's FRY010 reads names the same way).
_EVALUATION_WORDS = frozenset(
    "eval evaluate evaluation valid validate validation val test testing predict prediction infer inference".split()
)


class _Named:
    """A loss module, where :meth:`TrainModeWatch.scored` reads a torch function's name (``RealNVPLoss, a loss``)."""

    def __init__(self, name: str) -> None:
        self.__name__ = f"{name}, a loss"


def _evaluating(code: CodeType) -> bool:
    """Whether a function's name says it evaluates, and not that it trains (``validate``, not ``train_and_eval``)."""
    words = set(re.split(r"[^a-z]+", code.co_name.lower()))
    return bool(words & _EVALUATION_WORDS) and not any(w.startswith("train") for w in words)


def active_layers(module: nn.Module) -> list[str]:
    """Names of the Dropout (p > 0) and BatchNorm layers of ``module`` that are in training mode."""
    found = []
    for name, layer in module.named_modules():
        if not layer.training:
            continue
        if (isinstance(layer, nn.modules.dropout._DropoutNd) and layer.p > 0) or isinstance(
            layer, nn.modules.batchnorm._BatchNorm
        ):
            found.append(_label(name, layer))
    return found


def _label(name: str, layer: nn.Module) -> str:
    """``Dropout `head.3```, or the class alone for the model itself: a child named ``3`` is not three of them."""
    return f"{type(layer).__name__} `{name}`" if name else type(layer).__name__


class TrainModeWatch:
    """Modules that got weights in training mode, and their forwards still waiting for a backward."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self._loaded: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        #: how each of those got its weights (``load_state_dict``, ``torch.load``), for the message
        self._how: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        self._pending: weakref.WeakKeyDictionary[nn.Module, tuple[SourceLine, list[str]]] = weakref.WeakKeyDictionary()
        #: root modules a backward went through since their last .train()/.eval() call
        self._trained: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        #: the function whose call of such a module the backward went through (where it trained)
        self._trained_in: weakref.WeakKeyDictionary[nn.Module, CodeType | None] = weakref.WeakKeyDictionary()
        #: trained modules a function named for evaluation called with grad enabled, no backward since: where, name
        self._evaluated: weakref.WeakKeyDictionary[nn.Module, tuple[SourceLine, str]] = weakref.WeakKeyDictionary()
        #: root modules called under no_grad in training mode, reported when their forward returns still in it:
        #: ("trained" or "loaded", where, the active layers)
        self._deferred: weakref.WeakKeyDictionary[nn.Module, tuple[str, SourceLine, list[str]]] = (
            weakref.WeakKeyDictionary()
        )
        #: BatchNorm-only modules called under no_grad in training mode after training: whose output to watch
        self._scored: weakref.WeakKeyDictionary[nn.Module, tuple[SourceLine, list[str], str]] = (
            weakref.WeakKeyDictionary()
        )
        #: tensors computed from such an output (by id: tensors compare element-wise), with the call that made it
        #: (see :meth:`scored`)
        self.suspects: dict[int, tuple[weakref.ref[torch.Tensor], _Scored]] = {}
        #: Floating tensors made from labels while suspects are watched (one-hot masks), see :meth:`_label`.
        self.labels: dict[int, weakref.ref[torch.Tensor]] = {}

    def loaded(self, module: nn.Module, how: str = "load_state_dict") -> None:
        """``module.load_state_dict`` ran (``how``), or ``torch.load`` gave a whole pickled module: it has weights.

        The submodules count too: a model run through its own methods (``model.encode(src)`` calling
        ``self.transformer.encoder(...)``) never calls its root forward, and its submodules are called as roots.
        ``.train()``/``.eval()`` reach every submodule (``nn.Module.train`` recurses), so they end the watch on all.
        """
        for part in module.modules():
            if part.training:
                self._loaded.add(part)
                self._how[part] = how

    def chosen(self, module: nn.Module) -> None:
        """``module.train()``/``.eval()`` ran, or a backward went through its output: the mode is meant."""
        self._loaded.discard(module)
        self._pending.pop(module, None)
        self._trained.discard(module)
        self._trained_in.pop(module, None)
        self._evaluated.pop(module, None)

    def root_inputs(self, module: nn.Module, args: Any) -> None:
        """A root module gets ``args``: a loss module scores watched outputs as a loss function does.

        A ``torch.nn`` loss, or a module of the user's named for one (``RealNVPLoss()(z, sldj)``); see
        :meth:`scored`. A module that trains (training mode, grad enabled, trainable weights) takes watched outputs
        as its training data: they are no longer watched.
        """
        if not self.suspects:
            return
        name = type(module).__name__
        if isinstance(module, nn.modules.loss._Loss) or name.endswith(("Loss", "Criterion")):
            self.scored(_Named(name), args if isinstance(args, tuple) else (args,), {}, None)
            return
        if module.training and torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters()):
            # a GAN's discriminator step (`with torch.no_grad(): fake = G(z)`, then `D(fake)` trains D): the output
            # is training data for another model, which scores it on purpose
            for leaf in tree_leaves(args):
                if isinstance(leaf, torch.Tensor) and self._suspect(leaf) is not None:
                    self.suspects.pop(id(leaf), None)

    def root_forward(self, module: nn.Module) -> None:
        """A root module's forward starts (cheap when ``module`` is not watched)."""
        inner = getattr(module, "module", None) if isinstance(module, _WRAPPERS) else None
        if module not in self._loaded and isinstance(inner, nn.Module) and inner in self._loaded and module.training:
            # `model.load_state_dict(...)`, then `model = nn.DataParallel(model)`: the wrapper runs the loaded model
            self._loaded.add(module)
            self._how[module] = self._how.get(inner, "load_state_dict")
        if module not in self._loaded:
            if module in self._trained and module.training:
                if not torch.is_grad_enabled():
                    frame = user_frame(2)
                    if frame is not None:  # reported when it returns, still in training mode (see `root_output`)
                        self._deferred[module] = ("trained", source_line(frame), [])
                    return
                evaluated = self._evaluated.pop(module, None)
                if evaluated is not None:  # called again by evaluation code, and no backward since the last call
                    self._after_training(module, *evaluated)
                    return
                frame = user_frame(2)
                if frame is not None and _evaluating(frame.f_code) and frame.f_code is not self._trained_in.get(module):
                    self._evaluated[module] = (source_line(frame), frame.f_code.co_name)
            return
        pending = self._pending.pop(module, None)
        if pending is not None:  # called again, and no backward since the last call
            self._report(module, *pending)
            return
        layers = active_layers(module) if module.training else []
        if not layers:
            self._loaded.discard(module)
            return
        frame = user_frame(2)
        if frame is None:
            return
        where = source_line(frame)
        if torch.is_grad_enabled():
            self._pending[module] = (where, layers)
        else:
            self._deferred[module] = ("loaded", where, layers)

    def _after_training(self, module: nn.Module, called: SourceLine | None = None, evaluating: str = "") -> None:
        """Report (or, BatchNorm only, watch) a trained module called in training mode for evaluation.

        ``called``/``evaluating``: where a function named for evaluation called it with grad enabled, and its name
        (else: under no_grad, here).
        """
        self._trained.discard(module)  # once per training phase
        dropout = [
            _label(name, layer)
            for name, layer in module.named_modules()
            if layer.training and isinstance(layer, nn.modules.dropout._DropoutNd) and layer.p > 0
        ]
        if called is None:
            frame = user_frame(3)
            if frame is None:
                return
            called = source_line(frame)
        how = f"from `{evaluating}` (evaluation, no backward followed)" if evaluating else "under no_grad"
        if not dropout:
            norms = [
                _label(name, layer)
                for name, layer in module.named_modules()
                if layer.training
                and isinstance(layer, nn.modules.batchnorm._BatchNorm)
                and layer.track_running_stats
                and layer.momentum is not None  # momentum=None: recomputing the statistics on purpose
            ]
            if norms:
                self._scored[module] = (called, norms, how)
            return
        where = called
        shown = ", ".join(dropout[:4]) + (f" and {len(dropout) - 4} more" if len(dropout) > 4 else "")
        self.emit(
            "inference-in-train-mode",
            where,
            f"inference-in-train-mode: {type(module).__name__} is called at {where.described()} {how} in "
            f"training mode after it trained: its {shown} are active, so Dropout zeroes random activations and each "
            f"call gives a different answer. Call `model.eval()` before evaluating (and `model.train()` before "
            f"training again).",
            None,
            None,
        )

    def root_output(self, module: nn.Module, output: Any) -> None:
        """A root module's forward returned: a backward through ``output`` means it is training.

        A call under ``no_grad`` in training mode is reported here, when the module is still in training mode: a
        forward that switches its own mode (Tacotron's ``self.eval()`` when ``generate_gta``) meant it.
        """
        deferred = self._deferred.pop(module, None)
        if deferred is not None and module.training:
            shape, where, layers = deferred
            if shape == "trained":
                self._after_training(module, where)
            else:
                self._report(module, where, layers)
        scored = self._scored.pop(module, None)
        if scored is not None and output is None and sys.exc_info()[0] is not None:
            self._crashed(module, scored, sys.exc_info()[1])
        elif scored is not None:
            self._watch(output, (type(module).__name__, *scored))
        if module in self._evaluated:
            self._until_backward(output, module, self._evaluated)
        watch_training = module.training and module not in self._trained and torch.is_grad_enabled()
        if module not in self._pending and not watch_training:
            return
        ref = weakref.ref(module)
        pending = module in self._pending
        caller = user_frame() if watch_training else None
        code = caller.f_code if caller is not None else None

        def trained(*_: Any) -> None:
            watched = ref()
            if watched is None:
                return
            if pending:
                self.chosen(watched)
            if watched.training:
                self._trained.add(watched)
                self._trained_in[watched] = code

        for leaf in tree_leaves(output):
            if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None:
                leaf.grad_fn.register_prehook(trained)
                return

    @staticmethod
    def _until_backward(output: Any, module: nn.Module, watched: weakref.WeakKeyDictionary[nn.Module, Any]) -> None:
        """Forget ``module`` in ``watched`` once a backward goes through ``output`` (it was training after all)."""
        ref = weakref.ref(module)

        def backward(*_: Any) -> None:
            found = ref()
            if found is not None:
                watched.pop(found, None)

        for leaf in tree_leaves(output):
            if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None:
                leaf.grad_fn.register_prehook(backward)
                return

    def scored(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        """A torch operation ran while :attr:`suspects` is not empty: follow the watched outputs.

        Their results are watched too; a loss function, a comparison with a tensor not computed from them, or a
        product or difference with such a tensor of integers or booleans (labels, masks), is reported.
        """
        inputs = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        watched = [self._suspect(a) for a in inputs]
        found = next((w for w in watched if w is not None), None)
        name = getattr(func, "__name__", "")
        if found is None:
            self._follow_labels(name, inputs, result)
            return
        others = [a for a, w in zip(inputs, watched, strict=True) if w is None]
        labelled = name in _LABEL_ARITHMETIC and any(self._label(a) for a in others)
        # `(input * target).sum()` with integer targets, or with one-hot floats made from them: a Dice score
        if "loss" in name or name in _LOSSES or (name in _COMPARISONS and others) or labelled:
            self.suspects.clear()
            self.labels.clear()
            model, where, layers, how = found
            shown = ", ".join(layers[:4]) + (f" and {len(layers) - 4} more" if len(layers) > 4 else "")
            self.emit(
                "inference-in-train-mode",
                where,
                f"inference-in-train-mode: {model} is called at {where.described()} {how} in training mode "
                f"after it trained, and its output is scored ({name}): its {shown} use the statistics of each "
                f"evaluation batch and update their running statistics with evaluation data, so the scores are not "
                f"the model's. Call `model.eval()` before evaluating (and `model.train()` before training again).",
                None,
                None,
            )
            return
        self._watch(result, found)

    def _crashed(
        self, module: nn.Module, scored: tuple[SourceLine, list[str], str], error: BaseException | None
    ) -> None:
        """A trained BatchNorm model, called for evaluation in training mode, raised in its forward.

        DeepLabV3+'s `validate` without `model.eval()`: a batch of one image reaches a BatchNorm after global
        pooling, which in training mode needs more than one value per channel ("Expected more than 1 value per
        channel when training"); the training mode is the cause.
        """
        where, layers, how = scored
        shown = ", ".join(layers[:4]) + (f" and {len(layers) - 4} more" if len(layers) > 4 else "")
        said = str(error).splitlines()[0][:120] if error is not None else ""
        self.emit(
            "inference-in-train-mode",
            where,
            f"inference-in-train-mode: {type(module).__name__} is called at {where.described()} {how} in training "
            f"mode after it trained, and its forward failed ({said}): its {shown} use the statistics of each "
            f"evaluation batch. Call `model.eval()` before evaluating (and `model.train()` before training again).",
            None,
            None,
        )

    def _label(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` holds labels.

        Integers or booleans, or made from such a tensor by a reshaping or a conversion
        (``F.one_hot(mask, n).permute(0, 3, 1, 2).float()``).
        """
        if tensor.dim() == 0:
            return False
        if not (tensor.is_floating_point() or tensor.is_complex()):
            return True
        entry = self.labels.get(id(tensor))
        return entry is not None and entry() is tensor

    def _follow_labels(self, name: str, inputs: list[torch.Tensor], result: Any) -> None:
        """Mark what a reshaping or conversion of labels gives as labels too (see :meth:`_label`)."""
        if name not in _LABEL_KEEPING or not inputs or not self._label(inputs[0]):
            return
        if len(self.labels) > _WATCHED:
            self.labels = {k: v for k, v in self.labels.items() if v() is not None}
            if len(self.labels) > _WATCHED:
                self.labels.clear()
                return
        for leaf in tree_leaves(result):
            if isinstance(leaf, torch.Tensor) and (leaf.is_floating_point() or leaf.is_complex()):
                self.labels[id(leaf)] = weakref.ref(leaf)

    def _suspect(self, tensor: torch.Tensor) -> _Scored | None:
        entry = self.suspects.get(id(tensor))
        if entry is None or entry[0]() is not tensor:
            return None
        return entry[1]

    def _watch(self, value: Any, found: _Scored) -> None:
        if len(self.suspects) > _WATCHED:  # forget tensors that are gone
            self.suspects = {k: v for k, v in self.suspects.items() if v[0]() is not None}
            if len(self.suspects) > _WATCHED:
                self.suspects.clear()  # an evaluation that never scores: stop watching
                return
        for leaf in tree_leaves(value):
            if isinstance(leaf, torch.Tensor):
                self.suspects[id(leaf)] = (weakref.ref(leaf), found)

    def close(self) -> None:
        """The block ends: report the forwards no backward followed."""
        pending = list(self._pending.items())
        self._pending.clear()
        for module, (where, layers) in pending:
            self._report(module, where, layers)
        evaluated = list(self._evaluated.items())
        self._evaluated.clear()
        for module, (where, name) in evaluated:
            self._after_training(module, where, name)

    def _report(self, module: nn.Module, where: SourceLine, layers: list[str]) -> None:
        self._loaded.discard(module)
        shown = ", ".join(layers[:4]) + (f" and {len(layers) - 4} more" if len(layers) > 4 else "")
        self.emit(
            "inference-in-train-mode",
            where,
            f"inference-in-train-mode: {type(module).__name__} is called at {where.described()} in training mode "
            f"after {self._how.get(module, 'load_state_dict')}, with no backward following: its {shown} are active, "
            "so Dropout zeroes random "
            f"activations and BatchNorm uses and updates batch statistics, and each call gives a different answer. "
            f"Call `model.eval()` before inference (and `model.train()` to go back to training).",
            None,
            None,
        )


#: Wrappers that run the module they hold (``wrapper.module``) as their forward.
_WRAPPERS = (nn.DataParallel, nn.parallel.DistributedDataParallel)

#: Loss functions whose names do not say "loss" (``torch.nn.functional``).
_LOSSES = frozenset(
    {
        "cross_entropy",
        "nll_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "ctc_loss",
    }
)
#: Arithmetic that scores an output against labels when the other tensor holds integers or booleans (a Dice score's
#: ``input * target`` with the masks as ``long``).
_LABEL_ARITHMETIC = frozenset({"mul", "__mul__", "__rmul__", "sub", "__sub__", "__rsub__", "__and__", "logical_and"})
#: Operations that keep labels labels: conversions, reshapings, one-hot encoding, slicing.
_LABEL_KEEPING = frozenset(
    """
    one_hot to float double half bfloat16 type type_as permute view reshape flatten unflatten squeeze unsqueeze
    transpose contiguous clone detach __getitem__ narrow select expand expand_as movedim chunk split unbind
    """.split()
)
#: Comparisons that score an output against labels (``predicted.eq(targets)``, ``pred == y``).
_COMPARISONS = frozenset({"eq", "ne", "__eq__", "__ne__", "equal", "isclose", "allclose"})
