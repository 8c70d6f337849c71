"""Weights that move under a graphed callable.

A graph reads its weights at the addresses it was captured with. An in-place edit
(``weight.mul_(2)``, ``load_state_dict``) keeps those addresses, so the next replay sees
it. These do not: a weight replaced by another tensor (``module.weight = nn.Parameter(w)``,
``load_state_dict(sd, assign=True)``, ``register_buffer``), its ``.data`` set, or the module
moved or cast (``module.to()``, ``.half()``, ``.cuda()``, which set ``.data``). Left alone,
a replay would read the old tensors, or, once PyTorch gave their memory to something
else, whatever is there now.

A :class:`WeightWatch` guards the CUDA parameters and buffers of the module a graphed
callable's graphs read (the one :func:`.graphed_bind.find_module` finds):

- from the moment the callable holds a graph it keeps the storages of those tensors alive
  (``untyped_storage()``), so no graph ever reads memory given back to the allocator;
- every call asks :meth:`WeightWatch.moved`: one ``data_ptr()`` per tensor, and a walk of
  ``named_parameters()`` / ``named_buffers()`` only after PyTorch registered a parameter,
  buffer or submodule somewhere (its global registration hooks bump a counter);
- the callable then drops its graphs with one warning naming the weight, and captures each
  key again on its next call. The old storages go with the graphs.
- a background capture compares the weights when it was queued with those when it ends
  (:meth:`WeightWatch.snapshot`, :meth:`WeightWatch.since`) and is thrown away when they
  differ.

No CUDA call anywhere here: PyTorch's own bookkeeping only.
"""

from __future__ import annotations

import operator

from . import loaded
from .graphed_bind import find_module, module_arrays

__all__ = ["WeightWatch", "watch_for"]

#: bumped by PyTorch's global registration hooks (a parameter, buffer or submodule set on
#: any module): the tensors a module holds may differ only after a bump or a ``.data`` set
_REGISTERED = [0]
_HOOKED = [False]


def _bump(*_args) -> None:
    """A registration hook: count, change nothing (returning None keeps the value)."""
    _REGISTERED[0] += 1


def _hook(torch) -> None:
    """Register :func:`_bump` with PyTorch's global registration hooks (PyTorch 2.0+; a
    release without one sees a replaced tensor only by its address), once a process."""
    if _HOOKED[0]:
        return
    mod = getattr(getattr(torch.nn, "modules", None), "module", None)
    for name in ("register_module_parameter_registration_hook",
                 "register_module_buffer_registration_hook",
                 "register_module_module_registration_hook"):
        register = getattr(mod, name, None)
        if register is not None:
            register(_bump)
    _HOOKED[0] = True


_data_ptr = operator.methodcaller("data_ptr")  # when PyTorch is not imported (no Tensor)


