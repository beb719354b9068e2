"""load_state_dict (placeholder, being written)."""
# ruff: noqa
from typing import Any
LoadReport: Any = None
def load_state_dict(module: Any, source: Any, *, strict: bool = True) -> Any: raise NotImplementedError
