"""Triton compiled kernels as pycudagraph kernels (read from the object; Triton not imported).

A Triton ``CompiledKernel`` (``triton.compile(src, target=...)``, or what a launch
``fn[grid](...)`` returns) carries everything a launch needs:

* ``asm["cubin"]``: the CUBIN, loaded here as a library (``cudaLibraryLoadData``), so the
  kernel runs on any device of its architecture, with no Triton driver involved;
  ``asm["ptx"]``: its ``.entry`` line, to check the parameters against without a GPU;
* ``src.signature``: parameter name -> Triton type (``"*fp32"``, ``"i32"``,
  ``"constexpr"``). ``constexpr`` parameters (and ints Triton specialised to 1) are baked
  into the code: they are not kernel parameters and the user does not pass them;
  ``src.attrs``: the ones Triton assumed divisible by 16 (``tt.divisibility``), which
  every value given here must stay;
* ``metadata``: ``num_warps`` (block = ``32 * num_warps`` threads), ``shared`` (dynamic
  shared memory every launch needs), ``num_ctas``, ``global_scratch_size``,
  ``profile_scratch_size``, ``launch_cooperative_grid``.

Recent Triton versions append hidden pointer parameters after the user's: a global
scratch pointer and (Triton 3.6) a profile scratch pointer, one for each of the metadata
fields ``global_scratch_size`` and ``profile_scratch_size``, which is how they are counted
here (and checked against the PTX). Triton's own launcher passes a null pointer when the
kernel needs no scratch (``*_scratch_size == 0``); so does the packing here (they are
:attr:`Layout.hidden <pycudagraph.compile.args.Layout.hidden>` zeros).
A kernel that needs scratch memory, a cluster launch (``num_ctas > 1``) or a cooperative
grid is refused with a message saying so.
"""

from __future__ import annotations

from ..errors import ArgumentError
from .converters import pointer_value
from .images import image_arch
from .library import Library
from .origin import Origin, merge_signature
from .ptx import cubin_entries, ptx_entries
from .reconcile import check_declared
from .signature import Param, param_from_ctype

__all__ = ["is_triton_kernel", "triton_kernel"]

_SCALAR_CTYPES = {
    "i1": "bool", "u1": "bool", "i8": "int8_t", "i16": "int16_t", "i32": "int", "i64": "long long",
    "u8": "uint8_t", "u16": "uint16_t", "u32": "unsigned int", "u64": "unsigned long long",
    "fp16": "half", "bf16": "__nv_bfloat16", "fp32": "float", "f32": "float", "fp64": "double",
}
_POINTEE = {**_SCALAR_CTYPES, "i1": "bool", "fp8e4nv": "uint8_t", "fp8e5": "uint8_t",
            "fp8e4b15": "uint8_t", "fp8e4b8": "uint8_t", "fp8e5b16": "uint8_t"}


def is_triton_kernel(obj) -> bool:
    """A Triton object: its type lives in the ``triton`` package."""
    return (type(obj).__module__ or "").split(".")[0] == "triton"


def _ctype(name: str, ty: str) -> str:
    if ty.startswith("*"):
        pointee = ty[1:].lstrip("k")  # "*k..." marks a pointer to constant data
        return f"{_POINTEE.get(pointee, 'void')}*"
    if ty in _SCALAR_CTYPES:
        return _SCALAR_CTYPES[ty]
    if ty.startswith("tensordesc") or ty == "nvTmaDesc":
        raise ArgumentError(f"parameter '{name}' is a tensor descriptor ({ty}): Triton fills "
                            "it on the host per launch; Kernel.from_function does not take "
                            "kernels with tensor descriptor parameters")
    raise ArgumentError(f"parameter '{name}' has the Triton type {ty!r}, which "
                        "Kernel.from_function does not know")


def _aligned(convert, name: str):
    """A converter that also checks the value stays a multiple of 16 (``tt.divisibility``)."""
    def check(value):
        v = convert(value) if convert is not None else value
        if int(v) % 16:
            raise ValueError(f"Triton compiled this kernel assuming '{name}' is a multiple of "
                             f"16 (tt.divisibility); {v:#x} is not: recompile for this value")
        return v
    return check


def _flat(signature: dict, attrs: dict):
    """(name, Triton type, divisible by 16) of each kernel parameter, tuples flattened."""
    out = []

    def walk(name, ty, path):
        if isinstance(ty, (tuple, list)):
            for j, sub in enumerate(ty):
                walk(f"{name}[{j}]", sub, path + (j,))
            return
        if ty == "constexpr":
            return
        props = attrs.get(path, ())
        out.append((name, ty, any(p[0] == "tt.divisibility" and p[1] % 16 == 0 for p in props)))

    for i, (name, ty) in enumerate(signature.items()):
        walk(str(name), ty, (i,))
    return out