class WeightWatch:
    """The CUDA parameters and buffers of ``module``, their addresses when the graphs were
    made, and their storages, kept while any graph may read them. No CUDA call.

    The record (names, tensors, addresses) is one tuple, replaced whole: a call that
    checks it while another thread records or forgets reads one record or the other."""

    __slots__ = ("module", "_state", "seen", "kept", "_read")

    def __init__(self, module):
        torch = loaded.torch()
        if torch is not None:
            _hook(torch)
        # Tensor.data_ptr mapped over the tensors: about 0.1 us a tensor on an H200's
        # host, half of what a methodcaller takes (measured; the call itself is the cost)
        self._read = getattr(getattr(torch, "Tensor", None), "data_ptr", None) or _data_ptr
        self.module = module
        self.forget()

    @property
    def armed(self) -> bool:
        """Whether addresses are recorded (the callable holds a graph)."""
        return self.seen is not None

    @property
    def names(self) -> tuple:
        """``param:NAME`` / ``buffer:NAME`` of each recorded tensor."""
        return self._state[0]

    @property
    def ptrs(self) -> tuple:
        """Each recorded tensor's address when it was recorded."""
        return self._state[2]

    def forget(self) -> None:
        """Record nothing and keep nothing: the callable holds no graph."""
        self.seen = None
        self._state = ((), (), ())
        self.kept = []

    def record(self) -> None:
        """Record the module's tensors and their addresses now, keeping their storages
        (with those of every earlier record, until :meth:`forget`)."""
        seen = _REGISTERED[0]
        state = self.snapshot()
        self.kept.append([t.untyped_storage() for t in state[1]])
        self._state = state
        self.seen = seen

    def graphs_changed(self, held: bool) -> None:
        """The callable's graphs changed; ``held``: it holds any. Record at its first
        graph (and after a capture whose function replaced its own weights: every graph
        keeps the storages it read); forget when none is left."""
        if not held:
            self.forget()
        elif self.seen is None or self.moved() is not None:
            self.record()

    def moved(self) -> str | None:
        """What differs from the record, in words, or None (also when nothing is
        recorded): a recorded weight at another address, replaced by another tensor or
        removed (looked for only after a registration). Weights added since are recorded
        too: no graph made before could read them."""
        seen = self.seen
        if seen is None:
            return None
        was = self._state
        why = _at_other_addresses(was, tuple(map(self._read, was[1])))
        if why is not None or seen == _REGISTERED[0]:
            return why
        names, tensors = self._walk()
        why = _replaced(was, names, tensors)
        if why is not None:
            return why
        if len(names) != len(was[0]):
            self.record()
        else:
            self.seen = _REGISTERED[0]
        return None

    def snapshot(self) -> tuple:
        """The module's tensors and their addresses now (a background capture's, taken
        when it is queued), for :meth:`since`."""
        names, tensors = self._walk()
        return names, tensors, tuple(map(self._read, tensors))

    def since(self, snap: tuple) -> str | None:
        """What moved, was replaced or removed since :meth:`snapshot` gave ``snap``, in
        words, or None."""
        names, tensors = self._walk()
        return (_at_other_addresses(snap, tuple(map(self._read, snap[1])))
                or _replaced(snap, names, tensors))

    def _walk(self) -> tuple:
        pairs = module_arrays(self.module)
        return tuple(n for n, _ in pairs), tuple(t for _, t in pairs)


def _at_other_addresses(was: tuple, ptrs: tuple) -> str | None:
    """The first tensor of the record ``was`` (names, tensors, addresses) now at another
    address than ``ptrs`` says, in words."""
    if ptrs == was[2]:
        return None
    moved = [i for i, (a, b) in enumerate(zip(ptrs, was[2])) if a != b]
    i = moved[0]
    more = f" (and {len(moved) - 1} more)" if len(moved) > 1 else ""
    return (f"{was[0][i]} moved from 0x{was[2][i]:x} to 0x{ptrs[i]:x}{more} "
            "(.data set, .to(), .half())")


def _replaced(was: tuple, names: tuple, tensors: tuple) -> str | None:
    """The first tensor of the record ``was`` that the module no longer holds under its
    name (``names``, ``tensors``: what it holds now), in words."""
    now = dict(zip(names, tensors))
    for name, old in zip(was[0], was[1]):
        t = now.get(name)
        if t is None:
            return f"{name} was removed from the module"
        if t is not old:
            return f"{name} was replaced by another tensor"
    return None


def watch_for(fn, module=None):
    """A :class:`WeightWatch` of the PyTorch module ``fn``'s graphs read (``module``, or
    the one :func:`.graphed_bind.find_module` finds), or None: no module, PyTorch not
    imported, ``fn`` reaching several modules, or an ``fn`` whose attributes raise when
    looked at (watching is best effort: it never stops a callable from being made)."""
    torch = loaded.torch()
    if torch is None or getattr(getattr(torch, "nn", None), "Module", None) is None:
        return None
    try:
        found = find_module(fn, module)
    except Exception:  # noqa: BLE001 - ArgumentError (several modules), a raising proxy
        return None
    return WeightWatch(found) if found is not None else None
