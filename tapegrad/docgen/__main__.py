"""``python -m tapegrad.docgen``: write ``tapegrad/docstrings.py``."""

from . import main

main()