def _params(kernel: str, signature: dict, attrs: dict) -> tuple[Param, ...]:
    params = []
    for i, (name, ty, div16) in enumerate(_flat(signature, attrs)):
        try:
            p = param_from_ctype(i, name, _ctype(name, ty))
        except ArgumentError as exc:
            raise ArgumentError(f"Triton kernel {kernel}: {exc}") from None
        if div16 and p.kind in ("pointer", "int"):
            conv = _aligned(pointer_value if p.kind == "pointer" else int, name)
            p = Param(p.index, p.name, p.ctype, p.kind, p.size, p.align, p.fmt, (), conv)
        params.append(p)
    return tuple(params)


def _refuse_launch(kernel: str, meta) -> None:
    """An ArgumentError for a launch the kernel node here cannot reproduce."""
    target = getattr(meta, "target", None)
    backend = getattr(target, "backend", "cuda")
    why = None
    if backend != "cuda":
        why = f"it was compiled for {backend!r}, not CUDA"
    elif getattr(meta, "num_ctas", 1) != 1:
        why = (f"it was compiled with num_ctas={meta.num_ctas} (a cluster launch); compile "
               "it with num_ctas=1")
    elif getattr(meta, "launch_cooperative_grid", False):
        why = "it needs a cooperative grid launch (launch_cooperative_grid)"
    elif getattr(meta, "global_scratch_size", 0):
        why = (f"it needs {meta.global_scratch_size} bytes of global scratch memory per "
               "program (Triton allocates it per launch)")
    elif getattr(meta, "profile_scratch_size", 0):
        why = "it was compiled with profiling instrumentation (profile scratch memory)"
    if why:
        raise ArgumentError(f"Triton kernel {kernel}: {why}; Kernel.from_function cannot make "
                            "this launch")


def triton_kernel(obj, signature: str | None) -> tuple[str, str, tuple[Param, ...], Origin]:
    """(name, symbol, params, origin) of a Triton compiled kernel. No CUDA call (the CUBIN
    is loaded at first use); the parameters are checked against its PTX here.

    Raises
    ------
    ArgumentError
        For a ``@triton.jit`` function not compiled yet, a kernel whose launch cannot be
        made here, or parameters that disagree with the compiled kernel.
    """
    meta = getattr(obj, "metadata", None)
    asm = getattr(obj, "asm", None)
    src = getattr(obj, "src", None)
    if meta is None or asm is None or src is None:
        what = type(obj).__name__
        raise ArgumentError(
            f"Kernel.from_function got a Triton {what}, not a compiled kernel: pass what "
            "triton.compile(...) returns, or what a launch fn[grid](...) returns (a "
            "CompiledKernel), which is specialised for its arguments' types")
    name = str(getattr(meta, "name", getattr(obj, "name", "triton_kernel")))
    _refuse_launch(name, meta)
    cubin = asm.get("cubin") if hasattr(asm, "get") else None
    if not cubin:
        raise ArgumentError(f"Triton kernel {name}: it has no CUBIN (asm['cubin'])")
    sig = getattr(src, "signature", None)
    if not isinstance(sig, dict):
        raise ArgumentError(f"Triton kernel {name}: its source has no signature dict")
    params = merge_signature(name, "Triton kernel", _params(name, sig, getattr(src, "attrs", {}) or {}),
                             signature)
    hidden = tuple(8 for field in ("global_scratch_size", "profile_scratch_size")
                   if hasattr(meta, field))
    ptx = asm.get("ptx")
    entries = ptx_entries(ptx) if ptx else cubin_entries(bytes(cubin))
    compiled = entries.get(name)
    if compiled is None:
        raise ArgumentError(f"Triton kernel {name}: its code has no kernel of that name "
                            f"(found: {', '.join(entries) or 'none'})")
    if len(compiled) != len(params) + len(hidden):
        raise ArgumentError(
            f"Triton kernel {name}: the compiled kernel has {len(compiled)} parameters, the "
            f"signature {len(params)} plus {len(hidden)} hidden (Triton {getattr(meta, 'triton_version', '?')}); "
            "this Triton version's calling convention is not known here")
    params = check_declared(name, params, compiled[:len(params)])
    warp = int(getattr(meta, "warp_size", 0) or getattr(getattr(meta, "target", None), "warp_size", 32))
    arch = image_arch(bytes(cubin), "cubin")
    library = Library(bytes(cubin), f"Triton kernel {name}", arch,
                      "compile it for this device (run it once here, or triton.compile with "
                      "this device's GPUTarget)")
    origin = Origin(obj, "Triton kernel", library=library, symbol=name,
                    block=(int(meta.num_warps) * warp, 1, 1), shared_mem=int(getattr(meta, "shared", 0)),
                    hidden=hidden, entries={name: compiled})
    return name, name, params, origin
