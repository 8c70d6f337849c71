"""One self-contained interactive page of a graph: ``g.to_html(path, profile=None)``.

The page is one HTML file: its scripts and styles (``html_assets/layout.js``,
``html_assets/page.js``, ``html_assets/page.css``, package data) and the graph's model
(:mod:`pycudagraph.inspect.page_model`) are inline, so it opens anywhere, offline. Its own
layered layout draws the graph as SVG: nodes in rows by dependency depth, child graphs and
conditional bodies as boxes that collapse, edges with a non-default port dashed and
labelled. Pan with the mouse, zoom with the wheel, search by kernel name, click a node for
its parameters (kernel arguments by name, or a captured kernel's bytes decoded; launch
dimensions; copy sizes), its time and share when a profile is given (nodes coloured by
time), and audit findings when given.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path

from .page_model import graph_model

__all__ = ["render_page", "write_page", "asset_text"]

_SLOT = re.compile(r"/\*\{\{(\w+)\}\}\*/|\{\{(\w+)\}\}")


def asset_text(name: str) -> str:
    """The text of one file of ``pycudagraph/inspect/html_assets/`` (package data)."""
    return (resources.files("pycudagraph.inspect") / "html_assets" / name).read_text("utf-8")


def _json_for_script(model: dict) -> str:
    """The model as JSON that cannot end its ``<script>`` element early."""
    text = json.dumps(model, separators=(",", ":"), ensure_ascii=True)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def render_page(model: dict) -> str:
    """The page's HTML for a model (:func:`pycudagraph.inspect.page_model.graph_model`, or
    one made by hand: a test's, a saved graph's). No CUDA call."""
    values = {"TITLE": html.escape(str(model.get("title", "graph"))),
              "CSS": asset_text("page.css"), "LAYOUT_JS": asset_text("layout.js"),
              "JS": asset_text("page.js"),
              "DATA": _json_for_script(model)}
    return _SLOT.sub(lambda m: values[m.group(1) or m.group(2)], asset_text("page.html"))


def write_page(graph, path, profile=None, findings=None, title: str | None = None) -> str:
    """Write the page of ``graph`` to ``path``; returns the path as a string.

    Reads the graph as :func:`~pycudagraph.inspect.page_model.graph_model` does
    (``cudaGraphGetNodes``, ``cudaGraphGetEdges``, each node's ``cudaGraph*NodeGetParams``).
    """
    text = render_page(graph_model(graph, profile, findings, title))
    path = Path(path)
    path.write_text(text, encoding="utf-8")
    return str(path)
