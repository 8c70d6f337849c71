"""The named device arrays a graphed callable's graphs point at, found the same way in the
saving and the loading process: the weights and buffers of its PyTorch module by
``named_parameters()`` / ``named_buffers()`` name, and the arrays its function closes over.

Names (the slot names of the saved graphs):

- ``param:NAME``, ``buffer:NAME``: the module's (``module=``, the callable itself when it is
  a ``torch.nn.Module``, the ``self`` of a bound method, or the one module its function
  closes over or reads as a global);
- ``closure:NAME``, ``global:NAME``, ``attr:NAME``: an array the function closes over (a
  variable of an enclosing function), reads as a global, or finds on ``self``; one level
  of tuples, lists and dicts is looked into (``closure:NAME[0]``, ``closure:NAME['k']``);
- ``bind:NAME``: what ``bind={NAME: array}`` gives.

An array seen under two names is bound once, by the first name (tied weights). No CUDA call
anywhere here: the frameworks' own bookkeeping only.
"""

from __future__ import annotations

import functools

from ..errors import ArgumentError
from .arrays import array_info
from . import loaded

__all__ = ["Span", "find_module", "module_arrays", "bindings", "describe", "versions"]

_CONTAINERS = (tuple, list, dict)


class Span:
    """Device memory ``[ptr, ptr + nbytes)`` that keeps ``owner`` (the array, tensor or
    allocation it lies in) alive: what a graph file's slot is bound to
    (``__cuda_array_interface__``, bytes)."""

    __slots__ = ("ptr", "nbytes", "owner", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, owner=None):
        self.ptr, self.nbytes, self.owner = int(ptr), int(nbytes), owner

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                "version": 3}

    def __repr__(self) -> str:
        return f"<Span 0x{self.ptr:x} {self.nbytes} B>"


def _is_module(obj) -> bool:
    torch = loaded.torch()
    return torch is not None and isinstance(obj, torch.nn.Module)


def _unwrap(fn):
    """The function under ``functools.partial`` and ``functools.wraps`` layers."""
    for _ in range(16):
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif getattr(fn, "__wrapped__", None) is not None:
            fn = fn.__wrapped__
        else:
            break
    return fn


def _scopes(fn) -> list[tuple[str, object]]:
    """``(prefix + name, value)`` of what ``fn`` closes over, reads as globals, or holds on
    ``self``, in that order."""
    out = []
    fn = _unwrap(fn)
    owner = getattr(fn, "__self__", None)
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    if code is not None:
        for name, cell in zip(code.co_freevars, getattr(func, "__closure__", None) or ()):
            try:
                out.append((f"closure:{name}", cell.cell_contents))
            except ValueError:  # an empty cell
                continue
        glob = getattr(func, "__globals__", {})
        for name in code.co_names:
            if name in glob:
                out.append((f"global:{name}", glob[name]))
    if owner is not None and not _is_module(owner) and hasattr(owner, "__dict__"):
        out += [(f"attr:{k}", v) for k, v in vars(owner).items()]
    return out


def find_module(fn, module=None):
    """The PyTorch module whose weights ``fn``'s graphs use, or None: ``module`` when given;
    ``fn`` itself or the ``self`` of a bound method when a module; else the one module
    ``fn`` closes over or reads as a global.

    Raises
    ------
    ArgumentError
        ``module`` is not a ``torch.nn.Module``; ``fn`` reaches several modules (pass
        ``module=``).
    """
    if module is not None:
        if not _is_module(module):
            raise ArgumentError(f"module= must be a torch.nn.Module, got {type(module).__name__}")
        return module
    fn = _unwrap(fn)
    if _is_module(fn):
        return fn
    owner = getattr(fn, "__self__", None)
    if _is_module(owner):
        return owner
    found = {}
    for name, v in _scopes(fn):
        if _is_module(v):
            found.setdefault(id(v), (name, v))
    if len(found) > 1:
        names = ", ".join(n for n, _ in found.values())
        raise ArgumentError(f"the function reaches several torch.nn.Modules ({names}); pass "
                            "module= the one whose weights its graphs use")
    return next(iter(found.values()))[1] if found else None


def module_arrays(mod) -> list:
    """``[(name, tensor)]`` of ``mod``'s non-empty CUDA parameters and buffers, named
    ``param:NAME`` and ``buffer:NAME`` (``named_parameters()``, ``named_buffers()``)."""
    out = []
    for prefix, items in (("param:", mod.named_parameters()), ("buffer:", mod.named_buffers())):
        for name, t in items:
            if t is not None and getattr(t, "is_cuda", False) and t.numel():
                out.append((prefix + name, t))
    return out


def _arrays(name: str, v, depth: int = 0):
    """``(name, array)`` of ``v`` when it is a device array, or of the arrays one level of
    containers inside it holds."""
    try:
        if array_info(v) is not None:
            yield name, v
            return
    except Exception:  # a CPU tensor, a freed buffer: not a device array to bind
        return
    if depth or type(v) not in _CONTAINERS:
        return
    items = v.items() if type(v) is dict else enumerate(v)
    for k, x in items:
        if type(k) in (int, str):
            yield from _arrays(f"{name}[{k!r}]", x, depth + 1)


def bindings(fn, module=None, bind=None) -> dict:
    """``{name: array}`` of every device array ``fn``'s graphs may point at by name (see
    the module docstring); an array seen twice keeps its first name.

    Raises
    ------
    ArgumentError
        ``bind`` is not a dict of names to device arrays; see :func:`find_module`.
    """
    if bind is not None and not isinstance(bind, dict):
        raise ArgumentError(f"bind= must be a dict {{name: device array}}, got "
                            f"{type(bind).__name__}")
    found: list = []
    for k, v in (bind or {}).items():
        if not isinstance(k, str) or not k or not k.isprintable() or len(k) > 240:
            raise ArgumentError(f"bind=: names are printable strings of 1 to 240 "
                                f"characters, got {k!r}")
        if array_info(v) is None:
            raise ArgumentError(f"bind[{k!r}] is a {type(v).__name__}, not a device array")
        found.append((f"bind:{k}", v))
    mod = find_module(fn, module)
    if mod is not None:
        found += module_arrays(mod)
    for name, v in _scopes(fn):
        if not _is_module(v):
            found += list(_arrays(name, v))
    out, seen = {}, set()
    for name, v in found:
        info = array_info(v)
        span = (info.lo, info.hi)
        if span in seen or name in out or info.hi <= info.lo:
            continue
        seen.add(span)
        out[name] = v
    return out


def describe(obj) -> dict:
    """``{"shape", "dtype", "nbytes"}`` of a device array: what must match between the
    saved binding and the loading process's. No CUDA call."""
    info = array_info(obj)
    dtype = info.key[3]
    name = str(dtype).replace("torch.", "") if info.framework == "torch" else str(dtype)
    return {"shape": [int(n) for n in info.key[1]], "dtype": name, "nbytes": info.hi - info.lo}


def versions() -> dict:
    """``{"torch": version or None, "cupy": version or None}`` of the frameworks imported,
    each a plain ``str`` (``torch.__version__`` is a ``TorchVersion``, a subclass whose
    comparisons parse versions). No CUDA call."""
    out = {}
    for name, module in (("torch", loaded.torch()), ("cupy", loaded.cupy())):
        text = getattr(module, "__version__", None) if module is not None else None
        out[name] = str.__str__(text) if isinstance(text, str) and text else None
    return out
