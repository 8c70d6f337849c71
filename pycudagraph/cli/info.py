"""What this machine offers pycudagraph: versions, devices and graph features.

:func:`collect` gathers it as a dict, :func:`report` as text (``python -m pycudagraph
info`` prints it). Graph features are judged from the CUDA version the driver supports
(``cudaDriverGetVersion``, 1000*major + 10*minor), the same number
:func:`pycudagraph._cuda.require` checks before a version-gated call.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import NamedTuple

import numpy

from .. import _cuda
from .._cuda import call, no_gpu, rt
from ..compile import cache as compile_cache
from ..compile.headers import cuda_include_dir
from ..errors import CudaError, CudaNotAvailableError

__all__ = ["Feature", "FEATURES", "collect", "report", "hot_path"]


class Feature(NamedTuple):
    """One graph feature: its name, the CUDA version it needs, and whether it is usable."""

    feature: str
    required: str
    supported: bool


#: (feature, CUDA version as 1000*major + 10*minor) judged against the driver's version.
FEATURES: tuple[tuple[str, int], ...] = (
    ("graph memory nodes (cudaGraphAddMemAllocNode / MemFreeNode)", 11040),
    ("per-node enable / disable in an exec (cudaGraphNodeSetEnabled)", 11060),
    ("device graph launch (cudaGraphInstantiateFlagDeviceLaunch)", 12000),
    ("generic exec node update (cudaGraphExecNodeSetParams)", 12020),
    ("conditional nodes: if / while (cudaGraphConditionalHandleCreate)", 12030),
    ("stream capture into an existing graph (cudaStreamBeginCaptureToGraph)", 12030),
    ("edge data / programmatic dependent launch edges (cudaGraphEdgeData)", 12030),
    ("conditional nodes: if-else and switch", 12080),
)

#: Names the installed cuda-bindings must export for a feature to be callable at all.
_BINDINGS_FEATURES: tuple[tuple[str, int, str], ...] = (
    ("cudaGraphConditionalHandleCreate in the installed cuda-bindings", 12030,
     "cudaGraphConditionalHandleCreate"),
)


def _version_text(v: int) -> str:
    return _cuda.format_version(v)


def _bindings_version() -> str:
    """The full cuda-bindings version (from package metadata; ``BINDINGS_VERSION`` otherwise)."""
    try:
        return metadata.version("cuda-bindings")
    except metadata.PackageNotFoundError:
        return ".".join(str(x) for x in _cuda.BINDINGS_VERSION)


def _text(value) -> str:
    if isinstance(value, bytes):
        value = value.split(b"\0", 1)[0].decode(errors="replace")
    return str(value).strip()


def _attribute(attr: str, dev: int):
    """``cudaDeviceGetAttribute`` for one attribute, or None when it cannot be read."""
    enum = getattr(rt.cudaDeviceAttr, attr, None)
    if enum is None:
        return None
    err, value = rt.cudaDeviceGetAttribute(enum, dev)
    if err:
        rt.cudaGetLastError()
        return None
    return value


def _device(dev: int) -> dict:
    """Name, compute capability, memory and SM count of one device.

    Calls ``cudaGetDeviceProperties``; the fields are read with ``getattr`` because the
    property struct changed between cuda-bindings 12 and 13, and a field that is
    missing is asked for with ``cudaDeviceGetAttribute``.
    """
    props = call(rt.cudaGetDeviceProperties, dev)
    major = getattr(props, "major", None)
    minor = getattr(props, "minor", None)
    if not major:
        major = _attribute("cudaDevAttrComputeCapabilityMajor", dev)
        minor = _attribute("cudaDevAttrComputeCapabilityMinor", dev)
    sms = getattr(props, "multiProcessorCount", None) or _attribute(
        "cudaDevAttrMultiProcessorCount", dev)
    return {
        "index": dev,
        "name": _text(getattr(props, "name", b"")) or f"device {dev}",
        "compute_capability": f"{major}.{minor}" if major is not None else "unknown",
        "memory_bytes": int(getattr(props, "totalGlobalMem", 0) or 0),
        "multiprocessors": int(sms or 0),
    }


def _devices() -> tuple[list[dict], str | None]:
    """Every device, or ([], why) when the driver sees none (``cudaGetDeviceCount``)."""
    try:
        count = call(rt.cudaGetDeviceCount)
    except CudaError as exc:
        return [], f"{exc.name} ({exc.message})"
    return [_device(d) for d in range(count)], None


def _nvrtc_version() -> str:
    try:
        major, minor = _cuda.nvrtc_version()
    except Exception as exc:  # the NVRTC library may be missing; the rest still stands
        return f"unavailable ({exc})"
    return f"{major}.{minor}"


def _features(driver: int) -> list[Feature]:
    out = [Feature(name, _version_text(v), driver >= v) for name, v in FEATURES]
    for name, v, attr in _BINDINGS_FEATURES:
        out.append(Feature(name, _version_text(v), hasattr(rt, attr)))
    return out


def _nvrtc_library() -> str:
    """Where the NVRTC library cuda-bindings loaded lives (``cuda.pathfinder``), or why not."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        return str(load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception as exc:  # noqa: BLE001 - an older cuda.pathfinder, or no NVRTC
        return f"not found ({type(exc).__name__})"


