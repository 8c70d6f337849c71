"""Sphinx configuration for the pycudagraph API reference.

Build (warnings are errors): ``python -m sphinx -W --keep-going -b html docs docs/_build/html``
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "pycudagraph"
author = "pycudagraph developers"
copyright = "2026, pycudagraph developers"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc"]
autosummary_generate = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
exclude_patterns = ["_build", "API_MAP.md", "*.md"]
html_theme = "alabaster"
nitpicky = False
