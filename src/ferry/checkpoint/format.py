"""The ferry file format (placeholder, being written)."""
# ruff: noqa
from typing import Any
def save(obj: Any, path: Any) -> None: raise NotImplementedError
def load(path: Any, *, device: Any = "cpu", trusted: bool = False) -> Any: raise NotImplementedError
