"""Write docs/api/index.rst: one autodoc entry for every name in ``pycudagraph.__all__``.

Run ``python tools/gen_api_docs.py`` after adding a public name; ``tests/docs/test_api_reference.py``
fails while the page and ``__all__`` disagree.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pycudagraph  # noqa: E402

#: Sections in page order: (title, predicate on (name, object)).
SECTIONS = (
    ("Kernels: compile, load, launch", lambda n, o: n in ("Program", "Module", "Kernel")),
    ("Streams, events, memory and devices",
     lambda n, o: n in ("Stream", "Event", "DeviceBuffer", "PinnedBuffer", "device_pointer",
                        "host_pointer", "Device", "device", "device_count")),
    ("Graphs and executable graphs", lambda n, o: n in ("Graph", "GraphExec", "Profile")),
    ("Nodes", lambda n, o: n.endswith("Node") or n in ("NodeType", "ConditionalHandle")),
    ("Graph files", lambda n, o: n in ("load", "register_host_fn")),
    ("Capture, trace and bucketed graphs",
     lambda n, o: n in ("capture", "capture_status", "capture_info", "trace", "BucketedGraphs",
                        "BucketStats")),
    ("PyTorch and CuPy: memory-safe capture, graphed callables",
     lambda n, o: n in ("graphed", "GraphedCallable", "CapturePool")),
    ("Errors", lambda n, o: inspect.isclass(o) and issubclass(o, BaseException)),
)


def _hot_base_of(cls) -> bool:
    """Whether ``cls`` extends one of the hot path's base types (``fast.ExecBase`` ...),
    whose methods it inherits: the page lists inherited members for it."""
    from pycudagraph._cuda import hot_base
    bases = {b.__name__ for b in cls.__mro__[1:]
             if b.__module__ in ("pycudagraph._cuda._native", hot_base.__name__)}
    return bool(bases & set(hot_base.__all__))


def page() -> str:
    names = list(pycudagraph.__all__)
    lines = ["API reference", "=============", "",
             "Every public name of ``pycudagraph`` (``import pycudagraph as pcg``).", ""]
    placed = set()
    for title, pred in SECTIONS + (("Other", lambda n, o: True),):
        chosen = [n for n in names if n not in placed and pred(n, getattr(pycudagraph, n))]
        if not chosen:
            continue
        placed.update(chosen)
        lines += [title, "-" * len(title), ""]
        for n in chosen:
            obj = getattr(pycudagraph, n)
            if inspect.isclass(obj):
                lines += [f".. autoclass:: pycudagraph.{n}", "   :members:"]
                if _hot_base_of(obj):  # launch, set_arg, add_kernel ... are the base's
                    lines += ["   :inherited-members:"]
                lines += [""]
            else:
                lines += [f".. autofunction:: pycudagraph.{n}", ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    out = ROOT / "docs" / "api" / "index.rst"
    out.write_text(page())
    print(f"wrote {out}")
