"""Every op family's Python layers, imported once: the front ends, which attach each
array and composite row's function to its row (``Op.front``), and the recorded rules,
which attach its derivatives as ops (``Op.vjp``, ``Op.jvp``). Each family is a folder,
``ops/<family>/``: its rows and kernels are imported by :mod:`tapegrad.ops` (the
compiled layers), its front ends and rules here (above Tensor). Elementwise rows get
generated functions (:mod:`tapegrad.surface`).
"""

from __future__ import annotations

from .derivatives import check_every_row_has_rules
from .ops.composite import (  # noqa: F401
    calculus,
    elementwise_composites,
    nan_reductions,
    products,
    rearrange,
    statistics,
)
from .ops.elementwise import front as _elementwise_front  # noqa: F401
from .ops.elementwise import rules as _elementwise_rules  # noqa: F401
from .ops.linalg import convolution, scipy_front  # noqa: F401
from .ops.linalg import front as _linalg_front  # noqa: F401
from .ops.linalg import rules as _linalg_rules  # noqa: F401
from .ops.reduce import front as _reduce_front  # noqa: F401
from .ops.reduce import rules as _reduce_rules  # noqa: F401
from .ops.shape import front as _shape_front  # noqa: F401
from .ops.shape import rules as _shape_rules  # noqa: F401
from .ops.special import front as _special_front  # noqa: F401
from .ops.special import rules as _special_rules  # noqa: F401

check_every_row_has_rules()
