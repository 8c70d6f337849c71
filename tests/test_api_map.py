"""docs/API_MAP.md against the installed cuda-bindings and the package (CPU only).

The map lists every graph, capture and user-object function of
``cuda.bindings.runtime``; these tests keep it honest: one row per function, no row
for a function that does not exist, and every ``wrapped`` row names a pycudagraph
method that exists and whose source names the call (or its driver twin ``cuXxx``).
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import pycudagraph
from pycudagraph import _cuda
from pycudagraph._cuda import rt

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "API_MAP.md"

PREFIXES = ("cudaGraph", "cudaGraphExec", "cudaStreamBeginCapture", "cudaStreamEndCapture",
            "cudaStreamGetCaptureInfo", "cudaStreamIsCapturing",
            "cudaStreamUpdateCaptureDependencies", "cudaThreadExchangeStreamCaptureMode",
            "cudaUserObject")

_ROW = re.compile(r"^\|\s*`(?P<fn>[A-Za-z0-9_]+)`\s*\|(?P<methods>[^|]*)\|(?P<status>[^|]*)\|\s*$")
_TICKED = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?(\(\))?$")
_DRIVER_TWIN = re.compile(r"^cu[A-Z]")


def _graph_functions() -> set[str]:
    names = set()
    for name in dir(rt):
        obj = getattr(rt, name)
        if (name.startswith(PREFIXES) and not name.startswith("cudaGraphics")
                and callable(obj) and not isinstance(obj, type)):
            names.add(name)
    return names


def _rows() -> list[dict]:
    rows = []
    for line in DOC.read_text().splitlines():
        m = _ROW.match(line)
        if m is None:
            continue
        methods = [t for t in _TICKED.findall(m["methods"])
                   if _NAME.match(t) and not _DRIVER_TWIN.match(t)]
        rows.append({"fn": m["fn"], "methods": methods, "status": m["status"].strip(),
                     "line": line})
    return rows


def _recorded_version() -> tuple[int, int]:
    m = re.search(r"Generated from cuda-bindings (\d+)\.(\d+)", DOC.read_text())
    assert m, "docs/API_MAP.md does not say which cuda-bindings it was generated from"
    return int(m[1]), int(m[2])


def _require_same_major() -> None:
    rec = _recorded_version()
    have = _cuda.BINDINGS_VERSION
    if have[0] != rec[0]:
        pytest.skip(f"docs/API_MAP.md was generated from cuda-bindings {rec[0]}.x; the "
                    f"installed {have[0]}.{have[1]} has a different set of graph functions")


def test_map_exists_and_has_rows():
    rows = _rows()
    assert rows, "docs/API_MAP.md has no table rows"
    for row in rows:
        status = row["status"]
        assert status == "wrapped" or re.match(r"^not yet: \S", status), row["line"]
        if status == "wrapped":
            assert row["methods"], f"wrapped row names no pycudagraph method: {row['line']}"
        else:
            assert not row["methods"], f"a 'not yet' row names a method: {row['line']}"


def test_counts_in_header_match_table():
    rows = _rows()
    wrapped = sum(r["status"] == "wrapped" for r in rows)
    text = DOC.read_text()
    assert f"Functions: {len(rows)}; wrapped: {wrapped}; not yet: {len(rows) - wrapped}." in text


def test_every_function_has_exactly_one_row():
    _require_same_major()
    counts: dict[str, int] = {}
    for row in _rows():
        counts[row["fn"]] = counts.get(row["fn"], 0) + 1
    missing = sorted(_graph_functions() - set(counts))
    doubled = sorted(fn for fn, n in counts.items() if n > 1)
    assert not missing, ("functions of cuda.bindings.runtime with no row in "
                         f"docs/API_MAP.md (run tools/gen_api_map.py): {missing}")
    assert not doubled, f"functions with more than one row: {doubled}"


def test_no_row_for_a_function_that_does_not_exist():
    _require_same_major()
    if _cuda.BINDINGS_VERSION < _recorded_version():
        pytest.skip("the installed cuda-bindings is older than the one the map was "
                    "generated from and may lack newer functions")
    unknown = sorted({r["fn"] for r in _rows()} - _graph_functions())
    assert not unknown, f"rows naming functions not in cuda.bindings.runtime: {unknown}"


def _resolve(spec: str):
    """(object, the class it belongs to or None) for ``Class.member``, ``Class()`` or ``name``.

    ``Class()`` is the constructor (``Class.__init__``); a bare class name stands for the
    class itself (``capture``, a context manager whose calls are made in its methods).
    """
    owner_name, _, member = spec.partition(".")
    if owner_name.endswith("()"):
        owner_name, member = owner_name[:-2], "__init__"
    owner = getattr(pycudagraph, owner_name, None)
    if owner is None:
        return None, None
    if not member:
        return owner, owner if inspect.isclass(owner) else None
    return inspect.getattr_static(owner, member, None), owner


def _source(obj) -> str:
    if isinstance(obj, property):
        obj = obj.fget
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    try:
        return inspect.getsource(obj)
    except (TypeError, OSError):
        # A cuda.bindings function kept as a class attribute (``_set = staticmethod(
        # rt.cudaGraphEventWaitNodeSetEvent)``): its name is what it calls.
        return getattr(obj, "__name__", "")


_SELF_ATTR = re.compile(r"\b(?:self|cls|type\(self\))\.(\w+)")


def _sources(obj, owner, depth: int = 3) -> list[str]:
    """The source of ``obj`` and of the members of ``owner`` it uses through ``self.``,
    followed ``depth`` levels deep (calls made in a private helper of the same class)."""
    out, todo, seen = [], [(obj, depth)], set()
    while todo:
        item, left = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        src = _source(item)
        out.append(src)
        if owner is None or left == 0:
            continue
        for name in set(_SELF_ATTR.findall(src)):
            attr = inspect.getattr_static(owner, name, None)
            if attr is not None and not isinstance(attr, (int, str, tuple, dict)):
                todo.append((attr, left - 1))
    return out


def test_wrapped_methods_exist_and_make_the_call():
    problems = []
    for row in _rows():
        if row["status"] != "wrapped":
            continue
        fn = row["fn"]
        names = re.compile(rf"\b(?:{fn}|cu{fn[4:]})\b")
        for spec in row["methods"]:
            obj, owner = _resolve(spec)
            if obj is None:
                problems.append(f"{fn}: {spec} does not exist in pycudagraph")
                continue
            if not any(names.search(src) for src in _sources(obj, owner)):
                problems.append(f"{fn}: {spec} (and the members of its class it uses) "
                                f"never mention {fn} or cu{fn[4:]}")
    assert not problems, "\n".join(problems)


def test_generator_matches_the_document():
    """tools/gen_api_map.py would write exactly docs/API_MAP.md (same bindings only)."""
    spec = importlib.util.spec_from_file_location("gen_api_map", ROOT / "tools" / "gen_api_map.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    version = gen.bindings_version()
    if f"Generated from cuda-bindings {version} " not in DOC.read_text():
        pytest.skip(f"docs/API_MAP.md was generated from another cuda-bindings than {version}")
    text, missing = gen.render(gen.graph_functions(), version)
    assert not missing, f"functions with no entry in tools/gen_api_map.py MAP: {missing}"
    assert text == DOC.read_text(), "docs/API_MAP.md is stale: run python tools/gen_api_map.py"
