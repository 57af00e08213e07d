"""The op table, assembled from the op families (``ops/<family>/``) in a fixed order.

``ROWS[code]`` is the row of op ``code``; ``OpCode`` names the codes. The families
register their rows on import (codes follow import order; nothing depends on their
values: the generated wrappers name ops, and compiled code reads the cast op's code
from the tape header).
"""

from __future__ import annotations

import enum

# isort: off
# the families' rows, imported in the order that fixes the op codes (and docs/ops.md's
# order); each family is a folder (ops/<family>/: rows, kernels, front ends, rules)
from .elementwise import core as _elementwise_core  # noqa: F401
from .elementwise import ufuncs as _elementwise_ufuncs  # noqa: F401
from .shape import rows as _shape_rows  # noqa: F401
from .linalg import rows as _linalg_rows  # noqa: F401
from .reduce import rows as _reduce_rows  # noqa: F401
from .special import rows as _special_rows  # noqa: F401
from .composite import rows as _composite_rows  # noqa: F401

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
]
