"""Generate docs/API_MAP.md: every CUDA Graph runtime function and what calls it.

The map lists the union of the graph functions of cuda-bindings 12.x and 13.x (callables
whose names start with one of :data:`PREFIXES`), each marked with the majors that have it
(:data:`ONLY_12`, :data:`ONLY_13`); what pycudagraph does with each is kept by hand in
:data:`MAP`. The document does not depend on which bindings are installed; the installed
bindings are checked against it: every graph function they have must have a row, and the
row must say their major has it. ``tests/docs/test_api_map.py`` makes the same checks (they
fail, never skip, on any 12.x or 13.x install), so the map cannot drift.

Usage::

    python tools/gen_api_map.py            # rewrite docs/API_MAP.md
    python tools/gen_api_map.py --check    # exit 1, listing differences, if it is stale
    python tools/gen_api_map.py --stdout   # print the table instead of writing it
"""

from __future__ import annotations

import argparse
import difflib
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "API_MAP.md"

#: Name prefixes of the graph, capture and user-object functions.
PREFIXES = ("cudaGraph", "cudaGraphExec", "cudaStreamBeginCapture", "cudaStreamEndCapture",
            "cudaStreamGetCaptureInfo", "cudaStreamIsCapturing",
            "cudaStreamUpdateCaptureDependencies", "cudaThreadExchangeStreamCaptureMode",
            "cudaUserObject", "cudaStreamBeginRecapture", "cudaDeviceGraphMem",
            "cudaDeviceGetGraphMem", "cudaDeviceSetGraphMem")
#: Graphics interop shares the ``cudaGraph`` prefix but is not part of the graph API.
EXCLUDE_PREFIXES = ("cudaGraphics",)

#: The bindings the availability columns were recorded from (``--check`` compares
#: the installed ones against them).
RECORDED = {12: "12.9.10", 13: "13.5.0"}
#: Graph functions cuda-bindings 12.x has and 13.x does not (the ``_v2``/``_v3`` forms
#: taking edge data, which 13.x folded into the plain names).
ONLY_12 = frozenset({
    "cudaGraphAddDependencies_v2", "cudaGraphAddNode_v2", "cudaGraphGetEdges_v2",
    "cudaGraphNodeGetDependencies_v2", "cudaGraphNodeGetDependentNodes_v2",
    "cudaGraphRemoveDependencies_v2", "cudaStreamGetCaptureInfo_v3",
    "cudaStreamUpdateCaptureDependencies_v2"})
#: Graph functions only cuda-bindings 13.x has.
ONLY_13 = frozenset({
    "cudaGraphConditionalHandleCreate_v2", "cudaGraphExecGetId", "cudaGraphGetId",
    "cudaGraphNodeGetContainingGraph", "cudaGraphNodeGetLocalId", "cudaGraphNodeGetParams",
    "cudaGraphNodeGetToolsId", "cudaStreamBeginRecaptureToGraph"})

_ADD_KERNEL = "through the driver entry point `cuGraphAddKernelNode`"
_EXT_SEM = ("ExternalSemaphore.import_fd / wrap; checked on the CPU only: no real external "
            "semaphore could be made on the GPU machine yet")
_IDS = "CUDA 13.1+ (NotSupportedError naming the missing bindings or driver before)"

