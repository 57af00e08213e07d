"""Small helpers shared by the example scripts: headless plotting and progress bars."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot with the Agg backend (no window; works on a headless machine)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: str) -> Path:
    """Save ``fig`` as a PNG (relative paths: the current directory) and print where.

    The figure stays open: the docs' example gallery renders the figures a script leaves
    open when it ends."""
    out = Path(path).resolve()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot saved to {path}")
    return out


def progress(total: int, desc: str, enabled: bool = True) -> Any:
    """A tqdm bar (or a do-nothing stand-in when disabled)."""
    if enabled:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc)

    class Quiet:
        def update(self, n: int = 1) -> None:
            pass

        def set_postfix(self, **kwargs: Any) -> None:
            pass

        def close(self) -> None:
            pass

    return Quiet()
