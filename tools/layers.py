"""Check the package's layering and print its wings.

The rule (docs/ARCHITECTURE.md): features import the core, never the reverse. The core is
``graph/`` with what it stands on (``nodes/``, ``compile/``, ``runtime/``, ``_cuda/`` and
the package's top modules); the feature wings are ``capture/``, ``files/``, ``profile/``,
``inspect/``, ``apply/``, ``debug/``, ``frameworks/`` and ``cli/``. A module of the core may
name a feature wing only inside a function (a one-line lazy delegation such as
``Graph.to_html``), never at import time; ``nodes/`` and below never name ``graph/``.

It also counts node-type switches outside ``nodes/``: ``isinstance`` with a node class,
and comparisons of a node's type (``.type``, ``node_type``, a node type name or
``NodeType.X``).

And it checks that no two C files of the compiled hot path (``_cuda/_native*.c``) call each
other: each file's calls into others go one way.

Usage: ``python tools/layers.py [--switches]``; exit status 1 when a rule is broken.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "pycudagraph"
CORE = ("graph",)
BELOW = ("nodes", "compile", "runtime", "_cuda")
WINGS = ("capture", "files", "profile", "inspect", "apply", "debug", "frameworks", "cli")
#: The node type names (NodeType values) a switch compares against.
TYPE_NAMES = {"kernel", "memcpy", "memset", "host", "child_graph", "empty", "event_wait",
              "event_record", "ext_semaphore_signal", "ext_semaphore_wait", "mem_alloc",
              "mem_free", "batch_mem_op", "conditional"}


def modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        yield rel, ast.parse(path.read_text(encoding="utf-8"), str(path))


def wing_of(rel: Path) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else "(top)"


def target(rel: Path, node: ast.ImportFrom) -> str:
    """The wing an import names ('' for outside the package)."""
    if node.level == 0:
        mod = node.module or ""
        if not mod.startswith("pycudagraph"):
            return ""
        parts = mod.split(".")[1:]
    else:
        base = list(rel.parts[:-1])[: len(rel.parts) - node.level]
        parts = base + (node.module.split(".") if node.module else [])
        if not node.module:
            parts = base + [a.name for a in node.names][:1]
    return parts[0] if parts else "(top)"


def import_faults() -> list[str]:
    faults = []
    for rel, tree in modules():
        here = wing_of(rel)
        if here not in CORE + BELOW:
            continue
        top_level = set()
        for stmt in tree.body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.ImportFrom) and not _inside_function(stmt, n):
                    top_level.add(id(n))
        for n in ast.walk(tree):
            if not isinstance(n, ast.ImportFrom):
                continue
            wing = target(rel, n)
            if wing in WINGS and (here in BELOW or id(n) in top_level):
                faults.append(f"{rel}:{n.lineno}: the core imports the feature wing {wing}/")
            if here in BELOW and wing in CORE:
                faults.append(f"{rel}:{n.lineno}: {here}/ imports the graph core")
    return faults


def _inside_function(stmt, node) -> bool:
    for f in ast.walk(stmt):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(x is node for x in ast.walk(f)):
                return True
    return False


def node_classes() -> set[str]:
    names = {"Node"}
    for rel, tree in modules():
        if wing_of(rel) == "nodes":
            for n in ast.walk(tree):
                if isinstance(n, ast.ClassDef) and n.name.endswith("Node"):
                    names.add(n.name)
    return names


def _is_type_value(n) -> bool:
    if isinstance(n, ast.Constant) and n.value in TYPE_NAMES:
        return True
    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "NodeType":
        return True
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_type_value(e) for e in n.elts)
    return False


def _is_type_read(n) -> bool:
    return (isinstance(n, ast.Attribute) and n.attr in ("type", "node_type")) or \
        (isinstance(n, ast.Name) and n.id == "node_type")


def switches() -> list[str]:
    """Every node-type switch outside nodes/, as 'file:line'."""
    classes = node_classes()
    found = []
    for rel, tree in modules():
        if wing_of(rel) == "nodes":
            continue
        for n in ast.walk(tree):
            hit = False
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "isinstance" \
                    and len(n.args) == 2:
                kinds = n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]]
                hit = any((isinstance(k, ast.Name) and k.id in classes) or
                          (isinstance(k, ast.Attribute) and k.attr in classes) for k in kinds)
            elif isinstance(n, ast.Compare) and any(
                    isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot))
                    for op in n.ops):
                sides = [n.left, *n.comparators]
                hit = any(_is_type_read(s) for s in sides) or any(_is_type_value(s) for s in sides)
            if hit:
                found.append(f"pycudagraph/{rel}:{n.lineno}")
    return found


def _c_code(text: str) -> str:
    """C text without its comments and string literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def c_calls(folder: Path | None = None) -> dict:
    """{C file: the other C files whose non-static functions it calls} for ``_cuda/_native*.c``."""
    folder = folder or ROOT / "_cuda"
    code = {p.name: _c_code(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("_native*.c"))}
    defined = {}
    for name, text in code.items():
        for m in re.finditer(r"^([A-Za-z_][\w \*]*?)\b(\w+)\s*\([^;{]*\)\s*\{", text, re.M):
            if "static" not in m.group(1).split():
                defined[m.group(2)] = name
    out: dict = {name: set() for name in code}
    for name, text in code.items():
        for fn, where in defined.items():
            if where != name and re.search(r"(?<![\w.>])" + fn + r"\s*\(", text):
                out[name].add(where)
    return out


def c_circles(folder: Path | None = None) -> list[str]:
    """Pairs of C files that call each other."""
    calls = c_calls(folder)
    return sorted({" <-> ".join(sorted((a, b))) for a in calls for b in calls[a]
                   if a in calls.get(b, ())})


def main(argv) -> int:
    faults = import_faults() + [f"C files call each other: {c}" for c in c_circles()]
    by_wing: dict = {}
    for rel, _ in modules():
        lines = sum(1 for _ in (ROOT / rel).open(encoding="utf-8"))
        by_wing.setdefault(wing_of(rel), []).append((str(rel), lines))
    for wing in sorted(by_wing):
        mods = by_wing[wing]
        print(f"{wing + '/':14} {len(mods):3} modules {sum(n for _, n in mods):6} lines")
        if "-v" in argv:
            for name, n in mods:
                print(f"    {name} {n}")
    found = switches()
    print(f"node-type switches outside nodes/: {len(found)}")
    if "--switches" in argv:
        for f in found:
            print("   ", f)
    for f in faults:
        print("layer fault:", f)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
