"""Headers a compile depends on, and where the CUDA headers of a pip install live.

NVRTC has no dependency output (no ``-M``/``-MD`` option in NVRTC 12.x or 13.x), so
:func:`include_files` follows ``#include`` lines the way NVRTC resolves them: a quoted
name from the including file's folder (the program name's folder for the source),
then every ``-I``/``--include-path`` folder in order; an angle-bracket name from the
include folders only. Names found nowhere are NVRTC built-ins or absent (a compile
error then says so). Every ``#include`` line counts, whatever ``#if`` it sits in: a
header that might be read is part of the cache key.

:func:`cuda_include_dir` finds ``cuda_fp16.h`` / ``cuda_bf16.h``: pip's
``nvidia-cuda-runtime`` (CUDA 13: ``nvidia/cu13/include``) or
``nvidia-cuda-runtime-cu12`` (``nvidia/cuda_runtime/include``), else what
``cuda.pathfinder`` locates, when its CUDA major matches NVRTC's.
"""

from __future__ import annotations

import hashlib
import os
import re
import site
import sys
from pathlib import Path

__all__ = ["include_dirs", "include_files", "cuda_include_dir", "file_digest", "UNKNOWN"]

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_COMPUTED = re.compile(r"^[ \t]*#[ \t]*include[ \t]+([A-Za-z_]\w*)", re.M)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]+)$", re.M)
_HEADER_NAME = re.compile(r'([<"])([^>"\n]+)[>"]')
_MACRO_NAME = re.compile(r"[A-Za-z_]\w*")
#: The path of an ``#include MACRO`` whose file cannot be told without the preprocessor.
UNKNOWN = "\0unresolved"


def file_digest(path: str) -> str:
    """sha256 of a file's bytes, read now: never remembered by size and mtime, which an
    edit in place (or a restored mtime) can keep."""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def include_dirs(options) -> tuple[list[str], list[str]]:
    """The ``-I`` folders and the ``--pre-include`` files named by NVRTC options."""
    dirs, pre = [], []
    opts = list(options)
    for i, opt in enumerate(opts):
        nxt = opts[i + 1] if i + 1 < len(opts) else ""
        for flag, out in (("--include-path", dirs), ("-I", dirs), ("--pre-include", pre),
                          ("-include", pre)):
            if opt == flag:
                out.append(nxt)
            elif opt.startswith(flag + "="):
                out.append(opt[len(flag) + 1:])
            elif flag == "-I" and opt.startswith("-I") and len(opt) > 2:
                out.append(opt[2:])
            else:
                continue
            break
    return dirs, pre


def _find(name: str, quoted: bool, here: str, dirs: list[str]) -> str | None:
    if os.path.isabs(name):
        return name if os.path.isfile(name) else None
    for folder in ([here] if quoted else []) + dirs:
        cand = os.path.join(folder, name)
        if os.path.isfile(cand):
            return os.path.normpath(cand)
    return None


def _defines(options) -> dict[str, list[str]]:
    """``-D NAME=value`` / ``--define-macro=NAME=value`` options, by name."""
    out: dict[str, list[str]] = {}
    opts = list(options)
    for i, opt in enumerate(opts):
        for flag in ("--define-macro", "-D"):
            if opt == flag and i + 1 < len(opts):
                text = opts[i + 1]
            elif opt.startswith(flag + "=") and flag == "--define-macro":
                text = opt[len(flag) + 1:]
            elif flag == "-D" and opt.startswith("-D") and len(opt) > 2:
                text = opt[2:]
            else:
                continue
            key, _, value = text.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
            break
    return out


def _expand(macro: str, defines: dict[str, list[str]], depth: int = 0
            ) -> list[tuple[bool, str]] | None:
    """Every (quoted, name) a computed ``#include MACRO`` may name (each ``#define`` of it
    counts, whatever ``#if`` it sits in), or None when one of them cannot be told."""
    values = defines.get(macro)
    if not values or depth > 8:
        return None
    out = []
    for value in values:
        m = _HEADER_NAME.fullmatch(value)
        if m:
            out.append((m.group(1) == '"', m.group(2).strip()))
            continue
        inner = _expand(value, defines, depth + 1) if _MACRO_NAME.fullmatch(value) else None
        if inner is None:
            return None
        out += inner
    return out


