"""Sphinx configuration for the spacr-accel documentation site.

Build it (warnings are errors, as in CI) and run every example on its pages::

    sphinx-build -W --keep-going -b html docs docs/_build/html
    sphinx-build -W --keep-going -b doctest docs docs/_build/doctest

The pages are Markdown (MyST); the API reference is generated from the docstrings, which use
``:param:`` fields. The packages are imported from the environment (``pip install -r
requirements-dev.txt`` installs all of them editable).
"""

from __future__ import annotations

import doctest
import importlib.metadata
import sys

from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer

project = "spacr-accel"
author = "The spacr-accel contributors"
copyright = "2026, The spacr-accel contributors"  # Sphinx's own name for the setting (shadows the builtin)
try:
    release = importlib.metadata.version("spacr-accel-core")
except importlib.metadata.PackageNotFoundError:  # building from a checkout without an install
    release = "0.1.0"
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.viewcode",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

myst_heading_anchors = 3

html_theme = "furo"
html_title = f"spacr-accel {release}"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_preserve_defaults = True  # show `xp=np`, not the repr of a module with its install path
autodoc_default_options = {"members": True, "show-inheritance": True}

# No intersphinx: the site must build offline (CI machines reach no documentation server).

# An example's error message is compared in full: Sphinx's default flags include
# IGNORE_EXCEPTION_DETAIL, under which a page quoting an error the code no longer raises word for
# word would still pass, and the pages quote the messages a user will read.
doctest_default_flags = doctest.ELLIPSIS | doctest.DONT_ACCEPT_TRUE_FOR_1

# Every example on the pages runs as a doctest, on any machine: the device is forced to the CPU
# and the shipped accelerated backends are kept out of automatic dispatch, so the outputs are the
# same on a laptop, a CI runner and a GPU server.
doctest_global_setup = """
import os
os.environ["SPACR_DEVICE"] = "cpu"
os.environ.pop("SPACR_ACCEL_BACKENDS", None)
# The pages show what a plain `pip install spacr-accel` does: the numba backend (an extra, and one
# that answers only once its kernels are compiled) and the two example plugins (installed for
# development) would otherwise serve peak finding; docs/plugins.md shows the examples on their own.
os.environ["SPACR_ACCEL_DISABLE"] = "numba,opencv,openvino"
import numpy as np
import spacr_accel_core
spacr_accel_core.refresh()
"""
doctest_global_cleanup = """
os.environ.pop("SPACR_DEVICE", None)
os.environ.pop("SPACR_ACCEL_DISABLE", None)
spacr_accel_core.refresh()
"""


# The faces over the kit (``spacr_accel_core.exact`` over ``spacr_accel_core.kit._exact``, ``tiling``
# and ``separable`` likewise) re-export its constants, which ``docs/api.md`` names one by one
# (``autodata``): autodoc reads a constant's docstring only from the module it documents, where a
# re-exported one has none (it would show the docstring of the value's type). Such a constant is
# documented with the docstring written where the kit defines it, so that it is written once.

_ABSENT = object()


def _kit_docstring(name: str, value: object) -> list[str]:
    """The docstring of the kit's constant ``name`` that is ``value`` (none: an empty list)."""
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("spacr_accel_core.kit.") and vars(module).get(name, _ABSENT) is value:
            analyzer = ModuleAnalyzer.for_module(module_name)
            analyzer.analyze()
            return list(analyzer.attr_docs.get(("", name), []))
    return []


def _kit_constant(app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    if what == "data" and (written := _kit_docstring(name.rpartition(".")[2], obj)):
        lines[:] = written


def setup(app: Sphinx) -> None:
    app.connect("autodoc-process-docstring", _kit_constant)
