"""Control flow and side streams inside a capture: ``cap.if_``, ``cap.if_else``,
``cap.while_``, ``cap.switch`` and ``cap.fork``, mixed into :class:`~pycudagraph.capture`.

::

    with pcg.capture(stream) as cap:
        step()                                # any library, on `stream`
        with cap.while_(flag):                # flag: a device scalar the body updates
            step()
            with cap.if_(other):
                fix()
        with cap.switch(index, 3) as branches:
            with branches[0]: a()
            with branches[1]: b()
            with branches[2]: c()

Whatever is launched on the capture's stream inside a body (PyTorch, CuPy, pycudagraph
kernels, nested conditionals) is captured into that body of a conditional node (CUDA 12.3;
``if_else`` and ``switch`` 12.8). The condition is a device scalar
(:mod:`pycudagraph.runtime.device_scalar`: a one-element tensor or array, a DeviceBuffer,
an address): pycudagraph captures a one-thread kernel that reads it and sets the node's
condition (``set_condition_of``, ``kernels/graph_control.cu``) before the node and, for
``while_``, at the end of each pass; no CUDA code is written by the user.

How: on ``cudaStreamGetCaptureInfo``'s graph, ``cudaGraphConditionalHandleCreate``, the
setter launched on the stream (captured), ``cudaGraphAddNode`` of the conditional node
after it, ``cudaStreamUpdateCaptureDependencies`` so later work follows the node. For a
body, the capture into the enclosing graph is suspended (``cudaStreamEndCapture`` gives the
same graph back) and the stream captures into the body graph
(``cudaStreamBeginCaptureToGraph``) through the capture class's own begin and end, as any
``pcg.capture(stream, graph=body)`` does; after the body the enclosing capture resumes
(``cudaStreamBeginCaptureToGraph`` with the dependencies it had). The stream stays the
same, so work launched on it goes where it should whoever launches it. Side streams of
``cap.fork`` must be joined before a body starts (:mod:`pycudagraph.capture.fork`).
"""

from __future__ import annotations

from .. import _cuda
from .._cuda import call, rt
from ..compile.program import Module
from ..errors import ArgumentError, CaptureError
from ..runtime.device_scalar import device_scalar
from .control import CAPTURE_MODES, capture_info, capture_mode, update_capture_dependencies
from .collectives import body_refusal, check_body
from .fork import Fork, SideCalls, unjoined_text

__all__ = ["CaptureFlow", "Branch", "Conditional"]

#: conditional kind -> (CUDA version, the Graph builder)
_KINDS = {"if": (12030, "add_if"), "if_else": (12080, "add_if_else"),
          "while": (12030, "add_while"), "switch": (12080, "add_switch")}
_SETTER: list = []  # the set_condition_of kernel, compiled once per process


def _setter():
    """The setter kernel, its library loaded on this device outside the capture's rules
    (``nvrtcCompileProgram`` once, ``cudaLibraryLoadData``, ``cuKernelGetFunction``)."""
    with capture_mode("relaxed"):
        if not _SETTER:
            _SETTER.append(Module.from_file("graph_control.cu")["set_condition_of"])
        _SETTER[0].function()
    return _SETTER[0]


