"""The graph file container: a fixed header, a section table, a JSON manifest and binary
sections (kernel images), sealed with one SHA-256.

Layout (integers little-endian)::

    offset  size     field
    0       8        magic b"\\x89PCGRAF\\n"
    8       2        major format version (2, or 3 with records of kernels saved by name;
                     1 is read too)
    10      2        minor format version (0)
    12      4        number of sections N (1 ... 65536)
    16      8        length of the whole file in bytes
    24      32       SHA-256 of bytes [0, 24) followed by bytes [56, end)
    56      24 * N   section table: tag (4 ASCII bytes), 4 zero bytes, offset u64, length u64
    ...              section bodies at their offsets: 8-byte aligned, in table order, zero padded

Section 0 is the manifest (tag ``MANI``, UTF-8 JSON, checked by :mod:`.file_schema`);
``CUBN`` sections hold loadable images (CUBIN or fatbin), ``PTX_`` sections PTX text;
``KREC``, ``KARG``, ``KDEP`` and ``KREL`` the kernel nodes as fixed records (format 2;
format 3 when some are of kernels saved by name: :mod:`.bulk_format`). A format-1 file (the
same container, no records) is read.

:func:`encode` writes a file from a manifest model (a dict) and sections with no GPU and
no CUDA call; :func:`decode` checks every byte before it trusts any: size bounds before
anything is allocated, magic, version, length, checksum, table, manifest. Every problem is
a :class:`~pycudagraph.errors.GraphFileError` naming it. Nothing from the file is ever
executed: the manifest is parsed by ``json`` and checked field by field.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import struct
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import GraphFileError

__all__ = ["MAGIC", "VERSION", "TAGS", "MAX_FILE_BYTES", "GraphFile", "encode", "decode",
           "read_file", "write_file", "reseal", "HEADER_SIZE", "ENTRY_SIZE", "gc_paused", "READS"]

MAGIC = b"\x89PCGRAF\n"
#: (major, minor) this pycudagraph writes (3.0 for a file holding records of kernels saved
#: by name: ``bulk_format.BY_NAME_VERSION``). A newer minor is read (new optional fields are
#: ignored); format 1 (no binary kernel records) is read; another major is refused.
VERSION = (2, 0)
READS = (1, 2, 3)
HEADER_SIZE = 56
ENTRY_SIZE = 24
MAX_SECTIONS = 1 << 16
MAX_FILE_BYTES = 1 << 34  # 16 GiB: refused before the file is read
MAX_MANIFEST_BYTES = 1 << 28
#: section tag -> what it holds
TAGS = {b"MANI": "manifest (JSON)", b"CUBN": "kernel image (CUBIN or fatbin)",
        b"PTX_": "PTX text", b"KREC": "kernel node records", b"KARG": "kernel arguments",
        b"KDEP": "kernel node dependencies", b"KREL": "kernel argument addresses"}

_HEAD = struct.Struct("<8sHHIQ32s")
_ENTRY = struct.Struct("<4sIQQ")
_SUM = slice(24, 56)


@dataclass(frozen=True)
class GraphFile:
    """A decoded graph file: its version, its manifest (checked), its sections, and each
    kernel node's arguments as bytes (``{node id: [bytes, ...]}``, before relocation)."""

    version: tuple
    manifest: dict
    sections: tuple  # (tag str, bytes) per section; section 0 is the manifest
    kernel_args: dict = field(default_factory=dict, compare=False, repr=False)
    #: the binary kernel records (format 2; :mod:`.bulk_format`) as arrays, or None
    bulk: tuple | None = field(default=None, compare=False, repr=False)

    def section(self, index: int, tag: str) -> bytes:
        """The bytes of section ``index``, which must carry ``tag``. No CUDA call."""
        got, data = self.sections[index]
        if got != tag:
            raise GraphFileError(f"section {index} is {got!r}, expected {tag!r}")
        return data


