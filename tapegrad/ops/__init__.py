"""The op table, assembled from the op families in a fixed order.

``ROWS[code]`` is the row of op ``code``; ``OpCode`` names the codes. The families
register their rows on import (codes follow import order; nothing depends on their
values: the generated wrappers name ops, and compiled code reads the cast op's code
from the tape header).
"""

from __future__ import annotations

import enum

# isort: off
# the families in the order that fixes the op codes (and docs/ops.md's order)
from . import elementwise
from . import shape
from . import linalg
from . import reduce
from . import special
from . import extra

# isort: on
from .table import BY_NAME, ELEMENTWISE, ROWS, Kind, Op

OpCode = enum.IntEnum("OpCode", [(op.name.upper(), op.code) for op in ROWS])

__all__ = [
    "BY_NAME",
    "ELEMENTWISE",
    "ROWS",
    "Kind",
    "Op",
    "OpCode",
    "elementwise",
    "extra",
    "linalg",
    "reduce",
    "shape",
    "special",
]
