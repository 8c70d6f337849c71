"""The feature wings' convenience methods on :class:`~pycudagraph.Graph` (mixed into it).

Each is one line that imports its wing when called: the text and page views
(:mod:`pycudagraph.inspect`), the audit, the graph file writer
(:mod:`pycudagraph.files`), and sleep / wake of its memory (:mod:`pycudagraph.frameworks`).
The core imports no feature wing at import time; these
delegations are the only references from the core upward.
"""

from __future__ import annotations

__all__ = ["GraphFeatures"]


class GraphFeatures:
    """Views, audit and saving of a graph, each done by its feature wing."""

    __slots__ = ()

    def to_dot(self, name: str = "pycudagraph") -> str:
        """A readable Graphviz DOT text: node type, kernel name, grid/block, bytes, edges.

        Reads the graph (``cudaGraphGetNodes``, ``cudaGraphGetEdges`` with edge data, each
        body's ``cudaGraphGetRootNodes``) and each node's parameters (its type's
        ``cudaGraph*NodeGetParams`` where the node was not built here).
        """
        from ..inspect.dot import graph_to_dot
        return graph_to_dot(self, name)

    def debug_dot_print(self, path, verbose: bool = False, flags=()) -> None:
        """Write CUDA's own DOT description to ``path`` (``cudaGraphDebugDotPrint``).

        Parameters
        ----------
        path : str or path-like
        verbose : bool
            ``cudaGraphDebugDotFlagsVerbose``: every parameter of every node.
        flags : iterable of str
            More ``cudaGraphDebugDotFlags``, by the name after the prefix in snake case
            (``"kernel_node_params"``, ``"handles"``, ``"conditional_node_params"``, ...;
            :func:`pycudagraph.inspect.dot.debug_dot_flags` lists the ones the installed
            bindings have).
        """
        from ..inspect.dot import write_debug_dot
        write_debug_dot(self, path, verbose, flags)

    def render(self, path, format: str | None = None) -> str:
        """Render :meth:`to_dot` to SVG/PNG with Graphviz's ``dot`` program; returns the path.

        The graph is read as :meth:`to_dot` reads it (``cudaGraphGetNodes``, ``cudaGraphGetEdges``).
        """
        from ..inspect.dot import render
        return render(self.to_dot(), path, format)

    def _repr_svg_(self):
        from ..inspect.dot import svg_or_none
        return svg_or_none(self.to_dot())

    def audit(self) -> list:
        """Every address the graph bakes in that is freed, not kept alive, on another
        device or pageable host memory (``cuPointerGetAttributes``;
        :mod:`pycudagraph.inspect.audit`)."""
        from ..inspect.audit import audit
        return audit(self)

    def memory(self) -> dict:
        """The bytes the graph pins and its capture pools hold (``cuPointerGetAttributes``;
        :func:`pycudagraph.inspect.audit.memory`)."""
        from ..inspect.audit import memory
        return memory(self)

    def to_html(self, path, profile=None, findings=None, title: str | None = None) -> str:
        """Write one self-contained interactive page of the graph
        (:mod:`pycudagraph.inspect.html`): pan, zoom, search by kernel name, click a node for
        its parameters, collapsible child graphs and bodies, coloured by ``profile``
        (:meth:`GraphExec.profile`) and marked with ``findings`` (objects with ``.node
        .place .address .problem``). Reads ``cudaGraphGetNodes``, ``cudaGraphGetEdges`` and
        each node's ``cudaGraph*NodeGetParams``; returns the path written."""
        from ..inspect.html import write_page
        return write_page(self, path, profile, findings, title)

    def sleep(self, keep: bool = True) -> int:
        """Give the memory of the graph's sleepable capture pool back to the driver, keeping
        its addresses, and trim the device's graph memory pool (``cuMemUnmap``,
        ``cuMemRelease``, ``cudaDeviceGraphMemTrim``; ``cudaMemcpy`` to pinned host memory
        with ``keep=True``); returns the bytes released
        (:func:`pycudagraph.frameworks.regions.sleep_graph`)."""
        from ..frameworks.regions import sleep_graph
        return sleep_graph(self, keep)

    def wake(self) -> int:
        """Map the memory of the graph's sleepable capture pool back at its addresses
        (``cuMemCreate``, ``cuMemMap``, ``cuMemSetAccess``); returns the bytes mapped
        (:func:`pycudagraph.frameworks.regions.wake_graph`)."""
        from ..frameworks.regions import wake_graph
        return wake_graph(self)

    def save(self, path, slots: dict | None = None) -> None:
        """Save to a file :func:`pycudagraph.load` rebuilds elsewhere
        (:mod:`pycudagraph.files.save`); every address must lie in a ``slots={name: buffer}``
        buffer. Reads nodes with their ``GetParams`` calls (``cudaGraphGetNodes``,
        ``cuGraphKernelNodeGetParams`` ...)."""
        from ..files.save import save_graph
        return save_graph(self, path, slots)
