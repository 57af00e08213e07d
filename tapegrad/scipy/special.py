"""``tapegrad.scipy.special``: scipy.special's names, recording on Tensors (the canonical
place; :mod:`tapegrad.special` is the same objects under a short name)."""

from __future__ import annotations

from ..special import *  # noqa: F403
from ..special import __all__  # noqa: F401
