"""The user's frame: the innermost Python frame outside torch and ferry, and the source line it is running.

Notebook cells work too: IPython registers each cell's source with :mod:`linecache` under the cell's file name, so
the line text comes from the same place tracebacks take it.
"""

from __future__ import annotations

import linecache
import os
import sys
from types import CodeType, FrameType
from typing import NamedTuple

import torch

#: ferry's own folder (``src/ferry``): this file is ``ferry/sanitizer/_frames.py``.
_FERRY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Folders whose frames are library code, not the user's: torch's and ferry's (tests live outside both).
_LIBRARY_DIRS = tuple(
    directory + os.sep
    for directory in (os.path.dirname(os.path.abspath(torch.__file__ or "")), _FERRY_DIR)
    if directory
)
_IS_LIBRARY: dict[CodeType, bool] = {}


class SourceLine(NamedTuple):
    """A line of the user's code: ``file``, 1-based ``line``, and its ``text`` (stripped; ``""`` when unknown)."""

    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def described(self) -> str:
        """``file:line: `text``` for messages; without the text where the source is not available."""
        return f"{self}: `{self.text}`" if self.text else str(self)


def is_library(code: CodeType) -> bool:
    """Whether ``code`` belongs to torch or ferry (cached per code object)."""
    known = _IS_LIBRARY.get(code)
    if known is None:
        filename = code.co_filename
        known = filename.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen ")
        if not known and not os.path.isabs(filename) and not filename.startswith("<"):
            known = os.path.abspath(filename).startswith(_LIBRARY_DIRS)
        _IS_LIBRARY[code] = known
    return known


def installed(code: CodeType) -> bool:
    """Whether ``code`` comes from an installed package (a ``site-packages`` or ``dist-packages`` folder).

    A trainer such as Lightning or the HF Trainer: lines the user does not write.
    """
    filename = code.co_filename
    return f"{os.sep}site-packages{os.sep}" in filename or f"{os.sep}dist-packages{os.sep}" in filename


def user_frame(depth: int = 1) -> FrameType | None:
    """Return the innermost frame outside torch and ferry, starting ``depth`` frames above the caller."""
    frame: FrameType | None = sys._getframe(depth + 1)
    while frame is not None and is_library(frame.f_code):
        frame = frame.f_back
    return frame


def user_frame_above(frame: FrameType) -> FrameType | None:
    """Return the innermost frame outside torch and ferry that called ``frame``."""
    above = frame.f_back
    while above is not None and is_library(above.f_code):
        above = above.f_back
    return above


def source_line(frame: FrameType) -> SourceLine:
    """Return the file, line number and text that ``frame`` is running."""
    filename, lineno = frame.f_code.co_filename, frame.f_lineno or 0
    return SourceLine(filename, lineno, linecache.getline(filename, lineno, frame.f_globals).strip())
