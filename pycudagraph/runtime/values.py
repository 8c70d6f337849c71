"""Plain values at public entries: integers, callables, events.

Checks made before CUDA, so a wrong value raises an :class:`~pycudagraph.errors.ArgumentError`
naming the parameter and the value instead of reaching CUDA as ``invalid argument``.
"""

from __future__ import annotations

import operator
import os

import numpy as np

from .._cuda import rt
from ..errors import ArgumentError

__all__ = ["int_arg", "is_int", "bool_arg", "address_arg", "str_arg", "c_str_arg", "path_arg",
           "choice_arg", "seq_arg",
           "str_items_arg",
           "short_repr",
           "require_callable", "progress_arg", "Progress",
           "require_event", "raw_int", "ADDRESS_MAX"]

#: The largest 64-bit address.
ADDRESS_MAX = (1 << 64) - 1


def is_int(value) -> bool:
    """An int or numpy integer, not a bool."""
    return (isinstance(value, (int, np.integer))
            and not isinstance(value, (bool, np.bool_)))


def int_arg(value, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int, refusing bool, float, str and None (a ``TypeError`` naming ``what``).

    Objects with ``__index__`` (numpy integers) are accepted. ``lo``/``hi`` bound it
    inclusively (a ``ValueError`` naming ``what`` and the bound).
    """
    if type(value) is not int:
        value = _index(value, f"{what} must be an int")
    if lo is not None and value < lo:
        raise ArgumentError(f"{what} must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise ArgumentError(f"{what} must be <= {hi}, got {value}")
    return value


def _index(value, refusal: str) -> int:
    """``operator.index(value)`` for integer-like objects (numpy integers); bools, floats,
    strings, arrays ... raise ``ArgumentError(refusal + ", got ...")``."""
    if not isinstance(value, (bool, np.bool_)) and hasattr(value, "__index__"):
        try:
            return operator.index(value)
        except TypeError:  # a numpy array of several numbers, say
            pass
    raise ArgumentError(f"{refusal}, got {short_repr(value)} ({type(value).__name__})")


def bool_arg(value, what: str) -> bool:
    """``value`` as a bool: ``True``/``False``, numpy bools, or the ints 0 and 1.

    Anything else (a string such as ``"no"``, ``None``, a float, 2) is refused with an
    :class:`ArgumentError` naming ``what``: ``bool("no")`` is ``True``, which would turn a
    flag on that the caller meant off.
    """
    if value is True or value is False:
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if is_int(value) and value in (0, 1):
        return bool(value)
    raise ArgumentError(f"{what} must be True or False, got {short_repr(value)} "
                        f"({type(value).__name__})")


def address_arg(value, what: str) -> int:
    """An integer address: a Python or numpy integer in 0 .. 2**64-1 (not a bool)."""
    if type(value) is not int:
        value = _index(value, f"{what}: an address must be an int")
    if not 0 <= value <= ADDRESS_MAX:
        raise ArgumentError(f"{what}: an address must be in 0 .. 2**64-1, got {value}")
    return value


def str_arg(value, what: str, empty: bool = True) -> str:
    """``value`` if it is a ``str`` (non-empty unless ``empty``); else an :class:`ArgumentError`."""
    if not isinstance(value, str):
        raise ArgumentError(f"{what} must be a str, got {short_repr(value)} "
                            f"({type(value).__name__})")
    if not empty and not value:
        raise ArgumentError(f"{what} must not be empty")
    return value


def c_str_arg(value, what: str, empty: bool = True) -> str:
    """``value`` as :func:`str_arg` takes it, for text that goes to C as a NUL-terminated
    UTF-8 string (NVRTC sources and names, kernel names): a NUL character, which would
    cut it short there, or an unpaired surrogate, which has no UTF-8, is refused with an
    :class:`ArgumentError` naming ``what`` and the offset."""
    str_arg(value, what, empty)
    at = value.find("\0")
    if at >= 0:
        raise ArgumentError(f"{what} must not hold a NUL character, got one at offset {at}"
                            f"{_line_of(value, at)}: {short_repr(value[max(0, at - 24):at + 24])}")
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise ArgumentError(f"{what} must be text that has UTF-8, got {value[exc.start]!r} "
                            f"(an unpaired surrogate) at offset {exc.start}"
                            f"{_line_of(value, exc.start)}") from None
    return value


def _line_of(text: str, at: int) -> str:
    """`` (line N)`` of offset ``at`` in a text of several lines, else ""."""
    return f" (line {text.count(chr(10), 0, at) + 1})" if "\n" in text else ""


def path_arg(value, what: str) -> str:
    """A file path: a non-empty ``str`` or ``os.PathLike`` (returned as a str) with no NUL
    character (which no file name holds)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise ArgumentError(f"{what} must be a file path (str or os.PathLike), got "
                            f"{short_repr(value)} ({type(value).__name__})")
    if "\0" in value:
        raise ArgumentError(f"{what} must not hold a NUL character, got {short_repr(value)}")
    return value


def choice_arg(value, choices, what: str) -> str:
    """``value`` if it is one of the names ``choices`` (a dict or a collection of str)."""
    if not isinstance(value, str) or value not in choices:
        raise ArgumentError(f"{what} must be one of {sorted(choices)}, got {short_repr(value)}")
    return value


def seq_arg(value, what: str) -> tuple:
    """``value`` (a list, tuple or other iterable, not a str, bytes or dict) as a tuple."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise ArgumentError(f"{what} must be a sequence, got {short_repr(value)} "
                            f"({type(value).__name__})")
    return tuple(value)


def str_items_arg(value, what: str) -> tuple:
    """``value`` (a sequence of str, not a str itself) as a tuple; another item is refused."""
    items = seq_arg(value, what)
    for item in items:
        if not isinstance(item, str):
            raise ArgumentError(f"{what} must be str, got {short_repr(item)} "
                                f"({type(item).__name__}) in {short_repr(items)}")
    return items


def short_repr(value) -> str:
    """``repr(value)`` cut to 60 characters, for messages."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def require_callable(fn, what: str, where: str):
    if not callable(fn):
        raise ArgumentError(f"{where}: {what} must be callable, got {short_repr(fn)} "
                            f"({type(fn).__name__})")
    return fn


def progress_arg(progress, where: str):
    """``progress`` checked: None or a callable taking one line of text (long work tells
    where it is through it)."""
    if progress is not None and not callable(progress):
        raise ArgumentError(f"{where}: progress must be None or a callable taking one line "
                            f"of text (print, a logger's info), got {type(progress).__name__}")
    return progress


class Progress:
    """Lines of text for a ``progress`` callable (checked by :func:`progress_arg`), each
    begun with ``where`` and ended with the time its step took; nothing is made when
    ``progress`` is None."""

    __slots__ = ("fn", "where")

    def __init__(self, progress, where: str):
        self.fn = progress_arg(progress, where)
        self.where = where

    def __call__(self, text: str, seconds: float | None = None) -> None:
        if self.fn is None:
            return
        took = ("" if seconds is None else f" ({1e3 * seconds:.0f} ms)" if seconds < 1
                else f" ({seconds:.2f} s)")
        self.fn(f"{self.where}: {text}{took}")


def require_event(event, where: str):
    """A :class:`pycudagraph.Event` (anything whose ``.handle`` is a ``cudaEvent_t``)."""
    if not isinstance(getattr(event, "handle", None), rt.cudaEvent_t):
        raise ArgumentError(f"{where}: event must be a pycudagraph.Event, got {short_repr(event)} "
                            f"({type(event).__name__})")
    return event


def raw_int(handle, what: str) -> int:
    """The integer value of a raw handle: an int, a cuda.bindings handle (``cudaGraph_t``,
    ``CUgraph``, ...) or anything with ``__int__``; a null handle raises."""
    if isinstance(handle, bool):
        raise ArgumentError(f"{what}: expected a {what} handle, got {handle!r}")
    if isinstance(handle, (float, str, bytes, complex, np.bool_)):
        raise ArgumentError(f"{what}: expected an int or a cuda.bindings handle, got "
                            f"{short_repr(handle)} ({type(handle).__name__})")
    try:
        h = int(handle)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentError(f"{what}: expected an int or a cuda.bindings handle, got "
                            f"{type(handle).__name__}") from None
    if h <= 0:
        raise ArgumentError(f"{what}: the handle is null ({h})")
    if h > ADDRESS_MAX:
        raise ArgumentError(f"{what}: a handle is 64-bit, got {h}")
    return h
