"""The linter's tables of PyTorch's API (``ferry.lint.torch_api``) name what the installed PyTorch has."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

from ferry.lint import torch_api

torch = pytest.importorskip("torch")

#: Added by out-of-tree backends (torch_npu, Habana): not in PyTorch itself.
PLUGGED_IN = frozenset({"npu", "hpu"})

#: Tables of dotted paths.
DOTTED = (
    "AVAILABILITY_CHECKS",
    "DEVICE_CALLS",
    "MASK_FACTORIES",
    "GRAD_MODES",
    "EAGER_STATE_OPTIMIZERS",
    "PARALLEL_WRAPPERS",
    "COMPILERS",
    "DATA_LOADERS",
    "TENSOR_DATASETS",
    "SAVES",
    "LOADS",
)


def _resolve(path: str) -> Any:
    """The object ``path`` names, importing modules on the way (a submodule may be shadowed by a function)."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            found = getattr(found, part)
        return found
    raise ImportError(path)


@pytest.mark.parametrize("table", DOTTED)
def test_dotted_names_exist(table: str) -> None:
    for path in sorted(getattr(torch_api, table)):
        assert _resolve(path) is not None, path


def test_factories_layers_losses_and_dtypes_exist() -> None:
    makers = (
        torch_api.FACTORIES
        | torch_api.DATA_FACTORIES
        | torch_api.NUMPY_FACTORIES
        | torch_api.LIKE_FACTORIES
        | torch_api.LEGACY_CONSTRUCTORS
    )
    assert [] == sorted(name for name in makers if not hasattr(torch, name))
    assert [] == sorted(name for name in torch_api.DTYPES if not isinstance(getattr(torch, name, None), torch.dtype))
    layers = torch_api.LAYERS_WITH_PARAMETERS | torch_api.LAYERS_WITHOUT_PARAMETERS | torch_api.MODE_DEPENDENT_LAYERS
    assert [] == sorted(name for name in layers if not hasattr(torch.nn, name))
    assert [] == sorted(name for name in torch_api.LOSS_FUNCTIONS if not hasattr(torch.nn.functional, name))
    assert [] == sorted(name for name in torch_api.CUDA_ONLY_CALLS if not hasattr(torch.cuda, name))


def test_moves_and_casts_are_methods_of_modules_and_tensors() -> None:
    assert [] == sorted(m for m in torch_api.MODULE_SELF_METHODS - PLUGGED_IN if not hasattr(torch.nn.Module, m))
    tensor_methods = (torch_api.MOVES | torch_api.DTYPE_CASTS) - PLUGGED_IN - {"to_empty"}
    assert [] == sorted(m for m in tensor_methods if not hasattr(torch.Tensor, m))
    assert not hasattr(torch.nn.Module, "mps")
    assert not hasattr(torch.Tensor, "mps")


def test_device_types() -> None:
    for name in sorted(torch_api.DEVICE_TYPES - {"npu"}):
        assert name == torch.device(name).type


def test_weight_first_losses() -> None:
    for name in sorted(torch_api.WEIGHT_FIRST_LOSSES - {"NLLLoss2d"}):  # NLLLoss2d: a deprecated NLLLoss
        assert "weight" == next(iter(inspect.signature(getattr(torch.nn, name)).parameters)), name


def test_only_the_eager_state_optimizers_make_state_when_built() -> None:
    optimizers = {
        name: cls
        for name, cls in vars(torch.optim).items()
        if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer) and cls is not torch.optim.Optimizer
    }
    eager = {
        f"torch.optim.{name}"
        for name, cls in optimizers.items()
        if cls([torch.nn.Parameter(torch.randn(3, 3))], lr=0.01).state
    }
    assert {name for name in torch_api.EAGER_STATE_OPTIMIZERS if name.count(".") == 2} == eager
