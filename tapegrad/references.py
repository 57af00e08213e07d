"""Which objects something besides their list references (user code still holding a
tensor handle), read from reference counts at C speed."""

from __future__ import annotations

import sys
from itertools import compress


def _count_seen(objs: list) -> list[int]:
    """The reference counts :func:`referenced_elsewhere` sees (to calibrate it)."""
    seen: list[int] = []
    list(compress(objs, map(lambda c: seen.append(c), map(sys.getrefcount, objs))))
    return seen


# Reference count `referenced_elsewhere` sees for an object held only by its list
# (compress holds the item while the count is taken); anything above means someone else
# (user code) does.
_UNREFERENCED = _count_seen([object()])[0]


def referenced_elsewhere(objs: list) -> list:
    """The objects of ``objs`` that something besides the list references: a C-speed
    loop, ~20 ns per object (NumPy's fromiter + flatnonzero cost ~5 us more)."""
    return list(compress(objs, map(_UNREFERENCED.__lt__, map(sys.getrefcount, objs))))
