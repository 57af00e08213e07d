"""Every ```python block on every page (README.md and docs/) runs as written.

A page's blocks run top to bottom in one fresh namespace, as a reader would type them.
A block preceded by a ``<!-- compile-only: reason -->`` line (MPI, a GPU) is compiled,
not run. A ```text block right after a ```python block is the output the page promises:
the block must print exactly that. tests/test_readme_snippets.py checks more of what
some blocks compute."""

from __future__ import annotations

import re

import pytest

from .test_readme_snippets import ROOT, blocks, run_page

PAGES = sorted(
    [ROOT / "README.md"]
    + [
        p
        for p in (ROOT / "docs").rglob("*.md")
        if not {"_build", "auto_examples"} & set(p.relative_to(ROOT / "docs").parts)
    ]
)


def test_pages_are_found():
    with_code = {p.relative_to(ROOT).as_posix() for p in PAGES if blocks(p)}
    assert {
        "README.md",
        "docs/index.md",
        "docs/getting_started.md",
        "docs/guide/tensors.md",
        "docs/guide/transforms.md",
        "docs/guide/compile.md",
        "docs/guide/higher_order.md",
    } <= with_code


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write files (to_dot, savefig) write here
    run_page(page)  # (blocks in order, one namespace; what each prints is what it shows)


def test_compile_only_blocks_say_why():
    for page in PAGES:
        for m in re.finditer(r"<!-- compile-only:\s*(.*?)\s*-->", page.read_text()):
            assert m.group(1), f"{page}: a compile-only block without a reason"
