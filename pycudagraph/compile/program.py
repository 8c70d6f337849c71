"""Device code in: :class:`Program` (CUDA C++ for NVRTC) -> :class:`Module` (an image) -> kernels.

``Program.compile()`` asks NVRTC for a CUBIN (machine code for one architecture, not
PTX: PTX from a newer NVRTC does not load on an older driver) and keeps the PTX NVRTC
made on the way: its ``.entry`` lines are the compiled truth about which kernels exist
and what their parameters are (:mod:`.ptx`, :mod:`.reconcile`). Both are cached on
disk (:mod:`.cache`). The folder of the pip-installed CUDA headers is added as the last
``-I`` so ``#include <cuda_fp16.h>`` works (:mod:`.headers`). A :class:`Module` also
comes from an image made elsewhere (``.cubin``, ``.ptx``, ``.fatbin``: :mod:`.images`);
it is loaded onto the device at first use with ``cudaLibraryLoadData`` (:mod:`.library`);
kernels come from ``cudaLibraryGetKernel``, by ``extern "C"`` name, C++ name expression
(``"ns::axpy<float>"``, :mod:`.cxx_names`) or mangled name.
"""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

from ..errors import ArgumentError, CompileError
from .cxx_names import bare_name, cxx_params, is_cxx_name, mangled_bare_name
from .device_api import with_device_api
from .headers import cuda_include_dir
from .images import image_arch, image_entries, image_kind, ptx_image, read_image
from .kernel import Kernel
from .library import Library
from .nvrtc_compile import cached_compile, check_arch, device_arch, kernels_dir, nvrtc_version
from .ptx import CompiledParam, ptx_entries
from .reconcile import SignatureWarning, from_unreadable, reconcile
from .signature import KernelSignature, kernel_candidates, parse_params, template_kernels
from .source_text import program_inputs, read_source
from ..runtime.values import c_str_arg, path_arg, seq_arg, short_repr, str_arg

__all__ = ["Program", "Module", "device_arch", "kernels_dir", "nvrtc_version"]

_IMAGE_SUFFIXES = (".cubin", ".ptx", ".fatbin", ".fatbinary")


class Program:
    """CUDA C++ source to be compiled by NVRTC.

    Parameters
    ----------
    source : str
        The CUDA C++ source. Kernels are found by ``extern "C"`` name, or by C++ name
        (``"ns::axpy<float>"``) through NVRTC name expressions.
    name : str
        File name NVRTC reports in its log; quoted includes resolve from its folder.
    options : sequence of str
        NVRTC options, e.g. ``("-std=c++17", "--use_fast_math", "-Iinclude")``. The
        architecture is added by :meth:`compile`, and the folder of the pip-installed
        CUDA headers (``cuda_fp16.h``, ``cuda_bf16.h``) as the last ``-I``.
    name_expressions : sequence of str
        C++ names of kernels to instantiate and look up (``"axpy<float>"``,
        ``"ns::scale"``); :meth:`Module.get_kernel` also takes ones not listed here.

    Notes
    -----
    No CUDA call until :meth:`compile` (``nvrtcCompileProgram``).
    """

    def __init__(self, source: str, name: str = "kernel.cu", options=(), name_expressions=()):
        options, name_expressions = program_inputs(source, name, options, name_expressions)
        self.source = source
        self.name = name
        self.options = options
        self.name_expressions = tuple(dict.fromkeys(name_expressions))

    def with_name_expressions(self, names) -> "Program":
        """This program with more C++ name expressions to instantiate and look up. No CUDA call."""
        names = (names,) if isinstance(names, str) else seq_arg(names, "with_name_expressions")
        return Program(self.source, self.name, self.options, self.name_expressions + names)

    def compile(self, arch: str | None = None) -> "Module":
        """Compile to a CUBIN and return the :class:`Module`.

        Parameters
        ----------
        arch : str, optional
            ``"sm_90"`` etc. Defaults to the current device's architecture; an explicit
            value works with no GPU (the module loads on a device at first use).

        Notes
        -----
        Calls ``nvrtcCreateProgram``, ``nvrtcAddNameExpression`` (per name expression),
        ``nvrtcCompileProgram``, ``nvrtcGetCUBIN``, ``nvrtcGetPTX``,
        ``nvrtcGetLoweredName`` and ``nvrtcDestroyProgram`` (nothing on a cache hit);
        :class:`CompileError` carries the NVRTC log.
        """
        arch = check_arch(arch)
        version = nvrtc_version()
        options = self.options + (f"--gpu-architecture={arch}",)
        headers = cuda_include_dir(version[0])
        added = (f"-I{headers}",) if headers else ()
        options += added
        # declares cudaGraphSetConditional & co. when the source calls them (device_api)
        source = with_device_api(self.source, self.name, options)
        entry = cached_compile(source, self.name, options, version, self.name_expressions, added)
        return Module(entry.cubin, self.source, name=self.name, arch=arch, options=options,
                      ptx=entry.ptx, lowered=entry.lowered, program=self)


