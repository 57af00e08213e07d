"""``tapegrad.scipy``: SciPy's names, recording on Tensors.

* ``tapegrad.scipy.linalg``: ``expm``, ``solve_triangular``, ``cho_factor`` /
  ``cho_solve``, ``lu_factor`` / ``lu_solve``, and NumPy's linear algebra under SciPy's
  names;
* ``tapegrad.scipy.special`` (``tapegrad.special``);
* ``tapegrad.scipy.integrate``: ``odeint``, ``solve_ivp``, ``cumulative_trapezoid``;
* ``tapegrad.scipy.optimize``: ``root``, ``minimize``, ``least_squares``,
  ``root_scalar``, ``brentq``, SciPy's solvers differentiated implicitly in ``args``;
* ``tapegrad.scipy.sparse``: ``csr_matrix`` and its kin with differentiable values, and
  ``.linalg``: ``spsolve``, ``cg``, ``gmres``;
* ``tapegrad.scipy.stats``: SciPy's distributions.

On plain (non-tensor) arguments each is SciPy's own. SciPy's own functions are not
ufuncs, so ``scipy.linalg.expm(t)`` cannot be intercepted on a tensor: it raises,
naming the tapegrad function to call instead.
"""

from __future__ import annotations

from . import integrate, linalg, optimize, sparse, special, stats
from .sparse import linalg as _sparse_linalg  # noqa: F401 (tapegrad.scipy.sparse.linalg)

__all__ = ["integrate", "linalg", "optimize", "sparse", "special", "stats"]
