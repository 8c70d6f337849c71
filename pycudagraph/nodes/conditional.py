"""Conditional nodes (if / while / switch): read back from captured graphs.

Building them (``cudaGraphConditionalHandleCreate`` + ``cudaGraphAddNode``) is added here
as one class per kind.
"""

from __future__ import annotations

from .base import Node, NodeType

__all__ = ["ConditionalNode"]


class ConditionalNode(Node):
    """A conditional node (if / while / switch); its body graphs are :attr:`bodies`."""

    type = NodeType.CONDITIONAL
    __slots__ = ("bodies", "kind")

    def __init__(self, graph, h: int, bodies=(), kind: str = "conditional"):
        super().__init__(graph, h)
        self.bodies = tuple(bodies)
        self.kind = kind

    def describe(self) -> str:
        return f"conditional {self.kind}"
