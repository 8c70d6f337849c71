"""Generate docs/API_MAP.md: every CUDA Graph runtime function and what calls it.

The function list comes from the installed ``cuda.bindings.runtime`` (callables whose
names start with one of :data:`PREFIXES`); what pycudagraph does with each is kept by
hand in :data:`MAP`. ``tests/test_api_map.py`` checks the written table against both
the bindings and the package, so the map cannot drift.

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
            "cudaUserObject")
#: Graphics interop shares the ``cudaGraph`` prefix but is not part of the graph API.
EXCLUDE_PREFIXES = ("cudaGraphics",)

_ADD_KERNEL = "through the driver entry point `cuGraphAddKernelNode`"
_EXT_SEM = "external semaphores: no Python-side semaphore objects yet"
_GENERIC = "generic cudaGraphNodeParams form: the typed per-node calls are used"
_COPY3D = "2D/3D copies (cudaMemcpy3DParms): only 1D copy nodes are built so far"
_IDS = "graph / node IDs (CUDA 12.x/13.x introspection) not exposed yet"
_USER_OBJ = ("user objects: lifetimes are held by Python references "
             "(graph and exec keepalive) instead")
_INST = "Graph.instantiate calls cudaGraphInstantiateWithParams, which supersedes it"

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
    "cudaGraphAddMemcpyNode": ("", _COPY3D),
    "cudaGraphAddMemsetNode": ("Graph.add_memset", ""),
    "cudaGraphAddHostNode": ("Graph.add_host", ""),
    "cudaGraphAddChildGraphNode": ("Graph.add_child_graph", ""),
    "cudaGraphAddEmptyNode": ("Graph.add_empty", ""),
    "cudaGraphAddEventRecordNode": ("Graph.add_event_record", ""),
    "cudaGraphAddEventWaitNode": ("Graph.add_event_wait", ""),
    "cudaGraphAddMemAllocNode": ("Graph.add_mem_alloc", ""),
    "cudaGraphAddMemFreeNode": ("Graph.add_mem_free", ""),
    "cudaGraphAddExternalSemaphoresSignalNode": ("", _EXT_SEM),
    "cudaGraphAddExternalSemaphoresWaitNode": ("", _EXT_SEM),
    "cudaGraphAddNode": ("Graph.add_if, Graph.add_if_else, Graph.add_while, Graph.add_switch",
                         "conditional nodes; other node types use their typed add calls"),
    "cudaGraphDestroyNode": ("Graph.remove_node", ""),
    # Edges and introspection
    "cudaGraphAddDependencies": ("Graph.add_dependency",
                                 "port= adds edge data (programmatic, launch completion)"),
    "cudaGraphRemoveDependencies": ("Graph.remove_dependency", "port= names the edge's data"),
    "cudaGraphGetEdges": ("Graph.edges, Graph.edge_data", "edge_data: each edge's port"),
    "cudaGraphGetNodes": ("Graph.nodes", ""),
    "cudaGraphGetRootNodes": ("Graph.root_nodes", ""),
    "cudaGraphNodeGetDependencies": ("Node.dependencies", ""),
    "cudaGraphNodeGetDependentNodes": ("Node.dependents", ""),
    "cudaGraphNodeGetType": ("Graph.nodes", "picks the Node subclass; read as node.type"),
    "cudaGraphNodeGetContainingGraph": ("", "Node.graph is kept on the Python side"),
    "cudaGraphGetId": ("", _IDS),
    "cudaGraphNodeGetLocalId": ("", _IDS),
    "cudaGraphNodeGetToolsId": ("", _IDS),
    "cudaGraphNodeGetParams": ("ConditionalNode.bodies",
                               "reads back conditional nodes not built here (driver 13.2+)"),
    "cudaGraphNodeSetParams": ("", _GENERIC),
    # Per-node parameters in a graph
    "cudaGraphKernelNodeGetParams": ("KernelNode.params, KernelNode.kernel_name",
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
    "cudaGraphMemcpyNodeSetParams": ("", _COPY3D),
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
    "cudaGraphExternalSemaphoresSignalNodeGetParams": ("", _EXT_SEM),
    "cudaGraphExternalSemaphoresSignalNodeSetParams": ("", _EXT_SEM),
    "cudaGraphExternalSemaphoresWaitNodeGetParams": ("", _EXT_SEM),
    "cudaGraphExternalSemaphoresWaitNodeSetParams": ("", _EXT_SEM),
    # Conditional nodes
    "cudaGraphConditionalHandleCreate": ("Graph.conditional_handle", ""),
    "cudaGraphConditionalHandleCreate_v2": ("", "the form naming a context: "
                                                "conditional_handle uses the current one"),
    # Instantiate, launch and the executable graph
    "cudaGraphInstantiate": ("", _INST),
    "cudaGraphInstantiateWithFlags": ("", _INST),
    "cudaGraphInstantiateWithParams": ("Graph.instantiate", ""),
    "cudaGraphUpload": ("GraphExec.upload", "also Graph.instantiate(upload_stream=...)"),
    "cudaGraphLaunch": ("GraphExec.launch",
                        "through the driver entry point `cuGraphLaunch` (ctypes); from "
                        "device code: a cudaGraphExec_t kernel argument takes a GraphExec"),
    "cudaGraphExecDestroy": ("GraphExec.close", "also run when the GraphExec is collected"),
    "cudaGraphExecUpdate": ("GraphExec.update", ""),
    "cudaGraphExecGetFlags": ("", "GraphExec does not report its instantiate flags yet"),
    "cudaGraphExecGetId": ("", _IDS),
    "cudaGraphExecKernelNodeSetParams": ("GraphExec.set_arg, GraphExec.set_params",
                                         "through the driver entry point "
                                         "`cuGraphExecKernelNodeSetParams`"),
    "cudaGraphExecMemcpyNodeSetParams1D": ("GraphExec.set_params", ""),
    "cudaGraphExecMemcpyNodeSetParams": ("", _COPY3D),
    "cudaGraphExecMemsetNodeSetParams": ("GraphExec.set_params", ""),
    "cudaGraphExecHostNodeSetParams": ("GraphExec.set_params", ""),
    "cudaGraphExecChildGraphNodeSetParams": ("GraphExec.set_params", ""),
    "cudaGraphExecEventRecordNodeSetEvent": ("GraphExec.set_params", ""),
    "cudaGraphExecEventWaitNodeSetEvent": ("GraphExec.set_params", ""),
    "cudaGraphExecExternalSemaphoresSignalNodeSetParams": ("", _EXT_SEM),
    "cudaGraphExecExternalSemaphoresWaitNodeSetParams": ("", _EXT_SEM),
    "cudaGraphExecNodeSetParams": ("", _GENERIC),
    "cudaGraphNodeSetEnabled": ("GraphExec.set_enabled", ""),
    "cudaGraphNodeGetEnabled": ("GraphExec.is_enabled", ""),
    # Stream capture
    "cudaStreamBeginCapture": ("capture", "on entering the with block"),
    "cudaStreamBeginCaptureToGraph": ("capture", "with graph= (CUDA 12.3+)"),
    "cudaStreamEndCapture": ("capture", "on leaving the with block, always"),
    "cudaStreamIsCapturing": ("capture_status, capture.status", ""),
    "cudaStreamGetCaptureInfo": ("", "no public method reports capture info yet "
                                     "(capture_status uses cudaStreamIsCapturing)"),
    "cudaStreamUpdateCaptureDependencies": ("", "editing a capture's dependency set "
                                                "is not exposed yet"),
    "cudaThreadExchangeStreamCaptureMode": ("", "the mode is chosen per capture; "
                                                "per-thread exchange not exposed yet"),
    # User objects
    "cudaUserObjectCreate": ("", _USER_OBJ),
    "cudaUserObjectRetain": ("", _USER_OBJ),
    "cudaUserObjectRelease": ("", _USER_OBJ),
    "cudaGraphRetainUserObject": ("", _USER_OBJ),
    "cudaGraphReleaseUserObject": ("", _USER_OBJ),
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


def _row(fn: str) -> tuple[str, bool]:
    methods, note = MAP[fn]
    if not methods:
        return f"| `{fn}` | — | not yet: {note} |", False
    names = ", ".join(f"`{m.strip()}`" for m in methods.split(","))
    cell = f"{names}; {note}" if note else names
    return f"| `{fn}` | {cell} | wrapped |", True


def render(functions: list[str], version: str) -> tuple[str, list[str]]:
    """The document text, and the functions that have no entry in :data:`MAP`."""
    missing = [f for f in functions if f not in MAP]
    rows, wrapped = [], 0
    for fn in functions:
        if fn in MAP:
            row, ok = _row(fn)
        else:
            row, ok = f"| `{fn}` | — | not yet: not reviewed (add it to tools/gen_api_map.py) |", False
        rows.append(row)
        wrapped += ok
    head = [
        "# CUDA Graph API map",
        "",
        "Every graph, stream-capture and user-object function of `cuda.bindings.runtime`,",
        "and the pycudagraph method that calls it.",
        "",
        f"Generated from cuda-bindings {version} by `python tools/gen_api_map.py`; do not edit",
        "by hand: change `MAP` in that script and regenerate (`--check` reports a stale map).",
        "`tests/test_api_map.py` checks that every function has exactly one row, that every",
        "row names a real function, and that each method marked `wrapped` exists and names",
        "the call (or its driver twin `cuXxx`) in its source.",
        "",
        "The functions are the callables (not types or enums) whose names start with",
        ", ".join(f"`{p}`" for p in PREFIXES) + ";",
        "`cudaGraphics*` (graphics interop) is not part of the graph API and is left out.",
        "Where the package calls the driver entry point instead (hot paths, through ctypes",
        "or `cuda.bindings.driver`), the row names it; runtime and driver handles are the",
        "same objects underneath.",
        "",
        f"Functions: {len(functions)}; wrapped: {wrapped}; not yet: {len(functions) - wrapped}.",
        "",
        "| CUDA function | pycudagraph | status |",
        "|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n", missing


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if docs/API_MAP.md is stale")
    mode.add_argument("--stdout", action="store_true", help="print instead of writing")
    args = parser.parse_args(argv)

    functions = graph_functions()
    text, missing = render(functions, bindings_version())
    unknown = sorted(set(MAP) - set(functions))
    for fn in unknown:
        print(f"note: {fn} is in MAP but not in the installed cuda-bindings "
              f"{bindings_version()}", file=sys.stderr)

    if args.stdout:
        sys.stdout.write(text)
        return 0
    if not args.check:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(ROOT)} ({len(functions)} functions)")
        for fn in missing:
            print(f"warning: {fn} has no entry in MAP", file=sys.stderr)
        return 1 if missing else 0

    problems = [f"{fn}: in cuda.bindings.runtime but not in MAP" for fn in missing]
    current = DOC.read_text() if DOC.is_file() else ""
    if current != text:
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(),
                                    "docs/API_MAP.md", "generated", lineterm="", n=0)
        problems.append("docs/API_MAP.md differs from the generated map "
                        "(run python tools/gen_api_map.py):")
        problems.extend("  " + line for line in diff if not line.startswith(("---", "+++")))
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
