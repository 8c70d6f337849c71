"""Sphinx configuration of the pycudagraph documentation site.

Build (warnings are errors): ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
Markdown pages are read with myst-parser; the API reference with autodoc and numpydoc.
A new page is one line in the toctree of ``index.md``; the pages other work adds later
(:data:`OPTIONAL_PAGES`) join the toctree by themselves once their file exists.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.abspath(".."))

project = "pycudagraph"
author = "pycudagraph developers"
copyright = "2026, pycudagraph developers"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "numpydoc"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_tools", "results", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
autosummary_generate = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
html_theme = "alabaster"
html_static_path = ["_static"]
html_title = "pycudagraph"
html_theme_options = {"page_width": "1180px", "sidebar_width": "230px"}
nitpicky = False

#: Pages other work adds: listed in the site's table of contents when their file exists.
OPTIONAL_PAGES = ("own_kernels", "frameworks", "graph_files")
_MARKER = "% more pages join here\n"


def _optional_pages(app, docname, source):
    if docname != root_doc:
        return
    here = Path(app.srcdir)
    listed = source[0]
    extra = "".join(f"{p}\n" for p in OPTIONAL_PAGES
                    if (here / f"{p}.md").exists() and f"\n{p}\n" not in listed)
    source[0] = listed.replace(_MARKER, extra)


def setup(app):
    app.connect("source-read", _optional_pages)
