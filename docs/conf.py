"""Sphinx configuration: ``python -m sphinx -W -b html docs docs/_build/html``.

Markdown pages go through myst-parser, docstrings through numpydoc, ``examples/``
through sphinx-gallery (each script runs, small, and its figure is rendered)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import tapegrad

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))  # the examples import their common.py

project = "tapegrad"
author = "the tapegrad developers"
copyright = "the tapegrad developers"
release = version = tapegrad.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_templates", "**.ipynb_checkpoints", "sg_execution_times.rst"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_typehints = "none"  # numpydoc's Parameters section states the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# The same checks as tests/test_docstrings.py, so that a docs build with -W fails on a
# missing docstring, parameter, Returns or Examples section.
numpydoc_validation_checks = {"GL08", "SS01", "PR01", "PR02", "RT01", "EX01"}


def _properties() -> set[str]:
    """Regexes naming each property (or named-tuple field) of the public classes: it
    needs a summary (what it holds), not an Examples section; tests/test_docstrings.py
    checks its summary."""
    import importlib
    import inspect

    out = set()
    for modname in ("tapegrad", "tapegrad.graph", "tapegrad.cuda", "tapegrad.testing"):
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            cls = getattr(mod, name)
            if inspect.isclass(cls):
                for attr, value in vars(cls).items():
                    if inspect.isdatadescriptor(value) and not attr.startswith("_"):
                        out.add(rf"^{modname}\.{name}\.{attr}$")
    return out


numpydoc_validation_exclude = _properties()

html_theme = "pydata_sphinx_theme"
html_title = "tapegrad"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []


def _example_argv(gallery_conf: dict, script_vars: dict) -> list[str]:
    """Command-line arguments for each gallery script: its defaults, no progress bars.

    The scripts run at their default sizes: with a warm kernel cache the whole gallery
    executes in well under a minute on two cores (lotka_volterra_uncertainty.py, the
    longest, in about 5 s), and the pages show what the docstrings describe (a 38-atom
    cluster, 40 bootstrap refits)."""
    return ["--no-progress"]


# sphinx-gallery takes reset_argv as the importable name of a callable: a function object
# in the config could not be pickled with Sphinx's environment (a warning, fatal under -W).
# With this folder on sys.path, "conf" imports this file as a module (evaluated once more).
sys.path.append(os.path.dirname(os.path.abspath(__file__)))

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    # Every script runs except distributed_fit.py, which is rendered without output: it
    # is an MPI program whose point is several ranks (tests/test_distributed.py runs it on
    # two and checks it against one process), a one-rank run inside the Sphinx process
    # would show nothing distributed, and the docs extra does not install mpi4py.
    "filename_pattern": r"(?<!distributed_fit)\.py$",
    "ignore_pattern": r"common\.py$",
    "reset_argv": "conf._example_argv",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
}