#: CUDA function -> (pycudagraph method(s), comma separated, or "" when not wrapped;
#: note). A wrapped row's note is shown next to the method; a row that is not wrapped
#: reads ``not yet: <note>``.
MAP: dict[str, tuple[str, str]] = {
    # Graph objects and builders
    "cudaGraphCreate": ("Graph()", ""),
    "cudaGraphDestroy": ("Graph.close", "also run when the Graph is collected"),
    "cudaGraphClone": ("Graph.clone", ""),
    "cudaGraphNodeFindInClone": ("Graph.find", ""),
    "cudaGraphDebugDotPrint": ("Graph.debug_dot_print", ""),
    "cudaGraphAddKernelNode": ("Graph.add_kernel", _ADD_KERNEL),
    "cudaGraphAddMemcpyNode1D": ("Graph.add_memcpy", ""),
    "cudaGraphAddMemcpyNode": ("Graph.add_memcpy_3d",
                               "pitched 2D/3D copies (cudaMemcpy3DParms), sizes checked"),
    "cudaGraphAddMemsetNode": ("Graph.add_memset", ""),
    "cudaGraphAddHostNode": ("Graph.add_host", ""),
    "cudaGraphAddChildGraphNode": ("Graph.add_child_graph", ""),
    "cudaGraphAddEmptyNode": ("Graph.add_empty", ""),
    "cudaGraphAddEventRecordNode": ("Graph.add_event_record", ""),
    "cudaGraphAddEventWaitNode": ("Graph.add_event_wait", ""),
    "cudaGraphAddMemAllocNode": ("Graph.add_mem_alloc", ""),
    "cudaGraphAddMemFreeNode": ("Graph.add_mem_free", ""),
    "cudaGraphAddExternalSemaphoresSignalNode": ("Graph.add_ext_semaphore_signal", _EXT_SEM),
    "cudaGraphAddExternalSemaphoresWaitNode": ("Graph.add_ext_semaphore_wait", _EXT_SEM),
    "cudaGraphAddNode": ("Graph.add_node, Graph.add_if, Graph.add_if_else, Graph.add_while, "
                         "Graph.add_switch",
                         "add_node: any node type from a raw cudaGraphNodeParams (CUDA 12.2+)"),
    "cudaGraphDestroyNode": ("Graph.remove_node", ""),
    # Edges and introspection
    "cudaGraphAddDependencies": ("Graph.add_dependency",
                                 "port= adds edge data (programmatic, launch completion)"),
    "cudaGraphRemoveDependencies": ("Graph.remove_dependency", "port= names the edge's data"),
    "cudaGraphGetEdges": ("Graph.edges, Graph.edge_data", "edge_data: each edge's port"),
    "cudaGraphGetNodes": ("Graph.nodes", ""),
    "cudaGraphGetRootNodes": ("Graph.root_nodes", ""),
    "cudaGraphNodeGetDependencies": ("Node.dependencies, Node.dependency_ports",
                                     "dependency_ports: each edge's port"),
    "cudaGraphNodeGetDependentNodes": ("Node.dependents, Node.dependent_ports",
                                       "dependent_ports: each edge's port"),
    "cudaGraphNodeGetType": ("Graph.nodes", "picks the Node subclass; read as node.type"),
    "cudaGraphNodeGetContainingGraph": ("Node.containing_graph", _IDS),
    "cudaGraphGetId": ("Graph.id", _IDS),
    "cudaGraphNodeGetLocalId": ("Node.local_id, Graph.describe", _IDS),
    "cudaGraphNodeGetToolsId": ("Node.tools_id", _IDS),
    "cudaGraphNodeGetParams": ("Node.node_params, ConditionalNode.bodies",
                               "the raw cudaGraphNodeParams (driver 13.2+)"),
    "cudaGraphNodeSetParams": ("Node.set_node_params",
                               "from a raw cudaGraphNodeParams (CUDA 12.2+)"),
    # Per-node parameters in a graph
    "cudaGraphKernelNodeGetParams": ("CapturedKernelNode.params, CapturedKernelNode.kernel_name",
                                     "through the driver entry point "
                                     "`cuGraphKernelNodeGetParams` (captured nodes)"),
    "cudaGraphKernelNodeSetParams": ("KernelNode.set_params",
                                     "through the driver entry point "
                                     "`cuGraphKernelNodeSetParams`"),
    "cudaGraphKernelNodeGetAttribute": ("KernelNode.get_attribute, KernelNode.attributes", ""),
    "cudaGraphKernelNodeSetAttribute": ("KernelNode.set_attribute, Graph.add_kernel",
                                        "add_kernel(priority=, cluster=, cooperative=, "
                                        "access_policy=, mem_sync_domain=, device_updatable=)"),
    "cudaGraphKernelNodeCopyAttributes": ("KernelNode.copy_attributes_from",
                                          "12.x (src, dst) / 13.x (dst, src) order shimmed"),
    "cudaGraphMemcpyNodeGetParams": ("MemcpyNode.params", ""),
    "cudaGraphMemcpyNodeSetParams1D": ("MemcpyNode.set_params", ""),
    "cudaGraphMemcpyNodeSetParams": ("Graph.set_memcpy_3d", ""),
    "cudaGraphMemsetNodeGetParams": ("MemsetNode.params", ""),
    "cudaGraphMemsetNodeSetParams": ("MemsetNode.set_params", ""),
    "cudaGraphHostNodeGetParams": ("HostNode.params", ""),
    "cudaGraphHostNodeSetParams": ("HostNode.set_params", ""),
    "cudaGraphChildGraphNodeGetGraph": ("ChildGraphNode.child", ""),
    "cudaGraphEventRecordNodeGetEvent": ("EventRecordNode.event", ""),
    "cudaGraphEventRecordNodeSetEvent": ("EventRecordNode.set_params", ""),
    "cudaGraphEventWaitNodeGetEvent": ("EventWaitNode.event", ""),
    "cudaGraphEventWaitNodeSetEvent": ("EventWaitNode.set_params", ""),
    "cudaGraphMemAllocNodeGetParams": ("MemAllocNode.params", ""),
    "cudaGraphMemFreeNodeGetParams": ("MemFreeNode.params", ""),
    "cudaGraphExternalSemaphoresSignalNodeGetParams": ("ExtSemaphoreSignalNode.params", _EXT_SEM),
    "cudaGraphExternalSemaphoresSignalNodeSetParams": ("ExtSemaphoreSignalNode.set_params",
                                                       _EXT_SEM),
    "cudaGraphExternalSemaphoresWaitNodeGetParams": ("ExtSemaphoreWaitNode.params", _EXT_SEM),
    "cudaGraphExternalSemaphoresWaitNodeSetParams": ("ExtSemaphoreWaitNode.set_params", _EXT_SEM),
    # Conditional nodes
    "cudaGraphConditionalHandleCreate": ("Graph.conditional_handle", ""),
    "cudaGraphConditionalHandleCreate_v2": ("Graph.conditional_handle",
                                            "with device=: that device's execution context "
                                            "(cudaDeviceGetExecutionCtx)"),
    # Instantiate, launch and the executable graph
    "cudaGraphInstantiate": ("Graph.instantiate", "through the driver entry point "
                             "`cuGraphInstantiateWithFlags`: since CUDA 12.0 it takes the "
                             "same (graph, flags)"),
    "cudaGraphInstantiateWithFlags": ("Graph.instantiate", "through the driver entry point "
                                      "`cuGraphInstantiateWithFlags` (compiled path or ctypes), "
                                      "without upload_stream"),
    "cudaGraphInstantiateWithParams": ("Graph.instantiate", "with upload_stream=, or to say why "
                                       "the driver refused (result code, failing node)"),
    "cudaGraphUpload": ("GraphExec.upload", "also Graph.instantiate(upload_stream=...)"),
    "cudaGraphLaunch": ("GraphExec.launch",
                        "through the driver entry point `cuGraphLaunch` (ctypes); from "
                        "device code: a cudaGraphExec_t kernel argument takes a GraphExec"),
    "cudaGraphExecDestroy": ("GraphExec.close", "also run when the GraphExec is collected"),
    "cudaGraphExecUpdate": ("GraphExec.update", ""),
    "cudaGraphExecGetFlags": ("GraphExec.flags", "as the keywords of Graph.instantiate"),
    "cudaGraphExecGetId": ("GraphExec.id", _IDS),
    "cudaGraphExecKernelNodeSetParams": ("GraphExec.set_arg, GraphExec.set_params, "
                                         "GraphExec.rebind",
                                         "through the driver entry point "
                                         "`cuGraphExecKernelNodeSetParams`; captured "
                                         "nodes by index (sizes from cuFuncGetParamInfo)"),
    "cudaGraphExecMemcpyNodeSetParams1D": ("GraphExec.set_params", ""),
    "cudaGraphExecMemcpyNodeSetParams": ("GraphExec.set_memcpy_3d", ""),
    "cudaGraphExecMemsetNodeSetParams": ("GraphExec.set_params", ""),
    "cudaGraphExecHostNodeSetParams": ("GraphExec.set_params", ""),
    "cudaGraphExecChildGraphNodeSetParams": ("GraphExec.set_params", ""),
    "cudaGraphExecEventRecordNodeSetEvent": ("GraphExec.set_params", ""),
    "cudaGraphExecEventWaitNodeSetEvent": ("GraphExec.set_params", ""),
    "cudaGraphExecExternalSemaphoresSignalNodeSetParams": ("GraphExec.set_params", _EXT_SEM),
    "cudaGraphExecExternalSemaphoresWaitNodeSetParams": ("GraphExec.set_params", _EXT_SEM),
    "cudaGraphExecNodeSetParams": ("GraphExec.set_node_params",
                                   "from a raw cudaGraphNodeParams (CUDA 12.2+)"),
    "cudaGraphNodeSetEnabled": ("GraphExec.set_enabled", ""),
    "cudaGraphNodeGetEnabled": ("GraphExec.is_enabled", ""),
    # Stream capture
    "cudaStreamBeginCapture": ("capture", "on entering the with block"),
    "cudaStreamBeginCaptureToGraph": ("capture", "with graph= (CUDA 12.3+)"),
    "cudaStreamEndCapture": ("capture", "on leaving the with block, always"),
    "cudaStreamIsCapturing": ("capture_status, capture.status", ""),
    "cudaStreamGetCaptureInfo": ("capture_info, capture.info",
                                 "status, id, graph, dependencies, ports"),
    "cudaStreamUpdateCaptureDependencies": ("update_capture_dependencies, "
                                            "capture.update_dependencies",
                                            "mode='add' / 'set', ports="),
    "cudaThreadExchangeStreamCaptureMode": ("capture_mode",
                                            "a context manager restoring the previous mode"),
    # The 12.x forms with edge data (13.x folded them into the plain names)
    "cudaGraphAddDependencies_v2": ("Graph.add_dependency", "12.x with port= (edge data)"),
    "cudaGraphRemoveDependencies_v2": ("Graph.remove_dependency", "12.x with port="),
    "cudaGraphGetEdges_v2": ("Graph.edge_data", "12.x"),
    "cudaGraphAddNode_v2": ("Graph.add_node", "12.x with port= (edge data)"),
    "cudaGraphNodeGetDependencies_v2": ("Node.dependency_ports", "12.x with edge data"),
    "cudaGraphNodeGetDependentNodes_v2": ("Node.dependent_ports", "12.x with edge data"),
    "cudaStreamGetCaptureInfo_v3": ("capture_info", "12.x with edge data (ports)"),
    "cudaStreamUpdateCaptureDependencies_v2": ("update_capture_dependencies", "12.x with ports="),
    "cudaStreamBeginRecaptureToGraph": ("recapture", "CUDA 13.3+ (NotSupportedError before)"),
    # Graph memory (the device's pool for graph allocations)
    "cudaDeviceGraphMemTrim": ("graph_mem_trim", ""),
    "cudaDeviceGetGraphMemAttribute": ("graph_mem_info", "used / reserved, current / high"),
    "cudaDeviceSetGraphMemAttribute": ("graph_mem_reset_high", "resets the high watermarks "
                                                               "(zero is the only value allowed)"),
    # User objects
    "cudaUserObjectCreate": ("UserObject()",
                             "its destructor is C sem_post: no Python in CUDA's thread"),
    "cudaUserObjectRetain": ("UserObject.retain", ""),
    "cudaUserObjectRelease": ("UserObject.release, UserObject.close", ""),
    "cudaGraphRetainUserObject": ("Graph.retain_user_object", ""),
    "cudaGraphReleaseUserObject": ("Graph.release_user_object", ""),
}