@contextmanager
def gc_paused():
    """Hold the garbage collector off while a file's many small objects are made (the
    manifest's values, a graph's nodes): it would otherwise walk every object of the
    process several times over, for nothing to collect. No CUDA call."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _digest(data) -> bytes:
    h = hashlib.sha256()
    mv = memoryview(data)
    h.update(mv[:24])
    h.update(mv[56:])
    return h.digest()


def _manifest_bytes(manifest: dict) -> bytes:
    try:
        return json.dumps(manifest, sort_keys=True, separators=(",", ":"),
                          allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise GraphFileError(f"the manifest cannot be written as JSON: {exc}") from None


def encode(manifest: dict, sections=(), version: tuple = VERSION) -> bytes:
    """The bytes of a graph file. No CUDA call.

    Parameters
    ----------
    manifest : dict
        The manifest model (JSON values only); written as section 0.
    sections : sequence of (tag, bytes)
        Sections 1, 2, ...; ``tag`` is ``"CUBN"`` or ``"PTX_"``.
    version : (int, int)
        The format version written in the header (tests write others).
    """
    parts = [(b"MANI", _manifest_bytes(manifest))]
    for tag, data in sections:
        raw = tag.encode("ascii") if isinstance(tag, str) else bytes(tag)
        if raw not in TAGS or raw == b"MANI":
            raise GraphFileError(f"unknown section tag {tag!r}; known: "
                                 f"{', '.join(t.decode() for t in TAGS if t != b'MANI')}")
        parts.append((raw, bytes(data)))
    if len(parts) > MAX_SECTIONS:
        raise GraphFileError(f"{len(parts)} sections: at most {MAX_SECTIONS}")
    pos = HEADER_SIZE + ENTRY_SIZE * len(parts)
    table, blobs = [], []
    for raw, data in parts:
        pad = -pos % 8
        pos += pad
        table.append(_ENTRY.pack(raw, 0, pos, len(data)))
        blobs.append(b"\0" * pad + data)
        pos += len(data)
    out = bytearray(_HEAD.pack(MAGIC, version[0], version[1], len(parts), 0, b"\0" * 32))
    out += b"".join(table) + b"".join(blobs)
    struct.pack_into("<Q", out, 16, len(out))
    out[_SUM] = _digest(out)
    return bytes(out)


def reseal(data) -> bytes:
    """``data`` with its checksum recomputed (for tests that edit a file on purpose, and
    for tools). No CUDA call."""
    out = bytearray(data)
    if len(out) < HEADER_SIZE:
        raise GraphFileError(f"{len(out)} bytes: shorter than the {HEADER_SIZE}-byte header")
    out[_SUM] = _digest(out)
    return bytes(out)


def _table(data, count: int) -> list:
    end_of_table = HEADER_SIZE + ENTRY_SIZE * count
    entries, prev_end = [], end_of_table
    for i in range(count):
        tag, zero, offset, length = _ENTRY.unpack_from(data, HEADER_SIZE + ENTRY_SIZE * i)
        name = tag.decode("ascii", "replace")
        if tag not in TAGS:
            raise GraphFileError(f"section {i} has the unknown tag {name!r}")
        if (tag == b"MANI") != (i == 0):
            raise GraphFileError(f"section {i} is {name!r}: the manifest is section 0 and "
                                 "only section 0")
        if zero:
            raise GraphFileError(f"section {i}: its reserved field is {zero}, not 0")
        if offset % 8 or offset < prev_end or offset - prev_end >= 8:
            raise GraphFileError(f"section {i} ({name}) starts at byte {offset}: expected the "
                                 f"8-byte boundary after byte {prev_end}")
        if length > len(data) - offset:
            raise GraphFileError(f"section {i} ({name}) runs to byte {offset + length}, past "
                                 f"the end of the file ({len(data)} bytes): truncated")
        if any(data[prev_end:offset]):
            raise GraphFileError(f"section {i} ({name}): the padding before it is not zero")
        entries.append((name, offset, length))
        prev_end = offset + length
    if prev_end != len(data):
        raise GraphFileError(f"{len(data) - prev_end} bytes after the last section")
    return entries


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise GraphFileError(f"the manifest repeats the key {k!r}")
        out[k] = v
    return out


def _no_constant(name):
    raise GraphFileError(f"the manifest holds {name}, which JSON does not allow")


_PAIRS = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
_PLAIN = json.JSONDecoder(parse_constant=_no_constant)  # a repeated key: the last one wins
#: What a member's ``:`` can follow: its key's closing quote, or JSON white space after it.
_KEY_ENDS = (b'":', b" :", b"\t:", b"\n:", b"\r:")
#: A ``:`` after a quote and any white space: a key's end, or inside a string, after an
#: escaped quote or at the string's start.
_KEY_END = re.compile(rb'"[ \t\n\r]*:')


def _member_bound(raw: bytes, members: int) -> bool:
    """Whether ``members`` (counted in the parsed objects) reaches the number of members
    the text ``raw`` can hold: then no key repeats, as a repeated key leaves fewer members
    in the parsed objects than in the text. Every member has one ``:``, after its key's
    closing quote and any white space; strings may hold more ``:``. Two upper bounds of the
    members, the second tighter and slower: the ``:`` right after a quote or a white space
    character (``"param:w"`` holds a ``:`` after neither; with no ``:`` inside strings, every
    ``:``); those after a quote and any white space (``"y, ::x"`` holds two after a space,
    none after a quote)."""
    return (members == sum(raw.count(end) for end in _KEY_ENDS)
            or members == len(_KEY_END.findall(raw)))


def _parse_manifest(raw: bytes, keys_checked: bool = True) -> dict:
    """The manifest as a value; with ``keys_checked``, a repeated key is refused while
    parsing (a Python call per object), else :func:`_read_manifest` finds it by counting."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise GraphFileError(f"the manifest is {len(raw)} bytes; at most {MAX_MANIFEST_BYTES}")
    try:
        text = raw.decode("utf-8")
        value = (_PAIRS if keys_checked else _PLAIN).decode(text)
    except UnicodeDecodeError as exc:
        raise GraphFileError(f"the manifest is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise GraphFileError("the manifest nests too deeply to be read") from None
    except ValueError as exc:
        if isinstance(exc, GraphFileError):
            raise
        raise GraphFileError(f"the manifest is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise GraphFileError(f"the manifest is a JSON {type(value).__name__}, not an object")
    return value


def _named_records(manifest: dict) -> bool:
    from .bulk_format import named_records  # (with the schema: not needed to write a file)
    return named_records(manifest)


def _read_manifest(raw: bytes, tags: list, lenient: bool, sections=None):
    """``(manifest, Checked)``: the manifest parsed and checked, every error as the key-
    checking parse and the check name it. The parse runs without a Python call per object;
    a repeated key then makes the members the check counts fall short of what the text can
    hold (:func:`_member_bound`), and only then, or on an error, the key-checking parse runs
    to name it."""
    from .schema import check_manifest
    if lenient:  # fields the check does not know are not counted: check keys while parsing
        manifest = _parse_manifest(raw)
        return manifest, check_manifest(manifest, tags, True, sections)
    try:
        manifest = _parse_manifest(raw, keys_checked=False)
        checked = check_manifest(manifest, tags, False, sections)
    except GraphFileError:
        _parse_manifest(raw)  # a repeated key is named before anything else
        raise
    if not _member_bound(raw, checked.members):
        _parse_manifest(raw)
    return manifest, checked


def decode(data, source: str = "graph file") -> GraphFile:
    """Check and decode the bytes of a graph file. No CUDA call.

    Raises
    ------
    GraphFileError
        Naming ``source`` and what is wrong: not a graph file, another major version,
        truncated (and where), corrupted (checksum), a bad section table, a manifest that
        is not JSON or breaks the schema (:func:`.file_schema.check_manifest`).
    """
    try:
        mv = memoryview(data)
        if len(mv) < 8 and MAGIC.startswith(bytes(mv)):
            raise GraphFileError(f"truncated: {len(mv)} bytes, shorter than the "
                                 f"{HEADER_SIZE}-byte header")
        if bytes(mv[:8]) != MAGIC:
            raise GraphFileError("not a pycudagraph graph file (its first bytes are "
                                 f"{bytes(mv[:8])!r}, not {MAGIC!r})")
        if len(mv) < HEADER_SIZE:
            raise GraphFileError(f"truncated: {len(mv)} bytes, shorter than the "
                                 f"{HEADER_SIZE}-byte header")
        _, major, minor, count, length, digest = _HEAD.unpack_from(mv, 0)
        if major not in READS:
            newer = "a newer" if major > READS[-1] else "an unknown"
            raise GraphFileError(f"format version {major}.{minor} is {newer} version; this "
                                 f"pycudagraph reads formats "
                                 f"{', '.join(f'{v}.x' for v in READS[:-1])} and {READS[-1]}.x")
        if length != len(mv):
            what = "truncated" if length > len(mv) else "has trailing bytes"
            raise GraphFileError(f"{what}: the header says {length} bytes, the file has {len(mv)}")
        if _digest(mv) != digest:
            raise GraphFileError("corrupted: the SHA-256 checksum does not match the contents")
        if not 1 <= count <= MAX_SECTIONS or HEADER_SIZE + ENTRY_SIZE * count > len(mv):
            raise GraphFileError(f"the header lists {count} sections, which do not fit the file")
        entries = _table(mv, count)
        sections = tuple((name, bytes(mv[off:off + n])) for name, off, n in entries)
        with gc_paused():
            lenient = minor > (VERSION[1] if major == VERSION[0] else 0)
            manifest, checked = _read_manifest(sections[0][1], [name for name, _ in sections],
                                               lenient, sections)
            if major < 2 and checked.bulk is not None:
                raise GraphFileError(f"format {major}.{minor} has no binary kernel records, "
                                     "but the manifest names some")
            if major < 3 and _named_records(manifest):
                raise GraphFileError(f"format {major}.{minor} has no binary records of kernels "
                                     "saved by name, but the manifest names some")
        return GraphFile((major, minor), manifest, sections, checked.kernel_args, checked.bulk)
    except GraphFileError as exc:
        raise GraphFileError(f"{source}: {exc}") from None


def read_file(path) -> GraphFile:
    """Read and check a graph file (:func:`decode`); its size is checked before it is read.
    No CUDA call."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise GraphFileError(f"{p}: {size} bytes; graph files are at most {MAX_FILE_BYTES}")
            data = f.read(size + 1)
    except OSError as exc:
        raise GraphFileError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    return decode(data, str(p))


def _umask() -> int:
    """The process's file mode creation mask, read without changing it (``os.umask`` sets
    it to read it, which a thread creating a file meanwhile would see): Linux's
    ``/proc/self/status``; else the usual 022."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def write_file(path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, flushed,
    then renamed over ``path`` (a failed save leaves no partial file). The file gets the
    mode a plain ``open(path, "wb")`` would give it (0666 less the umask), not the
    temporary file's 0600. No CUDA call."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent or "."))
    try:
        with os.fdopen(fd, "wb") as f:
            os.chmod(tmp, 0o666 & ~_umask())
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
