"""Checkpointer (placeholder, being written)."""
# ruff: noqa
from typing import Any
Checkpointer: Any = None
