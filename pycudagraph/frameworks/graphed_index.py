"""The index of a saved graphed callable (``f.save(path)``): what each key's graph file needs
in the loading process, checked field by field before anything is made.

A saved callable is a folder: ``index.json`` and one graph file per key
(``key-000.pcgraph`` ..., written by :meth:`Graph.save <pycudagraph.Graph.save>`). The index
is JSON (never pickle: loading runs no code from the file) and says

- where it was made: ``arch`` (``"sm_90"``), ``gpu`` (the device name) and ``versions`` of
  the frameworks (``{"torch": "2.11.0", "cupy": null}``);
- ``bindings``: the weights, buffers and arrays the graphs point at, by name
  (``"param:lm_head.weight"``), each with its ``shape``, ``dtype`` and ``nbytes``;
- ``pools``: each capture pool as the sizes of its segments (the loader makes one
  allocation of their sum per pool, shared by the keys that shared the pool);
- ``workspaces``: the sizes of library workspaces (cuBLAS ...), made anew, zeroed;
- ``keys``: per key its graph ``file`` (``nbytes``, ``sha256``), ``device``, the call's
  ``args`` / ``kwargs`` and its ``outputs`` as templates, the ``slots`` its file binds and
  the ``kernels`` (by name) the loading process must find, with the ``variants``
  (``[[name, n], ...]``, optional) of the names that ran as several functions
  (:mod:`.kernel_probe`).

Slot names say what they are bound to: ``input:I`` (the key's I-th input array),
``pool:P:S`` (segment S of pool P), ``workspace:W``, or a binding's name.

A template is ``{"array": {"framework", "shape", "strides", "dtype", "align"[, "at"]}}``
(``strides`` as the framework counts them: elements for PyTorch, bytes for CuPy; ``at``,
for an output, ``{"pool": P, "segment": S, "offset": N}`` or ``{"binding": NAME, "offset":
N}``), ``{"tuple": [...]}``, ``{"list": [...]}``, ``{"dict": [[str, template], ...]}`` or
``{"value": JSON scalar}``. No CUDA call anywhere here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from pathlib import Path

from ..errors import GraphFileError

__all__ = ["INDEX", "FORMAT", "VERSION", "read_index", "write_index", "check_index",
           "check_key_files", "check_arch", "version_differences", "compare_bindings",
           "slot_kind", "BINDING_PREFIXES"]

INDEX = "index.json"
FORMAT = "pycudagraph.graphed"
VERSION = (1, 0)
MAX_INDEX = 64 << 20  # bytes of index.json read at most
#: the prefixes of binding names (what each binds: module.named_parameters() ...)
BINDING_PREFIXES = ("param:", "buffer:", "closure:", "global:", "attr:", "bind:")
_KEY_FILE = re.compile(r"^key-[0-9]{3,6}\.pcgraph$")
_INPUT = re.compile(r"^input:(0|[1-9][0-9]{0,5})$")
_POOL = re.compile(r"^pool:(0|[1-9][0-9]{0,5}):(0|[1-9][0-9]{0,5})$")
_WORKSPACE = re.compile(r"^workspace:(0|[1-9][0-9]{0,5})$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_FRAMEWORKS = ("torch", "cupy")
_BIG = 1 << 48  # bytes: more than any GPU holds
_DEPTH = 16  # nesting of templates
_TOP = ("format", "version", "writer", "function", "arch", "gpu", "versions", "bindings",
        "pools", "workspaces", "keys")
_KEY = ("file", "nbytes", "sha256", "device", "args", "kwargs", "outputs", "slots",
        "kernels", "pool", "outputs_pool")
_KEY_MAY = ("variants",)


class _Check:
    """Field checks naming the field by its path in the index."""

    def __init__(self, source: str):
        self.source = source
        self.nodes = 0
        self.names: set = set()  # kernel names checked

    def fail(self, where: str, what: str):
        raise GraphFileError(f"{self.source}: index: {where}: {what}")

    def obj(self, v, where: str, need: tuple, may: tuple = ()) -> dict:
        if type(v) is not dict:
            self.fail(where, f"expected an object, got {_kind(v)}")
        missing = [k for k in need if k not in v]
        if missing:
            self.fail(where, f"lacks {', '.join(map(repr, missing))}")
        extra = [k for k in v if k not in need and k not in may]
        if extra:
            self.fail(where, f"has unknown field(s) {', '.join(map(repr, extra[:5]))}")
        return v

    def int_(self, v, where: str, lo: int = 0, hi: int = _BIG) -> int:
        if type(v) is not int or not lo <= v <= hi:
            self.fail(where, f"expected an integer in [{lo}, {hi}], got {_short(v)}")
        return v

    def str_(self, v, where: str, most: int = 4096) -> str:
        """A string of 1 to ``most`` printable characters (``str.isprintable``: any letter,
        digit, punctuation or space, so ``"2.11.0+cu130"``; never a control character,
        line break or tab). A ``str`` subclass (PyTorch's ``TorchVersion``) is read as the
        plain string it holds."""
        if not isinstance(v, str):
            self.fail(where, f"expected a string of 1 to {most} printable characters, "
                             f"got {_kind(v)}")
        v = str.__str__(v)
        if not 0 < len(v) <= most:
            self.fail(where, f"expected a string of 1 to {most} printable characters, "
                             f"got {len(v)} characters")
        if not v.isprintable():
            at = next(i for i, ch in enumerate(v) if not ch.isprintable())
            self.fail(where, f"expected printable characters only, got {v[at]!r} at "
                             f"{at} in {_short(v)}")
        return v

    def list_(self, v, where: str, most: int = 1 << 20) -> list:
        if type(v) is not list or len(v) > most:
            self.fail(where, f"expected a list of at most {most} items, got {_kind(v)}")
        return v


def _kind(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _short(v) -> str:
    text = json.dumps(v) if isinstance(v, (str, int, float, bool, type(None))) else _kind(v)
    return text if len(text) <= 60 else text[:57] + "..."


@functools.lru_cache(maxsize=1 << 14)
def slot_kind(name: str) -> tuple:
    """What a slot name binds: ``("input", i)``, ``("pool", p, s)``, ``("workspace", w)``,
    ``("binding", name)``, or ``()`` for a name of no kind. Each name is parsed once (the
    keys of a saved callable share most of theirs)."""
    for pattern, kind in ((_INPUT, "input"), (_POOL, "pool"), (_WORKSPACE, "workspace")):
        m = pattern.match(name)
        if m:
            return (kind,) + tuple(int(g) for g in m.groups())
    if name.startswith(BINDING_PREFIXES) and 1 <= len(name) <= 256 and name.isprintable():
        return ("binding", name)
    return ()


# the whole index ---------------------------------------------------------------------

def check_index(ix, source: str = "index") -> dict:
    """Check an index field by field (see the module docstring); returns it. Raises
    :class:`GraphFileError` naming the first field that is wrong. No CUDA call."""
    c = _Check(source)
    c.obj(ix, "the index", _TOP)
    if ix["format"] != FORMAT:
        c.fail("format", f"expected {FORMAT!r}, got {_short(ix['format'])}: not a saved "
                         "graphed callable")
    v = ix["version"]
    if type(v) is not list or len(v) != 2 or not all(type(x) is int and 0 <= x < 1 << 16 for x in v):
        c.fail("version", f"expected [major, minor], got {_short(v)}")
    if v[0] != VERSION[0]:
        c.fail("version", f"{v[0]}.{v[1]} is another major version; this pycudagraph reads "
                          f"{VERSION[0]}.x")
    for name in ("writer", "function", "arch", "gpu"):
        c.str_(ix[name], name, 256)
    versions = c.obj(ix["versions"], "versions", (), _FRAMEWORKS)
    for name, text in versions.items():
        if text is not None:
            c.str_(text, f"versions.{name}", 128)
    bindings = ix["bindings"]
    if type(bindings) is not dict:
        c.fail("bindings", f"expected an object, got {_kind(bindings)}")
    if len(bindings) > 1 << 20:
        c.fail("bindings", "more than 1,048,576 bindings")
    for name, b in bindings.items():
        w = f"bindings[{name!r}]" if len(name) < 80 else "bindings[...]"
        if slot_kind(name)[:1] != ("binding",):
            c.fail(w, f"a binding's name starts with one of {', '.join(BINDING_PREFIXES)}")
        c.obj(b, w, ("shape", "dtype", "nbytes"))
        _shape(c, b["shape"], f"{w}.shape")
        c.str_(b["dtype"], f"{w}.dtype", 32)
        c.int_(b["nbytes"], f"{w}.nbytes", 1)
    pools = c.list_(ix["pools"], "pools", 1 << 16)
    for p, pool in enumerate(pools):
        c.obj(pool, f"pools[{p}]", ("framework", "segments"))
        if pool["framework"] not in _FRAMEWORKS:
            c.fail(f"pools[{p}].framework", f"expected one of {_FRAMEWORKS}, got "
                                            f"{_short(pool['framework'])}")
        segs = c.list_(pool["segments"], f"pools[{p}].segments", 1 << 16)
        if not segs:
            c.fail(f"pools[{p}].segments", "a pool has at least one segment")
        for s, n in enumerate(segs):
            c.int_(n, f"pools[{p}].segments[{s}]", 1)
        if sum(segs) > _BIG:
            c.fail(f"pools[{p}].segments", "more bytes than any GPU holds")
    for w, n in enumerate(c.list_(ix["workspaces"], "workspaces", 1 << 16)):
        c.int_(n, f"workspaces[{w}]", 1)
    keys = c.list_(ix["keys"], "keys", 1 << 16)
    files = set()
    for k, key in enumerate(keys):
        _check_key(c, key, f"keys[{k}]", ix)
        if key["file"] in files:
            c.fail(f"keys[{k}].file", f"{key['file']!r} is named by two keys")
        files.add(key["file"])
    return ix


def _shape(c: _Check, v, where: str) -> list:
    c.list_(v, where, 32)
    for i, n in enumerate(v):
        c.int_(n, f"{where}[{i}]", 0, 1 << 40)
    return v


def _check_key(c: _Check, key, w: str, ix: dict) -> None:
    c.obj(key, w, _KEY, _KEY_MAY)
    name = c.str_(key["file"], f"{w}.file", 64)
    if not _KEY_FILE.match(name):  # a plain name in the folder: never a path
        c.fail(f"{w}.file", f"{name!r} is not a key file name (key-NNN.pcgraph)")
    c.int_(key["nbytes"], f"{w}.nbytes", 1)
    if type(key["sha256"]) is not str or not _HEX64.match(key["sha256"]):
        c.fail(f"{w}.sha256", "expected 64 lowercase hexadecimal digits")
    c.int_(key["device"], f"{w}.device", 0, 1023)
    npools = len(ix["pools"])
    for field in ("pool", "outputs_pool"):
        if key[field] is not None:
            c.int_(key[field], f"{w}.{field}", 0, npools - 1)
    inputs = [0]
    for i, t in enumerate(c.list_(key["args"], f"{w}.args", 4096)):
        _template(c, t, f"{w}.args[{i}]", ix, inputs, False, 0)
    for i, pair in enumerate(c.list_(key["kwargs"], f"{w}.kwargs", 4096)):
        if type(pair) is not list or len(pair) != 2:
            c.fail(f"{w}.kwargs[{i}]", "expected [name, template]")
        c.str_(pair[0], f"{w}.kwargs[{i}][0]", 256)
        _template(c, pair[1], f"{w}.kwargs[{i}][1]", ix, inputs, False, 0)
    _template(c, key["outputs"], f"{w}.outputs", ix, [0], True, 0)
    for i, s in enumerate(c.list_(key["slots"], f"{w}.slots", 1 << 20)):
        kind = slot_kind(c.str_(s, f"{w}.slots[{i}]", 256))  # (each name parsed once)
        if not kind:
            c.fail(f"{w}.slots[{i}]", f"{s!r} names no input, pool segment, workspace or binding")
        bad = ((kind[0] == "input" and kind[1] >= inputs[0])
               or (kind[0] == "pool" and (kind[1] >= npools
                                          or kind[2] >= len(ix["pools"][kind[1]]["segments"])))
               or (kind[0] == "workspace" and kind[1] >= len(ix["workspaces"]))
               or (kind[0] == "binding" and kind[1] not in ix["bindings"]))
        if bad:
            c.fail(f"{w}.slots[{i}]", f"{s!r} names something the index does not have")
    names = c.names
    for i, n in enumerate(c.list_(key["kernels"], f"{w}.kernels", 1 << 16)):
        if type(n) is not str or n not in names:
            names.add(c.str_(n, f"{w}.kernels[{i}]", 4096))
    named = set()
    for i, pair in enumerate(c.list_(key.get("variants", []), f"{w}.variants", 1 << 16)):
        if type(pair) is not list or len(pair) != 2:
            c.fail(f"{w}.variants[{i}]", "expected [kernel name, variant]")
        if type(pair[0]) is not str or pair[0] not in key["kernels"] or pair[0] in named:
            c.fail(f"{w}.variants[{i}][0]", "expected a name of the key's kernels, once")
        named.add(pair[0])
        c.int_(pair[1], f"{w}.variants[{i}][1]", 0, 1 << 16)


def _template(c: _Check, t, w: str, ix: dict, inputs: list, output: bool, depth: int) -> None:
    """Check one template; ``inputs[0]`` counts the arrays of a call's templates."""
    c.nodes += 1
    if depth > _DEPTH or c.nodes > 1 << 20:
        c.fail(w, f"templates nest at most {_DEPTH} deep")
    if type(t) is not dict or len(t) != 1:
        c.fail(w, "expected a template: an object with one of 'array', 'tuple', 'list', "
                  "'dict', 'value'")
    (kind, v), = t.items()
    if kind == "value":
        if not (v is None or type(v) in (bool, int, str) or (type(v) is float and math.isfinite(v))):
            c.fail(f"{w}.value", f"expected null, a boolean, a number or a string, got {_kind(v)}")
        if type(v) is int and not -(1 << 63) <= v < 1 << 63:
            c.fail(f"{w}.value", "an integer out of the 64-bit range")
        if type(v) is str and len(v) > 4096:
            c.fail(f"{w}.value", "a string of more than 4096 characters")
    elif kind in ("tuple", "list"):
        for i, x in enumerate(c.list_(v, f"{w}.{kind}", 4096)):
            _template(c, x, f"{w}.{kind}[{i}]", ix, inputs, output, depth + 1)
    elif kind == "dict":
        for i, pair in enumerate(c.list_(v, f"{w}.dict", 4096)):
            if type(pair) is not list or len(pair) != 2:
                c.fail(f"{w}.dict[{i}]", "expected [key, template]")
            c.str_(pair[0], f"{w}.dict[{i}][0]", 256)
            _template(c, pair[1], f"{w}.dict[{i}][1]", ix, inputs, output, depth + 1)
    elif kind == "array":
        _array(c, v, f"{w}.array", ix, output)
        inputs[0] += 1
    else:
        c.fail(w, f"unknown template kind {kind!r}")


def _array(c: _Check, a, w: str, ix: dict, output: bool) -> None:
    c.obj(a, w, ("framework", "shape", "strides", "dtype", "align") + (("at",) if output else ()))
    if a["framework"] not in _FRAMEWORKS:
        c.fail(f"{w}.framework", f"expected one of {_FRAMEWORKS}, got {_short(a['framework'])}")
    shape = _shape(c, a["shape"], f"{w}.shape")
    strides = c.list_(a["strides"], f"{w}.strides", 32)
    if len(strides) != len(shape):
        c.fail(f"{w}.strides", f"{len(strides)} strides for {len(shape)} dimensions")
    for i, s in enumerate(strides):
        c.int_(s, f"{w}.strides[{i}]", -(1 << 40), 1 << 40)
    c.str_(a["dtype"], f"{w}.dtype", 32)
    align = c.int_(a["align"], f"{w}.align", 1, 256)
    if align & (align - 1):
        c.fail(f"{w}.align", f"{align} is not a power of two")
    if not output:
        return
    at = a["at"]
    if type(at) is dict and "pool" in at:
        c.obj(at, f"{w}.at", ("pool", "segment", "offset"))
        p = c.int_(at["pool"], f"{w}.at.pool", 0, len(ix["pools"]) - 1)
        segs = ix["pools"][p]["segments"]
        s = c.int_(at["segment"], f"{w}.at.segment", 0, len(segs) - 1)
        c.int_(at["offset"], f"{w}.at.offset", 0, segs[s] - 1)
    else:
        c.obj(at, f"{w}.at", ("binding", "offset"))
        if at["binding"] not in ix["bindings"]:
            c.fail(f"{w}.at.binding", f"{_short(at['binding'])} is not among the bindings")
        c.int_(at["offset"], f"{w}.at.offset", 0, ix["bindings"][at["binding"]]["nbytes"] - 1)


# reading and writing -------------------------------------------------------------------

def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _pairs(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise ValueError(f"the field {k!r} appears twice in one object")
            seen.add(k)
    return out


def read_index(folder) -> dict:
    """Read and check ``folder/index.json``. Raises :class:`GraphFileError` for a folder
    that is not a saved graphed callable, a file too big, not UTF-8 JSON (truncated), or
    a field that is wrong. No CUDA call."""
    path = Path(folder) / INDEX
    if not Path(folder).is_dir():
        raise GraphFileError(f"{folder}: not a saved graphed callable (a folder with "
                             f"{INDEX}, written by f.save(path))")
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_INDEX + 1)
    except OSError as exc:
        raise GraphFileError(f"{folder}: cannot read {INDEX}: {exc.strerror or exc}") from None
    if len(data) > MAX_INDEX:
        raise GraphFileError(f"{path}: more than {MAX_INDEX} bytes; an index is far smaller")
    try:
        ix = json.loads(data.decode("utf-8"), object_pairs_hook=_pairs,
                        parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise GraphFileError(f"{path}: not a JSON index (truncated or damaged?): "
                             f"{str(exc)[:200]}") from None
    return check_index(ix, str(path))


def check_key_files(ix: dict, folder: Path) -> dict:
    """Every key file of a checked index has the size and SHA-256 the index says:
    ``{file name: its bytes}`` (a load decodes them, not read again). Raises
    :class:`GraphFileError` naming the file. No CUDA call."""
    out = {}
    for rec in ix["keys"]:
        file = folder / rec["file"]
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise GraphFileError(f"{file}: cannot read it: {exc.strerror or exc}") from None
        if len(data) != rec["nbytes"]:
            raise GraphFileError(f"{file}: {len(data)} bytes, the index says {rec['nbytes']} "
                                 "(truncated or replaced)")
        if hashlib.sha256(data).hexdigest() != rec["sha256"]:
            raise GraphFileError(f"{file}: its SHA-256 differs from the index's (damaged or "
                                 "replaced)")
        out[rec["file"]] = data
    return out


def write_index(folder, ix: dict) -> None:
    """Write ``folder/index.json`` (checked first, so a writer bug never makes a file the
    reader refuses). No CUDA call."""
    check_index(ix, "index being written")
    (Path(folder) / INDEX).write_text(json.dumps(ix, indent=1, allow_nan=False) + "\n",
                                      encoding="utf-8")


# what must match the loading process --------------------------------------------------

def check_arch(ix: dict, arch: str, gpu: str, source: str) -> None:
    """Refuse an index made on another GPU architecture, naming both. No CUDA call."""
    if ix["arch"] != arch:
        raise GraphFileError(
            f"{source}: saved on {ix['arch']} ({ix['gpu']}); this GPU is {arch} ({gpu}). "
            "The libraries choose their kernels and workspaces per architecture: capture "
            "on this GPU (and save again) instead")


def version_differences(ix: dict, versions: dict) -> list[str]:
    """The frameworks whose version differs from the saving process's, as sentences
    (``"PyTorch 2.11.0 saved, 2.10.0 here"``); empty when none. No CUDA call."""
    names = {"torch": "PyTorch", "cupy": "CuPy"}
    out = []
    for fw, saved in ix["versions"].items():
        here = versions.get(fw)
        if saved is not None and saved != here:
            out.append(f"{names[fw]} {saved} saved, {here or 'none'} here")
    return out


def compare_bindings(saved: dict, here: dict, source: str) -> None:
    """Refuse bindings that differ from the saved ones: a name missing here, another
    shape, dtype or size, naming each (up to five). No CUDA call.

    ``saved`` is the index's ``bindings``; ``here`` the same descriptors of the loading
    process's model (:func:`.graphed_bind.describe`)."""
    missing = [n for n in saved if n not in here]
    differ = [n for n in saved if n in here and here[n] != saved[n]]
    if not missing and not differ:
        return
    lines = []
    for n in missing[:5]:
        lines.append(f"{n} is missing (saved {_what(saved[n])})")
    for n in differ[:5]:
        lines.append(f"{n} is {_what(here[n])}, saved {_what(saved[n])}")
    more = len(missing) + len(differ) - len(lines)
    raise GraphFileError(f"{source}: the model differs from the one saved: "
                         + "; ".join(lines) + (f"; and {more} more" if more > 0 else "")
                         + ". Build the model as the saving process did (same config)")


def _what(b: dict) -> str:
    return f"{tuple(b['shape'])} {b['dtype']}, {b['nbytes']} bytes"
