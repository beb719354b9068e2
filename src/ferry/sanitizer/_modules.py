"""Which module's forward is running: a stack kept by global forward hooks, named from the root module.

``register_module_forward_pre_hook`` pushes the module, ``register_module_forward_hook(always_call=True)`` pops it
(also when the forward raises). Names are looked up only when a report needs one, from the outermost module's
``named_modules()``: ``encoder.layers.3.attn``; ``""`` is the root itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from ferry.sanitizer._frames import SourceLine, source_line, user_frame


class ModuleStack:
    """The modules whose forward is running, outermost first, while :meth:`install` hooks are in place."""

    def __init__(
        self,
        on_root_forward: Callable[[nn.Module], None] | None = None,
        on_root_output: Callable[[nn.Module, Any], None] | None = None,
        on_root_inputs: Callable[[nn.Module, Any], None] | None = None,
        on_return: Callable[[int, Any], None] | None = None,
    ) -> None:
        self.stack: list[nn.Module] = []
        #: the call of the outermost module: its line in the user's code, the variable name of each tensor passed to
        #: it (``id -> name``) and of the module itself; a mismatch on one of those inputs is the caller's bug
        self.root_call: SourceLine | None = None
        self.root_inputs: dict[int, str] = {}
        self.root_name: str | None = None
        #: called when a forward starts, and when one returns, with no other module's forward running around it
        self.on_root_forward = on_root_forward
        self.on_root_output = on_root_output
        self.on_root_inputs = on_root_inputs
        #: called when any forward ends, with the depth left (0: no forward running) and the output
        self.on_return = on_return
        self._handles: list[RemovableHandle] = []

    def install(self) -> None:
        """Register the global forward hooks (every module, including ones built later)."""
        hooks = torch.nn.modules.module
        self._handles = [
            hooks.register_module_forward_pre_hook(self._push),
            hooks.register_module_forward_hook(self._pop, always_call=True),
        ]

    def remove(self) -> None:
        """Remove the hooks and forget the stack."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.stack.clear()

    def _push(self, module: nn.Module, args: Any) -> None:
        if not self.stack:
            self._remember_root_call(module, args)
            if self.on_root_forward is not None:
                self.on_root_forward(module)
            if self.on_root_inputs is not None:
                self.on_root_inputs(module, args)
        self.stack.append(module)

    def _remember_root_call(self, module: nn.Module, args: Any) -> None:
        frame = user_frame()
        if frame is None:
            self.root_call, self.root_inputs, self.root_name = None, {}, None
            return
        local = frame.f_locals
        names = {id(value): name for name, value in reversed(local.items()) if isinstance(value, torch.Tensor)}
        passed = args if isinstance(args, tuple) else (args,)
        self.root_call = source_line(frame)
        self.root_inputs = {id(a): names[id(a)] for a in passed if isinstance(a, torch.Tensor) and id(a) in names}
        self.root_name = next((name for name, value in local.items() if value is module), None)

    def _pop(self, module: nn.Module, args: Any, output: Any) -> None:
        stack = self.stack
        while stack:
            if stack.pop() is module:
                break
        if self.on_return is not None:
            self.on_return(len(stack), output)
        if not stack and self.on_root_output is not None:
            self.on_root_output(module, output)

    @property
    def current(self) -> nn.Module | None:
        """The innermost module whose forward is running, or ``None``."""
        return self.stack[-1] if self.stack else None

    def path(self) -> str | None:
        """Dotted path of the innermost running module within the outermost one (``""`` for the outermost itself)."""
        if not self.stack:
            return None
        root, current = self.stack[0], self.stack[-1]
        for name, module in root.named_modules(remove_duplicate=False):
            if module is current:
                return str(name)
        return type(current).__name__

    def unregistered_holder(self) -> str | None:
        """``Model.heads``: the plain list, tuple or dict attribute of a running module that holds the innermost one.

        ``None`` when the innermost module is registered in the outermost one (``named_modules()`` finds it), or no
        running module keeps it in a plain container.
        """
        if len(self.stack) < 2:
            return None
        root, current = self.stack[0], self.stack[-1]
        if any(module is current for module in root.modules()):
            return None
        for owner in reversed(self.stack[:-1]):
            for attr, value in vars(owner).items():
                items = value.values() if isinstance(value, dict) else value
                if isinstance(value, list | tuple | dict) and any(item is current for item in items):
                    return f"{type(owner).__name__}.{attr}"
        return None

    def plain_attribute(self, tensor: torch.Tensor) -> str | None:
        """``PositionalEncoding.pe``: a running module's plain tensor attribute (not a parameter or buffer)."""
        for owner in reversed(self.stack):
            for attr, value in vars(owner).items():
                if value is tensor or (isinstance(value, torch.Tensor) and _same_storage(value, tensor)):
                    return f"{type(owner).__name__}.{attr}"
        return None

    def parameter_device(self) -> torch.device | None:
        """The device of the innermost running module's first parameter (or buffer), or ``None``."""
        module = self.current
        if module is None:
            return None
        for parameter in module.parameters():
            return parameter.device
        for buffer in module.buffers():
            return buffer.device
        return None

    def tensor_name(self, tensor: torch.Tensor) -> str | None:
        """``path.weight`` when ``tensor`` is a parameter or buffer of the innermost running module, else ``None``."""
        module, path = self.current, self.path()
        if module is None:
            return None
        named: list[tuple[str, torch.Tensor]] = [*module.named_parameters(), *module.named_buffers()]
        for name, value in named:
            if value is tensor:
                return f"{path}.{name}" if path else name
        return None


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``b`` is ``a`` or a view of it (``self.pe[:, :n]``): the same memory on the same device."""
    if a.device != b.device or a.is_meta or b.is_meta:
        return False
    try:
        return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0)
    except (RuntimeError, NotImplementedError):  # tensors without storage (sparse, some subclasses)
        return False