def include_files(source: str, name: str, options, digests: dict | None = None
                  ) -> list[tuple[str, str]]:
    """Every file the source may include, as (how it was named, resolved path or "").

    Follows includes into the files found, once each. Resolution is relative to the
    current folder, as NVRTC's is. ``#include MACRO`` is followed where the macro is
    defined as a file name (``#define MACRO "file.h"`` in a file read, or a ``-D``
    option); otherwise its entry's path is :data:`UNKNOWN`. ``digests``, when given,
    gets path -> sha256 of the bytes read from each file found (what the cache key
    hashes: the contents, whatever the file's size and mtime say); a file that cannot
    be read is left out of it. Bytes that are not UTF-8 are read as NVRTC reads them:
    they take no part in an ``#include`` line.
    """
    dirs, pre = include_dirs(options)
    here = os.path.dirname(name) or "."
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    defines = _defines(options)
    computed: list[tuple[str, str]] = []  # (macro, folder) waiting for its definition
    todo = [(text, here) for text in [source]]
    for p in pre:
        todo.append((f'#include "{p}"\n', here))
    while todo or computed:
        if not todo:  # every file read: resolve the computed includes with what is defined
            waiting, computed = computed, []
            for macro, folder in waiting:
                named = _expand(macro, defines)
                if named is None:
                    found.append((macro, UNKNOWN))
                else:
                    todo.extend((_include_line(*n), folder) for n in named)
            continue
        text, folder = todo.pop()
        for m in _DEFINE.finditer(text):
            defines.setdefault(m.group(1), []).append(m.group(2).strip())
        computed.extend((m.group(1), folder) for m in _COMPUTED.finditer(text))
        for m in _INCLUDE.finditer(text):
            quoted, inc = m.group(1) == '"', m.group(2).strip()
            path = _find(inc, quoted, folder, dirs)
            key = path or f"<{inc}>"
            if key in seen:
                continue
            seen.add(key)
            found.append((inc, path or ""))
            if path:
                try:
                    data = Path(path).read_bytes()
                except OSError:
                    continue
                if digests is not None:
                    digests[path] = hashlib.sha256(data).hexdigest()
                todo.append((data.decode(errors="replace"), os.path.dirname(path)))
    return found


def _include_line(quoted: bool, name: str) -> str:
    return f'#include "{name}"\n' if quoted else f"#include <{name}>\n"


def _site_dirs() -> list[str]:
    dirs = [p for p in sys.path if p and os.path.isdir(p)]
    try:
        dirs += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # some embedded interpreters
        pass
    return list(dict.fromkeys(dirs))


def _cudart_major(folder: str) -> int | None:
    try:
        text = Path(folder, "cuda_runtime_api.h").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", text)
    return int(m.group(1)) // 1000 if m else None


_header_dirs: dict[int, str | None] = {}


def cuda_include_dir(nvrtc_major: int) -> str | None:
    """The folder holding ``cuda_fp16.h`` for this NVRTC major, or ``None``."""
    if nvrtc_major in _header_dirs:
        return _header_dirs[nvrtc_major]
    # CUDA 13 wheels put headers in nvidia/cu13/include, CUDA 12 ones per component
    sub = os.path.join("nvidia", f"cu{nvrtc_major}" if nvrtc_major >= 13 else "cuda_runtime", "include")
    found = None
    for base in _site_dirs():
        cand = os.path.join(base, sub)
        if os.path.isfile(os.path.join(cand, "cuda_fp16.h")):
            found = cand
            break
    if found is None:
        try:
            from cuda.pathfinder import find_nvidia_header_directory
            cand = find_nvidia_header_directory("cudart")
        except Exception:  # an older cuda.pathfinder, or none: no automatic path
            cand = None
        if cand and _cudart_major(cand) == nvrtc_major and os.path.isfile(os.path.join(cand, "cuda_fp16.h")):
            found = cand
    _header_dirs[nvrtc_major] = found
    return found
