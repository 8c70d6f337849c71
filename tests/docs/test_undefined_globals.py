"""Every global name a function of the package or of the tests reads exists (CPU).

GPU tests never run where there is no GPU, so a misspelt or left-over name in one would
wait for a GPU machine to show, as a ``NameError`` after the work it checked had passed.
Each module is imported and every ``LOAD_GLOBAL`` of its functions (nested ones too) is
looked up in the module's namespace, the builtins and the names some function assigns
with ``global``. Scripts a test runs in a child process (strings) are not covered.
"""

from __future__ import annotations

import builtins
import dis
import importlib
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pycudagraph", "tests")


def _modules() -> list[str]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def undefined_globals(module_name: str) -> list[str]:
    """``"path:line: name (in function)"`` for each global read that names nothing."""
    module = importlib.import_module(module_name)
    path = Path(module.__file__)
    top = compile(path.read_text(encoding="utf-8"), str(path), "exec")
    assigned, reads = set(), []
    for code in _code_objects(top):
        for ins in dis.get_instructions(code):
            if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                assigned.add(ins.argval)
            elif ins.opname == "LOAD_GLOBAL" and code is not top:
                reads.append((ins.argval, code.co_name, ins.positions.lineno))
    known = set(vars(module)) | set(dir(builtins)) | assigned
    return [f"{path.relative_to(ROOT)}:{line}: {name} (in {where})"
            for name, where, line in reads if name not in known]


def test_the_check_finds_a_misspelt_name(tmp_path, monkeypatch):
    (tmp_path / "misspelt_module.py").write_text(
        "import shutil\n\n\ndef f(folder):\n    shutil.rmtree(foldr)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert undefined_globals("misspelt_module") == ["misspelt_module.py:5: foldr (in f)"]


def test_every_global_a_function_reads_exists():
    found = [line for name in _modules() for line in undefined_globals(name)]
    assert not found, "names that name nothing:\n" + "\n".join(found)
