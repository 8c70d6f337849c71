"""The child process that runs :func:`~pycudagraph.find_fault`'s trials.

Run as ``python -m pycudagraph.debug.child FD``: it reads one JSON command a line on
standard input and answers one JSON line on the file descriptor ``FD`` (its standard
output and error go to a log the caller shows when something goes wrong):

``{"op": "setup", "device", "regions", "events", "snapshot", "resolve", "path"}``
    Make the device current, put the caller's memory in place (below), read the snapshot,
    make one event per event slot, import the resolver. Answers ``{"ok": true,
    "same_addresses": bool}`` or ``{"setup_error": text}``.
``{"op": "trial", "file"}``
    Load the graph file (``pcg.load`` with the slots bound and the resolver), instantiate
    it, write the snapshot back, launch, synchronize. Answers ``{"ok": true, "seconds"}``,
    ``{"fault": text, "name", "api"}`` (a CUDA error while it ran; the process then
    exits, its context being lost) or ``{"setup_error": text}`` (the file could not be
    loaded or instantiated: not a fault of the graph).

Where the memory goes: each device region is mapped at the address it has in the caller
when that address is free here (``cuMemAddressReserve`` with the caller's address as the
requested address, ``cuMemCreate``, ``cuMemMap``, ``cuMemSetAccess``), which it is in a
fresh process that maps nothing before. Then every address means what it meant in the
caller, also those no relocation reaches: a pointer kept in device memory, an address
inside a TMA descriptor of a library kernel. Where the address is taken, the region goes
elsewhere and the graph file's slots relocate the addresses it can see. Pinned host
regions are always new pinned buffers (relocated).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

__all__ = ["main", "place_regions", "import_ref"]


def import_ref(ref):
    """The object named by ``[module, qualified name]`` (importing the module)."""
    module, qualname = ref
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _spans(regions: list, granularity: int) -> list:
    """``[lo, hi, [regions]]``: the regions' pages (``granularity`` bytes), joined where
    they touch."""
    spans: list = []
    for r in sorted(regions, key=lambda r: r.start):
        lo = r.start // granularity * granularity
        hi = -(-r.end // granularity) * granularity
        if spans and lo <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], hi)
            spans[-1][2].append(r)
        else:
            spans.append([lo, hi, [r]])
    return spans


def _map_same(regions: list, device: int) -> tuple:
    """``({name: address}, same)``: device regions mapped at the caller's addresses where
    free (``cuMemGetAllocationGranularity``, ``cuMemAddressReserve``, ``cuMemCreate``,
    ``cuMemMap``, ``cuMemSetAccess``). The mappings live as long as the process."""
    from pycudagraph._cuda import call, dr
    prop = dr.CUmemAllocationProp()
    prop.type = dr.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = dr.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    gran = int(call(dr.cuMemGetAllocationGranularity, prop,
                    dr.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
    access = dr.CUmemAccessDesc()
    access.location.type = dr.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device
    access.flags = dr.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    out, same = {}, True
    for lo, hi, members in _spans(regions, gran):
        size = hi - lo
        ptr = int(call(dr.cuMemAddressReserve, size, gran, lo, 0))
        handle = call(dr.cuMemCreate, size, prop, 0)
        call(dr.cuMemMap, ptr, size, 0, handle, 0)
        call(dr.cuMemSetAccess, ptr, size, [access], 1)
        same = same and ptr == lo
        for r in members:
            out[r.name] = ptr + (r.start - lo)
    return out, same


def place_regions(regions: list, device: int) -> tuple:
    """``(addresses, bind, same)``: where each region lives here (one address per region,
    in order), the objects a graph file's slots are bound to, and whether every device
    region kept the caller's address (see the module docstring; new ``DeviceBuffer`` s
    when the driver cannot map memory at a chosen address, ``PinnedBuffer`` s for host
    regions)."""
    import pycudagraph as pcg
    from pycudagraph.errors import CudaError
    from pycudagraph.files.slots import DeviceView
    dev = [r for r in regions if r.kind == "device"]
    bind: dict = {}
    try:
        where, same = _map_same(dev, device) if dev else ({}, True)
        for r in dev:
            bind[r.name] = DeviceView(None, where[r.name], r.size)
    except (CudaError, TypeError, ValueError):  # no mapping at chosen addresses here
        same = False
        for r in dev:
            bind[r.name] = pcg.DeviceBuffer(r.size)
    for r in regions:
        if r.kind != "device":
            bind[r.name] = pcg.PinnedBuffer(r.size)
    return [pcg.device_pointer(bind[r.name]) if r.kind == "device" else bind[r.name].ptr
            for r in regions], bind, same


class _Child:
    """What the child holds between commands."""

    def __init__(self):
        self.snapshot = None
        self.addresses: list = []
        self.bind: dict = {}
        self.resolve = None
        self.stream = None

    def setup(self, msg: dict) -> dict:
        from pycudagraph._cuda import set_device
        from pycudagraph.debug.memory import Region, Snapshot
        import pycudagraph as pcg
        set_device(msg["device"])
        regions = [Region(*r) for r in msg["regions"]]
        self.addresses, self.bind, same = place_regions(regions, msg["device"])
        self.snapshot = Snapshot.load(regions, msg["snapshot"])
        for name in msg["events"]:
            self.bind[name] = pcg.Event()
        self.stream = pcg.Stream()
        for p in reversed(msg["path"]):  # after the memory is placed: a resolver module
            if p not in sys.path:       # may allocate as it imports
                sys.path.insert(0, p)
        if msg["resolve"] is not None:
            self.resolve = import_ref(msg["resolve"])
        return {"ok": True, "same_addresses": same}

    def trial(self, msg: dict) -> dict:
        import pycudagraph as pcg
        from pycudagraph._cuda import call, rt
        from pycudagraph.errors import CudaError, PyCudaGraphError
        try:
            g = pcg.load(msg["file"], bind=self.bind, resolve=self.resolve)
            exe = g.instantiate(auto_free_on_launch=True)
            self.snapshot.restore(self.addresses)
        except PyCudaGraphError as exc:
            return {"setup_error": f"{type(exc).__name__}: {exc}"}
        t0 = time.perf_counter()
        try:
            exe.launch(self.stream)
            self.stream.synchronize()
            call(rt.cudaDeviceSynchronize)
        except CudaError as exc:
            return {"fault": str(exc), "name": exc.name, "api": exc.api}
        return {"ok": True, "seconds": time.perf_counter() - t0}


def main(argv=None) -> None:
    """Serve commands until ``quit``, end of input, a fault or a setup error; then leave
    at once (``os._exit``: a lost context is not torn down)."""
    argv = sys.argv if argv is None else argv
    out = os.fdopen(int(argv[1]), "w", buffering=1)
    child, code = _Child(), 0
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("op") not in ("setup", "trial"):
            break
        try:
            reply = getattr(child, msg["op"])(msg)
        except Exception as exc:  # noqa: BLE001 - every failure is answered, never lost
            reply = {"setup_error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if "ok" not in reply:
            code = 3 if "fault" in reply else 4
            break
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
