"""Finding, in a new process, the library kernels a saved graphed callable's graphs run:
by name, with no code from the user or the file.

A kernel captured from PyTorch, cuBLAS or CuPy is saved by its (mangled) name; its code
lives in that library, loaded by this process too. :class:`KernelFinder` finds each one:

1. **Probe captures.** It captures the callable once on scratch inputs of one saved key
   (after one eager run, which loads the framework's kernels and workspaces) and reads the
   function of every kernel node (``cuGraphKernelNodeGetParams``, ``cuFuncGetName``). The
   probe is thrown away: it is never the graph of a key being loaded. The key probed
   first is the one whose kernels cover most of those still missing.
2. **The modules those functions live in.** A library keeps its kernels for other sizes in
   the same modules (cuBLAS, PyTorch's files), so each name still missing is looked up in
   every module seen so far (``cuFuncGetModule``, ``cuModuleGetFunction``).
3. Repeat with the key that covers most of what is still missing, never two probes for
   keys with the same set of kernels, until every name is found or no key is left.

Every function is checked by the loader: its name (``cuFuncGetName``) and its parameter
sizes (``cuFuncGetParamInfo``) against the file's. A name that is never found is named by
:attr:`KernelFinder.missing`.
"""

from __future__ import annotations

from .._cuda import call, check, dr
from ..compile.kernel import kernel_for_function

__all__ = ["KernelFinder", "library_kernels"]


def _library_kernel(node):
    """``(mangled name, CUfunction)`` of a kernel node pycudagraph did not compile (a graph
    file saves it by name), else None (``cuGraphKernelNodeGetParams``, ``cuFuncGetName``)."""
    if getattr(node, "kernel", 0) is not None:  # not a kernel node, or one built here
        return None
    func = node.function
    if kernel_for_function(func) is not None:  # compiled here: saved with its image
        return None
    return node.mangled_name, func


def library_kernels(graph) -> set[str]:
    """The names of the kernels of ``graph`` (its bodies and child graphs too) that a graph
    file saves by name (``cuGraphKernelNodeGetParams``, ``cuFuncGetName`` per kernel node)."""
    out = set()
    for node, _, _ in graph.table.walk():
        found = _library_kernel(node)
        if found is not None:
            out.add(found[0])
    return out


class KernelFinder:
    """Functions by name for the keys of one saved callable (see the module docstring).

    Parameters
    ----------
    needs : list of set of str
        The kernel names each key's graph needs.
    probe : callable
        ``probe(i) -> Graph``: a capture of the callable on scratch inputs of key ``i``
        (thrown away after its kernels are read).

    Attributes
    ----------
    table : dict
        Name -> ``CUfunction`` (an int).
    probes : int
        Probe captures made (failed ones too).
    failures : dict
        Key index -> why its probe failed.
    """

    def __init__(self, needs: list, probe):
        self.needs = [frozenset(n) for n in needs]
        self.probe = probe
        self.table: dict = {}
        self.probes = 0
        self.failures: dict = {}
        self.module_hits = 0  # names found in a module seen before, with no probe
        self._modules: dict = {}  # CUmodule int -> CUmodule

    def run(self) -> "KernelFinder":
        """Probe and search until every name is found or no key is left to probe."""
        missing = set().union(*self.needs) if self.needs else set()
        probed_keys, probed_sets = set(), set()
        while missing:
            best, cover = None, 0
            for i, need in enumerate(self.needs):
                if i in probed_keys or need in probed_sets:
                    continue
                n = len(need & missing)
                if n > cover:
                    best, cover = i, n
            if best is None:
                break
            probed_keys.add(best)
            probed_sets.add(self.needs[best])
            self.probes += 1
            try:
                graph = self.probe(best)
            except Exception as exc:  # noqa: BLE001 - said in the report; others may do
                self.failures[best] = f"{type(exc).__name__}: {exc}"
                continue
            self.learn(graph)
            del graph
            missing -= self.table.keys()
            self.search(missing)
            missing -= self.table.keys()
        return self

    def learn(self, graph) -> None:
        """Note the function of every library kernel of ``graph`` and its module
        (``cuGraphKernelNodeGetParams``, ``cuFuncGetName``, ``cuFuncGetModule``: a function
        whose module the driver does not give is still noted)."""
        for node, _, _ in graph.table.walk():
            found = _library_kernel(node)
            if found is None:
                continue
            name, func = found
            self.table.setdefault(name, func)
            err, mod = dr.cuFuncGetModule(dr.CUfunction(func))
            if err == dr.CUresult.CUDA_SUCCESS and int(mod):  # (else: no module to search)
                self._modules.setdefault(int(mod), mod)

    def search(self, names) -> None:
        """Look each of ``names`` up in the modules seen (``cuModuleGetFunction``; a
        refusal is the answer "not there", not an error)."""
        for name in sorted(names):
            raw = name.encode()
            for mod in self._modules.values():
                err, func = dr.cuModuleGetFunction(mod, raw)
                if err == dr.CUresult.CUDA_SUCCESS and int(func):
                    got = check.decode(call(dr.cuFuncGetName, func))
                    if got == name:
                        self.table[name] = int(func)
                        self.module_hits += 1
                        break

    def missing(self, need) -> list[str]:
        """The names of ``need`` not found, sorted. No CUDA call."""
        return sorted(n for n in need if n not in self.table)

    def resolve(self, name: str) -> int:
        """The function found for ``name`` (``pcg.load``'s ``resolve=``). No CUDA call.

        Raises
        ------
        KeyError
            For a name not found (the loader names it).
        """
        return self.table[name]
