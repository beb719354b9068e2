"""Discarded moves: ``t.to(device)`` as a statement of its own, whose result the caller throws away.

``Tensor.to``, ``.cuda()``, ``.cpu()`` and the dtype conversions return a new tensor and leave ``t`` where it was
(unlike ``Module.to``, which moves in place). The caller's bytecode tells whether the result is kept: when the
instruction after the running call is ``POP_TOP``, the value is dropped.

Bytecode differs between versions: 3.10 calls with ``CALL_METHOD``/``CALL_FUNCTION``, 3.11 with ``PRECALL`` +
``CALL`` followed by ``CACHE`` entries, 3.12 and 3.13 with ``CALL`` (3.13 also ``CALL_KW``) and inline caches. In
every version ``frame.f_lasti`` is the offset of the call instruction while the callee runs, and
:func:`dis.get_instructions` hides the ``CACHE`` entries by default, so "the next instruction shown" is the one that
receives the result on all of them.
"""

from __future__ import annotations

import dis
from itertools import pairwise
from types import CodeType, FrameType

import torch

#: Tensor methods that return a moved or converted copy and never change the tensor itself.
MOVE_METHODS = frozenset(
    getattr(torch.Tensor, name)
    for name in (
        "to cuda cpu mps xpu double float half bfloat16 int long short bool char byte type type_as contiguous "
        "pin_memory"
    ).split()
    if hasattr(torch.Tensor, name)
)

_CALLS = frozenset({"CALL", "CALL_KW", "CALL_METHOD", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX"})
#: code object -> offsets of the call instructions whose result is popped straight away
_DISCARDING: dict[CodeType, frozenset[int]] = {}


def discarding_calls(code: CodeType) -> frozenset[int]:
    """Return the offsets of the call instructions in ``code`` whose result is dropped by the next instruction."""
    known = _DISCARDING.get(code)
    if known is None:
        instructions = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
        known = frozenset(
            call.offset for call, after in pairwise(instructions) if call.opname in _CALLS and after.opname == "POP_TOP"
        )
        _DISCARDING[code] = known
    return known


def is_discarded(frame: FrameType) -> bool:
    """Whether the call that ``frame`` is running now has its result thrown away (a bare ``t.to(...)`` statement)."""
    return frame.f_lasti in discarding_calls(frame.f_code)
