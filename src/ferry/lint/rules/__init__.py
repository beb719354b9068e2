"""The registry of lint rules: one module per rule, each defining ``RULE``; ``RULES`` lists them by code."""

from __future__ import annotations

from ferry.lint.model import Rule
from ferry.lint.rules import (
    data_parallel_state_dict,
    device_less_tensor_in_forward,
    discarded_tensor_move,
    float64_on_mps,
    hardcoded_cuda_device,
    host_sync_in_training_loop,
    inference_in_train_mode,
    input_on_other_device,
    load_without_map_location,
    loss_on_other_device,
    module_never_moved,
    numpy_of_device_tensor,
    optimizer_state_loaded_before_move,
    to_empty_without_init,
    whole_module_pickled,
)

__all__ = ["MODULES", "RULES"]

#: Every rule module, in code order; a test checks that each file of this folder is listed.
MODULES = (
    discarded_tensor_move,
    hardcoded_cuda_device,
    load_without_map_location,
    whole_module_pickled,
    device_less_tensor_in_forward,
    input_on_other_device,
    module_never_moved,
    optimizer_state_loaded_before_move,
    data_parallel_state_dict,
    inference_in_train_mode,
    loss_on_other_device,
    numpy_of_device_tensor,
    float64_on_mps,
    to_empty_without_init,
    host_sync_in_training_loop,
)

RULES: tuple[Rule, ...] = tuple(sorted((m.RULE for m in MODULES), key=lambda rule: rule.code))