class Module:
    """Device code: an image (CUBIN, PTX or fatbin), the kernels it holds and their signatures.

    The kernel list and the parameter sizes come from the compiled code (PTX ``.entry``
    lines, a CUBIN's parameter records, the readable members of a fatbin); the source,
    when there is one, gives parameter names and pointer-or-integer intent where it
    agrees with them. The image is loaded with ``cudaLibraryLoadData`` at first use
    (:attr:`handle`) and unloaded with ``cudaLibraryUnload`` when the module and all its
    kernels are gone.

    Parameters
    ----------
    cubin : bytes
        The image: CUBIN, PTX text or fatbin (told apart by their first bytes).

    Attributes
    ----------
    kind : str
        ``"cubin"``, ``"ptx"`` or ``"fatbin"``.
    entries : dict
        Compiled kernel name (mangled for non-``extern "C"`` kernels) -> its
        :class:`~pycudagraph.compile.ptx.CompiledParam` tuple; empty when unknown.
    image_note : str
        What could not be read from the image here (compressed fatbin members), or "".
    lowered : dict
        C++ name expression -> mangled name, for those looked up so far.
    signatures : dict
        What the source parse read, by kernel name.
    ptx : str
        The PTX NVRTC made on the way to the CUBIN ("" when not known): kept so a saved
        graph can carry it (``Graph.save``) for GPUs the CUBIN does not fit.
    """

    def __init__(self, cubin: bytes, source: str = "", name: str = "kernel.cu",
                 arch: str = "", options: tuple = (), ptx: str = "", lowered=None,
                 program: Program | None = None):
        if not isinstance(cubin, (bytes, bytearray, memoryview)):
            raise ArgumentError(f"Module: cubin must be bytes (a CUBIN, PTX or fatbin image), "
                                f"got {short_repr(cubin)} ({type(cubin).__name__})")
        for what, value in (("source", source), ("name", name), ("arch", arch), ("ptx", ptx)):
            if value is not None or what == "name":  # None: not known (as "")
                str_arg(value, f"Module: {what}")
        options = seq_arg(options, "Module: options")
        image = bytes(cubin)
        try:
            self.kind = image_kind(image)
            entries, note = (ptx_entries(ptx), "") if ptx else image_entries(image, self.kind)
        except ValueError as exc:
            raise ArgumentError(f"Module {name}: {exc}") from None
        self.cubin = ptx_image(image) if self.kind == "ptx" else image  # the image, whatever its kind
        self.ptx = ptx or (self.cubin[:-1].decode(errors="replace") if self.kind == "ptx" else "")
        self.source = source
        self.name = name
        self.arch = arch or image_arch(self.cubin, self.kind)
        self.options = tuple(options)
        self.program = program
        self.lowered: dict[str, str] = dict(lowered or {})
        self._candidates = kernel_candidates(source) if source else {}
        self._templates = None
        self.signatures: dict[str, KernelSignature] = {n: c[-1] for n, c in self._candidates.items()}
        self.entries: dict[str, tuple[CompiledParam, ...]] = entries
        self.image_note = note
        advice = ("compile with arch=None for the current device" if program is not None
                  else "build it for the current device's architecture")
        self._library = Library(self.cubin, name, self.arch, advice)
        self._kernels: dict[tuple, Kernel] = {}
        self._instances: dict[str, Module] = {}  # name expressions compiled in another module
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path, options=(), arch: str | None = None) -> "Module":
        """A module from a file: ``.cu`` source is compiled, ``.ptx`` / ``.cubin`` /
        ``.fatbin`` images are read as they are. A bare name is looked up in the
        package's ``kernels/``.

        The file's path is the program name, so quoted includes resolve next to it.
        Source compiles as :meth:`Program.compile` does (``nvrtcCompileProgram``, unless
        the compile cache has the result); an image is loaded at first use
        (``cudaLibraryLoadData``).
        """
        p = Path(path_arg(path, "Module.from_file: path"))
        if not p.exists():
            shipped = kernels_dir() / p.name
            if p.parent in (Path("."), Path("kernels")) and shipped.exists():
                p = shipped
            else:
                raise FileNotFoundError(f"no CUDA source or image at {path!s} (nor {p.name} in "
                                        f"{kernels_dir()})")
        if p.suffix.lower() in _IMAGE_SUFFIXES:
            if options or arch is not None:
                raise ArgumentError(f"{p}: options= and arch= apply to source; an image is "
                                    "loaded as it was built")
            try:
                data, _ = read_image(p)
            except ValueError as exc:
                raise ArgumentError(str(exc)) from None
            return cls(data, name=str(p))
        return Program(read_source(p), name=str(p), options=options).compile(arch)

    @classmethod
    def from_ptx(cls, text: str, name: str = "module.ptx") -> "Module":
        """A module from PTX text; the driver compiles it for the device when it is
        loaded (``cudaLibraryLoadData``). The PTX ISA version must be one the driver knows."""
        if not isinstance(text, (str, bytes)):
            raise ArgumentError(f"from_ptx takes PTX text (str), got {type(text).__name__}")
        return cls(ptx_image(text), name=name)

    @property
    def handle(self):
        """The raw ``cudaLibrary_t``, loading the image on first use (``cudaLibraryLoadData``)."""
        return self._library.handle

    def kernel_handle(self, symbol: str):
        """The ``cudaKernel_t`` of the compiled kernel ``symbol`` (``cudaLibraryGetKernel``),
        loading the image first; a device that cannot run the image gets a hint saying so."""
        return self._library.kernel(symbol)

    def kernel_names(self) -> list[str]:
        """Names of the ``extern "C"`` kernels compiled (the source's when unknown).
        No CUDA call."""
        if self.entries:
            return [n for n in self.entries if not n.startswith("_Z")]
        return [n for n, s in self.signatures.items() if s.extern_c]

    def get_kernel(self, name: str, signature: str | None = None) -> Kernel:
        """The kernel called ``name`` (``cudaLibraryGetKernel``).

        Parameters
        ----------
        name : str
            An ``extern "C"`` kernel name; a C++ name expression (``"ns::axpy<float>"``,
            ``"::scale"``) for a module compiled here (NVRTC instantiates and looks it up
            with ``nvrtcAddNameExpression`` / ``nvrtcGetLoweredName``, compiling again
            if this module does not hold that instance); or a mangled name
            (``"_ZN2ns4axpyIfEEvPT_S1_i"``), for any image.
        signature : str, optional
            Its parameter list (``"float*, float, int"``) when the source does not give
            it (an image alone, a kernel made by a macro) or to override the parsed one;
            checked against the compiled parameters by
            :attr:`Kernel.layout <pycudagraph.compile.kernel.Kernel.layout>` (no GPU needed).

        Raises
        ------
        ArgumentError
            No such compiled kernel, a C++-mangled one asked by its bare name, a name
            expression NVRTC cannot resolve, or a parameter list that cannot be read.

        Warns
        -----
        SignatureWarning
            When the source parse disagrees with the compiled kernel (the compiled
            types are used).
        """
        if not isinstance(name, str) or not name:
            raise ArgumentError(f"kernel name must be a non-empty str, got {name!r}")
        c_str_arg(name, "get_kernel: name")  # a NUL would cut the name short in cudaLibraryGetKernel
        if signature is not None:
            str_arg(signature, f"{name}: signature= (\"float* y, int n\")")
        key = (name, signature)
        kern = self._kernels.get(key)
        if kern is None:
            if is_cxx_name(name):
                owner, symbol = self._lower(name)
                if owner is not self:
                    return owner.get_kernel(name, signature)
                kern = Kernel(self, name, self._cxx_params(name, symbol, signature), symbol=symbol)
            else:
                kern = Kernel(self, name, self._params(name, signature))
            self._kernels[key] = kern
        return kern

    __getitem__ = get_kernel

    def _lower(self, expr: str) -> tuple["Module", str]:
        """(the module holding the instance, its mangled name) of a C++ name expression."""
        symbol = self.lowered.get(expr)
        if symbol is not None:
            return self, symbol
        if self.program is None:
            raise ArgumentError(
                f"{expr!r} is a C++ name: only a module compiled here from source can look one "
                f"up (nvrtcGetLoweredName); in the image {self.name} ask for the mangled name "
                f"({', '.join(self._mangled(bare_name(expr))) or 'see Module.entries'})")
        with self._lock:
            other = self._instances.get(expr)
            if other is None:
                try:
                    other = self.program.with_name_expressions((expr,)).compile(self.arch)
                except CompileError as exc:
                    first = next((ln for ln in exc.log.splitlines() if "error" in ln), exc.log)
                    raise ArgumentError(f"{self.name}: NVRTC cannot resolve the C++ name {expr!r}: "
                                        f"{first.strip()}") from exc
                self._instances[expr] = other
        symbol = other.lowered[expr]
        if symbol not in self.entries:
            return other, symbol  # an instance this module does not hold
        self.lowered[expr] = symbol
        return self, symbol

    def _mangled(self, bare: str) -> list[str]:
        return [n for n in self.entries if n.startswith("_Z") and mangled_bare_name(n) == bare]

    def _cpp_candidates(self, bare: str) -> list[KernelSignature]:
        """The source's C++ (not ``extern "C"``) kernels called ``bare``, templates too."""
        if self._templates is None:
            self._templates = template_kernels(self.source) if self.source else {}
        plain = [c for c in self._candidates.get(bare, []) if not c.extern_c]
        return plain + self._templates.get(bare, [])

    def _cxx_params(self, expr: str, symbol: str, signature: str | None):
        """Parameters of a kernel found by C++ or mangled name (None: from the loaded image)."""
        compiled = self.entries.get(symbol)
        if compiled is None and (self.entries or not self.image_note):
            self._no_such_kernel(symbol)
        if signature is not None:
            return _parse_signature(expr, signature)
        if compiled is None:
            return None  # an image not readable here: the loaded kernel's sizes (cuKernelGetParamInfo)
        bare = bare_name(expr) if is_cxx_name(expr) else mangled_bare_name(symbol)
        params, notes = cxx_params(expr, self._cpp_candidates(bare or ""), compiled,
                                   expr if is_cxx_name(expr) else None)
        for note in notes:
            warnings.warn(note, SignatureWarning, stacklevel=4)
        return params

    def _params(self, name: str, signature: str | None):
        if name.startswith("_Z"):
            return self._cxx_params(name, name, signature)
        compiled = self.entries.get(name)
        known = signature is not None or name in self.signatures
        if compiled is None and not self.entries and self.image_note and name not in self.signatures:
            # the image's kernels could not be read here: trust the name, read the sizes when loaded
            return _parse_signature(name, signature) if signature is not None else None
        if compiled is None and (self.entries or not known):
            self._no_such_kernel(name, signature)
        if signature is not None:
            return _parse_signature(name, signature)  # checked against the compiled kernel by Kernel.layout
        sig = self.signatures.get(name)
        if compiled is None:  # no compiled facts (a CUBIN we cannot read): the source alone
            if not sig.extern_c:
                self._no_such_kernel(name)
            if sig.error:
                raise ArgumentError(f"{name}: cannot read its parameters from the source: "
                                    f"{sig.error}; pass signature=")
            return sig.params
        candidates = self._candidates.get(name, [])
        if candidates and all(c.error for c in candidates):  # sizes from the compiled kernel
            params, notes = from_unreadable(name, candidates[-1], compiled)
        else:
            params, notes = reconcile(name, candidates, compiled)
        for note in notes:
            warnings.warn(note, SignatureWarning, stacklevel=4)
        return params

    def _no_such_kernel(self, name: str, signature: str | None = None):
        known = ", ".join(self.kernel_names()) or "none"
        mangled = self._mangled(name) or [n for n in self.entries
                                          if n.startswith("_Z") and f"{len(name)}{name}" in n]
        sig = self.signatures.get(name)
        if mangled or (sig is not None and not sig.extern_c):
            how = (f"by its C++ name (get_kernel('::{name}'), or '{name}<float>' for a template "
                   "instance) or " if self.program is not None else "")
            raise ArgumentError(f"kernel {name!r} is not extern \"C\": its compiled name is "
                                f"mangled ({', '.join(mangled) or 'C++'}); declare it extern \"C\" "
                                f"to get it by name, or ask for it {how}by the mangled name")
        if sig is not None:
            raise ArgumentError(f"kernel {name!r} appears in the source of {self.name} but NVRTC "
                                "did not compile it (an #if branch that is off?); compiled "
                                f"extern \"C\" kernels: {known}")
        if signature is not None or self.entries:
            raise ArgumentError(f"no kernel named {name!r} in {self.name}: the compiled image "
                                f"has none (extern \"C\" kernels: {known})")
        raise ArgumentError(f"no kernel named {name!r} in {self.name} (extern \"C\" kernels: "
                            f"{known}); give signature= for kernels not in the source")

    def __repr__(self) -> str:
        return (f"<pycudagraph.Module {self.name} {self.kind} arch={self.arch} "
                f"kernels={self.kernel_names()}>")


def _parse_signature(name: str, signature: str):
    try:
        return parse_params(signature)
    except ValueError as exc:
        raise ArgumentError(f"{name}: signature={signature!r}: {exc}") from None
