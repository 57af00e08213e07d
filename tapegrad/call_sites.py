"""Where a conversion of a tensor to a number comes from: the caller's instruction, read
off its bytecode (an assignment into a NumPy array, ``a[i] = t``; an explicit
``float(t)``; a call from NumPy's or SciPy's own code). The refusals of
:class:`tapegrad.tensors.Tensor` (``__float__``, ``__index__``...) ask it."""

from __future__ import annotations

import dis
import functools
import sys
from typing import Any

# a[i] = t, a[i:j] = t: the instructions that make an array convert what it stores
_STORE_OPS = frozenset(dis.opmap[n] for n in ("STORE_SUBSCR", "STORE_SLICE") if n in dis.opmap)
STORE_SCOPE = (
    "an assignment into a NumPy array (a[i] = t), which keeps only the number; make the "
    "array a tensor (tg.tensor(a), tnp.zeros_like(t)) or build it with tnp.stack"
)
# the calls that ask for a tensor's number explicitly (as t.item() does)
_EXPLICIT = (float, int)
_CALLS = frozenset(dis.opmap[n] for n in ("CALL", "CALL_FUNCTION", "CALL_METHOD") if n in dis.opmap)
_LOADS = frozenset(
    "LOAD_NAME LOAD_GLOBAL LOAD_FAST LOAD_DEREF LOAD_CLOSURE LOAD_ATTR LOAD_METHOD".split()
)


@functools.lru_cache(maxsize=512)
def _instructions(code: Any) -> tuple[dict[int, int], list]:
    ins = list(dis.get_instructions(code))
    return {x.offset: i for i, x in enumerate(ins)}, ins


def _callee(frame: Any) -> tuple[str, Any] | None:
    """The name and, where it can be looked up, the object a frame is calling at its
    current instruction; None when the frame is not at a call or the code has no
    source positions (Python 3.10).

    The call's source span starts where the callable's expression starts: walking back
    from the call, the first instruction that starts there and ends before the call
    does computed the callable (``float`` in ``float(t)``, ``math.exp`` in
    ``math.exp(x[0])``, ``.fill`` in ``np.zeros(2).fill(t)``)."""
    at, ins = _instructions(frame.f_code)
    i = at.get(frame.f_lasti)
    if i is not None and ins[i].opname == "PRECALL" and i + 1 < len(ins):
        i += 1  # (3.11 runs a builtin class's call from PRECALL once the code is quickened)
    if i is None or ins[i].opcode not in _CALLS:
        return None
    pos = getattr(ins[i], "positions", None)
    if pos is None or pos.lineno is None:
        return UNKNOWN_CALLEE
    begin, finish = (pos.lineno, pos.col_offset), (pos.end_lineno, pos.end_col_offset)
    for k in range(i - 1, -1, -1):
        x = ins[k]
        p = x.positions
        if p.lineno is None or (p.lineno, p.col_offset) != begin:
            continue
        if (p.end_lineno, p.end_col_offset) == finish:
            continue  # the call's own set-up (PRECALL, KW_NAMES)
        if x.opname not in _LOADS or not isinstance(x.argval, str):
            return "a call", None  # a computed callable: (f or g)(t), fs[0](t)
        name = x.argval.removeprefix("NULL + ").removesuffix(" + NULL")
        if x.opname in ("LOAD_ATTR", "LOAD_METHOD"):
            before = ins[k - 1] if k else None
            bp = before.positions if before is not None else None
            if before.opname in _LOADS and bp and (bp.lineno, bp.col_offset) == begin:
                return f"{str(before.argval).removeprefix('NULL + ')}.{name}", None
            return name, None
        found = _MISSING
        if x.opname != "LOAD_GLOBAL":
            found = frame.f_locals.get(name, _MISSING)
        if found is _MISSING and x.opname in ("LOAD_NAME", "LOAD_GLOBAL"):
            found = frame.f_globals.get(name, frame.f_builtins.get(name, _MISSING))
        return name, None if found is _MISSING else found
    return None


_MISSING = object()
UNKNOWN_CALLEE = ("?", None)
# "%f" % t: the instruction (BINARY_OP's argument 6 is %, NB_REMAINDER, from Python 3.11)
_REMAINDER = frozenset(dis.opmap[n] for n in ("BINARY_MODULO",) if n in dis.opmap)
_BINARY_OP = dis.opmap.get("BINARY_OP", -1)


def implicit_site(depth: int) -> str | None:
    """Where a conversion of a tensor to a Python number comes from, when it is not the
    user's explicit request: the frame ``depth`` levels above the caller storing it into
    an array (``a[i] = t``) or calling anything but ``float`` / ``int`` on it from C
    (``math.exp(t)``, ``np.float64(t)``, ``a.fill(t)``, ``complex(t)``), which gets the
    number through ``__float__`` as ``float(t)`` would. None for ``float(t)``,
    ``int(t)``; a description of the call otherwise."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return None
    op = frame.f_code.co_code[frame.f_lasti]
    if op in _STORE_OPS:
        return STORE_SCOPE
    if op in _REMAINDER or (op == _BINARY_OP and frame.f_code.co_code[frame.f_lasti + 1] == 6):
        return None  # "%.3f" % t: formatting for display, as f"{t:.3f}" (no number left)
    callee = _callee(frame)
    if callee is UNKNOWN_CALLEE or (callee is not None and any(callee[1] is f for f in _EXPLICIT)):
        return None  # (Python 3.10 has no source positions: conversions are allowed there)
    what = f"{callee[0]}()" if callee is not None else "a conversion made from C code"
    return (
        f"{what}, which takes the number from C code and keeps no gradient; write it "
        "with tapegrad.numpy ops (tnp.exp, tnp.log, tnp.sum...), or ask for the number "
        "explicitly with float(t) or t.item()"
    )
