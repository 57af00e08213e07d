"""``tapegrad.scipy.integrate``: scipy.integrate's names, recording on Tensors
(``cumulative_trapezoid``; see ``docs/ops.md``), and the differentiable ODE solvers
``odeint`` and ``solve_ivp`` (with ``IntegrationError``), implemented in
:mod:`tapegrad.integrate`. This is their canonical place, as in SciPy.

The solvers are tapegrad's on every input, plain arrays included (not SciPy's): the
right-hand side may read tensors that require grad from its closure, which no argument
shows."""

from __future__ import annotations

from .. import integrate as _ode
from ..numpy_protocols import publish
from ..surface import NAMESPACES

globals().update(NAMESPACES["scipy.integrate"])
__all__ = sorted(NAMESPACES["scipy.integrate"])
publish("scipy.integrate", globals())

# after publish: not drop-in wrapped (see the module docstring)
odeint = _ode.odeint
solve_ivp = _ode.solve_ivp
IntegrationError = _ode.IntegrationError
__all__ = sorted([*__all__, "IntegrationError", "odeint", "solve_ivp"])