class Branch:
    """One body of a conditional node being captured: ``with branch: ...`` captures the
    stream's work into :attr:`graph`. No CUDA call here (see :class:`CaptureFlow`).

    Attributes
    ----------
    node : ConditionalNode
        The conditional node (an IfNode, IfElseNode, WhileNode or SwitchNode).
    index : int
        Which body (0: the if / then / while body; a switch's case).
    graph : Graph
        The body graph.
    """

    def __init__(self, flow, node, index: int, graph, again=None):
        self.flow = flow  # the capture's (enter, leave) of a body
        self.node, self.index, self.graph = node, index, graph
        self.again = again  # while_: the setter launched again at the end of the body
        self.state = "new"

    def __enter__(self) -> "Branch":
        if self.state != "new":
            raise CaptureError(f"body {self.index} of {self.node!r} was captured already; a "
                               "body is captured once")
        self.flow[0](self)
        self.state = "open"
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.state = "done"
        return self.flow[1](self, exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<Branch {self.index} of {self.node!r} {self.state}>"


class Conditional:
    """What ``cap.if_`` / ``if_else`` / ``while_`` / ``switch`` return: entered, it adds
    the conditional node (after the setter kernel) and gives its :class:`Branch` es:
    ``if_`` and ``while_`` enter their one body at once and give it; ``if_else`` gives
    ``(then_, else_)``, ``switch`` a tuple of ``n``, each to enter with ``with``."""

    def __init__(self, flow, kind: str, scalar, count: int):
        self.flow = flow  # the capture's (add, enter, leave)
        self.kind, self.scalar, self.count = kind, scalar, count
        self.node = None
        self.branches: tuple = ()

    def __enter__(self):
        add, enter, leave = self.flow
        self.node, again = add(self.kind, self.scalar, self.count)
        self.branches = tuple(Branch((enter, leave), self.node, i, body, again)
                              for i, body in enumerate(self.node.bodies))
        if self.kind in ("if", "while"):
            return self.branches[0].__enter__()
        return self.branches

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.kind in ("if", "while"):
            handled = self.branches[0].__exit__(exc_type, exc, tb)
        else:
            handled = False
            if exc is None:
                for b in self.branches:
                    if b.state == "open":
                        raise CaptureError(f"{b!r} is still open at the end of cap.{self.kind}")
        if exc is None:
            for b in self.branches:
                if not len(b.graph):  # a body that captured nothing: one empty node
                    b.graph.add_empty()
        return handled


class _Scope:
    """A body being captured: its branch, its capture, the graph and dependencies the
    enclosing capture resumes with."""

    def __init__(self, branch, capture, parent, deps):
        self.branch, self.capture, self.parent, self.deps = branch, capture, parent, deps


class CaptureFlow:
    """Conditional bodies and forks of :class:`~pycudagraph.capture` (mixed into it)."""

    _flow_scopes = None  # the bodies being captured, innermost last
    _flow_sides = None  # the side streams forked so far
    _flow_calls = None  # the SideCalls trace hook, while the capture has forks

    # Conditionals ----------------------------------------------------------------------

    def if_(self, flag, dtype=None) -> Conditional:
        """``with cap.if_(flag):`` captures the block into an if node's body, run when the
        device scalar ``flag`` is not 0 (``cudaGraphConditionalHandleCreate``, a setter
        kernel launched with ``cuLaunchKernel``, ``cudaGraphAddNode``,
        ``cudaStreamEndCapture`` / ``cudaStreamBeginCaptureToGraph`` around the body;
        CUDA 12.3).

        Parameters
        ----------
        flag : device scalar
            A one-element PyTorch tensor or CuPy array on the GPU, a DeviceBuffer or an
            address (:func:`~pycudagraph.runtime.device_scalar.device_scalar`).
        dtype : str, optional
            Its element type when the object does not say (default ``"int32"``).
        """
        return Conditional(self._flow(), "if", device_scalar(flag, dtype, "if_: flag"), 1)

    def if_else(self, flag, dtype=None) -> Conditional:
        """``with cap.if_else(flag) as (then_, else_):`` then ``with then_: ...`` and
        ``with else_: ...`` capture the two bodies of an if/else node (``cudaGraphAddNode``
        after the setter kernel, ``cudaStreamBeginCaptureToGraph`` per body; the calls of
        :meth:`if_`; CUDA 12.8)."""
        return Conditional(self._flow(), "if_else", device_scalar(flag, dtype, "if_else: flag"), 2)

    def while_(self, flag, dtype=None) -> Conditional:
        """``with cap.while_(flag):`` captures the block into a while node's body, run
        while the device scalar ``flag`` is not 0; the setter kernel runs before the node
        and again at the end of each pass, so the body updates ``flag`` (``cuLaunchKernel`` of the setter,
        ``cudaGraphAddNode``; the calls of :meth:`if_`; CUDA 12.3)."""
        return Conditional(self._flow(), "while", device_scalar(flag, dtype, "while_: flag"), 1)

    def switch(self, index, n: int, dtype=None) -> Conditional:
        """``with cap.switch(index, n) as branches:`` then ``with branches[i]: ...``
        captures the ``n`` bodies of a switch node; body ``index`` runs (none when
        ``index`` is negative or not below ``n``) (``cudaGraphAddNode`` after the setter
        kernel, ``cudaStreamBeginCaptureToGraph`` per body; the calls of :meth:`if_`; CUDA 12.8)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ArgumentError(f"switch: n must be a positive number of bodies, got {n!r}")
        scalar = device_scalar(index, dtype, "switch: index")
        if scalar.dtype in ("float16", "bfloat16"):
            raise ArgumentError(f"switch: index: a {scalar.dtype} cannot be an index")
        return Conditional(self._flow(), "switch", scalar, n)

    def _flow(self) -> tuple:
        """What a :class:`Conditional` calls back: add the node, enter and leave a body."""
        return self._add_conditional, self._enter_body, self._exit_body

    def _current_graph(self):
        """The Graph the stream captures into now: the innermost body, else the capture's."""
        if self._flow_scopes:
            return self._flow_scopes[-1].branch.graph
        info = self.info  # cudaStreamGetCaptureInfo (its wrapper becomes cap.graph)
        if info.status != "active" or info.graph is None:
            raise CaptureError(f"conditional capture needs an active capture; the stream's "
                               f"capture is {info.status!r} (use it inside the `with "
                               "pcg.capture(...)` block)")
        return info.graph

    def _add_conditional(self, kind: str, scalar, count: int):
        """The setter kernel, then the conditional node after it; returns the node and, for
        a while node, what launches the setter again at the end of its body."""
        version, builder = _KINDS[kind]
        _cuda.require(f"capturing a {kind} conditional node", version)
        graph = self._current_graph()
        self._require_joined(f"cap.{kind}")
        setter = _setter()
        handle = graph.conditional_handle(default=0)
        args = (handle, scalar.ptr, scalar.code, 0 if kind == "switch" else 1)
        setter.launch(1, 1, args, stream=self.stream)
        deps = capture_info(self.stream, graph).dependencies
        add = getattr(graph, builder)
        node = add(handle, count, deps=deps) if kind == "switch" else add(handle, deps=deps)
        update_capture_dependencies(self.stream, [node], "set")
        self.keep(scalar.owner)
        again = (lambda: setter.launch(1, 1, args, stream=self.stream)) if kind == "while" else None
        return node, again

    def _enter_body(self, branch) -> None:
        parent = self._current_graph()
        self._require_joined("a conditional body")
        deps = self._suspend(parent)
        body = self._body_capture(branch.graph)
        try:
            body.__enter__()
        except BaseException:
            self._resume(parent, deps)
            raise
        if self._flow_scopes is None:
            self._flow_scopes = []
        self._flow_scopes.append(_Scope(branch, body, parent, deps))

    def _exit_body(self, branch, exc_type, exc, tb) -> bool:
        scope = self._flow_scopes[-1] if self._flow_scopes else None
        if scope is None or scope.branch is not branch:
            raise CaptureError(f"{branch!r} ended out of order: bodies end innermost first")
        self._flow_scopes.pop()
        unjoined = ""
        try:
            if exc is None:
                try:
                    if branch.again is not None:
                        branch.again()  # while_: the condition for the next pass
                    unjoined = unjoined_text(self._flow_sides, self.stream, branch.graph,
                                             self._flow_calls)
                except Exception as failed:
                    exc_type, exc, tb = type(failed), failed, failed.__traceback__
            try:
                handled = scope.capture.__exit__(exc_type, exc, tb)
            except CaptureError as err:
                if unjoined:
                    raise CaptureError(f"{err}; {unjoined}") from err.__cause__
                if "nccl" in type(exc).__name__.lower():  # NCCL refused to capture into it
                    raise CaptureError(f"{err}; {body_refusal(branch.node, 'NCCL failed')}",
                                       err.failed_call) from err.__cause__
                raise
            if exc is None:
                check_body(branch.graph, branch.node)  # what CUDA allows in a body
        finally:
            self._resume(scope.parent, scope.deps)
        return handled

    def _body_options(self) -> dict:
        """Keyword arguments a body's capture takes besides stream, mode and graph (what
        every capture of this one's should share). No CUDA call."""
        return {}

    def _body_capture(self, graph):
        """A capture into ``graph`` on this stream, made by the capture class itself (so a
        body goes through the same begin and end as every capture). No CUDA call here."""
        cls = next(c for c in type(self).__mro__ if CaptureFlow in c.__bases__)
        return cls(self.stream, mode=self.mode, graph=graph, **self._body_options())

    def _suspend(self, graph) -> list:
        """End the capture into ``graph`` for a while (``cudaStreamEndCapture``; the same
        graph comes back); returns the dependencies it will resume with."""
        info = capture_info(self.stream, graph)
        if info.status != "active":
            raise CaptureError(f"cannot start a conditional body: the capture is {info.status}")
        raw = call(rt.cudaStreamEndCapture, self.stream.handle)
        if raw is None or int(raw) != graph.table.h:
            raise CaptureError(f"cudaStreamEndCapture gave graph 0x{int(raw or 0):x}, not "
                               f"{graph!r}: the stream was not capturing into it")
        return info.dependencies

    def _resume(self, graph, deps) -> None:
        """Capture into ``graph`` again after ``deps`` (``cudaStreamBeginCaptureToGraph``)."""
        raw_deps = [d.handle for d in deps]
        call(rt.cudaStreamBeginCaptureToGraph, self.stream.handle, graph.handle, raw_deps, None,
             len(raw_deps), CAPTURE_MODES[self.mode])

    # Forks ---------------------------------------------------------------------------

    def fork(self, streams=2) -> Fork:
        """``with cap.fork(2) as (s1, s2):`` side streams forked from the capture stream
        and joined back at the end of the block (``cudaEventRecord``,
        ``cudaStreamWaitEvent``; :mod:`pycudagraph.capture.fork`).

        Parameters
        ----------
        streams : int or sequence of stream-like
            How many new streams to make (``cudaStreamCreateWithFlags``), or the streams
            to fork (PyTorch / CuPy streams are given back as they were given).
        """
        return Fork(self, streams)

    def fork_hook(self) -> SideCalls:
        """The trace hook that records the last call on each forked stream, installed on
        the first fork until the capture ends. No CUDA call.

        Raises
        ------
        CaptureError
            Outside the capture's ``with`` block: the hook would stay installed, with no
            capture end to remove it."""
        if self._flow_calls is None:
            if not self._is_open():
                raise CaptureError("fork_hook: the capture is not open (use it inside the "
                                   "`with pcg.capture(...)` block, where cap.fork does)")
            self._flow_calls = SideCalls()
        return self._flow_calls

    def forked(self, fork: Fork) -> None:
        """Note ``fork``'s side streams, checked for unjoined work at the end. No CUDA call."""
        sides = getattr(fork, "sides", None)
        if not isinstance(sides, (list, tuple)):
            raise ArgumentError(f"forked: fork must be what cap.fork() made, got "
                                f"{type(fork).__name__}")
        if self._flow_sides is None:
            self._flow_sides = []
        self._flow_sides.extend(sides)

    def _require_joined(self, what: str) -> None:
        text = unjoined_text(self._flow_sides, self.stream, self._current_graph(),
                             self._flow_calls)
        if text:
            raise CaptureError(f"{what} needs the side streams joined first: {text}")

    def _flow_close(self) -> str:
        """Before the capture ends: its unjoined side streams in words (``""`` if none),
        and the fork trace hook removed. Never raises."""
        text = ""
        try:
            if self._flow_sides:
                graph = getattr(self, "_live", None) or self._target
                text = unjoined_text(self._flow_sides, self.stream, graph, self._flow_calls)
        except Exception:  # the capture is failing anyway: it will say why
            text = ""
        if self._flow_calls is not None:
            self._flow_calls.remove()
            self._flow_calls = None
        return text
