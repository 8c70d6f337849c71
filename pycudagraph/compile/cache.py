"""The on-disk cache of compiled programs: one checked file per compile.

The key is a sha256 of everything that changes NVRTC's output: the source, the program
name (quoted includes resolve from its folder), every option (the architecture
included), the NVRTC version, and the name and contents of every file the source may
include (:func:`.headers.include_files`), read at every compile: a header edited in
place keeping its size and mtime changes the key. A compile that includes a file through a
macro that cannot be resolved here is not cached. An entry is::

    MAGIC | sha256(body) | body = u32 header length | JSON header | CUBIN | PTX

(the JSON header holds the sizes and the lowered names of C++ name expressions)

and is used only when the magic, the checksum, the lengths and the CUBIN's ELF magic
all hold; a corrupt, truncated or empty file is ignored (and replaced by the next
compile). Folder: ``$PYCUDAGRAPH_CACHE_DIR`` (default ``~/.cache/pycudagraph``;
``off`` disables it).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .headers import UNKNOWN, include_files
from .ptx import is_elf

__all__ = ["CacheEntry", "cache_dir", "cache_key", "load", "store"]

MAGIC = b"PCGCUBIN2\n"
_LEN = struct.Struct("<I")


@dataclass(frozen=True)
class CacheEntry:
    """A compiled program: its CUBIN, the PTX NVRTC produced on the way, and the lowered
    (mangled) name of each C++ name expression asked for (``nvrtcGetLoweredName``)."""

    cubin: bytes
    ptx: str
    lowered: dict = field(default_factory=dict)


def cache_dir() -> Path | None:
    """The cache folder, or ``None`` when ``PYCUDAGRAPH_CACHE_DIR`` turns the cache off.

    A leading ``~`` and ``$VARIABLES`` in the variable are expanded, as a shell would.
    """
    value = os.environ.get("PYCUDAGRAPH_CACHE_DIR", "").strip()
    if value.lower() in ("off", "0", "none", "false"):
        return None
    if not value:
        return Path.home() / ".cache" / "pycudagraph"
    return Path(os.path.expandvars(os.path.expanduser(value)))


def cache_key(source: str, name: str, options: tuple, nvrtc_version: tuple[int, int],
              name_expressions: tuple = ()) -> str | None:
    """The hex key of one compile (see the module docstring for what goes in; C++ name
    expressions too, as they instantiate templates), or ``None`` when the files it reads
    cannot all be known (``#include`` of a macro that does not name a file here): such a
    compile is not cached, so no stale CUBIN is served."""
    h = hashlib.sha256()
    parts = [MAGIC.decode(), source, name, "\0".join(options),
             f"nvrtc{nvrtc_version[0]}.{nvrtc_version[1]}"]
    if name_expressions:
        parts.append("names\0" + "\0".join(name_expressions))
    digests: dict[str, str] = {}  # of the bytes include_files read: the contents, not the mtime
    for inc, path in include_files(source, name, options, digests):
        if path is UNKNOWN:
            return None
        digest = digests.get(path, "unreadable") if path else "builtin"
        parts.append(f"{inc}\0{path}\0{digest}")
    for part in parts:
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()


def _decode(data: bytes) -> CacheEntry | None:
    head = len(MAGIC) + 32
    if len(data) < head + _LEN.size or not data.startswith(MAGIC):
        return None
    body = data[head:]
    if hashlib.sha256(body).digest() != data[len(MAGIC): head]:
        return None
    (hlen,) = _LEN.unpack_from(body)
    try:
        meta = json.loads(body[_LEN.size: _LEN.size + hlen])
        start = _LEN.size + hlen
        cubin = body[start: start + meta["cubin"]]
        ptx = body[start + meta["cubin"]: start + meta["cubin"] + meta["ptx"]]
    except (ValueError, KeyError, TypeError):
        return None
    lowered = meta.get("lowered", {})
    if (len(cubin) != meta["cubin"] or len(ptx) != meta["ptx"] or not is_elf(cubin)
            or not isinstance(lowered, dict)):
        return None
    return CacheEntry(bytes(cubin), ptx.decode(errors="replace"), lowered)


def load(path: Path) -> CacheEntry | None:
    """The entry at ``path`` if it exists and checks out, else ``None``."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return _decode(data)


def store(path: Path, entry: CacheEntry) -> None:
    """Write an entry atomically (temporary file, then rename); errors only cost speed."""
    ptx = entry.ptx.encode()
    meta = json.dumps({"cubin": len(entry.cubin), "ptx": len(ptx),
                       "lowered": entry.lowered}).encode()
    body = _LEN.pack(len(meta)) + meta + entry.cubin + ptx
    data = MAGIC + hashlib.sha256(body).digest() + body
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache folder only costs the next compile
