"""Host nodes: a Python callable run on a CUDA host thread."""

from __future__ import annotations

from .._cuda import call, rt
from ..errors import ArgumentError
from ..runtime.hostfn import HostCall, trampoline_address
from ..runtime.values import require_callable
from .base import Node, NodeType, operand_dict
from .file_records import HostFile

__all__ = ["HostNode", "host_node_params"]

_HOST_FIELDS = frozenset({"fn", "args"})


def host_node_params(hostcall: HostCall):
    """A ``cudaHostNodeParams`` naming the shared trampoline and the call's id."""
    p = rt.cudaHostNodeParams()
    p.fn = trampoline_address()
    p.userData = hostcall.id
    return p


def _args(args, where: str) -> tuple:
    if not isinstance(args, (tuple, list)):
        raise ArgumentError(f"{where}: args must be a tuple of arguments for fn, got "
                        f"{args!r} ({type(args).__name__})")
    return tuple(args)


class HostNode(Node, HostFile):
    """A node that runs a Python callable on a CUDA host thread (``cudaGraphAddHostNode``).

    The callable must not call CUDA; an exception it raises is raised by the next
    ``GraphExec.launch``/``synchronize`` or ``Stream.synchronize``.
    """

    type = NodeType.HOST
    exec_call = "cudaGraphExecHostNodeSetParams"
    hidden_addresses = "runs host code, which may use addresses it was given at capture"
    __slots__ = ("_call",)

    def __init__(self, table, h: int, hostcall=None):
        super().__init__(table, h)
        self._call = hostcall

    @classmethod
    def build(cls, table, deps, fn, args=()) -> "HostNode":
        """``cudaGraphAddHostNode`` running ``fn(*args)``."""
        hc = HostCall(require_callable(fn, "fn", "add_host"), _args(args, "add_host"))
        raw_deps, nd = table.dep_list(deps)
        raw = call(rt.cudaGraphAddHostNode, table.raw, raw_deps, nd, host_node_params(hc))
        return table.register(cls(table, int(raw), hc), hc)

    @property
    def params(self) -> dict:
        """The callable (ours) or raw function pointer (``cudaGraphHostNodeGetParams``)."""
        if self._call is not None:
            return {"fn": self._call.fn, "args": self._call.args}
        p = call(rt.cudaGraphHostNodeGetParams, self.handle)
        return {"fn": int(p.fn), "user_data": int(p.userData)}

    def set_params(self, fn, args=()) -> None:
        """Run another callable (``cudaGraphHostNodeSetParams``).

        Parameters
        ----------
        fn : callable
            Must not call CUDA.
        args : sequence
        """
        hc = HostCall(require_callable(fn, "fn", "set_params"), _args(args, "set_params"))
        call(rt.cudaGraphHostNodeSetParams, self.handle, host_node_params(hc))
        self._call = hc
        self._table.register(self, hc)

    def exec_set(self, rec, fn, args=()) -> None:
        """``cudaGraphExecHostNodeSetParams``."""
        hc = HostCall(require_callable(fn, "fn", "set_params"), _args(args, "set_params"))
        call(rt.cudaGraphExecHostNodeSetParams, rec.exec_raw, rec.node.handle, host_node_params(hc))
        rec.hold("host", hc)

    def describe(self) -> str:
        """One line: the host function's name. No CUDA call."""
        fn = self._call.name if self._call is not None else "C function"
        return f"host {fn}"

    # Facets (:mod:`pycudagraph.nodes.facets`) ---------------------------------------

    @property
    def exec_fields(self) -> frozenset:
        """``fn`` and ``args`` for a node running a Python callable; none for one running a
        C function (read back), which :meth:`exec_set` cannot take. No CUDA call for a
        node built here (``cudaGraphHostNodeGetParams`` otherwise)."""
        return _HOST_FIELDS if callable(self.params.get("fn")) else frozenset()

    def fields(self) -> dict:
        """``fn`` and ``args`` (ours), or the raw ``fn`` and ``user_data``
        (``cudaGraphHostNodeGetParams``), as :attr:`params`."""
        return dict(self.params)

    def exec_operands(self, changes: dict) -> dict:
        """The exec's call takes the callable and its arguments together: the one not
        changed comes from :meth:`fields`. No CUDA call for a node built here."""
        if not {"fn", "args"} & set(operand_dict(changes)):
            return changes
        f = self.fields()
        return {"fn": changes.get("fn", f.get("fn")), "args": changes.get("args", f.get("args", ()))}
