"""``inference-in-train-mode``: a model that got trained weights is run for inference without ``.eval()``.

The rule, chosen to stay quiet in normal training: a root module (one called outside any other module's forward)
whose weights were set by ``load_state_dict`` while it was in training mode, with no ``.train()``/``.eval()`` call
since, and with an active Dropout or BatchNorm layer, is reported at the line that calls it when

- it runs under ``torch.no_grad()``/``inference_mode`` (no backward can follow: this is inference), or
- it runs with grad enabled and no backward passes through its output before its next forward, or before the
  sanitizer block ends (a resumed training run calls ``loss.backward()`` and is never reported).

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

    def loaded(self, module: nn.Module) -> None:
        """``module.load_state_dict`` ran."""
        if module.training:
            self._loaded.add(module)

    def chosen(self, module: nn.Module) -> None:
        """``module.train()``/``.eval()`` ran, or a backward went through its output: the mode is meant."""
        self._loaded.discard(module)
        self._pending.pop(module, None)

    def root_forward(self, module: nn.Module) -> None:
        """A root module's forward starts (cheap when ``module`` is not watched)."""
        if module not in self._loaded:
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

    def root_output(self, module: nn.Module, output: Any) -> None:
        """A root module's forward returned: a backward through ``output`` means it is training."""
        if module not in self._pending:
            return
        ref = weakref.ref(module)

        def trained(*_: Any) -> None:
            watched = ref()
            if watched is not None:
                self.chosen(watched)

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