#: Graph calls the driver API has and the runtime does not, and what calls them.
DRIVER_ONLY = {
    "cuGraphAddBatchMemOpNode": "Graph.add_batch_mem_op",
    "cuGraphBatchMemOpNodeGetParams": "BatchMemOpNode.params",
    "cuGraphBatchMemOpNodeSetParams": "BatchMemOpNode.set_params",
    "cuGraphExecBatchMemOpNodeSetParams": "GraphExec.set_params",
}


def is_graph_function(name: str, obj) -> bool:
    """True for the graph / capture / user-object functions (not types, enums or graphics)."""
    return (name.startswith(PREFIXES) and not name.startswith(EXCLUDE_PREFIXES)
            and callable(obj) and not isinstance(obj, type))


def graph_functions() -> list[str]:
    """The graph functions of the installed ``cuda.bindings.runtime``, sorted."""
    from cuda.bindings import runtime as rt
    return sorted(n for n in dir(rt) if is_graph_function(n, getattr(rt, n)))


def bindings_version() -> str:
    try:
        return metadata.version("cuda-bindings")
    except metadata.PackageNotFoundError:
        import cuda.bindings
        return cuda.bindings.__version__


def majors(fn: str) -> tuple[int, ...]:
    """The cuda-bindings majors whose ``runtime`` has ``fn`` (as recorded in this script)."""
    if fn in ONLY_12:
        return (12,)
    if fn in ONLY_13:
        return (13,)
    return (12, 13)


