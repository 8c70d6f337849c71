"""Command-line applications built on pycudagraph: ``info``, ``demo`` and ``bench``.

These are users of the binding, not part of it: they import :mod:`pycudagraph` like any
application would (``python -m pycudagraph info``).
"""
