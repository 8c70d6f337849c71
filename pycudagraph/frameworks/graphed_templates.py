"""The templates a saved graphed callable's index holds of each key's arguments: what
:func:`~.graphed_load.load_graphed` makes inputs of again (PyTorch tensors and CuPy arrays
by framework, shape, strides, dtype and alignment; numbers, strings and None by value;
tuples, lists and dicts of those), read from the key itself (:func:`.arrays.flatten`).
No CUDA call here.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["KeySkipped", "key_templates", "dtype_name", "SCALARS", "describe_key"]

#: The Python types an argument or output template holds by value.
SCALARS = (bool, int, float, str, type(None))


class KeySkipped(Exception):
    """A key that cannot be saved; the message says why."""


def dtype_name(framework: str, dtype) -> str:
    """How an index names ``dtype`` of ``framework``: ``"float32"`` (PyTorch), ``"<f4"`` (CuPy)."""
    if framework == "torch":
        return str(dtype).replace("torch.", "")
    return np.dtype(dtype).str


def _key_part(k) -> dict:
    """The template of one argument from its part of a graphed key (see :func:`.arrays.flatten`)."""
    if type(k) is tuple and len(k) == 6 and k[0] in ("torch", "cupy"):
        fw, shape, strides, dtype, _dev, align = k
        return {"array": {"framework": fw, "shape": list(shape), "strides": list(strides),
                          "dtype": dtype_name(fw, dtype), "align": int(align)}}
    if type(k) is tuple and len(k) == 6 and k[0] in ("buffer", "cai"):
        raise KeySkipped("an input is a DeviceBuffer or another array without a framework; "
                         "only PyTorch tensors and CuPy arrays are made again at load")
    if type(k) is tuple and len(k) == 2 and k[0] in ("tuple", "list"):
        return {k[0]: [_key_part(x) for x in k[1]]}
    if type(k) is tuple and len(k) == 2 and k[0] == "dict":
        if not all(type(name) is str for name, _ in k[1]):
            raise KeySkipped("a dict argument has keys that are not strings")
        return {"dict": [[name, _key_part(x)] for name, x in k[1]]}
    if type(k) is tuple and len(k) == 2 and isinstance(k[0], type):
        t, v = k
        if t not in SCALARS or (t is float and not math.isfinite(v)):
            raise KeySkipped(f"an argument is a {t.__name__} ({v!r}); a file holds None, "
                             "booleans, numbers and strings")
        return {"value": v}
    raise KeySkipped(f"an argument's key {k!r} is of no known form")


def key_templates(key) -> tuple[list, list]:
    """(args templates, kwargs ``[name, template]`` pairs) of a graphed key. No CUDA call.

    Raises
    ------
    KeySkipped
        Inputs that alias each other, or an argument a file cannot describe.
    """
    args, kwargs, aliasing = key
    if aliasing:
        raise KeySkipped("its inputs share memory with each other")
    return [_key_part(a) for a in args], [[name, _key_part(x)] for name, x in kwargs]


def describe_key(rec: dict) -> str:
    """A key record named for people: its file and its arrays' shapes and dtypes
    (``key-002.pcgraph ((4, 1) int64)``). No CUDA call."""
    arrays = []

    def walk(t):
        (kind, v), = t.items()
        if kind == "array":
            arrays.append(f"{tuple(v['shape'])} {v['dtype']}")
        elif kind in ("tuple", "list"):
            for x in v:
                walk(x)
        elif kind == "dict":
            for _, x in v:
                walk(x)

    for t in rec["args"] + [t for _, t in rec["kwargs"]]:
        walk(t)
    return f"{rec['file']} ({', '.join(arrays) or 'no arrays'})"