def _driver() -> tuple[int, str | None]:
    """(driver's CUDA version or 0, None or what is missing) (``cudaDriverGetVersion``)."""
    try:
        return _cuda.driver_version(), None
    except CudaNotAvailableError:
        return 0, no_gpu.missing("cudaErrorInsufficientDriver", "no NVIDIA driver was found")


def collect() -> dict:
    """Versions, devices and supported graph features of this machine, as a dict.

    Keys: ``pycudagraph``, ``python``, ``numpy``, ``cuda_bindings``, ``runtime`` and
    ``driver`` (version text; ``driver`` is ``None`` without a driver), ``runtime_int``
    and ``driver_int`` (1000*major + 10*minor, 0 without a driver), ``nvrtc`` and
    ``nvrtc_library`` (the version and the file loaded), ``headers`` (the CUDA headers'
    folder added to compiles, or None), ``cache`` (the compile cache folder, or None),
    ``devices`` (a list of dicts: ``index``, ``name``, ``compute_capability``,
    ``memory_bytes``, ``multiprocessors``), ``device_error`` (why there are none: one
    sentence, or None), ``features`` (a list of :class:`Feature`, empty without a driver)
    and ``hot_path`` (which path the hot calls take, :func:`hot_path`).

    Calls ``cudaDriverGetVersion``, ``cudaRuntimeGetVersion``, ``nvrtcVersion``,
    ``cudaGetDeviceCount`` and ``cudaGetDeviceProperties``; creates no context. Works on
    a machine with no driver or no GPU (everything but the devices and features).
    """
    from .. import __version__

    driver, why = _driver()
    runtime = _cuda.runtime_version()
    devices, device_error = _devices() if driver else ([], why)
    nvrtc = _nvrtc_version()
    major = nvrtc.split(".")[0]
    folder = compile_cache.cache_dir()
    return {
        "pycudagraph": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "cuda_bindings": _bindings_version(),
        "runtime": _version_text(runtime),
        "runtime_int": runtime,
        "driver": _version_text(driver) if driver else None,
        "driver_int": driver,
        "nvrtc": nvrtc,
        "nvrtc_library": _nvrtc_library(),
        "headers": cuda_include_dir(int(major)) if major.isdigit() else None,
        "cache": str(folder) if folder is not None else None,
        "devices": devices,
        "device_error": device_error,
        "features": _features(driver) if driver else [],
        "hot_path": hot_path(),
    }


def hot_path() -> str:
    """Which path launches, kernel-node adds and exec updates take: ``"compiled (...)"``
    (the C extension ``pycudagraph._cuda._native``) or ``"ctypes (why)"`` (not built, or
    ``PYCUDAGRAPH_NO_NATIVE=1``). Needs no GPU."""
    return _cuda.fast.native_status()


def _gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.1f} GiB"


def report(data: dict | None = None) -> str:
    """:func:`collect`'s answer (or ``data``, a dict shaped like it) as readable text."""
    d = collect() if data is None else data
    driver = d["driver"]
    lines = [
        f"pycudagraph {d['pycudagraph']}",
        f"  Python          {d['python']}",
        f"  numpy           {d['numpy']}",
        f"  cuda-bindings   {d['cuda_bindings']}",
        f"  CUDA runtime    {d['runtime']}",
        f"  CUDA driver     {f'supports CUDA {driver}' if driver else 'none'}",
        f"  NVRTC           {d['nvrtc']}"
        + (f" ({d['nvrtc_library']})" if d.get("nvrtc_library") else ""),
    ]
    if "headers" in d:
        lines.append(f"  CUDA headers    {d['headers'] or 'not found (cuda_fp16.h includes fail)'}")
    if "cache" in d:
        lines.append(f"  Compile cache   {d['cache'] or 'off'}")
    lines += [f"  Hot path        {d.get('hot_path') or hot_path()}", ""]
    devices = d["devices"]
    if devices:
        lines.append(f"Devices ({len(devices)}):")
        for dev in devices:
            lines.append(f"  [{dev['index']}] {dev['name']}: compute capability "
                         f"{dev['compute_capability']}, {_gib(dev['memory_bytes'])}, "
                         f"{dev['multiprocessors']} SMs")
    else:
        lines.append(f"Devices: none ({d.get('device_error') or 'the driver reports no device'})")
    if d["features"]:
        lines.append("")
        lines.append(f"Graph features with this driver (CUDA {driver}):")
        width = max(len(f.feature) for f in d["features"])
        for f in d["features"]:
            mark = "yes" if f.supported else "no "
            lines.append(f"  [{mark}] {f.feature:<{width}}  needs CUDA {f.required}")
    return "\n".join(lines)