def listed() -> list[str]:
    """Every function the map lists: the union of the 12.x and 13.x graph functions."""
    return sorted(MAP)


def _row(fn: str) -> tuple[str, bool]:
    methods, note = MAP[fn]
    where = ", ".join(f"{m}.x" for m in majors(fn))
    if not methods:
        return f"| `{fn}` | — | {where} | not yet: {note} |", False
    names = ", ".join(f"`{m.strip()}`" for m in methods.split(","))
    cell = f"{names}; {note}" if note else names
    return f"| `{fn}` | {cell} | {where} | wrapped |", True


def render() -> str:
    """The document text (from :data:`MAP` alone: the same whichever bindings are installed)."""
    functions = listed()
    rows, wrapped = [], 0
    for fn in functions:
        row, ok = _row(fn)
        rows.append(row)
        wrapped += ok
    n12 = sum(12 in majors(f) for f in functions)
    n13 = sum(13 in majors(f) for f in functions)
    head = [
        "# CUDA Graph API map",
        "",
        "Every graph, stream-capture, graph-memory and user-object function of",
        "`cuda.bindings.runtime` 12.x and 13.x, and the pycudagraph method that calls it.",
        "",
        "Generated by `python tools/gen_api_map.py` (availability recorded from cuda-bindings "
        + " and ".join(RECORDED[m] for m in sorted(RECORDED)) + "); do not edit",
        "by hand: change `MAP` in that script and regenerate (`--check` reports a stale map).",
        "`tests/docs/test_api_map.py` fails when the installed cuda-bindings (any 12.x or 13.x) has",
        "a graph function with no row, or one whose row says its major lacks it; it checks",
        "that each method marked `wrapped` exists and names the call (or its driver twin",
        "`cuXxx`) in its source or in the `_cuda.versions` shim it calls.",
        "",
        "The functions are the callables (not types or enums) whose names start with",
        ", ".join(f"`{p}`" for p in PREFIXES) + ";",
        "`cudaGraphics*` (graphics interop) is not part of the graph API and is left out.",
        "The `bindings` column says which cuda-bindings majors have the function (12.x has",
        "`_v2`/`_v3` forms taking edge data that 13.x folded into the plain names).",
        "Where the package calls the driver entry point instead (hot paths, through ctypes",
        "or `cuda.bindings.driver`), the row names it; runtime and driver handles are the",
        "same objects underneath.",
        "",
        f"Functions: {len(functions)} (12.x: {n12}, 13.x: {n13}); wrapped: {wrapped}; "
        f"not yet: {len(functions) - wrapped}.",
        "",
        "| CUDA function | pycudagraph | bindings | status |",
        "|---|---|---|---|",
    ]
    tail = ["", "Driver-only graph calls (no runtime twin; not counted above):", ""]
    tail += [f"- `{fn}`: `{where}`" for fn, where in DRIVER_ONLY.items()]
    return "\n".join(head + rows + tail) + "\n"


