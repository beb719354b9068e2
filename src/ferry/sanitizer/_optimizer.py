"""Optimizer state on the wrong device: checked before every ``optimizer.step()`` while a sanitizer is on.

An optimizer's state (Adam's ``exp_avg``, SGD's ``momentum_buffer``...) is made on its parameter's device when it is
created: at the first step, when ``optimizer.load_state_dict`` runs (PyTorch casts it to the parameter's device
then), or when the optimizer is built (Adagrad's ``sum``). A model moved after that keeps new parameters on the new
device and the state on the old one; the next step mixes devices. On a GPU that raises deep inside the optimizer's
kernels, or, for some optimizers and pretend GPUs, not at all.
"""

from __future__ import annotations

import torch


def misplaced_state(optimizer: torch.optim.Optimizer) -> str | None:
    """The message for the first state tensor of ``optimizer`` not on its parameter's device, or ``None``.

    A 0-dim CPU tensor (``step`` of Adam, kept on the host on purpose) is never misplaced, as for PyTorch's ops.
    """
    for group_index, group in enumerate(optimizer.param_groups):
        for param_index, param in enumerate(group["params"]):
            state = optimizer.state.get(param)
            if not state:
                continue
            for key, value in state.items():
                if not isinstance(value, torch.Tensor) or value.device == param.device:
                    continue
                if value.device.type == "cpu" and value.dim() == 0:
                    continue
                name = type(optimizer).__name__
                return (
                    f"{name}'s state {key!r} for parameter {param_index} of param group {group_index} (shape "
                    f"{list(param.shape)}) is on {value.device}, but the parameter is on {param.device}: the model "
                    "moved after the optimizer made its state (at a step, at optimizer.load_state_dict, or when "
                    "built, as Adagrad does), so optimizer.step() mixes devices. Move the optimizer with the model: "
                    f"ferry.place(model, {str(param.device)!r}, optimizer=optimizer); or build and load the optimizer "
                    f"after model.to(device)."
                )
    return None
