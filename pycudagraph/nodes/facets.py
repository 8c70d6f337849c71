"""What every node says about itself, so that no feature has to ask what type it is.

A node class fills three facets (:class:`~pycudagraph.nodes.base.Node` has empty defaults):

``fields() -> dict``
    Its named parameters as a person, a diff, a page or a file sees them: plain values
    (ints, strings, tuples, dicts of those), read with the type's ``GetParams`` call where
    the node was not built here. Two nodes of one class with equal ``fields()`` do the same
    work.
``sites() -> list[Site]``
    Every device or host address the node bakes in, each as a :class:`Site`: kernel
    argument slots (every 8-byte aligned slot, inside by-value structs too), copy sides,
    memset destinations, the memory an allocation node hands out. A node whose addresses
    cannot be read raises :class:`~pycudagraph.errors.PyCudaGraphError` saying why.
``exec_fields``
    The names of the fields an exec may change (what ``exec_set`` accepts).

Plus ``subgraphs()``, the graphs a node holds (a child graph, conditional bodies), which
:meth:`NodeTable.walk <pycudagraph.nodes.table.NodeTable.walk>` descends into, and
``write_site(rec, site, address)``, the one writer of an address into an exec, through the
node's :class:`~pycudagraph.nodes.exec_node.ExecNode` record.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArgumentError

__all__ = ["Site", "SIDES", "ROLES", "site_pairs"]

#: What kind of memory a site is known to point at.
SIDES = ("device", "host", "any")
#: ``"use"``: the node reads or writes there; ``"alloc"``: memory the node itself hands out
#: (a graph allocation), which other nodes' sites may point into.
ROLES = ("use", "alloc")


@dataclass(frozen=True)
class Site:
    """One address a node bakes in.

    Attributes
    ----------
    place : str
        Where in the node: ``"arg 2"`` (``"arg 2 +16"`` for a slot 16 bytes into a struct
        argument), ``"src"``, ``"dst"``, ``"alloc"``.
    offset : int
        For a kernel argument slot, its byte offset inside the argument (0 for an argument
        of 8 bytes or less); 0 elsewhere.
    address : int
        The value baked in.
    size_hint : int
        Bytes known to be read or written from ``address`` (a copy's or memset's extent, an
        allocation's size); 0 when unknown (a kernel argument).
    arg : int or None
        The kernel argument index of a kernel slot; None for other sites.
    side : str
        ``"device"``, ``"host"`` (the host side of a copy) or ``"any"`` (unknown kind).
    role : str
        ``"use"`` or ``"alloc"`` (:data:`ROLES`).
    """

    place: str
    offset: int
    address: int
    size_hint: int = 0
    arg: int | None = None
    side: str = "device"
    role: str = "use"


def site_pairs(pairs, where: str) -> list:
    """``pairs`` (``(site, address)`` pairs for ``write_sites``) as a list, each checked: a
    :class:`Site` and an int address (:class:`ArgumentError` naming ``where`` otherwise)."""
    try:
        out = [tuple(p) for p in pairs]
    except TypeError:
        raise ArgumentError(f"{where}: pairs must be a sequence of (site, address) pairs, "
                            f"got {type(pairs).__name__}") from None
    for p in out:
        if len(p) != 2 or not isinstance(p[0], Site) or type(p[1]) is not int:
            raise ArgumentError(f"{where}: each pair must be (Site, int address), got {p!r}")
    return out
