"""The device-side graph API in NVRTC programs, with no CUDA toolkit installed.

Kernels can drive graphs from the GPU: set a conditional node's value
(``cudaGraphSetConditional``), launch a graph (``cudaGraphLaunch`` on the
``cudaStreamGraphFireAndForget`` / ``cudaStreamGraphTailLaunch`` streams), change a
device-updatable kernel node (``cudaGraphKernelNodeSetParam`` & co.), and wait on a
programmatic edge (``cudaGridDependencySynchronize``).

What that needs, found on NVRTC 13.x for sm_90 and checked on a CUDA 13.0 driver:

- NVRTC knows the types (``cudaGraphConditionalHandle``, ``cudaGraphExec_t``,
  ``cudaGraphDeviceNode_t``, ``cudaStream_t``) but declares the functions only with
  ``-rdc=true``. Their definitions come from the CUDA driver when it loads the module
  (like ``vprintf``): the CUBIN keeps them as undefined symbols, even after a link with
  ``libcudadevrt.a``. So a declaration is all a whole-program (non ``-rdc``) compile needs;
  no ``-rdc``, no nvJitLink, no ``libcudadevrt.a``.
- ``cudaGridDependencySynchronize`` / ``cudaTriggerProgrammaticLaunchCompletion`` are
  one PTX instruction each (``griddepcontrol``, sm_90 and newer).

:class:`~pycudagraph.Program` prepends :data:`HEADER` to a source that uses any of these
names, unless the source includes the toolkit's runtime headers or is compiled with
``-rdc`` (then NVRTC declares them itself). :func:`header` gives the text for other
compilers. Relocatable programs linked with the device runtime: :mod:`pycudagraph.compile.link`.
"""

from __future__ import annotations

import re

__all__ = ["HEADER", "header", "uses_device_api", "with_device_api"]

HEADER = r"""// pycudagraph: device-side graph API declarations (the driver defines these at load)
#ifndef PYCUDAGRAPH_DEVICE_API
#define PYCUDAGRAPH_DEVICE_API
extern "C" {
__device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(
    cudaGraphConditionalHandle handle, unsigned int value);
__device__ __cudart_builtin__ cudaError_t CUDARTAPI cudaGraphLaunch(
    cudaGraphExec_t graphExec, cudaStream_t stream);
__device__ __cudart_builtin__ cudaError_t CUDARTAPI cudaGraphKernelNodeSetParam(
    cudaGraphDeviceNode_t node, size_t offset, const void *value, size_t size);
__device__ __cudart_builtin__ cudaError_t CUDARTAPI cudaGraphKernelNodeSetEnabled(
    cudaGraphDeviceNode_t node, bool enable);
__device__ __cudart_builtin__ cudaError_t CUDARTAPI cudaGraphKernelNodeSetGridDim(
    cudaGraphDeviceNode_t node, dim3 gridDim);
__device__ __cudart_builtin__ cudaError_t CUDARTAPI cudaGraphKernelNodeUpdatesApply(
    const cudaGraphKernelNodeUpdate *updates, size_t updateCount);
}
// the exec of the graph the calling kernel runs in (a special register)
static __device__ __forceinline__ cudaGraphExec_t cudaGetCurrentGraphExec(void) {
    unsigned long long exec;
    asm("mov.u64 %0, %%current_graph_exec;" : "=l"(exec));
    return (cudaGraphExec_t)exec;
}
// programmatic dependent launch (sm_90+): wait for the kernel upstream of a programmatic
// edge, and let the kernel downstream start
static __device__ __forceinline__ void cudaGridDependencySynchronize(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static __device__ __forceinline__ void cudaTriggerProgrammaticLaunchCompletion(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// the streams device code launches graphs into
#ifndef cudaStreamGraphTailLaunch
#define cudaStreamGraphTailLaunch ((cudaStream_t)0x0100000000000000)
#define cudaStreamGraphFireAndForget ((cudaStream_t)0x0200000000000000)
#define cudaStreamGraphFireAndForgetAsSibling ((cudaStream_t)0x0300000000000000)
#endif
#endif
"""

_NAMES = re.compile(
    r"\b(?:cudaGraphSetConditional|cudaGraphLaunch|cudaGetCurrentGraphExec"
    r"|cudaGraphKernelNode(?:SetParam|SetEnabled|SetGridDim|UpdatesApply)"
    r"|cudaGridDependencySynchronize|cudaTriggerProgrammaticLaunchCompletion"
    r"|cudaStreamGraph(?:TailLaunch|FireAndForget|FireAndForgetAsSibling))\b")
_TOOLKIT_HEADERS = re.compile(
    r'#\s*include\s*[<"](?:cuda_runtime|cuda_runtime_api|cuda_device_runtime_api)\.h[>"]')
_RDC = ("-rdc=true", "--relocatable-device-code=true", "-dc", "--device-c", "-dlto", "--dlink-time-opt")


def header() -> str:
    """The declarations as C++ text (``#include`` it, or let :class:`Program` add it)."""
    return HEADER


def uses_device_api(source: str, options=()) -> bool:
    """Whether ``source`` calls the device graph API and needs :data:`HEADER` to compile."""
    if any(o.replace(" ", "") in _RDC for o in options):
        return False  # NVRTC declares the device runtime itself in -rdc mode
    if "PYCUDAGRAPH_DEVICE_API" in source or _TOOLKIT_HEADERS.search(source):
        return False
    return _NAMES.search(source) is not None


def with_device_api(source: str, name: str, options=()) -> str:
    """``source`` with :data:`HEADER` in front when it needs it; NVRTC still reports
    ``name`` and the source's own line numbers."""
    if not uses_device_api(source, options):
        return source
    return HEADER + f'#line 1 "{name}"\n' + source
