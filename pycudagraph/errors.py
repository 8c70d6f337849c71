"""Exceptions raised by pycudagraph.

Every failed CUDA, driver or NVRTC call becomes a :class:`CudaError` (or one of its
subclasses) that keeps the name of the raw call, the numeric code, the error's name
and the text CUDA gives for it::

    cudaGraphInstantiate failed: cudaErrorInvalidValue (invalid argument)

Errors that come from the Python side (a wrong kernel argument, a broken capture)
have their own classes so that callers can catch exactly what they expect.
"""

from __future__ import annotations

import contextlib

__all__ = [
    "needs_gpu",
    "PyCudaGraphError",
    "CudaError",
    "CudaNotAvailableError",
    "NotSupportedError",
    "CompileError",
    "ArgumentError",
    "CaptureError",
    "GraphExecUpdateError",
    "HostCallbackError",
    "ClosedError",
    "GraphFileError",
    "GraphFileWarning",
]


class PyCudaGraphError(Exception):
    """Base class of every exception pycudagraph raises on purpose."""


class CudaError(PyCudaGraphError):
    """A CUDA runtime, driver or NVRTC call returned an error.

    Attributes
    ----------
    api : str
        The raw call that failed, e.g. ``"cudaGraphInstantiate"``.
    code : int
        The numeric error code (``cudaError_t``, ``CUresult`` or ``nvrtcResult``).
    name : str
        The error's name, e.g. ``"cudaErrorInvalidValue"``.
    message : str
        CUDA's description of the error.
    """

    def __init__(self, api: str, code: int, name: str, message: str, hint: str = ""):
        self.api = api
        self.code = int(code)
        self.name = name
        self.message = message
        self.hint = hint
        super().__init__(self._text())

    def set_hint(self, hint: str) -> "CudaError":
        """Replace the hint (what to do about it) and the message with it; returns ``self``."""
        self.hint = hint
        self.args = (self._text(),)
        return self

    def _text(self) -> str:
        text = f"{self.api} failed: {self.name} ({self.message})"
        return f"{text}. {self.hint}" if self.hint else text

    def __reduce__(self):
        return (type(self), (self.api, self.code, self.name, self.message, self.hint))


class CudaNotAvailableError(CudaError):
    """No usable CUDA driver or device on this machine."""


class NotSupportedError(PyCudaGraphError):
    """The installed driver or bindings are too old for a feature.

    The message names the CUDA version the feature needs.
    """

    def __init__(self, feature: str, required: str, found: str):
        self.feature = feature
        self.required = required
        self.found = found
        super().__init__(f"{feature} needs CUDA {required} or newer; this system has {found}")

    def __reduce__(self):
        return (type(self), (self.feature, self.required, self.found))


class CompileError(PyCudaGraphError):
    """NVRTC could not compile a program.

    Attributes
    ----------
    name : str
        The program's name (the file name given to NVRTC).
    log : str
        NVRTC's compile log, with the error lines.
    options : tuple of str
        The options the program was compiled with.
    added : tuple of str
        Those of ``options`` pycudagraph added (the ``-I`` of the installed CUDA headers):
        left out of the message, which they would make long and machine-specific.
    """

    def __init__(self, name: str, log: str, options: tuple = (), added: tuple = ()):
        self.name = name
        self.log = log
        self.options = tuple(options)
        self.added = tuple(added)
        shown = [o for o in self.options if o not in self.added]
        opts = " ".join(shown) or "(none)"
        if self.added:
            opts += " + the CUDA headers' include path"
        super().__init__(f"NVRTC could not compile {name!r} (options: {opts}):\n{log.rstrip()}")

    def __reduce__(self):
        return (type(self), (self.name, self.log, self.options, self.added))


class ArgumentError(PyCudaGraphError, TypeError, ValueError):
    """A value given to pycudagraph is wrong: a kernel argument that does not match the
    kernel's signature, or a wrong type or value at any public entry.

    The message names the parameter (and the kernel) and what was given. It is both a
    ``TypeError`` and a ``ValueError`` so generic handlers catch it too.
    """


class CaptureError(PyCudaGraphError):
    """A stream capture failed; the capture was ended and its partial graph destroyed.

    Attributes
    ----------
    failed_call : str or None
        The first raw call made through pycudagraph that failed inside the capture, or
        the raw call CuPy's frames show failed, when there was one.
    failed_at : str or None
        ``file:line`` of the user's code where the block broke (the innermost line of the
        traceback outside PyTorch, CuPy and pycudagraph), when the block raised.
    """

    def __init__(self, message: str, failed_call: str | None = None,
                 failed_at: str | None = None):
        self.failed_call = failed_call
        self.failed_at = failed_at
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (str(self), self.failed_call, self.failed_at))


class GraphExecUpdateError(CudaError):
    """``cudaGraphExecUpdate`` refused the new graph.

    Attributes
    ----------
    reason : str
        Why, in words (``"topology changed"``, ``"function changed"``, ...).
    node : Node or None
        The node of the new graph that caused it, when CUDA names one.
    """

    def __init__(self, api, code, name, message, hint="", reason="", node=None):
        self.reason = reason
        self.node = node
        super().__init__(api, code, name, message, hint)

    def __reduce__(self):
        return (type(self), (self.api, self.code, self.name, self.message, self.hint, self.reason))


class HostCallbackError(PyCudaGraphError):
    """A Python callable run by a host node raised; the original is the ``__cause__``."""


class ClosedError(PyCudaGraphError, ValueError):
    """An object was used after it was closed, destroyed, freed or removed.

    Raised before any raw call is made with its handle. The message names the object
    and what happened to it: ``Stream 0x5c1e... was closed``, ``DeviceBuffer 0x7f...
    (4096 bytes) was freed``, ``KernelNode 0x... was removed from its graph``.
    It is a ``ValueError`` too, so generic handlers catch it.

    Attributes
    ----------
    obj : str
        The object, as the message names it.
    what : str
        What happened to it (``"was closed"``, ``"was freed"``, ...).
    """

    def __init__(self, obj: str, what: str, hint: str = ""):
        self.obj = obj
        self.what = what
        self.hint = hint
        text = f"{obj} {what}"
        super().__init__(f"{text}. {hint}" if hint else text)

    def __reduce__(self):
        return (type(self), (self.obj, self.what, self.hint))


class GraphFileError(PyCudaGraphError, ValueError):
    """A graph file cannot be saved or loaded (:func:`pycudagraph.load`, ``Graph.save``).

    The message says what is wrong: a truncated, corrupted, foreign or newer-version file
    (and where), a manifest field out of range, an address that belongs to no slot, a
    kernel image this GPU cannot run, a missing slot, resolver or host function. It is a
    ``ValueError`` too, so generic handlers catch it.
    """


class GraphFileWarning(UserWarning):
    """A graph was saved, but loading it will need something from the loading process
    (a resolver for kernels pycudagraph did not compile)."""


@contextlib.contextmanager
def needs_gpu(what: str = "This example"):
    """Run a script's work; without a usable GPU, exit with one sentence and no traceback.

    ``with pcg.errors.needs_gpu(): main()`` turns a :class:`CudaNotAvailableError` into
    ``SystemExit("This example needs an NVIDIA GPU; none is usable here (...)")``, naming
    what was missing. No CUDA call.
    """
    try:
        yield
    except CudaNotAvailableError as exc:
        raise SystemExit(f"{what} needs an NVIDIA GPU; none is usable here ({exc.name}).") from None