def installed_problems(functions: list[str], major: int) -> list[str]:
    """What the installed bindings (graph ``functions`` of cuda-bindings ``major``.x)
    contradict in the map: a function with no row, or a row saying ``major`` lacks it."""
    problems = []
    for fn in functions:
        if fn not in MAP:
            problems.append(f"{fn}: in the installed cuda-bindings but has no row in MAP "
                            "(add it, with ONLY_12/ONLY_13 if one major lacks it)")
        elif major not in majors(fn):
            problems.append(f"{fn}: the installed cuda-bindings {major}.x has it but the map "
                            f"says only {majors(fn)[0]}.x does (fix ONLY_12/ONLY_13)")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if docs/API_MAP.md is stale")
    mode.add_argument("--stdout", action="store_true", help="print instead of writing")
    args = parser.parse_args(argv)

    text = render()
    version = bindings_version()
    major = int(version.split(".")[0])
    problems = installed_problems(graph_functions(), major)
    if args.stdout:
        sys.stdout.write(text)
    elif not args.check:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(ROOT)} ({len(listed())} functions)")
    else:
        current = DOC.read_text() if DOC.is_file() else ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(),
                                        "docs/API_MAP.md", "generated", lineterm="", n=0)
            problems.append("docs/API_MAP.md differs from the generated map "
                            "(run python tools/gen_api_map.py):")
            problems.extend("  " + line for line in diff if not line.startswith(("---", "+++")))
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
