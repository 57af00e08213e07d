"""``tapegrad.scipy.special``: the same functions as :mod:`tapegrad.special`."""

from __future__ import annotations

from ..special import *  # noqa: F403
from ..special import __all__  # noqa: F401
