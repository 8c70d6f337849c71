"""docs/API_MAP.md against the installed cuda-bindings and the package (CPU only).

The map lists every graph, capture, graph-memory and user-object function of
``cuda.bindings.runtime`` 12.x and 13.x (the union, each row saying which majors have
it); these tests keep it honest on whichever 12.x or 13.x is installed: an installed
function with no row, or whose row says its major lacks it, FAILS (never skips); no row
for a function the installed major should have but lacks; and every ``wrapped`` row
names a pycudagraph method that exists and whose source (or the ``_cuda.versions`` shim
it calls) names the call (or its driver twin ``cuXxx``).
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

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "API_MAP.md"

PREFIXES = ("cudaGraph", "cudaGraphExec", "cudaStreamBeginCapture", "cudaStreamEndCapture",
            "cudaStreamGetCaptureInfo", "cudaStreamIsCapturing",
            "cudaStreamUpdateCaptureDependencies", "cudaThreadExchangeStreamCaptureMode",
            "cudaUserObject", "cudaStreamBeginRecapture", "cudaDeviceGraphMem",
            "cudaDeviceGetGraphMem", "cudaDeviceSetGraphMem")

_ROW = re.compile(r"^\|\s*`(?P<fn>[A-Za-z0-9_]+)`\s*\|(?P<methods>[^|]*)\|"
                  r"(?P<majors>[^|]*)\|(?P<status>[^|]*)\|\s*$")
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
        majors = tuple(int(x) for x in re.findall(r"(\d+)\.x", m["majors"]))
        rows.append({"fn": m["fn"], "methods": methods, "status": m["status"].strip(),
                     "majors": majors, "line": line})
    return rows


def _gen():
    spec = importlib.util.spec_from_file_location("gen_api_map", ROOT / "tools" / "gen_api_map.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


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
    n12 = sum(12 in r["majors"] for r in rows)
    n13 = sum(13 in r["majors"] for r in rows)
    text = DOC.read_text()
    assert (f"Functions: {len(rows)} (12.x: {n12}, 13.x: {n13}); wrapped: {wrapped}; "
            f"not yet: {len(rows) - wrapped}.") in text


def test_every_row_names_its_majors():
    for row in _rows():
        assert row["majors"] and set(row["majors"]) <= {12, 13}, row["line"]


def test_every_installed_function_has_a_row_for_its_major():
    """Fails (never skips) on any 12.x or 13.x: the map covers the union of both."""
    major = _cuda.BINDINGS_MAJOR
    assert major in (12, 13), f"cuda-bindings {major}.x: the map covers 12.x and 13.x"
    counts: dict[str, int] = {}
    majors = {}
    for row in _rows():
        counts[row["fn"]] = counts.get(row["fn"], 0) + 1
        majors[row["fn"]] = row["majors"]
    missing = sorted(_graph_functions() - set(counts))
    doubled = sorted(fn for fn, n in counts.items() if n > 1)
    wrong = sorted(fn for fn in _graph_functions() & set(majors) if major not in majors[fn])
    assert not missing, ("functions of the installed cuda.bindings.runtime with no row in "
                         f"docs/API_MAP.md (add them to tools/gen_api_map.py MAP): {missing}")
    assert not doubled, f"functions with more than one row: {doubled}"
    assert not wrong, (f"rows saying cuda-bindings {major}.x lacks a function it has "
                       f"(fix ONLY_12/ONLY_13 in tools/gen_api_map.py): {wrong}")


def test_no_row_for_a_function_the_installed_major_lacks():
    gen = _gen()
    major = _cuda.BINDINGS_MAJOR
    recorded = tuple(int(x) for x in gen.RECORDED[major].split(".")[:2])
    if _cuda.BINDINGS_VERSION < recorded:
        pytest.skip(f"the installed cuda-bindings is older than {gen.RECORDED[major]}, which "
                    "the availability was recorded from, and may lack newer functions")
    unknown = sorted(r["fn"] for r in _rows() if major in r["majors"]
                     and r["fn"] not in _graph_functions())
    assert not unknown, (f"rows saying cuda-bindings {major}.x has functions it lacks: "
                         f"{unknown}")


def test_the_check_catches_an_unlisted_function():
    """The generator's check reports a function the map does not list, and one whose
    row names the other major only (so the tests above can fail)."""
    gen = _gen()
    problems = gen.installed_problems(["cudaGraphNewThing", "cudaGraphGetId"], 12)
    assert any("cudaGraphNewThing" in p and "no row" in p for p in problems)
    assert any("cudaGraphGetId" in p and "only 13.x" in p for p in problems)
    assert gen.installed_problems(gen.graph_functions(), _cuda.BINDINGS_MAJOR) == []


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
        # rt.cudaGraphEventWaitNodeSetEvent)``): its name is what it calls; a method made in
        # C (GraphExec.launch with the compiled hot path): its docstring names the call.
        return f"{getattr(obj, '__name__', '')}\n{getattr(obj, '__doc__', None) or ''}"


_SELF_ATTR = re.compile(r"\b(?:self|cls|type\(self\))\.(\w+)")
_SHIM = re.compile(r"\bversions\.(\w+)\(")


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
        for name in set(_SHIM.findall(src)):  # the 12.x/13.x shim it calls
            shim = getattr(_cuda.versions, name, None)
            if shim is not None:
                out.append(_source(shim))
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
    """tools/gen_api_map.py would write exactly docs/API_MAP.md (whatever is installed)."""
    gen = _gen()
    assert gen.render() == DOC.read_text(), ("docs/API_MAP.md is stale: run "
                                             "python tools/gen_api_map.py")


_DRIVER_ROW = re.compile(r"^- `(?P<fn>cu[A-Za-z0-9_]+)`: `(?P<spec>[^`]+)`$")


def test_driver_only_calls_are_made_where_the_map_says():
    from cuda.bindings import driver as dr
    rows = [m for line in DOC.read_text().splitlines() if (m := _DRIVER_ROW.match(line))]
    assert rows, "docs/API_MAP.md lists no driver-only graph calls"
    problems = []
    for m in rows:
        fn, spec = m["fn"], m["spec"]
        if not hasattr(dr, fn):
            problems.append(f"{fn} is not in cuda.bindings.driver")
        obj, owner = _resolve(spec)
        if obj is None:
            problems.append(f"{fn}: {spec} does not exist in pycudagraph")
        elif not any(re.search(rf"\b{fn}\b", src) for src in _sources(obj, owner)):
            problems.append(f"{fn}: {spec} never mentions it")
    assert not problems, "\n".join(problems)
