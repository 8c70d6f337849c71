"""Finding, in a new process, the library kernels a saved graphed callable's graphs run:
by name, with no code from the user or the file.

A kernel captured from PyTorch, cuBLAS or CuPy is saved by its (mangled) name; its code
lives in that library, loaded by this process too. :class:`KernelFinder` finds each one:

1. **Probe captures.** It captures the callable once on scratch inputs of one saved key
   (the first probe after one eager run, which makes the framework's handles and
   workspaces outside the probe's pool: ``probe``'s business) and reads the
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

**Variants.** A C++ kernel's mangled name (``_Z...``) says its template arguments; an
``extern "C"`` name does not always say which code runs: CuPy names a ufunc's kernel
``cupy_tanh`` for every dtype (the types are in its source), and the parameter sizes of
the float and double kernels are the same. When the saving process ran two functions of
one such name in different keys, the index gives each key the variant it used
(``variants``): that name is then found only by a probe of a key of the same variant
(never in a module seen, never from a key of another variant), so a key never runs the
other one's code. A key whose own graph runs two functions of one such name is not saved.
"""

from __future__ import annotations

from .._cuda import call, check, dr
from ..compile.kernel import kernel_for_function

__all__ = ["KernelFinder", "library_kernels", "library_functions", "mangled",
           "mark_variants"]


def _library_kernel(node):
    """``(mangled name, CUfunction)`` of a kernel node pycudagraph did not compile (a graph
    file saves it by name), else None (``cuGraphKernelNodeGetParams``, ``cuFuncGetName``)."""
    if getattr(node, "kernel", 0) is not None:  # not a kernel node, or one built here
        return None
    func = node.function
    if kernel_for_function(func) is not None:  # compiled here: saved with its image
        return None
    return node.mangled_name, func


def library_functions(graph) -> dict[str, set[int]]:
    """Name -> the functions of that name among the kernels of ``graph`` (its bodies and
    child graphs too) that a graph file saves by name (``cuGraphKernelNodeGetParams``,
    ``cuFuncGetName`` per kernel node)."""
    out: dict = {}
    for node, _, _ in graph.table.walk():
        found = _library_kernel(node)
        if found is not None:
            out.setdefault(found[0], set()).add(int(found[1]))
    return out


def library_kernels(graph) -> set[str]:
    """The names of :func:`library_functions` (same calls)."""
    return set(library_functions(graph))


def mangled(name: str) -> bool:
    """Whether ``name`` is a C++ mangled name (Itanium ABI: ``_Z...``), which names the
    template arguments of its kernel. No CUDA call."""
    return name.startswith("_Z")


def mark_variants(keys: list, functions: list) -> None:
    """Give each key record (of a save) the variant of every ``extern "C"`` kernel name
    that ran as more than one function across the keys: ``rec["variants"] = [[name, n],
    ...]``, ``n`` in order of first use; ``functions`` holds each key's ``{name:
    CUfunction}``. No CUDA call."""
    seen: dict = {}  # name -> its functions in order of first use
    for funcs in functions:
        for name, fn in funcs.items():
            if mangled(name):
                continue
            order = seen.setdefault(name, [])
            if fn not in order:
                order.append(fn)
    for rec, funcs in zip(keys, functions):
        rec["variants"] = [[n, seen[n].index(fn)] for n, fn in sorted(funcs.items())
                           if len(seen.get(n, ())) > 1]


class KernelFinder:
    """Functions by name for the keys of one saved callable (see the module docstring).

    Parameters
    ----------
    needs : list of set of str
        The kernel names each key's graph needs.
    probe : callable
        ``probe(i) -> Graph``: a capture of the callable on scratch inputs of key ``i``
        (thrown away after its kernels are read).
    variants : list of dict, optional
        Per key, ``{name: variant}`` for the names the saving process ran in more than one
        function (see the module docstring).

    Attributes
    ----------
    table : dict
        Name, or ``(name, variant)``, -> ``CUfunction`` (an int).
    probes : int
        Probe captures made (failed ones too).
    failures : dict
        Key index -> why its probe failed.
    """

    def __init__(self, needs: list, probe, variants=None):
        self.variants = [dict(v) for v in variants] if variants is not None else [{}] * len(needs)
        self.needs = [frozenset((n, v[n]) if n in v else n for n in need)
                      for need, v in zip(needs, self.variants)]
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
            self.learn(graph, self.variants[best])
            del graph
            missing -= self.table.keys()
            self.search(missing)
            missing -= self.table.keys()
        return self

    def learn(self, graph, variants=None) -> None:
        """Note the function of every library kernel of ``graph`` (a probe of a key whose
        ``variants`` are given: those names as ``(name, variant)``) and its module
        (``cuGraphKernelNodeGetParams``, ``cuFuncGetName``, ``cuFuncGetModule``: a function
        whose module the driver does not give is still noted)."""
        variants = variants or {}
        for node, _, _ in graph.table.walk():
            found = _library_kernel(node)
            if found is None:
                continue
            name, func = found
            self.table.setdefault((name, variants[name]) if name in variants else name, func)
            err, mod = dr.cuFuncGetModule(dr.CUfunction(func))
            if err == dr.CUresult.CUDA_SUCCESS and int(mod):  # (else: no module to search)
                self._modules.setdefault(int(mod), mod)

    def search(self, names) -> None:
        """Look each of ``names`` up in the modules seen (``cuModuleGetFunction``; a
        refusal is the answer "not there", not an error)."""
        for name in sorted(n for n in names if type(n) is str):  # never a variant
            raw = name.encode()
            for mod in self._modules.values():
                err, func = dr.cuModuleGetFunction(mod, raw)
                if err == dr.CUresult.CUDA_SUCCESS and int(func):
                    got = check.decode(call(dr.cuFuncGetName, func))
                    if got == name:
                        self.table[name] = int(func)
                        self.module_hits += 1
                        break

    def missing(self, need, variants=None) -> list[str]:
        """The names of ``need`` (of a key with ``variants``) not found, sorted. No CUDA call."""
        variants = variants or {}
        return sorted(n for n in need
                      if ((n, variants[n]) if n in variants else n) not in self.table)

    def resolve(self, name: str) -> int:
        """The function found for ``name`` (``pcg.load``'s ``resolve=``), for keys with no
        variants. No CUDA call.

        Raises
        ------
        KeyError
            For a name not found (the loader names it).
        """
        return self.table[name]

    def resolver(self, variants=None):
        """``resolve=`` for one key with ``variants`` (``{name: variant}``). No CUDA call."""
        if not variants:
            return self.resolve
        table = self.table
        return lambda name: table[(name, variants[name]) if name in variants else name]
