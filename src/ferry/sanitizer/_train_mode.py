"""``inference-in-train-mode``: a model run for inference in training mode.

Two shapes, chosen to stay quiet in normal training:

- **after loading**: a root module (one called outside any other module's forward) whose weights were set by
  ``load_state_dict`` while it was in training mode, with no ``.train()``/``.eval()`` call since, and with an active
  Dropout or BatchNorm layer, is reported at the line that calls it when it runs under
  ``torch.no_grad()``/``inference_mode`` (no backward can follow: this is inference), or with grad enabled and no
  backward through its output before its next forward, or before the sanitizer block ends (a resumed training run
  calls ``loss.backward()`` and is never reported);
- **after training**: a root module that trained (a backward went through its output since its last
  ``.train()``/``.eval()`` call) and has an active Dropout layer is then called under ``torch.no_grad()``/
  ``inference_mode`` still in training mode: the evaluation after a training loop that forgot ``model.eval()``.
  Modules whose only mode-dependent layers are BatchNorm are left out here: running them in training mode under
  ``no_grad`` is a known technique (recomputing BatchNorm statistics, sampling a GAN generator).

Dropout then zeroes random activations and BatchNorm uses (and updates) batch statistics, so each call gives a
different answer. Calling ``model.eval()`` (or ``model.train()``, to say training is meant) ends the watch.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from ferry.sanitizer._frames import SourceLine, source_line, user_frame

Emit = Callable[[str, SourceLine, str, "Exception | None", Any], None]


def active_layers(module: nn.Module) -> list[str]:
    """Names of the Dropout (p > 0) and BatchNorm layers of ``module`` that are in training mode."""
    found = []
    for name, layer in module.named_modules():
        if not layer.training:
            continue
        if (isinstance(layer, nn.modules.dropout._DropoutNd) and layer.p > 0) or isinstance(
            layer, nn.modules.batchnorm._BatchNorm
        ):
            found.append(name or type(layer).__name__)
    return found


class TrainModeWatch:
    """Modules that got weights in training mode, and their forwards still waiting for a backward."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self._loaded: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        self._pending: weakref.WeakKeyDictionary[nn.Module, tuple[SourceLine, list[str]]] = weakref.WeakKeyDictionary()
        #: root modules a backward went through since their last .train()/.eval() call
        self._trained: weakref.WeakSet[nn.Module] = weakref.WeakSet()

    def loaded(self, module: nn.Module) -> None:
        """``module.load_state_dict`` ran."""
        if module.training:
            self._loaded.add(module)

    def chosen(self, module: nn.Module) -> None:
        """``module.train()``/``.eval()`` ran, or a backward went through its output: the mode is meant."""
        self._loaded.discard(module)
        self._pending.pop(module, None)
        self._trained.discard(module)

    def root_forward(self, module: nn.Module) -> None:
        """A root module's forward starts (cheap when ``module`` is not watched)."""
        if module not in self._loaded:
            if module in self._trained and module.training and not torch.is_grad_enabled():
                self._after_training(module)
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
            self._report(module, where, layers)

    def _after_training(self, module: nn.Module) -> None:
        self._trained.discard(module)  # once per training phase
        dropout = [
            name or type(layer).__name__
            for name, layer in module.named_modules()
            if layer.training and isinstance(layer, nn.modules.dropout._DropoutNd) and layer.p > 0
        ]
        frame = user_frame(3)
        if not dropout or frame is None:
            return
        where = source_line(frame)
        shown = ", ".join(dropout[:4]) + (f" and {len(dropout) - 4} more" if len(dropout) > 4 else "")
        self.emit(
            "inference-in-train-mode",
            where,
            f"inference-in-train-mode: {type(module).__name__} is called at {where.described()} under no_grad in "
            f"training mode after it trained: its {shown} are active, so Dropout zeroes random activations and each "
            f"call gives a different answer. Call `model.eval()` before evaluating (and `model.train()` before "
            f"training again).",
            None,
            None,
        )

    def root_output(self, module: nn.Module, output: Any) -> None:
        """A root module's forward returned: a backward through ``output`` means it is training."""
        watch_training = module.training and module not in self._trained and torch.is_grad_enabled()
        if module not in self._pending and not watch_training:
            return
        ref = weakref.ref(module)
        pending = module in self._pending

        def trained(*_: Any) -> None:
            watched = ref()
            if watched is None:
                return
            if pending:
                self.chosen(watched)
            if watched.training:
                self._trained.add(watched)

        for leaf in tree_leaves(output):
            if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None:
                leaf.grad_fn.register_prehook(trained)
                return

    def close(self) -> None:
        """The block ends: report the forwards no backward followed."""
        pending = list(self._pending.items())
        self._pending.clear()
        for module, (where, layers) in pending:
            self._report(module, where, layers)

    def _report(self, module: nn.Module, where: SourceLine, layers: list[str]) -> None:
        self._loaded.discard(module)
        shown = ", ".join(layers[:4]) + (f" and {len(layers) - 4} more" if len(layers) > 4 else "")
        self.emit(
            "inference-in-train-mode",
            where,
            f"inference-in-train-mode: {type(module).__name__} is called at {where.described()} in training mode "
            f"after load_state_dict, with no backward following: its {shown} are active, so Dropout zeroes random "
            f"activations and BatchNorm uses and updates batch statistics, and each call gives a different answer. "
            f"Call `model.eval()` before inference (and `model.train()` to go back to training).",
            None,
            None,
        )
